/* WeightUpdateRatio (docs/rules/WeightUpdateRatio.md): the L2 norm of a weight
 * update relative to the L2 norm of the weights, too large or too small. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "smrules/rulekit.h"

typedef struct settings {
  int64_t num_steps;
  double large_threshold, small_threshold, epsilon;
} settings;

typedef struct state {
  const settings *s;
  bool windowed;       /* num_steps given */
  rk_step_cache steps; /* what the trial holds, not rule state */
} state;

static const smrules_param params[] = {
    SMRULES_INT_PARAM(
        "num_steps", NULL, settings, num_steps,
        "compare with the earliest saved step at most this many steps back "
        "(unset: the previous saved step)",
        SMRULES_MIN(1)),
    SMRULES_FLOAT_PARAM("large_threshold", "10.0", settings, large_threshold,
                        "an update/weight ratio above this is reported"),
    SMRULES_FLOAT_PARAM("small_threshold", "0.00000001", settings,
                        small_threshold,
                        "an update/weight ratio below this is reported"),
    SMRULES_FLOAT_PARAM("epsilon", "0.000000001", settings, epsilon,
                        "added to the weight norm to avoid a division by zero",
                        SMRULES_MIN(0)),
    SMRULES_END_PARAMS};

static int init(smrules_ctx *ctx, const void *s, void **out) {
  state *st = calloc(1, sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = s;
  st->windowed = rk_api->param_is_set(ctx, "num_steps");
  rk_step_cache_init(&st->steps);
  *out = st;
  return 0;
}

static void destroy(void *p) {
  state *st = p;
  rk_step_cache_free(&st->steps);
  free(st);
}

/* TRAIN when any weight tensor has TRAIN steps, else GLOBAL. */
static int numbering(state *st, smrules_trial *t,
                     const smrules_strlist *weights) {
  for (size_t i = 0; i < weights->n; i++) {
    size_t n;
    rk_step_cache_get(&st->steps, t, weights->v[i], SMRULES_MODE_TRAIN, &n);
    if (n)
      return SMRULES_MODE_TRAIN;
  }
  return SMRULES_MODE_GLOBAL;
}

/* The step to compare step s with (docs/rules/WeightUpdateRatio.md step 1), or
 * -1. */
static int64_t previous_step(state *st, smrules_trial *t, const char *name,
                             int mode, int64_t s) {
  size_t n;
  const int64_t *steps = rk_step_cache_get(&st->steps, t, name, mode, &n);
  /* the first step >= s - num_steps (windowed), or >= s (latest before) */
  int64_t from = st->windowed ? s - st->s->num_steps : s;
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (steps[mid] < from)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (st->windowed)
    return lo < n && steps[lo] < s ? steps[lo] : -1;
  return lo > 0 ? steps[lo - 1] : -1;
}

/* ||a - b||_2 with scaling, so that large weights do not overflow: the
 * running sum of squares of |a_i - b_i| / scale, rescaled whenever a
 * larger difference raises the scale.  Every difference is added in
 * element order (the result's bits depend on it), so the loop is one
 * chain of adds; what it can save is the work around each add. */
typedef struct scaled_ssq {
  double scale, ssq;
} scaled_ssq;

/* Adds one difference; false once the norm is decided: NaN, or inf. */
static inline bool ssq_add(scaled_ssq *s, double d, double *decided) {
  if (isnan(d)) {
    *decided = NAN;
    return false;
  }
  if (d == 0)
    return true;
  if (isinf(d)) {
    *decided = INFINITY;
    return false;
  }
  if (s->scale < d) {
    s->ssq = 1 + s->ssq * (s->scale / d) * (s->scale / d);
    s->scale = d;
  } else {
    s->ssq += (d / s->scale) * (d / s->scale);
  }
  return true;
}

/* float32 elements read in place, without a dtype test per element (this
 * loop is most of the rule's time on float32 weights). */
static double l2_diff_f32(const unsigned char *a, const unsigned char *b,
                          int64_t n) {
  scaled_ssq s = {0, 1};
  double decided;
  for (int64_t i = 0; i < n; i++) {
    float x, y;
    memcpy(&x, a + 4 * i, sizeof x);
    memcpy(&y, b + 4 * i, sizeof y);
    if (!ssq_add(&s, fabs((double)x - (double)y), &decided))
      return decided;
  }
  return s.scale * sqrt(s.ssq);
}

static double l2_diff(const smrules_tensor *a, const smrules_tensor *b) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (a->dtype == SMRULES_DT_FLOAT && b->dtype == SMRULES_DT_FLOAT && a->data &&
      b->data)
    return l2_diff_f32(a->data, b->data, a->count);
#endif
  scaled_ssq s = {0, 1};
  double decided;
  for (int64_t i = 0; i < a->count; i++)
    if (!ssq_add(&s, fabs(rk_elem(a, i) - rk_elem(b, i)), &decided))
      return decided;
  return s.scale * sqrt(s.ssq);
}

static bool numeric(const smrules_tensor *v) {
  return rk_is_numeric(v) && v->dtype != SMRULES_DT_STRING && !v->strings;
}

/* The update ratio of `name` between steps p and s of `mode`: 0 and the
 * ratio, or -1 when it cannot be computed. */
static int update_ratio(smrules_ctx *ctx, smrules_trial *t, const char *name,
                        int mode, int64_t p, int64_t s, double eps,
                        double *ratio) {
  smrules_tensor ws, wp;
  if (rk_api->value(t, name, p, mode, &wp) != 0)
    return -1;
  int rc = -1;
  if (rk_api->value(t, name, s, mode, &ws) == 0) {
    double norm;
    if (!numeric(&ws) || !numeric(&wp))
      ;
    else if (!rk_same_shape(&ws, &wp))
      rk_api->log(ctx, 2,
                  "%s: shape at %s step %lld differs from step %lld; "
                  "not compared",
                  name, rk_mode_name(mode), (long long)s, (long long)p);
    else if (rk_api->reduce(&wp, SMRULES_RED_L2, false, &norm) == 0) {
      *ratio = l2_diff(&ws, &wp) / (norm + eps);
      rc = 0;
    }
    rk_api->release(&ws);
  }
  rk_api->release(&wp);
  return rc;
}

static int64_t global_of(smrules_trial *t, int mode, int64_t s) {
  int64_t g = s;
  if (mode != SMRULES_MODE_GLOBAL && rk_api->global_step(t, mode, s, &g) != 0)
    return -1;
  return g;
}

/* Evaluates one weight tensor at step s: -1 skipped, 0 fine, 1 violation. */
static int check(smrules_ctx *ctx, state *st, smrules_trial *t,
                 const char *name, int mode, int64_t s) {
  int64_t p = previous_step(st, t, name, mode, s);
  double ratio;
  if (p < 0 ||
      update_ratio(ctx, t, name, mode, p, s, st->s->epsilon, &ratio) != 0)
    return -1;
  bool large = ratio > st->s->large_threshold;
  if (!large && !(ratio < st->s->small_threshold))
    return 0; /* NaN included */
  smrules_json *j = rk_violation(ctx, name);
  rk_api->json_num(j, "ratio", ratio);
  rk_api->json_int(j, "previous_step", global_of(t, mode, p));
  rk_api->json_str(j, "exceeds", large ? "large_threshold" : "small_threshold");
  rk_api->json_num(j, "threshold",
                   large ? st->s->large_threshold : st->s->small_threshold);
  return 1;
}

static int invoke(smrules_ctx *ctx, void *p, int64_t g) {
  state *st = p;
  smrules_trial *t = rk_api->trial(ctx);
  rk_step_cache_sync(&st->steps, t);
  smrules_strlist names;
  rk_api->collection(t, "weights", &names);
  int mode = numbering(st, t, &names);
  int gmode;
  int64_t s = g;
  if (mode != SMRULES_MODE_GLOBAL &&
      (rk_api->step_mode(t, g, &gmode, &s) != 0 || gmode != mode))
    s = -1; /* not a step of the chosen mode: not evaluated */
  int64_t evaluated = 0, violations = 0;
  for (size_t i = 0; s >= 0 && i < names.n; i++) {
    int rc = check(ctx, st, t, names.v[i], mode, s);
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
    .name = "WeightUpdateRatio",
    .description = "weight updates too large or too small relative to the "
                   "weights",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "collection weights, saved every step (or every "
                   "num_steps steps)",
    .init = init,
    .invoke_at_step = invoke,
    .destroy = destroy,
    .flags = SMRULES_RULE_STATELESS,
};

RK_PLUGIN(rule)
