//===- StepBufferPlan.h - buffer planning of the step lowering --*- C++ -*-===//
//
// Private to lib/Conversion. What the step lowering of pipe-lower-to-runtime
// knows about where a value's bytes live: the Placement of a value, the
// BlockInfo of a planned block (its size and the ops it lives between), and
// the per-op tables the planner consults (aliases, in-place updates,
// nullable results). The planning itself (StepLowering::classifyArguments,
// classifyResults, computeConstants, planBuffers, rootOf) is in
// StepBufferPlan.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_LIB_CONVERSION_STEPBUFFERPLAN_H
#define PIPEC_LIB_CONVERSION_STEPBUFFERPLAN_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

namespace mlir::pipec::steplowering {

constexpr int64_t kBlockAlign = 64;

inline int64_t roundUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

inline RankedTensorType tensorType(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}

/// Ops whose result is their first operand's bytes under another shape (or,
/// for a transpose of the last two axes read only by MatMuls, its operand's
/// bytes that the MatMuls read transposed).
bool isAliasOp(Operation *op);

/// A Split whose parts are contiguous in its operand (every axis before the
/// split axis has extent 1): each result an alias of it at an offset.
bool isContiguousSplit(Operation *op);

/// A Transpose of the last two axes of an f32 tensor whose every user is a
/// MatMul: it emits no kernel, the MatMuls read its operand transposed.
bool isTransposeIntoMatMul(Operation *op);

/// Kernels that allow an output to be written over an input of its shape.
bool allowsInPlace(Operation *op);

/// The operands whose block the op's first result may take over when they
/// die at the op (StepLowering::planBuffers): elementwise kernels' and
/// LayerNormalizationGrad's dy.
SmallVector<unsigned> inPlaceOperands(Operation *op);

/// Results a kernel may skip (its nullable outputs): unused ones get no
/// buffer.
bool isNullableResult(Operation *op, unsigned i);

/// Results whose kernel can add them into their buffer's values (its
/// `accumulate` flag).
bool kernelAccumulates(OpResult r);

/// Where a value's bytes live.
struct Placement {
  enum Kind { None, Constant, Input, Persistent, Step, Block, Alias, Output };
  Kind kind = None;
  int64_t index = -1; // input/persistent/output index, or block id
  int64_t offset = 0; // Alias: bytes after aliasOf's start (a Split's part)
  Value aliasOf;      // for Alias
};

struct BlockInfo {
  int64_t bytes = 0;
  int64_t allocBefore = -1; // op index before which it is allocated
  int64_t freeAfter = -1;   // op index after which it is freed
};

} // namespace mlir::pipec::steplowering

#endif // PIPEC_LIB_CONVERSION_STEPBUFFERPLAN_H
