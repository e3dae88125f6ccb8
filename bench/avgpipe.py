#!/usr/bin/python3
"""AvgPipe and data parallelism across pipelines against synchronous 1F1B,
on the 2 cores of this machine (2 ranks each).

    python3 bench/avgpipe.py [--build build] [--models cnn,transformer]
        [--batch 128] [--microbatches 4] [--steps 300] [--repeats 5]
        [--alpha 0.5] [--period 1] [--quick] [--out bench/out/avgpipe]

Configurations, same SGD learning rate and data:
  - sync 1F1B:  1 pipeline of 2 stages, B samples per step;
  - DP x PP:    2 pipelines of 1 stage (--pipelines 2), gradients averaged:
                2B samples per step (one-device training on 2B);
  - AvgPipe:    2 pipelines of 1 stage, each on its own B samples, elastic
                averaging (--method avgpipe --avg-alpha A --avg-period T).
A step of the two-pipeline runs consumes twice the data of a sync step, so the
table compares samples/s as well as steps/s, and losses against seconds. Each
run is repeated (interleaved) and the fastest run's times count; the losses
are deterministic. Prints per model a table (samples/s and its ratio to sync,
final loss, seconds to reach sync's final loss, loss at sync's wall time) and
writes <out>/<model>.png (loss vs steps and vs seconds; needs matplotlib).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from convergence import plot, smooth  # noqa: E402

SKIP = 5


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr).strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default="cnn,transformer")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--alpha", type=float, default=0.5)
    ap.add_argument("--period", type=int, default=1)
    ap.add_argument("--data", type=int, default=2048)
    ap.add_argument("--lr", default="mlp=0.05,cnn=0.05,transformer=0.1")
    ap.add_argument("--quick", action="store_true", help="30 steps, 1 repeat")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "out", "avgpipe"))
    a = ap.parse_args()
    if a.quick:
        a.steps, a.repeats = 30, 1
    if a.steps < 2 * SKIP:
        sys.exit(f"--steps must be at least {2 * SKIP}")
    lrs = dict(kv.split("=") for kv in a.lr.split(","))
    os.environ["PATH"] = os.path.join(a.build, "bin") + os.pathsep + os.environ["PATH"]
    os.makedirs(a.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="avgpipe.")
    torch_python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    rc, msg = run([torch_python, os.path.join(ROOT, "examples", "models.py"), "--out", work,
                   "--models", a.models, "--batch", str(a.batch), "--data", str(a.data)])
    if rc:
        sys.exit(f"examples/models.py failed: {msg}")
    configs = {
        "sync 1F1B p=2": (["--stages", "2", "--microbatches", str(a.microbatches),
                           "--schedule", "1f1b"], 1),
        "DPxPP P=2 p=1": (["--pipelines", "2", "--microbatches", str(a.microbatches)], 2),
        "AvgPipe P=2 p=1": (["--pipelines", "2", "--microbatches", str(a.microbatches),
                             "--method", "avgpipe", "--avg-alpha", str(a.alpha),
                             "--avg-period", str(a.period)], 2),
    }
    print(f"avgpipe: 2 ranks each, B = {a.batch} per pipeline, M = {a.microbatches}, "
          f"{a.steps} steps, alpha {a.alpha}, period {a.period}")
    for model in a.models.split(","):
        curves = {}
        for rep in range(a.repeats):
            for name, (flags, pipelines) in configs.items():
                if isinstance(curves.get(name), str):
                    continue
                out = os.path.join(work, f"{model}-{len(curves)}-{name.split()[0]}")
                rc = 0
                if rep == 0 or not os.path.isdir(out):
                    rc, msg = run(["pipe-compile", os.path.join(work, model + ".onnx"),
                                   "-o", out, "--batch", str(a.batch), "--optimizer", "sgd",
                                   "--lr", lrs.get(model, "0.05")] + flags)
                if rc == 0:
                    rc, msg = run(["pipe-run", out, "--data", os.path.join(work, model + ".npz"),
                                   "--steps", str(a.steps), "--no-shuffle", "--quiet",
                                   "--threads", "1", "--log", out + ".jsonl"])
                if rc:
                    curves[name] = "FAILED: " + (msg.splitlines()[-1] if msg else "")
                    continue
                rows = [json.loads(l) for l in open(out + ".jsonl") if l.strip()]
                got = ([r["loss"] for r in rows], [r["time_s"] for r in rows], pipelines)
                if name not in curves or got[1][-1] < curves[name][1][-1]:
                    curves[name] = got
        report(model, curves, a)
        plot(f"{model}: AvgPipe and DP x PP vs sync 1F1B, 2 ranks", curves,
             os.path.join(a.out, f"{model}.png"))
    shutil.rmtree(work, ignore_errors=True)


def report(model, curves, a):
    print(f"\n{model}:")
    print(f"  {'configuration':<17} {'samples/s':>10} {'vs sync':>8} {'final loss':>11} "
          f"{'s to sync':>10} {'loss at sync time':>18}")
    base = curves.get("sync 1F1B p=2")
    if not isinstance(base, tuple):
        print(f"  sync: {base}")
        return
    target = smooth(base[0])[-1]
    total = base[1][-1]

    def samples_per_s(c):
        losses, times, pipelines = c
        return (len(times) - SKIP) * a.batch * pipelines / (times[-1] - times[SKIP - 1])

    base_rate = samples_per_s(base)
    n = max(1, len(base[0]) // 10)
    for name, c in curves.items():
        if not isinstance(c, tuple):
            print(f"  {name:<17} {c}")
            continue
        losses, times, _ = c
        sm = smooth(losses)
        hit = next((i for i, l in enumerate(sm) if l <= target), None)
        at = [l for l, t in zip(sm, times) if t <= total]
        r = samples_per_s(c)
        print(f"  {name:<17} {r:10.0f} {r / base_rate:7.2f}x {sum(losses[-n:]) / n:11.4f} "
              f"{(f'{times[hit]:.2f}' if hit is not None else 'not reached'):>10} "
              f"{(f'{at[-1]:.4f}' if at else '-'):>18}")
    print(f"  (target: sync's final loss, 5-step mean, {target:.4f}; "
          f"sync's wall time {total:.2f} s)")


if __name__ == "__main__":
    main()
