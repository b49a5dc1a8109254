/* procfile.c - re-reading kernel text files through a kept descriptor. */
#include "monitor/procfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

/* /proc/stat of a 4096-core machine is about 600 KiB; nothing we read
 * should come near this. */
#define PROCFILE_MAX (4u << 20)

int smr_procfile_open(smr_procfile *f, const char *path) {
  f->path = path;
  f->buf = NULL;
  f->cap = 0;
  f->fd = open(path, O_RDONLY | O_CLOEXEC);
  return f->fd < 0 ? -1 : 0;
}

/* Reads from offset 0 until end of file, growing the buffer as needed. */
const char *smr_procfile_read(smr_procfile *f) {
  if (f->fd < 0)
    return NULL;
  size_t len = 0;
  for (;;) {
    if (len + 1 >= f->cap) {
      size_t cap = f->cap ? f->cap * 2 : 8192;
      if (cap > PROCFILE_MAX)
        return NULL;
      char *nb = realloc(f->buf, cap);
      if (!nb)
        return NULL;
      f->buf = nb;
      f->cap = cap;
    }
    ssize_t n = pread(f->fd, f->buf + len, f->cap - 1 - len, (off_t)len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return NULL;
    if (n == 0)
      break;
    len += (size_t)n;
  }
  f->buf[len] = '\0';
  return f->buf;
}

void smr_procfile_close(smr_procfile *f) {
  if (f->fd >= 0)
    close(f->fd);
  free(f->buf);
  f->fd = -1;
  f->buf = NULL;
  f->cap = 0;
}
