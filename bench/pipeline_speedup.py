#!/usr/bin/python3
"""Pipeline-parallel speed-up on this machine: one rank vs p ranks (MPI, one
core each), next to the ideal p*M/(M+p-1) of a balanced synchronous pipeline.

    /usr/bin/python3 bench/pipeline_speedup.py [--build build-pipe2]
        [--hidden 1024] [--batch 256] [--microbatches 2,4,8] [--steps 30]
        [--schedule 1f1b]

The model is the MLP of examples/models.py made wider (inputs = hidden, so
that the 2 stages [fc1 fc2 | fc3 loss] cost about the same: classes =
2*hidden), exported with PyTorch.
The one-rank run compiles the ONNX model with pipe-compile as usual; the
p-rank runs start from its stage functions (test/Tools/Inputs/
pipeline_mlp_stages.py, 2 stages [fc1 fc2 | fc3 loss]) through
pipe-compile --from-mlir, because pipe-split-stages / pipe-microbatch, which
the transformer needs, have not landed yet. Every rank runs one BLAS thread
(--threads 1), so that one rank is one "device". The time per step is the
mean over the steps after the first 5, from the last stage's log.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class WideMLP(nn.Module):
    def __init__(self, inp, hidden, classes):
        super().__init__()
        self.fc1 = nn.Linear(inp, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, classes)

    def forward(self, x, y):
        h = torch.relu(self.fc1(x))
        h = torch.tanh(self.fc2(h))
        return F.cross_entropy(self.fc3(h), y)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def step_time(log, skip):
    rows = [json.loads(l) for l in open(log) if l.strip()]
    t = [r["time_s"] for r in rows]
    return (t[-1] - t[skip - 1]) / (len(t) - skip), rows[-1]["loss"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build-pipe2"))
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--microbatches", default="1,2,4,8")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--schedule", default="1f1b")
    a = p.parse_args()
    bindir = os.path.join(a.build, "bin")
    inp, hid, cls = a.hidden, a.hidden, 2 * a.hidden
    stages = 2
    work = tempfile.mkdtemp(prefix="pipeline_speedup.")
    torch.manual_seed(0)
    model = WideMLP(inp, hid, cls)
    x = torch.randn(a.batch, inp)
    y = torch.randint(0, cls, (a.batch,))
    onnx_path = os.path.join(work, "mlp.onnx")
    torch.onnx.export(model, (x, y), onnx_path, input_names=["x", "y"],
                      output_names=["loss"], opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    data = os.path.join(work, "data.npz")
    import numpy as np
    n = a.batch * 4
    np.savez(data, x=np.random.RandomState(0).randn(n, inp).astype(np.float32),
             y=np.random.RandomState(1).randint(0, cls, n).astype(np.int64))
    common = ["--data", data, "--steps", str(a.steps), "--no-shuffle", "--quiet",
              "--threads", "1"]
    skip = 5

    one = os.path.join(work, "one")
    run([os.path.join(bindir, "pipe-compile"), onnx_path, "-o", one, "--batch",
         str(a.batch), "--optimizer", "sgd", "--lr", "0.01"])
    run([os.path.join(bindir, "pipe-run"), one, *common, "--log", one + ".jsonl"])
    t1, loss1 = step_time(one + ".jsonl", skip)
    print(f"wide MLP {inp}-{hid}-{hid}-{cls}, batch {a.batch}, {a.steps} steps, "
          f"{a.schedule}, 1 BLAS thread per rank")
    print(f"{'ranks':>5} {'M':>3} {'ms/step':>9} {'speed-up':>9} {'ideal':>7}  loss@last")
    print(f"{1:>5} {'-':>3} {t1 * 1e3:9.2f} {1.0:9.2f} {1.0:7.2f}  {loss1:.6f}")
    for m in map(int, a.microbatches.split(",")):
        if a.batch % m:
            continue
        stages_ir = os.path.join(work, f"stages-m{m}.mlir")
        with open(stages_ir, "w") as f:
            f.write(run([sys.executable,
                         os.path.join(ROOT, "test/Tools/Inputs/pipeline_mlp_stages.py"),
                         "--stages", str(stages), "--batch", str(a.batch),
                         "--microbatches", str(m), "--inputs", str(inp),
                         "--hidden", str(hid), "--classes", str(cls)]))
        out = os.path.join(work, f"p{stages}m{m}")
        run([os.path.join(bindir, "pipe-compile"), onnx_path, "--from-mlir", stages_ir,
             "-o", out, "--batch", str(a.batch), "--stages", str(stages),
             "--microbatches", str(m), "--schedule", a.schedule, "--optimizer",
             "sgd", "--lr", "0.01"])
        run([os.path.join(bindir, "pipe-run"), out, *common, "--log", out + ".jsonl"])
        tp, lossp = step_time(out + ".jsonl", skip)
        ideal = stages * m / (m + stages - 1)
        print(f"{stages:>5} {m:>3} {tp * 1e3:9.2f} {t1 / tp:9.2f} {ideal:7.2f}  {lossp:.6f}")
    plan = json.load(open(os.path.join(work, f"p{stages}m{m}", "plan.json")))
    costs = ", ".join(f"stage {c['stage']}: {c['flops_per_microbatch'] / 1e6:.1f} MFLOP"
                      for c in plan["stage_costs"])
    print(f"per-micro-batch cost estimate (M={m}): {costs}")
    print(f"(work files in {work})")


if __name__ == "__main__":
    main()
