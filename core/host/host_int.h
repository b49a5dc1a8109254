/* host_int.h - what the files of the rule host share: the context's
 * fields, the report objects, the rule's files.  Private to core/host/
 * (rulectx.c, host_api.c, rule_output.c, report_json.c, subrule.c); the rest of
 * the core uses rulehost.h and rulectx.h. */
#ifndef SMR_HOST_INT_H
#define SMR_HOST_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "host/rulehost.h"
#include "profiler/profiler.h"

#define MAX_WARNINGS 100

struct smrules_ctx {
  smr_trial *trial;
  char *name, *rule;
  const smr_params *params;
  char *failure;
  /* violations of the step being evaluated, and of the last trigger */
  smrules_json **cur;
  size_t ncur;
  int64_t cur_step;
  char *last_trigger;  /* {"step":..,"violations":[..]} */
  char *first_trigger; /* the same of the first trigger (this run's state) */
  int64_t violations, datapoints;
  bool datapoints_reported;
  smrules_json *details;
  smr_strv warnings;
  int64_t nwarnings;
  char *output_dir;
  bool output_dir_made;
  smrules_live_info live;
  const char *const *live_workers; /* not owned (smr_ctx_set_live_workers) */
  const int64_t *live_newest;
  size_t nlive_workers;
  bool attached_prof; /* prof is a live run's metrics, not a profiler rule's */
  smr_trial **others; /* trials opened with open_trial */
  char **other_paths;
  size_t nothers;
  /* profiler rules (docs/rule-semantics.md#profiler-rules-windows): the reader,
   * the window, the report */
  bool profiler_rule;
  smr_profiler *prof; /* not owned */
  bool in_window;
  int64_t win_index, win_start, win_end;
  smr_sys_events sys;
  smr_fw_events fw;
  smr_strv arg_scratch; /* fw_arg strings of the current fw events */
  smr_strv param_texts; /* param_text results */
  int64_t p_triggered, p_violations, p_datapoints;
  char *rule_params; /* RuleParameters set by the rule */
  /* the range the events in sys and fw were read for (a sub-rule asking
   * for the same range is handed them: subrule.c) */
  bool sys_held, fw_held;
  int64_t sys_from, sys_to, fw_from, fw_to;
  /* rules run by this rule (api->sub_rule, subrule.c), and for one of
   * them, the rule running it and its own parameter set */
  smrules_ctx **subs;
  size_t nsubs;
  smrules_ctx *parent;
  smr_params *own_params;
};

/* rulectx.c: api->log and api->fail. */
void smr_ctx_log(smrules_ctx *c, int level, const char *fmt, ...);
void smr_ctx_failf(smrules_ctx *c, const char *fmt, ...);

/* rule_output.c: api->output_dir and api->write_output. */
const char *smr_ctx_output_dir(smrules_ctx *c);
int smr_ctx_write_output(smrules_ctx *c, const char *relpath, const void *data,
                         size_t len);

/* rulectx.c: a profiler rule's report, {"RuleTriggered", "Violations",
 * "Details", "Datapoints", "RuleParameters"} (malloc'ed). */
char *smr_ctx_profiler_report_json(smrules_ctx *c);

/* subrule.c: rules run by another rule (api->sub_rule, api->rule_report,
 * api->rule_failure); the parent's events handed to its sub-rules. */
smrules_ctx *smr_ctx_sub_rule(smrules_ctx *parent, const char *name);
void smr_ctx_subs_free(smrules_ctx *parent);
bool smr_ctx_sub_sys(smrules_ctx *c, int64_t start_us, int64_t end_us,
                     const smrules_sys_event **out, size_t *n);
bool smr_ctx_sub_fw(smrules_ctx *c, int64_t start_us, int64_t end_us,
                    const smrules_fw_event **out, size_t *n);
smrules_ctx *smr_api_sub_rule(smrules_ctx *ctx, const char *name);
char *smr_api_rule_report(smrules_ctx *ctx);
const char *smr_api_rule_failure(smrules_ctx *ctx);

/* report_json.c: the objects (api->json_*). */
smrules_json *smr_rjson_new(void);
void smr_rjson_free(smrules_json *j);
void smr_rjson_clear(smrules_json *j);
void smr_rjson_render(const smrules_json *j, smr_buf *out);
char *smr_rjson_text(const smrules_json *j);
void smr_rjson_str(smrules_json *j, const char *key, const char *v);
void smr_rjson_num(smrules_json *j, const char *key, double v);
void smr_rjson_int(smrules_json *j, const char *key, int64_t v);
void smr_rjson_bool(smrules_json *j, const char *key, bool v);
void smr_rjson_nums(smrules_json *j, const char *key, const double *v,
                    size_t n);
void smr_rjson_ints(smrules_json *j, const char *key, const int64_t *v,
                    size_t n);
void smr_rjson_strs(smrules_json *j, const char *key, const char *const *v,
                    size_t n);
smrules_json *smr_rjson_obj(smrules_json *j, const char *key);
void smr_rjson_null(smrules_json *j, const char *key);
void smr_rjson_raw(smrules_json *j, const char *key, const char *json);

#endif
