#!/usr/bin/python3
"""bench/torch_hook_bench.py - what smrules.torch.Hook costs a training
step (targets: < 5 % at save_interval 100; at save_interval 1, less than
writing the saved bytes plus 20 %).

A small CPU model (MLP 256-512-512-10, batch 64 or HOOK_BATCH, SGD, one
torch thread) trains as one run per configuration, each alive for the
whole bench (model, optimizer, hook, files: see Run); the bench goes in
rounds, and each round runs a slice of HOOK_STEPS (20) steps of every
run in turn (interleaved, so that the machine's load falls on all alike;
the order changes from round to round so that each configuration follows
each other one equally often, see ORDERS):
  none      no hook
  every100  Hook, weights/biases/gradients/losses, save_interval 100
  every1    the same, save_interval 1
  rawwrite  no hook; each step writes the bytes every1 saves to one file
            (the bytes alone, written as a plain program would: one
            write() per array, straight from its memory)
  rawfiles  no hook; each step writes the same bytes as the trial's
            files, as a plain program would: a new step folder, an event
            file and an index file of the sizes the hook writes, each as
            .tmp (written the same way) renamed into place (the files
            smdebug's format needs at every step: the time to write the
            bytes as a trial, the baseline the target is judged against)
  base1     (only with HOOK_BASE=<another build's python folder>) every1
            with that build's smrules, imported beside this one: the
            hook before a change and after it, paired in one process
  smdebug1  (only with HOOK_SMDEBUG=<folders holding smdebug's package
            and what it imports, as PYTHONPATH lists them>) every1 with
            smdebug's own PyTorch hook, the one this hook replaces: the
            suite never needs it, bench/README.md section 9 says how it
            was run here
The per-configuration step time is the median over the rounds of each
slice's mean; what a configuration adds to a step is, for each round, its
difference from the same round's run with no hook (paired, as the load of
other work drifts from round to round), reported as the median over
rounds and its quartiles.  The verdict at save_interval 1 is decided
round by round too: each round's margin, its cost less 1.2 times the
same round's baseline cost, so that drift of the machine (the raw write
of the same 3.2 MB took 0.58 to 1.74 ms a step in quiet runs of one day)
falls on both sides; PASS when three rounds in four meet the target (the
upper quartile of the margins is below 0), MISS when three in four miss
it, UNSURE when the quartiles straddle it: a coin toss, which no single
median can show.  HOOK_DUMP=file saves every round's figures as JSON;
`torch_hook_bench.py --report file` prints the report from them again.
The CPU time of the process per step (both threads) is given the same
way: on a busy machine it says more than wall time.  At batch 64 a step
takes 36 ms here and its own jitter (two runs with no hook, 20-step
slices: 1.6-2.2 ms a step apart, standard deviation) is larger than what
the hook adds, so the save_interval 1 verdict is taken at HOOK_BATCH=1
(a step of about 1 ms, shorter than the writer's work: the hook's
hardest case, and rounds that resolve 0.1 ms).  Run by bench/run.sh
with PYTHONPATH=BUILD/python, at both; on its own:
PYTHONPATH=build/python /usr/bin/python3 bench/torch_hook_bench.py."""

import json
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


def import_beside(path):
    """smrules.torch of another build (the python folder of its build),
    imported beside this one's: its modules are taken out of sys.modules
    again, and each hook keeps the modules it was defined with."""
    ours = {k: v for k, v in sys.modules.items() if k == "smrules" or k.startswith("smrules.")}
    for k in ours:
        del sys.modules[k]
    sys.path.insert(0, path)
    try:
        import smrules.torch as other
    finally:
        sys.path.remove(path)
        for k in [k for k in sys.modules if k == "smrules" or k.startswith("smrules.")]:
            del sys.modules[k]
        sys.modules.update(ours)
    if os.path.dirname(os.path.dirname(other.__file__)) == os.path.dirname(
            os.path.dirname(smd.__file__)):
        sys.exit("torch_hook_bench: HOOK_BASE names this build's own smrules")
    return other


BASE = import_beside(os.path.abspath(os.environ["HOOK_BASE"])) if os.environ.get("HOOK_BASE") else None
# Steps of a configuration per round (a slice of its run, see Run)
STEPS = int(os.environ.get("HOOK_STEPS", "20"))
WARMUP = 20  # steps of each run before the rounds: allocations, code paths
# HOOK_BATCH=1 keeps the model and the bytes saved but makes the step ~50x
# cheaper: the hook's cost is then measured above a quieter baseline
BATCH = int(os.environ.get("HOOK_BATCH", "64"))
TARGET = 1.2  # at save_interval 1: the cost below 1.2x the raw write's
# The order of the configurations in each round: a Williams design, in
# which every configuration follows every other one equally often (over
# 2n rounds for n configurations, n odd: 10 orders for the five).
# The order matters for the three that write 3.2 MB a step: a slice's files
# are emptied when it ends (empty_files), and writing into the pages just
# freed costs 0.8-1.0 ms of CPU per 3.2 MB here, while pages left free for
# a few seconds (the virtual machine hands them back to its host) cost 2-4
# ms to write into.  In a fixed order the raw write always came right
# after the every-step hook and wrote into its freed pages, the hook after
# runs that wrote nothing: the comparison measured the page state, not the
# hook.


def import_smdebug(paths):
    """smdebug.pytorch from the folders `paths` (a PYTHONPATH), its log
    quiet (it logs every step at INFO)."""
    os.environ.setdefault("SMDEBUG_LOG_LEVEL", "error")
    sys.path[:0] = [os.path.abspath(p) for p in paths.split(":") if p]
    import smdebug.pytorch as smdebug_torch
    return smdebug_torch


SMDEBUG = import_smdebug(os.environ["HOOK_SMDEBUG"]) if os.environ.get("HOOK_SMDEBUG") else None
KINDS = ("none", "every100", "every1", "rawwrite", "rawfiles") + (("base1",) if BASE else ()) + \
    (("smdebug1",) if SMDEBUG else ())
HOOKED = {"every100": smd, "every1": smd, "base1": BASE, "smdebug1": SMDEBUG}
CREATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC


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
# Whole sets of orders by default (60 rounds: six sets of the 10 orders
# for the five configurations, five of the 12 for six with HOOK_BASE), so
# that each follows each other one equally often; a partial set repeats
# the first orders and favours their places.  60 slices of 20 steps: the
# 1200 steps per configuration that 12 runs of 100 took before.
ROUNDS = int(os.environ.get("HOOK_ROUNDS", str(len(ORDERS) * -(-60 // len(ORDERS)))))
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


def write_all(fd, buffers):
    """Write `buffers` to fd as a plain program writes its tensors: one
    write() each, straight from their memory.  Not one writev() of the
    whole 3.2 MB: on this virtual machine a write of 2 MiB or more lands
    in 2 MiB page-cache folios taken from memory the host took back, and
    cost 4x as much CPU (5.8 against 1.4 ms, bench/README.md section 9)."""
    for b in buffers:
        view = memoryview(b).cast("B")
        while view:
            view = view[os.write(fd, view):]


def write_file(name, buffers):
    """One file written as a plain program writes it, complete or absent:
    <name>.tmp created, written (write_all), closed, renamed."""
    fd = os.open(name + ".tmp", CREATE, 0o666)
    try:
        write_all(fd, buffers)
    finally:
        os.close(fd)
    os.rename(name + ".tmp", name)


def write_step_files(out, step, arrays):
    """rawfiles: one step in the hook's layout: a new folder for the
    step, its event file (the arrays, then as many bytes again as the
    hook's records frame them with) and its index file, each as .tmp
    renamed into place, as smdebug's writer does so that a reader never
    sees half a file."""
    folder = os.path.join(out, "events", "%012d" % step)
    os.mkdir(folder)
    write_file(os.path.join(folder, "%012d_worker_0.tfevents" % step), arrays + [LAYOUT["framing"]])
    write_file(os.path.join(out, "index", "000000000", "%012d_worker_0.json" % step),
               [LAYOUT["index"]])


class Run:
    """One configuration's training run, alive for the whole bench: each
    round runs a slice of STEPS steps of it (slice), so that the
    configurations take turns every second or so, not every few seconds
    (the drift of a 36 ms step on this machine between runs of 100 steps
    made the rounds of two identical hooks come out 1-2 ms a step apart).
    The model, its optimizer, the hook and its writer thread, the files'
    folders all stay from slice to slice, as in one long training job."""

    def __init__(self, kind, tmp):
        self.kind = kind
        self.m = model()
        self.loss_fn = nn.CrossEntropyLoss()
        self.opt = torch.optim.SGD(self.m.parameters(), lr=0.01)
        self.x = torch.randn(BATCH, 256)
        self.y = torch.randint(0, 10, (BATCH,))
        self.out = tempfile.mkdtemp(dir=tmp)
        self.step = 0
        self.hook = None
        if kind in HOOKED:
            lib = HOOKED[kind]
            self.hook = lib.Hook(out_dir=self.out, save_config=lib.SaveConfig(
                save_interval=100 if kind == "every100" else 1),
                include_collections=["weights", "biases", "gradients", "losses"])
            self.hook.register_module(self.m)
            self.hook.register_loss(self.loss_fn)
        self.raw = os.open(os.path.join(self.out, "raw"), CREATE, 0o666) \
            if kind == "rawwrite" else None
        self.writer_total = 0.0  # writer CPU, for a build whose count is not live

    def writer(self):
        """An smrules hook's writer thread (None for smdebug's hook, which
        has none of its own to wait for)."""
        w = getattr(self.hook, "_writer", None)
        return w if hasattr(w, "_queue") else None

    def writer_cpu(self):
        """The writer thread's CPU seconds so far; None when this build
        counts them only once the thread has ended (HOOK_BASE's, older)."""
        w = self.writer()
        if w is None:
            return 0.0
        return w.cpu_seconds if isinstance(getattr(type(w), "cpu_seconds", None), property) \
            else None

    def slice(self, n):
        """n steps: (wall s, CPU s, writer thread CPU s or None) per step.
        A hooked slice ends when its writer thread has written what the
        steps queued (the backlog counts in the slice); what the last step
        saved is queued at the next step, in the next slice of this run."""
        if self.kind == "rawfiles" and self.step == 0:
            self.start_files()
        w0 = self.writer_cpu()
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            self.one_step()
        w = self.writer()
        if w is not None:
            drain(w)
        dt, dc = (time.perf_counter() - t0) / n, (time.process_time() - c0) / n
        w1 = self.writer_cpu()
        if self.kind == "every1" and not LAYOUT:
            note_layout(self.out, self.step - 2, self.m)
        self.empty()
        return dt, dc, (None if w0 is None or w1 is None else (w1 - w0) / n)

    def start_files(self):
        """rawfiles: what the hook writes once: folders, collections."""
        os.makedirs(os.path.join(self.out, "index", "000000000"))
        os.makedirs(os.path.join(self.out, "events"))
        os.makedirs(os.path.join(self.out, "collections", "000000000"))
        write_file(os.path.join(self.out, "collections", "000000000",
                                "worker_0_collections.json"), [LAYOUT["collections"]])

    def one_step(self):
        m = self.m
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(m(self.x), self.y)
        loss.backward()
        if self.raw is not None:  # the bytes every1 saves: parameters, gradients, loss
            write_all(self.raw, tensors(m, loss))
        elif self.kind == "rawfiles":
            write_step_files(self.out, self.step, tensors(m, loss))
        self.opt.step()
        self.step += 1

    def empty(self):
        """Give back the pages written (see empty_files); untimed."""
        if self.raw is not None:
            os.ftruncate(self.raw, 0)
            os.lseek(self.raw, 0, os.SEEK_SET)
        else:
            empty_files(self.out)

    def close(self):
        """The writer's CPU in all (for a build that counts it only then)."""
        if self.hook is not None:
            self.hook.close()
            w = self.writer()
            self.writer_total = w.cpu_seconds if w is not None else 0.0
        if self.raw is not None:
            os.close(self.raw)


def drain(w):
    """Wait until writer w has written all it was given (WriterThread.drain;
    a build without it: its queue polled)."""
    if hasattr(w, "drain"):
        w.drain()
        return
    while w._queue.queued_bytes:
        time.sleep(0.0001)


def note_layout(out, step, m):
    """The sizes of what the hook wrote for a complete step, for rawfiles."""
    event = os.path.join(out, "events", "%012d" % step, "%012d_worker_0.tfevents" % step)
    index = os.path.join(out, "index", "000000000", "%012d_worker_0.json" % step)
    colls = os.path.join(out, "collections", "000000000", "worker_0_collections.json")
    saved = (2 * sum(p.numel() for p in m.parameters()) + 1) * 4  # + the loss
    LAYOUT.update(framing=bytes(os.path.getsize(event) - saved),
                  index=bytes(os.path.getsize(index)),
                  collections=bytes(os.path.getsize(colls)))


def empty_files(folder):
    """Give back a run's pages but keep its files until the bench ends:
    on an ext4 without a journal (this machine's), creating a file skips
    the inodes deleted in the last seconds one by one, so removing each
    slice's files made the next hooked slice pay for the bench's own
    deletions, which no training job does.  A file still being written
    (.tmp) is left alone."""
    for dirpath, _, files in os.walk(folder):
        for f in files:
            if not f.endswith(".tmp"):
                os.truncate(os.path.join(dirpath, f), 0)


def quartiles(xs):
    """(median, lower quartile, upper quartile) of xs."""
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q1, q2, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q2, q1, q3


def verdict(margins):
    """The verdict from each round's margin, cost - TARGET x the same
    round's baseline cost (negative: the round met the target): PASS when
    three rounds in four meet it (the upper quartile of the margins is
    below 0), MISS when three in four miss it (the lower quartile is at or
    above 0), else UNSURE: the rounds straddle the target and a verdict
    would be a coin toss.  Margins, not ratios: a round whose baseline
    cost came out near 0 or below makes its ratio meaningless, not its
    margin."""
    _, q1, q3 = quartiles(margins)
    return "PASS" if q3 < 0 else "MISS" if q1 >= 0 else "UNSURE"


def main():
    if sys.argv[1:2] == ["--report"]:  # a dump's report again
        with open(sys.argv[2]) as f:
            d = json.load(f)
        print("(from %s: load average %s at its end)" % (sys.argv[2], " ".join(d["loadavg"])))
        report(tuple(d["kinds"]), d["times"], d["cpus"], d["writer"], d.get("steps", 100))
        return
    tmp = tempfile.mkdtemp(prefix="smrules-hookbench.", dir=os.environ.get("BENCH_DIR", "/tmp"))
    # HOOK_ONLY=every1 runs one configuration alone (to profile it); the
    # report needs all five
    only = os.environ.get("HOOK_ONLY")
    kinds = (only,) if only else KINDS
    times = {k: [] for k in kinds}
    cpus = {k: [] for k in kinds}
    writer = {k: [] for k in kinds}  # writer thread CPU per step, by round
    runs = {}
    try:
        if only == "rawfiles":  # the sizes it writes
            runs["every1"] = Run("every1", tmp)
            runs["every1"].slice(WARMUP)
        for k in kinds:  # warm-up: allocations, code paths (every1 first: LAYOUT)
            runs[k] = Run(k, tmp)
            runs[k].slice(WARMUP)
        for r in range(ROUNDS):
            for k in (kinds[i] for i in ORDERS[r % len(ORDERS)]) if not only else kinds:
                wall, cpu, wcpu = runs[k].slice(STEPS)
                times[k].append(wall)
                cpus[k].append(cpu)
                writer[k].append(wcpu)
        for k, run in runs.items():
            run.close()
            if k in writer and None in writer[k]:  # not counted live: the run's mean
                per_step = run.writer_total / ((ROUNDS * STEPS) + WARMUP)
                writer[k] = [per_step] * len(writer[k])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if only:
        return
    if os.environ.get("HOOK_DUMP"):
        with open(os.environ["HOOK_DUMP"], "w") as f:
            json.dump({"kinds": kinds, "times": times, "cpus": cpus, "writer": writer,
                       "steps": STEPS, "batch": BATCH,
                       "loadavg": open("/proc/loadavg").read().split()[:3]}, f)
    report(kinds, times, cpus, writer, STEPS)


def blocks(xs, size):
    """xs averaged over consecutive blocks of `size` (a last partial block
    dropped, unless it is the only one)."""
    if size <= 1 or len(xs) < size:
        return list(xs)
    return [statistics.mean(xs[i:i + size]) for i in range(0, len(xs) - size + 1, size)]


def report(kinds, times, cpus, writer, steps):
    med = {k: statistics.median(v) for k, v in times.items()}
    cmed = {k: statistics.median(v) for k, v in cpus.items()}

    def costs(series, k):
        """What configuration k adds to a step, round by round: its
        difference from the same round's run with no hook (paired: the
        load of other work changes from round to round)."""
        return [a - b for a, b in zip(series[k], series["none"])]

    def cost(series, k):
        return statistics.median(costs(series, k))

    def ms_spread(xs, sign=True):
        m, q1, q3 = quartiles([x * 1e3 for x in xs])
        f = "%+.3f" if sign else "%.3f"
        return (f + " [" + f + " " + f + "]") % (m, q1, q3)

    if os.environ.get("HOOK_VERBOSE"):  # each round's costs, CPU ms per step
        for k in kinds[1:]:
            print("%-9s CPU +ms/step by round: %s" % (k, " ".join(
                "%.2f" % (c * 1e3) for c in costs(cpus, k))))
            print("%-9s wall +ms/step by round: %s" % (k, " ".join(
                "%.2f" % (c * 1e3) for c in costs(times, k))))
        print("every1's writer thread CPU ms/step by round: %s" % " ".join(
            "%.2f" % (w * 1e3) for w in writer["every1"]))
    base = med["none"]
    # every100 saves one step in 100: a slice of 20 steps holds a saving
    # step one round in five, so its cost is taken over blocks of rounds
    # that hold 100 steps (each one saving step), not round by round,
    # where the median would leave the saving steps out
    o100 = [100 * c / base for c in blocks(costs(times, "every100"), round(100 / steps))]
    print()
    print("== 9. PyTorch hook overhead (%d rounds x %d steps of each configuration's run, batch %d,"
          " %d cores, load average %s)" % (len(times["none"]), steps, BATCH, os.cpu_count(),
             " ".join(open("/proc/loadavg").read().split()[:3])))
    print("   costs are medians over rounds of each round's difference from its run with no hook,")
    print("   [lower upper] quartiles over the rounds; a verdict at save_interval 1 is PASS when the")
    print("   margin (cost - 1.2 x the same round's baseline cost) is < 0 in 3 rounds of 4, MISS when")
    print("   it is >= 0 in 3 of 4, UNSURE (a coin toss) between")
    fmt = "%-52s %-26s %-32s %-8s %s"
    print(fmt % ("BENCHMARK", "MEASURED [QUARTILES]", "BASELINE", "TARGET", "VERDICT"))
    print(fmt % ("step, no hook, ms", "%.3f" % (base * 1e3), "-", "-", "info"))
    m100, q1, q3 = quartiles(o100)
    print(fmt % ("step, save_interval 100: cost", "%+.1f %% [%+.1f %+.1f]" % (m100, q1, q3),
                 "step %.3f ms" % (med["every100"] * 1e3), "< 5 %",
                 "PASS" if q3 < 5 else "MISS" if q1 >= 5 else "UNSURE"))
    hooks = [k for k in ("every1", "base1", "smdebug1") if k in kinds]
    names = {"every1": "save_interval 1", "base1": "HOOK_BASE's save_interval 1",
             "smdebug1": "smdebug's save_interval 1"}
    for k in hooks:
        print(fmt % ("step, %s: cost, ms" % names[k], ms_spread(costs(times, k)),
                     "step %.3f ms" % (med[k] * 1e3), "-", "info"))
    for b, label in (("rawwrite", "raw write, one file"), ("rawfiles", "raw files (layout)")):
        print(fmt % ("step, %s: cost, ms" % label, ms_spread(costs(times, b)),
                     "step %.3f ms" % (med[b] * 1e3), "-", "info"))
    verdicts = {}
    for series, what in ((times, ""), (cpus, "CPU: ")):
        for k in hooks:
            for b, label in (("rawfiles", "raw files (layout)"), ("rawwrite", "raw write (one file)")):
                c, bc = costs(series, k), costs(series, b)
                margins = [x - TARGET * y for x, y in zip(c, bc)]
                ratio = statistics.median(c) / statistics.median(bc) if statistics.median(bc) > 0 \
                    else float("inf")
                met = sum(m < 0 for m in margins)
                v = verdict(margins)
                verdicts[(series is cpus, k, b)] = (ratio, margins, v)
                print(fmt % ("%s%s / %s" % (what, names[k], label),
                             "%.2fx, %d/%d rounds met" % (ratio, met, len(margins)),
                             "%s %s ms" % ("files" if b == "rawfiles" else "write", ms_spread(bc)),
                             "< %.1fx" % TARGET, v))
                print(fmt % ("  margin: cost - %.1f x baseline, ms" % TARGET, ms_spread(margins),
                             "", "< 0", v))
    # CPU time of the whole process (training thread and writer thread) per
    # step: what the hook costs the machine, less sensitive to other load.
    print(fmt % ("CPU per step, no hook, ms", "%.3f" % (cmed["none"] * 1e3), "-", "-", "info"))
    for k, label in [("every100", "save_interval 100")] + [(k, names[k]) for k in hooks] + \
            [("rawwrite", "raw write, one file"), ("rawfiles", "raw files (layout)")]:
        if k in kinds:
            print(fmt % ("CPU per step, %s: cost, ms" % label, ms_spread(costs(cpus, k)),
                         "step %.3f ms" % (cmed[k] * 1e3), "-", "info"))
    for k in (k for k in hooks if k != "smdebug1"):
        training = [c - w for c, w in zip(costs(cpus, k), writer[k])]
        print(fmt % ("CPU, %s: writer thread, ms" % names[k], ms_spread(writer[k], False),
                     "training thread %s" % ms_spread(training).split(" [")[0], "-", "info"))
    # this hook against HOOK_BASE's (the change) and smdebug's (the hook it
    # replaces), paired round by round; a writer thread only for HOOK_BASE's
    for k, who, series in (("base1", "HOOK_BASE", ((times, "wall"), (cpus, "CPU"),
                                                   (writer, "writer"))),
                           ("smdebug1", "smdebug's", ((times, "wall"), (cpus, "CPU")))):
        if k not in kinds:
            continue
        for values, what in series:
            d = [a - b for a, b in zip(values["every1"], values[k])]
            print(fmt % ("save_interval 1, this - %s: %s, ms" % (who, what), ms_spread(d),
                         "-", "-", "info"))
    if "smdebug1" in kinds:
        print("RESULT hook_smdebug1_cost_ms %.4f" % (cost(times, "smdebug1") * 1e3))
    print("RESULT hook_step_none_ms %.4f" % (base * 1e3))
    print("RESULT hook_overhead_100_pct %.2f" % m100)
    for (is_cpu, k, b), (ratio, margins, v) in verdicts.items():
        if k != "every1":
            continue
        name = "hook_%s1_vs_%s" % ("cpu_" if is_cpu else "overhead_", "files" if b == "rawfiles" else "write")
        m, q1, q3 = quartiles(margins)
        print("RESULT %s %.3f" % (name, ratio))
        print("RESULT %s_margin_ms %.4f" % (name, m * 1e3))
        print("RESULT %s_margin_q1_ms %.4f" % (name, q1 * 1e3))
        print("RESULT %s_margin_q3_ms %.4f" % (name, q3 * 1e3))


if __name__ == "__main__":
    main()
