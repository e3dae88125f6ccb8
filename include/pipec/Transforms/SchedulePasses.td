//===- SchedulePasses.td - pipeline scheduling passes ----------*- tablegen -*-===//
#ifndef PIPEC_TRANSFORMS_SCHEDULEPASSES
#define PIPEC_TRANSFORMS_SCHEDULEPASSES

include "mlir/Pass/PassBase.td"

def PipeSchedule : Pass<"pipe-schedule", "::mlir::ModuleOp"> {
  let summary = "builds one pipe.program per device from the stages: GPipe or 1F1B";
  let description = [{
    Input: a module with one `forward` and one `backward` `pipe.stage` for
    each stage 0 .. p-1 and no `pipe.program`. Output: the same module plus
    `pipe.program @device<s> device s stages [s] schedule "<kind>"
    microbatches M attributes {pipe.peak_in_flight = N}` for every stage s,
    the straight-line instructions of one synchronous training step:

      %w = pipe.weight_buffer stage s versions 1 (...)   (stages with weights)
      pipe.zero_grad %w
      ... per micro-batch, in the schedule's order:
        pipe.recv (activations from s-1) / pipe.feed (graph inputs)
        pipe.forward, pipe.report_loss (results marked pipe.loss)
        pipe.send (activations to s+1)
        pipe.recv (their gradients from s+1), pipe.backward,
        pipe.send (gradients of the received activations, to s-1)
      pipe.update %w <optimizer>

    GPipe runs all forwards, then all backwards; 1F1B runs min(p-s-1, M)
    warm-up forwards on stage s, then one forward and one backward in turn,
    then the remaining backwards. Every device runs its sends and receives in
    one global order of transfers, so the programs are deadlock-free even when
    sends block until received. `pipe.peak_in_flight` is the most
    micro-batches whose forward ran and whose backward has not.

    With `loop=true` (the default), each device's instruction list is rolled
    into loops: wherever a run of instructions repeats with every micro-batch
    index one higher, it becomes `pipe.loop %k = lo to hi { ... }` whose
    instructions name `mb %k + c`. GPipe's forwards and backwards and 1F1B's
    warm-up, steady state and drain each become one loop, so a program has as
    many instructions for M = 256 as for M = 8. A value produced in one loop
    iteration (or outside a loop) and used in another, such as the
    activations a backward needs from its forward, is kept with `pipe.save`
    in a `pipe.activation_buffer` whose depth is the most micro-batches it
    holds at once, and read back with `pipe.restore`; within one iteration or
    one straight-line part, values flow as SSA. Fed inputs are read again
    with `pipe.feed` where the backward needs them.

    How the stages' values connect is read from argument and result
    attributes of the stage functions:
      - forward weight arguments (the first `params`):
        `pipe.param = "<onnx initializer>"`, the weight buffer's names;
      - forward arguments: `pipe.input = "<graph input>"` (read with
        pipe.feed on that stage) or `pipe.name = "<tag>"` (the forward result
        of stage s-1 with that name, sent with that tag);
      - forward results: `pipe.name = "<tag>"` (sent to stage s+1 when its
        forward takes it, else kept for the backward), `pipe.loss`;
      - backward arguments: `pipe.name` / `pipe.input` (the forward value of
        the same stage and micro-batch with that name), or
        `pipe.grad = "<tag>"` (the gradient of the forward result <tag>,
        received from stage s+1 with tag "<tag>.grad");
      - backward results before the weight gradients: `pipe.grad = "<tag>"`,
        the gradient of the forward argument <tag>, sent to stage s-1.

    The optimizer: the pass options when `optimizer` is given; else a
    `pipe.optimizer` dictionary on the stage's forward, else on the module:
    `{kind = "adam", lr = 1.0e-3, beta1 = ..., beta2 = ..., epsilon = ...,
    momentum = ..., dampening = ..., weight_decay = ..., grad_scale = ...}`.
    Adam(W) and Adagrad get PyTorch's defaults for betas and epsilon.
  }];
  let options = [
    Option<"kind", "kind", "std::string", "\"1f1b\"", "gpipe or 1f1b">,
    Option<"microbatches", "microbatches", "int64_t", "0",
           "micro-batches per step; default: the module's pipe.microbatches "
           "(set by pipe-microbatch)">,
    Option<"loop", "loop", "bool", "true",
           "roll the repeating parts of each program into pipe.loop over the "
           "micro-batch index (false: one instruction per micro-batch)">,
    Option<"optimizer", "optimizer", "std::string", "\"\"",
           "sgd, momentum, nesterov, adam, adamw or adagrad; overrides "
           "pipe.optimizer attributes">,
    Option<"lr", "lr", "double", "-1.0", "learning rate (with optimizer)">,
    Option<"momentum", "momentum", "double", "-1.0",
           "momentum (momentum, nesterov)">,
    Option<"dampening", "dampening", "double", "-1.0", "dampening (momentum)">,
    Option<"beta1", "beta1", "double", "-1.0", "Adam(W) beta1, default 0.9">,
    Option<"beta2", "beta2", "double", "-1.0", "Adam(W) beta2, default 0.999">,
    Option<"epsilon", "epsilon", "double", "-1.0",
           "epsilon, default 1e-8 (Adam(W)), 1e-10 (Adagrad)">,
    Option<"weightDecay", "weight-decay", "double", "-1.0", "weight decay">,
    Option<"gradScale", "grad-scale", "double", "-1.0",
           "factor on the accumulated gradient">,
  ];
  let dependentDialects = ["::mlir::pipec::pipe::PipeDialect"];
}

def PipeVerifySchedule : Pass<"pipe-verify-schedule", "::mlir::ModuleOp"> {
  let summary = "proves the pipe.program ops of a module run together";
  let description = [{
    Simulates every `pipe.program` of the module together and fails when:
      - the programs deadlock: the error is on one waiting instruction, a
        note on the instruction (or the end of the program) of the device it
        waits for. By default a send blocks until its peer receives it
        (rendezvous); with `buffered-sends` a send returns at once and only
        receives wait;
      - a send and the recv it matches (same peers, mb and tag) transfer
        different types; a send is never received; a transfer names a device
        without a program;
      - on some device a micro-batch's forward or backward of a stage it
        holds is missing, runs twice, or the backward precedes the forward;
      - `pipe.peak_in_flight`, where present, is not the simulated peak.
  }];
  let options = [
    Option<"bufferedSends", "buffered-sends", "bool", "false",
           "sends return at once instead of waiting for the recv">,
  ];
}

def PipePrintSchedule : Pass<"pipe-print-schedule", "::mlir::ModuleOp"> {
  let summary = "prints the pipe.program ops of a module as a time table";
  let description = [{
    Simulates the programs (as pipe-verify-schedule does) and prints to
    stdout one row per device, one column per time slot: `F<mb>` forward,
    `B<mb>` backward (or its input part), `W<mb>` weight backward, `.` idle;
    then the bubble (idle slots over all slots) next to GPipe's and 1F1B's
    (p-1)/(M+p-1), and the peak in-flight micro-batches per device. The IR is
    unchanged.
  }];
  let options = [
    Option<"forwardCost", "forward-cost", "int64_t", "1",
           "slots a forward takes">,
    Option<"backwardCost", "backward-cost", "int64_t", "1",
           "slots a backward takes (full or input part)">,
    Option<"weightCost", "weight-cost", "int64_t", "1",
           "slots a weight backward takes">,
    Option<"bufferedSends", "buffered-sends", "bool", "false",
           "sends return at once instead of waiting for the recv">,
  ];
}

#endif // PIPEC_TRANSFORMS_SCHEDULEPASSES
