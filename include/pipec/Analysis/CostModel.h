//===- CostModel.h - static cost of onnx ops --------------------*- C++ -*-===//
//
// An analytical cost model of the onnx dialect, for partitioning: FLOPs and
// bytes moved per op from the static shapes, a backward-cost factor, and a
// time estimate  flops / peak + bytes / memory bandwidth.  It is a roofline
// sum, not a profile: good for ranking and balancing stages, not for
// predicting wall time.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_ANALYSIS_COSTMODEL_H
#define PIPEC_ANALYSIS_COSTMODEL_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

#include <cstdint>
#include <optional>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::pipec {

/// The machine the estimate is for. The defaults are round numbers of one
/// modern accelerator; only their ratios matter for balancing.
struct CostModelOptions {
  /// Peak arithmetic rate, FLOP/s.
  double peakFlops = 100e12;
  /// Memory bandwidth, bytes/s.
  double memoryBandwidth = 2e12;
  /// Link bandwidth between stages, bytes/s (communication terms).
  double linkBandwidth = 25e9;
  /// Backward cost / forward cost of ops with a weight-like operand (Gemm,
  /// MatMul, Conv): both the input and the weight gradient are products of
  /// the forward's size.
  double weightedBackwardFactor = 2.0;
  /// Backward cost / forward cost of the other differentiable ops.
  double backwardFactor = 1.0;
  /// Measured times (pipe-profile, pipec/Analysis/Profile.h) by ONNX node
  /// name, at `profileSamples` samples per call: the ops of a measured node
  /// share its time; the others keep the roofline estimate. Not owned.
  const struct OpProfile *profile = nullptr;
  double profileSamples = 0;
};

/// What one op costs, forward.
struct OpCost {
  double flops = 0;
  /// Bytes of the tensor operands read (parameters included) and of the
  /// results written.
  int64_t inputBytes = 0;
  int64_t outputBytes = 0;
  /// Bytes of the operands that are `pipe.param` function arguments.
  int64_t paramBytes = 0;
  /// Backward cost / forward cost (0 for ops nothing is differentiated
  /// through: constants, shape computations).
  double backwardFactor = 1.0;
  /// False where the op is not one the model knows, or a shape is not
  /// static: the numbers are then a lower bound (elementwise guess).
  bool known = true;

  int64_t bytes() const { return inputBytes + outputBytes; }
};

class CostModel {
public:
  explicit CostModel(CostModelOptions options = {}) : options(options) {}

  const CostModelOptions &getOptions() const { return options; }

  /// FLOPs, bytes and backward factor of one op.
  OpCost getOpCost(Operation *op) const;

  /// Forward time estimate, seconds.
  double getForwardTime(const OpCost &cost) const;
  /// Backward time estimate, seconds: forward time x backward factor.
  double getBackwardTime(const OpCost &cost) const {
    return getForwardTime(cost) * cost.backwardFactor;
  }
  /// Forward plus backward, seconds: what a stage spends on the op per
  /// micro-batch in a training step.
  double getTrainingTime(const OpCost &cost) const {
    return getForwardTime(cost) + getBackwardTime(cost);
  }
  /// With a profile, the measured forward (backward) time of the op's
  /// node divided among the node's ops.
  double getForwardTime(Operation *op) const;
  double getBackwardTime(Operation *op) const;
  double getTrainingTime(Operation *op) const {
    return getForwardTime(op) + getBackwardTime(op);
  }
  /// The ONNX node an op was imported from (its NameLoc), or "".
  static StringRef getNodeName(Location loc);
  /// Time to move `bytes` over the link between two stages, seconds.
  double getTransferTime(int64_t bytes) const {
    return double(bytes) / options.linkBandwidth;
  }

  /// Size in bytes of a value of static shape (its activation size when it
  /// crosses stages); 0 for `none`, std::nullopt for dynamic shapes.
  static std::optional<int64_t> getValueBytes(Value value);
  /// Number of elements of a statically shaped tensor value.
  static std::optional<int64_t> getNumElements(Value value);
  /// Bytes of the op's operands that are `pipe.param` function arguments.
  static int64_t getParamBytes(Operation *op);
  /// Whether `value` is a function argument marked `pipe.param`.
  static bool isParam(Value value);

private:
  /// The measured share of `op`'s node, or std::nullopt.
  std::optional<double> measured(Operation *op, bool backward) const;
  CostModelOptions options;
  /// Ops per node name in each function (profile shares).
  mutable llvm::DenseMap<Operation *, llvm::StringMap<int64_t>> nodeOps;
};

} // namespace mlir::pipec

#endif // PIPEC_ANALYSIS_COSTMODEL_H
