/* test_rulekit_quantiles.c - NumPy's quantiles in the rule kit
 * (plugins/kit/quantiles.c, declared in smrules/rulekit.h): rk_quantiles
 * must give the bits that sorting gives, and rk_tensor_quantiles, whose
 * float32 path selects on the floats' bits where they lie, must give the
 * bits sorting gives too. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simd.h"
#include "smrules/rulekit.h"
#include "unit.h"

static bool same_bits(double a, double b) {
  return memcmp(&a, &b, sizeof a) == 0;
}

static void check_quantiles(const double *x, size_t n) {
  static const double q[] = {0.95, 0.05, 0, 1, 0.5, 0.25, 0.999};
  enum { M = sizeof q / sizeof q[0] };
  double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), out[M];
  memcpy(a, x, n * sizeof *a);
  rk_quantiles(a, n, q, out, M);
  for (size_t j = 0; j < M; j++) {
    memcpy(b, x, n * sizeof *b);
    CHECK(same_bits(out[j], rk_quantile(b, n, q[j])));
  }
  free(a);
  free(b);
}

static void test_rk_quantiles(void) {
  enum { L = 40001 }; /* large enough for the one-pass bracket */
  double *x = malloc(L * sizeof *x);
  uint64_t r = 12345;
  for (int kind = 0; kind < 7; kind++) {
    for (size_t i = 0; i < L; i++) {
      r = r * 6364136223846793005ULL + 1442695040888963407ULL;
      double v = (double)(r >> 40) / 16777216.0 - 0.3;
      switch (kind) {
      case 0: /* distinct values */
        x[i] = v;
        break;
      case 1: /* mostly zeros of both signs */
        x[i] = (r >> 20) % 5 ? ((r >> 30) & 1 ? -0.0 : 0.0) : v;
        break;
      case 2: /* few distinct values */
        x[i] = (double)((r >> 33) % 4) - 1.5;
        break;
      case 3: /* ascending */
        x[i] = (double)i;
        break;
      case 4: /* descending with zeros in the middle */
        x[i] =
            i > L / 3 && i < L / 2 ? (i & 1 ? -0.0 : 0.0) : (double)L - 2.0 * i;
        break;
      case 5: /* all equal */
        x[i] = -0.0;
        break;
      default: /* large values, and small ones where rk_quantiles samples
                  (every 2048th of the array): its bracket misses */
        x[i] = 1e9 + v;
      }
    }
    for (size_t t = 0; kind == 6 && t < 2048; t++)
      x[(size_t)((double)t / 2048 * L)] = -1.0 - (double)t * 1e-3;
    check_quantiles(x, L);
    check_quantiles(x, 5001);
    check_quantiles(x, 1);
    check_quantiles(x, 2);
    check_quantiles(x, 20);
  }
  /* a NaN anywhere (either lane of the vector pass, or the odd tail)
   * makes every quantile NaN */
  static const size_t at[] = {0, 7, 8, L - 2, L - 1};
  for (size_t k = 0; k < sizeof at / sizeof *at; k++) {
    for (size_t i = 0; i < L; i++)
      x[i] = (double)((i * 7919) % 1000);
    x[at[k]] = NAN;
    double out[2], q[2] = {0.5, 0.05};
    rk_quantiles(x, L, q, out, 2);
    CHECK(isnan(out[0]) && isnan(out[1]));
  }
  free(x);
}

/* rk_tensor_quantiles over float32 data at `bytes` (maybe unaligned)
 * against rk_quantile (widen, sort, pick) for each q, bit for bit. */
static void check_tensor_quantiles(const unsigned char *bytes, size_t n) {
  static const double q[] = {0.95, 0.05, 0, 1, 0.5, 0.25, 0.999, 0.001};
  enum { M = sizeof q / sizeof q[0] };
  smrules_tensor t = {.dtype = SMRULES_DT_FLOAT, .ndim = 1};
  t.shape[0] = t.count = (int64_t)n;
  t.data = bytes;
  t.nbytes = n * sizeof(float);
  double out[M];
  CHECK_EQ_INT(rk_tensor_quantiles(&t, q, out, M), 0);
  double *ref = malloc(n * sizeof *ref), want[M];
  for (size_t j = 0; j < M; j++) {
    for (size_t i = 0; i < n; i++) {
      float f;
      memcpy(&f, bytes + i * sizeof f, sizeof f);
      ref[i] = f;
    }
    want[j] = rk_quantile(ref, n, q[j]);
    if (!same_bits(out[j], want[j]))
      printf("  n=%zu q=%g: got %.17g, want %.17g\n", n, q[j], out[j], want[j]);
    CHECK(same_bits(out[j], want[j]));
  }
  free(ref);
  /* one or two quantiles at a time (PoorWeightInitialization's 5 % and
   * 95 %) take the sampled bracket and its one pass, with and without
   * AVX2: every pair of the q above, and each alone */
  for (int avx2 = 0; avx2 < 2 * 3; avx2++) {
    rk_allow_avx2(avx2 % 2); /* and brackets that miss, scratch that fills */
    rk_squeeze_bracket(avx2 / 2);
    for (size_t a = 0; a < M; a++)
      for (size_t b = a; b < M; b++) {
        double two[2] = {q[a], q[b]}, got[2];
        size_t m = a == b ? 1 : 2;
        CHECK_EQ_INT(rk_tensor_quantiles(&t, two, got, m), 0);
        if (!same_bits(got[0], want[a]) ||
            (m == 2 && !same_bits(got[1], want[b]))) {
          printf("  n=%zu q=%g,%g avx2 %d: got %.17g %.17g, want %.17g "
                 "%.17g\n",
                 n, q[a], q[b], avx2, got[0], got[1], want[a], want[b]);
          CHECK(0);
        }
      }
  }
  rk_allow_avx2(true);
  rk_squeeze_bracket(0);
}

static float f32_bits(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}

static void test_rk_tensor_quantiles(void) {
  enum { L = 40001 }; /* above the float32 path's minimum (16384) */
  unsigned char *raw = malloc(L * sizeof(float) + 1);
  float *x = malloc(L * sizeof *x);
  uint64_t r = 987654321;
  for (int kind = 0; kind < 11; kind++) {
    for (size_t i = 0; i < L; i++) {
      r = r * 6364136223846793005ULL + 1442695040888963407ULL;
      float v = (float)((double)(r >> 40) / 16777216.0 - 0.3);
      switch (kind) {
      case 0: /* distinct values of both signs */
        x[i] = v;
        break;
      case 1: /* mostly zeros of both signs */
        x[i] = (r >> 20) % 5 ? ((r >> 30) & 1 ? -0.0f : 0.0f) : v;
        break;
      case 2: /* few distinct values */
        x[i] = (float)((r >> 33) % 4) - 1.5f;
        break;
      case 3: /* ascending */
        x[i] = (float)i;
        break;
      case 4: /* descending with zeros in the middle */
        x[i] = i > L / 3 && i < L / 2 ? (i & 1 ? -0.0f : 0.0f)
                                      : (float)L - 2.0f * (float)i;
        break;
      case 5: /* all equal */
        x[i] = -0.0f;
        break;
      case 6: /* all in one top bin: they differ in low mantissa bits */
        x[i] = f32_bits(0x3f800000u + (uint32_t)(r >> 50));
        break;
      case 7: /* subnormals and zeros of both signs */
        x[i] = f32_bits((uint32_t)(r >> 41) | ((uint32_t)(r >> 20) & 1) << 31);
        break;
      case 8: /* infinities among the values */
        x[i] = (r >> 20) % 7 ? v : (r >> 30) & 1 ? INFINITY : -INFINITY;
        break;
      case 9: /* the largest and smallest finite floats */
        x[i] = (r >> 20) % 3 ? v : (r >> 30) & 1 ? FLT_MAX : -FLT_MAX;
        break;
      default: /* zeros, +0 before -0: the bits order them the other way
                  round, a stable sort keeps this order */
        x[i] = i < L / 2 ? 0.0f : -0.0f;
      }
    }
    check_tensor_quantiles((const unsigned char *)x, L);
    check_tensor_quantiles((const unsigned char *)x, 16384);
    check_tensor_quantiles((const unsigned char *)x, 16383); /* widened */
    check_tensor_quantiles((const unsigned char *)x, 3);
    memcpy(raw + 1, x, L * sizeof *x); /* not aligned to a float */
    check_tensor_quantiles(raw + 1, L);
  }
  /* a NaN of either sign anywhere makes every quantile NaN */
  static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u};
  static const size_t at[] = {0, 1, L / 2, L - 1};
  for (size_t k = 0; k < sizeof at / sizeof *at; k++) {
    for (size_t i = 0; i < L; i++)
      x[i] = (float)((i * 7919) % 1000);
    x[at[k]] = f32_bits(nans[k % 3]);
    smrules_tensor t = {.dtype = SMRULES_DT_FLOAT, .ndim = 1, .data = x};
    t.shape[0] = t.count = L;
    t.nbytes = L * sizeof *x;
    double out[2], q[2] = {0.5, 0.05};
    CHECK_EQ_INT(rk_tensor_quantiles(&t, q, out, 2), 0);
    CHECK(isnan(out[0]) && isnan(out[1]));
  }
  /* an empty tensor: NaN, as rk_quantiles gives */
  smrules_tensor empty = {.dtype = SMRULES_DT_FLOAT, .ndim = 1};
  double q1 = 0.5, o1 = 0;
  CHECK_EQ_INT(rk_tensor_quantiles(&empty, &q1, &o1, 1), 0);
  CHECK(isnan(o1));
  free(x);
  free(raw);
}

/* rk_allclose against NumPy's isclose rule written out element by element:
 * close when |x - y| <= atol + rtol * |y| for finite pairs, NaN equal only
 * with equal_nan, infinities equal only to themselves; the largest
 * difference is |x - y|, +inf for a mismatch of non-finite values. */
int main(void) {
  TEST_RUN(test_rk_quantiles);
  TEST_RUN(test_rk_tensor_quantiles);
  return TEST_REPORT("test_rulekit_quantiles");
}
