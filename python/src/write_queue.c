/* write_queue.c - smrules._core.WriteQueue: one worker's trial writer with a
 * thread of its own, in C, that never takes the GIL.
 *
 * The PyTorch hook hands it a step's operations at once (submit); the
 * thread writes them through core/writer/ while training goes on.  A
 * writer thread in Python had to take the GIL to wake up, to call the
 * writer and to say it was done, and every torch call of the training
 * thread lets go of the GIL: each time the writer wanted it, training
 * waited for the writer's Python.  This thread runs no Python at all: the
 * operations are parsed, and their arrays' buffers taken, by submit (the
 * caller's thread, GIL held); once written, a batch waits in a list until
 * the caller takes it back (reap), which releases the buffers with the GIL
 * held and hands the caller's token back (the hook reuses the memory).
 *
 * The queue is bounded by bytes: submit waits (GIL released) while the
 * batches queued hold more than max_bytes; a batch larger than the bound
 * is still accepted into an empty queue.  The first failure (a full disk)
 * is kept (error); nothing after it is written, the steps before it stay
 * complete.  Signals are blocked in the thread: they go to Python's
 * threads, and the thread's system calls are never interrupted. */
#include "write_queue.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "batch_ops.h"
#include "copy_pool.h"
#include "writer/writer.h"

/* copy_tensors' buffers kept for reuse between steps, by default */
#define DEFAULT_POOL_BYTES (64ULL << 20)

typedef struct wq_batch {
  struct wq_batch *next;
  PyObject *ops;   /* tuple of the operations: holds names, JSON, arrays */
  PyObject *token; /* what reap() hands back */
  batch_op *parsed;
  Py_ssize_t n;
  size_t nbytes;
} wq_batch;

typedef struct {
  PyObject_HEAD char *dir;
  char *worker;
  smr_writer *w; /* opened by the thread at the first operation needing it */
  pthread_t thread;
  bool started, joined;
  bool joining;    /* wq_stop is waiting for the thread (GIL released) */
  double cpu_last; /* the thread's CPU time last read by wq_cpu */
  pid_t pid; /* the process that started the thread (a fork's child has none) */
  pthread_mutex_t mu;
  pthread_cond_t work;  /* a batch queued, or stopping */
  pthread_cond_t space; /* a batch written */
  /* under mu: */
  wq_batch *head, *tail; /* queued; head is being written */
  wq_batch *done;        /* written, newest first */
  size_t queued, max_bytes, peak;
  bool stopping;
  int err_status; /* the first failure: its smr status and message */
  char *err_msg;
  double cpu_seconds;              /* the thread's CPU time, when it ended */
  unsigned long long event_writes; /* its writes to event files, at the end */
  /* the training thread's (GIL held): */
  copy_pool *pool;           /* copy_tensors' buffers; NULL once closed */
  unsigned long long reused; /* copy_pool_reused, kept when the pool closes */
  PyObject *reaped; /* tokens of batches copy_tensors freed, for reap() */
} WriteQueueObject;

/* ---- the thread (no GIL, no Python) ---- */

static int run_op(WriteQueueObject *q, const batch_op *op, smr_error *err) {
  if (op->kind == 'm') {
    /* every worker writes the marker when it ends (as smdebug does); two at
     * once share the .tmp name, and the second rename then finds the marker
     * there already: that is success */
    int rc = smr_write_end_marker(q->dir, err);
    if (rc != SMR_OK) {
      char *marker = smr_xasprintf("%s/training_job_end.ts", q->dir);
      if (access(marker, F_OK) == 0)
        rc = SMR_OK;
      free(marker);
    }
    return rc;
  }
  if (!q->w) {
    int rc = smr_writer_open(q->dir, q->worker, 0, &q->w, err);
    if (rc != SMR_OK)
      return rc;
    /* a batch's arrays stay in place until it is written and flushed (see
     * wq_thread): a step's records go out in one writev */
    smr_writer_hold_pieces(q->w, 1);
  }
  if (op->kind == 'c')
    return smr_writer_collections_json(q->w, op->name, (size_t)op->len, err);
  return smr_py_batch_run(q->w, op, err);
}

static void keep_error(WriteQueueObject *q, const smr_error *err) {
  if (q->err_msg)
    return;
  char msg[SMR_ERR_FILE_MAX + SMR_ERR_MSG_MAX + 64];
  smr_error_format(err, msg, sizeof msg);
  q->err_msg = smr_xstrdup(msg);
  q->err_status = err->status;
}

static void *wq_thread(void *arg) {
  WriteQueueObject *q = arg;
  pthread_mutex_lock(&q->mu);
  for (;;) {
    while (!q->head && !q->stopping)
      pthread_cond_wait(&q->work, &q->mu);
    if (!q->head)
      break;
    wq_batch *b = q->head;
    bool failed = q->err_msg != NULL;
    pthread_mutex_unlock(&q->mu);
    smr_error err = {0};
    int rc = SMR_OK;
    for (Py_ssize_t i = 0; i < b->n && rc == SMR_OK && !failed; i++)
      rc = run_op(q, &b->parsed[i], &err);
    /* the writer may hold pieces of this batch's arrays, which reap() gives
     * back: they are written (or dropped after a failure) before that */
    if (q->w) {
      smr_error ferr = {0};
      int frc = smr_writer_flush(q->w, &ferr);
      if (rc == SMR_OK && frc != SMR_OK) {
        rc = frc;
        err = ferr;
      }
    }
    pthread_mutex_lock(&q->mu);
    if (rc != SMR_OK)
      keep_error(q, &err);
    q->head = b->next;
    if (!q->head)
      q->tail = NULL;
    q->queued -= b->nbytes;
    b->next = q->done;
    q->done = b;
    pthread_cond_broadcast(&q->space);
  }
  pthread_mutex_unlock(&q->mu);
  if (q->w) { /* nobody else touches it once stopping */
    smr_error err = {0};
    /* (a step the hook left open is written by the close: not counted) */
    q->event_writes = smr_writer_event_writes(q->w);
    if (smr_writer_close(q->w, &err) != SMR_OK) {
      pthread_mutex_lock(&q->mu);
      keep_error(q, &err);
      pthread_mutex_unlock(&q->mu);
    }
    q->w = NULL;
  }
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
    q->cpu_seconds = (double)ts.tv_sec + ts.tv_nsec / 1e9;
  return NULL;
}

/* ---- batches (GIL held) ---- */

static void batch_free(wq_batch *b) {
  for (Py_ssize_t i = 0; i < b->n; i++)
    if (b->parsed[i].has_view)
      PyBuffer_Release(&b->parsed[i].view);
  PyMem_Free(b->parsed);
  Py_XDECREF(b->ops);
  Py_XDECREF(b->token);
  PyMem_Free(b);
}

/* WriteQueue's own operations, then those Writer.batch takes. */
static int parse_op(PyObject *item, batch_op *op) {
  if (PyTuple_Check(item) && PyTuple_GET_SIZE(item) >= 1 &&
      PyUnicode_Check(PyTuple_GET_ITEM(item, 0))) {
    const char *kind = PyUnicode_AsUTF8(PyTuple_GET_ITEM(item, 0));
    if (!kind)
      return -1;
    if (strcmp(kind, "collections") == 0) {
      op->kind = 'c';
      return PyArg_ParseTuple(item, "ss#:collections", &kind, &op->name,
                              &op->len)
                 ? 0
                 : -1;
    }
    if (strcmp(kind, "end_marker") == 0) {
      op->kind = 'm';
      return PyArg_ParseTuple(item, "s:end_marker", &kind) ? 0 : -1;
    }
  }
  return smr_py_batch_parse(item, op);
}

/* The batch of `seq`'s operations, all parsed; NULL with an exception. */
static wq_batch *batch_make(PyObject *seq, PyObject *token, size_t nbytes) {
  wq_batch *b = PyMem_Calloc(1, sizeof *b);
  if (!b)
    return (wq_batch *)PyErr_NoMemory();
  b->ops = PySequence_Tuple(seq);
  if (!b->ops) {
    PyMem_Free(b);
    return NULL;
  }
  Py_ssize_t n = PyTuple_GET_SIZE(b->ops);
  b->parsed = PyMem_Calloc(n ? (size_t)n : 1, sizeof *b->parsed);
  if (!b->parsed) {
    batch_free(b);
    return (wq_batch *)PyErr_NoMemory();
  }
  for (; b->n < n; b->n++)
    if (parse_op(PyTuple_GET_ITEM(b->ops, b->n), &b->parsed[b->n]) != 0) {
      b->n++; /* its view, if taken, is released by batch_free */
      batch_free(b);
      return NULL;
    }
  Py_INCREF(token);
  b->token = token;
  b->nbytes = nbytes;
  return b;
}

/* ---- the type ---- */

static int wq_init(WriteQueueObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"trial_dir", "worker", "max_bytes", "pool_bytes",
                           NULL};
  const char *dir, *worker;
  unsigned long long max_bytes, pool_bytes = DEFAULT_POOL_BYTES;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "ssK|K:WriteQueue", kwlist, &dir,
                                   &worker, &max_bytes, &pool_bytes))
    return -1;
  if (self->started) {
    PyErr_SetString(PyExc_RuntimeError, "WriteQueue is already open");
    return -1;
  }
  if (!self->pool && !(self->pool = copy_pool_new((size_t)pool_bytes)))
    return -1;
  free(self->dir); /* a second __init__ after a failed one */
  free(self->worker);
  self->dir = smr_xstrdup(dir);
  self->worker = smr_xstrdup(worker);
  self->max_bytes = (size_t)max_bytes;
  pthread_mutex_init(&self->mu, NULL);
  pthread_cond_init(&self->work, NULL);
  pthread_cond_init(&self->space, NULL);
  /* the thread starts with every signal blocked (it inherits the mask) */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&self->thread, NULL, wq_thread, self);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    errno = rc;
    PyErr_SetFromErrno(PyExc_OSError);
    return -1;
  }
  self->started = true;
  self->pid = getpid();
  return 0;
}

/* The written batches, oldest first, taken from the thread (mu held). */
static wq_batch *take_done(WriteQueueObject *self) {
  wq_batch *rev = NULL;
  while (self->done) {
    wq_batch *b = self->done;
    self->done = b->next;
    b->next = rev;
    rev = b;
  }
  return rev;
}

/* Stop the thread once everything queued is written, and wait for it. */
static void wq_stop(WriteQueueObject *self) {
  /* in a forked child the thread does not exist, and its lock may have been
   * held at the fork: nothing of it is touched there */
  if (!self->started || self->joined || getpid() != self->pid)
    return;
  self->joining = true; /* from now on wq_cpu leaves the thread's clock */
  Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->mu);
  self->stopping = true;
  pthread_cond_broadcast(&self->work);
  pthread_mutex_unlock(&self->mu);
  pthread_join(self->thread, NULL);
  Py_END_ALLOW_THREADS self->joined = true;
}

static void wq_dealloc(WriteQueueObject *self) {
  /* the thread never takes the GIL: waiting for it here cannot deadlock */
  wq_stop(self);
  if (self->started && getpid() == self->pid) {
    for (wq_batch *b = take_done(self), *next; b; b = next) {
      next = b->next;
      batch_free(b); /* (their CopyBuffers go back to the pool) */
    }
    pthread_mutex_destroy(&self->mu);
    pthread_cond_destroy(&self->work);
    pthread_cond_destroy(&self->space);
  }
  copy_pool_close(self->pool);
  Py_XDECREF(self->reaped);
  free(self->err_msg);
  free(self->dir);
  free(self->worker);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* `ms` milliseconds from now, for pthread_cond_timedwait. */
static const struct timespec *deadline_in(struct timespec *t, long ms) {
  clock_gettime(CLOCK_REALTIME, t);
  t->tv_nsec += ms * 1000000L;
  t->tv_sec += t->tv_nsec / 1000000000L;
  t->tv_nsec %= 1000000000L;
  return t;
}

static PyObject *wq_submit(WriteQueueObject *self, PyObject *args) {
  PyObject *seq, *token;
  unsigned long long nbytes;
  if (!PyArg_ParseTuple(args, "OKO:submit", &seq, &nbytes, &token))
    return NULL;
  if (!self->started || self->stopping || getpid() != self->pid) {
    PyErr_SetString(PyExc_ValueError,
                    self->started && getpid() != self->pid
                        ? "WriteQueue belongs to the process that made it"
                        : "WriteQueue is closed");
    return NULL;
  }
  wq_batch *b = batch_make(seq, token, (size_t)nbytes);
  if (!b)
    return NULL;
  bool failed, interrupted = false;
  struct timespec deadline;
  PyThreadState *ts = PyEval_SaveThread();
  pthread_mutex_lock(&self->mu);
  while (self->head && self->queued + b->nbytes > self->max_bytes &&
         !self->err_msg && !interrupted)
    if (pthread_cond_timedwait(&self->space, &self->mu,
                               deadline_in(&deadline, 50)) == ETIMEDOUT) {
      /* a signal's Python handler (SIGTERM's) runs now, as it would in
       * the wait of a Python lock: a step waiting for a slow disk can
       * still be stopped */
      pthread_mutex_unlock(&self->mu);
      PyEval_RestoreThread(ts);
      interrupted = PyErr_CheckSignals() < 0;
      ts = PyEval_SaveThread();
      pthread_mutex_lock(&self->mu);
    }
  failed = self->err_msg != NULL || interrupted;
  if (!failed) {
    if (self->tail)
      self->tail->next = b;
    else
      self->head = b;
    self->tail = b;
    self->queued += b->nbytes;
    if (self->queued > self->peak)
      self->peak = self->queued;
    pthread_cond_signal(&self->work);
  }
  pthread_mutex_unlock(&self->mu);
  PyEval_RestoreThread(ts);
  if (failed) /* see error, or the handler's exception */
    batch_free(b);
  if (interrupted)
    return NULL;
  Py_RETURN_NONE;
}

/* The batches written since the last call are freed (their CopyBuffers go
 * back to the pool) and their tokens appended to `out`; -1 with an
 * exception (the batches are freed all the same). */
static int reap_into(WriteQueueObject *self, PyObject *out) {
  if (!self->started || getpid() != self->pid)
    return 0;
  pthread_mutex_lock(&self->mu); /* never held for long: no GIL release */
  wq_batch *b = take_done(self);
  pthread_mutex_unlock(&self->mu);
  int rc = 0;
  for (wq_batch *next; b; b = next) {
    next = b->next;
    if (rc == 0)
      rc = PyList_Append(out, b->token);
    batch_free(b);
  }
  return rc;
}

static PyObject *wq_reap(WriteQueueObject *self, PyObject *noargs) {
  PyObject *out = self->reaped ? self->reaped : PyList_New(0);
  self->reaped = NULL;
  if (out && reap_into(self, out) != 0)
    Py_CLEAR(out);
  return out;
}

/* Wait (the GIL released) until every batch queued so far is written;
 * the thread goes on.  A failed thread drops what is queued, which ends
 * the wait as well. */
static PyObject *wq_drain(WriteQueueObject *self, PyObject *noargs) {
  if (!self->started || self->joined || getpid() != self->pid)
    Py_RETURN_NONE;
  Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->mu);
  while (self->head)
    pthread_cond_wait(&self->space, &self->mu);
  pthread_mutex_unlock(&self->mu);
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

static PyObject *wq_close(WriteQueueObject *self, PyObject *noargs) {
  wq_stop(self);
  PyObject *out = wq_reap(self, NULL);
  if (self->pool) { /* the free buffers go now, the others when freed */
    self->reused = copy_pool_reused(self->pool);
    copy_pool_close(self->pool);
    self->pool = NULL;
  }
  return out;
}

static PyObject *wq_error(WriteQueueObject *self, void *closure) {
  if (!self->started || getpid() != self->pid)
    Py_RETURN_NONE;
  pthread_mutex_lock(&self->mu);
  char *msg = self->err_msg ? smr_xstrdup(self->err_msg) : NULL;
  int status = self->err_status;
  pthread_mutex_unlock(&self->mu);
  if (!msg)
    Py_RETURN_NONE;
  PyObject *type = status == SMR_ERR_IO      ? PyExc_OSError
                   : status == SMR_ERR_USAGE ? PyExc_ValueError
                                             : PyExc_RuntimeError;
  PyObject *e = PyObject_CallFunction(type, "s", msg);
  free(msg);
  return e;
}

static PyObject *wq_size(WriteQueueObject *self, void *which) {
  if (!self->started || getpid() != self->pid)
    return PyLong_FromLong(0);
  pthread_mutex_lock(&self->mu);
  size_t v = which ? self->peak : self->queued;
  pthread_mutex_unlock(&self->mu);
  return PyLong_FromSize_t(v);
}

/* The thread's CPU time: read from its clock while it runs, kept once it
 * has ended.  Its id is used only before wq_stop begins to wait for it
 * (`joining`, set with the GIL this getter holds): another Python thread
 * may read this during that wait, when the id may already be joined, and
 * gets the last reading. */
static PyObject *wq_cpu(WriteQueueObject *self, void *closure) {
  if (self->joined)
    return PyFloat_FromDouble(self->cpu_seconds);
  clockid_t clock;
  struct timespec ts;
  if (self->started && !self->joining && getpid() == self->pid &&
      pthread_getcpuclockid(self->thread, &clock) == 0 &&
      clock_gettime(clock, &ts) == 0)
    self->cpu_last = (double)ts.tv_sec + ts.tv_nsec / 1e9;
  return PyFloat_FromDouble(self->cpu_last);
}

static PyObject *wq_event_writes(WriteQueueObject *self, void *closure) {
  return PyLong_FromUnsignedLongLong(self->joined ? self->event_writes : 0);
}

/* ---- copy_tensors: a saving step's copies in one call (GIL held) ---- */

/* `v.detach().numpy()`'s buffer, C-contiguous with its format, in `view`:
 * 1.  0 when NumPy cannot view it so (another device, bfloat16, a negative
 * or conjugate bit, not contiguous): the caller's fallback copies it, as
 * torch can.  -1 with an exception. */
static int tensor_view(PyObject *v, Py_buffer *view) {
  static PyObject *s_detach, *s_numpy;
  if (!s_detach && !(s_detach = PyUnicode_InternFromString("detach")))
    return -1;
  if (!s_numpy && !(s_numpy = PyUnicode_InternFromString("numpy")))
    return -1;
  PyObject *d = PyObject_CallMethodNoArgs(v, s_detach);
  if (!d)
    return -1;
  PyObject *a = PyObject_CallMethodNoArgs(d, s_numpy);
  Py_DECREF(d);
  if (!a) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError) &&
        !PyErr_ExceptionMatches(PyExc_RuntimeError))
      return -1;
    PyErr_Clear();
    return 0;
  }
  int rc = PyObject_GetBuffer(a, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT);
  Py_DECREF(a); /* the view holds it */
  if (rc == 0)
    return 1;
  /* NumPy says ValueError for "not C-contiguous" */
  if (!PyErr_ExceptionMatches(PyExc_BufferError) &&
      !PyErr_ExceptionMatches(PyExc_ValueError))
    return -1;
  PyErr_Clear();
  return 0;
}

typedef struct {
  void *dst;
  Py_buffer src;
} pending_copy;

/* copy_tensors(names, values, start, wall, ops, tokens, limit, fallback,
 * begin): the training thread's work for tensors saved whole, in one call.
 * From values[start] on, each tensor (None skipped, as is one of no
 * elements) is copied into a CopyBuffer from the pool (one of its size
 * that was written already, else new) and ("tensor", names[i], copy, wall)
 * is appended to `ops` (the batch in hand).  A tensor NumPy cannot view as
 * a C-contiguous array goes to fallback(value), which copies it with torch
 * and returns (array, token, nbytes), the token appended to `tokens` (see
 * reap), or None for nothing to save.  `begin` (an operation, or None) is
 * put before the first tensor appended.  Stops after the tensor that
 * brings the bytes appended to `limit` or more (the caller then queues
 * the batch), and returns (next start, bytes appended, begin used).  The
 * copies are made after the values are gathered, with the GIL released
 * once.  On an error nothing of the call stays in ops or tokens. */
static PyObject *wq_copy_tensors(WriteQueueObject *self, PyObject *args) {
  static PyObject *s_tensor;
  PyObject *names, *values, *ops, *tokens, *fallback, *begin;
  Py_ssize_t start;
  double wall;
  long long limit;
  if (!PyArg_ParseTuple(args, "OOndO!O!LOO:copy_tensors", &names, &values,
                        &start, &wall, &PyList_Type, &ops, &PyList_Type,
                        &tokens, &limit, &fallback, &begin))
    return NULL;
  if (!self->pool)
    return PyErr_Format(PyExc_ValueError, "WriteQueue is closed");
  if (!s_tensor && !(s_tensor = PyUnicode_InternFromString("tensor")))
    return NULL;
  PyObject *nf = PySequence_Fast(names, "copy_tensors: names is a sequence");
  if (!nf)
    return NULL;
  PyObject *vf = PySequence_Fast(values, "copy_tensors: values is a sequence");
  if (!vf) {
    Py_DECREF(nf);
    return NULL;
  }
  Py_ssize_t n = PySequence_Fast_GET_SIZE(vf);
  PyObject *wall_obj = PyFloat_FromDouble(wall);
  pending_copy *pc =
      PyMem_Calloc(n > start ? (size_t)(n - start) : 1, sizeof *pc);
  Py_ssize_t ops0 = PyList_GET_SIZE(ops), tokens0 = PyList_GET_SIZE(tokens);
  Py_ssize_t i = start < 0 ? 0 : start, np = 0;
  unsigned long long nbytes = 0, streamed = 0;
  bool ok = wall_obj && pc, added = false;
  if (!pc)
    PyErr_NoMemory();
  if (ok && PySequence_Fast_GET_SIZE(nf) != n) {
    PyErr_SetString(PyExc_ValueError, "copy_tensors: as many names as values");
    ok = false;
  }
  while (ok && i < n) {
    PyObject *name = PySequence_Fast_GET_ITEM(nf, i);
    PyObject *v = PySequence_Fast_GET_ITEM(vf, i++);
    if (v == Py_None)
      continue;
    PyObject *copy = NULL;
    Py_ssize_t len = 0;
    int r = tensor_view(v, &pc[np].src);
    if (r < 0) {
      ok = false;
      break;
    }
    if (r == 1) {
      len = pc[np].src.len;
      if (len == 0) {
        PyBuffer_Release(&pc[np].src);
        continue;
      }
      /* no free buffer of this size: the batches written since give
       * theirs back first (their tokens wait for reap) */
      if (!copy_pool_has(self->pool, (size_t)len)) {
        if (!self->reaped && !(self->reaped = PyList_New(0))) {
          PyBuffer_Release(&pc[np].src);
          ok = false;
          break;
        }
        if (reap_into(self, self->reaped) != 0) {
          PyBuffer_Release(&pc[np].src);
          ok = false;
          break;
        }
      }
      copy = copy_buffer_new(self->pool, &pc[np].src);
      if (!copy) {
        PyBuffer_Release(&pc[np].src);
        ok = false;
        break;
      }
      pc[np].dst = copy_buffer_data(copy);
      np++;
      if (len >= COPY_STREAM_MIN)
        streamed += (unsigned long long)len;
    } else {
      PyObject *res = PyObject_CallOneArg(fallback, v);
      if (!res) {
        ok = false;
        break;
      }
      if (res == Py_None) {
        Py_DECREF(res);
        continue;
      }
      PyObject *token;
      if (!PyArg_ParseTuple(res, "OOn:copy_tensors fallback", &copy, &token,
                            &len) ||
          PyList_Append(tokens, token) != 0) {
        Py_DECREF(res);
        ok = false;
        break;
      }
      Py_INCREF(copy);
      Py_DECREF(res);
    }
    PyObject *op = PyTuple_Pack(4, s_tensor, name, copy, wall_obj);
    Py_DECREF(copy);
    if (!op || PyList_Append(ops, op) != 0) {
      Py_XDECREF(op);
      ok = false;
      break;
    }
    Py_DECREF(op);
    nbytes += (unsigned long long)len;
    added = true;
    if ((long long)nbytes >= limit)
      break;
  }
  bool begun = ok && added && begin != Py_None;
  if (begun && PyList_Insert(ops, ops0, begin) != 0) {
    ok = false;
    begun = false;
  }
  if (ok) { /* the copies, the GIL released once if any is large */
    PyThreadState *ts = streamed ? PyEval_SaveThread() : NULL;
    for (Py_ssize_t k = 0; k < np; k++)
      copy_stream(pc[k].dst, pc[k].src.buf, (size_t)pc[k].src.len);
    if (ts)
      PyEval_RestoreThread(ts);
  } else { /* nothing of this call stays: its CopyBuffers go back */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyList_SetSlice(ops, ops0, PyList_GET_SIZE(ops), NULL);
    PyList_SetSlice(tokens, tokens0, PyList_GET_SIZE(tokens), NULL);
    PyErr_Restore(type, value, tb);
  }
  for (Py_ssize_t k = 0; k < np; k++)
    PyBuffer_Release(&pc[k].src);
  PyMem_Free(pc);
  Py_XDECREF(wall_obj);
  Py_DECREF(nf);
  Py_DECREF(vf);
  if (!ok)
    return NULL;
  return Py_BuildValue("nKO", i, nbytes, begun ? Py_True : Py_False);
}

static PyObject *wq_reused(WriteQueueObject *self, void *closure) {
  return PyLong_FromUnsignedLongLong(self->pool ? copy_pool_reused(self->pool)
                                                : self->reused);
}

static PyMethodDef wq_methods[] = {
    {"submit", (PyCFunction)wq_submit, METH_VARARGS,
     "submit(ops, nbytes, token): queue a batch of operations (Writer.batch's, "
     "and (\"collections\", json), (\"end_marker\",)) holding nbytes of "
     "arrays; waits while the queue is over its bound."},
    {"reap", (PyCFunction)wq_reap, METH_NOARGS,
     "reap(): the tokens of the batches written since the last call, oldest "
     "first; their arrays are no longer used."},
    {"drain", (PyCFunction)wq_drain, METH_NOARGS,
     "drain(): wait until every batch queued so far is written (the thread "
     "goes on)."},
    {"close", (PyCFunction)wq_close, METH_NOARGS,
     "close(): write what is queued, end the thread, and reap(); the "
     "buffers kept for copy_tensors are freed."},
    {"copy_tensors", (PyCFunction)wq_copy_tensors, METH_VARARGS,
     "copy_tensors(names, values, start, wall, ops, tokens, limit, fallback, "
     "begin): copy tensors saved whole into reused buffers and append their "
     "operations to ops; returns (next start, bytes, begin used)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef wq_getset[] = {
    {"error", (getter)wq_error, NULL,
     "the first failure (an exception instance), or None", NULL},
    {"queued_bytes", (getter)wq_size, NULL, "bytes of arrays queued", NULL},
    {"peak_bytes", (getter)wq_size, NULL, "the most bytes queued at once",
     (void *)1},
    {"cpu_seconds", (getter)wq_cpu, NULL,
     "the thread's CPU time so far (its own clock; kept once closed)", NULL},
    {"reused", (getter)wq_reused, NULL,
     "copies copy_tensors made into a buffer written before (not new)", NULL},
    {"event_writes", (getter)wq_event_writes, NULL,
     "the write calls the thread made to event files, once closed (0 "
     "before)",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject WriteQueueType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "smrules._core.WriteQueue",
    .tp_basicsize = sizeof(WriteQueueObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "WriteQueue(trial_dir, worker, max_bytes): a worker's trial "
              "writer on a thread of its own that never takes the GIL.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)wq_init,
    .tp_dealloc = (destructor)wq_dealloc,
    .tp_methods = wq_methods,
    .tp_getset = wq_getset,
};

int smr_py_add_write_queue(PyObject *m) {
  if (PyType_Ready(&WriteQueueType) < 0)
    return -1;
  Py_INCREF(&WriteQueueType);
  if (PyModule_AddObject(m, "WriteQueue", (PyObject *)&WriteQueueType) < 0) {
    Py_DECREF(&WriteQueueType);
    return -1;
  }
  return 0;
}
