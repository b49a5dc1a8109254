/* rpt_doc.c - ProfilerReport's HTML document: page frame and style, the
 * training job summary, the rules summary and the analysis of the phase
 * that dominates (docs/profiler-report.md#reading-the-report, sections 1, 2, 5,
 * 6), and the order of the other sections (rpt_html_sys.c, rpt_html_fw.c).  One
 * self-contained file: inline CSS and SVG, no scripts, no fonts or images from
 * anywhere. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rpt_html.h"
#include "rpt_sections.h"

/* ---------------------------------------------------------- the rules */

static const struct {
  const char *rule, *description, *recommendation;
} RULES[] = {
    {"CPUBottleneck",
     "Checks if the CPU utilization is high while the GPU utilization is low: "
     "the GPUs wait for data from the CPUs.",
     "Consider more data-loader workers or pre-fetching data."},
    {"IOBottleneck",
     "Checks if the I/O wait time is high while the GPU utilization is low: "
     "the GPUs wait for data from storage.",
     "Pre-fetch data, or use binary or streaming file formats."},
    {"Dataloader",
     "Checks how many data loaders run in parallel and whether that fits "
     "the number of CPU cores.",
     "Change the number of data-loader processes."},
    {"GPUMemoryIncrease",
     "Measures the average GPU memory footprint and triggers when it "
     "increases significantly.",
     "If the memory is close to the limit, choose an instance with more GPU "
     "memory."},
    {"BatchSize",
     "Checks if CPU, GPU and GPU memory are all lightly used: the batch may "
     "be too small or the instance too large.",
     "Increase the batch size, or use a smaller instance."},
    {"LowGPUUtilization",
     "Checks if the GPU utilization is low or fluctuates strongly.",
     "Look for bottlenecks and blocking calls, change the distribution "
     "strategy, or increase the batch size."},
    {"MaxInitializationTime",
     "Checks if the training loop starts late: initialization takes too "
     "long.",
     "Check the data download (stream data instead of downloading it all) "
     "and other start-up work."},
    {"LoadBalancing",
     "Compares the GPU utilization distributions of the GPUs to find "
     "unequal work in data-parallel training.",
     "Choose another distributed-training strategy or framework."},
    {"StepOutlier", "Finds steps that take much longer than usual.",
     "Correlate the outliers with CPU or I/O bottlenecks and other "
     "events."},
};
#define NRULES (sizeof RULES / sizeof *RULES)

/* ------------------------------------------------------- job summary */

typedef struct job {
  bool have_job, have_steps;
  double start, end, first, last; /* seconds */
} job;

static job job_times(const rpt_view *v) {
  const smr_json *d = h_details(v, "MaxInitializationTime");
  job j = {0};
  j.have_job = smr_json_number(smr_json_get(d, "job_start"), &j.start) &&
               smr_json_number(smr_json_get(d, "job_end"), &j.end);
  const smr_json *sn = smr_json_get(d, "step_num");
  double f, l;
  if (smr_json_number(smr_json_get(sn, "first"), &f)) {
    j.have_steps = true;
    j.first = f / 1e6;
    j.last = smr_json_number(smr_json_get(sn, "last"), &l) ? l / 1e6 : j.first;
  }
  return j;
}

static double share(double part, double total) {
  return total > 0 && part > 0 ? 100 * part / total : 0;
}

static void job_row(rk_text *o, const char *what, double s, double total,
                    bool time_cell, double when) {
  h_tr(o);
  h_td(o, what);
  rk_text_printf(o, "<td>");
  if (time_cell)
    h_time(o, when);
  rk_text_printf(o, "</td>");
  h_td_num(o, s, 1);
  h_td_num(o, share(s, total), 1);
  h_tr_end(o);
}

static void job_summary(rk_text *o, const rpt_view *v, const job *jobp) {
  h_section(o, "job", "Training job summary");
  if (!jobp->have_job) {
    h_note(o, "No system metrics were read yet: the job's start and end are "
              "unknown.");
    h_section_end(o);
    return;
  }
  /* the job spans its steps too: trace files may reach past the last
   * system reading, and phases must not get negative shares */
  job jj = *jobp;
  const job *j = &jj;
  if (jj.have_steps) {
    jj.start = jj.first < jj.start ? jj.first : jj.start;
    jj.end = jj.last > jj.end ? jj.last : jj.end;
  }
  double total = j->end - j->start;
  h_table(o, "phase|start|duration (s)|share of the job (%)");
  job_row(o, "whole job", total, total, true, j->start);
  if (j->have_steps) {
    job_row(o, "initialization", j->first - j->start, total, true, j->start);
    job_row(o, "training loop", j->last - j->first, total, true, j->first);
    job_row(o, "finalization", j->end - j->last, total, true, j->last);
  }
  h_table_end(o);
  rk_text_printf(o, "<p>Job end: ");
  h_time(o, j->end);
  rk_text_printf(o, ".</p>\n");
  if (!j->have_steps) {
    h_note(o, "No step events (Step:ModeKeys) were found in the framework "
              "metrics, so initialization, training loop and finalization "
              "cannot be told apart.");
  } else {
    const char *labels[] = {"initialization", "training loop", "finalization"};
    double vals[] = {share(j->first - j->start, total),
                     share(j->last - j->first, total),
                     share(j->end - j->last, total)};
    svg_pie(o, "Time spent in each phase of the job", labels, vals, 3);
  }
  h_section_end(o);
}

/* ------------------------------------------------------- rules summary */

static int64_t sub_triggered(const rpt_view *v, const char *rule) {
  const rpt_sub *s = rpt_find(v, rule);
  return s ? s->triggered : -1;
}

static void param_cell(rk_text *o, const rpt_sub *s) {
  rk_text_printf(o, "<td class=\"params\">");
  const char *p = s && s->rule_params ? s->rule_params : "";
  for (const char *q = p; *q;) {
    const char *nl = strchr(q, '\n');
    size_t n = nl ? (size_t)(nl - q) : strlen(q);
    char line[160];
    snprintf(line, sizeof line, "%.*s", (int)n, q);
    h_text(o, line);
    rk_text_printf(o, "<br>");
    q = nl ? nl + 1 : q + n;
  }
  rk_text_printf(o, "</td>");
}

static void rules_summary(rk_text *o, const rpt_view *v) {
  size_t order[NRULES];
  for (size_t i = 0; i < NRULES; i++)
    order[i] = i;
  for (size_t i = 1; i < NRULES; i++) /* stable: most triggered first */
    for (size_t k = i; k > 0 && sub_triggered(v, RULES[order[k]].rule) >
                                    sub_triggered(v, RULES[order[k - 1]].rule);
         k--) {
      size_t t = order[k];
      order[k] = order[k - 1];
      order[k - 1] = t;
    }
  h_section(o, "rules", "Rules summary");
  const rpt_sub *top = rpt_find(v, RULES[order[0]].rule);
  if (top && top->triggered > 0) {
    rk_text_printf(o, "<p>The rule triggered most often was <b>");
    h_text(o, top->name);
    rk_text_printf(o, "</b>: %lld %s, over %lld datapoints.</p>\n",
                   (long long)top->triggered, h_times(top->triggered),
                   (long long)top->datapoints);
  } else {
    h_p(o, v->finished ? "No rule triggered." : "No rule triggered so far.");
  }
  h_table(o, "rule|description|recommendation|times triggered|datapoints|"
             "parameters");
  for (size_t i = 0; i < NRULES; i++) {
    const rpt_sub *s = rpt_find(v, RULES[order[i]].rule);
    rk_text_printf(o, "<tr%s>", s && s->triggered > 0 ? " class=\"hit\"" : "");
    h_td(o, RULES[order[i]].rule);
    h_td(o, RULES[order[i]].description);
    h_td(o, RULES[order[i]].recommendation);
    h_td_num(o, s ? (double)s->triggered : NAN, 0);
    h_td_num(o, s ? (double)s->datapoints : NAN, 0);
    param_cell(o, s);
    h_tr_end(o);
  }
  h_table_end(o);
  h_section_end(o);
}

/* --------------------------------------------------------- the document */

static const char *const CSS =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,"
    "sans-serif;margin:0;background:#f6f7f9;color:#1d232b}"
    "main{max-width:1100px;margin:0 auto;padding:20px 28px 60px;"
    "background:#fff}"
    "h1{font-size:26px;margin:8px 0 4px}h2{font-size:20px;margin:34px 0 8px;"
    "border-bottom:2px solid #2f6fb0;padding-bottom:4px}"
    "h3{font-size:16px;margin:20px 0 6px}"
    "p.note{color:#5b6470;font-style:italic}"
    ".disclaimer{background:#fff7e0;border-left:4px solid #e0a800;"
    "padding:8px 12px}"
    "table{border-collapse:collapse;margin:8px 0 14px;font-size:13px}"
    "th,td{border:1px solid #d5d9e0;padding:4px 8px;vertical-align:top;"
    "text-align:left}th{background:#eef1f5}td.n{text-align:right;"
    "font-variant-numeric:tabular-nums}td.params{font-family:monospace;"
    "font-size:12px}tr.hit td:first-child{color:#c0392b;font-weight:600}"
    "figure.chart{margin:10px 0;display:inline-block;vertical-align:top}"
    "figure.chart svg{max-width:100%;height:auto;background:#fff}"
    ".ct{font-size:13px;font-weight:600;fill:#1d232b}"
    ".cl{font-size:11px;fill:#38414d}.ax{stroke:#5b6470;stroke-width:1}"
    ".wh{stroke:#38414d;stroke-width:1.2}.med{stroke:#c0392b;"
    "stroke-width:2}nav a{margin-right:10px;font-size:13px}"
    ".grid{display:flex;flex-wrap:wrap;gap:1%}"
    ".grid figure.chart{width:48%;margin:6px 0}"
    ".grid figure.chart svg{width:100%}";

static void header(rk_text *o, const rpt_view *v) {
  rk_text_printf(o,
                 "<!DOCTYPE html>\n<html lang=\"en\"><head><meta "
                 "charset=\"utf-8\"><title>Profiler report</title>"
                 "<style>%s</style></head><body><main>\n",
                 CSS);
  rk_text_printf(o,
                 "<h1>Profiler report</h1>\n<p>This report summarizes "
                 "the profiling data of a training job: system "
                 "utilization (CPU, GPU, memory, I/O, network) and "
                 "framework metrics (training steps, operators, data "
                 "loading), as analysed by the profiler rules.  %lld "
                 "window(s) of %.0f s were evaluated%s.</p>\n",
                 (long long)v->windows, (double)v->scan_interval_us / 1e6,
                 v->finished ? " (the whole job)" : " so far");
  rk_text_printf(o, "<p class=\"disclaimer\">The recommendations are "
                    "informational: they point at what to look at, not at "
                    "what must change.</p>\n<nav>"
                    "<a href=\"#job\">job</a><a href=\"#system\">system</a>"
                    "<a href=\"#framework\">framework</a>"
                    "<a href=\"#rules\">rules</a>"
                    "<a href=\"#analysis\">analysis</a></nav>\n");
}

static void analysis(rk_text *o, const rpt_view *v, const job *j) {
  bool init_dominates = j->have_job && j->have_steps &&
                        (j->first - j->start) > (j->last - j->first);
  if (init_dominates) {
    h_section(o, "analysis", "Analyzing initialization");
    rk_text_printf(o,
                   "<p>Initialization (%.1f s) took longer than the "
                   "training loop (%.1f s).  MaxInitializationTime checks "
                   "that the training loop starts within its threshold; "
                   "long initializations often come from downloading the "
                   "whole data set before training (stream it instead) "
                   "or from slow start-up work.</p>\n",
                   j->first - j->start, j->last - j->first);
    h_section_end(o);
  } else {
    h_section(o, "analysis", "Analyzing the training loop");
    h_p(o, "The training loop took longer than initialization (or no step "
           "events tell them apart): the sections below analyse the "
           "steps, GPU utilization, workload balancing, data loading, batch "
           "size, CPU and I/O bottlenecks and GPU memory.");
    h_section_end(o);
  }
  h_step_durations(o, v);
  h_gpu_utilization(o, v);
  h_load_balancing(o, v);
  h_dataloading(o, v);
  h_batch_size(o, v);
  h_bottleneck(o, v, "CPUBottleneck");
  h_bottleneck(o, v, "IOBottleneck");
  h_gpu_memory(o, v);
}

char *rpt_html(const rpt_view *v) {
  rk_text o = {0};
  header(&o, v);
  job j = job_times(v);
  job_summary(&o, v, &j);
  h_system_usage(&o, v);
  h_framework_summary(&o, v);
  rules_summary(&o, v);
  analysis(&o, v, &j);
  rk_text_printf(&o, "</main></body></html>\n");
  return rk_text_take(&o);
}
