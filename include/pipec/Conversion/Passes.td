//===- Passes.td - onnx → runtime calls → LLVM ------------------*- tablegen -*-===//
#ifndef PIPEC_CONVERSION_PASSES
#define PIPEC_CONVERSION_PASSES

include "mlir/Pass/PassBase.td"

def LowerToRuntime : Pass<"pipe-lower-to-runtime", "ModuleOp"> {
  let summary = "lower a train-step (or forward) function in the onnx dialect "
                "to buffers and calls into the pipert C ABI";
  let description = [{
    Rewrites the function `func-name` (tensor semantics, onnx ops, one block)
    into `func.func @pipe_step(%ctx, %inputs, %persistent, %loss, %step)`:

      void pipe_step(pipert_context *ctx, void *const *inputs,
                     void *const *persistent, float *loss, int64_t step);

    `inputs[i]` is the device buffer of the i-th argument marked `pipe.input`;
    `persistent[j]` the j-th other argument (parameters `pipe.param`,
    optimizer state `pipe.state`, counters), which live across steps. A
    result marked `pipe.loss` is copied to the host float `*loss`; a result
    that names an argument (`pipe.update = <arg index>`, or the same
    `pipe.param` / `pipe.state` name as an argument) becomes that argument's
    value for the next step, written in place where the producing kernel
    allows it, else copied at the end of the step. An argument marked
    `pipe.step` is not passed in a buffer: it reads `%step`.

    Every onnx op becomes one call to its pipert kernel with its shapes as
    constant i64 arrays (memref.global) and its attributes as scalars.
    Reshape-like ops alias their operand's buffer. Activation buffers are
    planned by liveness: a block is allocated (pipert_alloc) before the first
    value placed in it and freed (pipert_free) after the last use of the last
    one; a freed block is reused best-fit for a later value of equal or
    smaller size. Tensor constants become memref.globals.

    The step function carries `pipe.program`: the names, kinds, dtypes,
    shapes and initial values of its inputs and persistent buffers, and the
    planned peak activation bytes, for the object emitter and plan.json.
  }];
  let options = [
    Option<"profileOps", "profile-ops", "bool", "false",
           "time every op (pipe-profile): a pipert_trace_op_end event per "
           "op call, and the op table (id -> ONNX node, phase) as "
           "`pipe.op_table` on @pipe_step">,
    Option<"funcName", "func-name", "std::string", "\"\"",
           "function to lower (default: the one returning pipe.loss, else @forward)">,
    Option<"target", "target", "std::string", "\"cpu\"",
           "cpu or cuda: on cuda, tensor constants are copied to device "
           "buffers before use">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def LowerPrograms : Pass<"pipe-lower-programs", "ModuleOp"> {
  let summary = "lower one device's pipe.program (and the pipe.stage "
                "functions it calls) to that device's @pipe_step";
  let description = [{
    Rewrites the `pipe.program` of device `device` into a step function with
    the calling convention of pipe-lower-to-runtime (same ABI, same driver),
    executing the program's instructions in order:

    - `pipe.weight_buffer` (one version): the stage's parameters become
      persistent `pipe.param` buffers, initialised from the module's function
      argument with the same `pipe.param` name and its `pipe.init`;
    - `pipe.feed "x" mb k`: rows k*b .. k*b+b-1 of the input's mini-batch
      (M*b rows, filled by the driver's data feed), so only devices that feed
      an input read data;
    - `pipe.forward` / `pipe.backward`: the stage body inlined on the weights;
      a backward's weight gradients are added to the accumulator
      (`pipe.zero_grad` clears it, `pipe.accumulate` adds to it);
    - deferred weight gradients (`defer-weight-grads`, rows, default 64; 0
      off): with M > 1 micro-batches, a linear layer's weight gradient (Gemm
      transA = 1) and its bias's are computed for a group of G micro-batches
      at once (G the largest divisor of M with G x rows <= that many, at
      least 2; on a stage whose backward sends input gradients also G = 1,
      each micro-batch's after the transfers that follow its backward), one Gemm
      over the group's rows (kept in small buffers) added to the
      accumulator after the group's last backward;
    - `pipe.send` / `pipe.recv`: `pipert_send` and `pipert_recv` on the world
      communicator (rank = device), with the tag
      (fnv1a(tag) mod 2048) * 16 + mb mod 16. Blocking sends suffice for
      schedules pipe-verify-schedule accepts (it assumes rendezvous sends);
      with `nonblocking-sends`, `pipert_isend`, all waited for at the end of
      the step (the sent buffers kept until then);
    - `pipe.update`: the onnx optimizer op pipe-add-optimizer builds (SGD,
      Momentum, AdamW, Adagrad; state named `<param>.<slot>`, counter
      `step`) on the accumulated gradient times `grad_scale`;
    - `pipe.report_loss`: the step's loss is the sum of the reported
      micro-batch losses times the module's `pipe.loss_scale` (recorded by
      pipe-microbatch), else their mean; a program without one reports none.

    Stash, predict, average, allreduce, several weight versions and several
    pipelines (asynchronous methods) are rejected with an error on the op.
    Then the other programs, the stages and the other functions are erased
    and the step is lowered to buffers and pipert calls, exactly as
    pipe-lower-to-runtime does; `onnx-only` stops before that, leaving
    `func.func @train_step_device<k>` in the onnx dialect (for tests).

    With `eval`, a second entry point with the step's ABI, @pipe_eval, runs
    the evaluation pass of the same device (see LowerPrograms.cpp's header):
    built from the program's forward stage function in inference mode and
    the program's own activation transfers, over the same persistent and
    input buffers as @pipe_step (a whole-batch stage's one forward on all M
    micro-batches, straight-line). Where a program has none, the step's
    metadata says why (`eval_unavailable`).
  }];
  let options = [
    Option<"device", "device", "int64_t", "-1",
           "device whose program to lower (default: the only program)">,
    Option<"target", "target", "std::string", "\"cpu\"", "cpu or cuda">,
    Option<"nonblockingSends", "nonblocking-sends", "bool", "false",
           "pipert_isend, waited for at the end of the step">,
    Option<"onnxOnly", "onnx-only", "bool", "false",
           "stop at the onnx-level step function">,
    Option<"eval", "eval", "bool", "false",
           "also an evaluation entry @pipe_eval: the device's forward in "
           "inference mode (Dropout off, BatchNormalization on its running "
           "statistics) over the M micro-batches, GPipe order, reporting "
           "the loss; every method (AvgPipe: the centre; PipeDream and 2BW: "
           "the newest version)">,
    Option<"deferWeightGrads", "defer-weight-grads", "int64_t", "64",
           "synchronous programs with several micro-batches: a linear "
           "layer's weight and bias gradients are computed for groups of "
           "micro-batches of at most this many rows together; on a stage "
           "that sends input gradients, a micro-batch's alone after its "
           "backward's sends where no group fits (0: in the backward)">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::pipec::onnx::ONNXDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

#endif // PIPEC_CONVERSION_PASSES
