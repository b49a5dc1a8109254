/* runner_int.h - private to core/run/: the runner and its instances,
 * shared by runner.c (setup, stored state, results), runner_loop.c (the
 * walk over steps, profiler rules, turns, ticks, finish) and
 * runner_live.c (a live run's threads).  Not for other modules. */
#ifndef SMR_RUNNER_INT_H
#define SMR_RUNNER_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "host/rulehost.h"
#include "run/runner.h"
#include "run/runner_profiler.h"

struct smr_instance {
  const smr_rule_config *cfg;
  char *name;
  smr_rule *rule; /* the host side: kind, context, implementation */
  int64_t start, end;
  char *config_hash;
  /* results */
  smr_rule_status status;
  smr_i64v triggered, skipped;
  int64_t evaluated, last_step, waiting_at;
  int64_t not_due; /* steps the rule passes over by design (this run) */
  char *message;
  char *stored_report;    /* reused when nothing new was evaluated */
  bool needs_finish;      /* evaluated something since the last finish */
  bool resumed;           /* stored state was looked at (once per run) */
  bool stats_only;        /* its last turn read values only for statistics */
  bool restored;          /* the rule's own state came back too */
  smr_prof_run *prof_run; /* profiler rules: see runner_profiler.c */
  /* rules on the clock (runner_tick_instance, on the rule's own thread): the
   * system metrics recorded beside a live run, and each worker's newest
   * step as of the last refresh */
  struct smr_profiler *metrics;
  smr_strv live_names; /* copies: the gate is left before the rule's call */
  int64_t *live_steps;
  /* the walk in progress (runner_walk_begin .. runner_walk_end) */
  bool walk_begun, walk_stopped, walk_evaluated;
  int64_t walk_prev;
};

struct smr_runner {
  smr_trial *trial;
  smr_run_opts opts;
  smr_instance **v;
  size_t n;
  smr_i64v steps;       /* global steps of the current run */
  double last_activity; /* when a new step last appeared (watch) */
  bool warned_cache;    /* the record cache is small for the trial */
  size_t window;        /* lock step: lag + read-ahead, in steps */
  /* profiler rules: the reader they share, and the instance whose turn
   * evaluates them all (SIZE_MAX: none), see runner_evaluate_profilers */
  struct smr_profiler *prof_shared;
  size_t prof_lead;
  /* rules driven by the clock: the system metrics recorded beside a live
   * run (opts.profiler_dir), opened once they exist (see live_metrics) */
  /* steps walked / to walk by step rules in this run (progress display) */
  _Atomic int64_t progress_done, progress_total;
  /* Taken while an instance's results change, and by whoever reads them
   * from another thread (smr_runner_lock_results): in a live run the rules
   * are evaluated by threads of their own (struct live) while the watch
   * shows them. */
  pthread_mutex_t mu;
  /* Taken while the state file is read or written (rule state, a
   * refresh's catalog transaction), before `mu` when both are. */
  pthread_mutex_t db_mu;
  struct live *live; /* NULL: not started (smr_runner_live_start) */
};

/* runner.c: stored state.  Resume from it where that gives exactly the
 * results of a full evaluation; drop what stood once new steps arrive;
 * save takes `db_mu`, save_locked expects it taken. */
void runner_resume(smr_runner *r, smr_instance *in, const smr_i64v *steps,
                   int64_t newest_step);
void runner_drop_stored(smr_instance *in);
void runner_save(smr_runner *r, smr_instance *in);
void runner_save_locked(smr_runner *r, smr_instance *in);

/* runner_loop.c: what a live run's threads call. */
bool runner_is_profiler(const smr_instance *in);
bool runner_wants_time(const smr_instance *in); /* a clock rule */
smrules_live_info runner_live_info(smr_runner *r);
void runner_evaluate_profilers(smr_runner *r);
void runner_walk_begin(smr_runner *r, smr_instance *in, const smr_i64v *steps,
                       const smrules_live_info *li);
bool runner_walk_steps(smr_runner *r, smr_instance *in, const smr_i64v *steps,
                       size_t *pos, size_t limit);
void runner_walk_end(smr_runner *r, smr_instance *in);
void runner_tick_instance(smr_runner *r, smr_instance *in,
                          const smrules_live_info *li);

/* runner_live.c: whether a live run is being given up (its rules stop
 * where they are), and a tick handed to the rules' threads. */
bool runner_live_abandoned(const smr_runner *r);
void runner_live_tick(smr_runner *r, const smrules_live_info *li);

#endif
