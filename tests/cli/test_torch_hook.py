#!/usr/bin/env python3
"""smrules.torch.Hook end to end, with Debian's python3-torch.

Real training loops (tests/cli/torch_train.py: a small ReLU MLP and a small
ReLU CNN, TRAIN and EVAL) write trials with the hook while recording what
PyTorch says each saved tensor was.  Read back through the smrules CLI:
- steps, modes and mode steps as the loop counted them, and exactly the
  tensor names due at each step (parameters, gradient/..., module outputs,
  the loss, save_scalar at every step, save_tensor);
- every tensor's bytes (sha256) equal to PyTorch's, bit for bit;
- the collections file: smdebug's default collections and regexes, the
  names each holds, the save configs, num_workers;
- the end marker from close() and, without close(), from the exit;
- SageMaker's hook JSON (Hook.create_from_json_file): per-collection and
  per-mode intervals;
- built-in rules with the expected outcomes: ExplodingTensor on an
  exploding run, DeadRelu on a dead-ReLU run, LossNotDecreasing on a
  stalled run, none of them on the healthy run;
- `smrules run ... -- /usr/bin/python3 torch_train.py live` stopped by
  StopTraining: exit 143, the last step complete, the end marker written;
- two ranks of torch.distributed (gloo): include_workers="all" writes
  worker_0 and worker_1 (gradients equal across ranks), "one" worker_0;
- refusals: an out_dir holding a trial, a torch.compile module, s3://,
  bad include_workers and modes; dry_run writes nothing; the writer queue
  stays within its bound (0 MB: every put waits for the writer).
Nothing here waits for a duration: the launched run ends when the trainer
exits after StopTraining's signal."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import pylib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "torch_train.py")
RELU_RX = ".*relu_output"
# smdebug's default PyTorch collections (smdebug/pytorch/collection.py)
DEFAULT_REGEX = {"weights": ["^(?!gradient).*weight"], "biases": ["^(?!gradient).*bias"],
                 "gradients": ["^gradient"], "losses": ["[Ll]oss_(?!input).*output"],
                 "all": [], "default": []}
ERRORS = r"""
import json, os, sys, torch, warnings
import smrules.torch as smd
res = {}
def attempt(key, fn):
    try:
        fn()
        res[key] = "no error"
    except Exception as e:
        res[key] = "%s: %s" % (type(e).__name__, e)
old, fresh = sys.argv[1], sys.argv[2]
attempt("finished_trial", lambda: smd.Hook(out_dir=old))
os.remove(os.path.join(old, "training_job_end.ts"))
def first_step():
    h = smd.Hook(out_dir=old)
    m = torch.nn.Linear(2, 2)
    h.register_module(m)
    m(torch.zeros(1, 2))
attempt("existing_trial", first_step)
class OptimizedModule(torch.nn.Module):   # what torch.compile returns
    def __init__(self, m):
        super().__init__()
        self._orig_mod = m
attempt("compiled", lambda: smd.Hook(out_dir=fresh).register_module(
    OptimizedModule(torch.nn.Linear(2, 2))))
attempt("s3", lambda: smd.Hook(out_dir="s3://bucket/prefix"))
attempt("workers", lambda: smd.Hook(out_dir=fresh, include_workers="some"))
attempt("mode", lambda: smd.Hook(out_dir=fresh).set_mode("TRAINING"))
attempt("interval", lambda: smd.SaveConfig(save_interval=0))
attempt("reduction", lambda: smd.ReductionConfig(reductions=["median"]))
attempt("regex", lambda: smd.Hook(out_dir=fresh).get_collection("x").include("(unclosed"))
attempt("twice", lambda: [h := smd.Hook(out_dir=fresh), m := torch.nn.Linear(2, 2),
                          h.register_module(m), h.register_module(m)])
bad = os.path.join(sys.argv[3], "blocked")
os.makedirs(bad)
open(os.path.join(bad, "events"), "w").close()   # the writer cannot make events/<step>/
def blocked():
    h = smd.Hook(out_dir=bad, save_config=smd.SaveConfig(save_interval=1),
                 include_collections=["weights"])
    m = torch.nn.Linear(2, 2)
    h.register_module(m)
    for i in range(3):
        m(torch.zeros(1, 2)).sum().backward()
    h.close()
attempt("write_failure", blocked)
res["blocked_end_marker"] = os.path.exists(os.path.join(bad, "training_job_end.ts"))
print(json.dumps(res))
"""


def spec(name, tmp, **kw):
    s = {"name": name, "out": os.path.join(tmp, name), "model": "mlp",
         "scenario": name if name in ("exploding", "deadrelu", "stalled") else "healthy",
         "epochs": 2, "train_steps": 6, "eval_steps": 2, "intervals": {"TRAIN": 2, "EVAL": 1}}
    s.update(kw)
    return s


def hook_json(tmp):
    """SageMaker's hook configuration as an estimator sends it: strings for
    numbers, per-mode keys, a collection with its own interval."""
    path = os.path.join(tmp, "debughookconfig.json")
    with open(path, "w") as f:
        json.dump({
            "LocalPath": os.path.join(tmp, "json"),
            "HookParameters": {"save_interval": "3", "eval.save_interval": "1"},
            "CollectionConfigurations": [
                {"CollectionName": "weights"},
                {"CollectionName": "losses"},
                {"CollectionName": "relu_output",
                 "CollectionParameters": {"include_regex": RELU_RX, "train.save_interval": "2"}},
            ]}, f)
    return path


# --------------------------------------------------------------------------
# comparing a trial with the loop's record

def expected_collections(names, regex):
    out = {}
    for cname, rxs in regex.items():
        out[cname] = sorted(n for n in names if any(re.search(r, n) for r in rxs))
    return out


def check_trial(c, label, out, steps, ended=True, workers=("worker_0",), worker=None,
                collections=None):
    """`steps`: {step: {mode, mode_step, tensors: {name: {sha256, shape, dtype}}}}
    as the loop recorded them; the trial must hold exactly these."""
    r = pylib.inspect(out)
    sc = c.scope(label, r)
    if not sc.process():
        return None
    o = r.obj
    want_steps = sorted(int(s) for s in steps)
    sc.eq("steps", o.get("steps"), want_steps)
    sc.eq("step modes", o.get("step_modes"),
          {str(s): [steps[str(s)]["mode"], steps[str(s)]["mode_step"]] for s in want_steps})
    sc.eq("workers", o.get("workers"), list(workers))
    sc.eq("training ended (end marker)", o.get("training_ended"), ended)
    sc.eq("no read errors", o.get("errors"), [])
    got = {}
    for t in o.get("tensors", []):
        for s in t.get("steps", []):
            got.setdefault(str(s), set()).add(t["name"])
    for s in want_steps:
        want = set(steps[str(s)]["tensors"])
        have = got.get(str(s), set())
        sc.ok(have == want, "names at step %d" % s, "missing %s, not expected %s" % (
            sorted(want - have), sorted(have - want)))
    args = []
    for s in want_steps:
        for name in sorted(n for n, v in steps[str(s)]["tensors"].items() if v):
            a = ["tensor", "--trial", out, "--name", name, "--step", str(s), "--json"] + \
                lib.STATE_ARGS
            if worker:
                a += ["--worker", worker]
            args.append((s, name, a))
    results = lib.run_all([a for _, _, a in args])
    bad = []
    for (s, name, _), t in zip(args, results):
        exp = steps[str(s)]["tensors"][name]
        obj = t.obj or {}
        if t.rc != 0 or obj.get("sha256") != exp["sha256"] or obj.get("shape") != exp["shape"] \
                or obj.get("dtype") != exp["dtype"]:
            bad.append("%s@%d: got %s %s %s, PyTorch %s %s %s (rc %d %s)" % (
                name, s, obj.get("dtype"), obj.get("shape"), (obj.get("sha256") or "")[:12],
                exp["dtype"], exp["shape"], exp["sha256"][:12], t.rc, t.err.strip()[:200]))
    sc.ok(not bad, "%d tensor values equal PyTorch's bit for bit" % len(args),
          "; ".join(bad[:4]) + (" ... %d more" % (len(bad) - 4) if len(bad) > 4 else ""))
    reds = []
    for s in want_steps:
        for key, value in sorted(steps[str(s)].get("reductions", {}).items()):
            name, red, abs_ = key.split("|")
            a = ["tensor", "--trial", out, "--name", name, "--step", str(s), "--json",
                 "--reduction", red] + (["--abs"] if abs_ == "1" else []) + lib.STATE_ARGS
            reds.append((s, name, red, abs_, value, a))
    if reds:
        bad = []
        for (s, name, red, abs_, value, _), t in zip(reds, lib.run_all([x[-1] for x in reds])):
            got = (t.obj or {}).get("reduction") or {}
            if got.get("value") != value or got.get("saved") is not True:
                bad.append("%s %s%s@%d: got %s, PyTorch %r" % (name, "abs_" if abs_ == "1" else "",
                                                               red, s, got, value))
        sc.ok(not bad, "%d saved reductions equal PyTorch's" % len(reds), "; ".join(bad[:4]))
    if collections is not None:
        names = set().union(*[set(v["tensors"]) for v in steps.values()])
        want = expected_collections(names, collections)
        sc.eq("collections and their tensors", {k: sorted(v) for k, v in
                                                (o.get("collections") or {}).items()}, want)
    return o


def collections_file(out, worker="worker_0"):
    p = os.path.join(out, "collections", "000000000", "%s_collections.json" % worker)
    with open(p) as f:
        return json.load(f)


# --------------------------------------------------------------------------
# rules

def rule_status(tmp, trial, rule, params):
    lines = ["rules:", "  - rule: %s" % rule]
    if params:
        lines.append("    parameters: %s" % json.dumps(params))
    path = os.path.join(tmp, "r-%s-%s.yaml" % (rule, os.path.basename(trial)))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    r = lib.run_json(["run", "--trial", trial, "--rules", path, "--json", "--fresh",
                      "--output", path + ".out"])
    rules = (r.obj or {}).get("rules") or [{}]
    return r, rules[0].get("status")


def check_rules(c, tmp, outs):
    cases = [("exploding", "ExplodingTensor", {}, "IssuesFound"),
             ("healthy_mlp", "ExplodingTensor", {}, "NoIssuesFound"),
             ("deadrelu", "DeadRelu", {"tensor_regex": RELU_RX, "threshold_layer": 50.0},
              "IssuesFound"),
             ("healthy_mlp", "DeadRelu", {"tensor_regex": RELU_RX, "threshold_layer": 50.0},
              "NoIssuesFound"),
             ("stalled", "LossNotDecreasing", {"num_steps": 4, "mode": "TRAIN"}, "IssuesFound"),
             ("healthy_mlp", "LossNotDecreasing", {"num_steps": 4, "mode": "TRAIN"},
              "NoIssuesFound")]
    for trial, rule, params, want in cases:
        r, status = rule_status(tmp, outs[trial], rule, params)
        sc = c.scope("rules: %s on the %s run" % (rule, trial), r)
        sc.eq("status", status, want)


# --------------------------------------------------------------------------
# the parts

def start_live(tmp):
    out = os.path.join(tmp, "live")
    rules = os.path.join(tmp, "live.yaml")
    with open(rules, "w") as f:
        f.write("rules:\n  - rule: LossNotDecreasing\n"
                "    parameters: {num_steps: 3, mode: GLOBAL}\n"
                "    actions: [StopTraining]\n")
    args = ["run", "--trial", out, "--rules", rules, "--json", "--fresh",
            "--output", os.path.join(tmp, "live-out"), "--", pylib.PYTHON, TRAIN, "live", out]
    p = subprocess.Popen([lib.SMRULES] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, env=pylib.env(), cwd=lib.ROOT)
    return p, args, out


def check_live(c, p, args, out):
    try:
        so, se = p.communicate(timeout=lib.TIMEOUT * 5)  # a hang guard only
    except subprocess.TimeoutExpired:
        p.kill()
        so, se = p.communicate()
    r = lib.Result(args, p.returncode, so.decode(), se.decode())
    sc = c.scope("live: StopTraining stops a hooked PyTorch script", r)
    if not sc.process():
        return
    sc.eq("exit 1 (issues found)", r.rc, 1)
    t = r.obj.get("training") or {}
    sc.eq("training.exit_code (SIGTERM taken as a clean exit)", t.get("exit_code"), 143)
    sc.eq("training.stopped_by", t.get("stopped_by"), "LossNotDecreasing")
    sc.ok("never stopped" not in r.out, "the loop did not run to its bound")
    rule = (r.obj.get("rules") or [{}])[0]
    sc.eq("rule status", rule.get("status"), "IssuesFound")
    o = pylib.inspect(out).obj or {}
    sc.eq("end marker written on the way out", o.get("training_ended"), True)
    sc.eq("no read errors", o.get("errors"), [])
    steps = o.get("steps") or []
    sc.ok(len(steps) >= 4, "steps written before the stop", str(steps))
    # every step, the last included, holds its whole set of tensors
    per_step = {}
    for tn in o.get("tensors", []):
        for s in tn["steps"]:
            per_step.setdefault(s, set()).add(tn["name"])
    want = {"CrossEntropyLoss_output_0", "SmallMLP_layer1.fc.weight", "SmallMLP_layer2.fc.weight",
            "SmallMLP_out.weight", "gradient/SmallMLP_layer1.fc.weight",
            "gradient/SmallMLP_out.bias"}
    short = [s for s in steps if not want <= per_step.get(s, set())]
    sc.ok(steps and not short, "every step complete, the last (%s) too" % (steps[-1:] or "-"),
          "incomplete steps %s" % short)
    leftovers = []
    for d, _, files in os.walk(out):
        leftovers += [f for f in files if f.endswith(".tmp")]
    sc.eq("no half-written files", leftovers, [])


def start_ddp(tmp):
    init = "file://" + os.path.join(tmp, "ddp-init")
    outs = (os.path.join(tmp, "ddp-all"), os.path.join(tmp, "ddp-one"))
    procs = []
    for rank in (0, 1):
        procs.append(subprocess.Popen(
            [pylib.PYTHON, TRAIN, "ddp", str(rank), "2", init, outs[0], outs[1]],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            env=pylib.env(), cwd=lib.ROOT))
    return procs, outs


def check_ddp(c, procs, outs):
    res, errs = [], []
    for i, p in enumerate(procs):
        try:
            so, se = p.communicate(timeout=lib.TIMEOUT * 5)
        except subprocess.TimeoutExpired:
            p.kill()
            so, se = p.communicate()
        errs.append((p.returncode, so, se.decode()))
    for i, (rc, so, se) in enumerate(errs):
        c.ok(rc == 0, "ddp: rank %d trains" % i, se[-1500:])
    if any(rc for rc, _, _ in errs):
        return
    res = [json.loads(so) for _, so, _ in errs]
    for rank in (0, 1):
        c.ok(res[rank]["all"]["worker"] == "worker_%d" % rank, "ddp: rank %d is worker_%d" %
             (rank, rank), res[rank]["all"]["worker"])
    workers = ("worker_0", "worker_1")
    o = None
    for rank in (0, 1):
        o = check_trial(c, "ddp all: worker_%d" % rank, outs[0], res[rank]["all"]["steps"],
                        workers=workers, worker="worker_%d" % rank)
    if o is not None:
        c.ok(o.get("num_workers") == 2, "ddp all: num_workers 2", str(o.get("num_workers")))
    for w in workers:
        f = collections_file(outs[0], w)
        c.ok(f.get("_meta", {}).get("num_workers") == 2, "ddp all: %s collections file says "
             "num_workers 2" % w, str(f.get("_meta")))
    g0, g1 = (res[r]["all"]["steps"]["0"]["tensors"]["gradient/DistributedDataParallel_module."
                                                     "layer1.fc.weight"]["sha256"] for r in (0, 1))
    c.ok(g0 == g1, "ddp all: the ranks' all-reduced gradients are the same bits")
    l0, l1 = (res[r]["all"]["steps"]["0"]["tensors"]["CrossEntropyLoss_output_0"]["sha256"]
              for r in (0, 1))
    c.ok(l0 != l1, "ddp all: each rank saved its own loss (own batch)")
    check_trial(c, "ddp one", outs[1], res[0]["one"]["steps"], workers=("worker_0",))
    c.ok(not os.path.exists(os.path.join(outs[1], "collections", "000000000",
                                         "worker_1_collections.json")),
         "ddp one: worker_1 writes nothing")


def check_json_config(c, tmp, res):
    """Hook.create_from_json_file: weights and losses every 3rd TRAIN step,
    relu_output every 2nd, everything at every EVAL step."""
    truth = res["json"]["steps"]
    steps = {}
    for s, v in truth.items():
        ms, mode = v["mode_step"], v["mode"]
        keep = {}
        for name, t in v["tensors"].items():
            if re.search(RELU_RX, name):
                due = mode == "EVAL" or ms % 2 == 0
            elif re.search(DEFAULT_REGEX["weights"][0], name) or name.endswith("Loss_output_0"):
                due = mode == "EVAL" or ms % 3 == 0
            else:
                due = False  # biases and gradients were not asked for
            if due:
                keep[name] = t
        if keep:
            steps[s] = dict(v, tensors=keep)
    out = os.path.join(tmp, "json")
    check_trial(c, "json config", out, steps)
    f = collections_file(out)
    colls = f.get("collections", {})
    rc = colls.get("relu_output", {})
    c.ok(rc.get("include_regex") == [RELU_RX], "json config: relu_output regex", str(rc)[:300])
    c.ok((rc.get("save_config") or {}).get("TRAIN", {}).get("save_interval") == 2 and
         (rc.get("save_config") or {}).get("EVAL", {}).get("save_interval") == 1,
         "json config: relu_output's save config (train 2, eval 1)", str(rc.get("save_config")))
    w = colls.get("weights", {})
    c.ok((w.get("save_config") or {}).get("TRAIN", {}).get("save_interval") == 3,
         "json config: weights every 3rd TRAIN step", str(w.get("save_config")))


def check_errors(c, tmp, existing):
    rc, so, se = pylib.run_py(ERRORS, [existing, os.path.join(tmp, "fresh"), tmp])
    if not c.ok(rc == 0, "refusals: script runs", se[-1500:]):
        return
    res = json.loads(so)
    want = {"finished_trial": ("HookError", "holds a finished trial"),
            "existing_trial": ("HookError", "already holds a trial with steps of worker_0"),
            "compiled": ("HookError", "torch.compile"),
            "s3": ("ValueError", "local folders only"),
            "workers": ("ValueError", "include_workers"),
            "mode": ("ValueError", "Invalid mode"),
            "interval": ("ValueError", "save_interval"),
            "reduction": ("ValueError", "median"),
            "regex": ("ValueError", "bad regex"),
            "twice": ("HookError", "registered twice")}
    c.ok(res.get("write_failure") == "no error", "write failure: training goes on",
         res.get("write_failure", ""))
    c.ok("saves nothing more, training goes on" in se, "write failure: said on stderr",
         se[-600:])
    c.ok(res.get("blocked_end_marker") is True, "write failure: end marker still written")
    for k, (etype, words) in want.items():
        got = res.get(k, "missing")
        c.ok(got.startswith(etype + ":") and words in got, "refusals: %s -> %s (%s)" %
             (k, etype, words), got)


def check_hooks(c0, res):
    """What the hook leaves on the modules: after the first saving step a
    submodule none of whose outputs or inputs a collection matches has no
    forward hook (the ReLUs keep theirs: relu_activations; each also has
    the truth's), unless save_tensor was used (healthy_cnn: its collections
    may come later); and the parameters are not found again at each step
    by walking the model (named_parameters)."""
    c = c0.scope("hooks on modules")
    mlp = {"top": 1, "layer1": 0, "layer1.fc": 0, "layer1.relu": 2, "layer2": 0,
           "layer2.fc": 0, "layer2.relu": 2, "out": 0}
    for name in ("healthy_mlp", "reduced", "deadrelu"):
        c.eq("%s: forward hooks left on the modules" % name, res[name].get("forward_hooks"), mlp)
    cnn = {"top": 1, "block1": 1, "block1.conv": 1, "block1.relu": 2, "block1.pool": 1,
           "block2": 1, "block2.conv": 1, "block2.relu": 2, "block2.pool": 1, "head": 1}
    c.eq("healthy_cnn (save_tensor): every module keeps its forward hook",
         res["healthy_cnn"].get("forward_hooks"), cnn)
    for name in ("healthy_mlp", "healthy_cnn", "reduced"):
        c.eq("%s: the hook's named_parameters() walks during training" % name,
             res[name].get("hook_walks"), 0)


REPLACED = r"""
import json, sys, torch, torch.nn as nn
import smrules.torch as smd
from smrules.trials import create_trial
torch.manual_seed(3)
model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
hook = smd.Hook(out_dir=sys.argv[1], save_config=smd.SaveConfig(save_interval=1),
                include_collections=["weights", "losses"])
hook.register_module(model)
x = torch.randn(5, 4)
want = {}
for step in range(3):
    if step == 2:  # a parameter replaced between steps
        model[2].weight = nn.Parameter(torch.full((2, 3), 7.5))
    want[step] = model[2].weight.detach().clone()
    model(x).sum().backward()
hook.close()
t = create_trial(sys.argv[1])
got = {s: t.tensor("Sequential_2.weight").value(s) for s in range(3)}
print(json.dumps({"equal": [bool((got[s] == want[s].numpy()).all()) for s in range(3)]}))
"""


def check_replaced_parameter(c0, tmp):
    """The parameters are found once, at registration; one replaced later
    (module.weight = nn.Parameter(...)) is saved as it is from then on."""
    c = c0.scope("hooks on modules")
    rc, so, se = pylib.run_py(REPLACED, [os.path.join(tmp, "replaced")])
    if c.ok(rc == 0, "replaced parameter: script runs", se[-2000:]):
        c.eq("replaced parameter: the saved weight at steps 0-2 is the module's",
             json.loads(so).get("equal"), [True, True, True])


ODD = r"""
import json, sys, torch, torch.nn as nn
import smrules.torch as smd
from smrules.trials import create_trial
torch.manual_seed(4)
class T(nn.Module):  # a view: not contiguous
    def forward(self, x):
        self.last = x.detach().t().clone()
        return x.t()
class B(nn.Module):  # a dtype NumPy has not
    def forward(self, x):
        return x.to(torch.bfloat16)
model = nn.Sequential(nn.Linear(4, 3), T(), B())
hook = smd.Hook(out_dir=sys.argv[1], save_config=smd.SaveConfig(save_interval=1), save_all=True)
hook.register_module(model)
want = {}
for step in range(3):  # from step 1 the copies land in reused buffers
    out = model(torch.randn(5, 4))
    want[step] = (model[1].last.numpy(), out.detach().float().numpy().copy())
hook.close()
t = create_trial(sys.argv[1])
res = {}
for s in range(3):
    wt, wb = want[s]
    transposed = t.tensor("1_output_0").value(s)
    bf = t.tensor("2_output_0").value(s)
    res[s] = [list(transposed.shape) == [3, 5], bool((transposed == wt).all()),
              list(bf.shape) == [3, 5], bool((bf.astype("float32") == wb).all())]
print(json.dumps({"equal": [res[s] for s in range(3)]}))
"""


def check_odd_tensors(c0, tmp):
    """Outputs saved whole that are not a contiguous CPU array NumPy can
    view (a transposed view; bfloat16, saved as float32): their values, at
    the first step (new buffers) and later ones (reused buffers)."""
    c = c0.scope("hooks on modules")
    rc, so, se = pylib.run_py(ODD, [os.path.join(tmp, "odd")])
    if c.ok(rc == 0, "non-contiguous and bfloat16 outputs: script runs", se[-2000:]):
        c.eq("non-contiguous and bfloat16 outputs: shapes and values at steps 0-2",
             json.loads(so).get("equal"), [[True] * 4] * 3)

COPIES = r"""
import json, sys, torch
from smrules.torch.writer_thread import WriterThread
from smrules.trials import create_trial
torch.manual_seed(5)
out = sys.argv[1]
# bound 0: each batch (one tensor) is queued once the one before is
# written, so a step's copies find the buffers of the step before written
w = WriterThread(out, "worker_0", 0)
res = {"begun": [], "reused": [], "want": {}}
def values(step):
    # no two tensors of a step have the same size: which buffer the second
    # would get would depend on whether the writer has written the first
    big = torch.nn.Parameter(torch.randn(300, 200) if step != 1 else torch.randn(100, 50))
    big.grad = torch.randn(big.shape)
    return {"big": big,  # 240 KB (streamed), another size at step 1
            "grad": torch.randn(301, 200) if step != 1 else torch.randn(101, 50),
            "small": torch.randn(5),
            "ints": torch.arange(10, dtype=torch.int64) * step,
            "flags": torch.arange(6) % (step + 2) == 0,
            "transposed": torch.randn(4, 6).t(),  # not contiguous
            "bf16": torch.randn(3, 3).to(torch.bfloat16),  # NumPy has no bfloat16
            "empty": torch.zeros(0, 3),
            "none": None}
for step in range(3):
    v = values(step)
    # nothing to save: the step's begin is not used
    res["begun"].append(w.put_raws(["none", "empty"], [None, v["empty"]], 1000.0 + step,
                                   ("begin", step, 1, step)))
    names = list(v)
    res["begun"].append(w.put_raws(names, [v[k] for k in names], 1000.0 + step,
                                   ("begin", step, 1, step)))
    res["want"][step] = {k: (t.detach().float() if t.dtype == torch.bfloat16 else t.detach())
                         .clone().numpy().tolist() for k, t in v.items()
                         if t is not None and t.numel()}
    with torch.no_grad():  # training changes them in place right after
        for k in ("big", "grad", "small", "transposed"):
            v[k].mul_(-3).add_(1)
    w.put(("end",))
    res["reused"].append(w.reused)
w.close()
t = create_trial(out)
res["steps"] = t.steps()
res["names"] = sorted(t.tensor_names())
res["got"] = {s: {k: t.tensor(k).value(s).tolist() for k in res["want"][s]} for s in range(3)}
res["dtypes"] = {k: str(t.tensor(k).value(0).dtype) for k in res["want"][0]}
# WriteQueue.copy_tensors itself: the limit, and an error leaves nothing
from smrules import _core
q = _core.WriteQueue(out + "_q", "worker_0", 1 << 20)
ops, tokens = [], []
a, b = torch.randn(4), torch.randn(8)
res["limited"] = list(q.copy_tensors(["a", "b"], [a, b], 0, 1.0, ops, tokens, 1, None, None))
res["limited_ops"] = [op[1] for op in ops]
def refuse(v):
    raise RuntimeError("refused")
def attempt(key, fn):
    try:
        fn()
        res[key] = "no error"
    except Exception as e:
        res[key] = type(e).__name__
attempt("fallback_error", lambda: q.copy_tensors(["c", "d"], [a, a.view(2, 2).t()], 0, 1.0, ops,
                                                 tokens, 1 << 20, refuse, ("begin", 0, 1, 0)))
attempt("not_a_tensor", lambda: q.copy_tensors(["c", "d"], [a, 3], 0, 1.0, ops, tokens, 1 << 20,
                                               refuse, None))
attempt("lengths", lambda: q.copy_tensors(["c"], [a, b], 0, 1.0, ops, tokens, 1 << 20, refuse,
                                          None))
res["after_errors"] = [op[1] for op in ops] + tokens
ops.clear()
q.close()
attempt("closed", lambda: q.copy_tensors(["a"], [a], 0, 1.0, ops, tokens, 1 << 20, refuse, None))
print(json.dumps(res))
"""


def check_copy_tensors(c0, tmp):
    """WriterThread.put_raws -> WriteQueue.copy_tensors, the training
    thread's copies of a step's tensors in one C call: every value as it
    was when given (the sources changed in place right after), whatever
    its kind (a 240 KB parameter and its gradient, small, int64, bool, a
    non-contiguous view and bfloat16 through torch's copy, saved as
    float32), None and empty ones skipped, the step's begin put only when
    something is saved; buffers written at one step reused at the next,
    a tensor whose size changed getting a new one and its old buffer back
    at the step after; copy_tensors stopping at the batch limit, and an
    error leaving nothing of the call behind."""
    c = c0.scope("copy_tensors")
    rc, so, se = pylib.run_py(COPIES, [os.path.join(tmp, "copies")])
    if not c.ok(rc == 0, "script runs", se[-2000:]):
        return
    res = json.loads(so)
    saved = ["bf16", "big", "flags", "grad", "ints", "small", "transposed"]
    c.eq("steps", res["steps"], [0, 1, 2])
    c.eq("names saved (None and empty skipped)", res["names"], saved)
    for s in ("0", "1", "2"):
        c.ok(res["got"][s] == res["want"][s], "step %s: values as given, bitwise" % s,
             "differ: %s" % [k for k in saved if res["got"][s].get(k) != res["want"][s].get(k)])
    c.eq("dtypes (bfloat16 as float32)", res["dtypes"], {
        "bf16": "float32", "big": "float32", "flags": "bool", "grad": "float32",
        "ints": "int64", "small": "float32", "transposed": "float32"})
    c.eq("begin used only with something saved", res["begun"], [False, True] * 3)
    # step 1: 5 buffers of step 0 reused (small, ints, flags in C; the
    # transposed and bfloat16 copies in torch's pool), big and grad of
    # another size new; step 2: all 7, big and grad's from step 0
    c.eq("buffers reused", res["reused"], [0, 5, 12])
    c.eq("limit: stops after the tensor reaching it", res["limited"], [1, 16, False])
    c.eq("... its operation appended", res["limited_ops"], ["a"])
    c.eq("errors raise", [res.get(k) for k in ("fallback_error", "not_a_tensor", "lengths")],
         ["RuntimeError", "AttributeError", "ValueError"])
    c.eq("... and leave nothing of the call", res["after_errors"], ["a"])
    c.eq("closed queue: refused", res["closed"], "ValueError")


def main():
    c = pylib.torch_checker("test_torch_hook")
    tmp = tempfile.mkdtemp(prefix="smr-torch-")
    try:
        live = start_live(tmp)
        ddp = start_ddp(tmp)
        specs = [spec("healthy_mlp", tmp),
                 spec("healthy_cnn", tmp, model="cnn", train_steps=4,
                      intervals={"TRAIN": 3, "EVAL": 2}, scalars=True, custom=True,
                      collections=["weights", "biases", "gradients", "losses",
                                   "relu_activations", "labels"], close=False),
                 spec("exploding", tmp, epochs=1, train_steps=20, eval_steps=0,
                      intervals={"TRAIN": 1, "EVAL": 1}, queue_mb=0),
                 spec("deadrelu", tmp, epochs=1, train_steps=4, eval_steps=0,
                      intervals={"TRAIN": 1, "EVAL": 1}),
                 spec("stalled", tmp, epochs=1, train_steps=12, eval_steps=0,
                      intervals={"TRAIN": 1, "EVAL": 1}),
                 spec("json", tmp, epochs=1, train_steps=7, eval_steps=2,
                      intervals={"TRAIN": 1, "EVAL": 1}, json_config=hook_json(tmp)),
                 spec("dry", tmp, epochs=1, train_steps=2, eval_steps=1, dry_run=True),
                 spec("reduced", tmp, epochs=1, train_steps=3, eval_steps=1,
                      intervals={"TRAIN": 2, "EVAL": 1}, functional=True,
                      collections=["weights", "biases", "gradients", "losses",
                                   "relu_activations"],
                      reduction={"reductions": ["mean", "max", "std"], "abs_norms": ["l2"]})]
        path = os.path.join(tmp, "spec.json")
        with open(path, "w") as f:
            json.dump(specs, f)
        rc, so, se = pylib.run_py(TRAIN, ["offline", path])
        if c.ok(rc == 0, "offline trainings run", se[-2000:]):
            res = json.loads(so)
            for name, r in res.items():
                c.ok("error" not in r, "training %s" % name, r.get("error", ""))
            outs = {s["name"]: s["out"] for s in specs}
            regex = dict(DEFAULT_REGEX, relu_activations=[RELU_RX])
            check_trial(c, "healthy MLP", outs["healthy_mlp"], res["healthy_mlp"]["steps"],
                        collections=regex)
            check_trial(c, "healthy CNN (closed by the exit)", outs["healthy_cnn"],
                        res["healthy_cnn"]["steps"],
                        collections=dict(regex, labels=["^labels$"]))
            check_trial(c, "exploding", outs["exploding"], res["exploding"]["steps"])
            check_trial(c, "dead ReLU", outs["deadrelu"], res["deadrelu"]["steps"])
            check_trial(c, "stalled", outs["stalled"], res["stalled"]["steps"])
            check_json_config(c, tmp, res)
            check_trial(c, "reductions and record_tensor_value", outs["reduced"],
                        res["reduced"]["steps"])
            f = collections_file(outs["healthy_mlp"])
            sc = c.scope("collections file")
            colls = f.get("collections", {})
            sc.eq("collection names", sorted(colls), sorted(list(DEFAULT_REGEX) +
                                                            ["relu_activations"]))
            for name, rx in DEFAULT_REGEX.items():
                sc.eq("%s regex" % name, (colls.get(name) or {}).get("include_regex"), rx)
            sc.eq("save config of weights", (colls.get("weights") or {}).get("save_config"), {
                "TRAIN": {"save_interval": 2, "save_steps": [], "start_step": 0, "end_step": None},
                "EVAL": {"save_interval": 1, "save_steps": [], "start_step": 0, "end_step": None},
                "PREDICT": {"save_interval": 500, "save_steps": [], "start_step": 0,
                            "end_step": None},
                "GLOBAL": {"save_interval": 500, "save_steps": [], "start_step": 0,
                           "end_step": None}})
            sc.eq("reduction config of losses", (colls.get("losses") or {}).get(
                "reduction_config"), {"save_raw_tensor": True, "reductions": "",
                                      "save_shape": False})
            sc.eq("num_workers", f.get("_meta"), {"num_workers": 1})
            dry = outs["dry"]
            c.ok(not os.path.exists(dry) or not any(files for _, _, files in os.walk(dry)),
                 "dry_run writes nothing")
            ex = res["exploding"]
            c.ok(0 < ex["queue_peak"] <= 24 * 16 * 4 + 64 * 24 * 4,
                 "queue bound 0 MB: at most one tensor queued at a time",
                 "peak %s bytes" % ex["queue_peak"])
            # a saving step copies into the buffers earlier steps were
            # written from (the values, checked bitwise above, stay right).
            # Checked where it cannot depend on the writer thread's speed:
            # with a queue bound of 0 each tensor's flush waits until the
            # one before is written, so from the second saving step on
            # every copy finds the buffer its tensor was written from the
            # step before (elsewhere a slow writer may not have finished
            # any batch when a short run ends: reuse 0 is then right)
            c.ok(ex["buffers_reused"] > 0, "exploding (queue bound 0): copies reuse written "
                 "buffers", "reused %s" % ex["buffers_reused"])
            check_hooks(c, res)
            check_replaced_parameter(c, tmp)
            check_odd_tensors(c, tmp)
            check_copy_tensors(c, tmp)
            check_rules(c, tmp, outs)
            check_errors(c, tmp, outs["stalled"])
        check_live(c, *live)
        check_ddp(c, *ddp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
