/* runner.h - the rule invocation loop
 * (docs/rule-semantics.md#how-rules-are-invoked with Decision F12): every
 * configured rule instance, independent of the others, over the trial's saved
 * global steps in [start_step, end_step), in parallel across instances. */
#ifndef SMR_RUNNER_H
#define SMR_RUNNER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/common.h"
#include "config/config.h"
#include "lua/lua_rule.h"
#include "trial/trial.h"

typedef enum smr_rule_status {
  SMR_RULE_IN_PROGRESS,
  SMR_RULE_NO_ISSUES,
  SMR_RULE_ISSUES,
  SMR_RULE_ERROR,
  SMR_RULE_NO_DATA /* finished, evaluated nothing: "NoData" (not SageMaker's) */
} smr_rule_status;
const char *smr_rule_status_name(smr_rule_status s); /* SageMaker's names */

typedef struct smr_instance smr_instance;

/* Called (from the evaluating thread) at each trigger of an instance. */
typedef void (*smr_trigger_fn)(void *arg, smr_instance *inst, int64_t step);

/* The order rules are evaluated in (schedule.h).  Auto: lock step when
 * the trial has a shared record cache (S3), else whole rules. */
typedef enum smr_schedule {
  SMR_SCHEDULE_AUTO,
  SMR_SCHEDULE_RULES, /* each rule over all steps, rules side by side */
  SMR_SCHEDULE_STEPS  /* all rules step by step, in lock step */
} smr_schedule;

typedef struct smr_run_opts {
  int64_t start_step, end_step; /* -1: unset (per-rule values win) */
  int jobs;                     /* threads; <= 0: number of cores */
  smr_schedule schedule;
  bool live;  /* stop at a step that is not yet available (InProgress) */
  bool fresh; /* do not read or write stored rule state */
  smr_lua_limits lua;
  const char
      *output_dir; /* rule-output directory (NULL: <trial>/rule-output) */
  /* profiler-output folder read by profiler rules (NULL: none) */
  const char *profiler_dir;
  /* Profiler windows end as SageMaker's do: the last minute of data (the
   * window starting at the newest file) is never evaluated.  Default off:
   * once training has ended the final, partial window is evaluated too. */
  bool sagemaker_windows;
  smr_trigger_fn on_trigger;
  void *on_trigger_arg;
  /* Asked before each step (NULL: never): true stops every rule where it
   * is, InProgress, its state kept so that a later run goes on there (an
   * offline run interrupted by SIGINT/SIGTERM). */
  bool (*interrupted)(void);
} smr_run_opts;

typedef struct smr_runner smr_runner;

/* Create every instance: load plugins, check parameters, load Lua
 * scripts.  A configuration problem is an error here, before anything is
 * evaluated (SMR_ERR_USAGE with file and line:column). */
int smr_runner_new(const smr_config *cfg, smr_trial *trial,
                   const smr_run_opts *opts, smr_runner **out, smr_error *err);
/* Evaluate; resumes from stored state unless opts->fresh.  Safe to call
 * again after a refresh of the trial (watch mode). */
int smr_runner_run(smr_runner *r, smr_error *err);
/* Wall-clock evaluation while following a run: rules that define
 * invoke_at_time are called with the current time; `last_activity` is
 * when a new step last appeared (epoch seconds). */
void smr_runner_tick(smr_runner *r, double last_activity);
/* Progress of smr_runner_run, safe to read from another thread: steps
 * walked so far and to walk in all, over the rules that go by steps. */
void smr_runner_progress(smr_runner *r, int64_t *done, int64_t *total);
/* Whether any rule defines invoke_at_time (needs periodic ticks). */
bool smr_runner_has_clock_rules(const smr_runner *r);

/* Live evaluation (docs/live.md#one-slow-rule-delays-no-other): a thread
 * per step rule and one for the profiler rules, so that no rule waits for
 * another.  Start once before the watch (false: the threads could not be
 * made; passes are then evaluated one at a time, as offline).  Dispatch
 * after each refresh: every rule walks the steps the trial has now (one
 * still busy does so when its call is over); it returns at once.  While
 * they run, smr_runner_tick hands the ticks to the same threads.  Stop
 * waits until every rule has done what it was given, and ends the
 * threads; with `abandon` (a signal) a rule stops at its next step
 * instead, InProgress.  Results read from another thread meanwhile (the
 * progress display, metrics) are read under smr_runner_lock_results. */
bool smr_runner_live_start(smr_runner *r);
void smr_runner_live_dispatch(smr_runner *r);
void smr_runner_live_stop(smr_runner *r, bool abandon);
/* Refresh the runner's trial, serialized with the rules' state writes. */
int smr_runner_refresh(smr_runner *r, smr_error *err);
void smr_runner_lock_results(smr_runner *r);
void smr_runner_unlock_results(smr_runner *r);

/* Let every rule that evaluated something add its summary (finish) and
 * store the final state.  Call once when evaluation is over. */
void smr_runner_finish(smr_runner *r);
void smr_runner_free(smr_runner *r);

size_t smr_runner_count(const smr_runner *r);
smr_instance *smr_runner_instance(smr_runner *r, size_t i);

/* Results of one instance. */
const char *smr_instance_name(const smr_instance *i);
const char *smr_instance_rule(const smr_instance *i);
smr_rule_status smr_instance_status(const smr_instance *i);
const smr_i64v *smr_instance_triggered(const smr_instance *i);
int64_t smr_instance_evaluated(const smr_instance *i);
const smr_i64v *smr_instance_skipped(const smr_instance *i); /* no data */
/* Steps the rule passed over by design (SMRULES_NOT_DUE) in this run. */
int64_t smr_instance_not_due(const smr_instance *i);
/* What a rule looked for and what the trial has (run/nodata.h). */
struct smr_nodata;
void smr_instance_nodata(smr_runner *r, const smr_instance *i,
                         struct smr_nodata *out);
smr_trial *smr_runner_trial(smr_runner *r);
bool smr_runner_fresh(const smr_runner *r); /* opts.fresh (and --dry-run) */
int64_t smr_instance_waiting_at(const smr_instance *i); /* -1 if not */
const char *smr_instance_message(const smr_instance *i);
/* The report object (docs/rule-semantics.md#the-report) as JSON text. */
char *smr_instance_report(smr_instance *i);
const smr_rule_config *smr_instance_config(const smr_instance *i);
/* A profiler rule: its steps are time windows (runner_profiler.h). */
bool smr_instance_is_profiler(const smr_instance *i);

#endif
