/* ProfilerReport (docs/profiler-report.md): runs the eleven profiler rules over
 * the same windows, writes each one's report and an HTML profiling report.
 *
 * Why a plugin that runs the sub-rules' code itself, rather than a host
 * feature or a plugin that loads the other plugins: the sub-rules must be
 * fed the window's events directly and must not be driven by the host's
 * window loop (their own clocks never advance,
 * docs/profiler-report.md#evaluation), their reports must stay separate, and
 * parameters arrive as "<Rule>_<param>" keys validated with each sub-rule's own
 * table (docs/profiler-report.md#parameters).  The system-metric rules are
 * engines built for exactly this (plugins/engines/prof_rules.h); the
 * framework-metric rules are engines that hand out their registration
 * bound to a function table (plugins/engines/fw_rules.h), here the
 * host's: each runs in a context the host makes for it (api->sub_rule),
 * and its report is read back from the host (rpt_report.c).  One .so, no
 * dependency on where other plugins are installed, and nothing in the
 * host specific to ProfilerReport.
 *
 * Outputs, rewritten after every window (docs/profiler-report.md#outputs),
 * under the rule's output directory (rule-output/<instance>/):
 * profiler-output/profiler-report.html and
 * profiler-output/profiler-reports/<Rule>.json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rpt_int.h"

/* The outputs, below the rule's folder (docs/profiler-report.md#outputs). */
#define OUTPUT_DIR "profiler-output"
#define REPORTS_DIR OUTPUT_DIR "/profiler-reports"

const smrules_api *rpt_host;

/* ------------------------------------------------------------ sub-rules */

static const struct {
  const char *name;
  const pr_engine_ops *eng; /* a system-metric engine, or */
  rpt_sub_init_fn init;     /* a framework-metric engine */
  bool takes_params;        /* OverallFrameworkMetrics takes none
                               (docs/profiler-report.md#parameters) */
} SUBS[RPT_NSUB] = {
    {"CPUBottleneck", &pr_cpu_bottleneck, NULL, true},
    {"IOBottleneck", &pr_io_bottleneck, NULL, true},
    {"LowGPUUtilization", &pr_low_gpu_utilization, NULL, true},
    {"StepOutlier", NULL, fw_step_outlier, true},
    {"GPUMemoryIncrease", &pr_gpu_memory_increase, NULL, true},
    {"BatchSize", &pr_batch_size, NULL, true},
    {"MaxInitializationTime", NULL, fw_max_initialization_time, true},
    {"LoadBalancing", &pr_load_balancing, NULL, true},
    {"OverallSystemUsage", &pr_overall_system_usage, NULL, true},
    {"Dataloader", NULL, fw_dataloader, true},
    {"OverallFrameworkMetrics", NULL, fw_overall_framework_metrics, false},
};

/* Parameter tables and settings sizes of the sub-rules. */
static const smrules_param *sub_params[RPT_NSUB];
static size_t sub_size[RPT_NSUB];
static const smrules_rule *sub_regs[RPT_NSUB];
static size_t sub_offset[RPT_NSUB]; /* of its settings in ours */

/* ----------------------------------------------------------- parameters
 * Our settings: this header, then each sub-rule's settings struct.  The
 * parameter table is generated from the sub-rules' tables: for every
 * parameter p of rule R an entry "R_p" stored straight into R's settings,
 * with R's type, default and bounds, and the alias "r_p" (lower-cased rule
 * name: SageMaker matches rule names case-insensitively). */
typedef struct rpt_settings {
  int64_t scan_interval_us;
  bool opt_out_telemetry;
} rpt_settings;

#define MAX_PARAMS 160
#define NAME_LEN 72
static smrules_param table[MAX_PARAMS];
static char names[MAX_PARAMS][NAME_LEN], aliases[MAX_PARAMS][NAME_LEN];
static size_t settings_size;

static size_t align16(size_t n) {
  return (n + 15) & ~(size_t)15;
}

static void add_sub_params(size_t *np, size_t i) {
  for (const smrules_param *p = sub_params[i];
       p && p->type != SMRULES_PARAM_END; p++) {
    if (*np + 1 >= MAX_PARAMS)
      return;
    size_t k = (*np)++;
    smrules_param *q = &table[k];
    *q = *p;
    snprintf(names[k], NAME_LEN, "%s_%s", SUBS[i].name, p->name);
    snprintf(aliases[k], NAME_LEN, "%s", names[k]);
    for (char *c = aliases[k]; *c && *c != '_'; c++)
      *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
    q->name = names[k];
    q->aliases = aliases[k];
    q->flags &= ~(unsigned)SMRULES_P_REQUIRED;
    q->offset = sub_offset[i] + p->offset;
  }
}

static void build_table(void) {
  size_t np = 0;
  table[np++] = (smrules_param)SMRULES_INT_PARAM(
      "scan_interval_us", "60000000", rpt_settings, scan_interval_us,
      "length of one evaluation window for all sub-rules, in microseconds",
      SMRULES_ABOVE(0));
  table[np++] = (smrules_param)SMRULES_BOOL_PARAM(
      "opt_out_telemetry", "False", rpt_settings, opt_out_telemetry,
      "accepted for SageMaker compatibility; no effect");
  size_t off = align16(sizeof(rpt_settings));
  for (size_t i = 0; i < RPT_NSUB; i++) {
    sub_offset[i] = off;
    off += align16(sub_size[i]);
    if (SUBS[i].takes_params)
      add_sub_params(&np, i);
  }
  table[np] = (smrules_param)SMRULES_END_PARAMS;
  settings_size = off;
}

/* ---------------------------------------------------------------- state */

typedef struct rpt_state {
  rpt_sub subs[RPT_NSUB];
  rpt_window win;
  int64_t first_us, scan_interval_us, windows;
  bool ended;
  double flushed_at; /* monotonic seconds of the last write, 0: never */
} rpt_state;

static int init_sub(smrules_ctx *ctx, rpt_state *st, size_t i,
                    const void *settings) {
  rpt_sub *s = &st->subs[i];
  s->name = SUBS[i].name;
  s->reg = sub_regs[i];
  s->eng = SUBS[i].eng;
  s->win = &st->win;
  s->details = smr_json_obj_new();
  s->settings = (const char *)settings + sub_offset[i];
  st->win.host_ctx = ctx;
  if (s->eng) {
    s->state = s->eng->create(s->settings);
    char buf[1024];
    s->eng->rule_parameters(s->settings, buf, sizeof buf);
    s->rule_params = strdup(buf);
    s->ready = s->state != NULL;
    return s->ready ? 0 : SMRULES_ERR;
  }
  if (!s->reg)
    return 0;
  if (!SMRULES_API_HAS(rpt_host, rule_failure)) {
    rpt_host->fail(ctx,
                   "ProfilerReport: this smrules cannot run %s (its "
                   "plugin API has no sub_rule): update smrules",
                   s->name);
    return SMRULES_ERR;
  }
  s->ctx = rpt_host->sub_rule(ctx, s->name);
  if (!s->ctx) {
    rpt_host->fail(ctx, "ProfilerReport: cannot run %s", s->name);
    return SMRULES_ERR;
  }
  if (s->reg->init(s->ctx, s->settings, &s->state) != 0) {
    const char *why = rpt_host->rule_failure(s->ctx);
    rpt_host->fail(ctx, "%s: %s", s->name,
                   why ? why : "configuration rejected");
    return SMRULES_ERR;
  }
  s->ready = true;
  if (strcmp(s->name, "MaxInitializationTime") == 0)
    fw_max_initialization_time_fix_clock(s->state);
  return 0;
}

static void destroy(void *p) {
  rpt_state *st = p;
  for (size_t i = 0; i < RPT_NSUB; i++) {
    rpt_sub *s = &st->subs[i];
    if (s->state && s->eng)
      s->eng->destroy(s->state);
    else if (s->state && s->reg && s->reg->destroy)
      s->reg->destroy(s->state);
    smr_json_free(s->details);
    free(s->rule_params);
  }
  free(st);
}

static int init(smrules_ctx *ctx, const void *settings, void **out) {
  rpt_state *st = calloc(1, sizeof *st);
  if (!st) {
    rpt_host->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  *out = st;
  st->scan_interval_us = ((const rpt_settings *)settings)->scan_interval_us;
  st->first_us = INT64_MIN;
  for (size_t i = 0; i < RPT_NSUB; i++)
    if (init_sub(ctx, st, i, settings) != 0)
      return SMRULES_ERR; /* the host destroys what was built */
  return 0;
}

/* --------------------------------------------------------------- files */

/* Replaces `rel` (below the rule's folder) with `text` through the host,
 * which writes a temporary file and renames it, so readers never see a
 * half-written report (docs/rule-semantics.md#profiler-rules-the-report),
 * and follows no link the trial's writer planted on the way.  On failure
 * the host has set the rule's message. */
static int write_file(smrules_ctx *ctx, const char *rel, const char *text) {
  if (!text) {
    rpt_host->fail(ctx, "ProfilerReport: out of memory rendering %s", rel);
    return SMRULES_ERR;
  }
  if (!SMRULES_API_HAS(rpt_host, write_output)) {
    rpt_host->fail(ctx, "ProfilerReport: this smrules cannot write the "
                        "report safely (its plugin API has no "
                        "write_output): update smrules");
    return SMRULES_ERR;
  }
  return rpt_host->write_output(ctx, rel, text, strlen(text));
}

static void write_own_report(smrules_ctx *ctx, const rpt_state *st);

/* The sub-rules' reports and the HTML report; stops at the first file
 * that cannot be written (the rule then fails with the host's reason). */
static int write_outputs(smrules_ctx *ctx, rpt_state *st) {
  for (size_t i = 0; i < RPT_NSUB; i++)
    if (rpt_sub_read_report(&st->subs[i]) != 0)
      rpt_host->log(ctx, 2, "ProfilerReport: cannot read the report of %s",
                    st->subs[i].name);
  write_own_report(ctx, st);
  char rel[128];
  for (size_t i = 0; i < RPT_NSUB; i++) {
    const rpt_sub *s = &st->subs[i];
    if (!s->ready)
      continue;
    snprintf(rel, sizeof rel, "%s/%s.json", REPORTS_DIR, s->name);
    char *json = rpt_sub_report_json(s);
    int rc = write_file(ctx, rel, json);
    free(json);
    if (rc != 0)
      return SMRULES_ERR;
  }
  rpt_view v = {st->subs, st->windows, st->first_us, st->scan_interval_us,
                st->ended};
  char *html = rpt_html(&v);
  int rc = write_file(ctx, OUTPUT_DIR "/profiler-report.html", html);
  free(html);
  return rc;
}

/* ------------------------------------------------------------ our report
 * ProfilerReport has no report of its own in the reference; ours sums up
 * the sub-rules: RuleTriggered 1 when any sub-rule met its condition,
 * Violations the number of those sub-rules, Datapoints the windows
 * evaluated, and Details listing them (and how the run ended). */
static void write_own_report(smrules_ctx *ctx, const rpt_state *st) {
  size_t met = 0, trig = 0;
  const char *met_names[RPT_NSUB], *trig_names[RPT_NSUB], *files[RPT_NSUB];
  char file_buf[RPT_NSUB][40];
  size_t nfiles = 0;
  smrules_json *d = rpt_host->details_reset(ctx);
  smrules_json *subs = rpt_host->json_obj(d, "subrules");
  for (size_t i = 0; i < RPT_NSUB; i++) {
    const rpt_sub *s = &st->subs[i];
    if (!s->ready)
      continue;
    smrules_json *o = rpt_host->json_obj(subs, s->name);
    rpt_host->json_int(o, "RuleTriggered", s->triggered);
    rpt_host->json_int(o, "Violations", s->violations);
    rpt_host->json_int(o, "Datapoints", s->datapoints);
    rpt_host->json_int(o, "windows_condition_met", s->windows_met);
    if (s->errors)
      rpt_host->json_int(o, "windows_failed", s->errors);
    if (s->windows_met)
      met_names[met++] = s->name;
    if (s->triggered > 0)
      trig_names[trig++] = s->name;
    snprintf(file_buf[nfiles], sizeof file_buf[nfiles], "%s.json", s->name);
    files[nfiles] = file_buf[nfiles];
    nfiles++;
  }
  rpt_host->json_strs(d, "triggered", trig_names, trig);
  rpt_host->json_strs(d, "condition_met", met_names, met);
  /* the reference lists the files of the output folder: sorted names */
  for (size_t i = 1; i < nfiles; i++)
    for (size_t k = i; k > 0 && strcmp(files[k - 1], files[k]) > 0; k--) {
      const char *t = files[k];
      files[k] = files[k - 1];
      files[k - 1] = t;
    }
  rpt_host->json_strs(d, "report_files", files, nfiles);
  if (st->ended) {
    rpt_host->json_str(d, "ended_with",
                       met ? "RuleEvaluationConditionMet"
                           : "NoMoreProfilerData");
    rpt_host->json_int(d, "ending_step", st->windows);
  }
  rpt_host->report_set(ctx, met ? 1 : 0, (int64_t)met, st->windows);
  rpt_host->rule_parameters(ctx, "");
}

/* ---------------------------------------------------------- evaluation */

/* An engine's window: its own clock is the trial start
 * (docs/profiler-report.md#evaluation). */
static int run_engine(rpt_sub *s, const rpt_window *w, bool *met) {
  pk_fw_source fw = {.ctx = w->host_ctx,
                     .start_us = w->start,
                     .end_us = w->end,
                     .given = w->fw,
                     .ngiven = w->nfw,
                     .has_given = true};
  pr_window pw = {.index = w->index,
                  .start_us = w->start,
                  .end_us = w->end,
                  .last_timestamp = w->first_us,
                  .sys = w->sys,
                  .nsys = w->nsys,
                  .fw = &fw,
                  .ctx = w->host_ctx};
  return s->eng->window(s->state, &pw, met) != 0 ? SMRULES_ERR : 0;
}

static void run_sub(smrules_ctx *ctx, rpt_sub *s) {
  if (!s->ready)
    return;
  int rc;
  if (s->eng) {
    bool met = false;
    rc = run_engine(s, s->win, &met);
    if (rc == 0 && met)
      rc = SMRULES_TRIGGERED;
  } else {
    rc = s->reg->invoke_at_step(s->ctx, s->state, s->win->index);
  }
  if (rc == SMRULES_TRIGGERED)
    s->windows_met++;
  else if (rc < 0) { /* Decision: log, count as not triggered, go on */
    const char *why = s->ctx ? rpt_host->rule_failure(s->ctx) : NULL;
    s->errors++;
    rpt_host->log(ctx, 2, "ProfilerReport: %s failed in window %lld: %s",
                  s->name, (long long)s->win->index, why ? why : "no message");
  }
}

/* The window's events, fetched once for all sub-rules. */
static int fetch(smrules_ctx *ctx, rpt_window *w) {
  if (rpt_host->system_events(ctx, w->start, w->end, &w->sys, &w->nsys) < 0 ||
      rpt_host->framework_events(ctx, w->start, w->end, &w->fw, &w->nfw) < 0)
    return SMRULES_ERR;
  return 0;
}

/* Outputs are rewritten at most every FLUSH_SECONDS while windows are
 * evaluated (a live run keeps a recent partial report; rendering every
 * report after each of thousands of windows would cost more than the
 * rules), and always after the last window and when a pass ends
 * (finish): the files then equal those written after every window. */
#define FLUSH_SECONDS 10.0

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool due(rpt_state *st) {
  double t = now_seconds();
  if (st->flushed_at > 0 && t - st->flushed_at < FLUSH_SECONDS)
    return false;
  st->flushed_at = t;
  return true;
}

static int finish(smrules_ctx *ctx, void *p) {
  return write_outputs(ctx, p);
}

/* Whether window k is the last one: the job has ended and the next window
 * starts at or after the latest timestamp (the invoker then stops with
 * NoMoreProfilerData, docs/formats.md#timestamps-and-windows). */
static bool is_last_window(smrules_ctx *ctx, int64_t end) {
  smrules_profiler_info in;
  if (rpt_host->profiler_info(ctx, &in) < 0)
    return false;
  return in.job_finished && end >= in.latest_us;
}

static int invoke(smrules_ctx *ctx, void *p, int64_t step) {
  rpt_state *st = p;
  rpt_window *w = &st->win;
  memset(w, 0, sizeof *w);
  w->host_ctx = ctx;
  if (rpt_host->window(ctx, &w->index, &w->start, &w->end) < 0) {
    rpt_host->fail(ctx, "ProfilerReport is a profiler rule: no window");
    return SMRULES_ERR;
  }
  if (st->first_us == INT64_MIN) {
    smrules_profiler_info in;
    if (rpt_host->profiler_info(ctx, &in) < 0)
      return SMRULES_ERR;
    st->first_us = in.first_us;
  }
  w->first_us = st->first_us;
  if (fetch(ctx, w) != 0)
    return SMRULES_ERR;
  for (size_t i = 0; i < RPT_NSUB; i++)
    run_sub(ctx, &st->subs[i]);
  bool met = false;
  for (size_t i = 0; i < RPT_NSUB; i++)
    met |= st->subs[i].windows_met > 0;
  st->windows = w->index + 1;
  st->ended = is_last_window(ctx, w->end);
  if ((st->ended || due(st)) && write_outputs(ctx, st) != 0)
    return SMRULES_ERR;
  /* The reference raises one trigger after the last window when any
   * sub-rule met its condition (end_of_rule); the host's loop gives the
   * rule no call after the last window, so it is reported here, on the
   * last window (Details.ending_step names the reference's step). */
  return st->ended && met ? SMRULES_TRIGGERED : SMRULES_NO_TRIGGER;
}

/* --------------------------------------------------------- registration */

static smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "ProfilerReport",
    .description = "runs all profiler rules and writes an HTML profiling "
                   "report with one JSON report per rule",
    .kind = SMRULES_KIND_PROFILER,
    .params = table,
    .data_needed = "profiler: system metrics and framework trace events",
    .init = init,
    .invoke_at_step = invoke,
    .finish = finish,
    .destroy = destroy,
};

SMRULES_PLUGIN_INIT {
  if (!rpt_host) {
    rpt_host = api;
    rk_api = api; /* the engines' table (profkit and prof_rules use it) */
    for (size_t i = 0; i < RPT_NSUB; i++) {
      if (SUBS[i].eng) {
        sub_params[i] = SUBS[i].eng->params;
        sub_size[i] = SUBS[i].eng->settings_size;
      } else {
        sub_regs[i] = SUBS[i].init(api);
        sub_params[i] = sub_regs[i]->params;
        sub_size[i] = sub_regs[i]->settings_size;
      }
    }
    build_table();
    rule.settings_size = settings_size;
  }
  return &rule;
}
