/* Dataloader (docs/profiler-framework-rules.md#dataloader): the median number
 * of parallel data-loading processes (distinct pids of
 * DataLoaderWorker/DataLoaderIter events per second) compared with the number
 * of CPU cores, plus the data loader's settings and timings for ProfilerReport.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_rules.h"
#include "fwkit.h"
#include "smrules/rulekit.h"

/* The function table this rule was bound to (fw_rules.h): the host's, or
 * ProfilerReport's own.  Not rulekit's rk_api, which is always the
 * host's. */
static const smrules_api *sr_api;

typedef struct settings {
  double min_threshold, max_threshold; /* percent of the cores */
  int64_t patience;
  int64_t scan_interval_us;
} settings;

static const smrules_param params[] = {
    SMRULES_FLOAT_PARAM(
        "min_threshold", "70", settings, min_threshold,
        "fewest parallel data loaders, in percent of the CPU cores",
        SMRULES_MIN(0)),
    SMRULES_FLOAT_PARAM(
        "max_threshold", "200", settings, max_threshold,
        "most parallel data loaders, in percent of the CPU cores",
        SMRULES_MIN(0)),
    SMRULES_INT_PARAM("patience", "10", settings, patience,
                      "seconds with data loading to see before checking",
                      SMRULES_MIN(0)),
    SMRULES_INT_PARAM(
        "scan_interval_us", "60000000", settings, scan_interval_us,
        "length of one evaluation window in microseconds", SMRULES_MIN(0)),
    SMRULES_END_PARAMS};

/* A Details value that is set or not (Python None). */
typedef struct opt_raw {
  bool set;
  char *json;
} opt_raw;

typedef struct state {
  settings s;
  fk_map cpus;    /* CPU names, frozen once non-empty */
  fk_dv parallel; /* distinct loader pids per second */
  fk_dv times;    /* data-loading times, seconds */
  opt_raw pin_memory, num_workers;
  int prefetch; /* -1 unset (None), 0 false, 1 true */
  /* values as of the last Details write (a later window without loader
   * events does not rewrite them) */
  char *det_pin_memory, *det_num_workers;
  bool det_prefetch;
  int64_t datapoints, violations, triggered;
  int64_t dataloaders; /* int(median(parallel)) of the last write */
  bool written;        /* Details written at least once */
  fk_map order;        /* Details keys in first-write order */
} state;

static int init(smrules_ctx *ctx, const void *s, void **out) {
  state *st = calloc(1, sizeof *st);
  if (!st) {
    sr_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = *(const settings *)s;
  st->prefetch = 0;
  *out = st;
  return 0;
}

static void destroy(void *p) {
  state *st = p;
  fk_map_free(&st->cpus);
  fk_dv_free(&st->parallel);
  fk_dv_free(&st->times);
  free(st->pin_memory.json);
  free(st->num_workers.json);
  free(st->det_pin_memory);
  free(st->det_num_workers);
  fk_map_free(&st->order);
  free(st);
}

static void set_raw(opt_raw *o, const char *json) {
  free(o->json);
  o->json = fk_strdup(json);
  o->set = true;
}

/* Seconds of this window that had loader events, and the distinct pids of
 * each (keys: the pid's JSON text, so 12 and "12" differ as in Python). */
typedef struct seconds {
  fk_map secs;
  fk_map *pids;
} seconds;

static void seconds_free(seconds *w) {
  for (size_t i = 0; i < w->secs.n; i++)
    fk_map_free(&w->pids[i]);
  free(w->pids);
  fk_map_free(&w->secs);
}

static void loader_event(smrules_ctx *ctx, state *st, seconds *w,
                         const smrules_fw_event *e) {
  st->datapoints++;
  fk_dv_push(&st->times, (e->end_us - e->start_us) / 1e6);
  char key[32];
  snprintf(key, sizeof key, "%lld", (long long)trunc(e->start_us / 1e6));
  bool added;
  size_t i = fk_map_add(&w->secs, key, &added);
  if (added) {
    w->pids = fk_xrealloc(w->pids, w->secs.cap, sizeof *w->pids);
    memset(&w->pids[i], 0, sizeof w->pids[i]);
  }
  smrules_arg pid;
  sr_api->fw_arg(ctx, e, "pid", &pid); /* returns the type */
  if (pid.type != SMRULES_ARG_MISSING)
    fk_map_add(&w->pids[i], pid.json, NULL);
  st->prefetch = -1;
}

static void init_event(smrules_ctx *ctx, state *st, const smrules_fw_event *e) {
  smrules_arg a;
  if (sr_api->fw_arg(ctx, e, "pin_memory", &a) != SMRULES_ARG_MISSING)
    set_raw(&st->pin_memory, a.json);
  if (sr_api->fw_arg(ctx, e, "num_workers", &a) != SMRULES_ARG_MISSING)
    set_raw(&st->num_workers, a.json);
}

static void scan_framework(smrules_ctx *ctx, state *st, seconds *w,
                           const smrules_fw_event *ev, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const smrules_fw_event *e = &ev[i];
    if (st->parallel.n > 1000)
      st->parallel.n = 0;
    if (strcmp(e->phase, "DataLoaderIterInitialize") == 0)
      init_event(ctx, st, e);
    if (strcmp(e->phase, "DataLoaderWorker") == 0 ||
        strcmp(e->phase, "DataLoaderIter") == 0)
      loader_event(ctx, st, w, e);
    if (strstr(e->name, "Prefetch"))
      st->prefetch = 1;
  }
}

static void scan_cpus(state *st, const smrules_sys_event *ev, size_t n) {
  if (st->cpus.n)
    return;
  for (size_t i = 0; i < n; i++)
    if (strcmp(ev[i].dimension, "CPUUtilization") == 0)
      fk_map_add(&st->cpus, ev[i].name, NULL);
}

/* The loader counts of this window; checks them against the cores. */
static void evaluate(state *st, const seconds *w) {
  for (size_t i = 0; i < w->secs.n; i++)
    fk_dv_push(&st->parallel, (double)w->pids[i].n);
  double *s = fk_sorted(st->parallel.v, st->parallel.n);
  st->dataloaders = (int64_t)np_quantile_sorted(s, st->parallel.n, 0.5);
  free(s);
  double cores = (double)st->cpus.n, med = (double)st->dataloaders;
  bool ready = (int64_t)st->parallel.n > st->s.patience;
  if (ready && med < cores * st->s.min_threshold / 100)
    st->violations++;
  if (ready && med > cores * st->s.max_threshold / 100)
    st->violations++;
  /* Details keys in the reference's write order, values as of now */
  if (st->pin_memory.set) {
    fk_map_add(&st->order, "pin_memory", NULL);
    free(st->det_pin_memory);
    st->det_pin_memory = fk_strdup(st->pin_memory.json);
  }
  if (st->num_workers.set) {
    fk_map_add(&st->order, "num_workers", NULL);
    free(st->det_num_workers);
    st->det_num_workers = fk_strdup(st->num_workers.json);
  }
  if (st->prefetch >= 0) {
    fk_map_add(&st->order, "prefetch", NULL);
    st->det_prefetch = st->prefetch > 0;
  }
  fk_map_add(&st->order, "cores", NULL);
  fk_map_add(&st->order, "dataloaders", NULL);
  fk_map_add(&st->order, "dataloading_time", NULL);
  st->written = true;
}

static void write_times(smrules_json *d, const state *st) {
  smrules_json *t = sr_api->json_obj(d, "dataloading_time");
  size_t n = st->times.n;
  if (!n)
    return;
  double *s = fk_sorted(st->times.v, n);
  sr_api->json_num(t, "p25", fk_percentile_sorted(s, n, 25));
  sr_api->json_num(t, "p50", fk_percentile_sorted(s, n, 50));
  sr_api->json_num(t, "p95", fk_percentile_sorted(s, n, 95));
  free(s);
  int64_t counts[100];
  double edges[101];
  fk_histogram(st->times.v, n, 100, counts, edges);
  sr_api->json_ints(t, "probs", counts, 100);
  sr_api->json_nums(t, "binedges", edges, 101);
}

/* Keys keep their first-write position; values are the latest (a key is
 * never removed in the reference, e.g. prefetch once written). */
static void write_details(smrules_json *d, const state *st) {
  for (size_t i = 0; i < st->order.n; i++) {
    const char *k = st->order.keys[i];
    if (strcmp(k, "pin_memory") == 0)
      sr_api->json_raw(d, k, st->det_pin_memory);
    else if (strcmp(k, "num_workers") == 0)
      sr_api->json_raw(d, k, st->det_num_workers);
    else if (strcmp(k, "prefetch") == 0)
      sr_api->json_bool(d, k, st->det_prefetch);
    else if (strcmp(k, "cores") == 0)
      sr_api->json_int(d, k, (int64_t)st->cpus.n);
    else if (strcmp(k, "dataloaders") == 0)
      sr_api->json_int(d, k, st->dataloaders);
    else
      write_times(d, st);
  }
}

static void write_report(smrules_ctx *ctx, const state *st) {
  sr_api->report_set(ctx, st->triggered, st->violations, st->datapoints);
  write_details(sr_api->details_reset(ctx), st);
  char a[64], b[64], text[160];
  const char *mn = sr_api->param_text(ctx, "min_threshold");
  const char *mx = sr_api->param_text(ctx, "max_threshold");
  sr_api->py_str(st->s.min_threshold, false, a, sizeof a);
  sr_api->py_str(st->s.max_threshold, false, b, sizeof b);
  snprintf(text, sizeof text, "min_threshold:%s\nmax_threshold:%s", mn ? mn : a,
           mx ? mx : b);
  sr_api->rule_parameters(ctx, text);
}

static int invoke(smrules_ctx *ctx, void *p, int64_t step) {
  state *st = p;
  int64_t k, start, end;
  if (sr_api->window(ctx, &k, &start, &end) != SMRULES_NO_TRIGGER) {
    sr_api->fail(ctx, "Dataloader is a profiler rule: no window");
    return SMRULES_ERR;
  }
  const smrules_sys_event *sys;
  const smrules_fw_event *fw;
  size_t nsys, nfw;
  if (sr_api->system_events(ctx, start, end, &sys, &nsys) < 0)
    return SMRULES_ERR;
  scan_cpus(st, sys, nsys);
  if (sr_api->framework_events(ctx, start, end, &fw, &nfw) < 0)
    return SMRULES_ERR;
  seconds w = {0};
  scan_framework(ctx, st, &w, fw, nfw);
  if (w.secs.n)
    evaluate(st, &w);
  seconds_free(&w);
  if (st->violations > 0)
    st->triggered = 1;
  write_report(ctx, st);
  return st->violations > 0 ? SMRULES_TRIGGERED : SMRULES_NO_TRIGGER;
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "Dataloader",
    .description = "too few or too many parallel data loaders for the CPU "
                   "cores",
    .kind = SMRULES_KIND_PROFILER,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "profiler: CPUUtilization names (cores) and PyTorch "
                   "DataLoader framework events",
    .init = init,
    .invoke_at_step = invoke,
    .destroy = destroy,
};

const smrules_rule *fw_dataloader(const smrules_api *api) {
  sr_api = api;
  return &rule;
}
