/* test_rulekit_values.c - the rule kit's value helpers
 * (plugins/kit/rulekit.c, declared in smrules/rulekit.h): rk_allclose,
 * whose fast loop must answer as the element-by-element rule does, and
 * the per-unit activity of DeadRelu and SaturatedActivation
 * (rk_inactive_units and its vectorised forms, plugins/kit/kernels.h), and
 * the statistics and reductions helpers, each one api->query. */
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

/* The kit's statistics and reductions are one api->query each, with the
 * mask of what they hand back and the size of smrules_values; the answer
 * and each tensor's status come back unchanged. */
static unsigned asked;
static size_t asked_size;

static int fake_query(smrules_trial *t, const char *const *names, size_t n,
                      int64_t step, int mode, unsigned what,
                      smrules_values *out, size_t out_size, int *status) {
  (void)t, (void)names, (void)step;
  asked = what;
  asked_size = out_size;
  if (mode != SMRULES_MODE_GLOBAL)
    return SMRULES_ERR;
  for (size_t i = 0; i < n; i++) {
    memset(&out[i], 0, sizeof out[i]);
    out[i].stats = (smrules_stats){.count = 4, .nan = 1, .zeros = 2};
    out[i].red[SMRULES_RED_STD] = 0.5;
    out[i].abs_red[SMRULES_RED_MEAN] = 7;
    status[i] = i == 1 ? SMRULES_TENSOR_UNAVAILABLE_FOR_STEP : SMRULES_OK;
  }
  return SMRULES_OK;
}

static void test_rk_values_ask_one_query(void) {
  smrules_api api = {.struct_size = sizeof api, .query = fake_query};
  const smrules_api *saved = rk_api;
  rk_api = &api;
  const char *v[2] = {"a", "b"};
  smrules_strlist names = {.v = v, .n = 2};
  smrules_stats out[2];
  double red[2];
  int status[2];
  rk_values_counts(NULL, &names, 3, out, status);
  CHECK(asked == SMRULES_Q_COUNTS && asked_size == sizeof(smrules_values));
  CHECK(out[0].nan == 1 && out[0].zeros == 2 && status[0] == SMRULES_OK);
  CHECK_EQ_INT(status[1], SMRULES_TENSOR_UNAVAILABLE_FOR_STEP);
  rk_values_stats(NULL, &names, 3, out, status);
  CHECK(asked == SMRULES_Q_STATS && out[1].count == 4);
  rk_reductions(NULL, &names, 3, SMRULES_RED_MEAN, true, red, status);
  CHECK(asked == SMRULES_Q_ABS_RED(SMRULES_RED_MEAN) && red[0] == 7);
  double x = 0;
  CHECK_EQ_INT(rk_reduction(NULL, "a", 3, SMRULES_RED_STD, false, &x),
               SMRULES_OK);
  CHECK(asked == SMRULES_Q_STD && x == 0.5);
  CHECK_EQ_INT(rk_reduction(NULL, "a", 3, SMRULES_RED_COUNT, false, &x),
               SMRULES_ERR);
  rk_api = saved;
}

/* The per-unit activity as docs/rules/DeadRelu.md defines it, element by
 * element in doubles, with a counter per unit. */
typedef struct bounds {
  double lo, hi;
  bool upper;
} bounds;

static bool ref_active(double x, const void *arg) {
  const bounds *b = arg;
  return b->lo < x && (!b->upper || x < b->hi);
}

static double ref_inactive(const double *x, int64_t batch, int64_t units,
                           const bounds *b, double thr) {
  int64_t inactive = 0;
  for (int64_t u = 0; u < units; u++) {
    int64_t hits = 0;
    for (int64_t s = 0; s < batch; s++)
      hits += ref_active(x[s * units + u], b);
    inactive += 100.0 * (double)hits / (double)batch < thr;
  }
  return 100.0 * (double)inactive / (double)units;
}

/* Float and double data (unaligned), unit counts around the lanes and
 * the block of units (8192), bounds a float cannot hold (0.1, beyond FLT_MAX,
 * NaN, infinities), elements NaN, infinite, subnormal and equal to the
 * bounds: the vectorised forms and the callback give the reference's
 * percentage bit for bit. */
static void test_rk_inactive_units(void) {
  static const int64_t unit_counts[] = {1, 3, 4, 5, 9, 2049, 8191, 8192, 8197};
  static const int64_t batches[] = {1, 2, 4, 7, 32};
  static const bounds cases[] = {
      {0, 0, false},       {0.1, 0, false},
      {-0.3, 0.7, true},   {-0.9, 0.9, true},
      {0.1, 0.2, true},    {1e39, 0, false},
      {-1e39, 1e39, true}, {-INFINITY, INFINITY, true},
      {NAN, 0, false},     {0, NAN, true},
      {0.5, 0.25, true}};
  static const double thresholds[] = {0, 1, 37.5, 50, 100};
  enum { MAXN = 32 * 8197 };
  static double x[MAXN];
  static unsigned char f[4 * MAXN + 1], d[8 * MAXN + 1];
  uint64_t rng = 88172645463325252ULL;
  int wrong = 0, cases_run = 0;
  for (size_t ui = 0; ui < sizeof unit_counts / sizeof *unit_counts; ui++)
    for (size_t bi = 0; bi < sizeof batches / sizeof *batches; bi++) {
      int64_t units = unit_counts[ui], batch = batches[bi], n = units * batch;
      for (int64_t i = 0; i < n; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        float v = (float)((double)(rng >> 11) / 9007199254740992.0 * 2 - 1);
        switch (rng % 29) { /* a few of the values the bounds must split */
        case 0:
          v = NAN;
          break;
        case 1:
          v = INFINITY;
          break;
        case 2:
          v = -INFINITY;
          break;
        case 3:
          v = 0.1f;
          break;
        case 4:
          v = 1e-40f;
          break;
        case 5:
          v = 0;
          break;
        case 6:
          v = -0.3f;
          break;
        case 7:
          v = 0.7f;
          break;
        }
        if (units % 3 == 0 && (i % units) % 4 == 1)
          v = -fabsf(v); /* some units dead in every sample */
        x[i] = v;
        memcpy(f + 1 + 4 * i, &v, 4);
        memcpy(d + 1 + 8 * i, &x[i], 8);
      }
      for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
        for (size_t ti = 0; ti < sizeof thresholds / sizeof *thresholds; ti++) {
          const bounds *b = &cases[ci];
          double thr = thresholds[ti];
          double want = ref_inactive(x, batch, units, b, thr);
          for (int dt = 0; dt < 2; dt++) {
            smrules_tensor t = dt ? tensor_of(SMRULES_DT_DOUBLE, d + 1, n)
                                  : tensor_of(SMRULES_DT_FLOAT, f + 1, n);
            if (batch > 1 || ui % 2) { /* rank 1 is one sample */
              t.ndim = 2;
              t.shape[0] = batch;
              t.shape[1] = units;
            }
            double w = t.ndim == 1 ? ref_inactive(x, 1, n, b, thr) : want;
            double got_cb = -1, got_fast = -1;
            int rc1 = rk_inactive_units(&t, ref_active, b, thr, &got_cb);
            int rc2 = b->upper
                          ? rk_inactive_units_between(&t, b->lo, b->hi, thr,
                                                      &got_fast)
                          : rk_inactive_units_above(&t, b->lo, thr, &got_fast);
            int bad = rc1 != 0 || rc2 != 0 ||
                      memcmp(&got_cb, &w, sizeof w) != 0 ||
                      memcmp(&got_fast, &w, sizeof w) != 0;
            if (bad && wrong < 5)
              fprintf(stderr,
                      "units %lld batch %lld bounds %g %g thr %g dtype %d: "
                      "want %.17g, callback %.17g, fast %.17g\n",
                      (long long)units, (long long)batch, b->lo, b->hi, thr, dt,
                      w, got_cb, got_fast);
            wrong += bad;
            cases_run++;
          }
        }
    }
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT(cases_run, 9 * 5 * 11 * 5 * 2);
  double pct = -1;
  smrules_tensor empty = tensor_of(SMRULES_DT_FLOAT, f, 0);
  CHECK(rk_inactive_units_above(&empty, 0, 1, &pct) == -1 && pct == -1);
}

/* Long float32 tensors, blocks of 1024 and more: one pair far apart
 * early or late (or close only by the tolerance of |y|), a NaN or an
 * infinity before or after it, a last block of 1-3 elements; with and
 * without the largest difference.  Variants 36 and up are byte-identical
 * but for those pairs, so whole chunks of 4096 elements are skipped by
 * memcmp (a NaN pair in the skipped chunk, a difference after it). */
static void test_rk_allclose_long(void) {
  enum { N = 5003 };
  static double x[N], y[N];
  static unsigned char fa[4 * N + 1], fb[4 * N + 1];
  static const double odd[] = {NAN, INFINITY, -INFINITY};
  int wrong = 0, cases = 0, closes = 0;
  for (int v72 = 0; v72 < 72; v72++) {
    int variant = v72 % 36, same = v72 >= 36;
    for (int i = 0; i < N; i++) {
      x[i] = (float)(cos(i * 0.11 + variant) * 50);
      y[i] = same ? x[i] : (float)(x[i] * (1 + 1e-7 * (i % 3)));
    }
    int far = variant % 3 == 0 ? -1 : variant % 3 == 1 ? 17 : N - 2;
    if (far >= 0)
      y[far] = (float)(x[far] + 1);
    if (variant % 4 == 3 && far >= 0) { /* close by |y|, not by |x| */
      x[far] = (float)0.905;
      y[far] = 1.0;
    }
    if (variant >= 12) {
      int at = variant % 2 ? 3 : N - 1;
      x[at] = odd[variant % 3];
      y[at] = variant >= 24 ? odd[variant % 3] : 0.5;
    }
    for (int i = 0; i < N; i++) {
      float f = (float)x[i], g = (float)y[i];
      memcpy(fa + 1 + 4 * i, &f, 4);
      memcpy(fb + 1 + 4 * i, &g, 4);
    }
    for (int64_t n = N - 3; n <= N; n++)
      for (int eq = 0; eq < 2; eq++) {
        double rtol = eq ? 0.1 : 1e-5, want_w, got_w;
        bool want = ref_allclose(x, y, n, rtol, 1e-8, eq, &want_w);
        smrules_tensor a = tensor_of(SMRULES_DT_FLOAT, fa + 1, n),
                       b = tensor_of(SMRULES_DT_FLOAT, fb + 1, n);
        bool got = rk_allclose(&a, &b, rtol, 1e-8, eq, &got_w);
        bool got_fast = rk_allclose(&a, &b, rtol, 1e-8, eq, NULL);
        closes += want;
        wrong += got != want || got_fast != want ||
                 memcmp(&got_w, &want_w, sizeof got_w) != 0;
        cases++;
      }
  }
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT(cases, 72 * 4 * 2);
  CHECK(closes > 0 && closes < cases);
}

/* Both with the machine's vector code and with the baseline's. */
static void test_rk_allclose_both(void) {
  test_rk_allclose();
  test_rk_allclose_long();
  rk_allow_avx2(false);
  test_rk_allclose();
  test_rk_allclose_long();
  rk_allow_avx2(true);
}

/* The per-unit pass with and without its AVX2 row loop. */
static void test_rk_inactive_units_both(void) {
  test_rk_inactive_units();
  rk_allow_avx2(false);
  test_rk_inactive_units();
  rk_allow_avx2(true);
}

int main(void) {
  TEST_RUN(test_rk_allclose_both);
  TEST_RUN(test_rk_inactive_units_both);
  TEST_RUN(test_rk_values_ask_one_query);
  return TEST_REPORT("test_rulekit_values");
}
