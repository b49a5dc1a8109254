/* statedb.c - the state file opened as untrusted input (see statedb.h). */
#include "trial/statedb.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char SMR_SCHEMA_CATALOG[] =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);"
    /* one row per index file seen; status 0 = read, 1 = failed */
    "CREATE TABLE IF NOT EXISTS index_files("
    " id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL, step INTEGER,"
    " worker TEXT, mode INTEGER, mode_step INTEGER, event_file TEXT,"
    " status INTEGER NOT NULL, error TEXT, err_offset INTEGER);"
    "CREATE INDEX IF NOT EXISTS index_files_mode"
    " ON index_files(mode, mode_step);"
    "CREATE TABLE IF NOT EXISTS tensors(id INTEGER PRIMARY KEY,"
    " name TEXT UNIQUE NOT NULL);"
    /* kind 0 raw value, 1 shape only, 2 saved reduction */
    "CREATE TABLE IF NOT EXISTS entries(tensor INTEGER NOT NULL,"
    " index_id INTEGER NOT NULL, kind INTEGER NOT NULL, reduction INTEGER,"
    " abs INTEGER, start INTEGER, length INTEGER, shape TEXT);"
    "CREATE INDEX IF NOT EXISTS entries_tensor ON entries(tensor, index_id);"
    "CREATE INDEX IF NOT EXISTS entries_index ON entries(index_id, tensor);";

const char SMR_SCHEMA_RULE_STATE[] =
    "CREATE TABLE IF NOT EXISTS rule_state(instance TEXT PRIMARY KEY,"
    " config_hash TEXT, last_step INTEGER, status INTEGER,"
    " triggered TEXT, skipped TEXT, evaluated INTEGER, violations INTEGER,"
    " datapoints INTEGER, last_trigger TEXT, impl_state TEXT, report TEXT,"
    " message TEXT, updated REAL)";

const char SMR_SCHEMA_ACTIONS[] =
    "CREATE TABLE IF NOT EXISTS action_log("
    " instance TEXT NOT NULL, action TEXT NOT NULL,"
    " trigger_ordinal INTEGER NOT NULL, step INTEGER NOT NULL,"
    " status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,"
    " detail TEXT, started REAL, finished REAL,"
    " PRIMARY KEY(instance, action, trigger_ordinal));"
    "CREATE TABLE IF NOT EXISTS action_target("
    " target TEXT PRIMARY KEY, pid INTEGER NOT NULL,"
    " start_ticks INTEGER NOT NULL, boot_id TEXT NOT NULL,"
    " start_wall REAL, seen REAL NOT NULL);";

#define WAY_OUT                                                                \
  "nothing in it was changed; remove it if it is yours, or pass --state "      \
  "PATH (a state file elsewhere) or --fresh"

static int refuse(smr_error *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int refuse(smr_error *err, const char *path, const char *fmt, ...) {
  char what[SMR_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return smr_error_set(err, SMR_ERR_FORMAT, path, -1,
                       "state file refused: %s; " WAY_OUT, what);
}

/* The file itself (and its journal files, when there): ours and only
 * ours.  A missing file is fine (it will be created). */
static int check_file(const char *path, const char *shown, smr_error *err) {
  struct stat st;
  if (lstat(path, &st) != 0)
    return SMR_OK;
  if (S_ISLNK(st.st_mode))
    return refuse(err, shown, "%s is a symbolic link", path);
  if (!S_ISREG(st.st_mode))
    return refuse(err, shown, "%s is not a regular file", path);
  if (st.st_uid != geteuid())
    return refuse(err, shown,
                  "%s belongs to uid %u, not to the user smrules runs as "
                  "(uid %u)",
                  path, (unsigned)st.st_uid, (unsigned)geteuid());
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return refuse(err, shown, "%s may be written by other users (mode %03o)",
                  path, (unsigned)(st.st_mode & 0777));
  if (st.st_nlink > 1)
    return refuse(err, shown, "%s has other hard links", path);
  return SMR_OK;
}

static int check_files(const char *path, smr_error *err) {
  static const char *const SUFFIX[] = {"", "-wal", "-shm", "-journal"};
  for (size_t i = 0; i < sizeof SUFFIX / sizeof *SUFFIX; i++) {
    char *p = smr_xasprintf("%s%s", path, SUFFIX[i]);
    int rc = check_file(p, path, err);
    free(p);
    if (rc)
      return rc;
  }
  return SMR_OK;
}

static void harden(sqlite3 *db) {
  sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
  sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)NULL);
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, (int *)NULL);
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_VIEW, 0, (int *)NULL);
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, (int *)NULL);
  sqlite3_exec(db, "PRAGMA trusted_schema=OFF", NULL, NULL, NULL);
}

/* The schema objects smrules creates, as SQLite stores them: built in a
 * private database from the statements above. */
static sqlite3 *reference_schema(void) {
  sqlite3 *ref = NULL;
  if (sqlite3_open_v2(":memory:", &ref, SQLITE_OPEN_READWRITE, NULL) !=
          SQLITE_OK ||
      sqlite3_exec(ref, SMR_SCHEMA_CATALOG, NULL, NULL, NULL) != SQLITE_OK ||
      sqlite3_exec(ref, SMR_SCHEMA_RULE_STATE, NULL, NULL, NULL) != SQLITE_OK ||
      sqlite3_exec(ref, SMR_SCHEMA_ACTIONS, NULL, NULL, NULL) != SQLITE_OK) {
    sqlite3_close(ref);
    return NULL;
  }
  return ref;
}

static bool in_reference(sqlite3 *ref, const char *type, const char *name,
                         const char *tbl, const char *sql) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(ref,
                         "SELECT 1 FROM sqlite_schema WHERE type = ?1 AND"
                         " name = ?2 AND tbl_name = ?3 AND sql IS ?4",
                         -1, &st, NULL) != SQLITE_OK)
    return false;
  sqlite3_bind_text(st, 1, type, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, tbl, -1, SQLITE_STATIC);
  if (sql)
    sqlite3_bind_text(st, 4, sql, -1, SQLITE_STATIC);
  bool found = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  return found;
}

static const char *text_or(sqlite3_stmt *st, int i, const char *dflt) {
  const char *t = (const char *)sqlite3_column_text(st, i);
  return t ? t : dflt;
}

/* A schema that cannot be read: locked by another smrules process that is
 * creating the file (SMR_ERR_SQL: the caller tries again), or not a
 * database at all (refused). */
static int unreadable(sqlite3 *db, const char *path, bool *busy,
                      smr_error *err) {
  int code = sqlite3_errcode(db) & 0xff;
  if (code == SQLITE_BUSY || code == SQLITE_LOCKED) {
    if (busy)
      *busy = true;
    return smr_error_set(err, SMR_ERR_SQL, path, -1, "state file: %s",
                         sqlite3_errmsg(db));
  }
  return refuse(err, path, "it is not a database smrules can read (%s)",
                sqlite3_errmsg(db));
}

/* Every object of the file's schema must be one smrules creates, with the
 * same definition: an added trigger, view, table or index, or a table of
 * ours redefined, is refused before anything is written. */
static int check_schema(sqlite3 *db, const char *path, bool *busy,
                        smr_error *err) {
  sqlite3 *ref = reference_schema();
  if (!ref)
    return smr_error_set(err, SMR_ERR_SQL, path, -1,
                         "cannot build the reference schema");
  sqlite3_stmt *st;
  int rc = SMR_OK;
  if (sqlite3_prepare_v2(db,
                         "SELECT type, name, tbl_name, sql FROM sqlite_schema",
                         -1, &st, NULL) != SQLITE_OK) {
    rc = unreadable(db, path, busy, err);
    sqlite3_close(ref);
    return rc;
  }
  int step;
  while (rc == SMR_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    const char *type = text_or(st, 0, "?"), *name = text_or(st, 1, "?");
    const char *sql = (const char *)sqlite3_column_text(st, 3);
    if (!in_reference(ref, type, name, text_or(st, 2, ""), sql))
      rc = refuse(err, path,
                  "its schema has %s '%s', which smrules does not create "
                  "(or defines it differently)",
                  type, name);
  }
  if (rc == SMR_OK && step != SQLITE_DONE)
    rc = unreadable(db, path, busy, err);
  sqlite3_finalize(st);
  sqlite3_close(ref);
  return rc;
}

int smr_statedb_open(const char *path, int flags, sqlite3 **db, bool *busy,
                     smr_error *err) {
  *db = NULL;
  if (busy)
    *busy = false;
  bool memory = strcmp(path, ":memory:") == 0;
  int rc = memory ? SMR_OK : check_files(path, err);
  if (rc)
    return rc;
  sqlite3 *d = NULL;
  if (sqlite3_open_v2(path, &d, flags | SQLITE_OPEN_NOFOLLOW, NULL) !=
      SQLITE_OK) {
    int sys = d ? sqlite3_system_errno(d) : 0;
    if (d && sqlite3_extended_errcode(d) == SQLITE_CANTOPEN_SYMLINK)
      rc = refuse(err, path, "it is a symbolic link");
    else
      rc = smr_error_set(err, SMR_ERR_SQL, path, -1, "cannot open: %s",
                         sys ? strerror(sys)
                         : d ? sqlite3_errmsg(d)
                             : "out of memory");
    sqlite3_close(d);
    return rc;
  }
  harden(d);
  sqlite3_busy_timeout(d, 5000);
  rc = memory ? SMR_OK : check_schema(d, path, busy, err);
  if (rc) {
    sqlite3_close(d);
    return rc;
  }
  *db = d;
  return SMR_OK;
}
