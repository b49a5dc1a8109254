#!/usr/bin/env python3
"""WeightUpdateRatio with an infinite weight that stays the same between
two steps: the update there is inf - inf, NaN, so the update norm and the
ratio are NaN and the rule does not fire for that tensor
(docs/rules/WeightUpdateRatio.md: the norm of w_s - w_p, element by
element; NaN does not fire).  The update norm's kernel skips blocks of 64
elements whose floats are all equal; it once took equal infinities for a
zero update, and the ratio 0 fired as too small.

A trial of three TRAIN steps, collection `weights`, three float32 tensors
of 200 elements (three blocks and a tail):
  w/stuck_inf   the same at every step, with +inf at 70 and -inf at 140:
                never a violation
  w/frozen      the same finite values at every step: ratio 0, a violation
                at steps 1 and 2
  w/moving      every element moves a little at every step: no violation
checked with --jobs 1 and 2.
"""

import json
import math
import os
import shutil
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

NAME = "test_update_norm_infinity"
N = 200
STEPS = 3
TENSORS = ["w/frozen", "w/moving", "w/stuck_inf"]


def values(name, step):
    v = [((i * 37) % 101 - 50) / 64.0 for i in range(N)]  # float32-exact
    if name == "w/moving":
        v = [x + (step + 1) * 2.0 ** -10 for x in v]
    if name == "w/stuck_inf":
        v[70], v[140] = math.inf, -math.inf
    return v


def record(name, floats, step):
    return lib.f32_record(name, struct.pack("<%df" % len(floats), *floats), len(floats), step)


def write_trial(folder):
    for step in range(STEPS):
        lib.write_step(folder, step,
                       [(name, record(name, values(name, step), step)) for name in TENSORS])
    coll = os.path.join(folder, "collections/000000000/worker_0_collections.json")
    os.makedirs(os.path.dirname(coll), exist_ok=True)
    with open(coll, "w") as f:
        json.dump({"collections": {"weights": {"name": "weights", "include_regex": ["^w/"],
                                               "tensor_names": []}},
                   "_meta": {"num_workers": 1}}, f)
    lib.write_end_marker(folder)


def main():
    c = lib.Checker(NAME)
    tmp = tempfile.mkdtemp(prefix="smrules-update-norm-inf-")
    try:
        trial = os.path.join(tmp, "trial")
        write_trial(trial)
        rules = os.path.join(tmp, "rules.yaml")
        with open(rules, "w") as f:
            f.write("rules:\n  - rule: WeightUpdateRatio\n")
        for jobs in ("1", "2"):
            out = os.path.join(tmp, "out-" + jobs)
            r = lib.run_json(["run", "--trial", trial, "--rules", rules, "--fresh",
                              "--jobs", jobs, "--output", out])
            sc = c.scope("--jobs %s" % jobs, r)
            sc.eq("exit status", r.rc, 1)
            rep = lib.load_json(os.path.join(out, "WeightUpdateRatio", "report.json"))
            det = rep.get("Details", {})
            sc.eq("triggered steps", det.get("triggered_steps"), [1, 2])
            got = sorted((v.get("tensor"), v.get("ratio"))
                         for v in det.get("last_trigger", {}).get("violations", []))
            sc.eq("violations at step 2 (tensor, ratio)", got, [("w/frozen", 0)])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
