/* read_ahead.h - values read for Python on a thread other than the
 * caller's (read_ahead.c): the read-ahead thread behind iter_tensors and
 * value()'s prefetch, and the buffers of those values given back to the
 * thread that read them. */
#ifndef SMR_PY_READ_AHEAD_H
#define SMR_PY_READ_AHEAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "format/tensor.h"
#include "trial/trial.h"

/* ---- homes: where a value's buffer goes back to
 *
 * The library keeps record buffers in a pool per thread, and a buffer goes
 * back to the pool of the thread that releases it.  A value read on the
 * read-ahead thread and released by the Python thread would leave the
 * reader's pool empty and the Python thread's full: the reader would map
 * and fault in a new buffer for every record (256 page faults a MiB).  So
 * a value read on a thread that lives as long as the process (the
 * read-ahead thread) remembers that thread's home, and its release is
 * handed back there; the thread gives it back to its pool before its next
 * read.  Homes are never freed (one per such thread). */
typedef struct py_home py_home;

/* This thread's home, made on first use; NULL when there are too many.
 * Only for threads that live as long as the process. */
py_home *smr_py_home(void);

/* Releases, on this thread, what other threads handed back to its home
 * (nothing when it has none). */
void smr_py_home_drain(void);

/* Releases *v (read on the thread whose home is h, NULL: any): handed back
 * to h unless h is this thread's home or holds too much already. */
void smr_py_release(py_home *h, smr_tensor *v);

/* ---- read-ahead jobs
 *
 * A job reads its items in order on the read-ahead threads (the
 * readers: one per core beside the caller's, at most 4, started by the
 * first job; a job of values is read by one of them at a time, a job of
 * reductions by all), at most AHEAD_BYTES of values ahead
 * of the one the caller takes, so that reading overlaps what the caller
 * does with each value.  An item the thread has not begun when the caller
 * asks for it is read on the caller's thread: the caller never waits for
 * a thread that is busy elsewhere or has no core (a loaded machine), it
 * waits only for a read already under way.  Every read takes the trial's
 * lock `lock` for reading, as the Trial object's reads do (so the thread
 * and the caller read at once; a refresh takes it for writing).  The
 * caller owns the trial: it must keep it open until smr_py_job_end
 * returns. */
typedef struct py_item {
  char *name, *worker; /* worker NULL: the first by name */
  int64_t step;
  int mode;
  /* a reduction (smr_trial_reduction) instead of the value: computed where
   * the value is read, so only the number crosses threads */
  bool is_reduction, abs;
  int reduction;
  /* filled by the read */
  int rc;
  smr_tensor v;
  double out; /* the reduction */
  bool saved; /* the reduction was the saved one */
  smr_error err;
  py_home *home; /* the reading thread's */
} py_item;

typedef struct py_job py_job;

/* A job over items[0..n) (name and worker copied), reading at most
 * `ahead` bytes of values ahead of the caller (0: AHEAD_BYTES); with
 * ahead SMR_PY_NO_AHEAD the caller reads each item when it asks for it
 * (Trial(read_ahead=False), read_many).  Never NULL. */
#define SMR_PY_NO_AHEAD ((size_t)-1)
py_job *smr_py_job_start(smr_trial *t, pthread_rwlock_t *lock,
                         const py_item *items, size_t n, size_t ahead);

/* A job of reductions (every item is_reduction): the readers and the
 * caller waiting for one item (smr_py_job_next) compute several items at
 * once, at most `window` ahead of the one the caller takes (items crossing
 * threads are numbers, not buffers, so more cores serve it: a reduction
 * scan runs on every core).  A prediction the caller then does not take
 * (smr_py_job_end) costs at most `window` reductions. */
py_job *smr_py_job_start_reductions(smr_trial *t, pthread_rwlock_t *lock,
                                    const py_item *items, size_t n,
                                    size_t window);

/* The request of the next item smr_py_job_next would give, NULL when
 * every item was taken (call from the thread that takes them). */
const py_item *smr_py_job_peek(const py_job *j);

/* Items not taken yet (the caller's thread). */
size_t smr_py_job_left(const py_job *j);

/* The request of item i (name, worker, step, mode, reduction), to
 * compare. */
const py_item *smr_py_job_request(const py_job *j, size_t i);

/* Waits for the next item not yet taken and moves it into *out (the caller
 * then owns out->v: lend it or smr_py_release it); false when every item
 * was taken.  Call without the GIL. */
bool smr_py_job_next(py_job *j, py_item *out);

/* Cancels what is not read yet, waits for a read in progress, releases
 * the values read and not taken and frees the job.  Call without the GIL. */
void smr_py_job_end(py_job *j);

/* How many items the read-ahead thread and the callers have read, over
 * the process's life (for tests: that reading ahead happened, and that a
 * caller read what the thread had not begun). */
void smr_py_read_counts(unsigned long long *by_reader,
                        unsigned long long *by_caller);

/* Tests: while held, the read-ahead thread begins no read (as on a machine
 * that gives it no core), so the callers must read every item. */
void smr_py_read_ahead_hold(bool on);

#endif
