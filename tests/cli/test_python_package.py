#!/usr/bin/env python3
"""The Python package (python/, built by `make python`): smrules._core's
writer writes a trial that `smrules inspect` and `smrules tensor` read back
bit for bit (sha256 of the array's bytes) in every dtype the writer takes;
wrong input is refused with a clear exception and nothing half-written;
`make install-python` installs a package that imports from elsewhere."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import pylib  # noqa: E402

WRITE = r"""
import hashlib, json, sys
import numpy as np
import smrules._core as core
out = sys.argv[1]
arrays = {
    "f32": np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
    "f64": np.array([1.5, -0.0, np.inf, np.nan]),
    "f16": np.array([0.5, 6550, -2], dtype=np.float16),
    "i64": np.array([[-(2**62), 3]], dtype=np.int64),
    "i32": np.array([7, -7], dtype=np.int32),
    "u8": np.array([0, 255], dtype=np.uint8),
    "b": np.array([True, False, True]),
    "scalar": np.float32(2.25),
    "empty_dim": np.zeros((2, 0), dtype=np.float32),
    "fortran": np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)),
}
w = core.Writer(out, "worker_0")
sums = {}
for step, mode, mode_step in ((0, core.MODE_TRAIN, 0), (1, core.MODE_EVAL, 0), (2, core.MODE_TRAIN, 1)):
    w.step_begin(step, mode, mode_step)
    for name, a in arrays.items():
        if name == "fortran":
            a = np.ascontiguousarray(a)
        if a.dtype.kind == "f":
            a = np.asarray(a * (step + 1), dtype=a.dtype)
        w.tensor(name, a, 1000.0 + step)
        sums["%s@%d" % (name, step)] = hashlib.sha256(a.tobytes()).hexdigest()
    w.step_end()
w.collections(json.dumps({"collections": {"floats": {"include_regex": ["^f"],
    "tensor_names": ["f32", "f64"], "reduction_config": {"reductions": ""}}},
    "_meta": {"num_workers": 1}}))
w.close()
core.write_end_marker(out)
print(json.dumps(sums))
"""

ERRORS = r"""
import json, os, sys
import numpy as np
import smrules._core as core
out = sys.argv[1]
res = {}
def attempt(key, fn):
    try:
        fn()
        res[key] = "no error"
    except Exception as e:
        res[key] = "%s: %s" % (type(e).__name__, e)
w = core.Writer(out, "worker_0")
attempt("before_step", lambda: w.tensor("x", np.zeros(2, np.float32), 0.0))
w.step_begin(0, 1, 0)
attempt("big_endian", lambda: w.tensor("be", np.zeros(2, ">f4"), 0.0))
attempt("objects", lambda: w.tensor("obj", np.array([object()]), 0.0))
attempt("strided", lambda: w.tensor("st", np.zeros((4, 4), np.float32)[:, 1], 0.0))
attempt("bad_mode", lambda: w.step_begin(1, 9, 0))
attempt("bad_collections", lambda: w.collections("{not json"))
w.tensor("good", np.ones(3, np.float32), 0.0)
w.step_end()
w.close()
attempt("closed", lambda: w.step_begin(1, 1, 1))
attempt("worker", lambda: core.Writer(out, "../evil"))
blocker = os.path.join(out, "file")
open(blocker, "w").close()
attempt("not_a_dir", lambda: core.Writer(os.path.join(blocker, "t"), "worker_0"))
print(json.dumps(res))
"""


BATCH = r"""
import json, os, sys
import numpy as np
import smrules._core as core
out_calls, out_batch, out_err, out_queue, out_qerr, out_qsig = sys.argv[1:7]
arrays = {
    "f32": np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
    "f64": np.array([1.5, -0.0, np.inf, np.nan]),
    "i64": np.array([[-(2**62), 3]], dtype=np.int64),
    "b": np.array([True, False, True]),
    "scalar": np.float32(2.25),
    "big": np.arange(70000, dtype=np.float32),  # written from its memory
}
steps = ((0, core.MODE_TRAIN, 0), (1, core.MODE_EVAL, 0), (2, core.MODE_TRAIN, 1))
w = core.Writer(out_calls, "worker_0")
ops = []
for step, mode, mode_step in steps:
    w.step_begin(step, mode, mode_step)
    ops.append(("begin", step, mode, mode_step))
    for name, a in arrays.items():
        w.tensor(name, a, 1000.0 + step)
        ops.append(("tensor", name, a, 1000.0 + step))
    w.shape("shape_only", (3, 4))
    ops.append(("shape", "shape_only", (3, 4)))
    w.step_end()
    ops.append(("end",))
w.close()
b = core.Writer(out_batch, "worker_0")
b.batch(ops[:4])  # a batch may end in the middle of a step
b.batch(ops[4:])
b.close()
res = {}
def attempt(key, fn):
    try:
        fn()
        res[key] = "no error"
    except Exception as e:
        res[key] = "%s: %s" % (type(e).__name__, e)
e = core.Writer(out_err, "worker_0")
one = np.ones(2, np.float32)
attempt("malformed", lambda: e.batch([("begin", 0, 1, 0), ("tensor", "x", one, 0.0),
                                      ("tensor", "be", np.zeros(2, ">f4"), 0.0)]))
attempt("unknown", lambda: e.batch([("begin", 0, 1, 0), ("flush",)]))
attempt("not_a_tuple", lambda: e.batch(["begin"]))
attempt("bad_mode", lambda: e.batch([("begin", 0, 9, 0)]))
res["after_malformed"] = sorted(os.listdir(out_err))
attempt("failing", lambda: e.batch([("begin", 0, 1, 0), ("tensor", "kept", one, 0.0), ("end",),
                                    ("tensor", "orphan", one, 0.0), ("begin", 1, 1, 1),
                                    ("tensor", "never", one, 0.0), ("end",)]))
e.close()
# WriteQueue: the same operations written by its own thread, in three
# batches under a bound of 0 bytes (each waits for the one before), then
# the collections file and the end marker
from smrules.collection import pytorch_collections
q = core.WriteQueue(out_queue, "worker_0", 0)
cut = (0, 4, 9, len(ops))
tokens = []
for i in range(3):
    part = ops[cut[i]:cut[i + 1]]
    q.submit(part, sum(op[2].nbytes for op in part if op[0] == "tensor"), "batch%d" % i)
    tokens += q.reap()
res["collections_json"] = pytorch_collections().to_json(1)
q.submit([("collections", res["collections_json"]), ("end_marker",)], 0, "last")
tokens += q.close()
res["tokens"] = tokens
res["queue_event_writes"] = q.event_writes
res["peak"] = q.peak_bytes
res["batch_bytes"] = [sum(op[2].nbytes for op in ops[cut[i]:cut[i + 1]] if op[0] == "tensor")
                      for i in range(3)]
res["queue_error"] = repr(q.error)
attempt("queue_closed", lambda: q.submit([("end",)], 0, None))
qe = core.WriteQueue(out_qerr, "worker_0", 1 << 20)
attempt("queue_malformed", lambda: qe.submit([("begin", 0, 1, 0), ("flush",)], 0, None))
qe.submit([("begin", 0, 1, 0), ("tensor", "kept", one, 0.0), ("end",),
           ("tensor", "orphan", one, 0.0), ("begin", 1, 1, 1), ("tensor", "never", one, 0.0),
           ("end",)], 8, "failing")
qe.submit([("begin", 2, 1, 2), ("tensor", "after", one, 0.0), ("end",)], 8, "after")
res["queue_failed_tokens"] = qe.close()
res["queue_failure"] = "%s: %s" % (type(qe.error).__name__, qe.error)
# A step waiting for a full queue still runs a signal's handler (SIGTERM's):
# the thread is held by a FIFO where the first event file goes (opening it
# waits for a reader), the second batch waits (bound 0), and a signal whose
# handler raises, sent until it lands, ends that wait with the exception.
import signal, threading
class Interrupted(Exception):
    pass
waiting = []
def on_signal(signum, frame):
    if waiting:
        waiting.clear()
        raise Interrupted()
signal.signal(signal.SIGUSR1, on_signal)
os.makedirs(os.path.join(out_qsig, "events", "000000000000"))
fifo = os.path.join(out_qsig, "events", "000000000000", "000000000000_worker_0.tfevents.tmp")
os.mkfifo(fifo)
qs = core.WriteQueue(out_qsig, "worker_0", 0)
qs.submit([("begin", 0, 1, 0), ("tensor", "held", one, 0.0), ("end",)], 8, "held")
stop = threading.Event()
def poke():
    while not stop.is_set():
        os.kill(os.getpid(), signal.SIGUSR1)
        stop.wait(0.01)
poker = threading.Thread(target=poke)
poker.start()
try:
    waiting.append(1)
    qs.submit([("begin", 1, 1, 1), ("tensor", "waiting", one, 0.0), ("end",)], 8, "waiting")
    res["queue_signal"] = "not interrupted"
except Interrupted:
    res["queue_signal"] = "interrupted"
stop.set()
poker.join()
# drain() waits for what is queued: the thread is held by the FIFO, so a
# drain started now cannot end before the FIFO is read
entered, drained = threading.Event(), []
def drain():
    entered.set()
    qs.drain()
    drained.append(qs.queued_bytes)  # what was still queued when it returned
drainer = threading.Thread(target=drain)
drainer.start()
entered.wait()
res["drain_waits"] = drainer.is_alive()
fd = os.open(fifo, os.O_RDONLY)  # the thread goes on
while os.read(fd, 1 << 16):
    pass
os.close(fd)
drainer.join()
res["drained"] = drained
res["cpu_live"] = qs.cpu_seconds  # the thread's clock, read while it runs
res["queue_signal_tokens"] = qs.close()
res["cpu_closed"] = qs.cpu_seconds
# A forked child (a DataLoader worker) inherits the queue but not its
# thread: there the queue refuses work and is freed without waiting for
# a thread that does not exist.
qf = core.WriteQueue(out_qsig + "-fork", "worker_0", 1 << 20)
qf.submit([("begin", 0, 1, 0), ("tensor", "parent", one, 0.0), ("end",)], 8, "parent")
pid = os.fork()
if pid == 0:
    try:
        qf.submit([("end",)], 0, None)
        code = 1
    except ValueError as e:
        code = 0 if "belongs to the process" in str(e) else 2
    del qf  # freed here: waiting for the parent's thread would never end
    os._exit(code)
res["fork_child"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
res["fork_tokens"] = qf.close()
print(json.dumps(res))
"""


CONFIG = r"""
import json, sys
from smrules.config import SaveConfig, SaveConfigMode, ReductionConfig, read_hook_json
from smrules.modes import ModeKeys
out = {}
m = SaveConfigMode(save_interval=3, start_step=2, end_step=10, save_steps=[1])
out["steps"] = [s for s in range(13) if m.should_save_step(s)]
out["default"] = [s for s in range(1001) if SaveConfigMode().should_save_step(s)]
r = ReductionConfig.from_dict({"reductions": "min, abs_max,l1_norm,abs_l2_norm",
                               "save_raw_tensor": "true"})
out["red"] = [r.reductions, r.abs_reductions, r.norms, r.abs_norms, r.save_raw_tensor]
out["red_json"] = r.to_json_dict()
a = read_hook_json(sys.argv[1])
sc = a["save_config"]
out["modes"] = {m.name: sc.get_save_config(m).to_json_dict() for m in ModeKeys}
out["colls"] = [(n, p, {m.name: v for m, v in modes.items()}) for n, p, modes in a["collections"]]
out["include_collections"] = a["include_collections"]
out["out_dir"] = a["out_dir"]
print(json.dumps(out))
"""


def check_config(c, tmp):
    """SaveConfig, ReductionConfig and SageMaker's hook JSON, as smdebug
    reads them (smdebug/core/save_config.py, json_config.py)."""
    path = os.path.join(tmp, "hook.json")
    with open(path, "w") as f:
        json.dump({"LocalPath": "/tmp/x", "HookParameters": {
            "save_interval": "5", "save_steps": "1,2", "eval.save_interval": 1,
            "train.end_step": "50"},
            "CollectionConfigurations": [{"CollectionName": "w", "CollectionParameters": {
                "include_regex": "a.*,b", "train.save_interval": "7"}}]}, f)
    rc, so, se = pylib.run_py(CONFIG, [path])
    if not c.ok(rc == 0, "config script runs", se[-1500:]):
        return
    o = json.loads(so)
    sc = c.scope("config")
    sc.eq("SaveConfigMode(3, start 2, end 10, steps [1])", o["steps"], [1, 3, 6, 9])
    sc.eq("default: every 500th step", o["default"], [0, 500, 1000])
    sc.eq("ReductionConfig.from_dict", o["red"], [["min"], ["max"], ["l1"], ["l2"], True])
    sc.eq("ReductionConfig JSON", o["red_json"], {"save_raw_tensor": True, "save_shape": False,
                                                  "reductions": "min,l1_norm,abs_max,abs_l2_norm"})
    sc.eq("hook JSON: TRAIN", o["modes"]["TRAIN"],
          {"save_interval": 5, "save_steps": [1, 2], "start_step": 0, "end_step": 50})
    sc.eq("hook JSON: EVAL", o["modes"]["EVAL"],
          {"save_interval": 1, "save_steps": [1, 2], "start_step": 0, "end_step": None})
    sc.eq("hook JSON: collection's train interval over the hook's",
          o["colls"][0][2]["TRAIN"], {"save_interval": "7", "save_steps": [1, 2],
                                      "end_step": "50"})
    sc.eq("hook JSON: collections named", o["include_collections"], ["w"])
    sc.eq("hook JSON: LocalPath", o["out_dir"], "/tmp/x")


COPY = r"""
import json, numpy as np
from smrules import _core
res = {}
rng = np.random.default_rng(5)
src = rng.integers(0, 256, 3 << 20, dtype=np.uint8)
dst = np.zeros(3 << 20, np.uint8)
bad = []
# the plain copy and the one that bypasses the caches (128 KiB and up),
# each at every alignment of the source and of the destination and with
# every tail length
for n in (0, 1, 15, 63, 64, 4097, (128 << 10) - 1, 128 << 10, (128 << 10) + 77, 1 << 20):
    for so in (0, 1, 8, 15):
        for do in (0, 3, 16):
            dst[:] = 0
            _core.copy_into(dst[do:do + n], src[so:so + n])
            if not (np.array_equal(dst[do:do + n], src[so:so + n]) and not dst[:do].any()
                    and not dst[do + n:].any()):
                bad.append([n, so, do])
res["bad"] = bad
def err(fn):
    try:
        fn()
        return "no error"
    except Exception as e:
        return type(e).__name__
res["length"] = err(lambda: _core.copy_into(dst[:10], src[:11]))
res["strided"] = err(lambda: _core.copy_into(dst[:10], src[:20:2]))
res["readonly"] = err(lambda: _core.copy_into(bytes(10), src[:10]))
print(json.dumps(res))
"""


def check_copy_into(c):
    """_core.copy_into, the hook's copy of a tensor into its buffer: the
    bytes land exactly, nothing around them is touched, at every
    alignment, on both sides of the size where the stores bypass the
    caches; and what it cannot copy is refused."""
    rc, so, se = pylib.run_py(COPY, [])
    if not c.ok(rc == 0, "copy_into script runs", se[-2000:]):
        return
    res = json.loads(so)
    sc = c.scope("copy_into")
    sc.eq("copies that differ (size, source offset, destination offset)", res["bad"], [])
    sc.eq("lengths differ", res["length"], "ValueError")
    sc.eq("a strided source", res["strided"], "ValueError")
    sc.eq("a read-only destination", res["readonly"], "TypeError")


def main():
    c = lib.Checker("test_python_package")
    why = pylib.package_problem()
    if not c.ok(why is None, "package builds and imports", why or ""):
        c.finish()
    tmp = tempfile.mkdtemp(prefix="smr-pypkg-")
    try:
        check_dtypes(c, os.path.join(tmp, "dtypes"))
        check_errors(c, os.path.join(tmp, "errors"))
        check_batch(c, tmp)
        check_copy_into(c)
        check_install(c, os.path.join(tmp, "site"))
        check_config(c, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


def check_dtypes(c, out):
    rc, so, se = pylib.run_py(WRITE, [out])
    if not c.ok(rc == 0, "write trial with _core.Writer", se[-2000:]):
        return
    sums = json.loads(so)
    sc = c.scope("dtypes")
    r = pylib.inspect(out)
    sc.ok(r.rc == 0 and r.obj, "inspect", r.err)
    o = r.obj or {}
    sc.eq("steps", o.get("steps"), [0, 1, 2])
    sc.eq("mode steps", o.get("step_modes"), {"0": ["TRAIN", 0], "1": ["EVAL", 0], "2": ["TRAIN", 1]})
    sc.eq("training ended", o.get("training_ended"), True)
    sc.eq("collection names", sorted((o.get("collections") or {}).keys()), ["floats"])
    names = sorted(t["name"] for t in o.get("tensors", []))
    want = sorted({k.split("@")[0] for k in sums} - {"empty_dim"})
    # an array with no elements is stored as smdebug stores it: shape only
    sc.ok(set(want) <= set(names), "tensor names", "got %s" % names)
    dtypes = {"f32": "float32", "f64": "float64", "f16": "float16", "i64": "int64",
              "i32": "int32", "u8": "uint8", "b": "bool", "scalar": "float32",
              "fortran": "float32"}
    for key, digest in sorted(sums.items()):
        name, step = key.split("@")
        if name == "empty_dim":
            continue
        t = pylib.tensor(out, name, int(step))
        ts = c.scope("dtypes %s step %s" % (name, step), t)
        if not ts.ok(t.rc == 0 and t.obj, "read back"):
            continue
        ts.eq("sha256 of the bytes", t.obj.get("sha256"), digest)
        ts.eq("dtype", t.obj.get("dtype"), dtypes[name])
        ts.eq("shape", t.obj.get("shape"), [] if name == "scalar" else
              {"f32": [3, 4], "f64": [4], "f16": [3], "i64": [1, 2], "i32": [2], "u8": [2],
               "b": [3], "fortran": [2, 3]}[name])


def check_errors(c, out):
    rc, so, se = pylib.run_py(ERRORS, [out])
    if not c.ok(rc == 0, "error script runs", se[-2000:]):
        return
    res = json.loads(so)
    want = {
        "before_step": ("RuntimeError", "ValueError"),
        "big_endian": ("TypeError",),
        "objects": ("ValueError", "TypeError"),
        "strided": ("BufferError", "ValueError", "TypeError"),
        "bad_mode": ("ValueError",),
        "bad_collections": ("RuntimeError", "ValueError"),
        "closed": ("ValueError",),
        "worker": ("ValueError",),
        "not_a_dir": ("OSError", "NotADirectoryError", "FileNotFoundError"),
    }
    for key, types in want.items():
        got = res.get(key, "missing")
        c.ok(got.split(":")[0] in types, "error %s raises %s" % (key, "/".join(types)), got)
    c.ok("big_endian" in res and "little-endian" in res["big_endian"], "big-endian message says why",
         res.get("big_endian", ""))
    r = pylib.inspect(out)
    sc = c.scope("after errors", r)
    sc.eq("the good step is intact", [t["name"] for t in (r.obj or {}).get("tensors", [])], ["good"])
    sc.eq("no stray files", sorted(os.listdir(out)), ["events", "file", "index"])
    sc.ok(not os.path.exists(os.path.join(out, "..", "evil")), "no folder outside the trial")


def tree_bytes(root):
    """{relative path: bytes} of every file under root."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = fh.read()
    return out


def check_batch(c, tmp):
    """Writer.batch (the hook's writer thread writes a step with one call):
    the same files, byte for byte, as one call per operation; an operation
    it cannot take is refused before anything of the batch is written; a
    failure while writing keeps what came before it."""
    calls, batch, err, queue, qerr, qsig = (os.path.join(tmp, d) for d in (
        "b_calls", "b_batch", "b_err", "b_queue", "b_qerr", "b_qsig"))
    rc, so, se = pylib.run_py(BATCH, [calls, batch, err, queue, qerr, qsig])
    if not c.ok(rc == 0, "batch script runs", se[-2000:]):
        return
    res = json.loads(so)
    sc = c.scope("batch")
    a, b = tree_bytes(calls), tree_bytes(batch)
    sc.eq("file names", sorted(b), sorted(a))
    sc.ok(len(a) == 6 and all(a[k] == b.get(k) for k in a), "files byte-identical to per-call writes",
          "differ: %s" % [k for k in a if a[k] != b.get(k)])
    want = {"malformed": "TypeError", "unknown": "ValueError", "not_a_tuple": "TypeError",
            "bad_mode": "ValueError", "failing": "ValueError"}
    for key, typ in want.items():
        sc.eq("%s raises %s" % (key, typ), res.get(key, "missing").split(":")[0], typ)
    sc.ok("little-endian" in res.get("malformed", ""), "malformed: the message says why",
          res.get("malformed", ""))
    sc.eq("a refused batch writes nothing", res.get("after_malformed"), [])
    r = pylib.inspect(err)
    sc.eq("a failing batch keeps the steps before the failure", (r.obj or {}).get("steps"), [0])
    sc.eq("... with their tensors", [t["name"] for t in (r.obj or {}).get("tensors", [])],
          ["kept"])
    check_write_queue(c, res, a, queue, qerr)


def check_write_queue(c, res, per_call, queue, qerr):
    """WriteQueue (the hook's writer thread, in C, without the GIL): the
    same files, byte for byte, as one call per operation; its batches come
    back to the caller in order once written; the bound holds; a failure
    stops the writing and is kept, the steps before it stay."""
    sc = c.scope("write_queue")
    q = tree_bytes(queue)
    steps = {k: v for k, v in q.items() if k.startswith(("events", "index"))}
    sc.ok(len(per_call) == 6 and steps == per_call, "step files byte-identical to per-call writes",
          "names %s; differ: %s" % (sorted(q), [k for k in per_call if per_call[k] != q.get(k)]))
    sc.eq("collections file as given",
          q.get("collections/000000000/worker_0_collections.json", b"").decode(),
          res.get("collections_json"))
    sc.ok(q.get("training_job_end.ts") == b"", "end marker", "files: %s" % sorted(q))
    # each step's records (its 280 KB array among small ones, a step cut
    # across two batches) reach the event file in one writev, not one per
    # large array and one for the rest
    sc.eq("one write per step's event file", res.get("queue_event_writes"), 3)
    sc.eq("written batches handed back, in order", res.get("tokens"),
          ["batch0", "batch1", "batch2", "last"])
    sc.eq("bound 0: one batch queued at a time (peak = the largest)", res.get("peak"),
          max(res.get("batch_bytes") or [-1]))
    sc.eq("no error", res.get("queue_error"), "None")
    sc.eq("closed: refused", res.get("queue_closed", "").split(":")[0], "ValueError")
    sc.eq("malformed: refused", res.get("queue_malformed", "").split(":")[0], "ValueError")
    sc.eq("failing batches handed back too", res.get("queue_failed_tokens"), ["failing", "after"])
    sc.ok(res.get("queue_failure", "").startswith("ValueError: ") and "outside a step" in
          res.get("queue_failure", ""), "the failure is kept", res.get("queue_failure", ""))
    r = pylib.inspect(qerr)
    sc.eq("a failure keeps the steps before it, writes none after", (r.obj or {}).get("steps"), [0])
    sc.eq("a step waiting for a full queue runs a signal's handler", res.get("queue_signal"),
          "interrupted")
    sc.eq("... the batch it interrupted is not queued", res.get("queue_signal_tokens"), ["held"])
    sc.ok(res.get("drain_waits") is True, "drain() waits while the thread is held", res)
    sc.eq("... and returns once all queued is written", res.get("drained"), [0])
    live, closed = res.get("cpu_live", 0), res.get("cpu_closed", 0)
    sc.ok(live > 0 and closed >= live, "cpu_seconds counts while the thread runs, kept when closed",
          "%r then %r" % (live, closed))
    sc.eq("a forked child: the queue refuses work, is freed without its thread",
          res.get("fork_child"), 0)
    sc.eq("... the parent's queue writes on", res.get("fork_tokens"), ["parent"])


def check_install(c, dest):
    """make install-python PY_DEST=...: the package is copied there and
    imports from another folder with only that folder on the path."""
    p = subprocess.run(["make", "--no-print-directory", "-s", "install-python", "PY_DEST=" + dest],
                       cwd=lib.ROOT, capture_output=True, text=True, timeout=lib.TIMEOUT * 3)
    c.ok(p.returncode == 0 and "import smrules: ok" in p.stdout and
         os.path.isfile(os.path.join(dest, "smrules", "__init__.py")),
         "install-python copies the package and checks the import", p.stdout[-500:] + p.stderr[-1000:])
    rc, so, se = pylib.run_py("import smrules, smrules._core, os; print(os.path.dirname(smrules.__file__))",
                              extra_env={"PYTHONPATH": dest}, cwd="/")
    c.ok(rc == 0 and so.strip() == os.path.join(dest, "smrules"), "installed package imports from /",
         so + se[-1000:])


if __name__ == "__main__":
    main()
