//===- PipeBase.td - the pipe dialect ---------------------------*- tablegen -*-===//
#ifndef PIPEC_PIPE_BASE
#define PIPEC_PIPE_BASE

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Pipe_Dialect : Dialect {
  let name = "pipe";
  let summary = "pipeline-parallel training: stages, transfers, schedules, weight versions";
  let cppNamespace = "::mlir::pipec::pipe";
}

class Pipe_Op<string mnemonic, list<Trait> traits = []>
    : Op<Pipe_Dialect, mnemonic, traits>;

#endif // PIPEC_PIPE_BASE
