#!/usr/bin/env python3
"""A stand-in trainer that can show where it is stuck: it registers
faulthandler on SIGUSR1 the way docs/actions.md#dumpstacks tells a user to
(writing every thread's stack to stacks.txt in its working directory),
writes the steps of a recorded trial (tests/fixtures/trials/*), then blocks
forever in fake_allreduce(), the way a trainer hangs in a collective whose
peer died.  Two threads wait there, a "communication" thread (in it before
the trial appears) and the main one.  Only a signal ends it.

    stacks_trainer.py --source TRIAL --out DIR
"""

import argparse
import faulthandler
import os
import signal
import sys
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import standin_trainer  # noqa: E402

# the one line a trainer adds (docs/actions.md#dumpstacks)
faulthandler.register(signal.SIGUSR1, file=open("stacks.txt", "w"), all_threads=True)


def fake_allreduce(done, ready=None):
    if ready:
        ready.set()
    done.wait()  # never set: the peer never answers


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--source", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    # The trial is written aside and renamed into place once the
    # communication thread waits in fake_allreduce: whenever a rule fires
    # and the stacks are asked for, at least that thread is in it.
    stage = a.out + ".writing"
    os.makedirs(stage, exist_ok=True)
    for dirpath, _, files in os.walk(os.path.join(a.source, "collections")):
        for name in files:
            rel = os.path.relpath(os.path.join(dirpath, name), a.source)
            standin_trainer.put(os.path.join(a.source, rel), os.path.join(stage, rel))
    for step, index, events in standin_trainer.steps_of(a.source):
        for rel in events + index:
            standin_trainer.put(os.path.join(a.source, rel), os.path.join(stage, rel))
    done, ready = threading.Event(), threading.Event()
    threading.Thread(target=fake_allreduce, args=(done, ready), daemon=True).start()
    ready.wait()
    os.rename(stage, a.out)
    print("waiting in fake_allreduce", flush=True)
    fake_allreduce(done)


if __name__ == "__main__":
    main()
