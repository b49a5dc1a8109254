/* quantiles.c - NumPy's quantiles (linear interpolation) bit for bit:
 * by sorting (rk_quantile), by selection over doubles (rk_quantiles), and
 * over a tensor's elements (rk_tensor_quantiles), whose float32 path
 * selects on the floats' bits where they lie. */
#include "smrules/rulekit.h"

#include "npmath.h"
#include "simd.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double rk_quantile(double *x, size_t n, double q) {
  if (n == 0)
    return NAN;
  for (size_t i = 0; i < n; i++)
    if (isnan(x[i]))
      return NAN;
  qsort(x, n, sizeof *x, cmp_double);
  return np_quantile_sorted(x, n, q);
}

static void swap_d(double *x, ptrdiff_t i, ptrdiff_t j) {
  double t = x[i];
  x[i] = x[j];
  x[j] = t;
}

static double median3(double a, double b, double c) {
  if (a < b)
    return b < c ? b : a < c ? c : a;
  return a < c ? a : b < c ? c : b;
}

/* The value at sorted position k of x (no NaN; x is reordered so that
 * everything after position k is >= it).  Quickselect with a three-way
 * partition (runs of equal values, such as zeros, end it at once); after
 * 2 log2(n) + 8 rounds without an answer the rest is sorted, so crafted
 * data cannot make it quadratic. */
static double select_kth(double *x, size_t n, size_t k) {
  ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, want = (ptrdiff_t)k;
  int budget = 8;
  for (size_t m = n; m > 1; m >>= 1)
    budget += 2;
  while (hi > lo) {
    if (budget-- == 0) {
      qsort(x + lo, (size_t)(hi - lo + 1), sizeof *x, cmp_double);
      return x[want];
    }
    double pivot = median3(x[lo], x[lo + (hi - lo) / 2], x[hi]);
    ptrdiff_t lt = lo, i = lo, gt = hi;
    while (i <= gt) {
      if (x[i] < pivot)
        swap_d(x, lt++, i++);
      else if (x[i] > pivot)
        swap_d(x, i, gt--);
      else
        i++;
    }
    if (want < lt)
      hi = lt - 1;
    else if (want > gt)
      lo = gt + 1;
    else
      return x[want];
  }
  return x[want];
}

/* Which zero a stable sort puts at sorted position k, when that position
 * holds a zero: NumPy-compatible results keep the sign of that zero. */
typedef struct zero_ranks {
  size_t neg, zeros;
  bool nan; /* some element is NaN (then the ranks do not matter) */
} zero_ranks;

typedef double zr_v2d __attribute__((vector_size(16)));
typedef long long zr_v2i __attribute__((vector_size(16)));

/* One pass, two elements at a time (GCC/Clang vector extensions: SSE2 on
 * x86-64; the compiler does not vectorize the scalar loop by itself). */
static zero_ranks count_zeros(const double *x, size_t n) {
  const zr_v2d zero = {0, 0};
  zr_v2i neg = {0, 0}, zeros = {0, 0}, nan = {0, 0};
  size_t i = 0;
  for (; i + 2 <= n; i += 2) {
    zr_v2d v;
    memcpy(&v, x + i, sizeof v);
    neg -= (zr_v2i)(v < zero); /* -1 where true */
    zeros -= (zr_v2i)(v == zero);
    nan -= (zr_v2i)(v != v);
  }
  zero_ranks z = {(size_t)(neg[0] + neg[1]), (size_t)(zeros[0] + zeros[1]),
                  nan[0] + nan[1] > 0};
  for (; i < n; i++) {
    z.neg += x[i] < 0;
    z.zeros += x[i] == 0;
    z.nan |= x[i] != x[i];
  }
  return z;
}

/* -1 when position k is not a zero, else the sign bit of that zero. */
static int zero_sign_at(const double *x, size_t n, zero_ranks z, size_t k) {
  if (k < z.neg || k >= z.neg + z.zeros)
    return -1;
  size_t rank = k - z.neg;
  for (size_t i = 0; i < n; i++)
    if (x[i] == 0 && rank-- == 0)
      return signbit(x[i]) ? 1 : 0;
  return -1;
}

static double with_zero_sign(double v, int sign) {
  return sign < 0 || v != 0 ? v : sign ? -0.0 : 0.0;
}

/* ---- order statistics of large arrays in one pass ----
 *
 * Quickselect's partitions cost about 18 ns per element on a million
 * float32 gradients (PoorWeightInitialization's spread): every swap
 * depends on a branch the CPU cannot predict.  For large arrays a sorted
 * sample of SAMPLE elements names two values that bracket the wanted rank
 * with a margin of sample positions (four standard deviations of the
 * rank's estimate, and a few more: `margin`); one pass counts the elements
 * below the bracket and copies out those inside it, without branches, and the
 * rank is selected among those few.  When the bracket misses the rank
 * (an unlucky sample, or data made to defeat it) the caller selects over
 * the whole array as before: the answer is the same either way, since an
 * order statistic is a value, not a position. */
#define BRACKET_MIN_N 16384
#define SAMPLE 2048

/* Sample positions on either side of the one for quantile p: the sample
 * quantile's standard deviation is sqrt(p (1 - p) / SAMPLE) in rank
 * fraction, sqrt(p (1 - p) SAMPLE) in sample positions (about 10 for the
 * 5 % quantile, 23 for the median).  Narrower brackets leave fewer
 * elements to select among; a miss costs a quickselect, never a wrong
 * answer. */
static size_t margin(double p) {
  return (size_t)(4 * sqrt(p * (1 - p) * SAMPLE)) + 8;
}

typedef struct bracket {
  double *in; /* the elements inside it, at most cap (and a spare slot) */
  size_t cap;
  const double *sample; /* sorted, SAMPLE elements */
} bracket;

/* The values at sorted positions r and r + 1 (when `two`) of x[0..n), or
 * false. */
static bool bracket_select(const bracket *b, const double *x, size_t n,
                           size_t r, bool two, double *a, double *next) {
  size_t c = (size_t)((double)r / (double)n * SAMPLE);
  size_t m = margin((double)r / (double)n);
  double lo = c >= m ? b->sample[c - m] : -INFINITY;
  double hi = c + m < SAMPLE ? b->sample[c + m] : INFINITY;
  size_t below = 0, k = 0;
  for (size_t i = 0; i < n; i++) {
    double v = x[i];
    bool inside = (v >= lo) & (v <= hi); /* &, not &&: no branch */
    below += v < lo;
    b->in[k < b->cap ? k : b->cap] = v; /* kept only when inside */
    k += inside;
  }
  if (k > b->cap || below > r || r + two >= below + k)
    return false;
  *a = select_kth(b->in, k, r - below);
  *next = *a;
  for (size_t i = r - below + 1; two && i < k; i++)
    if (i == r - below + 1 || b->in[i] < *next)
      *next = b->in[i]; /* everything after r is >= a: r + 1 is their min */
  return true;
}

/* Samples x[0..n) (n >= BRACKET_MIN_N) into `sample`; false when out of
 * memory.  x is left as it was. */
static bool bracket_init(bracket *b, const double *x, size_t n,
                         double *sample) {
  for (size_t t = 0; t < SAMPLE; t++)
    sample[t] = x[(size_t)((double)t / SAMPLE * (double)n)];
  qsort(sample, SAMPLE, sizeof *sample, cmp_double);
  b->sample = sample;
  b->cap = n / 8;
  b->in = malloc((b->cap + 1) * sizeof *b->in); /* + 1: overflow slot */
  return b->in != NULL;
}

void rk_quantiles(double *x, size_t n, const double *q, double *out, size_t m) {
  /* the zeros' signs are read in the original order, before x moves */
  zero_ranks z = count_zeros(x, n);
  bool nan = n == 0 || z.nan;
  for (size_t j = 0; nan && j < m; j++)
    out[j] = NAN;
  if (nan)
    return;
  np_qpos pos[m ? m : 1];
  int sign_lo[m ? m : 1], sign_hi[m ? m : 1];
  for (size_t j = 0; j < m; j++) {
    pos[j] = np_quantile_pos(n, q[j]);
    sign_lo[j] = zero_sign_at(x, n, z, pos[j].lo);
    sign_hi[j] = zero_sign_at(x, n, z, pos[j].hi);
  }
  double *sample = n >= BRACKET_MIN_N ? malloc(SAMPLE * sizeof *sample) : NULL;
  bracket br = {0};
  bool bracketing = sample && bracket_init(&br, x, n, sample);
  for (size_t j = 0; j < m; j++) {
    bool two = pos[j].hi > pos[j].lo;
    double a, b;
    if (!bracketing || !bracket_select(&br, x, n, pos[j].lo, two, &a, &b)) {
      bracketing = false; /* the data defeat the sample: select as before */
      a = b = select_kth(x, n, pos[j].lo);
      for (size_t i = pos[j].lo + 1; two && i < n; i++)
        if (i == pos[j].lo + 1 || x[i] < b)
          b = x[i]; /* everything after lo is >= a: hi is their minimum */
    }
    out[j] = np_quantile_lerp(pos[j], with_zero_sign(a, sign_lo[j]),
                              with_zero_sign(b, sign_hi[j]));
  }
  free(br.in);
  free(sample);
}

/* ---- float32 tensors: selection on the floats' bits ----
 *
 * PoorWeightInitialization asks for two quantiles of every gradient it
 * checks.  Widening a million float32 to doubles and selecting among
 * them cost about 6 ns per element.  Here the floats are read where they
 * lie: each float's bits become an unsigned key in the floats' order, one
 * pass counts the keys by their top TOP_BITS bits, a second copies out
 * the few keys whose top bits are those of a wanted rank, and each rank
 * is found among those by two more digits (radix selection).  Every pass is
 * linear, so no data can make it slower than that, and the value found
 * is the one the double path selects: widening keeps the order. */
#define TOP_BITS 12
#define TOP_BINS (1u << TOP_BITS)
#define TOP_SHIFT (32 - TOP_BITS)
#define RADIX_MIN_N 16384

/* -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN as unsigned keys: a
 * negative float's bits are all flipped, a positive one's sign bit. */
static uint32_t f32_key(uint32_t bits) {
  return bits ^ ((uint32_t) - (int32_t)(bits >> 31) | 0x80000000u);
}

static float key_value(uint32_t key) {
  uint32_t bits = key & 0x80000000u ? key ^ 0x80000000u : ~key;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static uint32_t key_at(const unsigned char *p, size_t i) {
  uint32_t bits;
  memcpy(&bits, p + i * sizeof bits, sizeof bits);
  return f32_key(bits);
}

/* hist[b] = number of keys whose top bits are b.  Two tables, even and
 * odd elements: runs of equal values would otherwise wait on their own
 * increments. */
static void count_top(const unsigned char *p, size_t n, uint32_t *hist) {
  uint32_t *odd = hist + TOP_BINS;
  size_t i = 0;
  for (; i + 2 <= n; i += 2) {
    hist[key_at(p, i) >> TOP_SHIFT]++;
    odd[key_at(p, i + 1) >> TOP_SHIFT]++;
  }
  if (i < n)
    hist[key_at(p, i) >> TOP_SHIFT]++;
  for (uint32_t b = 0; b < TOP_BINS; b++)
    hist[b] += odd[b];
}

/* The top bins below key(-inf) + 1 and above key(+inf) - 1 hold only
 * infinities and NaNs: the exact test runs only when they are not empty. */
static bool has_nan_f32(const unsigned char *p, size_t n,
                        const uint32_t *hist) {
  uint32_t edge = 0;
  for (uint32_t b = 0; b < (1u << (TOP_BITS - 9)); b++)
    edge |= hist[b] | hist[TOP_BINS - 1 - b];
  for (size_t i = 0; edge && i < n; i++) {
    uint32_t bits;
    memcpy(&bits, p + i * sizeof bits, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
      return true;
  }
  return false;
}

/* The sign bit of the zero a stable sort puts at position k (a zero is
 * there): the zeros keep their order of the array. */
static int zero_sign_f32(const unsigned char *p, size_t n, size_t k) {
  size_t neg = 0;
  for (size_t i = 0; i < n; i++) {
    float f;
    memcpy(&f, p + i * sizeof f, sizeof f);
    neg += f < 0;
  }
  size_t rank = k - neg;
  for (size_t i = 0; i < n; i++) {
    float f;
    memcpy(&f, p + i * sizeof f, sizeof f);
    if (f == 0 && rank-- == 0)
      return signbit(f) ? 1 : 0;
  }
  return -1;
}

/* Ranks wanted by m quantiles: pos[j].lo and pos[j].hi, 2 m of them. */
typedef struct rank_plan {
  uint32_t *hist;      /* TOP_BINS counts (two tables while counting) */
  size_t *below;       /* keys in lower top bins, TOP_BINS + 1 */
  unsigned char *want; /* TOP_BINS flags: a wanted rank's top bin */
  uint32_t *keys;      /* the keys of the wanted bins, in array order */
  size_t nkeys;
} rank_plan;

/* Copies out the keys of the wanted top bins, without a branch per
 * element; false when out of memory. */
static bool collect_wanted(rank_plan *pl, const unsigned char *p, size_t n) {
  size_t cap = 0;
  for (uint32_t b = 0; b < TOP_BINS; b++)
    cap += pl->want[b] ? pl->hist[b] : 0;
  pl->keys = malloc((cap + 1) * sizeof *pl->keys); /* + 1: the spare slot */
  if (!pl->keys)
    return false;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t key = key_at(p, i);
    pl->keys[k] = key;
    k += pl->want[key >> TOP_SHIFT];
  }
  pl->nkeys = k;
  return true;
}

/* One digit of the keys that match `prefix` under `mask`: counts them
 * by (key >> shift) & (digits - 1) into hist, and returns the digit that
 * holds rank *r among them (*r becomes the rank within it). */
static uint32_t next_digit(const uint32_t *k, size_t n, uint32_t prefix,
                           uint32_t mask, unsigned shift, uint32_t digits,
                           uint32_t *hist, size_t *r) {
  memset(hist, 0, digits * sizeof *hist);
  for (size_t i = 0; i < n; i++) /* no branch: += whether it matches */
    hist[(k[i] >> shift) & (digits - 1)] += (k[i] & mask) == prefix;
  uint32_t d = 0;
  while (*r >= hist[d])
    *r -= hist[d++];
  return d;
}

/* The key at sorted position r: its top bits from the counts, the rest
 * from the collected keys by two digits (12 and 8 bits).  Sets *next to
 * the key at r + 1 when the last digit's counts show it, else to r's key
 * with *has_next false. */
static uint32_t key_at_rank(const rank_plan *pl, size_t r, uint32_t *next,
                            bool *has_next) {
  uint32_t bin = 0;
  while (pl->below[bin + 1] <= r)
    bin++;
  r -= pl->below[bin];
  uint32_t *hist = pl->hist + TOP_BINS; /* free since count_top */
  uint32_t prefix = bin << TOP_SHIFT, mask = 0xfff00000u;
  prefix |= next_digit(pl->keys, pl->nkeys, prefix, mask, 8, 4096, hist, &r)
            << 8;
  mask |= 0x000fff00u;
  uint32_t low =
      next_digit(pl->keys, pl->nkeys, prefix, mask, 0, 256, hist, &r);
  uint32_t key = prefix | low, after = low;
  if (r + 1 >= hist[low]) /* no equal key after r: the next larger one */
    while (++after < 256 && hist[after] == 0)
      ;
  *has_next = after < 256;
  *next = prefix | (after < 256 ? after : low);
  return key;
}

/* The float of `key` at sorted position r, with the sign a stable sort
 * gives a zero there. */
static double value_of(const unsigned char *p, size_t n, uint32_t key,
                       size_t r) {
  double v = key_value(key);
  return with_zero_sign(v, v == 0 ? zero_sign_f32(p, n, r) : -1);
}

static int quantiles_f32(const unsigned char *p, size_t n, const double *q,
                         double *out, size_t m) {
  rank_plan pl = {0};
  pl.hist = calloc(2 * TOP_BINS, sizeof *pl.hist);
  pl.below = malloc((TOP_BINS + 1) * sizeof *pl.below);
  pl.want = calloc(TOP_BINS, 1);
  int rc = -1;
  if (!pl.hist || !pl.below || !pl.want)
    goto out;
  count_top(p, n, pl.hist);
  if (has_nan_f32(p, n, pl.hist)) {
    for (size_t j = 0; j < m; j++)
      out[j] = NAN;
    rc = 0;
    goto out;
  }
  pl.below[0] = 0;
  for (uint32_t b = 0; b < TOP_BINS; b++)
    pl.below[b + 1] = pl.below[b] + pl.hist[b];
  for (size_t j = 0; j < m; j++) {
    np_qpos pos = np_quantile_pos(n, q[j]);
    for (uint32_t b = 0; b < TOP_BINS; b++)
      pl.want[b] |= (pl.below[b] <= pos.lo && pos.lo < pl.below[b + 1]) ||
                    (pl.below[b] <= pos.hi && pos.hi < pl.below[b + 1]);
  }
  if (!collect_wanted(&pl, p, n))
    goto out;
  for (size_t j = 0; j < m; j++) {
    np_qpos pos = np_quantile_pos(n, q[j]);
    uint32_t kb, unused;
    bool known;
    uint32_t ka = key_at_rank(&pl, pos.lo, &kb, &known);
    if (pos.hi > pos.lo && !known)
      kb = key_at_rank(&pl, pos.hi, &unused, &known);
    double a = value_of(p, n, ka, pos.lo);
    out[j] = np_quantile_lerp(pos, a,
                              pos.hi > pos.lo ? value_of(p, n, kb, pos.hi) : a);
  }
  rc = 0;
out:
  free(pl.hist);
  free(pl.below);
  free(pl.want);
  free(pl.keys);
  return rc;
}

/* ---- float32 tensors: a sampled bracket and one vector pass ----
 *
 * The radix selection above makes two passes over the floats, each with
 * a table access per element: about 1.4 ns per element.  For one or two
 * quantiles (PoorWeightInitialization asks for the 5 % and the 95 %) a
 * sorted sample of the floats names, for each quantile, two floats
 * lo <= hi that bracket its ranks with a margin of sample positions (Floyd
 * and Rivest's selection).  One pass, eight floats at a time, counts the
 * elements below and at each bracket's ends and copies those strictly
 * inside it into a scratch array of bounded size, one per bracket.  The
 * counts then say whether a rank is an end (its value known), inside (it
 * is found among the copies) or missed.  A miss (an unlucky sample, data
 * made to defeat it) or a full scratch falls back to the radix selection
 * over the whole array: an order statistic is a value, so both ways give
 * the same bits.  Zeros compare equal here, as in a sort of floats; the
 * sign of a zero found is decided afterwards from the whole array, as
 * before (value_of). */
#define FR_SAMPLE_MAX 16384
#define FR_CHUNK 1024 /* floats between the vector pass's room checks */

static int fr_squeeze; /* rk_squeeze_bracket */

void rk_squeeze_bracket(int how) {
  fr_squeeze = how;
}

/* A bracket's ends, what the pass counts against them, and its copies. */
typedef struct fr_bracket {
  float lo, hi;
  size_t lt_lo, le_lo, lt_hi, le_hi; /* elements < lo, <= lo, < hi, <= hi
                                        (lt_hi from the others and k) */
  float *copy; /* the elements with lo < x < hi, in array order */
  size_t k;    /* how many there were (> cap: the scratch overflowed) */
} fr_bracket;

typedef struct fr_pass {
  fr_bracket br[2]; /* one quantile: the same bracket twice */
  size_t cap;       /* room in each scratch */
  bool nan;
} fr_pass;

/* The pass over p[from..to), element by element (the portable pass, and
 * the vector pass's tail). */
static void fr_scan(fr_pass *f, const unsigned char *p, size_t from,
                    size_t to) {
  for (size_t i = from; i < to; i++) {
    float x;
    memcpy(&x, p + i * sizeof x, sizeof x);
    for (int b = 0; b < 2; b++) {
      fr_bracket *r = &f->br[b];
      r->lt_lo += x < r->lo;
      r->le_lo += x <= r->lo;
      r->le_hi += x <= r->hi;
      r->copy[r->k < f->cap ? r->k : f->cap] = x; /* kept when inside */
      r->k += (x > r->lo) & (x < r->hi);          /* &: no branch */
    }
    f->nan |= x != x;
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <pthread.h>

/* fr_order[mask]: the lanes set in mask, in order, as byte indices: the
 * permutation that packs the inside lanes of a vector to its front. */
static uint8_t fr_order[256][8];
static pthread_once_t fr_order_once = PTHREAD_ONCE_INIT;

static void fr_order_init(void) {
  for (int m = 0; m < 256; m++) {
    int k = 0;
    for (int lane = 0; lane < 8; lane++)
      if (m >> lane & 1)
        fr_order[m][k++] = (uint8_t)lane;
  }
}

typedef float fr_v8f __attribute__((vector_size(32)));
typedef int32_t fr_v8i __attribute__((vector_size(32)));

/* One bracket's part of a vector step: its compares of x counted (-1
 * where true, so subtracted), and the lanes strictly inside packed to its
 * scratch at *k. */
__attribute__((target("avx2"))) static inline void
fr_step(fr_v8f x, fr_v8f lo, fr_v8f hi, fr_v8i *count, float *copy, size_t *k) {
  fr_v8i le_lo = x <= lo;
  count[0] -= x < lo;
  count[1] -= le_lo;
  count[2] -= x <= hi;
  unsigned mask = (unsigned)_mm256_movemask_ps((__m256)(~le_lo & (x < hi)));
  __m128i order = _mm_loadl_epi64((const __m128i *)fr_order[mask]);
  __m256 packed =
      _mm256_permutevar8x32_ps((__m256)x, _mm256_cvtepu8_epi32(order));
  _mm256_storeu_ps(copy + *k, packed);
  *k += (size_t)__builtin_popcount(mask);
}

/* The same pass eight floats at a time on AVX2 machines (the build
 * targets the x86-64 baseline: these functions alone are compiled for
 * AVX2 with the GCC/Clang `target` attribute and chosen at run time).
 * The compares are the scalar ones, lane by lane, so the counts and the
 * copies (in array order) are the same.  Counts are kept in 32-bit lanes:
 * at most n / 8 <= 2^29 per lane.  The room left is checked once per
 * chunk of FR_CHUNK floats, not per store; a scratch full after a chunk
 * ends the pass (the caller then selects over the whole array).  Returns
 * where the vector steps stopped.
 *
 * The scalar rest is scanned by the caller, not from here: GCC compiled a
 * call at the end of this function as a jump (a tail call) without the
 * vzeroupper it puts before every return, so the upper halves of the YMM
 * registers stayed in use after the pass, and every SSE instruction of the
 * thread afterwards (other rules' kernels, the reader's decoding) ran up
 * to twice as slow on this AMD Zen 4 until something cleared them
 * (bench/README.md, section 14).  test_rulekit_kernels checks that no
 * kernel returns with them in use. */
__attribute__((target("avx2"))) static size_t
fr_scan_avx2(fr_pass *f, const unsigned char *p, size_t n) {
  const fr_v8f zero = {0};
  fr_v8f lo0 = zero + f->br[0].lo, hi0 = zero + f->br[0].hi;
  fr_v8f lo1 = zero + f->br[1].lo, hi1 = zero + f->br[1].hi;
  fr_v8i c0[3] = {{0}}, c1[3] = {{0}}, nan = {0};
  float *copy0 = f->br[0].copy, *copy1 = f->br[1].copy;
  size_t k0 = f->br[0].k, k1 = f->br[1].k, cap = f->cap, i = 0;
  while (n - i >= 8 && k0 <= cap && k1 <= cap) { /* a chunk at a time */
    size_t end = i + (n - i >= FR_CHUNK ? FR_CHUNK : (n - i) / 8 * 8);
    for (; i < end; i += 8) {
      fr_v8f x;
      memcpy(&x, p + i * sizeof(float), sizeof x);
      fr_step(x, lo0, hi0, c0, copy0, &k0);
      fr_step(x, lo1, hi1, c1, copy1, &k1);
      nan |= x != x;
    }
  }
  for (int l = 0; l < 8; l++) {
    size_t *r0[3] = {&f->br[0].lt_lo, &f->br[0].le_lo, &f->br[0].le_hi};
    size_t *r1[3] = {&f->br[1].lt_lo, &f->br[1].le_lo, &f->br[1].le_hi};
    for (int c = 0; c < 3; c++) {
      *r0[c] += (uint32_t)c0[c][l];
      *r1[c] += (uint32_t)c1[c][l];
    }
    f->nan |= nan[l] != 0;
  }
  f->br[0].k = k0;
  f->br[1].k = k1;
  return i;
}

static void fr_scan_best(fr_pass *f, const unsigned char *p, size_t n) {
  if (rk_use_avx2()) {
    pthread_once(&fr_order_once, fr_order_init);
    size_t i = fr_scan_avx2(f, p, n);
    if (f->br[0].k <= f->cap && f->br[1].k <= f->cap) /* else: fall back */
      fr_scan(f, p, i, n);
  } else {
    fr_scan(f, p, 0, n);
  }
}
#else
static void fr_scan_best(fr_pass *f, const unsigned char *p, size_t n) {
  fr_scan(f, p, 0, n);
}
#endif

/* Sorts s keys by three 11-bit digits, least significant first. */
static void sort_keys(uint32_t *key, uint32_t *tmp, size_t s) {
  for (unsigned shift = 0; shift < 32; shift += 11) {
    uint32_t count[2049] = {0};
    for (size_t i = 0; i < s; i++)
      count[(key[i] >> shift & 2047) + 1]++;
    for (int d = 0; d < 2048; d++)
      count[d + 1] += count[d];
    for (size_t i = 0; i < s; i++)
      tmp[count[key[i] >> shift & 2047]++] = key[i];
    memcpy(key, tmp, s * sizeof *key);
  }
}

/* Sample positions on either side of the one for rank fraction p: three
 * standard deviations of the sample quantile's position,
 * sqrt(p (1 - p) s), and a few more. */
static size_t fr_margin(double p, size_t s) {
  if (fr_squeeze == RK_BRACKET_NO_MARGIN)
    return 0;
  return (size_t)(3 * sqrt(p * (1 - p) * (double)s)) + 4;
}

/* The ends of the bracket of rank r from the sorted sample keys. */
static size_t fr_bracket_of(fr_bracket *b, const uint32_t *sorted, size_t s,
                            size_t r, size_t n) {
  double frac = ((double)r + 0.5) / (double)n;
  size_t c = (size_t)(frac * (double)s), m = fr_margin(frac, s);
  b->lo = c >= m ? key_value(sorted[c - m]) : -INFINITY;
  b->hi = c + m < s ? key_value(sorted[c + m]) : INFINITY;
  return m;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

static uint32_t key_of(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  return f32_key(bits);
}

/* The keys at ranks idx[0] <= idx[ni - 1] (ni <= 2) among bracket b's
 * copies.  Their keys lie between b's ends' keys: 4096 bins spread over
 * that span count them, and the few in the wanted bins are sorted.  0, or
 * -1 out of memory. */
static int inside_keys(const fr_bracket *b, const size_t *idx, size_t ni,
                       uint32_t *key) {
  uint32_t klo = key_of(b->lo), span = key_of(b->hi) - klo;
  unsigned shift = 0;
  while ((span >> shift) >= TOP_BINS)
    shift++;
  uint32_t *hist = calloc(TOP_BINS, sizeof *hist);
  if (!hist)
    return -1;
  for (size_t i = 0; i < b->k; i++)
    hist[(key_of(b->copy[i]) - klo) >> shift]++;
  uint32_t first = 0, last;
  size_t before = 0; /* copies in the bins below `first` */
  while (before + hist[first] <= idx[0])
    before += hist[first++];
  size_t room = hist[first], upto = before + hist[first];
  for (last = first; upto <= idx[ni - 1];)
    room += hist[++last], upto += hist[last];
  uint32_t *in = malloc((room + 1) * sizeof *in); /* + 1: the spare slot */
  if (!in) {
    free(hist);
    return -1;
  }
  size_t got = 0;
  for (size_t i = 0; i < b->k; i++) { /* no branch: append, keep or not */
    uint32_t kx = key_of(b->copy[i]);
    in[got] = kx;
    got += ((kx - klo) >> shift) - first <= last - first;
  }
  qsort(in, got, sizeof *in, cmp_u32);
  for (size_t j = 0; j < ni; j++)
    key[j] = in[idx[j] - before];
  free(in);
  free(hist);
  return 0;
}

/* Where rank r is: 0 outside the bracket (missed), 1 an end of it (its
 * key in *key), 2 strictly inside (its rank among the copies in *inner). */
static int fr_where(const fr_bracket *b, size_t r, uint32_t *key,
                    size_t *inner) {
  if (r < b->lt_lo || r >= b->le_hi)
    return 0;
  if (r < b->le_lo || r >= b->lt_hi) {
    *key = key_of(r < b->le_lo ? b->lo : b->hi);
    return 1;
  }
  *inner = r - b->le_lo;
  return 2;
}

/* The keys at ranks pos.lo and pos.hi by bracket b: true, false when
 * missed (or out of memory). */
static bool fr_keys(const fr_bracket *b, np_qpos pos, uint32_t *ka,
                    uint32_t *kb) {
  size_t inner[2], ninner = 0;
  uint32_t got[2];
  int wa = fr_where(b, pos.lo, ka, &inner[0]);
  int wb = fr_where(b, pos.hi, kb, &inner[wa == 2]);
  if (!wa || !wb)
    return false;
  ninner = (wa == 2) + (wb == 2);
  if (ninner && inside_keys(b, inner, ninner, got) != 0)
    return false;
  if (wa == 2)
    *ka = got[0];
  if (wb == 2)
    *kb = got[wa == 2];
  return true;
}

/* 1 with out[0..m) set (m is 1 or 2), 0 when a bracket missed or a
 * scratch overflowed (nothing set), -1 out of memory. */
static int quantiles_f32_bracket(const unsigned char *p, size_t n,
                                 const double *q, double *out, size_t m) {
  /* a larger sample for a larger array: fewer copies (their number
   * shrinks as 1 / sqrt(s)) for a sort that stays small beside the pass */
  size_t s = n / 128 > FR_SAMPLE_MAX ? FR_SAMPLE_MAX
             : n / 128 > 1024        ? n / 128
             : n / 16 < 1024         ? n / 16
                                     : 1024;
  fr_pass f = {0};
  uint32_t *sample = malloc(2 * s * sizeof *sample);
  int rc = -1;
  if (!sample)
    goto out;
  /* one element from each of s equal stretches, at a fixed pseudo-random
   * place in it: no period of the data lines up with the sample */
  uint64_t h = 0x9e3779b97f4a7c15u;
  for (size_t t = 0; t < s; t++) {
    h ^= h << 13;
    h ^= h >> 7;
    h ^= h << 17;
    size_t from = t * n / s, len = (t + 1) * n / s - from;
    sample[t] = key_at(p, from + (size_t)((h >> 32) * len >> 32));
  }
  sort_keys(sample, sample + s, s);
  np_qpos pos[2];
  size_t widest = 0;
  for (size_t j = 0; j < 2; j++) {
    pos[j] = np_quantile_pos(n, q[j < m ? j : 0]);
    size_t w = fr_bracket_of(&f.br[j], sample, s, pos[j].lo, n);
    widest = w > widest ? w : widest;
  }
  /* room for 1.5 times the copies a bracket of 2 widest sample positions
   * holds on average; + FR_CHUNK: what a chunk may add before the check */
  f.cap = (size_t)((double)n * 3.0 * (double)widest / (double)s);
  f.cap = f.cap < n ? f.cap : n;
  if (fr_squeeze == RK_BRACKET_NO_ROOM)
    f.cap = 0;
  f.br[0].copy = malloc((f.cap + FR_CHUNK) * sizeof(float));
  f.br[1].copy = malloc((f.cap + FR_CHUNK) * sizeof(float));
  if (!f.br[0].copy || !f.br[1].copy)
    goto out;
  fr_scan_best(&f, p, n);
  for (int b = 0; b < 2; b++) /* below hi: at or below lo, or inside */
    f.br[b].lt_hi =
        f.br[b].lo < f.br[b].hi ? f.br[b].le_lo + f.br[b].k : f.br[b].lt_lo;
  rc = 1;
  if (f.nan) {
    for (size_t j = 0; j < m; j++)
      out[j] = NAN;
    goto out;
  }
  uint32_t ka[2], kb[2];
  for (size_t j = 0; j < m && rc == 1; j++)
    if (f.br[j].k > f.cap || !fr_keys(&f.br[j], pos[j], &ka[j], &kb[j]))
      rc = 0;
  for (size_t j = 0; j < m && rc == 1; j++) {
    double a = value_of(p, n, ka[j], pos[j].lo);
    out[j] = np_quantile_lerp(
        pos[j], a,
        pos[j].hi > pos[j].lo ? value_of(p, n, kb[j], pos[j].hi) : a);
  }
out:
  free(sample);
  free(f.br[0].copy);
  free(f.br[1].copy);
  return rc;
}

int rk_tensor_quantiles(const smrules_tensor *t, const double *q, double *out,
                        size_t m) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  bool strings = t->dtype == SMRULES_DT_STRING || (t->strings && !t->data);
  if (!strings && t->dtype == SMRULES_DT_FLOAT && t->data &&
      t->count >= RADIX_MIN_N && (uint64_t)t->count <= UINT32_MAX) {
    if ((m == 1 || m == 2) &&
        quantiles_f32_bracket(t->data, (size_t)t->count, q, out, m) == 1)
      return 0;
    return quantiles_f32(t->data, (size_t)t->count, q, out, m);
  }
#endif
  double *x = rk_values(t);
  if (!x && t->count > 0)
    return -1;
  rk_quantiles(x, t->count > 0 ? (size_t)t->count : 0, q, out, m);
  free(x);
  return 0;
}
