//===- OnnxBuilder.h - building onnx ops with inferred types ----*- C++ -*-===//
#ifndef PIPEC_AUTODIFF_ONNXBUILDER_H
#define PIPEC_AUTODIFF_ONNXBUILDER_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::pipec::autodiff {

/// Builds onnx ops whose result types come from their shape functions, so
/// that the code building gradients and updates never spells a type. A shape
/// function that rejects what was built emits an error on the new op and
/// marks the builder failed; callers check `failed()` once at the end.
class OnnxBuilder {
public:
  OnnxBuilder(OpBuilder &builder, Location loc) : b(builder), loc(loc) {}

  OpBuilder &builder() { return b; }
  Location getLoc() const { return loc; }
  void setLoc(Location l) { loc = l; }
  bool failed() const { return hadError; }
  void markFailed() { hadError = true; }

  /// An op named `name` with `numResults` results typed by its shape
  /// function.
  Operation *build(StringRef name, ValueRange operands,
                   ArrayRef<NamedAttribute> attrs = {}, unsigned numResults = 1);
  template <typename OpTy>
  Operation *build(ValueRange operands, ArrayRef<NamedAttribute> attrs = {},
                   unsigned numResults = 1) {
    return build(OpTy::getOperationName(), operands, attrs, numResults);
  }
  /// The single result of such an op.
  template <typename OpTy>
  Value create(ValueRange operands, ArrayRef<NamedAttribute> attrs = {}) {
    return build<OpTy>(operands, attrs, 1)->getResult(0);
  }

  NamedAttribute attr(StringRef name, Attribute value) {
    return b.getNamedAttr(name, value);
  }
  NamedAttribute i64Attr(StringRef name, int64_t v) {
    return attr(name, b.getI64IntegerAttr(v));
  }
  NamedAttribute f32Attr(StringRef name, double v) {
    return attr(name, b.getF32FloatAttr(v));
  }
  NamedAttribute strAttr(StringRef name, StringRef v) {
    return attr(name, b.getStringAttr(v));
  }
  NamedAttribute i64ArrayAttr(StringRef name, ArrayRef<int64_t> v) {
    return attr(name, b.getDenseI64ArrayAttr(v));
  }

  /// onnx.NoValue, for an absent optional operand.
  Value none();
  /// A constant of `type` (a ranked tensor of floats) filled with `value`.
  Value splat(Type type, double value);
  /// A rank-0 float constant of element type `elt`.
  Value scalar(Type elt, double value);
  /// A rank-0 i64 constant.
  Value scalarI64(int64_t value);
  /// A 1-D i64 constant (shapes, axes, split sizes).
  Value i64s(ArrayRef<int64_t> values);
  /// The 1-D i64 constant holding the shape of ranked tensor type `type`.
  Value shapeOf(Type type) {
    return i64s(llvm::cast<RankedTensorType>(type).getShape());
  }

  Value add(Value a, Value b);
  Value sub(Value a, Value b);
  Value mul(Value a, Value b);
  Value div(Value a, Value b);
  Value neg(Value a);
  /// `a` reshaped to the static shape of `type`.
  Value reshape(Value a, Type type);
  /// The gradient `g` of a value broadcast from `type`, summed back to it:
  /// `g` itself when the types agree, else onnx.ReduceToShape.
  Value reduceToShape(Value g, Type type);

private:
  OpBuilder &b;
  Location loc;
  bool hadError = false;
};

} // namespace mlir::pipec::autodiff

#endif
