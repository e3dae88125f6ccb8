//===- PipecPlugin.cpp - pipec's dialects and passes for stock mlir-opt ---===//
//
//   mlir-opt-22 --load-dialect-plugin=libPipecPlugin.so \
//               --load-pass-plugin=libPipecPlugin.so --pipe-assign-stages ...
//
// Debian's mlir-opt links the same libMLIR.so as pipec, so the plugin adds
// pipec's dialects (onnx, pipe) and every pass and pass pipeline pipe-opt has.
//
//===----------------------------------------------------------------------===//
#include "pipec/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"

extern "C" LLVM_ATTRIBUTE_WEAK mlir::DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "Pipec", LLVM_VERSION_STRING,
          [](mlir::DialectRegistry *registry) {
            mlir::pipec::registerAllDialects(*registry);
          }};
}

extern "C" LLVM_ATTRIBUTE_WEAK mlir::PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "PipecPasses", LLVM_VERSION_STRING,
          []() { mlir::pipec::registerAllPasses(); }};
}
