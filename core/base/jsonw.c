/* jsonw.c - streaming JSON writer. */
#include "base/jsonw.h"

#include "smrules/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void before_value(smr_jw *w) {
  if (w->after_key) {
    w->after_key = false;
    return;
  }
  if (w->depth > 0 && w->need_comma[w->depth])
    smr_buf_puts(&w->out, ",");
  if (w->depth > 0)
    w->need_comma[w->depth] = true;
}

static void open_(smr_jw *w, const char *c) {
  before_value(w);
  smr_buf_puts(&w->out, c);
  if (w->depth + 1 < SMR_JW_MAX_DEPTH)
    w->depth++;
  w->need_comma[w->depth] = false;
}

static void close_(smr_jw *w, const char *c) {
  smr_buf_puts(&w->out, c);
  if (w->depth > 0)
    w->depth--;
}

void smr_jw_obj(smr_jw *w) {
  open_(w, "{");
}
void smr_jw_obj_end(smr_jw *w) {
  close_(w, "}");
}
void smr_jw_arr(smr_jw *w) {
  open_(w, "[");
}
void smr_jw_arr_end(smr_jw *w) {
  close_(w, "]");
}

/* A JSON string of n bytes, escaped as the JSON model writes strings
 * (base/json.h): always valid JSON and valid UTF-8, whatever the bytes. */
static void put_string(smr_buf *b, const char *s, size_t n) {
  smr_json_buf t = {0};
  smr_json_write_string(&t, s, n, SMR_JSON_COMPACT);
  smr_buf_append(b, t.s, t.len);
  free(t.s);
}

void smr_jw_key(smr_jw *w, const char *k) {
  before_value(w);
  put_string(&w->out, k, strlen(k));
  smr_buf_puts(&w->out, ":");
  w->after_key = true;
}

void smr_jw_str(smr_jw *w, const char *s) {
  if (!s) {
    smr_jw_null(w);
    return;
  }
  smr_jw_strn(w, s, strlen(s));
}

void smr_jw_strn(smr_jw *w, const char *s, size_t n) {
  before_value(w);
  put_string(&w->out, s, n);
}

void smr_jw_int(smr_jw *w, int64_t v) {
  before_value(w);
  smr_buf_printf(&w->out, "%lld", (long long)v);
}

void smr_jw_double(smr_jw *w, double v) {
  if (!isfinite(v)) {
    smr_jw_null(w);
    return;
  }
  char tmp[40];
  smr_fmt_double(v, tmp, sizeof tmp);
  before_value(w);
  smr_buf_puts(&w->out, tmp);
}

void smr_jw_bool(smr_jw *w, bool v) {
  before_value(w);
  smr_buf_puts(&w->out, v ? "true" : "false");
}

void smr_jw_null(smr_jw *w) {
  before_value(w);
  smr_buf_puts(&w->out, "null");
}

void smr_jw_raw(smr_jw *w, const char *json) {
  before_value(w);
  smr_buf_puts(&w->out, json);
}

char *smr_jw_finish(smr_jw *w) {
  char *s = w->out.data ? w->out.data : smr_xstrdup("");
  memset(w, 0, sizeof *w);
  return s;
}
