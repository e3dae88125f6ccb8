"""Small models whose activations reach several later layers, for cuts
into three stages and more (pipeline-cuts3.test):

- resnobn: h = relu(fc1(x)); t = h + fc2(h); loss(head(t) + head2(h)).
  Cut after fc2 and after the Add, stage 1 is the Add alone: both its
  operands come from stage 0 and h also goes on to stage 2.
- skip3: h = tanh(fc1(x)) read by three later layers (u + h, v * h,
  w + h), so a value crosses several cuts and several of one stage's ops
  give it gradients.
- bnskip: h = fc1(x); loss(head(relu(bn(fc2(h))) + h)). Cut after fc2 and
  after the BatchNormalization, h passes through the middle stage, which
  holds the BatchNormalization's running statistics as state.

usage: make_skip_models.py OUT_DIR
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn


class ResNoBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 6)
        self.fc2 = nn.Linear(6, 6)
        self.head = nn.Linear(6, 3)
        self.head2 = nn.Linear(6, 3)

    def forward(self, x, y):
        h = torch.relu(self.fc1(x))
        t = h + self.fc2(h)
        return nn.functional.cross_entropy(self.head(t) + self.head2(h), y)


class Skip3(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.c = nn.Linear(8, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x, y):
        h = torch.tanh(self.fc1(x))
        u = torch.tanh(self.a(h))
        v = torch.tanh(self.b(u + h))
        w = torch.tanh(self.c(v * h))
        return nn.functional.cross_entropy(self.head(w + h), y)


class BnSkip(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 8)
        self.bn = nn.BatchNorm1d(8)
        self.head = nn.Linear(8, 3)

    def forward(self, x, y):
        h = self.fc1(x)
        u = self.bn(self.fc2(h))
        return nn.functional.cross_entropy(self.head(torch.relu(u) + h), y)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, cls in [("resnobn", ResNoBN), ("skip3", Skip3), ("bnskip", BnSkip)]:
        torch.manual_seed(0)
        net = cls().train()
        torch.onnx.export(net, (torch.randn(8, 6), torch.zeros(8, dtype=torch.long)),
                          os.path.join(out, name + ".onnx"), input_names=["x", "y"],
                          output_names=["loss"], opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
        rng = np.random.default_rng(0)
        np.savez(os.path.join(out, name + ".npz"),
                 x=rng.standard_normal((32, 6)).astype(np.float32),
                 y=rng.integers(0, 3, 32).astype(np.int64))


if __name__ == "__main__":
    main()
