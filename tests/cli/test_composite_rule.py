#!/usr/bin/env python3
"""A rule that runs another rule through the host (api->sub_rule,
docs/plugin-sdk.md), as ProfilerReport runs the profiler rules: the test
rule tests/cli/plugins/composite.c runs its rule "Inner" at every step and
copies the report it reads back (api->rule_report, parsed with
smrules/json.h) into its own Details.

- the inner rule's parameter `limit` is the composite's `Inner_limit`
  (param_text too), and RuleParameters is what the inner rule set;
- the inner report is its own: RuleTriggered, Violations and Datapoints as
  the inner rule set them at the last step, nothing of the composite's;
- the inner rule logs under the composite ("Inner: ..." on its lines);
- its failure reaches the composite through api->rule_failure, and the run
  goes on;
- a sub-rule cannot itself make one, nor can a nameless one be made, and
  a rule gets at most 256.
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

BUILD = os.path.dirname(lib.SMRULES)
COMPOSITE = os.path.join(BUILD, "tests", "plugins", "composite.so")
TRIAL = os.path.join(lib.FIXTURES, "trials", "stalled_lr_zero")


def run(tmp, limit):
    path = os.path.join(tmp, "rules.yaml")
    with open(path, "w") as f:
        f.write("rules:\n  - plugin: %s\n    name: composite\n"
                "    parameters:\n      Inner_limit: %s\n" % (COMPOSITE, limit))
    return lib.run_json(["run", "--trial", lib.rel(TRIAL), "--rules", path, "--json",
                         "--fresh", "--output", os.path.join(tmp, "out")])


def composite(r):
    rules = {x.get("name"): x for x in (r.obj or {}).get("rules", [])}
    return rules.get("composite") or {}


def check_inner_report(c, tmp):
    r = run(tmp, "2.5")
    sc = c.scope("Inner_limit 2.5", r)
    if not sc.process():
        return
    res = composite(r)
    det = (res.get("report") or {}).get("Details") or {}
    inner = det.get("inner") or {}
    lines = [ln for ln in r.err.splitlines() if "Inner: evaluated step " in ln]
    steps = [int(ln.rsplit(" ", 1)[1]) for ln in lines]
    sc.at_least(2, steps, "steps the inner rule evaluated")
    sc.eq("the inner rule ran at every step the composite did", len(steps),
          res.get("evaluated_steps"))
    sc.ok(all(ln.startswith("smrules: composite: warning: Inner: ") for ln in lines),
          "the inner rule logs under the composite", lines[0] if lines else "")
    last = max(steps) if steps else None
    sc.eq("the inner limit is Inner_limit", inner.get("limit"), 2.5)
    sc.eq("param_text(limit) is Inner_limit's text", inner.get("param_text"), "2.5")
    sc.eq("RuleParameters as the inner rule set it", inner.get("RuleParameters"),
          "from the inner rule")
    sc.eq("RuleTriggered of the inner report", inner.get("RuleTriggered"), 1)
    sc.eq("Violations: the last step evaluated", inner.get("Violations"), last)
    sc.eq("Datapoints: the last step + 1", inner.get("Datapoints"),
          last + 1 if last is not None else None)
    sc.eq("sub-rules of a sub-rule and nameless ones are refused", det.get("bad_name"), True)
    sc.eq("at most 256 sub-rules per rule", det.get("sub_rules_given"), 256)
    sc.eq("the composite's own status is its own", res.get("status"), "NoIssuesFound")


def check_inner_failure(c, tmp):
    r = run(tmp, "-1")
    sc = c.scope("Inner_limit -1", r)
    if not sc.process():
        return
    res = composite(r)
    det = (res.get("report") or {}).get("Details") or {}
    sc.eq("the inner failure reaches the composite", det.get("inner_failure"),
          "a negative limit (-1)")
    sc.ok("inner" not in det, "no report read back after a failure", str(det))
    sc.at_least(2, res.get("evaluated_steps") or 0, "steps evaluated past the failure")


def main():
    c = lib.Checker("test_composite_rule")
    c.ok(os.path.exists(COMPOSITE), "the test rule is built", COMPOSITE)
    with tempfile.TemporaryDirectory() as tmp:
        check_inner_report(c, tmp)
    with tempfile.TemporaryDirectory() as tmp:
        check_inner_failure(c, tmp)
    c.finish()


if __name__ == "__main__":
    main()
