/* IOBottleneck (docs/profiler.md#iobottleneck): GPUs idle while CPUs wait for
 * I/O. The logic is the engine in plugins/engines/ (shared with
 * ProfilerReport). */
#include "prof_rules.h"

PR_PLUGIN(pr_io_bottleneck)
