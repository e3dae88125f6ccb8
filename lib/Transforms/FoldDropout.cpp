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
// A Pad that pads nothing (mode constant, pads a constant of zeros) is the
// identity too: torch.onnx writes one before every avg_pool2d it exports
// (DenseNet's transitions). Each was a copy through the general pad kernel
// forward and a scatter backward: ~20 ms of DenseNet-121's ~260 ms step at
// 64 x 64, batch 8. It is replaced by its input as well.
//
//===----------------------------------------------------------------------===//
#include "pipec/Analysis/CostModel.h"
#include "dialects/onnx/ShapeHelpers.h"
#include "pipec/Transforms/Passes.h"

#include "llvm/ADT/SetVector.h"

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

/// Whether `op` is the identity: constant mode, pads a constant of zeros.
bool padsNothing(onnx::PadOp op) {
  if (op.getMode() != "constant")
    return false;
  std::optional<SmallVector<int64_t>> p = onnx::getConstantInts(op.getPads());
  return p && llvm::all_of(*p, [](int64_t v) { return v == 0; });
}

/// Replaces `op`'s result by `input` and erases it, and the constants it
/// read that nothing else reads.
void replaceByInput(Operation *op, Value input, Value result) {
  llvm::SetVector<Operation *> defs; // one NoValue may fill several inputs
  for (Value v : op->getOperands())
    if (Operation *def = v.getDefiningOp(); def && isa<onnx::ConstantOp, onnx::NoValueOp>(def))
      defs.insert(def);
  result.replaceAllUsesWith(input);
  op->erase();
  for (Operation *def : defs)
    if (def->use_empty())
      def->erase();
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
    SmallVector<onnx::PadOp> pads;
    getOperation().walk([&](onnx::PadOp op) {
      if (padsNothing(op) && op.getData().getType() == op.getOutput().getType() &&
          !llvm::is_contained(keep, CostModel::getNodeName(op->getLoc()).str()))
        pads.push_back(op);
    });
    for (onnx::DropoutOp op : folds)
      replaceByInput(op, op.getData(), op.getOutput());
    for (onnx::PadOp op : pads)
      replaceByInput(op, op.getData(), op.getOutput());
  }
};

} // namespace
