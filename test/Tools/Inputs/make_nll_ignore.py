#!/usr/bin/env python3
"""Writes OUT/nll.onnx (a 2-layer classifier whose loss is
F.nll_loss(F.log_softmax(...), y): NegativeLogLikelihoodLoss with
ignore_index -100), OUT/nll.npz (32 rows; some labels -100, micro-batches of
batch 8 counting 0 to 2 of them) and OUT/torch.jsonl: PyTorch's loss at each
of 6 SGD steps (lr 0.1, step s reads rows 8s .. 8s+7 mod 32), as pipe-run
logs it.

    make_nll_ignore.py OUT
"""
import json
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

out = sys.argv[1]
torch.manual_seed(0)


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(32, 5)

    def forward(self, x, y):
        return F.nll_loss(F.log_softmax(self.b(torch.relu(self.a(x))), dim=1), y)


m = M()
torch.onnx.export(m, (torch.randn(8, 16), torch.randint(0, 5, (8,))), f"{out}/nll.onnx",
                  input_names=["x", "y"], output_names=["loss"], opset_version=17,
                  do_constant_folding=False)
x = np.random.RandomState(1).randn(32, 16).astype(np.float32)
y = np.random.RandomState(2).randint(0, 5, 32).astype(np.int64)
y[[0, 1, 5, 9, 12, 13, 14, 15]] = -100
np.savez(f"{out}/nll.npz", x=x, y=y)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
with open(f"{out}/torch.jsonl", "w") as f:
    for s in range(6):
        i = np.arange(s * 8, s * 8 + 8) % 32
        loss = m(torch.from_numpy(x[i]), torch.from_numpy(y[i]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        f.write(json.dumps({"step": s, "loss": float(loss)}) + "\n")
