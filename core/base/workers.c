/* workers.c - see workers.h.  Loops wait in a queue; a helper (or the
 * loop's own caller) takes the next index of the oldest loop under one
 * lock.  Items are whole records (a read and a reduction of up to
 * megabytes), so one lock per item costs nothing that shows. */
#include "base/workers.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#define MAX_HELPERS 64

typedef struct loop {
  size_t n, next, done;
  void (*fn)(void *arg, size_t i);
  void *arg;
  struct loop *queued; /* the next loop with indexes left */
} loop;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;     /* a loop queued */
static pthread_cond_t finished = PTHREAD_COND_INITIALIZER; /* an item done */
static loop *queue;
static int wanted;  /* helpers asked for */
static int started; /* helper threads running */

/* The oldest loop's next index (mu held); false when none is left. */
static bool claim(loop **l, size_t *i) {
  if (!queue)
    return false;
  *l = queue;
  *i = queue->next++;
  if (queue->next == queue->n)
    queue = queue->queued;
  return true;
}

static void run_item(loop *l, size_t i) {
  pthread_mutex_unlock(&mu);
  l->fn(l->arg, i);
  pthread_mutex_lock(&mu);
  if (++l->done == l->n)
    pthread_cond_broadcast(&finished);
}

static void *helper_main(void *unused) {
  (void)unused;
  pthread_mutex_lock(&mu);
  for (;;) {
    loop *l;
    size_t i;
    if (claim(&l, &i))
      run_item(l, i);
    else
      pthread_cond_wait(&work, &mu);
  }
  return NULL; /* helpers live as long as the process */
}

void smr_workers_set(int helpers) {
  pthread_mutex_lock(&mu);
  wanted = helpers < 0 ? 0 : helpers > MAX_HELPERS ? MAX_HELPERS : helpers;
  pthread_mutex_unlock(&mu);
}

/* Starts the helpers asked for and not yet running (mu held).  A thread
 * that cannot be created is simply not there: loops still finish. */
static void start_helpers(void) {
  pthread_t th; /* detached: nothing joins a helper */
  while (started < wanted &&
         pthread_create(&th, NULL, helper_main, NULL) == 0) {
    pthread_detach(th);
    started++;
  }
}

static void enqueue(loop *l) {
  loop **q = &queue;
  while (*q)
    q = &(*q)->queued;
  *q = l;
}

void smr_parallel_for(size_t n, void (*fn)(void *arg, size_t i), void *arg) {
  pthread_mutex_lock(&mu);
  int helpers = wanted;
  pthread_mutex_unlock(&mu);
  if (n < 2 || helpers == 0) {
    for (size_t i = 0; i < n; i++)
      fn(arg, i);
    return;
  }
  loop l = {.n = n, .fn = fn, .arg = arg};
  pthread_mutex_lock(&mu);
  start_helpers();
  enqueue(&l);
  pthread_cond_broadcast(&work);
  /* Take this loop's own items (not another's: the caller must not be
   * held up by a slower loop), then wait for the helpers' last ones. */
  while (l.next < l.n) {
    size_t i = l.next++;
    if (l.next == l.n) { /* unlink: no index left to hand out */
      loop **q = &queue;
      while (*q != &l)
        q = &(*q)->queued;
      *q = l.queued;
    }
    run_item(&l, i);
  }
  while (l.done < l.n)
    pthread_cond_wait(&finished, &mu);
  pthread_mutex_unlock(&mu);
}
