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
 * wins, which depends on s).  So with 2^e the bottom of the binade of the
 * sum before the block, r = (2^e + q) - 2^e is what adding q adds
 * (Fast2Sum: exact, as is q - r, which shows a tie); the r are multiples
 * of ulp(2^e) that add exactly in any order while their total stays below
 * 2^e; and when no q was a tie and the sum plus their total is still below
 * 2^(e+1), every sum along the chain was in that binade and the chain ends
 * at exactly the sum plus the total.  Otherwise (a tie, or the sum
 * reaching the next binade: about once per binade of a norm) the squares
 * are added one by one as before.  The adds are independent, and 2^e is
 * kept per lane (redone only after a block that was not summed), so one
 * norm runs at the speed of the arithmetic, not at the latency of an
 * add.
 *
 * So the lanes' interleaving pays only where blocks are added one by one
 * often: small tensors (a new largest difference every few elements).  A
 * pair of at least ALONE_MIN elements runs alone, before the others:
 * four such pairs side by side read eight streams from memory, 256 bytes
 * of each in turn, which the hardware prefetchers follow less well than
 * two; and the largest are read with software prefetches ahead
 * (bench/README.md, section 14: four layers of 32 MiB, 6.8 -> 9.6 GB/s;
 * one pair of 128 MiB, 8.8 -> 10.3). */
#include "update_norm.h"

#include <string.h>

#define LANES 4                      /* add_in_order names four accumulators */
#define BLOCK 64                     /* elements per lane per round */
#define ALONE_MIN ((int64_t)1 << 16) /* elements: 256 KB a tensor */
#define PREFETCH_AHEAD 2048          /* bytes; 1-3 KB measured alike */
#define PREFETCH_MIN ((int64_t)1 << 22) /* elements: 16 MiB a tensor */

/* A hint to load the cache line at p; GCC/Clang's builtin, nothing
 * elsewhere (the hardware prefetchers still run). */
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif

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
 * BLOCK_SQUARES its squares in t, to be added to *ssq in order.  base is
 * 2^e, the bottom of the binade *ssq is taken to be in (checked). */
typedef block_kind (*block_kind_fn)(const unsigned char *a,
                                    const unsigned char *b, double scale,
                                    double base, double *ssq, double *t);

/* 2^e with 2^e <= s < 2^(e+1) (s >= 1). */
static double binade_base(double s) {
  uint64_t bits;
  memcpy(&bits, &s, sizeof bits);
  bits &= 0x7ff0000000000000u;
  memcpy(&s, &bits, sizeof bits);
  return s;
}

/* The squares of a block whose differences are all finite and at most
 * scale, one by one: the same operations as the vector code, so the same
 * bits (for the rare block that is added in order). */
static void block_squares(const unsigned char *a, const unsigned char *b,
                          double scale, double *t) {
  for (int i = 0; i < BLOCK; i++) {
    float x, y;
    memcpy(&x, a + 4 * i, sizeof x);
    memcpy(&y, b + 4 * i, sizeof y);
    double q = fabs((double)x - (double)y) / scale;
    t[i] = q * q;
  }
}

/* What the squares of vector v of a block add to a sum in base's binade
 * (a statement expression, GCC/Clang: it updates ok and tie of the
 * function it is used in). */
#define ADDED(a, b, W, v, VD, VI, VF, CVT)                                     \
  ({                                                                           \
    VF x_, y_;                                                                 \
    memcpy(&x_, (a) + 4 * (W) * (v), sizeof x_);                               \
    memcpy(&y_, (b) + 4 * (W) * (v), sizeof y_);                               \
    VD d_ = (VD)((VI)(CVT(x_) - CVT(y_)) & magnitude); /* fabs */              \
    ok &= (VI)(d_ <= s);                               /* false for NaN */     \
    VD q_ = d_ / s;                                                            \
    VD sq_ = q_ * q_;                                                          \
    VD r_ = (s0 + sq_) - s0; /* what adding sq_ adds */                        \
    tie |= (VI)((VD)((VI)(sq_ - r_) & magnitude) == h);                        \
    r_;                                                                        \
  })

/* One definition for both vector widths: GCC/Clang vector extensions.
 * ATTR is empty for the baseline build (SSE2 on x86-64, whatever the
 * target has elsewhere) and the `target` attribute for the AVX2 copy,
 * which is chosen at run time.  No FMA is enabled, and -std=c11 keeps the
 * compiler from contracting (d / s) * (d / s).
 *
 * First the floats' differences are compared with zero, EW at a time (a
 * difference of floats is zero exactly when the difference of their
 * doubles is: the two are equal and finite; NaN never, and equal
 * infinities neither, whose difference is NaN, which decides the norm),
 * so a block of unchanged weights costs a subtraction and a compare per
 * vector.  Otherwise the differences are formed as doubles, W at a time. */
#define DEFINE_BLOCK_KIND(NAME, W, VD, VI, VF, CVT, EW, EF, ES, ATTR)          \
  ATTR static block_kind NAME(const unsigned char *a, const unsigned char *b,  \
                              double scale, double base, double *ssq,          \
                              double *t) {                                     \
    ES equal;                                                                  \
    for (int k = 0; k < EW; k++)                                               \
      equal[k] = -1;                                                           \
    for (int v = 0; v < BLOCK / EW; v++) {                                     \
      EF x, y;                                                                 \
      memcpy(&x, a + 4 * EW * v, sizeof x);                                    \
      memcpy(&y, b + 4 * EW * v, sizeof y);                                    \
      equal &= (ES)(x - y == 0);                                               \
    }                                                                          \
    int all_equal = -1;                                                        \
    for (int k = 0; k < EW; k++)                                               \
      all_equal &= equal[k];                                                   \
    if (all_equal)                                                             \
      return BLOCK_ZERO;                                                       \
    VD s, s0, h, total, total2; /* two: a shorter chain of adds */             \
    VI ok, tie, magnitude;                                                     \
    for (int k = 0; k < W; k++) {                                              \
      s[k] = scale;                                                            \
      s0[k] = base;                                                            \
      h[k] = base * 0x1p-53; /* half an ulp in base's binade */                \
      total[k] = total2[k] = 0;                                                \
      ok[k] = -1;                                                              \
      tie[k] = 0;                                                              \
      magnitude[k] = INT64_MAX;                                                \
    }                                                                          \
    for (int v = 0; v < BLOCK / W; v += 2) {                                   \
      total += ADDED(a, b, W, v, VD, VI, VF, CVT);                             \
      total2 += ADDED(a, b, W, v + 1, VD, VI, VF, CVT);                        \
    }                                                                          \
    total += total2;                                                           \
    long long all_ok = -1, any_tie = 0;                                        \
    double sum = 0;                                                            \
    for (int k = 0; k < W; k++) {                                              \
      all_ok &= ok[k];                                                         \
      any_tie |= tie[k];                                                       \
      sum += total[k];                                                         \
    }                                                                          \
    if (!all_ok) /* also when scale is 0: some d > 0 */                        \
      return BLOCK_SLOW;                                                       \
    double start = *ssq;                                                       \
    sum += start;                                                              \
    if (!any_tie && start >= base && sum < 2 * base) {                         \
      *ssq = sum;                                                              \
      return BLOCK_SUMMED;                                                     \
    }                                                                          \
    block_squares(a, b, scale, t);                                             \
    return BLOCK_SQUARES;                                                      \
  }

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4s __attribute__((vector_size(16)));
#define CVT_V2(x) __builtin_convertvector(x, v2d)
DEFINE_BLOCK_KIND(block_kind_v2, 2, v2d, v2i, v2f, CVT_V2, 4, v4f, v4s, )

#if defined(__x86_64__) && defined(__GNUC__)
/* The build targets the x86-64 baseline, so this copy is compiled for
 * AVX2 with the GCC/Clang `target` attribute and used only where
 * __builtin_cpu_supports says the CPU has it. */
#include <immintrin.h>
typedef long long v4i __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8s __attribute__((vector_size(32)));
/* GCC splits __builtin_convertvector of four floats into halves. */
#define CVT_V4(x) ((v4d)_mm256_cvtps_pd((__m128)(x)))
DEFINE_BLOCK_KIND(block_kind_v4, 4, v4d, v4i, v4f, CVT_V4, 8, v8f, v8s,
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
  double base; /* binade_base(s.ssq), unless rebase */
  bool rebase; /* s.ssq changed outside a block: base is to be redone */
  size_t job;  /* index into pairs and out */
  bool live;   /* has a norm to finish */
  bool done;   /* out[job] written (a NaN or inf decided it) */
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
  while (*next < n && pairs[*next].n >= ALONE_MIN) /* done alone before */
    (*next)++;
  if (*next == n)
    return;
  const update_pair *p = &pairs[*next];
  *l = (lane){.a = p->a,
              .b = p->b,
              .n = p->n,
              .s = SCALED_SSQ_INIT,
              .base = 1,
              .job = (*next)++,
              .live = true};
}

/* A lane's next block: true with its squares in t, false when it needs
 * no adds (its zeros skipped, or added one by one already). */
static bool lane_block(lane *l, block_kind_fn kind_of, double *t, double *out) {
  if (!l->live)
    return false;
  if (l->rebase) { /* a branch, not a data dependence on the sum */
    l->base = binade_base(l->s.ssq);
    l->rebase = false;
  }
  int64_t len = l->n - l->i;
  if (len >= BLOCK) {
    block_kind k = kind_of(l->a + 4 * l->i, l->b + 4 * l->i, l->s.scale,
                           l->base, &l->s.ssq, t);
    if (k != BLOCK_SLOW) {
      l->i += BLOCK;
      l->rebase = k == BLOCK_SQUARES; /* then the sum changes after this */
      return k == BLOCK_SQUARES;
    }
  }
  l->rebase = true;
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

/* A lane left alone finishes without the others' empty adds.  In a pair
 * of at least PREFETCH_MIN elements (tensors that mostly come from memory,
 * not from a cache: in a cache the hints only cost, 2 % at 12.6 MB) the
 * block PREFETCH_AHEAD bytes on is prefetched, of both tensors, where it
 * lies inside them.  The hints are written out here: GCC 12 dropped every
 * call to a function of their own, which returns and stores nothing. */
static void finish_alone(lane *l, block_kind_fn kind_of, double *out) {
  double t[BLOCK];
  bool ahead = l->n >= PREFETCH_MIN;
  while (!l->done && l->i < l->n) {
    if (ahead && l->n - l->i >= (PREFETCH_AHEAD + 4 * BLOCK) / 4)
      for (int c = 0; c < 4 * BLOCK; c += 64) { /* a cache line at a time */
        PREFETCH(l->a + 4 * l->i + PREFETCH_AHEAD + c);
        PREFETCH(l->b + 4 * l->i + PREFETCH_AHEAD + c);
      }
    if (lane_block(l, kind_of, t, out))
      for (int j = 0; j < BLOCK; j++)
        l->s.ssq += t[j];
  }
}

/* The pairs of at least ALONE_MIN elements, one after another. */
static void large_pairs(const update_pair *pairs, size_t n,
                        block_kind_fn kind_of, double *out) {
  for (size_t k = 0; k < n; k++)
    if (pairs[k].n >= ALONE_MIN) {
      lane l = {.a = pairs[k].a,
                .b = pairs[k].b,
                .n = pairs[k].n,
                .s = SCALED_SSQ_INIT,
                .base = 1,
                .job = k,
                .live = true};
      finish_alone(&l, kind_of, out);
      if (!l.done)
        out[k] = ssq_norm(&l.s);
    }
}

void update_norms_f32(const update_pair *pairs, size_t n, double *out) {
  block_kind_fn kind_of = best_block_kind();
  large_pairs(pairs, n, kind_of, out);
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
