//===- OnnxOps.cpp - shape functions, verifiers and folders ----------------===//
//
// Each op's `inferResultTypes` is its shape function. It is the truth for
// result types whatever opset the model came from, and it is what lets later
// passes (micro-batching) change a batch size and re-infer the graph.
//
//===----------------------------------------------------------------------===//
#include "dialects/onnx/OnnxDialect.h"
#include "dialects/onnx/ShapeHelpers.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::pipec::onnx;

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

OpFoldResult NoValueOp::fold(FoldAdaptor) { return UnitAttr::get(getContext()); }

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult ConstantOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(RankedTensorType::get(getValue().getShapedType().getShape(),
                                        getValue().getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// Shape function shared by numpy-broadcasting binary ops.
static LogicalResult inferBroadcast(Operation *op, Value a, Value b,
                                    Type resultElement,
                                    SmallVectorImpl<Type> &types) {
  if (getElementType(a) != getElementType(b))
    return op->emitOpError() << "operands have different element types "
                             << getElementType(a) << " and "
                             << getElementType(b);
  auto ta = getRanked(a), tb = getRanked(b);
  if (!ta || !tb) {
    types.push_back(unranked(resultElement));
    return success();
  }
  auto shape = broadcastShapes(op, ta.getShape(), tb.getShape());
  if (failed(shape))
    return failure();
  types.push_back(ranked(*shape, resultElement));
  return success();
}

LogicalResult AddOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferBroadcast(*this, getA(), getB(), getElementType(getA()), types);
}

LogicalResult ReluOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(getX().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

LogicalResult GemmOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getA());
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
  if (!ShapedType::isDynamic(ka) && !ShapedType::isDynamic(kb) && ka != kb)
    return emitOpError() << "inner dimensions differ: " << ka << " and " << kb;
  if (auto tc = getRanked(getC())) {
    if (tc.getRank() > 2)
      return emitOpError() << "C must broadcast to " << m << "x" << n;
    SmallVector<int64_t> mn{m, n};
    auto shape = broadcastShapes(*this, mn, tc.getShape());
    if (failed(shape))
      return failure();
    if (!ShapedType::isDynamic((*shape)[0]) && !ShapedType::isDynamic(m) &&
        (*shape)[0] != m)
      return emitOpError() << "C does not broadcast to " << m << "x" << n;
    if (!ShapedType::isDynamic((*shape)[1]) && !ShapedType::isDynamic(n) &&
        (*shape)[1] != n)
      return emitOpError() << "C does not broadcast to " << m << "x" << n;
  }
  types.push_back(ranked({m, n}, elt));
  return success();
}

LogicalResult MatMulOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getA());
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
  if (!ShapedType::isDynamic(ka) && !ShapedType::isDynamic(kb) && ka != kb)
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

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

/// The [start, end) range of Shape's output, clamped as ONNX specifies.
static std::pair<int64_t, int64_t> shapeRange(ShapeOp op, int64_t rank) {
  auto clamp = [&](int64_t v) {
    if (v < 0)
      v += rank;
    return std::min(std::max<int64_t>(v, 0), rank);
  };
  int64_t start = op.getStart() ? clamp(*op.getStart()) : 0;
  int64_t end = op.getEnd() ? clamp(*op.getEnd()) : rank;
  return {start, std::max(start, end)};
}

LogicalResult ShapeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type i64 = IntegerType::get(getContext(), 64);
  auto t = getRanked(getData());
  if (!t) {
    types.push_back(ranked({ShapedType::kDynamic}, i64));
    return success();
  }
  auto [start, end] = shapeRange(*this, t.getRank());
  types.push_back(ranked({end - start}, i64));
  return success();
}

OpFoldResult ShapeOp::fold(FoldAdaptor) {
  auto t = getRanked(getData());
  if (!t || !t.hasStaticShape())
    return {};
  auto [start, end] = shapeRange(*this, t.getRank());
  auto type = RankedTensorType::get({end - start},
                                    IntegerType::get(getContext(), 64));
  return DenseIntElementsAttr::get(type, t.getShape().slice(start, end - start));
}

/// Resolves a Reshape target (0 copies the input dim unless allowzero, -1 is
/// inferred); emits an error on `op` when it cannot hold the input.
static FailureOr<SmallVector<int64_t>>
resolveReshape(Operation *op, ArrayRef<int64_t> input,
               ArrayRef<int64_t> target, bool allowZero) {
  SmallVector<int64_t> out;
  int64_t inferred = -1, known = 1;
  bool inputStatic = llvm::none_of(input, ShapedType::isDynamic);
  for (auto [i, targetDim] : llvm::enumerate(target)) {
    int64_t d = targetDim;
    if (d == -1) {
      if (inferred >= 0)
        return op->emitOpError() << "shape has more than one -1";
      inferred = i;
      out.push_back(ShapedType::kDynamic);
      continue;
    }
    if (d == 0 && !allowZero) {
      if (i >= input.size())
        return op->emitOpError() << "shape copies dimension " << i
                                 << " that the input of rank " << input.size()
                                 << " lacks";
      d = input[i];
    } else if (d < -1) {
      return op->emitOpError() << "shape has invalid dimension " << d;
    }
    out.push_back(d);
    if (ShapedType::isDynamic(d))
      inputStatic = false;
    else
      known *= d;
  }
  if (inputStatic) {
    int64_t total = 1;
    for (int64_t d : input)
      total *= d;
    if (inferred >= 0) {
      if (known == 0 || total % known != 0)
        return op->emitOpError() << "cannot reshape " << total
                                 << " elements into the target shape";
      out[inferred] = total / known;
    } else if (total != known) {
      return op->emitOpError() << "cannot reshape " << total
                               << " elements into " << known;
    }
  }
  return out;
}

LogicalResult ReshapeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getData());
  auto target = getConstantInts(getShape());
  auto t = getRanked(getData());
  if (!target || !t) {
    if (auto st = getRanked(getShape()); st && st.hasStaticShape())
      types.push_back(ranked(SmallVector<int64_t>(st.getDimSize(0),
                                                  ShapedType::kDynamic),
                             elt));
    else
      types.push_back(unranked(elt));
    return success();
  }
  auto shape = resolveReshape(*this, t.getShape(), *target, getAllowzero());
  if (failed(shape))
    return failure();
  types.push_back(ranked(*shape, elt));
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  auto data = llvm::dyn_cast_if_present<DenseElementsAttr>(adaptor.getData());
  auto type = llvm::dyn_cast<RankedTensorType>(getType());
  if (!data || !type || !type.hasStaticShape())
    return {};
  return data.reshape(type);
}

#define GET_OP_CLASSES
#include "dialects/onnx/OnnxOps.cpp.inc"
