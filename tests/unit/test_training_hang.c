/* test_training_hang.c - TrainingHang (docs/rules/TrainingHang.md) driven
 * on a fake clock: the test plays the host's part, as the runner's
 * tick_instance does (live facts, then invoke_at_time with `now`), for a
 * schedule of step appearances it chooses, and computes independently
 * when the rule must fire: the median of the intervals after the warm-up,
 * times `factor`, at least `min_seconds`, first exceeded at which tick.
 * No sleeping: the clock is a number. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "config/params.h"
#include "host/plugin.h"
#include "host/rulehost.h"
#include "unit.h"

#define TICK 0.25 /* seconds between ticks (exact in binary) */

/* build/plugins/<name>, next to this binary's build/tests/ */
static char *plugin_path(const char *name) {
  static char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0)
    return NULL;
  path[n] = '\0';
  char *slash = strrchr(path, '/');
  if (!slash)
    return NULL;
  snprintf(slash, sizeof path - (size_t)(slash - path), "/../plugins/%s", name);
  return path;
}

typedef struct rig {
  smr_plugin *p;
  smr_node *given;
  smr_params params;
  void *settings;
  smrules_ctx *ctx;
  void *state;
  smrules_live_info li;
  smr_strv workers; /* what api->live_workers answers (sorted names) */
  smr_i64v newest;
  int fired;         /* reports so far */
  double first_fire; /* clock at the first report, -1 before */
} rig;

static bool rig_open(rig *r, const char *yaml) {
  memset(r, 0, sizeof *r);
  r->first_fire = -1;
  smr_error err;
  smr_error_clear(&err);
  const char *path = plugin_path("training_hang.so");
  if (!path || smr_plugin_load(path, &r->p, &err) != SMR_OK)
    return false;
  if (smr_yaml_parse(yaml, strlen(yaml), "<test>", &r->given, &err) != SMR_OK)
    return false;
  r->settings = calloc(1, r->p->reg->settings_size + 1);
  if (smr_params_apply("TrainingHang", r->p->reg->params, r->given, 1, 1,
                       "<test>", r->settings, &r->params, &err) != SMR_OK)
    return false;
  r->ctx = smr_ctx_new(NULL, "TrainingHang", "TrainingHang", &r->params);
  if (r->p->reg->init(r->ctx, r->settings, &r->state) != 0)
    return false;
  r->li = (smrules_live_info){.live = true, .newest_step = -1};
  return true;
}

static void rig_close(rig *r) {
  if (r->state)
    r->p->reg->destroy(r->state);
  if (r->ctx)
    smr_ctx_free(r->ctx);
  smr_params_free(&r->params);
  smr_strv_free(&r->workers);
  smr_i64v_free(&r->newest);
  free(r->settings);
  smr_node_free(r->given);
  if (r->p)
    smr_plugin_unload(r->p);
}

/* One host tick at `now` (what runner_loop.c's runner_tick_instance does). */
static void tick(rig *r, double now) {
  r->li.now = now;
  int64_t at = r->li.newest_step >= 0 ? r->li.newest_step : 0;
  smr_ctx_set_live(r->ctx, &r->li);
  smr_ctx_set_live_workers(r->ctx, (const char *const *)r->workers.v,
                           r->newest.v, r->workers.n);
  smr_ctx_step_begin(r->ctx, at);
  int rc = r->p->reg->invoke_at_time(r->ctx, r->state, now);
  smr_ctx_step_end(r->ctx, at, rc == SMRULES_TRIGGERED);
  CHECK(rc == SMRULES_TRIGGERED || rc == SMRULES_NO_TRIGGER);
  if (rc == SMRULES_TRIGGERED) {
    if (r->fired++ == 0)
      r->first_fire = now;
  }
}

/* A new step appears at `when` (the host's scan saw it). */
static void step_appears(rig *r, double when, int64_t step) {
  r->li.last_activity = when;
  r->li.newest_step = step;
}

/* Ticks every TICK seconds from `from` (inclusive) to `to` (exclusive). */
static void run_clock(rig *r, double from, double to) {
  for (double t = from; t < to; t += TICK)
    tick(r, t);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The threshold by the definition: median of times[i+1]-times[i] without
 * the first `warmup`, times factor, at least min_seconds. */
static double expected_limit(const double *times, int n, int warmup,
                             double factor, double min_seconds) {
  double iv[64];
  int m = 0;
  for (int i = 1 + warmup; i < n; i++)
    iv[m++] = times[i] - times[i - 1];
  qsort(iv, (size_t)m, sizeof iv[0], cmp);
  double med = m % 2 ? iv[m / 2] : (iv[m / 2 - 1] + iv[m / 2]) / 2;
  double lim = factor * med;
  return lim > min_seconds ? lim : min_seconds;
}

/* The first tick strictly after last + limit, on the grid start + k*TICK. */
static double expected_fire(double start, double last, double limit) {
  double t = start;
  while (!(t - last > limit))
    t += TICK;
  return t;
}

/* Steps appear on an irregular schedule, then stop: it fires once, at the
 * first tick past the learnt threshold, and re-arms on a new step. */
static void test_fires_after_learnt_threshold(void) {
  rig r;
  bool ok = rig_open(&r, "factor: 3\nmin_seconds: 2\nwarmup_steps: 1\n");
  CHECK(ok);
  if (ok) {
    /* the first interval (10 s: compiling) is the warm-up */
    double times[] = {1000, 1010, 1012, 1013, 1015, 1016};
    int n = (int)(sizeof times / sizeof times[0]);
    double lim = expected_limit(times, n, 1, 3, 2); /* 3 x 1.5 = 4.5 */
    CHECK_NEAR(lim, 4.5, 1e-12);
    double clock = 999;
    tick(&r, clock); /* watching starts before the first step */
    for (int i = 0; i < n; i++) {
      run_clock(&r, clock, times[i]);
      step_appears(&r, times[i], 10 * (i + 1));
      clock = times[i];
    }
    CHECK_EQ_INT(r.fired, 0); /* the warm-up gap of 10 s did not fire */
    run_clock(&r, clock, 1040);
    CHECK_EQ_INT(r.fired, 1); /* once for the whole silence */
    CHECK_NEAR(r.first_fire, expected_fire(clock, times[n - 1], lim), 0);
    const char *v = smr_ctx_last_violations(r.ctx);
    CHECK(v && strstr(v, "\"typical_interval_seconds\":1.5"));
    CHECK(v && strstr(v, "\"threshold_seconds\":4.5"));
    /* a new step re-arms it: the next silence is reported again */
    step_appears(&r, 1040, 80);
    run_clock(&r, 1040, 1060);
    CHECK_EQ_INT(r.fired, 2);
  }
  rig_close(&r);
}

/* min_seconds wins over a short learnt threshold. */
static void test_min_seconds_floor(void) {
  rig r;
  bool ok = rig_open(&r, "factor: 2\nmin_seconds: 7\nwarmup_steps: 0\n");
  CHECK(ok);
  if (ok) {
    double times[] = {100, 101, 102, 103};
    double lim = expected_limit(times, 4, 0, 2, 7);
    CHECK_NEAR(lim, 7, 0);
    tick(&r, 99);
    double clock = 99;
    for (int i = 0; i < 4; i++) {
      run_clock(&r, clock, times[i]);
      step_appears(&r, times[i], i);
      clock = times[i];
    }
    run_clock(&r, clock, 130);
    CHECK_EQ_INT(r.fired, 1);
    CHECK_NEAR(r.first_fire, expected_fire(clock, 103, lim), 0);
  }
  rig_close(&r);
}

/* Nothing learnt yet (still in the warm-up), a trainer that has ended, or
 * a run that is not followed live: no report, however long the silence. */
static void test_silent_without_basis(void) {
  rig r;
  bool ok = rig_open(&r, "factor: 2\nmin_seconds: 1\nwarmup_steps: 3\n");
  CHECK(ok);
  if (ok) {
    tick(&r, 0);
    for (int i = 1; i <= 4; i++) { /* 3 intervals: all warm-up */
      step_appears(&r, i, i);
      tick(&r, i);
    }
    run_clock(&r, 4, 500);
    CHECK_EQ_INT(r.fired, 0);
    step_appears(&r, 501, 5); /* the first learnt interval: 497 s */
    tick(&r, 501);
    step_appears(&r, 502, 6); /* median of {497, 1}: 249 s, x2 = 498 */
    tick(&r, 502);
    r.li.training_ended = true;
    run_clock(&r, 502, 1500);
    CHECK_EQ_INT(r.fired, 0);
    r.li.training_ended = false;
    r.li.live = false;
    run_clock(&r, 1500, 1510);
    CHECK_EQ_INT(r.fired, 0);
    r.li.live = true;
    tick(&r, 1510); /* live again, 1008 s silent > 498 */
    CHECK_EQ_INT(r.fired, 1);
  }
  rig_close(&r);
}

/* Worker w's newest step at time t in the straggler schedule: both advance
 * one step every second from step 0 at t = 0; worker_1 stops at step 40
 * (t = 40) and resumes at t = 100, jumping to worker_0's step (it caught
 * up), then stops again at t = 120. */
static int64_t sched_step(int w, double t) {
  int64_t lead = (int64_t)t;
  if (w == 0)
    return lead;
  if (t < 40)
    return lead;
  if (t < 100)
    return 40;
  if (t < 120)
    return lead;
  return 120;
}

/* When the definition says worker_1 is reported, computed on the tick grid
 * independently of the rule: the first tick where it trails by more than
 * `lag` starts an episode; it is reported at the first tick more than
 * `secs` later while it still trails; catching up ends the episode. */
static int expected_reports(double from, double to, int64_t lag, double secs,
                            double *at, int max) {
  int n = 0;
  double since = -1;
  bool reported = false;
  for (double t = from; t < to; t += TICK) {
    int64_t behind = sched_step(0, t) - sched_step(1, t);
    if (behind <= lag) {
      since = -1, reported = false;
      continue;
    }
    if (since < 0)
      since = t;
    if (!reported && t - since > secs && n < max) {
      at[n++] = t;
      reported = true;
    }
  }
  return n;
}

static void set_workers(rig *r, double t) {
  smr_i64v_free(&r->newest);
  for (int w = 0; w < 2; w++)
    smr_i64v_push(&r->newest, sched_step(w, t));
}

/* Two workers, one of which stops twice: reported once per episode, at the
 * ticks the definition gives, with the worker and how far behind. */
static void test_straggler(void) {
  rig r;
  bool ok = rig_open(&r, "min_seconds: 1000000\nmax_step_lag: 15\n"
                         "straggler_seconds: 5\n");
  CHECK(ok);
  if (ok) {
    smr_strv_push(&r.workers, "worker_0");
    smr_strv_push(&r.workers, "worker_1");
    double want[4];
    int nwant = expected_reports(0, 200, 15, 5, want, 4);
    CHECK_EQ_INT(nwant, 2); /* t = 61.25 and 141.25 */
    double got[4];
    int ngot = 0;
    for (double t = 0; t < 200; t += TICK) {
      set_workers(&r, t);
      step_appears(&r, t, sched_step(0, t));
      int before = r.fired;
      tick(&r, t);
      if (r.fired > before && ngot < 4)
        got[ngot++] = t;
      if (r.fired > before && ngot == 1) {
        const char *v = smr_ctx_last_violations(r.ctx);
        CHECK(v && strstr(v, "\"kind\":\"straggler\""));
        CHECK(v && strstr(v, "\"worker\":\"worker_1\""));
        CHECK(v && strstr(v, "\"worker_step\":40"));
        CHECK(v && strstr(v, "\"steps_behind\":21"));
      }
    }
    CHECK_EQ_INT(ngot, nwant);
    for (int i = 0; i < ngot && i < nwant; i++)
      CHECK_NEAR(got[i], want[i], 0);
  }
  rig_close(&r);
}

/* A lag of exactly max_step_lag, or a single worker, is no straggler. */
static void test_no_straggler(void) {
  rig r;
  bool ok = rig_open(&r, "min_seconds: 1000000\nmax_step_lag: 10\n"
                         "straggler_seconds: 0\n");
  CHECK(ok);
  if (ok) {
    smr_strv_push(&r.workers, "worker_0");
    smr_strv_push(&r.workers, "worker_1");
    smr_i64v_push(&r.newest, 30);
    smr_i64v_push(&r.newest, 20);
    run_clock(&r, 0, 50);
    CHECK_EQ_INT(r.fired, 0);
    r.newest.v[1] = 19; /* 11 behind: reported at the next tick */
    run_clock(&r, 50, 50.5);
    CHECK_EQ_INT(r.fired, 1);
    smr_strv_free(&r.workers);
    smr_i64v_free(&r.newest);
    smr_strv_push(&r.workers, "worker_0");
    smr_i64v_push(&r.newest, 30);
    run_clock(&r, 51, 100);
    CHECK_EQ_INT(r.fired, 1);
  }
  rig_close(&r);
}

int main(void) {
  TEST_RUN(test_straggler);
  TEST_RUN(test_no_straggler);
  TEST_RUN(test_fires_after_learnt_threshold);
  TEST_RUN(test_min_seconds_floor);
  TEST_RUN(test_silent_without_basis);
  return TEST_REPORT("test_training_hang");
}
