/* pk_hist.c - histories whose older readings live in a temporary file (see
 * profkit.h and docs/profiler.md#memory-over-a-long-job).
 *
 * The spill file is one anonymous file (O_TMPFILE, or a named file unlinked
 * at once) in $TMPDIR or /tmp, created when a history first outgrows its
 * memory, shared by every history of the kit's copy (each plugin links its
 * own), cut back to nothing whenever no history holds a chunk in it, closed
 * when the plugin is unloaded.  Rule instances of one plugin may run on
 * several threads: the slot bookkeeping is under a mutex; reads and writes
 * are positional (pread/pwrite) into slots a single history owns. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profkit.h"

#define CHUNK PK_HIST_CHUNK
#define CHUNK_BYTES ((off_t)(CHUNK * sizeof(double)))
/* A larger `keep` is taken as "keep everything": it bounds the arithmetic
 * of the spill threshold. */
#define KEEP_MAX ((size_t)1 << 40)

static struct {
  pthread_mutex_t mu;
  int fd;         /* -1: not created yet */
  bool disabled;  /* could not be created or written: stay in memory */
  uint32_t *free; /* released slots, reused first */
  size_t nfree, free_cap;
  uint32_t slots; /* slots the file holds */
} store = {PTHREAD_MUTEX_INITIALIZER, -1, false, NULL, 0, 0, 0};

static void *xrealloc(void *p, size_t n, size_t size) {
  p = realloc(p, (n ? n : 1) * size);
  if (!p) {
    fputs("smrules plugin: out of memory\n", stderr);
    abort();
  }
  return p;
}

/* A read or rewrite of our own file failed: the data a report needs is
 * gone, as if memory were (the kit's answer to that is the same). */
static void fatal(const char *what) {
  fprintf(stderr, "smrules plugin: %s of the profiler history file: %s\n", what,
          strerror(errno));
  abort();
}

/* Called with the lock held; warns once. */
static void disable(const char *why, int err) {
  if (!store.disabled)
    fprintf(stderr,
            "smrules: warning: profiler histories stay in memory: %s: %s\n",
            why, strerror(err));
  store.disabled = true;
}

static const char *tmp_dir(void) {
  const char *dir = getenv("TMPDIR");
  return dir && *dir ? dir : "/tmp";
}

static int open_spill_file(const char *dir) {
  int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0)
    return fd;
  /* a file system without O_TMPFILE: a named file, unlinked at once */
  char path[4096];
  if (snprintf(path, sizeof path, "%s/smrules-history-XXXXXX", dir) >=
      (int)sizeof path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  fd = mkostemp(path, O_CLOEXEC);
  if (fd >= 0)
    unlink(path);
  return fd;
}

/* A free slot of the file, or -1 (histories then stay in memory). */
static long slot_get(void) {
  long slot = -1;
  pthread_mutex_lock(&store.mu);
  if (!store.disabled && store.fd < 0) {
    const char *dir = tmp_dir();
    store.fd = open_spill_file(dir);
    if (store.fd < 0) {
      int err = errno;
      char why[4200];
      snprintf(why, sizeof why, "cannot create a temporary file in %s", dir);
      disable(why, err);
    }
  }
  if (!store.disabled)
    slot = store.nfree ? (long)store.free[--store.nfree] : (long)store.slots++;
  pthread_mutex_unlock(&store.mu);
  return slot;
}

/* Called with the lock held. */
static void slot_put_locked(uint32_t slot) {
  if (store.nfree == store.free_cap) {
    store.free_cap = store.free_cap ? 2 * store.free_cap : 64;
    store.free = xrealloc(store.free, store.free_cap, sizeof *store.free);
  }
  store.free[store.nfree++] = slot;
  if (store.nfree == store.slots && store.fd >= 0 &&
      ftruncate(store.fd, 0) == 0) /* nothing held: give the disk back */
    store.nfree = store.slots = 0;
}

static void slots_put(const uint32_t *slot, size_t n) {
  if (!n)
    return;
  pthread_mutex_lock(&store.mu);
  for (size_t i = 0; i < n; i++)
    slot_put_locked(slot[i]);
  pthread_mutex_unlock(&store.mu);
}

/* Writes one chunk; on failure the slot is released, the file is given up
 * and -1 returned. */
static int write_chunk(uint32_t slot, const double *v) {
  const char *p = (const char *)v;
  off_t off = (off_t)slot * CHUNK_BYTES, left = CHUNK_BYTES;
  while (left > 0) {
    ssize_t k = pwrite(store.fd, p, (size_t)left, off);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0) {
      int err = k < 0 ? errno : ENOSPC;
      pthread_mutex_lock(&store.mu);
      disable("cannot write the temporary file", err);
      slot_put_locked(slot);
      pthread_mutex_unlock(&store.mu);
      return -1;
    }
    p += k, off += k, left -= k;
  }
  return 0;
}

static void read_span(uint32_t slot, size_t at, size_t n, double *out) {
  char *p = (char *)out;
  off_t off = (off_t)slot * CHUNK_BYTES + (off_t)(at * sizeof(double));
  size_t left = n * sizeof(double);
  while (left > 0) {
    ssize_t k = pread(store.fd, p, left, off);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0) {
      if (k == 0)
        errno = EIO; /* shorter than what was written */
      fatal("read");
    }
    p += k, off += k, left -= (size_t)k;
  }
}

__attribute__((destructor)) static void store_close(void) {
  if (store.fd >= 0)
    close(store.fd);
  store.fd = -1;
  free(store.free);
  store.free = NULL;
  store.nfree = store.free_cap = store.slots = 0;
}

size_t pk_hist_file_chunks(void) {
  pthread_mutex_lock(&store.mu);
  size_t n = store.slots;
  pthread_mutex_unlock(&store.mu);
  return n;
}

/* ------------------------------------------------------------ histories */

static size_t mem_from(const pk_hist *h) {
  return h->nchunks * CHUNK;
}

/* The buffer spills when it holds this many: then at least `keep` stay and
 * the next spill is at least keep + CHUNK pushes away, so the moves cost
 * O(1) per reading. */
static size_t spill_at(const pk_hist *h) {
  size_t keep = h->keep < KEEP_MAX ? h->keep : KEEP_MAX;
  return 2 * keep + 2 * CHUNK;
}

void pk_hist_keep(pk_hist *h, int64_t keep) {
  h->keep = keep < 0 ? 0 : (uint64_t)keep > KEEP_MAX ? KEEP_MAX : (size_t)keep;
}

/* Moves the oldest whole chunks of the buffer (all but `keep` readings) to
 * the file; false when none could be. */
static bool spill(pk_hist *h) {
  size_t used = h->n - mem_from(h);
  size_t k = (used - h->keep) / CHUNK, done = 0;
  for (; done < k; done++) {
    long slot = slot_get();
    if (slot < 0 || write_chunk((uint32_t)slot, h->mem + done * CHUNK) != 0)
      break;
    if (h->nchunks == h->chunk_cap) {
      h->chunk_cap = h->chunk_cap ? 2 * h->chunk_cap : 16;
      h->chunk = xrealloc(h->chunk, h->chunk_cap, sizeof *h->chunk);
    }
    h->chunk[h->nchunks++] = (uint32_t)slot;
  }
  if (!done)
    return false;
  memmove(h->mem, h->mem + done * CHUNK,
          (used - done * CHUNK) * sizeof *h->mem);
  return true;
}

static void grow(pk_hist *h) {
  size_t used = h->n - mem_from(h), limit = spill_at(h);
  size_t cap = h->mem_cap ? 2 * h->mem_cap : 16;
  if (used < limit && cap > limit)
    cap = limit; /* exactly the spill threshold: no slack beyond it */
  h->mem = xrealloc(h->mem, cap, sizeof *h->mem);
  h->mem_cap = cap;
}

void pk_hist_push(pk_hist *h, double x) {
  if (h->n - mem_from(h) == h->mem_cap &&
      !(h->mem_cap >= spill_at(h) && spill(h)))
    grow(h);
  h->mem[h->n - mem_from(h)] = x;
  h->n++;
}

void pk_hist_clear(pk_hist *h) {
  slots_put(h->chunk, h->nchunks);
  h->nchunks = 0;
  h->n = 0;
  if (h->mem_cap > spill_at(h)) { /* grown while the file was unusable */
    free(h->mem);
    h->mem = NULL;
    h->mem_cap = 0;
  }
}

void pk_hist_free(pk_hist *h) {
  slots_put(h->chunk, h->nchunks);
  free(h->chunk);
  free(h->mem);
  memset(h, 0, sizeof *h);
}

static void read_into(const pk_hist *h, size_t from, size_t to, double *out) {
  size_t mf = mem_from(h), i = from;
  for (size_t end = to < mf ? to : mf; i < end;) {
    size_t off = i % CHUNK, len = CHUNK - off;
    if (len > end - i)
      len = end - i;
    read_span(h->chunk[i / CHUNK], off, len, out + (i - from));
    i += len;
  }
  if (i < to)
    memcpy(out + (i - from), h->mem + (i - mf), (to - i) * sizeof *out);
}

double *pk_hist_copy(const pk_hist *h, size_t from, size_t to) {
  double *out = xrealloc(NULL, to - from, sizeof *out);
  read_into(h, from, to, out);
  return out;
}

const double *pk_hist_view(const pk_hist *h, size_t from, size_t to,
                           double **copy) {
  *copy = NULL;
  if (from == to)
    return h->mem;
  if (from >= mem_from(h))
    return h->mem + (from - mem_from(h));
  return *copy = pk_hist_copy(h, from, to);
}

void pk_hist_set(pk_hist *h, size_t i, double x) {
  size_t mf = mem_from(h);
  if (i >= mf) {
    h->mem[i - mf] = x;
    return;
  }
  off_t off =
      (off_t)h->chunk[i / CHUNK] * CHUNK_BYTES + (off_t)(i % CHUNK * sizeof x);
  ssize_t k;
  do
    k = pwrite(store.fd, &x, sizeof x, off);
  while (k < 0 && errno == EINTR);
  if (k != (ssize_t)sizeof x) {
    if (k >= 0)
      errno = EIO;
    fatal("rewrite");
  }
}

double pk_hist_at(const pk_hist *h, size_t i) {
  size_t mf = mem_from(h);
  if (i >= mf)
    return h->mem[i - mf];
  double x;
  read_span(h->chunk[i / CHUNK], i % CHUNK, 1, &x);
  return x;
}

size_t pk_hist_rfind(const pk_hist *h, double x) {
  size_t mf = mem_from(h);
  for (size_t i = h->n; i > mf; i--)
    if (h->mem[i - 1 - mf] == x)
      return i;
  double *buf = NULL; /* the older chunks, one at a time */
  size_t found = 0;
  for (size_t c = h->nchunks; c > 0 && !found; c--) {
    if (!buf)
      buf = xrealloc(NULL, CHUNK, sizeof *buf);
    read_span(h->chunk[c - 1], 0, CHUNK, buf);
    for (size_t i = CHUNK; i > 0 && !found; i--)
      if (buf[i - 1] == x)
        found = (c - 1) * CHUNK + i;
  }
  free(buf);
  return found;
}
