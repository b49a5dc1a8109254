/* runner_live.c - a live run's evaluation: a thread per step rule and one
 * for the profiler rules, handed work by the watch. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/workers.h"
#include "host/rulehost.h"
#include "run/runner_int.h"
#include "trial/trial.h"

/* ----------------------------------------------------- live evaluation */

/* A live run (run --watch) evaluates each step rule in a thread of its
 * own, and the profiler rules in one more between them, so that a rule
 * that takes long (a slow script, a plugin waiting on something) delays
 * no other rule's steps, triggers or actions: the watch refreshes the
 * trial and hands out work (smr_runner_live_dispatch, smr_runner_tick)
 * without waiting for any rule.  A thread still busy when new steps
 * arrive walks them when its call is over; ticks that come meanwhile
 * are one tick.  The trial is refreshed while rules run: each reads it
 * inside the trial's reader gate (trial.h), results are written under
 * `mu` and the state file under `db_mu`. */
typedef struct live_worker {
  smr_runner *r;
  size_t u; /* its instance */
  bool
      profilers; /* evaluates every profiler rule (runner_evaluate_profilers) */
  pthread_t th;
  bool walk_due, tick_due; /* under live.mu */
  smr_i64v steps;          /* its copy of the steps, taken per walk */
} live_worker;

struct live {
  pthread_mutex_t mu;
  pthread_cond_t work;
  live_worker *w;
  size_t n;
  smr_i64v steps;       /* the steps after the latest refresh */
  smrules_live_info li; /* the live facts of the latest dispatch or tick */
  bool quit;
  _Atomic bool abandon;
};

bool runner_live_abandoned(const smr_runner *r) {
  return r->live && atomic_load(&r->live->abandon);
}

static bool worker_wants_time(const live_worker *w) {
  const smr_runner *r = w->r;
  if (!w->profilers)
    return runner_wants_time(r->v[w->u]);
  for (size_t i = 0; i < r->n; i++)
    if (runner_is_profiler(r->v[i]) && runner_wants_time(r->v[i]))
      return true;
  return false;
}

static void live_walk(live_worker *w, const smrules_live_info *li) {
  smr_runner *r = w->r;
  if (w->profilers) {
    runner_evaluate_profilers(r);
    return;
  }
  smr_instance *in = r->v[w->u];
  if (in->status == SMR_RULE_ERROR)
    return;
  runner_walk_begin(r, in, &w->steps, li);
  size_t pos = 0;
  runner_walk_steps(r, in, &w->steps, &pos, SIZE_MAX);
  runner_walk_end(r, in);
}

static void live_tick_worker(live_worker *w, const smrules_live_info *li) {
  smr_runner *r = w->r;
  for (size_t i = 0; i < r->n; i++)
    if (w->profilers ? runner_is_profiler(r->v[i]) : i == w->u)
      runner_tick_instance(r, r->v[i], li);
}

static void *live_main(void *arg) {
  live_worker *w = arg;
  struct live *lv = w->r->live;
  smr_trial_reader_thread(true);
  pthread_mutex_lock(&lv->mu);
  for (;;) {
    while (!w->walk_due && !w->tick_due && !lv->quit)
      pthread_cond_wait(&lv->work, &lv->mu);
    if (!w->walk_due && !w->tick_due)
      break; /* quit, with nothing left to do */
    bool walk = w->walk_due, tick = w->tick_due;
    w->walk_due = w->tick_due = false;
    if (walk) {
      w->steps.n = 0;
      for (size_t i = 0; i < lv->steps.n; i++)
        smr_i64v_push(&w->steps, lv->steps.v[i]);
    }
    smrules_live_info li = lv->li;
    pthread_mutex_unlock(&lv->mu);
    if (walk)
      live_walk(w, &li);
    if (tick)
      live_tick_worker(w, &li);
    /* a script's load_state or save_state may have read the trial: never
     * sleep inside its gate, a refresh would wait for ever */
    smr_trial_reader_leave();
    pthread_mutex_lock(&lv->mu);
  }
  pthread_mutex_unlock(&lv->mu);
  smr_trial_reader_thread(false);
  return NULL;
}

static void live_free(struct live *lv) {
  for (size_t i = 0; i < lv->n; i++)
    smr_i64v_free(&lv->w[i].steps);
  free(lv->w);
  smr_i64v_free(&lv->steps);
  pthread_cond_destroy(&lv->work);
  pthread_mutex_destroy(&lv->mu);
  free(lv);
}

bool smr_runner_live_start(smr_runner *r) {
  if (r->live)
    return true;
  struct live *lv = smr_xcalloc(1, sizeof *lv);
  pthread_mutex_init(&lv->mu, NULL);
  pthread_cond_init(&lv->work, NULL);
  lv->w = smr_xcalloc(r->n + 1, sizeof *lv->w);
  bool profilers = false;
  for (size_t i = 0; i < r->n; i++) {
    if (runner_is_profiler(r->v[i])) {
      profilers = true;
      continue;
    }
    lv->w[lv->n++] = (live_worker){.r = r, .u = i};
  }
  if (profilers)
    lv->w[lv->n++] = (live_worker){.r = r, .profilers = true};
  /* the data helpers get the cores no rule keeps busy, as offline */
  int jobs =
      r->opts.jobs > 0 ? r->opts.jobs : (int)sysconf(_SC_NPROCESSORS_ONLN);
  smr_workers_set(jobs > (int)lv->n ? jobs - (int)lv->n : 0);
  r->live = lv;
  for (size_t i = 0; i < lv->n; i++) {
    if (pthread_create(&lv->w[i].th, NULL, live_main, &lv->w[i]) != 0) {
      /* evaluate as before, one pass at a time */
      fprintf(stderr, "smrules: warning: cannot start a thread per rule; "
                      "rules are evaluated one pass at a time\n");
      lv->n = i;
      smr_runner_live_stop(r, false);
      return false;
    }
  }
  return true;
}

void smr_runner_live_dispatch(smr_runner *r) {
  struct live *lv = r->live;
  if (!lv) {
    smr_error e;
    smr_runner_run(r, &e);
    return;
  }
  smrules_live_info li = runner_live_info(r);
  pthread_mutex_lock(&lv->mu);
  lv->steps.n = 0;
  smr_trial_steps(r->trial, SMR_MODE_GLOBAL, true, &lv->steps);
  lv->li = li;
  for (size_t i = 0; i < lv->n; i++)
    lv->w[i].walk_due = true;
  pthread_cond_broadcast(&lv->work);
  pthread_mutex_unlock(&lv->mu);
}

void runner_live_tick(smr_runner *r, const smrules_live_info *li) {
  struct live *lv = r->live;
  pthread_mutex_lock(&lv->mu);
  lv->li = *li;
  for (size_t i = 0; i < lv->n; i++)
    lv->w[i].tick_due |= worker_wants_time(&lv->w[i]);
  pthread_cond_broadcast(&lv->work);
  pthread_mutex_unlock(&lv->mu);
}

void smr_runner_live_stop(smr_runner *r, bool abandon) {
  struct live *lv = r->live;
  if (!lv)
    return;
  if (abandon)
    atomic_store(&lv->abandon, true);
  pthread_mutex_lock(&lv->mu);
  lv->quit = true;
  pthread_cond_broadcast(&lv->work);
  pthread_mutex_unlock(&lv->mu);
  for (size_t i = 0; i < lv->n; i++)
    pthread_join(lv->w[i].th, NULL);
  r->live = NULL;
  live_free(lv);
}

int smr_runner_refresh(smr_runner *r, smr_error *err) {
  pthread_mutex_lock(&r->db_mu);
  int rc = smr_trial_refresh(r->trial, NULL, err);
  pthread_mutex_unlock(&r->db_mu);
  return rc;
}

void smr_runner_lock_results(smr_runner *r) {
  pthread_mutex_lock(&r->mu);
}

void smr_runner_unlock_results(smr_runner *r) {
  pthread_mutex_unlock(&r->mu);
}
