//===- OnnxFolders.cpp - constant folding ----------------------------------===//
//
// Folders exist so that the shape subgraphs of exported models (Shape ->
// Gather -> Unsqueeze -> Concat -> Reshape, ConstantOfShape, Range, Where
// ...) collapse into constants once the shapes are static. They fold small
// integer and float constants only (kMaxFoldElements), and never report
// errors: a folder that meets something it cannot handle just gives up.
//
//===----------------------------------------------------------------------===//
#include "dialects/onnx/OnnxDialect.h"
#include "dialects/onnx/ShapeFunctions.h"
#include "dialects/onnx/ShapeHelpers.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/APSInt.h"

using namespace mlir;
using namespace mlir::pipec::onnx;

/// Folding makes constants of at most this many elements (splats aside).
static constexpr int64_t kMaxFoldElements = 4096;

/// A dense integer or float constant small enough to fold.
static DenseElementsAttr smallDense(Attribute attr) {
  auto dense = llvm::dyn_cast_if_present<DenseElementsAttr>(attr);
  if (!dense || dense.getNumElements() > kMaxFoldElements ||
      !llvm::isa<IntegerType, FloatType>(dense.getElementType()))
    return {};
  return dense;
}

/// The static type the shape function infers for result `index`, or null.
/// Folding runs on verified IR, but a folder must stay silent anyway.
static RankedTensorType inferredStaticType(Operation *op, unsigned index = 0) {
  ScopedDiagnosticHandler silence(op->getContext(),
                                  [](Diagnostic &) { return success(); });
  SmallVector<Type> types;
  if (failed(llvm::cast<ShapeInferenceOpInterface>(op).inferResultTypes(
          types)) ||
      types.size() <= index)
    return {};
  auto type = llvm::dyn_cast<RankedTensorType>(types[index]);
  return type && type.hasStaticShape() ? type : RankedTensorType();
}

static SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// For each element of a tensor of static shape `out`, the linear index of
/// the element numpy broadcasting reads from a tensor of shape `in`.
static SmallVector<int64_t> broadcastSources(ArrayRef<int64_t> in,
                                             ArrayRef<int64_t> out) {
  SmallVector<int64_t> inStrides = stridesOf(in);
  size_t offset = out.size() - in.size();
  int64_t total = 1;
  for (int64_t d : out)
    total *= d;
  SmallVector<int64_t> sources;
  sources.reserve(total);
  SmallVector<int64_t> index(out.size(), 0);
  for (int64_t n = 0; n < total; ++n) {
    int64_t source = 0;
    for (size_t d = 0; d < in.size(); ++d)
      if (in[d] != 1)
        source += index[d + offset] * inStrides[d];
    sources.push_back(source);
    for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d) {
      if (++index[d] < out[d])
        break;
      index[d] = 0;
    }
  }
  return sources;
}

/// Static numpy broadcast of constant shapes; nullopt when they clash.
static std::optional<SmallVector<int64_t>>
broadcastStatic(ArrayRef<DenseElementsAttr> operands) {
  SmallVector<int64_t> shape;
  for (DenseElementsAttr operand : operands) {
    ArrayRef<int64_t> s = operand.getType().getShape();
    size_t rank = std::max(shape.size(), s.size());
    SmallVector<int64_t> next(rank);
    for (size_t i = 0; i < rank; ++i) {
      int64_t a = i < rank - shape.size() ? 1 : shape[i - (rank - shape.size())];
      int64_t b = i < rank - s.size() ? 1 : s[i - (rank - s.size())];
      if (a != b && a != 1 && b != 1)
        return std::nullopt;
      next[i] = a == 1 ? b : a;
    }
    shape = std::move(next);
  }
  return shape;
}

/// Folds an elementwise op over constants with numpy broadcasting; `fn`
/// computes one element from one element of each operand, or null to give up.
static Attribute
foldElementwise(ArrayRef<DenseElementsAttr> operands, Type resultElement,
                function_ref<Attribute(ArrayRef<Attribute>)> fn) {
  auto shape = broadcastStatic(operands);
  if (!shape)
    return {};
  auto type = RankedTensorType::get(*shape, resultElement);
  if (type.getNumElements() > kMaxFoldElements)
    return {};
  SmallVector<SmallVector<Attribute>> values;
  SmallVector<SmallVector<int64_t>> sources;
  for (DenseElementsAttr operand : operands) {
    values.push_back(llvm::to_vector(operand.getValues<Attribute>()));
    sources.push_back(broadcastSources(operand.getType().getShape(), *shape));
  }
  SmallVector<Attribute> out, args(operands.size());
  for (int64_t n = 0; n < type.getNumElements(); ++n) {
    for (size_t k = 0; k < operands.size(); ++k)
      args[k] = values[k][sources[k][n]];
    Attribute element = fn(args);
    if (!element)
      return {};
    out.push_back(element);
  }
  return DenseElementsAttr::get(type, out);
}

/// The entries of a 1-D i64 value as far as they are known: a constant's,
/// or a Shape op's with kDynamic for dynamic dimensions.
static std::optional<SmallVector<int64_t>> knownInts(Value v) {
  if (auto ints = getConstantInts(v))
    return ints;
  auto shape = v.getDefiningOp<ShapeOp>();
  if (!shape)
    return std::nullopt;
  auto t = getRanked(shape.getData());
  if (!t)
    return std::nullopt;
  auto [start, end] = shapeRange(shape, t.getRank());
  return SmallVector<int64_t>(t.getShape().slice(start, end - start));
}

/// Builds `type` from the elements of `data` at linear indices `sources`;
/// `data` is a small constant or a (partly known) Shape result.
static Attribute pickElements(Value data, Attribute dataAttr,
                              ArrayRef<int64_t> sources,
                              RankedTensorType type) {
  if (static_cast<int64_t>(sources.size()) > kMaxFoldElements)
    return {};
  if (auto dense = smallDense(dataAttr)) {
    if (dense.isSplat())
      return DenseElementsAttr::get(type, dense.getSplatValue<Attribute>());
    auto values = llvm::to_vector(dense.getValues<Attribute>());
    SmallVector<Attribute> out;
    for (int64_t s : sources)
      out.push_back(values[s]);
    return DenseElementsAttr::get(type, out);
  }
  auto known = knownInts(data);
  if (!known || !type.getElementType().isInteger(64))
    return {};
  SmallVector<int64_t> out;
  for (int64_t s : sources) {
    if (ShapedType::isDynamic((*known)[s]))
      return {};
    out.push_back((*known)[s]);
  }
  return DenseElementsAttr::get(type, ArrayRef<int64_t>(out));
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

OpFoldResult NoValueOp::fold(FoldAdaptor) { return UnitAttr::get(getContext()); }

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult ConstantOfShapeOp::fold(FoldAdaptor) {
  auto type = inferredStaticType(*this);
  if (!type)
    return {};
  if (!getValueAttr())
    return DenseElementsAttr::get(
        type, FloatAttr::get(type.getElementType(), 0.0));
  auto value = llvm::dyn_cast<DenseElementsAttr>(getValueAttr());
  if (!value || !llvm::isa<IntegerType, FloatType>(value.getElementType()))
    return {};
  return DenseElementsAttr::get(type, *value.getValues<Attribute>().begin());
}

OpFoldResult RangeOp::fold(FoldAdaptor adaptor) {
  auto type = inferredStaticType(*this);
  auto start = smallDense(adaptor.getStart());
  auto delta = smallDense(adaptor.getDelta());
  if (!type || !start || !delta || type.getNumElements() > kMaxFoldElements)
    return {};
  Type elt = type.getElementType();
  SmallVector<Attribute> out;
  if (auto intType = llvm::dyn_cast<IntegerType>(elt)) {
    APInt s = *start.getValues<APInt>().begin();
    APInt d = *delta.getValues<APInt>().begin();
    for (int64_t i = 0; i < type.getNumElements(); ++i)
      out.push_back(IntegerAttr::get(
          intType, s + d * APInt(intType.getWidth(), i, /*isSigned=*/true)));
  } else {
    double s = (*start.getValues<APFloat>().begin()).convertToDouble();
    double d = (*delta.getValues<APFloat>().begin()).convertToDouble();
    for (int64_t i = 0; i < type.getNumElements(); ++i)
      out.push_back(FloatAttr::get(elt, s + i * d));
  }
  return DenseElementsAttr::get(type, out);
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

using IntFn = std::optional<APInt> (*)(const APInt &, const APInt &,
                                       bool isUnsigned);

static OpFoldResult foldIntegerBinary(Attribute lhs, Attribute rhs, IntFn fn) {
  auto a = smallDense(lhs), b = smallDense(rhs);
  if (!a || !b)
    return {};
  auto intType = llvm::dyn_cast<IntegerType>(a.getElementType());
  if (!intType || a.getElementType() != b.getElementType())
    return {};
  bool isUnsigned = intType.isUnsigned();
  return foldElementwise({a, b}, intType, [&](ArrayRef<Attribute> x) {
    auto r = fn(llvm::cast<IntegerAttr>(x[0]).getValue(),
                llvm::cast<IntegerAttr>(x[1]).getValue(), isUnsigned);
    return r ? IntegerAttr::get(intType, *r) : Attribute();
  });
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  return foldIntegerBinary(
      adaptor.getA(), adaptor.getB(),
      [](const APInt &a, const APInt &b, bool) -> std::optional<APInt> {
        return a + b;
      });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  return foldIntegerBinary(
      adaptor.getA(), adaptor.getB(),
      [](const APInt &a, const APInt &b, bool) -> std::optional<APInt> {
        return a - b;
      });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  return foldIntegerBinary(
      adaptor.getA(), adaptor.getB(),
      [](const APInt &a, const APInt &b, bool) -> std::optional<APInt> {
        return a * b;
      });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  return foldIntegerBinary(
      adaptor.getA(), adaptor.getB(),
      [](const APInt &a, const APInt &b,
         bool isUnsigned) -> std::optional<APInt> {
        if (b.isZero())
          return std::nullopt;
        if (isUnsigned)
          return a.udiv(b);
        if (a.isMinSignedValue() && b.isAllOnes())
          return std::nullopt;
        return a.sdiv(b);
      });
}

/// a mod b with the sign of b (Python's %) or, `cSign`, of a (fmod);
/// nullopt for b = 0 and the one overflowing signed case.
static std::optional<APInt> remainder(const APInt &a, const APInt &b,
                                      bool isUnsigned, bool cSign) {
  if (b.isZero() || (!isUnsigned && a.isMinSignedValue() && b.isAllOnes()))
    return std::nullopt;
  if (isUnsigned)
    return a.urem(b);
  APInt r = a.srem(b);
  if (!cSign && !r.isZero() && r.isNegative() != b.isNegative())
    r += b;
  return r;
}

/// Integer remainders (Swin Transformer's window padding: (7 - H % 7) % 7).
OpFoldResult ModOp::fold(FoldAdaptor adaptor) {
  if (getFmod())
    return foldIntegerBinary(adaptor.getA(), adaptor.getB(),
                             [](const APInt &a, const APInt &b, bool u) {
                               return remainder(a, b, u, true);
                             });
  return foldIntegerBinary(adaptor.getA(), adaptor.getB(),
                           [](const APInt &a, const APInt &b, bool u) {
                             return remainder(a, b, u, false);
                           });
}

OpFoldResult EqualOp::fold(FoldAdaptor adaptor) {
  auto a = smallDense(adaptor.getA()), b = smallDense(adaptor.getB());
  if (!a || !b || a.getElementType() != b.getElementType())
    return {};
  auto i1 = IntegerType::get(getContext(), 1);
  return foldElementwise({a, b}, i1, [&](ArrayRef<Attribute> x) -> Attribute {
    bool equal;
    if (auto ia = llvm::dyn_cast<IntegerAttr>(x[0]))
      equal = ia.getValue() == llvm::cast<IntegerAttr>(x[1]).getValue();
    else
      equal = llvm::cast<FloatAttr>(x[0]).getValue().compare(
                  llvm::cast<FloatAttr>(x[1]).getValue()) ==
              APFloat::cmpEqual;
    return IntegerAttr::get(i1, equal ? 1 : 0);
  });
}

/// Less, LessOrEqual, Greater, GreaterOrEqual of constants (a Loop body's
/// `i < n` condition), `holds` mapping the comparison's sign to the result.
static OpFoldResult foldCompare(MLIRContext *ctx, Attribute lhs, Attribute rhs,
                                function_ref<bool(int)> holds) {
  auto a = smallDense(lhs), b = smallDense(rhs);
  if (!a || !b || a.getElementType() != b.getElementType())
    return {};
  auto i1 = IntegerType::get(ctx, 1);
  bool isUnsigned = a.getElementType().isUnsignedInteger();
  bool unordered = false;
  OpFoldResult folded = foldElementwise({a, b}, i1, [&](ArrayRef<Attribute> x) -> Attribute {
    int sign;
    if (auto ia = llvm::dyn_cast<IntegerAttr>(x[0])) {
      const APInt &u = ia.getValue(), &v = llvm::cast<IntegerAttr>(x[1]).getValue();
      sign = isUnsigned ? (u.ult(v) ? -1 : u.ugt(v) ? 1 : 0)
                        : (u.slt(v) ? -1 : u.sgt(v) ? 1 : 0);
    } else {
      APFloat::cmpResult c = llvm::cast<FloatAttr>(x[0]).getValue().compare(
          llvm::cast<FloatAttr>(x[1]).getValue());
      if (c == APFloat::cmpUnordered)
        unordered = true; // NaN: every comparison false
      sign = c == APFloat::cmpLessThan ? -1 : c == APFloat::cmpGreaterThan ? 1 : 0;
    }
    return IntegerAttr::get(i1, !unordered && holds(sign) ? 1 : 0);
  });
  return folded;
}

OpFoldResult LessOp::fold(FoldAdaptor adaptor) {
  return foldCompare(getContext(), adaptor.getA(), adaptor.getB(), [](int s) { return s < 0; });
}
OpFoldResult LessOrEqualOp::fold(FoldAdaptor adaptor) {
  return foldCompare(getContext(), adaptor.getA(), adaptor.getB(), [](int s) { return s <= 0; });
}
OpFoldResult GreaterOp::fold(FoldAdaptor adaptor) {
  return foldCompare(getContext(), adaptor.getA(), adaptor.getB(), [](int s) { return s > 0; });
}
OpFoldResult GreaterOrEqualOp::fold(FoldAdaptor adaptor) {
  return foldCompare(getContext(), adaptor.getA(), adaptor.getB(), [](int s) { return s >= 0; });
}

/// And, Or and Not of constant booleans (a Loop's condition).
static OpFoldResult foldLogical(MLIRContext *ctx, ArrayRef<Attribute> operands,
                                function_ref<bool(ArrayRef<bool>)> fn) {
  SmallVector<DenseElementsAttr> dense;
  for (Attribute a : operands) {
    auto d = smallDense(a);
    if (!d || !d.getElementType().isInteger(1))
      return {};
    dense.push_back(d);
  }
  auto i1 = IntegerType::get(ctx, 1);
  return foldElementwise(dense, i1, [&](ArrayRef<Attribute> x) -> Attribute {
    SmallVector<bool> bits;
    for (Attribute a : x)
      bits.push_back(!llvm::cast<IntegerAttr>(a).getValue().isZero());
    return IntegerAttr::get(i1, fn(bits) ? 1 : 0);
  });
}

OpFoldResult AndOp::fold(FoldAdaptor adaptor) {
  return foldLogical(getContext(), {adaptor.getA(), adaptor.getB()},
                     [](ArrayRef<bool> b) { return b[0] && b[1]; });
}
OpFoldResult OrOp::fold(FoldAdaptor adaptor) {
  return foldLogical(getContext(), {adaptor.getA(), adaptor.getB()},
                     [](ArrayRef<bool> b) { return b[0] || b[1]; });
}
OpFoldResult NotOp::fold(FoldAdaptor adaptor) {
  return foldLogical(getContext(), {adaptor.getX()}, [](ArrayRef<bool> b) { return !b[0]; });
}

OpFoldResult WhereOp::fold(FoldAdaptor adaptor) {
  auto condition = smallDense(adaptor.getCondition());
  if (!condition)
    return {};
  if (condition.isSplat()) {
    Value chosen = condition.getSplatValue<bool>() ? getX() : getY();
    if (chosen.getType() == getType())
      return chosen;
  }
  auto x = smallDense(adaptor.getX()), y = smallDense(adaptor.getY());
  if (!x || !y)
    return {};
  return foldElementwise(
      {condition, x, y}, x.getElementType(), [](ArrayRef<Attribute> v) {
        return llvm::cast<IntegerAttr>(v[0]).getValue().getBoolValue() ? v[1]
                                                                       : v[2];
      });
}

OpFoldResult IdentityOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

/// One element converted as ONNX Cast does (floats to integers truncate;
/// anything to bool is "nonzero"); null when it does not fit.
static Attribute castElement(Attribute x, Type to) {
  auto intTo = llvm::dyn_cast<IntegerType>(to);
  auto floatTo = llvm::dyn_cast<FloatType>(to);
  if (auto i = llvm::dyn_cast<IntegerAttr>(x)) {
    const APInt &v = i.getValue();
    auto from = llvm::cast<IntegerType>(i.getType());
    bool fromUnsigned = from.isUnsigned() || from.getWidth() == 1;
    if (intTo && intTo.getWidth() == 1)
      return IntegerAttr::get(intTo, APInt(1, v.isZero() ? 0 : 1));
    if (intTo)
      return IntegerAttr::get(intTo, fromUnsigned
                                         ? v.zextOrTrunc(intTo.getWidth())
                                         : v.sextOrTrunc(intTo.getWidth()));
    if (floatTo) {
      APFloat f(floatTo.getFloatSemantics());
      f.convertFromAPInt(v, !fromUnsigned, APFloat::rmNearestTiesToEven);
      return FloatAttr::get(floatTo, f);
    }
    return {};
  }
  auto f = llvm::dyn_cast<FloatAttr>(x);
  if (!f)
    return {};
  APFloat v = f.getValue();
  if (intTo && intTo.getWidth() == 1)
    return IntegerAttr::get(intTo, APInt(1, v.isZero() ? 0 : 1));
  if (intTo) {
    llvm::APSInt r(intTo.getWidth(), intTo.isUnsigned());
    bool exact;
    if (v.convertToInteger(r, APFloat::rmTowardZero, &exact) &
        APFloat::opInvalidOp)
      return {};
    return IntegerAttr::get(intTo, r);
  }
  if (floatTo) {
    bool losesInfo;
    v.convert(floatTo.getFloatSemantics(), APFloat::rmNearestTiesToEven,
              &losesInfo);
    return FloatAttr::get(floatTo, v);
  }
  return {};
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  Type to = onnxDataTypeToType(getContext(), getTo());
  if (to && getInput().getType() == getType() &&
      getElementType(getInput()) == to)
    return getInput();
  auto input = smallDense(adaptor.getInput());
  if (!input || !to || !llvm::isa<IntegerType, FloatType>(to))
    return {};
  return foldElementwise({input}, to, [&](ArrayRef<Attribute> x) {
    return castElement(x[0], to);
  });
}

LogicalResult DropoutOp::fold(FoldAdaptor adaptor,
                              SmallVectorImpl<OpFoldResult> &results) {
  // Outside training, Dropout is the identity; a mask would be all ones.
  if (getMask() || getOutput().getType() != getData().getType())
    return failure();
  if (!isNone(getTrainingMode())) {
    auto training = smallDense(adaptor.getTrainingMode());
    if (!training || !training.isSplat() || training.getSplatValue<bool>())
      return failure();
  }
  results.push_back(getData());
  return success();
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

OpFoldResult ShapeOp::fold(FoldAdaptor) {
  auto t = getRanked(getData());
  if (!t)
    return {};
  auto [start, end] = shapeRange(*this, t.getRank());
  ArrayRef<int64_t> dims = t.getShape().slice(start, end - start);
  if (llvm::any_of(dims, ShapedType::isDynamic))
    return {};
  auto type = RankedTensorType::get({end - start},
                                    IntegerType::get(getContext(), 64));
  return DenseIntElementsAttr::get(type, dims);
}

/// Folds a reshape-like op (Reshape, Squeeze, Unsqueeze): a constant is
/// reshaped; a value whose type already is the result type passes through.
static OpFoldResult foldReshapeLike(Operation *op, Value data,
                                    Attribute dataAttr) {
  Type resultType = op->getResult(0).getType();
  auto resultRanked = llvm::dyn_cast<RankedTensorType>(resultType);
  if (data.getType() == resultType && resultRanked &&
      resultRanked.hasStaticShape())
    return data;
  auto dense = llvm::dyn_cast_if_present<DenseElementsAttr>(dataAttr);
  auto type = inferredStaticType(op);
  if (!dense || !type)
    return {};
  return dense.reshape(type);
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(*this, getData(), adaptor.getData());
}
OpFoldResult UnsqueezeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(*this, getData(), adaptor.getData());
}
OpFoldResult SqueezeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(*this, getData(), adaptor.getData());
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  auto type = inferredStaticType(*this);
  auto dense = smallDense(adaptor.getData());
  if (!type || !dense)
    return {};
  ArrayRef<int64_t> in = dense.getType().getShape();
  int64_t rank = static_cast<int64_t>(in.size());
  SmallVector<int64_t> perm;
  if (auto p = getPerm())
    perm.assign(p->begin(), p->end());
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  SmallVector<int64_t> inStrides = stridesOf(in);
  auto values = llvm::to_vector(dense.getValues<Attribute>());
  SmallVector<Attribute> out;
  out.reserve(values.size());
  SmallVector<int64_t> idx(rank, 0);
  ArrayRef<int64_t> shape = type.getShape();
  for (int64_t n = 0; n < type.getNumElements(); ++n) {
    // idx is the output coordinate; output axis i is input axis perm[i].
    int64_t src = 0;
    for (int64_t i = 0; i < rank; ++i)
      src += idx[i] * inStrides[perm[i]];
    out.push_back(values[src]);
    for (int64_t i = rank - 1; i >= 0; --i) {
      if (++idx[i] < shape[i])
        break;
      idx[i] = 0;
    }
  }
  return DenseElementsAttr::get(type, out);
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1 && getInputs()[0].getType() == getType())
    return getInputs()[0];
  auto type = inferredStaticType(*this);
  if (!type || type.getNumElements() > kMaxFoldElements)
    return {};
  SmallVector<SmallVector<Attribute>> values;
  SmallVector<int64_t> chunks;
  int64_t axis = static_cast<int64_t>(getAxis());
  if (axis < 0)
    axis += type.getRank();
  int64_t inner = 1;
  for (int64_t d : type.getShape().drop_front(axis + 1))
    inner *= d;
  for (Attribute attr : adaptor.getInputs()) {
    auto dense = smallDense(attr);
    if (!dense)
      return {};
    values.push_back(llvm::to_vector(dense.getValues<Attribute>()));
    chunks.push_back(dense.getType().getDimSize(axis) * inner);
  }
  int64_t outer = 1;
  for (int64_t d : type.getShape().take_front(axis))
    outer *= d;
  SmallVector<Attribute> out;
  for (int64_t o = 0; o < outer; ++o)
    for (auto [vals, chunk] : llvm::zip(values, chunks))
      out.append(vals.begin() + o * chunk, vals.begin() + (o + 1) * chunk);
  return DenseElementsAttr::get(type, out);
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  auto type = inferredStaticType(*this);
  auto dataType = getRanked(getData());
  if (!type || !dataType || !dataType.hasStaticShape() ||
      type.getNumElements() > kMaxFoldElements)
    return {};
  bool axesKnown = false;
  FailureOr<SmallVector<std::optional<SliceRange>>> ranges;
  {
    ScopedDiagnosticHandler silence(getContext(),
                                    [](Diagnostic &) { return success(); });
    ranges = resolveSlice(*this, dataType.getShape(), axesKnown);
  }
  if (failed(ranges) || !axesKnown ||
      llvm::any_of(*ranges, [](auto &r) { return !r.has_value(); }))
    return {};
  SmallVector<int64_t> inStrides = stridesOf(dataType.getShape());
  int64_t rank = dataType.getRank();
  SmallVector<int64_t> index(rank, 0), sources;
  for (int64_t n = 0; n < type.getNumElements(); ++n) {
    int64_t source = 0;
    for (int64_t d = 0; d < rank; ++d)
      source += ((*ranges)[d]->start + index[d] * (*ranges)[d]->step) *
                inStrides[d];
    sources.push_back(source);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++index[d] < type.getDimSize(d))
        break;
      index[d] = 0;
    }
  }
  return pickElements(getData(), adaptor.getData(), sources, type);
}

/// The elements before `axis` of a static shape, its extent, and the
/// elements after it.
static std::tuple<int64_t, int64_t, int64_t> axisExtents(ArrayRef<int64_t> shape,
                                                         int64_t axis) {
  int64_t outer = 1, inner = 1;
  for (int64_t d : shape.take_front(axis))
    outer *= d;
  for (int64_t d : shape.drop_front(axis + 1))
    inner *= d;
  return {outer, shape[axis], inner};
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  auto type = inferredStaticType(*this);
  auto dataType = getRanked(getData());
  auto indices = getConstantInts(getIndices());
  if (!type || !dataType || !dataType.hasStaticShape() || !indices ||
      type.getNumElements() > kMaxFoldElements)
    return {};
  int64_t axis = static_cast<int64_t>(getAxis());
  if (axis < 0)
    axis += dataType.getRank();
  auto [outer, dim, inner] = axisExtents(dataType.getShape(), axis);
  SmallVector<int64_t> sources;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i : *indices) {
      if (i < -dim || i >= dim)
        return {};
      if (i < 0)
        i += dim;
      for (int64_t k = 0; k < inner; ++k)
        sources.push_back((o * dim + i) * inner + k);
    }
  return pickElements(getData(), adaptor.getData(), sources, type);
}

/// A constant split into constants (repeat_interleave's exported shape
/// arithmetic splits its repeat counts, one per part).
LogicalResult SplitOp::fold(FoldAdaptor adaptor, SmallVectorImpl<OpFoldResult> &results) {
  auto input = smallDense(adaptor.getInput());
  auto inType = getRanked(getInput());
  if (!input || !inType || !inType.hasStaticShape() || inType.getRank() == 0)
    return failure();
  int64_t rank = inType.getRank();
  int64_t axis = static_cast<int64_t>(getAxis());
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    return failure();
  auto [outer, dim, inner] = axisExtents(inType.getShape(), axis);
  SmallVector<OpFoldResult> parts;
  int64_t offset = 0;
  for (unsigned r = 0; r < getNumResults(); ++r) {
    auto type = inferredStaticType(*this, r);
    if (!type || type.getRank() != rank)
      return failure();
    int64_t size = type.getDimSize(axis);
    if (offset + size > dim)
      return failure();
    SmallVector<int64_t> sources;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = offset; j < offset + size; ++j)
        for (int64_t k = 0; k < inner; ++k)
          sources.push_back((o * dim + j) * inner + k);
    Attribute part = pickElements(getInput(), input, sources, type);
    if (!part)
      return failure();
    parts.push_back(part);
    offset += size;
  }
  results.append(parts.begin(), parts.end());
  return success();
}

OpFoldResult ExpandOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType() &&
      llvm::cast<RankedTensorType>(getType()).hasStaticShape() &&
      getConstantInts(getShape()))
    return getInput();
  auto type = inferredStaticType(*this);
  auto input = smallDense(adaptor.getInput());
  if (!type || !input)
    return {};
  if (input.isSplat())
    return DenseElementsAttr::get(type, input.getSplatValue<Attribute>());
  return pickElements(getInput(), input,
                      broadcastSources(input.getType().getShape(),
                                       type.getShape()),
                      type);
}

/// For the k-tuples of a constant indices tensor, the linear offsets (in
/// elements of data, of static `shape`) of the slices they name after
/// `batch` leading batch axes, slice by slice; nullopt when out of range.
static std::optional<SmallVector<int64_t>>
tupleOffsets(ArrayRef<int64_t> indices, int64_t k, ArrayRef<int64_t> shape,
             int64_t batch, int64_t tuplesPerBatch) {
  SmallVector<int64_t> strides = stridesOf(shape);
  SmallVector<int64_t> offsets;
  int64_t tuples = static_cast<int64_t>(indices.size()) / k;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset = 0, b = tuplesPerBatch ? t / tuplesPerBatch : 0;
    // The batch position's offset: b as a multi-index over shape[:batch].
    for (int64_t d = batch - 1; d >= 0; --d) {
      offset += (b % shape[d]) * strides[d];
      b /= shape[d];
    }
    for (int64_t j = 0; j < k; ++j) {
      int64_t dim = shape[batch + j], i = indices[t * k + j];
      if (i < -dim || i >= dim)
        return std::nullopt;
      offset += (i < 0 ? i + dim : i) * strides[batch + j];
    }
    offsets.push_back(offset);
  }
  return offsets;
}

OpFoldResult GatherNDOp::fold(FoldAdaptor adaptor) {
  auto type = inferredStaticType(*this);
  auto dataType = getRanked(getData());
  auto indexType = getRanked(getIndices());
  auto indices = getConstantInts(getIndices());
  if (!type || !dataType || !dataType.hasStaticShape() || !indexType ||
      !indices || type.getNumElements() > kMaxFoldElements)
    return {};
  int64_t b = static_cast<int64_t>(getBatchDims());
  int64_t k = indexType.getDimSize(indexType.getRank() - 1);
  int64_t batches = 1;
  for (int64_t d : dataType.getShape().take_front(b))
    batches *= d;
  if (k < 1 || batches < 1 || b + k > dataType.getRank())
    return {};
  int64_t slice = 1;
  for (int64_t d : dataType.getShape().drop_front(b + k))
    slice *= d;
  auto offsets = tupleOffsets(*indices, k, dataType.getShape(), b,
                              indices->size() / k / batches);
  if (!offsets)
    return {};
  SmallVector<int64_t> sources;
  for (int64_t offset : *offsets)
    for (int64_t j = 0; j < slice; ++j)
      sources.push_back(offset + j);
  return pickElements(getData(), adaptor.getData(), sources, type);
}

/// Only reduction none: Swin Transformer's shifted-window mask is a
/// ScatterND of constants into ConstantOfShape zeros.
OpFoldResult ScatterNDOp::fold(FoldAdaptor adaptor) {
  auto data = smallDense(adaptor.getData());
  auto updates = smallDense(adaptor.getUpdates());
  auto indexType = getRanked(getIndices());
  auto indices = getConstantInts(getIndices());
  if (getReduction() != "none" || !data || !updates || !indexType ||
      !indices || indexType.getRank() == 0)
    return {};
  auto type = llvm::cast<RankedTensorType>(data.getType());
  int64_t k = indexType.getDimSize(indexType.getRank() - 1);
  if (k < 1 || k > type.getRank())
    return {};
  int64_t slice = 1;
  for (int64_t d : type.getShape().drop_front(k))
    slice *= d;
  auto offsets = tupleOffsets(*indices, k, type.getShape(), 0, 0);
  if (!offsets || static_cast<int64_t>(offsets->size()) * slice !=
                      updates.getNumElements())
    return {};
  SmallVector<Attribute> out = llvm::to_vector(data.getValues<Attribute>());
  auto values = llvm::to_vector(updates.getValues<Attribute>());
  for (auto [t, offset] : llvm::enumerate(*offsets))
    for (int64_t j = 0; j < slice; ++j)
      out[offset + j] = values[t * slice + j];
  return DenseElementsAttr::get(type, out);
}
