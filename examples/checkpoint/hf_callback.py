"""A Hugging Face Trainer callback that saves the model when StopTraining
asks for one (docs/actions.md#checkpoint-before-stop).

    trainer = Trainer(model=model, args=args, ..., callbacks=[CheckpointOnSignal()])

rules.yaml (args.output_dir = "out"):
    actions:
      StopTraining:
        checkpoint_signal: USR2
        checkpoint_file: out/smrules-step-*.pt

The handler saves at once, from the main thread, the weights of the last
finished step: it does not wait for the step to end (a hung step never
ends), so it is Trainer's own checkpoint folder that it does not write.
"""

import os
import signal

import torch
from transformers import TrainerCallback


class CheckpointOnSignal(TrainerCallback):
    def __init__(self, sig=signal.SIGUSR2):
        self.model, self.step, self.dir = None, 0, "."
        signal.signal(sig, self.save)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.model, self.step, self.dir = model, state.global_step, args.output_dir

    def save(self, signum=None, frame=None):
        if self.model is None:
            return  # before the first step: nothing learnt yet
        os.makedirs(self.dir, exist_ok=True)
        path = os.path.join(self.dir, f"smrules-step-{self.step}.pt")
        torch.save(self.model.state_dict(), path + ".tmp")
        os.replace(path + ".tmp", path)
