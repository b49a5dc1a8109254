/* shared_records.c - record buffers, and the records shared by rules
 * reading one trial side by side: the process-wide cache behind
 * smr_source_share_records (source.h).  The local source (source_local.c)
 * reads records into these buffers; what is kept, found again, read
 * together and let go is decided here (shared_records.h). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "source/record_budget.h"
#include "source/shared_records.h"
#include "source/source.h"

/* Records are read into buffers kept per thread and reused: a fresh
 * allocation per record (mapped, faulted in and unmapped again for large
 * ones) would cost more than the read.  A buffer is lent with its range
 * and comes back to the pool of the thread that releases the range; a
 * range is never given a buffer that another live range holds (tensor
 * values point into it: a rule reading two steps at once holds two).
 * Each thread keeps at most POOL_MAX free buffers and POOL_BYTES bytes;
 * records larger than KEEP_MAX get a buffer of their own.  POOL_MAX is
 * above what one thread holds at once: the Python API's bulk read holds a
 * step's values (arrays over their buffers) and gives them back together;
 * with 8 kept, 12 of a step's 20 1-MiB buffers were mapped and faulted in
 * anew at every step (102k page faults for 600 MB; 16k with 32). */
#define KEEP_MAX ((size_t)64 << 20)
#define POOL_MAX 32
#define POOL_BYTES ((size_t)128 << 20)

/* Buffers of MAPPED_MIN bytes or more are mapped directly rather than
 * malloc'd.  From malloc they lived in its arenas, and a buffer freed by
 * one thread while another allocated left holes the process kept: the
 * twenty debugging rules ended with 25 MB in use and 58-63 MB held (peak
 * RSS 59-71 MB).  Mapped, a buffer's memory is the process's exactly as
 * long as the buffer lives; the shared records below keep the buffers
 * alive and in use, so pages are rarely faulted in anew. */
#define MAPPED_MIN ((size_t)256 << 10)

static bool buf_alloc(record_buf *b, size_t cap) {
  if (cap < MAPPED_MIN) {
    b->p = malloc(cap);
    b->mapped = false;
  } else {
    cap = (cap + 4095) & ~(size_t)4095;
    void *m = mmap(NULL, cap, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    b->p = m == MAP_FAILED ? NULL : m;
    b->mapped = true;
  }
  b->cap = b->p ? cap : 0;
  record_budget_count(b->cap, true);
  return b->p != NULL;
}

static void buf_release_memory(record_buf *b) {
  record_budget_count(b->cap, false);
  if (b->mapped && b->p)
    munmap(b->p, b->cap);
  else
    free(b->p);
  b->p = NULL;
  b->cap = 0;
}

typedef struct buf_pool {
  record_buf *free;
  size_t n, bytes;
  size_t spares; /* of them mapped, of at most SPARE_MAPPED_MAX bytes */
} buf_pool;

/* A thread's pool keeps one mapped buffer of at most SPARE_MAPPED_MAX
 * bytes even beyond the budget.  SimilarAcrossRuns reads its reference
 * in pieces of 1 MiB (host/value_pairs.c), each given back before the
 * next is read.  Over the budget each piece's buffer was unmapped, and
 * one lent to a smaller shared record was dropped with it: on the
 * bench's CNN trial the twenty rules mapped and faulted in 141 buffers
 * of 1 MiB (36k of the run's ~60k page faults).  Now the pool keeps one
 * such buffer, and a shared record's buffer of that size dropped beyond
 * the budget becomes the spare of the thread that let it go
 * (drop_or_spare): none mapped.  (Lending it to no smaller record
 * instead mapped none too, but those records grew malloc's heap, which
 * keeps its pages: peak RSS 62-67 MB in 2 of 12 rounds.) */
#define SPARE_MAPPED_MAX (((size_t)1 << 20) + 4096)

static bool spare_sized(const record_buf *b) {
  return b->mapped && b->cap <= SPARE_MAPPED_MAX;
}

static pthread_key_t pool_key;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void buf_destroy(record_buf *b) {
  buf_release_memory(b);
  free(b);
}

static void pool_free(void *v) {
  buf_pool *pool = v;
  while (pool->free) {
    record_buf *b = pool->free;
    pool->free = b->next;
    buf_destroy(b);
  }
  free(pool);
}

static void pool_key_make(void) {
  pthread_key_create(&pool_key, pool_free);
}

static buf_pool *thread_pool(void) {
  pthread_once(&pool_once, pool_key_make);
  buf_pool *pool = pthread_getspecific(pool_key);
  if (!pool) {
    pool = calloc(1, sizeof *pool);
    if (pool && pthread_setspecific(pool_key, pool) != 0) {
      free(pool);
      pool = NULL;
    }
  }
  return pool;
}

/* b on top of the pool's free list, counted. */
static void pool_push(buf_pool *pool, record_buf *b) {
  b->next = pool->free;
  pool->free = b;
  pool->n++;
  pool->bytes += b->cap;
  pool->spares += spare_sized(b);
}

record_buf *smr_record_buf_new(size_t len) {
  record_buf *b = calloc(1, sizeof *b);
  if (b && !buf_alloc(b, len)) {
    free(b);
    b = NULL;
  }
  return b;
}

void smr_record_buf_destroy(record_buf *b) {
  buf_destroy(b);
}

/* Back to this thread's pool, or freed when the pool is full. */
void smr_record_buf_give_back(void *lent) {
  record_buf *b = lent;
  if (record_budget_large(b->cap)) {
    record_budget_give_back(b);
    return;
  }
  buf_pool *pool = thread_pool();
  bool spare = pool && spare_sized(b) && !pool->spares;
  if (!pool || b->cap > KEEP_MAX || pool->n >= POOL_MAX ||
      pool->bytes + b->cap > POOL_BYTES ||
      (b->mapped && !record_budget_may_keep() && !spare)) {
    buf_destroy(b);
    return;
  }
  pool_push(pool, b);
}

/* b, dropped from the shared records, kept as this thread's spare when
 * it is one's size and the thread has none; else freed. */
static void drop_or_spare(record_buf *b) {
  buf_pool *pool = spare_sized(b) ? thread_pool() : NULL;
  if (!pool || pool->spares || pool->n >= POOL_MAX) {
    buf_destroy(b);
    return;
  }
  pool_push(pool, b);
}

bool smr_range_keep(smr_range *r) {
  /* a range longer than the shared records was read into a buffer lent
   * by record_budget_take */
  if (r->give_back_ != smr_record_buf_give_back || r->len <= SHARED_RECORD_MAX)
    return false;
  return record_budget_keep(r->lent_);
}

/* The smallest free buffer that holds `len` bytes, else the largest. */
static record_buf **best_fit(buf_pool *pool, size_t len) {
  record_buf **fit = NULL, **largest = NULL;
  for (record_buf **q = &pool->free; *q; q = &(*q)->next) {
    if ((*q)->cap >= len && (!fit || (*q)->cap < (*fit)->cap))
      fit = q;
    if (!largest || (*q)->cap > (*largest)->cap)
      largest = q;
  }
  return fit ? fit : largest;
}

/* A buffer of at least `len` bytes, owned by the caller until given
 * back (smr_record_buf_give_back). */
record_buf *smr_record_buf_take(size_t len) {
  if (record_budget_large(len))
    return record_budget_take(len);
  record_buf *idle =
      len >= SHARED_RECORD_MAX / 4 ? record_budget_take_idle(len) : NULL;
  if (idle)
    return idle;
  buf_pool *pool = len <= KEEP_MAX ? thread_pool() : NULL;
  record_buf **pick = pool ? best_fit(pool, len) : NULL;
  record_buf *b = NULL;
  if (pick) {
    b = *pick;
    *pick = b->next;
    pool->n--;
    pool->bytes -= b->cap;
    pool->spares -= spare_sized(b);
  } else if (!(b = calloc(1, sizeof *b))) {
    return NULL;
  }
  b->next = NULL;
  if (b->cap < len || !b->p) {
    buf_release_memory(b);
    if (!buf_alloc(b, len > 4096 ? len : 4096)) {
      buf_destroy(b);
      return NULL;
    }
  }
  return b;
}

/* ------------------------------------------------ records shared by rules
 *
 * Rules evaluated side by side (lock step) read the same records at about
 * the same time.  A record just read stays here, keyed by its file
 * (device, inode) and range, until SHARED_BYTES of records that no range
 * holds any more are kept; a rule asking for it meanwhile gets the same
 * buffer, so each record is read once per run instead of once per rule.
 * Buffers are only ever read while shared.  The inode keys a record of a
 * file as it was when read: a file replaced by another is another inode;
 * bytes overwritten in place are not seen again (they were a valid record
 * when read, and every reader still checks them).
 *
 * Records leave in the order they were first read, not the order they
 * were last used.  Rules that look back (UnchangedTensor, WeightUpdate-
 * Ratio) read step s - 1 again while at step s; by last use, step s - 1's
 * records would then look newer than step s's, and the next step's reads
 * would push out step s's records just before those rules come back for
 * them (the bench trial read its records 2.9 times over).  By first read,
 * the oldest step goes first, and the steps still looked back at stay. */
/* Buffers of records dropped from the shared ones wait as spares for the
 * next record any thread reads, as long as spares and shared records
 * together stay within SHARED_SLACK of the budget: the rules hold more
 * records at some moments of a step than at others, and without the
 * slack each such swing freed buffers that the next one mapped again. */
#define SHARED_SLACK ((size_t)8 << 20)
#define SHARED_BUCKETS 1024

static bool same_file(const file_id *a, const file_id *b) {
  return a->ino == b->ino && a->dev == b->dev && a->ctime_ns == b->ctime_ns;
}

struct shared_rec {
  file_id file;
  uint64_t off, len;
  /* The name it was read by: the same (source, rel, off, len) is served
   * without opening the file again (shared_take_named).  src is NULL once
   * that source is closed. */
  const smr_source *src;
  char *rel;
  struct shared_rec *nnext; /* name hash chain */
  record_buf *b;
  const uint8_t *data; /* the record's first byte, in b */
  int holders;         /* live ranges lent this buffer */
  bool reading;        /* b not there yet: one thread reads it */
  /* While it is read: the threads waiting for it read parts of it too
   * (read_parts).  dest is where it goes (NULL until the reader has a
   * buffer), untaken the first byte no thread has taken, active the parts
   * being read now; a part that fails fails the record. */
  uint8_t *dest;
  uint64_t untaken;
  int active;
  bool failed;
  int fail_errno;                 /* 0: the file ended early */
  uint64_t fail_at;               /* record offset where reading stopped */
  struct shared_rec *hnext;       /* hash chain */
  struct shared_rec *prev, *next; /* every record, in the order first read */
};

static struct {
  pthread_mutex_t mu;
  shared_rec *bucket[SHARED_BUCKETS];
  shared_rec *named[SHARED_BUCKETS];
  shared_rec *oldest, *newest;
  size_t idle_bytes; /* of the records no range holds */
  record_buf *spare; /* buffers for the next records read */
  size_t spare_bytes;
  uint64_t reads, hits;     /* printed with SMRULES_STATS_CACHE=1 */
  pthread_cond_t read_done; /* a record being read is there, or is not */
  atomic_uint news;         /* + 1 at each read_done broadcast */
} shared = {/* glibc's adaptive mutex spins a little before it sleeps:
             * the lock is held for a few instructions at a time, and
             * sleeping on it cost more than waiting */
            .mu = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP,
            .read_done = PTHREAD_COND_INITIALIZER};

/* SMRULES_STATS_CACHE=1: how many record reads another rule's read served,
 * on stderr at exit (benchmarks, tests). */
static void print_shared_counts(void) {
  if (shared.reads)
    fprintf(stderr, "smrules: record cache: reads=%llu shared=%llu\n",
            (unsigned long long)shared.reads, (unsigned long long)shared.hits);
}

void smr_source_shared_counts(uint64_t *reads, uint64_t *hits) {
  pthread_mutex_lock(&shared.mu);
  *reads = shared.reads;
  *hits = shared.hits;
  pthread_mutex_unlock(&shared.mu);
}

/* Under shared.mu. */
static void count_read(bool hit) {
  if (!shared.reads++) {
    const char *e = getenv("SMRULES_STATS_CACHE");
    if (e && *e && strcmp(e, "0") != 0)
      atexit(print_shared_counts);
  }
  shared.hits += hit;
}

static size_t shared_hash(const file_id *f, uint64_t off) {
  uint64_t h = (uint64_t)f->ino * 0x9E3779B97F4A7C15ULL ^ (uint64_t)f->dev ^
               off * 0xC2B2AE3D27D4EB4FULL;
  return (size_t)(h >> 32) % SHARED_BUCKETS;
}

static shared_rec **shared_find(const file_id *f, uint64_t off, uint64_t len) {
  for (shared_rec **q = &shared.bucket[shared_hash(f, off)]; *q;
       q = &(*q)->hnext)
    if ((*q)->off == off && (*q)->len == len && same_file(&(*q)->file, f))
      return q;
  return NULL;
}

static size_t name_hash(const smr_source *src, const char *rel, uint64_t off) {
  uint64_t h = smr_hash_str(SMR_HASH_INIT ^ (uint64_t)(uintptr_t)src, rel);
  h ^= off * 0xC2B2AE3D27D4EB4FULL;
  return (size_t)(h >> 32) % SHARED_BUCKETS;
}

static shared_rec **shared_find_named(const smr_source *src, const char *rel,
                                      uint64_t off, uint64_t len) {
  for (shared_rec **q = &shared.named[name_hash(src, rel, off)]; *q;
       q = &(*q)->nnext)
    if ((*q)->src == src && (*q)->off == off && (*q)->len == len &&
        strcmp((*q)->rel, rel) == 0)
      return q;
  return NULL;
}

/* Under shared.mu: unlinks a record from the hashes and the list. */
static void shared_unlink(shared_rec *r) {
  *(r->prev ? &r->prev->next : &shared.oldest) = r->next;
  *(r->next ? &r->next->prev : &shared.newest) = r->prev;
  *shared_find(&r->file, r->off, r->len) = r->hnext;
  if (r->src)
    *shared_find_named(r->src, r->rel, r->off, r->len) = r->nnext;
}

/* Under shared.mu: r is found by (src, rel) from now on. */
static void shared_name(shared_rec *r, const smr_source *src, const char *rel) {
  free(r->rel);
  r->src = src;
  r->rel = smr_xstrdup(rel);
  size_t h = name_hash(src, rel, r->off);
  r->nnext = shared.named[h];
  shared.named[h] = r;
}

static void shared_rec_free(shared_rec *r) {
  free(r->rel);
  free(r);
}

/* Under shared.mu: forgets an idle record; its buffer is the caller's. */
static record_buf *shared_drop(shared_rec *r) {
  shared_unlink(r);
  shared.idle_bytes -= r->b->cap;
  record_buf *b = r->b;
  shared_rec_free(r);
  return b;
}

/* Under shared.mu: the first idle record at or after r in reading order
 * (the records held or being read are a few per thread, so the walk is
 * short). */
static shared_rec *next_idle(shared_rec *r) {
  while (r && r->holders)
    r = r->next;
  return r;
}

/* Under shared.mu: a part or a record is read, or one failed. */
static void announce(void) {
  atomic_fetch_add_explicit(&shared.news, 1, memory_order_release);
  pthread_cond_broadcast(&shared.read_done);
}

/* A hint to the core that it is in a spin-wait loop (x86's PAUSE, through
 * the GCC/Clang builtin); elsewhere nothing. */
static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Under shared.mu: waits for the next announce().  The wait is usually
 * for the last part another thread is reading, 20-40 µs; sleeping on the
 * condition variable and being woken took about as long again on a
 * virtual machine, a few hundred times a run.  So, when another core can
 * be doing the reading, the lock is let go and the news counter watched
 * for up to SPIN_NS first; only then does the thread sleep. */
#define SPIN_NS 100000
static bool spin_worthwhile(void) {
  static atomic_int cores; /* 0: not known yet */
  int n = atomic_load_explicit(&cores, memory_order_relaxed);
  if (!n) { /* the cores this process may run on (taskset, cpusets) */
    cpu_set_t set;
    n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    atomic_store_explicit(&cores, n, memory_order_relaxed);
  }
  return n > 1;
}

static void await_news(void) {
  unsigned seen = atomic_load_explicit(&shared.news, memory_order_relaxed);
  bool news = false;
  if (spin_worthwhile()) {
    pthread_mutex_unlock(&shared.mu);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned i = 1; !news; i++) {
      cpu_relax();
      news = atomic_load_explicit(&shared.news, memory_order_acquire) != seen;
      if (news || i % 64)
        continue;
      clock_gettime(CLOCK_MONOTONIC, &t);
      if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) >
          SPIN_NS)
        break;
    }
    pthread_mutex_lock(&shared.mu);
  }
  if (atomic_load_explicit(&shared.news, memory_order_relaxed) == seen)
    pthread_cond_wait(&shared.read_done, &shared.mu);
}

/* A record is read in parts of READ_PART bytes, so that a thread waiting
 * for it can read a part instead of idling: rules in lock step ask for
 * the same records at about the same time, and on the twelve rules of
 * examples/many-rules.yaml one thread waited for another's read about
 * 500 times a run (0.07-0.1 s). */
#define READ_PART ((uint64_t)256 << 10)

/* pread of n bytes at off, whole: the bytes read (fewer at an error, with
 * *e its errno, or at the end of the file, *e 0). */
uint64_t smr_pread_whole(int fd, uint8_t *p, uint64_t n, uint64_t off, int *e) {
  uint64_t got = 0;
  *e = 0;
  while (got < n) {
    ssize_t r = pread(fd, p + got, (size_t)(n - got), (off_t)(off + got));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      *e = r < 0 ? errno : 0;
      break;
    }
    got += (uint64_t)r;
  }
  return got;
}

/* Under shared.mu: takes the next part of r to read, or false when every
 * part is taken (or the record failed). */
static bool part_take(shared_rec *r, uint64_t *from, uint64_t *n) {
  if (!r->dest || r->failed || r->untaken >= r->len)
    return false;
  *from = r->untaken;
  *n = r->len - r->untaken < READ_PART ? r->len - r->untaken : READ_PART;
  r->untaken += *n;
  r->active++;
  return true;
}

/* Called under shared.mu, which it releases while reading: reads part
 * [from, from + n) of r with fd (a descriptor of the same file). */
static void part_read(shared_rec *r, int fd, uint64_t from, uint64_t n) {
  pthread_mutex_unlock(&shared.mu);
  int e;
  uint64_t got = smr_pread_whole(fd, r->dest + from, n, r->off + from, &e);
  pthread_mutex_lock(&shared.mu);
  r->active--;
  if (got < n && (!r->failed || from + got < r->fail_at)) {
    r->failed = true;
    r->fail_errno = e;
    r->fail_at = from + got;
  }
  announce();
}

/* The claimant reads its record into dest, parts of it read by the
 * threads that wait for it meanwhile; true when every byte is there.
 * Returns only once no other thread writes into dest. */
bool smr_shared_read_parts(shared_rec *r, int fd, uint8_t *dest,
                           int *fail_errno, uint64_t *got) {
  pthread_mutex_lock(&shared.mu);
  r->dest = dest;
  announce();
  for (;;) {
    uint64_t from, n;
    if (part_take(r, &from, &n))
      part_read(r, fd, from, n);
    else if (r->active)
      await_news();
    else
      break;
  }
  bool ok = !r->failed;
  *fail_errno = r->fail_errno;
  *got = ok ? r->len : r->fail_at;
  pthread_mutex_unlock(&shared.mu);
  return ok;
}

/* The buffer of a record another range read, now held by the caller; or
 * NULL and *claim, an entry for the record that the caller reads and
 * then publishes (shared_publish) or withdraws.  A record another thread
 * is reading is waited for, so that two rules asking for it at once read
 * it once. */
shared_rec *smr_shared_take(const smr_source *src, const char *rel, int fd,
                            const file_id *f, uint64_t off, uint64_t len,
                            shared_rec **claim) {
  *claim = NULL;
  pthread_mutex_lock(&shared.mu);
  shared_rec **q;
  while ((q = shared_find(f, off, len)) && (*q)->reading) {
    uint64_t from, n;
    if (part_take(*q, &from, &n)) /* help rather than wait */
      part_read(*q, fd, from, n);
    else
      await_news();
  }
  shared_rec *r = q ? *q : NULL;
  if (r && !r->holders++)
    shared.idle_bytes -= r->b->cap;
  if (r && !r->src) /* read by a source closed since: named anew */
    shared_name(r, src, rel);
  if (!r && (*claim = calloc(1, sizeof **claim))) {
    size_t h = shared_hash(f, off);
    **claim = (shared_rec){.file = *f,
                           .off = off,
                           .len = len,
                           .holders = 1,
                           .reading = true,
                           .hnext = shared.bucket[h],
                           .prev = shared.newest};
    shared.bucket[h] = *claim;
    shared_name(*claim, src, rel);
    *(shared.newest ? &shared.newest->next : &shared.oldest) = *claim;
    shared.newest = *claim;
  }
  count_read(r != NULL);
  pthread_mutex_unlock(&shared.mu);
  return r;
}

/* The claimed record was read into b at `data`: the others may have it. */
void smr_shared_publish(shared_rec *r, record_buf *b, const uint8_t *data) {
  pthread_mutex_lock(&shared.mu);
  r->b = b;
  r->data = data;
  r->reading = false;
  announce();
  pthread_mutex_unlock(&shared.mu);
}

/* The claimed record could not be read (or is not kept): whoever waits
 * for it reads it itself. */
void smr_shared_withdraw(shared_rec *r) {
  pthread_mutex_lock(&shared.mu);
  shared_unlink(r);
  shared_rec_free(r);
  announce();
  pthread_mutex_unlock(&shared.mu);
}

/* Under shared.mu: the buffers of the records no range holds, and the
 * spares (record_budget_shared_bytes). */
static size_t shared_own_bytes(void) {
  return shared.idle_bytes + shared.spare_bytes;
}

/* Under shared.mu: keeps b as a spare if that stays within the slack;
 * false: the caller frees it (outside the lock). */
static bool spare_put(record_buf *b) {
  if (shared.idle_bytes + shared.spare_bytes + b->cap >
      record_budget_shared_bytes(SHARED_BYTES + SHARED_SLACK,
                                 shared_own_bytes()))
    return false;
  b->next = shared.spare;
  shared.spare = b;
  shared.spare_bytes += b->cap;
  return true;
}

/* Under shared.mu: a spare buffer that holds len bytes without counting
 * for much more, or NULL. */
static record_buf *spare_take(uint64_t len) {
  for (record_buf **q = &shared.spare; *q; q = &(*q)->next)
    if ((*q)->cap >= len && (*q)->cap <= 2 * len + 65536) {
      record_buf *b = *q;
      *q = b->next;
      b->next = NULL;
      shared.spare_bytes -= b->cap;
      return b;
    }
  return NULL;
}

/* Drop the first-read idle records beyond the budget; their buffers
 * become spares, or are returned through out[] (at most max) to be
 * freed. */
static size_t shared_evict_locked(record_buf **out, size_t max) {
  size_t n = 0;
  for (shared_rec *r = next_idle(shared.oldest);
       r &&
       shared.idle_bytes >
           record_budget_shared_bytes(SHARED_BYTES, shared_own_bytes()) &&
       n < max;) {
    shared_rec *after = next_idle(r->next);
    record_buf *b = shared_drop(r);
    if (!spare_put(b))
      out[n++] = b;
    r = after;
  }
  return n;
}

/* A range lets go of a shared record; records nobody holds beyond the
 * budget go back to this thread's pool if it is nearly empty (a thread
 * reads into one or two buffers at a time; the shared records already
 * hold the bytes that make the memory bound), else are freed. */
static void shared_give_back(void *lent) {
  shared_rec *r = lent;
  record_buf *out[8];
  size_t n = 0;
  pthread_mutex_lock(&shared.mu);
  if (!--r->holders) {
    shared.idle_bytes += r->b->cap;
    n = shared_evict_locked(out, sizeof out / sizeof *out);
  }
  pthread_mutex_unlock(&shared.mu);
  for (size_t i = 0; i < n; i++)
    drop_or_spare(out[i]);
}

/* A buffer for a record about to be read: a spare, else one taken from
 * the first-read records no range holds when keeping this one would go
 * beyond the budget (so the budget is reused rather than freed and
 * mapped again); NULL: take one from the pool. */
record_buf *smr_shared_recycle(uint64_t len) {
  record_buf *drop[8];
  size_t ndrop = 0;
  pthread_mutex_lock(&shared.mu);
  record_buf *got = spare_take(len);
  for (shared_rec *r = next_idle(shared.oldest);
       r && !got && ndrop < sizeof drop / sizeof *drop &&
       shared.idle_bytes + len >
           record_budget_shared_bytes(SHARED_BYTES, shared_own_bytes());) {
    shared_rec *after = next_idle(r->next);
    record_buf *b = shared_drop(r);
    if (b->cap >= len && b->cap <= 2 * len + 65536)
      got = b; /* a much larger one would count for more than it holds */
    else if (!spare_put(b))
      drop[ndrop++] = b;
    r = after;
  }
  pthread_mutex_unlock(&shared.mu);
  for (size_t i = 0; i < ndrop; i++)
    buf_destroy(drop[i]);
  return got;
}

/* Large records in flight leave the shared ones less room
 * (record_budget.c): idle records and spares beyond it go. */
void smr_shared_trim(void) {
  record_buf *out[16];
  size_t n = 0;
  pthread_mutex_lock(&shared.mu);
  n = shared_evict_locked(out, 8);
  while (shared.spare && n < sizeof out / sizeof *out &&
         shared.idle_bytes + shared.spare_bytes >
             record_budget_shared_bytes(SHARED_BYTES + SHARED_SLACK,
                                        shared_own_bytes())) {
    record_buf *b = shared.spare;
    shared.spare = b->next;
    shared.spare_bytes -= b->cap;
    out[n++] = b;
  }
  pthread_mutex_unlock(&shared.mu);
  for (size_t i = 0; i < n; i++)
    buf_destroy(out[i]);
}

/* A closed source's records are no longer found by name: another source
 * could be given its address. */
void smr_shared_forget_source(const smr_source *src) {
  pthread_mutex_lock(&shared.mu);
  for (shared_rec *r = shared.oldest; r; r = r->next)
    if (r->src == src) {
      *shared_find_named(r->src, r->rel, r->off, r->len) = r->nnext;
      r->src = NULL;
    }
  pthread_mutex_unlock(&shared.mu);
}

/* The record `rel` of this source at [off, off+len) when another range
 * read it and it is still kept: no open, fstat and close (three system
 * calls per read, about 5 % of the twelve rules' CPU time).  NULL:
 * not kept, or still being read (then the caller opens the file and
 * waits for that read in shared_take).  A name stands for the file it
 * was read from: a file replaced since is still served from the record
 * read before, as a record read once in the run stays what it was. */
shared_rec *smr_shared_take_named(const smr_source *src, const char *rel,
                                  uint64_t off, uint64_t len) {
  pthread_mutex_lock(&shared.mu);
  shared_rec **q = shared_find_named(src, rel, off, len);
  shared_rec *r = q && !(*q)->reading ? *q : NULL;
  if (r) {
    if (!r->holders++)
      shared.idle_bytes -= r->b->cap;
    count_read(true);
  }
  pthread_mutex_unlock(&shared.mu);
  return r;
}

void smr_shared_lend(smr_range *out, shared_rec *r) {
  out->lent_ = r;
  out->give_back_ = shared_give_back;
  out->data = r->data;
  out->len = (size_t)r->len;
}
