#!/usr/bin/env python3
"""Checks a model written by `pipe-run --save` in onnxruntime.

    ort_step_loss.py --model trained.onnx --data D.npz --batch B --step K
        --log steps.jsonl [--rtol 1e-4]

`pipe-run --steps K --save trained.onnx` holds the weights after K updates,
which are exactly the weights step K of a longer run (same program, data,
--no-shuffle) evaluates its loss with, before its own update. So
onnxruntime's loss of trained.onnx on step K's mini-batch (rows K*B ..
K*B+B-1, wrapping) must equal the loss that run logged for step K. Run with
the python3 that has onnxruntime.
"""
import argparse
import json
import sys

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--step", type=int, required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--rtol", type=float, default=1e-4)
    a = ap.parse_args()

    with open(a.log) as f:
        logged = {e["step"]: e["loss"] for e in map(json.loads, f) if e}
    if a.step not in logged:
        sys.exit(f"FAIL: {a.log} has no step {a.step}")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(a.model, opts, providers=["CPUExecutionProvider"])
    data = np.load(a.data)
    feeds = {}
    for i in sess.get_inputs():
        x = data[i.name]
        idx = [(a.step * a.batch + j) % x.shape[0] for j in range(a.batch)]
        feeds[i.name] = x[idx]
    want = float(sess.run(None, feeds)[0])
    got = logged[a.step]
    rel = abs(got - want) / max(abs(want), 1e-12)
    if rel > a.rtol:
        sys.exit(f"FAIL: onnxruntime's loss {want} on the saved model vs "
                 f"pipe-run's step {a.step} loss {got} (relative {rel:.2e})")
    print(f"OK: onnxruntime loss of the saved model on step {a.step}'s batch "
          f"matches pipe-run (relative {rel:.1e})")


if __name__ == "__main__":
    main()
