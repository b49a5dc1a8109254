/* lua_limits.h - the budgets of one Lua rule (set from rules.yaml,
 * enforced by lua_sandbox.c). */
#ifndef SMR_LUA_LIMITS_H
#define SMR_LUA_LIMITS_H

#include <stddef.h>
#include <stdint.h>

typedef struct smr_lua_limits {
  int64_t instructions; /* per call into the script (init/invoke/finish) */
  size_t memory_bytes;  /* cap on the rule's Lua heap and report data */
  double seconds;       /* wall clock per call: the last line of defence */
} smr_lua_limits;

/* Defaults: 10 million instructions and 60 s per call, 64 MiB per rule. */
void smr_lua_limits_default(smr_lua_limits *l);

#endif
