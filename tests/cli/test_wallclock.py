#!/usr/bin/env python3
"""Rules driven by time while following a run: StalledTrainingRule fires
under `run --watch` when nothing new is written for `threshold` seconds
(docs/rules/StalledTrainingRule.md, live form), once per stall, and not once training ended.

No check depends on how fast the machine is: a watch over a stalled trial
runs until its progress line shows the rule fired (and, for "once per
stall", until two heartbeats later still count one trigger), then SIGINT
ends it; a watch over an ended trial ends by itself."""

import signal

import json
import os
import shutil
import subprocess
import tempfile

import lib

TRAINER = os.path.join(os.path.dirname(lib.SMRULES), "demo-trainer")


def make_trial(tmp, end_marker):
    trial = os.path.join(tmp, "trial")
    subprocess.run([TRAINER, trial, "--steps", "5", "--interval-ms", "5"],
                   check=True, stdout=subprocess.DEVNULL, timeout=60)
    if not end_marker:
        os.remove(os.path.join(trial, "training_job_end.ts"))
    return trial


def stalled_rules(tmp, threshold):
    rules = os.path.join(tmp, "rules.yaml")
    with open(rules, "w") as f:
        f.write("rules:\n  - rule: StalledTrainingRule\n"
                "    parameters: {threshold: %d}\n" % threshold)
    return rules


def watch(tmp, trial, threshold, timeout):
    return lib.run_json(["run", "--trial", trial, "--rules", stalled_rules(tmp, threshold),
                         "--watch", "--timeout", str(timeout), "--fresh", "--json",
                         "--output", os.path.join(tmp, "out")], timeout=timeout + 30)


def until_lines(args, patterns, then=None):
    """Run a watch until each pattern has matched a line on stderr (and
    `then` (pattern, count) has matched count lines), then SIGINT: a
    Result (rc 130 expected)."""
    p = lib.Running(args)
    seen = all(p.wait_line(pat) is not None for pat in patterns)
    if then:
        seen = seen and p.wait_count(then[0], then[1])
    p.signal(signal.SIGINT)
    rc, out, err = p.finish()
    r = lib.Result(args, rc, out, err)
    r.seen = seen
    return r


CLOCK_LUA = """
local first
function invoke_at_step(step) return false end
function invoke_at_time(now)
  first = first or now
  return now - first >= params.after
end
"""

STEP_ONLY_LUA = """
function invoke_at_step(step) return false end
"""

BAD_CLOCK_LUA = """
function invoke_at_step(step) return false end
function invoke_at_time(now) return 42 end
"""


def watch_lua(tmp, trial):
    """Three Lua rules under --watch: one driven by the clock, one by steps
    only, one whose invoke_at_time returns a wrong type."""
    scripts = {}
    for name, text in (("clock", CLOCK_LUA), ("steps", STEP_ONLY_LUA),
                       ("bad", BAD_CLOCK_LUA)):
        scripts[name] = os.path.join(tmp, name + ".lua")
        with open(scripts[name], "w") as f:
            f.write(text)
    rules = os.path.join(tmp, "lua-rules.yaml")
    with open(rules, "w") as f:
        f.write("rules:\n"
                "  - lua: %s\n    name: clock\n    parameters: {after: 1}\n"
                "  - lua: %s\n    name: steps\n"
                "  - lua: %s\n    name: bad\n"
                % (scripts["clock"], scripts["steps"], scripts["bad"]))
    return until_lines(["run", "--trial", trial, "--rules", rules, "--watch", "--fresh", "--json",
                        "--output", os.path.join(tmp, "out-lua")],
                       [r"\| clock +IssuesFound", r"\| bad +Error"])


def check_lua_clock(c, tmp):
    """invoke_at_time reaches Lua rules through the same rule operations as
    C plugins: a script that defines it is called with the time."""
    tmp = os.path.join(tmp, "lua")
    os.mkdir(tmp)
    trial = make_trial(tmp, end_marker=False)
    r = watch_lua(tmp, trial)
    sc = c.scope("Lua rules driven by the clock", r)
    sc.ok(r.seen, "progress lines: the clock rule fired, the bad one failed", r.err[-400:])
    if not sc.process():
        return
    sc.eq("interrupted (exit 130)", r.rc, 130)
    by = {x["name"]: x for x in r.obj["rules"]}
    sc.eq("the clock rule fired once, at the newest step",
          by["clock"]["triggered_steps"], [4])
    sc.eq("a step-only script is not called with the time",
          by["steps"]["triggered_steps"], [])
    sc.eq("a wrong return type is that rule's error", by["bad"]["status"],
          "Error")
    sc.ok("invoke_at_time must return" in json.dumps(by["bad"]),
          "the error names invoke_at_time", json.dumps(by["bad"])[:300])


def main():
    c = lib.Checker("test_wallclock")
    tmp = tempfile.mkdtemp(prefix="smrules-clock-")
    try:
        trial = make_trial(tmp, end_marker=False)
        r = until_lines(["run", "--trial", trial, "--rules", stalled_rules(tmp, 1), "--watch",
                         "--fresh", "--json", "--heartbeat", "1",
                         "--output", os.path.join(tmp, "out")],
                        [r"\| StalledTrainingRule +IssuesFound"],
                        then=(r"watching: .*triggers so far: 1 \(1 of 1 rules\)", 2))
        sc = c.scope("stalled run (no new step for > 1 s)", r)
        sc.ok(r.seen, "progress: fired, and two heartbeats later still one trigger",
              r.err[-400:])
        if sc.process():
            sc.eq("interrupted (exit 130)", r.rc, 130)
            rule = r.obj["rules"][0]
            sc.eq("triggered once, at the newest step", rule["triggered_steps"], [4])
            sc.eq("status while training has not ended (it fired)", rule["status"], "IssuesFound")
            v = rule["report"]["Details"]["last_trigger"]["violations"][0]
            sc.ok(v["seconds_since_activity"] > 1, "seconds_since_activity",
                  "%s" % v["seconds_since_activity"])
        shutil.rmtree(tmp)
        tmp = tempfile.mkdtemp(prefix="smrules-clock-")
        trial = make_trial(tmp, end_marker=True)
        r = watch(tmp, trial, threshold=1, timeout=3)
        sc = c.scope("ended run (training_job_end.ts)", r)
        if sc.process():
            rule = r.obj["rules"][0]
            sc.eq("no live trigger after the end", rule["triggered_steps"], [])
            sc.eq("status", rule["status"], "NoIssuesFound")
        check_lua_clock(c, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
