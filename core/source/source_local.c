/* source_local.c - the local-disk source: listings, whole files and byte
 * ranges, confined to the trial root.  Files are opened relative to a
 * directory descriptor of the root with openat2(RESOLVE_BENEATH) so that
 * neither ".." nor a symlink can lead outside; where the kernel lacks
 * openat2 the resolved path is checked against the root instead. */
#include "source/source.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/common.h"
#include "base/path.h"
#include "base/safefs.h"
#include "base/sha256.h"
#include "source/shared_records.h"
#include "source/source_kind.h"

typedef struct local_source {
  smr_source base; /* base.root: canonical absolute path */
  int rootfd;
  bool have_openat2;
  bool share; /* smr_source_share_records */
} local_source;

static const smr_source_ops LOCAL_OPS;

static local_source *L(smr_source *s) {
  return (local_source *)s;
}

int smr_source_local_open(const char *root, smr_source **out, smr_error *err) {
  char *canon = realpath(root, NULL);
  if (!canon)
    return smr_error_set(err, SMR_ERR_IO, root, -1,
                         "cannot open trial directory: %s", strerror(errno));
  int fd = open(canon, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    free(canon);
    return smr_error_set(err, SMR_ERR_IO, root, -1,
                         "cannot open trial directory: %s", strerror(e));
  }
  local_source *s = smr_xcalloc(1, sizeof *s);
  s->base.ops = &LOCAL_OPS;
  s->base.root = canon;
  s->rootfd = fd;
  s->have_openat2 = true;
  *out = &s->base;
  return SMR_OK;
}

static void local_close(smr_source *s) {
  smr_shared_forget_source(s);
  close(L(s)->rootfd);
  free(s->root);
  free(s);
}

/* Fallback confinement check: the resolved path must be under the root. */
static bool resolved_inside(const local_source *s, const char *rel) {
  char *full = smr_xasprintf("%s/%s", s->base.root, rel);
  char *canon = realpath(full, NULL);
  free(full);
  if (!canon)
    return true; /* does not exist: the open will fail on its own */
  size_t n = strlen(s->base.root);
  bool ok = strncmp(canon, s->base.root, n) == 0 &&
            (canon[n] == '/' || canon[n] == '\0');
  free(canon);
  return ok;
}

/* Open `rel` read-only, confined to the root.  Returns fd or -1 (errno).
 * O_NONBLOCK: opening a FIFO planted in the trial must not wait for a
 * writer (callers then refuse anything but a regular file); reads of
 * regular files are not affected. */
static int open_beneath(smr_source *src, const char *rel, int flags) {
  local_source *s = L(src);
  if (!smr_path_is_safe(rel)) {
    errno = EXDEV;
    return -1;
  }
  if (s->have_openat2) {
    struct open_how how = {0};
    how.flags = (uint64_t)(flags | O_CLOEXEC | O_NONBLOCK);
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    long fd = syscall(SYS_openat2, s->rootfd, rel, &how, sizeof how);
    if (fd >= 0 || errno != ENOSYS)
      return (int)fd;
    s->have_openat2 = false;
  }
  if (!resolved_inside(s, rel)) {
    errno = EXDEV;
    return -1;
  }
  return openat(s->rootfd, rel, flags | O_CLOEXEC | O_NONBLOCK);
}

static const char *open_error(int e) {
  return e == EXDEV ? "path leads outside the trial directory" : strerror(e);
}

static bool has_suffix(const char *name, const char *suffix) {
  size_t n = strlen(name), k = strlen(suffix);
  return n >= k && strcmp(name + n - k, suffix) == 0;
}

static void listing_add(smr_source_listing *l, char *path,
                        const struct stat *st) {
  smr_source_listing_add(l, path, st->st_size,
                         (int64_t)st->st_mtim.tv_sec * 1000000000 +
                             st->st_mtim.tv_nsec);
}

/* Whether nothing below the directory `rel` can sort after `after`: every
 * path below it starts with "rel/", and when that prefix sorts before
 * `after` without being a prefix of it, so does every path it begins. */
static bool dir_before(const char *rel, const char *after) {
  size_t n = strlen(rel);
  int c = strncmp(rel, after, n);
  if (c != 0)
    return c < 0;
  return after[n] > '/'; /* "rel/" against after's next character */
}

/* Depth-bounded recursive walk; symlinks are not followed.  With `after`,
 * only paths that sort after it are listed, and directories whose whole
 * contents sort before it are neither read nor stat'ed (a live trial of
 * 20,000 steps is listed again at every refresh). */
static int walk(smr_source *s, const char *dir, const char *suffix,
                const char *after, int depth, smr_source_listing *out,
                smr_error *err) {
  if (depth > 8)
    return SMR_OK;
  int fd = open_beneath(s, dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return SMR_OK; /* missing or unreadable directory: nothing there yet */
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return SMR_OK;
  }
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    const char *name = de->d_name;
    if (name[0] == '.' && (name[1] == '\0' || strcmp(name, "..") == 0))
      continue;
    char *rel = smr_xasprintf("%s/%s", dir, name);
    /* d_type spares the stat of what the listing skips; DT_UNKNOWN (some
     * file systems) falls through to the stat */
    bool skip = after && ((de->d_type == DT_DIR && dir_before(rel, after)) ||
                          (de->d_type == DT_REG && strcmp(rel, after) <= 0));
    struct stat st;
    if (skip || fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      free(rel);
      continue;
    }
    if (S_ISDIR(st.st_mode) && !(after && dir_before(rel, after))) {
      walk(s, rel, suffix, after, depth + 1, out, err);
      free(rel);
    } else if (S_ISREG(st.st_mode) && has_suffix(name, suffix) &&
               !has_suffix(name, ".tmp") &&
               !(after && strcmp(rel, after) <= 0)) {
      listing_add(out, rel, &st);
    } else {
      free(rel);
    }
  }
  closedir(d);
  return SMR_OK;
}

static int cmp_file(const void *a, const void *b) {
  return strcmp(((const smr_source_file *)a)->path,
                ((const smr_source_file *)b)->path);
}

static int local_list_after(smr_source *s, const char *dir, const char *suffix,
                            const char *start_after, smr_source_listing *out,
                            smr_error *err) {
  memset(out, 0, sizeof *out);
  int rc = walk(s, dir, suffix, start_after, 0, out, err);
  if (out->n > 1)
    qsort(out->files, out->n, sizeof *out->files, cmp_file);
  return rc;
}

static int local_list(smr_source *s, const char *dir, const char *suffix,
                      smr_source_listing *out, smr_error *err) {
  return local_list_after(s, dir, suffix, NULL, out, err);
}

static bool local_exists(smr_source *s, const char *rel, int64_t *size,
                         int64_t *mtime_ns) {
  int fd = open_beneath(s, rel, O_RDONLY);
  if (fd < 0)
    return false;
  struct stat st;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (ok && size)
    *size = st.st_size;
  if (ok && mtime_ns)
    *mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  close(fd);
  return ok;
}

/* rel opened for reading, beneath the trial folder, and *st its stat; -1
 * (err set) when it cannot be opened or is not a regular file. */
static int open_regular(smr_source *s, const char *rel, struct stat *st,
                        smr_error *err) {
  int fd = open_beneath(s, rel, O_RDONLY);
  if (fd < 0) {
    smr_error_set(err, SMR_ERR_IO, rel, -1, "cannot open: %s",
                  open_error(errno));
    return -1;
  }
  if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
    close(fd);
    smr_error_set(err, SMR_ERR_IO, rel, -1, "not a regular file");
    return -1;
  }
  return fd;
}

static int local_read_all(smr_source *s, const char *rel, size_t max,
                          char **buf, size_t *len, smr_error *err) {
  *buf = NULL;
  *len = 0;
  struct stat st;
  int fd = open_regular(s, rel, &st, err);
  if (fd < 0)
    return SMR_ERR_IO;
  if ((uint64_t)st.st_size > max) {
    close(fd);
    return smr_error_set(err, SMR_ERR_FORMAT, rel, -1,
                         "file is %lld bytes, more than the %zu expected at "
                         "most",
                         (long long)st.st_size, max);
  }
  size_t cap = (size_t)st.st_size;
  char *p = malloc(cap + 1);
  if (!p) {
    close(fd);
    return smr_error_set(err, SMR_ERR_NOMEM, rel, -1, "out of memory");
  }
  size_t got = 0;
  while (got < cap) {
    ssize_t r = read(fd, p + got, cap - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  close(fd);
  p[got] = '\0';
  *buf = p;
  *len = got;
  return SMR_OK;
}

static void local_share_records(smr_source *s, bool on) {
  L(s)->share = on;
}

/* Where in b a record at file offset `off` is read to: at the same offset
 * modulo 64 as in the file.  The kernel copies from the page cache with
 * `rep movsb`, and on some CPUs (AMD EPYC here) a destination 16 bytes
 * off the source's alignment makes that copy 3.7 times slower: a malloc'd
 * buffer starts 16 bytes into a page, so records whose offset in the file
 * was a multiple of 64 were read at a quarter of the speed of `cat`. */
#define READ_ALIGN 64
/* With align_at (smr_source_read_range_aligned), the target is moved down
 * by the s < SMR_VALUE_ALIGN bytes that put byte align_at on a multiple
 * of SMR_VALUE_ALIGN: a destination a few bytes *before* the source's
 * alignment copies as fast as an aligned one here, where one a few bytes
 * after it copies ~30 % slower (1 MiB preads, medians of 41).  The buffer
 * holds READ_ALIGN + SMR_VALUE_ALIGN bytes more than the range. */
static uint8_t *read_target(record_buf *b, uint64_t off, uint64_t align_at) {
  uint64_t s =
      align_at == SMR_NO_ALIGN ? 0 : (off + align_at) & (SMR_VALUE_ALIGN - 1);
  uint8_t *p = b->p + SMR_VALUE_ALIGN;
  return p + ((off - s - (uintptr_t)p) & (READ_ALIGN - 1));
}
#define READ_SLACK (READ_ALIGN + SMR_VALUE_ALIGN)

/* Whether a record of len bytes goes through the run's shared records. */
static bool shared_size(smr_source *s, uint64_t len) {
  return L(s)->share && len > 0 && len <= SHARED_RECORD_MAX;
}

/* The record [off, off + len) of rel when the run's shared records hold it
 * under that name (smr_source_range_kept, and read_range's first look). */
static bool local_range_kept(smr_source *s, const char *rel, uint64_t off,
                             uint64_t len, smr_range *out) {
  if (!shared_size(s, len))
    return false;
  shared_rec *named = smr_shared_take_named(s, rel, off, len);
  if (!named)
    return false;
  smr_shared_lend(out, named);
  return true;
}

/* Whether [off, off + len) starts inside the file `st` describes and ends
 * in it; if not, the error (SMR_ERR_FORMAT at the file's end or at off),
 * naming the range as the index entry it came from when `index_entry`. */
static bool range_in_file(const char *rel, uint64_t off, uint64_t len,
                          const struct stat *st, bool index_entry,
                          smr_error *err) {
  uint64_t size = (uint64_t)st->st_size;
  if (off < size && len <= size - off)
    return true;
  int64_t at = (int64_t)(off < size ? off : size);
  if (index_entry)
    smr_error_set(err, SMR_ERR_FORMAT, rel, at,
                  "index entry [start_idx %llu, length %llu] lies outside "
                  "the %llu-byte event file",
                  (unsigned long long)off, (unsigned long long)len,
                  (unsigned long long)size);
  else
    smr_error_set(err, SMR_ERR_FORMAT, rel, at,
                  "range [%llu, +%llu] lies outside the %llu-byte file",
                  (unsigned long long)off, (unsigned long long)len,
                  (unsigned long long)size);
  return false;
}

static int local_read_range_aligned(smr_source *s, const char *rel,
                                    uint64_t off, uint64_t len,
                                    uint64_t align_at, smr_range *out,
                                    smr_error *err) {
  memset(out, 0, sizeof *out);
  if (local_range_kept(s, rel, off, len, out))
    return SMR_OK;
  bool share = shared_size(s, len);
  struct stat st;
  int fd = open_regular(s, rel, &st, err);
  if (fd < 0)
    return SMR_ERR_IO;
  if (!range_in_file(rel, off, len, &st, true, err)) {
    close(fd);
    return SMR_ERR_FORMAT;
  }
  if (len == 0) {
    close(fd);
    return SMR_OK;
  }
  shared_rec *claim = NULL;
  file_id id = file_id_of(&st);
  shared_rec *sr =
      share ? smr_shared_take(s, rel, fd, &id, off, len, &claim) : NULL;
  if (sr) {
    close(fd);
    smr_shared_lend(out, sr);
    return SMR_OK;
  }
  /* Read, not mapped: a file that the trial's writer truncates while it
   * is read must be an error for this record, not SIGBUS (a mapping
   * faults on pages past the new end). */
  record_buf *b = share ? smr_shared_recycle(len + READ_SLACK) : NULL;
  if (!b)
    b = smr_record_buf_take((size_t)len + READ_SLACK);
  uint8_t *p = b ? read_target(b, off, align_at) : NULL;
  if (!p) {
    if (claim)
      smr_shared_withdraw(claim);
    close(fd);
    return smr_error_set(err, SMR_ERR_NOMEM, rel, (int64_t)off,
                         "cannot allocate %llu bytes for the record",
                         (unsigned long long)len);
  }
  int e = 0;
  uint64_t got = len;
  if (claim)
    smr_shared_read_parts(claim, fd, p, &e, &got);
  else
    got = smr_pread_whole(fd, p, len, off, &e);
  close(fd);
  if (got < len) {
    smr_record_buf_give_back(b);
    if (claim)
      smr_shared_withdraw(claim);
    if (e)
      return smr_error_set(err, SMR_ERR_IO, rel, (int64_t)(off + got),
                           "read failed: %s", strerror(e));
    return smr_error_set(err, SMR_ERR_FORMAT, rel, (int64_t)(off + got),
                         "the file shrank while it was read (%llu of the "
                         "%llu bytes of the record were there)",
                         (unsigned long long)got, (unsigned long long)len);
  }
  if (claim && b->cap <= SHARED_RECORD_MAX) {
    smr_shared_publish(claim, b, p);
    smr_shared_lend(out, claim);
    return SMR_OK;
  }
  if (claim) /* a pooled buffer much larger than the record: not kept */
    smr_shared_withdraw(claim);
  out->lent_ = b;
  out->give_back_ = smr_record_buf_give_back;
  out->data = p;
  out->len = (size_t)len;
  return SMR_OK;
}

static int local_read_into(smr_source *s, const char *rel, uint64_t off,
                           uint64_t len, void *dest, smr_error *err) {
  struct stat st;
  int fd = open_regular(s, rel, &st, err);
  if (fd < 0)
    return SMR_ERR_IO;
  if (!range_in_file(rel, off, len, &st, false, err)) {
    close(fd);
    return SMR_ERR_FORMAT;
  }
  int e = 0;
  uint64_t got = len ? smr_pread_whole(fd, dest, len, off, &e) : 0;
  close(fd);
  if (got < len)
    return e ? smr_error_set(err, SMR_ERR_IO, rel, (int64_t)(off + got),
                             "read failed: %s", strerror(e))
             : smr_error_set(err, SMR_ERR_FORMAT, rel, (int64_t)(off + got),
                             "the file shrank while it was read");
  return SMR_OK;
}

static int local_read_range(smr_source *s, const char *rel, uint64_t off,
                            uint64_t len, smr_range *out, smr_error *err) {
  return local_read_range_aligned(s, rel, off, len, SMR_NO_ALIGN, out, err);
}

static const smr_source_ops LOCAL_OPS = {
    .kind = "local",
    .close = local_close,
    .list = local_list,
    .list_after = local_list_after,
    .exists = local_exists,
    .read_all = local_read_all,
    .read_range = local_read_range,
    .share_records = local_share_records,
    .read_range_aligned = local_read_range_aligned,
    .read_into = local_read_into,
    .range_kept = local_range_kept,
};

/* ---------------------------------------------------------- the kind */

static bool local_location_has(const char *location, const char *sub) {
  char *path = smr_xasprintf("%s/%s", location, sub);
  struct stat st;
  bool has = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
  free(path);
  return has;
}

/* Where the state of a local trial lives (its catalog, the rules' state,
 * the action log): not in the trial folder, which the training job
 * writes -- a job that could write the action log could claim that
 * StopTraining already ran -- but in the user's state folder,
 * $XDG_STATE_HOME/smrules/trials/<key> (~/.local/state/smrules/... when
 * XDG_STATE_HOME is not set), one folder per trial.  The key is the
 * SHA-256 of the folder's canonical path, device, inode and birth time:
 * a trial folder removed and made again at the same path (even under a
 * reused inode number) is a new trial with a new state; a trial moved
 * elsewhere starts afresh too (docs/security.md). */
static char *state_base(void) {
  const char *x = getenv("XDG_STATE_HOME");
  if (x && x[0] == '/') /* the XDG spec: a relative path is ignored */
    return smr_xasprintf("%s/smrules/trials", x);
  const char *home = getenv("HOME");
  if (home && home[0] == '/')
    return smr_xasprintf("%s/.local/state/smrules/trials", home);
  errno = ENOENT;
  return NULL;
}

/* The identity the key is made of, or NULL (errno set). */
static char *trial_identity(const char *location) {
  char *canon = realpath(location, NULL);
  if (!canon)
    return NULL;
  struct statx sx;
  if (statx(AT_FDCWD, canon, 0, STATX_INO | STATX_BTIME, &sx) != 0) {
    int e = errno;
    free(canon);
    errno = e;
    return NULL;
  }
  /* no birth time on this file system: the path, device and inode */
  long long btime_ns =
      sx.stx_mask & STATX_BTIME
          ? (long long)sx.stx_btime.tv_sec * 1000000000LL + sx.stx_btime.tv_nsec
          : 0;
  char *id =
      smr_xasprintf("%s\ndev %u:%u ino %llu born %lld", canon, sx.stx_dev_major,
                    sx.stx_dev_minor, (unsigned long long)sx.stx_ino, btime_ns);
  free(canon);
  return id;
}

/* Which trial a state folder belongs to, for people looking in it. */
static void write_note(const char *dir, const char *id) {
  char *path = smr_xasprintf("%s/trial.txt", dir);
  int fd =
      open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0) {
    dprintf(fd, "%s\n", id);
    close(fd);
  }
  free(path);
}

static char *local_state_dir(const char *location) {
  char *id = trial_identity(location);
  char *base = id ? state_base() : NULL;
  if (!base) {
    free(id);
    return NULL;
  }
  char hex[65];
  smr_sha256_hex(id, strlen(id), hex);
  char *dir = smr_xasprintf("%s/%.32s", base, hex);
  free(base);
  if (!smr_mkdirs(dir, 0700)) {
    int e = errno;
    free(dir);
    free(id);
    errno = e;
    return NULL;
  }
  /* a folder someone else owns or may write (a planted one) is not ours
   * to keep state in */
  struct stat st;
  if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & (S_IWGRP | S_IWOTH))) {
    free(dir);
    free(id);
    errno = EPERM;
    return NULL;
  }
  write_note(dir, id);
  free(id);
  return dir;
}

const smr_source_kind smr_source_kind_local = {
    .name = "local",
    .scheme = NULL, /* every location no other kind claims */
    .remote = false,
    .open = smr_source_local_open,
    .location_has = local_location_has,
    .state_dir = local_state_dir,
};
