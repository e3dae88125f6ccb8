#!/usr/bin/env python3
"""The evaluation pass (pipe-run --eval-data) against PyTorch's eval().

    eval_check.py make OUT_DIR
        writes OUT_DIR/bn_dropout.onnx (Linear, BatchNorm1d, ReLU, Dropout
        0.3, Linear, Dropout 0.2, Linear head; cross-entropy; exported for
        training with a symbolic batch axis), train.npz (64 rows) and
        val.npz (44 rows: the last 4 are no whole batch of 8); and, for the
        accuracy, seq_nll / regression / penalised / two_heads.onnx with
        <name>_train.npz and <name>_val.npz (MODELS below).
    eval_check.py check --model bn_dropout|seq_nll|...|mlp|... --saved S.onnx --log L.jsonl
        --eval-data V.npz --batch B [--eval-batches N] [--rtol 1e-4]
        the log's last evaluation (its loss, samples and top-1 accuracy:
        reference_common's AccuracyCounter, none for a model whose loss has
        no or several classification terms) equals PyTorch's
        model with the saved weights (parameters and running statistics) in
        eval() mode under no_grad: the mean of its losses on V's first
        min(N, rows // B) batches of B rows. Also prints the mean loss in
        train() mode without Dropout (batch statistics): the check fails
        for an evaluation that normalised with the batch's statistics.

Run with Debian's /usr/bin/python3 (torch, onnx).
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
import models  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_common import (AccuracyCounter, check_accuracy, loss_error,  # noqa: E402
                              onnx_initializers)


class BNDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 24)
        self.bn = nn.BatchNorm1d(24)
        self.drop1 = nn.Dropout(0.3)
        self.fc2 = nn.Linear(24, 24)
        self.drop2 = nn.Dropout(0.2)
        self.head = nn.Linear(24, 4)

    def forward(self, x, y):
        h = self.drop1(torch.relu(self.bn(self.fc1(x))))
        h = self.drop2(torch.tanh(self.fc2(h)))
        return nn.functional.cross_entropy(self.head(h), y)


class SeqNLL(nn.Module):
    """A tagger: per-token log-probabilities over 6 classes as (B, C, T)
    scores, nll_loss with ignore_index 0, a class that also occurs (so
    ignored labels are not all outside [0, C))."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.fc = nn.Linear(8, 6)

    def forward(self, tokens, tags):
        # Log-probabilities that are not LogSoftmax's output directly (the
        # exporter fuses that pair into a SoftmaxCrossEntropyLoss).
        scores = torch.log_softmax(self.fc(torch.tanh(self.emb(tokens))).transpose(1, 2), dim=1)
        return nn.functional.nll_loss(scores * 0.5, tags, ignore_index=0)


class Regression(nn.Module):
    """No class scores: mean-squared error, which has no accuracy."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 16)
        self.fc2 = nn.Linear(16, 1)

    def forward(self, x, y):
        return ((self.fc2(torch.relu(self.fc1(x))).squeeze(1) - y) ** 2).mean()


class TwoHeads(nn.Module):
    """Two cross-entropy terms (BERT's MLM + NSP shape): an ambiguous accuracy."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 16)
        self.a = nn.Linear(16, 4)
        self.b = nn.Linear(16, 3)

    def forward(self, x, y, z):
        h = torch.relu(self.fc(x))
        return nn.functional.cross_entropy(self.a(h), y) + nn.functional.cross_entropy(self.b(h), z)


class PenalisedCE(nn.Module):
    """One cross-entropy term plus an L2 penalty on a weight: the accuracy
    is the cross-entropy's, wherever the penalty's Add runs."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 16)
        self.fc2 = nn.Linear(16, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, x, y):
        h = torch.tanh(self.fc2(torch.relu(self.fc1(x))))
        return nn.functional.cross_entropy(self.head(h), y) + 0.01 * (self.fc1.weight ** 2).sum()


# name: (module class, input names, row maker(rng, rows) -> arrays)
MODELS = {
    "bn_dropout": (BNDropout, ["x", "y"], lambda rng, n: [
        rng.standard_normal((n, 12)).astype(np.float32) * 2 + 0.5,
        rng.integers(0, 4, n).astype(np.int64)]),
    "seq_nll": (SeqNLL, ["tokens", "tags"], lambda rng, n: [
        rng.integers(0, 10, (n, 5)).astype(np.int64),
        rng.integers(0, 6, (n, 5)).astype(np.int64)]),
    "regression": (Regression, ["x", "y"], lambda rng, n: [
        rng.standard_normal((n, 12)).astype(np.float32),
        rng.standard_normal(n).astype(np.float32)]),
    "penalised": (PenalisedCE, ["x", "y"], lambda rng, n: [
        rng.standard_normal((n, 12)).astype(np.float32),
        rng.integers(0, 4, n).astype(np.int64)]),
    "two_heads": (TwoHeads, ["x", "y", "z"], lambda rng, n: [
        rng.standard_normal((n, 12)).astype(np.float32),
        rng.integers(0, 4, n).astype(np.int64), rng.integers(0, 3, n).astype(np.int64)]),
}


def make(out):
    os.makedirs(out, exist_ok=True)
    for name, (cls, names, rows_of) in MODELS.items():
        torch.manual_seed(0)
        net = cls().train()
        example = tuple(torch.from_numpy(a) for a in rows_of(np.random.default_rng(1), 8))
        torch.onnx.export(net, example, os.path.join(out, name + ".onnx"),
                          input_names=names, output_names=["loss"], opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          dynamic_axes={n: {0: "batch"} for n in names})
        rng = np.random.default_rng(0)
        for split, rows in (("train", 64), ("val", 44)):
            arrays = rows_of(rng, rows)
            stem = split if name == "bn_dropout" else f"{name}_{split}"
            np.savez(os.path.join(out, stem + ".npz"), **dict(zip(names, arrays)))


def check(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="bn_dropout")
    ap.add_argument("--saved", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--eval-data", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--eval-batches", type=int, default=0)
    ap.add_argument("--rtol", type=float, default=1e-4)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    if a.model in MODELS:
        model, names = MODELS[a.model][0](), MODELS[a.model][1]
    else:
        model, _, names = models.make(a.model)
    saved = onnx_initializers(a.saved)
    state = model.state_dict()
    for key in state:
        if key.endswith("num_batches_tracked"):
            continue
        if key not in saved:
            sys.exit(f"FAIL: {a.saved} has no initializer '{key}'")
        state[key] = torch.from_numpy(saved[key].copy())
    model.load_state_dict(state)
    with open(a.log) as f:
        evals = [json.loads(line) for line in f if '"eval_loss"' in line]
    if not evals:
        sys.exit(f"FAIL: {a.log} has no evaluation")
    data = np.load(a.eval_data)
    arrays = [data[n] for n in names]
    rounds = arrays[0].shape[0] // a.batch
    if a.eval_batches:
        rounds = min(rounds, a.eval_batches)

    def mean_loss():
        with torch.no_grad():
            return sum(float(model(*[torch.from_numpy(x[j * a.batch:(j + 1) * a.batch])
                                     for x in arrays])) for j in range(rounds)) / rounds

    model.eval()
    with AccuracyCounter() as counter:
        ref = mean_loss()
    # Batch statistics, no Dropout: what a pass that kept training-mode
    # normalisation would give.
    model.train()
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    batch_stats = mean_loss()
    got = evals[-1]
    if got["eval_samples"] != rounds * a.batch:
        sys.exit(f"FAIL: the evaluation covered {got['eval_samples']} samples, "
                 f"expected {rounds * a.batch}")
    rel = loss_error(got["eval_loss"], ref)
    if rel > a.rtol:
        sys.exit(f"FAIL: the last evaluation's loss {got['eval_loss']} vs PyTorch's "
                 f"eval() {ref} (relative error {rel:.2e}; with batch statistics "
                 f"{batch_stats})")
    check_accuracy(got, got["step"], counter.counts(rounds), "PyTorch's eval()")
    print(f"OK: the evaluation equals PyTorch's eval() within {a.rtol} "
          f"({float('nan') if got['eval_loss'] is None else got['eval_loss']:.6f}, accuracy "
          f"{'none' if got.get('eval_accuracy') is None else round(got['eval_accuracy'], 4)} "
          f"over {got['eval_samples']} samples)")
    apart = abs(batch_stats - ref) / max(abs(ref), 1e-12)
    print(f"batch statistics give {batch_stats:.6f} ({'differs' if apart > 10 * a.rtol else 'same'})")


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "make":
        make(sys.argv[2])
    elif len(sys.argv) >= 2 and sys.argv[1] == "check":
        check(sys.argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
