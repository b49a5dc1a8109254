/* test_value_pieces.c - the SDK's value_pieces (core/host/host_api.c,
 * data.c, trial_read.c) against value on trials written here: for every
 * fixed-size dtype, the pieces cover the value exactly, in order, each the
 * value's elements at its offset, *out the value's dtype, shape, count and
 * where it was saved; a callback that stops is handed no more pieces and
 * reads no more of the record; a value that is not there gets value()'s
 * status; what it cannot read in pieces (a small record, a string tensor,
 * real payload checksums, a damaged record, a file cut short while the
 * pieces are read, a TensorBoard trial) is answered SMRULES_ERR, and value()
 * then gives the status it always gave. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/dtype.h"
#include "format/record.h"
#include "host/rulectx.h"
#include "smrules/smrules.h"
#include "source/source.h"
#include "trial/trial.h"
#include "unit.h"
#include "writer/writer.h"

#define BIG 40000  /* elements: records of 40-640 KB */
#define PIECE 7000 /* elements a piece: not a divisor of BIG */

static const int dtypes[] = {
    SMR_DT_FLOAT, SMR_DT_DOUBLE, SMR_DT_INT32,    SMR_DT_UINT8,
    SMR_DT_INT64, SMR_DT_BOOL,   SMR_DT_HALF,     SMR_DT_COMPLEX64,
    SMR_DT_INT16, SMR_DT_UINT64, SMR_DT_BFLOAT16, SMR_DT_COMPLEX128,
};
#define NDT (sizeof dtypes / sizeof dtypes[0])

static void write_trial(const char *dir, int real_crc) {
  smr_writer *w = NULL;
  smr_error err;
  CHECK_EQ_INT(smr_writer_open(dir, "worker_0", real_crc, &w, &err), SMR_OK);
  uint8_t *data = malloc(BIG * 16);
  for (int64_t step = 0; step < 3 && w; step++) {
    CHECK_EQ_INT(smr_writer_step_begin(w, step, SMR_MODE_TRAIN, step, &err),
                 SMR_OK);
    for (size_t i = 0; i < BIG * 16; i++)
      data[i] = (uint8_t)(i * 131 + (size_t)step * 7 + (i >> 9));
    for (size_t k = 0; k < NDT; k++) {
      size_t size = smr_dtype_size(dtypes[k]);
      for (size_t i = 0; dtypes[k] == SMR_DT_BOOL && i < BIG; i++)
        data[i] = (uint8_t)((i + (size_t)step) % 3 == 0);
      char name[64];
      int64_t shape[2] = {BIG / 100, 100};
      snprintf(name, sizeof name, "big/%zu", k);
      CHECK_EQ_INT(smr_writer_tensor(w, name, dtypes[k], 2, shape, data,
                                     BIG * size, 1.5, &err),
                   SMR_OK);
    }
    int64_t small = 10;
    CHECK_EQ_INT(smr_writer_tensor(w, "small", SMR_DT_FLOAT, 1, &small, data,
                                   10 * 4, 1.5, &err),
                 SMR_OK);
    const char *strs[BIG / 8];
    for (size_t i = 0; i < BIG / 8; i++)
      strs[i] = "a string of a few bytes";
    CHECK_EQ_INT(smr_writer_strings(w, "strings", BIG / 8, strs, 1.5, &err),
                 SMR_OK);
    /* the last record of each step's file: a large float */
    int64_t shape[1] = {BIG};
    CHECK_EQ_INT(smr_writer_tensor(w, "last", SMR_DT_FLOAT, 1, shape, data,
                                   BIG * 4, 1.5, &err),
                 SMR_OK);
    CHECK_EQ_INT(smr_writer_step_end(w, &err), SMR_OK);
  }
  free(data);
  CHECK_EQ_INT(smr_writer_close(w, &err), SMR_OK);
  CHECK_EQ_INT(smr_write_end_marker(dir, &err), SMR_OK);
}

static smrules_trial *open_trial(const char *dir) {
  smr_trial *t = NULL;
  smr_error err;
  CHECK_EQ_INT(smr_trial_open(dir, &(smr_trial_opts){.fresh = true}, &t, &err),
               SMR_OK);
  return (smrules_trial *)t;
}

static void remove_dir(const char *dir) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK_EQ_INT(system(cmd), 0);
}

/* What the callback saw. */
typedef struct seen {
  const smrules_tensor *v;   /* the value read whole */
  const smrules_tensor *out; /* value_pieces' *out */
  size_t piece;              /* piece_elems asked for */
  int stop_after;            /* stop at this call (0: never) */
  int calls;
  int64_t next;         /* the element the next piece must start at */
  bool good;            /* every piece as expected */
  const char *truncate; /* a file cut short at the first call */
} seen;

static int check_piece(void *arg, int64_t first, const smrules_tensor *p) {
  seen *s = arg;
  s->calls++;
  const smrules_tensor *v = s->v;
  size_t size = smr_dtype_size(v->dtype);
  /* piece elements, but at most 4 MiB a piece */
  size_t most =
      s->piece < ((size_t)4 << 20) / size ? s->piece : ((size_t)4 << 20) / size;
  int64_t want =
      v->count - first < (int64_t)most ? v->count - first : (int64_t)most;
  bool ok = first == s->next && p->count == want && p->ndim == 1 &&
            p->shape[0] == want && p->dtype == v->dtype &&
            p->nbytes == (size_t)want * size && p->step == v->step &&
            p->mode == v->mode && p->mode_step == v->mode_step &&
            memcmp(p->data, (const uint8_t *)v->data + (size_t)first * size,
                   p->nbytes) == 0;
  /* *out is the value's before the first piece */
  ok = ok && s->out->dtype == v->dtype && s->out->count == v->count &&
       s->out->ndim == v->ndim && !s->out->data &&
       memcmp(s->out->shape, v->shape, sizeof v->shape) == 0;
  s->good = s->good && ok;
  s->next = first + p->count;
  if (s->truncate)
    CHECK_EQ_INT(truncate(s->truncate, 0), 0);
  return s->calls == s->stop_after ? SMRULES_ERR : SMRULES_OK;
}

/* value_pieces of name at step in pieces of `piece` elements, stopping
 * at call stop_after (0: never), checked against value; returns its
 * status, and the calls in *calls. */
static int pieces(smrules_trial *t, const char *name, int64_t step,
                  size_t piece, int stop_after, int *calls) {
  const smrules_api *api = smr_host_api();
  smrules_tensor v, out;
  memset(&v, 0, sizeof v);
  int vrc = api->value(t, name, step, SMRULES_MODE_GLOBAL, &v);
  seen s = {.v = &v,
            .out = &out,
            .piece = piece,
            .stop_after = stop_after,
            .good = true};
  int rc = api->value_pieces(t, name, step, SMRULES_MODE_GLOBAL, piece,
                             check_piece, &s, &out);
  *calls = s.calls;
  CHECK(s.good);
  if (rc == SMRULES_OK) {
    CHECK_EQ_INT(vrc, SMRULES_OK);
    CHECK(s.calls > 0);
    if (!stop_after || s.calls < stop_after)
      CHECK_EQ_INT(s.next, v.count); /* every element, once */
    CHECK_EQ_INT(out.dtype, v.dtype);
    CHECK_EQ_INT(out.ndim, v.ndim);
    CHECK(memcmp(out.shape, v.shape, sizeof v.shape) == 0);
    CHECK_EQ_INT(out.count, v.count);
    CHECK(out.data == NULL);
    CHECK_EQ_INT(out.step, v.step);
    CHECK_EQ_INT(out.mode, v.mode);
    CHECK_EQ_INT(out.mode_step, v.mode_step);
    CHECK(out.wall_time == v.wall_time);
    CHECK(out.worker && v.worker && strcmp(out.worker, v.worker) == 0);
  } else if (rc != SMRULES_ERR) {
    CHECK_EQ_INT(rc, vrc); /* not there: value()'s status */
  }
  if (vrc == SMRULES_OK)
    api->release(&v);
  return rc;
}

static void test_pieces_cover_the_value(void) {
  char dir[] = "/tmp/smrules-value-pieces-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  write_trial(dir, 0);
  smrules_trial *t = open_trial(dir);
  CHECK(SMRULES_API_HAS(smr_host_api(), value_pieces));
  int calls;
  for (int64_t step = 0; t && step < 3; step++) {
    for (size_t k = 0; k < NDT; k++) {
      char name[64];
      snprintf(name, sizeof name, "big/%zu", k);
      CHECK_EQ_INT(pieces(t, name, step, PIECE, 0, &calls), SMRULES_OK);
      CHECK_EQ_INT(calls, (BIG + PIECE - 1) / PIECE);
    }
    CHECK_EQ_INT(pieces(t, "last", step, PIECE, 0, &calls), SMRULES_OK);
  }
  /* one element a piece, and pieces larger than the value */
  CHECK_EQ_INT(pieces(t, "big/3", 1, 1, 0, &calls), SMRULES_OK);
  CHECK_EQ_INT(calls, BIG);
  CHECK_EQ_INT(pieces(t, "big/1", 1, SIZE_MAX, 0, &calls), SMRULES_OK);
  CHECK_EQ_INT(calls, 1);
  smr_trial_close((smr_trial *)t);
  remove_dir(dir);
}

static void test_stop_reads_no_more(void) {
  char dir[] = "/tmp/smrules-value-pieces-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  write_trial(dir, 0);
  smrules_trial *t = open_trial(dir);
  int calls;
  CHECK_EQ_INT(pieces(t, "big/1", 2, PIECE, 2, &calls), SMRULES_OK);
  CHECK_EQ_INT(calls, 2);
  /* the record of 320 KB: stopped at the first piece of 1,000 float64
   * elements, the head and that piece are read, a few KB more */
  uint64_t before = smr_trial_bytes_read((smr_trial *)t);
  CHECK_EQ_INT(pieces(t, "big/1", 1, 1000, 1, &calls), SMRULES_OK);
  CHECK_EQ_INT(calls, 1);
  uint64_t after = smr_trial_bytes_read((smr_trial *)t);
  /* pieces() read the value whole first, for the comparison */
  uint64_t whole = (uint64_t)BIG * 8;
  CHECK(after - before >= whole);
  CHECK(after - before < whole + 1000 * 8 + 64 * 1024);
  before = after;
  const smrules_api *api = smr_host_api();
  smrules_tensor out;
  seen s = {.piece = 1000, .stop_after = 1, .good = true};
  smrules_tensor v;
  CHECK_EQ_INT(api->value(t, "big/1", 0, SMRULES_MODE_GLOBAL, &v), SMRULES_OK);
  s.v = &v;
  s.out = &out;
  before = smr_trial_bytes_read((smr_trial *)t);
  CHECK_EQ_INT(api->value_pieces(t, "big/1", 0, SMRULES_MODE_GLOBAL, 1000,
                                 check_piece, &s, &out),
               SMRULES_OK);
  after = smr_trial_bytes_read((smr_trial *)t);
  CHECK(s.good);
  CHECK_EQ_INT(s.calls, 1);
  CHECK(after - before < 1000 * 8 + 64 * 1024); /* not the 320 KB record */
  api->release(&v);
  smr_trial_close((smr_trial *)t);
  remove_dir(dir);
}

static void test_what_it_cannot_do(void) {
  char dir[] = "/tmp/smrules-value-pieces-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  write_trial(dir, 0);
  smrules_trial *t = open_trial(dir);
  const smrules_api *api = smr_host_api();
  int calls;
  /* a small record, a string tensor: not in pieces, no call */
  CHECK_EQ_INT(pieces(t, "small", 1, PIECE, 0, &calls), SMRULES_ERR);
  CHECK_EQ_INT(calls, 0);
  CHECK_EQ_INT(pieces(t, "strings", 1, PIECE, 0, &calls), SMRULES_ERR);
  CHECK_EQ_INT(calls, 0);
  /* not there: value()'s status */
  int rc = pieces(t, "big/0", 7, PIECE, 0, &calls);
  CHECK(rc != SMRULES_OK && rc != SMRULES_ERR);
  rc = pieces(t, "no/such", 1, PIECE, 0, &calls);
  CHECK(rc != SMRULES_OK && rc != SMRULES_ERR);
  CHECK_EQ_INT(calls, 0);
  /* bad arguments */
  smrules_tensor out;
  seen s = {.good = true};
  CHECK_EQ_INT(api->value_pieces(t, "big/0", 1, SMRULES_MODE_GLOBAL, 0,
                                 check_piece, &s, &out),
               SMRULES_ERR);
  CHECK_EQ_INT(api->value_pieces(t, "big/0", 1, SMRULES_MODE_GLOBAL, PIECE,
                                 NULL, &s, &out),
               SMRULES_ERR);
  CHECK_EQ_INT(s.calls, 0);
  smr_trial_close((smr_trial *)t);
  remove_dir(dir);

  /* real payload checksums: only a whole read checks them */
  char crc[] = "/tmp/smrules-value-pieces-XXXXXX";
  CHECK(mkdtemp(crc) != NULL);
  write_trial(crc, 1);
  t = open_trial(crc);
  for (size_t k = 0; t && k < NDT; k++) {
    char name[64];
    snprintf(name, sizeof name, "big/%zu", k);
    CHECK_EQ_INT(pieces(t, name, 1, PIECE, 0, &calls), SMRULES_ERR);
    CHECK_EQ_INT(calls, 0);
  }
  smr_trial_close((smr_trial *)t);
  remove_dir(crc);
}

/* The event file of step 1, its size, and the offset of its last record
 * ("last"). */
static long last_record(const char *dir, char *path, size_t cap, long *size) {
  snprintf(path, cap, "%s/events/000000000001/000000000001_worker_0.tfevents",
           dir);
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL);
  if (!f)
    return -1;
  static uint8_t buf[16 << 20];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  *size = (long)n;
  size_t off = 0, last = 0;
  while (off < n) {
    const uint8_t *p;
    uint64_t len;
    smr_error err;
    if (smr_record_parse(buf + off, n - off, path, off, &p, &len, &err))
      break;
    last = off;
    off += (size_t)len + SMR_RECORD_OVERHEAD;
  }
  CHECK_EQ_INT(off, n);
  return (long)last;
}

static void poke(const char *path, long at, uint8_t byte) {
  FILE *f = fopen(path, "r+b");
  CHECK(f != NULL);
  if (!f)
    return;
  fseek(f, at, SEEK_SET);
  fputc(byte, f);
  fclose(f);
}

/* Damaged: SMRULES_ERR before any piece, and value() still says what it
 * said (the record cannot be read: TENSOR_UNAVAILABLE_FOR_STEP). */
static void damaged(smrules_trial *t, const char *name) {
  const smrules_api *api = smr_host_api();
  int calls;
  CHECK_EQ_INT(pieces(t, name, 1, PIECE, 0, &calls), SMRULES_ERR);
  CHECK_EQ_INT(calls, 0);
  smrules_tensor v;
  CHECK_EQ_INT(api->value(t, name, 1, SMRULES_MODE_GLOBAL, &v),
               SMRULES_TENSOR_UNAVAILABLE_FOR_STEP);
}

static void test_damaged_records(void) {
  char dir[] = "/tmp/smrules-value-pieces-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  write_trial(dir, 0);
  char path[512];
  long size = -1;
  long last = last_record(dir, path, sizeof path, &size);
  int calls;

  /* the metadata after the elements (the mode's digit) is not a number */
  poke(path, size - SMR_RECORD_FOOTER - 1, 'x');
  smrules_trial *t = open_trial(dir);
  damaged(t, "last");
  CHECK_EQ_INT(pieces(t, "big/0", 1, PIECE, 0, &calls), SMRULES_OK);
  smr_trial_close((smr_trial *)t);
  poke(path, size - SMR_RECORD_FOOTER - 1, '1');

  /* the length's checksum */
  poke(path, last + 8, 0xEE);
  t = open_trial(dir);
  damaged(t, "last");
  smr_trial_close((smr_trial *)t);

  /* the record cut short */
  CHECK_EQ_INT(truncate(path, size - 2), 0);
  t = open_trial(dir);
  damaged(t, "last");
  CHECK_EQ_INT(pieces(t, "big/0", 1, PIECE, 0, &calls), SMRULES_OK);

  /* the file cut short while its pieces are read: SMRULES_ERR after the
   * first piece (the caller forgets it), and value() then says so */
  const smrules_api *api = smr_host_api();
  smrules_tensor v, out;
  CHECK_EQ_INT(api->value(t, "big/5", 1, SMRULES_MODE_GLOBAL, &v), SMRULES_OK);
  seen s = {
      .v = &v, .out = &out, .piece = PIECE, .good = true, .truncate = path};
  CHECK_EQ_INT(api->value_pieces(t, "big/5", 1, SMRULES_MODE_GLOBAL, PIECE,
                                 check_piece, &s, &out),
               SMRULES_ERR);
  CHECK_EQ_INT(s.calls, 1);
  CHECK(s.good);
  api->release(&v);
  CHECK_EQ_INT(api->value(t, "big/5", 1, SMRULES_MODE_GLOBAL, &v),
               SMRULES_TENSOR_UNAVAILABLE_FOR_STEP);
  smr_trial_close((smr_trial *)t);
  remove_dir(dir);
}

/* A TensorBoard event file of scalars "loss" at steps 0-2, as PyTorch's
 * SummaryWriter writes it: Event{wall_time=1, step=2, summary=5{value=1
 * {tag=1, simple_value=2}}}. */
static void write_tb_trial(const char *dir) {
  char path[512];
  snprintf(path, sizeof path, "%s/events.out.tfevents.1700000000.host", dir);
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  for (int step = 0; f && step < 3; step++) {
    uint8_t value[32], ev[64];
    size_t n = 0, m = 0;
    value[n++] = 0x0A; /* tag */
    value[n++] = 4;
    memcpy(value + n, "loss", 4);
    n += 4;
    value[n++] = 0x15; /* simple_value, fixed32 */
    float x = 1.5f - (float)step;
    memcpy(value + n, &x, 4);
    n += 4;
    ev[m++] = 0x09; /* wall_time, fixed64 */
    double wt = 1700000000.0 + step;
    memcpy(ev + m, &wt, 8);
    m += 8;
    if (step) {
      ev[m++] = 0x10; /* step */
      ev[m++] = (uint8_t)step;
    }
    ev[m++] = 0x2A; /* summary */
    ev[m++] = (uint8_t)(n + 2);
    ev[m++] = 0x0A; /* value */
    ev[m++] = (uint8_t)n;
    memcpy(ev + m, value, n);
    m += n;
    uint8_t hdr[SMR_RECORD_HEADER], ftr[SMR_RECORD_FOOTER];
    smr_record_header(hdr, m);
    smr_record_footer(ftr, ev, m, 1);
    fwrite(hdr, 1, sizeof hdr, f);
    fwrite(ev, 1, m, f);
    fwrite(ftr, 1, sizeof ftr, f);
  }
  if (f)
    fclose(f);
}

/* A TensorBoard trial's values are in memory, never read in pieces. */
static void test_tensorboard_trial(void) {
  char dir[] = "/tmp/smrules-value-pieces-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  write_tb_trial(dir);
  smrules_trial *t = open_trial(dir);
  const smrules_api *api = smr_host_api();
  smrules_tensor v;
  CHECK_EQ_INT(api->value(t, "loss", 1, SMRULES_MODE_GLOBAL, &v), SMRULES_OK);
  CHECK(v.count == 1 && api->get(&v, 0) == 0.5);
  api->release(&v);
  int calls;
  CHECK_EQ_INT(pieces(t, "loss", 1, 1, 0, &calls), SMRULES_ERR);
  CHECK_EQ_INT(calls, 0);
  smr_trial_close((smr_trial *)t);
  remove_dir(dir);
}

/* smr_source_read_into: the range's bytes in the caller's memory,
 * counted as read; a range past the end, a missing file and a link out of
 * the folder are errors, as smr_source_read_range's are. */
static void test_read_into(void) {
  char dir[] = "/tmp/smrules-value-pieces-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[512];
  snprintf(path, sizeof path, "%s/f.bin", dir);
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  uint8_t bytes[10000];
  for (size_t i = 0; i < sizeof bytes; i++)
    bytes[i] = (uint8_t)(i * 7 + 3);
  if (f) {
    fwrite(bytes, 1, sizeof bytes, f);
    fclose(f);
  }
  snprintf(path, sizeof path, "%s/out", dir);
  CHECK_EQ_INT(symlink("/etc/passwd", path), 0);
  smr_source *src = NULL;
  smr_error e;
  CHECK_EQ_INT(smr_source_local_open(dir, &src, &e), SMR_OK);
  uint8_t got[4000];
  memset(got, 0, sizeof got);
  CHECK_EQ_INT(smr_source_read_into(src, "f.bin", 5000, 4000, got, &e), SMR_OK);
  CHECK(memcmp(got, bytes + 5000, 4000) == 0);
  CHECK_EQ_INT(smr_source_bytes_read(src), 4000);
  CHECK_EQ_INT(smr_source_read_into(src, "f.bin", 7000, 4000, got, &e),
               SMR_ERR_FORMAT);
  CHECK(smr_source_read_into(src, "none.bin", 0, 10, got, &e) != SMR_OK);
  CHECK(smr_source_read_into(src, "out", 0, 10, got, &e) != SMR_OK);
  CHECK(smr_source_read_into(src, "../f.bin", 0, 10, got, &e) != SMR_OK);
  CHECK_EQ_INT(smr_source_bytes_read(src), 4000);
  smr_source_close(src);
  remove_dir(dir);
}

int main(void) {
  TEST_RUN(test_pieces_cover_the_value);
  TEST_RUN(test_stop_reads_no_more);
  TEST_RUN(test_what_it_cannot_do);
  TEST_RUN(test_damaged_records);
  TEST_RUN(test_tensorboard_trial);
  TEST_RUN(test_read_into);
  return TEST_REPORT("test_value_pieces");
}
