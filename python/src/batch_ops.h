/* batch_ops.h - the writer operations Writer.batch and WriteQueue take
 * (core_module.c parses and runs them; write_queue.c queues them). */
#ifndef SMR_PY_BATCH_OPS_H
#define SMR_PY_BATCH_OPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdbool.h>
#include <stdint.h>

#include "base/common.h"
#include "format/tensor.h"
#include "writer/writer.h"

typedef struct batch_op {
  /* 'b'egin, 't'ensor, 's'hape, 'e'nd; WriteQueue's own: 'c'ollections,
   * 'm' (the end marker) */
  char kind;
  const char *name; /* a tensor's; the collections file's JSON for 'c' */
  Py_ssize_t len;   /* the JSON's length for 'c' */
  long long step, mode_step;
  int mode, dtype, ndim;
  int64_t shape[SMR_MAX_DIMS];
  double wall_time;
  Py_buffer view; /* a tensor's array, held until the batch is done */
  bool has_view;
} batch_op;

/* One operation's tuple ("begin", step, mode, mode_step), ("tensor", name,
 * array, wall_time[, anything]), ("shape", name, shape) or ("end",) into
 * `op`, its array's buffer taken (the GIL held).  -1 with an exception. */
int smr_py_batch_parse(PyObject *item, batch_op *op);
/* Do one parsed operation (no GIL needed). */
int smr_py_batch_run(smr_writer *w, const batch_op *op, smr_error *err);
/* An smr_error as a Python exception (returns NULL). */
PyObject *smr_py_raise(const smr_error *err);

#endif
