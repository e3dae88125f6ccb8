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
- OUT/mlmnsp.onnx: BERT's pre-training loss in small: a masked-token loss
  (ignore_index -100, only masked positions counted) plus half a
  next-sentence loss (no ignored labels; torch exports ignore_index -100 for
  it too) plus a mean-square penalty on the pooled states; OUT/mlmnsp.npz: 32 sequences of 8
  tokens whose micro-batches of 2 count 0 to 6 masked positions, of 4
  1 to 11. OUT/mlmnsp_dyn.onnx: the same with a symbolic batch.
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


def train(name, m, example, names, arrays, dynamic=False):
    torch.onnx.export(m, example, f"{out}/{name}.onnx", input_names=names,
                      output_names=["loss"], opset_version=17, do_constant_folding=False)
    if dynamic:  # also with a symbolic batch, for --batch and --pipelines
        torch.onnx.export(m, example, f"{out}/{name}_dyn.onnx", input_names=names,
                          output_names=["loss"], opset_version=17, do_constant_folding=False,
                          dynamic_axes={n: {0: "batch"} for n in names})
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


class MlmNsp(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(13, 8)
        self.enc = nn.Linear(8, 8)
        self.mlm = nn.Linear(8, 13)
        self.nsp = nn.Linear(8, 2)

    def forward(self, tokens, mlm_labels, nsp_label):
        h = torch.tanh(self.enc(self.emb(tokens)))
        mlm = F.cross_entropy(self.mlm(h).reshape(-1, 13), mlm_labels.reshape(-1))
        nsp = F.cross_entropy(self.nsp(h[:, 0]), nsp_label)
        return mlm + 0.5 * nsp + 0.1 * h[:, 0].pow(2).mean()  # and a penalty


torch.manual_seed(0)
rs = np.random.RandomState(4)
tokens = rs.randint(0, 13, (32, 8)).astype(np.int64)
mlm_labels = np.full((32, 8), -100, np.int64)
for r in range(32):
    masked = rs.choice(8, [0, 0, 3, 2, 1, 3, 0, 1, 2, 3, 3, 3, 0, 0, 0, 1][r % 16],
                       replace=False)
    mlm_labels[r, masked] = tokens[r, masked]
    tokens[r, masked] = 12  # [MASK]
nsp_label = rs.randint(0, 2, 32).astype(np.int64)
train("mlmnsp", MlmNsp(),
      (torch.randint(0, 13, (8, 8)), torch.randint(0, 13, (8, 8)), torch.randint(0, 2, (8,))),
      ["tokens", "mlm_labels", "nsp_label"], [tokens, mlm_labels, nsp_label], dynamic=True)
