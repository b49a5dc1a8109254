/* tensor.h - decoded tensor values and one-pass reductions.
 *
 * A smr_tensor is a view: `data` points at raw little-endian element bytes
 * owned by whatever produced the tensor (a decoded event record, a writer's
 * caller, ...).  smr_tensor_release() frees what the producer attached.
 * Numeric elements are widened to double on access; reductions accumulate in
 * double.  This module knows nothing about files. */
#ifndef SMR_TENSOR_H
#define SMR_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "format/dtype.h"

/* dtypes: format/dtype.h */

#define SMR_MAX_DIMS 32

typedef struct smr_tensor {
  int dtype;        /* semantic dtype (SMR_DT_STRING for strings) */
  int stored_dtype; /* TensorProto.dtype as stored */
  int ndim;
  int64_t shape[SMR_MAX_DIMS];
  int64_t count;       /* number of elements (product of shape; 1 for 0-d) */
  const uint8_t *data; /* count * smr_dtype_size(dtype) bytes, LE */
  size_t nbytes;
  /* string tensors: `count` strings (not NUL-terminated inside) */
  const uint8_t **strings;
  const size_t *string_lens;
  /* where it came from (filled by the event decoder) */
  int64_t step; /* Event.step: the global step */
  double wall_time;
  int mode;          /* from the record's metadata; 4 = GLOBAL if absent */
  int64_t mode_step; /* from the record's metadata; Event.step if absent */
  /* producer-owned memory, freed by smr_tensor_release */
  void *owner_;
  void (*release_)(void *owner);
} smr_tensor;

void smr_tensor_release(smr_tensor *t);

/* Element i widened to double (real part for complex; 0/1 for bool). */
double smr_tensor_get(const smr_tensor *t, int64_t i);

/* Reductions (docs/formats.md#reductions).  Names as in smdebug. */
typedef enum smr_reduction {
  SMR_RED_MIN,
  SMR_RED_MAX,
  SMR_RED_MEAN,
  SMR_RED_STD,
  SMR_RED_VARIANCE,
  SMR_RED_SUM,
  SMR_RED_PROD,
  SMR_RED_L1,
  SMR_RED_L2,
  SMR_RED_LINF,
  SMR_RED_COUNT_ /* number of reductions */
} smr_reduction;

/* "min", "max", ..., "l1", "l2", "linf"; also accepts "l1_norm"/"l2_norm".
 * Returns -1 for an unknown name. */
int smr_reduction_from_name(const char *name);
const char *smr_reduction_name(smr_reduction r);

/* Compute reduction `r` of the tensor (of |x| when `abs`), NumPy semantics:
 * NaN propagates, inf follows IEEE arithmetic, population variance, vector
 * norms over the flattened tensor.  Complex tensors use the modulus for abs
 * and norms and are refused for the others.  SMR_ERR_USAGE for strings,
 * empty tensors (except sum/prod/l1/l2/count-like ones, as NumPy) or
 * unsupported combinations. */
int smr_tensor_reduce(const smr_tensor *t, smr_reduction r, bool abs,
                      double *out, smr_error *err);

/* Summary statistics in one pass.  min/max/sum/mean/l2 are over the finite
 * elements only (has_finite=false when there are none); nan/inf/zero count
 * the rest. */
typedef struct smr_stats {
  int64_t count;
  int64_t finite, nan, pinf, ninf, zeros;
  bool has_finite;
  double min, max, sum, mean, l1, l2, linf;
} smr_stats;
int smr_tensor_stats(const smr_tensor *t, smr_stats *out, smr_error *err);
/* The counts of smr_tensor_stats only (count, finite, nan, pinf, ninf,
 * zeros, has_finite), the same numbers, from a cheaper pass (float32
 * tensors are counted from the bits); the other fields are NaN. */
int smr_tensor_counts(const smr_tensor *t, smr_stats *out, smr_error *err);
/* Tests: false keeps smr_tensor_stats to the x86-64 baseline instructions
 * on a machine with AVX2 (the results are the same bits either way).  Set
 * it before other threads compute statistics. */
void smr_tensor_allow_avx2(bool on);

/* SHA-256 of the raw bytes as smdebug fixtures define it: the LE element
 * bytes in C order; for strings every element's UTF-8 bytes followed by one
 * 0x00 byte.  `hex` receives 64 hex digits and a NUL. */
void smr_tensor_sha256(const smr_tensor *t, char hex[65]);

#endif
