/* profiler.c - the profiler-output reader: opening and closing it, the
 * profiler trial's first/latest timestamps and the queries.  The file lists
 * and the reference's file selection for a time range are in
 * profiler_files.c, the parsed-file cache in profiler_cache.c
 * (docs/formats.md#profiler-output).
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

#include "base/warn.h"
#include "profiler/profiler_int.h"
#include "source/source.h"

#define DEFAULT_BUFFER_US 180000000LL
#define DEFAULT_CACHE_BYTES (12u << 20)

void smr_pstore_warn(pstore *p, pfile *f, const char *fmt, ...) {
  if (p->o.quiet || (f && f->warned))
    return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  smr_warn("profiler input", "%s", msg);
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
  int rc = smr_pstore_relist(p, err);
  if (rc != SMR_OK) {
    store_free(p);
    return rc;
  }
  *out = new_reader(p);
  return SMR_OK;
}

smr_profiler *smr_profiler_share(smr_profiler *r) {
  smr_pstore_lock(r->s);
  smr_profiler *n = new_reader(r->s);
  smr_pstore_unlock(r->s);
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

void smr_pstore_drop_data(pstore *p, pfile *f) {
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
    smr_pstore_drop_data(p, l->v[i]);
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
  smr_pstore_lock(p);
  bool last = --p->readers == 0;
  smr_pstore_unlock(p);
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
  smr_pstore_lock(p);
  smr_pstore_live_refresh(p);
  bool yes = finished(p);
  smr_pstore_unlock(p);
  return yes;
}

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
    const sys_file *s = smr_pstore_acquire(p, f, false);
    for (size_t k = 0; k < s->n; k++)
      if (s->ns[k] > max_ns)
        max_ns = s->ns[k];
    f->pins--;
  }
  smr_pstore_evict_all_lists(p);
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
  smr_pstore_live_refresh(p);
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
  smr_pstore_lock(r->s);
  info(r->s, out);
  smr_pstore_unlock(r->s);
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
  smr_pstore_lock(p);
  smr_pstore_live_refresh(p);
  size_t a, b;
  smr_pstore_select_system(p, start_us, end_us, &a, &b);
  smr_pstore_prefetch(p, &p->sys, a, b);
  int64_t lo = ns_of_us(start_us), hi = ns_of_us(end_us);
  for (size_t i = a; i < b; i++) {
    pfile *f = p->sys.v[i];
    sys_file *s = smr_pstore_acquire(p, f, false);
    smr_pstore_pin_note(&out->pins, &out->npins, f);
    for (size_t k = 0; k < s->n; k++)
      if (lo <= s->ns[k] && s->ns[k] <= hi)
        sys_out_push(out, &s->ev[k]);
  }
  smr_pstore_unlock(p);
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
  smr_pstore_lock(p);
  smr_pstore_live_refresh(p);
  size_t a, b;
  smr_pstore_select_framework(p, start_us, end_us, &a, &b);
  smr_pstore_prefetch(p, &p->fw, a, b);
  fw_collect c = {out, (double)start_us, (double)end_us};
  for (int k = 0; k < SMR_FW_KINDS; k++) {
    replay_ctx rc = {NULL, smr_fw_file_types[k], &p->names, fw_keep, &c};
    for (size_t i = a; i < b; i++) {
      pfile *f = p->fw.v[i];
      if (f->kind != k)
        continue;
      trace_file *t = smr_pstore_acquire(p, f, true);
      smr_pstore_pin_note(&out->pins, &out->npins, f);
      rc.node = f->node;
      trace_replay(&r->states[k], t, &rc);
    }
  }
  smr_pstore_unlock(p);
  return SMR_OK;
}

void smr_profiler_release_sys(smr_profiler *r, smr_sys_events *ev) {
  free(ev->v);
  smr_pstore_lock(r->s);
  smr_pstore_unpin_all(r->s, ev->pins, ev->npins);
  smr_pstore_unlock(r->s);
  memset(ev, 0, sizeof *ev);
}

void smr_profiler_release_fw(smr_profiler *r, smr_fw_events *ev) {
  free(ev->v);
  smr_pstore_lock(r->s);
  smr_pstore_unpin_all(r->s, ev->pins, ev->npins);
  smr_pstore_unlock(r->s);
  memset(ev, 0, sizeof *ev);
}

void smr_profiler_names(smr_profiler *r, int what, const char *node,
                        smr_strv *out) {
  pstore *p = r->s;
  smr_pstore_lock(p);
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
  smr_pstore_unlock(p);
}
