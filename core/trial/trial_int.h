/* trial_int.h - the trial's insides, private to core/trial/.
 *
 * A trial (trial.h) is read by five files, one job each:
 *   trial_load.c      open, refresh, close; the state file; which layout
 *                     (smdebug's or a TensorBoard folder, tb_trial.h)
 *                     reads the trial, and the TensorBoard hooks
 *   layout_smdebug.c  smdebug's layout: index files into the catalog,
 *                     collections files
 *   trial_steps.c     the step model built from the catalog: steps,
 *                     modes, workers, completeness, availability
 *   trial_names.c     tensor names and compiled patterns kept in memory;
 *                     selection by pattern and by collection
 *   trial_read.c      a tensor's catalog entries (its id kept in memory),
 *                     its steps; values, reductions and shapes; read-ahead
 *
 * The one lock, `mu`, guards the catalog connection (one query at a
 * time: SQLite's prepared statements are shared) and what is kept in
 * memory beside it: `names`, `ids`, `regexes`, `step_entries`, the
 * read-ahead fields and the step-bytes estimate.  Refresh holds it
 * while it rewrites the rest (steps, workers, collections, problems);
 * those are read without it, as smdebug's reader does, by the thread
 * that refreshes or between refreshes.  Rules evaluated in parallel
 * serialize here only for the short catalog lookups, never while a value
 * is read or decoded. */
#ifndef SMR_TRIAL_INT_H
#define SMR_TRIAL_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/common.h"
#include "base/regex.h"
#include "format/index.h"
#include "source/source.h"
#include "trial/catalog.h"
#include "trial/stats_cache.h"
#include "trial/step_entries.h"
#include "trial/tb_trial.h"
#include "trial/trial.h"

/* SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW default
 * (docs/formats.md#complete-steps-and-the-end-of-training). */
#define INCOMPLETE_STEP_WAIT_WINDOW 1000

/* 24 bytes: a TensorBoard folder of 1 M scalars may have 200,000 steps */
typedef struct step_info {
  int64_t step;
  int64_t mode_step;
  int32_t mode;
  int32_t nworkers;
} step_info;

#define TENSOR_ID_SLOTS 1024
#define REGEX_SLOTS 64

#define VALUE_AT_SLOTS 256

struct smr_trial {
  smr_source *src;
  smr_catalog *cat;
  char *state_path;
  bool live, marker, loaded_all_steps;
  int num_workers;
  smr_strv workers;
  smr_collections colls;
  char *collections_error;
  /* "<dir>/<step digits>" of the first index file the last refresh left
   * out to read again (layout_smdebug.c), or NULL */
  char *index_retry;
  bool index_listed; /* a listing of index files succeeded in this process */
  smr_trial_problem *problems;
  size_t nproblems, capproblems;
  step_info *steps; /* ascending global step */
  size_t nsteps;
  /* the workers index files name (sorted) and each one's latest global
   * step, for stragglers and the metrics */
  smr_strv row_workers;
  int64_t *row_worker_latest;
  /* per mode 1..3, its steps (indexes in steps) ordered by mode step,
   * then global step: the step queries are a binary search, not a scan
   * per call; the key is read from steps (4 bytes a step, not 16) */
  uint32_t *by_mode[5];
  size_t nby_mode[5];
  int64_t last_complete_step;
  smr_strv names; /* cached tensor names */
  bool names_valid;
  smr_step_entries *step_entries; /* under mu; forgotten with `names` */
  /* tensor name -> catalog id, as looked up (under mu): a value read
   * asked the catalog for the id each time, about 4 % of the twelve
   * rules' CPU time.  Cleared with `names` when the catalog changes. */
  struct id_slot {
    char *name; /* NULL: empty */
    int64_t id;
  } ids[TENSOR_ID_SLOTS];
  /* Compiled regular expressions of collections and rules, by pattern
   * (under mu): rules select their tensors at every step, and compiling
   * (PCRE2's JIT) each time cost about 2 % of the twelve rules' CPU time.
   * Kept until the trial is closed; beyond REGEX_SLOTS patterns the rest
   * are compiled each time. */
  struct regex_slot {
    char *pattern;
    smr_regex *re;
  } regexes[REGEX_SLOTS];
  /* The catalog connection and its prepared statements are shared: one
   * query at a time.  Rules evaluated in parallel serialize here only for
   * the (short) catalog lookups, not for reading or decoding values.
   * glibc's adaptive kind (smr_trial_open): it spins a little first. */
  pthread_mutex_t mu;
  /* the reader gate (trial.h, trial_gate.c): rule threads read under it,
   * a live refresh writes under it; taken before `mu`, never after */
  pthread_rwlock_t gate;
  /* smr_trial_align_values: where each tensor's elements began in its
   * last record read (offset + 1, 0: not known yet), by a hash of its
   * name; a hint, so read and written without a lock (relaxed) */
  bool align_values;
  _Atomic uint32_t value_at[VALUE_AT_SLOTS];
  /* read-ahead of tensor values (smr_trial_set_prefetch), under mu */
  size_t pf_steps;
  int64_t pf_end, pf_horizon;
  int64_t *pf_upto; /* per tensor id: last global step asked for */
  size_t pf_n;
  /* smr_trial_cached_steps: mean record bytes per step, measured when
   * the trial had step_bytes_at steps (under mu) */
  int64_t step_bytes;
  size_t step_bytes_at;
  smr_stats_cache *stats; /* per-(tensor, step) statistics rules share */
  /* TensorBoard (trial/tb_trial.h): the folder's scalars, asked instead
   * of the catalog's index entries when not NULL (trial_load.c decides;
   * the hooks are marked "TensorBoard" in trial_names.c, trial_read.c) */
  smr_tb *tb;
  int format;
  const smr_tb_settings *tb_settings;
};

/* ---- smdebug's layout (layout_smdebug.c) ---- */
/* Bring the catalog up to date with the index files (under mu; t->marker
 * and t->loaded_all_steps current); *added (optional): files read. */
int smr_trial_smdebug_sync(smr_trial *t, size_t *added, smr_error *err);
/* Collections, workers and num_workers from the collections files. */
void smr_trial_smdebug_load_collections(smr_trial *t);

/* ---- loading (trial_load.c) ---- */
void smr_trial_add_problem(smr_trial *t, const char *file, int64_t offset,
                           const char *msg);
/* Forget what is kept in memory about the catalog's tensors (names, ids,
 * step entries): it changed.  Under mu. */
void smr_trial_catalog_changed(smr_trial *t);

/* ---- shared helpers ---- */
static inline const char *smr_trial_base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

bool smr_trial_sorted_contains(const smr_strv *v, const char *s);
int smr_trial_cmp_i64(const void *a, const void *b);

/* The step of global step g, or NULL (binary search; inline: value reads
 * and the read-ahead ask it). */
static inline const step_info *smr_trial_find_step(const smr_trial *t,
                                                   int64_t g) {
  size_t lo = 0, hi = t->nsteps;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (t->steps[mid].step == g)
      return &t->steps[mid];
    if (t->steps[mid].step < g)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

/* ---- steps (trial_steps.c) ---- */
/* Rebuild the step model from the catalog (under mu, after a sync). */
int smr_trial_rebuild_steps(smr_trial *t, smr_error *err);

/* The reader gate (trial_gate.c): made with the trial; a refresh of a
 * live trial closes it (waits for the readers inside, keeps new ones
 * out) while it rewrites the trial and opens it again. */
void smr_trial_gate_init(smr_trial *t);
void smr_trial_gate_close(smr_trial *t);
void smr_trial_gate_open(smr_trial *t);
/* last_complete_step from the steps, workers and the end of training. */
void smr_trial_compute_completeness(smr_trial *t);
/* Rebuild the per-mode step order after t->steps changed. */
void smr_trial_index_steps(smr_trial *t);

/* ---- names and patterns (trial_names.c) ---- */
void smr_trial_forget_regexes(smr_trial *t);

/* ---- reading (trial_read.c) ---- */
void smr_trial_forget_tensor_ids(smr_trial *t);

#endif
