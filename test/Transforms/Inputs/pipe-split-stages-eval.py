#!/usr/bin/env python3
"""Checks that the micro-batched, split step computes the unsplit step.

    pipe-split-stages-eval.py FULL.mlir SPLIT.mlir --microbatches M
                              [--combine mean|sum] [--int-high N] [--seed S]
                              [--ignore NAME=LABEL]

FULL.mlir: `pipe-opt --pipe-autodiff --mlir-print-op-generic` output, the
whole-batch @train_step (loss {pipe.loss}, gradients {pipe.grad = name}).
SPLIT.mlir: the same step after --pipe-microbatch, --pipe-split-stages and
--pipe-insert-transfers, printed generic. Both are run by the reference
interpreter onnx_eval.py (float64) on the same random data and weights. The
split one is run as a pipeline would: for each micro-batch k (rows
k*B/M .. of every input), the forwards of stages 0 .. p-1, then their
backwards in reverse, values connected by their pipe.input / pipe.name /
pipe.grad attributes exactly as pipe-schedule connects them (a name read by
stage s must be returned by stage s-1); weight gradients summed over the
micro-batches; a pipe.step_input argument gets the whole batch of its
input. The step's loss is the micro-batches' losses combined by --combine
(default: the split module's pipe.loss_combine, else mean). --ignore
y=-100 sets every third element of integer input y, and all of its first
micro-batch, to -100 (a loss's ignore_index). Prints `split-eval: PASSED`
or the mismatches (exit 1).
"""
import argparse
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_eval  # noqa: E402


def load(path):
    text = open(path).read()
    # A pipe.stage is function-like: let the interpreter read it as one.
    text = text.replace('"pipe.stage"', '"func.func"').replace('"pipe.return"', '"func.return"')
    text = re.sub(r"#pipe<phase (\w+)>", r'"\1"', text)
    return onnx_eval.parse_module(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("full")
    ap.add_argument("split")
    ap.add_argument("--microbatches", type=int, required=True)
    ap.add_argument("--combine")
    ap.add_argument("--ignore", action="append", default=[])
    ap.add_argument("--int-high", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rtol", type=float, default=1e-9)
    opts = ap.parse_args()
    rng = np.random.default_rng(opts.seed)

    funcs, _ = load(opts.full)
    step = funcs["train_step"]
    args, inputs, params = [], {}, {}
    for i, t in enumerate(step.arg_types):
        a = step.arg_attrs[i]
        if t.dtype() == np.float64:
            v = rng.standard_normal(t.shape)
        else:
            v = rng.integers(0, opts.int_high, t.shape)
            for spec in opts.ignore:
                name, label = spec.split("=")
                if a.get("pipe.input") == name:
                    flat = v.reshape(-1)
                    flat[::3] = int(label)
                    v[: t.shape[0] // opts.microbatches] = int(label)
        args.append(v)
        if "pipe.input" in a:
            inputs[a["pipe.input"]] = v
        if "pipe.param" in a:
            params[a["pipe.param"]] = v
    results = onnx_eval.run(step, args)
    want_loss, want_grads = None, {}
    for r, a in zip(results, step.res_attrs):
        if "pipe.loss" in a:
            want_loss = r
        if "pipe.grad" in a:
            want_grads[a["pipe.grad"]] = r

    stages, _ = load(opts.split)
    fwd = sorted((f for f in stages.values() if f.name.endswith("_fwd")), key=lambda f: f.name)
    bwd = sorted((f for f in stages.values() if f.name.endswith("_bwd")), key=lambda f: f.name)
    if not fwd or len(fwd) != len(bwd):
        print("split-eval: expected one _fwd and one _bwd stage per stage")
        return 1
    m = opts.microbatches
    losses, grads = [], {}
    for k in range(m):
        named, grad_of = {}, {}

        def arg_values(f, s):
            vals, nparams = [], None
            for i, a in enumerate(f.arg_attrs):
                if "pipe.param" in a:
                    vals.append(params[a["pipe.param"]])
                elif "pipe.input" in a:
                    x = inputs[a["pipe.input"]]
                    n = x.shape[0] // m
                    vals.append(x[k * n:(k + 1) * n])
                elif "pipe.step_input" in a:
                    vals.append(inputs[a["pipe.step_input"]])
                elif "pipe.name" in a:
                    vals.append(named[a["pipe.name"]])
                elif "pipe.grad" in a:
                    vals.append(grad_of[a["pipe.grad"]])
                else:
                    raise ValueError("%s: argument %d has no connection" % (f.name, i))
            return vals

        producer = {}
        for s, f in enumerate(fwd):
            for a in f.arg_attrs:
                # Only neighbours exchange activations.
                if "pipe.name" in a and producer.get(a["pipe.name"]) != s - 1:
                    print("split-eval: %s reads '%s' not from stage %d" % (f.name, a["pipe.name"], s - 1))
                    return 1
            outs = onnx_eval.run(f, arg_values(f, s))
            for v, a in zip(outs, f.res_attrs):
                if "pipe.loss" in a:
                    losses.append(v)
                if "pipe.name" in a:
                    named[a["pipe.name"]] = v
                    producer[a["pipe.name"]] = s
        for s in reversed(range(len(bwd))):
            f = bwd[s]
            outs = onnx_eval.run(f, arg_values(f, s))
            weights = [a["pipe.param"] for a in f.arg_attrs if "pipe.param" in a]
            n = len(outs) - len(weights)
            for v, a in zip(outs[:n], f.res_attrs[:n]):
                grad_of[a["pipe.grad"]] = v
            for name, v in zip(weights, outs[n:]):
                grads[name] = grads.get(name, 0) + v
    combine = opts.combine
    if combine is None:
        found = re.search(r'"?pipe\.loss_combine"? = "(\w+)"', open(opts.split).read())
        combine = found.group(1) if found else "mean"
    loss = sum(losses) / m if combine == "mean" else sum(losses)
    status = 0

    def check(what, got, want):
        nonlocal status
        ok = np.allclose(got, want, rtol=opts.rtol, atol=1e-12)
        print("split-eval: %s %s (max abs diff %.3g)" % (what, "ok" if ok else "MISMATCH",
                                                        float(np.max(np.abs(np.asarray(got) - want)))))
        if not ok:
            status = 1

    check("loss", loss, want_loss)
    for name, g in sorted(want_grads.items()):
        if name not in grads:
            print("split-eval: no gradient for '%s'" % name)
            status = 1
            continue
        check("grad " + name, grads[name], g)
    print("split-eval: PASSED" if status == 0 else "split-eval: FAIL")
    return status


if __name__ == "__main__":
    sys.exit(main())
