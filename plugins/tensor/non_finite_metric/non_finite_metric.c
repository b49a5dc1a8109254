/* NonFiniteMetric (docs/rules/NonFiniteMetric.md): a chosen scalar that is
 * NaN or infinite, with the first global step this rule saw it so. */
#include <math.h>
#include <stdlib.h>

#include "smrules/rulekit.h"

typedef struct settings {
  smrules_strlist collection_names;
  smrules_strlist tensor_regex;
} settings;

static const smrules_param params[] = {
    SMRULES_STRLIST_PARAM("collection_names", NULL, settings, collection_names,
                          "collections of scalars to check"),
    SMRULES_STRLIST_PARAM("tensor_regex", NULL, settings, tensor_regex,
                          "regexes selecting the scalars (search semantics); "
                          "unset with no collection_names: every tensor",
                          SMRULES_REGEX),
    SMRULES_END_PARAMS};

typedef struct first_bad {
  bool seen;
  int64_t step;
} first_bad;

typedef struct state {
  const settings *s;
  rk_table first; /* of first_bad, per tensor */
} state;

static int init(smrules_ctx *ctx, const void *s, void **out) {
  state *st = calloc(1, sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = s;
  rk_table_init(&st->first, sizeof(first_bad));
  *out = st;
  return 0;
}

static void destroy(void *p) {
  state *st = p;
  rk_table_free(&st->first);
  free(st);
}

static int invoke(smrules_ctx *ctx, void *p, int64_t g) {
  state *st = p;
  smrules_trial *t = rk_api->trial(ctx);
  smrules_strlist names;
  if (st->s->collection_names.n || st->s->tensor_regex.n)
    rk_api->select(t, &st->s->collection_names, &st->s->tensor_regex, &names);
  else
    rk_api->tensor_names(t, &names);
  int64_t evaluated = 0, violations = 0;
  for (size_t i = 0; i < names.n; i++) {
    double x;
    if (rk_scalar(t, names.v[i], g, SMRULES_MODE_GLOBAL, &x, NULL) != 0)
      continue; /* not saved here, or not a scalar */
    evaluated++;
    if (isfinite(x))
      continue;
    first_bad *f = rk_table_get(&st->first, names.v[i], true);
    if (f && !f->seen) {
      f->seen = true;
      f->step = g;
    }
    int mode = 0;
    int64_t ms = g;
    rk_api->step_mode(t, g, &mode, &ms);
    smrules_json *j = rk_violation(ctx, names.v[i]);
    rk_api->json_int(j, "step", g);
    rk_api->json_str(j, "mode", rk_mode_name(mode));
    rk_api->json_int(j, "mode_step", ms);
    rk_api->json_str(j, "value", isnan(x) ? "nan" : x > 0 ? "inf" : "-inf");
    rk_api->json_int(j, "first_step", f ? f->step : g);
    violations++;
  }
  rk_api->strlist_free(&names);
  rk_api->datapoints(ctx, evaluated);
  return rk_result(evaluated, violations);
}

/* "nfm1" then, per tensor seen non-finite: name first-step. */
static char *save_state(smrules_ctx *ctx, void *p) {
  const state *st = p;
  rk_text out = {0};
  rk_text_printf(&out, "nfm1");
  for (size_t i = 0; i < st->first.n; i++) {
    const first_bad *f = rk_table_at(&st->first, i);
    if (f->seen) {
      rk_text_name(&out, st->first.keys[i]);
      rk_text_int(&out, f->step);
    }
  }
  return rk_text_take(&out);
}

static int load_state(smrules_ctx *ctx, void *p, const char *text) {
  state *st = p;
  rk_scan sc = {text, false};
  if (!rk_scan_word(&sc, "nfm1"))
    return SMRULES_ERR;
  while (!rk_scan_end(&sc)) {
    char *name = rk_scan_name(&sc);
    int64_t step;
    bool ok = name && rk_scan_int(&sc, &step);
    if (ok) {
      first_bad *f = rk_table_get(&st->first, name, true);
      f->seen = true;
      f->step = step;
    }
    free(name);
    if (!ok) {
      rk_table_free(&st->first);
      rk_table_init(&st->first, sizeof(first_bad));
      return SMRULES_ERR;
    }
  }
  return 0;
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "NonFiniteMetric",
    .description = "a scalar metric that is NaN or infinite",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "scalar values (tensor_regex/collection_names, else all)",
    .init = init,
    .invoke_at_step = invoke,
    .destroy = destroy,
    .save_state = save_state,
    .load_state = load_state,
};

RK_PLUGIN(rule)
