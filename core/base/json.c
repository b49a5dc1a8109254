/* json.c - the JSON value model (see json.h): values, lookups, the
 * writer and the parser.  C library only: the plugin kits compile it. */
#include "smrules/json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"

struct smr_json {
  smr_json_type type;
  bool b;
  char *key; /* member name inside an object, else NULL */
  int64_t i;
  double d;
  char *s;         /* STR, RAW */
  smr_json **kids; /* ARR items, OBJ members */
  size_t n, cap;
  /* An array built from smr_json_add_nums/ints (or parsed as all doubles
   * or all integers) holds its numbers packed, without a node each: a
   * report's series can be long. */
  double *nums;
  int64_t *ints;
  /* An object's members by key (member index + 1, 0: empty slot), built
   * on the first lookup once it has INDEX_FROM members, so that building
   * a large object member by member with smr_json_set stays linear. */
  uint32_t *index;
  size_t index_cap; /* a power of two, at least twice the members */
};

#define INDEX_FROM 16

/* ------------------------------------------------------------- memory */

static void *xrealloc(void *p, size_t n, size_t size) {
  if (size && n > SIZE_MAX / size)
    abort();
  size_t bytes = n * size;
  void *q = realloc(p, bytes ? bytes : 1);
  if (!q)
    abort(); /* json.h: allocation failure aborts */
  return q;
}

static char *xstrndup(const char *s, size_t n) {
  char *d = xrealloc(NULL, n + 1, 1);
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

static smr_json *node(smr_json_type t) {
  smr_json *v = xrealloc(NULL, 1, sizeof *v);
  memset(v, 0, sizeof *v);
  v->type = t;
  return v;
}

static void drop_index(smr_json *o) {
  free(o->index);
  o->index = NULL;
  o->index_cap = 0;
}

void smr_json_clear(smr_json *v) {
  if (!v)
    return;
  drop_index(v);
  for (size_t i = 0; i < v->n && v->kids; i++)
    smr_json_free(v->kids[i]);
  free(v->kids);
  free(v->nums);
  free(v->ints);
  v->kids = NULL;
  v->nums = NULL;
  v->ints = NULL;
  v->n = v->cap = 0;
}

void smr_json_free(smr_json *v) {
  if (!v)
    return;
  smr_json_clear(v);
  free(v->s);
  free(v->key);
  free(v);
}

smr_json *smr_json_obj_new(void) {
  return node(SMR_JSON_OBJ);
}
smr_json *smr_json_arr_new(void) {
  return node(SMR_JSON_ARR);
}

/* ------------------------------------------------------------ scalars */

smr_json *smr_json_null(void) {
  return node(SMR_JSON_NULL);
}
smr_json *smr_json_bool(bool b) {
  smr_json *v = node(SMR_JSON_BOOL);
  v->b = b;
  return v;
}
smr_json *smr_json_int(int64_t i) {
  smr_json *v = node(SMR_JSON_INT);
  v->i = i;
  return v;
}
smr_json *smr_json_num(double d) {
  smr_json *v = node(SMR_JSON_NUM);
  v->d = d;
  return v;
}
smr_json *smr_json_str(const char *s) {
  if (!s)
    return smr_json_null();
  smr_json *v = node(SMR_JSON_STR);
  v->s = xstrndup(s, strlen(s));
  return v;
}
smr_json *smr_json_raw(const char *json) {
  if (!json || !*json)
    return smr_json_null();
  smr_json *v = node(SMR_JSON_RAW);
  v->s = xstrndup(json, strlen(json));
  return v;
}

/* ---------------------------------------------------- arrays, objects */

static uint64_t hash_key(const char *k) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *k; k++)
    h = (h ^ (unsigned char)*k) * 1099511628211ull;
  return h;
}

/* Member i becomes what its key finds (the last of a key wins). */
static void index_put(smr_json *o, size_t i) {
  size_t mask = o->index_cap - 1;
  for (size_t at = hash_key(o->kids[i]->key) & mask;; at = (at + 1) & mask) {
    uint32_t slot = o->index[at];
    if (!slot || strcmp(o->kids[slot - 1]->key, o->kids[i]->key) == 0) {
      o->index[at] = (uint32_t)(i + 1);
      return;
    }
  }
}

static void index_build(smr_json *o) {
  size_t cap = 64;
  while (cap < 2 * o->n + 2)
    cap *= 2;
  free(o->index);
  o->index = xrealloc(NULL, cap, sizeof *o->index);
  memset(o->index, 0, cap * sizeof *o->index);
  o->index_cap = cap;
  for (size_t i = 0; i < o->n; i++)
    index_put(o, i);
}

static void append(smr_json *c, smr_json *v) {
  if (c->n == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 8;
    c->kids = xrealloc(c->kids, c->cap, sizeof *c->kids);
  }
  c->kids[c->n++] = v;
  if (c->index && c->n > UINT32_MAX - 1)
    drop_index(c); /* more members than the index counts: linear */
  else if (c->index && 2 * c->n + 2 > c->index_cap)
    index_build(c);
  else if (c->index)
    index_put(c, c->n - 1);
}

void smr_json_push(smr_json *a, smr_json *v) {
  append(a, v);
}

void smr_json_add(smr_json *o, const char *key, smr_json *v) {
  free(v->key);
  v->key = xstrndup(key ? key : "", key ? strlen(key) : 0);
  append(o, v); /* the key is set first: the index reads it */
}

/* The index is a cache of the object's own members, built here even for
 * a const object (so one object is not for concurrent readers). */
static ptrdiff_t find(const smr_json *o, const char *key) {
  if (!o || o->type != SMR_JSON_OBJ)
    return -1;
  if (!o->index && o->n >= INDEX_FROM && o->n < UINT32_MAX)
    index_build((smr_json *)(uintptr_t)o);
  if (!o->index) {
    for (size_t i = o->n; i-- > 0;)
      if (strcmp(o->kids[i]->key, key) == 0)
        return (ptrdiff_t)i;
    return -1;
  }
  size_t mask = o->index_cap - 1;
  for (size_t at = hash_key(key) & mask;; at = (at + 1) & mask) {
    uint32_t slot = o->index[at];
    if (!slot)
      return -1;
    if (strcmp(o->kids[slot - 1]->key, key) == 0)
      return (ptrdiff_t)slot - 1;
  }
}

void smr_json_set(smr_json *o, const char *key, smr_json *v) {
  ptrdiff_t at = find(o, key ? key : "");
  if (at < 0) {
    smr_json_add(o, key, v);
    return;
  }
  v->key = o->kids[at]->key;
  o->kids[at]->key = NULL;
  smr_json_free(o->kids[at]);
  o->kids[at] = v;
}

smr_json *smr_json_obj_at(smr_json *o, const char *key) {
  ptrdiff_t at = find(o, key);
  if (at >= 0 && o->kids[at]->type == SMR_JSON_OBJ)
    return o->kids[at];
  smr_json *v = smr_json_obj_new();
  smr_json_set(o, key, v);
  return v;
}

smr_json *smr_json_take(smr_json *o, const char *key) {
  ptrdiff_t at = find(o, key);
  if (at < 0)
    return NULL;
  smr_json *v = o->kids[at];
  memmove(o->kids + at, o->kids + at + 1,
          (o->n - (size_t)at - 1) * sizeof *o->kids);
  o->n--;
  drop_index(o); /* positions moved: rebuilt on the next lookup */
  free(v->key);
  v->key = NULL;
  return v;
}

bool smr_json_del(smr_json *o, const char *key) {
  bool found = false;
  for (ptrdiff_t at; (at = find(o, key)) >= 0; found = true) {
    smr_json_free(o->kids[at]);
    memmove(o->kids + at, o->kids + at + 1,
            (o->n - (size_t)at - 1) * sizeof *o->kids);
    o->n--;
    drop_index(o); /* positions moved: rebuilt on the next lookup */
  }
  return found;
}

void smr_json_add_null(smr_json *o, const char *key) {
  smr_json_add(o, key, smr_json_null());
}
void smr_json_add_bool(smr_json *o, const char *key, bool v) {
  smr_json_add(o, key, smr_json_bool(v));
}
void smr_json_add_int(smr_json *o, const char *key, int64_t v) {
  smr_json_add(o, key, smr_json_int(v));
}
void smr_json_add_num(smr_json *o, const char *key, double v) {
  smr_json_add(o, key, smr_json_num(v));
}
void smr_json_add_str(smr_json *o, const char *key, const char *v) {
  smr_json_add(o, key, smr_json_str(v));
}
void smr_json_add_raw(smr_json *o, const char *key, const char *json) {
  smr_json_add(o, key, smr_json_raw(json));
}

smr_json *smr_json_nums(const double *v, size_t n) {
  smr_json *a = smr_json_arr_new();
  a->nums = xrealloc(NULL, n, sizeof *a->nums);
  if (n)
    memcpy(a->nums, v, n * sizeof *v);
  a->n = n;
  return a;
}

smr_json *smr_json_ints(const int64_t *v, size_t n) {
  smr_json *a = smr_json_arr_new();
  a->ints = xrealloc(NULL, n, sizeof *a->ints);
  if (n)
    memcpy(a->ints, v, n * sizeof *v);
  a->n = n;
  return a;
}

void smr_json_add_nums(smr_json *o, const char *key, const double *v,
                       size_t n) {
  smr_json_add(o, key, smr_json_nums(v, n));
}

void smr_json_add_ints(smr_json *o, const char *key, const int64_t *v,
                       size_t n) {
  smr_json_add(o, key, smr_json_ints(v, n));
}

void smr_json_add_strs(smr_json *o, const char *key, const char *const *v,
                       size_t n) {
  smr_json *a = smr_json_arr_new();
  for (size_t i = 0; i < n; i++)
    append(a, smr_json_str(v[i]));
  smr_json_add(o, key, a);
}

smr_json *smr_json_add_obj(smr_json *o, const char *key) {
  smr_json *v = smr_json_obj_new();
  smr_json_add(o, key, v);
  return v;
}

smr_json *smr_json_add_arr(smr_json *o, const char *key) {
  smr_json *v = smr_json_arr_new();
  smr_json_add(o, key, v);
  return v;
}

/* ------------------------------------------------------------ reading */

smr_json_type smr_json_type_of(const smr_json *v) {
  return v ? v->type : SMR_JSON_NULL;
}

const smr_json *smr_json_get(const smr_json *o, const char *key) {
  ptrdiff_t at = find(o, key);
  return at < 0 ? NULL : o->kids[at];
}

const smr_json *smr_json_path(const smr_json *o, ...) {
  va_list ap;
  va_start(ap, o);
  for (const char *k = va_arg(ap, const char *); k && o;
       k = va_arg(ap, const char *))
    o = smr_json_get(o, k);
  va_end(ap);
  return o;
}

size_t smr_json_len(const smr_json *v) {
  return v && (v->type == SMR_JSON_ARR || v->type == SMR_JSON_OBJ) ? v->n : 0;
}

const smr_json *smr_json_at(const smr_json *v, size_t i) {
  return v && v->kids && i < v->n ? v->kids[i] : NULL;
}

const char *smr_json_key(const smr_json *member) {
  return member ? member->key : NULL;
}

bool smr_json_number(const smr_json *v, double *out) {
  switch (smr_json_type_of(v)) {
  case SMR_JSON_NUM:
    *out = v->d;
    return true;
  case SMR_JSON_INT:
    *out = (double)v->i;
    return true;
  case SMR_JSON_BOOL:
    *out = v->b;
    return true;
  case SMR_JSON_RAW: {
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

double smr_json_num_or(const smr_json *o, const char *key, double dflt) {
  double v;
  return smr_json_number(smr_json_get(o, key), &v) ? v : dflt;
}

double smr_json_num_at(const smr_json *a, size_t i) {
  if (!a || a->type != SMR_JSON_ARR || i >= a->n)
    return NAN;
  if (a->nums)
    return a->nums[i];
  if (a->ints)
    return (double)a->ints[i];
  double d;
  return smr_json_number(a->kids[i], &d) ? d : NAN;
}

const char *smr_json_text_of(const smr_json *v) {
  return v && (v->type == SMR_JSON_STR || v->type == SMR_JSON_RAW) ? v->s
                                                                   : NULL;
}

bool smr_json_is_obj(const smr_json *v) {
  return v && v->type == SMR_JSON_OBJ;
}

/* ------------------------------------------------------------ writing */

void smr_json_buf_put(smr_json_buf *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + n + 1)
      cap *= 2;
    b->s = xrealloc(b->s, cap, 1);
    b->cap = cap;
  }
  memcpy(b->s + b->len, s, n);
  b->len += n;
  b->s[b->len] = '\0';
}

static void puts_(smr_json_buf *b, const char *s) {
  smr_json_buf_put(b, s, strlen(s));
}

/* Python's repr of a float: the shortest digits that read back to v, in
 * fixed notation for decimal exponents -4..15 (with ".0" when integral),
 * else d.ddde+XX. */
void smr_json_fmt_double(double v, char *buf, size_t n) {
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

void smr_json_write_string(smr_json_buf *b, const char *s, size_t n,
                           smr_json_style style) {
  static const char *const short_escapes[0x20] = {
      ['\n'] = "\\n", ['\r'] = "\\r", ['\t'] = "\\t"};
  bool compact = style == SMR_JSON_COMPACT;
  const unsigned char *u = (const unsigned char *)s;
  puts_(b, "\"");
  size_t i = 0;
  while (i < n) {
    unsigned char c = u[i];
    if (c == '"' || c == '\\') {
      puts_(b, c == '"' ? "\\\"" : "\\\\");
      i++;
    } else if (c < 0x20 || (c == 0x7f && compact)) {
      char esc[8];
      snprintf(esc, sizeof esc, "\\u%04x", c);
      puts_(b,
            compact && c < 0x20 && short_escapes[c] ? short_escapes[c] : esc);
      i++;
    } else if (c < 0x80) {
      size_t j = i;
      while (j < n && u[j] >= 0x20 &&
             (u[j] < 0x7f || (u[j] == 0x7f && !compact)) && u[j] != '"' &&
             u[j] != '\\')
        j++;
      smr_json_buf_put(b, s + i, j - i);
      i = j;
    } else {
      size_t len = smr_utf8_len(u + i, n - i);
      if (len)
        smr_json_buf_put(b, s + i, len);
      else
        puts_(b, "\\ufffd");
      i += len ? len : 1;
    }
  }
  puts_(b, "\"");
}

static void write_double(smr_json_buf *b, double d) {
  char t[40];
  if (!isfinite(d)) {
    puts_(b, "null");
    return;
  }
  smr_json_fmt_double(d, t, sizeof t);
  puts_(b, t);
}

static void write_int(smr_json_buf *b, int64_t i) {
  char t[24];
  snprintf(t, sizeof t, "%lld", (long long)i);
  puts_(b, t);
}

typedef struct style_seps {
  smr_json_style style;
  const char *item, *key;
} style_seps;

static void write_value(const smr_json *v, const style_seps *st,
                        smr_json_buf *b);

static void write_container(const smr_json *v, const style_seps *st,
                            smr_json_buf *b) {
  bool obj = v->type == SMR_JSON_OBJ;
  puts_(b, obj ? "{" : "[");
  for (size_t i = 0; i < v->n; i++) {
    if (i)
      puts_(b, st->item);
    if (v->nums) {
      write_double(b, v->nums[i]);
      continue;
    }
    if (v->ints) {
      write_int(b, v->ints[i]);
      continue;
    }
    if (obj) {
      smr_json_write_string(b, v->kids[i]->key, strlen(v->kids[i]->key),
                            st->style);
      puts_(b, st->key);
    }
    write_value(v->kids[i], st, b);
  }
  puts_(b, obj ? "}" : "]");
}

static void write_value(const smr_json *v, const style_seps *st,
                        smr_json_buf *b) {
  switch (v->type) {
  case SMR_JSON_NULL:
    puts_(b, "null");
    break;
  case SMR_JSON_BOOL:
    puts_(b, v->b ? "true" : "false");
    break;
  case SMR_JSON_INT:
    write_int(b, v->i);
    break;
  case SMR_JSON_NUM:
    write_double(b, v->d);
    break;
  case SMR_JSON_STR:
    smr_json_write_string(b, v->s, strlen(v->s), st->style);
    break;
  case SMR_JSON_RAW:
    puts_(b, v->s);
    break;
  default:
    write_container(v, st, b);
  }
}

void smr_json_write(const smr_json *v, smr_json_style style,
                    smr_json_buf *out) {
  bool spaced = style == SMR_JSON_SPACED;
  style_seps st = {style, spaced ? ", " : ",", spaced ? ": " : ":"};
  write_value(v, &st, out);
}

char *smr_json_text(const smr_json *v, smr_json_style style) {
  smr_json_buf b = {0};
  smr_json_write(v, style, &b);
  return b.s ? b.s : xstrndup("", 0);
}

/* ------------------------------------------------------------ parsing
 * A recursive descent over RFC 8259's grammar, depth-bounded; every
 * error names its byte offset and what was expected there. */
typedef struct parser {
  const char *p, *start, *end;
  int depth, max_depth;
  const smr_json_limits *lim;
  smr_json_error *err;
  bool bad;
} parser;

static void fail(parser *in, const char *at, const char *fmt, ...) {
  if (in->bad)
    return;
  in->bad = true;
  if (!in->err)
    return;
  in->err->offset = (size_t)(at - in->start);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(in->err->what, sizeof in->err->what, fmt, ap);
  va_end(ap);
}

static void ws(parser *in) {
  while (in->p < in->end &&
         (*in->p == ' ' || *in->p == '\n' || *in->p == '\r' || *in->p == '\t'))
    in->p++;
}

static int peek(const parser *in) {
  return in->p < in->end ? (unsigned char)*in->p : -1;
}

static int hex4(parser *in) {
  unsigned v = 0;
  if (in->end - in->p < 4) {
    fail(in, in->p, "four hex digits after \\u");
    return -1;
  }
  for (int k = 0; k < 4; k++) {
    char h = in->p[k];
    int d = h >= '0' && h <= '9'   ? h - '0'
            : h >= 'a' && h <= 'f' ? h - 'a' + 10
            : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                   : -1;
    if (d < 0) {
      fail(in, in->p + k, "a hex digit in \\u escape");
      return -1;
    }
    v = v * 16 + (unsigned)d;
  }
  in->p += 4;
  return (int)v;
}

static void put_utf8(smr_json_buf *b, unsigned c) {
  char t[4];
  size_t n;
  if (c < 0x80) {
    t[0] = (char)c;
    n = 1;
  } else if (c < 0x800) {
    t[0] = (char)(0xC0 | c >> 6);
    t[1] = (char)(0x80 | (c & 63));
    n = 2;
  } else if (c < 0x10000) {
    t[0] = (char)(0xE0 | c >> 12);
    t[1] = (char)(0x80 | ((c >> 6) & 63));
    t[2] = (char)(0x80 | (c & 63));
    n = 3;
  } else {
    t[0] = (char)(0xF0 | c >> 18);
    t[1] = (char)(0x80 | ((c >> 12) & 63));
    t[2] = (char)(0x80 | ((c >> 6) & 63));
    t[3] = (char)(0x80 | (c & 63));
    n = 4;
  }
  smr_json_buf_put(b, t, n);
}

/* \uXXXX, with a surrogate pair as one code point; a lone surrogate is
 * U+FFFD. */
static void unicode_escape(parser *in, smr_json_buf *b) {
  const char *at = in->p - 2;
  int c = hex4(in);
  if (c < 0)
    return;
  if (c == 0) {
    fail(in, at, "no \\u0000 in a string (strings are C strings)");
    return;
  }
  if (c >= 0xD800 && c <= 0xDBFF && in->end - in->p >= 6 && in->p[0] == '\\' &&
      in->p[1] == 'u') {
    const char *save = in->p;
    in->p += 2;
    int lo = hex4(in);
    if (lo >= 0xDC00 && lo <= 0xDFFF) {
      put_utf8(b, 0x10000 + (((unsigned)c - 0xD800) << 10) +
                      ((unsigned)lo - 0xDC00));
      return;
    }
    if (in->bad)
      return;
    in->p = save;
  }
  put_utf8(b, c >= 0xD800 && c <= 0xDFFF ? 0xFFFD : (unsigned)c);
}

static char *parse_string(parser *in) {
  const char *open = in->p;
  if (peek(in) != '"') {
    fail(in, in->p, "a string");
    return NULL;
  }
  in->p++;
  smr_json_buf b = {0};
  smr_json_buf_put(&b, "", 0);
  for (;;) {
    const char *run = in->p;
    while (in->p < in->end && *in->p != '"' && *in->p != '\\' &&
           (unsigned char)*in->p >= 0x20)
      in->p++;
    smr_json_buf_put(&b, run, (size_t)(in->p - run));
    int c = peek(in);
    if (c == '"') {
      in->p++;
      return b.s;
    }
    if (c < 0) {
      fail(in, open, "a closing '\"' for this string");
      break;
    }
    if (c != '\\') {
      fail(in, in->p, "no control character in a string (byte 0x%02x)", c);
      break;
    }
    if (in->end - in->p < 2) {
      fail(in, in->p, "an escape after '\\'");
      break;
    }
    char e = in->p[1];
    in->p += 2;
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
    const char *f = e ? strchr(from, e) : NULL;
    if (e == 'u')
      unicode_escape(in, &b);
    else if (f)
      smr_json_buf_put(&b, &to[f - from], 1);
    else
      fail(in, in->p - 1, "one of \"\\/bfnrtu after '\\'");
    if (in->bad)
      break;
  }
  free(b.s);
  return NULL;
}

static size_t digits(parser *in) {
  const char *s = in->p;
  while (in->p < in->end && *in->p >= '0' && *in->p <= '9')
    in->p++;
  return (size_t)(in->p - s);
}

static smr_json *parse_number(parser *in) {
  const char *s = in->p;
  if (peek(in) == '-')
    in->p++;
  const char *int_part = in->p;
  size_t nd = digits(in);
  if (nd == 0) {
    fail(in, s, "a value");
    return NULL;
  }
  if (nd > 1 && *int_part == '0') {
    fail(in, int_part, "no leading zero in a number");
    return NULL;
  }
  bool is_int = true;
  if (peek(in) == '.') {
    in->p++;
    is_int = false;
    if (!digits(in)) {
      fail(in, in->p, "a digit after '.'");
      return NULL;
    }
  }
  if (peek(in) == 'e' || peek(in) == 'E') {
    in->p++;
    is_int = false;
    if (peek(in) == '+' || peek(in) == '-')
      in->p++;
    if (!digits(in)) {
      fail(in, in->p, "a digit in the exponent");
      return NULL;
    }
  }
  char tmp[64];
  size_t len = (size_t)(in->p - s);
  char *text = len < sizeof tmp ? tmp : xstrndup(s, len);
  if (text == tmp) {
    memcpy(tmp, s, len);
    tmp[len] = '\0';
  }
  smr_json *v = NULL;
  if (is_int) { /* an integer beyond int64 is kept as a double */
    errno = 0;
    long long ll = strtoll(text, NULL, 10);
    if (errno != ERANGE)
      v = smr_json_int(ll);
  }
  if (!v)
    v = smr_json_num(strtod(text, NULL));
  if (text != tmp)
    free(text);
  return v;
}

static smr_json *parse_value(parser *in);

static bool literal(parser *in, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(in->end - in->p) >= n && memcmp(in->p, word, n) == 0) {
    in->p += n;
    return true;
  }
  return false;
}

/* Arrays of numbers only, all integers or all doubles, are packed. */
static void pack(smr_json *a) {
  if (a->n == 0)
    return;
  smr_json_type t = a->kids[0]->type;
  if (t != SMR_JSON_INT && t != SMR_JSON_NUM)
    return;
  for (size_t i = 1; i < a->n; i++)
    if (a->kids[i]->type != t)
      return;
  if (t == SMR_JSON_INT)
    a->ints = xrealloc(NULL, a->n, sizeof *a->ints);
  else
    a->nums = xrealloc(NULL, a->n, sizeof *a->nums);
  for (size_t i = 0; i < a->n; i++) {
    if (a->ints)
      a->ints[i] = a->kids[i]->i;
    else
      a->nums[i] = a->kids[i]->d;
    smr_json_free(a->kids[i]);
  }
  free(a->kids);
  a->kids = NULL;
  a->cap = 0;
}

static smr_json *parse_array(parser *in) {
  smr_json *a = smr_json_arr_new();
  in->p++;
  ws(in);
  if (peek(in) == ']') {
    in->p++;
    return a;
  }
  while (!in->bad) {
    smr_json *v = parse_value(in);
    if (!v)
      break;
    append(a, v);
    ws(in);
    int c = peek(in);
    if (c >= 0)
      in->p++;
    if (c == ']') {
      pack(a);
      return a;
    }
    if (c != ',')
      fail(in, in->p - (c >= 0), "',' or ']' after an array item");
  }
  smr_json_free(a);
  return NULL;
}

/* keep_member: the value's text, in keep_style, when it renders back
 * exactly as it was written (compact); else the tree. */
static smr_json *kept(parser *in, smr_json *v, const char *from) {
  if (!smr_json_is_obj(v))
    return v;
  char *compact = smr_json_text(v, SMR_JSON_COMPACT);
  size_t n = strlen(compact);
  bool same = (size_t)(in->p - from) == n && memcmp(compact, from, n) == 0;
  free(compact);
  if (!same)
    return v;
  smr_json *r = node(SMR_JSON_RAW);
  r->s = smr_json_text(v, in->lim->keep_style);
  smr_json_free(v);
  return r;
}

static smr_json *parse_member(parser *in, smr_json *o) {
  ws(in);
  char *key = parse_string(in);
  if (!key)
    return NULL;
  ws(in);
  if (peek(in) != ':') {
    fail(in, in->p, "':' after a member name");
    free(key);
    return NULL;
  }
  in->p++;
  ws(in);
  const char *from = in->p;
  smr_json *v = parse_value(in);
  if (v && in->depth == 1 && in->lim && in->lim->keep_member &&
      strcmp(key, in->lim->keep_member) == 0)
    v = kept(in, v, from);
  if (v)
    smr_json_add(o, key, v);
  free(key);
  return v;
}

static smr_json *parse_object(parser *in) {
  smr_json *o = smr_json_obj_new();
  in->p++;
  ws(in);
  if (peek(in) == '}') {
    in->p++;
    return o;
  }
  while (!in->bad) {
    if (!parse_member(in, o))
      break;
    ws(in);
    int c = peek(in);
    if (c >= 0)
      in->p++;
    if (c == '}')
      return o;
    if (c != ',')
      fail(in, in->p - (c >= 0), "',' or '}' after an object member");
  }
  smr_json_free(o);
  return NULL;
}

static smr_json *parse_value(parser *in) {
  ws(in);
  int c = peek(in);
  if (c == '{' || c == '[') {
    if (in->depth >= in->max_depth) {
      fail(in, in->p, "nesting deeper than %d", in->max_depth);
      return NULL;
    }
    in->depth++;
    smr_json *v = c == '{' ? parse_object(in) : parse_array(in);
    in->depth--;
    return v;
  }
  if (c == '"') {
    char *s = parse_string(in);
    if (!s)
      return NULL;
    smr_json *v = node(SMR_JSON_STR);
    v->s = s;
    return v;
  }
  if (literal(in, "true"))
    return smr_json_bool(true);
  if (literal(in, "false"))
    return smr_json_bool(false);
  if (literal(in, "null"))
    return smr_json_null();
  if (c == '-' || (c >= '0' && c <= '9'))
    return parse_number(in);
  fail(in, in->p, c < 0 ? "a value, not the end of the text" : "a value");
  return NULL;
}

smr_json *smr_json_parse(const char *text, size_t n,
                         const smr_json_limits *limits, smr_json_error *err) {
  parser in = {text, text, text + n, 0, 64, limits, err, false};
  if (limits && limits->max_depth > 0)
    in.max_depth = limits->max_depth;
  if (err)
    memset(err, 0, sizeof *err);
  if (limits && limits->max_bytes && n > limits->max_bytes) {
    fail(&in, text + limits->max_bytes, "at most %zu bytes of JSON",
         limits->max_bytes);
    return NULL;
  }
  smr_json *v = parse_value(&in);
  ws(&in);
  if (v && in.p < in.end)
    fail(&in, in.p, "the end of the text after the value");
  if (in.bad) {
    smr_json_free(v);
    return NULL;
  }
  return v;
}
