#!/usr/bin/env python3
"""smdebug's rule invocation loop, through `smrules run` with a custom Lua
rule: every `rule: "probe"` entry of tests/fixtures/synthetic/*/EXPECT.json.

A probe reads the listed tensors with trial:tensor(name):value(step) at each
global step and returns true only at `returns_true_at`.  smdebug's invoker
result says which steps completed, which were skipped by which exception,
where the loop stopped (end_step, NoMoreData) or waited (a step not yet
available while training runs).  Runs use --live, smdebug's own view of a
trial (only training_job_end.ts ends training)."""

import json
import os
import shutil
import tempfile

import lib

PROBE = """
-- reads params.reads at every step; fires at params.returns_true_at
function invoke_at_step(step)
  for _, name in ipairs(params.reads or {}) do
    trial:tensor(name):value(step)
  end
  for _, s in ipairs(params.returns_true_at or {}) do
    if s == step then return true end
  end
  return false
end
"""


def yaml_list(values):
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def write_rules(tmp, entry):
    probe = os.path.join(tmp, "probe.lua")
    with open(probe, "w") as f:
        f.write(PROBE)
    p = entry["probe"]
    lines = ["rules:", "  - lua: probe.lua", "    parameters:",
             "      reads: %s" % yaml_list(p["reads"]),
             "      returns_true_at: %s" % yaml_list(p["returns_true_at"])]
    if entry.get("start_step") is not None:
        lines.append("    start_step: %d" % entry["start_step"])
    if entry.get("end_step") is not None:
        lines.append("    end_step: %d" % entry["end_step"])
    path = os.path.join(tmp, "rules.yaml")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def check_entry(c, case, trial, i, entry, tmp):
    res = entry["result"]
    if res["condition_met"]:
        # the fixtures observe the first trigger with raise_eval_cond, which
        # ends the loop there: the same as ending the run after that step
        end = res["step"] + 1
        if entry.get("end_step") is None or end < entry["end_step"]:
            entry = dict(entry, end_step=end)
    rules = write_rules(tmp, entry)
    r = lib.run_json(["run", "--trial", trial, "--rules", rules, "--json", "--fresh",
                      "--live", "--output", os.path.join(tmp, "out")])
    sc = c.scope("%s probe #%d %s [%s, %s)" % (case, i, entry["probe"]["reads"],
                                                 entry["start_step"], entry["end_step"]), r)
    if not sc.process():
        return
    got = (r.obj or {}).get("rules", [{}])[0]
    sc.ok(got.get("status") != "Error", "status", "Error: %s" % got.get("message"))
    first = res["step"] if res["condition_met"] else None
    sc.eq("first_trigger_step", got.get("first_trigger_step"), first)
    sc.eq("evaluated_steps (completed)", got.get("evaluated_steps"), len(res["completed"]))
    skipped = sorted(res["skipped"].get("TensorUnavailableForStep", []) +
                     res["skipped"].get("TensorUnavailable", []))
    sc.eq("skipped_steps", got.get("skipped_steps"), skipped)
    if "waits_at_step" in res:
        sc.eq("waiting_at_step", got.get("waiting_at_step"), res["waits_at_step"])
        # a rule that fired is IssuesFound even while it waits for more
        sc.eq("status while waiting", got.get("status"),
              "IssuesFound" if res["condition_met"] else "InProgress")
    else:
        sc.eq("waiting_at_step", got.get("waiting_at_step"), None)
        want = "IssuesFound" if res["condition_met"] else "NoIssuesFound"
        if want == "NoIssuesFound" and not res["completed"]:
            want = "NoData"  # smdebug's pass of a rule that evaluated nothing
        sc.eq("status", got.get("status"), want)


def main():
    c = lib.Checker("test_invoker")
    n = 0
    for case, path in c.cases("synthetic"):
        exp = lib.load_json(os.path.join(path, "EXPECT.json"))
        trial = os.path.normpath(os.path.join(path, exp.get("trial_dir", ".")))
        for i, entry in enumerate(exp.get("expect", [])):
            if entry.get("rule") != "probe":
                continue
            tmp = tempfile.mkdtemp(prefix="smrules-invoker-")
            try:
                check_entry(c, case, lib.rel(trial), i, entry, tmp)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            n += 1
    c.ok(n >= 15, "probe entries found", "only %d" % n)
    c.finish()


if __name__ == "__main__":
    main()
