/* test_trial_ids.c - what a trial keeps in memory to answer again:
 * tensor ids and compiled regular expressions (trial_read.c,
 * trial_names.c).
 *
 * The tensor-id cache (name -> catalog id, so that a value read does not
 * ask the catalog each time) forgets what it knew when the catalog
 * changes.
 * A trial folder rewritten by a new run (an index file the catalog knew
 * is gone) makes the catalog start over, and the same tensor name gets
 * another id.  A value read after the refresh must come from the new
 * run: with a stale id it would be another tensor's, or none.
 *
 * Compiled patterns are kept by pattern: the same selection asked again,
 * and more patterns than are kept, select what they selected the first
 * time. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trial/trial.h"
#include "unit.h"
#include "writer/writer.h"

static char dir[] = "/tmp/smr-trial-ids-XXXXXX";

/* One step (global step `step`) with the named float32 tensors, each
 * [2] = {value, value}. */
static void write_run(int64_t step, const char *const *names, size_t n,
                      float value) {
  smr_writer *w;
  smr_error e;
  CHECK_EQ_INT(smr_writer_open(dir, "worker_0", 0, &w, &e), SMR_OK);
  CHECK_EQ_INT(smr_writer_step_begin(w, step, SMR_MODE_TRAIN, step, &e),
               SMR_OK);
  const int64_t shape[1] = {2};
  const float v[2] = {value, value};
  for (size_t i = 0; i < n; i++)
    CHECK_EQ_INT(smr_writer_tensor(w, names[i], SMR_DT_FLOAT, 1, shape, v,
                                   sizeof v, 1.0, &e),
                 SMR_OK);
  CHECK_EQ_INT(smr_writer_step_end(w, &e), SMR_OK);
  CHECK_EQ_INT(smr_writer_close(w, &e), SMR_OK);
}

static float first_element(smr_trial *t, const char *name, int64_t step,
                           int *rc) {
  smr_tensor v;
  smr_value_loc loc;
  smr_error e;
  *rc = smr_trial_value(t, name, step, SMR_MODE_GLOBAL, NULL, &v, &loc, &e);
  if (*rc != SMR_OK)
    return -1;
  float x;
  memcpy(&x, v.data, sizeof x);
  smr_tensor_release(&v);
  return x;
}

static void remove_tree(const char *path) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'/*", path);
  CHECK_EQ_INT(system(cmd), 0);
}

static void test_ids_forgotten_when_the_run_is_rewritten(void) {
  static const char *const first[] = {"a", "b"};
  static const char *const second[] = {"b"};
  write_run(0, first, 2, 1.0f);
  smr_trial_opts o = {.fresh = true, .live = true};
  smr_trial *t;
  smr_error e;
  CHECK_EQ_INT(smr_trial_open(dir, &o, &t, &e), SMR_OK);
  int rc;
  CHECK(first_element(t, "b", 0, &rc) == 1.0f && rc == SMR_OK);
  /* a new run in the same folder: only "b", at another step, so the
   * first run's index file is gone */
  remove_tree(dir);
  write_run(5, second, 1, 7.0f);
  CHECK_EQ_INT(smr_trial_refresh(t, NULL, &e), SMR_OK);
  CHECK(first_element(t, "b", 5, &rc) == 7.0f && rc == SMR_OK);
  first_element(t, "a", 0, &rc);
  CHECK(rc != SMR_OK); /* gone with the old run */
  smr_trial_close(t);
}

static size_t selected(smr_trial *t, const char *pattern) {
  smr_strv out = {0};
  smr_error e;
  const char *p[1] = {pattern};
  CHECK_EQ_INT(smr_trial_tensor_names_regex(t, p, 1, NULL, &out, &e), SMR_OK);
  size_t n = out.n;
  smr_strv_free(&out);
  return n;
}

static void test_patterns_kept_and_not(void) {
  static const char *const names[] = {"layer1.weight", "layer2.weight",
                                      "layer2.bias"};
  remove_tree(dir);
  write_run(0, names, 3, 1.0f);
  smr_trial_opts o = {.fresh = true};
  smr_trial *t;
  smr_error e;
  CHECK_EQ_INT(smr_trial_open(dir, &o, &t, &e), SMR_OK);
  for (int round = 0; round < 2; round++) {
    for (int k = 0; k < 150; k++) { /* more patterns than are kept */
      char p[32];
      snprintf(p, sizeof p, "weight|x%d", k);
      CHECK_EQ_INT(selected(t, p), 2);
    }
    CHECK_EQ_INT(selected(t, "layer2"), 2);
  }
  CHECK_EQ_INT(selected(t, "bias$"), 1);
  CHECK_EQ_INT(selected(t, "bias$"), 1);
  smr_strv out = {0};
  const char *bad[1] = {"(unclosed"};
  CHECK(smr_trial_tensor_names_regex(t, bad, 1, NULL, &out, &e) != SMR_OK);
  CHECK(smr_trial_tensor_names_regex(t, bad, 1, NULL, &out, &e) != SMR_OK);
  smr_strv_free(&out);
  smr_trial_close(t);
}

int main(void) {
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  TEST_RUN(test_ids_forgotten_when_the_run_is_rewritten);
  TEST_RUN(test_patterns_kept_and_not);
  remove_tree(dir);
  rmdir(dir);
  return TEST_REPORT("test_trial_ids");
}
