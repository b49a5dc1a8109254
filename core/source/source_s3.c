/* source_s3.c - trials in S3: the source interface over the S3 client of
 * s3_client.c.  Paths relative to the trial root become keys under the
 * prefix; a path that could leave the prefix ("..", ".", empty or
 * absolute parts) is refused, so keys named by an index file stay inside.
 *
 * Listings remember what they listed: reading the first of the listed
 * files fetches the next ones in parallel (a bounded read-ahead), because
 * the reader reads index and collections files one after the other in
 * listing order, and one request at a time would cost a round trip each.
 * Tensor values are ranged GETs of exactly the record the index names. */
#include "source/source_s3.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/curl_lazy.h"
#include "base/path.h"
#include "base/safefs.h"
#include "base/sha256.h"
#include "source/s3.h"
#include "source/s3_cache.h"
#include "source/source_kind.h"

/* Read-ahead: files fetched together, bytes held at most. */
#define RA_BATCH 64
#define RA_BYTES (16u << 20)
/* Record cache: default budget in MB (SMRULES_S3_CACHE_MB). */
#define CACHE_MB 64

static char *g_endpoint; /* --s3-endpoint */

void smr_s3_set_endpoint(const char *url) {
  free(g_endpoint);
  g_endpoint = url && *url ? smr_xstrdup(url) : NULL;
}

typedef struct ra_item {
  char *rel;
  int64_t size;
  char *buf; /* fetched, not yet read */
  size_t len;
  bool tried;
} ra_item;

typedef struct s3_source {
  smr_source base; /* base.root: "s3://bucket[/prefix]" */
  smr_s3 *c;
  char *bucket, *prefix; /* prefix: "" or without leading/trailing '/' */
  pthread_mutex_t ra_mu;
  ra_item *ra;
  size_t nra;
  smr_s3_cache *cache; /* records shared by the reading threads */
  bool prefetch;       /* SMRULES_S3_PREFETCH (default on) */
} s3_source;

static const smr_source_ops S3_OPS;

static s3_source *S(smr_source *s) {
  return (s3_source *)s;
}

bool smr_is_s3_location(const char *location) {
  return location && strncmp(location, "s3://", 5) == 0;
}

/* ------------------------------------------------------------- opening */

static bool bucket_ok(const char *b, size_t n) {
  if (n < 3 || n > 255)
    return false;
  for (size_t i = 0; i < n; i++) {
    char ch = b[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
          (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_'))
      return false;
  }
  return true;
}

/* "s3://bucket/a/b/" -> bucket "bucket", prefix "a/b" */
static int parse_url(const char *url, char **bucket, char **prefix,
                     smr_error *err) {
  const char *b = url + 5;
  size_t n = strcspn(b, "/");
  if (!bucket_ok(b, n))
    return smr_error_set(err, SMR_ERR_USAGE, url, -1,
                         "expected s3://BUCKET[/PREFIX] with a bucket name "
                         "of 3 to 255 letters, digits, '.', '-', '_'");
  const char *p = b + n;
  while (*p == '/')
    p++;
  size_t k = strlen(p);
  while (k && p[k - 1] == '/')
    k--;
  for (size_t i = 0; i < k; i++)
    if ((unsigned char)p[i] < 0x20)
      return smr_error_set(err, SMR_ERR_USAGE, url, -1,
                           "the prefix holds a control character");
  *bucket = smr_xstrndup(b, n);
  *prefix = smr_xstrndup(p, k);
  return SMR_OK;
}

int smr_source_s3_open(const char *url, smr_source **out, smr_error *err) {
  char *bucket = NULL, *prefix = NULL;
  int rc = parse_url(url, &bucket, &prefix, err);
  char why[256];
  if (rc == SMR_OK && !smr_curl_load(why, sizeof why))
    rc = smr_error_set(err, SMR_ERR_IO, url, -1, "%s", why);
  smr_s3_auth auth;
  if (rc == SMR_OK)
    rc = smr_s3_auth_load(g_endpoint, &auth, err);
  if (rc != SMR_OK) {
    free(bucket);
    free(prefix);
    return rc;
  }
  s3_source *s = smr_xcalloc(1, sizeof *s);
  s->base.ops = &S3_OPS;
  s->base.root = prefix[0] ? smr_xasprintf("s3://%s/%s", bucket, prefix)
                           : smr_xasprintf("s3://%s", bucket);
  s->bucket = bucket;
  s->prefix = prefix;
  pthread_mutex_init(&s->ra_mu, NULL);
  smr_s3_new(bucket, &auth, &s->c, err);
  const char *pf = getenv("SMRULES_S3_PREFETCH");
  s->prefetch = !pf || strcmp(pf, "0") != 0;
  const char *mb = getenv("SMRULES_S3_CACHE_MB");
  s->cache =
      smr_s3_cache_new((size_t)(mb && *mb ? atol(mb) : CACHE_MB) << 20, s->c);
  *out = &s->base;
  return SMR_OK;
}

static void ra_clear(s3_source *s) {
  for (size_t i = 0; i < s->nra; i++) {
    free(s->ra[i].rel);
    free(s->ra[i].buf);
  }
  free(s->ra);
  s->ra = NULL;
  s->nra = 0;
}

/* SMRULES_S3_STATS=1: what the run cost, on stderr (benchmarks, tests). */
static void print_stats(s3_source *s) {
  const char *e = getenv("SMRULES_S3_STATS");
  if (!e || !*e || strcmp(e, "0") == 0)
    return;
  smr_s3_stats st;
  smr_s3_get_stats(s->c, &st);
  fprintf(stderr,
          "smrules: s3 stats: requests=%llu lists=%llu heads=%llu gets=%llu "
          "range_gets=%llu retries=%llu bytes=%llu\n",
          (unsigned long long)st.requests, (unsigned long long)st.lists,
          (unsigned long long)st.heads, (unsigned long long)st.gets,
          (unsigned long long)st.range_gets, (unsigned long long)st.retries,
          (unsigned long long)st.bytes);
}

static void s3_close(smr_source *src) {
  s3_source *s = S(src);
  print_stats(s);
  ra_clear(s);
  smr_s3_cache_free(s->cache); /* stops the prefetcher first */
  smr_s3_free(s->c);
  pthread_mutex_destroy(&s->ra_mu);
  free(s->bucket);
  free(s->prefix);
  free(s->base.root);
  free(s);
}

/* ---------------------------------------------------------------- keys */

/* Relative paths that name a key under the prefix and nothing else:
 * no absolute path, no "..", ".", or empty part. */
static bool rel_ok(const char *rel) {
  if (!smr_path_is_safe(rel))
    return false;
  for (const char *p = rel;;) {
    size_t n = strcspn(p, "/");
    if (n == 0 || (n == 1 && p[0] == '.'))
      return false;
    if (!p[n])
      return true;
    p += n + 1;
  }
}

static char *key_of(const s3_source *s, const char *rel) {
  return s->prefix[0] ? smr_xasprintf("%s/%s", s->prefix, rel)
                      : smr_xstrdup(rel);
}

static int refuse(const char *rel, smr_error *err) {
  return smr_error_set(err, SMR_ERR_IO, rel, -1,
                       "cannot open: path leads outside the trial prefix");
}

/* Errors name the path relative to the trial, like the local source. */
static int relabel(int rc, const char *rel, smr_error *err) {
  if (rc != SMR_OK && err)
    snprintf(err->file, sizeof err->file, "%s", rel);
  return rc;
}

/* ------------------------------------------------------------ listings */

static bool has_suffix(const char *name, const char *suffix) {
  size_t n = strlen(name), k = strlen(suffix);
  return n >= k && strcmp(name + n - k, suffix) == 0;
}

static int cmp_file(const void *a, const void *b) {
  return strcmp(((const smr_source_file *)a)->path,
                ((const smr_source_file *)b)->path);
}

/* Remember a listing for the read-ahead. */
static void ra_set(s3_source *s, const smr_source_listing *l) {
  pthread_mutex_lock(&s->ra_mu);
  ra_clear(s);
  s->ra = smr_xcalloc(l->n ? l->n : 1, sizeof *s->ra);
  for (size_t i = 0; i < l->n; i++) {
    s->ra[i].rel = smr_xstrdup(l->files[i].path);
    s->ra[i].size = l->files[i].size;
  }
  s->nra = l->n;
  pthread_mutex_unlock(&s->ra_mu);
}

static void s3_read_ahead(smr_source *s, const smr_source_listing *files) {
  ra_set(S(s), files);
}

static void add_object(s3_source *s, const smr_s3_object *o, const char *suffix,
                       smr_source_listing *out) {
  size_t skip = s->prefix[0] ? strlen(s->prefix) + 1 : 0;
  if (strlen(o->key) <= skip)
    return;
  const char *rel = o->key + skip;
  const char *base = strrchr(rel, '/');
  base = base ? base + 1 : rel;
  if (!rel_ok(rel) || !has_suffix(base, suffix) || has_suffix(base, ".tmp"))
    return;
  smr_source_listing_add(out, smr_xstrdup(rel), o->size, o->mtime_ns);
}

static int s3_list_after(smr_source *src, const char *dir, const char *suffix,
                         const char *start_after, smr_source_listing *out,
                         smr_error *err) {
  s3_source *s = S(src);
  memset(out, 0, sizeof *out);
  /* "": the whole trial (a TensorBoard folder's event files lie anywhere
   * below it, docs/tensorboard.md) */
  bool whole = dir[0] == '\0';
  if ((!whole && !rel_ok(dir)) ||
      (start_after && !smr_path_is_safe(start_after)))
    return refuse(dir, err);
  char *d = whole ? smr_xstrdup(s->prefix) : key_of(s, dir);
  char *prefix = d[0] ? smr_xasprintf("%s/", d) : smr_xstrdup("");
  char *after = start_after ? key_of(s, start_after) : NULL;
  smr_s3_objects objs = {0};
  int rc = smr_s3_list(s->c, prefix, after, &objs, err);
  for (size_t i = 0; rc == SMR_OK && i < objs.n; i++)
    add_object(s, &objs.v[i], suffix, out);
  smr_s3_objects_free(&objs);
  free(d);
  free(prefix);
  free(after);
  if (rc != SMR_OK) {
    smr_source_listing_free(out);
    return rc;
  }
  if (out->n > 1)
    qsort(out->files, out->n, sizeof *out->files, cmp_file);
  ra_set(s, out);
  return SMR_OK;
}

static int s3_list(smr_source *s, const char *dir, const char *suffix,
                   smr_source_listing *out, smr_error *err) {
  return s3_list_after(s, dir, suffix, NULL, out, err);
}

/* -------------------------------------------------------- single files */

static bool s3_exists(smr_source *src, const char *rel, int64_t *size,
                      int64_t *mtime_ns) {
  s3_source *s = S(src);
  if (!rel_ok(rel))
    return false;
  char *key = key_of(s, rel);
  smr_error e;
  int64_t sz = -1, mt = -1;
  bool ok = smr_s3_head(s->c, key, &sz, &mt, &e) == SMR_OK;
  free(key);
  if (ok && size)
    *size = sz;
  if (ok && mtime_ns)
    *mtime_ns = mt;
  return ok;
}

static ra_item *ra_find(s3_source *s, const char *rel) {
  size_t lo = 0, hi = s->nra;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = strcmp(s->ra[mid].rel, rel);
    if (c == 0)
      return &s->ra[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

/* Fetch listed files from `first` on, in parallel, within the budget. */
static void ra_fetch(s3_source *s, ra_item *first, size_t max) {
  smr_s3_fetch f[RA_BATCH];
  ra_item *items[RA_BATCH];
  size_t n = 0, bytes = 0;
  for (ra_item *it = first; it < s->ra + s->nra && n < RA_BATCH; it++) {
    if (it->tried || it->size < 0 || (size_t)it->size > max ||
        (n > 0 && bytes + (size_t)it->size > RA_BYTES))
      continue;
    it->tried = true;
    bytes += (size_t)it->size;
    items[n] = it;
    f[n] = (smr_s3_fetch){.key = key_of(s, it->rel), .max = max};
    n++;
  }
  smr_s3_get_many(s->c, f, n);
  for (size_t i = 0; i < n; i++) {
    items[i]->buf = f[i].ok ? f[i].buf : NULL;
    items[i]->len = f[i].len;
    free((char *)f[i].key);
  }
}

/* A file of the last listing, from the read-ahead; false if not there. */
static bool ra_take(s3_source *s, const char *rel, size_t max, char **buf,
                    size_t *len) {
  pthread_mutex_lock(&s->ra_mu);
  ra_item *it = ra_find(s, rel);
  if (it && !it->tried)
    ra_fetch(s, it, max);
  bool got = it && it->buf && it->len <= max;
  if (got) {
    *buf = it->buf;
    *len = it->len;
    it->buf = NULL;
  }
  pthread_mutex_unlock(&s->ra_mu);
  return got;
}

static int s3_read_all(smr_source *src, const char *rel, size_t max, char **buf,
                       size_t *len, smr_error *err) {
  s3_source *s = S(src);
  *buf = NULL;
  *len = 0;
  if (!rel_ok(rel))
    return refuse(rel, err);
  if (ra_take(s, rel, max, buf, len))
    return SMR_OK;
  char *key = key_of(s, rel);
  int rc = smr_s3_get(s->c, key, max, buf, len, err);
  free(key);
  return relabel(rc, rel, err);
}

/* ------------------------------------------------------- record cache */

/* Rules evaluated side by side read the same records (every rule that
 * looks at all tensors reads each of them at each step): the records
 * fetched last are kept in the shared cache of s3_cache.c, so each costs
 * one GET, and records asked for ahead (smr_source_s3_prefetch) arrive
 * there in parallel batches. */

static void s3_prefetch(smr_source *src, const char *rel, uint64_t off,
                        uint64_t len) {
  s3_source *s = S(src);
  if (!s->prefetch || !rel_ok(rel))
    return;
  char *key = key_of(s, rel);
  smr_s3_cache_prefetch(s->cache, rel, key, off, len);
  free(key);
}

static int s3_read_range(smr_source *src, const char *rel, uint64_t off,
                         uint64_t len, smr_range *out, smr_error *err) {
  s3_source *s = S(src);
  memset(out, 0, sizeof *out);
  if (!rel_ok(rel))
    return refuse(rel, err);
  char *key = key_of(s, rel);
  int rc;
  if (len == 0) { /* nothing to fetch; the offset must still be inside */
    int64_t size = -1;
    rc = smr_s3_head(s->c, key, &size, NULL, err);
    if (rc == 1)
      rc = smr_error_set(err, SMR_ERR_IO, rel, -1,
                         "cannot open: No such file or directory");
    else if (rc == SMR_OK && off >= (uint64_t)size)
      rc = smr_error_set(err, SMR_ERR_FORMAT, rel, size,
                         "index entry [start_idx %llu, length 0] lies "
                         "outside the %lld-byte event file",
                         (unsigned long long)off, (long long)size);
  } else {
    smr_s3_claim claim;
    uint8_t *data = smr_s3_cache_get(s->cache, rel, off, len, &claim);
    int64_t size = -1;
    rc = data ? SMR_OK
              : smr_s3_get_range(s->c, key, off, len, &data, &size, err);
    if (rc == SMR_OK && size >= 0)
      smr_s3_cache_put(s->cache, rel, off, len, data);
    smr_s3_cache_done(s->cache, &claim);
    out->heap_ = data;
    out->data = data;
    out->len = rc == SMR_OK ? (size_t)len : 0;
  }
  free(key);
  return relabel(rc, rel, err);
}

static size_t s3_cache_budget(const smr_source *src) {
  return smr_s3_cache_budget(((const s3_source *)src)->cache);
}

static const smr_source_ops S3_OPS = {
    .kind = "s3",
    .remote = true,
    .close = s3_close,
    .list = s3_list,
    .exists = s3_exists,
    .read_all = s3_read_all,
    .read_range = s3_read_range,
    .list_after = s3_list_after,
    .read_ahead = s3_read_ahead,
    .cache_budget = s3_cache_budget,
    .prefetch = s3_prefetch,
};

bool smr_s3_location_has(const char *url, const char *sub) {
  smr_source *src;
  smr_error e;
  if (!smr_is_s3_location(url) || smr_source_s3_open(url, &src, &e) != SMR_OK)
    return false;
  s3_source *s = S(src);
  char *rel = smr_xasprintf("%s/", sub);
  char *key = key_of(s, rel);
  bool any = false;
  smr_s3_list_any(s->c, key, &any, &e);
  free(key);
  free(rel);
  smr_source_close(src);
  return any;
}

/* -------------------------------------------------------- local cache */

static char *cache_base(void) {
  const char *x = getenv("XDG_CACHE_HOME");
  if (x && x[0] == '/')
    return smr_xasprintf("%s/smrules/s3", x);
  const char *home = getenv("HOME");
  if (home && home[0] == '/')
    return smr_xasprintf("%s/.cache/smrules/s3", home);
  return NULL;
}

/* Which trial a cache directory belongs to, for people looking in it. */
static void write_note(const char *dir, const char *what) {
  char *path = smr_xasprintf("%s/trial.txt", dir);
  FILE *f = fopen(path, "wx");
  if (f) {
    fprintf(f, "%s\n", what);
    fclose(f);
  }
  free(path);
}

char *smr_s3_cache_dir(const char *url) {
  const char *endpoint = g_endpoint ? g_endpoint : smr_s3_endpoint_env();
  char *bucket = NULL, *prefix = NULL;
  smr_error e;
  char *canon =
      smr_is_s3_location(url) && parse_url(url, &bucket, &prefix, &e) == SMR_OK
          ? smr_xasprintf("s3://%s/%s", bucket, prefix)
          : smr_xstrdup(url);
  char *id = smr_xasprintf("%s %s", endpoint ? endpoint : "aws", canon);
  free(bucket);
  free(prefix);
  free(canon);
  char hex[65];
  smr_sha256_hex(id, strlen(id), hex);
  char *base = cache_base();
  char *dir = base ? smr_xasprintf("%s/%s", base, hex) : NULL;
  if (dir && !smr_mkdirs(dir, 0700)) {
    free(dir);
    dir = NULL;
  }
  if (dir)
    write_note(dir, id);
  free(base);
  free(id);
  return dir;
}

/* ---------------------------------------------------------- the kind */

/* "s3-endpoint" (--s3-endpoint): the endpoint of S3 sources opened
 * afterwards. */
static bool s3_configure(const char *setting, const char *value) {
  if (strcmp(setting, "s3-endpoint") != 0)
    return false;
  smr_s3_set_endpoint(value);
  return true;
}

const smr_source_kind smr_source_kind_s3 = {
    .name = "s3",
    .scheme = "s3://",
    .remote = true,
    .open = smr_source_s3_open,
    .location_has = smr_s3_location_has,
    .state_dir = smr_s3_cache_dir,
    .configure = s3_configure,
};
