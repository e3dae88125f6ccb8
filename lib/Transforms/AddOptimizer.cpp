//===- AddOptimizer.cpp - pipe-add-optimizer: the update in the step -------===//
//
// PyTorch semantics (torch.optim, 1.13), expressed with the onnx update ops:
//   SGD:          X -= lr (G + wd X)                      onnx.SGD
//   SGD+momentum: buf = mu buf + (1 - dampening) G' (buf = G' at the first
//                 step), X -= lr buf; nesterov: X -= lr (G' + mu buf), with
//                 G' = G + wd X                           onnx.Momentum
//                 (alpha = mu, beta = 1 - dampening, norm_coefficient = wd:
//                 ONNX skips beta at T = 0, which is PyTorch's first step)
//   Adam:         AdamW with decay 0 on G + wd X          onnx.AdamW
//   AdamW:                                                onnx.AdamW
//   Adagrad:      lr / (1 + (step - 1) lr_decay), sum += G'^2
//                                                         onnx.Adagrad
// ONNX Adam is not PyTorch's (epsilon is added before the bias correction),
// hence onnx.AdamW for both Adams.
//
//===----------------------------------------------------------------------===//
#include "pipec/Autodiff/LrSchedule.h"
#include "pipec/Autodiff/OnnxBuilder.h"
#include "dialects/pipe/PipeAttrNames.h"
#include "pipec/Transforms/Passes.h"

#include "mlir/IR/SymbolTable.h"

#include <cmath>

namespace mlir::pipec {
#define GEN_PASS_DEF_PIPEADDOPTIMIZER
#include "pipec/Transforms/Passes.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;
using namespace mlir::pipec::autodiff;

namespace {

/// One optimizer, resolved: every number set.
struct Optimizer {
  std::string kind; // sgd, momentum, nesterov, adam, adamw, adagrad, onnx-adam
  double lr = -1, momentum = 0, dampening = 0, weightDecay = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 0, lrDecay = 0;
  /// onnx-adam: the imported onnx.Adam's attributes, used as they are.
  DictionaryAttr onnxAttrs;
  /// The rate of each update: lr * f(updates done), one update a step.
  LrSchedule schedule;
  /// Global-norm gradient clipping's bound (0: off).
  double clipGradNorm = 0;

  SmallVector<StringRef> slots() const {
    if (kind == "momentum" || kind == "nesterov")
      return {"momentum_buffer"};
    if (kind == "adam" || kind == "adamw" || kind == "onnx-adam")
      return {"exp_avg", "exp_avg_sq"};
    if (kind == "adagrad")
      return {"sum"};
    return {};
  }
};

struct PipeAddOptimizerPass
    : public pipec::impl::PipeAddOptimizerBase<PipeAddOptimizerPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>(funcName);
    if (!step || step.isExternal()) {
      module.emitError() << "pipe-add-optimizer: no function @" << funcName
                         << " (run --pipe-autodiff first)";
      return signalPassFailure();
    }
    auto optimizer = resolve(module);
    if (failed(optimizer) || failed(rewrite(step, *optimizer)))
      return signalPassFailure();
  }

  /// The optimizer from the options, or else from @training_algorithm.
  FailureOr<Optimizer> resolve(ModuleOp module) {
    // The numbers given (-1: the kind's default) in their ranges.
    auto bad = [&](StringRef name, double v, bool ok) -> LogicalResult {
      if (ok)
        return success();
      return module.emitError() << "pipe-add-optimizer: " << name << "=" << v << " must be "
                                << (name == "lr"                            ? "a finite number > 0"
                                    : name == "momentum" || name == "beta1" ||
                                            name == "beta2"                 ? "in [0, 1)"
                                    : name == "dampening"                   ? "in [0, 1]"
                                                                            : "a finite number >= 0");
    };
    auto given = [](double v) { return v != -1.0; };
    if (failed(bad("lr", lr, !given(lr) || (std::isfinite(lr) && lr > 0))) ||
        failed(bad("momentum", momentum, !given(momentum) || (momentum >= 0 && momentum < 1))) ||
        failed(bad("dampening", dampening, dampening >= 0 && dampening <= 1)) ||
        failed(bad("weight-decay", weightDecay,
                   !given(weightDecay) || (std::isfinite(weightDecay) && weightDecay >= 0))) ||
        failed(bad("beta1", beta1, beta1 >= 0 && beta1 < 1)) ||
        failed(bad("beta2", beta2, beta2 >= 0 && beta2 < 1)) ||
        failed(bad("eps", eps, !given(eps) || (std::isfinite(eps) && eps >= 0))) ||
        failed(bad("lr-decay", lrDecay, std::isfinite(lrDecay) && lrDecay >= 0)))
      return failure();
    Optimizer opt;
    opt.kind = kind;
    opt.lr = lr;
    if (opt.kind.empty()) {
      if (failed(fromTrainingAlgorithm(module, opt)))
        return failure();
    } else {
      static const char *known[] = {"sgd", "momentum", "nesterov",
                                    "adam", "adamw", "adagrad"};
      if (!llvm::is_contained(known, opt.kind))
        return module.emitError()
               << "pipe-add-optimizer: unknown optimizer kind '" << opt.kind
               << "' (expected sgd, momentum, nesterov, adam, adamw or "
                  "adagrad)";
      opt.momentum = momentum < 0 ? (opt.kind == "sgd" ? 0.0 : 0.9) : momentum;
      opt.dampening = dampening;
      opt.weightDecay =
          weightDecay < 0 ? (opt.kind == "adamw" ? 0.01 : 0.0) : weightDecay;
      opt.beta1 = beta1;
      opt.beta2 = beta2;
      opt.eps = eps < 0 ? (opt.kind == "adagrad" ? 1e-10 : 1e-8) : eps;
      opt.lrDecay = lrDecay;
      if (opt.kind == "sgd" && opt.momentum > 0)
        opt.kind = "momentum";
      if (opt.lr < 0) {
        if (opt.kind == "adam" || opt.kind == "adamw")
          opt.lr = 1e-3;
        else if (opt.kind == "adagrad")
          opt.lr = 1e-2;
      }
    }
    if (opt.lr < 0)
      return module.emitError() << "pipe-add-optimizer: optimizer '" << opt.kind
                                << "' needs a learning rate (lr=...)";
    if (!(std::isfinite(clipGradNorm) && clipGradNorm >= 0))
      return module.emitError() << "pipe-add-optimizer: clip-grad-norm=" << clipGradNorm
                                << " must be a finite number > 0 (0: off)";
    opt.clipGradNorm = clipGradNorm;
    opt.schedule = LrSchedule::of(lrSchedule, warmupSteps, decaySteps, minLr);
    if (std::string bad = opt.schedule.check(opt.lr); !bad.empty())
      return module.emitError() << "pipe-add-optimizer: " << bad;
    if ((opt.kind == "momentum" || opt.kind == "nesterov") &&
        opt.momentum <= 0)
      return module.emitError()
             << "pipe-add-optimizer: " << opt.kind << " needs momentum > 0";
    if (opt.kind == "nesterov" && opt.dampening != 0)
      return module.emitError()
             << "pipe-add-optimizer: nesterov needs dampening = 0";
    return opt;
  }

  LogicalResult fromTrainingAlgorithm(ModuleOp module, Optimizer &opt) {
    auto algo = module.lookupSymbol<func::FuncOp>("training_algorithm");
    if (!algo)
      return module.emitError()
             << "pipe-add-optimizer: no optimizer kind given and no "
                "@training_algorithm to take one from";
    Operation *found = nullptr;
    algo.walk([&](Operation *op) {
      if (llvm::isa<onnx::MomentumOp, onnx::AdamOp, onnx::AdagradOp>(op) &&
          !found)
        found = op;
    });
    if (!found)
      return algo.emitError() << "has no Momentum, Adam or Adagrad op to take "
                                 "the optimizer from";
    if (auto m = llvm::dyn_cast<onnx::MomentumOp>(found)) {
      opt.kind = m.getMode() == "nesterov" ? "nesterov" : "momentum";
      opt.momentum = m.getAlpha().convertToDouble();
      opt.dampening =
          opt.kind == "nesterov" ? 0.0 : 1.0 - m.getBeta().convertToDouble();
      opt.weightDecay = m.getNormCoefficient().convertToDouble();
    } else if (auto a = llvm::dyn_cast<onnx::AdagradOp>(found)) {
      opt.kind = "adagrad";
      opt.lrDecay = a.getDecayFactor().convertToDouble();
      opt.eps = a.getEpsilon().convertToDouble();
      opt.weightDecay = a.getNormCoefficient().convertToDouble();
    } else {
      opt.kind = "onnx-adam";
      opt.onnxAttrs = found->getAttrDictionary();
    }
    if (opt.lr < 0)
      return found->emitError()
             << "takes its learning rate as an input: pass lr=... to "
                "pipe-add-optimizer";
    return success();
  }

  LogicalResult rewrite(func::FuncOp step, const Optimizer &opt) {
    MLIRContext *ctx = &getContext();
    // Which results are the loss and which the gradients of what.
    std::optional<unsigned> lossIndex;
    SmallVector<std::pair<unsigned, unsigned>> grads; // (result, param arg)
    for (unsigned r = 0; r < step.getNumResults(); ++r) {
      if (step.getResultAttr(r, pipe::attrs::kLoss))
        lossIndex = r;
      auto name = step.getResultAttrOfType<StringAttr>(r, pipe::attrs::kGrad);
      if (!name)
        continue;
      std::optional<unsigned> param;
      for (unsigned a = 0; a < step.getNumArguments(); ++a)
        if (step.getArgAttrOfType<StringAttr>(a, pipe::attrs::kParam) == name)
          param = a;
      if (!param)
        return step.emitError() << "result #" << r << " is the gradient of '"
                                << name.getValue()
                                << "' but no argument has that pipe.param";
      grads.push_back({r, *param});
    }
    if (!lossIndex || grads.empty())
      return step.emitError() << "@" << step.getSymName()
                              << " is not a training step: it needs a "
                                 "pipe.loss result and pipe.grad results";
    for (unsigned a = 0; a < step.getNumArguments(); ++a)
      if (step.getArgAttr(a, pipe::attrs::kState))
        return step.emitError() << "@" << step.getSymName()
                                << " has optimizer state already";

    // The state arguments: per parameter its slots, then the step counter.
    Block &body = step.getBody().front();
    auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
    OpBuilder b(ret);
    SmallVector<StringRef> slots = opt.slots();
    SmallVector<SmallVector<Value>> state;
    auto addArg = [&](Type type, StringRef name, Attribute init) {
      unsigned index = step.getNumArguments();
      auto attrs = b.getDictionaryAttr(
          {b.getNamedAttr(pipe::attrs::kInit, init),
           b.getNamedAttr(pipe::attrs::kState, b.getStringAttr(name))});
      (void)step.insertArgument(index, type, attrs, step.getLoc());
      return step.getArgument(index);
    };
    for (auto [result, param] : grads) {
      auto type = llvm::cast<RankedTensorType>(step.getArgument(param).getType());
      StringRef name =
          step.getArgAttrOfType<StringAttr>(param, pipe::attrs::kParam).getValue();
      auto zeros = DenseElementsAttr::get(
          type, b.getZeroAttr(type.getElementType()));
      state.emplace_back();
      for (StringRef slot : slots)
        state.back().push_back(
            addArg(type, (name + "." + slot).str(), zeros));
    }
    auto i64Scalar = RankedTensorType::get({}, b.getI64Type());
    Value count = addArg(i64Scalar, "step",
                         DenseElementsAttr::get(i64Scalar, b.getI64IntegerAttr(0)));

    // Stages (after pipe-assign-stages): an update and its constants live
    // with the parameter's owner stage; the shared step counter with the
    // first owner. Unpartitioned steps get no stages.
    auto ownerStage = [&](unsigned param) {
      return step.getArgAttr(param, pipe::attrs::kStage);
    };
    Attribute counterStage;
    for (auto [result, param] : grads)
      if (auto s = llvm::dyn_cast_if_present<IntegerAttr>(ownerStage(param)))
        if (!counterStage ||
            s.getInt() < llvm::cast<IntegerAttr>(counterStage).getInt())
          counterStage = s;
    Operation *lastBefore = ret->getPrevNode();
    auto stageNewOps = [&](Attribute stage) {
      Operation *first = lastBefore ? lastBefore->getNextNode()
                                    : &body.front();
      for (Operation *op = first; op && op != ret; op = op->getNextNode())
        if (stage)
          op->setAttr(pipe::attrs::kStage, stage);
      lastBefore = ret->getPrevNode();
    };

    OnnxBuilder ob(b, step.getLoc());
    Type f32 = b.getF32Type();
    Value sharedRate = scheduledRate(ob, count, opt.lr, opt.schedule);
    Value nextCount = ob.add(count, ob.scalarI64(1));
    stageNewOps(counterStage);

    // Global-norm clipping (torch.nn.utils.clip_grad_norm_): every gradient
    // times min(1, c / (||g|| + 1e-6)), ||g|| over all of them; a NaN norm
    // gives NaN, as torch.clamp does. The ops carry pipe.clip: the
    // micro-batched stages' checks pass over them, and pipe-split-stages
    // drops them (pipe.clip_grad_norm clips in the programs).
    Value clipCoef;
    if (clipGradNorm > 0) {
      Operation *beforeClip = ret->getPrevNode();
      Value total;
      for (auto [result, param] : grads) {
        Value g = ret.getOperand(result);
        if (!cast<RankedTensorType>(g.getType()).getElementType().isF32())
          return step.emitError() << "pipe-add-optimizer: clip-grad-norm needs f32 "
                                     "gradients; result #"
                                  << result << " is " << g.getType();
        Value sq = ob.create<onnx::ReduceSumOp>({ob.mul(g, g), ob.none()},
                                                {ob.i64Attr("keepdims", 0)});
        total = total ? ob.add(total, sq) : sq;
      }
      Value norm = ob.add(ob.create<onnx::SqrtOp>({total}), ob.scalar(f32, 1e-6));
      Value ratio = ob.div(ob.scalar(f32, clipGradNorm), norm);
      Value one = ob.scalar(f32, 1.0);
      clipCoef = ob.create<onnx::WhereOp>(
          {ob.create<onnx::GreaterOp>({ratio, one}), one, ratio});
      for (Operation *op = beforeClip ? beforeClip->getNextNode() : &body.front(); op != ret;
           op = op->getNextNode())
        op->setAttr(pipe::attrs::kClip, b.getUnitAttr());
      stageNewOps(counterStage);
    }

    SmallVector<Value> results{ret.getOperand(*lossIndex)};
    SmallVector<Attribute> resultAttrs{step.getResultAttrDict(*lossIndex)};
    SmallVector<Value> newState;
    SmallVector<Attribute> stateAttrs;
    auto update = [&](StringRef name) {
      return b.getDictionaryAttr(
          b.getNamedAttr(pipe::attrs::kUpdate, b.getStringAttr(name)));
    };
    for (auto [i, gp] : llvm::enumerate(grads)) {
      auto [result, param] = gp;
      Value x = step.getArgument(param);
      Value g = ret.getOperand(result);
      StringRef name =
          step.getArgAttrOfType<StringAttr>(param, pipe::attrs::kParam).getValue();
      ob.setLoc(x.getLoc());
      if (clipCoef) {
        g = ob.mul(g, clipCoef);
        g.getDefiningOp()->setAttr(pipe::attrs::kClip, b.getUnitAttr());
      }
      Value rate = sharedRate;
      if (counterStage && ownerStage(param) != counterStage)
        rate = scheduledRate(ob, count, opt.lr, opt.schedule);
      SmallVector<Value> outs;
      if (opt.kind == "sgd") {
        outs.push_back(ob.create<onnx::SGDOp>(
            {rate, x, g}, {ob.f32Attr("weight_decay", opt.weightDecay)}));
      } else if (opt.kind == "momentum" || opt.kind == "nesterov") {
        Operation *op = ob.build<onnx::MomentumOp>(
            {rate, count, x, g, state[i][0]},
            {ob.f32Attr("alpha", opt.momentum),
             ob.f32Attr("beta", 1.0 - opt.dampening),
             ob.attr("mode", b.getStringAttr(opt.kind == "nesterov"
                                                 ? "nesterov"
                                                 : "standard")),
             ob.f32Attr("norm_coefficient", opt.weightDecay)},
            2);
        outs.append(op->result_begin(), op->result_end());
      } else if (opt.kind == "adam" || opt.kind == "adamw") {
        double decoupled = 0.0;
        if (opt.kind == "adamw")
          decoupled = opt.weightDecay;
        else if (opt.weightDecay != 0)
          g = ob.add(g, ob.mul(x, ob.scalar(f32, opt.weightDecay)));
        Operation *op = ob.build<onnx::AdamWOp>(
            {rate, nextCount, x, g, state[i][0], state[i][1]},
            {ob.f32Attr("beta1", opt.beta1), ob.f32Attr("beta2", opt.beta2),
             ob.f32Attr("epsilon", opt.eps),
             ob.f32Attr("weight_decay", decoupled)},
            3);
        outs.append(op->result_begin(), op->result_end());
      } else if (opt.kind == "adagrad") {
        Operation *op = ob.build<onnx::AdagradOp>(
            {rate, count, x, g, state[i][0]},
            {ob.f32Attr("decay_factor", opt.lrDecay),
             ob.f32Attr("epsilon", opt.eps),
             ob.f32Attr("norm_coefficient", opt.weightDecay)},
            2);
        outs.append(op->result_begin(), op->result_end());
      } else { // onnx-adam
        Operation *op = ob.build<onnx::AdamOp>(
            {rate, count, x, g, state[i][0], state[i][1]},
            opt.onnxAttrs.getValue(), 3);
        outs.append(op->result_begin(), op->result_end());
      }
      stageNewOps(ownerStage(param));
      results.push_back(outs[0]);
      resultAttrs.push_back(update(name));
      for (auto [slot, value] : llvm::zip(slots, ArrayRef(outs).drop_front())) {
        newState.push_back(value);
        stateAttrs.push_back(update((name + "." + slot).str()));
      }
    }
    if (ob.failed())
      return failure();
    results.append(newState);
    resultAttrs.append(stateAttrs);
    // State the forward updates (BatchNormalization's running statistics).
    for (unsigned r = 0; r < step.getNumResults(); ++r)
      if (auto name =
              step.getResultAttrOfType<StringAttr>(r, pipe::attrs::kUpdate)) {
        results.push_back(ret.getOperand(r));
        resultAttrs.push_back(update(name.getValue()));
      }
    results.push_back(nextCount);
    resultAttrs.push_back(update("step"));

    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    step.setType(FunctionType::get(ctx, step.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    for (Attribute &a : resultAttrs)
      if (!a)
        a = b.getDictionaryAttr({});
    step.setAllResultAttrs(resultAttrs);
    recordOptimizer(step, opt);
    return success();
  }

  /// `pipe.optimizer` on the step: the optimizer as a dictionary in the
  /// form pipe-schedule reads (kind, lr and the hyper-parameters the kind
  /// uses), so that splitting the step into stages can hand the update to
  /// `pipe.update`.
  void recordOptimizer(func::FuncOp step, const Optimizer &opt) {
    Builder b(step.getContext());
    SmallVector<NamedAttribute> entries;
    auto num = [&](StringRef key, double v) {
      entries.push_back(b.getNamedAttr(key, b.getF64FloatAttr(v)));
    };
    entries.push_back(b.getNamedAttr("kind", b.getStringAttr(opt.kind)));
    num("lr", opt.lr);
    if (opt.kind == "momentum" || opt.kind == "nesterov") {
      num("momentum", opt.momentum);
      if (opt.kind == "momentum")
        num("dampening", opt.dampening);
    } else if (opt.kind == "adam" || opt.kind == "adamw") {
      num("beta1", opt.beta1);
      num("beta2", opt.beta2);
      num("epsilon", opt.eps);
    } else if (opt.kind == "adagrad") {
      num("epsilon", opt.eps);
      num("lr_decay", opt.lrDecay);
    }
    num("weight_decay", opt.weightDecay);
    if (!opt.schedule.isConstant())
      entries.push_back(b.getNamedAttr("lr_schedule", opt.schedule.toAttr(b, false)));
    if (opt.clipGradNorm > 0)
      num("clip_grad_norm", opt.clipGradNorm);
    step->setAttr(pipe::attrs::kOptimizer, b.getDictionaryAttr(entries));
  }
};
} // namespace
