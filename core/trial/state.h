/* state.h - what a rule instance has done so far, kept in the catalog's
 * SQLite database so a later run evaluates only new steps and never
 * repeats an action. */
#ifndef SMR_STATE_H
#define SMR_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/common.h"

typedef struct sqlite3 sqlite3;

typedef struct smr_rule_state {
  char *config_hash; /* the instance's configuration it belongs to */
  int64_t last_step; /* last evaluated global step, -1 none */
  int status;
  smr_i64v triggered, skipped;
  int64_t evaluated, violations, datapoints;
  char *last_trigger; /* JSON {"step":..,"violations":[..]} or NULL */
  char *impl_state;   /* rule's own serialized state or NULL */
  char *report;       /* last full report JSON */
  char *message;
} smr_rule_state;

int smr_state_init(sqlite3 *db, smr_error *err);
/* 1 found, 0 none, negative on error. */
int smr_state_load(sqlite3 *db, const char *instance, smr_rule_state *out,
                   smr_error *err);
int smr_state_save(sqlite3 *db, const char *instance, const smr_rule_state *s,
                   smr_error *err);
void smr_rule_state_free(smr_rule_state *s);

#endif
