/* test_stats_cache.c - the statistics rules share (trial/stats_cache.h):
 * a claimed entry is computed once and then served, stored statuses are
 * served too, abandoned entries are claimed again, the ring forgets the
 * oldest entries after SMR_STATS_CACHE_SLOTS insertions, and a thread
 * asking for an entry another thread is computing waits for it, unless
 * it asks without waiting (then it is told the entry is busy, and that
 * lookup is counted when it asks again). */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "trial/stats_cache.h"
#include "unit.h"

static smr_stats stats_with(int64_t count) {
  smr_stats s;
  memset(&s, 0, sizeof s);
  s.count = count;
  s.sum = (double)count / 2;
  return s;
}

static void test_claim_fill_hit(void) {
  smr_stats_cache *c = smr_stats_cache_new();
  smr_stats out, s = stats_with(7);
  int status = -99;
  CHECK(!smr_stats_cache_claim(c, "a", 3, 4, &out, &status));
  smr_stats_cache_fill(c, "a", 3, 4, SMR_STATS_FULL, 0, &s);
  CHECK(smr_stats_cache_claim(c, "a", 3, 4, &out, &status));
  CHECK_EQ_INT(status, 0);
  CHECK_EQ_INT(out.count, 7);
  CHECK(out.sum == 3.5);
  /* another step, mode or name is another entry */
  CHECK(!smr_stats_cache_claim(c, "a", 4, 4, &out, &status));
  smr_stats_cache_abandon(c, "a", 4, 4, SMR_STATS_FULL);
  CHECK(!smr_stats_cache_claim(c, "a", 3, 1, &out, &status));
  smr_stats_cache_fill(c, "a", 3, 1, SMR_STATS_FULL, -3,
                       &s); /* a stored status */
  CHECK(smr_stats_cache_claim(c, "a", 3, 1, &out, &status));
  CHECK_EQ_INT(status, -3);
  /* abandoned: the next one claims it again */
  CHECK(!smr_stats_cache_claim(c, "a", 4, 4, &out, &status));
  smr_stats_cache_fill(c, "a", 4, 4, SMR_STATS_FULL, 0, &s);
  uint64_t lookups, hits;
  smr_stats_cache_counts(c, &lookups, &hits);
  CHECK_EQ_INT(lookups, 6);
  CHECK_EQ_INT(hits, 2);
  smr_stats_cache_free(c);
}

static void test_ring_forgets_oldest(void) {
  smr_stats_cache *c = smr_stats_cache_new();
  smr_stats out, s = stats_with(1);
  int status;
  for (int i = 0; i < SMR_STATS_CACHE_SLOTS + 10; i++) {
    CHECK(!smr_stats_cache_claim(c, "t", i, 4, &out, &status));
    smr_stats_cache_fill(c, "t", i, 4, SMR_STATS_FULL, 0, &s);
  }
  for (int i = 0; i < 10; i++) /* the first ten were replaced */
    CHECK(!smr_stats_cache_claim(c, "t", i, 4, &out, &status));
  /* ... and claiming them replaced the next ten oldest */
  for (int i = 20; i < SMR_STATS_CACHE_SLOTS + 10; i++)
    CHECK(smr_stats_cache_claim(c, "t", i, 4, &out, &status));
  smr_stats_cache_free(c); /* pending entries are freed too */
}

typedef struct waiter {
  smr_stats_cache *c;
  bool hit;
  int64_t count;
} waiter;

static void *wait_for(void *arg) {
  waiter *w = arg;
  smr_stats out;
  int status;
  w->hit = smr_stats_cache_claim(w->c, "x", 1, 4, &out, &status);
  w->count = w->hit ? out.count : -1;
  if (!w->hit)
    smr_stats_cache_abandon(w->c, "x", 1, 4, SMR_STATS_FULL);
  return NULL;
}

static void test_waits_for_the_computing_thread(void) {
  smr_stats_cache *c = smr_stats_cache_new();
  smr_stats out, s = stats_with(42);
  int status;
  CHECK(!smr_stats_cache_claim(c, "x", 1, 4, &out, &status));
  waiter w = {c, false, 0};
  pthread_t th;
  pthread_create(&th, NULL, wait_for, &w);
  usleep(50 * 1000); /* the other thread is waiting now (or soon) */
  smr_stats_cache_fill(c, "x", 1, 4, SMR_STATS_FULL, 0, &s);
  pthread_join(th, NULL);
  CHECK(w.hit);
  CHECK_EQ_INT(w.count, 42);
  /* abandoned while another waits: that one claims it */
  CHECK(!smr_stats_cache_claim(c, "y", 1, 4, &out, &status));
  smr_stats_cache_abandon(c, "y", 1, 4, SMR_STATS_FULL);
  CHECK(!smr_stats_cache_claim(c, "y", 1, 4, &out, &status));
  smr_stats_cache_fill(c, "y", 1, 4, SMR_STATS_FULL, 0, &s);
  smr_stats_cache_free(c);
}

static void test_try_without_waiting(void) {
  smr_stats_cache *c = smr_stats_cache_new();
  smr_stats out, s = stats_with(5);
  int status = -99;
  CHECK_EQ_INT(
      smr_stats_cache_try(c, "w", 1, 4, SMR_STATS_FULL, false, &out, &status),
      SMR_STATS_CLAIMED);
  /* being computed: busy, nothing claimed, nothing counted */
  CHECK_EQ_INT(
      smr_stats_cache_try(c, "w", 1, 4, SMR_STATS_FULL, false, &out, &status),
      SMR_STATS_BUSY);
  CHECK_EQ_INT(status, -99);
  smr_stats_cache_fill(c, "w", 1, 4, SMR_STATS_FULL, 0, &s);
  CHECK_EQ_INT(
      smr_stats_cache_try(c, "w", 1, 4, SMR_STATS_FULL, false, &out, &status),
      SMR_STATS_STORED);
  CHECK_EQ_INT(status, 0);
  CHECK_EQ_INT(out.count, 5);
  uint64_t lookups, hits;
  smr_stats_cache_counts(c, &lookups, &hits);
  CHECK_EQ_INT(lookups, 2);
  CHECK_EQ_INT(hits, 1);
  smr_stats_cache_free(c);
}

/* Counts are served by a full entry; full statistics never by a counts
 * entry; filling a counts claim leaves a newer full entry alone. */
static void test_counts_and_full(void) {
  smr_stats_cache *c = smr_stats_cache_new();
  smr_stats out, full = stats_with(7), counts = stats_with(3);
  int status;
  const smr_stats_what F = SMR_STATS_FULL, C = SMR_STATS_COUNTS;
  CHECK_EQ_INT(smr_stats_cache_try(c, "f", 1, 4, F, true, &out, &status),
               SMR_STATS_CLAIMED);
  smr_stats_cache_fill(c, "f", 1, 4, F, 0, &full);
  CHECK_EQ_INT(smr_stats_cache_try(c, "f", 1, 4, C, true, &out, &status),
               SMR_STATS_STORED);
  CHECK_EQ_INT(out.count, 7);

  CHECK_EQ_INT(smr_stats_cache_try(c, "k", 1, 4, C, true, &out, &status),
               SMR_STATS_CLAIMED);
  /* a full request does not wait for, nor take, the counts entry */
  CHECK_EQ_INT(smr_stats_cache_try(c, "k", 1, 4, F, false, &out, &status),
               SMR_STATS_CLAIMED);
  smr_stats_cache_fill(c, "k", 1, 4, F, 0, &full);
  smr_stats_cache_fill(c, "k", 1, 4, C, 0, &counts);
  CHECK_EQ_INT(smr_stats_cache_try(c, "k", 1, 4, F, true, &out, &status),
               SMR_STATS_STORED);
  CHECK_EQ_INT(out.count, 7); /* the full entry, not overwritten */
  CHECK_EQ_INT(smr_stats_cache_try(c, "k", 1, 4, C, true, &out, &status),
               SMR_STATS_STORED);

  CHECK_EQ_INT(smr_stats_cache_try(c, "a", 1, 4, C, true, &out, &status),
               SMR_STATS_CLAIMED);
  smr_stats_cache_abandon(c, "a", 1, 4, C);
  CHECK_EQ_INT(smr_stats_cache_try(c, "a", 1, 4, C, false, &out, &status),
               SMR_STATS_CLAIMED);
  smr_stats_cache_fill(c, "a", 1, 4, C, 0, &counts);
  CHECK_EQ_INT(smr_stats_cache_try(c, "a", 1, 4, F, false, &out, &status),
               SMR_STATS_CLAIMED);
  smr_stats_cache_abandon(c, "a", 1, 4, F);
  smr_stats_cache_free(c);
}

/* A reduction's entry serves only that reduction (not a full entry's
 * request, nor the other reductions); the kinds claimed for a name in a
 * mode are remembered once filled with statistics (smr_stats_cache_wanted),
 * the fill's claim is not counted, and claims nothing already there. */
static void test_reductions_and_wanted(void) {
  smr_stats_cache *c = smr_stats_cache_new();
  smr_stats out, full = stats_with(7), red = stats_with(2);
  int status;
  const smr_stats_what F = SMR_STATS_FULL, C = SMR_STATS_COUNTS;
  const smr_stats_what MEAN = SMR_STATS_RED(SMR_RED_MEAN, false),
                       ABS_MEAN = SMR_STATS_RED(SMR_RED_MEAN, true);
  CHECK(MEAN != ABS_MEAN && MEAN > C && ABS_MEAN < SMR_STATS_KINDS);
  CHECK_EQ_INT(smr_stats_cache_wanted(c, "g", 0), 0);
  CHECK_EQ_INT(smr_stats_cache_try(c, "g", 1, 0, F, true, &out, &status),
               SMR_STATS_CLAIMED);
  smr_stats_cache_fill(c, "g", 1, 0, F, 0, &full);
  /* a full entry does not answer a reduction */
  CHECK_EQ_INT(smr_stats_cache_try(c, "g", 1, 0, ABS_MEAN, true, &out, &status),
               SMR_STATS_CLAIMED);
  smr_stats_cache_fill(c, "g", 1, 0, ABS_MEAN, 0, &red);
  CHECK_EQ_INT(smr_stats_cache_try(c, "g", 1, 0, ABS_MEAN, true, &out, &status),
               SMR_STATS_STORED);
  CHECK_EQ_INT(out.count, 2);
  CHECK_EQ_INT(smr_stats_cache_try(c, "g", 1, 0, MEAN, false, &out, &status),
               SMR_STATS_CLAIMED);
  smr_stats_cache_abandon(c, "g", 1, 0, MEAN);
  /* filled ones only: the abandoned mean is not */
  CHECK_EQ_INT(smr_stats_cache_wanted(c, "g", 0), (1u << F) | (1u << ABS_MEAN));
  CHECK_EQ_INT(smr_stats_cache_wanted(c, "g", 1), 0); /* another mode */
  CHECK_EQ_INT(smr_stats_cache_wanted(c, "h", 0), 0);

  uint64_t lookups, hits;
  smr_stats_cache_counts(c, &lookups, &hits);
  CHECK(!smr_stats_cache_claim_fill(c, "g", 1, 0, ABS_MEAN)); /* stored */
  CHECK(!smr_stats_cache_claim_fill(c, "g", 1, 0, C)); /* the full holds it */
  CHECK(smr_stats_cache_claim_fill(c, "h", 2, 0, C));
  CHECK(!smr_stats_cache_claim_fill(c, "h", 2, 0, C)); /* pending */
  /* a rule asking while the fill computes waits for it, then has it */
  CHECK_EQ_INT(smr_stats_cache_try(c, "h", 2, 0, C, false, &out, &status),
               SMR_STATS_BUSY);
  smr_stats_cache_fill(c, "h", 2, 0, C, 0, &red);
  CHECK_EQ_INT(smr_stats_cache_try(c, "h", 2, 0, C, true, &out, &status),
               SMR_STATS_STORED);
  CHECK_EQ_INT(smr_stats_cache_wanted(c, "h", 0), 1u << C);
  /* a failure found (no value there) is not wanted */
  CHECK_EQ_INT(smr_stats_cache_try(c, "u", 1, 0, C, true, &out, &status),
               SMR_STATS_CLAIMED);
  smr_stats_cache_fill(c, "u", 1, 0, C, -3, &red);
  CHECK_EQ_INT(smr_stats_cache_wanted(c, "u", 0), 0);
  lookups++; /* that one */
  uint64_t lookups2, hits2;
  smr_stats_cache_counts(c, &lookups2, &hits2);
  CHECK_EQ_INT((int)(lookups2 - lookups), 1); /* the rule's, not the fill's */
  CHECK_EQ_INT((int)(hits2 - hits), 1);
  smr_stats_cache_free(c);
}

int main(void) {
  TEST_RUN(test_claim_fill_hit);
  TEST_RUN(test_ring_forgets_oldest);
  TEST_RUN(test_waits_for_the_computing_thread);
  TEST_RUN(test_try_without_waiting);
  TEST_RUN(test_counts_and_full);
  TEST_RUN(test_reductions_and_wanted);
  return TEST_REPORT("test_stats_cache");
}
