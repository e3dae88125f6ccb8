#!/usr/bin/env python3
"""Writes one LSTM/GRU model per feature pipec refuses, for
pipe-compile-rnn-errors.test: OUTDIR/<case>.onnx, each a single recurrent
node named after the case (x (seq 3, batch 2, input 4) -> ReduceSum(Y)).

    make_rnn_refusals.py OUTDIR      (Debian's /usr/bin/python3: onnx, numpy)
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(0)
H = 3


def model(name, op, inputs=("x", "w", "r"), extra_inits=(), graph_inputs=(),
          x_shape=(3, 2, 4), **attrs):
    g = 4 if op == "LSTM" else 3
    inits = [numpy_helper.from_array(rng.standard_normal((1, g * H, 4)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal((1, g * H, H)).astype(np.float32), "r")]
    inits += [numpy_helper.from_array(v, k) for k, v in extra_inits]
    nodes = [helper.make_node(op, list(inputs), ["y"], name=name, hidden_size=H, **attrs),
             helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))]
    ins += [helper.make_tensor_value_info(k, t, s) for k, t, s in graph_inputs]
    graph = helper.make_graph(nodes, name, ins,
                              [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
                              inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(OUT, name + ".onnx"))


model("lstm_layout1", "LSTM", layout=1, x_shape=(2, 3, 4))
model("lstm_peepholes", "LSTM", inputs=("x", "w", "r", "", "", "", "", "p"),
      extra_inits=[("p", np.zeros((1, 3 * H), np.float32))])
model("lstm_clip", "LSTM", clip=1.0)
model("lstm_relu", "LSTM", activations=["Sigmoid", "Relu", "Tanh"])
model("lstm_input_forget", "LSTM", input_forget=1)
model("lstm_short_lens", "LSTM", inputs=("x", "w", "r", "", "lens"),
      extra_inits=[("lens", np.array([3, 2], np.int32))])
model("lstm_data_lens", "LSTM", inputs=("x", "w", "r", "", "lens"),
      graph_inputs=[("lens", TensorProto.INT32, [2])], x_shape=(2, 2, 4))
model("gru_activation_alpha", "GRU", activations=["LeakyRelu", "Tanh"],
      activation_alpha=[0.1])
print("wrote", len([f for f in os.listdir(OUT) if f.endswith(".onnx")]), "models")
