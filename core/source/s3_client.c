/* s3_client.c - S3 requests over libcurl: URLs (virtual-hosted on AWS,
 * path-style on custom endpoints), SigV4 signing by libcurl, a pool of
 * easy handles so that threads reading in parallel reuse connections, a
 * multi handle for fetching many small objects at once, and bounded
 * retries with exponential backoff and jitter on throttling (429,
 * SlowDown), server errors (5xx) and broken connections.
 *
 * Ranged GETs are checked against the Content-Range the server answers
 * with: the body is accepted (and its buffer allocated) only when it is
 * exactly the bytes asked for inside the object, so a wrong index entry
 * can neither make us read a whole event file nor allocate its length. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "source/s3.h"

#include "aws/aws_metadata.h"
#include "base/curl_lazy.h"

#define EMPTY_SHA256                                                           \
  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define ERROR_BODY_MAX (64u << 10)
#define LIST_PAGE_MAX (32u << 20)
#define MULTI_CONNECTIONS 16L
#define DEFAULT_ATTEMPTS 6
/* The whole of one request, from connecting to the last byte: a server
 * that drips a byte now and then passes the low-speed check (1 byte/s
 * over 60 s) and would otherwise hold the run forever.  A request that
 * runs out of it is not tried again. */
#define DEFAULT_TIMEOUT_S 300
/* One listing (all its pages) holds at most this many keys, in at most
 * MAX_KEYS / 1000 + 100 pages (S3 gives up to 1000 keys a page): a server
 * whose continuation tokens never end is an error, not a growing list. */
#define DEFAULT_MAX_KEYS 10000000L
#define KEYS_PER_PAGE 1000
#define EXTRA_PAGES 100
#define BACKOFF_BASE_MS 100
#define BACKOFF_CAP_MS 5000

struct smr_s3 {
  char *bucket;
  smr_s3_auth auth; /* auth.region may change (guarded by mu) */
  bool path_style;
  int max_attempts;
  long timeout_ms; /* SMRULES_S3_TIMEOUT */
  size_t max_keys; /* SMRULES_S3_MAX_KEYS */
  pthread_mutex_t mu;
  CURL **pool; /* idle easy handles (guarded by mu) */
  size_t npool, cappool;
  pthread_mutex_t multi_mu;
  CURLM *multi;
  smr_s3_stats st; /* updated with atomics */
};

static void count(uint64_t *field, uint64_t n) {
  __atomic_fetch_add(field, n, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------- client */

/* Names that cannot be a DNS label on AWS (dots break TLS wildcards)
 * are addressed path-style. */
static bool needs_path_style(const char *bucket) {
  for (const char *p = bucket; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
      return true;
  return false;
}

static int attempts_from_env(void) {
  const char *e = getenv("SMRULES_S3_MAX_ATTEMPTS");
  int n = e ? atoi(e) : 0;
  return n >= 1 && n <= 20 ? n : DEFAULT_ATTEMPTS;
}

/* SMRULES_S3_TIMEOUT: seconds (1 to a day) a request may take. */
static long timeout_ms_from_env(void) {
  const char *e = getenv("SMRULES_S3_TIMEOUT");
  char *end = NULL;
  double s = e ? strtod(e, &end) : 0;
  if (!e || end == e || *end || !(s >= 0.1 && s <= 86400))
    s = DEFAULT_TIMEOUT_S;
  return (long)(s * 1000);
}

/* SMRULES_S3_MAX_KEYS: keys one listing may hold (1000 to 10^9). */
static size_t max_keys_from_env(void) {
  const char *e = getenv("SMRULES_S3_MAX_KEYS");
  long long n = e ? atoll(e) : 0;
  return n >= 1000 && n <= 1000000000LL ? (size_t)n : DEFAULT_MAX_KEYS;
}

int smr_s3_new(const char *bucket, smr_s3_auth *auth, smr_s3 **out,
               smr_error *err) {
  smr_s3 *c = smr_xcalloc(1, sizeof *c);
  c->bucket = smr_xstrdup(bucket);
  c->auth = *auth;
  memset(auth, 0, sizeof *auth);
  c->path_style = c->auth.endpoint != NULL || needs_path_style(bucket);
  c->max_attempts = attempts_from_env();
  c->timeout_ms = timeout_ms_from_env();
  c->max_keys = max_keys_from_env();
  pthread_mutex_init(&c->mu, NULL);
  pthread_mutex_init(&c->multi_mu, NULL);
  *out = c;
  (void)err;
  return SMR_OK;
}

void smr_s3_free(smr_s3 *c) {
  if (!c)
    return;
  for (size_t i = 0; i < c->npool; i++)
    curl_easy_cleanup(c->pool[i]);
  free(c->pool);
  if (c->multi)
    curl_multi_cleanup(c->multi);
  smr_s3_auth_free(&c->auth);
  free(c->bucket);
  pthread_mutex_destroy(&c->mu);
  pthread_mutex_destroy(&c->multi_mu);
  free(c);
}

void smr_s3_get_stats(smr_s3 *c, smr_s3_stats *out) {
  uint64_t *src = (uint64_t *)&c->st, *dst = (uint64_t *)out;
  for (size_t i = 0; i < sizeof *out / sizeof(uint64_t); i++)
    dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

static CURL *take_handle(smr_s3 *c) {
  pthread_mutex_lock(&c->mu);
  CURL *h = c->npool ? c->pool[--c->npool] : NULL;
  pthread_mutex_unlock(&c->mu);
  return h ? h : curl_easy_init();
}

static void give_handle(smr_s3 *c, CURL *h) {
  pthread_mutex_lock(&c->mu);
  if (c->npool == c->cappool) {
    c->cappool = c->cappool ? c->cappool * 2 : 8;
    c->pool = smr_xrealloc(c->pool, c->cappool * sizeof *c->pool);
  }
  c->pool[c->npool++] = h;
  pthread_mutex_unlock(&c->mu);
}

static char *region_copy(smr_s3 *c) {
  pthread_mutex_lock(&c->mu);
  char *r = smr_xstrdup(c->auth.region);
  pthread_mutex_unlock(&c->mu);
  return r;
}

/* ---------------------------------------------------------------- URLs */

void smr_s3_encode(smr_buf *b, const char *s, bool keep_slash) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    unsigned char ch = *p;
    bool plain = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                 (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' ||
                 ch == '.' || ch == '~' || (keep_slash && ch == '/');
    if (plain)
      smr_buf_append(b, p, 1);
    else
      smr_buf_printf(b, "%%%02X", ch);
  }
}

static char *build_url(smr_s3 *c, const char *region, const char *key,
                       const char *query) {
  smr_buf b = {0};
  if (c->auth.endpoint) {
    smr_buf_puts(&b, c->auth.endpoint);
  } else if (c->path_style) {
    smr_buf_printf(&b, "https://s3.%s.amazonaws.com", region);
  } else {
    smr_buf_printf(&b, "https://%s.s3.%s.amazonaws.com", c->bucket, region);
  }
  if (c->path_style) {
    smr_buf_puts(&b, "/");
    smr_s3_encode(&b, c->bucket, false);
  }
  if (key) {
    smr_buf_puts(&b, "/");
    smr_s3_encode(&b, key, true);
  } else if (!c->path_style) {
    smr_buf_puts(&b, "/");
  }
  if (query)
    smr_buf_printf(&b, "?%s", query);
  return b.data;
}

/* ------------------------------------------------------ one transfer */

typedef struct request {
  const char *key;   /* NULL: the bucket (listing) */
  const char *query; /* encoded, parameters sorted by name */
  bool head;
  bool ranged;
  uint64_t off, len; /* ranged */
  size_t max;        /* largest accepted body of a 2xx answer */
} request;

typedef struct response {
  CURL *h;
  const request *q;
  char *url;
  struct curl_slist *hdrs;
  char errbuf[CURL_ERROR_SIZE];
  CURLcode cc;
  long status;
  int64_t total;       /* object size from Content-Range, else -1 */
  int64_t range_first; /* from Content-Range, -1 when absent */
  int64_t range_last;
  int64_t content_length;
  int64_t mtime_s; /* HEAD: Last-Modified, -1 unknown */
  char region[64]; /* x-amz-bucket-region */
  bool started;    /* first body byte seen */
  bool too_big, range_bad;
  bool out_of_time; /* the whole request took the time it may (timeout_ms) */
  size_t limit;
  uint8_t *data;
  size_t len, cap;
  uint64_t *bytes; /* statistics counter */
} response;

static void response_reset(response *r) {
  free(r->data);
  r->data = NULL;
  r->len = r->cap = 0;
  r->status = 0;
  r->total = r->range_first = r->range_last = r->content_length = -1;
  r->mtime_s = -1;
  r->region[0] = r->errbuf[0] = '\0';
  r->started = r->too_big = r->range_bad = r->out_of_time = false;
}

static void response_free(response *r) {
  free(r->data);
  free(r->url);
  curl_slist_free_all(r->hdrs);
  memset(r, 0, sizeof *r);
}

/* "bytes FIRST-LAST/TOTAL" or "bytes * /TOTAL" */
static void parse_content_range(response *r, const char *v) {
  long long a = -1, b = -1, t = -1;
  if (sscanf(v, "bytes %lld-%lld/%lld", &a, &b, &t) == 3) {
    r->range_first = a;
    r->range_last = b;
    r->total = t;
  } else if (sscanf(v, "bytes */%lld", &t) == 1) {
    r->total = t;
  }
}

static size_t on_header(char *p, size_t size, size_t n, void *arg) {
  response *r = arg;
  size_t len = size * n;
  char line[256];
  size_t k = len < sizeof line - 1 ? len : sizeof line - 1;
  memcpy(line, p, k);
  line[k] = '\0';
  line[strcspn(line, "\r\n")] = '\0';
  if (strncmp(line, "HTTP/", 5) == 0) { /* a new answer (after 100) */
    r->total = r->range_first = r->range_last = r->content_length = -1;
    r->region[0] = '\0';
  } else if (strncasecmp(line, "content-range:", 14) == 0) {
    parse_content_range(r, line + 14 + strspn(line + 14, " \t"));
  } else if (strncasecmp(line, "content-length:", 15) == 0) {
    r->content_length = strtoll(line + 15, NULL, 10);
  } else if (strncasecmp(line, "x-amz-bucket-region:", 20) == 0) {
    snprintf(r->region, sizeof r->region, "%s",
             line + 20 + strspn(line + 20, " \t"));
  }
  return len;
}

/* A 2xx answer to a ranged GET must be exactly the asked-for bytes. */
static bool range_matches(response *r) {
  const request *q = r->q;
  if (r->status == 206)
    return r->range_first == (int64_t)q->off &&
           r->range_last == (int64_t)(q->off + q->len - 1) &&
           r->total >= (int64_t)(q->off + q->len);
  /* 200: the server sent the whole object; fine only when that is it */
  if (r->content_length >= 0)
    r->total = r->content_length;
  return q->off == 0 && r->content_length == (int64_t)q->len;
}

/* Decide, at the first body byte, how much body is acceptable. */
static bool body_start(response *r) {
  r->started = true;
  curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->status);
  if (r->status < 200 || r->status > 299) {
    r->limit = ERROR_BODY_MAX;
    return true;
  }
  if (r->q->ranged) {
    if (!range_matches(r)) {
      r->range_bad = true;
      return false;
    }
    r->limit = (size_t)r->q->len;
  } else {
    r->limit = r->q->max;
    if (r->content_length > (int64_t)r->limit) {
      r->too_big = true;
      return false;
    }
  }
  /* the size is now the server's real object size: reserve it */
  size_t want = r->q->ranged            ? r->limit
                : r->content_length > 0 ? (size_t)r->content_length
                                        : 0;
  if (want) {
    r->data = malloc(want + 1);
    if (!r->data)
      return false;
    r->cap = want + 1;
  }
  return true;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg) {
  response *r = arg;
  size_t len = size * n;
  if (!r->started && !body_start(r))
    return 0;
  if (len > r->limit - r->len) {
    r->too_big = true;
    return 0;
  }
  if (r->len + len + 1 > r->cap) {
    size_t cap = r->cap ? r->cap : 4096;
    while (cap < r->len + len + 1)
      cap *= 2;
    uint8_t *d = realloc(r->data, cap);
    if (!d)
      return 0;
    r->data = d;
    r->cap = cap;
  }
  memcpy(r->data + r->len, p, len);
  r->len += len;
  count(r->bytes, len);
  return len;
}

/* The credentials of this moment (renew_creds may replace them while
 * other threads send requests). */
static char *dup_or_null(const char *s) {
  return s ? smr_xstrdup(s) : NULL;
}

static void creds_copy(smr_s3 *c, smr_aws_creds *k) {
  memset(k, 0, sizeof *k);
  pthread_mutex_lock(&c->mu);
  k->key_id = dup_or_null(c->auth.key_id);
  k->secret = dup_or_null(c->auth.secret);
  k->token = dup_or_null(c->auth.token);
  pthread_mutex_unlock(&c->mu);
}

static void setup(smr_s3 *c, CURL *h, const request *q, response *r) {
  char *region = region_copy(c);
  free(r->url);
  r->url = build_url(c, region, q->key, q->query);
  curl_slist_free_all(r->hdrs);
  r->hdrs = curl_slist_append(NULL, "x-amz-content-sha256: " EMPTY_SHA256);
  smr_aws_creds k;
  creds_copy(c, &k);
  if (k.token) {
    char *t = smr_xasprintf("x-amz-security-token: %s", k.token);
    r->hdrs = curl_slist_append(r->hdrs, t);
    explicit_bzero(t, strlen(t));
    free(t);
  }
  if (q->ranged) {
    char range[80];
    snprintf(range, sizeof range, "Range: bytes=%llu-%llu",
             (unsigned long long)q->off,
             (unsigned long long)(q->off + q->len - 1));
    r->hdrs = curl_slist_append(r->hdrs, range);
  }
  r->h = h;
  r->q = q;
  r->bytes = &c->st.bytes;
  response_reset(r);
  curl_easy_reset(h);
  curl_easy_setopt(h, CURLOPT_URL, r->url);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, r->hdrs);
  if (k.key_id) { /* libcurl copies the strings */
    char sigv4[128];
    snprintf(sigv4, sizeof sigv4, "aws:amz:%s:s3", region);
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4);
    curl_easy_setopt(h, CURLOPT_USERNAME, k.key_id);
    curl_easy_setopt(h, CURLOPT_PASSWORD, k.secret);
  }
  smr_aws_creds_free(&k);
  if (q->head) {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(h, CURLOPT_FILETIME, 1L);
  }
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, r->errbuf);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   c->timeout_ms < 10000L ? c->timeout_ms : 10000L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
  free(region);
}

/* After the transfer: the status of answers without a body. */
static void finish(response *r) {
  if (!r->started)
    curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->status);
}

/* -------------------------------------------------------------- retries */

static bool retryable_curl(CURLcode cc) {
  switch (cc) {
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_CONNECT:
  case CURLE_OPERATION_TIMEDOUT:
  case CURLE_SEND_ERROR:
  case CURLE_RECV_ERROR:
  case CURLE_GOT_NOTHING:
  case CURLE_PARTIAL_FILE:
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_HTTP2:
  case CURLE_HTTP2_STREAM:
    return true;
  default:
    return false;
  }
}

static bool retryable(const response *r) {
  if (r->cc != CURLE_OK)
    return !r->too_big && !r->range_bad && !r->out_of_time &&
           retryable_curl(r->cc);
  if (r->status == 429 || r->status >= 500)
    return true;
  if (r->status == 400 && r->data) { /* RequestTimeout: idle upload */
    char code[64], msg[8];
    smr_s3_parse_error((const char *)r->data, r->len, code, sizeof code, msg,
                       sizeof msg);
    return strcmp(code, "RequestTimeout") == 0;
  }
  return false;
}

/* S3 names the bucket's region when asked in the wrong one. */
static bool follow_region(smr_s3 *c, const response *r) {
  if (!r->region[0] ||
      (r->status != 301 && r->status != 400 && r->status != 307))
    return false;
  pthread_mutex_lock(&c->mu);
  bool changed = strcmp(c->auth.region, r->region) != 0;
  if (changed) {
    free(c->auth.region);
    c->auth.region = smr_xstrdup(r->region);
  }
  pthread_mutex_unlock(&c->mu);
  return changed;
}

/* Exponential backoff with jitter: half fixed, half random. */
static void backoff(int attempt, unsigned *seed) {
  long d = BACKOFF_BASE_MS << (attempt < 10 ? attempt : 10);
  if (d > BACKOFF_CAP_MS)
    d = BACKOFF_CAP_MS;
  long ms = d / 2 + (long)(rand_r(seed) % (unsigned)(d / 2 + 1));
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

static uint64_t *kind_counter(smr_s3 *c, const request *q) {
  return q->head     ? &c->st.heads
         : q->ranged ? &c->st.range_gets
         : q->key    ? &c->st.gets
                     : &c->st.lists;
}

/* Perform `q` with retries; the final answer is in *r (status or curl
 * code).  The handle goes back to the pool. */
/* Credentials of a role expire after some hours: S3 then answers 400
 * ExpiredToken (403 for some requests). */
static bool expired(const smr_s3 *c, const request *q, const response *r) {
  if (!c->auth.renewable || (r->status != 400 && r->status != 403))
    return false;
  if (q->head) /* no body to say why: a 400 is taken as the expiry */
    return r->status == 400;
  char code[128], msg[64];
  smr_s3_parse_error((const char *)r->data, r->len, code, sizeof code, msg,
                     sizeof msg);
  return strcmp(code, "ExpiredToken") == 0 ||
         strcmp(code, "TokenRefreshRequired") == 0;
}

/* Ask the metadata service again and use what it gives from now on. */
static bool renew_creds(smr_s3 *c) {
  smr_aws_metadata_forget();
  smr_aws_creds cr;
  char *from = NULL;
  smr_error e;
  if (smr_aws_creds_from_metadata(&cr, &from, &e) != SMR_OK)
    return false;
  pthread_mutex_lock(&c->mu);
  smr_aws_creds old = {c->auth.key_id, c->auth.secret, c->auth.token, NULL,
                       false};
  c->auth.key_id = cr.key_id;
  c->auth.secret = cr.secret;
  c->auth.token = cr.token;
  pthread_mutex_unlock(&c->mu);
  smr_aws_creds_free(&old);
  free(from);
  return true;
}

/* A timeout is the total one (CURLOPT_TIMEOUT_MS) rather than the
 * low-speed one when the request took that long. */
static void mark_out_of_time(const smr_s3 *c, response *r) {
  curl_off_t us = 0;
  if (r->cc == CURLE_OPERATION_TIMEDOUT &&
      curl_easy_getinfo(r->h, CURLINFO_TOTAL_TIME_T, &us) == CURLE_OK &&
      us >= (curl_off_t)c->timeout_ms * 1000 * 9 / 10)
    r->out_of_time = true;
}

static void perform(smr_s3 *c, const request *q, response *r) {
  CURL *h = take_handle(c);
  if (!h) {
    r->cc = CURLE_OUT_OF_MEMORY;
    return;
  }
  unsigned seed = (unsigned)time(NULL) ^ (unsigned)(uintptr_t)r;
  int redirects = 0;
  bool renewed = false;
  for (int attempt = 0;; attempt++) {
    setup(c, h, q, r);
    count(&c->st.requests, 1);
    count(kind_counter(c, q), 1);
    r->cc = curl_easy_perform(h);
    finish(r);
    mark_out_of_time(c, r);
    if (follow_region(c, r) && redirects++ < 2) {
      attempt--;
      continue;
    }
    if (!renewed && expired(c, q, r) && renew_creds(c)) {
      renewed = true;
      attempt--;
      continue;
    }
    if (!retryable(r) || attempt + 1 >= c->max_attempts)
      break;
    count(&c->st.retries, 1);
    backoff(attempt, &seed);
  }
  if (q->head && r->cc == CURLE_OK && r->status == 200) {
    curl_off_t cl = -1, ft = -1;
    curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
    curl_easy_getinfo(h, CURLINFO_FILETIME_T, &ft);
    r->content_length = cl;
    r->mtime_s = ft;
  }
  r->h = NULL;
  give_handle(c, h);
}

/* ------------------------------------------------------------- errors */

static int fail(smr_s3 *c, const request *q, const response *r,
                smr_error *err) {
  char where[600];
  snprintf(where, sizeof where, "s3://%s/%s", c->bucket, q->key ? q->key : "");
  if (r->out_of_time)
    return smr_error_set(err, SMR_ERR_IO, where, -1,
                         "no complete answer within %.3g s, the time one S3 "
                         "request may take (SMRULES_S3_TIMEOUT), %zu bytes "
                         "received: the server is too slow or stalling",
                         c->timeout_ms / 1000.0, r->len);
  if (r->too_big)
    return smr_error_set(err, SMR_ERR_FORMAT, where, -1,
                         "the answer is more than the %zu bytes expected at "
                         "most",
                         q->max);
  if (r->cc != CURLE_OK && !r->range_bad && !r->too_big)
    return smr_error_set(err, SMR_ERR_IO, where, -1, "%s: %s",
                         curl_easy_strerror(r->cc),
                         r->errbuf[0] ? r->errbuf : "no detail");
  char code[128], msg[256];
  smr_s3_parse_error((const char *)r->data, r->len, code, sizeof code, msg,
                     sizeof msg);
  const char *hint = "";
  pthread_mutex_lock(&c->mu);
  bool signed_requests = c->auth.key_id != NULL;
  pthread_mutex_unlock(&c->mu);
  if ((r->status == 403 || r->status == 401) && !signed_requests)
    hint = " (requests were not signed: no AWS credentials were found)";
  /* a missing object reads like a missing file of a local trial */
  if (r->status == 404 && q->key && (!code[0] || !strcmp(code, "NoSuchKey")))
    return smr_error_set(err, SMR_ERR_IO, where, -1,
                         "cannot open: No such file or directory");
  if (r->status == 404 && !code[0])
    snprintf(code, sizeof code, "%s", q->key ? "NoSuchKey" : "NoSuchBucket");
  return smr_error_set(err, SMR_ERR_IO, where, -1, "HTTP %ld%s%s%s%s%s",
                       r->status, code[0] ? " " : "", code, msg[0] ? ": " : "",
                       msg, hint);
}

/* ------------------------------------------------------------ listing */

static char *list_query(const char *prefix, const char *start_after,
                        const char *token) {
  smr_buf b = {0};
  if (token) {
    smr_buf_puts(&b, "continuation-token=");
    smr_s3_encode(&b, token, false);
    smr_buf_puts(&b, "&");
  }
  smr_buf_puts(&b, "list-type=2&prefix=");
  smr_s3_encode(&b, prefix, false);
  if (start_after && *start_after) {
    smr_buf_puts(&b, "&start-after=");
    smr_s3_encode(&b, start_after, false);
  }
  return b.data;
}

int smr_s3_list(smr_s3 *c, const char *prefix, const char *start_after,
                smr_s3_objects *out, smr_error *err) {
  char *token = NULL;
  int rc = SMR_OK;
  size_t n0 = out->n, max_pages = c->max_keys / KEYS_PER_PAGE + EXTRA_PAGES;
  for (size_t page = 0; rc == SMR_OK; page++) {
    if (page == max_pages || out->n - n0 > c->max_keys) {
      char where[600];
      snprintf(where, sizeof where, "s3://%s/%s", c->bucket, prefix);
      rc = smr_error_set(err, SMR_ERR_IO, where, -1,
                         "the listing goes on past %zu keys in %zu pages "
                         "(at most %zu keys in %zu pages, "
                         "SMRULES_S3_MAX_KEYS): stopped",
                         out->n - n0, page, c->max_keys, max_pages);
      break;
    }
    char *query = list_query(prefix, start_after, token);
    request q = {.query = query, .max = LIST_PAGE_MAX};
    response r = {0};
    perform(c, &q, &r);
    bool truncated = false;
    char *next = NULL;
    if (r.cc != CURLE_OK || r.status != 200)
      rc = fail(c, &q, &r, err);
    else
      rc = smr_s3_parse_list((const char *)r.data, r.len, out, &truncated,
                             &next, err);
    response_free(&r);
    free(query);
    if (rc == SMR_OK && truncated &&
        (!next || !*next || (token && !strcmp(next, token))))
      rc = smr_error_set(err, SMR_ERR_FORMAT, "ListObjectsV2", -1,
                         "page %zu is truncated but gives no new "
                         "continuation token",
                         page + 1);
    free(token);
    token = next;
    if (!truncated)
      break;
  }
  free(token);
  return rc;
}

int smr_s3_list_any(smr_s3 *c, const char *prefix, bool *any, smr_error *err) {
  smr_buf b = {0};
  smr_buf_puts(&b, "list-type=2&max-keys=1&prefix=");
  smr_s3_encode(&b, prefix, false);
  request q = {.query = b.data, .max = LIST_PAGE_MAX};
  response r = {0};
  perform(c, &q, &r);
  smr_s3_objects objs = {0};
  bool truncated = false;
  char *next = NULL;
  int rc = r.cc != CURLE_OK || r.status != 200
               ? fail(c, &q, &r, err)
               : smr_s3_parse_list((const char *)r.data, r.len, &objs,
                                   &truncated, &next, err);
  *any = rc == SMR_OK && objs.n > 0;
  smr_s3_objects_free(&objs);
  free(next);
  response_free(&r);
  smr_buf_free(&b);
  return rc;
}

/* ---------------------------------------------------------- HEAD, GET */

int smr_s3_head(smr_s3 *c, const char *key, int64_t *size, int64_t *mtime_ns,
                smr_error *err) {
  request q = {.key = key, .head = true};
  response r = {0};
  perform(c, &q, &r);
  int rc;
  if (r.cc == CURLE_OK && r.status == 404) {
    rc = 1;
  } else if (r.cc != CURLE_OK || r.status != 200) {
    rc = fail(c, &q, &r, err);
  } else {
    if (size)
      *size = r.content_length;
    if (mtime_ns)
      *mtime_ns = r.mtime_s >= 0 ? r.mtime_s * 1000000000 : -1;
    rc = SMR_OK;
  }
  response_free(&r);
  return rc;
}

int smr_s3_get(smr_s3 *c, const char *key, size_t max, char **buf, size_t *len,
               smr_error *err) {
  *buf = NULL;
  *len = 0;
  request q = {.key = key, .max = max};
  response r = {0};
  perform(c, &q, &r);
  int rc = SMR_OK;
  if (r.too_big)
    rc = smr_error_set(err, SMR_ERR_FORMAT, key, -1,
                       "object is more than the %zu bytes expected at most",
                       max);
  else if (r.cc != CURLE_OK || r.status != 200)
    rc = fail(c, &q, &r, err);
  if (rc == SMR_OK) {
    if (!r.data)
      r.data = smr_xmalloc(1);
    r.data[r.len] = '\0';
    *buf = (char *)r.data;
    *len = r.len;
    r.data = NULL;
  }
  response_free(&r);
  return rc;
}

static int outside(const char *key, uint64_t off, uint64_t len, int64_t size,
                   smr_error *err) {
  return smr_error_set(
      err, SMR_ERR_FORMAT, key,
      (int64_t)(off < (uint64_t)size ? off : (uint64_t)size),
      "index entry [start_idx %llu, length %llu] lies outside the %lld-byte "
      "event file",
      (unsigned long long)off, (unsigned long long)len, (long long)size);
}

int smr_s3_get_range(smr_s3 *c, const char *key, uint64_t off, uint64_t len,
                     uint8_t **buf, int64_t *size, smr_error *err) {
  *buf = NULL;
  *size = -1;
  request q = {.key = key, .ranged = true, .off = off, .len = len};
  response r = {0};
  perform(c, &q, &r);
  *size = r.total;
  int rc = SMR_OK;
  if (r.cc == CURLE_OK && r.status == 416 && r.total < 0) {
    int64_t s = -1; /* the size for the message */
    if (smr_s3_head(c, key, &s, NULL, err) == SMR_OK)
      *size = r.total = s;
  }
  if ((r.range_bad || r.status == 416) && r.total >= 0 &&
      off + len > (uint64_t)r.total)
    rc = outside(key, off, len, r.total, err);
  else if (r.range_bad)
    rc = smr_error_set(err, SMR_ERR_IO, key, (int64_t)off,
                       "the server did not answer with the asked-for byte "
                       "range (HTTP %ld)",
                       r.status);
  else if (r.cc != CURLE_OK || (r.status != 206 && r.status != 200))
    rc = fail(c, &q, &r, err);
  else if (r.len != len)
    rc = smr_error_set(err, SMR_ERR_IO, key, (int64_t)off,
                       "got %zu of %llu bytes", r.len, (unsigned long long)len);
  if (rc == SMR_OK) {
    *buf = r.data;
    r.data = NULL;
  }
  response_free(&r);
  return rc;
}

/* --------------------------------------------------- many at once */

static CURLM *multi_of(smr_s3 *c) {
  if (!c->multi) {
    c->multi = curl_multi_init();
    curl_multi_setopt(c->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS,
                      MULTI_CONNECTIONS);
    curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
                      MULTI_CONNECTIONS);
  }
  return c->multi;
}

static void run_multi(CURLM *m, response *rs, size_t n) {
  int running = 1;
  while (running) {
    if (curl_multi_perform(m, &running) != CURLM_OK)
      break;
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(m, &left)) != NULL) {
      if (msg->msg != CURLMSG_DONE)
        continue;
      for (size_t i = 0; i < n; i++)
        if (rs[i].h == msg->easy_handle)
          rs[i].cc = msg->data.result;
    }
    if (running && curl_multi_poll(m, NULL, 0, 1000, NULL) != CURLM_OK)
      break;
  }
}

/* A ranged answer holding exactly the asked-for bytes. */
static bool fetched_range(const response *r, const smr_s3_fetch *f) {
  if (r->range_bad || r->len != f->want)
    return false;
  return r->status == 206 || (r->status == 200 && f->off == 0);
}

void smr_s3_get_many(smr_s3 *c, smr_s3_fetch *v, size_t n) {
  if (n == 0)
    return;
  pthread_mutex_lock(&c->multi_mu);
  CURLM *m = multi_of(c);
  request *qs = smr_xcalloc(n, sizeof *qs);
  response *rs = smr_xcalloc(n, sizeof *rs);
  for (size_t i = 0; i < n; i++) {
    qs[i] = (request){.key = v[i].key,
                      .max = v[i].ranged ? (size_t)v[i].want : v[i].max,
                      .ranged = v[i].ranged,
                      .off = v[i].off,
                      .len = v[i].want};
    CURL *h = curl_easy_init();
    if (!h)
      continue; /* not fetched: read again alone */
    setup(c, h, &qs[i], &rs[i]);
    rs[i].cc = CURLE_FAILED_INIT; /* until the multi handle says done */
    curl_multi_add_handle(m, h);
    count(&c->st.requests, 1);
    count(v[i].ranged ? &c->st.range_gets : &c->st.gets, 1);
  }
  run_multi(m, rs, n);
  for (size_t i = 0; i < n; i++) {
    response *r = &rs[i];
    v[i].ok = false;
    if (!r->h)
      continue;
    finish(r);
    v[i].ok = r->cc == CURLE_OK && !r->too_big &&
              (v[i].ranged ? fetched_range(r, &v[i]) : r->status == 200);
    if (!v[i].ok && retryable(r)) /* the caller fetches it again */
      count(&c->st.retries, 1);
    if (v[i].ok) {
      if (!r->data)
        r->data = smr_xmalloc(1);
      r->data[r->len] = '\0';
      v[i].buf = (char *)r->data;
      v[i].len = r->len;
      r->data = NULL;
    }
    curl_multi_remove_handle(m, r->h);
    curl_easy_cleanup(r->h);
    r->h = NULL;
    response_free(r);
  }
  free(qs);
  free(rs);
  pthread_mutex_unlock(&c->multi_mu);
}
