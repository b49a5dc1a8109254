/* job_profile.h - `run --watch --profile DIR`: record this machine's
 * system metrics into DIR beside the training job (a `smrules monitor`
 * child), evaluate the profiler rules on them live, and when training
 * ends stop the recording, mark the end and let ProfilerReport write its
 * HTML report.  Used by job.c only. */
#ifndef SMR_JOB_PROFILE_H
#define SMR_JOB_PROFILE_H

#include <stdbool.h>
#include <sys/types.h>

#include "config/config.h"

typedef struct smr_profile_session {
  const char *dir;
  pid_t pid; /* the monitor child, 0 when not running */
} smr_profile_session;

/* Create DIR (the profiler folder) so profiler rules can open it before
 * the first sample.  Returns 0, or -1 with a message on stderr. */
int smr_profile_prepare(const char *dir);
/* Add a ProfilerReport instance to the configuration unless it has one. */
void smr_profile_add_report(smr_config *cfg);
/* Start `smrules monitor --out DIR` (this same binary) as a child that
 * dies with this process.  Returns 0, or -1 with a message on stderr. */
int smr_profile_start(smr_profile_session *s, const char *dir, int interval_ms);
/* Stop the monitor (SIGTERM, then wait); with `ended`, write
 * DIR/system/training_job_end.ts so the final windows are evaluated. */
void smr_profile_stop(smr_profile_session *s, bool ended);

#endif
