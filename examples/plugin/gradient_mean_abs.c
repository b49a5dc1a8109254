/* gradient_mean_abs.c - an out-of-tree smrules rule plugin, built against
 * the installed SDK only (smrules.h and the rule kit, smrules/rulekit.h +
 * libsmrules-rulekit.a):
 *
 *   cc -shared -fPIC -o gradient_mean_abs.so gradient_mean_abs.c \
 *      $(pkg-config --cflags --libs smrules)
 *
 * It fires when the mean absolute value of any tensor of the `gradients`
 * collection exceeds `threshold` (the same rule as
 * rules/gradient_mean_abs.lua). */
#include <smrules/rulekit.h>

typedef struct settings {
  double threshold;
} settings;

static const smrules_param params[] = {
    SMRULES_FLOAT_PARAM("threshold", "1.0", settings, threshold,
                        "fire when mean |gradient| is above this"),
    SMRULES_END_PARAMS};

static int init(smrules_ctx *ctx, const void *s, void **state) {
  (void)ctx;
  *state = (void *)s; /* the settings live as long as the rule */
  return 0;
}

static int invoke_at_step(smrules_ctx *ctx, void *state, int64_t step) {
  const settings *s = state;
  smrules_trial *trial = rk_api->trial(ctx);
  smrules_strlist grads;
  rk_api->collection(trial, "gradients", &grads);
  int64_t evaluated = 0, fired = 0;
  for (size_t i = 0; i < grads.n; i++) {
    double m;
    if (rk_api->reduction(trial, grads.v[i], step, SMRULES_MODE_GLOBAL,
                          SMRULES_RED_MEAN, true, &m) != 0)
      continue; /* not saved at this step (or unreadable: treated alike) */
    evaluated++;
    if (m > s->threshold) {
      rk_api->json_num(rk_violation(ctx, grads.v[i]), "abs_mean", m);
      fired++;
    }
  }
  rk_api->strlist_free(&grads);
  return rk_result(evaluated, fired);
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "GradientMeanAbs",
    .description = "mean |gradient| of any gradients tensor above threshold",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "collection gradients",
    .init = init,
    .invoke_at_step = invoke_at_step,
    .flags = SMRULES_RULE_STATELESS,
};

/* smrules_plugin_init: keeps the host's table in rk_api, returns `rule`. */
RK_PLUGIN(rule)
