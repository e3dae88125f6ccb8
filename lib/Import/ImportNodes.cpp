//===- ImportNodes.cpp - ONNX nodes → onnx dialect ops --------------------===//
//
// Attribute conversion, generic op creation with shape inference and
// folding, the rewriting of older opset forms into the one the dialect
// models, and the import of one node.
//
//===----------------------------------------------------------------------===//
#include "Importer.h"

#include "dialects/onnx/ShapeHelpers.h"

#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace mlir::pipec::onnx_import {

/// Number of formal inputs (incl. trailing optional ones) of the form the
/// dialect models; absent trailing inputs are padded with `none`. Ops with
/// variadic inputs are not listed.
const llvm::StringMap<unsigned> &formalInputCounts() {
  static const llvm::StringMap<unsigned> counts = {
      {"Gemm", 3},        {"Conv", 3},
      {"Slice", 5},       {"Split", 2},
      {"Squeeze", 2},     {"Unsqueeze", 2},
      {"ReduceMean", 2},  {"ReduceSum", 2},
      {"Dropout", 3},     {"SoftmaxCrossEntropyLoss", 3},
      {"NegativeLogLikelihoodLoss", 3},
      {"LayerNormalization", 3},
      {"ConstantOfShape", 1},
      {"Clip", 3},
      {"ReduceMax", 2},   {"ReduceMin", 2},
      {"Pad", 4},         {"Trilu", 2},
      {"LSTM", 8},        {"GRU", 6},
      {"ConvTranspose", 3}, {"Resize", 4},
  };
  return counts;
}

std::string nodeLabel(const pb::NodeProto &node, int index) {
  if (!node.name().empty())
    return node.name();
  if (node.output_size() > 0 && !node.output(0).empty())
    return node.op_type() + " → " + node.output(0);
  return node.op_type() + "#" + std::to_string(index);
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

FailureOr<Attribute> Importer::convertAttribute(const pb::AttributeProto &a,
                                                Location loc) {
  if (!a.ref_attr_name().empty())
    return error(loc) << "attribute '" << a.name()
                      << "' refers to a function attribute, which is not "
                         "supported";
  // An empty list carries no element type on the wire (helpers write it as
  // INTS); the names ONNX uses for string lists get a string list.
  bool emptyList = a.ints_size() == 0 && a.floats_size() == 0 &&
                   a.strings_size() == 0;
  if (emptyList && (a.type() == pb::AttributeProto::INTS ||
                    a.type() == pb::AttributeProto::FLOATS ||
                    a.type() == pb::AttributeProto::STRINGS) &&
      (a.name() == "xs" || a.name() == "zs"))
    return Attribute(builder.getStrArrayAttr({}));
  switch (a.type()) {
  case pb::AttributeProto::INT:
    return Attribute(builder.getI64IntegerAttr(a.i()));
  case pb::AttributeProto::FLOAT:
    return Attribute(builder.getF32FloatAttr(a.f()));
  case pb::AttributeProto::STRING:
    return Attribute(builder.getStringAttr(a.s()));
  case pb::AttributeProto::INTS:
    return Attribute(builder.getDenseI64ArrayAttr(
        SmallVector<int64_t>(a.ints().begin(), a.ints().end())));
  case pb::AttributeProto::FLOATS:
    return Attribute(builder.getDenseF32ArrayAttr(
        SmallVector<float>(a.floats().begin(), a.floats().end())));
  case pb::AttributeProto::STRINGS: {
    SmallVector<StringRef> strs(a.strings().begin(), a.strings().end());
    return Attribute(builder.getStrArrayAttr(strs));
  }
  case pb::AttributeProto::TENSOR: {
    auto attr = tensorAttr(a.t(), loc, /*allowResource=*/false);
    if (failed(attr))
      return failure();
    return Attribute(*attr);
  }
  default:
    break;
  }
  return error(loc) << "attribute '" << a.name() << "' has type "
                    << pb::AttributeProto::AttributeType_Name(a.type())
                    << ", which is not supported (subgraphs, sparse tensors "
                       "and type protos are not)";
}

Operation *Importer::createOp(StringRef opType, ArrayRef<Value> operands,
                              ArrayRef<NamedAttribute> attrs,
                              unsigned numResults, Location loc) {
  return ox::createByName(builder, loc, ("onnx." + opType).str(), operands,
                          attrs, numResults);
}

/// Types the op's results with its shape function, verifies it, and folds
/// it when its operands are constants; returns the values that stand for its
/// results.
FailureOr<SmallVector<Value>> Importer::typeAndFold(Operation *op) {
  if (auto si = dyn_cast<ox::ShapeInferenceOpInterface>(op))
    if (failed(si.inferShapes()))
      return failure();
  if (failed(mlir::verify(op)))
    return failure();
  SmallVector<Value> results(op->getResults());
  if (op->hasTrait<OpTrait::ConstantLike>() || op->getNumResults() == 0)
    return results;
  SmallVector<OpFoldResult> folded;
  if (failed(op->fold(folded)) || folded.empty())
    return results;
  SmallVector<Value> replacements;
  for (auto [result, fr] : llvm::zip(op->getResults(), folded)) {
    if (auto v = llvm::dyn_cast_if_present<Value>(fr)) {
      replacements.push_back(v);
      continue;
    }
    Operation *cst = op->getDialect()->materializeConstant(
        builder, llvm::cast<Attribute>(fr), result.getType(), op->getLoc());
    if (!cst)
      return results; // cannot materialize: keep the op
    replacements.push_back(cst->getResult(0));
  }
  bool inPlace = llvm::any_of(replacements, [&](Value v) {
    return v.getDefiningOp() == op;
  });
  if (inPlace)
    return results;
  op->replaceAllUsesWith(replacements);
  op->erase();
  return replacements;
}

FailureOr<Value> Importer::coercedSoftmax(StringRef opType, Value input,
                                          int64_t axis, Location loc) {
  // Before opset 13, Softmax/LogSoftmax flatten the input to 2-D at `axis`
  // and normalise over the second dimension.
  auto t = ox::getRanked(input);
  if (!t || !t.hasStaticShape())
    return error(loc) << opType << " of opset " << opset
                      << " needs a static input shape";
  int64_t rank = t.getRank();
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    return error(loc) << opType << " axis is out of range for rank " << rank;
  NamedAttribute lastAxis = builder.getNamedAttr(
      "axis", builder.getI64IntegerAttr(-1));
  if (axis == rank - 1) {
    auto r = typeAndFold(createOp(opType, {input}, {lastAxis}, 1, loc));
    if (failed(r))
      return failure();
    return (*r)[0];
  }
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i)
    (i < axis ? outer : inner) *= t.getDimSize(i);
  auto flat = typeAndFold(createOp(
      "Reshape", {input, constantI64({outer, inner}, loc)}, {}, 1, loc));
  if (failed(flat))
    return failure();
  auto soft = typeAndFold(createOp(opType, {(*flat)[0]}, {lastAxis}, 1, loc));
  if (failed(soft))
    return failure();
  auto back = typeAndFold(createOp(
      "Reshape", {(*soft)[0], constantI64(t.getShape(), loc)}, {}, 1, loc));
  if (failed(back))
    return failure();
  return (*back)[0];
}

LogicalResult Importer::normalizeOldForms(StringRef opType,
                                          const pb::NodeProto &node,
                                          SmallVectorImpl<Value> &operands,
                                          NamedAttrList &attrs, Location loc) {
  auto moveIntsToInput = [&](StringRef attrName, unsigned inputIndex) {
    Attribute a = attrs.erase(attrName);
    if (!a)
      return;
    auto ints = llvm::cast<DenseI64ArrayAttr>(a).asArrayRef();
    while (operands.size() < inputIndex)
      operands.push_back(noneValue());
    Value c = constantI64(ints, loc);
    if (operands.size() == inputIndex)
      operands.push_back(c);
    else
      operands[inputIndex] = c;
  };
  if (opType == "Squeeze" || opType == "Unsqueeze" || opType == "ReduceSum") {
    if (opset < 13)
      moveIntsToInput("axes", 1);
  } else if (opType == "ReduceMean" || opType == "ReduceMax" ||
             opType == "ReduceMin") {
    if (opset < 18)
      moveIntsToInput("axes", 1);
  } else if (opType == "Pad") {
    if (opset < 11) {
      // Opset 2's `pads` and float `value` attributes become inputs.
      Attribute value = attrs.erase("value");
      moveIntsToInput("pads", 1);
      if (value) {
        auto type = RankedTensorType::get({}, Float32Type::get(ctx));
        float v = llvm::cast<FloatAttr>(value).getValueAsDouble();
        operands.push_back(ox::ConstantOp::create(
            builder, loc, type, DenseElementsAttr::get(type, v)));
      }
    }
  } else if (opType == "Resize") {
    if (opset < 11)
      return error(loc) << "Resize of opset " << opset
                        << " is not supported (opset 11 and later are); "
                           "convert the model with onnx.version_converter";
  } else if (opType == "Clip") {
    if (opset < 11) {
      // Opset 6's float attributes become the (scalar) inputs of opset 11.
      Attribute lo = attrs.erase("min"), hi = attrs.erase("max");
      auto type = RankedTensorType::get({}, Float32Type::get(ctx));
      auto scalar = [&](Attribute a) -> Value {
        if (!a)
          return noneValue();
        float v = llvm::cast<FloatAttr>(a).getValueAsDouble();
        return ox::ConstantOp::create(builder, loc, type,
                                      DenseElementsAttr::get(type, v));
      };
      operands.resize(1);
      operands.push_back(scalar(lo));
      operands.push_back(scalar(hi));
    }
  } else if (opType == "Split") {
    if (opset < 13)
      moveIntsToInput("split", 1);
  } else if (opType == "Slice") {
    if (opset < 10) {
      Attribute axes = attrs.get("axes");
      moveIntsToInput("starts", 1);
      moveIntsToInput("ends", 2);
      if (axes)
        moveIntsToInput("axes", 3);
    }
  } else if (opType == "Dropout") {
    if (opset < 12) {
      Attribute ratio = attrs.erase("ratio");
      attrs.erase("is_test");
      if (ratio) {
        auto type = RankedTensorType::get({}, Float32Type::get(ctx));
        float r = llvm::cast<FloatAttr>(ratio).getValueAsDouble();
        operands.push_back(ox::ConstantOp::create(
            builder, loc, type, DenseElementsAttr::get(type, r)));
      }
    }
  } else if (opset < 7 && (opType == "Add" || opType == "Sub" ||
                            opType == "Mul" || opType == "Div" ||
                            opType == "Pow" || opType == "Gemm")) {
    // Before opset 7, broadcasting was opt-in (`broadcast`) and `axis` said
    // where B aligns in A; numpy broadcasting aligns trailing dimensions, so
    // B gets trailing 1s to align at `axis`.
    attrs.erase("broadcast");
    Attribute axisAttr = attrs.erase("axis");
    if (axisAttr && opType != "Gemm" && operands.size() == 2) {
      auto ta = ox::getRanked(operands[0]), tb = ox::getRanked(operands[1]);
      if (!ta || !tb)
        return error(loc) << opType << " with a legacy broadcast axis needs "
                                       "ranked inputs";
      int64_t axis = llvm::cast<IntegerAttr>(axisAttr).getInt();
      if (axis < 0)
        axis += ta.getRank();
      int64_t trailing = ta.getRank() - axis - tb.getRank();
      if (axis < 0 || trailing < 0)
        return error(loc) << opType << " legacy broadcast axis " << axis
                          << " does not fit shapes " << ta << " and " << tb;
      if (trailing > 0) {
        SmallVector<int64_t> shape(tb.getShape());
        shape.append(trailing, 1);
        auto r = typeAndFold(createOp(
            "Reshape", {operands[1], constantI64(shape, loc)}, {}, 1, loc));
        if (failed(r))
          return failure();
        operands[1] = (*r)[0];
      }
    }
  } else if (opType == "BatchNormalization") {
    if (opset < 9) {
      if (auto spatial = attrs.erase("spatial"))
        if (llvm::cast<IntegerAttr>(spatial).getInt() != 1)
          return error(loc) << "BatchNormalization with spatial=0 is not "
                               "supported";
    }
    if (opset < 7)
      attrs.erase("is_test");
    if (opset < 14 && node.output_size() > 1) {
      if (node.output_size() > 3) {
        for (int i = 3; i < node.output_size(); ++i)
          if (!node.output(i).empty())
            return error(loc) << "BatchNormalization's saved_mean/saved_var "
                                 "outputs (opset < 14) are not supported";
      }
      attrs.set("training_mode", builder.getI64IntegerAttr(1));
    }
  }
  return success();
}

/// True for a float constant whose every element is +0.0, also seen through
/// the shape ops torch.onnx.export puts between zeros and an LSTM/GRU
/// initial state (Slice, Squeeze, Unsqueeze, Reshape, Expand).
static bool isZeroFloatConstant(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<ox::SliceOp, ox::SqueezeOp, ox::UnsqueezeOp, ox::ReshapeOp,
             ox::ExpandOp>(def))
      break;
    v = def->getOperand(0);
  }
  ElementsAttr attr = ox::getConstantAttr(v);
  if (!attr || !isa<FloatType>(attr.getElementType()))
    return false;
  if (auto dense = dyn_cast<DenseElementsAttr>(attr)) {
    ArrayRef<char> raw = dense.getRawData();
    return llvm::all_of(raw, [](char c) { return c == 0; });
  }
  if (auto res = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = res.getRawHandle().getBlob();
    return blob && llvm::all_of(blob->getData(), [](char c) { return c == 0; });
  }
  return false;
}

LogicalResult Importer::importNode(const pb::NodeProto &node, int index) {
  std::string label = labelScope + nodeLabel(node, index);
  Location loc = NameLoc::get(builder.getStringAttr(label), fileLoc);
  const std::string &domain = node.domain();
  StringRef opType = node.op_type();
  bool training = domain == kTrainingDomain;
  if (!domain.empty() && domain != "ai.onnx" && !training)
    return error(loc) << "operator '" << opType << "' of domain '" << domain
                      << "' is not supported (only ai.onnx and "
                      << kTrainingDomain << " are)";
  if (training && trainingOpset == 0)
    return error(loc) << "node uses domain " << kTrainingDomain
                      << " but the model does not import it";

  if (!training && opset == 0)
    return error(loc) << "node uses the ai.onnx domain but the model does not "
                         "import it";
  static const llvm::StringSet<> stableSinceOne = {
      "GlobalAveragePool", "MaxPool", "AveragePool", "Conv", "Flatten",
      "Transpose", "Softmax", "LogSoftmax", "Gemm", "Constant", "Relu",
      "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Neg", "Identity", "Not",
      "Softplus", "Softsign", "GlobalMaxPool", "LpNormalization"};
  if (!training && opset < kMinOpsetAllOps && !stableSinceOne.count(opType))
    return error(loc) << "operator '" << opType << "' at opset " << opset
                      << " is not supported (ai.onnx opsets below "
                      << kMinOpsetAllOps << " are supported only for "
                      << "operators unchanged since); convert the model with "
                         "onnx.version_converter";
  if (!training &&
      (opType == "InstanceNormalization" || opType == "GroupNormalization"))
    return importGroupNorm(node, opType, loc);
  if (!training && opType == "Einsum")
    return importEinsum(node, loc);
  if (!training && isControlFlowOp(opType))
    return importControlFlow(node, opType, loc);
  if (!training && (opType == "PRelu" || opType == "ReduceL1" || opType == "ReduceL2" ||
                    opType == "ReduceSumSquare" || opType == "ReduceLogSum" ||
                    opType == "ReduceLogSumExp" || opType == "DepthToSpace" ||
                    opType == "SpaceToDepth"))
    return importComposite(node, opType, loc);
  if (!training && (opType == "Softsign" || opType == "Celu" ||
                    opType == "ThresholdedRelu" || opType == "Shrink" ||
                    opType == "Mish" || opType == "Sum" || opType == "Mean" ||
                    opType == "GlobalMaxPool" || opType == "LpNormalization"))
    return importActivationLike(node, opType, loc);
  if (!training && opType == "OneHot")
    return importOneHot(node, loc);
  std::string opName = ("onnx." + opType).str();
  std::optional<RegisteredOperationName> registered =
      RegisteredOperationName::lookup(opName, ctx);
  if (opType == "NoValue" || !registered) {
    auto diag = error(loc) << "operator '" << opType << "' (domain '"
                           << (domain.empty() ? "ai.onnx" : domain)
                           << "', opset " << (training ? trainingOpset : opset)
                           << ") is not supported (the operators pipec imports: "
                              "docs/onnx-operators.md, or pipe-translate "
                              "--list-onnx-operators)";
    (void)diag;
    return failure();
  }

  // Constant: every value_* form becomes `value`.
  if (opType == "Constant") {
    if (node.attribute_size() != 1 || node.output_size() != 1)
      return error(loc) << "Constant must have exactly one value attribute "
                           "and one output";
    const auto &a = node.attribute(0);
    ElementsAttr value;
    auto f32 = Float32Type::get(ctx);
    auto i64 = IntegerType::get(ctx, 64);
    if (a.name() == "value") {
      auto t = tensorAttr(a.t(), loc, /*allowResource=*/true, /*splatUniform=*/true);
      if (failed(t))
        return failure();
      value = *t;
    } else if (a.name() == "value_float") {
      value = DenseElementsAttr::get(RankedTensorType::get({}, f32), a.f());
    } else if (a.name() == "value_floats") {
      SmallVector<float> v(a.floats().begin(), a.floats().end());
      value = DenseElementsAttr::get(
          RankedTensorType::get({(int64_t)v.size()}, f32), ArrayRef(v));
    } else if (a.name() == "value_int") {
      value = DenseElementsAttr::get(RankedTensorType::get({}, i64),
                                     (int64_t)a.i());
    } else if (a.name() == "value_ints") {
      SmallVector<int64_t> v(a.ints().begin(), a.ints().end());
      value = DenseElementsAttr::get(
          RankedTensorType::get({(int64_t)v.size()}, i64), ArrayRef(v));
    } else {
      return error(loc) << "Constant attribute '" << a.name()
                        << "' is not supported (strings and sparse tensors "
                           "are not)";
    }
    auto op = ox::ConstantOp::create(
        builder, loc, llvm::cast<ShapedType>(value.getType()), value);
    values[node.output(0)] = op;
    return success();
  }

  FailureOr<SmallVector<Value>> inputs = nodeInputs(node, loc, true);
  if (failed(inputs))
    return failure();
  SmallVector<Value> operands = std::move(*inputs);
  NamedAttrList attrs;
  llvm::StringSet<> known;
  for (StringAttr n : registered->getAttributeNames())
    known.insert(n.getValue());
  for (const auto &a : node.attribute()) {
    auto attr = convertAttribute(a, loc);
    if (failed(attr))
      return failure();
    attrs.set(a.name(), *attr);
  }
  if (failed(normalizeOldForms(opType, node, operands, attrs, loc)))
    return failure();
  for (const NamedAttribute &a : attrs)
    if (!known.count(a.getName().getValue()))
      return error(loc) << "attribute '" << a.getName().getValue() << "' of "
                        << opType << " is not supported";

  if ((opType == "Softmax" || opType == "LogSoftmax") && opset < 13) {
    int64_t axis = 1;
    if (auto a = attrs.get("axis"))
      axis = llvm::cast<IntegerAttr>(a).getInt();
    if (operands.size() != 1)
      return error(loc) << opType << " takes one input";
    auto r = coercedSoftmax(opType, operands[0], axis, loc);
    if (failed(r))
      return failure();
    values[node.output(0)] = *r;
    return success();
  }

  // Variadic Max and Min: a chain of the dialect's binary forms.
  if (opType == "Max" || opType == "Min") {
    if (operands.empty())
      return error(loc) << opType << " needs at least one input";
    if (node.output_size() != 1)
      return error(loc) << opType << " has one output";
    Value acc = operands[0];
    for (size_t i = 1; i < operands.size(); ++i) {
      auto r = typeAndFold(createOp(opType, {acc, operands[i]}, attrs, 1, loc));
      if (failed(r))
        return failure();
      acc = (*r)[0];
    }
    values[node.output(0)] = acc;
    return success();
  }

  auto formal = formalInputCounts().find(opType);
  if (formal != formalInputCounts().end()) {
    if (operands.size() > formal->second)
      return error(loc) << opType << " takes at most " << formal->second
                        << " inputs, the node has " << operands.size();
    while (operands.size() < formal->second)
      operands.push_back(noneValue());
  }

  // Absent trailing optional outputs are left off.
  unsigned numResults = node.output_size();
  while (numResults > 0 && node.output(numResults - 1).empty())
    --numResults;
  if (opType == "BatchNormalization" && numResults > 3)
    numResults = 3;

  // LSTM / GRU: an all-zero constant initial state is the absent one (ONNX
  // defines both as zeros). torch.onnx.export writes zeros of the batch size
  // (expanded, or a slice of a zeros constant) when no state is passed; as
  // `none` it does not pin the batch size (micro-batching) and needs no
  // gradient.
  if (opType == "LSTM" || opType == "GRU")
    for (unsigned i : {5u, 6u})
      if (i < operands.size() && isZeroFloatConstant(operands[i]))
        operands[i] = noneValue();

  // onnx.Attention is pipe-fuse-attention's (opset 23's Attention core):
  // ONNX has the operator only from opset 23, beyond the importer's.
  if (opType == "Attention")
    return error(loc) << "Attention is an ONNX opset 23 operator, beyond the "
                         "supported opsets "
                      << kMinOpsetAllOps << "-" << kMaxOpset
                      << "; export with opset " << kMaxOpset
                      << " or lower (torch writes attention as MatMul and "
                         "Softmax, which pipe-compile fuses)";
  Operation *op = createOp(opType, operands, attrs, numResults, loc);
  auto results = typeAndFold(op);
  if (failed(results))
    return failure();
  for (unsigned i = 0; i < numResults; ++i) {
    const std::string &name = node.output(i);
    if (name.empty())
      continue;
    // A shape that depends on runtime data takes the model's declaration.
    Value v = (*results)[i];
    auto type = llvm::dyn_cast<TensorType>(v.getType());
    auto declared = declaredShapes.find(name);
    if (type && !type.hasStaticShape() && declared != declaredShapes.end() &&
        v.getDefiningOp() == op) {
      auto refined = RankedTensorType::get(declared->second,
                                           type.getElementType());
      if (type.hasRank() && failed(verifyCompatibleShape(
                                type.getShape(), refined.getShape())))
        return error(loc) << "output '" << name << "' is declared "
                          << refined << " but the operator gives " << type;
      v.setType(refined);
      if (failed(mlir::verify(op)))
        return failure();
    }
    if (values.count(name) && !values[name].getDefiningOp<ox::NoValueOp>())
      return error(loc) << "value '" << name << "' is defined twice";
    values[name] = (*results)[i];
  }
  return success();
}

} // namespace mlir::pipec::onnx_import

namespace mlir::pipec::onnx_import {

/// The inputs of a node the importer writes as other ops: one output, and
/// a ranked float first input.
FailureOr<SmallVector<Value>> Importer::compositeInputs(const pb::NodeProto &node,
                                                        StringRef opType, Location loc) {
  if (node.output_size() != 1)
    return error(loc) << opType << " has one output";
  FailureOr<SmallVector<Value>> inputs = nodeInputs(node, loc, false);
  if (failed(inputs))
    return failure();
  auto x = inputs->empty() ? RankedTensorType()
                           : llvm::dyn_cast<RankedTensorType>((*inputs)[0].getType());
  if (!x || !llvm::isa<FloatType>(x.getElementType()))
    return error(loc) << opType << " needs a ranked float input";
  return inputs;
}

LogicalResult Importer::importComposite(const pb::NodeProto &node, StringRef opType,
                                        Location loc) {
  FailureOr<SmallVector<Value>> inputs = compositeInputs(node, opType, loc);
  if (failed(inputs))
    return failure();
  SmallVector<Value> in = std::move(*inputs);
  auto x = llvm::cast<RankedTensorType>(in[0].getType());
  auto make = [&](StringRef type, ArrayRef<Value> operands,
                  ArrayRef<NamedAttribute> attrs = {}) {
    return createOne(type, operands, attrs, loc);
  };
  auto scalarType = RankedTensorType::get({}, x.getElementType());
  Value zero = ox::ConstantOp::create(
      builder, loc, scalarType,
      DenseElementsAttr::get(scalarType, builder.getFloatAttr(x.getElementType(), 0.0)));

  // DepthToSpace (nn.PixelShuffle, mode CRD; DCR, ONNX's default) and
  // SpaceToDepth (nn.PixelUnshuffle's layout): Reshape, Transpose, Reshape
  // of an (N, C, H, W) input, N copied (0) so that it may stay symbolic.
  if (opType == "DepthToSpace" || opType == "SpaceToDepth") {
    bool toSpace = opType == "DepthToSpace";
    int64_t b = 0;
    std::string mode = "DCR";
    for (const auto &a : node.attribute()) {
      if (a.name() == "blocksize")
        b = a.i();
      else if (a.name() == "mode" && toSpace)
        mode = a.s();
      else
        return error(loc) << "attribute '" << a.name() << "' of " << opType
                          << " is not supported";
    }
    if (mode != "DCR" && mode != "CRD")
      return error(loc) << "DepthToSpace mode '" << mode << "' must be DCR or CRD";
    if (x.getRank() != 4 || ShapedType::isDynamic(x.getDimSize(1)) ||
        ShapedType::isDynamic(x.getDimSize(2)) || ShapedType::isDynamic(x.getDimSize(3)))
      return error(loc) << opType << " needs an (N, C, H, W) input with static C, H and W, got "
                        << x << " (bind the model's shapes with --input-shape)";
    int64_t c = x.getDimSize(1), h = x.getDimSize(2), w = x.getDimSize(3);
    if (b < 1 || (toSpace ? c % (b * b) != 0 : (h % b != 0 || w % b != 0)))
      return error(loc) << opType << " blocksize " << b << " does not divide "
                        << (toSpace ? "the channels" : "the height and width") << " of " << x;
    SmallVector<int64_t> split, perm, merged;
    if (toSpace && mode == "DCR") {
      split = {0, b, b, c / (b * b), h, w};
      perm = {0, 3, 4, 1, 5, 2};
    } else if (toSpace) {
      split = {0, c / (b * b), b, b, h, w};
      perm = {0, 1, 4, 2, 5, 3};
    } else {
      split = {0, c, h / b, b, w / b, b};
      perm = {0, 3, 5, 1, 2, 4};
    }
    merged = toSpace ? SmallVector<int64_t>{0, c / (b * b), h * b, w * b}
                     : SmallVector<int64_t>{0, c * b * b, h / b, w / b};
    auto first = make("Reshape", {in[0], constantI64(split, loc)});
    if (failed(first))
      return failure();
    auto moved = make("Transpose", {*first},
                      {builder.getNamedAttr("perm", builder.getDenseI64ArrayAttr(perm))});
    if (failed(moved))
      return failure();
    auto y = make("Reshape", {*moved, constantI64(merged, loc)});
    if (failed(y))
      return failure();
    values[node.output(0)] = *y;
    return success();
  }

  // PRelu(X, slope) = X where X > 0, else slope * X (torch's gradient at 0:
  // the slope's).
  if (opType == "PRelu") {
    if (in.size() != 2 || node.attribute_size() != 0)
      return error(loc) << "PRelu takes X and slope, without attributes";
    // The slope broadcasts to X (unidirectionally; before opset 7 a slope
    // of C values is per channel, X's axis 1).
    auto slope = llvm::dyn_cast<RankedTensorType>(in[1].getType());
    if (opset < 7 && slope && slope.getRank() == 1 && x.getRank() >= 2 &&
        slope.getDimSize(0) == x.getDimSize(1) && slope.getDimSize(0) != 1) {
      SmallVector<int64_t> perChannel(x.getRank() - 1, 1);
      perChannel[0] = slope.getDimSize(0);
      auto reshaped = make("Reshape", {in[1], constantI64(perChannel, loc)});
      if (failed(reshaped))
        return failure();
      in[1] = *reshaped;
      slope = llvm::cast<RankedTensorType>(in[1].getType());
    }
    bool broadcasts = slope && slope.getRank() <= x.getRank();
    for (int64_t i = 1; broadcasts && i <= slope.getRank(); ++i) {
      int64_t s = slope.getDimSize(slope.getRank() - i), d = x.getDimSize(x.getRank() - i);
      broadcasts = s == 1 || s == d;
    }
    if (!broadcasts)
      return error(loc) << "PRelu's slope " << in[1].getType() << " does not broadcast to X "
                        << in[0].getType();
    auto positive = make("Greater", {in[0], zero});
    auto scaled = make("Mul", {in[1], in[0]});
    if (failed(positive) || failed(scaled))
      return failure();
    auto y = make("Where", {*positive, in[0], *scaled});
    if (failed(y))
      return failure();
    values[node.output(0)] = *y;
    return success();
  }

  // ReduceL1 = ReduceSum(|X|), ReduceSumSquare = ReduceSum(X·X), ReduceL2 =
  // Sqrt(ReduceSumSquare), ReduceLogSum = Log(ReduceSum(X)), ReduceLogSumExp
  // (below) over `axes` (an attribute before opset 18, an input since).
  Value axes = in.size() > 1 ? in[1] : noneValue();
  NamedAttrList attrs;
  for (const auto &a : node.attribute()) {
    if (a.name() == "keepdims") {
      attrs.set("keepdims", builder.getI64IntegerAttr(a.i()));
    } else if (a.name() == "axes") {
      SmallVector<int64_t> list(a.ints().begin(), a.ints().end());
      axes = constantI64(list, loc);
    } else if (a.name() == "noop_with_empty_axes" && a.i() == 0) {
      continue;
    } else {
      return error(loc) << "attribute '" << a.name() << "' of " << opType
                        << " is not supported";
    }
  }
  if (opType == "ReduceLogSumExp") {
    // m + Log(ReduceSum(Exp(X - m))), m = ReduceMax(X) kept: the sum's
    // terms are at most 1. The last ReduceSum, over axes of extent 1, only
    // drops them where keepdims = 0.
    NamedAttrList kept;
    kept.set("keepdims", builder.getI64IntegerAttr(1));
    auto m = make("ReduceMax", {in[0], axes}, kept.getAttrs());
    if (failed(m))
      return failure();
    auto shifted = make("Sub", {in[0], *m});
    if (failed(shifted))
      return failure();
    auto e = make("Exp", {*shifted});
    if (failed(e))
      return failure();
    auto s = make("ReduceSum", {*e, axes}, kept.getAttrs());
    if (failed(s))
      return failure();
    auto l = make("Log", {*s});
    if (failed(l))
      return failure();
    auto lse = make("Add", {*l, *m});
    if (failed(lse))
      return failure();
    auto y = make("ReduceSum", {*lse, axes}, attrs.getAttrs());
    if (failed(y))
      return failure();
    values[node.output(0)] = *y;
    return success();
  }
  if (opType == "ReduceLogSum") {
    auto s = make("ReduceSum", {in[0], axes}, attrs.getAttrs());
    if (failed(s))
      return failure();
    auto y = make("Log", {*s});
    if (failed(y))
      return failure();
    values[node.output(0)] = *y;
    return success();
  }
  auto terms = opType == "ReduceL1" ? make("Abs", {in[0]}) : make("Mul", {in[0], in[0]});
  if (failed(terms))
    return failure();
  auto sum = make("ReduceSum", {*terms, axes}, attrs.getAttrs());
  if (failed(sum))
    return failure();
  Value y = *sum;
  if (opType == "ReduceL2") {
    auto root = make("Sqrt", {y});
    if (failed(root))
      return failure();
    y = *root;
  }
  values[node.output(0)] = y;
  return success();
}

/// Activations and small operators that are a few ops of the dialect:
/// Softsign, Celu, ThresholdedRelu, Shrink, Mish, Sum, Mean, GlobalMaxPool
/// and LpNormalization. Their gradients are the ops'.
LogicalResult Importer::importActivationLike(const pb::NodeProto &node,
                                             StringRef opType, Location loc) {
  FailureOr<SmallVector<Value>> inputs = compositeInputs(node, opType, loc);
  if (failed(inputs))
    return failure();
  SmallVector<Value> in = std::move(*inputs);
  auto x = llvm::cast<RankedTensorType>(in[0].getType());
  Type elt = x.getElementType();
  // Attributes: float ones by name (with their defaults), ints by name.
  llvm::StringMap<float> floats;
  llvm::StringMap<int64_t> ints;
  if (opType == "Celu" || opType == "ThresholdedRelu")
    floats["alpha"] = 1.0f;
  if (opType == "Shrink") {
    floats["bias"] = 0.0f;
    floats["lambd"] = 0.5f;
  }
  if (opType == "LpNormalization") {
    ints["axis"] = -1;
    ints["p"] = 2;
  }
  for (const auto &a : node.attribute()) {
    if (floats.count(a.name()) && a.type() == pb::AttributeProto::FLOAT)
      floats[a.name()] = a.f();
    else if (ints.count(a.name()) && a.type() == pb::AttributeProto::INT)
      ints[a.name()] = a.i();
    else
      return error(loc) << "attribute '" << a.name() << "' of " << opType
                        << " is not supported";
  }
  auto make = [&](StringRef type, ArrayRef<Value> operands,
                  ArrayRef<NamedAttribute> attrs = {}) {
    return createOne(type, operands, attrs, loc);
  };
  auto scalar = [&](double v) -> Value {
    auto t = RankedTensorType::get({}, elt);
    return ox::ConstantOp::create(builder, loc, t,
                                  DenseElementsAttr::get(t, builder.getFloatAttr(elt, v)));
  };
  auto done = [&](FailureOr<Value> y) -> LogicalResult {
    if (failed(y))
      return failure();
    values[node.output(0)] = *y;
    return success();
  };
  Value v = in[0];
  if (opType == "Sum" || opType == "Mean") {
    // Left to right with broadcasting; Mean divides by the count.
    for (size_t i = 1; i < in.size(); ++i) {
      auto s = make("Add", {v, in[i]});
      if (failed(s))
        return failure();
      v = *s;
    }
    if (opType == "Sum" || in.size() == 1)
      return done(v);
    return done(make("Div", {v, scalar(double(in.size()))}));
  }
  if (in.size() != 1)
    return error(loc) << opType << " takes one input";
  if (opType == "Softsign") { // x / (1 + |x|)
    auto a = make("Abs", {v});
    if (failed(a))
      return failure();
    auto d = make("Add", {*a, scalar(1.0)});
    if (failed(d))
      return failure();
    return done(make("Div", {v, *d}));
  }
  if (opType == "Celu") { // alpha * Elu(x / alpha) with Elu's alpha 1
    float alpha = floats["alpha"];
    if (alpha == 0.0f)
      return error(loc) << "Celu's alpha must not be 0";
    auto scaled = make("Div", {v, scalar(alpha)});
    if (failed(scaled))
      return failure();
    auto e = make("Elu", {*scaled}, {builder.getNamedAttr("alpha", builder.getF32FloatAttr(1.0f))});
    if (failed(e))
      return failure();
    return done(make("Mul", {*e, scalar(alpha)}));
  }
  if (opType == "ThresholdedRelu") { // x where x > alpha, else 0
    auto above = make("Greater", {v, scalar(floats["alpha"])});
    if (failed(above))
      return failure();
    return done(make("Where", {*above, v, scalar(0.0)}));
  }
  if (opType == "Shrink") { // x + bias below -lambd, x - bias above lambd, else 0
    float bias = floats["bias"], lambd = floats["lambd"];
    auto below = make("Less", {v, scalar(-lambd)});
    auto above = make("Greater", {v, scalar(lambd)});
    auto plus = make("Add", {v, scalar(bias)});
    auto minus = make("Sub", {v, scalar(bias)});
    if (failed(below) || failed(above) || failed(plus) || failed(minus))
      return failure();
    auto upper = make("Where", {*above, *minus, scalar(0.0)});
    if (failed(upper))
      return failure();
    return done(make("Where", {*below, *plus, *upper}));
  }
  if (opType == "Mish") { // x * tanh(softplus(x))
    auto sp = make("Softplus", {v});
    if (failed(sp))
      return failure();
    auto t = make("Tanh", {*sp});
    if (failed(t))
      return failure();
    return done(make("Mul", {v, *t}));
  }
  NamedAttrList kept;
  kept.set("keepdims", builder.getI64IntegerAttr(1));
  if (opType == "GlobalMaxPool") { // ReduceMax over the spatial axes, kept
    if (x.getRank() < 3)
      return error(loc) << "GlobalMaxPool needs an (N, C, D...) input, got " << x;
    SmallVector<int64_t> axes;
    for (int64_t d = 2; d < x.getRank(); ++d)
      axes.push_back(d);
    return done(make("ReduceMax", {v, constantI64(axes, loc)}, kept.getAttrs()));
  }
  // LpNormalization: x / ||x||_p along axis (no epsilon, as ONNX Runtime).
  int64_t axis = ints["axis"], p = ints["p"];
  if (axis < -x.getRank() || axis >= x.getRank())
    return error(loc) << "LpNormalization axis " << axis << " is out of range for " << x;
  if (p != 1 && p != 2)
    return error(loc) << "LpNormalization p must be 1 or 2, got " << p;
  Value axes = constantI64({axis < 0 ? axis + x.getRank() : axis}, loc);
  auto terms = p == 1 ? make("Abs", {v}) : make("Mul", {v, v});
  if (failed(terms))
    return failure();
  auto sum = make("ReduceSum", {*terms, axes}, kept.getAttrs());
  if (failed(sum))
    return failure();
  Value norm = *sum;
  if (p == 2) {
    auto root = make("Sqrt", {norm});
    if (failed(root))
      return failure();
    norm = *root;
  }
  return done(make("Div", {v, norm}));
}

/// OneHot(indices, depth, values = [off, on]; axis): Where(Equal(indices
/// unsqueezed at axis, 0..depth-1 along axis), on, off), negative indices
/// counting from depth; depth must be a constant.
LogicalResult Importer::importOneHot(const pb::NodeProto &node, Location loc) {
  if (node.input_size() != 3 || node.output_size() != 1)
    return error(loc) << "OneHot takes indices, depth and values and has one output";
  FailureOr<SmallVector<Value>> inputs = nodeInputs(node, loc, false);
  if (failed(inputs))
    return failure();
  SmallVector<Value> in = std::move(*inputs);
  int64_t axis = -1;
  for (const auto &a : node.attribute()) {
    if (a.name() == "axis")
      axis = a.i();
    else
      return error(loc) << "attribute '" << a.name() << "' of OneHot is not supported";
  }
  auto idx = llvm::dyn_cast<RankedTensorType>(in[0].getType());
  auto vals = llvm::dyn_cast<RankedTensorType>(in[2].getType());
  if (!idx || !vals || vals.getNumElements() != 2 || !vals.hasStaticShape())
    return error(loc) << "OneHot needs ranked indices and 2 values [off, on], got "
                      << in[0].getType() << " and " << in[2].getType();
  // depth: a constant scalar or 1-element tensor of any number type.
  int64_t depth = -1;
  if (auto c = ox::getConstantAttr(in[1])) {
    if (c.getNumElements() == 1) {
      if (llvm::isa<IntegerType>(c.getElementType()))
        depth = (*c.getValues<APInt>().begin()).getSExtValue();
      else if (llvm::isa<FloatType>(c.getElementType()))
        depth = int64_t((*c.getValues<APFloat>().begin()).convertToDouble());
    }
  }
  if (depth < 1)
    return error(loc) << "OneHot's depth must be a constant of at least 1 "
                         "(a value computed at run time is not supported)";
  int64_t rank = idx.getRank() + 1;
  if (axis < -rank || axis >= rank)
    return error(loc) << "OneHot axis " << axis << " is out of range for rank " << rank;
  if (axis < 0)
    axis += rank;
  auto make = [&](StringRef type, ArrayRef<Value> operands,
                  ArrayRef<NamedAttribute> attrs = {}) {
    return createOne(type, operands, attrs, loc);
  };
  Value ix = in[0];
  if (!idx.getElementType().isInteger(64)) {
    auto cast = make("Cast", {ix}, {builder.getNamedAttr("to", builder.getI64IntegerAttr(7))});
    if (failed(cast))
      return failure();
    ix = *cast;
  }
  auto i64Scalar = RankedTensorType::get({}, builder.getI64Type());
  auto scalarI64 = [&](int64_t v) -> Value {
    return ox::ConstantOp::create(builder, loc, i64Scalar,
                                  DenseElementsAttr::get(i64Scalar, v));
  };
  auto negative = make("Less", {ix, scalarI64(0)});
  auto wrapped = make("Add", {ix, scalarI64(depth)});
  if (failed(negative) || failed(wrapped))
    return failure();
  auto fixed = make("Where", {*negative, *wrapped, ix});
  if (failed(fixed))
    return failure();
  auto u = make("Unsqueeze", {*fixed, constantI64({axis}, loc)});
  if (failed(u))
    return failure();
  SmallVector<int64_t> positions(depth);
  for (int64_t i = 0; i < depth; ++i)
    positions[i] = i;
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = depth;
  auto posType = RankedTensorType::get(shape, builder.getI64Type());
  Value pos = ox::ConstantOp::create(builder, loc, posType,
                                     DenseElementsAttr::get(posType, ArrayRef(positions)));
  auto hit = make("Equal", {*u, pos});
  if (failed(hit))
    return failure();
  auto flat = make("Reshape", {in[2], constantI64({2}, loc)});
  if (failed(flat))
    return failure();
  auto off = make("Gather", {*flat, scalarI64(0)}, {builder.getNamedAttr("axis", builder.getI64IntegerAttr(0))});
  auto on = make("Gather", {*flat, scalarI64(1)}, {builder.getNamedAttr("axis", builder.getI64IntegerAttr(0))});
  if (failed(off) || failed(on))
    return failure();
  auto y = make("Where", {*hit, *on, *off});
  if (failed(y))
    return failure();
  values[node.output(0)] = *y;
  return success();
}

LogicalResult Importer::importGroupNorm(const pb::NodeProto &node,
                                        StringRef opType, Location loc) {
  bool instance = opType == "InstanceNormalization";
  if (node.input_size() != 3 || node.output_size() != 1)
    return error(loc) << opType << " takes X, scale and B and has one output";
  FailureOr<SmallVector<Value>> inputs = nodeInputs(node, loc, false);
  if (failed(inputs))
    return failure();
  SmallVector<Value> in = std::move(*inputs);
  float epsilon = 1e-5f;
  int64_t groups = -1;
  for (const auto &a : node.attribute()) {
    if (a.name() == "epsilon")
      epsilon = a.f();
    else if (a.name() == "num_groups" && !instance)
      groups = a.i();
    else if (a.name() == "stash_type" && !instance && a.i() == 1)
      continue; // float32 statistics: what pipec computes
    else
      return error(loc) << "attribute '" << a.name() << "' of " << opType
                        << " is not supported";
  }
  auto x = llvm::dyn_cast<RankedTensorType>(in[0].getType());
  if (!x || !x.hasStaticShape() || x.getRank() < 3 ||
      !x.getElementType().isF32())
    return error(loc) << opType << " needs a static f32 input (N, C, D...), "
                      << "got " << in[0].getType();
  int64_t n = x.getDimSize(0), c = x.getDimSize(1);
  int64_t spatial = x.getNumElements() / std::max<int64_t>(n * c, 1);
  if (instance)
    groups = c;
  if (groups <= 0 || c % groups != 0)
    return error(loc) << opType << ": num_groups " << groups
                      << " does not divide the " << c << " channels";
  // GroupNormalization-18's scale and bias are per group; -21's (and
  // InstanceNormalization's) per channel.
  int64_t affine = (!instance && opset < 21) ? groups : c;
  for (unsigned i = 1; i < 3; ++i) {
    auto t = llvm::dyn_cast<RankedTensorType>(in[i].getType());
    if (!t || t.getRank() != 1 || t.getDimSize(0) != affine)
      return error(loc) << opType << "'s " << (i == 1 ? "scale" : "B")
                        << " must be (" << affine << "), got " << in[i].getType();
  }
  int64_t k = c / groups * spatial;
  Type f32 = builder.getF32Type();
  auto splat = [&](int64_t len, float v) -> Value {
    auto t = RankedTensorType::get({len}, f32);
    return ox::ConstantOp::create(builder, loc, t, DenseElementsAttr::get(t, v));
  };
  auto make = [&](StringRef type, ArrayRef<Value> operands,
                  ArrayRef<NamedAttribute> attrs = {}) {
    return createOne(type, operands, attrs, loc);
  };
  auto grouped = make("Reshape", {in[0], constantI64({n, groups, k}, loc)});
  if (failed(grouped))
    return failure();
  auto normed = make("LayerNormalization",
                     {*grouped, splat(k, 1.f), splat(k, 0.f)},
                     {builder.getNamedAttr("axis", builder.getI64IntegerAttr(2)),
                      builder.getNamedAttr("epsilon", builder.getF32FloatAttr(epsilon))});
  if (failed(normed))
    return failure();
  Value y = *normed;
  // The affine, on (N, G, K) per group or on X's shape per channel.
  SmallVector<int64_t> bshape;
  if (affine == groups && groups != c) {
    bshape = {1, groups, 1};
  } else {
    auto back = make("Reshape", {y, constantI64(x.getShape(), loc)});
    if (failed(back))
      return failure();
    y = *back;
    bshape.assign(x.getRank(), 1);
    bshape[1] = c;
  }
  for (unsigned i = 1; i < 3; ++i) {
    auto b = make("Reshape", {in[i], constantI64(bshape, loc)});
    if (failed(b))
      return failure();
    auto r = make(i == 1 ? "Mul" : "Add", {y, *b});
    if (failed(r))
      return failure();
    y = *r;
  }
  if (y.getType() != in[0].getType()) {
    auto back = make("Reshape", {y, constantI64(x.getShape(), loc)});
    if (failed(back))
      return failure();
    y = *back;
  }
  values[node.output(0)] = y;
  return success();
}

} // namespace mlir::pipec::onnx_import

namespace mlir::pipec::onnx_import {

namespace {
/// One operand's (or the output's) subscripts: a label per axis.
using Labels = SmallVector<char>;
} // namespace

LogicalResult Importer::importEinsum(const pb::NodeProto &node, Location loc) {
  std::string equation;
  for (const auto &a : node.attribute()) {
    if (a.name() != "equation")
      return error(loc) << "attribute '" << a.name()
                        << "' of Einsum is not supported";
    equation = a.s();
  }
  auto unsupported = [&](const Twine &why) {
    return error(loc) << "Einsum equation '" << equation
                      << "' is not supported: " << why;
  };
  if (node.output_size() != 1)
    return error(loc) << "Einsum has one output";
  if (node.input_size() < 1 || node.input_size() > 2)
    return unsupported(Twine(node.input_size()) +
                       " operands (one or two are supported)");
  FailureOr<SmallVector<Value>> inputs = nodeInputs(node, loc, false);
  if (failed(inputs))
    return failure();
  SmallVector<Value> in = std::move(*inputs);
  for (auto [name, v] : llvm::zip(node.input(), in)) {
    auto t = llvm::dyn_cast<RankedTensorType>(v.getType());
    if (!t || !t.hasStaticShape())
      return unsupported("operand '" + name + "' has no static shape");
  }

  // Parse: operands' subscripts, the optional explicit output; "..." stands
  // for the same leading-aligned broadcast axes in every operand, given
  // labels of their own ('0', '1', ...) that no equation letter uses.
  std::string eq;
  for (char c : equation)
    if (c != ' ')
      eq.push_back(c);
  StringRef lhs = eq, rhs;
  bool explicitOut = false;
  if (size_t arrow = StringRef(eq).find("->"); arrow != StringRef::npos) {
    lhs = StringRef(eq).take_front(arrow);
    rhs = StringRef(eq).drop_front(arrow + 2);
    explicitOut = true;
  }
  SmallVector<StringRef> terms;
  lhs.split(terms, ',');
  if (terms.size() != in.size())
    return unsupported(Twine(terms.size()) + " subscript terms for " +
                       Twine(in.size()) + " operands");
  int64_t ellipsisRank = -1;
  auto parseTerm = [&](StringRef term, int64_t rank,
                       Labels &labels) -> LogicalResult {
    size_t dots = term.find("...");
    StringRef before = term, after;
    if (dots != StringRef::npos) {
      before = term.take_front(dots);
      after = term.drop_front(dots + 3);
    }
    for (StringRef part : {before, after})
      for (char c : part)
        if (!llvm::isAlpha(c))
          return unsupported(Twine("character '") + Twine(c) +
                             "' (subscripts are letters and one '...')");
    int64_t named = before.size() + after.size();
    labels.assign(before.begin(), before.end());
    if (dots != StringRef::npos) {
      int64_t e = rank < 0 ? ellipsisRank : rank - named;
      if (e < 0 || (ellipsisRank >= 0 && e != ellipsisRank))
        return unsupported("'...' spans different numbers of axes");
      if (e > 10)
        return unsupported("'...' spans more than 10 axes");
      ellipsisRank = e;
      for (int64_t i = 0; i < e; ++i)
        labels.push_back(char('0' + i));
      labels.append(after.begin(), after.end());
    }
    if (rank >= 0 && (int64_t)labels.size() != rank)
      return unsupported(Twine("a term has ") + Twine(labels.size()) +
                         " subscripts for an operand of rank " + Twine(rank));
    return success();
  };
  SmallVector<Labels> ops(in.size());
  llvm::DenseMap<char, int64_t> size, count;
  for (size_t k = 0; k < in.size(); ++k) {
    auto t = llvm::cast<RankedTensorType>(in[k].getType());
    if (failed(parseTerm(terms[k], t.getRank(), ops[k])))
      return failure();
    for (auto [i, c] : llvm::enumerate(ops[k])) {
      int64_t d = t.getDimSize(i);
      auto [it, fresh] = size.try_emplace(c, d);
      if (!fresh && it->second != d)
        return unsupported(Twine("'") + Twine(c) + "' has extents " +
                           Twine(it->second) + " and " + Twine(d) +
                           " (broadcasting is not supported)");
      ++count[c];
    }
  }
  Labels out;
  if (explicitOut) {
    if (failed(parseTerm(rhs, -1, out)))
      return failure();
    llvm::SmallDenseSet<char> seen;
    for (char c : out) {
      if (!size.count(c))
        return unsupported(Twine("output subscript '") + Twine(c) +
                           "' is in no operand");
      if (!seen.insert(c).second)
        return unsupported(Twine("output subscript '") + Twine(c) +
                           "' repeats");
    }
  } else {
    // Implicit output: the ellipsis axes, then the letters used once, in
    // alphabetical order.
    for (int64_t i = 0; i < std::max<int64_t>(ellipsisRank, 0); ++i)
      out.push_back(char('0' + i));
    SmallVector<char> once;
    for (auto &[c, n] : count)
      if (n == 1 && llvm::isAlpha(c))
        once.push_back(c);
    llvm::sort(once);
    out.append(once.begin(), once.end());
  }
  auto inOut = [&](char c) { return llvm::is_contained(out, c); };

  auto make = [&](StringRef type, ArrayRef<Value> operands,
                  ArrayRef<NamedAttribute> attrs = {}) {
    return createOne(type, operands, attrs, loc);
  };
  auto shapeOf = [](Value v) {
    return SmallVector<int64_t>(
        llvm::cast<RankedTensorType>(v.getType()).getShape());
  };
  // Axis-by-axis helpers that keep `labels` in step with the value.
  auto transpose = [&](Value &v, Labels &labels,
                       const Labels &order) -> LogicalResult {
    if (order == labels)
      return success();
    SmallVector<int64_t> perm;
    for (char c : order)
      perm.push_back(llvm::find(labels, c) - labels.begin());
    auto r = make("Transpose", {v},
                  {builder.getNamedAttr("perm", builder.getDenseI64ArrayAttr(perm))});
    if (failed(r))
      return failure();
    v = *r;
    labels = order;
    return success();
  };
  auto reduce = [&](Value &v, Labels &labels,
                    ArrayRef<int64_t> axes) -> LogicalResult {
    if (axes.empty())
      return success();
    auto r = make("ReduceSum", {v, constantI64(axes, loc)},
                  {builder.getNamedAttr("keepdims", builder.getI64IntegerAttr(0))});
    if (failed(r))
      return failure();
    v = *r;
    for (int64_t a : llvm::reverse(axes))
      labels.erase(labels.begin() + a);
    return success();
  };
  auto reshape = [&](Value &v, ArrayRef<int64_t> shape) -> LogicalResult {
    if (shapeOf(v) == SmallVector<int64_t>(shape))
      return success();
    auto r = make("Reshape", {v, constantI64(shape, loc)});
    if (failed(r))
      return failure();
    v = *r;
    return success();
  };

  for (size_t k = 0; k < in.size(); ++k) {
    Labels &labels = ops[k];
    // A label repeated within an operand takes the diagonal: the product
    // with an identity mask over the two axes, summed over the second.
    for (size_t p = 0; p < labels.size(); ++p)
      for (size_t q = labels.size(); q-- > p + 1;) {
        if (labels[q] != labels[p])
          continue;
        auto t = llvm::cast<RankedTensorType>(in[k].getType());
        int64_t n = t.getDimSize(p);
        if (n > 1024)
          return unsupported(Twine("a diagonal of extent ") + Twine(n) +
                             " (up to 1024 is supported)");
        SmallVector<int64_t> maskShape(labels.size(), 1);
        maskShape[p] = maskShape[q] = n;
        auto maskType = RankedTensorType::get(maskShape, t.getElementType());
        if (!llvm::isa<FloatType>(t.getElementType()))
          return unsupported("a diagonal of a non-float operand");
        const llvm::fltSemantics &sem =
            llvm::cast<FloatType>(t.getElementType()).getFloatSemantics();
        SmallVector<APFloat> eye(n * n, APFloat::getZero(sem));
        for (int64_t i = 0; i < n; ++i)
          eye[i * n + i] = APFloat::getOne(sem);
        Value mask = ox::ConstantOp::create(builder, loc, maskType,
                                            DenseElementsAttr::get(maskType, eye));
        auto masked = make("Mul", {in[k], mask});
        if (failed(masked))
          return failure();
        in[k] = *masked;
        if (failed(reduce(in[k], labels, {(int64_t)q})))
          return failure();
      }
    // Labels of this operand alone that the output drops are summed now.
    SmallVector<int64_t> alone;
    for (auto [i, c] : llvm::enumerate(labels)) {
      bool elsewhere = false;
      for (size_t j = 0; j < in.size(); ++j)
        if (j != k && llvm::is_contained(ops[j], c))
          elsewhere = true;
      if (!elsewhere && !inOut(c))
        alone.push_back(i);
    }
    if (failed(reduce(in[k], labels, alone)))
      return failure();
  }

  Value result;
  Labels resultLabels;
  if (in.size() == 1) {
    result = in[0];
    resultLabels = ops[0];
  } else {
    // Batch labels (both operands and the output), contracted (both, not the
    // output), and kept ones of A or B alone: A as (batch, M, K), B as
    // (batch, K, N), one (batched) MatMul, then (batch, kept A, kept B).
    Labels batch, contracted, keptA, keptB;
    for (char c : ops[0]) {
      bool inB = llvm::is_contained(ops[1], c);
      (inB ? (inOut(c) ? batch : contracted) : keptA).push_back(c);
    }
    for (char c : ops[1])
      if (!llvm::is_contained(ops[0], c))
        keptB.push_back(c);
    auto volume = [&](const Labels &ls) {
      int64_t v = 1;
      for (char c : ls)
        v *= size[c];
      return v;
    };
    Labels orderA = batch, orderB = batch;
    orderA.append(keptA);
    orderA.append(contracted);
    orderB.append(contracted);
    orderB.append(keptB);
    if (failed(transpose(in[0], ops[0], orderA)) ||
        failed(transpose(in[1], ops[1], orderB)))
      return failure();
    SmallVector<int64_t> batchShape;
    for (char c : batch)
      batchShape.push_back(size[c]);
    SmallVector<int64_t> shapeA = batchShape, shapeB = batchShape;
    shapeA.append({volume(keptA), volume(contracted)});
    shapeB.append({volume(contracted), volume(keptB)});
    if (failed(reshape(in[0], shapeA)) || failed(reshape(in[1], shapeB)))
      return failure();
    auto product = make("MatMul", {in[0], in[1]});
    if (failed(product))
      return failure();
    result = *product;
    resultLabels = batch;
    resultLabels.append(keptA);
    resultLabels.append(keptB);
    SmallVector<int64_t> shape = batchShape;
    for (char c : keptA)
      shape.push_back(size[c]);
    for (char c : keptB)
      shape.push_back(size[c]);
    if (failed(reshape(result, shape)))
      return failure();
  }
  if (failed(transpose(result, resultLabels, out)))
    return failure();
  values[node.output(0)] = result;
  return success();
}

} // namespace mlir::pipec::onnx_import

namespace mlir::pipec::onnx_import {

FailureOr<SmallVector<Value>>
Importer::nodeInputs(const pb::NodeProto &node, Location loc, bool allowAbsent) {
  SmallVector<Value> operands;
  for (const auto &in : node.input()) {
    if (in.empty() && allowAbsent) {
      operands.push_back(noneValue());
      continue;
    }
    auto it = values.find(in);
    if (in.empty() || it == values.end()) {
      error(loc) << "input '" << in << "' is not defined before this node "
                 << "(the graph must be topologically sorted and every input "
                    "produced)";
      return failure();
    }
    operands.push_back(it->second);
  }
  return operands;
}

} // namespace mlir::pipec::onnx_import
