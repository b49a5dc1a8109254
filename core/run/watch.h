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

/* Why a watch (or the wait before it) ended. */
typedef enum smr_watch_end {
  SMR_WATCH_ENDED,       /* training_job_end.ts appeared */
  SMR_WATCH_TRAINER,     /* the training process exited */
  SMR_WATCH_INTERRUPTED, /* smrules got SIGINT/SIGTERM/SIGHUP (launch.h) */
  SMR_WATCH_TIMEOUT,     /* --timeout passed */
  SMR_WATCH_READY        /* smr_watch_wait_until: the condition holds */
} smr_watch_end;

typedef struct smr_watch_opts {
  double timeout_s;   /* stop after this many seconds (<= 0: never) */
  int poll_ms;        /* polling interval without inotify (default 200) */
  bool force_polling; /* do not use inotify (tests, odd filesystems) */
  double tick_s;      /* wake at least this often (wall-clock rules) */
  FILE *progress;     /* where progress goes (NULL: none) */
  bool tty;           /* redraw a status block instead of log lines */
  /* without a tty: a status line at least this often while nothing else
   * is printed (<= 0: none), so a log shows the watch is alive */
  double heartbeat_s;
  /* the training process: `trainer_fd` becomes readable when it exits
   * (a pidfd); its exit, not the end marker, ends the watch (after a
   * final pass) */
  bool follow_trainer;
  int trainer_fd;
  /* the launched command's process group (0: none): when its leader
   * exits while other processes of the group still run (a wrapper that
   * did not exec, a trainer started in the background), the watch says
   * so once on `progress` and follows the group until it is empty */
  int64_t trainer_pgid;
  /* a signal caught by smr_interrupt_install ends the watch after the
   * step in hand (unless `forwarding`: the launched command got it and
   * the watch goes on until it exits) */
  bool forwarding;
  smr_watch_end *ended; /* where to say why it ended (NULL: nowhere) */
  /* after every pass over the trial and every wake-up, and after the
   * final pass (NULL: none): the metrics' snapshot */
  void (*on_pass)(void *arg);
  void *on_pass_arg;
} smr_watch_opts;

/* Returns SMR_OK when training ended, the trainer exited, a signal came
 * or the timeout passed (*o->ended says which). */
int smr_watch_run(smr_trial *t, smr_runner *r, const smr_watch_opts *o,
                  smr_error *err);

/* Before the trial exists: wait until ready(arg) holds, checking every
 * 100 ms, or until the trainer exits, a signal comes or o->timeout_s
 * passes; returns why it ended. */
smr_watch_end smr_watch_wait_until(bool (*ready)(void *), void *arg,
                                   const smr_watch_opts *o);

#endif
