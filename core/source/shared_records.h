/* shared_records.h - private to core/source/: the buffers the local
 * source reads records into (kept per thread and reused), and the
 * process-wide cache of records shared by the rules that read a trial
 * side by side (smr_source_share_records in source.h): a record one rule
 * read serves the others, found by its file and range or by its name;
 * a record being read is read in parts by the threads that wait for it.
 * Everything here is thread-safe; shared_records.c says why it is built
 * the way it is. */
#ifndef SMR_SHARED_RECORDS_H
#define SMR_SHARED_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "source/source.h"

/* A buffer a record is read into. */
typedef struct record_buf {
  uint8_t *p;
  size_t cap;
  bool mapped;       /* p mapped (large buffers), not malloc'd */
  const void *owner; /* the thread that gave it back (record_budget.c) */
  bool kept;         /* held past a turn (smr_range_keep) */
  struct record_buf *next;
} record_buf;

/* A buffer of at least `len` bytes from this thread's pool (NULL: out of
 * memory), the caller's until given back. */
record_buf *smr_record_buf_take(size_t len);
/* Back to this thread's pool, or freed when the pool is full; the
 * signature of smr_range.give_back_. */
void smr_record_buf_give_back(void *lent);
/* A buffer of its own of at least `len` bytes (NULL: out of memory), and
 * its end: for record_budget.c, which keeps the large ones. */
record_buf *smr_record_buf_new(size_t len);
void smr_record_buf_destroy(record_buf *b);
/* pread of n bytes at off, whole: the bytes read (fewer at an error, with
 * *e its errno, or at the end of the file, *e 0). */
uint64_t smr_pread_whole(int fd, uint8_t *p, uint64_t n, uint64_t off, int *e);

/* Records no range holds are kept up to SHARED_BYTES; a record larger
 * than SHARED_RECORD_MAX is never shared. */
#define SHARED_BYTES ((size_t)28 << 20)
#define SHARED_RECORD_MAX (SHARED_BYTES / 4)

/* A file as the kernel knows it.  The change time is part of it: a file
 * deleted and written anew can be given the same inode number, and its
 * records must not be served from the old one's. */
typedef struct file_id {
  dev_t dev;
  ino_t ino;
  int64_t ctime_ns;
} file_id;

static inline file_id file_id_of(const struct stat *st) {
  return (file_id){st->st_dev, st->st_ino,
                   (int64_t)st->st_ctim.tv_sec * 1000000000 +
                       st->st_ctim.tv_nsec};
}

typedef struct shared_rec shared_rec;

/* The record `rel` of `src` at [off, off+len) when another range read it
 * and it is still kept, now held by the caller (no open, fstat and
 * close); NULL: not kept, or still being read. */
shared_rec *smr_shared_take_named(const smr_source *src, const char *rel,
                                  uint64_t off, uint64_t len);
/* The record of file f at [off, off+len) another range read, now held by
 * the caller; or NULL and *claim, an entry for the record that the caller
 * reads (smr_shared_read_parts) and then publishes or withdraws.  A
 * record another thread is reading is waited for (its parts read with
 * fd, a descriptor of the same file), so that it is read once.  *claim
 * stays NULL when there is no memory for it: read unshared. */
shared_rec *smr_shared_take(const smr_source *src, const char *rel, int fd,
                            const file_id *f, uint64_t off, uint64_t len,
                            shared_rec **claim);
/* The claimant reads its record into dest with fd, parts of it read by
 * the threads waiting for it meanwhile; true when every byte is there,
 * else *fail_errno (0: the file ended early) and *got, the bytes there
 * before the first missing one.  Returns once no other thread writes
 * into dest. */
bool smr_shared_read_parts(shared_rec *r, int fd, uint8_t *dest,
                           int *fail_errno, uint64_t *got);
/* The claimed record was read into b at `data`: the others may have it. */
void smr_shared_publish(shared_rec *r, record_buf *b, const uint8_t *data);
/* The claimed record could not be read (or is not kept): whoever waits
 * for it reads it itself. */
void smr_shared_withdraw(shared_rec *r);
/* A buffer for a record of len bytes about to be read, recycled from the
 * shared records beyond the budget; NULL: take one from the pool. */
record_buf *smr_shared_recycle(uint64_t len);
/* Lend a held record's bytes to a range (given back on its release). */
void smr_shared_lend(smr_range *out, shared_rec *r);
/* Drops the records no range holds and the spare buffers beyond what the
 * large records in flight leave them (record_budget.h). */
void smr_shared_trim(void);
/* A source is closed: its records are no longer found by its name. */
void smr_shared_forget_source(const smr_source *src);

#endif
