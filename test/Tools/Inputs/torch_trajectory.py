#!/usr/bin/env python3
"""Checks a pipe-run step log against PyTorch training the same model.

    torch_trajectory.py --model mlp --data D.npz --log steps.jsonl --steps K
        --batch B --optimizer sgd|momentum|nesterov|adam|adamw|adagrad --lr F
        [--momentum F] [--weight-decay F] [--clip-grad-norm F] [--rtol 1e-4]
        [--lr-schedule constant|linear|cosine --warmup-steps W
         --decay-steps N --min-lr F]
        [--onnx initial.onnx] [--saved trained.onnx]
        [--eval-data V.npz [--eval-every K] [--eval-batches N]] [--next ARGS...]

Rebuilds the model with examples/models.py, trains it on the data without
shuffling (step s reads rows s*B .. s*B+B-1, wrapping) and compares every
step's loss (computed before that step's update) with the log. A schedule
is torch.optim.lr_scheduler.LambdaLR stepped after every update, with
Hugging Face's transformers lambdas (get_constant/linear/cosine_schedule_
with_warmup; the decay floored at --min-lr, as get_cosine_with_min_lr_
schedule_with_warmup, and held there past N). --clip-grad-norm F clips every
step's gradients with torch.nn.utils.clip_grad_norm_ before the update and
prints how many steps it scaled (a test can require that it did).

With --eval-data, the log's evaluation lines (pipe-run --eval-data) are
checked too: after every K-th step and after the last, the model in eval()
mode under no_grad, the mean of its losses on V's first min(N, rows // B)
batches of B rows (each batch's own mean loss), and the top-1 accuracy of
its cross-entropy over those batches' labels (reference_common's
AccuracyCounter: the same labels counted, the same right but for near-ties
of two scores); the model trains on after them as before.

With --onnx, the initial weights are the ONNX model's initializers (every
parameter and buffer of the module must be one, with the same shape), so
the reference starts exactly where pipe-compile's program starts; without it
they come from models.py's seed. With --saved, every trained parameter in
the ONNX written by `pipe-run --save` must match PyTorch's after the last
step: max|ours - torch| <= rtol * max|torch| per tensor. Run with Debian's
/usr/bin/python3 (torch, onnx). `--next` starts another check with its own
arguments, in the same process (importing torch is the slow part).
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
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_common import (AccuracyCounter, add_schedule_arguments,  # noqa: E402
                              check_evals, eval_batches, make_optimizer,
                              onnx_initializers, schedule_factor)


def main():
    args, groups = sys.argv[1:], [[]]
    for arg in args:
        if arg == "--next":
            groups.append([])
        else:
            groups[-1].append(arg)
    for group in groups:
        check(group)


def check(argv):
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
    ap.add_argument("--clip-grad-norm", type=float, default=0.0)
    ap.add_argument("--rtol", type=float, default=1e-4)
    add_schedule_arguments(ap)
    ap.add_argument("--onnx", help="take the initial weights from this model")
    ap.add_argument("--saved", help="compare the trained weights with this model")
    ap.add_argument("--eval-data")
    ap.add_argument("--eval-every", type=int, default=0)
    ap.add_argument("--eval-batches", type=int, default=0)
    a = ap.parse_args(argv)

    torch.set_num_threads(1)
    model, _, names = models.make(a.model)
    if a.onnx:
        inits = onnx_initializers(a.onnx)
        state = model.state_dict()
        for key, value in state.items():
            if key not in inits:
                sys.exit(f"FAIL: {a.onnx} has no initializer '{key}'")
            if tuple(inits[key].shape) != tuple(value.shape):
                sys.exit(f"FAIL: initializer '{key}' has shape "
                         f"{inits[key].shape}, the module's is {tuple(value.shape)}")
            state[key] = torch.from_numpy(inits[key].copy())
        model.load_state_dict(state)
    model.train()
    opt = make_optimizer(a.optimizer, model.parameters(), a.lr, a.momentum,
                         a.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, schedule_factor(a))

    data = np.load(a.data)
    arrays = [data[n] for n in names]
    rows = arrays[0].shape[0]
    with open(a.log) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    logged = [line for line in lines if "loss" in line]
    evals = [line for line in lines if "eval_loss" in line]
    expected_evals = []
    if a.eval_data:
        held, rounds = eval_batches(a.eval_data, names, a.batch, a.eval_batches)

    def evaluate(after):
        model.eval()
        with torch.no_grad(), AccuracyCounter() as counter:
            total = 0.0
            for j in range(rounds):
                total += float(model(*[torch.from_numpy(x[j * a.batch:(j + 1) * a.batch])
                                       for x in held]))
        model.train()
        expected_evals.append((after - 1, total / rounds, rounds * a.batch,
                               counter.counts(rounds)))
    if len(logged) != a.steps:
        sys.exit(f"FAIL: the log has {len(logged)} steps, expected {a.steps}")
    worst = 0.0
    clipped = 0
    for s in range(a.steps):
        idx = [(s * a.batch + i) % rows for i in range(a.batch)]
        inputs = [torch.from_numpy(x[idx]) for x in arrays]
        opt.zero_grad()
        loss = model(*inputs)
        loss.backward()
        if a.clip_grad_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip_grad_norm)
            clipped += int(float(norm) > a.clip_grad_norm)
        opt.step()
        scheduler.step()
        if a.eval_data and ((a.eval_every and (s + 1) % a.eval_every == 0)
                            or s + 1 == a.steps):
            evaluate(s + 1)
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
    if expected_evals or evals:
        check_evals(evals, expected_evals, a.rtol, "PyTorch")
    if a.clip_grad_norm > 0:
        print(f"clipped {clipped} of {a.steps} steps")
    if a.saved:
        saved = onnx_initializers(a.saved)
        worst = 0.0
        params = dict(model.named_parameters())
        for key, p in params.items():
            if key not in saved:
                sys.exit(f"FAIL: {a.saved} has no initializer '{key}'")
            ref = p.detach().numpy()
            got = saved[key]
            if got.shape != ref.shape:
                sys.exit(f"FAIL: saved '{key}' has shape {got.shape}, "
                         f"PyTorch's {ref.shape}")
            err = float(np.max(np.abs(got - ref))) / max(
                float(np.max(np.abs(ref))), 1e-12)
            worst = max(worst, err)
            if err > a.rtol:
                sys.exit(f"FAIL: saved weight '{key}' differs from PyTorch's "
                         f"by {err:.2e} (relative to its largest element)")
        print(f"OK: {len(params)} saved weights within {a.rtol} of PyTorch "
              f"(worst {worst:.1e})")


if __name__ == "__main__":
    main()
