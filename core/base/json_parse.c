/* json_parse.c - the JSON model's parser (smrules/json.h): RFC 8259,
 * depth- and size-bounded, every error naming its byte offset. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_int.h"
#include "base/utf8.h"

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
  char *text = len < sizeof tmp ? tmp : smr_json_xstrndup(s, len);
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
    a->ints = smr_json_xrealloc(NULL, a->n, sizeof *a->ints);
  else
    a->nums = smr_json_xrealloc(NULL, a->n, sizeof *a->nums);
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
    smr_json_append(a, v);
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

/* keep_member without a tree.  A value made only of objects, arrays,
 * strings of printable ASCII without escapes, integers of at most 18
 * digits (no leading zero, not -0), true, false and null, with no white
 * space, renders back exactly as it was written; its keep_style text is
 * the input with each ',' and ':' outside strings spaced.  The member
 * kept is the largest of a document (ProfilerReport's CPUBottleneck
 * snapshots: one per sampling round), and as a tree it took nine times
 * its text for the moment it was checked: this checks it on the text.
 * plain_value returns the end of such a value at p, counting its
 * separators into *seps; NULL for anything else, which the tree then
 * decides (kept below) with the parser's own errors and limits. */
static const char *plain_value(const parser *in, const char *p, int depth,
                               size_t *seps);

static const char *plain_string(const parser *in, const char *p) {
  if (p >= in->end || *p != '"')
    return NULL;
  for (p++; p < in->end && *p >= 0x20 && *p < 0x7f && *p != '\\'; p++)
    if (*p == '"')
      return p + 1;
  return NULL;
}

static const char *plain_int(const parser *in, const char *p) {
  const char *d = p < in->end && *p == '-' ? p + 1 : p, *q = d;
  while (q < in->end && *q >= '0' && *q <= '9')
    q++;
  size_t n = (size_t)(q - d);
  if (n == 0 || n > 18 || (*d == '0' && (n > 1 || d > p)))
    return NULL;
  if (q < in->end && (*q == '.' || *q == 'e' || *q == 'E'))
    return NULL;
  return q;
}

static const char *plain_word(const parser *in, const char *p) {
  static const char *const words[] = {"true", "false", "null"};
  for (size_t i = 0; i < 3; i++) {
    size_t n = strlen(words[i]);
    if ((size_t)(in->end - p) >= n && memcmp(p, words[i], n) == 0)
      return p + n;
  }
  return NULL;
}

static const char *plain_container(const parser *in, const char *p, int depth,
                                   size_t *seps) {
  char close = *p == '{' ? '}' : ']';
  if (depth >= in->max_depth)
    return NULL;
  if (++p < in->end && *p == close)
    return p + 1;
  for (;;) {
    if (close == '}') {
      p = plain_string(in, p);
      if (!p || p >= in->end || *p != ':')
        return NULL;
      ++*seps;
      p++;
    }
    p = plain_value(in, p, depth + 1, seps);
    if (!p || p >= in->end || (*p != ',' && *p != close))
      return NULL;
    if (*p++ == close)
      return p;
    ++*seps;
  }
}

static const char *plain_value(const parser *in, const char *p, int depth,
                               size_t *seps) {
  if (p >= in->end)
    return NULL;
  if (*p == '{' || *p == '[')
    return plain_container(in, p, depth, seps);
  if (*p == '"')
    return plain_string(in, p);
  if (*p == '-' || (*p >= '0' && *p <= '9'))
    return plain_int(in, p);
  return plain_word(in, p);
}

/* The object at in->p as its keep_style text without a tree, or NULL
 * (in->p unmoved) when it is not plain (above). */
static smr_json *kept_plain(parser *in) {
  size_t seps = 0;
  const char *end = plain_value(in, in->p, in->depth, &seps);
  if (!end)
    return NULL;
  bool spaced = in->lim->keep_style == SMR_JSON_SPACED;
  smr_json *r = smr_json_node(SMR_JSON_RAW);
  r->s = smr_json_xrealloc(NULL,
                           (size_t)(end - in->p) + 1 + (spaced ? seps : 0), 1);
  char *o = r->s;
  bool in_string = false;
  for (const char *p = in->p; p < end; p++) {
    *o++ = *p;
    in_string ^= *p == '"'; /* no escapes in a plain string */
    if (spaced && !in_string && (*p == ',' || *p == ':'))
      *o++ = ' ';
  }
  *o = '\0';
  in->p = end;
  return r;
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
  smr_json *r = smr_json_node(SMR_JSON_RAW);
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
  bool keep = in->depth == 1 && in->lim && in->lim->keep_member &&
              strcmp(key, in->lim->keep_member) == 0;
  smr_json *v = keep && peek(in) == '{' ? kept_plain(in) : NULL;
  if (!v) {
    v = parse_value(in);
    if (v && keep)
      v = kept(in, v, from);
  }
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
    smr_json *v = smr_json_node(SMR_JSON_STR);
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
