//===- OnnxOps.cpp - shape functions and verifiers -------------------------===//
//
// Each op's `inferResultTypes` is its shape function. It is the truth for
// result types whatever opset the model came from, and it is what lets later
// passes (micro-batching) change a batch size and re-infer the graph. Since
// the interface's verifier runs it before an op's own `verify`, a shape
// function checks the attributes it reads itself; `verify` checks the rest.
// Folders live in OnnxFolders.cpp.
//
//===----------------------------------------------------------------------===//
#include "dialects/onnx/OnnxDialect.h"
#include "dialects/onnx/ShapeFunctions.h"
#include "dialects/onnx/ShapeHelpers.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace mlir::pipec::onnx;

static constexpr int64_t kDynamic = ShapedType::kDynamic;

static bool isDynamic(int64_t d) { return ShapedType::isDynamic(d); }

/// True when two views of one dimension cannot be the same size.
static bool conflicts(int64_t a, int64_t b) {
  return !isDynamic(a) && !isDynamic(b) && a != b;
}

/// `type` (a tensor type) with element type `element`.
static Type withElementType(Type type, Type element) {
  if (auto tensor = llvm::dyn_cast<TensorType>(type))
    return tensor.clone(element);
  return unranked(element);
}

/// Product of `dims`, dynamic when any is.
static int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (isDynamic(d))
      return kDynamic;
    n *= d;
  }
  return n;
}

/// Normalizes and checks a list of distinct axes of a rank-`rank` tensor.
static FailureOr<SmallVector<int64_t>>
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
static LogicalResult checkScalar(Operation *op, Value v, StringRef name) {
  if (auto t = getRanked(v); t && t.getRank() != 0)
    return op->emitOpError() << name << " must be a scalar, got " << t;
  return success();
}

static LogicalResult checkSameElementType(Operation *op, Value a, Value b,
                                          StringRef aName, StringRef bName) {
  if (isNone(a) || isNone(b) || getElementType(a) == getElementType(b))
    return success();
  return op->emitOpError() << aName << " and " << bName
                           << " have different element types "
                           << getElementType(a) << " and "
                           << getElementType(b);
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(RankedTensorType::get(getValue().getShapedType().getShape(),
                                        getValue().getElementType()));
  return success();
}

LogicalResult
ConstantOfShapeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = Float32Type::get(getContext());
  if (auto value = getValueAttr()) {
    if (value.getNumElements() != 1)
      return emitOpError() << "value must have one element, got "
                           << value.getShapedType();
    elt = value.getElementType();
  }
  auto t = getRanked(getInput());
  if (t && t.getRank() != 1)
    return emitOpError() << "input must be 1-D, got " << t;
  if (auto shape = getConstantInts(getInput())) {
    for (int64_t d : *shape)
      if (d < 0)
        return emitOpError() << "shape has negative dimension " << d;
    types.push_back(ranked(*shape, elt));
  } else if (t && t.hasStaticShape()) {
    types.push_back(ranked(SmallVector<int64_t>(t.getDimSize(0), kDynamic),
                           elt));
  } else {
    types.push_back(unranked(elt));
  }
  return success();
}

/// The value of a constant scalar operand as a double, if it is one.
static std::optional<double> getConstantScalar(Value v) {
  ElementsAttr attr = getConstantAttr(v);
  if (!attr || attr.getNumElements() != 1)
    return std::nullopt;
  if (auto ints = getConstantInts(v)) {
    if (attr.getElementType().isUnsignedInteger())
      return static_cast<double>(static_cast<uint64_t>((*ints)[0]));
    return static_cast<double>((*ints)[0]);
  }
  if (auto fp = llvm::dyn_cast<DenseFPElementsAttr>(attr))
    return (*fp.getValues<APFloat>().begin()).convertToDouble();
  return std::nullopt;
}

/// Number of elements of a float Range(start, limit, delta), delta != 0.
static int64_t rangeLength(double start, double limit, double delta) {
  return std::max<int64_t>(
      static_cast<int64_t>(std::ceil((limit - start) / delta)), 0);
}

LogicalResult RangeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getStart());
  for (auto [v, name] : {std::pair<Value, StringRef>{getStart(), "start"},
                         {getLimit(), "limit"},
                         {getDelta(), "delta"}}) {
    if (failed(checkScalar(*this, v, name)))
      return failure();
    if (getElementType(v) != elt)
      return emitOpError() << "start, limit and delta must have one element "
                              "type, got "
                           << elt << " and " << getElementType(v);
  }
  if (!llvm::isa<IntegerType, FloatType>(elt))
    return emitOpError() << "element type must be integer or float, got "
                         << elt;
  auto start = getConstantScalar(getStart());
  auto limit = getConstantScalar(getLimit());
  auto delta = getConstantScalar(getDelta());
  if (delta && *delta == 0)
    return emitOpError() << "delta must not be zero";
  int64_t n = kDynamic;
  if (start && limit && delta) {
    if (llvm::isa<IntegerType>(elt)) {
      // Exact integer arithmetic: doubles lose precision past 2^53.
      int64_t s = getConstantInts(getStart())->front();
      int64_t l = getConstantInts(getLimit())->front();
      int64_t d = getConstantInts(getDelta())->front();
      int64_t span = l - s;
      n = d > 0 ? (span > 0 ? (span + d - 1) / d : 0)
                : (span < 0 ? (-span + (-d) - 1) / (-d) : 0);
    } else {
      n = rangeLength(*start, *limit, *delta);
    }
  }
  types.push_back(ranked({n}, elt));
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// Numpy broadcasting of all `values`; the result has element type
/// `resultElement`.
static LogicalResult inferBroadcastShape(Operation *op, ValueRange values,
                                         Type resultElement,
                                         SmallVectorImpl<Type> &types) {
  SmallVector<int64_t> shape;
  bool allRanked = true;
  for (Value v : values) {
    auto t = getRanked(v);
    if (!t) {
      allRanked = false;
      continue;
    }
    auto next = broadcastShapes(op, shape, t.getShape());
    if (failed(next))
      return failure();
    shape = *next;
  }
  types.push_back(allRanked ? ranked(shape, resultElement)
                            : unranked(resultElement));
  return success();
}

/// Shape function shared by numpy-broadcasting binary ops.
static LogicalResult inferBroadcast(Operation *op, Value a, Value b,
                                    Type resultElement,
                                    SmallVectorImpl<Type> &types) {
  if (getElementType(a) != getElementType(b))
    return op->emitOpError() << "operands have different element types "
                             << getElementType(a) << " and "
                             << getElementType(b);
  return inferBroadcastShape(op, {a, b}, resultElement, types);
}

LogicalResult AddOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferBroadcast(*this, getA(), getB(), getElementType(getA()), types);
}
LogicalResult SubOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferBroadcast(*this, getA(), getB(), getElementType(getA()), types);
}
LogicalResult MulOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferBroadcast(*this, getA(), getB(), getElementType(getA()), types);
}
LogicalResult DivOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferBroadcast(*this, getA(), getB(), getElementType(getA()), types);
}

LogicalResult PowOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferBroadcastShape(*this, {getX(), getY()}, getElementType(getX()),
                             types);
}

LogicalResult EqualOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferBroadcast(*this, getA(), getB(),
                        IntegerType::get(getContext(), 1), types);
}

LogicalResult WhereOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkSameElementType(*this, getX(), getY(), "X", "Y")))
    return failure();
  return inferBroadcastShape(*this, {getCondition(), getX(), getY()},
                             getElementType(getX()), types);
}

#define PIPEC_SAME_TYPE_AS(OP, OPERAND)                                        \
  LogicalResult OP::inferResultTypes(SmallVectorImpl<Type> &types) {           \
    types.push_back(OPERAND().getType());                                      \
    return success();                                                          \
  }
PIPEC_SAME_TYPE_AS(ReluOp, getX)
PIPEC_SAME_TYPE_AS(NegOp, getX)
PIPEC_SAME_TYPE_AS(TanhOp, getInput)
PIPEC_SAME_TYPE_AS(SigmoidOp, getX)
PIPEC_SAME_TYPE_AS(ErfOp, getInput)
PIPEC_SAME_TYPE_AS(SqrtOp, getX)
PIPEC_SAME_TYPE_AS(ExpOp, getInput)
PIPEC_SAME_TYPE_AS(LogOp, getInput)
PIPEC_SAME_TYPE_AS(IdentityOp, getInput)
#undef PIPEC_SAME_TYPE_AS

LogicalResult CastOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type to = onnxDataTypeToType(getContext(), getTo());
  if (!to)
    return emitOpError() << "'to' is " << static_cast<int64_t>(getTo())
                         << ", not an ONNX data type code this compiler knows";
  types.push_back(withElementType(getInput().getType(), to));
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

LogicalResult GemmOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getA());
  if (failed(checkSameElementType(*this, getA(), getB(), "A", "B")) ||
      failed(checkSameElementType(*this, getA(), getC(), "A", "C")))
    return failure();
  auto ta = getRanked(getA()), tb = getRanked(getB());
  if (!ta || !tb) {
    types.push_back(unranked(elt));
    return success();
  }
  if (ta.getRank() != 2 || tb.getRank() != 2)
    return emitOpError() << "A and B must be 2-D, got " << ta << " and " << tb;
  int64_t m = ta.getDimSize(getTransA() ? 1 : 0);
  int64_t ka = ta.getDimSize(getTransA() ? 0 : 1);
  int64_t kb = tb.getDimSize(getTransB() ? 1 : 0);
  int64_t n = tb.getDimSize(getTransB() ? 0 : 1);
  if (conflicts(ka, kb))
    return emitOpError() << "inner dimensions differ: " << ka << " and " << kb;
  if (auto tc = getRanked(getC())) {
    if (tc.getRank() > 2)
      return emitOpError() << "C must broadcast to " << m << "x" << n;
    SmallVector<int64_t> mn{m, n};
    auto shape = broadcastShapes(*this, mn, tc.getShape());
    if (failed(shape))
      return failure();
    if (conflicts((*shape)[0], m) || conflicts((*shape)[1], n))
      return emitOpError() << "C does not broadcast to " << m << "x" << n;
  }
  types.push_back(ranked({m, n}, elt));
  return success();
}

LogicalResult MatMulOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getA());
  if (failed(checkSameElementType(*this, getA(), getB(), "A", "B")))
    return failure();
  auto ta = getRanked(getA()), tb = getRanked(getB());
  if (!ta || !tb) {
    types.push_back(unranked(elt));
    return success();
  }
  if (ta.getRank() == 0 || tb.getRank() == 0)
    return emitOpError() << "operands must not be scalars";
  SmallVector<int64_t> a(ta.getShape()), b(tb.getShape());
  bool promotedA = a.size() == 1, promotedB = b.size() == 1;
  if (promotedA)
    a.insert(a.begin(), 1);
  if (promotedB)
    b.push_back(1);
  int64_t ka = a.back(), kb = b[b.size() - 2];
  if (conflicts(ka, kb))
    return emitOpError() << "inner dimensions differ: " << ka << " and " << kb;
  auto batch = broadcastShapes(*this, ArrayRef<int64_t>(a).drop_back(2),
                               ArrayRef<int64_t>(b).drop_back(2));
  if (failed(batch))
    return failure();
  SmallVector<int64_t> out(*batch);
  if (!promotedA)
    out.push_back(a[a.size() - 2]);
  if (!promotedB)
    out.push_back(b.back());
  types.push_back(ranked(out, elt));
  return success();
}

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

LogicalResult ConvOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type elt = getElementType(getX());
  if (failed(checkSameElementType(*this, getX(), getW(), "X", "W")) ||
      failed(checkSameElementType(*this, getX(), getB(), "X", "B")))
    return failure();
  int64_t group = getGroup();
  if (group < 1)
    return emitOpError() << "group must be positive, got " << group;
  auto tx = getRanked(getX()), tw = getRanked(getW());
  if (tx && tx.getRank() < 3)
    return emitOpError() << "X must have rank >= 3 (N x C x D1 ...), got "
                         << tx;
  if (tw && tw.getRank() < 3)
    return emitOpError() << "W must have rank >= 3 (M x C/group x k1 ...), got "
                         << tw;
  if (tx && tw && tx.getRank() != tw.getRank())
    return emitOpError() << "X and W must have the same rank, got " << tx
                         << " and " << tw;
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

LogicalResult MaxPoolOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Window w{getKernelShape(), getStrides(), getPads(), getDilations(),
           getAutoPad(), getCeilMode() != 0};
  auto y = inferPool(*this, getX(), w);
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
  Window w{getKernelShape(), getStrides(), getPads(), getDilations(),
           getAutoPad(), getCeilMode() != 0};
  auto y = inferPool(*this, getX(), w);
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
// ai.onnx.preview.training
//===----------------------------------------------------------------------===//

LogicalResult GradientOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  size_t xs = getXs().size(), zs = getZs() ? getZs()->size() : 0;
  if (xs == 0)
    return emitOpError() << "xs must name at least one tensor";
  if (getY().empty())
    return emitOpError() << "y must name a tensor";
  if (getInputs().size() != xs + zs)
    return emitOpError() << "has " << getInputs().size()
                         << " inputs but xs and zs name " << xs + zs
                         << " tensors";
  for (size_t i = 0; i < xs; ++i)
    types.push_back(getInputs()[i].getType());
  return success();
}

/// Shape function of Momentum, Adam and Adagrad: the operands after R and T
/// are `groupNames.size()` groups of n tensors (X, G, then state); the
/// results are X then the state groups, each with its operand's type.
static LogicalResult inferOptimizer(Operation *op, Value r, Value t,
                                    ValueRange inputs,
                                    ArrayRef<StringRef> groupNames,
                                    SmallVectorImpl<Type> &types) {
  if (failed(checkScalar(op, r, "R")) || failed(checkScalar(op, t, "T")))
    return failure();
  size_t groups = groupNames.size();
  if (inputs.empty() || inputs.size() % groups != 0) {
    auto diag = op->emitOpError()
                << "expects " << groups << " equally long groups (";
    llvm::interleaveComma(groupNames, diag);
    return diag << ") after R and T, got " << inputs.size() << " operands";
  }
  size_t n = inputs.size() / groups;
  for (size_t i = 0; i < n; ++i) {
    Value x = inputs[i];
    for (size_t g = 1; g < groups; ++g) {
      Value v = inputs[g * n + i];
      auto tx = getRanked(x), tv = getRanked(v);
      if (getElementType(x) != getElementType(v) ||
          (tx && tv &&
           (tx.getRank() != tv.getRank() ||
            failed(verifyCompatibleShape(tx.getShape(), tv.getShape())))))
        return op->emitOpError() << groupNames[g] << " #" << i << " of type "
                                 << v.getType() << " does not match "
                                 << groupNames[0] << " #" << i << " of type "
                                 << x.getType();
    }
  }
  for (size_t g = 0; g < groups; ++g)
    if (g != 1)
      for (size_t i = 0; i < n; ++i)
        types.push_back(inputs[g * n + i].getType());
  return success();
}

LogicalResult MomentumOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferOptimizer(*this, getR(), getT(), getInputs(), {"X", "G", "V"},
                        types);
}

LogicalResult MomentumOp::verify() {
  if (getMode() != "standard" && getMode() != "nesterov")
    return emitOpError() << "mode must be standard or nesterov, got '"
                         << getMode() << "'";
  return success();
}

LogicalResult AdamOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferOptimizer(*this, getR(), getT(), getInputs(),
                        {"X", "G", "V", "H"}, types);
}

LogicalResult AdamOp::verify() {
  if (getEpsilon().isNegative())
    return emitOpError() << "epsilon must not be negative";
  return success();
}

LogicalResult AdagradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferOptimizer(*this, getR(), getT(), getInputs(), {"X", "G", "H"},
                        types);
}

LogicalResult AdagradOp::verify() {
  if (getEpsilon().isNegative())
    return emitOpError() << "epsilon must not be negative";
  if (getDecayFactor().isNegative())
    return emitOpError() << "decay_factor must not be negative";
  return success();
}

#define GET_OP_CLASSES
#include "dialects/onnx/OnnxOps.cpp.inc"
