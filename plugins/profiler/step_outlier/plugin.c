/* StepOutlier: the rule's plugin.  Its logic is the engine in
 * plugins/engines/fw_step_outlier.c, shared with ProfilerReport. */
#include "fw_rules.h"

SMRULES_PLUGIN_INIT {
  return fw_step_outlier(api);
}
