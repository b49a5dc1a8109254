#!/usr/bin/env python3
"""Small inputs may not cost without bound (docs/security.md, "Bounded
cost"): profiler data whose timestamps lie far apart, system files with
many distinct names, traces with many distinct pids or unmatched "B"
events, a trace.json.gz that inflates a thousandfold, and a training log
of 100,000 TRAIN and 100,000 EVAL steps (a value missing at a step once
scanned every step to say why: a rule over them took over ten minutes).

Cost is checked by what a run may use, not by how long it takes: each run
gets a CPU-time limit (RLIMIT_CPU) several times what the linear work
needs even under the sanitizers, while the quadratic work it replaced
needed tens of seconds; memory by the largest resident size of the run.
A benign control runs the same rules on a fixture."""

import gzip
import json
import os
import resource
import shutil
import subprocess
import tempfile
import time

import lib
import tbwriter

FIXTURE_SYSTEM = os.path.join(lib.FIXTURES, "profiler", "cpu_bottleneck", "profiler-output",
                              "system")
CPU_LIMIT_S = 40  # the quadratic parsers took 17-47 s on inputs of this size
# ASan's allocator keeps freed memory in quarantine and shadows every byte:
# the same run holds more there (the old inflation took 4 GB without it)
SANITIZED = "san" in os.path.basename(os.path.dirname(lib.SMRULES)) or \
    "ASAN_OPTIONS" in os.environ
RSS_LIMIT_KB = (2560 if SANITIZED else 1024) * 1024
T0 = 1652796300  # within the fixture's system metrics


def limited(cpu_s):
    def apply():
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))
    return apply


def run(tmp, name, folder, rules_text, cpu_s=CPU_LIMIT_S):
    rules = os.path.join(tmp, name + ".yaml")
    with open(rules, "w") as f:
        f.write(rules_text)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([lib.SMRULES, "run", "--trial", folder, "--profiler", folder, "--rules",
                        rules, "--json", "--fresh", "--output", os.path.join(tmp, name + "-out")],
                       capture_output=True, text=True, timeout=600, preexec_fn=limited(cpu_s),
                       cwd=lib.ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        rules_out = {r["name"]: r for r in json.loads(p.stdout)["rules"]}
    except (ValueError, KeyError):
        rules_out = None
    return p, rules_out, max(after.ru_maxrss, before.ru_maxrss)


def system_line(name, ts, dim="CPUUtilization"):
    return ('{"Type": "cpu", "Name": "%s", "Dimension": "%s", "Value": 50.0, '
            '"NodeId": "algo-1", "Timestamp": %s}\n' % (name, dim, ts))


def write_system(folder, minute, lines):
    hour = time.strftime("%Y%m%d%H", time.gmtime(minute))
    d = os.path.join(folder, "system", "incremental", hour)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "%d.algo-1.json" % minute), "w") as f:
        f.writelines(lines)


def check_far_apart(c, tmp):
    sc = c.scope("two system files 6e8 s apart")
    folder = os.path.join(tmp, "far")
    write_system(folder, 1577836800, [system_line("cpu0", 1577836800)])
    write_system(folder, 2177836800, [system_line("cpu0", 2177836800)])
    p, rules, rss = run(tmp, "far", folder,
                        "rules:\n  - rule: CPUBottleneck\n  - rule: ProfilerReport\n", cpu_s=20)
    if not sc.ok(rules is not None, "run --json", p.stderr[-400:]):
        return
    for name in ("CPUBottleneck", "ProfilerReport"):
        r = rules[name]
        sc.eq(name + " fails on its own (Error)", r["status"], "Error")
        sc.ok("more than the 1000000" in (r.get("message") or json.dumps(r)),
              name + " says the data spans too many windows", lib.short(r)[:300])
    sc.ok(rss < 256 * 1024, "without walking or storing the windows", "%d KB" % rss)


def check_distinct_names(c, tmp):
    sc = c.scope("a system file of 300,000 distinct CPU names")
    folder = os.path.join(tmp, "names")
    write_system(folder, T0 // 60 * 60,
                 [system_line("cpu%d" % i, "%d.%06d" % (T0 + i // 10000, i % 10000))
                  for i in range(300000)])
    p, rules, _ = run(tmp, "names", folder, "rules:\n  - rule: CPUBottleneck\n")
    sc.ok(p.returncode in (0, 1) and rules is not None,
          "read within the CPU limit", "rc %s %s" % (p.returncode, p.stderr[-300:]))


def write_trace(folder, events):
    ts0 = T0 * 1000000
    shutil.copytree(FIXTURE_SYSTEM, os.path.join(folder, "system"))
    d = os.path.join(folder, "framework", "pevents", "2022051714")
    os.makedirs(d)
    meta = {"name": "process_name", "ph": "M", "pid": 0,
            "args": {"start_time_since_epoch_in_micros": ts0}}
    with open(os.path.join(d, "%d_1-algo-1_pythontimeline.json" % ts0), "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(e) for e in [meta] + events) + "\n]\n")


def check_trace(c, tmp, name, label, events):
    sc = c.scope(label)
    folder = os.path.join(tmp, name)
    write_trace(folder, events)
    p, rules, _ = run(tmp, os.path.basename(folder), folder,
                      "rules:\n  - rule: OverallFrameworkMetrics\n")
    sc.ok(rules is not None and rules["OverallFrameworkMetrics"]["status"] != "Error",
          "read within the CPU limit", "rc %s %s" % (p.returncode, p.stderr[-300:]))


def check_gzip_bomb(c, tmp):
    sc = c.scope("a trace.json.gz inflating to 512 MiB")
    folder = os.path.join(tmp, "bomb")
    shutil.copytree(FIXTURE_SYSTEM, os.path.join(folder, "system"))
    # TensorBoard's profile layout: the trace 4 levels below the folder that
    # holds "<node>_<start>_<end>.metadata" (docs/formats.md)
    top = os.path.join(folder, "framework", "tensorflow", "detailed_profiling", "2022051714",
                       "000000001")
    d = os.path.join(top, "plugins", "profile", "2022_05_17_14_05_00")
    os.makedirs(d)
    us = T0 * 1000000
    open(os.path.join(top, "algo-1_%d_%d.metadata" % (us, us + 60000000)), "w").close()
    z = gzip.compress(b"[" + b" " * (512 << 20) + b"]", 9)
    with open(os.path.join(d, "algo-1.trace.json.gz"), "wb") as f:
        f.write(z)
    p, rules, rss = run(tmp, "bomb", folder, "rules:\n  - rule: OverallFrameworkMetrics\n"
                        "  - rule: CPUBottleneck\n")
    if not sc.ok(rules is not None, "the run ends with its results", p.stderr[-400:]):
        return
    sc.ok("inflat" in p.stderr or "decompress" in p.stderr, "the file is named as too large",
          p.stderr[-400:])
    sc.ok(rules["CPUBottleneck"]["status"] != "Error", "the other rule is unaffected")
    sc.ok(rss < RSS_LIMIT_KB, "memory stays well below the inflated size", "%d KB" % rss)


MANY_STEPS = 100000  # of each mode: 200,000 global steps


def check_many_steps(c, tmp):
    sc = c.scope("a TensorBoard log of %d TRAIN and EVAL steps" % MANY_STEPS)
    folder = os.path.join(tmp, "many-steps")
    os.makedirs(folder)
    with open(os.path.join(folder, tbwriter.event_file_name()), "wb") as f:
        f.write(tbwriter.record(tbwriter.file_version_event(T0)))
        for step in range(MANY_STEPS):
            x = float("nan") if step == MANY_STEPS - 7 else 1.0 / (step + 1)
            for tag, v in (("train/loss", x), ("eval/loss", 1.0)):
                f.write(tbwriter.record(tbwriter.event(step, [tbwriter.v_simple(tag, v)],
                                                       T0 + step)))
    rules = os.path.join(tmp, "many-steps.yaml")
    with open(rules, "w") as f:
        f.write("rules:\n  - rule: NonFiniteMetric\n")
    p = subprocess.run([lib.SMRULES, "run", "--trial", folder, "--format", "tensorboard",
                        "--rules", rules, "--json", "--fresh", "--output",
                        os.path.join(tmp, "many-steps-out")],
                       capture_output=True, text=True, timeout=600,
                       preexec_fn=limited(CPU_LIMIT_S), cwd=lib.ROOT)
    try:
        rule = json.loads(p.stdout)["rules"][0]
    except (ValueError, KeyError, IndexError):
        rule = None
    sc.ok(p.returncode == 1 and rule is not None,
          "run evaluates within the CPU limit (exit 1: the NaN is found)",
          "rc=%s %s" % (p.returncode, p.stderr[-300:]))
    sc.ok(rule is not None and rule["evaluated_steps"] == 2 * MANY_STEPS,
          "every global step is evaluated", str(rule and rule["evaluated_steps"]))
    # global steps number (step, mode) pairs in that order (docs/tensorboard.md)
    sc.ok(rule is not None and rule["triggered_steps"] == [2 * (MANY_STEPS - 7)],
          "the one NaN is found at its global step", str(rule and rule["triggered_steps"]))
    p = subprocess.run([lib.SMRULES, "inspect", "--trial", folder, "--format", "tensorboard",
                        "--json", "--fresh"], capture_output=True, text=True, timeout=600,
                       preexec_fn=limited(CPU_LIMIT_S), cwd=lib.ROOT)
    try:
        steps = json.loads(p.stdout)["steps"]
    except (ValueError, KeyError):
        steps = None
    sc.ok(p.returncode == 0 and steps is not None and len(steps) == 2 * MANY_STEPS,
          "inspect lists every step within the CPU limit",
          "rc=%s %s" % (p.returncode, p.stderr[-300:]))


def check_control(c, tmp):
    sc = c.scope("benign control: a fixture's system metrics")
    folder = os.path.join(tmp, "control")
    shutil.copytree(FIXTURE_SYSTEM, os.path.join(folder, "system"))
    p, rules, _ = run(tmp, "control", folder, "rules:\n  - rule: CPUBottleneck\n")
    sc.ok(rules is not None and rules["CPUBottleneck"]["status"] in ("IssuesFound",
                                                                      "NoIssuesFound"),
          "evaluates as usual", p.stderr[-300:])
    sc.ok(rules is not None and rules["CPUBottleneck"]["evaluated_steps"] > 0,
          "over its windows")


def main():
    c = lib.Checker("test_bounded_cost")
    with tempfile.TemporaryDirectory(prefix="smrules-cost-") as tmp:
        check_control(c, tmp)
        check_far_apart(c, tmp)
        check_distinct_names(c, tmp)
        check_trace(c, tmp, "pids", "200,000 B/E pairs of distinct pids",
                    [{"name": "op", "ph": "B", "ts": i, "pid": i, "tid": 1}
                     for i in range(200000)] +
                    [{"name": "op", "ph": "E", "ts": i + 5, "pid": i, "tid": 1}
                     for i in range(200000)])
        check_trace(c, tmp, "unmatched", "200,000 unmatched B of one pid",
                    [{"name": "op", "ph": "B", "ts": i, "pid": 1, "tid": 1}
                     for i in range(200000)])
        check_gzip_bomb(c, tmp)
        check_many_steps(c, tmp)
    c.finish()


if __name__ == "__main__":
    main()
