/* tb_trial.c - a TensorBoard log directory read into memory: files,
 * tags, modes, steps (docs/tensorboard.md).  See tb_trial.h.
 *
 * This file: settings, problems, the model and the queries; reading the
 * event files is tb_read.c's, naming tags and their modes tb_tags.c's.
 * Model: per tag, per mode, the values sorted by step (tb_series.h: 4-byte
 * steps and float32 values until one needs 8 bytes); the (mode, step)
 * pairs stored by global step with their wall time, per mode ordered by
 * step (tb_pairs.h).  Values are read under a read lock,
 * refreshes take the write lock. */
#include "trial/tb_trial.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/regex.h"
#include "format/mode.h"
#include "trial/tb_int.h"
#include "trial/tb_series.h"

/* Problems kept per trial: a damaged file cannot fill memory with them. */
#define MAX_PROBLEMS 1000
#define WORKER "worker_0"

static const char *const default_train[] = {"train", "training", NULL};
static const char *const default_eval[] = {"eval",       "val",  "valid",
                                           "validation", "test", NULL};
static const char *const default_predict[] = {"predict", "prediction",
                                              "inference", NULL};

/* --------------------------------------------------------- settings */

int smr_tb_new(const smr_tb_settings *s, smr_tb **out, smr_error *err) {
  static const smr_tb_settings defaults = {0};
  if (!s)
    s = &defaults;
  smr_tb *tb = smr_xcalloc(1, sizeof *tb);
  pthread_rwlock_init(&tb->lock, NULL);
  tb->words[SMR_MODE_TRAIN] = s->train_words ? s->train_words : default_train;
  tb->words[SMR_MODE_EVAL] = s->eval_words ? s->eval_words : default_eval;
  tb->words[SMR_MODE_PREDICT] =
      s->predict_words ? s->predict_words : default_predict;
  tb->default_mode =
      s->default_mode >= SMR_MODE_TRAIN && s->default_mode <= SMR_MODE_PREDICT
          ? s->default_mode
          : SMR_MODE_TRAIN;
  tb->strip = s->strip_mode;
  int rc = smr_regex_compile(s->losses_regex ? s->losses_regex : "(?i)loss",
                             &tb->losses, err);
  if (rc != SMR_OK) {
    smr_tb_free(tb);
    return rc;
  }
  *out = tb;
  return SMR_OK;
}

void tb_free_model(smr_tb *tb) {
  for (size_t i = 0; i < tb->nfiles; i++) {
    tbfile *f = &tb->files[i];
    for (size_t k = 0; k < f->nraws; k++)
      free(f->raws[k].raw);
    free(f->raws);
    free(f->rawmap.slot);
    free(f->path);
    free(f->prefix);
  }
  free(tb->files);
  for (size_t i = 0; i < tb->ntags; i++) {
    for (int m = 0; m < 5; m++)
      tb_series_free(&tb->tags[i].s[m]);
    free(tb->tags[i].name);
  }
  free(tb->tags);
  free(tb->tagmap.slot);
  tb_pairs_free(&tb->pairs);
  for (size_t i = 0; i < tb->nproblems; i++) {
    free(tb->problems[i].file);
    free(tb->problems[i].message);
  }
  free(tb->problems);
  tb->files = NULL;
  tb->nfiles = 0;
  tb->tags = NULL;
  tb->ntags = tb->captags = 0;
  memset(&tb->tagmap, 0, sizeof tb->tagmap);
  tb->problems = NULL;
  tb->nproblems = tb->dropped_problems = 0;
}

void smr_tb_free(smr_tb *tb) {
  if (!tb)
    return;
  tb_free_model(tb);
  smr_regex_free(tb->losses);
  pthread_rwlock_destroy(&tb->lock);
  free(tb);
}

void tb_add_problem(smr_tb *tb, const char *file, int64_t offset,
                    const char *fmt, ...) {
  if (tb->nproblems >= MAX_PROBLEMS) {
    tb->dropped_problems++;
    return;
  }
  /* the offset in the message too: the text output prints file and
   * message */
  char msg[SMR_ERR_MSG_MAX];
  int at = snprintf(msg, sizeof msg, "offset %lld: ", (long long)offset);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + at, sizeof msg - (size_t)at, fmt, ap);
  va_end(ap);
  tb->problems =
      smr_xrealloc(tb->problems, (tb->nproblems + 1) * sizeof *tb->problems);
  tb->problems[tb->nproblems++] =
      (problem){smr_xstrdup(file), smr_xstrdup(msg), offset};
}

void smr_tb_problems(smr_tb *tb, smr_tb_problem_fn fn, void *ctx) {
  pthread_rwlock_rdlock(&tb->lock);
  for (size_t i = 0; i < tb->nproblems; i++)
    fn(ctx, tb->problems[i].file, tb->problems[i].offset,
       tb->problems[i].message);
  if (tb->dropped_problems) {
    char msg[128];
    snprintf(msg, sizeof msg, "%zu more problems not listed",
             tb->dropped_problems);
    fn(ctx, "", -1, msg);
  }
  pthread_rwlock_unlock(&tb->lock);
}

/* ------------------------------------------------------------ queries */

int smr_tb_step_rows(smr_tb *tb, smr_step_row **rows, size_t *n) {
  pthread_rwlock_rdlock(&tb->lock);
  const tb_pairs *p = &tb->pairs;
  *n = p->numbered;
  *rows = smr_xcalloc(*n ? *n : 1, sizeof **rows);
  for (size_t g = 0; g < *n; g++)
    (*rows)[g] =
        (smr_step_row){(int64_t)g, p->mode[g], p->step[g], smr_xstrdup(WORKER)};
  pthread_rwlock_unlock(&tb->lock);
  return SMR_OK;
}

size_t smr_tb_steps(smr_tb *tb, smr_tb_step_fn fn, void *ctx) {
  pthread_rwlock_rdlock(&tb->lock);
  const tb_pairs *p = &tb->pairs;
  size_t n = p->numbered;
  for (size_t g = 0; fn && g < n; g++)
    fn(ctx, (int64_t)g, p->mode[g], p->step[g]);
  pthread_rwlock_unlock(&tb->lock);
  return n;
}

void smr_tb_tensor_names(smr_tb *tb, smr_strv *out) {
  pthread_rwlock_rdlock(&tb->lock);
  for (size_t i = 0; i < tb->ntags; i++)
    smr_strv_push(out, tb->tags[i].name);
  pthread_rwlock_unlock(&tb->lock);
  smr_strv_sort_unique(out);
}

static void push_entry_g(smr_entries *out, int64_t t, int mode, int64_t step,
                         int64_t g) {
  if (out->n == out->cap) {
    out->cap = out->cap ? out->cap * 2 : 16;
    out->v = smr_xrealloc(out->v, out->cap * sizeof *out->v);
  }
  smr_entry *e = &out->v[out->n++];
  memset(e, 0, sizeof *e);
  e->step = g;
  e->mode = mode;
  e->mode_step = step;
  e->worker = smr_xstrdup(WORKER);
  e->kind = SMR_ENTRY_RAW;
  e->tensor = t;
  e->length = -1;
}

static void push_entry(smr_tb *tb, smr_entries *out, int64_t t, int mode,
                       int64_t step) {
  int64_t g = tb_pairs_find(&tb->pairs, mode, step);
  if (g >= 0)
    push_entry_g(out, t, mode, step, g);
}

/* Every value of a series with its global step: a merge walk of the
 * series and the mode's index (both by step). */
static void push_series(const smr_tb *tb, smr_entries *out, int64_t t, int m,
                        const series *s) {
  const tb_pairs *p = &tb->pairs;
  const uint32_t *ix = p->by_mode[m];
  size_t j = 0, n = p->nby_mode[m];
  for (size_t i = 0; i < s->n; i++) {
    int64_t step = tb_series_step(s, i);
    while (j < n && p->step[ix[j]] < step)
      j++;
    if (j < n && p->step[ix[j]] == step)
      push_entry_g(out, t, m, step, ix[j]);
  }
}

static int cmp_entry(const void *a, const void *b) {
  const smr_entry *x = a, *y = b;
  return x->step < y->step ? -1 : x->step > y->step;
}

int smr_tb_entries(smr_tb *tb, const char *name, int mode, int64_t mode_step,
                   smr_entries *out) {
  memset(out, 0, sizeof *out);
  pthread_rwlock_rdlock(&tb->lock);
  int64_t t = tb_tag_lookup(tb, name);
  if (t < 0) {
    pthread_rwlock_unlock(&tb->lock);
    return SMR_TENSOR_UNAVAILABLE;
  }
  const tag *tg = &tb->tags[t];
  if (mode == SMR_MODE_GLOBAL && mode_step >= 0) {
    /* a global step: the pair it numbers */
    const tb_pairs *p = &tb->pairs;
    if ((uint64_t)mode_step < p->numbered) {
      size_t g = (size_t)mode_step;
      bool found;
      tb_series_find(&tg->s[p->mode[g]], p->step[g], &found);
      if (found)
        push_entry_g(out, t, p->mode[g], p->step[g], mode_step);
    }
  } else {
    for (int m = SMR_MODE_TRAIN; m <= SMR_MODE_GLOBAL; m++) {
      if (mode && mode != SMR_MODE_GLOBAL && m != mode)
        continue;
      const series *s = &tg->s[m];
      if (mode_step >= 0) {
        bool found;
        tb_series_find(s, mode_step, &found);
        if (found)
          push_entry(tb, out, t, m, mode_step);
        continue;
      }
      push_series(tb, out, t, m, s);
    }
    bool sorted = true; /* one mode's values usually are */
    for (size_t i = 1; sorted && i < out->n; i++)
      sorted = out->v[i - 1].step <= out->v[i].step;
    if (!sorted)
      qsort(out->v, out->n, sizeof *out->v, cmp_entry);
  }
  pthread_rwlock_unlock(&tb->lock);
  return SMR_OK;
}

typedef struct scalar_box {
  union {
    float f;
    double d;
  } u;
} scalar_box;

int smr_tb_read_value(smr_tb *tb, const smr_entry *e, smr_tensor *out,
                      smr_error *err) {
  memset(out, 0, sizeof *out);
  pthread_rwlock_rdlock(&tb->lock);
  bool found = false;
  double v = 0, wall = 0;
  bool dbl = false;
  if (e->tensor >= 0 && (size_t)e->tensor < tb->ntags && e->mode >= 1 &&
      e->mode <= 4) {
    const tag *tg = &tb->tags[e->tensor];
    size_t i = tb_series_find(&tg->s[e->mode], e->mode_step, &found);
    if (found) {
      v = tb_series_value(&tg->s[e->mode], i);
      dbl = tg->dbl;
    }
    const tb_pairs *p = &tb->pairs;
    int64_t g = e->step; /* the entry's global step: no search */
    if (g < 0 || (uint64_t)g >= p->numbered || p->mode[g] != e->mode ||
        p->step[g] != e->mode_step) /* the folder was read again since */
      g = tb_pairs_find(p, e->mode, e->mode_step);
    if (g >= 0)
      wall = p->wall[g];
  }
  pthread_rwlock_unlock(&tb->lock);
  if (!found) /* the folder was rewritten since the entry was looked up */
    return smr_error_set(err, SMR_TENSOR_UNAVAILABLE_FOR_STEP, "", -1,
                         "the value is no longer in the event files");
  scalar_box *b = smr_xcalloc(1, sizeof *b);
  if (dbl)
    b->u.d = v;
  else
    b->u.f = (float)v; /* exact: every float value was a float32 */
  out->dtype = out->stored_dtype = dbl ? SMR_DT_DOUBLE : SMR_DT_FLOAT;
  out->ndim = 0;
  out->count = 1;
  out->data = (const uint8_t *)b;
  out->nbytes = dbl ? 8 : 4;
  out->step = e->step;
  out->wall_time = wall;
  out->mode = e->mode;
  out->mode_step = e->mode_step;
  out->owner_ = b;
  out->release_ = free;
  return SMR_OK;
}

void smr_tb_collections(smr_tb *tb, smr_collections *out) {
  smr_collections_free(out);
  memset(out, 0, sizeof *out);
  smr_strv names = {0};
  smr_tb_tensor_names(tb, &names);
  out->items = smr_xcalloc(2, sizeof *out->items);
  out->n = 2;
  out->num_workers = 1;
  smr_collection *losses = &out->items[0], *scalars = &out->items[1];
  losses->name = smr_xstrdup("losses");
  scalars->name = smr_xstrdup("scalars");
  scalars->tensor_names = smr_xcalloc(names.n ? names.n : 1, sizeof(char *));
  losses->tensor_names = smr_xcalloc(names.n ? names.n : 1, sizeof(char *));
  for (size_t i = 0; i < names.n; i++) {
    scalars->tensor_names[scalars->n_tensor_names++] = smr_xstrdup(names.v[i]);
    if (smr_regex_search(tb->losses, names.v[i]))
      losses->tensor_names[losses->n_tensor_names++] = smr_xstrdup(names.v[i]);
  }
  smr_strv_free(&names);
}
