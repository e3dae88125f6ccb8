#!/usr/bin/env python3
"""Checks a pipe-run step log against PyTorch training the same model.

    torch_trajectory.py --model mlp --data D.npz --log steps.jsonl --steps K
        --batch B --optimizer sgd|momentum|nesterov|adam|adamw|adagrad --lr F
        [--momentum F] [--weight-decay F] [--rtol 1e-4]

Rebuilds the model with examples/models.py (same seed, so the same initial
weights as the exported ONNX), trains it on the data without shuffling
(step s reads rows s*B .. s*B+B-1, wrapping) and compares every step's loss
(computed before that step's update) with the log. Run with Debian's
/usr/bin/python3 (torch).
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                "examples"))
import models  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--data", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--optimizer", default="sgd")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--rtol", type=float, default=1e-4)
    a = ap.parse_args()

    torch.set_num_threads(1)
    model, _, names = models.make(a.model)
    model.train()
    p = model.parameters()
    wd = a.weight_decay
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(p, lr=a.lr, weight_decay=wd)
    elif a.optimizer in ("momentum", "nesterov"):
        opt = torch.optim.SGD(p, lr=a.lr, momentum=a.momentum, weight_decay=wd,
                              nesterov=a.optimizer == "nesterov")
    elif a.optimizer == "adam":
        opt = torch.optim.Adam(p, lr=a.lr, weight_decay=wd)
    elif a.optimizer == "adamw":
        opt = torch.optim.AdamW(p, lr=a.lr, weight_decay=wd)
    elif a.optimizer == "adagrad":
        opt = torch.optim.Adagrad(p, lr=a.lr, weight_decay=wd)
    else:
        sys.exit(f"unknown optimizer {a.optimizer}")

    data = np.load(a.data)
    arrays = [data[n] for n in names]
    rows = arrays[0].shape[0]
    with open(a.log) as f:
        logged = [json.loads(line) for line in f if line.strip()]
    if len(logged) != a.steps:
        sys.exit(f"FAIL: the log has {len(logged)} steps, expected {a.steps}")
    worst = 0.0
    for s in range(a.steps):
        idx = [(s * a.batch + i) % rows for i in range(a.batch)]
        inputs = [torch.from_numpy(x[idx]) for x in arrays]
        opt.zero_grad()
        loss = model(*inputs)
        loss.backward()
        opt.step()
        ref = float(loss)
        got = logged[s]["loss"]
        if logged[s]["step"] != s:
            sys.exit(f"FAIL: line {s} is step {logged[s]['step']}")
        rel = abs(got - ref) / max(abs(ref), 1e-12)
        worst = max(worst, rel)
        if rel > a.rtol:
            sys.exit(f"FAIL: step {s}: loss {got} vs PyTorch {ref} "
                     f"(relative error {rel:.2e} > {a.rtol})")
    print(f"OK: {a.steps} steps within {a.rtol} of PyTorch "
          f"(worst relative error {worst:.1e})")


if __name__ == "__main__":
    main()
