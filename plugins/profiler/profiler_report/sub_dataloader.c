/* ProfilerReport's copy of plugins/dataloader/dataloader.c (see rpt_int.h): the
 * rule's source compiled into this plugin with its entry point renamed. */
#include "rpt_int.h"

#define smrules_plugin_init rpt_init_dataloader
#include "../dataloader/dataloader.c"

const smrules_rule *rpt_sub_dataloader(const smrules_api *a) {
  return rpt_init_dataloader(a);
}
