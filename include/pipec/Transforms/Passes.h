//===- Passes.h - pipec transformation passes -------------------*- C++ -*-===//
#ifndef PIPEC_TRANSFORMS_PASSES_H
#define PIPEC_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "dialects/onnx/OnnxDialect.h"
#include "dialects/pipe/PipeDialect.h"

namespace mlir::pipec {

#define GEN_PASS_DECL
#include "pipec/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pipec/Transforms/Passes.h.inc"

} // namespace mlir::pipec

#endif
