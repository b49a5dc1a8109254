/* rpt_html.h - building blocks of ProfilerReport's HTML document (see
 * docs/profiler-report.md#reading-the-report).  The document is drawn from the
 * sub-rules' reports only (as SageMaker's notebook read the JSON reports), so
 * every section reads rpt_sub reports through these helpers. */
#ifndef RPT_HTML_H
#define RPT_HTML_H

#include "rpt_int.h"
#include "rpt_svg.h"

/* Text (escaped) and formatted numbers. */
void h_text(rk_text *o, const char *s);
/* A number with `decimals` digits after the point ("-" when NaN). */
void h_num(rk_text *o, double v, int decimals);
/* Seconds since the epoch as "YYYY-MM-DD HH:MM:SS UTC". */
void h_time(rk_text *o, double seconds);

/* "time" or "times" after a count. */
const char *h_times(long long n);

/* <section> with an id and a title; h_section_end closes it. */
void h_section(rk_text *o, const char *id, const char *title);
void h_section_end(rk_text *o);
void h_h3(rk_text *o, const char *title);
/* A paragraph of plain text (escaped) / a muted note. */
void h_p(rk_text *o, const char *text);
void h_note(rk_text *o, const char *text);

/* Tables: h_table(o, "a|b|c") opens a table with those headers; rows are
 * written with h_tr/h_td_*; h_table_end closes it. */
void h_table(rk_text *o, const char *headers);
void h_tr(rk_text *o);
void h_tr_end(rk_text *o);
void h_td(rk_text *o, const char *s);
void h_td_num(rk_text *o, double v, int decimals);
void h_table_end(rk_text *o);

/* The sub-rule report Details (an empty object when missing). */
const smr_json *h_details(const rpt_view *v, const char *rule);
/* Members of an object (0 for anything else). */
size_t h_members(const smr_json *x);
/* Whether x is an array of numbers only, and its length if so (else 0). */
bool h_is_numbers(const smr_json *x);
size_t h_numbers(const smr_json *x);
/* Whether a sub-rule ran and its report has any Details. */
bool h_has_details(const rpt_view *v, const char *rule);

/* The framework breakdown keys of a report (ratio, CPU, GPU, phase,
 * general, forward_backward, horovod) as pie charts and operator tables;
 * false when there is none. */
bool h_breakdown(rk_text *o, const smr_json *details, const char *what);
/* Pie chart of the members of a {name: number} object. */
bool h_pie_obj(rk_text *o, const char *title, const smr_json *obj);
/* Table of an operator breakdown: percent (`pct`) and µs (`total`). */
bool h_ops_table(rk_text *o, const char *title, const smr_json *pct,
                 const smr_json *total);

#endif
