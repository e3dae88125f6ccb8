"""Checks a model written by pipert_export_onnx (checkpoint_test.cpp).

usage: check_onnx.py MODEL
W and b must hold the exported values, the other initializers the values
gen_fixtures.py gave them, everything inline, and the onnx checker must pass.
(check_onnx_ort.py runs the model in onnxruntime.)
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper

model = onnx.load(sys.argv[1])
onnx.checker.check_model(model)
inits = {t.name: t for t in model.graph.initializer}
for t in inits.values():
    assert t.data_location == onnx.TensorProto.DEFAULT and not t.external_data, t.name
vals = {name: numpy_helper.to_array(t) for name, t in inits.items()}

W = np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5 - 3
b = np.arange(1, 5, dtype=np.float32)
assert vals["W"].dtype == np.float32 and np.array_equal(vals["W"], W), vals["W"]
assert np.array_equal(vals["b"], b), vals["b"]
assert np.array_equal(vals["shape"], np.array([-1, 2, 2], dtype=np.int64)), vals["shape"]
assert np.array_equal(vals["E"], np.arange(8, dtype=np.float32).reshape(2, 4)), vals["E"]
assert vals["zero"].shape == () and vals["zero"] == 0

print("onnx export ok")
