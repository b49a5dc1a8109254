/* source.h - where trial bytes come from.  The reader asks a source for
 * listings and byte ranges by paths relative to the trial root; the local
 * source guarantees nothing outside the root is ever opened (absolute paths,
 * ".." and symlinks leading out are refused).  An S3 source can implement
 * the same calls later. */
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
} smr_range;

/* What a kind of source implements (local disk, S3, ...).  Each
 * implementation embeds `smr_source` as the first member of its own
 * struct; the functions below dispatch through `ops`. */
typedef struct smr_source_ops {
  const char *kind;
  void (*close)(smr_source *s);
  int (*list)(smr_source *s, const char *dir, const char *suffix,
              smr_source_listing *out, smr_error *err);
  bool (*exists)(smr_source *s, const char *rel, int64_t *size,
                 int64_t *mtime_ns);
  int (*read_all)(smr_source *s, const char *rel, size_t max, char **buf,
                  size_t *len, smr_error *err);
  int (*read_range)(smr_source *s, const char *rel, uint64_t off, uint64_t len,
                    smr_range *out, smr_error *err);
} smr_source_ops;

struct smr_source {
  const smr_source_ops *ops;
  char *root; /* canonical root: an absolute path or a URL */
};

int smr_source_local_open(const char *root, smr_source **out, smr_error *err);
/* Open by location: "s3://bucket/prefix" (when an S3 source is built in)
 * or a local directory. */
int smr_source_open(const char *location, smr_source **out, smr_error *err);
void smr_source_close(smr_source *s);
/* Append a file to a listing (for implementations). */
void smr_source_listing_add(smr_source_listing *l, char *path, int64_t size,
                            int64_t mtime_ns);
const char *smr_source_root(const smr_source *s);

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

#endif
