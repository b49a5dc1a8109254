/* UnchangedTensor (docs/rules/UnchangedTensor.md): a tensor whose value at its
 * last `num_steps` saved steps is the same (allclose) at each of them. */
#include <stdlib.h>
#include <string.h>

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

/* The first elements of each value read as the current one, kept for the
 * steps after it: a tensor that changed almost always shows it in its first
 * elements, and then its previous value need not be read again to know
 * that it is not allclose (a 12 MB weight matrix was read twice a step).
 * Only a cache (the answer is the same without it, a full comparison
 * whenever the prefixes agree), of fixed size: one slot per hash of
 * (name, step), float32 and float64 values only. */
#define PREFIX_ELEMS 64
#define PREFIX_SLOTS 1024
/* From a value read whole, WINDOWS runs of WINDOW_ELEMS elements spread
 * over it are kept too (at 0.62, 0.24, 0.85 and 0.47 of it, the golden
 * ratio's multiples, so that they fall in different places of each
 * dimension rather than all at channel 0 of some batches): a ReLU output's
 * first elements are often zero at every step (an inactive unit), so its
 * first elements proved nothing and the previous value was read again
 * whole (on the bench's cnn trial, 0.5 GB of UnchangedTensor's 1.2 GB).
 * Compared only with a current value read whole. */
#define WINDOWS 4
#define WINDOW_ELEMS 16

typedef struct prefix {
  char *name; /* NULL: empty */
  int64_t step;
  smrules_tensor shape; /* dtype, ndim, shape and count of the value */
  unsigned char bytes[PREFIX_ELEMS * sizeof(double)];
  int windows; /* kept windows: 0 (not read whole, or small) or WINDOWS */
  unsigned char window[WINDOWS][WINDOW_ELEMS * sizeof(double)];
} prefix;

typedef struct state {
  const settings *s;
  rk_step_cache steps; /* what the trial holds, not rule state */
  prefix *prefixes;    /* PREFIX_SLOTS, allocated when first needed */
  /* The windows of the current value when it was not read whole but its
   * windows alone were (current_value, api->value_runs): compared and
   * kept as those of a value read whole are. */
  bool have_runs;
  unsigned char runs[WINDOWS * WINDOW_ELEMS * sizeof(double)];
  /* The current value's first piece when it was read alone
   * (first_pieces_differ; PIECE_ELEMS elements of at most 8 bytes,
   * allocated when first needed), and the earlier step it proved
   * changed, or -1. */
  unsigned char *piece;
  int64_t piece_proved;
} state;

static int init(smrules_ctx *ctx, const void *s, void **out) {
  const settings *cfg = s;
  state *st = calloc(1, sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = cfg;
  st->piece_proved = -1;
  rk_step_cache_init(&st->steps);
  if (!cfg->collection_names.n && !cfg->tensor_regex.n)
    rk_api->log(ctx, SMRULES_LOG_WARNING,
                "neither collection_names nor tensor_regex is set: "
                "every tensor is inspected");
  *out = st;
  return 0;
}

static void destroy(void *p) {
  state *st = p;
  rk_step_cache_free(&st->steps);
  for (size_t i = 0; st->prefixes && i < PREFIX_SLOTS; i++)
    free(st->prefixes[i].name);
  free(st->prefixes);
  free(st->piece);
  free(st);
}

static prefix *prefix_slot(state *st, const char *name, int64_t step) {
  if (!st->prefixes &&
      !(st->prefixes = calloc(PREFIX_SLOTS, sizeof *st->prefixes)))
    return NULL; /* out of memory: compare in full */
  uint64_t h = 14695981039346656037ULL;
  for (const unsigned char *c = (const unsigned char *)name; *c; c++)
    h = (h ^ *c) * 1099511628211ULL;
  h ^= (uint64_t)step * 0x9E3779B97F4A7C15ULL;
  return &st->prefixes[(h >> 20) % PREFIX_SLOTS];
}

static size_t elem_size(const smrules_tensor *v) {
  return v->dtype == SMRULES_DT_FLOAT    ? sizeof(float)
         : v->dtype == SMRULES_DT_DOUBLE ? sizeof(double)
                                         : 0;
}

/* Where window w of a value of `count` elements starts (has_windows:
 * the window ends inside the value). */
static int64_t window_at(int64_t count, int w) {
  double f = (w + 1) * 0.6180339887498949;
  f -= (double)(int64_t)f;
  return (int64_t)((double)(count - WINDOW_ELEMS) * f);
}

/* Whether a value of `count` elements has its windows kept: only one
 * well beyond its first elements. */
static bool has_windows(int64_t count) {
  return count >= 4 * PREFIX_ELEMS + 2 * WINDOWS * WINDOW_ELEMS;
}

/* Keeps the first elements of `cur`, the value of `name` at `step`, and
 * its windows when it was read whole. */
static void prefix_keep(state *st, const char *name, int64_t step,
                        const smrules_tensor *cur, bool whole) {
  size_t size = elem_size(cur);
  prefix *p = size && cur->data ? prefix_slot(st, name, step) : NULL;
  char *copy = p ? strdup(name) : NULL;
  if (!copy)
    return;
  free(p->name);
  p->name = copy;
  p->step = step;
  memset(&p->shape, 0, sizeof p->shape);
  p->shape.dtype = cur->dtype;
  p->shape.ndim = cur->ndim;
  memcpy(p->shape.shape, cur->shape, sizeof cur->shape);
  p->shape.count = cur->count;
  size_t n = cur->count < PREFIX_ELEMS ? (size_t)cur->count : PREFIX_ELEMS;
  memcpy(p->bytes, cur->data, n * size);
  p->windows =
      (whole || st->have_runs) && has_windows(cur->count) ? WINDOWS : 0;
  for (int w = 0; w < p->windows; w++)
    memcpy(p->window[w],
           whole ? (const unsigned char *)cur->data +
                       (size_t)window_at(cur->count, w) * size
                 : st->runs + (size_t)w * WINDOW_ELEMS * size,
           WINDOW_ELEMS * size);
}

/* Whether the first elements of `name` at `step` are kept. */
static bool prefix_kept(state *st, const char *name, int64_t step) {
  prefix *p = st->prefixes ? prefix_slot(st, name, step) : NULL;
  return p && p->name && p->step == step && strcmp(p->name, name) == 0;
}

/* Whether n kept elements at `kept` are not allclose to the n elements
 * of cur from element `at` on (as rk_allclose(prev, cur) compares). */
static bool run_differs(const settings *s, const smrules_tensor *cur,
                        const unsigned char *kept, int64_t at, int64_t n) {
  smrules_tensor a = {.dtype = cur->dtype, .ndim = 1, .count = n};
  smrules_tensor b = a;
  a.shape[0] = b.shape[0] = n;
  a.data = kept;
  b.data = (const unsigned char *)cur->data + (size_t)at * elem_size(cur);
  return !rk_allclose(&a, &b, s->rtol, s->atol, s->equal_nan, NULL);
}

/* Whether the windows kept in p differ from the current value's windows
 * read alone (st->runs). */
static bool runs_differ(const state *st, const prefix *p,
                        const smrules_tensor *cur) {
  smrules_tensor runs = *cur;
  runs.data = st->runs;
  for (int w = 0; w < p->windows; w++)
    if (run_differs(st->s, &runs, p->window[w], (int64_t)w * WINDOW_ELEMS,
                    WINDOW_ELEMS))
      return true;
  return false;
}

/* The current value's windows alone (api->value_runs) into st->runs:
 * true when read.  Worth it only for a value whose first elements did
 * not prove a change (a ReLU output's inactive units) and whose previous
 * value's windows are kept. */
static bool read_runs(state *st, smrules_trial *t, const char *name, int64_t g,
                      const smrules_tensor *head) {
  size_t size = elem_size(head);
  if (!size || !has_windows(head->count) ||
      !SMRULES_API_HAS(rk_api, value_runs))
    return false;
  int64_t at[WINDOWS];
  for (int w = 0; w < WINDOWS; w++)
    at[w] = window_at(head->count, w);
  st->have_runs =
      rk_api->value_runs(t, name, g, SMRULES_MODE_GLOBAL, at, WINDOWS,
                         WINDOW_ELEMS, size, st->runs) == SMRULES_OK;
  return st->have_runs;
}

/* True when the kept elements of `name` at `step` prove that value not
 * allclose to `cur` (rk_allclose(prev, cur) is false as soon as one pair
 * is not close, or the shapes differ): its first elements, and its
 * windows when `cur` was read whole; false when nothing is kept or
 * nothing is proved. */
static bool prefix_differs(state *st, const char *name, int64_t step,
                           const smrules_tensor *cur, bool whole) {
  const settings *s = st->s;
  if (!prefix_kept(st, name, step))
    return false;
  prefix *p = prefix_slot(st, name, step);
  if (p->shape.dtype != cur->dtype || !cur->data)
    return false;
  if (!rk_same_shape(&p->shape, cur))
    return true;
  int64_t n = cur->count < PREFIX_ELEMS ? cur->count : PREFIX_ELEMS;
  if (run_differs(s, cur, p->bytes, 0, n))
    return true;
  for (int w = 0; whole && w < p->windows; w++)
    if (run_differs(s, cur, p->window[w], window_at(cur->count, w),
                    WINDOW_ELEMS))
      return true;
  return !whole && st->have_runs && runs_differ(st, p, cur);
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
static bool has_numeric_value(state *st, smrules_trial *t, const char *name,
                              int64_t g) {
  if (prefix_kept(st, name, g))
    return true; /* kept when it was read as a numeric value */
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

/* The value's element count: the product of its shape. */
static int64_t shape_count(const smrules_tensor *v) {
  uint64_t n = 1; /* the host checked that it fits unless a size is 0 */
  for (int i = 0; i < v->ndim && i < SMRULES_MAX_DIMS; i++)
    if (v->shape[i] == 0)
      return 0;
  for (int i = 0; i < v->ndim && i < SMRULES_MAX_DIMS; i++)
    n *= (uint64_t)v->shape[i];
  return (int64_t)n;
}

/* An earlier value is compared with the current one in pieces of
 * PIECE_ELEMS elements read one by one (api->value_pieces), up to the
 * first piece that is not allclose: when the kept elements proved nothing
 * (a ReLU output's inactive units are zero at every step, and its four
 * runs may all fall on them), the first difference still comes early,
 * and the previous value of 6-13 MB was read whole for it.  Worth it only
 * for a value of more than one piece. */
#define PIECE_ELEMS ((size_t)1 << 16)

/* Bytes per element of a value read whole (0 for strings). */
static size_t value_elem_size(const smrules_tensor *v) {
  return v->count > 0 && !v->strings && v->dtype != SMRULES_DT_STRING
             ? v->nbytes / (size_t)v->count
             : 0;
}

typedef struct piece_cmp {
  const settings *s;
  const smrules_tensor *cur;  /* the current value: dtype and shape */
  const unsigned char *elems; /* its first `held` elements, `size` bytes */
  int64_t held;               /* each (all of them when read whole) */
  size_t size;
  const smrules_tensor *prev; /* value_pieces' *out: dtype and shape */
  bool numeric;               /* prev is a numeric value */
  bool close;                 /* every piece so far is allclose */
} piece_cmp;

/* One piece of the earlier value against the same elements of cur, as
 * rk_allclose(prev, cur) compares them; stops at the first that is not
 * allclose (or, at the first piece, when the shapes differ), and at the
 * first past the elements of cur held (then nothing is proved). */
static int compare_piece(void *arg, int64_t first,
                         const smrules_tensor *piece) {
  piece_cmp *pc = arg;
  const smrules_tensor *cur = pc->cur;
  if (first == 0 && !rk_is_numeric(pc->prev)) {
    pc->numeric = false;
    return SMRULES_ERR;
  }
  if (first == 0 && !rk_same_shape(pc->prev, cur))
    pc->close = false;
  if (!pc->close || first + piece->count > pc->held)
    return SMRULES_ERR;
  smrules_tensor b = {.dtype = cur->dtype, .ndim = 1, .count = piece->count};
  b.shape[0] = piece->count;
  b.data = pc->elems + (size_t)first * pc->size;
  b.nbytes = (size_t)piece->count * pc->size;
  pc->close =
      rk_allclose(piece, &b, pc->s->rtol, pc->s->atol, pc->s->equal_nan, NULL);
  return pc->close ? SMRULES_OK : SMRULES_ERR;
}

/* Whether the value of `name` at `step` is allclose to cur (read whole):
 * 1 or 0, or -1 when it has no numeric value there. */
static int earlier_close(state *st, smrules_trial *t, const char *name,
                         int64_t step, const smrules_tensor *cur) {
  const settings *s = st->s;
  smrules_tensor prev;
  if (cur->count > (int64_t)PIECE_ELEMS && value_elem_size(cur) &&
      SMRULES_API_HAS(rk_api, value_pieces)) {
    piece_cmp pc = {.s = s,
                    .cur = cur,
                    .elems = cur->data,
                    .held = cur->count,
                    .size = value_elem_size(cur),
                    .prev = &prev,
                    .numeric = true,
                    .close = true};
    int rc = rk_api->value_pieces(t, name, step, SMRULES_MODE_GLOBAL,
                                  PIECE_ELEMS, compare_piece, &pc, &prev);
    if (rc == SMRULES_OK)
      return pc.numeric ? pc.close : -1;
    if (rc != SMRULES_ERR)
      return -1; /* not there: value() says the same */
    /* not in pieces (the record, the trial): value() reads it, and warns
     * when it cannot */
  }
  if (!numeric_value(t, name, step, &prev))
    return -1; /* only reductions or shapes saved there */
  bool same = rk_allclose(&prev, cur, s->rtol, s->atol, s->equal_nan, NULL);
  rk_api->release(&prev);
  return same;
}

/* value_pieces' callback keeping the first piece of a value in st->piece
 * (then stopping). */
typedef struct first_piece {
  unsigned char *buf;
  int64_t count;
  size_t size;
} first_piece;

static int keep_first_piece(void *arg, int64_t first,
                            const smrules_tensor *piece) {
  first_piece *fp = arg;
  size_t size = piece->count > 0 ? piece->nbytes / (size_t)piece->count : 0;
  if (first == 0 && size && size <= sizeof(double) &&
      (size_t)piece->count <= PIECE_ELEMS) {
    memcpy(fp->buf, piece->data, piece->nbytes);
    fp->count = piece->count;
    fp->size = size;
  }
  return SMRULES_ERR; /* the first piece only */
}

/* True when the first pieces of the value of `name` at g (head: its
 * dtype and shape) and of the earlier value at `prev` prove the two not
 * allclose, each read alone (api->value_pieces): a ReLU output whose
 * first elements and windows are those of the earlier value, read whole
 * for a difference that its first piece shows. */
static bool first_pieces_differ(state *st, smrules_trial *t, const char *name,
                                int64_t prev, int64_t g,
                                const smrules_tensor *head) {
  if (head->count <= (int64_t)PIECE_ELEMS ||
      !SMRULES_API_HAS(rk_api, value_pieces) ||
      (!st->piece && !(st->piece = malloc(PIECE_ELEMS * sizeof(double)))))
    return false;
  first_piece fp = {.buf = st->piece};
  smrules_tensor cur, old;
  if (rk_api->value_pieces(t, name, g, SMRULES_MODE_GLOBAL, PIECE_ELEMS,
                           keep_first_piece, &fp, &cur) != SMRULES_OK ||
      !fp.count || cur.dtype != head->dtype || !rk_same_shape(&cur, head))
    return false;
  piece_cmp pc = {.s = st->s,
                  .cur = &cur,
                  .elems = st->piece,
                  .held = fp.count,
                  .size = fp.size,
                  .prev = &old,
                  .numeric = true,
                  .close = true};
  return rk_api->value_pieces(t, name, prev, SMRULES_MODE_GLOBAL, PIECE_ELEMS,
                              compare_piece, &pc, &old) == SMRULES_OK &&
         pc.numeric && !pc.close;
}

/* The value of `name` at g for compare_back, as numeric_value reads it,
 * or only its first elements when they already prove it not allclose to
 * the kept first elements of `prev`, the newest saved step before g
 * (compare_back then needs nothing else of it: after a difference it only
 * counts steps with values).  Such a value has the shape and count of the
 * whole one, and only its first PREFIX_ELEMS elements in `data`; *read
 * says whether every element is there. */
static bool current_value(state *st, smrules_trial *t, const char *name,
                          int64_t prev, int64_t g, smrules_tensor *v,
                          bool *read) {
  *read = true;
  if (prev < 0 || !SMRULES_API_HAS(rk_api, value_head) ||
      !prefix_kept(st, name, prev))
    return numeric_value(t, name, g, v);
  if (rk_api->value_head(t, name, g, SMRULES_MODE_GLOBAL, PREFIX_ELEMS, v) != 0)
    return false; /* value() would fail the same way */
  if (!rk_is_numeric(v) || v->dtype == SMRULES_DT_STRING || v->strings) {
    rk_api->release(v);
    return false;
  }
  int64_t whole = shape_count(v);
  if (v->count == whole) /* read whole anyway */
    return true;
  v->count = whole;
  if (prefix_differs(st, name, prev, v, false)) {
    *read = false;
    return true;
  }
  /* the first elements prove nothing: the windows alone may */
  prefix *p = prefix_slot(st, name, prev);
  if (p && p->windows && read_runs(st, t, name, g, v) &&
      prefix_differs(st, name, prev, v, false)) {
    *read = false;
    return true;
  }
  /* nor the windows: the first pieces may */
  if (first_pieces_differ(st, t, name, prev, g, v)) {
    st->piece_proved = prev;
    *read = false;
    return true;
  }
  st->have_runs = false;
  rk_api->release(v);
  return numeric_value(t, name, g, v);
}

/* The newest of the first k saved steps before g, or -1. */
static int64_t step_before(const int64_t *all, size_t k, int64_t g) {
  for (size_t i = k; i-- > 0;)
    if (all[i] < g)
      return all[i];
  return -1;
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
static int compare_back(state *st, smrules_trial *t, const char *name,
                        const int64_t *all, size_t k, const smrules_tensor *cur,
                        bool whole, int64_t *steps) {
  const settings *s = st->s;
  size_t want = (size_t)s->num_steps, have = 1;
  bool same = true;
  int64_t g = steps[want - 1];
  for (size_t i = k; i-- > 0 && have < want;) {
    if (all[i] >= g)
      continue;
    if (!same) { /* changed: only whether enough steps have values matters */
      if (has_numeric_value(st, t, name, all[i]))
        steps[want - 1 - have++] = all[i];
      continue;
    }
    if (all[i] == st->piece_proved ||
        prefix_differs(st, name, all[i], cur,
                       whole)) { /* kept, or read: it had a value */
      same = false;
      steps[want - 1 - have++] = all[i];
      continue;
    }
    int close = earlier_close(st, t, name, all[i], cur);
    if (close < 0)
      continue; /* no numeric value there */
    same = close;
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
  bool whole;
  if (k < (size_t)s->num_steps ||
      !current_value(st, t, name, step_before(all, k, g), g, &cur, &whole))
    return -1;
  int rc = -1;
  int64_t *steps = calloc((size_t)s->num_steps, sizeof *steps);
  if (steps) {
    steps[s->num_steps - 1] = g;
    rc = compare_back(st, t, name, all, k, &cur, whole, steps);
    if (rc == 1)
      rk_api->json_ints(rk_violation(ctx, name), "steps", steps,
                        (size_t)s->num_steps);
  }
  free(steps);
  prefix_keep(st, name, g, &cur, whole); /* for the steps looking back at g */
  st->have_runs = false;
  st->piece_proved = -1;
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
