#!/usr/bin/env python3
"""One training step of pipec's compiled program next to PyTorch's, one thread.

usage: /usr/bin/python3 bench/train_step.py [--build build]
           [--models mlp,cnn,transformer,lstm,gpt,encoder]
           [--batch mlp=64,cnn=32,transformer=16,lstm=16,gpt=8,encoder=8] [--steps 200] [--warmup 20]
           (also: gpt_dropout, the GPT with GPT-2's dropout of 0.1; llama; encoder_pad;
            resnet18, torchvision's at 64 x 64)
           [--optimizer sgd|momentum|adam] [--rounds 3] [--concurrent]

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

--concurrent (two CPUs or more): the two sides run at the same time, each
pinned to its own CPU, so that both see the same spell of the machine (on
the Xeon host an AVX-512 loop's rate moves by 10-25% within a minute on both
CPUs together, and an alternating round can land a slow spell on one side).
PyTorch's steps run in a worker process that warms up, then steps until
pipec's program exits; its steps that ended while the program ran are the
timed ones. Each round runs twice with the CPUs swapped (a slower CPU lands
on both sides), and the round's ratio is the geometric mean of the two. The
two sides share the last-level cache and the memory bus while they run, so
the times are each side's under the other's load, not alone: both columns
are printed next to the alternating ones' when both are asked for
(--concurrent --rounds N runs N crossed pairs).
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


# The least seconds pipec's timed steps run for in a --concurrent round.
CONCURRENT_S = 10.0


def compile_ours(build, path, a, work):
    out = os.path.join(work, "out")
    opt = ["--optimizer", a.optimizer, "--lr", "0.01"]
    subprocess.run([os.path.join(build, "bin", "pipe-compile"), path, "-o", out] + opt,
                   check=True)
    return out


def ours(build, out, data, a, work, cpu=None, steps=None, window=False):
    """Median seconds of pipec's steps after the warm-up (with window=True
    also the seconds from the first timed step's start to the last's end)."""
    log = os.path.join(work, "steps.jsonl")
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    subprocess.run([os.path.join(build, "bin", "pipe-run"), out, "--data", data,
                    "--steps", str(steps or a.steps), "--no-shuffle", "--quiet", "--threads", "1",
                    "--log", log], check=True, preexec_fn=pin, stdin=subprocess.DEVNULL)
    with open(log) as f:
        t = [json.loads(line)["time_s"] for line in f]
    med = float(np.median(np.diff(t[a.warmup - 1:])))
    return (med, t[-1] - t[a.warmup - 1]) if window else med


def reference_steps(name, data, batch, optimizer):
    """Yields the seconds of each PyTorch training step, endlessly."""
    torch.set_num_threads(1)
    model, _, names = models.make(name)
    model.train()
    p = model.parameters()
    opt = {"sgd": lambda: torch.optim.SGD(p, lr=0.01),
           "momentum": lambda: torch.optim.SGD(p, lr=0.01, momentum=0.9),
           "adam": lambda: torch.optim.Adam(p, lr=0.01)}[optimizer]()
    d = np.load(data)
    arrays = [torch.from_numpy(d[n]) for n in names]
    rows = arrays[0].shape[0]
    s = 0
    while True:
        begin = time.perf_counter()
        idx = torch.tensor([(s * batch + i) % rows for i in range(batch)])
        inputs = [x[idx] for x in arrays]
        opt.zero_grad()
        loss = model(*inputs)
        loss.backward()
        opt.step()
        float(loss)
        yield time.perf_counter() - begin
        s += 1


def reference(name, data, batch, a):
    steps = reference_steps(name, data, batch, a.optimizer)
    times = [next(steps) for _ in range(a.steps)]
    return float(np.median(times[a.warmup:]))


def worker(argv):
    """--worker CPU NAME DATA BATCH OPTIMIZER WARMUP: PyTorch's steps on CPU,
    one line per step ("<monotonic end> <seconds>") on stdout after WARMUP
    steps and a line "ready"; stops when its standard input closes."""
    cpu, name, data, batch, optimizer, warmup = argv
    os.sched_setaffinity(0, {int(cpu)})
    import select
    steps = reference_steps(name, data, int(batch), optimizer)
    for _ in range(int(warmup)):
        next(steps)
    print("ready", flush=True)
    while not select.select([sys.stdin], [], [], 0)[0]:
        dt = next(steps)
        print(f"{time.monotonic():.6f} {dt:.6f}", flush=True)


def concurrent_round(build, out, data, name, batch, a, work, cpu_ours, cpu_ref, steps):
    """Medians of both sides' step times while both run at once, each on its
    own CPU: (ours, PyTorch). pipec runs `steps` steps; PyTorch's timed steps
    are those that ran within pipec's timed ones (that window ends when the
    program exits, less nothing: the program's exit after its last step is
    quick next to the window)."""
    ref = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", str(cpu_ref),
                            name, data, str(batch), a.optimizer, str(a.warmup)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if ref.stdout.readline().strip() != "ready":
        ref.kill()
        raise SystemExit("train_step.py: the PyTorch worker did not start")
    lines = []
    import threading
    reader = threading.Thread(target=lambda: lines.extend(ref.stdout))
    reader.start()
    try:
        t_ours, span = ours(build, out, data, a, work, cpu=cpu_ours, steps=steps, window=True)
    finally:
        end = time.monotonic()
        ref.stdin.close()
        reader.join()
        ref.wait()
    begin = end - span
    times = [float(dt) for t, dt in (line.split() for line in lines)
             if begin + float(dt) <= float(t) <= end]
    if len(times) < 3:
        raise SystemExit(f"train_step.py: only {len(times)} PyTorch step(s) ran next to "
                         f"pipec's {a.steps}; ask for more --steps")
    return t_ours, float(np.median(times))


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
    ap.add_argument("--concurrent", action="store_true",
                    help="both sides at once, each on its own CPU, then the CPUs swapped "
                         "(needs two CPUs)")
    a = ap.parse_args()
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    if a.warmup < 1 or a.warmup >= a.steps:
        ap.error("--warmup must be at least 1 and below --steps")
    cpus = sorted(os.sched_getaffinity(0))
    if a.concurrent and len(cpus) < 2:
        ap.error(f"--concurrent needs two CPUs; this process may run on {len(cpus)}")
    batches = dict((k, int(v)) for k, v in (e.split("=") for e in a.batch.split(",")))
    print(f"one thread each; median of {a.steps - a.warmup} timed steps after {a.warmup} warm-up; "
          + (f"{a.rounds} round(s) of both sides at once on CPUs {cpus[0]} and {cpus[1]}, "
             "then swapped (geometric mean of the pair), medians over the rounds; "
             if a.concurrent else f"{a.rounds} alternating round(s), medians over them; ") +
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
            if a.concurrent:
                # pipec runs at least --steps steps and at least CONCURRENT_S
                # seconds (its step alone, measured first, sets the count),
                # so that PyTorch's slower steps number enough beside it.
                alone = ours(a.build, out, data, a, work)
                steps = max(a.steps, a.warmup + int(CONCURRENT_S / alone))
            for _ in range(a.rounds):
                if a.concurrent:
                    x = concurrent_round(a.build, out, data, name, b, a, work, cpus[0], cpus[1],
                                         steps)
                    y = concurrent_round(a.build, out, data, name, b, a, work, cpus[1], cpus[0],
                                         steps)
                    t_ours, t_ref = (x[0] * y[0]) ** 0.5, (x[1] * y[1]) ** 0.5
                else:
                    t_ours = ours(a.build, out, data, a, work)
                    t_ref = reference(name, data, b, a)
                rounds.append((t_ours, t_ref, t_ours / t_ref))
        med = [float(np.median([r[k] for r in rounds])) for k in range(3)]
        each = " ".join(f"{r[2]:.2f}" for r in rounds)
        print(f"{name:<12} {b:>5} {med[0] * 1e3:>14.3f} {med[1] * 1e3:>16.3f} "
              f"{med[2]:>6.2f}  {each}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2:])
    else:
        main()
