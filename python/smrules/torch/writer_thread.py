"""The hook's writer: one thread per hook that turns queued work into files
through smrules._core.Writer, so that encoding and writing never run on
the training thread.

The queue is bounded by bytes: put() waits while the tensors already queued
hold more than `max_bytes` (the training step waits for the disk instead of
memory growing); a single tensor larger than the bound is still accepted
when the queue is empty.  An error in the thread (a full disk) is kept and
reported by the hook on the training thread (see `error`); nothing after
it is written, and the steps written before it stay complete.

The copies a saving step takes (copy_of) land in buffers the thread gives
back once written: a step reuses the memory of the steps before instead of
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
(Writer.batch).  Per tensor, a lock, a wake-up and a GIL hand-over each
way cost more CPU than writing a small tensor."""

import collections
import os
import threading

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
        # a backward pass's callbacks may run on another thread (autograd's
        # device threads): the batch in hand is changed under this lock
        self._batch_lock = threading.Lock()
        self._queued_bytes = 0
        self._error = None
        self._stopping = False
        self._writer = None
        self.bytes_written = 0
        self.peak_bytes = 0  # the most the queue held (tests check the bound)
        self._pool = {}  # (dtype, shape) -> [free Copy buffers]
        self._pool_bytes = 0
        self._pool_lock = threading.Lock()
        self.reused = 0  # copies that reused a buffer (tests check reuse)
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
            if op[0] not in ("begin", "tensor", "shape") or \
                    self._batch_bytes >= min(BATCH_BYTES, self.max_bytes):
                self._flush()

    def flush(self):
        """Queue the batch in hand; waits while the queue is over its
        bound (one batch is always accepted into an empty queue)."""
        with self._batch_lock:
            self._flush()

    def _flush(self):
        batch, nbytes = self._batch, self._batch_bytes
        if not batch:
            return
        self._batch, self._batch_bytes = [], 0
        with self._cond:
            while self._ops and self._queued_bytes + nbytes > self.max_bytes and not self.error:
                self._cond.wait()
            if self.error:
                return
            self._ops.append((batch, nbytes))
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
            if free:
                c = free.pop()
                self._pool_bytes -= c.nbytes
        if c is None:
            c = Copy(key)
        else:
            self.reused += 1
        c.tensor.copy_(v)
        return c

    def _give_back(self, batch):
        """The copies of a written batch go back to the pool."""
        with self._pool_lock:
            for op in batch:
                if op[0] == "tensor":
                    c = op[2]
                    if self._pool_bytes + c.nbytes <= POOL_BYTES:
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
                batch, nbytes = self._ops[0]
            try:
                if self._error is None:
                    self._do_batch(batch)
            except BaseException as e:  # kept for the training thread
                with self._cond:
                    self._error = e
            self._give_back(batch)
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

    def _do_batch(self, batch):
        """A batch's step operations go to C in one call; the collections
        file and the end marker are written in their place in the order."""
        calls = []
        for op in batch:
            kind = op[0]
            if kind == "tensor":
                _, name, c, wall, raw, reductions = op
                for red, abs_ in reductions:
                    calls.append(("tensor", reduction_name(name, red, abs_),
                                  as_array(reduce(c.tensor, red, abs_)), wall))
                if raw:
                    a = c.array if c.array is not None else as_array(c.tensor)
                    calls.append(("tensor", name, a, wall))
                    self.bytes_written += a.nbytes
            elif kind in ("begin", "end", "shape"):
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
