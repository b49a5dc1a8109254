#!/usr/bin/env python3
"""An offline `smrules run` interrupted by SIGINT or SIGTERM (docs/cli.md,
exit status): it finishes the step in hand, writes every report and the
state, prints the table with the rules that did not finish as InProgress,
and exits 128+N; a later run over the same state goes on from there and
finishes.  A second signal stops it at once."""

import json
import os
import signal
import subprocess
import tempfile
import time

import lib

TRAINER = os.path.join(os.path.dirname(lib.SMRULES), "demo-trainer")

# tens of ms of Lua work per step: 300 steps take several seconds
SLOW_LUA = """
local seen = 0
function invoke_at_step(step)
  local x = 0
  for i = 1, 1000000 do x = x + i end
  seen = seen + 1
  return false
end
function save_state() return { seen = seen } end
function load_state(s) seen = s.seen end
function finish() report.details{ seen = seen } end
"""


def setup(tmp):
    trial = os.path.join(tmp, "trial")
    subprocess.run([TRAINER, trial, "--steps", "300", "--interval-ms", "0"],
                   check=True, stdout=subprocess.DEVNULL, timeout=120)
    script = os.path.join(tmp, "slow.lua")
    with open(script, "w") as f:
        f.write(SLOW_LUA)
    rules = os.path.join(tmp, "rules.yaml")
    with open(rules, "w") as f:
        f.write("rules:\n  - lua: %s\n    name: slow\n" % script)
    return trial, rules


def start(trial, rules, state, out):
    return subprocess.Popen([lib.SMRULES, "run", "--trial", trial, "--rules", rules,
                             "--state", state, "--output", out, "--json", "--jobs", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def check_signal(c, tmp, trial, rules, sig):
    name = signal.Signals(sig).name
    state = os.path.join(tmp, name + ".db")
    out = os.path.join(tmp, name + "-out")
    p = start(trial, rules, state, out)
    time.sleep(1.5)
    p.send_signal(sig)
    try:
        stdout, stderr = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        stdout, stderr = p.communicate()
    sc = c.scope("offline run interrupted by %s" % name)
    sc.eq("exit status 128+N", p.returncode, 128 + sig)
    sc.ok("interrupted by SIG" in stderr, "says it was interrupted", stderr[-300:])
    try:
        obj = json.loads(stdout)
    except ValueError:
        sc.ok(False, "the results are printed as JSON", stdout[-300:])
        return
    rule = obj["rules"][0]
    sc.eq("the unfinished rule is InProgress", rule["status"], "InProgress")
    done = rule.get("evaluated_steps", 0)
    sc.ok(0 < done < 300, "stopped part way", "evaluated %s of 300" % done)
    sc.ok(os.path.isfile(os.path.join(out, "slow", "report.json")), "its report is written")
    # the state was kept: a second run goes on and finishes
    p2 = subprocess.run([lib.SMRULES, "run", "--trial", trial, "--rules", rules,
                         "--state", state, "--output", out, "--json"],
                        capture_output=True, text=True, timeout=300)
    sc.eq("the next run finishes (exit 0)", p2.returncode, 0)
    try:
        r2 = json.loads(p2.stdout)["rules"][0]
    except (ValueError, KeyError, IndexError):
        sc.ok(False, "second run JSON", p2.stdout[-300:])
        return
    sc.eq("then NoIssuesFound", r2["status"], "NoIssuesFound")
    seen = (r2.get("report") or {}).get("Details", {}).get("seen")
    sc.eq("every step evaluated once over both runs", seen, 300)


# one step of several seconds: the second signal comes while it runs
VERY_SLOW_LUA = """
function invoke_at_step(step)
  local x = 0
  for i = 1, 200000000 do x = x + i end
  return false
end
"""


def check_second_signal(c, tmp, trial):
    script = os.path.join(tmp, "very_slow.lua")
    with open(script, "w") as f:
        f.write(VERY_SLOW_LUA)
    rules = os.path.join(tmp, "very-slow.yaml")
    with open(rules, "w") as f:
        f.write("rules:\n  - lua: %s\n    name: very_slow\n"
                "lua:\n  instruction_limit: 2000000000\n" % script)
    p = start(trial, rules, os.path.join(tmp, "twice.db"), os.path.join(tmp, "twice-out"))
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    time.sleep(0.3)  # two signals sent at once would be delivered as one
    p.send_signal(signal.SIGINT)
    try:
        p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
    c.ok(p.returncode == -signal.SIGINT, "a second SIGINT stops it at once (killed by SIGINT)",
         "exit %s" % p.returncode)


def main():
    c = lib.Checker("test_interrupt")
    with tempfile.TemporaryDirectory(prefix="smrules-intr-") as tmp:
        trial, rules = setup(tmp)
        check_signal(c, tmp, trial, rules, signal.SIGINT)
        check_signal(c, tmp, trial, rules, signal.SIGTERM)
        check_second_signal(c, tmp, trial)
    c.finish()


if __name__ == "__main__":
    main()
