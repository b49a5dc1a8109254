#!/usr/bin/env python3
"""UnchangedTensor proves a change from runs of elements kept from the
previous value (plugins/tensor/unchanged_tensor: WINDOWS runs spread over a
value read whole) without reading the previous value again, and gives the
answers of whole comparisons.

A trial of six steps of float32 tensors of 20,000 elements (records of
80 KB) whose first 2,000 elements are zero at every step, as a ReLU
output's inactive units are, so the first elements prove nothing:
  r/active        every element past the zeros changes at every step: never
                  unchanged; the previous value is never read again
  r/last_changes  only the last element changes (in no kept run): the whole
                  values differ, never unchanged
  r/close         the elements past the zeros move by 1e-9 of their value
                  (within rtol): unchanged from step 2 on
  r/frozen        the same at every step: unchanged from step 2 on
The violations and triggered steps are exactly these with --jobs 1 and 2;
and UnchangedTensor over r/active alone reads, in bytes of trial files
(smrules_read_bytes_total in --metrics-file), less than 1.5 times its six
records plus the index and collection files (each record once and the
first bytes of some; reading the previous value again made it about 2),
and less than four records and three records' first bytes and windows:
its first elements are zero at every step, so only the windows read alone
(api->value_runs) prove steps 3-5 changed, where it read each whole.
"""

import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
from test_unchanged_head import record  # noqa: E402

NAME = "test_unchanged_windows"
N = 20000
ZEROS = 2000
STEPS = 6
TENSORS = ["r/active", "r/last_changes", "r/close", "r/frozen"]
# What a value's first elements and its windows read without the rest of
# the record: value_head's first bytes (up to 5.2 KB) and last bytes, and
# value_runs' first bytes again with its four runs of 16 elements.
HEAD_READS = 12 * 1024


def values(name, step):
    v = [0.0] * ZEROS + [1.0 + (i % 89) / 16.0 for i in range(N - ZEROS)]
    if name == "r/active":
        v = v[:ZEROS] + [x + step * 0.5 for x in v[ZEROS:]]
    elif name == "r/last_changes":
        v[-1] = 100.0 + step
    elif name == "r/close":
        v = v[:ZEROS] + [x * (1.0 + 1e-9 * step) for x in v[ZEROS:]]
    return v


def write_trial(folder):
    """The trial; returns (bytes of r/active's records, bytes of the other
    files smrules reads: indexes and the end marker)."""
    active, other = 0, 0
    for step in range(STEPS):
        records = [(name, record(name, values(name, step), step, False)) for name in TENSORS]
        active += sum(len(rec) for name, rec in records if name == "r/active")
        other += len(lib.write_step(folder, step, records)[1])
    lib.write_end_marker(folder)
    return active, other


def read_bytes(metrics_file):
    with open(metrics_file) as f:
        m = re.search(r"^smrules_read_bytes_total\{[^}]*\} (\d+)$", f.read(), re.M)
    return int(m.group(1)) if m else None


def main():
    c = lib.Checker(NAME)
    tmp = tempfile.mkdtemp(prefix="smrules-unchanged-windows-")
    try:
        trial = os.path.join(tmp, "trial")
        active, other = write_trial(trial)
        rules = os.path.join(tmp, "rules.yaml")
        with open(rules, "w") as f:
            f.write("rules:\n  - rule: UnchangedTensor\n"
                    "    parameters: {tensor_regex: '^r/'}\n")
        for jobs in ("1", "2"):
            out = os.path.join(tmp, "out-%s" % jobs)
            r = lib.run_json(["run", "--trial", trial, "--rules", rules, "--fresh",
                              "--jobs", jobs, "--output", out])
            sc = c.scope("--jobs %s" % jobs, r)
            sc.eq("exit status", r.rc, 1)
            rep = lib.load_json(os.path.join(out, "UnchangedTensor", "report.json"))
            det = rep.get("Details", {})
            sc.eq("triggered steps", det.get("triggered_steps"), [2, 3, 4, 5])
            got = {v["tensor"]: v["steps"]
                   for v in det.get("last_trigger", {}).get("violations", [])}
            sc.eq("violations at step 5", got, {"r/close": [3, 4, 5], "r/frozen": [3, 4, 5]})

        one = os.path.join(tmp, "active.yaml")
        with open(one, "w") as f:
            f.write("rules:\n  - rule: UnchangedTensor\n"
                    "    parameters: {tensor_regex: '^r/active$'}\n")
        metrics = os.path.join(tmp, "metrics.txt")
        r = lib.run_json(["run", "--trial", trial, "--rules", one, "--fresh",
                          "--output", os.path.join(tmp, "out-active"),
                          "--metrics-file", metrics])
        sc = c.scope("r/active alone", r)
        sc.eq("exit status", r.rc, 0)
        got = read_bytes(metrics) if os.path.exists(metrics) else None
        sc.ok(got is not None, "smrules_read_bytes_total in the metrics file")
        if got is not None:
            limit = 1.5 * active + other + 4096
            sc.ok(got < limit, "read %d bytes, less than %d (records %d, index %d)"
                  % (got, limit, active, other))
            # steps 3-5 are proved changed by the windows alone
            # (api->value_runs), their records not read whole: four records
            # are (step 2 compared with steps 1 and 0, whose windows were
            # not kept, and step 1 again for whether it has a value), then
            # the first bytes and the windows of steps 3-5 (reading them
            # whole too was 7 records and more)
            record = active // STEPS
            limit = 4 * record + 3 * HEAD_READS + other + 4096
            sc.ok(got < limit, "read %d bytes, less than four records and "
                  "three heads with their windows: %d" % (got, limit))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
