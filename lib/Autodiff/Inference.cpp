//===- Inference.cpp - a forward computation in inference mode -------------===//
#include "pipec/Autodiff/Inference.h"

#include "dialects/onnx/OnnxDialect.h"
#include "pipec/Autodiff/OnnxBuilder.h"

#include "llvm/ADT/Sequence.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace mlir::pipec;

int mlir::pipec::toInferenceMode(Block &body) {
  int changed = 0;
  for (Operation &op : body) {
    if (auto bn = dyn_cast<onnx::BatchNormalizationOp>(op)) {
      if (bn.getTrainingMode() != 0) {
        OpBuilder b(&op);
        bn->setAttr("training_mode", b.getI64IntegerAttr(0));
        ++changed;
      }
      continue;
    }
    if (auto att = dyn_cast<onnx::AttentionOp>(op)) {
      // A fused attention's dropout (pipe-fuse-attention): off.
      if (att->hasAttr("dropout")) {
        att->removeAttr("dropout");
        ++changed;
      }
      continue;
    }
    auto dropout = dyn_cast<onnx::DropoutOp>(op);
    if (!dropout || isa<NoneType>(dropout.getTrainingMode().getType()))
      continue;
    // training_mode = false: Y = X, the mask all ones.
    OpBuilder b(&op);
    auto type = RankedTensorType::get({}, b.getI1Type());
    Value off = onnx::ConstantOp::create(b, op.getLoc(), type,
                                         DenseElementsAttr::get(type, false));
    op.setOperand(2, off);
    ++changed;
  }
  return changed;
}

std::optional<AccuracyCounts>
mlir::pipec::buildAccuracyCounts(Block &body, unsigned losses, std::string &unavailable) {
  SmallVector<Operation *> classifiers;
  for (Operation &op : body.without_terminator())
    if (isa<onnx::SoftmaxCrossEntropyLossOp, onnx::NegativeLogLikelihoodLossOp>(op))
      classifiers.push_back(&op);
  if (classifiers.size() != losses || classifiers.empty()) {
    unavailable = noAccuracyReason(classifiers.size() / std::max(losses, 1u));
    return std::nullopt;
  }
  for (Operation *op : classifiers) {
    auto scores = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
    auto labels = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
    if (!scores || !labels || !scores.hasStaticShape() || !labels.hasStaticShape() ||
        scores.getRank() < 2 || !scores.getElementType().isF32() ||
        !labels.getElementType().isSignlessInteger()) {
      unavailable = "the classification loss's scores are not a static f32 tensor of "
                    "rank >= 2 with integer labels";
      return std::nullopt;
    }
  }
  OpBuilder b(body.getTerminator());
  autodiff::OnnxBuilder ob(b, body.getTerminator()->getLoc());
  Type f32 = b.getF32Type(), i64 = b.getI64Type();
  // Summed to a scalar: ReduceSum over every axis, keepdims 0.
  auto total = [&](Value mask) {
    Value x = ob.create<onnx::CastOp>({mask}, {ob.i64Attr("to", 1)});
    int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
    if (rank == 0)
      return x;
    return ob.create<onnx::ReduceSumOp>(
        {x, ob.i64s(llvm::to_vector(llvm::seq<int64_t>(0, rank)))},
        {ob.i64Attr("keepdims", 0)});
  };
  AccuracyCounts counts;
  for (Operation *op : classifiers) {
    ob.setLoc(op->getLoc());
    Value labels = op->getOperand(1);
    if (cast<RankedTensorType>(labels.getType()).getElementType() != i64)
      labels = ob.create<onnx::CastOp>({labels}, {ob.i64Attr("to", 7)});
    Value predicted = ob.create<onnx::ArgMaxOp>(
        {op->getOperand(0)}, {ob.i64Attr("axis", 1), ob.i64Attr("keepdims", 0)});
    Value hit = ob.create<onnx::EqualOp>({predicted, labels});
    Value correct, counted;
    if (auto ignore = op->getAttrOfType<IntegerAttr>("ignore_index")) {
      Value valid = ob.create<onnx::NotOp>(
          {ob.create<onnx::EqualOp>({labels, ob.scalarI64(ignore.getInt())})});
      correct = total(ob.create<onnx::AndOp>({hit, valid}));
      counted = total(valid);
    } else {
      correct = total(hit);
      counted = ob.splat(RankedTensorType::get({}, f32),
                         double(cast<RankedTensorType>(labels.getType()).getNumElements()));
    }
    counts.correct = counts.correct ? ob.add(counts.correct, correct) : correct;
    counts.counted = counts.counted ? ob.add(counts.counted, counted) : counted;
  }
  if (ob.failed()) {
    unavailable.clear();
    return std::nullopt;
  }
  return counts;
}

int64_t mlir::pipec::countClassificationLosses(Operation *root) {
  int64_t n = 0;
  root->walk([&](Operation *op) {
    if (isa<onnx::SoftmaxCrossEntropyLossOp, onnx::NegativeLogLikelihoodLossOp>(op))
      ++n;
  });
  return n;
}

std::string mlir::pipec::noAccuracyReason(int64_t terms) {
  if (terms == 0)
    return "the loss has no SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss "
           "(no class scores to take the accuracy of)";
  return "the loss has " + std::to_string(terms) +
         " classification terms (the accuracy of which is ambiguous)";
}
