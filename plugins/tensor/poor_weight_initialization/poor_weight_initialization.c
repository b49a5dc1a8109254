/* PoorWeightInitialization (docs/rules/PoorWeightInitialization.md): in the
 * first `steps` global steps, three signs of a poor initialization: activation
 * inputs whose variances differ by more than `threshold` across layers (or are
 * constant), a gradient whose 5 %..95 % quantile spread is below
 * `distribution_range`, and a loss that has not reached a new minimum for
 * `patience` evaluated steps.  The loss minima and waits are the rule's
 * state. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "smrules/rulekit.h"

#define DEFAULT_REGEX ".*relu_input"

typedef struct settings {
  smrules_strlist activation_inputs_regex;
  double threshold;
  double distribution_range;
  int64_t patience;
  double steps;
} settings;

static const smrules_param params[] = {
    SMRULES_STRLIST_PARAM("activation_inputs_regex", DEFAULT_REGEX, settings,
                          activation_inputs_regex,
                          "regexes selecting the activation inputs (search "
                          "semantics); empty means the default",
                          SMRULES_REGEX),
    SMRULES_FLOAT_PARAM("threshold", "10.0", settings, threshold,
                        "largest allowed ratio of the largest to the smallest "
                        "activation-input variance",
                        SMRULES_MIN(0)),
    SMRULES_FLOAT_PARAM("distribution_range", "0.001", settings,
                        distribution_range,
                        "smallest allowed 5%..95% quantile spread of a "
                        "gradient",
                        SMRULES_MIN(0)),
    SMRULES_INT_PARAM("patience", "5", settings, patience,
                      "evaluated steps without a new loss minimum that are "
                      "tolerated",
                      SMRULES_MIN(1)),
    SMRULES_FLOAT_PARAM("steps", "10", settings, steps,
                        "only global steps below this are evaluated (a float "
                        "is truncated)",
                        SMRULES_MIN(0)),
    SMRULES_END_PARAMS};

/* Progress of one loss tensor. */
typedef struct loss {
  char *name;
  double best;
  int64_t wait;
} loss;

typedef struct state {
  const settings *s;
  smrules_strlist regexes;
  int64_t steps;
  loss *v;
  size_t n;
} state;

static const char *const default_regex[] = {DEFAULT_REGEX};

static void losses_clear(state *st) {
  for (size_t i = 0; i < st->n; i++)
    free(st->v[i].name);
  free(st->v);
  st->v = NULL;
  st->n = 0;
}

static void destroy(void *p) {
  state *st = p;
  losses_clear(st);
  free(st);
}

static int init(smrules_ctx *ctx, const void *sv, void **out) {
  const settings *s = sv;
  state *st = calloc(1, sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = s;
  st->regexes = s->activation_inputs_regex.n
                    ? s->activation_inputs_regex
                    : (smrules_strlist){1, default_regex};
  /* The docs call `steps` a float: truncate, and keep huge values finite. */
  st->steps = s->steps >= 9.0e18 ? INT64_MAX : (int64_t)s->steps;
  *out = st;
  return 0;
}

static loss *loss_of(state *st, const char *name) {
  for (size_t i = 0; i < st->n; i++)
    if (strcmp(st->v[i].name, name) == 0)
      return &st->v[i];
  loss *v = realloc(st->v, (st->n + 1) * sizeof *v);
  if (!v)
    return NULL;
  st->v = v;
  char *copy = strdup(name);
  if (!copy)
    return NULL;
  v[st->n] = (loss){copy, INFINITY, 0};
  return &v[st->n++];
}

/* Check 1: variances of the activation inputs across layers. */
static int64_t check_variance(smrules_ctx *ctx, const state *st,
                              smrules_trial *t, int64_t g, int64_t *used) {
  smrules_strlist names;
  if (rk_api->select(t, NULL, &st->regexes, &names) != 0)
    return 0;
  double min = INFINITY, max = -INFINITY;
  int64_t n = 0;
  for (size_t i = 0; i < names.n; i++) {
    smrules_tensor v;
    double var;
    if (rk_value(t, names.v[i], g, &v) != 0)
      continue;
    bool ok = rk_is_numeric(&v) &&
              rk_reduce(&v, SMRULES_RED_VARIANCE, false, &var) == 0 &&
              !isnan(var);
    rk_api->release(&v);
    if (!ok)
      continue;
    n++;
    min = var < min ? var : min;
    max = var > max ? var : max;
  }
  rk_api->strlist_free(&names);
  *used += n;
  if (n < 2 || !(max == 0 || min == 0 || max / min > st->s->threshold))
    return 0;
  smrules_json *j = rk_api->violation(ctx);
  rk_api->json_str(j, "check", "activation_variance");
  rk_api->json_num(j, "ratio", max / min);
  rk_api->json_num(j, "min_variance", min);
  rk_api->json_num(j, "max_variance", max);
  return 1;
}

/* 95 % quantile minus 5 % quantile of the tensor's elements. */
static double spread(const smrules_tensor *v) {
  static const double q[2] = {0.95, 0.05};
  double at[2];
  if (rk_tensor_quantiles(v, q, at, 2) != 0)
    return NAN;
  return at[0] - at[1];
}

/* Check 2: gradients with a (nearly) degenerate distribution. */
static int64_t check_gradients(smrules_ctx *ctx, const state *st,
                               smrules_trial *t, int64_t g, int64_t *used) {
  smrules_strlist names;
  if (rk_api->collection(t, "gradients", &names) != 0)
    return 0;
  int64_t violations = 0;
  for (size_t i = 0; i < names.n; i++) {
    smrules_tensor v;
    if (rk_value(t, names.v[i], g, &v) != 0)
      continue;
    bool numeric = rk_is_numeric(&v);
    double s = numeric ? spread(&v) : NAN;
    rk_api->release(&v);
    *used += numeric;
    if (s < st->s->distribution_range) { /* NaN: no violation */
      smrules_json *j = rk_violation(ctx, names.v[i]);
      rk_api->json_str(j, "check", "gradient_spread");
      rk_api->json_num(j, "spread", s);
      violations++;
    }
  }
  rk_api->strlist_free(&names);
  return violations;
}

/* Check 3: losses that stopped reaching new minima. */
static int64_t check_losses(smrules_ctx *ctx, state *st, smrules_trial *t,
                            int64_t g, int64_t *used) {
  smrules_strlist names;
  if (rk_api->collection(t, "losses", &names) != 0)
    return 0;
  int64_t violations = 0;
  for (size_t i = 0; i < names.n; i++) {
    smrules_tensor v;
    if (rk_value(t, names.v[i], g, &v) != 0)
      continue;
    bool scalar = rk_is_numeric(&v) && rk_is_scalar(&v);
    double x = scalar ? rk_api->get(&v, 0) : NAN;
    rk_api->release(&v);
    loss *l = scalar ? loss_of(st, names.v[i]) : NULL;
    if (!l)
      continue;
    (*used)++;
    if (x < l->best) {
      l->best = x;
      l->wait = 0;
    } else {
      l->wait++;
    }
    if (l->wait >= st->s->patience) {
      smrules_json *j = rk_violation(ctx, names.v[i]);
      rk_api->json_str(j, "check", "loss");
      rk_api->json_int(j, "wait", l->wait);
      violations++;
    }
  }
  rk_api->strlist_free(&names);
  return violations;
}

static int invoke(smrules_ctx *ctx, void *p, int64_t g) {
  state *st = p;
  if (g >= st->steps)
    return SMRULES_NO_MORE_DATA; /* only the first `steps` steps matter */
  smrules_trial *t = rk_api->trial(ctx);
  int64_t used = 0, violations = 0;
  violations += check_variance(ctx, st, t, g, &used);
  violations += check_gradients(ctx, st, t, g, &used);
  violations += check_losses(ctx, st, t, g, &used);
  rk_api->datapoints(ctx, used);
  return rk_result(used, violations);
}

/* State text: "v1" then "L name best wait" per loss tensor. */
static char *save_state(smrules_ctx *ctx, void *p) {
  const state *st = p;
  rk_text t = {0};
  rk_text_printf(&t, "v1");
  for (size_t i = 0; i < st->n; i++) {
    rk_text_printf(&t, "\nL");
    rk_text_name(&t, st->v[i].name);
    rk_text_num(&t, st->v[i].best);
    rk_text_int(&t, st->v[i].wait);
  }
  return rk_text_take(&t);
}

static int load_state(smrules_ctx *ctx, void *p, const char *text) {
  state *st = p;
  rk_scan sc = {text, false};
  losses_clear(st);
  bool ok = rk_scan_word(&sc, "v1");
  while (ok && rk_scan_word(&sc, "L")) {
    char *name = rk_scan_name(&sc);
    double best;
    int64_t wait;
    ok = name && rk_scan_num(&sc, &best) && rk_scan_int(&sc, &wait);
    loss *l = ok ? loss_of(st, name) : NULL;
    free(name);
    ok = l != NULL;
    if (l) {
      l->best = best;
      l->wait = wait;
    }
  }
  if (ok && rk_scan_end(&sc))
    return 0;
  losses_clear(st);
  rk_api->log(ctx, SMRULES_LOG_WARNING,
              "stored state unreadable; evaluating from the start");
  return -1;
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "PoorWeightInitialization",
    .description = "poor initialization: unequal activation variances, "
                   "degenerate gradients or a loss not decreasing in the "
                   "first steps",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "activation inputs (SageMaker saves collection relu_input, "
                   "include_regex .*relu_input), collections gradients and "
                   "losses",
    .init = init,
    .invoke_at_step = invoke,
    .destroy = destroy,
    .save_state = save_state,
    .load_state = load_state,
};

RK_PLUGIN(rule)
