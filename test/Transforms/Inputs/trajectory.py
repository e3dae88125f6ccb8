#!/usr/bin/env python3
"""Compares a few optimizer steps of a compiled training step with PyTorch.

    trajectory.py MODEL OUT_DIR "PASS OPTIONS" TORCH_OPTIMIZER [--steps N]

Exports examples/models.py's MODEL, runs `pipe-translate --import-onnx |
pipe-opt --pipe-autodiff --pipe-add-optimizer=...`, evaluates N steps of the
resulting @train_step with onnx_eval.py (float64; the optimizer state and
the step counter fed back through the pipe.update results), and runs the
same steps with torch.optim on the model in float64. TORCH_OPTIMIZER is a
Python expression over `params`, e.g. "torch.optim.AdamW(params, lr=0.01)".
Prints the loss of each step and exits 1 when losses or final parameters
differ by more than 1e-6 (relative).
"""
import os
import subprocess
import sys

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "..", "..", "examples"))
import models  # noqa: E402
import onnx_eval  # noqa: E402


def main():
    name, out, pass_opts, torch_opt = sys.argv[1:5]
    steps = int(sys.argv[6]) if len(sys.argv) > 6 and sys.argv[5] == "--steps" else 3
    batch = 4
    path = os.path.join(out, name + ".onnx")
    model = models.export(name, path, batch, False)
    imported = subprocess.run(["pipe-translate", "--import-onnx", path], check=True,
                              capture_output=True, text=True).stdout
    text = subprocess.run(["pipe-opt", "--pipe-autodiff", "--pipe-add-optimizer=" + pass_opts,
                           "--mlir-print-op-generic"], input=imported, check=True,
                          capture_output=True, text=True).stdout
    funcs, resources = onnx_eval.parse_module(text)
    step = funcs["train_step"]

    _, make_inputs, input_names = models.make(name)
    gen = torch.Generator().manual_seed(1)
    batches = [make_inputs(batch, gen) for _ in range(steps)]

    # compiled
    state = {}
    for i, a in enumerate(step.arg_attrs):
        key = a.get("pipe.param") or a.get("pipe.state")
        if key is not None:
            state[key] = onnx_eval.init_value(step, i, resources)
    ours = []
    for b in batches:
        feeds = dict(zip(input_names, [t.numpy() for t in b]))
        args = []
        for i, a in enumerate(step.arg_attrs):
            if "pipe.input" in a:
                args.append(feeds[a["pipe.input"]].astype(step.arg_types[i].dtype()))
            else:
                args.append(state[a.get("pipe.param") or a.get("pipe.state")])
        outs = onnx_eval.run(step, args)
        for r, a in enumerate(step.res_attrs):
            if "pipe.loss" in a:
                ours.append(float(outs[r]))
            if "pipe.update" in a:
                state[a["pipe.update"]] = outs[r]

    # PyTorch, in float64 from the same float32 weights
    model = model.double()
    params = [p for p in model.parameters()]
    opt = eval(torch_opt, {"torch": torch, "params": params})
    theirs = []
    for b in batches:
        b = [t.double() if t.is_floating_point() else t for t in b]
        opt.zero_grad()
        loss = model(*b)
        loss.backward()
        opt.step()
        theirs.append(float(loss))

    bad = 0
    for k, (a, t) in enumerate(zip(ours, theirs)):
        ok = abs(a - t) <= 1e-6 * max(1.0, abs(t))
        bad += not ok
        print("trajectory: step %d loss %.9f torch %.9f %s" % (k, a, t, "ok" if ok else "MISMATCH"))
    worst = 0.0
    for pname, p in model.named_parameters():
        ref = p.detach().numpy()
        got = state[pname]
        worst = max(worst, float(np.max(np.abs(got - ref) / np.maximum(1.0, np.abs(ref)))))
    ok = worst <= 1e-6
    bad += not ok
    print("trajectory: final parameters max rel diff %.2e %s" % (worst, "ok" if ok else "MISMATCH"))
    print("trajectory: %s" % ("FAILED" if bad else "PASSED"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
