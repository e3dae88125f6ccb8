#!/usr/bin/env python3
"""Writes OUT/gathernd.onnx and OUT/gathernd.npz: per sample, GatherND with
batch_dims 1 picks 2 of the 4 rows of its (trained-scale) features at
indices the data gives (a graph input, as TensorFlow exports gathers of
per-sample positions), and a second GatherND reads a trained table at
constant pairs; a linear layer and a cross-entropy follow. 32 rows of x
(4 x 3), idx (2 x 1) in [0, 4) with negatives, labels of 5 classes.

    make_gathernd_model.py OUT
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.RandomState(0)
B = 8
inits = [
    numpy_helper.from_array(rng.uniform(0.5, 1.5, (4, 3)).astype(np.float32), "scale"),
    numpy_helper.from_array((rng.randn(3, 5) * 0.5).astype(np.float32), "w"),
    numpy_helper.from_array((rng.randn(3, 4, 5) * 0.5).astype(np.float32), "table"),
    numpy_helper.from_array(np.array([[1, 2], [0, -1], [1, 2]], np.int64), "pairs"),
    numpy_helper.from_array(np.array([0], np.int64), "axis0"),
]
n = helper.make_node
nodes = [
    n("Mul", ["x", "scale"], ["h"]),
    n("GatherND", ["h", "idx"], ["g"], batch_dims=1),            # (B, 2, 3)
    n("MatMul", ["g", "w"], ["m"]),                              # (B, 2, 5)
    n("ReduceMean", ["m"], ["r"], axes=[1], keepdims=0),         # (B, 5)
    n("GatherND", ["table", "pairs"], ["t"]),                    # (3, 5)
    n("ReduceSum", ["t", "axis0"], ["tb"], keepdims=0),          # (5,)
    n("Add", ["r", "tb"], ["logits"]),
    n("SoftmaxCrossEntropyLoss", ["logits", "y"], ["loss"], reduction="mean"),
]
graph = helper.make_graph(
    nodes, "gathernd",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, 4, 3]),
     helper.make_tensor_value_info("idx", TensorProto.INT64, [B, 2, 1]),
     helper.make_tensor_value_info("y", TensorProto.INT64, [B])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    initializer=inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, f"{out}/gathernd.onnx")
r = np.random.RandomState(1)
np.savez(f"{out}/gathernd.npz",
         x=r.randn(32, 4, 3).astype(np.float32),
         idx=r.randint(-4, 4, (32, 2, 1)).astype(np.int64),
         y=r.randint(0, 5, 32).astype(np.int64))
