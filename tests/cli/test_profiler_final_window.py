#!/usr/bin/env python3
"""The final, partial profiler window (docs/profiler.md, "The final
window"): once training has ended, profiler rules also evaluate the window
holding the last minute of data, unless --sagemaker-windows asks for
SageMaker's rule (stop at the first window starting at or after the newest
file's name).

- For every case of tests/fixtures/profiler and every profiler rule: the
  number of windows evaluated by default is computed here from the files
  (window k = [first + k*S, first + (k+1)*S] evaluated while its start lies
  before the last reading: the newest system files' last Timestamp, or the
  newest trace file's end); --sagemaker-windows evaluates up to the newest
  file's name.  Where both counts agree the reports are identical; where the
  final windows add data, the windows SageMaker triggered in come first,
  unchanged.
- A job shorter than a minute (one system file): SageMaker's rule evaluates
  nothing; by default the one window is evaluated and CPUBottleneck fires.
- Live (--live) without an end marker the final window waits (InProgress);
  with training_job_end.ts it is evaluated.
"""

import json
import math
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

RULES = ("CPUBottleneck", "IOBottleneck", "LowGPUUtilization", "GPUMemoryIncrease", "BatchSize",
         "LoadBalancing", "OverallSystemUsage", "StepOutlier", "Dataloader",
         "MaxInitializationTime", "OverallFrameworkMetrics")
S = 60000000
SYS_RE = re.compile(r".+/system/.+/(\d{10})\.algo-\d+\.json$")


def sys_files(prof):
    out = []
    for dirpath, _, files in os.walk(os.path.join(prof, "system")):
        for f in files:
            p = os.path.join(dirpath, f)
            m = SYS_RE.match(p)
            if m:
                out.append((int(m.group(1)) * 1000000, p))
    return sorted(out)


def fw_files(prof):
    out = []
    for dirpath, _, files in os.walk(os.path.join(prof, "framework")):
        for f in files:
            p = os.path.join(dirpath, f)
            parts = f.split("_")
            if f.endswith(".json") and "pevents" in p and len(parts) >= 3 and parts[0].isdigit():
                out.append(int(parts[0]))
    return sorted(out)


def ns(t):
    return int(((t * 1000) * 1000) * 1000)


def windows(prof):
    """(first, SageMaker's latest, data end) in µs, from the files."""
    sysf, fw = sys_files(prof), fw_files(prof)
    firsts = ([sysf[0][0]] if sysf else []) + ([fw[0]] if fw else [])
    lasts = ([sysf[-1][0]] if sysf else []) + ([fw[-1]] if fw else [])
    first, latest = min(firsts), min(lasts)
    ends = [fw[-1]] if fw else []
    if sysf:
        newest = [p for ts, p in sysf if ts == sysf[-1][0]]
        stamps = []
        for p in newest:
            with open(p, encoding="utf-8") as f:
                for line in f:
                    try:
                        stamps.append(ns(json.loads(line)["Timestamp"]))
                    except (ValueError, KeyError, TypeError):
                        pass
        end = sysf[-1][0]
        if stamps and max(stamps) // 1000 >= end:
            end = -(-max(stamps) // 1000)
        ends.append(end)
    return first, latest, max(ends)


def count(first, until):
    return max(0, math.ceil((until - first) / S))


def rules_yaml(tmp, rules, params=None):
    path = os.path.join(tmp, "rules.yaml")
    with open(path, "w") as f:
        f.write("rules:\n")
        for r in rules:
            f.write("  - rule: %s\n" % r)
            if params:
                f.write("    parameters: {%s}\n" % ", ".join("%s: %s" % kv for kv in params.items()))
    return path


def run(trial, rules, tmp, extra=()):
    return lib.run_json(["run", "--trial", trial, "--rules", rules, "--json", "--fresh",
                         "--output", os.path.join(tmp, "out")] + list(extra),
                        timeout=max(lib.TIMEOUT, 300))


def by_name(res):
    return {r["name"]: r for r in (res.obj or {}).get("rules", [])}


def test_fixtures(c, tmp):
    rules = rules_yaml(tmp, RULES)
    for case, path in c.cases("profiler"):
        prof = os.path.join(path, "profiler-output")
        first, latest, end = windows(prof)
        sm, final = count(first, latest), count(first, end)
        a = run(path, rules, tmp, ["--sagemaker-windows"])
        b = run(path, rules, tmp)
        sc = c.scope("%s" % case, b)
        if not (sc.process(a) and sc.process(b)):
            continue
        ra, rb = by_name(a), by_name(b)
        for rule in RULES:
            x, y = ra.get(rule, {}), rb.get(rule, {})
            sc.eq("%s: windows with --sagemaker-windows" % rule, x.get("evaluated_steps"), sm)
            sc.eq("%s: windows by default (final window)" % rule, y.get("evaluated_steps"), final)
            if sm == final:
                sc.ok(x.get("report") == y.get("report") and
                      x.get("triggered_steps") == y.get("triggered_steps"),
                      "%s: no data after the newest file's name: same report" % rule)
            else:
                tx, ty = x.get("triggered_steps") or [], y.get("triggered_steps") or []
                sc.eq("%s: SageMaker's triggered windows come first, unchanged" % rule,
                      ty[:len(tx)], tx)


def write_short_job(prof, seconds=30.0, gpu=3.0, cpu=99.0, end_marker=True):
    """One system file: `seconds` of 2 cores and 1 GPU every 0.5 s, in the
    minute 1700000040."""
    minute = 1700000040
    d = os.path.join(prof, "system", "incremental", "2023111422")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "%d.algo-1.json" % minute), "w") as f:
        t = minute + 0.25
        while t < minute + seconds:
            for name, dim, v in (("cpu0", "CPUUtilization", cpu), ("cpu1", "CPUUtilization", 10.0),
                                 ("cpu0", "I/OWaitPercentage", 0.0),
                                 ("cpu1", "I/OWaitPercentage", 0.0)):
                f.write(json.dumps({"Type": "cpu", "Name": name, "Dimension": dim, "Value": v,
                                    "NodeId": "algo-1", "Timestamp": t}) + "\n")
            for dim, v in (("GPUUtilization", gpu), ("GPUMemoryUtilization", 20.0)):
                f.write(json.dumps({"Type": "gpu", "Name": "gpu0", "Dimension": dim, "Value": v,
                                    "NodeId": "algo-1", "Timestamp": t + 0.001}) + "\n")
            t += 0.5
    if end_marker:
        open(os.path.join(prof, "system", "training_job_end.ts"), "w").close()


def test_short_job(c, tmp):
    prof = os.path.join(tmp, "short", "profiler-output")
    write_short_job(prof)
    rules = rules_yaml(tmp, ["CPUBottleneck"], {"patience": 10})
    a = run(prof, rules, tmp, ["--sagemaker-windows"])
    b = run(prof, rules, tmp)
    sc = c.scope("30 s job", b)
    if sc.process(a) and sc.process(b):
        x, y = by_name(a).get("CPUBottleneck", {}), by_name(b).get("CPUBottleneck", {})
        sc.eq("--sagemaker-windows: no window evaluated", x.get("evaluated_steps"), 0)
        sc.eq("default: the one window evaluated", y.get("evaluated_steps"), 1)
        sc.eq("default: CPUBottleneck fires in it", y.get("triggered_steps"), [0])
        sc.eq("default: 60 of 60 snapshots are bottlenecks",
              [lib.dig(y, "report.Datapoints"), lib.dig(y, "report.Violations")], [60, 60])
        sc.eq("exit code", b.rc, 1)
    # live: no end marker yet -> the final window waits
    live = os.path.join(tmp, "live", "profiler-output")
    write_short_job(live, end_marker=False)
    r = run(live, rules, tmp, ["--live"])
    sc = c.scope("30 s job, --live, running", r)
    if sc.process(r):
        y = by_name(r).get("CPUBottleneck", {})
        sc.eq("status", y.get("status"), "InProgress")
        sc.eq("no window evaluated", y.get("evaluated_steps"), 0)
    open(os.path.join(live, "system", "training_job_end.ts"), "w").close()
    r = run(live, rules, tmp, ["--live"])
    sc = c.scope("30 s job, --live, ended", r)
    if sc.process(r):
        y = by_name(r).get("CPUBottleneck", {})
        sc.eq("the final window evaluated", y.get("evaluated_steps"), 1)
        sc.eq("status", y.get("status"), "IssuesFound")


def main():
    c = lib.Checker("test_profiler_final_window")
    before = lib.tree_snapshot(os.path.join(lib.FIXTURES, "profiler"))
    with tempfile.TemporaryDirectory(prefix="smrules-final-") as tmp:
        test_fixtures(c, tmp)
        test_short_job(c, tmp)
    lib.check_untouched(c, os.path.join(lib.FIXTURES, "profiler"), before)
    c.finish()


if __name__ == "__main__":
    main()
