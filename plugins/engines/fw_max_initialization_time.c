/* MaxInitializationTime
 * (docs/profiler-framework-rules.md#maxinitializationtime): the training loop
 * has not started (no Step:ModeKeys event seen) more than `threshold` minutes
 * after the trial's first timestamp.  Also records the job's first/last system
 * timestamps and the first/last step start for ProfilerReport's job
 * summary. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_rules.h"
#include "smrules/rulekit.h"

/* The function table this rule was bound to (fw_rules.h): the host's, or
 * ProfilerReport's own.  Not rulekit's rk_api, which is always the
 * host's. */
static const smrules_api *sr_api;

typedef struct settings {
  double threshold; /* minutes */
  int64_t scan_interval_us;
} settings;

static const smrules_param params[] = {
    SMRULES_FLOAT_PARAM(
        "threshold", "20", settings, threshold,
        "minutes after the job start by which the training loop must have "
        "started",
        SMRULES_MIN(0)),
    SMRULES_INT_PARAM(
        "scan_interval_us", "60000000", settings, scan_interval_us,
        "length of one evaluation window in microseconds", SMRULES_MIN(0)),
    SMRULES_END_PARAMS};

typedef struct state {
  settings s;
  int64_t first_us;          /* the trial's first timestamp */
  bool clock_fixed;          /* under ProfilerReport (see below) */
  double job_start, job_end; /* seconds; +inf / 0 until seen */
  bool job_start_int, job_end_int;
  bool have_job;                /* job_start/job_end written */
  bool have_first, have_last;   /* step_num.first / step_num.last */
  double step_first, step_last; /* µs */
  bool step_first_int, step_last_int;
  int64_t datapoints, violations, triggered;
} state;

static int init(smrules_ctx *ctx, const void *s, void **out) {
  state *st = calloc(1, sizeof *st);
  if (!st) {
    sr_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = *(const settings *)s;
  st->first_us = INT64_MIN;
  st->job_start = INFINITY;
  *out = st;
  return 0;
}

static void destroy(void *p) {
  free(p);
}

/* See fw_rules.h: ProfilerReport pins this rule's clock. */
void fw_max_initialization_time_fix_clock(void *p) {
  ((state *)p)->clock_fixed = true;
}

static void scan_system(state *st, const smrules_sys_event *ev, size_t n) {
  for (size_t i = 0; i < n; i++) {
    double t = ev[i].timestamp;
    if (t < st->job_start) {
      st->job_start = t;
      st->job_start_int = ev[i].timestamp_is_int;
    }
    if (t > st->job_end) {
      st->job_end = t;
      st->job_end_int = ev[i].timestamp_is_int;
    }
    st->have_job = true;
  }
}

static void scan_framework(state *st, const smrules_fw_event *ev, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!strstr(ev[i].name, "Step:ModeKeys"))
      continue;
    st->datapoints++;
    if (!st->have_first) {
      st->have_first = true;
      st->step_first = ev[i].start_us;
      st->step_first_int = ev[i].times_are_int;
    } else {
      st->have_last = true;
      st->step_last = ev[i].start_us;
      st->step_last_int = ev[i].times_are_int;
    }
  }
}

static void put_num(smrules_json *j, const char *key, double v, bool is_int) {
  if (is_int && v == floor(v) && fabs(v) < 9007199254740992.0)
    sr_api->json_int(j, key, (int64_t)v);
  else
    sr_api->json_num(j, key, v);
}

static void write_report(smrules_ctx *ctx, const state *st) {
  sr_api->report_set(ctx, st->triggered, st->violations, st->datapoints);
  smrules_json *d = sr_api->details_reset(ctx);
  smrules_json *sn = sr_api->json_obj(d, "step_num");
  if (st->have_first)
    put_num(sn, "first", st->step_first, st->step_first_int);
  if (st->have_last)
    put_num(sn, "last", st->step_last, st->step_last_int);
  if (st->have_job) {
    put_num(d, "job_start", st->job_start, st->job_start_int);
    put_num(d, "job_end", st->job_end, st->job_end_int);
  }
  char buf[64], text[96];
  const char *t = sr_api->param_text(ctx, "threshold");
  if (!t) {
    sr_api->py_str(st->s.threshold, false, buf, sizeof buf);
    t = buf;
  }
  snprintf(text, sizeof text, "threshold:%s", t);
  sr_api->rule_parameters(ctx, text);
}

static int invoke(smrules_ctx *ctx, void *p, int64_t step) {
  state *st = p;
  int64_t k, start, end;
  if (sr_api->window(ctx, &k, &start, &end) != SMRULES_NO_TRIGGER) {
    sr_api->fail(ctx, "MaxInitializationTime is a profiler rule: no window");
    return SMRULES_ERR;
  }
  if (st->first_us == INT64_MIN) {
    smrules_profiler_info in;
    if (sr_api->profiler_info(ctx, &in) != SMRULES_NO_TRIGGER)
      return SMRULES_ERR;
    st->first_us = in.first_us;
  }
  const smrules_sys_event *sys;
  const smrules_fw_event *fw;
  size_t nsys, nfw;
  if (sr_api->system_events(ctx, start, end, &sys, &nsys) < 0 ||
      sr_api->framework_events(ctx, start, end, &fw, &nfw) < 0)
    return SMRULES_ERR;
  scan_system(st, sys, nsys);
  scan_framework(st, fw, nfw);
  int64_t clock = st->clock_fixed ? st->first_us : start;
  bool met = (double)(clock - st->first_us) > st->s.threshold * 60000000.0 &&
             !st->have_first && !st->have_last;
  if (met) {
    st->violations++;
    st->triggered++;
  }
  write_report(ctx, st);
  return met ? SMRULES_TRIGGERED : SMRULES_NO_TRIGGER;
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "MaxInitializationTime",
    .description = "the training loop starts too long after the job began",
    .kind = SMRULES_KIND_PROFILER,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "profiler: system metrics (job start/end) and framework "
                   "Step:ModeKeys events",
    .init = init,
    .invoke_at_step = invoke,
    .destroy = destroy,
};

const smrules_rule *fw_max_initialization_time(const smrules_api *api) {
  sr_api = api;
  return &rule;
}
