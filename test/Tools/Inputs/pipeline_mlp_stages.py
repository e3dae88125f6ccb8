#!/usr/bin/env python3
"""Writes the pipe.stage functions of the MLP of examples/models.py
(fc1+relu, fc2+tanh, fc3, cross-entropy), split into 2, 3 or 4 stages, for
micro-batches of B/M rows, as pipe-split-stages + pipe-microbatch would: the
input of pipe-schedule (attributes pipe.param / pipe.input / pipe.name /
pipe.grad / pipe.loss). The gradient seed of the loss is 1/M, so that the
summed micro-batch gradients are the gradient of the mini-batch mean.

    pipeline_mlp_stages.py --stages S --batch B --microbatches M > stages.mlir
        [--inputs 32 --hidden 64 --classes 10]   (other widths: bench/)

Stages: 2 = [fc1 fc2 | fc3 loss], 3 = [fc1 | fc2 | fc3 loss],
4 = [fc1 | fc2 | fc3 | loss] (the last stage has no weights).
"""
import argparse

p = argparse.ArgumentParser()
p.add_argument("--inputs", type=int, default=32)
p.add_argument("--hidden", type=int, default=64)
p.add_argument("--classes", type=int, default=10)
p.add_argument("--stages", type=int, required=True)
p.add_argument("--batch", type=int, required=True)
p.add_argument("--microbatches", type=int, default=1)
a = p.parse_args()
IN, HID, CLS = a.inputs, a.hidden, a.classes
assert a.batch % a.microbatches == 0, "the batch must split into equal micro-batches"
b = a.batch // a.microbatches
groups = {2: [["fc1", "fc2"], ["fc3", "loss"]],
          3: [["fc1"], ["fc2"], ["fc3", "loss"]],
          4: [["fc1"], ["fc2"], ["fc3"], ["loss"]]}[a.stages]

T = {"x": f"tensor<{b}x{IN}xf32>", "y": f"tensor<{b}xi64>",
     "z1": f"tensor<{b}x{HID}xf32>", "h1": f"tensor<{b}x{HID}xf32>",
     "z2": f"tensor<{b}x{HID}xf32>", "h2": f"tensor<{b}x{HID}xf32>",
     "logits": f"tensor<{b}x{CLS}xf32>", "log_prob": f"tensor<{b}x{CLS}xf32>",
     "loss": "tensor<f32>"}
PARAMS = {"fc1": [("fc1.weight", f"tensor<{HID}x{IN}xf32>"), ("fc1.bias", f"tensor<{HID}xf32>")],
          "fc2": [("fc2.weight", f"tensor<{HID}x{HID}xf32>"), ("fc2.bias", f"tensor<{HID}xf32>")],
          "fc3": [("fc3.weight", f"tensor<{CLS}x{HID}xf32>"), ("fc3.bias", f"tensor<{CLS}xf32>")],
          "loss": []}
# unit: (input activation, output activation, forward values its backward reads)
UNITS = {"fc1": ("x", "h1", ["x", "z1"]), "fc2": ("h1", "h2", ["h1", "h2"]),
         "fc3": ("h2", "logits", ["h2"]), "loss": ("logits", "loss", ["log_prob", "y"])}


def pname(n):
    return "%" + n.replace(".", "_")


def forward_body(unit):
    w, bias = (pname(n) for n, _ in PARAMS[unit]) if PARAMS[unit] else (None, None)
    if unit == "fc1":
        return [f'%z1 = "onnx.Gemm"(%x, {w}, {bias}) {{transB = 1 : i64}} : ({T["x"]}, {PARAMS["fc1"][0][1]}, {PARAMS["fc1"][1][1]}) -> {T["z1"]}',
                f'%h1 = "onnx.Relu"(%z1) : ({T["z1"]}) -> {T["h1"]}']
    if unit == "fc2":
        return [f'%z2 = "onnx.Gemm"(%h1, {w}, {bias}) {{transB = 1 : i64}} : ({T["h1"]}, {PARAMS["fc2"][0][1]}, {PARAMS["fc2"][1][1]}) -> {T["z2"]}',
                f'%h2 = "onnx.Tanh"(%z2) : ({T["z2"]}) -> {T["h2"]}']
    if unit == "fc3":
        return [f'%logits = "onnx.Gemm"(%h2, {w}, {bias}) {{transB = 1 : i64}} : ({T["h2"]}, {PARAMS["fc3"][0][1]}, {PARAMS["fc3"][1][1]}) -> {T["logits"]}']
    return ['%none_l = "onnx.NoValue"() : () -> none',
            f'%loss, %log_prob = "onnx.SoftmaxCrossEntropyLoss"(%logits, %y, %none_l) {{ignore_index = -100 : i64}} : ({T["logits"]}, {T["y"]}, none) -> ({T["loss"]}, {T["log_prob"]})']


def backward_body(unit, first):
    """Lines computing d<input> (unless `first`) and the weight gradients of
    `unit` from d<output>; returns (lines, weight grad names)."""
    g = f"tensor<{b}x{HID}xf32>"
    if unit == "loss":
        return ([f'%seed = "onnx.Constant"() {{value = dense<{1.0 / a.microbatches:.9e}> : tensor<f32>}} : () -> tensor<f32>',
                 '%none_lg = "onnx.NoValue"() : () -> none',
                 f'%d_logits = "onnx.SoftmaxCrossEntropyLossGrad"(%seed, %log_prob, %y, %none_lg) {{ignore_index = -100 : i64}} : (tensor<f32>, {T["log_prob"]}, {T["y"]}, none) -> {T["logits"]}'], [])
    if unit == "fc3":
        lines = [f'%none3 = "onnx.NoValue"() : () -> none',
                 f'%d_fc3_weight = "onnx.Gemm"(%d_logits, %h2, %none3) {{transA = 1 : i64}} : ({T["logits"]}, {T["h2"]}, none) -> {PARAMS["fc3"][0][1]}',
                 f'%s3 = "onnx.Constant"() {{value = dense<{CLS}> : tensor<1xi64>}} : () -> tensor<1xi64>',
                 f'%d_fc3_bias = "onnx.ReduceToShape"(%d_logits, %s3) : ({T["logits"]}, tensor<1xi64>) -> {PARAMS["fc3"][1][1]}']
        if not first:
            lines.append(f'%d_h2 = "onnx.Gemm"(%d_logits, %fc3_weight, %none3) : ({T["logits"]}, {PARAMS["fc3"][0][1]}, none) -> {g}')
        return lines, ["%d_fc3_weight", "%d_fc3_bias"]
    if unit == "fc2":
        lines = [f'%dz2 = "onnx.TanhGrad"(%h2, %d_h2) : ({g}, {g}) -> {g}',
                 f'%none2 = "onnx.NoValue"() : () -> none',
                 f'%d_fc2_weight = "onnx.Gemm"(%dz2, %h1, %none2) {{transA = 1 : i64}} : ({g}, {g}, none) -> {PARAMS["fc2"][0][1]}',
                 f'%s2 = "onnx.Constant"() {{value = dense<{HID}> : tensor<1xi64>}} : () -> tensor<1xi64>',
                 f'%d_fc2_bias = "onnx.ReduceToShape"(%dz2, %s2) : ({g}, tensor<1xi64>) -> {PARAMS["fc2"][1][1]}']
        if not first:
            lines.append(f'%d_h1 = "onnx.Gemm"(%dz2, %fc2_weight, %none2) : ({g}, {PARAMS["fc2"][0][1]}, none) -> {g}')
        return lines, ["%d_fc2_weight", "%d_fc2_bias"]
    lines = [f'%dz1 = "onnx.ReluGrad"(%z1, %d_h1) : ({g}, {g}) -> {g}',
             f'%none1 = "onnx.NoValue"() : () -> none',
             f'%d_fc1_weight = "onnx.Gemm"(%dz1, %x, %none1) {{transA = 1 : i64}} : ({g}, {T["x"]}, none) -> {PARAMS["fc1"][0][1]}',
             f'%s1 = "onnx.Constant"() {{value = dense<{HID}> : tensor<1xi64>}} : () -> tensor<1xi64>',
             f'%d_fc1_bias = "onnx.ReduceToShape"(%dz1, %s1) : ({g}, tensor<1xi64>) -> {PARAMS["fc1"][1][1]}']
    return lines, ["%d_fc1_weight", "%d_fc1_bias"]


def attr_for(name):
    return f'pipe.input = "{name}"' if name in ("x", "y") else f'pipe.name = "{name}"'


out = []
for s, units in enumerate(groups):
    last = s == len(groups) - 1
    params = [pp for u in units for pp in PARAMS[u]]
    inp = UNITS[units[0]][0]
    outp = UNITS[units[-1]][1]
    # Forward.
    args = [f'{pname(n)}: {t} {{pipe.param = "{n}"}}' for n, t in params]
    args.append(f'%{inp}: {T[inp]} {{{attr_for(inp)}}}')
    if "loss" in units:
        args.append(f'%y: {T["y"]} {{pipe.input = "y"}}')
    body = [l for u in units for l in forward_body(u)]
    produced = []
    for u in units:
        produced += {"fc1": ["z1", "h1"], "fc2": ["z2", "h2"], "fc3": ["logits"],
                     "loss": ["loss", "log_prob"]}[u]
    needed = [v for u in units for v in UNITS[u][2]]
    results = []
    if "loss" in units:
        results.append(("loss", "{pipe.loss}"))
    elif outp not in needed:
        results.append((outp, f'{{pipe.name = "{outp}"}}'))
    for v in needed:
        if v in produced and v != "loss" and all(r[0] != v for r in results):
            results.append((v, f'{{pipe.name = "{v}"}}'))
    if not last and all(r[0] != outp for r in results):
        results.append((outp, f'{{pipe.name = "{outp}"}}'))
    np = len(params)
    out.append(f'pipe.stage @s{s}_fwd forward stage {s} params {np} ({", ".join(args)}) -> '
               f'({", ".join(f"{T[r]} {a_}" for r, a_ in results)}) {{')
    out += ["  " + l for l in body]
    out.append(f'  pipe.return {", ".join("%" + r for r, _ in results)} : {", ".join(T[r] for r, _ in results)}')
    out.append("}")
    # Backward.
    bargs = [f'{pname(n)}: {t}' for n, t in params]
    for v in dict.fromkeys(needed):
        bargs.append(f'%{v}: {T[v]} {{{attr_for(v)}}}')
    if not last:
        bargs.append(f'%d_{outp}: {T[outp]} {{pipe.grad = "{outp}"}}')
    lines, wgrads = [], []
    for i, u in enumerate(reversed(units)):
        first = s == 0 and u == units[0]
        l, w = backward_body(u, first)
        lines += l
        wgrads = w + wgrads
    bres, btypes = [], []
    if s > 0:
        bres.append((f"%d_{inp}", T[inp], f'{{pipe.grad = "{inp}"}}'))
    for (n, t), gname in zip(params, wgrads):
        bres.append((gname, t, ""))
    rtypes = ", ".join(f"{t} {a_}".strip() for _, t, a_ in bres)
    out.append(f'pipe.stage @s{s}_bwd backward stage {s} params {np} ({", ".join(bargs)}) -> ({rtypes}) {{')
    out += ["  " + l for l in lines]
    if bres:
        out.append(f'  pipe.return {", ".join(r for r, _, _ in bres)} : {", ".join(t for _, t, _ in bres)}')
    else:
        out.append("  pipe.return")
    out.append("}")
print("\n".join(out))
