#!/usr/bin/env python3
"""The memory a run's records take is bounded as docs/kubernetes.md#record-memory
says: every record buffer within a budget of 50 MB for the process, or two
of the largest records when that is more (the scheduler admits a rule's
turn only while the records the running turns hold fit it; one turn
alone always runs), the shared records in what the others leave of it,
at most 28 + 8 MB.

A trial of four TRAIN steps, each with a weight and its gradient of
4,000,000 float32 (records of 16 MB) or of 8,000,000 (32 MB: two are more
than the budget) and a loss, with smdebug's collections; the twelve rules
of examples/many-rules.yaml, and all twenty debugging rules
(SimilarAcrossRuns comparing the trial with itself), over it with
--jobs 1, --jobs 2 and the default jobs.  Each run's peak RSS (getrusage
of a child process, read after it exited: no timing), against the peak of
the same rules over a trial of the same shape with records of 4 KB (the
process's own memory, 6-7 MB):
  - records of 16 MB add at most the budget, 50 MB: with the process's
    own memory, under the goal of 64 MB (two rules each comparing two
    steps side by side held 64 MB of records, peak 71-76 MB);
  - records of 32 MB add at most the larger of the budget and two records
    (one turn holding two runs alone), plus one record for a rule's
    scratch (PoorWeightInitialization's quantile selection works on a
    copy; the sanitizer build keeps freed memory a while) and 12 MB for
    what a process allocates besides (the values rules keep, glibc's
    arenas).  Before the budget, two threads held four (144 MB).  The
    trial's records (256 MB) would not fit.
"""

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

NAME = "test_record_memory"
STEPS = 4
BIG = 8000000  # float32 elements: 32 MB records
MID = 4000000  # 16 MB records
SMALL = 1000
BUDGET = 50  # MB: core/source/record_budget.c
MB = 1 << 20
ALL20 = ["VanishingGradient", "ExplodingTensor", "WeightUpdateRatio", "AllZero",
         "UnchangedTensor", "LossNotDecreasing", "CheckInputImages", "DeadRelu",
         "Confusion", "TreeDepth", "ClassImbalance", "Overfit", "TensorVariance",
         "Overtraining", "PoorWeightInitialization", "SaturatedActivation",
         "NLPSequenceRatio", "StalledTrainingRule", "FeatureImportanceOverweight"]


def record(name, content, count, step):
    """An event record of a float32 tensor whose bytes are `content`, with
    smdebug's constant footer (no checksum of 32 MB in Python)."""
    return lib.f32_record(name, content, count, step)


def write_trial(folder, count):
    """Values that change a little every step (no rule finds anything)."""
    for step in range(STEPS):
        pattern = struct.pack("<8f", *[0.01 * (i + 1) + 0.001 * step for i in range(8)])
        grads = struct.pack("<8f", *[1e-3 * (i + 1) - 1e-5 * step for i in range(8)])
        content = {"layer0.weight": pattern * (count // 8),
                   "gradient/layer0.weight": grads * (count // 8),
                   "loss": struct.pack("<f", 2.0 - 0.1 * step)}
        event_rel = "events/%012d/%012d_worker_0.tfevents" % (step, step)
        path = os.path.join(folder, event_rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        payload, at = [], 0
        with open(path, "wb") as f:
            for name, data in content.items():
                rec = record(name, data, len(data) // 4, step)
                f.write(rec)
                payload.append({"tensorname": name, "start_idx": at, "length": len(rec)})
                at += len(rec)
        index = os.path.join(folder, "index/000000000/%012d_worker_0.json" % step)
        os.makedirs(os.path.dirname(index), exist_ok=True)
        with open(index, "w") as f:
            json.dump({"meta": {"mode": "TRAIN", "mode_step": step,
                                "event_file_name": event_rel},
                       "tensor_payload": payload, "shape_payload": []}, f)
    coll = os.path.join(folder, "collections/000000000/worker_0_collections.json")
    os.makedirs(os.path.dirname(coll), exist_ok=True)
    with open(coll, "w") as f:
        json.dump({"collections": {
            "gradients": {"name": "gradients", "include_regex": ["^gradient/"]},
            "weights": {"name": "weights", "include_regex": ["^layer[0-9]+\\.weight$"]},
            "losses": {"name": "losses", "include_regex": ["loss"]}},
            "_meta": {"num_workers": 1}}, f)
    with open(os.path.join(folder, "training_job_end.ts"), "wb"):
        pass


# Runs smrules in a child of a fresh Python, which prints the peak RSS of
# its children (KB) once smrules has exited.
PEAK = ("import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL,"
        " stderr=subprocess.PIPE, timeout=%d)\n"
        "sys.stderr.write(p.stderr.decode('utf-8', 'replace')[-2000:])\n"
        "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")


def peak_rss(args):
    """(exit status, peak RSS in bytes, stderr) of `smrules args`."""
    p = subprocess.run([sys.executable, "-c", PEAK % int(lib.TIMEOUT), lib.SMRULES] + args,
                       capture_output=True, timeout=lib.TIMEOUT + 30, cwd=lib.ROOT)
    words = p.stdout.decode().split()
    if p.returncode != 0 or len(words) != 2:
        return None, None, p.stderr.decode("utf-8", "replace")
    return int(words[0]), int(words[1]) * 1024, p.stderr.decode("utf-8", "replace")


def main():
    c = lib.Checker(NAME)
    tmp = tempfile.mkdtemp(prefix="smrules-record-memory-")
    try:
        trials = {}
        for label, count in (("small", SMALL), ("mid", MID), ("big", BIG)):
            trials[label] = os.path.join(tmp, label)
            write_trial(trials[label], count)
        record_bytes = 4 * BIG
        twelve = os.path.join(lib.ROOT, "examples", "many-rules.yaml")
        for label in ("small", "mid", "big"):
            with open(os.path.join(tmp, "all20-%s.yaml" % label), "w") as f:
                f.write("rules:\n")
                for r in ALL20:
                    f.write("  - rule: %s\n" % r)
                f.write("  - rule: SimilarAcrossRuns\n"
                        "    parameters: {other_trials: %s}\n" % json.dumps(trials[label]))
        for rules in ("twelve", "all20"):
            for jobs in (1, 2, None):
                jobs_args = ["--jobs", str(jobs)] if jobs else []
                jobs_name = "--jobs %d" % jobs if jobs else "the default jobs"
                peaks = {}
                for label in ("small", "mid", "big"):
                    yaml = twelve if rules == "twelve" else \
                        os.path.join(tmp, "all20-%s.yaml" % label)
                    rc, peak, err = peak_rss(["run", "--trial", trials[label], "--rules", yaml,
                                              "--fresh", "--output",
                                              os.path.join(tmp, "out-%s-%s-%s" % (
                                                  label, rules, jobs))] + jobs_args)
                    c.ok(rc in (0, 1), "%s rules, %s, %s records: exit status %s "
                         "(0 or 1)" % (rules, jobs_name, label, rc), err)
                    peaks[label] = peak
                if None in peaks.values():
                    continue
                bound = peaks["small"] + BUDGET * MB
                c.ok(peaks["mid"] <= bound,
                     "%s rules, %s, records of 16 MB: peak RSS %.1f MB <= %.1f MB "
                     "(%.1f MB with records of 4 KB + the budget, %d MB)"
                     % (rules, jobs_name, peaks["mid"] / MB, bound / MB, peaks["small"] / MB,
                        BUDGET))
                held = max(BUDGET * MB, 2 * record_bytes)
                bound = peaks["small"] + held + record_bytes + 12 * MB
                c.ok(peaks["big"] <= bound,
                     "%s rules, %s, records of 32 MB: peak RSS %.1f MB <= %.1f MB "
                     "(%.1f MB with records of 4 KB + %.0f MB of records held + one "
                     "record + 12 MB)"
                     % (rules, jobs_name, peaks["big"] / MB, bound / MB, peaks["small"] / MB,
                        held / MB))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
