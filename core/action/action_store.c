/* action_store.c - the action log and the StopTraining targets, kept in
 * the trial's state database (or in memory): what makes every action run
 * exactly once per trigger across runs, and what lets a later run tell a
 * recycled pid from the training process it first saw. */
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "action/action.h"
#include "action/action_store.h"
#include "base/safefs.h"
#include "trial/statedb.h"

struct smr_act_store {
  sqlite3 *db;
  bool own;     /* our own connection to the state file */
  bool persist; /* false under --dry-run: nothing is written */
  pthread_mutex_t mu;
};

static double wall_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int smr_act_store_open(smr_act_store **out, sqlite3 *shared, bool persist,
                       smr_error *err) {
  smr_act_store *s = smr_xcalloc(1, sizeof *s);
  pthread_mutex_init(&s->mu, NULL);
  *out = s;
  s->persist = persist;
  const char *file = shared ? sqlite3_db_filename(shared, "main") : NULL;
  int flags =
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
  /* A connection of our own: the log is written in its own transactions,
   * whatever the catalog's connection is doing. */
  if (file && file[0]) {
    /* the state file is the trial's: opened as untrusted (statedb.h) */
    int rc = smr_statedb_open(file, flags, &s->db, NULL, err);
    if (rc != SMR_OK)
      return rc;
    s->own = true;
  } else if (shared) {
    s->db = shared;
  } else if (sqlite3_open_v2(":memory:", &s->db, flags, NULL) == SQLITE_OK) {
    s->own = true;
  }
  if (!s->db)
    return smr_error_set(err, SMR_ERR_SQL, "", -1, "action log: no database");
  sqlite3_busy_timeout(s->db, 10000);
  /* Committed, not flushed: a row survives our crash or kill, not the
   * machine's; flushing made every action wait for the disk
   * (docs/actions.md#the-action-log-never-twice). */
  sqlite3_exec(s->db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
  if (persist &&
      sqlite3_exec(s->db, SMR_SCHEMA_ACTIONS, NULL, NULL, NULL) != SQLITE_OK)
    return smr_error_set(err, SMR_ERR_SQL, file ? file : "", -1,
                         "action log: %s", sqlite3_errmsg(s->db));
  return SMR_OK;
}

void smr_act_store_close(smr_act_store *s) {
  if (!s)
    return;
  if (s->own)
    sqlite3_close(s->db);
  s->db = NULL;
  pthread_mutex_destroy(&s->mu);
  free(s);
}

bool smr_act_store_persists(const smr_act_store *s) {
  return s->persist;
}

static sqlite3_stmt *prep(smr_act_store *s, const char *sql) {
  sqlite3_stmt *st = NULL;
  if (!s->db || sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
    return NULL;
  return st;
}

/* "done at 2024-..." text of an earlier record, or NULL when none. */
char *smr_act_log_previous(smr_act_store *s, const char *inst, const char *key,
                           int64_t ordinal) {
  pthread_mutex_lock(&s->mu);
  sqlite3_stmt *st = prep(s, "SELECT status, datetime(started, 'unixepoch')"
                             " FROM action_log WHERE instance = ?"
                             " AND action = ? AND trigger_ordinal = ?");
  char *out = NULL;
  if (st) {
    sqlite3_bind_text(st, 1, inst, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, ordinal);
    if (sqlite3_step(st) == SQLITE_ROW) {
      const char *status = (const char *)sqlite3_column_text(st, 0);
      const char *when = (const char *)sqlite3_column_text(st, 1);
      out = smr_xasprintf("%s in an earlier run (started %s UTC)",
                          strcmp(status ? status : "", "running") == 0
                              ? "started (outcome unknown)"
                          : status ? status
                                   : "?",
                          when ? when : "?");
    }
    sqlite3_finalize(st);
  }
  pthread_mutex_unlock(&s->mu);
  return out;
}

/* Claims the action: false when a row exists already (another run). */
bool smr_act_log_begin(smr_act_store *s, const char *inst, const char *key,
                       int64_t ordinal, int64_t step) {
  pthread_mutex_lock(&s->mu);
  sqlite3_stmt *st = prep(s, "INSERT INTO action_log(instance, action,"
                             " trigger_ordinal, step, status, started)"
                             " VALUES(?, ?, ?, ?, 'running', ?)");
  bool claimed = false;
  if (st) {
    sqlite3_bind_text(st, 1, inst, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, ordinal);
    sqlite3_bind_int64(st, 4, step);
    sqlite3_bind_double(st, 5, wall_seconds());
    int rc = sqlite3_step(st);
    claimed = rc == SQLITE_DONE;
    if (rc != SQLITE_DONE && rc != SQLITE_CONSTRAINT)
      fprintf(stderr, "smrules: action log: %s\n", sqlite3_errmsg(s->db));
    sqlite3_finalize(st);
  }
  pthread_mutex_unlock(&s->mu);
  return claimed;
}

void smr_act_log_end(smr_act_store *s, const char *inst, const char *key,
                     int64_t ordinal, const char *status, int attempts,
                     const char *detail) {
  pthread_mutex_lock(&s->mu);
  sqlite3_stmt *st = prep(s, "UPDATE action_log SET status = ?,"
                             " attempts = ?, detail = ?, finished = ?"
                             " WHERE instance = ? AND action = ?"
                             " AND trigger_ordinal = ?");
  if (st) {
    sqlite3_bind_text(st, 1, status, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, attempts);
    sqlite3_bind_text(st, 3, detail, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 4, wall_seconds());
    sqlite3_bind_text(st, 5, inst, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 7, ordinal);
    if (sqlite3_step(st) != SQLITE_DONE)
      fprintf(stderr, "smrules: action log: %s\n", sqlite3_errmsg(s->db));
    sqlite3_finalize(st);
  }
  pthread_mutex_unlock(&s->mu);
}

bool smr_act_target_load(smr_act_store *s, const char *key, smr_proc_id *id,
                         double *seen_at) {
  pthread_mutex_lock(&s->mu);
  sqlite3_stmt *st = prep(s, "SELECT pid, start_ticks, boot_id, start_wall,"
                             " seen FROM action_target WHERE target = ?");
  bool found = false;
  if (st) {
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) {
      memset(id, 0, sizeof *id);
      id->pid = sqlite3_column_int64(st, 0);
      id->start_ticks = (uint64_t)sqlite3_column_int64(st, 1);
      const char *b = (const char *)sqlite3_column_text(st, 2);
      snprintf(id->boot_id, sizeof id->boot_id, "%s", b ? b : "");
      id->start_wall = sqlite3_column_double(st, 3);
      *seen_at = sqlite3_column_double(st, 4);
      found = true;
    }
    sqlite3_finalize(st);
  }
  pthread_mutex_unlock(&s->mu);
  return found;
}

void smr_act_target_save(smr_act_store *s, const char *key,
                         const smr_proc_id *id) {
  if (!s->persist)
    return;
  pthread_mutex_lock(&s->mu);
  sqlite3_stmt *st = prep(s, "INSERT OR REPLACE INTO action_target(target,"
                             " pid, start_ticks, boot_id, start_wall, seen)"
                             " VALUES(?, ?, ?, ?, ?, ?)");
  if (st) {
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, id->pid);
    sqlite3_bind_int64(st, 3, (sqlite3_int64)id->start_ticks);
    sqlite3_bind_text(st, 4, id->boot_id, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 5, id->start_wall);
    sqlite3_bind_double(st, 6, wall_seconds());
    if (sqlite3_step(st) != SQLITE_DONE)
      fprintf(stderr, "smrules: action log: %s\n", sqlite3_errmsg(s->db));
    sqlite3_finalize(st);
  }
  pthread_mutex_unlock(&s->mu);
}

/* ------------------------------------------- a log inside the trial */

/* How many actions the log at `path` records, and how many of them
 * StopTraining; false with *why when it cannot be read.  Opened read-only
 * as untrusted (statedb.h): nothing in the trial is changed. */
static bool count_logged(const char *path, int64_t *n, int64_t *stops,
                         char *why, size_t nwhy) {
  sqlite3 *db = NULL;
  smr_error e;
  smr_error_clear(&e);
  int rc = smr_statedb_open(path, SQLITE_OPEN_READONLY, &db, NULL, &e);
  if (rc != SMR_OK) {
    snprintf(why, nwhy, "%s", e.msg);
    return false;
  }
  sqlite3_stmt *st = NULL;
  *n = *stops = 0;
  if (sqlite3_prepare_v2(db,
                         "SELECT count(*), total(action LIKE 'StopTraining%')"
                         " FROM action_log",
                         -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    *n = sqlite3_column_int64(st, 0);
    *stops = (int64_t)sqlite3_column_double(st, 1);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return true;
}

void smr_actions_note_trial_log(const char *trial_dir, const char *in_use) {
  if (!trial_dir || !trial_dir[0])
    return;
  char *dir = smr_xasprintf("%s/.smrules", trial_dir);
  char *file = smr_xasprintf("%s/state.db", dir);
  char *real_use = in_use && in_use[0] ? realpath(in_use, NULL) : NULL;
  char *real_file = realpath(file, NULL);
  bool chosen = real_use && real_file && !strcmp(real_use, real_file);
  int fd = -1;
  struct stat st;
  smr_error e;
  smr_error_clear(&e);
  if (!chosen && lstat(file, &st) == 0) {
    char why[SMR_ERR_MSG_MAX] = "";
    int64_t n = 0, stops = 0;
    /* .smrules itself a link: not followed out of the trial */
    bool read = smr_safe_dir_open(dir, trial_dir, false, &fd, &e) == SMR_OK &&
                count_logged(file, &n, &stops, why, sizeof why);
    if (!read && !why[0])
      snprintf(why, sizeof why, "%s", e.msg);
    fprintf(stderr,
            "smrules: note: %s is a state file inside the trial folder, "
            "which the training job can write: it is not trusted as a "
            "record of actions",
            file);
    if (read)
      fprintf(stderr,
              " (the %" PRId64 " actions it says were done, %" PRId64
              " of them StopTraining, will be done again if their rules "
              "trigger)",
              n, stops);
    else
      fprintf(stderr, " (and cannot be read: %s)", why);
    fprintf(stderr,
            "; this trial's state is kept in %s (remove the file to "
            "silence this note)\n",
            in_use && in_use[0] ? in_use : "memory");
  }
  if (fd >= 0)
    close(fd);
  free(real_use);
  free(real_file);
  free(file);
  free(dir);
}
