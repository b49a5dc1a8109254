/* LowGPUUtilization (docs/profiler.md#lowgpuutilization): underused or
 * fluctuating GPUs. The logic is the engine in plugins/engines/ (shared with
 * ProfilerReport). */
#include "prof_rules.h"

PR_PLUGIN(pr_low_gpu_utilization)
