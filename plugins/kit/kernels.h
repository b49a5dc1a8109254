/* kernels.h - helpers of the rule kit that only some built-in rules use
 * (class indices and their rounding; the per-unit activity of DeadRelu and
 * SaturatedActivation; CheckInputImages' channel sums).  Not installed:
 * third-party plugins see
 * rulekit.h's general helpers only.  The code is in
 * rulekit.c and kernels.c, linked into the built-in plugins with the rest
 * of the kit. */
#ifndef RK_KERNELS_H
#define RK_KERNELS_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smrules/rulekit.h"

/* rk_round_half_away inline, for loops over every label: round()'s result
 * bit for bit (halves away from zero, the sign of a zero kept; NaN,
 * infinities and |v| >= 2^52, all integers already, returned as they are)
 * without a call into libm per element, which the x86-64 baseline makes. */
static inline double rk_round_half_away_inline(double v) {
  if (!(fabs(v) < 0x1p52))
    return v;
  double t = (double)(int64_t)v; /* toward zero */
  double f = v - t;              /* exact: |v| < 2^52 */
  t += f >= 0.5 ? 1.0 : f <= -0.5 ? -1.0 : 0.0;
  return copysign(t, v);
}

/* Class indices: argmax over the last axis when rank >= 2 and the last
 * dimension > 1 (NumPy's argmax: first maximum, first NaN wins), else the
 * flattened values.  Returns the malloc'ed array (NULL when empty) and its
 * length in *n. */
double *rk_argmax_last_axis(const smrules_tensor *t, size_t *n);

/* Per-unit activity (docs/rules/DeadRelu.md,
 * docs/rules/SaturatedActivation.md): axis 0 is the batch (B = shape[0]; rank
 * <= 1: B = 1) and every remaining index a unit (U = count / B).  A unit is
 * inactive when 100 * (samples for which `active` holds) / B <
 * threshold_inactivity.  Sets *percent to 100 * inactive units / U.  Returns 0,
 * or -1 when the tensor has no elements (or a batch of 2^31 or more). */
int rk_inactive_units(const smrules_tensor *t,
                      bool (*active)(double x, const void *arg),
                      const void *arg, double threshold_inactivity,
                      double *percent);
/* The same for the two tests the built-in rules make, in a pass the
 * compiler vectorises for float32 (no call per element): active when
 * x > lo (DeadRelu: lo = 0), or when lo < x < hi (SaturatedActivation).
 * The results are those of rk_inactive_units with that test. */
int rk_inactive_units_above(const smrules_tensor *t, double lo,
                            double threshold_inactivity, double *percent);
int rk_inactive_units_between(const smrules_tensor *t, double lo, double hi,
                              double threshold_inactivity, double *percent);

/* CheckInputImages' per-channel sums (docs/rules/CheckInputImages.md):
 * axis ch (1 <= ch < ndim, shape[ch] > 0) holds the channels; every block
 * of `inner` contiguous elements (the axes after ch) belongs to one
 * channel and one outer index (the axes before it).  Each block is summed
 * from 0 in element order and added to sum[channel], blocks in order of
 * their outer index: the order the reported means' bits depend on.  Sets
 * *outer and *inner. */
void rk_channel_sums(const smrules_tensor *t, int ch, double *sum,
                     int64_t *outer, int64_t *inner);

#endif
