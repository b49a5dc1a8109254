/* simd.h - the rule kit's choice of vector code (tests only). */
#ifndef RK_SIMD_H
#define RK_SIMD_H

#include <stdbool.h>

/* false keeps rk_allclose and the per-unit activity's row pass to the
 * x86-64 baseline instructions on a machine with AVX2 (the answers are the
 * same either way), so that a test can compare both.  Set it before other
 * threads compare tensors. */
void rk_allow_avx2(bool on);

#endif
