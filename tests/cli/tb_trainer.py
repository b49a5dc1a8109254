#!/usr/bin/env python3
"""A stand-in for a Hugging Face Trainer run logging to TensorBoard (its
TensorBoardCallback over torch.utils.tensorboard.SummaryWriter): one event
file events.out.tfevents.<time>.<host>.<pid>.0 in --out; first the `args`
text summary, then at every logging step one add_scalar event (a
simple_value) per key, in HF's order: train/loss, train/grad_norm,
train/learning_rate, train/epoch; with --eval-every, eval/loss,
eval/runtime at those steps; a flush after each log, as the callback does.

    tb_trainer.py --out DIR --losses L1,L2,... [--every N]
        [--grad-norms G1,...] [--eval-every N --eval-losses ...] [--log F]

--losses gives the loss at steps N, 2N, ... (N = --every, HF's
logging_steps).  After the last step it waits for a signal (a trainer that
would go on), for at most --hang seconds, then exits 3: a run nobody
stopped.  --log gets "wrote STEP T" after each step is flushed and
"signal NAME T" when a signal arrives (then it dies of it, as Python
does).  Standard library only.
"""

import argparse
import os
import signal
import socket
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tbwriter as tw  # noqa: E402


def floats(s):
    return [float(x) for x in s.split(",")] if s else []


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--losses", required=True)
    p.add_argument("--grad-norms", default="")
    p.add_argument("--every", type=int, default=10)
    p.add_argument("--eval-every", type=int, default=0)
    p.add_argument("--eval-losses", default="")
    p.add_argument("--hang", type=float, default=60.0)
    p.add_argument("--log")
    a = p.parse_args()
    log = open(a.log, "a") if a.log else None

    def note(*words):
        if log:
            log.write(" ".join(str(w) for w in words) + " %.6f\n" % time.time())
            log.flush()

    def on_signal(sig, frame):
        note("signal", signal.Signals(sig).name)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)

    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, on_signal)
    os.makedirs(a.out, exist_ok=True)
    name = "events.out.tfevents.%d.%s.%d.0" % (int(time.time()), socket.gethostname(),
                                                os.getpid())
    w = tw.Writer(os.path.join(a.out, name))
    w.values(0, [tw.v_text("args", '{"learning_rate": 5e-05, "logging_steps": %d}' % a.every)])
    losses, norms, evals = floats(a.losses), floats(a.grad_norms), floats(a.eval_losses)
    k_eval = 0
    for i, loss in enumerate(losses):
        step = (i + 1) * a.every
        w.scalar("train/loss", step, loss)
        w.scalar("train/grad_norm", step, norms[i] if i < len(norms) else 1.0)
        w.scalar("train/learning_rate", step, 5e-05 * (1 - step / 10000.0))
        w.scalar("train/epoch", step, step / 1000.0)
        if a.eval_every and step % a.eval_every == 0 and k_eval < len(evals):
            w.scalar("eval/loss", step, evals[k_eval])
            w.scalar("eval/runtime", step, 1.5)
            k_eval += 1
        note("wrote", step)
    end = time.time() + a.hang
    while time.time() < end:
        time.sleep(0.05)
    note("unstopped")
    sys.exit(3)


if __name__ == "__main__":
    main()
