#!/usr/bin/python3
"""The hook against smdebug itself, where smdebug can be imported (it is
not part of the suite: no Debian package, and tests must not need it;
docs/python.md, "Checked against smdebug", says how it was run here).

    SMDEBUG_PYTHONPATH=<folders holding smdebug and what it imports> \
        /usr/bin/python3 tests/cli/smdebug_crosscheck.py

The same training runs twice, from the same seed: once with smdebug's own
PyTorch hook, once with smrules.torch.Hook (an MLP and a ReLU CNN; TRAIN
then EVAL steps, two epochs; save_interval 2; the default collections
plus relu_output, then save_all).  Then:
- smdebug's create_trial reads both trials: the same tensor names, steps,
  steps per mode, collections and their tensors, and every value bitwise
  (dtype, shape, bytes);
- smrules' own trial API reads the hook's trial and sees what smdebug's
  reader sees there.
Ends with the suite's tally line, "N passed, N failed"."""

import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.environ.get("SMRULES_PYTHONPATH") or os.path.join(ROOT, "build", "python"))
if not os.environ.get("SMDEBUG_PYTHONPATH"):
    sys.exit("smdebug_crosscheck: set SMDEBUG_PYTHONPATH to the folders smdebug imports from")
sys.path[1:1] = [os.path.abspath(p) for p in os.environ["SMDEBUG_PYTHONPATH"].split(":") if p]
os.environ.setdefault("SMDEBUG_LOG_LEVEL", "error")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import smdebug  # noqa: E402
import smdebug.pytorch as theirs  # noqa: E402
from smdebug import modes as dm  # noqa: E402
from smdebug.trials import create_trial as smdebug_trial  # noqa: E402
import smrules.torch as ours  # noqa: E402
from smrules.modes import ModeKeys  # noqa: E402
from smrules.trials import create_trial as smrules_trial  # noqa: E402

MODES = ((dm.TRAIN, ModeKeys.TRAIN), (dm.EVAL, ModeKeys.EVAL))
passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL %s: %s" % (what, detail))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(4 * 6 * 6, 3)

    def forward(self, x):
        return self.fc(self.relu(self.conv(x)).flatten(1))


def train(lib, kind, save_all, tmp):
    """Two epochs of 5 TRAIN and 3 EVAL steps with lib's Hook; its trial."""
    torch.manual_seed(0)
    out = os.path.join(tmp, "%s-%s-%s" % (lib.__name__.split(".")[0], kind, save_all))
    m = CNN() if kind == "cnn" else nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    x = torch.randn(5, 1, 8, 8) if kind == "cnn" else torch.randn(5, 8)
    y = torch.randint(0, 3, (5,))
    colls = None if save_all else ["weights", "biases", "gradients", "losses", "relu_output"]
    hook = lib.Hook(out_dir=out, save_config=lib.SaveConfig(save_interval=2), save_all=save_all,
                    include_collections=colls)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_module(m)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for _ in range(2):
        hook.set_mode(lib.modes.TRAIN)
        for _ in range(5):
            opt.zero_grad()
            loss_fn(m(x), y).backward()
            opt.step()
        hook.set_mode(lib.modes.EVAL)
        with torch.no_grad():
            for _ in range(3):
                loss_fn(m(x), y)
    hook.close()
    return out


def same_value(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def compare_readers(label, path):
    """smdebug's reader and smrules' on one trial (the hook's)."""
    a, b = smdebug_trial(path), smrules_trial(path)
    names = sorted(a.tensor_names())
    check(names == sorted(b.tensor_names()), label + ": tensor names", names)
    check(a.steps() == b.steps(), label + ": steps", (a.steps(), b.steps()))
    for md, mk in MODES:
        check(a.steps(mode=md) == b.steps(mode=mk), "%s: %s steps" % (label, md.name))
    check({c: sorted(a.collection(c).tensor_names) for c in a.collections()} ==
          {c: sorted(b.collection(c).tensor_names) for c in b.collections()},
          label + ": collections")
    for n in names:
        for s in a.tensor(n).steps():
            check(same_value(a.tensor(n).value(s), b.tensor(n).value(s)),
                  "%s: %s at step %d" % (label, n, s))


def compare_trials(label, theirs_path, ours_path):
    """smdebug's hook's trial and this hook's, both read by smdebug."""
    a, b = smdebug_trial(theirs_path), smdebug_trial(ours_path)
    names = sorted(a.tensor_names())
    check(names == sorted(b.tensor_names()), label + ": tensor names",
          sorted(set(names) ^ set(b.tensor_names())))
    for kw in ({},) + tuple({"mode": md} for md, _ in MODES):
        check(a.steps(**kw) == b.steps(**kw), "%s: steps %s" % (label, kw))
    check({c: sorted(a.collection(c).tensor_names) for c in a.collections()} ==
          {c: sorted(b.collection(c).tensor_names) for c in b.collections()},
          label + ": collections")
    for n in names:
        ta, tb = a.tensor(n), b.tensor(n)
        for md, _ in MODES:
            check(ta.steps(mode=md) == tb.steps(mode=md), "%s: %s's %s steps" % (label, n, md.name))
        for s in ta.steps():
            check(same_value(ta.value(s), tb.value(s)), "%s: %s at step %d" % (label, n, s))


def main():
    torch.set_num_threads(1)
    print("smdebug %s, torch %s" % (smdebug.__version__, torch.__version__))
    with tempfile.TemporaryDirectory(prefix="smdebug-crosscheck.") as tmp:
        for kind in ("mlp", "cnn"):
            for save_all in (False, True):
                label = "%s%s" % (kind, ", save_all" if save_all else "")
                theirs_path = train(theirs, kind, save_all, tmp)
                ours_path = train(ours, kind, save_all, tmp)
                compare_trials(label + ", smdebug's hook vs this one", theirs_path, ours_path)
                compare_readers(label + ", this hook's trial, smdebug's reader vs smrules'",
                                ours_path)
    print("smdebug_crosscheck: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
