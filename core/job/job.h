/* job.h - one `smrules run`, from a checked configuration to an exit
 * status: find the trial (and the profiler data) the options name, start
 * the training command or follow the --training-pid process, wait for the
 * trial to appear, record system metrics (--profile), evaluate the rules
 * offline or while training writes (--watch), let the actions act, stop
 * a command it started that would outlive it, write the rule-output/
 * files and decide the exit status.  The CLI parses the arguments into
 * smr_job_opts and prints what the job hands to its smr_job_print
 * callbacks; the job prints only the notes a watch prints as it goes
 * (stderr, like core/run/watch.c). */
#ifndef SMR_JOB_H
#define SMR_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "action/action.h"
#include "config/config.h"
#include "run/launch.h"
#include "run/runner.h"
#include "run/watch.h"
#include "trial/trial.h"

/* The exit statuses of the smrules commands (docs/cli.md "Exit status"):
 * 0 success, 1 issues found (run), 2 usage or configuration error, 3
 * trial or value unreadable (or no trial there), 4 tensor or step
 * unavailable (tensor) or an action failed (run), 5 a rule failed (run),
 * 6 with run --strict a rule had no data or the trial was not read in full,
 * 124 --timeout ended the run, 127 the command cannot run, 128+N
 * interrupted by signal N. */
enum {
  SMR_EXIT_OK = 0,
  SMR_EXIT_ISSUES = 1,
  SMR_EXIT_USAGE = 2,
  SMR_EXIT_UNREADABLE = 3,
  SMR_EXIT_UNAVAILABLE = 4,   /* tensor */
  SMR_EXIT_ACTION_FAILED = 4, /* run */
  SMR_EXIT_RULE_ERROR = 5,
  SMR_EXIT_NO_DATA = 6,     /* run --strict: NoData, or unread trial data */
  SMR_EXIT_TIMEOUT = 124,   /* --timeout ended the run, as timeout(1) */
  SMR_EXIT_CANNOT_RUN = 127 /* as a shell reports a command it cannot run */
};

/* What `smrules run` was asked to do. */
typedef struct smr_job_opts {
  const char *trial, *output, *profiler;
  smr_trial_opts topts;
  smr_tb_settings tbs; /* rules.yaml `tensorboard:` (topts.tensorboard) */
  smr_run_opts ropts;
  bool json; /* results on stdout as JSON: progress goes to stderr */
  int64_t training_pid;
  bool dry_run, verbose;
  bool watch, poll;
  double timeout_s;
  double kill_after_s; /* --kill-after: SIGTERM's grace at a timeout */
  const char *profile; /* --profile DIR (job_profile.h) */
  char **command;      /* run [options] -- COMMAND [ARG...] */
  double heartbeat_s;  /* --heartbeat */
  /* --metrics-listen, --metrics-file, --job-name (docs/metrics.md) */
  const char *metrics_listen, *metrics_file, *job_name;
  struct smr_metrics *metrics; /* set by the job while it runs */
  bool strict;                 /* --strict: NoData or unread data exits 6 */
} smr_job_opts;

/* How the followed training ended (run --watch, run -- COMMAND). */
typedef struct smr_job_end {
  smr_watch_end how;
  smr_launch *child;      /* run -- COMMAND (reaped), else NULL */
  int64_t pid;            /* --training-pid, else the child's */
  int interrupted;        /* the signal smrules got (0: none) */
  const char *stopped_by; /* rule whose StopTraining signalled it */
  /* --timeout ended the run (how == SMR_WATCH_TIMEOUT, or no trial had
   * appeared), and what it did to a command still running: SIGTERM to
   * its process group, SIGKILL when it outlived the grace */
  bool timed_out;
  double timeout_s, grace_s;
  bool sent_term, sent_kill;
} smr_job_end;

/* "end_marker", "trainer_exit", "interrupted", "timeout". */
const char *smr_job_end_name(const smr_job_end *te);

/* What the job hands to the CLI to print. */
typedef struct smr_job_print {
  void *arg;
  /* a problem: one that ends the job (`ends`: with --json, also the
   * JSON document on stdout), or one it got past */
  void (*error)(void *arg, const smr_error *e, bool ends);
  /* the results, once the rules and actions are finished; te is NULL for
   * an offline run */
  void (*results)(void *arg, const smr_job_opts *o, smr_runner *r,
                  smr_actions *acts, const smr_job_end *te);
  /* around an offline evaluation (a progress line; may be NULL) */
  void *(*progress_start)(void *arg, smr_runner *r);
  void (*progress_stop)(void *arg, void *progress);
} smr_job_print;

/* Check a configuration completely without reading a trial: every rule's
 * parameters, the syntax of every Lua script, the actions' settings
 * (`launched`: a command is started, so StopTraining has its target).
 * Returns SMR_OK, or an error (placed at the rule's line) in err. */
int smr_job_check_config(const smr_config *cfg, bool launched, smr_error *err);

/* Run the job: o is completed from cfg's top-level settings (Lua limits,
 * jobs); cfg may gain a ProfilerReport (--profile).  Returns the exit
 * status (docs/cli.md's precedence). */
int smr_job_run(smr_job_opts *o, smr_config *cfg, const smr_job_print *p);

#endif
