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

namespace mlir::pipec {

/// Rewrites the Dropout and BatchNormalization ops of `body` (not nested
/// regions) to inference mode. Returns the number of ops changed.
int toInferenceMode(Block &body);

} // namespace mlir::pipec

#endif // PIPEC_AUTODIFF_INFERENCE_H
