#!/usr/bin/env python3
"""End-to-end: smrules never passes in silence.

  nodata     a rule that selects nothing is NoData, not NoIssuesFound, and
             says what it looked for and what the trial has, in the table
             and in --json: ExplodingTensor with a tensor_regex matching no
             tensor, LossNotDecreasing with collection_names: lossez
             (did you mean 'losses'?), DeadRelu whose default regex does not
             match nn.Sequential names, a Lua rule (the host does it for any
             kind of rule); exit 0, and 6 with --strict
  notdue     LossNotDecreasing's steps off its num_steps boundary are not
             counted as SKIPPED (missing data) but as not_due_steps
  damaged    a damaged index file met during run is printed once, listed in
             --json read_problems with the step it cost; --strict exits 6
  first      report.json keeps the first trigger's details (a run that
             explodes at step 8 and is all NaN by 23: first_trigger is 8,
             last_trigger 23), SageMaker's keys unchanged
  readonly   inspect and tensor (table and --json) write nothing into the
             trial: its tree is unchanged, no .smrules/ made
  keep       run --fresh beside a stored report keeps report.json and
             result.json as they were and writes report.fresh.json, saying
             so; a second --fresh run replaces its own scratch copy
  nogpu      ProfilerReport of a recording without GPU readings says so in
             the GPU, CPU/I/O-bottleneck and GPU-memory sections instead of
             pie charts of 100 % "GPU usage above threshold"; a finished
             job's wording has no "so far"/"yet"; axis ticks are round
"""

import html
import math
import os
import re
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

TRIAL = os.path.join(lib.FIXTURES, "trials", "exploding_mse_high_lr")
HEALTHY = os.path.join(lib.FIXTURES, "trials", "healthy_mlp_digits")


def write(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def by_name(r):
    return {x.get("name"): x for x in ((r.obj or {}).get("rules") or [])}


SILENT = """rules:
  - rule: ExplodingTensor
    parameters:
      tensor_regex: "nomatch.*"
  - rule: LossNotDecreasing
    parameters:
      collection_names: lossez
      use_losses_collection: false
  - rule: DeadRelu
  - lua: pick.lua
    name: lua_pick
    parameters:
      collection_names: gradiens
"""

LUA = """-- @param collection_names list
function invoke_at_step(step)
  return smrules.SKIPPED
end
"""


def test_nodata(c, tmp):
    write(tmp, "pick.lua", LUA)
    rules = write(tmp, "silent.yaml", SILENT)
    out = os.path.join(tmp, "out-nodata")
    base = ["run", "--trial", TRIAL, "--rules", rules, "--fresh", "--output", out]
    r = lib.run_json(base + ["--json"])
    sc = c.scope("silent pass --json", r)
    if not sc.process():
        return
    sc.eq("exit 0 without --strict", r.rc, 0)
    got = by_name(r)
    want = {
        "ExplodingTensor": ("tensor_regex", "regex", "nomatch.*", None),
        "LossNotDecreasing": ("collection_names", "collection", "lossez", "losses"),
        "DeadRelu": ("tensor_regex", "regex", ".*relu_output", None),
        "lua_pick": ("collection_names", "collection", "gradiens", "gradients"),
    }
    for name, (param, kind, value, near) in want.items():
        res = got.get(name, {})
        sc.eq("%s: status" % name, res.get("status"), "NoData")
        sc.eq("%s: evaluated" % name, res.get("evaluated_steps"), 0)
        nd = res.get("no_data") or {}
        looked = [x for x in nd.get("looked_for") or [] if x.get("parameter") == param]
        if sc.ok(len(looked) == 1, "%s: looked_for names %s" % (name, param), lib.short(nd)):
            sc.eq("%s: kind" % name, looked[0].get("kind"), kind)
            sc.eq("%s: value" % name, looked[0].get("value"), value)
            sc.eq("%s: matches" % name, looked[0].get("matches"), 0)
            sc.eq("%s: did you mean" % name, looked[0].get("did_you_mean"), near)
        has = nd.get("trial_has") or {}
        sc.eq("%s: the trial's tensors" % name, has.get("tensors"), 13)
        sc.ok("losses" in (has.get("collections") or []), "%s: the trial's collections" % name,
              lib.short(has))
    r = lib.run_json(base)
    sc = c.scope("silent pass table", r)
    sc.process(want_json=False)
    sc.eq("exit 0", r.rc, 0)
    rows = [ln for ln in r.out.splitlines() if ln.split()[:1] in (["ExplodingTensor"],
            ["LossNotDecreasing"], ["DeadRelu"], ["lua_pick"])]
    sc.ok(len(rows) == 4 and all(" NoData " in ln for ln in rows), "NoData in the table",
          r.out)
    sc.ok("tensor_regex: 'nomatch.*' matches none of the trial's 13 tensors" in r.out,
          "the regex that matched nothing is named", r.out)
    sc.ok("no collection 'lossez' in the trial; did you mean 'losses'?" in r.out,
          "did you mean for a collection", r.out)
    sc.ok("'.*relu_output' matches none" in r.out, "DeadRelu's default regex is named", r.out)
    sc.ok("did you mean 'gradients'?" in r.out, "a Lua rule gets it too", r.out)
    sc.ok("the trial has 13 steps and 13 tensors" in r.out, "what the trial has", r.out)
    r = lib.run_json(base + ["--strict"])
    sc = c.scope("--strict", r)
    sc.process(want_json=False)
    sc.eq("exit 6", r.rc, 6)
    sc.ok("--strict" in r.err and "NoData" in r.err, "says why", r.err)
    # a rule that evaluates is not NoData, and --strict passes a clean run
    ok_rules = write(tmp, "ok.yaml", "rules:\n  - rule: ExplodingTensor\n")
    r = lib.run_json(["run", "--trial", HEALTHY, "--rules", ok_rules, "--fresh", "--strict",
                      "--json", "--output", os.path.join(tmp, "out-ok")])
    sc = c.scope("--strict on a clean run", r)
    if sc.process():
        sc.eq("exit 0", r.rc, 0)
        sc.eq("status", by_name(r).get("ExplodingTensor", {}).get("status"), "NoIssuesFound")
        sc.eq("no_data", by_name(r).get("ExplodingTensor", {}).get("no_data"), None)
        sc.eq("read_problems", r.obj.get("read_problems"), [])


def test_notdue(c, tmp):
    rules = write(tmp, "lnd.yaml", "rules:\n  - rule: LossNotDecreasing\n"
                  "    parameters: {num_steps: 2, mode: TRAIN}\n")
    r = lib.run_json(["run", "--trial", HEALTHY, "--rules", rules, "--fresh", "--json",
                      "--output", os.path.join(tmp, "out-lnd")])
    sc = c.scope("LossNotDecreasing not due", r)
    if not sc.process():
        return
    res = by_name(r).get("LossNotDecreasing", {})
    ev, skipped, nd = res.get("evaluated_steps"), res.get("skipped_steps"), res.get("not_due_steps")
    sc.ok(isinstance(ev, int) and ev > 0, "evaluated some steps", lib.short(res))
    sc.eq("no step skipped for want of data", skipped, [])
    sc.ok(isinstance(nd, int) and nd > 0, "steps off the boundary counted apart",
          lib.short(res))
    sc.eq("every step counted once", ev + len(skipped or []) + (nd or 0), 16)


def test_damaged(c, tmp):
    trial = os.path.join(tmp, "damaged")
    shutil.copytree(TRIAL, trial)
    bad = os.path.join(trial, "index", "000000000", "000000000008_worker_0.json")
    with open(bad, "w") as f:
        f.write('{"meta": broken')
    rules = write(tmp, "et.yaml", "rules:\n  - rule: ExplodingTensor\n  - rule: AllZero\n")
    base = ["run", "--trial", trial, "--rules", rules, "--fresh",
            "--output", os.path.join(tmp, "out-dmg")]
    r = lib.run_json(base + ["--json"])
    sc = c.scope("damaged index --json", r)
    if sc.process():
        probs = r.obj.get("read_problems") or []
        if sc.ok(len(probs) == 1, "one read problem", lib.short(probs)):
            sc.eq("file", probs[0].get("file"), "index/000000000/000000000008_worker_0.json")
            sc.eq("steps lost", probs[0].get("steps_lost"), [8])
            sc.ok("JSON" in (probs[0].get("message") or ""), "message", lib.short(probs[0]))
        sc.eq("ExplodingTensor evaluated the rest", by_name(r).get("ExplodingTensor", {})
              .get("evaluated_steps"), 12)
    r = lib.run_json(base)
    sc = c.scope("damaged index table", r)
    sc.process(want_json=False)
    lines = [ln for ln in r.err.splitlines() if "000000000008_worker_0.json" in ln]
    sc.ok(len(lines) == 1, "printed once for two rules", r.err)
    sc.ok(lines and "step 8 not evaluated" in lines[0], "names the step it cost", r.err)
    r = lib.run_json(base + ["--strict"])
    sc = c.scope("damaged index --strict", r)
    sc.process(want_json=False)
    sc.eq("exit", r.rc, 1)  # ExplodingTensor fired: issues found comes first
    rules = write(tmp, "az.yaml", "rules:\n  - rule: AllZero\n")
    r = lib.run_json(["run", "--trial", trial, "--rules", rules, "--fresh", "--strict",
                      "--output", os.path.join(tmp, "out-dmg2")])
    sc = c.scope("damaged index --strict, no issue", r)
    sc.process(want_json=False)
    sc.eq("exit 6", r.rc, 6)
    sc.ok("could not be read" in r.err, "says why", r.err)


def test_first(c, tmp):
    out = os.path.join(tmp, "out-first")
    rules = write(tmp, "first.yaml", "rules:\n  - rule: ExplodingTensor\n")
    r = lib.run_json(["run", "--trial", TRIAL, "--rules", rules, "--fresh", "--output", out])
    sc = c.scope("first trigger", r)
    sc.process(want_json=False)
    sc.eq("exit 1", r.rc, 1)
    try:
        rep = lib.load_json(os.path.join(out, "ExplodingTensor", "report.json"))
    except (OSError, ValueError) as e:
        sc.ok(False, "report.json", str(e))
        return
    det = rep.get("Details") or {}
    sc.eq("first_trigger.step", (det.get("first_trigger") or {}).get("step"), 8)
    sc.eq("last_trigger.step", (det.get("last_trigger") or {}).get("step"), 23)
    v = (det.get("first_trigger") or {}).get("violations") or []
    sc.ok(v and all("tensor" in x for x in v), "first_trigger names its tensors", lib.short(v))
    sc.eq("SageMaker's keys", sorted(rep), ["Datapoints", "Details", "RuleParameters",
                                           "RuleTriggered", "Violations"])
    sc.eq("triggered_steps starts at 8", (det.get("triggered_steps") or [None])[0], 8)
    # a run continued from stored state keeps the first trigger of the run before
    state = os.path.join(tmp, "first-state.db")
    out2 = os.path.join(tmp, "out-first2")
    for extra in (["--end-step", "9"], []):
        r = lib.run_json(["run", "--trial", TRIAL, "--rules", rules, "--state", state,
                          "--output", out2] + extra)
        sc = c.scope("first trigger, resumed %s" % (extra or "to the end"), r)
        sc.process(want_json=False)
        try:
            det = lib.load_json(os.path.join(out2, "ExplodingTensor", "report.json"))["Details"]
        except (OSError, ValueError, KeyError) as e:
            sc.ok(False, "report.json", str(e))
            continue
        sc.eq("first_trigger.step", (det.get("first_trigger") or {}).get("step"), 8)
        sc.eq("last_trigger.step", (det.get("last_trigger") or {}).get("step"), 23 if not extra else 8)


def test_readonly(c, tmp):
    trial = os.path.join(tmp, "readonly")
    shutil.copytree(TRIAL, trial)
    before = lib.tree_snapshot(trial)
    for args in (["inspect", "--trial", trial], ["inspect", "--trial", trial, "--json"],
                 ["tensor", "--trial", trial, "--name", "MSELoss_output_0", "--step", "8"],
                 ["tensor", "--trial", trial, "--name", "MSELoss_output_0", "--step", "8",
                  "--json"]):
        r = lib.run_json(args)
        sc = c.scope("read-only %s" % " ".join(args[:1] + args[3:]), r)
        sc.process(want_json="--json" in args)
        sc.eq("exit 0", r.rc, 0)
    lib.check_untouched(c, trial, before)
    c.ok(not os.path.exists(os.path.join(trial, ".smrules")), "read-only: no .smrules in the trial")


def test_keep(c, tmp):
    trial = os.path.join(tmp, "keep")
    shutil.copytree(TRIAL, trial)
    rules = write(tmp, "keep.yaml", "rules:\n  - rule: ExplodingTensor\n")
    out = os.path.join(trial, "rule-output", "ExplodingTensor")
    r = lib.run_json(["run", "--trial", trial, "--rules", rules])
    sc = c.scope("keep: stored run", r)
    sc.process(want_json=False)
    with open(os.path.join(out, "report.json"), "rb") as f:
        stored = f.read()
    with open(os.path.join(out, "result.json"), "rb") as f:
        stored_res = f.read()
    for i in (1, 2):
        r = lib.run_json(["run", "--trial", trial, "--rules", rules, "--fresh", "--end-step", "9"])
        sc = c.scope("keep: --fresh --end-step 9 #%d" % i, r)
        sc.process(want_json=False)
        with open(os.path.join(out, "report.json"), "rb") as f:
            sc.ok(f.read() == stored, "report.json kept")
        with open(os.path.join(out, "result.json"), "rb") as f:
            sc.ok(f.read() == stored_res, "result.json kept")
        sc.ok("kept the stored" in r.err and "report.fresh.json" in r.err, "says so", r.err)
        try:
            fresh = lib.load_json(os.path.join(out, "report.fresh.json"))
        except (OSError, ValueError) as e:
            sc.ok(False, "report.fresh.json", str(e))
            continue
        sc.eq("the fresh report is the fresh run's", fresh.get("Details", {}).get(
            "triggered_steps"), [8])


def report_text(path):
    t = open(path, encoding="utf-8").read()
    t = re.sub(r"<svg.*?</svg>", " ", t, flags=re.S)
    t = re.sub(r"<style.*?</style>", " ", t, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", t)))


def round_ticks(sc, doc):
    """Every axis of every chart: numeric tick labels a round step apart."""
    for svg in re.findall(r"<svg.*?</svg>", doc, flags=re.S):
        for anchor in ("end", "middle"):
            vals = sorted({float(x) for x in re.findall(
                r'text-anchor="%s" class="cl">(-?[\d.]+(?:e[-+]\d+)?)</text>' % anchor, svg)})
            if len(vals) < 2:
                continue
            steps = {round(b - a, 9) for a, b in zip(vals, vals[1:])}
            step = min(steps)
            m = step / 10 ** math.floor(math.log10(step))
            sc.ok(len(steps) == 1 and any(abs(m - k) < 1e-6 for k in (1, 2, 2.5, 5)),
                  "round ticks", "%s" % vals)


def test_nogpu(c, tmp):
    rec = os.path.join(tmp, "nogpu")
    shutil.copytree(os.path.join(lib.FIXTURES, "profiler", "cpu_bottleneck"), rec)
    for dirpath, _, files in os.walk(os.path.join(rec, "profiler-output", "system")):
        for n in files:
            if n.endswith(".json"):
                p = os.path.join(dirpath, n)
                with open(p) as f:
                    kept = [ln for ln in f if '"Type":"gpu"' not in ln]
                with open(p, "w") as f:
                    f.writelines(kept)
    rules = write(tmp, "pr.yaml", "rules:\n  - rule: ProfilerReport\n")
    out = os.path.join(tmp, "out-pr")
    r = lib.run_json(["run", "--trial", rec, "--rules", rules, "--fresh", "--output", out])
    sc = c.scope("ProfilerReport without GPUs", r)
    sc.process(want_json=False)
    path = os.path.join(out, "ProfilerReport", "profiler-output", "profiler-report.html")
    try:
        doc = open(path, encoding="utf-8").read()
    except OSError as e:
        sc.ok(False, "report written", str(e))
        return
    text = report_text(path)
    sc.ok("no GPU metrics" in text, "the node has no GPU metrics", text[:300])
    sc.ok("GPU usage above threshold" not in doc, "no pie of GPU usage")
    sc.ok("had a GPU below the threshold" not in text, "no GPU count of zero")
    for rule in ("CPUBottleneck", "IOBottleneck"):
        sc.ok("No GPU utilization readings in this recording: %s" % rule in text,
              "%s section says why" % rule)
    sc.ok("No GPU readings in this recording." in text, "GPU memory section says so")
    sc.ok("it needs GPU and GPU memory readings" in text, "BatchSize says so")
    sc.ok("(the whole job)" in text, "the job is finished")
    sc.ok("so far" not in text, "no 'so far' for a finished job")
    sc.ok("steps yet" not in text, "no 'yet' for a finished job")
    sc.ok("No rule triggered." in text, "no rule triggered")
    round_ticks(sc, doc)
    # with GPUs the same sections chart as before
    out = os.path.join(tmp, "out-pr-gpu")
    r = lib.run_json(["run", "--trial", os.path.join(lib.FIXTURES, "profiler", "cpu_bottleneck"),
                      "--rules", rules, "--fresh", "--output", out])
    sc = c.scope("ProfilerReport with GPUs", r)
    sc.process(want_json=False)
    path = os.path.join(out, "ProfilerReport", "profiler-output", "profiler-report.html")
    doc = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
    sc.ok("GPU usage above threshold" in doc, "bottleneck pies drawn")
    round_ticks(sc, doc)


def test_html_paths(c, tmp):
    """Every HTML report a run writes is named with its path, as
    ProfilerReport's is: CreateXgboostReport's too."""
    sc = c.scope("the XGBoost report's path")
    trial = os.path.join(lib.FIXTURES, "trials", "xgboost_balanced_features")
    out = os.path.join(tmp, "xgb-out")
    rules = write(tmp, "xgb.yaml", "rules:\n  - rule: CreateXgboostReport\n")
    rc, stdout, err = lib.run(["run", "--trial", trial, "--rules", rules, "--fresh",
                               "--output", out])
    html = os.path.join(out, "CreateXgboostReport", "xgboost_report.html")
    sc.ok(os.path.isfile(html), "the report is written", err[-300:])
    sc.ok("CreateXgboostReport: HTML report written to %s" % html in stdout,
          "and its path printed", stdout[-300:])


def main():
    c = lib.Checker("test_honest")
    before = lib.tree_snapshot(TRIAL)
    with tempfile.TemporaryDirectory(prefix="smrules-honest-") as tmp:
        test_nodata(c, tmp)
        test_notdue(c, tmp)
        test_damaged(c, tmp)
        test_first(c, tmp)
        test_readonly(c, tmp)
        test_keep(c, tmp)
        test_nogpu(c, tmp)
        test_html_paths(c, tmp)
    lib.check_untouched(c, TRIAL, before)
    c.finish()


if __name__ == "__main__":
    main()
