/* core_module.c - smrules._core: the Python package's door into the smrules
 * library.  Today it exposes the trial writer (core/writer/writer.h), which
 * the PyTorch hook (smrules/torch/) drives from its writer thread: every
 * call that encodes or writes bytes releases the GIL, so the training
 * thread runs while a step is written.  The reader's Trial type, under the
 * trial API (smrules.trials), is in trial_type.c.
 *
 * Arrays come in through the buffer protocol (NumPy arrays, memoryviews):
 * C-contiguous, little-endian, dtype taken from the buffer's format. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/common.h"
#include "batch_ops.h"
#include "copy_pool.h"
#include "format/index.h"
#include "format/mode.h"
#include "format/tensor.h"
#include "trial_type.h"
#include "write_queue.h"
#include "writer/writer.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error                                                                         \
    "the writer stores native bytes as little-endian: a little-endian host is needed"
#endif

/* An smr_error as a Python exception: OSError for files, ValueError for
 * what the caller passed, RuntimeError for the rest. */
PyObject *smr_py_raise(const smr_error *err) {
  char msg[SMR_ERR_FILE_MAX + SMR_ERR_MSG_MAX + 64];
  smr_error_format(err, msg, sizeof msg);
  PyObject *type = err->status == SMR_ERR_IO      ? PyExc_OSError
                   : err->status == SMR_ERR_USAGE ? PyExc_ValueError
                                                  : PyExc_RuntimeError;
  PyErr_SetString(type, msg);
  return NULL;
}

/* ---- buffer format -> smrules dtype ---- */

static int dtype_of_format(const char *fmt, Py_ssize_t itemsize) {
  if (!fmt)
    fmt = "B";
  if (*fmt == '@' || *fmt == '=' || *fmt == '<')
    fmt++;
  if (*fmt == '>' || *fmt == '!')
    return SMR_DT_INVALID; /* big-endian data: the caller must convert */
  if (fmt[0] == 'Z')
    return fmt[1] == 'f' && itemsize == 8    ? SMR_DT_COMPLEX64
           : fmt[1] == 'd' && itemsize == 16 ? SMR_DT_COMPLEX128
                                             : SMR_DT_INVALID;
  if (fmt[0] && fmt[1]) /* structured or sub-array formats */
    return SMR_DT_INVALID;
  switch (fmt[0]) {
  case 'f':
    return itemsize == 4 ? SMR_DT_FLOAT : SMR_DT_INVALID;
  case 'd':
    return itemsize == 8 ? SMR_DT_DOUBLE : SMR_DT_INVALID;
  case 'e':
    return itemsize == 2 ? SMR_DT_HALF : SMR_DT_INVALID;
  case '?':
    return itemsize == 1 ? SMR_DT_BOOL : SMR_DT_INVALID;
  case 'b':
  case 'h':
  case 'i':
  case 'l':
  case 'q':
    return itemsize == 1   ? SMR_DT_INT8
           : itemsize == 2 ? SMR_DT_INT16
           : itemsize == 4 ? SMR_DT_INT32
           : itemsize == 8 ? SMR_DT_INT64
                           : SMR_DT_INVALID;
  case 'B':
  case 'H':
  case 'I':
  case 'L':
  case 'Q':
    return itemsize == 1   ? SMR_DT_UINT8
           : itemsize == 2 ? SMR_DT_UINT16
           : itemsize == 4 ? SMR_DT_UINT32
           : itemsize == 8 ? SMR_DT_UINT64
                           : SMR_DT_INVALID;
  default:
    return SMR_DT_INVALID;
  }
}

/* ---- Writer ---- */

typedef struct {
  PyObject_HEAD smr_writer *w;
  char *trial_dir;
  bool busy; /* a call is running with the GIL released */
} WriterObject;

static int writer_init(WriterObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"trial_dir", "worker", NULL};
  const char *dir, *worker;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "ss:Writer", kwlist, &dir,
                                   &worker))
    return -1;
  if (self->w) {
    PyErr_SetString(PyExc_RuntimeError, "Writer is already open");
    return -1;
  }
  smr_error err = {0};
  smr_writer *w = NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = smr_writer_open(dir, worker, 0, &w, &err);
  Py_END_ALLOW_THREADS if (rc != SMR_OK) {
    smr_py_raise(&err);
    return -1;
  }
  self->w = w;
  self->trial_dir = strdup(dir);
  return 0;
}

static void writer_dealloc(WriterObject *self) {
  if (self->w) {
    smr_error err = {0};
    smr_writer_close(self->w, &err); /* nothing to report to in dealloc */
  }
  free(self->trial_dir);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Every method: the writer must be open and not in use by another thread
 * (the GIL is released during writes, so a second thread could enter). */
static bool writer_enter(WriterObject *self) {
  if (!self->w) {
    PyErr_SetString(PyExc_ValueError, "Writer is closed");
    return false;
  }
  if (self->busy) {
    PyErr_SetString(
        PyExc_RuntimeError,
        "Writer is in use by another thread: one writer per thread");
    return false;
  }
  self->busy = true;
  return true;
}

static PyObject *writer_step_begin(WriterObject *self, PyObject *args) {
  long long step, mode_step;
  int mode;
  if (!PyArg_ParseTuple(args, "LiL:step_begin", &step, &mode, &mode_step))
    return NULL;
  if (mode < SMR_MODE_TRAIN || mode > SMR_MODE_GLOBAL)
    return PyErr_Format(PyExc_ValueError, "mode %d is not 1..4", mode);
  if (!writer_enter(self))
    return NULL;
  smr_error err = {0};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc =
      smr_writer_step_begin(self->w, step, mode, mode_step, &err);
  Py_END_ALLOW_THREADS self->busy = false;
  if (rc != SMR_OK)
    return smr_py_raise(&err);
  Py_RETURN_NONE;
}

static PyObject *writer_tensor(WriterObject *self, PyObject *args) {
  const char *name;
  PyObject *obj;
  double wall_time;
  if (!PyArg_ParseTuple(args, "sOd:tensor", &name, &obj, &wall_time))
    return NULL;
  Py_buffer view;
  if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0)
    return NULL;
  int dtype = dtype_of_format(view.format, view.itemsize);
  if (dtype == SMR_DT_INVALID) {
    PyErr_Format(PyExc_TypeError,
                 "tensor '%s': buffer format '%s' (item size %zd) is not a "
                 "little-endian number or bool type the writer stores",
                 name, view.format ? view.format : "B", view.itemsize);
    PyBuffer_Release(&view);
    return NULL;
  }
  if (view.ndim > SMR_MAX_DIMS) {
    PyErr_Format(PyExc_ValueError, "tensor '%s' has %d dimensions (at most %d)",
                 name, view.ndim, SMR_MAX_DIMS);
    PyBuffer_Release(&view);
    return NULL;
  }
  int64_t shape[SMR_MAX_DIMS];
  for (int i = 0; i < view.ndim; i++)
    shape[i] = view.shape[i];
  if (!writer_enter(self)) {
    PyBuffer_Release(&view);
    return NULL;
  }
  smr_error err = {0};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc =
      smr_writer_tensor(self->w, name, dtype, view.ndim, shape, view.buf,
                        (size_t)view.len, wall_time, &err);
  Py_END_ALLOW_THREADS self->busy = false;
  PyBuffer_Release(&view);
  if (rc != SMR_OK)
    return smr_py_raise(&err);
  Py_RETURN_NONE;
}

/* shape(name, shape): record only a tensor's shape (ReductionConfig's
 * save_shape). */
static PyObject *writer_shape(WriterObject *self, PyObject *args) {
  const char *name;
  PyObject *seq;
  if (!PyArg_ParseTuple(args, "sO:shape", &name, &seq))
    return NULL;
  PyObject *fast = PySequence_Fast(seq, "shape must be a sequence of ints");
  if (!fast)
    return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  if (n > SMR_MAX_DIMS) {
    Py_DECREF(fast);
    return PyErr_Format(PyExc_ValueError, "shape of '%s' has %zd dimensions",
                        name, n);
  }
  int64_t shape[SMR_MAX_DIMS];
  for (Py_ssize_t i = 0; i < n; i++) {
    long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return NULL;
    }
    shape[i] = v;
  }
  Py_DECREF(fast);
  if (!writer_enter(self))
    return NULL;
  smr_error err = {0};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc =
      smr_writer_shape(self->w, name, (int)n, shape, &err);
  Py_END_ALLOW_THREADS self->busy = false;
  if (rc != SMR_OK)
    return smr_py_raise(&err);
  Py_RETURN_NONE;
}

static PyObject *writer_step_end(WriterObject *self, PyObject *noargs) {
  if (!writer_enter(self))
    return NULL;
  smr_error err = {0};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = smr_writer_step_end(self->w, &err);
  Py_END_ALLOW_THREADS self->busy = false;
  if (rc != SMR_OK)
    return smr_py_raise(&err);
  Py_RETURN_NONE;
}

/* collections(json): the collections file as smdebug writes it, kept as
 * given; the library's own parser checks it first, so that a file it would
 * not read back is refused here rather than written. */
static PyObject *writer_collections(WriterObject *self, PyObject *args) {
  const char *json;
  Py_ssize_t len;
  if (!PyArg_ParseTuple(args, "s#:collections", &json, &len))
    return NULL;
  if (!writer_enter(self))
    return NULL;
  smr_error err = {0};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc =
      smr_writer_collections_json(self->w, json, (size_t)len, &err);
  Py_END_ALLOW_THREADS self->busy = false;
  if (rc != SMR_OK)
    return smr_py_raise(&err);
  Py_RETURN_NONE;
}

/* batch(ops): a sequence of operations written in order with the GIL
 * released once for all of them, so that a step's tensors cost the writer
 * thread one hand-over of the GIL instead of one per tensor (the training
 * thread runs Python meanwhile).  Each operation is a tuple:
 *   ("begin", step, mode, mode_step)   as step_begin()
 *   ("tensor", name, array, wall_time[, anything]) as tensor()
 *   ("shape", name, shape)             as shape()
 *   ("end",)                           as step_end()
 * Everything is checked before anything is written: a malformed operation
 * raises and writes nothing.  A failure while writing (a full disk) stops
 * at that operation: the ones before it are done, the rest are not.
 * (batch_ops.h: WriteQueue takes the same operations.) */

static int batch_shape(PyObject *seq, const char *name, batch_op *op) {
  PyObject *fast = PySequence_Fast(seq, "shape must be a sequence of ints");
  if (!fast)
    return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  if (n > SMR_MAX_DIMS) {
    Py_DECREF(fast);
    PyErr_Format(PyExc_ValueError, "shape of '%s' has %zd dimensions", name, n);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return -1;
    }
    op->shape[i] = v;
  }
  op->ndim = (int)n;
  Py_DECREF(fast);
  return 0;
}

int smr_py_batch_parse(PyObject *item, batch_op *op) {
  if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) < 1 ||
      !PyUnicode_Check(PyTuple_GET_ITEM(item, 0))) {
    PyErr_SetString(PyExc_TypeError,
                    "batch: each operation is a tuple (kind, ...)");
    return -1;
  }
  const char *kind = PyUnicode_AsUTF8(PyTuple_GET_ITEM(item, 0));
  if (!kind)
    return -1;
  if (strcmp(kind, "begin") == 0) {
    op->kind = 'b';
    if (!PyArg_ParseTuple(item, "sLiL:batch begin", &kind, &op->step, &op->mode,
                          &op->mode_step))
      return -1;
    if (op->mode < SMR_MODE_TRAIN || op->mode > SMR_MODE_GLOBAL) {
      PyErr_Format(PyExc_ValueError, "mode %d is not 1..4", op->mode);
      return -1;
    }
    return 0;
  }
  if (strcmp(kind, "end") == 0) {
    op->kind = 'e';
    return PyArg_ParseTuple(item, "s:batch end", &kind) ? 0 : -1;
  }
  PyObject *obj;
  if (strcmp(kind, "shape") == 0) {
    op->kind = 's';
    if (!PyArg_ParseTuple(item, "ssO:batch shape", &kind, &op->name, &obj))
      return -1;
    return batch_shape(obj, op->name, op);
  }
  if (strcmp(kind, "tensor") != 0) {
    PyErr_Format(PyExc_ValueError, "batch: unknown operation '%s'", kind);
    return -1;
  }
  op->kind = 't';
  PyObject *extra; /* the caller's own (the hook's buffer): not used */
  if (!PyArg_ParseTuple(item, "ssOd|O:batch tensor", &kind, &op->name, &obj,
                        &op->wall_time, &extra))
    return -1;
  if (PyObject_GetBuffer(obj, &op->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) !=
      0)
    return -1;
  op->has_view = true;
  op->dtype = dtype_of_format(op->view.format, op->view.itemsize);
  if (op->dtype == SMR_DT_INVALID) {
    PyErr_Format(PyExc_TypeError,
                 "tensor '%s': buffer format '%s' (item size %zd) is not a "
                 "little-endian number or bool type the writer stores",
                 op->name, op->view.format ? op->view.format : "B",
                 op->view.itemsize);
    return -1;
  }
  if (op->view.ndim > SMR_MAX_DIMS) {
    PyErr_Format(PyExc_ValueError, "tensor '%s' has %d dimensions (at most %d)",
                 op->name, op->view.ndim, SMR_MAX_DIMS);
    return -1;
  }
  op->ndim = op->view.ndim;
  for (int i = 0; i < op->ndim; i++)
    op->shape[i] = op->view.shape[i];
  return 0;
}

int smr_py_batch_run(smr_writer *w, const batch_op *op, smr_error *err) {
  switch (op->kind) {
  case 'b':
    return smr_writer_step_begin(w, op->step, op->mode, op->mode_step, err);
  case 'e':
    return smr_writer_step_end(w, err);
  case 's':
    return smr_writer_shape(w, op->name, op->ndim, op->shape, err);
  default:
    return smr_writer_tensor(w, op->name, op->dtype, op->ndim, op->shape,
                             op->view.buf, (size_t)op->view.len, op->wall_time,
                             err);
  }
}

static PyObject *writer_batch(WriterObject *self, PyObject *arg) {
  /* a tuple of the operations: it holds them (and their names and arrays)
   * while the GIL is released, whatever the caller does to its list */
  PyObject *ops = PySequence_Tuple(arg);
  if (!ops)
    return NULL;
  Py_ssize_t n = PyTuple_GET_SIZE(ops);
  batch_op *parsed = PyMem_Calloc(n ? (size_t)n : 1, sizeof *parsed);
  if (!parsed) {
    Py_DECREF(ops);
    return PyErr_NoMemory();
  }
  Py_ssize_t n_parsed = 0;
  int ok = 1;
  for (; n_parsed < n && ok; n_parsed++)
    ok = smr_py_batch_parse(PyTuple_GET_ITEM(ops, n_parsed),
                            &parsed[n_parsed]) == 0;
  smr_error err = {0};
  int rc = SMR_OK;
  if (ok && writer_enter(self)) {
    Py_BEGIN_ALLOW_THREADS for (Py_ssize_t i = 0; i < n && rc == SMR_OK; i++)
        rc = smr_py_batch_run(self->w, &parsed[i], &err);
    Py_END_ALLOW_THREADS self->busy = false;
  } else
    ok = 0;
  for (Py_ssize_t i = 0; i < n_parsed; i++)
    if (parsed[i].has_view)
      PyBuffer_Release(&parsed[i].view);
  PyMem_Free(parsed);
  Py_DECREF(ops);
  if (!ok)
    return NULL;
  if (rc != SMR_OK)
    return smr_py_raise(&err);
  Py_RETURN_NONE;
}

static PyObject *writer_close(WriterObject *self, PyObject *noargs) {
  if (!self->w)
    Py_RETURN_NONE;
  if (!writer_enter(self))
    return NULL;
  smr_error err = {0};
  smr_writer *w = self->w;
  self->w = NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = smr_writer_close(w, &err);
  Py_END_ALLOW_THREADS self->busy = false;
  if (rc != SMR_OK)
    return smr_py_raise(&err);
  Py_RETURN_NONE;
}

static PyMethodDef writer_methods[] = {
    {"step_begin", (PyCFunction)writer_step_begin, METH_VARARGS,
     "step_begin(step, mode, mode_step): start a global step (mode 1..4)."},
    {"tensor", (PyCFunction)writer_tensor, METH_VARARGS,
     "tensor(name, array, wall_time): add a C-contiguous array to the step."},
    {"shape", (PyCFunction)writer_shape, METH_VARARGS,
     "shape(name, shape): record only the shape of a tensor in the step."},
    {"batch", (PyCFunction)writer_batch, METH_O,
     "batch(ops): begin/tensor/shape/end operations, in order, written with "
     "the GIL released once for all of them."},
    {"step_end", (PyCFunction)writer_step_end, METH_NOARGS,
     "step_end(): complete the step's event file, then its index file."},
    {"collections", (PyCFunction)writer_collections, METH_VARARGS,
     "collections(json): write the worker's collections file."},
    {"close", (PyCFunction)writer_close, METH_NOARGS,
     "close(): end an open step and release the writer."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject WriterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "smrules._core.Writer",
    .tp_basicsize = sizeof(WriterObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Writer(trial_dir, worker): writes one worker's steps of a "
              "trial as smdebug does (docs/formats.md).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)writer_init,
    .tp_dealloc = (destructor)writer_dealloc,
    .tp_methods = writer_methods,
};

static PyObject *mod_write_end_marker(PyObject *m, PyObject *args) {
  const char *dir;
  if (!PyArg_ParseTuple(args, "s:write_end_marker", &dir))
    return NULL;
  smr_error err = {0};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = smr_write_end_marker(dir, &err);
  Py_END_ALLOW_THREADS if (rc != SMR_OK) return smr_py_raise(&err);
  Py_RETURN_NONE;
}

static PyObject *mod_copy_into(PyObject *m, PyObject *args) {
  Py_buffer dst, src;
  if (!PyArg_ParseTuple(args, "w*y*:copy_into", &dst, &src))
    return NULL;
  PyObject *ret = NULL;
  if (!PyBuffer_IsContiguous(&dst, 'C') || !PyBuffer_IsContiguous(&src, 'C'))
    PyErr_SetString(PyExc_BufferError, "copy_into: both buffers must be "
                                       "C-contiguous");
  else if (dst.len != src.len)
    PyErr_Format(PyExc_ValueError, "copy_into: %zd bytes into a buffer of %zd",
                 src.len, dst.len);
  else {
    if (src.len >= COPY_STREAM_MIN) {
      Py_BEGIN_ALLOW_THREADS copy_stream(dst.buf, src.buf, (size_t)src.len);
      Py_END_ALLOW_THREADS
    } else
      memcpy(dst.buf, src.buf, (size_t)src.len);
    ret = Py_None;
    Py_INCREF(ret);
  }
  PyBuffer_Release(&dst);
  PyBuffer_Release(&src);
  return ret;
}

static PyMethodDef module_methods[] = {
    {"write_end_marker", mod_write_end_marker, METH_VARARGS,
     "write_end_marker(trial_dir): create training_job_end.ts."},
    {"copy_into", mod_copy_into, METH_VARARGS,
     "copy_into(dst, src): copy the bytes of the C-contiguous buffer src "
     "into dst (writable, of the same length); a large copy bypasses the "
     "caches."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "smrules._core",
    "The smrules C library seen from Python (see smrules/__init__.py).", -1,
    module_methods};

PyMODINIT_FUNC PyInit__core(void) {
  if (PyType_Ready(&WriterType) < 0)
    return NULL;
  PyObject *m = PyModule_Create(&core_module);
  if (!m)
    return NULL;
  Py_INCREF(&WriterType);
  if (PyModule_AddObject(m, "Writer", (PyObject *)&WriterType) < 0) {
    Py_DECREF(&WriterType);
    Py_DECREF(m);
    return NULL;
  }
  if (smr_py_add_trial(m) < 0 || smr_py_add_write_queue(m) < 0 ||
      smr_py_add_copy_pool(m) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  PyModule_AddIntConstant(m, "MODE_TRAIN", SMR_MODE_TRAIN);
  PyModule_AddIntConstant(m, "MODE_EVAL", SMR_MODE_EVAL);
  PyModule_AddIntConstant(m, "MODE_PREDICT", SMR_MODE_PREDICT);
  PyModule_AddIntConstant(m, "MODE_GLOBAL", SMR_MODE_GLOBAL);
  return m;
}
