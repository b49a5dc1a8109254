/* s3_cache.h - the records of an S3 trial that the rule threads share:
 * an LRU cache of recently fetched records within a byte budget, so a
 * record several rules read close in time costs one GET, and a
 * prefetcher that fetches records asked for ahead of use in parallel
 * batches (one background thread, many connections), so the rule threads
 * do not wait one round trip per record.
 *
 * A record is identified by (path relative to the trial, offset, length).
 * Records larger than 1/16 of the budget are neither kept nor prefetched
 * (they are read once by whoever asks). */
#ifndef SMR_S3_CACHE_H
#define SMR_S3_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "source/s3.h"

typedef struct smr_s3_cache smr_s3_cache;

/* `client` is used by the prefetcher thread; it must outlive the cache. */
smr_s3_cache *smr_s3_cache_new(size_t budget, smr_s3 *client);
void smr_s3_cache_free(smr_s3_cache *c);
size_t smr_s3_cache_budget(const smr_s3_cache *c);

/* A claim on a record the caller fetches itself (see smr_s3_cache_get). */
typedef struct smr_s3_claim {
  struct smr_s3_claim *next;
  const char *rel;
  uint64_t off, len;
  bool claimed;
} smr_s3_claim;

/* A malloc'ed copy of the record when cached.  Otherwise NULL, and the
 * caller fetches it; when claim->claimed, other threads asking for the
 * same record wait for it (also while the prefetcher fetches it), and the
 * caller must end the claim with smr_s3_cache_done after smr_s3_cache_put
 * (or after failing). */
uint8_t *smr_s3_cache_get(smr_s3_cache *c, const char *rel, uint64_t off,
                          uint64_t len, smr_s3_claim *claim);
void smr_s3_cache_put(smr_s3_cache *c, const char *rel, uint64_t off,
                      uint64_t len, const uint8_t *data);
void smr_s3_cache_done(smr_s3_cache *c, smr_s3_claim *claim);

/* Ask for a record ahead of use: it is fetched in the background (key is
 * its S3 key) unless it is cached, being fetched, or the bytes already
 * queued reach half the budget (then the request is dropped: the reader
 * fetches it itself when it gets there).  A failed prefetch is dropped
 * the same way.  Returns whether the record was queued. */
bool smr_s3_cache_prefetch(smr_s3_cache *c, const char *rel, const char *key,
                           uint64_t off, uint64_t len);

#endif
