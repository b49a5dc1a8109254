/* SimilarAcrossRuns (docs/rules/SimilarAcrossRuns.md): tensors of this trial
 * that differ from the same tensor at the same global step of another
 * (reference) trial. */
#include <stdbool.h>
#include <stdlib.h>

#include "smrules/rulekit.h"

/* NumPy's allclose defaults (docs/rule-semantics.md#decisions, Decision R13).
 */
#define RTOL 1e-5
#define ATOL 1e-8

typedef struct settings {
  const char *other_trials;
  smrules_strlist collection_names;
  smrules_strlist tensor_regex;
} settings;

typedef struct state {
  const settings *s;
  smrules_trial *other;
} state;

static const smrules_param params[] = {
    SMRULES_STRING_PARAM("other_trials", NULL, settings, other_trials,
                         "path of the reference trial to compare with",
                         SMRULES_REQUIRED, .aliases = "other_trial"),
    SMRULES_STRLIST_PARAM("collection_names", NULL, settings, collection_names,
                          "collections whose tensors are compared"),
    SMRULES_STRLIST_PARAM("tensor_regex", NULL, settings, tensor_regex,
                          "regexes selecting tensors (search semantics)",
                          SMRULES_REGEX, .aliases = "include_regex"),
    SMRULES_END_PARAMS};

static int init(smrules_ctx *ctx, const void *s, void **out) {
  const settings *cfg = s;
  /* A reference trial that cannot be read is a configuration error. */
  smrules_trial *other = rk_api->open_trial(ctx, cfg->other_trials);
  if (!other)
    return SMRULES_ERR;
  state *st = calloc(1, sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = cfg;
  st->other = other;
  *out = st;
  return 0;
}

/* What one comparison found (api->pair_value's result). */
typedef struct comparison {
  double max_abs_diff;
  bool differs, same_shape;
} comparison;

/* The comparison of a (this trial) with b (the reference), on any thread
 * (api->pair_value). */
static int compare_pair(const smrules_tensor *a, const smrules_tensor *b,
                        const void *arg, void *result) {
  (void)arg;
  comparison *c = result;
  c->differs = !rk_allclose(a, b, RTOL, ATOL, true, &c->max_abs_diff);
  c->same_shape = rk_same_shape(a, b);
  return SMRULES_OK;
}

/* The comparison of a run of elements folded into the runs' before it
 * (api->pair_value_parts): the largest difference of either, and a run
 * that differs makes the whole differ; the runs are of values of one
 * shape. */
static void merge_pair(void *into, const void *part, const void *arg) {
  (void)arg;
  comparison *c = into;
  const comparison *p = part;
  if (p->max_abs_diff > c->max_abs_diff)
    c->max_abs_diff = p->max_abs_diff;
  c->differs |= p->differs;
  c->same_shape &= p->same_shape;
}

/* Both values read here (a host without pair_value). */
static int compare_read(smrules_trial *base, smrules_trial *other,
                        const char *name, int64_t g, comparison *c) {
  smrules_tensor a, b;
  if (rk_value(base, name, g, &a) != 0)
    return SMRULES_ERR;
  int rc = rk_value(other, name, g, &b);
  if (rc == 0) {
    compare_pair(&a, &b, NULL, c);
    rk_api->release(&b);
  }
  rk_api->release(&a);
  return rc;
}

/* Compares one tensor at g: -1 not compared, 0 similar, 1 violation.
 * The host does the comparison while another rule has this trial's
 * value in memory when it can (api->pair_value_parts, reading the
 * reference in pieces beside it), so that this trial is not read a second
 * time for it. */
static int compare(smrules_ctx *ctx, smrules_trial *base, smrules_trial *other,
                   const char *name, int64_t g) {
  comparison c;
  int rc;
  if (SMRULES_API_HAS(rk_api, pair_value_parts))
    rc = rk_api->pair_value_parts(ctx, other, name, g, SMRULES_MODE_GLOBAL,
                                  compare_pair, merge_pair, NULL, &c, sizeof c);
  else if (SMRULES_API_HAS(rk_api, pair_value))
    rc = rk_api->pair_value(ctx, other, name, g, SMRULES_MODE_GLOBAL,
                            compare_pair, NULL, &c, sizeof c);
  else
    rc = compare_read(base, other, name, g, &c);
  if (rc != SMRULES_OK)
    return -1;
  if (c.differs) {
    smrules_json *j = rk_violation(ctx, name);
    rk_api->json_num(j, "max_abs_diff", c.max_abs_diff);
    rk_api->json_bool(j, "same_shape", c.same_shape);
  }
  return c.differs;
}

static int invoke(smrules_ctx *ctx, void *p, int64_t g) {
  const state *st = p;
  smrules_trial *t = rk_api->trial(ctx);
  smrules_strlist names;
  rk_select(t, &st->s->collection_names, &st->s->tensor_regex, true, &names);
  int64_t evaluated = 0, violations = 0;
  for (size_t i = 0; i < names.n; i++) {
    int rc = compare(ctx, t, st->other, names.v[i], g);
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
    .name = "SimilarAcrossRuns",
    .description = "tensors that differ from the same tensor at the same "
                   "step of another run",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "the same tensors saved at the same steps in both trials "
                   "(collection_names/tensor_regex, else every tensor)",
    .init = init,
    .invoke_at_step = invoke,
    .destroy = free,
    .flags = SMRULES_RULE_STATELESS,
};

RK_PLUGIN(rule)
