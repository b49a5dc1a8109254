/* stats_cache.h - per-(tensor, step) statistics shared by the rules that
 * read one trial.
 *
 * Several rules ask for the same one-pass statistics of the same value
 * (ExplodingTensor its NaN/inf counts, AllZero its zeros, ...).  The first
 * computes them (smr_tensor_stats) and stores them here; the others find
 * them without reading or decoding the record again.  Rules evaluated in
 * lock step (run/schedule.h) ask within a step or two of each other, so a
 * small table of the most recent entries serves them; the memory is fixed
 * (SMR_STATS_CACHE_SLOTS entries of ~150 bytes).  Thread-safe; a value
 * two threads ask for at once is computed by one while the other waits. */
#ifndef SMR_STATS_CACHE_H
#define SMR_STATS_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "format/tensor.h"

#define SMR_STATS_CACHE_SLOTS 1024

/* What an entry holds: every statistic, or only the element counts
 * (count, finite, nan, pinf, ninf, zeros: smr_tensor_counts, a cheaper
 * pass), or one reduction (SMR_STATS_RED(r, abs): smr_trial_reduction's
 * answer, its value in stats.sum and whether it was saved in
 * stats.has_finite; host/data.c packs and unpacks it).  A request for
 * counts is served by a full entry too; a reduction only by its own. */
typedef enum smr_stats_what {
  SMR_STATS_FULL,
  SMR_STATS_COUNTS,
  SMR_STATS_REDUCTION /* the first of 2 * SMR_RED_COUNT_ kinds */
} smr_stats_what;
#define SMR_STATS_RED(r, abs)                                                  \
  ((smr_stats_what)(SMR_STATS_REDUCTION + 2 * (int)(r) + ((abs) ? 1 : 0)))
#define SMR_STATS_KINDS (SMR_STATS_REDUCTION + 2 * SMR_RED_COUNT_)

typedef struct smr_stats_cache smr_stats_cache;

smr_stats_cache *smr_stats_cache_new(void);
void smr_stats_cache_free(smr_stats_cache *c);

/* The statistics of `name` at `step` in `mode` (the step as the reader
 * was asked, see smr_trial_value): true, *out and *status when stored
 * (waiting while another thread computes them).  Otherwise false: the
 * caller has claimed the entry and must compute it, then fill or abandon
 * it.  `status` is the caller's: 0 with the statistics, or why there are
 * none (a value not saved at the step, ...), so that is found out once
 * too. */
bool smr_stats_cache_claim(smr_stats_cache *c, const char *name, int64_t step,
                           int mode, smr_stats *out, int *status);
/* (smr_stats_cache_claim asks for SMR_STATS_FULL.) */
/* The same, waiting or not: with wait false, SMR_STATS_BUSY (and nothing
 * claimed) when another thread is computing the entry, so that a caller
 * with other values to get can get those first (smr_stats_cache_claim
 * is wait true). */
typedef enum smr_stats_claim {
  SMR_STATS_STORED,  /* *out and *status set */
  SMR_STATS_CLAIMED, /* the caller computes it, then fills or abandons it */
  SMR_STATS_BUSY     /* another thread computes it */
} smr_stats_claim;
smr_stats_claim smr_stats_cache_try(smr_stats_cache *c, const char *name,
                                    int64_t step, int mode, smr_stats_what what,
                                    bool wait, smr_stats *out, int *status);
/* Fill or abandon the entry claimed for `what`. */
void smr_stats_cache_fill(smr_stats_cache *c, const char *name, int64_t step,
                          int mode, smr_stats_what what, int status,
                          const smr_stats *s);
/* Nothing to store: whoever waits for the entry finds out for itself. */
void smr_stats_cache_abandon(smr_stats_cache *c, const char *name, int64_t step,
                             int mode, smr_stats_what what);

/* Which kinds of entry rules asked the cache for and had to compute, by
 * tensor name and mode: bit `what` of the answer is set once an entry of
 * that kind was filled with statistics (status 0) for `name` in `mode`
 * at any step.  A rule that reads
 * the value of such a tensor fills those entries for its step from the value in
 * hand (host/data.c), so the rules asking next find them instead of
 * reading the record again.  A fixed table keyed by a hash of the name:
 * a collision only means an entry filled that nobody asks for. */
uint32_t smr_stats_cache_wanted(smr_stats_cache *c, const char *name, int mode);
/* The same claim as smr_stats_cache_try without waiting, for such a fill:
 * true when the caller now computes the entry (then fills or abandons
 * it); not counted as a lookup. */
bool smr_stats_cache_claim_fill(smr_stats_cache *c, const char *name,
                                int64_t step, int mode, smr_stats_what what);

/* Lookups and hits of statistics (not of reductions) so far (for tests and
 * SMRULES_STATS_CACHE=1). */
void smr_stats_cache_counts(smr_stats_cache *c, uint64_t *lookups,
                            uint64_t *hits);

#endif
