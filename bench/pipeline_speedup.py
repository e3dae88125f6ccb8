#!/usr/bin/python3
"""Pipeline-parallel speed-up on this machine: one rank vs 2 ranks (MPI, one
BLAS thread each), next to two ideals: the balanced pipeline's p*M/(M+p-1),
and the ideal of the stages as they are, computed from their measured costs.

    /usr/bin/python3 bench/pipeline_speedup.py [--build build]
        [--model transformer] [--batch 32] [--microbatches 1,2,4,8,16]
        [--steps 60] [--repeats 3] [--schedule 1f1b] [--partition profile]

The model comes from examples/models.py. The one-rank run is pipe-compile's
one-device program; the 2-rank runs are pipe-compile --stages 2
--microbatches M with the partition of --partition: `profile` (the default)
profiles the model first (pipe-profile, at every micro-batch size of the
sweep) and cuts it by the measured op times (pipe-compile --profile);
`balanced`, `layers`, `dp` are pipe-compile's own. Every rank runs one BLAS
thread (--threads 1), so that a rank is one "device". The time per step is
the mean over the steps after the first 5 of the step log of the rank that
reports the loss, the median of its step-to-step times after the first 5;
each configuration runs --repeats times and the fastest run is kept (noise
only slows a run down). The repeats go round-robin over the configurations
(one rank, M = 1, 2, ...), so that a slow spell of the machine lands on all
of them rather than on one M.

Columns:
  speed-up   t(1 rank) / t(2 ranks)
  ideal      p*M/(M+p-1): a balanced pipeline whose micro-batches cost 1/M
             of the whole batch
  stage-ideal  t(1 rank) / the step the stages' measured costs allow: a
             traced run of the same program (the faster of two) gives each stage's forward,
             backward and update time (medians), and pipe-simulate --measured
             replays the schedule with them and free transfers; so it
             includes the stage imbalance and the micro-batches' own costs
             (small matrices) but no transfer or wait
  of-ideal   speed-up / stage-ideal: what the transport and the runtime lose
  same-run   the kept trace's own prediction over its own measured step
             (pipe-simulate --measured): the of-ideal of one run, so a slow
             spell of the machine between the timed runs and the traced ones
             does not move it (the Xeon host's regimes moved of-ideal by
             +-25%); tracing itself adds a little to the measured step
  imbalance  the slowest stage's forward+backward over the stages' mean
  mb-cost    the stages' forward+backward times M, over the one-rank step:
             what splitting the batch into M micro-batches costs before any
             pipelining
The losses of the runs are printed too: they agree (synchronous schedules).
Other processes on the machine (builds) distort the numbers: run it idle.
"""
import argparse
import json
import os
import re
import sys
import tempfile

from benchlib import ROOT, run, step_median


def best_steps(runs, repeats, skip):
    """runs: {key: (command, log)}. Each command `repeats` times, the
    commands in turn; per key the fastest run's (median step, loss)."""
    best = {}
    for _ in range(repeats):
        for key, (cmd, log) in runs.items():
            run(cmd + ["--log", log])
            t, loss = step_median(log, skip)
            if key not in best or t < best[key][0]:
                best[key] = (t, loss)
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--model", default="transformer")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--microbatches", default="1,2,4,8,16")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--schedule", default="1f1b")
    p.add_argument("--partition", default="profile",
                   choices=["profile", "balanced", "layers", "dp"])
    a = p.parse_args()
    bindir = os.path.join(a.build, "bin")
    stages = 2
    skip = 5
    work = tempfile.mkdtemp(prefix="pipeline_speedup.")
    run([sys.executable, os.path.join(ROOT, "examples/models.py"), "--out", work,
         "--models", a.model, "--batch", str(a.batch), "--data", str(4 * a.batch),
         "--dynamic"])
    model = os.path.join(work, a.model + "_dyn.onnx")
    data = os.path.join(work, a.model + ".npz")
    sizes = [m for m in map(int, a.microbatches.split(",")) if a.batch % m == 0]
    common = ["--data", data, "--steps", str(a.steps), "--no-shuffle", "--quiet",
              "--threads", "1"]
    partition = ["--partition", a.partition]
    if a.partition == "profile":
        prof = os.path.join(work, "profile.json")
        rows = ",".join(str(a.batch // m) for m in sorted(set(sizes) | {1}))
        run([os.path.join(bindir, "pipe-profile"), model, "--data", data, "-o", prof,
             "--rows", rows, "--kernel-threads", "1"])
        partition = ["--profile", prof]

    one = os.path.join(work, "one")
    run([os.path.join(bindir, "pipe-compile"), model, "-o", one, "--batch",
         str(a.batch), "--optimizer", "sgd", "--lr", "0.01"])
    runs = {"one": ([os.path.join(bindir, "pipe-run"), one, *common], one + ".jsonl")}
    for m in sizes:
        out = os.path.join(work, f"p{stages}m{m}")
        run([os.path.join(bindir, "pipe-compile"), model, "-o", out, "--batch",
             str(a.batch), "--stages", str(stages), "--microbatches", str(m),
             "--schedule", a.schedule, *partition, "--optimizer", "sgd", "--lr", "0.01"])
        runs[m] = ([os.path.join(bindir, "pipe-run"), out, *common], out + ".jsonl")
    best = best_steps(runs, a.repeats, skip)
    t1, loss1 = best["one"]
    print(f"{a.model}, batch {a.batch}, {a.steps} steps (median step, best of {a.repeats} "
          f"round-robin runs), "
          f"{a.schedule}, --partition {a.partition}, 1 BLAS thread per rank, "
          f"{os.cpu_count()} cores")
    print(f"{'ranks':>5} {'M':>3} {'ms/step':>8} {'speed-up':>8} {'ideal':>6} "
          f"{'stage-ideal':>11} {'of-ideal':>8} {'same-run':>8} {'imbalance':>9} {'mb-cost':>7}"
          f"  loss@last")
    print(f"{1:>5} {'-':>3} {t1 * 1e3:8.3f} {1.0:8.2f} {1.0:6.2f} {'':>11} {'':>8} "
          f"{'':>8} {'':>9} {'':>7}  {loss1:.6f}")
    for m in sizes:
        out = os.path.join(work, f"p{stages}m{m}")
        tp, lossp = best[m]
        # The stages' own costs, from traced runs of the same program: two,
        # the faster prediction kept (a slow spell during one trace slows
        # its stages and makes the ideal look worse than it is).
        ideal_step, fb, same_run = None, None, None
        for i in range(2):
            trace = out + f".trace{i}.json"
            costs = out + f".costs{i}.json"
            run([os.path.join(bindir, "pipe-run"), out, *common, "--trace", trace])
            sim = run([os.path.join(bindir, "pipe-simulate"), out, "--measured", trace,
                       "--latency", "0", "--bandwidth", "1e15", "--write-profile", costs])
            step = float(re.search(r"predicted step time: ([0-9.eE+-]+) s", sim).group(1))
            own = re.search(r"predicted / measured = ([0-9.eE+-]+)", sim)
            if ideal_step is None or step < ideal_step:
                ideal_step = step
                same_run = float(own.group(1)) if own else float("nan")
                fb = [s["forward_s"] + s["backward_s"]
                      for s in json.load(open(costs))["stages"]]
        imbalance = max(fb) / (sum(fb) / len(fb))
        mb_cost = sum(fb) * m / t1
        ideal = stages * m / (m + stages - 1)
        stage_ideal = t1 / ideal_step
        print(f"{stages:>5} {m:>3} {tp * 1e3:8.3f} {t1 / tp:8.2f} {ideal:6.2f} "
              f"{stage_ideal:11.2f} {t1 / tp / stage_ideal:8.2f} {same_run:8.2f} {imbalance:9.2f} "
              f"{mb_cost:7.2f}  {lossp:.6f}")
    print(f"(work files in {work})")


if __name__ == "__main__":
    main()
