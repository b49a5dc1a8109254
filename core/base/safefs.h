/* safefs.h - creating and replacing files inside a folder that someone
 * else may write (a trial folder): no symbolic link is followed below the
 * trusted part of a path, directories are made one step at a time, and a
 * file is replaced by writing a fresh temporary file and renaming it.
 * Also mkdir -p for the user's own folders, which need none of that. */
#ifndef SMR_SAFEFS_H
#define SMR_SAFEFS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/common.h"

/* Opens directory `dir` (O_DIRECTORY, close-on-exec) into *fd, creating
 * the missing directories when `create`.  The part of `dir` below
 * `confine` (a prefix of it ending at a '/' or the whole of it; NULL or ""
 * when nothing of `dir` is untrusted) is walked one component at a time
 * with mkdirat/openat(O_NOFOLLOW): a symbolic link there, a '..' or a
 * component that is not a directory is an error naming it.  The trusted
 * part is opened as given (symbolic links in it are the user's). */
int smr_safe_dir_open(const char *dir, const char *confine, bool create,
                      int *fd, smr_error *err);

/* Replaces `name` in the directory `dirfd` with `len` bytes of `data`:
 * `name`.tmp is removed, created with O_EXCL|O_NOFOLLOW (a link planted
 * there is never written through), filled and renamed over `name`.
 * `shown` is the path used in error messages. */
int smr_safe_write_at(int dirfd, const char *name, const void *data, size_t len,
                      const char *shown, smr_error *err);

/* Replaces `relpath` below the directory `dirfd` with `len` bytes of
 * `data` (smr_safe_write_at): `relpath` is relative, its components are
 * each smr_safe_name (no '..', no empty component), the directories on
 * the way are created and opened one at a time without following a link,
 * and the file itself is replaced, never written through.  `shown` is
 * the directory named in error messages. */
int smr_safe_write_below(int dirfd, const char *relpath, const void *data,
                         size_t len, const char *shown, smr_error *err);

/* Opens `name` in the directory `dirfd` for appending, creating it when
 * missing, into *fd: never through a symbolic link (O_NOFOLLOW), never
 * blocking on a FIFO (opened O_NONBLOCK, then refused), and only a
 * regular file is kept: anything else planted there is an error naming
 * `shown` (the path for messages) and what was found.  The descriptor is
 * blocking, close-on-exec. */
int smr_safe_open_append(int dirfd, const char *name, const char *shown,
                         int *fd, smr_error *err);

/* Whether `name` is usable as one path component that smrules creates
 * below a trial: not empty, not "." or "..", no '/', no control
 * characters.  On false, *why says what is wrong. */
bool smr_safe_name(const char *name, const char **why);

/* mkdir -p for a folder of the user's own (the state folder, the S3
 * cache), not one inside a trial: each missing directory of `path` is
 * made with `mode` (less the umask); whatever already has a name on the
 * way is kept as it is and symbolic links are followed, so the caller
 * checks what it got.  On false, errno says why. */
bool smr_mkdirs(const char *path, mode_t mode);

/* The part of `path` below `root` ("" when equal), or NULL when `path` is
 * not lexically inside `root`. */
const char *smr_path_below(const char *path, const char *root);

#endif
