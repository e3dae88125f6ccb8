//===- ShapeFunctions.h - parts of shape functions folders reuse -*- C++ -*-===//
#ifndef PIPEC_DIALECTS_ONNX_SHAPEFUNCTIONS_H
#define PIPEC_DIALECTS_ONNX_SHAPEFUNCTIONS_H

#include "dialects/onnx/OnnxDialect.h"
#include "dialects/onnx/ShapeHelpers.h"

namespace mlir::pipec::onnx {

/// The [start, end) range of the input dimensions Shape returns.
std::pair<int64_t, int64_t> shapeRange(ShapeOp op, int64_t rank);

/// Slice's range on each dimension of `shape`: nullopt where unknown (a
/// dynamic dimension, or non-constant starts/ends/steps). `axesKnown` is
/// false when the sliced axes themselves are unknown. Emits an error on the
/// op for inconsistent operands.
FailureOr<SmallVector<std::optional<SliceRange>>>
resolveSlice(SliceOp op, ArrayRef<int64_t> shape, bool &axesKnown);

} // namespace mlir::pipec::onnx

#endif
