/* MaxInitializationTime: the rule's plugin.  Its logic is the engine in
 * plugins/engines/fw_max_initialization_time.c, shared with ProfilerReport. */
#include "fw_rules.h"

SMRULES_PLUGIN_INIT {
  return fw_max_initialization_time(api);
}
