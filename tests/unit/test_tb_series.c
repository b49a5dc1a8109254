/* test_tb_series.c - a TensorBoard tag's values by step (trial/tb_series.h)
 * against a plain reference: every put (in order, out of order, a step
 * logged again) leaves the series sorted by step with the last value per
 * step, whether its steps and values are still narrow (uint32, float32)
 * or had to widen (a negative or huge step, a double that is not a float,
 * a widening in the middle of out-of-order puts). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "trial/tb_series.h"
#include "unit.h"

#define MAXREF 4096

typedef struct ref {
  int64_t step[MAXREF];
  double value[MAXREF];
  size_t n;
} ref;

static void ref_put(ref *r, int64_t step, double v) {
  size_t i = 0;
  while (i < r->n && r->step[i] < step)
    i++;
  if (i < r->n && r->step[i] == step) {
    r->value[i] = v;
    return;
  }
  memmove(r->step + i + 1, r->step + i, (r->n - i) * sizeof *r->step);
  memmove(r->value + i + 1, r->value + i, (r->n - i) * sizeof *r->value);
  r->step[i] = step;
  r->value[i] = v;
  r->n++;
}

/* The series equals the reference; values compare exactly (a narrow
 * series holds only values a float represents exactly). */
static void same(const tb_series *s, const ref *r) {
  CHECK_EQ_INT(s->n, r->n);
  for (size_t i = 0; i < s->n && i < r->n; i++) {
    if (tb_series_step(s, i) != r->step[i] ||
        !(tb_series_value(s, i) == r->value[i] ||
          (isnan(tb_series_value(s, i)) && isnan(r->value[i])))) {
      fprintf(stderr, "at %zu: (%lld, %.17g), expected (%lld, %.17g)\n", i,
              (long long)tb_series_step(s, i), tb_series_value(s, i),
              (long long)r->step[i], r->value[i]);
      CHECK(0);
      return;
    }
    bool found;
    CHECK_EQ_INT(tb_series_find(s, r->step[i], &found), i);
    CHECK(found);
  }
}

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static void test_in_order_stays_narrow(void) {
  tb_series s = {0};
  static ref r;
  r.n = 0;
  for (int64_t k = 0; k < 3000; k++) {
    float x = (float)k / 7.0f;
    tb_series_put(&s, k * 3, x);
    ref_put(&r, k * 3, x);
  }
  tb_series_put(&s, 300, NAN); /* logged again: the last value wins */
  ref_put(&r, 300, NAN);
  same(&s, &r);
  CHECK(!s.wide_steps);
  CHECK(!s.wide_values);
  bool found;
  CHECK_EQ_INT(tb_series_find(&s, 4, &found), 2); /* between 3 and 6 */
  CHECK(!found);
  tb_series_free(&s);
}

static void test_random_with_widening(void) {
  for (int round = 0; round < 40; round++) {
    tb_series s = {0};
    static ref r;
    r.n = 0;
    int widen_step_at = (int)(next() % 600),
        widen_value_at = (int)(next() % 600);
    for (int k = 0; k < 600; k++) {
      int64_t step = (int64_t)(next() % 500);
      double v = (double)(float)((double)(next() % 1000) / 8.0);
      if (k == widen_step_at)
        step = round % 2 ? -5 - round : (int64_t)UINT32_MAX + 1 + round;
      if (k == widen_value_at)
        v = (double)round + 0.1; /* not a float32 */
      tb_series_put(&s, step, v);
      ref_put(&r, step, v);
    }
    same(&s, &r);
    CHECK(s.wide_steps);
    CHECK(s.wide_values);
    tb_series_free(&s);
  }
}

static void test_boundary_steps(void) {
  tb_series s = {0};
  static ref r;
  r.n = 0;
  int64_t steps[] = {0, (int64_t)UINT32_MAX, 7, 1};
  for (size_t i = 0; i < 4; i++) {
    tb_series_put(&s, steps[i], (double)i);
    ref_put(&r, steps[i], (double)i);
  }
  same(&s, &r);
  CHECK(!s.wide_steps); /* 2^32 - 1 still fits */
  tb_series_put(&s, INT64_MAX, 1e300);
  ref_put(&r, INT64_MAX, 1e300);
  same(&s, &r);
  CHECK(s.wide_steps && s.wide_values);
  tb_series_free(&s);
}

int main(void) {
  TEST_RUN(test_in_order_stays_narrow);
  TEST_RUN(test_random_with_widening);
  TEST_RUN(test_boundary_steps);
  return TEST_REPORT("test_tb_series");
}
