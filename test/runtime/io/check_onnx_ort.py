"""Runs a model written by pipert_export_onnx in onnxruntime and compares its
outputs with a NumPy forward pass using the exported values (see
gen_fixtures.py for the graph: y = Reshape(x @ W + b, [-1, 2, 2]),
z = x @ W + b + E[0]).

usage: check_onnx_ort.py MODEL          (exit 0: match)
       check_onnx_ort.py --available    (exit 0: onnxruntime can be imported)
"""
import sys

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:
    print("check_onnx_ort: %s" % e, file=sys.stderr)
    sys.exit(3)
if sys.argv[1] == "--available":
    sys.exit(0)

W = np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5 - 3
b = np.arange(1, 5, dtype=np.float32)
E = np.arange(8, dtype=np.float32).reshape(2, 4)
x = np.array([[1, 2, 3], [-1, 0.5, 2]], dtype=np.float32)
h = x @ W + b
sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
y, z = sess.run(["y", "z"], {"x": x})
assert y.shape == (2, 2, 2) and np.allclose(y, h.reshape(-1, 2, 2), rtol=1e-6), y
assert np.allclose(z, h + E[0], rtol=1e-6), z
print("onnxruntime output ok")
