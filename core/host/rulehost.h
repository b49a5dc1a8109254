/* rulehost.h - creating rule contexts and collecting what a rule reports
 * (violations per step, details, datapoints, warnings) into the report of
 * docs/rule-semantics.md#the-report.  Used by the runner; rule implementations
 * only see the smrules_api table and rulectx.h. */
#ifndef SMR_RULEHOST_H
#define SMR_RULEHOST_H

#include <stdint.h>

#include "config/params.h"
#include "host/rulectx.h"

smrules_ctx *smr_ctx_new(smr_trial *t, const char *name, const char *rule,
                         const smr_params *params);
void smr_ctx_free(smrules_ctx *ctx);

/* Bracket one invocation: violations added in between belong to `step`. */
void smr_ctx_step_begin(smrules_ctx *ctx, int64_t step);
void smr_ctx_step_end(smrules_ctx *ctx, int64_t step, bool triggered);

/* Message set with api->fail (or NULL). */
const char *smr_ctx_failure(const smrules_ctx *ctx);
void smr_ctx_set_failure(smrules_ctx *ctx, const char *msg);
int64_t smr_ctx_violations(const smrules_ctx *ctx);
/* Datapoints reported by the rule, or -1 when it never reported any. */
int64_t smr_ctx_datapoints(const smrules_ctx *ctx);
/* Violations of the most recent trigger as a JSON array text. */
const char *smr_ctx_last_violations(const smrules_ctx *ctx);

/* What api->live_info answers (the runner keeps it current). */
void smr_ctx_set_live(smrules_ctx *ctx, const smrules_live_info *info);
/* What api->live_workers answers: each worker's newest saved step,
 * names sorted (not copied: valid until the trial's next refresh). */
void smr_ctx_set_live_workers(smrules_ctx *ctx, const char *const *names,
                              const int64_t *steps, size_t n);
struct smr_profiler;
/* A tensor rule driven by the clock may read the system metrics recorded
 * beside a live run (api->system_events over any span, read afresh each
 * time): the reader (not owned; NULL: none recorded).  Unlike
 * smr_ctx_set_profiler this does not make it a profiler rule. */
void smr_ctx_attach_system_metrics(smrules_ctx *ctx, struct smr_profiler *p);

/* Where the instance's files go (see api->output_dir). */
void smr_ctx_set_output_dir(smrules_ctx *ctx, const char *dir);

/* Restore counters of an earlier run (resume). */
void smr_ctx_restore(smrules_ctx *ctx, int64_t violations, int64_t datapoints,
                     bool datapoints_reported, const char *last_trigger);

/* ... and the first trigger's {"step":..,"violations":[..]} (JSON text,
 * or NULL), after smr_ctx_restore. */
void smr_ctx_restore_first(smrules_ctx *ctx, const char *first_trigger);

/* The report JSON object (docs/rule-semantics.md#the-report) for the given
 * triggered steps and number of evaluated steps. */
char *smr_ctx_report_json(smrules_ctx *ctx, const smr_i64v *triggered,
                          int64_t evaluated);

/* Profiler rules (docs/rule-semantics.md#profiler-rules-windows): the reader
 * the rule queries (not owned; NULL: no profiler data, queries fail), the
 * window of the invocation in progress, and the reference report envelope for
 * smr_ctx_report_json. */
struct smr_profiler;
void smr_ctx_set_profiler(smrules_ctx *ctx, struct smr_profiler *p);
struct smr_profiler *smr_ctx_profiler(const smrules_ctx *ctx);
void smr_ctx_window_begin(smrules_ctx *ctx, int64_t index, int64_t start_us,
                          int64_t end_us);
/* Releases the events the rule queried during the window. */
void smr_ctx_window_end(smrules_ctx *ctx);

/* Log verbosity for every rule: messages below `level` are dropped
 * (0 debug, 1 info, 2 warning, 3 error).  Default 2. */
void smr_log_set_level(int level);

#endif
