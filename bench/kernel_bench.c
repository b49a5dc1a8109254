/* kernel_bench.c - each per-element rule's own pass over float32 tensors
 * in memory, in GB/s on one core (bench/README.md, section 14).
 *
 * The functions timed are the ones the rules call: the rule kit's kernels
 * (plugins/kit/kernels.h, rulekit.h), WeightUpdateRatio's norm kernel and
 * the host's statistics (core/format/tensor.h: the counts AllZero and
 * ExplodingTensor ask for, the variance TensorVariance and
 * PoorWeightInitialization ask for, the L2 norm WeightUpdateRatio divides
 * by).  Each is timed over tensors of three sizes: 1 MiB (in L2), 12.6 MB
 * (a ReLU output or the dense layer of bench 12's CNN trial; in L3 where L3
 * is 16 MB or more) and 128 MiB (in no cache), and beside each size a
 * memcpy and a plain read of the same bytes, in the same run.
 *
 * GB/s are bytes of the tensors a pass reads (both tensors for a pair) per
 * second of the thread's CPU time (the machine is shared; wall time is
 * printed too), the median of KERNEL_REPEAT samples (default 7) after one
 * warm-up pass.  The process is pinned to the CPU it starts on.
 *
 * KERNEL_SIZES (e.g. "1MiB,12.6MB") and KERNEL_ROWS (e.g. "DeadRelu,argmax")
 * keep the sizes and rows named; memcpy is always measured.
 *
 * Output: a table on stdout, and RESULT lines "kernel_<row>_<size> GBPS". */
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format/tensor.h"
#include "kernels.h"
#include "smrules/rulekit.h"
#include "update_norm.h"

static int repeat = 7;
static volatile double sink;

/* ------------------------------------------------------------ data */

static uint64_t rng = 0x9e3779b97f4a7c15u;

static double uniform(void) { /* [0, 1) */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

static float *floats(size_t n) {
  float *p = malloc(n * sizeof *p);
  if (!p) {
    fprintf(stderr, "kernel_bench: out of memory\n");
    exit(1);
  }
  return p;
}

/* ReLU outputs: a quarter of the units dead, the others active about half
 * the time. */
static void fill_relu(float *x, size_t batch, size_t units) {
  for (size_t b = 0; b < batch; b++)
    for (size_t u = 0; u < units; u++) {
      double r = uniform();
      x[b * units + u] = (u % 4 == 0 || r < 0.5) ? 0.0f : (float)r;
    }
}

static void fill_normal(float *x, size_t n, double scale) {
  for (size_t i = 0; i < n; i++) /* sum of uniforms, close enough */
    x[i] = (float)(scale * (uniform() + uniform() + uniform() - 1.5));
}

/* ------------------------------------------------------------ timing */

static double now(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct job job;
typedef void pass_fn(job *j);

struct job {
  const char *row;
  pass_fn *pass;
  size_t bytes; /* what one pass reads */
  smrules_tensor a, b;
  smr_tensor ca;
  update_pair pairs[4];
  size_t npairs;
  void *dst;
};

typedef struct speed {
  double cpu, wall; /* GB/s, medians */
} speed;

/* The pass, repeated so that a sample lasts >= ~20 ms of work. */
static speed measure(job *j) {
  size_t reps =
      j->bytes >= ((size_t)64 << 20) ? 1 : ((size_t)64 << 20) / j->bytes;
  double cpu[64], wall[64];
  j->pass(j); /* warm-up: caches, pages, branch history */
  for (int r = 0; r < repeat && r < 64; r++) {
    double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_THREAD_CPUTIME_ID);
    for (size_t k = 0; k < reps; k++)
      j->pass(j);
    double c1 = now(CLOCK_THREAD_CPUTIME_ID), w1 = now(CLOCK_MONOTONIC);
    double gb = (double)j->bytes * (double)reps / 1e9;
    cpu[r] = gb / (c1 - c0 > 1e-9 ? c1 - c0 : 1e-9);
    wall[r] = gb / (w1 - w0 > 1e-9 ? w1 - w0 : 1e-9);
  }
  int n = repeat < 64 ? repeat : 64;
  qsort(cpu, (size_t)n, sizeof *cpu, cmp_double);
  qsort(wall, (size_t)n, sizeof *wall, cmp_double);
  return (speed){cpu[n / 2], wall[n / 2]};
}

/* ------------------------------------------------------------ passes */

static void pass_memcpy(job *j) {
  memcpy(j->dst, j->a.data, j->bytes);
  sink = ((const float *)j->dst)[j->bytes / 8];
}

/* A plain read: 64-bit words or'ed together, which the compiler
 * vectorises. */
static void pass_read(job *j) {
  const unsigned char *p = j->a.data;
  uint64_t acc = 0;
  for (size_t i = 0; i + 8 <= j->bytes; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, sizeof w);
    acc |= w;
  }
  sink = (double)acc;
}

static void pass_dead_relu(job *j) {
  double pct;
  rk_inactive_units_above(&j->a, 0, 1.0, &pct);
  sink = pct;
}

static void pass_saturated(job *j) {
  double pct;
  rk_inactive_units_between(&j->a, -0.97, 0.97, 1.0, &pct);
  sink = pct;
}

static void pass_counts(job *j) {
  smr_stats s;
  smr_error e;
  smr_tensor_counts(&j->ca, &s, &e);
  sink = (double)s.zeros;
}

static void pass_allclose(job *j) {
  sink = rk_allclose(&j->a, &j->b, 1e-5, 1e-8, true, NULL);
}

static void pass_update_norms(job *j) {
  double out[4];
  update_norms_f32(j->pairs, j->npairs, out);
  sink = out[0];
}

static void pass_l2(job *j) {
  double v;
  smr_error e;
  smr_tensor_reduce(&j->ca, SMR_RED_L2, false, &v, &e);
  sink = v;
}

static void pass_variance(job *j) {
  double v;
  smr_error e;
  smr_tensor_reduce(&j->ca, SMR_RED_VARIANCE, false, &v, &e);
  sink = v;
}

static void pass_quantiles(job *j) {
  static const double q[2] = {0.95, 0.05};
  double at[2];
  rk_tensor_quantiles(&j->a, q, at, 2);
  sink = at[0] - at[1];
}

static void pass_channel_sums(job *j) {
  double sum[64] = {0};
  int64_t outer, inner;
  rk_channel_sums(&j->a, 1, sum, &outer, &inner);
  sink = sum[0];
}

static void pass_argmax(job *j) {
  size_t n;
  double *v = rk_argmax_last_axis(&j->a, &n);
  sink = v ? v[n / 2] : 0;
  free(v);
}

/* ------------------------------------------------------------ table */

static smrules_tensor tensor4(const float *x, int64_t d0, int64_t d1,
                              int64_t d2, int64_t d3) {
  smrules_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = SMRULES_DT_FLOAT;
  t.ndim = d3 ? 4 : d2 ? 3 : 2;
  t.shape[0] = d0;
  t.shape[1] = d1;
  t.shape[2] = d2;
  t.shape[3] = d3;
  t.count = d0 * d1 * (d2 ? d2 : 1) * (d3 ? d3 : 1);
  t.data = x;
  t.nbytes = (size_t)t.count * sizeof(float);
  return t;
}

static smr_tensor core_of(const smrules_tensor *t) {
  smr_tensor c;
  memset(&c, 0, sizeof c);
  c.dtype = c.stored_dtype = SMR_DT_FLOAT;
  c.ndim = t->ndim;
  for (int i = 0; i < t->ndim; i++)
    c.shape[i] = t->shape[i];
  c.count = t->count;
  c.data = t->data;
  c.nbytes = t->nbytes;
  return c;
}

static double memcpy_gbps;
static const char *only_rows; /* KERNEL_ROWS: rows whose name has one */

static bool wanted(const char *name) {
  if (!only_rows || strcmp(name, "memcpy") == 0)
    return true;
  const char *p = only_rows;
  while (*p) {
    size_t len = strcspn(p, ",");
    if (len && memmem(name, strlen(name), p, len))
      return true;
    p += len + (p[len] == ',');
  }
  return false;
}

static void row(const char *size, job *j, bool baseline) {
  if (!wanted(j->row))
    return;
  speed s = measure(j);
  char key[96];
  snprintf(key, sizeof key, "kernel_%s_%s", j->row, size);
  for (char *p = key; *p; p++)
    if (*p == ' ' || *p == '/' || *p == '(' || *p == ')' || *p == ',')
      *p = '_';
  if (strcmp(j->row, "memcpy") == 0)
    memcpy_gbps = s.cpu;
  printf("%-34s %-8s %8.2f %9.2f %8.2f  %-7s %s\n", j->row, size, s.cpu, s.wall,
         s.cpu / memcpy_gbps, baseline ? "-" : ">= 8",
         baseline     ? "info"
         : s.cpu >= 8 ? "PASS"
                      : "MISS");
  printf("RESULT %s %.3f\n", key, s.cpu);
  fflush(stdout);
}

/* Every row over tensors of n floats (n a multiple of 32 * 96). */
static void size_rows(const char *size, size_t n) {
  float *x = floats(n), *y = floats(n), *z = floats(n), *relu = floats(n);
  float *img = floats(n), *xc = floats(n);
  float *dst = floats(n);
  fill_normal(x, n, 0.05);
  for (size_t i = 0; i < n; i++) /* a step's small update */
    y[i] = x[i] + (float)(1e-4 * (uniform() - 0.5));
  memcpy(xc, x, n * sizeof *x);  /* equal to x, elsewhere in memory */
  for (size_t i = 0; i < n; i++) /* close to x, every element different */
    z[i] = nextafterf(x[i], INFINITY);
  fill_relu(relu, 32, n / 32);
  for (size_t i = 0; i < n; i++)
    img[i] = (float)uniform();
  size_t bytes = n * sizeof(float);
  smrules_tensor tx = tensor4(x, 32, (int64_t)n / 32, 0, 0);
  job j = {.bytes = bytes, .a = tx, .dst = dst};

  j.row = "memcpy";
  j.pass = pass_memcpy;
  row(size, &j, true);
  j.row = "read";
  j.pass = pass_read;
  row(size, &j, true);

  j.a = tensor4(relu, 32, (int64_t)n / 32, 0, 0);
  j.row = "DeadRelu units";
  j.pass = pass_dead_relu;
  row(size, &j, false);
  j.a = tx;
  j.row = "SaturatedActivation units";
  j.pass = pass_saturated;
  row(size, &j, false);

  j.a = tensor4(relu, 32, (int64_t)n / 32, 0, 0);
  j.ca = core_of(&j.a);
  j.row = "AllZero/ExplodingTensor counts";
  j.pass = pass_counts;
  row(size, &j, false);

  j.a = tx;
  j.b = tensor4(xc, 32, (int64_t)n / 32, 0, 0);
  j.bytes = 2 * bytes;
  j.row = "UnchangedTensor allclose, same";
  j.pass = pass_allclose;
  row(size, &j, false);
  j.b = tensor4(z, 32, (int64_t)n / 32, 0, 0);
  j.row = "UnchangedTensor allclose, close";
  row(size, &j, false);

  j.pairs[0] = (update_pair){(const unsigned char *)y, (const unsigned char *)x,
                             (int64_t)n};
  j.npairs = 1;
  j.row = "WeightUpdateRatio update norm";
  j.pass = pass_update_norms;
  row(size, &j, false);
  for (size_t k = 0; k < 4; k++) /* four layers of a quarter each */
    j.pairs[k] =
        (update_pair){(const unsigned char *)(y + k * n / 4),
                      (const unsigned char *)(x + k * n / 4), (int64_t)(n / 4)};
  j.npairs = 4;
  j.row = "WeightUpdateRatio update norm x4";
  row(size, &j, false);
  j.bytes = bytes;
  j.ca = core_of(&tx);
  j.row = "WeightUpdateRatio weight L2";
  j.pass = pass_l2;
  row(size, &j, false);

  j.row = "TensorVariance/PWI variance";
  j.pass = pass_variance;
  row(size, &j, false);
  j.row = "PoorWeightInit quantiles";
  j.pass = pass_quantiles;
  row(size, &j, false);

  j.a = tensor4(img, 32, 3, (int64_t)n / (32 * 3 * 32), 32);
  j.row = "CheckInputImages channel sums";
  j.pass = pass_channel_sums;
  row(size, &j, false);

  j.a = tensor4(x, (int64_t)n / 10 / 96 * 96, 10, 0, 0);
  j.bytes = (size_t)j.a.count * sizeof(float);
  j.row = "ClassImbalance/Confusion argmax 10";
  j.pass = pass_argmax;
  row(size, &j, false);
  j.a = tensor4(x, (int64_t)n / 1000, 1000, 0, 0);
  j.bytes = (size_t)j.a.count * sizeof(float);
  j.row = "ClassImbalance/Confusion argmax 1000";
  row(size, &j, false);

  free(x);
  free(y);
  free(z);
  free(xc);
  free(relu);
  free(img);
  free(dst);
}

int main(void) {
  const char *r = getenv("KERNEL_REPEAT");
  if (r && atoi(r) > 0)
    repeat = atoi(r);
  int cpu = sched_getcpu();
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu >= 0 ? cpu : 0, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0)
    perror("kernel_bench: sched_setaffinity");
  printf("%-34s %-8s %8s %9s %8s  %-7s %s\n", "KERNEL GB/s (one core)", "SIZE",
         "GB/s", "wall GB/s", "x memcpy", "TARGET", "VERDICT");
  size_t unit = 32 * 96; /* batch 32, three channels, a multiple of 32 */
  size_t sizes[3] = {((size_t)1 << 18) / unit * unit, /* 1 MiB */
                     (size_t)32 * 24 * 64 * 64,       /* 12.6 MB */
                     ((size_t)1 << 25) / unit * unit /* 128 MiB */};
  const char *names[3] = {"1MiB", "12.6MB", "128MiB"};
  only_rows = getenv("KERNEL_ROWS");         /* e.g. "DeadRelu,argmax" */
  const char *only = getenv("KERNEL_SIZES"); /* e.g. "1MiB,12.6MB" */
  for (int s = 0; s < 3; s++)
    if (!only || strstr(only, names[s]))
      size_rows(names[s], sizes[s]);
  return 0;
}
