/* rpt_html_sys.c - the report sections drawn from the system-metric rules
 * (docs/profiler-report.md#reading-the-report: 3 system usage, 8 GPU
 * utilization, 9 workload balancing, 11 batch size, 12-13 CPU and I/O
 * bottlenecks, 14 GPU memory). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpt_html.h"
#include "rpt_sections.h"

#define MAX_BOXES 64

/* ------------------------------------------------------ system usage */

/* Whether the recording has GPU utilization readings (OverallSystemUsage
 * lists a "GPU" entry per node that had any): without them the sections
 * about GPUs say so instead of charting zeros. */
static bool have_gpu(const rpt_view *v) {
  const smr_json *g = smr_json_get(h_details(v, "OverallSystemUsage"), "GPU");
  return g && h_members(g) > 0;
}

static const char *const METRICS[] = {"CPU",        "GPU", "CPU memory",
                                      "GPU memory", "I/O", "Network"};
#define NMETRICS (sizeof METRICS / sizeof *METRICS)

static double stat(const smr_json *d, const char *metric, const char *node,
                   const char *key) {
  return smr_json_num_or(smr_json_path(d, metric, node, NULL), key, NAN);
}

/* The reference report's verdict for one node. */
static void node_sentence(rk_text *o, const smr_json *d, const char *node) {
  double g95 = stat(d, "GPU", node, "p95"), g50 = stat(d, "GPU", node, "p50");
  double c95 = stat(d, "CPU", node, "p95"), c50 = stat(d, "CPU", node, "p50");
  char msg[320];
  if (isnan(g95))
    snprintf(msg, sizeof msg,
             "no GPU metrics; median CPU utilization "
             "%.1f %%.",
             c50);
  else if (g95 < 70 && c95 < 70)
    snprintf(msg, sizeof msg,
             "the 95th percentiles of GPU (%.1f %%) and "
             "CPU (%.1f %%) utilization are below 70 %%: "
             "the node is underutilized; consider a "
             "smaller instance.",
             g95, c95);
  else if (g95 < 70 && c95 > 70)
    snprintf(msg, sizeof msg,
             "GPU utilization is low (p95 %.1f %%) while "
             "CPU utilization is high (p95 %.1f %%): the "
             "GPUs are likely underutilized because of CPU "
             "bottlenecks.",
             g95, c95);
  else if (g50 > 70)
    snprintf(msg, sizeof msg, "the GPUs are well utilized (median %.1f %%).",
             g50);
  else
    snprintf(msg, sizeof msg,
             "median GPU utilization %.1f %%, median CPU "
             "utilization %.1f %%.",
             g50, c50);
  rk_text_printf(o, "<p><b>");
  h_text(o, node);
  rk_text_printf(o, "</b>: ");
  h_text(o, msg);
  rk_text_printf(o, "</p>\n");
}

static void usage_rows(rk_text *o, const smr_json *d) {
  static const char *const STATS[] = {"max", "p99", "p95", "p50", "min"};
  for (size_t m = 0; m < NMETRICS; m++) {
    const smr_json *per = smr_json_get(d, METRICS[m]);
    for (size_t i = 0; per && i < h_members(per); i++) {
      const smr_json *x = smr_json_at(per, i);
      h_tr(o);
      h_td(o, smr_json_key(x));
      h_td(o, METRICS[m]);
      h_td(o, strcmp(METRICS[m], "Network") == 0 ? "bytes" : "percentage");
      for (size_t k = 0; k < 5; k++)
        h_td_num(o, smr_json_num_or(x, STATS[k], NAN), 2);
      h_tr_end(o);
    }
  }
}

void h_system_usage(rk_text *o, const rpt_view *v) {
  h_section(o, "system", "System usage statistics");
  const smr_json *d = h_details(v, "OverallSystemUsage");
  const smr_json *cpu = smr_json_get(d, "CPU"), *gpu = smr_json_get(d, "GPU");
  const smr_json *nodes = cpu && h_members(cpu) ? cpu : gpu;
  if (!nodes || !h_members(nodes)) {
    h_note(o, "No system metrics were found.");
    h_section_end(o);
    return;
  }
  for (size_t i = 0; i < h_members(nodes); i++)
    node_sentence(o, d, smr_json_key(smr_json_at(nodes, i)));
  h_table(o, "node|metric|unit|max|p99|p95|p50|min");
  usage_rows(o, d);
  h_table_end(o);
  h_section_end(o);
}

/* ------------------------------------------------------- box helpers */

/* A box from a report object with p25/p50/p75/upper/lower. */
static svg_box box_of(const smr_json *x, const char *label) {
  svg_box b = {.label = label,
               .lower = smr_json_num_or(x, "lower", NAN),
               .p25 = smr_json_num_or(x, "p25", NAN),
               .p50 = smr_json_num_or(x, "p50", NAN),
               .p75 = smr_json_num_or(x, "p75", NAN),
               .upper = smr_json_num_or(x, "upper", NAN)};
  for (int m = 0; m < 3; m++)
    b.marks[m] = NAN;
  return b;
}

static void mark(svg_box *b, int i, const smr_json *x, const char *key,
                 const char *name) {
  b->marks[i] = smr_json_num_or(x, key, NAN);
  b->mark_names[i] = name;
}

/* Nodes of a report whose Details are {node: {gpu: {...}}}. */
static bool is_node(const smr_json *m) {
  return smr_json_is_obj(m) && strcmp(smr_json_key(m), "last_timestamp") != 0;
}

/* ---------------------------------------------------- GPU utilization */

static void gpu_histograms(rk_text *o, const rpt_view *v) {
  const smr_json *lb = h_details(v, "LoadBalancing");
  size_t drawn = 0;
  rk_text_printf(o, "<div class=\"grid\">");
  for (size_t i = 0; i < h_members(lb); i++) {
    const smr_json *w = smr_json_get(smr_json_at(lb, i), "workloads");
    for (size_t g = 0; w && g < h_members(w) && drawn < 32; g++) {
      const smr_json *h = smr_json_at(w, g);
      size_t nb = h_numbers(h);
      if (!nb)
        continue;
      double counts[64], edges[65];
      for (size_t b = 0; b < nb && b < 64; b++)
        counts[b] = smr_json_num_at(h, b);
      for (size_t b = 0; b <= nb && b <= 64; b++)
        edges[b] = 2.0 * (double)b;
      char title[160];
      snprintf(title, sizeof title, "GPU utilization of %s %s (readings)",
               smr_json_key(smr_json_at(lb, i)), smr_json_key(h));
      drawn += svg_histogram(o, title, counts, edges, nb < 64 ? nb : 64,
                             "utilization (%)");
    }
  }
  rk_text_printf(o, "</div>\n");
  if (!drawn)
    h_note(o, "No GPU utilization readings for histograms.");
}

void h_gpu_utilization(rk_text *o, const rpt_view *v) {
  h_section(o, "gpu", "GPU utilization analysis");
  const rpt_sub *s = rpt_find(v, "LowGPUUtilization");
  const smr_json *d = h_details(v, "LowGPUUtilization");
  if (!have_gpu(v)) {
    h_note(o, "No GPU utilization readings in this recording.");
    h_section_end(o);
    return;
  }
  if (s)
    rk_text_printf(o,
                   "<p>LowGPUUtilization triggered %lld %s over "
                   "%lld datapoints.</p>\n",
                   (long long)s->triggered, h_times(s->triggered),
                   (long long)s->datapoints);
  for (size_t i = 0; i < h_members(d); i++) {
    const smr_json *node = smr_json_at(d, i);
    if (!is_node(node))
      continue;
    svg_box boxes[MAX_BOXES];
    size_t n = 0;
    for (size_t g = 0; g < h_members(node) && n < MAX_BOXES; g++) {
      const smr_json *x = smr_json_at(node, g);
      boxes[n] = box_of(x, smr_json_key(x));
      mark(&boxes[n], 0, x, "gpu_95", "p95 (window)");
      mark(&boxes[n], 1, x, "gpu_5", "p5 (window)");
      mark(&boxes[n], 2, x, "gpu_max", "max");
      n++;
    }
    char title[160];
    snprintf(title, sizeof title, "GPU utilization of %s", smr_json_key(node));
    svg_boxplots(o, title, boxes, n, "%");
  }
  double lt;
  if (smr_json_number(smr_json_get(d, "last_timestamp"), &lt)) {
    rk_text_printf(o, "<p>Last triggered in the window starting ");
    h_time(o, lt / 1e6);
    rk_text_printf(o, ".</p>\n");
  }
  h_h3(o, "Utilization histograms per GPU");
  gpu_histograms(o, v);
  h_section_end(o);
}

/* ---------------------------------------------------- load balancing */

static void distances(rk_text *o, const smr_json *node) {
  const smr_json *dist = smr_json_get(node, "distances");
  if (!dist || !h_members(dist))
    return;
  h_table(o, "GPU|compared with|Jensen-Shannon distance");
  for (size_t a = 0; a < h_members(dist); a++)
    for (size_t b = 0; b < h_members(smr_json_at(dist, a)); b++) {
      h_tr(o);
      h_td(o, smr_json_key(smr_json_at(dist, a)));
      h_td(o, smr_json_key(smr_json_at(smr_json_at(dist, a), b)));
      h_td_num(o,
               smr_json_num_or(
                   smr_json_at(dist, a),
                   smr_json_key(smr_json_at(smr_json_at(dist, a), b)), NAN),
               4);
      h_tr_end(o);
    }
  h_table_end(o);
}

void h_load_balancing(rk_text *o, const rpt_view *v) {
  h_section(o, "balance", "Workload balancing");
  const smr_json *d = h_details(v, "LoadBalancing");
  size_t drawn = 0;
  for (size_t i = 0; i < h_members(d); i++) {
    const smr_json *w = smr_json_get(smr_json_at(d, i), "workloads");
    if (!w || !h_members(w))
      continue;
    svg_series s[32];
    double x[64];
    size_t ns = 0, nb = 0;
    for (size_t g = 0; g < h_members(w) && ns < 32; g++) {
      const smr_json *h = smr_json_at(w, g);
      if (!h_is_numbers(h))
        continue;
      size_t len = smr_json_len(h);
      double *y = malloc((len ? len : 1) * sizeof *y);
      for (size_t b = 0; y && b < len; b++)
        y[b] = smr_json_num_at(h, b);
      s[ns++] = (svg_series){smr_json_key(h), y, len};
      nb = len > nb ? len : nb;
    }
    for (size_t b = 0; b < nb && b < 64; b++)
      x[b] = 2.0 * (double)b + 1;
    char title[160];
    snprintf(title, sizeof title,
             "Distribution of GPU utilization on %s (one line per GPU)",
             smr_json_key(smr_json_at(d, i)));
    drawn += svg_lines(o, title, nb <= 64 ? x : NULL, s, ns, "utilization (%)",
                       "readings");
    for (size_t k = 0; k < ns; k++)
      free((void *)s[k].y);
    distances(o, smr_json_at(d, i));
  }
  if (!drawn)
    h_note(o, "No GPU utilization data for workload balancing.");
  h_section_end(o);
}

/* --------------------------------------------------------- batch size */

void h_batch_size(rk_text *o, const rpt_view *v) {
  h_section(o, "batch", "Batch size");
  const smr_json *d = h_details(v, "BatchSize");
  const rpt_sub *s = rpt_find(v, "BatchSize");
  if (s && s->triggered > 0)
    rk_text_printf(o,
                   "<p>BatchSize triggered %lld %s: CPU, GPU and GPU "
                   "memory were all lightly used at once, which suggests a "
                   "larger batch or a smaller instance.</p>\n",
                   (long long)s->triggered, h_times(s->triggered));
  else if (s && !have_gpu(v))
    rk_text_printf(o, "<p>BatchSize did not trigger: it needs GPU and GPU "
                      "memory readings, and this recording has none.</p>\n");
  else if (s)
    rk_text_printf(o, "<p>BatchSize did not trigger: CPU, GPU and GPU "
                      "memory were never all lightly used at once, so "
                      "nothing suggests the batch is too small.</p>\n");
  size_t drawn = 0;
  for (size_t i = 0; i < h_members(d); i++) {
    const smr_json *node = smr_json_at(d, i);
    if (!is_node(node))
      continue;
    svg_box boxes[MAX_BOXES];
    size_t n = 0;
    for (size_t k = 0; k < h_members(node) && n < MAX_BOXES; k++) {
      boxes[n] =
          box_of(smr_json_at(node, k), smr_json_key(smr_json_at(node, k)));
      mark(&boxes[n], 0, smr_json_at(node, k), "p95", "p95");
      n++;
    }
    char title[160];
    snprintf(title, sizeof title, "CPU, GPU and GPU memory utilization of %s",
             smr_json_key(node));
    drawn += svg_boxplots(o, title, boxes, n, "%");
  }
  if (!drawn)
    h_note(o, "BatchSize has not recorded utilization statistics (it "
              "records them when it triggers).");
  h_section_end(o);
}

/* --------------------------------------------------------- bottlenecks */

void h_bottleneck(rk_text *o, const rpt_view *v, const char *rule) {
  bool cpu = strcmp(rule, "CPUBottleneck") == 0;
  h_section(o, cpu ? "cpu-bottlenecks" : "io-bottlenecks",
            cpu ? "CPU bottlenecks" : "I/O bottlenecks");
  const rpt_sub *s = rpt_find(v, rule);
  const smr_json *d = h_details(v, rule);
  if (!s || s->datapoints <= 0) {
    h_note(o, "No system metrics were evaluated.");
    h_section_end(o);
    return;
  }
  if (!have_gpu(v)) {
    rk_text_printf(o,
                   "<p>No GPU utilization readings in this recording: %s "
                   "looks for snapshots where the GPUs wait (%s) while GPU "
                   "utilization is low, so it cannot find a bottleneck "
                   "here (%lld snapshots read).</p>\n",
                   rule, cpu ? "high CPU utilization" : "high I/O wait",
                   (long long)s->datapoints);
    h_section_end(o);
    return;
  }
  double total = (double)s->datapoints;
  double low = smr_json_num_or(d, "low_gpu_utilization", 0);
  double bn = (double)s->violations;
  rk_text_printf(o,
                 "<p>%s triggered %lld %s.  Of %lld sampling "
                 "snapshots, %.0f had a GPU below the threshold and %.0f "
                 "were bottlenecks (%s).</p>\n",
                 rule, (long long)s->triggered, h_times(s->triggered),
                 (long long)s->datapoints, low, bn,
                 cpu ? "high CPU utilization" : "high I/O wait");
  const char *labels[] = {"GPU usage above threshold",
                          "GPU usage below threshold",
                          cpu ? "low GPU usage due to CPU bottlenecks"
                              : "low GPU usage due to I/O bottlenecks"};
  double vals[] = {total - low, low - bn, bn};
  svg_pie(o,
          cpu ? "Snapshots by GPU usage (CPU bottlenecks)"
              : "Snapshots by GPU usage (I/O bottlenecks)",
          labels, vals, 3);
  if (!h_breakdown(o, d, "during the bottlenecks"))
    h_note(o, "No framework metrics were recorded during bottlenecks.");
  h_section_end(o);
}

/* --------------------------------------------------------- GPU memory */

void h_gpu_memory(rk_text *o, const rpt_view *v) {
  h_section(o, "gpu-memory", "GPU memory");
  const smr_json *d = h_details(v, "GPUMemoryIncrease");
  const rpt_sub *s = rpt_find(v, "GPUMemoryIncrease");
  if (!have_gpu(v)) {
    h_note(o, "No GPU readings in this recording.");
    h_section_end(o);
    return;
  }
  if (s)
    rk_text_printf(o, "<p>GPUMemoryIncrease triggered %lld %s.</p>\n",
                   (long long)s->triggered, h_times(s->triggered));
  size_t drawn = 0;
  for (size_t i = 0; i < h_members(d); i++) {
    const smr_json *node = smr_json_at(d, i);
    if (!is_node(node))
      continue;
    svg_box boxes[MAX_BOXES];
    size_t n = 0;
    h_table(o, "node|GPU|increase (percentage points)|max");
    for (size_t g = 0; g < h_members(node) && n < MAX_BOXES; g++) {
      const smr_json *x = smr_json_at(node, g);
      boxes[n] = box_of(x, smr_json_key(x));
      mark(&boxes[n], 0, x, "p95", "p95");
      mark(&boxes[n], 1, x, "p05", "p5");
      mark(&boxes[n], 2, x, "gpu_max", "max");
      n++;
      h_tr(o);
      h_td(o, smr_json_key(node));
      h_td(o, smr_json_key(x));
      h_td_num(o, smr_json_num_or(x, "increase", NAN), 3);
      h_td_num(o, smr_json_num_or(x, "gpu_max", NAN), 1);
      h_tr_end(o);
    }
    h_table_end(o);
    char title[160];
    snprintf(title, sizeof title, "GPU memory utilization of %s",
             smr_json_key(node));
    drawn += svg_boxplots(o, title, boxes, n, "%");
  }
  if (!drawn)
    h_note(o, "GPUMemoryIncrease found no increase (it records GPU memory "
              "statistics when it triggers).");
  h_section_end(o);
}
