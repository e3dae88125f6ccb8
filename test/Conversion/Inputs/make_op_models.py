#!/usr/bin/env python3
"""Writes one small ONNX model per forward op for check_op_models.py.

    make_op_models.py OUTDIR      (Debian's /usr/bin/python3: onnx, numpy)

Each model feeds graph input `x` (first axis: the batch of 2) through the op
under test (other operands are initializers or Constant nodes) and ends in
loss = ReduceSum(Cast<float>(y) * P) with a random projection P (a Constant),
so the single scalar the compiled program reports depends on every output
element. Writes OUTDIR/<case>.onnx and OUTDIR/<case>.npz (x, 2 rows).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def f32(*shape, positive=False):
    a = rng.standard_normal(shape).astype(np.float32)
    return np.abs(a) + 0.1 if positive else a


def case(name, x, nodes, y_shape, inits=(), y_type=F, x_type=F, opset=17):
    """nodes compute `y` from `x`; y_shape is y's static shape."""
    p = rng.standard_normal(y_shape).astype(np.float32)
    tail = []
    y = "y"
    if y_type != F:
        tail.append(helper.make_node("Cast", ["y"], ["yf"], to=F))
        y = "yf"
    tail += [
        helper.make_node("Constant", [], ["proj"],
                         value=numpy_helper.from_array(p, "proj")),
        helper.make_node("Mul", [y, "proj"], ["weighted"]),
        helper.make_node("ReduceSum", ["weighted"], ["loss"], keepdims=0),
    ]
    graph = helper.make_graph(
        list(nodes) + tail, name,
        [helper.make_tensor_value_info("x", x_type, list(x.shape))],
        [helper.make_tensor_value_info("loss", F, [])],
        [numpy_helper.from_array(v, k) for k, v in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8 if opset <= 17 else 9
    # Debian's onnx (1.12) knows opsets up to 17: newer models (Gelu-20,
    # ReduceMax-18) are checked by onnxruntime only.
    if opset <= 17:
        onnx.checker.check_model(model)
    onnx.save(model, os.path.join(OUT, name + ".onnx"))
    np.savez(os.path.join(OUT, name + ".npz"), x=x)


def const(name, array):
    return helper.make_node("Constant", [], [name],
                            value=numpy_helper.from_array(np.asarray(array), name))


n = helper.make_node
x24 = f32(2, 4)
# Elementwise, with broadcasting against an initializer.
for op in ["Add", "Sub", "Mul", "Div"]:
    case(op.lower(), x24, [n(op, ["x", "b"], ["y"])], (2, 4),
         [("b", f32(4, positive=True))])
case("pow", f32(2, 4, positive=True), [n("Pow", ["x", "b"], ["y"])], (2, 4),
     [("b", f32(1, 4))])
case("add_i64", np.arange(8, dtype=np.int64).reshape(2, 4),
     [const("k", np.array([3, -2, 5, 7], np.int64)),
      n("Add", ["x", "k"], ["y"])], (2, 4), y_type=I64, x_type=I64)
case("equal", np.array([[1, 2, 3, 4], [4, 3, 2, 1]], np.float32),
     [const("k", np.array([1, 3, 3, 1], np.float32)),
      n("Equal", ["x", "k"], ["y"])], (2, 4), y_type=TensorProto.BOOL)
case("where", np.array([[1, 2, 3, 4], [4, 3, 2, 1]], np.float32),
     [const("k", np.array([1, 3, 3, 1], np.float32)),
      n("Equal", ["x", "k"], ["c"]), n("Where", ["c", "x", "b"], ["y"])], (2, 4),
     [("b", f32(4))])
for op in ["Relu", "Neg", "Tanh", "Sigmoid", "Erf", "Exp", "Identity"]:
    case(op.lower(), x24, [n(op, ["x"], ["y"])], (2, 4))
for op in ["Sqrt", "Log"]:
    case(op.lower(), f32(2, 4, positive=True), [n(op, ["x"], ["y"])], (2, 4))
case("cast", f32(2, 4) * 5, [n("Cast", ["x"], ["y"], to=I64)], (2, 4),
     y_type=I64)
# Linear algebra.
case("gemm", f32(2, 3), [n("Gemm", ["x", "w", "c"], ["y"], transB=1,
                           alpha=0.5, beta=2.0)], (2, 5),
     [("w", f32(5, 3)), ("c", f32(5))])
case("gemm_ta", f32(2, 3), [n("Gemm", ["x", "w"], ["y"], transA=1)], (3, 4),
     [("w", f32(2, 4))])
case("matmul", f32(2, 3, 4), [n("MatMul", ["x", "w"], ["y"])], (2, 3, 5),
     [("w", f32(4, 5))])
# Normalisation.
case("softmax", f32(2, 3, 4), [n("Softmax", ["x"], ["y"], axis=1)], (2, 3, 4))
case("logsoftmax", x24, [n("LogSoftmax", ["x"], ["y"])], (2, 4))
case("layernorm", f32(2, 3, 4), [n("LayerNormalization", ["x", "s", "b"], ["y"],
                                   axis=-1, epsilon=1e-5)], (2, 3, 4),
     [("s", f32(4)), ("b", f32(4))])
case("batchnorm", f32(2, 3, 4, 4),
     [n("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])], (2, 3, 4, 4),
     [("s", f32(3)), ("b", f32(3)), ("m", f32(3)), ("v", f32(3, positive=True))])
# Convolution and pooling.
case("conv", f32(2, 2, 5, 5), [n("Conv", ["x", "w", "b"], ["y"], pads=[1, 0, 1, 2],
                                 strides=[2, 1])], (2, 4, 3, 5),
     [("w", f32(4, 2, 3, 3)), ("b", f32(4))])
case("conv_group_same", f32(2, 4, 5, 5),
     [n("Conv", ["x", "w"], ["y"], group=2, auto_pad="SAME_UPPER")], (2, 4, 5, 5),
     [("w", f32(4, 2, 3, 3))])
case("conv1d", f32(2, 2, 7), [n("Conv", ["x", "w"], ["y"], dilations=[2])],
     (2, 3, 3), [("w", f32(3, 2, 3))])
case("maxpool", f32(2, 2, 5, 5), [n("MaxPool", ["x"], ["y"], kernel_shape=[2, 2],
                                    strides=[2, 2], ceil_mode=1)], (2, 2, 3, 3))
case("avgpool", f32(2, 2, 5, 5), [n("AveragePool", ["x"], ["y"], kernel_shape=[3, 3],
                                    pads=[1, 1, 1, 1], strides=[2, 2])],
     (2, 2, 3, 3))
case("globalavgpool", f32(2, 3, 4, 4), [n("GlobalAveragePool", ["x"], ["y"])],
     (2, 3, 1, 1))
case("dropout_eval", x24, [n("Dropout", ["x"], ["y"])], (2, 4))
# Reductions and losses.
case("reducemean", f32(2, 3, 4), [n("ReduceMean", ["x"], ["y"], axes=[1],
                                    keepdims=1)],
     (2, 1, 4))
case("reducesum", f32(2, 3, 4), [const("ax", np.array([-1, 1], np.int64)),
                                 n("ReduceSum", ["x", "ax"], ["y"], keepdims=0)],
     (2,))
case("sce_loss", f32(2, 5), [const("lab", np.array([1, 4], np.int64)),
                             n("SoftmaxCrossEntropyLoss", ["x", "lab"], ["y"])], ())
case("nll_loss", f32(2, 5), [const("lab", np.array([3, 0], np.int64)),
                             n("NegativeLogLikelihoodLoss", ["x", "lab", "w"], ["y"],
                               reduction="sum")], (), [("w", f32(5, positive=True))])
# Shapes and data movement.
case("reshape", f32(2, 3, 4), [const("s", np.array([2, 12], np.int64)),
                               n("Reshape", ["x", "s"], ["y"])], (2, 12))
case("flatten", f32(2, 3, 4), [n("Flatten", ["x"], ["y"])], (2, 12))
case("transpose", f32(2, 3, 4), [n("Transpose", ["x"], ["y"], perm=[2, 0, 1])],
     (4, 2, 3))
case("concat", x24, [n("Concat", ["x", "c"], ["y"], axis=1)], (2, 7),
     [("c", f32(2, 3))])
case("split", f32(2, 6), [const("sp", np.array([2, 4], np.int64)),
                          n("Split", ["x", "sp"], ["a", "b"], axis=1),
                          n("Concat", ["b", "a"], ["y"], axis=1)], (2, 6))
case("slice", f32(2, 6), [const("st", np.array([5], np.int64)),
                          const("en", np.array([0], np.int64)),
                          const("ax", np.array([1], np.int64)),
                          const("sp", np.array([-2], np.int64)),
                          n("Slice", ["x", "st", "en", "ax", "sp"], ["y"])], (2, 3))
case("gather", f32(2, 5), [const("ix", np.array([[4, 0], [-1, 2]], np.int64)),
                           n("Gather", ["x", "ix"], ["y"], axis=1)], (2, 2, 2))
case("unsqueeze_squeeze", x24, [const("ax", np.array([1], np.int64)),
                                n("Unsqueeze", ["x", "ax"], ["u"]),
                                n("Squeeze", ["u", "ax"], ["y"])], (2, 4))
case("expand", f32(2, 1, 4), [const("s", np.array([3, 1], np.int64)),
                              n("Expand", ["x", "s"], ["y"])], (2, 3, 4))
case("constant_of_shape", x24,
     [const("s", np.array([2, 4], np.int64)),
      n("ConstantOfShape", ["s"], ["k"],
        value=numpy_helper.from_array(np.array([1.5], np.float32))),
      n("Add", ["x", "k"], ["y"])], (2, 4))
case("shape_range", x24, [n("Shape", ["x"], ["sh"]),
                          const("one", np.array(1, np.int64)),
                          const("zero", np.array(0, np.int64)),
                          n("Gather", ["sh", "one"], ["len"]),
                          n("Range", ["zero", "len", "one"], ["r"]),
                          n("Cast", ["r"], ["rf"], to=F),
                          n("Add", ["x", "rf"], ["y"])], (2, 4))
# Issue 15: activations, rounding, comparisons, logic.
x3 = (f32(2, 4) * 3).astype(np.float32)
for op in ["Abs", "Sign", "Floor", "Ceil", "Softplus", "HardSwish"]:
    case(op.lower(), x3, [n(op, ["x"], ["y"])], (2, 4))
case("reciprocal", f32(2, 4, positive=True), [n("Reciprocal", ["x"], ["y"])], (2, 4))
case("leakyrelu", x24, [n("LeakyRelu", ["x"], ["y"], alpha=0.2)], (2, 4))
case("elu", x24, [n("Elu", ["x"], ["y"], alpha=0.7)], (2, 4))
case("selu", x24, [n("Selu", ["x"], ["y"])], (2, 4))
case("selu_attrs", x24, [n("Selu", ["x"], ["y"], alpha=1.5, gamma=2.0)], (2, 4))
case("hardsigmoid", x3, [n("HardSigmoid", ["x"], ["y"], alpha=0.3, beta=0.4)], (2, 4))
case("gelu", x3, [n("Gelu", ["x"], ["y"])], (2, 4), opset=20)
case("gelu_tanh", x3, [n("Gelu", ["x"], ["y"], approximate="tanh")], (2, 4),
     opset=20)
case("clip", x3, [const("lo", np.array(-1.0, np.float32)),
                  const("hi", np.array(0.5, np.float32)),
                  n("Clip", ["x", "lo", "hi"], ["y"])], (2, 4))
case("clip_max_only", x3, [const("hi", np.array(0.5, np.float32)),
                           n("Clip", ["x", "", "hi"], ["y"])], (2, 4))
case("clip_none", x3, [n("Clip", ["x"], ["y"])], (2, 4))
case("clip_opset10", x3, [n("Clip", ["x"], ["y"], min=-0.5)], (2, 4), opset=10)
case("max", x24, [n("Max", ["x", "b"], ["y"])], (2, 4), [("b", f32(4))])
case("max3", x24, [n("Max", ["x", "b", "c"], ["y"])], (2, 4),
     [("b", f32(4)), ("c", f32(2, 1))])
case("min", x24, [n("Min", ["x", "b"], ["y"])], (2, 4), [("b", f32(1, 4))])
case("min1", x24, [n("Min", ["x"], ["y"])], (2, 4))
case("max_i64", np.array([[1, -2, 3, 4], [4, 3, -2, 1]], np.int64),
     [const("k", np.array([2, 2, 2, 2], np.int64)), n("Max", ["x", "k"], ["y"])],
     (2, 4), y_type=I64, x_type=I64)
case("fmod", x3, [n("Mod", ["x", "b"], ["y"], fmod=1)], (2, 4),
     [("b", np.array([1.5, -0.7, 2.0, 0.9], np.float32))])
case("mod_i64", np.array([[7, -7, 5, -5], [3, -3, 0, 9]], np.int64),
     [const("k", np.array([3, 3, -2, -2], np.int64)), n("Mod", ["x", "k"], ["y"])],
     (2, 4), y_type=I64, x_type=I64)
case("fmod_i64", np.array([[7, -7, 5, -5], [3, -3, 0, 9]], np.int64),
     [const("k", np.array([3, 3, -2, -2], np.int64)),
      n("Mod", ["x", "k"], ["y"], fmod=1)], (2, 4), y_type=I64, x_type=I64)
cmp_x = np.array([[1, 2, 3, 4], [4, 3, 2, 1]], np.float32)
for op in ["Less", "LessOrEqual", "Greater", "GreaterOrEqual"]:
    case(op.lower(), cmp_x, [const("k", np.array([1, 3, 3, 1], np.float32)),
                             n(op, ["x", "k"], ["y"])], (2, 4),
         y_type=TensorProto.BOOL)
case("less_i64", cmp_x.astype(np.int64),
     [const("k", np.array([[2], [3]], np.int64)), n("Less", ["x", "k"], ["y"])],
     (2, 4), y_type=TensorProto.BOOL, x_type=I64)
for op in ["And", "Or"]:
    case(op.lower(), cmp_x, [const("k", np.array([1, 3, 3, 1], np.float32)),
                             const("t", np.array([[True], [False]])),
                             n("Greater", ["x", "k"], ["g"]),
                             n(op, ["g", "t"], ["y"])], (2, 4),
         y_type=TensorProto.BOOL)
case("not", cmp_x, [const("k", np.array([1, 3, 3, 1], np.float32)),
                    n("Greater", ["x", "k"], ["g"]), n("Not", ["g"], ["y"])],
     (2, 4), y_type=TensorProto.BOOL)
# Issue 15: extremum reductions, arg reductions, CumSum, Tile, Pad, Trilu.
x234 = f32(2, 3, 4)
case("reducemax", x234, [n("ReduceMax", ["x"], ["y"], axes=[1], keepdims=1)], (2, 1, 4))
case("reducemax_all", x234, [n("ReduceMax", ["x"], ["y"], keepdims=0)], ())
case("reducemin_18", x234, [const("ax", np.array([-1, 1], np.int64)),
                            n("ReduceMin", ["x", "ax"], ["y"], keepdims=0)], (2,),
     opset=18)
case("reducemax_18", x234, [const("ax", np.array([2], np.int64)),
                            n("ReduceMax", ["x", "ax"], ["y"])], (2, 3, 1), opset=18)
ties = np.array([[[1, 3, 3, 0], [2, 2, 1, 0], [3, 1, 3, 0]],
                 [[0, 0, 0, 0], [5, 4, 5, 4], [1, 2, 3, 4]]], np.float32)
case("argmax", ties, [n("ArgMax", ["x"], ["y"], axis=1)], (2, 1, 4), y_type=I64)
case("argmax_last", ties, [n("ArgMax", ["x"], ["y"], axis=2, keepdims=0,
                             select_last_index=1)], (2, 3), y_type=I64)
case("argmin", ties, [n("ArgMin", ["x"], ["y"], axis=-1, keepdims=0)], (2, 3),
     y_type=I64)
for name, kw in [("cumsum", {}), ("cumsum_exclusive", {"exclusive": 1}),
                 ("cumsum_reverse", {"reverse": 1}),
                 ("cumsum_exclusive_reverse", {"exclusive": 1, "reverse": 1})]:
    case(name, x234, [const("ax", np.array(1, np.int64)),
                      n("CumSum", ["x", "ax"], ["y"], **kw)], (2, 3, 4))
case("cumsum_i32_axis", x234, [const("ax", np.array(-1, np.int32)),
                               n("CumSum", ["x", "ax"], ["y"])], (2, 3, 4))
case("tile", x234, [const("r", np.array([1, 2, 3], np.int64)),
                    n("Tile", ["x", "r"], ["y"])], (2, 6, 12))
case("tile_i64", np.arange(8, dtype=np.int64).reshape(2, 4),
     [const("r", np.array([1, 2], np.int64)), n("Tile", ["x", "r"], ["y"])], (2, 8),
     y_type=I64, x_type=I64)
case("pad_constant", x234, [const("p", np.array([0, 1, 2, 0, 2, 1], np.int64)),
                            const("v", np.array(1.5, np.float32)),
                            n("Pad", ["x", "p", "v"], ["y"])], (2, 6, 7))
case("pad_reflect", x234, [const("p", np.array([0, 2, 3, 0, 1, 2], np.int64)),
                           n("Pad", ["x", "p"], ["y"], mode="reflect")], (2, 6, 9))
case("pad_edge", x234, [const("p", np.array([0, 2, 0, 0, 1, 5], np.int64)),
                        n("Pad", ["x", "p"], ["y"], mode="edge")], (2, 6, 9))
case("pad_crop", x234, [const("p", np.array([0, -1, 2, 0, 1, -2], np.int64)),
                        n("Pad", ["x", "p"], ["y"])], (2, 3, 4))
case("pad_axes_18", x234, [const("p", np.array([1, 2, 0, 1], np.int64)),
                           const("ax", np.array([-1, 1], np.int64)),
                           n("Pad", ["x", "p", "", "ax"], ["y"], mode="reflect")],
     (2, 6, 5), opset=18)
case("pad_opset10", x234, [n("Pad", ["x"], ["y"], pads=[0, 1, 1, 0, 0, 2],
                             value=-2.0)], (2, 4, 7), opset=10)
i24 = np.array([[3, -1, 4, 1], [-5, 9, 2, -6]], np.int64)
case("pad_edge_i64", i24, [const("p", np.array([0, 2, 0, 1], np.int64)),
                           n("Pad", ["x", "p"], ["y"], mode="edge")], (2, 7),
     y_type=I64, x_type=I64)
case("pad_constant_i64", i24, [const("p", np.array([0, 1, 0, 1], np.int64)),
                               const("v", np.array(7, np.int64)),
                               n("Pad", ["x", "p", "v"], ["y"])], (2, 6),
     y_type=I64, x_type=I64)
case("cumsum_i64", i24, [const("ax", np.array(1, np.int64)),
                         n("CumSum", ["x", "ax"], ["y"], reverse=1)], (2, 4),
     y_type=I64, x_type=I64)
x2344 = f32(2, 3, 4, 5)
case("trilu_upper", x2344, [n("Trilu", ["x"], ["y"])], (2, 3, 4, 5))
case("trilu_lower_k", x2344, [const("k", np.array(-1, np.int64)),
                              n("Trilu", ["x", "k"], ["y"], upper=0)], (2, 3, 4, 5))
case("trilu_upper_k", x2344, [const("k", np.array(2, np.int64)),
                              n("Trilu", ["x", "k"], ["y"], upper=1)], (2, 3, 4, 5))

# Recurrent: x is (batch 2, seq 3, input 4), transposed to ONNX's layout 0
# (seq, batch, input) as torch.onnx.export does for batch_first.
xr = f32(2, 3, 4)
to_seq = n("Transpose", ["x"], ["xt"], perm=[1, 0, 2])


def flat_concat(names):
    """y = the outputs flattened and concatenated (every one reaches the loss)."""
    nodes = [const("flat", np.array([-1], np.int64))]
    for k in names:
        nodes.append(n("Reshape", [k, "flat"], [k + "_f"]))
    nodes.append(n("Concat", [k + "_f" for k in names], ["y"], axis=0))
    return nodes


H = 5
case("lstm", xr, [to_seq, n("LSTM", ["xt", "w", "r"], ["y"], hidden_size=H)],
     (3, 1, 2, H), [("w", f32(1, 4 * H, 4)), ("r", f32(1, 4 * H, H))])
case("lstm_bidi_states", xr,
     [to_seq, n("LSTM", ["xt", "w", "r", "b", "", "h0", "c0"], ["Y", "Yh", "Yc"],
                hidden_size=H, direction="bidirectional")]
     + flat_concat(["Y", "Yh", "Yc"]), (3 * 2 * 2 * H + 2 * 2 * 2 * H,),
     [("w", f32(2, 4 * H, 4)), ("r", f32(2, 4 * H, H)), ("b", f32(2, 8 * H)),
      ("h0", f32(2, 2, H)), ("c0", f32(2, 2, H))])
case("lstm_reverse_lens", xr,
     [to_seq, const("lens", np.array([3, 3], np.int32)),
      n("LSTM", ["xt", "w", "r", "b", "lens"], ["", "Yh", "Yc"], hidden_size=H,
        direction="reverse")] + flat_concat(["Yh", "Yc"]), (2 * 2 * H,),
     [("w", f32(1, 4 * H, 4)), ("r", f32(1, 4 * H, H)), ("b", f32(1, 8 * H))])
case("gru", xr, [to_seq, n("GRU", ["xt", "w", "r", "b"], ["y"], hidden_size=H,
                           linear_before_reset=1)],
     (3, 1, 2, H), [("w", f32(1, 3 * H, 4)), ("r", f32(1, 3 * H, H)),
                    ("b", f32(1, 6 * H))])
case("gru_bidi_states", xr,
     [to_seq, n("GRU", ["xt", "w", "r", "", "", "h0"], ["Y", "Yh"], hidden_size=H,
                direction="bidirectional", linear_before_reset=1)]
     + flat_concat(["Y", "Yh"]), (3 * 2 * 2 * H + 2 * 2 * H,),
     [("w", f32(2, 3 * H, 4)), ("r", f32(2, 3 * H, H)), ("h0", f32(2, 2, H))])

case("gru_lbr0_reverse", xr,
     [to_seq, n("GRU", ["xt", "w", "r", "b", "", "h0"], ["Y", "Yh"], hidden_size=H,
                direction="reverse")] + flat_concat(["Y", "Yh"]),
     (3 * 1 * 2 * H + 1 * 2 * H,),
     [("w", f32(1, 3 * H, 4)), ("r", f32(1, 3 * H, H)), ("b", f32(1, 6 * H)),
      ("h0", f32(1, 2, H))])


def torch_case(name, module, x):
    """A torch module exported (opset 17) with the loss tail appended."""
    import io
    import torch
    torch.manual_seed(0)
    buf = io.BytesIO()
    torch.onnx.export(module, torch.from_numpy(x), buf, opset_version=17,
                      input_names=["x"], output_names=["y"])
    m = onnx.load_from_string(buf.getvalue())
    y_shape = tuple(d.dim_value for d in m.graph.output[0].type.tensor_type.shape.dim)
    p = rng.standard_normal(y_shape).astype(np.float32)
    m.graph.node.extend([
        helper.make_node("Constant", [], ["proj"], value=numpy_helper.from_array(p, "proj")),
        helper.make_node("Mul", ["y", "proj"], ["weighted"]),
        helper.make_node("ReduceSum", ["weighted"], ["loss"], keepdims=0)])
    del m.graph.output[:]
    m.graph.output.append(helper.make_tensor_value_info("loss", F, []))
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(OUT, name + ".onnx"))
    np.savez(os.path.join(OUT, name + ".npz"), x=x)


class TorchRnn:
    """nn.LSTM / nn.GRU, batch_first, returning the output sequence."""

    @staticmethod
    def make(kind, **kw):
        import torch

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(1)
                self.rnn = getattr(torch.nn, kind)(4, H, batch_first=True, **kw)

            def forward(self, x):
                return self.rnn(x)[0]
        return M().eval()


torch_case("torch_lstm_2layer", TorchRnn.make("LSTM", num_layers=2), xr)
torch_case("torch_gru_2layer_bidi",
           TorchRnn.make("GRU", num_layers=2, bidirectional=True), xr)
# InstanceNormalization and GroupNormalization (18: per-group affine; 21:
# per-channel), decomposed by the importer into LayerNormalization.
x2345 = f32(2, 4, 3, 5)
case("instancenorm", x2345, [n("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-3)],
     (2, 4, 3, 5), inits=[("s", f32(4)), ("b", f32(4))])
case("groupnorm_18", x2345, [n("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)],
     (2, 4, 3, 5), inits=[("s", f32(2)), ("b", f32(2))], opset=18)
case("groupnorm_21", x2345, [n("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2,
                               epsilon=1e-4)],
     (2, 4, 3, 5), inits=[("s", f32(4)), ("b", f32(4))], opset=21)

# Issue 15: Einsum (decomposed at import), ConvTranspose, Resize.
for name, eq, x, other in [
        ("einsum_bmm", "bij,bjk->bik", f32(2, 3, 4), f32(2, 4, 5)),
        ("einsum_attn_qk", "bhqd,bhkd->bhqk", f32(2, 2, 3, 4), f32(2, 2, 5, 4)),
        ("einsum_attn_av", "bhqk,bhkd->bhqd", f32(2, 2, 3, 5), f32(2, 2, 5, 4)),
        ("einsum_mm", "ij,jk->ik", f32(2, 4), f32(4, 3)),
        ("einsum_mm_t", "ij,kj->ik", f32(2, 4), f32(3, 4)),
        ("einsum_dot_rows", "bi,bi->b", f32(2, 4), f32(2, 4)),
        ("einsum_implicit", "bij,jk", f32(2, 3, 4), f32(4, 5)),
        ("einsum_ellipsis", "...ij,...jk->...ik", f32(2, 3, 4), f32(2, 4, 5)),
        ("einsum_sum_outer", "bij,k->bkj", f32(2, 3, 4), f32(5))]:
    out = np.einsum(eq, x, other).shape
    case(name, x, [n("Einsum", ["x", "w"], ["y"], equation=eq)], out,
         inits=[("w", other)], opset=12)
case("einsum_transpose", f32(2, 3, 4),
     [n("Einsum", ["x"], ["y"], equation="bij->bji")], (2, 4, 3), opset=12)
case("einsum_diag_trace", f32(2, 3, 3),
     [n("Einsum", ["x"], ["y"], equation="bii->b")], (2,), opset=12)
case("convtranspose", f32(2, 3, 4, 5),
     [n("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 3], pads=[1, 0, 0, 2],
        output_padding=[1, 2])],
     (2, 3, 9, 15), inits=[("w", f32(3, 3, 3, 3)), ("b", f32(3))])
case("convtranspose_group_dil", f32(2, 4, 5, 5),
     [n("ConvTranspose", ["x", "w"], ["y"], group=2, dilations=[2, 1], strides=[1, 2])],
     (2, 6, 9, 11), inits=[("w", f32(4, 3, 3, 3))])
case("convtranspose_same", f32(2, 2, 4, 4),
     [n("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], auto_pad="SAME_UPPER")],
     (2, 3, 8, 8), inits=[("w", f32(2, 3, 4, 4))])
case("convtranspose_output_shape", f32(2, 2, 4, 4),
     [n("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], output_shape=[8, 9])],
     (2, 3, 8, 9), inits=[("w", f32(2, 3, 3, 3))])
case("convtranspose1d", f32(2, 3, 7),
     [n("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2], pads=[1, 1])],
     (2, 2, 14), inits=[("w", f32(3, 2, 4)), ("b", f32(2))])
x2245 = f32(2, 2, 4, 5)
for name, attrs, scales, sizes, shape in [
        ("resize_nearest_up", dict(mode="nearest", coordinate_transformation_mode="asymmetric",
                                   nearest_mode="floor"), [1, 1, 2, 2], None, (2, 2, 8, 10)),
        ("resize_nearest_half_pixel", dict(mode="nearest"), None, [2, 2, 7, 3], (2, 2, 7, 3)),
        ("resize_nearest_ceil_align", dict(mode="nearest", nearest_mode="ceil",
                                           coordinate_transformation_mode="align_corners"),
         None, [2, 2, 6, 9], (2, 2, 6, 9)),
        ("resize_nearest_prefer_ceil", dict(mode="nearest", nearest_mode="round_prefer_ceil"),
         [1, 1, 1.5, 0.6], None, (2, 2, 6, 3)),
        ("resize_linear_pytorch", dict(mode="linear",
                                       coordinate_transformation_mode="pytorch_half_pixel"),
         [1, 1, 2, 2], None, (2, 2, 8, 10)),
        ("resize_linear_align", dict(mode="linear", coordinate_transformation_mode="align_corners"),
         None, [2, 2, 7, 11], (2, 2, 7, 11)),
        ("resize_linear_down", dict(mode="linear"), [1, 1, 0.5, 0.6], None, (2, 2, 2, 3)),
        ("resize_linear_asym", dict(mode="linear", coordinate_transformation_mode="asymmetric"),
         [1, 1, 1.7, 2.3], None, (2, 2, 6, 11)),
        ("resize_cubic", dict(mode="cubic"), [1, 1, 1.5, 2], None, (2, 2, 6, 10)),
        ("resize_cubic_exclude", dict(mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1),
         None, [2, 2, 3, 8], (2, 2, 3, 8))]:
    nodes = [const("roi", np.zeros(0, np.float32))]
    inputs = ["x", "roi"]
    if scales is not None:
        nodes.append(const("scales", np.array(scales, np.float32)))
        inputs.append("scales")
    else:
        nodes.append(const("sizes", np.array(sizes, np.int64)))
        inputs += ["", "sizes"]
    case(name, x2245, nodes + [n("Resize", inputs, ["y"], **attrs)], shape, opset=13)
case("resize_linear_1d", f32(2, 3, 5),
     [const("scales", np.array([1, 1, 3], np.float32)),
      n("Resize", ["x", "", "scales"], ["y"], mode="linear")], (2, 3, 15), opset=13)
case("resize_trilinear", f32(2, 1, 3, 4, 2),
     [const("sizes", np.array([2, 1, 5, 6, 4], np.int64)),
      n("Resize", ["x", "", "", "sizes"], ["y"], mode="linear",
        coordinate_transformation_mode="align_corners")], (2, 1, 5, 6, 4), opset=13)
# (onnxruntime skips an axis whose extent stays, roi or not: every axis the
# roi crops changes extent here.)
case("resize_crop", x2245,
     [const("roi", np.array([0, 0, 0.2, 0, 1, 1, 0.9, 1.2], np.float32)),
      const("sizes", np.array([2, 2, 5, 12], np.int64)),
      n("Resize", ["x", "roi", "", "sizes"], ["y"], mode="linear",
        coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=3.0)],
     (2, 2, 5, 12), opset=13)

print("wrote", len([f for f in os.listdir(OUT) if f.endswith(".onnx")]), "models")
