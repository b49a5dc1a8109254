#!/usr/bin/env python3
"""End-to-end: DumpStacks (docs/actions.md#dumpstacks) keeps the stacks of a
hung trainer before StopTraining stops it.

  dump   `run --rules r.yaml -- python3 stacks_trainer.py` (a trainer that
         registered faulthandler on SIGUSR1, writes the exploding trial and
         then blocks in fake_allreduce): ExplodingTensor fires, its actions
         [DumpStacks, StopTraining] run in that order; the stacks file under
         the rule's output folder names fake_allreduce, the action outcome
         names the file, and the trainer is stopped (exit 1).
  command DumpStacks with `command:` runs that program instead of the
         signal, {pid} replaced: /bin/cat /proc/{pid}/status (always there)
         keeps the trainer's own status (its Pid line), and gdb, where it is
         installed and may attach, keeps a backtrace of every thread; a
         command that fails is reported failed, and StopTraining still runs.
  target DumpStacks without a training process (no `--`, no --training-pid)
         is a configuration error: exit 2, saying why.

Waits for the exit only (the trainer hangs until stopped; the limits are
hang guards).
"""

import json
import os
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXPLODING = os.path.join(lib.FIXTURES, "trials", "exploding_mse_high_lr")


write = lib.write_text


def stacks_trainer(d, trial, rules, out):
    """`run -- stacks_trainer.py` in d, writing the exploding trial into
    `trial`; it hangs in fake_allreduce until the actions stop it."""
    return lib.launch(["--trial", trial, "--rules", rules, "--json", "--output", out],
                      os.path.join(HERE, "stacks_trainer.py"),
                      ["--source", EXPLODING, "--out", trial], cwd=d)


def test_dump(c, tmp):
    trial, out = os.path.join(tmp, "trial"), os.path.join(tmp, "out")
    rules = write(os.path.join(tmp, "rules.yaml"),
                  "rules:\n  - rule: ExplodingTensor\n    actions: [DumpStacks, StopTraining]\n"
                  "actions:\n  DumpStacks: {timeout_seconds: 60}\n")
    rc, obj, text = stacks_trainer(tmp, trial, rules, out).finish_json()
    sc = c.scope("dump: stacks of a hung trainer, then stopped")
    sc.eq("exit 1 (issues found, training stopped)", rc, 1)
    if obj is None:
        sc.ok(False, "JSON on stdout", text[-1000:])
        return
    acts = obj.get("actions") or []
    names = [a.get("action") for a in acts]
    sc.eq("DumpStacks, then StopTraining", names, ["DumpStacks", "StopTraining"])
    dump = [a for a in acts if a.get("action") == "DumpStacks"]
    sc.ok(dump and dump[0].get("outcome") == "ok", "DumpStacks ok", json.dumps(acts)[:600])
    path = None
    if dump:
        detail = dump[0].get("detail") or ""
        path = detail.rsplit(" in ", 1)[-1] if " in " in detail else None
    sc.ok(path and path.startswith(os.path.join(out, "ExplodingTensor") + os.sep),
          "the stacks are under the rule's output folder", str(path))
    text = ""
    if path and os.path.exists(path):
        with open(path) as f:
            text = f.read()
    sc.ok("fake_allreduce" in text, "the stacks name the hanging function", text[:600])
    sc.ok(text.count("Thread 0x") + text.count("Current thread 0x") >= 2,
          "every thread is shown", text[:600])
    stop = [a for a in acts if a.get("action") == "StopTraining"]
    sc.ok(stop and stop[0].get("outcome") == "ok", "StopTraining ok", json.dumps(stop)[:300])


def dump_with(tmp, name, settings):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    trial, out = os.path.join(d, "trial"), os.path.join(d, "out")
    rules = write(os.path.join(d, "rules.yaml"),
                  "rules:\n  - rule: ExplodingTensor\n    actions: [DumpStacks, StopTraining]\n"
                  "actions:\n  DumpStacks: %s\n" % settings)
    rc, obj, text = stacks_trainer(d, trial, rules, out).finish_json()
    obj = obj or {}
    acts = {a.get("action"): a for a in obj.get("actions") or []}
    return rc, acts, obj.get("training") or {}, out, text


def kept(detail):
    path = detail.rsplit(" in ", 1)[-1] if " in " in detail else None
    if path and os.path.exists(path):
        with open(path) as f:
            return path, f.read()
    return path, ""


def test_command(c, tmp):
    rc, acts, training, out, text = dump_with(
        tmp, "cat", "{command: [/bin/cat, '/proc/{pid}/status'], timeout_seconds: 60}")
    sc = c.scope("command: /bin/cat /proc/{pid}/status instead of the signal")
    sc.eq("exit 1", rc, 1)
    dump = acts.get("DumpStacks") or {}
    sc.eq("DumpStacks ok", dump.get("outcome"), "ok")
    path, body = kept(dump.get("detail") or "")
    sc.ok(path and path.startswith(os.path.join(out, "ExplodingTensor") + os.sep) and
          " from /bin/cat in " in dump.get("detail", ""), "kept under the rule's folder",
          dump.get("detail") or text[-500:])
    sc.ok("Pid:\t%s\n" % training.get("pid") in body, "{pid} was the trainer's", body[:300])
    sc.eq("StopTraining ok", (acts.get("StopTraining") or {}).get("outcome"), "ok")

    rc, acts, training, out, text = dump_with(
        tmp, "false", "{command: '/bin/sh -c exit\\ 3', timeout_seconds: 60}")
    sc = c.scope("command: a program that fails")
    dump = acts.get("DumpStacks") or {}
    sc.eq("DumpStacks failed", dump.get("outcome"), "failed")
    sc.eq("StopTraining still ok", (acts.get("StopTraining") or {}).get("outcome"), "ok")

    gdb = shutil.which("gdb")
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            scope = int(f.read())
    except (OSError, ValueError):
        scope = 0
    if not gdb or (scope > 0 and os.geteuid() != 0):
        print("test_dumpstacks: gdb missing or not allowed to attach: gdb case skipped")
        return
    rc, acts, training, out, text = dump_with(
        tmp, "gdb", "{command: [%s, -batch, -p, '{pid}', -ex, 'thread apply all bt'], "
        "timeout_seconds: 120}" % gdb)
    sc = c.scope("command: gdb -batch -p {pid} -ex 'thread apply all bt'")
    dump = acts.get("DumpStacks") or {}
    sc.eq("DumpStacks ok", dump.get("outcome"), "ok")
    path, body = kept(dump.get("detail") or "")
    sc.ok(body.count("\nThread ") >= 2 and "#0 " in body, "a backtrace of every thread",
          body[:600] or text[-600:])


def test_target(c, tmp):
    trial = os.path.join(tmp, "copy")
    shutil.copytree(EXPLODING, trial)
    rules = write(os.path.join(tmp, "rules-t.yaml"),
                  "rules:\n  - rule: ExplodingTensor\n    actions: [DumpStacks]\n")
    r = lib.run_json(["run", "--trial", trial, "--rules", rules,
                      "--output", os.path.join(tmp, "out-t")])
    sc = c.scope("target: DumpStacks without a training process", r)
    sc.eq("exit 2", r.rc, 2)
    sc.ok("DumpStacks needs the training process" in r.err, "says why", r.err[-300:])


def main():
    c = lib.Checker("test_dumpstacks")
    tmp = tempfile.mkdtemp(prefix="smrules-stacks-")
    try:
        for fn in (test_dump, test_command, test_target):
            if lib.CASE_FILTER and lib.CASE_FILTER not in fn.__name__:
                continue
            fn(c, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
