/* xgb_html.c - the XGBoost report as one self-contained HTML page: inline
 * CSS, inline SVG, no scripts and no external references
 * (docs/rules/CreateXgboostReport.md: hyperparameters, metric curves, feature
 * importance, label/prediction distributions with a confusion matrix or
 * residual statistics).  Sections without data are left out. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xgb_report.h"

#define HIST_BINS 20

static const char *const CSS =
    "body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;"
    "margin:2em auto;max-width:60em;color:#222;padding:0 1em}"
    "h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;"
    "margin-top:2em}h3{font-size:1.05em;margin-bottom:.3em}"
    "table{border-collapse:collapse;margin:.5em 0}"
    "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}"
    "th{background:#f3f3f3}td.key{text-align:left}"
    ".meta{color:#666}.note{color:#666;font-size:.9em}"
    "svg.chart{max-width:100%;height:auto;display:block;margin:.5em 0}"
    "svg.chart text{font-size:11px;fill:#333}"
    "svg.chart .axis{stroke:#333;fill:none}"
    "svg.chart .grid{stroke:#e5e5e5}"
    "svg.chart .bar{fill:#1f77b4}";

static void html_num(rk_text *t, double v) {
  if (isfinite(v))
    rk_text_printf(t, "%.6g", v);
  else
    rk_text_printf(t, "%s", isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf");
}

static void heading(rk_text *t, int level, const char *s) {
  rk_text_printf(t, "<h%d>", level);
  xgb_escape(t, s);
  rk_text_printf(t, "</h%d>\n", level);
}

/* --------------------------------------------------------- sections */

static void hyperparameters(rk_text *t, const xgb_data *d) {
  rk_text_printf(t, "<section id=\"hyperparameters\">\n");
  heading(t, 2, "Hyperparameters");
  rk_text_printf(t, "<table>\n<tr><th>name</th><th>value</th></tr>\n");
  for (size_t i = 0; i < d->nhyper; i++) {
    rk_text_printf(t, "<tr><td class=\"key\">");
    xgb_escape(t, d->hyper[i].key);
    rk_text_printf(t, "</td><td class=\"key\">");
    xgb_escape(t, d->hyper[i].value);
    rk_text_printf(t, "</td></tr>\n");
  }
  rk_text_printf(t, "</table>\n</section>\n");
}

/* The last finite value of a series (NaN when none). */
static double last_value(const xgb_series *s, double *step) {
  for (size_t i = s->n; i > 0; i--)
    if (isfinite(s->y[i - 1])) {
      *step = s->x[i - 1];
      return s->y[i - 1];
    }
  *step = NAN;
  return NAN;
}

static void metric(rk_text *t, const xgb_metric *m) {
  heading(t, 3, m->metric);
  rk_text title = {0};
  rk_text_printf(&title, "%s over steps", m->metric);
  char *tt = rk_text_take(&title);
  xgb_svg_lines(t, tt, "step", m->series, m->n);
  free(tt);
  rk_text_printf(t, "<table>\n<tr><th>dataset</th><th>last step</th>"
                    "<th>last value</th></tr>\n");
  for (size_t k = 0; k < m->n; k++) {
    double step, v = last_value(&m->series[k], &step);
    rk_text_printf(t, "<tr><td class=\"key\">");
    xgb_escape(t, m->series[k].name);
    rk_text_printf(t, "</td><td>");
    html_num(t, step);
    rk_text_printf(t, "</td><td>");
    html_num(t, v);
    rk_text_printf(t, "</td></tr>\n");
  }
  rk_text_printf(t, "</table>\n");
}

static void metrics(rk_text *t, const xgb_data *d) {
  rk_text_printf(t, "<section id=\"metrics\">\n");
  heading(t, 2, "Metrics");
  for (size_t i = 0; i < d->nmetrics; i++)
    metric(t, &d->metrics[i]);
  rk_text_printf(t, "</section>\n");
}

static void importance(rk_text *t, const xgb_data *d) {
  rk_text_printf(t, "<section id=\"feature_importance\">\n");
  heading(t, 2, "Feature importance");
  for (size_t i = 0; i < d->nimportance; i++) {
    const xgb_importance *imp = &d->importance[i];
    rk_text h = {0};
    rk_text_printf(&h, "%s (step %lld, top %zu of %zu features)", imp->type,
                   (long long)imp->step, imp->n, imp->features);
    char *hh = rk_text_take(&h);
    heading(t, 3, hh);
    xgb_svg_bars(t, hh, imp->bars, imp->n);
    free(hh);
  }
  rk_text_printf(t, "</section>\n");
}

/* ------------------------------------------- labels and predictions */

/* Predicted classes, one per label, or NULL when there are none. */
static double *predicted_classes(const xgb_outputs *o) {
  const double *src = o->classes ? o->classes : o->predictions;
  size_t n = o->classes ? o->nclasses : o->npredictions;
  if (n != o->nlabels)
    return NULL;
  double *c = xgb_realloc(NULL, n, sizeof *c);
  for (size_t i = 0; i < n; i++)
    c[i] = rk_round_half_away(src[i]);
  return c;
}

static bool is_class(double v) {
  return isfinite(v) && v == floor(v) && v >= 0 && v < XGB_MAX_CLASSES;
}

/* Number of classes when labels and predictions are small class ids; 0
 * for regression. */
static int class_count(const xgb_outputs *o, const double *pred) {
  int k = 0;
  for (size_t i = 0; i < o->nlabels; i++) {
    if (!is_class(o->labels[i]) || !is_class(pred[i]))
      return 0;
    int m = (int)(o->labels[i] > pred[i] ? o->labels[i] : pred[i]) + 1;
    k = m > k ? m : k;
  }
  return k;
}

static void confusion(rk_text *t, const xgb_outputs *o, const double *pred,
                      int k) {
  int64_t *c = xgb_realloc(NULL, (size_t)(k * k), sizeof *c);
  memset(c, 0, (size_t)(k * k) * sizeof *c);
  int64_t right = 0;
  for (size_t i = 0; i < o->nlabels; i++) {
    int y = (int)o->labels[i], p = (int)pred[i];
    c[y * k + p]++;
    right += y == p;
  }
  heading(t, 3, "Confusion matrix");
  rk_text_printf(t, "<table class=\"confusion\">\n<tr><th>label \\ "
                    "predicted</th>");
  for (int j = 0; j < k; j++)
    rk_text_printf(t, "<th>%d</th>", j);
  rk_text_printf(t, "</tr>\n");
  for (int i = 0; i < k; i++) {
    int64_t row = 0;
    for (int j = 0; j < k; j++)
      row += c[i * k + j];
    rk_text_printf(t, "<tr><th>%d</th>", i);
    for (int j = 0; j < k; j++) {
      double share = row ? (double)c[i * k + j] / (double)row : 0;
      rk_text_printf(t,
                     "<td style=\"background:rgba(31,119,180,%.2f)\">%lld"
                     "</td>",
                     share * 0.8, (long long)c[i * k + j]);
    }
    rk_text_printf(t, "</tr>\n");
  }
  rk_text_printf(t,
                 "</table>\n<p>Accuracy: %.4f (%lld of %zu predictions "
                 "right)</p>\n",
                 (double)right / (double)o->nlabels, (long long)right,
                 o->nlabels);
  free(c);
}

static void residuals(rk_text *t, const xgb_outputs *o) {
  double *r = xgb_realloc(NULL, o->nlabels, sizeof *r);
  size_t n = 0;
  double sum = 0, sq = 0;
  for (size_t i = 0; i < o->nlabels; i++) {
    double v = o->predictions[i] - o->labels[i];
    if (isfinite(v)) {
      r[n++] = v;
      sum += v;
    }
  }
  heading(t, 3, "Residuals (prediction - label)");
  if (n == 0) {
    rk_text_printf(t, "<p class=\"note\">No finite residuals.</p>\n");
    free(r);
    return;
  }
  double mean = sum / (double)n;
  for (size_t i = 0; i < n; i++)
    sq += (r[i] - mean) * (r[i] - mean);
  const char *name = "residual";
  const double *sets[1] = {r};
  xgb_svg_histogram(t, "Residual distribution", &name, sets, &n, 1, HIST_BINS);
  static const double qs[] = {0, 0.05, 0.25, 0.5, 0.75, 0.95, 1};
  rk_text_printf(t, "<table>\n<tr><th>count</th><th>mean</th><th>std</th>");
  for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++)
    rk_text_printf(t, "<th>q%g</th>", qs[i] * 100);
  rk_text_printf(t, "</tr>\n<tr><td>%zu</td><td>", n);
  html_num(t, mean);
  rk_text_printf(t, "</td><td>");
  html_num(t, sqrt(sq / (double)n));
  for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
    rk_text_printf(t, "</td><td>");
    html_num(t, rk_quantile(r, n, qs[i]));
  }
  rk_text_printf(t, "</td></tr>\n</table>\n");
  free(r);
}

static void outputs(rk_text *t, const xgb_data *d) {
  const xgb_outputs *o = &d->outputs;
  rk_text_printf(t, "<section id=\"labels_predictions\">\n");
  heading(t, 2, "Labels and predictions");
  rk_text_printf(t, "<p class=\"meta\">Step %lld: tensors ",
                 (long long)o->step);
  xgb_escape(t, o->labels_name);
  rk_text_printf(t, " and ");
  xgb_escape(t, o->predictions_name);
  rk_text_printf(t, ".</p>\n");
  const char *names[2] = {"labels", "predictions"};
  const double *sets[2] = {o->labels, o->predictions};
  size_t counts[2] = {o->nlabels, o->npredictions};
  xgb_svg_histogram(t, "Label and prediction distributions", names, sets,
                    counts, 2, HIST_BINS);
  double *pred = predicted_classes(o);
  int k = pred ? class_count(o, pred) : 0;
  if (k >= 1)
    confusion(t, o, pred, k);
  else if (o->npredictions == o->nlabels)
    residuals(t, o);
  else
    rk_text_printf(t,
                   "<p class=\"note\">%zu labels and %zu predictions: not "
                   "compared.</p>\n",
                   o->nlabels, o->npredictions);
  free(pred);
  rk_text_printf(t, "</section>\n");
}

char *xgb_html(const xgb_data *d, const char **sections, size_t *nsections) {
  rk_text t = {0};
  *nsections = 0;
  rk_text_printf(&t,
                 "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta "
                 "charset=\"utf-8\">\n<title>XGBoost training report"
                 "</title>\n<style>%s</style>\n</head>\n<body>\n"
                 "<h1>XGBoost training report</h1>\n<p class=\"meta\">"
                 "Global steps %lld to %lld. Written by smrules "
                 "(CreateXgboostReport).</p>\n",
                 CSS, (long long)d->first, (long long)d->last);
  if (d->nhyper) {
    hyperparameters(&t, d);
    sections[(*nsections)++] = "hyperparameters";
  }
  if (d->nmetrics) {
    metrics(&t, d);
    sections[(*nsections)++] = "metrics";
  }
  if (d->nimportance) {
    importance(&t, d);
    sections[(*nsections)++] = "feature_importance";
  }
  if (d->outputs.present) {
    outputs(&t, d);
    sections[(*nsections)++] = "labels_predictions";
  }
  if (*nsections == 0)
    rk_text_printf(&t, "<p class=\"note\">The trial holds none of the data "
                       "this report shows.</p>\n");
  rk_text_printf(&t, "</body>\n</html>\n");
  return rk_text_take(&t);
}
