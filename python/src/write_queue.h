/* write_queue.h - smrules._core.WriteQueue (write_queue.c). */
#ifndef SMR_PY_WRITE_QUEUE_H
#define SMR_PY_WRITE_QUEUE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Add the WriteQueue type to module `m`; -1 with an exception. */
int smr_py_add_write_queue(PyObject *m);

#endif
