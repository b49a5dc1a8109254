/* CPUBottleneck (docs/profiler.md#cpubottleneck): GPUs idle while CPUs are
 * busy. The logic is the engine in plugins/engines/ (shared with
 * ProfilerReport). */
#include "prof_rules.h"

PR_PLUGIN(pr_cpu_bottleneck)
