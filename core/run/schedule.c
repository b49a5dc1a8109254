/* schedule.c - worker threads taking turns on rule instances (see
 * schedule.h for the two orders). */
#include "run/schedule.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "base/common.h"

typedef struct unit_state {
  size_t pos;
  bool running, done;
  bool stats_only; /* its last turn read values only for statistics */
  double cost;     /* seconds its recent turns took (a moving average) */
  size_t bytes;    /* most large records a turn of it held (smr_sched.budget) */
} unit_state;

typedef struct sched_run {
  const smr_sched *s;
  unit_state *u;
  size_t left; /* units not finished */
  pthread_mutex_t mu;
  pthread_cond_t changed; /* a turn ended */
} sched_run;

static bool positional(const sched_run *r, size_t i) {
  return !r->s->positional || r->s->positional[i];
}

static bool lock_step(const sched_run *r) {
  return r->s->block != SMR_SCHED_ALL;
}

/* Position of the slowest unfinished positional unit (SIZE_MAX: none). */
static size_t slowest(const sched_run *r) {
  size_t lo = SIZE_MAX;
  for (size_t i = 0; i < r->s->units; i++)
    if (!r->u[i].done && positional(r, i) && r->u[i].pos < lo)
      lo = r->u[i].pos;
  return lo;
}

/* Whether unit a should go before unit b in lock step: the one further
 * behind, then one that reads values before one that only reads them for
 * statistics (smr_sched.stats_only), then the one whose turns take
 * longer.  Longest first, because the threads wait for the last turn of
 * a step: a long turn begun last would leave the other threads idle
 * while it runs. */
static bool goes_before(const unit_state *a, const unit_state *b) {
  if (a->pos != b->pos)
    return a->pos < b->pos;
  if (a->stats_only != b->stats_only)
    return b->stats_only;
  return a->cost > b->cost;
}

/* The bytes a turn of u counts against the budget: the most its turns
 * held, and at least the floor (a rule that held nothing yet may hold
 * records at its next step: WeightUpdateRatio holds none at its first
 * step, two from then on).  Asked anew each time, also of the running
 * turns: one begun before the first large record was read counts as
 * large from then on. */
static size_t reservation(const unit_state *u, size_t floor) {
  return u->bytes > floor ? u->bytes : floor;
}

/* What the running turns reserve, and how many run. */
static size_t running_reserved(const sched_run *r, size_t floor,
                               size_t *running) {
  size_t sum = 0;
  *running = 0;
  for (size_t i = 0; i < r->s->units; i++)
    if (r->u[i].running) {
      ++*running;
      sum += reservation(&r->u[i], floor);
    }
  return sum;
}

static size_t bytes_floor(const sched_run *r) {
  return r->s->turn_bytes_floor ? r->s->turn_bytes_floor(r->s->arg) : 0;
}

/* Whether u's turn fits the byte budget beside the running ones and the
 * extra reads; one turn alone always runs, so some thread can always go
 * on. */
static bool within_budget(const sched_run *r, const unit_state *u) {
  if (!r->s->budget)
    return true;
  size_t floor = bytes_floor(r), running;
  size_t sum = running_reserved(r, floor, &running);
  if (r->s->extra_bytes)
    sum += r->s->extra_bytes(r->s->arg);
  return !running || sum + reservation(u, floor) <= r->s->budget;
}

/* Under r->mu, after a turn began or ended: what the running turns
 * reserve, for the reads beyond them (smr_sched.turns_reserved). */
static void tell_reserved(const sched_run *r) {
  if (r->s->budget && r->s->turns_reserved) {
    size_t running;
    r->s->turns_reserved(r->s->arg,
                         running_reserved(r, bytes_floor(r), &running));
  }
}

/* The unit a free thread takes now, or -1 when every candidate is running
 * or too far ahead.  Whole units go in configuration order; in lock step
 * see goes_before.  The slowest unit is always a candidate when it is not
 * running, so some thread can always go on. */
static long pick(const sched_run *r) {
  size_t lo = slowest(r), lag = r->s->lag ? r->s->lag : 1;
  long best = -1;
  for (size_t i = 0; i < r->s->units; i++) {
    const unit_state *u = &r->u[i];
    if (u->done || u->running)
      continue;
    if (!lock_step(r) || !positional(r, i))
      return (long)i;
    if (u->pos - lo < lag && (best < 0 || goes_before(u, &r->u[best])) &&
        within_budget(r, u))
      best = (long)i;
  }
  return best;
}

static double seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double turn_clock(const smr_sched *s) {
  return s->clock ? s->clock(s->arg) : seconds_now();
}

static size_t turn_limit(const sched_run *r, size_t i, size_t pos) {
  if (!lock_step(r) || !positional(r, i))
    return SMR_SCHED_ALL;
  return pos > SIZE_MAX - r->s->block ? SIZE_MAX : pos + r->s->block;
}

static void *worker(void *arg) {
  sched_run *r = arg;
  pthread_mutex_lock(&r->mu);
  while (r->left) {
    long i = pick(r);
    if (i < 0) {
      pthread_cond_wait(&r->changed, &r->mu);
      continue;
    }
    unit_state *u = &r->u[i];
    u->running = true;
    tell_reserved(r);
    size_t pos = u->pos, limit = turn_limit(r, (size_t)i, pos);
    pthread_mutex_unlock(&r->mu);
    double began = turn_clock(r->s);
    bool finished = r->s->run(r->s->arg, (size_t)i, &pos, limit);
    double took = turn_clock(r->s) - began;
    bool stats_only =
        r->s->stats_only && r->s->stats_only(r->s->arg, (size_t)i);
    size_t bytes =
        r->s->turn_bytes ? r->s->turn_bytes(r->s->arg, (size_t)i) : 0;
    pthread_mutex_lock(&r->mu);
    if (bytes > u->bytes)
      u->bytes = bytes;
    u->stats_only = stats_only;
    u->cost = u->cost ? 0.75 * u->cost + 0.25 * took : took;
    size_t before = slowest(r);
    /* a turn that neither advances nor finishes would repeat forever */
    if (!finished && pos <= u->pos)
      finished = true;
    u->pos = pos;
    u->running = false;
    tell_reserved(r);
    if (finished) {
      u->done = true;
      r->left--;
    }
    size_t now = slowest(r);
    if (r->s->slowest_moved && now != before && now != SIZE_MAX)
      r->s->slowest_moved(r->s->arg, now);
    pthread_cond_broadcast(&r->changed);
  }
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

void smr_sched_run(const smr_sched *s) {
  if (!s->units)
    return;
  sched_run r = {.s = s, .left = s->units};
  r.u = smr_xcalloc(s->units, sizeof *r.u);
  pthread_mutex_init(&r.mu, NULL);
  pthread_cond_init(&r.changed, NULL);
  size_t extra = s->jobs > 1 ? (size_t)s->jobs - 1 : 0;
  if (extra > s->units - 1)
    extra = s->units - 1;
  pthread_t *th = extra ? smr_xcalloc(extra, sizeof *th) : NULL;
  size_t started = 0;
  for (size_t i = 0; i < extra; i++)
    if (pthread_create(&th[started], NULL, worker, &r) == 0)
      started++;
  worker(&r);
  for (size_t i = 0; i < started; i++)
    pthread_join(th[i], NULL);
  free(th);
  pthread_cond_destroy(&r.changed);
  pthread_mutex_destroy(&r.mu);
  free(r.u);
}
