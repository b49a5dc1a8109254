/* pr_json.c - the ordered JSON tree of ProfilerReport (see rpt_json.h). */
#include "rpt_json.h"

#include "fwkit.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p)
    abort(); /* out of memory: nothing sensible to continue with */
  return p;
}

static char *xstrdup(const char *s) {
  char *d = strdup(s ? s : "");
  if (!d)
    abort();
  return d;
}

pj *pj_new_obj(void) {
  pj *j = xcalloc(1, sizeof *j);
  j->t = PJ_OBJ;
  return j;
}

static void pj_free_value(pj *j) {
  for (size_t i = 0; i < j->n; i++)
    pj_free(j->kids[i]);
  free(j->kids);
  free(j->s);
  free(j->nums);
  free(j->ints);
  for (size_t i = 0; j->strs && i < j->len; i++)
    free(j->strs[i]);
  free(j->strs);
}

void pj_free(pj *j) {
  if (!j)
    return;
  pj_free_value(j);
  free(j->key);
  free(j);
}

void pj_clear(pj *j) {
  for (size_t i = 0; i < j->n; i++)
    pj_free(j->kids[i]);
  free(j->kids);
  j->kids = NULL;
  j->n = j->cap = 0;
}

static pj *add(pj *o, const char *key, pj_type t) {
  if (o->n == o->cap) {
    o->cap = o->cap ? 2 * o->cap : 8;
    pj **k = realloc(o->kids, o->cap * sizeof *k);
    if (!k)
      abort();
    o->kids = k;
  }
  pj *m = xcalloc(1, sizeof *m);
  m->t = t;
  m->key = xstrdup(key);
  o->kids[o->n++] = m;
  return m;
}

void pj_set_num(pj *o, const char *key, double v) {
  add(o, key, PJ_NUM)->num = v;
}
void pj_set_int(pj *o, const char *key, int64_t v) {
  add(o, key, PJ_INT)->i = v;
}
void pj_set_bool(pj *o, const char *key, bool v) {
  add(o, key, PJ_BOOL)->b = v;
}
void pj_set_str(pj *o, const char *key, const char *v) {
  add(o, key, PJ_STR)->s = xstrdup(v);
}
void pj_set_null(pj *o, const char *key) {
  add(o, key, PJ_NULL);
}
void pj_set_raw(pj *o, const char *key, const char *json) {
  add(o, key, PJ_RAW)->s = xstrdup(json && *json ? json : "null");
}

void pj_set_nums(pj *o, const char *key, const double *v, size_t n) {
  pj *m = add(o, key, PJ_NUMS);
  m->nums = xcalloc(n, sizeof *m->nums);
  if (n)
    memcpy(m->nums, v, n * sizeof *v);
  m->len = n;
}

void pj_set_ints(pj *o, const char *key, const int64_t *v, size_t n) {
  pj *m = add(o, key, PJ_INTS);
  m->ints = xcalloc(n, sizeof *m->ints);
  if (n)
    memcpy(m->ints, v, n * sizeof *v);
  m->len = n;
}

void pj_set_strs(pj *o, const char *key, const char *const *v, size_t n) {
  pj *m = add(o, key, PJ_STRS);
  m->strs = xcalloc(n, sizeof *m->strs);
  for (size_t i = 0; i < n; i++)
    m->strs[i] = xstrdup(v[i]);
  m->len = n;
}

pj *pj_set_obj(pj *o, const char *key) {
  return add(o, key, PJ_OBJ);
}

/* ------------------------------------------------------------- readers */

const pj *pj_get(const pj *o, const char *key) {
  if (!o || o->t != PJ_OBJ)
    return NULL;
  for (size_t i = o->n; i-- > 0;)
    if (strcmp(o->kids[i]->key, key) == 0)
      return o->kids[i];
  return NULL;
}

const pj *pj_path(const pj *o, ...) {
  va_list ap;
  va_start(ap, o);
  for (const char *k = va_arg(ap, const char *); k && o;
       k = va_arg(ap, const char *))
    o = pj_get(o, k);
  va_end(ap);
  return o;
}

bool pj_number(const pj *v, double *out) {
  if (!v)
    return false;
  switch (v->t) {
  case PJ_NUM:
    *out = v->num;
    return true;
  case PJ_INT:
    *out = (double)v->i;
    return true;
  case PJ_BOOL:
    *out = v->b;
    return true;
  case PJ_RAW: {
    if (strcmp(v->s, "true") == 0 || strcmp(v->s, "false") == 0) {
      *out = v->s[0] == 't';
      return true;
    }
    char *end;
    double d = strtod(v->s, &end);
    if (end == v->s || *end)
      return false;
    *out = d;
    return true;
  }
  default:
    return false;
  }
}

double pj_num_or(const pj *o, const char *key, double dflt) {
  double v;
  return pj_number(pj_get(o, key), &v) ? v : dflt;
}

size_t pj_array_len(const pj *v) {
  return v && (v->t == PJ_NUMS || v->t == PJ_INTS) ? v->len : 0;
}

double pj_array_at(const pj *v, size_t i) {
  if (!v || i >= v->len)
    return NAN;
  return v->t == PJ_NUMS ? v->nums[i] : (double)v->ints[i];
}

bool pj_is_obj(const pj *v) {
  return v && v->t == PJ_OBJ;
}

/* ------------------------------------------------------------- writing */

/* Python's repr of a float: the shortest digits that round-trip, in
 * fixed notation for decimal exponents -4..15 (with ".0" when integral),
 * else d.ddde+XX. */
void pj_fmt_double(double v, char *buf, size_t n) {
  if (!isfinite(v)) {
    snprintf(buf, n, "%s", isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
    return;
  }
  char e[40];
  int prec = 0;
  for (; prec < 17; prec++) {
    snprintf(e, sizeof e, "%.*e", prec, v);
    if (strtod(e, NULL) == v)
      break;
  }
  int exp10 = atoi(strchr(e, 'e') + 1);
  if (exp10 < -4 || exp10 >= 16) {
    snprintf(buf, n, "%s", e);
    return;
  }
  int decimals = prec - exp10 > 0 ? prec - exp10 : 0;
  snprintf(buf, n, "%.*f", decimals, v);
  if (!strchr(buf, '.') && strlen(buf) + 2 < n)
    strcat(buf, ".0");
}

void pj_render_string(const char *s, rk_text *out) {
  rk_text_printf(out, "\"");
  const char *run = s;
  for (const char *p = s;; p++) {
    unsigned char c = (unsigned char)*p;
    if (c && c >= 0x20 && c != '"' && c != '\\')
      continue;
    if (p > run)
      rk_text_printf(out, "%.*s", (int)(p - run), run);
    if (!c)
      break;
    if (c == '"' || c == '\\')
      rk_text_printf(out, "\\%c", c);
    else
      rk_text_printf(out, "\\u%04x", c);
    run = p + 1;
  }
  rk_text_printf(out, "\"");
}

static void render_num(double v, rk_text *out) {
  char b[40];
  if (!isfinite(v)) {
    rk_text_printf(out, "null");
    return;
  }
  pj_fmt_double(v, b, sizeof b);
  rk_text_printf(out, "%s", b);
}

static void render_array(const pj *j, rk_text *out) {
  rk_text_printf(out, "[");
  for (size_t i = 0; i < j->len; i++) {
    if (i)
      rk_text_printf(out, ", ");
    if (j->t == PJ_NUMS)
      render_num(j->nums[i], out);
    else if (j->t == PJ_INTS)
      rk_text_printf(out, "%lld", (long long)j->ints[i]);
    else
      pj_render_string(j->strs[i], out);
  }
  rk_text_printf(out, "]");
}

void pj_render(const pj *j, rk_text *out) {
  switch (j->t) {
  case PJ_NULL:
    rk_text_printf(out, "null");
    break;
  case PJ_BOOL:
    rk_text_printf(out, j->b ? "true" : "false");
    break;
  case PJ_NUM:
    render_num(j->num, out);
    break;
  case PJ_INT:
    rk_text_printf(out, "%lld", (long long)j->i);
    break;
  case PJ_STR:
    pj_render_string(j->s, out);
    break;
  case PJ_RAW:
    rk_text_printf(out, "%s", j->s);
    break;
  case PJ_OBJ:
    rk_text_printf(out, "{");
    for (size_t i = 0; i < j->n; i++) {
      if (i)
        rk_text_printf(out, ", ");
      pj_render_string(j->kids[i]->key, out);
      rk_text_printf(out, ": ");
      pj_render(j->kids[i], out);
    }
    rk_text_printf(out, "}");
    break;
  default:
    render_array(j, out);
  }
}

/* ------------------------------------------------------------- parsing
 * Enough JSON for the reports the engines render (pk_obj_render): objects,
 * arrays, strings with escapes, numbers, true/false/null.  Arrays of
 * numbers become NUMS (INTS when every item is an integer), arrays of
 * strings STRS, anything else in an array is kept as RAW text. */
typedef struct pj_in {
  const char *p;
  bool bad;
  int depth;
  const char *text_key; /* a root member kept as text (pj_parse_keep) */
} pj_in;

static void ws(pj_in *in) {
  while (*in->p == ' ' || *in->p == '\n' || *in->p == '\r' || *in->p == '\t')
    in->p++;
}

static void put_utf8(rk_text *t, unsigned c) {
  if (c < 0x80)
    rk_text_printf(t, "%c", (char)c);
  else if (c < 0x800)
    rk_text_printf(t, "%c%c", (char)(0xC0 | c >> 6), (char)(0x80 | (c & 63)));
  else
    rk_text_printf(t, "%c%c%c", (char)(0xE0 | c >> 12),
                   (char)(0x80 | ((c >> 6) & 63)), (char)(0x80 | (c & 63)));
}

static char *parse_string(pj_in *in) {
  if (*in->p != '"') {
    in->bad = true;
    return NULL;
  }
  in->p++;
  rk_text t = {0};
  rk_text_printf(&t, "%s", "");
  while (*in->p && *in->p != '"') {
    const char *run = in->p;
    while (*in->p && *in->p != '"' && *in->p != '\\')
      in->p++;
    if (in->p > run)
      rk_text_printf(&t, "%.*s", (int)(in->p - run), run);
    if (*in->p != '\\')
      continue;
    char e = in->p[1];
    in->p += 2;
    if (e == 'u') {
      unsigned c = 0;
      for (int i = 0; i < 4 && in->p[i]; i++) {
        char h = in->p[i];
        c = c * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 32) - 'a' + 10);
      }
      in->p += strnlen(in->p, 4);
      put_utf8(&t, c);
    } else {
      const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
      const char *f = e ? strchr(from, e) : NULL;
      if (!f) {
        in->bad = true;
        break;
      }
      rk_text_printf(&t, "%c", to[f - from]);
    }
  }
  if (*in->p != '"')
    in->bad = true;
  else
    in->p++;
  return rk_text_take(&t);
}

static void parse_value(pj_in *in, pj *parent, const char *key);

static void parse_object(pj_in *in, pj *o) {
  in->p++;
  ws(in);
  if (*in->p == '}') {
    in->p++;
    return;
  }
  while (!in->bad) {
    ws(in);
    char *k = parse_string(in);
    ws(in);
    if (in->bad || *in->p != ':') {
      free(k);
      in->bad = true;
      return;
    }
    in->p++;
    parse_value(in, o, k);
    free(k);
    ws(in);
    if (*in->p == ',') {
      in->p++;
      continue;
    }
    if (*in->p == '}')
      in->p++;
    else
      in->bad = true;
    return;
  }
}

/* A number token; *is_int when it has no fraction or exponent. */
static double parse_number(pj_in *in, bool *is_int) {
  char *end;
  double d = strtod(in->p, &end);
  if (end == in->p) {
    in->bad = true;
    return 0;
  }
  *is_int = !memchr(in->p, '.', (size_t)(end - in->p)) &&
            !memchr(in->p, 'e', (size_t)(end - in->p)) &&
            !memchr(in->p, 'E', (size_t)(end - in->p)) && fabs(d) < 9.2e18;
  in->p = end;
  return d;
}

/* Skip one value (array items kept as RAW text). */
static void skip_value(pj_in *in) {
  pj *tmp = pj_new_obj();
  parse_value(in, tmp, "x");
  pj_free(tmp);
}

static void array_item(pj_in *in, fk_dv *nums, bool *all_int, char ***strs,
                       size_t *nstr) {
  if (*in->p == '"') {
    *strs = fk_xrealloc(*strs, *nstr + 1, sizeof **strs);
    (*strs)[(*nstr)++] = parse_string(in);
  } else if (*in->p == '-' || (*in->p >= '0' && *in->p <= '9')) {
    bool is_int;
    fk_dv_push(nums, parse_number(in, &is_int));
    *all_int &= is_int;
  } else {
    skip_value(in);
  }
}

static void parse_array(pj_in *in, pj *parent, const char *key) {
  const char *start = in->p;
  in->p++;
  fk_dv nums = {0};
  bool all_int = true;
  size_t n = 0, nstr = 0;
  char **strs = NULL;
  ws(in);
  while (*in->p && *in->p != ']' && !in->bad) {
    ws(in);
    n++;
    array_item(in, &nums, &all_int, &strs, &nstr);
    ws(in);
    if (*in->p == ',')
      in->p++;
    else if (*in->p != ']')
      in->bad = true;
  }
  if (*in->p == ']')
    in->p++;
  else
    in->bad = true;
  if (in->bad) {
  } else if (nums.n == n) {
    if (all_int) {
      int64_t *iv = fk_xrealloc(NULL, n, sizeof *iv);
      for (size_t i = 0; i < n; i++)
        iv[i] = (int64_t)nums.v[i];
      pj_set_ints(parent, key, iv, n);
      free(iv);
    } else
      pj_set_nums(parent, key, nums.v, n);
  } else if (nstr == n) {
    pj_set_strs(parent, key, (const char *const *)strs, n);
  } else {
    char *raw = strndup(start, (size_t)(in->p - start));
    pj_set_raw(parent, key, raw);
    free(raw);
  }
  for (size_t i = 0; i < nstr; i++)
    free(strs[i]);
  free(strs);
  fk_dv_free(&nums);
}

/* The text pj_render gives for the compact JSON object at p (as
 * pk_obj_render writes it: no whitespace) when it holds only objects,
 * strings without escapes or control characters, and integers without
 * leading zeros -- values that parse and render back unchanged, so only
 * ", " and ": " differ.  NULL for anything else; *end: just after it. */
static char *respace(const char *p, const char **end) {
  rk_text t = {0};
  rk_text_printf(&t, "%s", "");
  int depth = 0;
  do {
    const char *q = p + 1;
    if (*p == '{' || *p == '}') {
      depth += *p == '{' ? 1 : -1;
    } else if (*p == ':' || *p == ',') {
      rk_text_printf(&t, "%c ", *p);
      p++;
      continue;
    } else if (*p == '"') {
      while (*q && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
        q++;
      if (*q++ != '"')
        break;
    } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
      const char *d = p + (*p == '-');
      for (q = d; *q >= '0' && *q <= '9'; q++)
        ;
      if (q == d || q - d > 18 || (*d == '0' && q - d > 1))
        break;
    } else {
      break;
    }
    rk_text_printf(&t, "%.*s", (int)(q - p), p);
    p = q;
  } while (depth > 0);
  if (depth > 0) {
    free(rk_text_take(&t));
    return NULL;
  }
  *end = p;
  return rk_text_take(&t);
}

static void parse_value(pj_in *in, pj *parent, const char *key) {
  ws(in);
  if (++in->depth > 64) {
    in->bad = true;
    return;
  }
  char c = *in->p;
  char *text;
  if (c == '{' && in->depth == 2 && in->text_key &&
      strcmp(key, in->text_key) == 0 && (text = respace(in->p, &in->p))) {
    pj_set_raw(parent, key, text);
    free(text);
  } else if (c == '{')
    parse_object(in, pj_set_obj(parent, key));
  else if (c == '[')
    parse_array(in, parent, key);
  else if (c == '"') {
    char *s = parse_string(in);
    pj_set_str(parent, key, s ? s : "");
    free(s);
  } else if (strncmp(in->p, "true", 4) == 0 ||
             strncmp(in->p, "false", 5) == 0) {
    pj_set_bool(parent, key, c == 't');
    in->p += c == 't' ? 4 : 5;
  } else if (strncmp(in->p, "null", 4) == 0) {
    pj_set_null(parent, key);
    in->p += 4;
  } else {
    bool is_int;
    double d = parse_number(in, &is_int);
    if (is_int)
      pj_set_int(parent, key, (int64_t)d);
    else
      pj_set_num(parent, key, d);
  }
  in->depth--;
}

pj *pj_parse(const char *text) {
  return pj_parse_keep(text, NULL);
}

pj *pj_parse_keep(const char *text, const char *key) {
  pj_in in = {text, false, 0, key};
  pj *holder = pj_new_obj();
  parse_value(&in, holder, "root");
  ws(&in);
  if (in.bad || *in.p || holder->n != 1 || holder->kids[0]->t != PJ_OBJ) {
    pj_free(holder);
    return NULL;
  }
  pj *root = holder->kids[0];
  holder->n = 0;
  pj_free(holder);
  free(root->key);
  root->key = NULL;
  return root;
}
