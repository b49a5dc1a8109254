/* GPUMemoryIncrease (docs/profiler.md#gpumemoryincrease): GPU memory rising
 * steadily. The logic is the engine in plugins/engines/ (shared with
 * ProfilerReport). */
#include "prof_rules.h"

PR_PLUGIN(pr_gpu_memory_increase)
