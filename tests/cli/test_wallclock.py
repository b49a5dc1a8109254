#!/usr/bin/env python3
"""Rules driven by time while following a run: StalledTrainingRule fires
under `run --watch` when nothing new is written for `threshold` seconds
(rules.md §2.19, live form), once per stall, and not once training ended."""

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
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
