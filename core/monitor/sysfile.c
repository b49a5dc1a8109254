/* sysfile.c - formatting system-metric lines and appending them to the
 * file of their minute. */
#include "monitor/sysfile.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void smr_mon_emit(smr_mon_round *r, const char *type, const char *name,
                  const char *dim, double value) {
  char v[40], ts[40];
  if (!isfinite(value))
    value = 0;
  smr_fmt_double(round(value * 100) / 100, v, sizeof v);
  smr_fmt_double(r->ts, ts, sizeof ts);
  smr_buf_printf(&r->lines,
                 "{\"Type\": \"%s\", \"Name\": \"%s\", \"Dimension\": \"%s\", "
                 "\"Value\": %s, \"NodeId\": \"%s\", \"Timestamp\": %s}\n",
                 type, name, dim, v, r->node, ts);
}

void smr_sysfile_init(smr_sysfile *f, const char *profiler_dir,
                      const char *node) {
  f->root = smr_xasprintf("%s/system/incremental", profiler_dir);
  f->node = smr_xstrdup(node);
  f->fd = -1;
  f->minute = -1;
  f->path = NULL;
}

/* mkdir -p for a path whose parents may be missing. */
static int make_dirs(const char *path) {
  char *p = smr_xstrdup(path);
  int rc = 0;
  for (char *s = p + 1; rc == 0; s++) {
    bool end = *s == '\0';
    if (*s == '/' || end) {
      *s = '\0';
      if (mkdir(p, 0755) != 0 && errno != EEXIST)
        rc = -1;
      if (end)
        break;
      *s = '/';
    }
  }
  free(p);
  return rc;
}

static int open_minute(smr_sysfile *f, int64_t minute, smr_error *err) {
  if (f->fd >= 0)
    close(f->fd);
  f->fd = -1;
  free(f->path);
  time_t t = (time_t)minute;
  struct tm tm;
  gmtime_r(&t, &tm);
  char hour[16];
  strftime(hour, sizeof hour, "%Y%m%d%H", &tm);
  char *dir = smr_xasprintf("%s/%s", f->root, hour);
  f->path =
      smr_xasprintf("%s/%010lld.%s.json", dir, (long long)minute, f->node);
  int rc = make_dirs(dir);
  free(dir);
  if (rc != 0)
    return smr_error_set(err, SMR_ERR_IO, f->path, -1,
                         "cannot create the folder: %s", strerror(errno));
  f->fd = open(f->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (f->fd < 0)
    return smr_error_set(err, SMR_ERR_IO, f->path, -1, "cannot open: %s",
                         strerror(errno));
  f->minute = minute;
  return SMR_OK;
}

int smr_sysfile_append(smr_sysfile *f, const smr_mon_round *r, smr_error *err) {
  if (r->lines.len == 0)
    return SMR_OK;
  int64_t minute = (int64_t)floor(r->ts / 60) * 60;
  if (minute != f->minute) {
    int rc = open_minute(f, minute, err);
    if (rc != SMR_OK)
      return rc;
  }
  struct stat st;
  off_t before = fstat(f->fd, &st) == 0 ? st.st_size : -1;
  size_t done = 0;
  while (done < r->lines.len) {
    ssize_t n = write(f->fd, r->lines.data + done, r->lines.len - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int e = n < 0 ? errno : ENOSPC;
      if (before >= 0 && ftruncate(f->fd, before) != 0)
        e = errno;
      return smr_error_set(err, SMR_ERR_IO, f->path, (int64_t)before,
                           "cannot write: %s", strerror(e));
    }
    done += (size_t)n;
  }
  return SMR_OK;
}

void smr_sysfile_close(smr_sysfile *f) {
  if (f->fd >= 0)
    close(f->fd);
  free(f->root);
  free(f->node);
  free(f->path);
  memset(f, 0, sizeof *f);
  f->fd = -1;
}
