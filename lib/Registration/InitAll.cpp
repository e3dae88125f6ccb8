//===- InitAll.cpp ---------------------------------------------------------===//
#include "pipec/InitAll.h"

#include "dialects/onnx/OnnxDialect.h"
#include "dialects/pipe/PipeDialect.h"
#include "pipec/Autodiff/Autodiff.h"
#include "pipec/Transforms/Passes.h"
#include "pipec/Conversion/Passes.h"
#include "pipec/Pipelines/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

void mlir::pipec::registerAllDialects(DialectRegistry &registry) {
  registry.insert<onnx::ONNXDialect, pipe::PipeDialect, func::FuncDialect>();
  // What the lowering writes (pipe-lower-device's runtime calls, then
  // LLVM), so that pipe-opt reads back every stage pipe-compile --emit-mlir
  // dumps.
  registry.insert<arith::ArithDialect, cf::ControlFlowDialect, LLVM::LLVMDialect,
                  memref::MemRefDialect, scf::SCFDialect>();
  autodiff::registerVjpRules(registry);
}

void mlir::pipec::registerAllPasses() {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  registerPipecTransformsPasses();
  mlir::pipec::registerConversionPassesAndPipelines();
  registerPipelines();
}
