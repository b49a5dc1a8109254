"""The hook's writer: a thread per hook that turns queued work into files,
so that encoding and writing never run on the training thread.  The thread
and its queue are in C (smrules._core.WriteQueue, python/src/write_queue.c)
and the thread never takes the GIL: a writer thread in Python had to take
it to wake up, to call the C writer and to say it was done, and every
torch call of the training thread lets go of the GIL, so training kept
waiting for the writer's few lines of Python.

The queue is bounded by bytes: a batch waits to be queued while the
tensors already queued hold more than `max_bytes` (the training step waits
for the disk instead of memory growing); a batch larger than the bound is
still accepted when the queue is empty.  An error in the thread (a full
disk) is kept and reported by the hook on the training thread (see
`error`); nothing after it is written, and the steps written before it
stay complete.

The copies a saving step takes land in buffers that come back once
written: a step reuses the memory of the steps before instead of
allocating its tensors again (fresh large allocations cost page faults:
for a 0.8 M-parameter MLP, 1.25 ms of copying per step became 0.11 ms).
Tensors saved whole (put_raws, nearly all) are copied a group at a time
by one C call into the queue's own pool (WriteQueue.copy_tensors,
python/src/copy_pool.c); the others, and those torch must copy (not
contiguous, bfloat16), into torch tensors of a pool kept here (copy_of,
_take; given back by _recycle).  Each pool keeps at most POOL_BYTES of
free buffers.  From the tensor to the file there is no other copy: the
buffer is handed to the C writer as it is, and the writer writes it from
there (core/writer/writer.c).

Operations travel in batches: the training thread gathers a step's
operations in a list of its own (no lock, no wake-up per tensor) and hands
the list to the queue when the step ends, or earlier when it holds
BATCH_BYTES (or the queue's bound, if less).  Reductions are computed on
the training thread from the copy, as the copy is taken (torch's own
functions, smdebug's results), so that every operation the thread gets is
one the C writer takes as it is."""

import threading

import torch

from smrules import _core

REDUCTION_PREFIX = "smdebug/reductions/"
POOL_BYTES = 64 << 20  # at most this much kept for reuse between steps (each pool)
BATCH_BYTES = 8 << 20  # a batch goes to the queue once its tensors hold this much


def reduction_name(tensor_name, reduction, abs_):
    return REDUCTION_PREFIX + ("abs_" if abs_ else "") + reduction + "/" + tensor_name


def reduce(t, reduction, abs_):
    """smdebug's PyTorch reductions, computed the same way (torch's own
    functions: std and variance with n - 1, norms of the flattened
    tensor), on the copy taken from the training thread."""
    if abs_:
        t = torch.abs(t)
    if reduction in ("l1", "l2"):
        return torch.norm(t, p=int(reduction[1]))
    if reduction == "variance":
        return torch.var(t)
    return getattr(torch, reduction)(t)


def as_array(t):
    """A CPU tensor as something with the buffer protocol (a NumPy view)."""
    if t.dtype == torch.bfloat16:  # NumPy has no bfloat16
        t = t.float()
    return t.contiguous().numpy()


class Copy:
    """A buffer copies land in, kept with what the writer needs of it: its
    NumPy view (made once: None where NumPy has no such dtype, bfloat16),
    its size in bytes, its key in the pool (dtype, shape)."""
    __slots__ = ("tensor", "array", "nbytes", "key")

    def __init__(self, key):
        self.key = key
        self.tensor = torch.empty(key[1], dtype=key[0])
        try:
            self.array = self.tensor.numpy()
        except (TypeError, RuntimeError):
            self.array = None
        self.nbytes = self.tensor.numel() * self.tensor.element_size()


class WriterThread:
    def __init__(self, out_dir, worker, max_bytes):
        self.out_dir = out_dir
        self.worker = worker
        self.max_bytes = max_bytes
        self._queue = _core.WriteQueue(out_dir, worker, max_bytes, POOL_BYTES)
        self._batch = []  # the training thread's operations not yet queued
        self._copies = []  # the buffers they were copied into
        self._batch_bytes = 0
        self._flush_bytes = min(BATCH_BYTES, max_bytes)  # a batch is queued at this size
        # a backward pass's callbacks may run on another thread (autograd's
        # device threads): the batch in hand and the pool change under it
        self._lock = threading.RLock()
        self._pool = {}  # (dtype, shape) -> [free Copy buffers]
        self._pool_bytes = 0
        self._reused = 0  # Copy buffers reused (see reused)

    # ---- training thread ----

    def put(self, op, nbytes=0):
        """Add one operation to the batch in hand; the batch is queued when
        the step ends (or the collections or the end marker are written),
        or once its tensors hold BATCH_BYTES or the queue's bound.  After
        a failure nothing more is queued (see `error`)."""
        with self._lock:
            self._batch.append(op)
            self._batch_bytes += nbytes
            if op[0] not in ("begin", "shape") or self._batch_bytes >= self._flush_bytes:
                self._flush()

    def put_copy(self, name, value, wall, raw, reductions):
        """Copy `value` (copy_of) and queue its reductions (computed here
        from the copy) and/or the copy itself (raw), in smdebug's order."""
        c = self.copy_of(value)
        with self._lock:
            for red, abs_ in reductions:
                self._batch.append(("tensor", reduction_name(name, red, abs_),
                                    as_array(reduce(c.tensor, red, abs_)), wall))
            if raw:
                a = c.array if c.array is not None else as_array(c.tensor)
                self._batch.append(("tensor", name, a, wall))
                self._copies.append(c)
                self._batch_bytes += c.nbytes
                if self._batch_bytes >= self._flush_bytes:
                    self._flush()
            else:  # its reductions are taken: the buffer is free again
                self._give_back(c)

    def put_raws(self, names, values, wall, begin=None):
        """Tensors saved whole with no reductions (the plan of nearly every
        tensor a step saves), values[i] as names[i], in order: one C call
        (WriteQueue.copy_tensors) finds each its buffer and copies it, so
        that a step's copies cost the training thread no Python per
        tensor.  A value of None or of no elements is skipped.  `begin`,
        the step's ("begin", ...) operation if it is not queued yet, goes
        before the first tensor saved; returns whether it went."""
        i, n, begun = 0, len(values), False
        with self._lock:
            while i < n:
                i, nbytes, used = self._queue.copy_tensors(
                    names, values, i, wall, self._batch, self._copies,
                    self._flush_bytes - self._batch_bytes, self._copy_fallback,
                    None if begun else begin)
                begun = begun or used
                self._batch_bytes += nbytes
                if self._batch_bytes >= self._flush_bytes:
                    self._flush()
        return begun

    def _copy_fallback(self, value):
        """copy_tensors' way for a tensor NumPy cannot view as a contiguous
        array (not contiguous, bfloat16, another device, a negative bit):
        torch copies it into a pooled Copy.  (array, Copy, bytes), or None
        for a tensor of no elements."""
        v = value.detach()
        if v.numel() == 0:
            return None
        c = self._take(v)
        c.tensor.copy_(v)
        return (c.array if c.array is not None else as_array(c.tensor)), c, c.nbytes

    def flush(self):
        """Queue the batch in hand; waits while the queue is over its
        bound (one batch is always accepted into an empty queue)."""
        with self._lock:
            self._flush()

    def _flush(self):
        self._recycle()
        batch, copies, nbytes = self._batch, self._copies, self._batch_bytes
        if not batch:
            return
        self._batch, self._copies, self._batch_bytes = [], [], 0
        if self.error is None:  # after a failure nothing more is queued
            self._queue.submit(batch, nbytes, copies)

    def copy_of(self, value):
        """The copy of `value` the queue takes (a Copy): on the CPU,
        contiguous, detached, sharing no memory with training; in a buffer
        written before when one of its dtype and shape is free."""
        v = value.detach()
        c = self._take(v)
        src = None
        if c.array is not None and v.is_contiguous():
            try:  # a CPU tensor's memory as NumPy sees it
                src = v.numpy()
            except (TypeError, RuntimeError):  # another device, conj/neg bits
                pass
        if src is not None:
            # the bytes as they are (same dtype and shape), stored around
            # the caches when large: see copy_stream in python/src/copy_pool.c
            _core.copy_into(c.array, src)
        else:
            c.tensor.copy_(v)
        return c

    def _take(self, v):
        """A Copy for the detached tensor v: a free one of its dtype and
        shape, else new."""
        key = (v.dtype, v.shape)
        with self._lock:
            free = self._pool.get(key)
            if not free:
                self._recycle()
                free = self._pool.get(key)
            c = free.pop() if free else None
            if c is not None:
                self._pool_bytes -= c.nbytes
                self._reused += 1
        return c if c is not None else Copy(key)

    def _recycle(self):
        """The buffers of the batches written since the last call go back
        to the pool."""
        for copies in self._queue.reap():
            for c in copies:
                self._give_back(c)

    def _give_back(self, c):
        if self._pool_bytes + c.nbytes <= POOL_BYTES:
            self._pool.setdefault(c.key, []).append(c)
            self._pool_bytes += c.nbytes

    @property
    def reused(self):
        """Copies made into a buffer written before rather than a new one
        (tests check reuse)."""
        return self._reused + self._queue.reused

    @property
    def peak_bytes(self):
        """The most the queue held (tests check the bound)."""
        return self._queue.peak_bytes

    @property
    def error(self):
        """The first failure of the writer thread (an exception), or None."""
        return self._queue.error

    def close(self):
        """Write what is queued, close the writer, end the thread."""
        with self._lock:
            self._flush()
            self._queue.close()
            self._pool = {}
            self._pool_bytes = 0

    def drain(self):
        """Wait until the batches queued so far are written; the batch in
        hand stays in hand (the bench ends a timed slice of steps with
        this, so that the writer's backlog counts in it)."""
        self._queue.drain()

    @property
    def cpu_seconds(self):
        """The writer thread's CPU time so far (kept once closed)."""
        return self._queue.cpu_seconds
