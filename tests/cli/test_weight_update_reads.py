#!/usr/bin/env python3
"""WeightUpdateRatio reads a large weight once per step
(docs/rules/WeightUpdateRatio.md#how-it-is-evaluated): at step s it needs w_s and w_p, and
w_p is the w_s it read at the step before, which it keeps (api->value_keep)
when the host does not keep records of that size for the rules anyway.
Before, every large weight was read twice, once as w_s and again as w_p.

Trials of six TRAIN steps, collection `weights`:
  big.weight     2**21 float32 (records of 8 MiB, above the 7 MiB the
                 host shares between rules): its first half is v_s at
                 step s, its second half 0, so that both norms are exact
                 (v_s * 1024, (v_s - v_p) * 1024) and the expected ratios
                 are computed here bit for bit
  small.weight   1,000 floats that never change (ratio 0, shared records)
The ratios grow from step to step.  Five instances, the k-th with
large_threshold just below the k-th ratio: its triggered steps say which
steps it evaluated and with what ratio, and its first trigger gives that
ratio exactly.  A sixth compares with the earliest step of two back
(num_steps 2), not the step whose value was kept.  Checked on the whole trial and on three with a defect
(the weight corrupt at step 2: its length's checksum; its event file
truncated at step 3; not saved at step 3): the steps that cannot be
compared are skipped, the others give the same ratios, with --jobs 1 and
--jobs 2.

Bytes read: the kernel's count of the bytes the smrules process read
(/proc/PID/io rchar, read after it exited and before it is reaped), for
WeightUpdateRatio alone on the whole trial: at most the event files' bytes
once plus 10 % (each record read once; before, 11 of 6 records' bytes).
"""
import json
import os
import shutil
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

NAME = "test_weight_update_reads"
STEPS = 6
N = 1 << 21
HALF = N >> 1  # elements that are v_s; sqrt(HALF) = 1024
EPS = 1e-9  # WeightUpdateRatio's default epsilon


def v(step):
    """The big weight's value at step: few bits, so every sum is exact."""
    return 1.0 + sum(k for k in range(step + 1)) / 16.0


def ratio(p, s):
    return abs(v(s) - v(p)) * 1024.0 / (abs(v(p)) * 1024.0 + EPS)


def write_trial(folder, defect=None):
    """defect: None, ("corrupt", step), ("truncated", step), ("missing", step)."""
    ends = {}
    for step in range(STEPS):
        big = struct.pack("<f", v(step)) * HALF + bytes(4 * HALF)
        rec = lib.f32_record("big.weight", big, N, step)
        if defect == ("corrupt", step):  # the length's checksum
            rec = rec[:8] + bytes(b ^ 0xFF for b in rec[8:12]) + rec[12:]
        records = [("small.weight", lib.f32_record("small.weight", b"\0\0\x80\x3f" * 1000,
                                                   1000, step))]
        if defect != ("missing", step):
            records.append(("big.weight", rec))
        records.append(("loss", lib.f32_record("loss", struct.pack("<f", 2.0 - step / 8), 1,
                                               step)))
        blob, _ = lib.write_step(folder, step, records)
        ends[step] = len(blob)
        if defect == ("truncated", step):  # in the middle of the big weight
            event = os.path.join(folder, "events/%012d/%012d_worker_0.tfevents" % (step, step))
            with open(event, "r+b") as f:
                f.truncate(len(records[0][1]) + len(rec) // 2)
    coll = os.path.join(folder, "collections/000000000/worker_0_collections.json")
    os.makedirs(os.path.dirname(coll), exist_ok=True)
    with open(coll, "w") as f:
        json.dump({"collections": {"weights": {"name": "weights",
                                               "include_regex": ["\\.weight$"]},
                                   "losses": {"name": "losses", "include_regex": ["^loss$"]}},
                   "_meta": {"num_workers": 1}}, f)
    lib.write_end_marker(folder)


def expected_pairs(defect, window=None):
    """(p, s) of every step whose big weight is compared: p the latest
    saved step before s, or with a window the earliest of the window."""
    saved = [s for s in range(STEPS) if defect != ("missing", s)]
    bad = {defect[1]} if defect and defect[0] in ("corrupt", "truncated") else set()
    pairs = []
    for s in saved:
        before = [p for p in saved if p < s and (window is None or p >= s - window)]
        if before:
            p = before[-1] if window is None else before[0]
            if p not in bad and s not in bad:
                pairs.append((p, s))
    return pairs


# The k-th instance fires from the k-th ratio of the whole trial up.
THRESHOLDS = [ratio(s - 1, s) * (1 - 1e-6) for s in range(1, STEPS)]


def rules_yaml(path):
    with open(path, "w") as f:
        f.write("rules:\n")
        for k, t in enumerate(THRESHOLDS):
            f.write("  - rule: WeightUpdateRatio\n    name: above%d\n"
                    "    parameters: {large_threshold: %r, small_threshold: 0}\n" % (k, t))
        # compares with two steps back: not the value kept from the step before
        f.write("  - rule: WeightUpdateRatio\n    name: window2\n"
                "    parameters: {num_steps: 2, large_threshold: 0, small_threshold: 0}\n")


def check_ratios(c, trial, defect, tmp):
    rules = os.path.join(tmp, "rules.yaml")
    rules_yaml(rules)
    pairs = expected_pairs(defect)
    for jobs in ("1", "2"):
        out = os.path.join(tmp, "out-%s-%s" % (os.path.basename(trial), jobs))
        r = lib.run_json(["run", "--trial", trial, "--rules", rules, "--fresh",
                          "--jobs", jobs, "--output", out])
        sc = c.scope("%s, --jobs %s" % (defect or "whole trial", jobs), r)
        sc.eq("exit status", r.rc, 1)
        for k, t in enumerate(THRESHOLDS):
            rep = lib.load_json(os.path.join(out, "above%d" % k, "report.json")) or {}
            det = rep.get("Details", {})
            fire = [(p, s) for p, s in pairs if ratio(p, s) > t]
            sc.eq("above%d: triggered steps" % k, det.get("triggered_steps"),
                  [s for _, s in fire])
            if not fire:
                continue
            got = [(x.get("tensor"), x.get("previous_step"), x.get("ratio"))
                   for x in det.get("first_trigger", {}).get("violations", [])]
            p, s = fire[0]
            sc.eq("above%d: first trigger (tensor, previous step, ratio)" % k, got,
                  [("big.weight", p, ratio(p, s))])
        rep = lib.load_json(os.path.join(out, "window2", "report.json")) or {}
        det = rep.get("Details", {})
        wpairs = expected_pairs(defect, window=2)
        sc.eq("window2: triggered steps", det.get("triggered_steps"), [s for _, s in wpairs])
        for which, (p, s) in (("first", wpairs[0]), ("last", wpairs[-1])):
            got = [(x.get("tensor"), x.get("previous_step"), x.get("ratio"))
                   for x in det.get(which + "_trigger", {}).get("violations", [])
                   if x.get("tensor") == "big.weight"]
            sc.eq("window2: %s trigger (tensor, previous step, ratio)" % which, got,
                  [("big.weight", p, ratio(p, s))])


def main():
    c = lib.Checker(NAME)
    tmp = tempfile.mkdtemp(prefix="smrules-weight-update-reads-")
    try:
        whole = os.path.join(tmp, "whole")
        write_trial(whole)
        events = 0
        for root, _, files in os.walk(os.path.join(whole, "events")):
            events += sum(os.path.getsize(os.path.join(root, f)) for f in files)
        rules = os.path.join(tmp, "one.yaml")
        with open(rules, "w") as f:
            f.write("rules:\n  - rule: WeightUpdateRatio\n"
                    "    parameters: {small_threshold: 0}\n")
        for jobs in ("1", "2"):
            rc, got = lib.run_rchar(["run", "--trial", whole, "--rules", rules, "--fresh",
                                "--jobs", jobs, "--output", os.path.join(tmp, "one")])
            c.ok(rc == 0, "WeightUpdateRatio alone, --jobs %s: exit status %s (0)" % (jobs, rc))
            c.ok(got <= events * 1.1,
                 "WeightUpdateRatio alone, --jobs %s: %.1f MB read for %.1f MB of event "
                 "files (each record once: at most %.1f MB)"
                 % (jobs, got / 1e6, events / 1e6, events * 1.1 / 1e6))
        check_ratios(c, whole, None, tmp)
        for defect in (("corrupt", 2), ("truncated", 3), ("missing", 3)):
            trial = os.path.join(tmp, "%s-%d" % defect)
            write_trial(trial, defect)
            check_ratios(c, trial, defect, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
