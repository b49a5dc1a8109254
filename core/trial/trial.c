/* trial.c - trial layout, the step/worker/mode model, availability, and
 * tensor values.  Index files are read into the catalog once; the step
 * model is rebuilt from the catalog after each refresh; values are read on
 * demand from the event file slice the index points at. */
#include "trial/trial.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "base/regex.h"
#include "base/safefs.h"
#include "format/event.h"
#include "format/record.h"
#include "source/source.h"
#include "trial/catalog.h"
#include "trial/stats_cache.h"
#include "trial/step_entries.h"
#include "trial/tb_trial.h"

/* Index and collections files are small; anything larger is not one. */
#define MAX_INDEX_BYTES (64u << 20)
#define MAX_COLLECTIONS_BYTES (16u << 20)
/* SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW default
 * (docs/formats.md#complete-steps-and-the-end-of-training). */
#define INCOMPLETE_STEP_WAIT_WINDOW 1000

typedef struct step_info {
  int64_t step;
  int mode;
  int64_t mode_step;
  int nworkers;
} step_info;

#define TENSOR_ID_SLOTS 1024
#define REGEX_SLOTS 64

struct smr_trial {
  smr_source *src;
  smr_catalog *cat;
  char *state_path;
  bool live, marker, loaded_all_steps;
  int num_workers;
  smr_strv workers;
  smr_collections colls;
  char *collections_error;
  smr_trial_problem *problems;
  size_t nproblems;
  step_info *steps; /* ascending global step */
  size_t nsteps;
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
   * the (short) catalog lookups, not for reading or decoding values. */
  pthread_mutex_t mu;
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
   * of the catalog's index entries when not NULL */
  smr_tb *tb;
  int format;
  const smr_tb_settings *tb_settings;
};

static void forget_tensor_ids(smr_trial *t);
static void forget_regexes(smr_trial *t);

const char *smr_availability_name(smr_availability a) {
  switch (a) {
  case SMR_AVAILABLE:
    return "AVAILABLE";
  case SMR_NOT_YET_AVAILABLE:
    return "NOT_YET_AVAILABLE";
  default:
    return "UNAVAILABLE";
  }
}

/* ---------------------------------------------------------------- state */

/* <root>/.smrules, made without following a link planted there: 1 when
 * it is there, 0 when it cannot be made (a read-only trial: *why says
 * what the system said), an error when something that is not our
 * directory (a link) stands there. */
static int make_state_dir(const char *root, const char *dir, char *why,
                          size_t nwhy, smr_error *err) {
  int fd;
  smr_error e;
  smr_error_clear(&e);
  if (smr_safe_dir_open(dir, root, true, &fd, &e) == SMR_OK) {
    close(fd);
    return 1;
  }
  struct stat st;
  if (lstat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
    if (err)
      *err = e;
    return -1;
  }
  snprintf(why, nwhy, "%s", e.msg);
  return 0;
}

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

/* The default state file, or NULL (in memory) with *why set. */
static char *default_state_path(smr_trial *t, char *why, size_t nwhy,
                                smr_error *err, int *rc) {
  const char *root = smr_source_root(t->src);
  *rc = SMR_OK;
  if (smr_source_is_remote(t->src)) {
    /* no catalog in the bucket: a local cache file per trial URL */
    char *dir = smr_location_state_dir(root);
    char *path = dir ? smr_xasprintf("%s/state.db", dir) : NULL;
    if (!dir)
      snprintf(why, nwhy, "there is no local cache folder for S3 trials");
    free(dir);
    return path;
  }
  char *dir = smr_xasprintf("%s/.smrules", root);
  int made = make_state_dir(root, dir, why, nwhy, err);
  char *path = made > 0 ? smr_xasprintf("%s/state.db", dir) : NULL;
  free(dir);
  if (made < 0)
    *rc = SMR_ERR_IO;
  return path;
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
  else if (!(path = default_state_path(t, why, sizeof why, err, &rc))) {
    if (rc != SMR_OK)
      return rc;
    warn_state_in_memory("the trial folder", why);
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

static void add_problem(smr_trial *t, const char *file, int64_t offset,
                        const char *msg) {
  t->problems =
      smr_xrealloc(t->problems, (t->nproblems + 1) * sizeof *t->problems);
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
  t->nproblems = 0;
}

/* ---------------------------------------------------------- index files */

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* Read and record one index file (or its failure) in the catalog. */
static int ingest_index(smr_trial *t, const char *path, smr_error *err) {
  int64_t step = -1;
  char *worker = NULL;
  smr_error perr;
  smr_error_clear(&perr);
  smr_index ix;
  memset(&ix, 0, sizeof ix);
  bool ok = false;
  if (smr_parse_step_worker(base_name(path), &step, &worker) != SMR_OK) {
    smr_error_set(&perr, SMR_ERR_FORMAT, path, -1,
                  "file name is not <step>_<worker>.json");
  } else {
    char *buf = NULL;
    size_t len = 0;
    int rc =
        smr_source_read_all(t->src, path, MAX_INDEX_BYTES, &buf, &len, &perr);
    if (rc == SMR_OK)
      ok = smr_index_parse(buf, len, path, &ix, &perr) == SMR_OK;
    free(buf);
    /* A request to S3 that failed (network, refused access) says nothing
     * about the file: do not record it, fail this refresh. */
    if (rc == SMR_ERR_IO && smr_source_is_remote(t->src)) {
      if (err)
        *err = perr;
      free(worker);
      return rc;
    }
  }
  /* While training runs, an unreadable index file may still be being
   * written by a writer that does not rename into place: leave it out and
   * read it again at the next refresh; once training has ended it is a
   * real failure. */
  if (!ok && t->live && !t->marker) {
    free(worker);
    return SMR_OK;
  }
  int rc = smr_catalog_add_index(t->cat, path, step, worker ? worker : "",
                                 ok ? &ix : NULL, ok ? NULL : &perr, err);
  if (ok)
    smr_index_free(&ix);
  free(worker);
  return rc;
}

static bool sorted_contains(const smr_strv *v, const char *s) {
  size_t lo = 0, hi = v->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = strcmp(v->v[mid], s);
    if (c == 0)
      return true;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return false;
}

/* ------------------------------------------- listing only what is new */

/* Steps of recorded index files, newest last, with their worker counts. */
typedef struct known_step {
  int64_t step;
  size_t first; /* index in `known` of its first path */
  size_t nworkers;
} known_step;

static size_t known_steps(const smr_strv *known, known_step **out,
                          size_t *max_workers) {
  known_step *v = smr_xcalloc(known->n ? known->n : 1, sizeof *v);
  size_t n = 0;
  smr_strv workers = {0};
  for (size_t i = 0; i < known->n; i++) {
    int64_t step;
    char *w = NULL;
    if (smr_parse_step_worker(base_name(known->v[i]), &step, &w) != SMR_OK) {
      free(w);
      continue;
    }
    smr_strv_take(&workers, w);
    if (n && v[n - 1].step == step)
      v[n - 1].nworkers++;
    else
      v[n++] = (known_step){step, i, 1};
  }
  smr_strv_sort_unique(&workers);
  *max_workers = workers.n;
  smr_strv_free(&workers);
  *out = v;
  return n;
}

/* Where a remote listing of index files can start (S3 lists in key order
 * and bills per page; the reference lists everything,
 * docs/formats.md#reading-index-files skips what it read).  Keys sort by step,
 * so everything at or after the first step that may still gain index files is
 * listed again: the first step, among the last INCOMPLETE_STEP_WAIT_WINDOW
 * known ones, written by fewer workers than seen in the trial, else the newest
 * known step (so a trial rewritten in place is still noticed).  NULL: list
 * everything. */
static char *index_start_after(const smr_strv *known) {
  known_step *v;
  size_t nw = 0, n = known_steps(known, &v, &nw);
  char *after = NULL;
  if (n) {
    size_t from =
        n > INCOMPLETE_STEP_WAIT_WINDOW ? n - INCOMPLETE_STEP_WAIT_WINDOW : 0;
    size_t pick = n - 1;
    for (size_t i = from; i < n; i++)
      if (v[i].nworkers < nw) {
        pick = i;
        break;
      }
    /* "<dir>/<step digits>": every key of that step and later sorts
     * after it */
    const char *path = known->v[v[pick].first];
    const char *b = base_name(path);
    size_t digits = strspn(b, "0123456789");
    after = smr_xstrndup(path, (size_t)(b - path) + digits);
  }
  free(v);
  return after;
}

static int list_index_files(smr_trial *t, const char *after,
                            smr_source_listing *l, smr_error *err) {
  if (after)
    return smr_source_list_after(t->src, "index", ".json", after, l, err);
  return smr_source_list(t->src, "index", ".json", l, err);
}

/* The starting key of an incremental listing (S3), or NULL. */
static char *incremental_start(smr_trial *t) {
  if (!smr_source_is_remote(t->src))
    return NULL;
  smr_strv known = {0};
  smr_error e;
  char *after = smr_catalog_index_paths(t->cat, &known, &e) == SMR_OK
                    ? index_start_after(&known)
                    : NULL;
  smr_strv_free(&known);
  return after;
}

/* Tell a remote source which listed files will be read (the new ones),
 * so that it fetches those ahead and not the known ones. */
static void read_ahead_new(smr_trial *t, const smr_source_listing *l,
                           const smr_strv *known) {
  if (!smr_source_is_remote(t->src))
    return;
  smr_source_listing todo = {0};
  for (size_t i = 0; i < l->n; i++)
    if (!known || !sorted_contains(known, l->files[i].path))
      smr_source_listing_add(&todo, smr_xstrdup(l->files[i].path),
                             l->files[i].size, l->files[i].mtime_ns);
  smr_source_read_ahead(t->src, &todo);
  smr_source_listing_free(&todo);
}

/* Bring the catalog up to date with the index files on disk. */
static int sync_index_files(smr_trial *t, size_t *added, smr_error *err) {
  smr_source_listing l;
  char *after = incremental_start(t);
  int rc = list_index_files(t, after, &l, err);
  if (rc != SMR_OK) { /* e.g. the network: keep what is known */
    free(after);
    return rc;
  }
  smr_strv known = {0};
  /* Read what is recorded inside the write transaction: another process
   * sharing the state file may have added the same files meanwhile. */
  rc = smr_catalog_begin(t->cat, err);
  if (rc == SMR_OK)
    rc = smr_catalog_index_paths(t->cat, &known, err);
  /* A recorded index file that disappeared means the directory was
   * rewritten by a new run: start over.  (An incremental listing can only
   * vouch for the paths after its start.) */
  size_t present = 0, expected = known.n;
  for (size_t i = 0; after && i < known.n; i++)
    expected -= strcmp(known.v[i], after) <= 0;
  for (size_t i = 0; rc == SMR_OK && i < l.n; i++)
    present += sorted_contains(&known, l.files[i].path);
  bool reset = rc == SMR_OK && present != expected;
  size_t n = 0;
  if (rc == SMR_OK && reset)
    rc = smr_catalog_reset(t->cat, err);
  if (rc == SMR_OK && reset && after) {
    smr_source_listing_free(&l);
    rc = list_index_files(t, NULL, &l, err);
  }
  free(after);
  if (rc == SMR_OK)
    read_ahead_new(t, &l, reset ? NULL : &known);
  for (size_t i = 0; rc == SMR_OK && i < l.n; i++) {
    if (!reset && sorted_contains(&known, l.files[i].path))
      continue;
    rc = ingest_index(t, l.files[i].path, err);
    n++;
  }
  if (rc == SMR_OK)
    rc = smr_catalog_commit(t->cat, err);
  else
    smr_catalog_rollback(t->cat);
  smr_strv_free(&known);
  smr_source_listing_free(&l);
  if (added)
    *added = n;
  if (n || reset) {
    t->names_valid = false;
    forget_tensor_ids(t);
    smr_step_entries_forget(t->step_entries);
  }
  return rc;
}

/* ---------------------------------------------------------- collections */

static bool collections_equal(const smr_collections *a,
                              const smr_collections *b) {
  if (a->n != b->n)
    return false;
  for (size_t i = 0; i < a->n; i++) {
    const smr_collection *x = &a->items[i], *y = &b->items[i];
    if (strcmp(x->name, y->name) != 0 ||
        x->n_include_regex != y->n_include_regex)
      return false;
    for (size_t k = 0; k < x->n_include_regex; k++)
      if (strcmp(x->include_regex[k], y->include_regex[k]) != 0)
        return false;
  }
  return true;
}

/* Load every collections file: the first (by name) decides the
 * collections and num_workers; the workers are named by the files
 * (Decision F8). */
static void load_collections(smr_trial *t) {
  smr_collections_free(&t->colls);
  memset(&t->colls, 0, sizeof t->colls);
  free(t->collections_error);
  t->collections_error = NULL;
  smr_strv_free(&t->workers);
  t->num_workers = 0;
  smr_source_listing l;
  smr_error e;
  smr_error_clear(&e);
  if (smr_source_list(t->src, "collections", "_collections.json", &l, &e) !=
      SMR_OK) {
    char msg[SMR_ERR_FILE_MAX + SMR_ERR_MSG_MAX + 64];
    smr_error_format(&e, msg, sizeof msg);
    t->collections_error = smr_xstrdup(msg);
    add_problem(t, "collections", -1, e.msg);
  }
  bool have = false;
  for (size_t i = 0; i < l.n; i++) {
    const char *path = l.files[i].path;
    char *worker = smr_parse_collections_worker(base_name(path));
    if (worker)
      smr_strv_take(&t->workers, worker);
    char *buf = NULL;
    size_t len = 0;
    smr_collections c;
    memset(&c, 0, sizeof c);
    smr_error_clear(&e);
    int rc = smr_source_read_all(t->src, path, MAX_COLLECTIONS_BYTES, &buf,
                                 &len, &e);
    if (rc == SMR_OK)
      rc = smr_collections_parse(buf, len, path, &c, &e);
    free(buf);
    if (rc != SMR_OK) {
      char msg[SMR_ERR_FILE_MAX + SMR_ERR_MSG_MAX + 64];
      smr_error_format(&e, msg, sizeof msg);
      if (!t->collections_error)
        t->collections_error = smr_xstrdup(msg);
      add_problem(t, path, e.offset, e.msg);
      continue;
    }
    if (!have) {
      t->colls = c;
      t->num_workers = c.num_workers;
      have = true;
      continue;
    }
    if (!collections_equal(&t->colls, &c))
      add_problem(t, path, -1,
                  "collection definitions differ from the first "
                  "collections file; the first one is used");
    smr_collections_free(&c);
  }
  smr_source_listing_free(&l);
  smr_strv_sort_unique(&t->workers);
}

/* ------------------------------------------------------------ step model */

static int cmp_row(const void *a, const void *b) {
  const smr_step_row *x = a, *y = b;
  if (x->step != y->step)
    return x->step < y->step ? -1 : 1;
  return strcmp(x->worker, y->worker);
}

/* Workers seen in index files stand in when no collections file names
 * them. */
static void workers_from_rows(smr_trial *t, smr_step_row *rows, size_t n) {
  smr_strv seen = {0};
  for (size_t i = 0; i < n; i++)
    smr_strv_push(&seen, rows[i].worker);
  smr_strv_sort_unique(&seen);
  if (t->workers.n == 0) {
    smr_strv_free(&t->workers);
    t->workers = seen;
  } else {
    smr_strv_free(&seen);
  }
  if (t->num_workers <= 0)
    t->num_workers = t->workers.n ? (int)t->workers.n : 1;
}

/* docs/formats.md#complete-steps-and-the-end-of-training: last_complete_step by
 * worker count, the incomplete-step window, and the end of training. */
static void compute_completeness(smr_trial *t) {
  int64_t lcs = -1;
  for (size_t i = 0; i < t->nsteps; i++)
    if (t->steps[i].nworkers >= t->num_workers && t->steps[i].step > lcs)
      lcs = t->steps[i].step;
  size_t after = 0;
  for (size_t i = 0; i < t->nsteps; i++)
    after += t->steps[i].step > lcs;
  if (after > INCOMPLETE_STEP_WAIT_WINDOW)
    lcs += INCOMPLETE_STEP_WAIT_WINDOW / 2;
  if (t->loaded_all_steps && t->nsteps)
    lcs = t->steps[t->nsteps - 1].step;
  t->last_complete_step = lcs;
}

static int rebuild_steps(smr_trial *t, smr_error *err) {
  smr_step_row *rows;
  size_t n;
  int rc = smr_catalog_step_rows(t->cat, &rows, &n, err);
  if (rc)
    return rc;
  if (n > 1) /* qsort of an empty (NULL) array is undefined */
    qsort(rows, n, sizeof *rows, cmp_row);
  workers_from_rows(t, rows, n);
  free(t->steps);
  t->steps = smr_xcalloc(n ? n : 1, sizeof *t->steps);
  t->nsteps = 0;
  for (size_t i = 0; i < n; i++) {
    step_info *last = t->nsteps ? &t->steps[t->nsteps - 1] : NULL;
    if (last && last->step == rows[i].step) {
      /* first writer wins for the mode
       * (docs/formats.md#modes-steps-and-workers); count distinct workers */
      if (strcmp(rows[i].worker, rows[i - 1].worker) != 0)
        last->nworkers++;
      continue;
    }
    step_info *s = &t->steps[t->nsteps++];
    s->step = rows[i].step;
    s->mode = rows[i].mode;
    s->mode_step = rows[i].mode_step;
    s->nworkers = 1;
  }
  smr_step_rows_free(rows, n);
  compute_completeness(t);
  return SMR_OK;
}

static void record_index_problems(smr_trial *t) {
  smr_failed_index *f;
  size_t n;
  smr_error e;
  if (smr_catalog_failed_indexes(t->cat, &f, &n, &e) != SMR_OK)
    return;
  for (size_t i = 0; i < n; i++)
    add_problem(t, f[i].path, f[i].offset, f[i].message);
  smr_failed_indexes_free(f, n);
}

/* ---- TensorBoard (trial/tb_trial.h): the one place a TensorBoard
 * folder is read (steps straight from its model); the model then answers
 * cached_names, tensor_entries and read_entry (each hook marked
 * "TensorBoard"). */

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
  add_problem(ctx, file, offset, message);
}

static void tensorboard_step(void *ctx, int64_t g, int mode, int64_t step) {
  smr_trial *t = ctx;
  t->steps[t->nsteps++] = (step_info){g, mode, step, 1};
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
  compute_completeness(t);
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
    forget_tensor_ids(t);
  }
  clear_problems(t);
  smr_tb_problems(t->tb, tensorboard_problem, t);
  free(t->collections_error);
  t->collections_error = NULL;
  if (n || reset || !t->colls.n) {
    smr_tb_collections(t->tb, &t->colls);
    tensorboard_steps(t);
  }
  compute_completeness(t); /* loaded_all_steps may have changed */
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

int smr_trial_refresh(smr_trial *t, size_t *added, smr_error *err) {
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
    rc = sync_index_files(t, added, err);
  if (rc == SMR_OK) {
    clear_problems(t);
    load_collections(t);
    record_index_problems(t);
    rc = rebuild_steps(t, err);
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
  clear_problems(t);
  free(t->steps);
  free(t->pf_upto);
  forget_tensor_ids(t);
  forget_regexes(t);
  smr_step_entries_free(t->step_entries);
  smr_stats_cache_free(t->stats);
  pthread_mutex_destroy(&t->mu);
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
/* The mean record bytes per step scans every catalog entry, and --watch
 * asks at every new step: it is measured again only once the trial has
 * at least doubled its steps (a run's steps are alike in size). */
size_t smr_trial_cached_steps(smr_trial *t) {
  size_t budget = smr_source_cache_budget(t->src);
  if (!budget)
    return 0;
  pthread_mutex_lock(&t->mu);
  if (!t->step_bytes || t->nsteps >= 2 * t->step_bytes_at) {
    int64_t bytes = 0, steps = 0;
    smr_error e;
    smr_catalog_value_bytes(t->cat, &bytes, &steps, &e);
    t->step_bytes = bytes > 0 && steps > 0 ? bytes / steps + 1 : 0;
    t->step_bytes_at = t->nsteps;
  }
  int64_t per_step = t->step_bytes;
  pthread_mutex_unlock(&t->mu);
  if (per_step <= 0)
    return 1;
  int64_t n = (int64_t)budget / per_step;
  return n < 1 ? 1 : (size_t)n;
}

int smr_trial_num_workers(const smr_trial *t) {
  return t->num_workers;
}
const smr_strv *smr_trial_workers(const smr_trial *t) {
  return &t->workers;
}

size_t smr_trial_problems(const smr_trial *t, const smr_trial_problem **out) {
  *out = t->problems;
  return t->nproblems;
}

/* ---------------------------------------------------------------- steps */

static const step_info *find_step(const smr_trial *t, int64_t g) {
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

bool smr_trial_step_complete(const smr_trial *t, int64_t g) {
  const step_info *s = find_step(t, g);
  if (!s)
    return false;
  return s->nworkers >= t->num_workers || t->loaded_all_steps ||
         g <= t->last_complete_step;
}

static bool in_mode(const step_info *s, int mode) {
  return mode == SMR_MODE_GLOBAL || s->mode == mode;
}

static int64_t step_key(const step_info *s, int mode) {
  return mode == SMR_MODE_GLOBAL ? s->step : s->mode_step;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

void smr_trial_steps(const smr_trial *t, int mode, bool include_incomplete,
                     smr_i64v *out) {
  for (size_t i = 0; i < t->nsteps; i++) {
    const step_info *s = &t->steps[i];
    if (!in_mode(s, mode))
      continue;
    if (!include_incomplete && !smr_trial_step_complete(t, s->step))
      continue;
    smr_i64v_push(out, step_key(s, mode));
  }
  if (mode != SMR_MODE_GLOBAL && out->n > 1)
    qsort(out->v, out->n, sizeof *out->v, cmp_i64);
}

void smr_trial_modes(const smr_trial *t, int modes[4], size_t *n) {
  bool seen[5] = {false};
  for (size_t i = 0; i < t->nsteps; i++)
    if (t->steps[i].mode >= 1 && t->steps[i].mode <= 4)
      seen[t->steps[i].mode] = true;
  *n = 0;
  for (int m = 1; m <= 4; m++)
    if (seen[m])
      modes[(*n)++] = m;
}

bool smr_trial_step_mode(const smr_trial *t, int64_t step, int *mode,
                         int64_t *mode_step) {
  const step_info *s = find_step(t, step);
  if (!s)
    return false;
  *mode = s->mode;
  *mode_step = s->mode_step;
  return true;
}

bool smr_trial_global_step(const smr_trial *t, int mode, int64_t mode_step,
                           int64_t *step) {
  if (mode == SMR_MODE_GLOBAL) {
    *step = mode_step;
    return true;
  }
  for (size_t i = 0; i < t->nsteps; i++)
    if (t->steps[i].mode == mode && t->steps[i].mode_step == mode_step) {
      *step = t->steps[i].step;
      return true;
    }
  return false;
}

/* docs/formats.md#step-states, literally. */
smr_availability smr_trial_has_passed_step(const smr_trial *t, int64_t step,
                                           int mode) {
  const step_info *best = NULL;
  for (size_t i = 0; i < t->nsteps; i++) {
    const step_info *s = &t->steps[i];
    if (!in_mode(s, mode) || step_key(s, mode) < step)
      continue;
    if (!best || step_key(s, mode) < step_key(best, mode))
      best = s;
  }
  if (!best)
    return t->loaded_all_steps ? SMR_UNAVAILABLE : SMR_NOT_YET_AVAILABLE;
  int64_t g = best->step;
  if (step_key(best, mode) > step)
    return t->last_complete_step >= g ? SMR_UNAVAILABLE : SMR_NOT_YET_AVAILABLE;
  if (best->nworkers >= t->num_workers || t->loaded_all_steps ||
      g <= t->last_complete_step)
    return SMR_AVAILABLE;
  return SMR_NOT_YET_AVAILABLE;
}

/* ---------------------------------------------------------- collections */

void smr_trial_collection_names(const smr_trial *t, smr_strv *out) {
  for (size_t i = 0; i < t->colls.n; i++)
    smr_strv_push(out, t->colls.items[i].name);
  smr_strv_sort_unique(out);
}

const char *smr_trial_collections_error(const smr_trial *t) {
  return t->collections_error;
}

static int cached_names(smr_trial *t, smr_error *err) {
  if (t->names_valid)
    return SMR_OK;
  smr_strv_free(&t->names);
  int rc = SMR_OK;
  if (t->tb) /* TensorBoard */
    smr_tb_tensor_names(t->tb, &t->names);
  else
    rc = smr_catalog_tensor_names(t->cat, &t->names, err);
  t->names_valid = rc == SMR_OK;
  return rc;
}

int smr_trial_tensor_names(smr_trial *t, smr_strv *out, smr_error *err) {
  pthread_mutex_lock(&t->mu);
  int rc = cached_names(t, err);
  for (size_t i = 0; rc == SMR_OK && i < t->names.n; i++)
    smr_strv_push(out, t->names.v[i]);
  pthread_mutex_unlock(&t->mu);
  return rc;
}

bool smr_trial_has_tensor(smr_trial *t, const char *name) {
  pthread_mutex_lock(&t->mu);
  bool ok = cached_names(t, NULL) == SMR_OK && sorted_contains(&t->names, name);
  pthread_mutex_unlock(&t->mu);
  return ok;
}

/* The compiled pattern, kept in the trial (*kept true) or the caller's to
 * free. */
static int regex_of(smr_trial *t, const char *pattern, smr_regex **re,
                    bool *kept, smr_error *err) {
  pthread_mutex_lock(&t->mu);
  struct regex_slot *free_slot = NULL;
  for (size_t i = 0; i < REGEX_SLOTS; i++) {
    struct regex_slot *r = &t->regexes[i];
    if (r->pattern && strcmp(r->pattern, pattern) == 0) {
      *re = r->re;
      *kept = true;
      pthread_mutex_unlock(&t->mu);
      return SMR_OK;
    }
    if (!r->pattern && !free_slot)
      free_slot = r;
  }
  int rc = smr_regex_compile(pattern, re, err);
  *kept = rc == SMR_OK && free_slot;
  if (*kept) {
    free_slot->pattern = smr_xstrdup(pattern);
    free_slot->re = *re;
  }
  pthread_mutex_unlock(&t->mu);
  return rc;
}

static void forget_regexes(smr_trial *t) {
  for (size_t i = 0; i < REGEX_SLOTS; i++) {
    free(t->regexes[i].pattern);
    smr_regex_free(t->regexes[i].re);
  }
}

int smr_trial_tensor_names_regex(smr_trial *t, const char *const *regexes,
                                 size_t n, smr_regex_meter *meter,
                                 smr_strv *out, smr_error *err) {
  smr_strv names = {0};
  int rc = smr_trial_tensor_names(t, &names, err);
  smr_regex **res = smr_xcalloc(n ? n : 1, sizeof *res);
  bool *kept = smr_xcalloc(n ? n : 1, sizeof *kept);
  for (size_t k = 0; rc == SMR_OK && k < n; k++)
    rc = regex_of(t, regexes[k], &res[k], &kept[k], err);
  bool spent = false;
  for (size_t i = 0; rc == SMR_OK && !spent && i < names.n; i++)
    for (size_t k = 0; k < n; k++) {
      if (smr_regex_search_metered(res[k], names.v[i], meter)) {
        smr_strv_push(out, names.v[i]);
        break;
      }
      spent = meter && meter->exhausted;
      if (spent)
        break;
    }
  for (size_t k = 0; k < n; k++)
    if (!kept[k])
      smr_regex_free(res[k]);
  free(res);
  free(kept);
  smr_strv_free(&names);
  return rc;
}

int smr_trial_collection_members(smr_trial *t, const char *collection,
                                 smr_regex_meter *meter, smr_strv *out,
                                 smr_error *err) {
  const smr_collection *c = NULL;
  for (size_t i = 0; i < t->colls.n; i++)
    if (strcmp(t->colls.items[i].name, collection) == 0)
      c = &t->colls.items[i];
  if (!c)
    return SMR_OK;
  smr_strv members = {0};
  int rc =
      smr_trial_tensor_names_regex(t, (const char *const *)c->include_regex,
                                   c->n_include_regex, meter, &members, err);
  for (size_t i = 0; rc == SMR_OK && i < c->n_tensor_names; i++)
    if (smr_trial_has_tensor(t, c->tensor_names[i]))
      smr_strv_push(&members, c->tensor_names[i]);
  smr_strv_sort_unique(&members);
  for (size_t i = 0; i < members.n; i++)
    smr_strv_take(out, members.v[i]);
  free(members.v);
  return rc;
}

/* -------------------------------------------------------- tensor steps */

static size_t id_slot_of(const char *name) {
  return (size_t)(smr_hash_str(SMR_HASH_INIT, name) >> 32) % TENSOR_ID_SLOTS;
}

static void forget_tensor_ids(smr_trial *t) {
  for (size_t i = 0; i < TENSOR_ID_SLOTS; i++) {
    free(t->ids[i].name);
    t->ids[i].name = NULL;
  }
}

/* The catalog id of a tensor, or -1; under mu.  A tensor not (yet) in
 * the catalog is asked again each time. */
static int64_t tensor_id(smr_trial *t, const char *name, smr_error *err) {
  struct id_slot *s = &t->ids[id_slot_of(name)];
  if (s->name && strcmp(s->name, name) == 0)
    return s->id;
  int64_t id = smr_catalog_tensor_id(t->cat, name, err);
  if (id >= 0) { /* the slot's last tensor is asked again when it comes */
    free(s->name);
    s->name = smr_xstrdup(name);
    s->id = id;
  }
  return id;
}

static int tensor_entries(smr_trial *t, const char *name, int mode,
                          int64_t mode_step, smr_entries *out, smr_error *err) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&t->mu);
  if (t->tb) { /* TensorBoard */
    int trc = smr_tb_entries(t->tb, name, mode, mode_step, out);
    pthread_mutex_unlock(&t->mu);
    if (trc == SMR_TENSOR_UNAVAILABLE)
      smr_error_set(err, trc, "", -1,
                    "tensor '%s' was never saved in this trial", name);
    return trc;
  }
  int64_t id = tensor_id(t, name, err);
  bool by_step = mode != 0 && mode_step >= 0;
  int rc = id < 0 ? SMR_TENSOR_UNAVAILABLE
           : by_step
               ? smr_step_entries_get(t->step_entries, t->cat, id, mode,
                                      mode_step, out, err)
               : smr_catalog_entries(t->cat, id, mode, mode_step, out, err);
  pthread_mutex_unlock(&t->mu);
  if (rc == SMR_TENSOR_UNAVAILABLE)
    smr_error_set(err, rc, "", -1, "tensor '%s' was never saved in this trial",
                  name);
  return rc;
}

int smr_trial_tensor_steps(smr_trial *t, const char *name,
                           smr_tensor_steps *out, smr_error *err) {
  memset(out, 0, sizeof *out);
  smr_entries es;
  int rc = tensor_entries(t, name, 0, -1, &es, err);
  if (rc)
    return rc;
  out->v = smr_xcalloc(es.n ? es.n : 1, sizeof *out->v);
  for (size_t i = 0; i < es.n; i++) {
    const smr_entry *e = &es.v[i];
    smr_tensor_step *s = out->n ? &out->v[out->n - 1] : NULL;
    if (!s || s->step != e->step || strcmp(s->worker, e->worker) != 0) {
      s = &out->v[out->n++];
      s->step = e->step;
      s->mode = e->mode;
      s->mode_step = e->mode_step;
      s->worker = smr_xstrdup(e->worker);
    }
    if (e->kind == SMR_ENTRY_RAW)
      s->has_value = true;
    else if (e->kind == SMR_ENTRY_SHAPE)
      s->has_shape = true;
    else
      s->reductions |= 1u << (e->reduction * 2 + e->abs);
  }
  smr_entries_free(&es);
  return SMR_OK;
}

void smr_tensor_steps_free(smr_tensor_steps *s) {
  for (size_t i = 0; i < s->n; i++)
    free(s->v[i].worker);
  free(s->v);
  memset(s, 0, sizeof *s);
}

int smr_trial_tensor_step_list(smr_trial *t, const char *name, int mode,
                               bool include_incomplete, smr_i64v *out,
                               smr_error *err) {
  smr_tensor_steps ts;
  int rc = smr_trial_tensor_steps(t, name, &ts, err);
  if (rc)
    return rc;
  smr_i64v all = {0};
  for (size_t i = 0; i < ts.n; i++) {
    const smr_tensor_step *s = &ts.v[i];
    if (mode != SMR_MODE_GLOBAL && s->mode != mode)
      continue;
    if (!include_incomplete && !smr_trial_step_complete(t, s->step))
      continue;
    smr_i64v_push(&all, mode == SMR_MODE_GLOBAL ? s->step : s->mode_step);
  }
  smr_tensor_steps_free(&ts);
  if (all.n > 1)
    qsort(all.v, all.n, sizeof *all.v, cmp_i64);
  for (size_t i = 0; i < all.n; i++)
    if (i == 0 || all.v[i] != all.v[i - 1])
      smr_i64v_push(out, all.v[i]);
  smr_i64v_free(&all);
  return SMR_OK;
}

/* --------------------------------------------------------------- values */

/* When nothing is stored at the step: a broken index file for that step
 * explains it; otherwise availability decides
 * (docs/formats.md#when-a-value-is-not-there). */
static int explain_missing(smr_trial *t, const char *name, int64_t step,
                           int mode, int64_t g, smr_error *err) {
  for (size_t i = 0; !find_step(t, g) && i < t->nproblems; i++) {
    const char *b = base_name(t->problems[i].file);
    int64_t ps = -1;
    char *w = NULL;
    if (strncmp(t->problems[i].file, "index/", 6) == 0 &&
        smr_parse_step_worker(b, &ps, &w) == SMR_OK && ps == g) {
      free(w);
      return smr_error_set(err, SMR_ERR_FORMAT, t->problems[i].file,
                           t->problems[i].offset,
                           "index file for step %lld cannot be read: %s",
                           (long long)g, t->problems[i].message);
    }
    free(w);
  }
  smr_availability a = smr_trial_has_passed_step(t, step, mode);
  const char *mn = smr_mode_name(mode);
  if (a == SMR_AVAILABLE)
    return smr_error_set(err, SMR_TENSOR_UNAVAILABLE_FOR_STEP, "", -1,
                         "tensor '%s' was not saved at %s step %lld", name, mn,
                         (long long)step);
  if (a == SMR_UNAVAILABLE)
    return smr_error_set(err, SMR_STEP_UNAVAILABLE, "", -1,
                         "%s step %lld was not saved", mn, (long long)step);
  if (t->loaded_all_steps)
    return smr_error_set(err, SMR_NO_MORE_DATA, "", -1,
                         "training ended before %s step %lld", mn,
                         (long long)step);
  return smr_error_set(err, SMR_STEP_NOT_YET, "", -1,
                       "%s step %lld is not available yet", mn,
                       (long long)step);
}

/* Entries of the tensor at a step (docs/formats.md#modes-steps-and-workers
 * lookup), for one worker. */
static int lookup(smr_trial *t, const char *name, int64_t step, int mode,
                  const char *worker, smr_entries *out, smr_error *err) {
  int rc = tensor_entries(t, name, mode, step, out, err);
  if (rc)
    return rc;
  int64_t g = step;
  if (out->n == 0 && mode == SMR_MODE_GLOBAL) {
    int m;
    int64_t ms;
    if (smr_trial_step_mode(t, step, &m, &ms) && m != SMR_MODE_GLOBAL) {
      smr_entries_free(out);
      rc = tensor_entries(t, name, m, ms, out, err);
      if (rc)
        return rc;
    }
  } else if (mode != SMR_MODE_GLOBAL &&
             !smr_trial_global_step(t, mode, step, &g)) {
    g = -1;
  }
  if (out->n == 0)
    return explain_missing(t, name, step, mode, g, err);
  /* keep the requested worker, or the smallest worker name (entries come
   * ordered by worker) */
  const char *want = worker ? worker : out->v[0].worker;
  size_t k = 0;
  for (size_t i = 0; i < out->n; i++) {
    if (strcmp(out->v[i].worker, want) == 0) {
      smr_entry tmp = out->v[k];
      out->v[k++] = out->v[i];
      out->v[i] = tmp;
    }
  }
  for (size_t i = k; i < out->n; i++) {
    free(out->v[i].worker);
    free(out->v[i].event_file);
    free(out->v[i].index_path);
    free(out->v[i].problem);
  }
  out->n = k;
  if (k == 0) {
    smr_entries_free(out); /* the caller frees only what it is given */
    return smr_error_set(err, SMR_INVALID_WORKER, "", -1,
                         "worker '%s' has no entry for '%s' at %s step %lld",
                         worker, name, smr_mode_name(mode), (long long)step);
  }
  return SMR_OK;
}

static void fill_loc(smr_value_loc *loc, const smr_entry *e) {
  if (!loc)
    return;
  loc->step = e->step;
  loc->mode = e->mode;
  loc->mode_step = e->mode_step;
  snprintf(loc->worker, sizeof loc->worker, "%s", e->worker);
}

/* Read and decode the record an entry points at; the record's tag must be
 * the name the index gave it. */
/* A tensor decoded in place keeps its record's range (a mapping of the
 * event file, or a buffer) until it is released. */
typedef struct range_owner {
  smr_range range;
  void *owner;
  void (*release)(void *owner);
} range_owner;

static void range_owner_release(void *p) {
  range_owner *ro = p;
  if (ro->release)
    ro->release(ro->owner);
  smr_range_release(&ro->range);
  free(ro);
}

static void keep_range(smr_tensor *t, smr_range *r) {
  range_owner *ro = smr_xcalloc(1, sizeof *ro);
  ro->range = *r;
  ro->owner = t->owner_;
  ro->release = t->release_;
  t->owner_ = ro;
  t->release_ = range_owner_release;
  memset(r, 0, sizeof *r);
}

static int read_entry(smr_trial *t, const smr_entry *e, const char *tag,
                      smr_tensor *out, smr_error *err) {
  if (t->tb) /* TensorBoard: the values are in memory */
    return smr_tb_read_value(t->tb, e, out, err);
  if (e->problem)
    return smr_error_set(err, SMR_ERR_FORMAT, e->index_path, -1, "%s",
                         e->problem);
  if (!e->event_file)
    return smr_error_set(err, SMR_ERR_FORMAT, e->index_path, -1,
                         "index entry for '%s' names no event file", tag);
  smr_range r;
  int rc = smr_source_read_range(t->src, e->event_file, (uint64_t)e->start,
                                 (uint64_t)e->length, &r, err);
  if (rc && t->live && !t->marker)
    /* an event file not (fully) there yet while training runs: wait */
    return smr_error_set(err, SMR_STEP_NOT_YET, e->event_file, e->start,
                         "event file not complete yet");
  if (rc)
    return rc;
  const uint8_t *payload;
  uint64_t plen;
  rc = smr_record_parse(r.data, r.len, e->event_file, (uint64_t)e->start,
                        &payload, &plen, err);
  if (rc == SMR_ERR_INCOMPLETE)
    rc = SMR_ERR_FORMAT; /* the file is complete: the record is cut short */
  if (rc == SMR_OK && plen + SMR_RECORD_OVERHEAD != (uint64_t)e->length)
    rc = smr_error_set(err, SMR_ERR_FORMAT, e->event_file, e->start,
                       "record holds %llu payload bytes but the index entry "
                       "is %lld bytes long (expected payload + 16)",
                       (unsigned long long)plen, (long long)e->length);
  char *name = NULL;
  if (rc == SMR_OK) /* the elements stay where they lie in the range */
    rc = smr_event_decode_borrow(payload, (size_t)plen, e->event_file,
                                 (uint64_t)e->start, out, &name, err);
  if (rc == SMR_OK)
    keep_range(out, &r);
  smr_range_release(&r);
  if (rc == SMR_OK && (!name || strcmp(name, tag) != 0)) {
    smr_error_set(err, SMR_ERR_FORMAT, e->event_file, e->start,
                  "record holds tensor '%s', the index says '%s'",
                  name ? name : "", tag);
    smr_tensor_release(out);
    rc = SMR_ERR_FORMAT;
  }
  free(name);
  return rc;
}

static const smr_entry *find_kind(const smr_entries *es, int kind, int red,
                                  bool abs) {
  for (size_t i = 0; i < es->n; i++) {
    const smr_entry *e = &es->v[i];
    if (e->kind == kind &&
        (kind != SMR_ENTRY_REDUCTION || (e->reduction == red && e->abs == abs)))
      return e;
  }
  return NULL;
}

/* ------------------------------------------------------ read-ahead */

void smr_trial_share_records(smr_trial *t, bool on) {
  smr_source_share_records(t->src, on);
}

void smr_trial_set_prefetch(smr_trial *t, size_t steps, int64_t end_step) {
  pthread_mutex_lock(&t->mu);
  t->pf_steps = smr_source_is_remote(t->src) ? steps : 0;
  t->pf_end = end_step;
  t->pf_horizon = INT64_MAX;
  pthread_mutex_unlock(&t->mu);
}

void smr_trial_set_prefetch_horizon(smr_trial *t, int64_t last) {
  pthread_mutex_lock(&t->mu);
  t->pf_horizon = last;
  pthread_mutex_unlock(&t->mu);
}

static size_t step_index(const smr_trial *t, int64_t g) {
  const step_info *s = find_step(t, g);
  return s ? (size_t)(s - t->steps) : t->nsteps;
}

/* The steps after global step g whose records of `name` to ask for now:
 * positions (*from, *to] of t->steps, each step asked for once. */
static bool prefetch_window(smr_trial *t, const char *name, int64_t g,
                            size_t *from, size_t *to) {
  size_t i = step_index(t, g);
  if (i >= t->nsteps)
    return false;
  smr_error e;
  pthread_mutex_lock(&t->mu);
  int64_t id = tensor_id(t, name, &e);
  bool any = id >= 0 && t->pf_steps;
  if (any && (size_t)id >= t->pf_n) {
    size_t n = (size_t)id + 64;
    t->pf_upto = smr_xrealloc(t->pf_upto, n * sizeof *t->pf_upto);
    for (size_t k = t->pf_n; k < n; k++)
      t->pf_upto[k] = -1;
    t->pf_n = n;
  }
  if (any) {
    size_t hi = i + t->pf_steps < t->nsteps ? i + t->pf_steps : t->nsteps - 1;
    while (hi > i && ((t->pf_end >= 0 && t->steps[hi].step >= t->pf_end) ||
                      t->steps[hi].step > t->pf_horizon))
      hi--;
    int64_t done = t->pf_upto[id];
    *from = done > g ? step_index(t, done) : i;
    *to = hi;
    any = *from < *to && *from < t->nsteps;
    if (any)
      t->pf_upto[id] = t->steps[hi].step;
  }
  pthread_mutex_unlock(&t->mu);
  return any;
}

/* After a value of `name` was read at global step g: ask the source for
 * its records at the next steps (remote trials, see smr_trial_set_prefetch)
 * so that they arrive in parallel while the rules work. */
static void prefetch_after(smr_trial *t, const char *name, int64_t g,
                           const char *worker) {
  size_t from, to;
  if (!t->pf_steps || !prefetch_window(t, name, g, &from, &to))
    return;
  smr_error e;
  for (size_t j = from + 1; j <= to; j++) {
    smr_entries es;
    if (lookup(t, name, t->steps[j].step, SMR_MODE_GLOBAL, worker, &es, &e))
      continue;
    const smr_entry *r = find_kind(&es, SMR_ENTRY_RAW, 0, false);
    if (r && !r->problem && r->event_file && r->length > 0)
      smr_source_prefetch(t->src, r->event_file, (uint64_t)r->start,
                          (uint64_t)r->length);
    smr_entries_free(&es);
  }
}

int smr_trial_value(smr_trial *t, const char *name, int64_t step, int mode,
                    const char *worker, smr_tensor *out, smr_value_loc *loc,
                    smr_error *err) {
  memset(out, 0, sizeof *out);
  smr_entries es;
  int rc = lookup(t, name, step, mode, worker, &es, err);
  if (rc)
    return rc;
  const smr_entry *e = find_kind(&es, SMR_ENTRY_RAW, 0, false);
  fill_loc(loc, &es.v[0]);
  if (!e)
    rc = smr_error_set(err, SMR_TENSOR_UNAVAILABLE_FOR_STEP, "", -1,
                       "only the %s of '%s' was saved at %s step %lld",
                       find_kind(&es, SMR_ENTRY_SHAPE, 0, false) ? "shape"
                                                                 : "reductions",
                       name, smr_mode_name(mode), (long long)step);
  else
    rc = read_entry(t, e, name, out, err);
  if (rc == SMR_OK && t->pf_steps)
    prefetch_after(t, name, e->step, e->worker);
  smr_entries_free(&es);
  return rc;
}

int smr_trial_reduction(smr_trial *t, const char *name, int64_t step, int mode,
                        const char *worker, int reduction, bool abs,
                        double *out, bool *saved, smr_value_loc *loc,
                        smr_error *err) {
  smr_entries es;
  int rc = lookup(t, name, step, mode, worker, &es, err);
  if (rc)
    return rc;
  fill_loc(loc, &es.v[0]);
  const smr_entry *e = find_kind(&es, SMR_ENTRY_REDUCTION, reduction, abs);
  smr_tensor v;
  memset(&v, 0, sizeof v);
  if (e) {
    char *tag = smr_reduction_tensor_name(name, reduction, abs);
    rc = read_entry(t, e, tag, &v, err);
    free(tag);
    if (rc == SMR_OK && v.count < 1)
      rc = smr_error_set(err, SMR_ERR_FORMAT, e->event_file, e->start,
                         "saved reduction of '%s' holds no value", name);
    if (rc == SMR_OK && v.dtype != SMR_DT_STRING)
      *out = smr_tensor_get(&v, 0);
    *saved = true;
  } else if ((e = find_kind(&es, SMR_ENTRY_RAW, 0, false)) != NULL) {
    rc = read_entry(t, e, name, &v, err);
    if (rc == SMR_OK)
      rc = smr_tensor_reduce(&v, (smr_reduction)reduction, abs, out, err);
    *saved = false;
  } else {
    rc = smr_error_set(err, SMR_TENSOR_UNAVAILABLE_FOR_STEP, "", -1,
                       "reduction %s%s of '%s' is neither saved nor "
                       "computable at %s step %lld",
                       abs ? "abs_" : "",
                       smr_reduction_name((smr_reduction)reduction), name,
                       smr_mode_name(mode), (long long)step);
  }
  smr_tensor_release(&v);
  smr_entries_free(&es);
  return rc;
}

int smr_trial_shape(smr_trial *t, const char *name, int64_t step, int mode,
                    const char *worker, int *ndim, int64_t shape[SMR_MAX_DIMS],
                    smr_error *err) {
  smr_entries es;
  int rc = lookup(t, name, step, mode, worker, &es, err);
  if (rc)
    return rc;
  const smr_entry *e = find_kind(&es, SMR_ENTRY_SHAPE, 0, false);
  if (e) {
    *ndim = e->ndim;
    memcpy(shape, e->shape, sizeof e->shape);
  } else if ((e = find_kind(&es, SMR_ENTRY_RAW, 0, false)) != NULL) {
    smr_tensor v;
    rc = read_entry(t, e, name, &v, err);
    if (rc == SMR_OK) {
      *ndim = v.ndim;
      memcpy(shape, v.shape, sizeof v.shape);
    }
    smr_tensor_release(&v);
  } else {
    rc = smr_error_set(err, SMR_TENSOR_UNAVAILABLE_FOR_STEP, "", -1,
                       "neither shape nor value of '%s' saved at step %lld",
                       name, (long long)step);
  }
  smr_entries_free(&es);
  return rc;
}
