/* ExplodingTensor (docs/rules/ExplodingTensor.md): NaN, and unless only_nan
 * also +-inf, in any selected tensor. */
#include <math.h>

#include "smrules/rulekit.h"

typedef struct settings {
  smrules_strlist collection_names;
  smrules_strlist tensor_regex;
  bool only_nan;
} settings;

static const smrules_param params[] = {
    SMRULES_STRLIST_PARAM("collection_names", NULL, settings, collection_names,
                          "collections whose tensors are checked"),
    SMRULES_STRLIST_PARAM("tensor_regex", NULL, settings, tensor_regex,
                          "regexes selecting tensors (search semantics)",
                          SMRULES_REGEX),
    SMRULES_BOOL_PARAM("only_nan", "False", settings, only_nan,
                       "count only NaN, not infinities"),
    SMRULES_END_PARAMS};

static int init(smrules_ctx *ctx, const void *s, void **state) {
  *state = (void *)s;
  return 0;
}

/* Non-finite saved reductions stand in when only reductions were saved
 * (the docs/rules/ExplodingTensor.md Decision). */
static bool reductions_explode(smrules_trial *t, const char *name, int64_t g,
                               bool only_nan, bool *any) {
  *any = false;
  for (int r = SMRULES_RED_MIN; r <= SMRULES_RED_L2; r++)
    for (int abs = 0; abs < 2; abs++) {
      double v;
      if (rk_reduction(t, name, g, r, abs, &v) != SMRULES_OK)
        continue;
      *any = true;
      if (isnan(v) || (!only_nan && isinf(v)))
        return true;
    }
  return false;
}

static int invoke(smrules_ctx *ctx, void *state, int64_t g) {
  const settings *s = state;
  smrules_trial *t = rk_api->trial(ctx);
  smrules_strlist names;
  rk_select(t, &s->collection_names, &s->tensor_regex, true, &names);
  rk_many m; /* shared with AllZero & co; read in parallel */
  if (!rk_many_counts(ctx, t, &names, g, &m)) {
    rk_api->strlist_free(&names);
    return SMRULES_ERR;
  }
  int64_t evaluated = 0, violations = 0;
  for (size_t i = 0; i < names.n; i++) {
    smrules_stats st = m.stats[i];
    int rc = m.status[i];
    if (rc == SMRULES_TENSOR_UNAVAILABLE_FOR_STEP) {
      bool any;
      if (reductions_explode(t, names.v[i], g, s->only_nan, &any)) {
        rk_violation(ctx, names.v[i]);
        violations++;
      }
      evaluated += any;
      continue;
    }
    if (rc != 0 || st.count == 0) /* unreadable, strings, empty */
      continue;
    evaluated++;
    int64_t inf = st.pinf + st.ninf;
    if (st.nan > 0 || (!s->only_nan && inf > 0)) {
      smrules_json *j = rk_violation(ctx, names.v[i]);
      rk_api->json_int(j, "nan_count", st.nan);
      rk_api->json_int(j, "inf_count", inf);
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
    .name = "ExplodingTensor",
    .description = "tensors holding NaN (and unless only_nan, infinite) values",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "collection_names/tensor_regex, else every tensor",
    .init = init,
    .invoke_at_step = invoke,
    .flags = SMRULES_RULE_STATELESS,
};

RK_PLUGIN(rule)
