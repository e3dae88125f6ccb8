//===- VjpOpInterface.h - reverse-mode rules of ops -------------*- C++ -*-===//
#ifndef PIPEC_AUTODIFF_VJPOPINTERFACE_H
#define PIPEC_AUTODIFF_VJPOPINTERFACE_H

#include "pipec/Autodiff/OnnxBuilder.h"

#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/ArrayRef.h"

namespace mlir::pipec::autodiff {

/// What a VJP rule sees: the gradients flowing into the op's results, which
/// operand gradients are wanted, and a builder positioned in the backward
/// part of the function. A rule builds only the wanted gradients.
class VjpContext : public OnnxBuilder {
public:
  VjpContext(OpBuilder &builder, Operation *op, ArrayRef<Value> resultGrads,
             ArrayRef<bool> wanted)
      : OnnxBuilder(builder, op->getLoc()), op(op),
        resultGrads(resultGrads.begin(), resultGrads.end()),
        wanted(wanted.begin(), wanted.end()),
        operandGrads(op->getNumOperands()) {}

  Operation *getOp() const { return op; }
  /// The gradient of result `i`, null when none flows into it (the result
  /// does not reach the loss).
  Value resultGrad(unsigned i) const {
    return i < resultGrads.size() ? resultGrads[i] : Value();
  }
  /// The gradient of result `i`, zeros when none flows into it.
  Value resultGradOrZeros(unsigned i);
  /// Whether the gradient of operand `i` is wanted.
  bool needsGrad(unsigned i) const { return wanted[i]; }
  /// Records the gradient of operand `i` (of the operand's type).
  void setGrad(unsigned i, Value grad) { operandGrads[i] = grad; }
  ArrayRef<Value> getOperandGrads() const { return operandGrads; }

private:
  Operation *op;
  SmallVector<Value> resultGrads;
  SmallVector<bool> wanted;
  SmallVector<Value> operandGrads;
};

} // namespace mlir::pipec::autodiff

#include "pipec/Autodiff/VjpOpInterface.h.inc"

#endif
