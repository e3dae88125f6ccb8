#!/usr/bin/env python3
"""Writes models whose loss gradient starts as a batch-sized constant, their
data and PyTorch's losses:

Each is a 2-layer MLP z = l2(tanh(l1(x))) (8 rows of 10 features, 3
outputs) under a loss whose gradient, before it meets the samples, is a
constant spread over the batch (an Expand of 1/N) and then negated,
reshaped or scaled: pipe-microbatch must see it as uniform along the batch
and give each micro-batch its rows.

- bce: F.binary_cross_entropy_with_logits(z, t) (t in {0, 1})
- negmean: -(z*z) averaged (ReduceMean(Neg(...)): Neg of the Expand)
- meanlast: (z*z).mean(-1).mean() (the Expand reshaped to 8x1, expanded)
- smooth: label smoothing written out, 0.9 CE + 0.1 mean(-log_softmax)
- wce: cross-entropy with class weights (its mean is over the labels'
  weights: pipe-microbatch sums the step's)
- wign: the same with the labels of rows whose targets are all 0 ignored
  (-100), and the weights a buffer (an initializer)
- shared: -ones(1, 3) expanded over the batch, both summed over the batch
  (a count: the whole batch's) and subtracted from the outputs (per
  micro-batch): the per-micro-batch use gets its own copy of the Expand
- wsum: a class-weighted cross-entropy plus 0.1 x a plain one (the step's
  weights cannot be summed through the Add: only M = 1 pipelines take it)
- perrow: per-sample cross-entropies (reduction none) squared and averaged,
  plus their mean (the loss gradient op gets one gradient per sample)
- OUT/<model>.npz: 32 rows; OUT/<model>.torch.jsonl: PyTorch's loss at
  each of 6 SGD steps (lr 0.1, step s reads rows 8s .. 8s+7 mod 32).

    make_constant_grad_models.py OUT
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_common import export_and_train  # noqa: E402

out = sys.argv[1]


class Mlp(nn.Module):
    def __init__(self, loss):
        super().__init__()
        self.l1 = nn.Linear(10, 16)
        self.l2 = nn.Linear(16, 3)
        self.loss = loss
        self.register_buffer("cw", torch.tensor([2.0, 0.5, 1.0]))

    def forward(self, x, t):
        z = self.l2(torch.tanh(self.l1(x)))
        if self.loss == "bce":
            return F.binary_cross_entropy_with_logits(z, t)
        if self.loss == "negmean":
            return (-(z * z)).mean()
        if self.loss == "meanlast":
            return (z * z).mean(-1).mean()
        y = t.argmax(1)
        if self.loss == "wce":
            return F.cross_entropy(z, y, weight=torch.tensor([0.5, 1.0, 2.0]))
        if self.loss == "wign":
            y = torch.where(t.sum(1) > 0, y, torch.full_like(y, -100))
            return F.cross_entropy(z, y, weight=self.cw)
        if self.loss == "shared":
            e = -torch.ones(1, 3).expand(8, 3)
            return (((z + e) ** 2) * e.sum(0)).mean()
        if self.loss == "wsum":
            return (F.cross_entropy(z, y, weight=torch.tensor([0.5, 1.0, 2.0])) +
                    0.1 * F.cross_entropy(z, y))
        if self.loss == "perrow":
            per = F.cross_entropy(z, y, reduction="none")
            return (per * per).mean() + per.mean()
        ce = F.cross_entropy(z, y)
        return 0.9 * ce + 0.1 * (-F.log_softmax(z, -1).mean(-1)).mean()


x = np.random.RandomState(1).randn(32, 10).astype(np.float32)
t = np.random.RandomState(2).randint(0, 2, (32, 3)).astype(np.float32)
for name in ["bce", "negmean", "meanlast", "smooth", "wce", "perrow", "wign", "shared", "wsum"]:
    torch.manual_seed(0)
    m = Mlp(name)
    export_and_train(m, (torch.randn(8, 10), torch.rand(8, 3)), {"x": x, "t": t},
                     f"{out}/{name}")
