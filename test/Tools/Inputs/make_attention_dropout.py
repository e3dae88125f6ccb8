#!/usr/bin/env python3
"""Models whose attention drops its probabilities (BERT's and GPT-2's
attention dropout), exported in training mode, with a data set each:

    make_attention_dropout.py OUT_DIR

writes OUT_DIR/{gpt,encoder,rotary}_drop.onnx and .npz (tok, tgt: 64
sequences of T tokens) and OUT_DIR/{name}_val.npz (24 more):
- gpt_drop: hand-written batch-first attention (heads of (B, H, T, dh)
  split from one projection, a causal -inf mask added), nn.Dropout(0.1)
  on the softmax, then a residual Dropout(0.1) and a LayerNorm: the fused
  op's 3-D form;
- encoder_drop: nn.TransformerEncoder (sequence first, 2 layers,
  dropout = 0.1: torch drops the attention weights, the residuals and the
  feed-forward's activations): the sequence-first form;
- rotary_drop: rotary positions applied to q and k of (B, H, T, dh), a
  causal mask, Dropout(0.2) on the softmax: the 4-D form.

    make_attention_dropout.py compare A.jsonl B.jsonl --steps N [--rtol R]

checks that two runs' losses and evaluation losses agree within R relative
(0: bit for bit) and prints "OK: N steps, E evaluations".
"""
import json
import math
import os
import sys

T, B, D, V, H = 6, 8, 16, 11, 4


def models():
    import torch
    from torch import nn

    class GptDrop(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.qkv = nn.Linear(D, 3 * D)
            self.proj = nn.Linear(D, D)
            self.attn_drop = nn.Dropout(0.1)
            self.resid_drop = nn.Dropout(0.1)
            self.ln = nn.LayerNorm(D)
            self.out = nn.Linear(D, V)

        def forward(self, tok, tgt):
            h = self.emb(tok)
            b, t, d = h.shape
            q, k, v = self.qkv(h).split(d, dim=2)
            heads = lambda x: x.view(b, t, H, d // H).transpose(1, 2)
            q, k, v = heads(q), heads(k), heads(v)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // H))
            att = att + torch.triu(torch.full((t, t), float("-inf")), 1)
            att = self.attn_drop(att.softmax(dim=-1))
            y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
            h = self.ln(h + self.resid_drop(self.proj(y)))
            return nn.functional.cross_entropy(self.out(h).reshape(-1, V), tgt.reshape(-1))

    class EncoderDrop(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            layer = nn.TransformerEncoderLayer(D, H, dim_feedforward=32, dropout=0.1)
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.out = nn.Linear(D, V)

        def forward(self, tok, tgt):
            h = self.enc(self.emb(tok).transpose(0, 1)).transpose(0, 1)
            return nn.functional.cross_entropy(self.out(h).reshape(-1, V), tgt.reshape(-1))

    class RotaryDrop(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.q = nn.Linear(D, D)
            self.k = nn.Linear(D, D)
            self.v = nn.Linear(D, D)
            self.o = nn.Linear(D, D)
            self.drop = nn.Dropout(0.2)
            self.out = nn.Linear(D, V)

        def forward(self, tok, tgt):
            x = self.emb(tok)
            b, t, d = x.shape
            hd = D // H
            freq = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
            angle = torch.arange(t, dtype=torch.float32)[:, None] * freq[None, :]
            cos, sin = angle.cos(), angle.sin()

            def rotate(z):
                z1, z2 = z[..., ::2], z[..., 1::2]
                return torch.stack((z1 * cos - z2 * sin, z1 * sin + z2 * cos), -1).flatten(-2)

            heads = lambda z: z.view(b, t, H, hd).transpose(1, 2)
            q, k, v = rotate(heads(self.q(x))), rotate(heads(self.k(x))), heads(self.v(x))
            mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
            a = self.drop(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(hd) + mask, dim=-1))
            x = x + self.o((a @ v).transpose(1, 2).reshape(b, t, d))
            return nn.functional.cross_entropy(self.out(x).reshape(-1, V), tgt.reshape(-1))

    return {"gpt_drop": GptDrop, "encoder_drop": EncoderDrop, "rotary_drop": RotaryDrop}


def make(out):
    import numpy as np
    import torch
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    for name, cls in models().items():
        model = cls()
        model.train()
        example = (torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T)))
        torch.onnx.export(model, example, os.path.join(out, name + ".onnx"),
                          input_names=["tok", "tgt"], output_names=["loss"],
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, opset_version=17)
        for split, rows in (("", 64), ("_val", 24)):
            np.savez(os.path.join(out, name + split + ".npz"),
                     tok=rng.integers(0, V, (rows, T)).astype(np.int64),
                     tgt=rng.integers(0, V, (rows, T)).astype(np.int64))


def compare(a, b, steps, rtol):
    def records(path):
        with open(path) as f:
            rs = [json.loads(l) for l in f if l.strip()]
        return ({r["step"]: r["loss"] for r in rs if "loss" in r},
                {r["step"]: r["eval_loss"] for r in rs if "eval_loss" in r})
    (la, ea), (lb, eb) = records(a), records(b)
    bad = 0
    for what, x, y in (("loss", la, lb), ("eval loss", ea, eb)):
        if sorted(x) != sorted(y):
            print(f"FAIL: {what} steps differ: {sorted(x)} vs {sorted(y)}")
            bad += 1
            continue
        for s in sorted(x):
            if abs(x[s] - y[s]) > rtol * abs(x[s]):
                print(f"FAIL: step {s}: {what} {y[s]!r} vs {x[s]!r}")
                bad += 1
    if len(la) != steps:
        print(f"FAIL: {len(la)} steps logged, want {steps}")
        bad += 1
    if bad:
        sys.exit(1)
    print(f"OK: {steps} steps, {len(ea)} evaluations within {rtol} relative")


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "compare":
        args = sys.argv[2:]
        steps = int(args[args.index("--steps") + 1])
        rtol = float(args[args.index("--rtol") + 1]) if "--rtol" in args else 0.0
        compare(args[0], args[1], steps, rtol)
        return
    make(sys.argv[1])


if __name__ == "__main__":
    main()
