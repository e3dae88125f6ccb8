#!/usr/bin/env python3
"""Sweeps the no-flush methods over models x stages x micro-batches and
checks every run against async_reference.py, an independent PyTorch
simulation of METHODS.md's equations: each step's loss and the saved
weights within --rtol relative. Prints one line per configuration and a
closing "N passed, N failed" count.

usage: async_sweep.py --work DIR [--models mlp,cnn,transformer]
          [--stages 2,3,4] [--methods pipedream,pipedream-vs,2bw,spectrain,
                            pipemare-t1,pipemare-t2,pipemare-t1t2]
          [--steps 6] [--batch 24] [--optimizers sgd,adam,...]
Micro-batches: M in {1, p, 2p} (2BW: M >= p only). PipeDream and 2BW are
checked by async_reference.py (per-parameter versions), SpecTrain and
PipeMare by stage_reference.py (the ONNX graph split by plan.json's
node_stages: their backwards run on other weights than their forwards).
PipeMare's variants: T1 (--lr-warmup 8), T2 (--discrepancy-correction 0.9),
both. The optimizer of a
configuration rotates through --optimizers, so every method meets each.
Needs pipe-compile and pipe-run on PATH and the models and data made by
examples/models.py in DIR (<model>.onnx, <model>.npz).
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LR = {"mlp": 0.05, "cnn": 0.02, "transformer": 0.05, "lstm_lm": 0.1}
# Adaptive optimizers are not compared on the transformer: the gradient of
# its attention's key bias is analytically zero (softmax is shift
# invariant), so Adam's m / (sqrt(v) + eps) turns float rounding noise into
# full-size steps and the saved biases differ by amplified noise (3e-3
# relative), not by the method. Its losses still match to 1e-7.
ADAPTIVE = {"adam", "adamw", "adagrad"}
NO_ADAPTIVE = {"transformer"}
HYPER = {"sgd": [], "momentum": ["--momentum", "0.9"],
         "nesterov": ["--momentum", "0.9"], "adam": [],
         "adamw": ["--weight-decay", "0.01"],
         "adagrad": []}


# name -> (pipe-compile flags, reference, reference flags); the reference's
# flags are pipe-compile's unless given.
METHODS = {
    "pipedream": (["--method", "pipedream"], "async_reference.py", None),
    "pipedream-vs": (["--method", "pipedream", "--vertical-sync"],
                     "async_reference.py", None),
    "2bw": (["--method", "2bw"], "async_reference.py", None),
    "spectrain": (["--method", "spectrain"], "stage_reference.py", None),
    "pipemare-t1": (["--method", "pipemare", "--lr-warmup", "8"],
                    "stage_reference.py", None),
    "pipemare-t2": (["--method", "pipemare", "--discrepancy-correction", "0.9"],
                    "stage_reference.py", None),
    "pipemare-t1t2": (["--method", "pipemare", "--lr-warmup", "8",
                       "--discrepancy-correction", "0.9"],
                      "stage_reference.py", None),
}
# Combinations a method refuses (METHODS.md): SpecTrain has no prediction
# along Adagrad's direction.
REFUSED = {("spectrain", "adagrad")}


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
    ap.add_argument("--each-optimizer", action="store_true",
                    help="run every configuration with every optimizer "
                         "instead of rotating")
    ap.add_argument("--microbatches", default="",
                    help="override M (comma list); default 1,p,2p")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=24)
    ap.add_argument("--rtol", default="1e-5")
    a = ap.parse_args()
    optimizers = a.optimizers.split(",")
    checks, names = [], []
    failed = 0
    configs = []
    for model in a.models.split(","):
        for p in [int(s) for s in a.stages.split(",")]:
            ms = ([int(m) for m in a.microbatches.split(",")]
                  if a.microbatches else [1, p, 2 * p])
            for m in ms:
                for method in a.methods.split(","):
                    if method not in METHODS:
                        sys.exit(f"async_sweep.py: unknown method {method}")
                    if method == "2bw" and m < p:
                        continue
                    usable = [o for o in optimizers
                              if not (model in NO_ADAPTIVE and o in ADAPTIVE)
                              and (method, o) not in REFUSED]
                    if a.each_optimizer:
                        configs += [(model, p, m, method, o) for o in usable]
                    elif usable:
                        configs.append((model, p, m, method,
                                        usable[len(configs) % len(usable)]))
    for model, p, m, method, opt in configs:
        name = f"{model}-p{p}-m{m}-{method}-{opt}"
        out = os.path.join(a.work, name)
        lr = lr_of(model, opt)
        flags, script, ref_flags = METHODS[method]
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
               "--plan", os.path.join(out, "plan.json"),
               "--optimizer", opt, "--lr", str(lr),
               "--rtol", a.rtol, "--saved", out + ".onnx"] + HYPER[opt]
        ref += flags if ref_flags is None else ref_flags
        checks.append((script, ref))
        names.append(name)
    # One reference process for the checks (importing torch is the slow
    # part); it stops at a failing check, so the rest run again after it.
    order = sorted(range(len(checks)), key=lambda j: checks[j][0])
    checks = [checks[j] for j in order]
    names = [names[j] for j in order]
    passed = 0
    i = 0
    while i < len(checks):
        # The run of checks from i that one reference script makes.
        script = checks[i][0]
        argv, n = [], 0
        for other, ref in checks[i:]:
            if other != script:
                break
            argv += (["--next"] if argv else []) + ref
            n += 1
        end = i + n
        p = subprocess.run([sys.executable, os.path.join(HERE, script)] + argv,
                           capture_output=True, text=True)
        lines = [l for l in p.stdout.splitlines() if l.startswith(("OK", "FAIL"))]
        # Two OK lines per configuration (losses, saved weights).
        while i < end:
            got, lines = lines[:2], lines[2:]
            if len(got) == 2 and all(l.startswith("OK") for l in got):
                passed += 1
                print(f"ok   {names[i]}")
                i += 1
                continue
            failed += 1
            why = next((l for l in got if l.startswith("FAIL")), None)
            why = why or (p.stderr.strip().splitlines() or ["no result"])[-1]
            print(f"FAIL {names[i]}: {why}")
            i += 1
            break
    print(f"async sweep: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
