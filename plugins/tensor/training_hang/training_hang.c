/* TrainingHang (docs/rules/TrainingHang.md).  A time-driven rule: while
 * following a live run, it learns how often new steps appear (the median
 * of the intervals between the new steps it saw, after a warm-up) and
 * fires when the silence since the last new step is longer than
 * max(factor x that interval, min_seconds) while the trainer is alive.
 * One report per silence: it re-arms when a new step appears.  With
 * several workers it also reports a straggler: a worker whose newest step
 * trails the newest of all by more than max_step_lag for longer than
 * straggler_seconds (once per episode: it re-arms when the worker catches
 * up).  When system metrics are recorded beside the run, each report says
 * what the CPUs and GPUs did meanwhile (idle, or busy with no progress).
 * Offline it has nothing to say (every step is skipped). */
#include <stdio.h>
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
  int64_t max_step_lag;
  double straggler_seconds;
  double idle_percent;
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
    SMRULES_INT_PARAM("max_step_lag", "100", settings, max_step_lag,
                      "steps a worker may trail the newest before it is "
                      "a straggler",
                      SMRULES_RANGE(0, 1000000000)),
    SMRULES_FLOAT_PARAM("straggler_seconds", "300", settings, straggler_seconds,
                        "how long a worker trails by more than max_step_lag "
                        "before it is reported",
                        SMRULES_RANGE(0, 1e7)),
    SMRULES_FLOAT_PARAM("idle_percent", "10", settings, idle_percent,
                        "mean utilization below which CPUs or GPUs count "
                        "as idle during a silence",
                        SMRULES_RANGE(0, 100)),
    SMRULES_END_PARAMS};

typedef struct state {
  const settings *s;
  bool have_event;       /* a new step was seen appear */
  double last_event;     /* when (live_info.last_activity) */
  int64_t intervals;     /* intervals seen, warm-up included */
  double window[WINDOW]; /* the learnt ones, a ring */
  size_t nwin, next;
  double fired_for_activity; /* last_activity of the last report */
  /* stragglers: per worker (sorted like the host's names), since when it
   * trails by more than max_step_lag (-1: it does not), and whether that
   * episode was reported */
  char **wname;
  double *wsince;
  bool *wreported;
  size_t nw;
} state;

static void forget_workers(state *st) {
  for (size_t i = 0; i < st->nw; i++)
    free(st->wname[i]);
  free(st->wname);
  free(st->wsince);
  free(st->wreported);
  st->wname = NULL, st->wsince = NULL, st->wreported = NULL, st->nw = 0;
}

static void destroy(void *p) {
  forget_workers(p);
  free(p);
}

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

/* ------------------------------------------------- what the machine did */

typedef struct usage {
  double sum, n;  /* utilization readings in the span */
  size_t devices; /* distinct names ("cpu0", "gpu1") */
} usage;

static void usage_add(usage *u, const char **seen, size_t *nseen, size_t cap,
                      const smrules_sys_event *e) {
  u->sum += e->value;
  u->n += 1;
  for (size_t k = 0; k < *nseen; k++)
    if (strcmp(seen[k], e->name) == 0)
      return;
  if (*nseen < cap) { /* beyond cap devices are no longer told apart */
    seen[(*nseen)++] = e->name;
    u->devices++;
  }
}

/* What the CPUs and GPUs did from `start` to `now` (epoch seconds), when
 * system metrics are recorded (false: none are): the CPUUtilization and
 * GPUUtilization readings in that span. */
typedef struct span_usage {
  double start, now;
  usage cpu, gpu;
} span_usage;

static bool measure(smrules_ctx *ctx, double start, double now,
                    span_usage *out) {
  const smrules_sys_event *ev;
  size_t n;
  memset(out, 0, sizeof *out);
  out->start = start, out->now = now;
  if (rk_api->system_events(ctx, (int64_t)(start * 1e6), (int64_t)(now * 1e6),
                            &ev, &n) != SMRULES_NO_TRIGGER)
    return false; /* no system metrics recorded */
  const char *cs[1024], *gs[256];
  size_t ncs = 0, ngs = 0;
  for (size_t i = 0; i < n; i++) {
    const smrules_sys_event *e = &ev[i];
    if (e->timestamp < start || e->timestamp > now)
      continue; /* the host widens a query; the silence is exact */
    if (strcmp(e->type, "cpu") == 0 &&
        strcmp(e->dimension, "CPUUtilization") == 0)
      usage_add(&out->cpu, cs, &ncs, 1024, e);
    else if (strcmp(e->type, "gpu") == 0 &&
             strcmp(e->dimension, "GPUUtilization") == 0)
      usage_add(&out->gpu, gs, &ngs, 256, e);
  }
  return true;
}

/* "idle" below idle_percent, else "busy" (with no progress: a silence). */
static const char *state_of(const state *st, const usage *u) {
  if (u->n == 0)
    return "not recorded";
  return u->sum / u->n < st->s->idle_percent ? "idle" : "busy";
}

/* "; meanwhile GPUs idle (mean 0.0 % over 12 readings of 1), CPUs busy
 * (...)" appended to `msg`. */
static void usage_text(const state *st, const span_usage *su, char *msg,
                       size_t cap) {
  const struct {
    const char *what;
    const usage *u;
  } parts[] = {{"GPUs", &su->gpu}, {"CPUs", &su->cpu}};
  size_t len = strlen(msg);
  for (size_t k = 0; k < 2 && len < cap; k++) {
    const usage *u = parts[k].u;
    int w = u->n == 0
                ? snprintf(msg + len, cap - len, "%s %s not recorded",
                           k ? "," : "; meanwhile", parts[k].what)
                : snprintf(msg + len, cap - len,
                           "%s %s %s (mean %.1f %% over %.0f readings of %zu)",
                           k ? "," : "; meanwhile", parts[k].what,
                           state_of(st, u), u->sum / u->n, u->n, u->devices);
    len += w > 0 ? (size_t)w : 0;
  }
}

static void usage_json(const state *st, const span_usage *su, smrules_json *j) {
  const struct {
    const char *key;
    const usage *u;
  } parts[] = {{"cpu", &su->cpu}, {"gpu", &su->gpu}};
  smrules_json *o = rk_api->json_obj(j, "system_during_silence");
  rk_api->json_num(o, "from", su->start);
  rk_api->json_num(o, "to", su->now);
  for (size_t k = 0; k < 2; k++) {
    const usage *u = parts[k].u;
    smrules_json *p = rk_api->json_obj(o, parts[k].key);
    rk_api->json_int(p, "readings", (int64_t)u->n);
    rk_api->json_int(p, "devices", (int64_t)u->devices);
    if (u->n)
      rk_api->json_num(p, "mean_utilization_percent", u->sum / u->n);
    rk_api->json_str(p, "state", state_of(st, u));
  }
}

/* ------------------------------------------------------------ stragglers */

static int cmp_name(const void *key, const void *elem) {
  return strcmp(key, *(char *const *)elem);
}

/* Follows the host's workers (sorted names): what was known of a worker
 * carries over by name. */
static void track_workers(state *st, const char *const *names, size_t n) {
  bool same = n == st->nw;
  for (size_t i = 0; same && i < n; i++)
    same = strcmp(names[i], st->wname[i]) == 0;
  if (same)
    return;
  char **wname = calloc(n ? n : 1, sizeof *wname);
  double *wsince = calloc(n ? n : 1, sizeof *wsince);
  bool *wrep = calloc(n ? n : 1, sizeof *wrep);
  if (!wname || !wsince || !wrep) {
    free(wname), free(wsince), free(wrep);
    forget_workers(st);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    char **old =
        st->nw ? bsearch(names[i], st->wname, st->nw, sizeof(char *), cmp_name)
               : NULL;
    wname[i] = strdup(names[i]);
    wsince[i] = old ? st->wsince[old - st->wname] : -1;
    wrep[i] = old ? st->wreported[old - st->wname] : false;
  }
  forget_workers(st);
  st->wname = wname, st->wsince = wsince, st->wreported = wrep, st->nw = n;
  for (size_t i = 0; i < n; i++)
    if (!wname[i]) { /* out of memory: start again next tick */
      forget_workers(st);
      return;
    }
}

/* One violation per worker that has trailed the newest step by more than
 * max_step_lag for longer than straggler_seconds (once per episode).
 * Returns how many were reported now. */
static int stragglers(smrules_ctx *ctx, state *st, double now) {
  const char *const *names;
  const int64_t *steps;
  size_t n;
  if (!SMRULES_API_HAS(rk_api, live_workers) ||
      rk_api->live_workers(ctx, &names, &steps, &n) != SMRULES_NO_TRIGGER)
    return 0;
  track_workers(st, names, n);
  if (st->nw != n || n < 2)
    return 0;
  int64_t lead = steps[0];
  for (size_t i = 1; i < n; i++)
    if (steps[i] > lead)
      lead = steps[i];
  int fired = 0;
  for (size_t i = 0; i < n; i++) {
    if (lead - steps[i] <= st->s->max_step_lag) {
      st->wsince[i] = -1; /* caught up: re-armed */
      st->wreported[i] = false;
      continue;
    }
    if (st->wsince[i] < 0)
      st->wsince[i] = now;
    if (st->wreported[i] || now - st->wsince[i] <= st->s->straggler_seconds)
      continue;
    st->wreported[i] = true;
    smrules_json *j = rk_api->violation(ctx);
    char msg[768];
    snprintf(msg, sizeof msg,
             "worker %s is at step %lld, %lld steps behind the newest "
             "(%lld), for %.1f s (limits: max_step_lag %lld, "
             "straggler_seconds %g)",
             names[i], (long long)steps[i], (long long)(lead - steps[i]),
             (long long)lead, now - st->wsince[i],
             (long long)st->s->max_step_lag, st->s->straggler_seconds);
    span_usage su;
    bool recorded = measure(ctx, st->wsince[i], now, &su);
    if (recorded)
      usage_text(st, &su, msg, sizeof msg);
    rk_api->json_str(j, "message", msg);
    rk_api->json_str(j, "kind", "straggler");
    rk_api->json_str(j, "worker", names[i]);
    rk_api->json_int(j, "worker_step", steps[i]);
    rk_api->json_int(j, "newest_step", lead);
    rk_api->json_int(j, "steps_behind", lead - steps[i]);
    rk_api->json_num(j, "behind_since", st->wsince[i]);
    rk_api->json_num(j, "seconds_behind", now - st->wsince[i]);
    rk_api->json_int(j, "max_step_lag", st->s->max_step_lag);
    rk_api->json_num(j, "straggler_seconds", st->s->straggler_seconds);
    if (recorded)
      usage_json(st, &su, j);
    fired++;
  }
  return fired;
}

/* ------------------------------------------------------------- the hang */

static bool hang(smrules_ctx *ctx, state *st, const smrules_live_info *li,
                 double now) {
  if (st->nwin == 0 || !st->have_event)
    return false;
  double typical = median(st);
  double limit = st->s->factor * typical;
  if (limit < st->s->min_seconds)
    limit = st->s->min_seconds;
  double silence = now - li->last_activity;
  if (silence <= limit || st->fired_for_activity == li->last_activity)
    return false;
  st->fired_for_activity = li->last_activity; /* once per silence */
  smrules_json *j = rk_api->violation(ctx);
  char msg[768];
  snprintf(msg, sizeof msg,
           "no new step for %.1f s after step %lld (threshold %.1f s = "
           "max(%g x typical interval %.2f s, min_seconds %g))",
           silence, (long long)li->newest_step, limit, st->s->factor, typical,
           st->s->min_seconds);
  span_usage su;
  bool recorded = measure(ctx, li->last_activity, now, &su);
  if (recorded)
    usage_text(st, &su, msg, sizeof msg);
  rk_api->json_str(j, "message", msg);
  rk_api->json_str(j, "kind", "hang");
  rk_api->json_num(j, "seconds_since_activity", silence);
  rk_api->json_num(j, "threshold_seconds", limit);
  rk_api->json_num(j, "typical_interval_seconds", typical);
  rk_api->json_int(j, "intervals_learnt", (int64_t)st->nwin);
  rk_api->json_num(j, "last_activity", li->last_activity);
  rk_api->json_int(j, "newest_step", li->newest_step);
  rk_api->json_num(j, "factor", st->s->factor);
  rk_api->json_num(j, "min_seconds", st->s->min_seconds);
  if (recorded)
    usage_json(st, &su, j);
  return true;
}

static int invoke_at_time(smrules_ctx *ctx, void *p, double now) {
  state *st = p;
  smrules_live_info li;
  if (rk_api->live_info(ctx, &li) != 0 || !li.live)
    return SMRULES_NO_TRIGGER;
  observe(st, &li);
  if (li.training_ended)
    return SMRULES_NO_TRIGGER;
  int fired = stragglers(ctx, st, now);
  fired += hang(ctx, st, &li, now);
  return fired ? SMRULES_TRIGGERED : SMRULES_NO_TRIGGER;
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
    .destroy = destroy,
    .invoke_at_time = invoke_at_time,
};

RK_PLUGIN(rule)
