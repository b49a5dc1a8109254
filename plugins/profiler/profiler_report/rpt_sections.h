/* rpt_sections.h - the sections of ProfilerReport's HTML document, each
 * drawn from the sub-rules' reports (rpt_html_sys.c: system metrics,
 * rpt_html_fw.c: framework metrics); put in order by rpt_doc.c. */
#ifndef RPT_SECTIONS_H
#define RPT_SECTIONS_H

#include "rpt_html.h"

void h_system_usage(rk_text *o, const rpt_view *v);
void h_framework_summary(rk_text *o, const rpt_view *v);
void h_step_durations(rk_text *o, const rpt_view *v);
void h_gpu_utilization(rk_text *o, const rpt_view *v);
void h_load_balancing(rk_text *o, const rpt_view *v);
void h_dataloading(rk_text *o, const rpt_view *v);
void h_batch_size(rk_text *o, const rpt_view *v);
void h_bottleneck(rk_text *o, const rpt_view *v, const char *rule);
void h_gpu_memory(rk_text *o, const rpt_view *v);

#endif
