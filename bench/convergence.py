#!/usr/bin/python3
"""Convergence of the asynchronous methods against synchronous 1F1B, on 2 ranks.

    python3 bench/convergence.py [--build build] [--models cnn,transformer]
        [--methods sync,pipedream,2bw,spectrain,pipemare-t1,pipemare-t1t2]
        [--batch 128] [--microbatches 4]
        [--steps 300] [--repeats 5] [--data 1024] [--lr cnn=0.05,transformer=0.1] [--quick]
        [--out bench/out/convergence]

For each model of examples/models.py, compiles it for 2 stages with
synchronous 1F1B (`--schedule 1f1b`) and with each no-flush method
(`--method pipedream`, `pipedream --vertical-sync` (pipedream-vs), `2bw`,
`spectrain`, `pipemare --lr-warmup K` (pipemare-t1) and `pipemare
--lr-warmup K --discrepancy-correction 0.9` (pipemare-t1t2), K = the updates
of the first 10% of the run: steps/10 x M, one update per micro-batch),
same learning rate, M and data, and trains each for the same number of steps
with `pipe-run --threads 1` (one BLAS thread per rank: a rank is one device),
`--repeats` times, interleaved, keeping the fastest run's times (the machine
is noisy; the losses are deterministic).
Every run's loss and cumulative time come from the step log of the last
stage. Printed per model, side by side in one run:

  - throughput: steps/s after the first 5 steps, and its ratio to sync 1F1B;
  - the final loss (mean of the last 10% of steps);
  - steps and seconds until the loss (a 5-step moving average) first reaches
    the synchronous run's final loss, or "not reached";
  - the loss at the synchronous run's wall time (a fixed-time comparison);
  - memory per stage from each output's plan.json: the bytes kept across
    steps (parameters, weight versions, optimizer state, gradient
    accumulators, activations in flight), of them the extra weight versions
    (x V copies), and the activations of one step; and on which stages
    PipeMare's lr warm-up acts (T1 scales stage s's lr by 1/tau_s,
    tau_s = p - 1 - s: with 2 stages tau_0 = 1, so T1 changes nothing).

Loss vs steps and vs seconds go to <out>/<model>.png (matplotlib, Agg; skipped
with a message if matplotlib is missing: run the script with a python3 that
has it; the models are exported with Debian's /usr/bin/python3, which has
torch). Note that PipeDream, SpecTrain and PipeMare update once per
micro-batch (M updates per step, each on a micro-batch's gradient) while sync
and 2BW update once per step: at the same learning rate they take larger
total steps per mini-batch. Hence PipeMare's K counts micro-batch updates:
K = steps x M / 10 anneals over the first tenth of the run (120 for the
defaults). The machine's load distorts the times: run it idle.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METHOD_FLAGS = {
    "sync": ["--schedule", "1f1b"],
    "pipedream": ["--method", "pipedream"],
    "pipedream-vs": ["--method", "pipedream", "--vertical-sync"],
    "2bw": ["--method", "2bw"],
    "spectrain": ["--method", "spectrain"],
    "pipemare-t1": ["--method", "pipemare", "--lr-warmup", "{K}"],
    "pipemare-t1t2": ["--method", "pipemare", "--lr-warmup", "{K}",
                      "--discrepancy-correction", "0.9"],
}
SKIP = 5


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr).strip()


def smooth(xs, n=5):
    out, acc = [], 0.0
    for i, x in enumerate(xs):
        acc += x
        if i >= n:
            acc -= xs[i - n]
        out.append(acc / min(i + 1, n))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default="cnn,transformer")
    ap.add_argument("--methods",
                    default="sync,pipedream,2bw,spectrain,pipemare-t1,pipemare-t1t2")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--data", type=int, default=1024, help="samples in the data set")
    ap.add_argument("--lr", default="mlp=0.05,cnn=0.05,transformer=0.1")
    ap.add_argument("--repeats", type=int, default=5,
                    help="runs per method; the fastest one's times count")
    ap.add_argument("--quick", action="store_true", help="30 steps, 1 repeat: a smoke run")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "out", "convergence"))
    a = ap.parse_args()
    if a.quick:
        a.steps, a.repeats = 30, 1
    if a.steps < 2 * SKIP:
        sys.exit(f"--steps must be at least {2 * SKIP} (the first {SKIP} are not timed)")
    lrs = dict(kv.split("=") for kv in a.lr.split(","))
    bindir = os.path.join(a.build, "bin")
    env_path = bindir + os.pathsep + os.environ.get("PATH", "")
    os.environ["PATH"] = env_path
    os.makedirs(a.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="convergence.")
    torch_python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    rc, msg = run([torch_python, os.path.join(ROOT, "examples", "models.py"), "--out", work,
                   "--models", a.models, "--batch", str(a.batch), "--data", str(a.data)])
    if rc:
        sys.exit(f"examples/models.py failed: {msg}")
    methods = a.methods.split(",")
    unknown = [m for m in methods if m not in METHOD_FLAGS]
    if unknown:
        sys.exit(f"unknown method {unknown[0]} ({', '.join(METHOD_FLAGS)})")
    warmup = str(max(1, a.steps * a.microbatches // 10))
    print(f"convergence: 2 ranks, B = {a.batch}, M = {a.microbatches}, "
          f"{a.steps} steps, same lr for every method, PipeMare K = {warmup}")
    for model in a.models.split(","):
        curves = {}
        # Repeats, interleaved across methods; the losses are the same every
        # time (deterministic), the times are the fastest repeat's.
        for rep in range(a.repeats):
            for method in methods:
                if isinstance(curves.get(method), str):
                    continue
                out = os.path.join(work, f"{model}-{method}")
                rc, msg = 0, ""
                if rep == 0:
                    rc, msg = run(["pipe-compile", os.path.join(work, model + ".onnx"),
                                   "-o", out, "--batch", str(a.batch), "--stages", "2",
                                   "--microbatches", str(a.microbatches),
                                   "--optimizer", "sgd", "--lr", lrs.get(model, "0.05")]
                                  + [f.replace("{K}", warmup) for f in METHOD_FLAGS[method]])
                if rc == 0:
                    rc, msg = run(["pipe-run", out, "--data",
                                   os.path.join(work, model + ".npz"),
                                   "--steps", str(a.steps), "--no-shuffle", "--quiet",
                                   "--threads", "1", "--log", out + ".jsonl"])
                if rc:
                    curves[method] = "FAILED: " + (msg.splitlines()[-1] if msg else "")
                    continue
                rows = [json.loads(l) for l in open(out + ".jsonl") if l.strip()]
                got = ([r["loss"] for r in rows], [r["time_s"] for r in rows])
                best = curves.get(method)
                if best is None or got[1][-1] < best[1][-1]:
                    curves[method] = got
        report(model, methods, curves, a)
        memory(model, methods, curves, work)
        plot(f"{model}: 2 ranks, sync 1F1B vs no-flush methods",
             {m: curves[m] for m in methods if m in curves},
             os.path.join(a.out, f"{model}.png"))
    shutil.rmtree(work, ignore_errors=True)


def report(model, methods, curves, a):
    print(f"\n{model}:")
    print(f"  {'method':<14} {'steps/s':>8} {'vs sync':>8} {'final loss':>11} "
          f"{'steps to sync':>14} {'s to sync':>10} {'loss at sync time':>18}")
    base = curves.get("sync")
    if not isinstance(base, tuple):
        print(f"  sync: {base}")
        return
    n = max(1, len(base[0]) // 10)
    # The target is on the same 5-step moving average the hits are tested
    # on, so the sync run reaches it at its last step at the latest.
    target = smooth(base[0])[-1]
    total = base[1][-1]

    def rate(times):
        return (len(times) - SKIP) / (times[-1] - times[SKIP - 1])

    base_rate = rate(base[1])
    for method in methods:
        c = curves.get(method)
        if not isinstance(c, tuple):
            print(f"  {method:<14} {c}")
            continue
        losses, times = c
        sm = smooth(losses)
        final = sum(losses[-n:]) / n
        hit = next((i for i, l in enumerate(sm) if l <= target), None)
        at = [l for l, t in zip(sm, times) if t <= total]
        r = rate(times)
        print(f"  {method:<14} {r:8.1f} {r / base_rate:7.2f}x {final:11.4f} "
              f"{(str(hit + 1) if hit is not None else 'not reached'):>14} "
              f"{(f'{times[hit]:.2f}' if hit is not None else '-'):>10} "
              f"{(f'{at[-1]:.4f}' if at else '-'):>18}")
    print(f"  (target: sync's final loss, 5-step mean, {target:.4f}; "
          f"sync's wall time {total:.2f} s)")


def kib(n):
    return f"{n / 1024:.1f}"


def memory(model, methods, curves, work):
    """Per stage, from each output's plan.json (docs/plan-json.md): the bytes
    kept across steps (parameters, weight versions, optimizer state, and for
    a no-flush method gradient accumulators and activations in flight), of
    them the extra weight versions, and the activations of one step."""
    plans = {}
    for method in methods:
        path = os.path.join(work, f"{model}-{method}", "plan.json")
        if isinstance(curves.get(method), tuple) and os.path.exists(path):
            with open(path) as f:
                plans[method] = json.load(f)["device_plans"]
    if not plans:
        return
    print("  memory per stage (KiB, plan.json): kept = parameters + weight versions"
          " + optimizer state\n  + gradient accumulators + activations in flight"
          " (what stays across steps); versions\n  = weight_version_bytes (xV: V copies"
          " of the weights); step = peak_activation_bytes")
    stages = max(len(p) for p in plans.values())
    print(f"  {'method':<14}" + "".join(f" {f's{s} kept':>8} {f's{s} versions':>15} "
                                        f"{f's{s} step':>8}" for s in range(stages)))
    for method, plan in plans.items():
        cells = []
        for d in plan:
            m = d["memory"]
            kept = (m["parameter_bytes"] + m.get("weight_version_bytes", 0)
                    + m["optimizer_state_bytes"] + m.get("gradient_accumulator_bytes", 0)
                    + m.get("in_flight_activation_bytes", 0))
            versions = f"{kib(m.get('weight_version_bytes', 0))} (x{d['method']['weight_versions']})"
            cells.append(f" {kib(kept):>8} {versions:>15} {kib(m['peak_activation_bytes']):>8}")
        print(f"  {method:<14}" + "".join(cells))
    # T1 scales a stage's lr by 1/tau: a stage with tau = 1 has nothing to anneal.
    for method, plan in plans.items():
        if "--lr-warmup" in METHOD_FLAGS[method]:
            on = [str(d["stages"][0]) for d in plan if d["method"].get("lr_warmup")]
            print(f"  ({method}: T1's lr warm-up acts on stage(s) {', '.join(on) or 'none'};"
                  f" tau per stage = {', '.join(str(d['method']['delay']) for d in plan)})")


def plot(title, curves, path):
    """Loss (5-step mean) vs steps and vs seconds of each curve, in order:
    curves maps a label to (losses, times, ...) or to a failure text."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("  (matplotlib is missing: no plot; pip install matplotlib)")
        return
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for label, c in curves.items():
        if not isinstance(c, tuple):
            continue
        losses, times = c[0], c[1]
        ax1.plot(range(1, len(losses) + 1), smooth(losses), label=label)
        ax2.plot(times, smooth(losses), label=label)
    ax1.set_xlabel("step")
    ax2.set_xlabel("seconds")
    for ax in (ax1, ax2):
        ax.set_ylabel("loss (5-step mean)")
        ax.legend()
    fig.suptitle(title)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    print(f"  plot: {path}")


if __name__ == "__main__":
    main()
