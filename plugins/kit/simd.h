/* simd.h - the rule kit's choice of vector code (inside the kit, and
 * for tests). */
#ifndef RK_SIMD_H
#define RK_SIMD_H

#include <stdbool.h>

/* false keeps rk_allclose, the per-unit activity's row pass and
 * rk_tensor_quantiles' bracket pass to the x86-64 baseline instructions on
 * a machine with AVX2 (the answers are the same either way), so that a
 * test can compare both.  Set it before other threads compare tensors. */
void rk_allow_avx2(bool on);

/* true when the kit's AVX2 kernels may run: x86-64, a CPU with AVX2, and
 * rk_allow_avx2 not turned off. */
bool rk_use_avx2(void);

#endif
