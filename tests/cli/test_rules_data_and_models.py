#!/usr/bin/env python3
"""End-to-end: the built-in rules that judge a model's data and parts -
inputs (CheckInputImages, NLPSequenceRatio, ClassImbalance), activations
and initial weights (DeadRelu, SaturatedActivation, PoorWeightInitialization),
outputs (Confusion) and XGBoost models (TreeDepth,
FeatureImportanceOverweight, CreateXgboostReport); their pages are under
docs/rules/ (see docs/rules/README.md) - through `smrules run --json`.
(The rules of the training's progress - losses, weights, stalls - are in
test_rule_fixtures.py, part 2.)

The EXPECT.json `expect` entries of the fixtures are run generically by
test_rule_fixtures.py; this file adds, per rule, cases where it must fire
and where it must not, the reported violation fields and their values,
resumption from stored state, parameter validation (exit 2 with the line
and column of the offending parameter) and the HTML report.

Nothing is written into the fixtures: every run uses --output in a
temporary directory and --fresh, or --state with a temporary file."""

import json
import math
import os
import re
import shutil
import struct
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

SYN = os.path.join(lib.FIXTURES, "synthetic")
TRIALS = os.path.join(lib.FIXTURES, "trials")
RULES = ("CheckInputImages", "DeadRelu", "Confusion", "TreeDepth", "ClassImbalance",
         "PoorWeightInitialization", "SaturatedActivation", "NLPSequenceRatio",
         "FeatureImportanceOverweight", "CreateXgboostReport")
EXIT_USAGE = 2

C = lib.Checker("test_rules_data_and_models")
TMP = tempfile.mkdtemp(prefix="smrules-data-models-")


def syn(name):
    return os.path.join(SYN, name)


def trial(name):
    return os.path.join(TRIALS, name)


# --------------------------------------------------------------------------
# Writing rules.yaml and running

_files = [0]


def rules_file(text):
    _files[0] += 1
    path = os.path.join(TMP, "rules%d.yaml" % _files[0])
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def yaml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(yaml_value(x) for x in v) + "]"
    return '"%s"' % str(v).replace("\\", "\\\\").replace('"', '\\"')


def rule_yaml(rule, params=None, name=None, start=None, end=None):
    """One rules.yaml entry; parameters one per line (for positions)."""
    out = ["  - rule: %s" % rule]
    if name:
        out.append("    name: %s" % name)
    if start is not None:
        out.append("    start_step: %d" % start)
    if end is not None:
        out.append("    end_step: %d" % end)
    if params:
        out.append("    parameters:")
        for k, v in params.items():
            out.append("      %s: %s" % (k, yaml_value(v)))
    return "\n".join(out) + "\n"


def run_args(trial_dir, entries, state=None, output=None):
    path = rules_file("rules:\n" + "".join(entries))
    out = output or tempfile.mkdtemp(dir=TMP, prefix="out-")
    a = ["run", "--trial", trial_dir, "--rules", path, "--json", "--output", out]
    return a + (["--state", state] if state else lib.STATE_ARGS)


def by_name(res):
    rules = res.obj.get("rules") if isinstance(res.obj, dict) else None
    return {r.get("name"): r for r in rules or [] if isinstance(r, dict)}


# --------------------------------------------------------------------------
# Outcome checks

def last_violations(r):
    return lib.dig(r, "report.Details.last_trigger.violations", []) or []


def check_outcome(sc, r, status, first=lib.MISSING, triggered=None, evaluated=None,
                  skipped=None):
    if not sc.ok(r is not None, "rule in output", "missing"):
        return False
    sc.field_eq(r, "status", status)
    if first is not lib.MISSING:
        sc.field_eq(r, "first_trigger_step", first)
    if triggered is not None:
        sc.field_eq(r, "triggered_steps", triggered)
    if evaluated is not None:
        sc.field_eq(r, "evaluated_steps", evaluated)
    if skipped is not None:
        sc.field_eq(r, "skipped_steps", skipped)
    if status == "NoIssuesFound":
        sc.field_eq(r, "report.RuleTriggered", 0)
        sc.field_eq(r, "report.Violations", 0)
    return True


def find_violation(r, **match):
    for v in last_violations(r):
        if all(v.get(k) == want for k, want in match.items()):
            return v
    return None


def check_violation(sc, r, match, close=None, exact=None, keys=None):
    """The last trigger has a violation with the `match` fields; `close`
    fields compare with a relative tolerance, `exact` ones exactly, `keys`
    must be present."""
    v = find_violation(r, **match)
    if not sc.ok(v is not None, "violation %s" % lib.short(match),
                 "not among %s" % lib.short(last_violations(r), 400)):
        return None
    for k, want in (close or {}).items():
        sc.close("violation.%s" % k, v.get(k), want)
    for k, want in (exact or {}).items():
        sc.eq("violation.%s" % k, v.get(k), want)
    for k in keys or ():
        sc.ok(k in v, "violation has %s" % k, "fields: %s" % sorted(v))
    return v


# --------------------------------------------------------------------------
# Cases: (label, args, check(scope, result)).  All run in parallel.

CASES = []


def one(check):
    """A check of the only rule instance of the run."""
    def fn(sc, res):
        rules = list(by_name(res).values())
        if sc.ok(len(rules) == 1, "one rule in output", "got %d" % len(rules)):
            check(sc, rules[0])
    return fn


def add(label, trial_dir, entries, check, **kw):
    CASES.append((label, run_args(trial_dir, entries, **kw), check))


# ---- CheckInputImages (docs/rules/CheckInputImages.md)

def unnormalized_mean():
    """Mean over steps 0-9 of the single channel, from the fixture's stats."""
    exp = lib.load_json(os.path.join(syn("rule_check_input_images_unnormalized"), "EXPECT.json"))
    rows = [t for t in exp["tensors"] if t["name"] == "hybridsequential0_input_0" and t["step"] < 10]
    return sum(t["stats"]["sum"] for t in rows) / sum(t["stats"]["count"] for t in rows)


def cii_fires(sc, r):
    if check_outcome(sc, r, "IssuesFound", 7, [7, 8, 9], evaluated=10):
        v = check_violation(sc, r, {"tensor": "hybridsequential0_input_0"},
                            exact={"images": 640})
        if v is not None and sc.ok(isinstance(v.get("channel_means"), list)
                                   and len(v["channel_means"]) == 1, "channel_means has 1 channel",
                                   lib.short(v.get("channel_means"))):
            sc.close("channel_means[0]", v["channel_means"][0], unnormalized_mean())
        sc.field_eq(r, "report.Datapoints", 10)


add("CheckInputImages unnormalized fires at 7", syn("rule_check_input_images_unnormalized"),
    [rule_yaml("CheckInputImages", start=0, end=10)], one(cii_fires))
add("CheckInputImages normalized does not fire", syn("rule_check_input_images_normalized"),
    [rule_yaml("CheckInputImages", start=0, end=10)],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [], evaluated=10)))
add("CheckInputImages needs threshold_samples images", syn("rule_check_input_images_unnormalized"),
    [rule_yaml("CheckInputImages", {"threshold_samples": 1000})],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [], evaluated=10)))
add("CheckInputImages threshold_mean above the mean", syn("rule_check_input_images_unnormalized"),
    [rule_yaml("CheckInputImages", {"threshold_mean": 0.3})],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [])))
add("CheckInputImages threshold_samples 64 fires at the first step",
    syn("rule_check_input_images_unnormalized"),
    [rule_yaml("CheckInputImages", {"threshold_samples": 64, "threshold_mean": "0.05"})],
    one(lambda sc, r: check_outcome(sc, r, "IssuesFound", 0, list(range(10)))))
add("CheckInputImages regex selecting nothing", syn("rule_check_input_images_unnormalized"),
    [rule_yaml("CheckInputImages", {"regex": "^no_such_tensor$"})],
    one(lambda sc, r: check_outcome(sc, r, "NoData", None, [], evaluated=0,
                                    skipped=list(range(10)))))
add("CheckInputImages channel axis 1 of a 2-D activation", trial("dead_relu_negative_bias"),
    [rule_yaml("CheckInputImages", {"regex": "layer1\\.relu_output", "threshold_samples": 100})],
    one(lambda sc, r: check_outcome(sc, r, "IssuesFound", 6) and check_violation(
        sc, r, {"tensor": "layer1.relu_output_0"}, keys=("images", "channel_means"))))

# ---- DeadRelu (docs/rules/DeadRelu.md)


def dead_relu_fires(sc, r):
    if check_outcome(sc, r, "IssuesFound", 0, [0, 6, 12, 18, 24, 26, 32, 38, 44, 50]):
        for t in ("layer1.relu_output_0", "layer2.relu_output_0"):
            check_violation(sc, r, {"tensor": t}, close={"dead_percent": 100.0 * 54 / 64})
        sc.field_eq(r, "report.Violations", 20)
        sc.field_eq(r, "report.Datapoints", 20)


add("DeadRelu negative bias fires", trial("dead_relu_negative_bias"),
    [rule_yaml("DeadRelu")], one(dead_relu_fires))
add("DeadRelu empty tensor_regex means the default", trial("dead_relu_negative_bias"),
    [rule_yaml("DeadRelu", {"tensor_regex": ""})], one(dead_relu_fires))
add("DeadRelu threshold_layer 97 does not fire", trial("dead_relu_negative_bias"),
    [rule_yaml("DeadRelu", {"threshold_layer": 97})],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [], evaluated=10)))
add("DeadRelu healthy MLP does not fire", trial("healthy_mlp_digits"),
    [rule_yaml("DeadRelu")], one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [])))
add("DeadRelu zero init fires (synthetic)", syn("rule_dead_relu_zero_init"),
    [rule_yaml("DeadRelu", start=1, end=5)],
    one(lambda sc, r: check_outcome(sc, r, "IssuesFound", 1, [1, 2, 3, 4]) and check_violation(
        sc, r, {"tensor": "hybridsequential0_dense0_relu_output_0"}, close={"dead_percent": 100.0})))
add("DeadRelu healthy synthetic does not fire", syn("rule_dead_relu_healthy"),
    [rule_yaml("DeadRelu", {"threshold_inactivity": 1.0, "threshold_layer": 50.0})],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [], evaluated=5)))

# ---- Confusion (docs/rules/Confusion.md)


def confusion_row4(sc, r):
    if check_outcome(sc, r, "IssuesFound", 1, [1]):
        check_violation(sc, r, {"check": "diag", "row": 7, "column": 7}, close={"ratio": 0.5})
        check_violation(sc, r, {"check": "off_diag", "row": 4, "column": 7}, close={"ratio": 0.5})
        sc.field_eq(r, "report.Violations", 2)


add("Confusion positional names fire", syn("rule_confusion_row4"),
    [rule_yaml("Confusion", {"category_no": 10, "labels": "foo", "predictions": "bar"})],
    one(confusion_row4))
add("Confusion off-diagonal only", syn("rule_confusion_row4"),
    [rule_yaml("Confusion", {"category_no": 10, "labels": "foo", "predictions": "bar",
                             "min_diag": 0.0, "max_off_diag": 0.01})],
    one(lambda sc, r: check_outcome(sc, r, "IssuesFound", 1) and check_violation(
        sc, r, {"check": "off_diag", "row": 4, "column": 7}, close={"ratio": 0.5})
        and sc.field_eq(r, "report.Violations", 1)))
add("Confusion tolerant thresholds do not fire", syn("rule_confusion_row4"),
    [rule_yaml("Confusion", {"labels": "foo", "predictions": "bar", "min_diag": 0.5,
                             "max_off_diag": 0.5})],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [], evaluated=1)))
add("Confusion classes outside category_no skip the step", syn("rule_confusion_row4"),
    [rule_yaml("Confusion", {"category_no": 5, "labels": "foo", "predictions": "bar"})],
    one(lambda sc, r: check_outcome(sc, r, "NoData", None, [], evaluated=0, skipped=[1])))
add("Confusion defaults (tensors labels/predictions) do not fire", syn("rule_confusion_defaults"),
    [rule_yaml("Confusion")],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [], evaluated=1)))
add("Confusion collections do not fire", syn("rule_confusion_identity"),
    [rule_yaml("Confusion", {"labels_collection": "labels", "predictions_collection": "preds"})],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [], evaluated=1)))
add("Confusion imbalanced classifier fires", trial("class_imbalance_digits"),
    [rule_yaml("Confusion")],
    one(lambda sc, r: check_outcome(sc, r, "IssuesFound", 0) and check_violation(
        sc, r, {"check": "diag", "row": 0, "column": 0}, keys=("ratio",))))
add("Confusion XGBoost probabilities rounded to classes", trial("xgboost_balanced_features"),
    [rule_yaml("Confusion")],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [], evaluated=6)))

# ---- TreeDepth (docs/rules/TreeDepth.md)


def tree_depth_5(sc, r):
    if check_outcome(sc, r, "IssuesFound", 0, list(range(16))):
        check_violation(sc, r, {"tensor": "trees/Node"},
                        close={"max_node_id": 24, "depth": math.log2(24)})


add("TreeDepth depth 5 fires on every round", trial("xgboost_dominant_feature"),
    [rule_yaml("TreeDepth", {"depth": 5})], one(tree_depth_5))
add("TreeDepth depth 1 does not fire", trial("xgboost_dominant_feature"),
    [rule_yaml("TreeDepth", {"depth": 1})],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [], evaluated=16)))
add("TreeDepth default fires on the shallow round 4", trial("xgboost_dominant_feature"),
    [rule_yaml("TreeDepth")],
    one(lambda sc, r: check_outcome(sc, r, "IssuesFound", 4, [4]) and check_violation(
        sc, r, {"tensor": "trees/Node"}, close={"max_node_id": 14, "depth": math.log2(14)})))
add("TreeDepth without trees evaluates nothing", trial("xgboost_balanced_features"),
    [rule_yaml("TreeDepth")],
    one(lambda sc, r: check_outcome(sc, r, "NoData", None, [], evaluated=0,
                                    skipped=[0, 4, 8, 12, 16, 20])))

# ---- ClassImbalance (docs/rules/ClassImbalance.md)


def class_imbalance_digits(sc, r):
    if check_outcome(sc, r, "IssuesFound", 0, list(range(8))):
        check_violation(sc, r, {"check": "imbalance"}, keys=("ratio",))
        check_violation(sc, r, {"check": "misprediction", "class": 2}, close={"fraction": 1.0})
        v = find_violation(r, check="imbalance")
        if v:
            sc.ok(lib.is_number(v.get("ratio")) and v["ratio"] > 10, "imbalance ratio > 10",
                  lib.short(v))


add("ClassImbalance digits fires at 0", trial("class_imbalance_digits"),
    [rule_yaml("ClassImbalance")], one(class_imbalance_digits))
add("ClassImbalance below samples does not fire", trial("class_imbalance_digits"),
    [rule_yaml("ClassImbalance", {"samples": 1000000})],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [], evaluated=8)))
add("ClassImbalance tolerant thresholds do not fire", trial("class_imbalance_digits"),
    [rule_yaml("ClassImbalance", {"threshold_imbalance": 100, "threshold_misprediction": 1})],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [])))
add("ClassImbalance labels as predictions (synthetic) fires at 3", syn("rule_class_imbalance"),
    [rule_yaml("ClassImbalance", {"labels_regex": "labels_0", "predictions_regex": "labels_0"})],
    one(lambda sc, r: check_outcome(sc, r, "IssuesFound", 3, [3]) and check_violation(
        sc, r, {"check": "imbalance"}, close={"ratio": 99.0})
        and sc.field_eq(r, "report.Violations", 1)))
add("ClassImbalance ratio 99 below threshold 100", syn("rule_class_imbalance"),
    [rule_yaml("ClassImbalance", {"labels_regex": "labels_0", "predictions_regex": "labels_0",
                                  "threshold_imbalance": 100})],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [], evaluated=1)))

# ---- PoorWeightInitialization (docs/rules/PoorWeightInitialization.md)


def pwi_gradients(sc, r):
    if check_outcome(sc, r, "IssuesFound", 0, [0, 5]):
        v = check_violation(sc, r, {"check": "gradient_spread",
                                    "tensor": "gradient/DeepSigmoidNet_blocks.0.fc.weight"},
                            keys=("spread",))
        if v:
            sc.ok(lib.is_number(v["spread"]) and v["spread"] < 1e-10, "spread is tiny",
                  lib.short(v))


add("PoorWeightInitialization degenerate gradients fire", trial("vanishing_gradient_sigmoid"),
    [rule_yaml("PoorWeightInitialization")], one(pwi_gradients))


# Large float32 gradients take another path through the rule kit
# (rk_tensor_quantiles selects on the floats' bits where they lie, from
# 16,384 elements): the spread must still be NumPy's to the last bit.  The
# trial is written here the way smdebug's hook writes one (TFRecord
# framing with masked CRC-32C, Event > Summary > Value > TensorProto, an
# index file, the collections file), and the expected spread is computed
# by widening, a stable sort and NumPy's interpolation.

masked_crc32c, pb_varint, pb_bytes = lib.masked_crc32c, lib.pb_varint, lib.pb_bytes


def tfrecord(name, floats, step):
    return lib.f32_record(name, struct.pack("<%df" % len(floats), *floats), len(floats), step,
                          real_crc=True, mode_meta=False, wall_time=1.0e9)


def write_float_trial(folder, tensors):
    """Step 0 (TRAIN) of a one-worker trial holding `tensors` (name ->
    floats, already float32-exact), collection `gradients` = ^gradient/."""
    event_rel = "events/000000000000/000000000000_worker_0.tfevents"
    payload, blob = [], b""
    for name, floats in tensors.items():
        rec = tfrecord(name, floats, 0)
        payload.append({"tensorname": name, "start_idx": len(blob), "length": len(rec)})
        blob += rec
    files = {
        event_rel: blob,
        "index/000000000/000000000000_worker_0.json": json.dumps(
            {"meta": {"mode": "TRAIN", "mode_step": 0, "event_file_name": event_rel},
             "tensor_payload": payload, "shape_payload": []}).encode(),
        "collections/000000000/worker_0_collections.json": json.dumps(
            {"collections": {"gradients": {"name": "gradients",
                                           "include_regex": ["^gradient/"],
                                           "tensor_names": []}},
             "_meta": {"num_workers": 1}}).encode(),
        "training_job_end.ts": b"",
    }
    for rel, data in files.items():
        path = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


def np_quantile(values, q):
    """np.quantile(values, q), linear: a stable sort keeps the zeros' order
    (their signs), then NumPy's lerp from the nearer neighbour."""
    s = sorted(values)
    vi = (len(s) - 1) * q
    if vi >= len(s) - 1:
        return s[-1]
    lo = math.floor(vi)
    t = vi - lo
    a, b = s[lo], s[lo + 1]
    d = b - a
    return b - d * (1 - t) if t >= 0.5 else a + d * t


def float32_gradients():
    def f32(x):
        return struct.unpack("<f", struct.pack("<f", x))[0]
    state = [12345]

    def rnd():  # a fixed linear congruential sequence in [0, 1)
        state[0] = (state[0] * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return (state[0] >> 11) / float(1 << 53)
    normal = [f32((sum(rnd() for _ in range(4)) - 2) * 1e-3) for _ in range(20000)]
    # mostly zeros of both signs: the 5 % quantile is a zero whose sign
    # NumPy takes from the array's order
    zeros = [f32(rnd() - 0.01) if i % 10 == 0 else (-0.0 if rnd() < 0.5 else 0.0)
             for i in range(70001)]
    small = [f32(rnd() - 0.5) for _ in range(100)]  # below the float32 path
    return {"gradient/normal": normal, "gradient/zeros": zeros, "gradient/small": small}


PWI_F32 = os.path.join(TMP, "pwi-float32")
PWI_F32_GRADS = float32_gradients()
write_float_trial(PWI_F32, PWI_F32_GRADS)


def pwi_float32_spreads(sc, r):
    if not check_outcome(sc, r, "IssuesFound", 0, [0]):
        return
    for name, values in PWI_F32_GRADS.items():
        v = check_violation(sc, r, {"check": "gradient_spread", "tensor": name},
                            keys=("spread",))
        if v:
            want = np_quantile(values, 0.95) - np_quantile(values, 0.05)
            sc.eq("spread of %s (bit for bit)" % name, v.get("spread"), want)


add("PoorWeightInitialization spreads of large float32 gradients are NumPy's",
    PWI_F32, [rule_yaml("PoorWeightInitialization", {"distribution_range": 1e30})],
    one(pwi_float32_spreads))
add("PoorWeightInitialization activation variance fires", trial("vanishing_gradient_sigmoid"),
    [rule_yaml("PoorWeightInitialization", {"activation_inputs_regex": "sigmoid_input",
                                            "distribution_range": 0, "threshold": 1.5})],
    one(lambda sc, r: check_outcome(sc, r, "IssuesFound", 0) and check_violation(
        sc, r, {"check": "activation_variance"}, keys=("ratio",))))
add("PoorWeightInitialization similar variances do not fire", trial("vanishing_gradient_sigmoid"),
    [rule_yaml("PoorWeightInitialization", {"activation_inputs_regex": "sigmoid_input",
                                            "distribution_range": 0, "steps": 30})],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [], evaluated=6)))
add("PoorWeightInitialization flat loss fires after patience", trial("stalled_lr_zero"),
    [rule_yaml("PoorWeightInitialization", {"distribution_range": 0, "steps": "30.7"})],
    one(lambda sc, r: check_outcome(sc, r, "IssuesFound", 15, [15, 18, 21, 24, 27]) and
        check_violation(sc, r, {"check": "loss", "tensor": "CrossEntropyLoss_output_0"},
                        exact={"wait": 9})))
add("PoorWeightInitialization patience 10 does not fire", trial("stalled_lr_zero"),
    [rule_yaml("PoorWeightInitialization", {"distribution_range": 0, "steps": 30,
                                            "patience": 10})],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [])))
add("PoorWeightInitialization healthy MLP does not fire", trial("healthy_mlp_digits"),
    [rule_yaml("PoorWeightInitialization")],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [], evaluated=2)))

# ---- SaturatedActivation (docs/rules/SaturatedActivation.md)


def saturated(sc, r):
    if check_outcome(sc, r, "IssuesFound", 0, [0, 5, 10, 15, 20, 25], evaluated=6):
        check_violation(sc, r, {"tensor": "blocks.3.sigmoid_input_0"},
                        close={"saturated_percent": 84.375})
        sc.field_eq(r, "report.Datapoints", 60)


add("SaturatedActivation small sigmoid inputs do not fire", trial("vanishing_gradient_sigmoid"),
    [rule_yaml("SaturatedActivation")],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [], evaluated=6)))
add("SaturatedActivation narrow sigmoid bounds fire", trial("vanishing_gradient_sigmoid"),
    [rule_yaml("SaturatedActivation", {"threshold_sigmoid_min": -0.01,
                                       "threshold_sigmoid_max": 0.01})], one(saturated))
add("SaturatedActivation pair alias \"(min, max)\"", trial("vanishing_gradient_sigmoid"),
    [rule_yaml("SaturatedActivation", {"threshold_sigmoid": "(-0.01, 0.01)"})], one(saturated))
add("SaturatedActivation pair alias as a YAML list", trial("vanishing_gradient_sigmoid"),
    [rule_yaml("SaturatedActivation", {"threshold_sigmoid": [-0.01, 0.01]})], one(saturated))
add("SaturatedActivation tanh bounds do not apply to sigmoid", trial("vanishing_gradient_sigmoid"),
    [rule_yaml("SaturatedActivation", {"threshold_tanh": "-0.01,0.01"})],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [])))
add("SaturatedActivation threshold_layer 90 does not fire", trial("vanishing_gradient_sigmoid"),
    [rule_yaml("SaturatedActivation", {"threshold_sigmoid": "(-0.01, 0.01)",
                                       "threshold_layer": 90})],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [])))
add("SaturatedActivation selection by collection", trial("vanishing_gradient_sigmoid"),
    [rule_yaml("SaturatedActivation", {"collection_names": "sigmoid_inputs", "tensor_regex": "",
                                       "threshold_sigmoid": "(-0.01, 0.01)"})], one(saturated))

# ---- NLPSequenceRatio (docs/rules/NLPSequenceRatio.md)


def nlp_fires(sc, r):
    if check_outcome(sc, r, "IssuesFound", 0, [0, 6, 12, 18, 24, 26, 32, 38, 44, 50]):
        v = check_violation(sc, r, {"tensor": "layer1.relu_output_0", "token": 0},
                            keys=("percent",))
        if v:
            sc.ok(lib.is_number(v["percent"]) and 80 < v["percent"] <= 100, "percent of zeros",
                  lib.short(v))


add("NLPSequenceRatio default regex finds no sequences", trial("dead_relu_negative_bias"),
    [rule_yaml("NLPSequenceRatio")],
    one(lambda sc, r: check_outcome(sc, r, "NoData", None, [], evaluated=0)))
add("NLPSequenceRatio mostly-zero tensors fire", trial("dead_relu_negative_bias"),
    [rule_yaml("NLPSequenceRatio", {"tensor_regex": "relu_output"})], one(nlp_fires))
add("NLPSequenceRatio one threshold for two tokens", trial("dead_relu_negative_bias"),
    [rule_yaml("NLPSequenceRatio", {"tensor_regex": "relu_output", "token_values": "0, 1",
                                    "token_thresholds_percent": "50"})], one(nlp_fires))
add("NLPSequenceRatio threshold per token", trial("dead_relu_negative_bias"),
    [rule_yaml("NLPSequenceRatio", {"tensor_regex": "relu_output", "token_values": [0, 1],
                                    "token_thresholds_percent": [90, 1]})],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [], evaluated=10)))
add("NLPSequenceRatio healthy activations do not fire", trial("healthy_mlp_digits"),
    [rule_yaml("NLPSequenceRatio", {"tensor_regex": "relu_output"})],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [], evaluated=16)))

# ---- FeatureImportanceOverweight (docs/rules/FeatureImportanceOverweight.md)


def fio_balanced_02(sc, r):
    if check_outcome(sc, r, "IssuesFound", 0, [0, 4, 8, 12, 16, 20]):
        v = last_violations(r)
        if sc.ok(len(v) == 1, "one violation", lib.short(v)):
            sc.ok(lib.is_number(v[0].get("share")) and 0.357 - 1e-3 <= v[0]["share"] <= 0.556 + 1e-3,
                  "share within the fixture's range", lib.short(v[0]))
            tf = v[0].get("top_features")
            sc.ok(isinstance(tf, list) and len(tf) == 3 and all(
                isinstance(n, str) and "feature_importance/weight/" in n for n in tf),
                "top_features: 3 weight features", lib.short(tf))


add("FeatureImportanceOverweight balanced threshold 0.2 fires", trial("xgboost_balanced_features"),
    [rule_yaml("FeatureImportanceOverweight", {"threshold": 0.2})], one(fio_balanced_02))
add("FeatureImportanceOverweight balanced default does not fire",
    trial("xgboost_balanced_features"), [rule_yaml("FeatureImportanceOverweight")],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [], evaluated=6)))
add("FeatureImportanceOverweight dominant feature fires", trial("xgboost_dominant_feature"),
    [rule_yaml("FeatureImportanceOverweight")],
    one(lambda sc, r: check_outcome(sc, r, "IssuesFound", 5) and sc.field_eq(
        r, "skipped_steps", [0, 1, 2, 3, 4])))
add("FeatureImportanceOverweight top-1 of the dominant feature", trial("xgboost_dominant_feature"),
    [rule_yaml("FeatureImportanceOverweight", {"threshold": 0.5, "nfeatures": 1})],
    one(lambda sc, r: check_outcome(sc, r, "IssuesFound", 4) and check_violation(
        sc, r, {}, exact={"top_features": ["feature_importance/weight/f0"]}, keys=("share",))))
add("FeatureImportanceOverweight threshold 1 never fires", trial("xgboost_dominant_feature"),
    [rule_yaml("FeatureImportanceOverweight", {"threshold": 1})],
    one(lambda sc, r: check_outcome(sc, r, "NoIssuesFound", None, [])))


# ---- several instances of one rule in one file keep separate settings

def two_instances(sc, res):
    rules = by_name(res)
    check_outcome(sc.c.scope(sc.prefix + " strict"), rules.get("strict"), "IssuesFound", 0)
    check_outcome(sc.c.scope(sc.prefix + " lenient"), rules.get("lenient"), "NoIssuesFound", None)


add("DeadRelu two instances", trial("dead_relu_negative_bias"),
    [rule_yaml("DeadRelu", name="strict"), rule_yaml("DeadRelu", {"threshold_layer": 97},
                                                     name="lenient")], two_instances)


# --------------------------------------------------------------------------
# Parameter validation: exit 2, the message names the parameter and its
# line and column in rules.yaml.

BAD_PARAMS = [
    # (rule, parameter, value, what the message must contain besides the name)
    ("CheckInputImages", "channel", 0, ">= 1"),
    ("CheckInputImages", "threshold_samples", "many", "integer"),
    ("CheckInputImages", "regex", "(unclosed", "regular expression"),
    ("DeadRelu", "threshold_layer", "abc", "number"),
    ("DeadRelu", "threshold_inactivity", 150, "<= 100"),
    ("Confusion", "category_no", 1, ">= 2"),
    ("Confusion", "min_diag", 1.5, "<= 1"),
    ("Confusion", "labels", [1, 2], "string"),
    ("TreeDepth", "depth", "deep", "number"),
    ("ClassImbalance", "threshold_misprediction", 2, "<= 1"),
    ("ClassImbalance", "argmax", "maybe", "true or false"),
    ("ClassImbalance", "samples", 2.5, "integer"),
    ("PoorWeightInitialization", "patience", 0, ">= 1"),
    ("PoorWeightInitialization", "steps", "ten", "number"),
    ("SaturatedActivation", "threshold_layer", 101, "<= 100"),
    ("SaturatedActivation", "threshold_tanh_min", "low", "number"),
    ("NLPSequenceRatio", "token_thresholds_percent", 150, "<= 100"),
    ("NLPSequenceRatio", "token_values", "a,b", "not a number"),
    ("FeatureImportanceOverweight", "nfeatures", 0, ">= 1"),
    ("FeatureImportanceOverweight", "threshold", 1.5, "<= 1"),
]


def bad_param_entry(rule, param, value):
    # line 4, column 7 is the key; the value starts after "<key>: "
    return rule_yaml(rule, {param: value}), 4, 7, 7 + len(param) + 2


def check_usage_error(sc, res, words, line, cols):
    sc.exit_code(res, [EXIT_USAGE])
    text = res.err + res.out
    pos = ["line %d, column %d" % (line, c) for c in cols]
    sc.ok(any(p in text for p in pos), "message gives %s" % " or ".join(pos),
          lib.short(text.strip(), 300))
    for w in words:
        sc.ok(w in text, "message mentions %r" % w, lib.short(text.strip(), 300))


for rule, param, value, words in BAD_PARAMS:
    entry, line, kcol, vcol = bad_param_entry(rule, param, value)
    CASES.append(("%s %s=%s rejected" % (rule, param, value),
                  run_args(trial("healthy_mlp_digits"), [entry]),
                  lambda sc, res, p=param, w=words, ln=line, cs=(kcol, vcol):
                  check_usage_error(sc, res, [p, w], ln, cs)))

for rule in RULES:
    entry = rule_yaml(rule, {"no_such_param": 1})
    CASES.append(("%s unknown parameter rejected" % rule,
                  run_args(trial("healthy_mlp_digits"), [entry]),
                  lambda sc, res: check_usage_error(sc, res, ["no_such_param"], 4, (7,))))

# Values only the rule itself can judge: reported at the rule's position,
# naming the parameter.
for params, words in (
        ({"threshold_sigmoid": "1,2,3"}, ["threshold_sigmoid", "pair"]),
        ({"threshold_tanh": "(a, b)"}, ["threshold_tanh", "pair"]),
        ({"threshold_sigmoid_min": 5, "threshold_sigmoid_max": 1}, ["sigmoid", "min"]),
        ({"threshold_tanh": [3, -3]}, ["tanh", "min"])):
    CASES.append(("SaturatedActivation %s rejected" % lib.short(params),
                  run_args(trial("healthy_mlp_digits"), [rule_yaml("SaturatedActivation", params)]),
                  lambda sc, res, w=words: check_usage_error(sc, res, w, 2, (5,))))
CASES.append(("NLPSequenceRatio 3 thresholds for 2 tokens rejected",
              run_args(trial("healthy_mlp_digits"),
                       [rule_yaml("NLPSequenceRatio", {"token_values": "0,1",
                                                       "token_thresholds_percent": "50,50,50"})]),
              lambda sc, res: check_usage_error(sc, res, ["token_thresholds_percent"], 2, (5,))))


# --------------------------------------------------------------------------
# CreateXgboostReport (docs/rules/CreateXgboostReport.md)

REPORT = "xgboost_report.html"
EXTERNAL = re.compile(r"""(?:src|href|xlink:href)\s*=\s*["']?\s*(?:https?:)?//""", re.I)


def check_html(sc, html, classification, objective):
    sc.ok(html.lstrip().lower().startswith("<!doctype html>"), "HTML document", html[:60])
    for sid, title in (("hyperparameters", "Hyperparameters"), ("metrics", "Metrics"),
                       ("feature_importance", "Feature importance"),
                       ("labels_predictions", "Labels and predictions")):
        sc.ok('<section id="%s">' % sid in html, "section %s" % sid)
        sc.ok("<h2>%s</h2>" % title in html, "heading %s" % title)
    sc.ok("<style>" in html, "inline CSS")
    sc.ok(objective in html, "hyperparameter objective %s shown" % objective)
    svgs = re.findall(r"<svg\b.*?</svg>", html, re.S)
    # metric chart(s), 5 importance types, label/prediction histogram (+ residuals)
    sc.ok(len(svgs) >= 7, "at least 7 inline SVG charts", "found %d" % len(svgs))
    bad = []
    for s in svgs:
        try:
            ET.fromstring(s)
        except ET.ParseError as e:
            bad.append(str(e))
    sc.ok(not bad, "every SVG is well-formed XML", lib.short(bad))
    sc.ok(any("<polyline" in s for s in svgs), "metric curve drawn as a polyline")
    sc.ok(any("<rect" in s for s in svgs), "bars drawn as rects")
    sc.ok(not EXTERNAL.search(html), "no external src/href",
          EXTERNAL.search(html).group(0) if EXTERNAL.search(html) else "")
    sc.ok("http://" not in html and "https://" not in html, "no http(s) URL at all")
    sc.ok(not re.search(r"<script\b", html, re.I), "no <script>")
    sc.ok(not re.search(r"<link\b|@import|url\(", html, re.I), "no stylesheet links or url()")
    sc.ok(not re.search(r"<(img|iframe|object|embed)\b", html, re.I), "no embedded resources")
    if classification:
        sc.ok("Confusion matrix" in html and "Accuracy" in html, "confusion matrix and accuracy")
    else:
        sc.ok("Residuals" in html and "<th>std</th>" in html, "residual statistics")


def report_case(trial_name, classification, objective, name=None):
    out = tempfile.mkdtemp(dir=TMP, prefix="report-")
    inst = name or "CreateXgboostReport"
    path = os.path.join(out, inst, REPORT)

    def check(sc, res):
        sc.exit_code(res, [0])
        r = by_name(res).get(inst)
        if not check_outcome(sc, r, "NoIssuesFound", None, []):
            return
        sc.field_eq(r, "report.Details.report", path)
        sc.field_eq(r, "report.Details.sections",
                    ["hyperparameters", "metrics", "feature_importance", "labels_predictions"])
        if not sc.ok(os.path.isfile(path), "report written to %s" % path):
            return
        with open(path, encoding="utf-8") as f:
            check_html(sc, f.read(), classification, objective)
        sc.ok(not os.path.exists(path + ".tmp"), "no temporary file left")

    CASES.append(("CreateXgboostReport %s%s" % (trial_name, " as " + name if name else ""),
                  run_args(trial(trial_name), [rule_yaml("CreateXgboostReport", name=name)],
                           output=out), check))


report_case("xgboost_balanced_features", True, "binary:logistic")
report_case("xgboost_dominant_feature", False, "reg:squarederror")
report_case("xgboost_dominant_feature", False, "reg:squarederror", name="my_report")


def no_report(out):
    def check(sc, res):
        r = by_name(res).get("CreateXgboostReport")
        check_outcome(sc, r, "NoData", None, [], evaluated=0)
        sc.ok(not os.path.exists(os.path.join(out, "CreateXgboostReport", REPORT)),
              "no report without XGBoost data")
    return check


_out = tempfile.mkdtemp(dir=TMP, prefix="report-")
CASES.append(("CreateXgboostReport on a PyTorch trial",
              run_args(trial("healthy_mlp_digits"), [rule_yaml("CreateXgboostReport")],
                       output=_out), no_report(_out)))


# --------------------------------------------------------------------------
# Stored state: a later run over later steps continues the same rule state
# (docs/rule-semantics.md#the-report; HELPERS: the synthetic fixtures invoke one rule object on
# consecutive step ranges).

def split_runs(sc, trial_dir, rule, params, cut, end, want):
    """Runs `rule` over [start, cut) and then [cut, end) with one --state
    file; the second run must report `want(r)`."""
    state = tempfile.mktemp(dir=TMP, prefix="state-", suffix=".db")
    r1 = lib.run_json(run_args(trial_dir, [rule_yaml(rule, params, start=0, end=cut)], state=state))
    sc.process(r1)
    r2 = lib.run_json(run_args(trial_dir, [rule_yaml(rule, params, start=cut, end=end)],
                               state=state))
    sc.process(r2)
    sc.result = r2
    want(sc, by_name(r2).get(rule))


def fresh_last(trial_dir, rule, params):
    res = lib.run_json(run_args(trial_dir, [rule_yaml(rule, params)]))
    return by_name(res).get(rule) or {}


def state_cases():
    sc = C.scope("CheckInputImages resumes its sums")
    split_runs(sc, syn("rule_check_input_images_unnormalized"), "CheckInputImages", None, 5, 10,
               lambda sc, r: check_outcome(sc, r, "IssuesFound", 7, [7, 8, 9], evaluated=10))

    full = fresh_last(trial("class_imbalance_digits"), "ClassImbalance", None)
    sc = C.scope("ClassImbalance resumes its counts")
    split_runs(sc, trial("class_imbalance_digits"), "ClassImbalance", None, 4, 8,
               lambda sc, r: check_outcome(sc, r, "IssuesFound", 0, list(range(8)))
               and sc.eq("last violations equal a fresh run's", last_violations(r),
                         last_violations(full)))

    sc = C.scope("PoorWeightInitialization resumes its loss patience")
    split_runs(sc, trial("stalled_lr_zero"), "PoorWeightInitialization",
               {"distribution_range": 0, "steps": 30}, 10, 30,
               lambda sc, r: check_outcome(sc, r, "IssuesFound", 15, [15, 18, 21, 24, 27]))

    # a stateless rule resumes too
    sc = C.scope("DeadRelu resumes after the last step")
    split_runs(sc, trial("dead_relu_negative_bias"), "DeadRelu", None, 20, 60,
               lambda sc, r: check_outcome(sc, r, "IssuesFound", 0,
                                           [0, 6, 12, 18, 24, 26, 32, 38, 44, 50]))


# --------------------------------------------------------------------------
# list / describe

def describe_cases():
    res = lib.run_json(["list"])
    sc = C.scope("list", res)
    for rule in RULES:
        sc.ok(re.search(r"^%s\b" % rule, res.out, re.M) is not None, "lists %s" % rule)
    for rule, params in (("Confusion", ["category_no", "labels", "predictions",
                                        "labels_collection", "predictions_collection",
                                        "min_diag", "max_off_diag"]),
                         ("SaturatedActivation", ["threshold_tanh_min", "threshold_sigmoid_max",
                                                  "threshold_tanh", "threshold_sigmoid"]),
                         ("NLPSequenceRatio", ["tensor_regex", "token_values",
                                               "token_thresholds_percent"])):
        res = lib.run_json(["describe", rule])
        sc = C.scope("describe %s" % rule, res)
        sc.exit_code(res, [0])
        pos = [res.out.find("\n  %s " % p) for p in params]
        sc.ok(all(p >= 0 for p in pos), "all parameters listed", lib.short(params))
        sc.ok(pos == sorted(pos), "parameters in declaration (positional) order", lib.short(pos))


# --------------------------------------------------------------------------

def main():
    before = {d: lib.tree_snapshot(d) for d in (SYN, TRIALS)}
    results = lib.run_all([args for _, args, _ in CASES])
    for (label, _, check), res in zip(CASES, results):
        sc = C.scope(label, res)
        if sc.process(res, want_json=False):
            check(sc, res)
    state_cases()
    describe_cases()
    for d, snap in before.items():
        lib.check_untouched(C, d, snap)
    shutil.rmtree(TMP, ignore_errors=True)
    C.finish()


if __name__ == "__main__":
    main()
