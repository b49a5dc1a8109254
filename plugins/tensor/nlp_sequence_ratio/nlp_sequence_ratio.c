/* NLPSequenceRatio (docs/rules/NLPSequenceRatio.md): input sequences in which a
 * token (padding, unknown word, ...) makes up more than its threshold percent
 * of the elements. */
#include <stdlib.h>

#include "smrules/rulekit.h"

#define DEFAULT_REGEX ".*embedding0_input_0"

typedef struct settings {
  smrules_strlist tensor_regex;
  smrules_numlist token_values;
  smrules_numlist token_thresholds_percent;
} settings;

static const smrules_param params[] = {
    SMRULES_STRLIST_PARAM("tensor_regex", DEFAULT_REGEX, settings, tensor_regex,
                          "regexes selecting the input sequences (search "
                          "semantics); empty means the default",
                          SMRULES_REGEX),
    SMRULES_NUMLIST_PARAM("token_values", "0", settings, token_values,
                          "token ids to count (e.g. padding 0)"),
    SMRULES_NUMLIST_PARAM("token_thresholds_percent", "50", settings,
                          token_thresholds_percent,
                          "one percentage per token value, or one for all",
                          SMRULES_RANGE(0, 100)),
    SMRULES_END_PARAMS};

typedef struct state {
  smrules_strlist regexes;
  smrules_numlist tokens, thresholds;
} state;

static const char *const default_regex[] = {DEFAULT_REGEX};
static const double default_token[] = {0};
static const double default_threshold[] = {50};

static int init(smrules_ctx *ctx, const void *sv, void **out) {
  const settings *s = sv;
  state *st = calloc(1, sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  /* Emptied parameters fall back to the documented defaults. */
  st->regexes =
      s->tensor_regex.n ? s->tensor_regex : (smrules_strlist){1, default_regex};
  st->tokens =
      s->token_values.n ? s->token_values : (smrules_numlist){1, default_token};
  st->thresholds = s->token_thresholds_percent.n
                       ? s->token_thresholds_percent
                       : (smrules_numlist){1, default_threshold};
  if (st->thresholds.n != 1 && st->thresholds.n != st->tokens.n) {
    rk_api->fail(ctx,
                 "parameter 'token_thresholds_percent' has %zu values for "
                 "%zu token_values: give one per token value, or one for "
                 "all",
                 st->thresholds.n, st->tokens.n);
    free(st);
    return SMRULES_ERR;
  }
  *out = st;
  return 0;
}

static int64_t check_tensor(smrules_ctx *ctx, const state *st, const char *name,
                            const smrules_tensor *v) {
  int64_t violations = 0;
  for (size_t k = 0; k < st->tokens.n; k++) {
    int64_t hits = 0;
    for (int64_t i = 0; i < v->count; i++)
      hits += rk_api->get(v, i) == st->tokens.v[k];
    double pct = 100.0 * (double)hits / (double)v->count;
    double limit = st->thresholds.v[st->thresholds.n == 1 ? 0 : k];
    if (pct > limit) {
      smrules_json *j = rk_violation(ctx, name);
      rk_api->json_num(j, "token", st->tokens.v[k]);
      rk_api->json_num(j, "percent", pct);
      violations++;
    }
  }
  return violations;
}

static int invoke(smrules_ctx *ctx, void *p, int64_t g) {
  const state *st = p;
  smrules_trial *t = rk_api->trial(ctx);
  smrules_strlist names;
  if (rk_api->select(t, NULL, &st->regexes, &names) != 0)
    return SMRULES_SKIPPED;
  int64_t evaluated = 0, violations = 0;
  for (size_t i = 0; i < names.n; i++) {
    smrules_tensor v;
    if (rk_value(t, names.v[i], g, &v) != 0)
      continue;
    if (rk_is_numeric(&v)) {
      evaluated++;
      violations += check_tensor(ctx, st, names.v[i], &v);
    }
    rk_api->release(&v);
  }
  rk_api->strlist_free(&names);
  rk_api->datapoints(ctx, evaluated);
  return rk_result(evaluated, violations);
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "NLPSequenceRatio",
    .description = "input sequences dominated by particular tokens "
                   "(padding, unknown words)",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "input sequences matched by tensor_regex (SageMaker saves "
                   "collection input_sequence, include_regex "
                   ".*embedding0_input_0)",
    .init = init,
    .invoke_at_step = invoke,
    .destroy = free,
    .flags = SMRULES_RULE_STATELESS,
};

RK_PLUGIN(rule)
