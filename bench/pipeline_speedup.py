#!/usr/bin/python3
"""Pipeline-parallel speed-up on this machine: one rank vs 2 ranks (MPI, one
BLAS thread each), next to the ideal p*M/(M+p-1) of a balanced synchronous
pipeline.

    /usr/bin/python3 bench/pipeline_speedup.py [--build build-pipe2]
        [--model transformer] [--batch 32] [--microbatches 1,2,4,8]
        [--steps 30] [--schedule 1f1b] [--partition layers]

The model comes from examples/models.py. The one-rank run is pipe-compile's
one-device program; the 2-rank runs are pipe-compile --stages 2
--microbatches M. Every rank runs one BLAS thread (--threads 1), so that a
rank is one "device". The time per step is the mean over the steps after the
first 5, from the log of the rank that reports the loss (the last stage).
The losses of the runs are printed too: they agree (synchronous schedules).
Other processes on the machine (builds) distort the numbers: run it idle.
"""
import argparse
import json
import os
import sys
import tempfile

from benchlib import ROOT, run, step_time



def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build-pipe2"))
    p.add_argument("--model", default="transformer")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--microbatches", default="1,2,4,8")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--schedule", default="1f1b")
    p.add_argument("--partition", default="layers")
    a = p.parse_args()
    bindir = os.path.join(a.build, "bin")
    stages = 2
    work = tempfile.mkdtemp(prefix="pipeline_speedup.")
    run([sys.executable, os.path.join(ROOT, "examples/models.py"), "--out", work,
         "--models", a.model, "--batch", str(a.batch), "--data", str(4 * a.batch)])
    model = os.path.join(work, a.model + ".onnx")
    data = os.path.join(work, a.model + ".npz")
    common = ["--data", data, "--steps", str(a.steps), "--no-shuffle", "--quiet",
              "--threads", "1"]
    skip = 5

    one = os.path.join(work, "one")
    run([os.path.join(bindir, "pipe-compile"), model, "-o", one, "--batch",
         str(a.batch), "--optimizer", "sgd", "--lr", "0.01"])
    run([os.path.join(bindir, "pipe-run"), one, *common, "--log", one + ".jsonl"])
    t1, loss1 = step_time(one + ".jsonl", skip)
    print(f"{a.model}, batch {a.batch}, {a.steps} steps, {a.schedule}, "
          f"--partition {a.partition}, 1 BLAS thread per rank, {os.cpu_count()} cores")
    print(f"{'ranks':>5} {'M':>3} {'ms/step':>9} {'speed-up':>9} {'ideal':>7}  loss@last")
    print(f"{1:>5} {'-':>3} {t1 * 1e3:9.2f} {1.0:9.2f} {1.0:7.2f}  {loss1:.6f}")
    last = None
    for m in map(int, a.microbatches.split(",")):
        if a.batch % m:
            continue
        out = os.path.join(work, f"p{stages}m{m}")
        run([os.path.join(bindir, "pipe-compile"), model, "-o", out, "--batch",
             str(a.batch), "--stages", str(stages), "--microbatches", str(m),
             "--schedule", a.schedule, "--partition", a.partition,
             "--optimizer", "sgd", "--lr", "0.01"])
        run([os.path.join(bindir, "pipe-run"), out, *common, "--log", out + ".jsonl"])
        tp, lossp = step_time(out + ".jsonl", skip)
        ideal = stages * m / (m + stages - 1)
        print(f"{stages:>5} {m:>3} {tp * 1e3:9.2f} {t1 / tp:9.2f} {ideal:7.2f}  {lossp:.6f}")
        last = out
    if last:
        plan = json.load(open(os.path.join(last, "plan.json")))
        costs = ", ".join(f"stage {c['stage']}: {c['flops_per_microbatch'] / 1e6:.1f} MFLOP"
                          for c in plan["stage_costs"])
        print(f"cost estimate per micro-batch ({os.path.basename(last)}): {costs}")
    print(f"(work files in {work})")


if __name__ == "__main__":
    main()
