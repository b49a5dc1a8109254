/* common.c - errors, allocation helpers, buffers, file reading, number
 * formatting. */
#include "base/common.h"
#include "smrules/json.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *smr_status_name(int status) {
  switch (status) {
  case SMR_OK:
    return "OK";
  case SMR_ERR_IO:
    return "IOError";
  case SMR_ERR_FORMAT:
    return "FormatError";
  case SMR_ERR_NOMEM:
    return "OutOfMemory";
  case SMR_ERR_USAGE:
    return "UsageError";
  case SMR_ERR_INCOMPLETE:
    return "Incomplete";
  case SMR_ERR_SQL:
    return "CatalogError";
  case SMR_STEP_UNAVAILABLE:
    return "StepUnavailable";
  case SMR_STEP_NOT_YET:
    return "StepNotYetAvailable";
  case SMR_TENSOR_UNAVAILABLE_FOR_STEP:
    return "TensorUnavailableForStep";
  case SMR_TENSOR_UNAVAILABLE:
    return "TensorUnavailable";
  case SMR_NO_MORE_DATA:
    return "NoMoreData";
  case SMR_INVALID_WORKER:
    return "InvalidWorker";
  default:
    return "Error";
  }
}

void smr_error_clear(smr_error *e) {
  if (!e)
    return;
  e->status = SMR_OK;
  e->offset = -1;
  e->file[0] = '\0';
  e->msg[0] = '\0';
}

int smr_error_set(smr_error *e, int status, const char *file, int64_t offset,
                  const char *fmt, ...) {
  if (!e)
    return status;
  e->status = status;
  e->offset = offset;
  snprintf(e->file, sizeof e->file, "%s", file ? file : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  return status;
}

void smr_error_format(const smr_error *e, char *buf, size_t n) {
  if (e->file[0] && e->offset >= 0)
    snprintf(buf, n, "%s: offset %lld: %s", e->file, (long long)e->offset,
             e->msg);
  else if (e->file[0])
    snprintf(buf, n, "%s: %s", e->file, e->msg);
  else
    snprintf(buf, n, "%s", e->msg);
}

static void oom(size_t n) {
  fprintf(stderr, "smrules: out of memory allocating %zu bytes\n", n);
  exit(70);
}

void *smr_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p)
    oom(n);
  return p;
}

void *smr_xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p)
    oom(n * size);
  return p;
}

void *smr_xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q)
    oom(n);
  return q;
}

char *smr_xstrdup(const char *s) {
  return smr_xstrndup(s, strlen(s));
}

char *smr_xstrndup(const char *s, size_t n) {
  char *p = smr_xmalloc(n + 1);
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

char *smr_xasprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *p = smr_xmalloc((size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}

void smr_buf_append(smr_buf *b, const void *p, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1)
      cap *= 2;
    b->data = smr_xrealloc(b->data, cap);
    b->cap = cap;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void smr_buf_puts(smr_buf *b, const char *s) {
  smr_buf_append(b, s, strlen(s));
}

void smr_buf_printf(smr_buf *b, const char *fmt, ...) {
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n < sizeof small) {
    smr_buf_append(b, small, (size_t)n);
    return;
  }
  char *big = smr_xmalloc((size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  smr_buf_append(b, big, (size_t)n);
  free(big);
}

void smr_buf_free(smr_buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

int smr_read_file(const char *path, size_t max, char **out, size_t *len,
                  smr_error *err) {
  *out = NULL;
  *len = 0;
  /* O_NONBLOCK: a FIFO in place of the file must not block the open (it
   * is then refused as not a regular file) */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return smr_error_set(err, SMR_ERR_IO, path, -1, "cannot open: %s",
                         strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return smr_error_set(err, SMR_ERR_IO, path, -1, "not a regular file");
  }
  if ((uint64_t)st.st_size > max) {
    close(fd);
    return smr_error_set(err, SMR_ERR_FORMAT, path, -1,
                         "file is %lld bytes, more than the %zu allowed",
                         (long long)st.st_size, max);
  }
  size_t cap = (size_t)st.st_size;
  char *buf = malloc(cap + 1);
  if (!buf) {
    close(fd);
    return smr_error_set(err, SMR_ERR_NOMEM, path, -1, "out of memory");
  }
  size_t got = 0;
  while (got < cap) {
    ssize_t r = read(fd, buf + got, cap - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      int e = errno;
      free(buf);
      close(fd);
      return smr_error_set(err, SMR_ERR_IO, path, (int64_t)got,
                           "read failed: %s", strerror(e));
    }
    if (r == 0)
      break; /* file shrank: use what we have */
    got += (size_t)r;
  }
  close(fd);
  buf[got] = '\0';
  *out = buf;
  *len = got;
  return SMR_OK;
}

/* Python's repr of a float: the shortest digits that read back to the
 * same double, in fixed notation when the decimal exponent is in
 * [-4, 16) ("10.0", "0.0001", "1234.5") and scientific otherwise
 * ("1e+16", "1e-05", "1.5e-07"). */
void smr_fmt_double(double v, char *buf, size_t n) {
  smr_json_fmt_double(v, buf, n); /* one formatter: the JSON model's */
}

void smr_strv_take(smr_strv *s, char *str) {
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 8;
    s->v = smr_xrealloc(s->v, s->cap * sizeof *s->v);
  }
  s->v[s->n++] = str;
}

void smr_strv_push(smr_strv *s, const char *str) {
  smr_strv_take(s, smr_xstrdup(str));
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

void smr_strv_sort_unique(smr_strv *s) {
  if (s->n < 2)
    return;
  qsort(s->v, s->n, sizeof *s->v, cmp_str);
  size_t out = 1;
  for (size_t i = 1; i < s->n; i++) {
    if (strcmp(s->v[i], s->v[out - 1]) == 0)
      free(s->v[i]);
    else
      s->v[out++] = s->v[i];
  }
  s->n = out;
}

bool smr_strv_contains(const smr_strv *s, const char *str) {
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->v[i], str) == 0)
      return true;
  return false;
}

void smr_strv_free(smr_strv *s) {
  for (size_t i = 0; i < s->n; i++)
    free(s->v[i]);
  free(s->v);
  s->v = NULL;
  s->n = s->cap = 0;
}

void smr_i64v_push(smr_i64v *a, int64_t x) {
  if (a->n == a->cap) {
    a->cap = a->cap ? a->cap * 2 : 16;
    a->v = smr_xrealloc(a->v, a->cap * sizeof *a->v);
  }
  a->v[a->n++] = x;
}

void smr_i64v_free(smr_i64v *a) {
  free(a->v);
  a->v = NULL;
  a->n = a->cap = 0;
}
