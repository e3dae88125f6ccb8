//===- Diagnostics.h - one-line errors for the command-line tools -*- C++ -*-===//
#ifndef PIPEC_SUPPORT_DIAGNOSTICS_H
#define PIPEC_SUPPORT_DIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::pipec {

/// Prints every diagnostic as a single line on stderr:
///   <tool>: error: <file>: node '<name>': <message>
/// instead of MLIR's multi-line source excerpts, since ONNX inputs have no
/// source lines. Notes are appended to their diagnostic's line.
class OneLineDiagnosticHandler : public ScopedDiagnosticHandler {
public:
  OneLineDiagnosticHandler(MLIRContext *ctx, llvm::StringRef tool);
  /// Number of errors reported so far.
  unsigned errorCount() const { return errors; }

private:
  std::string tool;
  unsigned errors = 0;
};

/// Renders a location the way the tools print it: "<file>: node '<name>'",
/// "<file>:<line>:<col>", or "" when unknown.
std::string describeLocation(Location loc);

} // namespace mlir::pipec

#endif
