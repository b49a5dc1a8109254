#!/usr/bin/env python3
"""bench/torch_hook_bench.py's verdicts (section 9 of bench/README.md),
from the figures of every round given to `--report`: no timing is
measured here, the rounds are made up so that each verdict has one answer.

The verdict at save_interval 1 is taken round by round: each round's
margin, the hook's cost less 1.2 times the same round's baseline cost.
- every round well under: PASS, "10/10 rounds met";
- half the rounds over and half under, with medians that alone would
  pass: UNSURE, and the quartiles of the margin straddle 0;
- a baseline that drifts 3x from round to round while the hook's cost
  follows it (1.1 times it in each round): PASS, where comparing the
  medians of the two series alone would not tell;
- every round over: MISS;
- a round whose baseline cost comes out at or below 0 (noise) does not
  break the report;
- with HOOK_BASE's hook (base1) in the rounds: its rows and the paired
  difference this - HOOK_BASE."""

import json
import os
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import pylib  # noqa: E402

BENCH = os.path.join(lib.ROOT, "bench", "torch_hook_bench.py")
NONE_MS = 40.0
KINDS = ["none", "every100", "every1", "rawwrite", "rawfiles"]


def dump(path, hook_ms, files_ms, write_ms=None, base_ms=None, writer_ms=1.0, every100_ms=None,
         steps=100, smdebug_ms=None):
    """A dump of len(hook_ms) rounds of `steps` steps per configuration:
    each kind's step time is the run with no hook plus the cost given for
    that round (ms)."""
    n = len(hook_ms)
    write_ms = write_ms or files_ms
    kinds = KINDS + (["base1"] if base_ms else []) + (["smdebug1"] if smdebug_ms else [])
    cost = {"none": [0.0] * n, "every100": every100_ms or [0.1] * n, "every1": hook_ms,
            "rawwrite": write_ms, "rawfiles": files_ms}
    if base_ms:
        cost["base1"] = base_ms
    if smdebug_ms:
        cost["smdebug1"] = smdebug_ms
    times = {k: [(NONE_MS + cost[k][r]) / 1e3 for r in range(n)] for k in kinds}
    writer = {k: [writer_ms / 1e3 if k in ("every1", "base1") else 0.0] * n for k in kinds}
    with open(path, "w") as f:
        json.dump({"kinds": kinds, "times": times, "cpus": times, "writer": writer,
                   "steps": steps, "batch": 64, "loadavg": ["0.50", "0.50", "0.50"]}, f)


def scenario(c, tmp, title, *rounds, **kw):
    """A scope of checks on the report of the rounds given (dump's
    arguments): (the scope, the report's output); that it ran is its first
    check."""
    s = c.scope(title)
    p = os.path.join(tmp, "rounds%d.json" % len(os.listdir(tmp)))
    dump(p, *rounds, **kw)
    rc, out, err = report(p)
    s.ok(rc == 0, "report runs", err[-2000:])
    return s, out


def report(path):
    rc, out, err = pylib.run_py(BENCH, ["--report", path])
    return rc, out, err


def row(out, label):
    """The report's row that starts with `label`, split in its columns
    (two spaces or more apart), or None."""
    for line in out.splitlines():
        if line.startswith(label):
            return [c.strip() for c in line[len(label):].split("  ") if c.strip()]
    return None


def main():
    c = pylib.torch_checker("test_hook_bench_verdict")
    tmp = tempfile.mkdtemp(prefix="smr-hookbench-")
    files_row = "save_interval 1 / raw files (layout)"
    margin_row = "  margin: cost - 1.2 x baseline, ms"
    try:
        s, out = scenario(c, tmp, "all rounds under", [0.5] * 10, [1.0] * 10)
        r = row(out, files_row)
        s.ok(r is not None and r[0].startswith("0.50x") and "10/10 rounds met" in r[0]
             and r[-1] == "PASS", "0.50x, 10/10 rounds met, PASS", out)

        # five rounds at 0.9x, five at 1.4x: the medians of the costs give
        # 1.15x (a pass if that were all), the rounds say otherwise
        s, out = scenario(c, tmp, "a coin toss", [0.9, 1.4] * 5, [1.0] * 10)
        r = row(out, files_row)
        s.ok(r is not None and r[0].startswith("1.15x") and "5/10 rounds met" in r[0]
             and r[-1] == "UNSURE", "1.15x, 5/10 rounds met, UNSURE", out)
        lines = out.splitlines()
        i = next((k for k, x in enumerate(lines) if x.startswith(files_row)), None)
        m = row(lines[i + 1], margin_row) if i is not None and i + 1 < len(lines) else None
        s.ok(m is not None and m[0].startswith("-0.050 [-0.300 +0.200]") and m[-1] == "UNSURE",
             "the margin's quartiles straddle 0: -0.050 [-0.300 +0.200]", out)

        base = [0.6, 1.8, 0.6, 1.8, 0.6, 1.8, 0.6, 1.8, 0.6, 1.8]
        s, out = scenario(c, tmp, "a drifting baseline", [1.1 * b for b in base], base)
        r = row(out, files_row)
        s.ok(r is not None and "10/10 rounds met" in r[0] and r[-1] == "PASS",
             "each round at 1.1x its own baseline: PASS", out)
        s.ok(r is not None and "[+0.600 +1.800]" in r[1],
             "the baseline's spread is printed: [+0.600 +1.800]", out)

        s, out = scenario(c, tmp, "all rounds over", [1.5] * 10, [1.0] * 10,
                          write_ms=[2.0] * 10)
        r = row(out, files_row)
        s.ok(r is not None and r[0].startswith("1.50x") and r[-1] == "MISS", "1.50x: MISS", out)
        r = row(out, "save_interval 1 / raw write (one file)")
        s.ok(r is not None and r[0].startswith("0.75x") and r[-1] == "PASS",
             "against the one-file write of 2 ms: 0.75x, PASS", out)
        s.ok("RESULT hook_overhead_1_vs_files 1.500" in out and
             "RESULT hook_overhead_1_vs_files_margin_ms 0.3000" in out,
             "RESULT lines: the ratio and the margin", out)

        s, out = scenario(c, tmp, "a baseline at or below 0", [0.5] * 10,
                          [-0.2, 0.0] + [1.0] * 8)
        r = row(out, files_row)
        s.ok(r is not None and "8/10 rounds met" in r[0] and r[-1] == "PASS",
             "the two noisy rounds miss, the verdict stands: 8/10, PASS", out)

        # one round in five holds the saving step (+12.5 ms over its 20
        # steps): the cost is taken over blocks of five rounds (100 steps),
        # 2.5 ms a step = 6.2 % of 40 ms; the median round (no saving step)
        # would say 0 %
        s, out = scenario(c, tmp, "save_interval 100 in slices of 20 steps", [0.5] * 30,
                          [1.0] * 30, every100_ms=[0.0, 0.0, 0.0, 0.0, 12.5] * 6, steps=20)
        r = row(out, "step, save_interval 100: cost")
        s.ok(r is not None and r[0].startswith("+6.2 %") and r[-1] == "MISS",
             "+6.2 % over blocks of 100 steps: MISS", out)

        s, out = scenario(c, tmp, "with smdebug's hook (HOOK_SMDEBUG)", [0.5] * 10, [1.0] * 10,
                          smdebug_ms=[15.0] * 10)
        r = row(out, "step, smdebug's save_interval 1: cost, ms")
        s.ok(r is not None and r[0].startswith("+15.000"), "its cost: +15.000 ms a step", out)
        r = row(out, "smdebug's save_interval 1 / raw files (layout)")
        s.ok(r is not None and r[0].startswith("15.00x") and r[-1] == "MISS",
             "15.00x the raw files: MISS", out)
        r = row(out, "save_interval 1, this - smdebug's: wall, ms")
        s.ok(r is not None and r[0].startswith("-14.500 [-14.500 -14.500]"),
             "this - smdebug's: -14.500 a step", out)
        s.ok("RESULT hook_smdebug1_cost_ms 15.0000" in out, "RESULT line of its cost", out)

        s, out = scenario(c, tmp, "paired with HOOK_BASE", [0.8] * 10, [1.0] * 10,
                          base_ms=[1.0] * 10)
        r = row(out, "HOOK_BASE's save_interval 1 / raw files (layout)")
        s.ok(r is not None and r[0].startswith("1.00x") and r[-1] == "PASS", "1.00x, PASS", out)
        r = row(out, "save_interval 1, this - HOOK_BASE: wall, ms")
        s.ok(r is not None and r[0].startswith("-0.200 [-0.200 -0.200]"),
             "this - HOOK_BASE: -0.200 a step", out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
