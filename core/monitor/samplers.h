/* samplers.h - the host metrics of one sampling round, read from /proc:
 * each sampler keeps the previous counters and emits the metrics of the
 * interval since, under SageMaker's names (docs/profiler.md, "Profiling
 * your own machine"). */
#ifndef SMR_MON_SAMPLERS_H
#define SMR_MON_SAMPLERS_H

#include <stdbool.h>
#include <stdint.h>

#include "monitor/procfile.h"
#include "monitor/sysfile.h"

/* Per-core CPUUtilization and I/OWaitPercentage from /proc/stat deltas. */
typedef struct smr_cpu_times {
  uint64_t total, idle, iowait;
  bool seen;
} smr_cpu_times;
typedef struct smr_cpu_sampler {
  smr_procfile f;
  smr_cpu_times *prev, *cur;
  int n; /* 1 + highest core number seen */
} smr_cpu_sampler;
int smr_cpu_open(smr_cpu_sampler *s); /* reads the first counters */
int smr_cpu_cores(const smr_cpu_sampler *s);
void smr_cpu_sample(smr_cpu_sampler *s, smr_mon_round *r);
void smr_cpu_close(smr_cpu_sampler *s);

/* MemoryUsedPercent = (MemTotal - MemAvailable) / MemTotal from
 * /proc/meminfo. */
void smr_memory_sample(smr_procfile *meminfo, smr_mon_round *r);

/* ReceiveBytesPerSecond / TransmitBytesPerSecond (Dimension "Algorithm"):
 * every interface but loopback, from /proc/net/dev; ReadThroughput-
 * InBytesPerSecond, WriteThroughputInBytesPerSecond and IOPS of the whole
 * disks (those with /sys/block/<name>/device), from /proc/diskstats. */
typedef struct smr_io_sampler {
  smr_procfile net, disk;
  uint64_t rx, tx, rd_bytes, wr_bytes, ops;
  bool have_net, have_disk;
} smr_io_sampler;
void smr_io_open(smr_io_sampler *s);
void smr_io_sample(smr_io_sampler *s, double seconds, smr_mon_round *r);
void smr_io_close(smr_io_sampler *s);

#endif
