/* rpt_html.c - building blocks of ProfilerReport's HTML document: text,
 * numbers, sections, tables, the sub-rules' Details, and the framework
 * breakdown charts that several sections show.  The document itself is
 * put together in rpt_doc.c from the sections of rpt_html_sys.c and
 * rpt_html_fw.c. */
#include "rpt_html.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------- helpers */

void h_text(rk_text *o, const char *s) {
  svg_escape(o, s);
}

void h_num(rk_text *o, double v, int decimals) {
  if (!isfinite(v))
    rk_text_printf(o, "-");
  else
    rk_text_printf(o, "%.*f", decimals, v);
}

void h_time(rk_text *o, double seconds) {
  if (!isfinite(seconds) || fabs(seconds) > 1e12) {
    rk_text_printf(o, "-");
    return;
  }
  time_t t = (time_t)floor(seconds);
  struct tm tm;
  char b[48];
  if (!gmtime_r(&t, &tm) || !strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S", &tm)) {
    rk_text_printf(o, "-");
    return;
  }
  rk_text_printf(o, "%s UTC", b);
}

const char *h_times(long long n) {
  return n == 1 ? "time" : "times";
}

void h_section(rk_text *o, const char *id, const char *title) {
  rk_text_printf(o, "<section id=\"%s\"><h2>", id);
  h_text(o, title);
  rk_text_printf(o, "</h2>\n");
}

void h_section_end(rk_text *o) {
  rk_text_printf(o, "</section>\n");
}

void h_h3(rk_text *o, const char *title) {
  rk_text_printf(o, "<h3>");
  h_text(o, title);
  rk_text_printf(o, "</h3>\n");
}

void h_p(rk_text *o, const char *text) {
  rk_text_printf(o, "<p>");
  h_text(o, text);
  rk_text_printf(o, "</p>\n");
}

void h_note(rk_text *o, const char *text) {
  rk_text_printf(o, "<p class=\"note\">");
  h_text(o, text);
  rk_text_printf(o, "</p>\n");
}

void h_table(rk_text *o, const char *headers) {
  rk_text_printf(o, "<table><thead><tr>");
  const char *h = headers;
  while (h) {
    const char *bar = strchr(h, '|');
    size_t n = bar ? (size_t)(bar - h) : strlen(h);
    char cell[96];
    snprintf(cell, sizeof cell, "%.*s", (int)n, h);
    rk_text_printf(o, "<th>");
    h_text(o, cell);
    rk_text_printf(o, "</th>");
    h = bar ? bar + 1 : NULL;
  }
  rk_text_printf(o, "</tr></thead><tbody>\n");
}

void h_tr(rk_text *o) {
  rk_text_printf(o, "<tr>");
}
void h_tr_end(rk_text *o) {
  rk_text_printf(o, "</tr>\n");
}

void h_td(rk_text *o, const char *s) {
  rk_text_printf(o, "<td>");
  h_text(o, s);
  rk_text_printf(o, "</td>");
}

void h_td_num(rk_text *o, double v, int decimals) {
  rk_text_printf(o, "<td class=\"n\">");
  h_num(o, v, decimals);
  rk_text_printf(o, "</td>");
}

void h_table_end(rk_text *o) {
  rk_text_printf(o, "</tbody></table>\n");
}

const rpt_sub *rpt_find(const rpt_view *v, const char *name) {
  for (size_t i = 0; i < RPT_NSUB; i++)
    if (v->subs[i].name && strcmp(v->subs[i].name, name) == 0)
      return v->subs[i].ready ? &v->subs[i] : NULL;
  return NULL;
}

/* NULL when the rule has no report: every smr_json reader takes NULL as
 * absent. */
const smr_json *h_details(const rpt_view *v, const char *rule) {
  const rpt_sub *s = rpt_find(v, rule);
  return s ? s->details : NULL;
}

bool h_has_details(const rpt_view *v, const char *rule) {
  return h_members(h_details(v, rule)) > 0;
}

size_t h_members(const smr_json *x) {
  return smr_json_is_obj(x) ? smr_json_len(x) : 0;
}

/* An array holding integers and doubles only (packed, or item by item). */
bool h_is_numbers(const smr_json *x) {
  if (smr_json_type_of(x) != SMR_JSON_ARR)
    return false;
  for (size_t i = 0; i < smr_json_len(x); i++) {
    const smr_json *item = smr_json_at(x, i); /* NULL: packed numbers */
    smr_json_type t = smr_json_type_of(item);
    if (item && t != SMR_JSON_INT && t != SMR_JSON_NUM)
      return false;
  }
  return true;
}

size_t h_numbers(const smr_json *x) {
  return h_is_numbers(x) ? smr_json_len(x) : 0;
}

/* ------------------------------------------- framework breakdown charts */

#define MAX_SLICES 64

bool h_pie_obj(rk_text *o, const char *title, const smr_json *obj) {
  if (!smr_json_is_obj(obj) || !h_members(obj))
    return false;
  const char *labels[MAX_SLICES];
  double vals[MAX_SLICES];
  size_t n = 0;
  for (size_t i = 0; i < h_members(obj) && n < MAX_SLICES; i++) {
    double x;
    if (!smr_json_number(smr_json_at(obj, i), &x))
      continue;
    labels[n] = smr_json_key(smr_json_at(obj, i));
    vals[n++] = x;
  }
  return svg_pie(o, title, labels, vals, n);
}

bool h_ops_table(rk_text *o, const char *title, const smr_json *pct,
                 const smr_json *total) {
  size_t n = h_members(pct);
  size_t *idx = n ? malloc(n * sizeof *idx) : NULL;
  if (!idx)
    return false;
  for (size_t i = 0; i < n; i++)
    idx[i] = i;
  for (size_t i = 1; i < n; i++) /* by share, largest first (stable) */
    for (size_t k = i;
         k > 0 &&
         smr_json_num_or(pct, smr_json_key(smr_json_at(pct, idx[k])), 0) >
             smr_json_num_or(pct, smr_json_key(smr_json_at(pct, idx[k - 1])),
                             0);
         k--) {
      size_t t = idx[k];
      idx[k] = idx[k - 1];
      idx[k - 1] = t;
    }
  h_h3(o, title);
  rk_text_printf(o, "<p>The most expensive operator was <b>");
  h_text(o, smr_json_key(smr_json_at(pct, idx[0])));
  rk_text_printf(
      o, "</b> (%.1f %% of the time shown).</p>\n",
      smr_json_num_or(pct, smr_json_key(smr_json_at(pct, idx[0])), NAN));
  h_table(o, "percentage|cumulative time (µs)|operator");
  for (size_t i = 0; i < n; i++) {
    const char *k = smr_json_key(smr_json_at(pct, idx[i]));
    h_tr(o);
    h_td_num(o, smr_json_num_or(pct, k, NAN), 2);
    h_td_num(o, smr_json_num_or(total, k, NAN), 0);
    h_td(o, k);
    h_tr_end(o);
  }
  h_table_end(o);
  free(idx);
  return true;
}

bool h_breakdown(rk_text *o, const smr_json *d, const char *what) {
  char t[160];
  bool any = false;
  snprintf(t, sizeof t, "Training phases %s", what);
  any |= h_pie_obj(o, t, smr_json_get(d, "phase"));
  snprintf(t, sizeof t, "Forward and backward pass %s", what);
  any |= h_pie_obj(o, t, smr_json_get(d, "forward_backward"));
  snprintf(t, sizeof t, "CPU and GPU operators %s", what);
  any |= h_pie_obj(o, t, smr_json_get(d, "ratio"));
  snprintf(t, sizeof t, "General framework metrics %s", what);
  any |= h_pie_obj(o, t, smr_json_get(d, "general"));
  snprintf(t, sizeof t, "Horovod operations %s", what);
  any |= h_pie_obj(o, t, smr_json_get(d, "horovod"));
  snprintf(t, sizeof t, "CPU operators %s", what);
  any |=
      h_ops_table(o, t, smr_json_get(d, "CPU"), smr_json_get(d, "CPU_total"));
  snprintf(t, sizeof t, "GPU operators %s", what);
  any |=
      h_ops_table(o, t, smr_json_get(d, "GPU"), smr_json_get(d, "GPU_total"));
  return any;
}
