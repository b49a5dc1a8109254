/* step_entries.h - the catalog's entries of recently read steps, kept in
 * memory (trial_read.c's lookups by step).
 *
 * A value read asked the catalog for the tensor's entries at its step:
 * two SQLite queries under the trial's lock, about 7 µs each.  Rules in
 * lock step read every tensor of a step, so one query for all tensors of
 * the step answers all of them.  The entries of the last 16 steps asked
 * are kept, 16384 entries at most, until the catalog changes. */
#ifndef SMR_STEP_ENTRIES_H
#define SMR_STEP_ENTRIES_H

#include "trial/catalog.h"

typedef struct smr_step_entries smr_step_entries;

smr_step_entries *smr_step_entries_new(void);
void smr_step_entries_free(smr_step_entries *s);

/* Entries kept now, in all steps: at most 16384 (tests). */
size_t smr_step_entries_count(const smr_step_entries *s);

/* Forget every kept step: the catalog changed. */
void smr_step_entries_forget(smr_step_entries *s);

/* The entries of `tensor_id` at (mode, mode_step), as
 * smr_catalog_entries(c, tensor_id, mode, mode_step, ...) gives them
 * (out is the caller's, to smr_entries_free).  Not thread-safe: the
 * caller holds the lock it uses the catalog under. */
int smr_step_entries_get(smr_step_entries *s, smr_catalog *c, int64_t tensor_id,
                         int mode, int64_t mode_step, smr_entries *out,
                         smr_error *err);

#endif
