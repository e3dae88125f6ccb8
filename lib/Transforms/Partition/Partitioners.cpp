//===- Partitioners.cpp - contiguous partitions of an op sequence ---------===//
//
// Exact dynamic programs over cut points. Only "narrow" cut points are
// admitted, where few activation bytes cross: the threshold starts at
// cut-slack x the smallest crossing and doubles until the best split over
// the admitted points is within `tolerance` of the best over all points.
//
//===----------------------------------------------------------------------===//
#include "Partitioners.h"
#include "dialects/onnx/OnnxDialect.h"
#include "dialects/pipe/PipeAttrNames.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <vector>

using namespace mlir;
using namespace mlir::pipec;
using namespace mlir::pipec::partition;

static constexpr double kInf = std::numeric_limits<double>::infinity();

/// Function arguments that hold weights rather than per-sample data.
bool partition::isWeightArgument(Value value) {
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg)
    return false;
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  return func && (func.getArgAttr(arg.getArgNumber(), pipe::attrs::kParam) ||
                  func.getArgAttr(arg.getArgNumber(), pipe::attrs::kState));
}

Problem partition::buildProblem(func::FuncOp func, const CostModel &model,
                                const DenseSet<Operation *> *forwardOps) {
  Problem problem;
  problem.func = func;
  Block &body = func.getBody().front();
  for (Operation &op : body.without_terminator()) {
    // In a training step, a backward op of weights alone (a transpose for
    // a VJP, weight decay) still belongs with its forward op or parameter;
    // only ops of constants and optimizer state (the step counter) float.
    bool forward = !forwardOps || forwardOps->contains(&op);
    bool floating =
        op.hasTrait<OpTrait::ConstantLike>() ||
        (isMemoryEffectFree(&op) &&
         llvm::all_of(op.getOperands(), [&](Value operand) {
           if (Operation *def = operand.getDefiningOp())
             return problem.floating.contains(def);
           return isWeightArgument(operand) &&
                  (forward || !CostModel::isParam(operand));
         }));
    if (floating) {
      problem.floating.insert(&op);
      continue;
    }
    if (forwardOps && !forwardOps->contains(&op)) {
      problem.backward.push_back(&op);
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
      // Backward users are placed with their forward op later; only
      // forward users and the function's results make a value cross.
      for (Operation *user : result.getUsers()) {
        if (auto it = problem.position.find(user);
            it != problem.position.end())
          last = std::max(last, it->second);
        else if (user->hasTrait<OpTrait::IsTerminator>())
          last = n;
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
  // An Add passes its gradient unchanged to both operands, and on through
  // an operand's own Adds of a weight or constant (a bias): every value of
  // the two chains gets the same gradient. A cut where one value of each
  // chain crosses is one of those: after both chains start, up to the Add.
  auto positionOf = [&](Value v) -> int64_t {
    Operation *def = v.getDefiningOp();
    auto it = def ? problem.position.find(def) : problem.position.end();
    return it == problem.position.end() ? -1 : it->second;
  };
  auto chainStart = [&](Value v) {
    int64_t p = positionOf(v);
    while (p >= 0) {
      auto add = llvm::dyn_cast<onnx::AddOp>(problem.seq[p]);
      if (!add)
        break;
      int64_t pa = positionOf(add.getA()), pb = positionOf(add.getB());
      if ((pa >= 0) == (pb >= 0))
        break; // two data operands (a chain of its own), or none
      p = std::max(pa, pb);
    }
    return p;
  };
  problem.sharedGradient.assign(n + 1, false);
  for (int64_t q = 0; q < n; ++q) {
    auto add = llvm::dyn_cast<onnx::AddOp>(problem.seq[q]);
    if (!add || add.getA() == add.getB())
      continue;
    int64_t pa = chainStart(add.getA()), pb = chainStart(add.getB());
    if (pa < 0 || pb < 0)
      continue;
    for (int64_t k = std::max(pa, pb) + 1; k <= q; ++k)
      problem.sharedGradient[k] = true;
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
    if (double(problem.crossBytes[k]) <= threshold && !problem.sharedGradient[k])
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
  // The cut points that do not send one gradient twice (every one where
  // that leaves too few).
  SmallVector<int64_t> all;
  for (int64_t k = 1; k < n; ++k)
    if (!problem.sharedGradient[k])
      all.push_back(k);
  if (int64_t(all.size()) < stages - 1) {
    all.clear();
    for (int64_t k = 1; k < n; ++k)
      all.push_back(k);
  }
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

Cuts partition::partitionBalanced(const Problem &problem, int64_t stages,
                                  double slack, double tolerance) {
  double bound = 0;
  SmallVector<int64_t> candidates =
      chooseCandidates(problem, stages, slack, tolerance, &bound);
  std::optional<Cuts> cuts =
      minCrossingCuts(problem, candidates, stages, bound);
  // The bound was achieved over these candidates, so this is only a guard
  // against rounding: any split over them is then valid.
  if (!cuts)
    cuts = minCrossingCuts(problem, candidates, stages, kInf);
  return *cuts;
}

/// PipeDream's planner with one worker per stage: over the layers the
/// narrow cuts delimit, A(j, s) = min_i max(A(i, s-1), 2 a_i / B, T(i..j)).
Cuts partition::partitionPipeDream(const Problem &problem,
                                   const CostModel &model, int64_t stages,
                                   double slack, double tolerance) {
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
SmallVector<int64_t> partition::stagesFromCuts(int64_t n,
                                               ArrayRef<int64_t> cuts) {
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

