//===- OnnxOpsHelpers.h - helpers shared by OnnxOps*.cpp --------*- C++ -*-===//
//
// Small checks and shape arithmetic used by the shape functions and
// verifiers in OnnxOps.cpp, OnnxOpsElementwise.cpp, OnnxOpsNN.cpp and
// OnnxOpsShape.cpp. Private to those files: all have internal linkage.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_DIALECTS_ONNX_ONNXOPSHELPERS_H
#define PIPEC_DIALECTS_ONNX_ONNXOPSHELPERS_H

#include "dialects/onnx/ShapeHelpers.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallSet.h"

namespace mlir::pipec::onnx {

static constexpr int64_t kDynamic = ShapedType::kDynamic;

static inline bool isDynamic(int64_t d) { return ShapedType::isDynamic(d); }

/// True when two views of one dimension cannot be the same size.
static inline bool conflicts(int64_t a, int64_t b) {
  return !isDynamic(a) && !isDynamic(b) && a != b;
}

/// `type` (a tensor type) with element type `element`.
static inline Type withElementType(Type type, Type element) {
  if (auto tensor = llvm::dyn_cast<TensorType>(type))
    return tensor.clone(element);
  return unranked(element);
}

/// Product of `dims`, dynamic when any is.
static inline int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (isDynamic(d))
      return kDynamic;
    n *= d;
  }
  return n;
}

/// Normalizes and checks a list of distinct axes of a rank-`rank` tensor.
static inline FailureOr<SmallVector<int64_t>>
normalizeAxes(Operation *op, ArrayRef<int64_t> axes, int64_t rank) {
  SmallVector<int64_t> out;
  llvm::SmallSet<int64_t, 8> seen;
  for (int64_t axis : axes) {
    auto a = normalizeAxis(op, axis, rank);
    if (failed(a))
      return failure();
    if (!seen.insert(*a).second)
      return op->emitOpError() << "axis " << axis << " appears twice";
    out.push_back(*a);
  }
  return out;
}

/// Checks that an optional scalar-like operand has rank 0.
static inline LogicalResult checkScalar(Operation *op, Value v,
                                        StringRef name) {
  if (auto t = getRanked(v); t && t.getRank() != 0)
    return op->emitOpError() << name << " must be a scalar, got " << t;
  return success();
}

static inline LogicalResult checkSameElementType(Operation *op, Value a,
                                                 Value b, StringRef aName,
                                                 StringRef bName) {
  if (isNone(a) || isNone(b) || getElementType(a) == getElementType(b))
    return success();
  return op->emitOpError() << aName << " and " << bName
                           << " have different element types "
                           << getElementType(a) << " and "
                           << getElementType(b);
}

/// Results of rank beyond this are refused: a non-constant axes or shape
/// operand with a huge declared length would otherwise size a result type
/// by it (found by pipe-import-fuzzer).
inline constexpr int64_t kMaxResultRank = 64;

inline LogicalResult checkResultRank(Operation *op, int64_t rank) {
  if (rank > kMaxResultRank)
    return op->emitOpError() << "would make a rank-" << rank
                             << " result; ranks up to " << kMaxResultRank
                             << " are supported";
  return success();
}

} // namespace mlir::pipec::onnx

#endif
