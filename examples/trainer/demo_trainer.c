/* demo_trainer.c - a stand-in training job for the demo and the live
 * tests: it "trains" a tiny model and saves a trial step by step with the
 * smrules C writer, the way smdebug's hook would.  The loss falls for a
 * while and then stops decreasing.  SIGTERM (what StopTraining sends)
 * ends training cleanly: the current step is finished and
 * training_job_end.ts is written, as smdebug's hook does on close.
 *
 *   demo-trainer OUT_DIR [--steps N] [--interval-ms MS] [--plateau-at S]
 *                        [--pid-file PATH]
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "writer/writer.h"

static volatile sig_atomic_t stop_requested;

static void on_term(int sig) {
  (void)sig;
  stop_requested = 1;
}

typedef struct opts {
  const char *out, *pid_file;
  long steps, interval_ms, plateau_at;
} opts;

static double wall_time(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !stop_requested)
    ;
}

/* The loss curve: exponential decay until plateau_at, then flat with a
 * little noise that never brings it down. */
static float loss_at(const opts *o, long s) {
  long t = s < o->plateau_at ? s : o->plateau_at;
  double base = 0.2 + 2.0 * exp(-0.08 * (double)t);
  double wiggle = s < o->plateau_at ? 0.0 : 0.002 * (double)((s * 7) % 5);
  return (float)(base + wiggle);
}

static int save_step(smr_writer *w, const opts *o, long s, smr_error *err) {
  float loss = loss_at(o, s);
  float grad[64], weight[64];
  for (int i = 0; i < 64; i++) {
    grad[i] = (float)((i % 7 - 3) * 0.01 * exp(-0.02 * (double)s));
    weight[i] = (float)(0.5 - 0.01 * i + 0.0001 * (double)s);
  }
  int64_t gshape[2] = {8, 8};
  double wt = wall_time();
  int rc = smr_writer_step_begin(w, s, SMR_MODE_TRAIN, s, err);
  if (!rc)
    rc = smr_writer_tensor(w, "CrossEntropyLoss_output_0", SMR_DT_FLOAT, 0,
                           NULL, &loss, sizeof loss, wt, err);
  if (!rc)
    rc = smr_writer_tensor(w, "gradient/Net_fc1.weight", SMR_DT_FLOAT, 2,
                           gshape, grad, sizeof grad, wt, err);
  if (!rc)
    rc = smr_writer_tensor(w, "Net_fc1.weight", SMR_DT_FLOAT, 2, gshape, weight,
                           sizeof weight, wt, err);
  if (!rc)
    rc = smr_writer_step_end(w, err);
  return rc;
}

static int write_collections(smr_writer *w, smr_error *err) {
  char *losses_re[] = {"[Ll]oss_(?!input).*output"};
  char *grads_re[] = {"^gradient"};
  char *weights_re[] = {"^(?!gradient).*weight"};
  smr_collection items[3] = {
      {.name = "losses", .include_regex = losses_re, .n_include_regex = 1},
      {.name = "gradients", .include_regex = grads_re, .n_include_regex = 1},
      {.name = "weights", .include_regex = weights_re, .n_include_regex = 1},
  };
  smr_collections c = {items, 3, 1};
  return smr_writer_collections(w, &c, err);
}

static int parse(int argc, char **argv, opts *o) {
  *o = (opts){NULL, NULL, 200, 50, 40};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--steps") && v)
      o->steps = atol(argv[++i]);
    else if (!strcmp(a, "--interval-ms") && v)
      o->interval_ms = atol(argv[++i]);
    else if (!strcmp(a, "--plateau-at") && v)
      o->plateau_at = atol(argv[++i]);
    else if (!strcmp(a, "--pid-file") && v)
      o->pid_file = argv[++i];
    else if (a[0] != '-' && !o->out)
      o->out = a;
    else
      return -1;
  }
  return o->out ? 0 : -1;
}

static void write_pid_file(const char *path) {
  FILE *f = fopen(path, "w");
  if (f) {
    fprintf(f, "%ld\n", (long)getpid());
    fclose(f);
  }
}

static void usage(FILE *f) {
  fprintf(f, "usage: demo-trainer OUT_DIR [--steps N] [--interval-ms MS] "
             "[--plateau-at S] [--pid-file P]\n"
             "  writes an smdebug trial into OUT_DIR step by step, as a "
             "training job would\n"
             "  --steps N         steps to write (default 200)\n"
             "  --interval-ms MS  pause between steps (default 50)\n"
             "  --plateau-at S    the loss stops decreasing from step S "
             "(default 40)\n"
             "  --pid-file P      write this process's pid into P\n"
             "  SIGTERM or SIGINT: finish the step in hand, write the end "
             "marker, exit 143\n");
}

int main(int argc, char **argv) {
  opts o;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
  if (parse(argc, argv, &o) != 0) {
    usage(stderr);
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_term;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  if (o.pid_file)
    write_pid_file(o.pid_file);
  smr_error err;
  smr_error_clear(&err);
  smr_writer *w;
  if (smr_writer_open(o.out, "worker_0", 0, &w, &err) != SMR_OK) {
    fprintf(stderr, "demo-trainer: %s\n", err.msg);
    return 1;
  }
  long s = 0;
  int rc = SMR_OK;
  for (; s < o.steps && !stop_requested && rc == SMR_OK; s++) {
    rc = save_step(w, &o, s, &err);
    if (rc == SMR_OK && s == 0)
      rc = write_collections(w, &err);
    if (!stop_requested)
      sleep_ms(o.interval_ms);
  }
  if (rc == SMR_OK)
    rc = smr_writer_close(w, &err);
  if (rc == SMR_OK)
    rc = smr_write_end_marker(o.out, &err);
  if (rc != SMR_OK) {
    fprintf(stderr, "demo-trainer: %s\n", err.msg);
    return 1;
  }
  printf("demo-trainer: %s after %ld steps\n",
         stop_requested ? "stopped by signal" : "finished", s);
  return stop_requested ? 143 : 0;
}
