/* watch.h - following a trial while training writes it (`run --watch`):
 * wake on new index files (inotify, or polling where inotify is not
 * available), read them, evaluate every rule on the new steps, show
 * progress, and stop when training_job_end.ts appears or at a timeout. */
#ifndef SMR_WATCH_H
#define SMR_WATCH_H

#include <stdbool.h>
#include <stdio.h>

#include "base/common.h"
#include "run/runner.h"
#include "trial/trial.h"

typedef struct smr_watch_opts {
  double timeout_s;   /* stop after this many seconds (<= 0: never) */
  int poll_ms;        /* polling interval without inotify (default 200) */
  bool force_polling; /* do not use inotify (tests, odd filesystems) */
  double tick_s;      /* wake at least this often (wall-clock rules) */
  FILE *progress;     /* where progress goes (NULL: none) */
  bool tty;           /* redraw a status block instead of log lines */
} smr_watch_opts;

/* Returns SMR_OK when training ended or the timeout passed. */
int smr_watch_run(smr_trial *t, smr_runner *r, const smr_watch_opts *o,
                  smr_error *err);

#endif
