/* report_json.c - the JSON objects a rule builds for its report
 * (api->violation, api->details, api->json_*): objects of the one JSON
 * model (base/json.h), members in insertion order, written compact when
 * the report is written.  smrules_json is the SDK's opaque name for an
 * smr_json object. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "host/host_int.h"
#include "smrules/json.h"

static smr_json *J(smrules_json *j) {
  return (smr_json *)(void *)j;
}

static smrules_json *SJ(smr_json *j) {
  return (smrules_json *)(void *)j;
}

smrules_json *smr_rjson_new(void) {
  return SJ(smr_json_obj_new());
}

void smr_rjson_free(smrules_json *j) {
  smr_json_free(J(j));
}

void smr_rjson_clear(smrules_json *j) {
  smr_json_clear(J(j));
}

void smr_rjson_render(const smrules_json *j, smr_buf *out) {
  smr_json_buf b = {0};
  smr_json_write((const smr_json *)(const void *)j, SMR_JSON_COMPACT, &b);
  smr_buf_append(out, b.s, b.len);
  free(b.s);
}

void smr_rjson_str(smrules_json *j, const char *key, const char *v) {
  smr_json_add_str(J(j), key, v);
}

/* A non-finite number is written as a string ("nan", "inf", "-inf"):
 * JSON has no such number, and a rule's report says what it saw. */
void smr_rjson_num(smrules_json *j, const char *key, double v) {
  if (isfinite(v))
    smr_json_add_num(J(j), key, v);
  else
    smr_json_add_str(J(j), key, isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
}

void smr_rjson_int(smrules_json *j, const char *key, int64_t v) {
  smr_json_add_int(J(j), key, v);
}

void smr_rjson_bool(smrules_json *j, const char *key, bool v) {
  smr_json_add_bool(J(j), key, v);
}

void smr_rjson_nums(smrules_json *j, const char *key, const double *v,
                    size_t n) {
  smr_json_add_nums(J(j), key, v, n);
}

void smr_rjson_ints(smrules_json *j, const char *key, const int64_t *v,
                    size_t n) {
  smr_json_add_ints(J(j), key, v, n);
}

void smr_rjson_strs(smrules_json *j, const char *key, const char *const *v,
                    size_t n) {
  smr_json_add_strs(J(j), key, v, n);
}

smrules_json *smr_rjson_obj(smrules_json *j, const char *key) {
  return SJ(smr_json_add_obj(J(j), key));
}

void smr_rjson_null(smrules_json *j, const char *key) {
  smr_json_add_null(J(j), key);
}

void smr_rjson_raw(smrules_json *j, const char *key, const char *json) {
  smr_json_add_raw(J(j), key, json);
}

char *smr_rjson_text(const smrules_json *j) {
  return smr_json_text((const smr_json *)(const void *)j, SMR_JSON_COMPACT);
}
