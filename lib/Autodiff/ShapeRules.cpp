//===- ShapeRules.cpp - VJPs of data-movement ops and reductions -----------===//
#include "Rules.h"

#include "dialects/onnx/ShapeHelpers.h"

using namespace mlir;
using namespace mlir::pipec;
using namespace mlir::pipec::autodiff;
using namespace mlir::pipec::onnx;

namespace mlir::pipec::autodiff {

/// Ops that only reinterpret the shape: the gradient is reshaped back.
static LogicalResult reshapeBack(Operation *op, VjpContext &ctx) {
  auto t = getRanked(op->getOperand(0));
  if (!t || !t.hasStaticShape())
    return op->emitOpError() << "needs a static input shape to be "
                                "differentiated";
  ctx.setGrad(0, ctx.reshape(ctx.resultGrad(0), t));
  return success();
}

LogicalResult vjp(ReshapeOp op, VjpContext &ctx) { return reshapeBack(op, ctx); }
LogicalResult vjp(FlattenOp op, VjpContext &ctx) { return reshapeBack(op, ctx); }
LogicalResult vjp(UnsqueezeOp op, VjpContext &ctx) {
  return reshapeBack(op, ctx);
}
LogicalResult vjp(SqueezeOp op, VjpContext &ctx) { return reshapeBack(op, ctx); }

LogicalResult vjp(ExpandOp op, VjpContext &ctx) {
  ctx.setGrad(0, ctx.reduceToShape(ctx.resultGrad(0), op.getInput().getType()));
  return success();
}

LogicalResult vjp(TransposeOp op, VjpContext &ctx) {
  int64_t rank = llvm::cast<RankedTensorType>(op.getData().getType()).getRank();
  SmallVector<int64_t> perm;
  if (auto p = op.getPerm())
    perm.assign(p->begin(), p->end());
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  SmallVector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i)
    inverse[perm[i]] = i;
  ctx.setGrad(0, ctx.create<TransposeOp>({ctx.resultGrad(0)},
                                         {ctx.i64ArrayAttr("perm", inverse)}));
  return success();
}

LogicalResult vjp(ConcatOp op, VjpContext &ctx) {
  Value g = ctx.resultGrad(0);
  int64_t rank = llvm::cast<RankedTensorType>(g.getType()).getRank();
  auto axis = normalizeAxis(op, op.getAxis(), rank);
  if (failed(axis))
    return failure();
  SmallVector<int64_t> sizes;
  for (Value v : op.getInputs()) {
    auto t = getRanked(v);
    if (!t || t.isDynamicDim(*axis))
      return op->emitOpError() << "needs static sizes along the axis to be "
                                  "differentiated";
    sizes.push_back(t.getDimSize(*axis));
  }
  Operation *split = ctx.build<SplitOp>({g, ctx.i64s(sizes)},
                                        {ctx.i64Attr("axis", *axis)},
                                        sizes.size());
  for (unsigned i = 0; i < sizes.size(); ++i)
    if (ctx.needsGrad(i))
      ctx.setGrad(i, split->getResult(i));
  return success();
}

LogicalResult vjp(SplitOp op, VjpContext &ctx) {
  SmallVector<Value> parts;
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    parts.push_back(ctx.resultGradOrZeros(i));
  ctx.setGrad(0, ctx.create<ConcatOp>(parts, {ctx.i64Attr("axis", op.getAxis())}));
  return success();
}

LogicalResult vjp(SliceOp op, VjpContext &ctx) {
  auto t = getRanked(op.getData());
  if (!t || !t.hasStaticShape())
    return op->emitOpError() << "needs a static input shape to be "
                                "differentiated";
  ctx.setGrad(0, ctx.create<SliceGradOp>({ctx.resultGrad(0), ctx.shapeOf(t),
                                          op.getStarts(), op.getEnds(),
                                          op.getAxes(), op.getSteps()}));
  return success();
}

LogicalResult vjp(GatherOp op, VjpContext &ctx) {
  auto t = getRanked(op.getData());
  if (!t || !t.hasStaticShape())
    return op->emitOpError() << "needs a static input shape to be "
                                "differentiated";
  ctx.setGrad(0, ctx.create<GatherGradOp>(
                     {ctx.resultGrad(0), ctx.shapeOf(t), op.getIndices()},
                     {ctx.i64Attr("axis", op.getAxis())}));
  return success();
}

LogicalResult vjp(GatherElementsOp op, VjpContext &ctx) {
  auto t = getRanked(op.getData());
  if (!t || !t.hasStaticShape())
    return op->emitOpError() << "needs a static input shape to be "
                                "differentiated";
  ctx.setGrad(0, ctx.create<GatherElementsGradOp>(
                     {ctx.resultGrad(0), ctx.shapeOf(t), op.getIndices()},
                     {ctx.i64Attr("axis", op.getAxis())}));
  return success();
}

/// ScatterND and ScatterElements: reduction none gives the replaced
/// entries' gradient to updates (a gather of dY at the indices) and the
/// rest to data (GradOp zeroes them); add gives data dY.
template <typename GradOp, typename GatherOpTy, typename OpTy>
static LogicalResult scatterVjp(OpTy op, VjpContext &ctx,
                                ArrayRef<NamedAttribute> gradAttrs,
                                ArrayRef<NamedAttribute> gatherAttrs) {
  StringRef red = op.getReduction();
  if (red != "none" && red != "add")
    return op->emitOpError() << "with reduction '" << red
                             << "' is not differentiated (only none and add "
                                "are; keep its data and updates constant)";
  Value g = ctx.resultGrad(0);
  if (ctx.needsGrad(0))
    ctx.setGrad(0, red == "add" ? g
                                : ctx.create<GradOp>({g, op.getIndices()}, gradAttrs));
  if (ctx.needsGrad(2))
    ctx.setGrad(2, ctx.create<GatherOpTy>({g, op.getIndices()}, gatherAttrs));
  return success();
}

LogicalResult vjp(ScatterElementsOp op, VjpContext &ctx) {
  NamedAttribute axis = ctx.i64Attr("axis", op.getAxis());
  return scatterVjp<ScatterElementsGradOp, GatherElementsOp>(op, ctx, {axis},
                                                             {axis});
}

LogicalResult vjp(GatherNDOp op, VjpContext &ctx) {
  auto t = getRanked(op.getData());
  if (!t || !t.hasStaticShape())
    return op->emitOpError() << "needs a static input shape to be "
                                "differentiated";
  ctx.setGrad(0, ctx.create<GatherNDGradOp>(
                     {ctx.resultGrad(0), ctx.shapeOf(t), op.getIndices()},
                     {ctx.i64Attr("batch_dims", op.getBatchDims())}));
  return success();
}

LogicalResult vjp(ScatterNDOp op, VjpContext &ctx) {
  return scatterVjp<ScatterNDGradOp, GatherNDOp>(
      op, ctx, {}, {ctx.i64Attr("batch_dims", 0)});
}

/// The gradient of ReduceSum (scale 1) or ReduceMean (scale 1/count): dY
/// with the reduced axes restored as 1, broadcast back to the input.
static LogicalResult reduceVjp(Operation *op, Value data, Value axesOperand,
                               bool noopWithEmptyAxes,
                               bool mean, VjpContext &ctx) {
  auto t = getRanked(data);
  if (!t || !t.hasStaticShape())
    return op->emitOpError() << "needs a static input shape to be "
                                "differentiated";
  int64_t rank = t.getRank();
  SmallVector<int64_t> axes;
  if (!isNone(axesOperand)) {
    auto values = getConstantInts(axesOperand);
    if (!values)
      return op->emitOpError() << "needs constant axes to be differentiated";
    for (int64_t a : *values) {
      auto n = normalizeAxis(op, a, rank);
      if (failed(n))
        return failure();
      axes.push_back(*n);
    }
  }
  Value g = ctx.resultGrad(0);
  if (axes.empty()) {
    if (noopWithEmptyAxes) {
      ctx.setGrad(0, g);
      return success();
    }
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }
  SmallVector<int64_t> kept(t.getShape());
  int64_t count = 1;
  for (int64_t a : axes) {
    count *= kept[a];
    kept[a] = 1;
  }
  Value dx = ctx.reshape(g, RankedTensorType::get(kept, t.getElementType()));
  if (mean)
    dx = ctx.mul(dx, ctx.scalar(t.getElementType(), 1.0 / count));
  if (dx.getType() != t)
    dx = ctx.create<ExpandOp>({dx, ctx.shapeOf(t)});
  ctx.setGrad(0, dx);
  return success();
}

LogicalResult vjp(ReduceSumOp op, VjpContext &ctx) {
  return reduceVjp(op, op.getData(), op.getAxes(), op.getNoopWithEmptyAxes(),
                   /*mean=*/false, ctx);
}

LogicalResult vjp(ReduceMeanOp op, VjpContext &ctx) {
  return reduceVjp(op, op.getData(), op.getAxes(), op.getNoopWithEmptyAxes(),
                   /*mean=*/true, ctx);
}

/// ReduceMax/ReduceMin: dY to the first extremal element of each group.
template <typename OpTy>
static LogicalResult extremumReduceVjp(OpTy op, bool isMin, VjpContext &ctx) {
  if (!isNone(op.getAxes()) && !getConstantInts(op.getAxes()))
    return op->emitOpError() << "needs constant axes to be differentiated";
  Value dy = ctx.resultGrad(0);
  ctx.setGrad(0, ctx.create<ReduceExtremumGradOp>(
                     {op.getData(), dy, op.getAxes()},
                     {ctx.i64Attr("noop_with_empty_axes",
                                  op.getNoopWithEmptyAxes()),
                      ctx.i64Attr("select_min", isMin)}));
  return success();
}
LogicalResult vjp(ReduceMaxOp op, VjpContext &ctx) {
  return extremumReduceVjp(op, /*isMin=*/false, ctx);
}
LogicalResult vjp(ReduceMinOp op, VjpContext &ctx) {
  return extremumReduceVjp(op, /*isMin=*/true, ctx);
}

LogicalResult vjp(CumSumOp op, VjpContext &ctx) {
  // The adjoint of a (reverse) cumulative sum is the cumulative sum the
  // other way, exclusive as the forward.
  ctx.setGrad(0, ctx.create<CumSumOp>(
                     {ctx.resultGrad(0), op.getAxis()},
                     {ctx.i64Attr("exclusive", op.getExclusive()),
                      ctx.i64Attr("reverse", op.getReverse() ? 0 : 1)}));
  return success();
}

LogicalResult vjp(TileOp op, VjpContext &ctx) {
  auto t = getRanked(op.getInput());
  if (!t || !t.hasStaticShape() || !getConstantInts(op.getRepeats()))
    return op->emitOpError() << "needs a static input shape and constant "
                                "repeats to be differentiated";
  ctx.setGrad(0, ctx.create<TileGradOp>(
                     {ctx.resultGrad(0), ctx.shapeOf(t), op.getRepeats()}));
  return success();
}

LogicalResult vjp(PadOp op, VjpContext &ctx) {
  if (ctx.needsGrad(2))
    return op->emitOpError() << "has a constant_value that depends on a "
                                "trained value; its gradient is not "
                                "supported (make it a constant)";
  auto t = getRanked(op.getData());
  if (!t || !t.hasStaticShape())
    return op->emitOpError() << "needs a static input shape to be "
                                "differentiated";
  auto pads = fullPads(op, t.getRank());
  if (!pads)
    return op->emitOpError() << "needs constant pads and axes to be "
                                "differentiated";
  ctx.setGrad(0, ctx.create<PadGradOp>(
                     {ctx.resultGrad(0), ctx.shapeOf(t), ctx.i64s(*pads)},
                     {ctx.strAttr("mode", op.getMode())}));
  return success();
}

LogicalResult vjp(ResizeOp op, VjpContext &ctx) {
  auto t = getRanked(op.getX());
  auto geometry = resizeGeometry(op);
  if (failed(geometry))
    return failure();
  if (!t || !t.hasStaticShape() || !geometry->known)
    return op->emitOpError() << "needs a static input and constant scales or "
                                "sizes (and roi) to be differentiated";
  SmallVector<NamedAttribute> attrs = {
      ctx.strAttr("coordinate_transformation_mode",
                  op.getCoordinateTransformationMode()),
      ctx.f32Attr("cubic_coeff_a", op.getCubicCoeffA().convertToFloat()),
      ctx.i64Attr("exclude_outside", op.getExcludeOutside()),
      ctx.strAttr("mode", op.getMode()),
      ctx.strAttr("nearest_mode", op.getNearestMode())};
  OpBuilder &b = ctx.builder();
  if (geometry->scales)
    attrs.push_back(ctx.attr("scales", b.getDenseF32ArrayAttr(*geometry->scales)));
  if (!geometry->roi.empty())
    attrs.push_back(ctx.attr("roi", b.getDenseF32ArrayAttr(geometry->roi)));
  ctx.setGrad(0, ctx.create<ResizeGradOp>({ctx.resultGrad(0), ctx.shapeOf(t)},
                                          attrs));
  return success();
}

LogicalResult vjp(TriluOp op, VjpContext &ctx) {
  // A mask: the gradient is the same triangle of dY.
  ctx.setGrad(0, ctx.create<TriluOp>({ctx.resultGrad(0), op.getK()},
                                     {ctx.i64Attr("upper", op.getUpper())}));
  return success();
}

} // namespace mlir::pipec::autodiff
