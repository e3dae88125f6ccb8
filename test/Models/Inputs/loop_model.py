#!/usr/bin/env python3
"""An ONNX Loop over sequences, written by hand, and its reference.

    loop_model.py make OUT
        OUT/loop.onnx, OUT/loop.npz (x: 64x6 f32, y: 64 labels of 3), and
        refusals: OUT/loop_data_trips.onnx (the trip count a graph input),
        OUT/loop_data_cond.onnx (the body's condition from the data), and
        OUT/shadow.onnx (a body input named like an outer value used after
        the Loop, and a body initializer) and OUT/while.onnx (no trip count,
        the condition i + 1 < 3 from the iteration number); for import checks.
    loop_model.py check --onnx loop.onnx --data loop.npz --log L.jsonl
        --saved S.onnx --steps K --batch B --lr F [--ort]
        the logged losses and the saved weights equal PyTorch running the
        same math (SGD, step s on rows s*B..) within 1e-4; with --ort, the
        first logged loss also equals ONNX Runtime's on the initial model
        (run it with the Python that has onnxruntime).

The model: h = x W1; a Loop of 3 iterations carries acc (from h) and scans
one value per iteration: acc' = tanh(acc * scale[i]) + 0.1 h, scan_i =
ReduceSum(acc', axis 1); then the sequence operators: SplitToSequence(acc,
[2, 4], axis 1) = [a, b], SequenceInsert(that, SequenceAt(that, 0)) =
[a, b, a], ConcatFromSequence(axis 1) = z (B x 8), ConcatFromSequence of
[h[:, 0], h[:, 1]] with new_axis (B x 2), ConcatFromSequence of
SequenceErase(SequenceConstruct(a, b, a), 1) = [a, a] (B x 4); logits = [z, scans^T, those] W2 times
SequenceLength([a, b, a]) / 3; cross-entropy.
"""
import json
import os
import sys

import numpy as np

SCALES = [0.5, 1.0, 1.5]


def make(out):
    import onnx
    from onnx import TensorProto as T, helper as h, numpy_helper as nh
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((6, 6)) * 0.4).astype(np.float32)
    w2 = (rng.standard_normal((17, 3)) * 0.4).astype(np.float32)

    def c(name, value, dtype=np.int64):
        return h.make_node("Constant", [], [name], value=nh.from_array(np.array(value, dtype=dtype), name))

    def body(cond_from):
        nodes = [
            c("scales", SCALES, np.float32),
            h.make_node("Gather", ["scales", "i"], ["w"], axis=0),
            h.make_node("Mul", ["acc", "w"], ["aw"]),
            h.make_node("Tanh", ["aw"], ["t"]),
            c("tenth", 0.1, np.float32),
            h.make_node("Mul", ["h", "tenth"], ["hs"]),
            h.make_node("Add", ["t", "hs"], ["acc2"]),
            c("ax1", [1]),
            h.make_node("ReduceSum", ["acc2", "ax1"], ["s"], keepdims=0),
        ]
        if cond_from == "data":  # the condition from the values: no unrolling
            nodes += [h.make_node("ReduceSum", ["acc2"], ["tot"], keepdims=0),
                      c("zero", 0.0, np.float32),
                      h.make_node("Greater", ["tot", "zero"], ["cond_out"])]
        else:
            nodes += [h.make_node("Identity", ["cond"], ["cond_out"])]
        return h.make_graph(
            nodes, "body",
            [h.make_tensor_value_info("i", T.INT64, []),
             h.make_tensor_value_info("cond", T.BOOL, []),
             h.make_tensor_value_info("acc", T.FLOAT, [8, 6])],
            [h.make_tensor_value_info("cond_out", T.BOOL, []),
             h.make_tensor_value_info("acc2", T.FLOAT, [8, 6]),
             h.make_tensor_value_info("s", T.FLOAT, [8])])

    def model(name, trips_input=False, cond_from="const"):
        inputs = [h.make_tensor_value_info("x", T.FLOAT, [8, 6]),
                  h.make_tensor_value_info("y", T.INT64, [8])]
        nodes = [h.make_node("MatMul", ["x", "W1"], ["h"])]
        if trips_input:
            inputs.append(h.make_tensor_value_info("trips", T.INT64, []))
        else:
            nodes.append(c("trips", 3))
        nodes += [
            c("go", True, np.bool_),
            h.make_node("Loop", ["trips", "go", "h"], ["acc", "scans"], body=body(cond_from)),
            c("parts", [2, 4]),
            h.make_node("SplitToSequence", ["acc", "parts"], ["seq"], axis=1),
            c("zero_i", 0),
            h.make_node("SequenceAt", ["seq", "zero_i"], ["first"]),
            h.make_node("SequenceInsert", ["seq", "first"], ["seq3"]),
            h.make_node("ConcatFromSequence", ["seq3"], ["z"], axis=1),
            h.make_node("Transpose", ["scans"], ["scansT"], perm=[1, 0]),
            h.make_node("Slice", ["h", "s0", "s1", "sa"], ["h2"]),
            h.make_node("SplitToSequence", ["h2"], ["hseq"], axis=1, keepdims=0),
            h.make_node("ConcatFromSequence", ["hseq"], ["hn"], axis=1, new_axis=1),
            c("one_i", 1),
            h.make_node("SequenceAt", ["seq", "one_i"], ["second"]),
            h.make_node("SequenceConstruct", ["first", "second", "first"], ["triple"]),
            h.make_node("SequenceErase", ["triple", "one_i"], ["pair"]),
            h.make_node("ConcatFromSequence", ["pair"], ["pz"], axis=1),
            h.make_node("Concat", ["z", "scansT", "hn", "pz"], ["f"], axis=1),
            h.make_node("MatMul", ["f", "W2"], ["raw"]),
            # times SequenceLength(seq3) / 3 = 1
            h.make_node("SequenceLength", ["seq3"], ["len"]),
            h.make_node("Cast", ["len"], ["lenf"], to=T.FLOAT),
            c("third", 1.0 / 3.0, np.float32),
            h.make_node("Mul", ["lenf", "third"], ["one"]),
            h.make_node("Mul", ["raw", "one"], ["logits"]),
            h.make_node("SoftmaxCrossEntropyLoss", ["logits", "y"], ["loss"]),
        ]
        # The Slice's constants first.
        consts = [c("s0", [0]), c("s1", [2]), c("sa", [1])]
        g = h.make_graph(consts + nodes, name, inputs,
                         [h.make_tensor_value_info("loss", T.FLOAT, [])],
                         [nh.from_array(w1, "W1"), nh.from_array(w2, "W2")])
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.save(m, os.path.join(out, name + ".onnx"))

    # Import-only: a body whose input shadows the outer "x" (used again
    # after the Loop) and which has an initializer of its own.
    sb = h.make_graph(
        [h.make_node("Add", ["x", "k"], ["y"])], "shadow_body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
         h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
        [h.make_tensor_value_info("c", T.BOOL, []), h.make_tensor_value_info("y", T.FLOAT, [2, 3])],
        [nh.from_array(np.full((2, 3), 0.5, np.float32), "k")])
    def save_x_to_out(name, nodes):
        """A checked model of `nodes` from x (2x3) to out (2x3)."""
        g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                         [h.make_tensor_value_info("out", T.FLOAT, [2, 3])])
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(out, name + ".onnx"))

    save_x_to_out("shadow", [
        c("m", 2), c("t", True, np.bool_), h.make_node("Loop", ["m", "t", "x"], ["lo"], body=sb),
        h.make_node("Mul", ["x", "lo"], ["out"])])
    # Import-only: a while loop (no trip count) whose body computes its
    # condition from the iteration number, `i + 1 < 3 and not false`.
    wb = h.make_graph(
        [c("one", 1), h.make_node("Add", ["i", "one"], ["i1"]), c("three", 3),
         h.make_node("Less", ["i1", "three"], ["lt"]), c("no", False, np.bool_),
         h.make_node("Not", ["no"], ["yes"]), h.make_node("And", ["lt", "yes"], ["go_on"]),
         h.make_node("Tanh", ["x"], ["y"])], "while_body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
         h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
        [h.make_tensor_value_info("go_on", T.BOOL, []), h.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    save_x_to_out("while", [
        c("t", True, np.bool_), h.make_node("Loop", ["", "t", "x"], ["out"], body=wb)])
    model("loop")
    model("loop_data_trips", trips_input=True)
    model("loop_data_cond", cond_from="data")
    np.savez(os.path.join(out, "loop.npz"),
             x=rng.standard_normal((64, 6)).astype(np.float32),
             y=rng.integers(0, 3, 64).astype(np.int64))


def reference(w1, w2, x, y):
    import torch
    h = x @ w1
    acc, scans = h, []
    for s in SCALES:
        acc = torch.tanh(acc * s) + 0.1 * h
        scans.append(acc.sum(1))
    a, b = acc[:, :2], acc[:, 2:]
    z = torch.cat([a, b, a], 1)
    hn = torch.stack([h[:, 0], h[:, 1]], 1)
    f = torch.cat([z, torch.stack(scans, 0).t(), hn, torch.cat([a, a], 1)], 1)
    return torch.nn.functional.cross_entropy(f @ w2, y)


def check(argv):
    import argparse
    ap = argparse.ArgumentParser()
    for name in ("--onnx", "--data", "--log", "--saved"):
        ap.add_argument(name, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--ort", action="store_true")
    a = ap.parse_args(argv)
    with open(a.log) as f:
        losses = [json.loads(line)["loss"] for line in f if '"loss"' in line]
    data = np.load(a.data)
    if a.ort:
        import onnxruntime as ort
        s = ort.InferenceSession(a.onnx)
        want = float(s.run(None, {"x": data["x"][:a.batch], "y": data["y"][:a.batch]})[0])
        rel = abs(losses[0] - want) / abs(want)
        if rel > 1e-5:
            sys.exit(f"FAIL: step 0's loss {losses[0]} vs ONNX Runtime's {want}")
        print(f"OK: step 0's loss equals ONNX Runtime's ({want:.6f}, relative error {rel:.1e})")
        return
    import onnx
    import torch
    from onnx import numpy_helper as nh
    torch.set_num_threads(1)
    init = {t.name: torch.from_numpy(nh.to_array(t).copy()).double().requires_grad_()
            for t in onnx.load(a.onnx).graph.initializer}
    opt = torch.optim.SGD([init["W1"], init["W2"]], lr=a.lr)
    x, y = torch.from_numpy(data["x"]).double(), torch.from_numpy(data["y"])
    rows = x.shape[0]
    worst = 0.0
    for step in range(a.steps):
        idx = [(step * a.batch + i) % rows for i in range(a.batch)]
        opt.zero_grad()
        loss = reference(init["W1"], init["W2"], x[idx], y[idx])
        loss.backward()
        opt.step()
        rel = abs(losses[step] - float(loss)) / abs(float(loss))
        worst = max(worst, rel)
        if rel > 1e-4:
            sys.exit(f"FAIL: step {step}: loss {losses[step]} vs PyTorch {float(loss)}")
    print(f"OK: {a.steps} steps within 0.0001 of PyTorch (worst relative error {worst:.1e})")
    saved = {t.name: nh.to_array(t) for t in onnx.load(a.saved).graph.initializer}
    for name in ("W1", "W2"):
        ref = init[name].detach().numpy()
        err = np.abs(saved[name] - ref).max() / np.abs(ref).max()
        if err > 1e-4:
            sys.exit(f"FAIL: saved {name} differs from PyTorch's by {err:.1e}")
    print("OK: 2 saved weights within 0.0001 of PyTorch")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "make":
        make(sys.argv[2])
    elif len(sys.argv) >= 2 and sys.argv[1] == "check":
        check(sys.argv[2:])
    else:
        sys.exit(__doc__)
