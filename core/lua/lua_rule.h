/* lua_rule.h - custom rules written in Lua 5.4, sandboxed. */
#ifndef SMR_LUA_RULE_H
#define SMR_LUA_RULE_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "config/node.h"
#include "host/rulectx.h"

typedef struct smr_lua_limits {
  int64_t instructions; /* per call into the script (init/invoke/finish) */
  size_t memory_bytes;  /* cap on the rule's Lua heap and report data */
  double seconds;       /* wall clock per call: the last line of defence */
} smr_lua_limits;

/* Defaults: 10 million instructions and 60 s per call, 64 MiB per rule. */
void smr_lua_limits_default(smr_lua_limits *l);

/* Load `script_path` into a fresh sandboxed state, set the global
 * `params` from `params` (a map node or NULL) and call the script's
 * optional init(params).  Errors (syntax, runtime in init, sandbox
 * violation, budget exceeded) are SMR_ERR_USAGE with the message and
 * traceback in err->msg and the script path in err->file. */
int smr_lua_rule_load(const char *script_path, const smr_node *params,
                      const smr_lua_limits *limits, smrules_ctx *ctx,
                      void **impl, smr_error *err);
extern const smr_rule_ops smr_lua_rule_ops;

/* Compile `script_path` without running it (`smrules validate`): a syntax
 * error, a binary chunk or an unreadable file is SMR_ERR_USAGE with the
 * message ("path:line: ...") in err->msg. */
int smr_lua_rule_check(const char *script_path, smr_error *err);

#endif
