//===- ScheduleStages.cpp - pipe-schedule: programs from stages -----------===//
//
// Turns the forward and backward pipe.stage ops of stages 0..p-1 into one
// pipe.program per device, ordered by the GPipe or 1F1B schedule of
// pipec/Analysis/Schedule.h. The generator's abstract transfers ("the
// activations of mb k to stage s+1") become one pipe.send/pipe.recv per
// tensor crossing the cut, in the same order on both ends.
//
//===----------------------------------------------------------------------===//
#include "pipec/Analysis/Schedule.h"
#include "pipec/Autodiff/LrSchedule.h"
#include "dialects/pipe/PipeAttrNames.h"
#include "pipec/Transforms/SchedulePasses.h"
#include "pipec/Transforms/WholeBatch.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <map>
#include <set>

namespace mlir::pipec {
#define GEN_PASS_DEF_PIPESCHEDULE
#include "pipec/Transforms/Passes.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;
namespace sched = mlir::pipec::schedule;

/// Bounds on what pipe-schedule builds (a program per device, a simulation
/// per micro-batch).
constexpr int64_t kMaxMicrobatches = 1 << 16;
constexpr int64_t kMaxDevices = 1 << 16;

namespace {

/// Where a non-weight argument of a stage function comes from.
struct ArgSource {
  enum Kind {
    /// A graph input, read with pipe.feed (`pipe.input`).
    Feed,
    /// A named value: for a forward, the result of stage s-1 with this name;
    /// for a backward, the forward's argument or result with this name.
    Named,
    /// The gradient of the forward result with this name, from stage s+1
    /// (backward arguments only).
    Grad,
  };
  Kind kind;
  std::string name;
  Type type;
  /// Feed: the graph input it reads (`name` is the key of the tables: the
  /// input, or for `pipe.step_input` a key of its own), and whether it
  /// reads the whole step's batch.
  std::string input;
  bool wholeStep = false;
};

/// The table key of a `pipe.step_input` feed of `input`.
static std::string stepInputKey(StringRef input) {
  return input.str() + ".whole_step";
}

/// The pipe.feed of `arg` for micro-batch `mb` (`base` + mb in a loop).
static Value createFeed(OpBuilder &b, Location loc, const ArgSource &arg, int64_t mb,
                        Value base) {
  auto feed = pipe::FeedOp::create(b, loc, arg.type, arg.input, mb, base);
  if (arg.wholeStep)
    feed->setAttr(pipe::attrs::kWholeStep, b.getUnitAttr());
  return feed;
}

struct Optimizer {
  pipe::OptimizerKind kind = pipe::OptimizerKind::SGD;
  double lr = 0;
  std::optional<double> momentum, dampening, beta1, beta2, epsilon,
      weightDecay, gradScale;
  /// Global-norm clipping of the step's gradients (pipe.clip_grad_norm).
  std::optional<double> clipGradNorm;
  /// The pipe.optimizer's lr_schedule (constant when it has none).
  LrSchedule schedule;
  /// Where the optimizer was given (the module for pass options): its
  /// errors are reported there.
  Operation *holder = nullptr;
};

/// One stage: its two functions and how their values connect.
struct Stage {
  int64_t index = 0;
  pipe::StageOp forward, backward;
  int64_t params = 0;
  SmallVector<Attribute> paramNames, paramTypes;

  SmallVector<ArgSource> forwardArgs;  // non-weight arguments
  SmallVector<std::string> resultNames; // "" where a result has no name
  SmallVector<Type> resultTypes;        // of the forward, as analysed
  SmallVector<bool> resultIsLoss;
  SmallVector<ArgSource> backwardArgs; // non-weight arguments
  /// Names of the forward arguments whose gradients the backward returns,
  /// in result order.
  SmallVector<std::string> backwardGradResults;

  /// Types of the forward's values by name: fed inputs, and named
  /// arguments and results.
  llvm::StringMap<Type> fedTypes, namedTypes;

  /// The tensors crossing the cuts, each list in the order of stage s's
  /// (for `activationsIn`, `gradsOut`) or s+1's (`activationsOut`,
  /// `gradsIn`) forward arguments, so both ends agree.
  SmallVector<std::string> activationsIn, activationsOut, gradsIn, gradsOut;

  std::optional<Optimizer> optimizer;

  /// A whole-batch stage (--batchnorm full-batch): its forward and backward
  /// run once per step on all M micro-batches. Which ports of its functions
  /// carry one micro-batch (M copies after expandWholeBatchStage): forward
  /// inputs, forward results, backward inputs, backward input gradients.
  bool whole = false;
  SmallVector<bool> fwdInPerMb, fwdOutPerMb, bwdInPerMb, bwdOutPerMb;
};

/// The string value of argument or result attribute `key`, or "".
static std::string stringAttr(DictionaryAttr attrs, StringRef key) {
  if (!attrs)
    return "";
  if (auto s = attrs.getAs<StringAttr>(key))
    return s.str();
  return "";
}

/// Gives stage function `op` M copies of each port that carries one
/// micro-batch (`perMbIn` over the inputs the instruction passes,
/// `perMbOut` over the leading results), and wires them: a
/// pipe.microbatch_concat Concat takes copy k as operand k, result k of a
/// pipe.microbatch_split Split is copy k, and the ops between
/// per-micro-batch values and per-micro-batch results (a relayed value, a
/// relayed gradient added to the stage's own) are cloned per micro-batch.
/// Per-micro-batch values that whole-batch ops read without a marker are
/// not batched (the same for every micro-batch): copy 0 is as good as any.
static LogicalResult expandWholeBatchFunction(pipe::StageOp op,
                                              ArrayRef<bool> perMbIn,
                                              ArrayRef<bool> perMbOut,
                                              int64_t m) {
  MLIRContext *ctx = op.getContext();
  Block &block = op.getBody().front();
  int64_t params = op.getParams();
  unsigned numArgs = block.getNumArguments();
  SmallVector<DictionaryAttr> oldArgAttrs, oldResAttrs;
  for (unsigned i = 0; i < numArgs; ++i)
    oldArgAttrs.push_back(op.getArgAttrDict(i));
  for (unsigned i = 0; i < op.getResultTypes().size(); ++i)
    oldResAttrs.push_back(op.getResultAttrDict(i));

  llvm::DenseMap<Value, SmallVector<Value>> copies;
  SmallVector<DictionaryAttr> argAttrs;
  for (unsigned i = 0; i < numArgs; ++i) {
    argAttrs.push_back(oldArgAttrs[i]);
    int64_t input = int64_t(i) - params;
    if (input >= 0 && input < int64_t(perMbIn.size()) && perMbIn[input])
      for (int64_t k = 1; k < m; ++k)
        argAttrs.push_back(oldArgAttrs[i]);
  }
  for (int64_t i = int64_t(perMbIn.size()) - 1; i >= 0; --i) {
    if (!perMbIn[i])
      continue;
    unsigned index = unsigned(params + i);
    BlockArgument a = block.getArgument(index);
    SmallVector<Value> cs = {a};
    for (int64_t k = 1; k < m; ++k)
      cs.push_back(block.insertArgument(index + unsigned(k), a.getType(),
                                        a.getLoc()));
    copies[a] = cs;
  }

  auto ret = llvm::cast<pipe::ReturnOp>(block.getTerminator());
  // The ops that may run per micro-batch: those a per-micro-batch result
  // depends on without a Split marker in between.
  llvm::SmallPtrSet<Operation *, 16> cone;
  SmallVector<Value> work;
  for (auto [i, v] : llvm::enumerate(ret.getOperands()))
    if (i < perMbOut.size() && perMbOut[i])
      work.push_back(v);
  while (!work.empty()) {
    Value v = work.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (!def || def->hasAttr(wholebatch::kSplit) ||
        def->hasAttr(wholebatch::kConcat) || !cone.insert(def).second)
      continue;
    for (Value operand : def->getOperands())
      work.push_back(operand);
  }

  for (Operation &o : llvm::make_early_inc_range(block.without_terminator())) {
    if (o.hasAttr(wholebatch::kConcat)) {
      auto it = copies.find(o.getOperand(0));
      // A splat constant (a zero gradient contribution folded by
      // pipe-split-stages) is every micro-batch's.
      if (it == copies.end() && int64_t(o.getNumOperands()) == m)
        if (auto c = o.getOperand(0).getDefiningOp<onnx::ConstantOp>())
          if (auto dense = llvm::dyn_cast_if_present<DenseElementsAttr>(
                  c->getAttr("value"));
              dense && dense.isSplat()) {
            o.removeAttr(wholebatch::kConcat);
            continue;
          }
      if (it == copies.end() || int64_t(o.getNumOperands()) != m)
        return o.emitOpError()
               << "in whole-batch stage @" << op.getSymName()
               << " concatenates a value that is not one micro-batch's";
      for (int64_t k = 0; k < m; ++k)
        o.setOperand(unsigned(k), it->second[k]);
      o.removeAttr(wholebatch::kConcat);
      continue;
    }
    if (o.hasAttr(wholebatch::kSplit)) {
      if (int64_t(o.getNumResults()) != m)
        return o.emitOpError() << "splits into " << o.getNumResults()
                               << " parts, not M = " << m;
      copies[o.getResult(0)] = SmallVector<Value>(o.getResults());
      o.removeAttr(wholebatch::kSplit);
      continue;
    }
    if (!cone.contains(&o) || llvm::none_of(o.getOperands(), [&](Value v) {
          return copies.count(v) != 0;
        }))
      continue;
    SmallVector<SmallVector<Value>> resultCopies(o.getNumResults());
    for (unsigned r = 0; r < o.getNumResults(); ++r)
      resultCopies[r].push_back(o.getResult(r));
    OpBuilder b(ctx);
    Operation *last = &o;
    for (int64_t k = 1; k < m; ++k) {
      IRMapping map;
      for (Value v : o.getOperands())
        if (auto it = copies.find(v); it != copies.end())
          map.map(v, it->second[k]);
      b.setInsertionPointAfter(last);
      last = b.clone(o, map);
      for (unsigned r = 0; r < o.getNumResults(); ++r)
        resultCopies[r].push_back(last->getResult(r));
    }
    for (unsigned r = 0; r < o.getNumResults(); ++r)
      copies[o.getResult(r)] = resultCopies[r];
  }

  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resAttrs;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    results.push_back(v);
    resAttrs.push_back(oldResAttrs[i]);
    if (i >= perMbOut.size() || !perMbOut[i])
      continue;
    auto it = copies.find(v);
    for (int64_t k = 1; k < m; ++k) {
      results.push_back(it != copies.end() ? it->second[k] : v);
      resAttrs.push_back(oldResAttrs[i]);
    }
  }
  ret->setOperands(results);
  SmallVector<Type> argTypes(block.getArgumentTypes());
  SmallVector<Type> resultTypes(ValueRange(results).getTypes());
  op.setFunctionTypeAttr(
      TypeAttr::get(FunctionType::get(ctx, argTypes, resultTypes)));
  op.setAllArgAttrs(argAttrs);
  op.setAllResultAttrs(resAttrs);
  op->setAttr(wholebatch::kWholeBatch, UnitAttr::get(ctx));
  return success();
}

/// Which ports of a whole-batch stage carry one micro-batch, and its
/// functions expanded to M copies of those.
static LogicalResult expandWholeBatchStage(Stage &stage, int64_t m) {
  llvm::StringSet<> perMbNames;
  for (const ArgSource &arg : stage.forwardArgs) {
    stage.fwdInPerMb.push_back(true);
    if (arg.kind == ArgSource::Named)
      perMbNames.insert(arg.name);
  }
  for (const std::string &name : stage.resultNames) {
    bool sent = !name.empty() && llvm::is_contained(stage.activationsOut, name);
    stage.fwdOutPerMb.push_back(sent);
    if (sent)
      perMbNames.insert(name);
  }
  for (const ArgSource &arg : stage.backwardArgs)
    stage.bwdInPerMb.push_back(arg.kind != ArgSource::Named ||
                               perMbNames.contains(arg.name));
  stage.bwdOutPerMb.assign(stage.backwardGradResults.size(), true);
  if (failed(expandWholeBatchFunction(stage.forward, stage.fwdInPerMb,
                                      stage.fwdOutPerMb, m)) ||
      failed(expandWholeBatchFunction(stage.backward, stage.bwdInPerMb,
                                      stage.bwdOutPerMb, m)))
    return failure();
  stage.whole = true;
  return success();
}

/// A whole-batch stage's GPipe program: every activation received, the M
/// forwards (run as one), every activation sent; the same for the
/// gradients; then the update.
static sched::Program wholeBatchOrder(const sched::Program &program) {
  sched::Program recvAct, fwd, sendAct, recvGrad, bwd, sendGrad, rest;
  for (const sched::Instr &instr : program) {
    bool act = instr.tag == sched::kActivationTag;
    switch (instr.kind) {
    case sched::InstrKind::Recv:
      (act ? recvAct : recvGrad).push_back(instr);
      break;
    case sched::InstrKind::Send:
      (act ? sendAct : sendGrad).push_back(instr);
      break;
    case sched::InstrKind::Forward:
      fwd.push_back(instr);
      break;
    case sched::InstrKind::Backward:
      bwd.push_back(instr);
      break;
    default:
      rest.push_back(instr);
      break;
    }
  }
  sched::Program out;
  for (sched::Program *part :
       {&recvAct, &fwd, &sendAct, &recvGrad, &bwd, &sendGrad, &rest})
    out.insert(out.end(), part->begin(), part->end());
  return out;
}

struct PipeSchedulePass : public pipec::impl::PipeScheduleBase<PipeSchedulePass> {
  using Base::Base;

  void runOnOperation() override;

private:
  LogicalResult collectStages(ModuleOp module, std::vector<Stage> &stages);
  LogicalResult analyzeStage(Stage &stage);
  LogicalResult connectStages(MutableArrayRef<Stage> stages);
  FailureOr<Optimizer> optimizerFromOptions(ModuleOp module);
  FailureOr<Optimizer> optimizerFromAttr(Operation *holder,
                                         DictionaryAttr dict);
  LogicalResult buildProgram(OpBuilder &b, Stage &stage,
                             const sched::Program &program,
                             pipe::ScheduleKind kind, int64_t peakInFlight);

  void replicatePipelines(ModuleOp module, int64_t p);

  /// The no-flush method being built (PipeDream, 2BW, SpecTrain,
  /// PipeMare), if any.
  enum class Method { PipeDream, TwoBW, SpecTrain, PipeMare };
  struct NoFlush {
    sched::UpdateRule rule = sched::UpdateRule::PerMicroBatch;
    bool verticalSync = false;
    Method method = Method::PipeDream;
    int64_t stages = 1;
    /// How micro-batch losses make a step's loss (pipe.loss_scale: 1/M for
    /// a mean): a per-micro-batch update undoes it on the gradient.
    double lossScale = 1.0;
    /// PipeMare: T1's K (0: off), T2's γ (< 0: off).
    int64_t lrWarmup = 0;
    double discrepancy = -1.0;
  };
  std::optional<NoFlush> noFlush;
  /// pipe.clip_grad_norm's bound (every stage's optimizer agrees) and the
  /// pipeline's stage count: every device of the pipeline clips together.
  std::optional<double> clipNorm;
  int64_t pipelineStages = 1;
};
} // namespace

LogicalResult PipeSchedulePass::collectStages(ModuleOp module,
                                              std::vector<Stage> &stages) {
  std::map<int64_t, Stage> byIndex;
  for (auto op : module.getOps<pipe::StageOp>()) {
    Stage &stage = byIndex[op.getStage()];
    stage.index = op.getStage();
    pipe::StageOp *slot = nullptr;
    if (op.getPhase() == pipe::Phase::Forward)
      slot = &stage.forward;
    else if (op.getPhase() == pipe::Phase::Backward)
      slot = &stage.backward;
    else
      return op.emitError()
             << "pipe-schedule (" << kind << ") schedules forward and full "
             << "backward stages, not " << pipe::stringifyPhase(op.getPhase());
    if (*slot) {
      InFlightDiagnostic diag = op.emitError()
                                << "a second "
                                << pipe::stringifyPhase(op.getPhase())
                                << " function for stage " << op.getStage();
      diag.attachNote(slot->getLoc()) << "the first one";
      return diag;
    }
    *slot = op;
  }
  if (byIndex.empty())
    return module.emitError() << "pipe-schedule: no pipe.stage to schedule";
  int64_t expected = 0;
  for (auto &[index, stage] : byIndex) {
    if (index != expected)
      return module.emitError()
             << "pipe-schedule: stage " << expected
             << " has no pipe.stage, but stage " << index << " has";
    pipe::StageOp present = stage.forward ? stage.forward : stage.backward;
    if (!stage.forward || !stage.backward)
      return present.emitError()
             << "stage " << index << " has no "
             << (stage.forward ? "backward" : "forward") << " function";
    stages.push_back(stage);
    ++expected;
  }
  return success();
}

LogicalResult PipeSchedulePass::analyzeStage(Stage &stage) {
  pipe::StageOp fwd = stage.forward, bwd = stage.backward;
  stage.params = fwd.getParams();
  if (bwd.getParams() != stage.params ||
      fwd.getParamTypes() != bwd.getParamTypes())
    return bwd.emitError() << "the weights of backward @" << bwd.getSymName()
                           << " are not those of forward @"
                           << fwd.getSymName();

  // The trailing state arguments are the device's, not the schedule's.
  ArrayRef<Type> argTypes =
      fwd.getArgumentTypes().drop_back(fwd.getNumStateArgs());
  for (unsigned i = 0; i < argTypes.size(); ++i) {
    DictionaryAttr attrs = fwd.getArgAttrDict(i);
    if (int64_t(i) < stage.params) {
      std::string name = stringAttr(attrs, pipe::attrs::kParam);
      if (name.empty())
        return fwd.emitError() << "weight argument " << i << " of @"
                               << fwd.getSymName()
                               << " has no pipe.param name";
      stage.paramNames.push_back(StringAttr::get(fwd.getContext(), name));
      stage.paramTypes.push_back(TypeAttr::get(argTypes[i]));
      continue;
    }
    ArgSource source;
    source.type = argTypes[i];
    std::string input = stringAttr(attrs, pipe::attrs::kInput);
    std::string stepInput = stringAttr(attrs, pipe::attrs::kStepInput);
    if (!input.empty() || !stepInput.empty()) {
      source.kind = ArgSource::Feed;
      source.input = input.empty() ? stepInput : input;
      source.wholeStep = input.empty();
      source.name = source.wholeStep ? stepInputKey(stepInput) : input;
      if (!stage.fedTypes.try_emplace(source.name, source.type).second)
        return fwd.emitError() << "@" << fwd.getSymName()
                               << " reads graph input '" << source.input << "' twice";
    } else if (std::string name = stringAttr(attrs, pipe::attrs::kName);
               !name.empty()) {
      source.kind = ArgSource::Named;
      source.name = name;
      if (!stage.namedTypes.try_emplace(name, source.type).second)
        return fwd.emitError() << "@" << fwd.getSymName()
                               << " has two values named '" << name << "'";
    } else {
      return fwd.emitError() << "argument " << i << " of @" << fwd.getSymName()
                             << " has neither pipe.input nor pipe.name: "
                                "pipe-schedule cannot tell where it comes from";
    }
    stage.forwardArgs.push_back(source);
  }

  ArrayRef<Type> resultTypes = fwd.getResultTypes();
  for (unsigned i = 0; i < resultTypes.size(); ++i) {
    DictionaryAttr attrs = fwd.getResultAttrDict(i);
    std::string name = stringAttr(attrs, pipe::attrs::kName);
    if (!name.empty() &&
        !stage.namedTypes.try_emplace(name, resultTypes[i]).second)
      return fwd.emitError() << "@" << fwd.getSymName()
                             << " has two values named '" << name << "'";
    stage.resultNames.push_back(name);
    stage.resultTypes.push_back(resultTypes[i]);
    stage.resultIsLoss.push_back(attrs && attrs.contains(pipe::attrs::kLoss));
  }

  ArrayRef<Type> bwdArgTypes =
      bwd.getArgumentTypes().drop_back(bwd.getNumStateArgs());
  for (unsigned i = stage.params; i < bwdArgTypes.size(); ++i) {
    DictionaryAttr attrs = bwd.getArgAttrDict(i);
    ArgSource source;
    source.type = bwdArgTypes[i];
    Type expected;
    if (std::string grad = stringAttr(attrs, pipe::attrs::kGrad); !grad.empty()) {
      source.kind = ArgSource::Grad;
      source.name = grad;
      auto result = llvm::find(stage.resultNames, grad);
      if (result == stage.resultNames.end())
        return bwd.emitError() << "argument " << i << " of @"
                               << bwd.getSymName() << " is the gradient of '"
                               << grad << "', which forward @"
                               << fwd.getSymName() << " does not return";
      expected = resultTypes[result - stage.resultNames.begin()];
    } else if (std::string input = stringAttr(attrs, pipe::attrs::kInput),
               stepInput = stringAttr(attrs, pipe::attrs::kStepInput);
               !input.empty() || !stepInput.empty()) {
      source.kind = ArgSource::Feed;
      source.input = input.empty() ? stepInput : input;
      source.wholeStep = input.empty();
      source.name = source.wholeStep ? stepInputKey(stepInput) : input;
      expected = stage.fedTypes.lookup(source.name);
      if (!expected)
        return bwd.emitError() << "argument " << i << " of @"
                               << bwd.getSymName() << " is graph input '"
                               << source.input << "', which forward @"
                               << fwd.getSymName() << " does not read";
    } else if (std::string name = stringAttr(attrs, pipe::attrs::kName);
               !name.empty()) {
      source.kind = ArgSource::Named;
      source.name = name;
      expected = stage.namedTypes.lookup(name);
      if (!expected)
        return bwd.emitError() << "argument " << i << " of @"
                               << bwd.getSymName() << " is '" << name
                               << "', which forward @" << fwd.getSymName()
                               << " neither takes nor returns";
    } else {
      return bwd.emitError() << "argument " << i << " of @" << bwd.getSymName()
                             << " has no pipe.name, pipe.input or pipe.grad: "
                                "pipe-schedule cannot tell where it comes from";
    }
    if (expected != source.type)
      return bwd.emitError() << "argument " << i << " of @" << bwd.getSymName()
                             << " is " << source.type << ", but its value '"
                             << source.name << "' is " << expected;
    stage.backwardArgs.push_back(source);
  }

  ArrayRef<Type> bwdResults = bwd.getResultTypes();
  int64_t gradResults = int64_t(bwdResults.size()) - stage.params;
  for (int64_t i = 0; i < gradResults; ++i) {
    std::string grad = stringAttr(bwd.getResultAttrDict(i), pipe::attrs::kGrad);
    const ArgSource *arg = llvm::find_if(stage.forwardArgs, [&](auto &a) {
      return a.kind == ArgSource::Named && a.name == grad;
    });
    if (grad.empty() || arg == stage.forwardArgs.end())
      return bwd.emitError()
             << "result " << i << " of @" << bwd.getSymName()
             << " must be marked pipe.grad = \"<name>\" with a value that "
                "forward @"
             << fwd.getSymName() << " receives from the previous stage";
    if (arg->type != bwdResults[i])
      return bwd.emitError() << "result " << i << " of @" << bwd.getSymName()
                             << " is " << bwdResults[i]
                             << ", but the gradient of '" << grad
                             << "' must be " << arg->type;
    if (llvm::is_contained(stage.backwardGradResults, grad))
      return bwd.emitError() << "@" << bwd.getSymName()
                             << " returns the gradient of '" << grad
                             << "' twice";
    stage.backwardGradResults.push_back(grad);
  }
  return success();
}

LogicalResult PipeSchedulePass::connectStages(MutableArrayRef<Stage> stages) {
  for (Stage &stage : stages) {
    for (const ArgSource &arg : stage.forwardArgs)
      if (arg.kind == ArgSource::Named)
        stage.activationsIn.push_back(arg.name);
    if (stage.index == 0 && !stage.activationsIn.empty())
      return stage.forward.emitError()
             << "@" << stage.forward.getSymName() << " takes '"
             << stage.activationsIn.front()
             << "', but no stage precedes stage 0 to send it";
  }
  for (size_t s = 1; s < stages.size(); ++s) {
    Stage &prev = stages[s - 1], &cur = stages[s];
    for (const std::string &name : cur.activationsIn) {
      auto result = llvm::find(prev.resultNames, name);
      if (result == prev.resultNames.end())
        return cur.forward.emitError()
               << "@" << cur.forward.getSymName() << " takes '" << name
               << "', which forward @" << prev.forward.getSymName()
               << " of stage " << prev.index
               << " does not return (only neighbouring stages exchange "
                  "activations)";
      Type sent = prev.forward.getResultTypes()[result - prev.resultNames.begin()];
      Type received = cur.namedTypes.lookup(name);
      if (sent != received)
        return cur.forward.emitError()
               << "@" << cur.forward.getSymName() << " takes '" << name
               << "' as " << received << ", but @"
               << prev.forward.getSymName() << " returns " << sent;
    }
    prev.activationsOut = cur.activationsIn;
  }
  for (Stage &stage : stages) {
    // Gradients travel in the order of the activations they belong to.
    for (const std::string &name : stage.activationsOut)
      if (llvm::any_of(stage.backwardArgs, [&](const ArgSource &a) {
            return a.kind == ArgSource::Grad && a.name == name;
          }))
        stage.gradsIn.push_back(name);
    for (const ArgSource &arg : stage.backwardArgs)
      if (arg.kind == ArgSource::Grad && !llvm::is_contained(stage.gradsIn, arg.name))
        return stage.backward.emitError()
               << "@" << stage.backward.getSymName() << " takes the gradient of '"
               << arg.name << "', which stage " << stage.index
               << " does not send to a next stage";
    for (const std::string &name : stage.activationsIn)
      if (llvm::is_contained(stage.backwardGradResults, name))
        stage.gradsOut.push_back(name);
  }
  for (size_t s = 1; s < stages.size(); ++s) {
    Stage &prev = stages[s - 1], &cur = stages[s];
    if (prev.gradsIn == cur.gradsOut)
      continue;
    for (const std::string &name : prev.gradsIn)
      if (!llvm::is_contained(cur.gradsOut, name))
        return prev.backward.emitError()
               << "@" << prev.backward.getSymName() << " takes the gradient of '"
               << name << "', which backward @" << cur.backward.getSymName()
               << " of stage " << cur.index << " does not return";
    for (const std::string &name : cur.gradsOut)
      if (!llvm::is_contained(prev.gradsIn, name))
        return cur.backward.emitError()
               << "@" << cur.backward.getSymName()
               << " returns the gradient of '" << name << "', which backward @"
               << prev.backward.getSymName() << " of stage " << prev.index
               << " does not take";
  }
  return success();
}

static void setAdamDefaults(Optimizer &opt) {
  using K = pipe::OptimizerKind;
  if (opt.kind == K::Adam || opt.kind == K::AdamW) {
    opt.beta1 = opt.beta1.value_or(0.9);
    opt.beta2 = opt.beta2.value_or(0.999);
    opt.epsilon = opt.epsilon.value_or(1e-8);
  } else if (opt.kind == K::Adagrad) {
    opt.epsilon = opt.epsilon.value_or(1e-10);
  }
}

FailureOr<Optimizer> PipeSchedulePass::optimizerFromOptions(ModuleOp module) {
  Optimizer opt;
  opt.holder = module;
  std::optional<pipe::OptimizerKind> parsed =
      pipe::symbolizeOptimizerKind(optimizer);
  if (!parsed)
    return module.emitError() << "pipe-schedule: unknown optimizer '"
                              << optimizer << "'";
  opt.kind = *parsed;
  if (!(lr > 0))
    return module.emitError()
           << "pipe-schedule: optimizer=" << optimizer << " needs lr > 0";
  opt.lr = lr;
  // -1 (the options' default) is "not given"; any other value must be in
  // the hyper-parameter's range.
  struct Range {
    const char *name;
    double v;
    bool ok;
    const char *what;
  };
  for (const Range &r : {
           Range{"momentum", momentum, momentum >= 0 && momentum < 1, "in [0, 1)"},
           Range{"dampening", dampening, dampening >= 0 && dampening <= 1, "in [0, 1]"},
           Range{"beta1", beta1, beta1 >= 0 && beta1 < 1, "in [0, 1)"},
           Range{"beta2", beta2, beta2 >= 0 && beta2 < 1, "in [0, 1)"},
           Range{"epsilon", epsilon, std::isfinite(epsilon) && epsilon >= 0, "a finite number >= 0"},
           Range{"weight-decay", weightDecay, std::isfinite(weightDecay) && weightDecay >= 0,
                 "a finite number >= 0"},
           Range{"grad-scale", gradScale, std::isfinite(gradScale) && gradScale >= 0,
                 "a finite number >= 0"}})
    if (r.v != -1.0 && !r.ok)
      return module.emitError() << "pipe-schedule: " << r.name << "=" << r.v << " must be "
                                << r.what;
  if (!std::isfinite(lr.getValue()))
    return module.emitError() << "pipe-schedule: lr=" << lr.getValue()
                              << " must be a finite number > 0";
  auto given = [](double v) -> std::optional<double> {
    if (v < 0)
      return std::nullopt;
    return v;
  };
  opt.momentum = given(momentum);
  opt.dampening = given(dampening);
  opt.beta1 = given(beta1);
  opt.beta2 = given(beta2);
  opt.epsilon = given(epsilon);
  opt.weightDecay = given(weightDecay);
  opt.gradScale = given(gradScale);
  if (!(std::isfinite(clipGradNorm) && clipGradNorm >= 0))
    return module.emitError() << "pipe-schedule: clip-grad-norm=" << clipGradNorm
                              << " must be a finite number > 0 (0: off)";
  if (clipGradNorm > 0)
    opt.clipGradNorm = clipGradNorm;
  opt.schedule = LrSchedule::of(lrSchedule, warmupSteps, decaySteps, minLr);
  if (std::string bad = opt.schedule.check(opt.lr); !bad.empty())
    return module.emitError() << "pipe-schedule: " << bad;
  setAdamDefaults(opt);
  return opt;
}

FailureOr<Optimizer> PipeSchedulePass::optimizerFromAttr(Operation *holder,
                                                         DictionaryAttr dict) {
  Optimizer opt;
  opt.holder = holder;
  bool hasKind = false, hasLr = false;
  for (NamedAttribute entry : dict) {
    StringRef key = entry.getName().getValue();
    if (key == "lr_schedule") {
      auto scheduleDict = dyn_cast<DictionaryAttr>(entry.getValue());
      std::string error = scheduleDict ? "" : "'lr_schedule' must be a dictionary";
      if (scheduleDict)
        opt.schedule = LrSchedule::fromAttr(scheduleDict, error);
      if (!error.empty())
        return holder->emitError() << "pipe.optimizer: " << error;
      continue;
    }
    if (key == "kind") {
      auto name = dyn_cast<StringAttr>(entry.getValue());
      std::optional<pipe::OptimizerKind> parsed =
          name ? pipe::symbolizeOptimizerKind(name.getValue()) : std::nullopt;
      if (!parsed)
        return holder->emitError()
               << "pipe.optimizer: 'kind' must be one of sgd, momentum, "
                  "nesterov, adam, adamw, adagrad; got "
               << entry.getValue();
      opt.kind = *parsed;
      hasKind = true;
      continue;
    }
    std::optional<double> value;
    if (auto f = dyn_cast<FloatAttr>(entry.getValue()))
      value = f.getValueAsDouble();
    else if (auto i = dyn_cast<IntegerAttr>(entry.getValue()))
      value = double(i.getValue().getSExtValue());
    if (!value)
      return holder->emitError() << "pipe.optimizer: '" << key
                                 << "' must be a number";
    if (key == "lr") {
      opt.lr = *value;
      hasLr = true;
    } else if (key == "momentum") {
      opt.momentum = value;
    } else if (key == "dampening") {
      opt.dampening = value;
    } else if (key == "beta1") {
      opt.beta1 = value;
    } else if (key == "beta2") {
      opt.beta2 = value;
    } else if (key == "epsilon") {
      opt.epsilon = value;
    } else if (key == "weight_decay") {
      opt.weightDecay = value;
    } else if (key == "grad_scale") {
      opt.gradScale = value;
    } else if (key == "clip_grad_norm") {
      if (!(std::isfinite(*value) && *value > 0))
        return holder->emitError() << "pipe.optimizer: 'clip_grad_norm' must be a "
                                      "finite number > 0, not "
                                   << *value;
      opt.clipGradNorm = value;
    } else {
      return holder->emitError()
             << "pipe.optimizer: unknown key '" << key
             << "' (kind, lr, momentum, dampening, beta1, beta2, epsilon, "
                "weight_decay, grad_scale, lr_schedule, clip_grad_norm)";
    }
  }
  if (!hasKind || !hasLr)
    return holder->emitError() << "pipe.optimizer needs 'kind' and 'lr'";
  if (std::string bad = opt.schedule.check(opt.lr); !bad.empty())
    return holder->emitError() << "pipe.optimizer: lr_schedule: " << bad;
  setAdamDefaults(opt);
  return opt;
}

//===----------------------------------------------------------------------===//
// Rolling a device's instruction list into micro-batch loops
//===----------------------------------------------------------------------===//

namespace {
/// A run of a device's instruction list: `trips` repetitions of
/// `length` instructions starting at `begin`, each repetition the previous
/// one with every micro-batch index one higher. trips == 0 marks a
/// straight-line run (no loop).
struct Segment {
  size_t begin = 0, length = 0;
  int64_t trips = 0;
  /// The loop's first index: the smallest micro-batch of the first
  /// repetition, so that every offset is >= 0.
  int64_t lower = 0;
  bool isLoop() const { return trips > 0; }
};

/// Whether `b` is `a` with its micro-batch `shift` higher.
bool isShifted(const sched::Instr &a, const sched::Instr &b, int64_t shift) {
  if (a.kind != b.kind || a.stage != b.stage || a.peer != b.peer ||
      a.tag != b.tag || a.payload != b.payload)
    return false;
  if (!a.hasMb() || !b.hasMb())
    return a.mb == b.mb && shift == 0;
  return b.mb == a.mb + shift;
}

/// Greedy rolling: at each position, the period that covers the most
/// instructions with at least two repetitions (ties: the shorter period);
/// else one straight-line instruction. Expanding the segments gives back
/// `program` exactly.
std::vector<Segment> rollProgram(const sched::Program &program) {
  constexpr size_t kMaxPeriod = 32;
  std::vector<Segment> segments;
  size_t n = program.size(), i = 0;
  while (i < n) {
    size_t bestLength = 0;
    int64_t bestTrips = 0;
    for (size_t length = 1; length <= kMaxPeriod && i + 2 * length <= n;
         ++length) {
      // Instructions without a micro-batch (update) never repeat.
      bool hasMb = true;
      for (size_t t = 0; t < length; ++t)
        hasMb &= program[i + t].hasMb();
      if (!hasMb)
        break;
      int64_t trips = 1;
      while (i + (trips + 1) * length <= n) {
        bool same = true;
        for (size_t t = 0; t < length && same; ++t)
          same = isShifted(program[i + t], program[i + trips * length + t],
                           trips);
        if (!same)
          break;
        ++trips;
      }
      if (trips >= 2 && trips * int64_t(length) > bestTrips * int64_t(bestLength)) {
        bestLength = length;
        bestTrips = trips;
      }
    }
    if (bestTrips >= 2) {
      Segment loop{i, bestLength, bestTrips, 0};
      loop.lower = program[i].mb;
      for (size_t t = 0; t < bestLength; ++t)
        loop.lower = std::min(loop.lower, program[i + t].mb);
      segments.push_back(loop);
      i += bestLength * bestTrips;
      continue;
    }
    if (segments.empty() || segments.back().isLoop())
      segments.push_back({i, 0, 0, 0});
    segments.back().length++;
    ++i;
  }
  return segments;
}

/// What a value is, for one micro-batch of one stage.
/// Fed: a graph input a no-flush program's forward feeds and its backward
/// (possibly in a later step) reads back from an activation buffer.
enum class ValueKind { Named, GradIn, GradOut, Fed };

struct ValueKey {
  ValueKind kind;
  std::string name;
  bool operator<(const ValueKey &o) const {
    return std::tie(kind, name) < std::tie(o.kind, o.name);
  }
};

/// Where instruction `index` of the flat list runs: in the straight-line
/// part of the program (`segment` -1) or in iteration `trip` of a loop; and
/// the static instruction (`site`) that builds it.
struct Place {
  int64_t segment = -1;
  int64_t trip = 0;
  size_t site = 0;
  bool sameInstance(const Place &o) const {
    return segment == o.segment && (segment < 0 || trip == o.trip);
  }
};

/// The values of one stage's program and which must cross from one loop
/// iteration (or straight-line part) to another through an activation
/// buffer.
struct ValueFlow {
  /// (site, value) pairs that save / restore.
  std::set<std::pair<size_t, ValueKey>> saves, restores;
  /// Depth of each value's activation buffer.
  std::map<ValueKey, int64_t> depth;
};
} // namespace

/// What a send or recv of the schedule carries on `stage`: the kind of value
/// and the tensors' names, in the order both ends agree on.
static std::pair<ValueKind, ArrayRef<std::string>>
transferred(const Stage &stage, const sched::Instr &instr) {
  bool activations = instr.tag == sched::kActivationTag;
  if (instr.kind == sched::InstrKind::Recv)
    return activations ? std::make_pair(ValueKind::Named,
                                        ArrayRef(stage.activationsIn))
                       : std::make_pair(ValueKind::GradIn,
                                        ArrayRef(stage.gradsIn));
  return activations
             ? std::make_pair(ValueKind::Named, ArrayRef(stage.activationsOut))
             : std::make_pair(ValueKind::GradOut, ArrayRef(stage.gradsOut));
}

/// The values each instruction of `program` defines and uses.
static void valuesOf(const Stage &stage, const sched::Instr &instr,
                     bool keepFed, SmallVectorImpl<ValueKey> &defs,
                     SmallVectorImpl<ValueKey> &uses) {
  switch (instr.kind) {
  case sched::InstrKind::Recv:
  case sched::InstrKind::Send: {
    auto [kind, names] = transferred(stage, instr);
    for (const std::string &name : names)
      (instr.kind == sched::InstrKind::Recv ? defs : uses).push_back({kind, name});
    break;
  }
  case sched::InstrKind::Forward:
    for (const ArgSource &arg : stage.forwardArgs) {
      if (arg.kind == ArgSource::Named)
        uses.push_back({ValueKind::Named, arg.name});
      else if (arg.kind == ArgSource::Feed && keepFed)
        defs.push_back({ValueKind::Fed, arg.name});
    }
    for (const std::string &name : stage.resultNames)
      if (!name.empty())
        defs.push_back({ValueKind::Named, name});
    break;
  case sched::InstrKind::Backward:
    for (const ArgSource &arg : stage.backwardArgs) {
      if (arg.kind == ArgSource::Named)
        uses.push_back({ValueKind::Named, arg.name});
      else if (arg.kind == ArgSource::Grad)
        uses.push_back({ValueKind::GradIn, arg.name});
      else if (arg.kind == ArgSource::Feed && keepFed)
        uses.push_back({ValueKind::Fed, arg.name});
    }
    for (const std::string &name : stage.backwardGradResults)
      defs.push_back({ValueKind::GradOut, name});
    break;
  default:
    break;
  }
}

/// Which values cross instances, and the depth their buffers need: the
/// least d such that no micro-batch is saved into slot mb mod d while
/// another one there still waits for a restore. A synchronous program is
/// analysed over its one step (`copies` 1). A no-flush step program runs
/// again every step with micro-batches M higher and passes values from one
/// step to a later one: it is analysed over `copies` consecutive steps, and
/// a use whose definition lies before the first is left to the later copies.
static ValueFlow analyzeValueFlow(const Stage &stage,
                                  const sched::Program &program,
                                  ArrayRef<Segment> segments,
                                  int64_t microbatches, int64_t copies,
                                  bool keepFed) {
  const size_t n = program.size();
  std::vector<Place> bodyPlaces(n);
  for (auto [index, seg] : llvm::enumerate(segments)) {
    if (!seg.isLoop()) {
      for (size_t t = 0; t < seg.length; ++t)
        bodyPlaces[seg.begin + t] = {-1, 0, seg.begin + t};
      continue;
    }
    for (int64_t trip = 0; trip < seg.trips; ++trip)
      for (size_t t = 0; t < seg.length; ++t)
        bodyPlaces[seg.begin + trip * seg.length + t] = {int64_t(index), trip,
                                                         seg.begin + t};
  }
  // The instance of a place in copy c: loops and straight-line parts of
  // different copies are different instances.
  auto placeOf = [&](size_t i, int64_t c) {
    Place place = bodyPlaces[i];
    place.segment = place.segment < 0 ? -1 - c
                                      : place.segment + c * int64_t(n + 1);
    return place;
  };
  struct Def {
    size_t position;
    Place place;
  };
  std::map<std::pair<ValueKey, int64_t>, Def> defs;
  // Per value: (save position, last restore position) of each micro-batch,
  // and the positions of all saves.
  std::map<ValueKey, std::map<int64_t, std::pair<size_t, size_t>>> live;
  ValueFlow flow;
  for (int64_t c = 0; c < copies; ++c)
    for (size_t i = 0; i < n; ++i) {
      size_t position = size_t(c) * n + i;
      int64_t mb = program[i].mb + c * microbatches;
      Place place = placeOf(i, c);
      SmallVector<ValueKey> defined, used;
      valuesOf(stage, program[i], keepFed, defined, used);
      for (const ValueKey &key : used) {
        auto it = defs.find({key, mb});
        if (it == defs.end()) {
          assert(copies > 1 && "a schedule uses a value before its def");
          continue; // defined in a step before the first copy
        }
        if (it->second.place.sameInstance(place))
          continue;
        flow.saves.insert({it->second.place.site, key});
        flow.restores.insert({bodyPlaces[i].site, key});
        live[key][mb] = {it->second.position, position};
      }
      for (const ValueKey &key : defined)
        defs[{key, mb}] = {position, place};
    }
  // A saving site saves every micro-batch it defines, restored or not.
  std::map<ValueKey, std::vector<std::pair<size_t, int64_t>>> savesOf;
  for (auto &[keyMb, def] : defs)
    if (flow.saves.count({def.place.site, keyMb.first}))
      savesOf[keyMb.first].push_back({def.position, keyMb.second});
  const int64_t maxDepth = microbatches * copies;
  for (auto &[key, saves] : savesOf) {
    const auto &intervals = live[key];
    int64_t depth = 1;
    auto mod = [](int64_t a, int64_t d) { return ((a % d) + d) % d; };
    for (; depth < maxDepth; ++depth) {
      bool clash = false;
      for (auto &[mb, interval] : intervals) {
        for (auto &[position, other] : saves)
          if (other != mb && mod(other, depth) == mod(mb, depth) &&
              position > interval.first && position < interval.second) {
            clash = true;
            break;
          }
        if (clash)
          break;
      }
      if (!clash)
        break;
    }
    flow.depth[key] = depth;
  }
  return flow;
}

using ValueTable = std::map<std::pair<ValueKey, int64_t>, Value>;
using FeedTable = std::map<std::pair<std::string, int64_t>, Value>;

static Value lookupValue(const ValueTable &values, ValueKind kind,
                         const std::string &name, int64_t mb) {
  auto it = values.find({ValueKey{kind, name}, mb});
  if (it == values.end() || !it->second)
    llvm::report_fatal_error("pipe-schedule: a whole-batch stage reads a "
                             "micro-batch value before it is defined");
  return it->second;
}

static Value feedAt(OpBuilder &b, FeedTable &fed, const ArgSource &arg,
                    int64_t mb, Location loc) {
  Value &v = fed[{arg.name, mb}];
  if (!v)
    v = createFeed(b, loc, arg, mb, Value());
  return v;
}

/// The one forward of a whole-batch stage: the M micro-batches of each
/// input in, M slices of each sent result out; a loss it computes is the
/// step's, reported for every micro-batch (pipe.loss_scale is 1/M).
static void buildWholeForward(OpBuilder &b, Stage &stage, int64_t m,
                              Value weights, IntegerAttr version,
                              pipe::VersionClockAttr clock,
                              ValueTable &values, FeedTable &fed) {
  Location loc = stage.forward.getLoc();
  SmallVector<Value> inputs;
  for (const ArgSource &arg : stage.forwardArgs)
    for (int64_t k = 0; k < m; ++k)
      inputs.push_back(arg.kind == ArgSource::Feed
                           ? feedAt(b, fed, arg, k, loc)
                           : lookupValue(values, ValueKind::Named, arg.name, k));
  auto fwd = pipe::ForwardOp::create(
      b, loc, stage.forward.getResultTypes(),
      FlatSymbolRefAttr::get(stage.forward.getSymNameAttr()), inputs, weights,
      version, weights ? clock : pipe::VersionClockAttr(),
      b.getI64IntegerAttr(0), Value());
  fwd->setAttr(wholebatch::kWholeBatch, b.getUnitAttr());
  unsigned next = 0;
  for (auto [i, name] : llvm::enumerate(stage.resultNames)) {
    if (stage.fwdOutPerMb[i]) {
      for (int64_t k = 0; k < m; ++k)
        values[{ValueKey{ValueKind::Named, name}, k}] = fwd.getResult(next++);
      continue;
    }
    Value r = fwd.getResult(next++);
    for (int64_t k = 0; k < m; ++k) {
      if (stage.resultIsLoss[i])
        pipe::ReportLossOp::create(b, loc, r, k, Value());
      if (!name.empty())
        values[{ValueKey{ValueKind::Named, name}, k}] = r;
    }
  }
}

/// The one backward of a whole-batch stage: the M incoming gradients in, M
/// slices of each input gradient out, the weight gradients of the step.
static void buildWholeBackward(OpBuilder &b, Stage &stage, int64_t m,
                               Value weights, IntegerAttr version,
                               pipe::VersionClockAttr clock,
                               ValueTable &values, FeedTable &fed) {
  Location loc = stage.backward.getLoc();
  SmallVector<Value> inputs;
  for (auto [j, arg] : llvm::enumerate(stage.backwardArgs)) {
    int64_t copies = stage.bwdInPerMb[j] ? m : 1;
    for (int64_t k = 0; k < copies; ++k) {
      switch (arg.kind) {
      case ArgSource::Feed:
        inputs.push_back(feedAt(b, fed, arg, k, loc));
        break;
      case ArgSource::Named:
        inputs.push_back(lookupValue(values, ValueKind::Named, arg.name, k));
        break;
      case ArgSource::Grad:
        inputs.push_back(lookupValue(values, ValueKind::GradIn, arg.name, k));
        break;
      }
    }
  }
  ArrayRef<Type> results =
      stage.backward.getResultTypes().drop_back(stage.params);
  auto bwd = pipe::BackwardOp::create(
      b, loc, results,
      pipe::BackwardPartAttr::get(b.getContext(), pipe::BackwardPart::Full),
      FlatSymbolRefAttr::get(stage.backward.getSymNameAttr()), inputs, weights,
      version, weights ? clock : pipe::VersionClockAttr(),
      b.getI64IntegerAttr(0), Value());
  bwd->setAttr(wholebatch::kWholeBatch, b.getUnitAttr());
  unsigned next = 0;
  for (const std::string &name : stage.backwardGradResults)
    for (int64_t k = 0; k < m; ++k)
      values[{ValueKey{ValueKind::GradOut, name}, k}] = bwd.getResult(next++);
}

LogicalResult PipeSchedulePass::buildProgram(OpBuilder &b, Stage &stage,
                                             const sched::Program &program,
                                             pipe::ScheduleKind kind,
                                             int64_t peakInFlight) {
  MLIRContext *ctx = b.getContext();
  int64_t s = stage.index;
  Location fwdLoc = stage.forward.getLoc(), bwdLoc = stage.backward.getLoc();
  auto programOp = pipe::ProgramOp::create(b, fwdLoc, ("device" + Twine(s)).str(),
                                           s, ArrayRef<int64_t>{s}, kind,
                                           microbatches);
  programOp->setAttr(pipe::attrs::kPeakInFlight, b.getI64IntegerAttr(peakInFlight));
  if (noFlush && noFlush->verticalSync)
    programOp.setVerticalSync(true);
  if (kind == pipe::ScheduleKind::AdvanceForward)
    programOp.setAdvance(int64_t(advance));
  if (programOp.getBody().empty())
    programOp.getBody().push_back(new Block());
  Block *body = &programOp.getBody().front();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(body);

  // The weight version forwards and backwards read, and how many versions
  // the stage keeps (METHODS.md): synchronous, the one live copy; PipeDream,
  // W(u - (p-1-s)) with p-s versions (vertical sync: W(u - (p-1)), p
  // versions); 2BW, W(t - 1) with two. SpecTrain and PipeMare keep the live
  // copy (updated in place) and, where the stage has a delay τ = p-1-s, a
  // second slot for the weights predicted for its forward (SpecTrain) or
  // corrected for its backward (PipeMare T2).
  Value weights;
  IntegerAttr version, bwdVersion;
  pipe::VersionClock clock = pipe::VersionClock::Slot;
  int64_t versions = 1;
  int64_t tau = 0;
  bool inPlace = false, predictForward = false, correctBackward = false;
  if (noFlush) {
    int64_t p = noFlush->stages;
    tau = p - 1 - s;
    switch (noFlush->method) {
    case Method::TwoBW:
      clock = pipe::VersionClock::Step;
      version = b.getI64IntegerAttr(-1);
      versions = 2;
      break;
    case Method::PipeDream: {
      clock = pipe::VersionClock::MicroBatch;
      int64_t lag = noFlush->verticalSync ? p - 1 : p - 1 - s;
      version = b.getI64IntegerAttr(-lag);
      versions = lag + 1;
      break;
    }
    case Method::SpecTrain:
      inPlace = true;
      predictForward = tau > 0;
      versions = predictForward ? 2 : 1;
      break;
    case Method::PipeMare:
      inPlace = true;
      correctBackward = tau > 0 && noFlush->discrepancy >= 0;
      versions = correctBackward ? 2 : 1;
      break;
    }
  }
  if (stage.params > 0) {
    weights = pipe::WeightBufferOp::create(
        b, fwdLoc, pipe::WeightsType::get(ctx), s, versions,
        b.getArrayAttr(stage.paramNames), b.getArrayAttr(stage.paramTypes));
    if (!noFlush || inPlace)
      version = b.getI64IntegerAttr(predictForward ? 1 : 0);
    bwdVersion = inPlace ? b.getI64IntegerAttr(correctBackward ? 1 : 0)
                         : version;
  } else {
    version = IntegerAttr();
    predictForward = correctBackward = false;
  }
  auto clockAttr = pipe::VersionClockAttr::get(ctx, clock);

  std::vector<Segment> segments;
  if (loop && !stage.whole)
    segments = rollProgram(program);
  else
    segments.push_back({0, program.size(), 0, 0});
  // A no-flush step passes values to the steps after it: analyse enough
  // consecutive steps to see every micro-batch from its forward to its
  // backward.
  int64_t copies =
      noFlush ? sched::drainSteps(program, microbatches) + 3 : 1;
  ValueFlow flow = analyzeValueFlow(stage, program, segments, microbatches,
                                    copies, noFlush.has_value());

  auto typeOfResult = [&](StringRef name) {
    auto it = llvm::find(stage.resultNames, name);
    return stage.resultTypes[it - stage.resultNames.begin()];
  };
  auto typeOf = [&](const ValueKey &key) -> Type {
    switch (key.kind) {
    case ValueKind::Named:
      return stage.namedTypes.lookup(key.name);
    case ValueKind::GradIn:
      return typeOfResult(key.name);
    case ValueKind::GradOut:
      return stage.namedTypes.lookup(key.name);
    case ValueKind::Fed:
      return stage.fedTypes.lookup(key.name);
    }
    return Type();
  };
  std::map<ValueKey, Value> buffers;
  for (auto &[key, depth] : flow.depth) {
    std::string name = key.name;
    if (key.kind == ValueKind::GradIn)
      name += ".grad_in";
    else if (key.kind == ValueKind::GradOut)
      name += ".grad";
    else if (key.kind == ValueKind::Fed)
      name += ".fed";
    buffers[key] = pipe::ActivationBufferOp::create(
        b, key.kind == ValueKind::Named ? fwdLoc : bwdLoc,
        pipe::ActivationsType::get(ctx), name, depth, typeOf(key));
  }
  // A synchronous step starts from zero gradients; a no-flush program
  // zeroes them after each update instead (they may be accumulated over
  // steps).
  if (weights && !noFlush)
    pipe::ZeroGradOp::create(b, fwdLoc, weights);

  // The values of the part being built (one straight-line part, or one loop
  // body), by what they are and their micro-batch offset.
  // Straight-line parts share one table: their values dominate what follows.
  ValueTable topValues, loopValues, topRestored, loopRestored;
  FeedTable topFed, loopFed;
  Value base; // the loop index while building a loop body

  for (const Segment &seg : segments) {
    loopValues.clear();
    loopRestored.clear();
    loopFed.clear();
    ValueTable &values = seg.isLoop() ? loopValues : topValues;
    FeedTable &fed = seg.isLoop() ? loopFed : topFed;
    base = Value();
    OpBuilder::InsertionGuard segmentGuard(b);
    int64_t shift = 0; // instruction mb = k + (mb - shift) in a loop
    if (seg.isLoop()) {
      auto loopOp = pipe::LoopOp::create(b, fwdLoc, seg.lower,
                                         seg.lower + seg.trips);
      base = loopOp.getIndex();
      shift = seg.lower;
      b.setInsertionPointToStart(&loopOp.getInstructions());
    }
    for (size_t t = 0; t < seg.length; ++t) {
      size_t site = seg.begin + t;
      const sched::Instr &instr = program[site];
      int64_t mb = instr.mb - shift; // offset (loop) or micro-batch
      IntegerAttr mbAttr = b.getI64IntegerAttr(mb);
      auto define = [&](const ValueKey &key, Value v, Location loc) {
        values[{key, mb}] = v;
        if (flow.saves.count({site, key}))
          pipe::SaveOp::create(b, loc, v, buffers.at(key), mb, base);
      };
      auto use = [&](const ValueKey &key, Location loc) -> Value {
        if (flow.restores.count({site, key})) {
          Value &restored = (seg.isLoop() ? loopRestored : topRestored)[{key, mb}];
          if (!restored)
            restored = pipe::RestoreOp::create(b, loc, typeOf(key),
                                               buffers.at(key), mb, base);
          return restored;
        }
        Value v = values[{key, mb}];
        if (!v) {
          // The flow analysis and this table disagree: a bug, not bad input.
          llvm::report_fatal_error("pipe-schedule: a value is used in its own "
                                   "part of the program before its definition");
        }
        return v;
      };
      auto feed = [&](const ArgSource &arg, Location loc) {
        Value &v = fed[{arg.name, mb}];
        if (!v)
          v = createFeed(b, loc, arg, mb, base);
        return v;
      };
      // No-flush: the forward feeds and keeps what the backward reads back
      // (the step's data is gone by the time a later step's backward runs).
      auto feedForward = [&](const ArgSource &arg, Location loc) {
        Value v = feed(arg, loc);
        if (noFlush && !values.count({{ValueKind::Fed, arg.name}, mb}))
          define({ValueKind::Fed, arg.name}, v, loc);
        return v;
      };
      switch (instr.kind) {
      case sched::InstrKind::Recv:
        if (instr.tag == sched::kActivationTag) {
          for (const std::string &name : stage.activationsIn)
            define({ValueKind::Named, name},
                   pipe::RecvOp::create(b, fwdLoc, stage.namedTypes.lookup(name),
                                        instr.peer, mb, name, base),
                   fwdLoc);
        } else {
          for (const std::string &name : stage.gradsIn)
            define({ValueKind::GradIn, name},
                   pipe::RecvOp::create(b, bwdLoc, typeOfResult(name),
                                        instr.peer, mb, name + ".grad", base),
                   bwdLoc);
        }
        break;
      case sched::InstrKind::Send:
        if (instr.tag == sched::kActivationTag) {
          for (const std::string &name : stage.activationsOut)
            pipe::SendOp::create(b, fwdLoc, use({ValueKind::Named, name}, fwdLoc),
                                 instr.peer, mb, name, base);
        } else {
          for (const std::string &name : stage.gradsOut)
            pipe::SendOp::create(b, bwdLoc,
                                 use({ValueKind::GradOut, name}, bwdLoc),
                                 instr.peer, mb, name + ".grad", base);
        }
        break;
      case sched::InstrKind::Forward: {
        if (stage.whole) {
          if (instr.mb == 0)
            buildWholeForward(b, stage, microbatches, weights, version,
                              clockAttr, values, fed);
          break;
        }
        SmallVector<Value> inputs;
        for (const ArgSource &arg : stage.forwardArgs)
          inputs.push_back(arg.kind == ArgSource::Feed
                               ? feedForward(arg, fwdLoc)
                               : use({ValueKind::Named, arg.name}, fwdLoc));
        if (predictForward)
          pipe::PredictOp::create(
              b, fwdLoc, weights, b.getI64IntegerAttr(0), b.getI64IntegerAttr(1), b.getI64IntegerAttr(tau),
              pipe::PredictDirectionAttr::get(ctx,
                                              pipe::PredictDirection::Velocity),
              b.getF64FloatAttr(stage.optimizer->lr), mbAttr, base);
        auto fwd = pipe::ForwardOp::create(
            b, fwdLoc, stage.forward.getResultTypes(),
            FlatSymbolRefAttr::get(stage.forward.getSymNameAttr()), inputs,
            weights, version, weights ? clockAttr : pipe::VersionClockAttr(),
            mbAttr, base);
        for (auto [i, result] : llvm::enumerate(fwd.getResults())) {
          if (stage.resultIsLoss[i])
            pipe::ReportLossOp::create(b, fwdLoc, result, mb, base);
          if (!stage.resultNames[i].empty())
            define({ValueKind::Named, stage.resultNames[i]}, result, fwdLoc);
        }
        break;
      }
      case sched::InstrKind::Backward: {
        if (stage.whole) {
          if (instr.mb == 0)
            buildWholeBackward(b, stage, microbatches, weights, bwdVersion,
                               clockAttr, values, fed);
          break;
        }
        SmallVector<Value> inputs;
        for (const ArgSource &arg : stage.backwardArgs) {
          switch (arg.kind) {
          case ArgSource::Feed:
            inputs.push_back(noFlush ? use({ValueKind::Fed, arg.name}, bwdLoc)
                                     : feed(arg, bwdLoc));
            break;
          case ArgSource::Named:
            inputs.push_back(use({ValueKind::Named, arg.name}, bwdLoc));
            break;
          case ArgSource::Grad:
            inputs.push_back(use({ValueKind::GradIn, arg.name}, bwdLoc));
            break;
          }
        }
        ArrayRef<Type> results =
            stage.backward.getResultTypes().drop_back(stage.params);
        if (correctBackward)
          pipe::PredictOp::create(
              b, bwdLoc, weights, b.getI64IntegerAttr(0), b.getI64IntegerAttr(1), b.getI64IntegerAttr(tau),
              pipe::PredictDirectionAttr::get(ctx,
                                              pipe::PredictDirection::Delta),
              FloatAttr(), mbAttr, base);
        auto bwd = pipe::BackwardOp::create(
            b, bwdLoc, results,
            pipe::BackwardPartAttr::get(ctx, pipe::BackwardPart::Full),
            FlatSymbolRefAttr::get(stage.backward.getSymNameAttr()), inputs,
            weights, bwdVersion, weights ? clockAttr : pipe::VersionClockAttr(),
            mbAttr, base);
        for (auto [i, result] : llvm::enumerate(bwd.getResults()))
          define({ValueKind::GradOut, stage.backwardGradResults[i]}, result,
                 bwdLoc);
        break;
      }
      case sched::InstrKind::Update: {
        // Clipping by the global norm: a collective of the pipeline's
        // devices, those without weights included.
        if (clipNorm) {
          SmallVector<Value> clipped;
          if (weights)
            clipped.push_back(weights);
          pipe::ClipGradNormOp::create(
              b, stage.forward.getLoc(), clipped, b.getF64FloatAttr(*clipNorm),
              b.getDenseI64ArrayAttr(llvm::to_vector(llvm::seq<int64_t>(0, pipelineStages))));
        }
        if (!weights)
          break;
        const Optimizer &opt = *stage.optimizer;
        auto f = [&](std::optional<double> v) {
          return v ? b.getF64FloatAttr(*v) : FloatAttr();
        };
        std::optional<double> gradScale = opt.gradScale;
        IntegerAttr updateVersion, updateMb;
        pipe::VersionClockAttr updateClock;
        // PipeMare: T1's learning rate lr/τ annealed to lr over K updates,
        // T2's running weight velocity.
        FloatAttr lrScale, discrepancy;
        IntegerAttr annealSteps;
        if (noFlush && noFlush->method == Method::PipeMare && tau > 0) {
          if (noFlush->lrWarmup > 0 && tau > 1) {
            lrScale = b.getF64FloatAttr(1.0 / double(tau));
            annealSteps = b.getI64IntegerAttr(noFlush->lrWarmup);
          }
          if (correctBackward)
            discrepancy = b.getF64FloatAttr(noFlush->discrepancy);
        }
        // The schedule counts steps: an update per micro-batch is 1/M of one.
        DictionaryAttr schedule;
        if (!opt.schedule.isConstant()) {
          LrSchedule s = opt.schedule;
          s.updatesPerStep =
              noFlush && noFlush->rule == sched::UpdateRule::PerMicroBatch ? microbatches : 1;
          schedule = s.toAttr(b, true);
        }
        if (noFlush) {
          // The update after micro-batch u's backward turns W(u) into
          // W(u+1) (PipeDream), the one after a step's last backward W(t)
          // into W(t+1) (2BW).
          updateMb = mbAttr;
          if (!inPlace) {
            updateVersion = b.getI64IntegerAttr(0);
            updateClock = clockAttr;
          }
          // Per micro-batch, the gradient is the micro-batch's own: undo the
          // 1/M that makes micro-batch gradients sum to the step's mean.
          if (noFlush->rule == sched::UpdateRule::PerMicroBatch &&
              noFlush->lossScale != 1.0)
            gradScale = gradScale.value_or(1.0) / noFlush->lossScale;
        }
        auto update = pipe::UpdateOp::create(
            b, opt.holder->getLoc(), weights,
            pipe::OptimizerKindAttr::get(ctx, opt.kind),
            b.getF64FloatAttr(opt.lr), f(opt.momentum), f(opt.dampening),
            f(opt.beta1), f(opt.beta2), f(opt.epsilon), f(opt.weightDecay),
            schedule, lrScale, annealSteps, discrepancy, f(gradScale), updateVersion,
            updateClock ? updateClock
                        : pipe::VersionClockAttr::get(ctx, pipe::VersionClock::Slot),
            updateMb, updateMb ? base : Value());
        // The optimizer's own rules (which hyper-parameters, which ranges)
        // report on the attribute or option that set them.
        if (failed(update.verifyInvariants()))
          return failure();
        if (noFlush)
          pipe::ZeroGradOp::create(b, opt.holder->getLoc(), weights, mbAttr,
                                   base);
        break;
      }
      default:
        break;
      }
    }
  }
  return success();
}

void PipeSchedulePass::runOnOperation() {
  ModuleOp module = getOperation();
  // The no-flush methods (METHODS.md): PipeDream updates per micro-batch,
  // 2BW per step; both run 1F1B's order without a flush.
  std::optional<sched::ScheduleKind> schedKind;
  if (kind == "pipedream") {
    noFlush = NoFlush{sched::UpdateRule::PerMicroBatch, verticalSync};
  } else if (kind == "2bw" || kind == "pipedream_2bw") {
    noFlush = NoFlush{sched::UpdateRule::PerStep, false, Method::TwoBW};
  } else if (kind == "spectrain") {
    noFlush = NoFlush{sched::UpdateRule::PerMicroBatch, false, Method::SpecTrain};
  } else if (kind == "pipemare") {
    noFlush = NoFlush{sched::UpdateRule::PerMicroBatch, false, Method::PipeMare};
  } else {
    schedKind = sched::parseScheduleKind(kind);
    if (!schedKind) {
      module.emitError() << "pipe-schedule: kind must be gpipe, 1f1b, afp, "
                            "pipedream, 2bw, spectrain or pipemare, not '"
                         << kind << "'";
      return signalPassFailure();
    }
  }
  if (advance < 0) {
    module.emitError() << "pipe-schedule: advance must be >= 0 (got "
                       << int64_t(advance) << ")";
    return signalPassFailure();
  }
  if (advance > 0 && schedKind != sched::ScheduleKind::AdvanceForward) {
    module.emitError() << "pipe-schedule: advance applies to kind=afp, not '"
                       << kind << "'";
    return signalPassFailure();
  }
  bool pipemare = noFlush && noFlush->method == Method::PipeMare;
  if (lrWarmup < 0) {
    module.emitError() << "pipe-schedule: lr-warmup must be >= 0 (got "
                       << int64_t(lrWarmup) << ")";
    return signalPassFailure();
  }
  if (discrepancyCorrection != -1.0 &&
      !(discrepancyCorrection >= 0 && discrepancyCorrection < 1)) {
    module.emitError() << "pipe-schedule: discrepancy-correction must be in "
                          "[0, 1) (got "
                       << double(discrepancyCorrection) << ")";
    return signalPassFailure();
  }
  if ((lrWarmup > 0 || discrepancyCorrection != -1.0) && !pipemare) {
    module.emitError() << "pipe-schedule: lr-warmup and "
                          "discrepancy-correction apply to kind=pipemare, not '"
                       << kind << "'";
    return signalPassFailure();
  }
  if (pipemare) {
    noFlush->lrWarmup = lrWarmup;
    noFlush->discrepancy = discrepancyCorrection;
  }
  if (verticalSync && (!noFlush || noFlush->method != Method::PipeDream)) {
    module.emitError() << "pipe-schedule: vertical-sync applies to "
                          "kind=pipedream only, not '"
                       << kind << "'";
    return signalPassFailure();
  }
  // M is given once, to pipe-microbatch, which records it on the module.
  if (auto recorded = module->getAttrOfType<IntegerAttr>(pipe::attrs::kMicrobatches)) {
    int64_t m = recorded.getInt();
    if (microbatches == 0) {
      microbatches = m;
    } else if (microbatches != m) {
      module.emitError() << "pipe-schedule: microbatches=" << int64_t(microbatches)
                         << ", but the stages were split into " << m
                         << " micro-batches (pipe.microbatches); drop the "
                            "option or make them agree";
      return signalPassFailure();
    }
  }
  if (microbatches < 1) {
    module.emitError() << "pipe-schedule: microbatches must be >= 1 (got "
                       << int64_t(microbatches)
                       << "); pass microbatches=<M> or run pipe-microbatch first";
    return signalPassFailure();
  }
  // The schedule is simulated micro-batch by micro-batch (its time grows
  // with M^2 past tens of thousands).
  if (microbatches > kMaxMicrobatches) {
    module.emitError() << "pipe-schedule: microbatches must be at most " << kMaxMicrobatches
                       << " (got " << int64_t(microbatches) << ")";
    return signalPassFailure();
  }
  if (auto programs = module.getOps<pipe::ProgramOp>(); !programs.empty()) {
    (*programs.begin()).emitError()
        << "pipe-schedule: the module is already scheduled";
    return signalPassFailure();
  }

  std::vector<Stage> stages;
  if (failed(collectStages(module, stages)))
    return signalPassFailure();
  for (Stage &stage : stages)
    if (failed(analyzeStage(stage)))
      return signalPassFailure();
  if (failed(connectStages(stages)))
    return signalPassFailure();

  Stage &last = stages.back();
  if (!llvm::is_contained(last.resultIsLoss, true)) {
    last.forward.emitError() << "forward @" << last.forward.getSymName()
                             << " of the last stage marks no result pipe.loss";
    return signalPassFailure();
  }

  // --batchnorm full-batch: whole-batch stages run once per step on all M
  // micro-batches, so every micro-batch's forward must reach them before
  // they run: GPipe's order. 1F1B's warm-up (and the no-flush methods')
  // would wait on a gradient the whole-batch stage cannot give yet.
  SmallVector<int64_t> wholeStages;
  if (auto list = module->getAttrOfType<ArrayAttr>(wholebatch::kStages))
    for (Attribute a : list)
      if (auto i = llvm::dyn_cast<IntegerAttr>(a))
        wholeStages.push_back(i.getInt());
  if (!wholeStages.empty() && microbatches > 1) {
    // One stage has one order: its forward on all M, then its backward
    // (1F1B and AFP of one stage are GPipe's there).
    if (!noFlush && stages.size() == 1)
      schedKind = sched::ScheduleKind::GPipe;
    if (noFlush || schedKind != sched::ScheduleKind::GPipe) {
      module.emitError()
          << "pipe-schedule: --batchnorm full-batch runs stage "
          << wholeStages.front()
          << " (it holds a training-mode BatchNormalization) once on all "
             "micro-batches, which needs the GPipe schedule (kind=gpipe, "
             "--schedule gpipe), not '"
          << kind << "'";
      return signalPassFailure();
    }
    if (pipelines > 1) {
      module.emitError() << "pipe-schedule: --batchnorm full-batch runs "
                            "one pipeline (pipelines=1)";
      return signalPassFailure();
    }
    for (int64_t s : wholeStages) {
      if (s < 0 || s >= int64_t(stages.size())) {
        module.emitError() << "pipe-schedule: " << wholebatch::kStages
                           << " names stage " << s << ", but there are "
                           << stages.size();
        return signalPassFailure();
      }
      if (stages[s].backward->hasAttr(pipe::attrs::kRecompute)) {
        stages[s].backward.emitError()
            << "pipe-schedule: --batchnorm full-batch does not recompute "
               "whole-batch stage "
            << s << " (drop recompute)";
        return signalPassFailure();
      }
      if (failed(expandWholeBatchStage(stages[s], microbatches)))
        return signalPassFailure();
    }
  }

  std::optional<Optimizer> fromOptions;
  if (!optimizer.empty()) {
    FailureOr<Optimizer> opt = optimizerFromOptions(module);
    if (failed(opt))
      return signalPassFailure();
    fromOptions = *opt;
  }
  for (Stage &stage : stages) {
    if (stage.params == 0)
      continue;
    if (fromOptions) {
      stage.optimizer = fromOptions;
      continue;
    }
    Operation *holder = stage.forward;
    auto dict = holder->getAttrOfType<DictionaryAttr>(pipe::attrs::kOptimizer);
    if (!dict) {
      holder = module;
      dict = holder->getAttrOfType<DictionaryAttr>(pipe::attrs::kOptimizer);
    }
    if (!dict) {
      stage.forward.emitError()
          << "pipe-schedule: no optimizer for stage " << stage.index
          << ": pass optimizer=<kind> lr=<lr>, or put a pipe.optimizer "
             "dictionary on the stage's forward or the module";
      return signalPassFailure();
    }
    FailureOr<Optimizer> opt = optimizerFromAttr(holder, dict);
    if (failed(opt))
      return signalPassFailure();
    stage.optimizer = *opt;
  }

  int64_t p = int64_t(stages.size());
  pipelineStages = p;
  // Gradient clipping: one bound for the whole pipeline.
  std::optional<std::optional<double>> firstClip;
  for (Stage &stage : stages) {
    if (stage.params == 0)
      continue;
    std::optional<double> c = stage.optimizer->clipGradNorm;
    if (!firstClip) {
      firstClip = c;
    } else if (*firstClip != c) {
      stage.forward.emitError() << "pipe-schedule: the stages' optimizers disagree on "
                                   "clip_grad_norm: the global norm needs one bound for "
                                   "every stage";
      return signalPassFailure();
    }
  }
  clipNorm = firstClip ? *firstClip : std::nullopt;
  if (clipNorm && noFlush) {
    module.emitError() << "pipe-schedule: " << kind
                       << " updates its stages at different times, so there is no "
                          "step-wide gradient to clip by its global norm "
                          "(clip_grad_norm): use a synchronous schedule (gpipe, 1f1b, "
                          "afp) or drop the clipping";
    return signalPassFailure();
  }
  if (noFlush && (noFlush->method == Method::SpecTrain ||
                  noFlush->method == Method::PipeMare)) {
    for (Stage &stage : stages) {
      if (stage.params == 0 || stage.index == p - 1)
        continue;
      if (noFlush->method == Method::SpecTrain && !stage.optimizer->schedule.isConstant()) {
        stage.forward.emitError()
            << "pipe-schedule: spectrain predicts the weights s updates ahead at one "
               "learning rate (METHODS.md), which a learning-rate schedule changes "
               "between them: not supported; use a constant rate (no --lr-schedule "
               "or --warmup-steps) or another method";
        return signalPassFailure();
      }
      if (noFlush->method == Method::SpecTrain &&
          stage.optimizer->kind == pipe::OptimizerKind::Adagrad) {
        stage.forward.emitError()
            << "pipe-schedule: spectrain predicts along the optimizer's step "
               "direction, which adagrad does not define (METHODS.md): use "
               "sgd, momentum, nesterov, adam or adamw";
        return signalPassFailure();
      }
      if (!stage.backward->hasAttr(pipe::attrs::kRecompute)) {
        stage.backward.emitError()
            << "pipe-schedule: " << kind << " runs the backward of stage "
            << stage.index
            << " on other weights than its forward, which needs a backward "
               "that recomputes its forward: split the stages with "
               "pipe-split-stages recompute=true";
        return signalPassFailure();
      }
    }
  }
  sched::Schedule schedule;
  sched::SimulationResult simulated;
  pipe::ScheduleKind irKind;
  if (noFlush) {
    if (noFlush->rule == sched::UpdateRule::PerStep && microbatches < p) {
      module.emitError() << "pipe-schedule: 2bw needs at least as many "
                            "micro-batches as stages (M = "
                         << int64_t(microbatches) << " < p = " << p
                         << "): raise the micro-batches";
      return signalPassFailure();
    }
    noFlush->stages = p;
    if (auto scale = module->getAttrOfType<FloatAttr>(pipe::attrs::kLossScale))
      noFlush->lossScale = scale.getValueAsDouble();
    // A per-micro-batch update trains on the micro-batch's own mean: stages
    // micro-batched for the step's mean over ignored labels (1/C, no 1/M to
    // undo) would update on a fraction of it.
    if (auto mean = module->getAttrOfType<StringAttr>(pipe::attrs::kLossMean);
        mean && mean.getValue() == "step" && noFlush->rule == sched::UpdateRule::PerMicroBatch) {
      module.emitError() << "pipe-schedule: " << kind
                         << " updates per micro-batch on the micro-batch's own mean, but "
                            "the stages take the step's mean over the labels they do not "
                            "ignore (pipe.loss_mean = \"step\"): micro-batch them with "
                            "--pipe-microbatch=\"ignored-labels=micro-batch\"";
      return signalPassFailure();
    }
    schedule = sched::generateNoFlushStep(p, microbatches, noFlush->rule);
    // A run long enough to reach the steady state (as pipe-verify-schedule
    // checks it, runSteps).
    int64_t drain = 0;
    for (const sched::Program &device : schedule.devices)
      drain = std::max(drain, sched::drainSteps(device, microbatches));
    std::vector<sched::Program> run;
    for (const sched::Program &device : schedule.devices)
      run.push_back(sched::expandSteps(device, microbatches, 2 * drain + 3));
    simulated = sched::simulate(run);
    irKind = noFlush->method == Method::TwoBW ? pipe::ScheduleKind::PipeDream2BW
             : noFlush->method == Method::SpecTrain ? pipe::ScheduleKind::SpecTrain
             : noFlush->method == Method::PipeMare  ? pipe::ScheduleKind::PipeMare
                                                    : pipe::ScheduleKind::PipeDream;
  } else {
    schedule = sched::generateSchedule(*schedKind, p, microbatches, advance);
    for (Stage &stage : stages)
      if (stage.whole)
        schedule.devices[stage.index] =
            wholeBatchOrder(schedule.devices[stage.index]);
    simulated = sched::simulate(schedule.devices);
    irKind = *schedKind == sched::ScheduleKind::GPipe ? pipe::ScheduleKind::GPipe
             : *schedKind == sched::ScheduleKind::AdvanceForward
                 ? pipe::ScheduleKind::AdvanceForward
                 : pipe::ScheduleKind::OneFOneB;
  }
  assert(simulated.ok() && "the generator's schedule deadlocks");

  for (Stage &stage : stages)
    if (Operation *clash = module.lookupSymbol("device" + std::to_string(stage.index))) {
      clash->emitError() << "pipe-schedule names the program of device "
                         << stage.index << " @device" << stage.index
                         << ", which this symbol already is";
      return signalPassFailure();
    }

  if (pipelines < 1) {
    module.emitError() << "pipe-schedule: pipelines must be >= 1 (got "
                       << int64_t(pipelines) << ")";
    return signalPassFailure();
  }
  // One program per device: P x p of them.
  if (int64_t(pipelines) > kMaxDevices / std::max<int64_t>(1, int64_t(stages.size()))) {
    module.emitError() << "pipe-schedule: " << int64_t(pipelines) << " pipelines of "
                       << stages.size() << " stages are more than " << kMaxDevices
                       << " devices";
    return signalPassFailure();
  }
  if (replication != "dp" && replication != "avgpipe") {
    module.emitError() << "pipe-schedule: replication must be dp or avgpipe, "
                          "not '"
                       << replication << "'";
    return signalPassFailure();
  }
  if (!(avgAlpha > 0 && avgAlpha < 1) || avgPeriod < 1) {
    module.emitError() << "pipe-schedule: avg-alpha must be in (0, 1) and "
                          "avg-period >= 1 (got "
                       << double(avgAlpha) << ", " << int64_t(avgPeriod) << ")";
    return signalPassFailure();
  }
  if (pipelines > 1 && noFlush) {
    module.emitError() << "pipe-schedule: several pipelines run a synchronous "
                          "schedule (gpipe, 1f1b, afp), not '"
                       << kind << "'";
    return signalPassFailure();
  }
  for (int64_t d = p; d < p * pipelines; ++d)
    if (Operation *clash = module.lookupSymbol("device" + std::to_string(d))) {
      clash->emitError() << "pipe-schedule names the program of device " << d
                         << " @device" << d << ", which this symbol already is";
      return signalPassFailure();
    }

  OpBuilder b(module.getContext());
  b.setInsertionPointToEnd(module.getBody());
  for (Stage &stage : stages)
    if (failed(buildProgram(b, stage, schedule.devices[stage.index], irKind,
                            simulated.peakInFlight[stage.index])))
      return signalPassFailure();
  if (pipelines > 1)
    replicatePipelines(module, p);
}

/// Pipelines 1..P-1 as copies of pipeline 0's programs, and what ties the
/// replicas of each stage together.
void PipeSchedulePass::replicatePipelines(ModuleOp module, int64_t p) {
  MLIRContext *ctx = module.getContext();
  SmallVector<pipe::ProgramOp> base(module.getOps<pipe::ProgramOp>());
  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module.getBody());
  for (int64_t i = 1; i < pipelines; ++i)
    for (pipe::ProgramOp program : base) {
      auto copy = cast<pipe::ProgramOp>(b.clone(*program));
      int64_t device = i * p + program.getDevice();
      copy.setSymName(("device" + Twine(device)).str());
      copy.setDevice(device);
      copy.setPipeline(i);
      copy.walk([&](Operation *op) {
        if (auto send = dyn_cast<pipe::SendOp>(op))
          send.setPeer(send.getPeer() + i * p);
        if (auto recv = dyn_cast<pipe::RecvOp>(op))
          recv.setPeer(recv.getPeer() + i * p);
        if (auto clip = dyn_cast<pipe::ClipGradNormOp>(op)) {
          SmallVector<int64_t> group;
          for (int64_t d : clip.getGroup())
            group.push_back(d + i * p);
          clip.setGroup(group);
        }
      });
    }
  for (pipe::ProgramOp program : base)
    program.setPipeline(0);
  for (pipe::ProgramOp program : module.getOps<pipe::ProgramOp>()) {
    int64_t s = program.getStages().front();
    SmallVector<int64_t> group;
    for (int64_t i = 0; i < pipelines; ++i)
      group.push_back(i * p + s);
    SmallVector<pipe::UpdateOp> updates;
    program.walk([&](pipe::UpdateOp u) { updates.push_back(u); });
    for (pipe::UpdateOp update : updates) {
      Value weights = update.getWeights();
      Location loc = update.getLoc();
      if (replication == "dp") {
        // Averaged before the pipeline clips the step's gradients.
        Operation *before = update;
        for (Operation *op = update->getPrevNode(); op; op = op->getPrevNode())
          if (isa<pipe::ClipGradNormOp>(op)) {
            before = op;
            break;
          }
        b.setInsertionPoint(before);
        pipe::AllReduceOp::create(
            b, loc, pipe::ReduceKindAttr::get(ctx, pipe::ReduceKind::Mean),
            weights, b.getDenseI64ArrayAttr(group), DenseI64ArrayAttr());
        continue;
      }
      weights.getDefiningOp<pipe::WeightBufferOp>().setVersions(2);
      b.setInsertionPointAfter(update);
      pipe::AverageOp::create(b, loc, weights, b.getI64IntegerAttr(0),
                              b.getI64IntegerAttr(1),
                              b.getDenseI64ArrayAttr(group),
                              b.getF64FloatAttr(avgAlpha),
                              b.getI64IntegerAttr(avgPeriod));
    }
  }
}
