/* test_step_entries.c - the entries of recently read steps kept in memory
 * (core/trial/step_entries.c) answer as the catalog's per-tensor query
 * does, and are forgotten when the catalog changes.
 *
 * - On every fixture trial (real smdebug trials: several workers, modes,
 *   reductions, shapes), for every tensor at every (mode, mode step) and
 *   every global step, the kept entries equal smr_catalog_entries' field
 *   by field and in the same order, while slots are evicted and reloaded.
 * - A step with more entries than are kept is answered per tensor, and
 *   steps are let go of when the kept entries would pass their bound.
 * - A live trial: a second worker's index file for a step already read
 *   is seen after the refresh (a kept step would otherwise hide it). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trial/catalog.h"
#include "trial/step_entries.h"
#include "trial/trial.h"
#include "unit.h"
#include "writer/writer.h"

static char dir[] = "/tmp/smr-step-entries-XXXXXX";
static size_t compared; /* entries found equal, so the tests are not empty */

static bool same_str(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool same_entry(const smr_entry *a, const smr_entry *b) {
  return a->step == b->step && a->mode == b->mode &&
         a->mode_step == b->mode_step && same_str(a->worker, b->worker) &&
         a->kind == b->kind && a->reduction == b->reduction &&
         a->abs == b->abs && a->start == b->start && a->length == b->length &&
         same_str(a->event_file, b->event_file) &&
         same_str(a->index_path, b->index_path) &&
         same_str(a->problem, b->problem) && a->ndim == b->ndim &&
         memcmp(a->shape, b->shape, sizeof a->shape) == 0 &&
         a->tensor == b->tensor;
}

/* Kept and queried entries of one tensor at one step agree. */
static void check_one(smr_step_entries *kept, smr_catalog *c, int64_t id,
                      int mode, int64_t mode_step) {
  smr_entries want = {0}, got = {0};
  smr_error e;
  CHECK_EQ_INT(smr_catalog_entries(c, id, mode, mode_step, &want, &e), SMR_OK);
  CHECK_EQ_INT(smr_step_entries_get(kept, c, id, mode, mode_step, &got, &e),
               SMR_OK);
  CHECK_EQ_INT((long long)got.n, (long long)want.n);
  for (size_t i = 0; i < got.n && i < want.n; i++) {
    CHECK(same_entry(&got.v[i], &want.v[i]));
    compared++;
  }
  smr_entries_free(&want);
  smr_entries_free(&got);
}

/* The trial at path with a private catalog; live: only the end marker
 * ends training. */
static smr_trial *open_fresh(const char *path, bool live) {
  smr_trial_opts o = {.fresh = true, .live = live};
  smr_trial *t = NULL;
  smr_error e;
  CHECK_EQ_INT(smr_trial_open(path, &o, &t, &e), SMR_OK);
  return t;
}

static void check_trial(const char *path) {
  smr_trial *t = open_fresh(path, false);
  smr_error e;
  smr_catalog *c = smr_trial_catalog(t);
  smr_strv names = {0};
  CHECK_EQ_INT(smr_catalog_tensor_names(c, &names, &e), SMR_OK);
  smr_step_row *rows;
  size_t nrows;
  CHECK_EQ_INT(smr_catalog_step_rows(c, &rows, &nrows, &e), SMR_OK);
  smr_step_entries *kept = smr_step_entries_new();
  for (size_t r = 0; r <= nrows; r++) /* r == nrows: a step never saved */
    for (size_t k = 0; k < names.n; k++) {
      int64_t id = smr_catalog_tensor_id(c, names.v[k], &e);
      if (id < 0)
        continue;
      int mode = r < nrows ? rows[r].mode : SMR_MODE_TRAIN;
      int64_t ms = r < nrows ? rows[r].mode_step : 999999;
      check_one(kept, c, id, mode, ms);
      check_one(kept, c, id, SMR_MODE_GLOBAL, r < nrows ? rows[r].step : ms);
    }
  smr_step_entries_free(kept);
  smr_step_rows_free(rows, nrows);
  smr_strv_free(&names);
  smr_trial_close(t);
}

static void test_same_as_the_catalog_on_fixtures(void) {
  const char *root = "tests/fixtures/trials";
  DIR *d = opendir(root);
  CHECK(d != NULL);
  size_t trials = 0;
  for (struct dirent *de; d && (de = readdir(d));) {
    if (de->d_name[0] == '.' || strcmp(de->d_name, "README.md") == 0)
      continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, de->d_name);
    size_t before = compared;
    check_trial(path);
    CHECK(compared > before);
    trials++;
  }
  if (d)
    closedir(d);
  CHECK(trials >= 5);
}

/* A step of worker `worker` with tensors t0..t<n-1>, each [1] = {value}. */
static void write_step(const char *worker, int64_t step, int n, float value) {
  smr_writer *w;
  smr_error e;
  CHECK_EQ_INT(smr_writer_open(dir, worker, 0, &w, &e), SMR_OK);
  CHECK_EQ_INT(smr_writer_step_begin(w, step, SMR_MODE_TRAIN, step, &e),
               SMR_OK);
  const int64_t shape[1] = {1};
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "t%d", i);
    CHECK_EQ_INT(smr_writer_tensor(w, name, SMR_DT_FLOAT, 1, shape, &value,
                                   sizeof value, 1.0, &e),
                 SMR_OK);
  }
  CHECK_EQ_INT(smr_writer_step_end(w, &e), SMR_OK);
  CHECK_EQ_INT(smr_writer_close(w, &e), SMR_OK);
}

static void remove_tree(const char *path) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'/*", path);
  CHECK_EQ_INT(system(cmd), 0);
}

static void test_a_step_too_large_to_keep(void) {
  enum { N = 5000 }; /* more than the 4096 entries a kept step holds */
  remove_tree(dir);
  write_step("worker_0", 0, N, 2.0f);
  smr_trial *t = open_fresh(dir, false);
  smr_error e;
  smr_catalog *c = smr_trial_catalog(t);
  smr_step_entries *kept = smr_step_entries_new();
  static const char *const some[] = {"t0", "t1", "t2500", "t4999"};
  size_t before = compared;
  for (size_t k = 0; k < sizeof some / sizeof *some; k++) {
    int64_t id = smr_catalog_tensor_id(c, some[k], &e);
    CHECK(id >= 0);
    check_one(kept, c, id, SMR_MODE_TRAIN, 0);
  }
  CHECK_EQ_INT((long long)(compared - before), 4);
  CHECK_EQ_INT((long long)smr_step_entries_count(kept), 0);
  smr_step_entries_free(kept);
  smr_trial_close(t);
}

/* Steps of 3000 tensors: five of them are more entries than are kept,
 * so steps are let go of by size; every answer stays right and the kept
 * entries within the bound, asked forward and back. */
static void test_steps_let_go_of_by_size(void) {
  enum { STEPS = 6, N = 3000 };
  remove_tree(dir);
  for (int s = 0; s < STEPS; s++)
    write_step("worker_0", s, N, (float)s);
  smr_trial *t = open_fresh(dir, false);
  smr_error e;
  smr_catalog *c = smr_trial_catalog(t);
  smr_step_entries *kept = smr_step_entries_new();
  size_t before = compared, most = 0;
  for (int round = 0; round < 2; round++)
    for (int i = 0; i < STEPS; i++) {
      int s = round ? STEPS - 1 - i : i;
      static const char *const some[] = {"t0", "t1499", "t2999"};
      for (size_t k = 0; k < sizeof some / sizeof *some; k++)
        check_one(kept, c, smr_catalog_tensor_id(c, some[k], &e),
                  SMR_MODE_TRAIN, s);
      size_t now = smr_step_entries_count(kept);
      most = now > most ? now : most;
    }
  CHECK_EQ_INT((long long)(compared - before), 2 * STEPS * 3);
  CHECK(most >= 3 * N && most <= 16384);
  smr_step_entries_free(kept);
  smr_trial_close(t);
}

static int value_of_worker(smr_trial *t, const char *worker, float *x) {
  smr_tensor v;
  smr_value_loc loc;
  smr_error e;
  int rc = smr_trial_value(t, "t0", 0, SMR_MODE_GLOBAL, worker, &v, &loc, &e);
  if (rc == SMR_OK) {
    memcpy(x, v.data, sizeof *x);
    smr_tensor_release(&v);
  }
  return rc;
}

static void test_a_later_worker_is_seen(void) {
  remove_tree(dir);
  write_step("worker_0", 0, 2, 1.0f);
  smr_trial *t = open_fresh(dir, true);
  smr_error e;
  float x = 0;
  CHECK_EQ_INT(value_of_worker(t, "worker_0", &x), SMR_OK);
  CHECK(x == 1.0f);
  CHECK(value_of_worker(t, "worker_1", &x) != SMR_OK); /* not yet */
  write_step("worker_1", 0, 2, 5.0f); /* the same step, another worker */
  CHECK_EQ_INT(smr_trial_refresh(t, NULL, &e), SMR_OK);
  CHECK_EQ_INT(value_of_worker(t, "worker_1", &x), SMR_OK);
  CHECK(x == 5.0f);
  smr_trial_close(t);
}

int main(void) {
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  TEST_RUN(test_same_as_the_catalog_on_fixtures);
  TEST_RUN(test_a_step_too_large_to_keep);
  TEST_RUN(test_steps_let_go_of_by_size);
  TEST_RUN(test_a_later_worker_is_seen);
  remove_tree(dir);
  rmdir(dir);
  return TEST_REPORT("test_step_entries");
}
