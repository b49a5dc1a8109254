"""A Lightning callback that saves the module when StopTraining asks for one
(docs/actions.md#checkpoint-before-stop).

    trainer = L.Trainer(..., callbacks=[CheckpointOnSignal()])

rules.yaml:
    actions:
      StopTraining:
        checkpoint_signal: USR2
        checkpoint_file: ckpt/step-*.pt

SIGUSR2, not USR1: Lightning keeps SIGUSR1 for SLURM's requeue.  The
handler saves the module's weights with torch.save, not
trainer.save_checkpoint, which under DDP waits for every rank (a hang's
peers never come).
"""

import os
import signal

import lightning.pytorch as L
import torch


class CheckpointOnSignal(L.Callback):
    def __init__(self, folder="ckpt", sig=signal.SIGUSR2):
        self.module, self.step, self.folder = None, 0, folder
        signal.signal(sig, self.save)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.module, self.step = pl_module, trainer.global_step

    def save(self, signum=None, frame=None):
        if self.module is None:
            return  # before the first step: nothing learnt yet
        os.makedirs(self.folder, exist_ok=True)
        path = os.path.join(self.folder, f"step-{self.step}.pt")
        torch.save(self.module.state_dict(), path + ".tmp")
        os.replace(path + ".tmp", path)
