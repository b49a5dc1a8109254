#!/usr/bin/env python3
"""End-to-end: smrules beside a training job, with a stand-in
trainer (standin_trainer.py: writes a recorded trial step by step the way
smdebug's hook does).

  launch     `run -- python3 standin_trainer.py ...`: a trainer whose
             tensors explode is stopped by StopTraining (it gets SIGTERM,
             no end marker; exit 1; the table and JSON say how it ended);
             a healthy one ends by itself (exit 0); one that fails exits
             with its own status, one killed by SIGKILL gives 137; the
             launched trainer shares smrules' stdout
  errors     a command that cannot be run: 127 and a message; a bad
             rules.yaml: exit 2 and nothing launched; `--` alone: exit 2;
             a Lua rule whose init fails (init runs only once the trial
             exists, after the launch): exit 2, and the launched trainer is
             stopped, not left running
  signals    SIGTERM/SIGINT/SIGHUP sent to smrules reach the launched
             trainer, smrules makes its final pass and exits with the
             trainer's status (143, 130, 129)
  pid        a trainer watched through --training-pid and killed without
             writing the end marker: the watch ends (nothing else could
             end it), the reports are written, JSON says it ended by the
             trainer's exit
  before     --watch started before the trial folder exists waits (one
             line) and follows the trainer once it starts; the launcher
             waits the same way through a trainer's slow start
  notrial    an empty folder, a trial's parent, a profiler-only folder with
             tensor rules: exit 3, a message naming what was expected
             where, nothing written there
  interrupt  SIGINT/SIGTERM on a plain --watch: the table is printed,
             reports and state written, exit 130/143
  exitcodes  precedence 5 (rule error) > 4 (failed action) > 1 (issues)
  stable     a rule that fired is IssuesFound in every later --live run
             on the same state, never InProgress
  progress   an offline run with stderr on a terminal (a pty) draws
             "evaluating: done/total steps" there and clears it; without a
             terminal nothing is drawn
  heartbeat  a non-TTY --watch on a trial that does not change prints a
             status line every --heartbeat seconds (none with 0)

No check depends on how fast the machine is: stand-in trainers that must be
stopped hang after their last step instead of ending (--hang-after), and the
test acts on what the processes print or write, never after a pause; how
soon smrules acts is measured by `make bench` (5, 5b).  Every process the
test starts is killed at the end; every wait is bounded (a hang guard).
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
STANDIN = [sys.executable, os.path.join(HERE, "standin_trainer.py")]
TRIALS = os.path.join(lib.FIXTURES, "trials")
EXPLODING = os.path.join(TRIALS, "exploding_mse_high_lr")
HEALTHY = os.path.join(TRIALS, "healthy_mlp_digits")
PROCS = []


def spawn(args, tmp, name, **kw):
    out = open(os.path.join(tmp, name + ".out"), "wb")
    err = open(os.path.join(tmp, name + ".err"), "wb")
    p = subprocess.Popen([str(a) for a in args], stdin=subprocess.DEVNULL, stdout=out,
                         stderr=err, cwd=lib.ROOT, **kw)
    p.out_path, p.err_path = out.name, err.name
    out.close()
    err.close()
    PROCS.append(p)
    return p


def finished(p, timeout):
    """(rc, stdout, stderr) after p exits; rc None when it did not."""
    try:
        rc = p.wait(timeout)
    except subprocess.TimeoutExpired:
        rc = None
    with open(p.out_path, encoding="utf-8", errors="replace") as f:
        out = f.read()
    with open(p.err_path, encoding="utf-8", errors="replace") as f:
        err = f.read()
    return rc, out, err


def result(p, args, timeout=60):
    rc, out, err = finished(p, timeout)
    return lib.Result(args, lib.TIMEOUT_RC if rc is None else rc, out, err)


def wait_for(pred, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


write = lib.write_text


def stop_rules(tmp):
    return write(os.path.join(tmp, "rules.yaml"),
                 "rules:\n  - rule: ExplodingTensor\n    actions: [StopTraining]\n")


def log_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.split() for line in f if line.strip()]


def trainer(source, out, *extra):
    return STANDIN + ["--source", source, "--out", out] + [str(e) for e in extra]


def smrules(*args):
    return [lib.SMRULES] + [str(a) for a in args]


# --------------------------------------------------------------------------

def test_launch_stop(c, tmp):
    trial, log = os.path.join(tmp, "trial"), os.path.join(tmp, "trainer.log")
    args = ["run", "--trial", trial, "--rules", stop_rules(tmp), "--json",
            "--output", os.path.join(tmp, "out"), "--"] + \
        trainer(EXPLODING, trial, "--step-delay", 0.05, "--hang-after", 12, "--log", log)
    r = result(spawn(smrules(*args), tmp, "stop"), args)
    sc = c.scope("launch: exploding trainer stopped", r)
    if not sc.process():
        return
    sc.eq("exit 1 (issues found, training stopped)", r.rc, 1)
    events = log_lines(log)
    sig = [e for e in events if e[0] == "signal"]
    sc.ok(sig and sig[0][1] == "SIGTERM", "the trainer got SIGTERM", str(events[-3:]))
    sc.ok(not os.path.exists(os.path.join(trial, "training_job_end.ts")),
          "stopped before the end (no end marker)")
    # The trainer hangs after step 12 instead of ending: only StopTraining
    # ends it, at any speed.  How soon after step 8 is `make bench` (5b).
    t = (r.obj or {}).get("training") or {}
    sc.eq("training.launched", t.get("launched"), True)
    sc.eq("training.signal", t.get("signal"), "SIGTERM")
    sc.eq("training.exit_code", t.get("exit_code"), None)
    sc.eq("training.stopped_by", t.get("stopped_by"), "ExplodingTensor")
    sc.eq("training.ended_by", t.get("ended_by"), "trainer_exit")
    rule = ((r.obj or {}).get("rules") or [{}])[0]
    sc.eq("rule status", rule.get("status"), "IssuesFound")
    sc.eq("first trigger", rule.get("first_trigger_step"), 8)
    sc.ok(os.path.exists(os.path.join(tmp, "out", "ExplodingTensor", "report.json")),
          "report written")
    acts = [a for a in (r.obj or {}).get("actions") or [] if a.get("action") == "StopTraining"]
    sc.ok(len(acts) == 1 and acts[0].get("outcome") == "ok", "StopTraining ran once, ok",
          lib.short(acts))


def test_launch_table(c, tmp):
    """The table form: the training line, and the trainer's own output."""
    trial = os.path.join(tmp, "trial-t")
    args = ["run", "--trial", trial, "--rules", stop_rules(tmp), "--fresh",
            "--output", os.path.join(tmp, "out-t"), "--"] + \
        trainer(EXPLODING, trial, "--step-delay", 0.05, "--hang-after", 12)
    r = result(spawn(smrules(*args), tmp, "table"), args)
    sc = c.scope("launch: table", r)
    if not sc.process(want_json=False):
        return
    sc.eq("exit 1", r.rc, 1)
    sc.ok("step 0\n" in r.out, "the trainer's stdout passes through", lib.short(r.out, 300))
    sc.ok("killed by SIGTERM, stopped by StopTraining (rule ExplodingTensor)" in r.out,
          "training line says how it ended", lib.short(r.out[-400:], 400))


def test_launch_ends(c, tmp):
    cases = [("healthy trainer ends by itself", [], 0, 0, None),
             ("trainer fails with status 7", ["--fail-after", 16, "--exit-code", 7], 7, 7, None),
             ("trainer killed by SIGKILL", ["--die-after", 16], 137, None, "SIGKILL")]
    for i, (label, extra, want_rc, want_code, want_sig) in enumerate(cases):
        trial = os.path.join(tmp, "trial-end-%d" % i)
        args = ["run", "--trial", trial, "--rules", stop_rules(tmp), "--json",
                "--output", os.path.join(tmp, "out-end-%d" % i), "--"] + \
            trainer(HEALTHY, trial, "--step-delay", 0.05, *extra)
        r = result(spawn(smrules(*args), tmp, "end%d" % i), args)
        sc = c.scope("launch: " + label, r)
        if not sc.process():
            continue
        sc.eq("exit status", r.rc, want_rc)
        t = (r.obj or {}).get("training") or {}
        sc.eq("training.exit_code", t.get("exit_code"), want_code)
        sc.eq("training.signal", t.get("signal"), want_sig)
        sc.eq("training.stopped_by", t.get("stopped_by"), None)
        rules = (r.obj or {}).get("rules") or [{}]
        want = "NoIssuesFound" if not extra else "InProgress"
        sc.eq("rule status", rules[0].get("status"), want)
        sc.ok(os.path.exists(os.path.join(tmp, "out-end-%d" % i, "ExplodingTensor",
                                          "report.json")), "report written")


def test_errors(c, tmp):
    marker = os.path.join(tmp, "ran")
    r = lib.run_json(["run", "--trial", os.path.join(tmp, "never"), "--",
                      os.path.join(tmp, "no-such-program")])
    sc = c.scope("launch: command that cannot run", r)
    sc.eq("exit 127", r.rc, 127)
    sc.ok("cannot run" in r.err and "No such file" in r.err, "message", r.err.strip())
    bad = write(os.path.join(tmp, "bad.yaml"), "rules:\n  - rule: ExplodingTensor\n"
                "    parameters: {only_nan: maybe}\n")
    r = lib.run_json(["run", "--trial", os.path.join(tmp, "never"), "--rules", bad, "--",
                      "sh", "-c", "touch %s" % marker])
    sc = c.scope("launch: bad rules.yaml", r)
    sc.eq("exit 2", r.rc, 2)
    # a launched command shares smrules' stdout: run() returns at the EOF of
    # that pipe, so a command started would have finished by now
    sc.ok(not os.path.exists(marker), "the command was not started")
    r = lib.run_json(["run", "--trial", os.path.join(tmp, "never"), "--"])
    sc = c.scope("launch: '--' and no command", r)
    sc.eq("exit 2", r.rc, 2)
    sc.ok("training command" in r.err, "message", r.err.strip())
    r = lib.run_json(["run", "--trial", os.path.join(tmp, "never"), "--training-pid", "2",
                      "--", "true"])
    sc = c.scope("launch: --training-pid with a command", r)
    sc.eq("exit 2", r.rc, 2)


def test_init_error(c, tmp):
    trial, log = os.path.join(tmp, "trial-init"), os.path.join(tmp, "init.log")
    write(os.path.join(tmp, "init_fails.lua"),
          "function init(p)\n  error('cannot start')\nend\n"
          "function invoke_at_step(s) return false end\n")
    rules = write(os.path.join(tmp, "init.yaml"), "rules:\n  - lua: init_fails.lua\n")
    args = ["run", "--trial", trial, "--rules", rules, "--fresh", "--output",
            os.path.join(tmp, "out-init"), "--"] + \
        trainer(HEALTHY, trial, "--step-delay", 0.05, "--hang-after", 0, "--log", log)
    r = result(spawn(smrules(*args), tmp, "init"), args)
    sc = c.scope("errors: rule init fails once the trial exists", r)
    if not sc.process(want_json=False):
        return
    sc.eq("exit 2", r.rc, 2)
    sc.ok("cannot start" in r.err, "message", r.err.strip()[-300:])
    # the trainer hangs after step 0: had smrules waited for it, result()
    # would have timed out
    sc.ok(["signal", "SIGTERM"] in [e[:2] for e in log_lines(log)], "the trainer was stopped",
          str(log_lines(log)[-2:]))


def test_signals(c, tmp):
    for sig, want in ((signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)):
        name = signal.Signals(sig).name
        trial, log = os.path.join(tmp, "trial-" + name), os.path.join(tmp, name + ".log")
        args = ["run", "--trial", trial, "--rules", stop_rules(tmp), "--json",
                "--output", os.path.join(tmp, "out-" + name), "--"] + \
            trainer(HEALTHY, trial, "--step-delay", 0.05, "--hang-after", 8, "--log", log)
        p = spawn(smrules(*args), tmp, "sig-" + name)
        got_steps = wait_for(lambda: sum(e[0] == "index" for e in log_lines(log)) >= 2, 30)
        p.send_signal(sig)
        r = result(p, args)
        sc = c.scope("signals: %s to smrules" % name, r)
        sc.ok(got_steps, "the trainer wrote steps")
        if not sc.process():
            continue
        sc.eq("exit status (the trainer's)", r.rc, want)
        sc.ok(["signal", name] in [e[:2] for e in log_lines(log)],
              "forwarded to the trainer", str(log_lines(log)[-2:]))
        t = (r.obj or {}).get("training") or {}
        sc.eq("training.signal", t.get("signal"), name)
        sc.ok(os.path.exists(os.path.join(tmp, "out-" + name, "ExplodingTensor",
                                          "report.json")), "report written")


def test_pid(c, tmp):
    trial, log = os.path.join(tmp, "trial-pid"), os.path.join(tmp, "pid.log")
    t = spawn(trainer(EXPLODING, trial, "--step-delay", 0.05, "--hang-after", 6, "--log", log),
              tmp, "pid-trainer")
    wait_for(lambda: any(e[:2] == ["index", "6"] for e in log_lines(log)), 30)
    args = ["run", "--trial", trial, "--watch", "--training-pid", t.pid, "--json",
            "--fresh", "--output", os.path.join(tmp, "out-pid")]
    p = spawn(smrules(*args), tmp, "pid-watch")
    # the watch has read the trial once it prints its first progress line
    watching = wait_for(lambda: "steps seen" in open(p.err_path).read(), 30)
    t.kill()
    t.wait(10)
    r = result(p, args, timeout=30)  # no end marker, no --timeout: only the pid ends it
    sc = c.scope("pid: trainer killed, no end marker", r)
    sc.ok(watching, "the watch started", open(p.err_path).read()[-300:])
    if not sc.process():
        return
    sc.eq("exit 0 (no rule fired up to step 6)", r.rc, 0)
    sc.eq("training.ended_by", ((r.obj or {}).get("training") or {}).get("ended_by"),
          "trainer_exit")
    sc.eq("training.pid", ((r.obj or {}).get("training") or {}).get("pid"), t.pid)
    sc.ok(os.path.exists(os.path.join(tmp, "out-pid", "ExplodingTensor", "report.json")),
          "report written")
    rule = ((r.obj or {}).get("rules") or [{}])[0]
    sc.eq("evaluated steps", rule.get("evaluated_steps"), 4)
    with open(p.out_path.replace(".out", ".out")) as f:
        pass


def test_before(c, tmp):
    trial = os.path.join(tmp, "later", "trial")
    args = ["run", "--trial", trial, "--watch", "--json", "--fresh", "--timeout", 60,
            "--output", os.path.join(tmp, "out-before")]
    p = spawn(smrules(*args), tmp, "before")
    saw_line = wait_for(lambda: "waiting for a trial in" in open(p.err_path).read(), 30)
    sc0 = c.scope("before: --watch on a missing folder")
    sc0.ok(saw_line, "one line says what it waits for")
    sc0.ok(p.poll() is None, "still waiting")
    t = spawn(trainer(HEALTHY, trial, "--step-delay", 0.02), tmp, "before-trainer")
    r = result(p, args)
    sc = c.scope("before: trainer started after the watch", r)
    if sc.process():
        sc.eq("exit 0", r.rc, 0)
        sc.eq("training.ended_by", ((r.obj or {}).get("training") or {}).get("ended_by"),
              "end_marker")
        rule = ((r.obj or {}).get("rules") or [{}])[0]
        sc.eq("every step evaluated", rule.get("evaluated_steps"), 16)
        sc.eq("waiting lines", open(p.err_path).read().count("waiting for a trial"), 1)
    t.wait(10)
    # the launcher through a slow start (imports, data loading)
    trial = os.path.join(tmp, "slow", "trial")
    args = ["run", "--trial", trial, "--rules", stop_rules(tmp), "--json", "--fresh",
            "--output", os.path.join(tmp, "out-slow"), "--"] + \
        trainer(EXPLODING, trial, "--start-delay", 1.0, "--step-delay", 0.05, "--hang-after", 12)
    r = result(spawn(smrules(*args), tmp, "slow"), args)
    sc = c.scope("before: launched trainer that starts slowly", r)
    if sc.process():
        sc.eq("exit 1 (stopped)", r.rc, 1)
        sc.eq("stopped_by", ((r.obj or {}).get("training") or {}).get("stopped_by"),
              "ExplodingTensor")
    # a trainer that fails before writing anything
    trial = os.path.join(tmp, "never-written")
    args = ["run", "--trial", trial, "--", "sh", "-c", "exit 9"]
    r = result(spawn(smrules(*args), tmp, "early-fail"), args)
    sc = c.scope("before: trainer fails before writing a trial", r)
    sc.eq("its status", r.rc, 9)
    sc.ok("before writing a trial" in r.err, "message", r.err.strip())
    sc.ok(not os.path.exists(trial), "nothing created")


def listing(path):
    out = []
    for dirpath, dirs, files in os.walk(path):
        out += [os.path.relpath(os.path.join(dirpath, n), path) for n in dirs + files]
    return sorted(out)


def test_notrial(c, tmp):
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    parent = os.path.join(tmp, "parent")
    shutil.copytree(HEALTHY, os.path.join(parent, "the-trial"))
    prof = os.path.join(tmp, "prof")
    shutil.copytree(os.path.join(lib.FIXTURES, "profiler", os.listdir(
        os.path.join(lib.FIXTURES, "profiler"))[0]), prof)
    for label, folder in (("empty folder", empty), ("parent of a trial", parent),
                          ("missing folder", os.path.join(tmp, "missing"))):
        before = listing(folder) if os.path.isdir(folder) else None
        for extra in ([], ["--json"]):
            r = lib.run_json(["run", "--trial", folder] + extra)
            sc = c.scope("notrial: %s %s" % (label, " ".join(extra)), r)
            sc.eq("exit 3", r.rc, 3)
            sc.ok("expected" in r.err and folder in r.err, "message names what and where",
                  r.err.strip())
            after = listing(folder) if os.path.isdir(folder) else None
            sc.eq("nothing written", after, before)


def test_notrial_profiler(c, tmp):
    base = os.path.join(lib.FIXTURES, "profiler")
    prof = None
    for name in sorted(os.listdir(base)):
        cand = os.path.join(base, name)
        for sub in ("", "profiler-output"):
            d = os.path.join(cand, sub)
            if os.path.isdir(os.path.join(d, "system")) or os.path.isdir(os.path.join(d, "framework")):
                prof = d
                break
        if prof:
            break
    sc = c.scope("notrial: profiler-only folder")
    if not sc.ok(prof is not None, "a profiler fixture"):
        return
    copy = os.path.join(tmp, "profonly")
    shutil.copytree(prof, copy)
    before = listing(copy)
    r = lib.run_json(["run", "--trial", copy])  # the default rules read tensors
    sc = c.scope("notrial: profiler-only folder, tensor rules", r)
    sc.eq("exit 3", r.rc, 3)
    sc.ok("index/" in r.err, "message names index/", r.err.strip())
    sc.eq("nothing written", listing(copy), before)
    rules = write(os.path.join(tmp, "prof.yaml"), "rules:\n  - rule: CPUBottleneck\n")
    r = lib.run_json(["run", "--trial", copy, "--rules", rules, "--fresh", "--json",
                      "--output", os.path.join(tmp, "out-prof")])
    sc = c.scope("notrial: profiler-only folder, profiler rules", r)
    sc.ok(r.rc in (0, 1), "evaluated (exit 0 or 1)", "exit %d: %s" % (r.rc, r.err.strip()))
    rule = ((r.obj or {}).get("rules") or [{}])[0]
    sc.at_least(1, rule.get("evaluated_steps") or 0, "windows evaluated by CPUBottleneck")
    sc.at_least(1, lib.dig(rule, "report.Datapoints") or 0, "system-metric datapoints read")


def test_interrupt(c, tmp):
    src = EXPLODING
    for sig, want in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        name = signal.Signals(sig).name
        trial = os.path.join(tmp, "int-" + name)
        shutil.copytree(src, trial)
        os.unlink(os.path.join(trial, "training_job_end.ts"))
        state = os.path.join(tmp, "int-%s.db" % name)
        args = ["run", "--trial", trial, "--watch", "--state", state,
                "--output", os.path.join(tmp, "out-int-" + name)]
        p = spawn(smrules(*args), tmp, "int-" + name)
        ok = wait_for(lambda: "ExplodingTensor" in open(p.out_path).read(), 30)
        p.send_signal(sig)
        r = result(p, args, timeout=20)
        sc = c.scope("interrupt: %s on --watch" % name, r)
        sc.ok(ok, "watch started")
        if not sc.process(want_json=False):
            continue
        sc.eq("exit status", r.rc, want)
        sc.ok("TRIGGERED AT" in r.out, "table printed", lib.short(r.out[-300:], 300))
        sc.ok("interrupted by " + name in r.out, "says it was interrupted", lib.short(r.out[-200:]))
        sc.ok(os.path.exists(os.path.join(tmp, "out-int-" + name, "ExplodingTensor",
                                          "report.json")), "report written")
        sc.ok(os.path.exists(state), "state written")


def test_exitcodes(c, tmp):
    lua_err = write(os.path.join(tmp, "boom.lua"),
                    "function invoke_at_step(step)\n  error('boom')\nend\n")
    hook = ("actions:\n  hooks:\n    fail: {type: exec, argv: [sh, -c, 'exit 3'], retries: 0}\n")
    cases = [
        ("issues only", "rules:\n  - rule: ExplodingTensor\n", 1),
        ("rule error and issues", "rules:\n  - rule: ExplodingTensor\n  - lua: %s\n" % lua_err, 5),
        ("failed action and issues",
         "rules:\n  - rule: ExplodingTensor\n    actions: [fail]\n" + hook, 4),
        ("rule error, failed action and issues",
         "rules:\n  - rule: ExplodingTensor\n    actions: [fail]\n  - lua: %s\n" % lua_err + hook, 5),
    ]
    for i, (label, text, want) in enumerate(cases):
        rules = write(os.path.join(tmp, "ec%d.yaml" % i), text)
        r = lib.run_json(["run", "--trial", EXPLODING, "--rules", rules, "--fresh", "--json",
                          "--output", os.path.join(tmp, "out-ec%d" % i)])
        sc = c.scope("exitcodes: " + label, r)
        if sc.process():
            sc.eq("exit status", r.rc, want)


def test_stable(c, tmp):
    trial = os.path.join(tmp, "stable")
    os.makedirs(trial)
    shutil.copytree(os.path.join(EXPLODING, "collections"), os.path.join(trial, "collections"))
    steps = sorted(os.listdir(os.path.join(EXPLODING, "events")))
    state = os.path.join(tmp, "stable.db")
    seen = []
    for upto in (10, 14, 18):
        for s in steps:
            if int(s) > upto:
                continue
            for kind in ("events", "index"):
                pass
        # copy events then index up to `upto`
        for s in steps:
            if int(s) <= upto and not os.path.isdir(os.path.join(trial, "events", s)):
                shutil.copytree(os.path.join(EXPLODING, "events", s),
                                os.path.join(trial, "events", s))
        os.makedirs(os.path.join(trial, "index", "000000000"), exist_ok=True)
        for name in sorted(os.listdir(os.path.join(EXPLODING, "index", "000000000"))):
            if int(name.split("_")[0]) <= upto:
                shutil.copy(os.path.join(EXPLODING, "index", "000000000", name),
                            os.path.join(trial, "index", "000000000", name))
        for rep in range(2):
            r = lib.run_json(["run", "--trial", trial, "--live", "--json", "--state", state,
                              "--output", os.path.join(tmp, "out-stable")])
            rule = ((r.obj or {}).get("rules") or [{}])[0]
            seen.append((upto, rep, r.rc, rule.get("status")))
    sc = c.scope("stable: --live runs on the same state")
    sc.ok(all(s[3] == "IssuesFound" and s[2] == 1 for s in seen),
          "IssuesFound and exit 1 in every run", str(seen))


def test_progress(c, tmp):
    import pty
    args = ["run", "--trial", HEALTHY, "--fresh", "--output", os.path.join(tmp, "out-pg")]
    master, slave = pty.openpty()
    p = subprocess.Popen(smrules(*args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=slave, cwd=lib.ROOT)
    os.close(slave)
    data = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    out = p.communicate(timeout=60)[0].decode()
    os.close(master)
    text = data.decode("utf-8", "replace")
    sc = c.scope("progress: offline run, stderr on a terminal")
    sc.eq("exit 0", p.returncode, 0)
    sc.ok("evaluating: 32/32 steps (100%)" in text, "progress line (16 + 16 steps)", repr(text[-200:]))
    sc.ok(text.endswith("\r\033[K"), "the line is cleared at the end", repr(text[-40:]))
    sc.ok("evaluating" not in out, "nothing on stdout", out[-200:])
    r = lib.run_json(args)
    sc = c.scope("progress: stderr not a terminal", r)
    sc.ok("evaluating" not in r.err, "no progress line", r.err[-200:])


def test_heartbeat(c, tmp):
    trial = os.path.join(tmp, "hb")
    shutil.copytree(HEALTHY, trial)
    os.unlink(os.path.join(trial, "training_job_end.ts"))
    line = (r" watching: steps seen: 16 \(latest 101\), "
            r"triggers so far: 0 \(0 of 2 rules\)")
    # --heartbeat 1: the test waits for two status lines, then interrupts
    p = lib.Running(["run", "--trial", trial, "--watch", "--fresh", "--heartbeat", "1",
                     "--output", os.path.join(tmp, "out-hb")])
    two = p.wait_count(line, 2, stream="stdout")
    p.signal(signal.SIGINT)
    rc, out, err = p.finish()
    sc = c.scope("heartbeat: --heartbeat 1")
    sc.ok(two, "a status line while nothing changes, again and again", out[-300:])
    sc.eq("interrupted: exit 130", rc, 130)
    # --heartbeat 0: none, over a watch that ends by --timeout
    r = lib.run_json(["run", "--trial", trial, "--watch", "--fresh", "--timeout", "2.5",
                      "--heartbeat", "0", "--output", os.path.join(tmp, "out-hb0")])
    sc = c.scope("heartbeat: --heartbeat 0", r)
    if sc.process(want_json=False):
        sc.eq("no status line", len(re.findall(line, r.out)), 0)
        sc.ok(" watching: " not in r.out, "nothing like one", r.out[-300:])
    r = lib.run_json(["run", "--trial", trial, "--watch", "--heartbeat", "x"])
    c.scope("heartbeat: bad value", r).eq("exit 2", r.rc, 2)


def main():
    c = lib.Checker("test_launcher")
    tmp = tempfile.mkdtemp(prefix="smrules-launch-")
    try:
        for fn in (test_launch_stop, test_launch_table, test_launch_ends, test_errors, test_init_error,
                   test_signals, test_pid, test_before, test_notrial, test_notrial_profiler,
                   test_interrupt, test_exitcodes, test_stable, test_heartbeat, test_progress):
            if lib.CASE_FILTER and lib.CASE_FILTER not in fn.__name__:
                continue
            fn(c, tmp)
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
