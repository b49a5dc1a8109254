/* VanishingGradient (docs/rules/VanishingGradient.md): the mean absolute value
 * of a gradient below `threshold`. */
#include <math.h>

#include "smrules/rulekit.h"

typedef struct settings {
  double threshold;
} settings;

static const smrules_param params[] = {
    SMRULES_FLOAT_PARAM(
        "threshold", "0.0000001", settings, threshold,
        "a gradient whose mean |value| is below this has vanished"),
    SMRULES_END_PARAMS};

static int init(smrules_ctx *ctx, const void *s, void **state) {
  *state = (void *)s;
  return 0;
}

static int invoke(smrules_ctx *ctx, void *state, int64_t g) {
  const settings *s = state;
  smrules_trial *t = rk_api->trial(ctx);
  smrules_strlist names;
  rk_api->collection(t, "gradients", &names);
  rk_many m; /* the gradients' records are read and reduced in parallel */
  if (!rk_many_reductions(ctx, t, &names, g, SMRULES_RED_MEAN, true, &m)) {
    rk_api->strlist_free(&names);
    return SMRULES_ERR;
  }
  int64_t evaluated = 0, violations = 0;
  for (size_t i = 0; i < names.n; i++) {
    if (m.status[i] != 0)
      continue;
    evaluated++;
    if (m.value[i] < s->threshold) { /* NaN compares false: no violation */
      smrules_json *j = rk_violation(ctx, names.v[i]);
      rk_api->json_num(j, "abs_mean", m.value[i]);
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
    .name = "VanishingGradient",
    .description = "gradients whose mean absolute value collapsed below a "
                   "threshold",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "collection gradients",
    .init = init,
    .invoke_at_step = invoke,
    .flags = SMRULES_RULE_STATELESS,
};

RK_PLUGIN(rule)
