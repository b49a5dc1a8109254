/* tb_pairs.h - a TensorBoard folder's (mode, Event.step) pairs and the
 * global steps that number them (private to core/trial: tb_trial.c's
 * model).
 *
 * A pair is noted when its first value is read; a refresh ends by
 * numbering the pairs it noted, in (step, mode) order, after every
 * earlier one.  A folder of 1 M scalars may hold 200,000 pairs, so they
 * take what they need (17 bytes a pair, 4 more in their mode's index):
 *   - numbered pairs are stored by global step, as three arrays (step,
 *     wall time, mode): the global step is the index, stored nowhere;
 *   - per mode, its global steps ordered by step: finding a pair is a
 *     binary search there, and a tensor's values get their global steps
 *     by one merge walk of its series and this index;
 *   - pairs noted since the last numbering are found through a hash table
 *     built only when a step comes that is not above every step of its
 *     mode (writers log in order: usually never), freed at numbering.
 * Global steps are 32-bit indexes: 4 G pairs would take 90 GB first. */
#ifndef SMR_TB_PAIRS_H
#define SMR_TB_PAIRS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tb_pairs {
  /* [0, numbered): by global step; [numbered, n): noted since, in the
   * order they were read */
  int64_t *step;
  double *wall;  /* wall time of the first value read at the pair */
  uint8_t *mode; /* 1..4 */
  size_t n, numbered, cap;
  uint32_t *by_mode[5]; /* per mode 1..4: global steps, ordered by step */
  size_t nby_mode[5], capby_mode[5];
  bool has_max[5];     /* per mode, the largest step noted: a step above it */
  int64_t max_step[5]; /* is a new pair without a lookup */
  uint32_t *pending;   /* NULL, or (index - numbered + 1) by (mode, step) */
  size_t pending_cap;
} tb_pairs;

/* The pair (mode 1..4, step) exists from now on; wall: the wall time of
 * the value read at it (kept when the pair is new). */
void tb_pairs_note(tb_pairs *p, int mode, int64_t step, double wall);
/* Global steps for the pairs noted since the last call (their storage
 * reordered to global-step order); returns how many. */
size_t tb_pairs_number(tb_pairs *p);
/* The global step of a numbered pair, or -1. */
int64_t tb_pairs_find(const tb_pairs *p, int mode, int64_t step);
void tb_pairs_free(tb_pairs *p);

#endif
