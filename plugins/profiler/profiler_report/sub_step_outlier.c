/* ProfilerReport's copy of plugins/step_outlier/step_outlier.c (see rpt_int.h):
 * the rule's source compiled into this plugin with its entry point renamed. */
#include "rpt_int.h"

#define smrules_plugin_init rpt_init_step_outlier
#include "../step_outlier/step_outlier.c"

const smrules_rule *rpt_sub_step_outlier(const smrules_api *a) {
  return rpt_init_step_outlier(a);
}
