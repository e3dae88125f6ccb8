#!/usr/bin/env python3
"""Writes attention models as torch.onnx exports them, with data.

    attention_models.py OUT     (Debian's /usr/bin/python3: torch, onnx)

- encoder.onnx: nn.TransformerEncoder (2 layers of nn.TransformerEncoderLayer,
  sequence first) over an embedding, token cross-entropy on every position;
  torch's multi-head attention reshapes (T, B, D) into (T, B*H, d) and back
  into (T*B, D): the batch merged with other dimensions, as the major and as
  the minor factor. encoder.npz holds tokens and targets.
- encoder_bf.onnx: the same with batch_first=True.
- padded.onnx: nn.MultiheadAttention (batch first) with a key_padding_mask
  from the data (padded.npz: tok, keep (1 for tokens, 0 for padding), tgt).
- vit.onnx: a small vision transformer: a patch convolution, nn.
  MultiheadAttention over the patches (sequence first), LayerNorm, mean
  pooling, a linear classifier. vit.npz holds images and labels.
Dropout is 0, so pipelined training can equal one device.
"""
import os
import sys

import numpy as np
import torch
from torch import nn

T, B, D, V = 6, 8, 16, 11


class Encoder(nn.Module):
    def __init__(self, batch_first):
        super().__init__()
        self.batch_first = batch_first
        self.emb = nn.Embedding(V, D)
        layer = nn.TransformerEncoderLayer(D, 4, dim_feedforward=32, dropout=0.0,
                                           batch_first=batch_first)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.out = nn.Linear(D, V)

    def forward(self, tok, tgt):
        h = self.emb(tok)
        if not self.batch_first:
            h = h.transpose(0, 1)
        h = self.enc(h)
        if not self.batch_first:
            h = h.transpose(0, 1)
        return nn.functional.cross_entropy(self.out(h).reshape(-1, V), tgt.reshape(-1))


class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, D, 4, stride=4)
        self.att = nn.MultiheadAttention(D, 4)
        self.ln = nn.LayerNorm(D)
        self.fc = nn.Linear(D, V)

    def forward(self, x, y):
        p = self.patch(x).flatten(2).permute(2, 0, 1)  # (T, B, D)
        a, _ = self.att(p, p, p, need_weights=False)
        return nn.functional.cross_entropy(self.fc(self.ln(p + a).mean(0)), y)


class PaddedMha(nn.Module):
    """nn.MultiheadAttention (batch first) with a key_padding_mask from the
    data, exported with static shapes: torch writes the mask's fill as a
    full-size (B*H, 1, T) constant, which the importer makes a splat."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.att = nn.MultiheadAttention(D, 4, batch_first=True)
        self.ln = nn.LayerNorm(D)
        self.out = nn.Linear(D, V)

    def forward(self, tok, keep, tgt):
        h = self.emb(tok)
        a, _ = self.att(h, h, h, need_weights=False, key_padding_mask=keep == 0)
        return nn.functional.cross_entropy(self.out(self.ln(h + a)).reshape(-1, V),
                                           tgt.reshape(-1))


def export(model, inputs, names, path):
    torch.onnx.export(model, inputs, path, input_names=names, output_names=["loss"],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=17)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    tok = (torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T)))
    export(Encoder(False), tok, ["tok", "tgt"], os.path.join(out, "encoder.onnx"))
    export(Encoder(True), tok, ["tok", "tgt"], os.path.join(out, "encoder_bf.onnx"))
    np.savez(os.path.join(out, "encoder.npz"),
             tok=rng.integers(0, V, (64, T)).astype(np.int64),
             tgt=rng.integers(0, V, (64, T)).astype(np.int64))
    export(ViT(), (torch.randn(B, 3, 8, 8), torch.randint(0, V, (B,))), ["x", "y"],
           os.path.join(out, "vit.onnx"))
    np.savez(os.path.join(out, "vit.npz"),
             x=rng.standard_normal((64, 3, 8, 8)).astype(np.float32),
             y=rng.integers(0, V, 64).astype(np.int64))
    keep = torch.ones(B, T, dtype=torch.int64)
    export(PaddedMha(), (tok[0], keep, tok[1]), ["tok", "keep", "tgt"],
           os.path.join(out, "padded.onnx"))
    lengths = rng.integers(2, T + 1, 64)
    np.savez(os.path.join(out, "padded.npz"),
             tok=rng.integers(0, V, (64, T)).astype(np.int64),
             keep=(np.arange(T)[None, :] < lengths[:, None]).astype(np.int64),
             tgt=rng.integers(0, V, (64, T)).astype(np.int64))
    print("wrote encoder.onnx, encoder_bf.onnx, vit.onnx, padded.onnx")


if __name__ == "__main__":
    main()
