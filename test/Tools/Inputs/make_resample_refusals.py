#!/usr/bin/env python3
"""Models whose ConvTranspose / Resize import but cannot be compiled, for
pipe-compile-resample-errors.test.

    make_resample_refusals.py OUTDIR      (Debian's /usr/bin/python3: onnx)

Each ends in loss = ReduceSum(op output * op output), with a trained weight
on the way so that training differentiates it.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
F = TensorProto.FLOAT
n = helper.make_node
count = 0


def save(name, x_shape, nodes, inits, opset=17):
    global count
    tail = [n("Mul", ["y", "y"], ["sq"]), n("ReduceSum", ["sq"], ["loss"], keepdims=0)]
    g = helper.make_graph(nodes + tail, name, [helper.make_tensor_value_info("x", F, x_shape)],
                          [helper.make_tensor_value_info("loss", F, [])],
                          [numpy_helper.from_array(v, k) for k, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(OUT, name + ".onnx"))
    count += 1


w = np.full((1, 2, 3, 3), 0.1, np.float32)
# output_shape beyond the natural extent: ONNX pads the end with zeros
# (negative pads), which the conv-gradient kernel does not do.
save("convtranspose_negative_pads", [2, 1, 3, 3],
     [n("ConvTranspose", ["x", "w"], ["y"], name="ct", strides=[3, 2], output_shape=[10, 8])],
     [("w", w)])
# A 3-D ConvTranspose (rank 5): the convolution kernels are 1-D and 2-D.
save("convtranspose_3d", [2, 1, 3, 3, 3],
     [n("ConvTranspose", ["x", "w"], ["y"], name="ct3")], [("w", np.full((1, 2, 3, 3, 3), 0.1, np.float32))])
# A Resize of an axis before the last three (C of NCDHW).
s = np.array([1, 2, 1, 1, 2], np.float32)
save("resize_leading_axis", [2, 1, 3, 3, 3],
     [n("Mul", ["x", "k"], ["xk"]),
      n("Resize", ["xk", "", "s"], ["y"], name="rs", mode="linear")],
     [("k", np.full((1, 1, 3, 3, 3), 0.5, np.float32)), ("s", s)])
print("wrote", count, "models")
