//===- PipeOps.td - pipe dialect ops ---------------------------*- tablegen -*-===//
#ifndef PIPEC_PIPE_OPS
#define PIPEC_PIPE_OPS

include "dialects/pipe/PipeBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Pipe_SendOp : Pipe_Op<"send"> {
  let summary = "sends a tensor to the device `peer`";
  let arguments = (ins AnyTensor:$value, I64Attr:$peer, I64Attr:$mb,
                   StrAttr:$tag);
  let assemblyFormat = "$value `to` $peer attr-dict `:` type($value)";
}

#endif // PIPEC_PIPE_OPS
