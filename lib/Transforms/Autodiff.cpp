//===- Autodiff.cpp - pipe-autodiff: build the training step ---------------===//
#include "pipec/Autodiff/Autodiff.h"
#include "dialects/pipe/PipeAttrNames.h"
#include "pipec/Autodiff/OnnxBuilder.h"
#include "pipec/Transforms/Passes.h"

#include "llvm/ADT/StringExtras.h"
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

/// Linear layers as one GEMM each, before differentiating. torch exports
/// nn.Linear on an input of more than two axes as MatMul(x, Transpose(W))
/// (+ Add(bias)); MatMul's VJP then transposes W again, multiplies batched
/// slices of x and sums them back to W's shape, and the Transpose runs in
/// every micro-batch (on the weight: a fixed cost, about 3 us per layer per
/// micro-batch here, whatever the micro-batch's size). So MatMul(A, B) with
/// a 2-D B becomes Reshape(Gemm(Reshape(A, (rows, K)), W, bias, transB),
/// Y's shape): Reshape is an alias, B = Transpose(W) (perm [1, 0]) folds
/// into transB, a following Add of an (N) or (1, N) bias into C. Gemm's VJP
/// is then two GEMMs over all rows (dA = G op(W), dW = one G^T A or A^T G),
/// with no transposes and no sums. Only f32 with static shapes; the folded
/// Transpose and Add must be on the MatMul's stage (pipe.stage), and the
/// new ops get it too.
static void linearLayersToGemm(func::FuncOp f) {
  SmallVector<onnx::MatMulOp> matmuls;
  f.walk([&](onnx::MatMulOp op) { matmuls.push_back(op); });
  auto sameStage = [](Operation *a, Operation *b) {
    return a->getAttr(pipe::attrs::kStage) == b->getAttr(pipe::attrs::kStage);
  };
  for (onnx::MatMulOp mm : matmuls) {
    auto ta = llvm::dyn_cast<RankedTensorType>(mm.getA().getType());
    auto tb = llvm::dyn_cast<RankedTensorType>(mm.getB().getType());
    auto ty = llvm::dyn_cast<RankedTensorType>(mm.getY().getType());
    if (!ta || !tb || !ty || !ta.hasStaticShape() || !tb.hasStaticShape() ||
        !ty.hasStaticShape() || ta.getRank() < 2 || tb.getRank() != 2 ||
        !ta.getElementType().isF32() || !tb.getElementType().isF32())
      continue;
    Value w = mm.getB();
    int64_t transB = 0;
    auto tr = w.getDefiningOp<onnx::TransposeOp>();
    if (tr) {
      auto perm = tr.getPerm();
      bool swap = !perm || (perm->size() == 2 && (*perm)[0] == 1 && (*perm)[1] == 0);
      if (swap && sameStage(tr, mm)) {
        w = tr.getData();
        transB = 1;
      } else {
        tr = nullptr;
      }
    }
    const int64_t k = ta.getShape().back(), n = ty.getShape().back();
    const int64_t rows = ta.getNumElements() / std::max<int64_t>(k, 1);
    Value bias;
    onnx::AddOp add;
    if (mm->hasOneUse())
      if (auto a = llvm::dyn_cast<onnx::AddOp>(*mm->user_begin()); a && sameStage(a, mm)) {
        Value other = a.getA() == mm.getY() ? a.getB() : a.getA();
        auto tc = llvm::dyn_cast<RankedTensorType>(other.getType());
        if (other != mm.getY() && tc && tc.getElementType().isF32() &&
            a.getType() == ty &&
            ((tc.getRank() == 1 && tc.getShape()[0] == n) ||
             (tc.getRank() == 2 && tc.getShape()[0] == 1 && tc.getShape()[1] == n))) {
          bias = other;
          add = a;
        }
      }
    Operation *last = add ? add.getOperation() : mm.getOperation();
    OpBuilder b(last);
    autodiff::OnnxBuilder ob(b, mm.getLoc());
    Block *block = last->getBlock();
    Operation *before = last->getPrevNode();
    // The reshapes get locations of their own ("<node>/rows",
    // "<node>/unrows"): a partition of the training step places backward
    // ops by their forward op's location, which must name one stage.
    auto named = [&](StringRef suffix) -> Location {
      auto name = llvm::dyn_cast<NameLoc>(mm.getLoc());
      return NameLoc::get(
          b.getStringAttr((name ? name.getName().strref() : StringRef("MatMul")) + suffix),
          mm.getLoc());
    };
    ob.setLoc(named("/rows"));
    Value a2 = ob.reshape(mm.getA(), RankedTensorType::get({rows, k}, ta.getElementType()));
    ob.setLoc(mm.getLoc());
    Value y2 = ob.create<onnx::GemmOp>({a2, w, bias ? bias : ob.none()},
                                       {ob.i64Attr("transB", transB)});
    ob.setLoc(named("/unrows"));
    Value y = ob.reshape(y2, ty);
    if (ob.failed())
      continue;
    if (Attribute stage = mm->getAttr(pipe::attrs::kStage))
      for (Operation *op = before ? before->getNextNode() : &block->front(); op != last;
           op = op->getNextNode())
        op->setAttr(pipe::attrs::kStage, stage);
    last->getResult(0).replaceAllUsesWith(y);
    if (add)
      add->erase();
    mm->erase();
    if (tr && tr->use_empty())
      tr->erase();
  }
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
    if (trainStepName.empty() || !(llvm::isAlpha(trainStepName[0]) || trainStepName[0] == '_'))
      return module.emitError() << "pipe-autodiff: train-step='" << trainStepName
                                << "' is not a symbol name (a letter or _ first)";
    if (module.lookupSymbol(trainStepName))
      return module.emitError() << "pipe-autodiff: @" << trainStepName
                                << " exists already";

    func::FuncOp step = forward.clone();
    step.setSymName(trainStepName);
    SymbolTable(module).insert(step, std::next(forward->getIterator()));

    linearLayersToGemm(step);
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
