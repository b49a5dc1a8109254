/* test_fwkit.c - the NumPy-exact statistics and the ordered map of
 * plugins/profkit/fwkit.h (used by the framework-metric profiler rules):
 * expected values were computed with NumPy 1.24 and must match bit for
 * bit, since rule reports are compared with the reference exactly.
 * Also rk_quantiles (plugins/common/rulekit.h), which must give the bits
 * that sorting gives, and rk_allclose, whose fast loop must answer as the
 * element-by-element rule does; rk_tensor_quantiles, whose float32 path
 * selects on the floats' bits, must give the bits sorting gives too.  And
 * rk_values_counts, which falls back
 * to values_stats on a host whose table has no values_counts. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../plugins/profkit/fwkit.h"
#include "smrules/rulekit.h"
#include "unit.h"

#define N 1000

/* x_i = ((i * 7919) % 1000) / 7 + sin(i), as in the NumPy script. */
static void data(double *x) {
  for (int i = 0; i < N; i++)
    x[i] = (double)((i * 7919) % 1000) / 7.0 + sin((double)i);
}

static void test_mean_std(void) {
  double x[N];
  data(x);
  CHECK(np_pairwise_sum(x, N) == 71357.12994723639);
  CHECK(fk_mean(x, N) == 71.35712994723639);
  CHECK(fk_std(x, N) == 41.24542320364754);
  double small[] = {0.1, 0.2, 0.3};
  CHECK(fk_mean(small, 3) == 0.20000000000000004);
  CHECK(fk_std(small, 3) == 0.0816496580927726);
}

static void test_quantiles(void) {
  double x[N];
  data(x);
  double *s = fk_sorted(x, N);
  CHECK(np_quantile_sorted(s, N, 0.25) == 36.486314324310264);
  CHECK(np_quantile_sorted(s, N, 0.5) == 70.75793087946934);
  CHECK(np_quantile_sorted(s, N, 0.95) == 135.70765533697386);
  CHECK(fk_percentile_sorted(s, N, 99) == 141.2192035670562);
  CHECK(np_quantile_sorted(s, N, 1.0) == s[N - 1]);
  CHECK(np_quantile_sorted(s, N, 0.0) == s[0]);
  double one = 4.5;
  CHECK(np_quantile_sorted(&one, 1, 0.95) == 4.5);
  free(s);
}

static void test_histogram(void) {
  double x[N];
  data(x);
  int64_t c[10];
  double e[11];
  fk_histogram(x, 137, 10, c, e);
  const int64_t want[] = {15, 13, 13, 15, 14, 11, 13, 13, 15, 15};
  for (int i = 0; i < 10; i++)
    CHECK_EQ_INT(c[i], want[i]);
  CHECK(e[0] == -0.21496670478557095);
  CHECK(e[1] == 13.784629502163556);
  CHECK(e[5] == 69.78301432996007);
  CHECK(e[10] == 139.7809953647057);
  double same[] = {3, 3, 3};
  int64_t c4[4];
  double e4[5];
  fk_histogram(same, 3, 4, c4, e4); /* equal values: range widened by 0.5 */
  CHECK(e4[0] == 2.5 && e4[2] == 3.0 && e4[4] == 3.5);
  CHECK_EQ_INT(c4[2], 3);
  CHECK_EQ_INT(c4[0] + c4[1] + c4[3], 0);
  fk_histogram(NULL, 0, 4, c4, e4); /* empty: [0, 1] */
  CHECK(e4[0] == 0 && e4[4] == 1);
}

static void test_round(void) {
  CHECK(fk_round2(2.675) == 2.68);
  CHECK(fk_round2(0.125) == 0.12);
  CHECK(fk_round2(-1.005) == -1.0);
}

static void test_map(void) {
  fk_map m = {0};
  char key[16];
  bool added;
  for (int i = 0; i < 500; i++) {
    snprintf(key, sizeof key, "k%d", (i * 37) % 500);
    CHECK_EQ_INT(fk_map_add(&m, key, &added), i);
    CHECK(added);
  }
  CHECK_EQ_INT(fk_map_add(&m, "k37", &added), 1);
  CHECK(!added);
  CHECK_EQ_INT(fk_map_find(&m, "k0"), 0);
  CHECK_EQ_INT(fk_map_find(&m, "nope"), -1);
  CHECK_STR(m.keys[2], "k74");
  fk_map_free(&m);
  CHECK_EQ_INT(fk_map_find(&m, "k0"), -1);
}

/* rk_quantiles against a stable sort + np_quantile_sorted (rk_quantile):
 * the same bits, including the sign of a zero, on data with runs of equal
 * values, both zeros, sorted and reversed input. */
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
  double *ref = malloc(n * sizeof *ref);
  for (size_t j = 0; j < M; j++) {
    for (size_t i = 0; i < n; i++) {
      float f;
      memcpy(&f, bytes + i * sizeof f, sizeof f);
      ref[i] = f;
    }
    double want = rk_quantile(ref, n, q[j]);
    if (!same_bits(out[j], want))
      printf("  n=%zu q=%g: got %.17g, want %.17g\n", n, q[j], out[j], want);
    CHECK(same_bits(out[j], want));
  }
  free(ref);
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
static bool ref_allclose(const double *x, const double *y, int64_t n,
                         double rtol, double atol, bool equal_nan,
                         double *worst) {
  bool close = true;
  *worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double d;
    bool ok;
    if (isfinite(x[i]) && isfinite(y[i])) {
      d = fabs(x[i] - y[i]);
      ok = d <= atol + rtol * fabs(y[i]);
    } else if (isnan(x[i]) && isnan(y[i])) {
      d = 0;
      ok = equal_nan;
    } else {
      d = x[i] == y[i] ? 0 : INFINITY;
      ok = x[i] == y[i];
    }
    close &= ok;
    *worst = d > *worst ? d : *worst;
  }
  return close;
}

static smrules_tensor tensor_of(int dtype, const void *data, int64_t n) {
  smrules_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.ndim = 1;
  t.shape[0] = n;
  t.count = n;
  t.data = data;
  return t;
}

/* Both element types, finite data (the fast loop) and data with NaN and
 * infinities (the general one), close and not, at every length up to 9
 * (the lanes' tails) and a long one; the data sits unaligned. */
static void test_rk_allclose(void) {
  enum { L = 1003 };
  static const double odd[] = {NAN, INFINITY, -INFINITY};
  double x[L], y[L];
  unsigned char fa[4 * L + 1], fb[4 * L + 1], da[8 * L + 1], db[8 * L + 1];
  int wrong = 0, cases = 0;
  for (int variant = 0; variant < 24; variant++) {
    for (int i = 0; i < L; i++) {
      x[i] = (float)(sin(i * 0.37 + variant) * 1e3);
      y[i] = (float)(x[i] + (variant % 3 == 0 ? 0 : x[i] * 1e-6 * (i % 5)));
    }
    if (variant % 4 == 1)
      y[L / 2] = (float)(x[L / 2] + 5); /* one pair far apart */
    if (variant >= 12) { /* non-finite values, before or after that pair */
      int at = (variant / 2) % 2 ? variant % 7 : L - 1 - variant % 7;
      x[at] = odd[variant % 3];
      y[at] = variant % 2 ? odd[variant % 3] : 1.0;
    }
    for (int i = 0; i < L; i++) {
      float f = (float)x[i], g = (float)y[i];
      memcpy(fa + 1 + 4 * i, &f, 4);
      memcpy(fb + 1 + 4 * i, &g, 4);
      memcpy(da + 1 + 8 * i, &x[i], 8);
      memcpy(db + 1 + 8 * i, &y[i], 8);
    }
    for (int64_t n = 1; n <= L; n = n < 9 ? n + 1 : n < L ? L : L + 1) {
      for (int eq = 0; eq < 2; eq++) {
        double want_w, got_w, got_w2;
        bool want = ref_allclose(x, y, n, 1e-5, 1e-8, eq, &want_w);
        smrules_tensor a = tensor_of(SMRULES_DT_FLOAT, fa + 1, n),
                       b = tensor_of(SMRULES_DT_FLOAT, fb + 1, n);
        bool got = rk_allclose(&a, &b, 1e-5, 1e-8, eq, &got_w);
        a = tensor_of(SMRULES_DT_DOUBLE, da + 1, n);
        b = tensor_of(SMRULES_DT_DOUBLE, db + 1, n);
        bool got2 = rk_allclose(&a, &b, 1e-5, 1e-8, eq, &got_w2);
        /* without the largest difference it may stop early: same answer */
        bool got3 = rk_allclose(&a, &b, 1e-5, 1e-8, eq, NULL);
        a = tensor_of(SMRULES_DT_FLOAT, fa + 1, n);
        b = tensor_of(SMRULES_DT_FLOAT, fb + 1, n);
        got3 =
            got3 == want && rk_allclose(&a, &b, 1e-5, 1e-8, eq, NULL) == want;
        int w = got != want || got2 != want || !got3 ||
                memcmp(&got_w, &want_w, sizeof got_w) != 0 ||
                memcmp(&got_w2, &want_w, sizeof got_w) != 0;
        wrong += w;
        cases++;
      }
    }
  }
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT(cases, 24 * 10 * 2);
}

/* rk_values_counts on a host without values_counts (its table ends
 * before it) asks values_stats; on a newer host, values_counts. */
static int called_stats, called_counts;

static int fake_values_stats(smrules_trial *t, const char *const *names,
                             size_t n, int64_t step, int mode,
                             smrules_stats *out, int *status) {
  (void)t, (void)names, (void)step, (void)mode;
  called_stats++;
  for (size_t i = 0; i < n; i++) {
    out[i] = (smrules_stats){.count = 4, .nan = 1, .zeros = 2};
    status[i] = 0;
  }
  return 0;
}

static int fake_values_counts(smrules_trial *t, const char *const *names,
                              size_t n, int64_t step, int mode,
                              smrules_stats *out, int *status) {
  called_counts++;
  return fake_values_stats(t, names, n, step, mode, out, status);
}

static void test_rk_values_counts_on_old_and_new_hosts(void) {
  smrules_api api = {.values_stats = fake_values_stats,
                     .values_counts = fake_values_counts};
  const smrules_api *saved = rk_api;
  rk_api = &api;
  const char *v[2] = {"a", "b"};
  smrules_strlist names = {.v = v, .n = 2};
  smrules_stats out[2];
  int status[2];
  api.struct_size = (uint32_t)offsetof(smrules_api, values_counts);
  rk_values_counts(NULL, &names, 3, out, status);
  CHECK(called_stats == 1 && called_counts == 0);
  CHECK(out[1].nan == 1 && out[1].zeros == 2 && status[1] == 0);
  api.struct_size = sizeof api;
  rk_values_counts(NULL, &names, 3, out, status);
  CHECK(called_counts == 1);
  rk_api = saved;
}

int main(void) {
  TEST_RUN(test_mean_std);
  TEST_RUN(test_quantiles);
  TEST_RUN(test_histogram);
  TEST_RUN(test_round);
  TEST_RUN(test_map);
  TEST_RUN(test_rk_quantiles);
  TEST_RUN(test_rk_tensor_quantiles);
  TEST_RUN(test_rk_allclose);
  TEST_RUN(test_rk_values_counts_on_old_and_new_hosts);
  return TEST_REPORT("test_fwkit");
}
