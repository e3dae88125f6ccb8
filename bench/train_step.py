#!/usr/bin/env python3
"""One training step of pipec's compiled program next to PyTorch's, one thread.

usage: /usr/bin/python3 bench/train_step.py [--build build]
           [--models mlp,cnn,transformer,lstm,gpt,encoder]
           [--batch mlp=64,cnn=32,transformer=16,lstm=16,gpt=8,encoder=8] [--steps 200] [--warmup 20]
           (also: gpt_dropout, the GPT with GPT-2's dropout of 0.1; llama; encoder_pad;
            resnet18, torchvision's at 64 x 64)
           [--optimizer sgd|momentum|adam] [--rounds 3]

For each model of examples/models.py: exports it (fixed batch) with a data
set, compiles it with pipe-compile, trains it with pipe-run (--no-shuffle,
PIPERT_THREADS=1 and --threads 1) and reads the per-step times from the step
log; then trains the same module from the same weights on the same data in
PyTorch with torch.set_num_threads(1) (index the batch, zero_grad, forward,
backward, optimizer step). The two alternate --rounds times (pipec's
program compiled once), so that a slow spell of the machine lands on both.
Prints the median ms/step of both (medians, because a shared machine's
load comes in bursts; over the rounds, the median of each round's) and the
median of the rounds' ratios pipec / PyTorch (below 1: pipec is faster),
then each round's ratio. The first --warmup steps of both
are not timed. Where the environment names no OpenBLAS core type, both run
the one the CPU's flags call for (SkylakeX with AVX-512, Haswell with AVX2;
printed): PyTorch's matmuls are OpenBLAS's. Not a test: numbers depend on the
machine.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["PIPERT_THREADS"] = "1"


def fair_blas_core():
    """Name OpenBLAS's core type for both sides when the environment names none.

    Debian's OpenBLAS 0.3.21 does not recognise newer CPUs (the Xeon of family
    6 model 207) and falls back to its SSE3 Prescott kernels, which made
    PyTorch's GPT step 3.5x slower there (709 against 202 ms) and the ratio
    meaningless (pipert's GEMMs are oneDNN's but for tiny products, so it
    barely moved). A core type the environment sets is kept (DESIGN.md)."""
    if os.environ.get("OPENBLAS_CORETYPE"):
        return "OPENBLAS_CORETYPE=%s (from the environment)" % os.environ["OPENBLAS_CORETYPE"]
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f
                          if line.startswith("flags")), [])
    except OSError:
        flags = []
    core = ("SkylakeX" if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= set(flags)
            else "Haswell" if {"avx2", "fma"} <= set(flags) else None)
    if not core:
        return "OPENBLAS_CORETYPE unset (OpenBLAS detects the CPU)"
    os.environ["OPENBLAS_CORETYPE"] = core
    return "OPENBLAS_CORETYPE=%s for both (the environment set none)" % core


BLAS_CORE = fair_blas_core()

import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import models  # noqa: E402


def compile_ours(build, path, a, work):
    out = os.path.join(work, "out")
    opt = ["--optimizer", a.optimizer, "--lr", "0.01"]
    subprocess.run([os.path.join(build, "bin", "pipe-compile"), path, "-o", out] + opt,
                   check=True)
    return out


def ours(build, out, data, a, work):
    log = os.path.join(work, "steps.jsonl")
    subprocess.run([os.path.join(build, "bin", "pipe-run"), out, "--data", data,
                    "--steps", str(a.steps), "--no-shuffle", "--quiet", "--threads", "1",
                    "--log", log], check=True)
    with open(log) as f:
        t = [json.loads(line)["time_s"] for line in f]
    return float(np.median(np.diff(t[a.warmup - 1:])))


def reference(name, data, batch, a):
    torch.set_num_threads(1)
    model, _, names = models.make(name)
    model.train()
    p = model.parameters()
    opt = {"sgd": lambda: torch.optim.SGD(p, lr=0.01),
           "momentum": lambda: torch.optim.SGD(p, lr=0.01, momentum=0.9),
           "adam": lambda: torch.optim.Adam(p, lr=0.01)}[a.optimizer]()
    d = np.load(data)
    arrays = [torch.from_numpy(d[n]) for n in names]
    rows = arrays[0].shape[0]
    times = []
    for s in range(a.steps):
        begin = time.perf_counter()
        idx = torch.tensor([(s * batch + i) % rows for i in range(batch)])
        inputs = [x[idx] for x in arrays]
        opt.zero_grad()
        loss = model(*inputs)
        loss.backward()
        opt.step()
        float(loss)
        times.append(time.perf_counter() - begin)
    return float(np.median(times[a.warmup:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--models", default="mlp,cnn,transformer,lstm,gpt,encoder")
    ap.add_argument("--batch",
                    default="mlp=64,cnn=32,transformer=16,lstm=16,gpt=8,gpt_dropout=8,llama=8,"
                            "lstm_lm=32,encoder=8,encoder_pad=8,resnet18=16")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--optimizer", default="sgd", choices=["sgd", "momentum", "adam"])
    ap.add_argument("--rounds", type=int, default=3,
                    help="pipec and PyTorch runs alternated this many times per model; "
                         "the median of the rounds' ratios is printed")
    a = ap.parse_args()
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    batches = dict((k, int(v)) for k, v in (e.split("=") for e in a.batch.split(",")))
    print(f"one thread each; median of {a.steps - a.warmup} timed steps after {a.warmup} warm-up; "
          f"{a.rounds} alternating round(s), medians over them; "
          f"optimizer {a.optimizer}; torch {torch.__version__}; {BLAS_CORE}")
    print(f"{'model':<12} {'batch':>5} {'pipec ms/step':>14} {'PyTorch ms/step':>16} "
          f"{'ratio':>6}  rounds' ratios")
    for name in a.models.split(","):
        b = batches[name]
        with tempfile.TemporaryDirectory() as work:
            subprocess.run([sys.executable, os.path.join(HERE, "..", "examples", "models.py"),
                            "--out", work, "--models", name, "--batch", str(b),
                            "--data", str(b * 16)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            path = os.path.join(work, name + ".onnx")
            data = os.path.join(work, name + ".npz")
            out = compile_ours(a.build, path, a, work)
            # pipec and PyTorch alternate, so that a slow spell of the
            # machine (minutes long on the Xeon host) lands on both sides
            # rather than on one; the ratio is the median of the rounds'.
            rounds = []
            for _ in range(a.rounds):
                t_ours = ours(a.build, out, data, a, work)
                t_ref = reference(name, data, b, a)
                rounds.append((t_ours, t_ref, t_ours / t_ref))
        med = [float(np.median([r[k] for r in rounds])) for k in range(3)]
        each = " ".join(f"{r[2]:.2f}" for r in rounds)
        print(f"{name:<12} {b:>5} {med[0] * 1e3:>14.3f} {med[1] * 1e3:>16.3f} "
              f"{med[2]:>6.2f}  {each}")


if __name__ == "__main__":
    main()
