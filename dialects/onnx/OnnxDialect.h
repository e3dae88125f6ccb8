//===- OnnxDialect.h - the onnx dialect -------------------------*- C++ -*-===//
#ifndef PIPEC_DIALECTS_ONNX_ONNXDIALECT_H
#define PIPEC_DIALECTS_ONNX_ONNXDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/onnx/OnnxDialect.h.inc"

namespace mlir::pipec::onnx {
/// Checks that an op's declared result types agree with its shape function.
LogicalResult verifyInferredTypes(Operation *op);
} // namespace mlir::pipec::onnx

#include "dialects/onnx/OnnxInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/onnx/OnnxOps.h.inc"

namespace mlir::pipec::onnx {
/// Pad's begins and ends for every axis of a rank-`rank` input (2 * rank, in
/// ONNX order) from its constant `pads` and optional `axes`; nullopt when
/// they are not constants or do not fit.
std::optional<SmallVector<int64_t>> fullPads(PadOp op, int64_t rank);
} // namespace mlir::pipec::onnx

#endif
