#!/usr/bin/env python3
"""A plain PyTorch training loop that saves a checkpoint when StopTraining
asks for one (docs/actions.md#checkpoint-before-stop), then lets SIGTERM
end it.  The part a trainer adds is between the two "smrules" comments.

    python3 torch_trainer.py [--steps N]   (N: 0 trains until stopped)

rules.yaml:
    actions:
      StopTraining:
        checkpoint_signal: USR2
        checkpoint_file: ckpt/step-*.pt
"""

import argparse
import os
import signal

import torch

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=0)
a = p.parse_args()

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0  # the last finished step

# --- smrules: save when asked (SIGUSR2), the state of the last finished step
def save_checkpoint(signum=None, frame=None):
    os.makedirs("ckpt", exist_ok=True)
    path = f"ckpt/step-{step}.pt"
    torch.save({"step": step, "model": model.state_dict(),
                "optimizer": optimizer.state_dict()}, path + ".tmp")
    os.replace(path + ".tmp", path)  # whole or absent: smrules waits for it


signal.signal(signal.SIGUSR2, save_checkpoint)
# --- smrules

print("training", flush=True)
while a.steps == 0 or step < a.steps:
    x = torch.randn(64, 16)
    y = x.sum(dim=1, keepdim=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    step += 1
