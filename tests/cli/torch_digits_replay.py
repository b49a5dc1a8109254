#!/usr/bin/python3
"""tests/cli/torch_digits_replay.py OUT_DIR - the training run that wrote
tests/fixtures/trials/healthy_mlp_digits with smdebug 1.0.34's hook
(its EXPECT.json, produced_by), replayed with smrules.torch.Hook: the same
model (module and class names), loss, optimizer, batch sizes, split sizes,
epochs, modes, save configs and collections.  The data are random of the
digits data set's shapes (1437 training and 360 held-out rows of 64
features, 10 classes): the values differ, every name, step, shape and
byte length must not (test_torch_smdebug_layout.py)."""

import sys

import torch
import torch.nn as nn

import smrules.torch as smd


class Block(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.fc(x))


class DigitsMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = Block(64, 48)
        self.layer2 = Block(48, 32)
        self.out = nn.Linear(32, 10)

    def forward(self, x):
        return self.out(self.layer2(self.layer1(x)))


def main(out_dir):
    torch.manual_seed(7)
    torch.set_num_threads(1)
    n_train, n_val = 1437, 360
    x = torch.rand(n_train + n_val, 64) * 16
    y = torch.randint(0, 10, (n_train + n_val,))
    model = DigitsMLP()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=0.002)
    hook = smd.Hook(
        out_dir=out_dir,
        # PREDICT and GLOBAL as the fixture's collections file has them
        # (EXPECT.json: "modes_not_listed_in_a_save_config": "never saved")
        save_config=smd.SaveConfig(mode_save_configs={
            smd.modes.TRAIN: smd.SaveConfigMode(save_interval=8),
            smd.modes.EVAL: smd.SaveConfigMode(save_interval=3),
            smd.modes.PREDICT: smd.SaveConfigMode(save_interval=1, end_step=0),
            smd.modes.GLOBAL: smd.SaveConfigMode(save_interval=1, end_step=0)}),
        include_collections=["weights", "biases", "gradients", "losses", "relu_activations"],
        include_workers="one")
    hook.get_collection("relu_activations").include(".*relu_output")
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for _ in range(4):
        hook.set_mode(smd.modes.TRAIN)
        model.train()
        for i in range(0, n_train, 64):
            j = min(i + 64, n_train)
            opt.zero_grad()
            loss = loss_fn(model(x[i:j]), y[i:j])
            loss.backward()
            opt.step()
        hook.set_mode(smd.modes.EVAL)
        model.eval()
        with torch.no_grad():
            for i in range(n_train, n_train + n_val, 120):
                loss_fn(model(x[i:i + 120]), y[i:i + 120])
    hook.close()


if __name__ == "__main__":
    main(sys.argv[1])
