//===- ShapeHelpers.cpp ----------------------------------------------------===//
#include "dialects/onnx/ShapeHelpers.h"
#include "dialects/onnx/OnnxDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include <algorithm>
#include "mlir/IR/Diagnostics.h"

namespace mlir::pipec::onnx {

RankedTensorType getRanked(Value v) {
  return llvm::dyn_cast<RankedTensorType>(v.getType());
}

bool isNone(Value v) { return llvm::isa<NoneType>(v.getType()); }

Value stripReshapes(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!llvm::isa<ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp, IdentityOp>(def))
      break;
    v = def->getOperand(0);
  }
  return v;
}

Type getElementType(Value v) {
  if (auto t = llvm::dyn_cast<TensorType>(v.getType()))
    return t.getElementType();
  return {};
}

Type unranked(Type elementType) { return UnrankedTensorType::get(elementType); }

Type ranked(ArrayRef<int64_t> shape, Type elementType) {
  return RankedTensorType::get(shape, elementType);
}

std::optional<double> getSplatFloat(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return std::nullopt;
  auto dense = dyn_cast_or_null<DenseFPElementsAttr>(c->getAttr("value"));
  if (!dense || !dense.isSplat())
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
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

Type onnxDataTypeToType(MLIRContext *ctx, int64_t code) {
  Builder b(ctx);
  auto unsignedInt = [&](unsigned width) {
    return IntegerType::get(ctx, width, IntegerType::Unsigned);
  };
  switch (code) {
  case 1: return b.getF32Type();
  case 2: return unsignedInt(8);
  case 3: return b.getIntegerType(8);
  case 4: return unsignedInt(16);
  case 5: return b.getIntegerType(16);
  case 6: return b.getIntegerType(32);
  case 7: return b.getIntegerType(64);
  case 9: return b.getI1Type();
  case 10: return b.getF16Type();
  case 11: return b.getF64Type();
  case 12: return unsignedInt(32);
  case 13: return unsignedInt(64);
  case 14: return ComplexType::get(b.getF32Type());
  case 15: return ComplexType::get(b.getF64Type());
  case 16: return b.getBF16Type();
  case 17: return Float8E4M3FNType::get(ctx);
  case 18: return Float8E4M3FNUZType::get(ctx);
  case 19: return Float8E5M2Type::get(ctx);
  case 20: return Float8E5M2FNUZType::get(ctx);
  default: return {};
  }
}

int64_t typeToOnnxDataType(Type type) {
  if (!type)
    return 0;
  for (int64_t code = 1; code <= 20; ++code)
    if (onnxDataTypeToType(type.getContext(), code) == type)
      return code;
  return 0;
}

SliceRange resolveSliceRange(int64_t dim, int64_t start, int64_t end,
                             int64_t step) {
  if (dim == 0)
    return {0, step, 0};
  if (start < 0)
    start += dim;
  if (end < 0)
    end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
  }
  int64_t size = 0;
  if (step > 0 && end > start)
    size = (end - start + step - 1) / step;
  else if (step < 0 && start > end)
    size = (start - end + (-step) - 1) / (-step);
  return {start, step, size};
}

} // namespace mlir::pipec::onnx

mlir::Operation *mlir::pipec::onnx::createByName(OpBuilder &b, Location loc,
                                           StringRef name, ValueRange operands,
                                           ArrayRef<NamedAttribute> attrs,
                                           unsigned numResults) {
  OperationState state(loc, name);
  state.addOperands(operands);
  state.addAttributes(attrs);
  state.addTypes(SmallVector<Type>(
      numResults, UnrankedTensorType::get(b.getF32Type())));
  return b.create(state);
}
