/* runner_profiler.h - the invocation loop of profiler rules (see
 * docs/formats.md#timestamps-and-windows,
 * docs/rule-semantics.md#profiler-rules-windows): window k = [first + k*S,
 * first + (k+1)*S], both ends inclusive, S = the rule's scan_interval_us; the
 * loop ends with NoMoreProfilerData at the first window starting at or after
 * `latest` once the job has finished (offline runs: always, Decision F11).
 * `triggered_steps` are window indices.  Used by runner_loop.c only. */
#ifndef SMR_RUNNER_PROFILER_H
#define SMR_RUNNER_PROFILER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/common.h"
#include "host/rulectx.h"

/* The most time windows a job's profiler data may span: 694 days at the
 * default 60 s.  Timestamps further apart (a stray file, a forged one)
 * would cost a walk and memory per window: the rule fails instead,
 * saying why (docs/profiler.md#memory-over-a-long-job). */
#define SMR_MAX_PROFILER_WINDOWS 1000000LL

/* What one evaluation pass needs and updates (the instance's fields). */
typedef struct smr_prof_loop {
  const char *dir; /* the profiler-output folder, NULL when there is none */
  /* The reader the profiler rules of a run share (profiler.h): the first
   * rule to open one leaves a reference here, the others share it; the
   * owner closes it with smr_prof_shared_close.  NULL: a reader of its
   * own. */
  struct smr_profiler **shared;
  bool live;
  bool final_window; /* smr_profiler_opts.final_window */
  int64_t scan_interval_us;
  int64_t start, end; /* window indices [start, end); end < 0: no bound */
  smrules_ctx *ctx;
  const smr_rule_ops *ops;
  void *impl;
  smr_i64v *triggered;
  int64_t *evaluated, *last_step, *waiting_at;
  void (*on_trigger)(void *arg, int64_t window);
  void *on_trigger_arg;
  /* taken while a window's result is recorded (NULL: none): a live run's
   * watch reads the results from another thread (runner_live.c) */
  pthread_mutex_t *results_mu;
} smr_prof_loop;

/* Kept per instance between passes (watch mode): the reader, whose trace
 * parser state carries over as in the reference, and the first timestamp. */
typedef struct smr_prof_run smr_prof_run;

/* Evaluate the windows not evaluated yet.  Returns SMR_OK, or an error
 * status when the rule failed or there is no profiler data: *message is
 * then set (malloc'ed). */
int smr_prof_loop_run(smr_prof_run **run, const smr_prof_loop *l,
                      char **message);
void smr_prof_run_free(smr_prof_run *run);
/* Drop the reference smr_prof_loop.shared holds. */
void smr_prof_shared_close(struct smr_profiler **shared);

#endif
