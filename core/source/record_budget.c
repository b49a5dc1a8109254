/* record_budget.c - the memory of a run's records within one byte budget
 * for the process (docs/kubernetes.md#record-memory).
 *
 * A rule comparing two steps holds two records at once, and each rule
 * thread used to keep the buffers it had read them into for its next
 * read.  With records of 16 MB, two threads running such rules side by
 * side held four (64 MB, peak RSS 71-77 MB) and kept them afterwards,
 * whatever the trial's size.  Now:
 *
 *  - every record buffer is counted (record_budget_count); the records
 *    too large to be shared (more than SHARED_RECORD_MAX) are lent from
 *    here, and those no range holds wait in one list for every thread,
 *    kept only while all the buffers fit RECORD_BUDGET (or two of the
 *    largest records, when that is more): a buffer let go
 *    beyond it is freed, and a read that needs a new one frees idle ones
 *    until it fits.  A thread takes back its own first, then another's
 *    (whose pages are already there rather than faulted in anew);
 *  - the shared records (shared_records.c) keep at most what the other
 *    buffers leave of the budget, less room for two of the largest
 *    records (record_budget_shared_bytes), 28 MB and 8 MB of spares at
 *    most; a thread's pool keeps a mapped buffer only within the budget;
 *  - the scheduler (core/run/schedule.c) admits a rule's turn only while
 *    the bytes the running turns hold and this one's fit the budget; one
 *    turn alone always runs.  A turn counts the most its unit's turns
 *    held (its thread's peak of large records,
 *    smr_source_turn_record_bytes), and at least two of the
 *    largest record read so far.
 *
 * So the records in memory stay within the budget, or within what one
 * turn holds when that is more, plus what a turn holds beyond the most
 * its rule held before and two of the largest records (a rule holding
 * three at once for the first time, or the turns begun before the first
 * large record was read). */
#include "source/record_budget.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "source/source.h"

/* Two rules side by side, each comparing two steps of records of 12 MiB
 * (the bench's CNN trial: its ReLU output and dense layer), fit; two
 * such rules with records of 16 MB do not, and run one after the other.
 * With the process's own 8-12 MB, peak RSS stays under 64 MB. */
#define RECORD_BUDGET ((size_t)50 << 20)

static struct {
  pthread_mutex_t mu;
  record_buf *idle; /* given back most recently first */
  size_t idle_bytes;
  size_t held_bytes;        /* lent to ranges */
  _Atomic size_t largest;   /* the largest buffer taken so far */
  _Atomic size_t in_memory; /* held + idle, read without the lock */
  /* Every record buffer's bytes, large or not, shared or not: idle large
   * buffers are kept only within the budget of them all. */
  _Atomic size_t all_bytes;
} large = {.mu = PTHREAD_MUTEX_INITIALIZER};

void record_budget_count(size_t cap, bool allocated) {
  if (allocated)
    atomic_fetch_add_explicit(&large.all_bytes, cap, memory_order_relaxed);
  else
    atomic_fetch_sub_explicit(&large.all_bytes, cap, memory_order_relaxed);
}

static size_t all_bytes(void) {
  return atomic_load_explicit(&large.all_bytes, memory_order_relaxed);
}

/* Under large.mu, after held_bytes or idle_bytes changed. */
static void update_in_memory(void) {
  atomic_store_explicit(&large.in_memory, large.held_bytes + large.idle_bytes,
                        memory_order_relaxed);
}

/* The buffers' bound: the budget, or what one turn holding two of the
 * largest records needs when that is more (records of 40 MB: a turn
 * holds 80 MB alone, and its buffers wait for the next turn instead of
 * being mapped and faulted in anew at every read, 0.7 -> 1.2 s of CPU
 * for the twenty rules).  The scheduler admits turns within the budget
 * alone (smr_source_record_budget). */
static size_t bound(void) {
  size_t two = 2 * atomic_load_explicit(&large.largest, memory_order_relaxed);
  return two > RECORD_BUDGET ? two : RECORD_BUDGET;
}

size_t record_budget_shared_bytes(size_t most, size_t theirs) {
  size_t used = atomic_load_explicit(&large.in_memory, memory_order_relaxed);
  size_t all = all_bytes(), others = all > theirs ? all - theirs : 0;
  if (others > used)
    used = others;
  /* and room for a turn's two largest records to come: small records
   * kept here live in malloc's heap, which keeps their pages when they
   * go (on the bench's CNN trial, 8 MB of them beside two turns' large
   * records: peak RSS 60-69 MB instead of 58-60) */
  used += 2 * atomic_load_explicit(&large.largest, memory_order_relaxed);
  size_t left = used < bound() ? bound() - used : 0;
  return left < most ? left : most;
}

/* The large record bytes this thread's ranges hold now, and the most
 * since the last smr_source_turn_record_bytes. */
static _Thread_local size_t thread_held, thread_peak;

size_t smr_source_record_budget(void) {
  return RECORD_BUDGET;
}

size_t smr_source_largest_record(void) {
  return atomic_load_explicit(&large.largest, memory_order_relaxed);
}

/* Extra reads (smr_source_extra_begin): the bytes reserved for them, the
 * running turns' reservations, and whether this thread reads as extra. */
static _Atomic size_t extra_reserved, turns_reserved;
static _Thread_local bool reading_extra;

void smr_source_set_turns_reserved(size_t bytes) {
  atomic_store_explicit(&turns_reserved, bytes, memory_order_relaxed);
}

/* The large records rules keep past their turn (record_budget_keep),
 * and how many turns may run side by side (smr_source_set_turn_slots). */
static _Atomic size_t kept_bytes, turn_slots = 1;

void smr_source_set_turn_slots(size_t n) {
  atomic_store_explicit(&turn_slots, n ? n : 1, memory_order_relaxed);
}

size_t smr_source_extra_bytes(void) {
  return atomic_load_explicit(&extra_reserved, memory_order_relaxed) +
         atomic_load_explicit(&kept_bytes, memory_order_relaxed);
}

bool smr_source_extra_begin(size_t len) {
  size_t turns = atomic_load_explicit(&turns_reserved, memory_order_relaxed);
  size_t extra = atomic_load_explicit(&extra_reserved, memory_order_relaxed);
  size_t kept = atomic_load_explicit(&kept_bytes, memory_order_relaxed);
  do {
    if (turns + kept + extra + len > RECORD_BUDGET)
      return false;
  } while (!atomic_compare_exchange_weak(&extra_reserved, &extra, extra + len));
  reading_extra = true;
  return true;
}

void smr_source_extra_end(size_t len) {
  reading_extra = false;
  atomic_fetch_sub(&extra_reserved, len);
}

size_t smr_source_turn_record_bytes(void) {
  size_t peak = thread_peak;
  thread_peak = thread_held;
  return peak;
}

/* Who this thread is, for the idle buffers it gives back. */
static _Thread_local char thread_mark;

/* Under large.mu: the smallest idle buffer of at least len bytes this
 * thread gave back, else another thread's, else the largest (too small:
 * the caller frees it and maps one that fits, so that idle buffers do
 * not pile up, one of each size read); taken off the list.  NULL: none
 * idle, or (own_only) none of this thread's.  A thread's own first, as
 * when each thread kept its own: on the bench's CNN trial, a thread
 * taking the buffer another was about to reuse made that one map a new
 * buffer, and peak RSS went from 58 to 64-72 MB now and then. */
static record_buf *idle_pick(size_t len, bool own_only) {
  record_buf **fit = NULL, **own = NULL, **largest = NULL;
  for (record_buf **q = &large.idle; *q; q = &(*q)->next) {
    bool mine = (*q)->owner == &thread_mark;
    if ((*q)->cap >= len && mine && (!own || (*q)->cap < (*own)->cap))
      own = q;
    if ((*q)->cap >= len && (!fit || (*q)->cap < (*fit)->cap))
      fit = q;
    if ((mine || !own_only) && (!largest || (*q)->cap > (*largest)->cap))
      largest = q;
  }
  record_buf **pick = own ? own : own_only ? largest : fit ? fit : largest;
  if (!pick)
    return NULL;
  record_buf *b = *pick;
  *pick = b->next;
  b->next = NULL;
  large.idle_bytes -= b->cap;
  update_in_memory();
  return b;
}

/* Under large.mu: idle buffers off the list, oldest first, until `more`
 * bytes held fit the budget; returned as a list for the caller to free
 * outside the lock. */
static record_buf *idle_trim(size_t more) {
  record_buf *out = NULL;
  size_t all = all_bytes();
  while (large.idle && (large.held_bytes + large.idle_bytes + more > bound() ||
                        all + more > bound())) {
    record_buf **last = &large.idle;
    while ((*last)->next)
      last = &(*last)->next;
    record_buf *b = *last;
    *last = NULL;
    large.idle_bytes -= b->cap;
    all -= b->cap < all ? b->cap : all;
    b->next = out;
    out = b;
  }
  update_in_memory();
  return out;
}

static void count_held(size_t cap) {
  if (reading_extra) /* reserved already: not the turn's */
    return;
  thread_held += cap;
  if (thread_held > thread_peak)
    thread_peak = thread_held;
}

record_buf *record_budget_take(size_t len) {
  record_buf *drop = NULL;
  pthread_mutex_lock(&large.mu);
  record_buf *b = idle_pick(len, false);
  if (b && b->cap < len) {
    b->next = idle_trim(len);
    drop = b;
    b = NULL;
  } else if (!b) {
    drop = idle_trim(len);
  }
  pthread_mutex_unlock(&large.mu);
  while (drop) {
    record_buf *next = drop->next;
    smr_record_buf_destroy(drop);
    drop = next;
  }
  if (!b && !(b = smr_record_buf_new(len)))
    return NULL;
  pthread_mutex_lock(&large.mu);
  large.held_bytes += b->cap;
  if (b->cap > large.largest)
    large.largest = b->cap;
  update_in_memory();
  pthread_mutex_unlock(&large.mu);
  count_held(b->cap);
  smr_shared_trim(); /* the shared records' share shrinks */
  return b;
}

record_buf *record_budget_take_idle(size_t len) {
  pthread_mutex_lock(&large.mu);
  record_buf *b = idle_pick(len, true);
  if (b && b->cap > 2 * len + 65536) { /* counts for more than it holds */
    b->next = large.idle;
    large.idle = b;
    large.idle_bytes += b->cap;
    b = NULL;
  }
  if (b && b->cap < len) { /* back where it was: none fits */
    b->next = large.idle;
    large.idle = b;
    large.idle_bytes += b->cap;
    b = NULL;
  }
  if (b)
    large.held_bytes += b->cap;
  update_in_memory();
  pthread_mutex_unlock(&large.mu);
  if (b)
    count_held(b->cap);
  return b;
}

bool record_budget_may_keep(void) {
  return all_bytes() <= bound();
}

/* A record kept leaves the turns less room, and the scheduler fewer of
 * them side by side: one is kept only while every turn slot still has
 * room for two of the largest records (the scheduler's floor).  With two
 * threads and the 12.6 MB dense layer of the bench's CNN trial, keeping
 * it left room for one turn: the twenty rules ran their turns one after
 * the other, 25 % less CPU time and a third more wall time. */
bool record_budget_keep(record_buf *b) {
  if (b->kept)
    return true;
  size_t turns = atomic_load_explicit(&turn_slots, memory_order_relaxed) * 2 *
                 atomic_load_explicit(&large.largest, memory_order_relaxed);
  size_t kept = atomic_load_explicit(&kept_bytes, memory_order_relaxed);
  do {
    if (kept + b->cap + turns > RECORD_BUDGET)
      return false;
  } while (!atomic_compare_exchange_weak(&kept_bytes, &kept, kept + b->cap));
  b->kept = true;
  if (!reading_extra) /* no longer this turn's */
    thread_held = thread_held > b->cap ? thread_held - b->cap : 0;
  return true;
}

void record_budget_give_back(record_buf *b) {
  if (b->kept) /* the run's, not the turn's (record_budget_keep) */
    atomic_fetch_sub(&kept_bytes, b->cap);
  else if (!reading_extra)
    thread_held = thread_held > b->cap ? thread_held - b->cap : 0;
  b->kept = false;
  pthread_mutex_lock(&large.mu);
  large.held_bytes -= b->cap;
  bool keep = large.held_bytes + large.idle_bytes + b->cap <= bound() &&
              all_bytes() <= bound();
  if (keep) {
    b->owner = &thread_mark;
    b->next = large.idle;
    large.idle = b;
    large.idle_bytes += b->cap;
  }
  update_in_memory();
  pthread_mutex_unlock(&large.mu);
  if (!keep)
    smr_record_buf_destroy(b);
}
