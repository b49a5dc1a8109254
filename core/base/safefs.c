/* safefs.c - confined creation of directories and files (see safefs.h). */
#include "base/safefs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool smr_safe_name(const char *name, const char **why) {
  const char *w = NULL;
  if (!name || !name[0])
    w = "is empty";
  else if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
    w = "is '.' or '..'";
  else
    for (const unsigned char *p = (const unsigned char *)name; *p && !w; p++)
      if (*p == '/')
        w = "contains '/'";
      else if (*p < 0x20 || *p == 0x7f)
        w = "contains a control character";
  if (why)
    *why = w;
  return w == NULL;
}

const char *smr_path_below(const char *path, const char *root) {
  size_t n = strlen(root);
  while (n > 1 && root[n - 1] == '/')
    n--;
  if (strncmp(path, root, n) != 0)
    return NULL;
  if (path[n] == '\0')
    return path + n;
  if (path[n] == '/' || (n == 1 && root[0] == '/'))
    return path + n + (path[n] == '/');
  return NULL;
}

bool smr_mkdirs(const char *path, mode_t mode) {
  if (!path[0]) { /* as mkdir("") */
    errno = ENOENT;
    return false;
  }
  char *p = smr_xstrdup(path);
  bool ok = true;
  for (char *s = p + 1; *s && ok; s++) {
    if (*s != '/')
      continue;
    *s = '\0';
    ok = mkdir(p, mode) == 0 || errno == EEXIST;
    *s = '/';
  }
  if (ok)
    ok = mkdir(p, mode) == 0 || errno == EEXIST;
  int e = errno;
  free(p);
  errno = e;
  return ok;
}

static int step_error(smr_error *err, const char *dir, const char *comp,
                      int parent, int e) {
  struct stat st;
  if (fstatat(parent, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISLNK(st.st_mode))
    return smr_error_set(err, SMR_ERR_IO, dir, -1,
                         "'%s' is a symbolic link: smrules does not follow "
                         "links inside the trial when it writes",
                         comp);
  if (e == ENOTDIR || (e == 0))
    return smr_error_set(err, SMR_ERR_IO, dir, -1, "'%s' is not a directory",
                         comp);
  return smr_error_set(err, SMR_ERR_IO, dir, -1, "cannot open '%s': %s", comp,
                       strerror(e));
}

/* One component below `parent`: made when asked, then opened without
 * following a link.  Returns the new descriptor or -1. */
static int open_step(int parent, const char *comp, bool create, const char *dir,
                     smr_error *err) {
  if (strcmp(comp, ".") == 0 || strcmp(comp, "..") == 0) {
    smr_error_set(err, SMR_ERR_IO, dir, -1,
                  "'%s' in a path below the trial is refused", comp);
    return -1;
  }
  if (create && mkdirat(parent, comp, 0755) != 0 && errno != EEXIST) {
    smr_error_set(err, SMR_ERR_IO, dir, -1, "cannot create '%s': %s", comp,
                  strerror(errno));
    return -1;
  }
  int fd =
      openat(parent, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    step_error(err, dir, comp, parent, errno);
  return fd;
}

/* `path` made absolute (against the working directory) with ".", ".."
 * and repeated slashes resolved as text.  No link is followed: a link
 * inside the trial cannot move where the result points. */
static char *abs_lexical(const char *path) {
  char cwd[4096];
  char *full = path[0] == '/' || !getcwd(cwd, sizeof cwd)
                   ? smr_xstrdup(path)
                   : smr_xasprintf("%s/%s", cwd, path);
  char *out = smr_xmalloc(strlen(full) + 2);
  size_t n = 0;
  char *save = NULL;
  for (char *c = strtok_r(full, "/", &save); c;
       c = strtok_r(NULL, "/", &save)) {
    if (strcmp(c, ".") == 0)
      continue;
    if (strcmp(c, "..") == 0) {
      while (n > 0 && out[n - 1] != '/')
        n--;
      if (n > 0)
        n--; /* the slash before the dropped component */
      continue;
    }
    out[n++] = '/';
    size_t k = strlen(c);
    memcpy(out + n, c, k);
    n += k;
  }
  if (n == 0)
    out[n++] = '/';
  out[n] = '\0';
  free(full);
  return out;
}

/* The part of `dir` (absolute, lexical) inside the trial `confine`, as
 * the user spelled it or as it really is (--trial ./t with --output
 * /abs/path/t/rule-output, or a trial reached through a link of the
 * user's own); NULL when outside. */
static const char *inside_confine(const char *dir, const char *confine) {
  char *lex = abs_lexical(confine);
  const char *below = smr_path_below(dir, lex);
  free(lex);
  if (below)
    return below;
  char *real = realpath(confine, NULL);
  below = real ? smr_path_below(dir, real) : NULL;
  free(real);
  return below;
}

int smr_safe_dir_open(const char *dir_given, const char *confine, bool create,
                      int *fd, smr_error *err) {
  *fd = -1;
  char *dir = abs_lexical(dir_given);
  const char *below =
      confine && confine[0] ? inside_confine(dir, confine) : NULL;
  char *trusted =
      below ? smr_xstrndup(dir, (size_t)(below - dir)) : smr_xstrdup(dir);
  if (!trusted[0]) {
    free(trusted);
    trusted = smr_xstrdup("/");
  }
  /* the trusted part is the user's: made as asked (a failure shows as the
   * open's error below) */
  if (create)
    (void)smr_mkdirs(trusted, 0755);
  int cur = open(trusted, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cur < 0) {
    int rc = smr_error_set(err, SMR_ERR_IO, trusted, -1, "cannot open: %s",
                           strerror(errno));
    free(trusted);
    free(dir);
    return rc;
  }
  free(trusted);
  char *rest = smr_xstrdup(below ? below : "");
  char *save = NULL;
  for (char *c = strtok_r(rest, "/", &save); c;
       c = strtok_r(NULL, "/", &save)) {
    int next = open_step(cur, c, create, dir_given, err);
    close(cur);
    cur = next;
    if (cur < 0)
      break;
  }
  free(rest);
  free(dir);
  if (cur < 0)
    return SMR_ERR_IO;
  *fd = cur;
  return SMR_OK;
}

static int write_all(int fd, const char *p, size_t len) {
  while (len) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int smr_safe_write_at(int dirfd, const char *name, const void *data, size_t len,
                      const char *shown, smr_error *err) {
  char *tmp = smr_xasprintf("%s.tmp", name);
  int rc = SMR_OK;
  /* whatever is at the temporary name (a link, a hard link to another
   * file) is removed, never opened */
  if (unlinkat(dirfd, tmp, 0) != 0 && errno != ENOENT)
    rc = smr_error_set(err, SMR_ERR_IO, shown, -1,
                       "cannot remove the old %s: %s", tmp, strerror(errno));
  int fd =
      rc ? -1
         : openat(dirfd, tmp,
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (!rc && fd < 0)
    rc = smr_error_set(err, SMR_ERR_IO, shown, -1, "cannot create %s: %s", tmp,
                       strerror(errno));
  if (!rc && write_all(fd, data, len) != 0)
    rc = smr_error_set(err, SMR_ERR_IO, shown, -1, "cannot write: %s",
                       strerror(errno ? errno : EIO));
  if (fd >= 0 && close(fd) != 0 && !rc)
    rc = smr_error_set(err, SMR_ERR_IO, shown, -1, "cannot write: %s",
                       strerror(errno));
  if (!rc && renameat(dirfd, tmp, dirfd, name) != 0)
    rc = smr_error_set(err, SMR_ERR_IO, shown, -1, "cannot rename: %s",
                       strerror(errno));
  if (rc && fd >= 0)
    unlinkat(dirfd, tmp, 0);
  free(tmp);
  return rc;
}

/* Every component of `rel` is a plain name (checked as text before
 * anything is created): not absolute, no '.', '..' or empty component. */
static int check_relpath(const char *rel, const char *full, smr_error *err) {
  if (!rel || !rel[0] || rel[0] == '/')
    return smr_error_set(err, SMR_ERR_USAGE, full, -1,
                         "not a path relative to the rule's folder");
  char *copy = smr_xstrdup(rel);
  const char *why = NULL;
  for (char *c = copy, *slash; c; c = slash ? slash + 1 : NULL) {
    slash = strchr(c, '/');
    if (slash)
      *slash = '\0';
    if (!smr_safe_name(c, &why))
      break;
  }
  free(copy);
  return why ? smr_error_set(err, SMR_ERR_USAGE, full, -1,
                             "a component of the path %s", why)
             : SMR_OK;
}

int smr_safe_write_below(int dirfd, const char *relpath, const void *data,
                         size_t len, const char *shown, smr_error *err) {
  char *full = smr_xasprintf("%s/%s", shown, relpath ? relpath : "");
  int rc = check_relpath(relpath, full, err);
  int cur = rc ? -1 : dup(dirfd);
  if (!rc && cur < 0)
    rc = smr_error_set(err, SMR_ERR_IO, shown, -1, "cannot open: %s",
                       strerror(errno));
  char *rel = smr_xstrdup(rc ? "" : relpath);
  char *name = rel;
  for (char *slash; !rc && (slash = strchr(name, '/')); name = slash + 1) {
    *slash = '\0';
    int next = open_step(cur, name, true, full, err);
    close(cur);
    cur = next;
    if (cur < 0)
      rc = SMR_ERR_IO;
  }
  if (!rc)
    rc = smr_safe_write_at(cur, name, data, len, full, err);
  if (cur >= 0)
    close(cur);
  free(rel);
  free(full);
  return rc;
}

static const char *file_kind(mode_t m) {
  return S_ISLNK(m)                 ? "a symbolic link"
         : S_ISFIFO(m)              ? "a FIFO"
         : S_ISDIR(m)               ? "a directory"
         : S_ISSOCK(m)              ? "a socket"
         : S_ISCHR(m) || S_ISBLK(m) ? "a device"
                                    : "not a regular file";
}

static int refuse_kind(smr_error *err, const char *shown, mode_t m) {
  return smr_error_set(err, SMR_ERR_IO, shown, -1,
                       "is %s: smrules writes only regular files there and "
                       "follows no link",
                       file_kind(m));
}

int smr_safe_open_append(int dirfd, const char *name, const char *shown,
                         int *fd, smr_error *err) {
  *fd = -1;
  const char *why;
  if (!smr_safe_name(name, &why))
    return smr_error_set(err, SMR_ERR_IO, shown, -1, "the file name %s", why);
  int f = openat(dirfd, name,
                 O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK |
                     O_CLOEXEC,
                 0644);
  struct stat st;
  if (f < 0) {
    int e = errno;
    /* ELOOP: a link (O_NOFOLLOW); ENXIO: a FIFO nobody reads */
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        !S_ISREG(st.st_mode))
      return refuse_kind(err, shown, st.st_mode);
    return smr_error_set(err, SMR_ERR_IO, shown, -1, "cannot open: %s",
                         strerror(e));
  }
  if (fstat(f, &st) != 0) {
    int e = errno;
    close(f);
    return smr_error_set(err, SMR_ERR_IO, shown, -1, "cannot stat: %s",
                         strerror(e));
  }
  if (!S_ISREG(st.st_mode)) { /* a FIFO with a reader opens */
    close(f);
    return refuse_kind(err, shown, st.st_mode);
  }
  int flags = fcntl(f, F_GETFL);
  if (flags >= 0)
    fcntl(f, F_SETFL, flags & ~O_NONBLOCK);
  *fd = f;
  return SMR_OK;
}
