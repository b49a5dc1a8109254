/* test_writer.c - the trial writer: exact file names, write order results
 * (no .tmp left, lazy event files), records decoded back byte for byte,
 * index and collections contents, smdebug's bytes for the
 * docs/formats.md#a-worked-example example. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/event.h"
#include "format/index.h"
#include "format/record.h"
#include "unit.h"
#include "writer/event_encode.h"
#include "writer/writer.h"

static char tmp_root[] = "/tmp/smr_test_writer_XXXXXX";

/* ---- helpers ---- */

static char *read_rel(const char *trial, const char *rel, size_t *len) {
  char *path = smr_xasprintf("%s/%s", trial, rel), *data = NULL;
  smr_error err;
  if (smr_read_file(path, 1 << 25, &data, len, &err) != SMR_OK) {
    fprintf(stderr, "cannot read %s: %s\n", path, err.msg);
    data = NULL;
  }
  free(path);
  return data;
}

/* Every file under `dir`, relative to `base`, sorted, joined by '\n'. */
static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}
static void list_files(const char *base, const char *rel, char ***v,
                       size_t *n) {
  char *dir = rel[0] ? smr_xasprintf("%s/%s", base, rel) : smr_xstrdup(base);
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    char *r = rel[0] ? smr_xasprintf("%s/%s", rel, e->d_name)
                     : smr_xstrdup(e->d_name);
    char *full = smr_xasprintf("%s/%s", base, r);
    struct stat st;
    if (stat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
      list_files(base, r, v, n);
      free(r);
    } else {
      *v = smr_xrealloc(*v, (*n + 1) * sizeof **v);
      (*v)[(*n)++] = r;
    }
    free(full);
  }
  if (d)
    closedir(d);
  free(dir);
}
static char *file_list(const char *base) {
  char **v = NULL;
  size_t n = 0;
  list_files(base, "", &v, &n);
  if (n)
    qsort(v, n, sizeof *v, cmp_str);
  smr_buf b = {0};
  smr_buf_puts(&b, "");
  for (size_t i = 0; i < n; i++) {
    smr_buf_printf(&b, "%s\n", v[i]);
    free(v[i]);
  }
  free(v);
  return b.data;
}

static void remove_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0)
    return;
  if (S_ISDIR(st.st_mode)) {
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
        continue;
      char *p = smr_xasprintf("%s/%s", path, e->d_name);
      remove_tree(p);
      free(p);
    }
    if (d)
      closedir(d);
    rmdir(path);
  } else {
    unlink(path);
  }
}

/* Decode the record `ix` entry `i` points at in `ev` (the event file). */
static int decode_entry(const uint8_t *ev, size_t ev_len,
                        const smr_index_tensor *e, smr_tensor *t, char **name) {
  smr_error err;
  smr_error_clear(&err);
  CHECK(e->start_idx >= 0 && e->start_idx + e->length <= (int64_t)ev_len);
  if (e->start_idx < 0 || e->start_idx + e->length > (int64_t)ev_len)
    return SMR_ERR_FORMAT;
  const uint8_t *payload;
  uint64_t plen;
  int rc = smr_record_parse(ev + e->start_idx, (size_t)e->length, "ev",
                            (uint64_t)e->start_idx, &payload, &plen, &err);
  CHECK_EQ_INT(rc, SMR_OK);
  if (rc)
    return rc;
  CHECK_EQ_INT(plen + SMR_RECORD_OVERHEAD, e->length);
  rc = smr_event_decode(payload, plen, "ev", (uint64_t)e->start_idx, t, name,
                        &err);
  if (rc)
    fprintf(stderr, "decode: %s\n", err.msg);
  CHECK_EQ_INT(rc, SMR_OK);
  return rc;
}

static int parse_index_rel(const char *trial, const char *rel, smr_index *ix) {
  size_t len;
  char *json = read_rel(trial, rel, &len);
  smr_error err;
  int rc = json ? smr_index_parse(json, len, rel, ix, &err) : SMR_ERR_IO;
  CHECK_EQ_INT(rc, SMR_OK);
  free(json);
  return rc;
}

/* ---- the small trial ---- */

static const float loss0[1] = {0.5f};
static const int64_t w0[6] = {1, -2, 3, -4, 5, 1LL << 40};
static const char *const ids[3] = {"0-0", "0-1\xc3\xa9", ""};
static const double loss2 = 0.25;
static const uint8_t flags[4] = {1, 0, 0, 1};

static void write_small_trial(const char *trial) {
  smr_writer *w = NULL;
  smr_error err;
  smr_error_clear(&err);
  CHECK_EQ_INT(smr_writer_open(trial, "worker_0", 0, &w, &err), SMR_OK);
  if (!w)
    return;
  int64_t s1[1] = {1}, s23[2] = {2, 3}, s4[1] = {4}, s42[2] = {4, 2};
  /* step 0: TRAIN 0, three tensors (one of strings) */
  CHECK_EQ_INT(smr_writer_step_begin(w, 0, SMR_MODE_TRAIN, 0, &err), SMR_OK);
  CHECK_EQ_INT(smr_writer_tensor(w, "loss", SMR_DT_FLOAT, 1, s1, loss0,
                                 sizeof loss0, 1.0, &err),
               SMR_OK);
  CHECK_EQ_INT(smr_writer_tensor(w, "gradient/w", SMR_DT_INT64, 2, s23, w0,
                                 sizeof w0, 2.5, &err),
               SMR_OK);
  CHECK_EQ_INT(smr_writer_strings(w, "trees/ID", 3, ids, 3.0, &err), SMR_OK);
  /* a bad tensor is refused and leaves the step intact */
  CHECK_EQ_INT(
      smr_writer_tensor(w, "bad", SMR_DT_FLOAT, 1, s1, loss0, 3, 1.0, &err),
      SMR_ERR_USAGE);
  CHECK_EQ_INT(smr_writer_step_end(w, &err), SMR_OK);
  /* step 1: EVAL 0, shape only: an index without an event file */
  CHECK_EQ_INT(smr_writer_step_begin(w, 1, SMR_MODE_EVAL, 0, &err), SMR_OK);
  CHECK_EQ_INT(smr_writer_shape(w, "x", 2, s42, &err), SMR_OK);
  /* step 2 begun without ending step 1: step 1 is closed first */
  CHECK_EQ_INT(smr_writer_step_begin(w, 2, SMR_MODE_TRAIN, 1, &err), SMR_OK);
  CHECK_EQ_INT(smr_writer_tensor(w, "loss", SMR_DT_DOUBLE, 0, NULL, &loss2,
                                 sizeof loss2, 4.0, &err),
               SMR_OK);
  CHECK_EQ_INT(smr_writer_shape(w, "gradient/w", 2, s23, &err), SMR_OK);
  CHECK_EQ_INT(smr_writer_step_end(w, &err), SMR_OK);
  /* step 3 saves nothing: no files */
  CHECK_EQ_INT(smr_writer_step_begin(w, 3, SMR_MODE_TRAIN, 2, &err), SMR_OK);
  CHECK_EQ_INT(smr_writer_step_end(w, &err), SMR_OK);
  /* step 1234 (index folder 000000001), left open for close() */
  CHECK_EQ_INT(smr_writer_step_begin(w, 1234, SMR_MODE_GLOBAL, 1234, &err),
               SMR_OK);
  CHECK_EQ_INT(smr_writer_tensor(w, "flags", SMR_DT_BOOL, 1, s4, flags,
                                 sizeof flags, 5.0, &err),
               SMR_OK);
  char *inc[] = {"^(?!gradient).*weight"};
  char *names[] = {"gradient/w"};
  smr_collection cols[2] = {
      {.name = "weights", .include_regex = inc, .n_include_regex = 1},
      {.name = "gradients",
       .tensor_names = names,
       .n_tensor_names = 1,
       .has_reduction_config = true,
       .save_raw_tensor = true,
       .reductions = "mean,abs_l2_norm"},
  };
  smr_collections c = {.items = cols, .n = 2, .num_workers = 1};
  CHECK_EQ_INT(smr_writer_collections(w, &c, &err), SMR_OK);
  CHECK_EQ_INT(smr_writer_close(w, &err), SMR_OK);
  CHECK_EQ_INT(smr_write_end_marker(trial, &err), SMR_OK);
}

static void test_file_names(const char *trial) {
  char *files = file_list(trial);
  CHECK_STR(files, "collections/000000000/worker_0_collections.json\n"
                   "events/000000000000/000000000000_worker_0.tfevents\n"
                   "events/000000000002/000000000002_worker_0.tfevents\n"
                   "events/000000001234/000000001234_worker_0.tfevents\n"
                   "index/000000000/000000000000_worker_0.json\n"
                   "index/000000000/000000000001_worker_0.json\n"
                   "index/000000000/000000000002_worker_0.json\n"
                   "index/000000001/000000001234_worker_0.json\n"
                   "training_job_end.ts\n");
  CHECK(strstr(files, ".tmp") == NULL);
  free(files);
}

static void check_step0_records(const char *trial, const smr_index *ix) {
  size_t ev_len;
  uint8_t *ev = (uint8_t *)read_rel(trial, ix->event_file_name, &ev_len);
  CHECK(ev != NULL);
  if (!ev || ix->n_tensors != 3)
    return;
  /* records tile the file in write order */
  CHECK_EQ_INT(ix->tensors[0].start_idx, 0);
  CHECK_EQ_INT(ix->tensors[1].start_idx, ix->tensors[0].length);
  CHECK_EQ_INT(ix->tensors[2].start_idx + ix->tensors[2].length, ev_len);
  smr_tensor t;
  char *name = NULL;
  if (decode_entry(ev, ev_len, &ix->tensors[1], &t, &name) == SMR_OK) {
    CHECK_STR(name, "gradient/w");
    CHECK_EQ_INT(t.dtype, SMR_DT_INT64);
    CHECK_EQ_INT(t.ndim, 2);
    CHECK_EQ_INT(t.shape[0], 2);
    CHECK_EQ_INT(t.shape[1], 3);
    CHECK(t.nbytes == sizeof w0 && memcmp(t.data, w0, sizeof w0) == 0);
    CHECK_EQ_INT(t.step, 0);
    CHECK_EQ_INT(t.mode, SMR_MODE_TRAIN);
    CHECK_EQ_INT(t.mode_step, 0);
    CHECK(t.wall_time == 2.5);
    smr_tensor_release(&t);
  }
  free(name);
  name = NULL;
  if (decode_entry(ev, ev_len, &ix->tensors[2], &t, &name) == SMR_OK) {
    CHECK_STR(name, "trees/ID");
    CHECK_EQ_INT(t.dtype, SMR_DT_STRING);
    CHECK_EQ_INT(t.stored_dtype, SMR_DT_INVALID);
    CHECK_EQ_INT(t.count, 3);
    for (int i = 0; i < 3 && t.count == 3; i++)
      CHECK(t.string_lens[i] == strlen(ids[i]) &&
            memcmp(t.strings[i], ids[i], t.string_lens[i]) == 0);
    smr_tensor_release(&t);
  }
  free(name);
  free(ev);
}

static void test_indexes(const char *trial) {
  smr_index ix;
  if (parse_index_rel(trial, "index/000000000/000000000000_worker_0.json",
                      &ix) == SMR_OK) {
    CHECK_EQ_INT(ix.mode, SMR_MODE_TRAIN);
    CHECK_EQ_INT(ix.mode_step, 0);
    CHECK_STR(ix.event_file_name,
              "events/000000000000/000000000000_worker_0.tfevents");
    CHECK_EQ_INT(ix.n_tensors, 3);
    CHECK_EQ_INT(ix.n_shapes, 0);
    if (ix.n_tensors == 3) {
      CHECK_STR(ix.tensors[0].name, "loss");
      CHECK_STR(ix.tensors[2].name, "trees/ID");
    }
    check_step0_records(trial, &ix);
    smr_index_free(&ix);
  }
  size_t len;
  char *json =
      read_rel(trial, "index/000000000/000000000001_worker_0.json", &len);
  CHECK_STR(json, "{\"meta\": {\"mode\": \"EVAL\", \"mode_step\": 0}, "
                  "\"tensor_payload\": [], \"shape_payload\": "
                  "[{\"tensorname\": \"x\", \"originalname\": \"x\", "
                  "\"shape\": [4, 2]}]}");
  free(json);
  if (parse_index_rel(trial, "index/000000000/000000000002_worker_0.json",
                      &ix) == SMR_OK) {
    CHECK_EQ_INT(ix.mode, SMR_MODE_TRAIN);
    CHECK_EQ_INT(ix.mode_step, 1);
    CHECK_EQ_INT(ix.n_tensors, 1);
    CHECK_EQ_INT(ix.n_shapes, 1);
    smr_index_free(&ix);
  }
  if (parse_index_rel(trial, "index/000000001/000000001234_worker_0.json",
                      &ix) == SMR_OK) {
    CHECK_EQ_INT(ix.mode, SMR_MODE_GLOBAL);
    CHECK_EQ_INT(ix.mode_step, 1234);
    CHECK_STR(ix.event_file_name,
              "events/000000001234/000000001234_worker_0.tfevents");
    size_t ev_len;
    uint8_t *ev = (uint8_t *)read_rel(trial, ix.event_file_name, &ev_len);
    smr_tensor t;
    char *name = NULL;
    if (ev && ix.n_tensors == 1 &&
        decode_entry(ev, ev_len, &ix.tensors[0], &t, &name) == SMR_OK) {
      CHECK_EQ_INT(t.dtype, SMR_DT_BOOL);
      CHECK(t.nbytes == 4 && memcmp(t.data, flags, 4) == 0);
      CHECK_EQ_INT(t.step, 1234);
      CHECK_EQ_INT(t.mode, SMR_MODE_GLOBAL);
      smr_tensor_release(&t);
    }
    free(name);
    free(ev);
    smr_index_free(&ix);
  }
}

static void test_collections_file(const char *trial) {
  size_t len;
  char *json =
      read_rel(trial, "collections/000000000/worker_0_collections.json", &len);
  CHECK(json != NULL);
  if (!json)
    return;
  smr_collections c;
  smr_error err;
  CHECK_EQ_INT(smr_collections_parse(json, len, "c", &c, &err), SMR_OK);
  CHECK_EQ_INT(c.num_workers, 1);
  CHECK_EQ_INT(c.n, 2);
  if (c.n == 2) {
    CHECK_STR(c.items[0].include_regex[0], "^(?!gradient).*weight");
    CHECK(!c.items[0].has_reduction_config);
    CHECK_STR(c.items[1].reductions, "mean,abs_l2_norm");
    CHECK(c.items[1].save_raw_tensor);
  }
  smr_collections_free(&c);
  free(json);
}

static void test_small_trial(void) {
  /* a "__" in the directory must not matter */
  char *trial = smr_xasprintf("%s/run__1/trial", tmp_root);
  write_small_trial(trial);
  test_file_names(trial);
  test_indexes(trial);
  test_collections_file(trial);
  free(trial);
}

/* ---- the worked example of docs/formats.md#a-worked-example, byte for byte
 * ---- */

static const char example_hex[] =
    "4a00000000000000af77dbb009000000000000f03f10032a3d0a3b0a046c6f73"
    "7342160801120c120a080112066c6f73735f3122040000003f4a1b0a0e0a096d"
    "6f64655f737465701201330a090a046d6f6465120131b3c02d06";

static void test_worked_example(void) {
  char *trial = smr_xasprintf("%s/example", tmp_root);
  smr_writer *w;
  smr_error err;
  int64_t s1[1] = {1};
  CHECK_EQ_INT(smr_writer_open(trial, "worker_0", 0, &w, &err), SMR_OK);
  CHECK_EQ_INT(smr_writer_step_begin(w, 3, SMR_MODE_TRAIN, 3, &err), SMR_OK);
  CHECK_EQ_INT(
      smr_writer_tensor(w, "loss", SMR_DT_FLOAT, 1, s1, loss0, 4, 1.0, &err),
      SMR_OK);
  CHECK_EQ_INT(smr_writer_close(w, &err), SMR_OK);
  size_t len;
  uint8_t *ev = (uint8_t *)read_rel(
      trial, "events/000000000003/000000000003_worker_0.tfevents", &len);
  CHECK_EQ_INT(len, 90);
  char hex[181] = "";
  for (size_t i = 0; ev && i < len && i < 90; i++)
    snprintf(hex + 2 * i, 3, "%02x", ev[i]);
  CHECK_STR(hex, example_hex);
  free(ev);
  char *json =
      read_rel(trial, "index/000000000/000000000003_worker_0.json", &len);
  CHECK_STR(json, "{\"meta\": {\"mode\": \"TRAIN\", \"mode_step\": 3, "
                  "\"event_file_name\": "
                  "\"events/000000000003/000000000003_worker_0.tfevents\"}, "
                  "\"tensor_payload\": [{\"tensorname\": \"loss\", "
                  "\"start_idx\": 0, \"length\": 90}], \"shape_payload\": []}");
  free(json);
  free(trial);
}

static void test_real_crc_and_device_worker(void) {
  char *trial = smr_xasprintf("%s/realcrc", tmp_root);
  const char *dev = "/job:worker/replica:0/task:1/device:GPU:0";
  smr_writer *w;
  smr_error err;
  int64_t s1[1] = {1};
  CHECK_EQ_INT(smr_writer_open(trial, dev, 1, &w, &err), SMR_OK);
  CHECK_EQ_INT(smr_writer_step_begin(w, 7, SMR_MODE_TRAIN, 7, &err), SMR_OK);
  CHECK_EQ_INT(
      smr_writer_tensor(w, "loss", SMR_DT_FLOAT, 1, s1, loss0, 4, 1.0, &err),
      SMR_OK);
  smr_collections c = {.n = 0, .num_workers = 2};
  CHECK_EQ_INT(smr_writer_collections(w, &c, &err), SMR_OK);
  CHECK_EQ_INT(smr_writer_close(w, &err), SMR_OK);
  char *files = file_list(trial);
  CHECK_STR(files,
            "collections/000000000/"
            "_job-worker_replica-0_task-1_device-GPU-0_collections.json\n"
            "events/000000000007/"
            "000000000007__job-worker_replica-0_task-1_device-GPU-0.tfevents\n"
            "index/000000000/"
            "000000000007__job-worker_replica-0_task-1_device-GPU-0.json\n");
  free(files);
  size_t len;
  uint8_t *ev = (uint8_t *)read_rel(
      trial,
      "events/000000000007/"
      "000000000007__job-worker_replica-0_task-1_device-GPU-0.tfevents",
      &len);
  CHECK(ev && len == 90);
  if (ev && len == 90) {
    uint32_t want = smr_crc_mask(smr_crc32c(ev + 12, 74));
    CHECK(smr_le32(ev + 86) == want);
    CHECK(smr_le32(ev + 86) != SMR_SMDEBUG_DATA_CRC);
    const uint8_t *payload;
    uint64_t plen;
    CHECK_EQ_INT(smr_record_parse(ev, len, "ev", 0, &payload, &plen, &err),
                 SMR_OK);
  }
  free(ev);
  free(trial);
}

/* The writer streams a record in pieces (a tensor's content straight from
 * the caller's memory, small pieces gathered in a 64 KiB buffer, the CRC
 * over the pieces): its file must be byte for byte what encoding each
 * record whole gives, for tensors below, at and above the buffer's size,
 * small records that overflow it, strings, and both footers. */
static void expect_record(smr_buf *want, const char *name, smr_tensor *t,
                          int real_crc) {
  uint8_t *payload = NULL;
  size_t plen = 0;
  smr_error err;
  CHECK_EQ_INT(smr_event_encode(t, name, &payload, &plen, &err), SMR_OK);
  uint8_t hdr[SMR_RECORD_HEADER], ftr[SMR_RECORD_FOOTER];
  smr_record_header(hdr, plen);
  smr_record_footer(ftr, payload, plen, real_crc);
  smr_buf_append(want, hdr, sizeof hdr);
  smr_buf_append(want, payload, plen);
  smr_buf_append(want, ftr, sizeof ftr);
  free(payload);
}

/* `hold`: smr_writer_hold_pieces, the step's records written together
 * (the same bytes, fewer writes); returns the writes made. */
static uint64_t check_pieces_equal_whole(int real_crc, int hold) {
  char *trial = smr_xasprintf("%s/pieces%d%d", tmp_root, real_crc, hold);
  smr_writer *w;
  smr_error err;
  CHECK_EQ_INT(smr_writer_open(trial, "worker_0", real_crc, &w, &err), SMR_OK);
  smr_writer_hold_pieces(w, hold);
  CHECK_EQ_INT(smr_writer_step_begin(w, 5, SMR_MODE_EVAL, 2, &err), SMR_OK);
  smr_buf want = {0};
  /* element counts around the 64 KiB buffer, then many small records */
  static const int64_t counts[] = {1,     3,      16383, 16384, 16385,
                                   70000, 262144, 1,     0,     5};
  size_t most = 262144;
  float *data = smr_xmalloc(most * sizeof *data);
  for (size_t i = 0; i < most; i++)
    data[i] = (float)i * 0.5f - 7.0f;
  for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
    char name[32];
    snprintf(name, sizeof name, "layer%zu.weight", k);
    int64_t shape[2] = {counts[k], 1};
    CHECK_EQ_INT(smr_writer_tensor(w, name, SMR_DT_FLOAT, 2, shape, data,
                                   (size_t)counts[k] * 4, 10.0 + (double)k,
                                   &err),
                 SMR_OK);
    smr_tensor t = {.dtype = SMR_DT_FLOAT,
                    .ndim = 2,
                    .shape = {counts[k], 1},
                    .count = counts[k],
                    .data = (const uint8_t *)data,
                    .nbytes = (size_t)counts[k] * 4,
                    .wall_time = 10.0 + (double)k,
                    .step = 5,
                    .mode = SMR_MODE_EVAL,
                    .mode_step = 2};
    expect_record(&want, name, &t, real_crc);
  }
  for (int k = 0; k < 3000; k++) { /* ~300 KB of small records */
    char name[40];
    snprintf(name, sizeof name, "gradient/layer.%d.bias", k);
    int64_t shape[1] = {4};
    CHECK_EQ_INT(smr_writer_tensor(w, name, SMR_DT_FLOAT, 1, shape, data + k,
                                   16, 1.5, &err),
                 SMR_OK);
    smr_tensor t = {.dtype = SMR_DT_FLOAT,
                    .ndim = 1,
                    .shape = {4},
                    .count = 4,
                    .data = (const uint8_t *)(data + k),
                    .nbytes = 16,
                    .wall_time = 1.5,
                    .step = 5,
                    .mode = SMR_MODE_EVAL,
                    .mode_step = 2};
    expect_record(&want, name, &t, real_crc);
  }
  const char *strs[2] = {"alpha", "\xc3\xa9"};
  CHECK_EQ_INT(smr_writer_strings(w, "ids", 2, strs, 2.0, &err), SMR_OK);
  size_t lens[2] = {5, 2};
  smr_tensor st = {.dtype = SMR_DT_STRING,
                   .stored_dtype = SMR_DT_INVALID,
                   .ndim = 1,
                   .shape = {2},
                   .count = 2,
                   .strings = (const uint8_t **)strs,
                   .string_lens = lens,
                   .wall_time = 2.0,
                   .step = 5,
                   .mode = SMR_MODE_EVAL,
                   .mode_step = 2};
  expect_record(&want, "ids", &st, real_crc);
  CHECK_EQ_INT(smr_writer_step_end(w, &err), SMR_OK);
  uint64_t writes = smr_writer_event_writes(w);
  CHECK_EQ_INT(smr_writer_close(w, &err), SMR_OK);
  size_t len = 0;
  uint8_t *ev = (uint8_t *)read_rel(
      trial, "events/000000000005/000000000005_worker_0.tfevents", &len);
  CHECK_EQ_INT(len, want.len);
  CHECK(ev && len == want.len && memcmp(ev, want.data, len) == 0);
  free(ev);
  free(want.data);
  free(data);
  free(trial);
  return writes;
}

static void test_pieces_equal_whole(void) {
  check_pieces_equal_whole(0, 0);
  check_pieces_equal_whole(1, 0);
}

/* Held pieces: the same bytes as streamed, in fewer writes.  Streamed,
 * each of the four contents of 64 KiB and more (16384, 16385, 70000 and
 * 262144 floats) is a writev of its own, with what was buffered before it;
 * held, they go with the writes the small records make anyway (a full
 * 64 KiB buffer, the step's end): four writes fewer (14 -> 10; the 1 MiB
 * content, with the bytes before it, takes two calls either way). */
static void test_held_pieces(void) {
  uint64_t streamed = check_pieces_equal_whole(0, 0);
  uint64_t held = check_pieces_equal_whole(0, 1);
  CHECK_EQ_INT(held + 4, streamed);
  CHECK(check_pieces_equal_whole(1, 1) == held);

  /* a step of the PyTorch hook's bench (4 contents of 512 KiB-1 MiB and
   * 9 small records, 3.2 MB) is four writes of up to 1 MiB, not one per
   * large content and one for the rest, and a flush writes what is held */
  char *trial = smr_xasprintf("%s/held_step", tmp_root);
  smr_writer *w;
  smr_error err;
  CHECK_EQ_INT(smr_writer_open(trial, "worker_0", 0, &w, &err), SMR_OK);
  smr_writer_hold_pieces(w, 1);
  static const int64_t counts[] = {131072, 512,    262144, 512,    5120,
                                   10,     131072, 512,    262144, 512,
                                   5120,   10,     1};
  float *data = smr_xcalloc(262144, sizeof *data);
  CHECK_EQ_INT(smr_writer_step_begin(w, 0, SMR_MODE_TRAIN, 0, &err), SMR_OK);
  for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
    char name[32];
    snprintf(name, sizeof name, "t%zu", k);
    CHECK_EQ_INT(smr_writer_tensor(w, name, SMR_DT_FLOAT, 1, &counts[k], data,
                                   (size_t)counts[k] * 4, 1.0, &err),
                 SMR_OK);
  }
  CHECK_EQ_INT(smr_writer_event_writes(w), 0);
  CHECK_EQ_INT(smr_writer_flush(w, &err), SMR_OK);
  CHECK_EQ_INT(smr_writer_event_writes(w), 4);
  CHECK_EQ_INT(smr_writer_flush(w, &err), SMR_OK); /* nothing held */
  CHECK_EQ_INT(smr_writer_step_end(w, &err), SMR_OK);
  CHECK_EQ_INT(smr_writer_event_writes(w), 4);
  /* turned off, what is held is written */
  CHECK_EQ_INT(smr_writer_step_begin(w, 1, SMR_MODE_TRAIN, 1, &err), SMR_OK);
  CHECK_EQ_INT(smr_writer_tensor(w, "t", SMR_DT_FLOAT, 1, &counts[0], data,
                                 (size_t)counts[0] * 4, 1.0, &err),
               SMR_OK);
  smr_writer_hold_pieces(w, 0);
  CHECK_EQ_INT(smr_writer_event_writes(w), 5);
  CHECK_EQ_INT(smr_writer_close(w, &err), SMR_OK);
  size_t len = 0;
  char *ev = read_rel(
      trial, "events/000000000001/000000000001_worker_0.tfevents", &len);
  CHECK(ev && len > (size_t)counts[0] * 4);
  free(ev);
  free(data);
  free(trial);
}

/* A write that fails (the event file is /dev/full): the tensor that hits
 * it, or the step's end for records still buffered, reports the system's
 * error; the step is not renamed into place and no index is written. */
static void test_write_fails(void) {
  static const int64_t big_n = 100000, small_n = 4;
  for (int big = 0; big < 2; big++) {
    char *trial = smr_xasprintf("%s/full%d", tmp_root, big);
    char *dir = smr_xasprintf("%s/events/000000000001", trial);
    char *tmp = smr_xasprintf("%s/000000000001_worker_0.tfevents.tmp", dir);
    smr_writer *w;
    smr_error err;
    CHECK_EQ_INT(smr_writer_open(trial, "worker_0", 0, &w, &err), SMR_OK);
    char *events = smr_xasprintf("%s/events", trial);
    CHECK(mkdir(events, 0777) == 0);
    free(events);
    CHECK(mkdir(dir, 0777) == 0);
    CHECK(symlink("/dev/full", tmp) == 0);
    CHECK_EQ_INT(smr_writer_step_begin(w, 1, SMR_MODE_TRAIN, 1, &err), SMR_OK);
    int64_t n = big ? big_n : small_n;
    float *data = smr_xcalloc((size_t)n, sizeof *data);
    int rc = smr_writer_tensor(w, "w", SMR_DT_FLOAT, 1, &n, data, (size_t)n * 4,
                               0, &err);
    if (big) {
      CHECK_EQ_INT(rc, SMR_ERR_IO);
      CHECK(strstr(err.msg, "No space left") != NULL);
    } else {
      CHECK_EQ_INT(rc, SMR_OK); /* still in the buffer */
    }
    rc = smr_writer_step_end(w, &err);
    CHECK_EQ_INT(rc, SMR_ERR_IO);
    if (!big)
      CHECK(strstr(err.msg, "No space left") != NULL);
    else
      CHECK(strstr(err.msg, "discarded") != NULL);
    CHECK_EQ_INT(smr_writer_close(w, &err), SMR_OK);
    struct stat st;
    char *ix = smr_xasprintf("%s/index", trial);
    CHECK(stat(ix, &st) != 0); /* no index for the failed step */
    free(ix);
    free(data);
    free(tmp);
    free(dir);
    free(trial);
  }
}

/* One step of `n` tensors of `count` floats written with hold_pieces
 * `hold`; returns the event file (its length in *len) and the writes made
 * in *writes. */
static char *write_step_of(const char *name, int hold, int n, int64_t count,
                           size_t *len, uint64_t *writes) {
  char *trial = smr_xasprintf("%s/%s%d", tmp_root, name, hold);
  smr_writer *w;
  smr_error err;
  CHECK_EQ_INT(smr_writer_open(trial, "worker_0", 0, &w, &err), SMR_OK);
  smr_writer_hold_pieces(w, hold);
  float *data = smr_xmalloc((size_t)count * sizeof *data);
  for (int64_t i = 0; i < count; i++)
    data[i] = (float)i;
  CHECK_EQ_INT(smr_writer_step_begin(w, 3, SMR_MODE_TRAIN, 3, &err), SMR_OK);
  for (int k = 0; k < n; k++) {
    char tname[32];
    snprintf(tname, sizeof tname, "t%d", k);
    data[0] = (float)k; /* each record differs */
    CHECK_EQ_INT(smr_writer_tensor(w, tname, SMR_DT_FLOAT, 1, &count, data,
                                   (size_t)count * 4, 2.0, &err),
                 SMR_OK);
    if (hold) /* the caller keeps the memory until the flush: a copy each */
      CHECK_EQ_INT(smr_writer_flush(w, &err), SMR_OK);
  }
  CHECK_EQ_INT(smr_writer_step_end(w, &err), SMR_OK);
  *writes = smr_writer_event_writes(w);
  CHECK_EQ_INT(smr_writer_close(w, &err), SMR_OK);
  free(data);
  char *ev = read_rel(
      trial, "events/000000000003/000000000003_worker_0.tfevents", len);
  free(trial);
  return ev;
}

/* No write call takes more than 1 MiB (2 MiB page-cache folios are dear on
 * a virtual machine that reports free memory to its host: see WRITE_MAX):
 * a tensor of 3 MiB goes out in four calls, streamed or held, the same
 * bytes either way. */
static void test_write_calls_capped(void) {
  size_t len0 = 0, len1 = 0;
  uint64_t n_streamed = 0, n_held = 0;
  char *a = write_step_of("cap", 0, 1, 786432, &len0, &n_streamed);
  char *b = write_step_of("cap", 1, 1, 786432, &len1, &n_held);
  CHECK(len0 > 3u << 20);
  CHECK(a && b && len0 == len1 && memcmp(a, b, len0) == 0);
  CHECK_EQ_INT(n_streamed,
               5);         /* 4 for the header and content, 1 for the footer */
  CHECK_EQ_INT(n_held, 4); /* held: the footer goes with the last MiB */
  free(a);
  free(b);
}

/* More large pieces than are held at once (256): written as they come, in
 * order, the same bytes as streamed. */
static void test_many_held_pieces(void) {
  size_t len0 = 0, len1 = 0;
  uint64_t n_streamed = 0, n_held = 0;
  char *a = write_step_of("many", 0, 300, 16384, &len0, &n_streamed);
  /* write_step_of flushes after each tensor when holding: here the pieces
   * must pile up, so the step is written again without those flushes */
  char *trial = smr_xasprintf("%s/many_piled", tmp_root);
  smr_writer *w;
  smr_error err;
  CHECK_EQ_INT(smr_writer_open(trial, "worker_0", 0, &w, &err), SMR_OK);
  smr_writer_hold_pieces(w, 1);
  int64_t count = 16384;
  float *data = smr_xmalloc(300 * (size_t)count * sizeof *data);
  for (int k = 0; k < 300; k++)
    for (int64_t i = 0; i < count; i++)
      data[(size_t)k * (size_t)count + (size_t)i] = i ? (float)i : (float)k;
  CHECK_EQ_INT(smr_writer_step_begin(w, 3, SMR_MODE_TRAIN, 3, &err), SMR_OK);
  for (int k = 0; k < 300; k++) {
    char tname[32];
    snprintf(tname, sizeof tname, "t%d", k);
    CHECK_EQ_INT(smr_writer_tensor(w, tname, SMR_DT_FLOAT, 1, &count,
                                   data + (size_t)k * (size_t)count,
                                   (size_t)count * 4, 2.0, &err),
                 SMR_OK);
  }
  CHECK_EQ_INT(smr_writer_step_end(w, &err), SMR_OK);
  n_held = smr_writer_event_writes(w);
  CHECK_EQ_INT(smr_writer_close(w, &err), SMR_OK);
  char *b = read_rel(
      trial, "events/000000000003/000000000003_worker_0.tfevents", &len1);
  CHECK(a && b && len0 == len1 && memcmp(a, b, len0) == 0);
  CHECK(n_held <
        n_streamed); /* 300 + 1 streamed; ~19 MB in calls of 1 MiB held */
  free(a);
  free(b);
  free(data);
  free(trial);
}

/* A held write that fails (the event file is /dev/full): the tensor call
 * succeeds (nothing is written yet), the flush reports the system's error,
 * the step is discarded at its end and no index is written. */
static void test_held_write_fails(void) {
  char *trial = smr_xasprintf("%s/heldfull", tmp_root);
  char *dir = smr_xasprintf("%s/events/000000000001", trial);
  char *tmp = smr_xasprintf("%s/000000000001_worker_0.tfevents.tmp", dir);
  smr_writer *w;
  smr_error err;
  CHECK_EQ_INT(smr_writer_open(trial, "worker_0", 0, &w, &err), SMR_OK);
  smr_writer_hold_pieces(w, 1);
  char *events = smr_xasprintf("%s/events", trial);
  CHECK(mkdir(events, 0777) == 0);
  free(events);
  CHECK(mkdir(dir, 0777) == 0);
  CHECK(symlink("/dev/full", tmp) == 0);
  CHECK_EQ_INT(smr_writer_step_begin(w, 1, SMR_MODE_TRAIN, 1, &err), SMR_OK);
  int64_t n = 100000;
  float *data = smr_xcalloc((size_t)n, sizeof *data);
  CHECK_EQ_INT(smr_writer_tensor(w, "w", SMR_DT_FLOAT, 1, &n, data,
                                 (size_t)n * 4, 0, &err),
               SMR_OK);
  CHECK_EQ_INT(smr_writer_flush(w, &err), SMR_ERR_IO);
  CHECK(strstr(err.msg, "No space left") != NULL);
  CHECK_EQ_INT(smr_writer_tensor(w, "v", SMR_DT_FLOAT, 1, &n, data,
                                 (size_t)n * 4, 0, &err),
               SMR_ERR_IO);
  CHECK_EQ_INT(smr_writer_step_end(w, &err), SMR_ERR_IO);
  CHECK(strstr(err.msg, "discarded") != NULL);
  CHECK_EQ_INT(smr_writer_close(w, &err), SMR_OK);
  struct stat st;
  char *ix = smr_xasprintf("%s/index", trial);
  CHECK(stat(ix, &st) != 0); /* no index for the failed step */
  free(ix);
  free(data);
  free(tmp);
  free(dir);
  free(trial);
}

static void test_usage_errors(void) {
  char *trial = smr_xasprintf("%s/usage", tmp_root);
  smr_writer *w = NULL;
  smr_error err;
  int64_t s1[1] = {1}, neg[1] = {-1};
  CHECK_EQ_INT(smr_writer_open(trial, "a/b", 0, &w, &err), SMR_ERR_USAGE);
  CHECK_EQ_INT(smr_writer_open(trial, "", 0, &w, &err), SMR_ERR_USAGE);
  CHECK_EQ_INT(smr_writer_open(trial, "..", 0, &w, &err), SMR_ERR_USAGE);
  CHECK_EQ_INT(smr_writer_open(trial, "host:1", 0, &w, &err), SMR_ERR_USAGE);
  CHECK(w == NULL);
  CHECK_EQ_INT(smr_writer_open(trial, "worker_1", 0, &w, &err), SMR_OK);
  if (!w)
    return;
  CHECK_EQ_INT(
      smr_writer_tensor(w, "t", SMR_DT_FLOAT, 1, s1, loss0, 4, 0, &err),
      SMR_ERR_USAGE); /* no step */
  CHECK_EQ_INT(smr_writer_step_end(w, &err), SMR_ERR_USAGE);
  CHECK_EQ_INT(smr_writer_step_begin(w, 0, 0, 0, &err), SMR_ERR_USAGE);
  CHECK_EQ_INT(smr_writer_step_begin(w, -1, 1, 0, &err), SMR_ERR_USAGE);
  CHECK_EQ_INT(smr_writer_step_begin(w, 0, 1, 0, &err), SMR_OK);
  CHECK_EQ_INT(smr_writer_tensor(w, "", SMR_DT_FLOAT, 1, s1, loss0, 4, 0, &err),
               SMR_ERR_USAGE);
  CHECK_EQ_INT(
      smr_writer_tensor(w, "t", SMR_DT_FLOAT, 1, neg, loss0, 4, 0, &err),
      SMR_ERR_USAGE);
  CHECK_EQ_INT(smr_writer_tensor(w, "t", 99, 1, s1, loss0, 4, 0, &err),
               SMR_ERR_USAGE);
  CHECK_EQ_INT(smr_writer_shape(w, "t", 1, neg, &err), SMR_ERR_USAGE);
  CHECK_EQ_INT(smr_writer_shape(w, "t", SMR_MAX_DIMS + 1, s1, &err),
               SMR_ERR_USAGE);
  CHECK_EQ_INT(smr_writer_close(w, &err), SMR_OK);
  char *files = file_list(trial);
  CHECK_STR(files, ""); /* nothing valid was saved */
  free(files);
  free(trial);
}

static void test_io_errors(void) {
  /* the trial directory is a regular file */
  char *file = smr_xasprintf("%s/plainfile", tmp_root);
  FILE *f = fopen(file, "w");
  CHECK(f != NULL);
  if (f)
    fclose(f);
  smr_writer *w = NULL;
  smr_error err;
  smr_error_clear(&err);
  CHECK_EQ_INT(smr_writer_open(file, "worker_0", 0, &w, &err), SMR_ERR_IO);
  CHECK(w == NULL);
  CHECK(err.file[0] != '\0');
  char *sub = smr_xasprintf("%s/x", file);
  CHECK_EQ_INT(smr_write_end_marker(sub, &err), SMR_ERR_IO);
  free(sub);
  free(file);
}

/* smr_writer_collections_json: smdebug's whole file kept byte for byte
 * (save_config included, which smr_collections does not hold); text the
 * parser refuses is not written. */
static void test_collections_json(void) {
  char *trial = smr_xasprintf("%s/coll_json", tmp_root);
  smr_writer *w = NULL;
  smr_error err;
  smr_error_clear(&err);
  CHECK_EQ_INT(smr_writer_open(trial, "worker_1", 0, &w, &err), SMR_OK);
  if (!w) {
    free(trial);
    return;
  }
  static const char bad[] = "{\"collections\": [1, 2]}";
  CHECK(smr_writer_collections_json(w, bad, strlen(bad), &err) != SMR_OK);
  char *path = smr_xasprintf(
      "%s/collections/000000000/worker_1_collections.json", trial);
  struct stat st;
  CHECK(stat(path, &st) != 0);
  static const char good[] =
      "{\"collections\": {\"w\": {\"name\": \"w\", \"include_regex\": "
      "[\"w$\"], "
      "\"tensor_names\": [\"a.w\"], \"reduction_config\": null, "
      "\"save_config\": "
      "{\"TRAIN\": {\"save_interval\": 7, \"save_steps\": [], \"start_step\": "
      "0, "
      "\"end_step\": null}}, \"save_histogram\": true}}, \"_meta\": "
      "{\"num_workers\": 2}}";
  CHECK_EQ_INT(smr_writer_collections_json(w, good, strlen(good), &err),
               SMR_OK);
  size_t len = 0;
  char *got =
      read_rel(trial, "collections/000000000/worker_1_collections.json", &len);
  CHECK(got && len == strlen(good) && memcmp(got, good, len) == 0);
  free(got);
  CHECK_EQ_INT(smr_writer_close(w, &err), SMR_OK);
  free(path);
  free(trial);
}

int main(void) {
  if (!mkdtemp(tmp_root)) {
    perror("mkdtemp");
    return 1;
  }
  TEST_RUN(test_small_trial);
  TEST_RUN(test_worked_example);
  TEST_RUN(test_real_crc_and_device_worker);
  TEST_RUN(test_pieces_equal_whole);
  TEST_RUN(test_write_fails);
  TEST_RUN(test_held_pieces);
  TEST_RUN(test_held_write_fails);
  TEST_RUN(test_write_calls_capped);
  TEST_RUN(test_many_held_pieces);
  TEST_RUN(test_usage_errors);
  TEST_RUN(test_io_errors);
  TEST_RUN(test_collections_json);
  remove_tree(tmp_root);
  return TEST_REPORT("test_writer");
}
