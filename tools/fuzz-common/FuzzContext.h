//===- FuzzContext.h - what pipec's libFuzzer targets share ------*- C++ -*-===//
#ifndef PIPEC_TOOLS_FUZZCONTEXT_H
#define PIPEC_TOOLS_FUZZCONTEXT_H

#include "pipec/InitAll.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

namespace pipec_fuzz {

/// A fresh single-threaded context with pipec's dialects for one input, and
/// the count of errors it reported (a failed input must say why).
struct FuzzContext {
  mlir::MLIRContext context{registry(), mlir::MLIRContext::Threading::DISABLED};
  unsigned errors = 0;
  mlir::ScopedDiagnosticHandler handler{&context, [this](mlir::Diagnostic &d) {
                                          if (d.getSeverity() ==
                                              mlir::DiagnosticSeverity::Error)
                                            ++errors;
                                          return mlir::success();
                                        }};

  static const mlir::DialectRegistry &registry() {
    static mlir::DialectRegistry *r = [] {
      auto *registry = new mlir::DialectRegistry();
      mlir::pipec::registerAllDialects(*registry);
      return registry;
    }();
    return *r;
  }
};

} // namespace pipec_fuzz

#endif
