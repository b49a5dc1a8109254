/* CPUBottleneck (rules.md §4.1): GPUs idle while CPUs are busy.
 * The logic is the engine in plugins/engines/ (shared with ProfilerReport). */
#include "prof_rules.h"

PR_PLUGIN(pr_cpu_bottleneck)
