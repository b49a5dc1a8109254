/* source_s3.h - the S3 trial source ("s3://bucket/prefix", see docs/s3.md).
 * Internal to core/source/: everything else reaches it through source.h
 * (smr_source_open, the location helpers, smr_source_configure), which
 * locate.c routes to smr_source_kind_s3 (source_kind.h). */
#ifndef SMR_SOURCE_S3_H
#define SMR_SOURCE_S3_H

#include <stdbool.h>

#include "source/source.h"

/* Open "s3://bucket[/prefix]".  Endpoint, region and credentials come
 * from smr_s3_set_endpoint and the environment (docs/s3.md). */
int smr_source_s3_open(const char *url, smr_source **out, smr_error *err);

/* The endpoint of S3 sources opened afterwards (NULL: the environment's
 * AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, else AWS). */
void smr_s3_set_endpoint(const char *url);

bool smr_is_s3_location(const char *location);

/* Whether s3://bucket/prefix/<sub>/ holds any key (false on errors). */
bool smr_s3_location_has(const char *url, const char *sub);

/* The local directory holding what smrules keeps about an S3 trial:
 * $XDG_CACHE_HOME/smrules/s3/<sha256 of endpoint and URL>/ (default
 * ~/.cache), created with mode 0700.  NULL when it cannot be created. */
char *smr_s3_cache_dir(const char *url);

#endif
