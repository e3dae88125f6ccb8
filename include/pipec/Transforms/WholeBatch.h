//===- WholeBatch.h - whole-batch stages (--batchnorm full-batch) -*- C++ -*-===//
//
// With `--batchnorm full-batch` a stage that holds a training-mode
// BatchNormalization is a *whole-batch stage*: it is not micro-batched but
// runs its forward and its backward once per step on the concatenation of
// the M micro-batches it receives, so that its batch statistics are the
// whole mini-batch's. Between stages every value still travels as M
// micro-batch slices. The passes mark what they need with these attributes
// (pipe.* names the pipe dialect leaves alone):
//
//   pipe.whole_batch_stages   on the step function and then the module:
//                             the whole-batch stages (pipe-microbatch)
//   pipe.microbatch_concat    on an onnx.Concat of M copies of one
//                             micro-batch value inside a whole-batch stage:
//                             operand k stands for micro-batch k
//                             (pipe-microbatch; pipe-schedule wires the M
//                             micro-batches in)
//   pipe.microbatch_split     on an onnx.Split of a whole-batch value into M
//                             parts: result k is micro-batch k's slice
//   pipe.whole_batch          on the pipe.stage functions of a whole-batch
//                             stage (after pipe-schedule expanded them) and
//                             on the pipe.forward / pipe.backward that run
//                             them once for all M micro-batches
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_TRANSFORMS_WHOLEBATCH_H
#define PIPEC_TRANSFORMS_WHOLEBATCH_H

#include "llvm/ADT/StringRef.h"

namespace mlir::pipec::wholebatch {
inline constexpr llvm::StringLiteral kStages = "pipe.whole_batch_stages";
inline constexpr llvm::StringLiteral kConcat = "pipe.microbatch_concat";
inline constexpr llvm::StringLiteral kSplit = "pipe.microbatch_split";
inline constexpr llvm::StringLiteral kWholeBatch = "pipe.whole_batch";
} // namespace mlir::pipec::wholebatch

#endif
