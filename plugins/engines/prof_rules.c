/* prof_rules.c - the plugin around a profiler-rule engine: per window it
 * asks the host for the window and its system metrics, runs the engine,
 * and at the end writes the engine's report as the rule's report. */
#include "prof_rules.h"

#include <stdlib.h>
#include <string.h>

/* One plugin (shared object) registers one rule. */
static const pr_engine_ops *pr_ops;

typedef struct pr_state {
  void *engine;
} pr_state;

static int pr_init(smrules_ctx *ctx, const void *settings, void **state) {
  pr_state *s = calloc(1, sizeof *s);
  if (!s)
    return SMRULES_ERR;
  s->engine = pr_ops->create(settings);
  char params[1024];
  pr_ops->rule_parameters(settings, params, sizeof params);
  rk_api->rule_parameters(ctx, params);
  *state = s;
  return 0;
}

static int pr_invoke(smrules_ctx *ctx, void *state, int64_t step) {
  pr_state *s = state;
  pr_window w;
  memset(&w, 0, sizeof w);
  if (!pk_window(ctx, &w.index, &w.start_us, &w.end_us)) {
    rk_api->fail(ctx, "%s is a profiler rule: it needs a time window",
                 pr_ops->name);
    return SMRULES_ERR;
  }
  (void)step;
  w.last_timestamp = w.start_us;
  w.ctx = ctx;
  if (pr_ops->needs_system &&
      rk_api->system_events(ctx, w.start_us, w.end_us, &w.sys, &w.nsys) !=
          SMRULES_NO_TRIGGER)
    return SMRULES_ERR;
  pk_fw_source fw = {.ctx = ctx, .start_us = w.start_us, .end_us = w.end_us};
  w.fw = &fw;
  bool condition = false;
  if (pr_ops->window(s->engine, &w, &condition) != 0)
    return SMRULES_ERR;
  return condition ? SMRULES_TRIGGERED : SMRULES_NO_TRIGGER;
}

static int pr_finish(smrules_ctx *ctx, void *state) {
  pr_state *s = state;
  pr_report r;
  pr_ops->report(s->engine, &r);
  rk_api->report_set(ctx, r.triggered, r.violations, r.datapoints);
  pk_obj_write(r.details, rk_api->details_reset(ctx));
  return 0;
}

static void pr_destroy(void *state) {
  pr_state *s = state;
  if (s && s->engine)
    pr_ops->destroy(s->engine);
  free(s);
}

void pr_fill_rule(smrules_rule *reg, const pr_engine_ops *ops) {
  pr_ops = ops;
  memset(reg, 0, sizeof *reg);
  reg->api_version = SMRULES_API_VERSION;
  reg->struct_size = sizeof *reg;
  reg->name = ops->name;
  reg->description = ops->description;
  reg->kind = SMRULES_KIND_PROFILER;
  reg->params = ops->params;
  reg->settings_size = ops->settings_size;
  reg->data_needed = ops->data_needed;
  reg->init = pr_init;
  reg->invoke_at_step = pr_invoke;
  reg->finish = pr_finish;
  reg->destroy = pr_destroy;
}
