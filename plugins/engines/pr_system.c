/* pr_system.c - LoadBalancing and OverallSystemUsage
 * (docs/profiler.md#loadbalancing, docs/profiler.md#overallsystemusage). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof_rules.h"

#define MAX_VALUES 1000000

/* ---------------------------------------------------------- LoadBalancing */

#define LB_EDGES 50 /* np.arange(0, 100, 2): 0, 2, ..., 98 */

typedef struct lb_settings {
  double threshold;
  int64_t patience, scan_interval_us;
  bool compare_pairs;
} lb_settings;

typedef struct balance {
  lb_settings s;
  pk_dict *gpus; /* node -> gpu -> history, with its running histogram */
  int64_t triggered, violations, datapoints;
  pk_obj *details;
} balance;

static const smrules_param lb_params[] = {
    PR_PERCENT(SMRULES_PARAM_FLOAT, "threshold", "0.2",
               SMRULES_OFFSET(lb_settings, threshold),
               "Jensen-Shannon distance above which two GPUs' workloads "
               "differ (only with compare_pairs)"),
    PR_NONNEG(SMRULES_PARAM_INT, "patience", "1000",
              SMRULES_OFFSET(lb_settings, patience),
              "readings per GPU before GPUs are compared"),
    PR_SCAN_INTERVAL(SMRULES_OFFSET(lb_settings, scan_interval_us)),
    SMRULES_BOOL_PARAM(
        "compare_pairs", "false", lb_settings, compare_pairs,
        "smrules extension: compare GPU pairs (the reference never does, so "
        "by default the rule only reports workloads and never triggers)"),
    SMRULES_END_PARAMS};

static void *lb_create(const void *settings) {
  balance *b = calloc(1, sizeof *b);
  if (!b)
    abort();
  b->s = *(const lb_settings *)settings;
  b->gpus = pk_series_dict2();
  b->details = pk_obj_new();
  return b;
}

static void lb_destroy(void *e) {
  balance *b = e;
  pk_dict_free(b->gpus);
  pk_obj_free(b->details);
  free(b);
}

/* np.histogram(values, bins=np.arange(0, 100, 2)), kept up to date as
 * values arrive (bin i: [2i, 2i+2), the last bin [96, 98] closed). */
static void hist_add(pk_series *h, double x) {
  if (!h->hist) {
    h->hist = calloc(LB_EDGES - 1, sizeof *h->hist);
    if (!h->hist)
      abort();
  }
  if (!(x >= 0 && x <= 2.0 * (LB_EDGES - 1)))
    return;                    /* outside [0, 98] (or NaN): not counted */
  int bin = (int)floor(x / 2); /* x / 2 is exact: edges are even integers */
  h->hist[bin < LB_EDGES - 1 ? bin : LB_EDGES - 2]++;
}

static void histogram(const pk_series *s, double *h) {
  for (int i = 0; i < LB_EDGES - 1; i++)
    h[i] = s->hist ? (double)s->hist[i] : 0;
}

/* scipy.stats.entropy(p, q): both normalised to sum 1, natural log. */
static double kl(const double *p, const double *q, size_t n) {
  double sp = 0, sq = 0, s = 0;
  for (size_t i = 0; i < n; i++)
    sp += p[i], sq += q[i];
  for (size_t i = 0; i < n; i++) {
    double x = p[i] / sp, y = q[i] / sq;
    if (x > 0 && y > 0)
      s += x * log(x / y);
    else if (x > 0)
      return INFINITY;
  }
  return s;
}

static double js_distance(const double *h1, const double *h2) {
  double m[LB_EDGES - 1];
  for (int i = 0; i < LB_EDGES - 1; i++)
    m[i] = (h1[i] + h2[i]) / 2;
  return sqrt((kl(h1, m, LB_EDGES - 1) + kl(h2, m, LB_EDGES - 1)) / 2);
}

/* compare_pairs: the comparison the reference intended. */
static void compare(balance *b, const char *node1, const char *gpu1,
                    const pk_series *v1, const char *key2,
                    const pk_series *v2) {
  if ((int64_t)v1->count <= b->s.patience)
    return;
  double h1[LB_EDGES - 1], h2[LB_EDGES - 1];
  histogram(v1, h1);
  histogram(v2, h2);
  double d = js_distance(h1, h2);
  if (!(d > b->s.threshold))
    return;
  b->violations++;
  b->triggered++;
  pk_obj *dist = pk_obj_obj(pk_obj_obj(b->details, node1), "distances");
  pk_obj_num(pk_obj_obj(dist, gpu1), key2, d);
}

static void compare_node_pair(balance *b, pk_entry *n1, pk_entry *n2) {
  pk_dict *g1 = n1->ptr, *g2 = n2->ptr;
  for (size_t i = 0; i < pk_dict_len(g1); i++) {
    pk_entry *a = pk_dict_at(g1, i);
    if (n1 == n2) {
      for (size_t k = i + 1; k < pk_dict_len(g1); k++)
        compare(b, n1->key, a->key, a->ptr, pk_dict_at(g1, k)->key,
                pk_dict_at(g1, k)->ptr);
      continue;
    }
    pk_entry *same = pk_dict_get(g2, a->key);
    if (!same)
      continue;
    char key[512];
    snprintf(key, sizeof key, "%s:%s", n2->key, same->key);
    compare(b, n1->key, a->key, a->ptr, key, same->ptr);
  }
}

static int lb_window(void *e, const pr_window *w, bool *condition) {
  balance *b = e;
  for (size_t i = 0; i < w->nsys; i++) {
    const smrules_sys_event *ev = &w->sys[i];
    if (strcmp(ev->dimension, "GPUUtilization") != 0)
      continue;
    pk_series *h = pk_series_of2(b->gpus, ev->node, ev->name, 0);
    h->count++; /* only the count and the histogram are needed */
    hist_add(h, ev->value);
    b->datapoints = (int64_t)h->count;
    if (h->count > MAX_VALUES)
      pk_dict_clear(b->gpus);
  }
  /* workloads of every GPU of every node (node1 of each node pair) */
  for (size_t i = 0; i < pk_dict_len(b->gpus); i++) {
    pk_entry *n = pk_dict_at(b->gpus, i);
    pk_obj *wl = pk_obj_obj(pk_obj_obj(b->details, n->key), "workloads");
    for (size_t k = 0; k < pk_dict_len(n->ptr); k++) {
      double h[LB_EDGES - 1];
      histogram(pk_dict_at(n->ptr, k)->ptr, h);
      pk_obj_list(wl, pk_dict_at(n->ptr, k)->key, h, LB_EDGES - 1, true);
    }
  }
  if (b->s.compare_pairs)
    for (size_t i = 0; i < pk_dict_len(b->gpus); i++)
      for (size_t k = i; k < pk_dict_len(b->gpus); k++)
        compare_node_pair(b, pk_dict_at(b->gpus, i), pk_dict_at(b->gpus, k));
  *condition = b->triggered > 0;
  return 0;
}

static void lb_report(void *e, pr_report *out) {
  balance *b = e;
  out->triggered = b->triggered;
  out->violations = b->violations;
  out->datapoints = b->datapoints;
  out->details = b->details;
}

static void lb_params_text(const void *settings, char *buf, size_t n) {
  const lb_settings *s = settings;
  char t[40];
  pk_param_str(s->threshold, true, t, sizeof t);
  snprintf(buf, n, "threshold:%s\npatience:%lld", t, (long long)s->patience);
}

const pr_engine_ops pr_load_balancing = {
    "LoadBalancing",
    "GPU utilization distributions per GPU (workload balance); compares "
    "GPUs only with compare_pairs",
    "system metrics (GPUUtilization)",
    lb_params,
    sizeof(lb_settings),
    true,
    lb_create,
    lb_window,
    lb_report,
    lb_params_text,
    lb_destroy};

/* ----------------------------------------------------- OverallSystemUsage */

typedef struct os_settings {
  int64_t scan_interval_us;
} os_settings;

enum { M_NETWORK, M_GPU, M_CPU, M_CPU_MEMORY, M_GPU_MEMORY, M_IO, M_COUNT };

/* The reference's per-node dict timestamp -> sum of one metric.  Readings
 * of the window in hand add up in `open`; when the window ends its
 * timestamps are closed (pk_closed) and their sums appended to `sums`, in
 * the dict's order.  A reading whose timestamp is closed (one exactly on
 * the boundary is seen by both windows) adds to its closed sum, as the
 * dict would. */
typedef struct os_sums {
  pk_dict *open; /* timestamp -> sum, this window */
  pk_closed closed;
  pk_hist sums;
} os_sums;

typedef struct usage {
  pk_dict *m[M_COUNT]; /* node -> os_sums */
  pk_dict *gpu_ids, *core_ids;
  int64_t datapoints;
  bool evaluated;
  pk_obj *details;
} usage;

static const smrules_param os_params[] = {
    PR_SCAN_INTERVAL(SMRULES_OFFSET(os_settings, scan_interval_us)),
    SMRULES_END_PARAMS};

static void sums_free(void *p) {
  os_sums *s = p;
  pk_dict_free(s->open);
  pk_closed_free(&s->closed);
  pk_hist_free(&s->sums);
  free(s);
}

static os_sums *sums_of(pk_dict *m, const char *node) {
  bool created;
  pk_entry *e = pk_dict_put(m, node, &created);
  if (created) {
    os_sums *s = calloc(1, sizeof *s);
    if (!s)
      abort();
    s->open = pk_dict_new(true, NULL);
    pk_closed_init(&s->closed);
    e->ptr = s;
  }
  return e->ptr;
}

static size_t sums_len(const os_sums *s) {
  return s->sums.n + pk_dict_len(s->open);
}

static void add(pk_dict *m, const smrules_sys_event *e) {
  os_sums *s = sums_of(m, e->node);
  size_t at = pk_closed_find(&s->closed, e->timestamp);
  if (at)
    pk_hist_set(&s->sums, at - 1, pk_hist_at(&s->sums, at - 1) + e->value);
  else
    pk_dict_nput(s->open, e->timestamp, e->timestamp_is_int, NULL)->num +=
        e->value;
}

/* The window has ended: its timestamps move to the histories. */
static void close_window(usage *u) {
  for (int i = 0; i < M_COUNT; i++)
    for (size_t k = 0; k < pk_dict_len(u->m[i]); k++) {
      os_sums *s = pk_dict_at(u->m[i], k)->ptr;
      if (!pk_dict_len(s->open))
        continue; /* the last close stays the one to look at first */
      pk_closed_begin(&s->closed);
      for (size_t j = 0; j < pk_dict_len(s->open); j++) {
        pk_entry *e = pk_dict_at(s->open, j);
        pk_closed_push(&s->closed, e->nkey);
        pk_hist_push(&s->sums, e->num);
      }
      pk_dict_clear(s->open);
    }
}

static void *os_create(const void *settings) {
  (void)settings;
  usage *u = calloc(1, sizeof *u);
  if (!u)
    abort();
  for (int i = 0; i < M_COUNT; i++)
    u->m[i] = pk_dict_new(false, sums_free);
  u->gpu_ids = pk_dict_new(false, NULL);
  u->core_ids = pk_dict_new(false, NULL);
  u->details = pk_obj_new();
  return u;
}

static void os_destroy(void *e) {
  usage *u = e;
  for (int i = 0; i < M_COUNT; i++)
    pk_dict_free(u->m[i]);
  pk_dict_free(u->gpu_ids);
  pk_dict_free(u->core_ids);
  pk_obj_free(u->details);
  free(u);
}

/* The conditions are independent (docs/profiler.md#overallsystemusage). */
static void os_event(usage *u, const smrules_sys_event *e) {
  const char *d = e->dimension;
  if (!strcmp(d, "GPUMemoryUtilization"))
    add(u->m[M_GPU_MEMORY], e);
  if (!strcmp(d, "GPUUtilization")) {
    pk_dict_put(u->gpu_ids, e->name, NULL);
    add(u->m[M_GPU], e);
  }
  if (e->has_name && !strcmp(e->name, "MemoryUsedPercent"))
    add(u->m[M_CPU_MEMORY], e);
  if (!strcmp(d, "CPUUtilization")) {
    pk_dict_put(u->core_ids, e->name, NULL);
    add(u->m[M_CPU], e);
  }
  if (!strcmp(d, "Algorithm"))
    add(u->m[M_NETWORK], e);
  if (!strcmp(d, "I/OWaitPercentage"))
    add(u->m[M_IO], e);
}

/* stat / n, 0 unless > 0 (an int 0), rounded like np.round(v, 2). */
static void stat_value(pk_obj *o, const char *key, double v) {
  if (v > 0)
    pk_obj_num(o, key, pk_np_round(v, 2));
  else
    pk_obj_int(o, key, 0);
}

/* The sums in the dict's order (closed, then open), malloc'ed. */
static double *sums_values(const os_sums *s, size_t *k) {
  size_t nc = s->sums.n, no = pk_dict_len(s->open);
  double *v = pk_hist_copy(&s->sums, 0, nc);
  if (no) {
    v = realloc(v, (nc + no) * sizeof *v);
    if (!v)
      abort();
    for (size_t j = 0; j < no; j++)
      v[nc + j] = pk_dict_at(s->open, j)->num;
  }
  *k = nc + no;
  return v;
}

static void record(usage *u, pk_dict *values, const char *name, double n) {
  pk_obj *d = pk_obj_obj(u->details, name);
  for (size_t i = 0; i < pk_dict_len(values); i++) {
    pk_entry *node = pk_dict_at(values, i);
    size_t k;
    double *s = sums_values(node->ptr, &k);
    double mx = pk_np_max(s, k), mn = pk_np_min(s, k);
    pk_sort(s, k); /* in place: one copy of the sums at a time */
    pk_obj *o = pk_obj_new_obj(d, node->key);
    stat_value(o, "max", mx / n);
    stat_value(o, "p99", np_quantile_sorted(s, k, 0.99) / n);
    stat_value(o, "p95", np_quantile_sorted(s, k, 0.95) / n);
    stat_value(o, "p50", np_quantile_sorted(s, k, 0.50) / n);
    stat_value(o, "min", mn / n);
    free(s);
  }
}

/* Details from the maps as they stand.  The reference rewrites them every
 * window; only the last rewrite shows, so they are made when the report is
 * read, and once more before the maps are dropped (more than 1 000 000
 * timestamps). */
static void record_all(usage *u) {
  double gpus = (double)pk_dict_len(u->gpu_ids);
  double cores = (double)pk_dict_len(u->core_ids);
  record(u, u->m[M_NETWORK], "Network", 1);
  record(u, u->m[M_GPU], "GPU", gpus);
  record(u, u->m[M_CPU], "CPU", cores);
  record(u, u->m[M_CPU_MEMORY], "CPU memory", 1);
  record(u, u->m[M_GPU_MEMORY], "GPU memory", gpus);
  record(u, u->m[M_IO], "I/O", cores);
}

static size_t first_node_timestamps(usage *u) {
  if (!pk_dict_len(u->m[M_CPU]))
    return 0;
  return sums_len(pk_dict_at(u->m[M_CPU], 0)->ptr);
}

static int os_window(void *e, const pr_window *w, bool *condition) {
  usage *u = e;
  if (u->evaluated && first_node_timestamps(u) + w->nsys > MAX_VALUES)
    record_all(u); /* the Details the previous window left */
  u->evaluated = true;
  for (size_t i = 0; i < w->nsys; i++)
    os_event(u, &w->sys[i]);
  close_window(u);
  if (pk_dict_len(u->m[M_CPU])) {
    size_t nv = first_node_timestamps(u);
    u->datapoints = (int64_t)nv;
    if (nv > MAX_VALUES)
      for (int i = 0; i < M_COUNT; i++)
        pk_dict_clear(u->m[i]);
  }
  *condition = false;
  return 0;
}

static void os_report(void *e, pr_report *out) {
  usage *u = e;
  if (u->evaluated)
    record_all(u);
  out->triggered = 0;
  out->violations = 0;
  out->datapoints = u->datapoints;
  out->details = u->details;
}

static void os_params_text(const void *settings, char *buf, size_t n) {
  (void)settings;
  if (n)
    buf[0] = '\0';
}

const pr_engine_ops pr_overall_system_usage = {
    "OverallSystemUsage",
    "per-node statistics of CPU, GPU, memory, network and I/O use (never "
    "triggers)",
    "system metrics",
    os_params,
    sizeof(os_settings),
    true,
    os_create,
    os_window,
    os_report,
    os_params_text,
    os_destroy};
