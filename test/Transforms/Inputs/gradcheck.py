#!/usr/bin/env python3
"""Checks the gradients of a training step against central finite differences.

    gradcheck.py STEP.mlir [--func train_step] [--data X.npz] [--int-high N]
                 [--samples K] [--seed S] [--rtol R] [--atol A]

STEP.mlir is `pipe-opt --pipe-autodiff --mlir-print-op-generic` output
(several modules separated by `// -----` are checked one after the other). The
step is evaluated with the reference interpreter onnx_eval.py in float64:
its loss (the pipe.loss result) and every pipe.grad result; then for up to K
coordinates of each parameter, (loss(x + h) - loss(x - h)) / 2h of the same
function. Inputs come from --data (arrays named like the pipe.input names),
parameters from their pipe.init, anything else at random (integers in
[0, N), floats normal). Prints one line per parameter and exits 1 on any
mismatch.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_eval  # noqa: E402


def make_args(func, resources, data, rng, int_high):
    args = []
    for i, t in enumerate(func.arg_types):
        attrs = func.arg_attrs[i]
        name = attrs.get("pipe.input")
        if data is not None and name in data:
            args.append(np.asarray(data[name]).astype(t.dtype()))
            continue
        init = onnx_eval.init_value(func, i, resources)
        if init is not None:
            args.append(init.astype(t.dtype()))
        elif t.dtype() == np.float64:
            args.append(rng.standard_normal(t.shape))
        elif t.dtype() == np.bool_:
            args.append(rng.random(t.shape) < 0.5)
        else:
            args.append(rng.integers(0, int_high, t.shape))
    return args


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("module")
    ap.add_argument("--func", default="train_step")
    ap.add_argument("--data")
    ap.add_argument("--int-high", type=int, default=2)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--atol", type=float, default=1e-7)
    ap.add_argument("--step", type=float, default=1e-6)
    opts = ap.parse_args()
    data = np.load(opts.data) if opts.data else None
    status = 0
    for n, text in enumerate(open(opts.module).read().split("// -----")):
        print("gradcheck: module %d" % n)
        status |= check(text, opts, data)
    return status


def check(text, opts, data):
    funcs, resources = onnx_eval.parse_module(text)
    func = funcs[opts.func]
    rng = np.random.default_rng(opts.seed)
    args = make_args(func, resources, data, rng, opts.int_high)
    loss_index = next(i for i, a in enumerate(func.res_attrs) if a.get("pipe.loss"))
    outs = onnx_eval.run(func, args)
    loss = float(np.asarray(outs[loss_index]).reshape(-1)[0])
    print("gradcheck: @%s loss %.6g" % (func.name, loss))
    if not np.isfinite(loss):
        print("gradcheck: FAIL the loss is not finite")
        return 1

    def loss_at(i, flat_index, value):
        perturbed = list(args)
        x = args[i].copy()
        x.reshape(-1)[flat_index] = value
        perturbed[i] = x
        return float(np.asarray(onnx_eval.run(func, perturbed)[loss_index]).reshape(-1)[0])

    failed = 0
    checked = 0
    for r, attrs in enumerate(func.res_attrs):
        name = attrs.get("pipe.grad")
        if name is None:
            continue
        i = func.arg_index("pipe.param", name)
        grad = np.asarray(outs[r])
        if grad.shape != args[i].shape:
            print("gradcheck: FAIL %s: gradient shape %s, parameter %s" % (name, grad.shape, args[i].shape))
            failed += 1
            continue
        size = args[i].size
        picks = range(size) if size <= opts.samples else rng.choice(size, opts.samples, replace=False)
        worst = 0.0
        bad = []
        for k in picks:
            x0 = args[i].reshape(-1)[k]
            h = opts.step * max(1.0, abs(x0))
            numeric = (loss_at(i, k, x0 + h) - loss_at(i, k, x0 - h)) / (2 * h)
            analytic = grad.reshape(-1)[k]
            err = abs(numeric - analytic)
            worst = max(worst, err)
            if not np.isfinite(err) or err > opts.atol + opts.rtol * max(abs(numeric), abs(analytic)) + 1e-9:
                bad.append((int(k), analytic, numeric))
        checked += 1
        if bad:
            failed += 1
            print("gradcheck: FAIL %s: %d of %d coordinates differ, e.g. index %d: "
                  "compiled %.8g, finite difference %.8g" % ((name, len(bad), len(picks)) + bad[0]))
        else:
            print("gradcheck: ok %s (%d coordinates, max abs err %.2e)" % (name, len(picks), worst))
    if checked == 0:
        print("gradcheck: FAIL no pipe.grad results")
        return 1
    print("gradcheck: %s, %d parameters" % ("FAILED" if failed else "PASSED", checked))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
