#!/usr/bin/env python3
"""End-to-end: `smrules run --schedule rules|steps|auto` (core/run/schedule.c).

1. The order is the one asked for: two Lua rules logging each visited
   step, one thread: `rules` visits all steps of the first rule, then all
   of the second; `steps` alternates rule by rule, step by step; `auto`
   (the default) is `steps` for several rules, local trials included
   (within a step either rule may go first: the longer turns lead).
2. The order never changes a result: on every real trial and the invoker
   fixtures, twelve built-in rules and a Lua rule give the same `--json`
   results and the same rule-output files with `--schedule steps` (one and
   two threads) as with `--schedule rules`.
3. Resume under lock step: a run stopped at --end-step and continued from
   its stored state gives the same results as one run.  (Regression: a
   rule that had reported no datapoints before the stop, such as Overfit
   with only TRAIN steps before step 10, counted one datapoint short after
   the resume: the stored "never reported" -1 was added to.)
4. A bad `--schedule` value is a usage error (exit 2) naming the choices.

Lock step against a remote trial's record cache (each record fetched once)
is checked in test_s3.py.
"""

import json
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

NAME = "test_schedule"
TRIALS = os.path.join(lib.FIXTURES, "trials")
SYN = os.path.join(lib.FIXTURES, "synthetic")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

with open(os.path.join(REPO, "examples", "many-rules.yaml")) as _f:
    MANY = _f.read() + "  - name: GradientMeanAbs\n    lua: %s\n" % os.path.join(
        REPO, "rules", "gradient_mean_abs.lua")


PROBE = """function invoke_at_step(step)
  log("visit", step)
  return false
end
"""


write = lib.write_text


def visits(err):
    """[(rule, step)] from the -v log lines of the probe rules."""
    out = []
    for line in err.splitlines():
        parts = line.split(": ")
        if len(parts) >= 4 and parts[2] == "info" and parts[3].startswith("visit"):
            out.append((parts[1], int(line.rsplit(None, 1)[-1])))
    return out


def lock_step(seen, steps):
    """Both rules visit each step before either visits the next.  Within a
    step the rule whose turns have taken longer goes first (schedule.c), so
    with two identical probes either may lead."""
    pairs = [seen[i:i + 2] for i in range(0, len(seen), 2)]
    return (len(seen) == 2 * len(steps) and
            all(sorted(p) == [("A", s), ("B", s)] for p, s in zip(pairs, steps)))


def check_order(c, tmp):
    probe = write(os.path.join(tmp, "probe.lua"), PROBE)
    rules = write(os.path.join(tmp, "order.yaml"),
                  "rules:\n  - name: A\n    lua: %s\n  - name: B\n    lua: %s\n" % (probe, probe))
    trial = os.path.join(TRIALS, "healthy_mlp_digits")
    got = {}
    for sched in ("rules", "steps"):
        r = lib.run_json(["run", "--trial", trial, "--rules", rules, "--fresh", "--jobs", "1", "-v",
                     "--output", os.path.join(tmp, "o-order"), "--schedule", sched])
        sc = c.scope("order --schedule %s" % sched, r)
        sc.exit_code(r, (0,))
        got[sched] = visits(r.err)
    a = [s for rule, s in got["rules"] if rule == "A"]
    c.ok(len(a) >= 3, "the probe visits at least three steps", lib.short(got["rules"]))
    c.ok(got["rules"] == [("A", s) for s in a] + [("B", s) for s in a],
         "--schedule rules: every step of A, then every step of B", lib.short(got["rules"]))
    c.ok(lock_step(got["steps"], a),
         "--schedule steps: A and B take turns step by step", lib.short(got["steps"]))
    r = lib.run_json(["run", "--trial", trial, "--rules", rules, "--fresh", "--jobs", "1", "-v",
                 "--output", os.path.join(tmp, "o-order")])
    # several rules share values' statistics in lock step, local or not
    c.ok(lock_step(visits(r.err), a), "--schedule auto, two rules on a local trial: lock step",
         lib.short(visits(r.err)))
    one = write(os.path.join(tmp, "one.yaml"), "rules:\n  - name: A\n    lua: %s\n" % probe)
    r = lib.run_json(["run", "--trial", trial, "--rules", one, "--fresh", "--jobs", "1", "-v",
                      "--output", os.path.join(tmp, "o-order")])
    c.ok(visits(r.err) == [("A", s) for s in a], "--schedule auto, one rule: all its steps",
         lib.short(visits(r.err)))


def tree(folder):
    """{relative path: parsed JSON or text} of a rule-output folder."""
    out = {}
    for d, _, files in os.walk(folder):
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                data = fh.read()
            try:
                out[os.path.relpath(p, folder)] = json.loads(data)
            except ValueError:
                out[os.path.relpath(p, folder)] = data
    return out


def run_set(trial, rules, out, sched, jobs, extra=()):
    return ["run", "--trial", trial, "--rules", rules, "--json", "--output", out,
            "--schedule", sched, "--jobs", str(jobs)] + list(extra)


def check_same_results(c, tmp):
    rules = write(os.path.join(tmp, "many.yaml"), MANY)
    trials = [os.path.join(TRIALS, n) for n in sorted(os.listdir(TRIALS))
              if os.path.isdir(os.path.join(TRIALS, n))]
    for n in sorted(os.listdir(SYN)):  # the trial of a case is its trial_dir
        if n.startswith("invoker_"):
            sub = lib.load_json(os.path.join(SYN, n, "EXPECT.json")).get("trial_dir") or ""
            trials.append(os.path.join(SYN, n, sub))
    variants = [("rules", 1), ("steps", 1), ("steps", 2), ("rules", 2)]
    jobs, keys = [], []
    for t in trials:
        for sched, j in variants:
            o = os.path.join(tmp, "out", lib.rel(t).replace("/", "_"), "%s-%d" % (sched, j))
            jobs.append(run_set(t, rules, o, sched, j, ["--fresh"]))
            keys.append((t, sched, j, o))
    res = lib.run_all(jobs)
    base = {}
    for (t, sched, j, o), r in zip(keys, res):
        label = "%s --schedule %s --jobs %d" % (lib.rel(t), sched, j)
        sc = c.scope(label, r)
        if not sc.process(r):
            continue
        if (sched, j) == ("rules", 1):
            base[t] = (r.rc, r.obj, tree(o))
            sc.ok(len(r.obj.get("rules", [])) == 13, "thirteen rules reported", lib.short(r.obj)[:200])
            continue
        rc, obj, files = base.get(t, (None, None, None))
        sc.eq("exit code (same as --schedule rules --jobs 1)", r.rc, rc)
        sc.ok(r.obj == obj, "same --json results as --schedule rules", lib.first_difference(r.obj, obj))
        got = tree(o)
        sc.ok(got == files, "same rule-output files as --schedule rules",
              lib.first_difference(got, files))


def check_resume(c, tmp):
    rules = write(os.path.join(tmp, "many.yaml"), MANY)
    for name in ("healthy_mlp_digits", "exploding_mse_high_lr"):
        trial = os.path.join(TRIALS, name)
        one = lib.run_json(run_set(trial, rules, os.path.join(tmp, "r1"), "steps", 2, ["--fresh"]))
        state = os.path.join(tmp, "state-%s.db" % name)
        first = lib.run_json(run_set(trial, rules, os.path.join(tmp, "r2"), "steps", 2,
                                ["--state", state, "--end-step", "10"]))
        second = lib.run_json(run_set(trial, rules, os.path.join(tmp, "r2"), "steps", 2, ["--state", state]))
        sc = c.scope("%s: resume under --schedule steps" % name, second)
        if sc.process(one) and sc.process(first) and sc.process(second):
            sc.ok(any(r.get("evaluated_steps", 0) for r in first.obj["rules"]),
                  "the first run (--end-step 10) evaluated steps", lib.short(first.obj)[:200])
            sc.eq("exit code", second.rc, one.rc)
            sc.ok(second.obj["rules"] == one.obj["rules"], "continued run = one run",
                  lib.first_difference(second.obj["rules"], one.obj["rules"]))


def check_usage(c):
    r = lib.run_json(["run", "--trial", os.path.join(TRIALS, "healthy_mlp_digits"), "--schedule", "fast"])
    sc = c.scope("--schedule fast", r)
    sc.exit_code(r, (2,))
    sc.ok("auto, rules or steps" in r.err, "the message names the choices", r.err.strip())


def main():
    c = lib.Checker(NAME)
    tmp = tempfile.mkdtemp(prefix="smrules-schedule-")
    try:
        check_order(c, tmp)
        check_same_results(c, tmp)
        check_resume(c, tmp)
        check_usage(c)
    finally:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
