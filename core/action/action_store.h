/* action_store.h - the action log (exactly once per trigger, across
 * runs) and the StopTraining target identities, in the state database. */
#ifndef SMR_ACTION_STORE_H
#define SMR_ACTION_STORE_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "action/action_int.h"

/* Opens the store on its own connection to `shared`'s file (or on
 * `shared` itself when it is in memory, or on a new in-memory database
 * when NULL).  `persist` false (--dry-run): nothing is written. */
int smr_act_store_open(smr_act_store **out, sqlite3 *shared, bool persist,
                       smr_error *err);
void smr_act_store_close(smr_act_store *s);
bool smr_act_store_persists(const smr_act_store *s);

/* "done in an earlier run (started ...)" for an action already logged at
 * this trigger, or NULL. */
char *smr_act_log_previous(smr_act_store *s, const char *inst, const char *key,
                           int64_t ordinal);
/* Claims the action: false when a row exists already (another run). */
bool smr_act_log_begin(smr_act_store *s, const char *inst, const char *key,
                       int64_t ordinal, int64_t step);
void smr_act_log_end(smr_act_store *s, const char *inst, const char *key,
                     int64_t ordinal, const char *status, int attempts,
                     const char *detail);

/* The identity of a StopTraining target as first seen, kept with the
 * action log so a later run can tell a recycled pid. */
bool smr_act_target_load(smr_act_store *s, const char *key, smr_proc_id *id,
                         double *seen_at);
void smr_act_target_save(smr_act_store *s, const char *key,
                         const smr_proc_id *id);

#endif
