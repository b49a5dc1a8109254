/* StalledTrainingRule (docs/rules/StalledTrainingRule.md).  Offline: a gap of
 * more than `threshold` seconds between the times at which consecutive saved
 * steps were written (the wall_time every saved event carries).  Live (run
 * --watch): invoke_at_time fires when nothing new appeared for more than
 * `threshold` seconds while training has not ended, and re-arms only when
 * new activity is seen. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "smrules/rulekit.h"

typedef struct settings {
  int64_t threshold;
  bool stop_training_on_fire;
  const char *training_job_name_prefix;
} settings;

static const smrules_param params[] = {
    SMRULES_INT_PARAM("threshold", "1800", settings, threshold,
                      "seconds without a newly saved step before reporting",
                      SMRULES_MIN(0)),
    SMRULES_BOOL_PARAM(
        "stop_training_on_fire", "False", settings, stop_training_on_fire,
        "also stop the training job when the rule fires (StopTraining)"),
    SMRULES_STRING_PARAM("training_job_name_prefix", NULL, settings,
                         training_job_name_prefix,
                         "name prefix of the training job to stop"),
    SMRULES_END_PARAMS};

typedef struct state {
  const settings *s;
  bool has_prev;
  int64_t prev_step;
  double prev_time;
  double longest_gap; /* -1 until two steps were seen */
  int64_t longest_gap_step;
  double fired_for_activity; /* live: last_activity of the last trigger */
} state;

static int init(smrules_ctx *ctx, const void *s, void **out) {
  const settings *cfg = s;
  state *st = calloc(1, sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = cfg;
  st->longest_gap = -1;
  st->longest_gap_step = -1;
  *out = st;
  return 0;
}

/* When step g was written: the wall_time of the first tensor (in name
 * order) with a value saved there - every event of a step carries about
 * the same time, and one read per step keeps long trials cheap.  False
 * when no value is saved at g. */
static bool step_time(smrules_trial *t, int64_t g, double *when) {
  smrules_strlist names;
  rk_api->tensor_names(t, &names);
  bool found = false;
  for (size_t i = 0; i < names.n && !found; i++) {
    smrules_tensor v;
    if (rk_value(t, names.v[i], g, &v) != 0)
      continue;
    *when = v.wall_time;
    found = true;
    rk_api->release(&v);
  }
  rk_api->strlist_free(&names);
  return found;
}

/* Seconds since the epoch as "YYYY-MM-DDTHH:MM:SSZ". */
static void utc_text(double secs, char *buf, size_t n) {
  time_t tt = (time_t)floor(secs);
  struct tm tm;
  if (!isfinite(secs) || !gmtime_r(&tt, &tm) ||
      !strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm))
    snprintf(buf, n, "?");
}

static void report(smrules_ctx *ctx, const state *st, int64_t g, double gap) {
  char when[32];
  utc_text(st->prev_time, when, sizeof when);
  smrules_json *j = rk_api->violation(ctx);
  rk_api->json_num(j, "seconds_since_activity", gap);
  rk_api->json_num(j, "last_activity", st->prev_time);
  rk_api->json_str(j, "last_activity_utc", when);
  rk_api->json_int(j, "last_activity_step", st->prev_step);
  rk_api->json_int(j, "step", g);
  rk_api->json_int(j, "threshold", st->s->threshold);
}

static int invoke(smrules_ctx *ctx, void *p, int64_t g) {
  state *st = p;
  double when = 0;
  if (!step_time(rk_api->trial(ctx), g, &when))
    return SMRULES_SKIPPED;
  rk_api->datapoints(ctx, 1);
  bool stalled = false;
  if (st->has_prev) {
    double gap = when - st->prev_time;
    if (gap > st->longest_gap) {
      st->longest_gap = gap;
      st->longest_gap_step = g;
    }
    stalled = gap > (double)st->s->threshold;
    if (stalled)
      report(ctx, st, g, gap);
  }
  st->has_prev = true;
  st->prev_step = g;
  st->prev_time = when;
  return stalled ? SMRULES_TRIGGERED : SMRULES_NO_TRIGGER;
}

/* Live, clock-driven evaluation (docs/rules/StalledTrainingRule.md). */
static int invoke_at_time(smrules_ctx *ctx, void *p, double now) {
  state *st = p;
  smrules_live_info li;
  if (rk_api->live_info(ctx, &li) != 0 || !li.live || li.training_ended)
    return SMRULES_NO_TRIGGER;
  double idle = now - li.last_activity;
  if (idle <= (double)st->s->threshold ||
      st->fired_for_activity == li.last_activity)
    return SMRULES_NO_TRIGGER;
  st->fired_for_activity = li.last_activity; /* re-arm on new activity */
  char when[32];
  utc_text(li.last_activity, when, sizeof when);
  smrules_json *j = rk_api->violation(ctx);
  rk_api->json_num(j, "seconds_since_activity", idle);
  rk_api->json_num(j, "last_activity", li.last_activity);
  rk_api->json_str(j, "last_activity_utc", when);
  rk_api->json_int(j, "newest_step", li.newest_step);
  rk_api->json_int(j, "threshold", st->s->threshold);
  return SMRULES_TRIGGERED;
}

static int finish(smrules_ctx *ctx, void *p) {
  const state *st = p;
  if (!st->has_prev)
    return 0;
  char when[32];
  utc_text(st->prev_time, when, sizeof when);
  smrules_json *d = rk_api->details(ctx);
  rk_api->json_num(d, "last_activity", st->prev_time);
  rk_api->json_str(d, "last_activity_utc", when);
  rk_api->json_int(d, "last_activity_step", st->prev_step);
  if (st->longest_gap >= 0) {
    rk_api->json_num(d, "longest_gap_seconds", st->longest_gap);
    rk_api->json_int(d, "longest_gap_step", st->longest_gap_step);
  }
  return 0;
}

/* "stl1" has_prev prev_step prev_time longest_gap longest_gap_step */
static char *save_state(smrules_ctx *ctx, void *p) {
  const state *st = p;
  rk_text out = {0};
  rk_text_printf(&out, "stl1");
  rk_text_int(&out, st->has_prev);
  rk_text_int(&out, st->prev_step);
  rk_text_num(&out, st->prev_time);
  rk_text_num(&out, st->longest_gap);
  rk_text_int(&out, st->longest_gap_step);
  return rk_text_take(&out);
}

static int load_state(smrules_ctx *ctx, void *p, const char *text) {
  state *st = p;
  rk_scan sc = {text, false};
  int64_t has, step, gstep;
  double when, gap;
  if (!rk_scan_word(&sc, "stl1") || !rk_scan_int(&sc, &has) ||
      !rk_scan_int(&sc, &step) || !rk_scan_num(&sc, &when) ||
      !rk_scan_num(&sc, &gap) || !rk_scan_int(&sc, &gstep) || !rk_scan_end(&sc))
    return SMRULES_ERR;
  st->has_prev = has != 0;
  st->prev_step = step;
  st->prev_time = when;
  st->longest_gap = gap;
  st->longest_gap_step = gstep;
  return 0;
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "StalledTrainingRule",
    .description = "the training job stopped producing data (a long gap "
                   "between saved steps)",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "any saved tensor (the write time of each saved step)",
    .init = init,
    .invoke_at_step = invoke,
    .finish = finish,
    .destroy = free,
    .save_state = save_state,
    .load_state = load_state,
    .invoke_at_time = invoke_at_time,
};

RK_PLUGIN(rule)
