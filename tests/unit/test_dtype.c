/* test_dtype.c - the one dtype table (format/dtype.c) against TensorFlow's
 * DataType numbers (types.proto) and the NumPy names smdebug's reader
 * gives (docs/formats.md#data-types), and the decoder naming a dtype it
 * cannot read by that table.  Before the table was one, the decoder had
 * its own, shorter copy: a record of dtype 24 was "unsupported dtype 24
 * (unknown)" while smr_dtype_tf_name said DT_FLOAT8_E5M2. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/dtype.h"
#include "format/event.h"
#include "format/tensor.h"
#include "unit.h"
#include "writer/event_encode.h"

static const struct {
  int number;
  const char *tf, *numpy;
  size_t size;
} expected[] = {
    {0, "DT_INVALID", "unknown", 0},
    {1, "DT_FLOAT", "float32", 4},
    {2, "DT_DOUBLE", "float64", 8},
    {3, "DT_INT32", "int32", 4},
    {4, "DT_UINT8", "uint8", 1},
    {5, "DT_INT16", "int16", 2},
    {6, "DT_INT8", "int8", 1},
    {7, "DT_STRING", "str", 0},
    {8, "DT_COMPLEX64", "complex64", 8},
    {9, "DT_INT64", "int64", 8},
    {10, "DT_BOOL", "bool", 1},
    {11, "DT_QINT8", "int8", 1},
    {12, "DT_QUINT8", "uint8", 1},
    {13, "DT_QINT32", "int32", 4},
    {14, "DT_BFLOAT16", "bfloat16", 2},
    {15, "DT_QINT16", "int16", 2},
    {16, "DT_QUINT16", "uint16", 2},
    {17, "DT_UINT16", "uint16", 2},
    {18, "DT_COMPLEX128", "complex128", 16},
    {19, "DT_HALF", "float16", 2},
    {20, "DT_RESOURCE", "unknown", 0},
    {21, "DT_VARIANT", "unknown", 0},
    {22, "DT_UINT32", "uint32", 4},
    {23, "DT_UINT64", "uint64", 8},
    {24, "DT_FLOAT8_E5M2", "unknown", 0},
    {25, "DT_FLOAT8_E4M3FN", "unknown", 0},
};

static void test_every_number(void) {
  size_t n = sizeof expected / sizeof expected[0];
  CHECK_EQ_INT(n, SMR_DTYPE_COUNT);
  for (size_t i = 0; i < n; i++) {
    int d = expected[i].number;
    CHECK(smr_dtype_info_of(d) != NULL);
    CHECK_STR(smr_dtype_tf_name(d), expected[i].tf);
    CHECK_STR(smr_dtype_numpy_name(d), expected[i].numpy);
    CHECK_EQ_INT(smr_dtype_size(d), expected[i].size);
    CHECK_EQ_INT(smr_dtype_is_complex(d), d == 8 || d == 18);
  }
}

static void test_unknown_numbers(void) {
  static const int unknown[] = {-1, 26, 101, 125, 1000};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    CHECK(smr_dtype_info_of(unknown[i]) == NULL);
    CHECK_EQ_INT(smr_dtype_size(unknown[i]), 0);
    CHECK_STR(smr_dtype_numpy_name(unknown[i]), "unknown");
  }
  CHECK_STR(smr_dtype_tf_name(101), "DT_101");
}

/* A one-byte uint8 record with its dtype rewritten to `dtype`. */
static size_t record_of_dtype(int dtype, uint8_t **out) {
  uint8_t v = 7;
  smr_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = SMR_DT_UINT8;
  t.ndim = 1;
  t.shape[0] = 1;
  t.count = 1;
  t.data = &v;
  t.nbytes = 1;
  t.mode = 1; /* TRAIN */
  size_t len = 0;
  smr_error err;
  *out = NULL;
  CHECK_EQ_INT(smr_event_encode(&t, "x", out, &len, &err), SMR_OK);
  /* TensorProto: dtype (field 1, varint 4) then tensor_shape (field 2) */
  for (size_t i = 0; *out && i + 2 < len; i++)
    if ((*out)[i] == 0x08 && (*out)[i + 1] == 4 && (*out)[i + 2] == 0x12) {
      (*out)[i + 1] = (uint8_t)dtype;
      return len;
    }
  CHECK(!"no dtype field found");
  return len;
}

static void test_decoder_names_by_the_table(void) {
  for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
    int d = expected[i].number;
    if (expected[i].size || d == 0 || d == 7)
      continue; /* numbers and strings decode; test_event reads them */
    uint8_t *rec;
    size_t len = record_of_dtype(d, &rec);
    smr_tensor t;
    char *name = NULL;
    smr_error err;
    CHECK_EQ_INT(smr_event_decode(rec, len, "f", 0, &t, &name, &err),
                 SMR_ERR_FORMAT);
    char want[64];
    snprintf(want, sizeof want, "unsupported dtype %d (%s)", d, expected[i].tf);
    if (!strstr(err.msg, want))
      fprintf(stderr, "message: %s\nexpected: %s\n", err.msg, want);
    CHECK(strstr(err.msg, want) != NULL);
    free(name);
    free(rec);
  }
  /* and a one-byte number the table knows decodes with its size */
  uint8_t *rec;
  size_t len = record_of_dtype(SMR_DT_INT8, &rec);
  smr_tensor t;
  smr_error err;
  int rc = smr_event_decode(rec, len, "f", 0, &t, NULL, &err);
  if (rc != SMR_OK)
    fprintf(stderr, "message: %s\n", err.msg);
  CHECK_EQ_INT(rc, SMR_OK);
  CHECK_EQ_INT(t.dtype, SMR_DT_INT8);
  CHECK_EQ_INT(smr_tensor_get(&t, 0), 7);
  smr_tensor_release(&t);
  free(rec);
}

int main(void) {
  TEST_RUN(test_every_number);
  TEST_RUN(test_unknown_numbers);
  TEST_RUN(test_decoder_names_by_the_table);
  return TEST_REPORT("test_dtype");
}
