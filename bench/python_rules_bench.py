#!/usr/bin/python3
"""bench/python_rules_bench.py BUILD - VanishingGradient's work from Python
(docs/python.md, "How fast"): a trial of PYB_STEPS steps (default 100) x
PYB_TENSORS (20) float32 gradients of PYB_ELEMENTS (262144: 1 MiB) each,
2.1 GB by default, made by BUILD/bench/scale_gen, scanned for the mean
absolute value of every gradient at every step, each way a separate
process (warm page cache, median of PYB_REPEAT runs, 3):

  raw        cat of the event files: reading the same bytes (the baseline)
  c_rule     smrules run with VanishingGradient (the C rule)
  smd_style  what smdebug's value() does per value, in Python: the index
             JSON, then for each value an open, a read of its record, a
             protobuf walk to tensor_content and NumPy's np.abs().mean()
             (a lower bound on smdebug's own cost: no protobuf library, no
             smdebug import)
  reduction  the trial API: tensor_names(collection="gradients"), then
             tensor(n).reduction_value(step, "mean", abs=True)
  value      the trial API: np.abs(tensor(n).value(step)).mean()
  bulk       the trial API's bulk read: trial.get_tensors({name: [step]})
             per step (20 MiB a call, read without the GIL), then
             np.abs(v).mean()
  bulk_red   the bulk reduction: trial.get_reductions({name: [step]}, "mean",
             abs=True) per step, read and reduced over every core
  stream     the bulk read as a stream: trial.iter_tensors({name: steps})
             over the whole trial, a few values in memory at a time
  reduction+ra, value+ra, stream+ra, py_rule+ra  the same with
             SMRULES_READ_AHEAD=1: the next value or reduction read on a
             thread of the library's while the caller works on this one
             (by default only when a core is idle: the header says whether
             it was at the start)
  py_rule    smrules run with examples/python/custom_gradient_rule.py as a
             `python:` rule (a SageMaker custom rule, unchanged)
  numpy      the user's own NumPy work of the value scan alone:
             np.abs(a).mean() as many times, on one array already in
             memory (no reading), after the same imports: the floor under
             `value`, `bulk` and `stream`

What is compared: the issue's smdebug figure is a whole process's wall
time (start to exit, imports included), so every row here is a whole
process, and the verdicts are on wall time against the C rule (what the
user waits for).  Each round runs every way once, one after the other
(A B C ... A B C ...), and a way's ratio to the C rule is the median over
the rounds of its time over the C rule's time in the same round, so a
burst of load from elsewhere falls on both sides of a ratio.  CPU time
(user + system) and its paired ratio are printed beside it, steadier on a
loaded machine (the C rule, the bulk reads and the bulk reduction use
every core, so their CPU time exceeds their wall time on an idle one).
PYB_WAYS=value,stream,... runs only those ways (with raw and the C rule).
PYB_TRIAL=DIR scans the trial in DIR, made there by the first run that
names it and kept (PYB_STEPS etc. must not change meanwhile).
PYB_BASE=DIR also runs each Python way with the package in DIR (another
build's BUILD/python: the rows `way@base`), a before/after pair in the
same rounds.

Targets (issue: smdebug's whole process took 4.5 s where the C rule took
0.19 s, i.e. 23.7x the C rule): the trial API's scans >= 15x faster than
smdebug, i.e. within 23.7/15 = 1.58x the C rule measured here; the bulk
read within 2x the C rule; peak RSS < 64 MB plus what the caller keeps
(the bulk read keeps one step, 20 MiB).  Prints its own rows."""

import os
import sys

# A scan runs as its own process and imports only what a user's script
# would (the measuring side's modules are imported in main(): statistics
# alone pulls in random, fractions and decimal, ~10 ms a process).

STEPS = int(os.environ.get("PYB_STEPS", "100"))
TENSORS = int(os.environ.get("PYB_TENSORS", "20"))
ELEMENTS = int(os.environ.get("PYB_ELEMENTS", "262144"))
REPEAT = int(os.environ.get("PYB_REPEAT", "3"))
SMDEBUG_OVER_C = 4.5 / 0.19  # the measurement, one machine
TARGET_SCAN = SMDEBUG_OVER_C / 15  # x the C rule
TARGET_BULK = 2.0


# ------------------------------------------------------------ the scans

def _varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        if c < 0x80:
            return v, i
        s += 7


def _field(b, want):
    """The first length-delimited field `want` of message b (bytes)."""
    i = 0
    n = len(b)
    while i < n:
        key, i = _varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            _, i = _varint(b, i)
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        elif wt == 2:
            ln, i = _varint(b, i)
            if f == want:
                return b[i:i + ln]
            i += ln
        else:
            raise ValueError("wire type %d" % wt)
    return None


def scan_smd_style(trial):
    """smdebug's value() per value: index JSON, open, read, decode."""
    import json
    import struct

    import numpy as np
    out = 0.0
    idx_root = os.path.join(trial, "index")
    for d in sorted(os.listdir(idx_root)):
        for fn in sorted(os.listdir(os.path.join(idx_root, d))):
            with open(os.path.join(idx_root, d, fn)) as f:
                doc = json.load(f)
            loc = doc["meta"]["event_file_name"]
            for p in doc["tensor_payload"]:
                if not p["tensorname"].startswith("gradient"):
                    continue
                path = os.path.join(trial, p.get("tensorlocation") or loc)
                with open(path, "rb") as f:
                    f.seek(p["start_idx"])
                    rec = f.read(p["length"])
                (n,) = struct.unpack_from("<Q", rec, 0)
                event = rec[12:12 + n]
                value = _field(_field(event, 5), 1)  # Event.summary.value
                content = _field(_field(value, 8), 4)  # .tensor.tensor_content
                out += float(np.abs(np.frombuffer(content, dtype="<f4")).mean())
    return out


def scan_numpy():
    import numpy as np
    from smrules.trials import create_trial  # noqa: F401 (the same imports)
    a = np.random.default_rng(0).standard_normal(ELEMENTS).astype(np.float32)
    out = 0.0
    for _ in range(STEPS * TENSORS):
        out += float(np.abs(a).mean())
    return out


def scan_api(trial, how):
    from smrules.trials import create_trial
    if how in ("value", "bulk", "stream"):  # the scans of reductions need none
        import numpy as np
    t = create_trial(trial)
    names = t.tensor_names(collection="gradients")
    out = 0.0
    if how == "bulk_red":
        for step in t.steps():
            got = t.get_reductions({n: [step] for n in names}, "mean", abs=True)
            out += sum(v for d in got.values() for v in d.values())
        return out
    if how == "stream":
        for _, _, v in t.iter_tensors({n: t.tensor(n).steps() for n in names}):
            out += float(np.abs(v).mean())
        return out
    if how == "bulk":
        for step in t.steps():
            got = t.get_tensors({n: [step] for n in names})
            for n in names:
                v = got[n].get(step)
                if v is not None:
                    out += float(np.abs(v).mean())
        return out
    for n in names:
        tensor = t.tensor(n)
        for step in tensor.steps():
            if how == "reduction":
                out += tensor.reduction_value(step, "mean", abs=True)
            else:
                out += float(np.abs(tensor.value(step)).mean())
    return out


# ----------------------------------------------------------- measuring

def timed(cmd, env=None):
    """(wall s, CPU s (user + system), max RSS KB) of one run of cmd under
    /usr/bin/time."""
    import subprocess
    import tempfile
    import time
    with tempfile.NamedTemporaryFile("r") as tf:
        t0 = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "-o", tf.name] + cmd,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        wall = time.perf_counter() - t0
        if p.returncode not in (0, 1):
            sys.stderr.write(p.stderr.decode()[-2000:])
            raise SystemExit("python_rules_bench: failed: %s" % " ".join(cmd))
        user, system, rss = tf.read().split()[-3:]
    return wall, float(user) + float(system), int(rss)


def main():
    if len(sys.argv) > 2:  # a scan, run as its own process
        how, trial = sys.argv[1], sys.argv[2]
        if how == "smd_style":
            scan_smd_style(trial)
        elif how == "numpy":
            scan_numpy()
        else:
            scan_api(trial, how)
        return 0
    import shutil
    import statistics
    import subprocess
    import tempfile
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("python_rules_bench: numpy is not installed (python3-numpy); skipped")
        return 0
    smrules = os.path.join(build, "smrules")
    tmp = tempfile.mkdtemp(prefix="smrules-pyb.", dir=os.environ.get("BENCH_DIR", "/tmp"))
    try:
        trial = os.environ.get("PYB_TRIAL") or os.path.join(tmp, "trial")
        if not os.path.isdir(trial):  # PYB_TRIAL: one made before, kept
            subprocess.run([os.path.join(build, "bench", "scale_gen"), trial, str(STEPS),
                            str(TENSORS), str(ELEMENTS), "1", "0"], check=True,
                           stdout=subprocess.DEVNULL)
        gb = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(trial)
                 for f in fs) / 1e9
        vg = os.path.join(tmp, "vg.yaml")
        with open(vg, "w") as f:
            f.write("rules:\n  - rule: VanishingGradient\n")
        py = os.path.join(tmp, "py.yaml")
        with open(py, "w") as f:
            f.write("rules:\n  - python: %s\n    class: CustomGradientRule\n"
                    "    parameters: {threshold: \"1e30\"}\n"
                    % os.path.join(root, "examples", "python", "custom_gradient_rule.py"))
        env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"),
                   SMRULES_PYTHONPATH=os.path.join(build, "python"),
                   PYTHONDONTWRITEBYTECODE="1")
        me = [sys.executable, os.path.abspath(__file__)]
        cat = ["sh", "-c", "cat '%s'/events/*/*.tfevents >/dev/null" % trial]
        runs = {
            "raw": cat,
            "c_rule": [smrules, "run", "--trial", trial, "--rules", vg, "--fresh",
                       "--output", os.path.join(tmp, "out-c")],
            "smd_style": me + ["smd_style", trial],
            "reduction": me + ["reduction", trial],
            "value": me + ["value", trial],
            "bulk": me + ["bulk", trial],
            "stream": me + ["stream", trial],
            "reduction+ra": me + ["reduction", trial],
            "value+ra": me + ["value", trial],
            "stream+ra": me + ["stream", trial],
            "bulk_red": me + ["bulk_red", trial],
            "py_rule": [smrules, "run", "--trial", trial, "--rules", py, "--fresh",
                        "--output", os.path.join(tmp, "out-py")],
            "py_rule+ra": [smrules, "run", "--trial", trial, "--rules", py, "--fresh",
                           "--output", os.path.join(tmp, "out-py")],
            "numpy": me + ["numpy", trial],
        }
        only = [w for w in os.environ.get("PYB_WAYS", "").split(",") if w]
        for w in only:
            if w not in runs:
                raise SystemExit("python_rules_bench: PYB_WAYS: no way %r (%s)"
                                 % (w, ", ".join(runs)))
        if only:
            runs = {k: v for k, v in runs.items() if k in ("raw", "c_rule") or k in only}
        envs = {k: env for k in runs}
        for k in runs:  # the same scans read ahead whatever the load
            if k.endswith("+ra"):
                envs[k] = dict(env, SMRULES_READ_AHEAD="1")
        base = os.environ.get("PYB_BASE")
        if base:
            benv = dict(env, PYTHONPATH=os.path.abspath(base),
                        SMRULES_PYTHONPATH=os.path.abspath(base))
            paired = {}
            for k, cmd in runs.items():  # each right after its own: A A' B B'
                paired[k] = cmd
                if k not in ("raw", "c_rule", "smd_style", "numpy"):
                    paired[k + "@base"] = cmd
                    envs[k + "@base"] = dict(benv, **{
                        v: envs[k][v] for v in ("SMRULES_READ_AHEAD",) if v in envs[k]})
            runs = paired
        subprocess.run(cat, check=True)  # warm the page cache
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
        try:  # what decides the default where the kernel gives it
            with open("/proc/pressure/cpu") as f:
                load += ", CPU pressure " + f.readline().split()[1]
        except (OSError, IndexError):
            pass
        ahead = subprocess.run(
            [sys.executable, "-c", "from smrules.trials import read_ahead_default as r; "
             "print('on' if r() else 'off')"], env=env, capture_output=True,
            text=True).stdout.strip() or "?"
        got = {k: [] for k in runs}
        for _ in range(REPEAT):  # interleaved: the machine's load falls on all
            for k, cmd in runs.items():
                got[k].append(timed(cmd, envs[k]))
        wall = {k: statistics.median(w for w, _, _ in v) for k, v in got.items()}
        cpu = {k: statistics.median(c for _, c, _ in v) for k, v in got.items()}
        # paired: this way's time over the C rule's in the same round
        wall_x = {k: statistics.median(a[0] / c[0] for a, c in zip(v, got["c_rule"]))
                  for k, v in got.items()}
        cpu_x = {k: statistics.median(a[1] / c[1] for a, c in zip(v, got["c_rule"]))
                 for k, v in got.items()}
        rss = {k: max(r for _, _, r in v) / 1024 for k, v in got.items()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("== 11. Python: VanishingGradient's scan, %d steps x %d gradients of %.1f MiB "
          "(%.2f GB), whole processes, median of %d rounds paired with the C rule; "
          "load average %s; reading ahead by default: %s at the start" % (
              STEPS, TENSORS, ELEMENTS * 4 / 2**20, gb, REPEAT, load, ahead))
    print("  %-12s %8s %8s %9s %9s %8s %8s %8s  %-12s %s" % (
        "way", "wall s", "x raw", "x C rule", "smd/x", "cpu s", "cpu x C", "RSS MB", "target",
        "verdict"))
    for k in runs:
        x_c = wall_x[k]
        target, ok = "-", "info"
        way = k.split("@")[0].split("+ra")[0]
        if way in ("reduction", "value", "py_rule"):
            target = "<= %.2fx C" % TARGET_SCAN
            ok = "ok" if x_c <= TARGET_SCAN else "MISS"
        if way in ("bulk", "stream", "bulk_red"):
            target = "<= %.1fx C" % TARGET_BULK
            ok = "ok" if x_c <= TARGET_BULK else "MISS"
        if way in ("reduction", "value", "bulk", "stream", "bulk_red") and ok == "ok":
            keep = 20 if way == "bulk" else 0
            ok = "ok" if rss[k] < 64 + keep else "MISS (RSS)"
        print("  %-12s %8.3f %8.2f %9.2f %9.1f %8.3f %8.2f %8.1f  %-12s %s" % (
            k, wall[k], wall[k] / wall["raw"], x_c,
            wall["smd_style"] / wall[k] if "smd_style" in wall else float("nan"), cpu[k],
            cpu_x[k], rss[k], target, ok))
    return 0


if __name__ == "__main__":
    sys.exit(main())
