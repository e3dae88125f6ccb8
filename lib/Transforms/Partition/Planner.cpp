//===- Planner.cpp - pipe-compile --auto: search plans with the simulator ---===//
//
// Each candidate is evaluated as the compiler would build it: the stages
// partitionBalanced cuts (the default partition), per-stage times from the
// cost model at B/M samples per micro-batch (measured op times where a
// profile is given: CostModelOptions::profile), the schedule the generator
// builds for it, and the simulator's step time with transfers of the cut's
// activation bytes. Memory per device: weights, gradients and optimizer
// state of its stage, the activations of one micro-batch (every forward
// result of the stage, an upper bound on what the backward keeps) times the
// peak in-flight micro-batches, and the send/recv buffers.
//
//===----------------------------------------------------------------------===//
#include "pipec/Transforms/Planner.h"
#include "Partitioners.h"
#include "pipec/Analysis/Profile.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

using namespace mlir;
using namespace mlir::pipec;
using namespace mlir::pipec::planner;
namespace sched = mlir::pipec::schedule;

std::string Candidate::describe() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (pipelines > 1)
    os << pipelines << " pipelines x ";
  os << stages << (stages == 1 ? " stage" : " stages");
  if (stages > 1) {
    os << ", M=" << microbatches << ", "
       << (method != "sync" ? method : std::string(sched::stringifyScheduleKind(schedule)));
    if (schedule == sched::ScheduleKind::AdvanceForward)
      os << " K=" << advance;
  }
  return text;
}

namespace {

/// One partition into p stages, at the model's batch.
struct Split {
  int64_t stages = 1;
  /// Per stage: its sequence ops.
  std::vector<std::vector<Operation *>> ops;
  /// Per stage: bytes of its weights, of its forward results (at the
  /// model's batch).
  std::vector<int64_t> paramBytes, activationBytes;
  /// boundary[s]: activation bytes crossing from stage s-1 into s (s >= 1),
  /// in boundaryCount[s] values: the compiled programs send each value
  /// (and its gradient back) as a message of its own.
  std::vector<int64_t> boundary, boundaryCount;
  partition::Cuts cuts;
};

Split makeSplit(const partition::Problem &problem, int64_t p,
                const partition::Cuts &cuts);

Split balancedSplit(const partition::Problem &problem, int64_t p,
                    const PlannerOptions &options) {
  partition::Cuts cuts;
  if (p > 1)
    cuts = partition::partitionBalanced(problem, p, options.cutSlack,
                                        options.tolerance);
  return makeSplit(problem, p, cuts);
}

/// Per sequence op: the bytes of the weights it is the first to use
/// (directly or through ops of weights alone) and of its results.
struct OpBytes {
  std::vector<double> paramPrefix, activationPrefix;
};

OpBytes opBytes(const partition::Problem &problem) {
  OpBytes bytes;
  int64_t n = problem.size();
  bytes.paramPrefix.assign(n + 1, 0);
  bytes.activationPrefix.assign(n + 1, 0);
  DenseSet<Value> claimed;
  std::function<double(Value)> claim = [&](Value v) -> double {
    if (CostModel::isParam(v))
      return claimed.insert(v).second
                 ? double(CostModel::getValueBytes(v).value_or(0))
                 : 0.0;
    double sum = 0;
    if (Operation *def = v.getDefiningOp())
      if (problem.floating.contains(def))
        for (Value operand : def->getOperands())
          sum += claim(operand);
    return sum;
  };
  for (int64_t i = 0; i < n; ++i) {
    double params = 0, acts = 0;
    for (Value operand : problem.seq[i]->getOperands())
      params += claim(operand);
    for (Value result : problem.seq[i]->getResults())
      acts += double(CostModel::getValueBytes(result).value_or(0));
    bytes.paramPrefix[i + 1] = bytes.paramPrefix[i] + params;
    bytes.activationPrefix[i + 1] = bytes.activationPrefix[i] + acts;
  }
  return bytes;
}

/// The contiguous split into p stages with the least bottleneck time among
/// those whose every stage fits `limit` bytes (estimated as evaluate does,
/// with stage s keeping peak(s) micro-batches of `ratio` x its activations):
/// f[s][j] = min over i of max(f[s-1][i], T(i..j)). std::nullopt where none
/// fits or the sequence is too long for the O(p n^2) search (n > 3000).
std::optional<partition::Cuts>
memoryAwareCuts(const partition::Problem &problem, const OpBytes &bytes,
                int64_t p, double ratio,
                const std::function<int64_t(int64_t)> &peak,
                const PlannerOptions &options) {
  int64_t n = problem.size();
  if (n > 3000 || p > n)
    return std::nullopt;
  double limit = double(options.memoryPerDevice);
  double stateFactor = double(2 + options.optimizerStateFactor);
  auto cross = [&](int64_t k) {
    return k <= 0 || k >= n ? 0.0 : double(problem.crossBytes[k]);
  };
  auto memory = [&](int64_t s, int64_t i, int64_t j) {
    return (bytes.paramPrefix[j] - bytes.paramPrefix[i]) * stateFactor +
           (bytes.activationPrefix[j] - bytes.activationPrefix[i]) * ratio *
               double(peak(s)) +
           2.0 * (cross(i) + cross(j)) * ratio;
  };
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> f(p, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int64_t>> from(p, std::vector<int64_t>(n + 1, -1));
  for (int64_t j = 1; j <= n; ++j)
    if (memory(0, 0, j) <= limit)
      f[0][j] = problem.cost(0, j);
  for (int64_t s = 1; s < p; ++s)
    for (int64_t j = s + 1; j <= n; ++j)
      for (int64_t i = s; i < j; ++i) {
        if (f[s - 1][i] == inf || memory(s, i, j) > limit)
          continue;
        double value = std::max(f[s - 1][i], problem.cost(i, j));
        if (value < f[s][j]) {
          f[s][j] = value;
          from[s][j] = i;
        }
      }
  if (f[p - 1][n] == inf)
    return std::nullopt;
  partition::Cuts cuts(p - 1);
  int64_t j = n;
  for (int64_t s = p - 1; s >= 1; --s) {
    j = from[s][j];
    cuts[s - 1] = j;
  }
  return cuts;
}

Split makeSplit(const partition::Problem &problem, int64_t p,
                const partition::Cuts &cuts) {
  Split split;
  split.stages = p;
  split.cuts = cuts;
  SmallVector<int64_t> stageOf = partition::stagesFromCuts(problem.size(), cuts);
  split.ops.resize(p);
  split.paramBytes.assign(p, 0);
  split.activationBytes.assign(p, 0);
  split.boundary.assign(p + 1, 0);
  split.boundaryCount.assign(p + 1, 0);
  for (int64_t s = 1; s < p; ++s) {
    split.boundary[s] = problem.crossBytes[cuts[s - 1]];
    split.boundaryCount[s] = problem.crossCount[cuts[s - 1]];
  }
  DenseMap<Value, int64_t> paramStage;
  // A weight belongs to the first stage using it, directly or through ops
  // of weights alone (a transposed weight).
  std::function<void(Value, int64_t)> claim = [&](Value v, int64_t s) {
    if (CostModel::isParam(v)) {
      paramStage.try_emplace(v, s);
      return;
    }
    if (Operation *def = v.getDefiningOp())
      if (problem.floating.contains(def))
        for (Value operand : def->getOperands())
          claim(operand, s);
  };
  for (int64_t i = 0; i < problem.size(); ++i) {
    Operation *op = problem.seq[i];
    int64_t s = stageOf[i];
    split.ops[s].push_back(op);
    for (Value result : op->getResults())
      split.activationBytes[s] += CostModel::getValueBytes(result).value_or(0);
    for (Value operand : op->getOperands())
      claim(operand, s);
  }
  for (auto &[value, s] : paramStage)
    split.paramBytes[s] += CostModel::getValueBytes(value).value_or(0);
  return split;
}

/// The profile's step split into a fixed cost per step and a scale of the
/// measured ops (fitStep); {0, 1} without a profile.
StepFit profileStepFit(const PlannerOptions &options) {
  if (const OpProfile *profile = options.cost.profile)
    return fitStep(*profile);
  return StepFit{};
}

/// Forward and backward seconds of stage `s` at `samples` per micro-batch,
/// the measured ops times `fit.scale` (what the per-op times leave out of a
/// micro-batch; the fixed cost is charged once per step by evaluate).
std::pair<double, double> stageTimes(const Split &split, int64_t s,
                                     double samples, double batch,
                                     const StepFit &fit,
                                     const PlannerOptions &options) {
  CostModelOptions costOptions = options.cost;
  costOptions.profileSamples = samples;
  CostModel measured(costOptions);
  CostModelOptions rooflineOptions = options.cost;
  rooflineOptions.profile = nullptr;
  CostModel roofline(rooflineOptions);
  double ratio = samples / batch;
  double forward = 0, backward = 0;
  // Measured ops: scaled to whole steps of one device (fitStep), or, for a
  // stage of a pipeline, to what they take beside the other ranks where
  // the profile measured that.
  double calibration = fit.scale;
  if (split.stages > 1 && options.cost.profile && options.cost.profile->pipelineFactor > 0)
    calibration = options.cost.profile->pipelineFactor;
  for (Operation *op : split.ops[s]) {
    OpCost cost = roofline.getOpCost(op);
    bool differentiable = cost.backwardFactor > 0;
    StringRef node = CostModel::getNodeName(op->getLoc());
    bool isMeasured = options.cost.profile && !node.empty() &&
                      options.cost.profile->ops.count(node);
    if (isMeasured) {
      forward += measured.getForwardTime(op) * calibration;
      backward += measured.getBackwardTime(op) * calibration;
      continue;
    }
    // A named node the profile (of this model: pipe-compile checks its
    // hash) does not list ran no kernel of its own: an alias, or folded
    // into another node's (a linear layer's weight Transpose and bias Add
    // into its Gemm, pipe-autodiff).
    if (options.cost.profile && !node.empty())
      continue;
    forward += roofline.getForwardTime(cost) * ratio + options.perOpSeconds;
    if (differentiable)
      backward += roofline.getBackwardTime(cost) * ratio +
                  2 * options.perOpSeconds;
  }
  return {forward, backward};
}

int64_t toNanos(double seconds) {
  return std::max<int64_t>(0, int64_t(std::llround(seconds * 1e9)));
}

std::optional<Candidate> evaluate(const Split &split, int64_t m,
                                  sched::ScheduleKind kind, int64_t advance,
                                  const PlannerOptions &options,
                                  int64_t pipelines = 1,
                                  const std::string &method = "sync") {
  int64_t p = split.stages;
  double batch = double(options.batch);
  double samples = batch / double(m);
  double ratio = samples / batch;
  Candidate c;
  c.stages = p;
  c.microbatches = m;
  c.schedule = kind;
  c.advance = advance;
  c.pipelines = pipelines;
  c.method = method;
  const bool noFlush = method != "sync" && p > 1;
  // PipeDream, SpecTrain and PipeMare update once per micro-batch, 2BW once
  // per step. SpecTrain and PipeMare run a stage's backward on other
  // weights than its forward (predicted, or not stashed), so every backward
  // recomputes its forward (pipe-split-stages recompute=true) and a stage
  // keeps only its inputs per micro-batch in flight.
  const bool perMicroBatch =
      noFlush && (method == "pipedream" || method == "spectrain" || method == "pipemare");
  const bool recomputes = noFlush && (method == "spectrain" || method == "pipemare");
  const bool pipemareT2 = method == "pipemare" && options.discrepancyCorrection >= 0;
  std::vector<double> fwd(p), bwd(p), upd(p);
  StepFit fit = profileStepFit(options);
  for (int64_t s = 0; s < p; ++s) {
    auto [f, b] = stageTimes(split, s, samples, batch, fit, options);
    const double params = double(split.paramBytes[s]);
    // A stage with a delay (τ = p-1-s > 0) predicts (SpecTrain) or corrects
    // (PipeMare T2) its weights; the last stage uses the live ones.
    const bool delayed = noFlush && s < p - 1;
    double updateBytes = params * double(3 + 2 * options.optimizerStateFactor);
    if (recomputes)
      b += f;
    if (method == "spectrain" && delayed) {
      // Before each forward, w - d·lr·v into the second slot (Adam's
      // direction reads m and v); plain SGD's update also keeps its
      // gradient as the direction.
      f += params * (options.optimizerStateFactor == 2 ? 4 : 3) /
           options.updateBytesPerSecond;
      if (options.optimizerStateFactor == 0)
        updateBytes += params;
    }
    if (pipemareT2 && delayed) {
      // Before each backward, W - τ·δ into the second slot; each update
      // folds W(k+1) - W(k) into δ.
      b += params * 3 / options.updateBytesPerSecond;
      updateBytes += params * 3;
    }
    fwd[s] = f;
    bwd[s] = b;
    upd[s] = updateBytes / options.updateBytesPerSecond;
    // The step's fixed cost (feeding inputs, the loss, the step loop), once
    // per step on every device, whatever M: charged with the update, the
    // instruction each device runs once per step.
    upd[s] += fit.fixed;
    // Data-parallel pipelines: a ring all-reduce of the stage's gradients
    // over its P replicas before the update.
    if (pipelines > 1)
      upd[s] += 2.0 * double(pipelines - 1) *
                (options.linkLatency +
                 double(split.paramBytes[s]) / double(pipelines) /
                     options.linkBandwidth);
    c.stageSeconds.push_back(f + b);
  }
  // The profile's measured transfer times where it has them (they step up
  // between 1 KiB and 4 KiB, off the line), else the line.
  const OpProfile *measuredLink =
      options.cost.profile && !options.cost.profile->linkTimes.empty()
          ? options.cost.profile
          : nullptr;
  auto transfer = [&](int64_t bytes) {
    if (measuredLink)
      return measuredLink->linkSeconds(double(bytes) * ratio);
    return options.linkLatency + double(bytes) * ratio / options.linkBandwidth;
  };
  // The receiver's copy of a message: its bytes at the link's bandwidth
  // (at most the transfer's time).
  auto copySeconds = [&](int64_t bytes) {
    return std::min(transfer(bytes), double(bytes) * ratio / options.linkBandwidth);
  };
  std::vector<int64_t> peak(p, 1);
  if (p == 1) {
    c.stepSeconds = fwd[0] + bwd[0] + upd[0];
    c.bubble = 0;
  } else {
    sched::Schedule schedule =
        noFlush ? sched::generateNoFlushStep(p, m,
                                             perMicroBatch
                                                 ? sched::UpdateRule::PerMicroBatch
                                                 : sched::UpdateRule::PerStep)
                : sched::generateSchedule(kind, p, m, advance);
    sched::SimulationOptions sim;
    sim.duration = [&](int64_t d, const sched::Instr &instr) -> int64_t {
      switch (instr.kind) {
      case sched::InstrKind::Forward:
        return toNanos(fwd[d]);
      case sched::InstrKind::Backward:
        return toNanos(bwd[d]);
      case sched::InstrKind::Update:
        // PipeDream, SpecTrain and PipeMare update once per micro-batch:
        // the step's fixed cost shared among them.
        return toNanos(perMicroBatch ? upd[d] - fit.fixed + fit.fixed / double(m)
                                     : upd[d]);
      case sched::InstrKind::Send: {
        // Activations go to d+1 across boundary d+1, gradients to d-1
        // across boundary d, a message per value crossing (each pays the
        // link's latency: two 4 KiB values take longer than one of 8).
        int64_t b = instr.peer > d ? d + 1 : d;
        int64_t count = std::max<int64_t>(1, split.boundaryCount[b]);
        return toNanos(double(count) * transfer(split.boundary[b] / count));
      }
      default:
        return 0;
      }
    };
    // Sends as the CPU runtime makes them: up to bufferedSendBytes (4 MiB
    // with single copy; the rings' 256 KiB without) return at once.
    if (options.bufferedSends) {
      sim.bufferedSend = [&](int64_t d, const sched::Instr &instr) {
        int64_t b = instr.peer > d ? d + 1 : d;
        return double(split.boundary[b]) * ratio /
                   double(std::max<int64_t>(1, split.boundaryCount[b])) <=
               double(options.bufferedSendBytes);
      };
      // Single copy: the receiver reads the sender's staging buffer; the
      // rest of a transfer's time (the link's latency: matching, waking,
      // the protocol's steps) passes in flight.
      sim.receiverCopies = true;
      sim.receiverCopy = [&](int64_t d, const sched::Instr &instr) {
        int64_t b = instr.peer > d ? d + 1 : d;
        int64_t count = std::max<int64_t>(1, split.boundaryCount[b]);
        return toNanos(double(count) * copySeconds(split.boundary[b] / count));
      };
    }
    if (!noFlush) {
      sched::SimulationResult result = sched::simulate(schedule.devices, sim);
      if (!result.ok())
        return std::nullopt;
      c.stepSeconds = double(result.makespan) * 1e-9;
      c.bubble = result.bubbleFraction;
      for (int64_t s = 0; s < p; ++s)
        peak[s] = std::max<int64_t>(1, result.peakInFlight[s]);
    } else {
      // No flush: the steady state's step, from runs of k and k + 2 steps
      // (past the warm-up and the drain the difference is two steady steps).
      int64_t drain = 0;
      for (const sched::Program &device : schedule.devices)
        drain = std::max(drain, sched::drainSteps(device, m));
      auto makespan = [&](int64_t steps) -> std::optional<int64_t> {
        std::vector<sched::Program> run;
        for (const sched::Program &device : schedule.devices)
          run.push_back(sched::expandSteps(device, m, steps));
        sched::SimulationResult result = sched::simulate(run, sim);
        if (!result.ok())
          return std::nullopt;
        return result.makespan;
      };
      const int64_t k = drain + 2;
      std::optional<int64_t> shorter = makespan(k), longer = makespan(k + 2);
      if (!shorter || !longer)
        return std::nullopt;
      c.stepSeconds = double(*longer - *shorter) * 0.5e-9;
      const int64_t updates = perMicroBatch ? m : 1;
      double busy = 0;
      for (int64_t s = 0; s < p; ++s) {
        busy += double(m) * (fwd[s] + bwd[s]) + double(updates) * (upd[s] - fit.fixed) +
                fit.fixed;
        peak[s] = sched::theoreticalPeakInFlight(sched::ScheduleKind::OneFOneB, p, m, s, 0);
      }
      c.bubble = c.stepSeconds > 0 ? std::max(0.0, 1.0 - busy / (double(p) * c.stepSeconds))
                                   : 0.0;
    }
  }
  c.throughput =
      c.stepSeconds > 0 ? batch * double(pipelines) / c.stepSeconds : 0;
  for (int64_t s = 0; s < p; ++s) {
    // Weight-sized buffers a no-flush method keeps besides the weights:
    // PipeDream stashes one per micro-batch in flight (p - s at stage s),
    // 2BW two versions in all; SpecTrain, on a stage with a delay, the
    // predicted weights (and plain SGD's last gradient, its direction);
    // PipeMare with T2 the corrected weights and δ.
    const bool delayed = noFlush && s < p - 1;
    double versions = 0.0;
    if (noFlush) {
      if (method == "pipedream")
        versions = double(p - s - 1);
      else if (method == "2bw")
        versions = 1.0;
      else if (method == "spectrain" && delayed)
        versions = options.optimizerStateFactor == 0 ? 2.0 : 1.0;
      else if (pipemareT2 && delayed)
        versions = 2.0;
    }
    // Activations: with recompute, a stage keeps its inputs per micro-batch
    // in flight and one micro-batch's activations while it recomputes.
    double activations =
        recomputes ? double(split.boundary[s]) * ratio * double(peak[s]) +
                         double(split.activationBytes[s]) * ratio
                   : double(split.activationBytes[s]) * ratio * double(peak[s]);
    double bytes =
        double(split.paramBytes[s]) * double(2 + options.optimizerStateFactor + versions) +
        activations + 2.0 * double(split.boundary[s] + split.boundary[s + 1]) * ratio;
    c.memory.push_back(int64_t(std::ceil(bytes)));
  }
  c.peakMemory = *std::max_element(c.memory.begin(), c.memory.end());
  c.fits = options.memoryPerDevice <= 0 || c.peakMemory <= options.memoryPerDevice;
  return c;
}

/// evaluate, and where the plan does not fit the memory with `split` (the
/// balanced cuts), with the fastest cuts whose stages fit, named by the ONNX
/// node each stage ends after (std::nullopt if the function cannot be
/// evaluated; a candidate that does not fit if no cuts fit).
std::optional<Candidate> evaluateFitting(const partition::Problem &problem,
                                         const Split &split,
                                         std::optional<OpBytes> &bytes,
                                         int64_t m, sched::ScheduleKind kind,
                                         int64_t k, const PlannerOptions &options,
                                         int64_t pipes,
                                         const std::string &method = "sync") {
  int64_t p = split.stages;
  std::optional<Candidate> c = evaluate(split, m, kind, k, options, pipes, method);
  // (The re-cut prices activations, not a no-flush method's weight versions.)
  if (!c || c->fits || options.memoryPerDevice <= 0 || p == 1 || method != "sync")
    return c;
  if (!bytes)
    bytes = opBytes(problem);
  auto peak = [&](int64_t s) {
    return sched::theoreticalPeakInFlight(kind, p, m, s, k);
  };
  std::optional<partition::Cuts> cuts =
      memoryAwareCuts(problem, *bytes, p, 1.0 / double(m), peak, options);
  if (!cuts)
    return c;
  Split fitted = makeSplit(problem, p, *cuts);
  std::optional<Candidate> d = evaluate(fitted, m, kind, k, options, pipes);
  if (!d || !d->fits)
    return c;
  for (int64_t cut : *cuts)
    d->cutNodes.push_back(
        CostModel::getNodeName(problem.seq[cut - 1]->getLoc()).str());
  // Cuts by name need a name at every cut.
  if (llvm::any_of(d->cutNodes, [](const std::string &n) { return n.empty(); }))
    return c;
  return d;
}

} // namespace

bool planner::preferred(const Candidate &a, const Candidate &b) {
  if (std::abs(a.throughput - b.throughput) >
      0.005 * std::max(a.throughput, b.throughput))
    return a.throughput > b.throughput;
  if (a.stages * a.pipelines != b.stages * b.pipelines)
    return a.stages * a.pipelines < b.stages * b.pipelines;
  return a.peakMemory < b.peakMemory;
}

PlanSearch planner::searchPlans(func::FuncOp forward,
                                const PlannerOptions &options) {
  PlanSearch search;
  // The partition is cut at the whole batch's costs (as pipe-assign-stages
  // does).
  CostModelOptions partitionCosts = options.cost;
  partitionCosts.profileSamples = double(options.batch);
  CostModel model(partitionCosts);
  partition::Problem problem = partition::buildProblem(forward, model, nullptr);
  std::optional<OpBytes> bytes;
  std::vector<int64_t> divisors;
  // Under a memory limit every divisor (one sample per micro-batch keeps
  // the least in flight); else up to maxMicrobatches.
  const int64_t mostMicrobatches =
      options.memoryPerDevice > 0 ? options.batch
                                  : std::min(options.batch, options.maxMicrobatches);
  for (int64_t m = 1; m <= mostMicrobatches; ++m)
    if (options.batch % m == 0)
      divisors.push_back(m);
  // Stage counts and pipeline counts: every one up to kEveryCountUpTo
  // (so that more devices never plan slower: 11 stages are searched for 12
  // devices too); above, the divisors of the devices and the powers of two
  // below them (a cluster's shapes), not every integer, so that plans for
  // thousands of devices are searched in seconds.
  constexpr int64_t kEveryCountUpTo = 64;
  auto shapes = [](int64_t limit) {
    std::vector<int64_t> values;
    for (int64_t v = 1; v <= limit; ++v)
      if (v <= kEveryCountUpTo || limit % v == 0 || (v & (v - 1)) == 0)
        values.push_back(v);
    return values;
  };
  for (int64_t p : shapes(options.devices)) {
    if (p > problem.size())
      break;
    Split split = balancedSplit(problem, p, options);
    // A plan that does not fit with the balanced cuts is tried again with
    // the fastest cuts whose stages fit (named by ONNX node, so that
    // pipe-compile cuts there: --partition manual).
    auto consider = [&](int64_t m, sched::ScheduleKind kind, int64_t k,
                        int64_t pipes, const std::string &method = "sync") {
      if (std::optional<Candidate> c = evaluateFitting(problem, split, bytes, m, kind,
                                                       k, options, pipes, method))
        search.candidates.push_back(*c);
    };
    std::vector<int64_t> pipeCounts{1};
    if (options.maxPipelines > 1) {
      int64_t most = std::min(options.maxPipelines, options.devices / p);
      pipeCounts = shapes(most);
      if (pipeCounts.back() != most)
        pipeCounts.push_back(most);
    }
    for (int64_t pipes : pipeCounts) {
      if (p == 1) {
        consider(1, sched::ScheduleKind::OneFOneB, 0, pipes);
        continue;
      }
      for (int64_t m : divisors) {
        for (auto kind :
             {sched::ScheduleKind::GPipe, sched::ScheduleKind::OneFOneB})
          consider(m, kind, 0, pipes);
        // Advance forward propagation: more warm-up than 1F1B, less than
        // GPipe.
        for (int64_t k : {1, 2})
          if (p - 1 + k < m)
            consider(m, sched::ScheduleKind::AdvanceForward, k, pipes);
        // The no-flush methods asked for (one pipeline: the compiler runs
        // them without data-parallel replicas).
        // 2BW accumulates M >= p micro-batches into each update
        // (pipe-schedule refuses fewer).
        if (pipes == 1)
          for (const std::string &method : options.asyncMethods)
            if (method != "2bw" || m >= p)
              consider(m, sched::ScheduleKind::OneFOneB, 0, pipes, method);
      }
    }
  }
  std::stable_sort(search.candidates.begin(), search.candidates.end(),
                   [](const Candidate &a, const Candidate &b) {
                     if (a.fits != b.fits)
                       return a.fits;
                     return planner::preferred(a, b);
                   });
  search.smallestMemory = 0;
  for (const Candidate &c : search.candidates)
    if (search.smallestMemory == 0 || c.peakMemory < search.smallestMemory)
      search.smallestMemory = c.peakMemory;
  if (!search.candidates.empty() && search.candidates.front().fits)
    search.best = search.candidates.front();
  return search;
}

std::optional<Candidate>
planner::evaluatePlan(func::FuncOp forward, const PlannerOptions &options,
                      int64_t stages, int64_t microbatches,
                      sched::ScheduleKind kind, int64_t advance,
                      int64_t pipelines) {
  CostModelOptions partitionCosts = options.cost;
  partitionCosts.profileSamples = double(options.batch);
  CostModel model(partitionCosts);
  partition::Problem problem = partition::buildProblem(forward, model, nullptr);
  if (stages < 1 || stages > problem.size() || microbatches < 1 ||
      options.batch % microbatches)
    return std::nullopt;
  Split split = balancedSplit(problem, stages, options);
  std::optional<OpBytes> bytes;
  return evaluateFitting(problem, split, bytes, stages == 1 ? 1 : microbatches,
                         kind, advance, options, pipelines);
}

std::string planner::formatBytes(int64_t bytes) {
  char text[32];
  if (bytes >= (int64_t(1) << 30))
    std::snprintf(text, sizeof text, "%.2f GiB", double(bytes) / double(1 << 30));
  else if (bytes >= (1 << 20))
    std::snprintf(text, sizeof text, "%.2f MiB", double(bytes) / double(1 << 20));
  else
    std::snprintf(text, sizeof text, "%.1f KiB", double(bytes) / 1024.0);
  return text;
}

std::string planner::formatCandidates(const PlanSearch &search, size_t rows) {
  std::string text;
  llvm::raw_string_ostream os(text);
  bool pipes = llvm::any_of(search.candidates,
                            [](const Candidate &c) { return c.pipelines > 1; });
  os << llvm::formatv("{0,-3} ", "#");
  if (pipes)
    os << llvm::formatv("{0,3} ", "P");
  os << llvm::formatv("{0,6} {1,4} {2,-9} {3,12} {4,12} {5,7} {6,12} {7}\n",
                      "stages", "M", "schedule", "step (ms)", "samples/s",
                      "bubble", "peak mem", "fits");
  for (size_t i = 0; i < search.candidates.size() && i < rows; ++i) {
    const Candidate &c = search.candidates[i];
    std::string kind =
        c.stages == 1 ? "-" : c.method != "sync" ? c.method
                                                 : std::string(sched::stringifyScheduleKind(c.schedule));
    if (c.schedule == sched::ScheduleKind::AdvanceForward)
      kind += " K=" + std::to_string(c.advance);
    os << llvm::formatv("{0,-3} ", i + 1);
    if (pipes)
      os << llvm::formatv("{0,3} ", c.pipelines);
    os << llvm::formatv("{0,6} {1,4} {2,-9} {3,12} {4,12} {5,7} {6,12} {7}\n",
                        c.stages, c.microbatches, kind,
                        llvm::formatv("{0:f3}", c.stepSeconds * 1e3).str(),
                        llvm::formatv("{0:f1}", c.throughput).str(),
                        llvm::formatv("{0:f3}", c.bubble).str(),
                        formatBytes(c.peakMemory), c.fits ? "yes" : "no");
  }
  return text;
}
