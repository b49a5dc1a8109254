/* spike.c - the check of LossSpike and GradNormSpike (see spike.h). */
#include "spike.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct series {
  int64_t *steps; /* the mode steps the values were read at */
  double *vals;
  unsigned char *known;
  size_t n;
} series;

void rk_spike_init(rk_spike *s) {
  rk_table_init(&s->series, sizeof(series));
  rk_step_cache_init(&s->steps);
}

static void series_clear(series *v) {
  free(v->steps);
  free(v->vals);
  free(v->known);
  memset(v, 0, sizeof *v);
}

void rk_spike_free(rk_spike *s) {
  for (size_t i = 0; i < s->series.n; i++)
    series_clear(rk_table_at(&s->series, i));
  rk_table_free(&s->series);
  rk_step_cache_free(&s->steps);
}

void rk_spike_sync(rk_spike *s, smrules_trial *t) {
  rk_step_cache_sync(&s->steps, t);
}

/* Room for n positions; values kept while the steps are the same. */
static bool series_fit(series *v, const int64_t *steps, size_t n) {
  size_t keep = v->n < n ? v->n : n;
  for (size_t k = 0; k < keep; k++)
    if (v->steps[k] != steps[k]) { /* the trial was rewritten */
      keep = 0;
      break;
    }
  if (n == v->n && keep == n)
    return true;
  int64_t *st = realloc(v->steps, (n ? n : 1) * sizeof *st);
  double *va = st ? realloc(v->vals, (n ? n : 1) * sizeof *va) : NULL;
  unsigned char *kn = va ? realloc(v->known, n ? n : 1) : NULL;
  if (st)
    v->steps = st;
  if (va)
    v->vals = va;
  if (!kn)
    return false;
  v->known = kn;
  if (keep < n)
    memset(v->known + keep, 0, n - keep);
  memcpy(v->steps, steps, n * sizeof *steps);
  v->n = n;
  return true;
}

/* Value at position k; NAN when absent or not a numeric scalar. */
static double value_at(series *v, smrules_trial *t, const char *name, int mode,
                       size_t k) {
  if (!v->known[k]) {
    double x;
    v->vals[k] = rk_scalar(t, name, v->steps[k], mode, &x, NULL) == 0 ? x : NAN;
    v->known[k] = 1;
  }
  return v->vals[k];
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int rk_spike_check(smrules_ctx *ctx, rk_spike *s, const rk_spike_settings *p,
                   smrules_trial *t, const char *name, int64_t g) {
  int mode;
  int64_t c;
  if (rk_api->step_mode(t, g, &mode, &c) != 0)
    return -1;
  double x;
  if (rk_scalar(t, name, c, mode, &x, NULL) != 0 || !isfinite(x))
    return -1;
  size_t n;
  const int64_t *steps = rk_step_cache_get(&s->steps, t, name, mode, &n);
  size_t lo = 0, hi = n; /* position of c */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (steps[mid] < c)
      lo = mid + 1;
    else
      hi = mid;
  }
  size_t from = lo > (size_t)p->window ? lo - (size_t)p->window : 0;
  if (lo - from < (size_t)p->warmup)
    return -1;
  char key[32];
  snprintf(key, sizeof key, "%d ", mode);
  size_t kl = strlen(key), nl = strlen(name);
  char *k = malloc(kl + nl + 1);
  if (!k)
    return -1;
  memcpy(k, key, kl);
  memcpy(k + kl, name, nl + 1);
  series *v = rk_table_get(&s->series, k, true);
  free(k);
  if (!v || !series_fit(v, steps, n))
    return -1;
  double *win = malloc((lo - from) * sizeof *win);
  if (!win)
    return -1;
  size_t m = 0;
  double sum = 0;
  for (size_t i = from; i < lo; i++) {
    double y = value_at(v, t, name, mode, i);
    if (isfinite(y)) {
      win[m++] = y;
      sum += y;
    }
  }
  if (m < (size_t)p->warmup || m == 0) {
    free(win);
    return -1;
  }
  qsort(win, m, sizeof *win, cmp_double);
  double med = m % 2 ? win[m / 2] : (win[m / 2 - 1] + win[m / 2]) / 2;
  double mean = sum / (double)m, ss = 0;
  for (size_t i = 0; i < m; i++)
    ss += (win[i] - mean) * (win[i] - mean);
  free(win);
  double sd = sqrt(ss / (double)m);
  double z = sd > 0 ? (x - mean) / sd : 0;
  bool by_factor = p->factor > 0 && x - med > (p->factor - 1) * fabs(med);
  bool by_z = p->z_score > 0 && sd > 0 && z > p->z_score;
  if (!by_factor && !by_z)
    return 0;
  smrules_json *j = rk_violation(ctx, name);
  rk_api->json_int(j, "step", g);
  rk_api->json_str(j, "mode", rk_mode_name(mode));
  rk_api->json_int(j, "mode_step", c);
  rk_api->json_num(j, "value", x);
  rk_api->json_num(j, "median", med);
  rk_api->json_num(j, "mean", mean);
  rk_api->json_num(j, "std", sd);
  rk_api->json_num(j, "z", z);
  rk_api->json_int(j, "window", (int64_t)m);
  rk_api->json_str(j, "by",
                   by_factor && by_z ? "factor and z_score"
                   : by_factor       ? "factor"
                                     : "z_score");
  return 1;
}

/* ---------------------------------------------------- the rule's shell */

typedef struct spike_rule {
  const rk_spike_rule_settings *s;
  rk_spike sp;
} spike_rule;

int rk_spike_rule_init(smrules_ctx *ctx, const void *settings, void **state) {
  spike_rule *r = calloc(1, sizeof *r);
  if (!r) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  r->s = settings;
  rk_spike_init(&r->sp);
  *state = r;
  return 0;
}

void rk_spike_rule_destroy(void *state) {
  spike_rule *r = state;
  rk_spike_free(&r->sp);
  free(r);
}

int rk_spike_rule_step(smrules_ctx *ctx, void *state, int64_t g,
                       const char *default_collection) {
  spike_rule *r = state;
  const rk_spike_rule_settings *s = r->s;
  smrules_trial *t = rk_api->trial(ctx);
  rk_spike_sync(&r->sp, t);
  const char *fallback[] = {default_collection};
  smrules_strlist colls = s->collection_names;
  if (!colls.n && !s->tensor_regex.n && default_collection)
    colls = (smrules_strlist){1, fallback};
  smrules_strlist names;
  rk_api->select(t, &colls, &s->tensor_regex, &names);
  int64_t evaluated = 0, violations = 0;
  for (size_t i = 0; i < names.n; i++) {
    int rc = rk_spike_check(ctx, &r->sp, &s->spike, t, names.v[i], g);
    evaluated += rc >= 0;
    violations += rc == 1;
  }
  rk_api->strlist_free(&names);
  rk_api->datapoints(ctx, evaluated);
  return rk_result(evaluated, violations);
}
