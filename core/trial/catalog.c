/* catalog.c - SQLite schema and queries for the trial catalog. */
#include "trial/catalog.h"

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/common.h"
#include "format/tensor.h"
#include "trial/statedb.h"

#define SCHEMA_VERSION "3"

/* Tensor ids met in the current write transaction, by name.  Reading an
 * index file asked the tensors table twice for every tensor it lists
 * (INSERT OR IGNORE, then SELECT): most of the catalog's work when a
 * trial is first read.  The ids are remembered only within one
 * transaction, since another process may change the table between ours,
 * and for at most NAME_IDS names. */
#define NAME_IDS 4096
#define NAME_ID_SLOTS (2 * NAME_IDS) /* a power of two */

struct name_id {
  char *name; /* NULL: empty */
  int64_t id;
};

struct smr_catalog {
  sqlite3 *db;
  sqlite3_stmt *ins_index, *ins_tensor, *get_tensor, *ins_entry, *ins_step;
  sqlite3_stmt *q_entries_any, *q_entries_key, *q_step_entries;
  struct name_id ids[NAME_ID_SLOTS];
  size_t nids;
};

static void forget_ids(smr_catalog *c) {
  for (size_t i = 0; c->nids && i < NAME_ID_SLOTS; i++) {
    free(c->ids[i].name);
    c->ids[i].name = NULL;
  }
  c->nids = 0;
}

/* The slot of `name`: the one holding it, or the empty one where it
 * would go. */
static struct name_id *id_slot(smr_catalog *c, const char *name) {
  for (size_t i = (size_t)smr_hash_str(SMR_HASH_INIT, name);; i++) {
    struct name_id *s = &c->ids[i & (NAME_ID_SLOTS - 1)];
    if (!s->name || strcmp(s->name, name) == 0)
      return s;
  }
}

/* The tables are SMR_SCHEMA_CATALOG (statedb.c: the state file's whole
 * schema is defined in one place, to be checked against). */
static const char *PRAGMAS = "PRAGMA journal_mode=WAL;"
                             "PRAGMA synchronous=NORMAL;";

static int sql_fail(smr_catalog *c, smr_error *err, const char *what) {
  return smr_error_set(err, SMR_ERR_SQL, "", -1, "catalog: %s: %s", what,
                       c && c->db ? sqlite3_errmsg(c->db) : "no database");
}

static int exec(smr_catalog *c, const char *sql, smr_error *err) {
  char *msg = NULL;
  if (sqlite3_exec(c->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    smr_error_set(err, SMR_ERR_SQL, "", -1, "catalog: %s", msg ? msg : "error");
    sqlite3_free(msg);
    return SMR_ERR_SQL;
  }
  return SMR_OK;
}

static int prepare(smr_catalog *c, const char *sql, sqlite3_stmt **st,
                   smr_error *err) {
  if (sqlite3_prepare_v2(c->db, sql, -1, st, NULL) != SQLITE_OK)
    return sql_fail(c, err, "prepare");
  return SMR_OK;
}

static int prepare_all(smr_catalog *c, smr_error *err) {
  static const char *ENTRY_COLS =
      "SELECT f.step, f.mode, f.mode_step, f.worker, e.kind, e.reduction,"
      " e.abs, e.start, e.length, f.event_file, e.shape, f.path, f.error,"
      " e.tensor";
  char *any =
      smr_xasprintf("%s FROM entries e JOIN index_files f ON f.id = e.index_id"
                    " WHERE e.tensor = ?1 ORDER BY f.step, f.worker",
                    ENTRY_COLS);
  /* Keyed lookups start from the (few) index files of that step and use
   * entries(index_id, tensor): starting from the tensor would scan all its
   * entries, making a long trial quadratic.  CROSS JOIN fixes the order.
   * Within a worker, entries come in the order their index files were
   * first read and then as each listed them: a step's entries of all
   * tensors (q_step_entries) hold each tensor's keyed answer in order. */
  char *key = smr_xasprintf(
      "%s FROM index_files f CROSS JOIN entries e ON e.index_id = f.id"
      " WHERE e.tensor = ?1 AND f.mode = ?2 AND f.mode_step = ?3"
      " ORDER BY f.worker, f.id, e.rowid",
      ENTRY_COLS);
  char *step = smr_xasprintf(
      "%s FROM index_files f CROSS JOIN entries e ON e.index_id = f.id"
      " WHERE f.mode = ?1 AND f.mode_step = ?2"
      " ORDER BY f.worker, f.id, e.rowid",
      ENTRY_COLS);
  int rc = SMR_OK;
  if (prepare(c,
              "INSERT INTO index_files(path, step, worker, mode, mode_step,"
              " event_file, status, error, err_offset)"
              " VALUES(?,?,?,?,?,?,?,?,?)",
              &c->ins_index, err) ||
      prepare(c, "INSERT OR IGNORE INTO tensors(name) VALUES(?)",
              &c->ins_tensor, err) ||
      prepare(c, "SELECT id FROM tensors WHERE name = ?", &c->get_tensor,
              err) ||
      prepare(c,
              "INSERT INTO entries(tensor, index_id, kind, reduction, abs,"
              " start, length, shape) VALUES(?,?,?,?,?,?,?,?)",
              &c->ins_entry, err) ||
      prepare(c, any, &c->q_entries_any, err) ||
      prepare(c, key, &c->q_entries_key, err) ||
      prepare(c, step, &c->q_step_entries, err))
    rc = SMR_ERR_SQL;
  free(any);
  free(key);
  free(step);
  return rc;
}

/* Empty the database when it was built for another trial or schema. */
static int check_identity(smr_catalog *c, const char *root, smr_error *err) {
  char *ver = smr_catalog_meta_get(c, "schema");
  char *r = smr_catalog_meta_get(c, "root");
  bool same =
      ver && r && strcmp(ver, SCHEMA_VERSION) == 0 && strcmp(r, root) == 0;
  free(ver);
  free(r);
  if (same)
    return SMR_OK;
  int rc = smr_catalog_reset(c, err);
  if (rc == SMR_OK)
    rc = smr_catalog_meta_set(c, "schema", SCHEMA_VERSION, err);
  if (rc == SMR_OK)
    rc = smr_catalog_meta_set(c, "root", root, err);
  return rc;
}

static int open_once(const char *path, const char *root, smr_catalog **out,
                     bool *busy, smr_error *err) {
  *out = NULL;
  *busy = false;
  smr_catalog *c = smr_xcalloc(1, sizeof *c);
  int flags =
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
  int rc = smr_statedb_open(path, flags, &c->db, busy, err);
  if (rc != SMR_OK) {
    smr_catalog_close(c);
    return rc;
  }
  sqlite3_busy_timeout(c->db, 5000);
  rc = exec(c, PRAGMAS, err);
  if (rc == SMR_OK)
    rc = exec(c, SMR_SCHEMA_CATALOG, err);
  if (rc == SMR_OK)
    rc = prepare_all(c, err);
  if (rc == SMR_OK)
    rc = exec(c, "BEGIN IMMEDIATE", err);
  if (rc == SMR_OK) {
    rc = check_identity(c, root, err);
    rc = rc == SMR_OK ? exec(c, "COMMIT", err) : rc;
    if (rc != SMR_OK)
      sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
  }
  if (rc != SMR_OK) {
    int code = sqlite3_errcode(c->db) & 0xff;
    *busy = code == SQLITE_BUSY || code == SQLITE_LOCKED;
    if (err && !err->file[0])
      snprintf(err->file, sizeof err->file, "%s", path);
    smr_catalog_close(c);
    return rc;
  }
  *out = c;
  return SMR_OK;
}

/* Several smrules processes may create the same state file at once; the
 * schema set-up (journal mode, tables) can then find the file locked in
 * ways SQLite's busy handler does not wait for: try again a little later. */
int smr_catalog_open(const char *path, const char *root, smr_catalog **out,
                     smr_error *err) {
  int rc = SMR_ERR_SQL;
  for (int attempt = 0; attempt < 50; attempt++) {
    bool busy;
    rc = open_once(path, root, out, &busy, err);
    if (rc == SMR_OK || !busy)
      return rc;
    struct timespec ts = {0, (long)(20 + attempt * 10) * 1000000L};
    nanosleep(&ts, NULL);
  }
  return rc;
}

void smr_catalog_close(smr_catalog *c) {
  if (!c)
    return;
  sqlite3_stmt *all[] = {c->ins_index,     c->ins_tensor,    c->get_tensor,
                         c->ins_entry,     c->ins_step,      c->q_entries_any,
                         c->q_entries_key, c->q_step_entries};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    sqlite3_finalize(all[i]);
  sqlite3_close(c->db);
  forget_ids(c);
  free(c);
}

sqlite3 *smr_catalog_db(smr_catalog *c) {
  return c->db;
}

int smr_catalog_begin(smr_catalog *c, smr_error *err) {
  forget_ids(c);
  return exec(c, "BEGIN IMMEDIATE", err);
}

int smr_catalog_commit(smr_catalog *c, smr_error *err) {
  forget_ids(c);
  return exec(c, "COMMIT", err);
}

void smr_catalog_rollback(smr_catalog *c) {
  forget_ids(c);
  sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
}

/* Tables other modules keep in the same database about one run of the
 * trial: rule state (state.c) and the action log (action.c).  A different
 * or rewritten trial must not inherit them. */
static const char *const RUN_TABLES[] = {"rule_state", "action_log",
                                         "action_target"};

static bool table_exists(smr_catalog *c, const char *name) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(c->db,
                         "SELECT 1 FROM sqlite_master WHERE type = 'table'"
                         " AND name = ?",
                         -1, &st, NULL) != SQLITE_OK)
    return false;
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  bool found = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  return found;
}

int smr_catalog_reset(smr_catalog *c, smr_error *err) {
  forget_ids(c);
  int rc = exec(c,
                "DELETE FROM entries; DELETE FROM tensors;"
                " DELETE FROM index_files;",
                err);
  for (size_t i = 0; rc == SMR_OK && i < sizeof RUN_TABLES / sizeof *RUN_TABLES;
       i++)
    if (table_exists(c, RUN_TABLES[i])) {
      char *sql = smr_xasprintf("DELETE FROM %s", RUN_TABLES[i]);
      rc = exec(c, sql, err);
      free(sql);
    }
  return rc;
}

int smr_catalog_index_paths(smr_catalog *c, smr_strv *out, smr_error *err) {
  sqlite3_stmt *st;
  if (prepare(c, "SELECT path FROM index_files ORDER BY path", &st, err))
    return SMR_ERR_SQL;
  while (sqlite3_step(st) == SQLITE_ROW)
    smr_strv_push(out, (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  return SMR_OK;
}

static int64_t tensor_id_from_db(smr_catalog *c, const char *name,
                                 smr_error *err);

static int64_t tensor_id_for(smr_catalog *c, const char *name, smr_error *err) {
  bool in_transaction = !sqlite3_get_autocommit(c->db);
  struct name_id *slot = in_transaction ? id_slot(c, name) : NULL;
  if (slot && slot->name)
    return slot->id;
  int64_t id = tensor_id_from_db(c, name, err);
  if (slot && id >= 0 && c->nids < NAME_IDS) {
    slot->name = smr_xstrdup(name);
    slot->id = id;
    c->nids++;
  }
  return id;
}

static int64_t tensor_id_from_db(smr_catalog *c, const char *name,
                                 smr_error *err) {
  sqlite3_reset(c->ins_tensor);
  sqlite3_bind_text(c->ins_tensor, 1, name, -1, SQLITE_STATIC);
  if (sqlite3_step(c->ins_tensor) != SQLITE_DONE) {
    sql_fail(c, err, "insert tensor");
    return -1;
  }
  if (sqlite3_changes(c->db) > 0)
    return sqlite3_last_insert_rowid(c->db);
  return smr_catalog_tensor_id(c, name, err);
}

static char *shape_text(int ndim, const int64_t *shape) {
  smr_buf b = {0};
  smr_buf_puts(&b, "");
  for (int i = 0; i < ndim; i++)
    smr_buf_printf(&b, "%s%lld", i ? "," : "", (long long)shape[i]);
  return b.data;
}

static int add_entry(smr_catalog *c, int64_t tid, int64_t index_id, int kind,
                     int reduction, bool abs, int64_t start, int64_t length,
                     const char *shape, smr_error *err) {
  sqlite3_stmt *st = c->ins_entry;
  sqlite3_reset(st);
  sqlite3_bind_int64(st, 1, tid);
  sqlite3_bind_int64(st, 2, index_id);
  sqlite3_bind_int(st, 3, kind);
  sqlite3_bind_int(st, 4, reduction);
  sqlite3_bind_int(st, 5, abs);
  sqlite3_bind_int64(st, 6, start);
  sqlite3_bind_int64(st, 7, length);
  if (shape)
    sqlite3_bind_text(st, 8, shape, -1, SQLITE_TRANSIENT);
  else
    sqlite3_bind_null(st, 8);
  if (sqlite3_step(st) != SQLITE_DONE)
    return sql_fail(c, err, "insert entry");
  return SMR_OK;
}

static int add_payloads(smr_catalog *c, int64_t index_id, const smr_index *ix,
                        smr_error *err) {
  for (size_t i = 0; i < ix->n_tensors; i++) {
    const smr_index_tensor *t = &ix->tensors[i];
    char *base = NULL;
    int red = 0;
    bool abs = false;
    bool is_red = smr_reduction_name_parse(t->name, &base, &red, &abs);
    if (t->problem && is_red) { /* optional: the value gives it too */
      free(base);
      continue;
    }
    int64_t tid = tensor_id_for(c, is_red ? base : t->name, err);
    free(base);
    if (tid < 0)
      return SMR_ERR_SQL;
    int kind = t->problem ? SMR_ENTRY_BAD
               : is_red   ? SMR_ENTRY_REDUCTION
                          : SMR_ENTRY_RAW;
    int rc = add_entry(c, tid, index_id, kind, red, abs, t->start_idx,
                       t->length, t->problem, err);
    if (rc)
      return rc;
  }
  for (size_t i = 0; i < ix->n_shapes; i++) {
    const smr_index_shape *s = &ix->shapes[i];
    int64_t tid = tensor_id_for(c, s->name, err);
    if (tid < 0)
      return SMR_ERR_SQL;
    char *txt = shape_text(s->ndim, s->shape);
    int rc =
        add_entry(c, tid, index_id, SMR_ENTRY_SHAPE, 0, false, 0, 0, txt, err);
    free(txt);
    if (rc)
      return rc;
  }
  return SMR_OK;
}

int smr_catalog_add_index(smr_catalog *c, const char *path, int64_t step,
                          const char *worker, const smr_index *ix,
                          const smr_error *failure, smr_error *err) {
  sqlite3_stmt *st = c->ins_index;
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  sqlite3_bind_text(st, 1, path, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, step);
  sqlite3_bind_text(st, 3, worker, -1, SQLITE_STATIC);
  if (ix) {
    sqlite3_bind_int(st, 4, ix->mode);
    sqlite3_bind_int64(st, 5, ix->mode_step);
    if (ix->event_file_name)
      sqlite3_bind_text(st, 6, ix->event_file_name, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 7, 0);
    if (ix->event_file_problem)
      sqlite3_bind_text(st, 8, ix->event_file_problem, -1, SQLITE_STATIC);
  } else {
    sqlite3_bind_int(st, 7, 1);
    sqlite3_bind_text(st, 8, failure ? failure->msg : "unreadable", -1,
                      SQLITE_STATIC);
    sqlite3_bind_int64(st, 9, failure ? failure->offset : -1);
  }
  if (sqlite3_step(st) != SQLITE_DONE)
    return sql_fail(c, err, "insert index file");
  if (!ix)
    return SMR_OK;
  return add_payloads(c, sqlite3_last_insert_rowid(c->db), ix, err);
}

static void parse_shape(const char *txt, smr_entry *e) {
  e->ndim = 0;
  if (!txt)
    return;
  const char *p = txt;
  while (*p && e->ndim < SMR_MAX_DIMS) {
    char *end;
    e->shape[e->ndim++] = strtoll(p, &end, 10);
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p == '\0')
      break;
  }
}

static char *col_dup(sqlite3_stmt *st, int i) {
  const unsigned char *t = sqlite3_column_text(st, i);
  return t ? smr_xstrdup((const char *)t) : NULL;
}

static void entries_push(smr_entries *out, sqlite3_stmt *st) {
  if (out->n == out->cap) {
    out->cap = out->cap ? out->cap * 2 : 8;
    out->v = smr_xrealloc(out->v, out->cap * sizeof *out->v);
  }
  smr_entry *e = &out->v[out->n++];
  memset(e, 0, sizeof *e);
  e->step = sqlite3_column_int64(st, 0);
  e->mode = sqlite3_column_int(st, 1);
  e->mode_step = sqlite3_column_int64(st, 2);
  e->worker = col_dup(st, 3);
  e->kind = sqlite3_column_int(st, 4);
  e->reduction = sqlite3_column_int(st, 5);
  e->abs = sqlite3_column_int(st, 6) != 0;
  e->start = sqlite3_column_int64(st, 7);
  e->length = sqlite3_column_int64(st, 8);
  e->event_file = col_dup(st, 9);
  if (e->kind == SMR_ENTRY_SHAPE)
    parse_shape((const char *)sqlite3_column_text(st, 10), e);
  e->index_path = col_dup(st, 11);
  e->problem = col_dup(st, 12);
  e->tensor = sqlite3_column_int64(st, 13);
  if (e->kind == SMR_ENTRY_BAD) { /* the index's own entry is wrong */
    e->kind = SMR_ENTRY_RAW;
    free(e->problem);
    e->problem = col_dup(st, 10);
  }
}

int smr_catalog_entries(smr_catalog *c, int64_t tensor_id, int mode,
                        int64_t mode_step, smr_entries *out, smr_error *err) {
  bool keyed = mode != 0 && mode_step >= 0;
  sqlite3_stmt *st = keyed ? c->q_entries_key : c->q_entries_any;
  sqlite3_reset(st);
  sqlite3_bind_int64(st, 1, tensor_id);
  if (keyed) {
    sqlite3_bind_int(st, 2, mode);
    sqlite3_bind_int64(st, 3, mode_step);
  }
  int r;
  while ((r = sqlite3_step(st)) == SQLITE_ROW) {
    if (mode != 0 && !keyed && sqlite3_column_int(st, 1) != mode)
      continue;
    entries_push(out, st);
  }
  sqlite3_reset(st);
  if (r != SQLITE_DONE)
    return sql_fail(c, err, "query entries");
  return SMR_OK;
}

int smr_catalog_step_entries(smr_catalog *c, int mode, int64_t mode_step,
                             size_t max, smr_entries *out, bool *all,
                             smr_error *err) {
  sqlite3_stmt *st = c->q_step_entries;
  memset(out, 0, sizeof *out);
  sqlite3_reset(st);
  sqlite3_bind_int(st, 1, mode);
  sqlite3_bind_int64(st, 2, mode_step);
  int r;
  while ((r = sqlite3_step(st)) == SQLITE_ROW && out->n < max)
    entries_push(out, st);
  sqlite3_reset(st);
  *all = r != SQLITE_ROW;
  if (!*all || r != SQLITE_DONE)
    smr_entries_free(out);
  return *all && r != SQLITE_DONE ? sql_fail(c, err, "query step entries")
                                  : SMR_OK;
}

void smr_entries_free(smr_entries *e) {
  for (size_t i = 0; i < e->n; i++) {
    free(e->v[i].worker);
    free(e->v[i].event_file);
    free(e->v[i].index_path);
    free(e->v[i].problem);
  }
  free(e->v);
  memset(e, 0, sizeof *e);
}

int smr_catalog_step_rows(smr_catalog *c, smr_step_row **rows, size_t *n,
                          smr_error *err) {
  sqlite3_stmt *st;
  *rows = NULL;
  *n = 0;
  if (prepare(c,
              "SELECT step, mode, mode_step, worker FROM index_files"
              " WHERE status = 0 ORDER BY path",
              &st, err))
    return SMR_ERR_SQL;
  size_t cap = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (*n == cap) {
      cap = cap ? cap * 2 : 64;
      *rows = smr_xrealloc(*rows, cap * sizeof **rows);
    }
    smr_step_row *r = &(*rows)[(*n)++];
    r->step = sqlite3_column_int64(st, 0);
    r->mode = sqlite3_column_int(st, 1);
    r->mode_step = sqlite3_column_int64(st, 2);
    r->worker = col_dup(st, 3);
  }
  sqlite3_finalize(st);
  return SMR_OK;
}

void smr_step_rows_free(smr_step_row *rows, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(rows[i].worker);
  free(rows);
}

int smr_catalog_value_bytes(smr_catalog *c, int64_t *bytes, int64_t *steps,
                            smr_error *err) {
  sqlite3_stmt *st;
  *bytes = *steps = 0;
  if (prepare(c,
              "SELECT COALESCE(SUM(e.length), 0), COUNT(DISTINCT i.step)"
              " FROM entries e JOIN index_files i ON i.id = e.index_id"
              " WHERE e.kind = 0 AND i.status = 0",
              &st, err))
    return SMR_ERR_SQL;
  if (sqlite3_step(st) == SQLITE_ROW) {
    *bytes = sqlite3_column_int64(st, 0);
    *steps = sqlite3_column_int64(st, 1);
  }
  sqlite3_finalize(st);
  return SMR_OK;
}

int smr_catalog_failed_indexes(smr_catalog *c, smr_failed_index **out,
                               size_t *n, smr_error *err) {
  sqlite3_stmt *st;
  *out = NULL;
  *n = 0;
  if (prepare(c,
              "SELECT path, step, worker, error, err_offset FROM index_files"
              " WHERE status <> 0 OR error IS NOT NULL ORDER BY path",
              &st, err))
    return SMR_ERR_SQL;
  size_t cap = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (*n == cap) {
      cap = cap ? cap * 2 : 8;
      *out = smr_xrealloc(*out, cap * sizeof **out);
    }
    smr_failed_index *f = &(*out)[(*n)++];
    f->path = col_dup(st, 0);
    f->step = sqlite3_column_int64(st, 1);
    f->worker = col_dup(st, 2);
    f->message = col_dup(st, 3);
    f->offset = sqlite3_column_type(st, 4) == SQLITE_NULL
                    ? -1
                    : sqlite3_column_int64(st, 4);
  }
  sqlite3_finalize(st);
  return SMR_OK;
}

void smr_failed_indexes_free(smr_failed_index *f, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(f[i].path);
    free(f[i].worker);
    free(f[i].message);
  }
  free(f);
}

int smr_catalog_tensor_names(smr_catalog *c, smr_strv *out, smr_error *err) {
  sqlite3_stmt *st;
  if (prepare(c, "SELECT name FROM tensors ORDER BY name", &st, err))
    return SMR_ERR_SQL;
  while (sqlite3_step(st) == SQLITE_ROW)
    smr_strv_push(out, (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  return SMR_OK;
}

int64_t smr_catalog_tensor_id(smr_catalog *c, const char *name,
                              smr_error *err) {
  sqlite3_stmt *st = c->get_tensor;
  sqlite3_reset(st);
  sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
  int64_t id = -1;
  int r = sqlite3_step(st);
  if (r == SQLITE_ROW)
    id = sqlite3_column_int64(st, 0);
  else if (r != SQLITE_DONE)
    sql_fail(c, err, "query tensor");
  sqlite3_reset(st);
  return id;
}

int smr_catalog_meta_set(smr_catalog *c, const char *key, const char *value,
                         smr_error *err) {
  sqlite3_stmt *st;
  if (prepare(c, "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", &st,
              err))
    return SMR_ERR_SQL;
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
  int r = sqlite3_step(st);
  sqlite3_finalize(st);
  return r == SQLITE_DONE ? SMR_OK : sql_fail(c, err, "write meta");
}

char *smr_catalog_meta_get(smr_catalog *c, const char *key) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(c->db, "SELECT value FROM meta WHERE key = ?", -1, &st,
                         NULL) != SQLITE_OK)
    return NULL;
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  char *v = NULL;
  if (sqlite3_step(st) == SQLITE_ROW)
    v = col_dup(st, 0);
  sqlite3_finalize(st);
  return v;
}
