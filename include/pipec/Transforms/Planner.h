//===- Planner.h - choosing stages, micro-batches and a schedule -*- C++ -*-===//
//
// `pipe-compile --auto`: for every plan of at most `devices` devices
// (p stages; M micro-batches dividing the batch; GPipe or 1F1B; AvgPipe's
// advance forward propagation where memory allows more warm-up), the stages
// the partitioner would cut (partitionBalanced over the cost model, measured
// op times where a profile is given), each stage's forward, backward and
// update time at B/M samples (with a profile: its measured ops times the
// profile's fitted scale per micro-batch, and its fixed cost per step once
// per step on every device: fitStep in pipec/Analysis/Profile.h), the
// transfers at each cut, then the schedule
// simulator (lib/Analysis) for the step time, the bubble and the peak
// in-flight micro-batches, and a memory estimate per device. The fastest
// plan that fits `--memory-per-device` wins.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_TRANSFORMS_PLANNER_H
#define PIPEC_TRANSFORMS_PLANNER_H

#include "pipec/Analysis/CostModel.h"
#include "pipec/Analysis/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::pipec::planner {

struct PlannerOptions {
  /// Devices available (one stage per device).
  int64_t devices = 1;
  /// Samples per step.
  int64_t batch = 1;
  /// Largest M considered.
  int64_t maxMicrobatches = 64;
  /// Largest P of data-parallel pipelines considered (each pipeline reads
  /// its own mini-batch: P x batch samples per step).
  int64_t maxPipelines = 1;
  /// Bytes a device may hold; 0: no limit.
  int64_t memoryPerDevice = 0;
  /// Optimizer state per parameter byte (sgd 0, momentum 1, adam 2).
  int64_t optimizerStateFactor = 0;
  /// Time model where no profile measures an op: the roofline
  /// (flops / peak + bytes / memory bandwidth) plus a fixed cost per op call
  /// (kernel launch, the runtime's bookkeeping).
  CostModelOptions cost;
  double perOpSeconds = 2e-6;
  /// Transfers: latency + bytes / bandwidth.
  double linkLatency = 5e-6;
  double linkBandwidth = 5e9;
  /// Optimizer updates: bytes read and written per second.
  double updateBytesPerSecond = 1e10;
  /// Whether the runtime's sends of up to bufferedSendBytes return at once
  /// (buffered or through the shared-memory rings, the receiver copying;
  /// tools/common/MpiFlags.h runtimeBufferedSendBytes); false: every send
  /// waits for its receiver (rendezvous).
  bool bufferedSends = true;
  int64_t bufferedSendBytes = int64_t(4) << 20;
  /// No-flush methods also searched ("pipedream", "2bw", "spectrain",
  /// "pipemare"): 1F1B without a flush between steps, so no fill and drain
  /// bubble per step, but they train on stale weights
  /// (../shared/METHODS.md), so only on request. SpecTrain and PipeMare
  /// recompute each stage's forward in its backward (they run the backward
  /// on other weights than the forward), and keep no stashed versions.
  std::vector<std::string> asyncMethods;
  /// PipeMare's discrepancy correction (T2) decay, as pipe-compile's
  /// --discrepancy-correction; < 0: off (then PipeMare keeps no second
  /// weight copy).
  double discrepancyCorrection = -1.0;
  /// Partitioner settings (as pipe-assign-stages').
  double cutSlack = 2.0;
  double tolerance = 0.1;
};

struct Candidate {
  int64_t stages = 1;
  /// Data-parallel pipelines of `stages` each.
  int64_t pipelines = 1;
  int64_t microbatches = 1;
  schedule::ScheduleKind schedule = schedule::ScheduleKind::OneFOneB;
  /// afp's K.
  int64_t advance = 0;
  /// "sync", or a no-flush method ("pipedream", "2bw": schedule is 1F1B's).
  std::string method = "sync";
  /// Predicted seconds per step, samples per second (P x batch per step).
  double stepSeconds = 0;
  double throughput = 0;
  /// Idle share of devices x step time.
  double bubble = 0;
  /// Per device: predicted peak bytes; the most of them.
  std::vector<int64_t> memory;
  int64_t peakMemory = 0;
  /// Per stage: forward + backward seconds of one micro-batch.
  std::vector<double> stageSeconds;
  bool fits = true;
  /// Where the balanced partition did not fit the memory: the ONNX nodes
  /// after which a stage ends in the fastest partition that fits (compile
  /// with --partition manual --cut ...); empty: the balanced partition.
  std::vector<std::string> cutNodes;

  /// "4 stages, M=8, 1f1b".
  std::string describe() const;
};

struct PlanSearch {
  /// Every plan evaluated, fastest first (the ones that fit first).
  std::vector<Candidate> candidates;
  /// The chosen plan: the fastest that fits; std::nullopt where none does.
  std::optional<Candidate> best;
  /// The smallest peak memory of any plan (what --memory-per-device must
  /// allow at least).
  int64_t smallestMemory = 0;
};

/// The planner's order of preference, the memory aside: the most samples
/// per second (with one pipeline: the shortest step); within 0.5%, fewer
/// devices, then less memory.
bool preferred(const Candidate &a, const Candidate &b);

/// A byte count as the candidate table prints it ("1.20 MiB").
std::string formatBytes(int64_t bytes);

/// Searches the plans for `forward` (the imported model: forward and loss,
/// before autodiff). Stage counts the function cannot be split into are
/// left out.
PlanSearch searchPlans(func::FuncOp forward, const PlannerOptions &options);

/// One plan as searchPlans evaluates it (the balanced partition into
/// `stages`, re-cut to fit options.memoryPerDevice where it does not:
/// Candidate::cutNodes); std::nullopt where the function cannot be split so
/// or M does not divide the batch.
std::optional<Candidate> evaluatePlan(func::FuncOp forward,
                                      const PlannerOptions &options,
                                      int64_t stages, int64_t microbatches,
                                      schedule::ScheduleKind kind,
                                      int64_t advance = 0, int64_t pipelines = 1);

/// The table the tuner prints: the `rows` best candidates, one per line
/// (stages, M, schedule, predicted step time, samples/s, bubble, peak
/// memory, whether it fits).
std::string formatCandidates(const PlanSearch &search, size_t rows);

} // namespace mlir::pipec::planner

#endif // PIPEC_TRANSFORMS_PLANNER_H
