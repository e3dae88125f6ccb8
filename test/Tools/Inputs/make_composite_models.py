#!/usr/bin/env python3
"""Writes models with operators the importer decomposes, their data and
PyTorch's losses:

- prelu: a conv net with nn.PReLU per channel (slope (C, 1, 1)) and a
  single-slope nn.PReLU after a Linear (ONNX PRelu)
- normalize: F.normalize of the features (ReduceL2, a Clip at eps, Div) and
  an L1 norm penalty (torch.norm(p=1): ReduceL1)
- trig: sin and cos of a learned projection (Fourier features: Sin, Cos and
  their gradients), rotary position angles computed in the forward from
  constant frequencies (HF-style RoPE), and a z-loss with torch.logsumexp
  (ReduceLogSumExp)
- rope: Hugging Face's rotary embedding: cos and sin of the positions times
  an `inv_freq` buffer, computed in the forward (rotate_half)
- shuffle: nn.PixelShuffle (DepthToSpace, mode CRD) between convolutions,
  and nn.PixelUnshuffle (Reshape and Transpose in torch's export)
- masked: attention-like scores with two buffers, an additive causal mask
  (0 and -1e9) and ALiBi slopes times the distance
- OUT/<model>.npz: 32 rows; OUT/<model>.torch.jsonl: PyTorch's loss at each
  of 6 SGD steps (lr 0.1, step s reads rows 8s .. 8s+7 mod 32).

    make_composite_models.py OUT
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


class PRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.act = nn.PReLU(4, init=0.2)
        self.fc = nn.Linear(4 * 6 * 6, 8)
        self.act2 = nn.PReLU(init=0.1)
        self.out = nn.Linear(8, 3)

    def forward(self, x, y):
        h = self.act(self.conv(x)).flatten(1)
        return F.cross_entropy(self.out(self.act2(self.fc(h))), y)


class Normalize(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(36, 16)
        self.out = nn.Linear(16, 3)

    def forward(self, x, y):
        h = torch.tanh(self.fc(x.flatten(1)))
        z = F.normalize(h, dim=1) * 4.0
        return F.cross_entropy(self.out(z), y) + 0.01 * torch.norm(h, p=1, dim=1).mean()


class Trig(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(36, 8)
        self.out = nn.Linear(16, 3)

    def forward(self, x, y):
        h = x.flatten(1)
        z = self.proj(h)
        f = torch.cat((torch.sin(z), torch.cos(z)), 1)
        # Rotary angles of 4 positions from constant frequencies.
        freq = 1.0 / (10.0 ** (torch.arange(0, 4, dtype=torch.float32) / 4))
        ang = torch.arange(4, dtype=torch.float32)[:, None] * freq[None, :]
        rot = f.view(-1, 4, 4) * torch.cos(ang) + f.view(-1, 4, 4).flip(2) * torch.sin(ang)
        logits = self.out(rot.flatten(1))
        zloss = torch.logsumexp(logits, dim=1).pow(2).mean()
        return F.cross_entropy(logits, y) + 0.01 * zloss


class Rope(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 8)
        self.out = nn.Linear(48, 3)
        # A persistent buffer (older transformers releases; a
        # persistent=False one is exported as a Constant node).
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8)))

    def forward(self, x, y):
        q = self.proj(x.view(-1, 6, 6))                       # (B, T=6, 8)
        t = torch.arange(q.shape[1], dtype=torch.float32)
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat((freqs, freqs), -1)
        q1, q2 = q[..., :4], q[..., 4:]
        rotated = q * emb.cos() + torch.cat((-q2, q1), -1) * emb.sin()
        return F.cross_entropy(self.out(rotated[..., :8].flatten(1)), y)


class Shuffle(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Conv2d(1, 8, 3, padding=1)
        self.shuffle = nn.PixelShuffle(2)
        self.mid = nn.Conv2d(2, 4, 3, padding=1)
        self.unshuffle = nn.PixelUnshuffle(2)
        self.out = nn.Linear(16 * 36, 3)

    def forward(self, x, y):
        h = self.shuffle(torch.tanh(self.up(x)))             # (B, 2, 12, 12)
        h = self.unshuffle(torch.tanh(self.mid(h)))          # (B, 16, 6, 6)
        return F.cross_entropy(self.out(h.flatten(1)), y)


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(36, 16)
        self.k = nn.Linear(36, 16)
        self.out = nn.Linear(16, 3)
        self.register_buffer("causal_mask", torch.triu(torch.full((4, 4), -1e9), 1))
        self.register_buffer("alibi_slopes", torch.tensor([0.5, 0.25, 0.125, 0.0625]))

    def forward(self, x, y):
        q = self.q(x.flatten(1)).view(-1, 4, 4)
        k = self.k(x.flatten(1)).view(-1, 4, 4)
        dist = torch.arange(4, dtype=torch.float32)[None, :] - torch.arange(4, dtype=torch.float32)[:, None]
        s = q @ k.transpose(1, 2) + self.causal_mask + self.alibi_slopes[:, None] * dist
        a = torch.softmax(s, -1) @ q
        return F.cross_entropy(self.out(a.flatten(1)), y)


class Extra(nn.Module):
    """Softsign, CELU, Softshrink and Hardshrink (Shrink), adaptive max
    pooling to 1 (GlobalMaxPool) and a smoothed F.one_hot target (OneHot)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.fc = nn.Linear(4, 6)
        self.out = nn.Linear(6, 3)

    def forward(self, x, y):
        h = self.fc(F.adaptive_max_pool2d(self.conv(x), 1).flatten(1))
        h = F.softsign(h) + F.celu(h, 0.7) + F.softshrink(h, 0.3) + F.hardshrink(h, 0.2)
        logits = self.out(F.mish(h))
        target = F.one_hot(y, 3).float() * 0.9 + 0.1 / 3
        return -(target * F.log_softmax(logits, 1)).sum(1).mean()


x = np.random.RandomState(1).randn(32, 1, 6, 6).astype(np.float32)
y = np.random.RandomState(2).randint(0, 3, 32).astype(np.int64)
for name, cls in [("prelu", PRelu), ("normalize", Normalize), ("trig", Trig),
                  ("rope", Rope), ("shuffle", Shuffle), ("masked", Masked),
                  ("extra", Extra)]:
    torch.manual_seed(0)
    m = cls()
    export_and_train(m, (torch.randn(8, 1, 6, 6), torch.randint(0, 3, (8,))),
                     {"x": x, "y": y}, f"{out}/{name}", training=True)
