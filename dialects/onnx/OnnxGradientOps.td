//===- OnnxGradientOps.td - gradient ops ONNX lacks ------------*- tablegen -*-===//
//
// The backward ops `--pipe-autodiff` emits where a gradient is not a plain
// composition of forward ops, plus the PyTorch-style optimizer updates that
// ai.onnx.preview.training cannot express. Each op mirrors one pipert kernel
// (runtime/include/pipert/pipert_kernels.h) in inputs and attributes, so the
// lowering turns each into one call (ConvGrad: one call per used result).
//
// Conventions shared by all of them:
//  - Gradients are named after what they are the gradient of: `dY` is the
//    gradient of the forward op's output, `dX` of its input, and so on. A
//    gradient has the type of the value it is the gradient of.
//  - Where a kernel only needs the forward input's shape, the op takes a 1-D
//    i64 `shape` operand (an onnx.Constant, like Reshape's target) instead of
//    the tensor, so the backward does not keep the activation alive. Passes
//    that change the batch size rewrite these like Reshape targets.
//  - Pads are explicit (ONNX order: all begins, then all ends); autodiff
//    resolves the forward's auto_pad.
//  - Results nobody uses need not be computed (the kernels' nullable
//    outputs).
//
// Included from OnnxOps.td, whose op classes it uses.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_ONNX_GRADIENT_OPS
#define PIPEC_ONNX_GRADIENT_OPS

include "dialects/onnx/OnnxOps.td"

def ONNX_ShapeOperand : TensorOf<[I64]>;

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class ONNX_ActivationGradOp<string mnemonic, string saved, string kernel>
    : ONNX_ShapedOp<mnemonic> {
  let summary = "dX = dY * f'(.) of an activation, from the forward " # saved;
  let description = "Lowers to `" # kernel # "`. Operands: the forward's " #
      saved # " and dY (same shape).";
}

// Autodiff passes Relu's output Y as X (dX = dY where Y > 0, as where X > 0,
// bit for bit, NaN included): the forward's input then dies at the Relu,
// which is written over it, as PyTorch's threshold_backward reads the result.
def ONNX_ReluGradOp
    : ONNX_ActivationGradOp<"ReluGrad", "input X (or its output: Relu(X) > 0 " #
                            "exactly where X > 0)", "pipert_relu_grad_f32"> {
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$dY);
  let results = (outs AnyTensor:$dX);
}
def ONNX_TanhGradOp
    : ONNX_ActivationGradOp<"TanhGrad", "output Y", "pipert_tanh_grad_f32"> {
  let arguments = (ins ONNX_FloatTensor:$Y, ONNX_FloatTensor:$dY);
  let results = (outs AnyTensor:$dX);
}
def ONNX_SigmoidGradOp
    : ONNX_ActivationGradOp<"SigmoidGrad", "output Y",
                            "pipert_sigmoid_grad_f32"> {
  let arguments = (ins ONNX_FloatTensor:$Y, ONNX_FloatTensor:$dY);
  let results = (outs AnyTensor:$dX);
}
def ONNX_ErfGradOp
    : ONNX_ActivationGradOp<"ErfGrad", "input X", "pipert_erf_grad_f32"> {
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$dY);
  let results = (outs AnyTensor:$dX);
}

def ONNX_UnaryGradOp : ONNX_ShapedOp<"UnaryGrad"> {
  let summary = "dX = dY * f'(X) of a parametrised elementwise op";
  let description = [{
    `activation` names the forward op: LeakyRelu, Elu, Selu, Softplus,
    HardSigmoid, HardSwish, Gelu, GeluTanh, Abs, Reciprocal; `alpha` and
    `beta` are its attributes (Selu: alpha, gamma; HardSigmoid: alpha, beta).
    Operands: the forward input X and dY (same shape). Lowers to
    `pipert_activation_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$dY,
                   StrAttr:$activation,
                   DefaultValuedAttr<F32Attr, "0.0">:$alpha,
                   DefaultValuedAttr<F32Attr, "0.0">:$beta);
  let results = (outs AnyTensor:$dX);
}

def ONNX_ReduceToShapeOp : ONNX_ShapedOp<"ReduceToShape"> {
  let summary = "sums a broadcast gradient back to an operand's shape";
  let description = [{
    `dX = dY` summed over the axes that numpy broadcasting expanded when an
    operand of shape `shape` was broadcast to dY's shape: dY's leading axes
    beyond `shape`'s rank, and axes where `shape` has extent 1 (kept as 1).
    The gradient of every broadcasting binary op and of Expand. `shape` must
    be a constant that broadcasts to dY's shape. Lowers to
    `pipert_reduce_to_shape_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$dY, ONNX_ShapeOperand:$shape);
  let results = (outs AnyTensor:$dX);
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

def ONNX_SoftmaxGradOp : ONNX_ShapedOp<"SoftmaxGrad"> {
  let summary = "gradient of Softmax from its output";
  let description = [{
    dX = Y * (dY - sum(dY * Y, axis)). Lowers to `pipert_softmax_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$Y, ONNX_FloatTensor:$dY,
                   DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs AnyTensor:$dX);
}

def ONNX_LogSoftmaxGradOp : ONNX_ShapedOp<"LogSoftmaxGrad"> {
  let summary = "gradient of LogSoftmax from its output";
  let description = [{
    dX = dY - exp(Y) * sum(dY, axis). Lowers to
    `pipert_log_softmax_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$Y, ONNX_FloatTensor:$dY,
                   DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs AnyTensor:$dX);
}

def ONNX_AttentionGradOp : ONNX_ShapedOp<"AttentionGrad"> {
  let summary = "gradient of Attention from its saved probabilities";
  let description = [{
    From the forward's Q, K, V (K and V none for a fused projection), its
    saved probabilities P (B, H, T, S) (the training form's 2nd result) and
    dY: dQ, dK, dV of their operands' types, or only dQ (the fused
    projection's gradient) when K and V are none. The mask is not needed:
    a masked position's P is zero, and so its gradient; `is_causal` (the
    forward's) lets the kernel skip the blocks after the diagonal.
    `dropout` (the forward's): P's dropped elements carry the sign bit, and
    the gradient is that of the dropped probabilities. Lowers to
    `pipert_attention_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$Q, ONNX_FloatTensorOrNone:$K,
                   ONNX_FloatTensorOrNone:$V, ONNX_FloatTensor:$Probs,
                   ONNX_FloatTensor:$dY,
                   DefaultValuedAttr<I64Attr, "0">:$is_causal,
                   OptionalAttr<I64Attr>:$q_num_heads,
                   OptionalAttr<F32Attr>:$scale,
                   DefaultValuedAttr<I64Attr, "0">:$seq_first,
                   OptionalAttr<F32Attr>:$dropout);
  let results = (outs Variadic<AnyTensor>:$grads);
}

def ONNX_LayerNormalizationGradOp : ONNX_ShapedOp<"LayerNormalizationGrad"> {
  let summary = "gradient of LayerNormalization";
  let description = [{
    From the forward input X, Scale, the forward's saved Mean and InvStdDev
    (its optional outputs) and dY: results dX (X's type), dScale (Scale's
    type) and dB (Scale's type, the gradient of the bias). Lowers to
    `pipert_layer_norm_grad_f32` (dScale and dB are its nullable outputs).
  }];
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$Scale,
                   ONNX_FloatTensor:$Mean, ONNX_FloatTensor:$InvStdDev,
                   ONNX_FloatTensor:$dY,
                   DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs AnyTensor:$dX, AnyTensor:$dScale, AnyTensor:$dB);
}

def ONNX_BatchNormalizationGradOp
    : ONNX_ShapedOp<"BatchNormalizationGrad"> {
  let summary = "gradient of training-mode BatchNormalization";
  let description = [{
    X is (N, C, d...), scale (C). The batch statistics the forward
    normalized with (mean and 1/sqrt(biased variance + epsilon) over N and
    d...) are recomputed from X, so that the gradient depends only on
    per-sample values: under micro-batching it uses the micro-batch's own
    statistics, as its forward did. Results dX (X's type), dscale and dB
    (scale's type). Lowers to `pipert_batch_norm_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$scale,
                   ONNX_FloatTensor:$dY,
                   DefaultValuedAttr<F32Attr, "1e-5">:$epsilon);
  let results = (outs AnyTensor:$dX, AnyTensor:$dscale, AnyTensor:$dB);
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

def ONNX_ConvGradOp : ONNX_ShapedOp<"ConvGrad"> {
  let summary = "gradients of Conv with respect to X, W and B";
  let description = [{
    From dY, the forward input X and weight W: dX (X's type), dW (W's type)
    and dB (shape (M), the bias gradient). Attributes are the forward's with
    auto_pad resolved: `pads`, `strides`, `dilations` explicit, and
    `kernel_shape` W's spatial shape. Each result lowers to one call:
    `pipert_conv2d_grad_input_f32`, `pipert_conv2d_grad_weight_f32`,
    `pipert_conv2d_grad_bias_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$dY, ONNX_FloatTensor:$X,
                   ONNX_FloatTensor:$W,
                   DenseI64ArrayAttr:$dilations,
                   DefaultValuedAttr<I64Attr, "1">:$group,
                   DenseI64ArrayAttr:$kernel_shape,
                   DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$strides);
  let results = (outs AnyTensor:$dX, AnyTensor:$dW, AnyTensor:$dB);
}

def ONNX_MaxPoolGradOp : ONNX_ShapedOp<"MaxPoolGrad"> {
  let summary = "gradient of MaxPool: dY routed to each window's first maximum";
  let description = [{
    From the forward input X (the maxima are recomputed) and dY; dX has X's
    type. Attributes are the forward's with auto_pad resolved into `pads`.
    Lowers to `pipert_maxpool2d_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$dY,
                   DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                   DenseI64ArrayAttr:$dilations,
                   DenseI64ArrayAttr:$kernel_shape,
                   DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$strides);
  let results = (outs AnyTensor:$dX);
}

def ONNX_AveragePoolGradOp : ONNX_ShapedOp<"AveragePoolGrad"> {
  let summary = "gradient of AveragePool";
  let description = [{
    dX (of shape `shape`, the forward input's) spreads each dY entry evenly
    over its window, with the forward's divisor. Lowers to
    `pipert_avgpool2d_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$dY, ONNX_ShapeOperand:$shape,
                   DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                   DefaultValuedAttr<I64Attr, "0">:$count_include_pad,
                   DenseI64ArrayAttr:$kernel_shape,
                   DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$strides);
  let results = (outs AnyTensor:$dX);
}

def ONNX_GlobalAveragePoolGradOp : ONNX_ShapedOp<"GlobalAveragePoolGrad"> {
  let summary = "gradient of GlobalAveragePool";
  let description = [{
    dX (of shape `shape`, (N, C, d...)) = dY (N, C, 1...) broadcast and
    divided by the number of spatial elements. Lowers to
    `pipert_global_avgpool_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$dY, ONNX_ShapeOperand:$shape);
  let results = (outs AnyTensor:$dX);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def ONNX_SliceGradOp : ONNX_ShapedOp<"SliceGrad"> {
  let summary = "gradient of Slice: dY placed into zeros of the input's shape";
  let description = [{
    `starts`, `ends`, `axes`, `steps` are the forward Slice's operands
    (same conventions); dX has shape `shape`. Lowers to
    `pipert_slice_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$dY, ONNX_ShapeOperand:$shape,
                   ONNX_IntTensor:$starts, ONNX_IntTensor:$ends,
                   ONNX_IntTensorOrNone:$axes, ONNX_IntTensorOrNone:$steps);
  let results = (outs AnyTensor:$dX);
}

def ONNX_GatherGradOp : ONNX_ShapedOp<"GatherGrad"> {
  let summary = "gradient of Gather: scatter-add of dY into zeros";
  let description = [{
    dX (shape `shape`, the forward data's) is zero except that dY's slices
    are added at `indices` along `axis` (repeated indices accumulate).
    Lowers to `pipert_gather_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$dY, ONNX_ShapeOperand:$shape,
                   ONNX_IntTensor:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs AnyTensor:$dX);
}

def ONNX_GatherNDGradOp : ONNX_ShapedOp<"GatherNDGrad"> {
  let summary = "gradient of GatherND: scatter-add of dY into zeros";
  let description = [{
    dX (shape `shape`, the forward data's) is zero except that dY's slices
    are added at the k-tuples of `indices` (repeated tuples accumulate).
    Lowers to `pipert_gather_nd_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$dY, ONNX_ShapeOperand:$shape,
                   ONNX_IntTensor:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$batch_dims);
  let results = (outs AnyTensor:$dX);
}

def ONNX_ScatterNDGradOp : ONNX_ShapedOp<"ScatterNDGrad"> {
  let summary = "gradient of ScatterND (reduction none) for its data";
  let description = [{
    dData is dY with the slices the forward replaced set to zero (their
    values came from updates, whose gradient is GatherND(dY, indices)).
    Lowers to `pipert_scatter_nd_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$dY, ONNX_IntTensor:$indices);
  let results = (outs AnyTensor:$dData);
}

def ONNX_GatherElementsGradOp : ONNX_ShapedOp<"GatherElementsGrad"> {
  let summary = "gradient of GatherElements: scatter-add of dY into zeros";
  let description = [{
    dX (shape `shape`, the forward data's) is zero except that each entry
    of dY is added where its index points along `axis` (repeated positions
    accumulate). Lowers to `pipert_gather_elements_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$dY, ONNX_ShapeOperand:$shape,
                   ONNX_IntTensor:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs AnyTensor:$dX);
}

def ONNX_ScatterElementsGradOp : ONNX_ShapedOp<"ScatterElementsGrad"> {
  let summary = "gradient of ScatterElements (reduction none) for its data";
  let description = [{
    dData is dY with the entries the forward replaced set to zero (the
    gradient of updates is GatherElements(dY, indices)). Lowers to
    `pipert_scatter_elements_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$dY, ONNX_IntTensor:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs AnyTensor:$dData);
}

def ONNX_DropoutGradOp : ONNX_ShapedOp<"DropoutGrad"> {
  let summary = "gradient of Dropout from its mask";
  let description = [{
    dX = dY * mask / (1 - ratio) when `training_mode` is true, else dY.
    `ratio` and `training_mode` are the forward's operands (none: 0.5 and
    false, as in Dropout). Lowers to `pipert_dropout_grad_f32` with the
    ratio, or 0 when not training.
  }];
  let arguments = (ins ONNX_FloatTensor:$dY, TensorOf<[I1]>:$mask,
                   ONNX_FloatTensorOrNone:$ratio,
                   AnyTypeOf<[TensorOf<[I1]>, NoneType]>:$training_mode);
  let results = (outs AnyTensor:$dX);
}

def ONNX_ReduceExtremumGradOp : ONNX_ShapedOp<"ReduceExtremumGrad"> {
  let summary = "gradient of ReduceMax (ReduceMin with select_min = 1)";
  let description = [{
    dX (X's type) is zero except that each dY entry goes to the first
    (row-major) maximum (minimum) of its group of X. `axes` and
    `noop_with_empty_axes` are the forward's. Lowers to
    `pipert_reduce_extremum_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$dY,
                   ONNX_I64TensorOrNone:$axes,
                   DefaultValuedAttr<I64Attr, "0">:$noop_with_empty_axes,
                   DefaultValuedAttr<I64Attr, "0">:$select_min);
  let results = (outs AnyTensor:$dX);
}

def ONNX_TileGradOp : ONNX_ShapedOp<"TileGrad"> {
  let summary = "gradient of Tile: dY summed over the tiles";
  let description = [{
    dX has shape `shape` (the forward input's); `repeats` is the forward's.
    Lowers to `pipert_tile_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$dY, ONNX_ShapeOperand:$shape,
                   TensorOf<[I64]>:$repeats);
  let results = (outs AnyTensor:$dX);
}

def ONNX_PadGradOp : ONNX_ShapedOp<"PadGrad"> {
  let summary = "gradient of Pad";
  let description = [{
    dX (shape `shape`, the forward input's) sums dY over the outputs that
    read each input element. `pads` is explicit for every axis (begins,
    then ends); `mode` the forward's. Lowers to `pipert_pad_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$dY, ONNX_ShapeOperand:$shape,
                   TensorOf<[I64]>:$pads,
                   DefaultValuedStrAttr<StrAttr, "constant">:$mode);
  let results = (outs AnyTensor:$dX);
}

def ONNX_ResizeGradOp : ONNX_ShapedOp<"ResizeGrad"> {
  let summary = "gradient of Resize: dY scattered back through the taps";
  let description = [{
    dX has shape `shape` (the forward input's). Attributes are the
    forward's, with `scales` (one per axis; absent: out / in, the sizes
    form) and `roi` (starts, then ends, every axis; tf_crop_and_resize)
    resolved. Lowers to `pipert_resize_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$dY, ONNX_ShapeOperand:$shape,
                   StrAttr:$coordinate_transformation_mode,
                   DefaultValuedAttr<F32Attr, "-0.75">:$cubic_coeff_a,
                   DefaultValuedAttr<I64Attr, "0">:$exclude_outside,
                   StrAttr:$mode,
                   StrAttr:$nearest_mode,
                   OptionalAttr<DenseF32ArrayAttr>:$scales,
                   OptionalAttr<DenseF32ArrayAttr>:$roi);
  let results = (outs AnyTensor:$dX);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def ONNX_SoftmaxCrossEntropyLossGradOp
    : ONNX_ShapedOp<"SoftmaxCrossEntropyLossGrad"> {
  let summary = "gradient of SoftmaxCrossEntropyLoss with respect to scores";
  let description = [{
    From dloss (a scalar, or the labels' shape for reduction "none"), the
    forward's `log_prob` output, labels and the optional weights; the
    attributes are the forward's. dscores has log_prob's type. Lowers to
    `pipert_softmax_cross_entropy_loss_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$dloss, ONNX_FloatTensor:$log_prob,
                   ONNX_IntTensor:$labels, ONNX_FloatTensorOrNone:$weights,
                   OptionalAttr<I64Attr>:$ignore_index,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction);
  let results = (outs AnyTensor:$dscores);
  let hasVerifier = 1;
}

def ONNX_NegativeLogLikelihoodLossGradOp
    : ONNX_ShapedOp<"NegativeLogLikelihoodLossGrad"> {
  let summary = "gradient of NegativeLogLikelihoodLoss with respect to input";
  let description = [{
    From dloss, the forward input's `shape` (N, C, d...), target and the
    optional weight; attributes are the forward's. dinput has shape `shape`
    and dloss's element type. Lowers to `pipert_nll_loss_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$dloss, ONNX_ShapeOperand:$shape,
                   ONNX_IntTensor:$target, ONNX_FloatTensorOrNone:$weight,
                   OptionalAttr<I64Attr>:$ignore_index,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction);
  let results = (outs AnyTensor:$dinput);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Optimizer updates with PyTorch semantics
//===----------------------------------------------------------------------===//

def ONNX_SGDOp : ONNX_ShapedOp<"SGD"> {
  let summary = "plain SGD step on one tensor (torch.optim.SGD, momentum 0)";
  let description = [{
    X_new = X - R * (G + weight_decay * X). R is the learning rate (f32
    scalar). Lowers to `pipert_sgd_f32`. (SGD with momentum is ONNX
    Momentum with alpha = momentum, beta = 1 - dampening, norm_coefficient =
    weight_decay, which matches torch.optim.SGD exactly.)
  }];
  let arguments = (ins ONNX_FloatTensor:$R, ONNX_FloatTensor:$X,
                   ONNX_FloatTensor:$G,
                   DefaultValuedAttr<F32Attr, "0.0">:$weight_decay);
  let results = (outs AnyTensor:$X_new);
}

def ONNX_AdamWOp : ONNX_ShapedOp<"AdamW"> {
  let summary = "AdamW step on one tensor (torch.optim.AdamW)";
  let description = [{
    PyTorch's formula, with decoupled weight decay and epsilon added after
    the bias-corrected square root (which ONNX Adam does not do):
      X' = X * (1 - R * weight_decay)
      M_new = beta1 M + (1 - beta1) G;  V_new = beta2 V + (1 - beta2) G^2
      X_new = X' - R / (1 - beta1^T) * M_new / (sqrt(V_new / (1 - beta2^T)) + epsilon)
    T (i64 scalar) is the number of this update counting from 1 (PyTorch's
    `step`). With weight_decay 0 this is torch.optim.Adam; Adam's L2 decay
    is G + wd * X computed before. Results X_new, M_new, V_new. Lowers to
    `pipert_adamw_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$R, TensorOf<[I64]>:$T,
                   ONNX_FloatTensor:$X, ONNX_FloatTensor:$G,
                   ONNX_FloatTensor:$M, ONNX_FloatTensor:$V,
                   DefaultValuedAttr<F32Attr, "0.9">:$beta1,
                   DefaultValuedAttr<F32Attr, "0.999">:$beta2,
                   DefaultValuedAttr<F32Attr, "1e-8">:$epsilon,
                   DefaultValuedAttr<F32Attr, "0.01">:$weight_decay);
  let results = (outs AnyTensor:$X_new, AnyTensor:$M_new, AnyTensor:$V_new);
}

//===----------------------------------------------------------------------===//
// Recurrent
//===----------------------------------------------------------------------===//

def ONNX_LSTMGradOp : ONNX_ShapedOp<"LSTMGrad"> {
  let summary = "gradients of LSTM (BPTT) with respect to all its inputs";
  let description = [{
    From the forward's inputs (layout 0; B, initial_h, initial_c may be
    none), the gradients dY, dY_h, dY_c of its outputs (none where no
    gradient flows) and the forward's saved states (its result #3, which
    autodiff adds to the LSTM it differentiates; none: the kernel recomputes
    them): dX, dW, dR, dB, dinitial_h, dinitial_c, each of the type of what
    it is the gradient of (dB (dirs, 8 hidden) and the initial states'
    (dirs, batch, hidden) even where the input is none). Lowers to
    `pipert_lstm_grad_f32` (every result nullable).
  }];
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$W,
                   ONNX_FloatTensor:$R, ONNX_FloatTensorOrNone:$B,
                   ONNX_FloatTensorOrNone:$initial_h,
                   ONNX_FloatTensorOrNone:$initial_c,
                   ONNX_FloatTensorOrNone:$dY, ONNX_FloatTensorOrNone:$dY_h,
                   ONNX_FloatTensorOrNone:$dY_c,
                   ONNX_FloatTensorOrNone:$Saved,
                   DefaultValuedStrAttr<StrAttr, "forward">:$direction);
  let results = (outs AnyTensor:$dX, AnyTensor:$dW, AnyTensor:$dR,
                 AnyTensor:$dB, AnyTensor:$dinitial_h, AnyTensor:$dinitial_c);
}

def ONNX_GRUGradOp : ONNX_ShapedOp<"GRUGrad"> {
  let summary = "gradients of GRU (BPTT)";
  let description = [{
    As LSTMGrad without the cell state: from X, W, R, B, initial_h, dY,
    dY_h and the saved states (the GRU's result #2, or none) to dX, dW, dR,
    dB (dirs, 6 hidden), dinitial_h. Lowers to `pipert_gru_grad_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$W,
                   ONNX_FloatTensor:$R, ONNX_FloatTensorOrNone:$B,
                   ONNX_FloatTensorOrNone:$initial_h,
                   ONNX_FloatTensorOrNone:$dY, ONNX_FloatTensorOrNone:$dY_h,
                   ONNX_FloatTensorOrNone:$Saved,
                   DefaultValuedStrAttr<StrAttr, "forward">:$direction,
                   DefaultValuedAttr<I64Attr, "0">:$linear_before_reset);
  let results = (outs AnyTensor:$dX, AnyTensor:$dW, AnyTensor:$dR,
                 AnyTensor:$dB, AnyTensor:$dinitial_h);
}

#endif // PIPEC_ONNX_GRADIENT_OPS
