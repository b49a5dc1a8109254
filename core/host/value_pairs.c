/* value_pairs.c - see value_pairs.h.
 *
 * SimilarAcrossRuns read every value of the trial a second time, beside
 * the rules that read it anyway: of the 4.2 GB the twenty debugging rules
 * read on the bench's 1.22 GB cnn trial, 1.22 GB were its own reads of the
 * trial.  Keeping the records for it is not an option (records of 13 MB,
 * a 64 MB bound on the process); doing its comparison while another
 * rule's read has the value in memory is.
 *
 * A registration per (rule, trial, other trial, work, mode) remembers,
 * per tensor name (by hash), the last step the rule asked for.  A read of
 * that tensor at a later step does the work and keeps the result in a
 * ring of RESULT_SLOTS, until the rule takes it (then it is gone: the
 * rule asks once) or the ring comes round (then the rule computes it
 * again when it asks).  A rule walks its steps upwards, and in lock step
 * (run/schedule.h) a rule that reads only what others read goes after
 * them at each step, so its results are there when it asks. */
#include "host/value_pairs.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "format/dtype.h"
#include "host/data.h"
#include "source/source.h"

#define RESULT_SLOTS 1024
/* Names remembered per registration, by hash: two names in one slot
 * share its step, so the later one asked is not computed ahead at that
 * step (it is when asked). */
#define ASKED_SLOTS 4096
#define NEVER INT64_MIN
/* Registrations at most: beyond them a rule's work is done when asked. */
#define REGS_MAX 64
/* The other trial's record is about as large as the value in hand: its
 * header, and the page its buffer is rounded to, besides. */
#define EXTRA_SLACK ((size_t)64 << 10)

typedef struct reg {
  smr_pair_key k;
  int mode;
  int64_t asked[ASKED_SLOTS]; /* the last step asked for, or NEVER */
} reg;

typedef struct result_slot {
  const reg *r; /* NULL: empty */
  char *name;
  int64_t step;
  bool pending; /* a thread is doing the work */
  bool refused; /* the work did not fit the record budget: the rule's */
  int status;
  unsigned char result[SMR_PAIR_RESULT_MAX];
} result_slot;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t done; /* a pending result is there, or dropped */
  reg *regs[REGS_MAX];
  atomic_size_t nregs; /* read without the lock: no work, no lock */
  result_slot ring[RESULT_SLOTS];
  size_t next; /* the slot the next result replaces */
  uint64_t ahead, taken, asked;
  uint64_t streamed; /* of ahead: the other trial's value read in pieces */
} P = {.mu = PTHREAD_MUTEX_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

/* SMRULES_STATS_CACHE=1: how many results were computed ahead (and of
 * those, with the other trial's value read in pieces), on stderr at exit
 * (benchmarks, tests). */
static void print_counts(void) {
  fprintf(stderr,
          "smrules: value pairs: asked=%llu ahead=%llu taken=%llu "
          "streamed=%llu\n",
          (unsigned long long)P.asked, (unsigned long long)P.ahead,
          (unsigned long long)P.taken, (unsigned long long)P.streamed);
}

static void count_at_exit(void) {
  const char *e = getenv("SMRULES_STATS_CACHE");
  if (e && *e && strcmp(e, "0") != 0)
    atexit(print_counts);
}

static size_t name_slot(const char *name) {
  return (size_t)(smr_hash_str(SMR_HASH_INIT, name) % ASKED_SLOTS);
}

static bool same_key(const smr_pair_key *a, const smr_pair_key *b) {
  return a->owner == b->owner && a->t == b->t && a->other == b->other &&
         a->call == b->call && a->fn == b->fn && a->arg == b->arg &&
         a->merge_call == b->merge_call && a->merge == b->merge;
}

/* Under P.mu: the registration of k in mode, made when new (NULL when
 * there is no room). */
static reg *reg_of(const smr_pair_key *k, int mode) {
  size_t n = atomic_load(&P.nregs);
  for (size_t i = 0; i < n; i++)
    if (P.regs[i]->mode == mode && same_key(&P.regs[i]->k, k))
      return P.regs[i];
  if (n == REGS_MAX)
    return NULL;
  reg *r = smr_xcalloc(1, sizeof *r);
  r->k = *k;
  r->mode = mode;
  for (size_t i = 0; i < ASKED_SLOTS; i++)
    r->asked[i] = NEVER;
  P.regs[n] = r;
  atomic_store(&P.nregs, n + 1);
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, count_at_exit);
  return r;
}

/* Under P.mu. */
static result_slot *slot_of(const reg *r, const char *name, int64_t step) {
  for (size_t i = 0; i < RESULT_SLOTS; i++) {
    result_slot *s = &P.ring[i];
    if (s->r == r && s->step == step && strcmp(s->name, name) == 0)
      return s;
  }
  return NULL;
}

static void slot_clear(result_slot *s) {
  free(s->name);
  memset(s, 0, sizeof *s);
}

/* Under P.mu: a slot for a new pending result, or NULL when every slot
 * is pending. */
static result_slot *slot_claim(const reg *r, const char *name, int64_t step) {
  for (size_t tries = 0; tries < RESULT_SLOTS; tries++) {
    result_slot *s = &P.ring[P.next];
    P.next = (P.next + 1) % RESULT_SLOTS;
    if (s->pending)
      continue;
    slot_clear(s);
    s->r = r;
    s->name = smr_xstrdup(name);
    s->step = step;
    s->pending = true;
    return s;
  }
  return NULL;
}

/* The other trial's value and the work, with a in hand.  The other
 * trial's read is not this thread's rule's (not counted for the
 * schedule: data.h). */
static int pair_with(const smr_pair_key *k, const char *name, int64_t step,
                     int mode, const smr_tensor *a, const smr_value_loc *la,
                     void *result) {
  smr_tensor b;
  smr_value_loc lb;
  smr_error e;
  smr_error_clear(&e);
  bool quiet = smr_data_reads_quiet(true);
  int rc = smr_data_value(k->other, name, step, mode, NULL, &b, &lb, &e);
  smr_data_reads_quiet(quiet);
  if (rc == SMR_ERR_USAGE)
    rc = smr_data_unreadable(&e);
  if (rc != SMR_OK)
    return rc;
  rc = k->call(k->fn, k->arg, a, la, &b, &lb, result);
  smr_tensor_release(&b);
  return rc;
}

/* The other trial's value read in pieces of at most PIECE_BYTES: all
 * the memory the work done ahead needs beside the value in hand, whatever
 * the record budget leaves (with two threads, each running turn reserves
 * two of the largest records, and a whole record of the other trial did
 * not fit beside them: the rule read both values itself). */
#define PIECE_BYTES ((size_t)1 << 20)

typedef struct streaming {
  const smr_pair_key *k;
  const smr_tensor *a;
  const smr_value_loc *la;
  size_t runs;
  unsigned char result[SMR_PAIR_RESULT_MAX];
} streaming;

/* One run of elements: the work on a's and b's at the same offset, as
 * 1-D values of one length, folded into the result so far. */
static int streamed_piece(void *arg, uint64_t off, const uint8_t *bytes,
                          size_t len) {
  streaming *s = arg;
  smr_tensor pa = *s->a, pb = *s->a; /* views: never released */
  int64_t n = (int64_t)(len / smr_dtype_size(s->a->dtype));
  pa.ndim = pb.ndim = 1;
  memset(pa.shape, 0, sizeof pa.shape);
  pa.shape[0] = n;
  memcpy(pb.shape, pa.shape, sizeof pb.shape);
  pa.count = pb.count = n;
  pa.nbytes = pb.nbytes = len;
  pa.data = s->a->data + off;
  pb.data = bytes;
  pa.owner_ = pb.owner_ = NULL;
  pa.release_ = pb.release_ = NULL;
  unsigned char part[SMR_PAIR_RESULT_MAX];
  memset(part, 0, sizeof part);
  int rc = s->k->call(s->k->fn, s->k->arg, &pa, s->la, &pb, s->la, part);
  if (rc != SMR_OK)
    return rc;
  if (s->runs++)
    s->k->merge_call(s->k->merge, s->k->arg, s->result, part);
  else
    memcpy(s->result, part, sizeof part);
  return SMR_OK;
}

/* The work with a in hand and the other trial's value in pieces: true
 * and the result when the other trial's record is the plain case
 * smr_trial_value_pieces checks and the work took every run; false
 * otherwise (nothing decided: the whole value is read, by the normal
 * path, which also warns of what is wrong with it). */
static bool pair_streamed(const smr_pair_key *k, const char *name, int64_t step,
                          int mode, const smr_tensor *a,
                          const smr_value_loc *la, void *result) {
  if (!k->merge_call)
    return false;
  streaming s = {.k = k, .a = a, .la = la};
  smr_trial_reader_enter(k->other); /* live: trial.h, as data.c's reads */
  if (smr_trial_value_pieces(k->other, name, step, mode, a, PIECE_BYTES, 0,
                             streamed_piece, &s, NULL, NULL) != SMR_OK ||
      !s.runs)
    return false;
  memcpy(result, s.result, SMR_PAIR_RESULT_MAX);
  return true;
}

/* Both values read here: the rule's trial's as read for statistics (a
 * read another rule's would have served: run/schedule.h orders the rule
 * after those), unless another rule's read left the work to it for want
 * of room (own): with two threads, each running turn reserves two of the
 * largest records and the other trial's large records do not fit beside
 * two of them; then going after the readers only made the rule's long
 * turns the last of each step. */
static int pair_read(const smr_pair_key *k, const char *name, int64_t step,
                     int mode, bool own, void *result) {
  smr_tensor a;
  smr_value_loc la;
  smr_error e;
  smr_error_clear(&e);
  int depth = smr_data_reads_for_stats(own ? 0 : 1);
  int rc = smr_data_value(k->t, name, step, mode, NULL, &a, &la, &e);
  smr_data_reads_for_stats(depth);
  if (rc == SMR_ERR_USAGE)
    rc = smr_data_unreadable(&e);
  if (rc != SMR_OK)
    return rc;
  rc = pair_with(k, name, step, mode, &a, &la, result);
  smr_tensor_release(&a);
  return rc;
}

int smr_value_pair(const smr_pair_key *k, const char *name, int64_t step,
                   int mode, void *result, size_t size) {
  if (size > SMR_PAIR_RESULT_MAX)
    return SMR_ERR_USAGE;
  pthread_mutex_lock(&P.mu);
  reg *r = reg_of(k, mode);
  result_slot *s = NULL;
  if (r) {
    /* from now on, not computed ahead at this step or before */
    size_t h = name_slot(name);
    if (r->asked[h] < step)
      r->asked[h] = step;
    while ((s = slot_of(r, name, step)) && s->pending)
      pthread_cond_wait(&P.done, &P.mu);
  }
  P.asked++;
  bool own = s && s->refused;
  if (own) {
    slot_clear(s);
    s = NULL;
  }
  if (s) {
    int rc = s->status;
    memcpy(result, s->result, size);
    slot_clear(s);
    P.taken++;
    pthread_mutex_unlock(&P.mu);
    return rc;
  }
  pthread_mutex_unlock(&P.mu);
  unsigned char out[SMR_PAIR_RESULT_MAX];
  int rc = pair_read(k, name, step, mode, own, out);
  memcpy(result, out, size);
  return rc;
}

/* Under P.mu: the next registration at or after *i wanting (name, step)
 * of t in mode, its result claimed. */
static result_slot *next_wanted(size_t *i, smr_trial *t, const char *name,
                                int64_t step, int mode) {
  size_t n = atomic_load(&P.nregs);
  for (; *i < n; (*i)++) {
    reg *r = P.regs[*i];
    int64_t asked = r->asked[name_slot(name)];
    if (r->k.t != t || r->mode != mode || asked == NEVER || step <= asked ||
        slot_of(r, name, step))
      continue;
    return slot_claim(r, name, step);
  }
  return NULL;
}

void smr_value_pairs_offer(smr_trial *t, const char *name, int64_t step,
                           int mode, const smr_tensor *v,
                           const smr_value_loc *loc) {
  if (!atomic_load_explicit(&P.nregs, memory_order_relaxed))
    return;
  pthread_mutex_lock(&P.mu);
  result_slot *s;
  for (size_t i = 0; (s = next_wanted(&i, t, name, step, mode)); i++) {
    smr_pair_key k = s->r->k;
    pthread_mutex_unlock(&P.mu);
    /* The other trial's record is read beside what the running turns
     * reserve only when it fits the record budget
     * (docs/kubernetes.md#record-memory); else the rule reads both in its
     * own turn, which the scheduler admits by them. */
    unsigned char out[SMR_PAIR_RESULT_MAX];
    memset(out, 0, sizeof out);
    int rc = SMR_OK;
    bool streamed = pair_streamed(&k, name, step, mode, v, loc, out);
    bool fits = streamed;
    if (!fits) {
      size_t extra = v->nbytes + EXTRA_SLACK;
      fits = smr_source_extra_begin(extra);
      rc = fits ? pair_with(&k, name, step, mode, v, loc, out) : SMR_OK;
      if (fits)
        smr_source_extra_end(extra);
    }
    pthread_mutex_lock(&P.mu);
    if (!fits) { /* left to the rule, which reads both when it asks */
      s->pending = false;
      s->refused = true;
      pthread_cond_broadcast(&P.done);
      continue;
    }
    s->status = rc;
    memcpy(s->result, out, sizeof out);
    s->pending = false;
    P.ahead++;
    P.streamed += streamed;
    pthread_cond_broadcast(&P.done);
  }
  pthread_mutex_unlock(&P.mu);
}

/* Under P.mu: whether a result of r is being computed. */
static bool pending_for(const reg *r) {
  for (size_t i = 0; i < RESULT_SLOTS; i++)
    if (P.ring[i].r == r && P.ring[i].pending)
      return true;
  return false;
}

void smr_value_pairs_forget(const void *owner) {
  if (!atomic_load(&P.nregs))
    return;
  pthread_mutex_lock(&P.mu);
  for (size_t i = 0; i < atomic_load(&P.nregs);) {
    reg *r = P.regs[i];
    if (r->k.owner != owner) {
      i++;
      continue;
    }
    while (pending_for(r))
      pthread_cond_wait(&P.done, &P.mu);
    for (size_t j = 0; j < RESULT_SLOTS; j++)
      if (P.ring[j].r == r)
        slot_clear(&P.ring[j]);
    size_t n = atomic_load(&P.nregs) - 1;
    P.regs[i] = P.regs[n];
    P.regs[n] = NULL;
    atomic_store(&P.nregs, n);
    free(r);
  }
  pthread_mutex_unlock(&P.mu);
}

void smr_value_pairs_counts(uint64_t *ahead, uint64_t *taken, uint64_t *asked) {
  pthread_mutex_lock(&P.mu);
  *ahead = P.ahead;
  *taken = P.taken;
  *asked = P.asked;
  pthread_mutex_unlock(&P.mu);
}
