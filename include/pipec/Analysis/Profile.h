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
#include <vector>

namespace mlir::pipec {

inline constexpr int64_t kProfileVersion = 1;

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
  /// Summed seconds of whole steps at each of rows (kernels, the runtime's
  /// own work and the update), to calibrate what per-op times leave out.
  std::vector<double> stepSeconds;
  /// Bytes per second of the optimizer update (weights, gradients and
  /// state read and written).
  double updateBytesPerSecond = 0;
  /// Point-to-point transfers between two ranks: seconds = latency + bytes /
  /// bandwidth (0: not measured).
  double linkLatency = 0;
  double linkBandwidth = 0;

  /// Seconds of `node`'s forward / backward at `samples` per micro-batch:
  /// the least-squares line a + c * samples through the measured points
  /// (the measured value where only one), never below the smallest
  /// measurement's 10%; std::nullopt where the node was not measured.
  std::optional<double> forwardAt(llvm::StringRef node, double samples) const;
  std::optional<double> backwardAt(llvm::StringRef node, double samples) const;
};

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
