#!/usr/bin/env python3
"""Sweeps the no-flush methods over models x stages x micro-batches and
checks every run against async_reference.py, an independent PyTorch
simulation of METHODS.md's equations: each step's loss and the saved
weights within --rtol relative. Prints one line per configuration and a
closing "N passed, N failed" count.

usage: async_sweep.py --work DIR [--models mlp,cnn,transformer]
          [--stages 2,3,4] [--methods pipedream,pipedream-vs,2bw]
          [--steps 6] [--batch 24] [--optimizers sgd,adam,...]
Micro-batches: M in {1, p, 2p} (2BW: M >= p only). The optimizer of a
configuration rotates through --optimizers, so every method meets each.
Needs pipe-compile and pipe-run on PATH and the models and data made by
examples/models.py in DIR (<model>.onnx, <model>.npz).
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LR = {"mlp": 0.05, "cnn": 0.02, "transformer": 0.05}
HYPER = {"sgd": [], "momentum": ["--momentum", "0.9"],
         "nesterov": ["--momentum", "0.9"], "adam": [], "adamw": [],
         "adagrad": []}


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, (p.stdout + p.stderr).strip()


def lr_of(model, optimizer):
    lr = LR[model]
    return lr / 10 if optimizer in ("adam", "adamw", "adagrad") else lr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--models", default="mlp,cnn,transformer")
    ap.add_argument("--stages", default="2,3,4")
    ap.add_argument("--methods", default="pipedream,pipedream-vs,2bw")
    ap.add_argument("--optimizers", default="sgd,momentum,adam")
    ap.add_argument("--microbatches", default="",
                    help="override M (comma list); default 1,p,2p")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=24)
    ap.add_argument("--rtol", default="1e-5")
    a = ap.parse_args()
    optimizers = a.optimizers.split(",")
    checks, names = [], []
    failed = 0
    index = 0
    for model in a.models.split(","):
        for p in [int(s) for s in a.stages.split(",")]:
            ms = ([int(m) for m in a.microbatches.split(",")]
                  if a.microbatches else [1, p, 2 * p])
            for m in ms:
                for method in a.methods.split(","):
                    if method == "2bw" and m < p:
                        continue
                    opt = optimizers[index % len(optimizers)]
                    index += 1
                    name = f"{model}-p{p}-m{m}-{method}-{opt}"
                    out = os.path.join(a.work, name)
                    lr = lr_of(model, opt)
                    flags = ["--method", "2bw" if method == "2bw" else "pipedream"]
                    if method == "pipedream-vs":
                        flags.append("--vertical-sync")
                    rc, msg = run(["pipe-compile", os.path.join(a.work, model + ".onnx"),
                                   "-o", out, "--batch", str(a.batch),
                                   "--stages", str(p), "--microbatches", str(m),
                                   "--optimizer", opt, "--lr", str(lr)]
                                  + HYPER[opt] + flags)
                    if rc == 0:
                        rc, msg = run(["timeout", "120", "pipe-run", out, "--data",
                                       os.path.join(a.work, model + ".npz"),
                                       "--steps", str(a.steps), "--no-shuffle",
                                       "--quiet", "--log", out + ".jsonl",
                                       "--save", out + ".onnx"])
                    if rc:
                        failed += 1
                        print(f"FAIL {name}: " + (msg.splitlines()[-1] if msg else "failed"))
                        continue
                    ref = ["--model", model, "--onnx", os.path.join(a.work, model + ".onnx"),
                           "--data", os.path.join(a.work, model + ".npz"),
                           "--log", out + ".jsonl", "--steps", str(a.steps),
                           "--batch", str(a.batch), "--microbatches", str(m),
                           "--method", "2bw" if method == "2bw" else "pipedream",
                           "--plan", os.path.join(out, "plan.json"),
                           "--optimizer", opt, "--lr", str(lr),
                           "--rtol", a.rtol, "--saved", out + ".onnx"] + HYPER[opt]
                    if method == "pipedream-vs":
                        ref.append("--vertical-sync")
                    checks.append(ref)
                    names.append(name)
    # One reference process for all (importing torch is the slow part).
    argv = []
    for ref in checks:
        argv += (["--next"] if argv else []) + ref
    passed = 0
    if argv:
        p = subprocess.run([sys.executable, os.path.join(HERE, "async_reference.py")] + argv,
                           capture_output=True, text=True)
        lines = [l for l in p.stdout.splitlines() if l.startswith(("OK", "FAIL"))]
        # Two OK lines per configuration (losses, saved weights); a FAIL
        # line ends the reference run at that configuration.
        for i, name in enumerate(names):
            got = lines[2 * i: 2 * i + 2]
            if len(got) == 2 and all(l.startswith("OK") for l in got):
                passed += 1
                print(f"ok   {name}")
            else:
                failed += 1
                why = next((l for l in got if l.startswith("FAIL")), None)
                why = why or (p.stderr.strip().splitlines() or ["no result"])[-1]
                print(f"FAIL {name}: {why}")
    print(f"async sweep: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
