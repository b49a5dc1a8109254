/* trial_type.c - smrules._core.Trial: the C trial (core/trial/trial.h) seen
 * from Python, under smrules.trials (smrules/trials.py), which gives it
 * smdebug's names.  Every call into the trial holds the object's lock: the
 * calls that read tensor bytes (value, reduction, shape, read_many, and
 * the read-ahead thread's reads) hold it for reading, so that they read at
 * once (the C trial is read by many threads in a run), and release the GIL
 * first, so other Python threads run while files are read; the other calls
 * (the catalog's answers, refresh) hold it for writing.  Nothing waits for
 * the GIL while holding the lock, so two threads cannot wait on each
 * other.
 *
 * Availability answers (step not saved, tensor not there, ...) are raised
 * as _core.Unavailable(status, message); smrules.trials maps the status to
 * smdebug's exception classes (smrules/exceptions.py). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "base/workers.h"
#include "format/mode.h"
#include "format/tensor.h"
#include "read_ahead.h"
#include "trial/trial.h"
#include "trial_type.h"

static PyObject *Unavailable; /* _core.Unavailable(status, message) */

/* value()'s prefetch (trial_value): what a loop over value() asked for
 * after a tensor's value, learned per tensor name.  A transition seen
 * twice in a row (the same next name, the same step difference) is
 * trusted, and the value it predicts is read on the read-ahead thread
 * while the caller works on this one. */
#define NEXT_SLOTS 256
typedef struct next_slot {
  char *name, *next; /* after `name`, `next` was asked for */
  long long delta;   /* at step + delta */
  bool confirmed;    /* seen twice in a row */
} next_slot;

typedef struct {
  PyObject_HEAD smr_trial *t;
  bool closed; /* close() called: methods refuse; freed in dealloc */
  pthread_rwlock_t lock;
  bool read_ahead;   /* value() may prefetch (Trial(read_ahead=True)) */
  bool reduce_ahead; /* reduction() may (Trial(reduce_ahead=True)) */
  py_job *pf;        /* the value prefetched, or NULL */
  next_slot next[NEXT_SLOTS];
  char *last_name, *last_worker; /* the last value() asked for */
  long long last_step;
  int last_mode;
  unsigned long long pf_hits, pf_misses;
} TrialObject;

static PyObject *raise_status(int rc, const smr_error *err) {
  char msg[SMR_ERR_FILE_MAX + SMR_ERR_MSG_MAX + 64];
  smr_error_format(err, msg, sizeof msg);
  if (rc <= SMR_STEP_UNAVAILABLE && rc >= SMR_INVALID_WORKER) {
    PyObject *args = Py_BuildValue("(is)", rc, msg);
    if (args) {
      PyErr_SetObject(Unavailable, args);
      Py_DECREF(args);
    }
    return NULL;
  }
  PyObject *type = rc == SMR_ERR_IO      ? PyExc_OSError
                   : rc == SMR_ERR_USAGE ? PyExc_ValueError
                                         : PyExc_RuntimeError;
  PyErr_SetString(type, msg);
  return NULL;
}

static bool open_or_raise(TrialObject *self) {
  if (self->t && !self->closed)
    return true;
  PyErr_SetString(PyExc_ValueError, "the trial is closed");
  return false;
}

/* The lock held for writing: alone in the trial. */
#define LOCKED(self, stmt)                                                     \
  do {                                                                         \
    pthread_rwlock_wrlock(&(self)->lock);                                      \
    stmt;                                                                      \
    pthread_rwlock_unlock(&(self)->lock);                                      \
  } while (0)

/* The GIL released, then the lock taken for writing (refresh). */
#define UNLOCKED_GIL(self, stmt)                                               \
  do {                                                                         \
    Py_BEGIN_ALLOW_THREADS LOCKED(self, stmt);                                 \
    Py_END_ALLOW_THREADS                                                       \
  } while (0)

/* The GIL released, then the lock taken for reading (reads of values). */
#define READING(self, stmt)                                                    \
  do {                                                                         \
    Py_BEGIN_ALLOW_THREADS pthread_rwlock_rdlock(&(self)->lock);               \
    stmt;                                                                      \
    pthread_rwlock_unlock(&(self)->lock);                                      \
    Py_END_ALLOW_THREADS                                                       \
  } while (0)

static int trial_init(TrialObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"path", "live", "read_ahead", "reduce_ahead", NULL};
  const char *path;
  int live = 1, read_ahead = 1, reduce_ahead = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "s|ppp:Trial", kwlist, &path,
                                   &live, &read_ahead, &reduce_ahead))
    return -1;
  self->read_ahead = read_ahead != 0;
  self->reduce_ahead = reduce_ahead != 0;
  if (self->t) {
    PyErr_SetString(PyExc_ValueError, "Trial already open");
    return -1;
  }
  /* fresh: a private in-memory catalog; reading from Python writes
   * nothing into the trial folder. */
  smr_trial_opts opts = {.fresh = true, .live = live != 0};
  smr_error err = {0};
  smr_trial *t = NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = smr_trial_open(path, &opts, &t, &err);
  Py_END_ALLOW_THREADS if (rc != SMR_OK) {
    raise_status(rc, &err);
    return -1;
  }
  /* values' elements aligned for NumPy: its loops copy a misaligned
   * array piece by piece (np.abs(v).mean() of 1 MiB ~25 % slower) */
  smr_trial_align_values(t, true);
  self->t = t;
  return 0;
}

static PyObject *trial_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  TrialObject *self = (TrialObject *)type->tp_alloc(type, 0);
  if (self)
    pthread_rwlock_init(&self->lock, NULL);
  return (PyObject *)self;
}

/* Drops value()'s prefetch, if any (with the GIL held: waits for a read in
 * progress without it). */
static void end_prefetch(TrialObject *self) {
  py_job *pf = self->pf;
  self->pf = NULL;
  if (pf) {
    Py_BEGIN_ALLOW_THREADS smr_py_job_end(pf);
    Py_END_ALLOW_THREADS
  }
}

static void trial_dealloc(TrialObject *self) {
  end_prefetch(self);
  for (size_t i = 0; i < NEXT_SLOTS; i++) {
    free(self->next[i].name);
    free(self->next[i].next);
  }
  free(self->last_name);
  free(self->last_worker);
  if (self->t)
    smr_trial_close(self->t);
  pthread_rwlock_destroy(&self->lock);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *strv_list(const smr_strv *s) {
  PyObject *l = PyList_New((Py_ssize_t)s->n);
  for (size_t i = 0; l && i < s->n; i++) {
    PyObject *o = PyUnicode_DecodeUTF8(s->v[i], strlen(s->v[i]), "replace");
    if (!o) {
      Py_DECREF(l);
      return NULL;
    }
    PyList_SET_ITEM(l, (Py_ssize_t)i, o);
  }
  return l;
}

static PyObject *i64v_list(const smr_i64v *a) {
  PyObject *l = PyList_New((Py_ssize_t)a->n);
  for (size_t i = 0; l && i < a->n; i++) {
    PyObject *o = PyLong_FromLongLong(a->v[i]);
    if (!o) {
      Py_DECREF(l);
      return NULL;
    }
    PyList_SET_ITEM(l, (Py_ssize_t)i, o);
  }
  return l;
}

static PyObject *trial_refresh(TrialObject *self, PyObject *unused) {
  if (!open_or_raise(self))
    return NULL;
  size_t added = 0;
  smr_error err = {0};
  int rc;
  end_prefetch(self); /* a value not there before may be now */
  UNLOCKED_GIL(self, rc = smr_trial_refresh(self->t, &added, &err));
  if (rc != SMR_OK)
    return raise_status(rc, &err);
  return PyLong_FromSize_t(added);
}

/* Marks the trial closed; the C trial is freed in dealloc, when no thread
 * can still be inside one of its methods (one that passed open_or_raise
 * before close() keeps a valid trial). */
static PyObject *trial_close(TrialObject *self, PyObject *unused) {
  end_prefetch(self);
  self->closed = true;
  Py_RETURN_NONE;
}

static PyObject *trial_info(TrialObject *self, PyObject *unused) {
  if (!open_or_raise(self))
    return NULL;
  int64_t last;
  int nw;
  bool all, end;
  smr_strv workers = {0};
  LOCKED(self, last = smr_trial_last_complete_step(self->t);
         nw = smr_trial_num_workers(self->t);
         all = smr_trial_loaded_all_steps(self->t);
         end = smr_trial_end_marker(self->t);
         const smr_strv *w = smr_trial_workers(self->t);
         for (size_t i = 0; w && i < w->n; i++)
             smr_strv_push(&workers, w->v[i]));
  PyObject *wl = strv_list(&workers);
  smr_strv_free(&workers);
  if (!wl)
    return NULL;
  return Py_BuildValue("{s:L,s:i,s:O,s:O,s:N}", "last_complete_step",
                       (long long)last, "num_workers", nw, "loaded_all_steps",
                       all ? Py_True : Py_False, "end_marker",
                       end ? Py_True : Py_False, "workers", wl);
}

static PyObject *trial_steps(TrialObject *self, PyObject *args) {
  int mode, incomplete = 0;
  if (!PyArg_ParseTuple(args, "i|p:steps", &mode, &incomplete) ||
      !open_or_raise(self))
    return NULL;
  smr_i64v v = {0};
  LOCKED(self, smr_trial_steps(self->t, mode, incomplete, &v));
  PyObject *l = i64v_list(&v);
  smr_i64v_free(&v);
  return l;
}

static PyObject *trial_modes(TrialObject *self, PyObject *unused) {
  if (!open_or_raise(self))
    return NULL;
  int modes[4];
  size_t n = 0;
  LOCKED(self, smr_trial_modes(self->t, modes, &n));
  PyObject *l = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; l && i < n; i++)
    PyList_SET_ITEM(l, (Py_ssize_t)i, PyLong_FromLong(modes[i]));
  return l;
}

static PyObject *trial_step_mode(TrialObject *self, PyObject *args) {
  long long step;
  if (!PyArg_ParseTuple(args, "L:step_mode", &step) || !open_or_raise(self))
    return NULL;
  int mode = 0;
  int64_t ms = 0;
  bool ok;
  LOCKED(self, ok = smr_trial_step_mode(self->t, step, &mode, &ms));
  if (!ok)
    Py_RETURN_NONE;
  return Py_BuildValue("(iL)", mode, (long long)ms);
}

static PyObject *trial_global_step(TrialObject *self, PyObject *args) {
  int mode;
  long long ms;
  if (!PyArg_ParseTuple(args, "iL:global_step", &mode, &ms) ||
      !open_or_raise(self))
    return NULL;
  int64_t step = 0;
  bool ok;
  LOCKED(self, ok = smr_trial_global_step(self->t, mode, ms, &step));
  if (!ok)
    Py_RETURN_NONE;
  return PyLong_FromLongLong(step);
}

static PyObject *trial_has_passed_step(TrialObject *self, PyObject *args) {
  long long step;
  int mode;
  if (!PyArg_ParseTuple(args, "Li:has_passed_step", &step, &mode) ||
      !open_or_raise(self))
    return NULL;
  smr_availability a;
  LOCKED(self, a = smr_trial_has_passed_step(self->t, step, mode));
  return PyLong_FromLong((long)a);
}

static PyObject *trial_collection_names(TrialObject *self, PyObject *unused) {
  if (!open_or_raise(self))
    return NULL;
  smr_strv v = {0};
  LOCKED(self, smr_trial_collection_names(self->t, &v));
  PyObject *l = strv_list(&v);
  smr_strv_free(&v);
  return l;
}

static PyObject *trial_collection_members(TrialObject *self, PyObject *args) {
  const char *name;
  if (!PyArg_ParseTuple(args, "s:collection_members", &name) ||
      !open_or_raise(self))
    return NULL;
  smr_strv v = {0};
  smr_error err = {0};
  int rc;
  LOCKED(self,
         rc = smr_trial_collection_members(self->t, name, NULL, &v, &err));
  if (rc != SMR_OK) {
    smr_strv_free(&v);
    return raise_status(rc, &err);
  }
  PyObject *l = strv_list(&v);
  smr_strv_free(&v);
  return l;
}

static PyObject *trial_tensor_names(TrialObject *self, PyObject *args) {
  PyObject *regexes = Py_None;
  if (!PyArg_ParseTuple(args, "|O:tensor_names", &regexes) ||
      !open_or_raise(self))
    return NULL;
  smr_strv v = {0};
  smr_error err = {0};
  int rc;
  if (regexes == Py_None) {
    LOCKED(self, rc = smr_trial_tensor_names(self->t, &v, &err));
  } else {
    PyObject *seq = PySequence_Fast(regexes, "regexes: a list of strings");
    if (!seq)
      return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    const char **rx = calloc((size_t)n + 1, sizeof *rx);
    for (Py_ssize_t i = 0; rx && i < n; i++) {
      rx[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i));
      if (!rx[i]) {
        free(rx);
        Py_DECREF(seq);
        return NULL;
      }
    }
    if (!rx) {
      Py_DECREF(seq);
      return PyErr_NoMemory();
    }
    LOCKED(self, rc = smr_trial_tensor_names_regex(self->t, rx, (size_t)n, NULL,
                                                   &v, &err));
    free(rx);
    Py_DECREF(seq);
  }
  if (rc != SMR_OK) {
    smr_strv_free(&v);
    return raise_status(rc, &err);
  }
  PyObject *l = strv_list(&v);
  smr_strv_free(&v);
  return l;
}

static PyObject *trial_has_tensor(TrialObject *self, PyObject *args) {
  const char *name;
  if (!PyArg_ParseTuple(args, "s:has_tensor", &name) || !open_or_raise(self))
    return NULL;
  bool has;
  LOCKED(self, has = smr_trial_has_tensor(self->t, name));
  return PyBool_FromLong(has);
}

static PyObject *trial_tensor_step_list(TrialObject *self, PyObject *args) {
  const char *name;
  int mode, incomplete = 0;
  if (!PyArg_ParseTuple(args, "si|p:tensor_step_list", &name, &mode,
                        &incomplete) ||
      !open_or_raise(self))
    return NULL;
  smr_i64v v = {0};
  smr_error err = {0};
  int rc;
  LOCKED(self, rc = smr_trial_tensor_step_list(self->t, name, mode, incomplete,
                                               &v, &err));
  if (rc != SMR_OK) {
    smr_i64v_free(&v);
    return raise_status(rc, &err);
  }
  PyObject *l = i64v_list(&v);
  smr_i64v_free(&v);
  return l;
}

/* [(global step, mode, mode_step, worker, has_value, reductions)] of a
 * tensor; reductions: bit (r*2 + abs) per saved reduction. */
static PyObject *trial_tensor_steps(TrialObject *self, PyObject *args) {
  const char *name;
  if (!PyArg_ParseTuple(args, "s:tensor_steps", &name) || !open_or_raise(self))
    return NULL;
  smr_tensor_steps s = {0};
  smr_error err = {0};
  int rc;
  LOCKED(self, rc = smr_trial_tensor_steps(self->t, name, &s, &err));
  if (rc != SMR_OK) {
    smr_tensor_steps_free(&s);
    return raise_status(rc, &err);
  }
  PyObject *l = PyList_New((Py_ssize_t)s.n);
  for (size_t i = 0; l && i < s.n; i++) {
    const smr_tensor_step *e = &s.v[i];
    PyObject *o = Py_BuildValue(
        "(LiLsOI)", (long long)e->step, e->mode, (long long)e->mode_step,
        e->worker, e->has_value ? Py_True : Py_False, e->reductions);
    if (!o) {
      Py_CLEAR(l);
      break;
    }
    PyList_SET_ITEM(l, (Py_ssize_t)i, o);
  }
  smr_tensor_steps_free(&s);
  return l;
}

/* ---------------------------------------------------------------- values
 *
 * _core.Value: a value's element bytes left where the library decoded them
 * (the buffer its record was read into, core/source/shared_records.c),
 * lent to Python through the buffer protocol, read-only; NumPy's
 * frombuffer makes the user's array over it without a copy.  Copying 1 MiB
 * into a fresh bytes object per value cost more than reading it: the copy
 * faulted in new pages each time (VanishingGradient's scan from Python:
 * 12.7x the C rule, two thirds of it page faults).  The buffer goes back
 * to the library's pool when the last array over it dies, so the next
 * value is read into pages already there.
 *
 * A Value holds a reference to its Trial object, so the C trial (and its
 * source, which a range may belong to) lives as long as any array over
 * its bytes, close() or not.
 *
 * Lent only where it pays and stays bounded: values of LEND_MIN bytes or
 * more (smaller ones are copied: a copy costs less than the object, and a
 * small value must not keep a record buffer from the pool), and at most
 * LEND_MAX at once per process: the large record buffers are memory
 * mappings of their own, and a user keeping many arrays must not run the
 * process into vm.max_map_count (65530 by default).  Past it, values are
 * copied as before.  Both rules change how a value is held, never its
 * bits. */
#define LEND_MIN ((size_t)64 << 10)
#define LEND_MAX 1024

typedef struct {
  PyObject_HEAD smr_tensor v;
  PyObject *trial; /* the TrialObject the bytes came from */
  py_home *home;   /* where the buffer goes back to (read_ahead.h) */
} ValueObject;

static Py_ssize_t lent_alive; /* Values alive; changed with the GIL held */

static int value_getbuffer(ValueObject *self, Py_buffer *view, int flags) {
  return PyBuffer_FillInfo(view, (PyObject *)self, (void *)self->v.data,
                           (Py_ssize_t)self->v.nbytes, 1, flags);
}

static void value_dealloc(ValueObject *self) {
  /* The buffer goes back to the pool of the thread that read it (or is
   * freed): no lock of the trial is needed, the sources release ranges
   * from any thread. */
  smr_py_release(self->home, &self->v);
  Py_XDECREF(self->trial);
  lent_alive--;
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyBufferProcs value_as_buffer = {
    .bf_getbuffer = (getbufferproc)value_getbuffer,
};

static PyTypeObject ValueType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "smrules._core.Value",
    .tp_basicsize = sizeof(ValueObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A value's bytes as the library read them, read-only (the "
              "buffer under a value()'s NumPy array).",
    .tp_dealloc = (destructor)value_dealloc,
    .tp_as_buffer = &value_as_buffer,
};

static PyObject *lent_count(PyObject *unused, PyObject *noargs) {
  return PyLong_FromSsize_t(lent_alive);
}

static PyObject *read_counts(PyObject *unused, PyObject *noargs) {
  unsigned long long by_reader, by_caller;
  smr_py_read_counts(&by_reader, &by_caller);
  return Py_BuildValue("{s:K,s:K}", "read_ahead", by_reader, "by_caller",
                       by_caller);
}

static PyObject *hold_read_ahead(PyObject *unused, PyObject *arg) {
  int on = PyObject_IsTrue(arg);
  if (on < 0)
    return NULL;
  Py_BEGIN_ALLOW_THREADS smr_py_read_ahead_hold(on != 0);
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

/* The element bytes of *v (read on the thread whose home is `home`) as a
 * Python buffer: lent (v is moved into the Value, *v zeroed) or copied
 * into bytes (v left to the caller). */
static PyObject *value_bytes(PyObject *trial, smr_tensor *v, py_home *home) {
  if (v->nbytes < LEND_MIN || lent_alive >= LEND_MAX)
    return PyBytes_FromStringAndSize((const char *)v->data,
                                     (Py_ssize_t)v->nbytes);
  ValueObject *o = PyObject_New(ValueObject, &ValueType);
  if (!o)
    return NULL;
  o->v = *v;
  memset(v, 0, sizeof *v);
  Py_INCREF(trial);
  o->trial = trial;
  o->home = home;
  lent_alive++;
  return (PyObject *)o;
}

/* A value as (dtype name, shape tuple, buffer | list of str); the buffer
 * (value_bytes) may take v over. */
static PyObject *tensor_tuple(PyObject *trial, smr_tensor *v, py_home *home) {
  PyObject *shape = PyTuple_New(v->ndim);
  for (int i = 0; shape && i < v->ndim; i++)
    PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(v->shape[i]));
  if (!shape)
    return NULL;
  const char *dtype = smr_dtype_numpy_name(v->dtype);
  PyObject *data;
  if (v->dtype == SMR_DT_STRING) {
    data = PyList_New((Py_ssize_t)v->count);
    for (int64_t i = 0; data && i < v->count; i++) {
      PyObject *s = PyUnicode_DecodeUTF8((const char *)v->strings[i],
                                         (Py_ssize_t)v->string_lens[i],
                                         "surrogateescape");
      if (!s) {
        Py_CLEAR(data);
        break;
      }
      PyList_SET_ITEM(data, (Py_ssize_t)i, s);
    }
  } else {
    data = value_bytes(trial, v, home);
  }
  if (!data) {
    Py_DECREF(shape);
    return NULL;
  }
  return Py_BuildValue("(sNN)", dtype, shape, data);
}

/* ---- value()'s prefetch (see next_slot) ---- */

static bool same_str(const char *a, const char *b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

static next_slot *next_slot_of(TrialObject *self, const char *name) {
  return &self->next[(smr_hash_str(SMR_HASH_INIT, name) >> 40) % NEXT_SLOTS];
}

/* The prefetched item if it is the request `want` (a value or a
 * reduction) and was read: moved into *got; the prefetch is over either
 * way.  With the GIL held. */
static bool take_prefetched(TrialObject *self, const py_item *want,
                            py_item *got) {
  py_job *pf = self->pf;
  self->pf = NULL; /* this thread's while the GIL is released */
  if (!pf)
    return false;
  const py_item *q = smr_py_job_peek(pf);
  bool same = q && q->step == want->step && q->mode == want->mode &&
              q->is_reduction == want->is_reduction &&
              (!q->is_reduction ||
               (q->reduction == want->reduction && q->abs == want->abs)) &&
              same_str(q->name, want->name) &&
              same_str(q->worker, want->worker);
  bool ok = false, more = false;
  Py_BEGIN_ALLOW_THREADS if (same && smr_py_job_next(pf, got)) {
    /* a value that was not there then may be now: asked again */
    ok = got->rc == SMR_OK;
  }
  /* a chain of reductions goes on while it is taken in order */
  more = ok && smr_py_job_peek(pf);
  if (!more)
    smr_py_job_end(pf);
  Py_END_ALLOW_THREADS if (ok) self->pf_hits++;
  else self->pf_misses++;
  if (more && !self->pf) {
    self->pf = pf;
  } else if (more) { /* another thread's prefetch, meanwhile */
    Py_BEGIN_ALLOW_THREADS smr_py_job_end(pf);
    Py_END_ALLOW_THREADS
  }
  return ok;
}

/* A reduction scan's chain: how many requests are predicted at once (the
 * confirmed transitions followed from the request in hand), and how many
 * of them are computed ahead of the one the caller takes
 * (smr_py_job_start_reductions).  A chain ends where a transition is not
 * confirmed, so a scan's first two passes predict nothing. */
#define REDUCE_CHAIN 64
#define REDUCE_WINDOW 8

/* Predicts from req (with the GIL held): the chain of requests expected
 * after it, into out[0..max); returns how many. */
static size_t predict_chain(TrialObject *self, const py_item *req, py_item *out,
                            size_t max) {
  const char *name = req->name;
  long long step = req->step;
  size_t n = 0;
  while (n < max) {
    next_slot *s = next_slot_of(self, name);
    if (!s->confirmed || !same_str(s->name, name) || s->delta < 0 ||
        step > INT64_MAX - s->delta)
      break;
    out[n] = *req;
    out[n].name = s->next;
    out[n].step = step += s->delta;
    name = s->next;
    n++;
  }
  return n;
}

/* Learns from the request after the last one, and prefetches the one
 * expected next (of the same kind: a value, or the same reduction).  With
 * the GIL held. */
static void prefetch_next(TrialObject *self, const py_item *req) {
  if (!(req->is_reduction ? self->reduce_ahead : self->read_ahead))
    return;
  const char *name = req->name, *worker = req->worker;
  long long step = req->step;
  int mode = req->mode;
  if (self->last_name && self->last_mode == mode &&
      same_str(self->last_worker, worker)) {
    next_slot *s = next_slot_of(self, self->last_name);
    long long delta = step - self->last_step;
    if (same_str(s->name, self->last_name) && same_str(s->next, name) &&
        s->delta == delta) {
      s->confirmed = true;
    } else {
      free(s->name);
      free(s->next);
      s->name = smr_xstrdup(self->last_name);
      s->next = smr_xstrdup(name);
      s->delta = delta;
      s->confirmed = false;
    }
  }
  if (!same_str(self->last_name, name)) {
    free(self->last_name);
    self->last_name = smr_xstrdup(name);
  }
  if (!same_str(self->last_worker, worker)) {
    free(self->last_worker);
    self->last_worker = worker ? smr_xstrdup(worker) : NULL;
  }
  self->last_step = step;
  self->last_mode = mode;
  if (self->pf) /* a chain goes on, or another thread's prefetch */
    return;
  size_t max = req->is_reduction ? REDUCE_CHAIN : 1;
  py_item *want = smr_xcalloc(max, sizeof *want); /* 1.7 KB each */
  size_t n = predict_chain(self, req, want, max);
  if (n && req->is_reduction)
    self->pf = smr_py_job_start_reductions(self->t, &self->lock, want, n,
                                           REDUCE_WINDOW);
  else if (n)
    self->pf = smr_py_job_start(self->t, &self->lock, want, 1, 0);
  free(want);
}

static PyObject *trial_value(TrialObject *self, PyObject *args) {
  const char *name, *worker = NULL;
  long long step;
  int mode;
  if (!PyArg_ParseTuple(args, "sLi|z:value", &name, &step, &mode, &worker) ||
      !open_or_raise(self))
    return NULL;
  py_item req = {.name = (char *)name,
                 .worker = (char *)worker,
                 .step = step,
                 .mode = mode};
  py_item got = {0};
  smr_value_loc loc;
  if (!take_prefetched(self, &req, &got))
    READING(self, got.rc = smr_trial_value(self->t, name, step, mode, worker,
                                           &got.v, &loc, &got.err));
  if (got.rc != SMR_OK)
    return raise_status(got.rc, &got.err);
  prefetch_next(self, &req);
  PyObject *o = tensor_tuple((PyObject *)self, &got.v, got.home);
  smr_py_release(got.home, &got.v); /* nothing when lent */
  return o;
}

static PyObject *trial_read_stats(TrialObject *self, PyObject *unused) {
  return Py_BuildValue("{s:K,s:K,s:n}", "prefetched", self->pf_hits, "missed",
                       self->pf_misses, "predicted",
                       self->pf ? (Py_ssize_t)smr_py_job_left(self->pf) : 0);
}

static PyObject *trial_reduction(TrialObject *self, PyObject *args) {
  const char *name, *red, *worker = NULL;
  long long step;
  int mode, abs_ = 0;
  if (!PyArg_ParseTuple(args, "sLisp|z:reduction", &name, &step, &mode, &red,
                        &abs_, &worker) ||
      !open_or_raise(self))
    return NULL;
  int r = smr_reduction_from_name(red);
  if (r < 0)
    return PyErr_Format(PyExc_ValueError,
                        "unknown reduction %R: expected min, max, mean, std, "
                        "variance, sum, prod, l1, l2",
                        PyTuple_GET_ITEM(args, 3));
  py_item req = {.name = (char *)name,
                 .worker = (char *)worker,
                 .step = step,
                 .mode = mode,
                 .is_reduction = true,
                 .reduction = r,
                 .abs = abs_ != 0};
  py_item got = {0};
  smr_value_loc loc;
  if (!take_prefetched(self, &req, &got))
    READING(self, got.rc = smr_trial_reduction(self->t, name, step, mode,
                                               worker, r, abs_, &got.out,
                                               &got.saved, &loc, &got.err));
  if (got.rc != SMR_OK)
    return raise_status(got.rc, &got.err);
  prefetch_next(self, &req);
  return Py_BuildValue("(dO)", got.out, got.saved ? Py_True : Py_False);
}

/* One item of reductions() and read_many(): what value() takes.  The
 * names point into the list's tuples, kept alive by the caller. */
typedef struct {
  const char *name, *worker;
  long long step;
  int mode;
} item_key;

/* The items of reductions() and read_many(), a list of (name, step, mode,
 * worker|None) tuples: *n structs of `size` bytes, each beginning with an
 * item_key, in a zeroed array (free it), and in *seq the sequence the
 * names point into (Py_DECREF it after the array).  NULL with the Python
 * error set. */
static void *parse_items(PyObject *items, const char *what, size_t size,
                         Py_ssize_t *n, PyObject **seq) {
  *seq = PySequence_Fast(items, what);
  if (!*seq)
    return NULL;
  *n = PySequence_Fast_GET_SIZE(*seq);
  char *v = calloc((size_t)*n + 1, size);
  if (!v) {
    Py_CLEAR(*seq);
    return PyErr_NoMemory();
  }
  for (Py_ssize_t i = 0; i < *n; i++) {
    item_key *k = (item_key *)(v + (size_t)i * size);
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(*seq, i), "sLi|z", &k->name,
                          &k->step, &k->mode, &k->worker)) {
      free(v);
      Py_CLEAR(*seq);
      return NULL;
    }
  }
  return v;
}

/* reductions([(name, step, mode, worker|None)], reduction, abs) -> a list
 * with, per item, (value, saved) or (status, message).  The whole batch
 * runs without the GIL, its items over the library's helper threads
 * (base/workers.h: the trial is safe to read from several threads, as the
 * runner's rules do), so a scan reads and reduces on every core. */
typedef struct {
  item_key k; /* first: parse_items fills it */
  int rc;
  double out;
  bool saved;
  smr_error err;
} red_item;

typedef struct {
  smr_trial *t;
  red_item *v;
  int reduction;
  bool abs;
} red_batch;

static void reduce_one(void *arg, size_t i) {
  red_batch *b = arg;
  red_item *it = &b->v[i];
  smr_value_loc loc;
  it->rc = smr_trial_reduction(b->t, it->k.name, it->k.step, it->k.mode,
                               it->k.worker, b->reduction, b->abs, &it->out,
                               &it->saved, &loc, &it->err);
}

/* The helper threads: one per further core, set before the first batch
 * (workers.h: with no loop running). */
static pthread_once_t helpers_once = PTHREAD_ONCE_INIT;
static void start_helpers(void) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  smr_workers_set(cores > 1 ? (int)(cores > 64 ? 63 : cores - 1) : 0);
}

static PyObject *trial_reductions(TrialObject *self, PyObject *args) {
  PyObject *items;
  const char *red;
  int abs_ = 0;
  if (!PyArg_ParseTuple(args, "Osp:reductions", &items, &red, &abs_) ||
      !open_or_raise(self))
    return NULL;
  int r = smr_reduction_from_name(red);
  if (r < 0)
    return PyErr_Format(PyExc_ValueError,
                        "unknown reduction %R: expected min, max, mean, std, "
                        "variance, sum, prod, l1, l2",
                        PyTuple_GET_ITEM(args, 1));
  PyObject *seq;
  Py_ssize_t n;
  red_item *v =
      parse_items(items, "reductions: a list of tuples", sizeof *v, &n, &seq);
  if (!v)
    return NULL;
  red_batch b = {self->t, v, r, abs_ != 0};
  pthread_once(&helpers_once, start_helpers);
  READING(self, smr_parallel_for((size_t)n, reduce_one, &b));
  PyObject *out = PyList_New(n);
  for (Py_ssize_t i = 0; out && i < n; i++) {
    PyObject *o;
    if (v[i].rc == SMR_OK) {
      o = Py_BuildValue("(dO)", v[i].out, v[i].saved ? Py_True : Py_False);
    } else {
      char msg[SMR_ERR_FILE_MAX + SMR_ERR_MSG_MAX + 64];
      smr_error_format(&v[i].err, msg, sizeof msg);
      o = Py_BuildValue("(is)", v[i].rc, msg);
    }
    if (!o)
      Py_CLEAR(out);
    else
      PyList_SET_ITEM(out, i, o);
  }
  free(v);
  Py_DECREF(seq); /* the names in v pointed into it: freed last */
  return out;
}

static PyObject *trial_shape(TrialObject *self, PyObject *args) {
  const char *name, *worker = NULL;
  long long step;
  int mode;
  if (!PyArg_ParseTuple(args, "sLi|z:shape", &name, &step, &mode, &worker) ||
      !open_or_raise(self))
    return NULL;
  int ndim = 0;
  int64_t shape[SMR_MAX_DIMS];
  smr_error err = {0};
  int rc;
  READING(self, rc = smr_trial_shape(self->t, name, step, mode, worker, &ndim,
                                     shape, &err));
  if (rc != SMR_OK)
    return raise_status(rc, &err);
  PyObject *t = PyTuple_New(ndim);
  for (int i = 0; t && i < ndim; i++)
    PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(shape[i]));
  return t;
}

/* read_many([(name, step, mode, worker|None)]) -> a list with, per item,
 * the value tuple or (status, message) when it could not be read.  One
 * release of the GIL for the whole list, read on this thread (a job that
 * reads nothing ahead, read_ahead.h).  Read over the helper threads too,
 * values crossed cores and the buffer pools churned (bench 11's bulk read:
 * 40% more CPU, 27k more page faults); with the read-ahead thread reading
 * beside this one, 107 MB peak RSS against 75 and no faster (load 4). */
static PyObject *trial_read_many(TrialObject *self, PyObject *args) {
  PyObject *items;
  if (!PyArg_ParseTuple(args, "O:read_many", &items) || !open_or_raise(self))
    return NULL;
  PyObject *seq;
  Py_ssize_t n;
  item_key *k =
      parse_items(items, "read_many: a list of tuples", sizeof *k, &n, &seq);
  if (!k)
    return NULL;
  py_item *got = calloc((size_t)n + 1, sizeof *got);
  if (!got) {
    free(k);
    Py_DECREF(seq);
    return PyErr_NoMemory();
  }
  for (Py_ssize_t i = 0; i < n; i++) { /* the request, copied by the job */
    got[i].name = (char *)k[i].name;
    got[i].worker = (char *)k[i].worker;
    got[i].step = k[i].step;
    got[i].mode = k[i].mode;
  }
  py_job *j =
      smr_py_job_start(self->t, &self->lock, got, (size_t)n, SMR_PY_NO_AHEAD);
  Py_BEGIN_ALLOW_THREADS for (Py_ssize_t i = 0; i < n; i++)
      smr_py_job_next(j, &got[i]);
  smr_py_job_end(j);
  Py_END_ALLOW_THREADS PyObject *out = PyList_New(n);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *o = NULL;
    if (out && got[i].rc == SMR_OK) {
      o = tensor_tuple((PyObject *)self, &got[i].v, got[i].home);
    } else if (out) {
      char msg[SMR_ERR_FILE_MAX + SMR_ERR_MSG_MAX + 64];
      smr_error_format(&got[i].err, msg, sizeof msg);
      o = Py_BuildValue("(is)", got[i].rc, msg);
    }
    if (got[i].rc == SMR_OK)
      smr_py_release(got[i].home, &got[i].v); /* nothing when lent */
    if (out && !o)
      Py_CLEAR(out);
    if (out)
      PyList_SET_ITEM(out, i, o);
  }
  free(got);
  free(k);
  Py_DECREF(seq); /* the names in k pointed into it: freed last */
  return out;
}

/* ---------------------------------------------------------------- streams
 *
 * _core.Stream: the values of a list of items, in order, read ahead on the
 * read-ahead thread (read_ahead.h) while the caller works on the one in
 * hand: iter_tensors.  It holds its Trial object, so the C trial lives as
 * long as the stream reads from it. */
typedef struct {
  PyObject_HEAD PyObject *trial;
  py_job *job; /* NULL once every item was taken */
} StreamObject;

static void stream_end(StreamObject *self) {
  py_job *j = self->job;
  self->job = NULL;
  if (j) {
    Py_BEGIN_ALLOW_THREADS smr_py_job_end(j);
    Py_END_ALLOW_THREADS
  }
}

static void stream_dealloc(StreamObject *self) {
  stream_end(self);
  Py_XDECREF(self->trial);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The next item's value tuple, or (status, message) when it is not there;
 * other errors (a file that cannot be read, a broken record) are raised,
 * as value() raises them. */
static PyObject *stream_next(StreamObject *self) {
  if (!self->job)
    return NULL;
  py_item it;
  bool got;
  Py_BEGIN_ALLOW_THREADS got = smr_py_job_next(self->job, &it);
  Py_END_ALLOW_THREADS if (!got) {
    stream_end(self);
    return NULL;
  }
  if (it.rc != SMR_OK &&
      !(it.rc <= SMR_STEP_UNAVAILABLE && it.rc >= SMR_INVALID_WORKER))
    return raise_status(it.rc, &it.err);
  if (it.rc != SMR_OK) {
    char msg[SMR_ERR_FILE_MAX + SMR_ERR_MSG_MAX + 64];
    smr_error_format(&it.err, msg, sizeof msg);
    return Py_BuildValue("(is)", it.rc, msg);
  }
  PyObject *o = tensor_tuple(self->trial, &it.v, it.home);
  smr_py_release(it.home, &it.v); /* nothing when lent */
  return o;
}

static PyTypeObject StreamType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "smrules._core.Stream",
    .tp_basicsize = sizeof(StreamObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Values read ahead, in order (Trial.stream).",
    .tp_dealloc = (destructor)stream_dealloc,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)stream_next,
};

/* stream([(name, step, mode, worker|None)]) -> a Stream yielding, per
 * item, the value tuple or (status, message). */
static PyObject *trial_stream(TrialObject *self, PyObject *args) {
  PyObject *items;
  if (!PyArg_ParseTuple(args, "O:stream", &items) || !open_or_raise(self))
    return NULL;
  PyObject *seq = PySequence_Fast(items, "stream: a list of tuples");
  if (!seq)
    return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  py_item *r = calloc((size_t)n + 1, sizeof *r);
  if (!r) {
    Py_DECREF(seq);
    return PyErr_NoMemory();
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    const char *name, *worker = NULL;
    long long step;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "sLi|z", &name,
                          &step, &r[i].mode, &worker)) {
      free(r);
      Py_DECREF(seq);
      return NULL;
    }
    r[i].name = (char *)name; /* copied by smr_py_job_start */
    r[i].worker = (char *)worker;
    r[i].step = step;
  }
  StreamObject *o = PyObject_New(StreamObject, &StreamType);
  if (o) {
    Py_INCREF(self);
    o->trial = (PyObject *)self;
    o->job = smr_py_job_start(self->t, &self->lock, r, (size_t)n,
                              self->read_ahead ? 0 : SMR_PY_NO_AHEAD);
  }
  free(r);
  Py_DECREF(seq);
  return (PyObject *)o;
}

static PyMethodDef trial_methods[] = {
    {"refresh", (PyCFunction)trial_refresh, METH_NOARGS,
     "refresh() -> number of index files read"},
    {"close", (PyCFunction)trial_close, METH_NOARGS, "close()"},
    {"info", (PyCFunction)trial_info, METH_NOARGS,
     "info() -> dict: last_complete_step, num_workers, loaded_all_steps, "
     "end_marker, workers"},
    {"steps", (PyCFunction)trial_steps, METH_VARARGS,
     "steps(mode, incomplete=False)"},
    {"modes", (PyCFunction)trial_modes, METH_NOARGS, "modes()"},
    {"step_mode", (PyCFunction)trial_step_mode, METH_VARARGS,
     "step_mode(step) -> (mode, mode_step) or None"},
    {"global_step", (PyCFunction)trial_global_step, METH_VARARGS,
     "global_step(mode, mode_step) -> step or None"},
    {"has_passed_step", (PyCFunction)trial_has_passed_step, METH_VARARGS,
     "has_passed_step(step, mode) -> 0 available, 1 not yet, 2 unavailable"},
    {"collection_names", (PyCFunction)trial_collection_names, METH_NOARGS,
     "collection_names()"},
    {"collection_members", (PyCFunction)trial_collection_members, METH_VARARGS,
     "collection_members(name)"},
    {"tensor_names", (PyCFunction)trial_tensor_names, METH_VARARGS,
     "tensor_names(regexes=None)"},
    {"has_tensor", (PyCFunction)trial_has_tensor, METH_VARARGS,
     "has_tensor(name)"},
    {"tensor_step_list", (PyCFunction)trial_tensor_step_list, METH_VARARGS,
     "tensor_step_list(name, mode, incomplete=False)"},
    {"tensor_steps", (PyCFunction)trial_tensor_steps, METH_VARARGS,
     "tensor_steps(name) -> [(step, mode, mode_step, worker, has_value, "
     "reductions)]"},
    {"reductions", (PyCFunction)trial_reductions, METH_VARARGS,
     "reductions([(name, step, mode, worker)], reduction, abs) -> "
     "[(value, saved) | (status, message)], in parallel"},
    {"value", (PyCFunction)trial_value, METH_VARARGS,
     "value(name, step, mode, worker=None) -> (dtype, shape, bytes|list)"},
    {"reduction", (PyCFunction)trial_reduction, METH_VARARGS,
     "reduction(name, step, mode, reduction, abs, worker=None) -> (value, "
     "saved)"},
    {"shape", (PyCFunction)trial_shape, METH_VARARGS,
     "shape(name, step, mode, worker=None) -> tuple"},
    {"read_many", (PyCFunction)trial_read_many, METH_VARARGS,
     "read_many([(name, step, mode, worker)]) -> [value tuple | (status, "
     "message)]"},
    {"stream", (PyCFunction)trial_stream, METH_VARARGS,
     "stream([(name, step, mode, worker)]) -> iterator of value tuple | "
     "(status, message), read ahead"},
    {"read_stats", (PyCFunction)trial_read_stats, METH_NOARGS,
     "read_stats() -> {'prefetched': values value() found read ahead, "
     "'missed': prefetches not asked for, 'predicted': requests "
     "predicted and not asked for yet}"},
    {"lent_count", (PyCFunction)lent_count, METH_NOARGS | METH_STATIC,
     "lent_count() -> values alive whose bytes are lent, not copied"},
    {"read_counts", (PyCFunction)read_counts, METH_NOARGS | METH_STATIC,
     "read_counts() -> {'read_ahead': items the read-ahead thread read, "
     "'by_caller': items of a job read on the caller's thread} (process)"},
    {"hold_read_ahead", (PyCFunction)hold_read_ahead, METH_O | METH_STATIC,
     "hold_read_ahead(on): tests: the read-ahead thread begins no read "
     "while on"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject TrialType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "smrules._core.Trial",
    .tp_basicsize = sizeof(TrialObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Trial(path, live=True, read_ahead=True, reduce_ahead=True): a "
              "trial read by the C library (use smrules.trials.create_trial).",
    .tp_new = trial_new,
    .tp_init = (initproc)trial_init,
    .tp_dealloc = (destructor)trial_dealloc,
    .tp_methods = trial_methods,
};

int smr_py_add_trial(PyObject *m) {
  if (PyType_Ready(&TrialType) < 0 || PyType_Ready(&ValueType) < 0 ||
      PyType_Ready(&StreamType) < 0)
    return -1;
  Unavailable = PyErr_NewException("smrules._core.Unavailable", NULL, NULL);
  if (!Unavailable)
    return -1;
  Py_INCREF(&TrialType);
  if (PyModule_AddObject(m, "Trial", (PyObject *)&TrialType) < 0 ||
      PyModule_AddObject(m, "Unavailable", Unavailable) < 0)
    return -1;
  PyModule_AddIntConstant(m, "LEND_MIN", (long)LEND_MIN);
  PyModule_AddIntConstant(m, "LEND_MAX", LEND_MAX);
  PyModule_AddIntConstant(m, "REDUCE_WINDOW", REDUCE_WINDOW);
  PyModule_AddIntConstant(m, "STEP_UNAVAILABLE", SMR_STEP_UNAVAILABLE);
  PyModule_AddIntConstant(m, "STEP_NOT_YET", SMR_STEP_NOT_YET);
  PyModule_AddIntConstant(m, "TENSOR_UNAVAILABLE_FOR_STEP",
                          SMR_TENSOR_UNAVAILABLE_FOR_STEP);
  PyModule_AddIntConstant(m, "TENSOR_UNAVAILABLE", SMR_TENSOR_UNAVAILABLE);
  PyModule_AddIntConstant(m, "NO_MORE_DATA", SMR_NO_MORE_DATA);
  PyModule_AddIntConstant(m, "INVALID_WORKER", SMR_INVALID_WORKER);
  return 0;
}
