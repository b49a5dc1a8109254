/* UnchangedTensor (docs/rules/UnchangedTensor.md): a tensor whose value at its
 * last `num_steps` saved steps is the same (allclose) at each of them. */
#include <stdlib.h>

#include "smrules/rulekit.h"

typedef struct settings {
  smrules_strlist collection_names;
  smrules_strlist tensor_regex;
  int64_t num_steps;
  double rtol, atol;
  bool equal_nan;
} settings;

static const smrules_param params[] = {
    SMRULES_STRLIST_PARAM("collection_names", NULL, settings, collection_names,
                          "collections whose tensors are checked"),
    SMRULES_STRLIST_PARAM("tensor_regex", NULL, settings, tensor_regex,
                          "regexes selecting tensors (search semantics)",
                          SMRULES_REGEX),
    SMRULES_INT_PARAM(
        "num_steps", "3", settings, num_steps,
        "number of saved steps (the current one included) that must agree",
        SMRULES_MIN(2)),
    SMRULES_FLOAT_PARAM("rtol", "1e-05", settings, rtol,
                        "relative tolerance of allclose", SMRULES_MIN(0)),
    SMRULES_FLOAT_PARAM("atol", "1e-08", settings, atol,
                        "absolute tolerance of allclose", SMRULES_MIN(0)),
    SMRULES_BOOL_PARAM("equal_nan", "False", settings, equal_nan,
                       "two NaNs in the same position count as equal"),
    SMRULES_END_PARAMS};

typedef struct state {
  const settings *s;
  rk_step_cache steps; /* what the trial holds, not rule state */
} state;

static int init(smrules_ctx *ctx, const void *s, void **out) {
  const settings *cfg = s;
  state *st = calloc(1, sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = cfg;
  rk_step_cache_init(&st->steps);
  if (!cfg->collection_names.n && !cfg->tensor_regex.n)
    rk_api->log(ctx, 2,
                "neither collection_names nor tensor_regex is set: "
                "every tensor is inspected");
  *out = st;
  return 0;
}

static void destroy(void *p) {
  state *st = p;
  rk_step_cache_free(&st->steps);
  free(st);
}

/* A numeric value of `name` at global step g, or false. */
static bool numeric_value(smrules_trial *t, const char *name, int64_t g,
                          smrules_tensor *v) {
  if (rk_value(t, name, g, v) != 0)
    return false;
  if (rk_is_numeric(v) && v->dtype != SMRULES_DT_STRING && !v->strings)
    return true;
  rk_api->release(v);
  return false;
}

/* Whether numeric_value would give a value of `name` at g, without
 * reading the record when the element counts another rule asked for are
 * at hand (ExplodingTensor and AllZero ask for every tensor's): counts
 * exist only for a value that was read and is numeric.  Otherwise (not
 * there, a dtype without counts, a damaged record) numeric_value
 * decides. */
static bool has_numeric_value(smrules_trial *t, const char *name, int64_t g) {
  const char *one[1] = {name};
  smrules_strlist names = {1, one};
  smrules_stats c;
  int status;
  rk_values_counts(t, &names, g, &c, &status);
  if (status == 0)
    return c.count > 0;
  smrules_tensor v;
  if (!numeric_value(t, name, g, &v))
    return false;
  rk_api->release(&v);
  return true;
}

/* How many of the (ascending) saved steps are <= g: an upper bound for
 * the steps with a raw value. */
static size_t steps_upto(const int64_t *all, size_t n, int64_t g) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (all[mid] <= g)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Compares the value at g (`cur`) with the values at the previous saved
 * steps of the tensor (the first `k` entries of `all`), newest first, until
 * num_steps steps (g included) were seen.  Returns -1 when there are
 * fewer, else whether all agree; `steps` (num_steps long, g last) gets the
 * steps compared, ascending. */
static int compare_back(const settings *s, smrules_trial *t, const char *name,
                        const int64_t *all, size_t k, const smrules_tensor *cur,
                        int64_t *steps) {
  size_t want = (size_t)s->num_steps, have = 1;
  bool same = true;
  int64_t g = steps[want - 1];
  for (size_t i = k; i-- > 0 && have < want;) {
    smrules_tensor prev;
    if (all[i] >= g)
      continue;
    if (!same) { /* changed: only whether enough steps have values matters */
      if (has_numeric_value(t, name, all[i]))
        steps[want - 1 - have++] = all[i];
      continue;
    }
    if (!numeric_value(t, name, all[i], &prev))
      continue; /* only reductions or shapes saved there */
    same = rk_allclose(&prev, cur, s->rtol, s->atol, s->equal_nan, NULL);
    rk_api->release(&prev);
    steps[want - 1 - have++] = all[i];
  }
  return have < want ? -1 : same;
}

/* Checks one tensor at g: -1 not evaluated, 0 changed, 1 violation (then
 * reported). */
static int check_tensor(smrules_ctx *ctx, state *st, smrules_trial *t,
                        const char *name, int64_t g) {
  const settings *s = st->s;
  size_t n;
  const int64_t *all =
      rk_step_cache_get(&st->steps, t, name, SMRULES_MODE_GLOBAL, &n);
  size_t k = steps_upto(all, n, g);
  smrules_tensor cur;
  if (k < (size_t)s->num_steps || !numeric_value(t, name, g, &cur))
    return -1;
  int rc = -1;
  int64_t *steps = calloc((size_t)s->num_steps, sizeof *steps);
  if (steps) {
    steps[s->num_steps - 1] = g;
    rc = compare_back(s, t, name, all, k, &cur, steps);
    if (rc == 1)
      rk_api->json_ints(rk_violation(ctx, name), "steps", steps,
                        (size_t)s->num_steps);
  }
  free(steps);
  rk_api->release(&cur);
  return rc;
}

static int invoke(smrules_ctx *ctx, void *p, int64_t g) {
  state *st = p;
  smrules_trial *t = rk_api->trial(ctx);
  rk_step_cache_sync(&st->steps, t);
  smrules_strlist names;
  rk_select(t, &st->s->collection_names, &st->s->tensor_regex, true, &names);
  int64_t evaluated = 0, violations = 0;
  for (size_t i = 0; i < names.n; i++) {
    int rc = check_tensor(ctx, st, t, names.v[i], g);
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
    .name = "UnchangedTensor",
    .description = "tensors that stopped changing across saved steps",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "collection_names/tensor_regex, else every tensor; raw "
                   "values at num_steps saved steps",
    .init = init,
    .invoke_at_step = invoke,
    .destroy = destroy,
    .flags = SMRULES_RULE_STATELESS,
};

RK_PLUGIN(rule)
