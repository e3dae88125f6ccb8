#!/usr/bin/env python3
"""Writes OUT/depth_space.onnx and OUT/depth_space.npz: a classifier whose
features go through DepthToSpace (mode DCR, ONNX's default), SpaceToDepth
and DepthToSpace (mode CRD, what nn.PixelShuffle exports), between trained
per-channel and per-position scales, so that a wrong permutation changes
the loss and the gradients. 32 rows of x (8 x 4 x 4) and labels of 3
classes.

    make_depth_space.py OUT
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.RandomState(0)
B = 8
inits = [
    numpy_helper.from_array(rng.uniform(0.5, 1.5, (8, 1, 1)).astype(np.float32), "chan"),
    numpy_helper.from_array(rng.uniform(0.5, 1.5, (2, 8, 8)).astype(np.float32), "pos"),
    numpy_helper.from_array((rng.randn(128, 3) * 0.1).astype(np.float32), "fc"),
]
nodes = [
    helper.make_node("Mul", ["x", "chan"], ["h"]),
    helper.make_node("DepthToSpace", ["h"], ["a"], blocksize=2, mode="DCR"),
    helper.make_node("SpaceToDepth", ["a"], ["b"], blocksize=2),
    helper.make_node("DepthToSpace", ["b"], ["c"], blocksize=2, mode="CRD"),
    helper.make_node("Mul", ["c", "pos"], ["d"]),
    helper.make_node("Flatten", ["d"], ["f"], axis=1),
    helper.make_node("MatMul", ["f", "fc"], ["logits"]),
    helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "y"], ["loss"], reduction="mean"),
]
graph = helper.make_graph(
    nodes, "depth_space",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, 8, 4, 4]),
     helper.make_tensor_value_info("y", TensorProto.INT64, [B])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    initializer=inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, f"{out}/depth_space.onnx")
np.savez(f"{out}/depth_space.npz",
         x=np.random.RandomState(1).randn(32, 8, 4, 4).astype(np.float32),
         y=np.random.RandomState(2).randint(0, 3, 32).astype(np.int64))
