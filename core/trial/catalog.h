/* catalog.h - the SQLite catalog of a trial: which index files were read
 * (and which failed, with why), steps with their mode and workers, tensors
 * and where each (tensor, step, worker) entry lives.  It holds no tensor
 * data.  Opening a trial again only adds index files that are new.
 * The same database file also holds rule state (see state.h), so the
 * connection is shared through smr_catalog_db(). */
#ifndef SMR_CATALOG_H
#define SMR_CATALOG_H

#include <stdbool.h>
#include <stdint.h>

#include "base/common.h"
#include "format/index.h"

typedef struct smr_catalog smr_catalog;
typedef struct sqlite3 sqlite3;

/* Open (creating if needed) the catalog at `path` (":memory:" for a
 * private in-memory one) for the trial whose canonical root is `root`.
 * A database built for another root or schema version is emptied. */
int smr_catalog_open(const char *path, const char *root, smr_catalog **out,
                     smr_error *err);
void smr_catalog_close(smr_catalog *c);
sqlite3 *smr_catalog_db(smr_catalog *c);

int smr_catalog_begin(smr_catalog *c, smr_error *err);
int smr_catalog_commit(smr_catalog *c, smr_error *err);
void smr_catalog_rollback(smr_catalog *c);
/* Forget everything about the trial (it was rewritten). */
int smr_catalog_reset(smr_catalog *c, smr_error *err);

/* Paths of every index file already recorded (read or failed). */
int smr_catalog_index_paths(smr_catalog *c, smr_strv *out, smr_error *err);
/* Record one index file: parsed (`ix` non-NULL) or failed (`failure`). */
int smr_catalog_add_index(smr_catalog *c, const char *path, int64_t step,
                          const char *worker, const smr_index *ix,
                          const smr_error *failure, smr_error *err);

/* Kinds of entries. */
enum { SMR_ENTRY_RAW = 0, SMR_ENTRY_SHAPE = 1, SMR_ENTRY_REDUCTION = 2 };
/* Stored only: an index entry whose place is not valid (the why is kept
 * in the shape column); read back as a raw entry with `problem` set. */
enum { SMR_ENTRY_BAD = 3 };

typedef struct smr_entry {
  int64_t step; /* global step */
  int mode;
  int64_t mode_step;
  char *worker;
  int kind;
  int reduction; /* SMR_RED_* for reductions */
  bool abs;
  int64_t start, length; /* raw and reduction entries */
  char *event_file;      /* relative path */
  char *index_path;      /* the index file that listed it */
  char *problem;         /* why its values cannot be read, or NULL */
  int ndim;              /* shape entries */
  int64_t shape[SMR_MAX_DIMS];
  int64_t tensor; /* catalog id */
} smr_entry;

typedef struct smr_entries {
  smr_entry *v;
  size_t n, cap;
} smr_entries;
void smr_entries_free(smr_entries *e);

/* Steps as recorded per (index file): one row per readable index file. */
typedef struct smr_step_row {
  int64_t step;
  int mode;
  int64_t mode_step;
  char *worker;
} smr_step_row;
int smr_catalog_step_rows(smr_catalog *c, smr_step_row **rows, size_t *n,
                          smr_error *err);
void smr_step_rows_free(smr_step_row *rows, size_t n);

/* Index files that failed to parse: (path, step, worker, message). */
typedef struct smr_failed_index {
  char *path, *worker, *message;
  int64_t step, offset;
} smr_failed_index;
int smr_catalog_failed_indexes(smr_catalog *c, smr_failed_index **out,
                               size_t *n, smr_error *err);
void smr_failed_indexes_free(smr_failed_index *f, size_t n);

/* Sorted names of all tensors (reductions folded into their base). */
int smr_catalog_tensor_names(smr_catalog *c, smr_strv *out, smr_error *err);
/* Tensor id, or -1 when the name was never seen. */
int64_t smr_catalog_tensor_id(smr_catalog *c, const char *name, smr_error *err);
/* Entries of a tensor; mode 0 = any mode, mode_step < 0 = any step. */
int smr_catalog_entries(smr_catalog *c, int64_t tensor_id, int mode,
                        int64_t mode_step, smr_entries *out, smr_error *err);

/* Entries of every tensor at (mode, mode_step), each tensor's in the
 * order smr_catalog_entries gives them; *all false (and none) when there
 * are more than max. */
int smr_catalog_step_entries(smr_catalog *c, int mode, int64_t mode_step,
                             size_t max, smr_entries *out, bool *all,
                             smr_error *err);

/* Bytes of all tensor-value records (kind 0) and the number of distinct
 * steps that hold them. */
int smr_catalog_value_bytes(smr_catalog *c, int64_t *bytes, int64_t *steps,
                            smr_error *err);

/* Key/value metadata (e.g. trial facts, schema). */
int smr_catalog_meta_set(smr_catalog *c, const char *key, const char *value,
                         smr_error *err);
char *smr_catalog_meta_get(smr_catalog *c, const char *key);

#endif
