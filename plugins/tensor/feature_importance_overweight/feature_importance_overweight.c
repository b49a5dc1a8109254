/* FeatureImportanceOverweight (docs/rules/FeatureImportanceOverweight.md): the
 * nfeatures most important features of an XGBoost model carry more than
 * `threshold` of the total importance. */
#include <stdlib.h>
#include <string.h>

#include "smrules/rulekit.h"

typedef struct settings {
  double threshold;
  int64_t nfeatures;
  const char *tensor_regex;
} settings;

static const smrules_param params[] = {
    SMRULES_FLOAT_PARAM("threshold", "0.8", settings, threshold,
                        "largest share of the total importance the top "
                        "nfeatures may hold",
                        SMRULES_RANGE(0, 1)),
    SMRULES_INT_PARAM("nfeatures", "3", settings, nfeatures,
                      "how many of the most important features are summed",
                      SMRULES_MIN(1)),
    SMRULES_STRING_PARAM(
        "tensor_regex", ".*feature_importance/weight", settings, tensor_regex,
        "regex selecting the importance tensors, one scalar per "
        "feature (search semantics)",
        SMRULES_REGEX),
    SMRULES_END_PARAMS};

static int init(smrules_ctx *ctx, const void *s, void **state) {
  *state = (void *)s;
  return 0;
}

typedef struct feature {
  const char *name;
  double value;
} feature;

/* Descending by importance, then by name for a stable report. */
static int by_importance(const void *a, const void *b) {
  const feature *x = a, *y = b;
  if (x->value != y->value)
    return x->value < y->value ? 1 : -1;
  return strcmp(x->name, y->name);
}

/* The scalar importances saved at g; returns how many. */
static size_t collect(smrules_trial *t, const smrules_strlist *names, int64_t g,
                      feature *out) {
  size_t n = 0;
  for (size_t i = 0; i < names->n; i++) {
    smrules_tensor v;
    if (rk_value(t, names->v[i], g, &v) != 0)
      continue;
    if (rk_is_numeric(&v) && rk_is_scalar(&v))
      out[n++] = (feature){names->v[i], rk_api->get(&v, 0)};
    rk_api->release(&v);
  }
  return n;
}

static int report(smrules_ctx *ctx, const feature *f, size_t top,
                  double share) {
  const char **names = malloc(top * sizeof *names);
  if (!names) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  for (size_t i = 0; i < top; i++)
    names[i] = f[i].name;
  smrules_json *j = rk_api->violation(ctx);
  rk_api->json_num(j, "share", share);
  rk_api->json_strs(j, "top_features", names, top);
  free(names);
  return SMRULES_TRIGGERED;
}

static int invoke(smrules_ctx *ctx, void *state, int64_t g) {
  const settings *s = state;
  smrules_trial *t = rk_api->trial(ctx);
  smrules_strlist names;
  if (rk_regex(t, s->tensor_regex, &names) != 0)
    return SMRULES_SKIPPED;
  feature *f = malloc((names.n ? names.n : 1) * sizeof *f);
  if (!f) {
    rk_api->strlist_free(&names);
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  size_t n = collect(t, &names, g, f);
  int rc = SMRULES_SKIPPED;
  double total = 0, top_sum = 0;
  for (size_t i = 0; i < n; i++)
    total += f[i].value;
  /* At most nfeatures features hold 100 % trivially: not evaluated (the
   * docs/rules/FeatureImportanceOverweight.md Decision); nor is a step without
   * positive total. */
  if (n > (size_t)s->nfeatures && total > 0) {
    qsort(f, n, sizeof *f, by_importance);
    for (size_t i = 0; i < (size_t)s->nfeatures; i++)
      top_sum += f[i].value;
    double share = top_sum / total;
    rk_api->datapoints(ctx, (int64_t)n);
    rc = share > s->threshold ? report(ctx, f, (size_t)s->nfeatures, share)
                              : SMRULES_NO_TRIGGER;
  }
  free(f);
  rk_api->strlist_free(&names);
  return rc;
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "FeatureImportanceOverweight",
    .description = "a few features carry most of an XGBoost model's "
                   "importance",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "collection feature_importance "
                   "(feature_importance/<type>/<feature> scalars)",
    .init = init,
    .invoke_at_step = invoke,
    .flags = SMRULES_RULE_STATELESS,
};

RK_PLUGIN(rule)
