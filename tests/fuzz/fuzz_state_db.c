/* fuzz_state_db.c - libFuzzer target for the state file (.smrules/
 * state.db, which anyone who can write the trial can replace): the input
 * is written as the database file, then opened as smrules opens it
 * (trial/statedb.c: ownership, schema check, defensive mode) and, when it
 * is accepted, every stored rule state is loaded.  A refusal must explain
 * itself; an accepted file must load without crashing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "trial/catalog.h"
#include "trial/state.h"

static char dir[64];

static void remove_files(const char *path) {
  static const char *const SUFFIX[] = {"", "-wal", "-shm", "-journal"};
  for (size_t i = 0; i < sizeof SUFFIX / sizeof *SUFFIX; i++) {
    char p[128];
    snprintf(p, sizeof p, "%s%s", path, SUFFIX[i]);
    unlink(p);
  }
}

static void load_every_state(sqlite3 *db) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT instance FROM rule_state LIMIT 50", -1,
                         &st, NULL) != SQLITE_OK)
    return;
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(st, 0);
    smr_rule_state s;
    smr_error err;
    if (name && smr_state_load(db, name, &s, &err) == 1)
      smr_rule_state_free(&s);
  }
  sqlite3_finalize(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "/tmp/fuzz_state_db.XXXXXX");
    if (!mkdtemp(dir))
      abort();
  }
  char path[128];
  snprintf(path, sizeof path, "%s/state.db", dir);
  remove_files(path);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
    abort();
  chmod(path, 0600);
  smr_catalog *c = NULL;
  smr_error err;
  smr_error_clear(&err);
  if (smr_catalog_open(path, "/fuzz-root", &c, &err) == SMR_OK) {
    sqlite3 *db = smr_catalog_db(c);
    if (smr_state_init(db, &err) == SMR_OK)
      load_every_state(db);
    smr_catalog_close(c);
  } else if (err.msg[0] == '\0') {
    abort(); /* every failure must explain itself */
  }
  remove_files(path);
  return 0;
}
