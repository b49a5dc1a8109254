/* data.c - the one door from rules to tensor data (data.h). */
#include "host/data.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/warn.h"
#include "base/workers.h"
#include "host/value_pairs.h"

/* ------------------------------------------------------ read failures */

int smr_data_unreadable(const smr_error *err) {
  char msg[SMR_ERR_FILE_MAX + SMR_ERR_MSG_MAX + 32];
  smr_error_format(err, msg, sizeof msg);
  /* every rule reading the same bad record: said once; many bad records
   * (an index naming 200,000 tensors in one record): 20, then a count */
  smr_warn("a tensor value that cannot be read", "%s", msg);
  return SMR_TENSOR_UNAVAILABLE_FOR_STEP;
}

/* Availability statuses and usage errors are the caller's; anything else
 * is a value that could not be read. */
static int answer(int rc, const smr_error *err) {
  if (rc == SMR_OK || rc <= SMR_STEP_UNAVAILABLE || rc == SMR_ERR_USAGE)
    return rc;
  return smr_data_unreadable(err);
}

/* -------------------------------------------------------------- reads */

/* This thread's reads (smr_data_reads); stats_depth > 0 while a value is
 * read for statistics, quiet while reads are not counted. */
static _Thread_local struct {
  int stats_depth;
  bool quiet;
  uint64_t values, for_stats;
} reads;

int smr_data_reads_for_stats(int depth) {
  int was = reads.stats_depth;
  reads.stats_depth = depth;
  return was;
}

bool smr_data_reads_quiet(bool quiet) {
  bool was = reads.quiet;
  reads.quiet = quiet;
  return was;
}

void smr_data_reads_reset(void) {
  reads.values = reads.for_stats = 0;
}

void smr_data_reads(uint64_t *values, uint64_t *for_stats) {
  *values = reads.values;
  *for_stats = reads.for_stats;
}

/* A reduction's entry in the statistics cache (stats_cache.h): its value
 * in sum, whether it was saved in has_finite. */
static smr_stats red_pack(double value, bool saved) {
  smr_stats s;
  memset(&s, 0, sizeof s);
  s.sum = value;
  s.has_finite = saved;
  return s;
}

/* One kind of entry computed from a value in hand: SMR_OK with *s, or
 * the status the computation would have given the rule that asked. */
static int compute_from(smr_stats_what what, const smr_tensor *v, smr_stats *s,
                        smr_error *err) {
  if (what == SMR_STATS_FULL)
    return smr_tensor_stats(v, s, err);
  if (what == SMR_STATS_COUNTS)
    return smr_tensor_counts(v, s, err);
  int k = (int)what - SMR_STATS_REDUCTION;
  double value;
  int rc = smr_tensor_reduce(v, (smr_reduction)(k / 2), k % 2, &value, err);
  *s = red_pack(value, false);
  return rc;
}

/* The entries other rules asked the statistics cache for and had to read
 * this tensor's value for (smr_stats_cache_wanted), filled for this step
 * from the value just read: the rules asking next (ExplodingTensor's and
 * AllZero's counts, VanishingGradient's mean |g|) find them instead of
 * reading the record again.  A reduction saved at the step is what those
 * rules would be answered (smr_trial_reduction): not filled.  Only what
 * computes without failing is filled; the rest is left to whoever asks. */
static void fill_wanted(smr_trial *t, const char *name, int64_t step, int mode,
                        const smr_tensor *v) {
  smr_stats_cache *c = smr_trial_stats_cache(t);
  uint32_t want = c ? smr_stats_cache_wanted(c, name, mode) : 0;
  for (int what = 0; want && what < SMR_STATS_KINDS; what++) {
    if (!(want & (1u << what)))
      continue;
    int k = what - SMR_STATS_REDUCTION;
    if (k >= 0 && smr_trial_reduction_saved(t, name, step, mode, k / 2, k % 2))
      continue;
    if (!smr_stats_cache_claim_fill(c, name, step, mode, (smr_stats_what)what))
      continue;
    smr_stats s;
    smr_error e;
    smr_error_clear(&e);
    if (compute_from((smr_stats_what)what, v, &s, &e) == SMR_OK)
      smr_stats_cache_fill(c, name, step, mode, (smr_stats_what)what, SMR_OK,
                           &s);
    else
      smr_stats_cache_abandon(c, name, step, mode, (smr_stats_what)what);
  }
}

/* Whether the value read at (step, mode), from `loc`, is also the one a
 * read of its global step in GLOBAL mode gives: a trial of one worker
 * whose global step has this mode step only.  WeightUpdateRatio reads in
 * TRAIN mode while AllZero and ExplodingTensor ask for GLOBAL statistics:
 * its reads filled nothing for them, and they read CNN_fc1.weight once
 * more a step on the bench's cnn trial. */
static bool same_as_global(smr_trial *t, int mode, const smr_value_loc *loc) {
  const smr_strv *workers = smr_trial_workers(t);
  int m;
  int64_t ms;
  return mode != SMR_MODE_GLOBAL && loc->mode == mode && workers &&
         workers->n == 1 && smr_trial_step_mode(t, loc->step, &m, &ms) &&
         m == loc->mode && ms == loc->mode_step;
}

int smr_data_value(smr_trial *t, const char *name, int64_t step, int mode,
                   const char *worker, smr_tensor *out, smr_value_loc *loc,
                   smr_error *err) {
  smr_trial_reader_enter(t); /* live: trial.h */
  smr_value_loc own;
  if (!loc)
    loc = &own;
  int rc = smr_trial_value(t, name, step, mode, worker, out, loc, err);
  if (rc == SMR_OK && !worker) {
    bool global = same_as_global(t, mode, loc);
    fill_wanted(t, name, step, mode, out);
    if (global)
      fill_wanted(t, name, loc->step, SMR_MODE_GLOBAL, out);
    /* SimilarAcrossRuns' comparisons (value_pairs.h) */
    smr_value_pairs_offer(t, name, step, mode, out, loc);
    if (global)
      smr_value_pairs_offer(t, name, loc->step, SMR_MODE_GLOBAL, out, loc);
  }
  if (rc == SMR_OK && !reads.quiet)
    *(reads.stats_depth ? &reads.for_stats : &reads.values) += 1;
  return answer(rc, err);
}

int smr_data_value_head(smr_trial *t, const char *name, int64_t step, int mode,
                        size_t max_elems, smr_tensor *out, smr_value_loc *loc,
                        smr_error *err) {
  smr_trial_reader_enter(t); /* live: trial.h */
  if (smr_trial_value_head(t, name, step, mode, max_elems, out, loc) == SMR_OK)
    return SMR_OK;
  /* read in full, as a value: the same statuses, warnings and shared
   * statistics; the caller gets every element, read anyway */
  return smr_data_value(t, name, step, mode, NULL, out, loc, err);
}

int smr_data_value_runs(smr_trial *t, const char *name, int64_t step, int mode,
                        const int64_t *at, size_t nruns, size_t run_elems,
                        size_t elem_size, void *dest) {
  smr_trial_reader_enter(t); /* live: trial.h */
  return smr_trial_value_runs(t, name, step, mode, at, nruns, run_elems,
                              elem_size, dest);
}

int smr_data_value_pieces(smr_trial *t, const char *name, int64_t step,
                          int mode, size_t piece, size_t piece_elems,
                          smr_piece_fn each, void *arg, smr_tensor *head,
                          smr_value_loc *loc) {
  smr_trial_reader_enter(t); /* live: trial.h */
  int rc = smr_trial_value_pieces(t, name, step, mode, NULL, piece, piece_elems,
                                  each, arg, head, loc);
  if (rc == SMR_DATA_PIECES_STOP)
    rc = SMR_OK;
  /* in place of a value read: the scheduler orders the rule as one
   * (smr_data_reads) */
  if (rc == SMR_OK && !reads.quiet)
    *(reads.stats_depth ? &reads.for_stats : &reads.values) += 1;
  return rc;
}

static int reduction_read(smr_trial *t, const char *name, int64_t step,
                          int mode, const char *worker, int reduction, bool abs,
                          double *out, bool *saved, smr_error *err) {
  return answer(smr_trial_reduction(t, name, step, mode, worker, reduction, abs,
                                    out, saved, NULL, err),
                err);
}

/* A reduction the trial did not save, computed from the value read as a
 * value is (smr_data_value), so that the read also fills the statistics
 * other rules wait for (TensorVariance's variance read the record once
 * more for ExplodingTensor's counts); a saved one, or a value that is not
 * there, as smr_trial_reduction answers (its messages). */
static int reduction_by_value(smr_trial *t, const char *name, int64_t step,
                              int mode, int reduction, bool abs, double *out,
                              bool *saved, smr_error *err) {
  if (!smr_trial_reduction_saved(t, name, step, mode, reduction, abs)) {
    smr_tensor v;
    smr_value_loc loc;
    reads.stats_depth++;
    int rc = smr_data_value(t, name, step, mode, NULL, &v, &loc, err);
    reads.stats_depth--;
    if (rc == SMR_OK) {
      rc = answer(
          smr_tensor_reduce(&v, (smr_reduction)reduction, abs, out, err), err);
      *saved = false;
      smr_tensor_release(&v);
      return rc;
    }
    if (rc > SMR_STEP_UNAVAILABLE || rc == SMR_ERR_USAGE)
      return rc; /* unreadable: said once by answer(), as a value read */
    smr_error_clear(err);
  }
  return reduction_read(t, name, step, mode, NULL, reduction, abs, out, saved,
                        err);
}

/* Reductions of the default worker's values are shared through the
 * statistics cache as the statistics are; only answers (failures are
 * found out by each rule, for its message). */
int smr_data_reduction(smr_trial *t, const char *name, int64_t step, int mode,
                       const char *worker, int reduction, bool abs, double *out,
                       bool *saved, smr_error *err) {
  smr_trial_reader_enter(t); /* live: trial.h */
  smr_stats_cache *c = worker || reduction < 0 || reduction >= SMR_RED_COUNT_
                           ? NULL
                           : smr_trial_stats_cache(t);
  if (!c)
    return reduction_read(t, name, step, mode, worker, reduction, abs, out,
                          saved, err);
  smr_stats_what what = SMR_STATS_RED(reduction, abs);
  smr_stats s;
  int rc = SMR_OK;
  if (smr_stats_cache_try(c, name, step, mode, what, true, &s, &rc) ==
      SMR_STATS_STORED) {
    *out = s.sum;
    *saved = s.has_finite;
    return rc;
  }
  rc = reduction_by_value(t, name, step, mode, reduction, abs, out, saved, err);
  if (rc == SMR_OK) {
    s = red_pack(*out, *saved);
    smr_stats_cache_fill(c, name, step, mode, what, rc, &s);
  } else
    smr_stats_cache_abandon(c, name, step, mode, what);
  return rc;
}

int smr_data_shape(smr_trial *t, const char *name, int64_t step, int mode,
                   const char *worker, int *ndim, int64_t shape[SMR_MAX_DIMS],
                   smr_error *err) {
  smr_trial_reader_enter(t); /* live: trial.h */
  return answer(smr_trial_shape(t, name, step, mode, worker, ndim, shape, err),
                err);
}

/* --------------------------------------------------------- statistics */

/* Read the value and go over it for `what`. */
static int compute(smr_trial *t, const char *name, int64_t step, int mode,
                   const char *worker, smr_stats_what what, smr_stats *s,
                   smr_error *err) {
  smr_tensor v;
  smr_value_loc loc;
  reads.stats_depth++;
  int rc = smr_data_value(t, name, step, mode, worker, &v, &loc, err);
  reads.stats_depth--;
  if (rc == SMR_ERR_USAGE) /* the value's, not the caller's: unreadable */
    rc = smr_data_unreadable(err);
  if (rc != SMR_OK)
    return rc;
  rc = what == SMR_STATS_COUNTS ? smr_tensor_counts(&v, s, err)
                                : smr_tensor_stats(&v, s, err);
  smr_tensor_release(&v);
  return rc;
}

int smr_data_stats(smr_trial *t, const char *name, int64_t step, int mode,
                   const char *worker, smr_stats_what what, bool wait,
                   smr_stats *out, bool *read, smr_error *err) {
  smr_trial_reader_enter(t); /* live: trial.h */
  memset(out, 0, sizeof *out);
  if (read)
    *read = false;
  smr_error local;
  smr_error *e = err ? err : &local;
  smr_error_clear(e);
  smr_stats_cache *c = worker ? NULL : smr_trial_stats_cache(t);
  int rc = SMR_OK;
  switch (c ? smr_stats_cache_try(c, name, step, mode, what, wait, out, &rc)
            : SMR_STATS_CLAIMED) {
  case SMR_STATS_STORED:
    if (rc == SMR_OK || !err)
      return rc;
    /* a failure another rule found: read again, for the reason */
    rc = compute(t, name, step, mode, worker, what, out, e);
    if (read)
      *read = rc == SMR_OK;
    return rc;
  case SMR_STATS_BUSY:
    return SMR_DATA_BUSY;
  case SMR_STATS_CLAIMED:
    break;
  }
  rc = compute(t, name, step, mode, worker, what, out, e);
  if (read)
    *read = rc == SMR_OK;
  /* a damaged record's warning is printed once whoever reads it, so
   * every status can be shared */
  if (c)
    smr_stats_cache_fill(c, name, step, mode, what, rc, out);
  return rc;
}

/* ------------------------------------------------------------ batches */

typedef struct batch {
  smr_trial *t;
  const char *const *names;
  int64_t step;
  int mode, reduction;
  bool abs;
  double *red;
  smr_stats_what what;
  int *status;
  smr_data_put put;
  void *arg;
} batch;

static void one_reduction(void *arg, size_t i) {
  batch *b = arg;
  smr_error e;
  smr_error_clear(&e);
  bool saved;
  b->status[i] =
      smr_data_reduction(b->t, b->names[i], b->step, b->mode, NULL,
                         b->reduction, b->abs, &b->red[i], &saved, &e);
}

void smr_data_reductions(smr_trial *t, const char *const *names, size_t n,
                         int64_t step, int mode, int reduction, bool abs,
                         double *out, int *status) {
  smr_trial_reader_enter(t); /* live: trial.h */
  batch b = {.t = t,
             .names = names,
             .step = step,
             .mode = mode,
             .reduction = reduction,
             .abs = abs,
             .red = out,
             .status = status};
  smr_parallel_for(n, one_reduction, &b);
}

static void one_stats(batch *b, size_t i, bool wait) {
  smr_stats s;
  b->status[i] = smr_data_stats(b->t, b->names[i], b->step, b->mode, NULL,
                                b->what, wait, &s, NULL, NULL);
  if (b->status[i] == SMR_OK)
    b->put(b->arg, i, &s);
}

static void stats_first(void *arg, size_t i) {
  one_stats(arg, i, false);
}

static void stats_waiting(void *arg, size_t i) {
  batch *b = arg;
  if (b->status[i] == SMR_DATA_BUSY)
    one_stats(b, i, true);
}

void smr_data_stats_many(smr_trial *t, const char *const *names, size_t n,
                         int64_t step, int mode, smr_stats_what what,
                         int *status, smr_data_put put, void *arg) {
  smr_trial_reader_enter(t); /* live: trial.h */
  batch b = {.t = t,
             .names = names,
             .step = step,
             .mode = mode,
             .what = what,
             .status = status,
             .put = put,
             .arg = arg};
  smr_parallel_for(n, stats_first, &b);
  smr_parallel_for(n, stats_waiting, &b);
}
