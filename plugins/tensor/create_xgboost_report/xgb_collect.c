/* xgb_collect.c - reading what the XGBoost report shows from the trial:
 * hyperparameters, metric curves, feature importances and the labels and
 * predictions of the last step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "xgb_report.h"

#define HYPER_PREFIX "hyperparameters/"
#define IMPORTANCE_PREFIX "feature_importance/"
/* XGBoost metric names: "<dataset>-<metric>", e.g. "validation-rmse". */
#define METRIC_REGEX "^[A-Za-z][A-Za-z0-9_]*-[^/]+$"

void *xgb_realloc(void *p, size_t n, size_t size) {
  void *q = realloc(p, (n ? n : 1) * size);
  if (!q)
    abort();
  return q;
}

char *xgb_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  return memcpy(xgb_realloc(NULL, n, 1), s, n);
}

/* Members of `collection`, or when it is empty the names `regex` selects. */
static void names_of(smrules_trial *t, const char *collection,
                     const char *regex, smrules_strlist *out) {
  const char *c[1] = {collection};
  smrules_strlist colls = {1, c};
  rk_api->select(t, &colls, NULL, out);
  if (out->n == 0 && regex) {
    rk_api->strlist_free(out);
    rk_regex(t, regex, out);
  }
}

int xgb_report_tensors(smrules_trial *t, smrules_strlist *out) {
  static const char *const colls[] = {"hyperparameters", "metrics",
                                      "feature_importance", "labels",
                                      "predictions"};
  static const char *const regexes[] = {"^hyperparameters/",
                                        "^feature_importance/", "^labels$",
                                        "^predictions$", METRIC_REGEX};
  smrules_strlist c = {5, colls}, r = {5, regexes};
  return rk_api->select(t, &c, &r, out);
}

/* Steps of `name` within [first, last]; returns the count, *out malloc'ed
 * (or NULL). */
static size_t steps_in(smrules_trial *t, const char *name, int64_t first,
                       int64_t last, int64_t **out) {
  int64_t *steps;
  size_t n, k = 0;
  *out = NULL;
  if (rk_api->tensor_steps(t, name, SMRULES_MODE_GLOBAL, &steps, &n) != 0)
    return 0;
  *out = xgb_realloc(NULL, n, sizeof **out);
  for (size_t i = 0; i < n; i++)
    if (steps[i] >= first && steps[i] <= last)
      (*out)[k++] = steps[i];
  rk_api->steps_free(steps);
  return k;
}

/* The first element of a scalar tensor, or NaN. */
static double scalar_at(smrules_trial *t, const char *name, int64_t g) {
  smrules_tensor v;
  if (rk_value(t, name, g, &v) != 0)
    return NAN;
  double x = NAN;
  if (v.count >= 1) {
    double *all = rk_values(&v);
    x = all ? all[0] : NAN;
    free(all);
  }
  rk_api->release(&v);
  return x;
}

/* ----------------------------------------------------- hyperparameters */

/* A hyperparameter value as text: strings as saved, numbers with %g. */
static char *value_text(const smrules_tensor *v) {
  rk_text out = {0};
  for (int64_t i = 0; i < v->count && i < 16; i++) {
    if (i)
      rk_text_printf(&out, ", ");
    if (v->dtype == SMRULES_DT_STRING && v->strings)
      rk_text_printf(&out, "%.*s",
                     (int)(v->string_lens[i] < 200 ? v->string_lens[i] : 200),
                     (const char *)v->strings[i]);
    else
      rk_text_printf(&out, "%.10g", rk_api->get(v, i));
  }
  if (v->count > 16)
    rk_text_printf(&out, ", ...");
  return rk_text_take(&out);
}

static void collect_hyper(smrules_trial *t, int64_t last, xgb_data *d) {
  smrules_strlist names;
  names_of(t, "hyperparameters", "^" HYPER_PREFIX, &names);
  for (size_t i = 0; i < names.n; i++) {
    int64_t *steps;
    size_t n = steps_in(t, names.v[i], 0, last, &steps);
    smrules_tensor v;
    if (n > 0 && rk_value(t, names.v[i], steps[0], &v) == 0) {
      const char *key = names.v[i];
      if (strncmp(key, HYPER_PREFIX, strlen(HYPER_PREFIX)) == 0)
        key += strlen(HYPER_PREFIX);
      d->hyper = xgb_realloc(d->hyper, d->nhyper + 1, sizeof *d->hyper);
      d->hyper[d->nhyper++] = (xgb_pair){xgb_strdup(key), value_text(&v)};
      rk_api->release(&v);
    }
    free(steps);
  }
  rk_api->strlist_free(&names);
}

/* ------------------------------------------------------------- metrics */

static xgb_metric *metric_of(xgb_data *d, const char *metric) {
  for (size_t i = 0; i < d->nmetrics; i++)
    if (strcmp(d->metrics[i].metric, metric) == 0)
      return &d->metrics[i];
  d->metrics = xgb_realloc(d->metrics, d->nmetrics + 1, sizeof *d->metrics);
  xgb_metric *m = &d->metrics[d->nmetrics++];
  *m = (xgb_metric){xgb_strdup(metric), NULL, 0};
  return m;
}

static void collect_metric(smrules_trial *t, const char *name, int64_t first,
                           int64_t last, xgb_data *d) {
  int64_t *steps;
  size_t n = steps_in(t, name, first, last, &steps);
  const char *dash = strchr(name, '-');
  if (n > 0) {
    xgb_metric *m = metric_of(d, dash ? dash + 1 : name);
    m->series = xgb_realloc(m->series, m->n + 1, sizeof *m->series);
    xgb_series *s = &m->series[m->n++];
    s->name = dash ? strndup(name, (size_t)(dash - name)) : xgb_strdup(name);
    if (!s->name)
      abort();
    s->n = n;
    s->x = xgb_realloc(NULL, n, sizeof *s->x);
    s->y = xgb_realloc(NULL, n, sizeof *s->y);
    for (size_t i = 0; i < n; i++) {
      s->x[i] = (double)steps[i];
      s->y[i] = scalar_at(t, name, steps[i]);
    }
  }
  free(steps);
}

static void collect_metrics(smrules_trial *t, int64_t first, int64_t last,
                            xgb_data *d) {
  smrules_strlist names;
  names_of(t, "metrics", METRIC_REGEX, &names);
  for (size_t i = 0; i < names.n; i++)
    collect_metric(t, names.v[i], first, last, d);
  rk_api->strlist_free(&names);
}

/* -------------------------------------------------- feature importance */

static int by_value_desc(const void *a, const void *b) {
  const xgb_bar *x = a, *y = b;
  if (x->value != y->value)
    return x->value < y->value ? 1 : -1;
  return strcmp(x->label, y->label);
}

/* "feature_importance/<type>/<feature>": the type (malloc'ed) or NULL. */
static char *importance_type(const char *name, const char **feature) {
  if (strncmp(name, IMPORTANCE_PREFIX, strlen(IMPORTANCE_PREFIX)) != 0)
    return NULL;
  const char *type = name + strlen(IMPORTANCE_PREFIX);
  const char *slash = strchr(type, '/');
  if (!slash || slash == type || !slash[1])
    return NULL;
  *feature = slash + 1;
  char *out = strndup(type, (size_t)(slash - type));
  if (!out)
    abort();
  return out;
}

/* The features of `type` at the latest step in range that has any. */
static void collect_type(smrules_trial *t, const smrules_strlist *names,
                         const char *type, int64_t first, int64_t last,
                         xgb_data *d) {
  int64_t step = -1;
  for (size_t i = 0; i < names->n; i++) {
    const char *feature;
    char *ty = importance_type(names->v[i], &feature);
    int64_t *steps;
    size_t n = ty && strcmp(ty, type) == 0
                   ? steps_in(t, names->v[i], first, last, &steps)
                   : (steps = NULL, 0);
    if (n > 0 && steps[n - 1] > step)
      step = steps[n - 1];
    free(steps);
    free(ty);
  }
  if (step < 0)
    return;
  xgb_importance imp = {xgb_strdup(type), step, NULL, 0, 0};
  for (size_t i = 0; i < names->n; i++) {
    const char *feature;
    char *ty = importance_type(names->v[i], &feature);
    double x =
        ty && strcmp(ty, type) == 0 ? scalar_at(t, names->v[i], step) : NAN;
    free(ty);
    if (isnan(x))
      continue;
    imp.bars = xgb_realloc(imp.bars, imp.n + 1, sizeof *imp.bars);
    imp.bars[imp.n++] = (xgb_bar){xgb_strdup(feature), x};
  }
  qsort(imp.bars, imp.n, sizeof *imp.bars, by_value_desc);
  imp.features = imp.n;
  for (size_t i = XGB_TOP_FEATURES; i < imp.n; i++)
    free(imp.bars[i].label);
  if (imp.n > XGB_TOP_FEATURES)
    imp.n = XGB_TOP_FEATURES;
  d->importance =
      xgb_realloc(d->importance, d->nimportance + 1, sizeof *d->importance);
  d->importance[d->nimportance++] = imp;
}

static void collect_importance(smrules_trial *t, int64_t first, int64_t last,
                               xgb_data *d) {
  smrules_strlist names;
  rk_regex(t, "^" IMPORTANCE_PREFIX, &names);
  char **types = NULL;
  size_t ntypes = 0;
  for (size_t i = 0; i < names.n; i++) {
    const char *feature;
    char *ty = importance_type(names.v[i], &feature);
    bool seen = !ty;
    for (size_t k = 0; ty && k < ntypes && !seen; k++)
      seen = strcmp(types[k], ty) == 0;
    if (seen) {
      free(ty);
      continue;
    }
    types = xgb_realloc(types, ntypes + 1, sizeof *types);
    types[ntypes++] = ty;
  }
  for (size_t k = 0; k < ntypes; k++) {
    collect_type(t, &names, types[k], first, last, d);
    free(types[k]);
  }
  free(types);
  rk_api->strlist_free(&names);
}

/* ------------------------------------------------ labels / predictions */

/* The tensor called `name`, else the first member of the collection. */
static char *output_tensor(smrules_trial *t, const char *name) {
  if (rk_api->has_tensor(t, name))
    return xgb_strdup(name);
  smrules_strlist m;
  const char *c[1] = {name};
  smrules_strlist colls = {1, c};
  rk_api->select(t, &colls, NULL, &m);
  char *out = m.n ? xgb_strdup(m.v[0]) : NULL;
  rk_api->strlist_free(&m);
  return out;
}

/* Latest step in range at which both tensors have a value, or -1. */
static int64_t common_last_step(smrules_trial *t, const char *a, const char *b,
                                int64_t first, int64_t last) {
  int64_t *sa, *sb, found = -1;
  size_t na = steps_in(t, a, first, last, &sa);
  size_t nb = steps_in(t, b, first, last, &sb);
  for (size_t i = na, j = nb; i > 0 && j > 0 && found < 0;) {
    if (sa[i - 1] == sb[j - 1])
      found = sa[i - 1];
    else if (sa[i - 1] > sb[j - 1])
      i--;
    else
      j--;
  }
  free(sa);
  free(sb);
  return found;
}

static double *values_at(smrules_trial *t, const char *name, int64_t g,
                         size_t *n, double **classes, size_t *nclasses) {
  smrules_tensor v;
  *n = 0;
  if (rk_value(t, name, g, &v) != 0)
    return NULL;
  double *x = rk_is_numeric(&v) ? rk_values(&v) : NULL;
  if (x)
    *n = (size_t)v.count;
  if (classes && x && v.ndim >= 2 && v.shape[v.ndim - 1] > 1)
    *classes = rk_argmax_last_axis(&v, nclasses);
  rk_api->release(&v);
  return x;
}

static void collect_outputs(smrules_trial *t, int64_t first, int64_t last,
                            xgb_data *d) {
  xgb_outputs *o = &d->outputs;
  o->labels_name = output_tensor(t, "labels");
  o->predictions_name = output_tensor(t, "predictions");
  if (!o->labels_name || !o->predictions_name)
    return;
  o->step =
      common_last_step(t, o->labels_name, o->predictions_name, first, last);
  if (o->step < 0)
    return;
  o->labels = values_at(t, o->labels_name, o->step, &o->nlabels, NULL, NULL);
  o->predictions = values_at(t, o->predictions_name, o->step, &o->npredictions,
                             &o->classes, &o->nclasses);
  o->present = o->nlabels > 0 && o->npredictions > 0;
}

void xgb_collect(smrules_trial *t, int64_t first, int64_t last, xgb_data *d) {
  memset(d, 0, sizeof *d);
  d->first = first;
  d->last = last;
  collect_hyper(t, last, d);
  collect_metrics(t, first, last, d);
  collect_importance(t, first, last, d);
  collect_outputs(t, first, last, d);
}

void xgb_data_free(xgb_data *d) {
  for (size_t i = 0; i < d->nhyper; i++) {
    free(d->hyper[i].key);
    free(d->hyper[i].value);
  }
  free(d->hyper);
  for (size_t i = 0; i < d->nmetrics; i++) {
    for (size_t k = 0; k < d->metrics[i].n; k++) {
      free(d->metrics[i].series[k].name);
      free(d->metrics[i].series[k].x);
      free(d->metrics[i].series[k].y);
    }
    free(d->metrics[i].series);
    free(d->metrics[i].metric);
  }
  free(d->metrics);
  for (size_t i = 0; i < d->nimportance; i++) {
    for (size_t k = 0; k < d->importance[i].n; k++)
      free(d->importance[i].bars[k].label);
    free(d->importance[i].bars);
    free(d->importance[i].type);
  }
  free(d->importance);
  free(d->outputs.labels_name);
  free(d->outputs.predictions_name);
  free(d->outputs.labels);
  free(d->outputs.predictions);
  free(d->outputs.classes);
  memset(d, 0, sizeof *d);
}
