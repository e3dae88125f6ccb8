//===- OnnxOps.cpp - shape functions and verifiers ------------------------===//
//
// Each op's `inferResultTypes` is its shape function. It is the truth for
// result types whatever opset the model came from, and it is what lets later
// passes (micro-batching) change a batch size and re-infer the graph. Since
// the interface's verifier runs it before an op's own `verify`, a shape
// function checks the attributes it reads itself; `verify` checks the rest.
// Folders live in OnnxFolders.cpp; the shape functions are split by kind:
// this file has the value ops (Constant, ConstantOfShape, Range) and
// ai.onnx.preview.training, OnnxOpsElementwise.cpp the elementwise and
// linear algebra ops, OnnxOpsNN.cpp the neural network ops, reductions
// and losses, OnnxOpsShape.cpp the shape ops. Helpers they share are in
// OnnxOpsHelpers.h. The generated op definitions are included here.
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

using namespace mlir;
using namespace mlir::pipec::onnx;

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
    if (failed(checkResultRank(*this, t.getDimSize(0))))
      return failure();
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
      // Exact integer arithmetic (doubles lose precision past 2^53), in 128
      // bits: limit - start and the rounding up overflow 64.
      __int128 s = getConstantInts(getStart())->front();
      __int128 l = getConstantInts(getLimit())->front();
      __int128 d = getConstantInts(getDelta())->front();
      __int128 span = l - s;
      __int128 count = d > 0 ? (span > 0 ? (span + d - 1) / d : 0)
                             : (span < 0 ? (-span + (-d) - 1) / (-d) : 0);
      if (count > (__int128(1) << 40))
        return emitOpError() << "has " << static_cast<int64_t>(count >> 40)
                             << " Ti elements or more: too many for a tensor";
      n = static_cast<int64_t>(count);
    } else {
      double length = std::ceil((*limit - *start) / *delta);
      if (!std::isfinite(*start) || !std::isfinite(*limit) || !std::isfinite(*delta) ||
          !(length < double(int64_t(1) << 40)))
        return emitOpError() << "start, limit and delta must be finite and give at most "
                                "2^40 elements, got ("
                             << *start << ", " << *limit << ", " << *delta << ")";
      n = rangeLength(*start, *limit, *delta);
    }
  }
  types.push_back(ranked({n}, elt));
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
