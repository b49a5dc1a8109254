/* test_s3_cache.c - the shared record cache of core/source/s3_cache.c: copies
 * out, LRU eviction within the budget, large records not kept, and a
 * record being fetched by one thread is waited for, not fetched twice.
 * (The prefetcher needs an S3 client; tests/cli/test_s3.py covers it.) */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "source/s3_cache.h"
#include "unit.h"

static uint8_t *filled(size_t n, uint8_t v) {
  uint8_t *p = malloc(n);
  memset(p, v, n);
  return p;
}

static void test_put_get_copy(void) {
  smr_s3_cache *c = smr_s3_cache_new(1 << 20, NULL);
  smr_s3_claim cl;
  CHECK(smr_s3_cache_get(c, "events/a", 0, 100, &cl) == NULL);
  CHECK(cl.claimed);
  uint8_t *d = filled(100, 7);
  smr_s3_cache_put(c, "events/a", 0, 100, d);
  smr_s3_cache_done(c, &cl);
  free(d);
  smr_s3_claim cl2;
  uint8_t *got = smr_s3_cache_get(c, "events/a", 0, 100, &cl2);
  CHECK(got && got[0] == 7 && got[99] == 7);
  CHECK(!cl2.claimed);
  free(got);
  /* same file, other range: a different record */
  CHECK(smr_s3_cache_get(c, "events/a", 100, 100, &cl2) == NULL);
  smr_s3_cache_done(c, &cl2);
  smr_s3_cache_free(c);
}

static void test_lru_eviction(void) {
  smr_s3_cache *c = smr_s3_cache_new(64 * 1024, NULL); /* 16 of 4 KiB */
  uint8_t *d = filled(4096, 1);
  char name[32];
  smr_s3_claim cl;
  for (int i = 0; i < 20; i++) { /* 80 KiB through a 64 KiB cache */
    snprintf(name, sizeof name, "events/%d", i);
    smr_s3_cache_put(c, name, 0, 4096, d);
    if (i == 15) /* record 0 used again: now 1 is the oldest */
      free(smr_s3_cache_get(c, "events/0", 0, 4096, &cl));
  }
  uint8_t *kept = smr_s3_cache_get(c, "events/0", 0, 4096, &cl);
  CHECK(kept != NULL);
  free(kept);
  CHECK(smr_s3_cache_get(c, "events/1", 0, 4096, &cl) == NULL);
  smr_s3_cache_done(c, &cl);
  uint8_t *recent = smr_s3_cache_get(c, "events/19", 0, 4096, &cl);
  CHECK(recent != NULL);
  free(recent);
  free(d);
  smr_s3_cache_free(c);
}

static void test_large_not_kept(void) {
  smr_s3_cache *c = smr_s3_cache_new(64 * 1024, NULL);
  uint8_t *d = filled(8192, 3); /* > budget / 16 */
  smr_s3_claim cl;
  CHECK(smr_s3_cache_get(c, "events/big", 0, 8192, &cl) == NULL);
  CHECK(!cl.claimed); /* nobody waits for a record that is not kept */
  smr_s3_cache_put(c, "events/big", 0, 8192, d);
  CHECK(smr_s3_cache_get(c, "events/big", 0, 8192, &cl) == NULL);
  CHECK(!smr_s3_cache_prefetch(c, "events/big", "k", 0, 8192));
  free(d);
  smr_s3_cache_free(c);
}

typedef struct waiter {
  smr_s3_cache *c;
  uint8_t *got;
  bool claimed;
} waiter;

static void *wait_for_record(void *arg) {
  waiter *w = arg;
  smr_s3_claim cl;
  w->got = smr_s3_cache_get(w->c, "events/x", 8, 64, &cl);
  w->claimed = cl.claimed;
  smr_s3_cache_done(w->c, &cl);
  return NULL;
}

static void test_waits_for_fetch_in_flight(void) {
  smr_s3_cache *c = smr_s3_cache_new(1 << 20, NULL);
  smr_s3_claim mine;
  CHECK(smr_s3_cache_get(c, "events/x", 8, 64, &mine) == NULL && mine.claimed);
  waiter w = {c, NULL, false};
  pthread_t th;
  pthread_create(&th, NULL, wait_for_record, &w);
  struct timespec ts = {0, 20000000};
  nanosleep(&ts, NULL); /* the other thread is now waiting */
  uint8_t *d = filled(64, 9);
  smr_s3_cache_put(c, "events/x", 8, 64, d);
  smr_s3_cache_done(c, &mine);
  pthread_join(th, NULL);
  CHECK(w.got && w.got[63] == 9); /* got the record fetched by "mine" */
  CHECK(!w.claimed);
  free(w.got);
  free(d);
  smr_s3_cache_free(c);
}

static void test_prefetch_needs_client(void) {
  smr_s3_cache *c = smr_s3_cache_new(1 << 20, NULL);
  CHECK(!smr_s3_cache_prefetch(c, "events/a", "trial/events/a", 0, 10));
  smr_s3_cache_free(c);
}

int main(void) {
  TEST_RUN(test_put_get_copy);
  TEST_RUN(test_lru_eviction);
  TEST_RUN(test_large_not_kept);
  TEST_RUN(test_waits_for_fetch_in_flight);
  TEST_RUN(test_prefetch_needs_client);
  return TEST_REPORT("test_s3_cache");
}
