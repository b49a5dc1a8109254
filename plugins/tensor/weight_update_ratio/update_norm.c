/* update_norm.c - several update norms at once (update_norm.h).
 *
 * One norm adds its squares in element order, so it runs at the latency
 * of a floating-point add per element.  Up to LANES norms run here side
 * by side: for each live lane a block of BLOCK elements is turned into
 * squares with vector arithmetic, then the lanes' adds are interleaved,
 * element by element, so that the CPU overlaps their chains.  Each lane
 * still adds its own squares in its own order; nothing is reassociated.
 *
 * A block is one of three kinds:
 * - every difference zero (a frozen layer, or weights that barely move
 *   in float32): nothing to add, as ssq_add skips zeros;
 * - every difference finite and at most the lane's current scale: each
 *   square is (d / scale)^2, exactly what ssq_add adds (a zero adds +0,
 *   which leaves a sum >= 1 unchanged, as skipping it does);
 * - otherwise (a NaN, an infinity, a new largest difference): added
 *   element by element with ssq_add, so rescaling and the decided cases
 *   keep their order.
 *
 * A block of squares is usually added without the chain at all.  The sum
 * s >= 1 and each square q <= 1, so s + q rounds to s plus q rounded to a
 * multiple of ulp(s), the spacing of doubles in s's binade [2^e, 2^(e+1)):
 * the same multiple whatever s is in that binade, except when q lies
 * exactly halfway between two multiples (then the even neighbour of s + q
 * wins, which depends on s).  So with s0 the sum before the block,
 * r = (s0 + q) - s0 is what adding q adds (Fast2Sum: exact, as is
 * q - r); the r are multiples of ulp(s0) that add exactly in any order
 * while their total stays below 2^e; and when no q was a tie and
 * s0 + their total is still below 2^(e+1), every sum along the chain was
 * in s0's binade and the chain ends at exactly s0 + total.  Otherwise
 * (a tie, or the sum reaching the next binade: about once per binade of
 * a norm) the squares are added one by one as before.  The adds are
 * independent, so one norm runs at the speed of the arithmetic, not at
 * the latency of an add. */
#include "update_norm.h"

#include <string.h>

#define LANES 4  /* add_in_order names four accumulators */
#define BLOCK 32 /* elements per lane per round */

typedef long long v2i __attribute__((vector_size(16)));
typedef double v2d __attribute__((vector_size(16)));
typedef float v2f __attribute__((vector_size(8)));

typedef enum block_kind {
  BLOCK_ZERO,
  BLOCK_SUMMED,
  BLOCK_SQUARES,
  BLOCK_SLOW
} block_kind;

/* A block's kind; for BLOCK_SUMMED the new sum in *ssq, for
 * BLOCK_SQUARES its squares in t, to be added to *ssq in order. */
typedef block_kind (*block_kind_fn)(const unsigned char *a,
                                    const unsigned char *b, double scale,
                                    double *ssq, double *t);

/* The top of s's binade, 2^(e+1), and half its ulp, 2^(e-53) (s >= 1, so
 * both are normal doubles). */
static void binade_of(double s, double *top, double *half_ulp) {
  uint64_t bits, exp;
  memcpy(&bits, &s, sizeof bits);
  exp = bits & 0x7ff0000000000000u;
  bits = exp + ((uint64_t)1 << 52);
  memcpy(top, &bits, sizeof bits);
  bits = exp - ((uint64_t)53 << 52);
  memcpy(half_ulp, &bits, sizeof bits);
}

/* One definition for both vector widths: GCC/Clang vector extensions.
 * ATTR is empty for the baseline build (SSE2 on x86-64, whatever the
 * target has elsewhere) and the `target` attribute for the AVX2 copy,
 * which is chosen at run time.  No FMA is enabled, and -std=c11 keeps the
 * compiler from contracting (d / s) * (d / s).
 *
 * First the floats are compared as they are, EW at a time (a difference
 * is zero exactly when the two floats are equal, NaN never), so a block of
 * unchanged weights costs one compare per vector.  Otherwise the
 * differences are formed as doubles, W at a time. */
#define DEFINE_BLOCK_KIND(NAME, W, VD, VI, VF, EW, EF, ES, ATTR)               \
  ATTR static block_kind NAME(const unsigned char *a, const unsigned char *b,  \
                              double scale, double *ssq, double *t) {          \
    ES equal;                                                                  \
    for (int k = 0; k < EW; k++)                                               \
      equal[k] = -1;                                                           \
    for (int v = 0; v < BLOCK / EW; v++) {                                     \
      EF x, y;                                                                 \
      memcpy(&x, a + 4 * EW * v, sizeof x);                                    \
      memcpy(&y, b + 4 * EW * v, sizeof y);                                    \
      equal &= (ES)(x == y);                                                   \
    }                                                                          \
    int all_equal = -1;                                                        \
    for (int k = 0; k < EW; k++)                                               \
      all_equal &= equal[k];                                                   \
    if (all_equal)                                                             \
      return BLOCK_ZERO;                                                       \
    VD d[BLOCK / W], s;                                                        \
    VI ok, magnitude;                                                          \
    for (int k = 0; k < W; k++) {                                              \
      s[k] = scale;                                                            \
      ok[k] = -1;                                                              \
      magnitude[k] = INT64_MAX;                                                \
    }                                                                          \
    for (int v = 0; v < BLOCK / W; v++) {                                      \
      VF x, y;                                                                 \
      memcpy(&x, a + 4 * W * v, sizeof x);                                     \
      memcpy(&y, b + 4 * W * v, sizeof y);                                     \
      VD diff =                                                                \
          __builtin_convertvector(x, VD) - __builtin_convertvector(y, VD);     \
      d[v] = (VD)((VI)diff & magnitude); /* fabs */                            \
      ok &= (VI)(d[v] <= s);             /* false for NaN */                   \
    }                                                                          \
    long long all_ok = -1;                                                     \
    for (int k = 0; k < W; k++)                                                \
      all_ok &= ok[k];                                                         \
    if (!all_ok) /* also when scale is 0: some d > 0 */                        \
      return BLOCK_SLOW;                                                       \
    double top, half;                                                          \
    binade_of(*ssq, &top, &half);                                              \
    VD s0, h, total;                                                           \
    VI tie;                                                                    \
    for (int k = 0; k < W; k++) {                                              \
      s0[k] = *ssq;                                                            \
      h[k] = half;                                                             \
      total[k] = 0;                                                            \
      tie[k] = 0;                                                              \
    }                                                                          \
    for (int v = 0; v < BLOCK / W; v++) {                                      \
      VD q = d[v] / s;                                                         \
      VD sq = q * q;                                                           \
      memcpy(t + W * v, &sq, sizeof sq);                                       \
      VD r = (s0 + sq) - s0; /* what adding sq adds */                         \
      VD err = (VD)((VI)(sq - r) & magnitude);                                 \
      tie |= (VI)(err == h);                                                   \
      total += r;                                                              \
    }                                                                          \
    long long any_tie = 0;                                                     \
    double sum = 0;                                                            \
    for (int k = 0; k < W; k++) {                                              \
      any_tie |= tie[k];                                                       \
      sum += total[k];                                                         \
    }                                                                          \
    sum += *ssq;                                                               \
    if (any_tie || !(sum < top))                                               \
      return BLOCK_SQUARES;                                                    \
    *ssq = sum;                                                                \
    return BLOCK_SUMMED;                                                       \
  }

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4s __attribute__((vector_size(16)));
DEFINE_BLOCK_KIND(block_kind_v2, 2, v2d, v2i, v2f, 4, v4f, v4s, )

#if defined(__x86_64__) && defined(__GNUC__)
/* The build targets the x86-64 baseline, so this copy is compiled for
 * AVX2 with the GCC/Clang `target` attribute and used only where
 * __builtin_cpu_supports says the CPU has it. */
typedef long long v4i __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8s __attribute__((vector_size(32)));
DEFINE_BLOCK_KIND(block_kind_v4, 4, v4d, v4i, v4f, 8, v8f, v8s,
                  __attribute__((target("avx2"))))

static bool avx2_allowed = true;

void update_norm_allow_avx2(bool on) {
  avx2_allowed = on;
}

static block_kind_fn best_block_kind(void) {
  if (avx2_allowed && __builtin_cpu_supports("avx2"))
    return block_kind_v4;
  return block_kind_v2;
}
#else
void update_norm_allow_avx2(bool on) {
  (void)on;
}

static block_kind_fn best_block_kind(void) {
  return block_kind_v2;
}
#endif

typedef struct lane {
  const unsigned char *a, *b;
  int64_t n, i;
  scaled_ssq s;
  size_t job; /* index into pairs and out */
  bool live;  /* has a norm to finish */
  bool done;  /* out[job] written (a NaN or inf decided it) */
} lane;

static double difference(const lane *l, int64_t i) {
  float x, y;
  memcpy(&x, l->a + 4 * i, sizeof x);
  memcpy(&y, l->b + 4 * i, sizeof y);
  return fabs((double)x - (double)y);
}

/* Adds elements [i, end) one by one. */
static void add_one_by_one(lane *l, int64_t end, double *out) {
  double decided;
  for (; l->i < end; l->i++)
    if (!ssq_add(&l->s, difference(l, l->i), &decided)) {
      out[l->job] = decided;
      l->done = true;
      return;
    }
}

static void lane_start(lane *l, const update_pair *pairs, size_t n,
                       size_t *next) {
  *l = (lane){0};
  if (*next == n)
    return;
  const update_pair *p = &pairs[*next];
  *l = (lane){.a = p->a,
              .b = p->b,
              .n = p->n,
              .s = SCALED_SSQ_INIT,
              .job = (*next)++,
              .live = true};
}

/* A lane's next block: true with its squares in t, false when it needs
 * no adds (its zeros skipped, or added one by one already). */
static bool lane_block(lane *l, block_kind_fn kind_of, double *t, double *out) {
  if (!l->live)
    return false;
  int64_t len = l->n - l->i;
  if (len >= BLOCK) {
    block_kind k =
        kind_of(l->a + 4 * l->i, l->b + 4 * l->i, l->s.scale, &l->s.ssq, t);
    if (k != BLOCK_SLOW) {
      l->i += BLOCK;
      return k == BLOCK_SQUARES;
    }
  }
  add_one_by_one(l, l->i + (len < BLOCK ? len : BLOCK), out);
  return false;
}

/* The squares of the lanes marked fast added, each lane's in its order,
 * interleaved so that the chains overlap (the others add zeros to sums
 * that are thrown away). */
static void add_in_order(lane *l, double t[LANES][BLOCK], const bool *fast) {
  for (int j = 0; j < LANES; j++)
    if (!fast[j])
      memset(t[j], 0, sizeof t[j]);
  double s0 = l[0].s.ssq, s1 = l[1].s.ssq, s2 = l[2].s.ssq, s3 = l[3].s.ssq;
  for (int k = 0; k < BLOCK; k++) {
    s0 += t[0][k];
    s1 += t[1][k];
    s2 += t[2][k];
    s3 += t[3][k];
  }
  double sums[LANES] = {s0, s1, s2, s3};
  for (int j = 0; j < LANES; j++)
    if (fast[j])
      l[j].s.ssq = sums[j];
}

/* Ends a lane whose norm is complete and starts the next pair in it. */
static void lane_advance(lane *l, const update_pair *pairs, size_t n,
                         size_t *next, double *out) {
  if (!l->live || (!l->done && l->i < l->n))
    return;
  if (!l->done)
    out[l->job] = ssq_norm(&l->s);
  lane_start(l, pairs, n, next);
}

/* The live lane when there is exactly one, else NULL. */
static lane *lone_lane(lane *l) {
  lane *live = NULL;
  for (int j = 0; j < LANES; j++)
    if (l[j].live) {
      if (live)
        return NULL;
      live = &l[j];
    }
  return live;
}

static bool any_live(const lane *l) {
  for (int j = 0; j < LANES; j++)
    if (l[j].live)
      return true;
  return false;
}

/* A lane left alone finishes without the others' empty adds. */
static void finish_alone(lane *l, block_kind_fn kind_of, double *out) {
  double t[BLOCK];
  while (!l->done && l->i < l->n)
    if (lane_block(l, kind_of, t, out))
      for (int j = 0; j < BLOCK; j++)
        l->s.ssq += t[j];
}

void update_norms_f32(const update_pair *pairs, size_t n, double *out) {
  block_kind_fn kind_of = best_block_kind();
  lane l[LANES];
  size_t next = 0;
  for (int j = 0; j < LANES; j++)
    lane_start(&l[j], pairs, n, &next);
  double t[LANES][BLOCK];
  while (any_live(l)) {
    lane *alone = lone_lane(l);
    if (alone) { /* no pair is left to start: finish it */
      finish_alone(alone, kind_of, out);
      lane_advance(alone, pairs, n, &next, out);
      continue;
    }
    bool fast[LANES], adds = false;
    for (int j = 0; j < LANES; j++)
      adds |= fast[j] = lane_block(&l[j], kind_of, t[j], out);
    if (adds)
      add_in_order(l, t, fast);
    for (int j = 0; j < LANES; j++)
      lane_advance(&l[j], pairs, n, &next, out);
  }
}
