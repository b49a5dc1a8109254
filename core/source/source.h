/* source.h - where trial bytes come from, and the only door to them: the
 * trial and profiler readers and the command line include this header and
 * nothing else of core/source/.  A reader asks a source for listings and
 * byte ranges by paths relative to the trial root; the local source
 * guarantees nothing outside the root is ever opened (absolute paths, ".."
 * and symlinks leading out are refused); the S3 source (source_s3.c) reads
 * a bucket prefix the same way, with read-ahead and a record cache. */
#ifndef SMR_SOURCE_H
#define SMR_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

typedef struct smr_source smr_source;

typedef struct smr_source_file {
  char *path; /* relative to the root, '/' separated */
  int64_t size;
  int64_t mtime_ns;
} smr_source_file;

typedef struct smr_source_listing {
  smr_source_file *files;
  size_t n, cap;
} smr_source_listing;

/* A byte range of a file, valid until smr_range_release.  A local source
 * may lend a buffer of the calling thread: release a range before the
 * same thread reads the next one. */
typedef struct smr_range {
  const uint8_t *data;
  size_t len;
  void *map_;
  size_t map_len_;
  void *heap_;
  /* a buffer lent by the source, given back on release (tensor values
   * point into it until then, so it is never reused while lent) */
  void *lent_;
  void (*give_back_)(void *lent);
} smr_range;

/* What a kind of source implements (local disk, S3, ...).  Each
 * implementation embeds `smr_source` as the first member of its own
 * struct; the functions below dispatch through `ops`. */
typedef struct smr_source_ops {
  const char *kind;
  /* Every request is a round trip (S3): readers list incrementally, poll
   * slowly, and take a failed read as saying nothing about the file. */
  bool remote;
  void (*close)(smr_source *s);
  int (*list)(smr_source *s, const char *dir, const char *suffix,
              smr_source_listing *out, smr_error *err);
  bool (*exists)(smr_source *s, const char *rel, int64_t *size,
                 int64_t *mtime_ns);
  int (*read_all)(smr_source *s, const char *rel, size_t max, char **buf,
                  size_t *len, smr_error *err);
  int (*read_range)(smr_source *s, const char *rel, uint64_t off, uint64_t len,
                    smr_range *out, smr_error *err);
  /* Optional (NULL: the generic behaviour of the functions below). */
  int (*list_after)(smr_source *s, const char *dir, const char *suffix,
                    const char *start_after, smr_source_listing *out,
                    smr_error *err);
  void (*read_ahead)(smr_source *s, const smr_source_listing *files);
  size_t (*cache_budget)(const smr_source *s);
  void (*prefetch)(smr_source *s, const char *rel, uint64_t off, uint64_t len);
  void (*share_records)(smr_source *s, bool on);
  /* smr_source_read_range_aligned (NULL: read_range, the hint ignored) */
  int (*read_range_aligned)(smr_source *s, const char *rel, uint64_t off,
                            uint64_t len, uint64_t align_at, smr_range *out,
                            smr_error *err);
  /* smr_source_read_into (NULL: read_range, then a copy) */
  int (*read_into)(smr_source *s, const char *rel, uint64_t off, uint64_t len,
                   void *dest, smr_error *err);
  /* smr_source_range_kept (NULL: nothing is kept) */
  bool (*range_kept)(smr_source *s, const char *rel, uint64_t off, uint64_t len,
                     smr_range *out);
} smr_source_ops;

struct smr_source {
  const smr_source_ops *ops;
  char *root; /* canonical root: an absolute path or a URL */
  /* Bytes the reads below returned, for the run's metrics (reads come
   * from the catalog's and the rules' threads at once, hence atomic). */
  _Atomic uint64_t bytes_read_;
};

int smr_source_local_open(const char *root, smr_source **out, smr_error *err);
/* Open by location: "s3://bucket/prefix" or a local directory. */
int smr_source_open(const char *location, smr_source **out, smr_error *err);
void smr_source_close(smr_source *s);
/* Append a file to a listing (for implementations). */
void smr_source_listing_add(smr_source_listing *l, char *path, int64_t size,
                            int64_t mtime_ns);
const char *smr_source_root(const smr_source *s);
/* Bytes of trial files read so far through smr_source_read_all and
 * smr_source_read_range (a local range that is mapped counts its length). */
uint64_t smr_source_bytes_read(const smr_source *s);

/* Recursively list regular files under `dir` (relative, e.g. "index")
 * whose names end in `suffix`; skips names ending in ".tmp".  Sorted by
 * path.  A missing directory gives an empty listing. */
int smr_source_list(smr_source *s, const char *dir, const char *suffix,
                    smr_source_listing *out, smr_error *err);
void smr_source_listing_free(smr_source_listing *l);

/* Whether a regular file exists; size/mtime optional. */
bool smr_source_exists(smr_source *s, const char *rel, int64_t *size,
                       int64_t *mtime_ns);
/* Read a whole file of at most `max` bytes (NUL-terminated). */
int smr_source_read_all(smr_source *s, const char *rel, size_t max, char **buf,
                        size_t *len, smr_error *err);
/* Map [off, off+len) of a file.  SMR_ERR_FORMAT when the range does not
 * lie inside the file (message gives the numbers). */
int smr_source_read_range(smr_source *s, const char *rel, uint64_t off,
                          uint64_t len, smr_range *out, smr_error *err);
void smr_range_release(smr_range *r);
/* The range stays held past the rule's turn that read it, to be used at
 * a later one (api->value_keep): true when it is a record read into a
 * buffer of its own (larger than the records the rules share) and now
 * counted in the run's record budget rather than the turn's, which the
 * scheduler then leaves out of the room for turns; false: nothing
 * changed (a shared or remote record, or no room). */
bool smr_range_keep(smr_range *r);
/* smr_source_read_range, and where the bytes are read into a buffer (a
 * local file), byte `align_at` of the range lands on an address that is a
 * multiple of SMR_VALUE_ALIGN: tensor elements there are aligned for
 * NumPy, whose loops over a misaligned array copy it piece by piece (about
 * a quarter more time for np.abs on 1 MiB).  A hint: SMR_NO_ALIGN, a
 * shared record or another kind of source place the bytes as they will. */
#define SMR_VALUE_ALIGN 16
#define SMR_NO_ALIGN UINT64_MAX
int smr_source_read_range_aligned(smr_source *s, const char *rel, uint64_t off,
                                  uint64_t len, uint64_t align_at,
                                  smr_range *out, smr_error *err);

/* [off, off + len) of a file read into the caller's memory, never shared
 * nor pooled: pieces of a record read one after the other into one buffer
 * (trial_read.c), which in the shared records would only push out whole
 * records other rules are about to ask for, and take fresh pages of
 * memory each time.  Errors as smr_source_read_range's. */
int smr_source_read_into(smr_source *s, const char *rel, uint64_t off,
                         uint64_t len, void *dest, smr_error *err);

/* [off, off + len) of a file when the run's shared records hold it as one
 * record read whole (smr_source_share_records), now held by *out (release
 * with smr_range_release) and counted as read, as read_range would serve
 * it; false, *out empty: not kept, read it.  No I/O: the pieces of a
 * record (trial_read.c) come from it when another rule read the record,
 * rather than from the file again. */
bool smr_source_range_kept(smr_source *s, const char *rel, uint64_t off,
                           uint64_t len, smr_range *out);

/* Like smr_source_list, but only paths that sort after `start_after`
 * (NULL: everything).  S3 lists in key order, so it reads only the
 * listing pages after that key. */
int smr_source_list_after(smr_source *s, const char *dir, const char *suffix,
                          const char *start_after, smr_source_listing *out,
                          smr_error *err);
/* The files (of the last listing) the caller is about to read with
 * smr_source_read_all, in this order: a remote source fetches them ahead,
 * in parallel.  No effect on local sources. */
void smr_source_read_ahead(smr_source *s, const smr_source_listing *files);
/* Byte budget of the record cache the rule threads share (0: no cache,
 * records are read where they lie). */
size_t smr_source_cache_budget(const smr_source *s);
/* Ask for [off, off+len) of `rel` ahead of use (remote sources fetch it
 * into their record cache in the background; no effect elsewhere). */
void smr_source_prefetch(smr_source *s, const char *rel, uint64_t off,
                         uint64_t len);
/* Several rules are about to read the same records side by side (lock
 * step): a local source then keeps a record just read for the rules that
 * ask for it next (shared_records.c); off (the default), each read is the
 * reader's own.  No effect on sources with a record cache of their own. */
void smr_source_share_records(smr_source *s, bool on);
/* Reads of shared records by local sources so far, and how many of them
 * a record another read kept served (tests; SMRULES_STATS_CACHE=1 prints
 * them at exit). */
void smr_source_shared_counts(uint64_t *reads, uint64_t *hits);
bool smr_source_is_remote(const smr_source *s);
/* Records too large to be shared are held, and kept idle for the next
 * read, within a byte budget for the process (record_budget.c): the
 * budget, and the bytes of such records the calling thread's ranges held
 * at most since its last call (a rule's turn; the scheduler admits turns
 * by it). */
size_t smr_source_record_budget(void);
size_t smr_source_turn_record_bytes(void);
/* The largest such record's buffer so far (0: none yet). */
size_t smr_source_largest_record(void);
/* Reads beyond a turn's own: work a thread may do now for another rule
 * or leave to it (a comparison with another trial's value,
 * host/value_pairs.c).  smr_source_extra_begin reserves len bytes when
 * they fit the budget beside what the running turns reserve (the
 * scheduler says, smr_source_set_turns_reserved) and the other extra
 * reads; false: leave the work.  Until smr_source_extra_end(len), this
 * thread's large records count as extra, not as its turn's (the
 * scheduler counts the extra bytes of every thread against the budget,
 * with the records kept past their turn (smr_range_keep):
 * smr_source_extra_bytes). */
bool smr_source_extra_begin(size_t len);
void smr_source_extra_end(size_t len);
size_t smr_source_extra_bytes(void);
void smr_source_set_turns_reserved(size_t bytes);
/* How many rule turns may run side by side (the runner's threads, at
 * most its rules; 1 until set): a record is kept past its turn
 * (smr_range_keep) only while each of them still has room for two of the
 * largest records, so that keeping it never runs turns one after the
 * other that would have run side by side. */
void smr_source_set_turn_slots(size_t n);

/* ---- locations, before a source is opened ---- */

/* Whether `location` names a remote store ("s3://..."). */
bool smr_location_is_remote(const char *location);
/* Whether location/<sub> holds anything (a directory on disk, keys under
 * the prefix in S3; false on errors). */
bool smr_location_has(const char *location, const char *sub);
/* Where smrules keeps its own state about a trial (state.db), made when
 * missing: for a folder on disk a folder of the user's own outside the
 * trial ($XDG_STATE_HOME/smrules/trials/<key>, see source_local.c); for a
 * remote trial a private local cache directory (which also holds its
 * rule-output/).  NULL (errno set) when it cannot be made. */
char *smr_location_state_dir(const char *location);
/* A setting of a kind of source, given before sources are opened, from
 * one thread (e.g. "s3-endpoint": the S3 endpoint, NULL for the
 * environment's; see source_s3.c).  False when no kind knows it. */
bool smr_source_configure(const char *setting, const char *value);
/* --s3-endpoint: smr_source_configure("s3-endpoint", url). */
void smr_source_set_endpoint(const char *url);

#endif
