/* rulekit.h - the rule kit: general helpers shared by the built-in rule
 * plugins and offered to third-party ones, so that the mechanics every
 * rule needs (selecting tensors, reading a value at a global step, step
 * history, reporting, NumPy-exact numbers, state text) are written once.
 * What only one built-in needs lives beside it (plugins/kit/kernels.h is
 * not installed).  Installed with smrules.h;
 * the code is libsmrules-rulekit.a (`pkg-config --cflags --libs smrules`),
 * linked statically into each plugin.  Uses nothing of the host but the
 * smrules_api table in rk_api, which RK_PLUGIN sets. */
#ifndef RULEKIT_H
#define RULEKIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "smrules/smrules.h"

/* The host API, set by RK_PLUGIN before anything else runs. */
extern const smrules_api *rk_api;

/* Define the plugin's entry point for registration `reg`. */
#define RK_PLUGIN(reg)                                                         \
  SMRULES_PLUGIN_INIT {                                                        \
    rk_api = api;                                                              \
    return &(reg);                                                             \
  }

/* docs/rule-semantics.md#tensor-selection: members of the collections ∪ names
 * the regexes search. With both lists empty: every tensor when `all_if_empty`,
 * else none. */
int rk_select(smrules_trial *t, const smrules_strlist *collections,
              const smrules_strlist *regexes, bool all_if_empty,
              smrules_strlist *out);

/* Names matched by one regex string. */
int rk_regex(smrules_trial *t, const char *regex, smrules_strlist *out);

/* The raw value of `name` at global step g (any mode). */
int rk_value(smrules_trial *t, const char *name, int64_t g,
             smrules_tensor *out);

/* The statistics of `name` at global step g: api->query with
 * SMRULES_Q_STATS, shared with the other rules of the run.  Returns its
 * status. */
int rk_value_stats(smrules_trial *t, const char *name, int64_t g,
                   smrules_stats *out);

/* Reduction `reduction` (SMRULES_RED_*) of `name` at global step g, of its
 * absolute values with `abs`: api->query with SMRULES_Q_RED or
 * SMRULES_Q_ABS_RED (the saved reduction when the hook saved it). */
int rk_reduction(smrules_trial *t, const char *name, int64_t g, int reduction,
                 bool abs, double *out);

/* The same reduction of a value in hand (api->tensor_query): SMRULES_OK or
 * SMRULES_ERR. */
int rk_reduce(const smrules_tensor *v, int reduction, bool abs, double *out);

/* rk_value_stats of each of the names' values at global step g, read and
 * reduced in parallel (one api->query); status[i] is what rk_value_stats
 * returns for names->v[i]. */
void rk_values_stats(smrules_trial *t, const smrules_strlist *names, int64_t g,
                     smrules_stats *out, int *status);
/* rk_values_stats for a rule that reads only the counts (count, finite,
 * nan, pinf, ninf, zeros, has_finite): SMRULES_Q_COUNTS, a cheaper pass;
 * the other fields are NaN. */
void rk_values_counts(smrules_trial *t, const smrules_strlist *names, int64_t g,
                      smrules_stats *out, int *status);
/* rk_reduction of each of the names' values at global step g, in
 * parallel; status[i] as for one call. */
void rk_reductions(smrules_trial *t, const smrules_strlist *names, int64_t g,
                   int reduction, bool abs, double *out, int *status);

/* The statistics (or only their counts), or one reduction, of many
 * tensors at a step with each one's status, in arrays rk_many_stats /
 * rk_many_counts / rk_many_reductions allocate
 * (names->n entries) and rk_many_free frees:
 *
 *     rk_many m;
 *     if (!rk_many_stats(ctx, t, &names, g, &m))
 *       return SMRULES_ERR;  // out of memory: the rule has failed
 *     for (size_t i = 0; i < m.n; i++)
 *       if (m.status[i] == 0) ... m.stats[i] ...
 *     rk_many_free(&m);
 *
 * Read and reduced in parallel as rk_values_stats / rk_values_counts /
 * rk_reductions. */
typedef struct rk_many {
  size_t n;
  smrules_stats *stats; /* rk_many_stats or rk_many_counts, else NULL */
  double *value;        /* rk_many_reductions, else NULL */
  int *status;
} rk_many;
bool rk_many_stats(smrules_ctx *ctx, smrules_trial *t,
                   const smrules_strlist *names, int64_t g, rk_many *out);
bool rk_many_counts(smrules_ctx *ctx, smrules_trial *t,
                    const smrules_strlist *names, int64_t g, rk_many *out);
bool rk_many_reductions(smrules_ctx *ctx, smrules_trial *t,
                        const smrules_strlist *names, int64_t g, int reduction,
                        bool abs, rk_many *out);
void rk_many_free(rk_many *m);

/* Exactly one element (shape (), (1,), (1,1), ...). */
bool rk_is_scalar(const smrules_tensor *v);
bool rk_is_numeric(const smrules_tensor *v);

/* Whether a status from a value/reduction means "not saved here": the
 * tensor is skipped at this step
 * (docs/rule-semantics.md#steps-modes-and-missing-data, R17). */
bool rk_unavailable(int status);

/* Complete steps of a tensor in `mode` (global steps for GLOBAL) that are
 * <= upto; the last `max` of them in ascending order.  Returns count. */
size_t rk_steps_upto(smrules_trial *t, const char *name, int mode, int64_t upto,
                     int64_t *out, size_t max);

/* Report a violation with a tensor name; returns the JSON object for more
 * fields. */
smrules_json *rk_violation(smrules_ctx *ctx, const char *tensor);

/* Result of a step from counts of evaluated tensors and violations. */
static inline int rk_result(int64_t evaluated, int64_t violations) {
  if (evaluated == 0)
    return SMRULES_SKIPPED;
  return violations ? SMRULES_TRIGGERED : SMRULES_NO_TRIGGER;
}

/* ------------------------------------------------ numbers
 * (docs/rule-semantics.md#numeric-conventions) */

/* Element i (in range) as double, like api->get but without a call per
 * element for float32/float64 on a little-endian host.  The data may lie
 * unaligned in the event file, hence memcpy (a plain load). */
static inline double rk_elem(const smrules_tensor *t, int64_t i) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  const unsigned char *p = (const unsigned char *)t->data;
  if (t->dtype == SMRULES_DT_FLOAT && p) {
    float f;
    memcpy(&f, p + (size_t)i * sizeof f, sizeof f);
    return f;
  }
  if (t->dtype == SMRULES_DT_DOUBLE && p) {
    double d;
    memcpy(&d, p + (size_t)i * sizeof d, sizeof d);
    return d;
  }
#endif
  return rk_api->get(t, i);
}

/* All elements as doubles, or NULL when the tensor is empty (free() it).
 * String elements are parsed as decimal numbers (NaN when they are not),
 * so XGBoost columns saved as strings read like numeric ones. */
double *rk_values(const smrules_tensor *t);

/* NumPy's quantile with linear interpolation: sorts x (n > 0) in place;
 * NaN when any element is NaN. */
double rk_quantile(double *x, size_t n, double q);

/* The same for m quantiles q[j] -> out[j], bit for bit, without sorting:
 * O(n) per quantile (x is reordered). */
void rk_quantiles(double *x, size_t n, const double *q, double *out, size_t m);

/* The same over a tensor's elements (as rk_values gives them; NaN for an
 * empty tensor), bit for bit: 0, or -1 when memory runs out.  Large
 * float32 tensors are read where they lie, not widened (4 bytes of
 * scratch per element at most, usually a few percent of that). */
int rk_tensor_quantiles(const smrules_tensor *t, const double *q, double *out,
                        size_t m);

/* Rounding to the nearest integer, halves away from zero
 * (docs/rule-semantics.md#decisions, Decision R6). */
double rk_round_half_away(double v);

/* -------------------------------------------------- state text (save_state)
 * Space-separated tokens: numbers written exactly (%.17g, inf/nan kept) and
 * names percent-encoded so that they never contain blanks. */
typedef struct rk_text {
  char *s;
  size_t len, cap;
} rk_text;

void rk_text_printf(rk_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void rk_text_num(rk_text *t, double v);          /* " <number>" */
void rk_text_int(rk_text *t, int64_t v);         /* " <integer>" */
void rk_text_name(rk_text *t, const char *name); /* " <encoded name>" */
/* The text (never NULL) for save_state; the rk_text is emptied. */
char *rk_text_take(rk_text *t);

typedef struct rk_scan {
  const char *p;
  bool bad; /* set by any failed read; later reads fail too */
} rk_scan;

bool rk_scan_num(rk_scan *s, double *v);
bool rk_scan_int(rk_scan *s, int64_t *v);
/* A decoded name (malloc'ed) or NULL. */
char *rk_scan_name(rk_scan *s);
/* The next token equals `word` (consumed only then; no failure flag). */
bool rk_scan_word(rk_scan *s, const char *word);
/* Nothing but blanks is left. */
bool rk_scan_end(rk_scan *s);
/* Bytes left: an upper bound for how many tokens can follow. */
size_t rk_scan_left(const rk_scan *s);

/* ------------------------------------------- comparing and scalar reads */

/* Same number of dimensions and the same extent in each. */
bool rk_same_shape(const smrules_tensor *a, const smrules_tensor *b);

/* NumPy's allclose(a, b) on tensors of the same shape: every element has
 * |a - b| <= atol + rtol * |b|; an infinity is close only to the same
 * infinity; two NaNs are close only when equal_nan.  String tensors are
 * close when every string is byte-identical; a string tensor is never close
 * to a numeric one.  *max_abs_diff (may be NULL) gets the largest |a - b|
 * over positions where both are finite, +inf when a position differs in a
 * non-finite value (or a string), 0 for identical tensors. */
bool rk_allclose(const smrules_tensor *a, const smrules_tensor *b, double rtol,
                 double atol, bool equal_nan, double *max_abs_diff);

/* The value of a one-element numeric tensor at `step` (a global step with
 * SMRULES_MODE_GLOBAL, else a mode step).  Returns 0, a negative status
 * when there is no value, or 1 when the value is not a numeric scalar.
 * `wall_time` may be NULL. */
int rk_scalar(smrules_trial *t, const char *name, int64_t step, int mode,
              double *out, double *wall_time);

/* "TRAIN", "EVAL", "PREDICT", "GLOBAL" (SMRULES_MODE_*), else "?". */
const char *rk_mode_name(int mode);
/* SMRULES_MODE_* of one of those names, or 0. */
int rk_mode_parse(const char *name);

/* A table of fixed-size records keyed by name (e.g. per tensor state),
 * in insertion order.  Records are zeroed on creation. */
typedef struct rk_table {
  size_t n, cap, size; /* size: bytes of one record */
  char **keys;
  unsigned char *recs;
  size_t *slots, nslots; /* hash index: record number + 1, 0 = empty */
} rk_table;

void rk_table_init(rk_table *t, size_t record_size);
/* The record of `key`; created when `create`, else NULL when absent. */
void *rk_table_get(rk_table *t, const char *key, bool create);
/* The i-th record (i < n) and its key. */
void *rk_table_at(const rk_table *t, size_t i);
void rk_table_free(rk_table *t);

/* Step lists of tensors (api->tensor_steps), kept between invocations and
 * dropped whenever the trial's set of complete steps changes (a live trial
 * grew), so that rules looking back over a tensor's history do not query
 * it again at every step. */
typedef struct rk_step_cache {
  size_t known; /* complete global steps of the trial when filled */
  rk_table lists;
} rk_step_cache;

void rk_step_cache_init(rk_step_cache *c);
/* Call at the start of each invocation. */
void rk_step_cache_sync(rk_step_cache *c, smrules_trial *t);
/* The steps of `name` in `mode` as api->tensor_steps gives them (empty
 * when the tensor is unknown); valid until the next sync. */
const int64_t *rk_step_cache_get(rk_step_cache *c, smrules_trial *t,
                                 const char *name, int mode, size_t *n);
void rk_step_cache_free(rk_step_cache *c);

/* Scalar values of tensors by global step (rk_scalar with
 * SMRULES_MODE_GLOBAL), each read once: a value saved at a complete step
 * never changes.  For rules that look back over many steps. */
typedef struct rk_scalar_memo {
  rk_table tensors;
} rk_scalar_memo;

void rk_scalar_memo_init(rk_scalar_memo *m);
/* What rk_scalar(t, name, g, SMRULES_MODE_GLOBAL, out, NULL) returns. */
int rk_scalar_memo_get(rk_scalar_memo *m, smrules_trial *t, const char *name,
                       int64_t g, double *out);
void rk_scalar_memo_free(rk_scalar_memo *m);

#endif
