//===- PipeOps.td - pipe dialect ops ---------------------------*- tablegen -*-===//
#ifndef PIPEC_PIPE_OPS
#define PIPEC_PIPE_OPS

include "dialects/pipe/PipeBase.td"
include "dialects/pipe/PipeAttrs.td"
include "dialects/pipe/PipeTypes.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/CallInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/FunctionInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Stage computations
//===----------------------------------------------------------------------===//

def Pipe_StageOp : Pipe_Op<"stage", [
    FunctionOpInterface, IsolatedFromAbove, AutomaticAllocationScope]> {
  let summary = "the computation of one (stage, phase) of the model";
  let description = [{
    A function-like symbol holding the ops (onnx, or anything else) of one
    phase of one pipeline stage. The first `params` arguments are the stage's
    weights, in the order of the `pipe.weight_buffer` that instructions pass
    to it; the rest are activations. Calling conventions, with P the weight
    tensor types:

    - `forward`:         (P..., inputs...) -> (outputs...)
    - `backward`:        (P..., inputs...) -> (input grads..., P grads...)
    - `backward_input`:  (P..., inputs...) -> (outputs...)
    - `backward_weight`: (P..., inputs...) -> (P grads...)

    Arguments marked `pipe.state = "name"` come last: state the device holds
    for the stage (a training-mode BatchNormalization's running statistics,
    frozen parameters), read in place and never passed by the instruction.
    A forward result marked `pipe.update = "name"` is that state's new value,
    written back after each call: forwards of one stage run in micro-batch
    order, so each micro-batch updates it in turn.

    where the trailing results of `backward` and all of `backward_weight` are
    the weight gradients, which the calling instruction adds to the buffer's
    gradient accumulator.

    ```mlir
    pipe.stage @stage1_fwd forward stage 1 params 1
        (%w: tensor<4x2xf32>, %x: tensor<8x4xf32>) -> tensor<8x2xf32> {
      %y = onnx.MatMul(%x, %w) : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
      pipe.return %y : tensor<8x2xf32>
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<FunctionType>:$function_type,
                       Pipe_PhaseAttr:$phase,
                       Pipe_IntAttr:$stage,
                       DefaultValuedAttr<Pipe_IntAttr, "0">:$params,
                       OptionalAttr<StrAttr>:$sym_visibility,
                       OptionalAttr<DictArrayAttr>:$arg_attrs,
                       OptionalAttr<DictArrayAttr>:$res_attrs);
  let regions = (region AnyRegion:$body);
  let builders = [OpBuilder<(ins "StringRef":$name, "Phase":$phase,
                                 "int64_t":$stage, "int64_t":$params,
                                 "FunctionType":$type)>];
  let extraClassDeclaration = [{
    ::mlir::Region *getCallableRegion() { return &getBody(); }
    ::llvm::ArrayRef<::mlir::Type> getArgumentTypes() {
      return getFunctionType().getInputs();
    }
    ::llvm::ArrayRef<::mlir::Type> getResultTypes() {
      return getFunctionType().getResults();
    }
    /// The weight argument types (the first `params` inputs).
    ::llvm::ArrayRef<::mlir::Type> getParamTypes() {
      return getArgumentTypes().take_front(getParams());
    }
    /// The trailing arguments marked `pipe.state`: state of the stage that
    /// its device holds (a training-mode BatchNormalization's running
    /// statistics), not passed by the calling instruction.
    int64_t getNumStateArgs();
    /// The arguments the calling instruction passes: after the weights,
    /// before the state.
    ::llvm::ArrayRef<::mlir::Type> getInputTypes() {
      return getArgumentTypes().drop_front(getParams()).drop_back(
          getNumStateArgs());
    }
  }];
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Pipe_ReturnOp : Pipe_Op<"return", [Pure, HasParent<"StageOp">, ReturnLike,
                                       Terminator]> {
  let summary = "returns the results of a stage computation";
  let arguments = (ins Variadic<AnyType>:$operands);
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, {}); }]>];
  let assemblyFormat = "attr-dict ($operands^ `:` type($operands))?";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Programs
//===----------------------------------------------------------------------===//

def Pipe_ProgramOp : Pipe_Op<"program", [Symbol, IsolatedFromAbove, SingleBlock,
                                         NoTerminator]> {
  let summary = "everything one device does in one training step, in order";
  let description = [{
    One per device. The body is a list of instructions (and micro-batch
    loops); the runtime executes it once per training step. Under a no-flush
    method (`schedule "pipedream"` or `"pipedream_2bw"`) the body is one step
    of the steady state: micro-batch indices are relative to the step's
    first micro-batch (global index u = t*M + mb, t the step), negative ones
    name micro-batches of earlier steps still in flight, an instruction whose
    u lies outside [0, steps*M) is skipped, and after the last step the
    runtime runs the body ceil((p-1)/M) more times without data to drain the
    pipeline. `pipe.weight_buffer` ops in it
    declare state that persists across steps. `stages` lists the stages this
    device holds (several for interleaved schedules); `pipeline` is the
    replica index under AvgPipe. Micro-batch indices of the instructions lie
    in [0, microbatches).

    ```mlir
    pipe.program @device1 device 1 stages [1] schedule "1f1b" microbatches 2 {
      ...
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       Pipe_IntAttr:$device,
                       DenseI64ArrayAttr:$stages,
                       Pipe_ScheduleKindAttr:$schedule,
                       Pipe_IntAttr:$microbatches,
                       OptionalAttr<Pipe_IntAttr>:$pipeline,
                       UnitAttr:$vertical_sync,
                       OptionalAttr<Pipe_IntAttr>:$advance);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `device` $device `stages` $stages
    `schedule` custom<ScheduleName>($schedule) `microbatches` $microbatches
    (`pipeline` $pipeline^)? (`vertical_sync` $vertical_sync^)?
    (`advance` $advance^)? attr-dict-with-keyword $body
  }];
  let builders = [OpBuilder<(ins "::llvm::StringRef":$name, "int64_t":$device,
      "::llvm::ArrayRef<int64_t>":$stages, "ScheduleKind":$schedule,
      "int64_t":$microbatches,
      CArg<"std::optional<int64_t>", "std::nullopt">:$pipeline)>];
  let extraClassDeclaration = [{
    /// The instructions, in order.
    ::mlir::Block &getInstructions() { return getBody().front(); }
    bool holdsStage(int64_t stage) {
      return ::llvm::is_contained(getStages(), stage);
    }
    /// Whether the program runs without a flush between steps (PipeDream,
    /// 2BW, PipeMare, SpecTrain): its body is one step of a steady state
    /// whose instructions name micro-batches relative to the step, some of
    /// them of earlier steps (negative), and an instruction whose global
    /// micro-batch t*M + mb lies outside the run is skipped.
    bool isNoFlush();
  }];
  let hasVerifier = 1;
}

// An instruction of a program. Instructions touch persistent state or talk to
// peers, so they have no declared effects: nothing removes or reorders them.
class Pipe_InstrOp<string mnemonic, list<Trait> traits = []>
    : Pipe_Op<mnemonic, !listconcat(traits,
                                    [ParentOneOf<["ProgramOp", "LoopOp"]>])>;

// A declaration of state of the whole program: only directly in a program.
class Pipe_DeclOp<string mnemonic, list<Trait> traits = []>
    : Pipe_Op<mnemonic, !listconcat(traits, [HasParent<"ProgramOp">])>;

//===----------------------------------------------------------------------===//
// Weight buffers
//===----------------------------------------------------------------------===//

def Pipe_WeightBufferOp : Pipe_DeclOp<"weight_buffer", [
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "declares the versioned weights of one stage";
  let description = [{
    Declares the weights of stage `stage` on this device, persistent across
    steps: `versions` copies of the parameters (slot 0 is the live copy that
    `pipe.update` writes; the others hold stashed, predicted or centre copies),
    one gradient accumulator, and the optimizer state. The parameter names
    are the onnx initializer names, which initialise slot 0 and name the
    weights when they are saved.

    ```mlir
    %w = pipe.weight_buffer stage 0 versions 2
           ("fc1.weight": tensor<4x8xf32>, "fc1.bias": tensor<8xf32>)
    ```
  }];
  let arguments = (ins Pipe_IntAttr:$stage, Pipe_IntAttr:$versions,
                       StrArrayAttr:$param_names, TypeArrayAttr:$param_types);
  let results = (outs Pipe_WeightsType:$weights);
  let assemblyFormat = [{
    `stage` $stage `versions` $versions
    custom<ParamList>($param_names, $param_types) attr-dict
  }];
  let extraClassDeclaration = [{
    int64_t getNumParams() { return getParamNames().size(); }
    ::llvm::SmallVector<::mlir::Type> getParamTypeList() {
      return ::llvm::to_vector(::llvm::map_range(getParamTypes(),
          [](::mlir::Attribute a) {
            return ::llvm::cast<::mlir::TypeAttr>(a).getValue(); }));
    }
  }];
  let hasVerifier = 1;
}

def Pipe_StashOp : Pipe_InstrOp<"stash"> {
  let summary = "copies one weight version slot into another";
  let description = [{
    `pipe.stash %w[0] into 2` copies the weights of slot 0 into slot 2
    (PipeDream weight stashing, 2BW's shadow copy).
  }];
  let arguments = (ins Pipe_WeightsType:$weights, Pipe_IntAttr:$from, Pipe_IntAttr:$to);
  let assemblyFormat = "$weights `[` $from `]` `into` $to attr-dict";
  let hasVerifier = 1;
}

def Pipe_PredictOp : Pipe_InstrOp<"predict"> {
  let summary = "writes extrapolated weights into a version slot";
  let description = [{
    Writes into slot `to` the weights of slot `from` moved `gap` updates
    ahead along a direction the buffer's pipe.update keeps:

    - `velocity lr(x)` (SpecTrain): W - gap * x * v, v the optimizer's step
      direction: the momentum buffer for momentum/nesterov, m̂/(√v̂ + ε) for
      adam/adamw (PipeOptim), the last gradient applied for sgd; zero before
      the first update. Weight decay is not part of it.
    - `delta` (PipeMare's discrepancy correction): W - gap * δ, δ the running
      average of the buffer's weight changes that an update with
      `discrepancy(γ)` keeps (δ ← γδ + (1-γ)(W(k+1) - W(k))).

    In a no-flush program it names the micro-batch of the instruction that
    reads the slot, and is skipped with it.

    ```mlir
    pipe.predict %w[0] into 1 gap 2 velocity lr(1.000000e-01) mb %k + 2
    pipe.predict %w[0] into 1 gap 1 delta mb %k
    ```
  }];
  let arguments = (ins Pipe_WeightsType:$weights, Pipe_IntAttr:$from, Pipe_IntAttr:$to,
                       Pipe_IntAttr:$gap, Pipe_PredictDirectionAttr:$direction,
                       OptionalAttr<F64Attr>:$lr,
                       OptionalAttr<Pipe_IntAttr>:$mb, Optional<Index>:$mb_base);
  let assemblyFormat = [{
    $weights `[` $from `]` `into` $to `gap` $gap `` $direction
    (`lr` `(` $lr^ `)`)? custom<OptMicroBatch>($mb_base, $mb) attr-dict
  }];
  let hasVerifier = 1;
}

def Pipe_AverageOp : Pipe_InstrOp<"average"> {
  let summary = "AvgPipe elastic averaging with a centre copy";
  let description = [{
    Elastic averaging (EASGD) of this replica's slot `version` with the
    centre copy in slot `centre`, over the devices of `group` (the replicas
    of this stage, this device included), every `period` steps:
    Δ_i = α(x_i − x̃), x_i −= Δ_i, x̃ += Σ_i Δ_i (the sum is an allreduce
    over the group, so every member keeps the same centre).

    ```mlir
    pipe.average %w[0] centre 1 among [0, 2] alpha(5.000000e-01) period 4
    ```
  }];
  let arguments = (ins Pipe_WeightsType:$weights, Pipe_IntAttr:$version,
                       Pipe_IntAttr:$centre, DenseI64ArrayAttr:$group, F64Attr:$alpha,
                       DefaultValuedAttr<Pipe_IntAttr, "1">:$period);
  let assemblyFormat = [{
    $weights `[` $version `]` `centre` $centre `among` $group
    `alpha` `(` $alpha `)` (`period` $period^)? attr-dict
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Gradients and optimizer
//===----------------------------------------------------------------------===//

def Pipe_ZeroGradOp : Pipe_InstrOp<"zero_grad"> {
  let summary = "zeroes the gradient accumulator of a weight buffer";
  let description = [{
    With a micro-batch (no-flush programs, after an update), it is skipped
    with that micro-batch.
  }];
  let arguments = (ins Pipe_WeightsType:$weights,
                       OptionalAttr<Pipe_IntAttr>:$mb, Optional<Index>:$mb_base);
  let builders = [OpBuilder<(ins "::mlir::Value":$weights), [{
    build($_builder, $_state, weights, ::mlir::IntegerAttr(), ::mlir::Value());
  }]>];
  let assemblyFormat = "$weights custom<OptMicroBatch>($mb_base, $mb) attr-dict";
  let hasVerifier = 1;
}

def Pipe_AccumulateOp : Pipe_InstrOp<"accumulate"> {
  let summary = "adds a gradient tensor into a buffer's gradient accumulator";
  let description = [{
    Adds `grad` into the accumulator of parameter `param` of the buffer: used
    for gradients that arrive from another device (the owner of a tied
    weight receiving the other user's gradient).

    ```mlir
    pipe.accumulate %g into %w param 0 : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$grad, Pipe_WeightsType:$weights,
                       Pipe_IntAttr:$param);
  let assemblyFormat = "$grad `into` $weights `param` $param attr-dict `:` type($grad)";
  let hasVerifier = 1;
}

def Pipe_AllReduceOp : Pipe_InstrOp<"allreduce"> {
  let summary = "reduces a buffer's accumulated gradients over a device group";
  let description = [{
    Replaces the gradient accumulators of the listed parameters (all when
    `params` is absent) by their sum or mean over `group`, this device
    included: tied weights held by several stages, replicated stages.

    ```mlir
    pipe.allreduce sum %w among [0, 1] params [0]
    ```
  }];
  let arguments = (ins Pipe_ReduceKindAttr:$reduction, Pipe_WeightsType:$weights,
                       DenseI64ArrayAttr:$group,
                       OptionalAttr<DenseI64ArrayAttr>:$params);
  let assemblyFormat = [{
    `` $reduction $weights `among` $group (`params` $params^)? attr-dict
  }];
  let hasVerifier = 1;
}

def Pipe_ClipGradNormOp : Pipe_InstrOp<"clip_grad_norm"> {
  let summary = "scales the step's gradients to a global L2 norm of at most max";
  let description = [{
    Gradient clipping by the global norm (torch.nn.utils.clip_grad_norm_):
    with g the gradients the updates of the listed buffers will apply (each
    accumulator times its update's `grad_scale`) on every device of `group`,
    ‖g‖ = sqrt(Σ g²) over them all, and every accumulator is multiplied by
    min(1, max / (‖g‖ + 1e-6)). Every device of `group` runs it once per
    step, a device without weights included (it lists no buffer): the sum
    of squares is reduced over the group, so it is a collective. It comes
    after the step's last backward and the replicas' `pipe.allreduce`, and
    before the updates; synchronous programs only.

    ```mlir
    pipe.clip_grad_norm %w max(1.000000e+00) among [0, 1]
    ```
  }];
  let arguments = (ins Variadic<Pipe_WeightsType>:$weights, F64Attr:$max_norm,
                       DenseI64ArrayAttr:$group);
  let assemblyFormat = [{
    ($weights^)? `max` `(` $max_norm `)` `among` $group attr-dict
  }];
  let hasVerifier = 1;
}

def Pipe_UpdateOp : Pipe_InstrOp<"update"> {
  let summary = "an optimizer step on the live weights of a buffer";
  let description = [{
    Applies the accumulated gradient (times `grad_scale`, default 1) to slot
    0 of the buffer with the given optimizer. Hyper-parameters: `lr` always;
    `momentum` (required by momentum and nesterov, `dampening` optional for
    momentum); `beta1`, `beta2`, `epsilon` (required by adam and adamw);
    `epsilon` (required by adagrad); `weight_decay` (any, default 0; decoupled
    for adamw). `lr_schedule {kind, warmup_steps, decay_steps, min_lr,
    updates_per_step}` makes the rate lr · f(k / updates_per_step), k the
    buffer's update count before this one (include/pipec/Autodiff/
    LrSchedule.h: linear warm-up, then constant, linear or cosine decay to
    min_lr). `lr_scale` multiplies the learning rate (PipeMare's per-stage
    1/τ_s); with `anneal_steps` K it anneals geometrically to 1 over K
    updates: lr_k = lr · lr_scale^(1 − min(k/K, 1)), k the buffer's update
    count before this one. `discrepancy(γ)` keeps the running weight
    velocity δ ← γδ + (1−γ)(W(k+1) − W(k)) (δ(0) = 0) that `pipe.predict ...
    delta` reads (PipeMare's discrepancy correction).

    Without a version, a no-flush program's update writes slot 0 in place
    (SpecTrain, PipeMare: no stashed versions).

    In a no-flush program the update names the version it starts from and
    the micro-batch whose backward completes its gradient: `pipe.update
    %w[u] ... mb %k - 1` computes W(v+1) from W(v) (v = u, one update per
    micro-batch; `%w[t]`, one per step) and leaves W(v) in its slot, so a
    buffer of V versions holds W(v) in slot v mod V. It is skipped with its
    micro-batch.

    ```mlir
    pipe.update %w momentum lr(1.000000e-01) momentum(9.000000e-01)
    ```
  }];
  let arguments = (ins Pipe_WeightsType:$weights, Pipe_OptimizerKindAttr:$kind,
                       F64Attr:$lr,
                       OptionalAttr<F64Attr>:$momentum,
                       OptionalAttr<F64Attr>:$dampening,
                       OptionalAttr<F64Attr>:$beta1,
                       OptionalAttr<F64Attr>:$beta2,
                       OptionalAttr<F64Attr>:$epsilon,
                       OptionalAttr<F64Attr>:$weight_decay,
                       OptionalAttr<DictionaryAttr>:$lr_schedule,
                       OptionalAttr<F64Attr>:$lr_scale,
                       OptionalAttr<Pipe_IntAttr>:$anneal_steps,
                       OptionalAttr<F64Attr>:$discrepancy,
                       OptionalAttr<F64Attr>:$grad_scale,
                       OptionalAttr<Pipe_IntAttr>:$version,
                       DefaultValuedAttr<Pipe_VersionClockAttr,
                           "::mlir::pipec::pipe::VersionClock::Slot">:$version_clock,
                       OptionalAttr<Pipe_IntAttr>:$mb, Optional<Index>:$mb_base);
  let assemblyFormat = [{
    $weights `` custom<OptVersion>($version_clock, $version) `` $kind `lr` `(` $lr `)`
    (`momentum` `(` $momentum^ `)`)?
    (`dampening` `(` $dampening^ `)`)?
    (`beta1` `(` $beta1^ `)`)?
    (`beta2` `(` $beta2^ `)`)?
    (`epsilon` `(` $epsilon^ `)`)?
    (`weight_decay` `(` $weight_decay^ `)`)?
    (`lr_schedule` $lr_schedule^)?
    (`lr_scale` `(` $lr_scale^ `)`)?
    (`anneal_steps` `(` $anneal_steps^ `)`)?
    (`discrepancy` `(` $discrepancy^ `)`)?
    (`grad_scale` `(` $grad_scale^ `)`)?
    custom<OptMicroBatch>($mb_base, $mb)
    attr-dict
  }];
  let extraClassDeclaration = [{
    /// True when the optimizer has a step direction pipe.predict can use
    /// (all but adagrad; sgd's is its last gradient).
    bool hasVelocity();
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

def Pipe_ForwardOp : Pipe_InstrOp<"forward", [AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "runs a forward stage computation on micro-batch `mb`";
  let description = [{
    Calls the `forward` stage `callee` with the weights of version `version`
    of the buffer (absent for a stage without weights) followed by `inputs`.
    The version is a slot (`%w[0]`) or, in a no-flush program, relative to
    the instruction's global micro-batch u or its step t: `%w[u - 2]` reads
    W(u - 2), the weights after u - 2 updates (W(0) below 0).

    ```mlir
    %y = pipe.forward @stage0_fwd(%x) weights %w[0] mb 1
           : (tensor<8x4xf32>) -> tensor<8x8xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$callee, Variadic<AnyType>:$inputs,
                       Optional<Pipe_WeightsType>:$weights,
                       OptionalAttr<Pipe_IntAttr>:$version,
                       DefaultValuedAttr<Pipe_VersionClockAttr,
                           "::mlir::pipec::pipe::VersionClock::Slot">:$version_clock,
                       Pipe_IntAttr:$mb, Optional<Index>:$mb_base);
  let results = (outs Variadic<AnyType>:$results);
  let assemblyFormat = [{
    $callee `(` $inputs `)` (`weights` $weights^ `[` custom<Version>($version_clock, $version) `]`)?
    custom<MicroBatch>($mb_base, $mb)
    attr-dict `:` functional-type($inputs, $results)
  }];
  let hasVerifier = 1;
}

def Pipe_BackwardOp : Pipe_InstrOp<"backward", [AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "runs a backward stage computation on micro-batch `mb`";
  let description = [{
    `part` says which gradients it computes and which phase `callee` must
    have: `full` (phase `backward`: input and weight gradients), `input`
    (zero-bubble B, phase `backward_input`) or `weight` (zero-bubble W, phase
    `backward_weight`). Weight gradients the callee returns are added to the
    buffer's gradient accumulator; the op's results are the callee's other
    results. `version` names the weights read (under weight stashing, the
    version the matching forward read).

    ```mlir
    %dx = pipe.backward @stage1_bwd(%x, %dy) weights %w[1] mb 0
            : (tensor<8x4xf32>, tensor<8x2xf32>) -> tensor<8x4xf32>
    pipe.backward weight @stage1_bw(%x, %dy) weights %w[0] mb 0
            : (tensor<8x4xf32>, tensor<8x2xf32>) -> ()
    ```
  }];
  let arguments = (ins DefaultValuedAttr<Pipe_BackwardPartAttr,
                           "::mlir::pipec::pipe::BackwardPart::Full">:$part,
                       FlatSymbolRefAttr:$callee, Variadic<AnyType>:$inputs,
                       Optional<Pipe_WeightsType>:$weights,
                       OptionalAttr<Pipe_IntAttr>:$version,
                       DefaultValuedAttr<Pipe_VersionClockAttr,
                           "::mlir::pipec::pipe::VersionClock::Slot">:$version_clock,
                       Pipe_IntAttr:$mb, Optional<Index>:$mb_base);
  let results = (outs Variadic<AnyType>:$results);
  let assemblyFormat = [{
    custom<BackwardPart>($part) `` $callee `(` $inputs `)` (`weights` $weights^ `[` custom<Version>($version_clock, $version) `]`)?
    custom<MicroBatch>($mb_base, $mb) attr-dict `:` functional-type($inputs, $results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Data, transfers, logs
//===----------------------------------------------------------------------===//

def Pipe_FeedOp : Pipe_InstrOp<"feed"> {
  let summary = "reads micro-batch `mb` of a graph input from the data feed";
  let description = [{
    ```mlir
    %x = pipe.feed "input" mb 0 : tensor<8x4xf32>
    ```
  }];
  let arguments = (ins StrAttr:$input, Pipe_IntAttr:$mb, Optional<Index>:$mb_base);
  let results = (outs AnyRankedTensor:$value);
  let assemblyFormat = "$input custom<MicroBatch>($mb_base, $mb) attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Pipe_SendOp : Pipe_InstrOp<"send"> {
  let summary = "sends a tensor to device `peer`";
  let description = [{
    Matches the `pipe.recv` on `peer` with the same micro-batch, tag and
    type; sends and receives between two devices happen in program order.

    ```mlir
    pipe.send %y to 1 mb 0 tag "fc1.out" : tensor<8x8xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$value, Pipe_IntAttr:$peer, Pipe_IntAttr:$mb,
                       StrAttr:$tag, Optional<Index>:$mb_base);
  let assemblyFormat = [{
    $value `to` $peer custom<MicroBatch>($mb_base, $mb) `tag` $tag attr-dict `:` type($value)
  }];
  let hasVerifier = 1;
}

def Pipe_RecvOp : Pipe_InstrOp<"recv"> {
  let summary = "receives a tensor from device `peer`";
  let description = [{
    ```mlir
    %x = pipe.recv from 0 mb 0 tag "fc1.out" : tensor<8x8xf32>
    ```
  }];
  let arguments = (ins Pipe_IntAttr:$peer, Pipe_IntAttr:$mb, StrAttr:$tag,
                       Optional<Index>:$mb_base);
  let results = (outs AnyRankedTensor:$value);
  let assemblyFormat = [{
    `from` $peer custom<MicroBatch>($mb_base, $mb) `tag` $tag attr-dict `:` type($value)
  }];
  let hasVerifier = 1;
}

def Pipe_ReportLossOp : Pipe_InstrOp<"report_loss"> {
  let summary = "reports the loss of micro-batch `mb`";
  let description = [{
    The step's reported loss is the mean of its micro-batches' losses.

    ```mlir
    pipe.report_loss %l mb 0 : tensor<f32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$loss, Pipe_IntAttr:$mb,
                       Optional<Index>:$mb_base);
  let assemblyFormat = "$loss custom<MicroBatch>($mb_base, $mb) attr-dict `:` type($loss)";
  let hasVerifier = 1;
}

def Pipe_ReportMetricOp : Pipe_InstrOp<"report_metric"> {
  let summary = "adds micro-batch `mb`'s count to an evaluation's output slot";
  let description = [{
    An evaluation program's count (pipe.metric on the stage result, see
    buildAccuracyCounts): the entry writes the sum over its micro-batches
    to slot `slot` of its output array, after the loss in slot 0.

    ```mlir
    pipe.report_metric %correct slot 1 mb %k : tensor<f32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$value, Pipe_IntAttr:$slot,
                       Pipe_IntAttr:$mb, Optional<Index>:$mb_base);
  let assemblyFormat = [{
    $value `slot` $slot custom<MicroBatch>($mb_base, $mb) attr-dict `:` type($value)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Micro-batch loops and in-flight activations
//===----------------------------------------------------------------------===//

def Pipe_LoopOp : Pipe_Op<"loop", [HasParent<"ProgramOp">, SingleBlock,
    NoTerminator,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "repeats its instructions over a range of micro-batch indices";
  let description = [{
    Runs its body once for each `%k` in `[lower, upper)`, in order. The
    instructions in the body name their micro-batch relative to `%k`
    (`mb %k + 2`), so the steady state of a schedule (1F1B's
    one-forward-one-backward, GPipe's forwards) is one copy of its
    instructions whatever the micro-batch count. Values defined in the body
    live for one iteration; what a later iteration needs travels through a
    `pipe.activation_buffer`.

    ```mlir
    pipe.loop %k = 0 to 6 {
      %x = pipe.recv from 0 mb %k + 1 tag "h" : tensor<4x8xf32>
      ...
    }
    ```
  }];
  let arguments = (ins Pipe_IntAttr:$lower, Pipe_IntAttr:$upper);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let builders = [OpBuilder<(ins "int64_t":$lower, "int64_t":$upper)>];
  let extraClassDeclaration = [{
    ::mlir::Block &getInstructions() { return getBody().front(); }
    /// The micro-batch index %k.
    ::mlir::BlockArgument getIndex() { return getBody().front().getArgument(0); }
    int64_t getTripCount() { return getUpper() - getLower(); }
  }];
}

def Pipe_ActivationBufferOp : Pipe_DeclOp<"activation_buffer", [
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "storage for one tensor of the micro-batches in flight";
  let description = [{
    Holds a value of type `type` for up to `depth` micro-batches at once:
    micro-batch `mb` lives in slot `mb mod depth` from its `pipe.save` to its
    last `pipe.restore`. This is how a value crosses from one loop iteration
    (or one part of the program) to another, e.g. a forward's activations to
    the backward of the same micro-batch a few iterations later.
    pipe-verify-schedule checks that no slot is overwritten while in use and
    that every restore finds the micro-batch it names.

    ```mlir
    %a = pipe.activation_buffer "h" depth 2 : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, Pipe_IntAttr:$depth, TypeAttr:$type);
  let results = (outs Pipe_ActivationsType:$buffer);
  let assemblyFormat = "$name `depth` $depth attr-dict `:` $type";
  let hasVerifier = 1;
}

def Pipe_SaveOp : Pipe_InstrOp<"save"> {
  let summary = "keeps a micro-batch's value in an activation buffer";
  let description = [{
    ```mlir
    pipe.save %x into %a mb %k + 1 : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$value, Pipe_ActivationsType:$buffer,
                       Pipe_IntAttr:$mb, Optional<Index>:$mb_base);
  let assemblyFormat = [{
    $value `into` $buffer custom<MicroBatch>($mb_base, $mb) attr-dict `:` type($value)
  }];
  let hasVerifier = 1;
}

def Pipe_RestoreOp : Pipe_InstrOp<"restore"> {
  let summary = "reads a micro-batch's value back from an activation buffer";
  let description = [{
    ```mlir
    %x = pipe.restore %a mb %k : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Pipe_ActivationsType:$buffer, Pipe_IntAttr:$mb,
                       Optional<Index>:$mb_base);
  let results = (outs AnyRankedTensor:$value);
  let assemblyFormat = [{
    $buffer custom<MicroBatch>($mb_base, $mb) attr-dict `:` type($value)
  }];
  let hasVerifier = 1;
}

#endif // PIPEC_PIPE_OPS
