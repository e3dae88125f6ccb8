//===- Partitioners.h - contiguous partitions of an op sequence -*- C++ -*-===//
//
// The algorithms behind pipe-assign-stages' balanced and dp strategies, on
// the function seen as a sequence of ops with costs and, at every cut point,
// the activations crossing it.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_LIB_TRANSFORMS_PARTITION_PARTITIONERS_H
#define PIPEC_LIB_TRANSFORMS_PARTITION_PARTITIONERS_H

#include "pipec/Analysis/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::pipec::partition {

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
  /// In a training step: the ops that are neither forward (feeding the
  /// loss) nor floating: the backward and the optimizer update, in order.
  SmallVector<Operation *> backward;
  DenseMap<Operation *, int64_t> position;
  /// prefix[i]: summed training time of seq[0..i), seconds.
  SmallVector<double> prefix;
  /// crossBytes[k] / crossCount[k]: the values defined before cut k and used
  /// at or after it (the terminator counts as position n). Index 0 and n
  /// are unused (0).
  SmallVector<int64_t> crossBytes;
  SmallVector<int64_t> crossCount;
  /// sharedGradient[k]: two values crossing cut k get one and the same
  /// gradient from an Add at or after it (its operands, or values an
  /// operand adds a bias to: a residual connection's Add, cut right before
  /// it or its branch's bias). pipe-split-stages sends that gradient once
  /// for each (splitSharedGradients), so such a cut moves two activations
  /// and two gradients where the cut after the Add moves one of each, for
  /// the cost of one Add: the balanced and dp partitions cut elsewhere
  /// where they can.
  SmallVector<bool> sharedGradient;

  int64_t size() const { return seq.size(); }
  double cost(int64_t begin, int64_t end) const {
    return prefix[end] - prefix[begin];
  }
};

/// A partition: cut points 0 < c_1 < ... < c_{S-1} < n.
using Cuts = SmallVector<int64_t>;

/// Function arguments that hold weights rather than per-sample data
/// (`pipe.param`, `pipe.state`).
bool isWeightArgument(Value value);

/// The sequence of `func`: with `forwardOps`, only those (a training step's
/// forward) are in it, the other non-floating ops go to `backward`.
Problem buildProblem(func::FuncOp func, const CostModel &model,
                     const DenseSet<Operation *> *forwardOps);

/// The contiguous split into `stages` stages minimizing the most expensive
/// stage over the narrow cut points (see chooseCandidates), ties broken
/// toward the fewest crossing bytes.
Cuts partitionBalanced(const Problem &problem, int64_t stages, double slack,
                       double tolerance);

/// PipeDream's dynamic program, one worker per stage, over the layers the
/// narrow cut points delimit.
Cuts partitionPipeDream(const Problem &problem, const CostModel &model,
                        int64_t stages, double slack, double tolerance);

/// The stage of each sequence op, given the cut points.
SmallVector<int64_t> stagesFromCuts(int64_t n, ArrayRef<int64_t> cuts);

} // namespace mlir::pipec::partition

#endif // PIPEC_LIB_TRANSFORMS_PARTITION_PARTITIONERS_H
