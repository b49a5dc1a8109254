/* test_schedule.c - the turn-taking of core/run/schedule.c: every unit runs
 * to its end, never on two threads at once, whole units in configuration
 * order, lock step within the lag (the longest turns of a step first),
 * non-positional units whole. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "run/schedule.h"
#include "unit.h"

#define MAX_UNITS 8
#define MAX_TURNS 4096

typedef struct turn {
  size_t unit, from, limit;
} turn;

typedef struct probe {
  size_t steps[MAX_UNITS];   /* steps of each unit */
  size_t stop_at[MAX_UNITS]; /* a unit that stops early (0: never) */
  long delay_ns[MAX_UNITS];  /* time per step */
  bool virtual_time;         /* count delay_ns on work_ns instead of sleeping */
  long work_ns;              /* the work done so far, by the virtual clock */
  bool positional[MAX_UNITS];
  pthread_mutex_t mu;
  turn turns[MAX_TURNS];
  size_t nturns;
  size_t pos_now[MAX_UNITS]; /* published positions, for the lag check */
  bool done[MAX_UNITS];
  int running[MAX_UNITS];
  int overlap;     /* a unit ran on two threads at once */
  size_t max_lead; /* largest (start of a turn - slowest position) */
} probe;

static void sleep_ns(long ns) {
  struct timespec ts = {0, ns};
  nanosleep(&ts, NULL);
}

/* The slowest unfinished positional unit's position (mu held). */
static size_t slowest(const probe *p, size_t n) {
  size_t lo = SIZE_MAX;
  for (size_t i = 0; i < n; i++)
    if (p->positional[i] && !p->done[i] && p->pos_now[i] < lo)
      lo = p->pos_now[i];
  return lo;
}

static size_t g_units;

static bool run_unit(void *arg, size_t u, size_t *pos, size_t limit) {
  probe *p = arg;
  pthread_mutex_lock(&p->mu);
  if (p->running[u]++)
    p->overlap = 1;
  if (p->nturns < MAX_TURNS)
    p->turns[p->nturns++] = (turn){u, *pos, limit};
  size_t lo = slowest(p, g_units);
  if (p->positional[u] && lo != SIZE_MAX && *pos - lo > p->max_lead)
    p->max_lead = *pos - lo;
  pthread_mutex_unlock(&p->mu);
  bool finished = false;
  while (*pos < p->steps[u] && *pos < limit) {
    if (p->virtual_time) {
      pthread_mutex_lock(&p->mu);
      p->work_ns += p->delay_ns[u];
      pthread_mutex_unlock(&p->mu);
    } else {
      sleep_ns(p->delay_ns[u]);
    }
    (*pos)++;
    if (p->stop_at[u] && *pos == p->stop_at[u]) {
      finished = true;
      break;
    }
  }
  finished |= *pos >= p->steps[u];
  pthread_mutex_lock(&p->mu);
  p->running[u]--;
  p->pos_now[u] = *pos;
  p->done[u] = finished;
  pthread_mutex_unlock(&p->mu);
  return finished;
}

static void setup(probe *p, size_t n, size_t steps) {
  memset(p, 0, sizeof *p);
  pthread_mutex_init(&p->mu, NULL);
  g_units = n;
  for (size_t i = 0; i < n; i++) {
    p->steps[i] = steps;
    p->positional[i] = true;
  }
}

/* The scheduler's clock when virtual_time is set: the work done, so turns
 * "take" exactly their delay_ns whatever the machine. */
static double work_clock(void *arg) {
  probe *p = arg;
  pthread_mutex_lock(&p->mu);
  double s = (double)p->work_ns * 1e-9;
  pthread_mutex_unlock(&p->mu);
  return s;
}

static void run(probe *p, size_t n, int jobs, size_t block, size_t lag) {
  smr_sched s = {.units = n,
                 .clock = p->virtual_time ? work_clock : NULL,
                 .positional = p->positional,
                 .jobs = jobs,
                 .block = block,
                 .lag = lag,
                 .run = run_unit,
                 .arg = p};
  smr_sched_run(&s);
}

static void test_whole_units_in_order(void) {
  probe p;
  setup(&p, 3, 5);
  run(&p, 3, 1, SMR_SCHED_ALL, 0);
  CHECK_EQ_INT(p.nturns, 3);
  for (size_t i = 0; i < 3 && i < p.nturns; i++) {
    CHECK_EQ_INT(p.turns[i].unit, i);
    CHECK_EQ_INT(p.turns[i].from, 0);
    CHECK(p.turns[i].limit == SMR_SCHED_ALL);
  }
  for (size_t i = 0; i < 3; i++)
    CHECK(p.done[i]);
}

/* One thread, block 1: every unit's step 0, then every unit's step 1, ...
 * (step 0 in configuration order: no turn has been timed yet). */
static void test_lock_step_round_robin(void) {
  probe p;
  setup(&p, 3, 4);
  run(&p, 3, 1, 1, 1);
  CHECK_EQ_INT(p.nturns, 12);
  for (size_t t = 0; t < p.nturns; t++) {
    if (t < 3)
      CHECK_EQ_INT(p.turns[t].unit, t);
    CHECK_EQ_INT(p.turns[t].from, t / 3);
    CHECK_EQ_INT(p.turns[t].limit, t / 3 + 1);
  }
  for (size_t step = 0; step < 4; step++) {
    bool seen[3] = {false, false, false};
    for (size_t t = 3 * step; t < 3 * step + 3 && t < p.nturns; t++)
      seen[p.turns[t].unit] = true;
    CHECK(seen[0] && seen[1] && seen[2]);
  }
}

/* Within a step the unit whose turns take longest goes first, so that no
 * long turn begins last while the other threads wait for it.  Turns are
 * timed by the work they do (a virtual clock), not by a clock a busy or
 * fast machine would stretch or shrink. */
static void test_lock_step_longest_first(void) {
  probe p;
  setup(&p, 3, 4);
  p.virtual_time = true;
  p.delay_ns[0] = 0;
  p.delay_ns[1] = 20000000; /* 20 ms */
  p.delay_ns[2] = 8000000;  /* 8 ms */
  run(&p, 3, 1, 1, 1);
  static const size_t want[3] = {1, 2, 0};
  CHECK_EQ_INT(p.nturns, 12);
  for (size_t t = 3; t < p.nturns; t++) {
    CHECK_EQ_INT(p.turns[t].from, t / 3);
    CHECK_EQ_INT(p.turns[t].unit, want[t % 3]);
  }
}

/* Units whose turns read values only for statistics (smr_sched.stats_only)
 * go after the others at the same position, whatever their cost: the
 * others' reads fill the statistics they would read values for.  Unit 1
 * takes longest and unit 0 is first in configuration order, but both only
 * read for statistics: from step 1 on, unit 2 goes first, then 1, then 0
 * (longest first among each kind). */
static bool g_stats_only[MAX_UNITS];
static bool unit_stats_only(void *arg, size_t u) {
  (void)arg;
  return g_stats_only[u];
}

static void test_lock_step_stats_only_last(void) {
  probe p;
  setup(&p, 3, 4);
  p.virtual_time = true;
  p.delay_ns[0] = 1000000;  /* 1 ms */
  p.delay_ns[1] = 20000000; /* 20 ms */
  p.delay_ns[2] = 8000000;  /* 8 ms */
  g_stats_only[0] = g_stats_only[1] = true;
  g_stats_only[2] = false;
  smr_sched s = {.units = 3,
                 .clock = work_clock,
                 .positional = p.positional,
                 .jobs = 1,
                 .block = 1,
                 .lag = 1,
                 .run = run_unit,
                 .stats_only = unit_stats_only,
                 .arg = &p};
  smr_sched_run(&s);
  static const size_t want[3] = {2, 1, 0};
  CHECK_EQ_INT(p.nturns, 12);
  for (size_t t = 3; t < p.nturns; t++) {
    CHECK_EQ_INT(p.turns[t].from, t / 3);
    CHECK_EQ_INT(p.turns[t].unit, want[t % 3]);
  }
}

/* A unit that stops early leaves the others free to go on. */
static void test_early_stop(void) {
  probe p;
  setup(&p, 2, 6);
  p.stop_at[0] = 2;
  run(&p, 2, 1, 1, 1);
  CHECK(p.done[0] && p.done[1]);
  CHECK_EQ_INT(p.pos_now[0], 2);
  CHECK_EQ_INT(p.pos_now[1], 6);
}

/* Two threads, one slow unit: the fast ones never lead by lag or more,
 * and no unit ever runs on two threads at once. */
static void test_lag_bound_two_threads(void) {
  for (size_t lag = 1; lag <= 4; lag *= 2) {
    probe p;
    setup(&p, 4, 24);
    p.delay_ns[0] = 2000000; /* 2 ms per step */
    run(&p, 4, 2, 1, lag);
    CHECK(!p.overlap);
    CHECK(p.max_lead < lag);
    for (size_t i = 0; i < 4; i++)
      CHECK_EQ_INT(p.pos_now[i], 24);
  }
}

/* A non-positional unit runs whole and does not hold the others back. */
static void test_non_positional_whole(void) {
  probe p;
  setup(&p, 3, 8);
  p.positional[1] = false;
  run(&p, 3, 2, 1, 1);
  CHECK(!p.overlap);
  size_t turns_of_1 = 0;
  for (size_t t = 0; t < p.nturns; t++)
    if (p.turns[t].unit == 1) {
      turns_of_1++;
      CHECK(p.turns[t].limit == SMR_SCHED_ALL);
    }
  CHECK_EQ_INT(turns_of_1, 1);
  for (size_t i = 0; i < 3; i++)
    CHECK(p.done[i]);
}

/* Many threads, whole units: each unit exactly once. */
static void test_whole_units_many_threads(void) {
  probe p;
  setup(&p, 8, 3);
  for (size_t i = 0; i < 8; i++)
    p.delay_ns[i] = 100000;
  run(&p, 8, 4, SMR_SCHED_ALL, 0);
  CHECK(!p.overlap);
  CHECK_EQ_INT(p.nturns, 8);
  bool seen[8] = {0};
  for (size_t t = 0; t < p.nturns; t++)
    seen[p.turns[t].unit] = true;
  for (size_t i = 0; i < 8; i++)
    CHECK(seen[i]);
}

/* slowest_moved reports the slowest position each time it moves on. */
static size_t g_moves[64], g_nmoves;

static void on_slowest(void *arg, size_t pos) {
  (void)arg;
  if (g_nmoves < 64)
    g_moves[g_nmoves++] = pos;
}

static void test_slowest_moved(void) {
  probe p;
  setup(&p, 3, 5);
  g_nmoves = 0;
  smr_sched s = {.units = 3,
                 .positional = p.positional,
                 .jobs = 1,
                 .block = 1,
                 .lag = 1,
                 .run = run_unit,
                 .arg = &p,
                 .slowest_moved = on_slowest};
  smr_sched_run(&s);
  /* one thread, round robin: the slowest moves to 1, 2, 3, 4 (at 5 all
   * are finished, which is not reported) */
  CHECK_EQ_INT(g_nmoves, 4);
  for (size_t i = 0; i < g_nmoves; i++)
    CHECK_EQ_INT(g_moves[i], i + 1);
}

/* The byte budget (smr_sched.budget): each unit's turns "hold" g_bytes[u]
 * while they run; the sum over the turns running at once, of units whose
 * bytes the scheduler knew when the turn began (not their first turn, or
 * a floor that covers them), stays within the budget unless a turn runs
 * alone.  An invariant checked at every turn's start, whatever the
 * timing. */
static size_t g_bytes[MAX_UNITS], g_floor, g_budget_held, g_budget_max;
static size_t g_budget_turns[MAX_UNITS];
static int g_budget_running, g_budget_max_running;
static pthread_mutex_t g_budget_mu = PTHREAD_MUTEX_INITIALIZER;

static bool run_budgeted(void *arg, size_t u, size_t *pos, size_t limit) {
  pthread_mutex_lock(&g_budget_mu);
  bool known = g_budget_turns[u]++ > 0 || g_floor >= g_bytes[u];
  size_t counted = known ? g_bytes[u] : 0;
  g_budget_held += counted;
  g_budget_running++;
  if (g_budget_running > g_budget_max_running)
    g_budget_max_running = g_budget_running;
  if (g_budget_running > 1 && g_budget_held > g_budget_max)
    g_budget_max = g_budget_held;
  pthread_mutex_unlock(&g_budget_mu);
  bool done = run_unit(arg, u, pos, limit);
  pthread_mutex_lock(&g_budget_mu);
  g_budget_held -= counted;
  g_budget_running--;
  pthread_mutex_unlock(&g_budget_mu);
  return done;
}

static size_t budget_turn_bytes(void *arg, size_t u) {
  (void)arg;
  return g_bytes[u];
}

static size_t budget_floor(void *arg) {
  (void)arg;
  return g_floor;
}

static void run_budget(probe *p, size_t n, int jobs, size_t budget) {
  memset(g_budget_turns, 0, sizeof g_budget_turns);
  g_budget_held = g_budget_max = 0;
  g_budget_running = g_budget_max_running = 0;
  smr_sched s = {.units = n,
                 .positional = p->positional,
                 .jobs = jobs,
                 .block = 1,
                 .lag = 2,
                 .run = run_budgeted,
                 .budget = budget,
                 .turn_bytes = budget_turn_bytes,
                 .turn_bytes_floor = budget_floor,
                 .arg = p};
  smr_sched_run(&s);
}

static void test_budget_learned(void) {
  probe p;
  setup(&p, 4, 12);
  size_t bytes[4] = {60, 60, 10, 0};
  for (size_t i = 0; i < 4; i++) {
    g_bytes[i] = bytes[i];
    p.delay_ns[i] = 200000;
  }
  g_floor = 0;
  run_budget(&p, 4, 3, 100);
  CHECK(!p.overlap);
  CHECK(g_budget_max <= 100);
  for (size_t i = 0; i < 4; i++)
    CHECK_EQ_INT(p.pos_now[i], 12);
}

/* A floor as large as half the budget: no two turns at once, not even the
 * first ones; a unit larger than the budget still runs (alone). */
static void test_budget_floor(void) {
  probe p;
  setup(&p, 4, 6);
  size_t bytes[4] = {150, 10, 0, 40};
  for (size_t i = 0; i < 4; i++) {
    g_bytes[i] = bytes[i];
    p.delay_ns[i] = 200000;
  }
  g_floor = 60;
  run_budget(&p, 4, 3, 100);
  CHECK(!p.overlap);
  CHECK_EQ_INT(g_budget_max_running, 1);
  for (size_t i = 0; i < 4; i++)
    CHECK_EQ_INT(p.pos_now[i], 6);
}

/* Bytes held beyond any turn (smr_sched.extra_bytes: a read one rule
 * does for another) count against the budget when a turn begins: turns
 * of 30 that fit two at a time in 100 run one at a time beside 60 extra.
 * What the running turns reserve is told each time a turn begins or ends
 * (smr_sched.turns_reserved): never more than the turns that may run at
 * once, and nothing once every turn is over. */
static size_t g_extra, g_reserved_last, g_reserved_max, g_reserved_calls;

static size_t budget_extra(void *arg) {
  (void)arg;
  return g_extra;
}

static void budget_reserved(void *arg, size_t bytes) {
  (void)arg;
  g_reserved_last = bytes;
  g_reserved_calls++;
  if (bytes > g_reserved_max)
    g_reserved_max = bytes;
}

static void run_budget_extra(probe *p, size_t n, size_t extra) {
  memset(g_budget_turns, 0, sizeof g_budget_turns);
  g_budget_held = g_budget_max = 0;
  g_budget_running = g_budget_max_running = 0;
  g_extra = extra;
  g_reserved_last = g_reserved_max = g_reserved_calls = 0;
  smr_sched s = {.units = n,
                 .positional = p->positional,
                 .jobs = 3,
                 .block = 1,
                 .lag = 2,
                 .run = run_budgeted,
                 .budget = 100,
                 .turn_bytes = budget_turn_bytes,
                 .turn_bytes_floor = budget_floor,
                 .turns_reserved = budget_reserved,
                 .extra_bytes = budget_extra,
                 .arg = p};
  smr_sched_run(&s);
}

static void test_budget_extra(void) {
  probe p;
  setup(&p, 4, 6);
  for (size_t i = 0; i < 4; i++) {
    g_bytes[i] = 30;
    p.delay_ns[i] = 200000;
  }
  g_floor = 30;
  run_budget_extra(&p, 4, 60);
  CHECK(!p.overlap);
  CHECK_EQ_INT(g_budget_max_running, 1);
  CHECK_EQ_INT(g_reserved_max, 30);
  CHECK_EQ_INT(g_reserved_last, 0);
  CHECK(g_reserved_calls >= 2 * 4 * 6);
  for (size_t i = 0; i < 4; i++)
    CHECK_EQ_INT(p.pos_now[i], 6);

  setup(&p, 4, 6);
  for (size_t i = 0; i < 4; i++)
    p.delay_ns[i] = 200000;
  run_budget_extra(&p, 4, 0);
  CHECK(!p.overlap);
  CHECK(g_reserved_max <= 90); /* three threads, 30 each */
  CHECK_EQ_INT(g_reserved_last, 0);
  for (size_t i = 0; i < 4; i++)
    CHECK_EQ_INT(p.pos_now[i], 6);
}

int main(void) {
  TEST_RUN(test_slowest_moved);
  TEST_RUN(test_whole_units_in_order);
  TEST_RUN(test_lock_step_round_robin);
  TEST_RUN(test_lock_step_longest_first);
  TEST_RUN(test_lock_step_stats_only_last);
  TEST_RUN(test_early_stop);
  TEST_RUN(test_lag_bound_two_threads);
  TEST_RUN(test_budget_extra);
  TEST_RUN(test_non_positional_whole);
  TEST_RUN(test_whole_units_many_threads);
  TEST_RUN(test_budget_learned);
  TEST_RUN(test_budget_floor);
  return TEST_REPORT("test_schedule");
}
