//===- OnnxOpsNN.cpp - neural network ops, reductions and losses ----------===//
//
// Shape functions and verifiers of Softmax, the normalizations, the
// sliding-window ops (Conv, MaxPool, AveragePool), GlobalAveragePool,
// Dropout, ReduceMean/ReduceSum and the losses.
//
//===----------------------------------------------------------------------===//
#include "dialects/onnx/OnnxDialect.h"
#include "dialects/onnx/OnnxOpsHelpers.h"
#include "dialects/onnx/ShapeHelpers.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::pipec::onnx;

//===----------------------------------------------------------------------===//
// Neural network
//===----------------------------------------------------------------------===//

/// Softmax-like ops: the result has the input's type; the axis must exist.
static LogicalResult inferAlongAxis(Operation *op, Value input, int64_t axis,
                                    SmallVectorImpl<Type> &types) {
  if (auto t = getRanked(input))
    if (failed(normalizeAxis(op, axis, t.getRank())))
      return failure();
  types.push_back(input.getType());
  return success();
}

LogicalResult SoftmaxOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferAlongAxis(*this, getInput(), getAxis(), types);
}
LogicalResult LogSoftmaxOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferAlongAxis(*this, getInput(), getAxis(), types);
}

/// Checks that `v` (if ranked) broadcasts unidirectionally to `shape`.
static LogicalResult checkBroadcastsTo(Operation *op, Value v,
                                       ArrayRef<int64_t> shape,
                                       StringRef name) {
  auto t = getRanked(v);
  if (!t)
    return success();
  auto error = [&]() {
    return op->emitOpError() << name << " of type " << t
                             << " does not broadcast to the normalized shape ["
                             << shape << "]";
  };
  if (t.getRank() > static_cast<int64_t>(shape.size()))
    return error();
  size_t offset = shape.size() - t.getRank();
  for (auto [i, d] : llvm::enumerate(t.getShape()))
    if (d != 1 && conflicts(d, shape[offset + i]))
      return error();
  return success();
}

LogicalResult
LayerNormalizationOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type stash = onnxDataTypeToType(getContext(), getStashType());
  if (!stash || !llvm::isa<FloatType>(stash))
    return emitOpError() << "stash_type "
                         << static_cast<int64_t>(getStashType())
                         << " is not a floating-point ONNX data type code";
  if (getStats().size() > 2)
    return emitOpError() << "has " << getStats().size()
                         << " optional results, at most 2 (Mean, InvStdDev)";
  if (failed(checkSameElementType(*this, getX(), getScale(), "X", "Scale")) ||
      failed(checkSameElementType(*this, getX(), getB(), "X", "B")))
    return failure();
  auto t = getRanked(getX());
  if (!t) {
    types.push_back(getX().getType());
    types.append(getStats().size(), unranked(stash));
    return success();
  }
  auto axis = normalizeAxis(*this, getAxis(), t.getRank());
  if (failed(axis))
    return failure();
  ArrayRef<int64_t> normalized = t.getShape().drop_front(*axis);
  if (failed(checkBroadcastsTo(*this, getScale(), normalized, "Scale")) ||
      failed(checkBroadcastsTo(*this, getB(), normalized, "B")))
    return failure();
  SmallVector<int64_t> statsShape(t.getShape());
  for (int64_t i = *axis; i < t.getRank(); ++i)
    statsShape[i] = 1;
  types.push_back(t);
  types.append(getStats().size(), ranked(statsShape, stash));
  return success();
}

LogicalResult LayerNormalizationOp::verify() {
  if (getEpsilon().isNegative())
    return emitOpError() << "epsilon must not be negative";
  return success();
}

LogicalResult
BatchNormalizationOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  int64_t training = getTrainingMode();
  if (training != 0 && training != 1)
    return emitOpError() << "training_mode must be 0 or 1, got " << training;
  size_t extra = getRunningStats().size();
  if (extra > 2)
    return emitOpError() << "has " << extra
                         << " optional results, at most 2 (running_mean, "
                            "running_var)";
  if (extra > 0 && training == 0)
    return emitOpError() << "running_mean and running_var are outputs only "
                            "with training_mode = 1";
  if (failed(checkSameElementType(*this, getScale(), getB(), "scale", "B")) ||
      failed(checkSameElementType(*this, getInputMean(), getInputVar(),
                                  "input_mean", "input_var")))
    return failure();
  int64_t channels = kDynamic;
  if (auto t = getRanked(getX())) {
    if (t.getRank() < 2)
      return emitOpError() << "X must have rank >= 2 (N x C x ...), got " << t;
    channels = t.getDimSize(1);
  }
  for (auto [v, name] : {std::pair<Value, StringRef>{getScale(), "scale"},
                         {getB(), "B"},
                         {getInputMean(), "input_mean"},
                         {getInputVar(), "input_var"}}) {
    auto t = getRanked(v);
    if (!t)
      continue;
    if (t.getRank() != 1 || conflicts(t.getDimSize(0), channels))
      return emitOpError() << name << " must be 1-D of the channel count "
                           << (isDynamic(channels) ? std::string("C")
                                                   : std::to_string(channels))
                           << ", got " << t;
  }
  types.push_back(getX().getType());
  Value stats[] = {getInputMean(), getInputVar()};
  for (size_t i = 0; i < extra; ++i)
    types.push_back(stats[i].getType());
  return success();
}

/// The attributes of a sliding-window op (Conv, MaxPool, AveragePool).
struct Window {
  ArrayRef<int64_t> kernel; // may hold kDynamic (Conv with a dynamic W)
  std::optional<ArrayRef<int64_t>> strides, pads, dilations;
  StringRef autoPad;
  bool ceilMode = false;
};

static LogicalResult checkAutoPad(Operation *op, StringRef autoPad) {
  if (autoPad == "NOTSET" || autoPad == "SAME_UPPER" ||
      autoPad == "SAME_LOWER" || autoPad == "VALID")
    return success();
  return op->emitOpError() << "auto_pad must be NOTSET, SAME_UPPER, "
                              "SAME_LOWER or VALID, got '"
                           << autoPad << "'";
}

/// Checks the window attributes against `n` spatial dimensions.
static LogicalResult checkWindow(Operation *op, const Window &w, size_t n) {
  if (failed(checkAutoPad(op, w.autoPad)))
    return failure();
  auto checkList = [&](std::optional<ArrayRef<int64_t>> list, StringRef name,
                       size_t size, int64_t min) -> LogicalResult {
    if (!list)
      return success();
    if (list->size() != size)
      return op->emitOpError() << name << " has " << list->size()
                               << " values but needs " << size;
    for (int64_t v : *list)
      if (v < min)
        return op->emitOpError() << name << " has invalid value " << v;
    return success();
  };
  if (failed(checkList(w.kernel, "kernel_shape", n, 1)) ||
      failed(checkList(w.strides, "strides", n, 1)) ||
      failed(checkList(w.dilations, "dilations", n, 1)) ||
      failed(checkList(w.pads, "pads", 2 * n, 0)))
    return failure();
  if (w.autoPad != "NOTSET" && w.pads &&
      llvm::any_of(*w.pads, [](int64_t p) { return p != 0; }))
    return op->emitOpError() << "pads cannot be used with auto_pad = "
                             << w.autoPad;
  return success();
}

/// Output spatial sizes of a sliding window over `input` (checked window).
static FailureOr<SmallVector<int64_t>>
windowOutput(Operation *op, const Window &w, ArrayRef<int64_t> input) {
  size_t n = input.size();
  SmallVector<int64_t> out;
  for (size_t i = 0; i < n; ++i) {
    int64_t in = input[i], k = w.kernel[i];
    int64_t stride = w.strides ? (*w.strides)[i] : 1;
    int64_t dilation = w.dilations ? (*w.dilations)[i] : 1;
    if (isDynamic(in)) {
      out.push_back(kDynamic);
      continue;
    }
    if (w.autoPad == "SAME_UPPER" || w.autoPad == "SAME_LOWER") {
      out.push_back((in + stride - 1) / stride);
      continue;
    }
    if (isDynamic(k)) {
      out.push_back(kDynamic);
      continue;
    }
    int64_t padBegin = 0, padEnd = 0;
    if (w.autoPad == "NOTSET" && w.pads) {
      padBegin = (*w.pads)[i];
      padEnd = (*w.pads)[i + n];
    }
    int64_t window = (k - 1) * dilation + 1;
    int64_t span = in + padBegin + padEnd - window;
    if (span < 0)
      return op->emitOpError()
             << "window of size " << window << " does not fit spatial "
             << "dimension " << i << " of size " << in << " (padded to "
             << in + padBegin + padEnd << ")";
    int64_t size = (w.ceilMode ? (span + stride - 1) / stride : span / stride) + 1;
    // The last window must start inside the input or its begin padding.
    if (w.ceilMode && (size - 1) * stride >= in + padBegin)
      --size;
    out.push_back(size);
  }
  return out;
}

/// What Conv and ConvTranspose check alike: X, W and B of one element type,
/// a positive group, X and W of one rank >= 3 (`wLayout` names W's axes).
static LogicalResult checkConvOperands(Operation *op, Value x, Value w, Value b,
                                       int64_t group, StringRef wLayout,
                                       RankedTensorType &tx,
                                       RankedTensorType &tw) {
  if (failed(checkSameElementType(op, x, w, "X", "W")) ||
      failed(checkSameElementType(op, x, b, "X", "B")))
    return failure();
  if (group < 1)
    return op->emitOpError() << "group must be positive, got " << group;
  tx = getRanked(x);
  tw = getRanked(w);
  if (tx && tx.getRank() < 3)
    return op->emitOpError() << "X must have rank >= 3 (N x C x D1 ...), got "
                             << tx;
  if (tw && tw.getRank() < 3)
    return op->emitOpError() << "W must have rank >= 3 (" << wLayout
                             << "), got " << tw;
  if (tx && tw && tx.getRank() != tw.getRank())
    return op->emitOpError() << "X and W must have the same rank, got " << tx
                             << " and " << tw;
  return success();
}

LogicalResult ConvOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getX());
  int64_t group = getGroup();
  RankedTensorType tx, tw;
  if (failed(checkConvOperands(*this, getX(), getW(), getB(), group,
                               "M x C/group x k1 ...", tx, tw)))
    return failure();
  int64_t rank = tx ? tx.getRank() : tw ? tw.getRank() : -1;
  if (rank < 0) {
    types.push_back(unranked(elt));
    return success();
  }
  size_t n = rank - 2;
  SmallVector<int64_t> kernel(n, kDynamic);
  if (auto attr = getKernelShape()) {
    kernel.assign(attr->begin(), attr->end());
    if (tw && kernel.size() == n)
      for (size_t i = 0; i < n; ++i)
        if (conflicts(kernel[i], tw.getDimSize(i + 2)))
          return emitOpError() << "kernel_shape [" << *attr
                               << "] differs from W's spatial dimensions in "
                               << tw;
  } else if (tw) {
    kernel.assign(tw.getShape().begin() + 2, tw.getShape().end());
  }
  Window w{kernel, getStrides(), getPads(), getDilations(), getAutoPad(),
           false};
  // Kernel sizes copied from a dynamic W are unknown, not invalid.
  Window checked = w;
  SmallVector<int64_t> checkedKernel(kernel);
  for (int64_t &k : checkedKernel)
    if (isDynamic(k))
      k = 1;
  checked.kernel = checkedKernel;
  if (failed(checkWindow(*this, checked, n)))
    return failure();
  int64_t m = tw ? tw.getDimSize(0) : kDynamic;
  if (tw && !isDynamic(m) && m % group != 0)
    return emitOpError() << "W's " << m
                         << " output channels are not a multiple of group "
                         << group;
  if (tx && tw && !isDynamic(tw.getDimSize(1)) &&
      conflicts(tx.getDimSize(1), tw.getDimSize(1) * group))
    return emitOpError() << "X has " << tx.getDimSize(1)
                         << " channels but W expects " << tw.getDimSize(1)
                         << " x group " << group;
  if (auto tb = getRanked(getB()))
    if (tb.getRank() != 1 || conflicts(tb.getDimSize(0), m))
      return emitOpError() << "B must be 1-D of W's output channel count, got "
                           << tb;
  if (!tx) {
    types.push_back(ranked(SmallVector<int64_t>(rank, kDynamic), elt));
    return success();
  }
  auto spatial = windowOutput(*this, w, tx.getShape().drop_front(2));
  if (failed(spatial))
    return failure();
  SmallVector<int64_t> out{tx.getDimSize(0), m};
  out.append(*spatial);
  types.push_back(ranked(out, elt));
  return success();
}

FailureOr<ConvTransposeWindow>
mlir::pipec::onnx::convTransposeWindow(Operation *op, RankedTensorType x,
                                       RankedTensorType w) {
  size_t n = w.getRank() - 2;
  ConvTransposeWindow r;
  r.kernel.assign(w.getShape().begin() + 2, w.getShape().end());
  auto array = [&](StringRef name, int64_t fill,
                   size_t count) -> FailureOr<SmallVector<int64_t>> {
    auto a = op->getAttrOfType<DenseI64ArrayAttr>(name);
    if (!a)
      return SmallVector<int64_t>(count, fill);
    if (a.size() != (int64_t)count)
      return op->emitOpError() << name << " has " << a.size()
                               << " entries, expected " << count;
    return SmallVector<int64_t>(a.asArrayRef());
  };
  auto strides = array("strides", 1, n), dil = array("dilations", 1, n),
       outPad = array("output_padding", 0, n), pads = array("pads", 0, 2 * n);
  if (failed(strides) || failed(dil) || failed(outPad) || failed(pads))
    return failure();
  r.strides = *strides;
  r.dilations = *dil;
  r.outputPadding = *outPad;
  r.pads = *pads;
  if (auto k = op->getAttrOfType<DenseI64ArrayAttr>("kernel_shape"))
    if (k.asArrayRef() != ArrayRef<int64_t>(r.kernel))
      return op->emitOpError() << "kernel_shape [" << k.asArrayRef()
                               << "] differs from W's spatial dimensions in "
                               << w;
  // Bounds that keep the extent arithmetic below from overflowing.
  constexpr int64_t kBig = int64_t(1) << 31;
  auto outOfRange = [&](ArrayRef<int64_t> v) {
    return llvm::any_of(v, [&](int64_t e) { return e > kBig || e < -kBig; });
  };
  if (outOfRange(r.strides) || outOfRange(r.dilations) || outOfRange(r.pads) ||
      outOfRange(r.kernel) || outOfRange(x.getShape()))
    return op->emitOpError() << "has strides, dilations, pads or extents "
                                "beyond 2^31";
  for (size_t i = 0; i < n; ++i) {
    if (r.strides[i] < 1 || r.dilations[i] < 1)
      return op->emitOpError() << "strides and dilations must be positive";
    if (r.outputPadding[i] < 0 || r.outputPadding[i] >= r.strides[i])
      return op->emitOpError()
             << "output_padding must be non-negative and below the stride, "
                "got "
             << r.outputPadding[i] << " for stride " << r.strides[i];
  }
  StringRef autoPad = "NOTSET";
  if (auto a = op->getAttrOfType<StringAttr>("auto_pad"))
    autoPad = a.getValue();
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER")
    return op->emitOpError() << "auto_pad '" << autoPad << "' is not one of "
                             << "NOTSET, VALID, SAME_UPPER, SAME_LOWER";
  std::optional<SmallVector<int64_t>> target;
  if (auto os = op->getAttrOfType<DenseI64ArrayAttr>("output_shape")) {
    ArrayRef<int64_t> v = os.asArrayRef();
    if (v.size() == n + 2)
      v = v.drop_front(2);
    if (v.size() != n)
      return op->emitOpError() << "output_shape has " << os.size()
                               << " entries, expected " << n;
    if (outOfRange(v))
      return op->emitOpError() << "output_shape has entries beyond 2^31";
    target = SmallVector<int64_t>(v);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    target = SmallVector<int64_t>();
    for (size_t i = 0; i < n; ++i)
      target->push_back(x.getDimSize(i + 2) * r.strides[i]);
  }
  if (autoPad == "VALID")
    r.pads.assign(2 * n, 0);
  auto floorDiv2 = [](int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); };
  for (size_t i = 0; i < n; ++i) {
    int64_t natural = r.strides[i] * (x.getDimSize(i + 2) - 1) +
                      r.outputPadding[i] +
                      (r.kernel[i] - 1) * r.dilations[i] + 1;
    if (target) {
      int64_t total = natural - (*target)[i];
      int64_t half = floorDiv2(total);
      r.pads[i] = autoPad == "SAME_UPPER" ? half : total - half;
      r.pads[i + n] = autoPad == "SAME_UPPER" ? total - half : half;
    }
    int64_t out = natural - r.pads[i] - r.pads[i + n];
    if (out < 1)
      return op->emitOpError() << "output extent " << out << " on spatial axis "
                               << i << " is not positive";
    r.out.push_back(out);
  }
  return r;
}

LogicalResult ConvTransposeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getX());
  int64_t group = getGroup();
  RankedTensorType tx, tw;
  if (failed(checkConvOperands(*this, getX(), getW(), getB(), group,
                               "C x M/group x k1 ...", tx, tw)))
    return failure();
  if (!tx || !tw || !tx.hasStaticShape() || !tw.hasStaticShape()) {
    int64_t rank = tx ? tx.getRank() : tw ? tw.getRank() : -1;
    types.push_back(rank < 0 ? unranked(elt)
                             : ranked(SmallVector<int64_t>(rank, kDynamic), elt));
    return success();
  }
  if (tx.getDimSize(1) != tw.getDimSize(0))
    return emitOpError() << "X has " << tx.getDimSize(1)
                         << " channels but W expects " << tw.getDimSize(0);
  if (tw.getDimSize(0) % group != 0)
    return emitOpError() << "W's " << tw.getDimSize(0)
                         << " input channels are not a multiple of group "
                         << group;
  int64_t m = tw.getDimSize(1) * group;
  if (auto tb = getRanked(getB()))
    if (tb.getRank() != 1 || conflicts(tb.getDimSize(0), m))
      return emitOpError() << "B must be 1-D of the " << m
                           << " output channels, got " << tb;
  auto window = convTransposeWindow(*this, tx, tw);
  if (failed(window))
    return failure();
  SmallVector<int64_t> out{tx.getDimSize(0), m};
  out.append(window->out);
  types.push_back(ranked(out, elt));
  return success();
}

/// Shape function of MaxPool and AveragePool.
static FailureOr<Type> inferPool(Operation *op, Value x, const Window &w) {
  Type elt = getElementType(x);
  size_t n = w.kernel.size();
  if (failed(checkWindow(op, w, n)))
    return failure();
  auto t = getRanked(x);
  if (!t)
    return ranked(SmallVector<int64_t>(n + 2, kDynamic), elt);
  if (static_cast<size_t>(t.getRank()) != n + 2)
    return op->emitOpError() << "kernel_shape has " << n
                             << " dimensions but X " << t << " has "
                             << t.getRank() - 2 << " spatial dimensions";
  auto spatial = windowOutput(op, w, t.getShape().drop_front(2));
  if (failed(spatial))
    return failure();
  SmallVector<int64_t> out{t.getDimSize(0), t.getDimSize(1)};
  out.append(*spatial);
  return ranked(out, elt);
}

/// The window of a MaxPool or AveragePool.
template <typename PoolOp> static Window poolWindow(PoolOp op) {
  return Window{op.getKernelShape(), op.getStrides(), op.getPads(),
                op.getDilations(), op.getAutoPad(), op.getCeilMode() != 0};
}

LogicalResult MaxPoolOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto y = inferPool(*this, getX(), poolWindow(*this));
  if (failed(y))
    return failure();
  types.push_back(*y);
  if (getIndices())
    types.push_back(withElementType(*y, IntegerType::get(getContext(), 64)));
  return success();
}

static LogicalResult checkFlag(Operation *op, int64_t value, StringRef name) {
  if (value == 0 || value == 1)
    return success();
  return op->emitOpError() << name << " must be 0 or 1, got " << value;
}

LogicalResult MaxPoolOp::verify() {
  if (failed(checkFlag(*this, getCeilMode(), "ceil_mode")))
    return failure();
  return checkFlag(*this, getStorageOrder(), "storage_order");
}

LogicalResult AveragePoolOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto y = inferPool(*this, getX(), poolWindow(*this));
  if (failed(y))
    return failure();
  types.push_back(*y);
  return success();
}

LogicalResult AveragePoolOp::verify() {
  if (failed(checkFlag(*this, getCeilMode(), "ceil_mode")))
    return failure();
  return checkFlag(*this, getCountIncludePad(), "count_include_pad");
}

LogicalResult
GlobalAveragePoolOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto t = getRanked(getX());
  if (!t) {
    types.push_back(getX().getType());
    return success();
  }
  if (t.getRank() < 3)
    return emitOpError() << "X must have rank >= 3 (N x C x D1 ...), got " << t;
  SmallVector<int64_t> out(t.getRank(), 1);
  out[0] = t.getDimSize(0);
  out[1] = t.getDimSize(1);
  types.push_back(ranked(out, t.getElementType()));
  return success();
}

LogicalResult DropoutOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkScalar(*this, getRatio(), "ratio")) ||
      failed(checkScalar(*this, getTrainingMode(), "training_mode")))
    return failure();
  types.push_back(getData().getType());
  if (getMask())
    types.push_back(
        withElementType(getData().getType(), IntegerType::get(getContext(), 1)));
  return success();
}

LogicalResult DropoutOp::verify() {
  auto ratio = llvm::dyn_cast_if_present<DenseFPElementsAttr>(
      getConstantAttr(getRatio()));
  if (ratio && ratio.getNumElements() == 1) {
    double r = (*ratio.getValues<APFloat>().begin()).convertToDouble();
    if (!(r >= 0 && r < 1))
      return emitOpError() << "ratio must be in [0, 1), got " << r;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and losses
//===----------------------------------------------------------------------===//

/// Shape function of ReduceMean and ReduceSum.
static LogicalResult inferReduce(Operation *op, Value data, Value axesValue,
                                 bool keepdims, bool noopWithEmptyAxes,
                                 SmallVectorImpl<Type> &types) {
  auto t = getRanked(data);
  Type elt = getElementType(data);
  if (auto ta = getRanked(axesValue); ta && ta.getRank() != 1)
    return op->emitOpError() << "axes must be 1-D, got " << ta;
  std::optional<SmallVector<int64_t>> axes;
  if (isNone(axesValue))
    axes.emplace();
  else
    axes = getConstantInts(axesValue);
  if (!axes) {
    if (t && keepdims)
      types.push_back(ranked(SmallVector<int64_t>(t.getRank(), kDynamic), elt));
    else
      types.push_back(unranked(elt));
    return success();
  }
  if (axes->empty() && noopWithEmptyAxes) {
    types.push_back(data.getType());
    return success();
  }
  if (!t) {
    types.push_back(unranked(elt));
    return success();
  }
  SmallVector<bool> reduced(t.getRank(), axes->empty());
  auto normalized = normalizeAxes(op, *axes, t.getRank());
  if (failed(normalized))
    return failure();
  for (int64_t a : *normalized)
    reduced[a] = true;
  SmallVector<int64_t> out;
  for (auto [i, d] : llvm::enumerate(t.getShape())) {
    if (!reduced[i])
      out.push_back(d);
    else if (keepdims)
      out.push_back(1);
  }
  types.push_back(ranked(out, elt));
  return success();
}

LogicalResult ReduceMeanOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferReduce(*this, getData(), getAxes(), getKeepdims(),
                     getNoopWithEmptyAxes(), types);
}
LogicalResult ReduceSumOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferReduce(*this, getData(), getAxes(), getKeepdims(),
                     getNoopWithEmptyAxes(), types);
}
LogicalResult ReduceMeanOp::verify() {
  if (failed(checkFlag(*this, getKeepdims(), "keepdims")))
    return failure();
  return checkFlag(*this, getNoopWithEmptyAxes(), "noop_with_empty_axes");
}
LogicalResult ReduceSumOp::verify() {
  if (failed(checkFlag(*this, getKeepdims(), "keepdims")))
    return failure();
  return checkFlag(*this, getNoopWithEmptyAxes(), "noop_with_empty_axes");
}

LogicalResult ReduceMaxOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferReduce(*this, getData(), getAxes(), getKeepdims(),
                     getNoopWithEmptyAxes(), types);
}
LogicalResult ReduceMinOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferReduce(*this, getData(), getAxes(), getKeepdims(),
                     getNoopWithEmptyAxes(), types);
}
LogicalResult ReduceMaxOp::verify() {
  if (failed(checkFlag(*this, getKeepdims(), "keepdims")))
    return failure();
  return checkFlag(*this, getNoopWithEmptyAxes(), "noop_with_empty_axes");
}
LogicalResult ReduceMinOp::verify() {
  if (failed(checkFlag(*this, getKeepdims(), "keepdims")))
    return failure();
  return checkFlag(*this, getNoopWithEmptyAxes(), "noop_with_empty_axes");
}

/// Shape function of ArgMax and ArgMin.
static LogicalResult inferArgReduce(Operation *op, Value data, int64_t axis,
                                    int64_t keepdims,
                                    SmallVectorImpl<Type> &types) {
  Type i64 = IntegerType::get(op->getContext(), 64);
  auto t = getRanked(data);
  if (!t) {
    types.push_back(unranked(i64));
    return success();
  }
  auto a = normalizeAxis(op, axis, t.getRank());
  if (failed(a))
    return failure();
  SmallVector<int64_t> out;
  for (auto [i, d] : llvm::enumerate(t.getShape())) {
    if (int64_t(i) != *a)
      out.push_back(d);
    else if (keepdims)
      out.push_back(1);
  }
  types.push_back(ranked(out, i64));
  return success();
}
LogicalResult ArgMaxOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferArgReduce(*this, getData(), getAxis(), getKeepdims(), types);
}
LogicalResult ArgMinOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferArgReduce(*this, getData(), getAxis(), getKeepdims(), types);
}

LogicalResult CumSumOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (auto t = getRanked(getAxis()); t && t.getNumElements() != 1)
    return emitOpError() << "axis must be a scalar, got " << t;
  types.push_back(getX().getType());
  return success();
}

/// Shape function of the losses: `input` is N x C x D1..., `target` N x D1...,
/// `weight` of size C; the loss has target's shape for reduction "none",
/// else it is a scalar.
static FailureOr<Type> inferLoss(Operation *op, Value input, Value target,
                                 Value weight, StringRef reduction,
                                 StringRef inputName, StringRef targetName) {
  Type elt = getElementType(input);
  if (failed(checkSameElementType(op, input, weight, inputName, "weight")))
    return failure();
  auto ti = getRanked(input), tt = getRanked(target);
  if (ti && ti.getRank() < 2)
    return op->emitOpError() << inputName << " must have rank >= 2 "
                             << "(N x C x D1 ...), got " << ti;
  if (ti && tt) {
    bool ok = tt.getRank() == ti.getRank() - 1 &&
              !conflicts(tt.getDimSize(0), ti.getDimSize(0));
    for (int64_t i = 1; ok && i < tt.getRank(); ++i)
      ok = !conflicts(tt.getDimSize(i), ti.getDimSize(i + 1));
    if (!ok)
      return op->emitOpError() << targetName << " " << tt << " does not match "
                               << inputName << " " << ti
                               << " without its class axis";
  }
  if (auto tw = getRanked(weight))
    if (tw.getRank() != 1 || (ti && conflicts(tw.getDimSize(0),
                                              ti.getDimSize(1))))
      return op->emitOpError() << "weights must be 1-D of the class count, got "
                               << tw;
  if (reduction != "none")
    return ranked({}, elt);
  if (tt)
    return ranked(tt.getShape(), elt);
  if (ti) {
    SmallVector<int64_t> shape(ti.getShape());
    shape.erase(shape.begin() + 1);
    return ranked(shape, elt);
  }
  return unranked(elt);
}

static LogicalResult checkReduction(Operation *op, StringRef reduction) {
  if (reduction == "none" || reduction == "sum" || reduction == "mean")
    return success();
  return op->emitOpError() << "reduction must be none, sum or mean, got '"
                           << reduction << "'";
}

LogicalResult
SoftmaxCrossEntropyLossOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto loss = inferLoss(*this, getScores(), getLabels(), getWeights(),
                        getReduction(), "scores", "labels");
  if (failed(loss))
    return failure();
  types.push_back(*loss);
  if (getLogProb())
    types.push_back(getScores().getType());
  return success();
}

LogicalResult SoftmaxCrossEntropyLossOp::verify() {
  return checkReduction(*this, getReduction());
}

LogicalResult
NegativeLogLikelihoodLossOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto loss = inferLoss(*this, getInput(), getTarget(), getWeight(),
                        getReduction(), "input", "target");
  if (failed(loss))
    return failure();
  types.push_back(*loss);
  return success();
}

LogicalResult NegativeLogLikelihoodLossOp::verify() {
  return checkReduction(*this, getReduction());
}

//===----------------------------------------------------------------------===//
// Recurrent
//===----------------------------------------------------------------------===//

FailureOr<RecurrentSizes> mlir::pipec::onnx::recurrentSizes(
    Operation *op, int64_t gates, Value x, Value w, Value r, Value b,
    ValueRange states, StringRef direction, std::optional<int64_t> hiddenSize,
    int64_t layout) {
  RecurrentSizes s{kDynamic, kDynamic, kDynamic, kDynamic, 1};
  if (direction == "bidirectional")
    s.dirs = 2;
  else if (direction != "forward" && direction != "reverse")
    return op->emitOpError() << "direction must be forward, reverse or "
                                "bidirectional, got '"
                             << direction << "'";
  if (layout != 0 && layout != 1)
    return op->emitOpError() << "layout must be 0 or 1, got " << layout;
  if (hiddenSize) {
    if (*hiddenSize < 1)
      return op->emitOpError() << "hidden_size must be positive, got "
                               << *hiddenSize;
    s.hidden = *hiddenSize;
  }
  auto rank3 = [&](Value v, StringRef name) -> FailureOr<RankedTensorType> {
    auto t = getRanked(v);
    if (t && t.getRank() != 3)
      return op->emitOpError() << name << " must have rank 3, got " << t;
    return t;
  };
  auto merge = [&](int64_t &into, int64_t v, StringRef what) -> LogicalResult {
    if (isDynamic(v))
      return success();
    if (conflicts(into, v))
      return op->emitOpError() << "inconsistent " << what << ": " << into
                               << " vs " << v;
    into = v;
    return success();
  };
  auto tx = rank3(x, "X");
  if (failed(tx))
    return failure();
  auto tw = rank3(w, "W");
  if (failed(tw))
    return failure();
  auto tr = rank3(r, "R");
  if (failed(tr))
    return failure();
  if (auto t = *tr) {
    if (failed(merge(s.hidden, t.getDimSize(2), "hidden size (R)")))
      return failure();
    if (!isDynamic(t.getDimSize(1)) && !isDynamic(s.hidden) &&
        t.getDimSize(1) != gates * s.hidden)
      return op->emitOpError() << "R must be (dirs, " << gates
                               << " x hidden, hidden), got " << t;
  }
  if (auto t = *tw) {
    if (!isDynamic(t.getDimSize(1)) && t.getDimSize(1) % gates != 0)
      return op->emitOpError() << "W must be (dirs, " << gates
                               << " x hidden, input), got " << t;
    if (failed(merge(s.hidden, isDynamic(t.getDimSize(1))
                                   ? kDynamic
                                   : t.getDimSize(1) / gates,
                     "hidden size (W)")) ||
        failed(merge(s.input, t.getDimSize(2), "input size (W)")))
      return failure();
  }
  for (auto t : {*tw, *tr})
    if (t && conflicts(t.getDimSize(0), s.dirs))
      return op->emitOpError() << "W and R must have " << s.dirs
                               << " direction(s) for direction '" << direction
                               << "', got " << t;
  if (auto t = *tx) {
    if (failed(merge(s.seq, t.getDimSize(layout == 0 ? 0 : 1), "seq_length")) ||
        failed(merge(s.batch, t.getDimSize(layout == 0 ? 1 : 0), "batch")) ||
        failed(merge(s.input, t.getDimSize(2), "input size (X)")))
      return failure();
  }
  if (auto t = getRanked(b)) {
    if (t.getRank() != 2 || conflicts(t.getDimSize(0), s.dirs) ||
        (!isDynamic(s.hidden) &&
         conflicts(t.getDimSize(1), 2 * gates * s.hidden)))
      return op->emitOpError() << "B must be (dirs, " << 2 * gates
                               << " x hidden), got " << t;
  }
  for (Value v : states) {
    auto t = getRanked(v);
    if (!t)
      continue;
    SmallVector<int64_t> want =
        layout == 0 ? SmallVector<int64_t>{s.dirs, s.batch, s.hidden}
                    : SmallVector<int64_t>{s.batch, s.dirs, s.hidden};
    bool bad = t.getRank() != 3;
    for (int64_t i = 0; !bad && i < 3; ++i)
      bad = conflicts(t.getDimSize(i), want[i]);
    if (bad)
      return op->emitOpError()
             << "initial states must be "
             << (layout == 0 ? "(dirs, batch, hidden)" : "(batch, dirs, hidden)")
             << ", got " << t;
  }
  return s;
}

/// Y, Y_h, Y_c (as many as the op has) of an LSTM or GRU, then the training
/// form's saved states (result #maxResults): (dirs * planes * seq, batch,
/// hidden), planes 6 (LSTM) or 5 (GRU).
static LogicalResult inferRecurrent(Operation *op, int64_t gates,
                                    unsigned maxResults, Value x, Value w,
                                    Value r, Value b, ValueRange states,
                                    StringRef direction,
                                    std::optional<int64_t> hidden,
                                    int64_t layout, unsigned numResults,
                                    SmallVectorImpl<Type> &types) {
  if (numResults > maxResults + 1)
    return op->emitOpError() << "has " << numResults << " results, at most "
                             << maxResults << " (and the saved states)";
  if (numResults == maxResults + 1 && layout != 0)
    return op->emitOpError() << "saves its states (result #" << maxResults
                             << ") only with layout 0";
  auto s = recurrentSizes(op, gates, x, w, r, b, states, direction, hidden,
                          layout);
  if (failed(s))
    return failure();
  Type elt = getElementType(x);
  for (unsigned i = 0; i < numResults; ++i) {
    if (i == maxResults) {
      int64_t planes = gates == 4 ? 6 : 5;
      int64_t rows = ShapedType::isDynamic(s->dirs) || ShapedType::isDynamic(s->seq)
                         ? ShapedType::kDynamic
                         : s->dirs * planes * s->seq;
      types.push_back(ranked({rows, s->batch, s->hidden}, elt));
    } else if (i == 0)
      types.push_back(
          layout == 0
              ? ranked({s->seq, s->dirs, s->batch, s->hidden}, elt)
              : ranked({s->batch, s->seq, s->dirs, s->hidden}, elt));
    else
      types.push_back(layout == 0 ? ranked({s->dirs, s->batch, s->hidden}, elt)
                                  : ranked({s->batch, s->dirs, s->hidden}, elt));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

FailureOr<AttentionSizes>
mlir::pipec::onnx::attentionSizes(Operation *op, Value q, Value k, Value v,
                                  std::optional<int64_t> qHeads,
                                  std::optional<int64_t> kvHeads) {
  auto qt = getRanked(q);
  if (!qt)
    return op->emitOpError() << "needs a ranked Q";
  bool packed = isNone(k) && isNone(v);
  if (!packed && (isNone(k) || isNone(v)))
    return op->emitOpError() << "takes K and V both or neither (a fused "
                                "projection in Q)";
  auto kt = packed ? RankedTensorType() : getRanked(k);
  auto vt = packed ? RankedTensorType() : getRanked(v);
  if (!packed && (!kt || !vt))
    return op->emitOpError() << "needs ranked K and V";
  if (!packed && (kt.getElementType() != qt.getElementType() ||
                  vt.getElementType() != qt.getElementType()))
    return op->emitOpError() << "Q, K and V must have one element type";
  int64_t rank = qt.getRank();
  if (rank != 3 && rank != 4)
    return op->emitOpError() << "takes 3-D (batch, seq, heads * head size) "
                                "or 4-D (batch, heads, seq, head size) "
                                "inputs, got Q of rank "
                             << rank;
  if ((kt && kt.getRank() != rank) || (vt && vt.getRank() != rank))
    return op->emitOpError() << "Q, K and V must have one rank";
  auto dyn = [](int64_t d) { return ShapedType::isDynamic(d); };
  auto mismatch = [&](StringRef what) {
    return op->emitOpError() << what << " (Q " << q.getType() << ", K "
                             << k.getType() << ", V " << v.getType() << ")";
  };
  AttentionSizes r;
  auto sf = op->getAttrOfType<IntegerAttr>("seq_first");
  if (sf && sf.getInt() != 0 && sf.getInt() != 1)
    return op->emitOpError() << "seq_first must be 0 or 1, got " << sf.getInt();
  r.seqFirst = sf && sf.getInt() == 1;
  if (auto drop = op->getAttrOfType<FloatAttr>("dropout")) {
    double p = drop.getValueAsDouble();
    if (!(p >= 0.0 && p < 1.0))
      return op->emitOpError() << "dropout must be in [0, 1), got " << p;
  }
  // The batch's and the sequence's axes of 3-D Q, K and V.
  const unsigned bAxis = r.seqFirst ? 1 : 0, lAxis = r.seqFirst ? 0 : 1;
  r.batch = qt.getDimSize(rank == 3 ? bAxis : 0);
  if (rank == 4) {
    if (r.seqFirst)
      return op->emitOpError() << "seq_first takes 3-D inputs, got Q of rank 4";
    if (packed)
      return op->emitOpError() << "a fused projection (K and V none) must "
                                  "be 3-D";
    r.form = AttentionSizes::FourD;
    r.heads = qt.getDimSize(1);
    r.t = qt.getDimSize(2);
    r.dh = qt.getDimSize(3);
    r.s = kt.getDimSize(2);
    // Grouped-query attention: K and V of fewer heads, each read by
    // heads / kvHeads query heads in turn.
    r.kvHeads = kt.getDimSize(1);
    for (auto t : {kt, vt})
      if (conflicts(t.getDimSize(0), r.batch) ||
          conflicts(t.getDimSize(1), r.kvHeads) ||
          conflicts(t.getDimSize(3), r.dh))
        return mismatch("needs K and V of Q's batch and head size and of one heads axis");
    if (!dyn(r.kvHeads) && !dyn(r.heads) &&
        (r.kvHeads <= 0 || r.heads % r.kvHeads != 0))
      return mismatch("needs K's and V's heads to divide Q's (grouped-query attention)");
    if (conflicts(vt.getDimSize(2), r.s))
      return mismatch("needs K and V of one sequence length");
    if (qHeads && conflicts(int64_t(*qHeads), r.heads))
      return mismatch("q_num_heads differs from Q's heads axis");
    if (kvHeads && conflicts(int64_t(*kvHeads), r.kvHeads))
      return mismatch("kv_num_heads differs from K's heads axis");
    return r;
  }
  if (!qHeads || *qHeads <= 0)
    return op->emitOpError() << "with 3-D inputs needs q_num_heads > 0";
  if (kvHeads && *kvHeads != *qHeads)
    return op->emitOpError() << "kv_num_heads " << *kvHeads
                             << " differs from q_num_heads " << *qHeads
                             << "; grouped-query attention takes the 4-D form "
                                "(K and V of (batch, kv heads, seq, head size))";
  r.heads = *qHeads;
  r.kvHeads = r.heads;
  r.t = qt.getDimSize(lAxis);
  int64_t width = qt.getDimSize(2);
  int64_t parts = packed ? 3 : 1;
  if (dyn(width))
    return op->emitOpError() << "needs a static last axis of Q";
  if (width % (parts * r.heads) != 0)
    return op->emitOpError()
           << "Q's last axis " << width << " is not "
           << (packed ? "3 * q_num_heads * head size" : "q_num_heads * head size")
           << " for q_num_heads " << r.heads;
  r.dh = width / (parts * r.heads);
  if (packed) {
    r.form = AttentionSizes::Packed;
    r.s = r.t;
    return r;
  }
  r.form = AttentionSizes::Separate3D;
  r.s = kt.getDimSize(lAxis);
  for (auto t : {kt, vt})
    if (conflicts(t.getDimSize(bAxis), r.batch) ||
        conflicts(t.getDimSize(2), r.heads * r.dh))
      return mismatch("needs K and V of Q's batch and width");
  if (conflicts(vt.getDimSize(lAxis), r.s))
    return mismatch("needs K and V of one sequence length");
  return r;
}

float mlir::pipec::onnx::attentionScale(std::optional<float> scale,
                                        int64_t headSize) {
  return scale ? *scale : float(1.0 / std::sqrt(double(headSize)));
}

LogicalResult AttentionOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (getNumResults() > 2)
    return emitOpError() << "has " << getNumResults()
                         << " results; only Y (and the training form's "
                            "probabilities) are supported";
  auto sizes = attentionSizes(*this, getQ(), getK(), getV(), getQNumHeads(),
                              getKvNumHeads());
  if (failed(sizes))
    return failure();
  if (getIsCausal() != 0 && getIsCausal() != 1)
    return emitOpError() << "is_causal must be 0 or 1, got " << getIsCausal();
  if (!isNone(getAttnMask())) {
    // Broadcast to (B, H, T, S) behind leading 1s, each axis but S's of 1
    // or full: one (T, S) mask for every pair, a key padding mask of (B,
    // 1, 1, S), or one per pair.
    auto m = getRanked(getAttnMask());
    bool ok = m && (m.getElementType().isInteger(1) ||
                    m.getElementType() == getElementType(getQ())) &&
              m.getRank() >= 2 && m.getRank() <= 4;
    if (ok) {
      int64_t full[4] = {sizes->batch, sizes->heads, sizes->t, sizes->s};
      for (int64_t i = 0, r = m.getRank(); i < r; ++i) {
        int64_t d = m.getDimSize(i), want = full[4 - r + i];
        if (i == r - 1 ? conflicts(d, want) : d != 1 && conflicts(d, want))
          ok = false;
      }
    }
    if (!ok)
      return emitOpError() << "attn_mask must be a bool tensor (true: attend) "
                              "or one of Q's element type (added to the "
                              "scores) of ("
                           << sizes->t << ", " << sizes->s
                           << ") or broadcast to (batch, heads, "
                           << sizes->t << ", " << sizes->s
                           << ") with axes of 1, got "
                           << getAttnMask().getType();
  }
  Type elt = getElementType(getQ());
  if (sizes->form == AttentionSizes::FourD)
    types.push_back(ranked({sizes->batch, sizes->heads, sizes->t, sizes->dh}, elt));
  else if (sizes->seqFirst)
    types.push_back(ranked({sizes->t, sizes->batch, sizes->heads * sizes->dh}, elt));
  else
    types.push_back(ranked({sizes->batch, sizes->t, sizes->heads * sizes->dh}, elt));
  if (getNumResults() == 2)
    types.push_back(
        ranked({sizes->batch, sizes->heads, sizes->t, sizes->s}, elt));
  return success();
}

LogicalResult LSTMOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferRecurrent(*this, 4, 3, getX(), getW(), getR(), getB(),
                        {getInitialH(), getInitialC()}, getDirection(),
                        getHiddenSize(), getLayout(), getNumResults(), types);
}

LogicalResult GRUOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferRecurrent(*this, 3, 2, getX(), getW(), getR(), getB(),
                        {getInitialH()}, getDirection(), getHiddenSize(),
                        getLayout(), getNumResults(), types);
}

LogicalResult mlir::pipec::onnx::checkRecurrentSupported(Operation *op) {
  bool lstm = isa<LSTMOp>(op);
  StringRef name = lstm ? "LSTM" : "GRU";
  auto refuse = [&](const Twine &what) {
    return op->emitError() << name << ": " << what;
  };
  auto x = getRanked(op->getOperand(0));
  if (!x || !x.hasStaticShape() || !x.getElementType().isF32())
    return refuse("X must be a statically shaped f32 tensor");
  for (Value v : op->getOperands())
    if (auto t = getRanked(v); t && !isNone(v) && v != op->getOperand(4) &&
                               (!t.hasStaticShape() || !t.getElementType().isF32()))
      return refuse("every float input must be a statically shaped f32 tensor");
  if (op->getAttrOfType<IntegerAttr>("layout") &&
      op->getAttrOfType<IntegerAttr>("layout").getInt() != 0)
    return refuse("layout = 1 (batch first) is not supported; transpose X "
                  "to (seq, batch, input) and use layout 0, as "
                  "torch.onnx.export does for batch_first");
  if (auto acts = op->getAttrOfType<ArrayAttr>("activations")) {
    SmallVector<StringRef> defaults =
        lstm ? SmallVector<StringRef>{"Sigmoid", "Tanh", "Tanh"}
             : SmallVector<StringRef>{"Sigmoid", "Tanh"};
    for (auto [i, a] : llvm::enumerate(acts)) {
      StringRef got = cast<StringAttr>(a).getValue();
      if (!got.equals_insensitive(defaults[i % defaults.size()]))
        return refuse("activation '" + got +
                      "' is not supported; only the defaults (" +
                      llvm::join(defaults, ", ") + ") are");
    }
  }
  if (op->hasAttr("activation_alpha") || op->hasAttr("activation_beta"))
    return refuse("activation_alpha/activation_beta are not supported; only "
                  "the default activations are");
  if (op->hasAttr("clip"))
    return refuse("clip is not supported; remove the attribute (no cell "
                  "clipping)");
  if (lstm) {
    auto lstmOp = cast<LSTMOp>(op);
    if (lstmOp.getInputForget() != 0)
      return refuse("input_forget = 1 (coupled input and forget gates) is "
                    "not supported; use 0");
    if (!isNone(lstmOp.getP()))
      return refuse("peepholes (input P) are not supported; drop P "
                    "(torch's nn.LSTM has none)");
  } else if (int64_t lbr = cast<GRUOp>(op).getLinearBeforeReset();
             lbr != 0 && lbr != 1) {
    return refuse("linear_before_reset must be 0 or 1, got " + Twine(lbr));
  }
  Value lens = op->getOperand(4);
  if (!isNone(lens)) {
    auto values = getConstantInts(lens);
    int64_t seq = x.getDimSize(0);
    if (!values || llvm::any_of(*values, [&](int64_t l) { return l != seq; }))
      return refuse("sequence_lens must be absent or a constant equal to "
                    "seq_length (" +
                    Twine(seq) +
                    ") everywhere; variable-length sequences are not "
                    "supported (pad them and drop sequence_lens)");
  }
  return success();
}
