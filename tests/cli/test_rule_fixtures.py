#!/usr/bin/env python3
"""End-to-end: the built-in rules (`smrules run`) against the rule outcomes
the fixtures expect, plus cases of our own.

1. Every `expect` entry of tests/fixtures/synthetic/*/EXPECT.json and
   tests/fixtures/trials/*/EXPECT.json whose rule is a built-in rule
   (`rule: "probe"` entries are another test's business).  Synthetic
   entries give `result.condition_met` and `result.step` (the first
   trigger of that invocation); entries that share a `rule_instance` are
   invoked in `invocation_index` order on one persisted rule state
   (--state), as smdebug invokes one rule object again.  Trial entries give
   `status` and `first_trigger_step` (checked when not null).  A rule that
   does not exist is a failed check, not a skip.
2. For the rules of the training's progress - LossNotDecreasing,
   UnchangedTensor, AllZero, TensorVariance, WeightUpdateRatio,
   SimilarAcrossRuns, Overfit, Overtraining and StalledTrainingRule (pages
   under docs/rules/, see docs/rules/README.md): a case
   where each must fire and one where it must not, with the violation
   fields the rule's page under docs/rules/ lists; the defaults shown in RuleParameters; resuming a
   stateful rule from stored state gives the same triggers as one run; and
   invalid parameters (wrong type, out of range, not allowed, unknown name,
   missing required) exit 2 naming the parameter and its line:column.
   (The rules of data, activations, outputs and XGBoost models are in
   test_rules_data_and_models.py.)
"""

import json
import os
import re
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

USAGE = 2
SYN = os.path.join(lib.FIXTURES, "synthetic")
TRIALS = os.path.join(lib.FIXTURES, "trials")


# --------------------------------------------------------------------------
# rules.yaml and running

def yaml_scalar(v):
    """JSON is YAML: strings, numbers, booleans and lists as flow values."""
    return json.dumps(v)


def rules_yaml(rule, params, name=None):
    """A one-rule rules.yaml in block layout: `parameters:` on line 3 (4 with
    a name), each parameter on its own line at column 7."""
    lines = ["rules:", "  - rule: %s" % rule]
    if name:
        lines.append("    name: %s" % name)
    if params:
        lines.append("    parameters:")
        for k, v in params.items():
            lines.append("      %s: %s" % (k, yaml_scalar(v)))
    return "\n".join(lines) + "\n"


class Workspace:
    """Temporary rules files, output directories and state files."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.n = 0

    def path(self, stem):
        self.n += 1
        return os.path.join(self.tmp, "%s-%d" % (stem, self.n))

    def rules(self, text):
        p = self.path("rules") + ".yaml"
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)
        return p

    def run_args(self, trial, rules_text, start=None, end=None, state=None):
        a = ["run", "--trial", trial, "--rules", self.rules(rules_text), "--json",
             "--output", self.path("out")]
        if start is not None:
            a += ["--start-step", str(start)]
        if end is not None:
            a += ["--end-step", str(end)]
        return a + (["--state", state] if state else ["--fresh"])


def missing_rule(r):
    return r.rc == USAGE and ("unknown rule" in r.err or "built-in rules:" in r.err)


def rule_result(sc, r):
    """The single rule result of a run, or None after a failed check."""
    if missing_rule(r):
        sc.ok(False, "rule available", "the rule is not built in (exit 2, unknown rule)")
        return None
    if not sc.process(r) or not sc.exit_code(r, [0, 1]):
        return None
    rules = r.obj.get("rules") if isinstance(r.obj, dict) else None
    if not sc.ok(isinstance(rules, list) and len(rules) == 1, "one rule result",
                 "got %s" % lib.short(rules)):
        return None
    res = rules[0]
    if res.get("status") == "NoData":
        # SageMaker says NoIssuesFound of a rule that evaluated nothing; smrules
        # says NoData (docs/rule-semantics.md#rules-that-evaluate-nothing), only
        # then, and explains it: compared with the reference as NoIssuesFound
        sc.eq("NoData: nothing evaluated", res.get("evaluated_steps"), 0)
        sc.ok(isinstance(res.get("no_data"), dict), "NoData: explained", lib.short(res))
        res = dict(res, status="NoIssuesFound")
    sc.ok(res.get("status") in ("IssuesFound", "NoIssuesFound"), "status is final",
          "got %s (message %s)" % (lib.short(res.get("status")), lib.short(res.get("message"))))
    return res


def triggers_in(res, start, end):
    """Triggered steps of this invocation's range [start, end)."""
    steps = res.get("triggered_steps") or []
    return [s for s in steps if s >= (start or 0) and (end is None or s < end)]


# --------------------------------------------------------------------------
# 1. fixture expectations

def clean_params(p):
    return {k: v for k, v in (p or {}).items() if v is not None}


def synthetic_entries(c):
    """[(label, trial, rule, params, start, end, result, instance, index)]"""
    out = []
    for case, path in c.cases("synthetic"):
        exp = lib.load_json(os.path.join(path, "EXPECT.json"))
        for i, e in enumerate(exp.get("expect") or []):
            if e.get("rule") == "probe":
                continue
            trial = lib.rel(os.path.join(path, e.get("trial_dir") or exp.get("trial_dir") or "."))
            params = clean_params(e.get("params"))
            others = e.get("other_trials") or []
            if e["rule"] == "SimilarAcrossRuns" and others and \
                    "other_trials" not in params and "other_trial" not in params:
                params["other_trials"] = lib.rel(os.path.join(path, others[0]))
            inst = e.get("rule_instance")
            label = "synthetic/%s: expect[%d] %s %s steps %s..%s" % (
                case, i, e["rule"], json.dumps(params), e.get("start_step"), e.get("end_step"))
            out.append((label, trial, e["rule"], params, e.get("start_step"), e.get("end_step"),
                        e["result"], inst and "%s/%s" % (case, inst), e.get("invocation_index", 0)))
    return out


def check_invocation(sc, r, start, end, want, first_of_chain):
    res = rule_result(sc, r)
    if res is None:
        return
    got = triggers_in(res, start, end)
    sc.eq("condition_met", bool(got), bool(want["condition_met"]))
    if want["condition_met"] and got:
        sc.eq("first trigger step", got[0], want["step"])
    if first_of_chain:
        sc.eq("status", res.get("status"),
              "IssuesFound" if want["condition_met"] else "NoIssuesFound")


def run_synthetic(c, ws):
    entries = synthetic_entries(c)
    single = [e for e in entries if not e[7]]
    chains = {}
    for e in entries:
        if e[7]:
            chains.setdefault(e[7], []).append(e)
    args = [ws.run_args(e[1], rules_yaml(e[2], e[3]), e[4], e[5]) for e in single]
    for e, r in zip(single, lib.run_all(args)):
        check_invocation(c.scope(e[0], r), r, e[4], e[5], e[6], True)
    for inst, chain in sorted(chains.items()):
        state = ws.path("state") + ".db"
        for e in sorted(chain, key=lambda x: x[8]):
            r = lib.run_json(ws.run_args(e[1], rules_yaml(e[2], e[3]), e[4], e[5], state=state))
            check_invocation(c.scope("%s (instance %s #%d)" % (e[0], inst, e[8]), r), r,
                             e[4], e[5], e[6], e[8] == 0)
    return len(entries)


def trial_entries(c):
    out = []
    for case, path in c.cases("trials"):
        exp = lib.load_json(os.path.join(path, "EXPECT.json"))
        for i, e in enumerate(exp.get("expect") or []):
            if e.get("rule") == "probe":
                continue
            params = clean_params(e.get("parameters"))
            label = "trials/%s: expect[%d] %s %s" % (case, i, e["rule"], json.dumps(params))
            out.append((label, lib.rel(path), e))
    return out


def run_trials(c, ws):
    entries = trial_entries(c)
    args = [ws.run_args(t, rules_yaml(e["rule"], clean_params(e.get("parameters"))))
            for _, t, e in entries]
    for (label, _, e), r in zip(entries, lib.run_all(args)):
        sc = c.scope(label, r)
        res = rule_result(sc, r)
        if res is None:
            continue
        sc.eq("status", res.get("status"), e["status"])
        if e.get("first_trigger_step") is not None:
            sc.eq("first_trigger_step", res.get("first_trigger_step"), e["first_trigger_step"])
    return len(entries)


# --------------------------------------------------------------------------
# 2. the training-progress rules: fire / no fire, defaults, resuming,
#    invalid parameters

def syn(case, sub="."):
    return lib.rel(os.path.join(SYN, case, sub))


def real(case):
    return lib.rel(os.path.join(TRIALS, case))


SIMILAR = "invoker_exploding_vanishing_similar"

# Fields docs/rules/README.md lists for each violation (plus "tensor" where named).
FIELDS = {
    "LossNotDecreasing": ["tensor", "step", "reference_step", "loss", "reference_loss",
                          "change_percent", "diverging"],
    "UnchangedTensor": ["tensor", "steps"],
    "AllZero": ["tensor", "zero_percent"],
    "TensorVariance": ["tensor", "variance"],
    "WeightUpdateRatio": ["tensor", "ratio", "previous_step"],
    "SimilarAcrossRuns": ["tensor", "max_abs_diff"],
    "Overfit": ["tensor", "mean_val", "mean_train", "ratio"],
    "Overtraining": ["tensor", "series", "best", "wait"],
    "StalledTrainingRule": ["seconds_since_activity", "last_activity"],
}

# (label, trial, rule, params, first trigger step (None: must not fire;
#  "any": must fire, step not pinned), extra check on the last violation)
PROGRESS_CASES = [
    ("LND flat loss (GLOBAL)", real("stalled_lr_zero"), "LossNotDecreasing",
     {"mode": "GLOBAL"}, 12,
     lambda v: v["step"] - v["reference_step"] >= 10 and v["change_percent"] == 0
     and v["diverging"] is False),
    ("LND rising loss marked diverging", syn("rule_loss_not_decreasing_min_diff"),
     "LossNotDecreasing", {"diff_percent": 20}, 12,
     lambda v: v["step"] == 24 and v["reference_step"] == 12 and v["diverging"] is True
     and lib.close(v["change_percent"], 40.0)),
    ("LND decreasing TRAIN loss", real("healthy_mlp_digits"), "LossNotDecreasing",
     {"mode": "TRAIN"}, None, None),
    ("LND num_steps beyond the run", syn("rule_loss_not_decreasing_default"),
     "LossNotDecreasing", {"num_steps": 100}, None, None),
    ("UnchangedTensor frozen weights", real("stalled_lr_zero"), "UnchangedTensor",
     {"collection_names": "weights"}, 6, lambda v: v["steps"] == [21, 24, 27]),
    ("UnchangedTensor training weights", real("healthy_mlp_digits"), "UnchangedTensor",
     {"collection_names": "weights"}, None, None),
    ("UnchangedTensor num_steps 4", syn("rule_unchanged_tensor"), "UnchangedTensor",
     {"tensor_regex": ".*", "num_steps": 4}, None, None),
    ("AllZero 80% threshold", real("dead_relu_negative_bias"), "AllZero",
     {"collection_names": "relu_activations", "threshold": 80}, 0,
     lambda v: 80 <= v["zero_percent"] < 100),
    ("AllZero default threshold", real("dead_relu_negative_bias"), "AllZero",
     {"collection_names": "relu_activations"}, None, None),
    ("TensorVariance above max", real("healthy_mlp_digits"), "TensorVariance",
     {"collection_names": "weights", "max_threshold": 1e-6}, 0, lambda v: v["variance"] > 1e-6),
    ("TensorVariance below min", real("stalled_lr_zero"), "TensorVariance",
     {"collection_names": "losses", "min_threshold": 1e-12}, 0, lambda v: v["variance"] == 0),
    ("TensorVariance inside bounds", real("healthy_mlp_digits"), "TensorVariance",
     {"collection_names": "weights", "max_threshold": 1e6, "min_threshold": 0}, None, None),
    ("WeightUpdateRatio zero updates", real("stalled_lr_zero"), "WeightUpdateRatio", {}, 3,
     lambda v: v["ratio"] == 0),
    ("WeightUpdateRatio huge updates", real("exploding_mse_high_lr"), "WeightUpdateRatio", {},
     "any", lambda v: v["ratio"] > 10),
    ("WeightUpdateRatio healthy", real("healthy_mlp_digits"), "WeightUpdateRatio", {}, None, None),
    ("SimilarAcrossRuns identical runs", syn(SIMILAR, "base"), "SimilarAcrossRuns",
     {"other_trials": syn(SIMILAR, "other")}, None, None),
    ("SimilarAcrossRuns other_trial/include_regex aliases, shapes differ", syn(SIMILAR, "base"),
     "SimilarAcrossRuns", {"other_trial": syn("rule_unchanged_tensor"), "include_regex": "foo_1"},
     0, lambda v: v["tensor"] == "foo_1"),
    ("SimilarAcrossRuns values differ", syn("rule_check_input_images_normalized"),
     "SimilarAcrossRuns", {"other_trials": syn("rule_check_input_images_unnormalized")}, 0,
     lambda v: v["max_abs_diff"] > 1),
    ("Overfit tiny subset", real("overfit_tiny_subset"), "Overfit", {}, "any",
     lambda v: v["ratio"] > 0.1 and v["mean_val"] > v["mean_train"]),
    ("Overfit high ratio_threshold", real("overfit_tiny_subset"), "Overfit",
     {"ratio_threshold": 1e9}, None, None),
    ("Overfit without EVAL losses", real("stalled_lr_zero"), "Overfit", {}, None, None),
    ("Overtraining validation loss stalls", real("overfit_tiny_subset"), "Overtraining",
     {"patience_train": 1000}, "any",
     lambda v: v["series"] == "EVAL" and v["wait"] >= 10 and lib.close(v["best"], 1.0425689220428467)),
    ("Overtraining training loss flat", real("stalled_lr_zero"), "Overtraining", {}, 15,
     lambda v: v["series"] == "TRAIN" and v["wait"] >= 5),
    ("Overtraining long patience", real("overfit_tiny_subset"), "Overtraining",
     {"patience_train": 1000, "patience_validation": 1000}, None, None),
    ("StalledTraining 4 s gap over threshold 3", syn("invoker_step_gaps_end"),
     "StalledTrainingRule", {"threshold": 3}, 7,
     lambda v: lib.close(v["seconds_since_activity"], 4.0, rel_tol=1e-3)),
    ("StalledTraining default threshold", syn("invoker_step_gaps_end"), "StalledTrainingRule",
     {}, None, None),
]


def check_case(sc, r, rule, want, extra):
    res = rule_result(sc, r)
    if res is None:
        return
    if want is None:
        sc.eq("status", res.get("status"), "NoIssuesFound")
        return
    sc.eq("status", res.get("status"), "IssuesFound")
    if want != "any":
        sc.eq("first_trigger_step", res.get("first_trigger_step"), want)
    viol = lib.dig(res, "report.Details.last_trigger.violations")
    if not sc.ok(isinstance(viol, list) and viol, "report lists the violations",
                 "Details.last_trigger: %s" % lib.short(lib.dig(res, "report.Details"))):
        return
    for f in FIELDS[rule]:
        sc.ok(all(isinstance(v, dict) and f in v for v in viol), "violation field %s" % f,
              "got %s" % lib.short(viol[0]))
    if extra:
        try:
            good = extra(viol[-1])
        except (KeyError, TypeError) as e:
            good = False
            sc.ok(False, "violation detail", "%s: %s" % (type(e).__name__, e))
        sc.ok(good, "violation detail", "got %s" % lib.short(viol[-1]))


def run_progress_cases(c, ws):
    args = [ws.run_args(t, rules_yaml(rule, p)) for _, t, rule, p, _, _ in PROGRESS_CASES]
    for (label, _, rule, _, want, extra), r in zip(PROGRESS_CASES, lib.run_all(args)):
        check_case(c.scope("%s: %s" % (rule, label), r), r, rule, want, extra)


# Declared defaults in docs/rules/README.md order, as RuleParameters shows them.
DEFAULTS = [
    ("LossNotDecreasing", {}, "collection_names:None\ntensor_regex:None\nuse_losses_collection:True\n"
     "num_steps:10\ndiff_percent:0.1\nincrease_threshold_percent:5\nmode:None"),
    ("UnchangedTensor", {}, "collection_names:None\ntensor_regex:None\nnum_steps:3\nrtol:1e-05\n"
     "atol:1e-08\nequal_nan:False"),
    ("AllZero", {}, "collection_names:None\ntensor_regex:None\nthreshold:100"),
    ("TensorVariance", {}, "collection_names:None\ntensor_regex:None\nmax_threshold:None\n"
     "min_threshold:None"),
    ("WeightUpdateRatio", {}, "num_steps:None\nlarge_threshold:10.0\nsmall_threshold:0.00000001\n"
     "epsilon:0.000000001"),
    ("SimilarAcrossRuns", {"other_trials": syn(SIMILAR, "other")},
     "other_trials:%s\ncollection_names:None\ntensor_regex:None" % syn(SIMILAR, "other")),
    ("Overfit", {}, "tensor_regex:None\nstart_step:0\npatience:1\nratio_threshold:0.1"),
    ("Overtraining", {}, "patience_train:5\npatience_validation:10\ndelta:0.01"),
    ("StalledTrainingRule", {}, "threshold:1800\nstop_training_on_fire:False\n"
     "training_job_name_prefix:None"),
]


def run_defaults(c, ws):
    trial = syn(SIMILAR, "base")
    args = [ws.run_args(trial, rules_yaml(rule, p)) for rule, p, _ in DEFAULTS]
    for (rule, _, want), r in zip(DEFAULTS, lib.run_all(args)):
        sc = c.scope("%s: defaults" % rule, r)
        res = rule_result(sc, r)
        if res is not None:
            sc.eq("report.RuleParameters", lib.dig(res, "report.RuleParameters"), want)


# Stateful rules: a run up to `split`, then a run continuing from the stored
# state, give the triggers of one run over everything.
RESUME = [
    ("LossNotDecreasing", real("overfit_tiny_subset"), {"mode": "EVAL"}, 100),
    ("LossNotDecreasing", real("stalled_lr_zero"), {}, 13),
    ("Overfit", real("overfit_tiny_subset"), {"patience": 3}, 62),
    ("Overtraining", real("overfit_tiny_subset"), {}, 95),
    ("StalledTrainingRule", syn("invoker_step_gaps_end"), {"threshold": 3}, 4),
]


def run_resume(c, ws):
    whole = lib.run_all([ws.run_args(t, rules_yaml(rule, p)) for rule, t, p, _ in RESUME])
    for (rule, trial, p, split), full in zip(RESUME, whole):
        label = "%s: resume at %d on %s" % (rule, split, trial)
        ref = rule_result(c.scope(label + " (one run)", full), full)
        state = ws.path("state") + ".db"
        text = rules_yaml(rule, p)
        first = lib.run_json(ws.run_args(trial, text, end=split, state=state))
        if rule_result(c.scope(label + " (first part)", first), first) is None or ref is None:
            continue
        second = lib.run_json(ws.run_args(trial, text, state=state))
        sc = c.scope(label + " (continued)", second)
        res = rule_result(sc, second)
        if res is None:
            continue
        sc.eq("triggered_steps", res.get("triggered_steps"), ref.get("triggered_steps"))
        sc.eq("evaluated_steps", res.get("evaluated_steps"), ref.get("evaluated_steps"))
        sc.eq("report.Violations", lib.dig(res, "report.Violations"),
              lib.dig(ref, "report.Violations"))


# --------------------------------------------------------------------------
# invalid parameters

# (rule, params, the offending parameter, kind) - kind "value": the error
# points at the value, "key": at the key, "rule": at the rule (missing).
INVALID = [
    ("LossNotDecreasing", {"num_steps": "ten"}, "num_steps", "value"),
    ("LossNotDecreasing", {"diff_percent": 100}, "diff_percent", "value"),
    ("LossNotDecreasing", {"increase_threshold_percent": -1}, "increase_threshold_percent", "value"),
    ("LossNotDecreasing", {"mode": "VALIDATION"}, "mode", "value"),
    ("LossNotDecreasing", {"use_losses_collection": "yes"}, "use_losses_collection", "value"),
    ("LossNotDecreasing", {"patience": 3}, "patience", "key"),
    ("UnchangedTensor", {"num_steps": 1}, "num_steps", "value"),
    ("UnchangedTensor", {"rtol": -0.1}, "rtol", "value"),
    ("UnchangedTensor", {"equal_nan": "maybe"}, "equal_nan", "value"),
    ("UnchangedTensor", {"steps": 3}, "steps", "key"),
    ("AllZero", {"threshold": 101}, "threshold", "value"),
    ("AllZero", {"threshold": "all"}, "threshold", "value"),
    ("AllZero", {"tensor_regex": "(unclosed"}, "tensor_regex", "value"),
    ("AllZero", {"percent": 50}, "percent", "key"),
    ("TensorVariance", {"max_threshold": "high"}, "max_threshold", "value"),
    ("TensorVariance", {"min_threshold": [1, 2]}, "min_threshold", "value"),
    ("TensorVariance", {"threshold": 1}, "threshold", "key"),
    ("WeightUpdateRatio", {"num_steps": 0}, "num_steps", "value"),
    ("WeightUpdateRatio", {"num_steps": 2.5}, "num_steps", "value"),
    ("WeightUpdateRatio", {"large_threshold": "big"}, "large_threshold", "value"),
    ("WeightUpdateRatio", {"ratio": 1}, "ratio", "key"),
    ("SimilarAcrossRuns", {}, "other_trials", "rule"),
    ("SimilarAcrossRuns", {"other_trials": ["a", "b"]}, "other_trials", "value"),
    ("SimilarAcrossRuns", {"other_trials": syn(SIMILAR, "other"), "tolerance": 1}, "tolerance",
     "key"),
    ("Overfit", {"patience": 0}, "patience", "value"),
    ("Overfit", {"start_step": -5}, "start_step", "value"),
    ("Overfit", {"ratio_threshold": "tenth"}, "ratio_threshold", "value"),
    ("Overfit", {"collection_names": "losses"}, "collection_names", "key"),
    ("Overtraining", {"patience_train": 2.5}, "patience_train", "value"),
    ("Overtraining", {"delta": -0.01}, "delta", "value"),
    ("Overtraining", {"patience": 5}, "patience", "key"),
    ("StalledTrainingRule", {"threshold": "an hour"}, "threshold", "value"),
    ("StalledTrainingRule", {"threshold": -1}, "threshold", "value"),
    ("StalledTrainingRule", {"stop_training_on_fire": "yes"}, "stop_training_on_fire", "value"),
    ("StalledTrainingRule", {"timeout": 60}, "timeout", "key"),
]


def where(params, bad, kind):
    """line, column (1-based) of what the error must point at in the
    rules_yaml() layout."""
    if kind == "rule":
        return 2, 5
    line = 4 + list(params).index(bad)
    return line, 7 if kind == "key" else 7 + len(bad) + 2


def run_invalid(c, ws):
    trial = syn(SIMILAR, "base")
    args = [ws.run_args(trial, rules_yaml(rule, p)) for rule, p, _, _ in INVALID]
    for (rule, p, bad, kind), r in zip(INVALID, lib.run_all(args)):
        sc = c.scope("%s: invalid %s" % (rule, json.dumps(p)), r)
        if not sc.process(r, want_json=False):
            continue
        if missing_rule(r):
            sc.ok(False, "rule available", "the rule is not built in (exit 2, unknown rule)")
            continue
        sc.exit_code(r, [USAGE])
        sc.ok("'%s'" % bad in r.err, "message names the parameter", "stderr: %s" % lib.short(r.err))
        line, col = where(p, bad, kind)
        sc.ok(re.search(r"line %d, column %d\b" % (line, col), r.err) is not None,
              "message gives line %d, column %d" % (line, col), "stderr: %s" % lib.short(r.err))
    # an other trial that cannot be read is a configuration error too
    r = lib.run_json(ws.run_args(trial, rules_yaml("SimilarAcrossRuns",
                                                   {"other_trials": ws.path("missing-trial")})))
    sc = c.scope("SimilarAcrossRuns: other trial missing", r)
    if sc.process(r, want_json=False):
        sc.exit_code(r, [USAGE])
        sc.ok("missing-trial" in r.err, "message names the trial", "stderr: %s" % lib.short(r.err))


def main():
    c = lib.Checker("test_rule_fixtures")
    before = {d: lib.tree_snapshot(d) for d in (SYN, TRIALS)}
    with tempfile.TemporaryDirectory(prefix="smrules-rules-") as tmp:
        ws = Workspace(tmp)
        n = run_synthetic(c, ws) + run_trials(c, ws)
        c.at_least(1, n, "fixture rule expectations")
        if not lib.CASE_FILTER:
            run_progress_cases(c, ws)
            run_defaults(c, ws)
            run_resume(c, ws)
            run_invalid(c, ws)
    for d, snap in before.items():
        lib.check_untouched(c, d, snap)
    c.finish()


if __name__ == "__main__":
    main()
