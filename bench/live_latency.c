/* live_latency.c - how fast `smrules run --watch` acts on a trial being
 * written, and what it costs while nothing happens.
 *
 *   live_latency SMRULES WORKDIR [STEPS [INTERVAL_MS [IDLE_S [SPARSE]]]]
 *
 * Latency: this program is the training job.  It writes STEPS steps
 * (default 1000) at a steady rate (default one every 20 ms) with the C
 * writer; a step holding a NaN makes ExplodingTensor fire, and its exec
 * hook (repeat: every) runs `/bin/kill -s <RT signal> -q <step> <our
 * pid>`: the signal carries the step number.  For each such step the
 * latency is the time from the moment its index file is complete
 * (smr_writer_step_end returned: renamed into place) to the signal's
 * arrival in our handler; both are CLOCK_MONOTONIC in this process.
 * Reports p50, p99, max and the signals that never came, twice: with a
 * NaN at every step (a hook per step: can actions keep up?) and at every
 * SPARSE-th step (default 10: how fast one trigger is acted on while
 * every step is followed).  $LIVE_LATENCY_DUMP=DIR writes each run's
 * per-step times there (step, done s, signal s, latency ms).
 *
 * Idle: a trial of STEPS steps that never ends is watched for IDLE_S
 * seconds (default 10) after smrules has evaluated it; smrules' user +
 * system time over that window (/proc/<pid>/stat) as % of one core, with
 * inotify and with --poll.
 *
 * TensorBoard (docs/tensorboard.md): the sparse run again with the steps
 * logged as a TensorBoard event file (one `train/loss` scalar a step,
 * NaN at every SPARSE-th, flushed as SummaryWriter.flush() does) and
 * NonFiniteMetric's exec hook sending the signal: the time from the
 * write of the NaN record to the signal's arrival.  The folder never gets
 * an end marker (TensorBoard has none): the run is ended with SIGINT.
 *
 * Results are printed as "RESULT <key> <value>" lines for run.sh.  Every
 * file goes under WORKDIR; every process started here is ended here. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tb_encode.h"
#include "writer/writer.h"

#define MAX_STEPS 100000
#define KILL_PROGRAM "/bin/kill"

extern char **environ;

static double *done_at;   /* index file complete, per step */
static double *signal_at; /* signal arrived, per step (0: no) */
static long n_steps;
static volatile sig_atomic_t n_signals; /* arrivals, any step */

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

static void sleep_sec(double s) {
  sleep_until(now_sec() + s);
}

/* Async-signal-safe: clock_gettime and plain stores only. */
static long fire_every = 1; /* a NaN (a trigger) at every n-th step */

static bool fires_at(long s) {
  return s % fire_every == 0;
}

static void on_signal(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)uc;
  long step = si->si_code == SI_QUEUE ? (long)si->si_value.sival_int : -1;
  if (step >= 0 && step < n_steps && signal_at[step] == 0)
    signal_at[step] = now_sec();
  n_signals++;
}

static void die(const char *fmt, const char *arg) {
  fprintf(stderr, "live_latency: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n");
  exit(1);
}

static void die_smr(const char *what, const smr_error *err) {
  char buf[2048];
  smr_error_format(err, buf, sizeof buf);
  fprintf(stderr, "live_latency: %s failed: %s\n", what, buf);
  exit(1);
}

static long parse_long(const char *s, const char *what, long min, long max) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || end == s || v < min || v > max) {
    fprintf(stderr,
            "live_latency: %s must be an integer in [%ld, %ld], got "
            "'%s'\n",
            what, min, max, s);
    exit(2);
  }
  return v;
}

static char *path_in(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (!p)
    die("out of memory%s", "");
  snprintf(p, n, "%s/%s", dir, name);
  return p;
}

/* ----------------------------------------------------------- processes */

/* Start argv with stdout and stderr going to files out_path/err_path. */
static pid_t spawn(char *const argv[], const char *out_path,
                   const char *err_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path,
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path,
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    die("cannot start %s", argv[0]);
  return pid;
}

/* Wait up to max_s for pid; kill it (SIGKILL) if it is still running.
 * Returns its wait status; *ru gets its resource usage. */
static int reap(pid_t pid, double max_s, struct rusage *ru) {
  double end = now_sec() + max_s;
  int status = 0;
  for (;;) {
    pid_t w = wait4(pid, &status, WNOHANG, ru);
    if (w == pid || (w < 0 && errno != EINTR))
      return status;
    if (now_sec() >= end) {
      kill(pid, SIGKILL);
      while (wait4(pid, &status, 0, ru) < 0 && errno == EINTR)
        ;
      fprintf(stderr,
              "live_latency: smrules (pid %ld) did not end in %.0f s;"
              " killed\n",
              (long)pid, max_s);
      return status;
    }
    sleep_sec(0.01);
  }
}

/* utime + stime of a running process, in seconds (-1 when unreadable). */
static double cpu_seconds(pid_t pid) {
  char path[64], buf[2048];
  snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* the name may hold spaces */
  unsigned long ut, st;
  /* after ')': state ppid pgrp session tty tpgid flags minflt cminflt
   * majflt cmajflt utime stime */
  if (!p || sscanf(p + 1,
                   " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu "
                   "%lu",
                   &ut, &st) != 2)
    return -1;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* ------------------------------------------------------------- writing */

/* The TensorBoard phase writes this event file instead of a trial. */
static bool tb_mode;
static FILE *tb_file;

static void write_tb_step(long s, bool nan_value) {
  uint8_t buf[512];
  float loss = nan_value ? NAN : 1.0f / (float)(s + 1);
  size_t n = scalar_event(buf, (double)time(NULL), s, "train/loss", loss);
  put_record(tb_file, buf, n);
  if (fflush(tb_file) != 0)
    die("writing the event file: %s", strerror(errno));
}

static void write_step(smr_writer *w, long s, bool nan_value) {
  if (tb_mode) {
    write_tb_step(s, nan_value);
    return;
  }
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
    die_smr("writing a step", &err);
}

static smr_writer *open_writer(const char *dir) {
  if (tb_mode) {
    char *path = path_in(dir, "events.out.tfevents.1700000000.bench.1.0");
    if (mkdir(dir, 0755) != 0 || !(tb_file = fopen(path, "wb")))
      die("cannot create %s", path);
    put_version_record(tb_file);
    fflush(tb_file);
    free(path);
    return NULL;
  }
  smr_error err;
  smr_error_clear(&err);
  smr_writer *w;
  if (smr_writer_open(dir, "worker_0", 0, &w, &err) != SMR_OK)
    die_smr("opening the writer", &err);
  return w;
}

static void close_writer(smr_writer *w, const char *dir, bool end) {
  if (tb_mode) {
    fclose(tb_file);
    tb_file = NULL;
    return;
  }
  smr_error err;
  smr_error_clear(&err);
  if (smr_writer_close(w, &err) != SMR_OK ||
      (end && smr_write_end_marker(dir, &err) != SMR_OK))
    die_smr("closing the trial", &err);
}

/* ------------------------------------------------------------ notifier */

/* /bin/kill of procps-ng queues a value with -q; check that it works here
 * (the value must arrive, not only the signal). */
static bool kill_can_queue(int sig) {
  char sigs[16], pid[24];
  snprintf(sigs, sizeof sigs, "%d", sig);
  snprintf(pid, sizeof pid, "%ld", (long)getpid());
  char *argv[] = {KILL_PROGRAM, "-s", sigs, "-q", "0", pid, NULL};
  n_steps = 1;
  signal_at[0] = 0;
  pid_t k = spawn(argv, "/dev/null", "/dev/null");
  int status = reap(k, 5, NULL);
  double end = now_sec() + 1;
  while (signal_at[0] == 0 && now_sec() < end)
    sleep_sec(0.001);
  bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && signal_at[0] > 0;
  signal_at[0] = 0;
  n_signals = 0;
  return ok;
}

static void write_rules(const char *path, int sig) {
  FILE *f = fopen(path, "w");
  if (!f)
    die("cannot write %s", path);
  fprintf(f,
          "rules:\n"
          "  - rule: %s\n"
          "    parameters: {tensor_regex: \"%s\"}\n"
          "    actions:\n"
          "      - signal_bench: {repeat: every}\n"
          "actions:\n"
          "  hooks:\n"
          "    signal_bench:\n"
          "      type: exec\n"
          "      argv: [%s, -s, \"%d\", -q, \"{step}\", \"%ld\"]\n"
          "      timeout_seconds: 5\n",
          tb_mode ? "NonFiniteMetric" : "ExplodingTensor",
          tb_mode ? "^train/loss$" : "^bench_nan$", KILL_PROGRAM, sig,
          (long)getpid());
  fclose(f);
}

/* ------------------------------------------------------------- latency */

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

static void watch_argv(char **argv, const char *smrules, char *trial,
                       char *rules, char *state, char *out, char *timeout,
                       bool poll) {
  size_t k = 0;
  char *fixed[] = {(char *)smrules, "run",  "--trial",  trial,
                   "--rules",       rules,  "--watch",  "--json",
                   "--state",       state,  "--output", out,
                   "--timeout",     timeout};
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
    argv[k++] = fixed[i];
  if (poll)
    argv[k++] = "--poll";
  if (tb_mode) {
    argv[k++] = "--format";
    argv[k++] = "tensorboard";
  }
  argv[k] = NULL;
}

/* How many actions smrules lists in its --json output, and how many of
 * them ended "ok" (a missing signal is then a lost one, not a failed
 * hook). */
static void count_actions(const char *json_path, long *all, long *ok) {
  *all = *ok = 0;
  FILE *f = fopen(json_path, "r");
  if (!f)
    return;
  size_t cap = 1 << 16, len = 0, n;
  char *buf = malloc(cap);
  while (buf && (n = fread(buf + len, 1, cap - 1 - len, f)) > 0) {
    len += n;
    if (len + 1 == cap) {
      char *bigger = realloc(buf, cap *= 2);
      if (!bigger)
        free(buf);
      buf = bigger;
    }
  }
  fclose(f);
  if (!buf)
    return;
  buf[len] = '\0';
  const char *key = "\"outcome\":\"";
  for (const char *p = buf; (p = strstr(p, key)) != NULL; p++) {
    (*all)++;
    *ok += strncmp(p + strlen(key), "ok\"", 3) == 0;
  }
  free(buf);
}

/* Per-step times for a closer look ($LIVE_LATENCY_DUMP). */
static void dump(const char *key) {
  const char *dir = getenv("LIVE_LATENCY_DUMP");
  if (!dir || !dir[0])
    return;
  char name[64];
  snprintf(name, sizeof name, "%s.tsv", key);
  char *path = path_in(dir, name);
  FILE *f = fopen(path, "w");
  for (long s = 0; f && s < n_steps; s++)
    if (fires_at(s))
      fprintf(f, "%ld\t%.6f\t%.6f\t%.3f\n", s, done_at[s], signal_at[s],
              signal_at[s] > 0 ? (signal_at[s] - done_at[s]) * 1e3 : NAN);
  if (f)
    fclose(f);
  free(path);
}

static void report_latency(const char *key, double wall,
                           const struct rusage *ru) {
  double *lat = calloc((size_t)n_steps, sizeof *lat);
  size_t n = 0, want = 0;
  for (long s = 0; s < n_steps; s++) {
    want += fires_at(s);
    if (fires_at(s) && signal_at[s] > 0)
      lat[n++] = (signal_at[s] - done_at[s]) * 1e3;
  }
  qsort(lat, n, sizeof *lat, cmp_double);
  double cpu = (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec / 1e6 +
               (double)ru->ru_stime.tv_sec + ru->ru_stime.tv_usec / 1e6;
  printf("%s -> signal delivered (%zu of %zu triggers): "
         "p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
         tb_mode ? "record written" : "index file complete", n, want,
         percentile(lat, n, 50), percentile(lat, n, 99), n ? lat[n - 1] : NAN);
  printf("smrules while following: %.2f s CPU over %.1f s (%.1f %% of one "
         "core)\n",
         cpu, wall, 100 * cpu / wall);
  printf("RESULT %s_triggers %zu\n", key, want);
  printf("RESULT %s_received %zu\n", key, n);
  printf("RESULT %s_p50_ms %.3f\n", key, percentile(lat, n, 50));
  printf("RESULT %s_p99_ms %.3f\n", key, percentile(lat, n, 99));
  printf("RESULT %s_max_ms %.3f\n", key, n ? lat[n - 1] : NAN);
  printf("RESULT %s_follow_cpu_pct %.3f\n", key, 100 * cpu / wall);
  dump(key);
  free(lat);
}

static char *keyed_path(const char *work, const char *key, const char *ext) {
  char name[64];
  snprintf(name, sizeof name, "%s%s", key, ext);
  return path_in(work, name);
}

/* One run: `steps` steps, a trigger at every fire_every-th; results as
 * RESULT <key>_... */
static int latency_phase(const char *key, const char *smrules, const char *work,
                         long steps, long interval_ms, int sig) {
  char *trial = keyed_path(work, key, "-trial");
  char *rules = keyed_path(work, key, ".yaml");
  char *state = keyed_path(work, key, ".db");
  char *out = keyed_path(work, key, "-out");
  char *so = keyed_path(work, key, "-watch.json");
  char *se = keyed_path(work, key, "-watch.log");
  n_signals = 0;
  memset(done_at, 0, (size_t)steps * sizeof *done_at);
  memset(signal_at, 0, (size_t)steps * sizeof *signal_at);
  write_rules(rules, sig);
  n_steps = steps;
  smr_writer *w = open_writer(trial); /* the trial folder exists first */
  char timeout[32];
  snprintf(timeout, sizeof timeout, "%ld", steps * interval_ms / 1000 + 120);
  char *argv[20];
  watch_argv(argv, smrules, trial, rules, state, out, timeout, false);
  double t_start = now_sec();
  pid_t pid = spawn(argv, so, se);
  sleep_sec(1.0); /* started and watching */
  double t0 = now_sec(), step_s = (double)interval_ms / 1e3;
  for (long s = 0; s < steps; s++) {
    sleep_until(t0 + (double)s * step_s);
    write_step(w, s, fires_at(s));
    done_at[s] = now_sec();
  }
  long want = (steps + fire_every - 1) / fire_every;
  double end = now_sec() + 5;
  while (n_signals < want && now_sec() < end)
    sleep_sec(0.01);
  close_writer(w, trial, true);
  if (tb_mode) /* no end marker in a TensorBoard folder */
    kill(pid, SIGINT);
  struct rusage ru;
  int status = reap(pid, 60, &ru);
  bool ended = WIFEXITED(status) && (WEXITSTATUS(status) <= 1 ||
                                     (tb_mode && WEXITSTATUS(status) == 130));
  double wall = now_sec() - t_start;
  if (!ended)
    fprintf(stderr,
            "live_latency: smrules --watch ended with status %d "
            "(see %s)\n",
            status, se);
  report_latency(key, wall, &ru);
  long all, ok;
  count_actions(so, &all, &ok);
  printf("smrules listed %ld actions, %ld ok\n", all, ok);
  printf("RESULT %s_actions_ok %ld\n", key, ok);
  char *owned[] = {trial, rules, state, out, so, se};
  for (size_t i = 0; i < sizeof owned / sizeof *owned; i++)
    free(owned[i]);
  return ended ? 0 : 1;
}

/* ---------------------------------------------------------------- idle */

/* CPU % of one core used by a watch on a trial that gets no new steps. */
static double idle_cpu(const char *smrules, const char *work, const char *trial,
                       double idle_s, bool poll) {
  const char *tag = poll ? "idle-poll" : "idle";
  char name[64];
  snprintf(name, sizeof name, "%s.yaml", tag);
  char *rules = path_in(work, name);
  snprintf(name, sizeof name, "%s.db", tag);
  char *state = path_in(work, name);
  snprintf(name, sizeof name, "%s.log", tag);
  char *se = path_in(work, name);
  char *out = path_in(work, "idle-out");
  FILE *f = fopen(rules, "w");
  if (!f)
    die("cannot write %s", rules);
  fprintf(f, "rules:\n  - rule: ExplodingTensor\n"
             "    parameters: {tensor_regex: \"^bench_nan$\"}\n");
  fclose(f);
  char timeout[32];
  snprintf(timeout, sizeof timeout, "%.0f", idle_s + 120);
  char *argv[20];
  watch_argv(argv, smrules, (char *)trial, rules, state, out, timeout, poll);
  pid_t pid = spawn(argv, "/dev/null", se);
  /* settled: the trial is read and evaluated, CPU time stops growing */
  double prev = -1, cur = cpu_seconds(pid), deadline = now_sec() + 60;
  do {
    prev = cur;
    sleep_sec(0.5);
    cur = cpu_seconds(pid);
  } while (cur >= 0 && cur - prev > 0.01 && now_sec() < deadline);
  double t1 = now_sec(), c1 = cpu_seconds(pid);
  sleep_sec(idle_s);
  double t2 = now_sec(), c2 = cpu_seconds(pid);
  kill(pid, SIGKILL);
  reap(pid, 10, NULL);
  double pct = c1 < 0 || c2 < 0 ? NAN : 100 * (c2 - c1) / (t2 - t1);
  printf("smrules --watch%s idle for %.1f s: %.2f s CPU = %.3f %% of one "
         "core\n",
         poll ? " --poll" : "", t2 - t1, c2 - c1, pct);
  free(rules);
  free(state);
  free(se);
  free(out);
  return pct;
}

static int idle_phase(const char *smrules, const char *work, long steps,
                      double idle_s) {
  char *trial = path_in(work, "idle-trial");
  smr_writer *w = open_writer(trial);
  for (long s = 0; s < steps; s++)
    write_step(w, s, false);
  close_writer(w, trial, false); /* no end marker: training goes on */
  double a = idle_cpu(smrules, work, trial, idle_s, false);
  double b = idle_cpu(smrules, work, trial, idle_s, true);
  printf("RESULT live_idle_cpu_pct %.3f\n", a);
  printf("RESULT live_idle_poll_cpu_pct %.3f\n", b);
  free(trial);
  return isnan(a) || isnan(b);
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 7) {
    fprintf(stderr, "usage: live_latency SMRULES WORKDIR [STEPS "
                    "[INTERVAL_MS [IDLE_S [SPARSE]]]]\n");
    return 2;
  }
  const char *smrules = argv[1], *work = argv[2];
  long steps = argc > 3 ? parse_long(argv[3], "STEPS", 1, MAX_STEPS) : 1000;
  long interval = argc > 4 ? parse_long(argv[4], "INTERVAL_MS", 1, 10000) : 20;
  long idle_s = argc > 5 ? parse_long(argv[5], "IDLE_S", 1, 3600) : 10;
  long sparse = argc > 6 ? parse_long(argv[6], "SPARSE", 1, MAX_STEPS) : 10;
  if (access(smrules, X_OK) != 0)
    die("%s is not executable", smrules);
  if (mkdir(work, 0755) != 0 && errno != EEXIST)
    die("cannot create %s", work);
  done_at = calloc((size_t)steps, sizeof *done_at);
  signal_at = calloc((size_t)steps, sizeof *signal_at);
  if (!done_at || !signal_at)
    die("out of memory%s", "");
  int sig = SIGRTMIN + 2;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(sig, &sa, NULL);
  if (!kill_can_queue(sig))
    die("%s cannot queue a value with a signal (-q; procps-ng kill needed)",
        KILL_PROGRAM);
  printf("writing %ld steps, one every %ld ms; ExplodingTensor fires at "
         "every step, its exec hook runs %s\n",
         steps, interval, KILL_PROGRAM);
  printf("RESULT live_steps %ld\nRESULT live_interval_ms %ld\n", steps,
         interval);
  fflush(stdout);
  int rc = latency_phase("live", smrules, work, steps, interval, sig);
  printf("again, with ExplodingTensor firing at every %ld-th step\n", sparse);
  fflush(stdout);
  fire_every = sparse;
  rc |= latency_phase("live_sparse", smrules, work, steps, interval, sig);
  fflush(stdout);
  rc |= idle_phase(smrules, work, steps, (double)idle_s);
  printf("a TensorBoard event file, NonFiniteMetric firing at every %ld-th "
         "step\n",
         sparse);
  fflush(stdout);
  tb_mode = true;
  rc |= latency_phase("tb_sparse", smrules, work, steps, interval, sig);
  free(done_at);
  free(signal_at);
  return rc;
}
