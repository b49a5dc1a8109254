/* Overfit (docs/rules/Overfit.md): the mean validation loss of an EVAL phase
 * exceeds the mean training loss of the TRAIN phase before it by more than
 * `ratio_threshold` (relative), `patience` evaluations in a row. */
#include <math.h>
#include <stdlib.h>

#include "smrules/rulekit.h"

typedef struct settings {
  smrules_strlist tensor_regex;
  int64_t start_step, patience;
  double ratio_threshold;
} settings;

static const smrules_param params[] = {
    SMRULES_STRLIST_PARAM(
        "tensor_regex", NULL, settings, tensor_regex,
        "regexes selecting the losses (unset: collection losses)",
        SMRULES_REGEX),
    SMRULES_INT_PARAM("start_step", "0", settings, start_step,
                      "global step from which losses are taken into account",
                      SMRULES_MIN(0)),
    SMRULES_INT_PARAM(
        "patience", "1", settings, patience,
        "consecutive evaluations above ratio_threshold before reporting",
        SMRULES_MIN(1)),
    SMRULES_FLOAT_PARAM(
        "ratio_threshold", "0.1", settings, ratio_threshold,
        "(mean_val - mean_train) / mean_train above this counts"),
    SMRULES_END_PARAMS};

typedef struct counter {
  int64_t above; /* consecutive evaluations above the threshold */
} counter;

typedef struct state {
  const settings *s;
  rk_table counters; /* of counter, per loss tensor */
  bool evaluated_once;
  rk_step_cache steps;   /* what the trial holds, not rule state */
  rk_scalar_memo values; /* likewise */
} state;

static int init(smrules_ctx *ctx, const void *s, void **out) {
  state *st = calloc(1, sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = s;
  rk_table_init(&st->counters, sizeof(counter));
  rk_step_cache_init(&st->steps);
  rk_scalar_memo_init(&st->values);
  *out = st;
  return 0;
}

static void destroy(void *p) {
  state *st = p;
  rk_table_free(&st->counters);
  rk_step_cache_free(&st->steps);
  rk_scalar_memo_free(&st->values);
  free(st);
}

static int mode_of(smrules_trial *t, int64_t g) {
  int m;
  int64_t ms;
  return rk_api->step_mode(t, g, &m, &ms) == 0 ? m : 0;
}

/* Mean of the scalar values over one phase. */
typedef struct phase {
  double sum;
  int64_t n;
} phase;

/* Walks back from index i in `steps` (global steps of the tensor, >=
 * start_step) over the run of entries of `mode`, skipping entries of modes
 * other than TRAIN and EVAL; returns the index just before the run. */
static size_t walk_phase(state *st, smrules_trial *t, const char *name,
                         const int64_t *steps, size_t i, int mode, phase *ph) {
  while (i-- > 0) {
    int m = mode_of(t, steps[i]);
    if (m != SMRULES_MODE_TRAIN && m != SMRULES_MODE_EVAL)
      continue;
    if (m != mode)
      return i + 1;
    double v;
    if (rk_scalar_memo_get(&st->values, t, name, steps[i], &v) == 0) {
      ph->sum += v;
      ph->n++;
    }
  }
  return 0;
}

/* Index of the first entry of the ascending `steps` that is > g (`above`)
 * or >= g. */
static size_t bound(const int64_t *steps, size_t n, int64_t g, bool above) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (above ? steps[mid] <= g : steps[mid] < g)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Means of the EVAL phase ending at g and of the TRAIN phase before it;
 * false when either has no value. */
static bool phase_means(state *st, smrules_trial *t, const char *name,
                        int64_t g, double *mean_val, double *mean_train) {
  size_t n;
  const int64_t *steps =
      rk_step_cache_get(&st->steps, t, name, SMRULES_MODE_GLOBAL, &n);
  size_t first = bound(steps, n, st->s->start_step, false);
  size_t end = bound(steps, n, g, true);
  if (end <= first)
    return false;
  phase val = {0, 0}, train = {0, 0};
  size_t i = walk_phase(st, t, name, steps + first, end - first,
                        SMRULES_MODE_EVAL, &val);
  walk_phase(st, t, name, steps + first, i, SMRULES_MODE_TRAIN, &train);
  if (!val.n || !train.n)
    return false;
  *mean_val = val.sum / (double)val.n;
  *mean_train = train.sum / (double)train.n;
  return true;
}

/* One loss tensor at g: -1 not evaluated, 0 fine, 1 violation. */
static int check_tensor(smrules_ctx *ctx, state *st, smrules_trial *t,
                        const char *name, int64_t g) {
  double cur, mean_val, mean_train;
  if (rk_scalar(t, name, g, SMRULES_MODE_GLOBAL, &cur, NULL) != 0 ||
      !phase_means(st, t, name, g, &mean_val, &mean_train) || mean_train == 0)
    return -1;
  double ratio = (mean_val - mean_train) / mean_train;
  counter *c = rk_table_get(&st->counters, name, true);
  c->above = ratio > st->s->ratio_threshold ? c->above + 1 : 0;
  st->evaluated_once = true;
  if (c->above < st->s->patience)
    return 0;
  smrules_json *j = rk_violation(ctx, name);
  rk_api->json_num(j, "mean_val", mean_val);
  rk_api->json_num(j, "mean_train", mean_train);
  rk_api->json_num(j, "ratio", ratio);
  rk_api->json_num(j, "ratio_threshold", st->s->ratio_threshold);
  rk_api->json_int(j, "consecutive", c->above);
  return 1;
}

static int invoke(smrules_ctx *ctx, void *p, int64_t g) {
  state *st = p;
  smrules_trial *t = rk_api->trial(ctx);
  if (g < st->s->start_step || mode_of(t, g) != SMRULES_MODE_EVAL)
    return SMRULES_SKIPPED;
  rk_step_cache_sync(&st->steps, t);
  smrules_strlist names;
  if (st->s->tensor_regex.n)
    rk_api->select(t, NULL, &st->s->tensor_regex, &names);
  else
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

static int finish(smrules_ctx *ctx, void *p) {
  const state *st = p;
  if (!st->evaluated_once)
    rk_api->json_str(rk_api->details(ctx), "note",
                     "never evaluated: no scalar loss tensor has an EVAL "
                     "phase after a TRAIN phase (save the losses in both "
                     "modes)");
  return 0;
}

/* "ovf1" evaluated_once, then per tensor: name count. */
static char *save_state(smrules_ctx *ctx, void *p) {
  const state *st = p;
  rk_text out = {0};
  rk_text_printf(&out, "ovf1");
  rk_text_int(&out, st->evaluated_once);
  for (size_t i = 0; i < st->counters.n; i++) {
    const counter *c = rk_table_at(&st->counters, i);
    rk_text_name(&out, st->counters.keys[i]);
    rk_text_int(&out, c->above);
  }
  return rk_text_take(&out);
}

static int load_state(smrules_ctx *ctx, void *p, const char *text) {
  state *st = p;
  rk_scan sc = {text, false};
  int64_t once;
  bool ok = rk_scan_word(&sc, "ovf1") && rk_scan_int(&sc, &once);
  while (ok && !rk_scan_end(&sc)) {
    char *name = rk_scan_name(&sc);
    int64_t above;
    ok = name && rk_scan_int(&sc, &above) && above >= 0;
    if (ok)
      ((counter *)rk_table_get(&st->counters, name, true))->above = above;
    free(name);
  }
  if (!ok) { /* start from a clean state */
    rk_table_free(&st->counters);
    rk_table_init(&st->counters, sizeof(counter));
    return SMRULES_ERR;
  }
  st->evaluated_once = once != 0;
  return 0;
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "Overfit",
    .description = "validation loss exceeding the training loss by a "
                   "growing margin",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "collection losses (or tensor_regex), scalar values saved "
                   "in TRAIN and EVAL mode",
    .init = init,
    .invoke_at_step = invoke,
    .finish = finish,
    .destroy = destroy,
    .save_state = save_state,
    .load_state = load_state,
};

RK_PLUGIN(rule)
