/* profiler.c - the profiler-output reader: file lists, the reference's
 * file selection for a time range, the parsed-file cache, queries and the
 * profiler trial's first/latest timestamps (docs/formats.md#profiler-output).
 *
 * Files come through the source interface (source.h), so the folder may
 * be local or in S3: listings of system/ and framework/ give the files
 * with their size and mtime, and files are read whole. */
#include "profiler/profiler.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/regex.h"
#include "base/warn.h"
#include "profiler/profiler_int.h"
#include "source/source.h"

#define DEFAULT_BUFFER_US 180000000LL
#define DEFAULT_CACHE_BYTES (12u << 20)
#define MAX_FILE_BYTES (1u << 30) /* a bigger profiler file is refused */
/* A trace.json.gz may inflate to this much: a small file can inflate a
 * thousandfold, and its parsed events take several times the text; past
 * it the file is skipped with a warning, the rest read as usual. */
#define MAX_INFLATED_BYTES (256u << 20)
/* Live, a remote source is listed at most this often (each listing is a
 * request; windows follow each other far faster). */
#define REMOTE_RELIST_NS 1000000000LL

/* One file of system/ or framework/. */
typedef struct pfile {
  char *path;      /* root + "/" + relative path, as the reference joins it */
  const char *rel; /* the relative path (inside `path`), for the source */
  int64_t ts;      /* µs: name start (system), end of last event (framework) */
  bool framework;
  int kind;         /* SMR_FW_* for framework files, -1: not parsed by anyone */
  const char *node; /* framework: node id of its events */
  int64_t tf_start; /* TF profiler: base time from the .metadata name */
  void *data;       /* parsed: sys_file or trace_file */
  size_t bytes;
  int pins;
  uint64_t used;
  int64_t list_size, list_mtime_ns; /* as the last listing gave them */
  int64_t size, mtime_ns;           /* as listed when it was parsed */
  bool warned;
} pfile;

/* A path the listings gave (relative to the root) and the file it became,
 * NULL when no parser reads it.  Sorted by path; never removed: files
 * never leave the file lists, as in the reference. */
typedef struct listed {
  char *rel;
  pfile *f;
} listed;

/* How the rule stop signal file stood at the last look
 * (docs/formats.md#timestamps-and-windows). */
enum { STOP_NONE, STOP_AT, STOP_PASSED };

typedef struct plist {
  pfile **v;
  size_t n, cap;
} plist;

typedef struct sys_file {
  smrules_sys_event *ev;
  int64_t *ns;
  size_t n;
} sys_file;

typedef struct name_set {
  const char **v; /* interned, in first-seen order */
  size_t n, cap;
  smr_ptrmap has; /* the names of v, so a line costs constant time */
} name_set;

typedef struct node_names {
  const char *node;
  name_set cpus, gpus;
} node_names;

/* The files of a profiler folder, shared by every reader opened on it with
 * smr_profiler_share (see profiler.h): listings, the parsed-file cache,
 * interned strings, the names seen, the job's state.  Every public call
 * holds its lock. */
typedef struct pstore pstore;

struct pstore {
  smr_source *src;
  const char *root; /* smr_source_root(src) */
  bool remote;      /* not the local disk: listings are rationed */
  smr_profiler_opts o;
  int64_t buffer;
  plist sys, fw;
  listed *known; /* every path listed so far, sorted */
  size_t nknown;
  int64_t listed_at; /* monotonic ns of the last listing */
  bool list_warned;  /* a failed re-listing was reported */
  bool end_marker;   /* training_job_end.ts in the last listing */
  int stop;          /* STOP_*: the rule stop signal file */
  long long stop_at; /* STOP_AT: the epoch second it holds */
  smr_intern names;  /* event strings */
  smr_regex *re_sys_name, *re_sys_path, *re_fw_name;
  size_t cached_bytes;
  uint64_t tick;
  node_names *nn;
  size_t nnn, capnn;
  smr_ptrmap node_of;            /* node (interned) -> index in nn */
  const char *dim_cpu, *dim_gpu; /* interned dimension names */
  const char *last[4];           /* the strings of the previous line */
  /* where the system readings end (final_window), for the listing of the
   * newest system files it was computed from */
  int64_t sys_end_us;
  size_t sys_end_n;
  int64_t sys_end_size, sys_end_mtime;
  pthread_mutex_t mu;
  int readers; /* smr_profiler handles on this store */
};

/* One reader: the shared files, and the reference TraceEventParser state
 * of this reader's own queries (it depends on which windows were asked
 * for, so two rules never share it). */
struct smr_profiler {
  pstore *s;
  trace_state states[SMR_FW_KINDS];
};

static void lock(pstore *p) {
  pthread_mutex_lock(&p->mu);
}

static void unlock(pstore *p) {
  pthread_mutex_unlock(&p->mu);
}

static void warn(pstore *p, pfile *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void warn(pstore *p, pfile *f, const char *fmt, ...) {
  if (p->o.quiet || (f && f->warned))
    return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  smr_warn("profiler input", "%s", msg);
}

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
    warn(p, NULL, "%s: cannot read a timestamp from the file name", path);
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
      warn(p, NULL, "%s: cannot read a timestamp from the file name", path);
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
 * mtime (acquire() compares them with the parsed version's). */
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

static void read_stop_signal(pstore *p);

/* List system/ and framework/ and take in what changed. */
static int relist(pstore *p, smr_error *err) {
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
  if (relist(p, &e) == SMR_OK) {
    p->list_warned = false;
  } else if (!p->list_warned) {
    /* keep what is known; try again at the next refresh */
    warn(p, NULL, "%s: cannot list the profiler output: %s", p->root, e.msg);
    p->list_warned = true;
  }
}

/* Live: bring the file lists up to date before answering.  The local
 * disk is listed at every call (a file that appears is seen at once); a
 * remote source at most once a second. */
static void live_refresh(pstore *p) {
  if (!p->o.live)
    return;
  if (p->remote && mono_ns() - p->listed_at < REMOTE_RELIST_NS)
    return;
  refresh(p);
}

void smr_profiler_refresh(smr_profiler *r) {
  lock(r->s);
  refresh(r->s);
  unlock(r->s);
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

/* ------------------------------------------------------------ open/close */

bool smr_profiler_dir_looks_like(const char *dir) {
  struct stat st;
  char *s = smr_xasprintf("%s/system", dir),
       *f = smr_xasprintf("%s/framework", dir);
  bool yes = (stat(s, &st) == 0 && S_ISDIR(st.st_mode)) ||
             (stat(f, &st) == 0 && S_ISDIR(st.st_mode));
  free(s);
  free(f);
  return yes;
}

static int64_t buffer_from_env(void) {
  const char *e = getenv("TIME_BUFFER_MICROSECONDS");
  if (!e || !*e)
    return DEFAULT_BUFFER_US;
  char *end;
  long long v = strtoll(e, &end, 10);
  return *end == '\0' && v >= 0 ? v : DEFAULT_BUFFER_US;
}

static void store_free(pstore *p);

static smr_profiler *new_reader(pstore *p) {
  smr_profiler *r = smr_xcalloc(1, sizeof *r);
  r->s = p;
  p->readers++;
  return r;
}

int smr_profiler_open_source(smr_source *src, const smr_profiler_opts *opts,
                             smr_profiler **out, smr_error *err) {
  *out = NULL;
  pstore *p = smr_xcalloc(1, sizeof *p);
  pthread_mutex_init(&p->mu, NULL);
  p->src = src;
  p->root = smr_source_root(src);
  p->remote = strcmp(src->ops->kind, "local") != 0;
  if (opts)
    p->o = *opts;
  p->buffer = p->o.time_buffer_us > 0 ? p->o.time_buffer_us : buffer_from_env();
  if (!p->o.cache_bytes)
    p->o.cache_bytes = DEFAULT_CACHE_BYTES;
  smr_error e;
  if (smr_regex_compile("^(.+)\\.json", &p->re_sys_name, &e) != SMR_OK ||
      smr_regex_compile("^.+/system/.+/(\\d{10}).algo-\\d+.json",
                        &p->re_sys_path, &e) != SMR_OK ||
      smr_regex_compile("^(.+)\\.(json|csv|json.gz)$", &p->re_fw_name, &e) !=
          SMR_OK) {
    int rc = smr_error_set(err, SMR_ERR_USAGE, p->root, -1, "%s", e.msg);
    store_free(p);
    return rc;
  }
  p->dim_cpu = smr_intern_get(&p->names, "CPUUtilization", 14);
  p->dim_gpu = smr_intern_get(&p->names, "GPUUtilization", 14);
  int rc = relist(p, err);
  if (rc != SMR_OK) {
    store_free(p);
    return rc;
  }
  *out = new_reader(p);
  return SMR_OK;
}

smr_profiler *smr_profiler_share(smr_profiler *r) {
  lock(r->s);
  smr_profiler *n = new_reader(r->s);
  unlock(r->s);
  return n;
}

int smr_profiler_open(const char *location, const smr_profiler_opts *opts,
                      smr_profiler **out, smr_error *err) {
  *out = NULL;
  struct stat st;
  if (!smr_location_is_remote(location) &&
      (stat(location, &st) != 0 || !S_ISDIR(st.st_mode)))
    return smr_error_set(err, SMR_ERR_IO, location, -1,
                         "expected a profiler-output directory: %s",
                         strerror(errno ? errno : ENOTDIR));
  smr_source *src = NULL;
  int rc = smr_source_open(location, &src, err);
  if (rc != SMR_OK)
    return rc;
  return smr_profiler_open_source(src, opts, out, err);
}

static void drop_data(pstore *p, pfile *f) {
  if (!f->data)
    return;
  if (f->framework) {
    trace_file_free(f->data);
  } else {
    sys_file *s = f->data;
    free(s->ev);
    free(s->ns);
  }
  free(f->data);
  f->data = NULL;
  p->cached_bytes -= f->bytes;
  f->bytes = 0;
}

static void plist_free(pstore *p, plist *l) {
  for (size_t i = 0; i < l->n; i++) {
    drop_data(p, l->v[i]);
    free(l->v[i]->path);
    free(l->v[i]);
  }
  free(l->v);
}

void smr_profiler_close(smr_profiler *r) {
  if (!r)
    return;
  for (int k = 0; k < SMR_FW_KINDS; k++)
    trace_state_free(&r->states[k]);
  pstore *p = r->s;
  free(r);
  lock(p);
  bool last = --p->readers == 0;
  unlock(p);
  if (last)
    store_free(p);
}

static void store_free(pstore *p) {
  plist_free(p, &p->sys);
  plist_free(p, &p->fw);
  for (size_t i = 0; i < p->nnn; i++) {
    free(p->nn[i].cpus.v);
    free(p->nn[i].gpus.v);
    smr_ptrmap_free(&p->nn[i].cpus.has);
    smr_ptrmap_free(&p->nn[i].gpus.has);
  }
  free(p->nn);
  smr_ptrmap_free(&p->node_of);
  smr_regex_free(p->re_sys_name);
  smr_regex_free(p->re_sys_path);
  smr_regex_free(p->re_fw_name);
  for (size_t i = 0; i < p->nknown; i++)
    free(p->known[i].rel);
  free(p->known);
  smr_intern_free(&p->names);
  smr_source_close(p->src);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

const char *smr_profiler_root(const smr_profiler *r) {
  return r->s->root;
}

/* ------------------------------------------------------------ trial info */

static void first_last(const plist *l, int64_t *first, int64_t *last) {
  *first = l->n ? l->v[0]->ts : 0;
  *last = l->n ? l->v[l->n - 1]->ts : 0;
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

static bool stop_signalled(const pstore *p) {
  if (p->stop != STOP_AT)
    return p->stop == STOP_PASSED;
  const char *g = getenv("rule_stop_grace_time_secs");
  long long grace = g && *g ? atoll(g) : 60;
  return (long long)time(NULL) > p->stop_at + grace;
}

/* From what the last listing showed: an end marker, or the stop signal. */
static bool finished(const pstore *p) {
  return !p->o.live || p->end_marker || stop_signalled(p);
}

bool smr_profiler_job_finished(smr_profiler *r) {
  pstore *p = r->s;
  if (!p->o.live)
    return true; /* offline: training has ended (Decision F11) */
  lock(p);
  live_refresh(p);
  bool yes = finished(p);
  unlock(p);
  return yes;
}

static void *acquire(pstore *p, pfile *f, bool framework);
static void evict_all_lists(pstore *p);

/* The latest reading of the newest system files, in µs rounded up (a
 * window starting there would see nothing the previous one did not), or
 * the newest file's name when those files hold no reading.  Recomputed
 * only when the newest file changes. */
static int64_t system_data_end(pstore *p) {
  const pfile *newest = p->sys.v[p->sys.n - 1];
  if (p->sys_end_n == p->sys.n && p->sys_end_size == newest->list_size &&
      p->sys_end_mtime == newest->list_mtime_ns)
    return p->sys_end_us;
  int64_t max_ns = INT64_MIN;
  for (size_t i = p->sys.n; i-- > 0 && p->sys.v[i]->ts == newest->ts;) {
    pfile *f = p->sys.v[i];
    const sys_file *s = acquire(p, f, false);
    for (size_t k = 0; k < s->n; k++)
      if (s->ns[k] > max_ns)
        max_ns = s->ns[k];
    f->pins--;
  }
  evict_all_lists(p);
  int64_t end = newest->ts;
  if (max_ns != INT64_MIN && max_ns / 1000 >= end)
    end = max_ns / 1000 + (max_ns % 1000 > 0);
  p->sys_end_us = end;
  p->sys_end_n = p->sys.n;
  p->sys_end_size = newest->list_size;
  p->sys_end_mtime = newest->list_mtime_ns;
  return end;
}

/* final_window: once the job has ended, the data ends at the later of the
 * system readings' and the trace files' ends. */
static int64_t data_end(pstore *p, const smrules_profiler_info *in) {
  int64_t sys = p->sys.n ? system_data_end(p) : INT64_MIN;
  int64_t fw = p->fw.n ? in->framework_latest_us : INT64_MIN;
  return sys > fw ? sys : fw;
}

static void info(pstore *p, smrules_profiler_info *out) {
  memset(out, 0, sizeof *out);
  live_refresh(p);
  first_last(&p->sys, &out->system_first_us, &out->system_latest_us);
  first_last(&p->fw, &out->framework_first_us, &out->framework_latest_us);
  out->system_files = p->sys.n;
  out->framework_files = p->fw.n;
  /* Decision F13: minimum over the sources that have files */
  if (p->sys.n && p->fw.n) {
    out->first_us = out->system_first_us < out->framework_first_us
                        ? out->system_first_us
                        : out->framework_first_us;
    out->latest_us = out->system_latest_us < out->framework_latest_us
                         ? out->system_latest_us
                         : out->framework_latest_us;
  } else if (p->sys.n) {
    out->first_us = out->system_first_us;
    out->latest_us = out->system_latest_us;
  } else {
    out->first_us = out->framework_first_us;
    out->latest_us = out->framework_latest_us;
  }
  out->job_finished = finished(p);
  if (p->o.final_window && out->job_finished && (p->sys.n || p->fw.n))
    out->latest_us = data_end(p, out);
}

void smr_profiler_info(smr_profiler *r, smrules_profiler_info *out) {
  lock(r->s);
  info(r->s, out);
  unlock(r->s);
}

int smr_profiler_window_status(smr_profiler *r, int64_t start_us,
                               int64_t end_us) {
  smrules_profiler_info in;
  smr_profiler_info(r, &in);
  if (end_us < in.latest_us)
    return SMR_OK;
  if (end_us > in.latest_us && !in.job_finished)
    return SMR_STEP_NOT_YET;
  if (in.job_finished && start_us >= in.latest_us)
    return SMR_NO_MORE_DATA;
  return SMR_OK;
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

static void select_system(const pstore *p, int64_t s, int64_t e, size_t *a,
                          size_t *b) {
  *a = *b = 0;
  if (!p->sys.n)
    return;
  /* lo = bisect_right(ts, s - buf) - 1, at least 0 */
  size_t r = bisect(&p->sys, sat_add(s, -p->buffer), true);
  int64_t lo_ts = r > 0 ? p->sys.v[r - 1]->ts : p->sys.v[0]->ts;
  select_upto(&p->sys, lo_ts, sat_add(e, p->buffer), a, b);
}

static void select_framework(const pstore *p, int64_t s, int64_t e, size_t *a,
                             size_t *b) {
  *a = *b = 0;
  size_t lo = bisect(&p->fw, sat_add(s, -p->buffer), false);
  if (lo >= p->fw.n)
    return;
  select_upto(&p->fw, p->fw.v[lo]->ts, sat_add(e, p->buffer), a, b);
}

/* ---------------------------------------------------------------- cache */

static void evict(pstore *p, plist *l) {
  for (size_t i = 0; i < l->n && p->cached_bytes > p->o.cache_bytes; i++) {
    (void)i;
    pfile *best = NULL;
    for (size_t k = 0; k < l->n; k++) {
      pfile *f = l->v[k];
      if (f->data && !f->pins && (!best || f->used < best->used))
        best = f;
    }
    if (!best)
      return;
    drop_data(p, best);
  }
}

static void evict_all_lists(pstore *p) {
  if (p->cached_bytes <= p->o.cache_bytes)
    return;
  evict(p, &p->sys);
  evict(p, &p->fw);
}

/* The whole file through the source; a TF trace.json.gz is inflated in
 * memory (profiler_gz.c).  The version read is the one listed last (a
 * file that grows meanwhile is read again after the next listing). */
static int read_file(pstore *p, pfile *f, bool gz, char **text, size_t *len,
                     smr_error *err) {
  f->size = f->list_size;
  f->mtime_ns = f->list_mtime_ns;
  int rc = smr_source_read_all(p->src, f->rel, MAX_FILE_BYTES, text, len, err);
  if (rc != SMR_OK || !gz)
    return rc;
  char *raw = *text;
  size_t n = *len;
  rc = smr_profiler_gunzip(raw, n, MAX_INFLATED_BYTES, f->path, text, len, err);
  free(raw);
  return rc;
}

/* Live, a parsed file is read again when the listing shows another size
 * or mtime than the parsed version had (unless a query holds it). */
static bool changed(const pstore *p, const pfile *f) {
  return p->o.live && f->data && !f->pins &&
         (f->list_size != f->size || f->list_mtime_ns != f->mtime_ns);
}

static bool to_read(const pstore *p, const pfile *f) {
  return !f->data || changed(p, f);
}

static int cmp_source_file(const void *a, const void *b) {
  return strcmp(((const smr_source_file *)a)->path,
                ((const smr_source_file *)b)->path);
}

/* A remote source fetches the files a query is about to read together, in
 * parallel (smr_source_read_ahead, which wants them in path order);
 * files of no parser are never read. */
static void prefetch(pstore *p, const plist *l, size_t a, size_t b) {
  if (!p->remote)
    return;
  smr_source_listing want = {0};
  for (size_t i = a; i < b; i++) {
    const pfile *f = l->v[i];
    if (f->kind >= 0 && to_read(p, f))
      smr_source_listing_add(&want, smr_xstrdup(f->rel), f->list_size,
                             f->list_mtime_ns);
  }
  if (want.n > 1)
    qsort(want.files, want.n, sizeof *want.files, cmp_source_file);
  smr_source_read_ahead(p->src, &want);
  smr_source_listing_free(&want);
}

/* ------------------------------------------------------- system files */

static void set_add(name_set *s, const char *name) {
  size_t at;
  if (smr_ptrmap_get(&s->has, name, &at))
    return;
  if (s->n == s->cap) { /* doubling: a name at a time would copy n^2 */
    s->cap = s->cap ? 2 * s->cap : 16;
    s->v = smr_xrealloc(s->v, s->cap * sizeof *s->v);
  }
  smr_ptrmap_put(&s->has, name, s->n);
  s->v[s->n++] = name;
}

/* Names are interned, so pointers identify them. */
static void note_name(pstore *p, const smrules_sys_event *e) {
  bool cpu = e->dimension == p->dim_cpu, gpu = e->dimension == p->dim_gpu;
  if (!cpu && !gpu && p->nnn && p->nn[p->nnn - 1].node == e->node)
    return;
  size_t at;
  if (!smr_ptrmap_get(&p->node_of, e->node, &at)) {
    at = p->nnn++;
    if (p->nnn > p->capnn) {
      p->capnn = p->capnn ? 2 * p->capnn : 4;
      p->nn = smr_xrealloc(p->nn, p->capnn * sizeof *p->nn);
    }
    memset(&p->nn[at], 0, sizeof p->nn[at]);
    p->nn[at].node = e->node;
    smr_ptrmap_put(&p->node_of, e->node, at);
  }
  node_names *nn = &p->nn[at];
  if (cpu || gpu)
    set_add(cpu ? &nn->cpus : &nn->gpus, e->name);
}

/* Consecutive lines mostly repeat their strings: compare with the previous
 * line's before hashing. */
static const char *intern_cached(pstore *p, int slot, const char *s) {
  if (p->last[slot] && strcmp(p->last[slot], s) == 0)
    return p->last[slot];
  return p->last[slot] = smr_intern_get(&p->names, s, strlen(s));
}

static void sys_push(pstore *p, sys_file *s, size_t *cap,
                     const smr_sys_line *l) {
  if (s->n == *cap) {
    *cap = *cap ? *cap * 2 : 256;
    s->ev = smr_xrealloc(s->ev, *cap * sizeof *s->ev);
    s->ns = smr_xrealloc(s->ns, *cap * sizeof *s->ns);
  }
  smrules_sys_event *e = &s->ev[s->n];
  e->type = intern_cached(p, 0, l->type);
  e->name = intern_cached(p, 1, l->name);
  e->dimension = intern_cached(p, 2, l->dimension);
  e->node = intern_cached(p, 3, l->node);
  e->value = l->value;
  e->timestamp = l->timestamp;
  e->has_name = l->has_name;
  e->timestamp_is_int = l->timestamp_is_int;
  s->ns[s->n++] = l->timestamp_ns;
  note_name(p, e);
}

static bool only_blanks(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t')
      return false;
  return true;
}

/* Lines end at "\n", "\r\n" or "\r" (Python's universal newlines). */
static void parse_system_text(pstore *p, pfile *f, const char *text, size_t len,
                              sys_file *s) {
  size_t cap = 0, lineno = 0;
  char *scratch = smr_xmalloc(len + 8);
  for (size_t i = 0; i < len;) {
    size_t j = i;
    while (j < len && text[j] != '\n' && text[j] != '\r')
      j++;
    bool terminated = j < len;
    lineno++;
    smr_sys_line l;
    char why[160];
    if (!only_blanks(text + i, j - i) &&
        smr_profiler_parse_sys_line(text + i, j - i, scratch, &l, why,
                                    sizeof why) == 0)
      sys_push(p, s, &cap, &l);
    else if (terminated || !only_blanks(text + i, j - i)) {
      /* an unterminated last line may still be growing: silent */
      if (terminated)
        warn(p, f, "%s: line %zu: corrupt system-metrics line skipped (%s)",
             f->path, lineno,
             only_blanks(text + i, j - i) ? "empty line" : why);
    }
    if (j < len && text[j] == '\r' && j + 1 < len && text[j + 1] == '\n')
      j++;
    i = j + 1;
  }
  free(scratch);
}

static void load_system(pstore *p, pfile *f) {
  sys_file *s = smr_xcalloc(1, sizeof *s);
  char *text = NULL;
  size_t len = 0;
  smr_error e;
  smr_error_clear(&e);
  if (read_file(p, f, false, &text, &len, &e) != SMR_OK)
    warn(p, f, "%s: cannot read system metrics: %s", f->path, e.msg);
  else
    parse_system_text(p, f, text, len, s);
  free(text);
  f->warned = true;
  f->data = s;
  f->bytes = s->n * (sizeof *s->ev + sizeof *s->ns) + sizeof *s;
  p->cached_bytes += f->bytes;
}

/* --------------------------------------------------------- trace files */

static void load_trace(pstore *p, pfile *f) {
  trace_file *t = smr_xcalloc(1, sizeof *t);
  char *text = NULL;
  size_t len = 0;
  smr_error e;
  smr_error_clear(&e);
  bool tf = f->kind == SMR_FW_TFPROFILER;
  int rc = read_file(p, f, tf, &text, &len, &e);
  char why[160];
  if (rc != SMR_OK)
    warn(p, f, "%s: cannot read trace file: %s", f->path, e.msg);
  else if (trace_file_parse(text, len, tf, f->tf_start, &p->names, t, why,
                            sizeof why) != 0)
    warn(p, f, "%s: not a complete JSON trace file, ignored (%s)", f->path,
         why);
  free(text);
  f->warned = true;
  f->data = t;
  f->bytes = trace_file_bytes(t);
  p->cached_bytes += f->bytes;
}

/* The parsed data of a file, loaded if needed, pinned for the caller. */
static void *acquire(pstore *p, pfile *f, bool framework) {
  if (changed(p, f)) {
    drop_data(p, f);
    f->warned = false;
  }
  if (!f->data) {
    if (framework)
      load_trace(p, f);
    else
      load_system(p, f);
  }
  f->pins++;
  f->used = ++p->tick;
  return f->data;
}

static void pin_note(void ***pins, size_t *n, pfile *f) {
  *pins = smr_xrealloc(*pins, (*n + 1) * sizeof **pins);
  (*pins)[(*n)++] = f;
}

static void unpin_all(pstore *p, void **pins, size_t n) {
  for (size_t i = 0; i < n; i++)
    ((pfile *)pins[i])->pins--;
  free(pins);
  evict_all_lists(p);
}

/* -------------------------------------------------------------- queries */

static int64_t ns_of_us(int64_t us) {
  if (us > INT64_MAX / 1000)
    return INT64_MAX;
  if (us < INT64_MIN / 1000)
    return INT64_MIN;
  return us * 1000;
}

static void sys_out_push(smr_sys_events *o, const smrules_sys_event *e) {
  if (o->n == o->cap) {
    o->cap = o->cap ? o->cap * 2 : 1024;
    o->v = smr_xrealloc(o->v, o->cap * sizeof *o->v);
  }
  o->v[o->n++] = *e;
}

int smr_profiler_system_events(smr_profiler *r, int64_t start_us,
                               int64_t end_us, smr_sys_events *out,
                               smr_error *err) {
  (void)err;
  pstore *p = r->s;
  memset(out, 0, sizeof *out);
  lock(p);
  live_refresh(p);
  size_t a, b;
  select_system(p, start_us, end_us, &a, &b);
  prefetch(p, &p->sys, a, b);
  int64_t lo = ns_of_us(start_us), hi = ns_of_us(end_us);
  for (size_t i = a; i < b; i++) {
    pfile *f = p->sys.v[i];
    sys_file *s = acquire(p, f, false);
    pin_note(&out->pins, &out->npins, f);
    for (size_t k = 0; k < s->n; k++)
      if (lo <= s->ns[k] && s->ns[k] <= hi)
        sys_out_push(out, &s->ev[k]);
  }
  unlock(p);
  return SMR_OK;
}

typedef struct fw_collect {
  smr_fw_events *out;
  double lo, hi;
} fw_collect;

static void fw_keep(void *arg, const smrules_fw_event *e) {
  fw_collect *c = arg;
  if (e->end_us < c->lo || c->hi < e->start_us)
    return;
  smr_fw_events *o = c->out;
  if (o->n == o->cap) {
    o->cap = o->cap ? o->cap * 2 : 1024;
    o->v = smr_xrealloc(o->v, o->cap * sizeof *o->v);
  }
  o->v[o->n++] = *e;
}

int smr_profiler_framework_events(smr_profiler *r, int64_t start_us,
                                  int64_t end_us, smr_fw_events *out,
                                  smr_error *err) {
  (void)err;
  pstore *p = r->s;
  memset(out, 0, sizeof *out);
  lock(p);
  live_refresh(p);
  size_t a, b;
  select_framework(p, start_us, end_us, &a, &b);
  prefetch(p, &p->fw, a, b);
  fw_collect c = {out, (double)start_us, (double)end_us};
  for (int k = 0; k < SMR_FW_KINDS; k++) {
    replay_ctx rc = {NULL, smr_fw_file_types[k], &p->names, fw_keep, &c};
    for (size_t i = a; i < b; i++) {
      pfile *f = p->fw.v[i];
      if (f->kind != k)
        continue;
      trace_file *t = acquire(p, f, true);
      pin_note(&out->pins, &out->npins, f);
      rc.node = f->node;
      trace_replay(&r->states[k], t, &rc);
    }
  }
  unlock(p);
  return SMR_OK;
}

void smr_profiler_release_sys(smr_profiler *r, smr_sys_events *ev) {
  free(ev->v);
  lock(r->s);
  unpin_all(r->s, ev->pins, ev->npins);
  unlock(r->s);
  memset(ev, 0, sizeof *ev);
}

void smr_profiler_release_fw(smr_profiler *r, smr_fw_events *ev) {
  free(ev->v);
  lock(r->s);
  unpin_all(r->s, ev->pins, ev->npins);
  unlock(r->s);
  memset(ev, 0, sizeof *ev);
}

void smr_profiler_names(smr_profiler *r, int what, const char *node,
                        smr_strv *out) {
  pstore *p = r->s;
  lock(p);
  for (size_t i = 0; i < p->nnn; i++) {
    node_names *nn = &p->nn[i];
    if (what == SMRULES_NAMES_NODES) {
      smr_strv_push(out, nn->node);
      continue;
    }
    if (!node || strcmp(node, nn->node) != 0)
      continue;
    const name_set *v = what == SMRULES_NAMES_CPUS ? &nn->cpus : &nn->gpus;
    for (size_t k = 0; k < v->n; k++)
      smr_strv_push(out, v->v[k]);
  }
  unlock(p);
}
