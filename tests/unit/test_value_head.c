/* test_value_head.c - the SDK's value_head (core/host/host_api.c, data.c,
 * trial_read.c) against value on trials written here: for every dtype, a
 * large record is answered from its first and last bytes with exactly the
 * value's first elements; a small record, a string tensor and a trial with
 * real payload checksums are read whole; a record cut short, one whose
 * length checksum is damaged and one whose metadata after the elements is
 * damaged get the same status from value_head as from value.  value_runs
 * gives the value's elements where asked and refuses what it cannot. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/dtype.h"
#include "format/record.h"
#include "host/rulectx.h"
#include "smrules/smrules.h"
#include "trial/trial.h"
#include "unit.h"
#include "writer/writer.h"

#define BIG 40000 /* elements: records of 40-640 KB */
#define HEAD 64

static const int dtypes[] = {
    SMR_DT_FLOAT, SMR_DT_DOUBLE,   SMR_DT_INT32,     SMR_DT_UINT8,
    SMR_DT_INT16, SMR_DT_INT8,     SMR_DT_COMPLEX64, SMR_DT_INT64,
    SMR_DT_BOOL,  SMR_DT_BFLOAT16, SMR_DT_UINT16,    SMR_DT_COMPLEX128,
    SMR_DT_HALF,  SMR_DT_UINT32,   SMR_DT_UINT64,
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
      int64_t small = 10;
      snprintf(name, sizeof name, "small/%zu", k);
      CHECK_EQ_INT(smr_writer_tensor(w, name, dtypes[k], 1, &small, data,
                                     10 * size, 1.5, &err),
                   SMR_OK);
    }
    const char *strs[] = {"a", "bc"};
    CHECK_EQ_INT(smr_writer_strings(w, "strings", 2, strs, 1.5, &err), SMR_OK);
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

/* value_head of name at step agrees with value; returns the number of
 * elements the head held (-1 when both failed). */
static int64_t agree(smrules_trial *t, const char *name, int64_t step) {
  const smrules_api *api = smr_host_api();
  smrules_tensor v, h;
  int vrc = api->value(t, name, step, SMRULES_MODE_GLOBAL, &v);
  int hrc = api->value_head(t, name, step, SMRULES_MODE_GLOBAL, HEAD, &h);
  CHECK_EQ_INT(hrc, vrc);
  if (vrc != SMRULES_OK || hrc != SMRULES_OK) {
    if (vrc == SMRULES_OK)
      api->release(&v);
    if (hrc == SMRULES_OK)
      api->release(&h);
    return -1;
  }
  CHECK_EQ_INT(h.dtype, v.dtype);
  CHECK_EQ_INT(h.ndim, v.ndim);
  CHECK(memcmp(h.shape, v.shape, sizeof h.shape) == 0);
  CHECK(h.count <= v.count);
  CHECK(h.count >= (v.count < HEAD ? v.count : HEAD));
  CHECK_EQ_INT(h.step, v.step);
  CHECK_EQ_INT(h.mode, v.mode);
  CHECK_EQ_INT(h.mode_step, v.mode_step);
  CHECK(h.wall_time == v.wall_time);
  CHECK(h.worker && v.worker && strcmp(h.worker, v.worker) == 0);
  if (v.dtype != SMRULES_DT_STRING) {
    size_t size = smr_dtype_size(v.dtype);
    CHECK_EQ_INT(h.nbytes, (size_t)h.count * size);
    CHECK(memcmp(h.data, v.data, h.nbytes) == 0);
  }
  int64_t n = h.count;
  api->release(&v);
  api->release(&h);
  return n;
}

static void test_every_dtype(void) {
  char dir[] = "/tmp/smrules-value-head-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  write_trial(dir, 0);
  smrules_trial *t = open_trial(dir);
  for (int64_t step = 0; t && step < 3; step++) {
    for (size_t k = 0; k < NDT; k++) {
      char name[64];
      snprintf(name, sizeof name, "big/%zu", k);
      int64_t n = agree(t, name, step);
      /* from the first bytes alone: fewer elements than the value's */
      CHECK(n >= HEAD && n < BIG);
      snprintf(name, sizeof name, "small/%zu", k);
      CHECK_EQ_INT(agree(t, name, step), 10); /* read whole */
    }
    CHECK_EQ_INT(agree(t, "strings", step), 2);
    CHECK(agree(t, "last", step) < BIG);
  }
  CHECK_EQ_INT(agree(t, "big/0", 7), -1); /* no such step: same status */
  CHECK_EQ_INT(agree(t, "no/such", 1), -1);
  smr_trial_close((smr_trial *)t);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK_EQ_INT(system(cmd), 0);
}

static void test_real_checksums_read_whole(void) {
  char dir[] = "/tmp/smrules-value-head-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  write_trial(dir, 1);
  smrules_trial *t = open_trial(dir);
  for (size_t k = 0; t && k < NDT; k++) {
    char name[64];
    snprintf(name, sizeof name, "big/%zu", k);
    CHECK_EQ_INT(agree(t, name, 1), BIG); /* only a whole read checks */
  }
  smr_trial_close((smr_trial *)t);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK_EQ_INT(system(cmd), 0);
}

/* The event file of step 1 and the offset of its last record ("last"). */
static long last_record(const char *dir, char *path, size_t cap) {
  snprintf(path, cap, "%s/events/000000000001/000000000001_worker_0.tfevents",
           dir);
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL);
  if (!f)
    return -1;
  static uint8_t buf[8 << 20];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
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

static void test_damaged_records(void) {
  char dir[] = "/tmp/smrules-value-head-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  write_trial(dir, 0);
  char path[512];
  long last = last_record(dir, path, sizeof path);
  long size = -1;
  FILE *f = fopen(path, "rb");
  if (f) {
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fclose(f);
  }
  smrules_trial *t = open_trial(dir);
  CHECK(t && agree(t, "last", 1) > 0 && agree(t, "last", 1) < BIG);
  smr_trial_close((smr_trial *)t);

  /* the metadata after the elements (the mode's digit) is not a number:
   * the whole read fails, and so does the head */
  poke(path, size - SMR_RECORD_FOOTER - 1, 'x');
  t = open_trial(dir);
  CHECK_EQ_INT(agree(t, "last", 1), -1);
  CHECK(agree(t, "big/0", 1) > 0); /* the rest of the file still reads */
  smr_trial_close((smr_trial *)t);
  poke(path, size - SMR_RECORD_FOOTER - 1, '1');
  t = open_trial(dir);
  CHECK(agree(t, "last", 1) > 0);
  smr_trial_close((smr_trial *)t);

  /* the length's checksum */
  poke(path, last + 8, 0xEE);
  t = open_trial(dir);
  CHECK_EQ_INT(agree(t, "last", 1), -1);
  smr_trial_close((smr_trial *)t);

  /* the record cut short */
  CHECK_EQ_INT(truncate(path, size - 2), 0);
  t = open_trial(dir);
  CHECK_EQ_INT(agree(t, "last", 1), -1);
  CHECK(agree(t, "big/0", 1) > 0);
  smr_trial_close((smr_trial *)t);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK_EQ_INT(system(cmd), 0);
}

/* value_runs of name at step: runs at `at` are the value's elements there,
 * for every dtype; a run past the value's end, another element size and
 * a small record (only a whole read may check it) are refused. */
static void test_value_runs(void) {
  char dir[] = "/tmp/smrules-value-head-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  write_trial(dir, 0);
  smrules_trial *t = open_trial(dir);
  const smrules_api *api = smr_host_api();
  CHECK(SMRULES_API_HAS(api, value_runs));
  for (size_t k = 0; t && k < NDT; k++) {
    char name[64];
    snprintf(name, sizeof name, "big/%zu", k);
    smrules_tensor v;
    CHECK_EQ_INT(api->value(t, name, 2, SMRULES_MODE_GLOBAL, &v), SMRULES_OK);
    size_t size = smr_dtype_size(dtypes[k]);
    int64_t at[4] = {0, 1234, BIG / 2 + 7, BIG - 16};
    uint8_t runs[4 * 16 * 16];
    memset(runs, 0xA5, sizeof runs);
    CHECK_EQ_INT(
        api->value_runs(t, name, 2, SMRULES_MODE_GLOBAL, at, 4, 16, size, runs),
        SMRULES_OK);
    for (int r = 0; r < 4; r++)
      CHECK(memcmp(runs + (size_t)r * 16 * size,
                   (const uint8_t *)v.data + (size_t)at[r] * size,
                   16 * size) == 0);
    api->release(&v);
    int64_t past[1] = {BIG - 15}, neg[1] = {-1};
    CHECK_EQ_INT(api->value_runs(t, name, 2, SMRULES_MODE_GLOBAL, past, 1, 16,
                                 size, runs),
                 SMRULES_ERR);
    CHECK_EQ_INT(api->value_runs(t, name, 2, SMRULES_MODE_GLOBAL, neg, 1, 16,
                                 size, runs),
                 SMRULES_ERR);
    CHECK_EQ_INT(api->value_runs(t, name, 2, SMRULES_MODE_GLOBAL, at, 1, 16,
                                 size + 1, runs),
                 SMRULES_ERR);
    snprintf(name, sizeof name, "small/%zu", k);
    CHECK_EQ_INT(
        api->value_runs(t, name, 2, SMRULES_MODE_GLOBAL, at, 1, 4, size, runs),
        SMRULES_ERR);
  }
  int64_t at0[1] = {0};
  uint8_t one[64];
  CHECK_EQ_INT(
      api->value_runs(t, "big/0", 7, SMRULES_MODE_GLOBAL, at0, 1, 4, 4, one),
      SMRULES_ERR); /* no such step */
  CHECK_EQ_INT(
      api->value_runs(t, "strings", 1, SMRULES_MODE_GLOBAL, at0, 1, 1, 1, one),
      SMRULES_ERR);
  smr_trial_close((smr_trial *)t);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK_EQ_INT(system(cmd), 0);
}

int main(void) {
  TEST_RUN(test_every_dtype);
  TEST_RUN(test_value_runs);
  TEST_RUN(test_real_checksums_read_whole);
  TEST_RUN(test_damaged_records);
  return TEST_REPORT("test_value_head");
}
