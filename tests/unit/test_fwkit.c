/* test_fwkit.c - the NumPy-exact statistics and the ordered map of
 * plugins/profkit/fwkit.h (used by the framework-metric profiler rules):
 * expected values were computed with NumPy 1.24 and must match bit for
 * bit, since rule reports are compared with the reference exactly.  (The
 * rule kit's quantiles are tested by test_rulekit_quantiles.c, its value
 * helpers by test_rulekit_values.c.) */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../plugins/profkit/fwkit.h"
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
int main(void) {
  TEST_RUN(test_mean_std);
  TEST_RUN(test_quantiles);
  TEST_RUN(test_histogram);
  TEST_RUN(test_round);
  TEST_RUN(test_map);
  return TEST_REPORT("test_fwkit");
}
