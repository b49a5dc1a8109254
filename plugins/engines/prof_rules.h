/* prof_rules.h - the profiler rules as engines
 * (docs/rules/README.md#profiler-rules): each rule's reference logic behind one
 * interface, so that its plugin and ProfilerReport (which feeds every sub-rule
 * the same window's events) run the same code.  A plugin folder only names its
 * engine:
 *
 *     #include "prof_rules.h"
 *     PR_PLUGIN(pr_cpu_bottleneck)
 *
 * The engine keeps the reference's state and report (RuleTriggered,
 * Violations, Datapoints, Details) across windows. */
#ifndef PROF_RULES_H
#define PROF_RULES_H

#include "profkit.h"

/* One window as an engine sees it. */
typedef struct pr_window {
  int64_t index, start_us, end_us;
  /* the rule's own last_timestamp: the window start when run alone, the
   * trial's first timestamp under ProfilerReport
   * (docs/profiler-report.md#evaluation) */
  int64_t last_timestamp;
  const smrules_sys_event *sys;
  size_t nsys;
  pk_fw_source *fw; /* framework events, fetched on demand */
  smrules_ctx *ctx; /* for logging */
} pr_window;

/* The reference report of an engine (owned by the engine). */
typedef struct pr_report {
  int64_t triggered, violations, datapoints;
  pk_obj *details;
} pr_report;

typedef struct pr_engine_ops {
  const char *name; /* SageMaker's rule name */
  const char *description;
  const char *data_needed;
  const smrules_param *params; /* the rule's parameter table */
  size_t settings_size;
  bool needs_system; /* reads system metrics */
  /* settings: filled by the host from `params` */
  void *(*create)(const void *settings);
  /* evaluate one window; *condition: the rule's condition is met (the
   * reference raises RuleEvaluationConditionMet).  0, or SMRULES_ERR after
   * rk_api->fail. */
  int (*window)(void *engine, const pr_window *w, bool *condition);
  /* the report as it stands (details completed) */
  void (*report)(void *engine, pr_report *out);
  /* the RuleParameters string
   * (docs/rule-semantics.md#profiler-rules-the-report) */
  void (*rule_parameters)(const void *settings, char *buf, size_t n);
  void (*destroy)(void *engine);
} pr_engine_ops;

extern const pr_engine_ops pr_cpu_bottleneck, pr_io_bottleneck,
    pr_low_gpu_utilization, pr_gpu_memory_increase, pr_batch_size,
    pr_load_balancing, pr_overall_system_usage;

/* ------------------------------------------------ the plugin around one */
void pr_fill_rule(smrules_rule *reg, const pr_engine_ops *ops);

#define PR_PLUGIN(ops)                                                         \
  static smrules_rule pr_reg_;                                                 \
  SMRULES_PLUGIN_INIT {                                                        \
    rk_api = api;                                                              \
    if (!SMRULES_API_HAS(api, json_free))                                      \
      return NULL; /* a host without the profiler API */                       \
    pr_fill_rule(&pr_reg_, &(ops));                                            \
    return &pr_reg_;                                                           \
  }

/* Parameter-table entries with the validators of
 * docs/rule-semantics.md#profiler-rules-parameter-validation (the Decision
 * accepting 0); `field` is the offset (SMRULES_OFFSET). */
#define PR_PERCENT(type_, name_, def, field, desc)                             \
  {                                                                            \
    .type = (type_), .name = (name_), .default_value = (def),                  \
    .flags = SMRULES_P_MIN | SMRULES_P_MAX, .min = 0, .max = 100,              \
    .offset = (field), .description = (desc)                                   \
  }
#define PR_NONNEG(type_, name_, def, field, desc)                              \
  {                                                                            \
    .type = (type_), .name = (name_), .default_value = (def),                  \
    .flags = SMRULES_P_MIN, .min = 0, .offset = (field), .description = (desc) \
  }
#define PR_SCAN_INTERVAL(field)                                                \
  {                                                                            \
    .type = SMRULES_PARAM_INT, .name = "scan_interval_us",                     \
    .default_value = "60000000", .flags = SMRULES_P_MIN | SMRULES_P_MIN_OPEN,  \
    .min = 0, .offset = (field),                                               \
    .description = "window length in microseconds"                             \
  }

#endif
