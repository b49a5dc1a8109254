/* kernels.c - per-element passes of single built-in rules (kernels.h):
 * ClassImbalance's and Confusion's class indices, CheckInputImages'
 * channel sums. */
#include "kernels.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline float load_f32(const unsigned char *p) {
  float f;
  memcpy(&f, p, sizeof f);
  return f;
}

/* ------------------------------------------------------ class indices */

/* The reference: NumPy's argmax of a row of doubles, the first maximum,
 * the first NaN if there is one. */
static int64_t argmax_row(const double *row, int64_t last) {
  int64_t best = 0;
  for (int64_t k = 1; k < last && !isnan(row[best]); k++)
    if (isnan(row[k]) || row[k] > row[best])
      best = k;
  return best;
}

static double *argmax_values(const smrules_tensor *t, int64_t last, size_t *n) {
  double *v = rk_values(t);
  *n = v ? (size_t)t->count : 0;
  if (!v || last <= 1)
    return v;
  size_t rows = (size_t)(t->count / last);
  for (size_t r = 0; r < rows; r++) /* row r starts at or after v[r] */
    v[r] = (double)argmax_row(v + r * (size_t)last, last);
  *n = rows;
  return v;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ &&    \
    (defined(__GNUC__) || defined(__clang__))
/* A float32 row read where it lies, eight elements at a time in two
 * vectors of four lanes (GCC/Clang vector extensions: SSE2 on x86-64,
 * NEON on arm64; wider vectors GCC splits through the stack): lane j of
 * vector h keeps the first maximum of elements 4h + j, 4h + j + 8, ...
 * and its index (a strict >, as the reference's), and whether it saw a
 * NaN.  The row's first maximum is the smallest index among the lanes
 * whose maximum equals the largest (== : -0 and +0 tie as in the
 * reference); the elements after the last whole pair of vectors come
 * later than all of those, so they take over only when strictly larger.
 * A row with a NaN is answered by its first NaN, as the reference does.
 * Floats compare as their doubles do, so the indices are the
 * reference's. */
#define ARGMAX_W 8
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

static inline void argmax_step(v4f x, v4i k, v4f *best, v4i *at, v4i *nan) {
  v4i more = (v4i)(x > *best); /* -1 where true */
  *nan |= (v4i)(x != x);
  *best = (v4f)(((v4i)x & more) | ((v4i)*best & ~more));
  *at = (k & more) | (*at & ~more);
}

static int64_t argmax_f32_row(const unsigned char *p, int64_t last) {
  v4f best[2];
  v4i at[2] = {{0, 1, 2, 3}, {4, 5, 6, 7}}, k[2], nan = {0, 0, 0, 0};
  memcpy(best, p, sizeof best);
  k[0] = at[0];
  k[1] = at[1];
  nan |= (v4i)(best[0] != best[0]) | (v4i)(best[1] != best[1]);
  int64_t i = ARGMAX_W;
  for (; i + ARGMAX_W <= last; i += ARGMAX_W) {
    v4f x[2];
    memcpy(x, p + 4 * (size_t)i, sizeof x);
    k[0] += ARGMAX_W;
    k[1] += ARGMAX_W;
    argmax_step(x[0], k[0], &best[0], &at[0], &nan);
    argmax_step(x[1], k[1], &best[1], &at[1], &nan);
  }
  /* the lanes combined without branches: rows are short and their
   * maxima anywhere, so a branch per lane mispredicts often */
  v4i eq;
  v4i first = (v4i)(best[0] > best[1]);
  v4f top = (v4f)(((v4i)best[0] & first) | ((v4i)best[1] & ~first));
  float m = top[0] > top[1] ? top[0] : top[1];
  float m2 = top[2] > top[3] ? top[2] : top[3];
  m = m > m2 ? m : m2; /* no NaN among the maxima */
  v4f vm = {m, m, m, m};
  v4i big = {INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX};
  eq = (v4i)(best[0] == vm);
  v4i a = (at[0] & eq) | (big & ~eq);
  eq = (v4i)(best[1] == vm);
  v4i a1 = (at[1] & eq) | (big & ~eq);
  first = a < a1;
  a = (a & first) | (a1 & ~first);
  int64_t b = a[0] < a[1] ? a[0] : a[1], b2 = a[2] < a[3] ? a[2] : a[3];
  b = b < b2 ? b : b2;
  int any_nan = (nan[0] | nan[1] | nan[2] | nan[3]) != 0;
  for (; i < last; i++) {
    float x;
    memcpy(&x, p + 4 * (size_t)i, sizeof x);
    any_nan |= x != x;
    bool more = x > m;
    m = more ? x : m;
    b = more ? i : b;
  }
  if (!any_nan)
    return b;
  for (i = 0;; i++) { /* the first NaN */
    float x;
    memcpy(&x, p + 4 * (size_t)i, sizeof x);
    if (x != x)
      return i;
  }
}

/* Rows of fewer than ARGMAX_W elements: one by one, NaN first. */
static int64_t argmax_f32_short(const unsigned char *p, int64_t last) {
  float m;
  memcpy(&m, p, sizeof m);
  int64_t b = 0;
  for (int64_t i = 1; i < last && m == m; i++) {
    float x;
    memcpy(&x, p + 4 * (size_t)i, sizeof x);
    if (x != x || x > m)
      m = x, b = i;
  }
  return b;
}

/* Short rows (a batch's scores of ten classes: 40 bytes) four at a time,
 * a row to a lane: lane j walks row j's elements in order with a strict
 * >, so it keeps that row's first maximum, without the per-row combine
 * of lanes that costs as much as such a row's compares.  A row with a NaN
 * is answered by argmax_f32_short (its first NaN). */
#define SHORT_ROW 16

static void argmax_f32_four(const unsigned char *p, int64_t last, double *out) {
  size_t stride = 4 * (size_t)last;
  const unsigned char *r0 = p, *r1 = p + stride, *r2 = r1 + stride,
                      *r3 = r2 + stride;
  v4f best = {load_f32(r0), load_f32(r1), load_f32(r2), load_f32(r3)};
  v4i at = {0, 0, 0, 0}, nan = (v4i)(best != best);
  for (int32_t k = 1; k < last; k++) {
    size_t o = 4 * (size_t)k;
    v4f x = {load_f32(r0 + o), load_f32(r1 + o), load_f32(r2 + o),
             load_f32(r3 + o)};
    v4i kk = {k, k, k, k};
    argmax_step(x, kk, &best, &at, &nan);
  }
  for (int j = 0; j < 4; j++)
    out[j] = nan[j] ? (double)argmax_f32_short(p + (size_t)j * stride, last)
                    : (double)at[j];
}

#if defined(__x86_64__)
#include <immintrin.h>

#include "simd.h"

/* Rows of 8 to 15 elements (a batch's scores of ten classes) one at a
 * time on AVX2 machines: the first eight elements and the last eight
 * (overlapping) in two vectors; the row's largest value m is their
 * lanes' maximum, and the row's first maximum the first element equal to
 * m (== : -0 and +0 tie as in the reference): the lowest bit of the two
 * vectors' masks of lanes equal to m, put at their elements' places
 * (without a branch: where the maximum lies is anyone's guess, and a
 * mispredicted branch also throws away the loads in flight).  A row with
 * a NaN is answered by
 * argmax_f32_short (its first NaN).  The build targets the x86-64
 * baseline, so this function is compiled for AVX2 with the GCC/Clang
 * `target` attribute and chosen at run time. */
__attribute__((target("avx2"))) static void
argmax_f32_rows_avx2(const unsigned char *p, int64_t last, size_t rows,
                     double *out) {
  size_t stride = 4 * (size_t)last, tail = 4 * (size_t)(last - 8);
  for (size_t r = 0; r < rows; r++, p += stride) {
    __m256 a = _mm256_loadu_ps((const float *)p);
    __m256 b = _mm256_loadu_ps((const float *)(p + tail));
    __m256 nan = _mm256_or_ps(_mm256_cmp_ps(a, a, _CMP_UNORD_Q),
                              _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
    if (_mm256_movemask_ps(nan)) {
      out[r] = (double)argmax_f32_short(p, last);
      continue;
    }
    __m256 m = _mm256_max_ps(a, b);
    m = _mm256_max_ps(m, _mm256_permute2f128_ps(m, m, 1));
    m = _mm256_max_ps(m, _mm256_shuffle_ps(m, m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm256_max_ps(m, _mm256_shuffle_ps(m, m, _MM_SHUFFLE(2, 3, 0, 1)));
    unsigned in_a =
        (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(a, m, _CMP_EQ_OQ));
    unsigned in_b =
        (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(b, m, _CMP_EQ_OQ));
    /* element j of b is the row's last - 8 + j; where the two overlap
     * they hold the same elements, so the same bits */
    out[r] = (double)__builtin_ctz(in_a | in_b << (last - 8));
  }
}
#endif

static double *argmax_f32(const smrules_tensor *t, int64_t last, size_t *n) {
  size_t rows = (size_t)(t->count / last);
  double *v = malloc(rows * sizeof *v);
  *n = v ? rows : 0;
  const unsigned char *p = t->data;
  size_t stride = 4 * (size_t)last, r = 0;
#if defined(__x86_64__)
  if (v && last >= 8 && last < SHORT_ROW && rk_use_avx2()) {
    argmax_f32_rows_avx2(p, last, rows, v);
    return v;
  }
#endif
  if (v && last < SHORT_ROW)
    for (; r + 4 <= rows; r += 4)
      argmax_f32_four(p + r * stride, last, v + r);
  for (; v && r < rows; r++)
    v[r] = (double)(last >= ARGMAX_W ? argmax_f32_row(p + r * stride, last)
                                     : argmax_f32_short(p + r * stride, last));
  return v;
}
#define HAVE_ARGMAX_F32 1
#endif

double *rk_argmax_last_axis(const smrules_tensor *t, size_t *n) {
  int64_t last = t->ndim >= 2 ? t->shape[t->ndim - 1] : 1;
#ifdef HAVE_ARGMAX_F32
  /* the class scores read where they lie: memory for the indices only */
  if (t->dtype == SMRULES_DT_FLOAT && t->data && !t->strings && last > 1 &&
      last <= INT32_MAX && t->count > 0) /* lanes hold int32 indices */
    return argmax_f32(t, last, n);
#endif
  return argmax_values(t, last, n);
}

/* ------------------------------------------------------- channel sums */

/* The reference: each block summed from 0 in element order, added to its
 * channel's sum in block order. */
static void channel_sums_any(const smrules_tensor *t, int64_t channels,
                             int64_t inner, int64_t outer, double *sum) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t c = 0; c < channels; c++) {
      int64_t base = (o * channels + c) * inner;
      double s = 0;
      for (int64_t i = 0; i < inner; i++)
        s += rk_elem(t, base + i);
      sum[c] += s;
    }
}

/* float32 blocks eight at a time.  A block's sum is one chain of
 * dependent adds (its bits depend on that order), so one block alone runs
 * at the latency of an add per element; eight blocks' chains advance side
 * by side, each in its own order, so that the CPU overlaps them.  The
 * sums are then added to their channels in block order, as the reference
 * does.  A last group of fewer than eight blocks fills the idle chains
 * with its first block again and throws their sums away. */
#define SUM_CHAINS 8

static void channel_sums_f32(const unsigned char *p, int64_t channels,
                             int64_t inner, int64_t outer, double *sum) {
  int64_t blocks = outer * channels;
  size_t stride = 4 * (size_t)inner;
  for (int64_t b0 = 0; b0 < blocks; b0 += SUM_CHAINS) {
    int64_t nb = blocks - b0 < SUM_CHAINS ? blocks - b0 : SUM_CHAINS;
    const unsigned char *q[SUM_CHAINS];
    for (int64_t j = 0; j < SUM_CHAINS; j++)
      q[j] = p + (size_t)(b0 + (j < nb ? j : 0)) * stride;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    for (size_t i = 0; i < stride; i += 4) {
      s0 += load_f32(q[0] + i);
      s1 += load_f32(q[1] + i);
      s2 += load_f32(q[2] + i);
      s3 += load_f32(q[3] + i);
      s4 += load_f32(q[4] + i);
      s5 += load_f32(q[5] + i);
      s6 += load_f32(q[6] + i);
      s7 += load_f32(q[7] + i);
    }
    double s[SUM_CHAINS] = {s0, s1, s2, s3, s4, s5, s6, s7};
    for (int64_t j = 0; j < nb; j++)
      sum[(b0 + j) % channels] += s[j];
  }
}

void rk_channel_sums(const smrules_tensor *t, int ch, double *sum,
                     int64_t *outer, int64_t *inner) {
  int64_t channels = t->shape[ch], in = 1;
  for (int d = ch + 1; d < t->ndim; d++)
    in *= t->shape[d];
  int64_t out = in > 0 ? t->count / (channels * in) : 0;
  *outer = out;
  *inner = in;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  /* blocks of a few elements (channels last) gain nothing from chains */
  if (t->dtype == SMRULES_DT_FLOAT && t->data && in >= 16) {
    channel_sums_f32(t->data, channels, in, out, sum);
    return;
  }
#endif
  channel_sums_any(t, channels, in, out, sum);
}
