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
  rawfiles  no hook; each step writes the same bytes with plain Python
            file writes in the hook's layout: a new step folder, an event
            file and an index file of the sizes the hook writes, each as
            .tmp renamed into place (the baseline: any writer of
            smdebug's format, which creates them at every step)
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
ROUNDS = int(os.environ.get("HOOK_ROUNDS", "10"))
# HOOK_BATCH=1 keeps the model and the bytes saved but makes the step ~50x
# cheaper: the hook's cost is then measured above a quieter baseline
BATCH = int(os.environ.get("HOOK_BATCH", "64"))
# The order of the configurations in each round: a Williams design, in
# which every configuration follows every other one equally often (over
# 2n rounds for n configurations, n odd: HOOK_ROUNDS=10 for the five).
# The order matters for the three that write 3.2 MB a step: a run's files
# are emptied when it ends (empty_files), and writing into the pages just
# freed costs 0.8-1.0 ms of CPU per 3.2 MB here, while pages left free for
# a few seconds (the virtual machine hands them back to its host) cost 2-4
# ms to write into.  In a fixed order the raw write always came right
# after the every-step hook and wrote into its freed pages, the hook after
# runs that wrote nothing: the comparison measured the page state, not the
# hook.
KINDS = ("none", "every100", "every1", "rawwrite", "rawfiles")


def williams(n):
    """Orders of range(n) in which each element follows each other one
    equally often: a Williams square (its mirror too when n is odd)."""
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    rows = [tuple((x + r) % n for x in first) for r in range(n)]
    return rows + [r[::-1] for r in rows] if n % 2 else rows


ORDERS = williams(len(KINDS))
# What the every-step hook wrote for one step (event file, index file,
# collections file sizes), taken from its warm-up run: rawfiles writes the
# same sizes.
LAYOUT = {}
torch.set_num_threads(1)


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def tensors(m, loss):
    """The bytes every1 saves, as arrays: parameters, gradients, loss."""
    out = []
    for p in m.parameters():
        out += [p.detach().numpy(), p.grad.numpy()]
    return out + [loss.detach().numpy()]


def write_step_files(out, step, arrays):
    """rawfiles: one step in the hook's layout, written as a script would
    write it with Python's files: a new folder for the step, its event
    file (the arrays, then as many bytes again as the hook's records frame
    them with) and its index file, each as .tmp renamed into place, as
    smdebug's writer does so that a reader never sees half a file."""
    folder = os.path.join(out, "events", "%012d" % step)
    os.mkdir(folder)
    name = os.path.join(folder, "%012d_worker_0.tfevents" % step)
    with open(name + ".tmp", "wb") as f:
        for a in arrays:
            a.tofile(f)
        f.write(LAYOUT["framing"])
    os.rename(name + ".tmp", name)
    name = os.path.join(out, "index", "000000000", "%012d_worker_0.json" % step)
    with open(name + ".tmp", "wb") as f:
        f.write(LAYOUT["index"])
    os.rename(name + ".tmp", name)


def run(kind, tmp, n):
    """n steps of configuration `kind`: (wall s, CPU s, writer thread CPU
    s) per step."""
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
    if kind == "rawfiles":  # what the hook writes once: folders, collections
        os.makedirs(os.path.join(out, "index", "000000000"))
        os.makedirs(os.path.join(out, "events"))
        os.makedirs(os.path.join(out, "collections", "000000000"))
        name = os.path.join(out, "collections", "000000000", "worker_0_collections.json")
        with open(name + ".tmp", "wb") as f:
            f.write(LAYOUT["collections"])
        os.rename(name + ".tmp", name)
    for step in range(n):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(m(x), y)
        loss.backward()
        if raw is not None:  # the bytes every1 saves: parameters, gradients, loss
            for a in tensors(m, loss):
                a.tofile(raw)
            raw.flush()
        elif kind == "rawfiles":
            write_step_files(out, step, tensors(m, loss))
        opt.step()
    writer_cpu = 0.0
    if hook is not None:
        hook.close()  # the writer's backlog counts: the run ends when it is on disk
        writer_cpu = getattr(hook._writer, "cpu_seconds", 0.0) if hook._writer else 0.0
    if raw is not None:
        os.fsync(raw.fileno()) if os.environ.get("HOOK_FSYNC") else None
        raw.close()
    dt, dc = (time.perf_counter() - t0) / n, (time.process_time() - c0) / n
    if kind == "every1" and not LAYOUT:
        note_layout(out, n - 1, m, loss)
    empty_files(out)
    return dt, dc, writer_cpu / n


def note_layout(out, step, m, loss):
    """The sizes of what the hook wrote for its last step, for rawfiles."""
    event = os.path.join(out, "events", "%012d" % step, "%012d_worker_0.tfevents" % step)
    index = os.path.join(out, "index", "000000000", "%012d_worker_0.json" % step)
    colls = os.path.join(out, "collections", "000000000", "worker_0_collections.json")
    framing = os.path.getsize(event) - sum(a.nbytes for a in tensors(m, loss))
    LAYOUT.update(framing=bytes(framing), index=bytes(os.path.getsize(index)),
                  collections=bytes(os.path.getsize(colls)))


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
    kinds = KINDS
    # HOOK_ONLY=every1 runs one configuration alone (to profile it); the
    # report needs all five
    only = os.environ.get("HOOK_ONLY")
    if only:
        if only == "rawfiles":
            run("every1", tmp, 2)  # the sizes it writes
        for _ in range(ROUNDS):
            run(only, tmp, STEPS)
        shutil.rmtree(tmp, ignore_errors=True)
        return
    times = {k: [] for k in kinds}
    cpus = {k: [] for k in kinds}
    writer = []  # every1's writer thread CPU per step, by round
    try:
        for k in kinds:  # warm-up: allocations, code paths (every1 first: LAYOUT)
            run(k, tmp, 20)
        for r in range(ROUNDS):
            for k in (kinds[i] for i in ORDERS[r % len(ORDERS)]):
                wall, cpu, wcpu = run(k, tmp, STEPS)
                times[k].append(wall)
                cpus[k].append(cpu)
                if k == "every1":
                    writer.append(wcpu)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    cmed = {k: statistics.median(v) for k, v in cpus.items()}

    def cost(series, k):
        """What configuration k adds to a step: the median over rounds of
        its difference from the same round's run with no hook (paired:
        the load of other work changes from round to round)."""
        return statistics.median(a - b for a, b in zip(series[k], series["none"]))

    def ratio(a, b):
        return a / b if b > 0 else float("inf")

    if os.environ.get("HOOK_VERBOSE"):  # each round's costs, CPU ms per step
        for k in kinds[1:]:
            print("%-9s CPU +ms/step by round: %s" % (k, " ".join(
                "%.2f" % ((a - b) * 1e3) for a, b in zip(cpus[k], cpus["none"]))))
        print("every1's writer thread CPU ms/step by round: %s" % " ".join(
            "%.2f" % (w * 1e3) for w in writer))
    nparams = sum(p.numel() for p in model().parameters())
    step_bytes = (2 * nparams + 1) * 4
    base = med["none"]
    o100 = 100 * cost(times, "every100") / base
    o1, w, wf = cost(times, "every1"), cost(times, "rawwrite"), cost(times, "rawfiles")
    print()
    print("== 9. PyTorch hook overhead (%d rounds x %d steps, batch %d, %d cores, load average %s)"
          % (ROUNDS, STEPS, BATCH, os.cpu_count(), " ".join(open("/proc/loadavg").read().split()[:3])))
    fmt = "%-46s %-14s %-24s %-12s %s"
    print(fmt % ("BENCHMARK", "MEASURED", "BASELINE", "TARGET", "VERDICT"))
    print(fmt % ("step, no hook, ms", "%.3f" % (base * 1e3), "-", "-", "info"))
    print(fmt % ("step, save_interval 100, ms", "%.3f" % (med["every100"] * 1e3),
                 "%+.1f %%" % o100, "< 5 %", "PASS" if o100 < 5 else "MISS"))
    print(fmt % ("step, save_interval 1, ms", "%.3f" % (med["every1"] * 1e3),
                 "%+.3f ms/step" % (o1 * 1e3), "-", "info"))
    print(fmt % ("save_interval 1 cost / raw write of %.1f MB" % (step_bytes / 1e6),
                 "%.2fx" % ratio(o1, w), "write %.3f ms/step" % (w * 1e3), "< 1.2x",
                 "PASS" if w > 0 and o1 < 1.2 * w else "MISS"))
    print(fmt % ("save_interval 1 cost / raw files' (layout)", "%.2fx" % ratio(o1, wf),
                 "files %.3f ms/step" % (wf * 1e3), "< 1.2x",
                 "PASS" if wf > 0 and o1 < 1.2 * wf else "MISS"))
    # CPU time of the whole process (training thread and writer thread) per
    # step: what the hook costs the machine, less sensitive to other load.
    cb = cmed["none"]
    print(fmt % ("CPU per step, no hook, ms", "%.3f" % (cb * 1e3), "-", "-", "info"))
    for k, label in (("every100", "save_interval 100"), ("every1", "save_interval 1"),
                     ("rawwrite", "raw write, no hook"), ("rawfiles", "raw files, no hook")):
        print(fmt % ("CPU per step, %s, ms" % label, "%.3f" % (cmed[k] * 1e3),
                     "%+.3f ms" % (cost(cpus, k) * 1e3), "-", "info"))
    wt = statistics.median(writer)
    print(fmt % ("CPU per step, save_interval 1, writer thread", "%.3f" % (wt * 1e3),
                 "training +%.3f ms" % ((cost(cpus, "every1") - wt) * 1e3), "-", "info"))
    oc, wc, fc = cost(cpus, "every1"), cost(cpus, "rawwrite"), cost(cpus, "rawfiles")
    print(fmt % ("CPU: save_interval 1 cost / raw write's", "%.2fx" % ratio(oc, wc),
                 "write %.3f ms/step" % (wc * 1e3), "< 1.2x",
                 "PASS" if wc > 0 and oc < 1.2 * wc else "MISS"))
    print(fmt % ("CPU: save_interval 1 cost / raw files'", "%.2fx" % ratio(oc, fc),
                 "files %.3f ms/step" % (fc * 1e3), "< 1.2x",
                 "PASS" if fc > 0 and oc < 1.2 * fc else "MISS"))
    print("RESULT hook_step_none_ms %.4f" % (base * 1e3))
    print("RESULT hook_overhead_100_pct %.2f" % o100)
    print("RESULT hook_overhead_1_vs_write %.3f" % (o1 / w if w > 0 else -1))
    print("RESULT hook_overhead_1_vs_files %.3f" % (o1 / wf if wf > 0 else -1))
    print("RESULT hook_cpu_1_vs_write %.3f" % (oc / wc if wc > 0 else -1))
    print("RESULT hook_cpu_1_vs_files %.3f" % (oc / fc if fc > 0 else -1))


if __name__ == "__main__":
    main()
