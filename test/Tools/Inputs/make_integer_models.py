#!/usr/bin/env python3
"""Writes a token model that computes integers the way Hugging Face models
do, its data and PyTorch's losses (OUT/ints.onnx, .npz, .torch.jsonl: 6 SGD
steps, lr 0.1, step s reads rows 8s .. 8s+7 mod 32):

- RoBERTa's position ids from the input ids: mask = ids.ne(pad).int(),
  (cumsum(mask) * mask).long() + pad (Mul and Add of int32);
- T5's relative-position buckets: sign and Abs of int64 distances, Min and
  Where, into a learned bias per bucket;
- a masked mean over the tokens whose count is a ReduceSum of an int64 mask.

    make_integer_models.py OUT
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_common import export_and_train  # noqa: E402

V, D, T, PAD = 12, 16, 8, 1


class Ints(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Embedding(T + PAD + 1, D)
        self.rel = nn.Embedding(6, 1)
        self.mix = nn.Linear(D, D)
        self.out = nn.Linear(D, 3)

    def forward(self, ids, y):
        mask = ids.ne(PAD).int()
        positions = (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + PAD
        h = self.tok(ids) + self.pos(positions)
        # T5-style buckets of j - i: the sign, then |j - i| capped at 2.
        t = ids.shape[1]
        rel = torch.arange(t)[None, :] - torch.arange(t)[:, None]
        bucket = (rel > 0).long() * 3 + torch.min(torch.abs(rel), torch.full_like(rel, 2))
        scores = h @ h.transpose(1, 2) / 4.0 + self.rel(bucket).squeeze(-1)
        h = torch.tanh(self.mix(torch.softmax(scores, -1) @ h))
        keep = ids.ne(PAD).long()
        pooled = (h * keep[:, :, None]).sum(1) / keep.sum(1, keepdim=True).float()
        return F.cross_entropy(self.out(pooled), y)


torch.manual_seed(0)
rng = np.random.RandomState(1)
ids = rng.randint(2, V, (32, T)).astype(np.int64)
lengths = rng.randint(2, T + 1, 32)
ids[np.arange(T)[None, :] >= lengths[:, None]] = PAD
y = rng.randint(0, 3, 32).astype(np.int64)
export_and_train(Ints(), (torch.from_numpy(ids[:8]), torch.from_numpy(y[:8])),
                 {"ids": ids, "y": y}, os.path.join(sys.argv[1], "ints"))
