/* trial_type.h - adds smrules._core.Trial and _core.Unavailable to the
 * module (trial_type.c). */
#ifndef SMR_PY_TRIAL_TYPE_H
#define SMR_PY_TRIAL_TYPE_H
#include <Python.h>
int smr_py_add_trial(PyObject *m);
#endif
