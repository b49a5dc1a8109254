/* rpt_svg.h - inline SVG charts for the HTML reports: horizontal bars,
 * histograms, box plots, lines and pies.  Every chart is one <svg> element
 * with a viewBox (it scales with the page), a <title> for accessibility,
 * text in the page's font, and only shapes that carry data plus axes; a
 * chart without data is not drawn at all (the caller writes a note
 * instead), so every <svg> in a report has at least one shape of non-zero
 * size.  Colours come from one palette so that the report looks uniform. */
#ifndef RPT_SVG_H
#define RPT_SVG_H

#include <stdbool.h>
#include <stddef.h>

#include "smrules/rulekit.h"

/* The i-th colour of the palette (cycles). */
const char *svg_color(size_t i);

/* HTML/XML text escaping (also for attribute values). */
void svg_escape(rk_text *o, const char *s);

/* Horizontal bars, one per label, scaled to the largest value; `unit` is
 * appended to each value's label ("%", " s", ""). */
bool svg_bars(rk_text *o, const char *title, const char *const *labels,
              const double *values, size_t n, const char *unit);

/* A histogram: counts[i] in [edges[i], edges[i+1]); nbins counts and
 * nbins + 1 edges. */
bool svg_histogram(rk_text *o, const char *title, const double *counts,
                   const double *edges, size_t nbins, const char *xlabel);

/* One box per item: whiskers lower..upper, box p25..p75, median line, and
 * optional markers (NaN: not drawn). */
typedef struct svg_box {
  const char *label;
  double lower, p25, p50, p75, upper;
  double marks[3];           /* e.g. p95, p5, max */
  const char *mark_names[3]; /* legend of the markers, NULL when unused */
} svg_box;
bool svg_boxplots(rk_text *o, const char *title, const svg_box *boxes, size_t n,
                  const char *unit);

/* Line chart of one or more series over a shared x (x may be NULL: the
 * index). */
typedef struct svg_series {
  const char *name;
  const double *y;
  size_t n;
} svg_series;
bool svg_lines(rk_text *o, const char *title, const double *x,
               const svg_series *s, size_t ns, const char *xlabel,
               const char *ylabel);

/* A pie with a legend; slices with a value <= 0 are left out. */
bool svg_pie(rk_text *o, const char *title, const char *const *labels,
             const double *values, size_t n);

#endif
