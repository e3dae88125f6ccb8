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
// Softmax) are rewritten into the single form the dialect models.
//
// This file has the entry points, the model-level checks and the driver
// (Importer::run); the Importer (Importer.h) converts types and tensors in
// ImportTensors.cpp, parameters and graphs in ImportGraph.cpp, and nodes
// in ImportNodes.cpp.
//
//===----------------------------------------------------------------------===//
#include "pipec/Import/OnnxImporter.h"
#include "dialects/pipe/PipeAttrNames.h"

#include "Importer.h"

#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"

#include <onnx/checker.h>
#include <onnx/defs/parser.h>

using namespace mlir;

namespace mlir::pipec::onnx_import {

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

OwningOpRef<ModuleOp> Importer::run(const pb::ModelProto &model) {
  if (failed(checkOpsets(model)) || failed(runChecker(model)))
    return {};
  if (!model.has_graph()) {
    error() << "the model has no graph";
    return {};
  }
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  if (!model.producer_name().empty())
    (*module)->setAttr(pipe::attrs::kProducer,
                       builder.getStringAttr(model.producer_name()));
  (*module)->setAttr(pipe::attrs::kOpset, builder.getI64IntegerAttr(opset));
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

} // namespace mlir::pipec::onnx_import

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
    // At most 2^31 an extent: byte counts of such tensors stay far from
    // 64 bits' overflow (a batch of 2^63 wrapped plan.json's sizes).
    if (p.trim().getAsInteger(10, v) || v < 0 || v > (int64_t(1) << 31))
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
  // Decomposed by the importer into the ops above (ImportNodes.cpp).
  for (const char *decomposed : {"Einsum", "GroupNormalization", "InstanceNormalization",
                                 "PRelu", "ReduceL1", "ReduceL2", "ReduceSumSquare",
                                 "ReduceLogSum", "ReduceLogSumExp", "DepthToSpace",
                                 "SpaceToDepth", "Softsign", "Celu", "ThresholdedRelu",
                                 "Shrink", "Mish", "Sum", "Mean", "GlobalMaxPool",
                                 "LpNormalization", "OneHot",
                                 // Unrolled at import (ImportControlFlow.cpp).
                                 "Loop", "SequenceEmpty", "SequenceConstruct",
                                 "SequenceInsert", "SequenceErase", "SequenceAt",
                                 "SequenceLength",
                                 "SplitToSequence", "ConcatFromSequence"})
    names.push_back(decomposed);
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
  onnx_import::Importer importer(context, path, options);
  return importer.run(model);
}

} // namespace mlir::pipec
