//===- OnnxOps.td - ONNX operators -----------------------------*- tablegen -*-===//
//
// One op per ONNX operator (ai.onnx up to opset 18, ai.onnx.preview.training).
//
// Optional outputs. ONNX marks an absent optional output by an empty name; an
// op here has results up to the last present output, in ONNX order, and an
// absent output before a present one is still a result (that nobody uses).
// A single optional output is an `Optional<>` result (Dropout mask, MaxPool
// Indices, SoftmaxCrossEntropyLoss log_prob); several trailing optional
// outputs are one `Variadic<>` result group whose length the shape function
// checks (LayerNormalization Mean/InvStdDev, BatchNormalization running
// statistics). Either way, only one variadic group per op, so the importer
// builds every op generically from its ONNX node without segment sizes.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_ONNX_OPS
#define PIPEC_ONNX_OPS

include "dialects/onnx/OnnxBase.td"
include "dialects/onnx/OnnxInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"

// An op with a shape function but no side-effect declaration (Dropout: it
// draws random numbers, so two of them must not be merged by CSE).
class ONNX_InferredOp<string mnemonic, list<Trait> traits = []>
    : ONNX_Op<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<ONNX_ShapeInferenceOpInterface>])>;

class ONNX_ShapedOp<string mnemonic, list<Trait> traits = []>
    : ONNX_InferredOp<mnemonic, !listconcat(traits, [Pure])>;

def ONNX_IntTensor : TensorOf<[AnyInteger]>;
def ONNX_IntTensorOrNone : AnyTypeOf<[ONNX_IntTensor, NoneType],
                                     "integer tensor or none">;
def ONNX_I64TensorOrNone : AnyTypeOf<[TensorOf<[I64]>, NoneType],
                                     "i64 tensor or none">;
def ONNX_FloatTensorOrNone : AnyTypeOf<[ONNX_FloatTensor, NoneType],
                                       "floating-point tensor or none">;

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

def ONNX_NoValueOp : ONNX_Op<"NoValue", [Pure, ConstantLike]> {
  let summary = "an absent optional input";
  let results = (outs NoneType:$none);
  let assemblyFormat = "attr-dict `:` type($none)";
  let hasFolder = 1;
}

def ONNX_ConstantOp : ONNX_ShapedOp<"Constant", [ConstantLike]> {
  let summary = "a constant tensor";
  let description = [{
    Only the `value` form: the importer turns `value_float(s)`,
    `value_int(s)` and `sparse_value` into an elements attribute.
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyTensor:$output);
  let assemblyFormat = "attr-dict `:` type($output)";
  let hasFolder = 1;
}

def ONNX_ConstantOfShapeOp : ONNX_ShapedOp<"ConstantOfShape"> {
  let summary = "a tensor of a given shape filled with one value";
  let description = [{
    `value` is a one-element tensor; without it the result is f32 zeros.
  }];
  let arguments = (ins TensorOf<[I64]>:$input,
                   OptionalAttr<ElementsAttr>:$value);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def ONNX_RangeOp : ONNX_ShapedOp<"Range"> {
  let summary = "start, start + delta, ... up to (excluding) limit";
  let arguments = (ins AnyTensor:$start, AnyTensor:$limit, AnyTensor:$delta);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// Numpy-broadcasting binary ops; result element type is the operands'.
class ONNX_BinaryOp<string mnemonic, list<Trait> traits = []>
    : ONNX_ShapedOp<mnemonic, traits> {
  let arguments = (ins AnyTensor:$A, AnyTensor:$B);
  let results = (outs AnyTensor:$C);
  let hasFolder = 1;
}
def ONNX_AddOp : ONNX_BinaryOp<"Add", [Commutative]>;
def ONNX_SubOp : ONNX_BinaryOp<"Sub">;
def ONNX_MulOp : ONNX_BinaryOp<"Mul", [Commutative]>;
def ONNX_DivOp : ONNX_BinaryOp<"Div"> {
  let description = [{ Integer division truncates toward zero. }];
}

def ONNX_PowOp : ONNX_ShapedOp<"Pow"> {
  let summary = "X ** Y, broadcasting; the result has X's element type";
  let arguments = (ins AnyTensor:$X, AnyTensor:$Y);
  let results = (outs AnyTensor:$Z);
}

def ONNX_EqualOp : ONNX_ShapedOp<"Equal", [Commutative]> {
  let summary = "elementwise A == B, broadcasting";
  let arguments = (ins AnyTensor:$A, AnyTensor:$B);
  let results = (outs AnyTensor:$C);
  let hasFolder = 1;
}

def ONNX_WhereOp : ONNX_ShapedOp<"Where"> {
  let summary = "condition ? X : Y, broadcasting all three";
  let arguments = (ins TensorOf<[I1]>:$condition, AnyTensor:$X, AnyTensor:$Y);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

// Unary ops that keep shape and element type.
class ONNX_UnaryOp<string mnemonic, list<Trait> traits = []>
    : ONNX_ShapedOp<mnemonic, traits> {
  let arguments = (ins AnyTensor:$X);
  let results = (outs AnyTensor:$Y);
}
class ONNX_FloatUnaryOp<string mnemonic, list<Trait> traits = []>
    : ONNX_ShapedOp<mnemonic, traits> {
  let arguments = (ins ONNX_FloatTensor:$input);
  let results = (outs AnyTensor:$output);
}
def ONNX_ReluOp : ONNX_UnaryOp<"Relu">;
def ONNX_NegOp : ONNX_UnaryOp<"Neg">;
def ONNX_TanhOp : ONNX_FloatUnaryOp<"Tanh">;
def ONNX_SigmoidOp : ONNX_UnaryOp<"Sigmoid"> {
  let arguments = (ins ONNX_FloatTensor:$X);
  let results = (outs AnyTensor:$Y);
}
def ONNX_ErfOp : ONNX_FloatUnaryOp<"Erf">;
def ONNX_SqrtOp : ONNX_UnaryOp<"Sqrt"> {
  let arguments = (ins ONNX_FloatTensor:$X);
  let results = (outs AnyTensor:$Y);
}
def ONNX_ExpOp : ONNX_FloatUnaryOp<"Exp">;
def ONNX_LogOp : ONNX_FloatUnaryOp<"Log">;
def ONNX_SinOp : ONNX_FloatUnaryOp<"Sin">;
def ONNX_CosOp : ONNX_FloatUnaryOp<"Cos">;

def ONNX_IdentityOp : ONNX_ShapedOp<"Identity"> {
  let arguments = (ins AnyTensor:$input);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def ONNX_CastOp : ONNX_ShapedOp<"Cast"> {
  let summary = "converts to the element type of ONNX data type code `to`";
  let description = [{
    `to` is a TensorProto.DataType code; see `onnxDataTypeToType` for the
    element types (signed integers are signless, unsigned ones `ui*`, BOOL
    is i1). STRING has no MLIR tensor type and is rejected.
  }];
  let arguments = (ins AnyTensor:$input, I64Attr:$to);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

// More unary ops (issue 15). All keep the input's shape and element type
// (Not: i1). Sign, Floor and Ceil have zero gradient almost everywhere.
def ONNX_AbsOp : ONNX_UnaryOp<"Abs">;
def ONNX_ReciprocalOp : ONNX_UnaryOp<"Reciprocal">;
def ONNX_SignOp : ONNX_UnaryOp<"Sign">;
def ONNX_FloorOp : ONNX_UnaryOp<"Floor">;
def ONNX_CeilOp : ONNX_UnaryOp<"Ceil">;
def ONNX_SoftplusOp : ONNX_UnaryOp<"Softplus">;
def ONNX_HardSwishOp : ONNX_UnaryOp<"HardSwish">;
def ONNX_NotOp : ONNX_UnaryOp<"Not"> {
  let arguments = (ins TensorOf<[I1]>:$X);
  let hasFolder = 1;
}
def ONNX_LeakyReluOp : ONNX_UnaryOp<"LeakyRelu"> {
  let arguments = (ins AnyTensor:$X, DefaultValuedAttr<F32Attr, "0.01">:$alpha);
}
def ONNX_EluOp : ONNX_UnaryOp<"Elu"> {
  let arguments = (ins AnyTensor:$X, DefaultValuedAttr<F32Attr, "1.0">:$alpha);
}
def ONNX_SeluOp : ONNX_UnaryOp<"Selu"> {
  let arguments = (ins AnyTensor:$X,
                   DefaultValuedAttr<F32Attr, "1.67326319217681884765625">:$alpha,
                   DefaultValuedAttr<F32Attr, "1.05070102214813232421875">:$gamma);
}
def ONNX_HardSigmoidOp : ONNX_UnaryOp<"HardSigmoid"> {
  let arguments = (ins AnyTensor:$X, DefaultValuedAttr<F32Attr, "0.2">:$alpha,
                   DefaultValuedAttr<F32Attr, "0.5">:$beta);
}
def ONNX_GeluOp : ONNX_UnaryOp<"Gelu"> {
  let summary = "opset 20 Gelu: exact (erf) or `approximate` = \"tanh\"";
  let arguments = (ins AnyTensor:$X,
                   DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let hasVerifier = 1;
}

def ONNX_ClipOp : ONNX_ShapedOp<"Clip"> {
  let summary = "min(max(input, min), max); absent bounds do not clip";
  let description = [{
    `min` and `max` are optional scalar inputs (opset 11); the importer
    turns opset 6's `min`/`max` attributes into constants.
  }];
  let arguments = (ins AnyTensor:$input, ONNX_TensorOrNone:$min,
                   ONNX_TensorOrNone:$max);
  let results = (outs AnyTensor:$output);
}

// ONNX Max and Min are variadic; the importer chains them into these binary
// forms (Max(a, b, c) = Max(Max(a, b), c); one input is the input itself).
def ONNX_MaxOp : ONNX_ShapedOp<"Max", [Commutative]> {
  let summary = "elementwise maximum, broadcasting";
  let arguments = (ins AnyTensor:$A, AnyTensor:$B);
  let results = (outs AnyTensor:$C);
}
def ONNX_MinOp : ONNX_ShapedOp<"Min", [Commutative]> {
  let summary = "elementwise minimum, broadcasting";
  let arguments = (ins AnyTensor:$A, AnyTensor:$B);
  let results = (outs AnyTensor:$C);
}
def ONNX_ModOp : ONNX_ShapedOp<"Mod"> {
  let summary = "remainder, broadcasting";
  let description = [{
    `fmod` = 1: C fmod (the sign of A); 0: the sign of B (Python's %),
    integers only, as ONNX requires.
  }];
  let arguments = (ins AnyTensor:$A, AnyTensor:$B,
                   DefaultValuedAttr<I64Attr, "0">:$fmod);
  let results = (outs AnyTensor:$C);
  let hasFolder = 1;
  let hasVerifier = 1;
}

// Comparisons: i1 results, broadcasting.
class ONNX_CompareOp<string mnemonic> : ONNX_ShapedOp<mnemonic> {
  let arguments = (ins AnyTensor:$A, AnyTensor:$B);
  let results = (outs AnyTensor:$C);
  let hasFolder = 1;
}
def ONNX_LessOp : ONNX_CompareOp<"Less">;
def ONNX_LessOrEqualOp : ONNX_CompareOp<"LessOrEqual">;
def ONNX_GreaterOp : ONNX_CompareOp<"Greater">;
def ONNX_GreaterOrEqualOp : ONNX_CompareOp<"GreaterOrEqual">;

// Logic on i1, broadcasting.
class ONNX_LogicalOp<string mnemonic> : ONNX_ShapedOp<mnemonic, [Commutative]> {
  let arguments = (ins TensorOf<[I1]>:$A, TensorOf<[I1]>:$B);
  let results = (outs AnyTensor:$C);
  let hasFolder = 1;
}
def ONNX_AndOp : ONNX_LogicalOp<"And">;
def ONNX_OrOp : ONNX_LogicalOp<"Or">;

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def ONNX_GemmOp : ONNX_ShapedOp<"Gemm"> {
  let summary = "Y = alpha * op(A) * op(B) + beta * C";
  let arguments = (ins AnyTensor:$A, AnyTensor:$B, ONNX_TensorOrNone:$C,
                   DefaultValuedAttr<F32Attr, "1.0">:$alpha,
                   DefaultValuedAttr<F32Attr, "1.0">:$beta,
                   DefaultValuedAttr<I64Attr, "0">:$transA,
                   DefaultValuedAttr<I64Attr, "0">:$transB);
  let results = (outs AnyTensor:$Y);
}

def ONNX_MatMulOp : ONNX_ShapedOp<"MatMul"> {
  let summary = "numpy matmul";
  let arguments = (ins AnyTensor:$A, AnyTensor:$B);
  let results = (outs AnyTensor:$Y);
}

//===----------------------------------------------------------------------===//
// Neural network
//===----------------------------------------------------------------------===//

def ONNX_SoftmaxOp : ONNX_ShapedOp<"Softmax"> {
  let arguments = (ins ONNX_FloatTensor:$input,
                   DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs AnyTensor:$output);
}

def ONNX_LogSoftmaxOp : ONNX_ShapedOp<"LogSoftmax"> {
  let arguments = (ins ONNX_FloatTensor:$input,
                   DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs AnyTensor:$output);
}

def ONNX_AttentionOp : ONNX_ShapedOp<"Attention"> {
  let summary = "scaled dot-product attention (opset 23 Attention's core)";
  let description = [{
    Per batch and head: Y = softmax(scale * Q Kᵀ, masked) V, scale
    1/sqrt(head size) unless given. The subset of ONNX opset 23's Attention
    that pipec builds (pipe-fuse-attention makes it of the exported
    MatMul / Softmax / MatMul chain; docs/design-notes.md "Attention"):
    - 3-D Q (B, T, H*dh), K and V (B, S, H*dh) with `q_num_heads` = H
      (`kv_num_heads`, if given, equal to it): Y (B, T, H*dh);
    - 4-D Q (B, H, T, dh), K and V (B, H', S, dh): Y (B, H, T, dh); H'
      dividing H is grouped-query attention (query head h reads key/value
      head h / (H / H'), as ONNX's);
    - self-attention on a fused projection: K and V none, Q (B, T, 3*H*dh)
      holding q, k and v side by side on its last axis (not an ONNX form);
    - with `seq_first` = 1 (not an ONNX attribute) the 3-D forms sequence
      first, as nn.MultiheadAttention holds them: Q (T, B, H*dh) or
      (T, B, 3*H*dh), K and V (S, B, H*dh), Y (T, B, H*dh).
    `attn_mask` may also be broadcast to (B, H, T, S), and of Q's float
    type: added to the scaled scores (ONNX's float mask).
    `attn_mask` (optional): bool (T, S), true where a position takes part
    (ONNX's boolean mask); `is_causal` masks j > i (upper-left aligned). A
    row with every position masked is NaN. With `dropout` = p > 0 (not
    an ONNX attribute; pipe-fuse-attention takes it from a training-mode
    Dropout between the softmax and P V) the probabilities are dropped
    before P V as that Dropout would drop them: one draw of the context's
    random stream per call seeds the counter-based mask over P's elements
    in (B, H, T, S) order, kept ones scaled by 1 / (1 - p); inference mode
    removes the attribute. Results: Y, and the training form autodiff makes
    has a 2nd, not an ONNX output (ONNX's present_key is not modelled): the
    softmax probabilities (B, H, T, S) that AttentionGrad reads, under
    dropout with the sign bit set where an element was dropped. Lowers to
    `pipert_attention_f32`.
  }];
  let arguments = (ins ONNX_FloatTensor:$Q, ONNX_FloatTensorOrNone:$K,
                   ONNX_FloatTensorOrNone:$V, ONNX_TensorOrNone:$attn_mask,
                   DefaultValuedAttr<I64Attr, "0">:$is_causal,
                   OptionalAttr<I64Attr>:$q_num_heads,
                   OptionalAttr<I64Attr>:$kv_num_heads,
                   OptionalAttr<F32Attr>:$scale,
                   DefaultValuedAttr<I64Attr, "0">:$seq_first,
                   OptionalAttr<F32Attr>:$dropout);
  let results = (outs Variadic<AnyTensor>:$outputs);
}

def ONNX_LayerNormalizationOp : ONNX_ShapedOp<"LayerNormalization"> {
  let summary = "normalizes over the axes from `axis` on";
  let description = [{
    Results: `Y`, then the optional outputs `Mean` and `InvStdDev` as one
    variadic group `stats` of 0, 1 (Mean) or 2 (Mean, InvStdDev) results.
    Both have X's shape with the normalized axes set to 1 and the element
    type of `stash_type`.
  }];
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$Scale,
                   ONNX_FloatTensorOrNone:$B,
                   DefaultValuedAttr<I64Attr, "-1">:$axis,
                   DefaultValuedAttr<F32Attr, "1e-5">:$epsilon,
                   DefaultValuedAttr<I64Attr, "1">:$stash_type);
  let results = (outs AnyTensor:$Y, Variadic<AnyTensor>:$stats);
  let hasVerifier = 1;
}

def ONNX_BatchNormalizationOp : ONNX_ShapedOp<"BatchNormalization"> {
  let summary = "batch normalization over N x C x D1 ... Dn";
  let description = [{
    Results: `Y`, then the optional outputs `running_mean` and `running_var`
    as one variadic group `running_stats` of 0, 1 or 2 results; they exist
    only when `training_mode` is 1 and have the types of `input_mean` and
    `input_var`.
  }];
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$scale,
                   ONNX_FloatTensor:$B, ONNX_FloatTensor:$input_mean,
                   ONNX_FloatTensor:$input_var,
                   DefaultValuedAttr<F32Attr, "1e-5">:$epsilon,
                   DefaultValuedAttr<F32Attr, "0.9">:$momentum,
                   DefaultValuedAttr<I64Attr, "0">:$training_mode);
  let results = (outs AnyTensor:$Y,
                 Variadic<AnyTensor>:$running_stats);
}

def ONNX_ConvOp : ONNX_ShapedOp<"Conv"> {
  let summary = "N-D convolution of X (N x C x D1...) with W (M x C/group x k1...)";
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$W,
                   ONNX_FloatTensorOrNone:$B,
                   DefaultValuedStrAttr<StrAttr, "NOTSET">:$auto_pad,
                   OptionalAttr<DenseI64ArrayAttr>:$dilations,
                   DefaultValuedAttr<I64Attr, "1">:$group,
                   OptionalAttr<DenseI64ArrayAttr>:$kernel_shape,
                   OptionalAttr<DenseI64ArrayAttr>:$pads,
                   OptionalAttr<DenseI64ArrayAttr>:$strides);
  let results = (outs AnyTensor:$Y);
}

def ONNX_ConvTransposeOp : ONNX_ShapedOp<"ConvTranspose"> {
  let summary = "transposed convolution of X (N x C x D1...) with W (C x M/group x k1...)";
  let description = [{
    The input gradient of a Conv with weight W: Y (N x M x O1...), O =
    stride * (D - 1) + output_padding + dilation * (k - 1) + 1 - pads, with
    `output_shape` or `auto_pad` (SAME_*: O = D * stride) deciding the pads
    as ONNX specifies (onnx::convTransposeWindow). output_padding must be
    below the stride. Lowers (1-D and 2-D) to
    `pipert_conv2d_grad_input_f32` plus the bias.
  }];
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$W,
                   ONNX_FloatTensorOrNone:$B,
                   DefaultValuedStrAttr<StrAttr, "NOTSET">:$auto_pad,
                   OptionalAttr<DenseI64ArrayAttr>:$dilations,
                   DefaultValuedAttr<I64Attr, "1">:$group,
                   OptionalAttr<DenseI64ArrayAttr>:$kernel_shape,
                   OptionalAttr<DenseI64ArrayAttr>:$output_padding,
                   OptionalAttr<DenseI64ArrayAttr>:$output_shape,
                   OptionalAttr<DenseI64ArrayAttr>:$pads,
                   OptionalAttr<DenseI64ArrayAttr>:$strides);
  let results = (outs AnyTensor:$Y);
}

def ONNX_MaxPoolOp : ONNX_ShapedOp<"MaxPool"> {
  let summary = "N-D max pooling";
  let description = [{
    Results: `Y` and the optional `Indices` (i64, Y's shape). With
    `ceil_mode`, a last window that would start in the end padding is
    dropped, as PyTorch, cuDNN and onnxruntime do.
  }];
  let arguments = (ins AnyTensor:$X,
                   DefaultValuedStrAttr<StrAttr, "NOTSET">:$auto_pad,
                   DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                   OptionalAttr<DenseI64ArrayAttr>:$dilations,
                   DenseI64ArrayAttr:$kernel_shape,
                   OptionalAttr<DenseI64ArrayAttr>:$pads,
                   DefaultValuedAttr<I64Attr, "0">:$storage_order,
                   OptionalAttr<DenseI64ArrayAttr>:$strides);
  let results = (outs AnyTensor:$Y, Optional<AnyTensor>:$Indices);
  let hasVerifier = 1;
}

def ONNX_AveragePoolOp : ONNX_ShapedOp<"AveragePool"> {
  let summary = "N-D average pooling";
  let description = [{
    `dilations` is opset 19's; accepted so that newer models import. The
    output size follows MaxPool's, `ceil_mode` included.
  }];
  let arguments = (ins ONNX_FloatTensor:$X,
                   DefaultValuedStrAttr<StrAttr, "NOTSET">:$auto_pad,
                   DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                   DefaultValuedAttr<I64Attr, "0">:$count_include_pad,
                   OptionalAttr<DenseI64ArrayAttr>:$dilations,
                   DenseI64ArrayAttr:$kernel_shape,
                   OptionalAttr<DenseI64ArrayAttr>:$pads,
                   OptionalAttr<DenseI64ArrayAttr>:$strides);
  let results = (outs AnyTensor:$Y);
  let hasVerifier = 1;
}

def ONNX_GlobalAveragePoolOp : ONNX_ShapedOp<"GlobalAveragePool"> {
  let arguments = (ins ONNX_FloatTensor:$X);
  let results = (outs AnyTensor:$Y);
}

def ONNX_DropoutOp : ONNX_InferredOp<"Dropout"> {
  let summary = "random dropout in training mode, identity otherwise";
  let description = [{
    `ratio` (a float scalar, default 0.5) and `training_mode` (an i1 scalar,
    default false) are optional inputs. Results: `output` and the optional
    `mask` (i1, the data's shape). Not Pure: two dropouts with equal operands
    draw different masks.
  }];
  let arguments = (ins AnyTensor:$data, ONNX_FloatTensorOrNone:$ratio,
                   AnyTypeOf<[TensorOf<[I1]>, NoneType]>:$training_mode,
                   OptionalAttr<I64Attr>:$seed);
  let results = (outs AnyTensor:$output, Optional<AnyTensor>:$mask);
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Reductions and losses
//===----------------------------------------------------------------------===//

class ONNX_ReduceOp<string mnemonic> : ONNX_ShapedOp<mnemonic> {
  let description = [{
    `axes` is an optional input. Without axes (or with an empty constant)
    the op reduces over all axes, or is the identity when
    `noop_with_empty_axes` is 1.
  }];
  let arguments = (ins AnyTensor:$data, ONNX_I64TensorOrNone:$axes,
                   DefaultValuedAttr<I64Attr, "1">:$keepdims,
                   DefaultValuedAttr<I64Attr, "0">:$noop_with_empty_axes);
  let results = (outs AnyTensor:$reduced);
  let hasVerifier = 1;
}
def ONNX_ReduceMeanOp : ONNX_ReduceOp<"ReduceMean">;
def ONNX_ReduceSumOp : ONNX_ReduceOp<"ReduceSum">;
// Issue 15. Opset 18's axes input; the importer moves older `axes`
// attributes there.
def ONNX_ReduceMaxOp : ONNX_ReduceOp<"ReduceMax">;
def ONNX_ReduceMinOp : ONNX_ReduceOp<"ReduceMin">;

class ONNX_ArgReduceOp<string mnemonic> : ONNX_ShapedOp<mnemonic> {
  let summary = "i64 index of the extremum along `axis`";
  let arguments = (ins AnyTensor:$data, DefaultValuedAttr<I64Attr, "0">:$axis,
                   DefaultValuedAttr<I64Attr, "1">:$keepdims,
                   DefaultValuedAttr<I64Attr, "0">:$select_last_index);
  let results = (outs AnyTensor:$reduced);
}
def ONNX_ArgMaxOp : ONNX_ArgReduceOp<"ArgMax">;
def ONNX_ArgMinOp : ONNX_ArgReduceOp<"ArgMin">;

def ONNX_CumSumOp : ONNX_ShapedOp<"CumSum"> {
  let summary = "cumulative sum along the (scalar) axis input";
  let arguments = (ins AnyTensor:$x, ONNX_IntTensor:$axis,
                   DefaultValuedAttr<I64Attr, "0">:$exclusive,
                   DefaultValuedAttr<I64Attr, "0">:$reverse);
  let results = (outs AnyTensor:$y);
}

def ONNX_SoftmaxCrossEntropyLossOp : ONNX_ShapedOp<"SoftmaxCrossEntropyLoss"> {
  let summary = "softmax cross entropy of scores (N x C x D...) and labels (N x D...)";
  let description = [{
    Results: `output` (scalar unless reduction is "none", then the labels'
    shape) and the optional `log_prob` (the scores' type).
  }];
  let arguments = (ins ONNX_FloatTensor:$scores, ONNX_IntTensor:$labels,
                   ONNX_FloatTensorOrNone:$weights,
                   OptionalAttr<I64Attr>:$ignore_index,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction);
  let results = (outs AnyTensor:$output,
                 Optional<AnyTensor>:$log_prob);
  let hasVerifier = 1;
}

def ONNX_NegativeLogLikelihoodLossOp
    : ONNX_ShapedOp<"NegativeLogLikelihoodLoss"> {
  let summary = "negative log likelihood of input (N x C x D...) at target (N x D...)";
  let arguments = (ins ONNX_FloatTensor:$input, ONNX_IntTensor:$target,
                   ONNX_FloatTensorOrNone:$weight,
                   OptionalAttr<I64Attr>:$ignore_index,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction);
  let results = (outs AnyTensor:$loss);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

def ONNX_ShapeOp : ONNX_ShapedOp<"Shape"> {
  let arguments = (ins AnyTensor:$data, OptionalAttr<I64Attr>:$start,
                   OptionalAttr<I64Attr>:$end);
  let results = (outs AnyTensor:$shape);
  let hasFolder = 1;
}

def ONNX_ReshapeOp : ONNX_ShapedOp<"Reshape"> {
  let arguments = (ins AnyTensor:$data, TensorOf<[I64]>:$shape,
                   DefaultValuedAttr<I64Attr, "0">:$allowzero);
  let results = (outs AnyTensor:$reshaped);
  let hasFolder = 1;
}

def ONNX_FlattenOp : ONNX_ShapedOp<"Flatten"> {
  let summary = "reshapes to 2-D: dims before `axis` x dims from `axis` on";
  let arguments = (ins AnyTensor:$input, DefaultValuedAttr<I64Attr, "1">:$axis);
  let results = (outs AnyTensor:$output);
}

def ONNX_TransposeOp : ONNX_ShapedOp<"Transpose"> {
  let summary = "permutes the axes; without perm, reverses them";
  let arguments = (ins AnyTensor:$data,
                   OptionalAttr<DenseI64ArrayAttr>:$perm);
  let results = (outs AnyTensor:$transposed);
  // Small constants fold (PyTorch computes Pad's pads through one).
  let hasFolder = 1;
}

def ONNX_ConcatOp : ONNX_ShapedOp<"Concat"> {
  let arguments = (ins Variadic<AnyTensor>:$inputs, I64Attr:$axis);
  let results = (outs AnyTensor:$concat_result);
  let hasFolder = 1;
}

def ONNX_SplitOp : ONNX_ShapedOp<"Split"> {
  let summary = "splits along `axis` into the results";
  let description = [{
    The part sizes come from the optional `split` input; else from
    `num_outputs` (opset 18: parts of ceil(dim / n), the last one smaller);
    else the dimension is split evenly into as many parts as results.
  }];
  let arguments = (ins AnyTensor:$input, ONNX_I64TensorOrNone:$split,
                   DefaultValuedAttr<I64Attr, "0">:$axis,
                   OptionalAttr<I64Attr>:$num_outputs);
  let results = (outs Variadic<AnyTensor>:$outputs);
  let hasFolder = 1;
}

def ONNX_SliceOp : ONNX_ShapedOp<"Slice"> {
  let arguments = (ins AnyTensor:$data, ONNX_IntTensor:$starts,
                   ONNX_IntTensor:$ends, ONNX_IntTensorOrNone:$axes,
                   ONNX_IntTensorOrNone:$steps);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def ONNX_GatherOp : ONNX_ShapedOp<"Gather"> {
  let summary = "takes entries of data along axis at indices";
  let arguments = (ins AnyTensor:$data, ONNX_IntTensor:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def ONNX_GatherNDOp : ONNX_ShapedOp<"GatherND"> {
  let summary = "takes slices of data at the k-tuples of indices' last axis";
  let description = [{
    indices (..., k) name slices of data: y.shape = indices.shape[:-1] +
    data.shape[batch_dims + k:]; the first batch_dims axes of data and
    indices pair up. Negative indices count from the end.
  }];
  let arguments = (ins AnyTensor:$data, ONNX_IntTensor:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$batch_dims);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def ONNX_ScatterNDOp : ONNX_ShapedOp<"ScatterND"> {
  let summary = "data with the slices at indices replaced by (or reduced with) updates";
  let description = [{
    indices (..., k) name slices of data; updates has shape
    indices.shape[:-1] + data.shape[k:]. reduction: none (replace; repeated
    indices are undefined in ONNX), add, mul, max or min (repeated indices
    accumulate). What PyTorch exports for `x[index] = v` (index_put_).
  }];
  let arguments = (ins AnyTensor:$data, ONNX_IntTensor:$indices,
                   AnyTensor:$updates,
                   DefaultValuedStrAttr<StrAttr, "none">:$reduction);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def ONNX_GatherElementsOp : ONNX_ShapedOp<"GatherElements"> {
  let summary = "takes one entry of data along axis per entry of indices";
  let description = [{
    y has indices' shape (indices' rank is data's; along the other axes no
    larger than data): y[p] = data[p with p[axis] = indices[p]]. What
    PyTorch exports for torch.gather. Negative indices count from the end.
  }];
  let arguments = (ins AnyTensor:$data, ONNX_IntTensor:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs AnyTensor:$output);
}

def ONNX_ScatterElementsOp : ONNX_ShapedOp<"ScatterElements"> {
  let summary = "data with the entries indices name replaced by (or reduced with) updates";
  let description = [{
    updates has indices' shape: y = data, then y[p with p[axis] =
    indices[p]] = updates[p] (reduction none; repeated positions are
    undefined in ONNX), or combined with it (add, mul, max, min). What
    PyTorch exports for Tensor.scatter and scatter_add.
  }];
  let arguments = (ins AnyTensor:$data, ONNX_IntTensor:$indices,
                   AnyTensor:$updates,
                   DefaultValuedAttr<I64Attr, "0">:$axis,
                   DefaultValuedStrAttr<StrAttr, "none">:$reduction);
  let results = (outs AnyTensor:$output);
}

def ONNX_UnsqueezeOp : ONNX_ShapedOp<"Unsqueeze"> {
  let arguments = (ins AnyTensor:$data, TensorOf<[I64]>:$axes);
  let results = (outs AnyTensor:$expanded);
  let hasFolder = 1;
}

def ONNX_SqueezeOp : ONNX_ShapedOp<"Squeeze"> {
  let description = [{ Without axes, removes every dimension of size 1. }];
  let arguments = (ins AnyTensor:$data, ONNX_I64TensorOrNone:$axes);
  let results = (outs AnyTensor:$squeezed);
  let hasFolder = 1;
}

def ONNX_ExpandOp : ONNX_ShapedOp<"Expand"> {
  let summary = "broadcasts input to (the broadcast of its shape and) shape";
  let arguments = (ins AnyTensor:$input, TensorOf<[I64]>:$shape);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

// Issue 15.
def ONNX_TileOp : ONNX_ShapedOp<"Tile"> {
  let summary = "repeats the input `repeats[i]` times along each axis";
  let arguments = (ins AnyTensor:$input, TensorOf<[I64]>:$repeats);
  let results = (outs AnyTensor:$output);
}

def ONNX_PadOp : ONNX_ShapedOp<"Pad"> {
  let summary = "pads (or, with negative pads, crops) each axis";
  let description = [{
    `pads` (begins, then ends) covers every axis, or those of the optional
    `axes` input (opset 18). `mode` is constant (with the optional scalar
    `constant_value`, default 0), reflect or edge; opset 19's wrap is
    rejected. The importer turns opset < 11's `pads`/`value` attributes
    into inputs.
  }];
  let arguments = (ins AnyTensor:$data, TensorOf<[I64]>:$pads,
                   ONNX_TensorOrNone:$constant_value,
                   ONNX_IntTensorOrNone:$axes,
                   DefaultValuedStrAttr<StrAttr, "constant">:$mode);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def ONNX_TriluOp : ONNX_ShapedOp<"Trilu"> {
  let summary = "upper (or lower) triangle of the last two axes, diagonal k";
  let arguments = (ins AnyTensor:$input, ONNX_I64TensorOrNone:$k,
                   DefaultValuedAttr<I64Attr, "1">:$upper);
  let results = (outs AnyTensor:$output);
}

def ONNX_ResizeOp : ONNX_ShapedOp<"Resize"> {
  let summary = "resamples X by scales or to sizes (nearest, linear, cubic)";
  let description = [{
    Opset 11-19. `scales` (f32) or `sizes` (i64) must be constants for a
    static result (otherwise the model's declared output shape types it);
    `roi` matters for tf_crop_and_resize only. Opset 18's `axes` names the
    axes scales/sizes/roi cover. antialias and keep_aspect_ratio_policy
    other than stretch are rejected. Lowers to `pipert_resize_f32`, which
    resizes the last three axes (the others must keep their extent).
  }];
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_TensorOrNone:$roi,
                   ONNX_TensorOrNone:$scales, ONNX_I64TensorOrNone:$sizes,
                   DefaultValuedAttr<I64Attr, "0">:$antialias,
                   OptionalAttr<DenseI64ArrayAttr>:$axes,
                   DefaultValuedStrAttr<StrAttr, "half_pixel">:$coordinate_transformation_mode,
                   DefaultValuedAttr<F32Attr, "-0.75">:$cubic_coeff_a,
                   DefaultValuedAttr<I64Attr, "0">:$exclude_outside,
                   DefaultValuedAttr<F32Attr, "0.0">:$extrapolation_value,
                   DefaultValuedStrAttr<StrAttr, "stretch">:$keep_aspect_ratio_policy,
                   DefaultValuedStrAttr<StrAttr, "nearest">:$mode,
                   DefaultValuedStrAttr<StrAttr, "round_prefer_floor">:$nearest_mode);
  let results = (outs AnyTensor:$Y);
}

//===----------------------------------------------------------------------===//
// Recurrent
//===----------------------------------------------------------------------===//

def ONNX_LSTMOp : ONNX_ShapedOp<"LSTM"> {
  let summary = "long short-term memory over a sequence (ONNX LSTM)";
  let description = [{
    All the ONNX operator's inputs and attributes are modelled (so every
    valid node imports); what the lowering and autodiff support is layout 0,
    the default activations, no clip, input_forget or peepholes (P), and
    sequence_lens absent or a constant equal to seq_length everywhere; the
    others are refused there naming the node. Results: the optional outputs
    Y (seq, dirs, batch, hidden), Y_h and Y_c (dirs, batch, hidden) (layout
    1: batch first) as one variadic group of up to 3, in ONNX order; and
    the training form autodiff makes of an LSTM it differentiates has a
    4th, not an ONNX output: the states its LSTMGrad reads instead of
    recomputing them, (dirs * 6 * seq, batch, hidden) (layout 0 only; per
    direction the planes h, c, i, o, f, g of (seq, batch, hidden)).
  }];
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$W,
                   ONNX_FloatTensor:$R, ONNX_FloatTensorOrNone:$B,
                   ONNX_IntTensorOrNone:$sequence_lens,
                   ONNX_FloatTensorOrNone:$initial_h,
                   ONNX_FloatTensorOrNone:$initial_c,
                   ONNX_FloatTensorOrNone:$P,
                   OptionalAttr<DenseF32ArrayAttr>:$activation_alpha,
                   OptionalAttr<DenseF32ArrayAttr>:$activation_beta,
                   OptionalAttr<StrArrayAttr>:$activations,
                   OptionalAttr<F32Attr>:$clip,
                   DefaultValuedStrAttr<StrAttr, "forward">:$direction,
                   OptionalAttr<I64Attr>:$hidden_size,
                   DefaultValuedAttr<I64Attr, "0">:$input_forget,
                   DefaultValuedAttr<I64Attr, "0">:$layout);
  let results = (outs Variadic<AnyTensor>:$outputs);
}

def ONNX_GRUOp : ONNX_ShapedOp<"GRU"> {
  let summary = "gated recurrent unit over a sequence (ONNX GRU)";
  let description = [{
    As LSTM, with 3 gates (z, r, h), no cell state and no peepholes: the
    optional outputs Y and Y_h as one variadic group of up to 2 (and the
    training form's saved states, (dirs * 5 * seq, batch, hidden): h, z, r,
    n and the h gate's recurrent term, a 3rd); both linear_before_reset = 1
    (what PyTorch exports) and 0 are supported.
  }];
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$W,
                   ONNX_FloatTensor:$R, ONNX_FloatTensorOrNone:$B,
                   ONNX_IntTensorOrNone:$sequence_lens,
                   ONNX_FloatTensorOrNone:$initial_h,
                   OptionalAttr<DenseF32ArrayAttr>:$activation_alpha,
                   OptionalAttr<DenseF32ArrayAttr>:$activation_beta,
                   OptionalAttr<StrArrayAttr>:$activations,
                   OptionalAttr<F32Attr>:$clip,
                   DefaultValuedStrAttr<StrAttr, "forward">:$direction,
                   OptionalAttr<I64Attr>:$hidden_size,
                   DefaultValuedAttr<I64Attr, "0">:$layout,
                   DefaultValuedAttr<I64Attr, "0">:$linear_before_reset);
  let results = (outs Variadic<AnyTensor>:$outputs);
}

//===----------------------------------------------------------------------===//
// ai.onnx.preview.training
//===----------------------------------------------------------------------===//

def ONNX_GradientOp : ONNX_ShapedOp<"Gradient"> {
  let summary = "gradient of tensor `y` with respect to the tensors `xs`";
  let description = [{
    Operands are the values of the tensors named in `xs` then `zs`; result
    i is the gradient with respect to xs[i] and has its type.
  }];
  let arguments = (ins Variadic<AnyTensor>:$inputs, StrArrayAttr:$xs,
                   OptionalAttr<StrArrayAttr>:$zs, StrAttr:$y);
  let results = (outs Variadic<AnyTensor>:$outputs);
}

def ONNX_MomentumOp : ONNX_ShapedOp<"Momentum"> {
  let summary = "SGD with (Nesterov) momentum on n tensors";
  let description = [{
    Operands: R (learning rate scalar), T (update count i64 scalar), then
    X1..Xn, G1..Gn, V1..Vn. Results: X1_new..Xn_new, V1_new..Vn_new.
  }];
  let arguments = (ins ONNX_FloatTensor:$R, TensorOf<[I64]>:$T,
                   Variadic<AnyTensor>:$inputs, F32Attr:$alpha, F32Attr:$beta,
                   StrAttr:$mode, F32Attr:$norm_coefficient);
  let results = (outs Variadic<AnyTensor>:$outputs);
  let hasVerifier = 1;
}

def ONNX_AdamOp : ONNX_ShapedOp<"Adam"> {
  let summary = "Adam on n tensors";
  let description = [{
    Operands: R, T, then X1..Xn, G1..Gn, V1..Vn, H1..Hn. Results:
    X1_new..Xn_new, V1_new..Vn_new, H1_new..Hn_new.
  }];
  let arguments = (ins ONNX_FloatTensor:$R, TensorOf<[I64]>:$T,
                   Variadic<AnyTensor>:$inputs,
                   DefaultValuedAttr<F32Attr, "0.9">:$alpha,
                   DefaultValuedAttr<F32Attr, "0.999">:$beta,
                   DefaultValuedAttr<F32Attr, "1e-6">:$epsilon,
                   DefaultValuedAttr<F32Attr, "0.0">:$norm_coefficient,
                   DefaultValuedAttr<F32Attr, "0.0">:$norm_coefficient_post);
  let results = (outs Variadic<AnyTensor>:$outputs);
  let hasVerifier = 1;
}

def ONNX_AdagradOp : ONNX_ShapedOp<"Adagrad"> {
  let summary = "Adagrad on n tensors";
  let description = [{
    Operands: R, T, then X1..Xn, G1..Gn, H1..Hn. Results: X1_new..Xn_new,
    H1_new..Hn_new.
  }];
  let arguments = (ins ONNX_FloatTensor:$R, TensorOf<[I64]>:$T,
                   Variadic<AnyTensor>:$inputs,
                   DefaultValuedAttr<F32Attr, "0.0">:$decay_factor,
                   DefaultValuedAttr<F32Attr, "1e-6">:$epsilon,
                   DefaultValuedAttr<F32Attr, "0.0">:$norm_coefficient);
  let results = (outs Variadic<AnyTensor>:$outputs);
  let hasVerifier = 1;
}

include "dialects/onnx/OnnxGradientOps.td"

#endif // PIPEC_ONNX_OPS
