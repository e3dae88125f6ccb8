#!/usr/bin/env python3
"""Independent PyTorch reference for pipec's several pipelines: AvgPipe's
elastic averaging and data parallelism across pipelines (DP x PP).

    avgpipe_reference.py --model mlp|cnn|transformer --onnx initial.onnx
        --data D.npz --log steps.jsonl --steps K --batch B [--microbatches M]
        --pipelines P --method avgpipe|dp [--alpha A] [--period T]
        --optimizer sgd|momentum|nesterov|adam|adamw|adagrad --lr F
        [--momentum 0.9] [--weight-decay F] [--rtol 1e-5]
        [--saved trained.onnx] [--next ARGS...]
    avgpipe_reference.py --self-test

Simulates the equations of ../shared/METHODS.md (AvgPipe) and compares a
pipe-run step log (and, with --saved, the trained weights) with them.

P pipelines; pipeline i trains its own replica x_i of the whole model on its
own mini-batches: step t of pipeline i reads global mini-batch g = t*P + i,
data rows g*B .. g*B + B - 1 (wrapping modulo the number of rows, no
shuffle). A pipeline's schedule is synchronous, so its step is ordinary
training of x_i on those B rows: the loss is the mean of M micro-batch
losses (micro-batch j = rows j*B/M .. (j+1)*B/M - 1 of the mini-batch), the
gradient that loss's, and the replica's own optimizer (its own momentum /
Adam state, never averaged) updates x_i. Every replica and the centre c
start as the initial weights.

  avgpipe  after steps T, 2T, 3T, ... (after 0-based step t when
           (t+1) % T == 0), after that step's optimizer updates, per
           parameter tensor, from the same pre-averaging values:
               d_i = x_i - c  (every i, before anything changes)
               x_i <- x_i - A*d_i ;  c <- c + A*sum_i d_i
           Contract rule: with P = 1 nothing is averaged at all (METHODS.md:
           "there is nothing to average: it is the base schedule, exactly"),
           although the formula would move x_0 towards c.
  dp       each step the P replicas' gradients are averaged (mean over
           pipelines) before the (identical) optimizer steps, so the
           replicas stay equal: one-device training on the combined P*B rows
           t*P*B .. t*P*B + P*B - 1.

The log has one line per step, {"step": t, "loss": ...}, the loss being the
mean over pipelines of their step losses (each before the step's update).
--saved holds the centre c after the last step (avgpipe, P > 1), otherwise
the replicas' (common, for dp) weights. Module buffers are not averaged
(the models' only buffer is a constant mask). Run with Debian's
/usr/bin/python3 (torch 1.13, onnx); `--next` starts another check in the
same process. --self-test checks the simulation against hand-written
identities.
"""
import argparse
import copy
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_common import (add_check_arguments, check_losses,  # noqa: E402
                              check_saved, fail, load_initial, make_optimizer,
                              models, read_log, run_checks)


def rows_of(t, i, p, batch, n_rows):
    """Data rows of pipeline i's step t: global mini-batch t*P + i."""
    g = t * p + i
    return [(g * batch + k) % n_rows for k in range(batch)]


def accumulate(model, arrays, idx, m):
    """Leaves in .grad the gradient of the mean of the M micro-batch losses
    over rows idx; returns that mean loss (no update)."""
    model.zero_grad(set_to_none=False)
    size = len(idx) // m
    losses = []
    for j in range(m):
        sub = idx[j * size:(j + 1) * size]
        loss = model(*[torch.from_numpy(x[sub]) for x in arrays])
        (loss / m).backward()
        losses.append(float(loss))
    return sum(losses) / m


@torch.no_grad()
def elastic_average(replicas, centre, alpha):
    """One EASGD averaging, in place, per parameter tensor."""
    named = [dict(r.named_parameters()) for r in replicas]
    for k, c in centre.items():
        d = [n[k] - c for n in named]  # all from the pre-averaging values
        for n, di in zip(named, d):
            n[k].sub_(alpha * di)
        c.add_(alpha * sum(d))


def simulate(model, opt_of, method, p, alpha, period, arrays, steps, batch, m, clip=0.0):
    """Trains P copies of `model` (which is left unchanged); opt_of(params)
    makes a replica's optimizer. With clip > 0 each replica's gradient (dp:
    the mean) is clipped to that global norm before its update
    (torch.nn.utils.clip_grad_norm_). Returns (logged losses, saved weights
    by name, the replicas)."""
    n_rows = arrays[0].shape[0]
    replicas = [copy.deepcopy(model) for _ in range(p)]
    opts = [opt_of(r.parameters()) for r in replicas]
    centre = {k: v.detach().clone() for k, v in model.named_parameters()}
    losses = []
    for t in range(steps):
        step = [accumulate(r, arrays, rows_of(t, i, p, batch, n_rows), m)
                for i, r in enumerate(replicas)]
        if method == "dp" and p > 1:
            with torch.no_grad():
                named = [dict(r.named_parameters()) for r in replicas]
                for k in named[0]:
                    mean = sum(n[k].grad for n in named) / p
                    for n in named:
                        n[k].grad.copy_(mean)
        if clip > 0:
            for r in replicas:
                torch.nn.utils.clip_grad_norm_(r.parameters(), clip)
        for opt in opts:
            opt.step()
        losses.append(sum(step) / p)
        if method == "avgpipe" and p > 1 and (t + 1) % period == 0:
            elastic_average(replicas, centre, alpha)
    if method == "avgpipe" and p > 1:
        saved = centre
    else:
        saved = {k: v.detach().clone() for k, v in replicas[0].named_parameters()}
    return losses, saved, replicas


def check(argv):
    ap = argparse.ArgumentParser()
    add_check_arguments(ap)
    ap.add_argument("--pipelines", type=int, required=True)
    ap.add_argument("--method", choices=["avgpipe", "dp"], required=True)
    ap.add_argument("--alpha", type=float, default=0.5)
    ap.add_argument("--period", type=int, default=1)
    ap.add_argument("--clip-grad-norm", type=float, default=0.0)
    a = ap.parse_args(argv)
    if a.lr_schedule != "constant" or a.warmup_steps:
        fail("a learning-rate schedule is not simulated here (async_reference.py "
             "and torch_trajectory.py simulate one)")
    if a.microbatches < 1 or a.batch % a.microbatches:
        fail(f"--batch {a.batch} is not a multiple of --microbatches {a.microbatches}")
    if a.pipelines < 1 or a.period < 1:
        fail(f"--pipelines ({a.pipelines}) and --period ({a.period}) must be >= 1")

    model, input_names = load_initial(a.model, a.onnx)
    data = np.load(a.data)
    arrays = [data[n] for n in input_names]
    logged = read_log(a.log, a.steps)

    def opt_of(params):
        return make_optimizer(a.optimizer, params, a.lr, a.momentum, a.weight_decay)
    ref, saved, _ = simulate(model, opt_of, a.method, a.pipelines, a.alpha,
                             a.period, arrays, a.steps, a.batch, a.microbatches,
                             a.clip_grad_norm)
    what = f"{a.method} P={a.pipelines}"
    check_losses(logged, ref, a.rtol, what)
    if a.saved:
        check_saved(a.saved, saved, a.rtol, what)


# --- self-test: the simulation against hand-written closed forms -----------

def self_test():
    model0, _, _ = models.make("mlp")
    g = torch.Generator().manual_seed(7)
    n_rows, B, lr, A = 40, 8, 0.1, 0.3  # P*B*steps > 40 rows: the data wraps
    arrays = [torch.randn(n_rows, 32, generator=g).numpy(),
              torch.randint(0, 10, (n_rows,), generator=g).numpy()]
    names = [n for n, _ in model0.named_parameters()]
    w0 = {k: v.detach().clone() for k, v in model0.named_parameters()}
    problems = []

    def sgd(params):
        return make_optimizer("sgd", params, lr)

    def weights(model):
        return {k: v.detach() for k, v in model.named_parameters()}

    def report(label, err, tol):
        ok = err <= tol
        print(f"self-test {label}: {'ok' if ok else 'FAIL'} (worst {err:.1e})")
        if not ok:
            problems.append(label)

    def wdiff(got, want):  # worst max|got - want| / max|want| over tensors
        return max(float((got[k] - want[k]).abs().max() / want[k].abs().max())
                   for k in names)

    def ldiff(got, want):
        assert len(got) == len(want)
        return max(abs(a - b) / abs(b) for a, b in zip(got, want))

    def hand_train(rows_per_step, opt=None):
        """Plain training on one deep copy, one full-batch loss per step; by
        hand (w -= lr*grad) unless an optimizer maker is given."""
        m = copy.deepcopy(model0)
        o = opt(m.parameters()) if opt else None
        losses = []
        for idx in rows_per_step:
            m.zero_grad()
            loss = m(*[torch.from_numpy(x[idx]) for x in arrays])
            loss.backward()
            losses.append(float(loss))
            if o:
                o.step()
            else:
                with torch.no_grad():
                    for w in m.parameters():
                        w -= lr * w.grad
        return losses, weights(m)

    def wrap(start, n):
        return [(start + k) % n_rows for k in range(n)]

    # (1) dp, P = 2, M = 2 == one device on the combined 16 rows t*16..;
    # by hand (SGD) and with a momentum optimizer (its state too).
    combined = [wrap(t * 16, 16) for t in range(5)]
    for opt in (None, lambda ps: make_optimizer("momentum", ps, lr)):
        l, w, reps = simulate(model0, opt or sgd, "dp", 2, A, 1, arrays, 5, B, 2)
        hl, hw = hand_train(combined, opt)
        same = max(float((weights(reps[1])[k] - weights(reps[0])[k]).abs().max())
                   for k in names)
        report(f"(1) dp P=2 == one device on 2x8 rows ({'momentum' if opt else 'sgd'})",
               max(ldiff(l, hl), wdiff(w, hw), same), 1e-5)

    # (2) avgpipe P=2, A = 0.3, T = 1, one step, by the EASGD formula: x_i =
    # x0 - lr*grad f_i(x0) on rows i*8.., d_i = x_i - x0, then
    # x_i' = x_i - A*d_i and c = x0 + A*(d_0 + d_1).
    l, c, reps = simulate(model0, sgd, "avgpipe", 2, A, 1, arrays, 1, B, 2)
    xs = [hand_train([wrap(i * B, B)]) for i in range(2)]
    d = [{k: x[1][k] - w0[k] for k in names} for x in xs]
    want_c = {k: w0[k] + A * (d[0][k] + d[1][k]) for k in names}
    errs = [ldiff(l, [(xs[0][0][0] + xs[1][0][0]) / 2]), wdiff(c, want_c)]
    errs += [wdiff(weights(reps[i]), {k: xs[i][1][k] - A * d[i][k] for k in names})
             for i in range(2)]
    report("(2) avgpipe P=2 T=1, one step == EASGD formula", max(errs), 1e-5)

    # (3) period 3: the replicas train independently for steps 0..2 (pipeline
    # i on global mini-batches 2t + i), averaging happens after step 2 (by
    # the formula) and next after step 5; the centre is unchanged between.
    runs = {k: simulate(model0, sgd, "avgpipe", 2, A, 3, arrays, k, B, 1)
            for k in range(1, 7)}
    xs = [hand_train([wrap((2 * t + i) * B, B) for t in range(3)]) for i in range(2)]
    d = [{k: x[1][k] - w0[k] for k in names} for x in xs]
    want_c = {k: w0[k] + A * (d[0][k] + d[1][k]) for k in names}
    errs = [ldiff(runs[3][0], [(a + b) / 2 for a, b in zip(xs[0][0], xs[1][0])]),
            wdiff(runs[3][1], want_c)]
    errs += [wdiff(weights(runs[3][2][i]), {k: xs[i][1][k] - A * d[i][k] for k in names})
             for i in range(2)]
    report("(3) avgpipe T=3: steps 0-2 independent, then EASGD", max(errs), 1e-5)
    unchanged = [all(torch.equal(runs[k][1][n], ref[n]) for n in names)
                 for k, ref in ((1, w0), (2, w0), (4, runs[3][1]), (5, runs[3][1]))]
    moved = not all(torch.equal(runs[6][1][n], runs[3][1][n]) for n in names)
    ok = all(unchanged) and moved
    print(f"self-test (3) avgpipe T=3 averages after steps 2 and 5 only: "
          f"{'ok' if ok else 'FAIL'}")
    if not ok:
        problems.append("(3) period")

    # (4) P = 1: avgpipe (any A, T) is plain training on rows t*8..; saved =
    # the replica. M = 2 micro-batches against one full-batch loss.
    l, w, _ = simulate(model0, sgd, "avgpipe", 1, 0.5, 1, arrays, 6, B, 2)
    hl, hw = hand_train([wrap(t * B, B) for t in range(6)])
    report("(4) avgpipe P=1 == plain training", max(ldiff(l, hl), wdiff(w, hw)), 1e-5)

    if problems:
        fail(f"self-test: {len(problems)} checks failed")
    print("self-test: OK")


def main():
    return run_checks(check, self_test)


if __name__ == "__main__":
    main()
