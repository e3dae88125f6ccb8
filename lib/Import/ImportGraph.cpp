//===- ImportGraph.cpp - ONNX graphs → func.func --------------------------===//
//
// Which initializers are parameters (trainable, frozen, state) and which
// constants, and the import of the main graph and the training graphs
// into functions.
//
//===----------------------------------------------------------------------===//
#include "Importer.h"
#include "dialects/pipe/PipeAttrNames.h"

#include "dialects/onnx/ShapeHelpers.h"

#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <cstring>

using namespace mlir;

namespace mlir::pipec::onnx_import {

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
      {"Clip", {1, 2}},        {"Less", {0, 1}},
      {"LessOrEqual", {0, 1}}, {"Greater", {0, 1}},
      {"GreaterOrEqual", {0, 1}},
      {"Sign", {0}},           {"Floor", {0}},
      {"Ceil", {0}},
      {"ReduceMax", {1}},      {"ReduceMin", {1}},
      {"ArgMax", {0}},         {"ArgMin", {0}},
      {"CumSum", {1}},         {"Tile", {1}},
      {"Pad", {1, 2, 3}},      {"Trilu", {1}},
      {"Resize", {1, 2, 3}},
      {"GatherND", {1}},       {"ScatterND", {1}},
      {"GatherElements", {1}}, {"ScatterElements", {1}},
  };
  auto it = table.find(opType);
  return it != table.end() && llvm::is_contained(it->second, index);
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

/// Whether little-endian raw bytes of T hold an infinity or NaN.
template <typename T>
static bool rawNonFinite(const std::string &raw) {
  for (size_t i = 0; i + sizeof(T) <= raw.size(); i += sizeof(T)) {
    T v;
    std::memcpy(&v, raw.data() + i, sizeof(T));
    if (!std::isfinite(v))
      return true;
  }
  return false;
}

/// Whether a float32/float64 initializer stored in the model holds an
/// infinity or NaN (an additive mask's -inf, say): such a tensor is a
/// buffer, not a weight (a gradient step on it gives NaN).
static bool holdsNonFinite(const pb::TensorProto &t) {
  if (t.data_location() == pb::TensorProto::EXTERNAL)
    return false;
  auto nonFinite = [](auto v) { return !std::isfinite(v); };
  if (t.data_type() == pb::TensorProto::FLOAT)
    return t.has_raw_data() ? rawNonFinite<float>(t.raw_data())
                            : llvm::any_of(t.float_data(), nonFinite);
  if (t.data_type() == pb::TensorProto::DOUBLE)
    return t.has_raw_data() ? rawNonFinite<double>(t.raw_data())
                            : llvm::any_of(t.double_data(), nonFinite);
  return false;
}

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
          for (const auto &x : a.strings()) {
            // An initializer (what it trains) or a graph input of the
            // main graph: a typo would silently leave a weight untrained.
            bool isInput = llvm::any_of(model.graph().input(),
                                        [&](const auto &in) { return in.name() == x; });
            if (!initializers.count(x) && !isInput)
              return error() << "TrainingInfoProto: Gradient node '" << node.name()
                             << "' takes the gradient with respect to '" << x
                             << "', which is neither an initializer nor an input of the "
                                "model";
            gradientXs.insert(x);
          }
    }
  }
  // An initializer holding an infinity or NaN (an attention mask's -inf) is
  // a constant, as PyTorch's buffer was: trained, it turns NaN at once.
  for (const auto &t : graph.initializer())
    if (trainable.count(t.name()) && holdsNonFinite(t))
      trainable.erase(t.name());
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
    // A single size binds a symbolic dimension: one some graph input has.
    // ('batch' is also --batch's, which a model with a fixed batch checks
    // against its own.)
    bool isSymbol = llvm::any_of(graph.input(), [&](const auto &in) {
      if (initializers.count(in.name()) || !in.type().has_tensor_type() ||
          !in.type().tensor_type().has_shape())
        return false;
      return llvm::any_of(in.type().tensor_type().shape().dim(), [&](const auto &d) {
        return d.has_dim_param() && d.dim_param() == entry.getKey();
      });
    });
    if (!isInput && !isSymbol && entry.getKey() != "batch") {
      std::string known;
      for (const auto &in : graph.input()) {
        if (initializers.count(in.name()))
          continue;
        known += (known.empty() ? "" : ", ") + in.name();
        if (in.type().has_tensor_type() && in.type().tensor_type().has_shape())
          for (const auto &d : in.type().tensor_type().shape().dim())
            if (d.has_dim_param())
              known += " '" + d.dim_param() + "'";
      }
      return error() << "--input-shape names '" << entry.getKey().str()
                     << "', which is neither a graph input nor a symbolic "
                        "dimension of one (inputs and their symbolic "
                        "dimensions: "
                     << (known.empty() ? "none" : known) << ")";
    }
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
    attrs.set(pipe::attrs::kInput, builder.getStringAttr(in.name()));
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
    attrs.set(pipe::attrs::kParam, builder.getStringAttr(t.name()));
    if (trainable.count(t.name()))
      attrs.set(pipe::attrs::kTrainable, builder.getUnitAttr());
    attrs.set(pipe::attrs::kInit, *attr);
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
    attrs.set(pipe::attrs::kOutput, builder.getStringAttr(out.name()));
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
  // A training-mode BatchNormalization's running statistics update its
  // state initializers (input_mean, input_var), as the graph's running means
  // would be written back by a training framework; a TrainingInfoProto
  // says itself what it updates.
  if (model.training_info_size() == 0) {
    llvm::StringMap<std::string> updatedBy;
    for (const auto &node : graph.node()) {
      if (node.op_type() != "BatchNormalization")
        continue;
      bool training = false;
      for (const auto &a : node.attribute())
        if (a.name() == "training_mode")
          training = a.i() != 0;
      if (!training)
        continue;
      for (int k = 1; k <= 2; ++k) {
        if (node.output_size() <= k || node.output(k).empty() ||
            node.input_size() <= 2 + k)
          continue;
        const std::string &state = node.input(2 + k);
        if (!stateParams.count(state))
          continue;
        auto [it, fresh] = updatedBy.try_emplace(state, node.name());
        if (!fresh)
          return error() << "BatchNormalization nodes '" << it->second
                         << "' and '" << node.name()
                         << "' both update the running statistic '" << state
                         << "'; give each its own initializer";
        results.push_back(values[node.output(k)]);
        NamedAttrList attrs;
        attrs.set(pipe::attrs::kUpdate, builder.getStringAttr(state));
        resultAttrs.push_back(attrs);
      }
    }
  }
  if (lossIndex >= 0) {
    auto t = llvm::dyn_cast<RankedTensorType>(results[lossIndex].getType());
    if (!t || t.getNumElements() != 1)
      return error() << "the loss '" << graph.output(lossIndex).name()
                     << "' is not a scalar (type " << results[lossIndex].getType()
                     << ")";
    resultAttrs[lossIndex].set(pipe::attrs::kLoss, builder.getUnitAttr());
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
    auto n = dict.getAs<StringAttr>(pipe::attrs::kInput);
    if (!n)
      n = dict.getAs<StringAttr>(pipe::attrs::kParam);
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
        ctx, {builder.getNamedAttr(pipe::attrs::kInput,
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
        pipe::attrs::kOutput, builder.getStringAttr(out.name()))};
    for (const auto &kv : info.update_binding())
      if (kv.value() == out.name())
        attrs.push_back(builder.getNamedAttr(
            pipe::attrs::kUpdateBinding, builder.getStringAttr(kv.key())));
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
  const bool staticInputs = llvm::all_of(fn.getArgumentTypes(), [](Type type) {
    auto t = dyn_cast<TensorType>(type);
    return !t || t.hasStaticShape();
  });
  WalkResult walk = fn.walk([&](Operation *op) {
    for (Value v : op->getResults()) {
      auto t = llvm::dyn_cast<TensorType>(v.getType());
      if (t && !t.hasStaticShape()) {
        if (!staticInputs) {
          op->emitError() << "output of this op has a dynamic shape " << t
                          << " after import; bind the symbolic dimensions of "
                             "the graph inputs with --input-shape";
          return WalkResult::interrupt();
        }
        // Every input is static: the shape is computed from values the
        // folders could not make constant. Name what computed them.
        Operation *from = nullptr;
        for (Value operand : op->getOperands())
          if (Operation *def = operand.getDefiningOp();
              def && !isa<onnx::ConstantOp, onnx::NoValueOp>(def)) {
            auto type = dyn_cast<RankedTensorType>(operand.getType());
            if (type && type.getElementType().isSignlessInteger() && type.getRank() <= 1) {
              from = def;
              break;
            }
          }
        auto diag = op->emitError() << "output of this op has a dynamic shape " << t
                                    << " although every graph input is static: ";
        if (from)
          diag << "its shape comes from an " << from->getName()
               << " whose values pipec cannot fold into constants";
        else
          diag << "its shape depends on values pipec cannot fold into constants";
        diag << " (re-export with do_constant_folding=True, or report the model)";
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

} // namespace mlir::pipec::onnx_import
