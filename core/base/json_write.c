/* json_write.c - the JSON model's writer (smrules/json.h): compact or
 * spaced, numbers as Python's repr, strings always valid UTF-8. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_int.h"
#include "base/utf8.h"

/* ------------------------------------------------------------ writing */

void smr_json_buf_put(smr_json_buf *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + n + 1)
      cap *= 2;
    b->s = smr_json_xrealloc(b->s, cap, 1);
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
  return b.s ? b.s : smr_json_xstrndup("", 0);
}
