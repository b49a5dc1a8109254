/* update_norm.h - the L2 norm of weight updates ||a - b||_2,
 * WeightUpdateRatio's inner loop.
 *
 * The norm is scaled, so that large weights do not overflow: the running
 * sum of squares of |a_i - b_i| / scale, rescaled whenever a larger
 * difference raises the scale.  Every difference is added in element
 * order: the reported ratios' bits depend on that order
 * (docs/rules/WeightUpdateRatio.md), so a norm is one chain of dependent
 * adds.  update_norms_f32 gives the bits of that chain without waiting on
 * it: within a binade of the sum, what each add adds does not depend on
 * the sum (update_norm.c), so a block's adds are independent; several
 * norms computed together also run side by side. */
#ifndef WUR_UPDATE_NORM_H
#define WUR_UPDATE_NORM_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct scaled_ssq {
  double scale, ssq;
} scaled_ssq;

#define SCALED_SSQ_INIT                                                        \
  { 0, 1 }

/* Adds one difference d >= 0 (or NaN); false once the norm is decided:
 * *decided is NaN, or inf. */
static inline bool ssq_add(scaled_ssq *s, double d, double *decided) {
  if (isnan(d)) {
    *decided = NAN;
    return false;
  }
  if (d == 0)
    return true;
  if (isinf(d)) {
    *decided = INFINITY;
    return false;
  }
  if (s->scale < d) {
    s->ssq = 1 + s->ssq * (s->scale / d) * (s->scale / d);
    s->scale = d;
  } else {
    s->ssq += (d / s->scale) * (d / s->scale);
  }
  return true;
}

static inline double ssq_norm(const scaled_ssq *s) {
  return s->scale * sqrt(s->ssq);
}

/* Two float32 tensors of n elements each, little-endian, read in place
 * (any alignment). */
typedef struct update_pair {
  const unsigned char *a, *b;
  int64_t n;
} update_pair;

/* out[i] = ||pairs[i].a - pairs[i].b||_2, each with the same bits as
 * adding its differences one by one with ssq_add. */
void update_norms_f32(const update_pair *pairs, size_t n, double *out);

/* For tests: false makes update_norms_f32 skip its AVX2 kernel (the
 * results are the same bits either way). */
void update_norm_allow_avx2(bool on);

#endif
