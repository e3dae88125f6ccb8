#!/usr/bin/env python3
"""Gradient checks through compiled code, against central finite differences.

    check_grad_models.py DIR [--eps 5e-3] [--rtol 1e-2] [--atol 2e-3]
        (python3 with onnxruntime, numpy; pipe-compile/pipe-run on PATH)

For every model make_grad_models.py wrote: pipe-compile it for SGD with
lr = 1 (no momentum, no weight decay), run one step with pipe-run --save, and
recover the compiled gradient of each parameter as g = w0 - w1 (w1 read
from the saved ONNX). Then compare g, element by element, with central
finite differences (L(w + eps) - L(w - eps)) / (2 eps) of the loss that
onnxruntime computes (float32) from NAME.fd.onnx, where the parameters are
graph inputs: |g - fd| <= atol + rtol * |fd|. The tolerances cover float32
rounding of L over 2*eps; a wrong rule is off by O(|g|).

Prints one line per model and "N of M gradient checks pass"; exits non-zero
if any fails.
"""
import argparse
import concurrent.futures
import os
import struct
import subprocess
import sys

import numpy as np
import onnxruntime as ort


def varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def fields(buf):
    """Yields (field number, wire type, value) of one protobuf message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 2:
            size, i = varint(buf, i)
            value, i = buf[i:i + size], i + size
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value


def float_initializers(path):
    """The FLOAT initializers of an ONNX model (ModelProto.graph = 7,
    GraphProto.initializer = 5; TensorProto dims = 1, data_type = 2,
    float_data = 4, name = 8, raw_data = 9)."""
    with open(path, "rb") as f:
        model = f.read()
    out = {}
    for number, _, graph in fields(model):
        if number != 7:
            continue
        for gnum, _, tensor in fields(graph):
            if gnum != 5:
                continue
            dims, dtype, name, raw, floats = [], 1, "", None, []
            for tnum, wire, v in fields(tensor):
                if tnum == 1:
                    if wire == 2:
                        j = 0
                        while j < len(v):
                            d, j = varint(v, j)
                            dims.append(d)
                    else:
                        dims.append(v)
                elif tnum == 2:
                    dtype = v
                elif tnum == 4:
                    floats += (list(struct.unpack(f"<{len(v) // 4}f", v))
                               if wire == 2 else list(struct.unpack("<f", v)))
                elif tnum == 8:
                    name = v.decode()
                elif tnum == 9:
                    raw = v
            if dtype != 1:
                continue
            a = (np.frombuffer(raw, "<f4") if raw is not None
                 else np.array(floats, np.float32))
            out[name] = a.reshape(dims).copy()
    return out


def check(directory, name, a):
    base = os.path.join(directory, name)
    r = subprocess.run(["pipe-compile", base + ".onnx", "-o", base + ".out",
                        "--optimizer", "sgd", "--lr", "1"],
                       capture_output=True, text=True)
    if r.returncode:
        return 0, 1, f"{name}: FAIL: pipe-compile: {r.stderr.strip()}"
    r = subprocess.run(["pipe-run", base + ".out", "--data", base + ".npz",
                        "--steps", "1", "--no-shuffle", "--quiet", "--threads",
                        "1", "--save", base + ".trained.onnx"],
                       capture_output=True, text=True)
    if r.returncode:
        return 0, 1, f"{name}: FAIL: pipe-run: {r.stderr.strip()}"
    w0 = dict(np.load(base + ".params.npz"))
    w1 = float_initializers(base + ".trained.onnx")
    x = np.load(base + ".npz")["x"]
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(base + ".fd.onnx", opts,
                                providers=["CPUExecutionProvider"])

    def loss(params):
        return float(sess.run(None, {"x": x, **params})[0])

    worst, problems = 0.0, []
    for p, v0 in w0.items():
        if p not in w1:
            return 0, 1, f"{name}: FAIL: the saved model has no '{p}'"
        g = v0.astype(np.float64) - w1[p].astype(np.float64)
        fd = np.zeros_like(g)
        for i in np.ndindex(v0.shape):
            plus, minus = dict(w0), dict(w0)
            plus[p], minus[p] = v0.copy(), v0.copy()
            plus[p][i] += np.float32(a.eps)
            minus[p][i] -= np.float32(a.eps)
            # The step actually taken in float32.
            h = float(plus[p][i]) - float(minus[p][i])
            fd[i] = (loss(plus) - loss(minus)) / h
        err = np.abs(g - fd) - (a.atol + a.rtol * np.abs(fd))
        k = np.unravel_index(np.argmax(err), err.shape)
        worst = max(worst, float(np.max(np.abs(g - fd))))
        if err[k] > 0:
            problems.append(f"d/d{p}{[int(i) for i in k]}: compiled {g[k]:.6g}, "
                            f"finite differences {fd[k]:.6g}")
    if problems:
        return 0, 1, f"{name}: FAIL: " + "; ".join(problems)
    count = sum(v.size for v in w0.values())
    return 1, 1, (f"{name}: ok ({len(w0)} parameters, {count} elements, "
                  f"max |g - fd| {worst:.1e})")


def guarded(directory, name, a):
    try:
        return check(directory, name, a)
    except Exception as e:  # onnxruntime or file errors: a failed check
        return 0, 1, f"{name}: FAIL: {type(e).__name__}: {e}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--eps", type=float, default=5e-3)
    ap.add_argument("--rtol", type=float, default=1e-2)
    ap.add_argument("--atol", type=float, default=2e-3)
    a = ap.parse_args()
    names = sorted(f[:-5] for f in os.listdir(a.dir)
                   if f.endswith(".onnx") and not f.endswith((".fd.onnx", ".trained.onnx")))
    if not names:
        sys.exit("check_grad_models: no models in " + a.dir)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda n: guarded(a.dir, n, a), names))
    for _, _, line in results:
        print(line)
    passed = sum(r[0] for r in results)
    print(f"attempted {len(names)}, passed {passed}")
    print(f"{passed} of {len(names)} gradient checks pass")
    sys.exit(0 if passed == len(names) else 1)


if __name__ == "__main__":
    main()
