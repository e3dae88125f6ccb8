//===- VjpOpInterface.td - reverse-mode rule of an op ----------*- tablegen -*-===//
#ifndef PIPEC_AUTODIFF_VJPOPINTERFACE
#define PIPEC_AUTODIFF_VJPOPINTERFACE

include "mlir/IR/OpBase.td"

def VjpOpInterface : OpInterface<"VjpOpInterface"> {
  let cppNamespace = "::mlir::pipec::autodiff";
  let description = [{
    The vector-Jacobian product of an op: given the gradients of (some of)
    its results, builds the gradients of the operands that need one. Ops get
    it through external models (lib/Autodiff, one rule per op), so that a
    dialect does not depend on autodiff and a new op brings its own rule.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds, at the context's insertion point, the gradients of the
        operands `ctx.needsGrad(i)` asks for and records them with
        `ctx.setGrad(i, g)`; each has its operand's type. Emits an error on
        the op and fails when the op's form is not differentiable (for
        example BatchNormalization in inference mode with trained inputs).
      }],
      "::mlir::LogicalResult", "buildVjp",
      (ins "::mlir::pipec::autodiff::VjpContext &":$ctx)>,
    InterfaceMethod<[{
        Called on an op of the forward before its gradient is built: returns
        the op the rule will see, which may replace this one by an
        equivalent op with the extra results its rule needs (the saved
        statistics of LayerNormalization, Dropout's mask, the log-probability
        of SoftmaxCrossEntropyLoss). The default keeps the op.
      }],
      "::mlir::Operation *", "prepareForVjp",
      (ins "::mlir::OpBuilder &":$builder), [{}],
      [{ return $_op.getOperation(); }]>,
  ];
}

#endif // PIPEC_AUTODIFF_VJPOPINTERFACE
