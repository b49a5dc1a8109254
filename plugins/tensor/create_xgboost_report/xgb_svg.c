/* xgb_svg.c - inline SVG charts for the XGBoost report: line charts of
 * metrics over steps, horizontal bar charts of feature importance and
 * histograms.  Everything is drawn here; the page loads nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "xgb_report.h"

#define W 640.0
#define H 300.0
#define LEFT 70.0
#define RIGHT 20.0
#define TOP 30.0
#define BOTTOM 45.0

static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c",
                                      "#d62728", "#9467bd", "#8c564b",
                                      "#e377c2", "#7f7f7f"};
#define NCOLORS (sizeof palette / sizeof palette[0])

void xgb_escape(rk_text *t, const char *s) {
  for (; *s; s++) {
    switch (*s) {
    case '&':
      rk_text_printf(t, "&amp;");
      break;
    case '<':
      rk_text_printf(t, "&lt;");
      break;
    case '>':
      rk_text_printf(t, "&gt;");
      break;
    case '"':
      rk_text_printf(t, "&quot;");
      break;
    case '\'':
      rk_text_printf(t, "&#39;");
      break;
    default: /* control characters are not allowed in HTML text */
      rk_text_printf(t, "%c",
                     (unsigned char)*s < ' ' && *s != '\n' && *s != '\t' ? '?'
                                                                         : *s);
    }
  }
}

/* A value range with some room; never empty. */
typedef struct range {
  double lo, hi;
} range;

static range widen(range r) {
  if (!(r.lo <= r.hi)) /* nothing finite */
    return (range){0, 1};
  if (r.lo == r.hi)
    return (range){r.lo - 0.5, r.hi + 0.5};
  return r;
}

static double scale(double v, range r, double from, double to) {
  return from + (v - r.lo) / (r.hi - r.lo) * (to - from);
}

static void svg_open(rk_text *t, const char *title, double height) {
  rk_text_printf(
      t,
      "<svg class=\"chart\" viewBox=\"0 0 %.0f %.0f\" "
      "width=\"%.0f\" height=\"%.0f\" "
      "role=\"img\" font-family=\"sans-serif\" font-size=\"11\"><title>",
      W, height, W, height);
  xgb_escape(t, title);
  rk_text_printf(t, "</title>\n");
}

static void text_at(rk_text *t, double x, double y, const char *anchor,
                    const char *s) {
  rk_text_printf(t, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">", x, y,
                 anchor);
  xgb_escape(t, s);
  rk_text_printf(t, "</text>\n");
}

static void num_at(rk_text *t, double x, double y, const char *anchor,
                   double v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.4g", v);
  text_at(t, x, y, anchor, buf);
}

/* Axes with 5 ticks on each. */
static void axes(rk_text *t, range xr, range yr, const char *xlabel) {
  double x0 = LEFT, x1 = W - RIGHT, y0 = H - BOTTOM, y1 = TOP;
  rk_text_printf(t,
                 "<path class=\"axis\" stroke=\"#333\" fill=\"none\" d=\"M%.1f "
                 "%.1fV%.1fH%.1f\"/>\n",
                 x0, y1, y0, x1);
  for (int i = 0; i <= 4; i++) {
    double fy = yr.lo + (yr.hi - yr.lo) * i / 4.0;
    double py = scale(fy, yr, y0, y1);
    rk_text_printf(
        t, "<path class=\"grid\" stroke=\"#e5e5e5\" d=\"M%.1f %.1fH%.1f\"/>\n",
        x0, py, x1);
    num_at(t, x0 - 6, py + 4, "end", fy);
    double fx = xr.lo + (xr.hi - xr.lo) * i / 4.0;
    num_at(t, scale(fx, xr, x0, x1), y0 + 16, "middle", fx);
  }
  text_at(t, (x0 + x1) / 2, H - 8, "middle", xlabel);
}

static range series_range(const xgb_series *s, size_t n, bool use_x) {
  range r = {INFINITY, -INFINITY};
  for (size_t k = 0; k < n; k++)
    for (size_t i = 0; i < s[k].n; i++) {
      double v = use_x ? s[k].x[i] : s[k].y[i];
      if (isfinite(v)) {
        r.lo = v < r.lo ? v : r.lo;
        r.hi = v > r.hi ? v : r.hi;
      }
    }
  return widen(r);
}

/* One series as a polyline broken at non-finite values, with dots. */
static void polyline(rk_text *t, const xgb_series *s, range xr, range yr,
                     const char *color) {
  bool open = false;
  for (size_t i = 0; i < s->n; i++) {
    if (!isfinite(s->y[i])) {
      if (open)
        rk_text_printf(t, "\"/>\n");
      open = false;
      continue;
    }
    double px = scale(s->x[i], xr, LEFT, W - RIGHT);
    double py = scale(s->y[i], yr, H - BOTTOM, TOP);
    if (!open)
      rk_text_printf(t,
                     "<polyline fill=\"none\" stroke=\"%s\" "
                     "stroke-width=\"2\" points=\"",
                     color);
    rk_text_printf(t, "%s%.1f,%.1f", open ? " " : "", px, py);
    open = true;
  }
  if (open)
    rk_text_printf(t, "\"/>\n");
  for (size_t i = 0; i < s->n; i++)
    if (isfinite(s->y[i]))
      rk_text_printf(t,
                     "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" "
                     "fill=\"%s\"/>\n",
                     scale(s->x[i], xr, LEFT, W - RIGHT),
                     scale(s->y[i], yr, H - BOTTOM, TOP), color);
}

static void legend(rk_text *t, const char *const *names, size_t n) {
  for (size_t k = 0; k < n; k++) {
    double x = LEFT + 10 + 150.0 * (double)k;
    rk_text_printf(t,
                   "<rect x=\"%.1f\" y=\"8\" width=\"12\" height=\"12\" "
                   "fill=\"%s\"/>\n",
                   x, palette[k % NCOLORS]);
    text_at(t, x + 16, 18, "start", names[k]);
  }
}

void xgb_svg_lines(rk_text *t, const char *title, const char *xlabel,
                   const xgb_series *s, size_t n) {
  range xr = series_range(s, n, true), yr = series_range(s, n, false);
  svg_open(t, title, H);
  axes(t, xr, yr, xlabel);
  const char **names = xgb_realloc(NULL, n, sizeof *names);
  for (size_t k = 0; k < n; k++) {
    polyline(t, &s[k], xr, yr, palette[k % NCOLORS]);
    names[k] = s[k].name;
  }
  legend(t, names, n);
  free(names);
  rk_text_printf(t, "</svg>\n");
}

void xgb_svg_bars(rk_text *t, const char *title, const xgb_bar *b, size_t n) {
  const double row = 22, label_w = 170, left = label_w + 10;
  double height = TOP + row * (double)n + 10, max = 0;
  for (size_t i = 0; i < n; i++)
    max =
        isfinite(b[i].value) && fabs(b[i].value) > max ? fabs(b[i].value) : max;
  svg_open(t, title, height);
  for (size_t i = 0; i < n; i++) {
    double y = TOP + row * (double)i;
    double v = isfinite(b[i].value) ? fabs(b[i].value) : 0;
    double w = max > 0 ? v / max * (W - left - 80) : 0;
    text_at(t, label_w, y + 15, "end", b[i].label);
    rk_text_printf(t,
                   "<rect class=\"bar\" fill=\"#1f77b4\" x=\"%.1f\" y=\"%.1f\" "
                   "width=\"%.1f\" height=\"%.1f\"/>\n",
                   left, y + 3, w, row - 6);
    num_at(t, left + w + 6, y + 15, "start", b[i].value);
  }
  rk_text_printf(t, "</svg>\n");
}

/* Adds the finite values inside [edges[0], edges[bins]] to their bins (the
 * last bin is closed). */
static void count_bins(const double *x, size_t n, const double *edges, int bins,
                       int64_t *counts) {
  double lo = edges[0], hi = edges[bins];
  for (int i = 0; i < bins; i++)
    counts[i] = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(x[i]) || x[i] < lo || x[i] > hi)
      continue;
    int b = (int)((x[i] - lo) / (hi - lo) * bins);
    b = b < 0 ? 0 : b >= bins ? bins - 1 : b;
    /* floating point: settle on the bin whose edges hold the value */
    while (b > 0 && x[i] < edges[b])
      b--;
    while (b < bins - 1 && x[i] >= edges[b + 1])
      b++;
    counts[b]++;
  }
}

void xgb_histogram(const double *x, size_t n, int bins, int64_t *counts,
                   double *edges) {
  range r = {INFINITY, -INFINITY};
  for (size_t i = 0; i < n; i++)
    if (isfinite(x[i])) {
      r.lo = x[i] < r.lo ? x[i] : r.lo;
      r.hi = x[i] > r.hi ? x[i] : r.hi;
    }
  r = widen(r);
  for (int i = 0; i <= bins; i++)
    edges[i] = i * ((r.hi - r.lo) / bins) + r.lo;
  edges[bins] = r.hi;
  count_bins(x, n, edges, bins, counts);
}

/* Every set's values in one array, for bins common to all sets. */
static double *all_values(const double *const *values, const size_t *counts,
                          size_t nsets, size_t *n) {
  *n = 0;
  for (size_t s = 0; s < nsets; s++)
    *n += counts[s];
  double *all = xgb_realloc(NULL, *n, sizeof *all);
  size_t k = 0;
  for (size_t s = 0; s < nsets; s++)
    for (size_t i = 0; i < counts[s]; i++)
      all[k++] = values[s][i];
  return all;
}

void xgb_svg_histogram(rk_text *t, const char *title, const char *const *names,
                       const double *const *values, const size_t *counts,
                       size_t nsets, int bins) {
  size_t n;
  double *all = all_values(values, counts, nsets, &n);
  double *edges = xgb_realloc(NULL, (size_t)bins + 1, sizeof *edges);
  int64_t *c = xgb_realloc(NULL, (size_t)bins * nsets, sizeof *c);
  xgb_histogram(all, n, bins, c, edges);
  int64_t top = 1;
  for (size_t s = 0; s < nsets; s++) {
    int64_t *cs = c + s * (size_t)bins;
    count_bins(values[s], counts[s], edges, bins, cs);
    for (int b = 0; b < bins; b++)
      top = cs[b] > top ? cs[b] : top;
  }
  top = (top + 3) / 4 * 4; /* whole counts at the 5 ticks */
  range xr = {edges[0], edges[bins]}, yr = {0, (double)top};
  svg_open(t, title, H);
  axes(t, xr, yr, "value");
  double bw = (W - LEFT - RIGHT) / bins / (double)nsets;
  for (size_t s = 0; s < nsets; s++)
    for (int b = 0; b < bins; b++) {
      int64_t k = c[s * (size_t)bins + (size_t)b];
      double x = LEFT + (W - LEFT - RIGHT) * b / bins + bw * (double)s;
      double y = scale((double)k, yr, H - BOTTOM, TOP);
      rk_text_printf(t,
                     "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                     "height=\"%.1f\" fill=\"%s\"><title>%lld</title>"
                     "</rect>\n",
                     x, y, bw, H - BOTTOM - y, palette[s % NCOLORS],
                     (long long)k);
    }
  legend(t, names, nsets);
  rk_text_printf(t, "</svg>\n");
  free(all);
  free(edges);
  free(c);
}
