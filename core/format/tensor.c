/* tensor.c - element widening, reductions, summary statistics
 * and the tensor fingerprint (docs/formats.md#data-types,
 * docs/formats.md#reductions, docs/rule-semantics.md#numeric-conventions).
 *
 * Hot loops are generated per element kind by macros, so the dtype is
 * dispatched once per call, never per element.  Sums use 8 independent
 * double lanes inside blocks of SUM_BLOCK elements (so the CPU can pipeline
 * them, and each lane only ever sums SUM_BLOCK/8 terms) and combine the lane
 * sums of every block with Neumaier compensation, so the rounding error is
 * that of a 256-term sum however long the tensor is. */
#include "format/tensor.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/sha256.h"

void smr_tensor_release(smr_tensor *t) {
  if (!t)
    return;
  if (t->release_)
    t->release_(t->owner_);
  memset(t, 0, sizeof *t);
}

/* ---- element loads --------------------------------------------------- */

/* Element bytes are little-endian and possibly unaligned (they point into
 * decoded protobuf buffers); memcpy compiles to a plain load. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define FROM_LE16(v) __builtin_bswap16(v)
#define FROM_LE32(v) __builtin_bswap32(v)
#define FROM_LE64(v) __builtin_bswap64(v)
#else
#define FROM_LE16(v) (v)
#define FROM_LE32(v) (v)
#define FROM_LE64(v) (v)
#endif

static inline uint16_t load_u16(const uint8_t *p) {
  uint16_t v;
  memcpy(&v, p, sizeof v);
  return FROM_LE16(v);
}

static inline uint32_t load_u32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return FROM_LE32(v);
}

static inline uint64_t load_u64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return FROM_LE64(v);
}

static inline float float_from_bits(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static inline double double_from_bits(uint64_t bits) {
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

/* IEEE binary16 -> binary32, exactly: rebias normal numbers, keep inf/NaN
 * (payload included), scale subnormals (mantissa * 2^-24 is exact). */
static inline double half_to_double(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t magnitude = h & 0x7fffu;
  if (magnitude >= 0x7c00u)
    return float_from_bits(sign | 0x7f800000u | (magnitude & 0x3ffu) << 13);
  if (magnitude >= 0x0400u)
    return float_from_bits(sign | (magnitude + ((127u - 15u) << 10)) << 13);
  double v = (double)magnitude * 0x1p-24;
  return sign ? -v : v;
}

/* Element i of each kind as a double.  Complex kinds yield the modulus:
 * every reduction allowed on them (abs, norms) works on |z|. */
static inline double elem_f32(const uint8_t *p, int64_t i) {
  return float_from_bits(load_u32(p + 4 * i));
}
static inline double elem_f64(const uint8_t *p, int64_t i) {
  return double_from_bits(load_u64(p + 8 * i));
}
static inline double elem_f16(const uint8_t *p, int64_t i) {
  return half_to_double(load_u16(p + 2 * i));
}
static inline double elem_bf16(const uint8_t *p, int64_t i) {
  return float_from_bits((uint32_t)load_u16(p + 2 * i) << 16);
}
static inline double elem_i8(const uint8_t *p, int64_t i) {
  return (int8_t)p[i];
}
static inline double elem_u8(const uint8_t *p, int64_t i) {
  return p[i];
}
static inline double elem_i16(const uint8_t *p, int64_t i) {
  return (int16_t)load_u16(p + 2 * i);
}
static inline double elem_u16(const uint8_t *p, int64_t i) {
  return load_u16(p + 2 * i);
}
static inline double elem_i32(const uint8_t *p, int64_t i) {
  return (int32_t)load_u32(p + 4 * i);
}
static inline double elem_u32(const uint8_t *p, int64_t i) {
  return load_u32(p + 4 * i);
}
static inline double elem_i64(const uint8_t *p, int64_t i) {
  return (double)(int64_t)load_u64(p + 8 * i);
}
static inline double elem_u64(const uint8_t *p, int64_t i) {
  return (double)load_u64(p + 8 * i);
}
/* Any nonzero byte is true, as NumPy reads a bool_ byte. */
static inline double elem_b8(const uint8_t *p, int64_t i) {
  return p[i] != 0;
}

static inline void parts_c64(const uint8_t *p, int64_t i, double *re,
                             double *im) {
  *re = elem_f32(p, 2 * i);
  *im = elem_f32(p, 2 * i + 1);
}
static inline void parts_c128(const uint8_t *p, int64_t i, double *re,
                              double *im) {
  *re = elem_f64(p, 2 * i);
  *im = elem_f64(p, 2 * i + 1);
}
/* Squares of float32 parts are exact in double and cannot overflow, so the
 * direct formula is as good as hypot and much faster. */
static inline double elem_c64(const uint8_t *p, int64_t i) {
  double re, im;
  parts_c64(p, i, &re, &im);
  return sqrt(re * re + im * im);
}
static inline double elem_c128(const uint8_t *p, int64_t i) {
  double re, im;
  parts_c128(p, i, &re, &im);
  return hypot(re, im);
}

/* ---- compensated sums ------------------------------------------------ */

typedef struct comp_sum {
  double s, c; /* running sum and its accumulated rounding error */
} comp_sum;

/* Neumaier's variant of Kahan summation. */
static inline void comp_add(comp_sum *k, double x) {
  double t = k->s + x;
  if (fabs(k->s) >= fabs(x))
    k->c += (k->s - t) + x;
  else
    k->c += (x - t) + k->s;
  k->s = t;
}

/* Once the plain sum is inf or NaN it stays so and the correction term is
 * meaningless (inf - inf); the plain sum already has IEEE semantics. */
static inline double comp_result(const comp_sum *k) {
  return isfinite(k->s) ? k->s + k->c : k->s;
}

/* ---- per-element transforms applied before a sum/scan ---------------- */

static inline double tr_value(double x, double m) {
  (void)m;
  return x;
}
static inline double tr_abs(double x, double m) {
  (void)m;
  return fabs(x);
}
static inline double tr_square(double x, double m) {
  (void)m;
  return x * x;
}
static inline double tr_dev2(double x, double m) {
  double d = x - m;
  return d * d;
}
static inline double tr_adev2(double x, double m) {
  double d = fabs(x) - m;
  return d * d;
}

static inline double pick_min(double x, double best) {
  return x < best ? x : best;
}
static inline double pick_max(double x, double best) {
  return x > best ? x : best;
}

/* ---- kernels, generated per element kind ----------------------------- */

#define SUM_BLOCK 2048

/* Σ tr(x_i, m) over n elements. */
#define DEFINE_SUM(K, T)                                                       \
  static double sum_##K##_##T(const uint8_t *p, int64_t n, double m) {         \
    comp_sum total = {0.0, 0.0};                                               \
    for (int64_t start = 0; start < n; start += SUM_BLOCK) {                   \
      int64_t end = n - start < SUM_BLOCK ? n : start + SUM_BLOCK;             \
      double a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;   \
      int64_t i = start;                                                       \
      for (; i + 8 <= end; i += 8) {                                           \
        a0 += tr_##T(elem_##K(p, i), m);                                       \
        a1 += tr_##T(elem_##K(p, i + 1), m);                                   \
        a2 += tr_##T(elem_##K(p, i + 2), m);                                   \
        a3 += tr_##T(elem_##K(p, i + 3), m);                                   \
        a4 += tr_##T(elem_##K(p, i + 4), m);                                   \
        a5 += tr_##T(elem_##K(p, i + 5), m);                                   \
        a6 += tr_##T(elem_##K(p, i + 6), m);                                   \
        a7 += tr_##T(elem_##K(p, i + 7), m);                                   \
      }                                                                        \
      for (; i < end; i++)                                                     \
        a0 += tr_##T(elem_##K(p, i), m);                                       \
      comp_add(&total, a0);                                                    \
      comp_add(&total, a1);                                                    \
      comp_add(&total, a2);                                                    \
      comp_add(&total, a3);                                                    \
      comp_add(&total, a4);                                                    \
      comp_add(&total, a5);                                                    \
      comp_add(&total, a6);                                                    \
      comp_add(&total, a7);                                                    \
    }                                                                          \
    return comp_result(&total);                                                \
  }

/* min or max (PICK) of tr(x_i) over n >= 1 elements; NaN if any element is
 * NaN (comparisons skip NaN, so it is detected separately). */
#define DEFINE_SCAN(K, T, NAME, PICK)                                          \
  static double NAME##_##K##_##T(const uint8_t *p, int64_t n) {                \
    double b0 = tr_##T(elem_##K(p, 0), 0.0), b1 = b0, b2 = b0, b3 = b0;        \
    int nan = b0 != b0;                                                        \
    int64_t i = 1;                                                             \
    for (; i + 4 <= n; i += 4) {                                               \
      double x0 = tr_##T(elem_##K(p, i), 0.0);                                 \
      double x1 = tr_##T(elem_##K(p, i + 1), 0.0);                             \
      double x2 = tr_##T(elem_##K(p, i + 2), 0.0);                             \
      double x3 = tr_##T(elem_##K(p, i + 3), 0.0);                             \
      nan |= (x0 != x0) | (x1 != x1) | (x2 != x2) | (x3 != x3);                \
      b0 = PICK(x0, b0);                                                       \
      b1 = PICK(x1, b1);                                                       \
      b2 = PICK(x2, b2);                                                       \
      b3 = PICK(x3, b3);                                                       \
    }                                                                          \
    for (; i < n; i++) {                                                       \
      double x = tr_##T(elem_##K(p, i), 0.0);                                  \
      nan |= x != x;                                                           \
      b0 = PICK(x, b0);                                                        \
    }                                                                          \
    return nan ? NAN : PICK(PICK(b0, b1), PICK(b2, b3));                       \
  }

/* Product in element order, like NumPy's multiply.reduce. */
#define DEFINE_PROD(K, T)                                                      \
  static double prod_##K##_##T(const uint8_t *p, int64_t n) {                  \
    double r = 1.0;                                                            \
    for (int64_t i = 0; i < n; i++)                                            \
      r *= tr_##T(elem_##K(p, i), 0.0);                                        \
    return r;                                                                  \
  }

/* ---- summary statistics ---------------------------------------------- */

/* Accumulators of one block. */
typedef struct stats_lane {
  double sum, l1, l2, min, max, linf;
  int64_t nan, pinf, ninf, zeros;
} stats_lane;

/* Totals over the whole tensor. */
typedef struct stats_acc {
  comp_sum sum, l1, l2;
  double min, max, linf;
  int64_t nan, pinf, ninf, zeros;
} stats_acc;

#define STATS_BLOCK 1024

static inline void lane_init(stats_lane *l) {
  *l = (stats_lane){.min = INFINITY, .max = -INFINITY};
}

/* Finite values feed the sums and extremes; the rest are only counted. */
static inline void lane_add_real(stats_lane *l, double x) {
  bool finite = isfinite(x);
  double f = finite ? x : 0.0;
  l->sum += f;
  l->l1 += fabs(f);
  l->l2 += f * f;
  l->min = finite && x < l->min ? x : l->min;
  l->max = finite && x > l->max ? x : l->max;
  l->linf = fabs(f) > l->linf ? fabs(f) : l->linf;
  l->nan += x != x;
  l->pinf += x == INFINITY;
  l->ninf += x == -INFINITY;
  l->zeros += x == 0.0;
}

/* Complex: finite when both parts are; NaN when either part is; otherwise
 * +inf/-inf by the sign of the infinite part (the real one if both are).
 * min/max/sum use the real part, l1/l2/linf the modulus `mod`. */
static inline void lane_add_complex(stats_lane *l, double re, double im,
                                    double mod) {
  bool finite = isfinite(re) && isfinite(im);
  bool nan = re != re || im != im;
  double inf_part = isinf(re) ? re : im;
  double f = finite ? re : 0.0, fm = finite ? mod : 0.0;
  l->sum += f;
  l->l1 += fm;
  l->l2 += finite ? re * re + im * im : 0.0;
  l->min = finite && re < l->min ? re : l->min;
  l->max = finite && re > l->max ? re : l->max;
  l->linf = fm > l->linf ? fm : l->linf;
  l->nan += nan;
  l->pinf += !finite && !nan && inf_part > 0;
  l->ninf += !finite && !nan && inf_part < 0;
  l->zeros += re == 0.0 && im == 0.0;
}

static void lane_flush(const stats_lane *l, stats_acc *a) {
  comp_add(&a->sum, l->sum);
  comp_add(&a->l1, l->l1);
  comp_add(&a->l2, l->l2);
  a->min = l->min < a->min ? l->min : a->min;
  a->max = l->max > a->max ? l->max : a->max;
  a->linf = l->linf > a->linf ? l->linf : a->linf;
  a->nan += l->nan;
  a->pinf += l->pinf;
  a->ninf += l->ninf;
  a->zeros += l->zeros;
}

#define ADD_REAL(K, lane, i) lane_add_real(lane, elem_##K(p, i))
#define ADD_COMPLEX(K, lane, i)                                                \
  do {                                                                         \
    double re_, im_;                                                           \
    parts_##K(p, i, &re_, &im_);                                               \
    lane_add_complex(lane, re_, im_, elem_##K(p, i));                          \
  } while (0)

/* One element of a finite block, in scalar code (an odd block's last). */
#define FINITE_STEP(K, l, i)                                                   \
  do {                                                                         \
    double x_ = elem_##K(p, i);                                                \
    (l).sum += x_;                                                             \
    (l).l1 += fabs(x_);                                                        \
    (l).l2 += x_ * x_;                                                         \
    (l).min = pick_min(x_, (l).min);                                           \
    (l).max = pick_max(x_, (l).max);                                           \
    (l).zeros += x_ == 0.0;                                                    \
  } while (0)

/* max |x| from the extremes of finite values; 0 for a lane that saw none. */
static inline double extremes_to_linf(double min, double max) {
  return min <= max ? fmax(fabs(min), fabs(max)) : 0.0;
}

/* The two lanes of a finite block side by side in one vector: lane 0
 * takes the block's even elements, lane 1 its odd ones, exactly as two
 * scalar lanes would (every operation is element-wise, so the bits are
 * theirs).  This uses the GCC/Clang vector extension because the two
 * lanes' chains of adds are otherwise compiled to scalar code: on x86-64
 * one SSE2 instruction now does both lanes' work, and where there is no
 * vector unit the compiler splits it back into scalars. */
typedef double v2d __attribute__((vector_size(16)));
typedef long long v2i __attribute__((vector_size(16)));

#if defined(__SSE2__)
/* MINPD and MAXPD return their second operand unless the first is
 * strictly smaller (larger): exactly pick_min/pick_max, signed zeros
 * included, in one instruction where the portable form below takes four
 * and needs registers the two interleaved blocks cannot spare. */
#include <emmintrin.h>
static inline v2d v2_min(v2d x, v2d best) {
  return (v2d)_mm_min_pd((__m128d)x, (__m128d)best);
}
static inline v2d v2_max(v2d x, v2d best) {
  return (v2d)_mm_max_pd((__m128d)x, (__m128d)best);
}
#else
static inline v2d v2_pick(v2i take_x, v2d x, v2d keep) {
  return (v2d)(((v2i)x & take_x) | ((v2i)keep & ~take_x));
}
static inline v2d v2_min(v2d x, v2d best) {
  return v2_pick((v2i)(x < best), x, best);
}
static inline v2d v2_max(v2d x, v2d best) {
  return v2_pick((v2i)(x > best), x, best);
}
#endif

/* The accumulators of one block's two lanes. */
typedef struct finite_acc {
  v2d sum, l1, l2, min, max;
  v2i zeros;
} finite_acc;

static inline void finite_acc_init(finite_acc *a) {
  const v2d zero = {0.0, 0.0};
  *a = (finite_acc){
      zero, zero, zero, {INFINITY, INFINITY}, {-INFINITY, -INFINITY}, {0, 0}};
}

static inline void finite_acc_add(finite_acc *a, v2d x) {
  const v2i magnitude = {INT64_MAX, INT64_MAX}; /* all bits but the sign */
  const v2d zero = {0.0, 0.0};
  a->sum += x;
  a->l1 += (v2d)((v2i)x & magnitude); /* fabs */
  a->l2 += x * x;
  a->min = v2_min(x, a->min);
  a->max = v2_max(x, a->max);
  a->zeros -= (v2i)(x == zero); /* -1 where true */
}

static inline void lane_from(stats_lane *l, const finite_acc *a, int k) {
  lane_init(l);
  l->sum = a->sum[k];
  l->l1 = a->l1[k];
  l->l2 = a->l2[k];
  l->min = a->min[k];
  l->max = a->max[k];
  l->zeros = a->zeros[k];
}

/* Flushes a finite block's lanes into the totals; false, having changed
 * nothing, when a lane's sum of |x| is not finite: the block holds an inf
 * or NaN (or finite values whose sum of |x| overflows, which the full path
 * then handles just as well). */
static bool finite_flush(stats_lane *l0, stats_lane *l1, stats_acc *acc) {
  if (!isfinite(l0->l1) || !isfinite(l1->l1))
    return false;
  l0->linf = extremes_to_linf(l0->min, l0->max);
  l1->linf = extremes_to_linf(l1->min, l1->max);
  lane_flush(l0, acc);
  lane_flush(l1, acc);
  return true;
}

typedef void (*block_fn)(const uint8_t *, int64_t, int64_t, stats_acc *);

/* The two blocks of a pair into the totals, in their order; a block that
 * holds an inf or NaN is redone by `full`. */
static bool pair_flush(const uint8_t *p, int64_t start, stats_acc *acc,
                       block_fn full, const finite_acc *a,
                       const finite_acc *b) {
  stats_lane l[4];
  lane_from(&l[0], a, 0);
  lane_from(&l[1], a, 1);
  lane_from(&l[2], b, 0);
  lane_from(&l[3], b, 1);
  for (int k = 0; k < 2; k++) {
    int64_t s = start + k * STATS_BLOCK;
    if (!finite_flush(&l[2 * k], &l[2 * k + 1], acc))
      full(p, s, s + STATS_BLOCK, acc);
  }
  return true;
}

/* A block without inf or NaN (the usual case) takes a shorter path: no
 * classification per element, linf from the extremes.
 *
 * finite_block: one block [start, end).  finite_pair: two whole blocks
 * from `start`, interleaved so that each add waits for the other block's
 * add rather than for its own previous one (the chains of adds, not the
 * arithmetic, bound one block); the blocks are then flushed in their
 * order, so the totals are the same bits as block after block.  A block
 * of the pair that holds an inf or NaN is redone by `full`. */
#define DEFINE_FINITE_BLOCK(K)                                                 \
  static inline v2d load2_##K(const uint8_t *p, int64_t i) {                   \
    return (v2d){elem_##K(p, i), elem_##K(p, i + 1)};                          \
  }                                                                            \
  static bool finite_block_##K(const uint8_t *p, int64_t start, int64_t end,   \
                               stats_acc *acc) {                               \
    finite_acc a;                                                              \
    finite_acc_init(&a);                                                       \
    int64_t i = start;                                                         \
    for (; i + 2 <= end; i += 2)                                               \
      finite_acc_add(&a, load2_##K(p, i));                                     \
    stats_lane l0, l1;                                                         \
    lane_from(&l0, &a, 0);                                                     \
    lane_from(&l1, &a, 1);                                                     \
    if (i < end)                                                               \
      FINITE_STEP(K, l0, i);                                                   \
    return finite_flush(&l0, &l1, acc);                                        \
  }                                                                            \
  static bool finite_pair_##K(const uint8_t *p, int64_t start, stats_acc *acc, \
                              block_fn full) {                                 \
    finite_acc a, b;                                                           \
    finite_acc_init(&a);                                                       \
    finite_acc_init(&b);                                                       \
    for (int64_t i = start; i < start + STATS_BLOCK; i += 2) {                 \
      finite_acc_add(&a, load2_##K(p, i));                                     \
      finite_acc_add(&b, load2_##K(p, i + STATS_BLOCK));                       \
    }                                                                          \
    return pair_flush(p, start, acc, full, &a, &b);                            \
  }

/* Complex blocks always take the full path. */
static bool no_finite_block(const uint8_t *p, int64_t start, int64_t end,
                            stats_acc *acc) {
  (void)p, (void)start, (void)end, (void)acc;
  return false;
}

static bool no_finite_pair(const uint8_t *p, int64_t start, stats_acc *acc,
                           block_fn full) {
  (void)p, (void)start, (void)acc, (void)full;
  return false;
}

/* The full path: two lanes per block so their chains of adds overlap. */
#define DEFINE_STATS(K, ADD_ONE, FAST_BLOCK, FAST_PAIR)                        \
  static void full_block_##K(const uint8_t *p, int64_t start, int64_t end,     \
                             stats_acc *acc) {                                 \
    stats_lane l0, l1;                                                         \
    lane_init(&l0);                                                            \
    lane_init(&l1);                                                            \
    int64_t i = start;                                                         \
    for (; i + 2 <= end; i += 2) {                                             \
      ADD_ONE(K, &l0, i);                                                      \
      ADD_ONE(K, &l1, i + 1);                                                  \
    }                                                                          \
    if (i < end)                                                               \
      ADD_ONE(K, &l0, i);                                                      \
    lane_flush(&l0, acc);                                                      \
    lane_flush(&l1, acc);                                                      \
  }                                                                            \
  static void stats_##K(const uint8_t *p, int64_t n, stats_acc *acc) {         \
    int64_t start = 0;                                                         \
    for (; n - start >= 2 * STATS_BLOCK; start += 2 * STATS_BLOCK)             \
      if (!FAST_PAIR(p, start, acc, full_block_##K)) {                         \
        full_block_##K(p, start, start + STATS_BLOCK, acc);                    \
        full_block_##K(p, start + STATS_BLOCK, start + 2 * STATS_BLOCK, acc);  \
      }                                                                        \
    for (; start < n; start += STATS_BLOCK) {                                  \
      int64_t end = n - start < STATS_BLOCK ? n : start + STATS_BLOCK;         \
      if (!FAST_BLOCK(p, start, end, acc))                                     \
        full_block_##K(p, start, end, acc);                                    \
    }                                                                          \
  }

/* ---- per-kind dispatch tables ---------------------------------------- */

enum { TR_VALUE, TR_ABS, TR_SQUARE, TR_DEV2, TR_ADEV2, TR_COUNT_ };

typedef double (*sum_fn)(const uint8_t *, int64_t, double);
typedef double (*scan_fn)(const uint8_t *, int64_t);
typedef void (*stats_fn)(const uint8_t *, int64_t, stats_acc *);
typedef double (*elem_fn)(const uint8_t *, int64_t);

typedef struct kind_ops {
  elem_fn elem;                    /* one element (|z| for complex) */
  sum_fn sum[TR_COUNT_];           /* indexed by TR_* */
  scan_fn min[2], max[2], prod[2]; /* indexed by abs */
  stats_fn stats;
} kind_ops;

#define DEFINE_KIND(K, ADD_ONE, FAST_BLOCK, FAST_PAIR)                         \
  DEFINE_SUM(K, value)                                                         \
  DEFINE_SUM(K, abs)                                                           \
  DEFINE_SUM(K, square)                                                        \
  DEFINE_SUM(K, dev2)                                                          \
  DEFINE_SUM(K, adev2)                                                         \
  DEFINE_SCAN(K, value, min, pick_min)                                         \
  DEFINE_SCAN(K, abs, min, pick_min)                                           \
  DEFINE_SCAN(K, value, max, pick_max)                                         \
  DEFINE_SCAN(K, abs, max, pick_max)                                           \
  DEFINE_PROD(K, value)                                                        \
  DEFINE_PROD(K, abs)                                                          \
  DEFINE_STATS(K, ADD_ONE, FAST_BLOCK, FAST_PAIR)                              \
  static const kind_ops ops_##K = {elem_##K,                                   \
                                   {sum_##K##_value, sum_##K##_abs,            \
                                    sum_##K##_square, sum_##K##_dev2,          \
                                    sum_##K##_adev2},                          \
                                   {min_##K##_value, min_##K##_abs},           \
                                   {max_##K##_value, max_##K##_abs},           \
                                   {prod_##K##_value, prod_##K##_abs},         \
                                   stats_##K};

DEFINE_FINITE_BLOCK(f32)

#if defined(__x86_64__) && defined(__GNUC__) &&                                \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* float32 pairs on AVX2 machines: both blocks' two lanes in one 256-bit
 * vector {block 1 even, block 1 odd, block 2 even, block 2 odd}, the same
 * operation per lane as above, so the same bits in half the
 * instructions.  The build targets the x86-64 baseline (SSE2), so this
 * one function is compiled for AVX2 with the GCC/Clang `target` attribute
 * and chosen at run time with __builtin_cpu_supports.  AVX2 brings no FMA
 * (a fused x*x + l2 would change the bits; -std=c11 also keeps GCC from
 * contracting). */
#include <immintrin.h>
typedef double v4d __attribute__((vector_size(32)));
typedef long long v4i __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));

__attribute__((target("avx2"))) static bool
finite_pair_f32_avx2(const uint8_t *p, int64_t start, stats_acc *acc,
                     block_fn full) {
  const v4i magnitude = {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
  const v4d zero = {0.0, 0.0, 0.0, 0.0};
  v4d sum = zero, l1 = zero, l2 = zero;
  v4d min = {INFINITY, INFINITY, INFINITY, INFINITY};
  v4d max = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
  v4i zeros = {0, 0, 0, 0};
  const uint8_t *q = p + 4 * (start + STATS_BLOCK);
  p += 4 * start;
  for (int64_t i = 0; i < STATS_BLOCK; i += 2) {
    v4f f;
    memcpy(&f, p + 4 * i, 8);
    memcpy((uint8_t *)&f + 8, q + 4 * i, 8);
    v4d x = __builtin_convertvector(f, v4d);
    sum += x;
    l1 += (v4d)((v4i)x & magnitude); /* fabs */
    l2 += x * x;
    min = (v4d)_mm256_min_pd((__m256d)x, (__m256d)min); /* pick_min */
    max = (v4d)_mm256_max_pd((__m256d)x, (__m256d)max); /* pick_max */
    zeros -= (v4i)(x == zero);                          /* -1 where true */
  }
  finite_acc a = {{sum[0], sum[1]}, {l1[0], l1[1]},   {l2[0], l2[1]},
                  {min[0], min[1]}, {max[0], max[1]}, {zeros[0], zeros[1]}};
  finite_acc b = {{sum[2], sum[3]}, {l1[2], l1[3]},   {l2[2], l2[3]},
                  {min[2], min[3]}, {max[2], max[3]}, {zeros[2], zeros[3]}};
  return pair_flush(p - 4 * start, start, acc, full, &a, &b);
}

/* Sums of float32 (DEFINE_SUM) on AVX2 machines: the eight lanes of a
 * block in two 256-bit vectors, lanes 0-3 and 4-7, each lane taking the
 * same elements with the same operation as the scalar lanes, and the
 * lane sums combined in the same order, so the same bits. */
static inline __attribute__((target("avx2"))) v4d vtr_value(v4d x, v4d m) {
  (void)m;
  return x;
}
static inline __attribute__((target("avx2"))) v4d vtr_abs(v4d x, v4d m) {
  const v4i magnitude = {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
  (void)m;
  return (v4d)((v4i)x & magnitude);
}
static inline __attribute__((target("avx2"))) v4d vtr_square(v4d x, v4d m) {
  (void)m;
  return x * x;
}
static inline __attribute__((target("avx2"))) v4d vtr_dev2(v4d x, v4d m) {
  v4d d = x - m;
  return d * d;
}
static inline __attribute__((target("avx2"))) v4d vtr_adev2(v4d x, v4d m) {
  v4d d = vtr_abs(x, m) - m;
  return d * d;
}

#define DEFINE_SUM_AVX2(T)                                                     \
  __attribute__((target("avx2"))) static double sum_f32_##T##_avx2(            \
      const uint8_t *p, int64_t n, double m) {                                 \
    comp_sum total = {0.0, 0.0};                                               \
    const v4d mv = {m, m, m, m};                                               \
    for (int64_t start = 0; start < n; start += SUM_BLOCK) {                   \
      int64_t end = n - start < SUM_BLOCK ? n : start + SUM_BLOCK;             \
      v4d lo = {0.0, 0.0, 0.0, 0.0}, hi = lo; /* lanes 0-3, 4-7 */             \
      int64_t i = start;                                                       \
      for (; i + 8 <= end; i += 8) {                                           \
        v4f f0, f1;                                                            \
        memcpy(&f0, p + 4 * i, sizeof f0);                                     \
        memcpy(&f1, p + 4 * (i + 4), sizeof f1);                               \
        lo += vtr_##T(__builtin_convertvector(f0, v4d), mv);                   \
        hi += vtr_##T(__builtin_convertvector(f1, v4d), mv);                   \
      }                                                                        \
      double a[8] = {lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]};  \
      for (; i < end; i++)                                                     \
        a[0] += tr_##T(elem_f32(p, i), m);                                     \
      for (int k = 0; k < 8; k++)                                              \
        comp_add(&total, a[k]);                                                \
    }                                                                          \
    return comp_result(&total);                                                \
  }

DEFINE_SUM_AVX2(value)
DEFINE_SUM_AVX2(abs)
DEFINE_SUM_AVX2(square)
DEFINE_SUM_AVX2(dev2)
DEFINE_SUM_AVX2(adev2)

static bool avx2_allowed = true;

static bool use_avx2(void) {
  return avx2_allowed && __builtin_cpu_supports("avx2");
}

void smr_tensor_allow_avx2(bool on) {
  avx2_allowed = on;
}

static bool finite_pair_f32_best(const uint8_t *p, int64_t start,
                                 stats_acc *acc, block_fn full) {
  if (use_avx2())
    return finite_pair_f32_avx2(p, start, acc, full);
  return finite_pair_f32(p, start, acc, full);
}
#define HAVE_AVX2_KERNELS 1
#else
void smr_tensor_allow_avx2(bool on) {
  (void)on;
}
#define finite_pair_f32_best finite_pair_f32
#endif

DEFINE_KIND(f32, ADD_REAL, finite_block_f32, finite_pair_f32_best)

#ifdef HAVE_AVX2_KERNELS
/* float32 with the AVX2 sums; the rest as ops_f32. */
static const kind_ops ops_f32_avx2 = {elem_f32,
                                      {sum_f32_value_avx2, sum_f32_abs_avx2,
                                       sum_f32_square_avx2, sum_f32_dev2_avx2,
                                       sum_f32_adev2_avx2},
                                      {min_f32_value, min_f32_abs},
                                      {max_f32_value, max_f32_abs},
                                      {prod_f32_value, prod_f32_abs},
                                      stats_f32};
#endif
DEFINE_FINITE_BLOCK(f64)
DEFINE_KIND(f64, ADD_REAL, finite_block_f64, finite_pair_f64)
DEFINE_FINITE_BLOCK(f16)
DEFINE_KIND(f16, ADD_REAL, finite_block_f16, finite_pair_f16)
DEFINE_FINITE_BLOCK(bf16)
DEFINE_KIND(bf16, ADD_REAL, finite_block_bf16, finite_pair_bf16)
DEFINE_FINITE_BLOCK(i8)
DEFINE_KIND(i8, ADD_REAL, finite_block_i8, finite_pair_i8)
DEFINE_FINITE_BLOCK(u8)
DEFINE_KIND(u8, ADD_REAL, finite_block_u8, finite_pair_u8)
DEFINE_FINITE_BLOCK(i16)
DEFINE_KIND(i16, ADD_REAL, finite_block_i16, finite_pair_i16)
DEFINE_FINITE_BLOCK(u16)
DEFINE_KIND(u16, ADD_REAL, finite_block_u16, finite_pair_u16)
DEFINE_FINITE_BLOCK(i32)
DEFINE_KIND(i32, ADD_REAL, finite_block_i32, finite_pair_i32)
DEFINE_FINITE_BLOCK(u32)
DEFINE_KIND(u32, ADD_REAL, finite_block_u32, finite_pair_u32)
DEFINE_FINITE_BLOCK(i64)
DEFINE_KIND(i64, ADD_REAL, finite_block_i64, finite_pair_i64)
DEFINE_FINITE_BLOCK(u64)
DEFINE_KIND(u64, ADD_REAL, finite_block_u64, finite_pair_u64)
DEFINE_FINITE_BLOCK(b8)
DEFINE_KIND(b8, ADD_REAL, finite_block_b8, finite_pair_b8)
DEFINE_KIND(c64, ADD_COMPLEX, no_finite_block, no_finite_pair)
DEFINE_KIND(c128, ADD_COMPLEX, no_finite_block, no_finite_pair)

/* Quantized types share the kernels of the integer of the same width. */
static const kind_ops *ops_for_dtype(int dtype) {
  switch (dtype) {
  case SMR_DT_FLOAT:
#ifdef HAVE_AVX2_KERNELS
    if (use_avx2())
      return &ops_f32_avx2;
#endif
    return &ops_f32;
  case SMR_DT_DOUBLE:
    return &ops_f64;
  case SMR_DT_HALF:
    return &ops_f16;
  case SMR_DT_BFLOAT16:
    return &ops_bf16;
  case SMR_DT_INT8:
  case SMR_DT_QINT8:
    return &ops_i8;
  case SMR_DT_UINT8:
  case SMR_DT_QUINT8:
    return &ops_u8;
  case SMR_DT_INT16:
  case SMR_DT_QINT16:
    return &ops_i16;
  case SMR_DT_UINT16:
  case SMR_DT_QUINT16:
    return &ops_u16;
  case SMR_DT_INT32:
  case SMR_DT_QINT32:
    return &ops_i32;
  case SMR_DT_UINT32:
    return &ops_u32;
  case SMR_DT_INT64:
    return &ops_i64;
  case SMR_DT_UINT64:
    return &ops_u64;
  case SMR_DT_BOOL:
    return &ops_b8;
  case SMR_DT_COMPLEX64:
    return &ops_c64;
  case SMR_DT_COMPLEX128:
    return &ops_c128;
  default:
    return NULL;
  }
}

/* ---- element access -------------------------------------------------- */

/* Whether the view holds `count` whole elements of `size` bytes. */
static bool data_covers_count(const smr_tensor *t, size_t size) {
  if (t->count < 0)
    return false;
  if (t->count == 0)
    return true;
  return t->data && size > 0 && t->nbytes / size >= (uint64_t)t->count;
}

/* NaN for strings, unknown dtypes and indexes outside the tensor. */
double smr_tensor_get(const smr_tensor *t, int64_t i) {
  size_t size = smr_dtype_size(t->dtype);
  const kind_ops *ops = ops_for_dtype(t->dtype);
  if (!ops || i < 0 || i >= t->count || !data_covers_count(t, size))
    return NAN;
  switch (t->dtype) {
  case SMR_DT_COMPLEX64:
    return elem_f32(t->data, 2 * i);
  case SMR_DT_COMPLEX128:
    return elem_f64(t->data, 2 * i);
  default:
    return ops->elem(t->data, i);
  }
}

/* ---- reductions ------------------------------------------------------ */

static const char *const reduction_names[SMR_RED_COUNT_] = {
    [SMR_RED_MIN] = "min",
    [SMR_RED_MAX] = "max",
    [SMR_RED_MEAN] = "mean",
    [SMR_RED_STD] = "std",
    [SMR_RED_VARIANCE] = "variance",
    [SMR_RED_SUM] = "sum",
    [SMR_RED_PROD] = "prod",
    [SMR_RED_L1] = "l1",
    [SMR_RED_L2] = "l2",
    [SMR_RED_LINF] = "linf",
};

int smr_reduction_from_name(const char *name) {
  if (!name)
    return -1;
  for (int r = 0; r < SMR_RED_COUNT_; r++)
    if (strcmp(name, reduction_names[r]) == 0)
      return r;
  if (strcmp(name, "l1_norm") == 0)
    return SMR_RED_L1;
  if (strcmp(name, "l2_norm") == 0)
    return SMR_RED_L2;
  return -1;
}

const char *smr_reduction_name(smr_reduction r) {
  if ((int)r < 0 || r >= SMR_RED_COUNT_)
    return "unknown";
  return reduction_names[r];
}

static bool is_norm(smr_reduction r) {
  return r == SMR_RED_L1 || r == SMR_RED_L2 || r == SMR_RED_LINF;
}

/* The kernels of a numeric tensor whose bytes cover its shape. */
static int numeric_ops(const smr_tensor *t, const kind_ops **ops,
                       smr_error *err) {
  if (t->dtype == SMR_DT_STRING)
    return smr_error_set(err, SMR_ERR_USAGE, NULL, -1,
                         "expected a numeric tensor, got strings");
  *ops = ops_for_dtype(t->dtype);
  if (!*ops)
    return smr_error_set(err, SMR_ERR_USAGE, NULL, -1,
                         "expected a numeric tensor, got dtype %s",
                         smr_dtype_tf_name(t->dtype));
  size_t size = smr_dtype_size(t->dtype);
  if (!data_covers_count(t, size))
    return smr_error_set(err, SMR_ERR_USAGE, NULL, -1,
                         "expected %lld elements of %zu bytes, tensor data "
                         "has %zu bytes",
                         (long long)t->count, size, t->nbytes);
  return SMR_OK;
}

/* NumPy's answers for an empty tensor: sums 0, product 1, the norms 0
 * (NumPy raises for the inf-norm; 0 is the norm of an empty vector), and an
 * error for everything that needs at least one element. */
static int reduce_empty(smr_reduction r, double *out, smr_error *err) {
  switch (r) {
  case SMR_RED_SUM:
  case SMR_RED_L1:
  case SMR_RED_L2:
  case SMR_RED_LINF:
    *out = 0.0;
    return SMR_OK;
  case SMR_RED_PROD:
    *out = 1.0;
    return SMR_OK;
  default:
    return smr_error_set(err, SMR_ERR_USAGE, NULL, -1,
                         "reduction of an empty tensor (%s needs at least one "
                         "element)",
                         smr_reduction_name(r));
  }
}

/* Population variance, two passes: the mean, then Σ(x - mean)². */
static double variance(const kind_ops *ops, const uint8_t *p, int64_t n,
                       bool abs) {
  double mean = ops->sum[abs ? TR_ABS : TR_VALUE](p, n, 0.0) / (double)n;
  return ops->sum[abs ? TR_ADEV2 : TR_DEV2](p, n, mean) / (double)n;
}

/* Complex tensors: the kernels of complex kinds see the modulus |z|, so
 * every reduction with `abs` and the norms (which NumPy defines on |z|) are
 * exact; the others would need complex results (sum, mean, prod) or have no
 * ordering (min, max, and std/variance which NumPy defines on |z - mean|)
 * and are refused. */
int smr_tensor_reduce(const smr_tensor *t, smr_reduction r, bool abs,
                      double *out, smr_error *err) {
  const kind_ops *ops;
  if ((int)r < 0 || r >= SMR_RED_COUNT_)
    return smr_error_set(err, SMR_ERR_USAGE, NULL, -1,
                         "expected a reduction 0..%d, got %d",
                         SMR_RED_COUNT_ - 1, (int)r);
  int rc = numeric_ops(t, &ops, err);
  if (rc != SMR_OK)
    return rc;
  if (smr_dtype_is_complex(t->dtype) && !abs && !is_norm(r))
    return smr_error_set(err, SMR_ERR_USAGE, NULL, -1,
                         "%s of a complex tensor is not supported (use abs_%s "
                         "or a norm)",
                         smr_reduction_name(r), smr_reduction_name(r));
  if (t->count == 0)
    return reduce_empty(r, out, err);
  const uint8_t *p = t->data;
  int64_t n = t->count;
  switch (r) {
  case SMR_RED_MIN:
    *out = ops->min[abs](p, n);
    break;
  case SMR_RED_MAX:
    *out = ops->max[abs](p, n);
    break;
  case SMR_RED_SUM:
    *out = ops->sum[abs ? TR_ABS : TR_VALUE](p, n, 0.0);
    break;
  case SMR_RED_MEAN:
    *out = ops->sum[abs ? TR_ABS : TR_VALUE](p, n, 0.0) / (double)n;
    break;
  case SMR_RED_VARIANCE:
    *out = variance(ops, p, n, abs);
    break;
  case SMR_RED_STD:
    *out = sqrt(variance(ops, p, n, abs));
    break;
  case SMR_RED_PROD:
    *out = ops->prod[abs](p, n);
    break;
  case SMR_RED_L1:
    *out = ops->sum[TR_ABS](p, n, 0.0);
    break;
  case SMR_RED_L2:
    *out = sqrt(ops->sum[TR_SQUARE](p, n, 0.0));
    break;
  default: /* SMR_RED_LINF */
    *out = ops->max[1](p, n);
    break;
  }
  return SMR_OK;
}

/* ---- statistics ------------------------------------------------------ */

/* With no finite element min/max/mean are NaN and the sums and norms 0. */
int smr_tensor_stats(const smr_tensor *t, smr_stats *out, smr_error *err) {
  const kind_ops *ops;
  int rc = numeric_ops(t, &ops, err);
  if (rc != SMR_OK)
    return rc;
  stats_acc acc = {.min = INFINITY, .max = -INFINITY};
  ops->stats(t->data, t->count, &acc);
  *out = (smr_stats){.count = t->count,
                     .nan = acc.nan,
                     .pinf = acc.pinf,
                     .ninf = acc.ninf,
                     .zeros = acc.zeros};
  out->finite = t->count - acc.nan - acc.pinf - acc.ninf;
  out->has_finite = out->finite > 0;
  if (!out->has_finite) {
    out->min = out->max = out->mean = NAN;
    return SMR_OK;
  }
  out->min = acc.min;
  out->max = acc.max;
  out->sum = comp_result(&acc.sum);
  out->mean = out->sum / (double)out->finite;
  out->l1 = comp_result(&acc.l1);
  out->l2 = sqrt(comp_result(&acc.l2));
  out->linf = acc.linf;
  return SMR_OK;
}

/* ---- element counts -------------------------------------------------- */

/* float32 counts from the bits, without converting: |x|'s bits are 0 for
 * a zero (either sign), above the infinity's bits for a NaN; exactly the
 * answers lane_add_real gives for the converted double. */
#define F32_MAGNITUDE 0x7fffffff
#define F32_PINF 0x7f800000
#define F32_NINF ((int32_t)0xff800000u)

typedef struct elem_counts {
  int64_t nan, pinf, ninf, zeros;
} elem_counts;

static void counts_f32_scalar(const uint8_t *p, int64_t from, int64_t n,
                              elem_counts *c) {
  for (int64_t i = from; i < n; i++) {
    int32_t u = (int32_t)load_u32(p + 4 * i), a = u & F32_MAGNITUDE;
    c->zeros += a == 0;
    c->nan += a > F32_PINF;
    c->pinf += u == F32_PINF;
    c->ninf += u == F32_NINF;
  }
}

/* W int32 lanes at a time, the bits read in host order, so little-endian
 * hosts only.  Lane counters are int32: a block of at most 2^20 vectors
 * cannot overflow them.  Returns the elements done. */
#define COUNTS_BLOCK ((int64_t)1 << 20)
#define DEFINE_COUNTS_F32(NAME, W, VS, ATTR)                                   \
  ATTR static int64_t NAME(const uint8_t *p, int64_t n, elem_counts *c) {      \
    VS magnitude, pinf, ninf, zero;                                            \
    for (int k = 0; k < W; k++) {                                              \
      magnitude[k] = F32_MAGNITUDE;                                            \
      pinf[k] = F32_PINF;                                                      \
      ninf[k] = F32_NINF;                                                      \
      zero[k] = 0;                                                             \
    }                                                                          \
    int64_t i = 0;                                                             \
    while (n - i >= W) {                                                       \
      int64_t vectors = (n - i) / W;                                           \
      int64_t end = i + W * (vectors < COUNTS_BLOCK ? vectors : COUNTS_BLOCK); \
      VS zeros = zero, nans = zero, pinfs = zero, ninfs = zero;                \
      for (; i < end; i += W) {                                                \
        VS u;                                                                  \
        memcpy(&u, p + 4 * i, sizeof u);                                       \
        VS a = u & magnitude;                                                  \
        zeros -= (VS)(a == zero); /* -1 where true */                          \
        nans -= (VS)(a > pinf);                                                \
        pinfs -= (VS)(u == pinf);                                              \
        ninfs -= (VS)(u == ninf);                                              \
      }                                                                        \
      for (int k = 0; k < W; k++) {                                            \
        c->zeros += zeros[k];                                                  \
        c->nan += nans[k];                                                     \
        c->pinf += pinfs[k];                                                   \
        c->ninf += ninfs[k];                                                   \
      }                                                                        \
    }                                                                          \
    return i;                                                                  \
  }

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
typedef int32_t v4s __attribute__((vector_size(16)));
DEFINE_COUNTS_F32(counts_f32_v4, 4, v4s, )
#ifdef HAVE_AVX2_KERNELS
/* Compiled for AVX2 and chosen at run time, as the statistics kernels. */
typedef int32_t v8s __attribute__((vector_size(32)));
DEFINE_COUNTS_F32(counts_f32_v8, 8, v8s, __attribute__((target("avx2"))))
#endif
#endif

static void counts_f32(const uint8_t *p, int64_t n, elem_counts *c) {
  int64_t done = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#ifdef HAVE_AVX2_KERNELS
  if (use_avx2())
    done = counts_f32_v8(p, n, c);
  else
#endif
    done = counts_f32_v4(p, n, c);
#endif
  counts_f32_scalar(p, done, n, c);
}

static void counts_out(int64_t count, const elem_counts *c, smr_stats *out) {
  *out = (smr_stats){.count = count,
                     .nan = c->nan,
                     .pinf = c->pinf,
                     .ninf = c->ninf,
                     .zeros = c->zeros};
  out->finite = count - c->nan - c->pinf - c->ninf;
  out->has_finite = out->finite > 0;
}

int smr_tensor_counts(const smr_tensor *t, smr_stats *out, smr_error *err) {
  const kind_ops *ops;
  int rc = numeric_ops(t, &ops, err);
  if (rc != SMR_OK)
    return rc;
  elem_counts c = {0};
  if (t->dtype == SMR_DT_FLOAT) {
    counts_f32(t->data, t->count, &c);
  } else { /* other dtypes: the one pass of smr_tensor_stats */
    smr_stats s;
    if ((rc = smr_tensor_stats(t, &s, err)) != SMR_OK)
      return rc;
    c = (elem_counts){s.nan, s.pinf, s.ninf, s.zeros};
  }
  counts_out(t->count, &c, out);
  out->min = out->max = out->sum = out->mean = NAN;
  out->l1 = out->l2 = out->linf = NAN;
  return SMR_OK;
}

/* ---- fingerprint ----------------------------------------------------- */

void smr_tensor_sha256(const smr_tensor *t, char hex[65]) {
  smr_sha256 c;
  smr_sha256_init(&c);
  if (t->dtype == SMR_DT_STRING) {
    static const uint8_t terminator = 0;
    for (int64_t i = 0; t->strings && t->string_lens && i < t->count; i++) {
      smr_sha256_update(&c, t->strings[i], t->string_lens[i]);
      smr_sha256_update(&c, &terminator, 1);
    }
  } else {
    /* The element bytes of the shape, never more than the view holds. */
    size_t size = smr_dtype_size(t->dtype);
    size_t n = t->nbytes;
    if (size > 0 && t->count >= 0 && (uint64_t)t->count <= n / size)
      n = (size_t)t->count * size;
    if (t->data)
      smr_sha256_update(&c, t->data, n);
  }
  smr_sha256_final_hex(&c, hex);
}
