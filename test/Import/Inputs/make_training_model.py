#!/usr/bin/env python3
"""Writes DIR/training.onnx: a linear model with a loss and a TrainingInfoProto
whose algorithm graph takes the gradient of the loss (ai.onnx.preview.training
Gradient) and applies Adagrad, with update bindings for W and its state."""
import os
import sys

import onnx
from onnx import TensorProto, helper

out = sys.argv[1]
F = TensorProto.FLOAT
T = "ai.onnx.preview.training"

x = helper.make_tensor_value_info("X", F, [4, 3])
loss = helper.make_tensor_value_info("loss", F, [])
W = helper.make_tensor("W", F, [3, 2], [0.1 * i for i in range(6)])
H = helper.make_tensor("H", F, [3, 2], [0.0] * 6)  # Adagrad accumulator
nodes = [
    helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm"),
    helper.make_node("ReduceSum", ["Y"], ["S"], name="sum", keepdims=0),
    helper.make_node("Mul", ["S", "S"], ["loss"], name="square"),
]
g = helper.make_graph(nodes, "linear", [x], [loss], [W, H])

R = helper.make_tensor_value_info("R", F, [])
Tstep = helper.make_tensor_value_info("T", TensorProto.INT64, [])
algo_nodes = [
    helper.make_node("Gradient", ["X", "W"], ["dX", "dW"], name="grad", domain=T,
                     xs=["X", "W"], zs=[], y="loss"),
    helper.make_node("Adagrad", ["R", "T", "W", "dW", "H"], ["W_new", "H_new"],
                     name="adagrad", domain=T, decay_factor=0.1,
                     epsilon=1e-6, norm_coefficient=0.001),
]
algo = helper.make_graph(
    algo_nodes, "algorithm", [R, Tstep],
    [helper.make_tensor_value_info("W_new", F, [3, 2]),
     helper.make_tensor_value_info("H_new", F, [3, 2])])
info = helper.make_training_info(algo, [("W", "W_new"), ("H", "H_new")],
                                 None, None)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                        helper.make_opsetid(T, 1)])
m.training_info.append(info)
m.ir_version = 8
onnx.save(m, os.path.join(out, "training.onnx"))

# The same with a Gradient whose xs names no tensor of the model (a typo):
# an import error, not a weight silently left untrained.
algo_nodes[0].ClearField("attribute")
algo_nodes[0].attribute.extend([helper.make_attribute("xs", ["X", "Wt"]),
                                helper.make_attribute("zs", []),
                                helper.make_attribute("y", "loss")])
bad = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                          helper.make_opsetid(T, 1)])
bad.training_info.append(helper.make_training_info(
    helper.make_graph(algo_nodes, "algorithm", [R, Tstep],
                      [helper.make_tensor_value_info("W_new", F, [3, 2]),
                       helper.make_tensor_value_info("H_new", F, [3, 2])]),
    [("W", "W_new"), ("H", "H_new")], None, None))
bad.ir_version = 8
onnx.save(bad, os.path.join(out, "training_bad_xs.onnx"))
