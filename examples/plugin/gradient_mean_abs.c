/* gradient_mean_abs.c - an out-of-tree smrules rule plugin, built against
 * the installed SDK only:
 *
 *   cc -shared -fPIC $(pkg-config --cflags smrules) -o gradient_mean_abs.so \
 *      gradient_mean_abs.c
 *
 * It fires when the mean absolute value of any tensor of the `gradients`
 * collection exceeds `threshold` (the same rule as
 * rules/gradient_mean_abs.lua). */
#include <smrules/smrules.h>

static const smrules_api *host;

typedef struct settings {
  double threshold;
} settings;

static const smrules_param params[] = {
    {SMRULES_PARAM_FLOAT, "threshold", "1.0", 0, 0, 0, NULL, NULL,
     offsetof(settings, threshold), "fire when mean |gradient| is above this"},
    {.type = SMRULES_PARAM_END}};

static int init(smrules_ctx *ctx, const void *s, void **state) {
  (void)ctx;
  *state = (void *)s; /* the settings live as long as the rule */
  return 0;
}

static int invoke_at_step(smrules_ctx *ctx, void *state, int64_t step) {
  const settings *s = state;
  smrules_trial *trial = host->trial(ctx);
  smrules_strlist grads;
  host->collection(trial, "gradients", &grads);
  int evaluated = 0, fired = 0;
  for (size_t i = 0; i < grads.n; i++) {
    double m;
    if (host->reduction(trial, grads.v[i], step, SMRULES_MODE_GLOBAL,
                        SMRULES_RED_MEAN, true, &m) != 0)
      continue; /* not saved at this step */
    evaluated++;
    if (m > s->threshold) {
      smrules_json *v = host->violation(ctx);
      host->json_str(v, "tensor", grads.v[i]);
      host->json_num(v, "abs_mean", m);
      fired = 1;
    }
  }
  host->strlist_free(&grads);
  if (!evaluated)
    return SMRULES_SKIPPED;
  return fired ? SMRULES_TRIGGERED : SMRULES_NO_TRIGGER;
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

SMRULES_PLUGIN_INIT {
  host = api;
  return &rule;
}
