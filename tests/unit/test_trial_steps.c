/* test_trial_steps.c - the step queries of a trial's step model
 * (trial_steps.c: each mode's steps indexed by mode step, 4 bytes a
 * step) against a scan of the steps, as docs/formats.md#step-states
 * states them: smr_trial_global_step (the first step of the mode with
 * that mode step) and smr_trial_has_passed_step (the step of the mode
 * with the smallest key >= the step asked, the first one on a tie).
 * Mode steps that grow with the global steps (the index built in one
 * pass) and mode steps in any order, repeated (the index sorted). */
#include <stdint.h>
#include <stdlib.h>

#include "format/mode.h"
#include "trial/trial_int.h"
#include "unit.h"

#define NSTEPS 600

static uint64_t rng = 0xA4093822299F31D0ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static int64_t key_of(const step_info *s, int mode) {
  return mode == SMR_MODE_GLOBAL ? s->step : s->mode_step;
}

/* The reference: a scan of t->steps. */
static const step_info *ref_first_at_or_after(const smr_trial *t, int mode,
                                              int64_t key) {
  const step_info *best = NULL;
  for (size_t i = 0; i < t->nsteps; i++) {
    const step_info *s = &t->steps[i];
    if (mode != SMR_MODE_GLOBAL && s->mode != mode)
      continue;
    if (key_of(s, mode) >= key &&
        (!best || key_of(s, mode) < key_of(best, mode)))
      best = s;
  }
  return best;
}

static smr_availability ref_passed(const smr_trial *t, int64_t step, int mode) {
  const step_info *best = ref_first_at_or_after(t, mode, step);
  if (!best)
    return t->loaded_all_steps ? SMR_UNAVAILABLE : SMR_NOT_YET_AVAILABLE;
  if (key_of(best, mode) > step)
    return t->last_complete_step >= best->step ? SMR_UNAVAILABLE
                                               : SMR_NOT_YET_AVAILABLE;
  if (best->nworkers >= t->num_workers || t->loaded_all_steps ||
      best->step <= t->last_complete_step)
    return SMR_AVAILABLE;
  return SMR_NOT_YET_AVAILABLE;
}

/* Every query over keys around the steps' own agrees with the scan. */
static void check_queries(smr_trial *t, int64_t span) {
  for (int mode = 1; mode <= 4; mode++)
    for (int64_t k = -2; k < span + 2; k++) {
      const step_info *r = ref_first_at_or_after(t, mode, k);
      int64_t g = -7;
      bool found = smr_trial_global_step(t, mode, k, &g);
      if (mode == SMR_MODE_GLOBAL) {
        CHECK(found && g == k);
      } else if (r && r->mode_step == k) {
        CHECK(found);
        CHECK_EQ_INT(g, r->step);
      } else {
        CHECK(!found);
      }
      smr_availability a = smr_trial_has_passed_step(t, k, mode);
      if (a != ref_passed(t, k, mode)) {
        fprintf(stderr, "mode %d step %lld: %d, expected %d\n", mode,
                (long long)k, (int)a, (int)ref_passed(t, k, mode));
        CHECK(0);
        return;
      }
    }
}

static void reset(smr_trial *t) {
  for (int m = 0; m < 5; m++)
    free(t->by_mode[m]);
  free(t->steps);
  memset(t, 0, sizeof *t);
}

/* Steps 0, 2, 4 ... with modes cycling TRAIN x3, EVAL, PREDICT: each
 * mode's steps grow with the global ones (or, `shuffled`, are drawn at
 * random, repeats included); some steps lack a worker. */
static void build(smr_trial *t, bool shuffled, int64_t span) {
  t->steps = calloc(NSTEPS, sizeof *t->steps);
  int64_t count[5] = {0};
  for (size_t i = 0; i < NSTEPS; i++) {
    int m = i % 5 < 3    ? SMR_MODE_TRAIN
            : i % 5 == 3 ? SMR_MODE_EVAL
                         : SMR_MODE_PREDICT;
    int64_t ms = shuffled ? (int64_t)(next() % (uint64_t)span) : count[m]++;
    t->steps[i] = (step_info){.step = (int64_t)i * 2,
                              .mode_step = ms,
                              .mode = m,
                              .nworkers = 1 + (int)(next() % 2)};
  }
  t->nsteps = NSTEPS;
  t->num_workers = 2;
  smr_trial_index_steps(t);
  smr_trial_compute_completeness(t);
}

static void test_in_order(void) {
  smr_trial *t = calloc(1, sizeof *t);
  build(t, false, NSTEPS);
  CHECK_EQ_INT(t->nby_mode[SMR_MODE_TRAIN], NSTEPS * 3 / 5);
  check_queries(t, NSTEPS);
  t->loaded_all_steps = true;
  smr_trial_compute_completeness(t);
  check_queries(t, NSTEPS);
  reset(t);
  free(t);
}

static void test_any_order(void) {
  for (int round = 0; round < 4; round++) {
    smr_trial *t = calloc(1, sizeof *t);
    int64_t span = round % 2 ? 100 : 1000; /* repeats, then gaps */
    build(t, true, span);
    for (int m = 1; m <= 3; m++) /* ordered by (mode step, position) */
      for (size_t j = 1; j < t->nby_mode[m]; j++) {
        const step_info *a = &t->steps[t->by_mode[m][j - 1]],
                        *b = &t->steps[t->by_mode[m][j]];
        CHECK(a->mode_step < b->mode_step ||
              (a->mode_step == b->mode_step &&
               t->by_mode[m][j - 1] < t->by_mode[m][j]));
      }
    check_queries(t, span);
    reset(t);
    free(t);
  }
}

int main(void) {
  TEST_RUN(test_in_order);
  TEST_RUN(test_any_order);
  return TEST_REPORT("test_trial_steps");
}
