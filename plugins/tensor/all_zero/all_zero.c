/* AllZero (docs/rules/AllZero.md): tensors whose share of elements equal to
 * zero reaches `threshold` percent. */

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
    rk_api->log(ctx, SMRULES_LOG_WARNING,
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
  rk_many m; /* shared with ExplodingTensor; read in parallel */
  if (!rk_many_counts(ctx, t, &names, g, &m)) {
    rk_api->strlist_free(&names);
    return SMRULES_ERR;
  }
  int64_t evaluated = 0, violations = 0;
  for (size_t i = 0; i < names.n; i++) {
    const smrules_stats *st = &m.stats[i];
    if (m.status[i] != 0 || st->count == 0)
      continue;
    double pct = 100.0 * (double)st->zeros / (double)st->count;
    evaluated++;
    if (pct >= s->threshold) {
      smrules_json *j = rk_violation(ctx, names.v[i]);
      rk_api->json_num(j, "zero_percent", pct);
      rk_api->json_num(j, "threshold", s->threshold);
      violations++;
    }
  }
  rk_many_free(&m);
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
