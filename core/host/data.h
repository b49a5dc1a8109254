/* data.h - the one door from rules to tensor data.  Every kind of rule
 * reads here: the C API adapters (rulehost_api.c) and the Lua bindings
 * (lua/lua_bind.c) are thin layers that only translate arguments and
 * statuses into their language.  The door owns
 *  - value, reduction and shape reads (the worker chosen by name, NULL:
 *    the trial's default worker),
 *  - what a read failure means: a value that cannot be decoded (corrupt
 *    record, missing event file) is as if it had not been saved at that
 *    step, smdebug's TensorUnavailableForStep; the reason is printed once
 *    as a warning however many rules read it
 *    (docs/rule-semantics.md#decisions, Decision R17),
 *  - the statistics-cache protocol (trial/stats_cache.h: try, compute,
 *    fill), so that rules of every kind share one computation,
 *  - batches: the same reduction or statistics of many tensors at one
 *    step, over the run's helper threads (base/workers.h).
 * Statuses are SMR_* (base/common.h): SMR_OK, an availability status
 * (<= SMR_STEP_UNAVAILABLE), or SMR_ERR_USAGE for a request the value
 * cannot answer (a reduction or statistics of strings), err saying why. */
#ifndef SMR_DATA_H
#define SMR_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "format/tensor.h"
#include "trial/stats_cache.h"
#include "trial/trial.h"

/* Values this thread read since smr_data_reads_reset: *values those a
 * rule asked for, *for_stats those read only to compute statistics or a
 * reduction (smr_data_stats, smr_data_reduction), which another rule's
 * read of the same value would have filled (the runner orders turns by
 * it: run/schedule.h).  Reads done on helper threads are not counted. */
void smr_data_reads_reset(void);
void smr_data_reads(uint64_t *values, uint64_t *for_stats);
/* This thread's reads from now on count as read for statistics while
 * depth > 0; the previous depth is returned, to be set back. */
int smr_data_reads_for_stats(int depth);
/* The same for reads not counted at all (another trial's, read for a
 * rule while another rule's turn runs: value_pairs.c). */
bool smr_data_reads_quiet(bool quiet);

/* Warn once about an unreadable value (err) and answer
 * SMR_TENSOR_UNAVAILABLE_FOR_STEP. */
int smr_data_unreadable(const smr_error *err);

int smr_data_value(smr_trial *t, const char *name, int64_t step, int mode,
                   const char *worker, smr_tensor *out, smr_value_loc *loc,
                   smr_error *err);
/* The first elements of the default worker's value, shape and dtype the
 * value's: read from the first and last bytes of the record when that
 * gives exactly what a full read gives (smr_trial_value_head; out->count
 * at most max_elems), else read in full as smr_data_value reads, with the
 * same statuses and warnings (out->count: every element). */
int smr_data_value_head(smr_trial *t, const char *name, int64_t step, int mode,
                        size_t max_elems, smr_tensor *out, smr_value_loc *loc,
                        smr_error *err);
/* Runs of elements of the default worker's value (smr_trial_value_runs:
 * SMR_OK, or an error, and then the caller reads the value whole, which
 * says why it cannot be read, if it cannot). */
int smr_data_value_runs(smr_trial *t, const char *name, int64_t step, int mode,
                        const int64_t *at, size_t nruns, size_t run_elems,
                        size_t elem_size, void *dest);
/* The default worker's value in pieces (smr_trial_value_pieces, with
 * its statuses), counted as a value read when they were read: SMR_OK when
 * every piece was handed over or each returned SMR_DATA_PIECES_STOP. */
#define SMR_DATA_PIECES_STOP 1
int smr_data_value_pieces(smr_trial *t, const char *name, int64_t step,
                          int mode, size_t piece, size_t piece_elems,
                          smr_piece_fn each, void *arg, smr_tensor *head,
                          smr_value_loc *loc);
/* The saved reduction when present (*saved true), else computed from the
 * value. */
int smr_data_reduction(smr_trial *t, const char *name, int64_t step, int mode,
                       const char *worker, int reduction, bool abs, double *out,
                       bool *saved, smr_error *err);
int smr_data_shape(smr_trial *t, const char *name, int64_t step, int mode,
                   const char *worker, int *ndim, int64_t shape[SMR_MAX_DIMS],
                   smr_error *err);

/* Returned by smr_data_stats with wait false while another thread
 * computes the entry (never handed to a rule: ask again, waiting). */
#define SMR_DATA_BUSY (-100)

/* The statistics (or only the counts) of a value, from the run's cache or
 * computed and stored there for the other rules; with a worker the value
 * is read (the shared entries are the default worker's).  *read (may be
 * NULL) tells whether this call read the value and went over it.  A
 * failure found by another rule is answered as stored when err is NULL;
 * with err the value is read again, for the reason. */
int smr_data_stats(smr_trial *t, const char *name, int64_t step, int mode,
                   const char *worker, smr_stats_what what, bool wait,
                   smr_stats *out, bool *read, smr_error *err);

/* Batches: statuses and results per name, in parallel. */
void smr_data_reductions(smr_trial *t, const char *const *names, size_t n,
                         int64_t step, int mode, int reduction, bool abs,
                         double *out, int *status);
/* status[i] as for smr_data_stats; each statistics found is handed to
 * put(arg, i, stats) as it is ready, from any thread.  Two passes:
 * what another thread is computing is left for the second, so two rules
 * asking for the same tensors at once share the work instead of one
 * waiting for the other tensor by tensor. */
typedef void (*smr_data_put)(void *arg, size_t i, const smr_stats *s);
void smr_data_stats_many(smr_trial *t, const char *const *names, size_t n,
                         int64_t step, int mode, smr_stats_what what,
                         int *status, smr_data_put put, void *arg);

#endif
