/* WeightUpdateRatio (docs/rules/WeightUpdateRatio.md): the L2 norm of a weight
 * update relative to the L2 norm of the weights, too large or too small. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "smrules/rulekit.h"
#include "update_norm.h"

typedef struct settings {
  int64_t num_steps;
  double large_threshold, small_threshold, epsilon;
} settings;

/* A weight's value at the step just evaluated, kept for the next step,
 * whose previous step it is (see carry_keep). */
typedef struct carried {
  char *name;
  int mode;
  int64_t step; /* in mode */
  smrules_tensor v;
} carried;

#define CARRY_MAX 8

typedef struct state {
  const settings *s;
  bool windowed;       /* num_steps given */
  rk_step_cache steps; /* what the trial holds, not rule state */
  /* Values read at the step evaluated last, which the trial would give
   * again: a cache, not rule state (the rule stays stateless). */
  carried carry[CARRY_MAX];
  size_t ncarry;
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

static void carry_drop(carried *c) {
  rk_api->release(&c->v);
  free(c->name);
  c->name = NULL;
}

static void destroy(void *p) {
  state *st = p;
  for (size_t i = 0; i < st->ncarry; i++)
    carry_drop(&st->carry[i]);
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

/* ||a - b||_2 element by element, for what update_norms_f32 does not
 * take (other dtypes, big-endian hosts). */
static double l2_diff(const smrules_tensor *a, const smrules_tensor *b) {
  scaled_ssq s = SCALED_SSQ_INIT;
  double decided;
  for (int64_t i = 0; i < a->count; i++)
    if (!ssq_add(&s, fabs(rk_elem(a, i) - rk_elem(b, i)), &decided))
      return decided;
  return ssq_norm(&s);
}

static bool little_endian_f32(const smrules_tensor *v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return v->dtype == SMRULES_DT_FLOAT && v->data;
#else
  (void)v;
  return false;
#endif
}

static bool numeric(const smrules_tensor *v) {
  return rk_is_numeric(v) && v->dtype != SMRULES_DT_STRING && !v->strings;
}

/* A weight tensor read at steps s and p, waiting for its update norm.
 * Norms are computed a batch at a time (update_norm.h: several chains
 * side by side); the batch holds at most BATCH tensors and, beyond its
 * first, BATCH_BYTES of values, so memory stays bounded whatever the
 * model. */
typedef struct pending {
  const char *name;
  int64_t p, s;
  smrules_tensor ws, wp;
  double norm; /* ||w_p||_2 */
} pending;

#define BATCH 8
#define BATCH_BYTES ((int64_t)8 << 20)

typedef struct batch {
  pending v[BATCH];
  size_t n;
  int64_t bytes;
  carried *next; /* the values kept for the next step */
  size_t nnext;
} batch;

/* Keeps w's value at s for the next step, whose previous step s is, when
 * the host has room for it and would not keep its record for the rules
 * anyway (api->value_keep: a large weight, read once per step instead of
 * twice); else releases it. */
static void carry_keep(batch *b, int mode, pending *w) {
  char *name = NULL;
  if (b->nnext < CARRY_MAX && SMRULES_API_HAS(rk_api, value_keep) &&
      (name = strdup(w->name)) && rk_api->value_keep(&w->ws) == SMRULES_OK) {
    b->next[b->nnext++] =
        (carried){.name = name, .mode = mode, .step = w->s, .v = w->ws};
    memset(&w->ws, 0, sizeof w->ws);
    return;
  }
  free(name);
  rk_api->release(&w->ws);
}

/* The value of `name` at step p in mode carried from the step evaluated
 * last, moved to *out; false: none. */
static bool carry_take(state *st, const char *name, int mode, int64_t p,
                       smrules_tensor *out) {
  for (size_t i = 0; i < st->ncarry; i++) {
    carried *c = &st->carry[i];
    if (c->name && c->mode == mode && c->step == p &&
        strcmp(c->name, name) == 0) {
      *out = c->v;
      memset(&c->v, 0, sizeof c->v);
      free(c->name);
      c->name = NULL;
      return true;
    }
  }
  return false;
}

/* Reads `name` at p (unless carried) and s into the batch's next entry:
 * true when it is to be compared (values held), false when skipped. */
static bool read_pair(smrules_ctx *ctx, state *st, smrules_trial *t,
                      const char *name, int mode, int64_t p, int64_t s,
                      pending *w) {
  if (!carry_take(st, name, mode, p, &w->wp) &&
      rk_api->value(t, name, p, mode, &w->wp) != 0)
    return false;
  if (rk_api->value(t, name, s, mode, &w->ws) == 0) {
    if (!numeric(&w->ws) || !numeric(&w->wp))
      ;
    else if (!rk_same_shape(&w->ws, &w->wp))
      rk_api->log(ctx, SMRULES_LOG_WARNING,
                  "%s: shape at %s step %lld differs from step %lld; "
                  "not compared",
                  name, rk_mode_name(mode), (long long)s, (long long)p);
    else if (rk_reduce(&w->wp, SMRULES_RED_L2, false, &w->norm) == 0) {
      w->name = name;
      w->p = p;
      w->s = s;
      return true;
    }
    rk_api->release(&w->ws);
  }
  rk_api->release(&w->wp);
  return false;
}

static int64_t global_of(smrules_trial *t, int mode, int64_t s) {
  int64_t g = s;
  if (mode != SMRULES_MODE_GLOBAL && rk_api->global_step(t, mode, s, &g) != 0)
    return -1;
  return g;
}

/* Reports `ratio` of w when it is out of bounds: 0 fine, 1 violation. */
static int judge(smrules_ctx *ctx, const settings *cfg, smrules_trial *t,
                 int mode, const pending *w, double ratio) {
  bool large = ratio > cfg->large_threshold;
  if (!large && !(ratio < cfg->small_threshold))
    return 0; /* NaN included */
  smrules_json *j = rk_violation(ctx, w->name);
  rk_api->json_num(j, "ratio", ratio);
  rk_api->json_int(j, "previous_step", global_of(t, mode, w->p));
  rk_api->json_str(j, "exceeds", large ? "large_threshold" : "small_threshold");
  rk_api->json_num(j, "threshold",
                   large ? cfg->large_threshold : cfg->small_threshold);
  return 1;
}

/* The update norms of the batch, float32 ones together. */
static void update_norms(const batch *b, double *diff) {
  update_pair f32[BATCH];
  size_t where[BATCH], nf = 0;
  for (size_t i = 0; i < b->n; i++) {
    const pending *w = &b->v[i];
    if (little_endian_f32(&w->ws) && little_endian_f32(&w->wp)) {
      f32[nf] = (update_pair){w->ws.data, w->wp.data, w->ws.count};
      where[nf++] = i;
    } else {
      diff[i] = l2_diff(&w->ws, &w->wp);
    }
  }
  if (nf == 0)
    return;
  double norms[BATCH];
  update_norms_f32(f32, nf, norms);
  for (size_t k = 0; k < nf; k++)
    diff[where[k]] = norms[k];
}

/* Judges and releases the batch, in the order it was read; returns the
 * number of violations. */
static int64_t flush(smrules_ctx *ctx, const settings *cfg, smrules_trial *t,
                     int mode, batch *b) {
  double diff[BATCH];
  update_norms(b, diff);
  int64_t violations = 0;
  for (size_t i = 0; i < b->n; i++) {
    pending *w = &b->v[i];
    violations +=
        judge(ctx, cfg, t, mode, w, diff[i] / (w->norm + cfg->epsilon));
    carry_keep(b, mode, w);
    rk_api->release(&w->wp);
  }
  b->n = 0;
  b->bytes = 0;
  return violations;
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
  carried next[CARRY_MAX];
  batch b = {.next = next};
  for (size_t i = 0; s >= 0 && i < names.n; i++) {
    int64_t prev = previous_step(st, t, names.v[i], mode, s);
    pending *w = &b.v[b.n];
    if (prev < 0 || !read_pair(ctx, st, t, names.v[i], mode, prev, s, w))
      continue;
    evaluated++;
    b.n++;
    b.bytes += (int64_t)(w->ws.nbytes + w->wp.nbytes);
    if (b.n == BATCH || b.bytes >= BATCH_BYTES)
      violations += flush(ctx, st->s, t, mode, &b);
  }
  violations += flush(ctx, st->s, t, mode, &b);
  if (s >= 0) { /* the values not wanted at this step go */
    for (size_t i = 0; i < st->ncarry; i++)
      carry_drop(&st->carry[i]);
    memcpy(st->carry, next, b.nnext * sizeof *next);
    st->ncarry = b.nnext;
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
