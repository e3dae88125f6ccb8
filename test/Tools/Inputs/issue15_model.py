#!/usr/bin/env python3
"""A PyTorch model made of issue 15's operators, and its training reference.

    issue15_model.py export OUT          writes OUT/ops15.onnx (batch 8, opset
                                         17) and OUT/ops15.npz (64 samples),
                                         and OUT/ops15v.onnx/.npz (Ops15Vision)
    issue15_model.py check ONNX DATA LOG --steps K --lr F [--rtol R]
                                         trains the module with torch.optim.SGD
                                         from ONNX's initial weights on DATA
                                         (no shuffling, batch 8) and compares
                                         each step's loss with pipe-run's LOG

The export has LeakyRelu, Elu, HardSwish, ReduceMax, Clip, Max, Trilu,
CumSum, Pad (reflect) and Tile on the way from the input to the loss, so
the compiled gradients of each reach the trained weights. Ops15Vision has
ConvTranspose, Resize (nearest, linear, align_corners by sizes) and Einsum;
`check` picks the module by the file name (ops15v: Ops15Vision). ReduceMax reads
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


class Ops15Vision(nn.Module):
    """ConvTranspose2d/1d, interpolate (nearest x2, bilinear by scale and by
    size with align_corners) and einsum attention, as torch.onnx exports
    them (ConvTranspose, Resize, Einsum)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.up = nn.ConvTranspose2d(2, 4, 3, stride=2, padding=1, output_padding=1)
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.up1 = nn.ConvTranspose1d(4, 2, 3, stride=2, groups=2)
        self.qkv = nn.Linear(4, 24)
        self.out = nn.Parameter(torch.randn(10, 14) * 0.3)
        self.bias = nn.Parameter(torch.zeros(10))

    def forward(self, x, y):
        b = x.shape[0]
        h = torch.tanh(self.up(x))                                         # (B, 4, 8, 8)
        h = F.interpolate(h, scale_factor=0.5, mode="bilinear", align_corners=False)
        u = F.interpolate(x, scale_factor=2.0, mode="nearest")             # (B, 2, 8, 8)
        t = torch.tanh(self.conv(u)).mean((2, 3))                          # (B, 4)
        g = F.interpolate(h, size=(6, 5), mode="bilinear", align_corners=True)
        q, k, v = self.qkv(g.flatten(2).transpose(1, 2)).reshape(b, 30, 3, 2, 4).unbind(2)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))                  # (B, 2, 30, 4)
        att = torch.softmax(torch.einsum("bhqd,bhkd->bhqk", q, k) * 0.5, dim=-1)
        o = torch.einsum("bhqk,bhkd->bhqd", att, v).mean(2).flatten(1)     # (B, 8)
        z = self.up1(h.flatten(2)).mean(2)                                 # (B, 2)
        feats = torch.cat([o, t, z], 1)                                    # (B, 14)
        logits = torch.einsum("bi,ci->bc", feats, self.out) + self.bias
        return F.cross_entropy(logits, y)


def model_for(path):
    return Ops15Vision() if "ops15v" in path else Ops15()


def export(out):
    model = Ops15()
    model.train()
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(64, 12, generator=g), torch.randint(0, 10, (64,), generator=g)
    torch.onnx.export(model, (x[:B], y[:B]), f"{out}/ops15.onnx", input_names=["x", "y"],
                      output_names=["loss"], opset_version=17, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING)
    np.savez(f"{out}/ops15.npz", x=x.numpy(), y=y.numpy())
    model = Ops15Vision()
    model.train()
    x = torch.randn(64, 2, 4, 4, generator=g)
    torch.onnx.export(model, (x[:B], y[:B]), f"{out}/ops15v.onnx", input_names=["x", "y"],
                      output_names=["loss"], opset_version=17, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING)
    np.savez(f"{out}/ops15v.npz", x=x.numpy(), y=y.numpy())


def check(onnx_path, data, log, steps, lr, rtol):
    import onnx
    from onnx import numpy_helper
    model = model_for(onnx_path)
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
