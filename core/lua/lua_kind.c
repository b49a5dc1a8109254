/* lua_kind.c - the kind of rule written in Lua (`lua:` in rules.yaml):
 * parameters checked against the script's -- @param declarations, the
 * script loaded into its sandbox (lua_rule.c). */
#include <stdlib.h>
#include <string.h>

#include "host/rulekind.h"
#include "lua/lua_params.h"
#include "lua/lua_rule.h"

static bool lua_claims(const smr_rule_config *rc) {
  return rc->lua != NULL;
}

static char *file_stem(const char *path) {
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  const char *dot = strrchr(b, '.');
  return smr_xstrndup(b, dot && dot != b ? (size_t)(dot - b) : strlen(b));
}

static int lua_prepare(smr_rule *r, const smr_rule_config *rc,
                       const smr_rule_env *env, smr_error *err) {
  char *stem = file_stem(rc->lua);
  r->type = smr_xasprintf("lua:%s", stem);
  free(stem);
  r->code = rc->lua;
  return smr_lua_params_apply(r->type, rc->lua, rc->parameters, rc->line,
                              rc->col, env->config_path, &r->params, err);
}

static int lua_start(smr_rule *r, const smr_rule_config *rc,
                     const smr_rule_env *env, smr_error *err) {
  r->ops = &smr_lua_rule_ops;
  return smr_lua_rule_load(rc->lua, rc->parameters, env->budgets, r->ctx,
                           &r->impl, err);
}

const smr_rule_kind smr_kind_lua = {
    .name = "lua",
    .claims = lua_claims,
    .prepare = lua_prepare,
    .start = lua_start,
};
