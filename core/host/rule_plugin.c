/* rule_plugin.c - the kind of rule in a shared object: SageMaker's
 * built-in rules and custom C plugins (`rule:` or `plugin:` in
 * rules.yaml).  The plugin's registration (smrules.h) behind smr_rule_ops,
 * its parameter table applied to its settings struct. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/plugin.h"
#include "host/rulehost.h"
#include "host/rulekind.h"

/* A profiler rule without a scan_interval_us parameter evaluates windows
 * of a minute, as SageMaker's do. */
#define DEFAULT_SCAN_INTERVAL_US 60000000LL

typedef struct plugin_kind {
  smr_plugin *plugin;
  void *settings;
} plugin_kind;

/* ------------------------------------------------------- the rule ops */

typedef struct plugin_impl {
  const smrules_rule *reg;
  void *state;
} plugin_impl;

static int plugin_invoke(void *impl, smrules_ctx *ctx, int64_t step) {
  plugin_impl *p = impl;
  return p->reg->invoke_at_step(ctx, p->state, step);
}

static int plugin_finish(void *impl, smrules_ctx *ctx) {
  plugin_impl *p = impl;
  return p->reg->finish ? p->reg->finish(ctx, p->state) : SMRULES_NO_TRIGGER;
}

static void plugin_destroy(void *impl) {
  plugin_impl *p = impl;
  if (p->reg->destroy && p->state)
    p->reg->destroy(p->state);
  free(p);
}

static char *plugin_save(void *impl, smrules_ctx *ctx) {
  plugin_impl *p = impl;
  return p->reg->save_state ? p->reg->save_state(ctx, p->state) : NULL;
}

static int plugin_load(void *impl, smrules_ctx *ctx, const char *text) {
  plugin_impl *p = impl;
  return p->reg->load_state ? p->reg->load_state(ctx, p->state, text) : -1;
}

static bool plugin_wants_time(const void *impl) {
  const plugin_impl *p = impl;
  return p->reg->invoke_at_time != NULL;
}

static int plugin_at_time(void *impl, smrules_ctx *ctx, double now) {
  plugin_impl *p = impl;
  return p->reg->invoke_at_time(ctx, p->state, now);
}

static const smr_rule_ops PLUGIN_OPS = {
    .kind = "plugin",
    .wants_time = plugin_wants_time,
    .invoke_at_time = plugin_at_time,
    .invoke_at_step = plugin_invoke,
    .finish = plugin_finish,
    .destroy = plugin_destroy,
    .save_state = plugin_save,
    .load_state = plugin_load,
};

/* ---------------------------------------------------------- the kind */

/* The scan_interval_us parameter from the parsed settings (by name in the
 * rule's parameter table), or the default when the rule has none. */
static int64_t scan_interval(const smrules_param *table, const void *settings) {
  for (const smrules_param *p = table; p && p->type != SMRULES_PARAM_END; p++) {
    if (strcmp(p->name, "scan_interval_us") != 0)
      continue;
    const char *f = (const char *)settings + p->offset;
    if (p->type == SMRULES_PARAM_INT)
      return *(const int64_t *)f;
    if (p->type == SMRULES_PARAM_FLOAT)
      return (int64_t) * (const double *)f;
  }
  return DEFAULT_SCAN_INTERVAL_US;
}

static bool plugin_claims(const smr_rule_config *rc) {
  return rc->rule || rc->plugin;
}

static int load(const smr_rule_config *rc, const smr_rule_env *env,
                smr_plugin **out, smr_error *err) {
  int st = rc->plugin ? smr_plugin_load(rc->plugin, out, err)
                      : smr_plugin_find(rc->rule, out, err);
  if (st == SMR_OK)
    return SMR_OK;
  if (err->msg[0] && !strstr(err->msg, "line ")) {
    char why[SMR_ERR_MSG_MAX]; /* err->msg cannot format into itself */
    snprintf(why, sizeof why, "%s", err->msg);
    smr_error_set(err, SMR_ERR_USAGE, env->config_path, -1,
                  "line %d, column %d: %s", rc->line, rc->col, why);
  }
  return SMR_ERR_USAGE;
}

static int plugin_prepare(smr_rule *r, const smr_rule_config *rc,
                          const smr_rule_env *env, smr_error *err) {
  plugin_kind *k = smr_xcalloc(1, sizeof *k);
  r->kind_state = k;
  int st = load(rc, env, &k->plugin, err);
  if (st != SMR_OK)
    return st;
  const smrules_rule *reg = k->plugin->reg;
  r->type = smr_xstrdup(reg->name);
  r->code = rc->plugin;
  k->settings = smr_xcalloc(1, reg->settings_size ? reg->settings_size : 1);
  static const smrules_param none[] = {{.type = SMRULES_PARAM_END}};
  st = smr_params_apply(reg->name, reg->params ? reg->params : none,
                        rc->parameters, rc->line, rc->col, env->config_path,
                        k->settings, &r->params, err);
  if (st != SMR_OK)
    return st;
  r->param_table = reg->params;
  r->settings = k->settings;
  r->stateless = reg->flags & SMRULES_RULE_STATELESS;
  r->profiler = reg->kind == SMRULES_KIND_PROFILER;
  if (r->profiler)
    r->window_us = scan_interval(reg->params, k->settings);
  return SMR_OK;
}

static int plugin_start(smr_rule *r, const smr_rule_config *rc,
                        const smr_rule_env *env, smr_error *err) {
  plugin_kind *k = r->kind_state;
  const smrules_rule *reg = k->plugin->reg;
  plugin_impl *p = smr_xcalloc(1, sizeof *p);
  p->reg = reg;
  r->impl = p;
  r->ops = &PLUGIN_OPS;
  if (reg->init && reg->init(r->ctx, k->settings, &p->state) != 0) {
    const char *why = smr_ctx_failure(r->ctx);
    return smr_error_set(err, SMR_ERR_USAGE, env->config_path, -1,
                         "line %d, column %d: %s: %s", rc->line, rc->col,
                         rc->name,
                         why ? why : "the rule refused its configuration");
  }
  return SMR_OK;
}

static void plugin_release(smr_rule *r) {
  plugin_kind *k = r->kind_state;
  if (!k)
    return;
  free(k->settings);
  smr_plugin_unload(k->plugin);
  free(k);
}

const smr_rule_kind smr_kind_plugin = {
    .name = "plugin",
    .claims = plugin_claims,
    .prepare = plugin_prepare,
    .start = plugin_start,
    .release = plugin_release,
};
