/* step_entries.c - see step_entries.h. */
#include "trial/step_entries.h"

#include <stdlib.h>
#include <string.h>

#include "base/common.h"

/* Steps kept: rules in lock step read two or three steps at once, each
 * looked up by global step first (an empty answer unless the trial
 * writes mode GLOBAL) and then by its own mode, and two rules look one
 * step back; a Python loop walks one tensor's steps, then the next
 * tensor's (with 16 slots every value of a 100-step walk queried SQLite
 * twice: a tenth of the scan's CPU, bench 11's `value`).
 * KEPT_MAX, not the slots, bounds the memory. */
#define STEP_SLOTS 256
/* Entries kept in all, about 100 bytes each besides the names they share
 * (a few MB at most), and in one step: a step with more (thousands of
 * tensors, or an index file written to make it so) is asked per tensor
 * as before, and at least four steps of the most that is kept fit. */
#define KEPT_MAX 16384
#define STEP_MAX (KEPT_MAX / 4)

/* An entry as kept: smr_entry without its fixed shape array, the strings
 * shared with the entry before it when equal (the entries of one index
 * file name the same worker and files). */
typedef struct kept_entry {
  int64_t tensor, step, mode_step, start, length;
  int mode, kind, reduction, ndim;
  bool abs;
  const int64_t *shape; /* ndim values, or NULL */
  const char *worker, *event_file, *index_path, *problem;
} kept_entry;

typedef struct step_slot {
  bool used;
  bool too_many; /* more than STEP_MAX: nothing kept */
  int mode;
  int64_t mode_step;
  uint64_t last_use;
  kept_entry *v;
  size_t n;
  /* v by (tensor, position): a tensor's entries are found by binary
   * search, in the order the catalog gave them */
  struct tensor_pos {
    int64_t tensor;
    size_t pos;
  } * by_tensor;
  void **owned; /* the strings and shapes v points to */
  size_t nowned;
} step_slot;

struct smr_step_entries {
  step_slot slot[STEP_SLOTS];
  size_t kept; /* entries in all slots */
  uint64_t clock;
};

smr_step_entries *smr_step_entries_new(void) {
  return smr_xcalloc(1, sizeof(smr_step_entries));
}

size_t smr_step_entries_count(const smr_step_entries *s) {
  return s->kept;
}

static void slot_empty(smr_step_entries *s, step_slot *k) {
  for (size_t i = 0; i < k->nowned; i++)
    free(k->owned[i]);
  free(k->owned);
  free(k->v);
  free(k->by_tensor);
  s->kept -= k->n;
  memset(k, 0, sizeof *k);
}

void smr_step_entries_forget(smr_step_entries *s) {
  for (size_t i = 0; i < STEP_SLOTS; i++)
    slot_empty(s, &s->slot[i]);
}

void smr_step_entries_free(smr_step_entries *s) {
  if (!s)
    return;
  smr_step_entries_forget(s);
  free(s);
}

static char *dup_or_null(const char *p) {
  return p ? smr_xstrdup(p) : NULL;
}

/* Appends a copy of kept entry e to out (the caller's to free). */
static void push_copy(smr_entries *out, const kept_entry *e) {
  if (out->n == out->cap) {
    out->cap = out->cap ? out->cap * 2 : 4;
    out->v = smr_xrealloc(out->v, out->cap * sizeof *out->v);
  }
  smr_entry *c = &out->v[out->n++];
  memset(c, 0, sizeof *c);
  c->tensor = e->tensor;
  c->step = e->step;
  c->mode = e->mode;
  c->mode_step = e->mode_step;
  c->kind = e->kind;
  c->reduction = e->reduction;
  c->abs = e->abs;
  c->start = e->start;
  c->length = e->length;
  c->ndim = e->ndim;
  if (e->ndim)
    memcpy(c->shape, e->shape, (size_t)e->ndim * sizeof *c->shape);
  c->worker = dup_or_null(e->worker);
  c->event_file = dup_or_null(e->event_file);
  c->index_path = dup_or_null(e->index_path);
  c->problem = dup_or_null(e->problem);
}

/* The slot of (mode, mode_step), or NULL. */
static step_slot *find_slot(smr_step_entries *s, int mode, int64_t mode_step) {
  for (size_t i = 0; i < STEP_SLOTS; i++) {
    step_slot *k = &s->slot[i];
    if (k->used && k->mode == mode && k->mode_step == mode_step)
      return k;
  }
  return NULL;
}

/* The used slot asked longest ago, other than `keep`, or NULL. */
static step_slot *oldest_slot(smr_step_entries *s, const step_slot *keep) {
  step_slot *best = NULL;
  for (size_t i = 0; i < STEP_SLOTS; i++) {
    step_slot *k = &s->slot[i];
    if (k->used && k != keep && (!best || k->last_use < best->last_use))
      best = k;
  }
  return best;
}

/* An unused slot, else the one asked longest ago, emptied. */
static step_slot *free_slot(smr_step_entries *s) {
  for (size_t i = 0; i < STEP_SLOTS; i++)
    if (!s->slot[i].used)
      return &s->slot[i];
  step_slot *k = oldest_slot(s, NULL);
  slot_empty(s, k);
  return k;
}

static int cmp_tensor_pos(const void *a, const void *b) {
  const struct tensor_pos *x = a, *y = b;
  if (x->tensor != y->tensor)
    return x->tensor < y->tensor ? -1 : 1;
  return (x->pos > y->pos) - (x->pos < y->pos);
}

/* p moved into the slot's keeping, or the equal string kept before it. */
static const char *keep_str(step_slot *k, char **p, const char *before) {
  if (!*p)
    return NULL;
  if (before && strcmp(*p, before) == 0)
    return before;
  k->owned[k->nowned++] = *p;
  const char *kept = *p;
  *p = NULL; /* now the slot's */
  return kept;
}

/* Moves the catalog's entries into k's compact form. */
static void keep_entries(step_slot *k, smr_entries *es) {
  k->v = smr_xcalloc(es->n ? es->n : 1, sizeof *k->v);
  k->owned = smr_xcalloc(5 * es->n + 1, sizeof *k->owned);
  for (size_t i = 0; i < es->n; i++) {
    smr_entry *e = &es->v[i];
    const kept_entry *prev = i ? &k->v[i - 1] : NULL;
    kept_entry *d = &k->v[i];
    *d = (kept_entry){.tensor = e->tensor,
                      .step = e->step,
                      .mode_step = e->mode_step,
                      .start = e->start,
                      .length = e->length,
                      .mode = e->mode,
                      .kind = e->kind,
                      .reduction = e->reduction,
                      .ndim = e->ndim,
                      .abs = e->abs};
    if (e->ndim > 0) {
      int64_t *shape = smr_xcalloc((size_t)e->ndim, sizeof *shape);
      memcpy(shape, e->shape, (size_t)e->ndim * sizeof *shape);
      k->owned[k->nowned++] = shape;
      d->shape = shape;
    }
    d->worker = keep_str(k, &e->worker, prev ? prev->worker : NULL);
    d->event_file = keep_str(k, &e->event_file, prev ? prev->event_file : NULL);
    d->index_path = keep_str(k, &e->index_path, prev ? prev->index_path : NULL);
    d->problem = keep_str(k, &e->problem, prev ? prev->problem : NULL);
  }
  k->n = es->n;
  smr_entries_free(es); /* frees the strings not moved */
}

/* Loads (mode, mode_step) into k, then lets go of the steps asked
 * longest ago until the kept entries are within KEPT_MAX. */
static int fill_slot(smr_step_entries *s, step_slot *k, smr_catalog *c,
                     int mode, int64_t mode_step, smr_error *err) {
  smr_entries es;
  bool all;
  int rc =
      smr_catalog_step_entries(c, mode, mode_step, STEP_MAX, &es, &all, err);
  if (rc != SMR_OK)
    return rc;
  k->used = true;
  k->too_many = !all;
  k->mode = mode;
  k->mode_step = mode_step;
  keep_entries(k, &es);
  s->kept += k->n;
  k->by_tensor = smr_xcalloc(k->n ? k->n : 1, sizeof *k->by_tensor);
  for (size_t i = 0; i < k->n; i++)
    k->by_tensor[i] = (struct tensor_pos){k->v[i].tensor, i};
  if (k->n > 1)
    qsort(k->by_tensor, k->n, sizeof *k->by_tensor, cmp_tensor_pos);
  for (step_slot *old; s->kept > KEPT_MAX && (old = oldest_slot(s, k));)
    slot_empty(s, old);
  return SMR_OK;
}

/* The first position in k->by_tensor whose entry is of tensor_id or
 * after it. */
static size_t first_of(const step_slot *k, int64_t tensor_id) {
  size_t lo = 0, hi = k->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (k->by_tensor[mid].tensor < tensor_id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

int smr_step_entries_get(smr_step_entries *s, smr_catalog *c, int64_t tensor_id,
                         int mode, int64_t mode_step, smr_entries *out,
                         smr_error *err) {
  memset(out, 0, sizeof *out);
  step_slot *k = find_slot(s, mode, mode_step);
  if (!k) {
    k = free_slot(s);
    int rc = fill_slot(s, k, c, mode, mode_step, err);
    if (rc != SMR_OK)
      return rc;
  }
  k->last_use = ++s->clock;
  if (k->too_many) /* this tensor's entries alone */
    return smr_catalog_entries(c, tensor_id, mode, mode_step, out, err);
  for (size_t i = first_of(k, tensor_id);
       i < k->n && k->by_tensor[i].tensor == tensor_id; i++)
    push_copy(out, &k->v[k->by_tensor[i].pos]);
  return SMR_OK;
}
