/* profiler_gz.c - TF profiler trace.json.gz files inflated in memory.  The
 * reader fetches whole files through the source interface (local disk or
 * S3), so the bytes are already in memory: zlib's inflate reads them there
 * with the same outcome gzread gives for the file on disk (the reference
 * opens these files with Python's gzip module, which behaves alike for
 * everything smdebug writes). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "profiler/profiler.h"

static bool gzip_magic(const unsigned char *p, size_t n) {
  return n >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}

static int too_big(const char *file, size_t max, smr_error *err) {
  return smr_error_set(err, SMR_ERR_FORMAT, file, -1,
                       "expected at most %zu bytes of decompressed data", max);
}

/* Make room for more output: double, but never beyond max + 1 bytes (one
 * more than allowed, to notice data that goes past the limit). */
static int grow(char **buf, size_t *cap, size_t in_len, size_t max,
                const char *file, smr_error *err) {
  if (*cap > max)
    return too_big(file, max, err);
  size_t want = *cap ? *cap * 2 : (in_len < 16384 ? 65536 : in_len * 4);
  if (want < *cap || want > max)
    want = max + 1;
  char *p = realloc(*buf, want + 1); /* + 1: the terminating NUL */
  if (!p)
    return smr_error_set(err, SMR_ERR_NOMEM, file, -1,
                         "out of memory for %zu bytes of decompressed data",
                         want);
  *buf = p;
  *cap = want;
  return SMR_OK;
}

/* Data without the gzip magic is read as it is (gzread's transparent
 * mode): copy it. */
static int copy_plain(const char *data, size_t len, size_t max,
                      const char *file, char **out, size_t *out_len,
                      smr_error *err) {
  if (len > max)
    return too_big(file, max, err);
  char *p = malloc(len + 1);
  if (!p)
    return smr_error_set(err, SMR_ERR_NOMEM, file, -1, "out of memory");
  memcpy(p, data, len);
  p[len] = '\0';
  *out = p;
  *out_len = len;
  return SMR_OK;
}

int smr_profiler_gunzip(const char *data, size_t len, size_t max,
                        const char *file, char **out, size_t *out_len,
                        smr_error *err) {
  *out = NULL;
  *out_len = 0;
  const unsigned char *in = (const unsigned char *)data;
  if (!gzip_magic(in, len))
    return copy_plain(data, len, max, file, out, out_len, err);
  z_stream z;
  memset(&z, 0, sizeof z);
  /* 16 + MAX_WBITS: gzip members only (a zlib stream is not gzip data,
   * and gzread would not inflate it either) */
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
    return smr_error_set(err, SMR_ERR_NOMEM, file, -1,
                         "cannot start decompression: %s",
                         z.msg ? z.msg : "out of memory");
  char *buf = NULL;
  size_t cap = 0, have = 0, pos = 0;
  int rc = SMR_OK;
  for (;;) {
    if (have == cap && (rc = grow(&buf, &cap, len, max, file, err)) != SMR_OK)
      break;
    size_t in_left = len - pos, out_left = cap - have;
    z.next_in = (Bytef *)(in + pos);
    z.avail_in = in_left > UINT_MAX ? UINT_MAX : (uInt)in_left;
    z.next_out = (Bytef *)(buf + have);
    z.avail_out = out_left > UINT_MAX ? UINT_MAX : (uInt)out_left;
    uInt in0 = z.avail_in, out0 = z.avail_out;
    int zr = inflate(&z, Z_NO_FLUSH);
    pos += in0 - z.avail_in;
    have += out0 - z.avail_out;
    if (zr == Z_STREAM_END) {
      /* Another member may follow (concatenated gzip files read as one,
       * like gzread); anything else after a member is ignored. */
      if (!gzip_magic(in + pos, len - pos))
        break;
      inflateReset(&z);
      continue;
    }
    if (zr == Z_OK || zr == Z_BUF_ERROR) {
      /* A stream cut short (a file still being written) gives what it
       * holds, as gzread does; the trace parser then finds the JSON
       * incomplete and ignores the file until it has grown. */
      if (pos == len && have < cap)
        break;
      continue; /* more output space or more input to go */
    }
    if (zr == Z_MEM_ERROR)
      rc = smr_error_set(err, SMR_ERR_NOMEM, file, -1,
                         "out of memory while decompressing");
    else
      rc = smr_error_set(err, SMR_ERR_FORMAT, file, (int64_t)pos,
                         "expected gzip data: %s at compressed byte %zu",
                         z.msg ? z.msg : "compressed data error", pos);
    break;
  }
  inflateEnd(&z);
  if (rc == SMR_OK && have > max)
    rc = too_big(file, max, err);
  if (rc != SMR_OK) {
    free(buf);
    return rc;
  }
  buf[have] = '\0';
  *out = buf;
  *out_len = have;
  return SMR_OK;
}
