/* pr_batch_size.c - BatchSize (docs/profiler.md#batchsize): CPU, GPU and GPU
 * memory all lightly used.  The histories keep their last `window` readings
 * in memory (what each window reads); a report entry reads a whole prefix
 * back (pk_hist). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof_rules.h"

typedef struct bs_settings {
  double cpu_threshold_p95, gpu_threshold_p95, gpu_memory_threshold_p95;
  int64_t patience, window, scan_interval_us;
} bs_settings;

typedef struct batch {
  bs_settings s;
  pk_dict *gpu_memory, *gpu_util; /* node -> gpu -> history */
  pk_dict *cpu_util;              /* node -> per-timestamp averages */
  pk_dict *core_ids;              /* CPU names seen on any node */
  int64_t triggered, violations, datapoints;
  pk_obj *details;
} batch;

static const smrules_param params[] = {
    PR_PERCENT(SMRULES_PARAM_FLOAT, "cpu_threshold_p95", "70",
               SMRULES_OFFSET(bs_settings, cpu_threshold_p95),
               "95th percentile of total CPU use below this: CPU underused"),
    PR_PERCENT(SMRULES_PARAM_FLOAT, "gpu_threshold_p95", "70",
               SMRULES_OFFSET(bs_settings, gpu_threshold_p95),
               "95th percentile of GPU use below this: GPU underused"),
    PR_PERCENT(SMRULES_PARAM_FLOAT, "gpu_memory_threshold_p95", "70",
               SMRULES_OFFSET(bs_settings, gpu_memory_threshold_p95),
               "95th percentile of GPU memory below this: memory underused"),
    PR_NONNEG(SMRULES_PARAM_INT, "patience", "1000",
              SMRULES_OFFSET(bs_settings, patience),
              "CPU readings per node before the rule may trigger"),
    PR_NONNEG(SMRULES_PARAM_INT, "window", "500",
              SMRULES_OFFSET(bs_settings, window),
              "most recent readings the percentiles use"),
    PR_SCAN_INTERVAL(SMRULES_OFFSET(bs_settings, scan_interval_us)),
    SMRULES_END_PARAMS};

static void *create(const void *settings) {
  batch *b = calloc(1, sizeof *b);
  if (!b)
    abort();
  b->s = *(const bs_settings *)settings;
  b->gpu_memory = pk_series_dict2();
  b->gpu_util = pk_series_dict2();
  b->cpu_util = pk_series_dict();
  b->core_ids = pk_dict_new(false, NULL);
  b->details = pk_obj_new();
  return b;
}

static void destroy(void *e) {
  batch *b = e;
  pk_dict_free(b->gpu_memory);
  pk_dict_free(b->gpu_util);
  pk_dict_free(b->cpu_util);
  pk_dict_free(b->core_ids);
  pk_obj_free(b->details);
  free(b);
}

static double tail_q95(const pk_hist *v, int64_t window) {
  size_t from = pk_tail_start(v->n, window);
  double *copy; /* window 0 (all readings): read back */
  double q = pk_quantile(pk_hist_view(v, from, v->n, &copy), v->n - from, 0.95);
  free(copy);
  return q;
}

/* {p25, p50, p75, p95, upper, lower} of the first n values, as JSON; the
 * IQR uses `p25_for_iqr` when given (the memory box uses the GPU's p25:
 * the reference's quirk). */
static char *box(const pk_hist *v, size_t n, const double *p25_for_iqr,
                 double *p25_out) {
  double *s = pk_hist_sorted(v, n, NULL);
  double p25 = np_quantile_sorted(s, n, 0.25);
  double p75 = np_quantile_sorted(s, n, 0.75);
  pk_obj *o = pk_obj_new();
  pk_obj_num(o, "p25", p25);
  pk_obj_num(o, "p50", np_quantile_sorted(s, n, 0.50));
  pk_obj_num(o, "p75", p75);
  pk_obj_num(o, "p95", np_quantile_sorted(s, n, 0.95));
  double iqr = p75 - (p25_for_iqr ? *p25_for_iqr : p25);
  double upper = p75 + 1.5 * iqr, lower = p25 - 1.5 * iqr;
  pk_obj_num(o, "upper", pk_py_min(upper, np_quantile_sorted(s, n, 1)));
  pk_obj_num(o, "lower", pk_py_max(lower, np_quantile_sorted(s, n, 0.0)));
  if (p25_out)
    *p25_out = p25;
  free(s);
  char *text = pk_obj_render(o);
  pk_obj_free(o);
  return text;
}

/* A violation: the entries are computed from the history lengths noted
 * here when the report is read (only the last violation's show). */
static void record(batch *b, const char *node, const char *gpu, pk_series *cpu,
                   pk_series *gu, const pk_series *gm, int64_t last_timestamp) {
  b->triggered++;
  b->violations++;
  pk_obj *n = pk_obj_obj(b->details, node);
  char key[512];
  snprintf(key, sizeof key, "%s_memory", gpu);
  pk_obj_raw(n, "cpu", NULL);
  pk_obj_raw(n, gpu, NULL);
  pk_obj_raw(n, key, NULL);
  cpu->pending = true;
  cpu->n_at = cpu->v.n;
  gu->pending = true;
  gu->n_at = gu->v.n;
  gu->n_at2 = gm->v.n;
  pk_obj_int(b->details, "last_timestamp", last_timestamp);
}

static void entries(batch *b) {
  for (size_t i = 0; i < pk_dict_len(b->cpu_util); i++) {
    pk_entry *ne = pk_dict_at(b->cpu_util, i);
    pk_series *cpu = ne->ptr;
    pk_obj *n = pk_obj_get(b->details, ne->key);
    if (!n)
      continue; /* no violation on this node */
    if (cpu->pending)
      pk_obj_raw_take(n, "cpu", box(&cpu->v, cpu->n_at, NULL, NULL));
    cpu->pending = false;
    pk_entry *gn = pk_dict_get(b->gpu_util, ne->key);
    pk_entry *mn = pk_dict_get(b->gpu_memory, ne->key);
    for (size_t k = 0; gn && mn && k < pk_dict_len(gn->ptr); k++) {
      pk_entry *ge = pk_dict_at(gn->ptr, k);
      pk_series *gu = ge->ptr;
      pk_entry *me = pk_dict_get(mn->ptr, ge->key);
      if (!gu->pending || !me)
        continue;
      double p25;
      pk_obj_raw_take(n, ge->key, box(&gu->v, gu->n_at, NULL, &p25));
      char key[512];
      snprintf(key, sizeof key, "%s_memory", ge->key);
      const pk_series *gm = me->ptr;
      pk_obj_raw_take(n, key, box(&gm->v, gu->n_at2, &p25, NULL));
      gu->pending = false;
    }
  }
}

/* One node whose CPU p95 is low: every GPU with enough readings. */
static void check_gpus(batch *b, const char *node, pk_series *cpu,
                       int64_t last_timestamp) {
  pk_entry *gn = pk_dict_get(b->gpu_util, node);
  pk_entry *mn = pk_dict_get(b->gpu_memory, node);
  if (!gn)
    return; /* Decision: a node without GPU readings is skipped */
  for (size_t i = 0; i < pk_dict_len(gn->ptr); i++) {
    pk_entry *g = pk_dict_at(gn->ptr, i);
    pk_series *gu = g->ptr;
    if ((int64_t)gu->v.n <= b->s.window)
      continue;
    pk_entry *m = mn ? pk_dict_get(mn->ptr, g->key) : NULL;
    pk_series *gm = m ? m->ptr : NULL;
    if (!gm || gm->v.n == 0)
      continue; /* no memory readings for this GPU: skipped */
    double g95 = tail_q95(&gu->v, b->s.window);
    double m95 = tail_q95(&gm->v, b->s.window);
    if (g95 < b->s.gpu_threshold_p95 && m95 < b->s.gpu_memory_threshold_p95)
      record(b, node, g->key, cpu, gu, gm, last_timestamp);
  }
}

/* CPU totals per node and exact timestamp, averaged over every core name
 * seen so far on any node (the reference's quirks). */
static void collect(batch *b, const pr_window *w, pk_dict *total) {
  for (size_t i = 0; i < w->nsys; i++) {
    const smrules_sys_event *e = &w->sys[i];
    if (!strcmp(e->dimension, "GPUMemoryUtilization"))
      pk_hist_push(
          &pk_series_of2(b->gpu_memory, e->node, e->name, b->s.window)->v,
          e->value);
    if (!strcmp(e->dimension, "GPUUtilization"))
      pk_hist_push(
          &pk_series_of2(b->gpu_util, e->node, e->name, b->s.window)->v,
          e->value);
    if (!strcmp(e->dimension, "CPUUtilization")) {
      pk_dict_put(b->core_ids, e->name, NULL);
      pk_dict *per_ts = pk_dict_sub(total, e->node, true);
      pk_dict_nput(per_ts, e->timestamp, e->timestamp_is_int, NULL)->num +=
          e->value;
    }
  }
}

static int window(void *e, const pr_window *w, bool *condition) {
  batch *b = e;
  pk_dict *total = pk_dict_new(false, NULL);
  collect(b, w, total);
  double cores = (double)pk_dict_len(b->core_ids);
  for (size_t i = 0; i < pk_dict_len(total); i++) {
    pk_entry *n = pk_dict_at(total, i);
    pk_series *cpu = pk_series_of(b->cpu_util, n->key, b->s.window);
    for (size_t k = 0; k < pk_dict_len(n->ptr); k++)
      pk_hist_push(&cpu->v, pk_dict_at(n->ptr, k)->num / cores);
  }
  pk_dict_free(total);
  for (size_t i = 0; i < pk_dict_len(b->cpu_util); i++) {
    pk_entry *n = pk_dict_at(b->cpu_util, i);
    pk_series *cpu = n->ptr;
    int64_t nv = (int64_t)cpu->v.n;
    b->datapoints = nv;
    if (nv > b->s.window && nv > b->s.patience &&
        tail_q95(&cpu->v, b->s.window) < b->s.cpu_threshold_p95 &&
        pk_dict_len(b->gpu_util))
      check_gpus(b, n->key, cpu, w->last_timestamp);
  }
  *condition = b->triggered > 0;
  return 0;
}

static void report(void *e, pr_report *out) {
  batch *b = e;
  entries(b);
  out->triggered = b->triggered;
  out->violations = b->violations;
  out->datapoints = b->datapoints;
  out->details = b->details;
}

static void params_text(const void *settings, char *buf, size_t n) {
  const bs_settings *s = settings;
  char c[40], g[40], m[40];
  pk_param_str(s->cpu_threshold_p95, true, c, sizeof c);
  pk_param_str(s->gpu_threshold_p95, true, g, sizeof g);
  pk_param_str(s->gpu_memory_threshold_p95, true, m, sizeof m);
  snprintf(buf, n,
           "cpu_threshold_p95:%s\ngpu_threshold_p95:%s\n"
           "gpu_memory_threshold_p95:%s\npatience:%lld\nwindow:%lld",
           c, g, m, (long long)s->patience, (long long)s->window);
}

const pr_engine_ops pr_batch_size = {
    "BatchSize",
    "CPU, GPU and GPU memory all lightly used: the batch may be too small "
    "or the instance too big",
    "system metrics (CPUUtilization, GPUUtilization, GPUMemoryUtilization)",
    params,
    sizeof(bs_settings),
    true,
    create,
    window,
    report,
    params_text,
    destroy};
