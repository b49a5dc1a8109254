"""The hook's writer: one thread per hook that turns queued work into files
through smrules._core.Writer, so that encoding and writing never run on
the training thread.

The queue is bounded by bytes: put() waits while the tensors already queued
hold more than `max_bytes` (the training step waits for the disk instead of
memory growing); a single tensor larger than the bound is still accepted
when the queue is empty.  An error in the thread (a full disk) is kept and
reported by the hook on the training thread (see `error`); nothing after
it is written, and the steps written before it stay complete.

The copies a saving step takes (copy_of) land in buffers that come back
once written (the training thread takes them back, see _recycle): a step reuses the memory of the steps before instead of
allocating its tensors again (fresh large allocations cost page faults:
for a 0.8 M-parameter MLP, 1.25 ms of copying per step became 0.11 ms).
The buffers kept for reuse are bounded (POOL_BYTES).  From the tensor to
the file there is no other copy: the buffer is handed to the C writer as a
NumPy view, and the writer writes it from there (core/writer/writer.c).

Operations travel in batches: the training thread gathers a step's
operations in a list of its own (no lock, no wake-up per tensor) and hands
the list to the queue when the step ends, or earlier when it holds
BATCH_BYTES (or the queue's bound, if less); the writer thread writes a
batch with one call into C that releases the GIL once for all of it
(Writer.batch).  A tensor saved whole is queued as the C writer takes it,
so that for a step of such tensors the writer thread runs almost no
Python: every torch call of the training thread lets go of the GIL, and a
writer thread waiting for it then takes it, and training waits for the
writer's Python to finish (in the profile of a small model, most of the
hook's cost on the training thread was this wait, not its own work)."""

import collections
import os
import threading
import time

import torch

from smrules import _core

REDUCTION_PREFIX = "smdebug/reductions/"
POOL_BYTES = 64 << 20  # at most this much kept for reuse between steps
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
        self._cond = threading.Condition()
        self._ops = collections.deque()  # of (batch, bytes)
        self._batch = []  # the training thread's operations not yet queued
        self._batch_bytes = 0
        self._batch_python = False  # it holds work for the writer's Python
        self._done = collections.deque()  # written batches, their buffers to reuse
        # a backward pass's callbacks may run on another thread (autograd's
        # device threads): the batch in hand is changed under this lock
        self._batch_lock = threading.Lock()
        self._queued_bytes = 0
        self._flush_bytes = min(BATCH_BYTES, max_bytes)  # a batch is queued at this size
        self._error = None
        self._stopping = False
        self._writer = None
        self.peak_bytes = 0  # the most the queue held (tests check the bound)
        self._pool = {}  # (dtype, shape) -> [free Copy buffers]
        self._pool_bytes = 0
        self._pool_lock = threading.RLock()
        self.reused = 0  # copies that reused a buffer (tests check reuse)
        self.cpu_seconds = 0.0  # the thread's CPU time, once it has ended
        self._thread = threading.Thread(target=self._run, name="smrules-writer", daemon=True)
        self._thread.start()

    # ---- training thread ----

    def put(self, op, nbytes=0):
        """Add one operation to the batch in hand; the batch is queued when
        the step ends (or the collections or the end marker are written),
        or once its tensors hold BATCH_BYTES or the queue's bound.  After
        a failure nothing more is queued (see `error`)."""
        with self._batch_lock:
            self._batch.append(op)
            self._batch_bytes += nbytes
            kind = op[0]
            if kind not in ("begin", "tensor", "shape", "end"):
                self._batch_python = True
            if kind not in ("begin", "tensor", "reduce", "shape") or \
                    self._batch_bytes >= self._flush_bytes:
                self._flush()

    def put_copy(self, name, value, wall, raw, reductions):
        """Copy `value` (copy_of) and queue the copy: saved whole (raw)
        and/or as its reductions.  Saved whole only, it is queued as the C
        writer takes it, so that the writer thread runs no Python for it.
        (put's work, inlined: this runs for every tensor of a saving step.)"""
        c = self.copy_of(value)
        if raw and not reductions and c.array is not None:
            op, python = ("tensor", name, c.array, wall, c), False
        else:
            op, python = ("reduce", name, c, wall, raw, reductions), True
        with self._batch_lock:
            self._batch.append(op)
            self._batch_bytes += c.nbytes
            if python:
                self._batch_python = True
            if self._batch_bytes >= self._flush_bytes:
                self._flush()

    def flush(self):
        """Queue the batch in hand; waits while the queue is over its
        bound (one batch is always accepted into an empty queue)."""
        with self._batch_lock:
            self._flush()

    def _flush(self):
        if self._done:
            self._recycle()
        batch, nbytes, python = self._batch, self._batch_bytes, self._batch_python
        if not batch:
            return
        self._batch, self._batch_bytes, self._batch_python = [], 0, False
        with self._cond:
            while self._ops and self._queued_bytes + nbytes > self.max_bytes and not self.error:
                self._cond.wait()
            if self.error:
                return
            self._ops.append((batch, nbytes, python))
            self._queued_bytes += nbytes
            self.peak_bytes = max(self.peak_bytes, self._queued_bytes)
            self._cond.notify_all()

    def copy_of(self, value):
        """The copy of `value` the queue takes (a Copy): on the CPU,
        contiguous, detached, sharing no memory with training; in a buffer
        written before when one of its dtype and shape is free."""
        v = value.detach()
        key = (v.dtype, v.shape)
        c = None
        with self._pool_lock:
            free = self._pool.get(key)
            if not free and self._done:
                self._recycle()
                free = self._pool.get(key)
            if free:
                c = free.pop()
                self._pool_bytes -= c.nbytes
        if c is None:
            c = Copy(key)
        else:
            self.reused += 1
        c.tensor.copy_(v)
        return c

    def _recycle(self):
        """The buffers of the batches written since the last call go back
        to the pool (done here, on the training thread, rather than by the
        writer thread: its Python would take the GIL from training)."""
        with self._pool_lock:
            while self._done:
                for op in self._done.popleft():
                    kind = op[0]
                    c = op[4] if kind == "tensor" else op[2] if kind == "reduce" else None
                    if c is not None and self._pool_bytes + c.nbytes <= POOL_BYTES:
                        self._pool.setdefault(c.key, []).append(c)
                        self._pool_bytes += c.nbytes

    @property
    def error(self):
        """The first failure of the writer thread (an exception), or None."""
        return self._error

    def close(self):
        """Write what is queued, close the writer, end the thread."""
        self.flush()
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join()

    # ---- writer thread ----

    def _run(self):
        while True:
            with self._cond:
                while not self._ops and not self._stopping:
                    self._cond.wait()
                if not self._ops:
                    break
                batch, nbytes, python = self._ops[0]
            try:
                if self._error is None:
                    if python:
                        self._do_batch(batch)
                    else:  # the common case: a step as the C writer takes it
                        self._calls(batch)
            except BaseException as e:  # kept for the training thread
                with self._cond:
                    self._error = e
            self._done.append(batch)
            batch = None
            with self._cond:
                self._ops.popleft()
                self._queued_bytes -= nbytes
                self._cond.notify_all()
        if self._writer is not None:
            try:
                self._writer.close()
            except BaseException as e:
                with self._cond:
                    self._error = self._error or e
        self.cpu_seconds = time.thread_time()  # this thread's CPU (the bench reports it)

    def _do_batch(self, batch):
        """A batch's step operations go to C in one call; the collections
        file and the end marker are written in their place in the order."""
        calls = []
        for op in batch:
            kind = op[0]
            if kind == "reduce":
                _, name, c, wall, raw, reductions = op
                for red, abs_ in reductions:
                    calls.append(("tensor", reduction_name(name, red, abs_),
                                  as_array(reduce(c.tensor, red, abs_)), wall))
                if raw:
                    a = c.array if c.array is not None else as_array(c.tensor)
                    calls.append(("tensor", name, a, wall))
            elif kind in ("begin", "end", "shape", "tensor"):
                calls.append(op)
            else:
                self._calls(calls)
                calls = []
                self._do(op)
        self._calls(calls)

    def _calls(self, calls):
        if calls:
            if self._writer is None:
                self._writer = _core.Writer(self.out_dir, self.worker)
            self._writer.batch(calls)

    def _do(self, op):
        kind = op[0]
        if kind == "end_marker":
            # Every worker writes it when it ends (as smdebug does); two at
            # once share the .tmp name, and the second rename then finds
            # the marker already there: that is success.
            marker = os.path.join(self.out_dir, "training_job_end.ts")
            try:
                _core.write_end_marker(self.out_dir)
            except OSError:
                if not os.path.exists(marker):
                    raise
            return
        if self._writer is None:
            self._writer = _core.Writer(self.out_dir, self.worker)
        if kind == "collections":
            self._writer.collections(op[1])
        else:
            raise ValueError(f"unknown writer operation {kind!r}")
