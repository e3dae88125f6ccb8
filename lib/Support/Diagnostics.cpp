//===- Diagnostics.cpp -----------------------------------------------------===//
#include "pipec/Support/Diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

std::string mlir::pipec::describeLocation(Location loc) {
  std::string out;
  llvm::raw_string_ostream os(out);
  if (auto name = llvm::dyn_cast<NameLoc>(loc)) {
    std::string inner = describeLocation(name.getChildLoc());
    if (!inner.empty())
      os << inner << ": ";
    os << "node '" << name.getName().getValue() << "'";
  } else if (auto file = llvm::dyn_cast<FileLineColLoc>(loc)) {
    os << file.getFilename().getValue();
    if (file.getLine() > 0)
      os << ":" << file.getLine() << ":" << file.getColumn();
  } else if (auto fused = llvm::dyn_cast<FusedLoc>(loc)) {
    for (Location l : fused.getLocations()) {
      std::string inner = describeLocation(l);
      if (!inner.empty())
        return inner;
    }
  } else if (auto callsite = llvm::dyn_cast<CallSiteLoc>(loc)) {
    return describeLocation(callsite.getCallee());
  }
  return out;
}

mlir::pipec::OneLineDiagnosticHandler::OneLineDiagnosticHandler(
    MLIRContext *ctx, llvm::StringRef toolName)
    : ScopedDiagnosticHandler(ctx), tool(toolName.str()) {
  // A diagnostic is one line for a person; the IR dump MLIR attaches to
  // errors raised inside passes would bury it.
  ctx->printOpOnDiagnostic(false);
  setHandler([this](Diagnostic &diag) {
    const char *severity = "error";
    switch (diag.getSeverity()) {
    case DiagnosticSeverity::Error: ++errors; break;
    case DiagnosticSeverity::Warning: severity = "warning"; break;
    case DiagnosticSeverity::Note: severity = "note"; break;
    case DiagnosticSeverity::Remark: severity = "remark"; break;
    }
    std::string where = describeLocation(diag.getLocation());
    std::string msg = diag.str();
    for (char &c : msg)
      if (c == '\n')
        c = ' ';
    llvm::errs() << tool << ": " << severity << ": ";
    if (!where.empty())
      llvm::errs() << where << ": ";
    llvm::errs() << msg;
    for (Diagnostic &note : diag.getNotes()) {
      std::string text = note.str();
      if (StringRef(text).starts_with("see current operation"))
        continue;
      for (char &c : text)
        if (c == '\n')
          c = ' ';
      llvm::errs() << " (" << text << ")";
    }
    llvm::errs() << "\n";
    return success();
  });
}
