/* test_rulekit_kernels.c - the rule kit's per-element kernels of single
 * rules (plugins/kit/kernels.c) against plain loops written here from
 * their definitions, bit for bit: ClassImbalance's and Confusion's class
 * indices (NumPy's argmax: the first maximum, the first NaN) and
 * CheckInputImages' channel sums (each block summed in element order,
 * blocks added in order).  Random data with NaN, infinities, denormals,
 * signed zeros and ties, every short length, odd lengths, unaligned
 * starts. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "simd.h"
#include "smrules/rulekit.h"
#include "unit.h"

static uint64_t rng = 88172645463325252ULL;

static uint64_t next(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

/* A float from a small set, so that rows have ties, signed zeros and the
 * special values; `nan_odds` in 1000 a NaN. */
static float special(int nan_odds) {
  static const float set[] = {
      -1.0f,   0.0f,    -0.0f, 1.0f,  2.0f,     2.0f,      3.0f, 1e-40f,
      -1e-40f, FLT_MAX, -2.5f, 0.25f, INFINITY, -INFINITY, 3.0f, FLT_MIN};
  uint64_t r = next();
  if ((int)(r % 1000) < nan_odds)
    return NAN;
  return set[(r >> 10) % (sizeof set / sizeof *set)];
}

static smrules_tensor tensor_f32(const void *data, int ndim,
                                 const int64_t *shape) {
  smrules_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = SMRULES_DT_FLOAT;
  t.ndim = ndim;
  t.count = 1;
  for (int i = 0; i < ndim; i++) {
    t.shape[i] = shape[i];
    t.count *= shape[i];
  }
  t.data = data;
  t.nbytes = (size_t)t.count * 4;
  return t;
}

/* NumPy's argmax of one row, as docs/rules/ClassImbalance.md uses it. */
static int64_t ref_argmax(const float *row, int64_t n) {
  int64_t best = 0;
  for (int64_t k = 1; k < n && !isnan(row[best]); k++)
    if (isnan(row[k]) || (double)row[k] > (double)row[best])
      best = k;
  return best;
}

/* Every row length up to 40, a few long ones; NaN-free rows and rows
 * with NaN; the data one byte past an aligned address. */
static void test_argmax(void) {
  static const int64_t lengths_long[] = {63, 64, 65, 1000, 1001};
  enum { MAXE = 7 * 1001 };
  static float v[MAXE];
  static unsigned char raw[4 * MAXE + 1];
  int wrong = 0, rows_checked = 0;
  for (int64_t li = 2; li <= 40 + 5; li++) {
    int64_t last = li <= 40 ? li : lengths_long[li - 41];
    for (int64_t rows = 1; rows <= 7; rows++)
      for (int nan_odds = 0; nan_odds <= 30; nan_odds += 15) {
        int64_t n = rows * last;
        for (int64_t i = 0; i < n; i++)
          v[i] = special(nan_odds);
        memcpy(raw + 1, v, (size_t)n * 4);
        int64_t shape[3] = {1, rows, last};
        smrules_tensor t = tensor_f32(raw + 1, 3, shape);
        size_t got_n;
        double *got = rk_argmax_last_axis(&t, &got_n);
        CHECK(got != NULL);
        CHECK_EQ_INT((int64_t)got_n, rows);
        for (int64_t r = 0; got && r < rows; r++, rows_checked++)
          if (got[r] != (double)ref_argmax(v + r * last, last)) {
            if (wrong++ < 5)
              fprintf(stderr, "argmax row %lld of %lld x %lld: %g, want %lld\n",
                      (long long)r, (long long)rows, (long long)last, got[r],
                      (long long)ref_argmax(v + r * last, last));
          }
        free(got);
      }
  }
  CHECK_EQ_INT(wrong, 0);
  CHECK(rows_checked > 1000);
  /* rank 1, or a last axis of 1: the values themselves */
  float w[5] = {3, -0.0f, NAN, 1e-40f, 7};
  int64_t shape[2] = {5, 1};
  for (int ndim = 1; ndim <= 2; ndim++) {
    smrules_tensor t = tensor_f32(w, ndim, shape);
    size_t n;
    double *got = rk_argmax_last_axis(&t, &n);
    CHECK(got != NULL && n == 5);
    for (size_t i = 0; got && i < 5; i++)
      CHECK(memcmp(&got[i], &(double){w[i]}, sizeof(double)) == 0 ||
            (isnan(got[i]) && isnan(w[i])));
    free(got);
  }
}

/* The definition: blocks of `inner` elements, each summed from 0 in
 * element order, added to sum[channel] in order. */
static void ref_channel_sums(const float *x, int64_t outer, int64_t channels,
                             int64_t inner, double *sum) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t c = 0; c < channels; c++) {
      double s = 0;
      for (int64_t i = 0; i < inner; i++)
        s += x[(o * channels + c) * inner + i];
      sum[c] += s;
    }
}

static bool same_bits(double a, double b) {
  return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b));
}

/* Values over a wide range, so that any other order of the adds changes
 * the bits; sums that start from earlier steps' totals. */
static void test_channel_sums(void) {
  static const int64_t inners[] = {1, 3, 15, 16, 17, 100, 257};
  enum { MAXE = 11 * 5 * 257 };
  static float v[MAXE];
  static unsigned char raw[4 * MAXE + 3];
  int wrong = 0, cases = 0;
  for (size_t ii = 0; ii < sizeof inners / sizeof *inners; ii++)
    for (int64_t channels = 1; channels <= 5; channels++)
      for (int64_t outer = 1; outer <= 11; outer++)
        for (int special_odds = 0; special_odds <= 1; special_odds++) {
          int64_t inner = inners[ii], n = outer * channels * inner;
          for (int64_t i = 0; i < n; i++) {
            uint64_t r = next();
            double mag = ldexp(1.0, (int)(r % 80) - 40);
            v[i] =
                (float)(((double)(r >> 11) / 9007199254740992.0 - 0.4) * mag);
            if (special_odds && r % 97 == 0)
              v[i] = special(200);
          }
          size_t off = (size_t)(next() % 4);
          memcpy(raw + off, v, (size_t)n * 4);
          /* [outer, channels, inner] as [outer, channels, 1, inner] */
          int64_t shape[4] = {outer, channels, 1, inner};
          smrules_tensor t = tensor_f32(raw + off, 4, shape);
          double got[5], want[5];
          for (int c = 0; c < 5; c++)
            got[c] = want[c] = c * 0.1 + 1e-3; /* earlier steps' sums */
          int64_t o_out, i_out;
          rk_channel_sums(&t, 1, got, &o_out, &i_out);
          ref_channel_sums(v, outer, channels, inner, want);
          CHECK_EQ_INT(o_out, outer);
          CHECK_EQ_INT(i_out, inner);
          cases++;
          for (int64_t c = 0; c < channels; c++)
            if (!same_bits(got[c], want[c]) && wrong++ < 5)
              fprintf(stderr,
                      "channel sums %lld x %lld x %lld, channel %lld: %.17g, "
                      "want %.17g\n",
                      (long long)outer, (long long)channels, (long long)inner,
                      (long long)c, got[c], want[c]);
        }
  CHECK_EQ_INT(wrong, 0);
  CHECK(cases > 700);
}

/* rk_round_half_away_inline against round(), bit for bit: halves both
 * ways, the largest double below a half, signed zeros, subnormals, the
 * edge of 2^52, infinities, NaN and random doubles of every binade. */
static bool same_round(double v) {
  double want = round(v), got = rk_round_half_away_inline(v);
  if (isnan(want))
    return isnan(got);
  return memcmp(&want, &got, sizeof want) == 0;
}

static void test_round_half_away(void) {
  static const double odd[] = {0.0,
                               -0.0,
                               0.5,
                               -0.5,
                               1.5,
                               -1.5,
                               2.5,
                               -2.5,
                               0.49999999999999994,
                               -0.49999999999999994,
                               0.5000000000000001,
                               4.9e-324,
                               -4.9e-324,
                               2.2250738585072014e-308,
                               0x1p52 - 0.5,
                               -(0x1p52 - 0.5),
                               0x1p52 - 1.5,
                               0x1p52,
                               0x1p52 + 1,
                               0x1p53,
                               9.0e18,
                               -9.3e18,
                               1e300,
                               INFINITY,
                               -INFINITY,
                               NAN};
  int wrong = 0;
  for (size_t i = 0; i < sizeof odd / sizeof *odd; i++)
    wrong += !same_round(odd[i]);
  for (int k = -70; k <= 70; k++) { /* around every half */
    double h = k + 0.5;
    wrong += !same_round(h) + !same_round(nextafter(h, INFINITY)) +
             !same_round(nextafter(h, -INFINITY));
  }
  for (int i = 0; i < 200000; i++) { /* any bits */
    uint64_t bits = next();
    double v;
    memcpy(&v, &bits, sizeof v);
    wrong += !same_round(v);
    v = ldexp((double)(next() >> 11), -(int)(next() % 60)); /* near 0-2^53 */
    wrong += !same_round(v) + !same_round(-v);
  }
  CHECK_EQ_INT(wrong, 0);
}

/* The class indices with and without the AVX2 rows (rows of 8 to 15). */
static void test_argmax_both(void) {
  test_argmax();
  rk_allow_avx2(false);
  test_argmax();
  rk_allow_avx2(true);
}

int main(void) {
  TEST_RUN(test_argmax_both);
  TEST_RUN(test_channel_sums);
  TEST_RUN(test_round_half_away);
  return TEST_REPORT("test_rulekit_kernels");
}
