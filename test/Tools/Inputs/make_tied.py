"""A language model whose output projection is its token embedding (tied
weights: one initializer read by the first op and by the last), exported for
training with its cross-entropy loss, and a data set; with --batchnorm, a
BatchNorm1d before the projection. Used by pipeline-tied.test: in a pipeline
the embedding's owner sends it to the stage of the projection, and the two
stages' gradients of it are summed.

usage: make_tied.py OUT_DIR [--batchnorm]
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn

V, D, T, B = 16, 12, 4, 8


class Net(nn.Module):
    def __init__(self, bn):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.l1 = nn.Linear(D, D)
        self.l2 = nn.Linear(D, D)
        self.ln = nn.LayerNorm(D)
        self.bn = nn.BatchNorm1d(D) if bn else None

    def forward(self, tok, tgt):
        h = self.emb(tok)
        h = h + torch.relu(self.l1(h))
        h = self.ln(h + nn.functional.gelu(self.l2(h)))
        if self.bn is not None:
            h = self.bn(h.transpose(1, 2)).transpose(1, 2)
        logits = h @ self.emb.weight.t()
        return nn.functional.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))


def main():
    out = sys.argv[1]
    bn = "--batchnorm" in sys.argv[2:]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    net = Net(bn).train()
    tok, tgt = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))
    name = "tied_bn" if bn else "tied"
    torch.onnx.export(net, (tok, tgt), os.path.join(out, name + ".onnx"),
                      input_names=["tok", "tgt"], output_names=["loss"],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=14)
    rng = np.random.default_rng(0)
    np.savez(os.path.join(out, "tied.npz"),
             tok=rng.integers(0, V, (64, T)).astype(np.int64),
             tgt=rng.integers(0, V, (64, T)).astype(np.int64))


if __name__ == "__main__":
    main()
