//===- AssignStages.cpp - pipe-assign-stages: ops into pipeline stages ----===//
//
// The function's ops on per-sample data form a sequence (their order, which
// is topological); a partition is a list of cut points in it, so every value
// flows to the same or a later stage (Partitioners.h). The other ops
// (constants, and pure ops of weights and constants only, like a weight's
// transpose) float: each takes the earliest stage of its users, and a later
// stage that also uses it recomputes it, as constants are duplicated. In a
// training step the backward ops then follow their forward ops.
//
//===----------------------------------------------------------------------===//
#include "Partitioners.h"
#include "pipec/Analysis/Profile.h"
#include "pipec/Transforms/Planner.h"
#include "dialects/pipe/PipeAttrNames.h"
#include "pipec/Transforms/PartitionPasses.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Regex.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace mlir::pipec {
#define GEN_PASS_DEF_PIPEASSIGNSTAGES
#include "pipec/Transforms/Passes.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;
using namespace mlir::pipec::partition;

static constexpr StringLiteral kStageAttr = pipe::attrs::kStage;
static constexpr StringLiteral kTiedAttr = pipe::attrs::kTiedStages;
static constexpr StringLiteral kCostsAttr = pipe::attrs::kStageCosts;
static constexpr StringLiteral kNumStagesAttr = pipe::attrs::kNumStages;

static StringRef getNodeName(Location loc) {
  return CostModel::getNodeName(loc);
}

/// The ops the function's `pipe.loss` results depend on, when the function
/// is a training step (has `pipe.grad` / `pipe.update` results); else
/// std::nullopt: every op is forward.
static FailureOr<std::optional<DenseSet<Operation *>>>
findForwardOps(func::FuncOp func) {
  bool trainingStep = false;
  SmallVector<Value> losses;
  Operation *terminator = func.getBody().front().getTerminator();
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    trainingStep |= func.getResultAttr(i, pipe::attrs::kGrad) ||
                    func.getResultAttr(i, pipe::attrs::kUpdate);
    if (func.getResultAttr(i, pipe::attrs::kLoss))
      losses.push_back(terminator->getOperand(i));
  }
  if (!trainingStep)
    return std::optional<DenseSet<Operation *>>();
  if (losses.empty()) {
    func.emitError() << "@" << func.getSymName()
                     << " is a training step (it has pipe.grad/pipe.update "
                        "results) but no pipe.loss result: cannot tell the "
                        "forward ops from the backward ones";
    return failure();
  }
  DenseSet<Operation *> forward;
  SmallVector<Value> worklist(losses);
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (!def || !forward.insert(def).second)
      continue;
    worklist.append(def->operand_begin(), def->operand_end());
  }
  return std::optional<DenseSet<Operation *>>(std::move(forward));
}

namespace {
struct AssignStagesPass
    : public mlir::pipec::impl::PipeAssignStagesBase<AssignStagesPass> {
  using PipeAssignStagesBase::PipeAssignStagesBase;
  void runOnOperation() override;

private:
  FailureOr<SmallVector<int64_t>> manualFromCuts(const Problem &problem,
                                                 ArrayRef<std::string> cutNames,
                                                 int64_t &numStages);
  FailureOr<std::vector<std::string>>
  cutsForMemory(func::FuncOp func, const CostModelOptions &cost,
                const DenseSet<Operation *> *trainingForward);
  FailureOr<SmallVector<int64_t>> manualFromAttributes(const Problem &problem,
                                                       int64_t &numStages);
  FailureOr<SmallVector<int64_t>> byLayers(const Problem &problem,
                                           int64_t numStages);
};
} // namespace

/// The earliest forward stage using `value`, through floating ops.
static std::optional<int64_t> forwardStageOf(const Problem &problem,
                                             ArrayRef<int64_t> stageOf,
                                             Value value) {
  std::optional<int64_t> stage;
  for (Operation *user : value.getUsers()) {
    std::optional<int64_t> s;
    if (auto it = problem.position.find(user); it != problem.position.end())
      s = stageOf[it->second];
    else if (problem.floating.contains(user))
      for (Value result : user->getResults())
        if (std::optional<int64_t> r = forwardStageOf(problem, stageOf, result))
          s = s ? std::min(*s, *r) : *r;
    if (s)
      stage = stage ? std::min(*stage, *s) : *s;
  }
  return stage;
}

/// Places the backward and update ops of a training step: an update (an op
/// whose result is a `pipe.update` result and that reads a parameter) with
/// its parameter's owner; a backward op with the forward op whose location,
/// or else node name, it carries (the autodiff gives each op of a VJP its
/// forward op's location); else with the earliest gradient it reads (always
/// legal: that stage also sees the forward values the gradient's stage saw,
/// but the work drifts later); else with the latest forward value it reads;
/// else with the parameter it reads; else in the last stage.
static void assignBackward(const Problem &problem, ArrayRef<int64_t> stageOf,
                           int64_t numStages) {
  func::FuncOp func = problem.func;
  Operation *terminator = func.getBody().front().getTerminator();
  llvm::StringMap<int64_t> stageByName;
  DenseMap<Location, int64_t> stageByLoc;
  DenseSet<Location> ambiguous;
  for (auto [i, op] : llvm::enumerate(problem.seq)) {
    if (StringRef name = getNodeName(op->getLoc()); !name.empty())
      stageByName.try_emplace(name, stageOf[i]);
    auto [it, inserted] = stageByLoc.try_emplace(op->getLoc(), stageOf[i]);
    if (!inserted && it->second != stageOf[i])
      ambiguous.insert(op->getLoc());
  }
  DenseMap<Operation *, int64_t> backwardStage;
  Builder builder(func.getContext());
  for (Operation *op : problem.backward) {
    std::optional<int64_t> stage;
    bool isUpdate = llvm::any_of(op->getUses(), [&](OpOperand &use) {
      return use.getOwner() == terminator &&
             func.getResultAttr(use.getOperandNumber(), pipe::attrs::kUpdate);
    });
    if (isUpdate)
      for (Value operand : op->getOperands())
        if (auto arg = dyn_cast<BlockArgument>(operand);
            arg && func.getArgAttr(arg.getArgNumber(), pipe::attrs::kParam))
          if ((stage = forwardStageOf(problem, stageOf, operand)))
            break;
    if (!stage && !ambiguous.contains(op->getLoc()))
      if (auto it = stageByLoc.find(op->getLoc()); it != stageByLoc.end())
        stage = it->second;
    if (!stage)
      if (StringRef name = getNodeName(op->getLoc()); !name.empty())
        if (auto it = stageByName.find(name); it != stageByName.end())
          stage = it->second;
    if (!stage)
      for (Value operand : op->getOperands())
        if (auto it = backwardStage.find(operand.getDefiningOp());
            operand.getDefiningOp() && it != backwardStage.end())
          stage = std::min(stage.value_or(numStages - 1), it->second);
    if (!stage)
      for (Value operand : op->getOperands())
        if (auto it = problem.position.find(operand.getDefiningOp());
            operand.getDefiningOp() && it != problem.position.end())
          stage = std::max(stage.value_or(0), stageOf[it->second]);
    // Of weights alone (weight decay, a step counter): with the weight.
    if (!stage)
      for (Value operand : op->getOperands())
        if (auto arg = dyn_cast<BlockArgument>(operand);
            arg && func.getArgAttr(arg.getArgNumber(), pipe::attrs::kParam))
          if ((stage = forwardStageOf(problem, stageOf, operand)))
            break;
    backwardStage[op] = stage.value_or(numStages - 1);
    op->setAttr(kStageAttr, builder.getI64IntegerAttr(backwardStage[op]));
  }
}

static constexpr StringLiteral kNoNames =
    "... none: no op has a NameLoc (IR printed without "
    "--mlir-print-debuginfo loses them)";

/// A few node names of the function, for messages.
static std::string someNodeNames(const Problem &problem, size_t count = 5) {
  SmallVector<std::string> names;
  for (Operation *op : problem.seq) {
    StringRef name = getNodeName(op->getLoc());
    if (name.empty())
      continue;
    names.push_back(("'" + name + "'").str());
    if (names.size() == count)
      break;
  }
  if (names.empty())
    return kNoNames.str();
  return llvm::join(names, ", ") + (names.size() == count ? ", ..." : "");
}

FailureOr<SmallVector<int64_t>>
AssignStagesPass::manualFromCuts(const Problem &problem, ArrayRef<std::string> cuts,
                                 int64_t &numStages) {
  func::FuncOp func = problem.func;
  llvm::StringMap<Operation *> byName;
  DenseMap<Operation *, int64_t> bodyIndex;
  // A cut after op X starts the next stage at the first sequence op after X
  // (constants are not in the sequence).
  DenseMap<Operation *, int64_t> cutPoint;
  int64_t index = 0, seqSeen = 0;
  for (Operation &op : func.getBody().front().without_terminator()) {
    bodyIndex[&op] = index++;
    if (problem.position.count(&op))
      ++seqSeen;
    cutPoint[&op] = seqSeen;
    StringRef name = getNodeName(op.getLoc());
    if (!name.empty())
      byName.try_emplace(name, &op);
  }
  if (numStages != 0 && numStages != int64_t(cuts.size()) + 1) {
    func.emitError() << cuts.size() << " cut(s) make " << cuts.size() + 1
                     << " stages, but stages = " << numStages;
    return failure();
  }
  numStages = cuts.size() + 1;
  Cuts points;
  Operation *previous = nullptr;
  for (const std::string &name : cuts) {
    auto it = byName.find(name);
    if (it == byName.end()) {
      func.emitError() << "unknown cut '" << name << "': no op of @"
                       << func.getSymName()
                       << " has that node name; names are like "
                       << someNodeNames(problem);
      return failure();
    }
    Operation *op = it->second;
    if (previous && bodyIndex[op] < bodyIndex[previous]) {
      func.emitError() << "cut '" << name << "' comes before the previous cut '"
                      << getNodeName(previous->getLoc())
                      << "': list cuts in program order";
      return failure();
    }
    int64_t point = cutPoint[op];
    int64_t stage = points.size();
    if (point <= (points.empty() ? 0 : points.back())) {
      func.emitError() << "cut '" << name << "' leaves stage " << stage
                       << " empty";
      return failure();
    }
    if (point >= problem.size()) {
      func.emitError() << "cut '" << name << "' leaves stage " << stage + 1
                       << " (the last) empty: no op computes after it";
      return failure();
    }
    points.push_back(point);
    previous = op;
  }
  return stagesFromCuts(problem.size(), points);
}

FailureOr<SmallVector<int64_t>>
AssignStagesPass::manualFromAttributes(const Problem &problem,
                                       int64_t &numStages) {
  func::FuncOp func = problem.func;
  int64_t n = problem.size();
  SmallVector<int64_t> stageOf(n, 0);
  bool any = false;
  int64_t maxStage = 0;
  for (int64_t i = 0; i < n; ++i) {
    Operation *op = problem.seq[i];
    int64_t fromOperands = 0;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp()) {
        auto it = problem.position.find(def);
        if (it != problem.position.end())
          fromOperands = std::max(fromOperands, stageOf[it->second]);
      }
    if (auto attr = op->getAttrOfType<IntegerAttr>(kStageAttr)) {
      any = true;
      int64_t stage = attr.getInt();
      if (stage < 0 || (numStages != 0 && stage >= numStages)) {
        op->emitError() << "pipe.stage = " << stage << " is not in [0, "
                        << (numStages ? numStages : stage) << ")";
        return failure();
      }
      if (stage < fromOperands) {
        op->emitError() << "is in stage " << stage
                        << " but an operand comes from stage " << fromOperands
                        << ": values must flow to the same or a later stage";
        return failure();
      }
      stageOf[i] = stage;
    } else {
      stageOf[i] = fromOperands;
    }
    maxStage = std::max(maxStage, stageOf[i]);
  }
  if (!any) {
    func.emitError() << "strategy=manual needs cuts=<node>,... or "
                        "pipe.stage attributes on the ops of @"
                     << func.getSymName();
    return failure();
  }
  if (numStages == 0)
    numStages = maxStage + 1;
  SmallVector<int64_t> counts(numStages, 0);
  for (int64_t stage : stageOf)
    ++counts[stage];
  for (int64_t s = 0; s < numStages; ++s)
    if (counts[s] == 0) {
      func.emitError() << "the manual partition leaves stage " << s
                       << " of " << numStages << " empty";
      return failure();
    }
  return stageOf;
}

/// `<word>.<i>` in a node name, the first one: the repeated block key and
/// its index ("/blocks.3/ln1/..." -> ("blocks", 3); "model.layers.0.fc" ->
/// ("model.layers", 0)).
static std::optional<std::pair<std::string, int64_t>>
blockOf(StringRef name) {
  static const llvm::Regex pattern(
      "([A-Za-z_][A-Za-z0-9_]*)[.]([0-9]+)([./]|$)");
  SmallVector<StringRef, 4> groups;
  if (!pattern.match(name, &groups))
    return std::nullopt;
  int64_t index = 0;
  if (groups[2].getAsInteger(10, index))
    return std::nullopt;
  // The key: everything before the index, '/' and '.' alike.
  StringRef before = name.take_front(groups[2].data() - name.data() - 1);
  std::string key = before.str();
  std::replace(key.begin(), key.end(), '/', '.');
  StringRef trimmed = StringRef(key).trim('.');
  return std::make_pair(trimmed.str(), index);
}

FailureOr<SmallVector<int64_t>>
AssignStagesPass::byLayers(const Problem &problem, int64_t numStages) {
  func::FuncOp func = problem.func;
  int64_t n = problem.size();
  // The key with the most distinct indices is the repeated block.
  std::map<std::string, std::set<int64_t>> indices;
  SmallVector<std::string> keysInOrder;
  SmallVector<std::optional<std::pair<std::string, int64_t>>> blocks;
  for (Operation *op : problem.seq) {
    blocks.push_back(blockOf(getNodeName(op->getLoc())));
    if (!blocks.back())
      continue;
    auto [it, inserted] = indices.try_emplace(blocks.back()->first);
    if (inserted)
      keysInOrder.push_back(blocks.back()->first);
    it->second.insert(blocks.back()->second);
  }
  std::string key;
  size_t most = 0;
  for (const std::string &candidate : keysInOrder)
    if (indices[candidate].size() > most) {
      key = candidate;
      most = indices[candidate].size();
    }
  if (most < 2) {
    func.emitError() << "strategy=layers found no repeated block in @"
                     << func.getSymName()
                     << ": no two ops are named like '/blocks.<i>/...', "
                        "'layers.<i>.' (a prefix then an index)"
                     << (someNodeNames(problem) == kNoNames
                             ? "; there are no names: no op has a NameLoc "
                               "(IR printed without --mlir-print-debuginfo "
                               "loses them)"
                             : "");
    return failure();
  }
  const std::set<int64_t> &present = indices[key];
  int64_t numBlocks = present.size();
  if (numBlocks < numStages) {
    func.emitError() << "strategy=layers found " << numBlocks
                     << " blocks ('" << key << "." << *present.begin()
                     << "' ... '" << key << "." << *present.rbegin()
                     << "') but " << numStages
                     << " stages need at least one block each";
    return failure();
  }
  // Equal shares; the first numBlocks % numStages stages get one more.
  DenseMap<int64_t, int64_t> blockStage;
  int64_t base = numBlocks / numStages, extra = numBlocks % numStages;
  int64_t stage = 0, filled = 0;
  for (int64_t index : present) {
    int64_t share = base + (stage < extra ? 1 : 0);
    if (filled == share) {
      ++stage;
      filled = 0;
    }
    blockStage[index] = stage;
    ++filled;
  }

  int64_t first = -1, last = -1;
  for (int64_t i = 0; i < n; ++i)
    if (blocks[i] && blocks[i]->first == key) {
      if (first < 0)
        first = i;
      last = i;
    }
  SmallVector<int64_t> stageOf(n, 0);
  int64_t current = 0;
  for (int64_t i = 0; i < n; ++i) {
    Operation *op = problem.seq[i];
    int64_t fromOperands = 0;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp()) {
        auto it = problem.position.find(def);
        if (it != problem.position.end())
          fromOperands = std::max(fromOperands, stageOf[it->second]);
      }
    int64_t stage;
    if (i < first)
      stage = 0;
    else if (i > last)
      stage = numStages - 1;
    else if (blocks[i] && blocks[i]->first == key)
      stage = current = blockStage[blocks[i]->second];
    else
      stage = current;
    stageOf[i] = std::max(stage, fromOperands);
  }
  return stageOf;
}

/// memory-per-device: the cuts of the fastest partition into `stages` whose
/// stages fit (planner::evaluatePlan: weights, gradients, optimizer state,
/// activations times the schedule's peak in-flight micro-batches, transfer
/// buffers); empty where the balanced partition fits; failure (with an error
/// naming what the balanced one needs) where none fits.
FailureOr<std::vector<std::string>>
AssignStagesPass::cutsForMemory(func::FuncOp func, const CostModelOptions &cost,
                                const DenseSet<Operation *> *trainingForward) {
  auto kind = schedule::parseScheduleKind(scheduleKind);
  if (strategy != "balanced" || trainingForward || memoryPerDevice < 0 || !kind ||
      (*kind != schedule::ScheduleKind::GPipe && *kind != schedule::ScheduleKind::OneFOneB) ||
      microbatches < 1) {
    func.emitError() << "pipe-assign-stages: memory-per-device needs strategy=balanced on "
                        "the forward function (before pipe-autodiff), a size > 0, "
                        "microbatches >= 1 and schedule=gpipe or 1f1b";
    return failure();
  }
  planner::PlannerOptions options;
  options.devices = stages == 0 ? 2 : stages;
  options.memoryPerDevice = memoryPerDevice;
  options.optimizerStateFactor = optimizerState;
  options.cost = cost;
  options.cutSlack = cutSlack;
  options.tolerance = tolerance;
  options.linkBandwidth = cost.linkBandwidth;
  for (BlockArgument arg : func.getArguments())
    if (func.getArgAttr(arg.getArgNumber(), pipe::attrs::kInput))
      if (auto type = dyn_cast<RankedTensorType>(arg.getType());
          type && type.getRank() > 0 && !type.isDynamicDim(0)) {
        options.batch = type.getDimSize(0);
        break;
      }
  std::optional<planner::Candidate> c =
      planner::evaluatePlan(func, options, options.devices, microbatches, *kind);
  if (!c) {
    func.emitError() << "pipe-assign-stages: cannot evaluate " << int64_t(options.devices)
                     << " stages x M = " << int64_t(microbatches) << " (M must divide the batch "
                     << options.batch << ")";
    return failure();
  }
  if (!c->fits) {
    func.emitError() << "no partition into " << options.devices
                     << " stages fits memory-per-device=" << int64_t(memoryPerDevice)
                     << " (the balanced one needs " << c->peakMemory
                     << " bytes on its fullest device): allow more, or add stages or "
                        "micro-batches";
    return failure();
  }
  return c->cutNodes;
}

void AssignStagesPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto func = module.lookupSymbol<func::FuncOp>(funcName);
  if (!func || func.isExternal()) {
    module.emitError() << "pipe-assign-stages: no function @" << funcName
                       << " with a body to partition";
    return signalPassFailure();
  }
  if (strategy != "balanced" && strategy != "dp" && strategy != "manual" &&
      strategy != "layers") {
    func.emitError() << "unknown partition strategy '" << strategy
                     << "' (balanced, dp, manual or layers)";
    return signalPassFailure();
  }
  if (stages < 0) {
    func.emitError() << "stages = " << static_cast<int64_t>(stages) << ": needs at least 1";
    return signalPassFailure();
  }
  if (peakGflops <= 0 || memoryGBps <= 0 || linkGBps <= 0) {
    func.emitError() << "peak-gflops, memory-gbps and link-gbps must be > 0";
    return signalPassFailure();
  }

  CostModelOptions costOptions;
  costOptions.peakFlops = peakGflops * 1e9;
  costOptions.memoryBandwidth = memoryGBps * 1e9;
  costOptions.linkBandwidth = linkGBps * 1e9;
  std::optional<OpProfile> measured;
  if (!profile.empty()) {
    std::string error;
    measured = readProfile(profile, error);
    if (!measured) {
      func.emitError() << error;
      return signalPassFailure();
    }
    costOptions.profile = &*measured;
    // Measured at the function's batch: the rows of its first data input.
    for (BlockArgument arg : func.getArguments())
      if (func.getArgAttr(arg.getArgNumber(), pipe::attrs::kInput))
        if (auto type = dyn_cast<RankedTensorType>(arg.getType());
            type && type.getRank() > 0 && !type.isDynamicDim(0)) {
          costOptions.profileSamples = double(type.getDimSize(0));
          break;
        }
  }
  CostModel model(costOptions);
  FailureOr<std::optional<DenseSet<Operation *>>> forwardOps =
      findForwardOps(func);
  if (failed(forwardOps))
    return signalPassFailure();
  Problem problem =
      buildProblem(func, model, *forwardOps ? &**forwardOps : nullptr);
  int64_t n = problem.size();

  int64_t numStages = stages;
  FailureOr<SmallVector<int64_t>> stageOf = failure();
  // A memory limit: the planner's estimate of each stage's memory for the
  // balanced partition; where it does not fit, the fastest cuts that do.
  std::vector<std::string> memoryCuts;
  if (memoryPerDevice != 0) {
    FailureOr<std::vector<std::string>> fitted =
        cutsForMemory(func, costOptions, *forwardOps ? &**forwardOps : nullptr);
    if (failed(fitted))
      return signalPassFailure();
    memoryCuts = std::move(*fitted);
  }
  if (strategy == "manual") {
    SmallVector<std::string> cutList(cuts.begin(), cuts.end());
    stageOf = cuts.empty() ? manualFromAttributes(problem, numStages)
                           : manualFromCuts(problem, cutList, numStages);
  } else if (!memoryCuts.empty()) {
    stageOf = manualFromCuts(problem, memoryCuts, numStages);
  } else {
    if (numStages == 0)
      numStages = 2;
    if (n < numStages) {
      func.emitError() << "cannot split @" << func.getSymName() << " into "
                       << numStages << " stages: it has only " << n
                       << " op(s) on per-sample data (constants and ops of "
                          "weights alone aside)";
      return signalPassFailure();
    }
    if (strategy == "layers") {
      stageOf = byLayers(problem, numStages);
    } else if (numStages == 1) {
      stageOf = SmallVector<int64_t>(n, 0);
    } else if (strategy == "balanced") {
      stageOf = stagesFromCuts(
          n, partitionBalanced(problem, numStages, cutSlack, tolerance));
    } else {
      stageOf = stagesFromCuts(n, partitionPipeDream(problem, model, numStages,
                                                     cutSlack, tolerance));
    }
  }
  if (failed(stageOf))
    return signalPassFailure();

  // Write the stages: the sequence, then constants (the earliest stage of
  // their users), then the terminator (the last stage).
  Builder builder(func.getContext());
  auto stageAttr = [&](int64_t stage) {
    return builder.getI64IntegerAttr(stage);
  };
  for (int64_t i = 0; i < n; ++i)
    problem.seq[i]->setAttr(kStageAttr, stageAttr((*stageOf)[i]));
  Block &body = func.getBody().front();
  auto stageOfUser = [&](Operation *user) -> std::optional<int64_t> {
    if (user->hasTrait<OpTrait::IsTerminator>())
      return numStages - 1;
    if (auto attr = user->getAttrOfType<IntegerAttr>(kStageAttr))
      return attr.getInt();
    return std::nullopt;
  };
  if (!problem.backward.empty())
    assignBackward(problem, *stageOf, numStages);
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (!problem.floating.contains(&op))
      continue;
    int64_t stage = numStages - 1;
    bool used = false;
    for (Operation *user : op.getUsers())
      if (std::optional<int64_t> s = stageOfUser(user)) {
        stage = used ? std::min(stage, *s) : *s;
        used = true;
      }
    op.setAttr(kStageAttr, stageAttr(used ? stage : 0));
  }
  body.getTerminator()->setAttr(kStageAttr, stageAttr(numStages - 1));

  // Every forward def-use edge must go to the same or a later stage, every
  // backward one (gradient to gradient) to the same or an earlier stage; a
  // failure here is a bug of the strategy, not of the input, except for
  // user-set stages (checked above).
  DenseSet<Operation *> backwardSet(problem.backward.begin(),
                                    problem.backward.end());
  for (Operation &op : body.without_terminator()) {
    int64_t stage = op.getAttrOfType<IntegerAttr>(kStageAttr).getInt();
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def)
        continue;
      int64_t defStage = def->getAttrOfType<IntegerAttr>(kStageAttr).getInt();
      bool gradient = backwardSet.contains(def) && backwardSet.contains(&op);
      if (gradient ? defStage < stage : defStage > stage) {
        op.emitError() << "pipe-assign-stages: this op in stage " << stage
                       << " uses a value of stage " << defStage
                       << (gradient ? " (a gradient must flow to the same or "
                                      "an earlier stage)"
                                    : " (values must flow to the same or a "
                                      "later stage)");
        return signalPassFailure();
      }
    }
  }

  // Parameters (and optimizer state): owned by the stage of their first use.
  for (BlockArgument arg : func.getArguments()) {
    unsigned index = arg.getArgNumber();
    if (!func.getArgAttr(index, pipe::attrs::kParam) &&
        !func.getArgAttr(index, pipe::attrs::kState))
      continue;
    std::set<int64_t> users;
    for (Operation *user : arg.getUsers())
      if (std::optional<int64_t> s = stageOfUser(user))
        users.insert(*s);
    int64_t owner = users.empty() ? 0 : *users.begin();
    func.setArgAttr(index, kStageAttr, stageAttr(owner));
    if (users.size() > 1) {
      SmallVector<Attribute> tied;
      for (int64_t s : users)
        tied.push_back(stageAttr(s));
      func.setArgAttr(index, kTiedAttr, builder.getArrayAttr(tied));
    } else {
      func.removeArgAttr(index, kTiedAttr);
    }
  }

  SmallVector<Attribute> costs(numStages, builder.getF64FloatAttr(0));
  SmallVector<double> sums(numStages, 0.0);
  for (int64_t i = 0; i < n; ++i)
    sums[(*stageOf)[i]] += problem.cost(i, i + 1);
  for (int64_t s = 0; s < numStages; ++s)
    costs[s] = builder.getF64FloatAttr(sums[s] * 1e6);
  func->setAttr(kCostsAttr, builder.getArrayAttr(costs));
  func->setAttr(kNumStagesAttr, builder.getI64IntegerAttr(numStages));

  if (annotateCosts)
    for (Operation &op : body.without_terminator()) {
      OpCost cost = model.getOpCost(&op);
      op.setAttr(pipe::attrs::kCost,
                 builder.getDictionaryAttr({
                     builder.getNamedAttr(
                         "flops", builder.getI64IntegerAttr(
                                      int64_t(std::llround(cost.flops)))),
                     builder.getNamedAttr(
                         "bytes", builder.getI64IntegerAttr(cost.bytes())),
                     builder.getNamedAttr(
                         "param_bytes",
                         builder.getI64IntegerAttr(cost.paramBytes)),
                     builder.getNamedAttr(
                         "backward_factor",
                         builder.getF64FloatAttr(cost.backwardFactor)),
                 }));
    }
}
