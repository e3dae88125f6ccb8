//===- NNRules.cpp - VJPs of the neural-network ops and losses -------------===//
#include "Rules.h"

#include "dialects/onnx/ShapeHelpers.h"

using namespace mlir;
using namespace mlir::pipec;
using namespace mlir::pipec::autodiff;
using namespace mlir::pipec::onnx;

namespace mlir::pipec::autodiff {

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

LogicalResult vjp(SoftmaxOp op, VjpContext &ctx) {
  ctx.setGrad(0, ctx.create<SoftmaxGradOp>(
                     {op.getOutput(), ctx.resultGrad(0)},
                     {ctx.i64Attr("axis", op.getAxis())}));
  return success();
}

LogicalResult vjp(LogSoftmaxOp op, VjpContext &ctx) {
  ctx.setGrad(0, ctx.create<LogSoftmaxGradOp>(
                     {op.getOutput(), ctx.resultGrad(0)},
                     {ctx.i64Attr("axis", op.getAxis())}));
  return success();
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

Operation *prepare(LayerNormalizationOp op, OpBuilder &b) {
  if (op.getStats().size() == 2)
    return op;
  return cloneWithResults(op, b, 3);
}

LogicalResult vjp(LayerNormalizationOp op, VjpContext &ctx) {
  if (ctx.resultGrad(1) || ctx.resultGrad(2))
    return op->emitOpError()
           << "cannot differentiate through its Mean/InvStdDev outputs";
  Operation *grad = ctx.build<LayerNormalizationGradOp>(
      {op.getX(), op.getScale(), op.getStats()[0], op.getStats()[1],
       ctx.resultGrad(0)},
      {ctx.i64Attr("axis", op.getAxis())}, 3);
  if (ctx.needsGrad(0))
    ctx.setGrad(0, grad->getResult(0));
  if (ctx.needsGrad(1))
    ctx.setGrad(1, ctx.reduceToShape(grad->getResult(1),
                                     op.getScale().getType()));
  if (ctx.needsGrad(2))
    ctx.setGrad(2, ctx.reduceToShape(grad->getResult(2), op.getB().getType()));
  return success();
}

LogicalResult vjp(BatchNormalizationOp op, VjpContext &ctx) {
  bool statsUsed = false;
  for (unsigned i = 1; i < op->getNumResults(); ++i)
    statsUsed |= static_cast<bool>(ctx.resultGrad(i));
  if (statsUsed || ctx.needsGrad(3) || ctx.needsGrad(4))
    return op->emitOpError() << "cannot differentiate the running statistics";
  auto x = getRanked(op.getX());
  if (!x || !x.hasStaticShape() || x.getRank() < 2)
    return op->emitOpError() << "needs a static (N, C, ...) input to be "
                                "differentiated";
  Type elt = x.getElementType();
  int64_t channels = x.getDimSize(1);
  // Per-channel vectors broadcast as (1, C, 1...).
  SmallVector<int64_t> bcast(x.getRank(), 1);
  bcast[1] = channels;
  auto bcastType = RankedTensorType::get(bcast, elt);
  SmallVector<int64_t> axes{0};
  for (int64_t i = 2; i < x.getRank(); ++i)
    axes.push_back(i);
  Value eps = ctx.scalar(elt, op.getEpsilon().convertToDouble());
  Value one = ctx.scalar(elt, 1.0);
  Value dy = ctx.resultGrad(0);

  if (op.getTrainingMode() != 0) {
    // The gradient op recomputes the batch statistics from X.
    Operation *grad = ctx.build<BatchNormalizationGradOp>(
        {op.getX(), op.getScale(), dy},
        {ctx.f32Attr("epsilon", op.getEpsilon().convertToDouble())}, 3);
    for (unsigned i = 0; i < 3; ++i)
      if (ctx.needsGrad(i))
        ctx.setGrad(i, grad->getResult(i));
    return success();
  }

  // Inference mode: Y = (X - mean) * inv_std * scale + B, all constants but
  // X, scale and B.
  Value invStd = ctx.div(
      one, ctx.create<SqrtOp>({ctx.add(op.getInputVar(), eps)}));
  if (ctx.needsGrad(0))
    ctx.setGrad(0, ctx.mul(dy, ctx.reshape(ctx.mul(op.getScale(), invStd),
                                           bcastType)));
  auto sumOverAxes = [&](Value v) {
    return ctx.create<ReduceSumOp>({v, ctx.i64s(axes)},
                                   {ctx.i64Attr("keepdims", 0)});
  };
  if (ctx.needsGrad(1)) {
    Value xhat = ctx.mul(
        ctx.sub(op.getX(), ctx.reshape(op.getInputMean(), bcastType)),
        ctx.reshape(invStd, bcastType));
    ctx.setGrad(1, sumOverAxes(ctx.mul(dy, xhat)));
  }
  if (ctx.needsGrad(2))
    ctx.setGrad(2, sumOverAxes(dy));
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

FailureOr<Window> resolveWindow(Operation *op, Type xType,
                                ArrayRef<int64_t> kernel) {
  auto x = llvm::dyn_cast<RankedTensorType>(xType);
  size_t n = kernel.size();
  if (!x || !x.hasStaticShape() || x.getRank() != static_cast<int64_t>(n) + 2)
    return op->emitOpError() << "needs a static input to be differentiated";
  Window w;
  w.kernel.assign(kernel.begin(), kernel.end());
  auto array = [&](StringRef name, int64_t fill, size_t count) {
    if (auto a = op->getAttrOfType<DenseI64ArrayAttr>(name))
      return SmallVector<int64_t>(a.asArrayRef());
    return SmallVector<int64_t>(count, fill);
  };
  w.strides = array("strides", 1, n);
  w.dilations = array("dilations", 1, n);
  w.pads = array("pads", 0, 2 * n);
  StringRef autoPad = "NOTSET";
  if (auto a = op->getAttrOfType<StringAttr>("auto_pad"))
    autoPad = a.getValue();
  if (autoPad == "VALID") {
    w.pads.assign(2 * n, 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      int64_t in = x.getDimSize(i + 2), s = w.strides[i];
      int64_t out = (in + s - 1) / s;
      int64_t extent = (kernel[i] - 1) * w.dilations[i] + 1;
      int64_t total = std::max<int64_t>(0, (out - 1) * s + extent - in);
      int64_t small = total / 2, large = total - small;
      w.pads[i] = autoPad == "SAME_UPPER" ? small : large;
      w.pads[i + n] = autoPad == "SAME_UPPER" ? large : small;
    }
  }
  return w;
}

LogicalResult vjp(ConvOp op, VjpContext &ctx) {
  auto wType = getRanked(op.getW());
  if (!wType || !wType.hasStaticShape())
    return op->emitOpError() << "needs a static weight to be differentiated";
  auto window = resolveWindow(op, op.getX().getType(),
                              wType.getShape().drop_front(2));
  if (failed(window))
    return failure();
  Operation *grad = ctx.build<ConvGradOp>(
      {ctx.resultGrad(0), op.getX(), op.getW()},
      {ctx.i64ArrayAttr("dilations", window->dilations),
       ctx.i64Attr("group", op.getGroup()),
       ctx.i64ArrayAttr("kernel_shape", window->kernel),
       ctx.i64ArrayAttr("pads", window->pads),
       ctx.i64ArrayAttr("strides", window->strides)},
      3);
  for (unsigned i = 0; i < 3; ++i)
    if (ctx.needsGrad(i))
      ctx.setGrad(i, grad->getResult(i));
  return success();
}

LogicalResult vjp(ConvTransposeOp op, VjpContext &ctx) {
  // Y is the input gradient of Conv(Y-shaped input, W) at dy = X, so
  // dX = Conv(dY, W) and dW is that Conv's weight gradient with the roles of
  // its input (dY) and output gradient (X) taken by the two.
  auto x = getRanked(op.getX()), w = getRanked(op.getW());
  if (!x || !w || !x.hasStaticShape() || !w.hasStaticShape())
    return op->emitOpError() << "needs a static input and weight to be "
                                "differentiated";
  auto window = convTransposeWindow(op, x, w);
  if (failed(window))
    return failure();
  Value dy = ctx.resultGrad(0);
  SmallVector<NamedAttribute> attrs = {
      ctx.i64ArrayAttr("dilations", window->dilations),
      ctx.i64Attr("group", op.getGroup()),
      ctx.i64ArrayAttr("kernel_shape", window->kernel),
      ctx.i64ArrayAttr("pads", window->pads),
      ctx.i64ArrayAttr("strides", window->strides)};
  if (ctx.needsGrad(0))
    ctx.setGrad(0, ctx.create<ConvOp>({dy, op.getW(), ctx.none()}, attrs));
  if (ctx.needsGrad(1)) {
    Operation *grad = ctx.build<ConvGradOp>({op.getX(), dy, op.getW()}, attrs, 3);
    ctx.setGrad(1, grad->getResult(1));
  }
  if (ctx.needsGrad(2)) {
    SmallVector<int64_t> axes = {0};
    for (int64_t i = 2; i < x.getRank(); ++i)
      axes.push_back(i);
    ctx.setGrad(2, ctx.create<ReduceSumOp>({dy, ctx.i64s(axes)},
                                           {ctx.i64Attr("keepdims", 0)}));
  }
  return success();
}

LogicalResult vjp(MaxPoolOp op, VjpContext &ctx) {
  auto window = resolveWindow(op, op.getX().getType(), op.getKernelShape());
  if (failed(window))
    return failure();
  ctx.setGrad(0, ctx.create<MaxPoolGradOp>(
                     {op.getX(), ctx.resultGrad(0)},
                     {ctx.i64Attr("ceil_mode", op.getCeilMode()),
                      ctx.i64ArrayAttr("dilations", window->dilations),
                      ctx.i64ArrayAttr("kernel_shape", window->kernel),
                      ctx.i64ArrayAttr("pads", window->pads),
                      ctx.i64ArrayAttr("strides", window->strides)}));
  return success();
}

LogicalResult vjp(AveragePoolOp op, VjpContext &ctx) {
  auto window = resolveWindow(op, op.getX().getType(), op.getKernelShape());
  if (failed(window))
    return failure();
  if (llvm::any_of(window->dilations, [](int64_t d) { return d != 1; }))
    return op->emitOpError() << "with dilations has no gradient kernel";
  ctx.setGrad(0, ctx.create<AveragePoolGradOp>(
                     {ctx.resultGrad(0), ctx.shapeOf(op.getX().getType())},
                     {ctx.i64Attr("ceil_mode", op.getCeilMode()),
                      ctx.i64Attr("count_include_pad", op.getCountIncludePad()),
                      ctx.i64ArrayAttr("kernel_shape", window->kernel),
                      ctx.i64ArrayAttr("pads", window->pads),
                      ctx.i64ArrayAttr("strides", window->strides)}));
  return success();
}

LogicalResult vjp(GlobalAveragePoolOp op, VjpContext &ctx) {
  ctx.setGrad(0, ctx.create<GlobalAveragePoolGradOp>(
                     {ctx.resultGrad(0), ctx.shapeOf(op.getX().getType())}));
  return success();
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

Operation *prepare(DropoutOp op, OpBuilder &b) {
  if (op.getMask() || isNone(op.getTrainingMode()))
    return op;
  return cloneWithResults(op, b, 2);
}

LogicalResult vjp(DropoutOp op, VjpContext &ctx) {
  if (isNone(op.getTrainingMode())) {
    ctx.setGrad(0, ctx.resultGrad(0));
    return success();
  }
  ctx.setGrad(0, ctx.create<DropoutGradOp>({ctx.resultGrad(0), op.getMask(),
                                            op.getRatio(),
                                            op.getTrainingMode()}));
  return success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

/// The forward's loss attributes, for its gradient op.
static SmallVector<NamedAttribute> lossAttrs(Operation *op) {
  SmallVector<NamedAttribute> attrs;
  for (StringRef name : {"ignore_index", "reduction"})
    if (Attribute a = op->getAttr(name))
      attrs.push_back(NamedAttribute(StringAttr::get(op->getContext(), name), a));
  return attrs;
}

Operation *prepare(SoftmaxCrossEntropyLossOp op, OpBuilder &b) {
  if (op.getLogProb())
    return op;
  return cloneWithResults(op, b, 2);
}

/// Class weights are constants in every model we know; their gradient has
/// no kernel.
static LogicalResult checkNoWeightGrad(Operation *op, VjpContext &ctx) {
  if (ctx.needsGrad(2))
    return op->emitOpError()
           << "cannot differentiate with respect to the class weights";
  return success();
}

LogicalResult vjp(SoftmaxCrossEntropyLossOp op, VjpContext &ctx) {
  if (failed(checkNoWeightGrad(op, ctx)))
    return failure();
  Value dscores;
  if (Value dloss = ctx.resultGrad(0))
    dscores = ctx.create<SoftmaxCrossEntropyLossGradOp>(
        {dloss, op.getLogProb(), op.getLabels(), op.getWeights()},
        lossAttrs(op));
  if (Value dlogProb = ctx.resultGrad(1)) {
    Value g = ctx.create<LogSoftmaxGradOp>({op.getLogProb(), dlogProb},
                                           {ctx.i64Attr("axis", 1)});
    dscores = dscores ? ctx.add(dscores, g) : g;
  }
  ctx.setGrad(0, dscores);
  return success();
}

LogicalResult vjp(NegativeLogLikelihoodLossOp op, VjpContext &ctx) {
  if (failed(checkNoWeightGrad(op, ctx)))
    return failure();
  ctx.setGrad(0, ctx.create<NegativeLogLikelihoodLossGradOp>(
                     {ctx.resultGrad(0), ctx.shapeOf(op.getInput().getType()),
                      op.getTarget(), op.getWeight()},
                     lossAttrs(op)));
  return success();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// The training form also returns the softmax probabilities, which
/// AttentionGrad reads (the forward does not run again).
Operation *prepare(AttentionOp op, OpBuilder &b) {
  if (op->getNumResults() > 1)
    return op;
  return cloneWithResults(op, b, 2);
}

/// One AttentionGrad from Q, K, V, the saved probabilities and dY: dQ, dK,
/// dV (or the fused projection's gradient alone). The mask gets none.
LogicalResult vjp(AttentionOp op, VjpContext &ctx) {
  if (ctx.resultGrad(1))
    return op->emitOpError()
           << "cannot differentiate through its saved probabilities";
  if (op->getNumResults() < 2)
    return op->emitOpError() << "has no saved probabilities to differentiate "
                                "from (autodiff's prepare adds them)";
  // A float attn_mask (added to the scores) from the data or constants
  // needs no gradient; one computed from trained parameters (a learned
  // position bias) would, and AttentionGrad has none for it.
  if (op->getNumOperands() > 3 && !isNone(op.getAttnMask()) && ctx.needsGrad(3))
    return op->emitOpError()
           << "has a float attn_mask computed from trained parameters, whose "
              "gradient is not supported; compile with --no-fuse-attention";
  SmallVector<NamedAttribute> attrs;
  if (auto h = op->getAttr("q_num_heads"))
    attrs.push_back(ctx.attr("q_num_heads", h));
  if (auto sc = op->getAttr("scale"))
    attrs.push_back(ctx.attr("scale", sc));
  if (op.getIsCausal())
    attrs.push_back(ctx.i64Attr("is_causal", 1));
  if (op.getSeqFirst())
    attrs.push_back(ctx.i64Attr("seq_first", 1));
  // Dropped probabilities: the saved P marks the dropped elements.
  if (auto drop = op->getAttr("dropout"))
    attrs.push_back(ctx.attr("dropout", drop));
  bool packed = isNone(op.getK());
  Operation *grad = ctx.build<AttentionGradOp>(
      {op.getQ(), op.getK(), op.getV(), op->getResult(1), ctx.resultGrad(0)},
      attrs, packed ? 1 : 3);
  if (!grad)
    return failure();
  for (unsigned i = 0; i < (packed ? 1u : 3u); ++i)
    if (ctx.needsGrad(i))
      ctx.setGrad(i, grad->getResult(i));
  return success();
}

//===----------------------------------------------------------------------===//
// Recurrent
//===----------------------------------------------------------------------===//

/// LSTM / GRU: the forward becomes its training form, which also saves the
/// per-step states (h, c and the gates' activations) its gradient reads, so
/// that the gradient does not run the forward again: a result after the
/// ONNX ones (of an op the lowering supports; another is left to the VJP's
/// error).
static Operation *prepareRecurrent(Operation *op, OpBuilder &b,
                                   unsigned onnxResults) {
  if (op->getNumResults() > onnxResults)
    return op;
  {
    // Only probing: the VJP rule reports an unsupported op.
    ScopedDiagnosticHandler quiet(op->getContext(),
                                  [](Diagnostic &) { return success(); });
    if (failed(onnx::checkRecurrentSupported(op)))
      return op;
  }
  return cloneWithResults(op, b, onnxResults + 1);
}

Operation *prepare(LSTMOp op, OpBuilder &b) {
  return prepareRecurrent(op, b, 3);
}

Operation *prepare(GRUOp op, OpBuilder &b) { return prepareRecurrent(op, b, 2); }

/// LSTM / GRU: one LSTMGrad / GRUGrad (BPTT) from the forward's inputs, its
/// outputs' gradients (none where nothing flows) and its saved states (none
/// where the forward has none: the kernel recomputes them). Operand k of
/// the forward (X W R B sequence_lens initial_h [initial_c]) gets result
/// `resultOf[k]` of the gradient op.
template <typename GradOp>
static LogicalResult recurrentVjp(Operation *op, VjpContext &ctx,
                                  unsigned numStates) {
  if (failed(checkRecurrentSupported(op)))
    return failure();
  unsigned outputs = 1 + numStates;
  SmallVector<Value> operands;
  for (unsigned i : {0u, 1u, 2u, 3u, 5u})
    operands.push_back(op->getOperand(i));
  if (numStates == 2)
    operands.push_back(op->getOperand(6));
  for (unsigned i = 0; i < outputs; ++i) {
    Value g = ctx.resultGrad(i);
    operands.push_back(g ? g : ctx.none());
  }
  if (ctx.resultGrad(outputs))
    return op->emitOpError() << "cannot differentiate through its saved states";
  operands.push_back(op->getNumResults() > outputs ? op->getResult(outputs)
                                                   : ctx.none());
  SmallVector<NamedAttribute> attrs{ctx.attr(
      "direction", op->getAttr("direction")
                       ? op->getAttr("direction")
                       : StringAttr::get(op->getContext(), "forward"))};
  if (auto gru = dyn_cast<GRUOp>(op))
    attrs.push_back(
        ctx.i64Attr("linear_before_reset", gru.getLinearBeforeReset()));
  Operation *grad = ctx.build<GradOp>(operands, attrs, 4 + numStates);
  if (!grad)
    return failure();
  const unsigned forwardOperand[] = {0, 1, 2, 3, 5, 6};
  for (unsigned k = 0; k < 4 + numStates; ++k)
    if (ctx.needsGrad(forwardOperand[k]))
      ctx.setGrad(forwardOperand[k], grad->getResult(k));
  return success();
}

LogicalResult vjp(LSTMOp op, VjpContext &ctx) {
  return recurrentVjp<LSTMGradOp>(op, ctx, 2);
}

LogicalResult vjp(GRUOp op, VjpContext &ctx) {
  return recurrentVjp<GRUGradOp>(op, ctx, 1);
}

} // namespace mlir::pipec::autodiff
