/* LossSpike (docs/rules/LossSpike.md): a loss far above its recent values
 * (a factor over the window's median, or a z-score over its mean), after
 * a warm-up.  The check is the kit's (plugins/kit/spike.h). */
#include <stdlib.h>

#include "smrules/rulekit.h"
#include "spike.h"

typedef struct settings {
  smrules_strlist collection_names;
  smrules_strlist tensor_regex;
  rk_spike_settings spike;
} settings;

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

typedef struct state {
  const settings *s;
  rk_spike sp;
} state;

static int init(smrules_ctx *ctx, const void *s, void **out) {
  state *st = calloc(1, sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = s;
  rk_spike_init(&st->sp);
  *out = st;
  return 0;
}

static void destroy(void *p) {
  state *st = p;
  rk_spike_free(&st->sp);
  free(st);
}

static int invoke(smrules_ctx *ctx, void *p, int64_t g) {
  state *st = p;
  const settings *s = st->s;
  smrules_trial *t = rk_api->trial(ctx);
  rk_spike_sync(&st->sp, t);
  smrules_strlist names;
  static const char *losses[] = {"losses"};
  smrules_strlist colls = s->collection_names;
  if (!colls.n && !s->tensor_regex.n)
    colls = (smrules_strlist){1, losses};
  rk_api->select(t, &colls, &s->tensor_regex, &names);
  int64_t evaluated = 0, violations = 0;
  for (size_t i = 0; i < names.n; i++) {
    int rc = rk_spike_check(ctx, &st->sp, &s->spike, t, names.v[i], g);
    evaluated += rc >= 0;
    violations += rc == 1;
  }
  rk_api->strlist_free(&names);
  rk_api->datapoints(ctx, evaluated);
  return rk_result(evaluated, violations);
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
    .init = init,
    .invoke_at_step = invoke,
    .destroy = destroy,
};

RK_PLUGIN(rule)
