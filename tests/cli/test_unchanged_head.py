#!/usr/bin/env python3
"""UnchangedTensor reading only the first elements of the current value
(the SDK's value_head, docs/formats.md#reading-the-first-elements) gives
the answers of whole reads.

A trial of six steps of float32 tensors of 10,000 elements (records of
40 KB, large enough to be read from their first and last bytes), written
with smdebug's constant footer and again with real payload checksums (only
whole reads then):
  w/changing        its first element changes at every step: never unchanged
  w/frozen          the same at every step: unchanged from step 2 on
  w/tail_changes    the first 5,000 elements the same, element 5,000 changes
                    at every step: the first elements prove nothing, the
                    whole values differ: never unchanged
  w/then_frozen     changes at steps 0-2, the same from step 3: unchanged
                    at step 5 only
The violations and triggered steps are exactly these, with --jobs 1 and 2,
and the result and report files are byte-identical between the two
footers.
"""

import filecmp
import os
import shutil
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

NAME = "test_unchanged_head"
N = 10000
STEPS = 6




def record(name, floats, step, real_crc):
    return lib.f32_record(name, struct.pack("<%df" % len(floats), *floats), len(floats), step,
                          real_crc=real_crc)


def values(name, step):
    v = [float(i % 97) / 8.0 for i in range(N)]
    if name == "w/changing":
        v[0] = float(step)
    elif name == "w/tail_changes":
        v[5000] = 100.0 + step
    elif name == "w/then_frozen":
        v[1] = float(min(step, 3))
    return v


TENSORS = ["w/changing", "w/frozen", "w/tail_changes", "w/then_frozen"]


def write_trial(folder, real_crc):
    for step in range(STEPS):
        lib.write_step(folder, step,
                       [(name, record(name, values(name, step), step, real_crc)) for name in TENSORS])
    lib.write_end_marker(folder)


def main():
    c = lib.Checker(NAME)
    tmp = tempfile.mkdtemp(prefix="smrules-unchanged-head-")
    try:
        rules = os.path.join(tmp, "rules.yaml")
        with open(rules, "w") as f:
            f.write("rules:\n  - rule: UnchangedTensor\n"
                    "    parameters: {tensor_regex: '^w/'}\n")
        outs = {}
        for real_crc in (False, True):
            trial = os.path.join(tmp, "crc" if real_crc else "const")
            write_trial(trial, real_crc)
            for jobs in ("1", "2"):
                out = os.path.join(tmp, "out-%s-%s" % (real_crc, jobs))
                r = lib.run_json(["run", "--trial", trial, "--rules", rules, "--fresh",
                             "--jobs", jobs, "--output", out])
                sc = c.scope("%s footer, --jobs %s" % ("real" if real_crc else "smdebug's",
                                                        jobs), r)
                sc.eq("exit status", r.rc, 1)
                rep = lib.load_json(os.path.join(out, "UnchangedTensor", "report.json"))
                det = rep.get("Details", {})
                sc.eq("triggered steps", det.get("triggered_steps"), [2, 3, 4, 5])
                got = {v["tensor"]: v["steps"]
                       for v in det.get("last_trigger", {}).get("violations", [])}
                sc.eq("violations at step 5", got,
                      {"w/frozen": [3, 4, 5], "w/then_frozen": [3, 4, 5]})
                outs[(real_crc, jobs)] = out
        for jobs in ("1", "2"):
            a, b = outs[(False, jobs)], outs[(True, jobs)]
            for rel in ("UnchangedTensor/report.json",):
                c.ok(filecmp.cmp(os.path.join(a, rel), os.path.join(b, rel), shallow=False),
                     "%s identical with either footer (--jobs %s)" % (rel, jobs))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
