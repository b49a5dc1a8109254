#!/usr/bin/env python3
"""The framework-metric profiler rules (MaxInitializationTime,
OverallFrameworkMetrics, StepOutlier, Dataloader) against every case of
tests/fixtures/profiler: for each rule and each parameter set of EXPECT.json
`expect`, `smrules run --json` must reproduce ending_step (windows
evaluated), condition_met_count (triggered windows), RuleTriggered,
Violations, Datapoints and the listed Details (JSON pointers, sizes, list
sums, short lists, strings, and the report order of the first 30 numbers).

Numbers are compared exactly (an int equals the same float), except where
the reference's float arithmetic order is not reproducible bit for bit: a
relative 1e-12 is then allowed and counted (see NEAR_OK).

The comparison helpers are reused by test_profiler_report.py.
"""

import json
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

FIXTURE_DIR = os.path.join(lib.FIXTURES, "profiler")
RULES = tuple(os.environ.get("SMRULES_TEST_PROFILER_RULES", "").split(",")) if os.environ.get("SMRULES_TEST_PROFILER_RULES") else \
    ("MaxInitializationTime", "OverallFrameworkMetrics", "StepOutlier", "Dataloader")
NEAR_REL = 1e-12


def fixture_root():
    return FIXTURE_DIR


def profiler_cases():
    root = fixture_root()
    if not os.path.isdir(root):
        return []
    out = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if os.path.isfile(os.path.join(path, "EXPECT.json")) and lib.CASE_FILTER in name:
            out.append((name, path))
    return out


# ---------------------------------------------------------------- rules.yaml

def yaml_value(v):
    if v is None:
        return "None"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(str(v))


def rules_yaml(entries):
    """entries: (instance name, rule, params) -> rules.yaml text."""
    lines = ["rules:"]
    for name, rule, params in entries:
        lines.append("  - rule: %s" % rule)
        lines.append("    name: %s" % name)
        if params:
            lines.append("    parameters:")
            for k, v in params.items():
                lines.append("      %s: %s" % (k, yaml_value(v)))
    return "\n".join(lines) + "\n"


def run_rules(case_dir, entries, tmp, extra=()):
    path = os.path.join(tmp, "rules.yaml")
    with open(path, "w") as f:
        f.write(rules_yaml(entries))
    # SageMaker's windows: the fixtures hold its results (the final partial
    # window is covered by test_profiler_final_window.py)
    args = ["run", "--trial", case_dir, "--rules", path, "--json", "--fresh",
            "--sagemaker-windows", "--output", os.path.join(tmp, "out")] + list(extra)
    return lib.run_json(args, timeout=max(lib.TIMEOUT, 300))


# ---------------------------------------------------------- Details walking

def ptr_escape(k):
    return str(k).replace("~", "~0").replace("/", "~1")


def resolve(obj, pointer):
    cur = obj
    for raw in pointer.split("/")[1:]:
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(cur, dict) and key in cur:
            cur = cur[key]
        elif isinstance(cur, list) and key.isdigit() and int(key) < len(cur):
            cur = cur[int(key)]
        else:
            return lib.MISSING
    return cur


def is_num(v):
    return isinstance(v, (int, float))  # bools count, as in the oracle


def walk_numbers(obj, path="", out=None):
    """Pointers of numbers (and bools) in report order, walking only the
    first 3 and last 3 entries of dicts with more than 12 entries and not
    descending into lists with more than 12 items (EXPECT.json README)."""
    if out is None:
        out = []
    if isinstance(obj, dict):
        items = list(obj.items())
        if len(items) > 12:
            items = items[:3] + items[-3:]
        for k, v in items:
            walk_numbers(v, path + "/" + ptr_escape(k), out)
    elif isinstance(obj, list):
        if len(obj) <= 12:
            for i, v in enumerate(obj):
                if is_num(v) or isinstance(v, (dict, list)):
                    walk_numbers(v, "%s/%d" % (path, i), out)
    elif is_num(obj):
        out.append(path)
    return out


def num_equal(got, exp):
    """(exact, near): exact equality (bool vs bool), or within NEAR_REL."""
    if isinstance(exp, bool) or isinstance(got, bool):
        return (isinstance(got, bool) and isinstance(exp, bool) and got == exp), False
    if not is_num(got) or not is_num(exp):
        return got == exp, False
    if got == exp:
        return True, False
    if isinstance(exp, float) and math.isnan(exp):
        return isinstance(got, float) and math.isnan(got), False
    near = abs(got - exp) <= NEAR_REL * max(abs(got), abs(exp))
    return False, near


class Counter:
    near = 0


def compare_details(sc, details, exp):
    """Every Details expectation of one EXPECT run."""
    for ptr, want in exp.get("details", {}).items():
        got = resolve(details, ptr)
        if got is lib.MISSING:
            sc.ok(False, "Details%s" % ptr, "missing, expected %s" % lib.short(want))
            continue
        exact, near = num_equal(got, want)
        if near:
            Counter.near += 1
            if os.environ.get("SMRULES_TEST_SHOW_NEAR"):
                print("near %s Details%s: got %r, expected %r" % (sc.prefix, ptr, got, want))
        sc.ok(exact or near, "Details%s" % ptr, "got %r, expected %r" % (got, want))
    order = walk_numbers(details)
    want_order = list(exp.get("details", {}).keys())
    sc.ok(order[:len(want_order)] == want_order, "Details number order",
          "got %s, expected %s" % (lib.short(order[:len(want_order)], 300),
                                   lib.short(want_order, 300)))
    total = exp.get("details_total_numbers")
    if total is not None:
        sc.eq("number of Details numbers", len(order), total)
    elif len(want_order) < 30:
        sc.eq("number of Details numbers", len(order), len(want_order))
    for ptr, want in exp.get("details_sizes", {}).items():
        got = resolve(details, ptr)
        sc.ok(isinstance(got, (dict, list)) and len(got) == want, "size of Details%s" % ptr,
              "got %s, expected %d" % (lib.short(got, 80), want))
    for ptr, want in exp.get("details_list_sums", {}).items():
        got = resolve(details, ptr)
        ok = isinstance(got, list) and all(is_num(x) for x in got)
        s = sum(got) if ok else None
        sc.ok(ok and lib.close(s, want, 1e-9, 1e-12), "sum of Details%s" % ptr,
              "got %s, expected %r" % (s, want))
    for ptr, want in exp.get("details_lists", {}).items():
        got = resolve(details, ptr)
        sc.ok(got == want, "Details%s" % ptr, "got %s, expected %s" % (lib.short(got), lib.short(want)))
    for ptr, want in exp.get("details_strings", {}).items():
        got = resolve(details, ptr)
        sc.eq("Details%s" % ptr, got, want)


def compare_run(sc, res, exp):
    """One rule instance of `smrules run --json` against one EXPECT run."""
    if res is None:
        sc.ok(False, "present in output", "no such rule in the output")
        return
    sc.ok(res.get("status") in ("IssuesFound", "NoIssuesFound"), "status",
          "got %s (%s)" % (res.get("status"), res.get("message")))
    sc.eq("ending_step (windows evaluated)", res.get("evaluated_steps"), exp["ending_step"])
    sc.eq("condition_met_count (triggered windows)", len(res.get("triggered_steps") or []),
          exp["condition_met_count"])
    rep = res.get("report") or {}
    for key in ("RuleTriggered", "Violations", "Datapoints"):
        sc.eq(key, rep.get(key), exp[key])
    compare_details(sc, rep.get("Details") or {}, exp)


def main():
    c = lib.Checker("test_profiler_framework")
    cases = profiler_cases()
    c.ok(len(cases) > 0, "profiler fixtures exist", "none under %s" % fixture_root())
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in cases:
            expect = lib.load_json(os.path.join(path, "EXPECT.json"))["expect"]
            entries, wanted = [], []
            for rule in RULES:
                for i, run in enumerate(expect.get(rule, [])):
                    inst = "%s_%d" % (rule, i)
                    entries.append((inst, rule, run["params"]))
                    wanted.append((inst, rule, run))
            r = run_rules(path, entries, tmp)
            sc = c.scope(name, r)
            if not sc.process(r):
                continue
            got = {x.get("name"): x for x in (r.obj or {}).get("rules", [])}
            for inst, rule, run in wanted:
                compare_run(c.scope("%s %s %s" % (name, rule, json.dumps(run["params"])), r),
                            got.get(inst), run)
    if Counter.near:
        print("note: %d number(s) equal within %g only (float order)" % (Counter.near, NEAR_REL))
    c.finish()


if __name__ == "__main__":
    main()
