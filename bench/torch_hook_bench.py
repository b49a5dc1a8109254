#!/usr/bin/python3
"""bench/torch_hook_bench.py - what smrules.torch.Hook costs a training
step (targets: < 5 % at save_interval 100; at save_interval 1, less than
writing the saved bytes plus 20 %).

A small CPU model (MLP 256-512-512-10, batch 64, SGD, one torch thread)
trains in rounds; each round runs every configuration for HOOK_STEPS steps
in turn (interleaved, so that the machine's load falls on all alike; the
order changes from round to round so that each configuration follows each
other one equally often, see ORDERS):
  none      no hook
  every100  Hook, weights/biases/gradients/losses, save_interval 100
  every1    the same, save_interval 1
  rawwrite  no hook; each step writes the bytes every1 saves to a file
            with numpy's tofile (the baseline: writing those bytes)
The per-configuration step time is the median over the rounds of each
round's mean; what a configuration adds to a step is the median over the
rounds of its difference from the same round's run with no hook (paired,
as the load of other work drifts from round to round).  The CPU time of
the process per step (both threads) is given the same way: on a busy
machine it says more than wall time.  Run by bench/run.sh with PYTHONPATH=BUILD/python; on its
own: PYTHONPATH=build/python /usr/bin/python3 bench/torch_hook_bench.py."""

import os
import shutil
import statistics
import sys
import tempfile
import time

try:
    import torch
    import torch.nn as nn
except ImportError:
    print("torch_hook_bench: torch is not installed (python3-torch); skipped")
    sys.exit(0)
import smrules.torch as smd

STEPS = int(os.environ.get("HOOK_STEPS", "100"))
ROUNDS = int(os.environ.get("HOOK_ROUNDS", "8"))
# HOOK_BATCH=1 keeps the model and the bytes saved but makes the step ~50x
# cheaper: the hook's cost is then measured above a quieter baseline
BATCH = int(os.environ.get("HOOK_BATCH", "64"))
# The order of the configurations in each round: a Williams square, in
# which every configuration follows every other one equally often.  The
# order matters for the two that write 3.2 MB a step: a run's files are
# emptied when it ends (empty_files), and writing into the pages just freed costs 0.8-1.0
# ms of CPU per 3.2 MB here, while pages left free for a few seconds (the
# virtual machine hands them back to its host) cost 2-4 ms to write into.
# In a fixed order the raw write always came right after the every-step
# hook and wrote into its freed pages, the hook after runs that wrote
# nothing: the comparison measured the page state, not the hook.
ORDERS = ((0, 1, 3, 2), (1, 2, 0, 3), (2, 3, 1, 0), (3, 0, 2, 1))
torch.set_num_threads(1)


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def run(kind, tmp, n):
    m = model()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x = torch.randn(BATCH, 256)
    y = torch.randint(0, 10, (BATCH,))
    hook = None
    out = tempfile.mkdtemp(dir=tmp)
    if kind in ("every100", "every1"):
        hook = smd.Hook(out_dir=out, save_config=smd.SaveConfig(
            save_interval=100 if kind == "every100" else 1),
            include_collections=["weights", "biases", "gradients", "losses"])
        hook.register_module(m)
        hook.register_loss(loss_fn)
    raw = open(os.path.join(out, "raw"), "wb") if kind == "rawwrite" else None
    t0, c0 = time.perf_counter(), time.process_time()
    for step in range(n):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(m(x), y)
        loss.backward()
        if raw is not None:  # the bytes every1 saves: parameters, gradients, loss
            for p in m.parameters():
                p.detach().numpy().tofile(raw)
                p.grad.numpy().tofile(raw)
            loss.detach().numpy().tofile(raw)
            raw.flush()
        opt.step()
    if hook is not None:
        hook.close()  # the writer's backlog counts: the run ends when it is on disk
    if raw is not None:
        os.fsync(raw.fileno()) if os.environ.get("HOOK_FSYNC") else None
        raw.close()
    dt, dc = (time.perf_counter() - t0) / n, (time.process_time() - c0) / n
    empty_files(out)
    return dt, dc


def empty_files(folder):
    """Give back a run's pages but keep its files until the bench ends:
    on an ext4 without a journal (this machine's), creating a file skips
    the inodes deleted in the last seconds one by one, so removing each
    run's few hundred files made the next hooked run pay for the bench's
    own deletions, which no training job does."""
    for dirpath, _, files in os.walk(folder):
        for f in files:
            os.truncate(os.path.join(dirpath, f), 0)


def main():
    tmp = tempfile.mkdtemp(prefix="smrules-hookbench.", dir=os.environ.get("BENCH_DIR", "/tmp"))
    kinds = ("none", "every100", "every1", "rawwrite")
    # HOOK_ONLY=every1 runs one configuration alone (to profile it); the
    # report needs all four
    only = os.environ.get("HOOK_ONLY")
    if only:
        for _ in range(ROUNDS):
            run(only, tmp, STEPS)
        shutil.rmtree(tmp, ignore_errors=True)
        return
    times = {k: [] for k in kinds}
    cpus = {k: [] for k in kinds}
    try:
        for k in kinds:  # warm-up: allocations, code paths
            run(k, tmp, 20)
        for r in range(ROUNDS):
            for k in (kinds[i] for i in ORDERS[r % len(ORDERS)]):
                wall, cpu = run(k, tmp, STEPS)
                times[k].append(wall)
                cpus[k].append(cpu)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    cmed = {k: statistics.median(v) for k, v in cpus.items()}

    def cost(series, k):
        """What configuration k adds to a step: the median over rounds of
        its difference from the same round's run with no hook (paired:
        the load of other work changes from round to round)."""
        return statistics.median(a - b for a, b in zip(series[k], series["none"]))

    if os.environ.get("HOOK_VERBOSE"):  # each round's costs, CPU ms per step
        for k in kinds[1:]:
            print("%-9s CPU +ms/step by round: %s" % (k, " ".join(
                "%.2f" % ((a - b) * 1e3) for a, b in zip(cpus[k], cpus["none"]))))
    nparams = sum(p.numel() for p in model().parameters())
    step_bytes = (2 * nparams + 1) * 4
    base = med["none"]
    o100 = 100 * cost(times, "every100") / base
    o1, w = cost(times, "every1"), cost(times, "rawwrite")
    print()
    print("== 9. PyTorch hook overhead (%d rounds x %d steps, batch %d, %d cores, load average %s)"
          % (ROUNDS, STEPS, BATCH, os.cpu_count(), " ".join(open("/proc/loadavg").read().split()[:3])))
    fmt = "%-44s %-14s %-22s %-12s %s"
    print(fmt % ("BENCHMARK", "MEASURED", "BASELINE", "TARGET", "VERDICT"))
    print(fmt % ("step, no hook, ms", "%.3f" % (base * 1e3), "-", "-", "info"))
    print(fmt % ("step, save_interval 100, ms", "%.3f" % (med["every100"] * 1e3),
                 "%+.1f %%" % o100, "< 5 %", "PASS" if o100 < 5 else "MISS"))
    print(fmt % ("step, save_interval 1, ms", "%.3f" % (med["every1"] * 1e3),
                 "%+.3f ms/step" % (o1 * 1e3), "-", "info"))
    print(fmt % ("save_interval 1 cost / raw write of %.1f MB" % (step_bytes / 1e6),
                 "%.2fx" % (o1 / w if w > 0 else float("inf")),
                 "write %.3f ms/step" % (w * 1e3), "< 1.2x",
                 "PASS" if w > 0 and o1 < 1.2 * w else "MISS"))
    # CPU time of the whole process (training thread and writer thread) per
    # step: what the hook costs the machine, less sensitive to other load.
    cb = cmed["none"]
    print(fmt % ("CPU per step, no hook, ms", "%.3f" % (cb * 1e3), "-", "-", "info"))
    for k, label in (("every100", "save_interval 100"), ("every1", "save_interval 1"),
                     ("rawwrite", "raw write, no hook")):
        print(fmt % ("CPU per step, %s, ms" % label, "%.3f" % (cmed[k] * 1e3),
                     "%+.3f ms" % (cost(cpus, k) * 1e3), "-", "info"))
    oc, wc = cost(cpus, "every1"), cost(cpus, "rawwrite")
    print(fmt % ("CPU: save_interval 1 cost / raw write's", "%.2fx" % (oc / wc if wc > 0 else
                                                                    float("inf")),
                 "write %.3f ms/step" % (wc * 1e3), "< 1.2x",
                 "PASS" if wc > 0 and oc < 1.2 * wc else "MISS"))
    print("RESULT hook_step_none_ms %.4f" % (base * 1e3))
    print("RESULT hook_overhead_100_pct %.2f" % o100)
    print("RESULT hook_overhead_1_vs_write %.3f" % (o1 / w if w > 0 else -1))
    print("RESULT hook_cpu_1_vs_write %.3f" % (oc / wc if wc > 0 else -1))


if __name__ == "__main__":
    main()
