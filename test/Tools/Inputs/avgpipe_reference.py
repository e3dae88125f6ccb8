#!/usr/bin/env python3
"""Independent PyTorch reference for pipec's several pipelines: AvgPipe's
elastic averaging and data parallelism across pipelines (DP x PP).

    avgpipe_reference.py --model mlp --onnx initial.onnx --data D.npz
        --log steps.jsonl --steps K --batch B [--microbatches M]
        --pipelines P --method avgpipe|dp [--alpha A] [--period T]
        --optimizer sgd|momentum|nesterov|adam|adamw|adagrad --lr F
        [--momentum 0.9] [--weight-decay F] [--rtol 1e-5]
        [--saved trained.onnx] [--next ARGS...]
    avgpipe_reference.py --self-test

The equations of ../shared/METHODS.md (AvgPipe): P pipelines, pipeline i
training its own replica x_i on its own mini-batches: step t of pipeline i
reads global mini-batch t*P + i, data rows (t*P+i)*B .. (t*P+i)*B + B - 1
(wrapping, no shuffle). A pipeline's schedule is synchronous, so its step is
ordinary training of x_i on its B rows: the loss is the mean of its M
micro-batch losses (B/M rows each), the gradient that loss's, and the
replica's own optimizer (own state) updates x_i.

  avgpipe  after steps T, 2T, ... (after step t when (t+1) % T == 0), after
           the step's updates, from the same pre-averaging values:
           d_i = x_i - c;  x_i <- x_i - A*d_i;  c <- c + A*sum_i d_i,
           per parameter; c (the centre) starts as the initial weights. With
           P = 1 nothing is averaged (METHODS.md: the base schedule exactly).
  dp       the replicas' gradients are averaged over pipelines before one
           identical update: one-device training on P*B rows.

The log has one line per step; its loss is the mean over pipelines of their
step losses (each before the step's update). --saved holds the centre
(avgpipe, P > 1) or pipeline 0's weights. Run with Debian's /usr/bin/python3
(torch 1.13, onnx); `--next` starts another check in the same process.
"""
import argparse
import copy
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                "examples"))
import models  # noqa: E402


def make_optimizer(a, params):
    wd = a.weight_decay
    if a.optimizer == "sgd":
        return torch.optim.SGD(params, lr=a.lr, weight_decay=wd)
    if a.optimizer in ("momentum", "nesterov"):
        return torch.optim.SGD(params, lr=a.lr, momentum=a.momentum, weight_decay=wd,
                               nesterov=a.optimizer == "nesterov")
    if a.optimizer == "adam":
        return torch.optim.Adam(params, lr=a.lr, weight_decay=wd)
    if a.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=a.lr, weight_decay=wd)
    if a.optimizer == "adagrad":
        return torch.optim.Adagrad(params, lr=a.lr, weight_decay=wd)
    sys.exit(f"FAIL: unknown optimizer {a.optimizer}")


def simulate(a, model, arrays):
    """Returns (per-step logged losses, saved weights by name)."""
    rows = arrays[0].shape[0]
    P, B, M = a.pipelines, a.batch, a.microbatches
    if B % M:
        sys.exit(f"FAIL: --batch {B} is not a multiple of --microbatches {M}")
    replicas = [copy.deepcopy(model) for _ in range(P)]
    opts = [make_optimizer(a, r.parameters()) for r in replicas]
    centre = {k: v.detach().clone() for k, v in model.named_parameters()}
    losses = []
    for t in range(a.steps):
        step_losses = []
        for i, (r, opt) in enumerate(zip(replicas, opts)):
            g = t * P + i
            idx = [(g * B + k) % rows for k in range(B)]
            opt.zero_grad()
            total = 0.0
            for j in range(M):
                sub = idx[j * (B // M):(j + 1) * (B // M)]
                loss = r(*[torch.from_numpy(x[sub]) for x in arrays]) / M
                loss.backward()
                total += float(loss)
            step_losses.append(total)
        if a.method == "dp" and P > 1:
            with torch.no_grad():
                named = [dict(r.named_parameters()) for r in replicas]
                for k in named[0]:
                    mean = sum(n[k].grad for n in named) / P
                    for n in named:
                        n[k].grad.copy_(mean)
        for opt in opts:
            opt.step()
        losses.append(float(np.mean(step_losses)))
        if a.method == "avgpipe" and P > 1 and (t + 1) % a.period == 0:
            with torch.no_grad():
                named = [dict(r.named_parameters()) for r in replicas]
                for k in centre:
                    d = [n[k] - centre[k] for n in named]
                    for n, di in zip(named, d):
                        n[k].sub_(a.alpha * di)
                    centre[k].add_(a.alpha * sum(d))
    if a.method == "avgpipe" and P > 1:
        saved = {k: v.clone() for k, v in centre.items()}
    else:
        saved = {k: v.detach().clone() for k, v in replicas[0].named_parameters()}
    return losses, saved


def onnx_initializers(path):
    import onnx
    from onnx import numpy_helper
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def check(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--onnx", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--microbatches", type=int, default=1)
    ap.add_argument("--pipelines", type=int, required=True)
    ap.add_argument("--method", choices=["avgpipe", "dp"], required=True)
    ap.add_argument("--alpha", type=float, default=0.5)
    ap.add_argument("--period", type=int, default=1)
    ap.add_argument("--optimizer", default="sgd")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--saved")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    model, _, names = models.make(a.model)
    inits = onnx_initializers(a.onnx)
    state = model.state_dict()
    for key, value in state.items():
        if key in inits:
            state[key] = torch.from_numpy(inits[key].copy())
        elif key in dict(model.named_parameters()):
            sys.exit(f"FAIL: {a.onnx} has no initializer '{key}'")
    model.load_state_dict(state)
    data = np.load(a.data)
    arrays = [data[n] for n in names]
    losses, saved = simulate(a, model, arrays)
    what = f"{a.method} P={a.pipelines}"
    with open(a.log) as f:
        logged = [json.loads(line) for line in f if line.strip()]
    if len(logged) != a.steps:
        sys.exit(f"FAIL: the log has {len(logged)} steps, expected {a.steps}")
    worst = 0.0
    for s, (row, ref) in enumerate(zip(logged, losses)):
        rel = abs(row["loss"] - ref) / max(abs(ref), 1e-12)
        worst = max(worst, rel)
        if row["step"] != s or rel > a.rtol:
            print(f"FAIL: step {s}: loss {row['loss']} vs the {what} reference "
                  f"{ref} (relative error {rel:.2e} > {a.rtol})")
            sys.exit(1)
    print(f"OK: {a.steps} steps within {a.rtol} of the {what} reference "
          f"(worst relative error {worst:.1e})", flush=True)
    if a.saved:
        got = onnx_initializers(a.saved)
        worst = 0.0
        for key, ref in saved.items():
            if key not in got:
                print(f"FAIL: {a.saved} has no initializer '{key}'")
                sys.exit(1)
            ref = ref.numpy()
            err = float(np.max(np.abs(got[key] - ref))) / max(float(np.max(np.abs(ref))), 1e-12)
            worst = max(worst, err)
            if err > a.rtol:
                print(f"FAIL: saved weight '{key}' differs from the {what} reference "
                      f"by {err:.2e} (relative to its largest element)")
                sys.exit(1)
        print(f"OK: {len(saved)} saved weights within {a.rtol} of the {what} "
              f"reference (worst {worst:.1e})", flush=True)


def self_test():
    """The simulation against hand-written identities, on the MLP."""
    torch.manual_seed(0)
    model, _, names = models.make("mlp")
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((40, 32)).astype(np.float32),
              rng.integers(0, 10, 40).astype(np.int64)]
    ok = True

    def args(**kw):
        base = dict(steps=5, batch=8, microbatches=2, pipelines=2, method="avgpipe",
                    alpha=0.3, period=1, optimizer="sgd", lr=0.1, momentum=0.9,
                    weight_decay=0.0)
        base.update(kw)
        return argparse.Namespace(**base)

    def train(m, rows_of_step, steps, lr):
        m = copy.deepcopy(m)
        out = []
        for t in range(steps):
            idx = rows_of_step(t)
            m.zero_grad()
            loss = m(*[torch.from_numpy(x[idx]) for x in arrays])
            loss.backward()
            out.append(float(loss))
            with torch.no_grad():
                for p in m.parameters():
                    p -= lr * p.grad
        return out, m

    def close(x, y, tol=1e-5):
        return abs(x - y) <= tol * max(abs(y), 1e-6)

    # (1) dp, P = 2: one device on the combined 16 rows.
    losses, saved = simulate(args(method="dp"), model, arrays)
    ref, m = train(model, lambda t: [(t * 16 + k) % 40 for k in range(16)], 5, 0.1)
    ok &= all(close(x, y) for x, y in zip(losses, ref))
    ok &= all(torch.allclose(saved[k], v, atol=1e-6) for k, v in m.named_parameters())
    print(f"self-test dp = combined batch: {'ok' if ok else 'FAIL'}")
    # (2) avgpipe, one step, by hand.
    _, saved = simulate(args(steps=1), model, arrays)
    r = [train(model, lambda t, i=i: [(i * 8 + k) % 40 for k in range(8)], 1, 0.1)[1]
         for i in range(2)]
    c0 = dict(model.named_parameters())
    good = True
    for k in c0:
        d = [dict(x.named_parameters())[k].detach() - c0[k].detach() for x in r]
        good &= torch.allclose(saved[k], c0[k].detach() + 0.3 * (d[0] + d[1]), atol=1e-6)
    print(f"self-test one EASGD step: {'ok' if good else 'FAIL'}")
    ok &= good
    # (3) period 3: nothing averaged after steps 0 and 1 (the centre stays).
    _, saved = simulate(args(steps=2, period=3), model, arrays)
    good = all(torch.equal(saved[k], v.detach()) for k, v in model.named_parameters())
    print(f"self-test period 3: {'ok' if good else 'FAIL'}")
    ok &= good
    # (4) P = 1: plain training.
    losses, saved = simulate(args(pipelines=1, microbatches=1), model, arrays)
    ref, m = train(model, lambda t: [(t * 8 + k) % 40 for k in range(8)], 5, 0.1)
    good = all(close(x, y) for x, y in zip(losses, ref)) and all(
        torch.allclose(saved[k], v, atol=1e-6) for k, v in m.named_parameters())
    print(f"self-test P = 1: {'ok' if good else 'FAIL'}")
    ok &= good
    print("self-test: OK" if ok else "self-test: FAIL")
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    groups = [[]]
    for arg in sys.argv[1:]:
        if arg == "--next":
            groups.append([])
        else:
            groups[-1].append(arg)
    for group in groups:
        check(group)


if __name__ == "__main__":
    main()
