//===- OnnxImporter.cpp - ONNX ModelProto → onnx dialect ------------------===//
//
// Builds `func.func @forward` per the IR contract in DESIGN.md: graph inputs,
// then parameters (initializers) marked `pipe.param` / `pipe.trainable`;
// results are the graph outputs, the loss marked `pipe.loss`.
//
// Ops are created generically from the node's op_type ("onnx." + op_type);
// each op's own shape function then types its results, and folding turns the
// shape subgraphs of symbolic-batch exports into constants as they are read.
// Older opset forms (attributes that later became inputs, 2-D coerced
// Softmax) are rewritten here into the single form the dialect models.
//
//===----------------------------------------------------------------------===//
#include "pipec/Import/OnnxImporter.h"

#include "dialects/onnx/OnnxDialect.h"
#include "dialects/onnx/ShapeHelpers.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <onnx/checker.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include <set>

using namespace mlir;
namespace pb = ::onnx;
namespace ox = mlir::pipec::onnx;

namespace {

constexpr int64_t kMinOpset = 1;
/// Below this opset only operators whose semantics have not changed since
/// opset 1 (besides attributes the importer rejects) are imported.
constexpr int64_t kMinOpsetAllOps = 6;
constexpr int64_t kMaxOpset = 21;
constexpr int64_t kLibOnnxMaxOpset = 17; // what libonnx 1.12's checker knows
constexpr const char *kTrainingDomain = "ai.onnx.preview.training";

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
  };
  return counts;
}

/// Inputs through which no gradient flows (shapes, indices, labels, running
/// statistics): an initializer used only there is a constant, not a
/// trainable parameter.
bool isNonDifferentiableInput(StringRef opType, unsigned index) {
  static const llvm::StringMap<std::vector<unsigned>> table = {
      {"Reshape", {1}},        {"Expand", {1}},
      {"Slice", {1, 2, 3, 4}}, {"Gather", {1}},
      {"Squeeze", {1}},        {"Unsqueeze", {1}},
      {"ReduceMean", {1}},     {"ReduceSum", {1}},
      {"Split", {1}},          {"Dropout", {1, 2}},
      {"Where", {0}},          {"Equal", {0, 1}},
      {"Shape", {0}},          {"ConstantOfShape", {0}},
      {"Range", {0, 1, 2}},    {"Cast", {}},
      {"SoftmaxCrossEntropyLoss", {1, 2}},
      {"NegativeLogLikelihoodLoss", {1, 2}},
      {"BatchNormalization", {3, 4}},
  };
  auto it = table.find(opType);
  return it != table.end() && llvm::is_contained(it->second, index);
}

std::string nodeLabel(const pb::NodeProto &node, int index) {
  if (!node.name().empty())
    return node.name();
  if (node.output_size() > 0 && !node.output(0).empty())
    return node.op_type() + " → " + node.output(0);
  return node.op_type() + "#" + std::to_string(index);
}

class Importer {
public:
  Importer(MLIRContext *ctx, StringRef path, const pipec::ImportOptions &opts)
      : ctx(ctx), builder(ctx), path(path.str()), opts(opts),
        fileLoc(FileLineColLoc::get(ctx, path, 0, 0)) {}

  OwningOpRef<ModuleOp> run(const pb::ModelProto &model);

private:
  // Errors ------------------------------------------------------------------
  InFlightDiagnostic error() { return emitError(fileLoc); }
  InFlightDiagnostic error(Location loc) { return emitError(loc); }

  // Types and tensors -------------------------------------------------------
  FailureOr<Type> elementType(int32_t onnxType, Location loc);
  FailureOr<RankedTensorType> valueType(const pb::ValueInfoProto &info,
                                        Location loc);
  FailureOr<ElementsAttr> tensorAttr(const pb::TensorProto &t, Location loc,
                                     bool allowResource);
  FailureOr<std::string> externalData(const pb::TensorProto &t, Location loc);

  // Graphs ------------------------------------------------------------------
  LogicalResult checkOpsets(const pb::ModelProto &model);
  LogicalResult runChecker(const pb::ModelProto &model);
  LogicalResult decideParameters(const pb::ModelProto &model);
  FailureOr<func::FuncOp> importMainGraph(const pb::ModelProto &model);
  FailureOr<func::FuncOp> importTrainingGraph(const pb::GraphProto &graph,
                                              StringRef name,
                                              const pb::TrainingInfoProto &info,
                                              func::FuncOp forward);
  LogicalResult importNodes(const pb::GraphProto &graph);
  LogicalResult importNode(const pb::NodeProto &node, int index);
  LogicalResult finishFunction(func::FuncOp fn);

  // Nodes -------------------------------------------------------------------
  FailureOr<Attribute> convertAttribute(const pb::AttributeProto &attr,
                                        Location loc);
  LogicalResult normalizeOldForms(StringRef opType, const pb::NodeProto &node,
                                  SmallVectorImpl<Value> &operands,
                                  NamedAttrList &attrs, Location loc);
  Value constantI64(ArrayRef<int64_t> values, Location loc);
  Value noneValue();
  Operation *createOp(StringRef opType, ArrayRef<Value> operands,
                      ArrayRef<NamedAttribute> attrs, unsigned numResults,
                      Location loc);
  FailureOr<SmallVector<Value>> typeAndFold(Operation *op);
  FailureOr<Value> coercedSoftmax(StringRef opType, Value input, int64_t axis,
                                  Location loc);

  MLIRContext *ctx;
  OpBuilder builder;
  std::string path;
  const pipec::ImportOptions &opts;
  Location fileLoc;
  int64_t opset = 0, trainingOpset = 0;

  llvm::StringMap<Value> values;
  /// Static shapes the model itself declares (graph outputs, value_info):
  /// they fix results whose shape depends on runtime data (a Reshape target
  /// fed as a graph input).
  llvm::StringMap<SmallVector<int64_t>> declaredShapes;
  llvm::StringMap<const pb::TensorProto *> initializers;
  llvm::StringSet<> trainable, stateParams, frozen;
  Value none;
  Block *body = nullptr;
  std::set<std::string> blobNames;
};

//===----------------------------------------------------------------------===//
// Types and tensors
//===----------------------------------------------------------------------===//

FailureOr<Type> Importer::elementType(int32_t t, Location loc) {
  // Complex and 8-bit float types exist in the dialect's mapping but have no
  // kernels; strings have no MLIR element type at all.
  Type type = ox::onnxDataTypeToType(ctx, t);
  if (type && (type.isIntOrIndex() || type.isF16() || type.isBF16() ||
               type.isF32() || type.isF64()))
    return type;
  std::string name = pb::TensorProto::DataType_IsValid(t)
                         ? pb::TensorProto::DataType_Name(t)
                         : std::to_string(t);
  return error(loc) << "element type " << name
                    << " is not supported (use float, double, float16, "
                       "bfloat16, (u)int8/16/32/64 or bool)";
}

FailureOr<RankedTensorType>
Importer::valueType(const pb::ValueInfoProto &info, Location loc) {
  const std::string &name = info.name();
  if (!info.has_type() || !info.type().has_tensor_type())
    return error(loc) << "graph input '" << name
                      << "' is not a tensor (sequences, maps and optionals "
                         "are not supported)";
  const auto &tt = info.type().tensor_type();
  auto elt = elementType(tt.elem_type(), loc);
  if (failed(elt))
    return failure();
  auto bound = opts.inputShapes.find(name);
  if (bound != opts.inputShapes.end())
    return RankedTensorType::get(bound->second, *elt);
  if (!tt.has_shape())
    return error(loc) << "graph input '" << name
                      << "' has no shape; give it one with --input-shape "
                      << name << "=DxDx...";
  SmallVector<int64_t> shape;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto &dim = tt.shape().dim(i);
    if (dim.has_dim_value() && dim.dim_value() >= 0) {
      shape.push_back(dim.dim_value());
      continue;
    }
    std::string symbol = dim.has_dim_param() ? dim.dim_param() : "";
    auto sym = symbol.empty() ? opts.inputShapes.end()
                              : opts.inputShapes.find(symbol);
    if (sym != opts.inputShapes.end() && sym->second.size() == 1) {
      shape.push_back(sym->second[0]);
      continue;
    }
    auto diag = error(loc) << "graph input '" << name << "' dimension " << i
                           << " is symbolic";
    if (!symbol.empty())
      diag << " ('" << symbol << "')";
    diag << "; bind it with --input-shape " << name << "=DxDx..."
         << (symbol.empty() ? "" : " or --input-shape " + symbol + "=<size>");
    return failure();
  }
  return RankedTensorType::get(shape, *elt);
}

FailureOr<std::string> Importer::externalData(const pb::TensorProto &t,
                                              Location loc) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = std::atoll(kv.value().c_str());
    else if (kv.key() == "length")
      length = std::atoll(kv.value().c_str());
  }
  if (location.empty())
    return error(loc) << "initializer '" << t.name()
                      << "' has external data without a location";
  SmallString<256> file(llvm::sys::path::parent_path(path));
  llvm::sys::path::append(file, location);
  auto buffer = llvm::MemoryBuffer::getFile(file, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return error(loc) << "initializer '" << t.name()
                      << "': cannot read external data file '" << file
                      << "': " << buffer.getError().message();
  StringRef data = (*buffer)->getBuffer();
  if (offset < 0 || offset > (int64_t)data.size() ||
      (length >= 0 && offset + length > (int64_t)data.size()))
    return error(loc) << "initializer '" << t.name() << "': external data "
                      << "range [" << offset << ", +" << length
                      << ") lies outside '" << file << "' ("
                      << data.size() << " bytes)";
  return data.substr(offset, length < 0 ? StringRef::npos : length).str();
}

FailureOr<ElementsAttr> Importer::tensorAttr(const pb::TensorProto &t,
                                             Location loc,
                                             bool allowResource) {
  auto elt = elementType(t.data_type(), loc);
  if (failed(elt))
    return failure();
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return error(loc) << "tensor '" << t.name() << "' has negative dimension "
                        << d;
    count *= d;
  }
  auto type = RankedTensorType::get(shape, *elt);
  unsigned width = elt->isInteger(1) ? 8 : elt->getIntOrFloatBitWidth();
  size_t bytes = (size_t)count * width / 8;

  // Gather the little-endian bytes of the tensor, whichever field holds them.
  std::string raw;
  if (t.data_location() == pb::TensorProto::EXTERNAL) {
    auto data = externalData(t, loc);
    if (failed(data))
      return failure();
    raw = std::move(*data);
  } else if (t.has_raw_data()) {
    raw = t.raw_data();
  } else {
    raw.resize(bytes);
    auto put = [&](auto value, int64_t i) {
      using T = decltype(value);
      std::memcpy(raw.data() + i * sizeof(T), &value, sizeof(T));
    };
    int64_t n = 0;
    switch (t.data_type()) {
    case pb::TensorProto::FLOAT:
      n = t.float_data_size();
      for (int64_t i = 0; i < std::min(n, count); ++i) put(t.float_data(i), i);
      break;
    case pb::TensorProto::DOUBLE:
      n = t.double_data_size();
      for (int64_t i = 0; i < std::min(n, count); ++i) put(t.double_data(i), i);
      break;
    case pb::TensorProto::INT64:
      n = t.int64_data_size();
      for (int64_t i = 0; i < std::min(n, count); ++i) put(t.int64_data(i), i);
      break;
    case pb::TensorProto::UINT32: case pb::TensorProto::UINT64:
      n = t.uint64_data_size();
      for (int64_t i = 0; i < std::min(n, count); ++i) {
        if (width == 64) put((uint64_t)t.uint64_data(i), i);
        else put((uint32_t)t.uint64_data(i), i);
      }
      break;
    default: // int32, int16, int8, uint8, uint16, bool, float16, bfloat16
      n = t.int32_data_size();
      for (int64_t i = 0; i < std::min(n, count); ++i) {
        int32_t v = t.int32_data(i);
        switch (width) {
        case 32: put((int32_t)v, i); break;
        case 16: put((uint16_t)v, i); break;
        default: put((uint8_t)v, i); break;
        }
      }
      break;
    }
    if (n != count)
      return error(loc) << "tensor '" << t.name() << "' holds " << n
                        << " values but its shape needs " << count;
  }
  if (raw.size() != bytes)
    return error(loc) << "tensor '" << t.name() << "' holds " << raw.size()
                      << " bytes but its shape and type need " << bytes;

  if (allowResource && (int64_t)bytes >= opts.resourceThresholdBytes &&
      !elt->isInteger(1)) {
    std::string blob = t.name().empty() ? "tensor" : t.name();
    for (char &c : blob)
      if (!llvm::isAlnum(c) && c != '_' && c != '.')
        c = '_';
    std::string unique = blob;
    for (int i = 1; blobNames.count(unique); ++i)
      unique = blob + "_" + std::to_string(i);
    blobNames.insert(unique);
    auto data = HeapAsmResourceBlob::allocateAndCopyWithAlign(
        ArrayRef<char>(raw.data(), raw.size()), alignof(double));
    return ElementsAttr(DenseResourceElementsAttr::get(type, unique,
                                                       std::move(data)));
  }
  if (elt->isInteger(1)) {
    SmallVector<bool> bits;
    for (char c : raw)
      bits.push_back(c != 0);
    return ElementsAttr(DenseElementsAttr::get(type, ArrayRef<bool>(bits)));
  }
  return ElementsAttr(DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(raw.data(), raw.size())));
}

//===----------------------------------------------------------------------===//
// Model-level checks
//===----------------------------------------------------------------------===//

LogicalResult Importer::checkOpsets(const pb::ModelProto &model) {
  bool haveDefault = false;
  for (const auto &imp : model.opset_import()) {
    const std::string &d = imp.domain();
    if (d.empty() || d == "ai.onnx") {
      opset = imp.version();
      haveDefault = true;
    } else if (d == kTrainingDomain) {
      trainingOpset = imp.version();
    }
  }
  if (!haveDefault && trainingOpset == 0)
    return error() << "the model imports no ai.onnx opset (opset_import is "
                      "empty or lacks the default domain)";
  if (haveDefault && (opset < kMinOpset || opset > kMaxOpset))
    return error() << "ai.onnx opset " << opset << " is outside the supported "
                   << "range " << kMinOpset << "–" << kMaxOpset
                   << "; convert the model with onnx.version_converter";
  return success();
}

LogicalResult Importer::runChecker(const pb::ModelProto &model) {
  // libonnx 1.12 knows opsets up to 17; past that its schemas would reject
  // the newer forms (axes as inputs) that our own ops accept, so the model
  // is checked structurally while nodes are imported instead.
  if (opset > kLibOnnxMaxOpset)
    return success();
  // With external data the checker must know the model's folder, which
  // only its path-taking form learns.
  bool external = llvm::any_of(model.graph().initializer(), [](const auto &t) {
    return t.data_location() == pb::TensorProto::EXTERNAL;
  });
  try {
    if (external)
      pb::checker::check_model(path);
    else
      pb::checker::check_model(model);
  } catch (const std::exception &e) {
    std::string msg = e.what();
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' '))
      msg.pop_back();
    for (char &c : msg)
      if (c == '\n')
        c = ' ';
    return error() << "the ONNX checker rejects the model: " << msg;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

LogicalResult Importer::decideParameters(const pb::ModelProto &model) {
  const pb::GraphProto &graph = model.graph();
  if (graph.sparse_initializer_size() > 0)
    return error() << "sparse initializers are not supported ('"
                   << graph.sparse_initializer(0).values().name() << "')";
  for (const auto &t : graph.initializer()) {
    if (t.name().empty())
      return error() << "the graph has an initializer without a name";
    if (!initializers.try_emplace(t.name(), &t).second)
      return error() << "initializer '" << t.name() << "' is defined twice";
  }
  for (const auto &name : opts.frozen) {
    if (!initializers.count(name))
      return error() << "--frozen names '" << name
                     << "', which is not an initializer of the model";
    frozen.insert(name);
  }
  // A float initializer is a parameter when some node reads it where a
  // gradient flows; running statistics are state; the rest are constants.
  for (const auto &node : graph.node()) {
    for (int i = 0; i < node.input_size(); ++i) {
      auto it = initializers.find(node.input(i));
      if (it == initializers.end())
        continue;
      int32_t dt = it->second->data_type();
      bool isFloat = dt == pb::TensorProto::FLOAT ||
                     dt == pb::TensorProto::DOUBLE ||
                     dt == pb::TensorProto::FLOAT16 ||
                     dt == pb::TensorProto::BFLOAT16;
      if (!isFloat)
        continue;
      if (node.op_type() == "BatchNormalization" && (i == 3 || i == 4))
        stateParams.insert(node.input(i));
      else if (!isNonDifferentiableInput(node.op_type(), i))
        trainable.insert(node.input(i));
    }
  }
  // A TrainingInfoProto says exactly what is trained (the Gradient ops' xs)
  // and what is state (the other update_binding targets).
  llvm::StringSet<> gradientXs, bound;
  bool haveGradient = false;
  for (const auto &info : model.training_info()) {
    for (const auto &kv : info.update_binding())
      bound.insert(kv.key());
    for (const auto &node : info.algorithm().node()) {
      if (node.op_type() != "Gradient")
        continue;
      haveGradient = true;
      for (const auto &a : node.attribute())
        if (a.name() == "xs")
          for (const auto &x : a.strings())
            gradientXs.insert(x);
    }
  }
  if (haveGradient) {
    trainable.clear();
    for (const auto &x : gradientXs)
      if (initializers.count(x.getKey()))
        trainable.insert(x.getKey());
  }
  for (const auto &b : bound)
    if (initializers.count(b.getKey()) && !trainable.count(b.getKey()))
      stateParams.insert(b.getKey());
  for (const auto &f : frozen) {
    if (trainable.erase(f.getKey()))
      stateParams.insert(f.getKey());
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Graph import
//===----------------------------------------------------------------------===//

Value Importer::noneValue() {
  if (!none) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(body);
    none = ox::NoValueOp::create(builder, fileLoc, NoneType::get(ctx));
  }
  return none;
}

Value Importer::constantI64(ArrayRef<int64_t> vals, Location loc) {
  auto type = RankedTensorType::get({(int64_t)vals.size()},
                                    IntegerType::get(ctx, 64));
  return ox::ConstantOp::create(builder, loc, type,
                                DenseIntElementsAttr::get(type, vals));
}

FailureOr<func::FuncOp> Importer::importMainGraph(const pb::ModelProto &model) {
  const pb::GraphProto &graph = model.graph();
  if (failed(decideParameters(model)))
    return failure();

  SmallVector<Type> argTypes;
  SmallVector<NamedAttrList> argAttrs;
  SmallVector<std::string> argNames;
  llvm::StringSet<> seenInputs;
  for (const auto &entry : opts.inputShapes) {
    bool isInput = llvm::any_of(graph.input(), [&](const auto &in) {
      return in.name() == entry.getKey() && !initializers.count(in.name());
    });
    if (!isInput && entry.second.size() != 1)
      return error() << "--input-shape names '" << entry.getKey().str()
                     << "', which is not a graph input (and a symbolic "
                        "dimension takes a single size)";
  }
  for (const auto &in : graph.input()) {
    if (initializers.count(in.name()))
      continue; // IR < 4 lists initializers among the inputs too
    if (!seenInputs.insert(in.name()).second)
      return error() << "graph input '" << in.name() << "' is listed twice";
    auto type = valueType(in, fileLoc);
    if (failed(type))
      return failure();
    argTypes.push_back(*type);
    NamedAttrList attrs;
    attrs.set("pipe.input", builder.getStringAttr(in.name()));
    argAttrs.push_back(attrs);
    argNames.push_back(in.name());
  }

  // Parameters: every float initializer that is trainable or state, in the
  // order the model lists them.
  SmallVector<const pb::TensorProto *> params;
  for (const auto &t : graph.initializer()) {
    bool isParam = trainable.count(t.name()) || stateParams.count(t.name());
    if (!isParam)
      continue;
    auto attr = tensorAttr(t, fileLoc, /*allowResource=*/true);
    if (failed(attr))
      return failure();
    argTypes.push_back(llvm::cast<ShapedType>(attr->getType()));
    NamedAttrList attrs;
    attrs.set("pipe.param", builder.getStringAttr(t.name()));
    if (trainable.count(t.name()))
      attrs.set("pipe.trainable", builder.getUnitAttr());
    attrs.set("pipe.init", *attr);
    argAttrs.push_back(attrs);
    argNames.push_back(t.name());
    params.push_back(&t);
  }

  auto fnType = builder.getFunctionType(argTypes, {});
  auto fn = func::FuncOp::create(builder, fileLoc, "forward", fnType);
  body = fn.addEntryBlock();
  for (auto [i, attrs] : llvm::enumerate(argAttrs))
    fn.setArgAttrs(i, attrs.getDictionary(ctx));
  for (auto [i, name] : llvm::enumerate(argNames))
    values[name] = body->getArgument(i);

  builder.setInsertionPointToStart(body);
  // Constants: the remaining initializers.
  for (const auto &t : graph.initializer()) {
    if (values.count(t.name()))
      continue;
    auto attr = tensorAttr(t, fileLoc, /*allowResource=*/true);
    if (failed(attr))
      return failure();
    values[t.name()] = ox::ConstantOp::create(
        builder, NameLoc::get(builder.getStringAttr(t.name()), fileLoc),
        llvm::cast<ShapedType>(attr->getType()), *attr);
  }

  if (failed(importNodes(graph)))
    return failure();

  // Results: the graph outputs, the loss marked.
  SmallVector<Value> results;
  SmallVector<NamedAttrList> resultAttrs;
  int lossIndex = -1;
  for (const auto &out : graph.output()) {
    auto it = values.find(out.name());
    if (it == values.end())
      return error() << "graph output '" << out.name()
                     << "' is not produced by any node, input or initializer";
    results.push_back(it->second);
    NamedAttrList attrs;
    attrs.set("pipe.output", builder.getStringAttr(out.name()));
    resultAttrs.push_back(attrs);
  }
  if (!opts.lossName.empty()) {
    for (auto [i, out] : llvm::enumerate(graph.output()))
      if (out.name() == opts.lossName)
        lossIndex = i;
    if (lossIndex < 0)
      return error() << "--loss names '" << opts.lossName
                     << "', which is not a graph output";
  } else {
    // A scalar float output made by a loss op, else one named like a loss.
    for (int pass = 0; pass < 2 && lossIndex < 0; ++pass) {
      for (auto [i, v] : llvm::enumerate(results)) {
        auto t = llvm::dyn_cast<RankedTensorType>(v.getType());
        if (!t || t.getRank() != 0 || !llvm::isa<FloatType>(t.getElementType()))
          continue;
        Operation *def = v.getDefiningOp();
        StringRef defName = def ? def->getName().getStringRef() : "";
        bool isLossOp = defName == "onnx.SoftmaxCrossEntropyLoss" ||
                        defName == "onnx.NegativeLogLikelihoodLoss";
        bool named = StringRef(graph.output(i).name()).lower().find("loss") !=
                     std::string::npos;
        if ((pass == 0 && isLossOp) || (pass == 1 && named)) {
          lossIndex = i;
          break;
        }
      }
    }
  }
  if (lossIndex >= 0) {
    auto t = llvm::dyn_cast<RankedTensorType>(results[lossIndex].getType());
    if (!t || t.getNumElements() != 1)
      return error() << "the loss '" << graph.output(lossIndex).name()
                     << "' is not a scalar (type " << results[lossIndex].getType()
                     << ")";
    resultAttrs[lossIndex].set("pipe.loss", builder.getUnitAttr());
  }
  func::ReturnOp::create(builder, fileLoc, results);
  fn.setType(builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  for (auto [i, attrs] : llvm::enumerate(resultAttrs))
    fn.setResultAttrs(i, attrs.getDictionary(ctx));
  if (failed(finishFunction(fn)))
    return failure();
  return fn;
}

FailureOr<func::FuncOp>
Importer::importTrainingGraph(const pb::GraphProto &graph, StringRef name,
                              const pb::TrainingInfoProto &info,
                              func::FuncOp forward) {
  // The algorithm (or initialization) graph reads the main graph's inputs
  // and initializers by name, plus its own inputs (learning rate, step).
  values.clear();
  none = {};
  SmallVector<Type> argTypes(forward.getArgumentTypes());
  SmallVector<DictionaryAttr> argAttrs;
  forward.getAllArgAttrs(argAttrs);
  SmallVector<std::string> argNames;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    auto dict = argAttrs[i];
    auto n = dict.getAs<StringAttr>("pipe.input");
    if (!n)
      n = dict.getAs<StringAttr>("pipe.param");
    argNames.push_back(n.str());
  }
  for (const auto &in : graph.input()) {
    if (llvm::is_contained(argNames, in.name()))
      continue;
    auto type = valueType(in, fileLoc);
    if (failed(type))
      return failure();
    argTypes.push_back(*type);
    argAttrs.push_back(DictionaryAttr::get(
        ctx, {builder.getNamedAttr("pipe.input",
                                   builder.getStringAttr(in.name()))}));
    argNames.push_back(in.name());
  }
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointAfter(forward);
  auto fn = func::FuncOp::create(builder, fileLoc, name,
                                 builder.getFunctionType(argTypes, {}));
  body = fn.addEntryBlock();
  fn.setAllArgAttrs(argAttrs);
  for (auto [i, n] : llvm::enumerate(argNames))
    values[n] = body->getArgument(i);
  builder.setInsertionPointToStart(body);
  // Constants of the main graph that are not parameters, then the
  // algorithm graph's own initializers.
  for (const auto &entry : initializers) {
    if (values.count(entry.getKey()))
      continue;
    auto attr = tensorAttr(*entry.second, fileLoc, /*allowResource=*/true);
    if (failed(attr))
      return failure();
    values[entry.getKey()] = ox::ConstantOp::create(
        builder, fileLoc, llvm::cast<ShapedType>(attr->getType()), *attr);
  }
  for (const auto &t : graph.initializer()) {
    auto attr = tensorAttr(t, fileLoc, /*allowResource=*/true);
    if (failed(attr))
      return failure();
    values[t.name()] = ox::ConstantOp::create(
        builder, fileLoc, llvm::cast<ShapedType>(attr->getType()), *attr);
  }
  if (failed(importNodes(graph)))
    return failure();

  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  for (const auto &out : graph.output()) {
    auto it = values.find(out.name());
    if (it == values.end())
      return error() << "training graph output '" << out.name()
                     << "' is not produced by any node";
    results.push_back(it->second);
    SmallVector<NamedAttribute> attrs{builder.getNamedAttr(
        "pipe.output", builder.getStringAttr(out.name()))};
    for (const auto &kv : info.update_binding())
      if (kv.value() == out.name())
        attrs.push_back(builder.getNamedAttr(
            "pipe.update_binding", builder.getStringAttr(kv.key())));
    resultAttrs.push_back(DictionaryAttr::get(ctx, attrs));
  }
  for (const auto &kv : info.update_binding()) {
    if (!initializers.count(kv.key()))
      return error() << "training update_binding names '" << kv.key()
                     << "', which is not an initializer of the model";
    if (!values.count(kv.value()))
      return error() << "training update_binding for '" << kv.key()
                     << "' names '" << kv.value()
                     << "', which no training node produces";
  }
  func::ReturnOp::create(builder, fileLoc, results);
  fn.setType(builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  fn.setAllResultAttrs(resultAttrs);
  if (failed(finishFunction(fn)))
    return failure();
  return fn;
}

LogicalResult Importer::importNodes(const pb::GraphProto &graph) {
  declaredShapes.clear();
  auto declare = [&](const pb::ValueInfoProto &info) {
    if (!info.has_type() || !info.type().has_tensor_type() ||
        !info.type().tensor_type().has_shape())
      return;
    SmallVector<int64_t> shape;
    for (const auto &d : info.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() < 0)
        return;
      shape.push_back(d.dim_value());
    }
    declaredShapes[info.name()] = shape;
  };
  for (const auto &info : graph.output())
    declare(info);
  for (const auto &info : graph.value_info())
    declare(info);
  for (int i = 0; i < graph.node_size(); ++i)
    if (failed(importNode(graph.node(i), i)))
      return failure();
  return success();
}

/// Removes ops whose results are unused (left behind by folding), then checks
/// that every value has a static shape.
LogicalResult Importer::finishFunction(func::FuncOp fn) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation &op : llvm::make_early_inc_range(
             llvm::reverse(fn.getBody().front().getOperations()))) {
      if (op.hasTrait<OpTrait::IsTerminator>() || !op.use_empty() ||
          !isPure(&op))
        continue;
      op.erase();
      changed = true;
    }
  }
  none = {};
  WalkResult walk = fn.walk([&](Operation *op) {
    for (Value v : op->getResults()) {
      auto t = llvm::dyn_cast<TensorType>(v.getType());
      if (t && !t.hasStaticShape()) {
        op->emitError() << "output of this op has a dynamic shape " << t
                        << " after import; bind the symbolic dimensions of "
                           "the graph inputs with --input-shape";
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
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
  OperationState state(loc, ("onnx." + opType).str());
  state.addOperands(operands);
  state.addAttributes(attrs);
  state.addTypes(SmallVector<Type>(
      numResults, UnrankedTensorType::get(Float32Type::get(ctx))));
  return builder.create(state);
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
  } else if (opType == "ReduceMean") {
    if (opset < 18)
      moveIntsToInput("axes", 1);
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

LogicalResult Importer::importNode(const pb::NodeProto &node, int index) {
  std::string label = nodeLabel(node, index);
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
      "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Neg", "Identity"};
  if (!training && opset < kMinOpsetAllOps && !stableSinceOne.count(opType))
    return error(loc) << "operator '" << opType << "' at opset " << opset
                      << " is not supported (ai.onnx opsets below "
                      << kMinOpsetAllOps << " are supported only for "
                      << "operators unchanged since); convert the model with "
                         "onnx.version_converter";
  std::string opName = ("onnx." + opType).str();
  std::optional<RegisteredOperationName> registered =
      RegisteredOperationName::lookup(opName, ctx);
  if (opType == "NoValue" || !registered) {
    auto diag = error(loc) << "operator '" << opType << "' (domain '"
                           << (domain.empty() ? "ai.onnx" : domain)
                           << "', opset " << (training ? trainingOpset : opset)
                           << ") is not supported; supported operators: ";
    auto names = pipec::supportedOnnxOperators(ctx);
    diag << llvm::join(names, ", ");
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
      auto t = tensorAttr(a.t(), loc, /*allowResource=*/true);
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

  SmallVector<Value> operands;
  for (const auto &in : node.input()) {
    if (in.empty()) {
      operands.push_back(noneValue());
      continue;
    }
    auto it = values.find(in);
    if (it == values.end())
      return error(loc) << "input '" << in << "' is not defined before this "
                        << "node (the graph must be topologically sorted and "
                           "every input produced)";
    operands.push_back(it->second);
  }
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

OwningOpRef<ModuleOp> Importer::run(const pb::ModelProto &model) {
  if (failed(checkOpsets(model)) || failed(runChecker(model)))
    return {};
  if (!model.has_graph()) {
    error() << "the model has no graph";
    return {};
  }
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  if (!model.producer_name().empty())
    (*module)->setAttr("pipe.producer",
                       builder.getStringAttr(model.producer_name()));
  (*module)->setAttr("pipe.opset", builder.getI64IntegerAttr(opset));
  builder.setInsertionPointToEnd(module->getBody());
  auto forward = importMainGraph(model);
  if (failed(forward))
    return {};
  for (int i = 0; i < model.training_info_size(); ++i) {
    const auto &info = model.training_info(i);
    std::string suffix = model.training_info_size() > 1 ? "_" + std::to_string(i) : "";
    if (info.has_initialization() && info.initialization().node_size() > 0 &&
        failed(importTrainingGraph(info.initialization(),
                                   "training_initialization" + suffix, info,
                                   *forward)))
      return {};
    if (info.has_algorithm() &&
        failed(importTrainingGraph(info.algorithm(), "training_algorithm" + suffix,
                                   info, *forward)))
      return {};
  }
  if (failed(mlir::verify(*module)))
    return {};
  return module;
}

} // namespace

namespace mlir::pipec {

bool parseInputShapeBinding(StringRef text, std::string &name,
                            std::vector<int64_t> &shape) {
  auto [lhs, rhs] = text.split('=');
  if (lhs.empty() || rhs.empty())
    return false;
  name = lhs.trim().str();
  shape.clear();
  SmallVector<StringRef> parts;
  rhs.split(parts, rhs.contains(',') ? ',' : 'x');
  for (StringRef p : parts) {
    int64_t v;
    if (p.trim().getAsInteger(10, v) || v < 0)
      return false;
    shape.push_back(v);
  }
  return true;
}

std::vector<std::string> supportedOnnxOperators(MLIRContext *context) {
  context->getOrLoadDialect<onnx::ONNXDialect>();
  std::vector<std::string> names;
  for (RegisteredOperationName name : context->getRegisteredOperations()) {
    if (name.getDialectNamespace() != "onnx")
      continue;
    StringRef op = name.getStringRef().drop_front(5);
    if (op != "NoValue")
      names.push_back(op.str());
  }
  llvm::sort(names);
  return names;
}

OwningOpRef<ModuleOp> importOnnxModel(MLIRContext *context, StringRef buffer,
                                      StringRef path,
                                      const ImportOptions &options) {
  context->loadDialect<onnx::ONNXDialect, func::FuncDialect>();
  Location fileLoc = FileLineColLoc::get(context, path, 0, 0);
  if (buffer.empty()) {
    emitError(fileLoc) << "the file is empty; expected an ONNX model";
    return {};
  }
  pb::ModelProto model;
  if (path.ends_with(".onnxtext")) {
    std::string text = buffer.str();
    auto status = pb::OnnxParser::Parse(model, text.c_str());
    if (!status.IsOK()) {
      emitError(fileLoc) << "cannot parse the ONNX text format: "
                         << status.ErrorMessage();
      return {};
    }
  } else {
    if (buffer.size() > (size_t)std::numeric_limits<int>::max() ||
        !model.ParseFromArray(buffer.data(), (int)buffer.size())) {
      emitError(fileLoc) << "not a valid ONNX model: the protobuf does not "
                            "parse (truncated or not an .onnx file?)";
      return {};
    }
    if (!model.has_graph() && model.opset_import_size() == 0) {
      emitError(fileLoc) << "not a valid ONNX model: it has no graph and no "
                            "opset_import (not an .onnx file?)";
      return {};
    }
  }
  Importer importer(context, path, options);
  return importer.run(model);
}

} // namespace mlir::pipec
