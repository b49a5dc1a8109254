/* SaturatedActivation (docs/rules/SaturatedActivation.md): tanh/sigmoid layers
 * in which more than threshold_layer % of the units see their input inside
 * (min, max) for less than threshold_inactivity % of the samples, i.e. mostly
 * sit in the flat parts of the function.
 *
 * The older pair parameters threshold_tanh / threshold_sigmoid ("(min,
 * max)", "min,max" or a YAML list; docs/rule-semantics.md#decisions, Decision
 * R10) cannot be table aliases of two scalars, so they are list parameters
 * resolved here: when given, a pair replaces the corresponding _min/_max
 * values. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kernels.h"
#include "smrules/rulekit.h"

typedef struct settings {
  smrules_strlist collection_names;
  smrules_strlist tensor_regex;
  double tanh_min, tanh_max, sigmoid_min, sigmoid_max;
  double threshold_inactivity, threshold_layer;
  smrules_strlist tanh_pair, sigmoid_pair;
} settings;

#define FLOAT_PARAM(nm, def, field, desc)                                      \
  {                                                                            \
    .type = SMRULES_PARAM_FLOAT, .name = nm, .default_value = def,             \
    .offset = SMRULES_OFFSET(settings, field), .description = desc             \
  }
#define PERCENT_PARAM(nm, def, field, desc)                                    \
  {                                                                            \
    .type = SMRULES_PARAM_FLOAT, .name = nm, .default_value = def,             \
    .flags = SMRULES_P_MIN | SMRULES_P_MAX, .min = 0, .max = 100,              \
    .offset = SMRULES_OFFSET(settings, field), .description = desc             \
  }

static const smrules_param params[] = {
    SMRULES_STRLIST_PARAM("collection_names", NULL, settings, collection_names,
                          "collections whose tensors are checked"),
    SMRULES_STRLIST_PARAM("tensor_regex", ".*tanh_input|.*sigmoid_input",
                          settings, tensor_regex,
                          "regexes selecting activation inputs (search "
                          "semantics)",
                          SMRULES_REGEX),
    FLOAT_PARAM("threshold_tanh_min", "-9.4999", tanh_min,
                "tanh input at or below this is saturated"),
    FLOAT_PARAM("threshold_tanh_max", "9.4999", tanh_max,
                "tanh input at or above this is saturated"),
    FLOAT_PARAM("threshold_sigmoid_min", "-23", sigmoid_min,
                "sigmoid input at or below this is saturated"),
    FLOAT_PARAM("threshold_sigmoid_max", "16.99999", sigmoid_max,
                "sigmoid input at or above this is saturated"),
    PERCENT_PARAM("threshold_inactivity", "1.0", threshold_inactivity,
                  "a unit unsaturated in less than this percent of the "
                  "samples is saturated"),
    PERCENT_PARAM("threshold_layer", "50.0", threshold_layer,
                  "a layer with more than this percent of saturated units "
                  "violates"),
    SMRULES_STRLIST_PARAM("threshold_tanh", NULL, settings, tanh_pair,
                          "older form: \"(min, max)\" for tanh; replaces "
                          "threshold_tanh_min/max"),
    SMRULES_STRLIST_PARAM("threshold_sigmoid", NULL, settings, sigmoid_pair,
                          "older form: \"(min, max)\" for sigmoid; replaces "
                          "threshold_sigmoid_min/max"),
    SMRULES_END_PARAMS};

typedef struct bounds {
  double min, max;
} bounds;

typedef struct state {
  const settings *s;
  bounds tanh, sigmoid;
} state;

/* One item of a pair, without the surrounding "(", ")", "[" or "]". */
static bool pair_item(const char *item, bool first, double *out) {
  char buf[64];
  size_t n = strlen(item);
  if (n >= sizeof buf)
    return false;
  memcpy(buf, item, n + 1);
  char *b = buf, *e = buf + n;
  while (isspace((unsigned char)*b) || (first && (*b == '(' || *b == '[')))
    b++;
  while (e > b && (isspace((unsigned char)e[-1]) ||
                   (!first && (e[-1] == ')' || e[-1] == ']'))))
    *--e = '\0';
  char *end;
  *out = strtod(b, &end);
  return *b && *end == '\0' && isfinite(*out);
}

static int parse_pair(smrules_ctx *ctx, const char *name,
                      const smrules_strlist *l, bounds *out) {
  if (l->n == 0)
    return 0;
  bounds b;
  if (l->n != 2 || !pair_item(l->v[0], true, &b.min) ||
      !pair_item(l->v[1], false, &b.max)) {
    rk_api->fail(ctx,
                 "parameter '%s': expected a pair \"(min, max)\" of two "
                 "numbers",
                 name);
    return SMRULES_ERR;
  }
  *out = b;
  return 0;
}

static int check_order(smrules_ctx *ctx, const char *kind, bounds b) {
  if (b.min < b.max)
    return 0;
  rk_api->fail(ctx, "%s thresholds: min (%g) must be below max (%g)", kind,
               b.min, b.max);
  return SMRULES_ERR;
}

static int init(smrules_ctx *ctx, const void *sv, void **out) {
  const settings *s = sv;
  state *st = calloc(1, sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = s;
  st->tanh = (bounds){s->tanh_min, s->tanh_max};
  st->sigmoid = (bounds){s->sigmoid_min, s->sigmoid_max};
  if (parse_pair(ctx, "threshold_tanh", &s->tanh_pair, &st->tanh) ||
      parse_pair(ctx, "threshold_sigmoid", &s->sigmoid_pair, &st->sigmoid) ||
      check_order(ctx, "tanh", st->tanh) ||
      check_order(ctx, "sigmoid", st->sigmoid)) {
    free(st);
    return SMRULES_ERR;
  }
  *out = st;
  return 0;
}

/* Which bounds apply to a tensor, from its name; NULL: neither kind. */
static const bounds *kind_of(const state *st, const char *name) {
  if (strcasestr(name, "tanh"))
    return &st->tanh;
  if (strcasestr(name, "sigmoid"))
    return &st->sigmoid;
  return NULL;
}

static int invoke(smrules_ctx *ctx, void *p, int64_t g) {
  const state *st = p;
  smrules_trial *t = rk_api->trial(ctx);
  smrules_strlist names;
  if (rk_api->select(t, &st->s->collection_names, &st->s->tensor_regex,
                     &names) != 0)
    return SMRULES_SKIPPED;
  int64_t evaluated = 0, violations = 0;
  for (size_t i = 0; i < names.n; i++) {
    const bounds *b = kind_of(st, names.v[i]);
    smrules_tensor v;
    if (!b || rk_value(t, names.v[i], g, &v) != 0)
      continue;
    double saturated;
    int rc =
        rk_is_numeric(&v)
            ? rk_inactive_units_between(&v, b->min, b->max, /* unsaturated */
                                        st->s->threshold_inactivity, &saturated)
            : -1;
    rk_api->release(&v);
    if (rc != 0)
      continue;
    evaluated++;
    if (saturated > st->s->threshold_layer) {
      smrules_json *j = rk_violation(ctx, names.v[i]);
      rk_api->json_num(j, "saturated_percent", saturated);
      violations++;
    }
  }
  rk_api->strlist_free(&names);
  rk_api->datapoints(ctx, evaluated);
  return rk_result(evaluated, violations);
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "SaturatedActivation",
    .description = "tanh/sigmoid layers whose inputs sit in the flat parts "
                   "of the function",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "tanh/sigmoid inputs matched by tensor_regex or "
                   "collection_names",
    .init = init,
    .invoke_at_step = invoke,
    .destroy = free,
    .flags = SMRULES_RULE_STATELESS,
};

RK_PLUGIN(rule)
