//===- OnnxBuilder.cpp -----------------------------------------------------===//
#include "pipec/Autodiff/OnnxBuilder.h"

#include "dialects/onnx/OnnxDialect.h"
#include "dialects/onnx/ShapeHelpers.h"

using namespace mlir;
using namespace mlir::pipec;
using namespace mlir::pipec::autodiff;

Operation *OnnxBuilder::build(StringRef name, ValueRange operands,
                              ArrayRef<NamedAttribute> attrs,
                              unsigned numResults) {
  // Placeholder result types: the shape function replaces them right away.
  Operation *op = onnx::createByName(b, loc, name, operands, attrs, numResults);
  if (auto shaped = llvm::dyn_cast<onnx::ShapeInferenceOpInterface>(op))
    if (mlir::failed(shaped.inferShapes()))
      hadError = true;
  return op;
}

Value OnnxBuilder::none() {
  return onnx::NoValueOp::create(b, loc, b.getNoneType());
}

Value OnnxBuilder::splat(Type type, double value) {
  auto tensor = llvm::cast<RankedTensorType>(type);
  auto elements = DenseElementsAttr::get(
      tensor, b.getFloatAttr(tensor.getElementType(), value));
  return create<onnx::ConstantOp>({}, {attr("value", elements)});
}

Value OnnxBuilder::scalar(Type elt, double value) {
  return splat(RankedTensorType::get({}, elt), value);
}

Value OnnxBuilder::scalarI64(int64_t value) {
  auto type = RankedTensorType::get({}, b.getI64Type());
  return create<onnx::ConstantOp>(
      {}, {attr("value", DenseElementsAttr::get(type, b.getI64IntegerAttr(value)))});
}

Value OnnxBuilder::i64s(ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                    b.getI64Type());
  return create<onnx::ConstantOp>(
      {}, {attr("value", DenseElementsAttr::get(type, values))});
}

Value OnnxBuilder::add(Value x, Value y) { return create<onnx::AddOp>({x, y}); }
Value OnnxBuilder::sub(Value x, Value y) { return create<onnx::SubOp>({x, y}); }
Value OnnxBuilder::mul(Value x, Value y) { return create<onnx::MulOp>({x, y}); }
Value OnnxBuilder::div(Value x, Value y) { return create<onnx::DivOp>({x, y}); }
Value OnnxBuilder::neg(Value x) { return create<onnx::NegOp>({x}); }

Value OnnxBuilder::reshape(Value x, Type type) {
  if (x.getType() == type)
    return x;
  return create<onnx::ReshapeOp>({x, shapeOf(type)});
}

Value OnnxBuilder::reduceToShape(Value g, Type type) {
  if (g.getType() == type)
    return g;
  return create<onnx::ReduceToShapeOp>({g, shapeOf(type)});
}
