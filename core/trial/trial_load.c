/* trial_load.c - opening, refreshing and closing a trial: the state
 * file that holds its catalog, which layout reads the trial (smdebug's,
 * layout_smdebug.c, or a TensorBoard folder, tb_trial.h), and the
 * problems met reading.
 * Index files are read into the catalog once; the step model is rebuilt
 * from the catalog after each refresh (trial_steps.c); values are read on
 * demand from the event file slice the index points at (trial_read.c). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "base/safefs.h"
#include "source/source.h"
#include "trial/catalog.h"
#include "trial/stats_cache.h"
#include "trial/step_entries.h"
#include "trial/tb_trial.h"
#include "trial/trial_int.h"

/* ---------------------------------------------------------------- state */

/* Said once, loudly: without a state file nothing is remembered. */
static void warn_state_in_memory(const char *where, const char *why) {
  fprintf(stderr,
          "smrules: WARNING: the state cannot be kept in %s: %s\n"
          "smrules: WARNING: using a state in memory instead: nothing is "
          "resumed, and actions done by earlier runs (StopTraining, "
          "messages, hooks) may be done again.\n"
          "smrules: WARNING: pass --state PATH (a file in a writable "
          "folder) to keep the state there.\n",
          where, why);
}

/* The default state file (outside the trial folder, source.h), or NULL
 * (in memory) with *why set. */
static char *default_state_path(smr_trial *t, char *why, size_t nwhy) {
  const char *root = smr_source_root(t->src);
  char *dir = smr_location_state_dir(root);
  if (dir) {
    char *path = smr_xasprintf("%s/state.db", dir);
    free(dir);
    return path;
  }
  if (smr_source_is_remote(t->src))
    snprintf(why, nwhy, "there is no local cache folder for S3 trials");
  else
    snprintf(why, nwhy,
             "the per-user state folder ($XDG_STATE_HOME/smrules, else "
             "~/.local/state/smrules) cannot be made or is not the user's "
             "alone: %s",
             strerror(errno));
  return NULL;
}

/* Open the catalog at the configured place.  When the default place
 * cannot be written (a read-only trial) the state is kept in memory, and
 * that is said once.  A state file refused as untrusted (statedb.h) is an
 * error: smrules does not quietly carry on without it. */
static int open_catalog(smr_trial *t, const smr_trial_opts *o, smr_error *err) {
  const char *root = smr_source_root(t->src);
  char why[SMR_ERR_MSG_MAX + 64] = "";
  char *path = NULL;
  int rc = SMR_OK;
  if (o->fresh)
    path = smr_xstrdup(":memory:");
  else if (o->state_path)
    path = smr_xstrdup(o->state_path);
  else if (!(path = default_state_path(t, why, sizeof why))) {
    warn_state_in_memory("the per-user state folder", why);
    path = smr_xstrdup(":memory:");
  }
  rc = smr_catalog_open(path, root, &t->cat, err);
  if (rc != SMR_OK && rc != SMR_ERR_FORMAT && strcmp(path, ":memory:") != 0 &&
      !o->state_path) {
    char msg[SMR_ERR_MSG_MAX + SMR_ERR_FILE_MAX];
    smr_error_format(err, msg, sizeof msg);
    warn_state_in_memory(path, msg);
    free(path);
    path = smr_xstrdup(":memory:");
    rc = smr_catalog_open(path, root, &t->cat, err);
  }
  t->state_path = path;
  return rc;
}

/* ------------------------------------------------------------- problems */

void smr_trial_add_problem(smr_trial *t, const char *file, int64_t offset,
                           const char *msg) {
  if (t->nproblems == t->capproblems) { /* doubling, as files can be many */
    t->capproblems = t->capproblems ? 2 * t->capproblems : 8;
    t->problems =
        smr_xrealloc(t->problems, t->capproblems * sizeof *t->problems);
  }
  smr_trial_problem *p = &t->problems[t->nproblems++];
  p->file = smr_xstrdup(file);
  p->offset = offset;
  p->message = smr_xstrdup(msg);
}

static void clear_problems(smr_trial *t) {
  for (size_t i = 0; i < t->nproblems; i++) {
    free(t->problems[i].file);
    free(t->problems[i].message);
  }
  free(t->problems);
  t->problems = NULL;
  t->nproblems = t->capproblems = 0;
}

void smr_trial_catalog_changed(smr_trial *t) {
  t->names_valid = false;
  smr_trial_forget_tensor_ids(t);
  smr_step_entries_forget(t->step_entries);
}

static void record_index_problems(smr_trial *t) {
  smr_failed_index *f;
  size_t n;
  smr_error e;
  if (smr_catalog_failed_indexes(t->cat, &f, &n, &e) != SMR_OK)
    return;
  for (size_t i = 0; i < n; i++)
    smr_trial_add_problem(t, f[i].path, f[i].offset, f[i].message);
  smr_failed_indexes_free(f, n);
}

/* ---- TensorBoard (trial/tb_trial.h): the one place a TensorBoard
 * folder is read (steps straight from its model); the model then answers
 * cached_names (trial_names.c), tensor_entries and read_entry
 * (trial_read.c), each hook marked "TensorBoard". */

/* Whether the trial is (now) a TensorBoard folder: forced, or, unless
 * forced to smdebug, event files and no smdebug step yet (a folder a
 * trainer has not written yet is asked again at each refresh). */
static int tensorboard_detect(smr_trial *t, bool smdebug_read, smr_error *err) {
  if (t->tb || t->format == SMR_TRIAL_SMDEBUG)
    return SMR_OK;
  /* auto: asked only once smdebug's files gave nothing (a listing of the
   * whole tree is not free, in S3 least of all) */
  if (t->format == SMR_TRIAL_AUTO &&
      (!smdebug_read || t->nsteps || t->marker || !smr_tb_probe(t->src)))
    return SMR_OK;
  return smr_tb_new(t->tb_settings, &t->tb, err);
}

static void tensorboard_problem(void *ctx, const char *file, int64_t offset,
                                const char *message) {
  smr_trial_add_problem(ctx, file, offset, message);
}

static void tensorboard_step(void *ctx, int64_t g, int mode, int64_t step) {
  smr_trial *t = ctx;
  t->steps[t->nsteps++] =
      (step_info){.step = g, .mode_step = step, .mode = mode, .nworkers = 1};
}

/* The step model straight from the TensorBoard model: one worker, steps
 * in global order (rebuild_steps would sort a row per step by worker
 * name, 0.1 s at 100,000 steps). */
static void tensorboard_steps(smr_trial *t) {
  size_t n = smr_tb_steps(t->tb, NULL, NULL);
  free(t->steps);
  t->steps = smr_xcalloc(n ? n : 1, sizeof *t->steps);
  t->nsteps = 0;
  smr_tb_steps(t->tb, tensorboard_step, t);
  if (!t->workers.n)
    smr_strv_push(&t->workers, "worker_0");
  t->num_workers = 1;
  smr_trial_index_steps(t);
  smr_trial_compute_completeness(t);
}

static int tensorboard_refresh(smr_trial *t, size_t *added, smr_error *err) {
  size_t n = 0;
  bool reset = false;
  t->marker = false; /* TensorBoard writes none: the trainer's exit ends */
  t->loaded_all_steps = !t->live;
  int rc = smr_tb_sync(t->tb, t->src, t->live, &n, &reset, err);
  if (added)
    *added = n;
  if (n || reset) {
    t->names_valid = false;
    smr_trial_forget_tensor_ids(t);
  }
  clear_problems(t);
  smr_tb_problems(t->tb, tensorboard_problem, t);
  free(t->collections_error);
  t->collections_error = NULL;
  if (n || reset || !t->colls.n) {
    smr_tb_collections(t->tb, &t->colls);
    tensorboard_steps(t);
  }
  smr_trial_compute_completeness(t); /* loaded_all_steps may have changed */
  return rc;
}

bool smr_trial_is_tensorboard(const smr_trial *t) {
  return t->tb != NULL;
}

int smr_trial_format_parse(const char *name) {
  static const char *const names[] = {"auto", "smdebug", "tensorboard"};
  for (int i = 0; i < 3; i++)
    if (strcmp(name, names[i]) == 0)
      return i;
  return -1;
}

/* ------------------------------------------------------------- refresh */

static int refresh_layout(smr_trial *t, size_t *added, smr_error *err);

/* A live trial is refreshed while rules read it: alone, behind its reader
 * gate (trial.h). */
int smr_trial_refresh(smr_trial *t, size_t *added, smr_error *err) {
  smr_trial_gate_close(t);
  int rc = refresh_layout(t, added, err);
  smr_trial_gate_open(t);
  return rc;
}

/* The one place a trial's layout is chosen and read: a TensorBoard
 * folder when forced, else smdebug's files, else (auto, nothing of
 * smdebug's found) a TensorBoard folder when event files are there. */
static int refresh_layout(smr_trial *t, size_t *added, smr_error *err) {
  pthread_mutex_lock(&t->mu);
  int rc = tensorboard_detect(t, false, err); /* TensorBoard: forced */
  if (rc == SMR_OK && t->tb) {
    rc = tensorboard_refresh(t, added, err);
    pthread_mutex_unlock(&t->mu);
    return rc;
  }
  t->marker = smr_source_exists(t->src, "training_job_end.ts", NULL, NULL);
  t->loaded_all_steps = !t->live || t->marker;
  if (rc == SMR_OK)
    rc = smr_trial_smdebug_sync(t, added, err);
  if (rc == SMR_OK) {
    clear_problems(t);
    smr_trial_smdebug_load_collections(t);
    record_index_problems(t);
    rc = smr_trial_rebuild_steps(t, err);
  }
  if (rc == SMR_OK) /* TensorBoard: no smdebug step, event files? */
    rc = tensorboard_detect(t, true, err);
  if (rc == SMR_OK && t->tb)
    rc = tensorboard_refresh(t, added, err);
  pthread_mutex_unlock(&t->mu);
  return rc;
}

int smr_trial_open(const char *dir, const smr_trial_opts *opts, smr_trial **out,
                   smr_error *err) {
  static const smr_trial_opts defaults = {0};
  const smr_trial_opts *o = opts ? opts : &defaults;
  *out = NULL;
  smr_trial *t = smr_xcalloc(1, sizeof *t);
  /* glibc's adaptive mutex (spins a little before it sleeps): lookups
   * hold the lock for a few microseconds */
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
  pthread_mutex_init(&t->mu, &ma);
  pthread_mutexattr_destroy(&ma);
  smr_trial_gate_init(t);
  t->stats = smr_stats_cache_new();
  t->step_entries = smr_step_entries_new();
  t->live = o->live;
  t->format = o->format;
  t->tb_settings = o->tensorboard;
  int rc = smr_source_open(dir, &t->src, err);
  if (rc == SMR_OK)
    rc = open_catalog(t, o, err);
  if (rc == SMR_OK)
    rc = smr_trial_refresh(t, NULL, err);
  if (rc != SMR_OK) {
    smr_trial_close(t);
    return rc;
  }
  *out = t;
  return SMR_OK;
}

void smr_trial_close(smr_trial *t) {
  if (!t)
    return;
  smr_catalog_close(t->cat);
  smr_tb_free(t->tb);
  smr_source_close(t->src);
  free(t->state_path);
  smr_strv_free(&t->workers);
  smr_strv_free(&t->names);
  smr_collections_free(&t->colls);
  free(t->collections_error);
  free(t->index_retry);
  clear_problems(t);
  free(t->steps);
  smr_strv_free(&t->row_workers);
  free(t->row_worker_latest);
  for (int m = 0; m < 5; m++)
    free(t->by_mode[m]);
  free(t->pf_upto);
  smr_trial_forget_tensor_ids(t);
  smr_trial_forget_regexes(t);
  smr_step_entries_free(t->step_entries);
  smr_stats_cache_free(t->stats);
  pthread_mutex_destroy(&t->mu);
  pthread_rwlock_destroy(&t->gate);
  free(t);
}

smr_stats_cache *smr_trial_stats_cache(smr_trial *t) {
  /* While training writes, a step's default worker may still change
   * (a smaller worker name saves it later): nothing is shared then. */
  return t->live && !t->marker ? NULL : t->stats;
}

/* ------------------------------------------------------------ accessors */

const char *smr_trial_root(const smr_trial *t) {
  return smr_source_root(t->src);
}
uint64_t smr_trial_bytes_read(const smr_trial *t) {
  return smr_source_bytes_read(t->src);
}
const char *smr_trial_state_path(const smr_trial *t) {
  return t->state_path;
}
struct smr_catalog *smr_trial_catalog(smr_trial *t) {
  return t->cat;
}
bool smr_trial_end_marker(const smr_trial *t) {
  return t->marker;
}
bool smr_trial_loaded_all_steps(const smr_trial *t) {
  return t->loaded_all_steps;
}
int64_t smr_trial_last_complete_step(const smr_trial *t) {
  return t->last_complete_step;
}

size_t smr_trial_problems(const smr_trial *t, const smr_trial_problem **out) {
  *out = t->problems;
  return t->nproblems;
}
