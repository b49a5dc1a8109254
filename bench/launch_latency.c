/* launch_latency.c - how fast StopTraining stops a training command that
 * smrules launched (`smrules run ... -- COMMAND`), against the same stop
 * through `--watch --training-pid` in the same run.
 *
 *   launch_latency SMRULES WORKDIR [RUNS [TRIGGER_STEP [INTERVAL_MS]]]
 *
 * This program is also the training command (`--child`): it waits 0.3 s
 * (smrules attaches), then writes a step every INTERVAL_MS (default 20)
 * with the C writer; step TRIGGER_STEP (default 5) holds a NaN, on which
 * ExplodingTensor fires and its StopTraining action sends SIGTERM.  The
 * latency is from the moment that step's index file is complete
 * (smr_writer_step_end returned: renamed into place) to SIGTERM's arrival
 * in the child's handler, both CLOCK_MONOTONIC in the child, which writes
 * it to a file and exits.
 *
 * RUNS (default 30) launches, each with a fresh trial, alternating with
 * RUNS runs of the baseline: the child started by this program and
 * watched with --training-pid.  Prints p50, p99 and max of both, the
 * stops that never came, and "RESULT <key> <value>" lines for run.sh.
 * Every file goes under WORKDIR; every process started here is ended
 * here. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "writer/writer.h"

#define MAX_CHILD_STEPS 500 /* a child never stopped gives up here */

extern char **environ;

static double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_until(double t) {
  struct timespec ts = {(time_t)t, (long)((t - (double)(time_t)t) * 1e9)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
    ;
}

static void die(const char *what, const char *arg) {
  fprintf(stderr, "launch_latency: %s%s\n", what, arg);
  exit(1);
}

static long parse_long(const char *s, const char *what, long min, long max) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || end == s || v < min || v > max) {
    fprintf(stderr, "launch_latency: %s must be in [%ld, %ld], got '%s'\n",
            what, min, max, s);
    exit(2);
  }
  return v;
}

/* ------------------------------------------------------------ the child */

static volatile sig_atomic_t got_term;
static volatile double term_at;

static void on_term(int sig) {
  (void)sig;
  if (!got_term)
    term_at = now_sec();
  got_term = 1;
}

static void write_step(smr_writer *w, long s, bool nan_value) {
  smr_error err;
  smr_error_clear(&err);
  float loss = 1.0f / (float)(s + 1);
  float bad = nan_value ? NAN : 0.0f;
  double wt = (double)time(NULL);
  if (smr_writer_step_begin(w, s, SMR_MODE_TRAIN, s, &err) ||
      smr_writer_tensor(w, "loss_output_0", SMR_DT_FLOAT, 0, NULL, &loss,
                        sizeof loss, wt, &err) ||
      smr_writer_tensor(w, "bench_nan", SMR_DT_FLOAT, 0, NULL, &bad, sizeof bad,
                        wt, &err) ||
      smr_writer_step_end(w, &err))
    die("writing a step failed: ", err.msg);
}

/* --child TRIAL RESULT TRIGGER_STEP INTERVAL_MS */
static int child(char **argv) {
  const char *trial = argv[0], *result = argv[1];
  long trigger = atol(argv[2]);
  double interval = atol(argv[3]) / 1000.0;
  struct sigaction sa = {.sa_handler = on_term};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sleep_until(now_sec() + 0.3);
  smr_error err;
  smr_error_clear(&err);
  smr_writer *w;
  if (smr_writer_open(trial, "worker_0", 0, &w, &err) != SMR_OK)
    die("opening the writer failed: ", err.msg);
  double done_at = 0, next = now_sec();
  for (long s = 0; s < MAX_CHILD_STEPS && !got_term; s++) {
    write_step(w, s, s == trigger);
    if (s == trigger)
      done_at = now_sec();
    next += interval;
    while (!got_term && now_sec() < next)
      sleep_until(now_sec() + 0.001 < next ? now_sec() + 0.001 : next);
  }
  FILE *f = fopen(result, "w");
  if (f) {
    if (got_term && done_at > 0)
      fprintf(f, "%.6f\n", (term_at - done_at) * 1000.0);
    else
      fprintf(f, "none\n");
    fclose(f);
  }
  _exit(got_term ? 143 : 0);
}

/* ------------------------------------------------------------ the runs */

static pid_t spawn(char *const argv[], const char *out_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path,
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    die("cannot start ", argv[0]);
  return pid;
}

static void reap(pid_t pid, double max_s) {
  double end = now_sec() + max_s;
  int status;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR))
      return;
    if (now_sec() >= end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      fprintf(stderr, "launch_latency: pid %ld did not end; killed\n",
              (long)pid);
      return;
    }
    sleep_until(now_sec() + 0.01);
  }
}

/* The latency in ms, or -1 when no SIGTERM came.  A SIGTERM that arrives
 * while smr_writer_step_end is still returning (after its rename) reads as
 * a few microseconds below 0: that is 0. */
static double read_result(const char *path) {
  FILE *f = fopen(path, "r");
  double v = -1;
  if (f) {
    if (fscanf(f, "%lf", &v) != 1)
      v = -1;
    else if (v < 0 && v > -1.0)
      v = 0;
    fclose(f);
  }
  return v;
}

typedef struct run_ctx {
  const char *smrules, *self, *work, *rules;
  char trigger[24], interval[24];
} run_ctx;

/* One stop; returns the latency in ms, or -1 when no SIGTERM came. */
static double one_run(const run_ctx *c, int i, bool launched) {
  char dir[4096], trial[4200], out[4200], result[4200], log[4200], pid[24];
  snprintf(dir, sizeof dir, "%s/%s-%d", c->work, launched ? "launch" : "pid",
           i);
  mkdir(dir, 0777);
  snprintf(trial, sizeof trial, "%s/trial", dir);
  snprintf(out, sizeof out, "%s/out", dir);
  snprintf(result, sizeof result, "%s/result", dir);
  snprintf(log, sizeof log, "%s/log", dir);
  char *kid[] = {(char *)c->self,    "--child",           trial, result,
                 (char *)c->trigger, (char *)c->interval, NULL};
  if (launched) {
    char *argv[] = {
        (char *)c->smrules,  "run",     "--trial",  trial,  "--rules",
        (char *)c->rules,    "--fresh", "--output", out,    "--",
        (char *)c->self,     "--child", trial,      result, (char *)c->trigger,
        (char *)c->interval, NULL};
    reap(spawn(argv, log), 60);
  } else {
    char kidlog[4300];
    snprintf(kidlog, sizeof kidlog, "%s.child", log);
    pid_t k = spawn(kid, kidlog);
    snprintf(pid, sizeof pid, "%ld", (long)k);
    char *argv[] = {(char *)c->smrules, "run",     "--trial",  trial, "--rules",
                    (char *)c->rules,   "--fresh", "--output", out,   "--watch",
                    "--training-pid",   pid,       NULL};
    pid_t s = spawn(argv, log);
    reap(k, 60);
    reap(s, 60);
  }
  return read_result(result);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double percentile(const double *sorted, size_t n, double p) {
  if (n == 0)
    return NAN;
  size_t i = (size_t)ceil(p / 100.0 * (double)n);
  return sorted[i > 0 ? i - 1 : 0];
}

static void report(const char *key, const char *what, double *v, size_t n,
                   long missed) {
  qsort(v, n, sizeof *v, cmp_double);
  double p50 = percentile(v, n, 50), p99 = percentile(v, n, 99),
         mx = n ? v[n - 1] : NAN;
  printf("%-34s p50 %6.1f ms  p99 %6.1f ms  max %6.1f ms  (%zu stops, %ld "
         "missed)\n",
         what, p50, p99, mx, n, missed);
  printf("RESULT %s_p50_ms %.2f\nRESULT %s_p99_ms %.2f\nRESULT %s_max_ms "
         "%.2f\nRESULT %s_missed %ld\n",
         key, p50, key, p99, key, mx, key, missed);
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "--child") == 0) {
    if (argc != 6)
      die("--child TRIAL RESULT TRIGGER INTERVAL_MS", "");
    return child(argv + 2);
  }
  if (argc < 3 || argc > 6) {
    fprintf(stderr, "usage: launch_latency SMRULES WORKDIR [RUNS "
                    "[TRIGGER_STEP [INTERVAL_MS]]]\n");
    return 2;
  }
  long runs = argc > 3 ? parse_long(argv[3], "RUNS", 1, 1000) : 30;
  long trigger = argc > 4 ? parse_long(argv[4], "TRIGGER_STEP", 0, 100) : 5;
  long interval = argc > 5 ? parse_long(argv[5], "INTERVAL_MS", 1, 1000) : 20;
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    die("cannot find this program (/proc/self/exe)", "");
  self[n] = '\0';
  run_ctx c = {.smrules = argv[1], .self = self, .work = argv[2]};
  snprintf(c.trigger, sizeof c.trigger, "%ld", trigger);
  snprintf(c.interval, sizeof c.interval, "%ld", interval);
  char rules[4200];
  snprintf(rules, sizeof rules, "%s/rules.yaml", argv[2]);
  FILE *f = fopen(rules, "w");
  if (!f)
    die("cannot write ", rules);
  fprintf(f, "rules:\n  - rule: ExplodingTensor\n"
             "    parameters: {tensor_regex: \"^bench_nan$\"}\n"
             "    actions: [StopTraining]\n");
  fclose(f);
  c.rules = rules;
  double *lv = calloc((size_t)runs, sizeof *lv);
  double *pv = calloc((size_t)runs, sizeof *pv);
  size_t ln = 0, pn = 0;
  long lmiss = 0, pmiss = 0;
  for (long i = 0; i < runs; i++) {
    double l = one_run(&c, (int)i, true);
    double p = one_run(&c, (int)i, false);
    if (l >= 0)
      lv[ln++] = l;
    else
      lmiss++;
    if (p >= 0)
      pv[pn++] = p;
    else
      pmiss++;
  }
  printf("stop latency: index file of the trigger step complete -> SIGTERM "
         "in the trainer (%ld ms a step, trigger at step %ld)\n",
         interval, trigger);
  report("launch_stop", "run -- COMMAND (launched)", lv, ln, lmiss);
  report("pid_stop", "run --watch --training-pid", pv, pn, pmiss);
  printf("RESULT launch_runs %ld\n", runs);
  free(lv);
  free(pv);
  return lmiss || pmiss ? 1 : 0;
}
