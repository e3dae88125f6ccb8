//===- AssignStages.cpp - pipe-assign-stages: ops into pipeline stages ----===//
//
// The function's ops on per-sample data form a sequence (their order, which
// is topological); a partition is a list of cut points in it, so every value
// flows to the same or a later stage. The other ops (constants, and pure ops
// of weights and constants only, like a weight's transpose) float: each takes
// the earliest stage of its users, and a later stage that also uses it
// recomputes it, as constants are duplicated.
//
//===----------------------------------------------------------------------===//
#include "pipec/Analysis/CostModel.h"
#include "pipec/Transforms/PartitionPasses.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Regex.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <set>
#include <limits>
#include <map>

namespace mlir::pipec {
#define GEN_PASS_DEF_PIPEASSIGNSTAGES
#include "pipec/Transforms/PartitionPasses.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;

static constexpr StringLiteral kStageAttr = "pipe.stage";
static constexpr StringLiteral kTiedAttr = "pipe.tied_stages";
static constexpr StringLiteral kCostsAttr = "pipe.stage_costs";
static constexpr StringLiteral kNumStagesAttr = "pipe.num_stages";
static constexpr double kInf = std::numeric_limits<double>::infinity();

/// The ONNX node name an op was imported from: its NameLoc's name.
static StringRef getNodeName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().strref();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (StringRef name = getNodeName(inner); !name.empty())
        return name;
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return getNodeName(callSite.getCallee());
  return {};
}

/// Function arguments that hold weights rather than per-sample data.
static bool isWeightArgument(Value value) {
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg)
    return false;
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  return func && (func.getArgAttr(arg.getArgNumber(), "pipe.param") ||
                  func.getArgAttr(arg.getArgNumber(), "pipe.state"));
}

namespace {

/// The function as the partitioners see it: the op sequence, each op's cost,
/// and for every cut point k (between seq[k-1] and seq[k], 1 <= k < n) the
/// activations crossing it.
struct Problem {
  func::FuncOp func;
  SmallVector<Operation *> seq;
  /// Ops that depend on no per-sample data: constants, and pure ops of
  /// weights and constants only (a weight's transpose). They are not cut
  /// points: each goes with its first user (its cost counted there), and a
  /// later stage that also uses one recomputes it, as it does constants.
  DenseSet<Operation *> floating;
  DenseMap<Operation *, int64_t> position;
  /// prefix[i]: summed training time of seq[0..i), seconds.
  SmallVector<double> prefix;
  /// crossBytes[k] / crossCount[k]: the values defined before cut k and used
  /// at or after it (the terminator counts as position n). Index 0 and n
  /// are unused (0).
  SmallVector<int64_t> crossBytes;
  SmallVector<int64_t> crossCount;

  int64_t size() const { return seq.size(); }
  double cost(int64_t begin, int64_t end) const {
    return prefix[end] - prefix[begin];
  }
};

/// A partition: cut points 0 < c_1 < ... < c_{S-1} < n.
using Cuts = SmallVector<int64_t>;

} // namespace

static Problem buildProblem(func::FuncOp func, const CostModel &model) {
  Problem problem;
  problem.func = func;
  Block &body = func.getBody().front();
  for (Operation &op : body.without_terminator()) {
    bool floating = op.hasTrait<OpTrait::ConstantLike>() ||
                    (isMemoryEffectFree(&op) &&
                     llvm::all_of(op.getOperands(), [&](Value operand) {
                       Operation *def = operand.getDefiningOp();
                       return def ? problem.floating.contains(def)
                                  : isWeightArgument(operand);
                     }));
    if (floating) {
      problem.floating.insert(&op);
      continue;
    }
    problem.position[&op] = problem.seq.size();
    problem.seq.push_back(&op);
  }
  int64_t n = problem.size();
  SmallVector<double> costs(n + 1, 0.0);
  for (int64_t i = 0; i < n; ++i)
    costs[i] = model.getTrainingTime(problem.seq[i]);
  // A floating op's cost goes to its first user in the sequence.
  DenseMap<Operation *, int64_t> firstUse;
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (!problem.floating.contains(&op))
      continue;
    int64_t first = n;
    for (Operation *user : op.getUsers()) {
      if (auto it = problem.position.find(user); it != problem.position.end())
        first = std::min(first, it->second);
      else if (auto it = firstUse.find(user); it != firstUse.end())
        first = std::min(first, it->second);
    }
    firstUse[&op] = first;
    costs[first] += model.getTrainingTime(&op);
  }
  problem.prefix.assign(n + 1, 0.0);
  for (int64_t i = 0; i < n; ++i)
    problem.prefix[i + 1] = problem.prefix[i] + costs[i];

  // A value defined at p and last used at q crosses cuts p+1 .. q.
  SmallVector<int64_t> bytesDelta(n + 2, 0), countDelta(n + 2, 0);
  for (int64_t p = 0; p < n; ++p) {
    for (Value result : problem.seq[p]->getResults()) {
      int64_t last = p;
      for (Operation *user : result.getUsers()) {
        auto it = problem.position.find(user);
        last = std::max(last, it == problem.position.end() ? n : it->second);
      }
      if (last == p)
        continue;
      int64_t bytes = CostModel::getValueBytes(result).value_or(0);
      bytesDelta[p + 1] += bytes;
      bytesDelta[last + 1] -= bytes;
      countDelta[p + 1] += 1;
      countDelta[last + 1] -= 1;
    }
  }
  problem.crossBytes.assign(n + 1, 0);
  problem.crossCount.assign(n + 1, 0);
  int64_t bytes = 0, count = 0;
  for (int64_t k = 1; k < n; ++k) {
    bytes += bytesDelta[k];
    count += countDelta[k];
    problem.crossBytes[k] = bytes;
    problem.crossCount[k] = count;
  }
  return problem;
}

static bool lessOrTied(double a, double b) {
  return a <= b * (1 + 1e-9) + 1e-18;
}

/// The least achievable maximum stage cost of `stages` contiguous stages
/// whose cuts are among `candidates` (sorted). f[s][j]: best over the prefix
/// ending at point j (points: 0, candidates..., n) in s stages. f[s-1][.] is
/// nondecreasing and the last stage's cost decreasing in the split point, so
/// the optimum for each j is where they cross, found by binary search.
static double minMaxCost(const Problem &problem, ArrayRef<int64_t> candidates,
                         int64_t stages) {
  SmallVector<int64_t> points{0};
  points.append(candidates.begin(), candidates.end());
  points.push_back(problem.size());
  int64_t m = points.size();
  if (m - 1 < stages)
    return kInf;
  SmallVector<double> prev(m, kInf), cur(m, kInf);
  for (int64_t j = 1; j < m; ++j)
    prev[j] = problem.cost(0, points[j]);
  for (int64_t s = 2; s <= stages; ++s) {
    std::fill(cur.begin(), cur.end(), kInf);
    for (int64_t j = s; j < m; ++j) {
      // i ranges over [s-1, j-1]: the first s-1 stages end at points[i].
      int64_t lo = s - 1, hi = j - 1;
      auto last = [&](int64_t i) { return problem.cost(points[i], points[j]); };
      // Smallest i with prev[i] >= last(i); the optimum is there or before.
      int64_t a = lo, b = hi + 1;
      while (a < b) {
        int64_t mid = (a + b) / 2;
        if (prev[mid] >= last(mid))
          b = mid;
        else
          a = mid + 1;
      }
      double best = kInf;
      for (int64_t i : {a - 1, a})
        if (i >= lo && i <= hi)
          best = std::min(best, std::max(prev[i], last(i)));
      cur[j] = best;
    }
    std::swap(prev, cur);
  }
  return prev[m - 1];
}

/// Among the partitions with cuts in `candidates` and every stage costing at
/// most `bound`, the one whose cuts carry the fewest activation bytes (then
/// the fewest values). The window of admissible split points moves forward
/// with j, so a monotone deque gives each step's minimum.
static std::optional<Cuts> minCrossingCuts(const Problem &problem,
                                           ArrayRef<int64_t> candidates,
                                           int64_t stages, double bound) {
  SmallVector<int64_t> points{0};
  points.append(candidates.begin(), candidates.end());
  points.push_back(problem.size());
  int64_t m = points.size();
  using Score = std::pair<int64_t, int64_t>; // bytes, count
  const Score none{std::numeric_limits<int64_t>::max(), 0};
  auto add = [&](Score score, int64_t point) -> Score {
    if (score == none)
      return none;
    return {score.first + problem.crossBytes[point],
            score.second + problem.crossCount[point]};
  };
  // best[s][j], from[s][j]: s stages over the prefix ending at point j.
  std::vector<std::vector<Score>> best(stages + 1,
                                       std::vector<Score>(m, none));
  std::vector<std::vector<int64_t>> from(stages + 1,
                                         std::vector<int64_t>(m, -1));
  for (int64_t j = 1; j < m; ++j)
    if (lessOrTied(problem.cost(0, points[j]), bound))
      best[1][j] = {0, 0};
  for (int64_t s = 2; s <= stages; ++s) {
    std::deque<int64_t> window; // indices i, scores increasing
    int64_t next = s - 1;       // the next i to enter the window
    for (int64_t j = s; j < m; ++j) {
      for (; next < j; ++next) {
        Score score = add(best[s - 1][next], points[next]);
        if (score == none)
          continue;
        while (!window.empty() &&
               add(best[s - 1][window.back()], points[window.back()]) >= score)
          window.pop_back();
        window.push_back(next);
      }
      while (!window.empty() &&
             !lessOrTied(problem.cost(points[window.front()], points[j]),
                         bound))
        window.pop_front();
      if (window.empty())
        continue;
      best[s][j] = add(best[s - 1][window.front()], points[window.front()]);
      from[s][j] = window.front();
    }
  }
  if (best[stages][m - 1] == none)
    return std::nullopt;
  Cuts cuts(stages - 1);
  int64_t j = m - 1;
  for (int64_t s = stages; s >= 2; --s) {
    j = from[s][j];
    cuts[s - 2] = points[j];
  }
  return cuts;
}

/// Cut points whose crossing is at most `threshold` bytes.
static SmallVector<int64_t> eligibleCuts(const Problem &problem,
                                         double threshold) {
  SmallVector<int64_t> cuts;
  for (int64_t k = 1; k < problem.size(); ++k)
    if (double(problem.crossBytes[k]) <= threshold)
      cuts.push_back(k);
  return cuts;
}

/// The narrow cut points: the smallest threshold (cut-slack x the smallest
/// crossing, doubled as needed) at which a balanced split over them is
/// within `tolerance` of the best split over all cut points.
static SmallVector<int64_t> chooseCandidates(const Problem &problem,
                                             int64_t stages, double slack,
                                             double tolerance,
                                             double *restrictedBest) {
  int64_t n = problem.size();
  SmallVector<int64_t> all;
  for (int64_t k = 1; k < n; ++k)
    all.push_back(k);
  double unrestricted = minMaxCost(problem, all, stages);
  int64_t smallest = std::numeric_limits<int64_t>::max(), largest = 0;
  for (int64_t k = 1; k < n; ++k) {
    smallest = std::min(smallest, problem.crossBytes[k]);
    largest = std::max(largest, problem.crossBytes[k]);
  }
  double threshold = std::max<double>(1.0, double(smallest)) *
                     std::max(1.0, slack);
  while (true) {
    SmallVector<int64_t> candidates = eligibleCuts(problem, threshold);
    if (int64_t(candidates.size()) >= stages - 1) {
      double restricted = minMaxCost(problem, candidates, stages);
      if (restricted <= unrestricted * (1 + tolerance) + 1e-18 ||
          threshold >= double(largest)) {
        *restrictedBest = restricted;
        return candidates;
      }
    }
    if (threshold >= double(largest)) {
      *restrictedBest = unrestricted;
      return all;
    }
    threshold *= 2;
  }
}

static Cuts partitionBalanced(const Problem &problem, int64_t stages,
                              double slack, double tolerance) {
  double bound = 0;
  SmallVector<int64_t> candidates =
      chooseCandidates(problem, stages, slack, tolerance, &bound);
  std::optional<Cuts> cuts =
      minCrossingCuts(problem, candidates, stages, bound);
  assert(cuts && "the min-max bound must be achievable");
  return *cuts;
}

/// PipeDream's planner with one worker per stage: over the layers the
/// narrow cuts delimit, A(j, s) = min_i max(A(i, s-1), 2 a_i / B, T(i..j)).
static Cuts partitionPipeDream(const Problem &problem, const CostModel &model,
                               int64_t stages, double slack,
                               double tolerance) {
  double unused = 0;
  SmallVector<int64_t> points{0};
  SmallVector<int64_t> candidates =
      chooseCandidates(problem, stages, slack, tolerance, &unused);
  points.append(candidates.begin(), candidates.end());
  points.push_back(problem.size());
  int64_t m = points.size();
  std::vector<std::vector<double>> a(stages + 1,
                                     std::vector<double>(m, kInf));
  std::vector<std::vector<int64_t>> from(stages + 1,
                                         std::vector<int64_t>(m, -1));
  for (int64_t j = 1; j < m; ++j)
    a[1][j] = problem.cost(0, points[j]);
  for (int64_t s = 2; s <= stages; ++s)
    for (int64_t j = s; j < m; ++j)
      for (int64_t i = s - 1; i < j; ++i) {
        double comm =
            2 * model.getTransferTime(problem.crossBytes[points[i]]);
        double value = std::max({a[s - 1][i], comm,
                                 problem.cost(points[i], points[j])});
        // Ties go to the cheaper crossing.
        if (value < a[s][j] * (1 - 1e-9) ||
            (lessOrTied(value, a[s][j]) && from[s][j] >= 0 &&
             problem.crossBytes[points[i]] <
                 problem.crossBytes[points[from[s][j]]])) {
          a[s][j] = value;
          from[s][j] = i;
        }
      }
  Cuts cuts(stages - 1);
  int64_t j = m - 1;
  for (int64_t s = stages; s >= 2; --s) {
    j = from[s][j];
    cuts[s - 2] = points[j];
  }
  return cuts;
}

namespace {
struct AssignStagesPass
    : public mlir::pipec::impl::PipeAssignStagesBase<AssignStagesPass> {
  using PipeAssignStagesBase::PipeAssignStagesBase;
  void runOnOperation() override;

private:
  FailureOr<SmallVector<int64_t>> manualFromCuts(const Problem &problem,
                                                 int64_t &numStages);
  FailureOr<SmallVector<int64_t>> manualFromAttributes(const Problem &problem,
                                                       int64_t &numStages);
  FailureOr<SmallVector<int64_t>> byLayers(const Problem &problem,
                                           int64_t numStages);
};
} // namespace

static SmallVector<int64_t> stagesFromCuts(int64_t n, ArrayRef<int64_t> cuts) {
  SmallVector<int64_t> stageOf(n, 0);
  int64_t stage = 0;
  for (int64_t i = 0, c = 0; i < n; ++i) {
    while (c < int64_t(cuts.size()) && cuts[c] == i) {
      ++stage;
      ++c;
    }
    stageOf[i] = stage;
  }
  return stageOf;
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
AssignStagesPass::manualFromCuts(const Problem &problem, int64_t &numStages) {
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
  static const llvm::Regex pattern("([A-Za-z_][A-Za-z0-9_]*)[.]([0-9]+)([./]|$)");
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
    func.emitError() << "stages = " << stages << ": needs at least 1";
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
  CostModel model(costOptions);
  Problem problem = buildProblem(func, model);
  int64_t n = problem.size();

  int64_t numStages = stages;
  FailureOr<SmallVector<int64_t>> stageOf = failure();
  if (strategy == "manual") {
    stageOf = cuts.empty() ? manualFromAttributes(problem, numStages)
                           : manualFromCuts(problem, numStages);
  } else {
    if (numStages == 0)
      numStages = 2;
    if (n < numStages) {
      func.emitError() << "cannot split @" << func.getSymName() << " into "
                       << numStages << " stages: it has only " << n
                       << " op(s) on per-sample data (constants and ops of weights "
                          "alone aside)";
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

  // Every def-use edge must go forward; a failure here is a bug of the
  // strategy, not of the input, except for user-set stages (checked above).
  for (Operation &op : body) {
    int64_t stage = op.getAttrOfType<IntegerAttr>(kStageAttr).getInt();
    for (Value operand : op.getOperands())
      if (Operation *def = operand.getDefiningOp())
        if (def->getAttrOfType<IntegerAttr>(kStageAttr).getInt() > stage) {
          op.emitError() << "pipe-assign-stages: stage " << stage
                         << " uses a value of a later stage";
          return signalPassFailure();
        }
  }

  // Parameters: owned by the stage of their first use.
  for (BlockArgument arg : func.getArguments()) {
    unsigned index = arg.getArgNumber();
    if (!func.getArgAttr(index, "pipe.param"))
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
      op.setAttr("pipe.cost",
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
