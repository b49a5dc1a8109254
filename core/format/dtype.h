/* dtype.h - TensorFlow's DataType numbers (the `dtype` of a TensorProto,
 * docs/formats.md#data-types) and the one table that says, for each,
 * its name, NumPy's name for it (smdebug hands rules NumPy arrays), its
 * element size and the TensorProto field its values are kept in when
 * there is no tensor_content.  Decoding (event.c), values and statistics
 * (tensor.c) and encoding (the writer) all read this table. */
#ifndef SMR_DTYPE_H
#define SMR_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

/* TensorFlow DataType values used by smdebug (types.proto numbering).
 * SMR_DT_STRING is used for every string tensor, whatever the stored dtype
 * (smdebug stores strings with DT_INVALID). */
enum {
  SMR_DT_INVALID = 0,
  SMR_DT_FLOAT = 1,
  SMR_DT_DOUBLE = 2,
  SMR_DT_INT32 = 3,
  SMR_DT_UINT8 = 4,
  SMR_DT_INT16 = 5,
  SMR_DT_INT8 = 6,
  SMR_DT_STRING = 7,
  SMR_DT_COMPLEX64 = 8,
  SMR_DT_INT64 = 9,
  SMR_DT_BOOL = 10,
  SMR_DT_QINT8 = 11,
  SMR_DT_QUINT8 = 12,
  SMR_DT_QINT32 = 13,
  SMR_DT_BFLOAT16 = 14,
  SMR_DT_QINT16 = 15,
  SMR_DT_QUINT16 = 16,
  SMR_DT_UINT16 = 17,
  SMR_DT_COMPLEX128 = 18,
  SMR_DT_HALF = 19,
  SMR_DT_UINT32 = 22,
  SMR_DT_UINT64 = 23,
};

/* The TensorProto field that holds a dtype's values when there is no
 * tensor_content (TensorFlow's convention). */
typedef enum smr_dtype_field {
  SMR_DF_NONE, /* content only */
  SMR_DF_FLOAT,
  SMR_DF_DOUBLE,
  SMR_DF_INT,
  SMR_DF_INT64,
  SMR_DF_BOOL,
  SMR_DF_SCOMPLEX,
  SMR_DF_DCOMPLEX,
  SMR_DF_HALF
} smr_dtype_field;

typedef struct smr_dtype_info {
  unsigned char size;  /* bytes per element; 0: not a number we decode */
  unsigned char field; /* smr_dtype_field */
  const char *numpy;   /* NumPy's name; NULL when it has none */
  const char *tf;      /* TensorFlow's name; NULL: no such number */
} smr_dtype_info;

/* 0 .. DT_FLOAT8_E4M3FN (25); the *_REF variants (101-125) never occur
 * in files. */
#define SMR_DTYPE_COUNT 26
extern const smr_dtype_info smr_dtype_table[SMR_DTYPE_COUNT];

/* The entry of a dtype number, NULL when TensorFlow has no such number.
 * Inline: every record decoded asks it. */
static inline const smr_dtype_info *smr_dtype_info_of(int dtype) {
  if (dtype < 0 || dtype >= SMR_DTYPE_COUNT || !smr_dtype_table[dtype].tf)
    return NULL;
  return &smr_dtype_table[dtype];
}

/* Bytes per element, 0 for strings and unsupported types. */
size_t smr_dtype_size(int dtype);
/* numpy-style name ("float32", "int64", "bool", "str", "complex64", ...);
 * "unknown" when NumPy has none. */
const char *smr_dtype_numpy_name(int dtype);
/* TensorFlow name ("DT_FLOAT", ...); "DT_<n>" for unknown numbers. */
const char *smr_dtype_tf_name(int dtype);
bool smr_dtype_is_complex(int dtype);

#endif
