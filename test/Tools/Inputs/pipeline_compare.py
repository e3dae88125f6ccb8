#!/usr/bin/env python3
"""Compares a pipeline-parallel run with the one-device run of the same model:
the loss of every step (JSON lines logs, within --rtol relative) and, with
--ref-onnx/--got-onnx, every initializer of the saved models (within --rtol
relative to the largest magnitude of the tensor, plus --atol).

    pipeline_compare.py --ref one.jsonl --got pipe.jsonl --steps 20
        [--ref-onnx one.onnx --got-onnx pipe.onnx] [--rtol 1e-5]

Prints "OK: <n> steps ..." or "FAIL: ..." lines and exits 1 on a mismatch.
"""
import argparse
import json
import sys

p = argparse.ArgumentParser()
p.add_argument("--ref", required=True)
p.add_argument("--got", required=True)
p.add_argument("--steps", type=int, required=True)
p.add_argument("--rtol", type=float, default=1e-5)
p.add_argument("--atol", type=float, default=1e-7)
p.add_argument("--ref-onnx")
p.add_argument("--got-onnx")
a = p.parse_args()


def losses(path):
    with open(path) as f:
        return {r["step"]: r["loss"] for r in map(json.loads, filter(str.strip, f))}


ref, got = losses(a.ref), losses(a.got)
bad = 0
for s in range(a.steps):
    if s not in ref or s not in got:
        print(f"FAIL: step {s} missing ({'ref' if s not in ref else 'pipeline'} log)")
        bad += 1
        continue
    if abs(ref[s] - got[s]) > a.rtol * abs(ref[s]) + a.atol:
        print(f"FAIL: step {s}: loss {got[s]!r} vs one device {ref[s]!r}")
        bad += 1
if len(got) != a.steps:
    print(f"FAIL: the pipeline log has {len(got)} steps, expected {a.steps}")
    bad += 1
if not bad:
    worst = max(abs(ref[s] - got[s]) / abs(ref[s]) for s in range(a.steps))
    print(f"OK: {a.steps} steps, losses within {a.rtol} relative (worst {worst:.2e})")

if a.ref_onnx:
    import numpy as np
    import onnx
    from onnx import numpy_helper

    def weights(path):
        return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}

    rw, gw = weights(a.ref_onnx), weights(a.got_onnx)
    if set(rw) != set(gw):
        print(f"FAIL: initializers differ: {sorted(set(rw) ^ set(gw))}")
        bad += 1
    worst = 0.0
    for n in sorted(rw):
        if n not in gw:
            continue
        scale = float(np.max(np.abs(rw[n]))) if rw[n].size else 0.0
        err = float(np.max(np.abs(rw[n].astype(np.float64) - gw[n]))) if rw[n].size else 0.0
        worst = max(worst, err / (scale + 1e-30))
        if err > a.rtol * scale + a.atol:
            print(f"FAIL: weight {n}: max difference {err:.3e} (largest magnitude {scale:.3e})")
            bad += 1
    if not bad:
        print(f"OK: {len(rw)} saved weights within {a.rtol} relative (worst {worst:.2e})")
sys.exit(1 if bad else 0)
