/* read_ahead.c - values read for Python off the caller's thread (see
 * read_ahead.h): the homes their buffers go back to, and the read-ahead
 * thread.
 *
 * Nothing here touches Python objects, so none of it needs the GIL; the
 * callers (trial_type.c) release the GIL before they wait here.  Lock
 * order: a trial's mutex is never held while rd_mu is taken, and rd_mu is
 * never held while a trial is read. */
#include "read_ahead.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- homes */

/* Bytes a home keeps for its thread at most; past that a value is released
 * where it dies (its buffer then goes to that thread's pool or is freed). */
#define HOME_MAX_BYTES ((size_t)64 << 20)
#define HOMES_MAX 256

struct py_home {
  pthread_mutex_t mu;
  smr_tensor *back; /* handed back, not yet released */
  size_t n, cap, bytes;
  atomic_size_t pending; /* n, read without the lock */
  bool dead;             /* its thread is gone (a fork's child) */
};

static _Thread_local py_home *my_home;
static void reader_poke(void);
/* Every home made, so that they stay reachable (and a fork's child can
 * mark them dead). */
static py_home *homes[HOMES_MAX];
static size_t nhomes;
static pthread_mutex_t homes_mu = PTHREAD_MUTEX_INITIALIZER;

py_home *smr_py_home(void) {
  if (my_home)
    return my_home;
  py_home *h = calloc(1, sizeof *h);
  if (!h)
    return NULL;
  pthread_mutex_init(&h->mu, NULL);
  pthread_mutex_lock(&homes_mu);
  if (nhomes < HOMES_MAX) {
    homes[nhomes++] = h;
  } else {
    pthread_mutex_destroy(&h->mu);
    free(h);
    h = NULL;
  }
  pthread_mutex_unlock(&homes_mu);
  my_home = h;
  return h;
}

void smr_py_home_drain(void) {
  py_home *h = my_home;
  if (!h || atomic_load_explicit(&h->pending, memory_order_relaxed) == 0)
    return;
  pthread_mutex_lock(&h->mu);
  smr_tensor *back = h->back;
  size_t n = h->n;
  h->back = NULL;
  h->n = h->cap = h->bytes = 0;
  atomic_store(&h->pending, 0);
  pthread_mutex_unlock(&h->mu);
  for (size_t i = 0; i < n; i++)
    smr_tensor_release(&back[i]);
  free(back);
}

void smr_py_release(py_home *h, smr_tensor *v) {
  if (!v->release_) { /* nothing attached (taken over, or never read) */
    memset(v, 0, sizeof *v);
    return;
  }
  if (h && h != my_home) {
    pthread_mutex_lock(&h->mu);
    bool keep = !h->dead && h->bytes + v->nbytes <= HOME_MAX_BYTES;
    if (keep && h->n == h->cap) {
      size_t cap = h->cap ? 2 * h->cap : 16;
      smr_tensor *b = realloc(h->back, cap * sizeof *b);
      if (b) {
        h->back = b;
        h->cap = cap;
      }
      keep = h->n < h->cap;
    }
    if (keep) {
      h->back[h->n++] = *v;
      h->bytes += v->nbytes;
      atomic_store(&h->pending, h->n);
      memset(v, 0, sizeof *v);
    }
    pthread_mutex_unlock(&h->mu);
    if (keep) {
      reader_poke(); /* the read-ahead thread drains while idle */
      return;
    }
  }
  smr_tensor_release(v);
}

/* ------------------------------------------------------- read-ahead jobs */

/* How far ahead of the caller a job reads: AHEAD_BYTES of values (at least
 * one value), at most AHEAD_ITEMS values.  Small enough that a value is
 * still in the CPU's cache when the caller gets to it, and that a stream
 * keeps a few MiB, not a trial. */
#define AHEAD_BYTES ((size_t)4 << 20)
#define AHEAD_ITEMS 64

enum { ITEM_QUEUED, ITEM_READING, ITEM_DONE, ITEM_TAKEN };

struct py_job {
  struct py_job *next; /* in the reader's list while it has items to read */
  smr_trial *t;
  pthread_rwlock_t *tlock; /* the Trial object's, taken for reading */
  py_item *items;
  unsigned char *state;
  size_t n, next_read, next_take;
  size_t ahead;       /* bytes read and not taken */
  size_t ahead_max;   /* at most that many (at least one value) */
  size_t ahead_items; /* items read and not taken: at most that many */
  int reading;        /* items being read by the readers and the caller */
  bool listed, cancelled;
  bool in_caller; /* SMR_PY_NO_AHEAD: not read ahead */
  /* reductions (smr_py_job_start_reductions): several items at once, on
   * every reader and on the caller while it waits */
  bool parallel;
};

static pthread_mutex_t rd_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rd_work = PTHREAD_COND_INITIALIZER; /* the reader */
static pthread_cond_t rd_done = PTHREAD_COND_INITIALIZER; /* the callers */
static py_job *rd_jobs;
static bool rd_started, rd_forking;
static int rd_busy; /* readers in a read */
static pthread_once_t rd_once = PTHREAD_ONCE_INIT;
/* Items read by the read-ahead thread and by the callers (tests). */
static atomic_ullong n_by_reader, n_by_caller;
static bool rd_held; /* smr_py_read_ahead_hold, under rd_mu */

void smr_py_read_counts(unsigned long long *by_reader,
                        unsigned long long *by_caller) {
  *by_reader = atomic_load(&n_by_reader);
  *by_caller = atomic_load(&n_by_caller);
}

/* Whether j may read its next item now. */
static bool can_read(const py_job *j) {
  if (j->cancelled || j->next_read >= j->n)
    return false;
  size_t ahead = j->next_read - j->next_take;
  return ahead == 0 || (ahead < j->ahead_items && j->ahead < j->ahead_max);
}

/* A job a reader may read from now: one item at a time unless parallel. */
static py_job *pick(void) {
  for (py_job *j = rd_jobs; j; j = j->next)
    if (can_read(j) && (j->parallel || j->reading == 0))
      return j;
  return NULL;
}

static void unlist(py_job *j) {
  for (py_job **p = &rd_jobs; *p; p = &(*p)->next)
    if (*p == j) {
      *p = j->next;
      break;
    }
  j->listed = false;
}

/* Reads item i of j on this thread (the read-ahead thread or the caller's,
 * whichever claimed it): under the trial's lock taken for reading, so
 * that the two read at once but never while the trial is refreshed. */
static void read_item(py_job *j, size_t i) {
  py_item *it = &j->items[i];
  smr_value_loc loc;
  pthread_rwlock_rdlock(j->tlock);
  if (it->is_reduction)
    it->rc = smr_trial_reduction(j->t, it->name, it->step, it->mode, it->worker,
                                 it->reduction, it->abs, &it->out, &it->saved,
                                 &loc, &it->err);
  else
    it->rc = smr_trial_value(j->t, it->name, it->step, it->mode, it->worker,
                             &it->v, &loc, &it->err);
  pthread_rwlock_unlock(j->tlock);
  it->home = my_home; /* NULL on a thread without one: released anywhere */
}

/* Under rd_mu: claims j's next item, reads it with rd_mu released, and
 * marks it read; `count` counts who read it.  Returns with rd_mu held. */
static void read_claimed(py_job *j, atomic_ullong *count) {
  size_t i = j->next_read++;
  j->state[i] = ITEM_READING;
  j->reading++;
  rd_busy++;
  if (j->next_read >= j->n && j->listed)
    unlist(j);
  pthread_mutex_unlock(&rd_mu);
  smr_py_home_drain(); /* a reader's: values given back meanwhile */
  read_item(j, i);
  atomic_fetch_add_explicit(count, 1, memory_order_relaxed);
  pthread_mutex_lock(&rd_mu);
  j->state[i] = ITEM_DONE;
  j->ahead += j->items[i].rc == SMR_OK ? j->items[i].v.nbytes : 0;
  j->reading--;
  rd_busy--;
  pthread_cond_broadcast(&rd_done);
}

static void *reader_main(void *unused) {
  (void)unused;
  smr_py_home();
  pthread_mutex_lock(&rd_mu);
  for (;;) {
    py_job *j = rd_forking || rd_held ? NULL : pick();
    if (!j) {
      if (my_home && atomic_load(&my_home->pending)) {
        pthread_mutex_unlock(&rd_mu);
        smr_py_home_drain();
        pthread_mutex_lock(&rd_mu);
        continue;
      }
      pthread_cond_wait(&rd_work, &rd_mu);
      continue;
    }
    read_claimed(j, &n_by_reader);
  }
  return NULL;
}

/* fork(): the child has no read-ahead thread.  Before the fork the reader
 * finishes the read in progress and starts none, so no trial's mutex is
 * held across the fork by it; in the child the thread is started again
 * when a job needs it, and the homes of threads that did not survive are
 * dead (values handed back to them are released where they die). */
static void fork_prepare(void) {
  pthread_mutex_lock(&rd_mu);
  rd_forking = true;
  while (rd_busy)
    pthread_cond_wait(&rd_done, &rd_mu);
}

static void fork_parent(void) {
  rd_forking = false;
  pthread_cond_broadcast(&rd_work);
  pthread_mutex_unlock(&rd_mu);
}

static void fork_child(void) {
  pthread_mutex_init(&rd_mu, NULL);
  pthread_cond_init(&rd_work, NULL);
  pthread_cond_init(&rd_done, NULL);
  rd_forking = rd_started = false;
  rd_busy = 0;
  pthread_mutex_init(&homes_mu, NULL);
  for (size_t i = 0; i < nhomes; i++)
    if (homes[i] != my_home) {
      pthread_mutex_init(&homes[i]->mu, NULL);
      homes[i]->dead = true;
    }
}

static void register_fork(void) {
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* Readers: one per core beside the caller's (which reads too), at least
 * one, at most READERS_MAX.  A value job is read by one reader at a time;
 * the others serve other jobs and the parallel (reduction) jobs. */
#define READERS_MAX 4
static int readers_wanted(void) {
  /* the CPUs this process may run on (a container's or taskset's), not
   * the machine's */
  cpu_set_t set;
  long cores = sched_getaffinity(0, sizeof set, &set) == 0
                   ? CPU_COUNT(&set)
                   : sysconf(_SC_NPROCESSORS_ONLN);
  return cores <= 2 ? 1 : cores > READERS_MAX ? READERS_MAX : (int)cores - 1;
}

/* Under rd_mu.  False when no thread can be started: the callers then
 * read the items themselves (smr_py_job_next). */
static bool reader_running(void) {
  if (rd_started)
    return true;
  pthread_t th;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  for (int k = 0; k < readers_wanted(); k++)
    rd_started |= pthread_create(&th, &a, reader_main, NULL) == 0;
  pthread_attr_destroy(&a);
  return rd_started;
}

void smr_py_read_ahead_hold(bool on) {
  pthread_mutex_lock(&rd_mu);
  rd_held = on;
  pthread_cond_broadcast(&rd_work);
  pthread_mutex_unlock(&rd_mu);
}

static void reader_poke(void) {
  pthread_mutex_lock(&rd_mu);
  pthread_cond_signal(&rd_work);
  pthread_mutex_unlock(&rd_mu);
}

static py_job *job_start(smr_trial *t, pthread_rwlock_t *lock,
                         const py_item *items, size_t n, size_t ahead,
                         size_t ahead_items, bool parallel) {
  pthread_once(&rd_once, register_fork);
  py_job *j = smr_xcalloc(1, sizeof *j);
  j->ahead_max = ahead ? ahead : AHEAD_BYTES;
  j->ahead_items = ahead_items;
  j->parallel = parallel;
  j->in_caller = ahead == SMR_PY_NO_AHEAD;
  j->t = t;
  j->tlock = lock;
  j->n = n;
  j->items = smr_xcalloc(n ? n : 1, sizeof *j->items);
  j->state = smr_xcalloc(n ? n : 1, 1);
  for (size_t i = 0; i < n; i++) {
    j->items[i].name = smr_xstrdup(items[i].name);
    j->items[i].worker = items[i].worker ? smr_xstrdup(items[i].worker) : NULL;
    j->items[i].step = items[i].step;
    j->items[i].mode = items[i].mode;
    j->items[i].is_reduction = items[i].is_reduction;
    j->items[i].reduction = items[i].reduction;
    j->items[i].abs = items[i].abs;
  }
  if (n && !j->in_caller) {
    pthread_mutex_lock(&rd_mu);
    j->next = rd_jobs; /* the newest first: it is the one awaited now */
    rd_jobs = j;
    j->listed = true;
    if (reader_running())
      pthread_cond_broadcast(&rd_work);
    pthread_mutex_unlock(&rd_mu);
  }
  return j;
}

py_job *smr_py_job_start(smr_trial *t, pthread_rwlock_t *lock,
                         const py_item *items, size_t n, size_t ahead) {
  return job_start(t, lock, items, n, ahead, AHEAD_ITEMS, false);
}

py_job *smr_py_job_start_reductions(smr_trial *t, pthread_rwlock_t *lock,
                                    const py_item *items, size_t n,
                                    size_t window) {
  return job_start(t, lock, items, n, 0, window ? window : 1, true);
}

const py_item *smr_py_job_peek(const py_job *j) {
  return j->next_take < j->n ? &j->items[j->next_take] : NULL;
}

size_t smr_py_job_left(const py_job *j) {
  return j->n - j->next_take;
}

const py_item *smr_py_job_request(const py_job *j, size_t i) {
  return i < j->n ? &j->items[i] : NULL;
}

bool smr_py_job_next(py_job *j, py_item *out) {
  pthread_mutex_lock(&rd_mu);
  if (j->next_take >= j->n) {
    pthread_mutex_unlock(&rd_mu);
    return false;
  }
  size_t i = j->next_take;
  if (j->state[i] == ITEM_QUEUED) {
    /* Not being read: read here rather than wait for the read-ahead thread
     * (reading another job's item, or not given a core on a busy machine),
     * so reading ahead can only add reads in parallel, never a wait.
     * Items are claimed in order: next_read is i. */
    read_claimed(j, &n_by_caller);
  }
  while (j->state[i] != ITEM_DONE) {
    /* Being read by a reader.  A parallel job's caller reads the next item
     * meanwhile rather than wait idle: the caller is one more reader. */
    if (j->parallel && can_read(j))
      read_claimed(j, &n_by_caller);
    else
      pthread_cond_wait(&rd_done, &rd_mu);
  }
  j->ahead -= j->items[i].rc == SMR_OK ? j->items[i].v.nbytes : 0;
  *out = j->items[i];
  memset(&j->items[i].v, 0, sizeof j->items[i].v);
  j->state[i] = ITEM_TAKEN;
  j->next_take = i + 1;
  /* the window moved: a reader may go on.  A job of reductions wakes its
   * readers once half its window is taken, not per item: a wake-up per
   * reduction (a futex call and a context switch on each side) cost more
   * CPU than the reduction saved on a busy machine. */
  if (!j->parallel)
    pthread_cond_signal(&rd_work);
  else if (j->next_read - j->next_take <= j->ahead_items / 2)
    pthread_cond_broadcast(&rd_work);
  pthread_mutex_unlock(&rd_mu);
  return true;
}

void smr_py_job_end(py_job *j) {
  pthread_mutex_lock(&rd_mu);
  j->cancelled = true;
  if (j->listed)
    unlist(j);
  while (j->reading)
    pthread_cond_wait(&rd_done, &rd_mu);
  pthread_mutex_unlock(&rd_mu);
  for (size_t i = 0; i < j->n; i++) {
    if (j->state[i] == ITEM_DONE && j->items[i].rc == SMR_OK)
      smr_py_release(j->items[i].home, &j->items[i].v);
    free(j->items[i].name);
    free(j->items[i].worker);
  }
  free(j->items);
  free(j->state);
  free(j);
}
