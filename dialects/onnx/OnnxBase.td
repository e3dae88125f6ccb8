//===- OnnxBase.td - the onnx dialect ---------------------------*- tablegen -*-===//
#ifndef PIPEC_ONNX_BASE
#define PIPEC_ONNX_BASE

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def ONNX_Dialect : Dialect {
  let name = "onnx";
  let summary = "ONNX operators (ai.onnx, ai.onnx.preview.training) as MLIR ops";
  let description = [{
    One op per ONNX operator, named exactly like its `op_type`. Operands are the
    ONNX inputs in order; an absent optional input is a value of type `none`
    (made by `onnx.NoValue`). ONNX attributes keep their ONNX names: int as
    `i64`, float as `f32`, string as `StrAttr`, ints as `array<i64>`, floats as
    `array<f32>`, tensor as an elements attribute. Where ONNX moved an
    attribute into an input in a later opset (axes, split), the op has the
    input form only; the importer converts the older form.
  }];
  let cppNamespace = "::mlir::pipec::onnx";
  let hasConstantMaterializer = 1;
  let usePropertiesForAttributes = 0;
}

class ONNX_Op<string mnemonic, list<Trait> traits = []>
    : Op<ONNX_Dialect, mnemonic, traits> {
  let assemblyFormat =
    "`(` operands `)` attr-dict `:` functional-type(operands, results)";
}

def ONNX_TensorOrNone : AnyTypeOf<[AnyTensor, NoneType], "tensor or none">;
def ONNX_FloatTensor : TensorOf<[F16, BF16, F32, F64]>;

#endif // PIPEC_ONNX_BASE
