/* s3_cache.c - shared record cache and prefetcher of an S3 trial (see
 * s3_cache.h).  One mutex guards the cache, the list of records being
 * fetched and the prefetch queue; fetching itself happens outside it. */
#include "source/s3_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"

#define BUCKETS 65536
#define PREFETCH_BATCH 16       /* records fetched together (connections) */
#define PREFETCH_MAX_ITEMS 8192 /* queued requests at most */

/* A record read recently (LRU list, hash chain). */
typedef struct rec {
  struct rec *chain, *prev, *next;
  char *rel;
  uint64_t off, len, hash;
  uint8_t *data;
} rec;

typedef struct pf_item {
  char *rel, *key;
  uint64_t off, len;
} pf_item;

struct smr_s3_cache {
  pthread_mutex_t mu;
  pthread_cond_t fetched; /* a fetch in flight ended */
  smr_s3_claim *fetching; /* records in flight (readers and prefetcher) */
  rec **buckets;          /* NULL until the first record */
  rec *head, *tail;       /* most recently used first */
  size_t bytes, budget;
  /* prefetch: a FIFO served by one thread started on first use */
  smr_s3 *client;
  pthread_cond_t work;
  pthread_t thread;
  bool started, stop;
  pf_item *q;
  size_t qhead, qn, qcap;
  size_t queued_bytes; /* queued or being prefetched */
};

static uint64_t rec_hash(const char *rel, uint64_t off, uint64_t len) {
  uint64_t h = smr_hash_str(SMR_HASH_INIT, rel);
  h = (h ^ off) * 1099511628211ULL;
  return (h ^ len) * 1099511628211ULL;
}

static void lru_unlink(smr_s3_cache *c, rec *r) {
  if (r->prev)
    r->prev->next = r->next;
  else
    c->head = r->next;
  if (r->next)
    r->next->prev = r->prev;
  else
    c->tail = r->prev;
  r->prev = r->next = NULL;
}

static void lru_push(smr_s3_cache *c, rec *r) {
  r->next = c->head;
  r->prev = NULL;
  if (c->head)
    c->head->prev = r;
  c->head = r;
  if (!c->tail)
    c->tail = r;
}

static rec **chain_of(smr_s3_cache *c, uint64_t h) {
  return &c->buckets[h % BUCKETS];
}

static void evict(smr_s3_cache *c, rec *r) {
  lru_unlink(c, r);
  for (rec **p = chain_of(c, r->hash); *p; p = &(*p)->chain)
    if (*p == r) {
      *p = r->chain;
      break;
    }
  c->bytes -= r->len;
  free(r->rel);
  free(r->data);
  free(r);
}

/* The cached record (mu held), or NULL. */
static rec *find(smr_s3_cache *c, const char *rel, uint64_t off, uint64_t len) {
  uint64_t h = rec_hash(rel, off, len);
  for (rec *r = c->buckets ? *chain_of(c, h) : NULL; r; r = r->chain)
    if (r->hash == h && r->off == off && r->len == len &&
        strcmp(r->rel, rel) == 0)
      return r;
  return NULL;
}

static bool being_fetched(const smr_s3_cache *c, const char *rel, uint64_t off,
                          uint64_t len) {
  for (const smr_s3_claim *f = c->fetching; f; f = f->next)
    if (f->off == off && f->len == len && strcmp(f->rel, rel) == 0)
      return true;
  return false;
}

static bool keepable(const smr_s3_cache *c, uint64_t len) {
  return len <= c->budget / 16;
}

static void claim_add(smr_s3_cache *c, smr_s3_claim *claim, const char *rel,
                      uint64_t off, uint64_t len) {
  *claim = (smr_s3_claim){c->fetching, rel, off, len, true};
  c->fetching = claim;
}

static void claim_remove(smr_s3_cache *c, smr_s3_claim *claim) {
  for (smr_s3_claim **p = &c->fetching; *p; p = &(*p)->next)
    if (*p == claim) {
      *p = claim->next;
      break;
    }
  claim->claimed = false;
  pthread_cond_broadcast(&c->fetched);
}

/* ------------------------------------------------------------- readers */

uint8_t *smr_s3_cache_get(smr_s3_cache *c, const char *rel, uint64_t off,
                          uint64_t len, smr_s3_claim *claim) {
  uint8_t *out = NULL;
  claim->claimed = false;
  if (!keepable(c, len))
    return NULL;
  pthread_mutex_lock(&c->mu);
  rec *r;
  while ((r = find(c, rel, off, len)) == NULL &&
         being_fetched(c, rel, off, len))
    pthread_cond_wait(&c->fetched, &c->mu);
  if (r) {
    out = malloc(len);
    if (out)
      memcpy(out, r->data, len);
    lru_unlink(c, r);
    lru_push(c, r);
  } else {
    claim_add(c, claim, rel, off, len);
  }
  pthread_mutex_unlock(&c->mu);
  return out;
}

void smr_s3_cache_done(smr_s3_cache *c, smr_s3_claim *claim) {
  if (!claim->claimed)
    return;
  pthread_mutex_lock(&c->mu);
  claim_remove(c, claim);
  pthread_mutex_unlock(&c->mu);
}

/* Insert a record (mu held); `data` becomes the cache's. */
static void insert(smr_s3_cache *c, const char *rel, uint64_t off, uint64_t len,
                   uint8_t *data) {
  if (find(c, rel, off, len)) {
    free(data);
    return;
  }
  rec *r = smr_xcalloc(1, sizeof *r);
  r->rel = smr_xstrdup(rel);
  r->off = off;
  r->len = len;
  r->hash = rec_hash(rel, off, len);
  r->data = data;
  if (!c->buckets)
    c->buckets = smr_xcalloc(BUCKETS, sizeof *c->buckets);
  r->chain = *chain_of(c, r->hash);
  *chain_of(c, r->hash) = r;
  lru_push(c, r);
  c->bytes += len;
  while (c->bytes > c->budget && c->tail)
    evict(c, c->tail);
}

void smr_s3_cache_put(smr_s3_cache *c, const char *rel, uint64_t off,
                      uint64_t len, const uint8_t *data) {
  if (!keepable(c, len))
    return; /* large tensors are read once and not kept */
  uint8_t *copy = smr_xmalloc(len);
  memcpy(copy, data, len);
  pthread_mutex_lock(&c->mu);
  insert(c, rel, off, len, copy);
  pthread_mutex_unlock(&c->mu);
}

/* ---------------------------------------------------------- prefetcher */

static void item_free(pf_item *it) {
  free(it->rel);
  free(it->key);
}

/* Take up to PREFETCH_BATCH queued records that are neither cached nor
 * in flight, claimed for the batch (mu held). */
static size_t take_batch(smr_s3_cache *c, pf_item *items,
                         smr_s3_claim *claims) {
  size_t n = 0;
  while (c->qn && n < PREFETCH_BATCH) {
    pf_item it = c->q[c->qhead];
    c->qhead = (c->qhead + 1) % c->qcap;
    c->qn--;
    if (find(c, it.rel, it.off, it.len) ||
        being_fetched(c, it.rel, it.off, it.len)) {
      c->queued_bytes -= it.len;
      item_free(&it);
      continue;
    }
    items[n] = it;
    claim_add(c, &claims[n], items[n].rel, it.off, it.len);
    n++;
  }
  return n;
}

static void *prefetch_main(void *arg) {
  smr_s3_cache *c = arg;
  pf_item items[PREFETCH_BATCH];
  smr_s3_claim claims[PREFETCH_BATCH];
  smr_s3_fetch f[PREFETCH_BATCH];
  pthread_mutex_lock(&c->mu);
  while (!c->stop) {
    size_t n = take_batch(c, items, claims);
    if (!n) {
      pthread_cond_wait(&c->work, &c->mu);
      continue;
    }
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < n; i++)
      f[i] = (smr_s3_fetch){.key = items[i].key,
                            .ranged = true,
                            .off = items[i].off,
                            .want = items[i].len};
    smr_s3_get_many(c->client, f, n);
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < n; i++) {
      if (f[i].ok)
        insert(c, items[i].rel, items[i].off, items[i].len,
               (uint8_t *)f[i].buf);
      claim_remove(c, &claims[i]);
      c->queued_bytes -= items[i].len;
      item_free(&items[i]);
    }
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

static void queue_push(smr_s3_cache *c, pf_item it) {
  if (c->qn == c->qcap) { /* grow, unrolling the ring */
    size_t cap = c->qcap ? c->qcap * 2 : 64;
    pf_item *q = smr_xmalloc(cap * sizeof *q);
    for (size_t i = 0; i < c->qn; i++)
      q[i] = c->q[(c->qhead + i) % c->qcap];
    free(c->q);
    c->q = q;
    c->qcap = cap;
    c->qhead = 0;
  }
  c->q[(c->qhead + c->qn) % c->qcap] = it;
  c->qn++;
}

bool smr_s3_cache_prefetch(smr_s3_cache *c, const char *rel, const char *key,
                           uint64_t off, uint64_t len) {
  if (!c->client || len == 0 || !keepable(c, len))
    return false;
  pthread_mutex_lock(&c->mu);
  bool take = !c->stop && c->qn < PREFETCH_MAX_ITEMS &&
              c->queued_bytes + len <= c->budget / 2 &&
              !find(c, rel, off, len) && !being_fetched(c, rel, off, len);
  if (take && !c->started)
    c->started = take = pthread_create(&c->thread, NULL, prefetch_main, c) == 0;
  if (take) {
    queue_push(c, (pf_item){smr_xstrdup(rel), smr_xstrdup(key), off, len});
    c->queued_bytes += len;
    pthread_cond_signal(&c->work);
  }
  pthread_mutex_unlock(&c->mu);
  return take;
}

/* ------------------------------------------------------------ lifetime */

smr_s3_cache *smr_s3_cache_new(size_t budget, smr_s3 *client) {
  smr_s3_cache *c = smr_xcalloc(1, sizeof *c);
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->fetched, NULL);
  pthread_cond_init(&c->work, NULL);
  c->budget = budget;
  c->client = client;
  return c;
}

size_t smr_s3_cache_budget(const smr_s3_cache *c) {
  return c->budget;
}

void smr_s3_cache_free(smr_s3_cache *c) {
  if (!c)
    return;
  pthread_mutex_lock(&c->mu);
  c->stop = true;
  pthread_cond_broadcast(&c->work);
  pthread_mutex_unlock(&c->mu);
  if (c->started)
    pthread_join(c->thread, NULL);
  for (size_t i = 0; i < c->qn; i++)
    item_free(&c->q[(c->qhead + i) % c->qcap]);
  free(c->q);
  for (rec *r = c->head, *next; r; r = next) {
    next = r->next;
    free(r->rel);
    free(r->data);
    free(r);
  }
  free(c->buckets);
  pthread_cond_destroy(&c->work);
  pthread_cond_destroy(&c->fetched);
  pthread_mutex_destroy(&c->mu);
  free(c);
}
