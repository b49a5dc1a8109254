/* TrainingHang (docs/rules/TrainingHang.md).  A time-driven rule: while
 * following a live run, it learns how often new steps appear (the median
 * of the intervals between the new steps it saw, after a warm-up) and
 * fires when the silence since the last new step is longer than
 * max(factor x that interval, min_seconds) while the trainer is alive.
 * One report per silence: it re-arms when a new step appears.  Offline it
 * has nothing to say (every step is skipped). */
#include <stdlib.h>
#include <string.h>

#include "smrules/rulekit.h"

/* Intervals kept for the median: the most recent ones, so a run whose pace
 * changes (a bigger batch, a second phase) is judged by its recent pace,
 * and memory stays bounded however long the run is. */
#define WINDOW 64

typedef struct settings {
  double factor;
  double min_seconds;
  int64_t warmup_steps;
} settings;

static const smrules_param params[] = {
    SMRULES_FLOAT_PARAM("factor", "10", settings, factor,
                        "silence, in typical step intervals, before firing",
                        SMRULES_RANGE(1, 1e6)),
    SMRULES_FLOAT_PARAM("min_seconds", "60", settings, min_seconds,
                        "never fire before this many seconds of silence",
                        SMRULES_RANGE(0, 1e7)),
    SMRULES_INT_PARAM("warmup_steps", "2", settings, warmup_steps,
                      "first intervals between new steps not learnt from",
                      SMRULES_RANGE(0, 1000000)),
    SMRULES_END_PARAMS};

typedef struct state {
  const settings *s;
  bool have_event;       /* a new step was seen appear */
  double last_event;     /* when (live_info.last_activity) */
  int64_t intervals;     /* intervals seen, warm-up included */
  double window[WINDOW]; /* the learnt ones, a ring */
  size_t nwin, next;
  double fired_for_activity; /* last_activity of the last report */
} state;

static int init(smrules_ctx *ctx, const void *s, void **out) {
  state *st = calloc(1, sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = s;
  st->fired_for_activity = -1;
  *out = st;
  return 0;
}

/* Offline there is no clock to judge a silence by. */
static int invoke(smrules_ctx *ctx, void *p, int64_t g) {
  (void)ctx, (void)p, (void)g;
  return SMRULES_SKIPPED;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of the learnt intervals (mean of the middle two when even). */
static double median(const state *st) {
  double v[WINDOW];
  memcpy(v, st->window, st->nwin * sizeof v[0]);
  qsort(v, st->nwin, sizeof v[0], cmp_double);
  size_t m = st->nwin / 2;
  return st->nwin % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/* A new step appeared at `when` (the host's last_activity). */
static void learn(state *st, double when) {
  if (st->have_event) {
    st->intervals++;
    if (st->intervals > st->s->warmup_steps) {
      st->window[st->next] = when - st->last_event;
      st->next = (st->next + 1) % WINDOW;
      if (st->nwin < WINDOW)
        st->nwin++;
    }
  }
  st->have_event = true;
  st->last_event = when;
}

/* Keeps up with the host: a new step seen appear is a newer
 * last_activity with a step saved (the host moves last_activity when a
 * scan finds new steps; before any step it is when watching started, not
 * an appearance).  The first time steps are seen counts as one. */
static void observe(state *st, const smrules_live_info *li) {
  if (li->newest_step >= 0 &&
      (!st->have_event || li->last_activity > st->last_event))
    learn(st, li->last_activity);
}

static int invoke_at_time(smrules_ctx *ctx, void *p, double now) {
  state *st = p;
  smrules_live_info li;
  if (rk_api->live_info(ctx, &li) != 0 || !li.live)
    return SMRULES_NO_TRIGGER;
  observe(st, &li);
  if (li.training_ended || st->nwin == 0 || !st->have_event)
    return SMRULES_NO_TRIGGER;
  double typical = median(st);
  double limit = st->s->factor * typical;
  if (limit < st->s->min_seconds)
    limit = st->s->min_seconds;
  double silence = now - li.last_activity;
  if (silence <= limit || st->fired_for_activity == li.last_activity)
    return SMRULES_NO_TRIGGER;
  st->fired_for_activity = li.last_activity; /* once per silence */
  smrules_json *j = rk_api->violation(ctx);
  rk_api->json_num(j, "seconds_since_activity", silence);
  rk_api->json_num(j, "threshold_seconds", limit);
  rk_api->json_num(j, "typical_interval_seconds", typical);
  rk_api->json_int(j, "intervals_learnt", (int64_t)st->nwin);
  rk_api->json_num(j, "last_activity", li.last_activity);
  rk_api->json_int(j, "newest_step", li.newest_step);
  rk_api->json_num(j, "factor", st->s->factor);
  rk_api->json_num(j, "min_seconds", st->s->min_seconds);
  return SMRULES_TRIGGERED;
}

static int finish(smrules_ctx *ctx, void *p) {
  const state *st = p;
  smrules_json *d = rk_api->details(ctx);
  rk_api->json_int(d, "intervals_seen", st->intervals);
  rk_api->json_int(d, "intervals_learnt", (int64_t)st->nwin);
  if (st->nwin)
    rk_api->json_num(d, "typical_interval_seconds", median(st));
  return 0;
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "TrainingHang",
    .description = "no new step for much longer than the run's own typical "
                   "step interval while the trainer is alive (a hang)",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "any saved step (when each new step appears, live)",
    .init = init,
    .invoke_at_step = invoke,
    .finish = finish,
    .destroy = free,
    .invoke_at_time = invoke_at_time,
};

RK_PLUGIN(rule)
