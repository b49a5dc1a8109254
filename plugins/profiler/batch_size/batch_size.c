/* BatchSize (docs/profiler.md#batchsize): CPU, GPU and GPU memory all lightly
 * used. The logic is the engine in plugins/engines/ (shared with
 * ProfilerReport). */
#include "prof_rules.h"

PR_PLUGIN(pr_batch_size)
