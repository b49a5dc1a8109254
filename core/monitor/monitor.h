/* monitor.h - `smrules monitor`: sample this machine's CPU, memory,
 * network, disk and GPUs every interval and write SageMaker's
 * system-metrics files, so the profiler rules and ProfilerReport can run
 * on recordings made anywhere (docs/profiler.md). */
#ifndef SMR_MONITOR_H
#define SMR_MONITOR_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "base/common.h"

typedef struct smr_monitor_opts {
  const char *out_dir; /* profiler folder; files go to system/incremental/ */
  int interval_ms;     /* sampling interval (>= 10) */
  const char *node;    /* algo-<n> */
  double duration_s;   /* stop after this long (<= 0: until stopped) */
  FILE *log;           /* start/stop notices (NULL: none) */
} smr_monitor_opts;

/* Sample until *stop becomes non-zero (set it from a signal handler) or the
 * duration has passed.  Samples are taken on a fixed monotonic schedule
 * (start + k·interval, no drift; missed ticks are skipped, not bunched).
 * Returns SMR_OK, or an error when a file cannot be written. */
int smr_monitor_run(const smr_monitor_opts *o, volatile sig_atomic_t *stop,
                    smr_error *err);

/* The node name to record under when --node is not given: SM_CURRENT_HOST
 * when it is algo-<n>; else the node rank of a multi-node job (SLURM_NODEID,
 * GROUP_RANK of torchrun, NODE_RANK), 0-based, as algo-<rank + 1>; else
 * algo-1.  Writes into buf (>= 32 bytes). */
const char *smr_monitor_default_node(char *buf, size_t n);
/* Whether `name` is algo-<n> (the only node names the readers accept). */
bool smr_monitor_node_valid(const char *name);

#endif
