//===- LowerGradientOps.cpp - onnx gradient ops → pipert kernel calls -----===//
//
// StepLowering::lowerGradientOp: the ops of OnnxGradientOps.td that reverse
// mode differentiation emits (activation, softmax, normalisation,
// convolution/pooling, slice/gather, dropout and loss gradients), each one
// call of its pipert *_grad kernel (three for ConvGrad, one per used result).
//
//===----------------------------------------------------------------------===//
#include "StepLowering.h"

#include "dialects/onnx/OnnxDialect.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::pipec;

namespace mlir::pipec::steplowering {

LogicalResult StepLowering::lowerGradientOp(Operation *op) {
  StringRef name = op->getName().getStringRef();
  handled = true;
  auto operand = [&](unsigned i) { return op->getOperand(i); };
  auto numel = [&](Value v) { return i64c(tensorType(v).getNumElements()); };
  auto resultShape = [&](unsigned i) { return shapeOf(op->getResult(i)); };
  auto resultRank = [&](unsigned i) { return rankOf(op->getResult(i)); };
  auto normAxis = [&](int64_t axis, int64_t rank) {
    return axis < 0 ? axis + rank : axis;
  };
  auto lossArgs = [&]() -> SmallVector<Value> {
    auto ii = op->getAttrOfType<IntegerAttr>("ignore_index");
    return {i32c(ii ? 1 : 0), i64c(ii ? ii.getInt() : 0),
            i32c(reductionCode(attrStr(op, "reduction", "mean")))};
  };

  if (isa<onnx::ReluGradOp, onnx::ErfGradOp, onnx::TanhGradOp,
          onnx::SigmoidGradOp>(op)) {
    StringRef fn =
        llvm::TypeSwitch<Operation *, StringRef>(op)
            .Case<onnx::ReluGradOp>([](auto) { return "pipert_relu_grad_f32"; })
            .Case<onnx::ErfGradOp>([](auto) { return "pipert_erf_grad_f32"; })
            .Case<onnx::TanhGradOp>([](auto) { return "pipert_tanh_grad_f32"; })
            .Case<onnx::SigmoidGradOp>(
                [](auto) { return "pipert_sigmoid_grad_f32"; });
    call(fn, {ctxArg, P(operand(0)), P(operand(1)), numel(operand(1)),
              out(op, 0)});
    return success();
  }
  if (isa<onnx::UnaryGradOp>(op)) {
    ActivationCall act = activationCall(op);
    if (act.code < 0)
      return op->emitError() << "UnaryGrad of unknown activation '"
                             << attrStr(op, "activation", "") << "'";
    call("pipert_activation_grad_f32",
         {ctxArg, i32c(act.code), f32c(act.alpha), f32c(act.beta),
          P(operand(0)), P(operand(1)), numel(operand(1)), out(op, 0)});
    return success();
  }
  if (isa<onnx::ReduceExtremumGradOp>(op)) {
    Value x = operand(0);
    auto axes = constInts(op, operand(2), "the axes of ReduceExtremumGrad");
    if (failed(axes))
      return failure();
    call("pipert_reduce_extremum_grad_f32",
         {ctxArg, i32c(attrInt(op, "select_min", 0) ? 3 : 2), P(x), rankOf(x),
          shapeOf(x), i64c(axes->size()), i64Array(*axes),
          i32c(attrInt(op, "noop_with_empty_axes", 0)), P(operand(1)),
          out(op, 0)});
    return success();
  }
  if (isa<onnx::TileGradOp, onnx::PadGradOp>(op)) {
    bool tile = isa<onnx::TileGradOp>(op);
    auto ints = constInts(op, operand(2), tile ? "the repeats of TileGrad"
                                               : "the pads of PadGrad");
    if (failed(ints))
      return failure();
    if (tile) {
      call("pipert_tile_grad_f32", {ctxArg, P(operand(0)), resultRank(0),
                                    resultShape(0), i64Array(*ints), out(op, 0)});
    } else {
      std::string mode = attrStr(op, "mode", "constant");
      int64_t code = mode == "constant" ? 0 : mode == "reflect" ? 1 : 2;
      call("pipert_pad_grad_f32",
           {ctxArg, i32c(code), P(operand(0)), resultRank(0), resultShape(0),
            i64Array(*ints), out(op, 0)});
    }
    return success();
  }
  if (isa<onnx::ReduceToShapeOp>(op)) {
    Value dy = operand(0);
    call("pipert_reduce_to_shape_f32", {ctxArg, P(dy), rankOf(dy), shapeOf(dy),
                                        resultRank(0), resultShape(0),
                                        out(op, 0)});
    return success();
  }
  if (isa<onnx::AttentionGradOp>(op))
    return lowerAttention(op);
  if (isa<onnx::SoftmaxGradOp, onnx::LogSoftmaxGradOp>(op)) {
    Value y = operand(0);
    int64_t rank = tensorType(y).getRank();
    call(isa<onnx::SoftmaxGradOp>(op) ? "pipert_softmax_grad_f32"
                                      : "pipert_log_softmax_grad_f32",
         {ctxArg, P(y), P(operand(1)), rankOf(y), shapeOf(y),
          i64c(normAxis(attrInt(op, "axis", -1), rank)), out(op, 0)});
    return success();
  }
  if (isa<onnx::LSTMGradOp, onnx::GRUGradOp>(op)) {
    bool lstm = isa<onnx::LSTMGradOp>(op);
    auto xs = tensorType(operand(0)).getShape();
    int64_t hidden = tensorType(operand(2)).getDimSize(2);
    // Operands: X W R B initial_h [initial_c] dY dY_h [dY_c].
    SmallVector<Value> args{ctxArg};
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      args.push_back(P(operand(i)));
    args.append({i64c(xs[0]), i64c(xs[1]), i64c(xs[2]), i64c(hidden),
                 i32c(recurrentDirection(op))});
    if (!lstm)
      args.push_back(i32c(attrInt(op, "linear_before_reset", 0)));
    for (unsigned i = 0; i < op->getNumResults(); ++i)
      args.push_back(out(op, i));
    call(lstm ? "pipert_lstm_grad_f32" : "pipert_gru_grad_f32", args);
    return success();
  }
  if (isa<onnx::LayerNormalizationGradOp>(op)) {
    Value x = operand(0);
    int64_t rank = tensorType(x).getRank();
    call("pipert_layer_norm_grad_f32",
         {ctxArg, P(x), rankOf(x), shapeOf(x),
          i64c(normAxis(attrInt(op, "axis", -1), rank)), P(operand(1)),
          P(operand(2)), P(operand(3)), P(operand(4)), out(op, 0), out(op, 1),
          out(op, 2), accumulateBits(op, {1, 2})});
    return success();
  }
  if (isa<onnx::BatchNormalizationGradOp>(op)) {
    Value x = operand(0);
    call("pipert_batch_norm_grad_f32",
         {ctxArg, P(x), rankOf(x), shapeOf(x), P(operand(1)),
          f32c(attrF(op, "epsilon", 1e-5)), P(operand(2)), out(op, 0),
          out(op, 1), out(op, 2), accumulateBits(op, {1, 2})});
    return success();
  }
  if (isa<onnx::ConvGradOp, onnx::MaxPoolGradOp, onnx::AveragePoolGradOp>(op)) {
    // The forward input's shape: X's, or the `shape` operand's (the result).
    auto xt = isa<onnx::AveragePoolGradOp>(op) ? tensorType(op->getResult(0))
                                                : tensorType(operand(1));
    if (isa<onnx::MaxPoolGradOp>(op))
      xt = tensorType(operand(0));
    int64_t rank = xt.getRank();
    if (rank != 3 && rank != 4)
      return op->emitError() << name << " is lowered for rank 3 and 4 only";
    bool oneD = rank == 3;
    auto shape4 = [&](ArrayRef<int64_t> s) { return convShape2d(s, oneD); };
    auto pair = [&](StringRef attr, int64_t fill) {
      SmallVector<int64_t> v =
          attrInts(op, attr).value_or(SmallVector<int64_t>(rank - 2, fill));
      if (oneD)
        v.insert(v.begin(), 1);
      return i64Array(v);
    };
    SmallVector<int64_t> pads =
        attrInts(op, "pads").value_or(SmallVector<int64_t>(2 * (rank - 2), 0));
    if (oneD)
      pads = {0, pads[0], 0, pads[1]};
    Value padsV = i64Array(pads), stridesV = pair("strides", 1);
    Value xShape = i64Array(shape4(xt.getShape()));
    if (isa<onnx::ConvGradOp>(op)) {
      Value dy = operand(0), x = operand(1), w = operand(2);
      Value wShape = i64Array(shape4(tensorType(w).getShape()));
      Value dil = pair("dilations", 1);
      Value group = i64c(attrInt(op, "group", 1));
      if (placement[op->getResult(0)].kind != Placement::None)
        call("pipert_conv2d_grad_input_f32", {ctxArg, P(dy), P(w), wShape, xShape,
                                              padsV, stridesV, dil, group,
                                              out(op, 0)});
      if (placement[op->getResult(1)].kind != Placement::None)
        call("pipert_conv2d_grad_weight_f32", {ctxArg, P(x), xShape, P(dy),
                                               wShape, padsV, stridesV, dil,
                                               group, out(op, 1),
                                               accumulateBits(op, {1})});
      if (placement[op->getResult(2)].kind != Placement::None)
        call("pipert_conv2d_grad_bias_f32",
             {ctxArg, P(dy), i64Array(shape4(tensorType(dy).getShape())),
              out(op, 2), accumulateBits(op, {2})});
      return success();
    }
    Value kernel = pair("kernel_shape", 1);
    Value ceil = i32c(attrInt(op, "ceil_mode", 0));
    if (isa<onnx::MaxPoolGradOp>(op)) {
      call("pipert_maxpool2d_grad_f32",
           {ctxArg, P(operand(0)), xShape, P(operand(1)), kernel, padsV,
            stridesV, pair("dilations", 1), ceil, out(op, 0)});
      return success();
    }
    call("pipert_avgpool2d_grad_f32",
         {ctxArg, P(operand(0)), xShape, kernel, padsV, stridesV, ceil,
          i32c(attrInt(op, "count_include_pad", 0)), out(op, 0)});
    return success();
  }
  if (auto grad = dyn_cast<onnx::ResizeGradOp>(op)) {
    std::optional<ArrayRef<float>> scales;
    if (auto s = grad.getScales())
      scales = *s;
    SmallVector<float> roi;
    if (auto r = grad.getRoi())
      roi.assign(r->begin(), r->end());
    auto c = resizeCall(op, tensorType(op->getResult(0)).getShape(),
                        tensorType(operand(0)).getShape(), scales, roi);
    if (failed(c))
      return failure();
    call("pipert_resize_grad_f32",
         {ctxArg, P(operand(0)), i64Array(c->x4), i64Array(c->y4),
          c->scales3 ? f32Array(*c->scales3) : nullPtr(), f32Array(c->roi6),
          i32c(c->mode), i32c(c->coord), i32c(c->nearest),
          f32c(grad.getCubicCoeffA().convertToFloat()),
          i32c(grad.getExcludeOutside()), out(op, 0)});
    return success();
  }
  if (isa<onnx::GlobalAveragePoolGradOp>(op)) {
    call("pipert_global_avgpool_grad_f32",
         {ctxArg, P(operand(0)), resultRank(0), resultShape(0), out(op, 0)});
    return success();
  }
  if (isa<onnx::SliceGradOp>(op)) {
    auto window = sliceWindow(op, 2, "SliceGrad");
    if (failed(window))
      return failure();
    SmallVector<Value> args = {ctxArg, P(operand(0)), resultRank(0),
                               resultShape(0)};
    args.append(window->begin(), window->end());
    args.push_back(out(op, 0));
    call("pipert_slice_grad_f32", args);
    return success();
  }
  if (isa<onnx::GatherGradOp>(op)) {
    Value idx = operand(2);
    if (!getElementTypeOrSelf(idx.getType()).isInteger(64))
      return op->emitError("GatherGrad indices must be i64");
    int64_t rank = tensorType(op->getResult(0)).getRank();
    call("pipert_gather_grad_f32",
         {ctxArg, P(operand(0)), resultRank(0), resultShape(0), P(idx),
          rankOf(idx), shapeOf(idx),
          i64c(normAxis(attrInt(op, "axis", 0), rank)), out(op, 0)});
    return success();
  }
  if (isa<onnx::GatherElementsGradOp, onnx::ScatterElementsGradOp>(op)) {
    bool gather = isa<onnx::GatherElementsGradOp>(op);
    Value idx = operand(gather ? 2 : 1);
    if (!getElementTypeOrSelf(idx.getType()).isInteger(64))
      return op->emitError() << op->getName().stripDialect()
                             << " indices must be i64";
    int64_t rank = tensorType(op->getResult(0)).getRank();
    call(gather ? "pipert_gather_elements_grad_f32"
                : "pipert_scatter_elements_grad_f32",
         {ctxArg, P(operand(0)), resultRank(0), resultShape(0), P(idx),
          shapeOf(idx), i64c(normAxis(attrInt(op, "axis", 0), rank)),
          out(op, 0)});
    return success();
  }
  if (isa<onnx::GatherNDGradOp>(op)) {
    Value idx = operand(2);
    if (!getElementTypeOrSelf(idx.getType()).isInteger(64))
      return op->emitError("GatherNDGrad indices must be i64");
    call("pipert_gather_nd_grad_f32",
         {ctxArg, P(operand(0)), resultRank(0), resultShape(0), P(idx),
          rankOf(idx), shapeOf(idx), i64c(attrInt(op, "batch_dims", 0)),
          out(op, 0)});
    return success();
  }
  if (isa<onnx::ScatterNDGradOp>(op)) {
    Value dy = operand(0), idx = operand(1);
    if (!getElementTypeOrSelf(idx.getType()).isInteger(64))
      return op->emitError("ScatterNDGrad indices must be i64");
    call("pipert_scatter_nd_grad_f32",
         {ctxArg, P(dy), rankOf(dy), shapeOf(dy), P(idx), rankOf(idx),
          shapeOf(idx), out(op, 0)});
    return success();
  }
  if (isa<onnx::DropoutGradOp>(op)) {
    int64_t training = 0;
    if (!isa<NoneType>(operand(3).getType())) {
      auto t = constantOf(operand(3));
      if (!t)
        return op->emitError("DropoutGrad training_mode must be a "
                             "compile-time constant");
      training = (*t->getValues<APInt>().begin()).getBoolValue();
    }
    Value ratio = f32c(training ? 0.5 : 0.0);
    if (training && !isa<NoneType>(operand(2).getType())) {
      auto r = scalarF32(op, operand(2), "DropoutGrad ratio");
      if (failed(r))
        return failure();
      ratio = *r;
    }
    call("pipert_dropout_grad_f32", {ctxArg, P(operand(0)), P(operand(1)),
                                     numel(operand(0)), ratio, out(op, 0)});
    return success();
  }
  if (isa<onnx::SoftmaxCrossEntropyLossGradOp>(op)) {
    Value logProb = operand(1);
    SmallVector<Value> args = {ctxArg, P(operand(0)), P(logProb),
                               rankOf(logProb), shapeOf(logProb),
                               P(operand(2)), P(operand(3))};
    args.append(lossArgs());
    args.push_back(out(op, 0));
    call("pipert_softmax_cross_entropy_loss_grad_f32", args);
    return success();
  }
  if (isa<onnx::NegativeLogLikelihoodLossGradOp>(op)) {
    SmallVector<Value> args = {ctxArg, P(operand(0)), resultRank(0),
                               resultShape(0), P(operand(2)), P(operand(3))};
    args.append(lossArgs());
    args.push_back(out(op, 0));
    call("pipert_nll_loss_grad_f32", args);
    return success();
  }
  handled = false;
  return failure();
}


} // namespace mlir::pipec::steplowering
