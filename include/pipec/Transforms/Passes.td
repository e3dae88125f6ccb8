//===- Passes.td - pipec transformation passes -----------------*- tablegen -*-===//
#ifndef PIPEC_TRANSFORMS_PASSES
#define PIPEC_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def PipeAutodiff : Pass<"pipe-autodiff", "::mlir::ModuleOp"> {
  let summary = "builds the training step: loss and gradients of the trainable parameters";
  let description = [{
    Differentiates `func.func @<func-name>` (the imported forward, see the IR
    contract in docs) in reverse mode and adds `func.func @<train-step>`:
    the same arguments and argument attributes, and the results

      (loss {pipe.loss, ...the forward's loss attributes},
       grad_0 {pipe.grad = "<pipe.param of trainable arg 0>"}, ...)

    one gradient per `pipe.trainable` argument, in argument order, each of
    its parameter's type (zeros where the loss does not depend on it). The
    forward's other outputs are dropped; @forward itself is kept. Gradients
    are built from each op's VjpOpInterface rule; values used several times
    get their gradients summed; only values between a trainable parameter
    and the loss get one.

    Every `onnx.Gradient` in the module (an imported TrainingInfoProto's
    algorithm) is expanded in place: @forward's body is inlined before it
    (arguments matched by their pipe.input / pipe.param names), `y` is the
    forward output of that name, and its results become the gradients.
  }];
  let options = [
    Option<"funcName", "func-name", "std::string", "\"forward\"",
           "the function to differentiate">,
    Option<"trainStepName", "train-step", "std::string", "\"train_step\"",
           "the name of the function to build">,
  ];
  let dependentDialects = ["::mlir::pipec::onnx::ONNXDialect",
                           "::mlir::func::FuncDialect"];
}

def PipeAddOptimizer : Pass<"pipe-add-optimizer", "::mlir::ModuleOp"> {
  let summary = "turns the training step into one that also updates the parameters";
  let description = [{
    Rewrites `@<func-name>` (as built by --pipe-autodiff) so that it applies
    one optimizer step with PyTorch's semantics (torch.optim.SGD with
    momentum / dampening / nesterov / weight_decay, Adam, AdamW, Adagrad).
    Arguments: the old ones, then per trainable parameter its state slots
    `tensor {pipe.state = "<param>.<slot>", pipe.init = zeros}` (slots named
    like PyTorch's optimizer state: momentum_buffer; exp_avg, exp_avg_sq;
    sum), then `tensor<i64> {pipe.state = "step", pipe.init = 0}`, the number
    of updates done so far. Results:

      (loss {pipe.loss}, new params {pipe.update = "<param>"}...,
       new state {pipe.update = "<param>.<slot>"}..., step + 1
       {pipe.update = "step"})

    so every `pipe.update = N` result replaces the argument whose pipe.param
    or pipe.state is N. The learning rate is an onnx.Constant feeding the
    update ops. Without `kind`, the optimizer of an imported
    `@training_algorithm` (onnx.Momentum / Adam / Adagrad, with its
    attributes) is used. Negative numeric options mean PyTorch's default
    for the kind.
  }];
  let options = [
    Option<"funcName", "func-name", "std::string", "\"train_step\"",
           "the training step to extend">,
    Option<"kind", "kind", "std::string", "\"\"",
           "sgd, momentum, nesterov, adam, adamw or adagrad">,
    Option<"lr", "lr", "double", "-1.0", "learning rate">,
    Option<"momentum", "momentum", "double", "-1.0",
           "SGD momentum (sgd with momentum > 0 is momentum)">,
    Option<"dampening", "dampening", "double", "0.0", "SGD dampening">,
    Option<"weightDecay", "weight-decay", "double", "-1.0",
           "L2 penalty (decoupled for adamw, default 0.01 there, else 0)">,
    Option<"beta1", "beta1", "double", "0.9", "Adam(W) beta1">,
    Option<"beta2", "beta2", "double", "0.999", "Adam(W) beta2">,
    Option<"eps", "eps", "double", "-1.0",
           "epsilon (Adam(W) 1e-8, Adagrad 1e-10)">,
    Option<"lrDecay", "lr-decay", "double", "0.0", "Adagrad lr_decay">,
  ];
  let dependentDialects = ["::mlir::pipec::onnx::ONNXDialect",
                           "::mlir::func::FuncDialect"];
}

def PipeMicrobatch : Pass<"pipe-microbatch", "::mlir::ModuleOp"> {
  let summary = "rewrites the training step to compute one of M micro-batches";
  let description = [{
    Rewrites `@<func-name>` (a training step from --pipe-autodiff, with or
    without --pipe-add-optimizer, with or without stages) so that it
    computes one micro-batch of B/M samples, B the size of axis 0 of the
    `pipe.input` arguments. Every value gets a batch state from the inputs
    through each op's semantics: batch-independent, batched on one axis, a
    sum over the batch (weight gradients), a mean over the batch (a
    mean-reduced loss), or a function of such a sum computed once per step
    (the optimizer update). The shape operands naming a batched dimension
    (Reshape, Expand, ReduceToShape, GatherGrad, AveragePoolGrad,
    GlobalAveragePoolGrad, SliceGrad, NegativeLogLikelihoodLossGrad) are
    divided by M, `pipe.input` arguments retyped, every op re-inferred.

    Exactness: the step's loss is the sum over the micro-batches of
    `pipe.loss_scale` x each micro-batch's loss (`pipe.loss_combine =
    "mean"`, scale 1/M, for a mean over the batch; `"sum"`, scale 1, for a
    sum); every gradient of the step is the plain sum of the micro-batches'
    gradients (accumulate, no grad_scale). For that every batch mean is
    normalized by the full batch B in the backward: the VJP of ReduceMean
    over the batch multiplies by 1/count of the full batch (a constant kept
    as it is), and the incoming gradient of a mean-reduced loss op's
    gradient op (which divides by its micro-batch's size) is multiplied by
    1/M (an onnx.Mul inserted before it). Results with `pipe.update` are
    computed once per step from the accumulated gradients. Attributes set
    on the function: `pipe.microbatches = M`, `pipe.batch_size = B`,
    `pipe.loss_combine`, `pipe.loss_scale` (f64).

    A mean-reduced loss op with `ignore_index` (PyTorch always exports
    one) averages over the labels not ignored: the result is exact when
    every micro-batch has equally many of them, in particular when no label
    equals ignore_index; class weights are an error.

    Errors (on the op): an op that mixes samples other than a loss reduction
    or a gradient sum (batch normalization, a softmax/slice/concat over the
    batch, a reduction over the batch used non-linearly in the forward), an
    op without a rule, B not divisible by M.
  }];
  let options = [
    Option<"funcName", "func-name", "std::string", "\"train_step\"",
           "the training step to micro-batch">,
    Option<"microbatches", "microbatches", "int64_t", "1",
           "M, the number of micro-batches per step (divides B)">,
  ];
  let dependentDialects = ["::mlir::pipec::onnx::ONNXDialect",
                           "::mlir::func::FuncDialect"];
}

def PipeSplitStages : Pass<"pipe-split-stages", "::mlir::ModuleOp"> {
  let summary = "cuts the training step into one pipe.stage per (stage, phase)";
  let description = [{
    Input: `@<func-name>`, a training step (--pipe-autodiff, optionally
    --pipe-add-optimizer and --pipe-microbatch) whose ops carry `pipe.stage`
    and whose trainable parameters carry their owner stage. Output: for
    every stage s of 0 .. p-1

      pipe.stage @s<s>_fwd forward stage s params k
          (weights {pipe.param = "<name>"}...,
           inputs {pipe.input = "<graph input>"} / {pipe.name = "<tag>"}...)
          -> (loss {pipe.loss} (the stage computing it),
              values {pipe.name = "<tag>"}...)
      pipe.stage @s<s>_bwd backward stage s params k
          (weights {pipe.param}..., saved values {pipe.name} / {pipe.input}...,
           incoming gradients {pipe.grad = "<tag>"}...)
          -> (gradients of received activations {pipe.grad = "<tag>"}...,
              gradients of the k weights...)

    the form --pipe-schedule reads (see SchedulePasses.td). Forward ops are
    those the loss depends on, backward ops those the weight gradients depend
    on; constants are cloned where used. A forward returns what a later
    forward or its own backward reads; a backward reads forward values by the
    name they have in its own forward (added as forward inputs when only the
    backward needs them). A gradient crossing a cut is named after its
    activation (the one value of the receiving stage's forward of its type
    that the sending stage reads; among several, the operand of the forward
    op whose VJP built it, which shares its location, or what that operand's
    gradient passes on to unchanged through Add, Sub and Identity);
    several contributions to one activation are added before they are sent.
    A tied weight is an activation of its owner's forward for the other
    stages; its gradient comes back as an incoming gradient of the owner.
    Tags are the ONNX node names (NameLoc) where there are, else `v<N>`.

    The optimizer ops are dropped: the update is `pipe.update` in the
    programs. The step's `pipe.optimizer` (from --pipe-add-optimizer) and
    its `pipe.microbatches`, `pipe.batch_size`, `pipe.loss_combine`,
    `pipe.loss_scale` (from --pipe-microbatch) move to the module; the step
    is erased. Values may still skip stages: --pipe-insert-transfers relays
    them.
  }];
  let options = [
    Option<"funcName", "func-name", "std::string", "\"train_step\"",
           "the training step to split">,
  ];
  let dependentDialects = ["::mlir::pipec::pipe::PipeDialect",
                           "::mlir::pipec::onnx::ONNXDialect"];
}

def PipeInsertTransfers : Pass<"pipe-insert-transfers", "::mlir::ModuleOp"> {
  let summary = "makes every cut-crossing value go between neighbours, and records them";
  let description = [{
    Input: the pipe.stage ops of --pipe-split-stages. A forward of stage s
    reading `pipe.name = "T"` that stage t < s-1 computes gets it relayed:
    every stage r in t+1 .. s-1 takes it (an argument named as its
    predecessor sends it) and returns it as `"T.s<r>"`; stage s reads the
    relayed name, in its forward and backward. Each relay's backward takes
    the gradient `pipe.grad = "T.s<r>"` and returns it as the gradient of
    what it took, added to its own gradient of that value if it has one.
    Then every transfer of one micro-batch is recorded on the module:

      pipe.transfers = [{tag = "h", from = 0, to = 1, phase = "forward",
                         type = tensor<2x8xf32>, bytes = 64}, ...,
                        {tag = "h.grad", from = 1, to = 0,
                         phase = "backward", ...} ]

    with the tags pipe-schedule gives its pipe.send / pipe.recv.
  }];
  let dependentDialects = ["::mlir::pipec::pipe::PipeDialect",
                           "::mlir::pipec::onnx::ONNXDialect"];
}

#endif // PIPEC_TRANSFORMS_PASSES
