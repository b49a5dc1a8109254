/* fw_rules.h - the framework-metric profiler rules (StepOutlier,
 * Dataloader, MaxInitializationTime, OverallFrameworkMetrics) as engines:
 * each returns its rule registration bound to the function table `api`.
 * The rule's own plugin (plugins/profiler/<rule>/) and ProfilerReport both
 * pass the host's table; ProfilerReport runs the registration in a
 * context the host makes for it (api->sub_rule), so both run the same
 * code and the rule never needs rulekit's global rk_api.
 *
 * Each engine keeps one table per loaded .so: call it once per plugin
 * with the host's `api`. */
#ifndef FW_RULES_H
#define FW_RULES_H

#include "smrules/smrules.h"

const smrules_rule *fw_step_outlier(const smrules_api *api);
const smrules_rule *fw_dataloader(const smrules_api *api);
const smrules_rule *fw_max_initialization_time(const smrules_api *api);
const smrules_rule *fw_overall_framework_metrics(const smrules_api *api);

/* Under ProfilerReport the reference never advances a sub-rule's own
 * last_timestamp (docs/profiler-report.md#evaluation): MaxInitializationTime's
 * clock stays at the trial's first timestamp and it never triggers.  `state` is
 * what the registration's init created. */
void fw_max_initialization_time_fix_clock(void *state);

#endif
