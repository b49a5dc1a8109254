/* test_simd_state.c - no per-element kernel returns with the upper halves
 * of the YMM registers in use.
 *
 * The kernels' AVX2 loops are compiled with the `target` attribute inside
 * code built for the x86-64 baseline, so the code around them uses SSE
 * instructions.  An AVX2 function must clear the upper halves (vzeroupper)
 * before it returns or calls out: left in use, they make every later SSE
 * instruction of the thread slower (on the AMD Zen 4 where this was found,
 * ClassImbalance's argmax ran at half speed after PoorWeightInitialization's
 * quantiles; bench/README.md, section 14).  The processor reports which
 * register states are in use (XGETBV with ECX = 1, bit 2: the upper halves
 * of YMM0-15), so each kernel is called on data that takes its vector paths
 * and their exits (short tails, early stops, fallbacks) and the bit read
 * right after it returns.  Skipped where the CPU cannot report it or has no
 * AVX2. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/tensor.h"
#include "kernels.h"
#include "simd.h"
#include "smrules/rulekit.h"
#include "unit.h"
#include "update_norm.h"

static bool reporting; /* the CPU tells which states are in use, here */

/* The sanitizer build is not the product's code: its instrumentation
 * calls into the sanitizers' runtime from inside the AVX2 loops, at -O1,
 * and where the compiler then clears the upper halves is its own
 * business.  The check runs in the optimised build. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
#define INSTRUMENTED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) ||                                        \
    __has_feature(undefined_behavior_sanitizer)
#define INSTRUMENTED 1
#endif
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(INSTRUMENTED)
#include <cpuid.h>

static bool can_report(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
    return false;
  if (__get_cpuid_max(0, NULL) < 0xd)
    return false;
  __cpuid_count(0xd, 1, a, b, c, d);
  return (a & (1u << 2)) != 0; /* XGETBV with ECX = 1 */
}

static bool upper_in_use(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
  return (lo & 4u) != 0;
}

/* Inline assembly, not an intrinsic: this file is built for the baseline.
 * An AVX instruction: only where the CPU has AVX2 and reports. */
static void clear_upper(void) {
  if (reporting)
    __asm__ volatile("vzeroupper");
}
#else
static bool can_report(void) {
  return false;
}
static bool upper_in_use(void) {
  return false;
}
static void clear_upper(void) {}
#endif

static const char *dirty_after; /* the first kernel that left them in use */

#define AFTER(name, call)                                                      \
  do {                                                                         \
    clear_upper();                                                             \
    call;                                                                      \
    bool in_use_ = reporting && upper_in_use();                                \
    if (in_use_ && !dirty_after)                                               \
      dirty_after = name;                                                      \
    if (in_use_)                                                               \
      fprintf(stderr,                                                          \
              "%s (n = %zu) returned with the YMM upper halves in "            \
              "use\n",                                                         \
              name, n);                                                        \
    CHECK(!in_use_);                                                           \
  } while (0)

static volatile double sink;

static smrules_tensor f32(const float *x, int64_t d0, int64_t d1) {
  smrules_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = SMRULES_DT_FLOAT;
  t.ndim = 2;
  t.shape[0] = d0;
  t.shape[1] = d1;
  t.count = d0 * d1;
  t.data = x;
  t.nbytes = (size_t)t.count * 4;
  return t;
}

static smr_tensor core_of(const smrules_tensor *t) {
  smr_tensor c;
  memset(&c, 0, sizeof c);
  c.dtype = c.stored_dtype = SMR_DT_FLOAT;
  c.ndim = t->ndim;
  for (int i = 0; i < t->ndim; i++)
    c.shape[i] = t->shape[i];
  c.count = t->count;
  c.data = t->data;
  c.nbytes = t->nbytes;
  return c;
}

/* Every kernel once over n floats x (and y close to x). */
static void kernels_over(const float *x, const float *y, size_t n) {
  smrules_tensor t = f32(x, 1, (int64_t)n), u = f32(y, 1, (int64_t)n);
  smr_tensor c = core_of(&t);
  smr_stats s;
  smr_error e;
  double v, pct, at[2];
  static const double q[2] = {0.95, 0.05};
  AFTER("rk_tensor_quantiles", rk_tensor_quantiles(&t, q, at, 2));
  for (int how = RK_BRACKET_NO_MARGIN; how <= RK_BRACKET_NO_ROOM; how++) {
    rk_squeeze_bracket(how);
    AFTER("rk_tensor_quantiles (fallback)", rk_tensor_quantiles(&t, q, at, 2));
  }
  rk_squeeze_bracket(0);
  AFTER("rk_allclose", sink = rk_allclose(&t, &u, 1e-5, 1e-8, true, NULL));
  AFTER("rk_allclose (equal)",
        sink = rk_allclose(&t, &t, 1e-5, 1e-8, true, NULL));
  AFTER("smr_tensor_counts", smr_tensor_counts(&c, &s, &e));
  for (int r = 0; r < SMR_RED_COUNT_; r++)
    for (int abs = 0; abs <= 1; abs++)
      AFTER("smr_tensor_reduce",
            smr_tensor_reduce(&c, (smr_reduction)r, abs, &v, &e));
  if (n % 8 == 0) { /* eight units, a batch of n / 8 */
    smrules_tensor b = f32(x, (int64_t)n / 8, 8);
    AFTER("rk_inactive_units_above", rk_inactive_units_above(&b, 0, 1, &pct));
    AFTER("rk_inactive_units_between",
          rk_inactive_units_between(&b, -0.5, 0.5, 1, &pct));
  }
  update_pair p = {(const unsigned char *)y, (const unsigned char *)x,
                   (int64_t)n};
  AFTER("update_norms_f32", update_norms_f32(&p, 1, &v));
  if (n % 96 == 0) { /* images of 3 channels of 32 floats */
    smrules_tensor img = f32(x, (int64_t)n / 96, 3);
    img.ndim = 3;
    img.shape[2] = 32;
    double sum[3] = {0};
    int64_t outer, inner;
    AFTER("rk_channel_sums", rk_channel_sums(&img, 1, sum, &outer, &inner));
  }
  for (int64_t last = 2; last <= 1000; last = last * 5 + 1)
    if (n % (size_t)last == 0) {
      smrules_tensor a = f32(x, (int64_t)n / last, last);
      size_t rows;
      AFTER("rk_argmax_last_axis", free(rk_argmax_last_axis(&a, &rows)));
    }
}

static void test_upper_state(void) {
  reporting = can_report() && rk_use_avx2();
  if (!reporting) /* the kernels still run, for the sanitizers */
    printf("test_simd_state: no AVX2, no XGETBV 1 or a sanitizer build: "
           "the YMM state is not checked\n");
  static const size_t sizes[] = {7,    8,     9,     96,    1000,
                                 2976, 16384, 20001, 98304, 300000};
  size_t most = 300000;
  float *x = malloc(most * sizeof *x), *y = malloc(most * sizeof *y);
  CHECK(x && y);
  if (!x || !y)
    return;
  uint64_t r = 88172645463325252ULL;
  for (size_t i = 0; i < most; i++) {
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    x[i] = (float)((double)(r >> 11) / 9007199254740992.0 - 0.5);
    y[i] = (i % 97 == 0) ? NAN : x[i] + 1e-4f;
  }
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
    kernels_over(x, y, sizes[k]);
  x[5] = NAN; /* a NaN early: the kernels' early stops */
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
    kernels_over(x, x, sizes[k]);
  free(x);
  free(y);
}

int main(void) {
  TEST_RUN(test_upper_state);
  return TEST_REPORT("test_simd_state");
}
