/* Confusion (docs/rules/Confusion.md): the confusion matrix of a classifier at
 * one step.  For every predicted class (column) the share of right predictions
 * must reach min_diag and the share of each wrong true class must not
 * exceed max_off_diag; both are normalised by the column sum (R5). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "smrules/rulekit.h"

typedef struct settings {
  int64_t category_no;
  const char *labels, *predictions;
  const char *labels_collection, *predictions_collection;
  double min_diag, max_off_diag;
} settings;

#define STRING_PARAM(nm, field, desc)                                          \
  {                                                                            \
    .type = SMRULES_PARAM_STRING, .name = #nm, .default_value = #field,        \
    .offset = SMRULES_OFFSET(settings, nm), .description = desc                \
  }
#define SHARE_PARAM(nm, def, desc)                                             \
  {                                                                            \
    .type = SMRULES_PARAM_FLOAT, .name = #nm, .default_value = def,            \
    .flags = SMRULES_P_MIN | SMRULES_P_MAX, .min = 0, .max = 1,                \
    .offset = SMRULES_OFFSET(settings, nm), .description = desc                \
  }

/* Declared in SageMaker's positional order. */
static const smrules_param params[] = {
    SMRULES_INT_PARAM("category_no", NULL, settings, category_no,
                      "number of classes (default: largest class seen + 1)",
                      SMRULES_MIN(2)),
    STRING_PARAM(labels, labels, "name of the label tensor"),
    STRING_PARAM(predictions, predictions, "name of the prediction tensor"),
    STRING_PARAM(labels_collection, labels,
                 "collection of label tensors, used when no tensor is named "
                 "`labels`"),
    STRING_PARAM(predictions_collection, predictions,
                 "collection of prediction tensors, used when no tensor is "
                 "named `predictions`"),
    SHARE_PARAM(min_diag, "0.9",
                "smallest share of right predictions per predicted class"),
    SHARE_PARAM(max_off_diag, "0.1",
                "largest share of one wrong true class per predicted class"),
    SMRULES_END_PARAMS};

typedef struct state {
  const settings *s;
  bool fixed_k; /* category_no was given */
} state;

static int init(smrules_ctx *ctx, const void *s, void **out) {
  state *st = calloc(1, sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = s;
  st->fixed_k = rk_api->param_is_set(ctx, "category_no");
  *out = st;
  return 0;
}

/* A growing array of doubles. */
typedef struct vec {
  double *v;
  size_t n;
} vec;

static bool vec_append(vec *a, const double *v, size_t n) {
  double *p = realloc(a->v, (a->n + n + 1) * sizeof *p);
  if (!p)
    return false;
  memcpy(p + a->n, v, n * sizeof *v);
  a->v = p;
  a->n += n;
  return true;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Values at g of the tensor `name` if the trial has it, else of the sorted
 * members of `collection`; predictions are reduced by argmax first.
 * Returns the number of tensors read. */
static int64_t gather(smrules_trial *t, const char *name,
                      const char *collection, int64_t g, bool argmax,
                      vec *out) {
  smrules_strlist members = {0, NULL};
  const char *one[1] = {name};
  const char *const *names = one;
  size_t n = 1;
  const char **sorted = NULL;
  if (!rk_api->has_tensor(t, name)) {
    rk_api->collection(t, collection, &members);
    sorted = malloc((members.n + 1) * sizeof *sorted);
    n = sorted ? members.n : 0;
    for (size_t i = 0; i < n; i++)
      sorted[i] = members.v[i];
    if (n > 1)
      qsort(sorted, n, sizeof *sorted, cmp_str);
    names = sorted;
  }
  int64_t used = 0;
  for (size_t i = 0; i < n; i++) {
    smrules_tensor v;
    if (rk_value(t, names[i], g, &v) != 0)
      continue;
    size_t k = 0;
    double *x = rk_is_numeric(&v)
                    ? (argmax ? rk_argmax_last_axis(&v, &k) : rk_values(&v))
                    : NULL;
    if (x && !argmax)
      k = (size_t)v.count;
    if (x && vec_append(out, x, k))
      used++;
    free(x);
    rk_api->release(&v);
  }
  free(sorted);
  rk_api->strlist_free(&members);
  return used;
}

typedef struct pair {
  int64_t pred, label;
} pair;

static int by_column(const void *a, const void *b) {
  const pair *x = a, *y = b;
  if (x->pred != y->pred)
    return x->pred < y->pred ? -1 : 1;
  return (x->label > y->label) - (x->label < y->label);
}

/* Integer classes in [0, K); false (with a warning) when a value is not. */
static bool to_pairs(smrules_ctx *ctx, const state *st, const vec *y,
                     const vec *yhat, pair *out) {
  double k = st->fixed_k ? (double)st->s->category_no : 4.0e18;
  for (size_t i = 0; i < y->n; i++) {
    double a = rk_round_half_away_inline(y->v[i]);
    double b = rk_round_half_away_inline(yhat->v[i]);
    if (!(a >= 0 && a < k && b >= 0 && b < k)) {
      rk_api->log(ctx, SMRULES_LOG_WARNING,
                  "step skipped: label %g / prediction %g is not a class in "
                  "[0, %s)",
                  y->v[i], yhat->v[i],
                  st->fixed_k ? "category_no" : "inferred count");
      return false;
    }
    out[i] = (pair){(int64_t)b, (int64_t)a};
  }
  return true;
}

static void violation(smrules_ctx *ctx, const char *check, int64_t row,
                      int64_t col, double ratio) {
  smrules_json *j = rk_api->violation(ctx);
  rk_api->json_str(j, "check", check);
  rk_api->json_int(j, "row", row);
  rk_api->json_int(j, "column", col);
  rk_api->json_num(j, "ratio", ratio);
}

/* Checks of one column: pairs [b, e) all predicted as class i. */
static int64_t check_column(smrules_ctx *ctx, const settings *s, const pair *p,
                            size_t b, size_t e) {
  int64_t col = p[b].pred, violations = 0;
  double sum = (double)(e - b);
  size_t right = 0;
  for (size_t k = b; k < e; k++)
    right += p[k].label == col;
  if ((double)right / sum < s->min_diag) {
    violation(ctx, "diag", col, col, (double)right / sum);
    violations++;
  }
  for (size_t k = b, end; k < e; k = end) {
    for (end = k; end < e && p[end].label == p[k].label; end++)
      ;
    double ratio = (double)(end - k) / sum;
    if (p[k].label != col && ratio > s->max_off_diag) {
      violation(ctx, "off_diag", p[k].label, col, ratio);
      violations++;
    }
  }
  return violations;
}

static int evaluate(smrules_ctx *ctx, const state *st, const vec *y,
                    const vec *yhat) {
  pair *p = malloc(y->n * sizeof *p);
  if (!p) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  if (!to_pairs(ctx, st, y, yhat, p)) {
    free(p);
    return SMRULES_SKIPPED;
  }
  qsort(p, y->n, sizeof *p, by_column);
  int64_t violations = 0;
  for (size_t b = 0, e; b < y->n; b = e) {
    for (e = b; e < y->n && p[e].pred == p[b].pred; e++)
      ;
    violations += check_column(ctx, st->s, p, b, e);
  }
  free(p);
  return violations ? SMRULES_TRIGGERED : SMRULES_NO_TRIGGER;
}

static int invoke(smrules_ctx *ctx, void *state_, int64_t g) {
  const state *st = state_;
  const settings *s = st->s;
  smrules_trial *t = rk_api->trial(ctx);
  vec y = {0}, yhat = {0};
  int64_t used = gather(t, s->labels, s->labels_collection, g, false, &y);
  used += gather(t, s->predictions, s->predictions_collection, g, true, &yhat);
  int rc = SMRULES_SKIPPED;
  if (y.n == 0 || yhat.n == 0) {
    /* nothing to compare at this step */
  } else if (y.n != yhat.n) {
    rk_api->log(ctx, SMRULES_LOG_WARNING,
                "step %lld skipped: %zu labels but %zu predictions",
                (long long)g, y.n, yhat.n);
  } else {
    rc = evaluate(ctx, st, &y, &yhat);
    if (rc != SMRULES_SKIPPED && rc != SMRULES_ERR)
      rk_api->datapoints(ctx, used);
  }
  free(y.v);
  free(yhat.v);
  return rc;
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "Confusion",
    .description = "confusion matrix of a classifier: too few right or too "
                   "many wrong predictions per predicted class",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "tensors labels/predictions, else collections "
                   "labels/predictions",
    .init = init,
    .invoke_at_step = invoke,
    .destroy = free,
    .flags = SMRULES_RULE_STATELESS,
};

RK_PLUGIN(rule)
