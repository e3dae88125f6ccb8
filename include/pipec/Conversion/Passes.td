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

#endif // PIPEC_CONVERSION_PASSES
