/* OverallSystemUsage (docs/profiler.md#overallsystemusage): per-node usage
 * statistics. The logic is the engine in plugins/engines/ (shared with
 * ProfilerReport). */
#include "prof_rules.h"

PR_PLUGIN(pr_overall_system_usage)
