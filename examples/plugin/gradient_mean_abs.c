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
#include <stdlib.h>

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
  /* One query for all of them: the mean of the absolute values (smdebug's
   * abs_mean: saved by the hook, or computed), read in parallel. */
  size_t n = grads.n ? grads.n : 1;
  smrules_values *v = calloc(n, sizeof *v);
  int *status = calloc(n, sizeof *status);
  if (!v || !status ||
      rk_api->query(trial, grads.v, grads.n, step, SMRULES_MODE_GLOBAL,
                    SMRULES_Q_ABS_RED(SMRULES_RED_MEAN), v, sizeof *v,
                    status) != SMRULES_OK) {
    free(v);
    free(status);
    rk_api->strlist_free(&grads);
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  int64_t evaluated = 0, fired = 0;
  for (size_t i = 0; i < grads.n; i++) {
    if (status[i] != SMRULES_OK)
      continue; /* not saved at this step (or unreadable: treated alike) */
    evaluated++;
    double m = v[i].abs_red[SMRULES_RED_MEAN];
    if (m > s->threshold) {
      rk_api->json_num(rk_violation(ctx, grads.v[i]), "abs_mean", m);
      fired++;
    }
  }
  free(v);
  free(status);
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
