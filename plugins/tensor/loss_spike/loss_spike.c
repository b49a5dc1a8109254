/* LossSpike (docs/rules/LossSpike.md): a loss far above its recent values
 * (a factor over the window's median, or a z-score over its mean), after
 * a warm-up.  The check is the kit's (plugins/kit/spike.h). */
#include "smrules/rulekit.h"
#include "spike.h"

typedef rk_spike_rule_settings settings;

static const smrules_param params[] = {
    SMRULES_STRLIST_PARAM("collection_names", NULL, settings, collection_names,
                          "collections holding the losses (unset, with no "
                          "tensor_regex: the losses collection)"),
    SMRULES_STRLIST_PARAM("tensor_regex", NULL, settings, tensor_regex,
                          "regexes selecting the losses (search semantics)",
                          SMRULES_REGEX),
    SMRULES_INT_PARAM("window", "50", settings, spike.window,
                      "saved steps of the mode before the checked one whose "
                      "values make the reference",
                      SMRULES_MIN(1)),
    SMRULES_INT_PARAM("warmup", "10", settings, spike.warmup,
                      "finite values needed in the window before a check",
                      SMRULES_MIN(1)),
    SMRULES_FLOAT_PARAM("factor", "3", settings, spike.factor,
                        "fires when value - median > (factor - 1) * |median| "
                        "(0: off)",
                        SMRULES_MIN(0)),
    SMRULES_FLOAT_PARAM("z_score", "0", settings, spike.z_score,
                        "fires when (value - mean) / std > z_score (0: off)",
                        SMRULES_MIN(0)),
    SMRULES_END_PARAMS};

static int invoke(smrules_ctx *ctx, void *state, int64_t g) {
  return rk_spike_rule_step(ctx, state, g, "losses");
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "LossSpike",
    .description = "a loss far above its recent values",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "collection losses (or collection_names/tensor_regex), "
                   "scalar values",
    .init = rk_spike_rule_init,
    .invoke_at_step = invoke,
    .destroy = rk_spike_rule_destroy,
};

RK_PLUGIN(rule)
