//===- Inference.h - a forward computation in inference mode ---*- C++ -*-===//
//
// What PyTorch's model.eval() changes in an exported training graph: a
// Dropout passes its input through (training_mode false) and a
// training-mode BatchNormalization normalises with its running statistics
// instead of the batch's (training_mode 0; its running-statistic results
// are then no update: callers drop them). Used for the evaluation pass
// (pipe-lower-programs' @pipe_eval, pipe-compile's one-device eval).
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_AUTODIFF_INFERENCE_H
#define PIPEC_AUTODIFF_INFERENCE_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Value.h"

#include <optional>
#include <string>

namespace mlir::pipec {

/// Rewrites the Dropout and BatchNormalization ops of `body` (not nested
/// regions) to inference mode. Returns the number of ops changed.
int toInferenceMode(Block &body);

/// The evaluation's top-1 accuracy, as two f32 scalars the evaluation sums
/// over its batches: `correct`, the labels whose class has the largest
/// score (ArgMax over axis 1 of the classification loss's scores, the
/// first on ties, as torch.argmax), and `counted`, the labels counted (all
/// but those equal to the loss's ignore_index). The evaluation's output
/// array holds them after the loss, in these slots (pipe.metric).
struct AccuracyCounts {
  Value correct, counted;
};
inline constexpr int64_t kMetricCorrect = 1, kMetricCounted = 2;

/// Builds the counts before `body`'s terminator, summed over its
/// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss ops, of which there
/// must be `losses` (one; a whole-batch pipeline stage's M). Where the
/// accuracy is not defined (no classification loss, several terms of one
/// loss, scores that are not f32), returns none and says why in
/// `unavailable`; where an op cannot be built, none and an empty reason
/// (the op's error was emitted).
std::optional<AccuracyCounts> buildAccuracyCounts(Block &body, unsigned losses,
                                                  std::string &unavailable);

/// The classification losses (SoftmaxCrossEntropyLoss,
/// NegativeLogLikelihoodLoss) in `root`, nested ones included.
int64_t countClassificationLosses(Operation *root);
/// Why a loss with `terms` classification terms (not 1) has no accuracy.
std::string noAccuracyReason(int64_t terms);

} // namespace mlir::pipec

#endif // PIPEC_AUTODIFF_INFERENCE_H
