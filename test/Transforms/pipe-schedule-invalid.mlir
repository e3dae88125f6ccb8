// RUN: pipe-opt %s --split-input-file -verify-diagnostics --pipe-schedule="kind=1f1b microbatches=2"
// RUN: not pipe-opt %S/Inputs/schedule-p1.mlir --pipe-schedule="kind=zb_h1 microbatches=2" 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not pipe-opt %S/Inputs/schedule-p1.mlir --pipe-schedule="kind=gpipe" 2>&1 | FileCheck %s --check-prefix=MB
// RUN: not pipe-opt %S/Inputs/schedule-p1.mlir --pipe-schedule="kind=gpipe microbatches=2 optimizer=adam" 2>&1 | FileCheck %s --check-prefix=LR

// KIND: error: pipe-schedule: kind must be gpipe, 1f1b, afp, pipedream, 2bw, spectrain or pipemare, not 'zb_h1'
// MB: error: pipe-schedule: microbatches must be >= 1 (got 0)
// LR: error: pipe-schedule: optimizer=adam needs lr > 0

// Where an argument comes from must be said.
// expected-error@+1 {{argument 0 of @f0 has neither pipe.input nor pipe.name: pipe-schedule cannot tell where it comes from}}
pipe.stage @f0 forward stage 0 (%x: tensor<2xf32>) -> (tensor<f32> {pipe.loss}) {
  %none = "onnx.NoValue"() : () -> none
  %l = "onnx.ReduceMean"(%x, %none) {keepdims = 0 : i64} : (tensor<2xf32>, none) -> tensor<f32>
  pipe.return %l : tensor<f32>
}
pipe.stage @b0 backward stage 0 (%x: tensor<2xf32> {pipe.input = "x"}) -> () {
  pipe.return
}

// -----

// Weights need an optimizer.
// expected-error@+1 {{pipe-schedule: no optimizer for stage 0: pass optimizer=<kind> lr=<lr>, or put a pipe.optimizer dictionary on the stage's forward or the module}}
pipe.stage @f0 forward stage 0 params 1 (%w: tensor<2xf32> {pipe.param = "w"}, %x: tensor<2xf32> {pipe.input = "x"}) -> (tensor<f32> {pipe.loss}) {
  %y = "onnx.Mul"(%x, %w) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %none = "onnx.NoValue"() : () -> none
  %l = "onnx.ReduceMean"(%y, %none) {keepdims = 0 : i64} : (tensor<2xf32>, none) -> tensor<f32>
  pipe.return %l : tensor<f32>
}
pipe.stage @b0 backward stage 0 params 1 (%w: tensor<2xf32>, %x: tensor<2xf32> {pipe.input = "x"}) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}

// -----

// Weights need their onnx names.
// expected-error@+1 {{weight argument 0 of @f0 has no pipe.param name}}
pipe.stage @f0 forward stage 0 params 1 (%w: tensor<2xf32>, %x: tensor<2xf32> {pipe.input = "x"}) -> (tensor<f32> {pipe.loss}) {
  %none = "onnx.NoValue"() : () -> none
  %l = "onnx.ReduceMean"(%x, %none) {keepdims = 0 : i64} : (tensor<2xf32>, none) -> tensor<f32>
  pipe.return %l : tensor<f32>
}
pipe.stage @b0 backward stage 0 params 1 (%w: tensor<2xf32>, %x: tensor<2xf32> {pipe.input = "x"}) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}

// -----

// The optimizer's own rules apply, reported where it was given.
// expected-error@+1 {{'pipe.update' op 'momentum' does not apply to the sgd optimizer}}
module attributes {pipe.optimizer = {kind = "sgd", lr = 0.1 : f64, momentum = 0.9 : f64}} {
  pipe.stage @f0 forward stage 0 params 1 (%w: tensor<2xf32> {pipe.param = "w"}, %x: tensor<2xf32> {pipe.input = "x"}) -> (tensor<f32> {pipe.loss}) {
    %none = "onnx.NoValue"() : () -> none
    %l = "onnx.ReduceMean"(%x, %none) {keepdims = 0 : i64} : (tensor<2xf32>, none) -> tensor<f32>
    pipe.return %l : tensor<f32>
  }
  pipe.stage @b0 backward stage 0 params 1 (%w: tensor<2xf32>, %x: tensor<2xf32> {pipe.input = "x"}) -> tensor<2xf32> {
    pipe.return %x : tensor<2xf32>
  }
}

// -----

// expected-error@+1 {{pipe.optimizer: unknown key 'rate' (kind, lr, momentum, dampening, beta1, beta2, epsilon, weight_decay, grad_scale, lr_schedule, clip_grad_norm)}}
module attributes {pipe.optimizer = {kind = "sgd", rate = 0.1 : f64}} {
  pipe.stage @f0 forward stage 0 params 1 (%w: tensor<2xf32> {pipe.param = "w"}, %x: tensor<2xf32> {pipe.input = "x"}) -> (tensor<f32> {pipe.loss}) {
    %none = "onnx.NoValue"() : () -> none
    %l = "onnx.ReduceMean"(%x, %none) {keepdims = 0 : i64} : (tensor<2xf32>, none) -> tensor<f32>
    pipe.return %l : tensor<f32>
  }
  pipe.stage @b0 backward stage 0 params 1 (%w: tensor<2xf32>, %x: tensor<2xf32> {pipe.input = "x"}) -> tensor<2xf32> {
    pipe.return %x : tensor<2xf32>
  }
}

// -----

// Activations only cross between neighbours, by name.
pipe.stage @f0 forward stage 0 (%x: tensor<2xf32> {pipe.input = "x"}) -> (tensor<2xf32> {pipe.name = "h"}) {
  pipe.return %x : tensor<2xf32>
}
pipe.stage @b0 backward stage 0 (%x: tensor<2xf32> {pipe.input = "x"}) -> () {
  pipe.return
}
// expected-error@+1 {{@f1 takes 'g', which forward @f0 of stage 0 does not return (only neighbouring stages exchange activations)}}
pipe.stage @f1 forward stage 1 (%h: tensor<2xf32> {pipe.name = "g"}) -> (tensor<f32> {pipe.loss}) {
  %none = "onnx.NoValue"() : () -> none
  %l = "onnx.ReduceMean"(%h, %none) {keepdims = 0 : i64} : (tensor<2xf32>, none) -> tensor<f32>
  pipe.return %l : tensor<f32>
}
pipe.stage @b1 backward stage 1 (%h: tensor<2xf32> {pipe.name = "g"}) -> () {
  pipe.return
}

// -----

pipe.stage @f0 forward stage 0 (%x: tensor<2xf32> {pipe.input = "x"}) -> (tensor<2xf32> {pipe.name = "h"}) {
  pipe.return %x : tensor<2xf32>
}
pipe.stage @b0 backward stage 0 (%x: tensor<2xf32> {pipe.input = "x"}) -> () {
  pipe.return
}
// expected-error@+1 {{@f1 takes 'h' as 'tensor<3xf32>', but @f0 returns 'tensor<2xf32>'}}
pipe.stage @f1 forward stage 1 (%h: tensor<3xf32> {pipe.name = "h"}) -> (tensor<f32> {pipe.loss}) {
  %none = "onnx.NoValue"() : () -> none
  %l = "onnx.ReduceMean"(%h, %none) {keepdims = 0 : i64} : (tensor<3xf32>, none) -> tensor<f32>
  pipe.return %l : tensor<f32>
}
pipe.stage @b1 backward stage 1 (%h: tensor<3xf32> {pipe.name = "h"}) -> () {
  pipe.return
}

// -----

// A gradient one stage needs and its neighbour does not send.
pipe.stage @f0 forward stage 0 (%x: tensor<2xf32> {pipe.input = "x"}) -> (tensor<2xf32> {pipe.name = "h"}) {
  pipe.return %x : tensor<2xf32>
}
// expected-error@+1 {{@b0 takes the gradient of 'h', which backward @b1 of stage 1 does not return}}
pipe.stage @b0 backward stage 0 (%x: tensor<2xf32> {pipe.input = "x"}, %dh: tensor<2xf32> {pipe.grad = "h"}) -> () {
  pipe.return
}
pipe.stage @f1 forward stage 1 (%h: tensor<2xf32> {pipe.name = "h"}) -> (tensor<f32> {pipe.loss}) {
  %none = "onnx.NoValue"() : () -> none
  %l = "onnx.ReduceMean"(%h, %none) {keepdims = 0 : i64} : (tensor<2xf32>, none) -> tensor<f32>
  pipe.return %l : tensor<f32>
}
pipe.stage @b1 backward stage 1 (%h: tensor<2xf32> {pipe.name = "h"}) -> () {
  pipe.return
}

// -----

// Backward results must say whose gradient they are.
pipe.stage @f0 forward stage 0 (%x: tensor<2xf32> {pipe.input = "x"}) -> (tensor<2xf32> {pipe.name = "h"}) {
  pipe.return %x : tensor<2xf32>
}
pipe.stage @b0 backward stage 0 (%x: tensor<2xf32> {pipe.input = "x"}) -> () {
  pipe.return
}
pipe.stage @f1 forward stage 1 (%h: tensor<2xf32> {pipe.name = "h"}) -> (tensor<f32> {pipe.loss}) {
  %none = "onnx.NoValue"() : () -> none
  %l = "onnx.ReduceMean"(%h, %none) {keepdims = 0 : i64} : (tensor<2xf32>, none) -> tensor<f32>
  pipe.return %l : tensor<f32>
}
// expected-error@+1 {{result 0 of @b1 must be marked pipe.grad = "<name>" with a value that forward @f1 receives from the previous stage}}
pipe.stage @b1 backward stage 1 (%h: tensor<2xf32> {pipe.name = "h"}) -> tensor<2xf32> {
  pipe.return %h : tensor<2xf32>
}

// -----

// expected-error@+1 {{forward @f0 of the last stage marks no result pipe.loss}}
pipe.stage @f0 forward stage 0 (%x: tensor<2xf32> {pipe.input = "x"}) -> tensor<f32> {
  %none = "onnx.NoValue"() : () -> none
  %l = "onnx.ReduceMean"(%x, %none) {keepdims = 0 : i64} : (tensor<2xf32>, none) -> tensor<f32>
  pipe.return %l : tensor<f32>
}
pipe.stage @b0 backward stage 0 (%x: tensor<2xf32> {pipe.input = "x"}) -> () {
  pipe.return
}

// -----

// expected-error@+1 {{stage 0 has no backward function}}
pipe.stage @f0 forward stage 0 (%x: tensor<2xf32> {pipe.input = "x"}) -> (tensor<f32> {pipe.loss}) {
  %none = "onnx.NoValue"() : () -> none
  %l = "onnx.ReduceMean"(%x, %none) {keepdims = 0 : i64} : (tensor<2xf32>, none) -> tensor<f32>
  pipe.return %l : tensor<f32>
}

// -----

pipe.stage @f0 forward stage 0 (%x: tensor<2xf32> {pipe.input = "x"}) -> (tensor<f32> {pipe.loss}) {
  %none = "onnx.NoValue"() : () -> none
  %l = "onnx.ReduceMean"(%x, %none) {keepdims = 0 : i64} : (tensor<2xf32>, none) -> tensor<f32>
  pipe.return %l : tensor<f32>
}
// expected-error@+1 {{pipe-schedule (1f1b) schedules forward and full backward stages, not backward_input}}
pipe.stage @b0 backward_input stage 0 (%x: tensor<2xf32> {pipe.input = "x"}) -> () {
  pipe.return
}

// -----

// expected-error@+1 {{pipe-schedule: stage 0 has no pipe.stage, but stage 1 has}}
module {
  pipe.stage @f1 forward stage 1 (%x: tensor<2xf32> {pipe.input = "x"}) -> (tensor<f32> {pipe.loss}) {
    %none = "onnx.NoValue"() : () -> none
    %l = "onnx.ReduceMean"(%x, %none) {keepdims = 0 : i64} : (tensor<2xf32>, none) -> tensor<f32>
    pipe.return %l : tensor<f32>
  }
  pipe.stage @b1 backward stage 1 (%x: tensor<2xf32> {pipe.input = "x"}) -> () {
    pipe.return
  }
}

// -----

pipe.stage @f0 forward stage 0 (%x: tensor<2xf32> {pipe.input = "x"}) -> (tensor<f32> {pipe.loss}) {
  %none = "onnx.NoValue"() : () -> none
  %l = "onnx.ReduceMean"(%x, %none) {keepdims = 0 : i64} : (tensor<2xf32>, none) -> tensor<f32>
  pipe.return %l : tensor<f32>
}
pipe.stage @b0 backward stage 0 (%x: tensor<2xf32> {pipe.input = "x"}) -> () {
  pipe.return
}
// expected-error@+1 {{pipe-schedule: the module is already scheduled}}
pipe.program @device0 device 0 stages [0] schedule "1f1b" microbatches 1 {
}
