"""A small classifier with two training-mode Dropouts, each inside what a
3-stage cut makes a stage (Linear, Dropout, activation), exported for
training with its cross-entropy loss and a symbolic batch axis, and a data
set. Used by pipeline-dropout.test: a backward that recomputes its forward
(--recompute) must apply the forward's mask, not draw a new one.

usage: make_dropout.py OUT_DIR
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.drop1 = nn.Dropout(0.3)
        self.fc2 = nn.Linear(32, 32)
        self.drop2 = nn.Dropout(0.4)
        self.fc3 = nn.Linear(32, 32)
        self.head = nn.Linear(32, 5)

    def forward(self, x, y):
        h = torch.relu(self.drop1(self.fc1(x)))
        h = torch.tanh(self.drop2(self.fc2(h)))
        h = torch.relu(self.fc3(h))
        return nn.functional.cross_entropy(self.head(h), y)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    net = Net().train()
    x, y = torch.randn(8, 16), torch.randint(0, 5, (8,))
    torch.onnx.export(net, (x, y), os.path.join(out, "dropout.onnx"),
                      input_names=["x", "y"], output_names=["loss"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=14)
    rng = np.random.default_rng(0)
    np.savez(os.path.join(out, "dropout.npz"),
             x=rng.standard_normal((64, 16)).astype(np.float32),
             y=rng.integers(0, 5, 64).astype(np.int64))


if __name__ == "__main__":
    main()
