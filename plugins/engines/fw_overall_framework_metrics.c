/* OverallFrameworkMetrics
 * (docs/profiler-framework-rules.md#overallframeworkmetrics): where framework
 * time goes - training phases (with the time between steps as "others"),
 * forward and backward passes, CPU and GPU operators, data loading.  Never
 * triggers; its Details feed ProfilerReport's framework summary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_rules.h"
#include "fwkit.h"
#include "smrules/rulekit.h"

/* The function table this rule was bound to (fw_rules.h): the host's, or
 * ProfilerReport's own.  Not rulekit's rk_api, which is always the
 * host's. */
static const smrules_api *sr_api;

typedef struct settings {
  int64_t scan_interval_us;
} settings;

static const smrules_param params[] = {
    SMRULES_INT_PARAM(
        "scan_interval_us", "60000000", settings, scan_interval_us,
        "length of one evaluation window in microseconds", SMRULES_MIN(0)),
    SMRULES_END_PARAMS};

typedef struct state {
  fk_breakdown b;
  double gpu_counts;
  bool have_start;
  double start; /* start of the first step event with a step_num */
  fk_map order; /* Details keys in first-write order */
} state;

static int init(smrules_ctx *ctx, const void *s, void **out) {
  state *st = calloc(1, sizeof *st);
  if (!st) {
    sr_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->gpu_counts = 1;
  *out = st;
  return 0;
}

static void destroy(void *p) {
  state *st = p;
  fk_breakdown_free(&st->b);
  fk_map_free(&st->order);
  free(st);
}

/* Branch 3 of the classification, OverallFrameworkMetrics' variant: the
 * time of the step phases and "others" = elapsed step time minus the time
 * already attributed (divided by the number of GPU phases).  `end` is
 * local to the window in the reference; without it (a step event without
 * step_num first) the reference fails, smrules skips the update. */
static void step_event(smrules_ctx *ctx, state *st, const smrules_fw_event *e,
                       bool *have_end, double *end) {
  smrules_arg a;
  if (sr_api->fw_arg(ctx, e, "step_num", &a) != SMRULES_ARG_MISSING) {
    if (!st->have_start) {
      st->have_start = true;
      st->start = e->start_us;
    }
    *have_end = true;
    *end = e->end_us;
  }
  fk_named_add(&st->b.step_phases, e->phase, e->end_us - e->start_us);
  if (!*have_end || !st->have_start)
    return;
  double others =
      (*end - st->start) - fk_named_sum(&st->b.step_phases) / st->gpu_counts;
  bool added;
  size_t i = fk_map_add(&st->b.step_phases.keys, "others", &added);
  if (added)
    st->b.step_phases.us =
        fk_xrealloc(st->b.step_phases.us, st->b.step_phases.keys.cap,
                    sizeof *st->b.step_phases.us);
  st->b.step_phases.us[i] = others;
}

static void scan(smrules_ctx *ctx, state *st, const smrules_fw_event *ev,
                 size_t n) {
  bool have_end = false;
  double end = 0;
  for (size_t i = 0; i < n; i++) {
    const smrules_fw_event *e = &ev[i];
    if (!fk_contains_ci(e->phase, "cpu") && !fk_contains_ci(e->phase, "gpu") &&
        strstr(e->phase, "Step")) {
      step_event(ctx, st, e, &have_end, &end);
      continue;
    }
    if (fk_classify(&st->b, e) == 2)
      st->gpu_counts = (double)st->b.gpu.phases.n;
  }
}

static void write_report(smrules_ctx *ctx, state *st) {
  sr_api->report_set(ctx, 0, 0, 0);
  fk_breakdown_keys(&st->b, &st->order);
  smrules_json *d = sr_api->details_reset(ctx);
  for (size_t i = 0; i < st->order.n; i++)
    fk_breakdown_emit(sr_api, d, &st->b, st->order.keys[i], false);
  sr_api->rule_parameters(ctx, "");
}

static int invoke(smrules_ctx *ctx, void *p, int64_t step) {
  state *st = p;
  int64_t k, start, end;
  if (sr_api->window(ctx, &k, &start, &end) != SMRULES_NO_TRIGGER) {
    sr_api->fail(ctx, "OverallFrameworkMetrics is a profiler rule: no window");
    return SMRULES_ERR;
  }
  const smrules_fw_event *fw;
  size_t nfw;
  if (sr_api->framework_events(ctx, start, end, &fw, &nfw) < 0)
    return SMRULES_ERR;
  scan(ctx, st, fw, nfw);
  write_report(ctx, st);
  return SMRULES_NO_TRIGGER;
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "OverallFrameworkMetrics",
    .description = "summary of framework time: phases, forward/backward, "
                   "CPU and GPU operators (never triggers)",
    .kind = SMRULES_KIND_PROFILER,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "profiler: framework trace events",
    .init = init,
    .invoke_at_step = invoke,
    .destroy = destroy,
};

const smrules_rule *fw_overall_framework_metrics(const smrules_api *api) {
  sr_api = api;
  return &rule;
}
