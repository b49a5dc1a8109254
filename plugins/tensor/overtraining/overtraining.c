/* Overtraining (docs/rules/Overtraining.md): a training or validation loss that
 * has not improved by more than `delta` for `patience_*` saved steps (the
 * signal to stop early). */
#include <math.h>
#include <stdlib.h>

#include "smrules/rulekit.h"

typedef struct settings {
  int64_t patience_train, patience_validation;
  double delta;
} settings;

static const smrules_param params[] = {
    SMRULES_INT_PARAM("patience_train", "5", settings, patience_train,
                      "saved TRAIN steps without improvement before reporting",
                      SMRULES_MIN(1)),
    SMRULES_INT_PARAM("patience_validation", "10", settings,
                      patience_validation,
                      "saved EVAL steps without improvement before reporting",
                      SMRULES_MIN(1)),
    SMRULES_FLOAT_PARAM(
        "delta", "0.01", settings, delta,
        "a loss must fall below the best one by more than this to improve",
        SMRULES_MIN(0)),
    SMRULES_END_PARAMS};

enum { SERIES_TRAIN, SERIES_EVAL, NSERIES };
static const char *const SERIES_NAMES[NSERIES] = {"TRAIN", "EVAL"};

/* Early-stopping counters of one series of one loss tensor. */
typedef struct series {
  double best; /* +inf before the first value */
  int64_t wait;
  int64_t best_step; /* global step of `best`, -1 before */
} series;

typedef struct tensor_state {
  series s[NSERIES];
} tensor_state;

typedef struct state {
  const settings *s;
  rk_table tensors;    /* of tensor_state */
  rk_step_cache steps; /* what the trial holds, not rule state */
} state;

static int init(smrules_ctx *ctx, const void *s, void **out) {
  state *st = calloc(1, sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = s;
  rk_table_init(&st->tensors, sizeof(tensor_state));
  rk_step_cache_init(&st->steps);
  *out = st;
  return 0;
}

static void destroy(void *p) {
  state *st = p;
  rk_table_free(&st->tensors);
  rk_step_cache_free(&st->steps);
  free(st);
}

static tensor_state *tensor(state *st, const char *name) {
  tensor_state *ts = rk_table_get(&st->tensors, name, false);
  if (!ts) {
    ts = rk_table_get(&st->tensors, name, true);
    for (int i = 0; i < NSERIES; i++)
      ts->s[i] = (series){INFINITY, 0, -1};
  }
  return ts;
}

static bool has_steps(state *st, smrules_trial *t, const char *name, int mode) {
  size_t n;
  rk_step_cache_get(&st->steps, t, name, mode, &n);
  return n > 0;
}

/* The series a value at global step g belongs to, or -1: TRAIN and EVAL
 * steps by mode; GLOBAL steps count as TRAIN for a tensor that has
 * neither TRAIN nor EVAL steps. */
static int series_of(state *st, smrules_trial *t, const char *name, int64_t g) {
  int m;
  int64_t ms;
  if (rk_api->step_mode(t, g, &m, &ms) != 0)
    return -1;
  if (m == SMRULES_MODE_TRAIN)
    return SERIES_TRAIN;
  if (m == SMRULES_MODE_EVAL)
    return SERIES_EVAL;
  if (m == SMRULES_MODE_GLOBAL && !has_steps(st, t, name, SMRULES_MODE_TRAIN) &&
      !has_steps(st, t, name, SMRULES_MODE_EVAL))
    return SERIES_TRAIN;
  return -1;
}

/* One loss tensor at g: -1 not evaluated, 0 fine, 1 violation. */
static int check_tensor(smrules_ctx *ctx, state *st, smrules_trial *t,
                        const char *name, int64_t g) {
  double v;
  int k = series_of(st, t, name, g);
  if (k < 0 || rk_scalar(t, name, g, SMRULES_MODE_GLOBAL, &v, NULL) != 0)
    return -1;
  series *s = &tensor(st, name)->s[k];
  if (v < s->best - st->s->delta) {
    *s = (series){v, 0, g};
  } else {
    s->wait++;
  }
  int64_t patience =
      k == SERIES_TRAIN ? st->s->patience_train : st->s->patience_validation;
  if (s->wait < patience)
    return 0;
  smrules_json *j = rk_violation(ctx, name);
  rk_api->json_str(j, "series", SERIES_NAMES[k]);
  rk_api->json_num(j, "best", s->best);
  rk_api->json_int(j, "best_step", s->best_step);
  rk_api->json_num(j, "loss", v);
  rk_api->json_int(j, "wait", s->wait);
  rk_api->json_int(j, "patience", patience);
  return 1;
}

static int invoke(smrules_ctx *ctx, void *p, int64_t g) {
  state *st = p;
  smrules_trial *t = rk_api->trial(ctx);
  rk_step_cache_sync(&st->steps, t);
  smrules_strlist names;
  rk_api->collection(t, "losses", &names);
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

/* "ovt1", then per tensor: name and, per series, best wait best_step. */
static char *save_state(smrules_ctx *ctx, void *p) {
  const state *st = p;
  rk_text out = {0};
  rk_text_printf(&out, "ovt1");
  for (size_t i = 0; i < st->tensors.n; i++) {
    const tensor_state *ts = rk_table_at(&st->tensors, i);
    rk_text_name(&out, st->tensors.keys[i]);
    for (int k = 0; k < NSERIES; k++) {
      rk_text_num(&out, ts->s[k].best);
      rk_text_int(&out, ts->s[k].wait);
      rk_text_int(&out, ts->s[k].best_step);
    }
  }
  return rk_text_take(&out);
}

static bool load_tensor(state *st, rk_scan *sc) {
  char *name = rk_scan_name(sc);
  series s[NSERIES];
  bool ok = name != NULL;
  for (int k = 0; ok && k < NSERIES; k++)
    ok = rk_scan_num(sc, &s[k].best) && rk_scan_int(sc, &s[k].wait) &&
         rk_scan_int(sc, &s[k].best_step) && s[k].wait >= 0;
  if (ok) {
    tensor_state *ts = tensor(st, name);
    for (int k = 0; k < NSERIES; k++)
      ts->s[k] = s[k];
  }
  free(name);
  return ok;
}

static int load_state(smrules_ctx *ctx, void *p, const char *text) {
  state *st = p;
  rk_scan sc = {text, false};
  bool ok = rk_scan_word(&sc, "ovt1");
  while (ok && !rk_scan_end(&sc))
    ok = load_tensor(st, &sc);
  if (!ok) { /* start from a clean state */
    rk_table_free(&st->tensors);
    rk_table_init(&st->tensors, sizeof(tensor_state));
    return SMRULES_ERR;
  }
  return 0;
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "Overtraining",
    .description = "training or validation loss that no longer improves "
                   "(early-stopping signal)",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "collection losses, scalar values (TRAIN and EVAL mode)",
    .init = init,
    .invoke_at_step = invoke,
    .destroy = destroy,
    .save_state = save_state,
    .load_state = load_state,
};

RK_PLUGIN(rule)
