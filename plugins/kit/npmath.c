/* npmath.c - see npmath.h. */
#include "npmath.h"

#include <math.h>

double np_pairwise_sum(const double *a, size_t n) {
  if (n < 8) {
    double r = 0.;
    for (size_t i = 0; i < n; i++)
      r += a[i];
    return r;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; j++)
      r[j] = a[j];
    size_t i;
    for (i = 8; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; j++)
        r[j] += a[i + (size_t)j];
    double res =
        ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++)
      res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return np_pairwise_sum(a, n2) + np_pairwise_sum(a + n2, n - n2);
}

np_qpos np_quantile_pos(size_t n, double q) {
  double vi = (double)(n - 1) * q, prev;
  np_qpos p;
  if (vi >= (double)(n - 1)) {
    p.lo = p.hi = n - 1;
    prev = -1; /* NumPy takes the last element; the fraction is unused */
  } else if (vi < 0) {
    p.lo = p.hi = 0;
    prev = 0;
  } else {
    prev = floor(vi);
    p.lo = (size_t)prev;
    p.hi = p.lo + 1;
  }
  p.t = vi - prev;
  return p;
}

double np_quantile_lerp(np_qpos p, double a, double b) {
  double d = b - a;
  if (p.lo == p.hi)
    return a;
  return p.t >= 0.5 ? b - d * (1 - p.t) : a + d * p.t;
}

double np_quantile_sorted(const double *s, size_t n, double q) {
  if (n == 0)
    return NAN;
  np_qpos p = np_quantile_pos(n, q);
  return np_quantile_lerp(p, s[p.lo], s[p.hi]);
}
