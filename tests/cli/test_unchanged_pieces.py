#!/usr/bin/env python3
"""UnchangedTensor compares an earlier value with the current one in
pieces read one by one (the SDK's value_pieces) and stops at the first
piece that is not allclose: an earlier value that differs early costs
about one piece, not its whole record; the answers are those of whole
comparisons.

A trial of six steps of float32 tensors of 400,000 elements (records of
1.6 MB, about six pieces of 65,536 elements) whose first 1,000 elements
are zero at every step, as a ReLU output's inactive units are, and whose
four kept runs of 16 elements never change, so that neither the first
elements nor the runs prove a change and the values are compared:
  r/early    element 5,000 (in the first piece) changes at every step:
             never unchanged
  r/late     element 399,990 (in the last piece) changes at every step:
             never unchanged; every piece is compared
  r/close    the first piece's elements past the zeros move by 1e-6 of
             their value at every step (within rtol, not equal bytes),
             the rest is the same: unchanged from step 2 on
  r/frozen   the same at every step: unchanged from step 2 on
The violations and triggered steps are exactly these with --jobs 1 and 2.
UnchangedTensor over r/early alone reads, in bytes of trial files
(smrules_read_bytes_total in --metrics-file), less than five of its
records: the current value of step 2 whole (nothing is kept of step 1,
which was not evaluated), steps 0 and 1 once more each for whether they
have a value (counts, without the other rules that would have asked for
them), the first piece of step 1; then, at steps 3-5, where the first
elements and runs prove nothing, the first piece of the current value
and of the earlier one, read alone.  Reading each earlier value whole was
ten records; reading it in pieces but the current value whole, nearly
seven.  Over r/late it reads every piece of the earlier values, as the
whole reads did: more than eight records.
When another rule (AllZero) reads every record whole, the earlier value's
pieces come from the record it read at the step before, which the run
still holds (records of a few MB are shared by the rules), not from the
file again: UnchangedTensor and AllZero over r/late with --jobs 1 read
(rchar of the process, which counts only what the kernel copied) less
than eight of its six records; reading the pieces from the file again
was eleven.
"""

import array
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

NAME = "test_unchanged_pieces"
N = 400000
ZEROS = 1000
STEPS = 6
TENSORS = ["r/early", "r/late", "r/close", "r/frozen"]
PIECE = 65536


def values(name, step):
    v = array.array("f", [0.0] * ZEROS + [1.0 + (i % 89) / 16.0 for i in range(N - ZEROS)])
    if name == "r/early":
        v[5000] = 100.0 + step
    elif name == "r/late":
        v[N - 10] = 100.0 + step
    elif name == "r/close":
        for i in range(ZEROS, PIECE):
            v[i] = v[i] * (1.0 + 1e-6 * step)
    return v


def write_trial(folder):
    """The trial; returns {tensor: bytes of its records}, and the bytes of
    the other files smrules reads (indexes)."""
    sizes, other = {name: 0 for name in TENSORS}, 0
    for step in range(STEPS):
        records = []
        for name in TENSORS:
            rec = lib.f32_record(name, values(name, step).tobytes(), N, step)
            sizes[name] += len(rec)
            records.append((name, rec))
        other += len(lib.write_step(folder, step, records)[1])
    lib.write_end_marker(folder)
    return sizes, other


def read_bytes(metrics_file):
    with open(metrics_file) as f:
        m = re.search(r"^smrules_read_bytes_total\{[^}]*\} (\d+)$", f.read(), re.M)
    return int(m.group(1)) if m else None


def alone(c, tmp, trial, name):
    """Bytes of trial files UnchangedTensor over `name` alone reads."""
    rules = os.path.join(tmp, "alone.yaml")
    with open(rules, "w") as f:
        f.write("rules:\n  - rule: UnchangedTensor\n"
                "    parameters: {tensor_regex: '^%s$'}\n" % name)
    metrics = os.path.join(tmp, "metrics-%s.txt" % name.replace("/", "_"))
    r = lib.run_json(["run", "--trial", trial, "--rules", rules, "--fresh",
                      "--output", os.path.join(tmp, "out-alone"),
                      "--metrics-file", metrics])
    sc = c.scope("%s alone" % name, r)
    sc.eq("exit status", r.rc, 0)
    got = read_bytes(metrics) if os.path.exists(metrics) else None
    sc.ok(got is not None, "smrules_read_bytes_total in the metrics file")
    return sc, got


def beside_allzero(c, tmp, trial, record, other):
    """r/late with AllZero, which reads each record whole first."""
    rules = os.path.join(tmp, "rules-allzero.yaml")
    with open(rules, "w") as f:
        f.write("rules:\n  - rule: AllZero\n    parameters: {tensor_regex: '^r/late$'}\n"
                "  - rule: UnchangedTensor\n    parameters: {tensor_regex: '^r/late$'}\n")
    rc, got = lib.run_rchar(["run", "--trial", trial, "--rules", rules, "--fresh", "--jobs", "1",
                        "--output", os.path.join(tmp, "out-allzero")])
    sc = c.scope("r/late beside AllZero, --jobs 1")
    sc.eq("exit status", rc, 0)
    limit = 8 * record + other + (1 << 20)  # + the binary's own reads
    sc.ok(got < limit, "read %d bytes, less than eight records (%d), the index files "
          "and 1 MiB: %d" % (got, record, limit))


def main():
    c = lib.Checker(NAME)
    tmp = tempfile.mkdtemp(prefix="smrules-unchanged-pieces-")
    try:
        trial = os.path.join(tmp, "trial")
        sizes, other = write_trial(trial)
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
            sc.eq("stderr", r.err, "")
            rep = lib.load_json(os.path.join(out, "UnchangedTensor", "report.json"))
            det = rep.get("Details", {})
            sc.eq("triggered steps", det.get("triggered_steps"), [2, 3, 4, 5])
            got = {v["tensor"]: v["steps"]
                   for v in det.get("last_trigger", {}).get("violations", [])}
            sc.eq("violations at step 5", got, {"r/close": [3, 4, 5], "r/frozen": [3, 4, 5]})

        record = sizes["r/early"] // STEPS
        sc, got = alone(c, tmp, trial, "r/early")
        if got is not None:
            limit = 5 * record + other
            sc.ok(got < limit, "read %d bytes, less than five records (%d) and the "
                  "index files (%d): %d" % (got, record, other, limit))
        sc, got = alone(c, tmp, trial, "r/late")
        if got is not None:
            sc.ok(got > 8 * record, "read %d bytes, more than eight records (%d): "
                  "every piece compared" % (got, 8 * record))
        beside_allzero(c, tmp, trial, record, other)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
