#!/usr/bin/env python3
"""BatchNormalization in training: a small conv net, and PyTorch's trajectory.

    batchnorm_reference.py make OUT          writes OUT/bn.onnx, OUT/bn.npz
    batchnorm_reference.py check --onnx bn.onnx --data bn.npz --log L.jsonl
        --saved trained.onnx --steps K --batch B --microbatches M
        [--lr F] [--momentum F] [--rtol R]

The net is Conv-BN-ReLU-Conv(stride 2)-BN-ReLU-GlobalAveragePool-Linear with
a cross-entropy loss, exported by torch.onnx in training mode (opset 17), so
each BatchNormalization normalises with batch statistics and returns running
statistics.

`check` trains the same net in PyTorch from the ONNX model's initializers
(SGD with momentum, rows s*B .. s*B+B-1 at step s) the way pipec defines
micro-batching (README, "BatchNormalization"): each of the M micro-batches
of B/M rows is normalised with its own statistics, the step's gradient is
the mean of the micro-batches' (gradient accumulation), and the running
statistics are updated once per micro-batch, in order. Running statistics
follow the ONNX operator: running = momentum * running + (1 - momentum) *
batch statistic, with the biased batch variance (PyTorch's own buffers use
the unbiased one, so they are recomputed here from each BatchNorm's input).
It compares every step's loss with the log, and the trained weights and the
running statistics with the ONNX written by `pipe-run --save`:
max|ours - torch| <= rtol * max|torch| per tensor. Exits 1 on a mismatch.
Run with Debian's /usr/bin/python3 (torch, onnx).
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_common import onnx_initializers  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x, y):
        h = torch.relu(self.bn1(self.conv1(x)))
        h = torch.relu(self.bn2(self.conv2(h)))
        return nn.functional.cross_entropy(self.fc(self.pool(h).flatten(1)), y)


def make(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = Net()
    with torch.no_grad():  # running statistics away from their defaults
        for bn in (model.bn1, model.bn2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.2, 0.2)
    x = torch.randn(8, 3, 6, 6)
    y = torch.randint(0, 5, (8,))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    torch.onnx.export(model, (x, y), os.path.join(out, "bn.onnx"),
                      input_names=["x", "y"], output_names=["loss"],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=17)
    # Tracing ran the forward in training mode: keep the initial buffers.
    import onnx
    from onnx import numpy_helper
    m = onnx.load(os.path.join(out, "bn.onnx"))
    for init in m.graph.initializer:
        if init.name in state:
            init.CopyFrom(numpy_helper.from_array(state[init.name].numpy(),
                                                  init.name))
    onnx.save(m, os.path.join(out, "bn.onnx"))
    rng = np.random.default_rng(1)
    np.savez(os.path.join(out, "bn.npz"),
             x=(rng.standard_normal((64, 3, 6, 6)) * 2 + 0.5).astype(np.float32),
             y=rng.integers(0, 5, 64).astype(np.int64))
    print("wrote bn.onnx and bn.npz")


def rel_err(got, ref):
    return float(np.max(np.abs(got - ref))) / max(float(np.max(np.abs(ref))), 1e-12)


def check(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--onnx", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--saved", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--microbatches", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--rtol", type=float, default=1e-4)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    model = Net()
    inits = onnx_initializers(a.onnx)
    state = model.state_dict()
    for key in state:
        if key.endswith("num_batches_tracked"):
            continue  # not exported; unused with a fixed momentum
        if key not in inits:
            sys.exit(f"FAIL: {a.onnx} has no initializer '{key}'")
        state[key] = torch.from_numpy(inits[key].copy())
    model.load_state_dict(state)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)

    # Running statistics with the ONNX operator's semantics, from each
    # BatchNorm's input.
    bns = {"bn1": model.bn1, "bn2": model.bn2}
    running = {name: [inits[f"{name}.running_mean"].astype(np.float64),
                      inits[f"{name}.running_var"].astype(np.float64)]
               for name in bns}

    def hook(name):
        def f(module, inputs):
            x = inputs[0].detach().double().numpy()
            axes = (0, 2, 3)
            m = 1.0 - module.momentum  # ONNX momentum = 1 - torch's
            running[name][0] = m * running[name][0] + (1 - m) * x.mean(axis=axes)
            running[name][1] = m * running[name][1] + (1 - m) * x.var(axis=axes)
        return f
    for name, bn in bns.items():
        bn.register_forward_pre_hook(hook(name))

    data = np.load(a.data)
    xs, ys = data["x"], data["y"]
    rows = xs.shape[0]
    with open(a.log) as f:
        logged = [json.loads(line) for line in f if line.strip()]
    if len(logged) != a.steps:
        sys.exit(f"FAIL: the log has {len(logged)} steps, expected {a.steps}")
    if a.batch % a.microbatches:
        sys.exit("FAIL: the batch is not divisible by the micro-batches")
    mb = a.batch // a.microbatches
    worst = 0.0
    for s in range(a.steps):
        idx = [(s * a.batch + i) % rows for i in range(a.batch)]
        x, y = torch.from_numpy(xs[idx]), torch.from_numpy(ys[idx])
        opt.zero_grad()
        total = 0.0
        for k in range(a.microbatches):
            part = slice(k * mb, (k + 1) * mb)
            loss = model(x[part], y[part]) / a.microbatches
            loss.backward()
            total += float(loss)
        opt.step()
        got = logged[s]["loss"]
        rel = abs(got - total) / max(abs(total), 1e-12)
        worst = max(worst, rel)
        if rel > a.rtol:
            sys.exit(f"FAIL: step {s}: loss {got} vs PyTorch {total} "
                     f"(relative error {rel:.2e} > {a.rtol})")
    print(f"OK: {a.steps} steps within {a.rtol} of PyTorch "
          f"(worst relative error {worst:.1e})")

    saved = onnx_initializers(a.saved)
    worst = 0.0
    refs = {k: p.detach().numpy() for k, p in model.named_parameters()}
    for name in bns:
        refs[f"{name}.running_mean"] = running[name][0]
        refs[f"{name}.running_var"] = running[name][1]
    for key, ref in refs.items():
        if key not in saved:
            sys.exit(f"FAIL: {a.saved} has no initializer '{key}'")
        err = rel_err(saved[key].astype(np.float64), ref)
        worst = max(worst, err)
        if err > a.rtol:
            sys.exit(f"FAIL: saved '{key}' differs from the reference by "
                     f"{err:.2e} (relative to its largest element)")
    print(f"OK: {len(refs)} saved weights and running statistics within "
          f"{a.rtol} of the reference (worst {worst:.1e})")


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "make":
        make(sys.argv[2])
    elif len(sys.argv) >= 2 and sys.argv[1] == "check":
        check(sys.argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
