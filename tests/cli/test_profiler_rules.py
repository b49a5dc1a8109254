#!/usr/bin/env python3
"""The system-metric profiler rules (CPUBottleneck, IOBottleneck,
LowGPUUtilization, GPUMemoryIncrease, BatchSize, LoadBalancing,
OverallSystemUsage) against every case of tests/fixtures/profiler.

For each rule and both parameter sets of EXPECT.json `expect` (defaults,
then one non-default set), `smrules run --trial <case>/profiler-output
--rules <yaml> --json --fresh --output <tmp>` must reproduce exactly:
ending_step (windows evaluated), condition_met_count (windows that met the
condition), RuleTriggered, Violations, Datapoints, every Details JSON
pointer value, details_sizes, details_list_sums, details_lists and
details_strings.  The report must be exactly the reference envelope
{RuleTriggered, Violations, Details, Datapoints, RuleParameters}.

A parameter set the reference was called with directly but that the
rule-config validators refuse (a percentile above 100, docs/rule-semantics.md#profiler-rules-parameter-validation) must
be rejected as a configuration error instead; it is not evaluated.

Also: --trial given the job folder or --profiler, and a rule with no
profiler data failing with a message."""

import json
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

RULES = ("CPUBottleneck", "IOBottleneck", "LowGPUUtilization", "GPUMemoryIncrease",
         "BatchSize", "LoadBalancing", "OverallSystemUsage")
ENVELOPE = ["RuleTriggered", "Violations", "Details", "Datapoints", "RuleParameters"]
RULE_PARAMETERS = {  # docs/rule-semantics.md#profiler-rules-the-report, default parameters
    "CPUBottleneck": "threshold:50\ncpu_threshold:90\ngpu_threshold:10\npatience:1000",
    "IOBottleneck": "threshold:50\nio_threshold:50\ngpu_threshold:10\npatience:1000",
    "LowGPUUtilization": "threshold_p95:70\nthreshold_p5:10\nwindow:500\npatience:1000",
    "GPUMemoryIncrease": "increase:5\npatience:1000\nwindow:10",
    "BatchSize": "cpu_threshold_p95:70\ngpu_threshold_p95:70\ngpu_memory_threshold_p95:70\n"
                 "patience:1000\nwindow:500",
    "LoadBalancing": "threshold:0.2\npatience:1000",
    "OverallSystemUsage": "",
}


def yaml_value(v):
    if v is None:
        return "None"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(str(v))


def write_rules(path, entries):
    lines = ["rules:"]
    for name, rule, params in entries:
        lines += ["  - rule: %s" % rule, "    name: %s" % name]
        if params:
            lines.append("    parameters:")
            lines += ["      %s: %s" % (k, yaml_value(v)) for k, v in params.items()]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def run(trial_args, rules_path, out_dir):
    # the fixtures hold SageMaker's results: its windows, without the final
    # partial one (test_profiler_final_window.py covers that one)
    args = ["run"] + trial_args + ["--rules", rules_path, "--json", "--fresh",
                                   "--sagemaker-windows", "--output", out_dir]
    return lib.run_json(args, timeout=max(lib.TIMEOUT, 300))


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


def exact(got, want):
    if isinstance(want, bool) or isinstance(got, bool):
        return isinstance(got, bool) and isinstance(want, bool) and got == want
    if isinstance(want, float) and math.isnan(want):
        return got is None  # Decision F15: non-finite numbers are null
    return lib.is_number(got) and lib.is_number(want) and got == want


def walk_numbers(obj, path="", out=None):
    """Pointers of numbers in report order, as EXPECT.json lists them:
    dicts with more than 12 entries walked for their first and last 3,
    lists with more than 12 items not entered."""
    out = [] if out is None else out
    if isinstance(obj, dict):
        items = list(obj.items())
        for k, v in (items[:3] + items[-3:] if len(items) > 12 else items):
            walk_numbers(v, path + "/" + str(k).replace("~", "~0").replace("/", "~1"), out)
    elif isinstance(obj, list):
        for i, v in enumerate(obj if len(obj) <= 12 else []):
            walk_numbers(v, "%s/%d" % (path, i), out)
    elif isinstance(obj, (int, float)):
        out.append(path)
    return out


def check_details(sc, details, exp):
    want_order = list(exp.get("details", {}).keys())
    order = walk_numbers(details)
    sc.ok(order[:len(want_order)] == want_order, "Details in report order",
          "got %s, expected %s" % (lib.short(order[:len(want_order)], 300),
                                   lib.short(want_order, 300)))
    total = exp.get("details_total_numbers", len(want_order) if len(want_order) < 30 else None)
    if total is not None:
        sc.eq("number of numbers in Details", len(order), total)
    for ptr, want in exp.get("details", {}).items():
        got = resolve(details, ptr)
        sc.ok(got is not lib.MISSING and exact(got, want), "Details%s" % ptr,
              "got %s, expected %r" % ("nothing" if got is lib.MISSING else repr(got), want))
    for ptr, want in exp.get("details_sizes", {}).items():
        got = resolve(details, ptr)
        sc.ok(isinstance(got, (dict, list)) and len(got) == want, "size of Details%s" % ptr,
              "got %s, expected %d" % (lib.short(got, 80), want))
    for ptr, want in exp.get("details_list_sums", {}).items():
        got = resolve(details, ptr)
        ok = isinstance(got, list) and all(lib.is_number(x) for x in got)
        sc.ok(ok and sum(got) == want, "sum of Details%s" % ptr,
              "got %s, expected %r" % (sum(got) if ok else lib.short(got, 80), want))
    for ptr, want in exp.get("details_lists", {}).items():
        got = resolve(details, ptr)
        sc.ok(got == want, "Details%s" % ptr, "got %s, expected %s" % (lib.short(got), lib.short(want)))
    for ptr, want in exp.get("details_strings", {}).items():
        sc.eq("Details%s" % ptr, resolve(details, ptr), want)


def check_run(sc, res, rule, exp):
    if not sc.ok(res is not None, "present in output"):
        return
    sc.ok(res.get("status") in ("IssuesFound", "NoIssuesFound"), "status",
          "got %s (%s)" % (res.get("status"), res.get("message")))
    sc.eq("ending_step (windows evaluated)", res.get("evaluated_steps"), exp["ending_step"])
    trig = res.get("triggered_steps") or []
    sc.eq("condition_met_count (triggered windows)", len(trig), exp["condition_met_count"])
    sc.ok(all(0 <= k < exp["ending_step"] for k in trig), "triggered_steps are window indices",
          lib.short(trig))
    rep = res.get("report") or {}
    sc.eq("report keys", list(rep.keys()), ENVELOPE)
    for key in ("RuleTriggered", "Violations", "Datapoints"):
        sc.eq(key, rep.get(key), exp[key])
    if not exp["params"]:
        sc.eq("RuleParameters", rep.get("RuleParameters"), RULE_PARAMETERS[rule])
    check_details(sc, rep.get("Details") or {}, exp)


PERCENT_PARAMS = {"threshold", "gpu_threshold", "cpu_threshold", "io_threshold",
                  "threshold_p95", "threshold_p5", "cpu_threshold_p95", "gpu_threshold_p95",
                  "gpu_memory_threshold_p95"}


def refused(rule, params):
    """Parameters the validators of docs/rule-semantics.md#profiler-rules-parameter-validation refuse."""
    for k, v in params.items():
        if k in PERCENT_PARAMS and not 0 <= v <= 100:
            return k
        if v < 0:
            return k
    return None


def check_refused(c, name, path, tmp, rule, params, key):
    rules_path = os.path.join(tmp, "%s-%s-refused.yaml" % (name, rule))
    write_rules(rules_path, [("refused", rule, params)])
    r = run(["--trial", os.path.join(path, "profiler-output")], rules_path,
            os.path.join(tmp, name + "-refused"))
    sc = c.scope("%s %s %s (refused by the validators)" % (name, rule, json.dumps(params)), r)
    sc.process(r, want_json=False)
    sc.exit_code(r, [2])
    sc.ok(key in r.err, "the error names the parameter", lib.short(r.err.strip()))


def check_case(c, name, path, tmp):
    expect = lib.load_json(os.path.join(path, "EXPECT.json"))["expect"]
    entries, wanted = [], []
    for rule in RULES:
        for i, exp in enumerate(expect.get(rule, [])):
            key = refused(rule, exp["params"])
            if key:
                check_refused(c, name, path, tmp, rule, exp["params"], key)
                continue
            inst = "%s_%d" % (rule, i)
            entries.append((inst, rule, exp["params"]))
            wanted.append((inst, rule, exp))
    rules_path = os.path.join(tmp, name + ".yaml")
    write_rules(rules_path, entries)
    r = run(["--trial", os.path.join(path, "profiler-output")], rules_path,
            os.path.join(tmp, name + "-out"))
    sc = c.scope(name, r)
    if not sc.process(r):
        return
    got = {x.get("name"): x for x in (r.obj or {}).get("rules", [])}
    for inst, rule, exp in wanted:
        check_run(c.scope("%s %s %s" % (name, rule, json.dumps(exp["params"])), r),
                  got.get(inst), rule, exp)


def check_extreme_windows(c, tmp):
    """The largest window a parameter takes (2^53) is evaluated without
    overflow (the sanitizer build reports any) and without memory for the
    window itself (the histories keep their tail of `window` readings in
    memory): GPUMemoryIncrease and LowGPUUtilization with that window and
    patience 0 run, and with too few readings for it GPUMemoryIncrease
    never fires."""
    case = os.path.join(lib.FIXTURES, "profiler", "gpu_memory_increase")
    rules_path = os.path.join(tmp, "extreme.yaml")
    big = {"window": 9007199254740992, "patience": 0}
    write_rules(rules_path, [("mem", "GPUMemoryIncrease", big), ("low", "LowGPUUtilization", big)])
    r = run(["--trial", case], rules_path, os.path.join(tmp, "out-extreme"))
    sc = c.scope("window 2^53", r)
    if not sc.process(r):
        return
    sc.ok("runtime error" not in r.err, "no overflow reported", r.err.strip()[-300:])
    got = {x.get("name"): x for x in (r.obj or {}).get("rules", [])}
    for name in ("mem", "low"):
        res = got.get(name) or {}
        sc.ok(res.get("status") in ("NoIssuesFound", "IssuesFound") and res.get("evaluated_steps", 0) > 0,
              "%s evaluated its windows" % name, lib.short(res))
    sc.eq("GPUMemoryIncrease never fires", (got.get("mem") or {}).get("triggered_steps"), [])


def check_folders(c, tmp):
    """--trial as the job folder, --profiler, and no profiler data."""
    case = os.path.join(lib.FIXTURES, "profiler", "cpu_bottleneck")
    exp = lib.load_json(os.path.join(case, "EXPECT.json"))["expect"]["OverallSystemUsage"][0]
    rules_path = os.path.join(tmp, "one.yaml")
    write_rules(rules_path, [("usage", "OverallSystemUsage", {})])
    for label, args in (("job folder", ["--trial", case]),
                        ("--profiler", ["--trial", os.path.join(tmp, "empty"), "--profiler",
                                        os.path.join(case, "profiler-output")])):
        os.makedirs(os.path.join(tmp, "empty"), exist_ok=True)
        r = run(args, rules_path, os.path.join(tmp, "out-" + label.replace(" ", "_")))
        sc = c.scope("folders: " + label, r)
        if sc.process(r):
            res = (r.obj or {}).get("rules", [{}])[0]
            sc.eq("windows", res.get("evaluated_steps"), exp["ending_step"])
            sc.eq("Datapoints", (res.get("report") or {}).get("Datapoints"), exp["Datapoints"])
    r = run(["--trial", os.path.join(tmp, "empty")], rules_path, os.path.join(tmp, "out-none"))
    sc = c.scope("folders: no profiler data", r)
    if sc.process(r):
        # nothing to evaluate: a trial error before anything is written
        msg = r.error_obj().get("message") or ""
        sc.ok("profiler data (system/ or framework/)" in msg, "message names what was expected",
              repr(msg))
        sc.exit_code(r, [3])
        sc.ok(not os.path.exists(os.path.join(tmp, "out-none")), "nothing written")


def main():
    c = lib.Checker("test_profiler_rules")
    root = os.path.join(lib.FIXTURES, "profiler")
    before = lib.tree_snapshot(root)
    cases = c.cases("profiler")
    with tempfile.TemporaryDirectory(prefix="smrules-prof-") as tmp:
        for name, path in cases:
            check_case(c, name, path, tmp)
        check_folders(c, tmp)
        check_extreme_windows(c, tmp)
    lib.check_untouched(c, root, before)
    c.finish()


if __name__ == "__main__":
    main()
