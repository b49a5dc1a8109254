/* test_tensor.c - dtype tables, element widening, reductions, statistics,
 * SHA-256 and the tensor fingerprint.  Tensors are views built by hand over
 * static arrays; the element bytes are written in host order, so the tests
 * assume a little-endian host (checked in main). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/sha256.h"
#include "format/tensor.h"
#include "unit.h"

/* ---- helpers --------------------------------------------------------- */

static smr_tensor view(int dtype, const void *data, int64_t count) {
  smr_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.stored_dtype = dtype;
  t.ndim = 1;
  t.shape[0] = count;
  t.count = count;
  t.data = data;
  t.nbytes = (size_t)count * smr_dtype_size(dtype);
  return t;
}

static double reduce_ok(const smr_tensor *t, smr_reduction r, bool abs) {
  double out = -12345.0;
  smr_error err;
  smr_error_clear(&err);
  int rc = smr_tensor_reduce(t, r, abs, &out, &err);
  if (rc != SMR_OK)
    fprintf(stderr, "reduce %s abs=%d: %s\n", smr_reduction_name(r), abs,
            err.msg);
  CHECK_EQ_INT(rc, SMR_OK);
  return out;
}

static int reduce_status(const smr_tensor *t, smr_reduction r, bool abs,
                         char *msg, size_t msg_len) {
  double out = 0;
  smr_error err;
  smr_error_clear(&err);
  int rc = smr_tensor_reduce(t, r, abs, &out, &err);
  if (msg)
    snprintf(msg, msg_len, "%s", err.msg);
  return rc;
}

static float f32_bits(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}

static double f64_bits(uint64_t b) {
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
}

static void check_sha(const smr_tensor *t, const char *expected) {
  char hex[65];
  smr_tensor_sha256(t, hex);
  CHECK_STR(hex, expected);
}

/* Expected values of all ten reductions, plain ([0]) and abs ([1]). */
typedef struct expected {
  double v[SMR_RED_COUNT_][2];
} expected;

static void check_all_reductions(const smr_tensor *t, const expected *e) {
  for (int r = 0; r < SMR_RED_COUNT_; r++)
    for (int abs = 0; abs < 2; abs++) {
      double got = reduce_ok(t, (smr_reduction)r, abs);
      if (!(fabs(got - e->v[r][abs]) <= 1e-15 * fabs(e->v[r][abs])))
        fprintf(stderr, "  dtype %s %s abs=%d: %.17g expected %.17g\n",
                smr_dtype_numpy_name(t->dtype),
                smr_reduction_name((smr_reduction)r), abs, got, e->v[r][abs]);
      CHECK_NEAR(got, e->v[r][abs], 1e-15);
    }
}

/* ---- SHA-256 --------------------------------------------------------- */

static void test_sha256_vectors(void) {
  char hex[65];
  smr_sha256_hex("abc", 3, hex);
  CHECK_STR(hex,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  smr_sha256_hex("", 0, hex);
  CHECK_STR(hex,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  smr_sha256_hex(m448, strlen(m448), hex);
  CHECK_STR(hex,
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                     "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
  smr_sha256_hex(m896, strlen(m896), hex);
  CHECK_STR(hex,
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

static void test_sha256_million_a(void) {
  char chunk[1000], hex[65];
  memset(chunk, 'a', sizeof chunk);
  smr_sha256 c;
  smr_sha256_init(&c);
  for (int i = 0; i < 1000; i++)
    smr_sha256_update(&c, chunk, sizeof chunk);
  smr_sha256_final_hex(&c, hex);
  CHECK_STR(hex,
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* Feeding the same bytes in uneven pieces gives the one-shot digest, for
 * every length around the padding boundaries (55, 56, 63, 64 bytes). */
static void test_sha256_incremental(void) {
  uint8_t msg[300];
  for (size_t i = 0; i < sizeof msg; i++)
    msg[i] = (uint8_t)(i * 7 + 3);
  for (size_t len = 0; len <= sizeof msg; len++) {
    char one[65], pieces[65];
    smr_sha256_hex(msg, len, one);
    smr_sha256 c;
    smr_sha256_init(&c);
    size_t off = 0, step = 1;
    while (off < len) {
      size_t take = step < len - off ? step : len - off;
      smr_sha256_update(&c, msg + off, take);
      off += take;
      step = step * 3 % 67 + 1;
    }
    smr_sha256_update(&c, NULL, 0);
    smr_sha256_final_hex(&c, pieces);
    CHECK_STR(pieces, one);
  }
}

/* ---- dtype tables ---------------------------------------------------- */

static void test_dtype_tables(void) {
  CHECK_EQ_INT(smr_dtype_size(SMR_DT_FLOAT), 4);
  CHECK_EQ_INT(smr_dtype_size(SMR_DT_DOUBLE), 8);
  CHECK_EQ_INT(smr_dtype_size(SMR_DT_HALF), 2);
  CHECK_EQ_INT(smr_dtype_size(SMR_DT_BFLOAT16), 2);
  CHECK_EQ_INT(smr_dtype_size(SMR_DT_BOOL), 1);
  CHECK_EQ_INT(smr_dtype_size(SMR_DT_INT8), 1);
  CHECK_EQ_INT(smr_dtype_size(SMR_DT_QINT32), 4);
  CHECK_EQ_INT(smr_dtype_size(SMR_DT_COMPLEX64), 8);
  CHECK_EQ_INT(smr_dtype_size(SMR_DT_COMPLEX128), 16);
  CHECK_EQ_INT(smr_dtype_size(SMR_DT_UINT64), 8);
  CHECK_EQ_INT(smr_dtype_size(SMR_DT_STRING), 0);
  CHECK_EQ_INT(smr_dtype_size(SMR_DT_INVALID), 0);
  CHECK_EQ_INT(smr_dtype_size(24), 0);
  CHECK_EQ_INT(smr_dtype_size(-1), 0);
  CHECK_EQ_INT(smr_dtype_size(1000), 0);

  CHECK_STR(smr_dtype_numpy_name(SMR_DT_HALF), "float16");
  CHECK_STR(smr_dtype_numpy_name(SMR_DT_FLOAT), "float32");
  CHECK_STR(smr_dtype_numpy_name(SMR_DT_DOUBLE), "float64");
  CHECK_STR(smr_dtype_numpy_name(SMR_DT_INT8), "int8");
  CHECK_STR(smr_dtype_numpy_name(SMR_DT_UINT64), "uint64");
  CHECK_STR(smr_dtype_numpy_name(SMR_DT_BOOL), "bool");
  CHECK_STR(smr_dtype_numpy_name(SMR_DT_COMPLEX64), "complex64");
  CHECK_STR(smr_dtype_numpy_name(SMR_DT_COMPLEX128), "complex128");
  CHECK_STR(smr_dtype_numpy_name(SMR_DT_STRING), "str");
  CHECK_STR(smr_dtype_numpy_name(SMR_DT_BFLOAT16), "bfloat16");
  CHECK_STR(smr_dtype_numpy_name(SMR_DT_QINT8), "int8");
  CHECK_STR(smr_dtype_numpy_name(SMR_DT_QUINT8), "uint8");
  CHECK_STR(smr_dtype_numpy_name(SMR_DT_QINT16), "int16");
  CHECK_STR(smr_dtype_numpy_name(SMR_DT_QUINT16), "uint16");
  CHECK_STR(smr_dtype_numpy_name(SMR_DT_QINT32), "int32");
  CHECK_STR(smr_dtype_numpy_name(99), "unknown");

  CHECK_STR(smr_dtype_tf_name(SMR_DT_INVALID), "DT_INVALID");
  CHECK_STR(smr_dtype_tf_name(SMR_DT_FLOAT), "DT_FLOAT");
  CHECK_STR(smr_dtype_tf_name(SMR_DT_HALF), "DT_HALF");
  CHECK_STR(smr_dtype_tf_name(SMR_DT_STRING), "DT_STRING");
  CHECK_STR(smr_dtype_tf_name(SMR_DT_UINT64), "DT_UINT64");
  CHECK_STR(smr_dtype_tf_name(SMR_DT_QUINT16), "DT_QUINT16");
  CHECK_STR(smr_dtype_tf_name(99), "DT_99");
  CHECK_STR(smr_dtype_tf_name(-3), "DT_-3");

  CHECK(smr_dtype_is_complex(SMR_DT_COMPLEX64));
  CHECK(smr_dtype_is_complex(SMR_DT_COMPLEX128));
  CHECK(!smr_dtype_is_complex(SMR_DT_FLOAT));
}

static void test_reduction_names(void) {
  for (int r = 0; r < SMR_RED_COUNT_; r++)
    CHECK_EQ_INT(smr_reduction_from_name(smr_reduction_name((smr_reduction)r)),
                 r);
  CHECK_STR(smr_reduction_name(SMR_RED_VARIANCE), "variance");
  CHECK_STR(smr_reduction_name(SMR_RED_LINF), "linf");
  CHECK_EQ_INT(smr_reduction_from_name("l1_norm"), SMR_RED_L1);
  CHECK_EQ_INT(smr_reduction_from_name("l2_norm"), SMR_RED_L2);
  CHECK_EQ_INT(smr_reduction_from_name("median"), -1);
  CHECK_EQ_INT(smr_reduction_from_name("abs_mean"), -1);
  CHECK_EQ_INT(smr_reduction_from_name(""), -1);
  CHECK_EQ_INT(smr_reduction_from_name(NULL), -1);
}

/* ---- release --------------------------------------------------------- */

static int released_count;
static void *released_owner;
static void note_release(void *owner) {
  released_count++;
  released_owner = owner;
}

static void test_release(void) {
  static const float data[2] = {1, 2};
  int owner_token = 0;
  smr_tensor t = view(SMR_DT_FLOAT, data, 2);
  t.owner_ = &owner_token;
  t.release_ = note_release;
  smr_tensor_release(&t);
  CHECK_EQ_INT(released_count, 1);
  CHECK(released_owner == &owner_token);
  smr_tensor zero;
  memset(&zero, 0, sizeof zero);
  CHECK(memcmp(&t, &zero, sizeof t) == 0);
  smr_tensor_release(&t); /* nothing attached any more */
  CHECK_EQ_INT(released_count, 1);
  smr_tensor_release(NULL);
}

/* ---- element access -------------------------------------------------- */

static void test_get_every_dtype(void) {
  static const int8_t i8[] = {-128, -1, 0, 1, 127};
  smr_tensor t = view(SMR_DT_INT8, i8, 5);
  CHECK(smr_tensor_get(&t, 0) == -128.0);
  CHECK(smr_tensor_get(&t, 1) == -1.0);
  CHECK(smr_tensor_get(&t, 4) == 127.0);
  t.dtype = SMR_DT_QINT8;
  CHECK(smr_tensor_get(&t, 0) == -128.0);
  t.dtype = SMR_DT_UINT8;
  CHECK(smr_tensor_get(&t, 0) == 128.0);
  CHECK(smr_tensor_get(&t, 1) == 255.0);
  t.dtype = SMR_DT_QUINT8;
  CHECK(smr_tensor_get(&t, 1) == 255.0);

  static const int16_t i16[] = {-32768, -1, 0, 32767};
  t = view(SMR_DT_INT16, i16, 4);
  CHECK(smr_tensor_get(&t, 0) == -32768.0);
  CHECK(smr_tensor_get(&t, 3) == 32767.0);
  t.dtype = SMR_DT_QINT16;
  CHECK(smr_tensor_get(&t, 1) == -1.0);
  t.dtype = SMR_DT_UINT16;
  CHECK(smr_tensor_get(&t, 0) == 32768.0);
  CHECK(smr_tensor_get(&t, 1) == 65535.0);
  t.dtype = SMR_DT_QUINT16;
  CHECK(smr_tensor_get(&t, 1) == 65535.0);

  static const int32_t i32[] = {INT32_MIN, -1, 0, INT32_MAX};
  t = view(SMR_DT_INT32, i32, 4);
  CHECK(smr_tensor_get(&t, 0) == -2147483648.0);
  CHECK(smr_tensor_get(&t, 3) == 2147483647.0);
  t.dtype = SMR_DT_QINT32;
  CHECK(smr_tensor_get(&t, 1) == -1.0);
  t.dtype = SMR_DT_UINT32;
  CHECK(smr_tensor_get(&t, 1) == 4294967295.0);

  static const int64_t i64[] = {INT64_MIN, -1, 0, 9007199254740993LL,
                                INT64_MAX};
  t = view(SMR_DT_INT64, i64, 5);
  CHECK(smr_tensor_get(&t, 0) == -9223372036854775808.0);
  CHECK(smr_tensor_get(&t, 1) == -1.0);
  CHECK(smr_tensor_get(&t, 3) == (double)9007199254740993LL);
  CHECK(smr_tensor_get(&t, 4) == 9223372036854775808.0);
  t.dtype = SMR_DT_UINT64;
  CHECK(smr_tensor_get(&t, 1) == 18446744073709551615.0);

  static const double f64[] = {0.1, -5e-324, 1e300};
  t = view(SMR_DT_DOUBLE, f64, 3);
  CHECK(smr_tensor_get(&t, 0) == 0.1);
  CHECK(smr_tensor_get(&t, 1) == -5e-324);
  CHECK(smr_tensor_get(&t, 2) == 1e300);

  static const float f32[] = {0.1f, -1e30f, 1.401298464324817e-45f};
  t = view(SMR_DT_FLOAT, f32, 3);
  CHECK(smr_tensor_get(&t, 0) == (double)0.1f);
  CHECK(smr_tensor_get(&t, 1) == -1.0000000150474662e+30);
  CHECK(smr_tensor_get(&t, 2) == 1.401298464324817e-45);

  static const uint8_t b[] = {1, 0, 2, 255};
  t = view(SMR_DT_BOOL, b, 4);
  CHECK(smr_tensor_get(&t, 0) == 1.0);
  CHECK(smr_tensor_get(&t, 1) == 0.0);
  CHECK(smr_tensor_get(&t, 2) == 1.0); /* any nonzero byte is true */
  CHECK(smr_tensor_get(&t, 3) == 1.0);

  static const float c64[] = {1, 2, -0.5f, -0.25f};
  t = view(SMR_DT_COMPLEX64, c64, 2);
  CHECK(smr_tensor_get(&t, 0) == 1.0); /* the real part */
  CHECK(smr_tensor_get(&t, 1) == -0.5);
  static const double c128[] = {3, -4, 7, 8};
  t = view(SMR_DT_COMPLEX128, c128, 2);
  CHECK(smr_tensor_get(&t, 0) == 3.0);
  CHECK(smr_tensor_get(&t, 1) == 7.0);
}

static void test_get_out_of_range(void) {
  static const float f32[] = {1, 2};
  smr_tensor t = view(SMR_DT_FLOAT, f32, 2);
  CHECK(isnan(smr_tensor_get(&t, -1)));
  CHECK(isnan(smr_tensor_get(&t, 2)));
  t.nbytes = 4; /* shorter than the shape */
  CHECK(isnan(smr_tensor_get(&t, 1)));
  t = view(SMR_DT_STRING, NULL, 0);
  CHECK(isnan(smr_tensor_get(&t, 0)));
  t = view(99, f32, 2);
  CHECK(isnan(smr_tensor_get(&t, 0)));
}

static void test_get_unaligned(void) {
  /* Element bytes inside a protobuf buffer need not be aligned. */
  static const uint8_t bytes[] = {0xff, 0x00, 0x00, 0xc0, 0x3f, 0, 0, 0, 0};
  smr_tensor t = view(SMR_DT_FLOAT, bytes + 1, 1);
  CHECK(smr_tensor_get(&t, 0) == 1.5);
  CHECK(reduce_ok(&t, SMR_RED_SUM, false) == 1.5);
  t = view(SMR_DT_DOUBLE, bytes + 1, 1);
  CHECK(smr_tensor_get(&t, 0) == f64_bits(0x3fc00000ULL));
}

static void test_half_conversion(void) {
  static const uint16_t h[] = {0x0000, 0x8000, 0x3c00, 0x3e00, 0xc080, 0x7bff,
                               0xfbff, 0x0400, 0x0001, 0x03ff, 0x8001, 0x7c00,
                               0xfc00, 0x7e00, 0xfe01, 0x3555};
  smr_tensor t = view(SMR_DT_HALF, h, 16);
  CHECK(smr_tensor_get(&t, 0) == 0.0 && !signbit(smr_tensor_get(&t, 0)));
  CHECK(smr_tensor_get(&t, 1) == 0.0 && signbit(smr_tensor_get(&t, 1)));
  CHECK(smr_tensor_get(&t, 2) == 1.0);
  CHECK(smr_tensor_get(&t, 3) == 1.5);
  CHECK(smr_tensor_get(&t, 4) == -2.25);
  CHECK(smr_tensor_get(&t, 5) == 65504.0);
  CHECK(smr_tensor_get(&t, 6) == -65504.0);
  CHECK(smr_tensor_get(&t, 7) == 6.103515625e-05);       /* smallest normal */
  CHECK(smr_tensor_get(&t, 8) == 5.960464477539063e-08); /* 2^-24 */
  CHECK(smr_tensor_get(&t, 9) == 1023 * 0x1p-24);        /* largest subnormal */
  CHECK(smr_tensor_get(&t, 10) == -0x1p-24);
  CHECK(smr_tensor_get(&t, 11) == INFINITY);
  CHECK(smr_tensor_get(&t, 12) == -INFINITY);
  CHECK(isnan(smr_tensor_get(&t, 13)));
  CHECK(isnan(smr_tensor_get(&t, 14)));
  CHECK(smr_tensor_get(&t, 15) == 0.333251953125);

  /* The f16_1d tensor of the dtypes_shapes fixture. */
  static const uint16_t fixture[] = {0x0000, 0x8000, 0x3e00, 0xc080,
                                     0x7bff, 0xfbff, 0x0400, 0x0001,
                                     0x7c00, 0xfc00, 0x7e00};
  t = view(SMR_DT_HALF, fixture, 11);
  check_sha(&t,
            "d462e6237b81d688e6d3643c64ec389ea0b61c040905b0e6e7db5f839945019d");
}

static void test_bfloat16_conversion(void) {
  static const uint16_t b[] = {0x0000, 0x8000, 0x3f80, 0xc000, 0x4049, 0x0001,
                               0x007f, 0x0080, 0x7f7f, 0x7f80, 0xff80, 0x7fc0};
  smr_tensor t = view(SMR_DT_BFLOAT16, b, 12);
  CHECK(smr_tensor_get(&t, 0) == 0.0 && !signbit(smr_tensor_get(&t, 0)));
  CHECK(smr_tensor_get(&t, 1) == 0.0 && signbit(smr_tensor_get(&t, 1)));
  CHECK(smr_tensor_get(&t, 2) == 1.0);
  CHECK(smr_tensor_get(&t, 3) == -2.0);
  CHECK(smr_tensor_get(&t, 4) == 3.140625);
  CHECK(smr_tensor_get(&t, 5) == 0x1p-133); /* smallest subnormal */
  CHECK(smr_tensor_get(&t, 6) == 127 * 0x1p-133);
  CHECK(smr_tensor_get(&t, 7) == 0x1p-126); /* smallest normal */
  CHECK(smr_tensor_get(&t, 8) == 0x1.fep127);
  CHECK(smr_tensor_get(&t, 9) == INFINITY);
  CHECK(smr_tensor_get(&t, 10) == -INFINITY);
  CHECK(isnan(smr_tensor_get(&t, 11)));
}

/* ---- reductions on hand-computed values ------------------------------ */

/* x = {1, -2, 3, -4}: mean -0.5, deviations ±1.5, ±3.5 -> variance 7.25;
 * |x| = {1, 2, 3, 4}: mean 2.5, variance 1.25. */
static const expected signed_expect = {{
    [SMR_RED_MIN] = {-4, 1},
    [SMR_RED_MAX] = {3, 4},
    [SMR_RED_MEAN] = {-0.5, 2.5},
    [SMR_RED_STD] = {2.6925824035672520, 1.1180339887498949},
    [SMR_RED_VARIANCE] = {7.25, 1.25},
    [SMR_RED_SUM] = {-2, 10},
    [SMR_RED_PROD] = {24, 24},
    [SMR_RED_L1] = {10, 10},
    [SMR_RED_L2] = {5.4772255750516612, 5.4772255750516612},
    [SMR_RED_LINF] = {4, 4},
}};

/* x = {1, 2, 3, 4}: as |x| above in both columns. */
static const expected unsigned_expect = {{
    [SMR_RED_MIN] = {1, 1},
    [SMR_RED_MAX] = {4, 4},
    [SMR_RED_MEAN] = {2.5, 2.5},
    [SMR_RED_STD] = {1.1180339887498949, 1.1180339887498949},
    [SMR_RED_VARIANCE] = {1.25, 1.25},
    [SMR_RED_SUM] = {10, 10},
    [SMR_RED_PROD] = {24, 24},
    [SMR_RED_L1] = {10, 10},
    [SMR_RED_L2] = {5.4772255750516612, 5.4772255750516612},
    [SMR_RED_LINF] = {4, 4},
}};

static void test_reduce_signed_dtypes(void) {
  static const float f32[] = {1, -2, 3, -4};
  static const double f64[] = {1, -2, 3, -4};
  static const uint16_t f16[] = {0x3c00, 0xc000, 0x4200, 0xc400};
  static const uint16_t bf16[] = {0x3f80, 0xc000, 0x4040, 0xc080};
  static const int8_t i8[] = {1, -2, 3, -4};
  static const int16_t i16[] = {1, -2, 3, -4};
  static const int32_t i32[] = {1, -2, 3, -4};
  static const int64_t i64[] = {1, -2, 3, -4};
  const struct {
    int dtype;
    const void *data;
  } cases[] = {
      {SMR_DT_FLOAT, f32},     {SMR_DT_DOUBLE, f64}, {SMR_DT_HALF, f16},
      {SMR_DT_BFLOAT16, bf16}, {SMR_DT_INT8, i8},    {SMR_DT_QINT8, i8},
      {SMR_DT_INT16, i16},     {SMR_DT_QINT16, i16}, {SMR_DT_INT32, i32},
      {SMR_DT_QINT32, i32},    {SMR_DT_INT64, i64}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    smr_tensor t = view(cases[c].dtype, cases[c].data, 4);
    check_all_reductions(&t, &signed_expect);
  }
}

static void test_reduce_unsigned_dtypes(void) {
  static const uint8_t u8[] = {1, 2, 3, 4};
  static const uint16_t u16[] = {1, 2, 3, 4};
  static const uint32_t u32[] = {1, 2, 3, 4};
  static const uint64_t u64[] = {1, 2, 3, 4};
  const struct {
    int dtype;
    const void *data;
  } cases[] = {{SMR_DT_UINT8, u8},   {SMR_DT_QUINT8, u8},
               {SMR_DT_UINT16, u16}, {SMR_DT_QUINT16, u16},
               {SMR_DT_UINT32, u32}, {SMR_DT_UINT64, u64}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    smr_tensor t = view(cases[c].dtype, cases[c].data, 4);
    check_all_reductions(&t, &unsigned_expect);
  }
}

static void test_reduce_bool(void) {
  /* {1, 0, 1, 1}: mean 0.75, variance 0.1875. */
  static const uint8_t b[] = {1, 0, 1, 1};
  static const expected e = {{
      [SMR_RED_MIN] = {0, 0},
      [SMR_RED_MAX] = {1, 1},
      [SMR_RED_MEAN] = {0.75, 0.75},
      [SMR_RED_STD] = {0.4330127018922193, 0.4330127018922193},
      [SMR_RED_VARIANCE] = {0.1875, 0.1875},
      [SMR_RED_SUM] = {3, 3},
      [SMR_RED_PROD] = {0, 0},
      [SMR_RED_L1] = {3, 3},
      [SMR_RED_L2] = {1.7320508075688772, 1.7320508075688772},
      [SMR_RED_LINF] = {1, 1},
  }};
  smr_tensor t = view(SMR_DT_BOOL, b, 4);
  check_all_reductions(&t, &e);
}

static void test_reduce_extreme_integers(void) {
  static const int64_t i64[] = {INT64_MIN, INT64_MAX};
  smr_tensor t = view(SMR_DT_INT64, i64, 2);
  CHECK(reduce_ok(&t, SMR_RED_MIN, false) == -0x1p63);
  CHECK(reduce_ok(&t, SMR_RED_MAX, false) == 0x1p63);
  CHECK(reduce_ok(&t, SMR_RED_MIN, true) == 0x1p63);
  CHECK(reduce_ok(&t, SMR_RED_SUM, false) == 0.0); /* both round to 2^63 */
  static const int8_t i8[] = {-128, 127};
  t = view(SMR_DT_INT8, i8, 2);
  CHECK(reduce_ok(&t, SMR_RED_MAX, true) == 128.0); /* no int8 overflow */
  CHECK(reduce_ok(&t, SMR_RED_PROD, false) == -16256.0);
}

/* A single element, and 0-d tensors (count 1, ndim 0). */
static void test_reduce_scalar(void) {
  static const float v = -2.5f;
  smr_tensor t = view(SMR_DT_FLOAT, &v, 1);
  t.ndim = 0;
  CHECK(reduce_ok(&t, SMR_RED_MEAN, false) == -2.5);
  CHECK(reduce_ok(&t, SMR_RED_MEAN, true) == 2.5);
  CHECK(reduce_ok(&t, SMR_RED_VARIANCE, false) == 0.0);
  CHECK(reduce_ok(&t, SMR_RED_STD, true) == 0.0);
  CHECK(reduce_ok(&t, SMR_RED_PROD, false) == -2.5);
  CHECK(reduce_ok(&t, SMR_RED_L2, false) == 2.5);
}

static void test_reduce_nan_propagates(void) {
  static const float f[] = {1, NAN, 2, -3, 4, 5, 6, 7, 8, 9};
  smr_tensor t = view(SMR_DT_FLOAT, f, 10);
  for (int r = 0; r < SMR_RED_COUNT_; r++)
    for (int abs = 0; abs < 2; abs++)
      CHECK(isnan(reduce_ok(&t, (smr_reduction)r, abs)));
  /* NaN as the first and as the last element, in the unrolled part and in
   * the tail of the scans. */
  static const double first[] = {NAN, 1, 2, 3, 4, 5};
  static const double last[] = {1, 2, 3, 4, 5, NAN};
  t = view(SMR_DT_DOUBLE, first, 6);
  CHECK(isnan(reduce_ok(&t, SMR_RED_MIN, false)));
  CHECK(isnan(reduce_ok(&t, SMR_RED_MAX, true)));
  t = view(SMR_DT_DOUBLE, last, 6);
  CHECK(isnan(reduce_ok(&t, SMR_RED_MIN, false)));
  CHECK(isnan(reduce_ok(&t, SMR_RED_LINF, false)));
  static const uint16_t h[] = {0x3c00, 0x7e00};
  t = view(SMR_DT_HALF, h, 2);
  CHECK(isnan(reduce_ok(&t, SMR_RED_MAX, false)));
  CHECK(isnan(reduce_ok(&t, SMR_RED_SUM, false)));
}

static void test_reduce_inf_arithmetic(void) {
  static const float f[] = {1, INFINITY, -INFINITY};
  smr_tensor t = view(SMR_DT_FLOAT, f, 3);
  CHECK(reduce_ok(&t, SMR_RED_MIN, false) == -INFINITY);
  CHECK(reduce_ok(&t, SMR_RED_MAX, false) == INFINITY);
  CHECK(reduce_ok(&t, SMR_RED_MIN, true) == 1.0);
  CHECK(isnan(reduce_ok(&t, SMR_RED_SUM, false))); /* inf + -inf */
  CHECK(isnan(reduce_ok(&t, SMR_RED_MEAN, false)));
  CHECK(reduce_ok(&t, SMR_RED_SUM, true) == INFINITY);
  CHECK(reduce_ok(&t, SMR_RED_MEAN, true) == INFINITY);
  CHECK(reduce_ok(&t, SMR_RED_PROD, false) == -INFINITY);
  CHECK(reduce_ok(&t, SMR_RED_L1, false) == INFINITY);
  CHECK(reduce_ok(&t, SMR_RED_L2, false) == INFINITY);
  CHECK(reduce_ok(&t, SMR_RED_LINF, false) == INFINITY);
  CHECK(isnan(reduce_ok(&t, SMR_RED_VARIANCE, true))); /* inf - inf */

  static const double g[] = {INFINITY, 1, 2};
  t = view(SMR_DT_DOUBLE, g, 3);
  CHECK(reduce_ok(&t, SMR_RED_SUM, false) == INFINITY);
  CHECK(reduce_ok(&t, SMR_RED_MEAN, false) == INFINITY);
  CHECK(isnan(reduce_ok(&t, SMR_RED_STD, false)));
  static const double z[] = {0, INFINITY};
  t = view(SMR_DT_DOUBLE, z, 2);
  CHECK(isnan(reduce_ok(&t, SMR_RED_PROD, false))); /* 0 * inf */
  /* Finite values whose sum overflows: inf, as in IEEE arithmetic. */
  static const double big[] = {DBL_MAX, DBL_MAX};
  t = view(SMR_DT_DOUBLE, big, 2);
  CHECK(reduce_ok(&t, SMR_RED_SUM, false) == INFINITY);
}

static void test_reduce_empty(void) {
  smr_tensor t = view(SMR_DT_FLOAT, NULL, 0);
  t.shape[0] = 0;
  CHECK(reduce_ok(&t, SMR_RED_SUM, false) == 0.0);
  CHECK(reduce_ok(&t, SMR_RED_SUM, true) == 0.0);
  CHECK(reduce_ok(&t, SMR_RED_PROD, false) == 1.0);
  CHECK(reduce_ok(&t, SMR_RED_L1, false) == 0.0);
  CHECK(reduce_ok(&t, SMR_RED_L2, false) == 0.0);
  CHECK(reduce_ok(&t, SMR_RED_LINF, false) == 0.0);
  const smr_reduction need_one[] = {SMR_RED_MIN, SMR_RED_MAX, SMR_RED_MEAN,
                                    SMR_RED_STD, SMR_RED_VARIANCE};
  for (size_t i = 0; i < sizeof need_one / sizeof need_one[0]; i++)
    for (int abs = 0; abs < 2; abs++) {
      char msg[SMR_ERR_MSG_MAX];
      CHECK_EQ_INT(reduce_status(&t, need_one[i], abs, msg, sizeof msg),
                   SMR_ERR_USAGE);
      CHECK(strstr(msg, "reduction of an empty tensor") != NULL);
    }
  /* A 2x0x3 int32 tensor is empty too. */
  smr_tensor e = view(SMR_DT_INT32, NULL, 0);
  e.ndim = 3;
  e.shape[0] = 2;
  e.shape[1] = 0;
  e.shape[2] = 3;
  CHECK(reduce_ok(&e, SMR_RED_SUM, false) == 0.0);
  CHECK_EQ_INT(reduce_status(&e, SMR_RED_MEAN, false, NULL, 0), SMR_ERR_USAGE);
}

static void test_reduce_complex(void) {
  /* |z| = {5, sqrt(0.3125)}. */
  static const float c64[] = {3, 4, -0.5f, -0.25f};
  smr_tensor t = view(SMR_DT_COMPLEX64, c64, 2);
  double m1 = 0.55901699437494745;
  CHECK_NEAR(reduce_ok(&t, SMR_RED_MIN, true), m1, 1e-15);
  CHECK(reduce_ok(&t, SMR_RED_MAX, true) == 5.0);
  CHECK_NEAR(reduce_ok(&t, SMR_RED_MEAN, true), (5 + m1) / 2, 1e-15);
  CHECK_NEAR(reduce_ok(&t, SMR_RED_SUM, true), 5 + m1, 1e-15);
  CHECK_NEAR(reduce_ok(&t, SMR_RED_VARIANCE, true), (5 - m1) * (5 - m1) / 4,
             1e-14);
  CHECK_NEAR(reduce_ok(&t, SMR_RED_PROD, true), 5 * m1, 1e-15);
  CHECK_NEAR(reduce_ok(&t, SMR_RED_L1, false), 5 + m1, 1e-15);
  CHECK_NEAR(reduce_ok(&t, SMR_RED_L2, false), sqrt(25.3125), 1e-15);
  CHECK(reduce_ok(&t, SMR_RED_LINF, false) == 5.0);
  const smr_reduction refused[] = {SMR_RED_MIN, SMR_RED_MAX,      SMR_RED_MEAN,
                                   SMR_RED_STD, SMR_RED_VARIANCE, SMR_RED_SUM,
                                   SMR_RED_PROD};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    CHECK_EQ_INT(reduce_status(&t, refused[i], false, NULL, 0), SMR_ERR_USAGE);

  static const double c128[] = {3, -4};
  t = view(SMR_DT_COMPLEX128, c128, 1);
  CHECK(reduce_ok(&t, SMR_RED_L2, false) == 5.0);
  CHECK(reduce_ok(&t, SMR_RED_MEAN, true) == 5.0);
  CHECK_EQ_INT(reduce_status(&t, SMR_RED_SUM, false, NULL, 0), SMR_ERR_USAGE);
  /* Parts near the double limits: hypot does not overflow. */
  static const double huge[] = {3e300, 4e300};
  t = view(SMR_DT_COMPLEX128, huge, 1);
  CHECK_NEAR(reduce_ok(&t, SMR_RED_MAX, true), 5e300, 1e-15);
}

static void test_reduce_refused(void) {
  static const uint8_t *strings[] = {(const uint8_t *)"a"};
  static const size_t lens[] = {1};
  smr_tensor t = view(SMR_DT_STRING, NULL, 1);
  t.strings = strings;
  t.string_lens = lens;
  char msg[SMR_ERR_MSG_MAX];
  CHECK_EQ_INT(reduce_status(&t, SMR_RED_MAX, false, msg, sizeof msg),
               SMR_ERR_USAGE);
  CHECK(strstr(msg, "string") != NULL);
  smr_stats st;
  CHECK_EQ_INT(smr_tensor_stats(&t, &st, NULL), SMR_ERR_USAGE);

  static const float f[] = {1, 2};
  t = view(24, f, 2); /* DT_FLOAT8_E5M2: not supported */
  CHECK_EQ_INT(reduce_status(&t, SMR_RED_SUM, false, NULL, 0), SMR_ERR_USAGE);
  t = view(SMR_DT_FLOAT, f, 2);
  t.nbytes = 7;
  CHECK_EQ_INT(reduce_status(&t, SMR_RED_SUM, false, msg, sizeof msg),
               SMR_ERR_USAGE);
  CHECK(strstr(msg, "7 bytes") != NULL);
  t = view(SMR_DT_FLOAT, NULL, 2);
  t.nbytes = 8;
  CHECK_EQ_INT(reduce_status(&t, SMR_RED_SUM, false, NULL, 0), SMR_ERR_USAGE);
  t = view(SMR_DT_FLOAT, f, 2);
  CHECK_EQ_INT(reduce_status(&t, SMR_RED_COUNT_, false, NULL, 0),
               SMR_ERR_USAGE);
  CHECK_EQ_INT(reduce_status(&t, (smr_reduction)-1, false, NULL, 0),
               SMR_ERR_USAGE);
  double out;
  CHECK_EQ_INT(smr_tensor_reduce(&t, SMR_RED_SUM, false, &out, NULL), SMR_OK);
}

/* ---- reductions against a simple reference, every length ------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rng_next(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Random element bytes; float exponents kept moderate so that sums have a
 * meaningful relative tolerance. */
static void fill_random(int dtype, uint8_t *buf, int64_t n) {
  size_t size = smr_dtype_size(dtype);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = rng_next();
    uint8_t *p = buf + i * size;
    if (dtype == SMR_DT_FLOAT) {
      uint32_t bits = (uint32_t)(r & 0x807fffffu) | (uint32_t)(110 + r % 30)
                                                        << 23;
      memcpy(p, &bits, 4);
    } else if (dtype == SMR_DT_DOUBLE) {
      double d = ((double)(r >> 11) * 0x1p-53 - 0.5) * ldexp(1, (int)(r % 40));
      memcpy(p, &d, 8);
    } else if (dtype == SMR_DT_HALF) {
      uint16_t bits = (uint16_t)((r & 0x83ffu) | (r >> 20) % 31 << 10);
      memcpy(p, &bits, 2);
    } else if (dtype == SMR_DT_BFLOAT16) {
      uint16_t bits = (uint16_t)((r & 0x807fu) | (110 + (r >> 20) % 30) << 7);
      memcpy(p, &bits, 2);
    } else if (dtype == SMR_DT_BOOL) {
      *p = (uint8_t)(r & 1);
    } else {
      memcpy(p, &r, size);
    }
  }
}

typedef struct reference {
  double min[2], max[2], prod[2], sum[2], sum_abs_x, var[2], l2;
} reference;

/* Straightforward long double sums over smr_tensor_get (tested above). */
static reference compute_reference(const smr_tensor *t) {
  reference ref = {{INFINITY, INFINITY},
                   {-INFINITY, -INFINITY},
                   {1, 1},
                   {0, 0},
                   0,
                   {0, 0},
                   0};
  long double sum[2] = {0, 0}, sq = 0;
  for (int64_t i = 0; i < t->count; i++) {
    double x = smr_tensor_get(t, i);
    for (int a = 0; a < 2; a++) {
      double v = a ? fabs(x) : x;
      ref.min[a] = fmin(ref.min[a], v);
      ref.max[a] = fmax(ref.max[a], v);
      ref.prod[a] *= v;
      sum[a] += v;
    }
    sq += (long double)x * x;
  }
  long double dev[2] = {0, 0};
  for (int a = 0; a < 2; a++) {
    long double mean = sum[a] / t->count;
    for (int64_t i = 0; i < t->count; i++) {
      double x = smr_tensor_get(t, i);
      long double d = (a ? fabs(x) : x) - mean;
      dev[a] += d * d;
    }
    ref.sum[a] = (double)sum[a];
    ref.var[a] = (double)(dev[a] / t->count);
  }
  ref.sum_abs_x = (double)sum[1];
  ref.l2 = sqrt((double)sq);
  return ref;
}

static bool close_to(double got, double want, double scale, double rel) {
  return fabs(got - want) <= rel * scale || got == want;
}

static void check_against_reference(const smr_tensor *t) {
  reference ref = compute_reference(t);
  double n = (double)t->count, l1 = ref.sum_abs_x;
  for (int a = 0; a < 2; a++) {
    CHECK(reduce_ok(t, SMR_RED_MIN, a) == ref.min[a]);
    CHECK(reduce_ok(t, SMR_RED_MAX, a) == ref.max[a]);
    /* Products of random data often reach inf * 0 = NaN. */
    double prod = reduce_ok(t, SMR_RED_PROD, a);
    CHECK(prod == ref.prod[a] || (isnan(prod) && isnan(ref.prod[a])));
    CHECK(close_to(reduce_ok(t, SMR_RED_SUM, a), ref.sum[a], l1, 1e-14));
    CHECK(
        close_to(reduce_ok(t, SMR_RED_MEAN, a), ref.sum[a] / n, l1 / n, 1e-14));
    double spread = ref.l2 * ref.l2 / n;
    CHECK(
        close_to(reduce_ok(t, SMR_RED_VARIANCE, a), ref.var[a], spread, 1e-12));
    CHECK(close_to(reduce_ok(t, SMR_RED_STD, a), sqrt(ref.var[a]), sqrt(spread),
                   1e-6));
  }
  CHECK(close_to(reduce_ok(t, SMR_RED_L1, false), l1, l1, 1e-14));
  CHECK(close_to(reduce_ok(t, SMR_RED_L2, false), ref.l2, ref.l2, 1e-14));
  CHECK(reduce_ok(t, SMR_RED_LINF, false) == ref.max[1]);
}

static void test_reduce_matches_reference(void) {
  static const int dtypes[] = {SMR_DT_FLOAT,    SMR_DT_DOUBLE, SMR_DT_HALF,
                               SMR_DT_BFLOAT16, SMR_DT_INT8,   SMR_DT_UINT8,
                               SMR_DT_INT16,    SMR_DT_UINT16, SMR_DT_INT32,
                               SMR_DT_UINT32,   SMR_DT_INT64,  SMR_DT_UINT64,
                               SMR_DT_BOOL,     SMR_DT_QINT8,  SMR_DT_QUINT16};
  static const int64_t lengths[] = {
      1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 2047, 2048, 2049, 4095, 4097, 10007};
  uint8_t *buf = malloc(10007 * 8);
  for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
      fill_random(dtypes[d], buf, lengths[l]);
      smr_tensor t = view(dtypes[d], buf, lengths[l]);
      int before = unit_failed_checks;
      check_against_reference(&t);
      if (unit_failed_checks != before)
        fprintf(stderr, "  (dtype %s, %lld elements)\n",
                smr_dtype_numpy_name(dtypes[d]), (long long)lengths[l]);
    }
  free(buf);
}

/* The float32 sums on AVX2 machines (eight lanes in two vectors) give the
 * bits of the baseline kernel: every reduction built on a sum, with and
 * without abs, over lengths around the lane and block sizes. */
static void test_sums_f32_avx2_same_bits(void) {
  static const int64_t lengths[] = {1,  2,    7,    8,    9,    15,    16,
                                    17, 2047, 2048, 2049, 4097, 10007, 100003};
  static const smr_reduction reds[] = {SMR_RED_SUM,      SMR_RED_MEAN,
                                       SMR_RED_L1,       SMR_RED_L2,
                                       SMR_RED_VARIANCE, SMR_RED_STD};
  float *f = malloc(100003 * sizeof *f);
  for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
    int64_t n = lengths[l];
    for (int64_t i = 0; i < n; i++) {
      uint64_t r = rng_next();
      double m = ldexp((double)(r & 0xFFFFFF) / 16777216.0,
                       (int)((r >> 24) % 40) - 20);
      f[i] = (float)((r >> 40) & 1 ? -m : m);
    }
    smr_tensor t = view(SMR_DT_FLOAT, f, n);
    for (size_t k = 0; k < sizeof reds / sizeof reds[0]; k++)
      for (int abs = 0; abs < 2; abs++) {
        double with, without;
        smr_tensor_allow_avx2(true);
        CHECK_EQ_INT(smr_tensor_reduce(&t, reds[k], abs, &with, NULL), SMR_OK);
        smr_tensor_allow_avx2(false);
        CHECK_EQ_INT(smr_tensor_reduce(&t, reds[k], abs, &without, NULL),
                     SMR_OK);
        int before = unit_failed_checks;
        CHECK(memcmp(&with, &without, sizeof with) == 0);
        if (unit_failed_checks != before)
          fprintf(stderr, "  (%s, abs %d, %lld elements)\n",
                  smr_reduction_name(reds[k]), abs, (long long)n);
      }
  }
  smr_tensor_allow_avx2(true);
  free(f);
}

/* ---- summation accuracy ---------------------------------------------- */

static void test_sum_accuracy_tenth(void) {
  /* 10^7 copies of 0.1f: exactly 10^7 * 13421773 * 2^-27.  Accumulating in
   * float stops growing long before; ours must give the correctly rounded
   * double. */
  int64_t n = 10000000;
  float *f = malloc((size_t)n * sizeof *f);
  for (int64_t i = 0; i < n; i++)
    f[i] = 0.1f;
  float naive = 0;
  for (int64_t i = 0; i < n; i++)
    naive += f[i];
  CHECK(fabs(naive - 1000000.0149011612) > 1000); /* float summation fails */
  smr_tensor t = view(SMR_DT_FLOAT, f, n);
  CHECK(reduce_ok(&t, SMR_RED_SUM, false) == 1000000.0149011612);
  CHECK(reduce_ok(&t, SMR_RED_MEAN, true) == 1000000.0149011612 / 1e7);
  CHECK(reduce_ok(&t, SMR_RED_L1, false) == 1000000.0149011612);
  CHECK(reduce_ok(&t, SMR_RED_VARIANCE, false) == 0.0);
  smr_stats st;
  CHECK_EQ_INT(smr_tensor_stats(&t, &st, NULL), SMR_OK);
  CHECK(st.sum == 1000000.0149011612);
  free(f);

  /* 10^7 copies of the double 0.1: exact sum 1e6 + 5.55e-11, rounding to
   * 1e6; a sequential double sum is off by about 1.6e-4. */
  double *d = malloc((size_t)n * sizeof *d);
  double naive_d = 0;
  for (int64_t i = 0; i < n; i++) {
    d[i] = 0.1;
    naive_d += d[i];
  }
  CHECK(fabs(naive_d - 1e6) > 1e-5);
  t = view(SMR_DT_DOUBLE, d, n);
  CHECK_NEAR(reduce_ok(&t, SMR_RED_SUM, false), 1e6, 1e-13);
  CHECK_NEAR(reduce_ok(&t, SMR_RED_MEAN, false), 0.1, 1e-13);
  CHECK_EQ_INT(smr_tensor_stats(&t, &st, NULL), SMR_OK);
  CHECK_NEAR(st.sum, 1e6, 1e-13);
  free(d);
}

static void test_sum_accuracy_alternating(void) {
  /* {2^24, 1} repeated: a float accumulator never gets past 2^24 + ... */
  enum { N = 100000 };
  static float f[N];
  for (int i = 0; i < N; i++)
    f[i] = i % 2 ? 1.0f : 16777216.0f;
  float naive = 0;
  for (int i = 0; i < N; i++)
    naive += f[i];
  double exact = (N / 2) * 16777217.0;
  CHECK((double)naive != exact);
  smr_tensor t = view(SMR_DT_FLOAT, f, N);
  CHECK(reduce_ok(&t, SMR_RED_SUM, false) == exact);

  /* {1e16, 1, -1e16, 1} repeated: sequential double summation loses every
   * other 1 (1e16 + 1 rounds back to 1e16); exact answer 2 per period. */
  static double d[4000];
  for (int i = 0; i < 4000; i++)
    d[i] = i % 2 ? 1.0 : (i % 4 ? -1e16 : 1e16);
  double naive_d = 0;
  for (int i = 0; i < 4000; i++)
    naive_d += d[i];
  CHECK(naive_d != 2000.0);
  t = view(SMR_DT_DOUBLE, d, 4000);
  CHECK(reduce_ok(&t, SMR_RED_SUM, false) == 2000.0);
  CHECK(reduce_ok(&t, SMR_RED_MEAN, false) == 0.5);
}

static void test_variance_accuracy(void) {
  /* Large offset, tiny spread: 1e9 + {0, 1, 2, 3} repeated; the one-pass
   * formula E[x²] - E[x]² loses everything here. */
  enum { N = 40000 };
  static double d[N];
  for (int i = 0; i < N; i++)
    d[i] = 1e9 + i % 4;
  smr_tensor t = view(SMR_DT_DOUBLE, d, N);
  CHECK_NEAR(reduce_ok(&t, SMR_RED_VARIANCE, false), 1.25, 1e-12);
  CHECK_NEAR(reduce_ok(&t, SMR_RED_STD, true), sqrt(1.25), 1e-12);
  CHECK_NEAR(reduce_ok(&t, SMR_RED_MEAN, false), 1e9 + 1.5, 1e-15);
}

/* ---- statistics ------------------------------------------------------ */

static void test_stats_fixture_f32(void) {
  /* The f32_1d tensor of synthetic/dtypes_shapes; expected values from
   * exact (fsum) arithmetic over its five finite elements. */
  const float f[] = {0.1f,
                     -1e30f,
                     3.4028234663852886e+38f,
                     1.401298464324817e-45f,
                     INFINITY,
                     f32_bits(0x7fc00000u),
                     -0.0f};
  smr_tensor t = view(SMR_DT_FLOAT, f, 7);
  check_sha(&t,
            "f5ea34b2528ce9d296700e943df8d2e02412f856841ed3702071fc09c64df4e6");
  smr_stats st;
  CHECK_EQ_INT(smr_tensor_stats(&t, &st, NULL), SMR_OK);
  CHECK_EQ_INT(st.count, 7);
  CHECK_EQ_INT(st.finite, 5);
  CHECK_EQ_INT(st.nan, 1);
  CHECK_EQ_INT(st.pinf, 1);
  CHECK_EQ_INT(st.ninf, 0);
  CHECK_EQ_INT(st.zeros, 1);
  CHECK(st.has_finite);
  CHECK(st.min == -1.0000000150474662e+30);
  CHECK(st.max == 3.4028234663852886e+38);
  CHECK(st.sum == 3.4028234563852884e+38);
  CHECK(st.mean == 6.805646912770577e+37);
  CHECK(st.l1 == 3.4028234763852887e+38);
  CHECK(st.l2 == 3.4028234663852886e+38);
  CHECK(st.linf == 3.4028234663852886e+38);
}

/* The order smr_tensor_stats sums in, written out in scalar code: blocks
 * of 1024 elements, two lanes per block (even and odd elements, each a
 * plain double sum), each lane flushed into a Neumaier-compensated total.
 * The kernel's vector code must give exactly these bits. */
typedef struct ref_comp {
  double s, c;
} ref_comp;

static void ref_comp_add(ref_comp *k, double x) {
  double t = k->s + x;
  k->c += fabs(k->s) >= fabs(x) ? (k->s - t) + x : (x - t) + k->s;
  k->s = t;
}

static void ref_stats_f32(const float *f, int64_t n, double *sum, double *l1,
                          double *l2, double *mn, double *mx, int64_t *zeros) {
  ref_comp cs = {0, 0}, c1 = {0, 0}, c2 = {0, 0};
  *mn = INFINITY, *mx = -INFINITY, *zeros = 0;
  for (int64_t start = 0; start < n; start += 1024) {
    int64_t end = n - start < 1024 ? n : start + 1024;
    double ls[2] = {0, 0}, l1s[2] = {0, 0}, l2s[2] = {0, 0};
    double lmn[2] = {INFINITY, INFINITY}, lmx[2] = {-INFINITY, -INFINITY};
    for (int64_t i = start; i < end; i++) {
      /* even offsets in lane 0, odd in lane 1 (an odd last element has an
       * even offset: lane 0, as in the kernel's tail) */
      int k = (int)((i - start) % 2);
      double x = isfinite(f[i]) ? f[i] : 0.0; /* inf and NaN: only counted */
      ls[k] += x;
      l1s[k] += fabs(x);
      l2s[k] += x * x;
      lmn[k] = isfinite(f[i]) && x < lmn[k] ? x : lmn[k];
      lmx[k] = isfinite(f[i]) && x > lmx[k] ? x : lmx[k];
      *zeros += f[i] == 0.0;
    }
    for (int k = 0; k < 2; k++) {
      ref_comp_add(&cs, ls[k]);
      ref_comp_add(&c1, l1s[k]);
      ref_comp_add(&c2, l2s[k]);
      *mn = lmn[k] < *mn ? lmn[k] : *mn;
      *mx = lmx[k] > *mx ? lmx[k] : *mx;
    }
  }
  *sum = cs.s + cs.c;
  *l1 = c1.s + c1.c;
  *l2 = sqrt(c2.s + c2.c);
}

/* The kernel takes two blocks at a time; an inf or NaN in either block of
 * a pair (or in the last, single block) sends only that block down the
 * full path.  Pass 0 is all finite; pass 1 puts an inf, a NaN or a -inf
 * into some blocks. */
static void fill_stats_input(float *f, int64_t n, int pass) {
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = rng_next();
    double m =
        ldexp((double)(r & 0xFFFFFF) / 16777216.0, (int)((r >> 24) % 60) - 30);
    f[i] = (float)((r >> 40) & 1 ? -m : m);
    if ((r >> 41) % 50 == 0)
      f[i] = (r >> 42) & 1 ? -0.0f : 0.0f;
  }
  static const float special[] = {INFINITY, NAN, -INFINITY};
  for (int64_t b = 0; pass && b * 1024 < n; b++)
    if (b % 3 != 1) /* blocks 0, 2, 3, 5, ...: both members of some pairs */
      f[b * 1024 + (b * 77) % (n - b * 1024)] = special[b % 3];
}

static void test_stats_order_f32(void) {
  /* random magnitudes over 60 binades, signed zeros, odd lengths */
  static const int64_t lengths[] = {1,    2,    3,    1023, 1024,
                                    1025, 2048, 3072, 4097, 100001};
  float *f = malloc(100001 * sizeof *f);
  for (size_t l = 0; l < 2 * sizeof lengths / sizeof lengths[0]; l++) {
    int64_t n = lengths[l / 2];
    fill_stats_input(f, n, (int)(l % 2));
    double sum, l1, l2, mn, mx;
    int64_t zeros, nonfinite = 0;
    ref_stats_f32(f, n, &sum, &l1, &l2, &mn, &mx, &zeros);
    for (int64_t i = 0; i < n; i++)
      nonfinite += !isfinite(f[i]);
    smr_tensor t = view(SMR_DT_FLOAT, f, n);
    smr_stats st;
    CHECK_EQ_INT(smr_tensor_stats(&t, &st, NULL), SMR_OK);
    int before = unit_failed_checks;
    CHECK(memcmp(&st.sum, &sum, sizeof sum) == 0);
    CHECK(memcmp(&st.l1, &l1, sizeof l1) == 0);
    CHECK(memcmp(&st.l2, &l2, sizeof l2) == 0);
    if (st.has_finite) { /* else NaN, checked elsewhere */
      CHECK(memcmp(&st.min, &mn, sizeof mn) == 0); /* the sign of a zero too */
      CHECK(memcmp(&st.max, &mx, sizeof mx) == 0);
    }
    CHECK_EQ_INT(st.zeros, zeros);
    CHECK_EQ_INT(st.nan + st.pinf + st.ninf, nonfinite);
    if (unit_failed_checks != before)
      fprintf(stderr, "  (%lld elements, pass %d)\n", (long long)n,
              (int)(l % 2));
  }
  free(f);
}

static void test_stats_simple(void) {
  static const int32_t v[] = {0, -3, -6, -9, -12, 0, 5};
  smr_tensor t = view(SMR_DT_INT32, v, 7);
  smr_stats st;
  CHECK_EQ_INT(smr_tensor_stats(&t, &st, NULL), SMR_OK);
  CHECK_EQ_INT(st.finite, 7);
  CHECK_EQ_INT(st.zeros, 2);
  CHECK_EQ_INT(st.nan + st.pinf + st.ninf, 0);
  CHECK(st.min == -12 && st.max == 5);
  CHECK(st.sum == -25);
  CHECK(st.mean == -25.0 / 7);
  CHECK(st.l1 == 35);
  CHECK(st.l2 == sqrt(9 + 36 + 81 + 144 + 25));
  CHECK(st.linf == 12);
}

static void test_stats_no_finite(void) {
  static const double v[] = {NAN, INFINITY, -INFINITY, -INFINITY};
  smr_tensor t = view(SMR_DT_DOUBLE, v, 4);
  smr_stats st;
  CHECK_EQ_INT(smr_tensor_stats(&t, &st, NULL), SMR_OK);
  CHECK(!st.has_finite);
  CHECK_EQ_INT(st.finite, 0);
  CHECK_EQ_INT(st.nan, 1);
  CHECK_EQ_INT(st.pinf, 1);
  CHECK_EQ_INT(st.ninf, 2);
  CHECK(isnan(st.min) && isnan(st.max) && isnan(st.mean));
  CHECK(st.sum == 0 && st.l2 == 0);

  t = view(SMR_DT_FLOAT, NULL, 0);
  CHECK_EQ_INT(smr_tensor_stats(&t, &st, NULL), SMR_OK);
  CHECK_EQ_INT(st.count, 0);
  CHECK(!st.has_finite);
}

static void test_stats_overflowing_finite(void) {
  /* Finite values whose lane sum of |x| overflows take the full path. */
  static const double v[] = {DBL_MAX, DBL_MAX, -DBL_MAX};
  smr_tensor t = view(SMR_DT_DOUBLE, v, 3);
  smr_stats st;
  CHECK_EQ_INT(smr_tensor_stats(&t, &st, NULL), SMR_OK);
  CHECK_EQ_INT(st.finite, 3);
  CHECK(st.min == -DBL_MAX && st.max == DBL_MAX && st.linf == DBL_MAX);
  CHECK(st.sum == DBL_MAX); /* lanes {v0 + v2, v1} */
  CHECK(st.l1 == INFINITY);
}

static void test_stats_large_matches_reduce(void) {
  /* Across several blocks, odd length; non-finite values sprinkled in. */
  enum { N = 5003 };
  static uint16_t h[N];
  for (int i = 0; i < N; i++)
    h[i] = (uint16_t)(rng_next() & 0xffff);
  h[17] = 0x7c00;   /* +inf */
  h[3000] = 0x7e00; /* NaN */
  h[4000] = 0xfc00; /* -inf */
  h[5002] = 0xfc00;
  smr_tensor t = view(SMR_DT_HALF, h, N);
  int64_t nan = 0, pinf = 0, ninf = 0, zeros = 0;
  long double sum = 0, l1 = 0, l2 = 0;
  double mn = INFINITY, mx = -INFINITY;
  for (int i = 0; i < N; i++) {
    double x = smr_tensor_get(&t, i);
    nan += isnan(x);
    pinf += x == INFINITY;
    ninf += x == -INFINITY;
    zeros += x == 0;
    if (isfinite(x)) {
      sum += x;
      l1 += fabs(x);
      l2 += (long double)x * x;
      mn = fmin(mn, x);
      mx = fmax(mx, x);
    }
  }
  smr_stats st;
  CHECK_EQ_INT(smr_tensor_stats(&t, &st, NULL), SMR_OK);
  CHECK(nan > 0 && pinf > 0 && ninf > 0);
  CHECK_EQ_INT(st.nan, nan);
  CHECK_EQ_INT(st.pinf, pinf);
  CHECK_EQ_INT(st.ninf, ninf);
  CHECK_EQ_INT(st.zeros, zeros);
  CHECK_EQ_INT(st.finite, N - nan - pinf - ninf);
  CHECK(st.min == mn && st.max == mx);
  CHECK(close_to(st.sum, (double)sum, (double)l1, 1e-13));
  CHECK_NEAR(st.l1, (double)l1, 1e-13);
  CHECK_NEAR(st.l2, sqrt((double)l2), 1e-13);
  CHECK(st.linf == fmax(fabs(mn), fabs(mx)));
}

static void test_stats_complex(void) {
  /* (3,4) finite, (nan,0) nan, (inf,1) +inf, (0,0) zero, (-1,-inf) -inf. */
  const double c[] = {3, 4, NAN, 0, INFINITY, 1, 0, 0, -1, -INFINITY};
  smr_tensor t = view(SMR_DT_COMPLEX128, c, 5);
  smr_stats st;
  CHECK_EQ_INT(smr_tensor_stats(&t, &st, NULL), SMR_OK);
  CHECK_EQ_INT(st.finite, 2);
  CHECK_EQ_INT(st.nan, 1);
  CHECK_EQ_INT(st.pinf, 1);
  CHECK_EQ_INT(st.ninf, 1);
  CHECK_EQ_INT(st.zeros, 1);
  CHECK(st.min == 0 && st.max == 3 && st.sum == 3 && st.mean == 1.5);
  CHECK(st.l1 == 5 && st.l2 == 5 && st.linf == 5);
  static const float c64[] = {1, 2, -0.5f, -0.25f};
  t = view(SMR_DT_COMPLEX64, c64, 2);
  CHECK_EQ_INT(smr_tensor_stats(&t, &st, NULL), SMR_OK);
  CHECK(st.min == -0.5 && st.max == 1 && st.sum == 0.5);
  CHECK_NEAR(st.l2, sqrt(5.3125), 1e-15);
}

/* ---- counts ------------------------------------------------------------ */

static bool same_counts(const smr_stats *c, const smr_stats *s) {
  return c->count == s->count && c->finite == s->finite && c->nan == s->nan &&
         c->pinf == s->pinf && c->ninf == s->ninf && c->zeros == s->zeros &&
         c->has_finite == s->has_finite;
}

/* smr_tensor_counts against the counts of smr_tensor_stats. */
static void check_counts(int dtype, const void *data, int64_t n) {
  smr_tensor t = view(dtype, data, n);
  smr_stats c, s;
  for (int avx2 = 0; avx2 < 2; avx2++) {
    smr_tensor_allow_avx2(avx2);
    CHECK_EQ_INT(smr_tensor_counts(&t, &c, NULL), SMR_OK);
    CHECK_EQ_INT(smr_tensor_stats(&t, &s, NULL), SMR_OK);
    if (!same_counts(&c, &s))
      fprintf(stderr, "dtype %d n %lld avx2 %d: counts differ\n", dtype,
              (long long)n, avx2);
    CHECK(same_counts(&c, &s));
    CHECK(isnan(c.min) && isnan(c.sum) && isnan(c.l2) && isnan(c.linf));
  }
  smr_tensor_allow_avx2(true);
}

/* float32 from the bits: zeros of both signs, NaNs of any payload and
 * sign, both infinities, subnormals and the largest finite values, at
 * every position of the vector loops and their tails. */
static void test_counts_f32(void) {
  static const uint32_t odd[] = {
      0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
      0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0xffffffffu,
      0x00000001u, 0x80000001u, 0x7f7fffffu, 0xff7fffffu, 0x3f800000u};
  enum { N = 1200 };
  static uint32_t bits[N];
  uint64_t r = 12345;
  for (int round = 0; round < 40; round++) {
    for (int i = 0; i < N; i++) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      bits[i] = (r >> 40) % 3 == 0 ? odd[(r >> 20) % 15] : (uint32_t)(r >> 32);
    }
    int64_t n = round < 20 ? round : N - (round % 9);
    check_counts(SMR_DT_FLOAT, bits, n);
  }
  check_counts(SMR_DT_FLOAT, bits + 1, 999); /* unaligned */
  check_counts(SMR_DT_FLOAT, odd, 15);
}

/* Other dtypes take smr_tensor_stats' pass: the same counts. */
static void test_counts_other_dtypes(void) {
  static const double d[] = {0.0, -0.0, NAN, INFINITY, -INFINITY, 1.5};
  check_counts(SMR_DT_DOUBLE, d, 6);
  static const int32_t i[] = {0, 3, -7, 0};
  check_counts(SMR_DT_INT32, i, 4);
  static const uint16_t h[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x3c00};
  check_counts(SMR_DT_HALF, h, 6);
  static const double c[] = {3, 4, NAN, 0, INFINITY, 1, 0, 0, -1, -INFINITY};
  check_counts(SMR_DT_COMPLEX128, c, 5);
  smr_tensor t = view(SMR_DT_FLOAT, NULL, 0);
  smr_stats st;
  CHECK_EQ_INT(smr_tensor_counts(&t, &st, NULL), SMR_OK);
  CHECK(st.count == 0 && !st.has_finite);
  const char *strs[] = {"a"};
  t = view(SMR_DT_STRING, strs, 1);
  CHECK(smr_tensor_counts(&t, &st, NULL) != SMR_OK);
}

/* ---- fingerprints of the dtypes_shapes fixture tensors --------------- */

static void test_sha256_fixture_tensors(void) {
  const double f64[] = {0.1,
                        1e300,
                        -5e-324,
                        INFINITY,
                        -INFINITY,
                        f64_bits(0x7ff8000000000000ULL),
                        3.141592653589793};
  smr_tensor t = view(SMR_DT_DOUBLE, f64, 7);
  check_sha(&t,
            "7622762168c9a8a39d4f3f321237195c3d66ce6ca3ee8724de3830a44c254ff2");
  static const int8_t i8[] = {-128, -1, 0, 1, 127};
  t = view(SMR_DT_INT8, i8, 5);
  check_sha(&t,
            "fedabe10e61b00d9130050169d6796dd86fc72aeb4e895cc0f8ef1901bed5827");
  static const int64_t i64[] = {INT64_MIN, -1, 0, 9007199254740993LL,
                                INT64_MAX};
  t = view(SMR_DT_INT64, i64, 5);
  check_sha(&t,
            "a72afe5514256c19f94c4e2766fb6b9b17faf5ab6967e3581f892211497f7796");
  static const uint8_t b[] = {1, 0, 1, 1};
  t = view(SMR_DT_BOOL, b, 4);
  check_sha(&t,
            "52a5c4a10657220cac05c63adfa923c7771c55d868a58ee360eb3d1511985c3e");
  static const float c64[] = {1, 2, -0.5f, -0.25f};
  t = view(SMR_DT_COMPLEX64, c64, 2);
  check_sha(&t,
            "777bf82d2c5bd625b0e274e45b2b4260217f7c5bea8642a8b4e45397a6852c2c");
  int32_t i32[24];
  for (int i = 0; i < 24; i++)
    i32[i] = -3 * i;
  t = view(SMR_DT_INT32, i32, 24);
  t.ndim = 4;
  t.shape[0] = 1, t.shape[1] = 2, t.shape[2] = 3, t.shape[3] = 4;
  check_sha(&t,
            "776c0a5cb104b8550bc92341820795a1382d2bb31e8d9ff393762eea53c8213e");
  static const float scalar = 2.5f;
  t = view(SMR_DT_FLOAT, &scalar, 1);
  t.ndim = 0;
  check_sha(&t,
            "072e3304b03423a4767d28c5fed09f81d5190ff60a3d078c6c1350eeb8bee28b");
  t = view(SMR_DT_INT32, NULL, 0);
  check_sha(&t,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void test_sha256_strings(void) {
  /* The str_1d values: each element's UTF-8 bytes and one 0x00. */
  static const char *s[] = {"", "a", "h\xc3\xa9llo",
                            "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",
                            "tab\tnew\nline"};
  const uint8_t *strings[5];
  size_t lens[5];
  for (int i = 0; i < 5; i++) {
    strings[i] = (const uint8_t *)s[i];
    lens[i] = strlen(s[i]);
  }
  smr_tensor t = view(SMR_DT_STRING, NULL, 5);
  t.stored_dtype = SMR_DT_INVALID;
  t.strings = strings;
  t.string_lens = lens;
  check_sha(&t,
            "c7d8f0f9d14d33104084499331c76d3307c26fde2bdb94958d1e0572eb004596");
  t.count = 0; /* str_empty */
  check_sha(&t,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

int main(void) {
  const uint16_t probe = 1;
  if (*(const uint8_t *)&probe != 1) {
    fprintf(stderr, "test_tensor: tests assume a little-endian host\n");
    return 1;
  }
  TEST_RUN(test_counts_f32);
  TEST_RUN(test_counts_other_dtypes);
  TEST_RUN(test_sha256_vectors);
  TEST_RUN(test_sha256_million_a);
  TEST_RUN(test_sha256_incremental);
  TEST_RUN(test_dtype_tables);
  TEST_RUN(test_reduction_names);
  TEST_RUN(test_release);
  TEST_RUN(test_get_every_dtype);
  TEST_RUN(test_get_out_of_range);
  TEST_RUN(test_get_unaligned);
  TEST_RUN(test_half_conversion);
  TEST_RUN(test_bfloat16_conversion);
  TEST_RUN(test_reduce_signed_dtypes);
  TEST_RUN(test_reduce_unsigned_dtypes);
  TEST_RUN(test_reduce_bool);
  TEST_RUN(test_reduce_extreme_integers);
  TEST_RUN(test_reduce_scalar);
  TEST_RUN(test_reduce_nan_propagates);
  TEST_RUN(test_reduce_inf_arithmetic);
  TEST_RUN(test_reduce_empty);
  TEST_RUN(test_reduce_complex);
  TEST_RUN(test_reduce_refused);
  TEST_RUN(test_reduce_matches_reference);
  TEST_RUN(test_sum_accuracy_tenth);
  TEST_RUN(test_sum_accuracy_alternating);
  TEST_RUN(test_variance_accuracy);
  TEST_RUN(test_stats_fixture_f32);
  TEST_RUN(test_stats_simple);
  TEST_RUN(test_sums_f32_avx2_same_bits);
  TEST_RUN(test_stats_order_f32); /* with AVX2 where the machine has it */
  smr_tensor_allow_avx2(false);
  TEST_RUN(test_stats_order_f32); /* the baseline instructions */
  smr_tensor_allow_avx2(true);
  TEST_RUN(test_stats_no_finite);
  TEST_RUN(test_stats_overflowing_finite);
  TEST_RUN(test_stats_large_matches_reduce);
  TEST_RUN(test_stats_complex);
  TEST_RUN(test_sha256_fixture_tensors);
  TEST_RUN(test_sha256_strings);
  return TEST_REPORT("test_tensor");
}
