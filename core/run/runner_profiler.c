/* runner_profiler.c - the window loop of profiler rules. */
#include "run/runner_profiler.h"

#include <stdlib.h>
#include <string.h>

#include "host/rulehost.h"
#include "profiler/profiler.h"
#include "trial/trial.h"

struct smr_prof_run {
  smr_profiler *prof;
  int64_t first;
};

void smr_prof_run_free(smr_prof_run *run) {
  if (!run)
    return;
  smr_profiler_close(run->prof);
  free(run);
}

static int open_reader(const smr_prof_loop *l, smr_profiler **out,
                       char **message) {
  smr_profiler_opts o = {.live = l->live, .final_window = l->final_window};
  smr_error e;
  smr_error_clear(&e);
  if (smr_profiler_open(l->dir, &o, out, &e) == SMR_OK)
    return SMR_OK;
  char msg[SMR_ERR_FILE_MAX + SMR_ERR_MSG_MAX + 32];
  smr_error_format(&e, msg, sizeof msg);
  *message = smr_xstrdup(msg);
  return SMR_ERR_IO;
}

static int open_run(smr_prof_run **run, const smr_prof_loop *l,
                    char **message) {
  smr_prof_run *r = smr_xcalloc(1, sizeof *r);
  *run = r;
  if (!l->dir) {
    smr_ctx_set_profiler(l->ctx, NULL);
    *message = smr_xstrdup("no profiler data: pass --profiler DIR, or a "
                           "--trial holding profiler-output/ (or system/, "
                           "framework/)");
    return SMR_ERR_USAGE;
  }
  if (l->shared && *l->shared) {
    r->prof = smr_profiler_share(*l->shared);
  } else if (open_reader(l, &r->prof, message) != SMR_OK) {
    smr_ctx_set_profiler(l->ctx, NULL);
    return SMR_ERR_IO;
  } else if (l->shared) {
    *l->shared = smr_profiler_share(r->prof);
  }
  smr_ctx_set_profiler(l->ctx, r->prof);
  smrules_profiler_info in;
  smr_profiler_info(r->prof, &in);
  r->first = in.first_us;
  return SMR_OK;
}

void smr_prof_shared_close(smr_profiler **shared) {
  smr_profiler_close(*shared);
  *shared = NULL;
}

static bool record_window(const smr_prof_loop *l, int64_t k, int rc,
                          int *status, char **message);

/* One window; returns false when the loop must stop. */
static bool one_window(smr_prof_run *r, const smr_prof_loop *l, int64_t k,
                       int64_t start, int64_t end, int *status,
                       char **message) {
  int st = smr_profiler_window_status(r->prof, start, end);
  if (st == SMR_NO_MORE_DATA)
    return false;
  if (st == SMR_STEP_NOT_YET) {
    *l->waiting_at = k;
    return false;
  }
  smr_ctx_window_begin(l->ctx, k, start, end);
  smr_ctx_step_begin(l->ctx, k);
  int rc = l->ops->invoke_at_step(l->impl, l->ctx, k);
  smr_ctx_step_end(l->ctx, k, false);
  smr_ctx_window_end(l->ctx);
  smr_trial_reader_leave(); /* a live run's rule thread (trial.h) */
  if (l->results_mu)
    pthread_mutex_lock(l->results_mu);
  bool go_on = record_window(l, k, rc, status, message);
  if (l->results_mu)
    pthread_mutex_unlock(l->results_mu);
  if (go_on && rc == SMRULES_TRIGGERED && l->on_trigger)
    l->on_trigger(l->on_trigger_arg, k);
  return go_on;
}

/* A window's result into the instance's fields; false when the loop must
 * stop. */
static bool record_window(const smr_prof_loop *l, int64_t k, int rc,
                          int *status, char **message) {
  switch (rc) {
  case SMRULES_TRIGGERED:
    smr_i64v_push(l->triggered, k); /* fall through */
  case SMRULES_NO_TRIGGER:
  case SMRULES_SKIPPED:
    (*l->evaluated)++;
    break;
  case SMRULES_NO_MORE_DATA:
    return false;
  case SMRULES_STEP_NOT_YET:
    *l->waiting_at = k;
    return false;
  default: {
    const char *why = smr_ctx_failure(l->ctx);
    *message = smr_xstrdup(why ? why : "the rule failed without a message");
    *status = SMR_ERR_USAGE;
    return false;
  }
  }
  *l->last_step = k;
  return true;
}

/* Whether the data spans more windows than a job may have; checked before
 * any is walked, and again as a live job's data grows. */
static bool too_many_windows(smr_prof_run *r, int64_t S, char **message) {
  smrules_profiler_info in;
  smr_profiler_info(r->prof, &in);
  if (in.latest_us <= r->first ||
      (in.latest_us - r->first) / S < SMR_MAX_PROFILER_WINDOWS)
    return false;
  *message = smr_xasprintf(
      "the profiler data spans %lld windows of %g s (timestamps from %.0f "
      "to %.0f s since the epoch), more than the %lld a job may have: a "
      "file far from the others in time? (a larger scan_interval_us "
      "covers a longer job)",
      (long long)((in.latest_us - r->first) / S + 1), (double)S / 1e6,
      (double)r->first / 1e6, (double)in.latest_us / 1e6,
      (long long)SMR_MAX_PROFILER_WINDOWS);
  return true;
}

int smr_prof_loop_run(smr_prof_run **run, const smr_prof_loop *l,
                      char **message) {
  *message = NULL;
  *l->waiting_at = -1;
  if (!*run) {
    int st = open_run(run, l, message);
    if (st != SMR_OK)
      return st;
  }
  smr_prof_run *r = *run;
  if (!r->prof)
    return SMR_ERR_USAGE;
  int64_t S = l->scan_interval_us;
  if (S <= 0) {
    *message =
        smr_xasprintf("scan_interval_us must be > 0 (got %lld)", (long long)S);
    return SMR_ERR_USAGE;
  }
  int status = SMR_OK;
  int64_t k = *l->last_step + 1 > l->start ? *l->last_step + 1 : l->start;
  if (r->first == 0) {
    /* no file yet when the run started (live, beside a job that has just
     * begun): window 0 starts at the first file, as the reference waits
     * for it; counting windows from the epoch would evaluate millions */
    smrules_profiler_info in;
    smr_profiler_info(r->prof, &in);
    r->first = in.first_us;
    if (r->first == 0 && !in.job_finished) {
      *l->waiting_at = k;
      return SMR_OK;
    }
  }
  if (too_many_windows(r, S, message))
    return SMR_ERR_USAGE;
  for (; l->end < 0 || k < l->end; k++) {
    if (k > (INT64_MAX - r->first) / S - 1)
      break; /* the window would end beyond any representable time */
    int64_t start = r->first + k * S;
    if (!one_window(r, l, k, start, start + S, &status, message))
      break;
  }
  return status;
}
