/* tb_int.h - a TensorBoard trial's insides, private to core/trial/: the
 * model shared by tb_trial.c (settings, problems, the model, queries),
 * tb_tags.c (tag names and modes) and tb_read.c (reading the event
 * files).  Not for other modules. */
#ifndef SMR_TB_INT_H
#define SMR_TB_INT_H

#include <pthread.h>

#include "base/regex.h"
#include "trial/tb_pairs.h"
#include "trial/tb_series.h"
#include "trial/tb_trial.h"

typedef tb_series series; /* a tag's values in one mode, by Event.step */

typedef struct tag {
  char *name;
  series s[5];        /* by mode 1..4 */
  bool dbl;           /* some value was a double: values read as float64 */
  bool scalar_tensor; /* seen as a tensor under the scalars plugin */
} tag;

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
  /* (mode, Event.step) pairs by global step, per mode by step */
  tb_pairs pairs;
  problem *problems;
  size_t nproblems;
  size_t dropped_problems;
  bool noted[5]; /* per mode, the step of the pair noted last */
  int64_t noted_step[5];
};

/* tb_trial.c: the model emptied (before a full re-read); a problem of a
 * file noted (past MAX_PROBLEMS only counted). */
void tb_free_model(smr_tb *tb);
void tb_add_problem(smr_tb *tb, const char *file, int64_t offset,
                    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* tb_tags.c: a file's folder mode and tensor-name prefix; a tag as
 * written in a file -> (tensor, mode), resolved once per file; a tensor
 * name's tag index, or -1. */
void tb_folder_of(const smr_tb *tb, const char *path, int *mode, char **prefix);
rawtag *tb_resolve(smr_tb *tb, tbfile *f, const char *raw, size_t len);
int64_t tb_tag_lookup(const smr_tb *tb, const char *name);

#endif
