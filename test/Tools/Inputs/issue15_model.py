#!/usr/bin/env python3
"""A PyTorch model made of issue 15's operators, and its training reference.

    issue15_model.py export OUT          writes OUT/ops15.onnx (batch 8, opset
                                         17) and OUT/ops15.npz (64 samples)
    issue15_model.py check ONNX DATA LOG --steps K --lr F [--rtol R]
                                         trains the module with torch.optim.SGD
                                         from ONNX's initial weights on DATA
                                         (no shuffling, batch 8) and compares
                                         each step's loss with pipe-run's LOG

The export has LeakyRelu, Elu, HardSwish, ReduceMax, Clip, Max, Trilu,
CumSum, Pad (reflect) and Tile on the way from the input to the loss, so
the compiled gradients of each reach the trained weights. ReduceMax reads
unclamped values (no ties, where PyTorch's amax would split the gradient).
Run with Debian's /usr/bin/python3 (torch, onnx).
"""
import json
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

B = 8


class Ops15(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.l1 = nn.Linear(12, 16)
        self.floor = nn.Parameter(torch.randn(16) * 0.5)
        self.l2 = nn.Linear(4 + 4 * 14, 10)

    def forward(self, x, y):
        h = self.l1(x)
        a = F.leaky_relu(h, 0.1) + F.elu(h, 0.7) - F.hardswish(h)
        m = a.reshape(-1, 4, 4).amax(dim=2)
        c = torch.maximum(torch.clamp(a, -1.5, 1.5), self.floor)
        s = torch.tril(c.reshape(-1, 4, 4))
        s = torch.cumsum(s, dim=2)
        s = F.pad(s, (1, 2), mode="reflect")
        t = s.repeat(1, 1, 2)
        out = self.l2(torch.cat([m, t.flatten(1)], 1))
        return F.cross_entropy(out, y)


def export(out):
    model = Ops15()
    model.train()
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(64, 12, generator=g), torch.randint(0, 10, (64,), generator=g)
    torch.onnx.export(model, (x[:B], y[:B]), f"{out}/ops15.onnx", input_names=["x", "y"],
                      output_names=["loss"], opset_version=17, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING)
    np.savez(f"{out}/ops15.npz", x=x.numpy(), y=y.numpy())


def check(onnx_path, data, log, steps, lr, rtol):
    import onnx
    from onnx import numpy_helper
    model = Ops15()
    inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(onnx_path).graph.initializer}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name not in inits:
                sys.exit(f"issue15_model: parameter {name} is not an initializer of the ONNX")
            p.copy_(torch.from_numpy(inits[name].copy()))
    d = np.load(data)
    x, y = torch.from_numpy(d["x"]), torch.from_numpy(d["y"])
    with open(log) as f:
        got = [json.loads(line)["loss"] for line in f][:steps]
    if len(got) < steps:
        sys.exit(f"issue15_model: the log has {len(got)} steps, expected {steps}")
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    worst = 0.0
    for s in range(steps):
        rows = [(s * B + i) % len(x) for i in range(B)]
        opt.zero_grad()
        loss = model(x[rows], y[rows])
        loss.backward()
        opt.step()
        err = abs(got[s] - loss.item()) / max(abs(loss.item()), 1e-6)
        worst = max(worst, err)
        if err > rtol:
            sys.exit(f"issue15_model: step {s}: pipec {got[s]:.7g} torch {loss.item():.7g} "
                     f"(rel {err:.1e} > {rtol})")
    print(f"OK: {steps} steps match PyTorch (max rel {worst:.1e})")


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "export":
        export(sys.argv[2])
        return
    if len(sys.argv) >= 5 and sys.argv[1] == "check":
        opts = dict(zip(sys.argv[5::2], sys.argv[6::2]))
        check(sys.argv[2], sys.argv[3], sys.argv[4], int(opts["--steps"]),
              float(opts["--lr"]), float(opts.get("--rtol", "1e-4")))
        return
    sys.exit(__doc__)


if __name__ == "__main__":
    main()
