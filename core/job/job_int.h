/* job_int.h - private to core/job/: the trial's folders and whether a
 * trial is there (job_trial.c). */
#ifndef SMR_JOB_INT_H
#define SMR_JOB_INT_H

#include "job/job.h"

/* The debug trial and the profiler output (NULL: none) the options
 * name; both allocated. */
void smr_job_resolve_dirs(const smr_job_opts *a, char **debug, char **profiler);
/* Whether some rule reads tensors (every rule but profiler plugins). */
bool smr_job_needs_tensor_data(const smr_config *cfg);

typedef struct smr_job_presence {
  const smr_job_opts *a;
  bool tensor; /* the rules need smdebug's tensors, not only profiler data */
} smr_job_presence;

/* Whether the trial is there (an smr_watch_wait_until predicate). */
bool smr_job_trial_present(void *arg);
/* The error saying what was expected where no trial is. */
void smr_job_no_trial(const smr_job_presence *p, smr_error *e);

#endif
