/* state.c - rule state persistence (table rule_state). */
#include "trial/state.h"

#include <cjson/cJSON.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "trial/statedb.h"

static int fail(sqlite3 *db, smr_error *err, const char *what) {
  return smr_error_set(err, SMR_ERR_SQL, "", -1, "rule state: %s: %s", what,
                       sqlite3_errmsg(db));
}

int smr_state_init(sqlite3 *db, smr_error *err) {
  if (sqlite3_exec(db, SMR_SCHEMA_RULE_STATE, NULL, NULL, NULL) != SQLITE_OK)
    return fail(db, err, "create table");
  return SMR_OK;
}

static char *i64v_json(const smr_i64v *v) {
  smr_buf b = {0};
  smr_buf_puts(&b, "[");
  for (size_t i = 0; i < v->n; i++)
    smr_buf_printf(&b, "%s%lld", i ? "," : "", (long long)v->v[i]);
  smr_buf_puts(&b, "]");
  return b.data;
}

static void json_i64v(const char *text, smr_i64v *out) {
  cJSON *a = text ? cJSON_Parse(text) : NULL;
  const cJSON *it;
  cJSON_ArrayForEach(it, a) {
    if (cJSON_IsNumber(it))
      smr_i64v_push(out, (int64_t)it->valuedouble);
  }
  cJSON_Delete(a);
}

/* Stored JSON is never passed on as stored: it is parsed and written
 * again, so only a well-formed value of the expected kind comes out (a
 * forged key or an unbalanced bracket cannot reach the output); NULL when
 * it does not parse or is not an object. */
static char *json_object_col(sqlite3_stmt *st, int i) {
  const char *t = (const char *)sqlite3_column_text(st, i);
  int n = sqlite3_column_bytes(st, i);
  cJSON *v = t ? cJSON_ParseWithLength(t, (size_t)n) : NULL;
  char *out = NULL;
  if (cJSON_IsObject(v)) {
    char *p = cJSON_PrintUnformatted(v);
    out = p ? smr_xstrdup(p) : NULL;
    cJSON_free(p);
  }
  cJSON_Delete(v);
  return out;
}

static char *col(sqlite3_stmt *st, int i) {
  const unsigned char *t = sqlite3_column_text(st, i);
  return t ? smr_xstrdup((const char *)t) : NULL;
}

int smr_state_load(sqlite3 *db, const char *instance, smr_rule_state *out,
                   smr_error *err) {
  memset(out, 0, sizeof *out);
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db,
                         "SELECT config_hash, last_step, status, triggered,"
                         " skipped, evaluated, violations, datapoints,"
                         " last_trigger, impl_state, report, message"
                         " FROM rule_state WHERE instance = ?",
                         -1, &st, NULL) != SQLITE_OK)
    return fail(db, err, "prepare");
  sqlite3_bind_text(st, 1, instance, -1, SQLITE_STATIC);
  int found = 0;
  if (sqlite3_step(st) == SQLITE_ROW) {
    found = 1;
    out->config_hash = col(st, 0);
    out->last_step = sqlite3_column_int64(st, 1);
    out->status = sqlite3_column_int(st, 2);
    json_i64v((const char *)sqlite3_column_text(st, 3), &out->triggered);
    json_i64v((const char *)sqlite3_column_text(st, 4), &out->skipped);
    out->evaluated = sqlite3_column_int64(st, 5);
    out->violations = sqlite3_column_int64(st, 6);
    out->datapoints = sqlite3_column_int64(st, 7);
    out->last_trigger = json_object_col(st, 8);
    out->impl_state = col(st, 9);
    out->report = json_object_col(st, 10);
    out->message = col(st, 11);
  }
  sqlite3_finalize(st);
  return found;
}

int smr_state_save(sqlite3 *db, const char *instance, const smr_rule_state *s,
                   smr_error *err) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(
          db,
          "INSERT OR REPLACE INTO rule_state(instance, config_hash, last_step,"
          " status, triggered, skipped, evaluated, violations, datapoints,"
          " last_trigger, impl_state, report, message, updated)"
          " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?, julianday('now'))",
          -1, &st, NULL) != SQLITE_OK)
    return fail(db, err, "prepare");
  char *trig = i64v_json(&s->triggered), *skip = i64v_json(&s->skipped);
  sqlite3_bind_text(st, 1, instance, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, s->config_hash, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 3, s->last_step);
  sqlite3_bind_int(st, 4, s->status);
  sqlite3_bind_text(st, 5, trig, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 6, skip, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 7, s->evaluated);
  sqlite3_bind_int64(st, 8, s->violations);
  sqlite3_bind_int64(st, 9, s->datapoints);
  sqlite3_bind_text(st, 10, s->last_trigger, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 11, s->impl_state, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 12, s->report, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 13, s->message, -1, SQLITE_STATIC);
  int r = sqlite3_step(st);
  sqlite3_finalize(st);
  free(trig);
  free(skip);
  return r == SQLITE_DONE ? SMR_OK : fail(db, err, "save");
}

void smr_rule_state_free(smr_rule_state *s) {
  free(s->config_hash);
  smr_i64v_free(&s->triggered);
  smr_i64v_free(&s->skipped);
  free(s->last_trigger);
  free(s->impl_state);
  free(s->report);
  free(s->message);
  memset(s, 0, sizeof *s);
}
