/* step_entries.c - see step_entries.h. */
#include "trial/step_entries.h"

#include <stdlib.h>
#include <string.h>

#include "base/common.h"

/* Steps kept: rules in lock step read two or three steps at once, each
 * looked up by global step first (an empty answer unless the trial
 * writes mode GLOBAL) and then by its own mode, and two rules look one
 * step back. */
#define STEP_SLOTS 16
/* A step with more entries than this (thousands of tensors per step, or
 * an index file written to make it so) is asked per tensor as before:
 * the kept steps' memory stays bounded. */
#define STEP_MAX_ENTRIES 16384

typedef struct step_slot {
  bool used;
  bool too_many; /* more than STEP_MAX_ENTRIES: es is empty */
  int mode;
  int64_t mode_step;
  uint64_t last_use;
  smr_entries es;
  /* es by (tensor, position): a tensor's entries are found by binary
   * search, in the order the catalog gave them */
  struct tensor_pos {
    int64_t tensor;
    size_t pos;
  } * by_tensor;
} step_slot;

struct smr_step_entries {
  step_slot slot[STEP_SLOTS];
  uint64_t clock;
};

smr_step_entries *smr_step_entries_new(void) {
  return smr_xcalloc(1, sizeof(smr_step_entries));
}

static void slot_empty(step_slot *k) {
  if (k->used) {
    smr_entries_free(&k->es);
    free(k->by_tensor);
  }
  memset(k, 0, sizeof *k);
}

void smr_step_entries_forget(smr_step_entries *s) {
  for (size_t i = 0; i < STEP_SLOTS; i++)
    slot_empty(&s->slot[i]);
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

static void push_copy(smr_entries *out, const smr_entry *e) {
  if (out->n == out->cap) {
    out->cap = out->cap ? out->cap * 2 : 4;
    out->v = smr_xrealloc(out->v, out->cap * sizeof *out->v);
  }
  smr_entry *c = &out->v[out->n++];
  *c = *e;
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

/* An unused slot, else the one used longest ago, emptied. */
static step_slot *free_slot(smr_step_entries *s) {
  step_slot *best = &s->slot[0];
  for (size_t i = 0; i < STEP_SLOTS && best->used; i++)
    if (!s->slot[i].used || s->slot[i].last_use < best->last_use)
      best = &s->slot[i];
  slot_empty(best);
  return best;
}

static int cmp_tensor_pos(const void *a, const void *b) {
  const struct tensor_pos *x = a, *y = b;
  if (x->tensor != y->tensor)
    return x->tensor < y->tensor ? -1 : 1;
  return (x->pos > y->pos) - (x->pos < y->pos);
}

/* Loads (mode, mode_step) into k. */
static int fill_slot(step_slot *k, smr_catalog *c, int mode, int64_t mode_step,
                     smr_error *err) {
  bool all;
  int rc = smr_catalog_step_entries(c, mode, mode_step, STEP_MAX_ENTRIES,
                                    &k->es, &all, err);
  if (rc != SMR_OK)
    return rc;
  k->used = true;
  k->too_many = !all;
  k->mode = mode;
  k->mode_step = mode_step;
  k->by_tensor = smr_xcalloc(k->es.n ? k->es.n : 1, sizeof *k->by_tensor);
  for (size_t i = 0; i < k->es.n; i++)
    k->by_tensor[i] = (struct tensor_pos){k->es.v[i].tensor, i};
  if (k->es.n > 1)
    qsort(k->by_tensor, k->es.n, sizeof *k->by_tensor, cmp_tensor_pos);
  return SMR_OK;
}

/* The first position in k->by_tensor whose entry is of tensor_id or
 * after it. */
static size_t first_of(const step_slot *k, int64_t tensor_id) {
  size_t lo = 0, hi = k->es.n;
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
    int rc = fill_slot(k, c, mode, mode_step, err);
    if (rc != SMR_OK)
      return rc;
  }
  k->last_use = ++s->clock;
  if (k->too_many) /* this tensor's entries alone */
    return smr_catalog_entries(c, tensor_id, mode, mode_step, out, err);
  for (size_t i = first_of(k, tensor_id);
       i < k->es.n && k->by_tensor[i].tensor == tensor_id; i++)
    push_copy(out, &k->es.v[k->by_tensor[i].pos]);
  return SMR_OK;
}
