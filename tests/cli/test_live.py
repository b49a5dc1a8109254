#!/usr/bin/env python3
"""End-to-end: `smrules run --watch` beside a training job.

  stop       a trainer writing in real time (build/demo-trainer, 50 ms a
             step, more steps than it could write before the hang guard) is
             stopped by StopTraining when LossNotDecreasing fires, at the
             trigger step; the time from the trigger step's index file
             appearing to the trainer's exit is printed (make bench, 5 and
             5b, measures it); trainer started first and given by
             --training-pid, or smrules started first on an empty folder
             and the trainer found by its pid file; inotify and --poll
  restart    a watch killed with SIGKILL after its rule fired, its action
             ran and its progress line said so (the state is stored by
             then), while the trainer is held mid-run (a stand-in replaying
             a demo-trainer trial), then restarted on the same trial and
             --state once training goes on, does not
             repeat the action and ends with the results of one
             uninterrupted evaluation
  partial    index and event files written slowly in place (half, pause,
             rest) while a watch runs, with stray .tmp files beside them:
             nothing is reported as corrupt, the results equal an offline
             run over the finished trial, the .tmp files are ignored
  timeout    --timeout ends a watch on a trial that never ends, not before
             the timeout (inotify and --poll)
  demo       examples/demo.sh runs (with the build already done: `make` is
             a no-op stand-in), launches the trainer and ends with it
             stopped; the reports it lists are kept in $DEMO_DIR

No check depends on how fast the machine is: the test waits for what the
processes print or write, never for a duration to pass.  Every process the
test starts is killed at the end; every wait is bounded (a hang guard).
The trainer is the demo-trainer next to $SMRULES (or $SMRULES_DEMO_TRAINER).
"""

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

TRAINER = os.environ.get("SMRULES_DEMO_TRAINER",
                         os.path.join(os.path.dirname(lib.SMRULES), "demo-trainer"))
DEMO_LIMIT = 60.0  # a hang guard
STANDIN = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                        "standin_trainer.py")]
# more steps than demo-trainer writes before any hang guard: only
# StopTraining ends it
ENDLESS = 100000
ERROR_WORDS = re.compile(r"error|corrupt|truncat|invalid|unexpected|cannot|failed", re.I)


# --------------------------------------------------------------------------
# Processes: every one is registered and killed at the end

class Proc:
    """A child with stdout/stderr in files and its exit time recorded (wall
    clock, by a thread blocked in wait) so latencies can be measured."""

    def __init__(self, args, out_path, err_path):
        self.args = [str(a) for a in args]
        self.out_path, self.err_path = out_path, err_path
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            self.p = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=out,
                                      stderr=err, cwd=lib.ROOT)
        self.exit_time = None
        self.done = threading.Event()
        threading.Thread(target=self._wait, daemon=True).start()

    def _wait(self):
        self.p.wait()
        self.exit_time = time.time()
        self.done.set()

    @property
    def pid(self):
        return self.p.pid

    def wait(self, timeout):
        """The exit status, or None if still running after timeout s."""
        if not self.done.wait(timeout):
            return None
        return self.p.returncode

    def kill(self, sig=signal.SIGKILL):
        if not self.done.is_set():
            try:
                self.p.send_signal(sig)
            except OSError:
                pass
        self.done.wait(10)

    def out(self):
        with open(self.out_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def err(self):
        with open(self.err_path, encoding="utf-8", errors="replace") as f:
            return f.read()


PROCS = []


def start(tmp, label, args):
    p = Proc(args, os.path.join(tmp, label + ".out"), os.path.join(tmp, label + ".err"))
    PROCS.append(p)
    return p


def kill_all():
    for p in PROCS:
        p.kill()


def trainer(tmp, label, trial, steps, interval_ms, plateau_at):
    return start(tmp, label, [TRAINER, trial, "--steps", steps, "--interval-ms", interval_ms,
                              "--plateau-at", plateau_at])


def watch(tmp, label, trial, rules, extra=()):
    """smrules run --watch --json with a private state file and output dir."""
    return start(tmp, label, [lib.SMRULES, "run", "--trial", trial, "--rules", rules,
                              "--watch", "--json", "--state", os.path.join(tmp, "state.db"),
                              "--output", os.path.join(tmp, "rule-output")] + list(extra))


def wait_until(cond, timeout, every=0.01):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(every)
    return cond()


# --------------------------------------------------------------------------
# Reading results

def parse_json(text):
    try:
        return json.loads(text)
    except ValueError:
        return None


def rule_result(obj, name):
    for r in (obj or {}).get("rules") or []:
        if r.get("name") == name:
            return r
    return {}


def results_view(obj):
    """What must agree between two evaluations of the same trial."""
    keys = ("status", "first_trigger_step", "triggered_steps", "evaluated_steps", "skipped_steps")
    return {r.get("name"): {k: r.get(k) for k in keys} for r in (obj or {}).get("rules") or []}


def index_files(trial):
    """{global step: path} of the complete index files."""
    out = {}
    for p in glob.glob(os.path.join(trial, "index", "*", "*.json")):
        m = re.match(r"(\d+)_", os.path.basename(p))
        if m:
            out[int(m.group(1))] = p
    return out


def check_watch_process(sc, w, rc, allowed=(0, 1)):
    """Exited in time with an allowed status, no sanitizer report, stdout
    is one JSON object; returns it (or None)."""
    err = w.err()
    if not sc.ok(rc is not None, "smrules ended", "still running (killed)"):
        return None
    sc.ok(rc in allowed, "smrules exit status", "got %s, expected %s; stderr: %s"
          % (rc, allowed, lib.short(err.strip(), 400)))
    sc.ok(not any(m in err for m in lib.SANITIZER_MARKERS), "no sanitizer report",
          lib.short(err, 600))
    obj = parse_json(w.out())
    sc.ok(isinstance(obj, dict) and "rules" in obj, "stdout is the results JSON",
          lib.short(w.out().strip(), 300))
    return obj if isinstance(obj, dict) else None


def offline(tmp, trial, rules):
    """Results of a fresh offline run over a finished trial."""
    r = lib.run_json(["run", "--trial", trial, "--rules", rules, "--json", "--fresh",
                      "--output", os.path.join(tmp, "offline-output")])
    return r.obj if isinstance(r.obj, dict) else None


def yaml_str(s):
    return json.dumps(str(s))  # a JSON string is a YAML flow scalar


LOSS_RULE = """\
  - rule: LossNotDecreasing
    parameters: {num_steps: 10, diff_percent: 0.1, mode: TRAIN}
"""


# --------------------------------------------------------------------------
# stop: a real-time trainer stopped within the budget

def test_stop(c, tmp, poll, watch_first, many_folders=False):
    """watch_first: smrules starts on an empty trial folder before training
    (as a sidecar or service would) and finds the trainer by its pid file;
    otherwise the trainer starts first and is given by --training-pid."""
    label = "stop%s%s" % (" --poll" if poll else "", ", watch first" if watch_first else "")
    interval = 0.05
    trial = os.path.join(tmp, "trial")
    rules = os.path.join(tmp, "rules.yaml")
    pid_file = os.path.join(tmp, "train.pid")
    with open(rules, "w") as f:
        f.write("rules:\n" + LOSS_RULE + "    actions: [StopTraining]\n")
        if watch_first:
            # the pid file's process must also be the trainer (its exe)
            f.write("actions:\n  StopTraining:\n    pid_file: %s\n    exe: %s\n%s"
                    % (yaml_str(pid_file), yaml_str(os.path.realpath(TRAINER)),
                       "    allow_root: true\n" if os.geteuid() == 0 else ""))
    opts = ["--timeout", 60] + (["--poll"] if poll else [])
    if watch_first:
        os.makedirs(trial)
        w = watch(tmp, "watch", trial, rules, opts)
        wait_until(lambda: "waiting for a trial" in w.err() or w.done.is_set(), 30)
        t = start(tmp, "trainer", [TRAINER, trial, "--steps", ENDLESS, "--interval-ms",
                                   int(interval * 1000), "--plateau-at", 20, "--pid-file", pid_file])
    else:
        t = trainer(tmp, "trainer", trial, ENDLESS, int(interval * 1000), 20)
        # smrules joins a trial already being written (the folder must exist)
        wait_until(lambda: index_files(trial) or t.done.is_set(), 20)
        if many_folders:  # more folders than smrules watches: it polls instead
            label += ", 3000 folders under index/"
            for i in range(3000):
                os.makedirs(os.path.join(trial, "index", "%09d" % (1000 * (i + 1))))
        w = watch(tmp, "watch", trial, rules, ["--training-pid", t.pid] + opts)
    sc = c.scope(label)
    if many_folders:
        wait_until(lambda: "polling the trial" in w.err() or w.done.is_set(), 60)
        sc.ok("more than 1024 folders to watch" in w.err() and "polling the trial" in w.err(),
              "warns that it polls instead of watching", lib.short(w.err().strip(), 400))
    trc = t.wait(120)  # a hang guard: the trainer ends only when stopped
    rc = w.wait(30)
    if not sc.ok(trc is not None, "trainer stopped", "still running after 120 s (%s)"
                 % lib.short(w.err().strip(), 400)):
        return
    obj = check_watch_process(sc, w, rc, allowed=(1,))
    sc.eq("trainer exit status (SIGTERM handled)", trc, 143)
    sc.ok("stopped by signal" in t.out(), "trainer says it was stopped", t.out().strip())
    if obj is None:
        return
    res = rule_result(obj, "LossNotDecreasing")
    trig = res.get("first_trigger_step")
    sc.eq("LossNotDecreasing status", res.get("status"), "IssuesFound")
    if not sc.ok(isinstance(trig, int), "trigger step", "got %s" % lib.short(res)):
        return
    acts = [a for a in obj.get("actions") or [] if a.get("action") == "StopTraining"]
    sc.ok(len(acts) == 1 and acts[0].get("outcome") == "ok" and acts[0].get("step") == trig,
          "one StopTraining, ok, at the trigger step", lib.short(obj.get("actions")))
    files = index_files(trial)
    if not sc.ok(trig in files, "index file of the trigger step", "step %d not found" % trig):
        return
    latency = t.exit_time - os.stat(files[trig]).st_mtime
    print("  %s: trigger at step %d; index file complete -> trainer exited: %.1f ms"
          % (label, trig, latency * 1000), flush=True)
    sc.ok(os.path.exists(os.path.join(trial, "training_job_end.ts")),
          "trainer wrote training_job_end.ts", "")


# --------------------------------------------------------------------------
# restart: a watch killed mid-run resumes without repeating its action

def test_restart(c, tmp):
    sc = c.scope("restart")
    trial = os.path.join(tmp, "trial")
    marks = os.path.join(tmp, "marks.txt")
    rules = os.path.join(tmp, "rules.yaml")
    argv = ["/bin/sh", "-c", 'echo "$1 $2" >> "$3"', "mark", "{rule}", "{step}", marks]
    with open(rules, "w") as f:
        f.write("rules:\n" + LOSS_RULE + "    actions: [mark]\n"
                "  - rule: ExplodingTensor\n"
                "actions:\n  hooks:\n    mark:\n      type: exec\n"
                "      argv: [%s]\n" % ", ".join(yaml_str(a) for a in argv))
    # 160 steps; loss flat from step 10: fires at 20, 30, 40, ...  Written
    # first, then replayed by a stand-in that holds after step HOLD until
    # the test releases it, so the first watch is killed mid-run at any
    # speed.
    src = os.path.join(tmp, "src")
    gen = trainer(tmp, "gen", src, 160, 0, 10)
    if not sc.ok(gen.wait(60) == 0, "source trial written by demo-trainer", gen.err()):
        return
    hold, release = 45, os.path.join(tmp, "release")
    os.makedirs(trial)  # smrules may start before the trainer creates it
    t = start(tmp, "trainer", STANDIN + ["--source", src, "--out", trial, "--step-delay", 0.01,
                                         "--hold-after", hold, "--release", release])
    w1 = watch(tmp, "watch1", trial, rules, ["--timeout", 60])

    def lines():
        try:
            with open(marks) as f:
                return f.read().splitlines()
        except OSError:
            return []
    # the progress line with a trigger is printed after the rule's state
    # (and the action's) was stored
    stored = wait_until(lambda: re.search(r"LossNotDecreasing +IssuesFound .*last trigger at step",
                                          w1.err()) or w1.done.is_set(), 60)
    fired = wait_until(lambda: lines(), 30)
    if not sc.ok(stored and fired, "first watch ran the action", "%s holds %s; stderr: %s"
                 % (marks, lines(), lib.short(w1.err().strip(), 400))):
        return
    w1.kill(signal.SIGKILL)
    sc.eq("first watch killed by SIGKILL", w1.wait(5), -signal.SIGKILL)
    before = max(index_files(trial) or [-1])
    training = not t.done.is_set()
    open(release, "w").close()  # training goes on
    w2 = watch(tmp, "watch2", trial, rules, ["--timeout", 60])
    trc = t.wait(60)
    rc = w2.wait(60)
    sc.eq("trainer finished on its own", trc, 0)
    obj = check_watch_process(sc, w2, rc, allowed=(1,))
    got_lines = lines()
    sc.ok(len(got_lines) == 1, "the action ran once in all", "%s holds %s" % (marks, got_lines))
    if obj is None:
        return
    res = rule_result(obj, "LossNotDecreasing")
    first = res.get("first_trigger_step")
    sc.ok(got_lines[:1] == ["LossNotDecreasing %s" % first], "the action ran for the first trigger",
          "marks %s, first trigger %s" % (got_lines, first))
    acts = obj.get("actions") or []
    # A restarted watch that re-evaluated from the start would meet the first
    # trigger again and list the action as skipped ("done in an earlier
    # run"); one that resumed has no due action at all (repeat: first).
    sc.ok(not acts, "restarted watch: no action due (resumed after the first trigger)",
          lib.short(acts, 400))
    sc.ok(training and 0 <= before <= hold, "restart happened mid-run (the trainer held)",
          "trainer at step %d, running: %s" % (before, training))
    want = offline(tmp, trial, rules)
    if sc.ok(want is not None, "offline reference run", ""):
        got_v, want_v = results_view(obj), results_view(want)
        sc.ok(got_v == want_v, "results equal one uninterrupted evaluation",
              lib.first_difference(got_v, want_v))


# --------------------------------------------------------------------------
# partial: files written slowly in place are never reported as corrupt

def write_slowly(path, data, cut, pause):
    """Write data in place (no rename): `cut` bytes, flush, pause, the rest."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data[:cut])
        f.flush()
        os.fsync(f.fileno())
        time.sleep(pause)
        f.write(data[cut:])


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def test_partial(c, tmp):
    sc = c.scope("partial")
    src = os.path.join(tmp, "src")
    gen = trainer(tmp, "gen", src, 24, 0, 6)
    if not sc.ok(gen.wait(30) == 0, "source trial written by demo-trainer", gen.err()):
        return
    rules = os.path.join(tmp, "rules.yaml")
    with open(rules, "w") as f:
        f.write("rules:\n" + LOSS_RULE + "  - rule: ExplodingTensor\n")
    want = offline(tmp, src, rules)
    if not sc.ok(want is not None and rule_result(want, "LossNotDecreasing").get("triggered_steps"),
                 "offline reference (LossNotDecreasing fires)", lib.short(want)):
        return
    trial = os.path.join(tmp, "trial")
    os.makedirs(trial)
    # Stray files of writes never finished: ignored, never read as data.
    stray = {"index/000000000/000000000099_worker_0.json.tmp": b'{"meta": {"mode": "TRA',
             "events/000000000099/000000000099_worker_0.tfevents.tmp": b"\x10\x00\x00",
             "training_job_end.ts.tmp": b""}
    for rel, data in stray.items():
        os.makedirs(os.path.dirname(os.path.join(trial, rel)), exist_ok=True)
        with open(os.path.join(trial, rel), "wb") as f:
            f.write(data)
    w = watch(tmp, "watch", trial, rules, ["--timeout", 60])
    steps = sorted(index_files(src))
    collections = glob.glob(os.path.join(src, "collections", "*", "*"))
    cuts = (lambda n: n // 2, lambda n: 1, lambda n: n - 1)
    for i, g in enumerate(steps):
        idx = index_files(src)[g]
        meta = json.loads(read_bytes(idx))["meta"]
        ev = os.path.join(src, meta["event_file_name"])
        for path in (ev, idx):  # smdebug's order: event file, then index
            data = read_bytes(path)
            write_slowly(os.path.join(trial, os.path.relpath(path, src)), data,
                         cuts[i % 3](len(data)), 0.08)
        if i == 0:
            for p in collections:
                data = read_bytes(p)
                write_slowly(os.path.join(trial, os.path.relpath(p, src)), data, len(data) // 2, 0.08)
        if w.wait(0) is not None:
            break
    with open(os.path.join(trial, "training_job_end.ts"), "wb"):
        pass
    rc = w.wait(30)
    obj = check_watch_process(sc, w, rc, allowed=(1,))
    bad = [ln for ln in w.err().splitlines() if ERROR_WORDS.search(ln)]
    sc.ok(not bad, "nothing reported as corrupt or failed", lib.short(bad[:5], 600))
    if obj is None:
        return
    for r in obj.get("rules") or []:
        sc.ok(r.get("status") != "Error", "%s did not fail" % r.get("name"), lib.short(r.get("message")))
    got_v, want_v = results_view(obj), results_view(want)
    sc.ok(got_v == want_v, "results equal an offline run of the finished trial",
          lib.first_difference(got_v, want_v))
    seen = set()
    for r in obj.get("rules") or []:
        seen.update(r.get("triggered_steps") or [])
        seen.update(r.get("skipped_steps") or [])
    sc.ok(99 not in seen, "the .tmp step (99) was never evaluated", "")


# --------------------------------------------------------------------------
# timeout: a trial that never ends

def test_timeout(c, tmp, poll):
    label = "timeout%s" % (" --poll" if poll else "")
    sc = c.scope(label)
    src = os.path.join(tmp, "src")
    gen = trainer(tmp, "gen", src, 5, 0, 40)
    if not sc.ok(gen.wait(30) == 0, "trial written by demo-trainer", gen.err()):
        return
    trial = os.path.join(tmp, "trial")
    shutil.copytree(src, trial)
    os.unlink(os.path.join(trial, "training_job_end.ts"))  # never ends
    rules = os.path.join(tmp, "rules.yaml")
    with open(rules, "w") as f:
        f.write("rules:\n  - rule: ExplodingTensor\n")
    t0 = time.time()
    w = watch(tmp, "watch", trial, rules, ["--timeout", 2] + (["--poll"] if poll else []))
    rc = w.wait(30)  # a hang guard
    took = time.time() - t0
    obj = check_watch_process(sc, w, rc, allowed=(124,))  # 124: --timeout ended it
    # a slow machine ends it later, no machine earlier
    sc.ok(took >= 1.9, "not before the timeout (2 s)", "took %.2f s" % took)
    res = rule_result(obj, "ExplodingTensor")
    sc.eq("status", res.get("status"), "InProgress")
    sc.eq("evaluated steps", res.get("evaluated_steps"), 5)
    sc.eq("waiting at step", res.get("waiting_at_step"), 5)


# --------------------------------------------------------------------------
# demo: examples/demo.sh

def test_demo(c, tmp):
    sc = c.scope("demo")
    shim = os.path.join(tmp, "bin")
    os.makedirs(shim)
    with open(os.path.join(shim, "make"), "w") as f:  # the build is done already
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(os.path.join(shim, "make"), 0o755)
    missing = [p for p in ("build/smrules", "build/demo-trainer") if not os.access(
        os.path.join(lib.ROOT, p), os.X_OK)]
    if not sc.ok(not missing, "build done", "missing %s" % missing):
        return
    demo_dir = os.path.join(tmp, "demo")
    env = dict(os.environ, PATH=shim + os.pathsep + os.environ.get("PATH", ""), TMPDIR=tmp,
               DEMO_DIR=demo_dir)
    out_path = os.path.join(tmp, "demo.out")
    t0 = time.time()
    with open(out_path, "wb") as out:
        p = subprocess.Popen(["sh", "examples/demo.sh"], cwd=lib.ROOT, stdin=subprocess.DEVNULL,
                             stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            rc = p.wait(DEMO_LIMIT + 30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            rc = p.wait()
    took = time.time() - t0
    text = read_bytes(out_path).decode("utf-8", "replace")
    show = lib.short(text[-1500:], 1600)
    sc.eq("exit status", rc, 0) or print("     demo output: %s" % show)
    print("  demo: ran in %.1f s" % took, flush=True)
    sc.ok(re.search(r"StopTraining\s+LossNotDecreasing\s+\d+\s+1\s+ok\s+launched command", text),
          "StopTraining ran (ok) for LossNotDecreasing, on the launched trainer", show)
    sc.ok("stopped by signal" in text, "the trainer was stopped", show)
    sc.ok("stopped by StopTraining (rule LossNotDecreasing)" in text, "training line", show)
    reports = os.path.join(demo_dir, "rule-output")
    listed = text.split("reports, kept in %s:" % reports, 1)[-1].split()
    sc.ok(listed and all(os.path.isfile(os.path.join(reports, n, "report.json")) for n in listed),
          "the reports it lists are kept in the folder it names", show)
    with open(os.path.join(lib.ROOT, "examples", "demo.sh")) as f:
        script = f.read()
    sc.ok("sh .ci/deps.sh build" in script, "installs only the build packages")


# --------------------------------------------------------------------------

def main():
    c = lib.Checker("test_live")
    if not os.access(TRAINER, os.X_OK):
        c.ok(False, "demo-trainer", "%s does not exist or is not executable" % TRAINER)
        c.finish()
    cases = [("stop", lambda t: test_stop(c, t, False, False)),
             ("stop-watch-first", lambda t: test_stop(c, t, False, True)),
             ("stop-many-folders", lambda t: test_stop(c, t, False, False, True)),
             ("stop-poll", lambda t: test_stop(c, t, True, True)),
             ("restart", lambda t: test_restart(c, t)),
             ("partial", lambda t: test_partial(c, t)),
             ("timeout", lambda t: test_timeout(c, t, False)),
             ("timeout-poll", lambda t: test_timeout(c, t, True)),
             ("demo", lambda t: test_demo(c, t))]
    try:
        for name, fn in cases:
            if lib.CASE_FILTER not in name:
                continue
            with tempfile.TemporaryDirectory(prefix="smrules-live-") as tmp:
                try:
                    fn(tmp)
                finally:
                    kill_all()
    finally:
        kill_all()
    c.finish()


if __name__ == "__main__":
    main()
