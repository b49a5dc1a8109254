/* bench_reopen.c - how long opening a trial takes once its catalog is
 * stored, against the first open that builds it.
 *
 *   bench_reopen gen    DIR STEPS        write a trial of STEPS steps with 4
 *                                        small tensors each (a loss scalar and
 *                                        three 4x4 gradients)
 *   bench_reopen reopen DIR STATE N      delete STATE, time the first open
 *                                        (catalog built and stored), then N
 *                                        timed open+close with the stored
 *                                        catalog, then N timed refreshes
 *                                        of one open trial where nothing
 *                                        is new (what a live watch pays
 *                                        at every refresh)
 *
 * Results are printed as "RESULT <key> <value>" lines for run.sh. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "format/tensor.h"
#include "trial/trial.h"
#include "writer/writer.h"

#define MAX_REPEAT 100

static const char *const grad_names[3] = {"gradient/Net_fc1.weight",
                                          "gradient/Net_fc2.weight",
                                          "gradient/Net_fc3.weight"};
static const char *const loss_name = "CrossEntropyLoss_output_0";

static double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die_smr(const char *what, const smr_error *err) {
  char buf[2048];
  smr_error_format(err, buf, sizeof buf);
  fprintf(stderr, "bench_reopen: %s failed: %s (%s)\n", what, buf,
          smr_status_name(err->status));
  exit(1);
}

static long parse_count(const char *s, const char *what, long min, long max) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < min || v > max) {
    fprintf(stderr,
            "bench_reopen: %s must be an integer in [%ld, %ld], got "
            "'%s'\n",
            what, min, max, s);
    exit(2);
  }
  return v;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* ---- gen ---- */

static void write_collections(smr_writer *w) {
  static const char *const loss_names[1] = {"CrossEntropyLoss_output_0"};
  static const char *const grad_re[1] = {"^gradient"};
  smr_collection items[2] = {
      {.name = "gradients",
       .include_regex = (char **)grad_re,
       .n_include_regex = 1,
       .tensor_names = (char **)grad_names,
       .n_tensor_names = 3},
      {.name = "losses",
       .tensor_names = (char **)loss_names,
       .n_tensor_names = 1},
  };
  smr_collections c = {.items = items, .n = 2, .num_workers = 1};
  smr_error err;
  if (smr_writer_collections(w, &c, &err))
    die_smr("smr_writer_collections", &err);
}

static void write_step(smr_writer *w, int64_t step) {
  smr_error err;
  if (smr_writer_step_begin(w, step, SMR_MODE_TRAIN, step, &err))
    die_smr("smr_writer_step_begin", &err);
  double wall = 1.7e9 + (double)step * 0.1;
  float loss = 2.3f / (1.0f + (float)step * 1e-3f);
  if (smr_writer_tensor(w, loss_name, SMR_DT_FLOAT, 0, NULL, &loss, sizeof loss,
                        wall, &err))
    die_smr("smr_writer_tensor (loss)", &err);
  const int64_t shape[2] = {4, 4};
  for (int k = 0; k < 3; k++) {
    float g[16];
    for (int i = 0; i < 16; i++)
      g[i] = (float)((i - 8) * (k + 1)) * 1e-4f / (1.0f + (float)step * 1e-3f);
    if (smr_writer_tensor(w, grad_names[k], SMR_DT_FLOAT, 2, shape, g, sizeof g,
                          wall, &err))
      die_smr("smr_writer_tensor", &err);
  }
  if (smr_writer_step_end(w, &err))
    die_smr("smr_writer_step_end", &err);
}

static int cmd_gen(const char *dir, long steps) {
  smr_error err;
  smr_writer *w;
  double t0 = now_sec();
  if (smr_writer_open(dir, "worker_0", 0, &w, &err))
    die_smr("smr_writer_open", &err);
  write_collections(w);
  for (long s = 0; s < steps; s++)
    write_step(w, s);
  if (smr_writer_close(w, &err))
    die_smr("smr_writer_close", &err);
  if (smr_write_end_marker(dir, &err))
    die_smr("smr_write_end_marker", &err);
  double dt = now_sec() - t0;
  printf("generated %ld steps x 4 small tensors in %s in %.2f s\n", steps, dir,
         dt);
  printf("RESULT small_gen_seconds %.3f\n", dt);
  return 0;
}

/* ---- reopen ---- */

/* Open and close once; check the trial has the steps we wrote. */
static double open_close(const char *dir, const char *state,
                         size_t *steps_seen) {
  smr_trial_opts opts = {.state_path = state};
  smr_error err;
  smr_trial *t;
  double t0 = now_sec();
  if (smr_trial_open(dir, &opts, &t, &err))
    die_smr("smr_trial_open", &err);
  smr_trial_close(t);
  double dt = now_sec() - t0;
  /* Counting steps is outside the timed span: the target is open+close. */
  if (smr_trial_open(dir, &opts, &t, &err))
    die_smr("smr_trial_open", &err);
  smr_i64v steps = {0};
  smr_trial_steps(t, SMR_MODE_GLOBAL, false, &steps);
  *steps_seen = steps.n;
  smr_i64v_free(&steps);
  smr_trial_close(t);
  return dt;
}

/* Sorts v[0..n) and returns its median. */
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* N refreshes of one live trial where nothing is new, each timed into
 * v[0..n) (sorted); returns their median. */
static double refresh_median(const char *dir, const char *state, int n,
                             double *v) {
  smr_trial_opts opts = {.state_path = state, .live = true};
  smr_error err;
  smr_trial *t;
  if (smr_trial_open(dir, &opts, &t, &err))
    die_smr("smr_trial_open", &err);
  for (int i = 0; i < n; i++) {
    size_t added = 0;
    double t0 = now_sec();
    if (smr_trial_refresh(t, &added, &err))
      die_smr("smr_trial_refresh", &err);
    v[i] = now_sec() - t0;
    if (added) {
      fprintf(stderr, "bench_reopen: a refresh found %zu new files\n", added);
      exit(1);
    }
  }
  smr_trial_close(t);
  return median(v, n);
}

static int cmd_reopen(const char *dir, const char *state, int n) {
  if (unlink(state) != 0 && errno != ENOENT) {
    fprintf(stderr, "bench_reopen: cannot remove %s: %s\n", state,
            strerror(errno));
    return 1;
  }
  size_t steps;
  double first = open_close(dir, state, &steps);
  printf("reopen: first open (reads every index file, stores the catalog): "
         "%.1f ms, %zu steps\n",
         first * 1e3, steps);
  if (steps == 0) {
    fprintf(stderr, "bench_reopen: the trial has no complete steps\n");
    return 1;
  }
  double v[MAX_REPEAT];
  for (int i = 0; i < n; i++) {
    size_t again;
    v[i] = open_close(dir, state, &again);
    if (again != steps) {
      fprintf(stderr, "bench_reopen: re-open saw %zu steps, first open %zu\n",
              again, steps);
      return 1;
    }
  }
  double med = median(v, n);
  printf("reopen: %d re-opens with the stored catalog: min %.2f ms, median "
         "%.2f ms, max %.2f ms\n",
         n, v[0] * 1e3, med * 1e3, v[n - 1] * 1e3);
  double rmed = refresh_median(dir, state, n, v);
  printf("reopen: %d refreshes of the open trial, nothing new: min %.2f ms, "
         "median %.2f ms, max %.2f ms\n",
         n, v[0] * 1e3, rmed * 1e3, v[n - 1] * 1e3);
  printf("RESULT reopen_steps %zu\n", steps);
  printf("RESULT first_open_ms %.2f\n", first * 1e3);
  printf("RESULT reopen_median_ms %.2f\n", med * 1e3);
  printf("RESULT refresh_median_ms %.2f\n", rmed * 1e3);
  return 0;
}

static int usage(void) {
  fprintf(stderr, "usage: bench_reopen gen DIR STEPS\n"
                  "       bench_reopen reopen DIR STATE N\n");
  return 2;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 4 && strcmp(argv[1], "gen") == 0)
    return cmd_gen(argv[2], parse_count(argv[3], "STEPS", 1, 10000000));
  if (argc == 5 && strcmp(argv[1], "reopen") == 0)
    return cmd_reopen(argv[2], argv[3],
                      (int)parse_count(argv[4], "N", 1, MAX_REPEAT));
  return usage();
}
