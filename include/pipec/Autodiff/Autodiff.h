//===- Autodiff.h - reverse-mode differentiation of onnx code ---*- C++ -*-===//
#ifndef PIPEC_AUTODIFF_AUTODIFF_H
#define PIPEC_AUTODIFF_AUTODIFF_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/LLVM.h"

namespace mlir::pipec::autodiff {

/// Attaches the VJP rules (VjpOpInterface external models) to the onnx ops.
void registerVjpRules(DialectRegistry &registry);

/// Reverse-mode differentiation of the straight-line code in `loss`'s block
/// before `builder`'s insertion point: builds there the gradient of `loss`
/// (seeded with ones of its type) with respect to each of `wrt`. Only values
/// that depend on some `wrt` and reach `loss` get a gradient; gradients of a
/// value used several times are summed. Forward ops may be replaced by
/// equivalents with more results (VjpOpInterface::prepareForVjp); `loss` and
/// `wrt` are updated then. Returns, per `wrt`, its gradient or null when
/// `loss` does not depend on it. Emits an error (an op without a rule names
/// the op) and fails otherwise.
FailureOr<SmallVector<Value>> buildGradients(OpBuilder &builder, Value &loss,
                                             SmallVectorImpl<Value> &wrt);

} // namespace mlir::pipec::autodiff

#endif
