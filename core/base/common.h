/* common.h - error reporting, status codes and small helpers shared by every
 * core module.  Nothing here knows about trials, rules or files. */
#ifndef SMR_COMMON_H
#define SMR_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Status codes.  Every fallible function returns one of these; 0 is success.
 * The availability codes mirror smdebug's exceptions
 * (docs/formats.md#when-a-value-is-not-there) so the rule runtime can reproduce
 * the reference invocation loop. */
typedef enum smr_status {
  SMR_OK = 0,
  SMR_ERR_IO = -1,            /* a file could not be opened or read */
  SMR_ERR_FORMAT = -2,        /* bytes on disk are not what the format says */
  SMR_ERR_NOMEM = -3,         /* an allocation failed */
  SMR_ERR_USAGE = -4,         /* bad argument from the caller or user */
  SMR_ERR_INCOMPLETE = -5,    /* data ends early: a file still being written */
  SMR_ERR_SQL = -6,           /* the catalog database failed */
  SMR_STEP_UNAVAILABLE = -10, /* step never saved; skip it */
  SMR_STEP_NOT_YET = -11,     /* step may still arrive; wait */
  SMR_TENSOR_UNAVAILABLE_FOR_STEP = -12, /* step exists, tensor not there */
  SMR_TENSOR_UNAVAILABLE = -13,          /* tensor name never seen */
  SMR_NO_MORE_DATA = -14,                /* training ended before this step */
  SMR_INVALID_WORKER = -15, /* no such worker for this tensor/step */
} smr_status;

const char *smr_status_name(int status);

/* An error: what went wrong, in which file (relative to the trial directory
 * when it belongs to a trial) and at which byte offset (-1 when none). */
#define SMR_ERR_FILE_MAX 1024
#define SMR_ERR_MSG_MAX 512

typedef struct smr_error {
  int status;
  int64_t offset;
  char file[SMR_ERR_FILE_MAX];
  char msg[SMR_ERR_MSG_MAX];
} smr_error;

void smr_error_clear(smr_error *e);
/* Fill `e` (may be NULL) and return `status`, so callers can write
 * `return smr_error_set(err, SMR_ERR_FORMAT, file, off, "...", ...);` */
int smr_error_set(smr_error *e, int status, const char *file, int64_t offset,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Format "file: offset N: message" (parts omitted when absent). */
void smr_error_format(const smr_error *e, char *buf, size_t n);

/* Allocation helpers that never return NULL: on failure they print a message
 * and exit(70).  Only used for small, bounded allocations whose size does
 * not come from input; sizes taken from input are checked first and use
 * plain malloc with an error path. */
void *smr_xmalloc(size_t n);
void *smr_xcalloc(size_t n, size_t size);
void *smr_xrealloc(void *p, size_t n);
char *smr_xstrdup(const char *s);
char *smr_xstrndup(const char *s, size_t n);
char *smr_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A growable byte buffer (used to build JSON, paths, messages). */
typedef struct smr_buf {
  char *data;
  size_t len, cap;
} smr_buf;
void smr_buf_append(smr_buf *b, const void *p, size_t n);
void smr_buf_puts(smr_buf *b, const char *s);
void smr_buf_printf(smr_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void smr_buf_free(smr_buf *b);

/* A growable list of owned strings. */
typedef struct smr_strv {
  char **v;
  size_t n, cap;
} smr_strv;
void smr_strv_push(smr_strv *s, const char *str); /* copies str */
void smr_strv_take(smr_strv *s, char *str);       /* takes ownership */
void smr_strv_sort_unique(smr_strv *s);
bool smr_strv_contains(const smr_strv *s, const char *str);
void smr_strv_free(smr_strv *s);

/* A growable list of int64 values. */
typedef struct smr_i64v {
  int64_t *v;
  size_t n, cap;
} smr_i64v;
void smr_i64v_push(smr_i64v *a, int64_t x);
void smr_i64v_free(smr_i64v *a);

/* Read a whole regular file of at most `max` bytes.  Returns SMR_OK and a
 * malloc'ed, NUL-terminated buffer in *out (length in *len). */
int smr_read_file(const char *path, size_t max, char **out, size_t *len,
                  smr_error *err);

/* Shortest decimal representation that round-trips (like Python's repr of a
 * float); non-finite values are written as "NaN", "Infinity", "-Infinity" by
 * smr_fmt_double and as null by the JSON writers. */
void smr_fmt_double(double v, char *buf, size_t n);

/* FNV-1a, for the in-memory hash tables: smr_hash_str continues hash h
 * over the bytes of s up to its NUL, smr_hash_bytes over n bytes; start
 * from SMR_HASH_INIT. */
#define SMR_HASH_INIT 1469598103934665603ULL
static inline uint64_t smr_hash_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}
static inline uint64_t smr_hash_str(uint64_t h, const char *s) {
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

/* Little-endian loads/stores that work on unaligned pointers. */
static inline uint32_t smr_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
static inline uint64_t smr_le64(const uint8_t *p) {
  return (uint64_t)smr_le32(p) | (uint64_t)smr_le32(p + 4) << 32;
}
static inline void smr_put_le32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}
static inline void smr_put_le64(uint8_t *p, uint64_t v) {
  smr_put_le32(p, (uint32_t)v);
  smr_put_le32(p + 4, (uint32_t)(v >> 32));
}

#endif
