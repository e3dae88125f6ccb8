//===- OnnxOpsShape.cpp - shape ops ---------------------------------------===//
//
// Shape functions of Shape, Reshape, Flatten, Transpose, Concat, Split,
// Slice, Gather, Unsqueeze, Squeeze and Expand, and the parts of them the
// folders reuse (ShapeFunctions.h).
//
//===----------------------------------------------------------------------===//
#include "dialects/onnx/OnnxDialect.h"
#include "dialects/onnx/OnnxOpsHelpers.h"
#include "dialects/onnx/ShapeFunctions.h"
#include "dialects/onnx/ShapeHelpers.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>

using namespace mlir;
using namespace mlir::pipec::onnx;

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

namespace mlir::pipec::onnx {
/// The [start, end) range of Shape's output, clamped as ONNX specifies.
std::pair<int64_t, int64_t> shapeRange(ShapeOp op, int64_t rank) {
  auto clamp = [&](int64_t v) {
    if (v < 0)
      v += rank;
    return std::min(std::max<int64_t>(v, 0), rank);
  };
  int64_t start = op.getStart() ? clamp(*op.getStart()) : 0;
  int64_t end = op.getEnd() ? clamp(*op.getEnd()) : rank;
  return {start, std::max(start, end)};
}
} // namespace mlir::pipec::onnx

LogicalResult ShapeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type i64 = IntegerType::get(getContext(), 64);
  auto t = getRanked(getData());
  if (!t) {
    types.push_back(ranked({kDynamic}, i64));
    return success();
  }
  auto [start, end] = shapeRange(*this, t.getRank());
  types.push_back(ranked({end - start}, i64));
  return success();
}

/// Resolves a Reshape target (0 copies the input dim unless allowzero, -1 is
/// inferred); emits an error on `op` when it cannot hold the input.
static FailureOr<SmallVector<int64_t>>
resolveReshape(Operation *op, ArrayRef<int64_t> input,
               ArrayRef<int64_t> target, bool allowZero) {
  SmallVector<int64_t> out;
  int64_t inferred = -1, known = 1;
  bool inputStatic = llvm::none_of(input, ShapedType::isDynamic);
  bool targetStatic = true;
  for (auto [i, targetDim] : llvm::enumerate(target)) {
    int64_t d = targetDim;
    if (d == -1) {
      if (inferred >= 0)
        return op->emitOpError() << "shape has more than one -1";
      inferred = i;
      out.push_back(kDynamic);
      continue;
    }
    if (d == 0 && !allowZero) {
      if (i >= input.size())
        return op->emitOpError() << "shape copies dimension " << i
                                 << " that the input of rank " << input.size()
                                 << " lacks";
      d = input[i];
    } else if (d < -1) {
      return op->emitOpError() << "shape has invalid dimension " << d;
    }
    out.push_back(d);
    if (isDynamic(d))
      targetStatic = false;
    else
      known *= d;
  }
  if (inferred >= 0 && allowZero && known == 0)
    return op->emitOpError() << "shape has both -1 and 0 with allowzero";
  if (inputStatic && targetStatic) {
    int64_t total = product(input);
    if (inferred >= 0) {
      if (known == 0 || total % known != 0)
        return op->emitOpError() << "cannot reshape " << total
                                 << " elements into the target shape";
      out[inferred] = total / known;
    } else if (total != known) {
      return op->emitOpError() << "cannot reshape " << total
                               << " elements into " << known;
    }
  }
  return out;
}

LogicalResult ReshapeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getData());
  auto st = getRanked(getShape());
  if (st && st.getRank() != 1)
    return emitOpError() << "shape must be 1-D, got " << st;
  auto target = getConstantInts(getShape());
  auto t = getRanked(getData());
  if (!target || !t) {
    if (st && st.hasStaticShape() &&
        failed(checkResultRank(*this, st.getDimSize(0))))
      return failure();
    if (st && st.hasStaticShape())
      types.push_back(
          ranked(SmallVector<int64_t>(st.getDimSize(0), kDynamic), elt));
    else
      types.push_back(unranked(elt));
    return success();
  }
  auto shape = resolveReshape(*this, t.getShape(), *target, getAllowzero());
  if (failed(shape))
    return failure();
  types.push_back(ranked(*shape, elt));
  return success();
}

LogicalResult FlattenOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getInput());
  auto t = getRanked(getInput());
  if (!t) {
    types.push_back(ranked({kDynamic, kDynamic}, elt));
    return success();
  }
  int64_t rank = t.getRank(), axis = getAxis();
  if (axis < -rank || axis > rank)
    return emitOpError() << "axis " << axis << " is out of range for rank "
                         << rank;
  if (axis < 0)
    axis += rank;
  types.push_back(ranked({product(t.getShape().take_front(axis)),
                          product(t.getShape().drop_front(axis))},
                         elt));
  return success();
}

LogicalResult TransposeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getData());
  auto t = getRanked(getData());
  std::optional<ArrayRef<int64_t>> perm = getPerm();
  if (!t) {
    types.push_back(perm ? ranked(SmallVector<int64_t>(perm->size(), kDynamic),
                                  elt)
                         : unranked(elt));
    return success();
  }
  int64_t rank = t.getRank();
  SmallVector<int64_t> order;
  if (perm) {
    order.assign(perm->begin(), perm->end());
    SmallVector<bool> seen(rank, false);
    bool valid = static_cast<int64_t>(order.size()) == rank;
    for (int64_t p : order) {
      if (!valid)
        break;
      valid = p >= 0 && p < rank && !seen[p];
      if (valid)
        seen[p] = true;
    }
    if (!valid)
      return emitOpError() << "perm [" << *perm
                           << "] is not a permutation of the " << rank
                           << " axes";
  } else {
    for (int64_t i = rank - 1; i >= 0; --i)
      order.push_back(i);
  }
  SmallVector<int64_t> out;
  for (int64_t p : order)
    out.push_back(t.getDimSize(p));
  types.push_back(ranked(out, elt));
  return success();
}

LogicalResult ConcatOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (getInputs().empty())
    return emitOpError() << "needs at least one input";
  Type elt = getElementType(getInputs().front());
  int64_t rank = -1;
  for (Value v : getInputs()) {
    if (getElementType(v) != elt)
      return emitOpError() << "inputs have different element types " << elt
                           << " and " << getElementType(v);
    if (auto t = getRanked(v)) {
      if (rank >= 0 && t.getRank() != rank)
        return emitOpError() << "inputs have different ranks " << rank
                             << " and " << t.getRank();
      rank = t.getRank();
    }
  }
  if (rank < 0) {
    types.push_back(unranked(elt));
    return success();
  }
  auto axis = normalizeAxis(*this, getAxis(), rank);
  if (failed(axis))
    return failure();
  SmallVector<int64_t> out(rank, kDynamic);
  out[*axis] = 0;
  for (Value v : getInputs()) {
    auto t = getRanked(v);
    if (!t) {
      out[*axis] = kDynamic;
      continue;
    }
    for (int64_t i = 0; i < rank; ++i) {
      int64_t d = t.getDimSize(i);
      if (i == *axis) {
        out[i] = isDynamic(out[i]) || isDynamic(d) ? kDynamic : out[i] + d;
      } else if (conflicts(out[i], d)) {
        return emitOpError() << "inputs differ in dimension " << i << ": "
                             << out[i] << " and " << d;
      } else if (isDynamic(out[i])) {
        out[i] = d;
      }
    }
  }
  types.push_back(ranked(out, elt));
  return success();
}

LogicalResult SplitOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getInput());
  size_t n = getOutputs().size();
  if (n == 0)
    return emitOpError() << "needs at least one result";
  if (!isNone(getSplit()) && getNumOutputs())
    return emitOpError() << "takes either a split input or num_outputs, not "
                            "both";
  if (auto k = getNumOutputs();
      k && static_cast<int64_t>(*k) != static_cast<int64_t>(n))
    return emitOpError() << "num_outputs is " << static_cast<int64_t>(*k)
                         << " but the op has " << n << " results";
  if (auto ts = getRanked(getSplit()); ts && ts.getRank() != 1)
    return emitOpError() << "split must be 1-D, got " << ts;
  auto t = getRanked(getInput());
  if (!t) {
    types.append(n, unranked(elt));
    return success();
  }
  auto axis = normalizeAxis(*this, getAxis(), t.getRank());
  if (failed(axis))
    return failure();
  int64_t dim = t.getDimSize(*axis);
  SmallVector<int64_t> sizes(n, kDynamic);
  if (!isNone(getSplit())) {
    if (auto split = getConstantInts(getSplit())) {
      if (split->size() != n)
        return emitOpError() << "split has " << split->size()
                             << " sizes but the op has " << n << " results";
      int64_t total = 0;
      for (int64_t s : *split) {
        if (s < 0)
          return emitOpError() << "split has negative size " << s;
        total += s;
      }
      if (conflicts(total, dim))
        return emitOpError() << "split sizes add up to " << total
                             << " but dimension " << *axis << " is " << dim;
      sizes.assign(split->begin(), split->end());
    }
  } else if (!isDynamic(dim)) {
    if (getNumOutputs()) {
      int64_t chunk = (dim + n - 1) / n;
      int64_t last = dim - chunk * static_cast<int64_t>(n - 1);
      if (last <= 0 && dim > 0)
        return emitOpError() << "cannot split dimension " << *axis
                             << " of size " << dim << " into " << n
                             << " parts";
      sizes.assign(n, chunk);
      sizes.back() = last;
    } else {
      if (dim % static_cast<int64_t>(n) != 0)
        return emitOpError() << "cannot split dimension " << *axis
                             << " of size " << dim << " evenly into " << n
                             << " parts";
      sizes.assign(n, dim / n);
    }
  }
  for (int64_t s : sizes) {
    SmallVector<int64_t> shape(t.getShape());
    shape[*axis] = s;
    types.push_back(ranked(shape, elt));
  }
  return success();
}

namespace mlir::pipec::onnx {
/// Slice's per-axis ranges on `shape`: one entry per dimension, nullopt when
/// unknown (dynamic dimension, or non-constant starts/ends/steps). `axesKnown`
/// tells whether the sliced axes are known at all.
FailureOr<SmallVector<std::optional<SliceRange>>>
resolveSlice(SliceOp op, ArrayRef<int64_t> shape, bool &axesKnown) {
  int64_t rank = shape.size();
  SmallVector<std::optional<SliceRange>> ranges;
  for (int64_t d : shape)
    ranges.push_back(isDynamic(d) ? std::nullopt
                                  : std::optional<SliceRange>({0, 1, d}));
  // Lengths from the operand types where the values are unknown.
  int64_t count = kDynamic;
  for (auto [v, name] :
       {std::pair<Value, StringRef>{op.getStarts(), "starts"},
        {op.getEnds(), "ends"},
        {op.getAxes(), "axes"},
        {op.getSteps(), "steps"}}) {
    auto t = getRanked(v);
    if (!t)
      continue;
    if (t.getRank() != 1)
      return op.emitOpError() << name << " must be 1-D, got " << t;
    if (conflicts(count, t.getDimSize(0)))
      return op.emitOpError() << "starts, ends, axes and steps must have the "
                                 "same length";
    if (!isDynamic(t.getDimSize(0)))
      count = t.getDimSize(0);
  }
  auto starts = getConstantInts(op.getStarts());
  auto ends = getConstantInts(op.getEnds());
  auto steps = getConstantInts(op.getSteps());
  if (steps && llvm::is_contained(*steps, 0))
    return op.emitOpError() << "steps must not be zero";
  std::optional<SmallVector<int64_t>> axes;
  if (isNone(op.getAxes())) {
    if (!isDynamic(count)) {
      axes.emplace();
      for (int64_t i = 0; i < count; ++i)
        axes->push_back(i);
    }
  } else {
    axes = getConstantInts(op.getAxes());
  }
  axesKnown = axes.has_value();
  if (!axes)
    return ranges;
  auto normalized = normalizeAxes(op, *axes, rank);
  if (failed(normalized))
    return failure();
  bool valuesKnown = starts && ends && (isNone(op.getSteps()) || steps);
  if (valuesKnown &&
      (starts->size() != axes->size() || ends->size() != axes->size() ||
       (steps && steps->size() != axes->size())))
    return op.emitOpError() << "starts, ends, axes and steps must have the "
                               "same length";
  for (auto [i, axis] : llvm::enumerate(*normalized)) {
    if (!valuesKnown || isDynamic(shape[axis])) {
      ranges[axis] = std::nullopt;
      continue;
    }
    int64_t step = steps ? (*steps)[i] : 1;
    ranges[axis] = resolveSliceRange(shape[axis], (*starts)[i], (*ends)[i],
                                     step);
  }
  return ranges;
}
} // namespace mlir::pipec::onnx

LogicalResult SliceOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getData());
  auto t = getRanked(getData());
  if (!t) {
    types.push_back(unranked(elt));
    return success();
  }
  bool axesKnown = false;
  auto ranges = resolveSlice(*this, t.getShape(), axesKnown);
  if (failed(ranges))
    return failure();
  SmallVector<int64_t> out;
  for (auto &range : *ranges)
    out.push_back(axesKnown && range ? range->size : kDynamic);
  types.push_back(ranked(out, elt));
  return success();
}

LogicalResult GatherOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getData());
  auto t = getRanked(getData()), ti = getRanked(getIndices());
  if (!t) {
    types.push_back(unranked(elt));
    return success();
  }
  if (t.getRank() == 0)
    return emitOpError() << "data must have rank >= 1";
  auto axis = normalizeAxis(*this, getAxis(), t.getRank());
  if (failed(axis))
    return failure();
  int64_t dim = t.getDimSize(*axis);
  if (auto indices = getConstantInts(getIndices()); indices && !isDynamic(dim))
    for (int64_t i : *indices)
      if (i < -dim || i >= dim)
        return emitOpError() << "index " << i << " is out of range for axis "
                             << *axis << " of size " << dim;
  if (!ti) {
    types.push_back(unranked(elt));
    return success();
  }
  SmallVector<int64_t> out(t.getShape().take_front(*axis));
  llvm::append_range(out, ti.getShape());
  llvm::append_range(out, t.getShape().drop_front(*axis + 1));
  types.push_back(ranked(out, elt));
  return success();
}

/// Checks a constant indices tensor of GatherND or ScatterND against the
/// data's static extents: the k-tuples of its last axis (after `batch`
/// leading batch axes) must be within data's axes batch..batch+k.
static LogicalResult checkTupleIndices(Operation *op, Value indices,
                                       RankedTensorType data, int64_t batch) {
  auto ti = getRanked(indices);
  auto values = getConstantInts(indices);
  if (!ti || !values || ti.getRank() == 0)
    return success();
  int64_t k = ti.getDimSize(ti.getRank() - 1);
  if (isDynamic(k) || k == 0)
    return success();
  for (size_t n = 0; n < values->size(); ++n) {
    int64_t axis = batch + static_cast<int64_t>(n) % k;
    int64_t dim = data.getDimSize(axis), i = (*values)[n];
    if (!isDynamic(dim) && (i < -dim || i >= dim))
      return op->emitOpError() << "index " << i << " is out of range for axis "
                               << axis << " of size " << dim;
  }
  return success();
}

LogicalResult GatherNDOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getData());
  auto t = getRanked(getData()), ti = getRanked(getIndices());
  if (!t || !ti) {
    types.push_back(unranked(elt));
    return success();
  }
  int64_t b = getBatchDims(), r = t.getRank(), q = ti.getRank();
  if (r < 1 || q < 1)
    return emitOpError() << "data and indices must have rank >= 1";
  if (b < 0 || b >= std::min(r, q))
    return emitOpError() << "batch_dims " << b
                         << " must be less than the ranks of data (" << r
                         << ") and indices (" << q << ")";
  for (int64_t i = 0; i < b; ++i)
    if (!isDynamic(t.getDimSize(i)) && !isDynamic(ti.getDimSize(i)) &&
        t.getDimSize(i) != ti.getDimSize(i))
      return emitOpError() << "batch axis " << i << " differs: data has "
                           << t.getDimSize(i) << ", indices "
                           << ti.getDimSize(i);
  int64_t k = ti.getDimSize(q - 1);
  if (isDynamic(k)) {
    types.push_back(unranked(elt));
    return success();
  }
  if (k < 1 || k > r - b)
    return emitOpError() << "indices' last axis (" << k
                         << ") must be between 1 and the data's rank less "
                            "batch_dims ("
                         << r - b << ")";
  if (failed(checkTupleIndices(*this, getIndices(), t, b)))
    return failure();
  SmallVector<int64_t> out(ti.getShape().drop_back());
  llvm::append_range(out, t.getShape().drop_front(b + k));
  types.push_back(ranked(out, elt));
  return success();
}

/// ScatterND's and ScatterElements' reduction and updates' element type.
static LogicalResult checkScatter(Operation *op, StringRef red, Value data,
                                  Value updates) {
  if (red != "none" && red != "add" && red != "mul" && red != "max" &&
      red != "min")
    return op->emitOpError() << "reduction '" << red
                             << "' is not one of none, add, mul, max, min";
  if (getElementType(updates) != getElementType(data))
    return op->emitOpError() << "updates' element type "
                             << getElementType(updates)
                             << " differs from the data's "
                             << getElementType(data);
  return success();
}

LogicalResult ScatterNDOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkScatter(*this, getReduction(), getData(), getUpdates())))
    return failure();
  Type elt = getElementType(getData());
  auto t = getRanked(getData()), ti = getRanked(getIndices()),
       tu = getRanked(getUpdates());
  if (t && ti && tu) {
    int64_t r = t.getRank(), q = ti.getRank();
    if (r < 1 || q < 1)
      return emitOpError() << "data and indices must have rank >= 1";
    int64_t k = ti.getDimSize(q - 1);
    if (!isDynamic(k)) {
      if (k < 1 || k > r)
        return emitOpError() << "indices' last axis (" << k
                             << ") must be between 1 and the data's rank ("
                             << r << ")";
      SmallVector<int64_t> expect(ti.getShape().drop_back());
      llvm::append_range(expect, t.getShape().drop_front(k));
      if (tu.getRank() != static_cast<int64_t>(expect.size()) ||
          failed(verifyCompatibleShape(tu.getShape(), expect)))
        return emitOpError() << "updates of type " << tu
                             << " do not have the shape indices.shape[:-1] "
                                "+ data.shape[k:] ("
                             << ranked(expect, elt) << ")";
      if (failed(checkTupleIndices(*this, getIndices(), t, 0)))
        return failure();
    }
  }
  types.push_back(getData().getType());
  return success();
}

/// GatherElements and ScatterElements: indices of data's rank, along axes
/// other than `axis` no larger than data; constant indices within range.
static FailureOr<int64_t> checkElementIndices(Operation *op, RankedTensorType t,
                                              Value indices, int64_t axisAttr) {
  auto ti = getRanked(indices);
  if (t.getRank() == 0)
    return op->emitOpError() << "data must have rank >= 1";
  auto axis = normalizeAxis(op, axisAttr, t.getRank());
  if (failed(axis))
    return failure();
  if (!ti)
    return *axis;
  if (ti.getRank() != t.getRank())
    return op->emitOpError() << "indices of rank " << ti.getRank()
                             << " must have the data's rank " << t.getRank();
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (d != *axis && !isDynamic(t.getDimSize(d)) &&
        !isDynamic(ti.getDimSize(d)) && ti.getDimSize(d) > t.getDimSize(d))
      return op->emitOpError() << "indices' axis " << d << " ("
                               << ti.getDimSize(d) << ") exceeds the data's ("
                               << t.getDimSize(d) << ")";
  int64_t dim = t.getDimSize(*axis);
  if (auto values = getConstantInts(indices); values && !isDynamic(dim))
    for (int64_t i : *values)
      if (i < -dim || i >= dim)
        return op->emitOpError() << "index " << i << " is out of range for axis "
                                 << *axis << " of size " << dim;
  return *axis;
}

LogicalResult GatherElementsOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getData());
  auto t = getRanked(getData()), ti = getRanked(getIndices());
  if (t && failed(checkElementIndices(*this, t, getIndices(), getAxis())))
    return failure();
  types.push_back(ti ? ranked(ti.getShape(), elt) : unranked(elt));
  return success();
}

LogicalResult ScatterElementsOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkScatter(*this, getReduction(), getData(), getUpdates())))
    return failure();
  auto t = getRanked(getData()), ti = getRanked(getIndices()),
       tu = getRanked(getUpdates());
  if (t && failed(checkElementIndices(*this, t, getIndices(), getAxis())))
    return failure();
  if (ti && tu && (ti.getRank() != tu.getRank() ||
                   failed(verifyCompatibleShape(ti.getShape(), tu.getShape()))))
    return emitOpError() << "updates of type " << tu
                         << " do not have the indices' shape " << ti;
  types.push_back(getData().getType());
  return success();
}

/// Number of entries of a 1-D axes/shape operand, kDynamic when unknown.
static int64_t lengthOf(Value v) {
  auto t = getRanked(v);
  return t && t.getRank() == 1 ? t.getDimSize(0) : kDynamic;
}


LogicalResult UnsqueezeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getData());
  auto t = getRanked(getData());
  if (auto ta = getRanked(getAxes()); ta && ta.getRank() != 1)
    return emitOpError() << "axes must be 1-D, got " << ta;
  auto axes = getConstantInts(getAxes());
  if (!t) {
    types.push_back(unranked(elt));
    return success();
  }
  if (!axes) {
    int64_t k = lengthOf(getAxes());
    if (!isDynamic(k) && failed(checkResultRank(*this, t.getRank() + k)))
      return failure();
    types.push_back(isDynamic(k) ? unranked(elt)
                                 : ranked(SmallVector<int64_t>(
                                              t.getRank() + k, kDynamic),
                                          elt));
    return success();
  }
  int64_t rank = t.getRank() + axes->size();
  auto normalized = normalizeAxes(*this, *axes, rank);
  if (failed(normalized))
    return failure();
  SmallVector<bool> inserted(rank, false);
  for (int64_t a : *normalized)
    inserted[a] = true;
  SmallVector<int64_t> out;
  auto next = t.getShape().begin();
  for (int64_t i = 0; i < rank; ++i)
    out.push_back(inserted[i] ? 1 : *next++);
  types.push_back(ranked(out, elt));
  return success();
}

LogicalResult SqueezeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getData());
  auto t = getRanked(getData());
  if (auto ta = getRanked(getAxes()); ta && ta.getRank() != 1)
    return emitOpError() << "axes must be 1-D, got " << ta;
  if (!t) {
    types.push_back(unranked(elt));
    return success();
  }
  SmallVector<int64_t> out;
  if (isNone(getAxes())) {
    // Which dynamic dimensions are 1 is unknown.
    if (!t.hasStaticShape()) {
      types.push_back(unranked(elt));
      return success();
    }
    for (int64_t d : t.getShape())
      if (d != 1)
        out.push_back(d);
    types.push_back(ranked(out, elt));
    return success();
  }
  auto axes = getConstantInts(getAxes());
  if (!axes) {
    int64_t k = lengthOf(getAxes());
    if (!isDynamic(k) && k > t.getRank())
      return emitOpError() << "squeezes " << k << " axes of a rank-"
                           << t.getRank() << " tensor";
    types.push_back(isDynamic(k) ? unranked(elt)
                                 : ranked(SmallVector<int64_t>(
                                              t.getRank() - k, kDynamic),
                                          elt));
    return success();
  }
  auto normalized = normalizeAxes(*this, *axes, t.getRank());
  if (failed(normalized))
    return failure();
  SmallVector<bool> removed(t.getRank(), false);
  for (int64_t a : *normalized) {
    if (conflicts(t.getDimSize(a), 1))
      return emitOpError() << "cannot squeeze dimension " << a << " of size "
                           << t.getDimSize(a);
    removed[a] = true;
  }
  for (auto [i, d] : llvm::enumerate(t.getShape()))
    if (!removed[i])
      out.push_back(d);
  types.push_back(ranked(out, elt));
  return success();
}

LogicalResult ExpandOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getInput());
  auto t = getRanked(getInput());
  if (auto ts = getRanked(getShape()); ts && ts.getRank() != 1)
    return emitOpError() << "shape must be 1-D, got " << ts;
  auto shape = getConstantInts(getShape());
  if (shape)
    for (int64_t d : *shape)
      if (d < 0)
        return emitOpError() << "shape has negative dimension " << d;
  if (!t) {
    types.push_back(unranked(elt));
    return success();
  }
  if (!shape) {
    int64_t k = lengthOf(getShape());
    if (!isDynamic(k) && failed(checkResultRank(*this, k)))
      return failure();
    types.push_back(isDynamic(k)
                        ? unranked(elt)
                        : ranked(SmallVector<int64_t>(
                                     std::max<int64_t>(k, t.getRank()),
                                     kDynamic),
                                 elt));
    return success();
  }
  auto out = broadcastShapes(*this, t.getShape(), *shape);
  if (failed(out))
    return failure();
  types.push_back(ranked(*out, elt));
  return success();
}

//===----------------------------------------------------------------------===//
// Tile, Pad, Trilu (issue 15)
//===----------------------------------------------------------------------===//

LogicalResult TileOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getInput());
  auto t = getRanked(getInput());
  auto reps = getConstantInts(getRepeats());
  if (!t || !reps) {
    types.push_back(t ? ranked(SmallVector<int64_t>(t.getRank(), kDynamic), elt)
                      : unranked(elt));
    return success();
  }
  if (int64_t(reps->size()) != t.getRank())
    return emitOpError() << "repeats has " << reps->size()
                         << " entries for an input of rank " << t.getRank();
  SmallVector<int64_t> out;
  for (auto [d, r] : llvm::zip(t.getShape(), *reps)) {
    if (r < 0)
      return emitOpError() << "repeats must not be negative, got " << r;
    out.push_back(ShapedType::isDynamic(d) ? kDynamic : d * r);
  }
  types.push_back(ranked(out, elt));
  return success();
}

/// Pad's begins and ends for every axis (2 * rank, ONNX order) from its
/// constant `pads` and optional `axes`, or nullopt when not constant.
std::optional<SmallVector<int64_t>> mlir::pipec::onnx::fullPads(PadOp op,
                                                                 int64_t rank) {
  auto pads = getConstantInts(op.getPads());
  if (!pads)
    return std::nullopt;
  SmallVector<int64_t> axes;
  if (isNone(op.getAxes())) {
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  } else {
    auto a = getConstantInts(op.getAxes());
    if (!a)
      return std::nullopt;
    axes = *a;
  }
  if (pads->size() != 2 * axes.size())
    return std::nullopt;
  SmallVector<int64_t> full(2 * rank, 0);
  for (auto [i, a] : llvm::enumerate(axes)) {
    int64_t axis = a < 0 ? a + rank : a;
    if (axis < 0 || axis >= rank)
      return std::nullopt;
    full[axis] = (*pads)[i];
    full[axis + rank] = (*pads)[i + axes.size()];
  }
  return full;
}

LogicalResult PadOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getData());
  auto t = getRanked(getData());
  if (!t) {
    types.push_back(unranked(elt));
    return success();
  }
  int64_t rank = t.getRank();
  auto pads = getConstantInts(getPads());
  if (pads) {
    size_t axes = rank;
    if (!isNone(getAxes())) {
      if (auto a = getConstantInts(getAxes()))
        axes = a->size();
      else
        pads.reset();
    }
    if (pads && pads->size() != 2 * axes)
      return emitOpError() << "pads has " << pads->size() << " entries, not 2 x "
                           << axes << " (begins and ends of each axis)";
  }
  auto full = fullPads(*this, rank);
  if (pads && !full)
    return emitOpError() << "axes are out of range for rank " << rank;
  if (!full) {
    types.push_back(ranked(SmallVector<int64_t>(rank, kDynamic), elt));
    return success();
  }
  SmallVector<int64_t> out;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t d = t.getDimSize(i);
    int64_t n = ShapedType::isDynamic(d) ? kDynamic : d + (*full)[i] + (*full)[i + rank];
    if (!ShapedType::isDynamic(n) && n < 0)
      return emitOpError() << "pads crop axis " << i << " below zero";
    out.push_back(n);
  }
  types.push_back(ranked(out, elt));
  return success();
}

LogicalResult PadOp::verify() {
  if (getMode() != "constant" && getMode() != "reflect" && getMode() != "edge")
    return emitOpError() << "mode '" << getMode()
                         << "' is not supported (constant, reflect and edge are)";
  if (!isNone(getConstantValue()) &&
      getElementType(getConstantValue()) != getElementType(getData()))
    return emitOpError() << "constant_value must have the data's element type";
  return success();
}

LogicalResult TriluOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (auto t = getRanked(getInput()); t && t.getRank() < 2)
    return emitOpError() << "input must have rank >= 2, got " << t;
  types.push_back(getInput().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Resize
//===----------------------------------------------------------------------===//

/// The float contents of a constant operand, or nullopt.
static std::optional<SmallVector<float>> constantFloats(Value v) {
  auto dense = llvm::dyn_cast_if_present<DenseFPElementsAttr>(getConstantAttr(v));
  if (!dense)
    return std::nullopt;
  SmallVector<float> out;
  for (const APFloat &x : dense.getValues<APFloat>())
    out.push_back(float(x.convertToDouble()));
  return out;
}

/// An optional Resize input that is absent: none, or an empty tensor (how
/// opsets 11-12 and torch leave out scales or roi).
static bool absentInput(Value v) {
  if (isNone(v))
    return true;
  auto t = getRanked(v);
  return t && t.getRank() == 1 && t.getDimSize(0) == 0;
}

FailureOr<ResizeGeometry> mlir::pipec::onnx::resizeGeometry(Operation *op) {
  auto resize = llvm::cast<ResizeOp>(op);
  StringRef mode = resize.getMode(),
            coord = resize.getCoordinateTransformationMode(),
            nearest = resize.getNearestMode();
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return op->emitOpError() << "mode '" << mode
                             << "' is not one of nearest, linear, cubic";
  if (!llvm::is_contained({"half_pixel", "asymmetric", "align_corners",
                           "pytorch_half_pixel", "tf_half_pixel_for_nn",
                           "tf_crop_and_resize", "half_pixel_symmetric"},
                          coord))
    return op->emitOpError() << "coordinate_transformation_mode '" << coord
                             << "' is not supported";
  if (!llvm::is_contained({"round_prefer_floor", "round_prefer_ceil", "floor",
                           "ceil"},
                          nearest))
    return op->emitOpError() << "nearest_mode '" << nearest
                             << "' is not supported";
  if (resize.getAntialias() != 0)
    return op->emitOpError() << "antialias is not supported";
  if (resize.getKeepAspectRatioPolicy() != "stretch")
    return op->emitOpError() << "keep_aspect_ratio_policy '"
                             << resize.getKeepAspectRatioPolicy()
                             << "' is not supported (stretch is)";
  ResizeGeometry g;
  auto x = getRanked(resize.getX());
  if (!x)
    return g;
  int64_t rank = x.getRank();
  SmallVector<int64_t> axes;
  if (auto a = resize.getAxes()) {
    for (int64_t axis : *a) {
      auto n = normalizeAxis(op, axis, rank, "axes");
      if (failed(n))
        return failure();
      if (llvm::is_contained(axes, *n))
        return op->emitOpError() << "axis " << axis << " repeats in axes";
      axes.push_back(*n);
    }
  } else {
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }
  size_t na = axes.size();
  bool haveScales = !absentInput(resize.getScales()),
       haveSizes = !absentInput(resize.getSizes());
  if (haveScales == haveSizes)
    return op->emitOpError() << (haveScales ? "takes scales or sizes, not both"
                                            : "needs scales or sizes");
  g.outShape.assign(x.getShape().begin(), x.getShape().end());
  g.known = true;
  if (coord == "tf_crop_and_resize") {
    auto roi = constantFloats(resize.getRoi());
    if (!roi) {
      g.known = false;
    } else {
      if (roi->size() != 2 * na)
        return op->emitOpError() << "roi has " << roi->size()
                                 << " entries, expected " << 2 * na;
      g.roi.assign(rank, 0.f);
      g.roi.append(rank, 1.f);
      for (size_t i = 0; i < na; ++i) {
        g.roi[axes[i]] = (*roi)[i];
        g.roi[axes[i] + rank] = (*roi)[i + na];
      }
    }
  }
  auto unknownAxes = [&] {
    g.known = false;
    for (int64_t a : axes)
      g.outShape[a] = kDynamic;
  };
  if (haveScales) {
    auto scales = constantFloats(resize.getScales());
    if (!scales) {
      unknownAxes();
      return g;
    }
    if (scales->size() != na)
      return op->emitOpError() << "scales has " << scales->size()
                               << " entries, expected " << na;
    g.scales = SmallVector<float>(rank, 1.f);
    for (size_t i = 0; i < na; ++i) {
      float s = (*scales)[i];
      if (!(s > 0.f))
        return op->emitOpError() << "scale " << s << " is not positive";
      (*g.scales)[axes[i]] = s;
      int64_t in = x.getDimSize(axes[i]);
      double span = g.roi.empty() ? 1.0
                                  : double(g.roi[axes[i] + rank]) -
                                        double(g.roi[axes[i]]);
      if (isDynamic(in)) {
        g.outShape[axes[i]] = kDynamic;
        continue;
      }
      double out = std::floor(double(in) * span * double(s));
      if (!std::isfinite(out) || out < 0 || out > double(int64_t(1) << 40))
        return op->emitOpError() << "scale " << s << " (roi span " << span
                                 << ") of axis " << axes[i]
                                 << " gives no valid extent";
      g.outShape[axes[i]] = int64_t(out);
    }
    return g;
  }
  auto sizes = getConstantInts(resize.getSizes());
  if (!sizes) {
    unknownAxes();
    return g;
  }
  if (sizes->size() != na)
    return op->emitOpError() << "sizes has " << sizes->size()
                             << " entries, expected " << na;
  for (size_t i = 0; i < na; ++i) {
    if ((*sizes)[i] < 0 || (*sizes)[i] > (int64_t(1) << 40))
      return op->emitOpError() << "size " << (*sizes)[i] << " is out of range";
    g.outShape[axes[i]] = (*sizes)[i];
  }
  return g;
}

LogicalResult ResizeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto g = resizeGeometry(*this);
  if (failed(g))
    return failure();
  Type elt = getElementType(getX());
  types.push_back(getRanked(getX()) ? ranked(g->outShape, elt) : unranked(elt));
  return success();
}
