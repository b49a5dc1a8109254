/* tb_tags.c - a TensorBoard folder's tags: the mode a tag or a folder
 * names (the mode words, docs/tensorboard.md#modes), the tensor name a
 * tag as written in a file becomes, and the string tables that find both
 * in constant time. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "format/mode.h"
#include "trial/tb_int.h"

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
void tb_folder_of(const smr_tb *tb, const char *path, int *mode,
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

int64_t tb_tag_lookup(const smr_tb *tb, const char *name) {
  if (!tb->tagmap.cap)
    return -1;
  bool found;
  size_t i =
      strmap_find(&tb->tagmap, name, strlen(name), tb->tags, tag_key, &found);
  return found ? (int64_t)tb->tagmap.slot[i] - 1 : -1;
}

/* A tag as written in a file -> (tensor, mode), resolved once per file. */
rawtag *tb_resolve(smr_tb *tb, tbfile *f, const char *raw, size_t len) {
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
