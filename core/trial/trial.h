/* trial.h - a SageMaker Debugger trial as smdebug's reader sees it
 * (docs/formats.md): steps, modes, workers, collections, tensors,
 * availability, and tensor values read through the catalog.
 *
 * Offline (the default) a trial counts as finished, so every known step is
 * complete (Decision F11).  With `live`, only training_job_end.ts ends
 * training and incomplete steps behave as in smdebug. */
#ifndef SMR_TRIAL_H
#define SMR_TRIAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "base/regex.h"
#include "format/index.h"
#include "format/tensor.h"
#include "trial/tb_trial.h"

typedef struct smr_trial smr_trial;

/* What a trial folder holds (smr_trial_opts.format). */
enum {
  SMR_TRIAL_AUTO = 0,       /* smdebug's index files, else TensorBoard events */
  SMR_TRIAL_SMDEBUG = 1,    /* docs/formats.md */
  SMR_TRIAL_TENSORBOARD = 2 /* docs/tensorboard.md */
};

typedef struct smr_trial_opts {
  const char *state_path; /* NULL: smr_location_state_dir()/state.db */
  bool fresh;             /* private in-memory catalog, nothing stored */
  bool live;              /* only the end marker ends training */
  int format;             /* SMR_TRIAL_AUTO, _SMDEBUG, _TENSORBOARD */
  /* rules.yaml `tensorboard:` (NULL: defaults); kept, not copied: it must
   * outlive the trial */
  const smr_tb_settings *tensorboard;
} smr_trial_opts;

int smr_trial_open(const char *dir, const smr_trial_opts *opts, smr_trial **out,
                   smr_error *err);
/* Read index files that are new since the last refresh; re-check the end
 * marker and collections.  *added (optional) receives the count. */
int smr_trial_refresh(smr_trial *t, size_t *added, smr_error *err);
void smr_trial_close(smr_trial *t);

/* The reader gate of a live trial (trial_gate.c).  In a live run each rule
 * is evaluated by a thread of its own while the watch refreshes the trial
 * (run/runner.h), so a refresh must not rewrite the step model, workers or
 * collections under a rule that is reading them.  A rule thread marks
 * itself with smr_trial_reader_thread; on such a thread
 * smr_trial_reader_enter takes the trial's gate for reading (once: later
 * calls are free) before any read, and smr_trial_reader_leave gives it back
 * when the rule's call is over, or sooner, where nothing read is held (a
 * Lua rule at each tick of its count hook).  A refresh of a live trial
 * takes the gate for writing: it waits for the rules inside a read, never
 * for a rule computing on what it read.  On other threads (the caller's,
 * the data helpers') and for a trial that is not live both are no-ops. */
void smr_trial_reader_thread(bool rule_thread);
void smr_trial_reader_enter(smr_trial *t);
void smr_trial_reader_leave(void);

const char *smr_trial_root(const smr_trial *t);
/* Bytes of trial files read so far (index, event and collection files). */
uint64_t smr_trial_bytes_read(const smr_trial *t);
/* Where the catalog lives (":memory:" when it could not be stored). */
const char *smr_trial_state_path(const smr_trial *t);
struct smr_catalog *smr_trial_catalog(smr_trial *t);
bool smr_trial_end_marker(const smr_trial *t);
/* Whether the trial is a TensorBoard log directory (docs/tensorboard.md). */
bool smr_trial_is_tensorboard(const smr_trial *t);
/* "auto", "smdebug", "tensorboard" (--format) -> SMR_TRIAL_*; -1 else. */
int smr_trial_format_parse(const char *name);
bool smr_trial_loaded_all_steps(const smr_trial *t);
int64_t smr_trial_last_complete_step(const smr_trial *t);
int smr_trial_num_workers(const smr_trial *t);
/* How many steps' tensor records fit in the record cache that rule
 * threads share (an S3 trial's), at the trial's mean bytes per step; 0
 * when the trial has no shared cache (local: the page cache serves). */
size_t smr_trial_cached_steps(smr_trial *t);
/* The statistics cache the rules reading this trial share
 * (trial/stats_cache.h); NULL while a live trial has no end marker. */
struct smr_stats_cache *smr_trial_stats_cache(smr_trial *t);
/* Read ahead (remote trials only; 0 turns it off): after a value of a
 * tensor is read at a step, its records at the next `steps` steps (before
 * `end_step` when >= 0) are fetched in the background, once each. */
void smr_trial_set_prefetch(smr_trial *t, size_t steps, int64_t end_step);
/* ... and never past global step `last` (INT64_MAX: no limit), so that
 * rules reading ahead of the others do not drag the read-ahead with them
 * beyond what the record cache holds. */
void smr_trial_set_prefetch_horizon(smr_trial *t, int64_t last);
/* Several rules read this trial side by side: records one reads serve the
 * others (smr_source_share_records). */
void smr_trial_share_records(smr_trial *t, bool on);
/* Values read from now on are placed so that their elements start on a
 * multiple of SMR_VALUE_ALIGN bytes where the source reads them into a
 * buffer (source.h: smr_source_read_range_aligned), learned per tensor
 * from where its elements lay in its last record: for the Python package,
 * whose NumPy copies misaligned arrays piece by piece.  Only where bytes
 * land changes, never a value. */
void smr_trial_align_values(smr_trial *t, bool on);
/* A value read from this trial stays held past the rule's turn
 * (api->value_keep): true when its record is now counted in the run's
 * record budget (smr_range_keep in source.h), false when not. */
bool smr_trial_value_keep(smr_tensor *t);
const smr_strv *smr_trial_workers(const smr_trial *t);
/* The number of workers that have written steps; when i is below it,
 * the i-th (by name) and its latest global step. */
size_t smr_trial_worker_latest(const smr_trial *t, size_t i,
                               const char **worker, int64_t *step);

/* Problems met while reading index and collections files. */
typedef struct smr_trial_problem {
  char *file;
  int64_t offset;
  char *message;
} smr_trial_problem;
size_t smr_trial_problems(const smr_trial *t, const smr_trial_problem **out);

/* ---- steps ---- */
/* Steps of `mode`: global steps for SMR_MODE_GLOBAL, else mode steps.
 * Only complete ones unless include_incomplete. */
void smr_trial_steps(const smr_trial *t, int mode, bool include_incomplete,
                     smr_i64v *out);
/* Modes that have steps (ascending mode number, GLOBAL included). */
void smr_trial_modes(const smr_trial *t, int modes[4], size_t *n);
/* mode/mode_step of a global step; false when unknown. */
bool smr_trial_step_mode(const smr_trial *t, int64_t step, int *mode,
                         int64_t *mode_step);
/* Global step of (mode, mode_step); false when unknown. */
bool smr_trial_global_step(const smr_trial *t, int mode, int64_t mode_step,
                           int64_t *step);
bool smr_trial_step_complete(const smr_trial *t, int64_t global_step);

typedef enum smr_availability {
  SMR_AVAILABLE = 0,
  SMR_NOT_YET_AVAILABLE = 1,
  SMR_UNAVAILABLE = 2
} smr_availability;
const char *smr_availability_name(smr_availability a);
smr_availability smr_trial_has_passed_step(const smr_trial *t, int64_t step,
                                           int mode);

/* ---- collections ---- */
/* Names of all collections (sorted). */
void smr_trial_collection_names(const smr_trial *t, smr_strv *out);
/* members(c) ∩ saved tensor names, sorted (docs/formats.md#collections-files);
 * empty for unknown c.  The collection's regexes are matched as
 * smr_trial_tensor_names_regex does, counted in `meter` (NULL: none). */
int smr_trial_collection_members(smr_trial *t, const char *collection,
                                 smr_regex_meter *meter, smr_strv *out,
                                 smr_error *err);
/* Non-NULL when a collections file could not be read. */
const char *smr_trial_collections_error(const smr_trial *t);

/* ---- tensors ---- */
int smr_trial_tensor_names(smr_trial *t, smr_strv *out, smr_error *err);
/* Names in which some of the regexes searches successfully.  With a
 * `meter` (NULL: none) the matching is counted in it and stops, with
 * meter->exhausted set and `out` incomplete, when its budget runs out
 * (base/regex.h). */
int smr_trial_tensor_names_regex(smr_trial *t, const char *const *regexes,
                                 size_t n, smr_regex_meter *meter,
                                 smr_strv *out, smr_error *err);
bool smr_trial_has_tensor(smr_trial *t, const char *name);

/* One (step, worker) at which a tensor has something saved. */
typedef struct smr_tensor_step {
  int64_t step; /* global */
  int mode;
  int64_t mode_step;
  char *worker;
  bool has_value, has_shape;
  unsigned reductions; /* bit (r*2 + abs) per saved reduction */
} smr_tensor_step;
typedef struct smr_tensor_steps {
  smr_tensor_step *v;
  size_t n;
} smr_tensor_steps;
/* Everything saved for a tensor, ordered by (global step, worker). */
int smr_trial_tensor_steps(smr_trial *t, const char *name,
                           smr_tensor_steps *out, smr_error *err);
void smr_tensor_steps_free(smr_tensor_steps *s);
/* Distinct steps of a tensor in `mode` (global steps for GLOBAL, else mode
 * steps), complete ones only unless include_incomplete. */
int smr_trial_tensor_step_list(smr_trial *t, const char *name, int mode,
                               bool include_incomplete, smr_i64v *out,
                               smr_error *err);

/* Where a value came from. */
typedef struct smr_value_loc {
  int64_t step; /* global */
  int mode;
  int64_t mode_step;
  char worker[256];
} smr_value_loc;

/* The value of a tensor at `step` (a global step when mode is GLOBAL,
 * else a mode step of `mode`) from `worker` (NULL: the smallest worker
 * name holding it).  Returns SMR_OK or an availability status
 * (SMR_TENSOR_UNAVAILABLE, SMR_STEP_UNAVAILABLE, SMR_STEP_NOT_YET,
 * SMR_NO_MORE_DATA, SMR_TENSOR_UNAVAILABLE_FOR_STEP, SMR_INVALID_WORKER)
 * or a read error (SMR_ERR_FORMAT/SMR_ERR_IO naming file and offset). */
int smr_trial_value(smr_trial *t, const char *name, int64_t step, int mode,
                    const char *worker, smr_tensor *out, smr_value_loc *loc,
                    smr_error *err);
/* The first elements of the default worker's value (at most max_elems,
 * shape and dtype the value's, out->count the elements held) read from
 * the first and last bytes of its record alone: SMR_OK, or
 * SMR_ERR_FORMAT when that cannot be done exactly or would not pay (a
 * small record, a TensorBoard or S3 trial, a real payload checksum that only
 * the whole record can verify, any layout but the plain one, any doubt): then
 * read the whole value with smr_trial_value, which also says why it is not
 * there.  Nothing is reported; err is not set. */
int smr_trial_value_head(smr_trial *t, const char *name, int64_t step, int mode,
                         size_t max_elems, smr_tensor *out, smr_value_loc *loc);
/* Runs of the default worker's value at (step, mode) without reading the
 * rest of its record: nruns runs of run_elems elements of elem_size
 * bytes each, from elements at[0..nruns-1], copied back to back into
 * dest.  SMR_OK, or SMR_ERR_FORMAT when the runs cannot be read that way
 * (a remote or TensorBoard trial, a record only a whole read can check, a
 * run outside the value, another element size): the caller reads the
 * value whole. */
int smr_trial_value_runs(smr_trial *t, const char *name, int64_t step, int mode,
                         const int64_t *at, size_t nruns, size_t run_elems,
                         size_t elem_size, void *dest);
/* The elements of the default worker's value at (step, mode) streamed in
 * pieces of at most `piece` bytes (and piece_elems elements, unless 0),
 * without holding its record: each(arg,
 * offset, bytes, len) for every piece in order (offset and len in bytes,
 * whole elements).  Only where the record is the plain case
 * smr_trial_value_head checks (local, framing, tag, the fields around the
 * elements) and its value numeric, at least one element, its
 * tensor_content the elements; with `like` (may be NULL), also float32 or
 * float64 with like's dtype, stored dtype, shape and byte count.  Before
 * the first call, *head (may be NULL) gets the value as smr_trial_value
 * decodes it but its elements (data NULL, count and nbytes the whole
 * value's) and *loc (may be NULL) where it was found.  Returns SMR_OK; the
 * status smr_trial_value gives, without reading, for a value that is not
 * there (SMR_TENSOR_UNAVAILABLE_FOR_STEP, SMR_STEP_UNAVAILABLE, ...);
 * SMR_ERR_FORMAT for any other value, before any call or, when a piece
 * cannot be read, after some: the caller reads the value whole (which
 * says why when it cannot); or each's nonzero status, which stops the
 * reads (SMR_ERR_USAGE without piece or each).  The pieces are read into
 * one buffer of the call (smr_source_read_into), not the record pools. */
typedef int (*smr_piece_fn)(void *arg, uint64_t off, const uint8_t *bytes,
                            size_t len);
int smr_trial_value_pieces(smr_trial *t, const char *name, int64_t step,
                           int mode, const smr_tensor *like, size_t piece,
                           size_t piece_elems, smr_piece_fn each, void *arg,
                           smr_tensor *head, smr_value_loc *loc);
/* A reduction: the saved one when present (*saved = true), else computed
 * from the value. */
int smr_trial_reduction(smr_trial *t, const char *name, int64_t step, int mode,
                        const char *worker, int reduction, bool abs,
                        double *out, bool *saved, smr_value_loc *loc,
                        smr_error *err);
/* Whether smr_trial_reduction would answer with the saved reduction (of
 * the default worker): false when none is saved there, or on any
 * failure. */
bool smr_trial_reduction_saved(smr_trial *t, const char *name, int64_t step,
                               int mode, int reduction, bool abs);
/* The shape: the saved shape when present, else the value's shape. */
int smr_trial_shape(smr_trial *t, const char *name, int64_t step, int mode,
                    const char *worker, int *ndim, int64_t shape[SMR_MAX_DIMS],
                    smr_error *err);

#endif
