/* runner_loop.c - the invocation loop: a step rule's walk over the steps,
 * the profiler rules' windows in one turn, the turns the schedule hands
 * out (schedule.h), clock ticks and finish. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/workers.h"
#include "host/data.h"
#include "host/rulehost.h"
#include "profiler/profiler.h"
#include "run/runner_int.h"
#include "run/schedule.h"
#include "source/source.h"
#include "trial/trial.h"

/* ---------------------------------------------------------- the loop */

static void set_error(smr_instance *in, const char *fallback) {
  const char *why = smr_ctx_failure(in->rule->ctx);
  free(in->message);
  in->message = smr_xstrdup(why ? why : fallback);
  in->status = SMR_RULE_ERROR;
}

static bool record_step(smr_instance *in, int64_t g, int rc);

/* One step; returns false when the loop must stop.  In a live run the
 * trial is read inside its reader gate (trial.h): the availability here,
 * and whatever the rule reads until its call returns (a rule that reads
 * nothing, or a script between its reads, holds nothing: a rule waiting
 * on something else never holds up a refresh); the result is recorded
 * under the runner's lock. */
static bool invoke_step(smr_runner *r, smr_instance *in, int64_t g) {
  if (r->opts.live) {
    smr_trial_reader_enter(r->trial);
    smr_availability a =
        smr_trial_has_passed_step(r->trial, g, SMR_MODE_GLOBAL);
    smr_trial_reader_leave();
    if (a == SMR_NOT_YET_AVAILABLE) {
      in->waiting_at = g;
      return false;
    }
    if (a == SMR_UNAVAILABLE)
      return true;
  }
  smr_ctx_step_begin(in->rule->ctx, g);
  int rc = in->rule->ops->invoke_at_step(in->rule->impl, in->rule->ctx, g);
  bool fired = rc == SMRULES_TRIGGERED;
  smr_ctx_step_end(in->rule->ctx, g, fired);
  smr_trial_reader_leave();
  pthread_mutex_lock(&r->mu);
  bool go_on = record_step(in, g, rc);
  pthread_mutex_unlock(&r->mu);
  if (go_on && fired && r->opts.on_trigger)
    r->opts.on_trigger(r->opts.on_trigger_arg, in, g);
  return go_on;
}

/* A step's result into the instance; false when the walk must stop. */
static bool record_step(smr_instance *in, int64_t g, int rc) {
  switch (rc) {
  case SMRULES_TRIGGERED:
    smr_i64v_push(&in->triggered, g);
    /* fall through */
  case SMRULES_NO_TRIGGER:
    in->evaluated++;
    break;
  case SMRULES_SKIPPED:
  case SMRULES_STEP_UNAVAILABLE:
  case SMRULES_TENSOR_UNAVAILABLE_FOR_STEP:
  case SMRULES_TENSOR_UNAVAILABLE:
    smr_i64v_push(&in->skipped, g);
    break;
  case SMRULES_NOT_DUE: /* by design: neither evaluated nor missing data */
    in->not_due++;
    break;
  case SMRULES_NO_MORE_DATA:
    return false;
  case SMRULES_STEP_NOT_YET:
    in->waiting_at = g;
    return false;
  default:
    set_error(in, "the rule failed without a message");
    return false;
  }
  in->last_step = g;
  return true;
}

/* ------------------------------------------------ profiler rules (hook) */

bool runner_is_profiler(const smr_instance *in) {
  return in->rule->profiler;
}

bool smr_instance_is_profiler(const smr_instance *in) {
  return runner_is_profiler(in);
}

typedef struct prof_trigger_arg {
  smr_runner *r;
  smr_instance *in;
} prof_trigger_arg;

static void prof_trigger(void *arg, int64_t window) {
  prof_trigger_arg *a = arg;
  if (a->r->opts.on_trigger)
    a->r->opts.on_trigger(a->r->opts.on_trigger_arg, a->in, window);
}

/* Windows instead of steps (runner_profiler.c); no resume from stored
 * state: a new run evaluates every window again (same results). */
/* A rule that fired is IssuesFound from then on, also while it waits
 * for more steps: its status never depends on how many runs it took. */
/* Finished without evaluating anything is NoData, not a pass
 * (docs/rule-semantics.md#rules-that-evaluate-nothing); a rule driven by
 * the clock evaluates nothing by steps and is left out. */
static smr_rule_status live_status(const smr_instance *in) {
  if (in->triggered.n)
    return SMR_RULE_ISSUES;
  if (in->waiting_at >= 0)
    return SMR_RULE_IN_PROGRESS;
  if (in->evaluated == 0 && !runner_wants_time(in))
    return SMR_RULE_NO_DATA;
  return SMR_RULE_NO_ISSUES;
}

static smr_prof_loop profiler_loop(smr_runner *r, smr_instance *in,
                                   prof_trigger_arg *ta) {
  return (smr_prof_loop){.dir = r->opts.profiler_dir,
                         .shared = &r->prof_shared,
                         .live = r->opts.live,
                         .final_window = !r->opts.sagemaker_windows,
                         .scan_interval_us = in->rule->window_us,
                         .start = in->start,
                         .end = in->end,
                         .ctx = in->rule->ctx,
                         .ops = in->rule->ops,
                         .impl = in->rule->impl,
                         .triggered = &in->triggered,
                         .evaluated = &in->evaluated,
                         .last_step = &in->last_step,
                         .waiting_at = &in->waiting_at,
                         .on_trigger = prof_trigger,
                         .on_trigger_arg = ta,
                         .results_mu = &r->mu};
}

/* The rule's next window, if there is one to evaluate now; false when the
 * rule is done for this pass (finished, waiting for data, or failed). */
static bool profiler_window(smr_runner *r, smr_instance *in) {
  int64_t k = in->last_step + 1 > in->start ? in->last_step + 1 : in->start;
  if (in->end >= 0 && k >= in->end)
    return false;
  prof_trigger_arg ta = {r, in};
  smr_prof_loop l = profiler_loop(r, in, &ta);
  l.end = k + 1;
  int64_t last = in->last_step;
  char *msg = NULL;
  bool more = true;
  if (smr_prof_loop_run(&in->prof_run, &l, &msg) != SMR_OK) {
    smr_ctx_set_failure(in->rule->ctx, msg);
    pthread_mutex_lock(&r->mu);
    set_error(in, "the rule failed");
    pthread_mutex_unlock(&r->mu);
    more = false;
  }
  free(msg);
  return more && in->last_step != last;
}

/* Every profiler rule, window by window side by side: window k of each
 * rule before window k + 1 of any.  They share one reader, whose cache then
 * holds the files around window k for all of them, so each file is read
 * (fetched, from S3) and parsed once per run however many rules ask for
 * it; rule after rule, each would read the whole job again.  Each rule's
 * windows, triggers and results are those it has alone. */
void runner_evaluate_profilers(smr_runner *r) {
  bool *active = smr_xcalloc(r->n, sizeof *active);
  int64_t *before = smr_xcalloc(r->n, sizeof *before);
  for (size_t i = 0; i < r->n; i++) {
    active[i] =
        runner_is_profiler(r->v[i]) && r->v[i]->status != SMR_RULE_ERROR;
    before[i] = r->v[i]->evaluated;
  }
  for (bool any = true; any;) {
    any = false;
    for (size_t i = 0; i < r->n; i++) {
      if (!active[i])
        continue;
      active[i] = profiler_window(r, r->v[i]);
      any |= active[i];
    }
  }
  for (size_t i = 0; i < r->n; i++) {
    smr_instance *in = r->v[i];
    if (!runner_is_profiler(in))
      continue;
    pthread_mutex_lock(&r->db_mu);
    pthread_mutex_lock(&r->mu);
    if (in->status != SMR_RULE_ERROR)
      in->status = live_status(in);
    in->needs_finish |= in->evaluated > before[i];
    runner_save_locked(r, in);
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_unlock(&r->db_mu);
  }
  free(before);
  free(active);
}

/* Steps between two saved ones were never written; live, smdebug waits at
 * the first of them while the step after the gap is not complete yet
 * (has_passed_step is NOT_YET_AVAILABLE there, docs/formats.md#step-states). */
static bool waits_in_gap(smr_runner *r, int64_t prev, int64_t g) {
  return g > prev + 1 &&
         smr_trial_has_passed_step(r->trial, prev + 1, SMR_MODE_GLOBAL) ==
             SMR_NOT_YET_AVAILABLE;
}

/* A step instance's walk over the run's step list, in turns (schedule.h):
 * runner_walk_begin once, runner_walk_steps for each turn, runner_walk_end when
 * it is over. */
void runner_walk_begin(smr_runner *r, smr_instance *in, const smr_i64v *steps,
                       const smrules_live_info *li) {
  int64_t newest = steps->n ? steps->v[steps->n - 1] : -1;
  pthread_mutex_lock(&r->db_mu);
  pthread_mutex_lock(&r->mu);
  if (!in->resumed) {
    in->resumed = true;
    runner_resume(r, in, steps, newest);
  }
  if (in->stored_report && newest > in->last_step)
    runner_drop_stored(in);
  pthread_mutex_unlock(&r->mu);
  pthread_mutex_unlock(&r->db_mu);
  smr_ctx_set_live(in->rule->ctx, li);
  in->waiting_at = -1;
  in->walk_stopped = in->walk_evaluated = false;
  int64_t first = in->start > 0 ? in->start : 0;
  in->walk_prev = in->last_step >= first ? in->last_step : first - 1;
}

/* Steps from position *pos until `limit`; true when the walk is over.
 * Steps already evaluated (resumed state) are passed over freely: only
 * evaluated steps count against the turn. */
bool runner_walk_steps(smr_runner *r, smr_instance *in, const smr_i64v *steps,
                       size_t *pos, size_t limit) {
  if (in->stored_report)
    return true;
  while (*pos < steps->n) {
    int64_t g = steps->v[*pos];
    if (g <= in->last_step || g < in->start) {
      (*pos)++;
      if (g >= in->start && (in->end < 0 || g < in->end))
        r->progress_done++; /* resumed: done before */
      continue;
    }
    if (*pos >= limit)
      return false;
    if (in->end >= 0 && g >= in->end)
      return true;
    smr_trial_reader_enter(r->trial);
    bool gap = r->opts.live && waits_in_gap(r, in->walk_prev, g);
    smr_trial_reader_leave();
    if (gap) {
      in->waiting_at = in->walk_prev + 1;
      in->walk_stopped = true;
      return true;
    }
    if ((r->opts.interrupted && r->opts.interrupted()) ||
        runner_live_abandoned(r)) {
      in->waiting_at = g; /* not evaluated: InProgress, resumed there */
      in->walk_stopped = true;
      return true;
    }
    in->walk_evaluated = true;
    in->walk_stopped = !invoke_step(r, in, g);
    in->walk_prev = g;
    (*pos)++;
    r->progress_done++;
    if (in->walk_stopped)
      return true;
  }
  return true;
}

void runner_walk_end(smr_runner *r, smr_instance *in) {
  /* Live, smdebug's invoker goes on to the next integer step and waits
   * there until training writes it or ends. */
  int64_t next = in->walk_prev + 1;
  smr_trial_reader_enter(r->trial);
  bool all = smr_trial_loaded_all_steps(r->trial);
  smr_trial_reader_leave();
  /* the status the watch shows is the one stored: a run killed once it
   * printed "IssuesFound" resumes after that trigger */
  pthread_mutex_lock(&r->db_mu);
  pthread_mutex_lock(&r->mu);
  if (r->opts.live && !in->walk_stopped && !in->stored_report && !all &&
      (in->end < 0 || next < in->end))
    in->waiting_at = next;
  if (in->status != SMR_RULE_ERROR) {
    in->status = live_status(in);
  }
  in->needs_finish |= in->walk_evaluated;
  runner_save_locked(r, in);
  pthread_mutex_unlock(&r->mu);
  pthread_mutex_unlock(&r->db_mu);
}

/* After a turn: whether it read values only for statistics.  A turn that
 * read none (its statistics all found in the cache) keeps what the turn
 * before said: it was found because it went after the rules that read the
 * values, and, called a rule that reads values, it went before them at
 * the next step and read them itself, every other step (AllZero, the
 * counts of every large tensor at steps 0, 2, 4, 6 and 8 of the cnn
 * trial). */
static void note_stats_only(smr_instance *in) {
  uint64_t values, for_stats;
  smr_data_reads(&values, &for_stats);
  if (values || for_stats)
    in->stats_only = for_stats > 0 && values == 0;
}

/* One turn of one instance (smr_sched_fn). */
static bool run_turn(void *arg, size_t u, size_t *pos, size_t limit) {
  smr_runner *r = arg;
  smr_instance *in = r->v[u];
  if (runner_is_profiler(in)) {
    /* the lead's turn evaluates them all (runner_evaluate_profilers); the
     * others' turns are over at once, touching nothing the lead's thread
     * changes */
    if (u == r->prof_lead)
      runner_evaluate_profilers(r);
    return true;
  }
  if (in->status == SMR_RULE_ERROR)
    return true;
  if (*pos == 0 && !in->walk_begun) {
    in->walk_begun = true;
    smrules_live_info li = runner_live_info(r);
    runner_walk_begin(r, in, &r->steps, &li);
  }
  smr_data_reads_reset();
  bool more = runner_walk_steps(r, in, &r->steps, pos, limit);
  note_stats_only(in);
  if (!more)
    return false;
  runner_walk_end(r, in);
  in->walk_begun = false;
  return true;
}

/* Whether the unit's last turn read values only for statistics (its
 * thread, after the turn: smr_sched.stats_only). */
static bool turn_stats_only(void *arg, size_t u) {
  smr_runner *r = arg;
  return r->v[u]->stats_only;
}

/* The large records the unit's turn held at most (its thread, after the
 * turn: smr_sched.turn_bytes). */
static size_t turn_record_bytes(void *arg, size_t u) {
  (void)arg;
  (void)u;
  return smr_source_turn_record_bytes();
}

/* What a rule's turn is expected to hold at least, once records too large
 * to be shared have been read (smr_sched.turn_bytes_floor): two of the
 * largest, as a rule comparing a step with the one before holds. */
static size_t turn_bytes_floor(void *arg) {
  (void)arg;
  return 2 * smr_source_largest_record();
}

/* What the running turns reserve (smr_sched.turns_reserved), and the
 * records held beyond any turn's (smr_sched.extra_bytes): a rule's work
 * done in another's turn (host/value_pairs.c) fits between them. */
static void turns_reserved(void *arg, size_t bytes) {
  (void)arg;
  smr_source_set_turns_reserved(bytes);
}

static size_t extra_record_bytes(void *arg) {
  (void)arg;
  return smr_source_extra_bytes();
}

/* In lock step, the read-ahead reaches at most `window` steps past the
 * slowest rule (smr_sched.slowest_moved). */
static void read_ahead_horizon(void *arg, size_t pos) {
  smr_runner *r = arg;
  if (!r->steps.n)
    return;
  size_t last = pos + r->window < r->steps.n ? pos + r->window : r->steps.n - 1;
  smr_trial_set_prefetch_horizon(r->trial, r->steps.v[last]);
}

/* Lock step when rules share a remote trial's record cache (schedule.h):
 * each record is then fetched once for all rules.  The records between
 * the slowest rule and the furthest read-ahead must stay cached until the
 * slowest rule has read them, so lag and read-ahead together span half of
 * the steps the cache holds (the lag a quarter, the read-ahead the rest);
 * the other half is left for rules that look back or ahead and
 * for steps larger than the mean.  Measured on the 1 GB bench trial
 * (64 MB cache, 7 steps): spans of 6-8 steps evicted records before the
 * slowest rule read them and 17-70 % were fetched twice. */
#define LOCAL_LAG 2

static void choose_order(smr_runner *r, smr_sched *s) {
  size_t positional = 0;
  for (size_t i = 0; i < r->n; i++)
    positional += !runner_is_profiler(r->v[i]);
  size_t cached = smr_trial_cached_steps(r->trial);
  /* Local trials too: rules asking for the same value's statistics at
   * about the same time share them (trial/stats_cache.h). */
  bool lock = r->opts.schedule == SMR_SCHEDULE_STEPS ||
              (r->opts.schedule == SMR_SCHEDULE_AUTO && positional > 1);
  /* only step rules read records, and only a trial with more steps than
   * the cache holds makes a second one fetch them again */
  if (cached && cached < 4 && positional > 1 && r->steps.n > cached &&
      !r->warned_cache) {
    r->warned_cache = true;
    fprintf(stderr,
            "smrules: warning: the S3 record cache holds %zu step(s) of this "
            "trial; rules will fetch records more than once (raise "
            "SMRULES_S3_CACHE_MB, docs/s3.md)\n",
            cached);
  }
  size_t quarter = cached / 4 > 64 ? 64 : cached / 4 ? cached / 4 : 1;
  size_t half = cached / 2 > 128 ? 128 : cached / 2;
  half = half > quarter ? half - quarter : 1; /* lag + read-ahead <= half */
  s->block = lock ? 1 : SMR_SCHED_ALL;
  /* A local trial has no record cache to span: a lag of 2 lets a thread
   * that has finished its turns of step s start on s + 1 instead of
   * waiting for the last long turn of s.  On the 1 GB bench trial (twelve
   * and twenty rules, two threads) the threads then waited 0.01 s instead
   * of 0.05-0.07 s, the runs took 0.95 and 0.92 of the time, the same
   * records were shared, and peak memory did not grow. */
  s->lag = cached ? quarter : LOCAL_LAG;
  /* Rule after rule, each rule would need its own read-ahead window and
   * the cache would not bound them: read-ahead belongs to lock step. */
  smr_trial_set_prefetch(r->trial, lock && cached ? half : 0, r->opts.end_step);
  smr_trial_share_records(r->trial, lock && positional > 1);
  size_t threads = s->jobs > 0 ? (size_t)s->jobs : 1;
  smr_source_set_turn_slots(threads < positional ? threads : positional);
  if (lock && !cached) { /* a local trial's records, read by the rules */
    s->budget = smr_source_record_budget();
    s->turn_bytes = turn_record_bytes;
    s->turn_bytes_floor = turn_bytes_floor;
    s->turns_reserved = turns_reserved;
    s->extra_bytes = extra_record_bytes;
  }
  if (lock && cached) {
    r->window = s->lag + half;
    s->slowest_moved = read_ahead_horizon;
    read_ahead_horizon(r, 0);
  }
}

/* How many (instance, step) pairs the step rules walk in this run. */
static void count_progress_total(smr_runner *r, const bool *positional) {
  int64_t total = 0;
  for (size_t i = 0; i < r->n; i++) {
    const smr_instance *in = r->v[i];
    for (size_t k = 0; positional[i] && k < r->steps.n; k++)
      total += r->steps.v[k] >= in->start &&
               (in->end < 0 || r->steps.v[k] < in->end);
  }
  r->progress_done = 0;
  r->progress_total = total;
}

void smr_runner_progress(smr_runner *r, int64_t *done, int64_t *total) {
  *done = r->progress_done;
  *total = r->progress_total;
}

int smr_runner_run(smr_runner *r, smr_error *err) {
  (void)err;
  int jobs =
      r->opts.jobs > 0 ? r->opts.jobs : (int)sysconf(_SC_NPROCESSORS_ONLN);
  bool *positional = smr_xcalloc(r->n ? r->n : 1, sizeof *positional);
  r->prof_lead = SIZE_MAX;
  int step_rules = 0;
  for (size_t i = 0; i < r->n; i++) {
    positional[i] = !runner_is_profiler(r->v[i]);
    step_rules += positional[i];
    r->v[i]->walk_begun = false;
    if (!positional[i] && r->prof_lead == SIZE_MAX)
      r->prof_lead = i;
  }
  /* A rule's loops over many tensors (api->query) use the threads
   * that no rule keeps busy: with as many rules as threads, helpers would
   * only compete with them (and hold buffers of their own). */
  smr_workers_set(jobs > step_rules ? jobs - step_rules : 0);
  r->steps.n = 0;
  smr_trial_steps(r->trial, SMR_MODE_GLOBAL, true, &r->steps);
  count_progress_total(r, positional);
  smr_sched s = {.units = r->n,
                 .positional = positional,
                 .jobs = jobs < 1 ? 1 : jobs,
                 .run = run_turn,
                 .stats_only = turn_stats_only,
                 .arg = r};
  choose_order(r, &s);
  smr_sched_run(&s);
  free(positional);
  return SMR_OK;
}

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The live facts every rule can ask for (api->live_info). */
smrules_live_info runner_live_info(smr_runner *r) {
  smr_i64v steps = {0};
  smr_trial_steps(r->trial, SMR_MODE_GLOBAL, true, &steps);
  smrules_live_info li = {
      .live = r->opts.live,
      .training_ended = smr_trial_end_marker(r->trial),
      .now = wall_now(),
      .last_activity = r->last_activity > 0 ? r->last_activity : wall_now(),
      .newest_step = steps.n ? steps.v[steps.n - 1] : -1};
  smr_i64v_free(&steps);
  return li;
}

bool runner_wants_time(const smr_instance *in) {
  return smr_rule_wants_time(in->rule);
}

/* The system metrics being recorded beside a live run (smrules monitor
 * into the job's profiler folder, run --profile), for a rule on the
 * clock; NULL until the folder exists.  A reader per instance: each is
 * used by its rule's own thread only.  Quiet: a profiler rule of the run
 * reports the data's problems. */
static struct smr_profiler *live_metrics(smr_runner *r, smr_instance *in) {
  if (in->metrics || !r->opts.live || !r->opts.profiler_dir)
    return in->metrics;
  /* a small cache: it reads only the span of a silence, when a rule fires */
  smr_profiler_opts po = {.live = true, .quiet = true, .cache_bytes = 2 << 20};
  smr_error err;
  smr_error_clear(&err);
  if (smr_profiler_open(r->opts.profiler_dir, &po, &in->metrics, &err) !=
      SMR_OK)
    in->metrics = NULL; /* not there yet: tried again at the next tick */
  return in->metrics;
}

/* Each worker's newest step (trial.h), for api->live_workers: copied
 * inside the trial's reader gate, which is left before the rule's call, so
 * a rule that holds (a clock rule waiting on something) never holds up
 * the refresh that other rules' new steps wait for. */
static void live_workers(smr_runner *r, smr_instance *in) {
  smr_trial_reader_enter(r->trial);
  const char *name = NULL;
  int64_t step = 0;
  size_t n = smr_trial_worker_latest(r->trial, 0, &name, &step);
  smr_strv_free(&in->live_names);
  in->live_steps = smr_xrealloc(in->live_steps, (n ? n : 1) * sizeof(int64_t));
  for (size_t i = 0; i < n; i++) {
    smr_trial_worker_latest(r->trial, i, &name, &in->live_steps[i]);
    smr_strv_push(&in->live_names, name);
  }
  smr_trial_reader_leave();
  smr_ctx_set_live_workers(in->rule->ctx, (const char *const *)in->live_names.v,
                           in->live_steps, n);
}

void runner_tick_instance(smr_runner *r, smr_instance *in,
                          const smrules_live_info *li) {
  if (!runner_wants_time(in) || in->status == SMR_RULE_ERROR)
    return;
  int64_t at = li->newest_step >= 0 ? li->newest_step : 0;
  live_workers(r, in);
  smr_ctx_attach_system_metrics(in->rule->ctx, live_metrics(r, in));
  smr_ctx_set_live(in->rule->ctx, li);
  smr_ctx_step_begin(in->rule->ctx, at);
  int rc =
      in->rule->ops->invoke_at_time(in->rule->impl, in->rule->ctx, li->now);
  smr_trial_reader_leave(); /* taken by the rule's own reads, if any */
  /* one trigger per step: a stall that goes on is the same trigger */
  bool fired = rc == SMRULES_TRIGGERED &&
               !(in->triggered.n && in->triggered.v[in->triggered.n - 1] == at);
  smr_ctx_step_end(in->rule->ctx, at, fired);
  pthread_mutex_lock(&r->mu);
  if (rc < 0)
    set_error(in, "the rule failed without a message");
  if (rc >= 0 && fired) {
    smr_i64v_push(&in->triggered, at);
    in->status = SMR_RULE_ISSUES; /* fired: so it stays (live_status) */
    in->needs_finish = true;
  }
  pthread_mutex_unlock(&r->mu);
  if (rc >= 0 && fired && r->opts.on_trigger)
    r->opts.on_trigger(r->opts.on_trigger_arg, in, at);
}

bool smr_runner_has_clock_rules(const smr_runner *r) {
  for (size_t i = 0; i < r->n; i++)
    if (runner_wants_time(r->v[i]))
      return true;
  return false;
}

void smr_runner_tick(smr_runner *r, double last_activity) {
  r->last_activity = last_activity;
  smrules_live_info li = runner_live_info(r);
  if (r->live) { /* each rule's own thread calls it */
    runner_live_tick(r, &li);
    return;
  }
  for (size_t i = 0; i < r->n; i++)
    runner_tick_instance(r, r->v[i], &li);
}

/* A rule's finish() adds its summary to the report once, when evaluation
 * is over (after one run, or when a watch ends), not after every pass. */
void smr_runner_finish(smr_runner *r) {
  for (size_t i = 0; i < r->n; i++) {
    smr_instance *in = r->v[i];
    if (!in->needs_finish)
      continue;
    in->needs_finish = false;
    if (in->status != SMR_RULE_ERROR && in->rule->ops->finish &&
        in->rule->ops->finish(in->rule->impl, in->rule->ctx) < 0)
      set_error(in, "the rule's finish step failed");
    runner_save(r, in);
  }
}
