//===- Autodiff.cpp - pipe-autodiff: build the training step ---------------===//
#include "pipec/Autodiff/Autodiff.h"
#include "dialects/pipe/PipeAttrNames.h"
#include "pipec/Autodiff/OnnxBuilder.h"
#include "pipec/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::pipec {
#define GEN_PASS_DEF_PIPEAUTODIFF
#include "pipec/Transforms/Passes.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;

/// Zeros of `type`: the gradient of a value the loss does not depend on.
static Value zerosOf(OpBuilder &b, Location loc, Type type) {
  auto tensor = llvm::cast<RankedTensorType>(type);
  return onnx::ConstantOp::create(
      b, loc, tensor,
      DenseElementsAttr::get(tensor, b.getZeroAttr(tensor.getElementType())));
}

/// The name an argument has in the ONNX graph (pipe.input or pipe.param).
static StringAttr graphName(func::FuncOp func, unsigned i) {
  for (StringRef key : {pipe::attrs::kInput, pipe::attrs::kParam, pipe::attrs::kState})
    if (auto name = func.getArgAttrOfType<StringAttr>(i, key))
      return name;
  return {};
}

/// Erases the ops of `func` whose results nobody uses and that have no
/// effects: forward code that fed dropped outputs, unused shape constants.
static void eraseDeadOps(func::FuncOp func) {
  Block &body = func.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();
}

namespace {
struct PipeAutodiffPass
    : public pipec::impl::PipeAutodiffBase<PipeAutodiffPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(funcName);
    if (!forward || forward.isExternal()) {
      module.emitError() << "pipe-autodiff: no function @" << funcName
                         << " with a body to differentiate";
      return signalPassFailure();
    }
    SmallVector<onnx::GradientOp> gradientOps;
    module.walk([&](onnx::GradientOp op) { gradientOps.push_back(op); });
    for (onnx::GradientOp op : gradientOps)
      if (failed(expandGradient(forward, op)))
        return signalPassFailure();
    if (failed(buildTrainStep(module, forward)))
      return signalPassFailure();
  }

  /// The index of the result marked pipe.loss, after checking it is a
  /// scalar.
  FailureOr<unsigned> findLoss(func::FuncOp forward) {
    std::optional<unsigned> loss;
    for (unsigned i = 0; i < forward.getNumResults(); ++i) {
      if (!forward.getResultAttr(i, pipe::attrs::kLoss))
        continue;
      if (loss)
        return forward.emitError()
               << "@" << forward.getSymName()
               << " has more than one result marked pipe.loss";
      loss = i;
    }
    if (!loss)
      return forward.emitError() << "@" << forward.getSymName()
                                 << " has no result marked pipe.loss";
    auto type = llvm::dyn_cast<RankedTensorType>(
        forward.getResultTypes()[*loss]);
    if (!type || !type.hasStaticShape() || type.getNumElements() != 1 ||
        !llvm::isa<FloatType>(type.getElementType()))
      return forward.emitError()
             << "the loss (result #" << *loss << " of @"
             << forward.getSymName() << ") must be a float scalar, got "
             << forward.getResultTypes()[*loss];
    return *loss;
  }

  LogicalResult buildTrainStep(ModuleOp module, func::FuncOp forward) {
    auto lossIndex = findLoss(forward);
    if (failed(lossIndex))
      return failure();
    SmallVector<unsigned> trainable;
    for (unsigned i = 0; i < forward.getNumArguments(); ++i)
      if (forward.getArgAttr(i, pipe::attrs::kTrainable))
        trainable.push_back(i);
    if (trainable.empty())
      return forward.emitError() << "no argument of @" << forward.getSymName()
                                 << " is marked pipe.trainable: nothing to "
                                    "differentiate";
    if (module.lookupSymbol(trainStepName))
      return module.emitError() << "pipe-autodiff: @" << trainStepName
                                << " exists already";

    func::FuncOp step = forward.clone();
    step.setSymName(trainStepName);
    SymbolTable(module).insert(step, std::next(forward->getIterator()));

    Block &body = step.getBody().front();
    auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
    Value loss = ret.getOperand(*lossIndex);
    SmallVector<Value> wrt;
    for (unsigned i : trainable)
      wrt.push_back(step.getArgument(i));
    OpBuilder b(ret);
    auto grads = autodiff::buildGradients(b, loss, wrt);
    if (failed(grads))
      return failure();

    SmallVector<Value> results{loss};
    SmallVector<Attribute> resultAttrs;
    if (DictionaryAttr lossAttrs = step.getResultAttrDict(*lossIndex))
      resultAttrs.push_back(lossAttrs);
    else
      resultAttrs.push_back(b.getDictionaryAttr({}));
    for (auto [i, arg] : llvm::enumerate(trainable)) {
      Value g = (*grads)[i];
      if (!g)
        g = zerosOf(b, step.getArgument(arg).getLoc(),
                    step.getArgument(arg).getType());
      results.push_back(g);
      StringAttr name = graphName(step, arg);
      if (!name)
        name = b.getStringAttr("arg" + std::to_string(arg));
      resultAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(pipe::attrs::kGrad, name)));
    }
    // State the forward updates (BatchNormalization's running statistics):
    // kept, after the gradients.
    for (unsigned r = 0; r < step.getNumResults(); ++r)
      if (auto name =
              step.getResultAttrOfType<StringAttr>(r, pipe::attrs::kUpdate)) {
        results.push_back(ret.getOperand(r));
        resultAttrs.push_back(b.getDictionaryAttr(
            b.getNamedAttr(pipe::attrs::kUpdate, name)));
      }
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    step.setType(FunctionType::get(&getContext(), step.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    step.setAllResultAttrs(resultAttrs);
    eraseDeadOps(step);
    return success();
  }

  /// Inlines @forward before `op` and replaces `op` by the gradients.
  LogicalResult expandGradient(func::FuncOp forward, onnx::GradientOp op) {
    auto func = op->getParentOfType<func::FuncOp>();
    if (!func || func == forward)
      return op.emitOpError() << "must be in a function other than @"
                              << forward.getSymName();
    if (!op->getBlock()->isEntryBlock() || !func.getBody().hasOneBlock())
      return op.emitOpError() << "must be in a single-block function";
    // y: a forward output, by name.
    std::optional<unsigned> yIndex;
    for (unsigned i = 0; i < forward.getNumResults(); ++i)
      if (auto name = forward.getResultAttrOfType<StringAttr>(i, pipe::attrs::kOutput))
        if (name.getValue() == op.getY())
          yIndex = i;
    if (!yIndex)
      return op.emitOpError() << "y '" << op.getY() << "' is not an output of @"
                              << forward.getSymName();
    IRMapping mapping;
    for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
      StringAttr name = graphName(forward, i);
      std::optional<unsigned> match;
      for (unsigned j = 0; name && j < func.getNumArguments(); ++j)
        if (graphName(func, j) == name)
          match = j;
      if (!match)
        return op.emitOpError() << "@" << func.getSymName()
                                << " has no argument for @"
                                << forward.getSymName() << "'s argument #" << i
                                << (name ? " '" + name.getValue().str() + "'"
                                         : std::string());
      mapping.map(forward.getArgument(i), func.getArgument(*match));
    }
    OpBuilder b(op);
    Block &fwd = forward.getBody().front();
    for (Operation &fop : fwd.without_terminator())
      b.clone(fop, mapping);
    Value loss = mapping.lookup(fwd.getTerminator()->getOperand(*yIndex));
    auto lossType = llvm::dyn_cast<RankedTensorType>(loss.getType());
    if (!lossType || !lossType.hasStaticShape() ||
        lossType.getNumElements() != 1)
      return op.emitOpError() << "y '" << op.getY()
                              << "' must be a scalar, got " << loss.getType();
    size_t numXs = op.getXs().size();
    SmallVector<Value> wrt(op.getInputs().take_front(numXs));
    auto grads = autodiff::buildGradients(b, loss, wrt);
    if (failed(grads))
      return failure();
    for (unsigned i = 0; i < numXs; ++i) {
      Value g = (*grads)[i];
      if (!g)
        g = zerosOf(b, op.getLoc(), op.getResult(i).getType());
      op.getResult(i).replaceAllUsesWith(g);
    }
    op.erase();
    eraseDeadOps(func);
    return success();
  }
};
} // namespace
