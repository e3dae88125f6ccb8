#!/usr/bin/env python3
"""Writes models whose loss ignores labels, their data and PyTorch's losses:

- OUT/nll.onnx: a 2-layer classifier, F.nll_loss(F.log_softmax(...), y)
  (NegativeLogLikelihoodLoss with ignore_index -100); OUT/nll.npz: 32 rows,
  some labels -100 (micro-batches of batch 8 counting 0 to 2 of them).
- OUT/shift.onnx: a tiny language model on int32 tokens whose targets are
  computed inside it: the tokens shifted by one, cast to int64, with 0 (the
  padding) ignored (ignore_index 0), the loss scaled by 0.5; OUT/shift.npz:
  32 sequences of 9 tokens, padded at their ends by varying amounts (one
  whole micro-batch of padding).
- OUT/<model>.torch.jsonl: PyTorch's loss at each of 6 SGD steps (lr 0.1,
  step s reads rows 8s .. 8s+7 mod 32), as pipe-run logs it.

    make_ignore_models.py OUT
"""
import json
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

out = sys.argv[1]


class Nll(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(32, 5)

    def forward(self, x, y):
        return F.nll_loss(F.log_softmax(self.b(torch.relu(self.a(x))), dim=1), y)


class Shift(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 8)
        self.out = nn.Linear(8, 11)

    def forward(self, tokens):
        logits = self.out(torch.tanh(self.emb(tokens[:, :-1].long())))
        targets = tokens[:, 1:].long()
        return 0.5 * F.cross_entropy(logits.reshape(-1, 11), targets.reshape(-1), ignore_index=0)


def train(name, m, example, names, arrays):
    torch.onnx.export(m, example, f"{out}/{name}.onnx", input_names=names,
                      output_names=["loss"], opset_version=17, do_constant_folding=False)
    np.savez(f"{out}/{name}.npz", **dict(zip(names, arrays)))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with open(f"{out}/{name}.torch.jsonl", "w") as f:
        for s in range(6):
            i = np.arange(s * 8, s * 8 + 8) % 32
            loss = m(*[torch.from_numpy(a[i]) for a in arrays])
            opt.zero_grad()
            loss.backward()
            opt.step()
            f.write(json.dumps({"step": s, "loss": float(loss)}) + "\n")


torch.manual_seed(0)
x = np.random.RandomState(1).randn(32, 16).astype(np.float32)
y = np.random.RandomState(2).randint(0, 5, 32).astype(np.int64)
y[[0, 1, 5, 9, 12, 13, 14, 15]] = -100
train("nll", Nll(), (torch.randn(8, 16), torch.randint(0, 5, (8,))), ["x", "y"], [x, y])

torch.manual_seed(0)
tokens = np.random.RandomState(3).randint(1, 11, (32, 9)).astype(np.int32)
for r in range(32):
    tokens[r, 9 - (r * 5) % 8:] = 0  # padding of 0 .. 7 tokens
tokens[10:12, 1:] = 0  # a micro-batch of 2 rows with no target
train("shift", Shift(), (torch.randint(1, 11, (8, 9), dtype=torch.int32),), ["tokens"], [tokens])
