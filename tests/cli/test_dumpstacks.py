#!/usr/bin/env python3
"""End-to-end: DumpStacks (docs/actions.md#dumpstacks) keeps the stacks of a
hung trainer before StopTraining stops it.

  dump   `run --rules r.yaml -- python3 stacks_trainer.py` (a trainer that
         registered faulthandler on SIGUSR1, writes the exploding trial and
         then blocks in fake_allreduce): ExplodingTensor fires, its actions
         [DumpStacks, StopTraining] run in that order; the stacks file under
         the rule's output folder names fake_allreduce, the action outcome
         names the file, and the trainer is stopped (exit 1).
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


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def test_dump(c, tmp):
    trial, out = os.path.join(tmp, "trial"), os.path.join(tmp, "out")
    rules = write(os.path.join(tmp, "rules.yaml"),
                  "rules:\n  - rule: ExplodingTensor\n    actions: [DumpStacks, StopTraining]\n"
                  "actions:\n  DumpStacks: {timeout_seconds: 60}\n")
    p = lib.Running(["run", "--trial", trial, "--rules", rules, "--json", "--output", out,
                     "--", sys.executable, os.path.join(HERE, "stacks_trainer.py"),
                     "--source", EXPLODING, "--out", trial], cwd=tmp)
    rc, stdout, stderr = p.finish(limit=max(lib.TIMEOUT, 120))
    sc = c.scope("dump: stacks of a hung trainer, then stopped")
    sc.eq("exit 1 (issues found, training stopped)", rc, 1)
    try:
        obj = json.loads(stdout[stdout.index('{"'):])
    except ValueError:
        sc.ok(False, "JSON on stdout", stdout[-500:] + stderr[-500:])
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
        for fn in (test_dump, test_target):
            if lib.CASE_FILTER and lib.CASE_FILTER not in fn.__name__:
                continue
            fn(c, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
