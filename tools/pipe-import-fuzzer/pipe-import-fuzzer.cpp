//===- pipe-import-fuzzer.cpp - libFuzzer target for the ONNX importer ----===//
//
// Feeds arbitrary bytes to the importer as a binary .onnx (and, when the
// first byte is '<', as .onnxtext). Every input must end in either a module
// that verifies or one reported error, never a crash, hang or sanitizer
// report.
//
//===----------------------------------------------------------------------===//
#include "pipec/Import/OnnxImporter.h"
#include "../fuzz-common/FuzzContext.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pipec_fuzz::FuzzContext fuzz;
  mlir::MLIRContext &context = fuzz.context;
  unsigned &errors = fuzz.errors;
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  bool text = size > 0 && data[0] == '<';
  mlir::pipec::ImportOptions options;
  options.inputShapes["batch"] = {2};
  auto module = mlir::pipec::importOnnxModel(
      &context, bytes, text ? "fuzz.onnxtext" : "fuzz.onnx", options);
  // A failed import must say why; a successful one must verify.
  if (!module && errors == 0)
    std::abort();
  if (module && mlir::failed(mlir::verify(*module)))
    std::abort();
  return 0;
}
