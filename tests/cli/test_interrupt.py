#!/usr/bin/env python3
"""An offline `smrules run` interrupted by SIGINT or SIGTERM (docs/cli.md,
exit status): it says at once what it will do, finishes the step in hand,
writes every report and the state, prints the table with the rules that
did not finish as InProgress, and exits 128+N; a later run over the same
state goes on from there and finishes.  A second signal stops it at once.

No check depends on how fast the machine is: the test rule Gate
(tests/cli/plugins/gate.c) holds one step until the test creates a file,
and the test sends each signal after the line that shows the run is where
it must be."""

import json
import os
import signal
import subprocess
import tempfile

import lib

BUILD = os.path.dirname(lib.SMRULES)
TRAINER = os.path.join(BUILD, "demo-trainer")
GATE = os.path.join(BUILD, "tests", "plugins", "gate.so")
STEPS = 40
HOLD_AT = 10
HOLDING = r"^gate: holding step %d$"
STOPPING = r"received: finishing the step in hand"

# counts the steps it evaluated, kept across runs by its saved state
COUNTING_LUA = """
local seen = 0
function invoke_at_step(step)
  seen = seen + 1
  return false
end
function save_state() return { seen = seen } end
function load_state(s) seen = s.seen end
function finish() report.details{ seen = seen } end
"""


def make_trial(tmp):
    trial = os.path.join(tmp, "trial")
    subprocess.run([TRAINER, trial, "--steps", str(STEPS), "--interval-ms", "0"],
                   check=True, stdout=subprocess.DEVNULL, timeout=120)
    return trial


def write_rules(tmp, name, release):
    script = os.path.join(tmp, "counting.lua")
    with open(script, "w") as f:
        f.write(COUNTING_LUA)
    rules = os.path.join(tmp, name + ".yaml")
    release_line = "      release: %s\n" % release if release else ""
    with open(rules, "w") as f:
        f.write("rules:\n"
                "  - plugin: %s\n    name: gate\n    parameters:\n      hold_at: %d\n%s"
                "  - lua: %s\n    name: counting\n" % (GATE, HOLD_AT, release_line, script))
    return rules


def run_args(trial, rules, state, out):
    return ["run", "--trial", trial, "--rules", rules, "--state", state,
            "--output", out, "--json", "--jobs", "1"]


def by_name(stdout):
    try:
        return {r["name"]: r for r in json.loads(stdout)["rules"]}
    except (ValueError, KeyError, TypeError):
        return None


def check_signal(c, tmp, trial, sig):
    name = signal.Signals(sig).name
    sc = c.scope("offline run interrupted by %s" % name)
    release = os.path.join(tmp, name + ".release")
    rules = write_rules(tmp, name, release)
    state = os.path.join(tmp, name + ".db")
    out = os.path.join(tmp, name + "-out")
    p = lib.Running(run_args(trial, rules, state, out))
    holding = p.wait_line(HOLDING % HOLD_AT)
    sc.ok(holding is not None, "the run reaches the held step", "".join(p.err_lines)[-300:])
    p.signal(sig)
    said = p.wait_line(STOPPING)
    sc.ok(said is not None and name in said, "says at once what the signal does",
          "".join(p.err_lines)[-300:])
    open(release, "w").close()
    rc, stdout, stderr = p.finish()
    sc.eq("exit status 128+N", rc, 128 + sig)
    sc.ok("interrupted by SIG" in stderr, "says it was interrupted", stderr[-300:])
    rules_out = by_name(stdout)
    if not sc.ok(rules_out is not None, "the results are printed as JSON", stdout[-300:]):
        return
    gate = rules_out["gate"]
    sc.eq("the held rule is InProgress", gate["status"], "InProgress")
    sc.eq("the step in hand was finished, no later one begun",
          gate.get("evaluated_steps"), HOLD_AT + 1)
    sc.ok(os.path.isfile(os.path.join(out, "gate", "report.json")), "its report is written")
    # the state was kept: a second run goes on and finishes
    p2 = subprocess.run([lib.SMRULES] + run_args(trial, rules, state, out),
                        capture_output=True, text=True, timeout=300)
    sc.eq("the next run finishes (exit 0)", p2.returncode, 0)
    again = by_name(p2.stdout)
    if not sc.ok(again is not None, "second run JSON", p2.stdout[-300:]):
        return
    for rule in ("gate", "counting"):
        r2 = again[rule]
        sc.eq("%s: then NoIssuesFound" % rule, r2["status"], "NoIssuesFound")
        seen = (r2.get("report") or {}).get("Details", {}).get("seen")
        sc.eq("%s: every step evaluated once over both runs" % rule, seen, STEPS)


def check_second_signal(c, tmp, trial):
    sc = c.scope("a second SIGINT")
    rules = write_rules(tmp, "twice", None)  # the held step never ends
    p = lib.Running(run_args(trial, rules, os.path.join(tmp, "twice.db"),
                             os.path.join(tmp, "twice-out")))
    sc.ok(p.wait_line(HOLDING % HOLD_AT) is not None, "the run reaches the held step")
    p.signal(signal.SIGINT)
    # two signals sent at once would be delivered as one: the second goes
    # after smrules said it took the first
    sc.ok(p.wait_line(STOPPING) is not None, "the first is taken")
    p.signal(signal.SIGINT)
    rc, _, stderr = p.finish()
    sc.eq("stops it at once (killed by SIGINT)", rc, -signal.SIGINT)


def main():
    c = lib.Checker("test_interrupt")
    with tempfile.TemporaryDirectory(prefix="smrules-intr-") as tmp:
        trial = make_trial(tmp)
        check_signal(c, tmp, trial, signal.SIGINT)
        check_signal(c, tmp, trial, signal.SIGTERM)
        check_second_signal(c, tmp, trial)
    c.finish()


if __name__ == "__main__":
    main()
