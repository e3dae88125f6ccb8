"""What the PyTorch reference simulations of test/Tools share: the command
line of a check, the optimizers, the initial weights from an ONNX model, the
comparison of a pipe-run step log and saved model with the simulation, and
`--next` groups. The equations live in each reference (async_reference.py,
avgpipe_reference.py); only plumbing is here."""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                "examples"))
import models  # noqa: E402


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def make_optimizer(name, params, lr, momentum=0.9, wd=0.0):
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=wd)
    if name in ("momentum", "nesterov"):
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=wd,
                               nesterov=name == "nesterov")
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=wd)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=wd)
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr, weight_decay=wd)
    fail(f"unknown optimizer '{name}'")


def add_schedule_arguments(ap):
    """pipe-compile's learning-rate schedule flags."""
    ap.add_argument("--lr-schedule", default="constant",
                    choices=["constant", "linear", "cosine"])
    ap.add_argument("--warmup-steps", type=int, default=0)
    ap.add_argument("--decay-steps", type=int, default=0)
    ap.add_argument("--min-lr", type=float, default=0.0)


def schedule_factor(a):
    """The learning-rate factor after x steps (x fractional where a step makes
    several updates): Hugging Face transformers' get_constant_/linear_/
    cosine_schedule_with_warmup lambdas, the decay floored at --min-lr (as
    get_cosine_with_min_lr_schedule_with_warmup) and held there past
    --decay-steps."""
    import math
    w, n, floor = a.warmup_steps, a.decay_steps, a.min_lr / a.lr

    def factor(x):
        if x < w:
            return float(x) / float(max(1, w))
        if a.lr_schedule == "constant":
            return 1.0
        progress = min(1.0, float(x - w) / float(max(1, n - w)))
        if a.lr_schedule == "linear":
            decay = 1.0 - progress
        else:
            decay = 0.5 * (1.0 + math.cos(math.pi * progress))
        return floor + (1.0 - floor) * decay
    return factor


def add_check_arguments(ap):
    """The arguments every check takes: model, data, log, run, optimizer,
    tolerance and the saved model."""
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--onnx", required=True, help="initial weights")
    ap.add_argument("--data", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--microbatches", type=int, default=1)
    ap.add_argument("--optimizer", default="sgd")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--saved", help="compare the trained weights with this model")
    add_schedule_arguments(ap)


def onnx_initializers(path):
    import onnx
    from onnx import numpy_helper
    return {t.name: numpy_helper.to_array(t)
            for t in onnx.load(path).graph.initializer}


def load_initial(name, path):
    """The module of examples/models.py with its weights (and buffers) from
    path's initializers, and its input names."""
    model, _, input_names = models.make(name)
    inits = onnx_initializers(path)
    state, params = model.state_dict(), dict(model.named_parameters())
    for key, value in state.items():
        if key not in inits:
            if key in params:
                fail(f"{path} has no initializer '{key}'")
            continue  # a constant buffer the exporter folded away
        if tuple(inits[key].shape) != tuple(value.shape):
            fail(f"initializer '{key}' has shape {inits[key].shape}, "
                 f"the module's is {tuple(value.shape)}")
        state[key] = torch.from_numpy(inits[key].copy())
    model.load_state_dict(state)
    model.train()
    return model, input_names


def read_log(path, steps):
    """The step lines of a pipe-run log (evaluation lines: read_evals)."""
    with open(path) as f:
        logged = [json.loads(line) for line in f if line.strip()]
    logged = [line for line in logged if "eval_loss" not in line]
    if len(logged) != steps:
        fail(f"the log has {len(logged)} steps, expected {steps}")
    return logged


def eval_batches(path, names, batch, limit):
    """The arrays of --eval-data and how many whole batches of `batch` rows
    pipe-run evaluates (at most `limit`, 0: all)."""
    held = np.load(path)
    held = [held[n] for n in names]
    rounds = held[0].shape[0] // batch
    return held, min(rounds, limit) if limit else rounds


class AccuracyCounter:
    """Counts the top-1 accuracy of the classification losses a model calls
    while this is entered (torch.nn.functional's cross_entropy and nll_loss
    wrapped): `labels` not equal to ignore_index, `correct` of them where
    the class's score is the largest along axis 1 (torch.argmax, the first
    on ties), and `ambiguous` of them whose two largest scores are within
    1e-4 (relative) of each other, where float32 rounding may pick either."""

    def __init__(self):
        self.correct = self.labels = self.ambiguous = 0
        self.calls = 0

    def _count(self, scores, target, ignore_index):
        scores = scores.detach()
        target = target.detach()
        keep = target != ignore_index
        pred = scores.argmax(dim=1)
        self.labels += int(keep.sum())
        self.correct += int(((pred == target) & keep).sum())
        top2 = scores.topk(2, dim=1).values
        gap = top2.select(1, 0) - top2.select(1, 1)
        near = gap <= 1e-4 * top2.select(1, 0).abs().clamp(min=1.0)
        self.ambiguous += int((near & keep).sum())
        self.calls += 1

    def __enter__(self):
        F = torch.nn.functional
        self._saved = (F.cross_entropy, F.nll_loss)
        ce, nll = self._saved

        # ignore_index: a keyword, or the 5th positional argument (input,
        # target, weight, size_average, ignore_index, ...).
        def ignored(args, kwargs):
            return kwargs.get("ignore_index", args[2] if len(args) > 2 else -100)

        def cross_entropy(input, target, *args, **kwargs):
            self._count(input, target, ignored(args, kwargs))
            return ce(input, target, *args, **kwargs)

        def nll_loss(input, target, *args, **kwargs):
            self._count(input, target, ignored(args, kwargs))
            return nll(input, target, *args, **kwargs)
        F.cross_entropy, F.nll_loss = cross_entropy, nll_loss
        return self

    def __exit__(self, *exc):
        F = torch.nn.functional
        F.cross_entropy, F.nll_loss = self._saved
        return False

    def counts(self, forwards):
        """(correct, labels, ambiguous) where each of the model's `forwards`
        called one classification loss; None where it called none or
        several (a loss with no accuracy, or an ambiguous one)."""
        if self.calls != forwards:
            return None
        return (self.correct, self.labels, self.ambiguous)


def read_evals(path):
    """The evaluation lines of a pipe-run log (--eval-data)."""
    with open(path) as f:
        return [json.loads(line) for line in f if '"eval_loss"' in line]


def check_evals(logged, ref, rtol, what):
    """Evaluation lines against the reference's [(step, loss, samples)]."""
    if len(logged) != len(ref):
        fail(f"the log has {len(logged)} evaluations, {what} expects {len(ref)}")
    worst = 0.0
    accuracies = 0
    for line, (step, want, samples, *acc) in zip(logged, ref):
        if line["step"] != step or line["eval_samples"] != samples:
            fail(f"evaluation line {line} is not after step {step} over {samples} samples")
        rel = loss_error(line["eval_loss"], want)
        worst = max(worst, rel)
        if rel > rtol:
            fail(f"the evaluation after step {step}: loss {line['eval_loss']} vs {what}'s "
                 f"{want} (relative error {rel:.2e} > {rtol})")
        if acc:
            check_accuracy(line, step, acc[0], what)
            accuracies += acc[0] is not None
    print(f"OK: {len(logged)} evaluations within {rtol} of {what} (worst relative error "
          f"{worst:.1e})" + (f"; {accuracies} accuracies equal" if accuracies else ""))


def loss_error(got, want):
    """The relative error of a logged loss (None: the log's NaN, as a mean
    over no counted label is) against the reference's; NaN against NaN is
    equal, NaN against a number infinitely wrong."""
    got = float("nan") if got is None else got
    if np.isnan(got) or np.isnan(want):
        return 0.0 if np.isnan(got) and np.isnan(want) else float("inf")
    return abs(got - want) / max(abs(want), 1e-12)


def check_accuracy(line, step, counts, what):
    """An evaluation line's accuracy against AccuracyCounter.counts(): the
    same labels counted, the same right, but for near-ties; none where the
    reference has none."""
    if counts is None:
        if "eval_accuracy" in line or "eval_labels" in line:
            fail(f"the evaluation after step {step} has an accuracy, {what} none: {line}")
        return
    correct, labels, ambiguous = counts
    if "eval_accuracy" not in line or line.get("eval_labels") != labels:
        fail(f"the evaluation after step {step} counts {line.get('eval_labels')} labels "
             f"(accuracy {line.get('eval_accuracy')}), {what} {labels}")
    got = line["eval_accuracy"]
    if labels == 0:
        if got is not None:
            fail(f"the evaluation after step {step} counts no label but has accuracy {got}")
        return
    got_correct = None if got is None else round(got * labels)
    if labels and (got_correct is None or abs(got - got_correct / labels) > 1e-9 or
                   abs(got_correct - correct) > ambiguous):
        fail(f"the evaluation after step {step}: accuracy {got} ({got_correct} of {labels}) "
             f"vs {what}'s {correct / labels} ({correct}; {ambiguous} near-ties)")


def check_losses(logged, ref, rtol, what):
    """Each logged step's loss against the reference's, relative."""
    worst = 0.0
    for t, want in enumerate(ref):
        if logged[t].get("step") != t:
            fail(f"line {t} is step {logged[t].get('step')}")
        got = logged[t]["loss"]
        rel = abs(got - want) / max(abs(want), 1e-12)
        worst = max(worst, rel)
        if not rel <= rtol:
            fail(f"step {t}: loss {got} vs the {what} reference {want} "
                 f"(relative error {rel:.2e} > {rtol})")
    print(f"OK: {len(ref)} steps within {rtol} of the {what} reference "
          f"(worst relative error {worst:.1e})", flush=True)


def check_saved(path, weights, rtol, what):
    """Every tensor of `weights` (name -> tensor) against the initializer of
    that name in the ONNX model at path: max|got - want| <= rtol max|want|."""
    got_all = onnx_initializers(path)
    worst = 0.0
    for key, w in weights.items():
        if key not in got_all:
            fail(f"{path} has no initializer '{key}'")
        want, got = w.detach().numpy(), got_all[key]
        if got.shape != want.shape:
            fail(f"saved '{key}' has shape {got.shape}, the reference's {want.shape}")
        err = float(np.max(np.abs(got - want))) / max(float(np.max(np.abs(want))), 1e-12)
        worst = max(worst, err)
        if not err <= rtol:
            fail(f"saved weight '{key}' differs from the {what} reference "
                 f"by {err:.2e} (relative to its largest element)")
    print(f"OK: {len(weights)} saved weights within {rtol} of the {what} "
          f"reference (worst {worst:.1e})", flush=True)


def run_checks(check, self_test):
    """`--self-test`, or one check per `--next`-separated group of arguments."""
    torch.set_num_threads(1)
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    groups = [[]]
    for arg in sys.argv[1:]:
        if arg == "--next":
            groups.append([])
        else:
            groups[-1].append(arg)
    for group in groups:
        check(group)


def export_and_train(model, example, arrays, stem, steps=6, batch=8, lr=0.1, training=False):
    """Exports `model` (forward returns the loss) to STEM.onnx with the
    graph inputs named like `arrays` (a dict of same-length numpy arrays,
    written to STEM.npz), then trains it with SGD as pipe-run --no-shuffle
    does (step s reads rows s*batch .. s*batch+batch-1, wrapping) and writes
    each step's loss, before its update, to STEM.torch.jsonl."""
    names = list(arrays)
    kwargs = {"training": torch.onnx.TrainingMode.TRAINING} if training else {}
    torch.onnx.export(model, example, f"{stem}.onnx", input_names=names,
                      output_names=["loss"], opset_version=17,
                      do_constant_folding=False, **kwargs)
    np.savez(f"{stem}.npz", **arrays)
    rows = len(arrays[names[0]])
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    with open(f"{stem}.torch.jsonl", "w") as f:
        for s in range(steps):
            i = np.arange(s * batch, s * batch + batch) % rows
            loss = model(*[torch.from_numpy(arrays[n][i]) for n in names])
            opt.zero_grad()
            loss.backward()
            opt.step()
            f.write(json.dumps({"step": s, "loss": float(loss)}) + "\n")
