//===- pipe-dialect-fuzzer.cpp - libFuzzer target for pipe IR parsing ------===//
//
// Feeds arbitrary text to the MLIR parser with pipec's dialects (pipe, onnx)
// registered, as pipe-opt reads a file: every input must end in a module
// that verifies, printed and parsed back to the same text, or in one
// reported error, never a crash, hang or sanitizer report. The seeds are the
// dialect's lit tests (test/Dialect), whose custom syntax (micro-batch
// indices, weight versions, loops) the mutations start from.
//
//===----------------------------------------------------------------------===//
#include "../fuzz-common/FuzzContext.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pipec_fuzz::FuzzContext fuzz;
  mlir::MLIRContext &context = fuzz.context;
  unsigned &errors = fuzz.errors;
  std::string text(reinterpret_cast<const char *>(data), size);
  mlir::ParserConfig config(&context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, config, "fuzz.mlir");
  // A failed parse must say why; a parsed module verified already (the
  // parser verifies), and what it prints must read back the same.
  if (!module) {
    if (errors == 0)
      std::abort();
    return 0;
  }
  std::string printed;
  llvm::raw_string_ostream os(printed);
  module->print(os);
  mlir::OwningOpRef<mlir::ModuleOp> again =
      mlir::parseSourceString<mlir::ModuleOp>(printed, config, "printed.mlir");
  if (!again || mlir::failed(mlir::verify(*again)))
    std::abort();
  std::string reprinted;
  llvm::raw_string_ostream os2(reprinted);
  again->print(os2);
  if (reprinted != printed)
    std::abort();
  return 0;
}
