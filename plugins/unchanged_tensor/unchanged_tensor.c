/* UnchangedTensor (rules.md §2.6): a tensor whose value at its last
 * `num_steps` saved steps is the same (allclose) at each of them. */
#include <stdlib.h>

#include "rulekit.h"

typedef struct settings {
  smrules_strlist collection_names;
  smrules_strlist tensor_regex;
  int64_t num_steps;
  double rtol, atol;
  bool equal_nan;
} settings;

static const smrules_param params[] = {
    {SMRULES_PARAM_STRLIST, "collection_names", NULL, 0, 0, 0, NULL, NULL,
     SMRULES_OFFSET(settings, collection_names),
     "collections whose tensors are checked"},
    {SMRULES_PARAM_STRLIST, "tensor_regex", NULL, SMRULES_P_REGEX, 0, 0, NULL,
     NULL, SMRULES_OFFSET(settings, tensor_regex),
     "regexes selecting tensors (search semantics)"},
    {SMRULES_PARAM_INT, "num_steps", "3", SMRULES_P_MIN, 2, 0, NULL, NULL,
     SMRULES_OFFSET(settings, num_steps),
     "number of saved steps (the current one included) that must agree"},
    {SMRULES_PARAM_FLOAT, "rtol", "1e-05", SMRULES_P_MIN, 0, 0, NULL, NULL,
     SMRULES_OFFSET(settings, rtol), "relative tolerance of allclose"},
    {SMRULES_PARAM_FLOAT, "atol", "1e-08", SMRULES_P_MIN, 0, 0, NULL, NULL,
     SMRULES_OFFSET(settings, atol), "absolute tolerance of allclose"},
    {SMRULES_PARAM_BOOL, "equal_nan", "False", 0, 0, 0, NULL, NULL,
     SMRULES_OFFSET(settings, equal_nan),
     "two NaNs in the same position count as equal"},
    {.type = SMRULES_PARAM_END}};

static int init(smrules_ctx *ctx, const void *s, void **state) {
  const settings *cfg = s;
  if (!cfg->collection_names.n && !cfg->tensor_regex.n)
    rk_api->log(ctx, 2,
                "neither collection_names nor tensor_regex is set: "
                "every tensor is inspected");
  *state = (void *)s;
  return 0;
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

/* How many saved steps of the tensor are <= g (an upper bound for the
 * steps with a raw value). */
static size_t steps_upto(const int64_t *all, size_t n, int64_t g) {
  size_t k = 0;
  while (k < n && all[k] <= g)
    k++;
  return k;
}

/* Compares the value at g (`cur`) with the values at the previous saved
 * steps of the tensor, newest first, until num_steps steps (g included)
 * were seen.  Returns -1 when there are fewer, else whether all agree;
 * `steps` (num_steps long) gets the steps compared, ascending. */
static int compare_back(const settings *s, smrules_trial *t, const char *name,
                        const int64_t *all, size_t n, const smrules_tensor *cur,
                        int64_t *steps) {
  size_t want = (size_t)s->num_steps, have = 1;
  bool same = true;
  int64_t g = steps[want - 1];
  for (size_t i = n; i-- > 0 && have < want;) {
    if (all[i] >= g)
      continue;
    smrules_tensor prev;
    if (!numeric_value(t, name, all[i], &prev))
      continue; /* only reductions or shapes saved there */
    same =
        same && rk_allclose(&prev, cur, s->rtol, s->atol, s->equal_nan, NULL);
    rk_api->release(&prev);
    steps[want - 1 - have++] = all[i];
  }
  return have < want ? -1 : same;
}

/* Checks one tensor at g: -1 not evaluated, 0 changed, 1 violation (then
 * reported). */
static int check_tensor(smrules_ctx *ctx, const settings *s, smrules_trial *t,
                        const char *name, int64_t g) {
  int64_t *all;
  size_t n;
  if (rk_api->tensor_steps(t, name, SMRULES_MODE_GLOBAL, &all, &n) != 0)
    return -1;
  int rc = -1;
  smrules_tensor cur;
  if (steps_upto(all, n, g) >= (size_t)s->num_steps &&
      numeric_value(t, name, g, &cur)) {
    int64_t *steps = calloc((size_t)s->num_steps, sizeof *steps);
    if (steps) {
      steps[s->num_steps - 1] = g;
      rc = compare_back(s, t, name, all, n, &cur, steps);
      if (rc == 1)
        rk_api->json_ints(rk_violation(ctx, name), "steps", steps,
                          (size_t)s->num_steps);
    }
    free(steps);
    rk_api->release(&cur);
  }
  rk_api->steps_free(all);
  return rc;
}

static int invoke(smrules_ctx *ctx, void *state, int64_t g) {
  const settings *s = state;
  smrules_trial *t = rk_api->trial(ctx);
  smrules_strlist names;
  rk_select(t, &s->collection_names, &s->tensor_regex, true, &names);
  int64_t evaluated = 0, violations = 0;
  for (size_t i = 0; i < names.n; i++) {
    int rc = check_tensor(ctx, s, t, names.v[i], g);
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
    .flags = SMRULES_RULE_STATELESS,
};

RK_PLUGIN(rule)
