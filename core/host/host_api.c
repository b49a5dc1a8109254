/* host_api.c - the smrules_api function table handed to plugins
 * (smrules.h): thin adapters over the context (rulectx.c), the report
 * objects (report_json.c), the rule's files (rule_output.c), the trial's
 * queries and, for values and statistics, the one door to the data
 * (data.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/dtype.h"
#include "host/data.h"
#include "host/host_int.h"
#include "host/value_pairs.h"

/* The SDK's dtype numbers are the one dtype table's (format/dtype.c):
 * smrules_tensor.dtype is handed over unchanged.  A row added to the
 * table fails the count check until smrules.h names it too. */
#define SAME_DT(x) _Static_assert(SMRULES_DT_##x == SMR_DT_##x, "dtype " #x)
SAME_DT(INVALID);
SAME_DT(FLOAT);
SAME_DT(DOUBLE);
SAME_DT(INT32);
SAME_DT(UINT8);
SAME_DT(INT16);
SAME_DT(INT8);
SAME_DT(STRING);
SAME_DT(COMPLEX64);
SAME_DT(INT64);
SAME_DT(BOOL);
SAME_DT(QINT8);
SAME_DT(QUINT8);
SAME_DT(QINT32);
SAME_DT(BFLOAT16);
SAME_DT(QINT16);
SAME_DT(QUINT16);
SAME_DT(UINT16);
SAME_DT(COMPLEX128);
SAME_DT(HALF);
SAME_DT(UINT32);
SAME_DT(UINT64);
_Static_assert(SMRULES_DT_FLOAT8_E4M3FN + 1 == SMR_DTYPE_COUNT,
               "every row of the dtype table has an SMRULES_DT_ name");

/* ------------------------------------------- reports and parameters */

static int api_live_info(smrules_ctx *c, smrules_live_info *out) {
  *out = c->live;
  return SMRULES_OK;
}

static int api_live_workers(smrules_ctx *c, const char *const **names,
                            const int64_t **steps, size_t *n) {
  bool have = c->live_workers && c->live_newest;
  *names = have ? c->live_workers : NULL;
  *steps = have ? c->live_newest : NULL;
  *n = have ? c->nlive_workers : 0;
  return SMRULES_NO_TRIGGER;
}

static bool api_param_is_set(smrules_ctx *c, const char *name) {
  return c->params && smr_params_is_set(c->params, name);
}

static smrules_json *api_violation(smrules_ctx *c) {
  c->cur = smr_xrealloc(c->cur, (c->ncur + 1) * sizeof *c->cur);
  c->cur[c->ncur] = smr_rjson_new();
  return c->cur[c->ncur++];
}

static smrules_json *api_details(smrules_ctx *c) {
  return c->details;
}

static void api_datapoints(smrules_ctx *c, int64_t n) {
  c->datapoints += n;
  c->datapoints_reported = true;
}

/* ------------------------------------------------------ trial queries */

/* Every trial query of a plugin passes here: in a live run, the rule's
 * thread enters the trial's reader gate (trial.h) until its call is
 * over. */
static smr_trial *T(smrules_trial *t) {
  smr_trial_reader_enter((smr_trial *)t);
  return (smr_trial *)t;
}

static smrules_trial *api_trial(smrules_ctx *c) {
  return (smrules_trial *)c->trial;
}

/* Other trials are read as finished trials (docs/rules/SimilarAcrossRuns.md)
 * with a private catalog, opened once per path per rule instance. */
static smrules_trial *api_open_trial(smrules_ctx *c, const char *path) {
  for (size_t i = 0; i < c->nothers; i++)
    if (strcmp(c->other_paths[i], path) == 0)
      return (smrules_trial *)c->others[i];
  smr_trial_opts o = {.fresh = true};
  smr_trial *t;
  smr_error e;
  if (smr_trial_open(path, &o, &t, &e) != SMR_OK) {
    char msg[SMR_ERR_FILE_MAX + SMR_ERR_MSG_MAX + 32];
    smr_error_format(&e, msg, sizeof msg);
    smr_ctx_failf(c, "cannot open trial %s: %s", path, msg);
    return NULL;
  }
  c->others = smr_xrealloc(c->others, (c->nothers + 1) * sizeof *c->others);
  c->other_paths =
      smr_xrealloc(c->other_paths, (c->nothers + 1) * sizeof(char *));
  c->others[c->nothers] = t;
  c->other_paths[c->nothers++] = smr_xstrdup(path);
  return (smrules_trial *)t;
}

static void to_strlist(smr_strv *v, smrules_strlist *out) {
  out->n = v->n;
  out->v = (const char *const *)v->v;
}

static void api_strlist_free(smrules_strlist *l) {
  for (size_t i = 0; i < l->n; i++)
    free((void *)l->v[i]);
  free((void *)l->v);
  l->v = NULL;
  l->n = 0;
}

static int status_out(int rc) {
  return rc == SMR_OK || rc <= SMR_STEP_UNAVAILABLE ? rc : SMRULES_ERR;
}

static int api_tensor_names(smrules_trial *t, smrules_strlist *out) {
  smr_strv v = {0};
  smr_error e;
  int rc = smr_trial_tensor_names(T(t), &v, &e);
  to_strlist(&v, out);
  return status_out(rc);
}

static int api_collection(smrules_trial *t, const char *name,
                          smrules_strlist *out) {
  smr_strv v = {0};
  smr_error e;
  int rc = smr_trial_collection_members(T(t), name, NULL, &v, &e);
  to_strlist(&v, out);
  return status_out(rc);
}

static int api_select(smrules_trial *t, const smrules_strlist *colls,
                      const smrules_strlist *regexes, smrules_strlist *out) {
  smr_strv v = {0};
  smr_error e;
  int rc = SMR_OK;
  for (size_t i = 0; colls && rc == SMR_OK && i < colls->n; i++)
    rc = smr_trial_collection_members(T(t), colls->v[i], NULL, &v, &e);
  if (rc == SMR_OK && regexes && regexes->n)
    rc = smr_trial_tensor_names_regex(T(t), regexes->v, regexes->n, NULL, &v,
                                      &e);
  smr_strv_sort_unique(&v);
  to_strlist(&v, out);
  return status_out(rc);
}

static bool api_has_tensor(smrules_trial *t, const char *name) {
  return smr_trial_has_tensor(T(t), name);
}

static int api_steps(smrules_trial *t, int mode, int64_t **out, size_t *n) {
  smr_i64v v = {0};
  smr_trial_steps(T(t), mode, false, &v);
  *out = v.v;
  *n = v.n;
  return SMRULES_OK;
}

static int api_tensor_steps(smrules_trial *t, const char *name, int mode,
                            int64_t **out, size_t *n) {
  smr_i64v v = {0};
  smr_error e;
  int rc = smr_trial_tensor_step_list(T(t), name, mode, false, &v, &e);
  *out = v.v;
  *n = v.n;
  return status_out(rc);
}

static void api_steps_free(int64_t *steps) {
  free(steps);
}

static int api_step_mode(smrules_trial *t, int64_t step, int *mode,
                         int64_t *mode_step) {
  return smr_trial_step_mode(T(t), step, mode, mode_step)
             ? SMRULES_OK
             : SMRULES_STEP_UNAVAILABLE;
}

static int api_global_step(smrules_trial *t, int mode, int64_t mode_step,
                           int64_t *step) {
  return smr_trial_global_step(T(t), mode, mode_step, step)
             ? SMRULES_OK
             : SMRULES_STEP_UNAVAILABLE;
}

/* ----------------------- values and statistics (the one door: data.h) */

typedef struct host_tensor {
  smr_tensor t;
  smr_value_loc loc;
} host_tensor;

/* What a plugin sees of a value but its elements: dtype, shape, count,
 * where it was saved (value_out, and value_pieces' *out). */
static void tensor_meta_out(smrules_tensor *out, const smr_tensor *t,
                            const smr_value_loc *loc) {
  out->dtype = t->dtype;
  out->ndim = t->ndim;
  memcpy(out->shape, t->shape, sizeof out->shape);
  out->count = t->count;
  out->step = loc->step;
  out->mode = loc->mode;
  out->mode_step = loc->mode_step;
  out->wall_time = t->wall_time;
  out->worker = loc->worker;
}

/* All a plugin sees of a value: tensor_meta_out and its elements (value_out,
 * pair_value's fn). */
static void tensor_out(smrules_tensor *out, const smr_tensor *t,
                       const smr_value_loc *loc) {
  tensor_meta_out(out, t, loc);
  out->data = t->data;
  out->nbytes = t->nbytes;
  out->strings = (const uint8_t *const *)t->strings;
  out->string_lens = t->string_lens;
}

/* value and value_head: max_elems SIZE_MAX reads the whole value. */
static int value_out(smrules_trial *t, const char *name, int64_t step, int mode,
                     size_t max_elems, smrules_tensor *out) {
  memset(out, 0, sizeof *out);
  host_tensor *h = smr_xcalloc(1, sizeof *h);
  smr_error e;
  smr_error_clear(&e);
  int rc =
      max_elems == SIZE_MAX
          ? smr_data_value(T(t), name, step, mode, NULL, &h->t, &h->loc, &e)
          : smr_data_value_head(T(t), name, step, mode, max_elems, &h->t,
                                &h->loc, &e);
  if (rc == SMR_ERR_USAGE)
    rc = smr_data_unreadable(&e);
  if (rc != SMR_OK) {
    free(h);
    return rc;
  }
  tensor_out(out, &h->t, &h->loc);
  out->host_ = h;
  return SMRULES_OK;
}

static int api_value(smrules_trial *t, const char *name, int64_t step, int mode,
                     smrules_tensor *out) {
  return value_out(t, name, step, mode, SIZE_MAX, out);
}

static int api_value_head(smrules_trial *t, const char *name, int64_t step,
                          int mode, size_t max_elems, smrules_tensor *out) {
  if (max_elems == SIZE_MAX)
    max_elems--;
  return value_out(t, name, step, mode, max_elems, out);
}

static int api_value_runs(smrules_trial *t, const char *name, int64_t step,
                          int mode, const int64_t *at, size_t nruns,
                          size_t run_elems, size_t elem_size, void *dest) {
  return smr_data_value_runs(T(t), name, step, mode, at, nruns, run_elems,
                             elem_size, dest) == SMR_OK
             ? SMRULES_OK
             : SMRULES_ERR;
}

/* value_pieces: the plugin's fn called with each piece as a 1-D tensor,
 * *out filled from the value's head before the first. */
#define PIECES_MAX_BYTES ((size_t)4 << 20)

typedef struct piece_call {
  smrules_piece_fn fn;
  void *arg;
  smr_tensor head;
  smr_value_loc loc;
  smrules_tensor *out;
  bool told; /* *out filled */
} piece_call;

static void piece_out(piece_call *pc) {
  smrules_tensor *out = pc->out;
  memset(out, 0, sizeof *out);
  tensor_meta_out(out, &pc->head, &pc->loc);
  pc->told = true;
}

/* The worker's name of value_pieces' *out, kept after the call: this
 * thread's until its next call. */
static _Thread_local char pieces_worker[sizeof(((smr_value_loc *)0)->worker)];

static int hand_piece(void *arg, uint64_t off, const uint8_t *bytes,
                      size_t len) {
  piece_call *pc = arg;
  if (!pc->told)
    piece_out(pc);
  size_t size = smr_dtype_size(pc->head.dtype);
  smrules_tensor p = *pc->out;
  p.ndim = 1;
  memset(p.shape, 0, sizeof p.shape);
  p.shape[0] = p.count = (int64_t)(len / size);
  p.data = bytes;
  p.nbytes = len;
  return pc->fn(pc->arg, (int64_t)(off / size), &p) == SMRULES_OK
             ? SMR_OK
             : SMR_DATA_PIECES_STOP;
}

static int api_value_pieces(smrules_trial *t, const char *name, int64_t step,
                            int mode, size_t piece_elems, smrules_piece_fn fn,
                            void *arg, smrules_tensor *out) {
  if (!out)
    return SMRULES_ERR;
  memset(out, 0, sizeof *out);
  if (!t || !name || !fn || !piece_elems)
    return SMRULES_ERR;
  piece_call pc = {.fn = fn, .arg = arg, .out = out};
  int rc =
      smr_data_value_pieces(T(t), name, step, mode, PIECES_MAX_BYTES,
                            piece_elems, hand_piece, &pc, &pc.head, &pc.loc);
  if (rc != SMR_OK) {
    memset(out, 0, sizeof *out);
    return rc <= SMR_STEP_UNAVAILABLE ? rc : SMRULES_ERR;
  }
  if (!pc.told) /* a value has a piece at least: never */
    piece_out(&pc);
  snprintf(pieces_worker, sizeof pieces_worker, "%s", pc.loc.worker);
  out->worker = pieces_worker;
  return SMRULES_OK;
}

/* pair_value: the plugin's fn called with the values as the SDK's
 * tensors (value_pairs.h). */
static int call_pair_fn(const void *fn, const void *arg, const smr_tensor *a,
                        const smr_value_loc *la, const smr_tensor *b,
                        const smr_value_loc *lb, void *result) {
  smrules_pair_fn f;
  memcpy(&f, &fn, sizeof f); /* a function pointer kept as data */
  smrules_tensor ta = {0}, tb = {0};
  tensor_out(&ta, a, la);
  tensor_out(&tb, b, lb);
  return f(&ta, &tb, arg, result) == SMRULES_OK ? SMR_OK : SMR_ERR_USAGE;
}

static void call_pair_merge(const void *merge, const void *arg, void *into,
                            const void *part) {
  smrules_pair_merge_fn m;
  memcpy(&m, &merge, sizeof m); /* a function pointer kept as data */
  m(into, part, arg);
}

/* pair_value and pair_value_parts (merge NULL: the former). */
static int pair_value(smrules_ctx *c, smrules_trial *other, const char *name,
                      int64_t step, int mode, smrules_pair_fn fn,
                      smrules_pair_merge_fn merge, const void *arg,
                      void *result, size_t result_size) {
  if (!c || !other || !name || !fn || !result ||
      result_size > SMRULES_PAIR_RESULT_MAX)
    return SMRULES_ERR;
  const void *f, *m = NULL;
  memcpy(&f, &fn, sizeof f);
  if (merge)
    memcpy(&m, &merge, sizeof m);
  smr_pair_key k = {.owner = c,
                    .t = T((smrules_trial *)c->trial),
                    .other = (smr_trial *)other,
                    .call = call_pair_fn,
                    .fn = f,
                    .arg = arg,
                    .merge_call = merge ? call_pair_merge : NULL,
                    .merge = m};
  int rc = smr_value_pair(&k, name, step, mode, result, result_size);
  return rc == SMR_OK || rc <= SMR_STEP_UNAVAILABLE ? rc : SMRULES_ERR;
}

static int api_pair_value(smrules_ctx *c, smrules_trial *other,
                          const char *name, int64_t step, int mode,
                          smrules_pair_fn fn, const void *arg, void *result,
                          size_t result_size) {
  return pair_value(c, other, name, step, mode, fn, NULL, arg, result,
                    result_size);
}

static int api_pair_value_parts(smrules_ctx *c, smrules_trial *other,
                                const char *name, int64_t step, int mode,
                                smrules_pair_fn fn, smrules_pair_merge_fn merge,
                                const void *arg, void *result,
                                size_t result_size) {
  if (!merge)
    return SMRULES_ERR;
  return pair_value(c, other, name, step, mode, fn, merge, arg, result,
                    result_size);
}

static void api_release(smrules_tensor *t) {
  host_tensor *h = t->host_;
  if (h) {
    smr_tensor_release(&h->t);
    free(h);
  }
  memset(t, 0, sizeof *t);
}

static int api_value_keep(smrules_tensor *t) {
  host_tensor *h = t ? t->host_ : NULL;
  return h && smr_trial_value_keep(&h->t) ? SMRULES_OK : SMRULES_ERR;
}

/* A reduction the value has not (strings) is not saved at the step. */
static int reduction_out(int rc) {
  return rc == SMR_ERR_USAGE ? SMRULES_TENSOR_UNAVAILABLE_FOR_STEP : rc;
}

static const smr_tensor *core_tensor(const smrules_tensor *t) {
  return &((const host_tensor *)t->host_)->t;
}

static double api_get(const smrules_tensor *t, int64_t i) {
  if (!t->host_ || i < 0 || i >= t->count)
    return NAN;
  return smr_tensor_get(core_tensor(t), i);
}

/* ---- api->query and api->tensor_query: one request, a mask of parts ---- */

#define Q_KNOWN                                                                \
  (SMRULES_Q_COUNTS | SMRULES_Q_STATS |                                        \
   (SMRULES_Q_RED(SMRULES_RED_COUNT) - SMRULES_Q_RED(0)) |                     \
   (SMRULES_Q_ABS_RED(SMRULES_RED_COUNT) - SMRULES_Q_ABS_RED(0)))

/* The SDK's reductions are the host's, by number. */
_Static_assert(SMRULES_RED_COUNT == SMR_RED_COUNT_, "reductions: count");
_Static_assert((int)SMRULES_RED_LINF == (int)SMR_RED_LINF, "reductions: order");
_Static_assert(SMRULES_Q_ABS_RED(SMRULES_RED_COUNT) <= 0x80000000u,
               "the query mask fits in 32 bits");

static void stats_out(const smr_stats *ps, smrules_stats *out) {
  smr_stats s = *ps;
  out->count = s.count;
  out->finite = s.finite;
  out->nan = s.nan;
  out->pinf = s.pinf;
  out->ninf = s.ninf;
  out->zeros = s.zeros;
  out->has_finite = s.has_finite;
  out->min = s.min;
  out->max = s.max;
  out->sum = s.sum;
  out->mean = s.mean;
  out->l1 = s.l1;
  out->l2 = s.l2;
  out->linf = s.linf;
}

/* What a rule is handed: the counts alone are always without the other
 * statistics, whether computed for it or found in a full entry. */
static void what_out(const smr_stats *s, smr_stats_what what,
                     smrules_stats *out) {
  stats_out(s, out);
  if (what == SMR_STATS_COUNTS)
    out->min = out->max = out->sum = out->mean = out->l1 = out->l2 = out->linf =
        NAN;
}

/* Nothing asked or computed yet: counts 0, numbers NaN. */
static void values_empty(smrules_values *v) {
  memset(v, 0, sizeof *v);
  v->stats.min = v->stats.max = v->stats.sum = v->stats.mean = v->stats.l1 =
      v->stats.l2 = v->stats.linf = NAN;
  for (int r = 0; r < SMRULES_RED_COUNT; r++)
    v->red[r] = v->abs_red[r] = NAN;
}

/* The host's answer into a plugin's element of out_size bytes: a plugin
 * built when smrules_values was smaller gets the part it knows. */
static void values_put(void *out, size_t out_size, size_t i,
                       const smrules_values *v) {
  size_t n = out_size < sizeof *v ? out_size : sizeof *v;
  memcpy((char *)out + i * out_size, v, n);
}

static double *red_slot(smrules_values *v, int r, bool abs) {
  return abs ? &v->abs_red[r] : &v->red[r];
}

static int api_tensor_query(const smrules_tensor *t, unsigned what,
                            smrules_values *out, size_t out_size) {
  if (!t || !out || !out_size || (what & ~Q_KNOWN))
    return SMRULES_ERR;
  smrules_values v;
  values_empty(&v);
  int rc = t->host_ ? SMRULES_OK : SMRULES_ERR;
  smr_error e;
  if (rc == SMRULES_OK && (what & (SMRULES_Q_COUNTS | SMRULES_Q_STATS))) {
    smr_stats s;
    bool full = what & SMRULES_Q_STATS;
    if ((full ? smr_tensor_stats(core_tensor(t), &s, &e)
              : smr_tensor_counts(core_tensor(t), &s, &e)) == SMR_OK)
      what_out(&s, full ? SMR_STATS_FULL : SMR_STATS_COUNTS, &v.stats);
    else
      rc = SMRULES_ERR;
  }
  for (int k = 0; rc == SMRULES_OK && k < 2 * SMRULES_RED_COUNT; k++) {
    int r = k % SMRULES_RED_COUNT;
    bool abs = k >= SMRULES_RED_COUNT;
    if (!(what & (abs ? SMRULES_Q_ABS_RED(r) : SMRULES_Q_RED(r))))
      continue;
    if (smr_tensor_reduce(core_tensor(t), (smr_reduction)r, abs,
                          red_slot(&v, r, abs), &e) != SMR_OK)
      rc = SMRULES_ERR;
  }
  values_put(out, out_size, 0, &v);
  return rc;
}

/* Statistics that cannot be computed (strings) fail the rule. */
static int stats_status(int rc) {
  return rc == SMR_OK || rc <= SMR_STEP_UNAVAILABLE ? rc : SMRULES_ERR;
}

typedef struct query {
  smrules_values *v; /* one per name, in the host's layout */
  int *status;       /* the first failure per name */
  int *part;         /* scratch: one part's statuses */
  double *red;       /* scratch: one reduction's results */
  smr_stats_what what;
} query;

static void put_stats(void *arg, size_t i, const smr_stats *s) {
  query *q = arg;
  what_out(s, q->what, &q->v[i].stats);
}

static void query_stats(smr_trial *t, const char *const *names, size_t n,
                        int64_t step, int mode, query *q) {
  smr_data_stats_many(t, names, n, step, mode, q->what, q->part, put_stats, q);
  for (size_t i = 0; i < n; i++)
    if (q->status[i] == SMRULES_OK)
      q->status[i] = stats_status(q->part[i]);
}

static void query_reduction(smr_trial *t, const char *const *names, size_t n,
                            int64_t step, int mode, int r, bool abs, query *q) {
  smr_data_reductions(t, names, n, step, mode, r, abs, q->red, q->part);
  for (size_t i = 0; i < n; i++) {
    int rc = reduction_out(q->part[i]);
    if (rc == SMR_OK)
      *red_slot(&q->v[i], r, abs) = q->red[i];
    else if (q->status[i] == SMRULES_OK)
      q->status[i] = rc;
  }
}

/* Each part asked is one batch over all the names (read and reduced in
 * parallel by data.h), so a rule asking one thing costs what it did when
 * each thing had its own function. */
static int api_query(smrules_trial *t, const char *const *names, size_t n,
                     int64_t step, int mode, unsigned what, smrules_values *out,
                     size_t out_size, int *status) {
  if ((n && (!names || !out || !status || !out_size)) || (what & ~Q_KNOWN))
    return SMRULES_ERR;
  if (!n)
    return SMRULES_OK;
  query q = {.v = smr_xcalloc(n, sizeof *q.v),
             .status = status,
             .part = smr_xcalloc(n, sizeof *q.part),
             .red = smr_xcalloc(n, sizeof *q.red),
             .what =
                 what & SMRULES_Q_STATS ? SMR_STATS_FULL : SMR_STATS_COUNTS};
  for (size_t i = 0; i < n; i++) {
    values_empty(&q.v[i]);
    status[i] = SMRULES_OK;
  }
  if (what & (SMRULES_Q_COUNTS | SMRULES_Q_STATS))
    query_stats(T(t), names, n, step, mode, &q);
  for (int k = 0; k < 2 * SMRULES_RED_COUNT; k++) {
    int r = k % SMRULES_RED_COUNT;
    bool abs = k >= SMRULES_RED_COUNT;
    if (what & (abs ? SMRULES_Q_ABS_RED(r) : SMRULES_Q_RED(r)))
      query_reduction(T(t), names, n, step, mode, r, abs, &q);
  }
  for (size_t i = 0; i < n; i++)
    values_put(out, out_size, i, &q.v[i]);
  free(q.v);
  free(q.part);
  free(q.red);
  return SMRULES_OK;
}

/* ------------------------------------------------- profiler rules (api) */

static int no_profiler(smrules_ctx *c) {
  if (!c->profiler_rule && c->live.live)
    return SMRULES_NO_MORE_DATA; /* a clock rule: no metrics recorded */
  smr_ctx_failf(c, "%s",
                c->profiler_rule
                    ? "no profiler data: pass --profiler DIR, or a "
                      "--trial holding profiler-output/"
                    : "only profiler rules read profiler data");
  return SMRULES_ERR;
}

static int api_window(smrules_ctx *c, int64_t *index, int64_t *start_us,
                      int64_t *end_us) {
  if (!c->profiler_rule || !c->in_window)
    return SMRULES_ERR;
  *index = c->win_index;
  *start_us = c->win_start;
  *end_us = c->win_end;
  return SMRULES_OK;
}

static int api_system_events(smrules_ctx *c, int64_t start_us, int64_t end_us,
                             const smrules_sys_event **out, size_t *n) {
  *out = NULL;
  *n = 0;
  if (smr_ctx_sub_sys(c, start_us, end_us, out, n)) /* subrule.c */
    return SMRULES_NO_TRIGGER;
  if (!c->prof)
    return no_profiler(c);
  smr_profiler_release_sys(c->prof, &c->sys);
  if (c->attached_prof) /* a live run's metrics: read what came since */
    smr_profiler_refresh(c->prof);
  smr_error e;
  smr_error_clear(&e);
  if (smr_profiler_system_events(c->prof, start_us, end_us, &c->sys, &e) !=
      SMR_OK) {
    smr_ctx_failf(c, "reading system metrics: %s", e.msg);
    return SMRULES_ERR;
  }
  *out = c->sys.v;
  *n = c->sys.n;
  c->sys_held = true, c->sys_from = start_us, c->sys_to = end_us;
  return SMRULES_OK;
}

static int api_framework_events(smrules_ctx *c, int64_t start_us,
                                int64_t end_us, const smrules_fw_event **out,
                                size_t *n) {
  *out = NULL;
  *n = 0;
  if (smr_ctx_sub_fw(c, start_us, end_us, out, n)) /* subrule.c */
    return SMRULES_NO_TRIGGER;
  if (!c->prof)
    return no_profiler(c);
  smr_profiler_release_fw(c->prof, &c->fw);
  smr_strv_free(&c->arg_scratch);
  smr_error e;
  smr_error_clear(&e);
  if (smr_profiler_framework_events(c->prof, start_us, end_us, &c->fw, &e) !=
      SMR_OK) {
    smr_ctx_failf(c, "reading framework metrics: %s", e.msg);
    return SMRULES_ERR;
  }
  *out = c->fw.v;
  *n = c->fw.n;
  c->fw_held = true, c->fw_from = start_us, c->fw_to = end_us;
  return SMRULES_OK;
}

static int api_fw_arg(smrules_ctx *c, const smrules_fw_event *e,
                      const char *key, smrules_arg *out) {
  return smr_profiler_fw_arg(e, key, out, &c->arg_scratch);
}

static int api_profiler_info(smrules_ctx *c, smrules_profiler_info *out) {
  memset(out, 0, sizeof *out);
  if (!c->prof)
    return no_profiler(c);
  smr_profiler_info(c->prof, out);
  return SMRULES_OK;
}

static int api_profiler_names(smrules_ctx *c, int what, const char *node,
                              smrules_strlist *out) {
  out->n = 0;
  out->v = NULL;
  if (!c->prof)
    return no_profiler(c);
  smr_strv v = {0};
  smr_profiler_names(c->prof, what, node, &v);
  out->n = v.n;
  out->v = (const char *const *)v.v;
  return SMRULES_OK;
}

static void api_report_set(smrules_ctx *c, int64_t rule_triggered,
                           int64_t violations, int64_t datapoints) {
  c->p_triggered = rule_triggered;
  c->p_violations = violations;
  c->p_datapoints = datapoints;
}

static smrules_json *api_details_reset(smrules_ctx *c) {
  smr_rjson_clear(c->details);
  return c->details;
}

static void api_rule_parameters(smrules_ctx *c, const char *text) {
  free(c->rule_params);
  c->rule_params = text ? smr_xstrdup(text) : NULL;
}

/* The value of "name:value" in the host's parameter lines. */
static const char *api_param_text(smrules_ctx *c, const char *name) {
  const char *lines = c->params ? c->params->lines.data : NULL;
  size_t n = strlen(name);
  for (const char *l = lines; l && *l;) {
    const char *eol = strchr(l, '\n');
    size_t len = eol ? (size_t)(eol - l) : strlen(l);
    if (len > n && strncmp(l, name, n) == 0 && l[n] == ':') {
      if (len - n - 1 == 4 && strncmp(l + n + 1, "None", 4) == 0)
        return NULL;
      smr_strv_take(&c->param_texts, smr_xstrndup(l + n + 1, len - n - 1));
      return c->param_texts.v[c->param_texts.n - 1];
    }
    l = eol ? eol + 1 : l + len;
  }
  return NULL;
}

/* Python's str() of a number: integers as integers, nan/inf as Python
 * prints them, every other float as its repr (smr_fmt_double). */
static void api_py_str(double v, bool is_int, char *buf, size_t n) {
  if (!n)
    return;
  if (isnan(v) || isinf(v)) {
    snprintf(buf, n, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
    return;
  }
  if (is_int && v == floor(v) && fabs(v) < 9.2e18) {
    snprintf(buf, n, "%lld", (long long)v);
    return;
  }
  smr_fmt_double(v, buf, n);
}

static const smrules_api API = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_api),
    /* logging, failure, parameters */
    .log = smr_ctx_log,
    .fail = smr_ctx_failf,
    .param_is_set = api_param_is_set,
    .param_text = api_param_text,
    /* trial queries */
    .trial = api_trial,
    .open_trial = api_open_trial,
    .tensor_names = api_tensor_names,
    .collection = api_collection,
    .select = api_select,
    .has_tensor = api_has_tensor,
    .strlist_free = api_strlist_free,
    .steps = api_steps,
    .tensor_steps = api_tensor_steps,
    .steps_free = api_steps_free,
    .step_mode = api_step_mode,
    .global_step = api_global_step,
    /* values and statistics */
    .value = api_value,
    .release = api_release,
    .get = api_get,
    .query = api_query,
    .tensor_query = api_tensor_query,
    /* reports */
    .violation = api_violation,
    .datapoints = api_datapoints,
    .details = api_details,
    .details_reset = api_details_reset,
    .report_set = api_report_set,
    .rule_parameters = api_rule_parameters,
    .json_str = smr_rjson_str,
    .json_num = smr_rjson_num,
    .json_int = smr_rjson_int,
    .json_bool = smr_rjson_bool,
    .json_null = smr_rjson_null,
    .json_raw = smr_rjson_raw,
    .json_nums = smr_rjson_nums,
    .json_ints = smr_rjson_ints,
    .json_strs = smr_rjson_strs,
    .json_obj = smr_rjson_obj,
    .json_new = smr_rjson_new,
    .json_text = smr_rjson_text,
    .json_free = smr_rjson_free,
    .py_str = api_py_str,
    /* output files */
    .output_dir = smr_ctx_output_dir,
    .write_output = smr_ctx_write_output,
    /* time and profiler data */
    .live_info = api_live_info,
    .window = api_window,
    .system_events = api_system_events,
    .framework_events = api_framework_events,
    .fw_arg = api_fw_arg,
    .profiler_info = api_profiler_info,
    .profiler_names = api_profiler_names,
    .sub_rule = smr_api_sub_rule, /* subrule.c */
    .rule_report = smr_api_rule_report,
    .rule_failure = smr_api_rule_failure,
    .live_workers = api_live_workers,
    .value_head = api_value_head,
    .value_runs = api_value_runs,
    .pair_value = api_pair_value,
    .pair_value_parts = api_pair_value_parts,
    .value_pieces = api_value_pieces,
    .value_keep = api_value_keep,
};

const smrules_api *smr_host_api(void) {
  return &API;
}
