/* profiler_cache.c - the parsed-file cache: a file read whole (gunzipped
 * when it is .gz), parsed once (system lines or trace objects), pinned
 * while a query uses it, evicted least recently used past the cache's
 * bytes, parsed again when a listing shows it changed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiler/profiler_int.h"
#include "source/source.h"

#define MAX_FILE_BYTES (1u << 30) /* a bigger profiler file is refused */
/* A trace.json.gz may inflate to this much: a small file can inflate a
 * thousandfold, and its parsed events take several times the text; past
 * it the file is skipped with a warning, the rest read as usual. */
#define MAX_INFLATED_BYTES (256u << 20)

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
    smr_pstore_drop_data(p, best);
  }
}

void smr_pstore_evict_all_lists(pstore *p) {
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
void smr_pstore_prefetch(pstore *p, const plist *l, size_t a, size_t b) {
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
        smr_pstore_warn(
            p, f, "%s: line %zu: corrupt system-metrics line skipped (%s)",
            f->path, lineno, only_blanks(text + i, j - i) ? "empty line" : why);
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
    smr_pstore_warn(p, f, "%s: cannot read system metrics: %s", f->path, e.msg);
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
    smr_pstore_warn(p, f, "%s: cannot read trace file: %s", f->path, e.msg);
  else if (trace_file_parse(text, len, tf, f->tf_start, &p->names, t, why,
                            sizeof why) != 0)
    smr_pstore_warn(p, f, "%s: not a complete JSON trace file, ignored (%s)",
                    f->path, why);
  free(text);
  f->warned = true;
  f->data = t;
  f->bytes = trace_file_bytes(t);
  p->cached_bytes += f->bytes;
}

/* The parsed data of a file, loaded if needed, pinned for the caller. */
void *smr_pstore_acquire(pstore *p, pfile *f, bool framework) {
  if (changed(p, f)) {
    smr_pstore_drop_data(p, f);
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

void smr_pstore_pin_note(void ***pins, size_t *n, pfile *f) {
  *pins = smr_xrealloc(*pins, (*n + 1) * sizeof **pins);
  (*pins)[(*n)++] = f;
}

void smr_pstore_unpin_all(pstore *p, void **pins, size_t n) {
  for (size_t i = 0; i < n; i++)
    ((pfile *)pins[i])->pins--;
  free(pins);
  smr_pstore_evict_all_lists(p);
}
