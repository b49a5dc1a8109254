/* value_pairs.h - a rule's work on a pair of values: one tensor at one
 * step of the rule's trial and of another trial (SimilarAcrossRuns'
 * comparison, the SDK's pair_value).  The first value is what other rules
 * read anyway: once the rule has asked for a tensor, a read of that
 * tensor at a later step by any rule (host/data.c's smr_data_value) does
 * the rule's work then, with the value in hand, and keeps the result
 * until the rule asks for it; so the rule's trial is not read a second
 * time for it.  A result nobody computed ahead is computed when asked for,
 * reading both values: the same result either way, as the work depends
 * only on the two values.  Thread-safe. */
#ifndef SMR_VALUE_PAIRS_H
#define SMR_VALUE_PAIRS_H

#include <stddef.h>
#include <stdint.h>

#include "format/tensor.h"
#include "trial/trial.h"

/* The most bytes a pair's result may have. */
#define SMR_PAIR_RESULT_MAX 64

/* The work: call(fn, arg, a, la, b, lb, result) with a the value of the
 * rule's trial, b the other's; its return is the pair's status.  It runs
 * on any thread, while another rule holds a, and must depend on nothing
 * but its arguments. */
typedef int (*smr_pair_call)(const void *fn, const void *arg,
                             const smr_tensor *a, const smr_value_loc *la,
                             const smr_tensor *b, const smr_value_loc *lb,
                             void *result);

/* Folds part, the work's result on the next run of elements, into into
 * (merge: the plugin's merge function). */
typedef void (*smr_pair_merge_call)(const void *merge, const void *arg,
                                    void *into, const void *part);

/* Who asks: a rule (owner, its context) pairing trial t with other.  Its
 * registration and any result kept for it go with
 * smr_value_pairs_forget(owner).  With merge (else NULL), work done ahead
 * reads the other trial's value in pieces (smr_trial_value_pieces) and
 * folds the work on each run of elements with merge_call. */
typedef struct smr_pair_key {
  const void *owner;
  smr_trial *t, *other;
  smr_pair_call call;
  const void *fn, *arg;
  smr_pair_merge_call merge_call;
  const void *merge;
} smr_pair_key;

/* The result of the work for `name` at `step` in `mode` (default
 * worker): SMR_OK and size bytes at result (size at most
 * SMR_PAIR_RESULT_MAX), or the status of the first value that could not
 * be read (as smr_data_value answers: warned once), or the work's
 * nonzero status.  From then on, reads of `name` at later steps in `mode`
 * do the work ahead. */
int smr_value_pair(const smr_pair_key *k, const char *name, int64_t step,
                   int mode, void *result, size_t size);

/* host/data.c, after every read of a default worker's value v of t: the
 * work of the rules that asked for name at an earlier step, done now. */
void smr_value_pairs_offer(smr_trial *t, const char *name, int64_t step,
                           int mode, const smr_tensor *v,
                           const smr_value_loc *loc);

/* Drops owner's registrations and results (waits for the work under way
 * for them): before its trials are closed. */
void smr_value_pairs_forget(const void *owner);

/* Results computed ahead and taken, computed when asked (for tests and
 * SMRULES_STATS_CACHE=1). */
void smr_value_pairs_counts(uint64_t *ahead, uint64_t *taken, uint64_t *asked);

#endif
