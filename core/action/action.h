/* action.h - what smrules does when a rule fires (docs/actions.md): stop
 * the training process, send an e-mail, an SMS through SNS, or run a
 * configured exec/webhook hook.
 *
 * The plan is built from rules.yaml once (every action setting checked,
 * errors with line and column).  Triggers are handed over by the runner's
 * on_trigger callback; the actions run on a worker thread, so a slow or
 * failing action never blocks or breaks rule evaluation.  Each action runs
 * once per rule trigger that is due (first trigger by default) and is
 * recorded in the trial's SQLite state before and after it runs, so a
 * restarted smrules never repeats it. */
#ifndef SMR_ACTION_H
#define SMR_ACTION_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/common.h"
#include "config/config.h"
#include "run/runner.h"

typedef struct smr_actions smr_actions;
typedef struct sqlite3 sqlite3;

typedef struct smr_actions_opts {
  const char *trial_dir;  /* default job name, event field "trial" */
  const char *job_name;   /* --job-name: the event's "job" (NULL: the trial
                             folder's name) */
  int64_t training_pid;   /* --training-pid N (0: not given) */
  bool dry_run;           /* describe what would be done, do nothing */
  bool verbose;           /* log every outcome on stderr, not only problems */
  bool validate_only;     /* `smrules validate`: check the plan, run nothing */
  bool launched;          /* training_pid is smrules' own child (run --) */
  sqlite3 *db;            /* the trial's state database (NULL: memory) */
  const char *output_dir; /* the rules' output folders' parent (DumpStacks) */
} smr_actions_opts;

/* Build and check the plan.  Configuration errors: SMR_ERR_USAGE with
 * err->file = the rules.yaml path and "line L, column C: ..." messages.
 * Warnings (e.g. an address SageMaker would have rejected) go to stderr. */
int smr_actions_new(const smr_config *cfg, const smr_actions_opts *o,
                    smr_actions **out, smr_error *err);
/* True when no rule has an action (no callback needed). */
bool smr_actions_empty(const smr_actions *a);
/* smr_run_opts.on_trigger; arg is the smr_actions. */
void smr_actions_on_trigger(void *arg, smr_instance *inst, int64_t step);
/* Wait until every queued action has run (each bounded by its timeout,
 * retries and, for StopTraining, the grace period). */
void smr_actions_finish(smr_actions *a);
/* The per-run summary: a table (nothing when no action was due) ... */
void smr_actions_print_summary(smr_actions *a, FILE *f);
/* ... or a JSON array [{rule, action, target, step, trigger, outcome,
 * attempts, detail, seconds}]. */
char *smr_actions_json(smr_actions *a);
/* How many due actions ended `failed` (after their retries). */
size_t smr_actions_failed(smr_actions *a);
/* The rule whose StopTraining signalled the training process (outcome
 * ok), or NULL; valid until smr_actions_free. */
const char *smr_actions_stopped_by(smr_actions *a);
/* Every due action so far, in order: its rule, its label and its
 * outcome ("pending" until it has run), under the dispatcher's lock
 * (fn must not call back into the actions).  For the metrics. */
void smr_actions_each(smr_actions *a,
                      void (*fn)(void *arg, const char *rule,
                                 const char *action, const char *outcome),
                      void *arg);
void smr_actions_free(smr_actions *a);

/* A state file found inside the trial folder (<trial>/.smrules/state.db:
 * where smrules kept its state before, or anything the job planted) is
 * history nobody vouches for: the training job can write it, so it is
 * never taken as proof that an action ran.  Says so on stderr, with what
 * it records, when one is there and is not `in_use` (the state file of
 * this run, chosen with --state). */
void smr_actions_note_trial_log(const char *trial_dir, const char *in_use);

#endif
