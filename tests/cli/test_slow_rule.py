#!/usr/bin/env python3
"""One slow rule never delays another rule's actions in a live run
(docs/live.md#one-slow-rule-delays-no-other).

A rule that is still computing — here the test rule Gate
(tests/cli/plugins/gate.c), holding step 2 until the test creates a file,
the deterministic stand-in for a script that takes long — sits beside
ExplodingTensor with StopTraining, over a stand-in trainer
(standin_trainer.py) whose tensors explode at step 8 and which hangs after
step 12, so that only StopTraining ends it.  The trainer also holds after
step 6 until Gate holds, so the steps that fire arrive while Gate holds
(the watch must read them then):

  launch  `run -- TRAINER`: the trainer gets SIGTERM while Gate still
          holds its step (smrules is still running, the release file does
          not exist); once released, Gate walks the rest and the run ends
          with exit 1, one StopTraining ok at step 8, Gate's report
  watch   the same with `run --watch --training-pid PID` beside a trainer
          started first
  lua     the attack docs/security.md describes: Lua rules whose calls are cheap in
          instructions but dear in C (string.byte over a whole string, a
          back-reference pattern), in a loop at every step: each ends at
          its instruction limit (Error), ExplodingTensor stops the trainer
          at step 8, exit 5 (before: the scripts ran for hours within
          their budgets)
  clock   the slow rule is on the clock (tests/cli/plugins/slow_clock.c:
          its first invoke_at_time holds until a file appears), in both
          modes: the watch's ticks no longer run on the watch's thread

Without a thread per rule, the held step held every rule: the trainer was
never stopped and the test failed at its hang guard.  No check depends on
how fast the machine is: each wait is for a line, a log entry or an exit,
and its limit is only a guard against a hang.
"""

import json
import os
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
STANDIN = [sys.executable, os.path.join(HERE, "standin_trainer.py")]
EXPLODING = os.path.join(lib.FIXTURES, "trials", "exploding_mse_high_lr")
PLUGINS = os.path.join(os.path.dirname(lib.SMRULES), "tests", "plugins")
GATE = os.path.join(PLUGINS, "gate.so")
SLOW_CLOCK = os.path.join(PLUGINS, "slow_clock.so")
HOLDING = {"gate": r"^gate: holding step 2$", "clock": r"^slow_clock: holding$"}
HOLD_AT = 2
TRAINER_HOLD = 6  # before the trigger step, 8
HANG_AFTER = 12
GUARD = 120.0  # a hang guard, never a pace


write = lib.write_text


def rules(tmp, release, slow):
    if slow == "gate":
        rule = ("  - plugin: %s\n    name: gate\n    parameters:\n"
                "      hold_at: %d\n      release: %s\n" % (GATE, HOLD_AT, release))
    else:
        rule = ("  - plugin: %s\n    name: gate\n    parameters:\n"
                "      release: %s\n" % (SLOW_CLOCK, release))
    return write(os.path.join(tmp, "rules.yaml"),
                 "rules:\n" + rule +
                 "  - rule: ExplodingTensor\n    actions: [StopTraining]\n")


def trainer_args(trial, log):
    return STANDIN + ["--source", EXPLODING, "--out", trial, "--step-delay", "0.02",
                      "--hold-after", str(TRAINER_HOLD), "--release", log + ".go",
                      "--hang-after", str(HANG_AFTER), "--log", log]


def signals(log):
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return [line.split()[1] for line in f if line.startswith("signal ")]


def wait_for(pred, limit=GUARD):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def check_run(sc, p, log, release, slow):
    """The stop arrives while the slow rule holds; then the release ends
    the run."""
    held = p.wait_line(HOLDING[slow], limit=GUARD)
    if not sc.ok(held is not None, "the slow rule holds",
                 lib.short("".join(p.err_lines), 400)):
        return None
    write(log + ".go", "")  # the trainer goes on to the exploding steps
    stopped = wait_for(lambda: "SIGTERM" in signals(log) or p.proc.poll() is not None)
    sc.ok(stopped and "SIGTERM" in signals(log),
          "the trainer gets SIGTERM while the slow rule still holds",
          "signals %s; smrules: %s" % (signals(log), lib.short("".join(p.err_lines), 400)))
    # the benign control: the slow rule really was holding when the stop went out
    sc.ok(not os.path.exists(release), "the release file did not exist yet", release)
    sc.ok(p.proc.poll() is None, "smrules still runs: it waits for the held rule", "")
    write(release, "")
    rc, out, err = p.finish(GUARD)
    sc.eq("exit 1 (issues found, training stopped)", rc, 1)
    try:
        return json.loads(out)
    except ValueError:
        sc.ok(False, "JSON on stdout", lib.short(out + err, 400))
        return None


def check_results(sc, obj, slow):
    if obj is None:
        return
    by_name = {r.get("name"): r for r in obj.get("rules") or []}
    ex, gate = by_name.get("ExplodingTensor") or {}, by_name.get("gate") or {}
    sc.eq("ExplodingTensor status", ex.get("status"), "IssuesFound")
    sc.eq("ExplodingTensor first trigger", ex.get("first_trigger_step"), 8)
    acts = [a for a in obj.get("actions") or [] if a.get("action") == "StopTraining"]
    sc.ok(len(acts) == 1 and acts[0].get("outcome") == "ok" and acts[0].get("step") == 8,
          "one StopTraining, ok, at step 8", lib.short(acts))
    sc.ok(gate.get("status") in ("NoIssuesFound", "InProgress", "NoData"),
          "the slow rule did not fail", lib.short(gate))
    if slow == "gate":
        sc.ok((gate.get("evaluated_steps") or 0) > HOLD_AT,
              "Gate went on past the held step once released", lib.short(gate))


def test_launch(c, tmp, slow):
    trial, log = os.path.join(tmp, "trial"), os.path.join(tmp, "trainer.log")
    release = os.path.join(tmp, "release")
    p = lib.Running(["run", "--trial", trial, "--rules", rules(tmp, release, slow), "--json",
                     "--output", os.path.join(tmp, "out"), "--state",
                     os.path.join(tmp, "state.db"), "--"] + trainer_args(trial, log))
    sc = c.scope("launch: a held %s rule beside ExplodingTensor + StopTraining" % slow)
    try:
        check_results(sc, check_run(sc, p, log, release, slow), slow)
    finally:
        if p.proc.poll() is None:
            write(release, "")
            write(log + ".go", "")
            p.finish(GUARD)


def test_watch(c, tmp, slow):
    trial, log = os.path.join(tmp, "trial"), os.path.join(tmp, "trainer.log")
    release = os.path.join(tmp, "release")
    import subprocess
    t = subprocess.Popen(trainer_args(trial, log), stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sc = c.scope("watch: a held %s rule beside ExplodingTensor + StopTraining" % slow)
    p = None
    try:
        if not sc.ok(wait_for(lambda: os.path.isdir(os.path.join(trial, "index"))),
                     "the trainer starts writing", trial):
            return
        p = lib.Running(["run", "--trial", trial, "--watch", "--training-pid", str(t.pid),
                         "--rules", rules(tmp, release, slow), "--json", "--output",
                         os.path.join(tmp, "out"), "--state", os.path.join(tmp, "state.db")])
        check_results(sc, check_run(sc, p, log, release, slow), slow)
        try:
            trc = t.wait(GUARD)
        except subprocess.TimeoutExpired:
            trc = None
        sc.ok(trc is not None and trc != 0, "the trainer was ended by the stop", str(trc))
    finally:
        if p is not None and p.proc.poll() is None:
            write(release, "")
            write(log + ".go", "")
            p.finish(GUARD)
        if t.poll() is None:
            t.kill()
            t.wait()


ATTACKS = {
    "byte_loop": "local s = ('x'):rep(60000)\n"
                 "function invoke_at_step(step)\n"
                 "  for i = 1, 1e7 do local _ = s:byte(1, -1) end\n"
                 "  return false\nend\n",
    "backref_loop": "local s = ('a'):rep(20000)\n"
                    "function invoke_at_step(step)\n"
                    "  for i = 1, 1e7 do s:find('(.*)%1x') end\n"
                    "  return false\nend\n",
}


def test_lua_attack(c, tmp):
    trial, log = os.path.join(tmp, "trial"), os.path.join(tmp, "trainer.log")
    lines = ["rules:"]
    for name, code in sorted(ATTACKS.items()):
        lines.append("  - lua: %s\n    name: %s" % (write(os.path.join(tmp, name + ".lua"), code),
                                                   name))
    lines.append("  - rule: ExplodingTensor\n    actions: [StopTraining]\n")
    rules_path = write(os.path.join(tmp, "rules.yaml"), "\n".join(lines))
    args = STANDIN + ["--source", EXPLODING, "--out", trial, "--step-delay", "0.02",
                      "--hang-after", str(HANG_AFTER), "--log", log]
    p = lib.Running(["run", "--trial", trial, "--rules", rules_path, "--json", "--output",
                     os.path.join(tmp, "out"), "--state", os.path.join(tmp, "state.db"),
                     "--"] + args)
    rc, out, err = p.finish(GUARD)
    sc = c.scope("lua: rules dear in C beside ExplodingTensor + StopTraining")
    sc.eq("exit 5 (a rule failed)", rc, 5)
    sc.ok("SIGTERM" in signals(log), "the trainer got SIGTERM", str(signals(log)))
    try:
        obj = json.loads(out)
    except ValueError:
        sc.ok(False, "JSON on stdout", lib.short(out + err, 400))
        return
    by_name = {r.get("name"): r for r in obj.get("rules") or []}
    for name in sorted(ATTACKS):
        r = by_name.get(name) or {}
        sc.ok(r.get("status") == "Error" and
              "instruction limit of 10000000 exceeded" in (r.get("message") or ""),
              "%s ends at its instruction limit" % name, lib.short(r))
    ex = by_name.get("ExplodingTensor") or {}
    sc.eq("ExplodingTensor first trigger", ex.get("first_trigger_step"), 8)
    acts = [a for a in obj.get("actions") or [] if a.get("action") == "StopTraining"]
    sc.ok(len(acts) == 1 and acts[0].get("outcome") == "ok", "one StopTraining, ok",
          lib.short(acts))


def main():
    c = lib.Checker("test_slow_rule")
    if c.ok(os.path.exists(GATE) and os.path.exists(SLOW_CLOCK),
            "the test rules Gate and SlowClock are built", PLUGINS):
        for slow in ("gate", "clock"):
            for fn in (test_launch, test_watch):
                with tempfile.TemporaryDirectory(prefix="smrules-slow-") as tmp:
                    fn(c, tmp, slow)
    with tempfile.TemporaryDirectory(prefix="smrules-slow-") as tmp:
        test_lua_attack(c, tmp)
    c.finish()


if __name__ == "__main__":
    main()
