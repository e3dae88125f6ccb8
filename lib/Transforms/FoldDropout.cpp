//===- FoldDropout.cpp - pipe-fold-dropout: Dropout that drops nothing ----===//
//
// torch.onnx writes nn.Dropout(p = 0.0) as onnx.Dropout(x, ratio = 0,
// training_mode = true), and a model exported in inference mode writes
// Dropout without training_mode (inference: Y = X). Either is the identity
// in training and in evaluation, yet each was a kernel forward (a copy and a
// mask of ones) and one backward (dY times that mask): 1.5% of an
// nn.TransformerEncoder's step at dropout = 0.0. Such a Dropout whose mask
// nothing reads is replaced by its input; where it stood between a softmax
// and its product with V, the attention chain can then be fused
// (pipe-fuse-attention runs after this pass).
//
//===----------------------------------------------------------------------===//
#include "pipec/Analysis/CostModel.h"
#include "dialects/onnx/ShapeHelpers.h"
#include "pipec/Transforms/Passes.h"

namespace mlir::pipec {
#define GEN_PASS_DEF_PIPEFOLDDROPOUT
#include "pipec/Transforms/Passes.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;

namespace {

/// Whether `op` is the identity: training_mode absent or a constant false,
/// or the ratio a constant 0.
bool dropsNothing(onnx::DropoutOp op) {
  Value mode = op.getTrainingMode();
  if (!mode || isa<NoneType>(mode.getType()))
    return true;
  if (auto t = onnx::getConstantInts(mode); t && t->size() == 1 && (*t)[0] == 0)
    return true;
  Value ratio = op.getRatio();
  if (ratio && !isa<NoneType>(ratio.getType()))
    if (std::optional<double> r = onnx::getSplatFloat(ratio); r && *r == 0.0)
      return true;
  return false;
}

struct FoldDropoutPass : mlir::pipec::impl::PipeFoldDropoutBase<FoldDropoutPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<onnx::DropoutOp> folds;
    getOperation().walk([&](onnx::DropoutOp op) {
      if ((!op.getMask() || op.getMask().use_empty()) && dropsNothing(op) &&
          op.getData().getType() == op.getOutput().getType() &&
          !llvm::is_contained(keep, CostModel::getNodeName(op->getLoc()).str()))
        folds.push_back(op);
    });
    for (onnx::DropoutOp op : folds) {
      SmallVector<Operation *> defs;
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp(); def && isa<onnx::ConstantOp, onnx::NoValueOp>(def))
          defs.push_back(def);
      op.getOutput().replaceAllUsesWith(op.getData());
      op->erase();
      for (Operation *def : defs)
        if (def->use_empty())
          def->erase();
    }
  }
};

} // namespace
