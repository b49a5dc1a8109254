#!/usr/bin/env python3
"""smrules.trials, smdebug's trial API over the C reader (docs/python.md):
every fixture's EXPECT.json, read through the Python API — names, steps per
mode, modes and mode steps, workers, collections, has_passed_step, values
(sha256 of the bytes, dtype, shape), saved reductions, shapes, values by
mode step — plus the bulk read, smdebug's exceptions where smdebug raises
them, the ValueError cases, damaged trials (tests/fixtures/corrupt) failing
per value with the file named while the rest reads, and nothing written
into the trial folder.

The checks run in /usr/bin/python3 (numpy) in a subprocess that prints one
JSON list of [ok, what, detail]; this script tallies them."""

import json
import os
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import pylib  # noqa: E402

CHECK = r"""
import hashlib, json, math, os, sys
import numpy as np
from smrules.trials import create_trial, StepState
from smrules.modes import ModeKeys
from smrules import exceptions as X

res = []
def ok(cond, what, detail=""):
    res.append([bool(cond), what, "" if cond else str(detail)[:300]])

def num(v):
    if isinstance(v, str):
        return float(v) if v in ("nan", "inf", "-inf") else int(v)
    return v

def close(a, b):
    a, b = num(a), num(b)
    if a is None or b is None:
        return a is b
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b or abs(a - b) <= 1e-6 * max(abs(a), abs(b)) + 1e-12

def digest(a):
    if a.dtype == object or a.dtype.kind in "US":
        return hashlib.sha256(b"".join(str(s).encode() + b"\0" for s in a.reshape(-1))).hexdigest()
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()

def raises(cls, fn, what):
    try:
        fn()
    except cls:
        ok(True, what)
        return
    except Exception as e:
        ok(False, what, "raised %s: %s" % (type(e).__name__, e))
        return
    ok(False, what, "raised nothing")

def check_value(t, e, where):
    step = e.get("global_step", e.get("step"))
    mode = ModeKeys[e["mode"]]
    tensor = t.tensor(e["name"])
    if "reduction" in e:
        if e.get("smdebug_value", "same") != "same":
            return
        got = tensor.reduction_value(step, e["reduction"], worker=e["worker"], abs=e["abs"])
        ok(close(got, e["values"][0]), where + " reduction", (got, e["values"][0]))
        saved = tensor.reduction_values(step, worker=e["worker"])
        key = (e["reduction"], e["abs"])
        ok(key in saved and close(saved[key], e["values"][0]), where + " reduction_values", saved)
        return
    if e.get("kind") == "shape":
        got = tensor.shape(step, worker=e["worker"])
        ok(list(got) == e["shape"], where + " shape", (got, e["shape"]))
        return
    sv = e.get("smdebug_value", "same")
    if isinstance(sv, dict) and "sha256" in e:
        sv = "same"  # smdebug refused a value that is saved: smrules returns it (docs/python.md)
    if isinstance(sv, dict) and where.startswith("invoker_missing_event_file"):
        # the index names an event file that is gone: an OSError naming it
        # (smdebug: TensorUnavailableForStep; docs/python.md)
        raises(OSError, lambda: tensor.value(step, worker=e["worker"]), where + " raises OSError")
        return
    if isinstance(sv, dict) and sv.get("error") in ("TensorUnavailableForStep", "TensorUnavailable",
                                                   "StepUnavailable"):
        raises(getattr(X, sv["error"]), lambda: tensor.value(step, worker=e["worker"]),
               where + " raises " + sv["error"])
        return
    if sv not in ("same", None) or "sha256" not in e:
        return
    v = tensor.value(step, worker=e["worker"])
    ok(not v.flags.writeable, where + " read-only")
    ok(list(v.shape) == e["shape"], where + " shape", (v.shape, e["shape"]))
    if e.get("dtype") not in (None, "str", "string", "object"):
        ok(str(v.dtype) == e["dtype"], where + " dtype", (v.dtype, e["dtype"]))
    ok(digest(v) == e["sha256"], where + " sha256")
    if e.get("value_by_mode_step") == "same":
        v2 = tensor.value(e["mode_step"], mode=mode, worker=e["worker"])
        ok(digest(v2) == e["sha256"], where + " by mode_step")

def check_real(path, d):
    s = d["summary"]
    t = create_trial(path)
    ok(t.workers() == s["workers"], "workers", t.workers())
    # summary.modes lists the modes in the index files; smdebug's modes()
    # leaves GLOBAL out (trial_api.modes of the synthetic cases)
    ok(sorted(m.name for m in t.modes()) == sorted(m for m in s["modes"] if m != "GLOBAL"), "modes", t.modes())
    ok(t.steps() == s["global_steps"], "steps", t.steps())
    for m, steps in s["mode_steps"].items():
        ok(t.steps(m) == steps, "steps(%s)" % m, t.steps(m))
    for e in s["steps"]:
        g = e["global_step"]
        ok(t.mode(g).name == e["mode"] and t.mode_step(g) == e["mode_step"], "mode of %d" % g)
        ok(t.global_step(e["mode"], e["mode_step"]) == g, "global_step of %d" % g)
    ok(sorted(t.tensor_names()) == sorted(s["tensors"]), "tensor_names")
    for n, steps in s["tensors"].items():
        ok(t.tensor(n).steps() == steps, "steps of " + n, t.tensor(n).steps())
    colls = t.collections()
    ok(sorted(colls) == sorted(s["collections"]), "collections", sorted(colls))
    for n, c in s["collections"].items():
        got = t.collection(n)
        ok(got.name == n and got.include_regex == c["include_regex"], "collection %s regex" % n, got.include_regex)
        ok(got.tensor_names == set(c["members"]), "collection %s members" % n, sorted(got.tensor_names))
        ok(t.tensor_names(collection=n) == sorted(c["members"]), "tensor_names(collection=%s)" % n)
    for e in d["tensors"]:
        check_value(t, e, "%s@%s" % (e["name"], e["global_step"]))

def check_synthetic(path, d):
    a = d.get("trial_api")
    case = path.rsplit("/", 1)[-1]
    t = create_trial(os.path.join(path, d.get("trial_dir") or "."))
    if a:
        for k in ("workers", "num_workers", "loaded_all_steps", "last_complete_step"):
            got = getattr(t, k)
            got = got() if callable(got) else got
            ok(got == a[k], k, (got, a[k]))
        ok(t.steps() == a["steps"], "steps", t.steps())
        ok(t.steps(show_incomplete_steps=True) == a["steps_show_incomplete"], "steps incomplete")
        for m, steps in a["steps_by_mode"].items():
            ok(t.steps(m) == steps, "steps(%s)" % m, t.steps(m))
        ok(sorted(m.name for m in t.modes()) == sorted(a["modes"]), "modes", t.modes())
        for g, (m, ms) in a["mode_and_mode_step_of_global_step"].items():
            ok((t.mode(int(g)).name, t.mode_step(int(g))) == (m, ms), "mode of " + g)
        for m, by in a["global_step_of_mode_step"].items():
            for ms, g in by.items():
                ok(t.global_step(m, int(ms)) == g, "global_step(%s, %s)" % (m, ms))
        ok(t.tensor_names() == a["tensor_names"], "tensor_names", t.tensor_names())
        for m, names in a["tensor_names_by_mode"].items():
            want = [] if isinstance(names, dict) else names  # smdebug: KeyError for a mode without steps
            ok(t.tensor_names(mode=m) == want, "tensor_names(mode=%s)" % m, t.tensor_names(mode=m))
        for g, names in a["tensor_names_by_step"].items():
            if isinstance(names, list):
                ok(t.tensor_names(step=int(g)) == names, "tensor_names(step=%s)" % g, t.tensor_names(step=int(g)))
        for n, c in a["collections"].items():
            got = t.collection(n)
            ok(got.include_regex == c["include_regex"], "collection %s regex" % n, got.include_regex)
        for n, names in a["tensor_names_by_collection"].items():
            if isinstance(names, list):
                ok(t.tensor_names(collection=n) == names, "tensor_names(collection=%s)" % n)
        for m, by in a["has_passed_step"].items():
            for s, state in by.items():
                got = t.has_passed_step(int(s), m)
                ok(got.name == state, "has_passed_step(%s, %s)" % (s, m), got)
        for n, e in a["tensors"].items():
            tn = t.tensor(n)
            ok(tn.steps() == e["steps"], "steps of " + n, tn.steps())
            ok(tn.steps(show_incomplete_steps=True) == e["steps_show_incomplete"], "incomplete steps of " + n)
            for m, steps in e["steps_by_mode"].items():
                ok(tn.steps(m) == steps, "steps(%s) of %s" % (m, n), tn.steps(m))
            for s, ws in e["workers_by_step"].items():
                ok(tn.workers(int(s)) == ws, "workers of %s@%s" % (n, s), tn.workers(int(s)))
    for e in d.get("tensors", []):
        check_value(t, e, "%s: %s@%s/%s" % (case, e["name"], e["step"], e["worker"]))

for path in sys.argv[1:]:
    d = json.load(open(path + "/EXPECT.json"))
    n0 = len(res)
    try:
        (check_synthetic if "trial_api" in d or "case" in d else check_real)(path, d)
    except Exception as e:
        import traceback
        ok(False, "exception", traceback.format_exc())
    for r in res[n0:]:
        r[1] = path.rsplit("/", 1)[-1] + ": " + r[1]
    res.append([len(res) - n0 > 0, path.rsplit("/", 1)[-1] + ": checked something", ""])
print(json.dumps(res))
"""

# The API's own cases on one real trial: bulk read, exceptions, ValueError.
API = r"""
import json, sys, threading
import numpy as np
from smrules.trials import create_trial
from smrules.modes import ModeKeys
from smrules import exceptions as X
path, partial = sys.argv[1], sys.argv[2]
res = []
def ok(c, what, d=""):
    res.append([bool(c), what, "" if c else str(d)[:300]])
def raises(cls, fn, what):
    try:
        fn()
    except cls:
        return ok(True, what)
    except Exception as e:
        return ok(False, what, "%s: %s" % (type(e).__name__, e))
    ok(False, what, "raised nothing")
t = create_trial(path)
loss = "CrossEntropyLoss_output_0"
steps = t.steps()
# bulk read == one value at a time, and skips steps that are not there
bulk = t.get_tensors({loss: steps + [steps[-1] + 1], "DigitsMLP_out.bias": steps[:3]})
ok(sorted(bulk[loss]) == steps, "bulk steps", sorted(bulk[loss]))
ok(all(np.array_equal(bulk[loss][s], t.tensor(loss).value(s)) for s in steps), "bulk values")
ok(all(not a.flags.writeable for a in bulk[loss].values()), "bulk read-only")
ok(sorted(t.tensor(loss).values()) == steps, "Tensor.values")
raises(X.TensorUnavailable, lambda: t.get_tensors({"nope": [0]}), "bulk unknown tensor")
# the stream: the same values as the bulk read, step by step
want = [(s, n) for s in sorted(set(steps) | set(steps[:3]))
        for n in (loss, "DigitsMLP_out.bias") if s in bulk[n]]
got = list(t.iter_tensors({loss: steps + [steps[-1] + 1], "DigitsMLP_out.bias": steps[:3]}))
ok([(s, n) for s, n, _ in got] == want, "stream order: steps ascending, names as given",
   [(s, n) for s, n, _ in got][:6])
ok(all(np.array_equal(a, bulk[n][s]) for s, n, a in got), "stream values == bulk values")
raises(X.TensorUnavailable, lambda: list(t.iter_tensors({"nope": [0]})), "stream unknown tensor")
# the bulk reduction: the same bits as reduction_value, steps not there left out
for red, a in (("mean", True), ("l2", False), ("max", False)):
    br = t.get_reductions({loss: steps + [steps[-1] + 1], "DigitsMLP_out.bias": steps[:3]},
                          red, abs=a)
    ok(sorted(br[loss]) == steps, "bulk reduction steps (%s)" % red, sorted(br[loss]))
    one = {s: t.tensor(loss).reduction_value(s, red, abs=a) for s in steps}
    ok(all(br[loss][s] == one[s] or (math.isnan(one[s]) and math.isnan(br[loss][s]))
           for s in steps), "bulk reduction == reduction_value (%s)" % red)
raises(ValueError, lambda: t.get_reductions({loss: steps}, "median"), "bulk reduction unknown")
raises(X.TensorUnavailable, lambda: t.get_reductions({"nope": [0]}, "mean"), "bulk reduction tensor")
# _core's item lists: a list of (name, step, mode, worker) tuples, else TypeError
for bad in (5, [(loss, 0)], [(loss, steps[0], 0), (loss, "x", 0)]):
    raises(TypeError, lambda: t._t.read_many(bad), "read_many(%r)" % (bad,))
    raises(TypeError, lambda: t._t.reductions(bad, "mean", False), "reductions(%r)" % (bad,))
# the bulk read runs with the GIL released: another thread runs meanwhile
names = t.tensor_names()
out = {}
th = threading.Thread(target=lambda: out.update(t.get_tensors({n: steps for n in names})))
th.start(); th.join()
ok(sum(len(v) for v in out.values()) > len(steps), "bulk from a thread")
# exceptions where smdebug raises them
raises(X.TensorUnavailable, lambda: t.tensor("nope"), "tensor(unknown)")
ok(t.has_tensor(loss) and not t.has_tensor("nope"), "has_tensor")
raises(X.StepUnavailable, lambda: t.tensor(loss).value(steps[0] + 1), "value at unsaved step")
raises(X.StepUnavailable, lambda: t.tensor(loss).value(steps[-1] + 100), "value after the end")
raises(X.TensorUnavailableForStep, lambda: t.tensor("gradient/DigitsMLP_out.bias").value(t.global_step("EVAL", 0)),
       "gradient at an EVAL step")
raises(X.InvalidWorker, lambda: t.tensor(loss).value(steps[0], worker="worker_9"), "unknown worker")
raises(ValueError, lambda: t.tensor_names(regex="bias", collection="biases"), "regex and collection")
ok(t.tensor_names(regex="no_such_thing") == [], "no match -> []")
ok(t.tensor_names(regex=["out\\.bias$", "^Cross"]) == ["CrossEntropyLoss_output_0", "DigitsMLP_out.bias",
   "gradient/DigitsMLP_out.bias"], "regex list", t.tensor_names(regex=["out\\.bias$", "^Cross"]))
raises(ValueError, lambda: t.steps(mode="TRAINING"), "bad mode")
raises(ValueError, lambda: t.tensor(loss).reduction_value(steps[0], "median"), "bad reduction")
raises(KeyError, lambda: t.collection("nope"), "unknown collection")
raises(X.StepUnavailable, lambda: t.mode(steps[0] + 1), "mode of unknown step")
raises(X.StepUnavailable, lambda: t.global_step("EVAL", 1000), "global_step unknown")
ok(t.global_step(ModeKeys.GLOBAL, 5) == 5, "global_step of GLOBAL")
# reductions: computed == NumPy on the value, abs too
w = "DigitsMLP_out.weight"
v = t.tensor(w).value(8).astype(np.float64)
for name, want in (("mean", v.mean()), ("l2", np.sqrt((v * v).sum())), ("max", v.max()), ("variance", v.var())):
    got = t.tensor(w).reduction_value(8, name)
    ok(abs(got - want) <= 1e-9 * max(1, abs(want)), "reduction " + name, (got, want))
got = t.tensor(w).reduction_value(8, "mean", abs=True)
ok(abs(got - np.abs(v).mean()) <= 1e-9, "abs mean", got)
ok(t.tensor(w).shape(8) == v.shape, "shape")
ok(t.tensor(loss).value(0, mode="TRAIN").shape == (), "value by mode step")
ok(t.tensor(loss).prev_steps(steps[3], 2) == steps[1:3], "prev_steps")
ok(t.tensor(loss).prev_steps(3, 2, mode="EVAL") == [0], "prev_steps(mode=EVAL)")
ok(t.tensor(loss).reduction_values(steps[0]) == {}, "reduction_values: none saved")
# range_steps
r = create_trial(path, range_steps=(8, 27))
ok(r.steps() == [s for s in steps if 8 <= s < 27], "range_steps", r.steps())
raises(X.StepUnavailable, lambda: r.tensor(loss).value(0), "value outside range_steps")
raises(ValueError, lambda: create_trial(path, range_steps=(5, 2)), "bad range_steps")
raises(OSError, lambda: create_trial(path + "/no/such/folder"), "missing folder")
c = create_trial(path)
c.close()
raises(ValueError, lambda: c.steps(), "closed trial")
with create_trial(path) as w2:
    ok(w2.steps() == steps, "with-block")
# wait_for_steps: returns for a step there; a step to come is waited for
# until the end marker appears (written after the waiting thread started),
# then NoMoreData, as smdebug's wait_for_steps (a step after the last one of
# an ended trial; before it: StepUnavailable) - the end of an unbounded
# invoke_rule
live = partial + "_wait"
import shutil
shutil.copytree(partial, live)
wt = create_trial(live)
wt.wait_for_steps([0, 1])
ok(True, "wait_for_steps: steps there")
got = []
def waiter():
    try:
        wt.wait_for_steps([50], poll_interval=0.05)
        got.append("returned")
    except X.NoMoreData:
        got.append("NoMoreData")
    except X.StepUnavailable:
        got.append("StepUnavailable")
    except Exception as e:
        got.append(repr(e))
th = threading.Thread(target=waiter)
th.start()
open(live + "/training_job_end.ts", "w").close()
th.join(120)  # hang guard only
ok(got == ["NoMoreData"], "wait_for_steps: NoMoreData past the end", got)
raises(X.StepUnavailable, lambda: create_trial(live).wait_for_steps([3]), "wait_for_steps: step passed")
# a live trial: refresh_data sees the end marker written after the open
p = create_trial(partial)
raises(X.StepNotYetAvailable, lambda: p.tensor("w").value(100), "value of a step to come")
before = (p.loaded_all_steps, p.has_passed_step(p.steps(show_incomplete_steps=True)[-1] + 5).name)
open(partial + "/training_job_end.ts", "w").close()
p.refresh_data()
after = (p.loaded_all_steps, p.has_passed_step(p.steps(show_incomplete_steps=True)[-1] + 5).name)
ok(before == (False, "NOT_YET_AVAILABLE") and after == (True, "UNAVAILABLE"), "refresh_data", (before, after))
raises(X.StepUnavailable, lambda: p.tensor("w").value(100), "value after the end marker")
print(json.dumps(res))
"""


# Damaged trials (tests/fixtures/corrupt): every value reads or fails with
# OSError / RuntimeError naming the file; the rest still reads.
CORRUPT = r"""
import json, os, sys
from smrules.trials import create_trial
res = []
def ok(c, what, d=""):
    res.append([bool(c), what, "" if c else str(d)[:300]])
errors = 0
for path in sys.argv[1:]:
    case = os.path.basename(path)
    t = create_trial(path)
    good = 0
    for n in t.tensor_names():
        for s in t.tensor(n).steps(show_incomplete_steps=True):
            try:
                t.tensor(n).value(s)
                good += 1
            except (OSError, RuntimeError) as e:
                errors += 1
                ok("events/" in str(e) or "index/" in str(e),
                   "%s: %s@%s error names the file" % (case, n, s), e)
            except Exception as e:
                ok(False, "%s: %s@%s" % (case, n, s), "%s: %s" % (type(e).__name__, e))
    ok(good > 0 or not t.tensor_names(), case + ": the rest still reads", good)
ok(errors >= 5, "damaged values raise", errors)
print(json.dumps(res))
"""


# Values lent, not copied (python/src/trial_type.c, "values"): a large
# value's array lies over the buffer the library read its record into.
# Checked bit for bit against what was written, on a trial written live by
# the package's own writer while arrays of it are alive: arrays outliving
# their Trial (closed, deleted, collected), arrays released by another
# thread, more arrays alive at once than the library lends (the rest are
# copies, the same bits), and every lent buffer given back at the end.
LENT = r"""
import gc, json, sys, threading
import numpy as np
from smrules import _core
from smrules.trials import create_trial
path = sys.argv[1]
res = []
def ok(c, what, d=""):
    res.append([bool(c), what, "" if c else str(d)[:300]])
def same(a, b):  # the same bits, NaNs and all
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
def owner(a):  # what holds an array's bytes
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a
def lent(a):
    return type(owner(a)).__name__ == "Value"
rng = np.random.default_rng(28)
want = {}  # (name, step) -> what was written
def write(w, steps):
    for s in steps:
        w.step_begin(s, _core.MODE_TRAIN, s)
        for name, a in (("big", rng.standard_normal((512, 600)).astype(np.float32)),
                        ("f64", rng.standard_normal(9000)),
                        ("i64", rng.integers(-2**62, 2**62, size=(3, 4000))),
                        ("small", rng.standard_normal(7).astype(np.float32))):
            if name == "big":
                a[0, :3] = (np.nan, np.inf, -0.0)
            w.tensor(name, a, 0.0)
            want[(name, s)] = a
        w.step_end()
w = _core.Writer(path, "worker_0")
write(w, range(0, 4))
t = create_trial(path)
held = {(n, s): t.tensor(n).value(s) for (n, s) in list(want)}
ok(all(same(held[k], want[k]) for k in held), "lent values: the bits written",
   [k for k in held if not same(held[k], want[k])])
ok(all(lent(held[(n, 0)]) for n in ("big", "f64", "i64")), "values >= LEND_MIN are lent",
   [type(owner(held[(n, 0)])) for n in ("big", "f64", "i64")])
ok(not lent(held[("small", 0)]), "a small value is copied", type(owner(held[("small", 0)])))
ok(all(not a.flags.writeable for a in held.values()), "read-only")
try:
    held[("big", 0)].flags.writeable = True
    ok(False, "a lent array cannot be made writable", "it could")
except ValueError:
    ok(True, "a lent array cannot be made writable")
bulk = t.get_tensors({"big": [0, 1, 2, 3]})
ok(all(same(bulk["big"][s], want[("big", s)]) and lent(bulk["big"][s]) for s in range(4)),
   "bulk read: lent, the bits written")
# the trial goes on being written while its arrays are alive
write(w, range(4, 8))
t.refresh_data()
held.update({(n, s): t.tensor(n).value(s) for (n, s) in list(want) if s >= 4})
ok(all(same(held[k], want[k]) for k in held), "values of a trial written live, old and new",
   [k for k in held if not same(held[k], want[k])])
# arrays outlive their Trial: closed, deleted, collected
t.close()
del t, bulk
gc.collect()
filler = [np.ones(300000, np.float32) for _ in range(8)]  # reuse freed memory
ok(all(same(held[k], want[k]) for k in held), "arrays outlive their Trial",
   [k for k in held if not same(held[k], want[k])])
# released by another thread than the one that read them
th = threading.Thread(target=lambda: held.clear())
th.start(); th.join()
ok(_core.Trial.lent_count() == 0, "every lent buffer given back", _core.Trial.lent_count())
# more arrays alive at once than are lent: the rest are copies, same bits
w.close()
_core.write_end_marker(path)
t = create_trial(path)
n = _core.LEND_MAX + 40
many = [t.tensor("f64").value(s % 8) for s in range(n)]
nlent = sum(lent(a) for a in many)
ok(nlent == _core.LEND_MAX, "at most LEND_MAX values lent at once", nlent)
ok(all(same(a, want[("f64", s % 8)]) for s, a in enumerate(many)), "lent and copied: the same bits")
del many
ok(_core.Trial.lent_count() == 0, "every lent buffer given back (many)", _core.Trial.lent_count())
stream = [v for _, _, v in t.iter_tensors({"big": list(range(8))})]
ok(all(same(v, want[("big", s)]) and lent(v) for s, v in enumerate(stream)), "stream: lent, the bits written")
print(json.dumps(res))
"""


# Reading ahead (python/src/read_ahead.c; SMRULES_READ_AHEAD=1, else when a
# core is idle): value() in a loop reads the value
# it expects next on the read-ahead thread (tensor by tensor, step by step,
# by mode step), iter_tensors reads ahead of the caller; either way the
# bits are the ones written, a walk in no order wastes few reads,
# Trial(read_ahead=False) reads none ahead, a stream dropped half way or a
# trial closed under one gives every buffer back, and a forked child reads
# ahead too (the thread does not survive a fork: it is started again).
READ_AHEAD = r"""
import gc, json, os, sys, time
os.environ["SMRULES_READ_AHEAD"] = "1"  # on, whatever the machine's load
import numpy as np
from smrules import _core
from smrules.modes import ModeKeys
from smrules.trials import create_trial
path = sys.argv[1]
res = []
def ok(c, what, d=""):
    res.append([bool(c), what, "" if c else str(d)[:300]])
def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
rng = np.random.default_rng(29)
want = {}
names = ["g%d" % i for i in range(5)]
w = _core.Writer(path, "worker_0")
for s in range(0, 40, 2):  # global steps 0, 2, ... 38; TRAIN steps 0 .. 19
    w.step_begin(s, _core.MODE_TRAIN, s // 2)
    for i, n in enumerate(names):
        a = rng.standard_normal(20000 + 7 * i + s).astype(np.float32)  # 80 KB: lent
        w.tensor(n, a, 0.0)
        want[(n, s)] = a
    w.step_end()
w.close()
_core.write_end_marker(path)
steps = create_trial(path).steps()
ok(len(steps) == 20, "20 steps", steps)
def walk(order, mode=ModeKeys.GLOBAL, **kw):
    t = create_trial(path)
    if kw:
        t._t = _core.Trial(path, **kw)
    got = {}
    for n, s in order:
        got[(n, s)] = t.tensor(n).value(s if mode is ModeKeys.GLOBAL else s // 2, mode=mode)
    bad = [k for k in order if not same(got[k], want[k])]
    return bad, t._t.read_stats()
n_all = len(names) * len(steps)
bad, st = walk([(n, s) for n in names for s in steps])
ok(not bad, "tensor by tensor: the bits written", bad)
ok(st["prefetched"] >= n_all - 3 * len(names), "tensor by tensor: read ahead", st)
bad, st = walk([(n, s) for s in steps for n in names])
ok(not bad, "step by step: the bits written", bad)
ok(st["prefetched"] >= n_all - 2 * len(names) - 1, "step by step: read ahead", st)
bad, st = walk([(n, s) for n in names for s in steps], ModeKeys.TRAIN)
ok(not bad, "by TRAIN step: the bits written", bad)
ok(st["prefetched"] >= n_all - 3 * len(names), "by TRAIN step: read ahead", st)
order = [(n, s) for n in names for s in steps]
rng.shuffle(order)
bad, st = walk(order)
ok(not bad, "in no order: the bits written", bad)
ok(st["missed"] <= n_all // 10, "in no order: few reads ahead wasted", st)
bad, st = walk([(n, s) for n in names for s in steps], read_ahead=False)
ok(not bad and st["prefetched"] == 0 and st["missed"] == 0, "read_ahead=False: none", (bad, st))
os.environ["SMRULES_READ_AHEAD"] = "0"
bad, st = walk([(n, s) for n in names for s in steps])
ok(not bad and st["prefetched"] == 0 and st["missed"] == 0, "SMRULES_READ_AHEAD=0: none", (bad, st))
os.environ["SMRULES_READ_AHEAD"] = "1"
# unset: on when a core is idle beside this process (1-minute load + 1 <=
# cores), decided per Trial
from smrules import trials as trials_mod
ok([trials_mod.idle_core(l, c) for l, c in ((0.5, 2), (1.0, 2), (1.01, 2), (4, 2), (0, 1), (2.5, 4), (3.2, 4))]
   == [True, True, False, False, False, True, False], "idle_core: a core idle beside this one")
# where the kernel gives the CPU pressure (PSI), it decides: idle when
# tasks waited for a CPU less than 20% of the last 10 s, whatever the load
# average; without it, the load average
ok([trials_mod.idle_by_pressure(p, c) for p, c in ((0.0, 2), (19.9, 2), (20.0, 2), (78.5, 2), (0.0, 1))]
   == [True, True, False, False, False], "idle_by_pressure: no task waiting for a CPU")
del os.environ["SMRULES_READ_AHEAD"]
real_pressure_file, real_idle = trials_mod.PRESSURE_FILE, trials_mod.idle_core
pfile = os.path.join(os.path.dirname(path), "pressure")
trials_mod.idle_core = lambda l, c: "loadavg"
got = []
for text in ("some avg10=1.50 avg60=80.00 avg300=90.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
             "some avg10=78.48 avg60=1.00 avg300=1.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
             None):
    if text is None:
        trials_mod.PRESSURE_FILE = os.path.join(os.path.dirname(path), "no-such-pressure")
    else:
        with open(pfile, "w") as f:
            f.write(text)
        trials_mod.PRESSURE_FILE = pfile
    got.append(trials_mod.read_ahead_default() if len(os.sched_getaffinity(0)) >= 2 else None)
trials_mod.PRESSURE_FILE, trials_mod.idle_core = real_pressure_file, real_idle
ok(got in ([True, False, "loadavg"], [None, None, None]),
   "SMRULES_READ_AHEAD unset: the CPU pressure decides, else the load average", got)
decided = []
real_idle, real_pressure = trials_mod.idle_core, trials_mod.idle_by_pressure
for idle in (True, False):
    trials_mod.idle_core = lambda l, c, idle=idle: idle
    trials_mod.idle_by_pressure = lambda p, c, idle=idle: idle
    bad, st = walk([(n, s) for n in names for s in steps])
    decided.append(st["prefetched"] >= n_all - 3 * len(names) if idle else st["prefetched"] == 0)
trials_mod.idle_core, trials_mod.idle_by_pressure = real_idle, real_pressure
ok(decided == [True, True], "SMRULES_READ_AHEAD unset: read ahead only when a core is idle", decided)
os.environ["SMRULES_READ_AHEAD"] = "1"
# reductions computed ahead (SMRULES_READ_AHEAD=1): the same bits
def reductions(**kw):
    t = create_trial(path)
    if kw:
        t._t = _core.Trial(path, **kw)
    got = [t.tensor(n).reduction_value(s, r, abs=a) for n in names for s in steps
           for r, a in (("mean", True), ("max", False))][::2] + \
          [t.tensor(n).reduction_value(s, "l2") for s in steps for n in names]
    return got, t._t.read_stats()
want_red, st = reductions(reduce_ahead=False)
ok(st["prefetched"] == 0 and st["missed"] == 0, "reduce_ahead=False: none", st)
got_red, st = reductions()
ok(got_red == want_red, "reductions computed ahead: the same bits", [(a, b) for a, b in zip(got_red, want_red) if a != b][:3])
ok(st["prefetched"] >= n_all - 2 * len(names) - 1, "reductions: computed ahead", st)
# a reduction scan's chain: once the order is learned, the requests after
# the one in hand are predicted (the rest of this step's names, then the
# next step's) and computed ahead, several at once, on the library's
# threads and on the caller while it waits; a wrong prediction changes no
# result
def red_scan(order, t):
    return [t.tensor(n).reduction_value(s, "mean", abs=True) for n, s in order]
by_step = [(n, s) for s in steps for n in names]
t = create_trial(path)
t._t = _core.Trial(path, reduce_ahead=False)
want_scan = red_scan(by_step, t)
gc.collect()  # trials of the checks above in reference cycles: their reads ahead ended
_core.Trial.hold_read_ahead(True)  # nothing computed ahead until released
t = create_trial(path)
learn = 3 * len(names) + 1  # two passes learn the order, a third confirms
first = red_scan(by_step[:learn], t)
st = t._t.read_stats()
ok(st.get("predicted", 0) >= 2 * len(names), "reductions: the scan's next requests predicted", st)
c0 = _core.Trial.read_counts()
_core.Trial.hold_read_ahead(False)
guard_at = time.monotonic() + float(os.environ.get("SMRULES_TEST_TIMEOUT", "60"))
window = getattr(_core, "REDUCE_WINDOW", 8)
while (_core.Trial.read_counts()["read_ahead"] - c0["read_ahead"] < window
       and time.monotonic() < guard_at):  # a hang guard: waits for the readers
    time.sleep(0.005)
c1 = _core.Trial.read_counts()
ok(c1["read_ahead"] - c0["read_ahead"] == window,
   "reductions: a window of predicted requests computed ahead, no more", (c0, c1))
rest = red_scan(by_step[learn:], t)
ok(first + rest == want_scan, "reductions: chain computed ahead, the same bits",
   [(k, a, b) for k, a, b in zip(by_step, first + rest, want_scan) if a != b][:3])
st = t._t.read_stats()
ok(st["prefetched"] >= n_all - learn and st["missed"] == 0, "reductions: every predicted one taken", st)
# the order changes half way (names reversed): one miss, the same bits
half = len(steps) // 2 * len(names)
turned = by_step[:half] + [(n, s) for s in steps[len(steps) // 2:] for n in reversed(names)]
t = create_trial(path)
got = red_scan(turned, t)
wanted = dict(zip(by_step, want_scan))
ok(got == [wanted[k] for k in turned], "reductions: order changed half way, the same bits")
st = t._t.read_stats()
ok(1 <= st["missed"] <= len(names) + 1, "reductions: a changed order costs a miss per name at most", st)
del t
os.environ["SMRULES_READ_AHEAD"] = "0"
got_red, st = reductions()
ok(got_red == want_red and st["prefetched"] == 0 and st["missed"] == 0,
   "SMRULES_READ_AHEAD=0: no reduction ahead", st)
os.environ["SMRULES_READ_AHEAD"] = "1"
# the steps beyond the last: read ahead, not there, asked for and raised
t = create_trial(path)
for s in steps:
    t.tensor("g0").value(s)
try:
    t.tensor("g0").value(steps[-1] + 2)
    ok(False, "a step past the end raises", "it did not")
except Exception as e:
    ok(type(e).__name__ in ("StepUnavailable", "NoMoreData"), "a step past the end raises", repr(e))
# iter_tensors: read ahead, the bits written, in order
t = create_trial(path)
got = list(t.iter_tensors({n: steps for n in names}))
ok([(s, n) for s, n, _ in got] == [(s, n) for s in steps for n in names], "stream: in order",
   [(s, n) for s, n, _ in got][:8])
ok(all(same(v, want[(n, s)]) for s, n, v in got), "stream: the bits written")
del got
# elements placed 16-byte aligned for NumPy (smr_trial_align_values): where
# a tensor's elements lay in its last record is learned, so a value read
# again (the same layout) starts on a multiple of 16 bytes, whatever its
# offset in the event file (without: 4 of 5 here do not)
ta = create_trial(path)
mis = []
for n in names:
    for s in steps:
        ta.tensor(n).value(s)
        mis += [(n, s, a.ctypes.data % 16) for a in [ta.tensor(n).value(s)] if a.ctypes.data % 16]
ok(not mis, "value() read again: the elements start 16-byte aligned", mis[:5])
del ta
# the read-ahead thread given no core (held, as on a loaded machine): the
# caller reads what the thread has not begun instead of waiting for it
import threading
_core.Trial.hold_read_ahead(True)
c0 = _core.Trial.read_counts()
held = []
def held_scan():
    t = create_trial(path)
    got = list(t.iter_tensors({n: steps for n in names}))
    vals = [(s, n, t.tensor(n).value(s)) for n in names for s in steps]
    held.append(len(got) == n_all and all(same(v, want[(n, s)]) for s, n, v in got + vals))
th = threading.Thread(target=held_scan, daemon=True)
th.start()
guard = float(os.environ.get("SMRULES_TEST_TIMEOUT", "60"))
th.join(guard)  # a hang guard: a caller that waits for the thread never ends
c1 = _core.Trial.read_counts()
_core.Trial.hold_read_ahead(False)
th.join(guard)
ok(held == [True], "read-ahead thread held: the caller reads every value, the bits written", held)
ok(c1["read_ahead"] == c0["read_ahead"] and c1["by_caller"] - c0["by_caller"] > n_all + n_all // 2,
   "read-ahead thread held: the stream and the prefetches read by the caller", (c0, c1))
ok(c0["read_ahead"] > 0, "read ahead before: by the thread", c0)
# dropped half way; a trial closed under a stream
it = t.iter_tensors({n: steps for n in names})
first = [next(it) for _ in range(7)]
del it
it = t.iter_tensors({n: steps for n in names})
next(it)
t.close()
rest = list(it)
ok(len(rest) == n_all - 1, "a stream goes on after close()", len(rest))
ok(all(same(v, want[(n, s)]) for s, n, v in first + rest), "dropped, closed: the bits written")
del first, rest, it, t
gc.collect()
ok(_core.Trial.lent_count() == 0, "every lent buffer given back", _core.Trial.lent_count())
# the buffers of values read ahead go back to the thread that read them
# (read_ahead.h, homes): a scan faults in a few values' pages, not every
# value's (each 256 KiB value read into fresh memory is 64 page faults)
import hashlib, resource
big = {}
def digest(a):  # compares without a copy: NumPy's would fault pages in too
    return hashlib.sha256(memoryview(a)).digest()
w = _core.Writer(path + "-faults", "worker_0")
for s in range(20):
    w.step_begin(s, _core.MODE_TRAIN, s)
    for i in range(10):
        a = rng.standard_normal(65536 + i).astype(np.float32)
        w.tensor("b%d" % i, a, 0.0)
        big[("b%d" % i, s)] = digest(a)
    w.step_end()
w.close()
_core.write_end_marker(path + "-faults")
fresh = len(big) * 64
def faults(scan):
    t = create_trial(path + "-faults")
    scan(t, 1)  # the pools filled once
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    bad = scan(t, 0)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0, bad
def by_stream(t, _):
    bad = []
    for s, n, v in t.iter_tensors({"b%d" % i: list(range(20)) for i in range(10)}):
        if digest(v) != big[(n, s)]:
            bad.append((n, s))
    return bad
def by_value(t, _):
    return [(n, s) for n, s in sorted(big) if digest(t.tensor(n).value(s)) != big[(n, s)]]
def by_step(t, _):
    bad = []
    for s in range(20):
        got = t.get_tensors({"b%d" % i: [s] for i in range(10)})
        bad += [(n, s) for n in got if digest(got[n][s]) != big[(n, s)]]
    return bad
sanitized = "san" in os.environ.get("LD_PRELOAD", "")  # its shadow memory faults too
for what, scan in (("iter_tensors", by_stream), ("value()", by_value), ("get_tensors", by_step)):
    f, bad = faults(scan)
    ok(not bad, what + " over 256 KiB values: the bits written", bad[:5])
    ok(sanitized or f < fresh // 3, what + ": buffers reused, not faulted in anew",
       "%d page faults for %d values (%d if every value's were new)" % (f, len(big), fresh))
# a fork while reading ahead: the child reads ahead too
t = create_trial(path)
it = t.iter_tensors({n: steps for n in names})
next(it)
pid = os.fork()
if pid == 0:
    try:
        good = all(same(v, want[(n, s)]) for s, n, v in it)
        good = good and all(same(t.tensor(n).value(s), want[(n, s)]) for n in names for s in steps)
        good = good and t._t.read_stats()["prefetched"] > 0
        os._exit(0 if good else 3)
    except BaseException:
        os._exit(4)
_, status = os.waitpid(pid, 0)
ok(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "a forked child reads ahead", status)
ok(all(same(v, want[(n, s)]) for s, n, v in it), "the parent reads on after the fork")
print(json.dumps(res))
"""


def tally(c, label, rc, so, se, least=20):
    if not c.ok(rc == 0 and so.strip(), label + " ran", se[-2000:]):
        return
    try:
        rows = json.loads(so.strip().splitlines()[-1])
    except ValueError:
        c.ok(False, label + " output", so[-500:])
        return
    c.at_least(least, rows, label + " checks")
    for good, what, detail in rows:
        c.ok(good, what, detail)


def main():
    c = lib.Checker("test_python_trial")
    why = pylib.package_problem()
    if not c.ok(why is None, "package", why):
        c.finish()
    real = c.cases("trials")
    synth = c.cases("synthetic")
    folders = [path for _, path in real + synth]
    before = {f: lib.tree_snapshot(f) for f in folders}
    rc, so, se = pylib.run_py(CHECK, folders)
    tally(c, "fixtures", rc, so, se)
    for f in folders:
        lib.check_untouched(c, f, before[f])

    corrupt = [path for _, path in c.cases("corrupt")]
    rc, so, se = pylib.run_py(CORRUPT, corrupt)
    tally(c, "corrupt", rc, so, se, least=len(corrupt))

    with tempfile.TemporaryDirectory() as tmp:
        healthy = os.path.join(lib.FIXTURES, "trials", "healthy_mlp_digits")
        partial = os.path.join(tmp, "partial")
        shutil.copytree(os.path.join(lib.FIXTURES, "synthetic", "trial_workers3_partial_no_end"), partial)
        rc, so, se = pylib.run_py(API, [healthy, partial])
        tally(c, "api", rc, so, se)
        rc, so, se = pylib.run_py(LENT, [os.path.join(tmp, "lent")])
        tally(c, "lent", rc, so, se, least=12)
        rc, so, se = pylib.run_py(READ_AHEAD, [os.path.join(tmp, "ahead")])
        tally(c, "read ahead", rc, so, se, least=20)
    c.finish()


if __name__ == "__main__":
    main()
