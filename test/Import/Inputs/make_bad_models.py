#!/usr/bin/env python3
"""Writes small malformed or unsupported ONNX models into DIR for errors.test."""
import os
import sys

import onnx
from onnx import TensorProto, helper

out = sys.argv[1]
F = TensorProto.FLOAT


def save(name, nodes, inputs, outputs, opset=17, inits=(), check=True,
         domains=()):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    imports = [helper.make_opsetid("", opset)] + [
        helper.make_opsetid(d, 1) for d in domains]
    m = helper.make_model(g, opset_imports=imports)
    m.ir_version = 8
    if check:
        onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, name + ".onnx"))


x = helper.make_tensor_value_info("x", F, [2, 4])
y = helper.make_tensor_value_info("y", F, [2, 4])
save("good", [helper.make_node("Relu", ["x"], ["y"], name="r")], [x], [y])
save("unsupported_op", [helper.make_node("RNN", ["x", "x", "x"], ["y"],
                                         name="my_rnn")],
     [x], [y], check=False)
save("bad_lstm", [helper.make_node("LSTM", ["x", "x", "x"], ["y"], hidden_size=2,
                                   name="bad_lstm")],
     [x], [y], check=False)
# ONNX's Attention (opset 23): pipec fuses attention itself and refuses it.
q3 = helper.make_tensor_value_info("q", F, [1, 2, 4])
save("attention_op", [helper.make_node("Attention", ["q", "q", "q"], ["y"], q_num_heads=2,
                                       kv_num_heads=2, name="att")],
     [q3], [helper.make_tensor_value_info("y", F, [1, 2, 4])], opset=21, check=False)
save("custom_domain", [helper.make_node("Foo", ["x"], ["y"], name="custom",
                                        domain="com.example")],
     [x], [y], check=False, domains=["com.example"])
save("old_opset", [helper.make_node("Reshape", ["x"], ["y"], shape=[2, 4])],
     [x], [y], opset=3, check=False)
save("future_opset", [helper.make_node("Relu", ["x"], ["y"])], [x], [y],
     opset=99, check=False)
# Two nodes write the same output: the checker (SSA) rejects it.
save("checker", [helper.make_node("Relu", ["x"], ["y"]),
                 helper.make_node("Relu", ["x"], ["y"])], [x], [y], check=False)
w = helper.make_tensor("w", F, [5, 3], [0.0] * 15)
save("bad_shapes", [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
     [x], [helper.make_tensor_value_info("y", F, [2, 3])], inits=[w], check=False)
save("unsorted", [helper.make_node("Relu", ["t"], ["y"], name="second"),
                  helper.make_node("Relu", ["x"], ["t"], name="first")],
     [x], [y], opset=18, check=False)
s = helper.make_tensor_value_info("s", TensorProto.STRING, [2])
save("string_input", [helper.make_node("Identity", ["s"], ["y"])], [s],
     [helper.make_tensor_value_info("y", TensorProto.STRING, [2])], check=False)
b = helper.make_tensor("b", F, [4, 4], [0.0] * 16)
save("bad_attr", [helper.make_node("Gemm", ["x", "b"], ["y"], name="g",
                                   bogus=3)], [x], [y], inits=[b], opset=18,
     check=False)
# Issue 15: attribute values the dialect rejects with a one-line error.
pads = helper.make_tensor("pads", TensorProto.INT64, [4], [0, 1, 0, 1])
save("pad_wrap", [helper.make_node("Pad", ["x", "pads"], ["y"], name="p", mode="wrap")],
     [x], [helper.make_tensor_value_info("y", F, [2, 6])], opset=19, inits=[pads],
     check=False)
save("gelu_fast", [helper.make_node("Gelu", ["x"], ["y"], name="g", approximate="fast")],
     [x], [y], opset=20, check=False)
save("mod_float", [helper.make_node("Mod", ["x", "x"], ["y"], name="m")], [x], [y],
     check=False)
# Einsum forms pipec does not decompose, and bad ConvTranspose / Resize.
save("einsum_three", [helper.make_node("Einsum", ["x", "x", "x"], ["y"], name="e3",
                                       equation="ij,ij,ij->ij")], [x], [y], opset=12,
     check=False)
save("einsum_broadcast", [helper.make_node("Einsum", ["x", "v"], ["y"], name="eb",
                                           equation="ij,ij->ij")],
     [x, helper.make_tensor_value_info("v", F, [1, 4])], [y], opset=12, check=False)
x4 = helper.make_tensor_value_info("x4", F, [1, 2, 3, 3])
wt = helper.make_tensor("wt", F, [2, 1, 3, 3], [0.0] * 18)
save("convtranspose_outpad", [helper.make_node("ConvTranspose", ["x4", "wt"], ["y"], name="ct",
                                               strides=[2, 2], output_padding=[2, 0])],
     [x4], [helper.make_tensor_value_info("y", F, [1, 1, 6, 6])], inits=[wt], check=False)
sc = helper.make_tensor("sc", F, [4], [1.0, 1.0, 2.0, 2.0])
save("resize_opset10", [helper.make_node("Resize", ["x4", "sc"], ["y"], name="rs")],
     [x4], [helper.make_tensor_value_info("y", F, [1, 1, 6, 6])], inits=[sc], opset=10, check=False)
save("resize_both", [helper.make_node("Resize", ["x4", "", "sc", "sz"], ["y"], name="rb")],
     [x4], [helper.make_tensor_value_info("y", F, [1, 1, 6, 6])],
     inits=[sc, helper.make_tensor("sz", TensorProto.INT64, [4], [1, 2, 6, 6])], opset=13,
     check=False)
save("resize_nan", [helper.make_node("Resize", ["x4", "", "sn"], ["y"], name="rn")],
     [x4], [helper.make_tensor_value_info("y", F, [1, 2, 6, 6])],
     inits=[helper.make_tensor("sn", F, [4], [1.0, 1.0, float("nan"), 2.0])], opset=13,
     check=False)

# Found by pipe-import-fuzzer: non-constant axes/shape operands whose
# declared length exceeds what the data allows (a Squeeze of 33 axes of a
# rank-3 tensor sized a result type by rank - 33), or a huge rank.
I64 = onnx.TensorProto.INT64
d3 = helper.make_tensor_value_info("data", F, [2, 3, 4])
save("squeeze_too_many", [helper.make_node("Squeeze", ["data", "axes"], ["y"], name="sq")],
     [d3, helper.make_tensor_value_info("axes", I64, [33])],
     [helper.make_tensor_value_info("y", F, [1])], check=False)
save("unsqueeze_huge", [helper.make_node("Unsqueeze", ["data", "axes"], ["y"], name="usq")],
     [d3, helper.make_tensor_value_info("axes", I64, [1 << 40])],
     [helper.make_tensor_value_info("y", F, [1])], check=False)

# Every input static, but a shape computed from values: a Reshape whose
# shape is the ceiling of a float input's values (pipec's folders cannot
# know them), and one whose shape is a graph input.
v2 = helper.make_tensor_value_info("v", F, [2])
save("value_shape", [helper.make_node("Ceil", ["v"], ["c"], name="ceil"),
                     helper.make_node("Cast", ["c"], ["s"], name="cast", to=I64),
                     helper.make_node("Reshape", ["x", "s"], ["y"], name="rv")],
     [x, v2], [helper.make_tensor_value_info("y", F, ["a", "b"])], check=False)
save("input_shape", [helper.make_node("Reshape", ["x", "s"], ["y"], name="ri")],
     [x, helper.make_tensor_value_info("s", I64, [2])],
     [helper.make_tensor_value_info("y", F, ["a", "b"])], check=False)
