#!/usr/bin/env python3
"""Sweeps pipe-compile --stages over models x stages x micro-batches x
schedules x partition strategies and compares every configuration with the
one-device run of the same model (each step's loss within --rtol relative,
and the saved weights), printing one line per configuration and a closing
"N passed, N failed" count.

usage: pipeline_sweep.py --work DIR --models mlp,cnn,transformer
          [--stages 2,4] [--microbatches 1,4,8] [--schedules gpipe,1f1b]
          [--partitions balanced,dp,layers] [--steps 20] [--batch 8]
Needs pipe-compile and pipe-run on PATH and the models and data made by
examples/models.py in DIR (<model>.onnx, <model>.npz).
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LR = {"mlp": "0.1", "cnn": "0.05", "transformer": "0.1"}


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, (p.stdout + p.stderr).strip()


def train(work, model, out, batch, steps, extra):
    rc, msg = run(["pipe-compile", os.path.join(work, model + ".onnx"), "-o", out,
                   "--batch", str(batch), "--optimizer", "sgd", "--lr", LR[model]]
                  + extra)
    if rc:
        return "compile: " + msg.splitlines()[-1] if msg else "compile failed"
    rc, msg = run(["pipe-run", out, "--data", os.path.join(work, model + ".npz"),
                   "--steps", str(steps), "--no-shuffle", "--quiet",
                   "--log", out + ".jsonl", "--save", out + ".onnx"])
    if rc:
        return "run: " + (msg.splitlines()[-1] if msg else "failed")
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--models", default="mlp,cnn,transformer")
    ap.add_argument("--stages", default="2,4")
    ap.add_argument("--microbatches", default="1,4,8")
    ap.add_argument("--schedules", default="gpipe,1f1b")
    ap.add_argument("--partitions", default="balanced,dp,layers")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=8)
    a = ap.parse_args()
    passed = failed = 0
    for model in a.models.split(","):
        ref = os.path.join(a.work, model + "-one")
        err = train(a.work, model, ref, a.batch, a.steps, [])
        if err:
            print(f"FAIL {model} one device: {err}")
            failed += 1
            continue
        for partition in a.partitions.split(","):
            # `layers` needs a repeated block: only the transformer has one,
            # with 2 blocks, so at most 2 stages (more is a clear error,
            # tested in test/Transforms/pipe-assign-stages-models.test).
            if partition == "layers" and model != "transformer":
                continue
            for stages in a.stages.split(","):
                if partition == "layers" and int(stages) > 2:
                    continue
                for m in a.microbatches.split(","):
                    for sched in a.schedules.split(","):
                        name = f"{model}-{partition}-s{stages}-m{m}-{sched}"
                        out = os.path.join(a.work, name)
                        err = train(a.work, model, out, a.batch, a.steps,
                                    ["--stages", stages, "--microbatches", m,
                                     "--schedule", sched, "--partition", partition])
                        if not err:
                            rc, msg = run([sys.executable,
                                           os.path.join(HERE, "pipeline_compare.py"),
                                           "--ref", ref + ".jsonl", "--got", out + ".jsonl",
                                           "--steps", str(a.steps),
                                           "--ref-onnx", ref + ".onnx",
                                           "--got-onnx", out + ".onnx"])
                            if rc or "FAIL" in msg:
                                err = msg.splitlines()[0] if msg else "compare failed"
                        if err:
                            failed += 1
                            print(f"FAIL {name}: {err}")
                        else:
                            passed += 1
                            print(f"ok   {name}")
    print(f"pipeline sweep: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
