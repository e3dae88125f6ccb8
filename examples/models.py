#!/usr/bin/env python3
"""Reference models exported from PyTorch for pipec's tests and examples.

Each model ends in a cross-entropy loss, so the exported graph is the whole
forward pass of a training step: (inputs, labels) -> loss. Run with Debian's
/usr/bin/python3 (torch 1.13, onnx 1.12):

    /usr/bin/python3 examples/models.py --out DIR [--models mlp,cnn,transformer]
        [--batch 8] [--dynamic] [--data]

writes DIR/<model>.onnx (fixed batch) and, with --dynamic, DIR/<model>_dyn.onnx
whose batch axis is symbolic ("batch"); with --data, DIR/<model>.npz holding a
small data set whose arrays are named like the graph inputs. Models: mlp,
cnn, transformer (a tiny decoder: d = 32, 2 blocks, T = 8), lstm_lm, lstm, gpt
(a GPT decoder: d = 256, 8 blocks, 4 heads, T = 64, vocabulary 256),
gpt_dropout (that GPT with GPT-2's dropout of 0.1), llama (a Llama-style
decoder with grouped-query attention: d = 256, 4 blocks, 8 query and 2
key/value heads, T = 64) and
encoder (torch's nn.TransformerEncoder as a causal language model: 4 layers
of d = 256, 4 heads, T = 64); encoder_pad is that encoder with a key padding
mask from the data (inputs tokens, keep, targets); resnet18 (torchvision's
ResNet-18 over 10 classes of 3 x 64 x 64 images).
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, inp=32, hidden=64, classes=10):
        super().__init__()
        self.fc1 = nn.Linear(inp, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, classes)

    def forward(self, x, y):
        h = torch.relu(self.fc1(x))
        h = torch.tanh(self.fc2(h))
        return F.cross_entropy(self.fc3(h), y)


class CNN(nn.Module):
    def __init__(self, channels=1, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 3 * 3, classes)

    def forward(self, x, y):
        h = F.max_pool2d(torch.relu(self.conv1(x)), 2)
        h = F.max_pool2d(torch.relu(self.conv2(h)), 2)
        h = torch.flatten(h, 1)
        return F.cross_entropy(self.fc(h), y)


class Classifier(nn.Module):
    """A torchvision classifier (imported on use) with a cross-entropy loss."""

    def __init__(self, name, classes=10):
        super().__init__()
        import torchvision
        self.net = getattr(torchvision.models, name)(num_classes=classes)

    def forward(self, x, y):
        return F.cross_entropy(self.net(x), y)


class Block(nn.Module):
    def __init__(self, dim, heads, seq, dropout=0.0):
        super().__init__()
        self.heads = heads
        # GPT-2's dropout (p > 0 only: a module of p = 0 would still export
        # a Dropout node): on the attention probabilities and on each
        # residual branch.
        self.attn_drop = nn.Dropout(dropout) if dropout > 0 else None
        self.resid_drop = nn.Dropout(dropout) if dropout > 0 else None
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.scale = 1.0 / (dim // heads) ** 0.5
        # True above the diagonal: the future positions a token may not see.
        self.register_buffer(
            "future", ~torch.tril(torch.ones(seq, seq, dtype=torch.bool)))

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.reshape(b, t, h, d // h).transpose(1, 2)
        k = k.reshape(b, t, h, d // h).transpose(1, 2)
        v = v.reshape(b, t, h, d // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * self.scale
        att = att.masked_fill(self.future, float("-inf"))
        att = torch.softmax(att, dim=-1)
        if self.attn_drop is not None:
            att = self.attn_drop(att)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        drop = self.resid_drop if self.resid_drop is not None else (lambda z: z)
        x = x + drop(self.proj(y))
        return x + drop(self.fc2(F.gelu(self.fc1(self.ln2(x)))))


class Decoder(nn.Module):
    def __init__(self, vocab=32, dim=32, heads=4, seq=8, layers=2, dropout=0.0):
        super().__init__()
        self.seq = seq
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(seq, dim) * 0.02)
        self.emb_drop = nn.Dropout(dropout) if dropout > 0 else None
        self.blocks = nn.ModuleList([Block(dim, heads, seq, dropout) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens, targets):
        x = self.tok(tokens) + self.pos
        if self.emb_drop is not None:
            x = self.emb_drop(x)
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               targets.reshape(-1))


class EncoderLM(nn.Module):
    """torch's own nn.TransformerEncoder as a causal language model:
    embedding plus learned positions, `layers` nn.TransformerEncoderLayer
    (post-LayerNorm, ReLU, sequence first) under nn.Transformer's square
    subsequent mask, a linear head, next-token cross-entropy. Its attention
    is nn.MultiheadAttention's, which torch exports sequence first."""

    def __init__(self, vocab=256, dim=256, heads=4, seq=64, layers=4, padded=False):
        super().__init__()
        self.padded = padded
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(seq, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=4 * dim, dropout=0.0)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens, *rest):
        # padded: (tokens, keep, targets), keep 0 at padding, which no
        # position attends to (src_key_padding_mask).
        keep, targets = rest if self.padded else (None, rest[0])
        x = (self.tok(tokens) + self.pos).transpose(0, 1)
        # nn.Transformer's square subsequent mask, made here: torch exports
        # it as Trilu of a -inf splat (a registered buffer of it would be an
        # initializer holding -inf, which the importer also makes a constant).
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[0])
        pad = keep == 0 if self.padded else None
        x = self.enc(x, mask=mask, src_key_padding_mask=pad).transpose(0, 1)
        logits = self.head(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class LlamaLM(nn.Module):
    """A Llama-style decoder: token embedding, `layers` pre-RMSNorm blocks of
    causal grouped-query attention (`heads` query heads sharing `kv_heads`
    key/value heads, repeated as Hugging Face's repeat_kv writes it) with
    rotary positions, and a SwiGLU MLP, no biases; a final RMSNorm and a
    linear head, next-token cross-entropy. The rotary tables and the mask
    are computed in the forward from constants, as Hugging Face's are."""

    def __init__(self, vocab=256, dim=256, heads=8, kv_heads=2, seq=64, layers=4,
                 hidden=688):
        super().__init__()
        self.h, self.kv, self.hd = heads, kv_heads, dim // heads
        self.tok = nn.Embedding(vocab, dim)
        self.norms = nn.ParameterList([nn.Parameter(torch.ones(dim)) for _ in range(2 * layers + 1)])
        self.q = nn.ModuleList([nn.Linear(dim, dim, bias=False) for _ in range(layers)])
        self.k = nn.ModuleList([nn.Linear(dim, kv_heads * self.hd, bias=False)
                                for _ in range(layers)])
        self.v = nn.ModuleList([nn.Linear(dim, kv_heads * self.hd, bias=False)
                                for _ in range(layers)])
        self.o = nn.ModuleList([nn.Linear(dim, dim, bias=False) for _ in range(layers)])
        self.gate = nn.ModuleList([nn.Linear(dim, hidden, bias=False) for _ in range(layers)])
        self.up = nn.ModuleList([nn.Linear(dim, hidden, bias=False) for _ in range(layers)])
        self.down = nn.ModuleList([nn.Linear(hidden, dim, bias=False) for _ in range(layers)])
        self.head = nn.Linear(dim, vocab, bias=False)

    @staticmethod
    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    def forward(self, tokens, targets):
        b, t = tokens.shape
        hd, g = self.hd, self.h // self.kv
        freq = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        angle = torch.arange(t, dtype=torch.float32)[:, None] * freq[None, :]
        cos, sin = angle.cos(), angle.sin()

        def rotate(z):
            z1, z2 = z[..., ::2], z[..., 1::2]
            return torch.stack((z1 * cos - z2 * sin, z1 * sin + z2 * cos), dim=-1).flatten(-2)

        def repeat_kv(z):
            return z[:, :, None, :, :].expand(b, self.kv, g, t, hd).reshape(b, self.h, t, hd)

        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        x = self.tok(tokens)
        for i in range(len(self.q)):
            y = self.rms(x, self.norms[2 * i])
            q = rotate(self.q[i](y).view(b, t, self.h, hd).transpose(1, 2))
            k = rotate(self.k[i](y).view(b, t, self.kv, hd).transpose(1, 2))
            v = self.v[i](y).view(b, t, self.kv, hd).transpose(1, 2)
            k, v = repeat_kv(k), repeat_kv(v)
            a = torch.softmax(q @ k.transpose(-2, -1) / hd ** 0.5 + mask, dim=-1)
            x = x + self.o[i]((a @ v).transpose(1, 2).reshape(b, t, -1))
            y = self.rms(x, self.norms[2 * i + 1])
            x = x + self.down[i](F.silu(self.gate[i](y)) * self.up[i](y))
        logits = self.head(self.rms(x, self.norms[-1]))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class LstmLM(nn.Module):
    """Embedding -> 2-layer LSTM -> linear -> cross-entropy (AWD-LM's shape,
    tiny): next-token prediction over a sequence of `seq` tokens."""

    def __init__(self, vocab=16, dim=12, hidden=10, layers=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.rnn = nn.LSTM(dim, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens, targets):
        h, _ = self.rnn(self.tok(tokens))
        logits = self.head(h)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               targets.reshape(-1))


def next_tokens(vocab, seq):
    """Inputs of a next-token model: `seq` tokens of `vocab` symbols and the
    same sequence shifted by one as targets (b rows, from generator g)."""
    def inputs(b, g=None):
        t = torch.randint(0, vocab, (b, seq + 1), generator=g)
        return t[:, :seq].contiguous(), t[:, 1:].contiguous()
    return inputs


def padded_tokens(vocab, seq):
    """next_tokens' inputs with a keep mask between them: each row keeps a
    prefix of seq/2 to seq tokens (1) and pads the rest (0)."""
    base = next_tokens(vocab, seq)
    def inputs(b, g=None):
        tokens, targets = base(b, g)
        lengths = torch.randint(seq // 2, seq + 1, (b, 1), generator=g)
        keep = (torch.arange(seq)[None, :] < lengths).long()
        return tokens, keep, targets
    return inputs


def make(name):
    """Returns (module, example inputs(batch), input names, data maker)."""
    torch.manual_seed(0)
    if name == "mlp":
        m = MLP()
        def inputs(b, g=None):
            return (torch.randn(b, 32, generator=g),
                    torch.randint(0, 10, (b,), generator=g))
        return m, inputs, ["x", "y"]
    if name == "cnn":
        m = CNN()
        def inputs(b, g=None):
            return (torch.randn(b, 1, 12, 12, generator=g),
                    torch.randint(0, 10, (b,), generator=g))
        return m, inputs, ["x", "y"]
    if name == "transformer":
        m = Decoder()
        return m, next_tokens(32, 8), ["tokens", "targets"]
    if name == "gpt":
        # A GPT decoder: d = 256, 8 pre-LayerNorm blocks of causal
        # self-attention (4 heads of 64) and a GELU MLP of 4d, T = 64 tokens
        # of a 256-symbol vocabulary, next-token cross-entropy.
        m = Decoder(vocab=256, dim=256, heads=4, seq=64, layers=8)
        return m, next_tokens(256, 64), ["tokens", "targets"]
    if name == "gpt_dropout":
        # The GPT with GPT-2's dropout of 0.1 (embeddings, attention
        # probabilities, residual branches).
        m = Decoder(vocab=256, dim=256, heads=4, seq=64, layers=8, dropout=0.1)
        return m, next_tokens(256, 64), ["tokens", "targets"]
    if name == "llama":
        # A Llama-style decoder: d = 256, 4 blocks, 8 query heads sharing 2
        # key/value heads (grouped-query), rotary positions, SwiGLU of 688,
        # T = 64 tokens of a 256-symbol vocabulary.
        m = LlamaLM()
        return m, next_tokens(256, 64), ["tokens", "targets"]
    if name == "encoder":
        # nn.TransformerEncoder (4 layers of d = 256, 4 heads, T = 64) as a
        # causal language model over a 256-symbol vocabulary.
        m = EncoderLM()
        return m, next_tokens(256, 64), ["tokens", "targets"]
    if name == "resnet18":
        # torchvision's ResNet-18 (BatchNorm, residual blocks; planes of
        # 2 x 2 to 32 x 32 at this size) over 10 classes of 64 x 64 images.
        m = Classifier("resnet18")
        def inputs(b, g=None):
            return (torch.randn(b, 3, 64, 64, generator=g),
                    torch.randint(0, 10, (b,), generator=g))
        return m, inputs, ["x", "y"]
    if name == "encoder_pad":
        # The encoder with a src_key_padding_mask from the data (keep: each
        # sequence a prefix of 32 to 64 tokens).
        m = EncoderLM(padded=True)
        return m, padded_tokens(256, 64), ["tokens", "keep", "targets"]
    if name == "lstm_lm":
        m = LstmLM()
        return m, next_tokens(16, 6), ["tokens", "targets"]
    if name == "lstm":
        # A word-level LSTM language model of medium size (the PTB models'
        # shape, smaller): vocabulary 1000, embedding and 2 LSTM layers of
        # 256, 32 tokens, next-token cross-entropy.
        m = LstmLM(vocab=1000, dim=256, hidden=256, layers=2)
        return m, next_tokens(1000, 32), ["tokens", "targets"]
    raise SystemExit(f"models.py: unknown model '{name}' (mlp, cnn, transformer, "
                     "lstm_lm, lstm, gpt, gpt_dropout, llama, encoder, encoder_pad, "
                     "resnet18)")


def export(name, path, batch, dynamic, opset=17):
    model, inputs, names = make(name)
    model.train()
    args = inputs(batch)
    axes = {n: {0: "batch"} for n in names} if dynamic else None
    torch.onnx.export(model, args, path, input_names=names,
                      output_names=["loss"], opset_version=opset,
                      dynamic_axes=axes, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="mlp,cnn,transformer")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--dynamic", action="store_true")
    ap.add_argument("--data", type=int, default=0,
                    help="also write <model>.npz with this many samples")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name in a.models.split(","):
        export(name, os.path.join(a.out, f"{name}.onnx"), a.batch, False)
        if a.dynamic:
            export(name, os.path.join(a.out, f"{name}_dyn.onnx"), a.batch, True)
        if a.data:
            _, inputs, names = make(name)
            g = torch.Generator().manual_seed(1)
            arrays = inputs(a.data, g)
            np.savez(os.path.join(a.out, f"{name}.npz"),
                     **{n: t.numpy() for n, t in zip(names, arrays)})


if __name__ == "__main__":
    main()
