/* stats_cache.c - see stats_cache.h.  Entries are replaced in insertion
 * order (a ring), so an entry lives for the next SMR_STATS_CACHE_SLOTS
 * insertions; lookups search newest first. */
#include "trial/stats_cache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"

_Static_assert(SMR_STATS_KINDS <= 32, "the kinds wanted fit a 32-bit mask");

typedef struct slot {
  char *name; /* NULL: empty */
  int64_t step;
  int mode;
  smr_stats_what what;
  bool pending; /* claimed: a thread is computing the statistics */
  bool dead;    /* abandoned: matches nothing */
  int status;   /* the reader's status: 0, or why there are no stats */
  smr_stats stats;
} slot;

/* The kinds of entry claimed for a name (smr_stats_cache_wanted): open
 * addressing on the name's hash, WANTED_SLOTS names at most (those beyond
 * are not recorded: their entries are computed by whoever asks). */
#define WANTED_SLOTS 4096

typedef struct wanted {
  uint64_t hash; /* 0: empty */
  uint32_t what; /* bit per smr_stats_what */
} wanted;

struct smr_stats_cache {
  pthread_mutex_t mu;
  pthread_cond_t done; /* a pending entry was filled or abandoned */
  slot ring[SMR_STATS_CACHE_SLOTS];
  size_t next; /* the ring slot the next insertion replaces */
  uint64_t lookups, hits;
  wanted want[WANTED_SLOTS];
};

smr_stats_cache *smr_stats_cache_new(void) {
  smr_stats_cache *c = smr_xcalloc(1, sizeof *c);
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->done, NULL);
  return c;
}

/* SMRULES_STATS_CACHE=1: how often rules shared statistics, on stderr
 * (benchmarks, tests). */
static void print_counts(smr_stats_cache *c) {
  const char *e = getenv("SMRULES_STATS_CACHE");
  if (!e || !*e || strcmp(e, "0") == 0 || !c->lookups)
    return;
  fprintf(stderr, "smrules: statistics cache: lookups=%llu hits=%llu\n",
          (unsigned long long)c->lookups, (unsigned long long)c->hits);
}

void smr_stats_cache_free(smr_stats_cache *c) {
  if (!c)
    return;
  print_counts(c);
  for (size_t i = 0; i < SMR_STATS_CACHE_SLOTS; i++)
    free(c->ring[i].name);
  pthread_cond_destroy(&c->done);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* An entry for `what`: exactly that kind when `exact` (the entry a claim
 * made), else any kind that holds it (a full entry holds the counts). */
static bool matches(const slot *s, const char *name, int64_t step, int mode,
                    smr_stats_what what, bool exact) {
  bool holds = s->what == what || (!exact && s->what == SMR_STATS_FULL &&
                                   what == SMR_STATS_COUNTS);
  return s->name && !s->dead && holds && s->step == step && s->mode == mode &&
         strcmp(s->name, name) == 0;
}

/* Newest first: rules in lock step ask for what was just stored. */
static slot *find(smr_stats_cache *c, const char *name, int64_t step, int mode,
                  smr_stats_what what, bool exact) {
  for (size_t k = 1; k <= SMR_STATS_CACHE_SLOTS; k++) {
    slot *s =
        &c->ring[(c->next + SMR_STATS_CACHE_SLOTS - k) % SMR_STATS_CACHE_SLOTS];
    if (!s->name)
      return NULL; /* the ring fills in order: nothing older */
    if (matches(s, name, step, mode, what, exact))
      return s;
  }
  return NULL;
}

/* A new entry in the ring slot the next insertion replaces.  Under mu. */
static slot *insert(smr_stats_cache *c, char *name, int64_t step, int mode,
                    smr_stats_what what) {
  slot *s = &c->ring[c->next];
  c->next = (c->next + 1) % SMR_STATS_CACHE_SLOTS;
  free(s->name); /* a waiter on an evicted pending entry computes itself */
  *s = (slot){.name = name, .step = step, .mode = mode, .what = what};
  return s;
}

/* A name asked for in a mode (a rule reading by mode steps asks for other
 * entries than one reading global steps). */
static uint64_t name_hash(const char *name, int mode) {
  uint64_t h = smr_hash_str(SMR_HASH_INIT ^ (uint64_t)(unsigned)mode, name);
  return h ? h : 1; /* 0 marks an empty slot */
}

/* Under mu: the slot of the name's hash, or NULL when the table is full
 * and it is not there (`add`: an empty slot is taken for it). */
static wanted *want_slot(smr_stats_cache *c, uint64_t h, bool add) {
  for (size_t k = 0; k < WANTED_SLOTS; k++) {
    wanted *w = &c->want[(h + k) % WANTED_SLOTS];
    if (w->hash == h)
      return w;
    if (!w->hash) {
      if (!add)
        return NULL;
      w->hash = h;
      return w;
    }
  }
  return NULL;
}

uint32_t smr_stats_cache_wanted(smr_stats_cache *c, const char *name,
                                int mode) {
  uint64_t h = name_hash(name, mode);
  pthread_mutex_lock(&c->mu);
  wanted *w = want_slot(c, h, false);
  uint32_t what = w ? w->what : 0;
  pthread_mutex_unlock(&c->mu);
  return what;
}

bool smr_stats_cache_claim_fill(smr_stats_cache *c, const char *name,
                                int64_t step, int mode, smr_stats_what what) {
  char *copy = smr_xstrdup(name);
  pthread_mutex_lock(&c->mu);
  bool claimed = !find(c, name, step, mode, what, false);
  if (claimed) {
    insert(c, copy, step, mode, what)->pending = true;
    copy = NULL;
  }
  pthread_mutex_unlock(&c->mu);
  free(copy);
  return claimed;
}

smr_stats_claim smr_stats_cache_try(smr_stats_cache *c, const char *name,
                                    int64_t step, int mode, smr_stats_what what,
                                    bool wait, smr_stats *out, int *status) {
  char *copy = smr_xstrdup(name);
  pthread_mutex_lock(&c->mu);
  slot *s;
  while ((s = find(c, name, step, mode, what, false)) != NULL && s->pending &&
         wait)
    pthread_cond_wait(&c->done, &c->mu);
  smr_stats_claim got = SMR_STATS_BUSY;
  /* statistics only, the reductions' entries are not counted (the numbers
   * say how often rules shared a pass over a value's statistics) */
  bool counted = what < SMR_STATS_REDUCTION;
  if (counted && (!s || !s->pending))
    c->lookups++; /* a busy answer is asked again: counted then */
  if (!s) {
    insert(c, copy, step, mode, what)->pending = true;
    copy = NULL;
    got = SMR_STATS_CLAIMED;
  } else if (!s->pending) {
    c->hits += counted;
    *out = s->stats;
    *status = s->status;
    got = SMR_STATS_STORED;
  }
  pthread_mutex_unlock(&c->mu);
  free(copy);
  return got;
}

bool smr_stats_cache_claim(smr_stats_cache *c, const char *name, int64_t step,
                           int mode, smr_stats *out, int *status) {
  return smr_stats_cache_try(c, name, step, mode, SMR_STATS_FULL, true, out,
                             status) == SMR_STATS_STORED;
}

void smr_stats_cache_fill(smr_stats_cache *c, const char *name, int64_t step,
                          int mode, smr_stats_what what, int status,
                          const smr_stats *st) {
  pthread_mutex_lock(&c->mu);
  slot *s = find(c, name, step, mode, what, true);
  if (!s) /* evicted while it was computed */
    s = insert(c, smr_xstrdup(name), step, mode, what);
  s->stats = *st;
  s->status = status;
  s->pending = false;
  /* only what a value gave: a kind asked where there is no value
   * (ExplodingTensor's saved reductions) is not worth computing */
  wanted *w = status == 0 ? want_slot(c, name_hash(name, mode), true) : NULL;
  if (w)
    w->what |= 1u << what;
  pthread_cond_broadcast(&c->done);
  pthread_mutex_unlock(&c->mu);
}

void smr_stats_cache_abandon(smr_stats_cache *c, const char *name, int64_t step,
                             int mode, smr_stats_what what) {
  pthread_mutex_lock(&c->mu);
  slot *s = find(c, name, step, mode, what, true);
  if (s && s->pending)
    s->dead = true;
  pthread_cond_broadcast(&c->done);
  pthread_mutex_unlock(&c->mu);
}

void smr_stats_cache_counts(smr_stats_cache *c, uint64_t *lookups,
                            uint64_t *hits) {
  pthread_mutex_lock(&c->mu);
  *lookups = c->lookups;
  *hits = c->hits;
  pthread_mutex_unlock(&c->mu);
}
