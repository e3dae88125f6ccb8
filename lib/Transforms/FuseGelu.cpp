//===- FuseGelu.cpp - pipe-fuse-gelu: the exported exact GELU as one op ----===//
#include "pipec/Analysis/CostModel.h"
#include "dialects/onnx/ShapeHelpers.h"
#include "dialects/pipe/PipeAttrNames.h"
#include "pipec/Autodiff/OnnxBuilder.h"
#include "pipec/Transforms/Passes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"

#include <cmath>

namespace mlir::pipec {
#define GEN_PASS_DEF_PIPEFUSEGELU
#include "pipec/Transforms/Passes.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;

namespace {

std::optional<double> splatValue(Value v) { return onnx::getSplatFloat(v); }

bool near(std::optional<double> v, double want) {
  return v && std::fabs(*v - want) <= 1e-6 * std::fabs(want);
}

/// For a commutative binary op: the operand that is not the constant
/// `want` (std::nullopt if neither is).
template <typename Op>
Value otherThanConstant(Op op, double want) {
  if (near(splatValue(op.getB()), want))
    return op.getA();
  if (near(splatValue(op.getA()), want))
    return op.getB();
  return {};
}

bool singleUse(Value v) { return v.hasOneUse(); }

/// Matches `root` = Mul(Mul(x, Add(Erf(Div(x, sqrt2)), 1)), 0.5) in any
/// operand order; returns x. `chain` gets its ops other than root.
Value matchGelu(onnx::MulOp root, SmallVectorImpl<Operation *> &chain) {
  Value inner = otherThanConstant(root, 0.5);
  auto mul = inner ? inner.getDefiningOp<onnx::MulOp>() : onnx::MulOp();
  if (!mul || !singleUse(inner))
    return {};
  for (int side = 0; side < 2; ++side) {
    Value x = side ? mul.getB() : mul.getA();
    Value sum = side ? mul.getA() : mul.getB();
    auto add = sum.getDefiningOp<onnx::AddOp>();
    if (!add || !singleUse(sum))
      continue;
    Value erfOut = otherThanConstant(add, 1.0);
    auto erf = erfOut ? erfOut.getDefiningOp<onnx::ErfOp>() : onnx::ErfOp();
    if (!erf || !singleUse(erfOut))
      continue;
    Value scaled = erf->getOperand(0);
    if (!singleUse(scaled))
      continue;
    Value source;
    if (auto div = scaled.getDefiningOp<onnx::DivOp>()) {
      if (near(splatValue(div.getB()), std::sqrt(2.0)))
        source = div.getA();
    } else if (auto m = scaled.getDefiningOp<onnx::MulOp>()) {
      source = otherThanConstant(m, 1.0 / std::sqrt(2.0));
    }
    if (source && source == x && x.getType() == root.getType()) {
      chain.assign({mul, add, erf, scaled.getDefiningOp()});
      return x;
    }
  }
  return {};
}

struct FuseGeluPass : mlir::pipec::impl::PipeFuseGeluBase<FuseGeluPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<onnx::MulOp> roots;
    getOperation().walk([&](onnx::MulOp op) { roots.push_back(op); });
    for (onnx::MulOp root : roots) {
      SmallVector<Operation *> inner;
      Value x = matchGelu(root, inner);
      if (!x || llvm::any_of(inner, [&](Operation *op) {
            return llvm::is_contained(keep, CostModel::getNodeName(op->getLoc()).str());
          }))
        continue;
      OpBuilder b(root);
      auto gelu = onnx::GeluOp::create(b, root.getLoc(), root.getType(), x,
                                       b.getStringAttr("none"));
      // Its stage, where stages are already assigned.
      if (Attribute stage = root->getAttr(pipe::attrs::kStage))
        gelu->setAttr(pipe::attrs::kStage, stage);
      // The chain: root <- mul <- add <- erf <- div/mul (single uses), and
      // the constants only it used.
      Operation *op = root;
      root.getResult().replaceAllUsesWith(gelu.getResult());
      SmallVector<Operation *> constants;
      while (op && op->use_empty()) {
        Operation *next = nullptr;
        for (Value operand : op->getOperands())
          if (Operation *def = operand.getDefiningOp()) {
            if (isa<onnx::ConstantOp>(def))
              constants.push_back(def);
            else if (operand != x && operand.hasOneUse())
              next = def;
          }
        op->erase();
        op = next;
      }
      for (Operation *c : constants)
        if (c->use_empty())
          c->erase();
    }
  }
};

} // namespace
