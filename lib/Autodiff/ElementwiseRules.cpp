//===- ElementwiseRules.cpp - VJPs of elementwise ops ----------------------===//
//
// Broadcasting operands get the gradient summed back to their shape
// (onnx.ReduceToShape); activations use the gradient ops that mirror the
// pipert kernels.
//
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include "dialects/onnx/ShapeHelpers.h"

using namespace mlir;
using namespace mlir::pipec;
using namespace mlir::pipec::autodiff;
using namespace mlir::pipec::onnx;

namespace mlir::pipec::autodiff {

LogicalResult vjp(AddOp op, VjpContext &ctx) {
  Value dy = ctx.resultGrad(0);
  for (unsigned i = 0; i < 2; ++i)
    if (ctx.needsGrad(i))
      ctx.setGrad(i, ctx.reduceToShape(dy, op->getOperand(i).getType()));
  return success();
}

LogicalResult vjp(SubOp op, VjpContext &ctx) {
  Value dy = ctx.resultGrad(0);
  if (ctx.needsGrad(0))
    ctx.setGrad(0, ctx.reduceToShape(dy, op.getA().getType()));
  if (ctx.needsGrad(1))
    ctx.setGrad(1, ctx.neg(ctx.reduceToShape(dy, op.getB().getType())));
  return success();
}

LogicalResult vjp(MulOp op, VjpContext &ctx) {
  Value dy = ctx.resultGrad(0);
  if (ctx.needsGrad(0))
    ctx.setGrad(0, ctx.reduceToShape(ctx.mul(dy, op.getB()),
                                     op.getA().getType()));
  if (ctx.needsGrad(1))
    ctx.setGrad(1, ctx.reduceToShape(ctx.mul(dy, op.getA()),
                                     op.getB().getType()));
  return success();
}

LogicalResult vjp(DivOp op, VjpContext &ctx) {
  Value dy = ctx.resultGrad(0);
  // d(A/B)/dA = 1/B; d(A/B)/dB = -(A/B)/B.
  if (ctx.needsGrad(0))
    ctx.setGrad(0, ctx.reduceToShape(ctx.div(dy, op.getB()),
                                     op.getA().getType()));
  if (ctx.needsGrad(1)) {
    Value g = ctx.div(ctx.mul(dy, op.getC()), op.getB());
    ctx.setGrad(1, ctx.neg(ctx.reduceToShape(g, op.getB().getType())));
  }
  return success();
}

LogicalResult vjp(PowOp op, VjpContext &ctx) {
  Value dz = ctx.resultGrad(0);
  Value x = op.getX(), y = op.getY();
  if (ctx.needsGrad(0)) {
    // Y * X^(Y-1); Y may be an integer exponent, made X's element type.
    Value yf = y;
    Type elt = getElementType(x);
    if (getElementType(y) != elt)
      yf = ctx.create<CastOp>(
          {y}, {ctx.i64Attr("to", typeToOnnxDataType(elt))});
    Value ym1 = ctx.sub(yf, ctx.scalar(elt, 1.0));
    Value dxdz = ctx.mul(ctx.create<PowOp>({x, ym1}), yf);
    ctx.setGrad(0, ctx.reduceToShape(ctx.mul(dz, dxdz), x.getType()));
  }
  if (ctx.needsGrad(1)) {
    // Z * log(X).
    Value g = ctx.mul(dz, ctx.mul(op.getZ(), ctx.create<LogOp>({x})));
    ctx.setGrad(1, ctx.reduceToShape(g, y.getType()));
  }
  return success();
}

LogicalResult vjp(NegOp op, VjpContext &ctx) {
  ctx.setGrad(0, ctx.neg(ctx.resultGrad(0)));
  return success();
}

LogicalResult vjp(ReluOp op, VjpContext &ctx) {
  ctx.setGrad(0, ctx.create<ReluGradOp>({op.getX(), ctx.resultGrad(0)}));
  return success();
}

LogicalResult vjp(TanhOp op, VjpContext &ctx) {
  ctx.setGrad(0, ctx.create<TanhGradOp>({op.getOutput(), ctx.resultGrad(0)}));
  return success();
}

LogicalResult vjp(SigmoidOp op, VjpContext &ctx) {
  ctx.setGrad(0, ctx.create<SigmoidGradOp>({op.getY(), ctx.resultGrad(0)}));
  return success();
}

LogicalResult vjp(ErfOp op, VjpContext &ctx) {
  ctx.setGrad(0, ctx.create<ErfGradOp>({op.getInput(), ctx.resultGrad(0)}));
  return success();
}

LogicalResult vjp(SqrtOp op, VjpContext &ctx) {
  // dY / (2 sqrt(X)).
  Value twoY =
      ctx.mul(op.getY(), ctx.scalar(getElementType(op.getY()), 2.0));
  ctx.setGrad(0, ctx.div(ctx.resultGrad(0), twoY));
  return success();
}

LogicalResult vjp(ExpOp op, VjpContext &ctx) {
  ctx.setGrad(0, ctx.mul(ctx.resultGrad(0), op.getOutput()));
  return success();
}

LogicalResult vjp(LogOp op, VjpContext &ctx) {
  ctx.setGrad(0, ctx.div(ctx.resultGrad(0), op.getInput()));
  return success();
}

LogicalResult vjp(IdentityOp op, VjpContext &ctx) {
  ctx.setGrad(0, ctx.resultGrad(0));
  return success();
}

LogicalResult vjp(CastOp op, VjpContext &ctx) {
  // Only float-to-float casts are active; the gradient casts back.
  Type from = getElementType(op.getInput());
  ctx.setGrad(0, ctx.create<CastOp>(
                     {ctx.resultGrad(0)},
                     {ctx.i64Attr("to", typeToOnnxDataType(from))}));
  return success();
}

LogicalResult vjp(WhereOp op, VjpContext &ctx) {
  Value dy = ctx.resultGrad(0);
  Value zero = ctx.scalar(getElementType(dy), 0.0);
  if (ctx.needsGrad(1))
    ctx.setGrad(1, ctx.reduceToShape(
                       ctx.create<WhereOp>({op.getCondition(), dy, zero}),
                       op.getX().getType()));
  if (ctx.needsGrad(2))
    ctx.setGrad(2, ctx.reduceToShape(
                       ctx.create<WhereOp>({op.getCondition(), zero, dy}),
                       op.getY().getType()));
  return success();
}

} // namespace mlir::pipec::autodiff
