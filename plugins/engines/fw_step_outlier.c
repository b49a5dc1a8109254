/* StepOutlier (docs/profiler-framework-rules.md#stepoutlier): steps whose
 * duration exceeds the mean by more than `stddev` standard deviations, per node
 * and step phase, with a framework breakdown
 * (docs/rule-semantics.md#profiler-rules-the-framework-metric-breakdown) of the
 * outlier steps. */
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
  double stddev;
  const char *mode;
  int64_t n_outliers;
  int64_t scan_interval_us;
} settings;

static const smrules_param params[] = {
    SMRULES_FLOAT_PARAM(
        "stddev", "3", settings, stddev,
        "standard deviations above the mean that make a step an outlier",
        SMRULES_MIN(0)),
    SMRULES_STRING_PARAM("mode", NULL, settings, mode,
                         "also count events with exactly this name as steps"),
    SMRULES_INT_PARAM("n_outliers", "10", settings, n_outliers,
                      "outliers tolerated before the rule triggers",
                      SMRULES_MIN(0)),
    SMRULES_INT_PARAM(
        "scan_interval_us", "60000000", settings, scan_interval_us,
        "length of one evaluation window in microseconds", SMRULES_MIN(0)),
    SMRULES_END_PARAMS};

/* Durations (seconds) and step numbers (JSON text) of one step phase. */
typedef struct series {
  fk_dv dur;
  char **nums;
  size_t nnums, capnums;
} series;

/* Details.step_details[node] as last written. */
typedef struct step_details {
  double mean, max, p99, p95, p50, min, stddev;
  int64_t outliers;
  char *phase;
  int64_t counts[100];
  double edges[101];
  char *step_numbers; /* JSON array text */
} step_details;

typedef struct node {
  fk_map names; /* step phase names, first-seen order */
  series *s;
  fk_map steps; /* intervals: step number (JSON text) -> first (start, end) */
  double *istart, *iend;
  bool has_details;
  step_details det;
} node;

typedef struct state {
  settings s;
  fk_map nodes;
  node *n;
  fk_map det_order; /* nodes in first step_details write order */
  fk_breakdown b;
  fk_map order; /* Details keys after step_details, first-write order */
  int64_t datapoints, violations, triggered;
} state;

static int init(smrules_ctx *ctx, const void *s, void **out) {
  state *st = calloc(1, sizeof *st);
  if (!st) {
    sr_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = *(const settings *)s;
  *out = st;
  return 0;
}

static void node_free(node *n) {
  for (size_t i = 0; i < n->names.n; i++) {
    fk_dv_free(&n->s[i].dur);
    for (size_t k = 0; k < n->s[i].nnums; k++)
      free(n->s[i].nums[k]);
    free(n->s[i].nums);
  }
  free(n->s);
  fk_map_free(&n->names);
  fk_map_free(&n->steps);
  free(n->istart);
  free(n->iend);
  free(n->det.phase);
  free(n->det.step_numbers);
}

static void destroy(void *p) {
  state *st = p;
  for (size_t i = 0; i < st->nodes.n; i++)
    node_free(&st->n[i]);
  free(st->n);
  fk_map_free(&st->nodes);
  fk_map_free(&st->det_order);
  fk_breakdown_free(&st->b);
  fk_map_free(&st->order);
  free(st);
}

static node *get_node(state *st, const char *id) {
  bool added;
  size_t i = fk_map_add(&st->nodes, id, &added);
  if (added) {
    st->n = fk_xrealloc(st->n, st->nodes.cap, sizeof *st->n);
    memset(&st->n[i], 0, sizeof st->n[i]);
  }
  return &st->n[i];
}

static series *get_series(node *n, const char *name) {
  bool added;
  size_t i = fk_map_add(&n->names, name, &added);
  if (added) {
    n->s = fk_xrealloc(n->s, n->names.cap, sizeof *n->s);
    memset(&n->s[i], 0, sizeof n->s[i]);
  }
  return &n->s[i];
}

static void add_interval(node *n, const char *step, double start, double end) {
  bool added;
  size_t i = fk_map_add(&n->steps, step, &added);
  if (!added)
    return; /* setdefault: the first interval of a step number stays */
  n->istart = fk_xrealloc(n->istart, n->steps.cap, sizeof *n->istart);
  n->iend = fk_xrealloc(n->iend, n->steps.cap, sizeof *n->iend);
  n->istart[i] = start;
  n->iend[i] = end;
}

static bool is_step(const settings *s, const smrules_fw_event *e) {
  return strstr(e->name, "Step:ModeKeys") ||
         (s->mode && strcmp(e->name, s->mode) == 0);
}

static void collect(smrules_ctx *ctx, state *st, const smrules_fw_event *ev,
                    size_t nev) {
  for (size_t i = 0; i < nev; i++) {
    const smrules_fw_event *e = &ev[i];
    if (!is_step(&st->s, e))
      continue;
    st->datapoints++;
    node *n = get_node(st, e->node);
    series *s = get_series(n, e->name);
    fk_dv_push(&s->dur, (e->end_us - e->start_us) / 1e6);
    smrules_arg a;
    /* no step_num: None (the reference would fail; Decision R28) */
    const char *num =
        sr_api->fw_arg(ctx, e, "step_num", &a) != SMRULES_ARG_MISSING ? a.json
                                                                      : "null";
    if (s->nnums == s->capnums) {
      s->capnums = s->capnums ? 2 * s->capnums : 64;
      s->nums = fk_xrealloc(s->nums, s->capnums, sizeof *s->nums);
    }
    s->nums[s->nnums++] = fk_strdup(num);
    add_interval(n, num, e->start_us, e->end_us);
  }
}

/* Details.step_details[node] for one step phase with > 100 steps; returns
 * the number of outliers. */
static int64_t describe(state *st, node *n, const char *name, const series *s,
                        rk_text *nums, double *threshold) {
  size_t len = s->dur.n;
  const double *v = s->dur.v;
  double mean = fk_mean(v, len), sd = fk_std(v, len);
  double thr = mean + st->s.stddev * sd;
  *threshold = thr;
  double *sorted = fk_sorted(v, len);
  step_details *d = &n->det;
  d->mean = mean;
  d->max = sorted[len - 1];
  d->min = sorted[0];
  d->p99 = fk_percentile_sorted(sorted, len, 99);
  d->p95 = fk_percentile_sorted(sorted, len, 95);
  d->p50 = fk_percentile_sorted(sorted, len, 50);
  d->stddev = fk_round2(sd);
  free(sorted);
  fk_dv normal = {0};
  int64_t out = 0;
  rk_text_printf(nums, "[");
  for (size_t i = 0; i < len; i++) {
    if (v[i] > thr)
      rk_text_printf(nums, "%s%s", out++ ? ", " : "", s->nums[i]);
    if (v[i] < thr)
      fk_dv_push(&normal, v[i]);
  }
  rk_text_printf(nums, "]");
  fk_histogram(normal.v, normal.n, 100, d->counts, d->edges);
  fk_dv_free(&normal);
  d->outliers = out;
  free(d->phase);
  d->phase = fk_strdup(name);
  free(d->step_numbers);
  d->step_numbers = rk_text_take(nums);
  n->has_details = true;
  return out;
}

/* The breakdown of every outlier step that started in this window. */
static void explain(state *st, node *n, const series *s, double thr,
                    const smrules_fw_event *ev, size_t nev) {
  for (size_t i = 0; i < s->dur.n; i++) {
    if (!(s->dur.v[i] > thr))
      continue;
    long k = fk_map_find(&n->steps, s->nums[i]);
    if (k < 0)
      continue;
    for (size_t j = 0; j < nev; j++)
      if (fk_event_used(&ev[j], n->istart[k], true, n->iend[k]))
        fk_classify(&st->b, &ev[j]);
    fk_breakdown_keys(&st->b, &st->order);
  }
}

static void evaluate(state *st, const smrules_fw_event *ev, size_t nev) {
  rk_text nums = {0};
  for (size_t i = 0; i < st->nodes.n; i++) {
    node *n = &st->n[i];
    for (size_t k = 0; k < n->names.n; k++) {
      const series *s = &n->s[k];
      if (s->dur.n <= 100)
        continue;
      double thr;
      int64_t out = describe(st, n, n->names.keys[k], s, &nums, &thr);
      fk_map_add(&st->det_order, st->nodes.keys[i], NULL);
      if (out <= st->s.n_outliers)
        continue;
      st->violations += out;
      st->triggered++;
      explain(st, n, s, thr, ev, nev);
    }
  }
  free(rk_text_take(&nums));
}

static void write_step_details(smrules_json *d, const state *st) {
  smrules_json *sd = sr_api->json_obj(d, "step_details");
  for (size_t i = 0; i < st->det_order.n; i++) {
    const node *n = &st->n[fk_map_find(&st->nodes, st->det_order.keys[i])];
    const step_details *x = &n->det;
    smrules_json *o = sr_api->json_obj(sd, st->det_order.keys[i]);
    smrules_json *ss = sr_api->json_obj(o, "step_stats");
    sr_api->json_num(ss, "mean", x->mean);
    sr_api->json_num(ss, "max", x->max);
    sr_api->json_num(ss, "p99", x->p99);
    sr_api->json_num(ss, "p95", x->p95);
    sr_api->json_num(ss, "p50", x->p50);
    sr_api->json_num(ss, "min", x->min);
    sr_api->json_int(o, "number_of_outliers", x->outliers);
    sr_api->json_str(o, "phase", x->phase);
    sr_api->json_num(o, "stddev", x->stddev);
    sr_api->json_ints(o, "probs", x->counts, 100);
    sr_api->json_nums(o, "binedges", x->edges, 101);
    sr_api->json_raw(o, "step_numbers", x->step_numbers);
  }
}

static void write_report(smrules_ctx *ctx, const state *st) {
  sr_api->report_set(ctx, st->triggered, st->violations, st->datapoints);
  smrules_json *d = sr_api->details_reset(ctx);
  write_step_details(d, st);
  for (size_t i = 0; i < st->order.n; i++)
    fk_breakdown_emit(sr_api, d, &st->b, st->order.keys[i], true);
  char sd[64], no[64];
  sr_api->py_str(st->s.stddev, false, sd, sizeof sd);
  sr_api->py_str((double)st->s.n_outliers, true, no, sizeof no);
  const char *tsd = sr_api->param_text(ctx, "stddev");
  const char *tno = sr_api->param_text(ctx, "n_outliers");
  rk_text t = {0};
  rk_text_printf(&t, "threshold:%s\nmode:%s\nn_outliers:%s\nstddev:%s",
                 tsd ? tsd : sd, st->s.mode ? st->s.mode : "None",
                 tno ? tno : no, tsd ? tsd : sd);
  char *text = rk_text_take(&t);
  sr_api->rule_parameters(ctx, text);
  free(text);
}

static int invoke(smrules_ctx *ctx, void *p, int64_t step) {
  state *st = p;
  int64_t k, start, end;
  if (sr_api->window(ctx, &k, &start, &end) != SMRULES_NO_TRIGGER) {
    sr_api->fail(ctx, "StepOutlier is a profiler rule: no window");
    return SMRULES_ERR;
  }
  const smrules_fw_event *fw;
  size_t nfw;
  if (sr_api->framework_events(ctx, start, end, &fw, &nfw) < 0)
    return SMRULES_ERR;
  for (size_t i = 0; i < st->nodes.n; i++) /* intervals are per window */
    fk_map_clear(&st->n[i].steps);
  collect(ctx, st, fw, nfw);
  evaluate(st, fw, nfw);
  write_report(ctx, st);
  return st->triggered > 0 ? SMRULES_TRIGGERED : SMRULES_NO_TRIGGER;
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "StepOutlier",
    .description = "steps that take much longer than usual",
    .kind = SMRULES_KIND_PROFILER,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "profiler: framework Step:ModeKeys events",
    .init = init,
    .invoke_at_step = invoke,
    .destroy = destroy,
};

const smrules_rule *fw_step_outlier(const smrules_api *api) {
  sr_api = api;
  return &rule;
}
