/* ProfilerReport's copy of
 * plugins/overall_framework_metrics/overall_framework_metrics.c (see
 * rpt_int.h): the rule's source compiled into this plugin with its entry point
 * renamed. */
#include "rpt_int.h"

#define smrules_plugin_init rpt_init_overall_framework_metrics
#include "../overall_framework_metrics/overall_framework_metrics.c"

const smrules_rule *rpt_sub_overall_framework_metrics(const smrules_api *a) {
  return rpt_init_overall_framework_metrics(a);
}
