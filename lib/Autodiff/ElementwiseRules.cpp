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
    Type elt = getElementType(x);
    // A constant exponent c (RMSNorm's x ** 2): c X^(c-1) with c - 1 a
    // constant, and for c = 2 just 2 X (no Pow, no Sub at run time).
    if (std::optional<double> c = onnx::getSplatFloat(y); c && elt.isF32()) {
      Value dxdz = *c == 2.0   ? ctx.mul(x, ctx.scalar(elt, 2.0))
                   : *c == 1.0 ? Value()
                               : ctx.mul(ctx.create<PowOp>({x, ctx.scalar(elt, *c - 1.0)}),
                                         ctx.scalar(elt, *c));
      ctx.setGrad(0, ctx.reduceToShape(dxdz ? ctx.mul(dz, dxdz) : dz, x.getType()));
      if (ctx.needsGrad(1)) {
        Value g = ctx.mul(dz, ctx.mul(op.getZ(), ctx.create<LogOp>({x})));
        ctx.setGrad(1, ctx.reduceToShape(g, y.getType()));
      }
      return success();
    }
    // Y * X^(Y-1); Y may be an integer exponent, made X's element type.
    Value yf = y;
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
  // From the output: Y > 0 exactly where X > 0 (Y is 0 for a NaN X, whose
  // gradient is 0 either way), so the same bits; but the backward keeps Y,
  // which the next layer's gradient keeps anyway, and X dies at the Relu,
  // which the buffer plan then writes over it (a ResNet's BatchNorm
  // outputs, a transformer's FFN pre-activations: one activation fewer per
  // Relu held until the backward). PyTorch's backward reads the result too.
  ctx.setGrad(0, ctx.create<ReluGradOp>({op.getY(), ctx.resultGrad(0)}));
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

LogicalResult vjp(SinOp op, VjpContext &ctx) {
  // dY cos(X).
  ctx.setGrad(0, ctx.mul(ctx.resultGrad(0), ctx.create<CosOp>({op.getInput()})));
  return success();
}

LogicalResult vjp(CosOp op, VjpContext &ctx) {
  // -dY sin(X).
  ctx.setGrad(0, ctx.create<NegOp>(
                     {ctx.mul(ctx.resultGrad(0), ctx.create<SinOp>({op.getInput()}))}));
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

/// dX = onnx.UnaryGrad(X, dY) of the activation `name`.
static Value unaryGrad(VjpContext &ctx, Value x, StringRef name,
                       double alpha = 0.0, double beta = 0.0) {
  return ctx.create<UnaryGradOp>(
      {x, ctx.resultGrad(0)},
      {ctx.strAttr("activation", name), ctx.f32Attr("alpha", alpha),
       ctx.f32Attr("beta", beta)});
}

LogicalResult vjp(AbsOp op, VjpContext &ctx) {
  ctx.setGrad(0, unaryGrad(ctx, op.getX(), "Abs"));
  return success();
}
LogicalResult vjp(ReciprocalOp op, VjpContext &ctx) {
  ctx.setGrad(0, unaryGrad(ctx, op.getX(), "Reciprocal"));
  return success();
}
LogicalResult vjp(SoftplusOp op, VjpContext &ctx) {
  ctx.setGrad(0, unaryGrad(ctx, op.getX(), "Softplus"));
  return success();
}
LogicalResult vjp(HardSwishOp op, VjpContext &ctx) {
  ctx.setGrad(0, unaryGrad(ctx, op.getX(), "HardSwish"));
  return success();
}
LogicalResult vjp(LeakyReluOp op, VjpContext &ctx) {
  ctx.setGrad(0, unaryGrad(ctx, op.getX(), "LeakyRelu",
                           op.getAlpha().convertToFloat()));
  return success();
}
LogicalResult vjp(EluOp op, VjpContext &ctx) {
  ctx.setGrad(0, unaryGrad(ctx, op.getX(), "Elu",
                           op.getAlpha().convertToFloat()));
  return success();
}
LogicalResult vjp(SeluOp op, VjpContext &ctx) {
  ctx.setGrad(0, unaryGrad(ctx, op.getX(), "Selu",
                           op.getAlpha().convertToFloat(),
                           op.getGamma().convertToFloat()));
  return success();
}
LogicalResult vjp(HardSigmoidOp op, VjpContext &ctx) {
  ctx.setGrad(0, unaryGrad(ctx, op.getX(), "HardSigmoid",
                           op.getAlpha().convertToFloat(),
                           op.getBeta().convertToFloat()));
  return success();
}
LogicalResult vjp(GeluOp op, VjpContext &ctx) {
  ctx.setGrad(0, unaryGrad(ctx, op.getX(),
                           op.getApproximate() == "tanh" ? "GeluTanh" : "Gelu"));
  return success();
}

// Piecewise constant: zero almost everywhere (PyTorch's gradient).
LogicalResult vjp(SignOp op, VjpContext &ctx) {
  ctx.setGrad(0, ctx.splat(op.getX().getType(), 0.0));
  return success();
}
LogicalResult vjp(FloorOp op, VjpContext &ctx) {
  ctx.setGrad(0, ctx.splat(op.getX().getType(), 0.0));
  return success();
}
LogicalResult vjp(CeilOp op, VjpContext &ctx) {
  ctx.setGrad(0, ctx.splat(op.getX().getType(), 0.0));
  return success();
}

LogicalResult vjp(ClipOp op, VjpContext &ctx) {
  if (ctx.needsGrad(1) || ctx.needsGrad(2))
    return op->emitOpError() << "has a bound that depends on a trained value; "
                                "the gradient with respect to Clip's min and "
                                "max is not supported (make them constants)";
  // dY where min <= X <= max (torch.clamp), else 0.
  Value x = op.getInput(), dy = ctx.resultGrad(0);
  Value inside;
  if (!isNone(op.getMin()))
    inside = ctx.create<GreaterOrEqualOp>({x, op.getMin()});
  if (!isNone(op.getMax())) {
    Value le = ctx.create<LessOrEqualOp>({x, op.getMax()});
    inside = inside ? ctx.create<AndOp>({inside, le}) : le;
  }
  if (!inside) {
    ctx.setGrad(0, dy);
    return success();
  }
  Value zero = ctx.scalar(getElementType(dy), 0.0);
  ctx.setGrad(0, ctx.create<WhereOp>({inside, dy, zero}));
  return success();
}

/// Max (Min when `isMin`) of A and B: dY goes to the larger (smaller)
/// operand, half to each on a tie, as torch.maximum/minimum do.
template <typename OpTy, typename StrictOpTy>
static LogicalResult extremumVjp(OpTy op, VjpContext &ctx) {
  Value a = op.getA(), b = op.getB(), dy = ctx.resultGrad(0);
  Type elt = getElementType(dy);
  Value zero = ctx.scalar(elt, 0.0);
  Value half = ctx.mul(dy, ctx.scalar(elt, 0.5));
  Value tie = ctx.create<WhereOp>({ctx.create<EqualOp>({a, b}), half, zero});
  Value toA = ctx.create<WhereOp>({ctx.create<StrictOpTy>({a, b}), dy, tie});
  if (ctx.needsGrad(0))
    ctx.setGrad(0, ctx.reduceToShape(toA, a.getType()));
  if (ctx.needsGrad(1))
    ctx.setGrad(1, ctx.reduceToShape(ctx.sub(dy, toA), b.getType()));
  return success();
}
LogicalResult vjp(MaxOp op, VjpContext &ctx) {
  return extremumVjp<MaxOp, GreaterOp>(op, ctx);
}
LogicalResult vjp(MinOp op, VjpContext &ctx) {
  return extremumVjp<MinOp, LessOp>(op, ctx);
}

LogicalResult vjp(ModOp op, VjpContext &ctx) {
  // C = A - trunc(A / B) B (fmod, the only float form): dA = dY,
  // dB = -dY trunc(A / B) = -dY (A - C) / B, as torch.fmod.
  Value dy = ctx.resultGrad(0);
  if (ctx.needsGrad(0))
    ctx.setGrad(0, ctx.reduceToShape(dy, op.getA().getType()));
  if (ctx.needsGrad(1)) {
    Value q = ctx.div(ctx.sub(op.getA(), op.getC()), op.getB());
    ctx.setGrad(1, ctx.neg(ctx.reduceToShape(ctx.mul(dy, q),
                                             op.getB().getType())));
  }
  return success();
}

} // namespace mlir::pipec::autodiff
