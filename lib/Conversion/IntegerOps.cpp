//===- IntegerOps.cpp - integer ops in the forms the kernels compute ------===//
//
// Part of the step lowering (StepLowering::run, before the buffers are
// planned). The kernels compute integers in i64: binary arithmetic,
// comparisons, Where, CumSum, Cast. Models compute some in narrower types,
// or with ops whose kernels are f32 only:
//
//   - Hugging Face's RoBERTa makes its position ids from the input ids as
//     `mask = ids.ne(pad).int(); (cumsum(mask) * mask).long() + pad`: Mul and
//     Add of i32;
//   - T5's relative-position buckets take Abs of i64 positions;
//   - a sequence's length is a ReduceSum of an i64 mask.
//
// Rewritten here:
//   - a binary op or comparison of i8/i16/i32 (signed or not; the runtime
//     has Casts to i8, u8 and i32 of these): operands Cast
//     to i64, the op in i64, the result Cast back (Add, Sub and Mul modulo
//     2^32 are what i32 arithmetic gives, overflow included; Div and Mod of
//     i32 values are exact in i64);
//   - Abs and Neg of an integer: Where(Less(x, 0), 0 - x, x) and 0 - x;
//   - ReduceSum of an integer over constant axes: per axis the last element
//     of a CumSum along it (Slice), then a Reshape to the result's shape
//     (no axes with noop_with_empty_axes: the input).
// Anything else is left for the lowering to refuse in its own words.
//
//===----------------------------------------------------------------------===//
#include "StepLowering.h"

#include "dialects/onnx/OnnxDialect.h"
#include "dialects/onnx/ShapeHelpers.h"
#include "pipec/Autodiff/OnnxBuilder.h"

using namespace mlir;
using namespace mlir::pipec;

namespace {

/// An integer type the kernels do not compute in (not i64, not bool).
bool isNarrowInteger(Type t) {
  auto i = dyn_cast<IntegerType>(t);
  return i && i.getWidth() > 1 && !(i.getWidth() == 64 && !i.isUnsigned());
}

bool isInteger(Type t) {
  auto i = dyn_cast<IntegerType>(t);
  return i && i.getWidth() > 1;
}

Type elementOf(Value v) { return getElementTypeOrSelf(v.getType()); }

Value castTo(autodiff::OnnxBuilder &ob, Value v, Type elt) {
  if (elementOf(v) == elt)
    return v;
  return ob.create<onnx::CastOp>(
      {v}, {ob.i64Attr("to", onnx::typeToOnnxDataType(elt))});
}

/// Rewrites `op`; true where it was replaced.
bool rewrite(Operation *op) {
  OpBuilder b(op);
  autodiff::OnnxBuilder ob(b, op->getLoc());
  Type i64 = b.getIntegerType(64);
  // `op`'s result replaced by `result`, where every op built for it typed.
  auto replaceWith = [&](Value result) {
    if (ob.failed())
      return false;
    op->getResult(0).replaceAllUsesWith(result);
    op->erase();
    return true;
  };
  const bool binary = isa<onnx::AddOp, onnx::SubOp, onnx::MulOp, onnx::DivOp, onnx::ModOp,
                          onnx::MaxOp, onnx::MinOp>(op);
  const bool compare = isa<onnx::EqualOp, onnx::LessOp, onnx::LessOrEqualOp, onnx::GreaterOp,
                           onnx::GreaterOrEqualOp>(op);
  if ((binary || compare) && op->getNumOperands() == 2 &&
      isNarrowInteger(elementOf(op->getOperand(0))) &&
      elementOf(op->getOperand(0)) == elementOf(op->getOperand(1))) {
    Type narrow = elementOf(op->getOperand(0));
    OperationState state(op->getLoc(), op->getName());
    state.addOperands({castTo(ob, op->getOperand(0), i64), castTo(ob, op->getOperand(1), i64)});
    state.addAttributes(op->getAttrs());
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    state.addTypes(compare ? Type(resultType) : Type(resultType.clone(i64)));
    Operation *wide = b.create(state);
    Value result = wide->getResult(0);
    if (!compare)
      result = castTo(ob, result, narrow);
    return replaceWith(result);
  }
  if (isa<onnx::AbsOp, onnx::NegOp>(op) && isInteger(elementOf(op->getOperand(0)))) {
    Type elt = elementOf(op->getOperand(0));
    Value x = castTo(ob, op->getOperand(0), i64);
    Value zero = ob.create<onnx::ConstantOp>(
        {}, {ob.attr("value", DenseElementsAttr::get(RankedTensorType::get({}, i64),
                                                     b.getI64IntegerAttr(0)))});
    Value negated = ob.sub(zero, x);
    Value result = negated;
    if (isa<onnx::AbsOp>(op))
      result = ob.create<onnx::WhereOp>({ob.create<onnx::LessOp>({x, zero}), negated, x});
    result = castTo(ob, result, elt);
    return replaceWith(result);
  }
  if (auto sum = dyn_cast<onnx::ReduceSumOp>(op); sum && isInteger(elementOf(op->getOperand(0)))) {
    auto in = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
    auto out = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!in || !out || !in.hasStaticShape() || !out.hasStaticShape())
      return false;
    int64_t rank = in.getRank();
    SmallVector<int64_t> axes;
    Value axesValue = op->getNumOperands() > 1 ? op->getOperand(1) : Value();
    if (axesValue && !isa<NoneType>(axesValue.getType())) {
      auto given = onnx::getConstantInts(axesValue);
      if (!given)
        return false;
      axes = *given;
    }
    auto noop = op->getAttrOfType<IntegerAttr>("noop_with_empty_axes");
    if (axes.empty() && noop && noop.getInt() != 0) {
      // No axes and noop_with_empty_axes: the input as it is.
      if (op->getOperand(0).getType() != out)
        return false;
      return replaceWith(op->getOperand(0));
    }
    if (axes.empty())
      for (int64_t a = 0; a < rank; ++a)
        axes.push_back(a);
    Type elt = in.getElementType();
    Value x = castTo(ob, op->getOperand(0), i64);
    for (int64_t a : axes) {
      if (a < 0)
        a += rank;
      if (a < 0 || a >= rank)
        return false;
      int64_t extent = cast<RankedTensorType>(x.getType()).getDimSize(a);
      if (extent == 0)
        return false;
      Value cum = ob.create<onnx::CumSumOp>({x, ob.scalarI64(a)});
      x = ob.create<onnx::SliceOp>({cum, ob.i64s({extent - 1}), ob.i64s({extent}), ob.i64s({a}),
                                    ob.i64s({1})});
    }
    x = castTo(ob, x, elt);
    Value result = ob.reshape(x, out);
    return replaceWith(result);
  }
  return false;
}

} // namespace

void mlir::pipec::steplowering::legalizeIntegerOps(func::FuncOp f) {
  SmallVector<Operation *> ops;
  for (Operation &op : f.getBody().front().without_terminator())
    ops.push_back(&op);
  for (Operation *op : ops)
    (void)rewrite(op);
}
