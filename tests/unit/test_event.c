/* test_event.c - Event/TensorProto decoding and encoding
 * (docs/formats.md#inside-a-record-the-event-message,
 * docs/formats.md#data-types), against the worked example, hand-built wire
 * bytes and real smdebug files from the fixtures. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "base/sha256.h"
#include "format/dtype.h"
#include "format/event.h"
#include "format/record.h"
#include "unit.h"
#include "writer/event_encode.h"

/* ---- helpers ------------------------------------------------------------ */

/* The 74-byte payload of the worked example (docs/formats.md#a-worked-example).
 */
static const uint8_t example_payload[74] = {
    0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f, 0x10, 0x03,
    0x2a, 0x3d, 0x0a, 0x3b, 0x0a, 0x04, 0x6c, 0x6f, 0x73, 0x73, 0x42,
    0x16, 0x08, 0x01, 0x12, 0x0c, 0x12, 0x0a, 0x08, 0x01, 0x12, 0x06,
    0x6c, 0x6f, 0x73, 0x73, 0x5f, 0x31, 0x22, 0x04, 0x00, 0x00, 0x00,
    0x3f, 0x4a, 0x1b, 0x0a, 0x0e, 0x0a, 0x09, 0x6d, 0x6f, 0x64, 0x65,
    0x5f, 0x73, 0x74, 0x65, 0x70, 0x12, 0x01, 0x33, 0x0a, 0x09, 0x0a,
    0x04, 0x6d, 0x6f, 0x64, 0x65, 0x12, 0x01, 0x31};

/* A tiny protobuf writer for hand-made (and deliberately odd) payloads. */
typedef struct pb {
  uint8_t b[8192];
  size_t n;
} pb;

static void pb_raw(pb *p, const void *d, size_t n) {
  memcpy(p->b + p->n, d, n);
  p->n += n;
}
static void pb_varint(pb *p, uint64_t v) {
  do {
    uint8_t c = (uint8_t)(v & 0x7F);
    v >>= 7;
    if (v)
      c |= 0x80;
    p->b[p->n++] = c;
  } while (v);
}
static void pb_key(pb *p, unsigned field, unsigned wt) {
  pb_varint(p, (uint64_t)field << 3 | wt);
}
static void pb_uint(pb *p, unsigned field, uint64_t v) {
  pb_key(p, field, 0);
  pb_varint(p, v);
}
static void pb_bytes(pb *p, unsigned field, const void *d, size_t n) {
  pb_key(p, field, 2);
  pb_varint(p, n);
  pb_raw(p, d, n);
}
static void pb_str(pb *p, unsigned field, const char *s) {
  pb_bytes(p, field, s, strlen(s));
}
static void pb_sub(pb *p, unsigned field, const pb *sub) {
  pb_bytes(p, field, sub->b, sub->n);
}
static void pb_f32(pb *p, unsigned field, float v) {
  uint8_t b[4];
  memcpy(b, &v, 4);
  pb_key(p, field, 5);
  pb_raw(p, b, 4);
}
static void pb_f64(pb *p, unsigned field, double v) {
  uint8_t b[8];
  memcpy(b, &v, 8);
  pb_key(p, field, 1);
  pb_raw(p, b, 8);
}

/* TensorShapeProto with the given dims. */
static void pb_shape(pb *tensor, int ndim, const int64_t *dims) {
  pb shape = {.n = 0};
  for (int i = 0; i < ndim; i++) {
    pb dim = {.n = 0};
    pb_uint(&dim, 1, (uint64_t)dims[i]);
    pb_str(&dim, 2, "d");
    pb_sub(&shape, 2, &dim);
  }
  pb_sub(tensor, 2, &shape);
}

/* Event{wall 2.0, step 7, Summary{Value{tag "t", tensor, metadata}}}. */
static void wrap_tensor(pb *ev, const pb *tensor, bool with_metadata) {
  pb value = {.n = 0}, summary = {.n = 0};
  pb_str(&value, 1, "t");
  pb_sub(&value, 8, tensor);
  if (with_metadata) {
    pb md = {.n = 0}, a = {.n = 0}, b = {.n = 0};
    pb_str(&a, 1, "mode_step");
    pb_str(&a, 2, "5");
    pb_str(&b, 1, "mode");
    pb_str(&b, 2, "2");
    pb_sub(&md, 1, &a);
    pb_sub(&md, 1, &b);
    pb_sub(&value, 9, &md);
  }
  pb_sub(&summary, 1, &value);
  ev->n = 0;
  pb_f64(ev, 1, 2.0);
  pb_uint(ev, 2, 7);
  pb_sub(ev, 5, &summary);
}

/* The borrowing decoder must give the same tensor (or the same error) as
 * the copying one, whatever the layout of the payload. */
static void same_tensor(const smr_tensor *a, const smr_tensor *b) {
  CHECK_EQ_INT(a->dtype, b->dtype);
  CHECK_EQ_INT(a->stored_dtype, b->stored_dtype);
  CHECK_EQ_INT(a->ndim, b->ndim);
  CHECK(memcmp(a->shape, b->shape, sizeof a->shape) == 0);
  CHECK_EQ_INT(a->count, b->count);
  CHECK_EQ_INT(a->nbytes, b->nbytes);
  CHECK(a->nbytes == b->nbytes && memcmp(a->data, b->data, a->nbytes) == 0);
  CHECK_EQ_INT(a->step, b->step);
  CHECK(a->wall_time == b->wall_time);
  CHECK_EQ_INT(a->mode, b->mode);
  CHECK_EQ_INT(a->mode_step, b->mode_step);
  bool strings = a->strings && b->strings;
  CHECK(strings || (!a->strings && !b->strings));
  for (int64_t i = 0; strings && i < a->count; i++)
    CHECK(a->string_lens[i] == b->string_lens[i] &&
          memcmp(a->strings[i], b->strings[i], a->string_lens[i]) == 0);
}

/* Decoding from the first n bytes and the tail after the tensor_content
 * (smr_event_decode_head), for every n: whenever it succeeds, the whole
 * payload decodes (borrowed) to the same tensor and name, and the head
 * holds every whole element of its first n bytes, equal to the value's.
 * Returns how many prefix lengths decoded. */
static size_t heads_agree(const uint8_t *p, size_t len) {
  smr_tensor full;
  smr_error ferr;
  char *fname = NULL;
  smr_error_clear(&ferr);
  int frc =
      smr_event_decode_borrow(p, len, "x.tfevents", 0, &full, &fname, &ferr);
  size_t ok = 0;
  /* every length for small payloads; beyond 2048 bytes a sample (records
   * of megabytes in the fixtures), the last bytes included */
  for (size_t n = 0; n <= len; n += n < 2048 || len - n <= 16 ? 1 : 509) {
    uint64_t at, dlen;
    if (!smr_event_head_locate(p, n, len, &at, &dlen))
      continue;
    CHECK(at <= n && at + dlen <= len && dlen > 0);
    if (at > n || at + dlen > len)
      continue;
    smr_tensor h;
    smr_error herr;
    char *hname = NULL;
    smr_error_clear(&herr);
    const uint8_t *tail = p + at + dlen;
    int hrc = smr_event_decode_head(p, n, tail, len - (size_t)(at + dlen), len,
                                    "x.tfevents", 0, &h, &hname, &herr);
    if (hrc != SMR_OK) {
      CHECK(h.data == NULL && h.owner_ == NULL && hname == NULL);
      continue;
    }
    ok++;
    CHECK_EQ_INT(frc, SMR_OK);
    if (frc == SMR_OK) {
      size_t size = smr_dtype_size(full.dtype);
      int64_t have = (int64_t)((n - at) / size);
      CHECK_EQ_INT(h.count, have < full.count ? have : full.count);
      CHECK_EQ_INT(h.nbytes, (size_t)h.count * size);
      CHECK(memcmp(h.data, full.data, h.nbytes) == 0);
      CHECK_EQ_INT(h.dtype, full.dtype);
      CHECK_EQ_INT(h.stored_dtype, full.stored_dtype);
      CHECK_EQ_INT(h.ndim, full.ndim);
      CHECK(memcmp(h.shape, full.shape, sizeof h.shape) == 0);
      CHECK_EQ_INT(h.step, full.step);
      CHECK(h.wall_time == full.wall_time);
      CHECK_EQ_INT(h.mode, full.mode);
      CHECK_EQ_INT(h.mode_step, full.mode_step);
      CHECK(hname && fname && strcmp(hname, fname) == 0);
    }
    free(hname);
    smr_tensor_release(&h);
  }
  free(fname);
  smr_tensor_release(&full);
  return ok;
}

static int decode_both(const uint8_t *p, size_t n, uint64_t off, smr_tensor *t,
                       char **name, smr_error *err) {
  smr_error_clear(err);
  int rc = smr_event_decode(p, n, "x.tfevents", off, t, name, err);
  smr_tensor b;
  smr_error berr;
  smr_error_clear(&berr);
  char *bname = NULL;
  int brc = smr_event_decode_borrow(p, n, "x.tfevents", off, &b,
                                    name ? &bname : NULL, &berr);
  CHECK_EQ_INT(brc, rc);
  heads_agree(p, n);
  if (rc == SMR_OK && brc == SMR_OK) {
    same_tensor(t, &b);
    if (name)
      CHECK_STR(bname, *name);
  } else {
    CHECK_STR(berr.msg, err->msg);
  }
  free(bname);
  smr_tensor_release(&b);
  return rc;
}

static int decode_pb(const pb *ev, smr_tensor *t, smr_error *err) {
  return decode_both(ev->b, ev->n, 40, t, NULL, err);
}

static int decode_tensor_pb(const pb *tensor, smr_tensor *t, smr_error *err) {
  pb ev;
  wrap_tensor(&ev, tensor, true);
  return decode_pb(&ev, t, err);
}

/* Fixtures are read from the repository only (tests run from its root). */
static const char *fixture_path(const char *rel, char *buf, size_t n) {
  snprintf(buf, n, "tests/fixtures/%s", rel);
  return buf;
}

/* Decodes every record of an event file; per record: status, error message,
 * name (NULL on error) and tensor (released unless `keep`). */
typedef struct decoded {
  int rc;
  char msg[SMR_ERR_MSG_MAX];
  int64_t err_offset;
  char *name;
  smr_tensor t;
} decoded;

static int decode_file(const char *rel, decoded *out, int max) {
  char path[512];
  char *buf;
  size_t len;
  smr_error err;
  if (smr_read_file(fixture_path(rel, path, sizeof path), 1 << 24, &buf, &len,
                    &err) != SMR_OK) {
    fprintf(stderr, "cannot read %s: %s\n", path, err.msg);
    return -1;
  }
  int count = 0;
  size_t off = 0;
  while (off < len && count < max) {
    const uint8_t *payload;
    uint64_t plen;
    int rc = smr_record_parse((uint8_t *)buf + off, len - off, rel, off,
                              &payload, &plen, &err);
    if (rc != SMR_OK) {
      fprintf(stderr, "record at %zu: %s\n", off, err.msg);
      break;
    }
    heads_agree(payload, (size_t)plen);
    decoded *d = &out[count++];
    memset(d, 0, sizeof *d);
    smr_error_clear(&err);
    d->rc = smr_event_decode(payload, (size_t)plen, rel, off, &d->t, &d->name,
                             &err);
    snprintf(d->msg, sizeof d->msg, "%s", err.msg);
    d->err_offset = err.offset;
    off += (size_t)plen + SMR_RECORD_OVERHEAD;
  }
  free(buf);
  return count;
}

static void free_decoded(decoded *d, int n) {
  for (int i = 0; i < n; i++) {
    free(d[i].name);
    smr_tensor_release(&d[i].t);
  }
}

static float f32_at(const smr_tensor *t, int64_t i) {
  float f;
  memcpy(&f, t->data + 4 * i, 4);
  return f;
}

static void sha_of(const smr_tensor *t, char hex[65]) {
  smr_sha256_hex(t->data, t->nbytes, hex);
}

/* ---- worked example ----------------------------------------------------- */

static void test_encode_worked_example(void) {
  float half = 0.5f;
  smr_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = SMR_DT_FLOAT;
  t.ndim = 1;
  t.shape[0] = 1;
  t.count = 1;
  t.data = (const uint8_t *)&half;
  t.nbytes = 4;
  t.step = 3;
  t.wall_time = 1.0;
  t.mode = 1;
  t.mode_step = 3;
  uint8_t *out = NULL;
  size_t len = 0;
  smr_error err;
  CHECK_EQ_INT(smr_event_encode(&t, "loss", &out, &len, &err), SMR_OK);
  CHECK_EQ_INT(len, 74);
  CHECK(out && memcmp(out, example_payload, 74) == 0);
  free(out);
}

static void test_decode_worked_example(void) {
  smr_tensor t;
  char *name = NULL;
  smr_error err;
  CHECK_EQ_INT(smr_event_decode(example_payload, 74, "f", 12, &t, &name, &err),
               SMR_OK);
  CHECK_STR(name, "loss");
  CHECK_EQ_INT(t.dtype, SMR_DT_FLOAT);
  CHECK_EQ_INT(t.stored_dtype, SMR_DT_FLOAT);
  CHECK_EQ_INT(t.ndim, 1);
  CHECK_EQ_INT(t.shape[0], 1);
  CHECK_EQ_INT(t.count, 1);
  CHECK_EQ_INT(t.nbytes, 4);
  CHECK(f32_at(&t, 0) == 0.5f);
  CHECK_EQ_INT(t.step, 3);
  CHECK(t.wall_time == 1.0);
  CHECK_EQ_INT(t.mode, 1);
  CHECK_EQ_INT(t.mode_step, 3);
  /* The data lives inside the decoded message, not the input buffer. */
  CHECK(t.data < example_payload || t.data >= example_payload + 74);
  free(name);
  smr_tensor_release(&t);
  CHECK(t.data == NULL && t.owner_ == NULL);
}

/* ---- round trips --------------------------------------------------------- */

static const struct {
  int dtype;
  size_t size;
} all_dtypes[] = {
    {SMR_DT_FLOAT, 4},     {SMR_DT_DOUBLE, 8},      {SMR_DT_INT32, 4},
    {SMR_DT_UINT8, 1},     {SMR_DT_INT16, 2},       {SMR_DT_INT8, 1},
    {SMR_DT_COMPLEX64, 8}, {SMR_DT_INT64, 8},       {SMR_DT_BOOL, 1},
    {SMR_DT_QINT8, 1},     {SMR_DT_QUINT8, 1},      {SMR_DT_QINT32, 4},
    {SMR_DT_BFLOAT16, 2},  {SMR_DT_QINT16, 2},      {SMR_DT_QUINT16, 2},
    {SMR_DT_UINT16, 2},    {SMR_DT_COMPLEX128, 16}, {SMR_DT_HALF, 2},
    {SMR_DT_UINT32, 4},    {SMR_DT_UINT64, 8},
};

static void roundtrip_one(int dtype, size_t size, int ndim,
                          const int64_t *shape) {
  smr_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.ndim = ndim;
  t.count = 1;
  for (int i = 0; i < ndim; i++)
    t.count *= (t.shape[i] = shape[i]);
  uint8_t data[256];
  for (size_t i = 0; i < sizeof data; i++)
    data[i] = dtype == SMR_DT_BOOL ? (uint8_t)(i % 2) : (uint8_t)(i * 37 + 5);
  t.data = data;
  t.nbytes = (size_t)t.count * size;
  t.step = 1234567890123LL;
  t.wall_time = 1700000000.25;
  t.mode = 2;
  t.mode_step = 17;
  uint8_t *buf;
  size_t len;
  smr_error err;
  CHECK_EQ_INT(smr_event_encode(&t, "w/x", &buf, &len, &err), SMR_OK);
  smr_tensor d;
  char *name = NULL;
  CHECK_EQ_INT(smr_event_decode(buf, len, "f", 0, &d, &name, &err), SMR_OK);
  CHECK_STR(name, "w/x");
  /* the writer's layout decodes from its first bytes, for every length
   * that holds the tensor_content's key and length */
  size_t heads = heads_agree(buf, len);
  CHECK(t.nbytes == 0 || heads > 0);
  CHECK_EQ_INT(d.dtype, dtype);
  CHECK_EQ_INT(d.stored_dtype, dtype);
  CHECK_EQ_INT(d.ndim, ndim);
  for (int i = 0; i < ndim; i++)
    CHECK_EQ_INT(d.shape[i], shape[i]);
  CHECK_EQ_INT(d.count, t.count);
  CHECK_EQ_INT(d.nbytes, t.nbytes);
  CHECK(d.nbytes == 0 || memcmp(d.data, data, d.nbytes) == 0);
  CHECK(d.data != NULL);
  CHECK_EQ_INT(d.step, t.step);
  CHECK(d.wall_time == t.wall_time);
  CHECK_EQ_INT(d.mode, 2);
  CHECK_EQ_INT(d.mode_step, 17);
  free(name);
  free(buf);
  smr_tensor_release(&d);
}

static void test_roundtrip_every_dtype(void) {
  static const int64_t s23[] = {2, 3}, s1[] = {1};
  for (size_t i = 0; i < sizeof all_dtypes / sizeof all_dtypes[0]; i++) {
    roundtrip_one(all_dtypes[i].dtype, all_dtypes[i].size, 2, s23);
    roundtrip_one(all_dtypes[i].dtype, all_dtypes[i].size, 1, s1);
    roundtrip_one(all_dtypes[i].dtype, all_dtypes[i].size, 0, NULL);
  }
}

static void test_roundtrip_zero_size(void) {
  static const int64_t s30[] = {3, 0}, s0[] = {0};
  roundtrip_one(SMR_DT_FLOAT, 4, 2, s30);
  roundtrip_one(SMR_DT_INT64, 8, 1, s0);
  /* Zero elements from hand-made bytes: no content, no typed values. */
  pb tp = {.n = 0};
  pb_uint(&tp, 1, SMR_DT_DOUBLE);
  pb_shape(&tp, 2, s30);
  smr_tensor t;
  smr_error err;
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_OK);
  CHECK_EQ_INT(t.count, 0);
  CHECK_EQ_INT(t.nbytes, 0);
  CHECK_EQ_INT(t.ndim, 2);
  smr_tensor_release(&t);
  /* ... but content bytes for zero elements are a mismatch. */
  pb_bytes(&tp, 4, "abcdefgh", 8);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_ERR_FORMAT);
}

static void test_zero_d(void) {
  pb tp = {.n = 0};
  pb_uint(&tp, 1, SMR_DT_FLOAT);
  pb shape = {.n = 0};
  pb_sub(&tp, 2, &shape); /* empty TensorShapeProto, as smdebug writes */
  float v = -3.25f;
  pb_bytes(&tp, 4, &v, 4);
  smr_tensor t;
  smr_error err;
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_OK);
  CHECK_EQ_INT(t.ndim, 0);
  CHECK_EQ_INT(t.count, 1);
  CHECK(f32_at(&t, 0) == -3.25f);
  smr_tensor_release(&t);
  /* No tensor_shape at all: also 0-d. */
  pb tp2 = {.n = 0};
  pb_uint(&tp2, 1, SMR_DT_FLOAT);
  pb_bytes(&tp2, 4, &v, 4);
  CHECK_EQ_INT(decode_tensor_pb(&tp2, &t, &err), SMR_OK);
  CHECK_EQ_INT(t.count, 1);
  smr_tensor_release(&t);
  /* 0-d with 8 bytes: mismatch. */
  pb_bytes(&tp2, 4, "12345678", 8); /* later occurrence overwrites */
  CHECK_EQ_INT(decode_tensor_pb(&tp2, &t, &err), SMR_ERR_FORMAT);
}

/* ---- strings ------------------------------------------------------------ */

static void test_strings_roundtrip(void) {
  const char *strs[] = {"reg:squarederror", "", "caf\xc3\xa9"};
  const uint8_t *ptrs[3];
  size_t lens[3];
  for (int i = 0; i < 3; i++) {
    ptrs[i] = (const uint8_t *)strs[i];
    lens[i] = strlen(strs[i]);
  }
  smr_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = SMR_DT_STRING;
  t.ndim = 1;
  t.shape[0] = 3;
  t.count = 3;
  t.strings = ptrs;
  t.string_lens = lens;
  t.mode = 4;
  t.mode_step = 9;
  t.step = 9;
  uint8_t *buf;
  size_t len;
  smr_error err;
  CHECK_EQ_INT(smr_event_encode(&t, "objective", &buf, &len, &err), SMR_OK);
  /* dtype 0 is not written (proto3 default): no "08 00" in the tensor. */
  smr_tensor d;
  char *name;
  CHECK_EQ_INT(smr_event_decode(buf, len, "f", 0, &d, &name, &err), SMR_OK);
  CHECK_STR(name, "objective");
  CHECK_EQ_INT(d.dtype, SMR_DT_STRING);
  CHECK_EQ_INT(d.stored_dtype, 0);
  CHECK_EQ_INT(d.count, 3);
  for (int i = 0; i < 3 && d.strings; i++) {
    CHECK_EQ_INT(d.string_lens[i], lens[i]);
    CHECK(memcmp(d.strings[i], strs[i], lens[i]) == 0);
  }
  free(name);
  free(buf);
  smr_tensor_release(&d);
}

static void test_strings_errors(void) {
  static const int64_t s2[] = {2}, s3[] = {3}, s11[] = {1, 1};
  smr_tensor t;
  smr_error err;
  pb tp = {.n = 0};
  pb_shape(&tp, 1, s2);
  pb_str(&tp, 8, "a");
  pb_str(&tp, 8, "b");
  pb_str(&tp, 8, "c");
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_ERR_FORMAT);
  CHECK(strstr(err.msg, "3 strings") && strstr(err.msg, "2"));
  tp.n = 0;
  pb_shape(&tp, 1, s3);
  pb_str(&tp, 8, "a");
  pb_str(&tp, 8, "b");
  pb_str(&tp, 8, "c");
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_OK);
  smr_tensor_release(&t);
  tp.n = 0;
  pb_shape(&tp, 2, s11);
  pb_str(&tp, 8, "a");
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_ERR_FORMAT);
  /* dtype 0 with nothing at all is not a tensor. */
  tp.n = 0;
  pb_shape(&tp, 1, s2);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_ERR_FORMAT);
  CHECK(strstr(err.msg, "DT_INVALID") != NULL);
}

/* ---- typed fields ---------------------------------------------------------
 */

static void test_typed_float_packed_and_unpacked(void) {
  static const int64_t s3[] = {3};
  float vals[3] = {1.5f, -2.0f, 0.25f};
  pb packed = {.n = 0}, unpacked = {.n = 0}, mixed = {.n = 0};
  pb_uint(&packed, 1, SMR_DT_FLOAT);
  pb_shape(&packed, 1, s3);
  pb_bytes(&packed, 5, vals, 12);
  pb_uint(&unpacked, 1, SMR_DT_FLOAT);
  pb_shape(&unpacked, 1, s3);
  for (int i = 0; i < 3; i++)
    pb_f32(&unpacked, 5, vals[i]);
  pb_uint(&mixed, 1, SMR_DT_FLOAT);
  pb_shape(&mixed, 1, s3);
  pb_f32(&mixed, 5, vals[0]);
  pb_bytes(&mixed, 5, vals + 1, 8);
  const pb *cases[] = {&packed, &unpacked, &mixed};
  for (int c = 0; c < 3; c++) {
    smr_tensor t;
    smr_error err;
    CHECK_EQ_INT(decode_tensor_pb(cases[c], &t, &err), SMR_OK);
    CHECK_EQ_INT(t.nbytes, 12);
    CHECK(t.data && memcmp(t.data, vals, 12) == 0);
    smr_tensor_release(&t);
  }
}

static void test_typed_int_broadcast_and_signedness(void) {
  static const int64_t s22[] = {2, 2}, s2[] = {2};
  smr_tensor t;
  smr_error err;
  /* One int32 value, shape 2x2: repeated (TF version 0 rule). */
  pb tp = {.n = 0};
  pb_uint(&tp, 1, SMR_DT_INT32);
  pb_shape(&tp, 2, s22);
  pb_uint(&tp, 7, 7);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_OK);
  CHECK_EQ_INT(t.nbytes, 16);
  for (int i = 0; i < 4 && t.data; i++)
    CHECK_EQ_INT(smr_le32(t.data + 4 * i), 7);
  CHECK_EQ_INT(t.shape[0], 2);
  smr_tensor_release(&t);
  /* int8 -1 and 5 (int_val, negative as a 10-byte varint), packed. */
  tp.n = 0;
  pb_uint(&tp, 1, SMR_DT_INT8);
  pb_shape(&tp, 1, s2);
  pb inner = {.n = 0};
  pb_varint(&inner, (uint64_t)(int64_t)-1);
  pb_varint(&inner, 5);
  pb_sub(&tp, 7, &inner);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_OK);
  CHECK_EQ_INT(t.nbytes, 2);
  CHECK(t.data && (int8_t)t.data[0] == -1 && t.data[1] == 5);
  smr_tensor_release(&t);
  /* int16 via int_val. */
  tp.n = 0;
  pb_uint(&tp, 1, SMR_DT_INT16);
  pb_shape(&tp, 1, s2);
  pb_uint(&tp, 7, (uint64_t)(int64_t)-300);
  pb_uint(&tp, 7, 300);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_OK);
  CHECK(t.data && (int16_t)(t.data[0] | t.data[1] << 8) == -300);
  CHECK(t.data && (t.data[2] | t.data[3] << 8) == 300);
  smr_tensor_release(&t);
}

static void test_typed_other_fields(void) {
  static const int64_t s2[] = {2}, s3[] = {3};
  smr_tensor t;
  smr_error err;
  /* int64_val, 0-d */
  pb tp = {.n = 0};
  pb_uint(&tp, 1, SMR_DT_INT64);
  pb_uint(&tp, 10, (uint64_t)(int64_t)-3);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_OK);
  CHECK(t.data && (int64_t)smr_le64(t.data) == -3);
  smr_tensor_release(&t);
  /* bool_val */
  tp.n = 0;
  pb_uint(&tp, 1, SMR_DT_BOOL);
  pb_shape(&tp, 1, s3);
  pb_uint(&tp, 11, 1);
  pb_uint(&tp, 11, 0);
  pb_uint(&tp, 11, 1);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_OK);
  CHECK(t.data && t.nbytes == 3 && t.data[0] == 1 && t.data[1] == 0 &&
        t.data[2] == 1);
  smr_tensor_release(&t);
  /* half_val: one binary16 1.0 repeated */
  tp.n = 0;
  pb_uint(&tp, 1, SMR_DT_HALF);
  pb_shape(&tp, 1, s3);
  pb_uint(&tp, 13, 0x3C00);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_OK);
  CHECK_EQ_INT(t.nbytes, 6);
  for (int i = 0; i < 3 && t.data; i++)
    CHECK(t.data[2 * i] == 0x00 && t.data[2 * i + 1] == 0x3C);
  smr_tensor_release(&t);
  /* scomplex_val: pairs */
  tp.n = 0;
  pb_uint(&tp, 1, SMR_DT_COMPLEX64);
  pb_shape(&tp, 1, s2);
  float c[4] = {1, 2, 3, 4};
  pb_bytes(&tp, 9, c, 16);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_OK);
  CHECK(t.data && t.nbytes == 16 && memcmp(t.data, c, 16) == 0);
  smr_tensor_release(&t);
  /* odd number of complex components */
  tp.n = 0;
  pb_uint(&tp, 1, SMR_DT_COMPLEX64);
  pb_shape(&tp, 1, s2);
  pb_bytes(&tp, 9, c, 12);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_ERR_FORMAT);
  /* double_val unpacked */
  tp.n = 0;
  pb_uint(&tp, 1, SMR_DT_DOUBLE);
  pb_shape(&tp, 1, s2);
  pb_f64(&tp, 6, 0.1);
  pb_f64(&tp, 6, -1e300);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_OK);
  double dv[2] = {0.1, -1e300};
  CHECK(t.data && memcmp(t.data, dv, 16) == 0);
  smr_tensor_release(&t);
}

static void test_typed_errors(void) {
  static const int64_t s2[] = {2}, big[] = {1 << 20, 1 << 20};
  smr_tensor t;
  smr_error err;
  /* 3 values for 2 elements */
  pb tp = {.n = 0};
  pb_uint(&tp, 1, SMR_DT_FLOAT);
  pb_shape(&tp, 1, s2);
  for (int i = 0; i < 3; i++)
    pb_f32(&tp, 5, 1.0f);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_ERR_FORMAT);
  CHECK(strstr(err.msg, "float_val") != NULL);
  /* no values at all */
  tp.n = 0;
  pb_uint(&tp, 1, SMR_DT_FLOAT);
  pb_shape(&tp, 1, s2);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_ERR_FORMAT);
  /* uint32 has no typed field here */
  tp.n = 0;
  pb_uint(&tp, 1, SMR_DT_UINT32);
  pb_shape(&tp, 1, s2);
  pb_uint(&tp, 7, 1);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_ERR_FORMAT);
  /* broadcast beyond the memory cap: refused, nothing allocated */
  tp.n = 0;
  pb_uint(&tp, 1, SMR_DT_FLOAT);
  pb_shape(&tp, 2, big);
  pb_f32(&tp, 5, 1.0f);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_ERR_FORMAT);
  /* unsupported and unknown dtypes */
  int bad[] = {20, 21, 24, 99, 101, -1};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tp.n = 0;
    pb_uint(&tp, 1, (uint64_t)(int64_t)bad[i]);
    pb_shape(&tp, 1, s2);
    pb_bytes(&tp, 4, "abcdefgh", 8);
    CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_ERR_FORMAT);
    CHECK(strstr(err.msg, "dtype") != NULL);
  }
}

/* ---- shape errors ---------------------------------------------------------
 */

static void test_shape_errors(void) {
  smr_tensor t;
  smr_error err;
  int64_t dims[40];
  for (int i = 0; i < 40; i++)
    dims[i] = 1;
  /* 32 dims is fine, 33 is not */
  pb tp = {.n = 0};
  pb_uint(&tp, 1, SMR_DT_UINT8);
  pb_shape(&tp, SMR_MAX_DIMS, dims);
  pb_bytes(&tp, 4, "z", 1);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_OK);
  CHECK_EQ_INT(t.ndim, SMR_MAX_DIMS);
  smr_tensor_release(&t);
  tp.n = 0;
  pb_uint(&tp, 1, SMR_DT_UINT8);
  pb_shape(&tp, SMR_MAX_DIMS + 1, dims);
  pb_bytes(&tp, 4, "z", 1);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_ERR_FORMAT);
  CHECK(strstr(err.msg, "33") != NULL);
  /* negative dim */
  dims[0] = -1;
  tp.n = 0;
  pb_uint(&tp, 1, SMR_DT_UINT8);
  pb_shape(&tp, 1, dims);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_ERR_FORMAT);
  CHECK(strstr(err.msg, "negative") != NULL);
  /* element count overflowing int64 */
  int64_t huge[3] = {INT64_MAX / 2, 4, 3};
  tp.n = 0;
  pb_uint(&tp, 1, SMR_DT_UINT8);
  pb_shape(&tp, 3, huge);
  pb_bytes(&tp, 4, "z", 1);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_ERR_FORMAT);
  /* ... unless another dimension is 0: then it is an empty tensor */
  int64_t huge0[3] = {INT64_MAX / 2, 4, 0};
  tp.n = 0;
  pb_uint(&tp, 1, SMR_DT_UINT8);
  pb_shape(&tp, 3, huge0);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_OK);
  CHECK_EQ_INT(t.count, 0);
  smr_tensor_release(&t);
  /* large but representable count with a few bytes: size mismatch */
  int64_t large[2] = {INT64_MAX / 8, 2};
  tp.n = 0;
  pb_uint(&tp, 1, SMR_DT_DOUBLE);
  pb_shape(&tp, 2, large);
  pb_bytes(&tp, 4, "abcdefgh", 8);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_ERR_FORMAT);
}

static void test_size_mismatch(void) {
  static const int64_t s23[] = {2, 3};
  smr_tensor t;
  smr_error err;
  uint8_t bytes[24] = {0};
  pb tp = {.n = 0};
  pb_uint(&tp, 1, SMR_DT_FLOAT);
  pb_shape(&tp, 2, s23);
  pb_bytes(&tp, 4, bytes, 20);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_ERR_FORMAT);
  CHECK(strstr(err.msg, "20") && strstr(err.msg, "24"));
  CHECK_EQ_INT(err.offset, 40);
  CHECK_STR(err.file, "x.tfevents");
  CHECK(t.data == NULL && t.owner_ == NULL);
}

/* ---- wire-level robustness ------------------------------------------------
 */

static void test_wrong_wire_type(void) {
  static const int64_t s2[] = {2};
  smr_tensor t;
  smr_error err;
  /* tensor_content as a varint */
  pb tp = {.n = 0};
  pb_uint(&tp, 1, SMR_DT_FLOAT);
  pb_shape(&tp, 1, s2);
  pb_uint(&tp, 4, 24);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_ERR_FORMAT);
  CHECK(strstr(err.msg, "wrong wire type for field 4 "
                        "(TensorProto.tensor_content): expected "
                        "length-delimited") != NULL);
  /* dtype length-delimited */
  tp.n = 0;
  pb_bytes(&tp, 1, "\x09", 1);
  pb_shape(&tp, 1, s2);
  pb_bytes(&tp, 4, "abcdefgh", 8);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_ERR_FORMAT);
  CHECK(strstr(err.msg, "wrong wire type for field 1 (TensorProto.dtype): "
                        "expected varint") != NULL);
  /* Event.step as fixed64, Value.tensor as a varint, Dim.size as LEN */
  pb ev = {.n = 0};
  pb_f64(&ev, 2, 1.0);
  CHECK_EQ_INT(decode_pb(&ev, &t, &err), SMR_ERR_FORMAT);
  CHECK(strstr(err.msg, "field 2 (Event.step)") != NULL);
  pb value = {.n = 0}, summary = {.n = 0};
  pb_str(&value, 1, "t");
  pb_uint(&value, 8, 1);
  pb_sub(&summary, 1, &value);
  ev.n = 0;
  pb_sub(&ev, 5, &summary);
  CHECK_EQ_INT(decode_pb(&ev, &t, &err), SMR_ERR_FORMAT);
  CHECK(strstr(err.msg, "Summary.Value.tensor") != NULL);
  /* packed float run that is not a multiple of 4 */
  tp.n = 0;
  pb_uint(&tp, 1, SMR_DT_FLOAT);
  pb_bytes(&tp, 5, "abcdef", 6);
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_ERR_FORMAT);
  /* group wire type, invalid wire type, field number 0 */
  const uint8_t group[] = {0x0b, 0x0c}, wt7[] = {0x0f, 0}, zero[] = {0x00, 1};
  CHECK_EQ_INT(smr_event_decode(group, 2, "f", 0, &t, NULL, &err),
               SMR_ERR_FORMAT);
  CHECK_EQ_INT(smr_event_decode(wt7, 2, "f", 0, &t, NULL, &err),
               SMR_ERR_FORMAT);
  CHECK_EQ_INT(smr_event_decode(zero, 2, "f", 0, &t, NULL, &err),
               SMR_ERR_FORMAT);
}

static void test_truncated_and_garbage(void) {
  smr_tensor t;
  smr_error err;
  /* Every prefix of a valid payload is rejected or decodes cleanly; none
   * may crash or leak. */
  for (size_t n = 0; n < 74; n++) {
    char *name = NULL;
    int rc = smr_event_decode(example_payload, n, "f", 0, &t, &name, &err);
    CHECK(rc == SMR_ERR_FORMAT);
    CHECK(name == NULL);
  }
  CHECK_EQ_INT(smr_event_decode(NULL, 0, "f", 0, &t, NULL, &err),
               SMR_ERR_FORMAT);
  const uint8_t junk[] = "this is not a protobuf at all";
  CHECK_EQ_INT(smr_event_decode(junk, sizeof junk, "f", 0, &t, NULL, &err),
               SMR_ERR_FORMAT);
  /* A length prefix running past the payload */
  const uint8_t over[] = {0x2a, 0x7f, 0x0a};
  CHECK_EQ_INT(smr_event_decode(over, 3, "f", 0, &t, NULL, &err),
               SMR_ERR_FORMAT);
}

static void test_unknown_fields_everywhere(void) {
  static const int64_t s2[] = {2};
  float v[2] = {4.0f, -4.0f};
  pb dim = {.n = 0}, shape = {.n = 0}, tp = {.n = 0};
  pb_uint(&dim, 1, 2);
  pb_uint(&dim, 9, 1);
  pb_sub(&shape, 2, &dim);
  pb_f64(&shape, 11, 3.0);
  pb_uint(&tp, 20, 99);
  pb_uint(&tp, 1, SMR_DT_FLOAT);
  pb_sub(&tp, 2, &shape);
  pb_f64(&tp, 21, 1.0);
  pb_bytes(&tp, 4, v, 8);
  pb_uint(&tp, 16, 5); /* uint32_val: undeclared, skipped */
  pb_str(&tp, 15, "variant");
  pb plug = {.n = 0}, md = {.n = 0}, value = {.n = 0}, sum = {.n = 0},
     ev = {.n = 0};
  pb_str(&plug, 1, "mode");
  pb_f32(&plug, 3, 1.0f);
  pb_str(&plug, 2, "3");
  pb_sub(&md, 1, &plug);
  pb_uint(&md, 2, 1);
  pb_sub(&value, 9, &md); /* metadata before the tag: order free */
  pb_str(&value, 30, "opaque");
  pb_sub(&value, 8, &tp);
  pb_str(&value, 1, "t");
  pb_f32(&sum, 7, 2.5f);
  pb_sub(&sum, 1, &value);
  pb_uint(&ev, 15, 1);
  pb_str(&ev, 16, "extra");
  pb_uint(&ev, 2, 11);
  pb_sub(&ev, 5, &sum);
  pb_uint(&ev, (1u << 29) - 1, 0); /* the largest field number */
  smr_tensor t;
  smr_error err;
  char *name = NULL;
  smr_error_clear(&err);
  CHECK_EQ_INT(smr_event_decode(ev.b, ev.n, "f", 0, &t, &name, &err), SMR_OK);
  CHECK_STR(name, "t");
  CHECK_EQ_INT(t.count, 2);
  CHECK(t.data && memcmp(t.data, v, 8) == 0);
  CHECK_EQ_INT(t.step, 11);
  CHECK_EQ_INT(t.mode, 3);
  CHECK_EQ_INT(t.mode_step, 11); /* no mode_step entry: Event.step */
  CHECK(t.wall_time == 0.0);
  (void)s2;
  free(name);
  smr_tensor_release(&t);
}

static void test_merge_and_override(void) {
  static const int64_t s1[] = {1};
  /* dtype written twice: the later one wins (INT32, 4 bytes). */
  pb tp = {.n = 0};
  pb_uint(&tp, 1, SMR_DT_DOUBLE);
  pb_shape(&tp, 1, s1);
  pb_bytes(&tp, 4, "\x01\x00\x00\x00", 4);
  pb_uint(&tp, 1, SMR_DT_INT32);
  smr_tensor t;
  smr_error err;
  CHECK_EQ_INT(decode_tensor_pb(&tp, &t, &err), SMR_OK);
  CHECK_EQ_INT(t.dtype, SMR_DT_INT32);
  smr_tensor_release(&t);
}

/* tensor_content is not copied when the layout is smdebug's; repeated
 * sub-messages (which protobuf merges) are decoded by copying. */
static void test_borrowed_content(void) {
  static const int64_t s2[] = {2};
  static const char four[] = "\x01\x00\x00\x00\x02\x00\x00\x00";
  pb tp = {.n = 0};
  pb_uint(&tp, 1, SMR_DT_INT32);
  pb_shape(&tp, 1, s2);
  pb_bytes(&tp, 4, four, 8);
  pb ev;
  wrap_tensor(&ev, &tp, true);
  smr_tensor t;
  smr_error err;
  CHECK_EQ_INT(smr_event_decode_borrow(ev.b, ev.n, "f", 0, &t, NULL, &err),
               SMR_OK);
  CHECK(t.data > ev.b && t.data + 8 <= ev.b + ev.n);
  CHECK(memcmp(t.data, four, 8) == 0);
  CHECK(smr_tensor_get(&t, 1) == 2.0);
  smr_tensor_release(&t);
  /* the copying decoder never points into the payload */
  CHECK_EQ_INT(smr_event_decode(ev.b, ev.n, "f", 0, &t, NULL, &err), SMR_OK);
  CHECK(t.data < ev.b || t.data >= ev.b + ev.n);
  smr_tensor_release(&t);
  /* tensor_content twice: the last one wins, by copying */
  pb tp2 = tp;
  pb_bytes(&tp2, 4, "\x05\x00\x00\x00\x06\x00\x00\x00", 8);
  wrap_tensor(&ev, &tp2, false);
  CHECK_EQ_INT(decode_pb(&ev, &t, &err), SMR_OK);
  CHECK(smr_tensor_get(&t, 0) == 5.0);
  CHECK(t.data < ev.b || t.data >= ev.b + ev.n);
  smr_tensor_release(&t);
  /* Value.tensor twice (protobuf-c keeps the last): decoded by copying,
   * never from the first one's content */
  pb value = {.n = 0}, summary = {.n = 0}, first = {.n = 0};
  pb_uint(&first, 1, SMR_DT_INT32);
  pb_shape(&first, 1, s2);
  pb_bytes(&first, 4, "\x09\x00\x00\x00\x09\x00\x00\x00", 8);
  pb_str(&value, 1, "x");
  pb_sub(&value, 8, &first);
  pb_sub(&value, 8, &tp);
  pb_sub(&summary, 1, &value);
  ev.n = 0;
  pb_uint(&ev, 2, 3);
  pb_sub(&ev, 5, &summary);
  CHECK_EQ_INT(decode_pb(&ev, &t, &err), SMR_OK);
  CHECK_EQ_INT(t.count, 2);
  CHECK(smr_tensor_get(&t, 1) == 2.0);
  smr_tensor_release(&t);
  /* a long tensor: the shortened length prefixes take fewer bytes */
  enum { N = 1500 }; /* 6000 bytes: two-byte length prefixes */
  static int32_t big[N];
  for (int i = 0; i < N; i++)
    big[i] = i * 3 - 7;
  int64_t sn[] = {N};
  pb *tb = calloc(1, sizeof *tb);
  pb *eb = calloc(1, sizeof *eb);
  pb_uint(tb, 1, SMR_DT_INT32);
  pb_shape(tb, 1, sn);
  pb_bytes(tb, 4, big, sizeof big);
  wrap_tensor(eb, tb, true);
  CHECK_EQ_INT(decode_pb(eb, &t, &err), SMR_OK);
  CHECK(smr_tensor_get(&t, N - 1) == (double)((N - 1) * 3 - 7));
  smr_tensor_release(&t);
  free(tb);
  free(eb);
}

static void test_metadata(void) {
  static const int64_t s1[] = {1};
  pb tp = {.n = 0};
  pb_uint(&tp, 1, SMR_DT_UINT8);
  pb_shape(&tp, 1, s1);
  pb_bytes(&tp, 4, "q", 1);
  pb ev;
  smr_tensor t;
  smr_error err;
  /* no metadata: GLOBAL, mode_step = Event.step */
  wrap_tensor(&ev, &tp, false);
  CHECK_EQ_INT(decode_pb(&ev, &t, &err), SMR_OK);
  CHECK_EQ_INT(t.mode, 4);
  CHECK_EQ_INT(t.mode_step, 7);
  smr_tensor_release(&t);
  /* with metadata */
  wrap_tensor(&ev, &tp, true);
  CHECK_EQ_INT(decode_pb(&ev, &t, &err), SMR_OK);
  CHECK_EQ_INT(t.mode, 2);
  CHECK_EQ_INT(t.mode_step, 5);
  smr_tensor_release(&t);
  /* bad texts */
  const char *bad[][2] = {
      {"mode", "TRAIN"}, {"mode", "9"}, {"mode_step", ""}, {"mode_step", "1x"}};
  for (int i = 0; i < 4; i++) {
    pb value = {.n = 0}, md = {.n = 0}, plug = {.n = 0}, sum = {.n = 0};
    pb_str(&plug, 1, bad[i][0]);
    pb_str(&plug, 2, bad[i][1]);
    pb_sub(&md, 1, &plug);
    pb_str(&value, 1, "t");
    pb_sub(&value, 8, &tp);
    pb_sub(&value, 9, &md);
    pb_sub(&sum, 1, &value);
    ev.n = 0;
    pb_sub(&ev, 5, &sum);
    CHECK_EQ_INT(decode_pb(&ev, &t, &err), SMR_ERR_FORMAT);
  }
  /* " 12 " and "-3" are what Python's int() accepts */
  pb value = {.n = 0}, md = {.n = 0}, plug = {.n = 0}, sum = {.n = 0};
  pb_str(&plug, 1, "mode_step");
  pb_str(&plug, 2, " -3 ");
  pb_sub(&md, 1, &plug);
  pb_str(&value, 1, "t");
  pb_sub(&value, 8, &tp);
  pb_sub(&value, 9, &md);
  pb_sub(&sum, 1, &value);
  ev.n = 0;
  pb_sub(&ev, 5, &sum);
  CHECK_EQ_INT(decode_pb(&ev, &t, &err), SMR_OK);
  CHECK_EQ_INT(t.mode_step, -3);
  smr_tensor_release(&t);
}

static void test_not_a_tensor(void) {
  smr_tensor t;
  smr_error err;
  pb ev = {.n = 0}, sum = {.n = 0}, value = {.n = 0};
  /* event without summary */
  pb_f64(&ev, 1, 5.0);
  pb_str(&ev, 3, "brain.Event:2");
  CHECK_EQ_INT(decode_pb(&ev, &t, &err), SMR_ERR_FORMAT);
  CHECK(strstr(err.msg, "no summary") != NULL);
  /* summary without values */
  ev.n = 0;
  pb_sub(&ev, 5, &sum);
  CHECK_EQ_INT(decode_pb(&ev, &t, &err), SMR_ERR_FORMAT);
  /* a TensorBoard scalar */
  pb_str(&value, 1, "loss");
  pb_f32(&value, 2, 0.5f);
  pb_sub(&sum, 1, &value);
  ev.n = 0;
  pb_sub(&ev, 5, &sum);
  CHECK_EQ_INT(decode_pb(&ev, &t, &err), SMR_ERR_FORMAT);
  CHECK(strstr(err.msg, "loss") && strstr(err.msg, "tensor"));
  /* a value with only a tag */
  value.n = 0;
  sum.n = 0;
  pb_str(&value, 1, "loss");
  pb_sub(&sum, 1, &value);
  ev.n = 0;
  pb_sub(&ev, 5, &sum);
  CHECK_EQ_INT(decode_pb(&ev, &t, &err), SMR_ERR_FORMAT);
}

static void test_encode_errors(void) {
  smr_tensor t;
  memset(&t, 0, sizeof t);
  uint8_t *out;
  size_t len;
  smr_error err;
  uint8_t data[8] = {0};
  t.dtype = SMR_DT_FLOAT;
  t.ndim = 1;
  t.shape[0] = 3;
  t.data = data;
  t.nbytes = 8;
  CHECK_EQ_INT(smr_event_encode(&t, "x", &out, &len, &err), SMR_ERR_USAGE);
  CHECK(out == NULL);
  t.shape[0] = -2;
  CHECK_EQ_INT(smr_event_encode(&t, "x", &out, &len, &err), SMR_ERR_USAGE);
  t.shape[0] = 2;
  t.dtype = 20;
  CHECK_EQ_INT(smr_event_encode(&t, "x", &out, &len, &err), SMR_ERR_USAGE);
  t.dtype = SMR_DT_FLOAT;
  t.ndim = SMR_MAX_DIMS + 1;
  CHECK_EQ_INT(smr_event_encode(&t, "x", &out, &len, &err), SMR_ERR_USAGE);
}

/* ---- real smdebug files ---------------------------------------------------
 */

static void test_real_healthy_trial_file(void) {
  decoded d[32];
  int n = decode_file("trials/healthy_mlp_digits/events/000000000000/"
                      "000000000000_worker_0.tfevents",
                      d, 32);
  CHECK_EQ_INT(n, 15);
  for (int i = 0; i < n; i++)
    CHECK_EQ_INT(d[i].rc, SMR_OK);
  if (n >= 9 && d[0].rc == SMR_OK && d[8].rc == SMR_OK) {
    char hex[65];
    CHECK_STR(d[0].name, "DigitsMLP_layer1.fc.weight");
    CHECK_EQ_INT(d[0].t.dtype, SMR_DT_FLOAT);
    CHECK_EQ_INT(d[0].t.ndim, 2);
    CHECK_EQ_INT(d[0].t.shape[0], 48);
    CHECK_EQ_INT(d[0].t.shape[1], 64);
    CHECK_EQ_INT(d[0].t.count, 3072);
    CHECK_EQ_INT(d[0].t.step, 0);
    CHECK_EQ_INT(d[0].t.mode, 1);
    CHECK_EQ_INT(d[0].t.mode_step, 0);
    sha_of(&d[0].t, hex);
    CHECK_STR(
        hex,
        "51e800744a6508c20dfda0d1b82f83567c2992d997f94496bfb2fb3c2773c76d");
    CHECK_STR(d[8].name, "CrossEntropyLoss_output_0");
    CHECK_EQ_INT(d[8].t.ndim, 0);
    CHECK_EQ_INT(d[8].t.count, 1);
    CHECK(f32_at(&d[8].t, 0) == 2.3488283157348633f);
    sha_of(&d[8].t, hex);
    CHECK_STR(
        hex,
        "cb6875dfd58c10cccee7aae834eeafe0073cff527d9d83f15ec932ffdc324874");
  }
  free_decoded(d, n);
}

/* Decodes every record of a real smdebug file and encodes it again: the
 * bytes must be identical (our encoder writes exactly what smdebug writes).
 * Returns the record count. */
static int reencode_all(const char *rel) {
  char path[512];
  char *buf = NULL;
  size_t len = 0;
  smr_error err;
  CHECK_EQ_INT(smr_read_file(fixture_path(rel, path, sizeof path), 1 << 24,
                             &buf, &len, &err),
               SMR_OK);
  size_t off = 0;
  int records = 0;
  while (buf && off < len) {
    const uint8_t *p;
    uint64_t plen;
    if (smr_record_parse((uint8_t *)buf + off, len - off, "f", off, &p, &plen,
                         &err) != SMR_OK)
      break;
    smr_tensor t;
    char *name = NULL;
    uint8_t *again = NULL;
    size_t alen = 0;
    CHECK_EQ_INT(decode_both(p, plen, off, &t, &name, &err), SMR_OK);
    CHECK_EQ_INT(smr_event_encode(&t, name, &again, &alen, &err), SMR_OK);
    CHECK_EQ_INT(alen, plen);
    CHECK(again && alen == plen && memcmp(again, p, alen) == 0);
    free(again);
    free(name);
    smr_tensor_release(&t);
    off += plen + SMR_RECORD_OVERHEAD;
    records++;
  }
  CHECK_EQ_INT(off, len);
  free(buf);
  return records;
}

static void test_real_reencode_is_identical(void) {
  CHECK_EQ_INT(reencode_all("trials/healthy_mlp_digits/events/000000000000/"
                            "000000000000_worker_0.tfevents"),
               15);
  CHECK(reencode_all("trials/xgboost_balanced_features/events/000000000000/"
                     "000000000000_worker_0.tfevents") > 0);
  CHECK_EQ_INT(reencode_all("synthetic/dtypes_shapes/events/000000000000/"
                            "000000000000_worker_0.tfevents"),
               27);
}

static void test_real_xgboost_strings(void) {
  decoded d[64];
  int n = decode_file("trials/xgboost_balanced_features/events/000000000000/"
                      "000000000000_worker_0.tfevents",
                      d, 64);
  CHECK(n > 0);
  int strings = 0;
  for (int i = 0; i < n; i++) {
    CHECK_EQ_INT(d[i].rc, SMR_OK);
    if (d[i].rc == SMR_OK && d[i].t.dtype == SMR_DT_STRING) {
      strings++;
      CHECK_EQ_INT(d[i].t.stored_dtype, 0);
      CHECK_EQ_INT(d[i].t.ndim, 1);
    }
  }
  CHECK(strings > 0);
  free_decoded(d, n);
}

static void test_fixture_wrong_wire_type(void) {
  decoded d[8];
  int n = decode_file("corrupt/protobuf_wrong_wire_type/events/000000000001/"
                      "000000000001_worker_0.tfevents",
                      d, 8);
  CHECK_EQ_INT(n, 3);
  if (n == 3) {
    CHECK_EQ_INT(d[0].rc, SMR_OK);
    CHECK_STR(d[0].name, "loss");
    CHECK(f32_at(&d[0].t, 0) == 0.5f);
    CHECK_EQ_INT(d[1].rc, SMR_ERR_FORMAT);
    CHECK_EQ_INT(d[1].err_offset, 78);
    CHECK(strstr(d[1].msg, "wrong wire type for field 4 "
                           "(TensorProto.tensor_content): expected "
                           "length-delimited") != NULL);
    CHECK_EQ_INT(d[2].rc, SMR_ERR_FORMAT);
    CHECK_EQ_INT(d[2].err_offset, 185);
    CHECK(strstr(d[2].msg, "wrong wire type for field 1 (TensorProto.dtype)") !=
          NULL);
  }
  free_decoded(d, n);
}

static void test_fixture_unknown_fields(void) {
  decoded d[8];
  int n = decode_file("corrupt/protobuf_unknown_fields/events/000000000001/"
                      "000000000001_worker_0.tfevents",
                      d, 8);
  CHECK_EQ_INT(n, 3);
  for (int i = 0; i < n; i++)
    CHECK_EQ_INT(d[i].rc, SMR_OK);
  if (n == 3 && d[1].rc == SMR_OK) {
    static const float want[6] = {-5, -3, -1, 1, 3, 5};
    char hex[65];
    CHECK_STR(d[1].name, "weights");
    CHECK_EQ_INT(d[1].t.shape[0], 2);
    CHECK_EQ_INT(d[1].t.shape[1], 3);
    CHECK(d[1].t.nbytes == 24 && memcmp(d[1].t.data, want, 24) == 0);
    sha_of(&d[1].t, hex);
    CHECK_STR(
        hex,
        "18bdb4d6e85b8f69f5c4064f06bfd9a061f560db2b76be3ab87a723d9f726129");
    CHECK_EQ_INT(d[1].t.mode, 1);
    CHECK_EQ_INT(d[1].t.mode_step, 1);
  }
  free_decoded(d, n);
}

static void test_fixture_size_mismatch(void) {
  decoded d[8];
  int n = decode_file("corrupt/tensor_content_size_mismatch/events/"
                      "000000000001/000000000001_worker_0.tfevents",
                      d, 8);
  CHECK_EQ_INT(n, 3);
  if (n == 3) {
    CHECK_EQ_INT(d[0].rc, SMR_OK);
    CHECK_EQ_INT(d[1].rc, SMR_ERR_FORMAT);
    CHECK(strstr(d[1].msg, "20 bytes") && strstr(d[1].msg, "24"));
    CHECK_EQ_INT(d[2].rc, SMR_ERR_FORMAT);
    CHECK(strstr(d[2].msg, "35 bytes") && strstr(d[2].msg, "32"));
  }
  free_decoded(d, n);
}

static int stored_dtype_from_name(const char *s) {
  static const char *const names[] = {
      "DT_INVALID",  "DT_FLOAT",   "DT_DOUBLE", "DT_INT32",      "DT_UINT8",
      "DT_INT16",    "DT_INT8",    "DT_STRING", "DT_COMPLEX64",  "DT_INT64",
      "DT_BOOL",     "DT_QINT8",   "DT_QUINT8", "DT_QINT32",     "DT_BFLOAT16",
      "DT_QINT16",   "DT_QUINT16", "DT_UINT16", "DT_COMPLEX128", "DT_HALF",
      "DT_RESOURCE", "DT_VARIANT", "DT_UINT32", "DT_UINT64"};
  if (strncmp(s, "DT_STRING (", 11) == 0)
    return 0; /* smdebug leaves string tensors at DT_INVALID */
  for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
    if (strcmp(s, names[i]) == 0)
      return i;
  return -1;
}

/* Finds the decoded record named `name`. */
static const decoded *find_decoded(const decoded *d, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (d[i].name && strcmp(d[i].name, name) == 0)
      return &d[i];
  return NULL;
}

static void check_expected_tensor(const decoded *d, const cJSON *e) {
  const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
  const cJSON *shape = cJSON_GetObjectItem(e, "shape");
  const cJSON *sha = cJSON_GetObjectItem(e, "sha256");
  const cJSON *values = cJSON_GetObjectItem(e, "values");
  const char *stored = cJSON_GetObjectItem(e, "stored_dtype")->valuestring;
  CHECK_EQ_INT(d->t.stored_dtype, stored_dtype_from_name(stored));
  CHECK_EQ_INT(d->t.ndim, cJSON_GetArraySize(shape));
  for (int i = 0; i < d->t.ndim && i < cJSON_GetArraySize(shape); i++)
    CHECK_EQ_INT(d->t.shape[i], cJSON_GetArrayItem(shape, i)->valuedouble);
  CHECK_EQ_INT(d->t.mode, 4);
  CHECK_EQ_INT(d->t.mode_step, 0);
  if (d->t.dtype == SMR_DT_STRING) {
    CHECK(values != NULL);
    CHECK_EQ_INT(d->t.count, cJSON_GetArraySize(values));
    for (int i = 0; i < d->t.count && values; i++) {
      const char *want = cJSON_GetArrayItem(values, i)->valuestring;
      CHECK(want && d->t.string_lens[i] == strlen(want) &&
            memcmp(d->t.strings[i], want, strlen(want)) == 0);
    }
    return;
  }
  char hex[65];
  sha_of(&d->t, hex);
  if (strcmp(hex, sha->valuestring) != 0)
    fprintf(stderr, "tensor %s: sha256 differs\n", name);
  CHECK_STR(hex, sha->valuestring);
}

static void test_fixture_every_dtype_and_shape(void) {
  static decoded d[64];
  int n = decode_file("synthetic/dtypes_shapes/events/000000000000/"
                      "000000000000_worker_0.tfevents",
                      d, 64);
  char path[512], *json;
  size_t len;
  smr_error err;
  CHECK_EQ_INT(smr_read_file(fixture_path("synthetic/dtypes_shapes/EXPECT.json",
                                          path, sizeof path),
                             1 << 24, &json, &len, &err),
               SMR_OK);
  cJSON *root = json ? cJSON_Parse(json) : NULL;
  const cJSON *tensors = cJSON_GetObjectItem(root, "tensors");
  CHECK(tensors != NULL);
  CHECK_EQ_INT(n, cJSON_GetArraySize(tensors));
  for (int i = 0; i < n; i++)
    CHECK_EQ_INT(d[i].rc, SMR_OK);
  const cJSON *e;
  cJSON_ArrayForEach(e, tensors) {
    const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
    const decoded *got = find_decoded(d, n, name);
    CHECK(got != NULL);
    if (got)
      check_expected_tensor(got, e);
  }
  cJSON_Delete(root);
  free(json);
  free_decoded(d, n);
}

int main(void) {
  TEST_RUN(test_encode_worked_example);
  TEST_RUN(test_decode_worked_example);
  TEST_RUN(test_roundtrip_every_dtype);
  TEST_RUN(test_roundtrip_zero_size);
  TEST_RUN(test_zero_d);
  TEST_RUN(test_strings_roundtrip);
  TEST_RUN(test_strings_errors);
  TEST_RUN(test_typed_float_packed_and_unpacked);
  TEST_RUN(test_typed_int_broadcast_and_signedness);
  TEST_RUN(test_typed_other_fields);
  TEST_RUN(test_typed_errors);
  TEST_RUN(test_shape_errors);
  TEST_RUN(test_size_mismatch);
  TEST_RUN(test_wrong_wire_type);
  TEST_RUN(test_truncated_and_garbage);
  TEST_RUN(test_unknown_fields_everywhere);
  TEST_RUN(test_merge_and_override);
  TEST_RUN(test_borrowed_content);
  TEST_RUN(test_metadata);
  TEST_RUN(test_not_a_tensor);
  TEST_RUN(test_encode_errors);
  TEST_RUN(test_real_healthy_trial_file);
  TEST_RUN(test_real_reencode_is_identical);
  TEST_RUN(test_real_xgboost_strings);
  TEST_RUN(test_fixture_wrong_wire_type);
  TEST_RUN(test_fixture_unknown_fields);
  TEST_RUN(test_fixture_size_mismatch);
  TEST_RUN(test_fixture_every_dtype_and_shape);
  return TEST_REPORT("test_event");
}
