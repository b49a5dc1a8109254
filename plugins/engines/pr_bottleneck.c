/* pr_bottleneck.c - CPUBottleneck and IOBottleneck
 * (docs/profiler.md#cpubottleneck, docs/profiler.md#iobottleneck): sampling
 * snapshots where GPUs idle while CPUs are busy (or wait for I/O), and the
 * framework breakdown around them.  The reference's map of bottleneck
 * snapshots grows with the job: only the snapshots of the window in hand
 * stay in memory, earlier ones are closed into pk_hist columns (pk_closed)
 * and read back when the report is rendered. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof_rules.h"

#define SNAPSHOT_WINDOW_S 0.02
#define MAX_BOTTLENECKS 1000000

typedef struct bn_settings {
  double threshold, gpu_threshold, high_threshold;
  int64_t patience, scan_interval_us;
} bn_settings;

typedef struct bottleneck {
  bool io;
  bn_settings s;
  int64_t datapoints, low_gpu, triggered;
  double snap; /* current snapshot: the Timestamp that opened it */
  bool snap_int;
  /* the reference's map snapshot -> (low GPU, high CPU readings): */
  pk_dict *bottlenecks; /* new snapshots of this window -> low GPU readings */
  pk_dict *cpus;        /* -> high CPU readings, same key order */
  pk_closed closed;     /* snapshots of earlier windows, then columns: */
  pk_hist c_gpus, c_cpus;
  pk_hist c_int; /* 1 when the key's first spelling was an int */
  pk_fwbuf buf;
  pk_obj *details;
} bottleneck;

static const smrules_param cpu_params[] = {
    PR_PERCENT(SMRULES_PARAM_FLOAT, "threshold", "50",
               SMRULES_OFFSET(bn_settings, threshold),
               "percent of snapshots that must be bottlenecks"),
    PR_PERCENT(SMRULES_PARAM_FLOAT, "gpu_threshold", "10",
               SMRULES_OFFSET(bn_settings, gpu_threshold),
               "GPU utilization below this is low"),
    PR_PERCENT(SMRULES_PARAM_FLOAT, "cpu_threshold", "90",
               SMRULES_OFFSET(bn_settings, high_threshold),
               "CPU utilization above this is high"),
    PR_NONNEG(SMRULES_PARAM_INT, "patience", "1000",
              SMRULES_OFFSET(bn_settings, patience),
              "snapshots to see before the rule may trigger"),
    PR_SCAN_INTERVAL(SMRULES_OFFSET(bn_settings, scan_interval_us)),
    SMRULES_END_PARAMS};

static const smrules_param io_params[] = {
    PR_PERCENT(SMRULES_PARAM_FLOAT, "threshold", "50",
               SMRULES_OFFSET(bn_settings, threshold),
               "percent of snapshots that must be bottlenecks"),
    PR_PERCENT(SMRULES_PARAM_FLOAT, "gpu_threshold", "10",
               SMRULES_OFFSET(bn_settings, gpu_threshold),
               "GPU utilization below this is low"),
    PR_PERCENT(SMRULES_PARAM_FLOAT, "io_threshold", "50",
               SMRULES_OFFSET(bn_settings, high_threshold),
               "I/O wait percentage above this is high"),
    PR_NONNEG(SMRULES_PARAM_INT, "patience", "1000",
              SMRULES_OFFSET(bn_settings, patience),
              "snapshots to see before the rule may trigger"),
    PR_SCAN_INTERVAL(SMRULES_OFFSET(bn_settings, scan_interval_us)),
    SMRULES_END_PARAMS};

static void *create(const void *settings, bool io) {
  bottleneck *b = calloc(1, sizeof *b);
  if (!b)
    abort();
  b->io = io;
  b->s = *(const bn_settings *)settings;
  b->snap_int = true; /* self.timestamp = 0 */
  b->bottlenecks = pk_dict_new(true, NULL);
  b->cpus = pk_dict_new(true, NULL);
  pk_closed_init(&b->closed);
  pk_fwbuf_init(&b->buf);
  b->details = pk_obj_new();
  return b;
}

static void *create_cpu(const void *s) {
  return create(s, false);
}
static void *create_io(const void *s) {
  return create(s, true);
}

static void destroy(void *e) {
  bottleneck *b = e;
  pk_dict_free(b->bottlenecks);
  pk_dict_free(b->cpus);
  pk_closed_free(&b->closed);
  pk_hist_free(&b->c_gpus);
  pk_hist_free(&b->c_cpus);
  pk_hist_free(&b->c_int);
  pk_fwbuf_free(&b->buf);
  pk_obj_free(b->details);
  free(b);
}

/* Per window: low GPU readings and high CPU (I/O) readings per snapshot,
 * in first-seen order. */
static void scan(bottleneck *b, const pr_window *w, pk_dict *gpu_low,
                 pk_dict *high) {
  const char *dim = b->io ? "I/OWaitPercentage" : "CPUUtilization";
  for (size_t i = 0; i < w->nsys; i++) {
    const smrules_sys_event *e = &w->sys[i];
    if (fabs(b->snap - e->timestamp) > SNAPSHOT_WINDOW_S) {
      b->snap = e->timestamp;
      b->snap_int = e->timestamp_is_int;
      b->datapoints++;
    }
    if (!strcmp(e->dimension, "GPUUtilization") &&
        e->value < b->s.gpu_threshold) {
      bool created;
      pk_entry *g = pk_dict_nput(gpu_low, b->snap, b->snap_int, &created);
      if (created)
        b->low_gpu++;
      g->num++;
    } else if (!strcmp(e->dimension, dim) && e->value > b->s.high_threshold) {
      pk_dict_nput(high, b->snap, b->snap_int, NULL)->num++;
    }
  }
}

static size_t map_len(const bottleneck *b) {
  return b->closed.keys.n + pk_dict_len(b->bottlenecks);
}

static void map_clear(bottleneck *b) {
  pk_dict_clear(b->bottlenecks);
  pk_dict_clear(b->cpus);
  pk_closed_clear(&b->closed);
  pk_hist_clear(&b->c_gpus);
  pk_hist_clear(&b->c_cpus);
  pk_hist_clear(&b->c_int);
}

/* map[snapshot] = (gpus, cpus): a snapshot seen again (it spans a window
 * boundary) keeps its place and first spelling. */
static void map_set(bottleneck *b, const pk_entry *snap, double gpus,
                    double cpus) {
  size_t at = pk_closed_find(&b->closed, snap->nkey);
  if (at) {
    pk_hist_set(&b->c_gpus, at - 1, gpus);
    pk_hist_set(&b->c_cpus, at - 1, cpus);
    return;
  }
  pk_dict_nput(b->bottlenecks, snap->nkey, snap->key_is_int, NULL)->num = gpus;
  pk_dict_nput(b->cpus, snap->nkey, snap->key_is_int, NULL)->num = cpus;
}

/* The window has ended: its snapshots move to the columns. */
static void map_close(bottleneck *b) {
  if (!pk_dict_len(b->bottlenecks))
    return;
  pk_closed_begin(&b->closed);
  for (size_t i = 0; i < pk_dict_len(b->bottlenecks); i++) {
    pk_entry *e = pk_dict_at(b->bottlenecks, i);
    pk_closed_push(&b->closed, e->nkey);
    pk_hist_push(&b->c_gpus, e->num);
    pk_hist_push(&b->c_cpus, pk_dict_at(b->cpus, i)->num);
    pk_hist_push(&b->c_int, e->key_is_int);
  }
  pk_dict_clear(b->bottlenecks);
  pk_dict_clear(b->cpus);
}

static void render_one(rk_text *t, bool first, double key, bool key_is_int,
                       double gpus, double cpus) {
  char k[40];
  pk_py_str(key, key_is_int, k, sizeof k);
  rk_text_printf(t, "%s", first ? "" : ",");
  pk_text_str(t, k);
  rk_text_printf(t, ":{\"GPUs\":%lld,\"CPUs\":%lld}", (long long)gpus,
                 (long long)cpus);
}

/* Details.bottlenecks is rendered from the map when the report is read
 * (the reference rewrites it from the whole map every window); the closed
 * snapshots are read back a chunk at a time. */
static char *render_bottlenecks(bottleneck *b) {
  rk_text t = {0};
  rk_text_printf(&t, "{");
  size_t n = b->closed.keys.n;
  for (size_t i = 0; i < n; i += PK_HIST_CHUNK) {
    size_t m = n - i < PK_HIST_CHUNK ? n - i : PK_HIST_CHUNK;
    double *ck, *cg, *cc, *ci;
    const double *k = pk_hist_view(&b->closed.keys, i, i + m, &ck);
    const double *g = pk_hist_view(&b->c_gpus, i, i + m, &cg);
    const double *c = pk_hist_view(&b->c_cpus, i, i + m, &cc);
    const double *in = pk_hist_view(&b->c_int, i, i + m, &ci);
    for (size_t j = 0; j < m; j++)
      render_one(&t, i + j == 0, k[j], in[j] != 0, g[j], c[j]);
    free(ck), free(cg), free(cc), free(ci);
  }
  for (size_t i = 0; i < pk_dict_len(b->bottlenecks); i++) {
    pk_entry *e = pk_dict_at(b->bottlenecks, i);
    render_one(&t, n + i == 0, e->nkey, e->key_is_int, e->num,
               pk_dict_at(b->cpus, i)->num);
  }
  rk_text_printf(&t, "}");
  return rk_text_take(&t);
}

static int breakdown(bottleneck *b, const pr_window *w, pk_dict *times) {
  const smrules_fw_event *ev;
  size_t n;
  if (pk_fw_events(w->fw, &ev, &n) != SMRULES_NO_TRIGGER)
    return SMRULES_ERR;
  for (size_t i = 0; i < pk_dict_len(times); i++) {
    double t = pk_dict_at(times, i)->nkey;
    pk_aggregate_framework_metrics(ev, n, b->details, &b->buf, t * 1000 * 1000,
                                   false, 0);
  }
  return 0;
}

static int window(void *e, const pr_window *w, bool *condition) {
  bottleneck *b = e;
  *condition = false;
  if (map_len(b) > MAX_BOTTLENECKS)
    map_clear(b);
  pk_dict *gpu_low = pk_dict_new(true, NULL), *high = pk_dict_new(true, NULL);
  pk_dict *times = pk_dict_new(true, NULL);
  scan(b, w, gpu_low, high);
  for (size_t i = 0; i < pk_dict_len(high); i++) {
    pk_entry *h = pk_dict_at(high, i);
    pk_entry *g = pk_dict_nget(gpu_low, h->nkey);
    if (!g)
      continue;
    /* the first spelling of a key stays, as in a Python dict */
    map_set(b, h, g->num, h->num);
    pk_dict_nput(times, h->nkey, h->key_is_int, NULL);
  }
  size_t nb = map_len(b);
  int rc = 0;
  if (b->datapoints > b->s.patience &&
      ((double)nb / (double)b->datapoints) * 100 > b->s.threshold) {
    b->triggered++;
    pk_obj_raw(b->details, "bottlenecks", NULL);
    if (nb)
      pk_obj_int(b->details, "low_gpu_utilization", b->low_gpu);
    rc = breakdown(b, w, times);
    *condition = true;
  } else {
    pk_obj_int(b->details, "low_gpu_utilization", b->low_gpu);
    pk_obj_raw(b->details, "bottlenecks", NULL);
  }
  pk_dict_free(gpu_low);
  pk_dict_free(high);
  pk_dict_free(times);
  map_close(b);
  return rc;
}

static void report(void *e, pr_report *out) {
  bottleneck *b = e;
  if (pk_obj_has(b->details, "bottlenecks"))
    pk_obj_raw_take(b->details, "bottlenecks", render_bottlenecks(b));
  out->triggered = b->triggered;
  out->violations = (int64_t)map_len(b);
  out->datapoints = b->datapoints;
  out->details = b->details;
}

static void params_text(const void *settings, char *buf, size_t n, bool io) {
  const bn_settings *s = settings;
  char t[40], h[40], g[40];
  pk_param_str(s->threshold, true, t, sizeof t);
  pk_param_str(s->high_threshold, true, h, sizeof h);
  pk_param_str(s->gpu_threshold, true, g, sizeof g);
  snprintf(buf, n, "threshold:%s\n%s:%s\ngpu_threshold:%s\npatience:%lld", t,
           io ? "io_threshold" : "cpu_threshold", h, g, (long long)s->patience);
}

static void params_cpu(const void *s, char *buf, size_t n) {
  params_text(s, buf, n, false);
}
static void params_io(const void *s, char *buf, size_t n) {
  params_text(s, buf, n, true);
}

const pr_engine_ops pr_cpu_bottleneck = {
    "CPUBottleneck",
    "GPUs idle while CPUs are busy: data loading or preprocessing keeps the "
    "GPUs waiting",
    "system metrics (GPUUtilization, CPUUtilization), framework events",
    cpu_params,
    sizeof(bn_settings),
    true,
    create_cpu,
    window,
    report,
    params_cpu,
    destroy};

const pr_engine_ops pr_io_bottleneck = {
    "IOBottleneck",
    "GPUs idle while the CPUs wait for I/O: storage keeps the GPUs waiting",
    "system metrics (GPUUtilization, I/OWaitPercentage), framework events",
    io_params,
    sizeof(bn_settings),
    true,
    create_io,
    window,
    report,
    params_io,
    destroy};
