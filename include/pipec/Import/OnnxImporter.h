//===- OnnxImporter.h - ONNX protobuf → onnx dialect -----------*- C++ -*-===//
#ifndef PIPEC_IMPORT_ONNXIMPORTER_H
#define PIPEC_IMPORT_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace mlir::pipec {

struct ImportOptions {
  /// Bindings from `--input-shape`: either a graph input name to its full
  /// shape ("x" → {32, 784}) or a symbolic dimension name to its value
  /// ("batch" → {32}).
  llvm::StringMap<std::vector<int64_t>> inputShapes;
  /// Name of the graph output that is the training loss; empty: detect it.
  std::string lossName;
  /// Initializers to keep frozen (no gradient), by ONNX name.
  std::vector<std::string> frozen;
  /// Initializers with at least this many bytes become dense_resource blobs.
  int64_t resourceThresholdBytes = 256;
};

/// Parses an `ImportOptions::inputShapes` entry "name=32x784" (also
/// "name=32,784"); returns false on a malformed entry.
bool parseInputShapeBinding(llvm::StringRef text, std::string &name,
                            std::vector<int64_t> &shape);

/// Imports an ONNX model (binary ModelProto, or the ONNX text format when
/// `path` ends in .onnxtext) held in `buffer`. `path` names the file in
/// errors and locates external-data files. Errors are emitted as MLIR
/// diagnostics on `context` (one line each); returns null on failure.
OwningOpRef<ModuleOp> importOnnxModel(MLIRContext *context,
                                      llvm::StringRef buffer,
                                      llvm::StringRef path,
                                      const ImportOptions &options);

/// Names of the ONNX operators the importer supports (sorted).
std::vector<std::string> supportedOnnxOperators(MLIRContext *context);

} // namespace mlir::pipec

#endif
