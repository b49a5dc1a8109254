/* monitor.c - the sampling loop: one round per tick of a monotonic
 * schedule, formatted whole and appended to the minute's file. */
#include "monitor/monitor.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "monitor/nvml.h"
#include "monitor/samplers.h"
#include "monitor/sysfile.h"

typedef struct samplers {
  smr_cpu_sampler cpu;
  smr_procfile meminfo;
  smr_io_sampler io;
  smr_nvml *gpus;
} samplers;

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double wall_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void open_samplers(samplers *s, FILE *log) {
  if (smr_cpu_open(&s->cpu) != 0 && log)
    fprintf(log, "smrules monitor: /proc/stat unreadable: no CPU metrics\n");
  if (smr_procfile_open(&s->meminfo, "/proc/meminfo") != 0 && log)
    fprintf(log, "smrules monitor: /proc/meminfo unreadable: no memory "
                 "metric\n");
  smr_io_open(&s->io);
  char why[160];
  s->gpus = smr_nvml_open(why, sizeof why);
  if (!s->gpus && log)
    fprintf(log, "smrules monitor: %s: recording without GPU metrics\n", why);
}

static void close_samplers(samplers *s) {
  smr_cpu_close(&s->cpu);
  smr_procfile_close(&s->meminfo);
  smr_io_close(&s->io);
  smr_nvml_close(s->gpus);
}

/* SageMaker's order within a round: CPU, memory, GPU, network, I/O. */
static void sample(samplers *s, double seconds, smr_mon_round *r) {
  smr_cpu_sample(&s->cpu, r);
  smr_memory_sample(&s->meminfo, r);
  smr_nvml_sample(s->gpus, r);
  smr_io_sample(&s->io, seconds, r);
}

/* Sleep until the monotonic time `at` (ns); returns early on a signal. */
static void sleep_until(int64_t at) {
  struct timespec ts = {(time_t)(at / 1000000000), (long)(at % 1000000000)};
  clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

/* One round appended to its minute's file.  A file that cannot be
 * written (a link or FIFO planted by someone else, a full disk) loses
 * that round, not the recording: the problem is logged once per file and
 * the first one kept for the exit status. */
static bool append_round(smr_sysfile *file, const smr_mon_round *r, FILE *log,
                         smr_error *first) {
  smr_error e;
  smr_error_clear(&e);
  if (smr_sysfile_append(file, r, &e) == SMR_OK)
    return true;
  if (log && !file->repeated)
    fprintf(log, "smrules monitor: %s: %s; its readings are not recorded\n",
            e.file, e.msg);
  if (first->status == SMR_OK)
    *first = e;
  return false;
}

int smr_monitor_run(const smr_monitor_opts *o, volatile sig_atomic_t *stop,
                    smr_error *err) {
  samplers s;
  memset(&s, 0, sizeof s);
  open_samplers(&s, o->log);
  smr_sysfile file;
  smr_sysfile_init(&file, o->out_dir, o->node);
  if (o->log)
    fprintf(o->log,
            "smrules monitor: %d CPU cores, %u GPUs, every %d ms as %s into "
            "%s/system/incremental\n",
            smr_cpu_cores(&s.cpu), smr_nvml_count(s.gpus), o->interval_ms,
            o->node, o->out_dir);
  const int64_t step = (int64_t)o->interval_ms * 1000000;
  const int64_t start = mono_ns();
  const int64_t deadline =
      o->duration_s > 0 ? start + (int64_t)(o->duration_s * 1e9) : INT64_MAX;
  int64_t last = start, next = start + step;
  smr_mon_round r = {.node = o->node};
  long rounds = 0, lost = 0;
  int rc = SMR_OK;
  smr_error first;
  smr_error_clear(&first);
  while (!*stop) {
    if (next > deadline)
      break;
    sleep_until(next);
    if (*stop)
      break;
    int64_t now = mono_ns();
    if (now < next)
      continue; /* woken early by a signal that did not ask to stop */
    r.lines.len = 0;
    r.ts = wall_seconds();
    sample(&s, (double)(now - last) / 1e9, &r);
    last = now;
    if (!append_round(&file, &r, o->log, &first))
      lost++;
    rounds++;
    /* the next tick on the grid after now: a stall skips ticks */
    next += step * ((now - next) / step + 1);
  }
  if (o->log)
    fprintf(o->log, "smrules monitor: stopped after %ld samples\n", rounds);
  if (lost > 0)
    rc = smr_error_set(err, first.status, first.file, first.offset,
                       "%ld of %ld samples could not be written (the first "
                       "because: %s)",
                       lost, rounds, first.msg);
  smr_buf_free(&r.lines);
  smr_sysfile_close(&file);
  close_samplers(&s);
  return rc;
}

bool smr_monitor_node_valid(const char *name) {
  if (strncmp(name, "algo-", 5) != 0 || !name[5] || strlen(name) > 24)
    return false;
  for (const char *p = name + 5; *p; p++)
    if (!isdigit((unsigned char)*p))
      return false;
  return true;
}

/* A 0-based rank from the environment variable `var`, or -1. */
static long env_rank(const char *var) {
  const char *v = getenv(var);
  if (!v || !*v)
    return -1;
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  return *end || errno || n < 0 || n > 1000000 ? -1 : n;
}

const char *smr_monitor_default_node(char *buf, size_t n) {
  const char *host = getenv("SM_CURRENT_HOST");
  if (host && smr_monitor_node_valid(host)) {
    snprintf(buf, n, "%s", host);
    return buf;
  }
  static const char *const RANKS[] = {"SLURM_NODEID", "GROUP_RANK",
                                      "NODE_RANK"};
  for (size_t i = 0; i < sizeof RANKS / sizeof *RANKS; i++) {
    long rank = env_rank(RANKS[i]);
    if (rank >= 0) {
      snprintf(buf, n, "algo-%ld", rank + 1);
      return buf;
    }
  }
  snprintf(buf, n, "algo-1");
  return buf;
}
