/* tb_pairs.c - (mode, step) pairs numbered by global step (tb_pairs.h). */
#include "trial/tb_pairs.h"

#include <stdlib.h>
#include <string.h>

#include "base/common.h"

/* The next capacity of an array that grows with the folder: double while
 * small, a quarter more once large (the slack is memory a big folder
 * pays for; realloc of a big block moves pages, not bytes). */
static size_t grown(size_t cap, size_t first) {
  return cap == 0 ? first : cap < 65536 ? cap * 2 : cap + cap / 4;
}

/* ------------------------------------------------- numbered: by mode */

/* Position in the mode's index of the first pair whose step >= step. */
static size_t mode_lower_bound(const tb_pairs *p, int mode, int64_t step) {
  const uint32_t *ix = p->by_mode[mode];
  size_t lo = 0, hi = p->nby_mode[mode];
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (p->step[ix[mid]] < step)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

int64_t tb_pairs_find(const tb_pairs *p, int mode, int64_t step) {
  if (mode < 1 || mode > 4)
    return -1;
  size_t j = mode_lower_bound(p, mode, step);
  if (j < p->nby_mode[mode] && p->step[p->by_mode[mode][j]] == step)
    return (int64_t)p->by_mode[mode][j];
  return -1;
}

/* ---------------------------------------- noted since the numbering */

/* splitmix64's finaliser: steps are consecutive integers, whose plain
 * hashes cluster in the low bits the table indexes by */
static uint64_t pair_hash(int mode, int64_t step) {
  uint64_t x = (uint64_t)step * 4 + (uint64_t)mode;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* Put pair k (noted, not numbered, absent from the table) in the table. */
static void pending_put(tb_pairs *p, size_t k) {
  size_t mask = p->pending_cap - 1;
  size_t i = (size_t)pair_hash(p->mode[k], p->step[k]) & mask;
  while (p->pending[i])
    i = (i + 1) & mask;
  p->pending[i] = (uint32_t)(k - p->numbered + 1);
}

/* The table holds every pair noted since the numbering, at most half
 * full (built on first need, rebuilt twice as large when full). */
static void pending_fit(tb_pairs *p) {
  size_t count = p->n - p->numbered;
  if (p->pending && (count + 1) * 2 <= p->pending_cap)
    return;
  size_t cap = p->pending_cap ? p->pending_cap * 2 : 1024;
  while ((count + 1) * 2 > cap)
    cap *= 2;
  free(p->pending);
  p->pending = smr_xcalloc(cap, sizeof *p->pending);
  p->pending_cap = cap;
  for (size_t k = p->numbered; k < p->n; k++)
    pending_put(p, k);
}

static bool pending_has(tb_pairs *p, int mode, int64_t step) {
  pending_fit(p);
  size_t mask = p->pending_cap - 1;
  for (size_t i = (size_t)pair_hash(mode, step) & mask; p->pending[i];
       i = (i + 1) & mask) {
    size_t k = p->numbered + p->pending[i] - 1;
    if (p->mode[k] == mode && p->step[k] == step)
      return true;
  }
  return false;
}

static void append(tb_pairs *p, int mode, int64_t step, double wall) {
  if (p->n == p->cap) {
    p->cap = grown(p->cap, 1024);
    p->step = smr_xrealloc(p->step, p->cap * sizeof *p->step);
    p->wall = smr_xrealloc(p->wall, p->cap * sizeof *p->wall);
    p->mode = smr_xrealloc(p->mode, p->cap * sizeof *p->mode);
  }
  p->step[p->n] = step;
  p->wall[p->n] = wall;
  p->mode[p->n] = (uint8_t)mode;
  p->n++;
}

void tb_pairs_note(tb_pairs *p, int mode, int64_t step, double wall) {
  if (mode < 1 || mode > 4)
    return;
  if (p->has_max[mode] && step <= p->max_step[mode]) {
    if (step == p->max_step[mode] || /* the mode's last pair, noted */
        tb_pairs_find(p, mode, step) >= 0 || pending_has(p, mode, step))
      return;
  } else {
    p->has_max[mode] = true;
    p->max_step[mode] = step;
  }
  append(p, mode, step, wall);
  if (p->pending) {
    pending_fit(p); /* may rebuild with the new pair in it */
    if (!pending_has(p, mode, step))
      pending_put(p, p->n - 1);
  }
}

/* --------------------------------------------------------- numbering */

/* A new pair's place in (step, mode) order; the key travels with the
 * index (qsort has no context argument). */
typedef struct order {
  int64_t step;
  uint32_t mode, at;
} order;

static int cmp_order(const void *a, const void *b) {
  const order *x = a, *y = b;
  if (x->step != y->step)
    return x->step < y->step ? -1 : 1;
  return (int)x->mode - (int)y->mode;
}

static bool in_order(const tb_pairs *p, size_t from) {
  for (size_t k = from + 1; k < p->n; k++)
    if (p->step[k - 1] > p->step[k] ||
        (p->step[k - 1] == p->step[k] && p->mode[k - 1] > p->mode[k]))
      return false;
  return true;
}

/* Pairs [from, n) put in (step, mode) order, one array at a time through
 * one buffer. */
static void reorder(tb_pairs *p, size_t from) {
  size_t n = p->n - from;
  order *o = smr_xmalloc(n * sizeof *o);
  for (size_t k = 0; k < n; k++)
    o[k] = (order){p->step[from + k], p->mode[from + k], (uint32_t)k};
  qsort(o, n, sizeof *o, cmp_order);
  double *buf = smr_xmalloc(n * sizeof *buf);
  for (size_t k = 0; k < n; k++)
    buf[k] = p->wall[from + o[k].at];
  memcpy(p->wall + from, buf, n * sizeof *buf);
  uint8_t *mb = (uint8_t *)buf;
  for (size_t k = 0; k < n; k++)
    mb[k] = p->mode[from + o[k].at];
  memcpy(p->mode + from, mb, n);
  for (size_t k = 0; k < n; k++)
    p->step[from + k] = o[k].step;
  free(buf);
  free(o);
}

/* Mode m's index gains the global steps numbered from `from` on: in step
 * order among themselves, so one merge with the earlier ones when a step
 * falls below them (a file of older steps appeared). */
static void index_mode(tb_pairs *p, int m, size_t from) {
  size_t old = p->nby_mode[m];
  for (size_t g = from; g < p->n; g++) {
    if (p->mode[g] != m)
      continue;
    if (p->nby_mode[m] == p->capby_mode[m]) {
      p->capby_mode[m] = grown(p->capby_mode[m], 256);
      p->by_mode[m] =
          smr_xrealloc(p->by_mode[m], p->capby_mode[m] * sizeof *p->by_mode[m]);
    }
    p->by_mode[m][p->nby_mode[m]++] = (uint32_t)g;
  }
  uint32_t *ix = p->by_mode[m];
  size_t n = p->nby_mode[m];
  if (old == 0 || old == n || p->step[ix[old - 1]] < p->step[ix[old]])
    return; /* the usual case: the new steps are above the old */
  uint32_t *merged = smr_xmalloc(n * sizeof *merged);
  size_t i = 0, j = old, k = 0;
  while (i < old && j < n)
    merged[k++] = p->step[ix[i]] < p->step[ix[j]] ? ix[i++] : ix[j++];
  while (i < old)
    merged[k++] = ix[i++];
  while (j < n)
    merged[k++] = ix[j++];
  memcpy(ix, merged, n * sizeof *ix);
  free(merged);
}

size_t tb_pairs_number(tb_pairs *p) {
  size_t from = p->numbered, n = p->n - from;
  free(p->pending);
  p->pending = NULL;
  p->pending_cap = 0;
  if (!n)
    return 0;
  if (!in_order(p, from)) /* the usual case: one file, in step order */
    reorder(p, from);
  p->numbered = p->n;
  for (int m = 1; m <= 4; m++)
    index_mode(p, m, from);
  return n;
}

void tb_pairs_free(tb_pairs *p) {
  free(p->step);
  free(p->wall);
  free(p->mode);
  for (int m = 0; m < 5; m++)
    free(p->by_mode[m]);
  free(p->pending);
  memset(p, 0, sizeof *p);
}
