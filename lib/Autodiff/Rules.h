//===- Rules.h - the VJP rules of the onnx ops (internal) -------*- C++ -*-===//
//
// One `vjp` overload per differentiable op; Registration.cpp attaches each
// as the op's VjpOpInterface. A new op adds itself to PIPEC_VJP_OPS and
// defines its rule (and a `prepare` overload when its rule needs results
// the forward op may not have).
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_LIB_AUTODIFF_RULES_H
#define PIPEC_LIB_AUTODIFF_RULES_H

#include "pipec/Autodiff/VjpOpInterface.h"

#include "dialects/onnx/OnnxDialect.h"

#define PIPEC_VJP_OPS(X)                                                       \
  X(AddOp) X(SubOp) X(MulOp) X(DivOp) X(PowOp) X(NegOp) X(ReluOp) X(TanhOp)    \
  X(SigmoidOp) X(ErfOp) X(SqrtOp) X(ExpOp) X(LogOp) X(SinOp) X(CosOp) X(IdentityOp) X(CastOp)    \
  X(WhereOp) X(GemmOp) X(MatMulOp) X(SoftmaxOp) X(LogSoftmaxOp)                \
  X(LayerNormalizationOp) X(BatchNormalizationOp) X(ConvOp) X(MaxPoolOp)       \
  X(AveragePoolOp) X(GlobalAveragePoolOp) X(DropoutOp) X(ReduceMeanOp)        \
  X(ReduceSumOp) X(SoftmaxCrossEntropyLossOp) X(NegativeLogLikelihoodLossOp)  \
  X(ReshapeOp) X(FlattenOp) X(TransposeOp) X(ConcatOp) X(SplitOp) X(SliceOp)   \
  X(GatherOp) X(UnsqueezeOp) X(SqueezeOp) X(ExpandOp) X(AbsOp)               \
  X(ReciprocalOp) X(SignOp) X(FloorOp) X(CeilOp) X(SoftplusOp) X(HardSwishOp) \
  X(LeakyReluOp) X(EluOp) X(SeluOp) X(HardSigmoidOp) X(GeluOp) X(ClipOp)      \
  X(MaxOp) X(MinOp) X(ModOp) X(ReduceMaxOp) X(ReduceMinOp) X(CumSumOp)        \
  X(TileOp) X(PadOp) X(TriluOp) X(ConvTransposeOp) X(ResizeOp)             \
  X(LSTMOp) X(GRUOp) X(GatherNDOp) X(ScatterNDOp) \
  X(GatherElementsOp) X(ScatterElementsOp) X(AttentionOp)

namespace mlir::pipec::autodiff {

#define PIPEC_DECLARE_VJP(OP) LogicalResult vjp(onnx::OP op, VjpContext &ctx);
PIPEC_VJP_OPS(PIPEC_DECLARE_VJP)
#undef PIPEC_DECLARE_VJP

/// Most ops keep their forward form.
template <typename OpTy>
Operation *prepare(OpTy op, OpBuilder &) {
  return op.getOperation();
}
Operation *prepare(onnx::LayerNormalizationOp op, OpBuilder &b);
Operation *prepare(onnx::DropoutOp op, OpBuilder &b);
Operation *prepare(onnx::SoftmaxCrossEntropyLossOp op, OpBuilder &b);
Operation *prepare(onnx::LSTMOp op, OpBuilder &b);
Operation *prepare(onnx::GRUOp op, OpBuilder &b);
Operation *prepare(onnx::AttentionOp op, OpBuilder &b);

/// A copy of `op` (same name, operands, attributes) with `numResults`
/// results typed by its shape function, or null after an error.
Operation *cloneWithResults(Operation *op, OpBuilder &b, unsigned numResults);

/// Spatial attributes of a Conv or pooling op with auto_pad resolved.
struct Window {
  SmallVector<int64_t> kernel, pads, strides, dilations;
};
/// Resolves the window of `op` on input type `x` with `kernel` spatial
/// extents; fails with an error on the op when the shapes are not static.
FailureOr<Window> resolveWindow(Operation *op, Type x,
                                ArrayRef<int64_t> kernel);

} // namespace mlir::pipec::autodiff

#endif
