//===- Profile.h - measured op costs of one model on one machine -*- C++ -*-===//
//
// What `pipe-profile` measures and the cost model, the partitioners and the
// planner (`pipe-compile --profile P.json`, `--auto`) read: for every ONNX
// node of a model, its forward and backward seconds at several micro-batch
// sizes, the optimizer update's rate, and the link between two ranks
// (latency, bandwidth), tagged with the model's hash and the machine. The
// schema is docs/profile-json.md; a profile of another model or machine is
// refused with one line.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_ANALYSIS_PROFILE_H
#define PIPEC_ANALYSIS_PROFILE_H

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlir::pipec {

/// 2: op times net of the trace event's own cost (op_event_s), the update's
/// time (update_s). Version 1 profiles are refused (measure again).
inline constexpr int64_t kProfileVersion = 2;

struct OpTimes {
  /// Seconds per call at each of OpProfile::rows, forward and backward
  /// (the gradient ops autodiff made of the node). Same length as rows.
  std::vector<double> forward, backward;
};

struct OpProfile {
  /// FNV-1a 64 of the ONNX file's bytes, hex.
  std::string modelHash;
  /// machineId() of where it was measured.
  std::string machine;
  std::string target;
  /// The micro-batch sizes (samples) measured, increasing.
  std::vector<int64_t> rows;
  llvm::StringMap<OpTimes> ops;
  /// Seconds of whole steps at each of rows (kernels, the runtime's own
  /// work and the update), measured without per-op events: fitStep splits
  /// them into a fixed cost per step and the ops.
  std::vector<double> stepSeconds;
  /// Seconds of one step's optimizer update on one device (0: unknown).
  double updateSeconds = 0;
  /// Seconds one per-op trace event added to the op it timed (already taken
  /// off forward and backward; informational).
  double opEventSeconds = 0;
  /// Seconds the stages of a 2-rank pipeline on this machine spend in their
  /// forwards and backwards, over the sum of the same nodes' times above
  /// (0: not measured). The ops of a rank run slower beside a second rank
  /// than in the one-device step (the transformer's by 15% here, the CNN's
  /// not): the planner scales stage times of pipelines by it instead of
  /// fitStep's scale.
  double pipelineFactor = 0;
  /// Bytes per second of the optimizer update (weights, gradients and
  /// state read and written).
  double updateBytesPerSecond = 0;
  /// Point-to-point transfers between two ranks: seconds = latency + bytes /
  /// bandwidth (0: not measured).
  double linkLatency = 0;
  double linkBandwidth = 0;
  /// The measured transfers behind them: {bytes, seconds} by increasing
  /// bytes (pipe-linkbench's sizes, 4 B to 16 MiB); empty: not measured.
  /// The time steps up between 1 KiB and 4 KiB, which the line misses.
  std::vector<std::pair<double, double>> linkTimes;

  /// Seconds of one transfer of `bytes`: linkTimes interpolated (below the
  /// smallest size its time; above the largest, that time + the extra
  /// bytes / bandwidth); latency + bytes / bandwidth without linkTimes.
  double linkSeconds(double bytes) const;

  /// Seconds of `node`'s forward / backward at `samples` per micro-batch:
  /// the least-squares line a + c * samples through the measured points
  /// (the measured value where only one), never below the smallest
  /// measurement's 10%; std::nullopt where the node was not measured.
  std::optional<double> forwardAt(llvm::StringRef node, double samples) const;
  std::optional<double> backwardAt(llvm::StringRef node, double samples) const;
  /// Forward + backward seconds of every node at rows[i], as measured.
  double opsAt(size_t i) const;
};

/// A step of b samples per micro-batch on one device:
///   step(b) = fixed + scale * ops(b) + update,
/// where ops(b) is the profile's nodes' time. `fixed` is paid once per step
/// (feeding the inputs, copying the loss, the step loop), whatever the
/// micro-batches; `scale` is what the per-op times leave out of each
/// micro-batch (allocation, dispatch between ops).
struct StepFit {
  double fixed = 0;
  double scale = 1;
};

/// The fit of `steps[i] - update = fixed + scale * ops[i]` over the sizes
/// where both are positive: least squares relative to each step (the noise
/// of a step time is a share of it), fixed >= 0, scale within [0.5, 2].
/// With one size (or equal ops), scale 1 and the rest fixed (scale below 1
/// where the ops exceed the step). {0, 1} where nothing was measured.
StepFit fitStepCost(const std::vector<double> &ops,
                    const std::vector<double> &steps, double update);
/// fitStepCost of the profile's steps, node times and update.
StepFit fitStep(const OpProfile &profile);

/// FNV-1a 64 of `bytes`, as 16 hex digits.
std::string hashModel(llvm::StringRef bytes);
/// This machine: CPU model, logical cores (and the GPU where the target is
/// cuda: its name from the caller).
std::string machineId();

/// Reads a profile; on failure returns std::nullopt with `error` set to one
/// line naming the file.
std::optional<OpProfile> readProfile(llvm::StringRef path, std::string &error);
/// Writes `profile` as JSON; false with `error` set on failure.
bool writeProfile(llvm::StringRef path, const OpProfile &profile,
                  std::string &error);
/// Checks that `profile` (read from `path`) was measured for this model and
/// machine and target; one-line error otherwise.
bool checkProfile(const OpProfile &profile, llvm::StringRef path,
                  llvm::StringRef modelHash, llvm::StringRef target,
                  std::string &error);

} // namespace mlir::pipec

#endif // PIPEC_ANALYSIS_PROFILE_H
