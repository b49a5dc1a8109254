/* trial_steps.c - the step model: steps, modes and workers as the
 * catalog records them, which steps are complete, and whether a step has
 * passed (docs/formats.md#step-states).  Rebuilt after each refresh. */
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "format/mode.h"
#include "trial/catalog.h"
#include "trial/trial_int.h"

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

/* ------------------------------------------------------------ step model */

static int cmp_row(const void *a, const void *b) {
  const smr_step_row *x = a, *y = b;
  if (x->step != y->step)
    return x->step < y->step ? -1 : 1;
  return strcmp(x->worker, y->worker);
}

/* Workers seen in index files (t->row_workers) stand in when no
 * collections file names them. */
static void workers_from_rows(smr_trial *t) {
  if (t->workers.n == 0)
    for (size_t i = 0; i < t->row_workers.n; i++)
      smr_strv_push(&t->workers, t->row_workers.v[i]);
  if (t->num_workers <= 0)
    t->num_workers = t->workers.n ? (int)t->workers.n : 1;
}

/* docs/formats.md#complete-steps-and-the-end-of-training: last_complete_step by
 * worker count, the incomplete-step window, and the end of training. */
void smr_trial_compute_completeness(smr_trial *t) {
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

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Each worker's latest global step, from rows sorted by step. */
static void worker_latest_from_rows(smr_trial *t, smr_step_row *rows,
                                    size_t n) {
  smr_strv_free(&t->row_workers);
  for (size_t i = 0; i < n; i++)
    smr_strv_push(&t->row_workers, rows[i].worker);
  smr_strv_sort_unique(&t->row_workers);
  free(t->row_worker_latest);
  size_t nw = t->row_workers.n;
  t->row_worker_latest = smr_xcalloc(nw ? nw : 1, sizeof(int64_t));
  for (size_t i = 0; i < n; i++) {
    char **hit =
        bsearch(&rows[i].worker, t->row_workers.v, nw, sizeof(char *), cmp_str);
    if (hit) /* always: the names came from these rows */
      t->row_worker_latest[hit - t->row_workers.v] = rows[i].step;
  }
}

size_t smr_trial_worker_latest(const smr_trial *t, size_t i,
                               const char **worker, int64_t *step) {
  if (t->row_workers.n == 0 && t->nsteps && t->workers.n == 1) {
    /* a TensorBoard folder: one worker, no index rows */
    if (i == 0) {
      *worker = t->workers.v[0];
      *step = t->steps[t->nsteps - 1].step;
    }
    return 1;
  }
  if (i < t->row_workers.n) {
    *worker = t->row_workers.v[i];
    *step = t->row_worker_latest[i];
  }
  return t->row_workers.n;
}

int smr_trial_rebuild_steps(smr_trial *t, smr_error *err) {
  smr_step_row *rows;
  size_t n;
  int rc = smr_catalog_step_rows(t->cat, &rows, &n, err);
  if (rc)
    return rc;
  if (n > 1) /* qsort of an empty (NULL) array is undefined */
    qsort(rows, n, sizeof *rows, cmp_row);
  worker_latest_from_rows(t, rows, n);
  workers_from_rows(t);
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
  smr_trial_index_steps(t);
  smr_trial_compute_completeness(t);
  return SMR_OK;
}

int smr_trial_num_workers(const smr_trial *t) {
  return t->num_workers;
}
const smr_strv *smr_trial_workers(const smr_trial *t) {
  return &t->workers;
}

/* ---------------------------------------------------------------- steps */

bool smr_trial_step_complete(const smr_trial *t, int64_t g) {
  const step_info *s = smr_trial_find_step(t, g);
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

/* A step's place in its mode's index while the index is sorted: the key
 * travels with the position (qsort has no context argument). */
typedef struct mode_key {
  int64_t key;
  uint32_t at;
} mode_key;

static int cmp_mode_key(const void *a, const void *b) {
  const mode_key *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return x->at < y->at ? -1 : x->at > y->at;
}

/* Mode m's index ordered by (mode step, global step), through a buffer
 * of keys only this once. */
static void sort_mode_index(smr_trial *t, int m) {
  size_t n = t->nby_mode[m];
  uint32_t *ix = t->by_mode[m];
  mode_key *k = smr_xmalloc(n * sizeof *k);
  for (size_t i = 0; i < n; i++)
    k[i] = (mode_key){t->steps[ix[i]].mode_step, ix[i]};
  qsort(k, n, sizeof *k, cmp_mode_key);
  for (size_t i = 0; i < n; i++)
    ix[i] = k[i].at;
  free(k);
}

void smr_trial_index_steps(smr_trial *t) {
  for (int m = 1; m <= 3; m++) {
    free(t->by_mode[m]);
    t->by_mode[m] = NULL;
    t->nby_mode[m] = 0;
  }
  size_t count[5] = {0};
  for (size_t i = 0; i < t->nsteps; i++)
    if (t->steps[i].mode >= 1 && t->steps[i].mode <= 3)
      count[t->steps[i].mode]++;
  for (int m = 1; m <= 3; m++)
    if (count[m])
      t->by_mode[m] = smr_xmalloc(count[m] * sizeof *t->by_mode[m]);
  bool sorted[5] = {true, true, true, true, true};
  int64_t last[5] = {0};
  for (size_t i = 0; i < t->nsteps; i++) {
    int m = t->steps[i].mode;
    if (m < 1 || m > 3) /* GLOBAL queries walk t->steps itself */
      continue;
    size_t k = t->nby_mode[m]++;
    t->by_mode[m][k] = (uint32_t)i;
    if (k && last[m] > t->steps[i].mode_step)
      sorted[m] = false; /* mode steps usually grow with global steps */
    last[m] = t->steps[i].mode_step;
  }
  for (int m = 1; m <= 3; m++)
    if (!sorted[m])
      sort_mode_index(t, m);
}

/* The first step of `mode` whose key (global or mode step) is >= key, in
 * the order a scan of t->steps would prefer it; NULL when none. */
static const step_info *first_at_or_after(const smr_trial *t, int mode,
                                          int64_t key) {
  bool global = mode == SMR_MODE_GLOBAL;
  if (!global && (mode < 1 || mode > 3))
    return NULL;
  size_t lo = 0, hi = global ? t->nsteps : t->nby_mode[mode];
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int64_t k =
        global ? t->steps[mid].step : t->steps[t->by_mode[mode][mid]].mode_step;
    if (k < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (global)
    return lo < t->nsteps ? &t->steps[lo] : NULL;
  return lo < t->nby_mode[mode] ? &t->steps[t->by_mode[mode][lo]] : NULL;
}

int smr_trial_cmp_i64(const void *a, const void *b) {
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
    qsort(out->v, out->n, sizeof *out->v, smr_trial_cmp_i64);
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
  const step_info *s = smr_trial_find_step(t, step);
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
  const step_info *s = first_at_or_after(t, mode, mode_step);
  if (!s || s->mode_step != mode_step)
    return false;
  *step = s->step;
  return true;
}

/* docs/formats.md#step-states, literally. */
smr_availability smr_trial_has_passed_step(const smr_trial *t, int64_t step,
                                           int mode) {
  /* the step of the mode with the smallest key >= step */
  const step_info *best = first_at_or_after(t, mode, step);
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
