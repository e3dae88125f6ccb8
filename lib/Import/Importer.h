//===- Importer.h - the importer shared by lib/Import -----------*- C++ -*-===//
//
// The Importer class (one per imported model) and the opset limits. Its
// members are defined by section: OnnxImporter.cpp (model-level checks and
// the driver), ImportTensors.cpp (types and tensors), ImportGraph.cpp
// (parameters and graph import), ImportNodes.cpp (nodes). Private to
// lib/Import.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_LIB_IMPORT_IMPORTER_H
#define PIPEC_LIB_IMPORT_IMPORTER_H

#include "pipec/Import/OnnxImporter.h"

#include "dialects/onnx/OnnxDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringSet.h"

#include <onnx/onnx_pb.h>

#include <set>

namespace pb = ::onnx;
namespace ox = mlir::pipec::onnx;

namespace mlir::pipec::onnx_import {

constexpr int64_t kMinOpset = 1;
/// Below this opset only operators whose semantics have not changed since
/// opset 1 (besides attributes the importer rejects) are imported.
constexpr int64_t kMinOpsetAllOps = 6;
constexpr int64_t kMaxOpset = 21;
constexpr int64_t kLibOnnxMaxOpset = 17; // what libonnx 1.12's checker knows
constexpr const char *kTrainingDomain = "ai.onnx.preview.training";

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
  /// The values of `node`'s inputs, in order; an empty name is an absent
  /// optional input (onnx.NoValue) where `allowAbsent`, else an error, as is
  /// a name no earlier node or graph input defines.
  FailureOr<SmallVector<Value>> nodeInputs(const pb::NodeProto &node,
                                           Location loc, bool allowAbsent);

  // Types and tensors -------------------------------------------------------
  FailureOr<Type> elementType(int32_t onnxType, Location loc);
  FailureOr<RankedTensorType> valueType(const pb::ValueInfoProto &info,
                                        Location loc);
  /// `splatUniform`: a tensor whose elements are all equal becomes a splat
  /// (a Constant node's full-size fill: the micro-batcher rebuilds splats
  /// at the micro-batch's shape).
  FailureOr<ElementsAttr> tensorAttr(const pb::TensorProto &t, Location loc,
                                     bool allowResource, bool splatUniform = false);
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
  /// createOp of a one-result op, typed and folded: its result.
  FailureOr<Value> createOne(StringRef opType, ArrayRef<Value> operands,
                             ArrayRef<NamedAttribute> attrs, Location loc) {
    auto r = typeAndFold(createOp(opType, operands, attrs, 1, loc));
    if (failed(r))
      return failure();
    return (*r)[0];
  }
  FailureOr<Value> coercedSoftmax(StringRef opType, Value input, int64_t axis,
                                  Location loc);
  /// InstanceNormalization and GroupNormalization, decomposed into
  /// Reshape + LayerNormalization (over each group's elements) + the
  /// per-channel (or, GroupNormalization-18, per-group) affine.
  LogicalResult importGroupNorm(const pb::NodeProto &node, StringRef opType,
                                Location loc);

  /// Einsum of one or two operands, decomposed into Mul (an identity mask,
  /// for a repeated subscript), ReduceSum, Transpose, Reshape and one
  /// (batched) MatMul.
  LogicalResult importEinsum(const pb::NodeProto &node, Location loc);
  /// Loop and the sequence operators, unrolled at import into tensor ops
  /// (ImportControlFlow.cpp).
  static bool isControlFlowOp(StringRef opType);
  LogicalResult importControlFlow(const pb::NodeProto &node, StringRef opType,
                                  Location loc);
  FailureOr<SmallVector<Value>> sequenceInput(const pb::NodeProto &node, int index,
                                              Location loc);
  /// Input `index` of `node`: its value, a null value where absent.
  FailureOr<Value> tensorInput(const pb::NodeProto &node, int index, Location loc);
  FailureOr<int64_t> constantIndex(Value v, StringRef what, Location loc);

  /// PRelu, ReduceL1, ReduceL2 and ReduceSumSquare in ops the dialect has
  /// (and differentiates).
  FailureOr<SmallVector<Value>> compositeInputs(const pb::NodeProto &node,
                                                StringRef opType, Location loc);
  LogicalResult importActivationLike(const pb::NodeProto &node,
                                     StringRef opType, Location loc);
  LogicalResult importOneHot(const pb::NodeProto &node, Location loc);
  LogicalResult importComposite(const pb::NodeProto &node, StringRef opType,
                                Location loc);

  MLIRContext *ctx;
  OpBuilder builder;
  std::string path;
  const pipec::ImportOptions &opts;
  Location fileLoc;
  int64_t opset = 0, trainingOpset = 0;

  llvm::StringMap<Value> values;
  /// Prefixed to node labels (locations): an unrolled Loop's iteration, so
  /// that each copy of its body has locations of its own.
  std::string labelScope;
  /// Iterations unrolled so far, over all Loops (ImportControlFlow.cpp).
  int64_t unrolledIterations = 0;
  /// ONNX sequences, while importing: the tensors they hold, in order.
  llvm::StringMap<SmallVector<Value>> sequences;
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

} // namespace mlir::pipec::onnx_import

#endif
