/* ProfilerReport's copy of
 * plugins/max_initialization_time/max_initialization_time.c (see rpt_int.h):
 * the rule's source compiled into this plugin with its entry point renamed. */
#include "rpt_int.h"

#define smrules_plugin_init rpt_init_max_initialization_time
#include "../max_initialization_time/max_initialization_time.c"

const smrules_rule *rpt_sub_max_initialization_time(const smrules_api *a) {
  return rpt_init_max_initialization_time(a);
}

void rpt_sub_max_initialization_time_fix_clock(void *st) {
  fix_clock(st);
}
