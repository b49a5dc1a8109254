/* test_tb_pairs.c - a TensorBoard folder's (mode, step) pairs and their
 * global steps (trial/tb_pairs.h) against a plain reference: after each
 * numbering, the pairs by global step are every earlier pair, then the
 * new ones in (step, mode) order, each once with the wall time of its
 * first note; each mode's index lists its global steps by step; a find
 * answers every pair's global step and -1 for pairs never noted.  Notes
 * come in order (no lookup), out of order (the table of pairs not yet
 * numbered: built mid-refresh, grown past its first size), below every
 * earlier step (the index merged), and at extreme steps. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "trial/tb_pairs.h"
#include "unit.h"

#define MAXREF 20000

typedef struct rpair {
  int64_t step;
  double wall;
  int mode;
} rpair;

/* numbered pairs by global step, then the batch noted since; whether a
 * pair was noted: a flag per (mode, step) for steps in [LOW, HIGH), a
 * scan of v for the others */
#define LOW (-1024)
#define HIGH 8192
typedef struct ref {
  rpair v[MAXREF];
  size_t n, numbered;
  bool seen[5][HIGH - LOW];
} ref;

static bool ref_seen(ref *r, int mode, int64_t step) {
  if (step >= LOW && step < HIGH) {
    bool was = r->seen[mode][step - LOW];
    r->seen[mode][step - LOW] = true;
    return was;
  }
  for (size_t k = 0; k < r->n; k++)
    if (r->v[k].mode == mode && r->v[k].step == step)
      return true;
  return false;
}

static void ref_note(ref *r, int mode, int64_t step, double wall) {
  if (r->n == MAXREF) {
    CHECK(0); /* a test noting more than the reference holds */
    return;
  }
  if (!ref_seen(r, mode, step))
    r->v[r->n++] = (rpair){step, wall, mode};
}

static int cmp_rpair(const void *a, const void *b) {
  const rpair *x = a, *y = b;
  if (x->step != y->step)
    return x->step < y->step ? -1 : 1;
  return x->mode - y->mode;
}

static void ref_number(ref *r) {
  qsort(r->v + r->numbered, r->n - r->numbered, sizeof *r->v, cmp_rpair);
  r->numbered = r->n;
}

static void note(tb_pairs *p, ref *r, int mode, int64_t step, double wall) {
  tb_pairs_note(p, mode, step, wall);
  ref_note(r, mode, step, wall);
}

static void number(tb_pairs *p, ref *r) {
  size_t before = r->numbered;
  CHECK_EQ_INT(tb_pairs_number(p), r->n - before);
  ref_number(r);
}

/* The pairs equal the reference, every index and lookup agrees. */
static void same(const tb_pairs *p, const ref *r) {
  CHECK_EQ_INT(p->numbered, r->numbered);
  CHECK_EQ_INT(p->n, r->n);
  for (size_t g = 0; g < p->numbered && g < r->numbered; g++) {
    const rpair *x = &r->v[g];
    if (p->step[g] != x->step || p->mode[g] != x->mode ||
        p->wall[g] != x->wall) {
      fprintf(stderr,
              "global step %zu: (%d, %lld, %g), expected (%d, %lld, %g)\n", g,
              p->mode[g], (long long)p->step[g], p->wall[g], x->mode,
              (long long)x->step, x->wall);
      CHECK(0);
      return;
    }
    CHECK_EQ_INT(tb_pairs_find(p, x->mode, x->step), (int64_t)g);
  }
  size_t total = 0;
  for (int m = 1; m <= 4; m++) {
    total += p->nby_mode[m];
    for (size_t j = 0; j < p->nby_mode[m]; j++) {
      uint32_t g = p->by_mode[m][j];
      CHECK(g < p->numbered);
      if (g >= p->numbered)
        return;
      CHECK_EQ_INT(p->mode[g], m);
      if (j)
        CHECK(p->step[p->by_mode[m][j - 1]] < p->step[g]);
    }
  }
  CHECK_EQ_INT(total, p->numbered);
}

static uint64_t rng = 0x13198A2E03707344ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* One writer, steps in order, TRAIN and EVAL at each: the table of pairs
 * not yet numbered is never needed. */
static void test_in_order(void) {
  tb_pairs p = {0};
  static ref r;
  memset(&r, 0, sizeof r);
  for (int64_t s = 0; s < 3000; s++) {
    note(&p, &r, 1, s, 1000.0 + (double)s);
    note(&p, &r, 1, s, -1); /* the same pair again: first wall time kept */
    note(&p, &r, 2, s, 2000.0 + (double)s);
    if (s % 1000 == 999) {
      CHECK(p.pending == NULL);
      number(&p, &r);
      same(&p, &r);
    }
  }
  CHECK_EQ_INT(tb_pairs_find(&p, 1, 3000), -1);
  CHECK_EQ_INT(tb_pairs_find(&p, 3, 5), -1);
  CHECK_EQ_INT(tb_pairs_find(&p, 0, 5), -1);
  tb_pairs_free(&p);
}

/* Random modes and steps, refreshes of random sizes: out-of-order notes
 * (the table built mid-refresh and grown), steps below earlier ones (the
 * indexes merged), pairs already numbered noted again. */
static void test_random_refreshes(void) {
  for (int round = 0; round < 20; round++) {
    tb_pairs p = {0};
    static ref r;
    memset(&r, 0, sizeof r);
    int64_t span = round % 2 ? 400 : 5000;
    for (int batch = 0; batch < 8; batch++) {
      int count = (int)(next() % 2000);
      for (int k = 0; k < count; k++) {
        int mode = 1 + (int)(next() % 4);
        int64_t step = (int64_t)(next() % (uint64_t)span) - span / 8;
        note(&p, &r, mode, step, (double)(next() % 100000));
      }
      number(&p, &r);
      same(&p, &r);
    }
    CHECK_EQ_INT(tb_pairs_find(&p, 1, span * 2), -1);
    tb_pairs_free(&p);
  }
}

/* A second file of older steps: every new pair below the earlier ones. */
static void test_older_file(void) {
  tb_pairs p = {0};
  static ref r;
  memset(&r, 0, sizeof r);
  for (int64_t s = 1000; s < 2000; s++)
    note(&p, &r, 1, s, (double)s);
  number(&p, &r);
  for (int64_t s = 0; s < 1500; s += 3) /* half below, half already there */
    note(&p, &r, 1, s, -(double)s);
  number(&p, &r);
  same(&p, &r);
  CHECK_EQ_INT(p.step[p.by_mode[1][0]], 0);
  CHECK_EQ_INT(tb_pairs_number(&p), 0); /* nothing new */
  same(&p, &r);
  tb_pairs_free(&p);
}

static void test_extreme_steps(void) {
  tb_pairs p = {0};
  static ref r;
  memset(&r, 0, sizeof r);
  int64_t steps[] = {INT64_MAX, 0, INT64_MIN, -1, INT64_MAX, 7, INT64_MIN};
  for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
    note(&p, &r, 2, steps[i], (double)i);
    note(&p, &r, 4, steps[i], (double)i);
  }
  number(&p, &r);
  same(&p, &r);
  CHECK_EQ_INT(p.numbered, 10);
  CHECK_EQ_INT(p.step[0], INT64_MIN);
  tb_pairs_free(&p);
}

int main(void) {
  TEST_RUN(test_in_order);
  TEST_RUN(test_random_refreshes);
  TEST_RUN(test_older_file);
  TEST_RUN(test_extreme_steps);
  return TEST_REPORT("test_tb_pairs");
}
