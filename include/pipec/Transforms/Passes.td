//===- Passes.td - pipec transformation passes -----------------*- tablegen -*-===//
//
// The passes of the three transforms libraries, in one Passes.h.inc:
// PipecTransforms (autodiff, optimizer, micro-batching, split, transfers),
// PipecPartition (lib/Transforms/Partition: stage assignment) and
// PipecSchedule (lib/Transforms/Schedule: schedules). Each library defines
// its own passes (GEN_PASS_DEF_<PASS>); registerPipecTransformsPasses()
// registers them all.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_TRANSFORMS_PASSES
#define PIPEC_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Training step, micro-batching, stages and transfers
//===----------------------------------------------------------------------===//

def PipeFuseGelu : Pass<"pipe-fuse-gelu", "::mlir::ModuleOp"> {
  let summary = "fuse the exact GELU that exporters spell out into onnx.Gelu";
  let description = [{
    torch.onnx (before opset 20) writes nn.GELU as
    `Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)`: five elementwise ops
    forward and more backward, each a pass over the activation. This pass
    replaces every such chain (operands in either order, the division also
    as a multiplication by 1/sqrt 2, scalar constants) whose intermediate
    values have no other use by one `onnx.Gelu(x) {approximate = "none"}`
    carrying the last op's location, so that it lowers to one kernel
    forward and one backward. Same function: the values agree to float
    rounding. A chain one of whose inner ops is named in `keep` (the ONNX
    node names of manual cut points) stays as it is, so that a cut inside
    it still names an op.
  }];
  let options = [
    ListOption<"keep", "keep", "std::string",
               "ONNX node names whose chains are not fused (manual cuts)">
  ];
}

def PipeFoldDropout : Pass<"pipe-fold-dropout", "::mlir::ModuleOp"> {
  let summary = "replace Dropout that drops nothing, and Pad that pads nothing, by its input";
  let description = [{
    An onnx.Dropout with a constant ratio of 0 (torch's nn.Dropout(0.0)), or
    with training_mode absent or a constant false (inference), is the
    identity in training and evaluation. Where nothing reads its mask, this
    pass replaces its output by its input: no copy and mask forward, no
    masked product backward, and a softmax it stood behind can be fused
    into attention. A Pad that pads nothing (constant mode, pads a constant
    of zeros; torch.onnx writes one before each avg_pool2d) is replaced by
    its input too. An op named in `keep` (a manual cut point) stays.
  }];
  let options = [
    ListOption<"keep", "keep", "std::string",
               "ONNX node names that are not folded (manual cuts)">
  ];
}

def PipeFuseAttention : Pass<"pipe-fuse-attention", "::mlir::ModuleOp"> {
  let summary = "fuse exported multi-head attention into onnx.Attention";
  let description = [{
    torch.onnx writes attention as Reshape/Transpose of q, k and v into
    heads, MatMul(q, kᵀ), an optional scale (Mul or Div by a constant), an
    optional Where(constant bool mask, -inf, scores) or Add of a constant
    mask of 0 and -inf, Softmax over the last
    axis, MatMul with v and the heads merged back by Transpose and Reshape.
    This pass replaces every such chain whose intermediate values have no
    other use by one `onnx.Attention` (3-D inputs, `q_num_heads`, `scale`;
    the mask as `is_causal` when it masks exactly j > i, else `attn_mask`)
    carrying the final Reshape's location; when q, k and v are the three
    parts of one Split along the last axis that nothing else reads, the op
    takes the unsplit projection (K and V none) and the Split goes. One
    kernel forward and one backward instead of the chain's seven to ten,
    reading q, k and v where the projection wrote them (lib/Transforms/
    FuseAttention.cpp). nn.MultiheadAttention's sequence-first form (q, k,
    v of (L, B, H*dh) merged into (B*H, L, dh) heads, q divided before the
    product, an additive constant mask of 0 and -inf) becomes Transposes to
    batch first around the same op; a mask from the data or with finite
    values leaves the chain. A chain one of whose inner ops is named in
    `keep` (a manual cut point) stays as it is.
  }];
  let options = [
    ListOption<"keep", "keep", "std::string",
               "ONNX node names whose chains are not fused (manual cuts)">
  ];
}

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
    for the kind. `clip-grad-norm=c` multiplies every gradient by
    min(1, c / (‖g‖ + 1e-6)), ‖g‖ the L2 norm over all of them, before the
    updates (torch.nn.utils.clip_grad_norm_); the multiplications carry
    `pipe.clip`, so that pipe-split-stages can take the unclipped gradients
    and hand the clipping to pipe.clip_grad_norm (the pipe.optimizer entry
    `clip_grad_norm`).
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
    Option<"lrSchedule", "lr-schedule", "std::string", "\"constant\"",
           "constant, linear or cosine: the rate lr * f(steps done), "
           "include/pipec/Autodiff/LrSchedule.h">,
    Option<"warmupSteps", "warmup-steps", "int64_t", "0",
           "the schedule's linear warm-up from 0 to lr">,
    Option<"decaySteps", "decay-steps", "int64_t", "0",
           "linear, cosine: the step where the decay to min-lr ends">,
    Option<"minLr", "min-lr", "double", "0.0",
           "linear, cosine: the rate at the end of the decay">,
    Option<"clipGradNorm", "clip-grad-norm", "double", "0.0",
           "scale the gradients to a global L2 norm of at most this "
           "(torch.nn.utils.clip_grad_norm_) before the update; 0: off">,
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
    one) averages over the labels not ignored. With `ignored-labels=step`
    (the default) and M > 1, where that op feeds the returned loss through
    ops linear in it (Mul or Div by a batch-independent value, Neg,
    Identity) and its labels are a function of graph inputs alone, the mean
    is the step's: the op and its gradient op become sum-reduced and both
    are scaled by 1/C, C the count of labels other than ignore_index over
    the step's whole batch (new arguments `pipe.step_input = "<input>"` of
    the whole batch's type, read by the loss's stage, on which the labels'
    ops are cloned); the loss combines as a sum. A loss of several terms
    (Add and Sub of terms through the same linear ops: BERT's masked-token
    plus next-sentence losses) takes each such loss op so, each with its
    own C, and any other term (a mean over the batch, a constant) times
    1/M, so that the micro-batches' losses sum to the step's. With `replicas=P > 1`
    (data-parallel pipelines whose gradients and losses are averaged) the
    argument holds the P pipelines' batches of the step (P*B rows, the
    driver's `input_pipelines`) and the scale is P/C, so that the average
    is the mean over all of them. Otherwise (or with
    `ignored-labels=micro-batch`, for methods that update per micro-batch,
    whose gradient is the micro-batch's own mean) the step averages the
    micro-batches' means, which is exact when every micro-batch counts
    equally many labels; `pipe.loss_mean = "micro-batch"` on the step says
    so. Class weights are an error.

    Errors (on the op): an op that mixes samples other than a loss reduction
    or a gradient sum (batch normalization, a softmax/slice/concat over the
    batch, a reduction over the batch used non-linearly in the forward), an
    op without a rule, B not divisible by M.

    `batchnorm=full-batch` (M > 1): every stage holding a training-mode
    BatchNormalization is a whole-batch stage (pipec/Transforms/WholeBatch.h)
    whose ops keep the whole batch B: a micro-batch value it reads goes
    through an `onnx.Concat` of M copies marked `pipe.microbatch_concat`
    (copy k stands for micro-batch k), a value of it that a micro-batched
    stage reads through an `onnx.Split` into M parts marked
    `pipe.microbatch_split` (part k is micro-batch k's); both on the plain
    batch axis. Its loss gradient is not scaled by 1/M, and a loss it
    computes is the step's (reported M times, loss_scale 1/M). The step gets
    `pipe.whole_batch_stages`; pipe-schedule runs those stages once per step.
  }];
  let options = [
    Option<"funcName", "func-name", "std::string", "\"train_step\"",
           "the training step to micro-batch">,
    Option<"microbatches", "microbatches", "int64_t", "1",
           "M, the number of micro-batches per step (divides B)">,
    Option<"replicas", "replicas", "int64_t", "1",
           "P, the data-parallel pipelines whose gradients are averaged: "
           "with ignored-labels=step the mean is over the counted labels of "
           "all their batches">,
    Option<"ignoredLabels", "ignored-labels", "std::string", "\"step\"",
           "a mean loss with ignore_index: step (the mean over the step's "
           "counted labels) or micro-batch (the mean of the micro-batches' "
           "means)">,
    Option<"batchnorm", "batchnorm", "std::string", "\"micro-batch\"",
           "training-mode BatchNormalization statistics: micro-batch (each "
           "micro-batch its own) or full-batch (whole-batch stages)">,
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

    the form --pipe-schedule reads (see PipeSchedule). Forward ops are
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

    With `recompute=true` a backward (of every stage but the last, whose
    backward follows its forward at once) keeps none of its own forward's
    intermediates: it re-runs the forward ops its gradients need from the
    stage's inputs (received activations, fed data) and the weights it is
    passed, so it is the vector-Jacobian product of the stage at (its
    inputs, those weights). It saves activation memory (only stage inputs
    stay in flight), and it is what SpecTrain and PipeMare mean by a
    backward on other weights than its forward's (../shared/METHODS.md;
    docs/design-notes.md, "Backward weights").
  }];
  let options = [
    Option<"funcName", "func-name", "std::string", "\"train_step\"",
           "the training step to split">,
    Option<"recompute", "recompute", "bool", "false",
           "backwards recompute their forward from the stage inputs">,
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

//===----------------------------------------------------------------------===//
// Partitioning (PipecPartition)
//===----------------------------------------------------------------------===//

def PipeAssignStages : Pass<"pipe-assign-stages", "::mlir::ModuleOp"> {
  let summary = "splits a function into pipeline stages (pipe.stage)";
  let description = [{
    Gives every op of `func.func @<func-name>` an attribute
    `pipe.stage = i : i64` so that every value flows from a stage to the same
    or a later one. The ops on per-sample data are split contiguously in
    their order; the others "float": constants, and pure ops computed from
    weights (`pipe.param` / `pipe.state` arguments) and constants alone,
    like a weight's Transpose, take the earliest stage of their users (a
    later stage using them too recomputes them, as constants are
    duplicated), so a cut never separates a weight from its preparation.
    The terminator gets the last stage.

    Strategies:
    - `balanced`: a contiguous split of the op sequence minimizing the most
      expensive stage (forward + backward time of the cost model, see
      pipec/Analysis/CostModel.h). Cuts are only allowed where few bytes of
      activations cross them: a cut is eligible when its crossing bytes are
      at most `cut-slack` times the smallest crossing of the function; the
      threshold is doubled until the best split over eligible cuts is
      within `tolerance` of the best split over all cuts. Among splits of
      equal (within 1e-9) maximum cost, the one whose cuts carry the fewest
      activation bytes wins. Exact: a dynamic program over cut points.
    - `dp`: PipeDream's dynamic program (one worker per stage, no
      replication) over the layers the eligible cuts delimit:
      A(j, s) = min_i max(A(i, s-1), 2 a_i / B, T(i+1..j)), with a_i the
      bytes crossing cut i and B the link bandwidth.
    - `manual`: with `cuts`, a new stage starts after each op whose ONNX
      node name (its NameLoc) is listed, in program order; without `cuts`,
      the `pipe.stage` attributes already on ops are kept and the ops without
      one get the latest stage of their operands.
    - `layers`: finds the repeated block of a transformer from the node
      names (`/blocks.<i>/...`, `layers.<i>.`, `h.<i>.`: a prefix `<word>.<i>`
      with the most distinct indices) and gives each stage an equal number
      of blocks (the first `blocks % stages` stages one more); ops before the
      first block (embedding) go with the first, ops after the last (head,
      loss) with the last.

    A training step (a function with `pipe.grad` / `pipe.update` results,
    as --pipe-autodiff / --pipe-add-optimizer build it): the forward ops
    (those its `pipe.loss` result depends on) are partitioned as above; then
    an update (an op whose result is a `pipe.update` result and that reads a
    parameter) goes with the parameter's owner stage, and every other
    backward op with the forward op whose location (else ONNX node name) it
    carries; failing both, with the earliest gradient it reads, else the
    latest forward value. Gradients flow to the same or an earlier stage.

    Also set: on every `pipe.param` (and `pipe.state`) argument,
    `pipe.stage = owner : i64`
    (the stage of its first use); where a parameter is used by several
    stages (tied weights), `pipe.tied_stages = [s, ...]`; on the function,
    `pipe.stage_costs = [...]` (f64, estimated forward + backward time of
    each stage per micro-batch, in microseconds; a floating op counts in the
    stage of its first user) and `pipe.num_stages`. With `annotate-costs`,
    every op also gets `pipe.cost = {backward_factor, bytes, flops,
    param_bytes}` (the forward numbers of the cost model).
  }];
  let options = [
    Option<"funcName", "func-name", "std::string", "\"forward\"",
           "the function to partition">,
    Option<"stages", "stages", "int64_t", "0",
           "number of stages (0: with strategy=manual, from cuts or the "
           "existing attributes; else 2)">,
    Option<"strategy", "strategy", "std::string", "\"balanced\"",
           "balanced, dp, manual or layers">,
    ListOption<"cuts", "cuts", "std::string",
               "strategy=manual: ONNX node names after which a stage ends">,
    Option<"cutSlack", "cut-slack", "double", "2.0",
           "balanced/dp: a cut is eligible when its crossing bytes are at "
           "most this times the smallest crossing">,
    Option<"tolerance", "tolerance", "double", "0.1",
           "balanced/dp: accepted excess of the max stage cost over the "
           "unrestricted optimum before more cut points are admitted">,
    Option<"peakGflops", "peak-gflops", "double", "100000.0",
           "cost model: peak arithmetic rate, GFLOP/s">,
    Option<"memoryGBps", "memory-gbps", "double", "2000.0",
           "cost model: memory bandwidth, GB/s">,
    Option<"linkGBps", "link-gbps", "double", "25.0",
           "cost model: bandwidth between stages, GB/s (dp)">,
    Option<"annotateCosts", "annotate-costs", "bool", "false",
           "also write each op's cost-model numbers as pipe.cost = {flops, "
           "bytes, param_bytes, backward_factor}">,
    Option<"profile", "profile", "std::string", "\"\"",
           "a pipe-profile JSON (docs/profile-json.md): the measured forward "
           "and backward time of each ONNX node at the function's batch "
           "replaces the roofline estimate of its ops">,
    Option<"memoryPerDevice", "memory-per-device", "int64_t", "0",
           "balanced, on the forward function: bytes a stage's device may "
           "hold (the planner's estimate, include/pipec/Transforms/Planner.h); "
           "the balanced cuts where they fit, else the fastest that fit, else "
           "an error naming what the balanced partition needs (0: no limit)">,
    Option<"microbatches", "microbatches", "int64_t", "1",
           "memory-per-device: micro-batches per step (activations in flight)">,
    Option<"scheduleKind", "schedule", "std::string", "\"1f1b\"",
           "memory-per-device: gpipe or 1f1b (activations in flight)">,
    Option<"optimizerState", "optimizer-state", "int64_t", "0",
           "memory-per-device: optimizer state per parameter byte (sgd 0, "
           "momentum 1, adam 2)">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

//===----------------------------------------------------------------------===//
// Scheduling (PipecSchedule)
//===----------------------------------------------------------------------===//

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
    then the remaining backwards; `kind=afp advance=K` (AvgPipe's advance
    forward propagation) runs min(p-s-1+K, M) warm-up forwards, then as
    1F1B: K = 0 is 1F1B, K >= M GPipe, and stage s holds at most
    min(p-s+K, M) micro-batches of activations. Every device runs its sends and receives in
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
    momentum = ..., dampening = ..., weight_decay = ..., grad_scale = ...,
    clip_grad_norm = ...}`. Adam(W) and Adagrad get PyTorch's defaults for
    betas and epsilon. With clip_grad_norm (synchronous schedules only),
    every device of a pipeline runs `pipe.clip_grad_norm %w max(c) among
    [devices of its pipeline]` before its update (after the replicas'
    allreduce): the global norm over all the pipeline's gradients.

    No-flush methods (`kind=pipedream`, `kind=2bw`, ../shared/METHODS.md):
    each program is one step of 1F1B's steady state without a flush
    (schedule::generateNoFlushStep): device s runs the forwards of the
    step's micro-batches 0..M-1 and the backwards of -w..M-1-w (w = p-1-s,
    negative: earlier steps' micro-batches), with weight versions explicit:
    `pipe.weight_buffer ... versions V`, forwards and backwards reading
    `%w[u - w]` (PipeDream, V = p-s; vertical sync `%w[u - (p-1)]`, V = p)
    or `%w[t - 1]` (2BW, V = 2), and `pipe.update %w[u] ... mb` after every
    backward (PipeDream, on the micro-batch's own gradient) or `%w[t]` after
    each step's last one (2BW, on the mean over the step), each followed by
    a `pipe.zero_grad` of its micro-batch. Fed inputs the backward needs are
    kept from the forward in activation buffers. 2BW needs M >= p.

    SpecTrain and PipeMare (`kind=spectrain`, `kind=pipemare`) run the same
    order with an update per micro-batch but stash nothing: the update
    writes slot 0 in place (`pipe.update %w ... mb`), and with
    τ = p-1-s (the updates stage s makes between a micro-batch's forward and
    its backward):
      - spectrain: before each forward `pipe.predict %w[0] into 1 gap τ
        velocity lr(..)` and the forward reads `%w[1]`, the backward `%w[0]`
        (V = 2; the last stage, τ = 0, reads `%w[0]` with V = 1); the
        optimizer must have a step direction (not adagrad);
      - pipemare: the forward reads `%w[0]`; `lr-warmup=K` (K >= 1) gives the
        update `lr_scale(1/τ) anneal_steps(K)` (T1); `discrepancy-correction=γ`
        gives it `discrepancy(γ)` and the backward reads `%w[1]` written by
        `pipe.predict %w[0] into 1 gap τ delta` just before it (T2, V = 2).
    Their backwards compute at other weights than their forwards, so the
    stages must be split with pipe-split-stages recompute=true.

    Several pipelines (`pipelines=P`, synchronous kinds only): the p
    programs are repeated for pipelines 1..P-1 (`pipeline i`, device i*p+s,
    peers offset by i*p; the runtime reads step t of pipeline i from the
    global mini-batch t*P + i). `replication=dp` adds `pipe.allreduce mean`
    of the gradients over the stage's P replicas before each update (DP x
    PP: one-device training on a P-times larger batch); `replication=avgpipe`
    keeps a centre copy in weight version 1 and adds `pipe.average %w[0]
    centre 1 among [...] alpha(a) period T` after each update (EASGD,
    METHODS.md). With P = 1 nothing is added.
  }];
  let options = [
    Option<"kind", "kind", "std::string", "\"1f1b\"",
           "gpipe, 1f1b, afp (advance forward propagation), or a no-flush "
           "method: pipedream, 2bw, spectrain, pipemare">,
    Option<"lrWarmup", "lr-warmup", "int64_t", "0",
           "pipemare T1: per-stage learning rate lr/τ annealed to lr over K "
           "updates (0: off)">,
    Option<"discrepancyCorrection", "discrepancy-correction", "double", "-1.0",
           "pipemare T2: backward weights W - τ·δ with δ's decay γ in [0, 1) "
           "(default: off)">,
    Option<"pipelines", "pipelines", "int64_t", "1",
           "P pipelines of the p stages (P*p devices; pipeline i's stage s is "
           "device i*p + s), tied by `replication`">,
    Option<"replication", "replication", "std::string", "\"dp\"",
           "with pipelines > 1: dp (gradients averaged over the replicas of a "
           "stage before each update: data parallelism) or avgpipe (elastic "
           "averaging with a centre copy after the update, AvgPipe)">,
    Option<"avgAlpha", "avg-alpha", "double", "0.5",
           "avgpipe: the elastic averaging rate alpha, in (0, 1)">,
    Option<"avgPeriod", "avg-period", "int64_t", "1",
           "avgpipe: average after every `avg-period` steps">,
    Option<"advance", "advance", "int64_t", "0",
           "afp: warm-up forwards beyond 1F1B's (0: 1F1B, >= M: GPipe)">,
    Option<"verticalSync", "vertical-sync", "bool", "false",
           "pipedream: every stage reads W(u - (p-1)) for micro-batch u">,
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
    Option<"lrSchedule", "lr-schedule", "std::string", "\"constant\"",
           "with optimizer: constant, linear or cosine (pipe.update's "
           "lr_schedule)">,
    Option<"warmupSteps", "warmup-steps", "int64_t", "0",
           "with optimizer: the schedule's linear warm-up, in steps">,
    Option<"decaySteps", "decay-steps", "int64_t", "0",
           "with optimizer: linear, cosine: the step where the decay ends">,
    Option<"minLr", "min-lr", "double", "0.0",
           "with optimizer: linear, cosine: the rate at the end of the decay">,
    Option<"clipGradNorm", "clip-grad-norm", "double", "0.0",
           "with optimizer: clip the step's gradients to this global L2 norm "
           "over the pipeline's devices (pipe.clip_grad_norm); 0: off">,
  ];
  let dependentDialects = ["::mlir::pipec::pipe::PipeDialect"];
}

def PipePackTransfers : Pass<"pipe-pack-transfers", "::mlir::ModuleOp"> {
  let summary = "marks adjacent transfers between two devices that travel as one message";
  let description = [{
    Marks a `pipe.send` (`pipe.recv`) with `pipe.pack_next` when it and the
    next transfer of its block (saves between them passed over)
    go to (come from) the same peer for the same micro-batch and both
    devices' programs agree on it everywhere: every send of tag `t` on the
    link is followed by the send of `u`, every send of `u` follows one of
    `t`, and the peer's receives of `t` and `u` are adjacent the same way.
    pipe-lower-programs then gathers such a group into one message
    (`pipert_send_packed` / `pipert_irecv_packed`): a cut that carries two
    values per micro-batch (a transformer's residual stream and the layer
    norm of it) pays one message's cost. The order of the transfers between
    the two devices is unchanged, so the schedule's deadlock proof holds.
    Programs that share a device number are left as they are.
  }];
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

#endif // PIPEC_TRANSFORMS_PASSES
