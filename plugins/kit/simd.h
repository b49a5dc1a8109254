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

/* For tests: makes rk_tensor_quantiles' sampled brackets miss their ranks
 * (RK_BRACKET_NO_MARGIN: each bracket one sample wide) or its scratch
 * overflow (RK_BRACKET_NO_ROOM), so that its fallback to the radix
 * selection runs; 0 restores them.  The answers are the same. */
enum { RK_BRACKET_NO_MARGIN = 1, RK_BRACKET_NO_ROOM = 2 };
void rk_squeeze_bracket(int how);

#endif
