//===- LowerToLLVMPipeline.cpp - the "pipe-lower-to-llvm" pipeline --------===//
#include "pipec/Conversion/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mlir::pipec::buildLowerToLLVMPipeline(OpPassManager &pm) {
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

void mlir::pipec::registerConversionPassesAndPipelines() {
  registerConversionPasses();
  PassPipelineRegistration<LowerToLLVMOptions>(
      "pipe-lower-to-llvm",
      "pipe-lower-to-runtime, then func/arith/memref/cf to the LLVM dialect",
      [](OpPassManager &pm, const LowerToLLVMOptions &options) {
        LowerToRuntimeOptions lower;
        lower.target = options.target;
        pm.addPass(createLowerToRuntime(lower));
        buildLowerToLLVMPipeline(pm);
      });
  // The output of pipe-lower-device (a device's @pipe_step and its kernel
  // calls, pipe-compile --emit-mlir's device<k>-runtime.mlir) to LLVM.
  PassPipelineRegistration<>(
      "pipe-runtime-to-llvm",
      "func/arith/memref/scf/cf to the LLVM dialect (after pipe-lower-device or "
      "pipe-lower-to-runtime)",
      buildLowerToLLVMPipeline);
}
