//===- OnnxInterfaces.td - shape inference ----------------------*- tablegen -*-===//
#ifndef PIPEC_ONNX_INTERFACES
#define PIPEC_ONNX_INTERFACES

include "mlir/IR/OpBase.td"

def ONNX_ShapeInferenceOpInterface : OpInterface<"ShapeInferenceOpInterface"> {
  let cppNamespace = "::mlir::pipec::onnx";
  let description = [{
    The op's own shape function: the truth for result types, whatever opset a
    model came from. `inferResultTypes` computes the result types from the
    operand types, the attributes and, where ONNX takes shapes as inputs
    (Reshape, Expand, Slice, axes), the values of constant operands. Where an
    operand is unranked or a shape input is not a constant, the matching
    result is unranked. The verifier checks that the declared result types
    agree with what the function infers.
  }];
  let methods = [
    InterfaceMethod<
      "Computes the result types; emits an error on the op and fails when the "
      "operands are inconsistent.",
      "::mlir::LogicalResult", "inferResultTypes",
      (ins "::llvm::SmallVectorImpl<::mlir::Type> &":$types)>,
  ];
  let extraClassDeclaration = [{
    /// Replaces every result type by the inferred one, after checking the
    /// op's operand counts, operand types and attributes (an op built
    /// generically may break them, and the shape function assumes them).
    ::mlir::LogicalResult inferShapes();
  }];
  let verify = [{ return ::mlir::pipec::onnx::verifyInferredTypes($_op); }];
}

#endif // PIPEC_ONNX_INTERFACES
