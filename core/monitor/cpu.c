/* cpu.c - per-core CPUUtilization and I/OWaitPercentage from /proc/stat.
 * A core line is "cpuN user nice system idle iowait irq softirq steal
 * guest guest_nice" (jiffies); guest time is already in user and nice. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor/samplers.h"

/* Core numbers above this are ignored (no machine has them; bounds the
 * arrays whatever the file says). */
#define MAX_CORES 8192

/* Parse every "cpuN" line into cur (indexed by N). */
static void parse_stat(smr_cpu_sampler *s, const char *text) {
  for (int i = 0; i < s->n; i++)
    s->cur[i].seen = false;
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p) {
    if (strncmp(p, "cpu", 3) != 0 || p[3] < '0' || p[3] > '9')
      continue;
    char *end;
    long id = strtol(p + 3, &end, 10);
    unsigned long long v[8] = {0};
    int got = sscanf(end, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
                     &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
    if (id < 0 || id >= MAX_CORES || got < 4)
      continue;
    if (id >= s->n) {
      int n = (int)id + 1;
      s->prev = smr_xrealloc(s->prev, (size_t)n * sizeof *s->prev);
      s->cur = smr_xrealloc(s->cur, (size_t)n * sizeof *s->cur);
      memset(s->prev + s->n, 0, (size_t)(n - s->n) * sizeof *s->prev);
      memset(s->cur + s->n, 0, (size_t)(n - s->n) * sizeof *s->cur);
      s->n = n;
    }
    smr_cpu_times *t = &s->cur[id];
    t->total = 0;
    for (int k = 0; k < 8; k++)
      t->total += v[k];
    t->idle = v[3];
    t->iowait = v[4];
    t->seen = true;
  }
}

int smr_cpu_open(smr_cpu_sampler *s) {
  memset(s, 0, sizeof *s);
  if (smr_procfile_open(&s->f, "/proc/stat") != 0)
    return -1;
  const char *text = smr_procfile_read(&s->f);
  if (!text)
    return -1;
  parse_stat(s, text);
  memcpy(s->prev, s->cur, (size_t)s->n * sizeof *s->cur);
  return 0;
}

int smr_cpu_cores(const smr_cpu_sampler *s) {
  int n = 0;
  for (int i = 0; i < s->n; i++)
    n += s->prev[i].seen;
  return n;
}

static double percent(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

void smr_cpu_sample(smr_cpu_sampler *s, smr_mon_round *r) {
  const char *text = smr_procfile_read(&s->f);
  if (!text)
    return;
  parse_stat(s, text);
  for (int i = 0; i < s->n; i++) {
    const smr_cpu_times *a = &s->prev[i], *b = &s->cur[i];
    /* a core that went offline or came back has no interval to report;
     * counters never go backwards on a live core */
    if (!a->seen || !b->seen || b->total < a->total || b->idle < a->idle ||
        b->iowait < a->iowait)
      continue;
    uint64_t total = b->total - a->total;
    uint64_t idle = (b->idle - a->idle) + (b->iowait - a->iowait);
    uint64_t busy = total > idle ? total - idle : 0;
    char name[24];
    snprintf(name, sizeof name, "cpu%d", i);
    smr_mon_emit(r, "cpu", name, "CPUUtilization", percent(busy, total));
    smr_mon_emit(r, "cpu", name, "I/OWaitPercentage",
                 percent(b->iowait - a->iowait, total));
  }
  smr_cpu_times *t = s->prev;
  s->prev = s->cur;
  s->cur = t;
}

void smr_cpu_close(smr_cpu_sampler *s) {
  smr_procfile_close(&s->f);
  free(s->prev);
  free(s->cur);
  memset(s, 0, sizeof *s);
}
