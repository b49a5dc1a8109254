/* s3.h - a small S3 client for the S3 trial source (internal to
 * source_s3.c, s3_client.c, s3_auth.c and s3_xml.c): ListObjectsV2 with
 * pagination, HEAD, whole and ranged GETs, signed by libcurl's AWS SigV4,
 * retried with backoff on throttling, server errors and broken
 * connections.  Secrets never appear in error messages. */
#ifndef SMR_S3_H
#define SMR_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

/* ------------------------------------------------------------ settings */

/* Where requests go and who signs them. */
typedef struct smr_s3_auth {
  char *endpoint; /* "scheme://host[:port][/path]", no trailing '/';
                     NULL: AWS (https://<bucket>.s3.<region>.amazonaws.com) */
  char *region;   /* never NULL */
  char *key_id;   /* NULL: anonymous (unsigned) requests */
  char *secret;
  char *token;     /* session token or NULL */
  char *cred_from; /* where the credentials came from (for messages) */
  bool renewable;  /* from a metadata service: renewed when they expire */
} smr_s3_auth;

/* Endpoint, region and credentials from the environment (see s3_auth.c);
 * `endpoint` (NULL: AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL) wins. */
int smr_s3_auth_load(const char *endpoint, smr_s3_auth *out, smr_error *err);
/* The endpoint the environment names (AWS_ENDPOINT_URL_S3, then
 * AWS_ENDPOINT_URL), or NULL. */
const char *smr_s3_endpoint_env(void);
void smr_s3_auth_free(smr_s3_auth *a);

/* ------------------------------------------------------------- client */

typedef struct smr_s3 smr_s3;

typedef struct smr_s3_stats {
  uint64_t requests; /* HTTP requests sent, retries included */
  uint64_t lists;    /* ListObjectsV2 pages */
  uint64_t heads;
  uint64_t gets;       /* whole-object GETs */
  uint64_t range_gets; /* ranged GETs */
  uint64_t retries;
  uint64_t bytes; /* response body bytes received */
} smr_s3_stats;

/* A client for one bucket; takes ownership of `auth`. */
int smr_s3_new(const char *bucket, smr_s3_auth *auth, smr_s3 **out,
               smr_error *err);
void smr_s3_free(smr_s3 *c);
void smr_s3_get_stats(smr_s3 *c, smr_s3_stats *out);

typedef struct smr_s3_object {
  char *key;
  int64_t size;
  int64_t mtime_ns;
} smr_s3_object;

typedef struct smr_s3_objects {
  smr_s3_object *v;
  size_t n, cap;
} smr_s3_objects;
void smr_s3_objects_free(smr_s3_objects *o);

/* Every key under `prefix` (page after page), in the order S3 lists them,
 * optionally only those after `start_after`. */
int smr_s3_list(smr_s3 *c, const char *prefix, const char *start_after,
                smr_s3_objects *out, smr_error *err);

/* Whether any key starts with `prefix` (one short listing). */
int smr_s3_list_any(smr_s3 *c, const char *prefix, bool *any, smr_error *err);

/* SMR_OK and the size (and mtime, optional) of an object; 1 when it does
 * not exist; an error status otherwise. */
int smr_s3_head(smr_s3 *c, const char *key, int64_t *size, int64_t *mtime_ns,
                smr_error *err);

/* A whole object of at most `max` bytes, NUL-terminated. */
int smr_s3_get(smr_s3 *c, const char *key, size_t max, char **buf, size_t *len,
               smr_error *err);

/* Exactly [off, off+len) of an object (len > 0).  *size receives the
 * object's size when the server told it (else -1), also on failure.
 * SMR_ERR_FORMAT when the range does not lie inside the object. */
int smr_s3_get_range(smr_s3 *c, const char *key, uint64_t off, uint64_t len,
                     uint8_t **buf, int64_t *size, smr_error *err);

/* Many small objects, or byte ranges of objects, at once (parallel
 * connections, no retries: a failed one has ok == false and the caller
 * reads it again alone).  A ranged fetch is ok only when exactly
 * [off, off+len) came back. */
typedef struct smr_s3_fetch {
  const char *key;
  size_t max;         /* whole objects: largest accepted size */
  bool ranged;        /* fetch [off, off+want) only (want > 0) */
  uint64_t off, want; /* ranged */
  char *buf;          /* NUL-terminated, owned by the caller after the call */
  size_t len;
  bool ok;
} smr_s3_fetch;
void smr_s3_get_many(smr_s3 *c, smr_s3_fetch *v, size_t n);

/* -------------------------------------------------------- URL helpers */

/* Percent-encode for S3 (RFC 3986 unreserved kept; '/' kept when
 * keep_slash).  Appends to `b`. */
void smr_s3_encode(smr_buf *b, const char *s, bool keep_slash);

/* ---------------------------------------------------------------- XML */

/* One page of a ListObjectsV2 answer: objects appended to `out`. */
int smr_s3_parse_list(const char *xml, size_t len, smr_s3_objects *out,
                      bool *truncated, char **next_token, smr_error *err);
/* Code and Message of an S3 <Error> body (empty strings when absent). */
void smr_s3_parse_error(const char *xml, size_t len, char *code, size_t ncode,
                        char *msg, size_t nmsg);
/* ISO 8601 "2024-01-02T03:04:05.678Z" to ns since the epoch; -1 if bad. */
int64_t smr_s3_parse_time(const char *s);

#endif
