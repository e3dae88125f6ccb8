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

#endif // PIPEC_TRANSFORMS_PASSES
