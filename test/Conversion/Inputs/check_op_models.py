#!/usr/bin/env python3
"""Compiles every model make_op_models.py wrote (pipe-compile --forward-only),
runs it for one step (pipe-run) and compares the reported loss with
onnxruntime's on the same model and data.

    check_op_models.py DIR [--rtol 1e-5]   (python3 with onnxruntime, numpy;
                                            pipe-compile/pipe-run on PATH)

Prints one line per model and exits non-zero if any fails.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort


def check(directory, name, rtol):
    model = os.path.join(directory, name + ".onnx")
    data = os.path.join(directory, name + ".npz")
    out = os.path.join(directory, name + ".out")
    log = os.path.join(directory, name + ".jsonl")
    r = subprocess.run(["pipe-compile", model, "-o", out, "--forward-only"],
                       capture_output=True, text=True)
    if r.returncode:
        return False, f"{name}: pipe-compile failed: {r.stderr.strip()}"
    r = subprocess.run(["pipe-run", out, "--data", data, "--steps", "1",
                        "--no-shuffle", "--quiet", "--log", log],
                       capture_output=True, text=True)
    if r.returncode:
        return False, f"{name}: pipe-run failed: {r.stderr.strip()}"
    with open(log) as f:
        got = json.loads(f.readline())["loss"]
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    want = float(sess.run(None, {"x": np.load(data)["x"]})[0])
    err = abs(got - want) / max(abs(want), 1e-6)
    status = err <= rtol
    return status, (f"{name}: {'ok' if status else 'FAIL'} "
                    f"pipec {got:.7g} onnxruntime {want:.7g} (rel {err:.1e})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--rtol", type=float, default=1e-5)
    a = ap.parse_args()
    names = sorted(f[:-5] for f in os.listdir(a.dir) if f.endswith(".onnx"))
    if not names:
        sys.exit("check_op_models: no models in " + a.dir)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda n: check(a.dir, n, a.rtol), names))
    for _, line in results:
        print(line)
    failed = sum(not ok for ok, _ in results)
    print(f"{len(names) - failed} of {len(names)} ops match onnxruntime")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
