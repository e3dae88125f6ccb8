//===- OnnxOpsElementwise.cpp - elementwise and linear algebra ops --------===//
//
// Shape functions of the elementwise ops (numpy broadcasting binary ops,
// Where, unary ops, Cast) and of Gemm and MatMul.
//
//===----------------------------------------------------------------------===//
#include "dialects/onnx/OnnxDialect.h"
#include "dialects/onnx/OnnxOpsHelpers.h"
#include "dialects/onnx/ShapeHelpers.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::pipec::onnx;

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// Numpy broadcasting of all `values`; the result has element type
/// `resultElement`.
static LogicalResult inferBroadcastShape(Operation *op, ValueRange values,
                                         Type resultElement,
                                         SmallVectorImpl<Type> &types) {
  SmallVector<int64_t> shape;
  bool allRanked = true;
  for (Value v : values) {
    auto t = getRanked(v);
    if (!t) {
      allRanked = false;
      continue;
    }
    auto next = broadcastShapes(op, shape, t.getShape());
    if (failed(next))
      return failure();
    shape = *next;
  }
  types.push_back(allRanked ? ranked(shape, resultElement)
                            : unranked(resultElement));
  return success();
}

/// Shape function shared by numpy-broadcasting binary ops.
static LogicalResult inferBroadcast(Operation *op, Value a, Value b,
                                    Type resultElement,
                                    SmallVectorImpl<Type> &types) {
  if (getElementType(a) != getElementType(b))
    return op->emitOpError() << "operands have different element types "
                             << getElementType(a) << " and "
                             << getElementType(b);
  return inferBroadcastShape(op, {a, b}, resultElement, types);
}

LogicalResult AddOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferBroadcast(*this, getA(), getB(), getElementType(getA()), types);
}
LogicalResult SubOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferBroadcast(*this, getA(), getB(), getElementType(getA()), types);
}
LogicalResult MulOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferBroadcast(*this, getA(), getB(), getElementType(getA()), types);
}
LogicalResult DivOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferBroadcast(*this, getA(), getB(), getElementType(getA()), types);
}

LogicalResult PowOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferBroadcastShape(*this, {getX(), getY()}, getElementType(getX()),
                             types);
}

LogicalResult EqualOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferBroadcast(*this, getA(), getB(),
                        IntegerType::get(getContext(), 1), types);
}

LogicalResult WhereOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkSameElementType(*this, getX(), getY(), "X", "Y")))
    return failure();
  return inferBroadcastShape(*this, {getCondition(), getX(), getY()},
                             getElementType(getX()), types);
}

#define PIPEC_SAME_TYPE_AS(OP, OPERAND)                                        \
  LogicalResult OP::inferResultTypes(SmallVectorImpl<Type> &types) {           \
    types.push_back(OPERAND().getType());                                      \
    return success();                                                          \
  }
PIPEC_SAME_TYPE_AS(ReluOp, getX)
PIPEC_SAME_TYPE_AS(NegOp, getX)
PIPEC_SAME_TYPE_AS(TanhOp, getInput)
PIPEC_SAME_TYPE_AS(SigmoidOp, getX)
PIPEC_SAME_TYPE_AS(ErfOp, getInput)
PIPEC_SAME_TYPE_AS(SqrtOp, getX)
PIPEC_SAME_TYPE_AS(ExpOp, getInput)
PIPEC_SAME_TYPE_AS(LogOp, getInput)
PIPEC_SAME_TYPE_AS(SinOp, getInput)
PIPEC_SAME_TYPE_AS(CosOp, getInput)
PIPEC_SAME_TYPE_AS(IdentityOp, getInput)
PIPEC_SAME_TYPE_AS(AbsOp, getX)
PIPEC_SAME_TYPE_AS(ReciprocalOp, getX)
PIPEC_SAME_TYPE_AS(SignOp, getX)
PIPEC_SAME_TYPE_AS(FloorOp, getX)
PIPEC_SAME_TYPE_AS(CeilOp, getX)
PIPEC_SAME_TYPE_AS(SoftplusOp, getX)
PIPEC_SAME_TYPE_AS(HardSwishOp, getX)
PIPEC_SAME_TYPE_AS(NotOp, getX)
PIPEC_SAME_TYPE_AS(LeakyReluOp, getX)
PIPEC_SAME_TYPE_AS(EluOp, getX)
PIPEC_SAME_TYPE_AS(SeluOp, getX)
PIPEC_SAME_TYPE_AS(HardSigmoidOp, getX)
PIPEC_SAME_TYPE_AS(GeluOp, getX)
#undef PIPEC_SAME_TYPE_AS

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError() << "approximate must be \"none\" or \"tanh\", got '"
                         << getApproximate() << "'";
  return success();
}

LogicalResult ClipOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  for (Value bound : {getMin(), getMax()}) {
    if (isNone(bound))
      continue;
    if (getElementType(bound) != getElementType(getInput()))
      return emitOpError() << "bounds must have the input's element type "
                           << getElementType(getInput()) << ", got "
                           << getElementType(bound);
    if (auto t = getRanked(bound); t && t.getNumElements() != 1)
      return emitOpError() << "bounds must be scalars, got " << t;
  }
  types.push_back(getInput().getType());
  return success();
}

LogicalResult MaxOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferBroadcast(*this, getA(), getB(), getElementType(getA()), types);
}
LogicalResult MinOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferBroadcast(*this, getA(), getB(), getElementType(getA()), types);
}
LogicalResult ModOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferBroadcast(*this, getA(), getB(), getElementType(getA()), types);
}
LogicalResult ModOp::verify() {
  if (getFmod() != 0 && getFmod() != 1)
    return emitOpError() << "fmod must be 0 or 1, got " << getFmod();
  if (getFmod() == 0 && llvm::isa<FloatType>(getElementType(getA())))
    return emitOpError() << "fmod must be 1 for floating-point operands "
                            "(ONNX Mod)";
  return success();
}

#define PIPEC_BOOL_BROADCAST(OP)                                               \
  LogicalResult OP::inferResultTypes(SmallVectorImpl<Type> &types) {           \
    return inferBroadcast(*this, getA(), getB(),                               \
                          IntegerType::get(getContext(), 1), types);           \
  }
PIPEC_BOOL_BROADCAST(LessOp)
PIPEC_BOOL_BROADCAST(LessOrEqualOp)
PIPEC_BOOL_BROADCAST(GreaterOp)
PIPEC_BOOL_BROADCAST(GreaterOrEqualOp)
PIPEC_BOOL_BROADCAST(AndOp)
PIPEC_BOOL_BROADCAST(OrOp)
#undef PIPEC_BOOL_BROADCAST

LogicalResult CastOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type to = onnxDataTypeToType(getContext(), getTo());
  if (!to)
    return emitOpError() << "'to' is " << static_cast<int64_t>(getTo())
                         << ", not an ONNX data type code this compiler knows";
  types.push_back(withElementType(getInput().getType(), to));
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

LogicalResult GemmOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getA());
  if (failed(checkSameElementType(*this, getA(), getB(), "A", "B")) ||
      failed(checkSameElementType(*this, getA(), getC(), "A", "C")))
    return failure();
  auto ta = getRanked(getA()), tb = getRanked(getB());
  if (!ta || !tb) {
    types.push_back(unranked(elt));
    return success();
  }
  if (ta.getRank() != 2 || tb.getRank() != 2)
    return emitOpError() << "A and B must be 2-D, got " << ta << " and " << tb;
  int64_t m = ta.getDimSize(getTransA() ? 1 : 0);
  int64_t ka = ta.getDimSize(getTransA() ? 0 : 1);
  int64_t kb = tb.getDimSize(getTransB() ? 1 : 0);
  int64_t n = tb.getDimSize(getTransB() ? 0 : 1);
  if (conflicts(ka, kb))
    return emitOpError() << "inner dimensions differ: " << ka << " and " << kb;
  if (auto tc = getRanked(getC())) {
    if (tc.getRank() > 2)
      return emitOpError() << "C must broadcast to " << m << "x" << n;
    SmallVector<int64_t> mn{m, n};
    auto shape = broadcastShapes(*this, mn, tc.getShape());
    if (failed(shape))
      return failure();
    if (conflicts((*shape)[0], m) || conflicts((*shape)[1], n))
      return emitOpError() << "C does not broadcast to " << m << "x" << n;
  }
  types.push_back(ranked({m, n}, elt));
  return success();
}

LogicalResult MatMulOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getA());
  if (failed(checkSameElementType(*this, getA(), getB(), "A", "B")))
    return failure();
  auto ta = getRanked(getA()), tb = getRanked(getB());
  if (!ta || !tb) {
    types.push_back(unranked(elt));
    return success();
  }
  if (ta.getRank() == 0 || tb.getRank() == 0)
    return emitOpError() << "operands must not be scalars";
  SmallVector<int64_t> a(ta.getShape()), b(tb.getShape());
  bool promotedA = a.size() == 1, promotedB = b.size() == 1;
  if (promotedA)
    a.insert(a.begin(), 1);
  if (promotedB)
    b.push_back(1);
  int64_t ka = a.back(), kb = b[b.size() - 2];
  if (conflicts(ka, kb))
    return emitOpError() << "inner dimensions differ: " << ka << " and " << kb;
  auto batch = broadcastShapes(*this, ArrayRef<int64_t>(a).drop_back(2),
                               ArrayRef<int64_t>(b).drop_back(2));
  if (failed(batch))
    return failure();
  SmallVector<int64_t> out(*batch);
  if (!promotedA)
    out.push_back(a[a.size() - 2]);
  if (!promotedB)
    out.push_back(b.back());
  types.push_back(ranked(out, elt));
  return success();
}
