//===- ShapeHelpers.cpp ----------------------------------------------------===//
#include "dialects/onnx/ShapeHelpers.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/Diagnostics.h"

namespace mlir::pipec::onnx {

RankedTensorType getRanked(Value v) {
  return llvm::dyn_cast<RankedTensorType>(v.getType());
}

bool isNone(Value v) { return llvm::isa<NoneType>(v.getType()); }

Type getElementType(Value v) {
  if (auto t = llvm::dyn_cast<TensorType>(v.getType()))
    return t.getElementType();
  return {};
}

Type unranked(Type elementType) { return UnrankedTensorType::get(elementType); }

Type ranked(ArrayRef<int64_t> shape, Type elementType) {
  return RankedTensorType::get(shape, elementType);
}

ElementsAttr getConstantAttr(Value v) {
  if (!v || isNone(v))
    return {};
  Attribute attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return {};
  return llvm::dyn_cast<ElementsAttr>(attr);
}

std::optional<SmallVector<int64_t>> getConstantInts(Value v) {
  ElementsAttr attr = getConstantAttr(v);
  if (!attr || !llvm::isa<IntegerType>(attr.getElementType()))
    return std::nullopt;
  auto dense = llvm::dyn_cast<DenseIntElementsAttr>(attr);
  if (!dense)
    return std::nullopt;
  SmallVector<int64_t> out;
  for (const APInt &x : dense.getValues<APInt>())
    out.push_back(x.getSExtValue());
  return out;
}

FailureOr<SmallVector<int64_t>> broadcastShapes(Operation *op,
                                                ArrayRef<int64_t> a,
                                                ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == 1)
      out[i] = db;
    else if (db == 1)
      out[i] = da;
    else if (ShapedType::isDynamic(da) || ShapedType::isDynamic(db))
      out[i] = ShapedType::isDynamic(da) ? db : da;
    else if (da == db)
      out[i] = da;
    else
      return op->emitOpError() << "operand shapes do not broadcast: dimension "
                               << i << " is " << da << " and " << db;
  }
  return out;
}

FailureOr<int64_t> normalizeAxis(Operation *op, int64_t axis, int64_t rank,
                                 StringRef what) {
  if (axis < -rank || axis >= rank)
    return op->emitOpError() << what << " " << axis
                             << " is out of range for rank " << rank;
  return axis < 0 ? axis + rank : axis;
}

} // namespace mlir::pipec::onnx
