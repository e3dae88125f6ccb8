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

  // The attributes passes exchange on ops, modules and function arguments
  // and results (`pipe.<name>`). Declared here so that their names come from
  // one place (PipeDialect::get<Name>AttrHelper().getNameStr()) and the
  // dialect verifies their kinds and ranges wherever they appear
  // (verifyOperationAttribute, verifyRegionArgAttribute,
  // verifyRegionResultAttribute); PipeDialect.cpp says what each means.
  let discardableAttrs = (ins
    // On ops (after partitioning) and stage functions.
    "::mlir::IntegerAttr":$stage,
    "::mlir::DictionaryAttr":$cost,
    // On a backward stage function that recomputes its forward.
    "::mlir::UnitAttr":$recompute,
    // On the onnx.Add pipe-autodiff builds to sum two gradient
    // contributions to one value (located at the forward op that read the
    // value); pipe-split-stages tells it from the VJP ops by it.
    "::mlir::UnitAttr":$grad_sum,
    // On the onnx.Identity pipe-autodiff builds where a VJP rule passes a
    // gradient on unchanged (Add, Sub's first operand, Identity) to an
    // operand an earlier stage computes: the operand's index in the
    // forward op at its location. pipe-split-stages sends it as that
    // operand's gradient from the op's stage.
    "::mlir::IntegerAttr":$grad_operand,
    // On the ops pipe-add-optimizer builds for global-norm clipping (they
    // read every stage's gradients, so pipe-microbatch's stage checks pass
    // over them); pipe-split-stages takes the first operand of the onnx.Mul
    // that scales a gradient (the unclipped gradient) and leaves the
    // clipping to pipe.clip_grad_norm.
    "::mlir::UnitAttr":$clip,
    // On a pipe.feed: it reads the whole step's batch of its input (every
    // micro-batch's rows), not micro-batch mb's.
    "::mlir::UnitAttr":$whole_step,
    // On the module / the training step.
    "::mlir::IntegerAttr":$microbatches,
    "::mlir::IntegerAttr":$batch_size,
    "::mlir::FloatAttr":$loss_scale,
    "::mlir::StringAttr":$loss_combine,
    // A mean loss with ignore_index over micro-batches: "step" (the mean
    // over the step's counted labels) or "micro-batch" (the micro-batches'
    // means averaged).
    "::mlir::StringAttr":$loss_mean,
    "::mlir::DictionaryAttr":$optimizer,
    "::mlir::ArrayAttr":$transfers,
    "::mlir::IntegerAttr":$num_stages,
    "::mlir::ArrayAttr":$stage_costs,
    "::mlir::StringAttr":$producer,
    // On a device's module (pipe-compile): the classification losses of the
    // whole model's forward, which the device's stages may not all hold
    // (pipe-lower-programs' evaluation counts an accuracy only for one).
    "::mlir::IntegerAttr":$classification_losses,
    "::mlir::IntegerAttr":$opset,
    // On programs and lowered step functions.
    "::mlir::IntegerAttr":$peak_in_flight,
    "::mlir::IntegerAttr":$device,
    "::mlir::IntegerAttr":$peak_bytes,
    "::mlir::DictionaryAttr":$program,
    // On a pipe.send or pipe.recv: it travels with the next transfer of its
    // block as one message (pipe-pack-transfers).
    "::mlir::UnitAttr":$pack_next,
    // On function arguments and results.
    "::mlir::StringAttr":$name,
    "::mlir::StringAttr":$param,
    "::mlir::StringAttr":$input,
    // A graph input whose whole step's batch the function reads, not one
    // micro-batch's (pipe-microbatch: a loss's count of labels it does not
    // ignore, over the step).
    "::mlir::StringAttr":$step_input,
    "::mlir::StringAttr":$grad,
    "::mlir::StringAttr":$state,
    "::mlir::UnitAttr":$loss,
    "::mlir::UnitAttr":$trainable,
    "::mlir::UnitAttr":$step,
    "::mlir::StringAttr":$output,
    "::mlir::IntegerAttr":$result_buffer,
    // On a result of an evaluation function (pipe-compile's one-device
    // entry, an evaluation stage): a count its entry sums over the batches
    // into this slot of its output array, after the loss (1: labels
    // predicted right, 2: labels counted).
    "::mlir::IntegerAttr":$metric,
    "::mlir::ElementsAttr":$init,
    "::mlir::Attribute":$update,
    "::mlir::ArrayAttr":$tied_stages,
    "::mlir::StringAttr":$update_binding
  );
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
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
