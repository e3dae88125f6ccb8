//===- OnnxOps.td - ONNX operators -----------------------------*- tablegen -*-===//
#ifndef PIPEC_ONNX_OPS
#define PIPEC_ONNX_OPS

include "dialects/onnx/OnnxBase.td"
include "dialects/onnx/OnnxInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"

class ONNX_ShapedOp<string mnemonic, list<Trait> traits = []>
    : ONNX_Op<mnemonic, !listconcat(traits, [Pure,
        DeclareOpInterfaceMethods<ONNX_ShapeInferenceOpInterface>])>;

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

def ONNX_NoValueOp : ONNX_Op<"NoValue", [Pure, ConstantLike]> {
  let summary = "an absent optional input";
  let results = (outs NoneType:$none);
  let assemblyFormat = "attr-dict `:` type($none)";
  let hasFolder = 1;
}

def ONNX_ConstantOp : ONNX_ShapedOp<"Constant", [ConstantLike]> {
  let summary = "a constant tensor";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyTensor:$output);
  let assemblyFormat = "attr-dict `:` type($output)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// Numpy-broadcasting binary ops; result element type is the operands'.
class ONNX_BinaryOp<string mnemonic, list<Trait> traits = []>
    : ONNX_ShapedOp<mnemonic, traits> {
  let arguments = (ins AnyTensor:$A, AnyTensor:$B);
  let results = (outs AnyTensor:$C);
}
def ONNX_AddOp : ONNX_BinaryOp<"Add", [Commutative]>;

// Unary ops that keep shape and element type.
class ONNX_UnaryOp<string mnemonic, list<Trait> traits = []>
    : ONNX_ShapedOp<mnemonic, traits> {
  let arguments = (ins AnyTensor:$X);
  let results = (outs AnyTensor:$Y);
}
def ONNX_ReluOp : ONNX_UnaryOp<"Relu">;

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def ONNX_GemmOp : ONNX_ShapedOp<"Gemm"> {
  let summary = "Y = alpha * op(A) * op(B) + beta * C";
  let arguments = (ins AnyTensor:$A, AnyTensor:$B, ONNX_TensorOrNone:$C,
                   DefaultValuedAttr<F32Attr, "1.0">:$alpha,
                   DefaultValuedAttr<F32Attr, "1.0">:$beta,
                   DefaultValuedAttr<I64Attr, "0">:$transA,
                   DefaultValuedAttr<I64Attr, "0">:$transB);
  let results = (outs AnyTensor:$Y);
}

def ONNX_MatMulOp : ONNX_ShapedOp<"MatMul"> {
  let summary = "numpy matmul";
  let arguments = (ins AnyTensor:$A, AnyTensor:$B);
  let results = (outs AnyTensor:$Y);
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

def ONNX_ShapeOp : ONNX_ShapedOp<"Shape"> {
  let arguments = (ins AnyTensor:$data, OptionalAttr<I64Attr>:$start,
                   OptionalAttr<I64Attr>:$end);
  let results = (outs TensorOf<[I64]>:$shape);
  let hasFolder = 1;
}

def ONNX_ReshapeOp : ONNX_ShapedOp<"Reshape"> {
  let arguments = (ins AnyTensor:$data, TensorOf<[I64]>:$shape,
                   DefaultValuedAttr<I64Attr, "0">:$allowzero);
  let results = (outs AnyTensor:$reshaped);
  let hasFolder = 1;
}

#endif // PIPEC_ONNX_OPS
