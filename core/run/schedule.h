/* schedule.h - which rule instance a worker thread evaluates next.
 *
 * Each unit (a rule instance) walks the same list of steps from position 0
 * to its end; a unit is evaluated by one thread at a time.  Two orders:
 *
 *  - whole units (block = SMR_SCHED_ALL): a worker takes the next unit and
 *    evaluates all its steps; the units run side by side, one per thread.
 *    Best for local trials: nothing is shared between rules but the page
 *    cache, and no thread ever waits for another.
 *  - lock step (block = k steps): a worker takes the unit that is furthest
 *    behind (of those, the one whose turns have taken longest) and
 *    evaluates its next k steps, and no unit may run more than `lag`
 *    steps ahead of the slowest unfinished one.  All rules then read
 *    the records of the same few steps at about the same time, so a remote
 *    trial's record cache serves every rule after the first and each
 *    record is fetched once; memory stays bounded by those few steps.
 *
 * Units that are not positional (profiler rules, which walk time windows,
 * not steps) take no part in the lag and run whole when a thread is free. */
#ifndef SMR_SCHEDULE_H
#define SMR_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SMR_SCHED_ALL SIZE_MAX

/* Evaluate unit `u` from step position *pos up to (not including) `limit`;
 * advance *pos past what was evaluated.  Return true when the unit is
 * finished (its steps are done, it stopped, failed or waits for data). */
typedef bool (*smr_sched_fn)(void *arg, size_t u, size_t *pos, size_t limit);

typedef struct smr_sched {
  size_t units;
  const bool *positional; /* per unit; NULL: all positional */
  int jobs;               /* threads (>= 1) */
  size_t block;           /* steps per turn; SMR_SCHED_ALL: whole units */
  size_t lag;             /* lock step: furthest a unit may run ahead */
  smr_sched_fn run;
  void *arg;
  /* Optional: told (under the scheduler's lock) each time the slowest
   * unfinished positional unit moves on, with its position. */
  void (*slowest_moved)(void *arg, size_t pos);
  /* Optional: the clock turns are timed with, in seconds (NULL: the
   * monotonic clock).  Tests give one that counts work instead of time,
   * so the order they check holds on a machine of any speed. */
  double (*clock)(void *arg);
  /* Optional, lock step: called by the thread of a turn once it ended;
   * true when the unit only read values for statistics in it
   * (host/data.h, smr_data_reads).  At the same position such units go
   * after the others, whose reads of the same values fill the
   * statistics cache for them (trial/stats_cache.h): on the bench's cnn
   * trial the twelve rules read 2.4 GB instead of 2.8-3.2. */
  bool (*stats_only)(void *arg, size_t u);
  /* Optional, lock step: a byte budget for the large records the turns
   * running side by side hold (0: none), and, called by the thread of a
   * turn once it ended, the bytes it held at most.  A turn begins only
   * while its unit's bytes last turn and those of the turns running fit
   * the budget, or when no other turn runs (source.h,
   * smr_source_record_budget). */
  size_t budget;
  size_t (*turn_bytes)(void *arg, size_t u);
  /* With budget: the least a turn is expected to hold (NULL: 0), asked
   * each time a turn may begin; a unit reserves the most of that and of
   * what its turns held before. */
  size_t (*turn_bytes_floor)(void *arg);
  /* With budget, optional: told what the running turns reserve each time
   * a turn begins or ends, and asked the bytes held beyond any turn's
   * (reads a thread does for another rule, source.h's
   * smr_source_extra_begin), which a turn's admission counts too. */
  void (*turns_reserved)(void *arg, size_t bytes);
  size_t (*extra_bytes)(void *arg);
} smr_sched;

/* Run every unit to its end with `jobs` threads (the caller's thread
 * included).  Returns when all units are finished. */
void smr_sched_run(const smr_sched *s);

#endif
