/* LossNotDecreasing (docs/rules/LossNotDecreasing.md): a scalar loss that did
 * not fall by at least `diff_percent` percent over `num_steps` steps. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "smrules/rulekit.h"

typedef struct settings {
  smrules_strlist collection_names;
  smrules_strlist tensor_regex;
  bool use_losses_collection;
  int64_t num_steps;
  double diff_percent, increase_threshold_percent;
  const char *mode;
} settings;

static const char *const MODES[] = {"TRAIN", "EVAL", "PREDICT", "GLOBAL", NULL};

static const smrules_param params[] = {
    SMRULES_STRLIST_PARAM("collection_names", NULL, settings, collection_names,
                          "collections holding the losses"),
    SMRULES_STRLIST_PARAM("tensor_regex", NULL, settings, tensor_regex,
                          "regexes selecting the losses (search semantics)",
                          SMRULES_REGEX),
    SMRULES_BOOL_PARAM("use_losses_collection", "True", settings,
                       use_losses_collection,
                       "also check the members of the losses collection"),
    SMRULES_INT_PARAM("num_steps", "10", settings, num_steps,
                      "steps (of the mode) between the two losses compared",
                      SMRULES_MIN(1)),
    SMRULES_FLOAT_PARAM(
        "diff_percent", "0.1", settings, diff_percent,
        "minimum percentage by which the loss must fall over num_steps",
        SMRULES_FLAGS(SMRULES_P_MIN | SMRULES_P_MAX | SMRULES_P_MAX_OPEN),
        .max = 100),
    SMRULES_FLOAT_PARAM(
        "increase_threshold_percent", "5", settings, increase_threshold_percent,
        "a violation whose loss rose by more than this is marked diverging",
        SMRULES_FLAGS(SMRULES_P_MIN | SMRULES_P_MAX | SMRULES_P_MAX_OPEN),
        .max = 100),
    SMRULES_STRING_PARAM(
        "mode", NULL, settings, mode,
        "mode whose steps are checked (unset: EVAL, else TRAIN, else GLOBAL)",
        .allowed = MODES),
    SMRULES_END_PARAMS};

/* Per tensor: the position of the last check in each mode. */
typedef struct last_check {
  bool set[SMRULES_MODE_GLOBAL + 1];
  int64_t pos[SMRULES_MODE_GLOBAL + 1];
} last_check;

typedef struct state {
  const settings *s;
  int mode;      /* explicit mode, or 0 */
  rk_table last; /* of last_check */
  rk_step_cache steps;
} state;

static int init(smrules_ctx *ctx, const void *s, void **out) {
  const settings *cfg = s;
  state *st = calloc(1, sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = cfg;
  st->mode = rk_mode_parse(cfg->mode);
  rk_table_init(&st->last, sizeof(last_check));
  rk_step_cache_init(&st->steps);
  *out = st;
  return 0;
}

static void destroy(void *p) {
  state *st = p;
  rk_table_free(&st->last);
  rk_step_cache_free(&st->steps);
  free(st);
}

/* L = select(...) ∪ losses; all tensors when that is empty. */
static void loss_tensors(const settings *s, smrules_trial *t,
                         smrules_strlist *out) {
  size_t n = s->collection_names.n;
  const char **colls = calloc(n + 1, sizeof *colls);
  if (colls && n)
    memcpy(colls, s->collection_names.v, n * sizeof *colls);
  if (colls && s->use_losses_collection)
    colls[n++] = "losses";
  smrules_strlist c = {colls ? n : 0, colls};
  rk_api->select(t, &c, &s->tensor_regex, out);
  free(colls);
  if (out->n == 0) {
    rk_api->strlist_free(out);
    rk_api->tensor_names(t, out);
  }
}

/* Whether the tensor has a step of `mode` at or before global step g. */
static bool has_mode_step_by(state *st, smrules_trial *t, const char *name,
                             int mode, int64_t g) {
  size_t n;
  const int64_t *steps = rk_step_cache_get(&st->steps, t, name, mode, &n);
  int64_t first = -1;
  return n && rk_api->global_step(t, mode, steps[0], &first) == 0 && first <= g;
}

static int mode_for(state *st, smrules_trial *t, const char *name, int64_t g) {
  if (st->mode)
    return st->mode;
  if (has_mode_step_by(st, t, name, SMRULES_MODE_EVAL, g))
    return SMRULES_MODE_EVAL;
  if (has_mode_step_by(st, t, name, SMRULES_MODE_TRAIN, g))
    return SMRULES_MODE_TRAIN;
  return SMRULES_MODE_GLOBAL;
}

/* r = max{p in steps of the tensor in `mode` : p <= c - num_steps}. */
static int64_t reference(state *st, smrules_trial *t, const char *name,
                         int mode, int64_t c) {
  size_t n;
  const int64_t *steps = rk_step_cache_get(&st->steps, t, name, mode, &n);
  int64_t limit = c - st->s->num_steps;
  size_t lo = 0, hi = n; /* binary search: the last step <= limit */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (steps[mid] <= limit)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo > 0 ? steps[lo - 1] : -1;
}

static double change_percent(double loss, double ref) {
  if (ref == 0)
    return loss == 0 ? 0 : loss > 0 ? INFINITY : -INFINITY;
  return 100.0 * (loss - ref) / fabs(ref);
}

typedef struct check {
  const char *name;
  int mode;
  int64_t g, c, r;
  double loss, ref;
} check;

static void report(smrules_ctx *ctx, const state *st, smrules_trial *t,
                   const check *k, double change) {
  int64_t rg = k->r;
  if (k->mode != SMRULES_MODE_GLOBAL)
    rk_api->global_step(t, k->mode, k->r, &rg);
  smrules_json *j = rk_violation(ctx, k->name);
  rk_api->json_int(j, "step", k->g);
  rk_api->json_int(j, "reference_step", rg);
  rk_api->json_str(j, "mode", rk_mode_name(k->mode));
  rk_api->json_num(j, "loss", k->loss);
  rk_api->json_num(j, "reference_loss", k->ref);
  rk_api->json_num(j, "change_percent", change);
  rk_api->json_num(j, "required_decrease_percent", st->s->diff_percent);
  rk_api->json_bool(j, "diverging", change > st->s->increase_threshold_percent);
}

/* The position of g in `mode` (global step for GLOBAL), or -1 when g is
 * a step of another mode. */
static int64_t position(smrules_trial *t, int mode, int64_t g) {
  if (mode == SMRULES_MODE_GLOBAL)
    return g;
  int m;
  int64_t ms;
  if (rk_api->step_mode(t, g, &m, &ms) != 0 || m != mode)
    return -1;
  return ms;
}

/* One tensor at g: 0 fine, 1 violation; -1 not evaluated for want of
 * data, NOT_DUE not evaluated by design (a step of another mode, fewer
 * than num_steps steps since the last check or since the first, a tensor
 * that is not a scalar). */
#define NOT_DUE -2
static int check_tensor(smrules_ctx *ctx, state *st, smrules_trial *t,
                        const char *name, int64_t g) {
  check k = {.name = name, .g = g, .mode = mode_for(st, t, name, g)};
  k.c = position(t, k.mode, g);
  if (k.c < 0)
    return NOT_DUE;
  int rc = rk_scalar(t, name, g, SMRULES_MODE_GLOBAL, &k.loss, NULL);
  if (rc > 0) /* saved, but not a scalar: not a loss (a live run selects */
    return NOT_DUE; /* every tensor until the collections file is there) */
  if (rc)
    return -1;
  last_check *lc = rk_table_get(&st->last, name, true);
  if (lc->set[k.mode] && k.c < lc->pos[k.mode] + st->s->num_steps)
    return NOT_DUE; /* checked less than num_steps ago */
  k.r = reference(st, t, name, k.mode, k.c);
  if (k.r < 0)
    return NOT_DUE; /* no step num_steps back yet */
  if (rk_scalar(t, name, k.r, k.mode, &k.ref, NULL))
    return -1;
  lc->set[k.mode] = true;
  lc->pos[k.mode] = k.c;
  double change = change_percent(k.loss, k.ref);
  if (isnan(change))
    return -1;
  if (!(-change < st->s->diff_percent))
    return 0;
  report(ctx, st, t, &k, change);
  return 1;
}

static int invoke(smrules_ctx *ctx, void *p, int64_t g) {
  state *st = p;
  smrules_trial *t = rk_api->trial(ctx);
  rk_step_cache_sync(&st->steps, t);
  smrules_strlist names;
  loss_tensors(st->s, t, &names);
  int64_t evaluated = 0, violations = 0, missing = 0;
  for (size_t i = 0; i < names.n; i++) {
    int rc = check_tensor(ctx, st, t, names.v[i], g);
    evaluated += rc >= 0;
    violations += rc == 1;
    missing += rc == -1;
  }
  size_t checked = names.n;
  rk_api->strlist_free(&names);
  rk_api->datapoints(ctx, evaluated);
  if (!evaluated && checked && !missing)
    return SMRULES_NOT_DUE;
  return rk_result(evaluated, violations);
}

/* "lnd1" then, per tensor and mode checked: name mode position. */
static char *save_state(smrules_ctx *ctx, void *p) {
  const state *st = p;
  rk_text out = {0};
  rk_text_printf(&out, "lnd1");
  for (size_t i = 0; i < st->last.n; i++) {
    const last_check *lc = rk_table_at(&st->last, i);
    for (int m = SMRULES_MODE_TRAIN; m <= SMRULES_MODE_GLOBAL; m++)
      if (lc->set[m]) {
        rk_text_name(&out, st->last.keys[i]);
        rk_text_int(&out, m);
        rk_text_int(&out, lc->pos[m]);
      }
  }
  return rk_text_take(&out);
}

static int load_state(smrules_ctx *ctx, void *p, const char *text) {
  state *st = p;
  rk_scan sc = {text, false};
  if (!rk_scan_word(&sc, "lnd1"))
    return SMRULES_ERR;
  while (!rk_scan_end(&sc)) {
    char *name = rk_scan_name(&sc);
    int64_t m, pos;
    bool ok = name && rk_scan_int(&sc, &m) && rk_scan_int(&sc, &pos) &&
              m >= SMRULES_MODE_TRAIN && m <= SMRULES_MODE_GLOBAL;
    if (ok) {
      last_check *lc = rk_table_get(&st->last, name, true);
      lc->set[m] = true;
      lc->pos[m] = pos;
    }
    free(name);
    if (!ok) { /* start from a clean state */
      rk_table_free(&st->last);
      rk_table_init(&st->last, sizeof(last_check));
      return SMRULES_ERR;
    }
  }
  return 0;
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "LossNotDecreasing",
    .description = "a loss that stops decreasing at an adequate rate",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "collection losses (or collection_names/tensor_regex), "
                   "scalar values",
    .init = init,
    .invoke_at_step = invoke,
    .destroy = destroy,
    .save_state = save_state,
    .load_state = load_state,
};

RK_PLUGIN(rule)
