//===- InitAll.cpp ---------------------------------------------------------===//
#include "pipec/InitAll.h"

#include "dialects/onnx/OnnxDialect.h"
#include "dialects/pipe/PipeDialect.h"
#include "pipec/Autodiff/Autodiff.h"
#include "pipec/Transforms/Passes.h"
#include "pipec/Conversion/Passes.h"
#include "pipec/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

void mlir::pipec::registerAllDialects(DialectRegistry &registry) {
  registry.insert<onnx::ONNXDialect, pipe::PipeDialect, func::FuncDialect>();
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
