//===- ShapeHelpers.h - helpers for the onnx shape functions ----*- C++ -*-===//
#ifndef PIPEC_DIALECTS_ONNX_SHAPEHELPERS_H
#define PIPEC_DIALECTS_ONNX_SHAPEHELPERS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"
#include <optional>

namespace mlir::pipec::onnx {

/// The ranked tensor type of `v`, or null when it is unranked or none.
RankedTensorType getRanked(Value v);
/// True when `v` is the `none` value of an absent optional input.
bool isNone(Value v);
/// The element type of a tensor value.
Type getElementType(Value v);

/// An unranked tensor of `elementType`.
Type unranked(Type elementType);
/// A ranked tensor; `shape` may hold ShapedType::kDynamic.
Type ranked(ArrayRef<int64_t> shape, Type elementType);

/// Integer contents of a constant operand (onnx.Constant or anything
/// ConstantLike), or nullopt when it is not a constant.
std::optional<SmallVector<int64_t>> getConstantInts(Value v);
/// The elements attribute of a constant operand, or null.
ElementsAttr getConstantAttr(Value v);

/// The value of an onnx.Constant holding a splat floating-point tensor (a
/// scalar or all-equal elements), or nullopt (the fusion passes' constants).
std::optional<double> getSplatFloat(Value v);

/// `v` before any ops that only reshape it (Reshape, Flatten, Squeeze,
/// Unsqueeze, Identity): a loss's labels as the graph input that holds them
/// (a sequence model's (B, T) targets flattened to B*T).
Value stripReshapes(Value v);

/// The sizes of an ONNX LSTM (gates = 4) or GRU (gates = 3) from X, W, R
/// (kDynamic where unknown), with the shapes checked against each other and
/// against B and initial_h/initial_c (`states`, may be none); emits an error
/// on `op`. Shared by the forward ops and their gradient ops.
struct RecurrentSizes {
  int64_t seq, batch, input, hidden, dirs;
};
FailureOr<RecurrentSizes> recurrentSizes(Operation *op, int64_t gates, Value x,
                                         Value w, Value r, Value b,
                                         ValueRange states,
                                         StringRef direction,
                                         std::optional<int64_t> hiddenSize,
                                         int64_t layout);

/// Whether pipec lowers and differentiates this LSTM / GRU: layout 0, f32,
/// the default activations, no clip, input_forget or peepholes, and
/// sequence_lens absent or a constant equal to
/// seq_length for every batch entry. Otherwise emits one error on `op`
/// naming the feature and what to do, and fails.
LogicalResult checkRecurrentSupported(Operation *op);

/// The sizes of an Attention (or AttentionGrad) from Q, K, V (K and V none:
/// a fused (B, T, 3*H*dh) projection) and its heads attributes, checked
/// against each other (kDynamic where unknown); emits an error on `op`.
/// With the op's `seq_first` = 1 the 3-D forms are sequence first: Q (T, B,
/// .), K and V (S, B, .). `kvHeads`: K's and V's heads, `heads` or (the 4-D
/// form's grouped-query attention) a divisor of it: query head h reads
/// key/value head h / (heads / kvHeads).
struct AttentionSizes {
  enum Form { Packed, Separate3D, FourD };
  Form form;
  int64_t batch, heads, t, s, dh;
  int64_t kvHeads = 0;
  bool seqFirst = false;
};
FailureOr<AttentionSizes> attentionSizes(Operation *op, Value q, Value k,
                                         Value v,
                                         std::optional<int64_t> qHeads,
                                         std::optional<int64_t> kvHeads);
/// The factor an Attention scales its scores by: `scale`, else
/// 1/sqrt(head size).
float attentionScale(std::optional<float> scale, int64_t headSize);

/// Numpy broadcasting of two shapes; emits an error on `op` if they do not
/// broadcast.
FailureOr<SmallVector<int64_t>> broadcastShapes(Operation *op,
                                                ArrayRef<int64_t> a,
                                                ArrayRef<int64_t> b);
/// Normalizes an axis in [-rank, rank) to [0, rank); emits an error on `op`.
FailureOr<int64_t> normalizeAxis(Operation *op, int64_t axis, int64_t rank,
                                 StringRef what = "axis");

/// The element type of ONNX TensorProto.DataType `code`: signed integers are
/// signless (i8..i64), unsigned ones `ui8..ui64`, BOOL is i1, COMPLEX64/128
/// are complex<f32/f64>, FLOAT8* the f8 types. Null for UNDEFINED, STRING,
/// and codes this compiler does not know.
Type onnxDataTypeToType(MLIRContext *ctx, int64_t code);
/// The ONNX TensorProto.DataType code of an element type, 0 when none.
int64_t typeToOnnxDataType(Type type);

/// One sliced dimension: the first index read, the step and the length.
struct SliceRange {
  int64_t start, step, size;
};
/// Resolves ONNX Slice's start/end/step on a static dimension `dim`
/// (negative indices count from the end, out-of-range ones are clamped);
/// `step` must be nonzero.
SliceRange resolveSliceRange(int64_t dim, int64_t start, int64_t end,
                             int64_t step);

/// Creates the onnx op `name` ("onnx.Add") from operands and attributes with
/// `numResults` placeholder results (unranked f32) for its shape function to
/// type: the one way pipec builds an onnx op from a name (the importer's
/// generic path, autodiff's OnnxBuilder).
Operation *createByName(OpBuilder &b, Location loc, StringRef name,
                        ValueRange operands, ArrayRef<NamedAttribute> attrs,
                        unsigned numResults);


/// ConvTranspose's window (W's kernel, defaults filled in) with
/// output_shape / auto_pad resolved into explicit `pads` (begins, then
/// ends; negative where output_shape asks for more than the natural extent)
/// as the ONNX reference does, and the spatial output extents. Needs static
/// spatial extents of X and W; emits an error on `op`.
struct ConvTransposeWindow {
  SmallVector<int64_t> kernel, pads, strides, dilations, outputPadding, out;
};
FailureOr<ConvTransposeWindow> convTransposeWindow(Operation *op,
                                                   RankedTensorType x,
                                                   RankedTensorType w);

/// Resize's result shape (kDynamic where scales/sizes are not constants)
/// and, for the kernels, one scale per axis (nullopt: the sizes form, out /
/// in) and the roi (starts then ends for every axis; empty when absent).
/// Checks the attributes; emits an error on `op` (an onnx.Resize).
struct ResizeGeometry {
  SmallVector<int64_t> outShape;
  std::optional<SmallVector<float>> scales;
  SmallVector<float> roi;
  bool known = false;
};
FailureOr<ResizeGeometry> resizeGeometry(Operation *op);

} // namespace mlir::pipec::onnx

#endif
