/* trial_read.c - what a tensor has saved and reading it: its catalog
 * entries (its id kept in memory until the catalog changes), its steps,
 * values, reductions and shapes read from the event file slice the index
 * points at, and the read-ahead of the next steps' records (remote
 * trials). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "format/dtype.h"
#include "format/event.h"
#include "format/record.h"
#include "source/source.h"
#include "trial/catalog.h"
#include "trial/step_entries.h"
#include "trial/trial_int.h"

/* The mean record bytes per step scans every catalog entry, and --watch
 * asks at every new step: it is measured again only once the trial has
 * at least doubled its steps (a run's steps are alike in size). */
size_t smr_trial_cached_steps(smr_trial *t) {
  size_t budget = smr_source_cache_budget(t->src);
  if (!budget)
    return 0;
  pthread_mutex_lock(&t->mu);
  if (!t->step_bytes || t->nsteps >= 2 * t->step_bytes_at) {
    int64_t bytes = 0, steps = 0;
    smr_error e;
    smr_catalog_value_bytes(t->cat, &bytes, &steps, &e);
    t->step_bytes = bytes > 0 && steps > 0 ? bytes / steps + 1 : 0;
    t->step_bytes_at = t->nsteps;
  }
  int64_t per_step = t->step_bytes;
  pthread_mutex_unlock(&t->mu);
  if (per_step <= 0)
    return 1;
  int64_t n = (int64_t)budget / per_step;
  return n < 1 ? 1 : (size_t)n;
}

/* -------------------------------------------------------- tensor steps */

static size_t id_slot_of(const char *name) {
  return (size_t)(smr_hash_str(SMR_HASH_INIT, name) >> 32) % TENSOR_ID_SLOTS;
}

void smr_trial_forget_tensor_ids(smr_trial *t) {
  for (size_t i = 0; i < TENSOR_ID_SLOTS; i++) {
    free(t->ids[i].name);
    t->ids[i].name = NULL;
  }
}

/* The catalog id of a tensor, or -1; under mu.  A tensor not (yet) in
 * the catalog is asked again each time. */
static int64_t tensor_id(smr_trial *t, const char *name, smr_error *err) {
  struct id_slot *s = &t->ids[id_slot_of(name)];
  if (s->name && strcmp(s->name, name) == 0)
    return s->id;
  int64_t id = smr_catalog_tensor_id(t->cat, name, err);
  if (id >= 0) { /* the slot's last tensor is asked again when it comes */
    free(s->name);
    s->name = smr_xstrdup(name);
    s->id = id;
  }
  return id;
}

static int tensor_entries(smr_trial *t, const char *name, int mode,
                          int64_t mode_step, smr_entries *out, smr_error *err) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&t->mu);
  if (t->tb) { /* TensorBoard */
    int trc = smr_tb_entries(t->tb, name, mode, mode_step, out);
    pthread_mutex_unlock(&t->mu);
    if (trc == SMR_TENSOR_UNAVAILABLE)
      smr_error_set(err, trc, "", -1,
                    "tensor '%s' was never saved in this trial", name);
    return trc;
  }
  int64_t id = tensor_id(t, name, err);
  bool by_step = mode != 0 && mode_step >= 0;
  int rc = id < 0 ? SMR_TENSOR_UNAVAILABLE
           : by_step
               ? smr_step_entries_get(t->step_entries, t->cat, id, mode,
                                      mode_step, out, err)
               : smr_catalog_entries(t->cat, id, mode, mode_step, out, err);
  pthread_mutex_unlock(&t->mu);
  if (rc == SMR_TENSOR_UNAVAILABLE)
    smr_error_set(err, rc, "", -1, "tensor '%s' was never saved in this trial",
                  name);
  return rc;
}

int smr_trial_tensor_steps(smr_trial *t, const char *name,
                           smr_tensor_steps *out, smr_error *err) {
  memset(out, 0, sizeof *out);
  smr_entries es;
  int rc = tensor_entries(t, name, 0, -1, &es, err);
  if (rc)
    return rc;
  out->v = smr_xcalloc(es.n ? es.n : 1, sizeof *out->v);
  for (size_t i = 0; i < es.n; i++) {
    const smr_entry *e = &es.v[i];
    smr_tensor_step *s = out->n ? &out->v[out->n - 1] : NULL;
    if (!s || s->step != e->step || strcmp(s->worker, e->worker) != 0) {
      s = &out->v[out->n++];
      s->step = e->step;
      s->mode = e->mode;
      s->mode_step = e->mode_step;
      s->worker = smr_xstrdup(e->worker);
    }
    if (e->kind == SMR_ENTRY_RAW)
      s->has_value = true;
    else if (e->kind == SMR_ENTRY_SHAPE)
      s->has_shape = true;
    else
      s->reductions |= 1u << (e->reduction * 2 + e->abs);
  }
  smr_entries_free(&es);
  return SMR_OK;
}

void smr_tensor_steps_free(smr_tensor_steps *s) {
  for (size_t i = 0; i < s->n; i++)
    free(s->v[i].worker);
  free(s->v);
  memset(s, 0, sizeof *s);
}

int smr_trial_tensor_step_list(smr_trial *t, const char *name, int mode,
                               bool include_incomplete, smr_i64v *out,
                               smr_error *err) {
  smr_tensor_steps ts;
  int rc = smr_trial_tensor_steps(t, name, &ts, err);
  if (rc)
    return rc;
  smr_i64v all = {0};
  for (size_t i = 0; i < ts.n; i++) {
    const smr_tensor_step *s = &ts.v[i];
    if (mode != SMR_MODE_GLOBAL && s->mode != mode)
      continue;
    if (!include_incomplete && !smr_trial_step_complete(t, s->step))
      continue;
    smr_i64v_push(&all, mode == SMR_MODE_GLOBAL ? s->step : s->mode_step);
  }
  smr_tensor_steps_free(&ts);
  if (all.n > 1)
    qsort(all.v, all.n, sizeof *all.v, smr_trial_cmp_i64);
  for (size_t i = 0; i < all.n; i++)
    if (i == 0 || all.v[i] != all.v[i - 1])
      smr_i64v_push(out, all.v[i]);
  smr_i64v_free(&all);
  return SMR_OK;
}

/* --------------------------------------------------------------- values */

/* When nothing is stored at the step: a broken index file for that step
 * explains it; otherwise availability decides
 * (docs/formats.md#when-a-value-is-not-there). */
static int explain_missing(smr_trial *t, const char *name, int64_t step,
                           int mode, int64_t g, smr_error *err) {
  for (size_t i = 0; !smr_trial_find_step(t, g) && i < t->nproblems; i++) {
    const char *b = smr_trial_base_name(t->problems[i].file);
    int64_t ps = -1;
    char *w = NULL;
    if (strncmp(t->problems[i].file, "index/", 6) == 0 &&
        smr_parse_step_worker(b, &ps, &w) == SMR_OK && ps == g) {
      free(w);
      return smr_error_set(err, SMR_ERR_FORMAT, t->problems[i].file,
                           t->problems[i].offset,
                           "index file for step %lld cannot be read: %s",
                           (long long)g, t->problems[i].message);
    }
    free(w);
  }
  smr_availability a = smr_trial_has_passed_step(t, step, mode);
  const char *mn = smr_mode_name(mode);
  if (a == SMR_AVAILABLE)
    return smr_error_set(err, SMR_TENSOR_UNAVAILABLE_FOR_STEP, "", -1,
                         "tensor '%s' was not saved at %s step %lld", name, mn,
                         (long long)step);
  if (a == SMR_UNAVAILABLE)
    return smr_error_set(err, SMR_STEP_UNAVAILABLE, "", -1,
                         "%s step %lld was not saved", mn, (long long)step);
  if (t->loaded_all_steps)
    return smr_error_set(err, SMR_NO_MORE_DATA, "", -1,
                         "training ended before %s step %lld", mn,
                         (long long)step);
  return smr_error_set(err, SMR_STEP_NOT_YET, "", -1,
                       "%s step %lld is not available yet", mn,
                       (long long)step);
}

/* Entries of the tensor at a step (docs/formats.md#modes-steps-and-workers
 * lookup), for one worker. */
static int lookup(smr_trial *t, const char *name, int64_t step, int mode,
                  const char *worker, smr_entries *out, smr_error *err) {
  int rc = tensor_entries(t, name, mode, step, out, err);
  if (rc)
    return rc;
  int64_t g = step;
  if (out->n == 0 && mode == SMR_MODE_GLOBAL) {
    int m;
    int64_t ms;
    if (smr_trial_step_mode(t, step, &m, &ms) && m != SMR_MODE_GLOBAL) {
      smr_entries_free(out);
      rc = tensor_entries(t, name, m, ms, out, err);
      if (rc)
        return rc;
    }
  } else if (mode != SMR_MODE_GLOBAL &&
             !smr_trial_global_step(t, mode, step, &g)) {
    g = -1;
  }
  if (out->n == 0)
    return explain_missing(t, name, step, mode, g, err);
  /* keep the requested worker, or the smallest worker name (entries come
   * ordered by worker) */
  const char *want = worker ? worker : out->v[0].worker;
  size_t k = 0;
  for (size_t i = 0; i < out->n; i++) {
    if (strcmp(out->v[i].worker, want) == 0) {
      smr_entry tmp = out->v[k];
      out->v[k++] = out->v[i];
      out->v[i] = tmp;
    }
  }
  for (size_t i = k; i < out->n; i++) {
    free(out->v[i].worker);
    free(out->v[i].event_file);
    free(out->v[i].index_path);
    free(out->v[i].problem);
  }
  out->n = k;
  if (k == 0) {
    smr_entries_free(out); /* the caller frees only what it is given */
    return smr_error_set(err, SMR_INVALID_WORKER, "", -1,
                         "worker '%s' has no entry for '%s' at %s step %lld",
                         worker, name, smr_mode_name(mode), (long long)step);
  }
  return SMR_OK;
}

static void fill_loc(smr_value_loc *loc, const smr_entry *e) {
  if (!loc)
    return;
  loc->step = e->step;
  loc->mode = e->mode;
  loc->mode_step = e->mode_step;
  snprintf(loc->worker, sizeof loc->worker, "%s", e->worker);
}

/* Read and decode the record an entry points at; the record's tag must be
 * the name the index gave it. */
/* A tensor decoded in place keeps its record's range (a mapping of the
 * event file, or a buffer) until it is released. */
typedef struct range_owner {
  smr_range range;
  void *owner;
  void (*release)(void *owner);
} range_owner;

static void range_owner_release(void *p) {
  range_owner *ro = p;
  if (ro->release)
    ro->release(ro->owner);
  smr_range_release(&ro->range);
  free(ro);
}

static void keep_range(smr_tensor *t, smr_range *r) {
  range_owner *ro = smr_xcalloc(1, sizeof *ro);
  ro->range = *r;
  ro->owner = t->owner_;
  ro->release = t->release_;
  t->owner_ = ro;
  t->release_ = range_owner_release;
  memset(r, 0, sizeof *r);
}

bool smr_trial_value_keep(smr_tensor *t) {
  if (t->release_ != range_owner_release)
    return false; /* not decoded in place in its record */
  range_owner *ro = t->owner_;
  return smr_range_keep(&ro->range);
}

void smr_trial_align_values(smr_trial *t, bool on) {
  t->align_values = on;
}

/* The hint's slot: by the tensor's name and by how many bytes its step
 * takes in the record (a varint; step 0 is not written at all), which
 * moves the elements of the same tensor. */
static _Atomic uint32_t *value_at_slot(smr_trial *t, const char *tag,
                                       int64_t step) {
  uint64_t h = smr_hash_str(SMR_HASH_INIT, tag) >> 40;
  for (uint64_t s = (uint64_t)step; s; s >>= 7)
    h++;
  return &t->value_at[h % VALUE_AT_SLOTS];
}

/* Where the elements of a value decoded in place lay in its range, for
 * the next read of the tensor (only when they were left there). */
static void remember_value_at(smr_trial *t, const char *tag, int64_t step,
                              const smr_tensor *out, const smr_range *r) {
  uintptr_t at = (uintptr_t)out->data - (uintptr_t)r->data;
  if (at < r->len && at < UINT32_MAX)
    atomic_store_explicit(value_at_slot(t, tag, step), (uint32_t)at + 1,
                          memory_order_relaxed);
}

static int read_entry(smr_trial *t, const smr_entry *e, const char *tag,
                      smr_tensor *out, smr_error *err) {
  if (t->tb) /* TensorBoard: the values are in memory */
    return smr_tb_read_value(t->tb, e, out, err);
  if (e->problem)
    return smr_error_set(err, SMR_ERR_FORMAT, e->index_path, -1, "%s",
                         e->problem);
  if (!e->event_file)
    return smr_error_set(err, SMR_ERR_FORMAT, e->index_path, -1,
                         "index entry for '%s' names no event file", tag);
  smr_range r;
  uint32_t at = t->align_values
                    ? atomic_load_explicit(value_at_slot(t, tag, e->step),
                                           memory_order_relaxed)
                    : 0;
  int rc = smr_source_read_range_aligned(
      t->src, e->event_file, (uint64_t)e->start, (uint64_t)e->length,
      at ? at - 1 : SMR_NO_ALIGN, &r, err);
  if (rc && t->live && !t->marker)
    /* an event file not (fully) there yet while training runs: wait */
    return smr_error_set(err, SMR_STEP_NOT_YET, e->event_file, e->start,
                         "event file not complete yet");
  if (rc)
    return rc;
  const uint8_t *payload;
  uint64_t plen;
  rc = smr_record_parse(r.data, r.len, e->event_file, (uint64_t)e->start,
                        &payload, &plen, err);
  if (rc == SMR_ERR_INCOMPLETE)
    rc = SMR_ERR_FORMAT; /* the file is complete: the record is cut short */
  if (rc == SMR_OK && plen + SMR_RECORD_OVERHEAD != (uint64_t)e->length)
    rc = smr_error_set(err, SMR_ERR_FORMAT, e->event_file, e->start,
                       "record holds %llu payload bytes but the index entry "
                       "is %lld bytes long (expected payload + 16)",
                       (unsigned long long)plen, (long long)e->length);
  char *name = NULL;
  if (rc == SMR_OK) /* the elements stay where they lie in the range */
    rc = smr_event_decode_borrow(payload, (size_t)plen, e->event_file,
                                 (uint64_t)e->start, out, &name, err);
  if (rc == SMR_OK && t->align_values && out->nbytes)
    remember_value_at(t, tag, e->step, out, &r);
  if (rc == SMR_OK)
    keep_range(out, &r);
  smr_range_release(&r);
  if (rc == SMR_OK && (!name || strcmp(name, tag) != 0)) {
    smr_error_set(err, SMR_ERR_FORMAT, e->event_file, e->start,
                  "record holds tensor '%s', the index says '%s'",
                  name ? name : "", tag);
    smr_tensor_release(out);
    rc = SMR_ERR_FORMAT;
  }
  free(name);
  return rc;
}

static const smr_entry *find_kind(const smr_entries *es, int kind, int red,
                                  bool abs) {
  for (size_t i = 0; i < es->n; i++) {
    const smr_entry *e = &es->v[i];
    if (e->kind == kind &&
        (kind != SMR_ENTRY_REDUCTION || (e->reduction == red && e->abs == abs)))
      return e;
  }
  return NULL;
}

/* ------------------------------------------------------ read-ahead */

void smr_trial_share_records(smr_trial *t, bool on) {
  smr_source_share_records(t->src, on);
}

void smr_trial_set_prefetch(smr_trial *t, size_t steps, int64_t end_step) {
  pthread_mutex_lock(&t->mu);
  t->pf_steps = smr_source_is_remote(t->src) ? steps : 0;
  t->pf_end = end_step;
  t->pf_horizon = INT64_MAX;
  pthread_mutex_unlock(&t->mu);
}

void smr_trial_set_prefetch_horizon(smr_trial *t, int64_t last) {
  pthread_mutex_lock(&t->mu);
  t->pf_horizon = last;
  pthread_mutex_unlock(&t->mu);
}

static size_t step_index(const smr_trial *t, int64_t g) {
  const step_info *s = smr_trial_find_step(t, g);
  return s ? (size_t)(s - t->steps) : t->nsteps;
}

/* The steps after global step g whose records of `name` to ask for now:
 * positions (*from, *to] of t->steps, each step asked for once. */
static bool prefetch_window(smr_trial *t, const char *name, int64_t g,
                            size_t *from, size_t *to) {
  size_t i = step_index(t, g);
  if (i >= t->nsteps)
    return false;
  smr_error e;
  pthread_mutex_lock(&t->mu);
  int64_t id = tensor_id(t, name, &e);
  bool any = id >= 0 && t->pf_steps;
  if (any && (size_t)id >= t->pf_n) {
    size_t n = (size_t)id + 64;
    t->pf_upto = smr_xrealloc(t->pf_upto, n * sizeof *t->pf_upto);
    for (size_t k = t->pf_n; k < n; k++)
      t->pf_upto[k] = -1;
    t->pf_n = n;
  }
  if (any) {
    size_t hi = i + t->pf_steps < t->nsteps ? i + t->pf_steps : t->nsteps - 1;
    while (hi > i && ((t->pf_end >= 0 && t->steps[hi].step >= t->pf_end) ||
                      t->steps[hi].step > t->pf_horizon))
      hi--;
    int64_t done = t->pf_upto[id];
    *from = done > g ? step_index(t, done) : i;
    *to = hi;
    any = *from < *to && *from < t->nsteps;
    if (any)
      t->pf_upto[id] = t->steps[hi].step;
  }
  pthread_mutex_unlock(&t->mu);
  return any;
}

/* After a value of `name` was read at global step g: ask the source for
 * its records at the next steps (remote trials, see smr_trial_set_prefetch)
 * so that they arrive in parallel while the rules work. */
static void prefetch_after(smr_trial *t, const char *name, int64_t g,
                           const char *worker) {
  size_t from, to;
  if (!t->pf_steps || !prefetch_window(t, name, g, &from, &to))
    return;
  smr_error e;
  for (size_t j = from + 1; j <= to; j++) {
    smr_entries es;
    if (lookup(t, name, t->steps[j].step, SMR_MODE_GLOBAL, worker, &es, &e))
      continue;
    const smr_entry *r = find_kind(&es, SMR_ENTRY_RAW, 0, false);
    if (r && !r->problem && r->event_file && r->length > 0)
      smr_source_prefetch(t->src, r->event_file, (uint64_t)r->start,
                          (uint64_t)r->length);
    smr_entries_free(&es);
  }
}

int smr_trial_value(smr_trial *t, const char *name, int64_t step, int mode,
                    const char *worker, smr_tensor *out, smr_value_loc *loc,
                    smr_error *err) {
  memset(out, 0, sizeof *out);
  smr_entries es;
  int rc = lookup(t, name, step, mode, worker, &es, err);
  if (rc)
    return rc;
  const smr_entry *e = find_kind(&es, SMR_ENTRY_RAW, 0, false);
  fill_loc(loc, &es.v[0]);
  if (!e)
    rc = smr_error_set(err, SMR_TENSOR_UNAVAILABLE_FOR_STEP, "", -1,
                       "only the %s of '%s' was saved at %s step %lld",
                       find_kind(&es, SMR_ENTRY_SHAPE, 0, false) ? "shape"
                                                                 : "reductions",
                       name, smr_mode_name(mode), (long long)step);
  else
    rc = read_entry(t, e, name, out, err);
  if (rc == SMR_OK && t->pf_steps)
    prefetch_after(t, name, e->step, e->worker);
  smr_entries_free(&es);
  return rc;
}

/* ------------------------------------------------------ first elements */

/* A head read is worth it, and bounded, only for large records with few
 * elements asked; the bytes before a tensor_content are a name, a shape
 * and a few numbers (a few hundred bytes), after it a mode's metadata. */
#define HEAD_MAX_ELEMS 4096
#define HEAD_FIELDS 4096 /* payload bytes read before the elements */
#define HEAD_TAIL_MAX 65536
#define HEAD_ELEM_MAX 16 /* complex128 */

/* Reads [off, off+len) of an event file into a malloc'ed copy (a local
 * range may be a buffer lent to this thread until the next read). */
static uint8_t *read_copy(smr_trial *t, const char *file, uint64_t off,
                          uint64_t len) {
  smr_range r;
  smr_error e;
  smr_error_clear(&e);
  if (smr_source_read_range(t->src, file, off, len, &r, &e) != SMR_OK)
    return NULL;
  uint8_t *copy = r.len == len ? malloc(len ? len : 1) : NULL;
  if (copy)
    memcpy(copy, r.data, len);
  smr_range_release(&r);
  return copy;
}

/* The record's framing as smr_record_parse and read_entry check it,
 * from its header and footer: the length's checksum, the length the index
 * gives, and smdebug's constant footer (a real payload checksum needs the
 * whole payload). */
static bool head_framing_ok(const uint8_t *hdr, const uint8_t *ftr,
                            uint64_t plen, int64_t length) {
  return smr_le64(hdr) == plen &&
         smr_le32(hdr + 8) == smr_crc_mask(smr_crc32c(hdr, 8)) &&
         plen + SMR_RECORD_OVERHEAD == (uint64_t)length &&
         smr_le32(ftr) == SMR_SMDEBUG_DATA_CRC;
}

/* head_of_entry, also giving where the elements lie in the payload
 * (*content_at, *content_len; NULL: not wanted). */
static int head_of_entry_at(smr_trial *t, const smr_entry *e, const char *tag,
                            size_t max_elems, smr_tensor *out,
                            uint64_t *content_at, uint64_t *content_len);

static int head_of_entry(smr_trial *t, const smr_entry *e, const char *tag,
                         size_t max_elems, smr_tensor *out) {
  return head_of_entry_at(t, e, tag, max_elems, out, NULL, NULL);
}

static int head_of_entry_at(smr_trial *t, const smr_entry *e, const char *tag,
                            size_t max_elems, smr_tensor *out,
                            uint64_t *content_at, uint64_t *content_len) {
  uint64_t start = (uint64_t)e->start, length = (uint64_t)e->length;
  uint64_t want = SMR_RECORD_HEADER + HEAD_FIELDS + max_elems * HEAD_ELEM_MAX;
  /* remote: two round trips would cost more than the record cache's
   * whole read, which also reads ahead */
  if (t->tb || smr_source_is_remote(t->src) || e->problem || !e->event_file ||
      e->length <= 0 || max_elems > HEAD_MAX_ELEMS || length < 4 * want)
    return SMR_ERR_FORMAT;
  uint8_t *head = read_copy(t, e->event_file, start, want);
  if (!head)
    return SMR_ERR_FORMAT;
  uint64_t plen = length - SMR_RECORD_OVERHEAD, at, dlen;
  const uint8_t *payload = head + SMR_RECORD_HEADER;
  size_t n = (size_t)want - SMR_RECORD_HEADER;
  int rc = SMR_ERR_FORMAT;
  uint8_t *tail = NULL;
  if (smr_event_head_locate(payload, n, plen, &at, &dlen) &&
      plen - (at + dlen) <= HEAD_TAIL_MAX) {
    uint64_t tlen = plen - (at + dlen);
    tail = read_copy(t, e->event_file, start + SMR_RECORD_HEADER + at + dlen,
                     tlen + SMR_RECORD_FOOTER);
    if (tail && head_framing_ok(head, tail + tlen, plen, e->length)) {
      smr_error err;
      smr_error_clear(&err);
      char *name = NULL;
      rc = smr_event_decode_head(payload, n, tail, (size_t)tlen, plen,
                                 e->event_file, start, out, &name, &err);
      if (rc == SMR_OK && (!name || strcmp(name, tag) != 0)) {
        smr_tensor_release(out);
        rc = SMR_ERR_FORMAT;
      }
      free(name);
      if (content_at)
        *content_at = at;
      if (content_len)
        *content_len = dlen;
    }
  }
  free(tail);
  free(head);
  return rc;
}

int smr_trial_value_head(smr_trial *t, const char *name, int64_t step, int mode,
                         size_t max_elems, smr_tensor *out,
                         smr_value_loc *loc) {
  memset(out, 0, sizeof *out);
  smr_entries es;
  smr_error err;
  smr_error_clear(&err);
  if (lookup(t, name, step, mode, NULL, &es, &err) != SMR_OK)
    return SMR_ERR_FORMAT;
  const smr_entry *e = find_kind(&es, SMR_ENTRY_RAW, 0, false);
  int rc = e ? head_of_entry(t, e, name, max_elems, out) : SMR_ERR_FORMAT;
  if (rc == SMR_OK)
    fill_loc(loc, &es.v[0]);
  smr_entries_free(&es);
  return rc;
}

/* The element count of a value from its shape (0 when a size is
 * negative or the product does not fit). */
static uint64_t shape_count(const smr_tensor *h) {
  uint64_t count = 1;
  for (int d = 0; d < h->ndim && d < SMR_MAX_DIMS; d++)
    count = h->shape[d] < 0 ||
                    (h->shape[d] && count > UINT64_MAX / (uint64_t)h->shape[d])
                ? 0
                : count * (uint64_t)h->shape[d];
  return count;
}

/* The head of an entry's value (*h, holding its first element; release
 * it) and where its elements lie in the payload (*cat, *clen bytes),
 * read again from the record's first and last bytes (a few KB) so that
 * the bytes read next are those of the record the index names now, its
 * framing and tag checked as value_head checks them. */
static bool content_of_entry(smr_trial *t, const smr_entry *e, const char *tag,
                             smr_tensor *h, uint64_t *cat, uint64_t *clen) {
  memset(h, 0, sizeof *h);
  *cat = *clen = 0;
  return head_of_entry_at(t, e, tag, 1, h, cat, clen) == SMR_OK;
}

/* The runs' bytes, read where the head says the elements lie; every run
 * must lie inside the elements. */
static int runs_of_entry(smr_trial *t, const smr_entry *e, const char *tag,
                         const int64_t *at, size_t nruns, size_t run_elems,
                         size_t elem_size, uint8_t *dest) {
  smr_tensor h;
  uint64_t cat, clen;
  if (!content_of_entry(t, e, tag, &h, &cat, &clen))
    return SMR_ERR_FORMAT;
  /* h holds the first elements only: the count is the shape's */
  uint64_t count = shape_count(&h);
  bool ok = !h.strings && smr_dtype_size(h.dtype) == elem_size && count > 0 &&
            clen / elem_size == count && clen % elem_size == 0;
  smr_tensor_release(&h);
  for (size_t i = 0; ok && i < nruns; i++) {
    ok = at[i] >= 0 && (uint64_t)at[i] <= count &&
         run_elems <= count - (uint64_t)at[i];
    uint64_t n = (uint64_t)run_elems * elem_size;
    uint8_t *run = ok ? read_copy(t, e->event_file,
                                  (uint64_t)e->start + SMR_RECORD_HEADER + cat +
                                      (uint64_t)at[i] * elem_size,
                                  n)
                      : NULL;
    ok = run != NULL;
    if (run)
      memcpy(dest + i * n, run, n);
    free(run);
  }
  return ok ? SMR_OK : SMR_ERR_FORMAT;
}

int smr_trial_value_runs(smr_trial *t, const char *name, int64_t step, int mode,
                         const int64_t *at, size_t nruns, size_t run_elems,
                         size_t elem_size, void *dest) {
  smr_entries es;
  smr_error err;
  smr_error_clear(&err);
  if (!nruns || !run_elems || !elem_size || run_elems > HEAD_MAX_ELEMS ||
      nruns > 64 || lookup(t, name, step, mode, NULL, &es, &err) != SMR_OK)
    return SMR_ERR_FORMAT;
  const smr_entry *e = find_kind(&es, SMR_ENTRY_RAW, 0, false);
  int rc =
      e && !t->tb && !smr_source_is_remote(t->src) && !e->problem &&
              e->event_file
          ? runs_of_entry(t, e, name, at, nruns, run_elems, elem_size, dest)
          : SMR_ERR_FORMAT;
  smr_entries_free(&es);
  return rc;
}

/* Whether h (a value_head of one element) is a value whose clen bytes
 * of tensor_content are its elements as decoded: a numeric dtype stored
 * as itself, at least one element.  With like, also like's value: float32
 * or float64 of the same dtype, stored dtype and shape. */
static bool pieces_match(const smr_tensor *h, const smr_tensor *like,
                         uint64_t clen) {
  size_t size = smr_dtype_size(h->dtype);
  uint64_t count = shape_count(h);
  if (h->strings || h->dtype == SMR_DT_STRING || !size ||
      h->dtype != h->stored_dtype || count == 0 || clen % size ||
      clen / size != count)
    return false;
  if (!like)
    return true;
  if (like->strings || !like->data ||
      (like->dtype != SMR_DT_FLOAT && like->dtype != SMR_DT_DOUBLE) ||
      h->dtype != like->dtype || h->stored_dtype != like->stored_dtype ||
      h->ndim != like->ndim || like->count <= 0 ||
      clen != (uint64_t)like->nbytes ||
      like->nbytes != (size_t)like->count * smr_dtype_size(like->dtype))
    return false;
  for (int d = 0; d < like->ndim && d < SMR_MAX_DIMS; d++)
    if (h->shape[d] != like->shape[d])
      return false;
  return true;
}

/* The value as smr_trial_value_pieces describes it before its pieces:
 * h's, without elements. */
static void pieces_head(const smr_tensor *h, uint64_t clen, smr_tensor *out) {
  memset(out, 0, sizeof *out);
  out->dtype = h->dtype;
  out->stored_dtype = h->stored_dtype;
  out->ndim = h->ndim;
  memcpy(out->shape, h->shape, sizeof out->shape);
  out->count = (int64_t)shape_count(h);
  out->nbytes = (size_t)clen;
  out->step = h->step;
  out->wall_time = h->wall_time;
  out->mode = h->mode;
  out->mode_step = h->mode_step;
}

/* The elements' bytes in pieces, read where the head says they lie. */
/* The pieces of a record another rule read whole, while the run's shared
 * records still hold it: handed from there, not read from the file again
 * (a record of a few MB that UnchangedTensor compares with the one before
 * it, read at the step before).  false: not held, read them; else *rc is
 * what the last `each` returned. */
static bool pieces_from_kept(smr_trial *t, const smr_entry *e, uint64_t cat,
                             uint64_t clen, size_t piece, smr_piece_fn each,
                             void *arg, int *rc) {
  smr_range r;
  if (!smr_source_range_kept(t->src, e->event_file, (uint64_t)e->start,
                             (uint64_t)e->length, &r))
    return false;
  bool held = SMR_RECORD_HEADER + cat <= r.len &&
              clen <= r.len - SMR_RECORD_HEADER - cat;
  const uint8_t *c = held ? r.data + SMR_RECORD_HEADER + cat : NULL;
  *rc = SMR_OK;
  for (uint64_t off = 0; held && *rc == SMR_OK && off < clen;) {
    size_t len = clen - off < piece ? (size_t)(clen - off) : piece;
    *rc = each(arg, off, c + off, len);
    off += len;
  }
  smr_range_release(&r);
  return held;
}

static int pieces_of_entry(smr_trial *t, const smr_entry *e, const char *tag,
                           const smr_tensor *like, size_t piece,
                           size_t piece_elems, smr_piece_fn each, void *arg,
                           smr_tensor *head) {
  smr_tensor h;
  uint64_t cat, clen;
  if (!content_of_entry(t, e, tag, &h, &cat, &clen))
    return SMR_ERR_FORMAT;
  bool ok = pieces_match(&h, like, clen);
  if (ok && head)
    pieces_head(&h, clen, head);
  size_t esize = ok ? smr_dtype_size(h.dtype) : 1;
  smr_tensor_release(&h);
  piece -= piece % esize;
  if (piece_elems && piece_elems < piece / esize)
    piece = piece_elems * esize;
  if (!ok || !piece)
    return SMR_ERR_FORMAT;
  int rc;
  if (pieces_from_kept(t, e, cat, clen, piece, each, arg, &rc))
    return rc;
  uint64_t at = (uint64_t)e->start + SMR_RECORD_HEADER + cat;
  /* every piece into one buffer of the caller's thread: not the record
   * pools' (source.h, smr_source_read_into) */
  uint8_t *buf = malloc(clen < piece ? (size_t)clen : piece);
  rc = buf ? SMR_OK : SMR_ERR_NOMEM;
  for (uint64_t off = 0; rc == SMR_OK && off < clen;) {
    size_t len = clen - off < piece ? (size_t)(clen - off) : piece;
    smr_error err;
    smr_error_clear(&err);
    rc = smr_source_read_into(t->src, e->event_file, at + off, len, buf, &err);
    if (rc != SMR_OK)
      rc = SMR_ERR_FORMAT;
    else
      rc = each(arg, off, buf, len);
    off += len;
  }
  free(buf);
  return rc == SMR_ERR_NOMEM ? SMR_ERR_FORMAT : rc;
}

int smr_trial_value_pieces(smr_trial *t, const char *name, int64_t step,
                           int mode, const smr_tensor *like, size_t piece,
                           size_t piece_elems, smr_piece_fn each, void *arg,
                           smr_tensor *head, smr_value_loc *loc) {
  smr_entries es;
  smr_error err;
  smr_error_clear(&err);
  if (!piece || !each)
    return SMR_ERR_USAGE;
  int rc = lookup(t, name, step, mode, NULL, &es, &err);
  if (rc != SMR_OK) /* not there: value()'s status; anything else: read it */
    return rc <= SMR_STEP_UNAVAILABLE ? rc : SMR_ERR_FORMAT;
  const smr_entry *e = find_kind(&es, SMR_ENTRY_RAW, 0, false);
  if (loc)
    fill_loc(loc, &es.v[0]);
  rc = !e ? SMR_TENSOR_UNAVAILABLE_FOR_STEP /* as smr_trial_value */
       : !t->tb && !smr_source_is_remote(t->src) && !e->problem && e->event_file
           ? pieces_of_entry(t, e, name, like, piece, piece_elems, each, arg,
                             head)
           : SMR_ERR_FORMAT;
  smr_entries_free(&es);
  return rc;
}

int smr_trial_reduction(smr_trial *t, const char *name, int64_t step, int mode,
                        const char *worker, int reduction, bool abs,
                        double *out, bool *saved, smr_value_loc *loc,
                        smr_error *err) {
  smr_entries es;
  int rc = lookup(t, name, step, mode, worker, &es, err);
  if (rc)
    return rc;
  fill_loc(loc, &es.v[0]);
  const smr_entry *e = find_kind(&es, SMR_ENTRY_REDUCTION, reduction, abs);
  smr_tensor v;
  memset(&v, 0, sizeof v);
  if (e) {
    char *tag = smr_reduction_tensor_name(name, reduction, abs);
    rc = read_entry(t, e, tag, &v, err);
    free(tag);
    if (rc == SMR_OK && v.count < 1)
      rc = smr_error_set(err, SMR_ERR_FORMAT, e->event_file, e->start,
                         "saved reduction of '%s' holds no value", name);
    if (rc == SMR_OK && v.dtype != SMR_DT_STRING)
      *out = smr_tensor_get(&v, 0);
    *saved = true;
  } else if ((e = find_kind(&es, SMR_ENTRY_RAW, 0, false)) != NULL) {
    rc = read_entry(t, e, name, &v, err);
    if (rc == SMR_OK)
      rc = smr_tensor_reduce(&v, (smr_reduction)reduction, abs, out, err);
    *saved = false;
  } else {
    rc = smr_error_set(err, SMR_TENSOR_UNAVAILABLE_FOR_STEP, "", -1,
                       "reduction %s%s of '%s' is neither saved nor "
                       "computable at %s step %lld",
                       abs ? "abs_" : "",
                       smr_reduction_name((smr_reduction)reduction), name,
                       smr_mode_name(mode), (long long)step);
  }
  smr_tensor_release(&v);
  smr_entries_free(&es);
  return rc;
}

bool smr_trial_reduction_saved(smr_trial *t, const char *name, int64_t step,
                               int mode, int reduction, bool abs) {
  smr_entries es;
  smr_error err;
  smr_error_clear(&err);
  if (lookup(t, name, step, mode, NULL, &es, &err))
    return false;
  bool saved = find_kind(&es, SMR_ENTRY_REDUCTION, reduction, abs) != NULL;
  smr_entries_free(&es);
  return saved;
}

int smr_trial_shape(smr_trial *t, const char *name, int64_t step, int mode,
                    const char *worker, int *ndim, int64_t shape[SMR_MAX_DIMS],
                    smr_error *err) {
  smr_entries es;
  int rc = lookup(t, name, step, mode, worker, &es, err);
  if (rc)
    return rc;
  const smr_entry *e = find_kind(&es, SMR_ENTRY_SHAPE, 0, false);
  if (e) {
    *ndim = e->ndim;
    memcpy(shape, e->shape, sizeof e->shape);
  } else if ((e = find_kind(&es, SMR_ENTRY_RAW, 0, false)) != NULL) {
    smr_tensor v;
    rc = read_entry(t, e, name, &v, err);
    if (rc == SMR_OK) {
      *ndim = v.ndim;
      memcpy(shape, v.shape, sizeof v.shape);
    }
    smr_tensor_release(&v);
  } else {
    rc = smr_error_set(err, SMR_TENSOR_UNAVAILABLE_FOR_STEP, "", -1,
                       "neither shape nor value of '%s' saved at step %lld",
                       name, (long long)step);
  }
  smr_entries_free(&es);
  return rc;
}
