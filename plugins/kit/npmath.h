/* npmath.h - the NumPy computations whose last bits the reference's
 * results depend on, in one place for every plugin: pairwise summation
 * (np.sum / np.mean of float64) and np.quantile with linear
 * interpolation (NumPy >= 1.22). */
#ifndef SMR_NPMATH_H
#define SMR_NPMATH_H

#include <stddef.h>

/* np.add.reduce of a contiguous float64 array: blocks of 128 summed in 8
 * lanes, halves summed recursively. */
double np_pairwise_sum(const double *a, size_t n);

/* np.quantile(s, q) of sorted s without NaN (NaN when n == 0): virtual
 * index (n - 1) * q clamped to [0, n - 1], then NumPy's lerp, which
 * computes from the upper neighbour for fractions >= 0.5. */
double np_quantile_sorted(const double *s, size_t n, double q);

/* The same in two parts, for callers that find the two neighbours
 * without sorting: their sorted positions lo <= hi (n > 0) and the
 * fraction, then the lerp of their values a = s[lo], b = s[hi]. */
typedef struct np_qpos {
  size_t lo, hi;
  double t;
} np_qpos;
np_qpos np_quantile_pos(size_t n, double q);
double np_quantile_lerp(np_qpos p, double a, double b);

#endif
