/* copy_pool.c - the PyTorch hook's copies of tensors: the buffers they land
 * in, and the copy itself.
 *
 * A saving step copies each tensor it saves (training changes parameters
 * and gradients in place right after) into a CopyBuffer: a small Python
 * object exposing a block of memory through the buffer protocol, with the
 * tensor's format and shape, which the writer thread writes from
 * (write_queue.c).  When the batch holding it has been written and its
 * operations are released, the CopyBuffer goes and its block returns to
 * the pool it came from, so that the next step copies into memory already
 * faulted in rather than into fresh allocations (for a 0.8 M-parameter
 * MLP, 1.25 ms of copying per step became 0.11 ms).  The pool keeps at
 * most max_free bytes of free blocks; a block beyond that is freed.
 *
 * Everything here runs with the GIL held (a CopyBuffer is freed where its
 * last reference goes, always a Python thread), so the pool needs no lock
 * of its own. */
#include "copy_pool.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "format/tensor.h"

/* A block's header; its data starts BLOCK_DATA bytes in (cache-line
 * aligned, so that the streamed stores below write whole lines). */
typedef struct block {
  struct block *next;
  size_t nbytes;
} block;
#define BLOCK_DATA 64

typedef struct {
  size_t nbytes;
  block *head; /* free blocks of this size */
} bin;

struct copy_pool {
  Py_ssize_t refs; /* the owner's (until closed) and one per CopyBuffer */
  bool closed;
  bin *bins; /* one per size seen (a model has few distinct sizes) */
  size_t nbins, cap;
  size_t free_bytes, max_free;
  unsigned long long reused;
};

copy_pool *copy_pool_new(size_t max_free) {
  copy_pool *p = PyMem_Calloc(1, sizeof *p);
  if (!p)
    return (copy_pool *)PyErr_NoMemory();
  p->refs = 1;
  p->max_free = max_free;
  return p;
}

static void pool_free_blocks(copy_pool *p) {
  for (size_t i = 0; i < p->nbins; i++)
    for (block *b = p->bins[i].head, *next; b; b = next) {
      next = b->next;
      free(b);
    }
  PyMem_Free(p->bins);
  p->bins = NULL;
  p->nbins = p->cap = 0;
  p->free_bytes = 0;
}

static void pool_unref(copy_pool *p) {
  if (--p->refs > 0)
    return;
  pool_free_blocks(p);
  PyMem_Free(p);
}

void copy_pool_close(copy_pool *p) {
  if (!p || p->closed)
    return;
  p->closed = true;
  pool_free_blocks(p);
  pool_unref(p);
}

unsigned long long copy_pool_reused(const copy_pool *p) {
  return p ? p->reused : 0;
}

static bin *pool_bin(const copy_pool *p, size_t nbytes) {
  for (size_t i = 0; i < p->nbins; i++)
    if (p->bins[i].nbytes == nbytes)
      return &p->bins[i];
  return NULL;
}

int copy_pool_has(const copy_pool *p, size_t nbytes) {
  const bin *b = pool_bin(p, nbytes);
  return b && b->head;
}

/* A block of `nbytes`: a free one of that size, else a new one. */
static block *pool_take(copy_pool *p, size_t nbytes) {
  bin *bn = pool_bin(p, nbytes);
  if (bn && bn->head) {
    block *b = bn->head;
    bn->head = b->next;
    p->free_bytes -= nbytes;
    p->reused++;
    return b;
  }
  size_t size = BLOCK_DATA + nbytes;
  size = (size + BLOCK_DATA - 1) / BLOCK_DATA * BLOCK_DATA; /* aligned_alloc */
  block *b = aligned_alloc(BLOCK_DATA, size);
  if (!b)
    return (block *)PyErr_NoMemory();
  b->nbytes = nbytes;
  return b;
}

/* A written block comes back: kept for reuse within max_free, else freed. */
static void pool_give(copy_pool *p, block *b) {
  if (p->closed || p->free_bytes + b->nbytes > p->max_free) {
    free(b);
    return;
  }
  bin *bn = pool_bin(p, b->nbytes);
  if (!bn) { /* a size not seen before */
    if (p->nbins == p->cap) {
      size_t cap = p->cap ? 2 * p->cap : 8;
      bin *bins = PyMem_Realloc(p->bins, cap * sizeof *bins);
      if (!bins) { /* not kept, then */
        free(b);
        return;
      }
      p->bins = bins;
      p->cap = cap;
    }
    bn = &p->bins[p->nbins++];
    bn->nbytes = b->nbytes;
    bn->head = NULL;
  }
  b->next = bn->head;
  bn->head = b;
  p->free_bytes += b->nbytes;
}

/* ---- CopyBuffer ---- */

typedef struct {
  PyObject_HEAD copy_pool *pool;
  block *blk;
  Py_ssize_t nbytes, itemsize;
  int ndim;
  Py_ssize_t shape[SMR_MAX_DIMS], strides[SMR_MAX_DIMS];
  char format[8];
} CopyBufferObject;

static PyTypeObject CopyBufferType;

PyObject *copy_buffer_new(copy_pool *p, const Py_buffer *src) {
  const char *fmt = src->format ? src->format : "B";
  if (src->ndim > SMR_MAX_DIMS ||
      strlen(fmt) >= sizeof(((CopyBufferObject *)0)->format))
    return PyErr_Format(PyExc_ValueError,
                        "copy: %d dimensions or format '%s' not taken",
                        src->ndim, fmt);
  CopyBufferObject *cb = PyObject_New(CopyBufferObject, &CopyBufferType);
  if (!cb)
    return NULL;
  cb->blk = pool_take(p, (size_t)src->len);
  if (!cb->blk) {
    cb->pool = NULL;
    Py_DECREF(cb);
    return NULL;
  }
  cb->pool = p;
  p->refs++;
  cb->nbytes = src->len;
  cb->itemsize = src->itemsize;
  cb->ndim = src->ndim;
  strcpy(cb->format, fmt);
  Py_ssize_t stride = src->itemsize;
  for (int i = src->ndim - 1; i >= 0; i--) {
    cb->shape[i] = src->shape ? src->shape[i] : src->len / src->itemsize;
    cb->strides[i] = stride;
    stride *= cb->shape[i];
  }
  return (PyObject *)cb;
}

void *copy_buffer_data(PyObject *cb) {
  return (char *)((CopyBufferObject *)cb)->blk + BLOCK_DATA;
}

static void cb_dealloc(CopyBufferObject *cb) {
  if (cb->pool) {
    pool_give(cb->pool, cb->blk);
    pool_unref(cb->pool);
  }
  PyObject_Free(cb);
}

static int cb_getbuffer(CopyBufferObject *cb, Py_buffer *view, int flags) {
  if (flags & PyBUF_WRITABLE) {
    PyErr_SetString(PyExc_BufferError, "a CopyBuffer is read-only");
    view->obj = NULL;
    return -1;
  }
  view->buf = copy_buffer_data((PyObject *)cb);
  view->obj = (PyObject *)cb;
  Py_INCREF(cb);
  view->len = cb->nbytes;
  view->readonly = 1;
  view->itemsize = cb->itemsize;
  view->format = (flags & PyBUF_FORMAT) ? cb->format : NULL;
  view->ndim = cb->ndim;
  view->shape = (flags & PyBUF_ND) == PyBUF_ND ? cb->shape : NULL;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? cb->strides : NULL;
  view->suboffsets = NULL;
  view->internal = NULL;
  return 0;
}

static PyBufferProcs cb_as_buffer = {(getbufferproc)cb_getbuffer, NULL};

static PyTypeObject CopyBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "smrules._core.CopyBuffer",
    .tp_basicsize = sizeof(CopyBufferObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The hook's copy of a tensor (read-only, C-contiguous, with the "
              "tensor's format and shape): made by WriteQueue.copy_tensors, "
              "its memory reused once it is written.",
    .tp_dealloc = (destructor)cb_dealloc,
    .tp_as_buffer = &cb_as_buffer,
};

int smr_py_add_copy_pool(PyObject *m) {
  if (PyType_Ready(&CopyBufferType) < 0)
    return -1;
  Py_INCREF(&CopyBufferType);
  if (PyModule_AddObject(m, "CopyBuffer", (PyObject *)&CopyBufferType) < 0) {
    Py_DECREF(&CopyBufferType);
    return -1;
  }
  return 0;
}

/* ---- the copy ---- */

/* memcpy for the hook's copies of large tensors: the copy is read again only
 * by the writer thread, on another core, after the step; stored through the
 * caches it would push the model's weights and activations out of them
 * (training then runs slower for the rest of the step) and read each
 * destination line before overwriting it.  Non-temporal stores (SSE2, in
 * every x86-64) write around the caches; the fence orders them before the
 * buffer is handed to the writer thread.  Small copies, and elsewhere:
 * memcpy. */
void copy_stream(void *dst, const void *src, size_t n) {
#if defined(__x86_64__) && defined(__SSE2__)
  if (n >= COPY_STREAM_MIN) {
    uint8_t *d = dst;
    const uint8_t *s = src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15; /* align the stores */
    memcpy(d, s, head);
    d += head, s += head, n -= head;
    for (; n >= 64; d += 64, s += 64, n -= 64) {
      __m128i a = _mm_loadu_si128((const __m128i *)s);
      __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
      __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
      __m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
      _mm_stream_si128((__m128i *)d, a);
      _mm_stream_si128((__m128i *)(d + 16), b);
      _mm_stream_si128((__m128i *)(d + 32), c);
      _mm_stream_si128((__m128i *)(d + 48), e);
    }
    _mm_sfence();
    memcpy(d, s, n);
    return;
  }
#endif
  memcpy(dst, src, n);
}
