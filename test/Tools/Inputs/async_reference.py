#!/usr/bin/env python3
"""Independent PyTorch reference for pipec's no-flush (asynchronous) methods.

    async_reference.py --model mlp --onnx initial.onnx --data D.npz
        --log steps.jsonl --steps K --batch B --microbatches M
        --method pipedream|2bw|sync [--vertical-sync] [--plan plan.json]
        --optimizer sgd|momentum|nesterov|adam|adamw|adagrad --lr F
        [--momentum 0.9] [--weight-decay F] [--rtol 1e-5]
        [--lr-schedule constant|linear|cosine --warmup-steps W
         --decay-steps N --min-lr F]
        [--saved trained.onnx]
        [--eval-data V.npz [--eval-every E] [--eval-batches N]] [--next ARGS...]
    async_reference.py --self-test

Simulates METHODS.md's equations ("the exact semantics pipec implements")
one update at a time, in order, and compares a pipe-run step log (and, with
--saved, the trained weights) with the simulation. Notation: p stages
s = 0..p-1, M micro-batches per step, B samples per step. Step t reads data
rows t*B .. t*B+B-1 (wrapping, no shuffle); its micro-batch j is rows
j*B/M .. (j+1)*B/M - 1 of them; u = t*M + j. W_s(k) is stage s's weights
after k updates, W_s(k < 0) = W_s(0). f_u is the model's mean loss over
micro-batch u.

  pipedream  one update per micro-batch. Micro-batch u's forward and backward
             use, on stage s, W_s(u - (p-1-s)) (weight stashing), then every
             stage updates: W_s(u+1) = opt(W_s(u), grad_s f_u(mixed versions)).
  --vertical-sync  every stage uses W_s(u - (p-1)): uniformly delayed SGD,
             W(u+1) = W(u) - lr * grad f_u(W(u-p+1)).
  2bw        one update per step; step t's forwards and backwards all use
             W(t-1): W(t+1) = opt(W(t), mean_j grad f_{tM+j}(W(t-1))).
  sync       ordinary training: W(t+1) = opt(W(t), mean_j grad f_{tM+j}(W(t))).

So each method is "update n reads, on stage s, version n - d_s", with the
delay d_s = p-1-s (pipedream), p-1 (vertical sync), 1 (2bw), 0 (sync), an
update unit of one micro-batch (pipedream) or one step (2bw, sync), and the
gradient averaged over the unit's micro-batches. opt is torch.optim's
optimizer on the module's parameters, which always hold the current
weights W(n); its state (momentum, Adam moments, step count) advances once
per update. With a learning-rate schedule (reference_common.schedule_factor)
update n runs at lr * factor(n / U), U the updates a step makes (M for
pipedream, else 1). Older versions are evaluated with torch's functional_call on a
per-stage history that keeps only versions n-d_s .. n (d_s + 1 of them:
METHODS.md's p-s, p, 2 and 1). A logged step's loss is the mean of its M
micro-batch losses, each from that micro-batch's own forward. Module buffers
are not versioned: forwards run in update order on the module's own buffers
(BatchNorm running statistics would simply be updated by each forward).

The stage of each parameter comes from plan.json's "device_plans" (each
device's "stages": [s] and "parameters"); a one-device plan (no
"device_plans") or no --plan at all means p = 1. Run with Debian's
/usr/bin/python3 (torch, onnx); `--next` starts another check in the same
process. --self-test checks the simulation against hand-written identities.

--eval-data checks the log's evaluation lines (pipe-run --eval-data): after
every E-th step t, the model's mean loss over V's first min(N, rows // B)
batches of B rows with stage s at W_s(n_s(t)), the newest weights it holds
then. Under the 1F1B order of these methods stage s has run the backwards of
the first b_s = t*M - (p-1-s) micro-batches when step t ends (the last stage
all of them, each earlier one p-1-s fewer), so n_s = b_s (pipedream, with
or without vertical sync) or floor(b_s / M), the steps whose every
backward it has run (2bw; one update per step); sync n_s = t. After the
last step the evaluation follows the drain: every update, the final
weights.
"""
import argparse
import copy
import json
import os
import sys

import numpy as np
import torch
from torch.nn.utils.stateless import functional_call as torch_functional_call

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_common import (AccuracyCounter, add_check_arguments, check_evals,  # noqa: E402
                              check_losses, check_saved, eval_batches, fail,
                              load_initial,
                              make_optimizer, models, read_evals, read_log,
                              run_checks, schedule_factor)


def functional_call(model, weights, args):
    """torch's functional_call, also for recurrent modules. In torch 1.13 an
    nn.LSTM / nn.GRU runs on its cached `_flat_weights`, which
    functional_call does not replace: the versions passed in were ignored
    (its output with doubled weights was the module's own). So each
    recurrent module's flat weights are the given ones during the call."""
    swapped = []
    for prefix, mod in model.named_modules():
        if isinstance(mod, torch.nn.RNNBase):
            swapped.append((mod, mod._flat_weights))
            mod._flat_weights = [weights[(prefix + "." if prefix else "") + n]
                                 for n in mod._flat_weights_names]
    try:
        return torch_functional_call(model, weights, args)
    finally:
        for mod, flat in swapped:
            mod._flat_weights = flat


def delays(method, vertical_sync, p):
    """d_s: how many updates older than the current weights stage s reads."""
    if method == "pipedream":
        return [p - 1 if vertical_sync else p - 1 - s for s in range(p)]
    return [{"2bw": 1, "sync": 0}[method]] * p


def step_microbatches(arrays, t, batch, m):
    """The M micro-batches of step t, each a tuple of input tensors."""
    rows = arrays[0].shape[0]
    idx = [(t * batch + i) % rows for i in range(batch)]
    size = batch // m
    return [tuple(torch.from_numpy(x[idx[j * size:(j + 1) * size]]) for x in arrays)
            for j in range(m)]


def simulate(model, opt, stage_of, p, method, vertical_sync, arrays, steps,
             batch, m, rate=None, at_step_end=None):
    """Trains `model` in place (its parameters end as the newest weights);
    returns the loss of every step (mean of its micro-batch losses).
    at_step_end(t, version) after step t (1-based), version(s, k) = stage
    s's weights W_s(k) (every version kept)."""
    params = dict(model.named_parameters())
    d = delays(method, vertical_sync, p)
    # hist[s][k] = {name: W_s(k)} for the versions stage s may still read.
    hist = [{0: {}} for _ in range(p)]
    for name, w in params.items():
        hist[stage_of[name]][0][name] = w.detach().clone()
    every = [[hist[s][0]] for s in range(p)] if at_step_end else None
    n, step_losses = 0, []
    for t in range(steps):
        mbs = step_microbatches(arrays, t, batch, m)
        units = [[mb] for mb in mbs] if method == "pipedream" else [mbs]
        losses = []
        for unit in units:
            # The weights update n reads: stage s's version n - d_s.
            read = {name: hist[s][max(n - d[s], 0)][name].detach().requires_grad_()
                    for name, s in stage_of.items()}
            acc = {}
            for mb in unit:
                loss = functional_call(model, read, mb)
                grads = torch.autograd.grad(loss, list(read.values()),
                                            allow_unused=True)
                for (name, w), g in zip(read.items(), grads):
                    g = torch.zeros_like(w) if g is None else g
                    acc[name] = g if name not in acc else acc[name] + g
                losses.append(float(loss))
            for name, w in params.items():
                w.grad = acc[name] if len(unit) == 1 else acc[name] / len(unit)
            if rate is not None:
                for group in opt.param_groups:
                    group["lr"] = rate(n / len(units))
            opt.step()
            n += 1
            for s in range(p):
                hist[s][n] = {name: params[name].detach().clone()
                              for name in hist[s][n - 1]}
                if every is not None:
                    every[s].append(hist[s][n])
                for k in [k for k in hist[s] if k < n - d[s]]:
                    del hist[s][k]
                assert len(hist[s]) <= d[s] + 1
        step_losses.append(sum(losses) / len(losses))
        if at_step_end:
            at_step_end(t + 1, lambda s, k: every[s][k])
    return step_losses


def read_plan(path, names):
    """{parameter name: stage} and p from plan.json (None: one stage)."""
    if path is None:
        return {n: 0 for n in names}, 1
    with open(path) as f:
        plan = json.load(f)
    if "device_plans" not in plan:
        listed = {b["name"] for b in plan.get("parameters", [])}
        missing = [n for n in names if listed and n not in listed]
        if missing:
            fail(f"{path} lists no parameter '{missing[0]}'")
        return {n: 0 for n in names}, 1
    stage_of, stages = {}, set()
    for dev in plan["device_plans"]:
        stages.update(dev["stages"])
        if dev["parameters"] and len(dev["stages"]) != 1:
            fail(f"device {dev.get('device')} holds stages {dev['stages']}: "
                 "the reference needs one stage per device")
        for name in dev["parameters"]:
            s = dev["stages"][0]
            if stage_of.get(name, s) != s:
                fail(f"parameter '{name}' is on stages {stage_of[name]} and {s}")
            stage_of[name] = s
    p = len(stages)
    if stages != set(range(p)):
        fail(f"{path}: stages {sorted(stages)} are not 0..{p - 1}")
    for n in names:
        if n not in stage_of:
            fail(f"{path}: no device owns parameter '{n}'")
    return {n: stage_of[n] for n in names}, p


def check(argv):
    ap = argparse.ArgumentParser()
    add_check_arguments(ap)
    ap.add_argument("--method", choices=["pipedream", "2bw", "sync"], required=True)
    ap.add_argument("--vertical-sync", action="store_true")
    ap.add_argument("--plan")
    ap.add_argument("--eval-data")
    ap.add_argument("--eval-every", type=int, default=0)
    ap.add_argument("--eval-batches", type=int, default=0)
    a = ap.parse_args(argv)
    if a.batch % a.microbatches:
        fail(f"--batch {a.batch} is not a multiple of --microbatches {a.microbatches}")
    if a.vertical_sync and a.method != "pipedream":
        fail("--vertical-sync applies to --method pipedream only")

    model, input_names = load_initial(a.model, a.onnx)
    params = dict(model.named_parameters())
    stage_of, p = read_plan(a.plan, list(params))
    opt = make_optimizer(a.optimizer, model.parameters(), a.lr, a.momentum,
                         a.weight_decay)
    data = np.load(a.data)
    arrays = [data[n] for n in input_names]
    logged = read_log(a.log, a.steps)

    factor = schedule_factor(a)
    evals, at_step_end = [], None
    if a.eval_data:
        held, rounds = eval_batches(a.eval_data, input_names, a.batch, a.eval_batches)
        m = a.microbatches

        def evaluate(weights):
            """The mean loss and the accuracy's counts of the model with these weights."""
            model.eval()
            with torch.no_grad(), AccuracyCounter() as counter:
                total = sum(float(functional_call(
                    model, weights,
                    tuple(torch.from_numpy(x[j * a.batch:(j + 1) * a.batch]) for x in held)))
                    for j in range(rounds))
            model.train()
            return total / rounds, counter.counts(rounds)

        def at_step_end(t, version):
            if t == a.steps or not a.eval_every or t % a.eval_every:
                return
            newest = {}
            for name, s in stage_of.items():
                done = max(0, t * m - (p - 1 - s))  # backwards stage s has run
                k = {"pipedream": done, "2bw": done // m, "sync": t}[a.method]
                newest[name] = version(s, k)[name]
            loss, counts = evaluate(newest)
            evals.append((t - 1, loss, rounds * a.batch, counts))

    ref = simulate(model, opt, stage_of, p, a.method, a.vertical_sync, arrays,
                   a.steps, a.batch, a.microbatches,
                   rate=lambda x: a.lr * factor(x), at_step_end=at_step_end)
    what = a.method + (" (vertical sync)" if a.vertical_sync else "")
    check_losses(logged, ref, a.rtol, what)
    if a.eval_data:
        # After the drain: every update, the final weights.
        loss, counts = evaluate({n: w.detach() for n, w in params.items()})
        evals.append((a.steps - 1, loss, rounds * a.batch, counts))
        check_evals(read_evals(a.log), evals, a.rtol, what)
    if a.saved:
        check_saved(a.saved, params, a.rtol, what)


# --- self-test: the simulation against hand-written closed forms -----------

def hand_delayed_sgd(model, lr, units, delay_of):
    """W(n+1) = W(n) - lr * grad f_n(V_n), parameter x of V_n being
    W(n - delay_of[x]); f_n = model's loss on units[n]. Plain autograd on a
    deep copy, no optimizer, no functional_call. Returns (losses, weights)."""
    history = [{k: v.detach().clone() for k, v in model.named_parameters()}]
    work, losses = copy.deepcopy(model), []
    for n, inputs in enumerate(units):
        with torch.no_grad():
            for name, w in work.named_parameters():
                w.copy_(history[max(n - delay_of[name], 0)][name])
        work.zero_grad()
        loss = work(*inputs)
        loss.backward()
        losses.append(float(loss))
        history.append({name: history[n][name] - lr * w.grad
                        for name, w in work.named_parameters()})
    return losses, history[-1]


def self_test():
    model0, _, _ = models.make("mlp")
    g = torch.Generator().manual_seed(7)
    rows, batch, steps, lr = 40, 8, 6, 0.1  # 48 rows read: the data wraps
    arrays = [torch.randn(rows, 32, generator=g).numpy(),
              torch.randint(0, 10, (rows,), generator=g).numpy()]
    names = [n for n, _ in model0.named_parameters()]
    problems = []

    def run(method, p, m, stage_of, vsync=False, opt="sgd"):
        model = copy.deepcopy(model0)
        o = make_optimizer(opt, model.parameters(), lr)
        losses = simulate(model, o, stage_of, p, method, vsync, arrays, steps,
                          batch, m)
        return losses, {k: v.detach() for k, v in model.named_parameters()}

    def units(m):  # every micro-batch of the run, in order
        return [mb for t in range(steps)
                for mb in step_microbatches(arrays, t, batch, m)]

    def compare(label, got, want, tol):
        (gl, gw), (wl, ww) = got, want
        err = max([abs(a - b) / max(abs(b), 1e-12) for a, b in zip(gl, wl)]
                  + [float((gw[k] - ww[k]).abs().max() / ww[k].abs().max())
                     for k in names])
        ok = len(gl) == len(wl) and err <= tol
        print(f"self-test {label}: {'ok' if ok else 'FAIL'} (worst {err:.1e})")
        if not ok:
            problems.append(label)

    def per_step(losses, m):
        return [sum(losses[i:i + m]) / m for i in range(0, len(losses), m)]

    one = {n: 0 for n in names}
    # (1) PipeDream, p = 1, M = 1 is synchronous training (Adam: its state
    # advances once per step either way), and so is --method sync.
    plain = copy.deepcopy(model0)
    o = make_optimizer("adam", plain.parameters(), lr)
    plain_losses = []
    for mb in units(1):
        o.zero_grad()
        loss = plain(*mb)
        loss.backward()
        o.step()
        plain_losses.append(float(loss))
    want = (plain_losses, {k: v.detach() for k, v in plain.named_parameters()})
    compare("(1) pipedream p=1 M=1 == sync training",
            run("pipedream", 1, 1, one, opt="adam"), want, 0.0)
    compare("(1) --method sync M=1 == sync training",
            run("sync", 1, 1, one, opt="adam"), want, 0.0)
    # (2) Vertical sync, p = 3 stages, M = 2: uniformly delayed SGD.
    three = {n: min(i // 2, 2) for i, n in enumerate(names)}  # fc1|fc2|fc3
    l, w = hand_delayed_sgd(model0, lr, units(2), {n: 2 for n in names})
    compare("(2) pipedream --vertical-sync p=3 == delayed SGD",
            run("pipedream", 3, 2, three, vsync=True), (per_step(l, 2), w), 1e-6)
    # (3) 2BW, p = 1, M = 2: SGD with a one-step delay on the full batch's
    # gradient (= the mean of the micro-batch gradients); p does not matter.
    full = [step_microbatches(arrays, t, batch, 1)[0] for t in range(steps)]
    want = hand_delayed_sgd(model0, lr, full, {n: 1 for n in names})
    compare("(3) 2bw p=1 == one-step-delayed SGD", run("2bw", 1, 2, one), want, 1e-5)
    compare("(3) 2bw p=3 == one-step-delayed SGD", run("2bw", 3, 2, three), want, 1e-5)
    # (4) PipeDream, p = 2, M = 2: stage 0 (fc1) reads W(u-1), the last
    # stage (fc2, fc3) the current W(u); all on the last stage: plain SGD.
    two = {n: 0 if n.startswith("fc1.") else 1 for n in names}
    l, w = hand_delayed_sgd(model0, lr, units(2), {n: 1 - two[n] for n in names})
    compare("(4) pipedream p=2: stage 0 stale by 1, stage 1 current",
            run("pipedream", 2, 2, two), (per_step(l, 2), w), 1e-6)
    l, w = hand_delayed_sgd(model0, lr, units(2), {n: 0 for n in names})
    compare("(4) pipedream p=2, all weights on stage 1 == per-micro-batch SGD",
            run("pipedream", 2, 2, {n: 1 for n in names}), (per_step(l, 2), w), 1e-6)
    if problems:
        fail(f"self-test: {len(problems)} checks failed")
    print("self-test: OK")


def main():
    return run_checks(check, self_test)


if __name__ == "__main__":
    main()
