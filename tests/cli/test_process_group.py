#!/usr/bin/env python3
"""StopTraining stops the job, all of it (docs/actions.md#stoptraining):
`smrules run -- COMMAND` starts the command in a process group of its own,
StopTraining signals that group, and the run ends when the group is empty,
not when its leader exits.

- a wrapper that does not exec (`sh -c 'trainer; echo done'`): the trainer
  itself is stopped, not only the shell;
- a command that starts the trainer in the background and exits: smrules
  says so, follows the group, stops the trainer when the rule fires, and
  leaves nothing running;
- benign control: a trainer started directly is stopped as before.

Each check follows from what the trainer wrote (its pid file, its end
marker) and from smrules' exit; nothing waits for a duration."""

import json
import os
import subprocess
import tempfile
import time

import lib

TRAINER = os.path.join(os.path.dirname(lib.SMRULES), "demo-trainer")
RULES = """rules:
  - rule: LossNotDecreasing
    parameters: {num_steps: 10, diff_percent: 0.1, mode: TRAIN}
    actions: [StopTraining]
"""


def alive(pid):
    """Whether pid names a process that has not exited (zombies have)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def launch(tmp, name, command):
    trial = os.path.join(tmp, name)
    rules = os.path.join(tmp, name + ".yaml")
    with open(rules, "w") as f:
        f.write(RULES)
    pidfile = os.path.join(tmp, name + ".pid")
    # the trainer's output goes elsewhere: a trainer left running must not
    # hold smrules' pipes open (the test would wait for it instead of failing)
    cmd = command.format(trainer=TRAINER, trial=trial, pidfile_arg="--pid-file " + pidfile,
                         args="--steps 100000 --interval-ms 10 --plateau-at 5 "
                              ">/dev/null 2>&1 </dev/null")
    p = subprocess.run([lib.SMRULES, "run", "--trial", trial, "--rules", rules, "--json",
                        "--fresh", "--output", os.path.join(tmp, name + "-out"), "--timeout",
                        "300", "--", "sh", "-c", cmd],
                       capture_output=True, text=True, timeout=600, cwd=lib.ROOT)
    try:
        obj = json.loads(p.stdout)
    except ValueError:
        obj = None
    # written before the trainer's first step; a trainer smrules left
    # behind may write it only after smrules has exited
    guard = time.monotonic() + lib.TIMEOUT
    while not os.path.exists(pidfile) and time.monotonic() < guard:
        time.sleep(0.01)
    with open(pidfile) as f:
        trainer_pid = int(f.read().split()[0])
    return p, obj, trainer_pid, trial


def check(c, tmp, name, label, command, follows):
    sc = c.scope(label)
    p, obj, trainer_pid, trial = launch(tmp, name, command)
    left = alive(trainer_pid)
    if left:  # a failure: nothing may outlive the test
        os.kill(trainer_pid, 9)
    sc.ok(not left, "the trainer is not left running", "pid %d" % trainer_pid)
    if not sc.ok(obj is not None, "run --json", p.stderr[-500:]):
        return
    sc.eq("exit 1: the rule fired", p.returncode, 1)
    acts = obj.get("actions") or []
    stop = [a for a in acts if a.get("action") == "StopTraining"]
    sc.ok(stop and stop[0].get("outcome") == "ok", "StopTraining ok", lib.short(acts)[:400])
    sc.ok(stop and "process group" in (stop[0].get("detail") or ""),
          "the group was signalled", lib.short(stop)[:400])
    sc.ok(os.path.exists(os.path.join(trial, "training_job_end.ts")),
          "the trainer itself got SIGTERM (it wrote its end marker)")
    if follows is not None:  # a wrapper may die before its trainer: either way
        sc.eq("smrules said it follows the group", "still run" in p.stderr, follows)


def main():
    c = lib.Checker("test_process_group")
    with tempfile.TemporaryDirectory(prefix="smrules-pg-") as tmp:
        check(c, tmp, "direct", "benign control: exec'd trainer",
              "exec {trainer} {trial} {pidfile_arg} {args}", False)
        check(c, tmp, "wrapper", "a wrapper that does not exec",
              "{trainer} {trial} {pidfile_arg} {args}; echo done >&2", None)
        check(c, tmp, "background", "a trainer started in the background",
              "{trainer} {trial} {pidfile_arg} {args} & echo started >&2",
              True)
    c.finish()


if __name__ == "__main__":
    main()
