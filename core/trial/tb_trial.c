/* tb_trial.c - a TensorBoard log directory read into memory: files,
 * tags, modes, steps (docs/tensorboard.md).  See tb_trial.h.
 *
 * Reading: every event file in path order, from where the last refresh
 * stopped, in chunks of CHUNK bytes (so a 40 MB file never sits in memory
 * whole); a record cut short at the end of a file is read again next time.
 * Model: per tag, per mode, the values sorted by step (16 bytes each); per
 * (mode, step) pair its global step and wall time.  Values are read under
 * a read lock, refreshes take the write lock. */
#include "trial/tb_trial.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/regex.h"
#include "format/mode.h"
#include "format/record.h"
#include "format/tb_event.h"
#include "trial/tb_series.h"

/* 1 MB: the chunk is a buffer of the source's, kept as a spare after use */
#define CHUNK ((size_t)1 << 20)
/* Problems kept per trial: a damaged file cannot fill memory with them. */
#define MAX_PROBLEMS 1000
#define WORKER "worker_0"

static const char *const default_train[] = {"train", "training", NULL};
static const char *const default_eval[] = {"eval",       "val",  "valid",
                                           "validation", "test", NULL};
static const char *const default_predict[] = {"predict", "prediction",
                                              "inference", NULL};

typedef tb_series series; /* a tag's values in one mode, by Event.step */

typedef struct tag {
  char *name;
  series s[5];        /* by mode 1..4 */
  bool dbl;           /* some value was a double: values read as float64 */
  bool scalar_tensor; /* seen as a tensor under the scalars plugin */
} tag;

/* (mode, Event.step) -> global step */
typedef struct pair {
  int64_t step;
  double wall_time; /* of the first value read at it */
  uint32_t g;       /* its global step, PAIR_NO_G until numbered */
  int32_t mode;
} pair; /* 24 bytes: a folder of 1 M scalars may hold 200,000 pairs */

/* Global steps number pairs, whose index is a uint32_t (the map's). */
#define PAIR_NO_G UINT32_MAX

/* A string -> index table (open addressing, grows at half load). */
typedef struct strmap {
  uint32_t *slot; /* index + 1; 0 = empty */
  size_t cap, n;
} strmap;

typedef struct rawtag {
  char *raw;  /* the tag as written */
  size_t tag; /* index in tb->tags */
  int mode;
} rawtag;

typedef struct tbfile {
  char *path;
  uint64_t done;   /* bytes read up to a record boundary */
  bool dead;       /* framing lost: nothing more is read */
  bool tail_said;  /* a cut-short end was reported */
  int folder_mode; /* mode of its folder (Keras' train/, validation/) */
  char *prefix;    /* tensor names start with it ("" or "run/") */
  rawtag *raws;    /* this file's tags as written, resolved */
  size_t nraws;
  strmap rawmap;
} tbfile;

typedef struct problem {
  char *file, *message;
  int64_t offset;
} problem;

struct smr_tb {
  pthread_rwlock_t lock;
  const char *const *words[4]; /* by mode 1..3 (0 unused) */
  int default_mode;
  bool strip;
  smr_regex *losses;
  tbfile *files;
  size_t nfiles;
  tag *tags;
  size_t ntags, captags;
  strmap tagmap;
  pair *pairs;
  size_t npairs, capp;
  uint32_t *pairmap; /* (pair index + 1), open addressing by (mode, step) */
  size_t pairmap_cap;
  uint32_t *by_g; /* pair index of each global step */
  /* per mode, (step, global step) of its pairs by step: every tag's
   * series of the mode is a subsequence, so a tensor's entries are one
   * merge walk, not a hash lookup (a cache miss) per value */
  struct mstep {
    int64_t step, g;
  } * mi[5];
  size_t nmi[5], capmi[5];
  int64_t next_g;
  size_t assigned; /* pairs[0 .. assigned) have a global step */
  problem *problems;
  size_t nproblems;
  size_t dropped_problems;
  bool noted[5]; /* per mode, the step of the pair noted last */
  int64_t noted_step[5];
  /* per mode, the largest step of any pair: a step above it is a new
   * pair without a lookup (writers log steps in order) */
  bool has_max[5];
  int64_t max_step[5];
};

/* ------------------------------------------------------------ strmap */

typedef const char *(*key_of_fn)(const void *base, size_t i);

static size_t strmap_find(const strmap *m, const char *s, size_t len,
                          const void *base, key_of_fn key, bool *found) {
  uint64_t h = smr_hash_bytes(SMR_HASH_INIT, s, len);
  size_t i = (size_t)h & (m->cap - 1);
  for (;; i = (i + 1) & (m->cap - 1)) {
    if (!m->slot[i]) {
      *found = false;
      return i;
    }
    const char *k = key(base, m->slot[i] - 1);
    if (strlen(k) == len && memcmp(k, s, len) == 0) {
      *found = true;
      return i;
    }
  }
}

static void strmap_grow(strmap *m, const void *base, key_of_fn key,
                        size_t count) {
  if (m->cap && (count + 1) * 2 <= m->cap)
    return;
  size_t cap = m->cap ? m->cap * 2 : 64;
  strmap n = {smr_xcalloc(cap, sizeof *n.slot), cap, 0};
  for (size_t i = 0; i < count; i++) {
    const char *k = key(base, i);
    bool f;
    n.slot[strmap_find(&n, k, strlen(k), base, key, &f)] = (uint32_t)i + 1;
  }
  free(m->slot);
  *m = n;
}

static const char *tag_key(const void *base, size_t i) {
  return ((const tag *)base)[i].name;
}
static const char *raw_key(const void *base, size_t i) {
  return ((const rawtag *)base)[i].raw;
}

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

static void free_model(smr_tb *tb) {
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
  free(tb->pairs);
  free(tb->pairmap);
  free(tb->by_g);
  for (int m = 0; m < 5; m++) {
    free(tb->mi[m]);
    tb->mi[m] = NULL;
    tb->nmi[m] = tb->capmi[m] = 0;
  }
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
  tb->pairs = NULL;
  tb->npairs = tb->capp = tb->assigned = 0;
  tb->pairmap = NULL;
  tb->pairmap_cap = 0;
  tb->by_g = NULL;
  tb->next_g = 0;
  memset(tb->has_max, 0, sizeof tb->has_max);
  tb->problems = NULL;
  tb->nproblems = tb->dropped_problems = 0;
}

void smr_tb_free(smr_tb *tb) {
  if (!tb)
    return;
  free_model(tb);
  smr_regex_free(tb->losses);
  pthread_rwlock_destroy(&tb->lock);
  free(tb);
}

static void add_problem(smr_tb *tb, const char *file, int64_t offset,
                        const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add_problem(smr_tb *tb, const char *file, int64_t offset,
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

/* ------------------------------------------------------ mode words */

static bool word_eq(const char *s, size_t n, const char *w) {
  return strlen(w) == n && strncasecmp(s, w, n) == 0;
}

/* The mode a word names, or 0. */
static int mode_of_word(const smr_tb *tb, const char *s, size_t n) {
  for (int m = SMR_MODE_TRAIN; m <= SMR_MODE_PREDICT; m++)
    for (const char *const *w = tb->words[m]; *w; w++)
      if (word_eq(s, n, *w))
        return m;
  return 0;
}

/* The mode word of a name (docs/tensorboard.md#modes), in this order: the
 * first '/' part ("train/loss"), the last '/' part ("Loss/train"), the
 * first '_' part ("train_loss"), the last '_' part ("loss_train").
 * *at and *len: the word with one separator, for stripping. */
static int mode_of_name(const smr_tb *tb, const char *s, size_t *at,
                        size_t *len) {
  size_t n = strlen(s);
  const char *slash = strchr(s, '/'), *rslash = strrchr(s, '/');
  int m;
  if (slash && (m = mode_of_word(tb, s, (size_t)(slash - s)))) {
    *at = 0;
    *len = (size_t)(slash - s) + 1;
    return m;
  }
  if (rslash &&
      (m = mode_of_word(tb, rslash + 1, n - (size_t)(rslash - s) - 1))) {
    *at = (size_t)(rslash - s);
    *len = n - *at;
    return m;
  }
  const char *us = strchr(s, '_'), *rus = strrchr(s, '_');
  if (us && (m = mode_of_word(tb, s, (size_t)(us - s)))) {
    *at = 0;
    *len = (size_t)(us - s) + 1;
    return m;
  }
  if (rus && (m = mode_of_word(tb, rus + 1, n - (size_t)(rus - s) - 1))) {
    *at = (size_t)(rus - s);
    *len = n - *at;
    return m;
  }
  return 0;
}

/* The folder of an event file relative to the root ("" at the root); its
 * mode when its last part is a mode word (Keras' train/ and validation/,
 * PyTorch add_scalars' "<tag>_train/"), and the prefix of its tensor
 * names: the folder, without a mode part. */
static void folder_of(const smr_tb *tb, const char *path, int *mode,
                      char **prefix) {
  const char *slash = strrchr(path, '/');
  *mode = 0;
  if (!slash) {
    *prefix = smr_xstrdup("");
    return;
  }
  char *dir = smr_xstrndup(path, (size_t)(slash - path));
  const char *last = strrchr(dir, '/');
  last = last ? last + 1 : dir;
  size_t at, len;
  if ((*mode = mode_of_word(tb, last, strlen(last))) != 0) {
    /* the whole last part: drop it */
    *prefix =
        last == dir ? smr_xstrdup("") : smr_xstrndup(dir, (size_t)(last - dir));
  } else if (strchr(last, '_') && (*mode = mode_of_name(tb, last, &at, &len))) {
    /* "Loss_train": the run of add_scalars("Loss", {"train": ...}); its
     * tag is "Loss" already */
    *prefix =
        last == dir ? smr_xstrdup("") : smr_xstrndup(dir, (size_t)(last - dir));
  } else {
    *prefix = smr_xasprintf("%s/", dir);
  }
  free(dir);
}

/* ------------------------------------------------------------- model */

static size_t tag_index(smr_tb *tb, const char *name) {
  bool found;
  strmap_grow(&tb->tagmap, tb->tags, tag_key, tb->ntags);
  size_t i =
      strmap_find(&tb->tagmap, name, strlen(name), tb->tags, tag_key, &found);
  if (found)
    return tb->tagmap.slot[i] - 1;
  if (tb->ntags == tb->captags) { /* doubling: one at a time copies n^2 */
    tb->captags = tb->captags ? 2 * tb->captags : 16;
    tb->tags = smr_xrealloc(tb->tags, tb->captags * sizeof *tb->tags);
  }
  memset(&tb->tags[tb->ntags], 0, sizeof *tb->tags);
  tb->tags[tb->ntags].name = smr_xstrdup(name);
  tb->tagmap.slot[i] = (uint32_t)tb->ntags + 1;
  return tb->ntags++;
}

static int64_t tag_lookup(const smr_tb *tb, const char *name) {
  if (!tb->tagmap.cap)
    return -1;
  bool found;
  size_t i =
      strmap_find(&tb->tagmap, name, strlen(name), tb->tags, tag_key, &found);
  return found ? (int64_t)tb->tagmap.slot[i] - 1 : -1;
}

/* A tag as written in a file -> (tensor, mode), resolved once per file. */
static rawtag *resolve(smr_tb *tb, tbfile *f, const char *raw, size_t len) {
  bool found;
  strmap_grow(&f->rawmap, f->raws, raw_key, f->nraws);
  size_t i = strmap_find(&f->rawmap, raw, len, f->raws, raw_key, &found);
  if (found)
    return &f->raws[f->rawmap.slot[i] - 1];
  char *name = smr_xstrndup(raw, len);
  int mode = f->folder_mode;
  size_t at = 0, cut = 0;
  if (!mode)
    mode = mode_of_name(tb, name, &at, &cut);
  if (mode && tb->strip && cut && cut < strlen(name))
    memmove(name + at, name + at + cut, strlen(name + at + cut) + 1);
  if (!mode)
    mode = tb->default_mode;
  char *full = smr_xasprintf("%s%s", f->prefix, name);
  free(name);
  size_t t = tag_index(tb, full);
  free(full);
  f->raws = smr_xrealloc(f->raws, (f->nraws + 1) * sizeof *f->raws);
  f->raws[f->nraws] = (rawtag){smr_xstrndup(raw, len), t, mode};
  f->rawmap.slot[i] = (uint32_t)f->nraws + 1;
  return &f->raws[f->nraws++];
}

/* The next capacity of a table that grows with the folder: double while
 * small, a quarter more once large (the slack is memory a big folder
 * pays for; realloc of a big block moves pages, not bytes). */
static size_t grown(size_t cap, size_t first) {
  return cap == 0 ? first : cap < 65536 ? cap * 2 : cap + cap / 4;
}

/* splitmix64's finaliser: steps are consecutive integers, whose FNV
 * hashes cluster in the low bits the table indexes by */
static uint64_t pair_hash(int mode, int64_t step) {
  uint64_t x = (uint64_t)step * 4 + (uint64_t)mode;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static int64_t pair_find(const smr_tb *tb, int mode, int64_t step,
                         size_t *slot) {
  if (!tb->pairmap_cap)
    return -1;
  size_t i = (size_t)pair_hash(mode, step) & (tb->pairmap_cap - 1);
  for (;; i = (i + 1) & (tb->pairmap_cap - 1)) {
    if (!tb->pairmap[i]) {
      if (slot)
        *slot = i;
      return -1;
    }
    const pair *p = &tb->pairs[tb->pairmap[i] - 1];
    if (p->mode == mode && p->step == step)
      return (int64_t)tb->pairmap[i] - 1;
  }
}

/* Put pair k in the map, known to be absent: the first empty slot of its
 * probe sequence, with no key compared (no read of another pair). */
static void pair_insert_new(smr_tb *tb, size_t k) {
  size_t mask = tb->pairmap_cap - 1;
  size_t i = (size_t)pair_hash(tb->pairs[k].mode, tb->pairs[k].step) & mask;
  while (tb->pairmap[i])
    i = (i + 1) & mask;
  tb->pairmap[i] = (uint32_t)k + 1;
}

static void pairmap_grow(smr_tb *tb) {
  if (tb->pairmap_cap && (tb->npairs + 1) * 2 <= tb->pairmap_cap)
    return;
  size_t cap = tb->pairmap_cap ? tb->pairmap_cap * 2 : 1024;
  free(tb->pairmap);
  tb->pairmap = smr_xcalloc(cap, sizeof *tb->pairmap);
  tb->pairmap_cap = cap;
  for (size_t k = 0; k < tb->npairs; k++)
    pair_insert_new(tb, k);
}

static void note_pair(smr_tb *tb, int mode, int64_t step, double wall) {
  bool beyond = !tb->has_max[mode] || step > tb->max_step[mode];
  if (!beyond && pair_find(tb, mode, step, NULL) >= 0)
    return;
  if (beyond) {
    tb->has_max[mode] = true;
    tb->max_step[mode] = step;
  }
  pairmap_grow(tb);
  if (tb->npairs == tb->capp) {
    tb->capp = grown(tb->capp, 1024);
    tb->pairs = smr_xrealloc(tb->pairs, tb->capp * sizeof *tb->pairs);
  }
  tb->pairs[tb->npairs] = (pair){step, wall, PAIR_NO_G, mode};
  pair_insert_new(tb, tb->npairs++);
}

/* A new pair's place in the order of global steps (qsort has no context
 * argument, so the key travels with the index). */
typedef struct order {
  int64_t step;
  uint32_t mode, at;
} order;

static int cmp_order(const void *a, const void *b) {
  const order *x = a, *y = b;
  if (x->step != y->step)
    return x->step < y->step ? -1 : 1;
  return (int)x->mode - (int)y->mode;
}

static int cmp_mstep(const void *a, const void *b) {
  const struct mstep *x = a, *y = b;
  return x->step < y->step ? -1 : x->step > y->step;
}

/* The mode indexes gain the pairs numbered from global step `from` on. */
static void index_modes(smr_tb *tb, int64_t from) {
  bool unsorted[5] = {false};
  for (int64_t g = from; g < tb->next_g; g++) {
    const pair *p = &tb->pairs[tb->by_g[g]];
    int m = p->mode;
    if (tb->nmi[m] == tb->capmi[m]) {
      tb->capmi[m] = grown(tb->capmi[m], 256);
      tb->mi[m] = smr_xrealloc(tb->mi[m], tb->capmi[m] * sizeof *tb->mi[m]);
    }
    if (tb->nmi[m] && tb->mi[m][tb->nmi[m] - 1].step > p->step)
      unsorted[m] = true;
    tb->mi[m][tb->nmi[m]++] = (struct mstep){p->step, g};
  }
  for (int m = 0; m < 5; m++)
    if (unsorted[m])
      qsort(tb->mi[m], tb->nmi[m], sizeof *tb->mi[m], cmp_mstep);
}

/* Global steps for the pairs read in this refresh, in (step, mode) order
 * after every earlier one.  The pairs stay where they are (the hash index
 * points at them); an index of 16 bytes a pair is sorted instead. */
static void assign_globals(smr_tb *tb) {
  size_t n = tb->npairs - tb->assigned;
  if (!n)
    return;
  tb->by_g = smr_xrealloc(tb->by_g, tb->npairs * sizeof *tb->by_g);
  bool sorted = true; /* the usual case: one file, read in step order */
  for (size_t k = tb->assigned + 1; sorted && k < tb->npairs; k++) {
    const pair *p = &tb->pairs[k - 1], *q = &tb->pairs[k];
    sorted = p->step < q->step || (p->step == q->step && p->mode < q->mode);
  }
  int64_t from = tb->next_g;
  if (sorted) {
    for (size_t k = tb->assigned; k < tb->npairs; k++) {
      tb->pairs[k].g = (uint32_t)tb->next_g;
      tb->by_g[tb->next_g++] = (uint32_t)k;
    }
    tb->assigned = tb->npairs;
    index_modes(tb, from);
    return;
  }
  order *o = smr_xmalloc(n * sizeof *o);
  for (size_t k = 0; k < n; k++) {
    const pair *p = &tb->pairs[tb->assigned + k];
    o[k] = (order){p->step, (uint32_t)p->mode, (uint32_t)(tb->assigned + k)};
  }
  qsort(o, n, sizeof *o, cmp_order);
  for (size_t k = 0; k < n; k++) {
    tb->pairs[o[k].at].g = (uint32_t)tb->next_g;
    tb->by_g[tb->next_g++] = o[k].at;
  }
  free(o);
  tb->assigned = tb->npairs;
  index_modes(tb, from);
}

/* ------------------------------------------------------------ reading */

typedef struct reading {
  smr_tb *tb;
  tbfile *f;
  uint64_t offset; /* of the record */
  size_t added;
} reading;

static int on_value(void *ctx, const smr_tb_event *ev, const smr_tb_value *v) {
  reading *r = ctx;
  smr_tb *tb = r->tb;
  if (v->kind == SMR_TB_BAD) {
    add_problem(tb, r->f->path, (int64_t)r->offset,
                "tag '%.*s' at step %lld: %s under the scalars plugin; "
                "skipped",
                (int)(v->tag_len > 200 ? 200 : v->tag_len), v->tag,
                (long long)ev->step, v->why);
    return 0;
  }
  bool untagged_tensor =
      v->kind == SMR_TB_OTHER && v->tensor && !v->plugin && v->dtype;
  if (v->kind != SMR_TB_SCALAR && !untagged_tensor)
    return 0; /* histograms, images, other plugins: not scalars */
  if (!v->tag_len || memchr(v->tag, 0, v->tag_len)) {
    /* no name a tensor could have (and a NUL would never match the
     * file's table of tags: one entry per value) */
    add_problem(tb, r->f->path, (int64_t)r->offset,
                "a scalar at step %lld whose tag is empty or holds a NUL "
                "byte; skipped",
                (long long)ev->step);
    return 0;
  }
  rawtag *rt = resolve(tb, r->f, v->tag, v->tag_len);
  tag *t = &tb->tags[rt->tag];
  if (untagged_tensor && !t->scalar_tensor)
    return 0; /* a tensor no scalars metadata ever claimed */
  if (v->tensor && v->plugin)
    t->scalar_tensor = true;
  if (v->dtype == SMR_DT_DOUBLE)
    t->dbl = true;
  /* the tags of a step come one after another: one lookup per pair */
  if (!tb->noted[rt->mode] || ev->step != tb->noted_step[rt->mode]) {
    note_pair(tb, rt->mode, ev->step, ev->wall_time);
    tb->noted[rt->mode] = true;
    tb->noted_step[rt->mode] = ev->step;
  }
  tb_series_put(&t->s[rt->mode], ev->step, v->value);
  r->added++;
  return 0;
}

static bool header_ok(const uint8_t *p) {
  return smr_le32(p + 8) == smr_crc_mask(smr_crc32c(p, 8));
}

/* Read one file from f->done to `size`. */
static int read_file(smr_tb *tb, smr_source *src, tbfile *f, uint64_t size,
                     bool waiting, size_t *added, smr_error *err) {
  if (size == 0 && !waiting && !f->tail_said) {
    add_problem(tb, f->path, 0,
                "empty file: expected a TFRecord holding a file_version "
                "Event (a TensorBoard writer writes one first)");
    f->tail_said = true;
  }
  while (!f->dead && f->done < size) {
    uint64_t want = size - f->done < CHUNK ? size - f->done : CHUNK;
    smr_range rg;
    int rc = smr_source_read_range(src, f->path, f->done, want, &rg, err);
    if (rc != SMR_OK)
      return rc;
    size_t pos = 0;
    bool stop = false;
    while (pos < rg.len && !stop) {
      const uint8_t *p = rg.data + pos;
      size_t left = rg.len - pos;
      uint64_t at = f->done + pos;
      if (left >= SMR_RECORD_HEADER && !header_ok(p)) {
        add_problem(tb, f->path, (int64_t)at,
                    at == 0 ? "not a TFRecord file: the first 12 bytes are "
                              "not a length and its masked CRC32C"
                            : "record header damaged: its length does not "
                              "match its masked CRC32C; the rest of the file "
                              "is not read");
        f->dead = true;
        break;
      }
      uint64_t need = left >= SMR_RECORD_HEADER
                          ? smr_le64(p) + SMR_RECORD_OVERHEAD
                          : SMR_RECORD_HEADER;
      if (left >= SMR_RECORD_HEADER &&
          need < SMR_RECORD_OVERHEAD) { /* length overflowed */
        add_problem(tb, f->path, (int64_t)at,
                    "record claims %llu payload bytes: not an event file",
                    (unsigned long long)smr_le64(p));
        f->dead = true;
        break;
      }
      if (need > left) {
        if (at + need > size) { /* cut short at the end */
          if (!waiting && !f->tail_said) {
            add_problem(tb, f->path, (int64_t)at,
                        "truncated record: it needs %llu bytes, the file "
                        "ends after %llu",
                        (unsigned long long)need,
                        (unsigned long long)(size - at));
            f->tail_said = true;
          }
          pos = rg.len; /* read again from `at` next time */
          f->done = at;
          smr_range_release(&rg);
          return SMR_OK;
        }
        if (need > CHUNK && pos == 0) {
          /* an image or a graph, never a scalar: skipped unread */
          f->done += need;
          stop = true;
          continue;
        }
        break; /* read the next chunk from this record */
      }
      const uint8_t *payload;
      uint64_t plen;
      smr_error e;
      if (smr_record_parse(p, left, f->path, at, &payload, &plen, &e) !=
          SMR_OK) {
        add_problem(tb, f->path, e.offset, "%s; the record is skipped", e.msg);
      } else {
        reading r = {tb, f, at, 0};
        smr_tb_event ev;
        if (smr_tb_event_decode(payload, (size_t)plen, f->path, at, &ev,
                                on_value, &r, &e) != SMR_OK)
          add_problem(tb, f->path, at, "%s; the record is skipped", e.msg);
        *added += r.added;
      }
      pos += (size_t)need;
    }
    if (!stop)
      f->done += pos;
    smr_range_release(&rg);
  }
  return SMR_OK;
}

static tbfile *file_of(smr_tb *tb, const char *path) {
  for (size_t i = 0; i < tb->nfiles; i++)
    if (strcmp(tb->files[i].path, path) == 0)
      return &tb->files[i];
  return NULL;
}

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* Event files under the root, by path, relative ("./" dropped). */
static int list_event_files(smr_source *src, smr_source_listing *out,
                            smr_error *err) {
  smr_source_listing l;
  int rc =
      smr_source_list(src, smr_source_is_remote(src) ? "" : ".", "", &l, err);
  memset(out, 0, sizeof *out);
  if (rc != SMR_OK)
    return rc;
  for (size_t i = 0; i < l.n; i++) {
    const char *p = l.files[i].path;
    if (strncmp(p, "./", 2) == 0)
      p += 2;
    if (smr_tb_is_event_file(base_name(p)) && strncmp(p, ".smrules/", 9))
      smr_source_listing_add(out, smr_xstrdup(p), l.files[i].size,
                             l.files[i].mtime_ns);
  }
  smr_source_listing_free(&l);
  return SMR_OK;
}

bool smr_tb_probe(smr_source *src) {
  smr_source_listing l;
  smr_error e;
  bool any = list_event_files(src, &l, &e) == SMR_OK && l.n > 0;
  smr_source_listing_free(&l);
  return any;
}

int smr_tb_sync(smr_tb *tb, smr_source *src, bool waiting, size_t *added,
                bool *reset, smr_error *err) {
  smr_source_listing l;
  *added = 0;
  *reset = false;
  int rc = list_event_files(src, &l, err);
  if (rc != SMR_OK)
    return rc;
  pthread_rwlock_wrlock(&tb->lock);
  memset(tb->noted, 0, sizeof tb->noted);
  /* a file that vanished or shrank: the folder was rewritten */
  size_t present = 0;
  for (size_t i = 0; i < l.n; i++) {
    tbfile *f = file_of(tb, l.files[i].path);
    present += f != NULL;
    if (f && (uint64_t)l.files[i].size < f->done)
      *reset = true;
  }
  if (present != tb->nfiles)
    *reset = true;
  if (*reset)
    free_model(tb);
  for (size_t i = 0; rc == SMR_OK && i < l.n; i++) {
    tbfile *f = file_of(tb, l.files[i].path);
    if (!f) {
      tb->files = smr_xrealloc(tb->files, (tb->nfiles + 1) * sizeof *tb->files);
      f = &tb->files[tb->nfiles++];
      memset(f, 0, sizeof *f);
      f->path = smr_xstrdup(l.files[i].path);
      folder_of(tb, f->path, &f->folder_mode, &f->prefix);
    }
    rc = read_file(tb, src, f, (uint64_t)l.files[i].size, waiting, added, err);
  }
  assign_globals(tb);
  pthread_rwlock_unlock(&tb->lock);
  smr_source_listing_free(&l);
  return rc;
}

/* ------------------------------------------------------------ queries */

int smr_tb_step_rows(smr_tb *tb, smr_step_row **rows, size_t *n) {
  pthread_rwlock_rdlock(&tb->lock);
  *n = tb->assigned;
  *rows = smr_xcalloc(*n ? *n : 1, sizeof **rows);
  for (size_t k = 0; k < *n; k++) {
    const pair *p = &tb->pairs[k];
    (*rows)[k] =
        (smr_step_row){(int64_t)p->g, p->mode, p->step, smr_xstrdup(WORKER)};
  }
  pthread_rwlock_unlock(&tb->lock);
  return SMR_OK;
}

size_t smr_tb_steps(smr_tb *tb, smr_tb_step_fn fn, void *ctx) {
  pthread_rwlock_rdlock(&tb->lock);
  size_t n = tb->assigned;
  for (int64_t g = 0; fn && g < tb->next_g; g++) {
    const pair *p = &tb->pairs[tb->by_g[g]];
    fn(ctx, g, p->mode, p->step);
  }
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
  int64_t k = pair_find(tb, mode, step, NULL);
  if (k >= 0 && tb->pairs[k].g != PAIR_NO_G)
    push_entry_g(out, t, mode, step, tb->pairs[k].g);
}

/* Every value of a series with its global step: a merge walk of the
 * series and the mode's index (both by step). */
static void push_series(const smr_tb *tb, smr_entries *out, int64_t t, int m,
                        const series *s) {
  const struct mstep *mi = tb->mi[m];
  size_t j = 0, n = tb->nmi[m];
  for (size_t i = 0; i < s->n; i++) {
    int64_t step = tb_series_step(s, i);
    while (j < n && mi[j].step < step)
      j++;
    if (j < n && mi[j].step == step)
      push_entry_g(out, t, m, step, mi[j].g);
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
  int64_t t = tag_lookup(tb, name);
  if (t < 0) {
    pthread_rwlock_unlock(&tb->lock);
    return SMR_TENSOR_UNAVAILABLE;
  }
  const tag *tg = &tb->tags[t];
  if (mode == SMR_MODE_GLOBAL && mode_step >= 0) {
    /* a global step: the pair it numbers */
    if (mode_step < tb->next_g) {
      const pair *p = &tb->pairs[tb->by_g[mode_step]];
      bool found;
      tb_series_find(&tg->s[p->mode], p->step, &found);
      if (found)
        push_entry(tb, out, t, p->mode, p->step);
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
    int64_t k = pair_find(tb, e->mode, e->mode_step, NULL);
    if (k >= 0)
      wall = tb->pairs[k].wall_time;
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
