/* test_update_norm.c - WeightUpdateRatio's update norms
 * (plugins/tensor/weight_update_ratio/update_norm.h): computed several at
 * once, with vector blocks, each must have the bits of adding its
 * differences one by one with ssq_add, on every kind of block (zero,
 * squares, element by element), with and without the AVX2 kernel. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../plugins/tensor/weight_update_ratio/update_norm.h"
#include "unit.h"

/* The definition: every difference added in element order. */
static double one_by_one(const float *a, const float *b, int64_t n) {
  scaled_ssq s = SCALED_SSQ_INIT;
  double decided;
  for (int64_t i = 0; i < n; i++)
    if (!ssq_add(&s, fabs((double)a[i] - (double)b[i]), &decided))
      return decided;
  return ssq_norm(&s);
}

static uint64_t rng = 88172645463325252ull;

static double uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

/* How tensor k's update looks. */
enum { MOVES, FROZEN, ONE_MOVES, GROWS, SPECIAL, KINDS };

static void fill(float *a, float *b, int64_t n, int kind) {
  for (int64_t i = 0; i < n; i++) {
    a[i] = (float)(uniform() - 0.5);
    b[i] = kind == MOVES || kind == GROWS || kind == SPECIAL
               ? a[i] + (float)((uniform() - 0.5) * 1e-3)
               : a[i];
  }
  if (kind == ONE_MOVES && n > 0)
    b[0] += 1e-6f;   /* a new scale once, then zero blocks */
  if (kind == GROWS) /* a new largest difference now and then */
    for (int64_t i = 37; i < n; i += 1000)
      b[i] = a[i] + (float)(1e-3 * (double)(i + 1));
  if (kind == SPECIAL && n > 0) {
    static const float odd[] = {NAN, INFINITY, -INFINITY, -0.0f, 3e38f, 1e-45f};
    int64_t at = (int64_t)(uniform() * (double)n);
    (uniform() < 0.5 ? a : b)[at] = odd[(int)(uniform() * 6)];
  }
}

static bool same_bits(double x, double y) {
  return memcmp(&x, &y, sizeof x) == 0;
}

/* `count` pairs of the given lengths and kinds, both kernels. */
static void check_pairs(const int64_t *len, const int *kind, size_t count) {
  float *a[16], *b[16];
  update_pair p[16];
  double want[16], got[16];
  for (size_t k = 0; k < count; k++) {
    a[k] = malloc((size_t)(len[k] ? len[k] : 1) * sizeof(float));
    b[k] = malloc((size_t)(len[k] ? len[k] : 1) * sizeof(float));
    fill(a[k], b[k], len[k], kind[k]);
    p[k] = (update_pair){(void *)a[k], (void *)b[k], len[k]};
    want[k] = one_by_one(a[k], b[k], len[k]);
  }
  for (int avx2 = 0; avx2 < 2; avx2++) {
    update_norm_allow_avx2(avx2);
    update_norms_f32(p, count, got);
    for (size_t k = 0; k < count; k++)
      if (!same_bits(got[k], want[k])) {
        fprintf(stderr,
                "pair %zu of %zu (n %lld, kind %d, avx2 %d): %.17g, "
                "expected %.17g\n",
                k, count, (long long)len[k], kind[k], avx2, got[k], want[k]);
        CHECK(0);
      }
  }
  update_norm_allow_avx2(true);
  for (size_t k = 0; k < count; k++) {
    free(a[k]);
    free(b[k]);
  }
}

/* One pair of each kind and length: the lone lane. */
static void test_alone(void) {
  static const int64_t lens[] = {0, 1, 31, 32, 33, 64, 1000, 100003};
  for (size_t l = 0; l < sizeof lens / sizeof *lens; l++)
    for (int kind = 0; kind < KINDS; kind++)
      for (int rep = 0; rep < (kind == SPECIAL ? 20 : 1); rep++)
        check_pairs(&lens[l], &kind, 1);
}

/* Up to 16 pairs of mixed lengths and kinds: lanes finish at different
 * times and take the next pair. */
static void test_together(void) {
  for (int round = 0; round < 300; round++) {
    size_t count = 2 + (size_t)(uniform() * 15);
    int64_t len[16];
    int kind[16];
    for (size_t k = 0; k < count; k++) {
      len[k] = uniform() < 0.2 ? (int64_t)(uniform() * 40)
                               : (int64_t)(uniform() * 5000);
      kind[k] = (int)(uniform() * KINDS);
    }
    check_pairs(len, kind, count);
  }
}

/* Pairs large enough to run alone (ALONE_MIN, 65536 elements, and more,
 * lengths not a multiple of a block) mixed with small ones that share the
 * lanes. */
static void test_large_and_small(void) {
  static const int64_t large[] = {65535, 65536, 65537, 70001, 131072, 200003};
  for (int round = 0; round < 24; round++) {
    size_t count = 1 + (size_t)(uniform() * 6);
    int64_t len[16];
    int kind[16];
    for (size_t k = 0; k < count; k++) {
      len[k] = uniform() < 0.5 ? large[(int)(uniform() * 6)]
                               : (int64_t)(uniform() * 3000);
      kind[k] = (int)(uniform() * KINDS);
    }
    check_pairs(len, kind, count);
  }
  /* and one large enough for the prefetches (PREFETCH_MIN, 2^22) beside a
   * small one */
  int64_t len[2] = {((int64_t)1 << 22) + 37, 999};
  for (int kind = 0; kind < KINDS; kind++) {
    int kinds[2] = {kind, MOVES};
    check_pairs(len, kinds, 2);
  }
}

/* What the decided cases give, and where the first one wins. */
static void test_decided(void) {
  float a[200] = {0}, b[200] = {0};
  update_pair p = {(void *)a, (void *)b, 200};
  double got;
  a[5] = 1;
  a[100] = INFINITY;
  a[150] = NAN;
  update_norms_f32(&p, 1, &got);
  CHECK(isinf(got) && got > 0); /* the infinity comes first */
  a[50] = NAN;
  update_norms_f32(&p, 1, &got);
  CHECK(isnan(got));
  memset(a, 0, sizeof a);
  a[7] = -0.0f; /* -0 - +0 is no update */
  update_norms_f32(&p, 1, &got);
  CHECK(same_bits(got, 0.0));
  a[3] = 3e38f; /* no overflow: scaled */
  a[190] = -3e38f;
  b[190] = 0;
  update_norms_f32(&p, 1, &got);
  CHECK(same_bits(got, one_by_one(a, b, 200)) && isfinite(got));
  /* an infinity unchanged between the steps: inf - inf is NaN, which
   * decides the norm, also in a block whose floats are all equal (with
   * and without AVX2, alone and beside another pair) */
  memcpy(a, b, sizeof a);
  a[70] = b[70] = INFINITY;
  a[140] = b[140] = -INFINITY;
  float c[64] = {0}, d[64] = {0};
  update_pair two[2] = {p, {(void *)c, (void *)d, 64}};
  for (int avx2 = 0; avx2 < 2; avx2++) {
    double both[2];
    update_norm_allow_avx2(avx2);
    update_norms_f32(&p, 1, &got);
    CHECK(isnan(got) && isnan(one_by_one(a, b, 200)));
    update_norms_f32(two, 2, both);
    CHECK(isnan(both[0]) && same_bits(both[1], 0.0));
  }
  update_norm_allow_avx2(true);
}

/* Squares exactly halfway between two doubles of the sum's binade: the
 * sum rounds to its even neighbour, which a block cannot know without the
 * sum before it, so such blocks must be added one by one.  Differences of
 * 1 and 1 make the sum 2 (ulp 2^-51) with scale 1; then 2^-26 squares to
 * 2^-52, half an ulp (a tie), and 3 * 2^-27 to 1.125 ulps, which rounds
 * to one ulp and flips the sum's last bit, so ties round both ways.
 * Another stretch climbs through binades (squares of 1): the sum crosses
 * 4, 8, 16, ... inside blocks. */
static void test_ties(void) {
  enum { N = 20000 };
  static float a[N], b[N];
  static const float small[] = {0x1p-26f, 0x3p-27f, 0x1p-26f, 0};
  for (int round = 0; round < 20; round++) {
    for (int i = 0; i < N; i++) {
      b[i] = 0;
      a[i] = i < 2                    ? 1.0f
             : round % 2 && i > N / 2 ? (uniform() < 0.3 ? 1.0f : 0x1p-26f)
                                      : small[(int)(uniform() * 4)];
    }
    int64_t len = N - (int64_t)(uniform() * 64);
    update_pair p[4];
    double want = one_by_one(a, b, len), got[4];
    for (int k = 0; k < 4; k++) { /* the lone lane, and four together */
      p[k] = (update_pair){(void *)a, (void *)b, len};
    }
    for (int avx2 = 0; avx2 < 2; avx2++) {
      update_norm_allow_avx2(avx2);
      update_norms_f32(p, 1, got);
      CHECK(same_bits(got[0], want));
      update_norms_f32(p, 4, got);
      for (int k = 0; k < 4; k++)
        CHECK(same_bits(got[k], want));
    }
    update_norm_allow_avx2(true);
  }
}

int main(void) {
  TEST_RUN(test_alone);
  TEST_RUN(test_ties);
  TEST_RUN(test_together);
  TEST_RUN(test_large_and_small);
  TEST_RUN(test_decided);
  return TEST_REPORT("test_update_norm");
}
