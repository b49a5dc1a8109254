/* tb_int.h - a TensorBoard trial's insides, private to core/trial/: the
 * model shared by tb_trial.c (settings, problems, the model, queries),
 * tb_tags.c (tag names and modes) and tb_read.c (reading the event
 * files).  Not for other modules. */
#ifndef SMR_TB_INT_H
#define SMR_TB_INT_H

#include <pthread.h>

#include "base/regex.h"
#include "trial/tb_series.h"
#include "trial/tb_trial.h"

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

/* tb_trial.c: the model emptied (before a full re-read); a problem of a
 * file noted (past MAX_PROBLEMS only counted); a (mode, step) pair noted
 * as it is read; global steps given to the pairs new since the last call. */
void tb_free_model(smr_tb *tb);
void tb_add_problem(smr_tb *tb, const char *file, int64_t offset,
                    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void tb_note_pair(smr_tb *tb, int mode, int64_t step, double wall);
void tb_assign_globals(smr_tb *tb);

/* tb_tags.c: a file's folder mode and tensor-name prefix; a tag as
 * written in a file -> (tensor, mode), resolved once per file; a tensor
 * name's tag index, or -1. */
void tb_folder_of(const smr_tb *tb, const char *path, int *mode, char **prefix);
rawtag *tb_resolve(smr_tb *tb, tbfile *f, const char *raw, size_t len);
int64_t tb_tag_lookup(const smr_tb *tb, const char *name);

#endif
