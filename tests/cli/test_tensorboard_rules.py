#!/usr/bin/env python3
"""End-to-end: rules on TensorBoard log directories (docs/tensorboard.md).

  offline   a folder written as the Hugging Face Trainer writes one:
            LossNotDecreasing, ExplodingTensor (a NaN grad norm), Overfit
            (tensorboard: strip_mode pairs train/loss with eval/loss) and a
            Lua rule (loss_nan.lua) fire at the global steps computed here
            from the documented definitions and the step numbering of
            docs/tensorboard.md#steps
  stall     `run -- tb_trainer.py` (a stand-in HF trainer, logging while
            smrules watches) whose loss stalls is stopped by StopTraining
            through LossNotDecreasing: it gets SIGTERM, the first trigger
            is the expected step, the trainer wrote no further step
  spike     the same with LossSpike on a loss that jumps

Nothing waits for a duration: the trainer, once it has written its steps,
waits for a signal (for at most a minute, a hang guard, then exits 3).
"""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import tbwriter as tw  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
C = lib.Checker("test_tensorboard_rules")
TMP = tempfile.mkdtemp(prefix="smrules-tbr-")


write = lib.write_text


def run(args, timeout=lib.TIMEOUT):
    rc, out, err = lib.run(args, timeout)
    return lib.Result(args, rc, out, err)


def rules_by_name(obj):
    return {r.get("name"): r for r in (obj or {}).get("rules", [])}


def loss_not_decreasing(steps, losses, num_steps, diff_percent):
    """Mode steps at which docs/rules/LossNotDecreasing.md fires."""
    fired, last = [], None
    for i, c in enumerate(steps):
        if last is not None and c - last < num_steps:
            continue
        refs = [j for j in range(i) if steps[j] <= c - num_steps]
        if not refs:
            continue
        r = refs[-1]
        last = c
        ref, cur = losses[r], losses[i]
        change = 100.0 * (cur - ref) / abs(ref) if ref else 0.0
        if -change < diff_percent:
            fired.append(c)
    return fired


def test_offline():
    d = os.path.join(TMP, "hf")
    os.makedirs(d)
    w = tw.Writer(os.path.join(d, tw.event_file_name(0)))
    steps = list(range(10, 310, 10))
    losses = [2.0 - 0.1 * k if k < 10 else 1.05 for k in range(len(steps))]
    evals = {100: 1.3, 200: 1.6, 300: 1.9}
    pairs = []  # (step, mode) in (step, mode) order: the global steps
    for s, loss in zip(steps, losses):
        w.scalar("train/loss", s, loss)
        w.scalar("train/grad_norm", s, float("nan") if s == 250 else 0.5)
        pairs.append((s, 1))
        if s in evals:
            w.scalar("eval/loss", s, evals[s])
            pairs.append((s, 2))
    w.close()
    g = {p: i for i, p in enumerate(pairs)}
    y = write(os.path.join(TMP, "offline.yaml"), """\
rules:
  - rule: LossNotDecreasing
    parameters: {mode: TRAIN, num_steps: 30, diff_percent: 1}
  - rule: ExplodingTensor
  - rule: Overfit
    parameters: {ratio_threshold: 0.1}
  - lua: %s
tensorboard:
  strip_mode: true
""" % os.path.join(lib.ROOT, "rules", "loss_nan.lua"))
    r = run(["run", "--trial", d, "--rules", y, "--json", "--fresh",
             "--output", os.path.join(TMP, "out-offline")])
    sc = C.scope("offline", r)
    if not sc.process():
        return
    sc.eq("exit 1", r.rc, 1)
    rs = rules_by_name(r.obj)
    # strip_mode: the tensor is "loss", TRAIN steps from train/loss
    want = loss_not_decreasing(steps, [tw.f32(x) for x in losses], 30, 1)
    got = rs.get("LossNotDecreasing", {})
    sc.eq("LossNotDecreasing first trigger", got.get("first_trigger_step"),
          g[(want[0], 1)] if want else None)
    sc.eq("ExplodingTensor first trigger", rs.get("ExplodingTensor", {}).get("first_trigger_step"),
          g[(250, 1)])
    # Overfit at each EVAL step: mean of the EVAL phase vs mean of the TRAIN
    # phase before it (docs/rules/Overfit.md)
    first = None
    prev_eval = 0
    for s in sorted(evals):
        train = [tw.f32(l) for st, l in zip(steps, losses) if prev_eval < st <= s]
        ratio = (tw.f32(evals[s]) - sum(train) / len(train)) / (sum(train) / len(train))
        prev_eval = s
        if ratio > 0.1 and first is None:
            first = g[(s, 2)]
    sc.eq("Overfit first trigger", rs.get("Overfit", {}).get("first_trigger_step"), first)
    sc.eq("loss_nan: no NaN loss", rs.get("loss_nan", {}).get("status"), "NoIssuesFound")
    sc.ok(rs.get("loss_nan", {}).get("evaluated", 0) > 0 or
          "loss_nan" in rs, "loss_nan ran", lib.short(rs.get("loss_nan")))


def spikes(values, window, warmup, factor, z_score):
    """Positions at which docs/rules/LossSpike.md fires (one mode)."""
    fired = []
    for i, x in enumerate(values):
        if not math.isfinite(x):
            continue
        p = [v for v in values[max(0, i - window):i] if math.isfinite(v)]
        if len(p) < warmup or not p:
            continue
        q = sorted(p)
        m = len(q)
        med = q[m // 2] if m % 2 else (q[m // 2 - 1] + q[m // 2]) / 2
        mean = sum(p) / m
        sd = math.sqrt(sum((v - mean) ** 2 for v in p) / m)
        by_f = factor > 0 and x - med > (factor - 1) * abs(med)
        by_z = z_score > 0 and sd > 0 and (x - mean) / sd > z_score
        if by_f or by_z:
            fired.append(i)
    return fired


def test_spike_rules():
    """LossSpike (factor and z-score), GradNormSpike, NonFiniteMetric on an
    HF-style folder: every triggered step equals the definition's."""
    d = os.path.join(TMP, "spikes")
    os.makedirs(d)
    w = tw.Writer(os.path.join(d, tw.event_file_name(0)))
    n = 80
    steps = [10 * (i + 1) for i in range(n)]
    loss = [2.0 * 0.98 ** i + 0.01 * ((i * 7) % 5) for i in range(n)]
    for i, f in ((15, 4.0), (16, 3.5), (40, 2.2), (60, 10.0)):
        loss[i] *= f
    loss[50] = float("nan")
    norm = [1.0 + 0.05 * ((i * 3) % 7) for i in range(n)]
    for i, f in ((5, 9.0), (30, 6.0), (31, 1.2), (70, 20.0)):
        norm[i] *= f
    norm[45] = float("inf")
    for i, s in enumerate(steps):
        w.scalar("train/loss", s, loss[i])
        w.scalar("train/grad_norm", s, norm[i])
        w.scalar("train/learning_rate", s, 1e-4)
    w.close()
    y = write(os.path.join(TMP, "spikes.yaml"), """\
rules:
  - rule: LossSpike
    parameters: {window: 20, warmup: 8, factor: 2}
  - rule: LossSpike
    name: LossSpikeZ
    parameters: {window: 30, warmup: 10, factor: 0, z_score: 3}
  - rule: GradNormSpike
  - rule: NonFiniteMetric
""")
    r = run(["run", "--trial", d, "--rules", y, "--json", "--fresh",
             "--output", os.path.join(TMP, "out-spikes")])
    sc = C.scope("spike rules", r)
    if not sc.process():
        return
    rs = rules_by_name(r.obj)
    f32 = [tw.f32(x) for x in loss]
    n32 = [tw.f32(x) for x in norm]
    cases = [("LossSpike", spikes(f32, 20, 8, 2, 0)),
             ("LossSpikeZ", spikes(f32, 30, 10, 0, 3)),
             ("GradNormSpike", spikes(n32, 50, 10, 5, 0)),
             ("NonFiniteMetric", sorted(i for i in range(n)
                                        if not math.isfinite(f32[i]) or
                                        not math.isfinite(n32[i])))]
    for name, want in cases:
        sc.ok(want, "%s: the series has triggers" % name)
        sc.eq("%s triggered steps" % name, rs.get(name, {}).get("triggered_steps"), want)
    # the last trigger (step 50): train/loss, NaN since step 50
    rep = rs.get("NonFiniteMetric", {}).get("report") or {}
    if isinstance(rep, str):
        rep = json.loads(rep)
    v = (((rep.get("Details") or {}).get("last_trigger") or {}).get("violations") or [{}])[0]
    sc.eq("NonFiniteMetric tensor", v.get("tensor"), "train/loss")
    sc.eq("NonFiniteMetric first_step", v.get("first_step"), 50)


def launched(name, rules_yaml, trainer_args):
    trial = os.path.join(TMP, name, "runs")
    log = os.path.join(TMP, name, "trainer.log")
    os.makedirs(os.path.dirname(trial), exist_ok=True)
    args = ["run", "--trial", trial, "--rules", rules_yaml, "--json", "--fresh",
            "--output", os.path.join(TMP, name, "out"), "--",
            sys.executable, os.path.join(HERE, "tb_trainer.py"), "--out", trial,
            "--log", log] + [str(a) for a in trainer_args]
    r = run(args, timeout=120)
    lines = []
    if os.path.exists(log):
        with open(log) as f:
            lines = [l.split() for l in f if l.strip()]
    return r, lines


STEP_OF_GLOBAL = {}


def want_step_mode(g):
    return STEP_OF_GLOBAL.get(g, 1 << 62)


def check_stopped(sc, r, lines, rule, want_step, last_written):
    if not sc.process(r):
        return
    sc.eq("exit 1", r.rc, 1)
    sig = [l for l in lines if l[0] == "signal"]
    sc.ok(sig and sig[0][1] == "SIGTERM", "the trainer got SIGTERM", lib.short(lines[-3:]))
    sc.ok(not any(l[0] == "unstopped" for l in lines), "not left running")
    t = (r.obj or {}).get("training") or {}
    sc.eq("stopped_by", t.get("stopped_by"), rule)
    rs = rules_by_name(r.obj)
    sc.eq("first trigger", rs.get(rule, {}).get("first_trigger_step"), want_step)
    wrote = [l for l in lines if l[0] == "wrote"]
    sc.ok(wrote and int(wrote[-1][1]) >= want_step_mode(want_step),
          "the trigger came from a step the trainer wrote", lib.short(wrote[-2:]))
    if wrote and sig and int(wrote[-1][1]) == last_written:
        # informational (never asserted): last record flushed -> SIGTERM
        print("%s: %.1f ms from the last record written to SIGTERM" %
              (rule, 1000 * (float(sig[0][2]) - float(wrote[-1][2]))))


def test_stall():
    every, n = 10, 30
    steps = [every * (i + 1) for i in range(n)]
    losses = [3.0 * 0.9 ** i if i < 12 else 3.0 * 0.9 ** 12 for i in range(n)]
    want = loss_not_decreasing(steps, [tw.f32(x) for x in losses], 40, 0.5)
    y = write(os.path.join(TMP, "stall.yaml"), """\
rules:
  - rule: LossNotDecreasing
    parameters: {num_steps: 40, diff_percent: 0.5}
    actions: [StopTraining]
""")
    r, lines = launched("stall", y, ["--every", every,
                                     "--losses", ",".join(repr(x) for x in losses)])
    sc = C.scope("stall", r)
    sc.ok(want, "the stall fires (computed here)", str(want))
    STEP_OF_GLOBAL.update({i: s for i, s in enumerate(steps)})
    # only TRAIN steps: global step = position among the logging steps
    check_stopped(sc, r, lines, "LossNotDecreasing", steps.index(want[0]) if want else None,
                  steps[-1])


def test_spike_stop():
    every, n = 10, 40
    steps = [every * (i + 1) for i in range(n)]
    losses = [2.5 * 0.97 ** i for i in range(n)]
    losses[25] *= 6   # a loss spike
    want = spikes([tw.f32(x) for x in losses], 50, 10, 3, 0)
    y = write(os.path.join(TMP, "spike.yaml"), """\
rules:
  - rule: LossSpike
    actions: [StopTraining]
""")
    r, lines = launched("spike", y, ["--every", every,
                                     "--losses", ",".join(repr(x) for x in losses)])
    sc = C.scope("spike", r)
    sc.eq("the spike fires (computed here)", want, [25])
    STEP_OF_GLOBAL.update({i: s for i, s in enumerate(steps)})
    check_stopped(sc, r, lines, "LossSpike", want[0] if want else None, steps[-1])


def test_watch():
    """run --watch on a growing folder: a torn record appended to the first
    file and a new file in a new run folder, whose NaN loss NonFiniteMetric
    finds; StopTraining stops the --training-pid process, whose exit ends
    the watch.  Ordered by events: the second part is written once smrules
    has said (its status line) that it saw the first three steps."""
    d = os.path.join(TMP, "watch")
    os.makedirs(d)
    a = os.path.join(d, tw.event_file_name(0))
    w = tw.Writer(a)
    for s in (1, 2, 3):
        w.scalar("train/loss", s, 1.0 / s)
    w.close()
    y = write(os.path.join(TMP, "watch.yaml"),
              "rules:\n  - rule: NonFiniteMetric\n    actions: [StopTraining]\n")
    trainer = subprocess.Popen(["sleep", "120"])
    run_ = lib.Running(["run", "--trial", d, "--rules", y, "--watch", "--json", "--fresh",
                        "--training-pid", str(trainer.pid), "--heartbeat", "0.05",
                        "--output", os.path.join(TMP, "out-watch")])
    sc = C.scope("watch", None)
    try:
        seen = run_.wait_line(r"steps seen: 3\b")
        sc.ok(seen, "smrules saw the first three steps")
        with open(a, "ab") as f:  # step 4 cut after 10 bytes: waited for
            f.write(tw.record(tw.event(4, [tw.v_simple("train/loss", 0.25)]))[:10])
        later = os.path.join(d, "later")
        os.makedirs(later)
        w = tw.Writer(os.path.join(later, tw.event_file_name(1)))
        w.scalar("train/loss", 5, float("nan"))
        w.close()
        rc, out, err = run_.finish(limit=120)
    finally:
        if trainer.poll() is None:
            trainer.kill()
        trainer.wait()
    r = lib.Result(run_.args[1:], rc, out, err)
    sc = C.scope("watch", r)
    if not sc.process():
        return
    sc.eq("the training process got SIGTERM", trainer.returncode, -15)
    rs = rules_by_name(r.obj)
    # pairs (TRAIN, 1), (TRAIN, 2), (TRAIN, 3) then (TRAIN, 5): global 3
    sc.eq("first trigger", rs.get("NonFiniteMetric", {}).get("first_trigger_step"), 3)
    sc.eq("ended by the trainer's exit", ((r.obj or {}).get("training") or {}).get("ended_by"),
          "trainer_exit")
    sc.ok("truncated" not in err and "Error" not in err, "no error for the torn record",
          lib.short(err, 300))


def main():
    try:
        test_watch()
        test_offline()
        test_spike_rules()
        test_stall()
        test_spike_stop()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    C.finish()


if __name__ == "__main__":
    main()
