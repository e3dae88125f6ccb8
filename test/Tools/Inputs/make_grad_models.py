#!/usr/bin/env python3
"""Writes one small ONNX model per op with a VJP rule, for check_grad_models.py.

    make_grad_models.py OUTDIR      (Debian's /usr/bin/python3: onnx, numpy)

Built like test/Conversion/Inputs/make_op_models.py, but the op's operands
are trainable parameters (float initializers), so that one SGD step of the
compiled training program reveals their gradients. Graph input `x` (2 rows)
enters through `Add(x, p)` where an operand must be batch-shaped; other
non-trained operands are Constant nodes (or, for BatchNormalization's
statistics, state initializers). Loss = ReduceSum(y * P) with a random P.

Per case NAME it writes
  NAME.onnx       the model pipe-compile trains,
  NAME.fd.onnx    the same graph with the parameters as graph inputs, for
                  onnxruntime's finite differences,
  NAME.npz        the data (x), and NAME.params.npz the initial parameters.
Parameter values are kept away from the ops' kinks and poles (ReLU at 0,
MaxPool ties, Log/Sqrt/Div near 0), further than the checker's step.
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
count = 0


def f32(*shape, low=None, high=None):
    if low is not None:
        return rng.uniform(low, high, shape).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


def away_from_zero(*shape):
    """Values with |v| in [0.2, 1.2]: no kink of ReLU within reach."""
    return (rng.choice([-1.0, 1.0], shape) * rng.uniform(0.2, 1.2, shape)).astype(np.float32)


def distinct(*shape):
    """Values pairwise at least 0.05 apart: no MaxPool ties within reach."""
    n = int(np.prod(shape))
    return (rng.permutation(n).astype(np.float32) * 0.05 - n * 0.025).reshape(shape)


def case(name, x, params, nodes, y_shape, state=(), x_type=F, opset=17):
    """nodes compute `y` from `x` and the parameters (name -> array)."""
    global count
    p = rng.standard_normal(y_shape).astype(np.float32)
    tail = [
        helper.make_node("Constant", [], ["proj"],
                         value=numpy_helper.from_array(p, "proj")),
        helper.make_node("Mul", ["y", "proj"], ["weighted"]),
        helper.make_node("ReduceSum", ["weighted"], ["loss"], keepdims=0),
    ]
    x_info = helper.make_tensor_value_info("x", x_type, list(x.shape))
    loss_info = helper.make_tensor_value_info("loss", F, [])
    state_inits = [numpy_helper.from_array(v, k) for k, v in state]
    for kind, inputs, inits in [
            ("", [x_info], [numpy_helper.from_array(v, k) for k, v in params.items()]),
            (".fd", [x_info] + [helper.make_tensor_value_info(k, F, list(v.shape))
                                for k, v in params.items()], [])]:
        graph = helper.make_graph(list(nodes) + tail, name, inputs, [loss_info],
                                  inits + state_inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8 if opset <= 17 else 9
        # Debian's onnx (1.12) knows opsets up to 17 (Gelu is opset 20).
        if opset <= 17:
            onnx.checker.check_model(model)
        onnx.save(model, os.path.join(OUT, name + kind + ".onnx"))
    np.savez(os.path.join(OUT, name + ".npz"), x=x)
    np.savez(os.path.join(OUT, name + ".params.npz"), **params)
    count += 1


def const(name, array):
    return helper.make_node("Constant", [], [name],
                            value=numpy_helper.from_array(np.asarray(array), name))


def shifted(x, values):
    """A parameter p with x + p == values."""
    return (values - x).astype(np.float32)


n = helper.make_node
x24 = f32(2, 4) * 0.1
# Elementwise, with broadcasting of the second operand.
for op in ["Add", "Sub", "Mul", "Div"]:
    case(op.lower(), x24, {"a": f32(2, 4), "b": f32(4, low=0.5, high=1.5)},
         [n("Add", ["x", "a"], ["xa"]), n(op, ["xa", "b"], ["y"])], (2, 4))
case("div_row", x24, {"a": f32(2, 4), "b": f32(2, 1, low=0.5, high=1.5)},
     [n("Add", ["x", "a"], ["xa"]), n("Div", ["xa", "b"], ["y"])], (2, 4))
case("pow", x24, {"a": shifted(x24, f32(2, 4, low=0.5, high=1.5)),
                  "b": f32(1, 4, low=-1.0, high=2.0)},
     [n("Add", ["x", "a"], ["xa"]), n("Pow", ["xa", "b"], ["y"])], (2, 4))
case("pow_const", x24, {"a": shifted(x24, f32(2, 4, low=0.5, high=1.5))},
     [n("Add", ["x", "a"], ["xa"]), const("e", np.array(3.0, np.float32)),
      n("Pow", ["xa", "e"], ["y"])], (2, 4))
case("where", np.array([[1, 2, 3, 4], [4, 3, 2, 1]], np.float32),
     {"a": f32(2, 4), "b": f32(4)},
     [const("k", np.array([1, 3, 3, 1], np.float32)),
      n("Equal", ["x", "k"], ["c"]), n("Where", ["c", "a", "b"], ["y"])], (2, 4))
case("relu", x24, {"a": shifted(x24, away_from_zero(2, 4))},
     [n("Add", ["x", "a"], ["xa"]), n("Relu", ["xa"], ["y"])], (2, 4))
for op in ["Neg", "Tanh", "Sigmoid", "Erf", "Exp", "Identity"]:
    case(op.lower(), x24, {"a": f32(2, 4)},
         [n("Add", ["x", "a"], ["xa"]), n(op, ["xa"], ["y"])], (2, 4))
for op in ["Sqrt", "Log"]:
    case(op.lower(), x24, {"a": shifted(x24, f32(2, 4, low=0.5, high=1.5))},
         [n("Add", ["x", "a"], ["xa"]), n(op, ["xa"], ["y"])], (2, 4))
case("cast", x24, {"a": f32(2, 4)},
     [n("Add", ["x", "a"], ["xa"]), n("Cast", ["xa"], ["y"], to=F)], (2, 4))
# Linear algebra.
case("gemm", f32(2, 3) * 0.1, {"a": f32(2, 3), "w": f32(5, 3), "c": f32(5)},
     [n("Add", ["x", "a"], ["xa"]),
      n("Gemm", ["xa", "w", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)], (2, 5))
case("gemm_ta", f32(2, 3) * 0.1, {"a": f32(2, 3), "w": f32(2, 4), "c": f32(3, 1)},
     [n("Add", ["x", "a"], ["xa"]), n("Gemm", ["xa", "w", "c"], ["y"], transA=1)],
     (3, 4))
case("matmul", f32(2, 3, 4) * 0.1, {"a": f32(2, 3, 4), "w": f32(4, 5)},
     [n("Add", ["x", "a"], ["xa"]), n("MatMul", ["xa", "w"], ["y"])], (2, 3, 5))
case("matmul_batched", f32(2, 3, 4) * 0.1, {"a": f32(2, 3, 4), "w": f32(2, 4, 5)},
     [n("Add", ["x", "a"], ["xa"]), n("MatMul", ["xa", "w"], ["y"])], (2, 3, 5))
# Normalisation.
case("softmax", f32(2, 3, 4) * 0.1, {"a": f32(2, 3, 4)},
     [n("Add", ["x", "a"], ["xa"]), n("Softmax", ["xa"], ["y"], axis=1)], (2, 3, 4))
case("logsoftmax", x24, {"a": f32(2, 4)},
     [n("Add", ["x", "a"], ["xa"]), n("LogSoftmax", ["xa"], ["y"])], (2, 4))
case("layernorm", f32(2, 3, 4) * 0.1, {"a": f32(2, 3, 4), "s": f32(4), "b": f32(4)},
     [n("Add", ["x", "a"], ["xa"]),
      n("LayerNormalization", ["xa", "s", "b"], ["y"], axis=-1, epsilon=1e-5)],
     (2, 3, 4))
case("batchnorm_eval", f32(2, 3, 2, 2) * 0.1,
     {"a": f32(2, 3, 2, 2), "s": f32(3), "b": f32(3)},
     [n("Add", ["x", "a"], ["xa"]),
      n("BatchNormalization", ["xa", "s", "b", "m", "v"], ["y"])], (2, 3, 2, 2),
     state=[("m", f32(3)), ("v", f32(3, low=0.5, high=1.5))])
case("batchnorm_train", f32(2, 3, 2, 2) * 0.1,
     {"a": f32(2, 3, 2, 2), "s": f32(3), "b": f32(3)},
     [n("Add", ["x", "a"], ["xa"]),
      n("BatchNormalization", ["xa", "s", "b", "m", "v"], ["y", "rm", "rv"],
        training_mode=1)],
     (2, 3, 2, 2), state=[("m", f32(3)), ("v", f32(3, low=0.5, high=1.5))])
case("layernorm_axis1", f32(2, 3, 4) * 0.1,
     {"a": f32(2, 3, 4), "s": f32(3, 4), "b": f32(3, 4)},
     [n("Add", ["x", "a"], ["xa"]),
      n("LayerNormalization", ["xa", "s", "b"], ["y"], axis=1, epsilon=1e-5)],
     (2, 3, 4))
# Convolution and pooling.
case("conv", f32(2, 2, 5, 5) * 0.1,
     {"a": f32(2, 2, 5, 5), "w": f32(4, 2, 3, 3), "b": f32(4)},
     [n("Add", ["x", "a"], ["xa"]),
      n("Conv", ["xa", "w", "b"], ["y"], pads=[1, 0, 1, 2], strides=[2, 1])],
     (2, 4, 3, 5))
case("conv_group_same", f32(2, 4, 4, 4) * 0.1,
     {"a": f32(2, 4, 4, 4), "w": f32(4, 2, 3, 3)},
     [n("Add", ["x", "a"], ["xa"]),
      n("Conv", ["xa", "w"], ["y"], group=2, auto_pad="SAME_UPPER")], (2, 4, 4, 4))
case("conv1d", f32(2, 2, 7) * 0.1, {"a": f32(2, 2, 7), "w": f32(3, 2, 3)},
     [n("Add", ["x", "a"], ["xa"]), n("Conv", ["xa", "w"], ["y"], dilations=[2])],
     (2, 3, 3))
x_pool = f32(2, 2, 5, 5) * 0.001
case("maxpool", x_pool, {"a": shifted(x_pool, distinct(2, 2, 5, 5))},
     [n("Add", ["x", "a"], ["xa"]),
      n("MaxPool", ["xa"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)],
     (2, 2, 3, 3))
case("maxpool_overlap", x_pool, {"a": shifted(x_pool, distinct(2, 2, 5, 5))},
     [n("Add", ["x", "a"], ["xa"]),
      n("MaxPool", ["xa"], ["y"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])],
     (2, 2, 5, 5))
case("avgpool", f32(2, 2, 5, 5) * 0.1, {"a": f32(2, 2, 5, 5)},
     [n("Add", ["x", "a"], ["xa"]),
      n("AveragePool", ["xa"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
        strides=[2, 2])], (2, 2, 3, 3))
case("globalavgpool", f32(2, 3, 4, 4) * 0.1, {"a": f32(2, 3, 4, 4)},
     [n("Add", ["x", "a"], ["xa"]), n("GlobalAveragePool", ["xa"], ["y"])],
     (2, 3, 1, 1))
case("dropout_eval", x24, {"a": f32(2, 4)},
     [n("Add", ["x", "a"], ["xa"]), n("Dropout", ["xa"], ["y"])], (2, 4))
# Reductions and losses.
case("reducemean", f32(2, 3, 4) * 0.1, {"a": f32(2, 3, 4)},
     [n("Add", ["x", "a"], ["xa"]),
      n("ReduceMean", ["xa"], ["y"], axes=[1], keepdims=1)], (2, 1, 4))
case("reducesum", f32(2, 3, 4) * 0.1, {"a": f32(2, 3, 4)},
     [n("Add", ["x", "a"], ["xa"]), const("ax", np.array([-1, 1], np.int64)),
      n("ReduceSum", ["xa", "ax"], ["y"], keepdims=0)], (2,))
case("sce_loss", f32(2, 5) * 0.1, {"a": f32(2, 5)},
     [n("Add", ["x", "a"], ["xa"]), const("lab", np.array([1, 4], np.int64)),
      n("SoftmaxCrossEntropyLoss", ["xa", "lab"], ["y"])], ())
case("sce_loss_3d", f32(2, 5, 3) * 0.1, {"a": f32(2, 5, 3)},
     [n("Add", ["x", "a"], ["xa"]),
      const("lab", np.array([[1, 4, 0], [2, 2, 3]], np.int64)),
      n("SoftmaxCrossEntropyLoss", ["xa", "lab"], ["y"], reduction="sum")], ())
case("nll_loss", f32(2, 5) * 0.1, {"a": f32(2, 5)},
     [n("Add", ["x", "a"], ["xa"]), const("lab", np.array([3, 0], np.int64)),
      const("cw", f32(5, low=0.5, high=1.5)),
      n("NegativeLogLikelihoodLoss", ["xa", "lab", "cw"], ["y"])], ())
# Shapes and data movement.
case("reshape", f32(2, 3, 4) * 0.1, {"a": f32(2, 3, 4)},
     [n("Add", ["x", "a"], ["xa"]), const("s", np.array([2, 12], np.int64)),
      n("Reshape", ["xa", "s"], ["y"])], (2, 12))
case("flatten", f32(2, 3, 4) * 0.1, {"a": f32(2, 3, 4)},
     [n("Add", ["x", "a"], ["xa"]), n("Flatten", ["xa"], ["y"])], (2, 12))
case("transpose", f32(2, 3, 4) * 0.1, {"a": f32(2, 3, 4)},
     [n("Add", ["x", "a"], ["xa"]), n("Transpose", ["xa"], ["y"], perm=[2, 0, 1])],
     (4, 2, 3))
case("concat", x24, {"a": f32(2, 4), "c": f32(2, 3)},
     [n("Add", ["x", "a"], ["xa"]), n("Concat", ["xa", "c"], ["y"], axis=1)], (2, 7))
case("split", f32(2, 6) * 0.1, {"a": f32(2, 6)},
     [n("Add", ["x", "a"], ["xa"]), const("sp", np.array([2, 4], np.int64)),
      n("Split", ["xa", "sp"], ["s0", "s1"], axis=1),
      n("Mul", ["s1", "s1"], ["sq"]), n("Concat", ["sq", "s0"], ["y"], axis=1)],
     (2, 6))
case("slice", f32(2, 6) * 0.1, {"a": f32(2, 6)},
     [n("Add", ["x", "a"], ["xa"]), const("st", np.array([5], np.int64)),
      const("en", np.array([0], np.int64)), const("ax", np.array([1], np.int64)),
      const("sp", np.array([-2], np.int64)),
      n("Slice", ["xa", "st", "en", "ax", "sp"], ["y"])], (2, 3))
case("gather", f32(2, 5) * 0.1, {"a": f32(2, 5)},
     [n("Add", ["x", "a"], ["xa"]),
      const("ix", np.array([[4, 0], [-1, 4]], np.int64)),
      n("Gather", ["xa", "ix"], ["y"], axis=1)], (2, 2, 2))
case("gather_embedding", np.array([[0, 3, 3], [5, 1, 0]], np.int64),
     {"table": f32(6, 4)}, [n("Gather", ["table", "x"], ["y"], axis=0)], (2, 3, 4),
     x_type=I64)
# GatherND: pairs into axes 0 and 1, (1, 2) twice (once as (-1, -2));
# with batch_dims 1, per sample 2 indices into axis 1, one repeated.
x243 = f32(2, 4, 3) * 0.1
case("gathernd", x243, {"a": f32(2, 4, 3)},
     [n("Add", ["x", "a"], ["xa"]),
      const("ix", np.array([[1, 2], [0, 3], [-1, -2]], np.int64)),
      n("GatherND", ["xa", "ix"], ["t"]), n("Mul", ["t", "t"], ["y"])], (3, 3))
case("gathernd_batch1", x243, {"a": f32(2, 4, 3)},
     [n("Add", ["x", "a"], ["xa"]),
      const("ix", np.array([[[3], [1]], [[0], [0]]], np.int64)),
      n("GatherND", ["xa", "ix"], ["t"], batch_dims=1), n("Mul", ["t", "t"], ["y"])],
     (2, 2, 3))
# ScatterND (x[index] = v in PyTorch): data and updates both trained; with
# reduction add a repeated tuple accumulates.
for name, ix, red in [("scatternd", [[0, 1], [1, -1]], "none"),
                      ("scatternd_add", [[0, 1], [0, 1], [1, 2]], "add")]:
    case(name, x243, {"a": f32(2, 4, 3), "u": f32(len(ix), 3)},
         [n("Add", ["x", "a"], ["xa"]), const("ix", np.array(ix, np.int64)),
          n("ScatterND", ["xa", "ix", "u"], ["t"], reduction=red),
          n("Mul", ["t", "t"], ["y"])], (2, 4, 3))
# GatherElements (torch.gather) along axis 1 with a repeat; ScatterElements
# (Tensor.scatter / scatter_add) into a trained tensor with trained updates.
case("gatherelements", x243, {"a": f32(2, 4, 3)},
     [n("Add", ["x", "a"], ["xa"]),
      const("ix", np.array([[[1, 3, 0]], [[-1, 0, 0]]], np.int64)),
      n("GatherElements", ["xa", "ix"], ["t"], axis=1), n("Mul", ["t", "t"], ["y"])],
     (2, 1, 3))
for name, ix, red in [("scatterelements", [[[2, 0, 3]], [[1, -1, 0]]], "none"),
                      ("scatterelements_add", [[[2, 0, 3], [2, 2, 0]], [[1, 3, 0], [1, 0, 0]]],
                       "add")]:
    ix = np.array(ix, np.int64)
    case(name, x243, {"a": f32(2, 4, 3), "u": f32(*ix.shape)},
         [n("Add", ["x", "a"], ["xa"]), const("ix", ix),
          n("ScatterElements", ["xa", "ix", "u"], ["t"], axis=1, reduction=red),
          n("Mul", ["t", "t"], ["y"])], (2, 4, 3))
# Operators the importer writes as other ops (Softsign, Celu,
# ThresholdedRelu, Shrink, Mish, Sum, Mean, GlobalMaxPool, LpNormalization):
# values |v| in [0.5, 1.2], away from the thresholds and kinks.
def far(*shape):
    return (rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 1.2, shape)).astype(np.float32)


for name, node, opset in [
        ("softsign", n("Softsign", ["xa"], ["y"]), 17),
        ("celu", n("Celu", ["xa"], ["y"], alpha=0.7), 17),
        ("thresholdedrelu", n("ThresholdedRelu", ["xa"], ["y"], alpha=0.3), 17),
        ("shrink", n("Shrink", ["xa"], ["y"], bias=0.1, lambd=0.4), 17),
        ("mish", n("Mish", ["xa"], ["y"]), 18),
        ("lpnorm2", n("LpNormalization", ["xa"], ["y"], axis=1, p=2), 17),
        ("lpnorm1", n("LpNormalization", ["xa"], ["y"], axis=-1, p=1), 17)]:
    case(name, x24, {"a": shifted(x24, far(2, 4))},
         [n("Add", ["x", "a"], ["xa"]), node], (2, 4), opset=opset)
case("sum_mean", x24, {"a": f32(2, 4), "b": f32(4), "c": f32(2, 1)},
     [n("Add", ["x", "a"], ["xa"]), n("Sum", ["xa", "b", "c"], ["s"]),
      n("Mean", ["s", "xa"], ["m"]), n("Mul", ["m", "s"], ["y"])], (2, 4))
case("global_max", x_pool, {"a": shifted(x_pool, distinct(2, 2, 5, 5))},
     [n("Add", ["x", "a"], ["xa"]), n("GlobalMaxPool", ["xa"], ["y"])], (2, 2, 1, 1))
case("unsqueeze_squeeze", x24, {"a": f32(2, 4)},
     [n("Add", ["x", "a"], ["xa"]), const("ax", np.array([1], np.int64)),
      n("Unsqueeze", ["xa", "ax"], ["u"]), n("Mul", ["u", "u"], ["uu"]),
      n("Squeeze", ["uu", "ax"], ["y"])], (2, 4))
case("expand", f32(2, 1, 4) * 0.1, {"a": f32(2, 1, 4), "e": f32(3, 1)},
     [n("Add", ["x", "a"], ["xa"]), n("Add", ["xa", "e"], ["xe"]),
      const("s", np.array([2, 3, 4], np.int64)),
      n("Expand", ["xe", "s"], ["y"])], (2, 3, 4))
case("expand_broadcast", f32(2, 1, 4) * 0.1, {"a": f32(2, 1, 4)},
     [n("Add", ["x", "a"], ["xa"]), const("s", np.array([3, 1], np.int64)),
      n("Expand", ["xa", "s"], ["y"])], (2, 3, 4))
# Issue 15: activations (inputs at least 0.2 from their kinks), Clip, Max/Min
# (no ties), Mod.
xs = np.zeros((2, 4), np.float32)
act = away_from_zero(2, 4) * 2
for name, node in [("leakyrelu", n("LeakyRelu", ["xa"], ["y"], alpha=0.2)),
                   ("elu", n("Elu", ["xa"], ["y"], alpha=0.7)),
                   ("selu", n("Selu", ["xa"], ["y"])),
                   ("softplus", n("Softplus", ["xa"], ["y"])),
                   ("hardswish", n("HardSwish", ["xa"], ["y"])),
                   ("abs", n("Abs", ["xa"], ["y"]))]:
    case(name, xs, {"a": act}, [n("Add", ["x", "a"], ["xa"]), node], (2, 4))
# Kinks at -4/3 and 2; both saturated sides and the slope.
case("hardsigmoid", xs, {"a": np.array([[-2.0, -1.0, 0.5, 1.5], [2.5, -0.3, 1.0, -1.6]],
                                       np.float32)},
     [n("Add", ["x", "a"], ["xa"]), n("HardSigmoid", ["xa"], ["y"], alpha=0.3, beta=0.4)],
     (2, 4))
case("hardswish_tails", xs, {"a": np.array([[-4.5, -3.5, 3.5, 4.5], [-2.5, 2.5, 0.5, -0.5]],
                                           np.float32)},
     [n("Add", ["x", "a"], ["xa"]), n("HardSwish", ["xa"], ["y"])], (2, 4))
case("reciprocal", xs, {"a": f32(2, 4, low=0.5, high=1.5)},
     [n("Add", ["x", "a"], ["xa"]), n("Reciprocal", ["xa"], ["y"])], (2, 4))
for mode in ["none", "tanh"]:
    case("gelu_" + mode, xs, {"a": f32(2, 4) * 2},
         [n("Add", ["x", "a"], ["xa"]), n("Gelu", ["xa"], ["y"], approximate=mode)],
         (2, 4), opset=20)
case("clip", xs, {"a": np.array([[-2.0, -0.7, 0.3, 1.4], [0.9, -0.2, 2.5, -1.1]],
                                np.float32)},
     [n("Add", ["x", "a"], ["xa"]), const("lo", np.array(-1.0, np.float32)),
      const("hi", np.array(1.0, np.float32)), n("Clip", ["xa", "lo", "hi"], ["y"])],
     (2, 4))
case("clip_min_only", xs, {"a": np.array([[-2.0, -0.7, 0.3, 1.4], [0.9, -0.2, 2.5, -1.1]],
                                         np.float32)},
     [n("Add", ["x", "a"], ["xa"]), const("lo", np.array(-0.5, np.float32)),
      n("Clip", ["xa", "lo"], ["y"])], (2, 4))
case("max", xs, {"a": distinct(2, 4), "b": distinct(4) + 0.0125},
     [n("Add", ["x", "a"], ["xa"]), n("Max", ["xa", "b"], ["y"])], (2, 4))
case("min3", xs, {"a": distinct(2, 4), "b": distinct(4) + 0.0125,
                  "c": distinct(2, 1) + 0.03},
     [n("Add", ["x", "a"], ["xa"]), n("Min", ["xa", "b", "c"], ["y"])], (2, 4))
# Ties: central differences give 1/2 to each operand, which is PyTorch's
# torch.maximum/minimum convention that the VJP follows.
tie_a = distinct(2, 4)
tie_b = tie_a[0] + np.array([0.0, 0.1, 0.0, -0.1], np.float32)
case("max_ties", xs, {"a": tie_a, "b": tie_b},
     [n("Add", ["x", "a"], ["xa"]), n("Max", ["xa", "b"], ["y"])], (2, 4))
case("min_ties", xs, {"a": tie_a, "b": tie_b},
     [n("Add", ["x", "a"], ["xa"]), n("Min", ["xa", "b"], ["y"])], (2, 4))
case("fmod", xs, {"a": np.array([[2.3, -2.3, 0.4, -0.9], [3.7, -1.2, 1.6, 0.2]],
                                np.float32),
                  "b": np.array([1.5, 1.5, -0.7, 0.8], np.float32)},
     [n("Add", ["x", "a"], ["xa"]), n("Mod", ["xa", "b"], ["y"], fmod=1)], (2, 4))
# Issue 15: extremum reductions (distinct values: no ties within reach),
# CumSum, Tile, Pad (each mode), Trilu. Squares make the loss non-linear.
x234 = np.zeros((2, 3, 4), np.float32)
case("reducemax", x234, {"a": distinct(2, 3, 4)},
     [n("Add", ["x", "a"], ["xa"]), n("ReduceMax", ["xa"], ["y"], axes=[1])], (2, 1, 4))
case("reducemin_all", x234, {"a": distinct(2, 3, 4)},
     [n("Add", ["x", "a"], ["xa"]), n("ReduceMin", ["xa"], ["m"], keepdims=0),
      n("Mul", ["m", "m"], ["y"])], ())
for name, kw in [("cumsum", {}), ("cumsum_exclusive_reverse", {"exclusive": 1, "reverse": 1})]:
    case(name, x234, {"a": f32(2, 3, 4)},
         [n("Add", ["x", "a"], ["xa"]), const("ax", np.array(2, np.int64)),
          n("CumSum", ["xa", "ax"], ["c"], **kw), n("Mul", ["c", "c"], ["y"])], (2, 3, 4))
case("tile", x234, {"a": f32(2, 3, 4)},
     [n("Add", ["x", "a"], ["xa"]), const("r", np.array([1, 2, 3], np.int64)),
      n("Tile", ["xa", "r"], ["t"]), n("Mul", ["t", "t"], ["y"])], (2, 6, 12))
for mode, pads in [("constant", [0, 1, -1, 0, 2, 2]), ("reflect", [0, 2, 3, 0, 1, 2]),
                   ("edge", [0, 2, 0, 0, 1, 4])]:
    p_arr = np.array(pads, np.int64)
    shape = tuple(d + p_arr[i] + p_arr[i + 3] for i, d in enumerate((2, 3, 4)))
    case("pad_" + mode, x234, {"a": f32(2, 3, 4)},
         [n("Add", ["x", "a"], ["xa"]), const("p", p_arr),
          n("Pad", ["xa", "p"], ["t"], mode=mode), n("Mul", ["t", "t"], ["y"])], shape)
for name, upper, k in [("trilu_upper", 1, 0), ("trilu_lower", 0, 1)]:
    case(name, x234, {"a": f32(2, 3, 4)},
         [n("Add", ["x", "a"], ["xa"]), const("k", np.array(k, np.int64)),
          n("Trilu", ["xa", "k"], ["t"], upper=upper), n("Mul", ["t", "t"], ["y"])],
         (2, 3, 4))

# Recurrent: x (batch 2, seq 3, input 3) + a, transposed to ONNX's layout 0;
# W, R, B and the initial states trained.
xs = f32(2, 3, 3) * 0.1
Hd = 2
to_seq = [n("Add", ["x", "a"], ["xa"]), n("Transpose", ["xa"], ["xt"], perm=[1, 0, 2])]


def flat_concat(names):
    nodes = [const("flat", np.array([-1], np.int64))]
    for k in names:
        nodes.append(n("Reshape", [k, "flat"], [k + "_f"]))
    nodes.append(n("Concat", [k + "_f" for k in names], ["y"], axis=0))
    return nodes


def rnn_params(gates, dirs, states):
    p = {"a": f32(2, 3, 3), "w": f32(dirs, gates * Hd, 3) * 0.5,
         "r": f32(dirs, gates * Hd, Hd) * 0.5, "b": f32(dirs, 2 * gates * Hd) * 0.5}
    for k in states:
        p[k] = f32(dirs, 2, Hd) * 0.5
    return p


case("lstm_bidi", xs, rnn_params(4, 2, ["h0", "c0"]),
     to_seq + [n("LSTM", ["xt", "w", "r", "b", "", "h0", "c0"], ["Y", "Yh", "Yc"],
                 hidden_size=Hd, direction="bidirectional")]
     + flat_concat(["Y", "Yh", "Yc"]), (3 * 2 * 2 * Hd + 2 * 2 * 2 * Hd,))
case("lstm_reverse_yh", xs, rnn_params(4, 1, []),
     to_seq + [n("LSTM", ["xt", "w", "r", "b"], ["", "y"], hidden_size=Hd,
                 direction="reverse")], (1, 2, Hd))
case("gru_bidi", xs, rnn_params(3, 2, ["h0"]),
     to_seq + [n("GRU", ["xt", "w", "r", "b", "", "h0"], ["Y", "Yh"], hidden_size=Hd,
                 direction="bidirectional", linear_before_reset=1)]
     + flat_concat(["Y", "Yh"]), (3 * 2 * 2 * Hd + 2 * 2 * Hd,))

case("gru_lbr0", xs, rnn_params(3, 1, ["h0"]),
     to_seq + [n("GRU", ["xt", "w", "r", "b", "", "h0"], ["Y", "Yh"], hidden_size=Hd)]
     + flat_concat(["Y", "Yh"]), (3 * 1 * 2 * Hd + 1 * 2 * Hd,))


def torch_case(name, kind, x, **kw):
    """torch.nn.LSTM / GRU (batch_first) exported at opset 17; its float
    initializers (each layer's W, R, B) become the trained parameters."""
    import io
    import torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(3)
            self.rnn = getattr(torch.nn, kind)(x.shape[2], Hd, batch_first=True, **kw)

        def forward(self, v):
            return self.rnn(v)[0]
    buf = io.BytesIO()
    torch.onnx.export(M().eval(), torch.from_numpy(x), buf, opset_version=17,
                      input_names=["x"], output_names=["y"])
    m = onnx.load_from_string(buf.getvalue())
    params, nodes = {}, []
    for t in m.graph.initializer:
        arr = numpy_helper.to_array(t)
        if arr.dtype == np.float32:
            params[t.name] = arr.copy()
        else:
            nodes.append(const(t.name, arr))
    y_shape = tuple(d.dim_value for d in m.graph.output[0].type.tensor_type.shape.dim)
    case(name, x, params, nodes + list(m.graph.node), y_shape)


# Issue 15: Einsum (decomposed at import: the gradients of Transpose,
# Reshape, MatMul, ReduceSum and a diagonal's Mul), ConvTranspose (dX a Conv,
# dW a ConvGrad with the roles swapped, dB a sum) and Resize (ResizeGrad).
for name, eq, xshape, wshape in [
        ("einsum_bmm", "bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
        ("einsum_attn", "bhqd,bhkd->bhqk", (2, 2, 3, 4), (2, 2, 5, 4)),
        ("einsum_mm_t", "ij,kj->ik", (2, 4), (3, 4)),
        ("einsum_dot_rows", "bi,bi->b", (2, 4), (2, 4)),
        ("einsum_diag", "bii,bi->bi", (2, 3, 3), (2, 3))]:
    xe = f32(*xshape) * 0.1
    out = np.einsum(eq, xe, f32(*wshape)).shape
    case(name, xe, {"a": f32(*xshape), "w": f32(*wshape)},
         [n("Add", ["x", "a"], ["xa"]), n("Einsum", ["xa", "w"], ["y"], equation=eq)], out,
         opset=12)
xc = f32(2, 4, 3, 4) * 0.1
case("convtranspose", xc, {"a": f32(2, 4, 3, 4), "w": f32(4, 3, 3, 2), "b": f32(6)},
     [n("Add", ["x", "a"], ["xa"]),
      n("ConvTranspose", ["xa", "w", "b"], ["y"], strides=[2, 3], pads=[1, 0, 0, 1],
        output_padding=[1, 2], group=2, dilations=[1, 2])], (2, 6, 7, 13))
xc1 = f32(2, 3, 5) * 0.1
case("convtranspose1d", xc1, {"a": f32(2, 3, 5), "w": f32(3, 2, 3)},
     [n("Add", ["x", "a"], ["xa"]),
      n("ConvTranspose", ["xa", "w"], ["y"], strides=[2], auto_pad="SAME_UPPER")],
     (2, 2, 10))
xr4 = f32(2, 2, 3, 4) * 0.1
for name, attrs, scales, sizes, shape in [
        ("resize_nearest", dict(mode="nearest", coordinate_transformation_mode="asymmetric",
                                nearest_mode="floor"), [1, 1, 2, 2], None, (2, 2, 6, 8)),
        ("resize_linear", dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
         [1, 1, 2, 1.5], None, (2, 2, 6, 6)),
        ("resize_linear_align_down", dict(mode="linear",
                                          coordinate_transformation_mode="align_corners"),
         None, [2, 2, 2, 3], (2, 2, 2, 3)),
        ("resize_cubic", dict(mode="cubic"), None, [2, 2, 5, 7], (2, 2, 5, 7))]:
    nodes = [n("Add", ["x", "a"], ["xa"])]
    if scales is not None:
        nodes += [const("s", np.array(scales, np.float32)),
                  n("Resize", ["xa", "", "s"], ["t"], **attrs)]
    else:
        nodes += [const("s", np.array(sizes, np.int64)),
                  n("Resize", ["xa", "", "", "s"], ["t"], **attrs)]
    case(name, xr4, {"a": f32(2, 2, 3, 4)}, nodes + [n("Mul", ["t", "t"], ["y"])], shape,
         opset=13)

torch_case("torch_lstm_2layer", "LSTM", xs, num_layers=2)
torch_case("torch_gru_bidi", "GRU", xs, bidirectional=True)
print("wrote", count, "models")
