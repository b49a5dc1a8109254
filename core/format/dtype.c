/* dtype.c - the dtype table (dtype.h): one row per TensorFlow DataType
 * number, checked against TensorFlow's types.proto and smdebug's NumPy
 * names by tests/unit/test_dtype.c. */
#include "format/dtype.h"

#include <stdio.h>

const smr_dtype_info smr_dtype_table[SMR_DTYPE_COUNT] = {
    [SMR_DT_INVALID] = {0, SMR_DF_NONE, NULL, "DT_INVALID"},
    [SMR_DT_FLOAT] = {4, SMR_DF_FLOAT, "float32", "DT_FLOAT"},
    [SMR_DT_DOUBLE] = {8, SMR_DF_DOUBLE, "float64", "DT_DOUBLE"},
    [SMR_DT_INT32] = {4, SMR_DF_INT, "int32", "DT_INT32"},
    [SMR_DT_UINT8] = {1, SMR_DF_INT, "uint8", "DT_UINT8"},
    [SMR_DT_INT16] = {2, SMR_DF_INT, "int16", "DT_INT16"},
    [SMR_DT_INT8] = {1, SMR_DF_INT, "int8", "DT_INT8"},
    [SMR_DT_STRING] = {0, SMR_DF_NONE, "str", "DT_STRING"},
    [SMR_DT_COMPLEX64] = {8, SMR_DF_SCOMPLEX, "complex64", "DT_COMPLEX64"},
    [SMR_DT_INT64] = {8, SMR_DF_INT64, "int64", "DT_INT64"},
    [SMR_DT_BOOL] = {1, SMR_DF_BOOL, "bool", "DT_BOOL"},
    /* Quantized types are plain integers of the same width for us. */
    [SMR_DT_QINT8] = {1, SMR_DF_INT, "int8", "DT_QINT8"},
    [SMR_DT_QUINT8] = {1, SMR_DF_INT, "uint8", "DT_QUINT8"},
    [SMR_DT_QINT32] = {4, SMR_DF_INT, "int32", "DT_QINT32"},
    /* numpy has no bfloat16; ml_dtypes calls it "bfloat16". */
    [SMR_DT_BFLOAT16] = {2, SMR_DF_HALF, "bfloat16", "DT_BFLOAT16"},
    [SMR_DT_QINT16] = {2, SMR_DF_INT, "int16", "DT_QINT16"},
    [SMR_DT_QUINT16] = {2, SMR_DF_INT, "uint16", "DT_QUINT16"},
    [SMR_DT_UINT16] = {2, SMR_DF_INT, "uint16", "DT_UINT16"},
    [SMR_DT_COMPLEX128] = {16, SMR_DF_DCOMPLEX, "complex128", "DT_COMPLEX128"},
    [SMR_DT_HALF] = {2, SMR_DF_HALF, "float16", "DT_HALF"},
    [20] = {0, SMR_DF_NONE, NULL, "DT_RESOURCE"},
    [21] = {0, SMR_DF_NONE, NULL, "DT_VARIANT"},
    /* uint32_val/uint64_val (TensorProto fields 16/17) are not in our
     * schema: content only */
    [SMR_DT_UINT32] = {4, SMR_DF_NONE, "uint32", "DT_UINT32"},
    [SMR_DT_UINT64] = {8, SMR_DF_NONE, "uint64", "DT_UINT64"},
    /* 8-bit floats exist in the enum but no writer we read produces them. */
    [24] = {0, SMR_DF_NONE, NULL, "DT_FLOAT8_E5M2"},
    [25] = {0, SMR_DF_NONE, NULL, "DT_FLOAT8_E4M3FN"},
};

size_t smr_dtype_size(int dtype) {
  const smr_dtype_info *d = smr_dtype_info_of(dtype);
  return d ? d->size : 0;
}

/* "unknown" rather than NULL so callers can print the result directly. */
const char *smr_dtype_numpy_name(int dtype) {
  const smr_dtype_info *d = smr_dtype_info_of(dtype);
  return d && d->numpy ? d->numpy : "unknown";
}

/* Unknown values (including the *_REF variants, which never occur in files)
 * are named "DT_<n>" in a per-thread buffer that the next such call
 * overwrites. */
const char *smr_dtype_tf_name(int dtype) {
  static _Thread_local char fallback[24];
  const smr_dtype_info *d = smr_dtype_info_of(dtype);
  if (d)
    return d->tf;
  snprintf(fallback, sizeof fallback, "DT_%d", dtype);
  return fallback;
}

bool smr_dtype_is_complex(int dtype) {
  return dtype == SMR_DT_COMPLEX64 || dtype == SMR_DT_COMPLEX128;
}
