/* pr_svg.c - inline SVG charts (see rpt_svg.h).  Coordinates are written
 * with one decimal; text uses the page's font (no web fonts). */
#include "rpt_svg.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const PALETTE[] = {
    "#2f6fb0", "#e07b39", "#3a9e5c", "#c0392b", "#8e6bbf",
    "#8c6d4f", "#d36fb0", "#7f7f7f", "#b5b536", "#2bb3c0"};
#define NPAL (sizeof PALETTE / sizeof *PALETTE)

const char *svg_color(size_t i) {
  return PALETTE[i % NPAL];
}

void svg_escape(rk_text *o, const char *s) {
  const char *run = s ? s : "";
  for (const char *p = run;; p++) {
    unsigned char c = (unsigned char)*p;
    const char *rep = c == '<'                                    ? "&lt;"
                      : c == '>'                                  ? "&gt;"
                      : c == '&'                                  ? "&amp;"
                      : c == '"'                                  ? "&quot;"
                      : c == '\''                                 ? "&#39;"
                      : (c && c < 0x20 && c != '\n' && c != '\t') ? " "
                                                                  : NULL;
    if (!rep && c)
      continue;
    if (p > run)
      rk_text_printf(o, "%.*s", (int)(p - run), run);
    if (!c)
      break;
    rk_text_printf(o, "%s", rep);
    run = p + 1;
  }
}

/* A short label for an axis value: 3 significant digits, no exponent for
 * everyday magnitudes. */
static void num_label(double v, char *b, size_t n) {
  double a = fabs(v);
  if (a != 0 && (a >= 1e6 || a < 1e-3))
    snprintf(b, n, "%.2e", v);
  else if (a >= 100 || v == floor(v))
    snprintf(b, n, "%.0f", v);
  else
    snprintf(b, n, "%.3g", v);
}

static void open_svg(rk_text *o, const char *title, int w, int h) {
  rk_text_printf(
      o,
      "<figure class=\"chart\"><svg "
      "viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\">"
      "<title>",
      w, h, w, h);
  svg_escape(o, title);
  rk_text_printf(o,
                 "</title><text x=\"%d\" y=\"16\" class=\"ct\" "
                 "text-anchor=\"middle\">",
                 w / 2);
  svg_escape(o, title);
  rk_text_printf(o, "</text>");
}

static void close_svg(rk_text *o) {
  rk_text_printf(o, "</svg></figure>\n");
}

static bool finite_range(const double *v, size_t n, double *lo, double *hi) {
  bool any = false;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(v[i]))
      continue;
    if (!any || v[i] < *lo)
      *lo = v[i];
    if (!any || v[i] > *hi)
      *hi = v[i];
    any = true;
  }
  return any;
}

/* ------------------------------------------------------------------ bars */

bool svg_bars(rk_text *o, const char *title, const char *const *labels,
              const double *values, size_t n, const char *unit) {
  double lo = 0, hi = 0;
  if (!n || !finite_range(values, n, &lo, &hi) || hi <= 0)
    return false;
  const int W = 640, left = 230, right = 70, bh = 18, gap = 6, top = 28;
  int H = top + (int)n * (bh + gap) + 10;
  open_svg(o, title, W, H);
  double scale = (W - left - right) / hi;
  for (size_t i = 0; i < n; i++) {
    double v = isfinite(values[i]) && values[i] > 0 ? values[i] : 0;
    int y = top + (int)i * (bh + gap);
    rk_text_printf(o,
                   "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" "
                   "class=\"cl\">",
                   left - 6, y + bh - 5);
    char shortl[48];
    snprintf(shortl, sizeof shortl, "%s", labels[i] ? labels[i] : "");
    if (strlen(labels[i] ? labels[i] : "") > 34)
      memcpy(shortl + 31, "...", 4);
    svg_escape(o, shortl);
    rk_text_printf(o, "</text>");
    double w = v * scale < 1 && v > 0 ? 1 : v * scale;
    rk_text_printf(o,
                   "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
                   "fill=\"%s\"><title>",
                   left, y, w, bh, svg_color(i));
    svg_escape(o, labels[i]);
    char num[32];
    num_label(values[i], num, sizeof num);
    rk_text_printf(o, ": %s%s</title></rect>", num, unit);
    rk_text_printf(o, "<text x=\"%.1f\" y=\"%d\" class=\"cl\">%s%s</text>",
                   left + w + 4, y + bh - 5, num, unit);
  }
  close_svg(o);
  return true;
}

/* ------------------------------------------------------------ histogram */

/* A round tick step, near a quarter of the span: 1, 2, 2.5 or 5 times a
 * power of ten (0 for an empty span), so that ticks read 0/25/50/75, not
 * 24.2/48.5/72.8. */
static double tick_step(double lo, double hi) {
  double span = hi - lo;
  if (!(span > 0) || !isfinite(span))
    return 0;
  double raw = span / 4, p = pow(10, floor(log10(raw)));
  double m = raw / p;
  return p * (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10);
}

/* The ticks of [lo, hi] at multiples of tick_step (at most 12): their
 * values and their positions along the axis (0 at lo, 1 at hi). */
static size_t ticks(double lo, double hi, double *val, double *pos) {
  double step = tick_step(lo, hi);
  if (step == 0) {
    val[0] = lo;
    pos[0] = 0;
    return 1;
  }
  size_t n = 0;
  for (double k = ceil(lo / step - 1e-9);
       n < 12 && k * step <= hi + step * 1e-9; k++) {
    val[n] = k * step == 0 ? 0 : k * step; /* no "-0" */
    pos[n] = (val[n] - lo) / (hi - lo);
    n++;
  }
  return n;
}

static void x_axis(rk_text *o, int x0, int x1, int y, double lo, double hi,
                   const char *label) {
  rk_text_printf(o,
                 "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
                 "class=\"ax\"/>",
                 x0, y, x1, y);
  double val[12], pos[12];
  size_t nt = ticks(lo, hi, val, pos);
  for (size_t t = 0; t < nt; t++) {
    double x = x0 + (x1 - x0) * pos[t];
    char b[32];
    num_label(val[t], b, sizeof b);
    rk_text_printf(o,
                   "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" "
                   "class=\"cl\">%s</text>",
                   x, y + 14, b);
  }
  if (label) {
    rk_text_printf(o,
                   "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" "
                   "class=\"cl\">",
                   (x0 + x1) / 2, y + 30);
    svg_escape(o, label);
    rk_text_printf(o, "</text>");
  }
}

static void y_axis(rk_text *o, int x, int y0, int y1, double lo, double hi,
                   const char *label) {
  rk_text_printf(o,
                 "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
                 "class=\"ax\"/>",
                 x, y0, x, y1);
  double val[12], pos[12];
  size_t nt = ticks(lo, hi, val, pos);
  for (size_t t = 0; t < nt; t++) {
    double y = y0 - (y0 - y1) * pos[t];
    char b[32];
    num_label(val[t], b, sizeof b);
    rk_text_printf(o,
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" "
                   "class=\"cl\">%s</text>",
                   x - 4, y + 4, b);
  }
  if (label) {
    rk_text_printf(o,
                   "<text x=\"12\" y=\"%d\" text-anchor=\"middle\" "
                   "class=\"cl\" transform=\"rotate(-90 12 %d)\">",
                   (y0 + y1) / 2, (y0 + y1) / 2);
    svg_escape(o, label);
    rk_text_printf(o, "</text>");
  }
}

bool svg_histogram(rk_text *o, const char *title, const double *counts,
                   const double *edges, size_t nbins, const char *xlabel) {
  double cmax = 0, lo = 0, hi = 0, dummy = 0;
  if (!nbins || !finite_range(counts, nbins, &dummy, &cmax) || cmax <= 0 ||
      !finite_range(edges, nbins + 1, &lo, &hi))
    return false;
  if (hi <= lo)
    hi = lo + 1;
  const int W = 640, H = 260, L = 60, R = 20, T = 28, B = 40;
  open_svg(o, title, W, H);
  int x0 = L, x1 = W - R, y0 = H - B, y1 = T;
  for (size_t i = 0; i < nbins; i++) {
    if (!(counts[i] > 0))
      continue;
    double xa = x0 + (edges[i] - lo) / (hi - lo) * (x1 - x0);
    double xb = x0 + (edges[i + 1] - lo) / (hi - lo) * (x1 - x0);
    double h = counts[i] / cmax * (y0 - y1);
    double w = xb - xa < 1 ? 1 : xb - xa;
    rk_text_printf(o,
                   "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                   "height=\"%.1f\" fill=\"%s\"><title>%g-%g: %g</title>"
                   "</rect>",
                   xa, y0 - h, w, h < 1 ? 1 : h, svg_color(0), edges[i],
                   edges[i + 1], counts[i]);
  }
  x_axis(o, x0, x1, y0, lo, hi, xlabel);
  y_axis(o, x0, y0, y1, 0, cmax, "count");
  close_svg(o);
  return true;
}

/* ------------------------------------------------------------ box plots */

static bool box_range(const svg_box *b, size_t n, double *lo, double *hi) {
  bool any = false;
  for (size_t i = 0; i < n; i++) {
    double v[] = {b[i].lower, b[i].p25,      b[i].p50,      b[i].p75,
                  b[i].upper, b[i].marks[0], b[i].marks[1], b[i].marks[2]};
    double l = 0, h = 0;
    if (!finite_range(v, 8, &l, &h))
      continue;
    if (!any || l < *lo)
      *lo = l;
    if (!any || h > *hi)
      *hi = h;
    any = true;
  }
  return any;
}

static const char *const MARK_SHAPES[] = {"#c0392b", "#3a9e5c", "#000000"};

static void one_box(rk_text *o, const svg_box *b, double x, double bw,
                    double (*Y)(double, const double *), const double *ax) {
  double yl = Y(b->lower, ax), yu = Y(b->upper, ax);
  double y25 = Y(b->p25, ax), y75 = Y(b->p75, ax), y50 = Y(b->p50, ax);
  double cx = x + bw / 2;
  rk_text_printf(o,
                 "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                 "class=\"wh\"/>",
                 cx, yl, cx, yu);
  rk_text_printf(o,
                 "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                 "class=\"wh\"/><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                 "y2=\"%.1f\" class=\"wh\"/>",
                 x + bw / 4, yl, x + 3 * bw / 4, yl, x + bw / 4, yu,
                 x + 3 * bw / 4, yu);
  double h = y25 - y75;
  rk_text_printf(o,
                 "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                 "height=\"%.1f\" fill=\"%s\" fill-opacity=\"0.55\" "
                 "stroke=\"%s\"><title>",
                 x, y75, bw, h < 1 ? 1 : h, svg_color(0), svg_color(0));
  svg_escape(o, b->label);
  rk_text_printf(o,
                 ": lower %g, p25 %g, p50 %g, p75 %g, upper %g</title>"
                 "</rect>",
                 b->lower, b->p25, b->p50, b->p75, b->upper);
  rk_text_printf(o,
                 "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                 "class=\"med\"/>",
                 x, y50, x + bw, y50);
  for (int m = 0; m < 3; m++) {
    if (!b->mark_names[m] || !isfinite(b->marks[m]))
      continue;
    rk_text_printf(o,
                   "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" "
                   "fill=\"%s\"><title>%s %g</title></circle>",
                   cx + (m - 1) * 6.0, Y(b->marks[m], ax), MARK_SHAPES[m],
                   b->mark_names[m], b->marks[m]);
  }
}

/* ax = {y0, y1, lo, hi}: value -> pixel. */
static double box_y(double v, const double *ax) {
  if (!isfinite(v))
    v = ax[2];
  return ax[0] - (v - ax[2]) / (ax[3] - ax[2]) * (ax[0] - ax[1]);
}

bool svg_boxplots(rk_text *o, const char *title, const svg_box *boxes, size_t n,
                  const char *unit) {
  double lo = 0, hi = 0;
  if (!n || !box_range(boxes, n, &lo, &hi))
    return false;
  if (lo > 0)
    lo = 0;
  if (hi <= lo)
    hi = lo + 1;
  const int L = 60, R = 20, T = 28, B = 50, H = 280;
  int slot = n > 12 ? 40 : 60;
  int W = L + R + (int)n * slot;
  if (W < 360)
    W = 360;
  double ax[4] = {H - B, T, lo, hi};
  open_svg(o, title, W, H);
  y_axis(o, L, H - B, T, lo, hi, unit);
  double step = (double)(W - L - R) / (double)n;
  for (size_t i = 0; i < n; i++) {
    double x = L + step * (double)i + step * 0.2;
    one_box(o, &boxes[i], x, step * 0.6, box_y, ax);
    rk_text_printf(o,
                   "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" "
                   "class=\"cl\">",
                   x + step * 0.3, H - B + 14);
    svg_escape(o, boxes[i].label);
    rk_text_printf(o, "</text>");
  }
  /* legend of the markers of the first box */
  int lx = L;
  for (int m = 0; m < 3; m++) {
    if (!boxes[0].mark_names[m])
      continue;
    rk_text_printf(o,
                   "<circle cx=\"%d\" cy=\"%d\" r=\"3.5\" fill=\"%s\"/>"
                   "<text x=\"%d\" y=\"%d\" class=\"cl\">",
                   lx + 4, H - 12, MARK_SHAPES[m], lx + 10, H - 8);
    svg_escape(o, boxes[0].mark_names[m]);
    rk_text_printf(o, "</text>");
    lx += 110;
  }
  close_svg(o);
  return true;
}

/* ---------------------------------------------------------------- lines */

bool svg_lines(rk_text *o, const char *title, const double *x,
               const svg_series *s, size_t ns, const char *xlabel,
               const char *ylabel) {
  double ylo = 0, yhi = 0, xlo = 0, xhi = 0;
  bool any = false;
  size_t maxn = 0;
  for (size_t k = 0; k < ns; k++) {
    double l = 0, h = 0;
    if (s[k].n > maxn)
      maxn = s[k].n;
    if (!finite_range(s[k].y, s[k].n, &l, &h))
      continue;
    if (!any || l < ylo)
      ylo = l;
    if (!any || h > yhi)
      yhi = h;
    any = true;
  }
  if (!any || maxn < 2)
    return false;
  if (x)
    finite_range(x, maxn, &xlo, &xhi);
  else
    xhi = (double)(maxn - 1);
  if (xhi <= xlo)
    xhi = xlo + 1;
  if (yhi <= ylo)
    yhi = ylo + 1;
  const int W = 640, H = 260, L = 60, R = 20, T = 28, B = 40;
  open_svg(o, title, W, H);
  for (size_t k = 0; k < ns; k++) {
    rk_text_printf(o,
                   "<polyline fill=\"none\" stroke=\"%s\" "
                   "stroke-width=\"1.5\" points=\"",
                   svg_color(k));
    for (size_t i = 0; i < s[k].n; i++) {
      if (!isfinite(s[k].y[i]))
        continue;
      double xv = x ? x[i] : (double)i;
      rk_text_printf(o, "%.1f,%.1f ",
                     L + (xv - xlo) / (xhi - xlo) * (W - L - R),
                     (H - B) - (s[k].y[i] - ylo) / (yhi - ylo) * (H - B - T));
    }
    rk_text_printf(o, "\"><title>");
    svg_escape(o, s[k].name);
    rk_text_printf(o, "</title></polyline>");
  }
  x_axis(o, L, W - R, H - B, xlo, xhi, xlabel);
  y_axis(o, L, H - B, T, ylo, yhi, ylabel);
  close_svg(o);
  return true;
}

/* ------------------------------------------------------------------ pie */

bool svg_pie(rk_text *o, const char *title, const char *const *labels,
             const double *values, size_t n) {
  double total = 0;
  for (size_t i = 0; i < n; i++)
    if (isfinite(values[i]) && values[i] > 0)
      total += values[i];
  if (!(total > 0))
    return false;
  const int W = 520, R = 90, CX = 110, CY = 125;
  int H = 250 > 40 + (int)n * 20 ? 250 : 40 + (int)n * 20;
  open_svg(o, title, W, H);
  double a = -M_PI / 2;
  size_t shown = 0;
  for (size_t i = 0; i < n; i++) {
    if (!(isfinite(values[i]) && values[i] > 0))
      continue;
    double share = values[i] / total;
    if (share >= 0.999999) {
      rk_text_printf(o, "<circle cx=\"%d\" cy=\"%d\" r=\"%d\" fill=\"%s\">", CX,
                     CY, R, svg_color(i));
    } else {
      double b = a + share * 2 * M_PI;
      rk_text_printf(o,
                     "<path d=\"M%d,%d L%.1f,%.1f A%d,%d 0 %d 1 %.1f,%.1f "
                     "Z\" fill=\"%s\">",
                     CX, CY, CX + R * cos(a), CY + R * sin(a), R, R,
                     share > 0.5 ? 1 : 0, CX + R * cos(b), CY + R * sin(b),
                     svg_color(i));
      a = b;
    }
    rk_text_printf(o, "<title>");
    svg_escape(o, labels[i]);
    rk_text_printf(o, ": %.1f%%</title>%s", 100 * share,
                   share >= 0.999999 ? "</circle>" : "</path>");
    int ly = 40 + (int)shown++ * 20;
    rk_text_printf(o,
                   "<rect x=\"230\" y=\"%d\" width=\"12\" height=\"12\" "
                   "fill=\"%s\"/><text x=\"248\" y=\"%d\" class=\"cl\">",
                   ly - 10, svg_color(i), ly);
    svg_escape(o, labels[i]);
    rk_text_printf(o, " (%.1f%%)</text>", 100 * share);
  }
  close_svg(o);
  return true;
}
