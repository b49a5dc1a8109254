#!/usr/bin/env python3
"""End-to-end: TrainingHang (docs/rules/TrainingHang.md) catches a launched
trainer that hangs, and StopTraining stops it.

  hang   `run -- python3 standin_trainer.py --hold-after 16 --hang-after 35`
         with TrainingHang (min_seconds 10) and StopTraining: the trainer
         writes steps 0..16 and holds; once smrules' status line says it
         has seen step 16 (so the rule saw those steps appear) the test lets
         it go on: steps 23..35 appear later, which gives the rule an
         interval to learn from, then the trainer hangs for good.  TrainingHang
         fires, StopTraining sends SIGTERM, smrules exits 1; the report names
         the trainer's last step and a threshold of max(3 x the typical
         interval it reports, 10 s), exceeded.  min_seconds is the margin
         for the hold itself: the trainer is silent until smrules' next
         status line, which a sanitizer build on a loaded machine may print
         a second or more later; ten times that is never reached.

  flow   the whole story of docs/live.md ("When training hangs"), with the
         rules.yaml shown there, in one `run ... -- python3 hang_trainer.py`: TrainingHang fires on the
         hung trainer, DumpStacks keeps its stacks (naming fake_allreduce),
         StopTraining asks for a checkpoint by SIGUSR2, sees ckpt/step-N.json
         appear (N: the trainer's last step) and then sends SIGTERM; the
         trainer's log shows hang < checkpoint < SIGTERM.
  watched  the same with a trainer started on its own and followed with
         `run --watch --training-pid PID`: its stacks, its checkpoint, and
         it ends by SIGTERM.
  straggler  two workers (tests/fixtures/trials/two_workers_ddp): worker_1
         writes nothing after step 4 while worker_0 goes on to step 20 and
         then the trainer hangs; with max_step_lag 8 and straggler_seconds
         2 (and no hang report: min_seconds 1e6) TrainingHang reports
         worker_1 at step 4, 16 steps behind step 20, and StopTraining
         ends the run.
  metrics  `run --profile DIR -- ...`: the hang's report says what the CPUs
         did during the silence, and the mean it gives is the mean of the
         CPUUtilization readings the recording holds between the silence's
         start and the report (read back from DIR by the test).

A trainer that ends normally is not tested here: whether a loaded machine
pauses longer than a short min_seconds is timing; the unit test
(tests/unit/test_training_hang.c) covers the end marker on a fake clock.

No check depends on how fast the machine is: the test waits for lines and
for exits; the trainer hangs until it is stopped, so only the rule can end
the run (the wait limits are hang guards).
"""

import json
import os
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

MIN_SECONDS = 10.0

HERE = os.path.dirname(os.path.abspath(__file__))
STANDIN = [sys.executable, os.path.join(HERE, "standin_trainer.py")]
HEALTHY = os.path.join(lib.FIXTURES, "trials", "healthy_mlp_digits")


write = lib.write_text


def rules(tmp):
    return write(os.path.join(tmp, "rules.yaml"),
                 "rules:\n  - rule: TrainingHang\n    parameters:\n"
                 "      factor: 3\n      min_seconds: %g\n      warmup_steps: 0\n"
                 "    actions: [StopTraining]\n" % MIN_SECONDS)


def log_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.split() for line in f if line.strip()]


def test_hang(c, tmp):
    trial, log = os.path.join(tmp, "trial"), os.path.join(tmp, "trainer.log")
    release, out = os.path.join(tmp, "release"), os.path.join(tmp, "out")
    p = lib.Running(["run", "--trial", trial, "--rules", rules(tmp), "--heartbeat", "1",
                     "--output", out, "--"] + STANDIN +
                    ["--source", HEALTHY, "--out", trial, "--step-delay", "0.05",
                     "--hold-after", "16", "--release", release, "--hang-after", "35",
                     "--log", log])
    seen16 = p.wait_line(r"watching: .*\(latest 16\)", stream="stdout")
    open(release, "w").close()
    rc, stdout, stderr = p.finish(limit=max(lib.TIMEOUT, 120))
    sc = c.scope("hang: launched trainer hangs after step 35")
    sc.ok(seen16, "smrules saw step 16 while the trainer held", stdout[-400:] + stderr[-400:])
    sc.eq("exit 1 (issues found, training stopped)", rc, 1)
    events = log_lines(log)
    steps = [int(e[1]) for e in events if e[0] == "index"]
    last = steps[-1] if steps else None
    # 35 unless the machine stalled for longer than the learnt threshold
    # between two steps (then the rule rightly fired on that silence)
    sc.ok(last is not None and last > 16, "the trainer went on past step 16", str(events[-4:]))
    sig = [e for e in events if e[0] == "signal"]
    sc.ok(sig and sig[0][1] == "SIGTERM", "the trainer got SIGTERM", str(events[-3:]))
    sc.ok("stopped by StopTraining (rule TrainingHang)" in stdout,
          "the training line names TrainingHang", stdout[-500:])
    try:
        with open(os.path.join(out, "TrainingHang", "report.json")) as f:
            rep = json.load(f)
    except (OSError, ValueError) as e:
        sc.ok(False, "report.json of TrainingHang", str(e))
        return
    text = json.dumps(rep)
    m = [x for x in _walk(rep) if isinstance(x, dict) and "threshold_seconds" in x]
    sc.ok(m, "a violation with threshold_seconds", text[:600])
    if m:
        v = m[0]
        sc.eq("newest_step: the trainer's last step", v.get("newest_step"), last)
        want = max(3 * v["typical_interval_seconds"], MIN_SECONDS)
        sc.ok(abs(v["threshold_seconds"] - want) < 1e-9,
              "threshold = max(3 x typical interval, min_seconds)", json.dumps(v))
        sc.ok(v["seconds_since_activity"] > v["threshold_seconds"],
              "fired only after the threshold", json.dumps(v))
        sc.ok(v["intervals_learnt"] >= 1, "learnt at least one interval", json.dumps(v))


def run_hang_trainer(tmp, name, rules_text, trainer_args, extra=()):
    """`run ... -- hang_trainer.py` in tmp/name (the trainer's working
    directory), released once smrules has seen step 16 when it holds."""
    d = os.path.join(tmp, name)
    os.makedirs(d)
    rules_path = write(os.path.join(d, "rules.yaml"), rules_text)
    release = os.path.join(d, "release")
    p = lib.launch(["--trial", "trial", "--rules", rules_path, "--heartbeat", "1",
                    "--output", "out", "--json"] + list(extra),
                   os.path.join(HERE, "hang_trainer.py"),
                   ["--out", "trial", "--log", "log", "--release", release] + trainer_args,
                   cwd=d)
    if "--hold-after" in trainer_args:
        p.wait_line(r"watching: .*\(latest 16\)", stream="stdout")
        open(release, "w").close()
    rc, obj, text = p.finish_json()
    return d, rc, obj or {}, text


def first_violation(d, rule="TrainingHang"):
    try:
        with open(os.path.join(d, "out", rule, "report.json")) as f:
            rep = json.load(f)
    except (OSError, ValueError):
        return None, ""
    m = [x for x in _walk(rep) if isinstance(x, dict) and "kind" in x]
    return (m[0] if m else None), json.dumps(rep)[:800]


FLOW_RULES = """rules:
  - rule: TrainingHang
    parameters: {factor: 3, min_seconds: %g, warmup_steps: 0}
    actions: [DumpStacks, StopTraining]
actions:
  StopTraining:
    checkpoint_signal: USR2
    checkpoint_file: ckpt/step-*.json
    checkpoint_timeout_seconds: 600
""" % MIN_SECONDS


def doc_rules():
    """The rules.yaml of docs/live.md's "When training hangs"."""
    with open(os.path.join(lib.ROOT, "docs", "live.md")) as f:
        doc = f.read()
    part = doc[doc.index("## When training hangs"):]
    return part[part.index("```yaml\n") + 8:part.index("```", part.index("```yaml\n") + 8)]


def test_flow(c, tmp):
    d, rc, obj, text = run_hang_trainer(tmp, "flow", doc_rules(),
                                        ["--source", HEALTHY, "--step-delay", "0.05",
                                         "--hold-after", "16"])
    sc = c.scope("flow: detected, stacks kept, checkpoint confirmed, stopped")
    sc.eq("exit 1 (issues found, training stopped)", rc, 1)
    acts = obj.get("actions") or []
    sc.eq("DumpStacks, then StopTraining", [a.get("action") for a in acts],
          ["DumpStacks", "StopTraining"])
    sc.ok(all(a.get("outcome") == "ok" for a in acts), "both ok", json.dumps(acts)[:800])
    events = log_lines(os.path.join(d, "log"))
    kinds = [e[0] + (" " + e[1] if e[0] == "signal" else "") for e in events]
    steps = [int(e[1]) for e in events if e[0] == "index"]
    last = steps[-1] if steps else None
    sc.ok("hang" in kinds and "checkpoint" in kinds and "signal SIGTERM" in kinds and
          kinds.index("hang") < kinds.index("checkpoint") < kinds.index("signal SIGTERM"),
          "the trainer hung, saved, then got SIGTERM", str(kinds[-5:]))
    v, rep = first_violation(d)
    sc.ok(v and v.get("kind") == "hang", "a hang was reported", rep)
    if v:
        sc.eq("at the trainer's last step", v.get("newest_step"), last)
        sc.ok(v["seconds_since_activity"] > v["threshold_seconds"] ==
              max(v["factor"] * v["typical_interval_seconds"], v["min_seconds"]),
              "after its learnt threshold", json.dumps(v))
        sc.eq("the parameters of the page", (v["factor"], v["min_seconds"]), (10, 10))
        sc.ok(v.get("message", "").startswith("no new step for "), "with a message",
              json.dumps(v))
    stacks = os.path.join(d, "out", "TrainingHang", "stacks-step%s.txt" % last)
    text_st = open(stacks).read() if os.path.exists(stacks) else ""
    sc.ok("fake_allreduce" in text_st, "the stacks show where it hung", text[-600:])
    ck = os.path.join(d, "ckpt", "step-%s.json" % last)
    sc.ok(os.path.exists(ck), "the checkpoint of the last step was written", text[-600:])
    stop = [a for a in acts if a.get("action") == "StopTraining"]
    sc.ok(stop and stop[0].get("detail", "").startswith(
        "checkpoint ckpt/step-%s.json written " % last), "the outcome names it",
        json.dumps(stop)[:600])


def test_watched(c, tmp):
    d = os.path.join(tmp, "watched")
    os.makedirs(d)
    release = os.path.join(d, "release")
    trainer = lib.Running([os.path.join(HERE, "hang_trainer.py"), "--source", HEALTHY,
                           "--out", "trial", "--step-delay", "0.05", "--hold-after", "16",
                           "--release", release, "--log", "log"], program=sys.executable, cwd=d)
    rules_path = write(os.path.join(d, "rules.yaml"), doc_rules())
    p = lib.Running(["run", "--watch", "--trial", "trial", "--training-pid", str(trainer.proc.pid),
                     "--rules", rules_path, "--heartbeat", "1", "--output", "out", "--json"],
                    cwd=d)
    seen16 = p.wait_line(r"watching: .*\(latest 16\)", stream="stderr")  # --json: stderr
    open(release, "w").close()
    rc, stdout, stderr = p.finish(limit=max(lib.TIMEOUT, 120))
    trc, _, _ = trainer.finish(limit=max(lib.TIMEOUT, 120))
    sc = c.scope("watched: --watch --training-pid, the same flow")
    sc.ok(seen16, "smrules saw step 16 while the trainer held", stdout[-400:] + stderr[-400:])
    sc.eq("exit 1", rc, 1)
    sc.eq("the trainer ended by SIGTERM", trc, -15)
    events = log_lines(os.path.join(d, "log"))
    steps = [int(e[1]) for e in events if e[0] == "index"]
    last = steps[-1] if steps else None
    sc.ok(os.path.exists(os.path.join(d, "ckpt", "step-%s.json" % last)),
          "the checkpoint of the last step", str(events[-4:]))
    stacks = os.path.join(d, "out", "TrainingHang", "stacks-step%s.txt" % last)
    sc.ok(os.path.exists(stacks) and "fake_allreduce" in open(stacks).read(),
          "the stacks", stdout[-600:])
    v, rep = first_violation(d)
    sc.ok(v and v.get("kind") == "hang" and v.get("newest_step") == last, "a hang at the last step",
          rep)


TWO = os.path.join(lib.FIXTURES, "trials", "two_workers_ddp")


def test_straggler(c, tmp):
    rules_text = ("rules:\n  - rule: TrainingHang\n    parameters: {min_seconds: 1000000, "
                  "max_step_lag: 8, straggler_seconds: 2}\n    actions: [StopTraining]\n")
    d, rc, obj, text = run_hang_trainer(tmp, "straggler", rules_text,
                                        ["--source", TWO, "--step-delay", "0.05",
                                         "--stall-worker", "worker_1", "--stall-after", "4"])
    sc = c.scope("straggler: worker_1 stops at step 4, worker_0 goes on to 20")
    sc.eq("exit 1 (issues found, training stopped)", rc, 1)
    v, rep = first_violation(d)
    sc.ok(v and v.get("kind") == "straggler", "a straggler was reported", rep + text[-400:])
    if not v:
        return
    sc.eq("the worker", v.get("worker"), "worker_1")
    sc.eq("its newest step", v.get("worker_step"), 4)
    sc.eq("the newest of all", v.get("newest_step"), 20)
    sc.eq("steps behind", v.get("steps_behind"), 16)
    sc.ok(v.get("seconds_behind", 0) > 2, "for longer than straggler_seconds", json.dumps(v))
    sc.ok(v.get("message", "").startswith("worker worker_1 is at step 4, 16 steps behind "
                                          "the newest (20)"), "the message says so",
          v.get("message", ""))


def cpu_readings(prof, start, end):
    """CPUUtilization readings of the recording in [start, end], in file
    order (the monitor writes them in time order)."""
    got = []
    base = os.path.join(prof, "system", "incremental")
    for root, _, files in sorted(os.walk(base)):
        for name in sorted(files):
            with open(os.path.join(root, name)) as f:
                for line in f:
                    try:
                        r = json.loads(line)
                    except ValueError:
                        continue
                    if (r.get("Type") == "cpu" and r.get("Dimension") == "CPUUtilization" and
                            start <= r.get("Timestamp", -1) <= end):
                        got.append(r["Value"])
    return got


def test_metrics(c, tmp):
    d, rc, obj, text = run_hang_trainer(tmp, "metrics", FLOW_RULES.replace(
        "[DumpStacks, StopTraining]", "[StopTraining]"),
        ["--source", HEALTHY, "--step-delay", "0.05", "--hold-after", "16"],
        extra=["--profile", "prof"])
    sc = c.scope("metrics: the hang says what the CPUs did during the silence")
    sc.eq("exit 1", rc, 1)
    v, rep = first_violation(d)
    usage = (v or {}).get("system_during_silence")
    sc.ok(usage, "the report has system_during_silence", rep)
    if not usage:
        return
    cpu = usage["cpu"]
    vals = cpu_readings(os.path.join(d, "prof"), usage["from"], usage["to"])
    n = cpu.get("readings", 0)
    # the rule read the recording when it fired; a reading of the last
    # instant may have reached the file just after: the rule saw a prefix
    sc.ok(1 <= n <= len(vals), "readings it saw are in the recording",
          "%d of %d" % (n, len(vals)))
    if 1 <= n <= len(vals):
        want = sum(vals[:n]) / n
        sc.ok(abs(cpu["mean_utilization_percent"] - want) < 1e-6,
              "the mean is the recording's", "%s vs %s" % (cpu["mean_utilization_percent"], want))
        sc.eq("idle or busy by idle_percent (10)", cpu["state"], "idle" if want < 10 else "busy")
    sc.eq("no GPU here", usage["gpu"]["state"], "not recorded")
    sc.ok(("CPUs %s (mean" % cpu["state"]) in v.get("message", ""), "the message says it",
          v.get("message", ""))


def _walk(x):
    yield x
    if isinstance(x, dict):
        for v in x.values():
            yield from _walk(v)
    elif isinstance(x, list):
        for v in x:
            yield from _walk(v)


def main():
    c = lib.Checker("test_training_hang")
    tmp = tempfile.mkdtemp(prefix="smrules-hang-")
    try:
        for fn in (test_hang, test_flow, test_watched, test_straggler, test_metrics):
            if lib.CASE_FILTER and lib.CASE_FILTER not in fn.__name__:
                continue
            fn(c, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
