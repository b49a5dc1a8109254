/* statedb.h - opening the state file (.smrules/state.db) as untrusted
 * input.  Whoever can write the trial folder can write this file: it is
 * opened only when it is a regular file of smrules' own user that nobody
 * else may write, without following a link, with SQLite's defensive mode,
 * untrusted schema, triggers and views off -- and only when everything in
 * its schema is something smrules itself creates (the statements below). */
#ifndef SMR_STATEDB_H
#define SMR_STATEDB_H

#include <stdbool.h>

#include "base/common.h"

typedef struct sqlite3 sqlite3;

/* The tables of the state file, one string per owner module. */
extern const char SMR_SCHEMA_CATALOG[];    /* trial/catalog.c */
extern const char SMR_SCHEMA_RULE_STATE[]; /* trial/state.c */
extern const char SMR_SCHEMA_ACTIONS[];    /* action/action.c */

/* Opens `path` (":memory:" for a private database) with `flags`
 * (SQLITE_OPEN_*; NOFOLLOW is added).  A file that is a link, is not a
 * regular file, belongs to another user, may be written by others or
 * holds schema objects smrules does not create is refused with
 * SMR_ERR_FORMAT and an error saying which and what to do; nothing in it
 * is changed.  Other failures to open are SMR_ERR_SQL with the system's
 * reason (errno) when there is one; *busy (may be NULL) is set when the
 * file was locked by another process creating it (worth trying again). */
int smr_statedb_open(const char *path, int flags, sqlite3 **db, bool *busy,
                     smr_error *err);

#endif
