/* LoadBalancing (docs/profiler.md#loadbalancing): GPU workload histograms.
 * The logic is the engine in plugins/engines/ (shared with ProfilerReport). */
#include "prof_rules.h"

PR_PLUGIN(pr_load_balancing)
