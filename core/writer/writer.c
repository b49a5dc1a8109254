/* writer.c - writes smdebug-compatible trials (docs/formats.md).
 *
 * One writer per worker.  Within a step, records are appended to
 * events/<S>/<S>_<W>.tfevents.tmp as tensors arrive (only the tensor being
 * added is in memory) while the index entries are collected; closing the
 * step renames the event file into place and then writes the index file the
 * same way, which is the order smdebug uses (docs/formats.md#write-order), so a
 * reader that sees an index also sees its event file.
 *
 * A tensor's bytes are not copied on their way to the file: the encoder
 * hands the record over in pieces (event_encode.h), the small ones gather in
 * a buffer and a large one (a tensor's content) goes to writev() beside it
 * straight from the caller's memory; the CRC, when computed, runs over the
 * pieces.  The file's bytes are the same as encoding the record whole.
 * A caller that keeps its tensors' memory until it says so (the PyTorch
 * hook's write queue, smr_writer_hold_pieces) lets the large pieces wait
 * beside the small ones, so that a step's records go to the file in one
 * writev() rather than one per large tensor. */
#include "writer/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "format/record.h"
#include "writer/event_encode.h"

/* Pieces held at once by smr_writer_hold_pieces (IOV_MAX is 1024). */
#define HELD_MAX 256

struct smr_writer {
  char *dir;    /* trial directory */
  char *worker; /* worker name as given */
  int real_crc;
  /* the open step */
  bool in_step;
  int64_t step, mode_step;
  int mode;
  int ev;       /* event .tmp file; -1 until the step's first tensor */
  uint8_t *out; /* what is not yet written to it (OUT_CAP bytes) */
  size_t out_len;
  /* smr_writer_hold_pieces: the pieces waiting to be written, in order:
   * parts of `out` (up to out_len; out[seg..out_len) not listed yet) and
   * large pieces in the caller's memory */
  bool hold;
  struct iovec held[HELD_MAX];
  int n_held;
  size_t seg;
  uint64_t event_writes; /* write calls made to event files */
  char *ev_rel;          /* its final path relative to the trial directory */
  bool ev_error;         /* a write to it failed: the step is discarded */
  int ev_errno;          /* why */
  int64_t offset;
  smr_index_tensor *tensors;
  size_t n_tensors, cap_tensors;
  smr_index_shape *shapes;
  size_t n_shapes, cap_shapes;
};

/* ---- files ---- */

static char *full_path(const smr_writer *w, const char *rel) {
  return smr_xasprintf("%s/%s", w->dir, rel);
}

static int io_error(smr_error *err, const char *rel, const char *what) {
  return smr_error_set(err, SMR_ERR_IO, rel, -1, "cannot %s: %s", what,
                       strerror(errno));
}

/* mkdir -p of the directory part of `path` (everything before the last
 * '/'), or of `path` itself when `whole`. */
static int make_dirs(const char *path, bool whole, smr_error *err) {
  char *p = smr_xstrdup(path);
  char *end = whole ? p + strlen(p) : strrchr(p, '/');
  int rc = SMR_OK;
  if (!end || end == p) { /* no directory part, or the root */
    free(p);
    return SMR_OK;
  }
  *end = '\0';
  /* the common case, a step's folder under folders that exist: one
   * mkdir (and a stat when it is there already), not one per component */
  struct stat st0;
  if (mkdir(p, 0777) == 0 ||
      (errno == EEXIST && stat(p, &st0) == 0 && S_ISDIR(st0.st_mode))) {
    free(p);
    return SMR_OK;
  }
  for (char *s = p + 1;; s++) {
    bool last = *s == '\0';
    if (*s != '/' && !last)
      continue;
    *s = '\0';
    struct stat st;
    if (p[0] && mkdir(p, 0777) != 0 && errno != EEXIST)
      rc = io_error(err, p, "create directory");
    else if (p[0] && (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)))
      rc = smr_error_set(err, SMR_ERR_IO, p, -1, "not a directory");
    if (rc || last)
      break;
    *s = '/';
  }
  free(p);
  return rc;
}

/* Write all of `len` bytes to `fd`. */
static bool write_all(int fd, const void *data, size_t len) {
  const uint8_t *p = data;
  while (len > 0) {
    ssize_t k = write(fd, p, len);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0) {
      if (k == 0)
        errno = EIO;
      return false;
    }
    p += k;
    len -= (size_t)k;
  }
  return true;
}

/* Close `fd`, the <path>.tmp file just written (`wrote`: all its writes
 * succeeded, else `write_errno` says why the last one failed), and rename it
 * to <path>; on any failure the .tmp file is removed.  `rel` names the file
 * in errors.  Every file is finished this way. */
static int finish_file(int fd, bool wrote, int write_errno, const char *tmp,
                       const char *path, const char *rel, smr_error *err) {
  bool closed = close(fd) == 0;
  int rc = SMR_OK;
  if (!wrote || !closed) {
    if (!wrote)
      errno = write_errno;
    rc = io_error(err, rel, "write file");
  } else if (rename(tmp, path) != 0)
    rc = io_error(err, rel, "rename the .tmp file");
  if (rc)
    unlink(tmp);
  return rc;
}

/* Write `len` bytes to <dir>/<rel>.tmp and rename it to <dir>/<rel>.  The
 * folder is made only when the file cannot be created without it: an index
 * file's folder (index/000000000/) holds a thousand steps' files, and
 * asking for it at every step cost a mkdir and a stat. */
static int write_atomic(const smr_writer *w, const char *rel, const void *data,
                        size_t len, smr_error *err) {
  char *path = full_path(w, rel);
  char *tmp = smr_xasprintf("%s.tmp", path);
  int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  int rc = SMR_OK;
  int fd = open(tmp, flags, 0666);
  if (fd < 0 && errno == ENOENT && (rc = make_dirs(path, false, err)) == 0)
    fd = open(tmp, flags, 0666);
  if (!rc && fd < 0)
    rc = io_error(err, rel, "create file");
  if (fd >= 0) {
    bool wrote = write_all(fd, data, len);
    rc = finish_file(fd, wrote, errno, tmp, path, rel, err);
  }
  free(tmp);
  free(path);
  return rc;
}

/* ---- open / close ---- */

/* A worker name must come back unchanged from its file names: device names
 * ('/' first) are serialized and restored; any other '/' or ':' is not. */
static bool worker_storable(const char *worker) {
  if (!worker || !worker[0] || strcmp(worker, ".") == 0 ||
      strcmp(worker, "..") == 0)
    return false;
  if (worker[0] == '/')
    return strchr(worker, '_') == NULL && strchr(worker, '-') == NULL;
  return strpbrk(worker, "/:\\") == NULL;
}

int smr_writer_open(const char *trial_dir, const char *worker, int real_crc,
                    smr_writer **out, smr_error *err) {
  *out = NULL;
  if (!trial_dir || !trial_dir[0])
    return smr_error_set(err, SMR_ERR_USAGE, NULL, -1, "no trial directory");
  if (!worker_storable(worker))
    return smr_error_set(err, SMR_ERR_USAGE, NULL, -1,
                         "worker name '%.200s' cannot be stored in file names",
                         worker ? worker : "");
  int rc = make_dirs(trial_dir, true, err);
  if (rc)
    return rc;
  smr_writer *w = smr_xcalloc(1, sizeof *w);
  w->dir = smr_xstrdup(trial_dir);
  w->worker = smr_xstrdup(worker);
  w->real_crc = real_crc;
  w->ev = -1;
  *out = w;
  return SMR_OK;
}

static void step_reset(smr_writer *w) {
  for (size_t i = 0; i < w->n_tensors; i++)
    free(w->tensors[i].name);
  for (size_t i = 0; i < w->n_shapes; i++) {
    free(w->shapes[i].name);
    free(w->shapes[i].originalname);
  }
  w->n_tensors = w->n_shapes = 0;
  free(w->ev_rel);
  w->ev_rel = NULL;
  w->ev = -1;
  w->out_len = 0;
  w->n_held = 0;
  w->seg = 0;
  w->ev_error = false;
  w->ev_errno = 0;
  w->offset = 0;
  w->in_step = false;
}

int smr_writer_close(smr_writer *w, smr_error *err) {
  if (!w)
    return SMR_OK;
  int rc = w->in_step ? smr_writer_step_end(w, err) : SMR_OK;
  free(w->tensors);
  free(w->shapes);
  free(w->out);
  free(w->dir);
  free(w->worker);
  free(w);
  return rc;
}

/* ---- steps ---- */

int smr_writer_step_begin(smr_writer *w, int64_t step, int mode,
                          int64_t mode_step, smr_error *err) {
  if (step < 0 || mode_step < 0 || mode < SMR_MODE_TRAIN ||
      mode > SMR_MODE_GLOBAL)
    return smr_error_set(err, SMR_ERR_USAGE, NULL, -1,
                         "invalid step %lld, mode %d, mode step %lld",
                         (long long)step, mode, (long long)mode_step);
  /* as the hooks do: starting a step closes the previous one */
  if (w->in_step) {
    int rc = smr_writer_step_end(w, err);
    if (rc)
      return rc;
  }
  w->in_step = true;
  w->step = step;
  w->mode = mode;
  w->mode_step = mode_step;
  return SMR_OK;
}

/* ---- the event file's output ---- */

/* Small pieces gather up to this many bytes; a piece at least this large
 * is written from where it is. */
#define OUT_CAP 65536

/* At most this many bytes a write call.  A buffered write of 2 MiB or
 * more at a 2 MiB boundary lets the kernel put it in 2 MiB page-cache
 * folios; on a virtual machine whose free memory is reported to its host
 * in blocks of that size (virtio-balloon's free page reporting, order 9),
 * those folios come from blocks the host has taken back, and each of
 * their pages then faults in the host: writing 3.2 MB to a new file in one
 * writev() cost 5.8 ms of CPU there, in writes of up to 1 MiB 1.4 ms
 * (bench/README.md section 9). */
#define WRITE_MAX (1u << 20)

/* Write the `n` pieces of `iov` (changed on the way) to the event file, in
 * writev() calls of up to WRITE_MAX bytes. */
static bool write_pieces(smr_writer *w, struct iovec *iov, int n) {
  int i = 0;
  while (i < n) {
    if (iov[i].iov_len == 0) {
      i++;
      continue;
    }
    struct iovec part[HELD_MAX]; /* the pieces within WRITE_MAX bytes */
    int m = 0;
    size_t total = 0;
    for (int j = i; j < n && total < WRITE_MAX; j++) {
      size_t len = iov[j].iov_len;
      if (len > WRITE_MAX - total)
        len = WRITE_MAX - total;
      part[m++] = (struct iovec){iov[j].iov_base, len};
      total += len;
    }
    ssize_t k = writev(w->ev, part, m);
    w->event_writes++;
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0) {
      if (k == 0)
        errno = EIO;
      return false;
    }
    size_t done = (size_t)k; /* whole entries, then part of one */
    for (; i < n && done >= iov[i].iov_len; i++)
      done -= iov[i].iov_len;
    if (i < n) {
      iov[i].iov_base = (uint8_t *)iov[i].iov_base + done;
      iov[i].iov_len -= done;
    }
  }
  return true;
}

/* The bytes of `out` not yet among the held pieces join them. */
static void hold_out(smr_writer *w) {
  if (w->out_len > w->seg)
    w->held[w->n_held++] = (struct iovec){w->out + w->seg, w->out_len - w->seg};
  w->seg = w->out_len;
}

/* Write the held pieces, the buffered bytes and then `len` bytes at `data`
 * (may be 0); nothing is held afterwards, whether it succeeded or not. */
static bool out_write(smr_writer *w, const uint8_t *data, size_t len) {
  hold_out(w);
  if (len)
    w->held[w->n_held++] = (struct iovec){(void *)data, len};
  bool ok = write_pieces(w, w->held, w->n_held);
  w->n_held = 0;
  w->seg = w->out_len = 0;
  return ok;
}

/* Append `len` bytes to the event file (buffered when small; when large,
 * written at once, or held with what comes before it). */
static void out_put(smr_writer *w, const uint8_t *data, size_t len) {
  if (w->ev_error)
    return;
  bool ok = true;
  if (len >= OUT_CAP && w->hold) {
    /* room for out's bytes, this piece and out's bytes after it (the
     * flush's hold_out) */
    if (w->n_held + 3 > HELD_MAX)
      ok = out_write(w, NULL, 0);
    if (ok) {
      hold_out(w);
      w->held[w->n_held++] = (struct iovec){(void *)data, len};
    }
  } else if (len >= OUT_CAP)
    ok = out_write(w, data, len);
  else {
    if (w->out_len + len > OUT_CAP)
      ok = out_write(w, NULL, 0);
    if (ok) {
      memcpy(w->out + w->out_len, data, len);
      w->out_len += len;
    }
  }
  if (!ok) {
    w->ev_error = true;
    w->ev_errno = errno;
  }
}

/* Close the event file and move it into place. */
static int finish_event_file(smr_writer *w, smr_error *err) {
  char *path = full_path(w, w->ev_rel);
  char *tmp = smr_xasprintf("%s.tmp", path);
  int rc;
  if (w->ev_error) { /* reported by the tensor call that failed */
    close(w->ev);
    unlink(tmp);
    rc = smr_error_set(err, SMR_ERR_IO, w->ev_rel, -1,
                       "step %lld discarded after a failed write",
                       (long long)w->step);
  } else {
    bool flushed = (w->out_len == 0 && w->n_held == 0) || out_write(w, NULL, 0);
    rc = finish_file(w->ev, flushed, errno, tmp, path, w->ev_rel, err);
  }
  w->ev = -1;
  free(tmp);
  free(path);
  return rc;
}

static int write_index(smr_writer *w, smr_error *err) {
  smr_index ix = {.mode = w->mode,
                  .mode_step = w->mode_step,
                  .event_file_name = w->ev_rel,
                  .n_tensors = w->n_tensors,
                  .n_shapes = w->n_shapes,
                  .tensors = w->tensors,
                  .shapes = w->shapes};
  char *json = smr_index_to_json(&ix);
  char *rel = smr_index_file_relpath(w->step, w->worker);
  int rc = write_atomic(w, rel, json, strlen(json), err);
  free(rel);
  free(json);
  return rc;
}

int smr_writer_step_end(smr_writer *w, smr_error *err) {
  if (!w->in_step)
    return smr_error_set(err, SMR_ERR_USAGE, NULL, -1, "no step is open");
  int rc = w->ev >= 0 ? finish_event_file(w, err) : SMR_OK;
  /* nothing saved: no files at all (docs/formats.md#the-trial-directory) */
  if (!rc && (w->n_tensors || w->n_shapes))
    rc = write_index(w, err);
  step_reset(w);
  return rc;
}

/* ---- tensors ---- */

static int need_step(const smr_writer *w, const char *name, smr_error *err) {
  if (!w->in_step)
    return smr_error_set(err, SMR_ERR_USAGE, NULL, -1,
                         "tensor '%.200s' added outside a step",
                         name ? name : "");
  if (!name || !name[0])
    return smr_error_set(err, SMR_ERR_USAGE, NULL, -1, "empty tensor name");
  return SMR_OK;
}

static int open_event_file(smr_writer *w, smr_error *err) {
  w->ev_rel = smr_event_file_relpath(w->step, w->worker);
  char *path = full_path(w, w->ev_rel);
  char *tmp = smr_xasprintf("%s.tmp", path);
  int rc = make_dirs(path, false, err);
  if (!rc &&
      (w->ev = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)) < 0)
    rc = io_error(err, w->ev_rel, "create file");
  if (!rc && !w->out)
    w->out = smr_xmalloc(OUT_CAP);
  free(tmp);
  free(path);
  if (rc) {
    free(w->ev_rel);
    w->ev_rel = NULL;
  }
  return rc;
}

static void add_index_tensor(smr_writer *w, const char *name, int64_t start,
                             int64_t length) {
  if (w->n_tensors == w->cap_tensors) {
    w->cap_tensors = w->cap_tensors ? 2 * w->cap_tensors : 16;
    w->tensors = smr_xrealloc(w->tensors, w->cap_tensors * sizeof *w->tensors);
  }
  smr_index_tensor *t = &w->tensors[w->n_tensors++];
  t->name = smr_xstrdup(name);
  t->start_idx = start;
  t->length = length;
  t->problem = NULL;
}

/* The record being written: header, the encoder's pieces, footer. */
typedef struct record_sink {
  smr_event_sink base; /* first: the encoder passes &base */
  smr_writer *w;
  size_t len;   /* payload length */
  uint32_t crc; /* CRC-32C of the pieces so far */
} record_sink;

static int record_begin(smr_event_sink *s, size_t len, smr_error *err) {
  record_sink *r = (record_sink *)s;
  smr_writer *w = r->w;
  if (w->ev_error)
    return smr_error_set(err, SMR_ERR_IO, w->ev_rel, w->offset,
                         "an earlier write to this file failed");
  if (w->ev < 0) {
    int rc = open_event_file(w, err);
    if (rc)
      return rc;
  }
  uint8_t hdr[SMR_RECORD_HEADER];
  smr_record_header(hdr, len);
  out_put(w, hdr, sizeof hdr);
  r->len = len;
  return SMR_OK;
}

static void record_piece(smr_event_sink *s, const uint8_t *data, size_t len) {
  record_sink *r = (record_sink *)s;
  if (r->w->real_crc)
    r->crc = smr_crc32c_extend(r->crc, data, len);
  out_put(r->w, data, len);
}

/* Encode `t` (step and mode filled in here) as a TFRecord appended to the
 * step's event file, and index it. */
static int write_tensor(smr_writer *w, const char *name, smr_tensor *t,
                        smr_error *err) {
  t->step = w->step;
  t->mode = w->mode;
  t->mode_step = w->mode_step;
  record_sink r = {.base = {.begin = record_begin, .piece = record_piece},
                   .w = w};
  int rc = smr_event_encode_to(t, name, &r.base, err);
  if (rc)
    return rc;
  uint8_t ftr[SMR_RECORD_FOOTER];
  smr_put_le32(ftr, w->real_crc ? smr_crc_mask(r.crc) : SMR_SMDEBUG_DATA_CRC);
  out_put(w, ftr, sizeof ftr);
  if (w->ev_error) {
    errno = w->ev_errno;
    return io_error(err, w->ev_rel, "write file");
  }
  int64_t length = (int64_t)r.len + SMR_RECORD_OVERHEAD;
  add_index_tensor(w, name, w->offset, length);
  w->offset += length;
  return SMR_OK;
}

int smr_writer_tensor(smr_writer *w, const char *name, int dtype, int ndim,
                      const int64_t *shape, const void *data, size_t nbytes,
                      double wall_time, smr_error *err) {
  int rc = need_step(w, name, err);
  if (rc)
    return rc;
  if (ndim < 0 || ndim > SMR_MAX_DIMS || (ndim > 0 && !shape) ||
      dtype == SMR_DT_STRING)
    return smr_error_set(err, SMR_ERR_USAGE, NULL, -1,
                         "tensor '%.200s': invalid dtype %d or %d dimensions",
                         name, dtype, ndim);
  smr_tensor t = {.dtype = dtype,
                  .stored_dtype = dtype,
                  .ndim = ndim,
                  .data = data,
                  .nbytes = nbytes,
                  .wall_time = wall_time};
  t.count = 1;
  for (int i = 0; i < ndim; i++) {
    t.shape[i] = shape[i];
    if (shape[i] < 0 || __builtin_mul_overflow(t.count, shape[i], &t.count))
      return smr_error_set(err, SMR_ERR_USAGE, NULL, -1,
                           "tensor '%.200s': invalid shape", name);
  }
  return write_tensor(w, name, &t, err);
}

int smr_writer_strings(smr_writer *w, const char *name, size_t n,
                       const char *const *strs, double wall_time,
                       smr_error *err) {
  int rc = need_step(w, name, err);
  if (rc)
    return rc;
  if (n > (size_t)INT64_MAX / sizeof(size_t) || (n && !strs))
    return smr_error_set(err, SMR_ERR_USAGE, NULL, -1,
                         "tensor '%.200s': invalid string list", name);
  size_t *lens = smr_xcalloc(n, sizeof *lens);
  for (size_t i = 0; i < n; i++)
    lens[i] = strs[i] ? strlen(strs[i]) : 0;
  smr_tensor t = {.dtype = SMR_DT_STRING,
                  .stored_dtype = SMR_DT_INVALID,
                  .ndim = 1,
                  .shape = {(int64_t)n},
                  .count = (int64_t)n,
                  .strings = (const uint8_t **)strs,
                  .string_lens = lens,
                  .wall_time = wall_time};
  for (size_t i = 0; i < n; i++)
    if (!strs[i])
      rc = smr_error_set(err, SMR_ERR_USAGE, NULL, -1,
                         "tensor '%.200s': string %zu is NULL", name, i);
  if (!rc)
    rc = write_tensor(w, name, &t, err);
  free(lens);
  return rc;
}

int smr_writer_shape(smr_writer *w, const char *name, int ndim,
                     const int64_t *shape, smr_error *err) {
  int rc = need_step(w, name, err);
  if (rc)
    return rc;
  if (ndim < 0 || ndim > SMR_MAX_DIMS || (ndim > 0 && !shape))
    return smr_error_set(err, SMR_ERR_USAGE, NULL, -1,
                         "shape of '%.200s': %d dimensions", name, ndim);
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0)
      return smr_error_set(err, SMR_ERR_USAGE, NULL, -1,
                           "shape of '%.200s': negative dimension", name);
  if (w->n_shapes == w->cap_shapes) {
    w->cap_shapes = w->cap_shapes ? 2 * w->cap_shapes : 16;
    w->shapes = smr_xrealloc(w->shapes, w->cap_shapes * sizeof *w->shapes);
  }
  smr_index_shape *s = &w->shapes[w->n_shapes++];
  memset(s, 0, sizeof *s);
  s->name = smr_xstrdup(name);
  s->originalname = smr_xstrdup(name);
  s->ndim = ndim;
  if (ndim > 0)
    memcpy(s->shape, shape, (size_t)ndim * sizeof *shape);
  return SMR_OK;
}

/* ---- held pieces ---- */

void smr_writer_hold_pieces(smr_writer *w, int on) {
  if (!on && w->n_held && !w->ev_error && !out_write(w, NULL, 0)) {
    w->ev_error = true; /* reported by the step's end */
    w->ev_errno = errno;
  }
  w->hold = on != 0;
}

int smr_writer_flush(smr_writer *w, smr_error *err) {
  if (w->ev < 0 || w->n_held == 0)
    return SMR_OK;
  if (w->ev_error)
    return smr_error_set(err, SMR_ERR_IO, w->ev_rel, w->offset,
                         "an earlier write to this file failed");
  if (!out_write(w, NULL, 0)) {
    w->ev_error = true;
    w->ev_errno = errno;
    return io_error(err, w->ev_rel, "write file");
  }
  return SMR_OK;
}

uint64_t smr_writer_event_writes(const smr_writer *w) {
  return w->event_writes;
}

/* ---- other files ---- */

int smr_writer_collections(smr_writer *w, const smr_collections *c,
                           smr_error *err) {
  char *json = smr_collections_to_json(c);
  char *rel = smr_collections_file_relpath(w->worker);
  int rc = write_atomic(w, rel, json, strlen(json), err);
  free(rel);
  free(json);
  return rc;
}

int smr_writer_collections_json(smr_writer *w, const char *json, size_t len,
                                smr_error *err) {
  char *rel = smr_collections_file_relpath(w->worker);
  smr_collections c = {0};
  int rc = smr_collections_parse(json, len, rel, &c, err);
  smr_collections_free(&c);
  if (rc == SMR_OK)
    rc = write_atomic(w, rel, json, len, err);
  free(rel);
  return rc;
}

int smr_write_end_marker(const char *trial_dir, smr_error *err) {
  if (!trial_dir || !trial_dir[0])
    return smr_error_set(err, SMR_ERR_USAGE, NULL, -1, "no trial directory");
  int rc = make_dirs(trial_dir, true, err);
  if (rc)
    return rc;
  smr_writer w = {.dir = (char *)trial_dir};
  return write_atomic(&w, "training_job_end.ts", "", 0, err);
}
