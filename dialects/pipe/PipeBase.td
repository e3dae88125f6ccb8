//===- PipeBase.td - the pipe dialect ---------------------------*- tablegen -*-===//
#ifndef PIPEC_PIPE_BASE
#define PIPEC_PIPE_BASE

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Pipe_Dialect : Dialect {
  let name = "pipe";
  let summary = "pipeline-parallel training: stages, transfers, schedules, weight versions";
  let description = [{
    Two levels live in this dialect.

    *Stage computations* (`pipe.stage`): function-like symbols, one per
    (stage, phase), whose bodies hold the onnx ops of that part of the
    training step. Their first `params` arguments are the stage's weights.

    *Programs* (`pipe.program`): one per device, a straight-line list of the
    instructions one training step runs on that device, in order: `feed`,
    `forward`, `backward`, `send`, `recv`, `accumulate`, `zero_grad`,
    `allreduce`, `update`, `stash`, `predict`, `average`, `report_loss`.
    Persistent state (weights, their versions, gradient accumulators,
    optimizer state) belongs to a `pipe.weight_buffer`, referred to through a
    `!pipe.weights` handle; slot 0 of a buffer is the live copy that
    `pipe.update` writes, the other slots hold stashed, predicted or centre
    copies.
  }];
  let cppNamespace = "::mlir::pipec::pipe";
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
}

// An i64 attribute read as a signed value, so that verifiers see negative
// devices, stages and indices as negative.
def Pipe_IntAttr : TypedSignlessIntegerAttrBase<I64, "int64_t",
                                                "64-bit signless integer attribute"> {
  let convertFromStorage = "$_self.getValue().getSExtValue()";
}

class Pipe_Op<string mnemonic, list<Trait> traits = []>
    : Op<Pipe_Dialect, mnemonic, traits>;

#endif // PIPEC_PIPE_BASE
