/* sysfile.c - formatting system-metric lines and appending them to the
 * file of their minute. */
#include "monitor/sysfile.h"

#include "base/safefs.h"

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
  f->confine = smr_xstrdup(profiler_dir);
  f->root = smr_xasprintf("%s/system/incremental", profiler_dir);
  f->node = smr_xstrdup(node);
  f->fd = -1;
  f->minute = -1;
  f->refused = -1;
  f->path = NULL;
}

/* The minute's file, opened for appending below the profiler folder: the
 * training job writes there too (its own profiler output), so no link is
 * followed on the way or at the file, and a FIFO or anything else that is
 * not a regular file is refused rather than written through or waited
 * on. */
static int open_minute(smr_sysfile *f, int64_t minute, smr_error *err) {
  if (f->fd >= 0)
    close(f->fd);
  f->fd = -1;
  f->minute = -1;
  free(f->path);
  time_t t = (time_t)minute;
  struct tm tm;
  gmtime_r(&t, &tm);
  char hour[16];
  strftime(hour, sizeof hour, "%Y%m%d%H", &tm);
  char *dir = smr_xasprintf("%s/%s", f->root, hour);
  char *name = smr_xasprintf("%010lld.%s.json", (long long)minute, f->node);
  f->path = smr_xasprintf("%s/%s", dir, name);
  int dfd = -1;
  int rc = smr_safe_dir_open(dir, f->confine, true, &dfd, err);
  if (rc == SMR_OK) {
    rc = smr_safe_open_append(dfd, name, f->path, &f->fd, err);
    close(dfd);
  }
  free(dir);
  free(name);
  if (rc == SMR_OK)
    f->minute = minute;
  return rc;
}

static int write_lines(smr_sysfile *f, const smr_mon_round *r, smr_error *err);

int smr_sysfile_append(smr_sysfile *f, const smr_mon_round *r, smr_error *err) {
  if (r->lines.len == 0)
    return SMR_OK;
  int64_t minute = (int64_t)floor(r->ts / 60) * 60;
  f->repeated = minute == f->refused;
  if (f->repeated) /* the minute's file is unusable: said once already */
    return smr_error_set(err, f->refused_err.status, f->refused_err.file,
                         f->refused_err.offset, "%s", f->refused_err.msg);
  int rc = minute == f->minute ? SMR_OK : open_minute(f, minute, err);
  if (rc == SMR_OK)
    rc = write_lines(f, r, err);
  if (rc != SMR_OK) {
    f->refused = minute;
    f->refused_err = *err;
  }
  return rc;
}

/* The round's lines in one write; on failure the file is cut back to its
 * last complete line and closed. */
static int write_lines(smr_sysfile *f, const smr_mon_round *r, smr_error *err) {
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
      close(f->fd);
      f->fd = -1;
      f->minute = -1;
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
  free(f->confine);
  free(f->root);
  free(f->node);
  free(f->path);
  memset(f, 0, sizeof *f);
  f->fd = -1;
  f->minute = f->refused = -1;
}
