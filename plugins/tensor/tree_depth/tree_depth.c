/* TreeDepth (docs/rules/TreeDepth.md): the depth of the XGBoost tree built at a
 * boosting round, log2 of its largest node id, is below `depth` (R15). */
#include <math.h>
#include <stdlib.h>

#include "smrules/rulekit.h"

#define NODE_TENSOR "trees/Node"

typedef struct settings {
  double depth;
} settings;

static const smrules_param params[] = {
    SMRULES_FLOAT_PARAM("depth", "4", settings, depth,
                        "a tree whose depth (log2 of the largest node id) is "
                        "below this violates"),
    SMRULES_END_PARAMS};

static int init(smrules_ctx *ctx, const void *s, void **state) {
  *state = (void *)s;
  return 0;
}

/* Largest finite node id of the tensor; false when there is none. */
static bool max_node_id(const smrules_tensor *v, double *out) {
  double *ids = rk_values(v);
  bool any = false;
  for (int64_t i = 0; ids && i < v->count; i++)
    if (isfinite(ids[i]) && (!any || ids[i] > *out)) {
      *out = ids[i];
      any = true;
    }
  free(ids);
  return any;
}

static int invoke(smrules_ctx *ctx, void *state, int64_t g) {
  const settings *s = state;
  smrules_trial *t = rk_api->trial(ctx);
  smrules_tensor v;
  if (rk_value(t, NODE_TENSOR, g, &v) != 0)
    return SMRULES_SKIPPED;
  double m = 0;
  bool any = max_node_id(&v, &m);
  rk_api->release(&v);
  if (!any)
    return SMRULES_SKIPPED;
  rk_api->datapoints(ctx, 1);
  double d = m > 0 ? log2(m) : 0;
  if (!(d < s->depth))
    return SMRULES_NO_TRIGGER;
  smrules_json *j = rk_violation(ctx, NODE_TENSOR);
  rk_api->json_num(j, "max_node_id", m);
  rk_api->json_num(j, "depth", d);
  return SMRULES_TRIGGERED;
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "TreeDepth",
    .description = "XGBoost trees shallower than the given depth",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "tensor trees/Node (XGBoost collection trees)",
    .init = init,
    .invoke_at_step = invoke,
    .flags = SMRULES_RULE_STATELESS,
};

RK_PLUGIN(rule)
