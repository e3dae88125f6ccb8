#!/usr/bin/env python3
"""Writes an ALBERT-style model: one LayerNorm and one Linear applied four
times (their weights shared by every stage a pipeline cuts the loop into),
its data and PyTorch's losses (OUT/shared_norm.onnx, .npz, .torch.jsonl: 6
SGD steps, lr 0.1, step s reads rows 8s .. 8s+7 mod 32).

    make_shared_norm.py OUT
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_common import export_and_train  # noqa: E402


class SharedNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(12, 16)
        self.ln = nn.LayerNorm(16)
        self.lin = nn.Linear(16, 16)
        self.head = nn.Linear(16, 5)
        with torch.no_grad():  # scale and bias apart from their 1 and 0
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x, y):
        h = self.inp(x)
        for _ in range(4):
            h = h + torch.tanh(self.lin(self.ln(h)))
        return F.cross_entropy(self.head(self.ln(h)), y)


torch.manual_seed(0)
x = np.random.RandomState(1).randn(32, 12).astype(np.float32)
y = np.random.RandomState(2).randint(0, 5, 32).astype(np.int64)
export_and_train(SharedNorm(), (torch.randn(8, 12), torch.randint(0, 5, (8,))),
                 {"x": x, "y": y}, os.path.join(sys.argv[1], "shared_norm"), training=True)
