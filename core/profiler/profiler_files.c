/* profiler_files.c - the profiler folder's file lists (system/ and
 * framework/ as the source lists them, the TF profiler's metadata file,
 * the end marker and the rule stop signal) and the reference's selection
 * of the files a time range needs (docs/formats.md#profiler-output). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/regex.h"
#include "profiler/profiler_int.h"
#include "source/source.h"

/* Live, a remote source is listed at most this often (each listing is a
 * request; windows follow each other far faster). */
#define REMOTE_RELIST_NS 1000000000LL

/* ------------------------------------------------------------- listing */

static void plist_push(plist *l, pfile *f) {
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 64;
    l->v = smr_xrealloc(l->v, l->cap * sizeof *l->v);
  }
  l->v[l->n++] = f;
}

static int cmp_pfile(const void *a, const void *b) {
  const pfile *x = *(pfile *const *)a, *y = *(pfile *const *)b;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  return strcmp(x->path, y->path);
}

static const char *base_name(const char *path) {
  const char *b = strrchr(path, '/');
  return b ? b + 1 : path;
}

/* Python int() of a field made of ASCII digits only (the names smdebug
 * writes); anything else is refused. */
static bool digits_value(const char *s, size_t n, int64_t *out) {
  if (n == 0 || n > 18)
    return false;
  int64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

/* The listings of one refresh, for the TF .metadata lookup. */
typedef struct listings {
  const smr_source_listing *sys, *fw;
} listings;

static pfile *new_pfile(const pstore *p, const smr_source_file *sf) {
  pfile *f = smr_xcalloc(1, sizeof *f);
  f->path = smr_xasprintf("%s/%s", p->root, sf->path);
  f->rel = f->path + strlen(p->root) + 1;
  f->list_size = sf->size;
  f->list_mtime_ns = sf->mtime_ns;
  return f;
}

static pfile *add_system_file(pstore *p, const smr_source_file *sf,
                              const listings *ls) {
  (void)ls;
  char *path = smr_xasprintf("%s/%s", p->root, sf->path);
  const char *b = base_name(path);
  int64_t secs = 0;
  bool ok = smr_regex_search(p->re_sys_name, b) &&
            smr_regex_search(p->re_sys_path, path);
  if (ok && (!digits_value(b, strcspn(b, "."), &secs) || secs > 9000000000LL)) {
    smr_pstore_warn(p, NULL, "%s: cannot read a timestamp from the file name",
                    path);
    ok = false;
  }
  free(path);
  if (!ok)
    return NULL;
  pfile *f = new_pfile(p, sf);
  f->ts = secs * 1000000;
  f->kind = 0;
  plist_push(&p->sys, f);
  return f;
}

static int fw_kind(const char *path) {
  static const char *const suffixes[SMR_FW_KINDS] = {
      "pythontimeline.json", "model_timeline.json", "trace.json.gz",
      "horovod_timeline.json", "smdataparallel_timeline.json"};
  for (int k = 0; k < SMR_FW_KINDS; k++)
    if (strstr(path, suffixes[k]))
      return k;
  return -1;
}

static size_t count_char(const char *s, char c) {
  size_t n = 0;
  for (; *s; s++)
    n += *s == c;
  return n;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The TF profiler's .metadata file 4 levels up: "<node>_<start>_<end>". */
static bool tf_metadata(const pstore *p, const char *path, const listings *ls,
                        int64_t *start, int64_t *end);

/* Framework fields of a file, NULL when it is never selected. */
static pfile *framework_fields(pstore *p, const char *path, const listings *ls,
                               pfile *f) {
  const char *b = base_name(path);
  if (!smr_regex_search(p->re_fw_name, b))
    return NULL;
  f->kind = fw_kind(path);
  f->framework = true;
  if (ends_with(path, ".json") && strstr(path, "pevents") &&
      count_char(path, '_') >= 2) {
    if (!digits_value(b, strcspn(b, "_"), &f->ts)) {
      smr_pstore_warn(p, NULL, "%s: cannot read a timestamp from the file name",
                      path);
      return NULL;
    }
    const char *node = strchr(b, '_');
    size_t n = node ? strcspn(node + 1, "_") : 0;
    char *raw = node ? smr_xstrndup(node + 1, n) : smr_xstrdup("");
    char *rw = smr_profiler_node_rewrite(raw);
    f->node = smr_intern_get(&p->names, rw, strlen(rw));
    free(rw);
    free(raw);
  } else if (ends_with(path, "trace.json.gz") &&
             strstr(path, "tensorflow/detailed_profiling")) {
    if (!tf_metadata(p, path, ls, &f->tf_start, &f->ts))
      return NULL; /* timestamp 0: never selected
                      (docs/formats.md#which-files-a-time-range-reads) */
    f->node = smr_intern_get(&p->names, b, strcspn(b, "."));
    f->kind = SMR_FW_TFPROFILER;
  } else {
    return NULL; /* timestamp 0 (python_stats.json, ...): never selected */
  }
  return f->ts > 0 ? f : NULL;
}

static pfile *add_framework_file(pstore *p, const smr_source_file *sf,
                                 const listings *ls) {
  pfile *f = new_pfile(p, sf);
  if (!framework_fields(p, f->path, ls, f)) {
    free(f->path);
    free(f);
    return NULL;
  }
  plist_push(&p->fw, f);
  return f;
}

typedef pfile *(*add_fn)(pstore *p, const smr_source_file *sf,
                         const listings *ls);

static bool is_end_marker(const char *rel) {
  return strcmp(rel, "system/training_job_end.ts") == 0 ||
         strcmp(rel, "framework/training_job_end.ts") == 0;
}

/* Merge a listing (sorted) into the known paths (sorted): new paths
 * become files of the reader, known files take the listed size and
 * mtime (smr_pstore_acquire() compares them with the parsed version's). */
static void merge_listing(pstore *p, const smr_source_listing *l,
                          const listings *ls, add_fn add) {
  listed *out = smr_xmalloc((p->nknown + l->n + 1) * sizeof *out);
  size_t i = 0, j = 0, n = 0;
  while (i < p->nknown || j < l->n) {
    int c = i == p->nknown ? 1
            : j == l->n    ? -1
                           : strcmp(p->known[i].rel, l->files[j].path);
    if (c < 0) {
      out[n++] = p->known[i++];
      continue;
    }
    const smr_source_file *sf = &l->files[j++];
    p->end_marker |= is_end_marker(sf->path);
    if (c == 0) {
      pfile *f = p->known[i].f;
      if (f) {
        f->list_size = sf->size;
        f->list_mtime_ns = sf->mtime_ns;
      }
      out[n++] = p->known[i++];
    } else {
      out[n++] = (listed){smr_xstrdup(sf->path), add(p, sf, ls)};
    }
  }
  free(p->known);
  p->known = out;
  p->nknown = n;
}

static int64_t mono_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The rule stop signal (docs/formats.md#timestamps-and-windows): a file named
 * by the environment in the profiler directory holding an epoch second;
 * finished once it plus the grace time has passed (an unreadable file counts as
 * passed).  Looked at with each listing, so a remote source is asked at most
 * once a second; a name the source refuses (leading outside the folder) counts
 * as absent. */
static void read_stop_signal(pstore *p) {
  p->stop = STOP_NONE;
  const char *name = getenv("SAGEMAKER_ENV_RULE_STOP_SIGNAL_FILE");
  if (!name || !*name)
    return;
  char *text = NULL;
  size_t len;
  smr_error e;
  if (smr_source_read_all(p->src, name, 4096, &text, &len, &e) != SMR_OK) {
    /* absent, or there but unreadable (too large, not a file, ...) */
    if (smr_source_exists(p->src, name, NULL, NULL))
      p->stop = STOP_PASSED;
    return;
  }
  char *end;
  long long t = strtoll(text, &end, 10);
  while (*end == ' ' || *end == '\n' || *end == '\t' || *end == '\r')
    end++;
  if (end != text && *end == '\0') {
    p->stop = STOP_AT;
    p->stop_at = t;
  } else {
    p->stop = STOP_PASSED;
  }
  free(text);
}

/* List system/ and framework/ and take in what changed. */
int smr_pstore_relist(pstore *p, smr_error *err) {
  smr_source_listing sys = {0}, fw = {0};
  int rc = smr_source_list(p->src, "system", "", &sys, err);
  if (rc == SMR_OK)
    rc = smr_source_list(p->src, "framework", "", &fw, err);
  /* An S3 source would fetch a listing's files ahead once the first is
   * read; a query reads only the files it selects, and says which
   * (prefetch). */
  smr_source_listing none = {0};
  smr_source_read_ahead(p->src, &none);
  p->listed_at = mono_ns();
  if (rc == SMR_OK) {
    size_t ns = p->sys.n, nf = p->fw.n;
    listings ls = {&sys, &fw};
    p->end_marker = false;
    merge_listing(p, &sys, &ls, add_system_file);
    merge_listing(p, &fw, &ls, add_framework_file);
    if (p->sys.n != ns)
      qsort(p->sys.v, p->sys.n, sizeof *p->sys.v, cmp_pfile);
    if (p->fw.n != nf)
      qsort(p->fw.v, p->fw.n, sizeof *p->fw.v, cmp_pfile);
    if (p->o.live)
      read_stop_signal(p);
  }
  smr_source_listing_free(&sys);
  smr_source_listing_free(&fw);
  return rc;
}

static void refresh(pstore *p) {
  smr_error e;
  smr_error_clear(&e);
  if (smr_pstore_relist(p, &e) == SMR_OK) {
    p->list_warned = false;
  } else if (!p->list_warned) {
    /* keep what is known; try again at the next refresh */
    smr_pstore_warn(p, NULL, "%s: cannot list the profiler output: %s", p->root,
                    e.msg);
    p->list_warned = true;
  }
}

/* Live: bring the file lists up to date before answering.  The local
 * disk is listed at every call (a file that appears is seen at once); a
 * remote source at most once a second. */
void smr_pstore_live_refresh(pstore *p) {
  if (!p->o.live)
    return;
  if (p->remote && mono_ns() - p->listed_at < REMOTE_RELIST_NS)
    return;
  refresh(p);
}

void smr_profiler_refresh(smr_profiler *r) {
  smr_pstore_lock(r->s);
  refresh(r->s);
  smr_pstore_unlock(r->s);
}

/* ----------------------------------------------------- TF metadata file */

/* The first path of a sorted listing that starts with `prefix` and ends
 * in ".metadata" (the smallest such path), or NULL. */
static const char *first_metadata(const smr_source_listing *l,
                                  const char *prefix) {
  size_t lo = 0, hi = l->n, k = strlen(prefix);
  while (lo < hi) { /* the first path >= prefix */
    size_t mid = lo + (hi - lo) / 2;
    if (strcmp(l->files[mid].path, prefix) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (size_t i = lo; i < l->n && strncmp(l->files[i].path, prefix, k) == 0;
       i++)
    if (ends_with(l->files[i].path, ".metadata"))
      return l->files[i].path;
  return NULL;
}

/* The smallest "*.metadata" path anywhere under the folder 4 levels above
 * the trace file, from this refresh's listings (the paths under a folder
 * are one run of a sorted listing).  A folder at or above the root holds
 * every listed file; nothing outside the root is looked at. */
static char *find_metadata(const pstore *p, const char *path,
                           const listings *ls) {
  char *dir = smr_xstrdup(path);
  for (int up = 0; up < 4; up++) {
    char *slash = strrchr(dir, '/');
    if (!slash) {
      free(dir);
      return NULL;
    }
    *slash = '\0';
  }
  size_t nroot = strlen(p->root);
  char *prefix = strlen(dir) > nroot ? smr_xasprintf("%s/", dir + nroot + 1)
                                     : smr_xstrdup("");
  free(dir);
  const char *a = first_metadata(ls->fw, prefix);
  const char *b = first_metadata(ls->sys, prefix);
  free(prefix);
  const char *best = a && (!b || strcmp(a, b) < 0) ? a : b;
  return best ? smr_xstrdup(best) : NULL;
}

static bool tf_metadata(const pstore *p, const char *path, const listings *ls,
                        int64_t *start, int64_t *end) {
  char *best = find_metadata(p, path, ls);
  if (!best)
    return false;
  const char *b = base_name(best);
  /* exactly three "_" fields: node, start, end[.metadata] */
  const char *u1 = strchr(b, '_'), *u2 = u1 ? strchr(u1 + 1, '_') : NULL;
  bool ok = u1 && u2 && !strchr(u2 + 1, '_') &&
            digits_value(u1 + 1, (size_t)(u2 - u1 - 1), start) &&
            digits_value(u2 + 1, strcspn(u2 + 1, "."), end);
  free(best);
  return ok;
}

/* ------------------------------------------------------------ selection */

/* Index of the first file with ts >= v (ts >= v when `right` is false,
 * ts > v when true): bisect over the files, which are sorted by ts. */
static size_t bisect(const plist *l, int64_t v, bool right) {
  size_t lo = 0, hi = l->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (right ? l->v[mid]->ts <= v : l->v[mid]->ts < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static int64_t sat_add(int64_t a, int64_t b) {
  if (b > 0 && a > INT64_MAX - b)
    return INT64_MAX;
  if (b < 0 && a < INT64_MIN - b)
    return INT64_MIN;
  return a + b;
}

/* The files of timestamps ts[lo..hi] inclusive, hi = bisect_left(end+buf)
 * (docs/formats.md#which-files-a-time-range-reads); lo_ts is the first
 * timestamp taken.  [*a, *b) in the list. */
static void select_upto(const plist *l, int64_t lo_ts, int64_t end_buf,
                        size_t *a, size_t *b) {
  *a = bisect(l, lo_ts, false);
  size_t hi = bisect(l, end_buf, false); /* first file with ts >= end+buf */
  if (hi >= l->n) {
    *b = l->n;
    return;
  }
  *b = bisect(l, l->v[hi]->ts, true); /* every file of that timestamp */
}

void smr_pstore_select_system(const pstore *p, int64_t s, int64_t e, size_t *a,
                              size_t *b) {
  *a = *b = 0;
  if (!p->sys.n)
    return;
  /* lo = bisect_right(ts, s - buf) - 1, at least 0 */
  size_t r = bisect(&p->sys, sat_add(s, -p->buffer), true);
  int64_t lo_ts = r > 0 ? p->sys.v[r - 1]->ts : p->sys.v[0]->ts;
  select_upto(&p->sys, lo_ts, sat_add(e, p->buffer), a, b);
}

void smr_pstore_select_framework(const pstore *p, int64_t s, int64_t e,
                                 size_t *a, size_t *b) {
  *a = *b = 0;
  size_t lo = bisect(&p->fw, sat_add(s, -p->buffer), false);
  if (lo >= p->fw.n)
    return;
  select_upto(&p->fw, p->fw.v[lo]->ts, sat_add(e, p->buffer), a, b);
}
