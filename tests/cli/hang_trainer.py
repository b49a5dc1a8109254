#!/usr/bin/env python3
"""A stand-in trainer for the whole hang story (docs/live.md, "When training
hangs"): it trains a small "model" (a list of numbers changed every step),
writes the steps of a recorded trial (tests/fixtures/trials/*) the way
smdebug's hook does, then hangs in fake_allreduce(), as a trainer does in a
collective whose peer died: a "communication" thread and the main thread
both wait there, forever.  It does what docs/actions.md tells a user to add:

  * faulthandler on SIGUSR1, writing every thread's stack to stacks.txt in
    its working directory (for DumpStacks);
  * a checkpoint on request (for StopTraining's checkpoint step), by
    --checkpoint:
      signal  SIGUSR2's handler saves the model of the last finished step
              to ckpt/step-N.json (written as .tmp, then renamed), as the
              PyTorch snippet of docs/actions.md does; the handler runs in
              the main thread even while it waits in fake_allreduce;
      file    a thread polls for ckpt.request (every 0.05 s) and saves
              then, removing the request;
      never   SIGUSR2 is ignored and no request is read: a trainer whose
              save never comes (stuck in a CUDA call, or never taught);
      none    nothing is set up: SIGUSR2 ends it (Python's default), as it
              ends a trainer that was not taught;
  * SIGTERM ends it, as it ends Python (--on-sigterm ignore: it is logged
    and ignored, only SIGKILL ends it).

    hang_trainer.py --source TRIAL --out DIR [--step-delay S]
        [--hold-after STEP --release F] [--hang-after STEP]
        [--checkpoint signal|file|never] [--log FILE]
        [--stall-worker NAME --stall-after STEP] [--on-sigterm ignore]

  --hold-after    stop writing after that step until the file --release
                  exists (a test decides when training resumes)
  --hang-after    hang in fake_allreduce after that step (default: after
                  the last step of the source trial)
  --stall-worker  with --stall-after: that worker (e.g. worker_1 of a
                  two-worker trial) writes nothing after that step while
                  the others go on (a rank stuck while its peers are not)
  --log           one line per event with wall-clock times: "index STEP T",
                  "hang STEP T", "checkpoint PATH T", "signal NAME T"

Only the standard library: any python3 can run it.
"""

import argparse
import faulthandler
import json
import os
import signal
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import standin_trainer  # noqa: E402

# the one line for DumpStacks (docs/actions.md#dumpstacks)
faulthandler.register(signal.SIGUSR1, file=open("stacks.txt", "w"), all_threads=True)

LOG = None
MODEL = {"step": -1, "weights": [0.0] * 8}
SAVE_LOCK = threading.RLock()  # the handler may run in a thread holding it


def log(line):
    if LOG:
        with open(LOG, "a") as f:
            f.write("%s %.6f\n" % (line, time.time()))


def save_checkpoint():
    """The model of the last finished step, as ckpt/step-N.json (a .tmp
    renamed into place: a reader never sees half a checkpoint)."""
    with SAVE_LOCK:
        state = json.dumps(MODEL)
        os.makedirs("ckpt", exist_ok=True)
        path = os.path.join("ckpt", "step-%d.json" % MODEL["step"])
        with open(path + ".tmp", "w") as f:
            f.write(state)
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)
    log("checkpoint %s" % path)


def on_checkpoint_signal(sig, frame):
    log("signal %s" % signal.Signals(sig).name)
    save_checkpoint()


def poll_request():
    while True:
        if os.path.exists("ckpt.request"):
            log("request ckpt.request")
            save_checkpoint()
            os.unlink("ckpt.request")
        time.sleep(0.05)


def on_term(sig, frame):
    log("signal %s" % signal.Signals(sig).name)
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)


def fake_allreduce(done, ready=None):
    if ready:
        ready.set()
    done.wait()  # never set: the peer never answers


def train_step(step):
    global MODEL
    w = [x * 0.9 + 0.1 * (step % 7) for x in MODEL["weights"]]
    MODEL = {"step": step, "weights": w}  # one assignment: never half a step


def main():
    global LOG
    p = argparse.ArgumentParser()
    p.add_argument("--source", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--step-delay", type=float, default=0.05)
    p.add_argument("--hold-after", type=int)
    p.add_argument("--release")
    p.add_argument("--hang-after", type=int)
    p.add_argument("--checkpoint", choices=("signal", "file", "never", "none"),
                   default="signal")
    p.add_argument("--on-sigterm", choices=("default", "ignore"), default="default")
    p.add_argument("--log")
    p.add_argument("--stall-worker")
    p.add_argument("--stall-after", type=int)
    a = p.parse_args()
    LOG = a.log
    signal.signal(signal.SIGTERM, on_term if a.on_sigterm == "default" else
                  lambda sig, frame: log("signal SIGTERM"))
    if a.checkpoint == "signal":
        signal.signal(signal.SIGUSR2, on_checkpoint_signal)
    elif a.checkpoint == "never":
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    elif a.checkpoint == "file":
        threading.Thread(target=poll_request, daemon=True).start()
    os.makedirs(a.out, exist_ok=True)
    for dirpath, _, files in os.walk(os.path.join(a.source, "collections")):
        for name in files:
            rel = os.path.relpath(os.path.join(dirpath, name), a.source)
            standin_trainer.put(os.path.join(a.source, rel), os.path.join(a.out, rel))
    done = threading.Event()
    for step, index, events in standin_trainer.steps_of(a.source):
        time.sleep(a.step_delay)
        train_step(step)
        for rel in events + index:  # the event file is closed first
            if (a.stall_worker and step > a.stall_after and
                    "_%s." % a.stall_worker in os.path.basename(rel)):
                continue
            standin_trainer.put(os.path.join(a.source, rel), os.path.join(a.out, rel))
        log("index %d" % step)
        print("step %d" % step, flush=True)
        if a.hang_after is not None and step >= a.hang_after:
            break
        if a.hold_after is not None and step >= a.hold_after:
            log("hold %d" % step)
            while not os.path.exists(a.release):
                time.sleep(0.01)
            a.hold_after = None
    ready = threading.Event()
    threading.Thread(target=fake_allreduce, args=(done, ready), daemon=True).start()
    ready.wait()
    log("hang %d" % MODEL["step"])
    print("waiting in fake_allreduce", flush=True)
    fake_allreduce(done)


if __name__ == "__main__":
    main()
