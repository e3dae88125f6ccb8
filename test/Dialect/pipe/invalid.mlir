// RUN: pipe-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

//===----------------------------------------------------------------------===//
// pipe.stage, pipe.return
//===----------------------------------------------------------------------===//

// expected-error@+1 {{stage -1 is negative}}
pipe.stage @s forward stage -1 (%x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}

// -----

// expected-error@+1 {{has 2 weight parameters but only 1 arguments}}
pipe.stage @s forward stage 0 params 2 (%x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}

// -----

// expected-error@+1 {{needs a body}}
"pipe.stage"() <{sym_name = "s", function_type = (tensor<2xf32>) -> tensor<2xf32>, phase = #pipe<phase forward>, stage = 0 : i64}> ({}) : () -> ()

// -----

// expected-error@+1 {{unknown phase 'sideways'}}
pipe.stage @s sideways stage 0 (%x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}

// -----

// expected-error@+1 {{of phase 'backward' must end its results with the gradients of its weights (tensor<4xf32>), but returns (tensor<2xf32>)}}
pipe.stage @s backward stage 0 params 1 (%w: tensor<4xf32>, %dy: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %dy : tensor<2xf32>
}

// -----

// expected-error@+1 {{of phase 'backward_weight' must return exactly the gradients of its weights (tensor<4xf32>), but returns (tensor<4xf32>, tensor<2xf32>)}}
pipe.stage @s backward_weight stage 0 params 1 (%w: tensor<4xf32>, %dy: tensor<2xf32>) -> (tensor<4xf32>, tensor<2xf32>) {
  pipe.return %w, %dy : tensor<4xf32>, tensor<2xf32>
}

// -----

// expected-error@+1 {{of phase 'backward_weight' needs weights}}
pipe.stage @s backward_weight stage 0 (%dy: tensor<2xf32>) -> () {
  pipe.return
}

// -----

pipe.stage @s forward stage 0 (%x: tensor<2xf32>) -> tensor<3xf32> {
  // expected-error@+1 {{returns (tensor<2xf32>) but @s declares (tensor<3xf32>)}}
  pipe.return %x : tensor<2xf32>
}

// -----

//===----------------------------------------------------------------------===//
// pipe.program
//===----------------------------------------------------------------------===//

// expected-error@+1 {{device -1 is negative}}
pipe.program @p device -1 stages [0] schedule "gpipe" microbatches 1 {
}

// -----

// expected-error@+1 {{needs at least one micro-batch, has 0}}
pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 0 {
}

// -----

// expected-error@+1 {{holds no stage}}
pipe.program @p device 0 stages [] schedule "gpipe" microbatches 1 {
}

// -----

// expected-error@+1 {{stage -2 is negative}}
pipe.program @p device 0 stages [-2] schedule "gpipe" microbatches 1 {
}

// -----

// expected-error@+1 {{lists stage 1 twice}}
pipe.program @p device 0 stages [1, 0, 1] schedule "gpipe" microbatches 1 {
}

// -----

// expected-error@+1 {{pipeline -1 is negative}}
pipe.program @p device 0 stages [0] schedule "avgpipe" microbatches 1 pipeline -1 {
}

// -----

pipe.program @a device 3 stages [0] schedule "gpipe" microbatches 1 {
}
// expected-error@+1 {{runs on device 3, which program @a already runs on}}
pipe.program @b device 3 stages [1] schedule "gpipe" microbatches 1 {
}

// -----

// expected-error@+1 {{unknown schedule 'zigzag'}}
pipe.program @p device 0 stages [0] schedule "zigzag" microbatches 1 {
}

// -----

func.func @f() {
  // expected-error@+1 {{expects parent op 'pipe.program'}}
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// pipe.weight_buffer
//===----------------------------------------------------------------------===//

pipe.program @p device 0 stages [0, 2] schedule "interleaved_1f1b" microbatches 2 {
  // expected-error@+1 {{holds weights of stage 1, which program @p does not hold (stages [0, 2])}}
  %w = pipe.weight_buffer stage 1 versions 1 ("w": tensor<2xf32>)
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  // expected-error@+1 {{needs at least one version, has 0}}
  %w = pipe.weight_buffer stage 0 versions 0 ("w": tensor<2xf32>)
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  // expected-error@+1 {{holds no parameters}}
  %w = pipe.weight_buffer stage 0 versions 1 ()
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  // expected-error@+1 {{lists parameter "w" twice}}
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>, "w": tensor<3xf32>)
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  // expected-error@+1 {{has a parameter with an empty name}}
  %w = pipe.weight_buffer stage 0 versions 1 ("": tensor<2xf32>)
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  // expected-error@+1 {{parameter "w" must be a statically shaped tensor, not 'tensor<?xf32>'}}
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<?xf32>)
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  // expected-error@+1 {{has 2 parameter names but 1 types}}
  %w = "pipe.weight_buffer"() <{stage = 0 : i64, versions = 1 : i64, param_names = ["a", "b"], param_types = [tensor<2xf32>]}> : () -> !pipe.weights
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("a": tensor<2xf32>)
  // expected-error@+1 {{declares a second weight buffer for stage 0}}
  %v = pipe.weight_buffer stage 0 versions 1 ("b": tensor<2xf32>)
}

// -----

//===----------------------------------------------------------------------===//
// pipe.stash, pipe.predict, pipe.average
//===----------------------------------------------------------------------===//

pipe.program @p device 0 stages [0] schedule "pipedream" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 2 ("w": tensor<2xf32>)
  // expected-error@+1 {{target version 2 is out of range: the weight buffer of stage 0 keeps 2 versions}}
  pipe.stash %w[0] into 2
}

// -----

pipe.program @p device 0 stages [0] schedule "pipedream" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 2 ("w": tensor<2xf32>)
  // expected-error@+1 {{source version -1 is out of range}}
  pipe.stash %w[-1] into 1
}

// -----

pipe.program @p device 0 stages [0] schedule "pipedream" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 2 ("w": tensor<2xf32>)
  // expected-error@+1 {{source version and target version are the same slot 1}}
  pipe.stash %w[1] into 1
}

// -----

pipe.program @p device 0 stages [0] schedule "pipedream" microbatches 2 {
  %w = "test.weights"() : () -> !pipe.weights
  // expected-error@+1 {{weights must be defined by a pipe.weight_buffer}}
  pipe.stash %w[0] into 1
}

// -----

pipe.program @p device 0 stages [0] schedule "spectrain" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 2 ("w": tensor<2xf32>)
  // expected-error@+1 {{needs a velocity: its weight buffer must be updated in this program by an sgd, momentum, nesterov, adam or adamw pipe.update}}
  pipe.predict %w[0] into 1 gap 1 velocity lr(0.1)
  pipe.update %w adagrad lr(0.1) epsilon(1.0e-10)
}

// -----

pipe.program @p device 0 stages [0] schedule "pipemare" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 2 ("w": tensor<2xf32>)
  // expected-error@+1 {{needs a weight velocity δ: its weight buffer must be updated in this program by a pipe.update with discrepancy(γ)}}
  pipe.predict %w[0] into 1 gap 1 delta
  pipe.update %w sgd lr(0.1)
}

// -----

pipe.program @p device 0 stages [0] schedule "pipemare" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 2 ("w": tensor<2xf32>)
  // expected-error@+1 {{a delta prediction takes no lr}}
  pipe.predict %w[0] into 1 gap 1 delta lr(0.1)
  pipe.update %w sgd lr(0.1) discrepancy(0.5)
}

// -----

pipe.program @p device 0 stages [0] schedule "pipemare" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{discrepancy γ must be in [0, 1)}}
  pipe.update %w sgd lr(0.1) discrepancy(1.0)
}

// -----

pipe.program @p device 0 stages [0] schedule "spectrain" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 2 ("w": tensor<2xf32>)
  // expected-error@+1 {{version gap -1 is negative}}
  pipe.predict %w[0] into 1 gap -1 velocity lr(0.1)
  pipe.update %w adam lr(0.1) beta1(0.9) beta2(0.99) epsilon(1.0e-8)
}

// -----

pipe.program @p device 0 stages [0] schedule "spectrain" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 2 ("w": tensor<2xf32>)
  // expected-error@+1 {{a velocity prediction needs a positive lr}}
  pipe.predict %w[0] into 1 gap 1 velocity lr(0.0)
  pipe.update %w momentum lr(0.1) momentum(0.9)
}

// -----

pipe.program @p device 0 stages [0] schedule "spectrain" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 2 ("w": tensor<2xf32>)
  // expected-error@+1 {{target version 3 is out of range}}
  pipe.predict %w[0] into 3 gap 1 velocity lr(0.1)
  pipe.update %w momentum lr(0.1) momentum(0.9)
}

// -----

pipe.program @p device 0 stages [0] schedule "avgpipe" microbatches 2 pipeline 0 {
  %w = pipe.weight_buffer stage 0 versions 2 ("w": tensor<2xf32>)
  // expected-error@+1 {{alpha 1.500000e+00 is outside (0, 1]}}
  pipe.average %w[0] centre 1 among [0, 2] alpha(1.5)
}

// -----

pipe.program @p device 0 stages [0] schedule "avgpipe" microbatches 2 pipeline 0 {
  %w = pipe.weight_buffer stage 0 versions 2 ("w": tensor<2xf32>)
  // expected-error@+1 {{period 0 must be at least one step}}
  pipe.average %w[0] centre 1 among [0, 2] alpha(0.5) period 0
}

// -----

pipe.program @p device 0 stages [0] schedule "avgpipe" microbatches 2 pipeline 0 {
  %w = pipe.weight_buffer stage 0 versions 2 ("w": tensor<2xf32>)
  // expected-error@+1 {{version and centre version are the same slot 0}}
  pipe.average %w[0] centre 0 among [0, 2] alpha(0.5)
}

// -----

pipe.program @p device 0 stages [0] schedule "avgpipe" microbatches 2 pipeline 0 {
  %w = pipe.weight_buffer stage 0 versions 2 ("w": tensor<2xf32>)
  // expected-error@+1 {{centre version 2 is out of range}}
  pipe.average %w[0] centre 2 among [0, 2] alpha(0.5)
}

// -----

pipe.program @p device 0 stages [0] schedule "avgpipe" microbatches 2 pipeline 0 {
  %w = pipe.weight_buffer stage 0 versions 2 ("w": tensor<2xf32>)
  // expected-error@+1 {{group [1, 2] does not contain the program's device 0}}
  pipe.average %w[0] centre 1 among [1, 2] alpha(0.5)
}

// -----

pipe.program @p device 0 stages [0] schedule "avgpipe" microbatches 2 pipeline 0 {
  %w = pipe.weight_buffer stage 0 versions 2 ("w": tensor<2xf32>)
  // expected-error@+1 {{group [0] needs at least two devices}}
  pipe.average %w[0] centre 1 among [0] alpha(0.5)
}

// -----

pipe.program @p device 0 stages [0] schedule "avgpipe" microbatches 2 pipeline 0 {
  %w = pipe.weight_buffer stage 0 versions 2 ("w": tensor<2xf32>)
  // expected-error@+1 {{group lists device 2 twice}}
  pipe.average %w[0] centre 1 among [0, 2, 2] alpha(0.5)
}

// -----

pipe.program @p device 0 stages [0] schedule "avgpipe" microbatches 2 pipeline 0 {
  %w = pipe.weight_buffer stage 0 versions 2 ("w": tensor<2xf32>)
  // expected-error@+1 {{group has negative device -2}}
  pipe.average %w[0] centre 1 among [0, -2] alpha(0.5)
}

// -----

//===----------------------------------------------------------------------===//
// pipe.accumulate, pipe.allreduce
//===----------------------------------------------------------------------===//

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  %g = pipe.recv from 1 mb 0 tag "w.grad" : tensor<2xf32>
  // expected-error@+1 {{parameter 1 is out of range: the buffer holds 1}}
  pipe.accumulate %g into %w param 1 : tensor<2xf32>
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  %g = pipe.recv from 1 mb 0 tag "w.grad" : tensor<3xf32>
  // expected-error@+1 {{gradient of type 'tensor<3xf32>' does not match parameter 0 of type 'tensor<2xf32>'}}
  pipe.accumulate %g into %w param 0 : tensor<3xf32>
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{parameter 3 is out of range: the buffer holds 1}}
  pipe.allreduce sum %w among [0, 1] params [3]
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>, "v": tensor<2xf32>)
  // expected-error@+1 {{lists parameter 1 twice}}
  pipe.allreduce sum %w among [0, 1] params [1, 1]
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{lists no parameters}}
  pipe.allreduce sum %w among [0, 1] params []
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{group [1, 2] does not contain the program's device 0}}
  pipe.allreduce mean %w among [1, 2]
}

// -----

//===----------------------------------------------------------------------===//
// pipe.update
//===----------------------------------------------------------------------===//

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{the momentum optimizer needs 'momentum'}}
  pipe.update %w momentum lr(0.1)
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{the adam optimizer needs 'epsilon'}}
  pipe.update %w adam lr(0.1) beta1(0.9) beta2(0.999)
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{the adagrad optimizer needs 'epsilon'}}
  pipe.update %w adagrad lr(0.1)
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{'beta1' does not apply to the sgd optimizer}}
  pipe.update %w sgd lr(0.1) beta1(0.9)
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{'dampening' does not apply to the nesterov optimizer}}
  pipe.update %w nesterov lr(0.1) momentum(0.9) dampening(0.1)
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{'momentum' does not apply to the adam optimizer}}
  pipe.update %w adam lr(0.1) momentum(0.9) beta1(0.9) beta2(0.999) epsilon(1.0e-8)
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{learning rate -1.000000e-01 must be positive}}
  pipe.update %w sgd lr(-0.1)
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{momentum must be in [0, 1)}}
  pipe.update %w momentum lr(0.1) momentum(1.0)
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{dampening must be in [0, 1]}}
  pipe.update %w momentum lr(0.1) momentum(0.9) dampening(1.5)
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{beta1 and beta2 must be in [0, 1)}}
  pipe.update %w adamw lr(0.1) beta1(0.9) beta2(1.0) epsilon(1.0e-8)
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{epsilon must be positive}}
  pipe.update %w adagrad lr(0.1) epsilon(0.0)
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{weight decay must not be negative}}
  pipe.update %w sgd lr(0.1) weight_decay(-1.0e-4)
}

// -----

pipe.program @p device 0 stages [0] schedule "pipemare" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{lr_scale must be positive}}
  pipe.update %w sgd lr(0.1) lr_scale(0.0)
}

// -----

pipe.program @p device 0 stages [0] schedule "pipemare" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{anneal_steps needs an lr_scale to anneal}}
  pipe.update %w sgd lr(0.1) anneal_steps(100)
}

// -----

pipe.program @p device 0 stages [0] schedule "pipemare" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{anneal_steps must be at least 1}}
  pipe.update %w sgd lr(0.1) lr_scale(0.5) anneal_steps(0)
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{grad_scale must be positive}}
  pipe.update %w sgd lr(0.1) grad_scale(-0.5)
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+2 {{expected ::mlir::pipec::pipe::OptimizerKind to be one of: sgd, momentum, nesterov, adam, adamw, adagrad}}
  // expected-error@+1 {{failed to parse Pipe_OptimizerKindAttr parameter 'value'}}
  pipe.update %w lamb lr(0.1)
}

// -----

//===----------------------------------------------------------------------===//
// pipe.forward, pipe.backward
//===----------------------------------------------------------------------===//

pipe.stage @fwd forward stage 0 params 1 (%w: tensor<4xf32>, %x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<4xf32>)
  %x = pipe.feed "x" mb 0 : tensor<2xf32>
  // expected-error@+1 {{micro-batch 2 is out of range [0, 2) of program @p}}
  %y = pipe.forward @fwd(%x) weights %w[0] mb 2 : (tensor<2xf32>) -> tensor<2xf32>
}

// -----

pipe.stage @fwd forward stage 0 params 1 (%w: tensor<4xf32>, %x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<4xf32>)
  %x = pipe.feed "x" mb 0 : tensor<2xf32>
  // expected-error@+1 {{micro-batch -1 is out of range [0, 2) of program @p}}
  %y = pipe.forward @fwd(%x) weights %w[0] mb -1 : (tensor<2xf32>) -> tensor<2xf32>
}

// -----

pipe.stage @fwd forward stage 0 params 1 (%w: tensor<4xf32>, %x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.program @p device 0 stages [0] schedule "pipedream" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 2 ("w": tensor<4xf32>)
  %x = pipe.feed "x" mb 0 : tensor<2xf32>
  // expected-error@+1 {{weight version 2 is out of range: the weight buffer of stage 0 keeps 2 versions}}
  %y = pipe.forward @fwd(%x) weights %w[2] mb 0 : (tensor<2xf32>) -> tensor<2xf32>
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  %x = pipe.feed "x" mb 0 : tensor<2xf32>
  // expected-error@+1 {{calls @missing, which is not defined}}
  %y = pipe.forward @missing(%x) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
}

// -----

func.func @fwd(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}
pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  %x = pipe.feed "x" mb 0 : tensor<2xf32>
  // expected-error@+1 {{calls @fwd, which is a 'func.func', not a pipe.stage}}
  %y = pipe.forward @fwd(%x) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
}

// -----

pipe.stage @bwd backward stage 0 (%x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  %x = pipe.feed "x" mb 0 : tensor<2xf32>
  // expected-error@+1 {{needs a stage computation of phase 'forward', but @bwd is of phase 'backward'}}
  %y = pipe.forward @bwd(%x) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
}

// -----

pipe.stage @fwd forward stage 1 (%x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  %x = pipe.feed "x" mb 0 : tensor<2xf32>
  // expected-error@+1 {{calls @fwd of stage 1, which program @p does not hold}}
  %y = pipe.forward @fwd(%x) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
}

// -----

pipe.stage @fwd forward stage 1 params 1 (%w: tensor<4xf32>, %x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.program @p device 0 stages [0, 1] schedule "interleaved_1f1b" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<4xf32>)
  %x = pipe.feed "x" mb 0 : tensor<2xf32>
  // expected-error@+1 {{passes the weights of stage 0 to @fwd of stage 1}}
  %y = pipe.forward @fwd(%x) weights %w[0] mb 0 : (tensor<2xf32>) -> tensor<2xf32>
}

// -----

pipe.stage @fwd forward stage 0 params 1 (%w: tensor<4xf32>, %x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  %x = pipe.feed "x" mb 0 : tensor<2xf32>
  // expected-error@+1 {{passes 0 weight tensors, but @fwd takes 1}}
  %y = pipe.forward @fwd(%x) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
}

// -----

pipe.stage @fwd forward stage 0 params 1 (%w: tensor<4xf32>, %x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<5xf32>)
  %x = pipe.feed "x" mb 0 : tensor<2xf32>
  // expected-error@+1 {{passes weights of types (tensor<5xf32>), but @fwd takes (tensor<4xf32>)}}
  %y = pipe.forward @fwd(%x) weights %w[0] mb 0 : (tensor<2xf32>) -> tensor<2xf32>
}

// -----

pipe.stage @fwd forward stage 0 params 1 (%w: tensor<4xf32>, %x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<4xf32>)
  %x = pipe.feed "x" mb 0 : tensor<3xf32>
  // expected-error@+1 {{passes inputs (tensor<3xf32>), but @fwd takes (tensor<2xf32>) after its weights}}
  %y = pipe.forward @fwd(%x) weights %w[0] mb 0 : (tensor<3xf32>) -> tensor<2xf32>
}

// -----

pipe.stage @fwd forward stage 0 params 1 (%w: tensor<4xf32>, %x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<4xf32>)
  %x = pipe.feed "x" mb 0 : tensor<2xf32>
  // expected-error@+1 {{has results (tensor<2xf32>, tensor<2xf32>), but @fwd gives (tensor<2xf32>)}}
  %y:2 = pipe.forward @fwd(%x) weights %w[0] mb 0 : (tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)
}

// -----

pipe.stage @fwd forward stage 0 (%x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  %x = pipe.feed "x" mb 0 : tensor<2xf32>
  // expected-error@+1 {{names a weight version but passes no weights}}
  %y = "pipe.forward"(%x) <{callee = @fwd, mb = 0 : i64, version = 0 : i64, operandSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<2xf32>) -> tensor<2xf32>
}

// -----

pipe.stage @fwd forward stage 0 params 1 (%w: tensor<4xf32>, %x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<4xf32>)
  %x = pipe.feed "x" mb 0 : tensor<2xf32>
  // expected-error@+1 {{passes weights without a version}}
  %y = "pipe.forward"(%x, %w) <{callee = @fwd, mb = 0 : i64, operandSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<2xf32>, !pipe.weights) -> tensor<2xf32>
}

// -----

pipe.stage @bwd backward stage 0 params 1 (%w: tensor<4xf32>, %dy: tensor<2xf32>) -> (tensor<2xf32>, tensor<4xf32>) {
  pipe.return %dy, %w : tensor<2xf32>, tensor<4xf32>
}
pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<4xf32>)
  %dy = pipe.recv from 1 mb 0 tag "y.grad" : tensor<2xf32>
  // The weight gradient goes to the accumulator, not to the results.
  // expected-error@+1 {{has results (tensor<2xf32>, tensor<4xf32>), but @bwd gives (tensor<2xf32>)}}
  %dx:2 = pipe.backward @bwd(%dy) weights %w[0] mb 0 : (tensor<2xf32>) -> (tensor<2xf32>, tensor<4xf32>)
}

// -----

pipe.stage @bwd backward stage 0 params 1 (%w: tensor<4xf32>, %dy: tensor<2xf32>) -> (tensor<2xf32>, tensor<4xf32>) {
  pipe.return %dy, %w : tensor<2xf32>, tensor<4xf32>
}
pipe.program @p device 0 stages [0] schedule "zb_h1" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<4xf32>)
  %dy = pipe.recv from 1 mb 0 tag "y.grad" : tensor<2xf32>
  // expected-error@+1 {{needs a stage computation of phase 'backward_input', but @bwd is of phase 'backward'}}
  %dx = pipe.backward input @bwd(%dy) weights %w[0] mb 0 : (tensor<2xf32>) -> tensor<2xf32>
}

// -----

pipe.stage @wgrad backward_weight stage 0 params 1 (%w: tensor<4xf32>, %dy: tensor<2xf32>) -> tensor<4xf32> {
  pipe.return %w : tensor<4xf32>
}
pipe.program @p device 0 stages [0] schedule "zb_h1" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<4xf32>)
  %dy = pipe.recv from 1 mb 0 tag "y.grad" : tensor<2xf32>
  // expected-error@+1 {{computing weight gradients only has no results}}
  %g = pipe.backward weight @wgrad(%dy) weights %w[0] mb 0 : (tensor<2xf32>) -> tensor<4xf32>
}

// -----

pipe.stage @bwd backward stage 0 params 1 (%w: tensor<4xf32>, %dy: tensor<2xf32>) -> (tensor<2xf32>, tensor<4xf32>) {
  pipe.return %dy, %w : tensor<2xf32>, tensor<4xf32>
}
pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<4xf32>)
  %dy = pipe.recv from 1 mb 0 tag "y.grad" : tensor<2xf32>
  // expected-error@+1 {{micro-batch 5 is out of range [0, 2) of program @p}}
  %dx = pipe.backward @bwd(%dy) weights %w[0] mb 5 : (tensor<2xf32>) -> tensor<2xf32>
}

// -----

//===----------------------------------------------------------------------===//
// pipe.feed, pipe.send, pipe.recv, pipe.report_loss
//===----------------------------------------------------------------------===//

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  // expected-error@+1 {{needs the name of a graph input}}
  %x = pipe.feed "" mb 0 : tensor<2xf32>
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  // expected-error@+1 {{micro-batch 2 is out of range [0, 2) of program @p}}
  %x = pipe.feed "x" mb 2 : tensor<2xf32>
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  %x = pipe.feed "x" mb 0 : tensor<2xf32>
  // expected-error@+1 {{peer device 0 is the program's own device}}
  pipe.send %x to 0 mb 0 tag "x" : tensor<2xf32>
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  %x = pipe.feed "x" mb 0 : tensor<2xf32>
  // expected-error@+1 {{peer device -1 is negative}}
  pipe.send %x to -1 mb 0 tag "x" : tensor<2xf32>
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  %x = pipe.feed "x" mb 0 : tensor<2xf32>
  // expected-error@+1 {{needs a non-empty tag}}
  pipe.send %x to 1 mb 0 tag "" : tensor<2xf32>
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 2 {
  %x = pipe.feed "x" mb 0 : tensor<2xf32>
  // expected-error@+1 {{micro-batch 7 is out of range [0, 2) of program @p}}
  pipe.send %x to 1 mb 7 tag "x" : tensor<2xf32>
}

// -----

pipe.program @p device 1 stages [1] schedule "gpipe" microbatches 2 {
  // expected-error@+1 {{peer device 1 is the program's own device}}
  %x = pipe.recv from 1 mb 0 tag "x" : tensor<2xf32>
}

// -----

pipe.program @p device 1 stages [1] schedule "gpipe" microbatches 2 {
  // expected-error@+1 {{micro-batch -3 is out of range [0, 2) of program @p}}
  %x = pipe.recv from 0 mb -3 tag "x" : tensor<2xf32>
}

// -----

pipe.program @p device 1 stages [1] schedule "gpipe" microbatches 2 {
  %l = pipe.recv from 0 mb 0 tag "loss" : tensor<2xf32>
  // expected-error@+1 {{loss must hold exactly one element, not 'tensor<2xf32>'}}
  pipe.report_loss %l mb 0 : tensor<2xf32>
}

// -----

pipe.program @p device 1 stages [1] schedule "gpipe" microbatches 2 {
  %l = pipe.recv from 0 mb 0 tag "loss" : tensor<i32>
  // expected-error@+1 {{loss must be a floating-point tensor, not 'tensor<i32>'}}
  pipe.report_loss %l mb 0 : tensor<i32>
}

// -----

pipe.program @p device 1 stages [1] schedule "gpipe" microbatches 2 {
  %l = pipe.recv from 0 mb 0 tag "loss" : tensor<f32>
  // expected-error@+1 {{micro-batch 2 is out of range [0, 2) of program @p}}
  pipe.report_loss %l mb 2 : tensor<f32>
}

// -----

// Micro-batch loops and activation buffers.

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 4 {
  // expected-error@+1 {{range [3, 3) must be non-empty and non-negative}}
  pipe.loop %k = 3 to 3 {
  }
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 4 {
  pipe.loop %k = 0 to 3 {
    // expected-error@+1 {{micro-batch 4 (of 2..4 over the loop) is out of range [0, 4) of program @p}}
    %x = pipe.feed "x" mb %k + 2 : tensor<2xf32>
  }
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 4 {
  pipe.loop %k = 0 to 3 {
    // expected-error@+1 {{micro-batch -1 (of -1..1 over the loop) is out of range [0, 4) of program @p}}
    pipe.recv from 1 mb %k - 1 tag "h" : tensor<2xf32>
  }
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 4 {
  pipe.loop %k = 0 to 2 {
    // expected-error@+1 {{'pipe.loop' op expects parent op 'pipe.program'}}
    pipe.loop %j = 0 to 2 {
    }
  }
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 4 {
  pipe.loop %k = 0 to 2 {
    // expected-error@+1 {{'pipe.activation_buffer' op expects parent op 'pipe.program'}}
    %a = pipe.activation_buffer "h" depth 2 : tensor<2xf32>
  }
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 4 {
  // expected-error@+1 {{needs a depth of at least one, has 0}}
  %a = pipe.activation_buffer "h" depth 0 : tensor<2xf32>
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 4 {
  // expected-error@+1 {{holds 'tensor<?xf32>', not a statically shaped tensor}}
  %a = pipe.activation_buffer "h" depth 2 : tensor<?xf32>
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 4 {
  %a = pipe.activation_buffer "h" depth 2 : tensor<2xf32>
  %x = pipe.feed "x" mb 0 : tensor<3xf32>
  // expected-error@+1 {{accesses buffer "h" of 'tensor<2xf32>' as 'tensor<3xf32>'}}
  pipe.save %x into %a mb 0 : tensor<3xf32>
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 4 {
  %a = pipe.activation_buffer "h" depth 2 : tensor<2xf32>
  pipe.loop %k = 0 to 4 {
    // expected-error@+1 {{micro-batch 4 (of 1..4 over the loop) is out of range}}
    %x = pipe.restore %a mb %k + 1 : tensor<2xf32>
  }
}

// -----

pipe.program @p device 0 stages [0] schedule "gpipe" microbatches 4 {
  %c = "test.index"() : () -> index
  // expected-error@+1 {{names its micro-batch relative to}}
  %x = pipe.feed "x" mb %c + 1 : tensor<2xf32>
}

// -----

// The pipe.* attributes passes exchange are declared by the dialect and
// checked wherever they appear.

// expected-error@+1 {{'builtin.module' has pipe.microbatches = 0 : i64, but it must be a micro-batch count >= 1}}
module attributes {pipe.microbatches = 0 : i64} {
}

// -----

func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{'test.op' has pipe.stage = -1 : i64, but it must be a stage index >= 0}}
  %y = "test.op"(%x) {pipe.stage = -1 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

// expected-error@+1 {{argument 0 has pipe.init of type 'tensor<3xf32>', but the value is 'tensor<2xf32>'}}
func.func @f(%w: tensor<2xf32> {pipe.param = "w", pipe.init = dense<1.0> : tensor<3xf32>}) -> tensor<2xf32> {
  return %w : tensor<2xf32>
}

// -----

// expected-error@+1 {{argument 0 has pipe.param = "", but it must be a non-empty string}}
func.func @f(%w: tensor<2xf32> {pipe.param = ""}) -> tensor<2xf32> {
  return %w : tensor<2xf32>
}

// -----

// expected-error@+1 {{result 0 has pipe.loss = 1 : i64, but it must be a unit attribute}}
func.func @f(%x: tensor<f32>) -> (tensor<f32> {pipe.loss = 1}) {
  return %x : tensor<f32>
}

// -----

// expected-error@+1 {{'builtin.module' has pipe.loss_combine = "max", but it must be "mean" or "sum"}}
module attributes {pipe.loss_combine = "max"} {
}

// -----

// expected-error@+1 {{'builtin.module' has pipe.loss_mean = "batch", but it must be "step" or "micro-batch"}}
module attributes {pipe.loss_mean = "batch"} {
}
