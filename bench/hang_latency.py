#!/usr/bin/env python3
"""bench/hang_latency.py BUILD - how late a hang is caught, and how long the
stop then takes (docs/live.md, "When training hangs").

Runs HANG_REPEAT times (default 3) the flow of docs/live.md:
`smrules run --rules R -- python3 tests/cli/hang_trainer.py ...` with
TrainingHang (factor 3, min_seconds HANG_MIN_SECONDS, default 3.5) and
[DumpStacks, StopTraining with a checkpoint by SIGUSR2].  The trainer
writes steps every 0.1 s, then hangs; its log has the wall-clock time of
the hang's onset and of each signal it got.

  detection latency = trigger time - onset - threshold, where the trigger
    time is last_activity + seconds_since_activity of the rule's report and
    the threshold the one it reports: how long after the threshold was
    passed the rule fired (the watch ticks once a second, so the baseline is
    that tick);
  stop latency = the trainer's SIGTERM - trigger time: the stacks, the
    checkpoint asked for and confirmed, then the signal (shown beside it:
    the trainer's own part, from SIGUSR2 to its file written).

Prints its own rows (median of the repeats) with the load average."""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
SMRULES = os.path.join(ROOT, BUILD, "smrules")
TRAINER = os.path.join(ROOT, "tests", "cli", "hang_trainer.py")
SOURCE = os.path.join(ROOT, "tests", "fixtures", "trials", "healthy_mlp_digits")
REPEAT = int(os.environ.get("HANG_REPEAT", "3"))
# 3.5, not 3: the watch ticks a second apart from the last new step, so a
# whole-second threshold would be met right at a tick (latency ~0), half
# a second off the grid gives what a learnt threshold meets on average
MIN_SECONDS = float(os.environ.get("HANG_MIN_SECONDS", "3.5"))

RULES = """rules:
  - rule: TrainingHang
    parameters: {factor: 3, min_seconds: %g, warmup_steps: 0}
    actions: [DumpStacks, StopTraining]
actions:
  StopTraining:
    checkpoint_signal: USR2
    checkpoint_file: ckpt/step-*.json
""" % MIN_SECONDS


def row(*cols):
    print("%-38s %-14s %-18s %-9s %-10s %s" % cols)


def violation(obj):
    if isinstance(obj, dict):
        if "threshold_seconds" in obj:
            return obj
        obj = list(obj.values())
    if isinstance(obj, list):
        for v in obj:
            found = violation(v)
            if found:
                return found
    return None


def once(tmp):
    with open(os.path.join(tmp, "rules.yaml"), "w") as f:
        f.write(RULES)
    p = subprocess.run([SMRULES, "run", "--trial", "trial", "--rules", "rules.yaml", "--output",
                        "out", "--", sys.executable, TRAINER, "--source", SOURCE, "--out", "trial",
                        "--step-delay", "0.1", "--log", "log"], cwd=tmp, capture_output=True,
                       text=True, timeout=600)
    if p.returncode != 1:
        raise SystemExit("hang_latency: smrules exited %d:\n%s" % (p.returncode, p.stderr[-2000:]))
    with open(os.path.join(tmp, "out", "TrainingHang", "report.json")) as f:
        v = violation(json.load(f))
    events = {}
    with open(os.path.join(tmp, "log")) as f:
        for line in f:
            parts = line.split()
            key = parts[0] + (" " + parts[1] if parts[0] == "signal" else "")
            events.setdefault(key, float(parts[-1]))
    trigger = v["last_activity"] + v["seconds_since_activity"]
    detect = trigger - events["hang"] - v["threshold_seconds"]
    stop = events["signal SIGTERM"] - trigger
    ckpt = events["checkpoint"] - events["signal SIGUSR2"]
    return detect, stop, ckpt


def main():
    if not os.access(SMRULES, os.X_OK):
        raise SystemExit("hang_latency: missing %s" % SMRULES)
    got = []
    for _ in range(REPEAT):
        tmp = tempfile.mkdtemp(prefix="smrules-hangbench-", dir=os.environ.get("BENCH_DIR"))
        try:
            got.append(once(tmp))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    detect = statistics.median(g[0] for g in got)
    stop = statistics.median(g[1] for g in got)
    ckpt = statistics.median(g[2] for g in got)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print()
    print("== 13. hang latency (median of %d, min_seconds %g, %d cores, load average %s)"
          % (REPEAT, MIN_SECONDS, os.cpu_count(), load))
    row("BENCHMARK", "MEASURED", "BASELINE", "RATIO", "TARGET", "VERDICT")
    row("hang detection latency, s", "%.2f" % detect, "watch tick 1.00", "%.2f" % detect,
        "< 2 s", "PASS" if detect < 2 else "MISS")
    row("hang stop latency, s (stacks+ckpt)", "%.2f" % stop, "trainer's save %.2f" % ckpt,
        "-", "< 2 s", "PASS" if stop < 2 else "MISS")


if __name__ == "__main__":
    main()
