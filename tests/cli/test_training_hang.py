#!/usr/bin/env python3
"""End-to-end: TrainingHang (docs/rules/TrainingHang.md) catches a launched
trainer that hangs, and StopTraining stops it.

  hang   `run -- python3 standin_trainer.py --hold-after 16 --hang-after 35`
         with TrainingHang (min_seconds 10) and StopTraining: the trainer
         writes steps 0..16 and holds; once smrules' status line says it
         has seen step 16 (so the rule saw those steps appear) the test lets
         it go on: steps 23..35 appear later, which gives the rule an
         interval to learn from, then the trainer hangs for good.  TrainingHang
         fires, StopTraining sends SIGTERM, smrules exits 1; the report names
         the trainer's last step and a threshold of max(3 x the typical
         interval it reports, 10 s), exceeded.  min_seconds is the margin
         for the hold itself: the trainer is silent until smrules' next
         status line, which a sanitizer build on a loaded machine may print
         a second or more later; ten times that is never reached.

A trainer that ends normally is not tested here: whether a loaded machine
pauses longer than a short min_seconds is timing; the unit test
(tests/unit/test_training_hang.c) covers the end marker on a fake clock.

No check depends on how fast the machine is: the test waits for lines and
for exits; the trainer hangs until it is stopped, so only the rule can end
the run (the wait limits are hang guards).
"""

import json
import os
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

MIN_SECONDS = 10.0

HERE = os.path.dirname(os.path.abspath(__file__))
STANDIN = [sys.executable, os.path.join(HERE, "standin_trainer.py")]
HEALTHY = os.path.join(lib.FIXTURES, "trials", "healthy_mlp_digits")


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def rules(tmp):
    return write(os.path.join(tmp, "rules.yaml"),
                 "rules:\n  - rule: TrainingHang\n    parameters:\n"
                 "      factor: 3\n      min_seconds: %g\n      warmup_steps: 0\n"
                 "    actions: [StopTraining]\n" % MIN_SECONDS)


def log_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.split() for line in f if line.strip()]


def test_hang(c, tmp):
    trial, log = os.path.join(tmp, "trial"), os.path.join(tmp, "trainer.log")
    release, out = os.path.join(tmp, "release"), os.path.join(tmp, "out")
    p = lib.Running(["run", "--trial", trial, "--rules", rules(tmp), "--heartbeat", "1",
                     "--output", out, "--"] + STANDIN +
                    ["--source", HEALTHY, "--out", trial, "--step-delay", "0.05",
                     "--hold-after", "16", "--release", release, "--hang-after", "35",
                     "--log", log])
    seen16 = p.wait_line(r"watching: .*\(latest 16\)", stream="stdout")
    open(release, "w").close()
    rc, stdout, stderr = p.finish(limit=max(lib.TIMEOUT, 120))
    sc = c.scope("hang: launched trainer hangs after step 35")
    sc.ok(seen16, "smrules saw step 16 while the trainer held", stdout[-400:] + stderr[-400:])
    sc.eq("exit 1 (issues found, training stopped)", rc, 1)
    events = log_lines(log)
    steps = [int(e[1]) for e in events if e[0] == "index"]
    last = steps[-1] if steps else None
    # 35 unless the machine stalled for longer than the learnt threshold
    # between two steps (then the rule rightly fired on that silence)
    sc.ok(last is not None and last > 16, "the trainer went on past step 16", str(events[-4:]))
    sig = [e for e in events if e[0] == "signal"]
    sc.ok(sig and sig[0][1] == "SIGTERM", "the trainer got SIGTERM", str(events[-3:]))
    sc.ok("stopped by StopTraining (rule TrainingHang)" in stdout,
          "the training line names TrainingHang", stdout[-500:])
    try:
        with open(os.path.join(out, "TrainingHang", "report.json")) as f:
            rep = json.load(f)
    except (OSError, ValueError) as e:
        sc.ok(False, "report.json of TrainingHang", str(e))
        return
    text = json.dumps(rep)
    m = [x for x in _walk(rep) if isinstance(x, dict) and "threshold_seconds" in x]
    sc.ok(m, "a violation with threshold_seconds", text[:600])
    if m:
        v = m[0]
        sc.eq("newest_step: the trainer's last step", v.get("newest_step"), last)
        want = max(3 * v["typical_interval_seconds"], MIN_SECONDS)
        sc.ok(abs(v["threshold_seconds"] - want) < 1e-9,
              "threshold = max(3 x typical interval, min_seconds)", json.dumps(v))
        sc.ok(v["seconds_since_activity"] > v["threshold_seconds"],
              "fired only after the threshold", json.dumps(v))
        sc.ok(v["intervals_learnt"] >= 1, "learnt at least one interval", json.dumps(v))


def _walk(x):
    yield x
    if isinstance(x, dict):
        for v in x.values():
            yield from _walk(v)
    elif isinstance(x, list):
        for v in x:
            yield from _walk(v)


def main():
    c = lib.Checker("test_training_hang")
    tmp = tempfile.mkdtemp(prefix="smrules-hang-")
    try:
        for fn in (test_hang,):
            if lib.CASE_FILTER and lib.CASE_FILTER not in fn.__name__:
                continue
            fn(c, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
