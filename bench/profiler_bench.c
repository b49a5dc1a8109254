/* profiler_bench.c - the ProfilerReport benchmark: 1 million system-metric
 * events (2 nodes x 8 GPUs, 500 ms sampling) through every profiler rule and
 * the ProfilerReport HTML report.
 *
 *   profiler_bench gen DIR [EVENTS]   write a profiler-output folder
 *   profiler_bench run SMRULES DIR OUT [REPEAT]
 *                                     time `smrules run` of ProfilerReport
 *                                     (all eleven rules + the report) and of
 *                                     the eleven rules as separate plugins
 *
 * The generated job: per node and sampling round, 8 GPUUtilization, 8
 * GPUMemoryUtilization, 16 CPUUtilization, 16 I/OWaitPercentage, one
 * MemoryUsedPercent, two network and three i/o readings (54 events), one
 * timestamp per category as the monitoring daemon writes them; one file
 * per node and minute.  Values follow slow waves plus noise (a
 * deterministic generator), with one GPU of algo-2 mostly idle so the
 * rules have something to find.
 *
 * Results are printed as "RESULT <key> <value>" lines for bench/run.sh,
 * and as a short table; peak RSS comes from wait4() of the child. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NODES 2
#define GPUS 8
#define CPUS 16
#define PER_ROUND (2 * GPUS + 2 * CPUS + 6) /* events per node and round */
#define FIRST_SECOND 1700000040LL           /* a full minute */

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static double noise(void) { /* uniform in [0, 1) */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

static double clamp(double v, double lo, double hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

static int mkdirs(const char *path) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return -1;
      *p = '/';
    }
  return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static void line(FILE *f, const char *type, const char *name, const char *dim,
                 double value, int node, double ts) {
  fprintf(f,
          "{\"Type\": \"%s\", \"Name\": \"%s\", \"Dimension\": \"%s\", "
          "\"Value\": %.2f, \"NodeId\": \"algo-%d\", \"Timestamp\": %.7f}\n",
          type, name, dim, value, node, ts);
}

/* One sampling round of one node at time t (seconds), laid out like the
 * monitoring daemon writes it: one timestamp per category, a few ms
 * apart (i/o, cpu, gpu, memory, network). */
static void round_of(FILE *f, int node, double t, long k) {
  char name[16];
  double wave = 0.5 + 0.5 * sin((double)k / 600.0);
  line(f, "i/o", "IOPS", "", 100 * noise(), node, t + 0.0012);
  line(f, "i/o", "ReadThroughputInBytesPerSecond", "", 1e5 * noise(), node,
       t + 0.0012);
  line(f, "i/o", "WriteThroughputInBytesPerSecond", "", 1e5 * noise(), node,
       t + 0.0012);
  for (int c = 0; c < CPUS; c++) {
    snprintf(name, sizeof name, "cpu%d", c);
    line(f, "cpu", name, "CPUUtilization",
         clamp(30 + 50 * wave + 20 * noise(), 0, 100), node, t);
    line(f, "cpu", name, "I/OWaitPercentage", clamp(4 * noise(), 0, 100), node,
         t);
  }
  for (int g = 0; g < GPUS; g++) {
    snprintf(name, sizeof name, "gpu%d", g);
    double u =
        (node == 2 && g == 7) ? 3 + 4 * noise() : 55 + 35 * wave + 10 * noise();
    line(f, "gpu", name, "GPUUtilization", clamp(u, 0, 100), node, t + 0.0005);
    line(f, "gpu", name, "GPUMemoryUtilization",
         clamp(40 + 20 * wave + 2 * noise(), 0, 100), node, t + 0.0005);
  }
  line(f, "memory", "MemoryUsedPercent", "", 30 + 5 * wave, node, t + 0.0006);
  line(f, "network", "ReceiveBytesPerSecond", "Algorithm", 1e6 + 1e6 * noise(),
       node, t + 0.0011);
  line(f, "network", "TransmitBytesPerSecond", "Algorithm", 1e6 + 1e6 * noise(),
       node, t + 0.0011);
}

static FILE *open_minute(const char *dir, long long minute, int node) {
  time_t tt = (time_t)minute;
  struct tm tm;
  char hour[16], path[4096];
  gmtime_r(&tt, &tm);
  strftime(hour, sizeof hour, "%Y%m%d%H", &tm);
  snprintf(path, sizeof path, "%s/system/incremental/%s", dir, hour);
  if (mkdirs(path) != 0)
    return NULL;
  snprintf(path, sizeof path, "%s/system/incremental/%s/%lld.algo-%d.json", dir,
           hour, minute, node);
  return fopen(path, "w");
}

static int gen(const char *dir, long events) {
  long rounds = (events + NODES * PER_ROUND - 1) / (NODES * PER_ROUND);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (int node = 1; node <= NODES; node++) {
    FILE *f = NULL;
    long long minute = -1;
    for (long k = 0; k < rounds; k++) {
      double t = (double)FIRST_SECOND + 0.5 * (double)k + 0.01 * node;
      long long m = (long long)floor(t / 60) * 60;
      if (m != minute) {
        if (f && fclose(f) != 0)
          return 1;
        minute = m;
        if (!(f = open_minute(dir, minute, node))) {
          perror(dir);
          return 1;
        }
      }
      round_of(f, node, t, k);
    }
    if (f && fclose(f) != 0)
      return 1;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/system/training_job_end.ts", dir);
  FILE *end = fopen(path, "w");
  if (!end || fclose(end) != 0)
    return 1;
  clock_gettime(CLOCK_MONOTONIC, &b);
  long n = rounds * NODES * PER_ROUND;
  printf("generated %ld system events (%ld rounds x %d nodes x %d) in %.2f "
         "s\n",
         n, rounds, NODES, PER_ROUND,
         (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
  printf("RESULT prof_events %ld\n", n);
  return 0;
}

/* ------------------------------------------------------------------ run */

static const char *const RULES[] = {"CPUBottleneck",          "IOBottleneck",
                                    "LowGPUUtilization",      "StepOutlier",
                                    "GPUMemoryIncrease",      "BatchSize",
                                    "MaxInitializationTime",  "LoadBalancing",
                                    "OverallSystemUsage",     "Dataloader",
                                    "OverallFrameworkMetrics"};

static int write_yaml(const char *path, bool report) {
  FILE *f = fopen(path, "w");
  if (!f)
    return -1;
  fprintf(f, "rules:\n");
  if (report)
    fprintf(f, "  - rule: ProfilerReport\n");
  else
    for (size_t i = 0; i < sizeof RULES / sizeof *RULES; i++)
      fprintf(f, "  - rule: %s\n", RULES[i]);
  return fclose(f);
}

/* Run smrules once; wall seconds, cpu seconds, peak RSS (KB). */
static int timed_run(const char *smrules, const char *dir, const char *yaml,
                     const char *out, double *wall, double *cpu, long *rss) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout))
      _exit(127);
    execl(smrules, smrules, "run", "--trial", dir, "--rules", yaml, "--fresh",
          "--output", out, (char *)NULL);
    _exit(127);
  }
  int status;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) != pid)
    return -1;
  clock_gettime(CLOCK_MONOTONIC, &b);
  *wall = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
  *cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
  *rss = ru.ru_maxrss;
  /* exit 0: no issue, 1: issues found; anything else failed */
  if (!WIFEXITED(status) || WEXITSTATUS(status) > 1) {
    fprintf(stderr, "profiler_bench: %s run failed (status %d)\n", smrules,
            status);
    return -1;
  }
  return 0;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static int measure(const char *key, const char *smrules, const char *dir,
                   const char *out, bool report, int repeat) {
  char yaml[4096];
  snprintf(yaml, sizeof yaml, "%s/%s.yaml", out, key);
  if (mkdirs(out) != 0 || write_yaml(yaml, report) != 0)
    return -1;
  double walls[64], cpus[64];
  long rss = 0;
  if (repeat > 64)
    repeat = 64;
  for (int i = 0; i < repeat; i++) {
    long r;
    if (timed_run(smrules, dir, yaml, out, &walls[i], &cpus[i], &r) != 0)
      return -1;
    if (r > rss)
      rss = r;
  }
  qsort(walls, (size_t)repeat, sizeof *walls, cmp_double);
  qsort(cpus, (size_t)repeat, sizeof *cpus, cmp_double);
  double w = walls[repeat / 2], c = cpus[repeat / 2];
  printf("%-34s median of %d: wall %.3f s, cpu %.3f s, max RSS %ld KB\n",
         report ? "ProfilerReport (11 rules + HTML)" : "11 profiler rules",
         repeat, w, c, rss);
  printf("RESULT %s_wall %.3f\nRESULT %s_cpu %.3f\nRESULT %s_rss %ld\n", key, w,
         key, c, key, rss);
  return 0;
}

static int run(const char *smrules, const char *dir, const char *out,
               int repeat) {
  if (measure("prof_report", smrules, dir, out, true, repeat) != 0 ||
      measure("prof_rules", smrules, dir, out, false, repeat) != 0)
    return 1;
  char html[4096];
  snprintf(html, sizeof html,
           "%s/ProfilerReport/profiler-output/profiler-report.html", out);
  struct stat st;
  if (stat(html, &st) != 0) {
    fprintf(stderr, "profiler_bench: no report at %s\n", html);
    return 1;
  }
  printf("report: %s (%lld bytes)\n", html, (long long)st.st_size);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "gen") == 0)
    return gen(argv[2], argc > 3 ? atol(argv[3]) : 1000000);
  if (argc >= 5 && strcmp(argv[1], "run") == 0)
    return run(argv[2], argv[3], argv[4], argc > 5 ? atoi(argv[5]) : 3);
  fprintf(stderr, "usage: profiler_bench gen DIR [EVENTS]\n"
                  "       profiler_bench run SMRULES DIR OUT [REPEAT]\n");
  return 2;
}
