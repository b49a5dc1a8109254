/* report_json.c - the JSON objects a rule builds for its report
 * (api->violation, api->details, api->json_*): members in insertion order,
 * each rendered value text or a nested object, rendered when the report is
 * written. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonw.h"
#include "host/host_int.h"

typedef struct json_member {
  char *key;  /* the key, JSON-encoded */
  char *text; /* rendered value, or NULL for a nested object */
  struct smrules_json *kid;
} json_member;

struct smrules_json {
  json_member *m;
  size_t n, cap;
};

smrules_json *smr_rjson_new(void) {
  return smr_xcalloc(1, sizeof(smrules_json));
}

void smr_rjson_free(smrules_json *j) {
  if (!j)
    return;
  smr_rjson_clear(j);
  free(j);
}

void smr_rjson_clear(smrules_json *j) {
  for (size_t i = 0; i < j->n; i++) {
    free(j->m[i].key);
    free(j->m[i].text);
    smr_rjson_free(j->m[i].kid);
  }
  free(j->m);
  j->m = NULL;
  j->n = j->cap = 0;
}

void smr_rjson_render(const smrules_json *j, smr_buf *out) {
  smr_buf_puts(out, "{");
  for (size_t i = 0; i < j->n; i++) {
    smr_buf_printf(out, "%s%s:", i ? "," : "", j->m[i].key);
    if (j->m[i].kid)
      smr_rjson_render(j->m[i].kid, out);
    else
      smr_buf_puts(out, j->m[i].text);
  }
  smr_buf_puts(out, "}");
}

static json_member *json_add(smrules_json *j, const char *key) {
  if (j->n == j->cap) {
    j->cap = j->cap ? j->cap * 2 : 8;
    j->m = smr_xrealloc(j->m, j->cap * sizeof *j->m);
  }
  json_member *m = &j->m[j->n++];
  memset(m, 0, sizeof *m);
  smr_jw kw = {0};
  smr_jw_str(&kw, key ? key : "");
  m->key = smr_jw_finish(&kw);
  return m;
}

/* Append `"key":<value written into w>`. */
static void json_put(smrules_json *j, const char *key, smr_jw *w) {
  json_add(j, key)->text = smr_jw_finish(w);
}

void smr_rjson_str(smrules_json *j, const char *key, const char *v) {
  smr_jw w = {0};
  smr_jw_str(&w, v);
  json_put(j, key, &w);
}

void smr_rjson_num(smrules_json *j, const char *key, double v) {
  smr_jw w = {0};
  if (isnan(v))
    smr_jw_str(&w, "nan");
  else if (isinf(v))
    smr_jw_str(&w, v > 0 ? "inf" : "-inf");
  else
    smr_jw_double(&w, v);
  json_put(j, key, &w);
}

void smr_rjson_int(smrules_json *j, const char *key, int64_t v) {
  smr_jw w = {0};
  smr_jw_int(&w, v);
  json_put(j, key, &w);
}

void smr_rjson_bool(smrules_json *j, const char *key, bool v) {
  smr_jw w = {0};
  smr_jw_bool(&w, v);
  json_put(j, key, &w);
}

void smr_rjson_nums(smrules_json *j, const char *key, const double *v,
                    size_t n) {
  smr_jw w = {0};
  smr_jw_arr(&w);
  for (size_t i = 0; i < n; i++)
    smr_jw_double(&w, v[i]);
  smr_jw_arr_end(&w);
  json_put(j, key, &w);
}

void smr_rjson_ints(smrules_json *j, const char *key, const int64_t *v,
                    size_t n) {
  smr_jw w = {0};
  smr_jw_arr(&w);
  for (size_t i = 0; i < n; i++)
    smr_jw_int(&w, v[i]);
  smr_jw_arr_end(&w);
  json_put(j, key, &w);
}

void smr_rjson_strs(smrules_json *j, const char *key, const char *const *v,
                    size_t n) {
  smr_jw w = {0};
  smr_jw_arr(&w);
  for (size_t i = 0; i < n; i++)
    smr_jw_str(&w, v[i]);
  smr_jw_arr_end(&w);
  json_put(j, key, &w);
}

smrules_json *smr_rjson_obj(smrules_json *j, const char *key) {
  json_member *m = json_add(j, key);
  m->kid = smr_rjson_new();
  return m->kid;
}

void smr_rjson_null(smrules_json *j, const char *key) {
  smr_jw w = {0};
  smr_jw_null(&w);
  json_put(j, key, &w);
}

void smr_rjson_raw(smrules_json *j, const char *key, const char *json) {
  json_add(j, key)->text = smr_xstrdup(json && *json ? json : "null");
}

char *smr_rjson_text(const smrules_json *j) {
  smr_buf b = {0};
  smr_rjson_render(j, &b);
  return b.data;
}
