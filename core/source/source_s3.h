/* source_s3.h - the S3 trial source ("s3://bucket/prefix", see docs/s3.md)
 * and what the reader and the command line need beyond the source
 * interface of source.h: the endpoint setting, a local place for the
 * catalog and rule output, and listings that start after a key. */
#ifndef SMR_SOURCE_S3_H
#define SMR_SOURCE_S3_H

#include <stdbool.h>

#include "source/source.h"

/* Open "s3://bucket[/prefix]".  Endpoint, region and credentials come
 * from smr_s3_set_endpoint and the environment (docs/s3.md). */
int smr_source_s3_open(const char *url, smr_source **out, smr_error *err);

/* --s3-endpoint: the endpoint of S3 sources opened afterwards (NULL: the
 * environment's AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, else AWS).  Call
 * before opening sources, from one thread. */
void smr_s3_set_endpoint(const char *url);

bool smr_is_s3_location(const char *location);
bool smr_source_is_s3(const smr_source *s);

/* Whether s3://bucket/prefix/<sub>/ holds any key (false on errors). */
bool smr_s3_location_has(const char *url, const char *sub);

/* The local directory holding what smrules keeps about an S3 trial (the
 * catalog state.db, rule-output/): $XDG_CACHE_HOME/smrules/s3/<sha256 of
 * endpoint and URL>/ (default ~/.cache), created with mode 0700.  NULL
 * when it cannot be created. */
char *smr_s3_cache_dir(const char *url);

/* Like smr_source_list, but only keys whose path relative to the root
 * sorts after `start_after` (NULL: everything).  S3 lists in key order,
 * so this reads only the listing pages after that key. */
int smr_source_s3_list_after(smr_source *s, const char *dir, const char *suffix,
                             const char *start_after, smr_source_listing *out,
                             smr_error *err);

/* The files (of the last listing) the caller is about to read with
 * smr_source_read_all, in this order: they are fetched ahead, in parallel.
 * Without it, a listing itself is taken as that list. */
void smr_source_s3_read_ahead(smr_source *s, const smr_source_listing *files);

/* Byte budget of the record cache the rule threads share (0 when `s` is
 * not an S3 source). */
size_t smr_source_s3_cache_budget(const smr_source *s);

/* Ask for a record [off, off+len) of `rel` ahead of use: fetched in the
 * background into the shared record cache (s3_cache.h).  No effect on
 * other sources. */
void smr_source_s3_prefetch(smr_source *s, const char *rel, uint64_t off,
                            uint64_t len);

#endif
