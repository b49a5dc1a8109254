/* job_check.c - a rules.yaml checked completely before anything runs
 * (`smrules validate`, and `run -- COMMAND` before the command starts). */
#include <stdlib.h>
#include <string.h>

#include "config/params.h"
#include "host/plugin.h"
#include "host/rulekind.h"
#include "job/job.h"
#include "lua/lua_params.h"
#include "lua/lua_rule.h"

/* A rule's problem at its place in rules.yaml. */
static int positioned_error(const smr_config *cfg, const smr_rule_config *rc,
                            const smr_error *e, smr_error *out) {
  smr_error_clear(out);
  smr_error_set(out, SMR_ERR_USAGE, cfg->path ? cfg->path : "", -1,
                "line %d, column %d: %s", rc->line, rc->col, e->msg);
  return out->status;
}

/* A Lua rule: compiled, not run (running needs the trial), and its
 * -- @param declarations applied to its parameters. */
static int check_lua_rule(const smr_config *cfg, const smr_rule_config *rc,
                          smr_error *out) {
  smr_error err;
  smr_error_clear(&err);
  if (smr_lua_rule_check(rc->lua, &err) != SMR_OK)
    return positioned_error(cfg, rc, &err, out);
  smr_params params;
  const char *base = strrchr(rc->lua, '/');
  base = base ? base + 1 : rc->lua;
  const char *dot = strrchr(base, '.'); /* named lua:<stem>, as in run */
  int stem = (int)(dot && dot != base ? (size_t)(dot - base) : strlen(base));
  char *rule = smr_xasprintf("lua:%.*s", stem, base);
  int st = smr_lua_params_apply(rule, rc->lua, rc->parameters, rc->line,
                                rc->col, cfg->path, &params, &err);
  free(rule);
  smr_params_free(&params);
  if (st == SMR_OK)
    return SMR_OK;
  if (!err.file[0])
    return positioned_error(cfg, rc, &err, out);
  *out = err;
  return out->status;
}

/* A plugin rule: found or loaded, its parameters checked against its
 * table. */
static int check_plugin_rule(const smr_config *cfg, const smr_rule_config *rc,
                             smr_error *out) {
  smr_error err;
  smr_error_clear(&err);
  smr_plugin *p;
  int st = rc->plugin ? smr_plugin_load(rc->plugin, &p, &err)
                      : smr_plugin_find(rc->rule, &p, &err);
  if (st != SMR_OK)
    return positioned_error(cfg, rc, &err, out);
  void *settings = smr_xcalloc(1, p->reg->settings_size + 1);
  smr_params params;
  static const smrules_param none[] = {{.type = SMRULES_PARAM_END}};
  st = smr_params_apply(p->reg->name, p->reg->params ? p->reg->params : none,
                        rc->parameters, rc->line, rc->col, cfg->path, settings,
                        &params, &err);
  smr_params_free(&params);
  free(settings);
  smr_plugin_unload(p);
  if (st != SMR_OK)
    *out = err;
  return st;
}

int smr_job_check_config(const smr_config *cfg, bool launched, smr_error *err) {
  smr_error_clear(err);
  for (size_t i = 0; i < cfg->n_rules; i++) {
    const smr_rule_config *rc = &cfg->rules[i];
    int st = rc->lua      ? check_lua_rule(cfg, rc, err)
             : rc->python ? smr_python_rule_check(rc, cfg->path, err)
                          : check_plugin_rule(cfg, rc, err);
    if (st != SMR_OK)
      return st;
  }
  /* action settings and every rule's actions (no process is looked at) */
  smr_actions_opts o = {.validate_only = true, .launched = launched};
  smr_actions *acts = NULL;
  int st = smr_actions_new(cfg, &o, &acts, err);
  smr_actions_free(acts);
  return st;
}
