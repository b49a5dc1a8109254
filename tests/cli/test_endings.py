#!/usr/bin/env python3
"""Every ending explained: how a `run` that follows training
ends is printed, and --timeout has its own exit status, 124 (as timeout(1)).

  term       `run --timeout S -- TRAINER`, a trainer that exits 0 on
             SIGTERM (as a script using smdebug's hook may): the table
             says it exited with status 0 and that --timeout sent SIGTERM
             to its process group and it exited within the grace; exit 124
  ignore     the same with a trainer that ignores SIGTERM and
             --kill-after 1: "killed by SIGKILL", the line says SIGKILL
             followed the grace; --json's training.timeout says so; 124
  pid        `--watch --training-pid PID --timeout S`: the process smrules
             did not start is left running, and the line says so; 124
  notrial    a command that never writes a trial: "no trial appeared",
             what was done to the command; 124
  final      a live run ending (here by --timeout) shows the final state
             once: no "waiting for step N" under a rule with a final
             status, no progress line printed twice

The stand-in trainer (standin_trainer.py) hangs after a step and logs each
signal; a test waits for its log lines, never for a duration.  The only
time assumed is that python starts within the --timeout (a trainer killed
before it installed its SIGTERM handler would show as killed by SIGTERM).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
STANDIN = [sys.executable, os.path.join(HERE, "standin_trainer.py")]
EXPLODING = os.path.join(lib.FIXTURES, "trials", "exploding_mse_high_lr")
TIMEOUT_S = "6"  # long beside python's start-up; the trainer hangs anyway


def trainer(out, log, on_sigterm, hang_after=2):
    return STANDIN + ["--source", EXPLODING, "--out", out, "--step-delay", "0",
                      "--hang-after", str(hang_after), "--on-sigterm", on_sigterm,
                      "--log", log]


def log_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def wait_for_log(path, word, limit=lib.TIMEOUT):
    """Wait until the trainer logged a line starting with `word`."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if any(ln.startswith(word) for ln in log_text(path).splitlines()):
            return True
        time.sleep(0.02)
    return False


def run_launched(tmp, name, on_sigterm, extra):
    trial = os.path.join(tmp, name)
    log = os.path.join(tmp, name + ".log")
    args = (["run", "--trial", trial, "--fresh", "--timeout", TIMEOUT_S] + extra
            + ["--output", os.path.join(tmp, name + "-out"), "--"]
            + trainer(trial, log, on_sigterm))
    return lib.run_json(args, timeout=lib.TIMEOUT + 30), log


def test_term(c, tmp):
    r, log = run_launched(tmp, "term", "exit0", ["--kill-after", "60"])
    sc = c.scope("term: trainer exits 0 on SIGTERM", r)
    if not sc.process(want_json=False):
        return
    sc.eq("exit 124", r.rc, 124)
    sc.ok("signal SIGTERM" in log_text(log), "the trainer got SIGTERM", log_text(log)[-200:])
    sc.ok(re.search(r"^training: pid \d+ exited with status 0$", r.out, re.M),
          "the training line", r.out[-400:])
    sc.ok(re.search(r"^timeout: --timeout 6 s passed; SIGTERM sent to the command's "
                    r"process group, which exited within the 60 s grace \(exit 124\)$",
                    r.out, re.M), "the timeout line says what was done", r.out[-400:])
    sc.ok("SIGKILL" not in r.out, "no SIGKILL", r.out[-400:])
    sc.ok(re.search(r"--timeout 6 s passed: SIGTERM sent to the training command", r.err),
          "stderr says it when it happens", r.err[-400:])


def test_ignore(c, tmp):
    r, log = run_launched(tmp, "ignore", "ignore", ["--kill-after", "1"])
    sc = c.scope("ignore: trainer ignores SIGTERM", r)
    if sc.process(want_json=False):
        sc.eq("exit 124", r.rc, 124)
        sc.ok("signal SIGTERM" in log_text(log), "the trainer got SIGTERM (and went on)",
              log_text(log)[-200:])
        sc.ok(re.search(r"^training: pid \d+ killed by SIGKILL$", r.out, re.M),
              "the training line", r.out[-400:])
        sc.ok(re.search(r"^timeout: --timeout 6 s passed; SIGTERM sent to the command's "
                        r"process group, still running 1 s later: SIGKILL sent \(exit 124\)$",
                        r.out, re.M), "the timeout line says SIGKILL followed", r.out[-400:])
    r, log = run_launched(tmp, "ignore-json", "ignore", ["--kill-after", "1", "--json"])
    sc = c.scope("ignore --json", r)
    if not sc.process():
        return
    sc.eq("exit 124", r.rc, 124)
    tr = (r.obj or {}).get("training") or {}
    sc.eq("training.ended_by", tr.get("ended_by"), "timeout")
    sc.eq("training.signal", tr.get("signal"), "SIGKILL")
    sc.eq("training.timeout", tr.get("timeout"),
          {"seconds": 6, "sent": "SIGTERM,SIGKILL", "grace_seconds": 1})


def test_pid(c, tmp):
    trial = os.path.join(tmp, "pid")
    log = os.path.join(tmp, "pid.log")
    t = subprocess.Popen(trainer(trial, log, "default"), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        started = wait_for_log(log, "index 2")
        sc = c.scope("pid: a watched --training-pid")
        if not sc.ok(started, "the trainer wrote step 2", log_text(log)):
            return
        r = lib.run_json(["run", "--trial", trial, "--fresh", "--watch", "--training-pid",
                     str(t.pid), "--timeout", "1", "--output", os.path.join(tmp, "pid-out")])
        sc = c.scope("pid: a watched --training-pid", r)
        if not sc.process(want_json=False):
            return
        sc.eq("exit 124", r.rc, 124)
        sc.ok(t.poll() is None, "the process smrules did not start is still running")
        sc.ok("signal" not in log_text(log), "it got no signal", log_text(log))
        sc.ok(re.search(r"^training: pid %d still running when --timeout passed$" % t.pid,
                        r.out, re.M), "the training line", r.out[-400:])
        sc.ok(re.search(r"^timeout: --timeout 1 s passed; smrules did not start pid %d: it "
                        r"was left running \(exit 124\)$" % t.pid, r.out, re.M),
              "the timeout line", r.out[-400:])
    finally:
        t.kill()
        t.wait()


def test_notrial(c, tmp):
    trial = os.path.join(tmp, "never")
    args = ["run", "--trial", trial, "--fresh", "--timeout", "1", "--kill-after", "30",
            "--", "sleep", "600"]
    r = lib.run_json(args, timeout=lib.TIMEOUT + 30)
    sc = c.scope("notrial: the command never writes a trial", r)
    if not sc.process(want_json=False):
        return
    sc.eq("exit 124", r.rc, 124)
    sc.ok("no trial appeared within 1 s" in r.err, "says no trial appeared", r.err[-400:])
    sc.ok(re.search(r"training: pid \d+ killed by SIGTERM \(SIGTERM sent\)", r.err),
          "says what was done to the command", r.err[-400:])
    sc.ok(not os.path.exists(trial), "nothing created there")


def test_final(c, tmp):
    trial = os.path.join(tmp, "final")
    shutil.copytree(EXPLODING, trial)
    os.unlink(os.path.join(trial, "training_job_end.ts"))  # never ends
    r = lib.run_json(["run", "--trial", trial, "--fresh", "--watch", "--timeout", "1",
                 "--output", os.path.join(tmp, "final-out")])
    sc = c.scope("final: the end of a live run", r)
    if not sc.process(want_json=False):
        return
    sc.eq("exit 124", r.rc, 124)
    lines = r.out.splitlines()
    rows = {}
    for i, ln in enumerate(lines):
        m = re.match(r"^(ExplodingTensor|VanishingGradient) +\S+ +(\S+) ", ln)
        if m:
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            rows[m.group(1)] = (m.group(2), nxt.strip().startswith("waiting for step"))
    sc.eq("statuses", {k: v[0] for k, v in rows.items()},
          {"ExplodingTensor": "IssuesFound", "VanishingGradient": "InProgress"})
    sc.eq("ExplodingTensor (IssuesFound) waits for no step",
          rows.get("ExplodingTensor", (None, None))[1], False)
    sc.eq("VanishingGradient (InProgress) says which step it waits for",
          rows.get("VanishingGradient", (None, None))[1], True)
    progress = [re.sub(r"^\d\d:\d\d:\d\d ", "", ln) for ln in lines
                if re.match(r"^\d\d:\d\d:\d\d steps seen:", ln)]
    sc.ok(progress, "progress lines printed", r.out[-400:])
    twice = [ln for i, ln in enumerate(progress) if ln in progress[:i]]
    sc.eq("no progress line printed twice", twice, [])


def main():
    c = lib.Checker("test_endings")
    tmp = tempfile.mkdtemp(prefix="smrules-endings-")
    try:
        for fn in (test_term, test_ignore, test_pid, test_notrial, test_final):
            if lib.CASE_FILTER and lib.CASE_FILTER not in fn.__name__:
                continue
            fn(c, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
