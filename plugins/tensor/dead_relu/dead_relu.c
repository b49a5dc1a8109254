/* DeadRelu (docs/rules/DeadRelu.md): layers in which more than threshold_layer
 * % of the ReLU units are active (> 0) in less than threshold_inactivity % of
 * the samples of a batch. */
#include <stdlib.h>

#include "kernels.h"
#include "smrules/rulekit.h"

#define DEFAULT_REGEX ".*relu_output"

typedef struct settings {
  smrules_strlist tensor_regex;
  double threshold_inactivity;
  double threshold_layer;
} settings;

static const smrules_param params[] = {
    SMRULES_STRLIST_PARAM(
        "tensor_regex", DEFAULT_REGEX, settings, tensor_regex,
        "regexes selecting the ReLU outputs (search semantics); "
        "empty means the default",
        SMRULES_REGEX),
    SMRULES_FLOAT_PARAM("threshold_inactivity", "1.0", settings,
                        threshold_inactivity,
                        "a unit active in less than this percent of the "
                        "samples is dead",
                        SMRULES_RANGE(0, 100)),
    SMRULES_FLOAT_PARAM("threshold_layer", "50.0", settings, threshold_layer,
                        "a layer with more than this percent of dead units "
                        "violates",
                        SMRULES_RANGE(0, 100)),
    SMRULES_END_PARAMS};

typedef struct state {
  const settings *s;
  smrules_strlist regexes; /* tensor_regex, or the default when empty */
} state;

static const char *const default_regex[] = {DEFAULT_REGEX};

static int init(smrules_ctx *ctx, const void *s, void **out) {
  state *st = calloc(1, sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = s;
  st->regexes = st->s->tensor_regex;
  if (st->regexes.n == 0) /* the docs/rules/DeadRelu.md Decision */
    st->regexes = (smrules_strlist){1, default_regex};
  *out = st;
  return 0;
}

static int invoke(smrules_ctx *ctx, void *p, int64_t g) {
  const state *st = p;
  smrules_trial *t = rk_api->trial(ctx);
  smrules_strlist names;
  if (rk_api->select(t, NULL, &st->regexes, &names) != 0)
    return SMRULES_SKIPPED;
  int64_t evaluated = 0, violations = 0;
  for (size_t i = 0; i < names.n; i++) {
    smrules_tensor v;
    if (rk_value(t, names.v[i], g, &v) != 0)
      continue;
    double dead;
    int rc = rk_is_numeric(&v)
                 ? rk_inactive_units_above(&v, 0, /* active: x > 0 */
                                           st->s->threshold_inactivity, &dead)
                 : -1;
    rk_api->release(&v);
    if (rc != 0)
      continue;
    evaluated++;
    if (dead > st->s->threshold_layer) {
      smrules_json *j = rk_violation(ctx, names.v[i]);
      rk_api->json_num(j, "dead_percent", dead);
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
    .name = "DeadRelu",
    .description = "layers in which most ReLU units are inactive",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "ReLU outputs matched by tensor_regex (SageMaker saves "
                   "collection relu_output, include_regex .*relu_output)",
    .init = init,
    .invoke_at_step = invoke,
    .destroy = free,
    .flags = SMRULES_RULE_STATELESS,
};

RK_PLUGIN(rule)
