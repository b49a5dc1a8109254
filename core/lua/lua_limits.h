/* lua_limits.h - the budgets of one Lua rule (set from rules.yaml,
 * enforced by lua_sandbox.c): a script rule's budgets (host/rulekind.h). */
#ifndef SMR_LUA_LIMITS_H
#define SMR_LUA_LIMITS_H

#include "host/rulekind.h"

typedef smr_rule_budgets smr_lua_limits;

/* Defaults: 10 million instructions and 60 s per call, 64 MiB per rule. */
void smr_lua_limits_default(smr_lua_limits *l);

#endif
