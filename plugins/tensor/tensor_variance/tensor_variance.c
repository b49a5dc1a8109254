/* TensorVariance (docs/rules/TensorVariance.md): tensors whose variance is
 * above `max_threshold` or below `min_threshold`. */
#include <stdlib.h>

#include "smrules/rulekit.h"

typedef struct settings {
  smrules_strlist collection_names;
  smrules_strlist tensor_regex;
  double max_threshold, min_threshold;
} settings;

typedef struct state {
  const settings *s;
  bool has_max, has_min;
} state;

static const smrules_param params[] = {
    SMRULES_STRLIST_PARAM("collection_names", NULL, settings, collection_names,
                          "collections whose tensors are checked"),
    SMRULES_STRLIST_PARAM("tensor_regex", NULL, settings, tensor_regex,
                          "regexes selecting tensors (search semantics)",
                          SMRULES_REGEX),
    SMRULES_FLOAT_PARAM("max_threshold", NULL, settings, max_threshold,
                        "a variance above this is reported"),
    SMRULES_FLOAT_PARAM("min_threshold", NULL, settings, min_threshold,
                        "a variance below this is reported"),
    SMRULES_END_PARAMS};

static int init(smrules_ctx *ctx, const void *s, void **out) {
  const settings *cfg = s;
  state *st = calloc(1, sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = cfg;
  st->has_max = rk_api->param_is_set(ctx, "max_threshold");
  st->has_min = rk_api->param_is_set(ctx, "min_threshold");
  if (!cfg->collection_names.n && !cfg->tensor_regex.n)
    rk_api->log(ctx, SMRULES_LOG_WARNING,
                "neither collection_names nor tensor_regex is set: "
                "every tensor is inspected");
  if (!st->has_max && !st->has_min)
    rk_api->log(ctx, SMRULES_LOG_WARNING,
                "neither max_threshold nor min_threshold is set: "
                "the rule cannot trigger");
  *out = st;
  return 0;
}

static void report(smrules_ctx *ctx, const char *name, double var,
                   const char *bound, double threshold) {
  smrules_json *j = rk_violation(ctx, name);
  rk_api->json_num(j, "variance", var);
  rk_api->json_str(j, "exceeds", bound);
  rk_api->json_num(j, "threshold", threshold);
}

static int invoke(smrules_ctx *ctx, void *p, int64_t g) {
  const state *st = p;
  const settings *s = st->s;
  smrules_trial *t = rk_api->trial(ctx);
  smrules_strlist names;
  rk_select(t, &s->collection_names, &s->tensor_regex, true, &names);
  int64_t evaluated = 0, violations = 0;
  for (size_t i = 0; i < names.n; i++) {
    double var;
    if (rk_reduction(t, names.v[i], g, SMRULES_RED_VARIANCE, false, &var) !=
        SMRULES_OK)
      continue;
    evaluated++;
    /* NaN compares false on both sides: no violation */
    if (st->has_max && var > s->max_threshold) {
      report(ctx, names.v[i], var, "max_threshold", s->max_threshold);
      violations++;
    } else if (st->has_min && var < s->min_threshold) {
      report(ctx, names.v[i], var, "min_threshold", s->min_threshold);
      violations++;
    }
  }
  rk_api->strlist_free(&names);
  rk_api->datapoints(ctx, evaluated);
  return rk_result(evaluated, violations);
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "TensorVariance",
    .description = "tensors whose variance is very high or very low",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "collection_names/tensor_regex, else every tensor (saved "
                   "variance reductions are used when present)",
    .init = init,
    .invoke_at_step = invoke,
    .destroy = free,
    .flags = SMRULES_RULE_STATELESS,
};

RK_PLUGIN(rule)
