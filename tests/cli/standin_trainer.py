#!/usr/bin/env python3
"""A stand-in for a training script using smdebug's hook: it writes a trial
step by step the way the hook does (collections first; for each step the
event file, then the index file, each written as <name>.tmp and renamed
into place; training_job_end.ts at the end), replaying the steps of a
recorded trial (tests/fixtures/trials/*) at a chosen pace.

    standin_trainer.py --source TRIAL --out DIR [--start-delay S]
        [--step-delay S] [--fail-after STEP --exit-code N]
        [--die-after STEP] [--hang-after STEP] [--hold-after STEP --release F]
        [--log FILE] [--pid-file F] [--on-sigterm default|exit0|ignore]

  --start-delay   seconds before DIR is created (imports, data loading)
  --fail-after    exit with --exit-code after writing that step (a crash:
                  no end marker)
  --die-after     kill itself with SIGKILL after that step (an OOM kill)
  --hang-after    stop writing after that step and wait (to be killed)
  --hold-after    stop writing after that step until the file --release
                  exists, then go on (a test decides when training resumes)
  --log           one line per event, with wall-clock times:
                  "index STEP T" once a step's index file is in place,
                  "signal NAME T" when a signal arrives (then the default
                  action: SIGTERM/SIGINT kill it, as they would Python)
  --on-sigterm    exit0: SIGTERM ends it with status 0 (a training script
                  that saves and exits cleanly, as smdebug's hook lets it);
                  ignore: SIGTERM is logged and training goes on (only
                  SIGKILL ends it)

It uses only the standard library, so any python3 can run it.
"""

import argparse
import os
import shutil
import signal
import sys
import time


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--source", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--start-delay", type=float, default=0.0)
    p.add_argument("--step-delay", type=float, default=0.05)
    p.add_argument("--fail-after", type=int)
    p.add_argument("--exit-code", type=int, default=1)
    p.add_argument("--die-after", type=int)
    p.add_argument("--hang-after", type=int)
    p.add_argument("--hold-after", type=int)
    p.add_argument("--release")
    p.add_argument("--log")
    p.add_argument("--pid-file")
    p.add_argument("--on-sigterm", choices=("default", "exit0", "ignore"), default="default")
    return p.parse_args()


LOG = None


def log(line):
    if LOG:
        with open(LOG, "a") as f:
            f.write("%s %.6f\n" % (line, time.time()))


ON_SIGTERM = "default"


def on_signal(sig, frame):
    log("signal %s" % signal.Signals(sig).name)
    if sig == signal.SIGTERM and ON_SIGTERM == "exit0":
        sys.exit(0)
    if sig == signal.SIGTERM and ON_SIGTERM == "ignore":
        return
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)


def put(src, dst):
    """Copy src to dst as the hook writes: dst.tmp, then rename."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(src, dst + ".tmp")
    os.rename(dst + ".tmp", dst)


def steps_of(src):
    """[(step, [(relative index path)], [(relative event path)])] ascending."""
    by_step = {}
    for kind in ("index", "events"):
        for dirpath, _, files in os.walk(os.path.join(src, kind)):
            for name in files:
                rel = os.path.relpath(os.path.join(dirpath, name), src)
                step = int(name.split("_", 1)[0])
                by_step.setdefault(step, ([], []))[0 if kind == "index" else 1].append(rel)
    return sorted((s, sorted(v[0]), sorted(v[1])) for s, v in by_step.items())


def main():
    global LOG, ON_SIGTERM
    a = parse()
    LOG = a.log
    ON_SIGTERM = a.on_sigterm
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    if a.pid_file:
        with open(a.pid_file + ".tmp", "w") as f:
            f.write("%d\n" % os.getpid())
        os.rename(a.pid_file + ".tmp", a.pid_file)
    time.sleep(a.start_delay)
    os.makedirs(a.out, exist_ok=True)
    for dirpath, _, files in os.walk(os.path.join(a.source, "collections")):
        for name in files:
            rel = os.path.relpath(os.path.join(dirpath, name), a.source)
            put(os.path.join(a.source, rel), os.path.join(a.out, rel))
    for step, index, events in steps_of(a.source):
        time.sleep(a.step_delay)
        for rel in events + index:  # the event file is closed first
            put(os.path.join(a.source, rel), os.path.join(a.out, rel))
        log("index %d" % step)
        print("step %d" % step, flush=True)
        if a.fail_after is not None and step >= a.fail_after:
            print("Traceback (most recent call last): stand-in failure", file=sys.stderr)
            sys.exit(a.exit_code)
        if a.die_after is not None and step >= a.die_after:
            os.kill(os.getpid(), signal.SIGKILL)
        if a.hang_after is not None and step >= a.hang_after:
            while True:
                time.sleep(1)
        if a.hold_after is not None and step >= a.hold_after:
            log("hold %d" % step)
            while not os.path.exists(a.release):
                time.sleep(0.01)
            a.hold_after = None
    with open(os.path.join(a.out, "training_job_end.ts"), "w") as f:
        f.write("%d\n" % int(time.time()))
    log("end")


if __name__ == "__main__":
    main()
