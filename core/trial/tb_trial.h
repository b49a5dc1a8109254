/* tb_trial.h - a TensorBoard log directory as a trial
 * (docs/tensorboard.md).
 *
 * The event files (events.out.tfevents.*, directly in the folder or in
 * run sub-folders) are read incrementally, in path order, into an
 * in-memory model: one tensor of shape () per scalar tag, its values by
 * (mode, step).  trial.c asks this model instead of the catalog when the
 * trial is a TensorBoard folder: the hooks are marked "TensorBoard" there.
 *
 * Steps: a TensorBoard step (Event.step) is a *mode step*; each distinct
 * (mode, step) pair gets a global step, counting from 0 in the order the
 * pairs are first read (pairs read in one refresh in (step, mode) order),
 * so TRAIN and EVAL values logged at the same Event.step are two global
 * steps, as smdebug counts them.  A tag logged twice at one step keeps the
 * value read last. */
#ifndef SMR_TB_TRIAL_H
#define SMR_TB_TRIAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "format/index.h"
#include "format/tensor.h"
#include "source/source.h"
#include "trial/catalog.h"

/* rules.yaml `tensorboard:` (docs/tensorboard.md#settings).  Word lists
 * are NULL-terminated; NULL takes the default. */
typedef struct smr_tb_settings {
  const char *const *train_words;   /* train, training */
  const char *const *eval_words;    /* eval, val, valid, validation, test */
  const char *const *predict_words; /* predict, prediction, inference */
  int default_mode;                 /* of tags without a mode word: TRAIN */
  const char *losses_regex;         /* collection `losses`: "(?i)loss" */
  bool strip_mode;                  /* name tensors without their mode word */
} smr_tb_settings;

typedef struct smr_tb smr_tb;

/* Whether the source holds an event file (a listing of the whole tree). */
bool smr_tb_probe(smr_source *src);

/* NULL settings: the defaults.  SMR_ERR_USAGE for a bad losses regex. */
int smr_tb_new(const smr_tb_settings *s, smr_tb **out, smr_error *err);
void smr_tb_free(smr_tb *tb);

/* Read what is new in the event files (new files, bytes appended).
 * `waiting`: training may still write, so a record cut short at the end
 * of a file (or an empty file) is waited for, not reported.  *added: new
 * scalar values.  *reset: a file shrank or vanished, everything was read
 * again. */
int smr_tb_sync(smr_tb *tb, smr_source *src, bool waiting, size_t *added,
                bool *reset, smr_error *err);

/* The model, as trial.c's catalog gives it (trial/catalog.h). */
int smr_tb_step_rows(smr_tb *tb, smr_step_row **rows, size_t *n);
/* The same, without a row per step: fn (when not NULL) is called for
 * every global step in order; returns their number. */
typedef void (*smr_tb_step_fn)(void *ctx, int64_t g, int mode, int64_t step);
size_t smr_tb_steps(smr_tb *tb, smr_tb_step_fn fn, void *ctx);
void smr_tb_tensor_names(smr_tb *tb, smr_strv *out);
/* Entries of a tensor (mode 0: any; GLOBAL with a step: that global
 * step; mode_step < 0: every step).  SMR_TENSOR_UNAVAILABLE when the
 * name is unknown. */
int smr_tb_entries(smr_tb *tb, const char *name, int mode, int64_t mode_step,
                   smr_entries *out);
/* The value an entry of smr_tb_entries names: a 0-d float32 or float64
 * tensor the caller releases. */
int smr_tb_read_value(smr_tb *tb, const smr_entry *e, smr_tensor *out,
                      smr_error *err);
/* Collections `losses` and `scalars`, replacing *out. */
void smr_tb_collections(smr_tb *tb, smr_collections *out);

/* Problems met so far (file, offset, message), each once. */
typedef void (*smr_tb_problem_fn)(void *ctx, const char *file, int64_t offset,
                                  const char *message);
void smr_tb_problems(smr_tb *tb, smr_tb_problem_fn fn, void *ctx);

#endif
