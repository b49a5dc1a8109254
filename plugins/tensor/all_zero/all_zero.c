/* AllZero (docs/rules/AllZero.md): tensors whose share of elements equal to
 * zero reaches `threshold` percent. */
#include <stdlib.h>

#include "smrules/rulekit.h"

typedef struct settings {
  smrules_strlist collection_names;
  smrules_strlist tensor_regex;
  double threshold;
} settings;

static const smrules_param params[] = {
    SMRULES_STRLIST_PARAM("collection_names", NULL, settings, collection_names,
                          "collections whose tensors are checked"),
    SMRULES_STRLIST_PARAM("tensor_regex", NULL, settings, tensor_regex,
                          "regexes selecting tensors (search semantics)",
                          SMRULES_REGEX),
    SMRULES_FLOAT_PARAM(
        "threshold", "100", settings, threshold,
        "percentage of zero elements at which a tensor is reported",
        SMRULES_RANGE(0, 100)),
    SMRULES_END_PARAMS};

static int init(smrules_ctx *ctx, const void *s, void **state) {
  const settings *cfg = s;
  if (!cfg->collection_names.n && !cfg->tensor_regex.n)
    rk_api->log(ctx, 2,
                "neither collection_names nor tensor_regex is set: "
                "every tensor is inspected");
  *state = (void *)s;
  return 0;
}

static int invoke(smrules_ctx *ctx, void *state, int64_t g) {
  const settings *s = state;
  smrules_trial *t = rk_api->trial(ctx);
  smrules_strlist names;
  rk_select(t, &s->collection_names, &s->tensor_regex, true, &names);
  size_t n = names.n ? names.n : 1;
  smrules_stats *st = calloc(n, sizeof *st); /* shared with ExplodingTensor */
  int *status = calloc(n, sizeof *status);
  if (!st || !status) {
    free(st);
    free(status);
    rk_api->strlist_free(&names);
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  rk_values_stats(t, &names, g, st, status); /* read in parallel */
  int64_t evaluated = 0, violations = 0;
  for (size_t i = 0; i < names.n; i++) {
    if (status[i] != 0 || st[i].count == 0)
      continue;
    double pct = 100.0 * (double)st[i].zeros / (double)st[i].count;
    evaluated++;
    if (pct >= s->threshold) {
      smrules_json *j = rk_violation(ctx, names.v[i]);
      rk_api->json_num(j, "zero_percent", pct);
      rk_api->json_num(j, "threshold", s->threshold);
      violations++;
    }
  }
  free(st);
  free(status);
  rk_api->strlist_free(&names);
  rk_api->datapoints(ctx, evaluated);
  return rk_result(evaluated, violations);
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "AllZero",
    .description = "tensors whose elements are all (or mostly) zero",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "collection_names/tensor_regex, else every tensor",
    .init = init,
    .invoke_at_step = invoke,
    .flags = SMRULES_RULE_STATELESS,
};

RK_PLUGIN(rule)
