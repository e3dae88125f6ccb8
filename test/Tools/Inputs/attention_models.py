#!/usr/bin/env python3
"""Writes attention models as torch.onnx exports them, with data.

    attention_models.py OUT     (Debian's /usr/bin/python3: torch, onnx)

- encoder.onnx: nn.TransformerEncoder (2 layers of nn.TransformerEncoderLayer,
  sequence first) over an embedding, token cross-entropy on every position;
  torch's multi-head attention reshapes (T, B, D) into (T, B*H, d) and back
  into (T*B, D): the batch merged with other dimensions, as the major and as
  the minor factor. encoder.npz holds tokens and targets.
- encoder_bf.onnx: the same with batch_first=True.
- encoder_finite.onnx: encoder.onnx under a causal mask filled with -1e4
  (torch.triu of a full tensor, made in the forward): a float mask.
  encoder_bool.onnx: under a bool causal mask.
- seq2seq.onnx: nn.Transformer (an encoder and a decoder layer): causal
  self-attention and cross-attention in the decoder.
- encoder_causal.onnx: encoder.onnx with nn.Transformer's square subsequent
  mask made in the forward (a float mask of 0 and -inf added to the scores,
  exported as Trilu of a -inf splat).
- padded.onnx: nn.MultiheadAttention (batch first) with a key_padding_mask
  from the data (padded.npz: tok, keep (1 for tokens, 0 for padding), tgt).
- padded_encoder.onnx, padded_causal.onnx, padded_bool.onnx:
  nn.TransformerEncoder with a src_key_padding_mask (and the square
  subsequent mask, or a bool causal one); padded_manual.onnx:
  hand-written batch-first attention with the padded keys' scores filled
  with -inf; bert_manual.onnx: the same with BERT's additive (1 - keep) *
  finfo.min mask. All read padded.npz. alibi_manual.onnx and
  learned_manual.onnx: that attention with ALiBi's constant bias and with
  a trained bias (tok, tgt: encoder.npz).
- vit.onnx: a small vision transformer: a patch convolution, nn.
  MultiheadAttention over the patches (sequence first), LayerNorm, mean
  pooling, a linear classifier. vit.npz holds images and labels.
- llama.onnx: a Llama-style decoder (RMSNorm, rotary positions, grouped-
  query attention through repeat_interleave, SwiGLU, a tied head).
Dropout is 0, so pipelined training can equal one device.
"""
import math
import os
import sys

import numpy as np
import torch
from torch import nn

T, B, D, V = 6, 8, 16, 11


class Encoder(nn.Module):
    def __init__(self, batch_first, causal=False):
        super().__init__()
        self.batch_first = batch_first
        # nn.Transformer's square subsequent mask, made in the forward (a
        # float (T, T) of 0 and -inf above the diagonal, added to the
        # scores; exported as Trilu of a -inf splat).
        self.causal = causal
        self.emb = nn.Embedding(V, D)
        layer = nn.TransformerEncoderLayer(D, 4, dim_feedforward=32, dropout=0.0,
                                           batch_first=batch_first)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.out = nn.Linear(D, V)

    def forward(self, tok, tgt):
        h = self.emb(tok)
        if not self.batch_first:
            h = h.transpose(0, 1)
        n = h.shape[1 if self.batch_first else 0]
        mask = (nn.Transformer.generate_square_subsequent_mask(n) if self.causal is True
                # A finite causal fill (older code's -1e4): a float mask.
                else torch.triu(torch.full((n, n), -1e4), 1) if self.causal == "finite"
                # A bool causal mask (true: masked), which torch turns into
                # a float one with Where.
                else torch.triu(torch.ones(n, n, dtype=torch.bool), 1) if self.causal == "bool"
                else None)
        h = self.enc(h, mask=mask)
        if not self.batch_first:
            h = h.transpose(0, 1)
        return nn.functional.cross_entropy(self.out(h).reshape(-1, V), tgt.reshape(-1))


class Seq2Seq(nn.Module):
    """nn.Transformer (one encoder and one decoder layer, sequence first):
    the decoder's self-attention under the square subsequent mask, and its
    cross-attention over the encoder's output (q from the decoder, k and v
    two Slices of one projection of the memory). Source and target are the
    same length here; the target is read shifted by one."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.tr = nn.Transformer(D, 4, num_encoder_layers=1, num_decoder_layers=1,
                                 dim_feedforward=32, dropout=0.0)
        self.out = nn.Linear(D, V)

    def forward(self, tok, tgt):
        src = self.emb(tok).transpose(0, 1)
        dec = self.emb(torch.roll(tgt, 1, 1)).transpose(0, 1)
        mask = nn.Transformer.generate_square_subsequent_mask(dec.shape[0])
        h = self.tr(src, dec, tgt_mask=mask).transpose(0, 1)
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


class PaddedEncoder(nn.Module):
    """nn.TransformerEncoder (sequence first, 2 layers) with a
    src_key_padding_mask from the data (keep: 1 for a token, 0 for
    padding), and with `causal` also nn.Transformer's square subsequent
    mask, which torch fills the padding into (a float (B*H, T, S) mask);
    with causal = "bool" a bool causal mask, which torch ORs with the
    padding."""

    def __init__(self, causal=False):
        super().__init__()
        self.causal = causal
        self.emb = nn.Embedding(V, D)
        layer = nn.TransformerEncoderLayer(D, 4, dim_feedforward=32, dropout=0.0)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.out = nn.Linear(D, V)

    def forward(self, tok, keep, tgt):
        h = self.emb(tok).transpose(0, 1)
        n = h.shape[0]
        mask = (torch.triu(torch.ones(n, n, dtype=torch.bool), 1) if self.causal == "bool"
                else nn.Transformer.generate_square_subsequent_mask(n) if self.causal
                else None)
        h = self.enc(h, mask=mask, src_key_padding_mask=keep == 0).transpose(0, 1)
        return nn.functional.cross_entropy(self.out(h).reshape(-1, V), tgt.reshape(-1))


class PaddedManual(nn.Module):
    """Hand-written batch-first attention (heads of (B, H, T, dh), as a
    GPT writes them) whose scores are masked:
    - "padded": filled with -inf at padded keys, masked_fill(pad[:, None,
      None, :]) (inputs tok, keep, tgt);
    - "bert": BERT's extended attention mask added, (1 - keep[:, None,
      None, :]) * finfo.min (inputs tok, keep, tgt);
    - "alibi": ALiBi's bias -slope_h |i - j| added, computed in the
      forward from constants (inputs tok, tgt);
    - "learned": a trained (H, T, T) position bias added (not fused: the
      fused op has no gradient for its mask)."""

    def __init__(self, kind="padded"):
        super().__init__()
        self.kind = kind
        self.emb = nn.Embedding(V, D)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.ln = nn.LayerNorm(D)
        self.out = nn.Linear(D, V)
        if kind == "learned":
            self.bias = nn.Parameter(torch.randn(4, T, T) * 0.5)

    def forward(self, tok, *rest):
        keep, tgt = rest if self.kind in ("padded", "bert") else (None, rest[0])
        h = self.emb(tok)
        b, t, d = h.shape
        q, k, v = self.qkv(h).split(d, dim=2)
        heads = lambda x: x.view(b, t, 4, d // 4).transpose(1, 2)
        q, k, v = heads(q), heads(k), heads(v)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // 4))
        if self.kind == "padded":
            att = att.masked_fill((keep == 0)[:, None, None, :], float("-inf"))
        elif self.kind == "bert":
            ext = (1.0 - keep[:, None, None, :].float()) * torch.finfo(torch.float32).min
            att = att + ext
        elif self.kind == "alibi":
            pos = torch.arange(t)
            slopes = 2.0 ** (-torch.arange(1, 5).float())
            att = att - slopes[:, None, None] * (pos[None, :] - pos[:, None]).abs().float()
        else:
            att = att + self.bias
        y = (att.softmax(dim=-1) @ v).transpose(1, 2).contiguous().view(b, t, d)
        h = self.ln(h + self.proj(y))
        return nn.functional.cross_entropy(self.out(h).reshape(-1, V), tgt.reshape(-1))


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


def rotate(x, cos, sin):
    """Rotary position embedding on interleaved pairs (x[2i], x[2i+1])."""
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class LlamaBlock(nn.Module):
    """Pre-RMSNorm block: grouped-query attention (4 query heads sharing 2
    key/value heads through repeat_interleave) with rotary positions and
    a causal mask, then a SwiGLU MLP; no biases."""

    def __init__(self, heads=4, kv_heads=2, hidden=32, repeat="interleave"):
        super().__init__()
        self.h, self.kv, self.hd = heads, kv_heads, D // heads
        # "interleave": repeat_interleave over the heads; "expand": Hugging
        # Face's repeat_kv (x[:, :, None].expand(...).reshape(...)).
        self.repeat = repeat
        self.n1, self.n2 = RMSNorm(D), RMSNorm(D)
        self.q = nn.Linear(D, D, bias=False)
        self.k = nn.Linear(D, kv_heads * self.hd, bias=False)
        self.v = nn.Linear(D, kv_heads * self.hd, bias=False)
        self.o = nn.Linear(D, D, bias=False)
        self.gate = nn.Linear(D, hidden, bias=False)
        self.up = nn.Linear(D, hidden, bias=False)
        self.down = nn.Linear(hidden, D, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, d = x.shape
        y = self.n1(x)
        q = self.q(y).view(b, t, self.h, self.hd).transpose(1, 2)
        k = self.k(y).view(b, t, self.kv, self.hd).transpose(1, 2)
        v = self.v(y).view(b, t, self.kv, self.hd).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        g = self.h // self.kv
        if self.repeat == "expand":
            rep = lambda z: z[:, :, None, :, :].expand(b, self.kv, g, t, self.hd).reshape(
                b, self.kv * g, t, self.hd)
        else:
            rep = lambda z: z.repeat_interleave(g, dim=1)
        k, v = rep(k), rep(v)
        a = torch.softmax(q @ k.transpose(-2, -1) / self.hd ** 0.5 + mask, dim=-1)
        x = x + self.o((a @ v).transpose(1, 2).reshape(b, t, d))
        y = self.n2(x)
        return x + self.down(nn.functional.silu(self.gate(y)) * self.up(y))


class Llama(nn.Module):
    """A Llama-style decoder, small: token embedding, 2 LlamaBlocks, a final
    RMSNorm and a head tied to the embedding, next-token cross-entropy. The
    rotary tables and the mask are computed in the forward (as Hugging
    Face's models do from their inv_freq), so they are no parameters."""

    def __init__(self, repeat="interleave"):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.ModuleList([LlamaBlock(repeat=repeat) for _ in range(2)])
        self.norm = RMSNorm(D)
        self.head = nn.Linear(D, V, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, tok, tgt):
        t = tok.shape[1]
        hd = D // 4
        freq = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        angle = torch.arange(t, dtype=torch.float32)[:, None] * freq[None, :]
        cos, sin = angle.cos(), angle.sin()
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        x = self.emb(tok)
        for blk in self.blocks:
            x = blk(x, cos, sin, mask)
        logits = self.head(self.norm(x))
        return nn.functional.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))


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
    export(Encoder(False, causal=True), tok, ["tok", "tgt"],
           os.path.join(out, "encoder_causal.onnx"))
    export(Encoder(False, causal="finite"), tok, ["tok", "tgt"],
           os.path.join(out, "encoder_finite.onnx"))
    export(Encoder(False, causal="bool"), tok, ["tok", "tgt"],
           os.path.join(out, "encoder_bool.onnx"))
    export(Seq2Seq(), tok, ["tok", "tgt"], os.path.join(out, "seq2seq.onnx"))
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
    for name, model in (("padded_encoder", PaddedEncoder()),
                        ("padded_causal", PaddedEncoder(causal=True)),
                        ("padded_bool", PaddedEncoder(causal="bool")),
                        ("padded_manual", PaddedManual()),
                        ("bert_manual", PaddedManual("bert"))):
        export(model, (tok[0], keep, tok[1]), ["tok", "keep", "tgt"],
               os.path.join(out, name + ".onnx"))
    for kind in ("alibi", "learned"):
        export(PaddedManual(kind), tok, ["tok", "tgt"],
               os.path.join(out, kind + "_manual.onnx"))
    export(Llama(), tok, ["tok", "tgt"], os.path.join(out, "llama.onnx"))
    np.savez(os.path.join(out, "llama.npz"),
             tok=rng.integers(0, V, (64, T)).astype(np.int64),
             tgt=rng.integers(0, V, (64, T)).astype(np.int64))
    print("wrote encoder.onnx, encoder_bf.onnx, encoder_causal.onnx, encoder_finite.onnx, "
          "encoder_bool.onnx, seq2seq.onnx, vit.onnx, "
          "padded.onnx, padded_encoder.onnx, padded_causal.onnx, padded_bool.onnx, "
          "padded_manual.onnx, "
          "bert_manual.onnx, alibi_manual.onnx, learned_manual.onnx, "
          "llama.onnx")


if __name__ == "__main__":
    main()
