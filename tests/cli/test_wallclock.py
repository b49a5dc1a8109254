#!/usr/bin/env python3
"""Rules driven by time while following a run: StalledTrainingRule fires
under `run --watch` when nothing new is written for `threshold` seconds
(docs/rules/StalledTrainingRule.md, live form), once per stall, and not once training ended."""

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


def watch(tmp, trial, threshold, timeout):
    rules = os.path.join(tmp, "rules.yaml")
    with open(rules, "w") as f:
        f.write("rules:\n  - rule: StalledTrainingRule\n"
                "    parameters: {threshold: %d}\n" % threshold)
    return lib.run_json(["run", "--trial", trial, "--rules", rules, "--watch",
                         "--timeout", str(timeout), "--fresh", "--json",
                         "--output", os.path.join(tmp, "out")], timeout=timeout + 30)


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


def watch_lua(tmp, trial, timeout):
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
    return lib.run_json(["run", "--trial", trial, "--rules", rules, "--watch",
                         "--timeout", str(timeout), "--fresh", "--json",
                         "--output", os.path.join(tmp, "out-lua")],
                        timeout=timeout + 30)


def check_lua_clock(c, tmp):
    """invoke_at_time reaches Lua rules through the same rule operations as
    C plugins: a script that defines it is called with the time."""
    tmp = os.path.join(tmp, "lua")
    os.mkdir(tmp)
    trial = make_trial(tmp, end_marker=False)
    r = watch_lua(tmp, trial, timeout=3)
    sc = c.scope("Lua rules driven by the clock", r)
    if not sc.process():
        return
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
        r = watch(tmp, trial, threshold=1, timeout=3)
        sc = c.scope("stalled run (no new step for > 1 s)", r)
        if sc.process():
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
