#!/usr/bin/env python3
"""Unit checks of SpecTrain's and PipeMare's formulas on compiled programs.

A linear model with constant gradients makes each formula observable in the
weights a run leaves (its checkpoint and --save):

    h0 = (x + b0) * k0 (nodes a0, s0), h1 = (h0 + b1) * k1 (a1, s1),
    h2 = h1 + b2 (a2), loss = ReduceMean(h2 * c)

so d loss / d b_s = g_s = c/4 * k_s * ... * k_1 (g_2 = c/4, g_1 = k1*c/4,
g_0 = k0*k1*c/4) on every micro-batch whatever the weights and the data:
plain SGD moves each b_s by -lr*g_s per update. Split after s0 and s1, stage
s holds b_s and has the delay tau_s = 2 - s. (The constant factors keep a
stage's gradient its own: a gradient that passes a whole stage unchanged,
as through h0 + b1 alone, is not split yet.)

    async_formulas.py make --out DIR
        writes DIR/linear.onnx and DIR/linear.npz (x: 48 x 4)
    async_formulas.py spectrain --ckpt CKPT --saved S.onnx --lr LR --updates N
        SpecTrain with sgd, checkpoint after the last step (before the drain)
        and the weights after the drain: the weights stage s predicted for
        its last forward, slot 1 ("b<s>@v1"), are W(N-1), the weights its
        backward then used, i.e. the saved W(N) plus lr*g_s; and the
        predicted gap is tau_s (W(N-1-tau_s) is what the stage held then).
    async_formulas.py t1 --saved S1.onnx,S2.onnx,... --lr LR --warmup K
        PipeMare T1 with sgd, M = 1: S<n> saved after n steps (n updates);
        the learning rate of update k, (W(k) - W(k+1)) / g_s, is lr/tau_s
        at k = 0, lr for k >= K and log-linear between:
        lr * tau_s^-(1 - k/K).
    async_formulas.py t2 --ckpt CKPT --lr LR --gamma G
        PipeMare T2 with sgd: after n updates of constant change
        c_u = -lr*g_s, delta_s = (1 - G^n) * c_u (n: the rank's update
        counter "step" in the checkpoint); tau_s = 0 keeps no delta.
Prints "ok ..." / "FAIL ..." lines and exits non-zero on a failure.
"""
import argparse
import os
import struct
import sys

import numpy as np

C = np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32)
K = [np.float32(0.5), np.float32(-2.0)]
GRADS = [K[0] * K[1] * C / 4.0, K[1] * C / 4.0, C / 4.0]
B0 = [np.array([0.1, 0.2, -0.3, 0.4], dtype=np.float32),
      np.array([-0.5, 0.25, 0.0, 1.0], dtype=np.float32),
      np.array([0.3, -0.1, 0.7, -0.2], dtype=np.float32)]
problems = []


def report(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        problems.append(what)


def make(out):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    os.makedirs(out, exist_ok=True)
    nodes = [helper.make_node("Constant", [], ["c"], name="c",
                              value=numpy_helper.from_array(C, "c")),
             helper.make_node("Constant", [], ["k0"], name="k0",
                              value=numpy_helper.from_array(np.array(K[0]), "k0")),
             helper.make_node("Constant", [], ["k1"], name="k1",
                              value=numpy_helper.from_array(np.array(K[1]), "k1")),
             helper.make_node("Add", ["x", "b0"], ["a0"], name="a0"),
             helper.make_node("Mul", ["a0", "k0"], ["h0"], name="s0"),
             helper.make_node("Add", ["h0", "b1"], ["a1"], name="a1"),
             helper.make_node("Mul", ["a1", "k1"], ["h1"], name="s1"),
             helper.make_node("Add", ["h1", "b2"], ["h2"], name="a2"),
             helper.make_node("Mul", ["h2", "c"], ["hc"], name="scale"),
             helper.make_node("ReduceMean", ["hc"], ["loss"], name="mean",
                              keepdims=0)]
    inits = [numpy_helper.from_array(b, f"b{s}") for s, b in enumerate(B0)]
    graph = helper.make_graph(
        nodes, "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, "linear.onnx"))
    rng = np.random.default_rng(3)
    np.savez(os.path.join(out, "linear.npz"),
             x=rng.standard_normal((48, 4)).astype(np.float32))
    print(f"wrote {out}/linear.onnx and linear.npz")


def read_ckpt(path):
    """{name: array} of a pipert checkpoint (pipert_checkpoint.h)."""
    dtypes = {1: np.float32, 7: np.int64, 9: np.bool_, 6: np.int32}
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"PIPECKPT":
        sys.exit(f"{path}: not a pipert checkpoint")
    _, count = struct.unpack_from("<II", data, 8)
    pos = 8 + 8 + 16
    tensors = {}
    for _ in range(count):
        (n,) = struct.unpack_from("<I", data, pos)
        pos += 4
        name = data[pos:pos + n].decode()
        pos += n
        dtype, ndim = struct.unpack_from("<II", data, pos)
        pos += 8
        dims = struct.unpack_from(f"<{ndim}q", data, pos)
        pos += 8 * ndim
        (nbytes,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        tensors[name] = np.frombuffer(data[pos:pos + nbytes],
                                      dtype=dtypes[dtype]).reshape(dims)
        pos += nbytes
    return tensors


def read_ckpts(ckpt):
    """Every rank's tensors of the committed checkpoint (LATEST's step)."""
    latest = os.path.join(ckpt, "LATEST")
    if os.path.exists(latest):
        ckpt = os.path.join(ckpt, open(latest).read().strip())
    merged = {}
    for r in range(3):
        for name, value in read_ckpt(os.path.join(ckpt, f"rank-{r}.ckpt")).items():
            merged[f"{r}:{name}"] = value
    return merged


def saved_weights(path):
    import onnx
    from onnx import numpy_helper
    return {i.name: numpy_helper.to_array(i)
            for i in onnx.load(path).graph.initializer}


def close(a, b, tol=1e-6):
    return np.allclose(a, b, rtol=tol, atol=tol)


def spectrain(a):
    ck = read_ckpts(a.ckpt)
    saved = saved_weights(a.saved)
    n = a.updates
    for s in range(2):  # the last stage predicts nothing (tau = 0)
        tau = 2 - s
        pred = ck[f"{s}:b{s}@v1"]
        reached = saved[f"b{s}"] + a.lr * GRADS[s]  # W(n-1) = W(n) + lr*g
        report(close(pred, reached),
               f"spectrain stage {s}: predicted weights of the last forward == "
               f"the weights its backward used, W({n - 1}) "
               f"(max diff {np.abs(pred - reached).max():.1e})")
        closed = B0[s] - (n - 1) * a.lr * GRADS[s]
        report(close(pred, closed, 1e-5),
               f"spectrain stage {s}: W({n - 1 - tau}) - {tau}*lr*v == "
               f"W(0) - {n - 1}*lr*g")
    report(f"2:b2@v1" not in ck, "spectrain stage 2 (tau 0) keeps one version")


def t1(a):
    files = a.saved.split(",")
    weights = [[B0[s]] + [saved_weights(f)[f"b{s}"] for f in files]
               for s in range(3)]
    for s in range(3):
        tau = 2 - s
        for k in range(len(files)):
            rate = float(np.mean((weights[s][k] - weights[s][k + 1]) / GRADS[s]))
            want = a.lr * (tau ** -(1 - min(k / a.warmup, 1.0)) if tau >= 1 else 1.0)
            report(abs(rate - want) <= 1e-4 * want,
                   f"pipemare T1 stage {s} (tau {tau}) update {k}: lr {rate:.6f} "
                   f"== {want:.6f}")


def t2(a):
    ck = read_ckpts(a.ckpt)
    for s in range(3):
        tau = 2 - s
        if tau == 0:
            report(f"{s}:b{s}.delta" not in ck,
                   f"pipemare T2 stage {s} (tau 0) keeps no delta")
            continue
        n = int(ck[f"{s}:step"])
        delta = ck[f"{s}:b{s}.delta"]
        want = (1 - a.gamma ** n) * (-a.lr * GRADS[s])
        report(n > 0 and close(delta, want),
               f"pipemare T2 stage {s}: delta after {n} updates == "
               f"(1 - {a.gamma}^{n}) * c (max diff {np.abs(delta - want).max():.1e})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["make", "spectrain", "t1", "t2"])
    ap.add_argument("--out")
    ap.add_argument("--ckpt")
    ap.add_argument("--saved")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--updates", type=int)
    ap.add_argument("--warmup", type=int)
    ap.add_argument("--gamma", type=float)
    a = ap.parse_args()
    if a.what == "make":
        make(a.out)
        return 0
    {"spectrain": spectrain, "t1": t1, "t2": t2}[a.what](a)
    print(f"{a.what}: {'FAIL' if problems else 'OK'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
