//===- Inference.cpp - a forward computation in inference mode -------------===//
#include "pipec/Autodiff/Inference.h"

#include "dialects/onnx/OnnxDialect.h"

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
