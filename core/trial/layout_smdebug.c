/* layout_smdebug.c - smdebug's layout of a trial (docs/formats.md):
 * index/<step>/<step>_<worker>.json files read into the catalog, only the
 * new ones at each refresh (listing only the paths that can be new), and
 * collections/<...>_collections.json for collections and workers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "format/index.h"
#include "source/source.h"
#include "trial/catalog.h"
#include "trial/trial_int.h"

/* Index and collections files are small; anything larger is not one. */
#define MAX_INDEX_BYTES (64u << 20)
#define MAX_COLLECTIONS_BYTES (16u << 20)

/* ---------------------------------------------------------- index files */

/* "<dir>/<step digits>" of an index file's path: every path of that step
 * and later sorts after it. */
static char *step_key(const char *path) {
  const char *b = smr_trial_base_name(path);
  return smr_xstrndup(path, (size_t)(b - path) + strspn(b, "0123456789"));
}

/* Remember where the next listing must start at the latest so that an
 * index file left out now is listed again. */
static void note_retry(smr_trial *t, const char *path) {
  char *k = step_key(path);
  if (t->index_retry && strcmp(t->index_retry, k) <= 0) {
    free(k);
    return;
  }
  free(t->index_retry);
  t->index_retry = k;
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
  if (smr_parse_step_worker(smr_trial_base_name(path), &step, &worker) !=
      SMR_OK) {
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
    note_retry(t, path);
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
    if (smr_parse_step_worker(smr_trial_base_name(known->v[i]), &step, &w) !=
        SMR_OK) {
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

/* Where a listing of index files can start (S3 lists in key order and
 * bills per page; on disk, the step folders before it are neither read nor
 * stat'ed, which a live trial of many steps pays at every refresh;
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
    after = step_key(known->v[v[pick].first]);
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

/* The starting key of an incremental listing given the recorded index
 * paths `known`, or NULL (list everything): no later than an index file
 * the last refresh left out to read again.  On disk a process lists
 * everything once, so that it also finds the files an earlier process left
 * out (a run ended while one was being written); from S3, where listing is
 * billed per page, it starts from the stored catalog as smdebug does. */
static char *listing_start(smr_trial *t, const smr_strv *known) {
  if (!t->index_listed && !smr_source_is_remote(t->src))
    return NULL;
  char *after = index_start_after(known);
  char *retry = t->index_retry;
  t->index_retry = NULL;
  if (after && retry && strcmp(retry, after) < 0) {
    free(after);
    return retry;
  }
  free(retry);
  return after;
}

/* listing_start from what the catalog records now (outside a
 * transaction). */
static char *recorded_start(smr_trial *t) {
  smr_strv known = {0};
  smr_error e;
  char *after = smr_catalog_index_paths(t->cat, &known, &e) == SMR_OK
                    ? listing_start(t, &known)
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
    if (!known || !smr_trial_sorted_contains(known, l->files[i].path))
      smr_source_listing_add(&todo, smr_xstrdup(l->files[i].path),
                             l->files[i].size, l->files[i].mtime_ns);
  smr_source_read_ahead(t->src, &todo);
  smr_source_listing_free(&todo);
}

/* Bring the catalog up to date with the index files on disk. */
int smr_trial_smdebug_sync(smr_trial *t, size_t *added, smr_error *err) {
  smr_source_listing l = {0};
  char *after = NULL;
  int rc = SMR_OK;
  bool remote = smr_source_is_remote(t->src);
  if (remote) { /* the network is not waited on inside the transaction */
    after = recorded_start(t);
    rc = list_index_files(t, after, &l, err);
    if (rc != SMR_OK) { /* e.g. the network: keep what is known */
      free(after);
      return rc;
    }
  }
  smr_strv known = {0};
  /* Read what is recorded inside the write transaction: another process
   * sharing the state file may have added the same files meanwhile. */
  rc = smr_catalog_begin(t->cat, err);
  if (rc == SMR_OK)
    rc = smr_catalog_index_paths(t->cat, &known, err);
  if (rc == SMR_OK && !remote) { /* on disk, from the paths just read */
    after = listing_start(t, &known);
    rc = list_index_files(t, after, &l, err);
  }
  /* A recorded index file that disappeared means the directory was
   * rewritten by a new run: start over.  (An incremental listing can only
   * vouch for the paths after its start.) */
  size_t present = 0, expected = known.n;
  for (size_t i = 0; after && i < known.n; i++)
    expected -= strcmp(known.v[i], after) <= 0;
  for (size_t i = 0; rc == SMR_OK && i < l.n; i++)
    present += smr_trial_sorted_contains(&known, l.files[i].path);
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
    if (!reset && smr_trial_sorted_contains(&known, l.files[i].path))
      continue;
    rc = ingest_index(t, l.files[i].path, err);
    n++;
  }
  if (rc == SMR_OK)
    rc = smr_catalog_commit(t->cat, err);
  else
    smr_catalog_rollback(t->cat);
  t->index_listed = t->index_listed || rc == SMR_OK;
  smr_strv_free(&known);
  smr_source_listing_free(&l);
  if (added)
    *added = n;
  if (n || reset)
    smr_trial_catalog_changed(t);
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
void smr_trial_smdebug_load_collections(smr_trial *t) {
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
    smr_trial_add_problem(t, "collections", -1, e.msg);
  }
  bool have = false;
  for (size_t i = 0; i < l.n; i++) {
    const char *path = l.files[i].path;
    char *worker = smr_parse_collections_worker(smr_trial_base_name(path));
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
      smr_trial_add_problem(t, path, e.offset, e.msg);
      continue;
    }
    if (!have) {
      t->colls = c;
      t->num_workers = c.num_workers;
      have = true;
      continue;
    }
    if (!collections_equal(&t->colls, &c))
      smr_trial_add_problem(t, path, -1,
                            "collection definitions differ from the first "
                            "collections file; the first one is used");
    smr_collections_free(&c);
  }
  smr_source_listing_free(&l);
  smr_strv_sort_unique(&t->workers);
}
