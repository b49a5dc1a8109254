/* sysfile.h - the system-metrics files SageMaker's profiler agent writes
 * (docs/formats.md, "System metrics"): one JSON object per line, in
 * <profiler>/system/incremental/<YYYYMMDDHR>/<minute epoch>.<node>.json,
 * a new file each minute.  A sampling round is formatted into a buffer and
 * appended with one write, so a reader sees whole lines only. */
#ifndef SMR_MON_SYSFILE_H
#define SMR_MON_SYSFILE_H

#include <stdint.h>

#include "base/common.h"

/* One sampling round being formatted: every line gets the same node and
 * timestamp (seconds since the epoch). */
typedef struct smr_mon_round {
  smr_buf lines;
  const char *node;
  double ts;
} smr_mon_round;

/* Append one line {"Type", "Name", "Dimension", "Value", "NodeId",
 * "Timestamp"}; the value is rounded to two decimals, as SageMaker's. */
void smr_mon_emit(smr_mon_round *r, const char *type, const char *name,
                  const char *dim, double value);

typedef struct smr_sysfile {
  char *confine;         /* <profiler>: below it the training job writes too */
  char *root;            /* <profiler>/system/incremental */
  char *node;            /* algo-<n> */
  int fd;                /* the current minute's file, -1 before the first */
  int64_t minute;        /* its minute (epoch seconds) */
  char *path;            /* its path (for messages) */
  int64_t refused;       /* a minute whose file could not be written */
  smr_error refused_err; /* ... and why (repeated, not retried) */
  bool repeated;         /* the last append failed as an earlier one did */
} smr_sysfile;

void smr_sysfile_init(smr_sysfile *f, const char *profiler_dir,
                      const char *node);
/* Append the round's lines to the file of its minute, creating folders and
 * files as needed without following a link below the profiler folder.  A
 * link, FIFO or other non-regular file planted at the minute's file, or a
 * failed write (the file is then cut back to its last complete line), is
 * an error naming the file; the rest of that minute's rounds get the same
 * error without a retry (`repeated` set), and the next minute is tried
 * afresh. */
int smr_sysfile_append(smr_sysfile *f, const smr_mon_round *r, smr_error *err);
void smr_sysfile_close(smr_sysfile *f);

#endif
