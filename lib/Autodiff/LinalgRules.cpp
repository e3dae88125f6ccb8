//===- LinalgRules.cpp - VJPs of Gemm and MatMul ---------------------------===//
#include "Rules.h"

#include "dialects/onnx/ShapeHelpers.h"

using namespace mlir;
using namespace mlir::pipec;
using namespace mlir::pipec::autodiff;
using namespace mlir::pipec::onnx;

namespace mlir::pipec::autodiff {

LogicalResult vjp(GemmOp op, VjpContext &ctx) {
  // Y = alpha op(A) op(B) + beta C. With G = dY:
  //   d op(A) = alpha G op(B)^T,  d op(B) = alpha op(A)^T G.
  Value g = ctx.resultGrad(0);
  double alpha = op.getAlpha().convertToDouble();
  double beta = op.getBeta().convertToDouble();
  int64_t ta = op.getTransA(), tb = op.getTransB();
  auto gemm = [&](Value x, Value y, int64_t tx, int64_t ty) {
    SmallVector<NamedAttribute> attrs{ctx.i64Attr("transA", tx),
                                      ctx.i64Attr("transB", ty)};
    if (alpha != 1.0)
      attrs.push_back(ctx.f32Attr("alpha", alpha));
    return ctx.create<GemmOp>({x, y, ctx.none()}, attrs);
  };
  if (ctx.needsGrad(0))
    ctx.setGrad(0, ta ? gemm(op.getB(), g, tb, 1) : gemm(g, op.getB(), 0, 1 - tb));
  if (ctx.needsGrad(1))
    ctx.setGrad(1, tb ? gemm(g, op.getA(), 1, ta) : gemm(op.getA(), g, 1 - ta, 0));
  if (ctx.needsGrad(2)) {
    Value dc = ctx.reduceToShape(g, op.getC().getType());
    if (beta != 1.0)
      dc = ctx.mul(dc, ctx.scalar(getElementType(g), beta));
    ctx.setGrad(2, dc);
  }
  return success();
}

/// `x` with its last two axes swapped (rank >= 2).
static Value swapLastTwo(VjpContext &ctx, Value x) {
  int64_t rank = llvm::cast<RankedTensorType>(x.getType()).getRank();
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 1], perm[rank - 2]);
  return ctx.create<TransposeOp>({x}, {ctx.i64ArrayAttr("perm", perm)});
}

LogicalResult vjp(MatMulOp op, VjpContext &ctx) {
  // numpy matmul: a 1-D A is (1, k) and a 1-D B is (k, 1), with the added
  // axis removed from Y. Work on the 2-D-or-more forms, then reshape back.
  Value a = op.getA(), b = op.getB(), g = ctx.resultGrad(0);
  auto ta = getRanked(a), tb = getRanked(b), tg = getRanked(g);
  if (!ta || !tb || !tg || !ta.hasStaticShape() || !tb.hasStaticShape())
    return op->emitOpError() << "needs static shapes to be differentiated";
  Type elt = ta.getElementType();
  SmallVector<int64_t> aShape(ta.getShape()), bShape(tb.getShape()),
      gShape(tg.getShape());
  if (ta.getRank() == 1) {
    aShape.insert(aShape.begin(), 1);
    gShape.insert(gShape.end() - (tb.getRank() == 1 ? 0 : 1), 1);
  }
  if (tb.getRank() == 1) {
    bShape.push_back(1);
    gShape.push_back(1);
  }
  Value a2 = ctx.reshape(a, RankedTensorType::get(aShape, elt));
  Value b2 = ctx.reshape(b, RankedTensorType::get(bShape, elt));
  Value g2 = ctx.reshape(g, RankedTensorType::get(gShape, elt));
  if (ctx.needsGrad(0)) {
    Value da = ctx.create<MatMulOp>({g2, swapLastTwo(ctx, b2)});
    da = ctx.reduceToShape(da, a2.getType());
    ctx.setGrad(0, ctx.reshape(da, a.getType()));
  }
  if (ctx.needsGrad(1)) {
    Value db = ctx.create<MatMulOp>({swapLastTwo(ctx, a2), g2});
    db = ctx.reduceToShape(db, b2.getType());
    ctx.setGrad(1, ctx.reshape(db, b.getType()));
  }
  return success();
}

} // namespace mlir::pipec::autodiff
