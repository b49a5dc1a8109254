/* pr_gpu.c - LowGPUUtilization and GPUMemoryIncrease
 * (docs/profiler.md#lowgpuutilization, docs/profiler.md#gpumemoryincrease):
 * per-GPU histories of utilization and memory.  Each window reads only the
 * recent tail of a history (kept in memory); a report entry reads the whole
 * prefix back (pk_hist). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof_rules.h"

#define MAX_VALUES 1000000

/* node -> gpu -> history, keeping the last `keep` readings in memory */
static pk_series *history(pk_dict *values, const smrules_sys_event *e,
                          int64_t keep) {
  return pk_series_of2(values, e->node, e->name, keep);
}

/* p25/p50/p75 (and more) with the box-plot whiskers of the reference:
 * upper = min(p75 + 1.5 iqr, max), lower = max(p25 - 1.5 iqr, min). */
static void whiskers(pk_obj *o, const double *sorted, size_t n, double p25,
                     double p75) {
  double iqr = p75 - p25;
  double upper = p75 + 1.5 * iqr, lower = p25 - 1.5 * iqr;
  double mx = np_quantile_sorted(sorted, n, 1);
  double mn = np_quantile_sorted(sorted, n, 0.0);
  pk_obj_num(o, "upper", pk_py_min(upper, mx));
  pk_obj_num(o, "lower", pk_py_max(lower, mn));
}

/* ------------------------------------------------------ LowGPUUtilization */

typedef struct lg_settings {
  double threshold_p95, threshold_p5;
  int64_t window, patience, scan_interval_us;
} lg_settings;

typedef struct lowgpu {
  lg_settings s;
  pk_dict *values;
  int64_t triggered, violations, datapoints;
  pk_obj *details;
} lowgpu;

static const smrules_param lg_params[] = {
    PR_PERCENT(SMRULES_PARAM_FLOAT, "threshold_p95", "70",
               SMRULES_OFFSET(lg_settings, threshold_p95),
               "95th percentile below this: underused GPU"),
    PR_PERCENT(SMRULES_PARAM_FLOAT, "threshold_p5", "10",
               SMRULES_OFFSET(lg_settings, threshold_p5),
               "5th percentile below this (with p95 above threshold_p95): "
               "fluctuating GPU"),
    PR_NONNEG(SMRULES_PARAM_INT, "window", "500",
              SMRULES_OFFSET(lg_settings, window),
              "most recent readings the percentiles use"),
    PR_NONNEG(SMRULES_PARAM_INT, "patience", "1000",
              SMRULES_OFFSET(lg_settings, patience),
              "readings per GPU before the rule may trigger"),
    PR_SCAN_INTERVAL(SMRULES_OFFSET(lg_settings, scan_interval_us)),
    SMRULES_END_PARAMS};

static void *lg_create(const void *settings) {
  lowgpu *g = calloc(1, sizeof *g);
  if (!g)
    abort();
  g->s = *(const lg_settings *)settings;
  g->values = pk_series_dict2();
  g->details = pk_obj_new();
  return g;
}

static void lg_destroy(void *e) {
  lowgpu *g = e;
  pk_dict_free(g->values);
  pk_obj_free(g->details);
  free(g);
}

/* Details[node][gpu] as the last violation computed it (from the first
 * n_at readings; gpu_95 and gpu_5 kept in a and b). */
static void lg_entry(lowgpu *g, const char *node, const char *gpu,
                     pk_series *h) {
  size_t n = h->n_at;
  double mx;
  double *s = pk_hist_sorted(&h->v, n, &mx);
  pk_obj *o = pk_obj_new();
  pk_obj_num(o, "gpu_max", mx);
  pk_obj_num(o, "gpu_95", h->a);
  pk_obj_num(o, "gpu_5", h->b);
  double p25 = np_quantile_sorted(s, n, 0.25);
  double p75 = np_quantile_sorted(s, n, 0.75);
  pk_obj_num(o, "p25", p25);
  pk_obj_num(o, "p50", np_quantile_sorted(s, n, 0.50));
  pk_obj_num(o, "p75", p75);
  pk_obj_num(o, "p95", np_quantile_sorted(s, n, 0.95));
  whiskers(o, s, n, p25, p75);
  free(s);
  pk_obj_raw_take(pk_obj_obj(g->details, node), gpu, pk_obj_render(o));
  pk_obj_free(o);
  h->pending = false;
}

static void lg_entries(lowgpu *g) {
  for (size_t i = 0; i < pk_dict_len(g->values); i++) {
    pk_entry *node = pk_dict_at(g->values, i);
    for (size_t k = 0; k < pk_dict_len(node->ptr); k++) {
      pk_entry *gpu = pk_dict_at(node->ptr, k);
      pk_series *h = gpu->ptr;
      if (h->pending)
        lg_entry(g, node->key, gpu->key, h);
    }
  }
}

static void lg_record(lowgpu *g, const char *node, const char *gpu,
                      pk_series *h, double w95, double w5, int64_t start_us) {
  g->triggered++;
  g->violations++;
  g->datapoints = (int64_t)h->v.n;
  pk_obj_raw(pk_obj_obj(g->details, node), gpu, NULL); /* its place */
  h->pending = true;
  h->n_at = h->v.n;
  h->a = w95;
  h->b = w5;
  pk_obj_int(g->details, "last_timestamp", start_us);
}

static void lg_check(lowgpu *g, const char *node, const char *gpu, pk_series *h,
                     int64_t start_us) {
  const pk_hist *v = &h->v;
  if ((int64_t)v->n <= g->s.patience)
    return;
  size_t from = pk_tail_start(v->n, g->s.window);
  double *copy; /* window 0 (all readings): read back */
  const double *t = pk_hist_view(v, from, v->n, &copy);
  double w95 = pk_quantile(t, v->n - from, 0.95);
  double w5 = pk_quantile(t, v->n - from, 0.05);
  free(copy);
  if (w95 < g->s.threshold_p95 ||
      (w95 > g->s.threshold_p95 && w5 < g->s.threshold_p5))
    lg_record(g, node, gpu, h, w95, w5, start_us);
}

static int lg_window(void *e, const pr_window *w, bool *condition) {
  lowgpu *g = e;
  for (size_t i = 0; i < w->nsys; i++)
    if (!strcmp(w->sys[i].dimension, "GPUUtilization"))
      pk_hist_push(&history(g->values, &w->sys[i], g->s.window)->v,
                   w->sys[i].value);
  bool reset = false;
  for (size_t i = 0; i < pk_dict_len(g->values); i++) {
    pk_entry *node = pk_dict_at(g->values, i);
    for (size_t k = 0; k < pk_dict_len(node->ptr); k++) {
      pk_entry *gpu = pk_dict_at(node->ptr, k);
      pk_series *h = gpu->ptr;
      g->datapoints = (int64_t)h->v.n;
      reset |= h->v.n > MAX_VALUES; /* the loop goes on with the old lists */
      lg_check(g, node->key, gpu->key, h, w->start_us);
    }
  }
  if (reset) {
    lg_entries(g); /* entries still read the histories being dropped */
    pk_dict_clear(g->values);
  }
  *condition = g->triggered > 0;
  return 0;
}

static void lg_report(void *e, pr_report *out) {
  lowgpu *g = e;
  lg_entries(g);
  out->triggered = g->triggered;
  out->violations = g->violations;
  out->datapoints = g->datapoints;
  out->details = g->details;
}

static void lg_params_text(const void *settings, char *buf, size_t n) {
  const lg_settings *s = settings;
  char a[40], b[40];
  pk_param_str(s->threshold_p95, true, a, sizeof a);
  pk_param_str(s->threshold_p5, true, b, sizeof b);
  snprintf(buf, n,
           "threshold_p95:%s\nthreshold_p5:%s\nwindow:%lld\npatience:%lld", a,
           b, (long long)s->window, (long long)s->patience);
}

const pr_engine_ops pr_low_gpu_utilization = {
    "LowGPUUtilization",
    "GPUs underused (low 95th percentile) or fluctuating (high p95, low p5)",
    "system metrics (GPUUtilization)",
    lg_params,
    sizeof(lg_settings),
    true,
    lg_create,
    lg_window,
    lg_report,
    lg_params_text,
    lg_destroy};

/* ------------------------------------------------------ GPUMemoryIncrease */

typedef struct gm_settings {
  double increase;
  int64_t patience, window, scan_interval_us;
} gm_settings;

typedef struct gpumem {
  gm_settings s;
  pk_dict *values;
  int64_t triggered, violations, datapoints;
  pk_obj *details;
} gpumem;

static const smrules_param gm_params[] = {
    PR_NONNEG(SMRULES_PARAM_FLOAT, "increase", "5",
              SMRULES_OFFSET(gm_settings, increase),
              "rise of the moving average (percentage points) that counts"),
    PR_NONNEG(SMRULES_PARAM_INT, "patience", "1000",
              SMRULES_OFFSET(gm_settings, patience),
              "readings per GPU before the rule may trigger"),
    PR_NONNEG(SMRULES_PARAM_INT, "window", "10",
              SMRULES_OFFSET(gm_settings, window),
              "readings in the moving average"),
    PR_SCAN_INTERVAL(SMRULES_OFFSET(gm_settings, scan_interval_us)),
    SMRULES_END_PARAMS};

static void *gm_create(const void *settings) {
  gpumem *g = calloc(1, sizeof *g);
  if (!g)
    abort();
  g->s = *(const gm_settings *)settings;
  g->values = pk_series_dict2();
  g->details = pk_obj_new();
  return g;
}

static void gm_destroy(void *e) {
  gpumem *g = e;
  pk_dict_free(g->values);
  pk_obj_free(g->details);
  free(g);
}

/* Python's x[a:b] bounds for a list of n (negative indices count from the
 * end). */
static void py_slice(size_t n, int64_t a, int64_t b, size_t *from, size_t *to) {
  int64_t N = (int64_t)n;
  if (a < 0)
    a = a + N < 0 ? 0 : a + N;
  if (b < 0)
    b = b + N < 0 ? 0 : b + N;
  if (a > N)
    a = N;
  if (b > N)
    b = N;
  *from = (size_t)a;
  *to = b > a ? (size_t)b : (size_t)a;
}

/* Details[node][gpu] as the last violation computed it (increase in a). */
static void gm_entry(gpumem *g, const char *node, const char *gpu,
                     pk_series *h) {
  size_t n = h->n_at;
  double mx;
  double *s = pk_hist_sorted(&h->v, n, &mx);
  pk_obj *o = pk_obj_new();
  pk_obj_num(o, "increase", h->a);
  pk_obj_num(o, "gpu_max", mx);
  pk_obj_num(o, "p05", np_quantile_sorted(s, n, 0.05));
  double p25 = np_quantile_sorted(s, n, 0.25);
  double p75 = np_quantile_sorted(s, n, 0.75);
  pk_obj_num(o, "p25", p25);
  pk_obj_num(o, "p50", np_quantile_sorted(s, n, 0.50));
  pk_obj_num(o, "p75", p75);
  pk_obj_num(o, "p95", np_quantile_sorted(s, n, 0.95));
  whiskers(o, s, n, p25, p75);
  free(s);
  pk_obj_raw_take(pk_obj_obj(g->details, node), gpu, pk_obj_render(o));
  pk_obj_free(o);
  h->pending = false;
}

static void gm_record(gpumem *g, const smrules_sys_event *e, pk_series *h,
                      double diff, int64_t start_us) {
  g->violations++;
  g->triggered++;
  pk_obj_raw(pk_obj_obj(g->details, e->node), e->name, NULL); /* its place */
  h->pending = true;
  h->n_at = h->v.n;
  h->a = diff;
  pk_obj_int(g->details, "last_timestamp", start_us);
}

/* mean(v[-window:]) - mean(v[-window-1:-2]): the "previous" window ends
 * two values before the last (the reference's slice, reproduced).  Both
 * lie in the last window + 1 readings, which the history keeps in memory;
 * when the previous one is empty (window 0 or 1) the difference is NaN and
 * never counts, so the means are not taken. */
static void gm_event(gpumem *g, const smrules_sys_event *e, int64_t start_us) {
  int64_t keep = g->s.window < INT64_MAX ? g->s.window + 1 : INT64_MAX;
  pk_series *h = history(g->values, e, keep);
  pk_hist *v = &h->v;
  pk_hist_push(v, e->value);
  g->datapoints = (int64_t)v->n;
  if (v->n > MAX_VALUES) {
    if (h->pending) /* the entry still reads the history being dropped */
      gm_entry(g, e->node, e->name, h);
    pk_hist_clear(v); /* Decision: only this GPU's history is dropped */
  }
  if ((int64_t)v->n <= keep) /* keep: window + 1 without overflow */
    return;
  size_t a, b, c, d;
  py_slice(v->n, -g->s.window, (int64_t)v->n, &a, &b);
  py_slice(v->n, -g->s.window - 1, -2, &c, &d);
  if (d == c)
    return;
  size_t at = a < c ? a : c; /* both slices lie in [at, n) */
  double *copy;
  const double *t = pk_hist_view(v, at, v->n, &copy);
  double diff =
      pk_np_mean(t + (a - at), b - a) - pk_np_mean(t + (c - at), d - c);
  free(copy);
  if (diff > g->s.increase && (int64_t)v->n > g->s.patience)
    gm_record(g, e, h, diff, start_us);
}

static int gm_window(void *e, const pr_window *w, bool *condition) {
  gpumem *g = e;
  for (size_t i = 0; i < w->nsys; i++)
    if (!strcmp(w->sys[i].dimension, "GPUMemoryUtilization"))
      gm_event(g, &w->sys[i], w->start_us);
  *condition = g->triggered > 0;
  return 0;
}

static void gm_report(void *e, pr_report *out) {
  gpumem *g = e;
  for (size_t i = 0; i < pk_dict_len(g->values); i++) {
    pk_entry *node = pk_dict_at(g->values, i);
    for (size_t k = 0; k < pk_dict_len(node->ptr); k++) {
      pk_entry *gpu = pk_dict_at(node->ptr, k);
      if (((pk_series *)gpu->ptr)->pending)
        gm_entry(g, node->key, gpu->key, gpu->ptr);
    }
  }
  out->triggered = g->triggered;
  out->violations = g->violations;
  out->datapoints = g->datapoints;
  out->details = g->details;
}

static void gm_params_text(const void *settings, char *buf, size_t n) {
  const gm_settings *s = settings;
  char a[40];
  pk_param_str(s->increase, true, a, sizeof a);
  snprintf(buf, n, "increase:%s\npatience:%lld\nwindow:%lld", a,
           (long long)s->patience, (long long)s->window);
}

const pr_engine_ops pr_gpu_memory_increase = {
    "GPUMemoryIncrease",
    "GPU memory use rising steadily (moving average up by more than "
    "`increase` points)",
    "system metrics (GPUMemoryUtilization)",
    gm_params,
    sizeof(gm_settings),
    true,
    gm_create,
    gm_window,
    gm_report,
    gm_params_text,
    gm_destroy};
