/* xgb_report.h - CreateXgboostReport (docs/rules/CreateXgboostReport.md): what
 * is read from an XGBoost trial (xgb_collect.c), how it becomes a
 * self-contained HTML page (xgb_html.c) and the inline SVG charts (xgb_svg.c).
 */
#ifndef XGB_REPORT_H
#define XGB_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smrules/rulekit.h"

/* realloc that gives up on exhausted memory (nothing sensible remains to
 * be done); sizes are bounded by data the host already holds. */
void *xgb_realloc(void *p, size_t n, size_t size);
char *xgb_strdup(const char *s);

/* One line of a chart: the values of a tensor over steps. */
typedef struct xgb_series {
  char *name;
  size_t n;
  double *x, *y;
} xgb_series;

/* One metric (e.g. "rmse") with a series per dataset ("train", ...). */
typedef struct xgb_metric {
  char *metric;
  xgb_series *series;
  size_t n;
} xgb_metric;

typedef struct xgb_pair {
  char *key, *value;
} xgb_pair;

typedef struct xgb_bar {
  char *label;
  double value;
} xgb_bar;

/* Feature importance of one type at the last step that has it. */
typedef struct xgb_importance {
  char *type;
  int64_t step;
  xgb_bar *bars; /* descending, at most XGB_TOP_FEATURES */
  size_t n, features;
} xgb_importance;

#define XGB_TOP_FEATURES 20
#define XGB_MAX_CLASSES 50 /* larger label sets are treated as regression */

/* Labels and predictions of the last step that has both. */
typedef struct xgb_outputs {
  bool present;
  int64_t step;
  char *labels_name, *predictions_name;
  double *labels, *predictions; /* predictions as saved, flattened */
  size_t nlabels, npredictions;
  double *classes; /* argmax over the last axis when 2-D, else NULL */
  size_t nclasses;
} xgb_outputs;

typedef struct xgb_data {
  int64_t first, last; /* evaluated global steps */
  xgb_pair *hyper;
  size_t nhyper;
  xgb_metric *metrics;
  size_t nmetrics;
  xgb_importance *importance;
  size_t nimportance;
  xgb_outputs outputs;
} xgb_data;

/* Reads everything the report shows for steps first..last. */
void xgb_collect(smrules_trial *t, int64_t first, int64_t last, xgb_data *d);
void xgb_data_free(xgb_data *d);

/* Names of the tensors the report reads (for counting datapoints). */
int xgb_report_tensors(smrules_trial *t, smrules_strlist *out);

/* The HTML page; `sections` receives the ids of the sections written
 * (static strings, at most 4). */
char *xgb_html(const xgb_data *d, const char **sections, size_t *nsections);

/* ---------------------------------------------------------------- SVG */
void xgb_escape(rk_text *t, const char *s); /* HTML/XML text and attrs */
void xgb_svg_lines(rk_text *t, const char *title, const char *xlabel,
                   const xgb_series *s, size_t n);
void xgb_svg_bars(rk_text *t, const char *title, const xgb_bar *b, size_t n);
/* Histograms of one or two value sets over common NumPy-style bins. */
void xgb_svg_histogram(rk_text *t, const char *title, const char *const *names,
                       const double *const *values, const size_t *counts,
                       size_t nsets, int bins);

/* NumPy's histogram with `bins` equal bins
 * (docs/rule-semantics.md#numeric-conventions); counts has `bins` entries,
 * edges bins+1.  Non-finite values are not counted. */
void xgb_histogram(const double *x, size_t n, int bins, int64_t *counts,
                   double *edges);

#endif
