#!/usr/bin/env python3
"""`smrules run --watch --profile DIR` (docs/profiler.md, "Profiling your
own machine"): one command for "train, watch, stop, report".

- beside a training job (build/demo-trainer) under CPU load, with the
  stand-in NVML reporting an idle GPU: the monitor records into DIR while
  the watch runs (the profiler folder is empty when the watch starts), the
  profiler rules are evaluated on the recording (CPUBottleneck fires),
  ProfilerReport is added and writes its HTML report when training ends,
  the run prints where, DIR/system/training_job_end.ts marks the end, the
  recording passes the format check and no monitor is left running;
- a watch that times out before training ends stops the monitor too,
  writes no end marker, and leaves the profiler rules InProgress;
- --profile without --watch, or with --profiler, is a usage error.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import monitor_lib as ml  # noqa: E402

TRAINER = os.environ.get("SMRULES_DEMO_TRAINER",
                         os.path.join(os.path.dirname(lib.SMRULES), "demo-trainer"))


def monitors_running(prof):
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "monitor" in line and prof in line]


def rules_file(tmp):
    path = os.path.join(tmp, "rules.yaml")
    with open(path, "w") as f:
        f.write("rules:\n  - rule: CPUBottleneck\n    parameters: {patience: 2}\n")
    return path


def watch_args(trial, rules, prof, out, extra=()):
    return [lib.SMRULES, "run", "--trial", trial, "--rules", rules, "--watch", "--profile", prof,
            "--json", "--fresh", "--output", out] + list(extra)


def by_name(obj):
    return {r["name"]: r for r in (obj or {}).get("rules", [])}


def test_train_watch_report(c, tmp, nvml):
    trial, prof, out = (os.path.join(tmp, n) for n in ("trial", "prof", "out"))
    burners = ml.start_burners(os.cpu_count() or 2)  # until killed, after the run
    trainer = subprocess.Popen([TRAINER, trial, "--steps", "80", "--interval-ms", "50"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = ml.monitor_env(nvml, gpus=1, util=3)
    p = subprocess.run(watch_args(trial, rules_file(tmp), prof, out, ["--timeout", "60"]),
                       capture_output=True, text=True, env=env, timeout=120, cwd=lib.ROOT)
    trainer.wait()
    ml.stop_burners(burners)
    sc = c.scope("watch --profile beside a training job")
    sc.ok(p.returncode in (0, 1), "exit code 0 or 1", "%s: %s" % (p.returncode, p.stderr[-400:]))
    try:
        obj = json.loads(p.stdout)
    except ValueError:
        sc.ok(False, "stdout is one JSON document", p.stdout[-300:])
        return
    res = by_name(obj)
    cb, pr = res.get("CPUBottleneck", {}), res.get("ProfilerReport", {})
    sc.ok(cb.get("evaluated_steps", 0) >= 1, "CPUBottleneck evaluated the recording", lib.short(cb))
    sc.ok(cb.get("triggered_steps"), "CPUBottleneck fires (CPU busy, GPU idle)",
          lib.short(cb.get("report")))
    sc.ok(pr.get("evaluated_steps", 0) >= 1 and pr.get("status") != "InProgress",
          "ProfilerReport added and finished", lib.short(pr)[:300])
    html = os.path.join(out, "ProfilerReport", "profiler-output", "profiler-report.html")
    sc.ok(os.path.isfile(html), "HTML report written")
    sc.ok("HTML report written to %s" % html in p.stderr, "its path printed", p.stderr[-300:])
    if os.path.isfile(html):
        text = open(html, encoding="utf-8").read()
        sc.ok(">System usage statistics<" in text and "No system metrics were found" not in text,
              "report has the recording's system metrics")
    sc.ok(os.path.isfile(os.path.join(prof, "system", "training_job_end.ts")), "end marker written")
    probs = ml.format_problems(prof)
    sc.ok(not probs, "recording well-formed", "; ".join(probs[:3]))
    sc.eq("no monitor left running", monitors_running(prof), [])


def test_launched(c, tmp, nvml):
    """--profile with the launcher: `smrules run --profile DIR -- TRAINER`
    records before the trainer starts, ends when it exits, and reports."""
    trial, prof, out = (os.path.join(tmp, n) for n in ("l-trial", "l-prof", "l-out"))
    burners = ml.start_burners(os.cpu_count() or 2)  # until killed, after the run
    env = ml.monitor_env(nvml, gpus=1, util=3)
    args = [lib.SMRULES, "run", "--trial", trial, "--rules", rules_file(tmp), "--profile", prof,
            "--json", "--fresh", "--output", out, "--timeout", "60", "--",
            TRAINER, trial, "--steps", "80", "--interval-ms", "50"]
    try:
        p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120, cwd=lib.ROOT)
    finally:
        ml.stop_burners(burners)
    sc = c.scope("--profile with a launched trainer")
    try:
        obj = json.loads(p.stdout)
    except ValueError:
        sc.ok(False, "stdout is one JSON document", p.stdout[-300:] + p.stderr[-300:])
        return
    res = by_name(obj)
    cb, pr = res.get("CPUBottleneck", {}), res.get("ProfilerReport", {})
    sc.ok(cb.get("triggered_steps"), "CPUBottleneck fires on the recording", lib.short(cb))
    sc.eq("exit status 1: a rule found issues", p.returncode, 1)
    sc.eq("training ended by the trainer's exit", (obj.get("training") or {}).get("ended_by"),
          "trainer_exit")
    sc.ok(pr.get("status") not in (None, "InProgress"), "ProfilerReport finished",
          lib.short(pr)[:300])
    html = os.path.join(out, "ProfilerReport", "profiler-output", "profiler-report.html")
    sc.ok(os.path.isfile(html), "HTML report written")
    sc.ok(os.path.isfile(os.path.join(prof, "system", "training_job_end.ts")), "end marker written")
    sc.eq("no monitor left running", monitors_running(prof), [])


def test_timeout(c, tmp):
    trial, prof, out = (os.path.join(tmp, n) for n in ("t-trial", "t-prof", "t-out"))
    os.makedirs(trial)
    t0 = time.time()
    p = subprocess.run(watch_args(trial, rules_file(tmp), prof, out, ["--timeout", "1.5"]),
                       capture_output=True, text=True, env=ml.monitor_env(), timeout=60,
                       cwd=lib.ROOT)
    sc = c.scope("watch --profile timing out")
    sc.ok(p.returncode == 124 and time.time() - t0 >= 1.4, "ends at the timeout (exit 124), not before",
          "%s: %s" % (p.returncode, p.stderr[-300:]))
    sc.ok(not os.path.exists(os.path.join(prof, "system", "training_job_end.ts")),
          "no end marker (training did not end)")
    try:
        res = by_name(json.loads(p.stdout))
    except ValueError:
        res = {}
    sc.eq("CPUBottleneck InProgress", res.get("CPUBottleneck", {}).get("status"), "InProgress")
    # how many rounds fit in 1.5 s depends on the machine (the recording
    # itself is checked beside a training job above): what was written,
    # if anything, ends with complete lines
    probs = [p for p in ml.format_problems(prof) if p != "no system files"]
    sc.ok(not probs, "what was recorded is well-formed", "; ".join(probs[:3]))
    sc.eq("no monitor left running", monitors_running(prof), [])


def test_usage(c, tmp):
    rules = rules_file(tmp)
    for args in (["--profile", os.path.join(tmp, "p")],
                 ["--watch", "--profile", os.path.join(tmp, "p"), "--profiler", tmp]):
        rc, _, err = lib.run(["run", "--trial", tmp, "--rules", rules] + args)
        c.ok(rc == 2 and "--profile" in err, "usage error: %s" % " ".join(args), err[-200:])


def main():
    c = lib.Checker("test_profile_watch")
    if not os.access(TRAINER, os.X_OK):
        c.ok(False, "demo-trainer", "%s is missing" % TRAINER)
        c.finish()
    with tempfile.TemporaryDirectory(prefix="smrules-profwatch-") as tmp:
        nvml = ml.build_fake_nvml(tmp)
        test_train_watch_report(c, tmp, nvml)
        test_launched(c, tmp, nvml)
        test_timeout(c, tmp)
        test_usage(c, tmp)
    c.finish()


if __name__ == "__main__":
    main()
