/* ClassImbalance (docs/rules/ClassImbalance.md): label classes whose counts
 * differ by more than threshold_imbalance, and classes mostly mispredicted.
 * Counts accumulate over the steps (the rule's state); the checks start once
 * `samples` labels have been seen. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "smrules/rulekit.h"

typedef struct settings {
  double threshold_imbalance;
  double threshold_misprediction;
  int64_t samples;
  bool argmax;
  const char *labels_regex, *predictions_regex;
} settings;

static const smrules_param params[] = {
    SMRULES_FLOAT_PARAM(
        "threshold_imbalance", "10", settings, threshold_imbalance,
        "largest allowed ratio of the most to the least frequent "
        "class",
        SMRULES_MIN(0)),
    SMRULES_FLOAT_PARAM("threshold_misprediction", "0.7", settings,
                        threshold_misprediction,
                        "largest allowed share of wrong predictions per class",
                        SMRULES_RANGE(0, 1)),
    SMRULES_INT_PARAM("samples", "500", settings, samples,
                      "labels to accumulate before checking", SMRULES_MIN(0)),
    SMRULES_BOOL_PARAM("argmax", "False", settings, argmax,
                       "reduce predictions by argmax over the last axis"),
    SMRULES_STRING_PARAM("labels_regex", ".*labels", settings, labels_regex,
                         "regex selecting the label tensors (search semantics)",
                         SMRULES_REGEX),
    SMRULES_STRING_PARAM("predictions_regex", ".*predictions", settings,
                         predictions_regex,
                         "regex selecting the prediction tensors (search "
                         "semantics)",
                         SMRULES_REGEX),
    SMRULES_END_PARAMS};

/* Counts of one label class.  `predicted`: labels of the class that came
 * with a prediction (all of them when predictions are saved with every
 * label), `correct`: of those, predicted right. */
typedef struct klass {
  int64_t id, count, predicted, correct;
} klass;

/* Classes 0 .. SLOTS - 1 are found by index (a batch's labels come in any
 * order, and a binary search per label mispredicts its branches); others
 * by a binary search. */
#define SLOTS 256

typedef struct state {
  const settings *s;
  klass *v; /* sorted by id */
  size_t n;
  uint32_t slot[SLOTS]; /* 1 + the index in v of class id, or 0 */
} state;

static void destroy(void *p) {
  state *st = p;
  free(st->v);
  free(st);
}

static int init(smrules_ctx *ctx, const void *s, void **out) {
  state *st = calloc(1, sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = s;
  *out = st;
  return 0;
}

/* The entry of class `id`, inserted in order when new (NULL: no memory). */
static klass *class_of(state *st, int64_t id) {
  if (id >= 0 && id < SLOTS && st->slot[id])
    return &st->v[st->slot[id] - 1];
  size_t lo = 0, hi = st->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (st->v[mid].id < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < st->n && st->v[lo].id == id)
    return &st->v[lo];
  klass *v = realloc(st->v, (st->n + 1) * sizeof *v);
  if (!v)
    return NULL;
  st->v = v;
  memmove(v + lo + 1, v + lo, (st->n - lo) * sizeof *v);
  v[lo] = (klass){id, 0, 0, 0};
  st->n++;
  for (size_t i = lo; i < st->n; i++) /* the entries that moved, and it */
    if (v[i].id >= 0 && v[i].id < SLOTS)
      st->slot[v[i].id] = (uint32_t)(i + 1);
  return &v[lo];
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Values at g of the tensors `regex` selects, in name order, concatenated
 * (argmax-reduced when asked).  Returns the number of values; *out is
 * malloc'ed. */
static size_t gather(smrules_trial *t, const char *regex, int64_t g,
                     bool argmax, double **out, int64_t *tensors) {
  smrules_strlist names;
  *out = NULL;
  if (rk_regex(t, regex, &names) != 0)
    return 0;
  const char **sorted = malloc((names.n + 1) * sizeof *sorted);
  size_t total = 0;
  for (size_t i = 0; sorted && i < names.n; i++)
    sorted[i] = names.v[i];
  if (sorted)
    qsort(sorted, names.n, sizeof *sorted, cmp_str);
  for (size_t i = 0; sorted && i < names.n; i++) {
    smrules_tensor v;
    if (rk_value(t, sorted[i], g, &v) != 0)
      continue;
    size_t k = (size_t)v.count;
    double *x = !rk_is_numeric(&v) ? NULL
                : argmax           ? rk_argmax_last_axis(&v, &k)
                                   : rk_values(&v);
    double *grown = x ? realloc(*out, (total + k) * sizeof *grown) : NULL;
    if (grown) {
      memcpy(grown + total, x, k * sizeof *x);
      *out = grown;
      total += k;
      (*tensors)++;
    }
    free(x);
    rk_api->release(&v);
  }
  free(sorted);
  rk_api->strlist_free(&names);
  return total;
}

/* Adds one step's labels (and predictions when `yhat`). */
static bool accumulate(state *st, const double *y, const double *yhat,
                       size_t n) {
  for (size_t i = 0; i < n; i++) {
    double c = rk_round_half_away_inline(y[i]);
    if (!(fabs(c) < 9.0e18)) /* not a class: NaN, infinite or huge */
      continue;
    klass *k = class_of(st, (int64_t)c);
    if (!k)
      return false;
    k->count++;
    if (yhat) {
      k->predicted++;
      k->correct += rk_round_half_away_inline(yhat[i]) == c;
    }
  }
  return true;
}

static int64_t check(smrules_ctx *ctx, const state *st) {
  int64_t total = 0, max = 0, min = INT64_MAX, violations = 0;
  for (size_t i = 0; i < st->n; i++) {
    total += st->v[i].count;
    if (st->v[i].count > 0) {
      max = st->v[i].count > max ? st->v[i].count : max;
      min = st->v[i].count < min ? st->v[i].count : min;
    }
  }
  if (total == 0 || total < st->s->samples)
    return 0;
  double ratio = (double)max / (double)min;
  if (ratio > st->s->threshold_imbalance) {
    smrules_json *j = rk_api->violation(ctx);
    rk_api->json_str(j, "check", "imbalance");
    rk_api->json_num(j, "ratio", ratio);
    violations++;
  }
  for (size_t i = 0; i < st->n; i++) {
    const klass *k = &st->v[i];
    if (k->predicted == 0)
      continue;
    double wrong = 1.0 - (double)k->correct / (double)k->predicted;
    if (wrong > st->s->threshold_misprediction) {
      smrules_json *j = rk_api->violation(ctx);
      rk_api->json_str(j, "check", "misprediction");
      rk_api->json_int(j, "class", k->id);
      rk_api->json_num(j, "fraction", wrong);
      violations++;
    }
  }
  return violations;
}

static int invoke(smrules_ctx *ctx, void *p, int64_t g) {
  state *st = p;
  smrules_trial *t = rk_api->trial(ctx);
  double *y, *yhat;
  int64_t tensors = 0;
  size_t n = gather(t, st->s->labels_regex, g, false, &y, &tensors);
  size_t m =
      gather(t, st->s->predictions_regex, g, st->s->argmax, &yhat, &tensors);
  int rc = SMRULES_SKIPPED;
  if (n > 0) {
    if (m > 0 && m != n)
      rk_api->log(ctx, SMRULES_LOG_WARNING,
                  "step %lld: %zu labels but %zu predictions; predictions "
                  "ignored",
                  (long long)g, n, m);
    if (!accumulate(st, y, m == n ? yhat : NULL, n)) {
      rk_api->fail(ctx, "out of memory");
      rc = SMRULES_ERR;
    } else {
      rk_api->datapoints(ctx, tensors);
      rc = check(ctx, st) ? SMRULES_TRIGGERED : SMRULES_NO_TRIGGER;
    }
  }
  free(y);
  free(yhat);
  return rc;
}

/* State text: "v1" then "C id count predicted correct" per class. */
static char *save_state(smrules_ctx *ctx, void *p) {
  const state *st = p;
  rk_text t = {0};
  rk_text_printf(&t, "v1");
  for (size_t i = 0; i < st->n; i++)
    rk_text_printf(&t, "\nC %lld %lld %lld %lld", (long long)st->v[i].id,
                   (long long)st->v[i].count, (long long)st->v[i].predicted,
                   (long long)st->v[i].correct);
  return rk_text_take(&t);
}

static void forget_classes(state *st) {
  free(st->v);
  st->v = NULL;
  st->n = 0;
  memset(st->slot, 0, sizeof st->slot);
}

static int load_state(smrules_ctx *ctx, void *p, const char *text) {
  state *st = p;
  rk_scan sc = {text, false};
  forget_classes(st);
  bool ok = rk_scan_word(&sc, "v1");
  while (ok && rk_scan_word(&sc, "C")) {
    int64_t id;
    klass in;
    ok = rk_scan_int(&sc, &id) && rk_scan_int(&sc, &in.count) &&
         rk_scan_int(&sc, &in.predicted) && rk_scan_int(&sc, &in.correct);
    klass *k = ok ? class_of(st, id) : NULL;
    ok = k != NULL;
    if (k) {
      k->count = in.count;
      k->predicted = in.predicted;
      k->correct = in.correct;
    }
  }
  if (ok && rk_scan_end(&sc))
    return 0;
  forget_classes(st);
  rk_api->log(ctx, SMRULES_LOG_WARNING,
              "stored state unreadable; evaluating from the start");
  return -1;
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "ClassImbalance",
    .description = "imbalanced label classes and classes that are mostly "
                   "mispredicted",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "label and prediction tensors matched by labels_regex / "
                   "predictions_regex",
    .init = init,
    .invoke_at_step = invoke,
    .destroy = destroy,
    .save_state = save_state,
    .load_state = load_state,
};

RK_PLUGIN(rule)
