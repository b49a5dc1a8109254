/* profiler_json.c - a small JSON scanner with the grammar of Python's json
 * module (what the reference used to read profiler files), and string
 * interning for the reader's names. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "profiler/profiler_int.h"

void pj_init(pj *j, const char *p, size_t len) {
  j->p = j->start = p;
  j->end = p + len;
  j->err = NULL;
  j->err_at = p;
}

bool pj_fail(pj *j, const char *what) {
  if (!j->err) {
    j->err = what;
    j->err_at = j->p;
  }
  return false;
}

static bool word(pj *j, const char *w) {
  size_t n = strlen(w);
  if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n) != 0)
    return false;
  j->p += n;
  return true;
}

static bool digits(pj *j) {
  const char *s = j->p;
  while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
    j->p++;
  return j->p > s;
}

/* Clinger's fast path: a decimal with at most 15 significant digits and
 * a small exponent is one exact integer scaled by one exact power of ten,
 * so a single correctly rounded multiply or divide gives the same double as
 * strtod.  Anything else returns false and goes to strtod. */
static bool fast_decimal(const char *s, size_t n, double *v) {
  static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  size_t i = 0;
  bool neg = s[0] == '-';
  i += neg;
  uint64_t m = 0;
  int digits = 0, scale = 0;
  for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
    if (m || s[i] != '0')
      digits++;
    m = m * 10 + (uint64_t)(s[i] - '0');
    if (digits > 15)
      return false;
  }
  if (i < n && s[i] == '.') {
    for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
      if (m || s[i] != '0')
        digits++;
      m = m * 10 + (uint64_t)(s[i] - '0');
      scale++;
      if (digits > 15)
        return false;
    }
  }
  if (i != n || scale > 22)
    return false; /* exponents and long fractions: strtod */
  double d = (double)m;
  d = scale ? d / pow10[scale] : d;
  *v = neg ? -d : d;
  return true;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)? | NaN | -?Infinity */
bool pj_number(pj *j, double *v, bool *is_int) {
  pj_ws(j);
  const char *s = j->p;
  *is_int = false;
  if (word(j, "NaN")) {
    *v = NAN;
    return true;
  }
  bool neg = j->p < j->end && *j->p == '-';
  if (neg)
    j->p++;
  if (word(j, "Infinity")) {
    *v = neg ? -INFINITY : INFINITY;
    return true;
  }
  if (j->p < j->end && *j->p == '0')
    j->p++;
  else if (!digits(j))
    return pj_fail(j, "a number");
  bool frac = false, exp = false;
  if (j->p + 1 < j->end && *j->p == '.' && j->p[1] >= '0' && j->p[1] <= '9') {
    j->p++;
    digits(j);
    frac = true;
  }
  if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
    const char *e = j->p++;
    if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
      j->p++;
    if (!digits(j))
      j->p = e; /* Python: the number ends before the 'e' */
    else
      exp = true;
  }
  size_t n = (size_t)(j->p - s);
  if (fast_decimal(s, n, v)) {
    *is_int = !frac && !exp;
    return true;
  }
  char small[64];
  char *tok = n < sizeof small ? small : malloc(n + 1);
  if (!tok)
    return pj_fail(j, "a number of reasonable length");
  memcpy(tok, s, n);
  tok[n] = '\0';
  *v = strtod(tok, NULL);
  if (tok != small)
    free(tok);
  *is_int = !frac && !exp;
  return true;
}

/* Bytes of a UTF-8 sequence starting with lead byte c at p (strict, as
 * Python's decoder), or 0 when invalid. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end) {
  unsigned c = p[0];
  size_t n;
  unsigned lo = 0x80, hi = 0xBF;
  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0)
      lo = 0xA0;
    if (c == 0xED)
      hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0)
      lo = 0x90;
    if (c == 0xF4)
      hi = 0x8F;
  } else
    return 0;
  if ((size_t)(end - p) < n || p[1] < lo || p[1] > hi)
    return 0;
  for (size_t i = 2; i < n; i++)
    if (p[i] < 0x80 || p[i] > 0xBF)
      return 0;
  return n;
}

static int hex4(const char *p) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0)
      return -1;
    v = v * 16 + d;
  }
  return v;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xC0 | cp >> 6);
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | cp >> 12);
    o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | cp >> 18);
  o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* A \u escape at j->p (after the backslash and 'u'): one code point, or a
 * surrogate pair when a low surrogate escape follows. */
static bool unicode_escape(pj *j, unsigned *cp) {
  if (j->end - j->p < 4 || hex4(j->p) < 0)
    return pj_fail(j, "4 hex digits after \\u");
  *cp = (unsigned)hex4(j->p);
  j->p += 4;
  if (*cp >= 0xD800 && *cp <= 0xDBFF && j->end - j->p >= 6 && j->p[0] == '\\' &&
      j->p[1] == 'u') {
    int lo = hex4(j->p + 2);
    if (lo >= 0xDC00 && lo <= 0xDFFF) {
      *cp = 0x10000 + ((*cp - 0xD800) << 10) + ((unsigned)lo - 0xDC00);
      j->p += 6;
    }
  }
  return true;
}

static bool escape(pj *j, char *out, size_t *n) {
  char c = *j->p++;
  char o;
  switch (c) {
  case '"':
    o = '"';
    break;
  case '\\':
    o = '\\';
    break;
  case '/':
    o = '/';
    break;
  case 'b':
    o = '\b';
    break;
  case 'f':
    o = '\f';
    break;
  case 'n':
    o = '\n';
    break;
  case 'r':
    o = '\r';
    break;
  case 't':
    o = '\t';
    break;
  case 'u': {
    unsigned cp = 0;
    if (!unicode_escape(j, &cp))
      return false;
    if (out) {
      char tmp[4];
      size_t k = put_utf8(tmp, cp);
      memcpy(out + *n, tmp, k);
      *n += k;
    }
    return true;
  }
  default:
    j->p--;
    return pj_fail(j, "a valid escape sequence");
  }
  if (out)
    out[(*n)++] = o;
  return true;
}

size_t pj_string_raw_len(const pj *j) {
  const char *q = j->p;
  while (q < j->end && *q != '"')
    q++;
  if (q < j->end)
    q++;
  size_t n = 0;
  while (q < j->end && *q != '"') {
    if (*q == '\\' && q + 1 < j->end)
      q++, n++;
    q++, n++;
  }
  return n;
}

/* Escapes shrink or keep the length (a surrogate pair: 12 bytes -> 4), so
 * decoded text always fits in the raw length. */
bool pj_string(pj *j, char *out, size_t *n) {
  size_t used = 0;
  if (!pj_lit(j, '"'))
    return pj_fail(j, "a string");
  for (;;) {
    /* fast path: a run of plain ASCII */
    const char *run = j->p;
    while (j->p < j->end && (unsigned char)*j->p >= 0x20 &&
           (unsigned char)*j->p < 0x80 && *j->p != '"' && *j->p != '\\')
      j->p++;
    if (j->p > run) {
      if (out)
        memcpy(out + used, run, (size_t)(j->p - run));
      used += (size_t)(j->p - run);
    }
    if (j->p >= j->end)
      return pj_fail(j, "the end of a string");
    unsigned char c = (unsigned char)*j->p;
    if (c == '"') {
      j->p++;
      break;
    }
    if (c == '\\') {
      j->p++;
      if (j->p >= j->end || !escape(j, out, &used))
        return pj_fail(j, "a valid escape sequence");
      continue;
    }
    if (c < 0x20)
      return pj_fail(j, "no control character inside a string");
    size_t k =
        utf8_len((const unsigned char *)j->p, (const unsigned char *)j->end);
    if (!k)
      return pj_fail(j, "UTF-8 text");
    if (out)
      memcpy(out + used, j->p, k);
    used += k;
    j->p += k;
  }
  if (out)
    out[used] = '\0';
  if (n)
    *n = used;
  return true;
}

static bool skip_container(pj *j, int depth, char close) {
  j->p++;
  if (pj_lit(j, close))
    return true;
  for (;;) {
    if (close == '}') {
      if (!pj_string(j, NULL, NULL))
        return pj_fail(j, "a key string");
      if (!pj_lit(j, ':'))
        return pj_fail(j, "':'");
    }
    if (!pj_skip(j, depth + 1))
      return false;
    if (pj_lit(j, close))
      return true;
    if (!pj_lit(j, ','))
      return pj_fail(j, close == '}' ? "',' or '}'" : "',' or ']'");
  }
}

bool pj_skip(pj *j, int depth) {
  if (depth > 200)
    return pj_fail(j, "nesting of at most 200 levels");
  char c = pj_peek(j);
  double d;
  bool is_int;
  switch (c) {
  case '{':
    return skip_container(j, depth, '}');
  case '[':
    return skip_container(j, depth, ']');
  case '"':
    return pj_string(j, NULL, NULL);
  case 't':
    return word(j, "true") || pj_fail(j, "a value");
  case 'f':
    return word(j, "false") || pj_fail(j, "a value");
  case 'n':
    return word(j, "null") || pj_fail(j, "a value");
  default:
    return pj_number(j, &d, &is_int) || pj_fail(j, "a value");
  }
}

/* ----------------------------------------------------------- interning */

static void intern_grow(smr_intern *t) {
  size_t cap = t->cap ? t->cap * 2 : 256;
  char **slots = smr_xcalloc(cap, sizeof *slots);
  for (size_t i = 0; i < t->cap; i++) {
    char *s = t->slots[i];
    if (!s)
      continue;
    size_t k = smr_hash_str(SMR_HASH_INIT, s) & (cap - 1);
    while (slots[k])
      k = (k + 1) & (cap - 1);
    slots[k] = s;
  }
  free(t->slots);
  t->slots = slots;
  t->cap = cap;
}

const char *smr_intern_get(smr_intern *t, const char *s, size_t n) {
  n = strnlen(s, n);
  if ((t->n + 1) * 2 > t->cap)
    intern_grow(t);
  size_t k = smr_hash_bytes(SMR_HASH_INIT, s, n) & (t->cap - 1);
  while (t->slots[k]) {
    if (strncmp(t->slots[k], s, n) == 0 && t->slots[k][n] == '\0')
      return t->slots[k];
    k = (k + 1) & (t->cap - 1);
  }
  t->slots[k] = smr_xstrndup(s, n);
  t->n++;
  t->bytes += n + 1 + sizeof(char *) * 2;
  return t->slots[k];
}

void smr_intern_free(smr_intern *t) {
  for (size_t i = 0; i < t->cap; i++)
    free(t->slots[i]);
  free(t->slots);
  memset(t, 0, sizeof *t);
}
