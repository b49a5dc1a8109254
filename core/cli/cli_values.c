/* cli_values.c - `tensor --values`: an array printed as NumPy prints it
 * (cli_values.h).  --json prints every element exactly instead. */
#include "cli/cli_values.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format/index.h"

/* ---- --values as NumPy prints an array: nested brackets, elements
 * right-aligned to one width, 8 significant digits, lines wrapped at 75
 * columns, and above 1,000 elements each axis summarised to its first
 * and last 3 entries around "..." (--json prints every element, exactly). */
#define SUMMARY_THRESHOLD 1000
#define EDGE_ITEMS 3
#define LINE_WIDTH 75

/* Trailing zeros of the digits after the point go ("0.50000000" ->
 * "0.5", "1.00000000" -> "1."), as NumPy prints. */
static void trim_zeros(char *buf) {
  char *dot = strchr(buf, '.');
  if (!dot)
    return;
  char *e = strchr(buf, 'e');
  char *end = e ? e : buf + strlen(buf);
  char *z = end;
  while (z > dot + 1 && z[-1] == '0')
    z--;
  memmove(z, end, strlen(end) + 1);
}

/* A float as NumPy prints one: positional with up to 8 digits after the
 * point, or (sci) scientific with up to 8; nan and inf by name. */
void smr_cli_float_text(double d, bool sci, char *buf, size_t n) {
  if (isnan(d)) {
    snprintf(buf, n, "nan");
    return;
  }
  if (isinf(d)) {
    snprintf(buf, n, "%sinf", d < 0 ? "-" : "");
    return;
  }
  snprintf(buf, n, sci ? "%.8e" : "%.8f", d);
  trim_zeros(buf);
}

static void elem_text(const smr_tensor *t, int64_t i, bool sci, char *buf,
                      size_t n) {
  const uint8_t *p = t->data + (size_t)i * smr_dtype_size(t->dtype);
  switch (t->dtype) {
  case SMR_DT_STRING:
    snprintf(buf, n, "'%.*s'",
             (int)(t->string_lens[i] < 40 ? t->string_lens[i] : 40),
             (const char *)t->strings[i]);
    return;
  case SMR_DT_BOOL:
    snprintf(buf, n, "%s", p[0] ? "True" : "False");
    return;
  case SMR_DT_INT64:
    snprintf(buf, n, "%" PRId64, (int64_t)smr_le64(p));
    return;
  case SMR_DT_UINT64:
    snprintf(buf, n, "%" PRIu64, smr_le64(p));
    return;
  case SMR_DT_COMPLEX64:
  case SMR_DT_COMPLEX128: {
    double re, im;
    if (t->dtype == SMR_DT_COMPLEX64) {
      float f[2];
      memcpy(f, p, sizeof f);
      re = f[0];
      im = f[1];
    } else {
      memcpy(&re, p, sizeof re);
      memcpy(&im, p + sizeof re, sizeof im);
    }
    char r[48], m[48];
    smr_cli_float_text(re, sci, r, sizeof r);
    smr_cli_float_text(im, sci, m, sizeof m);
    snprintf(buf, n, "%s%s%sj", r, m[0] == '-' ? "" : "+", m);
    return;
  }
  case SMR_DT_FLOAT:
  case SMR_DT_DOUBLE:
  case SMR_DT_HALF:
  case SMR_DT_BFLOAT16:
    smr_cli_float_text(smr_tensor_get(t, i), sci, buf, n);
    return;
  default:
    snprintf(buf, n, "%" PRId64, (int64_t)smr_tensor_get(t, i));
    return;
  }
}

typedef struct printer {
  const smr_tensor *t;
  bool summary;
  bool sci;   /* scientific notation for every float element */
  bool range; /* first pass: the magnitudes of the elements shown */
  double max_abs, min_abs; /* finite; min_abs of the nonzero ones */
  bool measure;            /* first pass: only the widest element */
  int width, col;
  int64_t stride[SMR_MAX_DIMS];
} printer;

static void out(printer *p, const char *s) {
  if (!p->measure) {
    fputs(s, stdout);
    const char *nl = strrchr(s, '\n');
    p->col = nl ? (int)strlen(nl + 1) : p->col + (int)strlen(s);
  }
}

static void element(printer *p, int64_t i, int dim, bool first) {
  if (p->range) {
    double d = fabs(smr_tensor_get(p->t, i));
    if (isfinite(d) && d > p->max_abs)
      p->max_abs = d;
    if (isfinite(d) && d > 0 && (p->min_abs == 0 || d < p->min_abs))
      p->min_abs = d;
    return;
  }
  char buf[112];
  elem_text(p->t, i, p->sci, buf, sizeof buf);
  int len = (int)strlen(buf);
  if (p->measure) {
    p->width = len > p->width ? len : p->width;
    return;
  }
  if (!first && p->col + 1 + p->width + dim > LINE_WIDTH) { /* wrap */
    printf("\n%*s", dim + 1, "");
    p->col = dim + 1;
  } else if (!first) {
    out(p, " ");
  }
  printf("%*s", p->width, buf);
  p->col += p->width;
}

/* Between the entries of axis dim: a space in the last axis, else
 * newlines (one more per inner axis) and the indentation. */
static void separator(printer *p, int dim) {
  if (dim == p->t->ndim - 1)
    return; /* element() places its own space or wrap */
  char buf[80];
  int nl = p->t->ndim - dim - 1;
  snprintf(buf, sizeof buf, "%.*s%*s", nl > 8 ? 8 : nl, "\n\n\n\n\n\n\n\n",
           dim + 1, "");
  out(p, buf);
}

static void axis(printer *p, int dim, int64_t offset) {
  int64_t n = p->t->shape[dim];
  bool cut = p->summary && n > 2 * EDGE_ITEMS;
  bool last = dim == p->t->ndim - 1;
  out(p, "[");
  for (int64_t k = 0; k < n; k++) {
    if (cut && k == EDGE_ITEMS) {
      if (!last)
        separator(p, dim);
      out(p, last ? " ..." : "...");
      k = n - EDGE_ITEMS;
    }
    if (k > 0 && !last)
      separator(p, dim);
    int64_t at = offset + k * p->stride[dim];
    if (last)
      element(p, at, dim, k == 0);
    else
      axis(p, dim + 1, at);
  }
  out(p, "]");
}

void smr_cli_print_values(const smr_tensor *t, bool all) {
  printer p = {.t = t, .summary = !all && t->count > SUMMARY_THRESHOLD};
  if (t->ndim == 0) {
    char buf[112];
    double d = fabs(smr_tensor_get(t, 0));
    elem_text(t, 0, d >= 1e8 || (d > 0 && d < 1e-4), buf, sizeof buf);
    fputs(buf, stdout);
    return;
  }
  for (int d = t->ndim - 1; d >= 0; d--)
    p.stride[d] = d == t->ndim - 1 ? 1 : p.stride[d + 1] * t->shape[d + 1];
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] == 0) {
      fputs("[]", stdout);
      return;
    }
  /* NumPy's choice: scientific when the largest magnitude reaches 1e8, the
   * smallest nonzero one is below 1e-4, or they are 1e3 apart or more */
  bool floats = t->dtype == SMR_DT_FLOAT || t->dtype == SMR_DT_DOUBLE ||
                t->dtype == SMR_DT_HALF || t->dtype == SMR_DT_BFLOAT16 ||
                t->dtype == SMR_DT_COMPLEX64 || t->dtype == SMR_DT_COMPLEX128;
  p.measure = true;
  if (floats && t->dtype != SMR_DT_COMPLEX64 && t->dtype != SMR_DT_COMPLEX128) {
    p.range = true;
    axis(&p, 0, 0);
    p.range = false;
    p.sci = p.max_abs >= 1e8 || (p.min_abs > 0 && p.min_abs < 1e-4) ||
            (p.min_abs > 0 && p.max_abs / p.min_abs >= 1e3);
  }
  axis(&p, 0, 0);
  p.measure = false;
  axis(&p, 0, 0);
}
