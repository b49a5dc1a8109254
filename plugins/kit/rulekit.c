/* rulekit.c - shared helpers of the built-in rule plugins. */
#include "smrules/rulekit.h"

#include "kernels.h"
#include "npmath.h"
#include "simd.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const smrules_api *rk_api;

int rk_select(smrules_trial *t, const smrules_strlist *collections,
              const smrules_strlist *regexes, bool all_if_empty,
              smrules_strlist *out) {
  bool none =
      (!collections || collections->n == 0) && (!regexes || regexes->n == 0);
  if (none && all_if_empty)
    return rk_api->tensor_names(t, out);
  return rk_api->select(t, collections, regexes, out);
}

int rk_regex(smrules_trial *t, const char *regex, smrules_strlist *out) {
  const char *one[1] = {regex};
  smrules_strlist re = {1, one};
  return rk_api->select(t, NULL, &re, out);
}

int rk_value(smrules_trial *t, const char *name, int64_t g,
             smrules_tensor *out) {
  return rk_api->value(t, name, g, SMRULES_MODE_GLOBAL, out);
}

/* api->query of `what` for the names at global step g: out[i] and
 * status[i] per name (SMRULES_ERR for all when the host refuses). */
static void query_global(smrules_trial *t, const char *const *names, size_t n,
                         int64_t g, unsigned what, smrules_values *out,
                         int *status) {
  if (rk_api->query(t, names, n, g, SMRULES_MODE_GLOBAL, what, out, sizeof *out,
                    status) == SMRULES_OK)
    return;
  memset(out, 0, n * sizeof *out); /* refused: nothing was written */
  for (size_t i = 0; i < n; i++)
    status[i] = SMRULES_ERR;
}

/* The same into arrays of statistics or of one reduction's values. */
static void query_many(smrules_trial *t, const smrules_strlist *names,
                       int64_t g, unsigned what, smrules_stats *stats,
                       double *red, int *status) {
  smrules_values *v = calloc(names->n ? names->n : 1, sizeof *v);
  if (!v) {
    for (size_t i = 0; i < names->n; i++)
      status[i] = SMRULES_ERR;
    return;
  }
  query_global(t, names->v, names->n, g, what, v, status);
  for (size_t i = 0; i < names->n; i++) {
    if (stats)
      stats[i] = v[i].stats;
    for (int r = 0; red && r < SMRULES_RED_COUNT; r++)
      if (what & SMRULES_Q_RED(r))
        red[i] = v[i].red[r];
      else if (what & SMRULES_Q_ABS_RED(r))
        red[i] = v[i].abs_red[r];
  }
  free(v);
}

static unsigned reduction_bit(int reduction, bool abs) {
  if (reduction < 0 || reduction >= SMRULES_RED_COUNT)
    return ~0u; /* refused by the host: SMRULES_ERR */
  return abs ? SMRULES_Q_ABS_RED(reduction) : SMRULES_Q_RED(reduction);
}

int rk_value_stats(smrules_trial *t, const char *name, int64_t g,
                   smrules_stats *out) {
  smrules_values v;
  int status;
  query_global(t, &name, 1, g, SMRULES_Q_STATS, &v, &status);
  *out = v.stats;
  return status;
}

int rk_reduction(smrules_trial *t, const char *name, int64_t g, int reduction,
                 bool abs, double *out) {
  if (reduction < 0 || reduction >= SMRULES_RED_COUNT)
    return SMRULES_ERR;
  smrules_values v;
  int status;
  query_global(t, &name, 1, g, reduction_bit(reduction, abs), &v, &status);
  *out = abs ? v.abs_red[reduction] : v.red[reduction];
  return status;
}

int rk_reduce(const smrules_tensor *v, int reduction, bool abs, double *out) {
  if (reduction < 0 || reduction >= SMRULES_RED_COUNT)
    return SMRULES_ERR;
  smrules_values q;
  int rc = rk_api->tensor_query(v, reduction_bit(reduction, abs), &q, sizeof q);
  if (rc == SMRULES_OK)
    *out = abs ? q.abs_red[reduction] : q.red[reduction];
  return rc;
}

void rk_values_stats(smrules_trial *t, const smrules_strlist *names, int64_t g,
                     smrules_stats *out, int *status) {
  query_many(t, names, g, SMRULES_Q_STATS, out, NULL, status);
}

void rk_values_counts(smrules_trial *t, const smrules_strlist *names, int64_t g,
                      smrules_stats *out, int *status) {
  query_many(t, names, g, SMRULES_Q_COUNTS, out, NULL, status);
}

void rk_reductions(smrules_trial *t, const smrules_strlist *names, int64_t g,
                   int reduction, bool abs, double *out, int *status) {
  query_many(t, names, g, reduction_bit(reduction, abs), NULL, out, status);
}

/* The arrays of out (stats when `stats`, else value), or false with the
 * rule failed. */
static bool many_alloc(smrules_ctx *ctx, size_t n, bool stats, rk_many *out) {
  size_t k = n ? n : 1;
  *out = (rk_many){.n = n, .status = calloc(k, sizeof *out->status)};
  if (stats)
    out->stats = calloc(k, sizeof *out->stats);
  else
    out->value = calloc(k, sizeof *out->value);
  if (out->status && (out->stats || out->value))
    return true;
  rk_many_free(out);
  rk_api->fail(ctx, "out of memory");
  return false;
}

bool rk_many_stats(smrules_ctx *ctx, smrules_trial *t,
                   const smrules_strlist *names, int64_t g, rk_many *out) {
  if (!many_alloc(ctx, names->n, true, out))
    return false;
  rk_values_stats(t, names, g, out->stats, out->status);
  return true;
}

bool rk_many_counts(smrules_ctx *ctx, smrules_trial *t,
                    const smrules_strlist *names, int64_t g, rk_many *out) {
  if (!many_alloc(ctx, names->n, true, out))
    return false;
  rk_values_counts(t, names, g, out->stats, out->status);
  return true;
}

bool rk_many_reductions(smrules_ctx *ctx, smrules_trial *t,
                        const smrules_strlist *names, int64_t g, int reduction,
                        bool abs, rk_many *out) {
  if (!many_alloc(ctx, names->n, false, out))
    return false;
  rk_reductions(t, names, g, reduction, abs, out->value, out->status);
  return true;
}

void rk_many_free(rk_many *m) {
  free(m->stats);
  free(m->value);
  free(m->status);
  *m = (rk_many){0};
}

bool rk_is_scalar(const smrules_tensor *v) {
  return v->count == 1;
}

bool rk_is_numeric(const smrules_tensor *v) {
  return v->dtype != SMRULES_DT_STRING && v->count > 0;
}

bool rk_unavailable(int status) {
  return status == SMRULES_TENSOR_UNAVAILABLE_FOR_STEP ||
         status == SMRULES_STEP_UNAVAILABLE ||
         status == SMRULES_TENSOR_UNAVAILABLE || status == SMRULES_STEP_NOT_YET;
}

size_t rk_steps_upto(smrules_trial *t, const char *name, int mode, int64_t upto,
                     int64_t *out, size_t max) {
  int64_t *steps;
  size_t n;
  if (rk_api->tensor_steps(t, name, mode, &steps, &n) != 0)
    return 0;
  size_t end = 0;
  while (end < n && steps[end] <= upto)
    end++;
  size_t begin = end > max ? end - max : 0;
  for (size_t i = begin; i < end; i++)
    out[i - begin] = steps[i];
  rk_api->steps_free(steps);
  return end - begin;
}

smrules_json *rk_violation(smrules_ctx *ctx, const char *tensor) {
  smrules_json *j = rk_api->violation(ctx);
  if (tensor)
    rk_api->json_str(j, "tensor", tensor);
  return j;
}

/* ---------------------------------------------------------- numbers */

static double parse_string_number(const uint8_t *s, size_t len) {
  char buf[64];
  if (!s || len == 0 || len >= sizeof buf)
    return NAN;
  memcpy(buf, s, len);
  buf[len] = '\0';
  char *end;
  double v = strtod(buf, &end);
  return end != buf && *end == '\0' ? v : NAN;
}

double *rk_values(const smrules_tensor *t) {
  if (t->count <= 0)
    return NULL;
  double *v = malloc((size_t)t->count * sizeof *v);
  if (!v)
    return NULL;
  bool strings = t->dtype == SMRULES_DT_STRING || (t->strings && !t->data);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (!strings && t->dtype == SMRULES_DT_FLOAT && t->data) {
    /* rk_elem's float32 case, in a loop the compiler vectorizes */
    const unsigned char *p = t->data;
    for (int64_t i = 0; i < t->count; i++) {
      float f;
      memcpy(&f, p + (size_t)i * sizeof f, sizeof f);
      v[i] = f;
    }
    return v;
  }
#endif
  for (int64_t i = 0; i < t->count; i++)
    v[i] = strings ? parse_string_number(t->strings ? t->strings[i] : NULL,
                                         t->string_lens ? t->string_lens[i] : 0)
                   : rk_elem(t, i);
  return v;
}

double rk_round_half_away(double v) {
  return round(v);
}

/* Per-unit activity, counted over blocks of UNIT_BLOCK units: for each
 * block, every sample's row of those units adds to counters that live on
 * the stack (32 KB: rows of 32 KB read in turn kept the prefetcher busier
 * than rows of 8 KB, 10-11 against 7-9 GB/s on one core), so nothing is
 * allocated per tensor whatever its size (a counter per unit of a 1.5 M-unit
 * layer was 12 MB allocated afresh for every tensor).  Units are contiguous in
 * a row, so a block's counters and the row's elements are walked side by side,
 * four samples' rows at once (one load and store of a counter per four
 * compares).
 */
#define UNIT_BLOCK 8192

typedef struct activity {
  double lo, hi; /* active: lo < x, and x < hi when `upper` */
  bool upper;
  bool (*active)(double x, const void *arg); /* else this, when set */
  const void *arg;
} activity;

/* The share of units below threshold_inactivity, from their counts. */
static int64_t count_inactive(const uint32_t *hits, int64_t n, int64_t batch,
                              double threshold_inactivity) {
  int64_t inactive = 0;
  for (int64_t u = 0; u < n; u++)
    inactive += 100.0 * (double)hits[u] / (double)batch < threshold_inactivity;
  return inactive;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ &&    \
    (defined(__GNUC__) || defined(__clang__))
#define HAVE_F32_KERNEL 1
/* GCC/Clang vector extensions (SSE2 on x86-64, NEON on arm64, scalar code
 * elsewhere): four floats compared at once, the -1/0 lanes of the mask
 * subtracted from four counters.  Written out because GCC 12 at -O2 does
 * not vectorise the plain loop (counters and elements might overlap, and
 * its -O2 cost model adds no run-time check for that), and this pass is
 * most of DeadRelu's time. */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

/* The float thresholds that decide every float exactly as the double ones
 * do: for a float f, f > lo (compared as doubles) iff f > the largest
 * float <= lo, and f < hi iff f < the smallest float >= hi. */
static float float_below(double lo) {
  float f = (float)lo;
  return (double)f > lo ? nextafterf(f, -INFINITY) : f;
}

static float float_above(double hi) {
  float f = (float)hi;
  return (double)f < hi ? nextafterf(f, INFINITY) : f;
}

/* hits[k] += whether row[k] is active, for k < n (n a multiple of 4). */
static void row_f32(const unsigned char *row, int64_t n, float lo, float hi,
                    bool upper, uint32_t *hits) {
  v4f vlo = {lo, lo, lo, lo}, vhi = {hi, hi, hi, hi};
  for (int64_t k = 0; k < n; k += 4) {
    v4f x;
    v4i h, m;
    memcpy(&x, row + (size_t)k * sizeof(float), sizeof x);
    memcpy(&h, hits + k, sizeof h);
    m = x > vlo; /* lanes of -1 (true) or 0 */
    if (upper)
      m &= x < vhi;
    h -= m;
    memcpy(hits + k, &h, sizeof h);
  }
}

/* The same for the four rows row, row + stride, ... at once: the
 * counters are loaded and stored once for four rows' compares (1.4-1.5x
 * the speed of a row at a time, bench/README.md, section 14).  One loop
 * for each value of `upper` and the rows written out, so that the loop
 * has no branch inside (GCC 12 kept both otherwise). */
/* Lanes of -1 where row r is active at k (a GCC/Clang statement
 * expression, as the vector types of this block are). */
#define ACTIVE(VF, VI, r)                                                      \
  ({                                                                           \
    VF x_;                                                                     \
    memcpy(&x_, row + (r)*stride + (size_t)k * sizeof(float), sizeof x_);      \
    (VI)(x_ > vlo) & (upper ? (VI)(x_ < vhi) : all);                           \
  })
#define ROWS4_LOOP(VF, VI, W, upper)                                           \
  for (; k + (W) <= n; k += (W)) {                                             \
    VI h;                                                                      \
    memcpy(&h, hits + k, sizeof h);                                            \
    h -= ACTIVE(VF, VI, 0) + ACTIVE(VF, VI, 1) + ACTIVE(VF, VI, 2) +           \
         ACTIVE(VF, VI, 3);                                                    \
    memcpy(hits + k, &h, sizeof h);                                            \
  }

static void rows4_f32(const unsigned char *row, size_t stride, int64_t n,
                      float lo, float hi, bool upper, uint32_t *hits) {
  v4f vlo = {lo, lo, lo, lo}, vhi = {hi, hi, hi, hi};
  const v4i all = {-1, -1, -1, -1};
  int64_t k = 0;
  if (upper)
    ROWS4_LOOP(v4f, v4i, 4, true)
  else
    ROWS4_LOOP(v4f, v4i, 4, false)
}

#if defined(__x86_64__)
/* The same eight floats at a time on AVX2 machines: half the instructions
 * of row_f32 for the same compares, so the same counts.  The build targets
 * the x86-64 baseline, so this one function is compiled for AVX2 with the
 * GCC/Clang `target` attribute and chosen at run time, as rk_allclose's
 * float32 loop is (rk_allow_avx2 lets a test turn both off). */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

__attribute__((target("avx2"))) static void
row_f32_avx2(const unsigned char *row, int64_t n, float lo, float hi,
             bool upper, uint32_t *hits) {
  v8f vlo = {lo, lo, lo, lo, lo, lo, lo, lo};
  v8f vhi = {hi, hi, hi, hi, hi, hi, hi, hi};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    v8f x;
    v8i h, m;
    memcpy(&x, row + (size_t)k * sizeof(float), sizeof x);
    memcpy(&h, hits + k, sizeof h);
    m = x > vlo; /* lanes of -1 (true) or 0 */
    if (upper)
      m &= x < vhi;
    h -= m;
    memcpy(hits + k, &h, sizeof h);
  }
  if (k < n) /* the last four */
    row_f32(row + (size_t)k * sizeof(float), n - k, lo, hi, upper, hits + k);
}

__attribute__((target("avx2"))) static void
rows4_f32_avx2(const unsigned char *row, size_t stride, int64_t n, float lo,
               float hi, bool upper, uint32_t *hits) {
  v8f vlo = {lo, lo, lo, lo, lo, lo, lo, lo};
  v8f vhi = {hi, hi, hi, hi, hi, hi, hi, hi};
  const v8i all = {-1, -1, -1, -1, -1, -1, -1, -1};
  int64_t k = 0;
  if (upper)
    ROWS4_LOOP(v8f, v8i, 8, true)
  else
    ROWS4_LOOP(v8f, v8i, 8, false)
  if (k < n) /* the last four */
    rows4_f32(row + (size_t)k * sizeof(float), stride, n - k, lo, hi, upper,
              hits + k);
}

static bool use_avx2(void);
#endif

typedef void row_fn(const unsigned char *, int64_t, float, float, bool,
                    uint32_t *);
typedef void rows4_fn(const unsigned char *, size_t, int64_t, float, float,
                      bool, uint32_t *);

/* The row passes this machine runs fastest; the counts are the same. */
static void row_f32_best(row_fn **row, rows4_fn **rows4) {
  *row = row_f32;
  *rows4 = rows4_f32;
#if defined(__x86_64__)
  if (use_avx2()) {
    *row = row_f32_avx2;
    *rows4 = rows4_f32_avx2;
  }
#endif
}
#endif

static bool is_active(const activity *a, double x) {
  if (a->active)
    return a->active(x, a->arg);
  return a->lo < x && (!a->upper || x < a->hi);
}

/* Units [u0, u0 + n) of every sample into hits[0, n). */
static void count_block(const smrules_tensor *t, const activity *a,
                        int64_t batch, int64_t units, int64_t u0, int64_t n,
                        uint32_t *hits) {
  int64_t done = 0;
#ifdef HAVE_F32_KERNEL
  if (!a->active && t->dtype == SMRULES_DT_FLOAT && t->data) {
    float lo = float_below(a->lo), hi = a->upper ? float_above(a->hi) : 0;
    done = n & ~(int64_t)3;
    memset(hits, 0, (size_t)done * sizeof *hits);
    row_fn *row;
    rows4_fn *rows4;
    row_f32_best(&row, &rows4);
    const unsigned char *p =
        (const unsigned char *)t->data + (size_t)u0 * sizeof(float);
    size_t stride = (size_t)units * sizeof(float);
    int64_t b = 0;
    for (; b + 4 <= batch; b += 4) /* four samples at a time */
      rows4(p + (size_t)b * stride, stride, done, lo, hi, a->upper, hits);
    for (; b < batch; b++)
      row(p + (size_t)b * stride, done, lo, hi, a->upper, hits);
  }
#endif
  for (int64_t u = done; u < n; u++)
    hits[u] = 0;
  for (int64_t b = 0; b < batch; b++)
    for (int64_t u = done; u < n; u++)
      hits[u] += is_active(a, rk_elem(t, b * units + u0 + u));
}

static int inactive_units(const smrules_tensor *t, const activity *a,
                          double threshold_inactivity, double *percent) {
  int64_t batch = t->ndim >= 2 ? t->shape[0] : 1;
  /* counters are 32 bits: a batch beyond that is not a batch */
  if (t->count <= 0 || batch <= 0 || batch > INT32_MAX)
    return -1;
  int64_t units = t->count / batch;
  uint32_t hits[UNIT_BLOCK];
  int64_t inactive = 0;
  for (int64_t u0 = 0; u0 < units; u0 += UNIT_BLOCK) {
    int64_t n = units - u0 < UNIT_BLOCK ? units - u0 : UNIT_BLOCK;
    count_block(t, a, batch, units, u0, n, hits);
    inactive += count_inactive(hits, n, batch, threshold_inactivity);
  }
  *percent = 100.0 * (double)inactive / (double)units;
  return 0;
}

int rk_inactive_units(const smrules_tensor *t,
                      bool (*active)(double x, const void *arg),
                      const void *arg, double threshold_inactivity,
                      double *percent) {
  activity a = {.active = active, .arg = arg};
  return inactive_units(t, &a, threshold_inactivity, percent);
}

int rk_inactive_units_above(const smrules_tensor *t, double lo,
                            double threshold_inactivity, double *percent) {
  activity a = {.lo = lo};
  return inactive_units(t, &a, threshold_inactivity, percent);
}

int rk_inactive_units_between(const smrules_tensor *t, double lo, double hi,
                              double threshold_inactivity, double *percent) {
  activity a = {.lo = lo, .hi = hi, .upper = true};
  return inactive_units(t, &a, threshold_inactivity, percent);
}

/* ------------------------------------------------------- state text */

static void text_reserve(rk_text *t, size_t more) {
  if (t->len + more + 1 <= t->cap)
    return;
  size_t cap = t->cap ? t->cap : 256;
  while (cap < t->len + more + 1)
    cap *= 2;
  char *s = realloc(t->s, cap);
  if (!s)
    abort(); /* out of memory: nothing sensible to continue with */
  t->s = s;
  t->cap = cap;
}

void rk_text_printf(rk_text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  text_reserve(t, (size_t)n);
  va_start(ap, fmt);
  vsnprintf(t->s + t->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  t->len += (size_t)n;
}

void rk_text_num(rk_text *t, double v) {
  rk_text_printf(t, " %.17g", v);
}

void rk_text_int(rk_text *t, int64_t v) {
  rk_text_printf(t, " %lld", (long long)v);
}

void rk_text_name(rk_text *t, const char *name) {
  rk_text_printf(t, " ");
  if (!*name)
    rk_text_printf(t, "%%");
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
    if (*p > ' ' && *p < 127 && *p != '%')
      rk_text_printf(t, "%c", *p);
    else
      rk_text_printf(t, "%%%02X", *p);
  }
}

char *rk_text_take(rk_text *t) {
  text_reserve(t, 0);
  char *s = t->s;
  s[t->len] = '\0';
  memset(t, 0, sizeof *t);
  return s;
}

/* The next token: start and length; false at the end. */
static bool scan_token(rk_scan *s, const char **tok, size_t *len) {
  if (s->bad || !s->p)
    return false;
  while (*s->p == ' ' || *s->p == '\n' || *s->p == '\t')
    s->p++;
  const char *b = s->p;
  while (*s->p && *s->p != ' ' && *s->p != '\n' && *s->p != '\t')
    s->p++;
  *tok = b;
  *len = (size_t)(s->p - b);
  return *len > 0;
}

static bool scan_fail(rk_scan *s) {
  s->bad = true;
  return false;
}

bool rk_scan_num(rk_scan *s, double *v) {
  const char *tok;
  size_t len;
  char buf[64];
  if (!scan_token(s, &tok, &len) || len >= sizeof buf)
    return scan_fail(s);
  memcpy(buf, tok, len);
  buf[len] = '\0';
  char *end;
  *v = strtod(buf, &end);
  return *end == '\0' ? true : scan_fail(s);
}

bool rk_scan_int(rk_scan *s, int64_t *v) {
  const char *tok;
  size_t len;
  char buf[32];
  if (!scan_token(s, &tok, &len) || len >= sizeof buf)
    return scan_fail(s);
  memcpy(buf, tok, len);
  buf[len] = '\0';
  char *end;
  errno = 0;
  long long x = strtoll(buf, &end, 10);
  if (*end || errno)
    return scan_fail(s);
  *v = x;
  return true;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

char *rk_scan_name(rk_scan *s) {
  const char *tok;
  size_t len;
  if (!scan_token(s, &tok, &len))
    return scan_fail(s), NULL;
  char *out = malloc(len + 1), *o = out;
  if (!out)
    return scan_fail(s), NULL;
  for (size_t i = 0; i < len; i++) {
    if (tok[i] != '%') {
      *o++ = tok[i];
      continue;
    }
    if (len == 1) /* "%" alone: the empty name */
      break;
    int hi = i + 2 < len ? hex_digit(tok[i + 1]) : -1;
    int lo = hi >= 0 ? hex_digit(tok[i + 2]) : -1;
    if (lo < 0 || (hi == 0 && lo == 0)) {
      free(out);
      return scan_fail(s), NULL;
    }
    *o++ = (char)(hi * 16 + lo);
    i += 2;
  }
  *o = '\0';
  return out;
}

bool rk_scan_word(rk_scan *s, const char *word) {
  rk_scan copy = *s;
  const char *tok;
  size_t len;
  if (!scan_token(&copy, &tok, &len) || len != strlen(word) ||
      memcmp(tok, word, len) != 0)
    return false;
  *s = copy;
  return true;
}

bool rk_scan_end(rk_scan *s) {
  const char *tok;
  size_t len;
  rk_scan copy = *s;
  return !s->bad && !scan_token(&copy, &tok, &len);
}

size_t rk_scan_left(const rk_scan *s) {
  return s->p && !s->bad ? strlen(s->p) : 0;
}

/* -------------------------------------------- comparing, scalar reads */

bool rk_same_shape(const smrules_tensor *a, const smrules_tensor *b) {
  if (a->ndim != b->ndim || a->count != b->count)
    return false;
  for (int i = 0; i < a->ndim && i < SMRULES_MAX_DIMS; i++)
    if (a->shape[i] != b->shape[i])
      return false;
  return true;
}

static bool is_strings(const smrules_tensor *t) {
  return t->dtype == SMRULES_DT_STRING || (t->strings && !t->data);
}

static bool strings_equal(const smrules_tensor *a, const smrules_tensor *b) {
  for (int64_t i = 0; i < a->count; i++) {
    size_t la = a->string_lens ? a->string_lens[i] : 0;
    size_t lb = b->string_lens ? b->string_lens[i] : 0;
    if (la != lb || (la && memcmp(a->strings[i], b->strings[i], la) != 0))
      return false;
  }
  return true;
}

/* One element pair: close or not; *diff is |x - y| or +inf. */
static bool element_close(double x, double y, double rtol, double atol,
                          bool equal_nan, double *diff) {
  if (isfinite(x) && isfinite(y)) {
    *diff = fabs(x - y);
    return *diff <= atol + rtol * fabs(y);
  }
  if (isnan(x) && isnan(y)) {
    *diff = 0;
    return equal_nan;
  }
  *diff = x == y ? 0 : INFINITY; /* same infinity, or a mismatch */
  return x == y;
}

/* The loop over finite elements of one type, four lanes so the compares
 * and maxima of neighbouring elements overlap.  Sets *nonfinite (and
 * decides nothing) when an element is NaN or infinite: those follow their
 * own rules in element_close.  The maximum is exact in any order, so the
 * answer is element_close's bit for bit.  Without `worst` the answer is
 * known at the end of the first block holding a finite pair that is not
 * close (tensors that change from step to step differ at once). */
#define DEFINE_ALLCLOSE_FINITE(NAME, T)                                        \
  static bool NAME(const unsigned char *pa, const unsigned char *pb,           \
                   int64_t n, double rtol, double atol, double *worst,         \
                   bool *nonfinite) {                                          \
    double w[4] = {0, 0, 0, 0};                                                \
    int bad = 0, odd = 0;                                                      \
    for (int64_t i = 0; i < n && !(bad && !odd && !worst);) {                  \
      int64_t block_end = n - i > 1024 ? i + 1024 : n;                         \
      while (i < block_end)                                                    \
        for (int k = 0; k < 4 && i < block_end; k++, i++) {                    \
          T xs, ys;                                                            \
          memcpy(&xs, pa + (size_t)i * sizeof xs, sizeof xs);                  \
          memcpy(&ys, pb + (size_t)i * sizeof ys, sizeof ys);                  \
          double x = xs, y = ys, d = fabs(x - y);                              \
          odd |= !(fabs(x) <= DBL_MAX) | !(fabs(y) <= DBL_MAX);                \
          bad |= !(d <= atol + rtol * fabs(y));                                \
          w[k] = d > w[k] ? d : w[k];                                          \
        }                                                                      \
    }                                                                          \
    *nonfinite = odd;                                                          \
    double m = w[0] > w[1] ? w[0] : w[1], m2 = w[2] > w[3] ? w[2] : w[3];      \
    if (worst)                                                                 \
      *worst = m > m2 ? m : m2;                                                \
    return !bad;                                                               \
  }

DEFINE_ALLCLOSE_FINITE(allclose_finite_f32, float)
DEFINE_ALLCLOSE_FINITE(allclose_finite_f64, double)

#if defined(__x86_64__) && defined(__GNUC__) &&                                \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* float32 on AVX2 machines: allclose_finite_f32's operations on four
 * elements at once (widened to double, the same compares, the same
 * maximum), so the same answer; SimilarAcrossRuns compares every element
 * of two trials that agree, UnchangedTensor every element of weights
 * that stopped changing.  The build targets the x86-64 baseline, so this
 * one function is compiled for AVX2 with the GCC/Clang `target` attribute
 * and chosen at run time (as core/format/tensor.c's sums are); AVX2
 * brings no FMA, and -std=c11 keeps GCC from contracting. */
typedef double v4d __attribute__((vector_size(32)));
typedef long long v4l __attribute__((vector_size(32)));
typedef float v4f_ __attribute__((vector_size(16)));

__attribute__((target("avx2"))) static bool
allclose_f32_avx2(const unsigned char *pa, const unsigned char *pb, int64_t n,
                  double rtol, double atol, double *worst, bool *nonfinite) {
  const v4l magnitude = {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
  const v4d dmax = {DBL_MAX, DBL_MAX, DBL_MAX, DBL_MAX};
  const v4d vr = {rtol, rtol, rtol, rtol}, va = {atol, atol, atol, atol};
  v4d w = {0, 0, 0, 0};
  v4l bad = {0, 0, 0, 0}, odd = {0, 0, 0, 0};
  int64_t i = 0;
  while (i + 4 <= n) {
    int64_t end = n - i > 1024 ? i + 1024 : n;
    for (; i + 4 <= end; i += 4) {
      v4f_ fx, fy;
      memcpy(&fx, pa + (size_t)i * sizeof(float), sizeof fx);
      memcpy(&fy, pb + (size_t)i * sizeof(float), sizeof fy);
      v4d x = __builtin_convertvector(fx, v4d);
      v4d y = __builtin_convertvector(fy, v4d);
      v4d ax = (v4d)((v4l)x & magnitude), ay = (v4d)((v4l)y & magnitude);
      v4d d = (v4d)((v4l)(x - y) & magnitude);
      odd |= ~(ax <= dmax) | ~(ay <= dmax); /* lanes of -1 where true */
      bad |= ~(d <= va + vr * ay);
      v4l more = d > w;
      w = (v4d)(((v4l)d & more) | ((v4l)w & ~more)); /* d > w ? d : w */
    }
    bool any_bad = (bad[0] | bad[1] | bad[2] | bad[3]) != 0;
    bool any_odd = (odd[0] | odd[1] | odd[2] | odd[3]) != 0;
    if (any_bad && !any_odd && !worst)
      break; /* decided, as allclose_finite_f32 decides at a block's end */
  }
  bool b = (bad[0] | bad[1] | bad[2] | bad[3]) != 0;
  bool o = (odd[0] | odd[1] | odd[2] | odd[3]) != 0;
  double m = w[0] > w[1] ? w[0] : w[1], m2 = w[2] > w[3] ? w[2] : w[3];
  m = m > m2 ? m : m2;
  for (; i < n && !(b && !o && !worst); i++) { /* the last 0-3 elements */
    float xs, ys;
    memcpy(&xs, pa + (size_t)i * sizeof xs, sizeof xs);
    memcpy(&ys, pb + (size_t)i * sizeof ys, sizeof ys);
    double x = xs, y = ys, d = fabs(x - y);
    o |= !(fabs(x) <= DBL_MAX) | !(fabs(y) <= DBL_MAX);
    b |= !(d <= atol + rtol * fabs(y));
    m = d > m ? d : m;
  }
  *nonfinite = o;
  if (worst)
    *worst = m;
  return !b;
}

static bool avx2_allowed = true;

void rk_allow_avx2(bool on) {
  avx2_allowed = on;
}

static bool use_avx2(void) {
  return avx2_allowed && __builtin_cpu_supports("avx2");
}

bool rk_use_avx2(void) {
  return use_avx2();
}

static bool allclose_f32(const unsigned char *pa, const unsigned char *pb,
                         int64_t n, double rtol, double atol, double *worst,
                         bool *nonfinite) {
  if (avx2_allowed && __builtin_cpu_supports("avx2"))
    return allclose_f32_avx2(pa, pb, n, rtol, atol, worst, nonfinite);
  return allclose_finite_f32(pa, pb, n, rtol, atol, worst, nonfinite);
}
#else
void rk_allow_avx2(bool on) {
  (void)on;
}

bool rk_use_avx2(void) {
  return false;
}
#define allclose_f32 allclose_finite_f32
#endif

typedef bool allclose_fn(const unsigned char *pa, const unsigned char *pb,
                         int64_t n, double rtol, double atol, double *worst,
                         bool *nonfinite);

/* Elements per chunk of allclose_chunks: 16 KB of float32, small enough
 * that a chunk differing early costs little, large enough that memcmp
 * runs at its full speed. */
#define ALLCLOSE_CHUNK 4096

/* `loop` over chunks of n elements of `size` bytes, skipping each chunk
 * whose bytes are identical in both (only when skip_equal: the caller
 * proved that identical elements are close with a difference of 0, which
 * needs equal_nan and tolerances >= 0).  SimilarAcrossRuns compares runs
 * that agree and UnchangedTensor weights that stopped changing: memcmp
 * reads such pairs at memory speed, the widened compare does not.  The
 * answer is the loop's over the whole: the maximum, the bad and the
 * nonfinite flags are the same over chunks, and it stops where the loop
 * stops (a pair not close, all finite so far, no maximum wanted). */
static bool allclose_chunks(allclose_fn *loop, size_t size,
                            const unsigned char *pa, const unsigned char *pb,
                            int64_t n, double rtol, double atol, double *worst,
                            bool *nonfinite, bool skip_equal) {
  if (!skip_equal)
    return loop(pa, pb, n, rtol, atol, worst, nonfinite);
  bool bad = false, odd = false;
  double m = 0;
  for (int64_t i = 0; i < n && !(bad && !odd && !worst);) {
    int64_t k = n - i > ALLCLOSE_CHUNK ? ALLCLOSE_CHUNK : n - i;
    size_t off = (size_t)i * size, len = (size_t)k * size;
    i += k;
    if (memcmp(pa + off, pb + off, len) == 0)
      continue; /* every pair close, each difference 0 */
    double w = 0;
    bool o;
    bad |= !loop(pa + off, pb + off, k, rtol, atol, worst ? &w : NULL, &o);
    odd |= o;
    m = w > m ? w : m;
  }
  *nonfinite = odd;
  if (worst)
    *worst = m;
  return !bad;
}

/* Both float32 or both float64 on a little-endian host, all finite: the
 * loop above instead of a call per element (UnchangedTensor compares
 * every element of every tensor at every step).  *worst is set only when
 * need_worst. */
static bool allclose_fast(const smrules_tensor *a, const smrules_tensor *b,
                          double rtol, double atol, bool equal_nan,
                          bool need_worst, bool *close, double *worst) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (!a->data || !b->data || a->dtype != b->dtype ||
      (a->dtype != SMRULES_DT_FLOAT && a->dtype != SMRULES_DT_DOUBLE))
    return false;
  bool nonfinite;
  double w = 0, *wp = need_worst ? &w : NULL;
  /* identical elements: |x - y| = 0 <= atol + rtol * |y|, a NaN pair is
   * close by equal_nan and an infinity equals itself */
  bool skip = equal_nan && rtol >= 0 && atol >= 0;
  bool c = a->dtype == SMRULES_DT_FLOAT
               ? allclose_chunks(allclose_f32, sizeof(float), a->data, b->data,
                                 a->count, rtol, atol, wp, &nonfinite, skip)
               : allclose_chunks(allclose_finite_f64, sizeof(double), a->data,
                                 b->data, a->count, rtol, atol, wp, &nonfinite,
                                 skip);
  if (nonfinite)
    return false; /* nothing decided, *close and *worst untouched */
  *close = c;
  *worst = w;
  return true;
#else
  (void)a, (void)b, (void)rtol, (void)atol, (void)equal_nan;
  (void)need_worst, (void)close;
  (void)worst;
  return false;
#endif
}

bool rk_allclose(const smrules_tensor *a, const smrules_tensor *b, double rtol,
                 double atol, bool equal_nan, double *max_abs_diff) {
  double worst = 0;
  bool close = rk_same_shape(a, b);
  if (close && !is_strings(a) && !is_strings(b) &&
      allclose_fast(a, b, rtol, atol, equal_nan, max_abs_diff != NULL, &close,
                    &worst)) {
    /* decided: every element finite */
  } else if (close && (is_strings(a) || is_strings(b))) {
    close = is_strings(a) && is_strings(b) && strings_equal(a, b);
    worst = close ? 0 : INFINITY;
  } else if (close) {
    for (int64_t i = 0; i < a->count; i++) {
      double d;
      if (!element_close(rk_elem(a, i), rk_elem(b, i), rtol, atol, equal_nan,
                         &d))
        close = false;
      if (d > worst)
        worst = d;
    }
  } else {
    worst = INFINITY;
  }
  if (max_abs_diff)
    *max_abs_diff = worst;
  return close;
}

int rk_scalar(smrules_trial *t, const char *name, int64_t step, int mode,
              double *out, double *wall_time) {
  smrules_tensor v;
  int rc = rk_api->value(t, name, step, mode, &v);
  if (rc != 0)
    return rc < 0 ? rc : SMRULES_ERR;
  rc = rk_is_scalar(&v) && rk_is_numeric(&v) && !is_strings(&v) ? 0 : 1;
  if (rc == 0)
    *out = rk_api->get(&v, 0);
  if (wall_time)
    *wall_time = v.wall_time;
  rk_api->release(&v);
  return rc;
}

static const char *const MODE_NAMES[] = {NULL, "TRAIN", "EVAL", "PREDICT",
                                         "GLOBAL"};

const char *rk_mode_name(int mode) {
  return mode >= SMRULES_MODE_TRAIN && mode <= SMRULES_MODE_GLOBAL
             ? MODE_NAMES[mode]
             : "?";
}

int rk_mode_parse(const char *name) {
  for (int m = SMRULES_MODE_TRAIN; name && m <= SMRULES_MODE_GLOBAL; m++)
    if (strcmp(name, MODE_NAMES[m]) == 0)
      return m;
  return 0;
}

/* ------------------------------------------------------------ tables */

void rk_table_init(rk_table *t, size_t record_size) {
  memset(t, 0, sizeof *t);
  t->size = record_size;
}

void *rk_table_at(const rk_table *t, size_t i) {
  return t->recs + i * t->size;
}

/* FNV-1a */
static size_t hash_key(const char *key) {
  size_t h = (size_t)14695981039346656037ULL;
  for (const unsigned char *p = (const unsigned char *)key; *p; p++)
    h = (h ^ *p) * (size_t)1099511628211ULL;
  return h;
}

/* The slot holding `key`, or the empty slot where it belongs. */
static size_t *table_slot(const rk_table *t, const char *key) {
  size_t mask = t->nslots - 1;
  for (size_t i = hash_key(key) & mask;; i = (i + 1) & mask)
    if (!t->slots[i] || strcmp(t->keys[t->slots[i] - 1], key) == 0)
      return &t->slots[i];
}

static void *xrealloc(void *p, size_t size) {
  p = realloc(p, size);
  if (!p)
    abort(); /* out of memory: nothing sensible to continue with */
  return p;
}

static void table_grow(rk_table *t) {
  size_t cap = t->cap ? 2 * t->cap : 8;
  t->keys = xrealloc(t->keys, cap * sizeof *t->keys);
  t->recs = xrealloc(t->recs, cap * t->size);
  t->cap = cap;
  /* the index stays at most half full */
  free(t->slots);
  t->nslots = 2 * cap;
  t->slots = calloc(t->nslots, sizeof *t->slots);
  if (!t->slots)
    abort();
  for (size_t i = 0; i < t->n; i++)
    *table_slot(t, t->keys[i]) = i + 1;
}

void *rk_table_get(rk_table *t, const char *key, bool create) {
  size_t *slot = t->nslots ? table_slot(t, key) : NULL;
  if (slot && *slot)
    return rk_table_at(t, *slot - 1);
  if (!create)
    return NULL;
  if (t->n == t->cap) {
    table_grow(t);
    slot = table_slot(t, key);
  }
  t->keys[t->n] = strdup(key);
  if (!t->keys[t->n])
    abort();
  *slot = t->n + 1;
  void *rec = rk_table_at(t, t->n++);
  memset(rec, 0, t->size);
  return rec;
}

void rk_table_free(rk_table *t) {
  for (size_t i = 0; i < t->n; i++)
    free(t->keys[i]);
  free(t->keys);
  free(t->recs);
  free(t->slots);
  memset(t, 0, sizeof *t);
}

/* -------------------------------------------------------- step cache */

typedef struct step_list {
  int64_t *steps; /* from api->tensor_steps, or NULL */
  size_t n;
} step_list;

void rk_step_cache_init(rk_step_cache *c) {
  c->known = 0;
  rk_table_init(&c->lists, sizeof(step_list));
}

void rk_step_cache_free(rk_step_cache *c) {
  for (size_t i = 0; i < c->lists.n; i++) {
    step_list *l = rk_table_at(&c->lists, i);
    if (l->steps)
      rk_api->steps_free(l->steps);
  }
  rk_table_free(&c->lists);
}

void rk_step_cache_sync(rk_step_cache *c, smrules_trial *t) {
  int64_t *steps;
  size_t n = 0;
  if (rk_api->steps(t, SMRULES_MODE_GLOBAL, &steps, &n) == 0)
    rk_api->steps_free(steps);
  /* complete steps only ever get added: a new count means new steps */
  if (n == c->known)
    return;
  rk_step_cache_free(c);
  rk_step_cache_init(c);
  c->known = n;
}

const int64_t *rk_step_cache_get(rk_step_cache *c, smrules_trial *t,
                                 const char *name, int mode, size_t *n) {
  char *key = malloc(strlen(name) + 4);
  if (!key)
    abort();
  sprintf(key, "%d:%s", mode, name);
  step_list *l = rk_table_get(&c->lists, key, false);
  if (!l) {
    l = rk_table_get(&c->lists, key, true);
    if (rk_api->tensor_steps(t, name, mode, &l->steps, &l->n) != 0) {
      if (l->steps)
        rk_api->steps_free(l->steps);
      l->steps = NULL;
      l->n = 0;
    }
  }
  free(key);
  *n = l->n;
  return l->steps;
}

/* ------------------------------------------------------- scalar memo */

typedef struct memo_list {
  int64_t *steps; /* ascending */
  double *vals;
  int *rcs;
  size_t n, cap;
} memo_list;

void rk_scalar_memo_init(rk_scalar_memo *m) {
  rk_table_init(&m->tensors, sizeof(memo_list));
}

void rk_scalar_memo_free(rk_scalar_memo *m) {
  for (size_t i = 0; i < m->tensors.n; i++) {
    memo_list *l = rk_table_at(&m->tensors, i);
    free(l->steps);
    free(l->vals);
    free(l->rcs);
  }
  rk_table_free(&m->tensors);
}

static void memo_insert(memo_list *l, size_t at, int64_t g, double v, int rc) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 16;
    l->steps = xrealloc(l->steps, l->cap * sizeof *l->steps);
    l->vals = xrealloc(l->vals, l->cap * sizeof *l->vals);
    l->rcs = xrealloc(l->rcs, l->cap * sizeof *l->rcs);
  }
  size_t tail = l->n - at;
  memmove(l->steps + at + 1, l->steps + at, tail * sizeof *l->steps);
  memmove(l->vals + at + 1, l->vals + at, tail * sizeof *l->vals);
  memmove(l->rcs + at + 1, l->rcs + at, tail * sizeof *l->rcs);
  l->steps[at] = g;
  l->vals[at] = v;
  l->rcs[at] = rc;
  l->n++;
}

int rk_scalar_memo_get(rk_scalar_memo *m, smrules_trial *t, const char *name,
                       int64_t g, double *out) {
  memo_list *l = rk_table_get(&m->tensors, name, true);
  size_t lo = 0, hi = l->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (l->steps[mid] < g)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == l->n || l->steps[lo] != g) {
    double v = 0;
    int rc = rk_scalar(t, name, g, SMRULES_MODE_GLOBAL, &v, NULL);
    memo_insert(l, lo, g, v, rc);
  }
  if (l->rcs[lo] == 0)
    *out = l->vals[lo];
  return l->rcs[lo];
}
