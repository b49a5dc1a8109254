/* tb_series.c - a tag's values by step, compact (tb_series.h). */
#include "trial/tb_series.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"

int64_t tb_series_step(const tb_series *s, size_t i) {
  return s->wide_steps ? ((const int64_t *)s->steps)[i]
                       : (int64_t)((const uint32_t *)s->steps)[i];
}

double tb_series_value(const tb_series *s, size_t i) {
  return s->wide_values ? ((const double *)s->values)[i]
                        : (double)((const float *)s->values)[i];
}

static size_t step_size(const tb_series *s) {
  return s->wide_steps ? sizeof(int64_t) : sizeof(uint32_t);
}

static size_t value_size(const tb_series *s) {
  return s->wide_values ? sizeof(double) : sizeof(float);
}

static bool narrow_step(int64_t step) {
  return step >= 0 && step <= (int64_t)UINT32_MAX;
}

static bool narrow_value(double v) {
  return isnan(v) || (double)(float)v == v;
}

static void widen_steps(tb_series *s) {
  int64_t *w = smr_xmalloc((s->cap ? s->cap : 1) * sizeof *w);
  for (size_t i = 0; i < s->n; i++)
    w[i] = ((const uint32_t *)s->steps)[i];
  free(s->steps);
  s->steps = w;
  s->wide_steps = true;
}

static void widen_values(tb_series *s) {
  double *w = smr_xmalloc((s->cap ? s->cap : 1) * sizeof *w);
  for (size_t i = 0; i < s->n; i++)
    w[i] = ((const float *)s->values)[i];
  free(s->values);
  s->values = w;
  s->wide_values = true;
}

static void set_value(tb_series *s, size_t i, double v) {
  if (!s->wide_values && !narrow_value(v))
    widen_values(s);
  if (s->wide_values)
    ((double *)s->values)[i] = v;
  else
    ((float *)s->values)[i] = (float)v;
}

static void grow(tb_series *s) {
  /* doubling while small; a quarter more once large (realloc of a big
   * block moves pages, not bytes) */
  size_t cap = s->cap < 4096 ? (s->cap ? s->cap * 2 : 16) : s->cap + s->cap / 4;
  s->steps = smr_xrealloc(s->steps, cap * step_size(s));
  s->values = smr_xrealloc(s->values, cap * value_size(s));
  s->cap = cap;
}

size_t tb_series_find(const tb_series *s, int64_t step, bool *found) {
  size_t lo = 0, hi = s->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (tb_series_step(s, mid) < step)
      lo = mid + 1;
    else
      hi = mid;
  }
  *found = lo < s->n && tb_series_step(s, lo) == step;
  return lo;
}

void tb_series_put(tb_series *s, int64_t step, double value) {
  if (s->n && tb_series_step(s, s->n - 1) == step) { /* logged again */
    set_value(s, s->n - 1, value);
    return;
  }
  bool found = false;
  size_t at = s->n && tb_series_step(s, s->n - 1) > step
                  ? tb_series_find(s, step, &found)
                  : s->n;
  if (found) {
    set_value(s, at, value);
    return;
  }
  if (s->n == s->cap)
    grow(s);
  if (!s->wide_steps && !narrow_step(step))
    widen_steps(s);
  size_t ss = step_size(s), vs = value_size(s);
  char *st = s->steps, *va = s->values;
  memmove(st + (at + 1) * ss, st + at * ss, (s->n - at) * ss);
  memmove(va + (at + 1) * vs, va + at * vs, (s->n - at) * vs);
  if (s->wide_steps)
    ((int64_t *)s->steps)[at] = step;
  else
    ((uint32_t *)s->steps)[at] = (uint32_t)step;
  s->n++;
  set_value(s, at, value);
}

void tb_series_free(tb_series *s) {
  free(s->steps);
  free(s->values);
  memset(s, 0, sizeof *s);
}
