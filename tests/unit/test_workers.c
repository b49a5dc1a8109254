/* test_workers.c - smr_parallel_for (core/base/workers.c): every index runs
 * exactly once and the loop returns only when all have; loops from several
 * threads at once share the helpers without losing or repeating an index;
 * without helpers, or for 0 and 1 items, the caller does the work alone;
 * the helpers really take items (the loop ran on more than one thread). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "base/workers.h"
#include "unit.h"

#define N 2000

typedef struct counts {
  atomic_int hits[N];
  atomic_int threads_seen; /* items run by a thread other than the caller */
  pthread_t caller;
  int slow;          /* nanoseconds of work per item */
  bool caller_waits; /* the caller's items wait until a helper took one */
} counts;

static void count_item(void *arg, size_t i) {
  counts *c = arg;
  atomic_fetch_add(&c->hits[i], 1);
  if (!pthread_equal(pthread_self(), c->caller))
    atomic_fetch_add(&c->threads_seen, 1);
  else if (c->caller_waits) {
    /* an event, not a duration: the loop cannot end before a helper has
     * taken an item, however the threads are scheduled (20 s: a hang
     * guard, for a pool whose helpers never come) */
    struct timespec ms = {0, 1000000};
    for (int k = 0; k < 20000 && atomic_load(&c->threads_seen) == 0; k++)
      nanosleep(&ms, NULL);
  }
  if (c->slow) {
    struct timespec ts = {0, c->slow};
    nanosleep(&ts, NULL);
  }
}

static counts *run_loop(size_t n, int slow) {
  counts *c = calloc(1, sizeof *c);
  c->caller = pthread_self();
  c->slow = slow;
  smr_parallel_for(n, count_item, c);
  return c;
}

static int wrong_hits(const counts *c, size_t n) {
  int bad = 0;
  for (size_t i = 0; i < N; i++)
    bad += atomic_load(&c->hits[i]) != (i < n ? 1 : 0);
  return bad;
}

static void test_no_helpers(void) {
  smr_workers_set(0);
  counts *c = run_loop(N, 0);
  CHECK_EQ_INT(wrong_hits(c, N), 0);
  CHECK_EQ_INT(atomic_load(&c->threads_seen), 0);
  free(c);
}

static void test_zero_and_one(void) {
  smr_workers_set(3);
  counts *c = run_loop(0, 0);
  CHECK_EQ_INT(wrong_hits(c, 0), 0);
  free(c);
  c = run_loop(1, 0);
  CHECK_EQ_INT(wrong_hits(c, 1), 0);
  CHECK_EQ_INT(atomic_load(&c->threads_seen), 0); /* one item: the caller */
  free(c);
}

static void test_helpers_take_items(void) {
  smr_workers_set(3);
  counts *c = calloc(1, sizeof *c);
  c->caller = pthread_self();
  c->caller_waits = true;
  smr_parallel_for(64, count_item, c);
  CHECK_EQ_INT(wrong_hits(c, 64), 0);
  CHECK(atomic_load(&c->threads_seen) > 0);
  free(c);
  c = run_loop(N, 0);
  CHECK_EQ_INT(wrong_hits(c, N), 0);
  free(c);
}

/* Several threads run loops at once, as rules of one run do. */
static void *one_caller(void *arg) {
  counts **out = arg;
  for (int round = 0; round < 20; round++) {
    counts *c = run_loop((size_t)(N / 2 + round * 37), round % 3 ? 0 : 20000);
    int bad = wrong_hits(c, (size_t)(N / 2 + round * 37));
    free(c);
    if (bad) {
      *out = (counts *)1;
      break;
    }
  }
  return NULL;
}

static void test_concurrent_loops(void) {
  smr_workers_set(2);
  pthread_t th[4];
  counts *bad[4] = {0};
  for (int i = 0; i < 4; i++)
    CHECK(pthread_create(&th[i], NULL, one_caller, &bad[i]) == 0);
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    CHECK(bad[i] == NULL);
  }
}

int main(void) {
  TEST_RUN(test_no_helpers);
  TEST_RUN(test_zero_and_one);
  TEST_RUN(test_helpers_take_items);
  TEST_RUN(test_concurrent_loops);
  return TEST_REPORT("test_workers");
}
