#!/usr/bin/python3
"""Real PyTorch training loops instrumented with smrules.torch.Hook, for
test_torch_hook.py (run with Debian's /usr/bin/python3 and the package on
PYTHONPATH).  Beside the hook, each loop records what PyTorch itself says
each saved tensor was -- the sha256 of its bytes, its shape and dtype --
from the PyTorch API (parameters before the forward pass, param.grad after
backward, the loss tensor, ReLU outputs through forward hooks of its own),
with steps and mode steps counted by the loop, not by the hook.  The test
compares the trial with that record.

    torch_train.py offline SPEC.json    several trainings, one per spec entry
    torch_train.py live OUT             a stalled run that goes on until stopped
    torch_train.py ddp RANK WORLD INIT OUT_ALL OUT_ONE    torch.distributed (gloo)
"""

import hashlib
import json
import os
import sys

import torch
import torch.nn as nn

import smrules.torch as smd

torch.set_num_threads(1)


def sha(t):
    a = t.detach().cpu().contiguous().numpy()
    return {"sha256": hashlib.sha256(a.tobytes()).hexdigest(), "shape": list(a.shape),
            "dtype": str(a.dtype)}


# ---------------------------------------------------------------- models

class Block(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.fc(x))


class SmallMLP(nn.Module):
    def __init__(self, n_in=16, hidden=(24, 12), n_out=4):
        super().__init__()
        self.layer1 = Block(n_in, hidden[0])
        self.layer2 = Block(hidden[0], hidden[1])
        self.out = nn.Linear(hidden[1], n_out)

    def forward(self, x):
        return self.out(self.layer2(self.layer1(x)))


class ConvBlock(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool(self.relu(self.conv(x)))


class SmallCNN(nn.Module):
    def __init__(self, n_out=4):
        super().__init__()
        self.block1 = ConvBlock(1, 4)
        self.block2 = ConvBlock(4, 8)
        self.head = nn.Linear(8 * 2 * 2, n_out)

    def forward(self, x):
        return self.head(torch.flatten(self.block2(self.block1(x)), 1))


def make_data(kind, n, seed):
    g = torch.Generator().manual_seed(seed)
    if kind == "cnn":
        x = torch.randn(n, 1, 8, 8, generator=g)
        w = torch.randn(64, 4, generator=g)
        y = torch.argmax(x.flatten(1) @ w, dim=1)
    else:
        x = torch.randn(n, 16, generator=g)
        w = torch.randn(16, 4, generator=g)
        y = torch.argmax(x @ w, dim=1)
    return x, y


# ---------------------------------------------------------------- truth

def reduce(t, red, abs_):
    """smdebug's PyTorch reductions (smdebug/pytorch/utils.py)."""
    t = t.detach()
    if abs_:
        t = torch.abs(t)
    if red in ("l1", "l2"):
        return torch.norm(t, p=int(red[1]))
    return torch.var(t) if red == "variance" else getattr(torch, red)(t)


class Truth:
    """What PyTorch says, per step the loop expects to be saved.  With
    `reductions` ([(name, abs)]), the tensors of non-loss collections are
    recorded as their reductions (value and bytes) instead."""

    def __init__(self, model, prefix, relu_regex_names, reductions=None):
        self.model, self.prefix = model, prefix
        self.reductions = reductions
        self.steps = {}
        self.cur = None
        names = dict(model.named_modules())
        for path in relu_regex_names:
            names[path].register_forward_hook(self._relu_hook(path + "_output_0"))

    def _relu_hook(self, name):
        def f(module, inputs, output):
            if self.cur is not None:
                self._rec(name, output)
        return f

    def _rec(self, name, t):
        if not self.reductions:
            self.cur["tensors"][name] = sha(t)
            return
        for red, abs_ in self.reductions:
            v = reduce(t, red, abs_)
            self.cur.setdefault("reductions", {})["%s|%s|%d" % (name, red, abs_)] = v.item()
        self.cur["tensors"][name] = None  # listed under its own name, no value

    def begin(self, step, mode, mode_step, due):
        self.cur = None
        if due:
            self.cur = self.steps.setdefault(step, {"mode": mode, "mode_step": mode_step,
                                                    "tensors": {}})
            for n, p in self.model.named_parameters():
                self._rec(self.prefix + n, p)

    def loss(self, name, loss):
        if self.cur is not None:
            self.cur["tensors"][name] = sha(loss)

    def grads(self):
        if self.cur is not None:
            for n, p in self.model.named_parameters():
                self._rec("gradient/" + self.prefix + n, p.grad)

    def always(self, step, mode, mode_step, name, value):
        """A tensor saved at every step (save_scalar)."""
        s = self.steps.setdefault(step, {"mode": mode, "mode_step": mode_step, "tensors": {}})
        s["tensors"][name] = sha(value)

    def custom(self, name, value):
        if self.cur is not None:
            self.cur["tensors"][name] = sha(value)


# ---------------------------------------------------------------- one run

def count_hook_walks(model):
    """How often the hook's own code calls model.named_parameters() (the
    truth's calls are not counted)."""
    calls = [0]
    orig = model.named_parameters

    def counted(*a, **kw):
        if os.path.join("smrules", "torch", "") in sys._getframe(1).f_code.co_filename:
            calls[0] += 1
        return orig(*a, **kw)
    model.named_parameters = counted
    return calls


def run(spec):
    """One training run.  spec: out, model (mlp|cnn), scenario (healthy,
    exploding, deadrelu, stalled), epochs, train_steps, eval_steps,
    intervals {TRAIN: n, EVAL: n}, close (bool), scalars, custom."""
    torch.manual_seed(spec.get("seed", 1))
    kind, scenario = spec["model"], spec["scenario"]
    model = SmallCNN() if kind == "cnn" else SmallMLP()
    if scenario == "deadrelu":
        with torch.no_grad():
            for blk in (model.layer1, model.layer2):
                n = blk.fc.bias.numel()
                blk.fc.bias[: int(n * 0.85)] = -8.0
                blk.fc.weight.mul_(0.1)
    if scenario == "exploding":
        loss_fn = nn.MSELoss()
        lr = 10.0  # with targets of 1000: inf by step 15, then NaN
    else:
        loss_fn = nn.CrossEntropyLoss()
        lr = 0.0 if scenario == "stalled" else 0.1
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = make_data(kind, 64, spec.get("seed", 1))
    xe, ye = make_data(kind, 32, spec.get("seed", 1) + 100)
    if scenario == "exploding":
        y = torch.nn.functional.one_hot(y, 4).float() * 1000.0
        ye = torch.nn.functional.one_hot(ye, 4).float() * 1000.0
    iv = spec["intervals"]
    if "queue_mb" in spec:
        os.environ["SMRULES_HOOK_QUEUE_MB"] = str(spec["queue_mb"])
    reductions = None
    if spec.get("json_config"):
        hook = smd.Hook.create_from_json_file(spec["json_config"])
    else:
        rc = None
        if spec.get("reduction"):
            rc = smd.ReductionConfig(**spec["reduction"])
            reductions = [(r, False) for r in rc.reductions + rc.norms] + \
                [(r, True) for r in rc.abs_reductions + rc.abs_norms]
        hook = smd.Hook(out_dir=spec["out"], save_config=smd.SaveConfig(mode_save_configs={
            smd.modes.TRAIN: smd.SaveConfigMode(save_interval=iv["TRAIN"]),
            smd.modes.EVAL: smd.SaveConfigMode(save_interval=iv["EVAL"])}),
            include_collections=spec.get("collections",
                                         ["weights", "biases", "gradients", "losses",
                                          "relu_activations"]),
            dry_run=spec.get("dry_run", False), reduction_config=rc)
        hook.get_collection("relu_activations").include(".*relu_output")
    os.environ.pop("SMRULES_HOOK_QUEUE_MB", None)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    walks = count_hook_walks(model)
    relus = [n for n, m in model.named_modules() if isinstance(m, nn.ReLU)]
    truth = Truth(model, type(model).__name__ + "_", relus, reductions)
    loss_name = type(loss_fn).__name__ + "_output_0"
    g, ms = -1, {"TRAIN": -1, "EVAL": -1}
    for epoch in range(spec["epochs"]):
        hook.set_mode(smd.modes.TRAIN)
        model.train()
        for i in range(spec["train_steps"]):
            g += 1
            ms["TRAIN"] += 1
            truth.begin(g, "TRAIN", ms["TRAIN"], ms["TRAIN"] % iv["TRAIN"] == 0)
            opt.zero_grad(set_to_none=True)
            out = model(x)
            if spec.get("functional"):  # a second, functional loss
                hook.record_tensor_value("l1_loss", torch.nn.functional.l1_loss(out, out * 0))
                truth.custom("l1_loss_output_0", torch.nn.functional.l1_loss(out, out * 0))
            loss = loss_fn(out, y)
            if spec.get("custom"):
                hook.save_tensor("labels", y, "labels")
                truth.custom("labels", y)
            loss.backward()
            truth.loss(loss_name, loss)
            truth.grads()
            opt.step()
            if spec.get("scalars"):
                hook.save_scalar("lr", lr)
                truth.always(g, "TRAIN", ms["TRAIN"], "scalar/lr", torch.tensor([lr],
                                                                                 dtype=torch.float64))
        hook.set_mode(smd.modes.EVAL)
        model.eval()
        with torch.no_grad():
            for i in range(spec["eval_steps"]):
                g += 1
                ms["EVAL"] += 1
                truth.begin(g, "EVAL", ms["EVAL"], ms["EVAL"] % iv["EVAL"] == 0)
                loss = loss_fn(model(xe), ye)
                truth.loss(loss_name, loss)
    # forward hooks per module while the hook is attached (the truth's own
    # on the ReLUs included)
    hooks = {n or "top": len(m._forward_hooks) for n, m in model.named_modules()}
    if spec.get("close", True):
        hook.close()
    # else: the interpreter's exit closes the trial
    return {"steps": truth.steps, "queue_peak": hook._writer.peak_bytes if hook._writer else 0,
            "forward_hooks": hooks, "hook_walks": walks[0],
            "queue_bound": hook._queue_bytes,
            "buffers_reused": hook._writer.reused if hook._writer else 0}


def offline(spec_path):
    with open(spec_path) as f:
        specs = json.load(f)
    results = {}
    for spec in specs:
        try:
            results[spec["name"]] = run(spec)
        except Exception as e:
            results[spec["name"]] = {"error": "%s: %s" % (type(e).__name__, e)}
    print(json.dumps(results))


# ---------------------------------------------------------------- live

def live(out):
    """A stalled loss (learning rate 0) that trains until it is stopped;
    prints each step's number after the step's optimizer update."""
    torch.manual_seed(3)
    model = SmallMLP()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    x, y = make_data("mlp", 64, 3)
    hook = smd.Hook(out_dir=out, save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "gradients", "losses"])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    print("pid %d" % os.getpid(), flush=True)
    for step in range(100000):  # a bound, not a duration: StopTraining ends it
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
    print("never stopped", flush=True)


# ---------------------------------------------------------------- ddp

def ddp(rank, world, init, out_all, out_one):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    results = {}
    for out, workers in ((out_all, "all"), (out_one, "one")):
        torch.manual_seed(5)
        model = DDP(SmallMLP())
        loss_fn = nn.CrossEntropyLoss()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = make_data("mlp", 32, 10 + rank)  # each rank its own batch
        hook = smd.Hook(out_dir=out, save_config=smd.SaveConfig(save_interval=2),
                        include_collections=["weights", "biases", "gradients", "losses"],
                        include_workers=workers)
        hook.register_module(model)
        hook.register_loss(loss_fn)
        truth = Truth(model, "DistributedDataParallel_", [])
        hook.set_mode(smd.modes.TRAIN)
        for step in range(5):
            truth.begin(step, "TRAIN", step, step % 2 == 0)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            truth.loss("CrossEntropyLoss_output_0", loss)
            truth.grads()
            opt.step()
        hook.close()
        dist.barrier()
        results[workers] = {"steps": truth.steps, "worker": hook.worker}
    dist.destroy_process_group()
    print(json.dumps(results))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "offline":
        offline(sys.argv[2])
    elif cmd == "live":
        live(sys.argv[2])
    elif cmd == "ddp":
        ddp(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6])
    else:
        sys.exit("unknown command " + cmd)
