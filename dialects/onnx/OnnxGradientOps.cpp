//===- OnnxGradientOps.cpp - shape functions of the gradient ops -----------===//
//
// A gradient has the type of what it is the gradient of, so most shape
// functions copy an operand's type; the ops that take a `shape` operand read
// it as a constant (unranked when it is not one).
//
//===----------------------------------------------------------------------===//
#include "dialects/onnx/OnnxDialect.h"
#include "dialects/onnx/OnnxOpsHelpers.h"
#include "dialects/onnx/ShapeHelpers.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::pipec::onnx;

/// Checks that `a` and `b` can be the same shape and element type.
static LogicalResult checkSameType(Operation *op, Value a, Value b,
                                   StringRef aName, StringRef bName) {
  if (getElementType(a) != getElementType(b))
    return op->emitOpError() << aName << " and " << bName
                             << " have different element types "
                             << getElementType(a) << " and "
                             << getElementType(b);
  auto ta = getRanked(a), tb = getRanked(b);
  if (ta && tb &&
      (ta.getRank() != tb.getRank() ||
       failed(verifyCompatibleShape(ta.getShape(), tb.getShape()))))
    return op->emitOpError() << aName << " of type " << a.getType()
                             << " and " << bName << " of type " << b.getType()
                             << " must have the same shape";
  return success();
}

/// The type a `shape` operand describes, with element type `elt`.
static FailureOr<Type> typeFromShapeOperand(Operation *op, Value shape,
                                            Type elt) {
  auto t = getRanked(shape);
  if (t && t.getRank() != 1)
    return op->emitOpError() << "shape must be 1-D, got " << t;
  auto dims = getConstantInts(shape);
  if (!dims)
    return unranked(elt);
  for (int64_t d : *dims)
    if (d < 0)
      return op->emitOpError() << "shape has negative dimension " << d;
  return ranked(*dims, elt);
}

static LogicalResult checkPoolAttrs(Operation *op, ArrayRef<int64_t> kernel,
                                    ArrayRef<int64_t> pads,
                                    ArrayRef<int64_t> strides,
                                    ArrayRef<int64_t> dilations) {
  size_t n = kernel.size();
  if (pads.size() != 2 * n || strides.size() != n ||
      (!dilations.empty() && dilations.size() != n))
    return op->emitOpError()
           << "expects " << n << " strides and dilations and " << 2 * n
           << " pads for a " << n << "-D kernel";
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

#define PIPEC_ACTIVATION_GRAD(OP, SAVED, NAME)                                 \
  LogicalResult OP::inferResultTypes(SmallVectorImpl<Type> &types) {           \
    if (failed(checkSameType(*this, SAVED(), getDY(), NAME, "dY")))            \
      return failure();                                                        \
    types.push_back(getDY().getType());                                        \
    return success();                                                          \
  }
PIPEC_ACTIVATION_GRAD(ReluGradOp, getX, "X")
PIPEC_ACTIVATION_GRAD(TanhGradOp, getY, "Y")
PIPEC_ACTIVATION_GRAD(SigmoidGradOp, getY, "Y")
PIPEC_ACTIVATION_GRAD(ErfGradOp, getX, "X")
PIPEC_ACTIVATION_GRAD(SoftmaxGradOp, getY, "Y")
PIPEC_ACTIVATION_GRAD(LogSoftmaxGradOp, getY, "Y")
PIPEC_ACTIVATION_GRAD(UnaryGradOp, getX, "X")
#undef PIPEC_ACTIVATION_GRAD

LogicalResult
ReduceExtremumGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (getElementType(getX()) != getElementType(getDY()))
    return emitOpError() << "X and dY have different element types";
  types.push_back(getX().getType());
  return success();
}

LogicalResult TileGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto type = typeFromShapeOperand(*this, getShape(), getElementType(getDY()));
  if (failed(type))
    return failure();
  types.push_back(*type);
  return success();
}

LogicalResult PadGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto type = typeFromShapeOperand(*this, getShape(), getElementType(getDY()));
  if (failed(type))
    return failure();
  types.push_back(*type);
  return success();
}

LogicalResult ResizeGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto type = typeFromShapeOperand(*this, getShape(), getElementType(getDY()));
  if (failed(type))
    return failure();
  auto t = llvm::dyn_cast<RankedTensorType>(*type);
  auto dy = getRanked(getDY());
  if (t && dy && t.getRank() != dy.getRank())
    return emitOpError() << "dY of rank " << dy.getRank()
                         << " does not match shape of rank " << t.getRank();
  if (t && getScales() && (int64_t)getScales()->size() != t.getRank())
    return emitOpError() << "scales must have one entry per axis";
  if (t && getRoi() && (int64_t)getRoi()->size() != 2 * t.getRank())
    return emitOpError() << "roi must have two entries per axis";
  types.push_back(*type);
  return success();
}

LogicalResult ReduceToShapeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto type = typeFromShapeOperand(*this, getShape(), getElementType(getDY()));
  if (failed(type))
    return failure();
  auto target = getRanked(getShape()) ? llvm::dyn_cast<RankedTensorType>(*type)
                                      : RankedTensorType();
  if (auto dy = getRanked(getDY()); dy && target) {
    auto b = broadcastShapes(*this, target.getShape(), dy.getShape());
    if (failed(b))
      return failure();
    if (llvm::ArrayRef<int64_t>(*b) != dy.getShape())
      return emitOpError() << "shape " << target << " does not broadcast to "
                           << getDY().getType();
  }
  types.push_back(*type);
  return success();
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

LogicalResult AttentionGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto sizes = attentionSizes(*this, getQ(), getK(), getV(), getQNumHeads(),
                              std::nullopt);
  if (failed(sizes))
    return failure();
  auto p = getRanked(getProbs());
  if (p && (p.getRank() != 4 || conflicts(p.getDimSize(0), sizes->batch) ||
            conflicts(p.getDimSize(1), sizes->heads) ||
            conflicts(p.getDimSize(2), sizes->t) ||
            conflicts(p.getDimSize(3), sizes->s)))
    return emitOpError() << "Probs must be (batch, heads, t, s) = ("
                         << sizes->batch << ", " << sizes->heads << ", "
                         << sizes->t << ", " << sizes->s << "), got "
                         << getProbs().getType();
  auto dy = getRanked(getDY());
  int64_t width = sizes->form == AttentionSizes::FourD ? sizes->dh
                                                       : sizes->heads * sizes->dh;
  if (dy && (dy.getRank() != getRanked(getQ()).getRank() ||
             conflicts(dy.getDimSize(sizes->seqFirst ? 1 : 0), sizes->batch) ||
             conflicts(dy.getShape().back(), width)))
    return emitOpError() << "dY of type " << getDY().getType()
                         << " is not the forward's Y";
  types.push_back(getQ().getType());
  if (sizes->form != AttentionSizes::Packed) {
    types.push_back(getK().getType());
    types.push_back(getV().getType());
  }
  return success();
}

LogicalResult
LayerNormalizationGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkSameType(*this, getX(), getDY(), "X", "dY")))
    return failure();
  if (auto x = getRanked(getX()))
    if (failed(normalizeAxis(*this, getAxis(), x.getRank())))
      return failure();
  types.push_back(getDY().getType());
  types.push_back(getScale().getType());
  types.push_back(getScale().getType());
  return success();
}

LogicalResult
BatchNormalizationGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkSameType(*this, getX(), getDY(), "X", "dY")))
    return failure();
  auto x = getRanked(getX());
  if (x && x.getRank() < 2)
    return emitOpError() << "X must have rank >= 2, got " << x;
  {
    auto t = getRanked(getScale());
    if (t && (t.getRank() != 1 ||
              (x && !ShapedType::isDynamic(x.getDimSize(1)) &&
               !ShapedType::isDynamic(t.getDimSize(0)) &&
               t.getDimSize(0) != x.getDimSize(1))))
      return emitOpError() << "scale must be (C), got " << t;
  }
  types.push_back(getDY().getType());
  types.push_back(getScale().getType());
  types.push_back(getScale().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

LogicalResult ConvGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkPoolAttrs(*this, getKernelShape(), getPads(), getStrides(),
                            getDilations())))
    return failure();
  if (getGroup() < 1)
    return emitOpError() << "group must be positive";
  auto w = getRanked(getW());
  auto dy = getRanked(getDY());
  if (w && w.getRank() != static_cast<int64_t>(getKernelShape().size()) + 2)
    return emitOpError() << "W of type " << w << " does not match a "
                         << getKernelShape().size() << "-D kernel";
  types.push_back(getX().getType());
  types.push_back(getW().getType());
  Type elt = getElementType(getW());
  if (w)
    types.push_back(ranked({w.getDimSize(0)}, elt));
  else if (dy && dy.getRank() >= 2)
    types.push_back(ranked({dy.getDimSize(1)}, elt));
  else
    types.push_back(ranked({ShapedType::kDynamic}, elt));
  return success();
}

LogicalResult MaxPoolGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkPoolAttrs(*this, getKernelShape(), getPads(), getStrides(),
                            getDilations())))
    return failure();
  if (getElementType(getX()) != getElementType(getDY()))
    return emitOpError() << "X and dY have different element types";
  types.push_back(getX().getType());
  return success();
}

LogicalResult
AveragePoolGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkPoolAttrs(*this, getKernelShape(), getPads(), getStrides(),
                            {})))
    return failure();
  auto type = typeFromShapeOperand(*this, getShape(), getElementType(getDY()));
  if (failed(type))
    return failure();
  types.push_back(*type);
  return success();
}

LogicalResult
GlobalAveragePoolGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto type = typeFromShapeOperand(*this, getShape(), getElementType(getDY()));
  if (failed(type))
    return failure();
  types.push_back(*type);
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// A gradient typed by its `shape` operand (the forward data's), with the
/// forward's `axis` checked against it when it has one.
static LogicalResult typeFromShape(Operation *op, Value shape, Value dY,
                                   std::optional<int64_t> axis,
                                   SmallVectorImpl<Type> &types) {
  auto type = typeFromShapeOperand(op, shape, getElementType(dY));
  if (failed(type))
    return failure();
  if (auto t = llvm::dyn_cast<RankedTensorType>(*type); t && axis)
    if (failed(normalizeAxis(op, *axis, t.getRank())))
      return failure();
  types.push_back(*type);
  return success();
}

LogicalResult SliceGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return typeFromShape(*this, getShape(), getDY(), std::nullopt, types);
}

LogicalResult GatherGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return typeFromShape(*this, getShape(), getDY(), getAxis(), types);
}

LogicalResult GatherNDGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return typeFromShape(*this, getShape(), getDY(), std::nullopt, types);
}

LogicalResult ScatterNDGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(getDY().getType());
  return success();
}

LogicalResult GatherElementsGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return typeFromShape(*this, getShape(), getDY(), getAxis(), types);
}

LogicalResult ScatterElementsGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (auto t = getRanked(getDY()))
    if (failed(normalizeAxis(*this, getAxis(), t.getRank())))
      return failure();
  types.push_back(getDY().getType());
  return success();
}

LogicalResult DropoutGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto dy = getRanked(getDY()), mask = getRanked(getMask());
  if (dy && mask &&
      (dy.getRank() != mask.getRank() ||
       failed(verifyCompatibleShape(dy.getShape(), mask.getShape()))))
    return emitOpError() << "mask of type " << mask
                         << " does not match dY of type " << dy;
  types.push_back(getDY().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

static LogicalResult checkReduction(Operation *op, StringRef reduction) {
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return op->emitOpError() << "reduction must be none, sum or mean, got '"
                             << reduction << "'";
  return success();
}

LogicalResult SoftmaxCrossEntropyLossGradOp::inferResultTypes(
    SmallVectorImpl<Type> &types) {
  auto lp = getRanked(getLogProb());
  if (lp && lp.getRank() < 2)
    return emitOpError() << "log_prob must have rank >= 2, got " << lp;
  types.push_back(getLogProb().getType());
  return success();
}

LogicalResult SoftmaxCrossEntropyLossGradOp::verify() {
  return checkReduction(*this, getReduction());
}

LogicalResult NegativeLogLikelihoodLossGradOp::inferResultTypes(
    SmallVectorImpl<Type> &types) {
  auto type =
      typeFromShapeOperand(*this, getShape(), getElementType(getDloss()));
  if (failed(type))
    return failure();
  types.push_back(*type);
  return success();
}

LogicalResult NegativeLogLikelihoodLossGradOp::verify() {
  return checkReduction(*this, getReduction());
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

static LogicalResult checkScalarOperand(Operation *op, Value v,
                                        StringRef name) {
  if (auto t = getRanked(v); t && t.getRank() != 0)
    return op->emitOpError() << name << " must be a scalar, got " << t;
  return success();
}

LogicalResult SGDOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkScalarOperand(*this, getR(), "R")) ||
      failed(checkSameType(*this, getX(), getG(), "X", "G")))
    return failure();
  types.push_back(getX().getType());
  return success();
}

LogicalResult AdamWOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkScalarOperand(*this, getR(), "R")) ||
      failed(checkScalarOperand(*this, getT(), "T")) ||
      failed(checkSameType(*this, getX(), getG(), "X", "G")) ||
      failed(checkSameType(*this, getX(), getM(), "X", "M")) ||
      failed(checkSameType(*this, getX(), getV(), "X", "V")))
    return failure();
  for (int i = 0; i < 3; ++i)
    types.push_back(getX().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Recurrent
//===----------------------------------------------------------------------===//

/// dX, dW, dR, dB, dinitial_h (, dinitial_c) of LSTMGrad / GRUGrad.
static LogicalResult inferRecurrentGrad(Operation *op, int64_t gates, Value x,
                                        Value w, Value r, Value b,
                                        ValueRange states, StringRef direction,
                                        unsigned numStates,
                                        SmallVectorImpl<Type> &types) {
  auto s = recurrentSizes(op, gates, x, w, r, b, states, direction,
                          std::nullopt, 0);
  if (failed(s))
    return failure();
  Type elt = getElementType(x);
  types.push_back(x.getType());
  types.push_back(w.getType());
  types.push_back(r.getType());
  types.push_back(ranked(
      {s->dirs, ShapedType::isDynamic(s->hidden) ? ShapedType::kDynamic
                                                 : 2 * gates * s->hidden},
      elt));
  for (unsigned i = 0; i < numStates; ++i)
    types.push_back(ranked({s->dirs, s->batch, s->hidden}, elt));
  return success();
}

LogicalResult LSTMGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferRecurrentGrad(*this, 4, getX(), getW(), getR(), getB(),
                            {getInitialH(), getInitialC()}, getDirection(), 2,
                            types);
}

LogicalResult GRUGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferRecurrentGrad(*this, 3, getX(), getW(), getR(), getB(),
                            {getInitialH()}, getDirection(), 1, types);
}
