/* record_budget.h - private to core/source/: a run's record buffers within
 * one byte budget for the process (record_budget.c says how and why).
 * The buffers of records too large to be shared (more than
 * SHARED_RECORD_MAX bytes), held by ranges and kept idle for the next
 * read, are lent from here (smr_record_buf_take and
 * smr_record_buf_give_back in shared_records.c hand them over); every
 * buffer is counted; the shared records keep what the others leave.  The
 * scheduler learns from smr_source_turn_record_bytes (source.h) how many
 * bytes a rule's turn held, and admits turns within
 * smr_source_record_budget. */
#ifndef SMR_RECORD_BUDGET_H
#define SMR_RECORD_BUDGET_H

#include <stdbool.h>
#include <stddef.h>

#include "source/shared_records.h"

/* Whether a buffer of cap bytes is a large one, counted here. */
static inline bool record_budget_large(size_t cap) {
  return cap > SHARED_RECORD_MAX;
}

/* A large buffer of at least len bytes for a read, now held by the
 * calling thread's range: an idle one, else a new one (idle ones beyond
 * the budget are freed first); NULL: out of memory. */
record_buf *record_budget_take(size_t len);
/* For a smaller record of len bytes: an idle large buffer that holds it
 * without counting for much more (at most twice its size), else NULL
 * (then the thread's own pool serves it).  On the bench's CNN trial the
 * ReLU output of 6.3 MB is read into the buffers of the 12 MiB ones
 * between their reads, as when each thread kept its own. */
record_buf *record_budget_take_idle(size_t len);
/* A large buffer lent to a range stays held past the turn
 * (smr_range_keep): its bytes move from the thread's turn to the run's
 * kept bytes, which smr_source_extra_bytes adds to what the scheduler
 * leaves out of the budget; true when that leaves room for every turn
 * that may run side by side (smr_source_set_turn_slots) holding two of
 * the largest records, else false (nothing changed). */
bool record_budget_keep(record_buf *b);
/* A range let go of a large buffer: kept idle while the record buffers
 * fit the budget, else freed. */
void record_budget_give_back(record_buf *b);

/* Whether a thread's pool may keep a mapped buffer given back (one of
 * the records up to SHARED_RECORD_MAX, read unshared): the record
 * buffers fit the budget. */
bool record_budget_may_keep(void);
/* Every record buffer's memory, allocated (true) or released
 * (shared_records.c's buf_alloc and buf_release_memory). */
void record_budget_count(size_t cap, bool allocated);
/* What the shared records (shared_records.c) may keep, at most `most`
 * bytes, when `theirs` of all record buffers are theirs: the budget less
 * the other buffers (the large records held and idle, the records the
 * rules hold), so that records in flight crowd the shared ones out
 * rather than add to them. */
size_t record_budget_shared_bytes(size_t most, size_t theirs);

#endif
