/* copy_pool.h - the PyTorch hook's copies of tensors (copy_pool.c): the
 * buffers they land in, reused from step to step, and the copy itself. */
#ifndef SMR_PY_COPY_POOL_H
#define SMR_PY_COPY_POOL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>

/* Free buffers kept for reuse, by size.  One per WriteQueue; every
 * CopyBuffer holds a reference to the pool its memory came from, and gives
 * the memory back to it when freed.  All of it runs with the GIL held. */
typedef struct copy_pool copy_pool;

/* A pool keeping at most `max_free` bytes of free buffers; NULL with an
 * exception. */
copy_pool *copy_pool_new(size_t max_free);
/* The owner lets go: the free buffers are freed, and so are those given
 * back later; the pool itself goes with its last CopyBuffer. */
void copy_pool_close(copy_pool *p);
/* Buffers taken from the pool rather than allocated (tests check reuse). */
unsigned long long copy_pool_reused(const copy_pool *p);

/* A CopyBuffer (a Python object with the buffer protocol, read-only, C
 * contiguous) of `src`'s format, item size and shape, its memory taken
 * from `p` (a free buffer of that size if there is one, else new): the
 * copy of `src` is stored into copy_buffer_data() by the caller.  NULL
 * with an exception (no memory, more dimensions than the writer takes). */
PyObject *copy_buffer_new(copy_pool *p, const Py_buffer *src);
void *copy_buffer_data(PyObject *cb);
/* Whether `p` holds a free buffer of `nbytes` (the caller may then skip
 * giving written buffers back first). */
int copy_pool_has(const copy_pool *p, size_t nbytes);

/* memcpy for the hook's copies: at least COPY_STREAM_MIN bytes bypass the
 * caches (see copy_pool.c). */
#define COPY_STREAM_MIN (128 * 1024)
void copy_stream(void *dst, const void *src, size_t n);

/* Add the CopyBuffer type to module `m`; -1 with an exception. */
int smr_py_add_copy_pool(PyObject *m);

#endif
