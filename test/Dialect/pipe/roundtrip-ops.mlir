// RUN: pipe-opt %s | pipe-opt | FileCheck %s
// RUN: pipe-opt %s --mlir-print-op-generic | pipe-opt | FileCheck %s

// Stage computations of every phase. Stage 0 has no weights.

// CHECK-LABEL: pipe.stage @relu_fwd forward stage 0 (%{{.*}}: tensor<2x4xf32>) -> tensor<2x4xf32> {
pipe.stage @relu_fwd forward stage 0 (%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = "onnx.Relu"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  pipe.return %y : tensor<2x4xf32>
}

// CHECK-LABEL: pipe.stage @lin_fwd forward stage 1 params 2 (%{{.*}}: tensor<4x3xf32>, %{{.*}}: tensor<3xf32>, %{{.*}}: tensor<2x4xf32>) -> tensor<2x3xf32> attributes {pipe.note = "bias added"} {
pipe.stage @lin_fwd forward stage 1 params 2 (%w: tensor<4x3xf32>, %b: tensor<3xf32>, %x: tensor<2x4xf32>) -> tensor<2x3xf32> attributes {pipe.note = "bias added"} {
  %y = "onnx.Gemm"(%x, %w, %b) : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  pipe.return %y : tensor<2x3xf32>
}

// CHECK-LABEL: pipe.stage @lin_bwd backward stage 1 params 2 (%{{.*}}: tensor<4x3xf32>, %{{.*}}: tensor<3xf32>, %{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<2x3xf32>) -> (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>) {
pipe.stage @lin_bwd backward stage 1 params 2 (%w: tensor<4x3xf32>, %b: tensor<3xf32>, %x: tensor<2x4xf32>, %dy: tensor<2x3xf32>) -> (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>) {
  %none = "onnx.NoValue"() : () -> none
  %dx = "onnx.Gemm"(%dy, %w, %none) {transB = 1 : i64} : (tensor<2x3xf32>, tensor<4x3xf32>, none) -> tensor<2x4xf32>
  %dw = "onnx.Gemm"(%x, %dy, %none) {transA = 1 : i64} : (tensor<2x4xf32>, tensor<2x3xf32>, none) -> tensor<4x3xf32>
  %rows = "onnx.Constant"() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %db = "onnx.ReduceSum"(%dy, %rows) {keepdims = 0 : i64} : (tensor<2x3xf32>, tensor<1xi64>) -> tensor<3xf32>
  pipe.return %dx, %dw, %db : tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>
}

// Zero bubble: B (input gradient) and W (weight gradients) apart.
// CHECK-LABEL: pipe.stage @lin_bgrad backward_input stage 1 params 2
// CHECK-SAME:    -> tensor<2x4xf32>
pipe.stage @lin_bgrad backward_input stage 1 params 2 (%w: tensor<4x3xf32>, %b: tensor<3xf32>, %dy: tensor<2x3xf32>) -> tensor<2x4xf32> {
  %none = "onnx.NoValue"() : () -> none
  %dx = "onnx.Gemm"(%dy, %w, %none) {transB = 1 : i64} : (tensor<2x3xf32>, tensor<4x3xf32>, none) -> tensor<2x4xf32>
  pipe.return %dx : tensor<2x4xf32>
}

// CHECK-LABEL: pipe.stage @lin_wgrad backward_weight stage 1 params 2
// CHECK-SAME:    -> (tensor<4x3xf32>, tensor<3xf32>)
pipe.stage @lin_wgrad backward_weight stage 1 params 2 (%w: tensor<4x3xf32>, %b: tensor<3xf32>, %x: tensor<2x4xf32>, %dy: tensor<2x3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>) {
  %none = "onnx.NoValue"() : () -> none
  %dw = "onnx.Gemm"(%x, %dy, %none) {transA = 1 : i64} : (tensor<2x4xf32>, tensor<2x3xf32>, none) -> tensor<4x3xf32>
  %rows = "onnx.Constant"() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %db = "onnx.ReduceSum"(%dy, %rows) {keepdims = 0 : i64} : (tensor<2x3xf32>, tensor<1xi64>) -> tensor<3xf32>
  pipe.return %dw, %db : tensor<4x3xf32>, tensor<3xf32>
}

// A device holding two stages (interleaved); a stage without weights; the
// schedule name is accepted as a keyword too.
// CHECK-LABEL: pipe.program @interleaved device 0 stages [0, 1] schedule "interleaved_1f1b" microbatches 4 attributes {pipe.note = "two chunks"} {
// CHECK:         %[[X:.*]] = pipe.feed "x" mb 3 : tensor<2x4xf32>
// CHECK:         %[[R:.*]] = pipe.forward @relu_fwd(%[[X]]) mb 3 : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK:         %[[W:.*]] = pipe.weight_buffer stage 1 versions 1 ("fc.weight": tensor<4x3xf32>, "fc.bias": tensor<3xf32>)
// CHECK:         pipe.forward @lin_fwd(%[[R]]) weights %[[W]][0] mb 3 : (tensor<2x4xf32>) -> tensor<2x3xf32>
pipe.program @interleaved device 0 stages [0, 1] schedule interleaved_1f1b microbatches 4 attributes {pipe.note = "two chunks"} {
  %x = pipe.feed "x" mb 3 : tensor<2x4xf32>
  %r = pipe.forward @relu_fwd(%x) mb 3 : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %w = pipe.weight_buffer stage 1 versions 1 ("fc.weight": tensor<4x3xf32>, "fc.bias": tensor<3xf32>)
  %y = pipe.forward @lin_fwd(%r) weights %w[0] mb 3 : (tensor<2x4xf32>) -> tensor<2x3xf32>
}

// CHECK-LABEL: pipe.program @zero_bubble device 1 stages [1] schedule "zb_h1" microbatches 1 {
// CHECK:         %[[DX:.*]] = pipe.backward input @lin_bgrad(%[[DY:.*]]) weights %[[W:.*]][0] mb 0 : (tensor<2x3xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    pipe.send %[[DX]] to 0 mb 0 tag "x.grad" : tensor<2x4xf32>
// CHECK-NEXT:    pipe.backward weight @lin_wgrad(%{{.*}}, %[[DY]]) weights %[[W]][0] mb 0 : (tensor<2x4xf32>, tensor<2x3xf32>) -> ()
// CHECK-NEXT:    pipe.backward @lin_bwd(%{{.*}}, %[[DY]]) weights %[[W]][0] mb 0 : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<2x4xf32>
pipe.program @zero_bubble device 1 stages [1] schedule "zb_h1" microbatches 1 {
  %w = pipe.weight_buffer stage 1 versions 1 ("fc.weight": tensor<4x3xf32>, "fc.bias": tensor<3xf32>)
  %x = pipe.recv from 0 mb 0 tag "x" : tensor<2x4xf32>
  %dy = pipe.feed "dy" mb 0 : tensor<2x3xf32>
  %dx = pipe.backward input @lin_bgrad(%dy) weights %w[0] mb 0 : (tensor<2x3xf32>) -> tensor<2x4xf32>
  pipe.send %dx to 0 mb 0 tag "x.grad" : tensor<2x4xf32>
  pipe.backward weight @lin_wgrad(%x, %dy) weights %w[0] mb 0 : (tensor<2x4xf32>, tensor<2x3xf32>) -> ()
  // `full` is the default and is not printed.
  %dx2 = pipe.backward full @lin_bwd(%x, %dy) weights %w[0] mb 0 : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<2x4xf32>
}

// Every optimizer and its hyper-parameters.
// CHECK-LABEL: pipe.program @optimizers device 2 stages [1] schedule "gpipe" microbatches 1 {
// CHECK:         pipe.update %[[W:.*]] sgd lr(1.000000e-01)
// CHECK-NEXT:    pipe.update %[[W]] sgd lr(1.000000e-01) weight_decay(1.000000e-04) grad_scale(2.500000e-01)
// CHECK-NEXT:    pipe.update %[[W]] momentum lr(1.000000e-01) momentum(9.000000e-01) dampening(1.000000e-01)
// CHECK-NEXT:    pipe.update %[[W]] nesterov lr(1.000000e-01) momentum(9.000000e-01) weight_decay(5.000000e-04)
// CHECK-NEXT:    pipe.update %[[W]] adam lr(1.000000e-03) beta1(9.000000e-01) beta2(0.99899999999999999) epsilon(1.000000e-08)
// CHECK-NEXT:    pipe.update %[[W]] adamw lr(1.000000e-03) beta1(9.000000e-01) beta2(0.99899999999999999) epsilon(1.000000e-08) weight_decay(0.000000e+00)
// CHECK-NEXT:    pipe.update %[[W]] adagrad lr(1.000000e-02) epsilon(1.000000e-10)
// CHECK-NEXT:    pipe.update %[[W]] sgd lr(1.000000e-01) lr_scale(2.500000e-01) anneal_steps(1000)
pipe.program @optimizers device 2 stages [1] schedule gpipe microbatches 1 {
  %w = pipe.weight_buffer stage 1 versions 1 ("fc.weight": tensor<4x3xf32>, "fc.bias": tensor<3xf32>)
  pipe.update %w sgd lr(0.1)
  pipe.update %w sgd lr(0.1) weight_decay(1.0e-4) grad_scale(0.25)
  pipe.update %w momentum lr(0.1) momentum(0.9) dampening(0.1)
  pipe.update %w nesterov lr(0.1) momentum(0.9) weight_decay(5.0e-4)
  pipe.update %w adam lr(1.0e-3) beta1(0.9) beta2(0.999) epsilon(1.0e-8)
  pipe.update %w adamw lr(1.0e-3) beta1(0.9) beta2(0.999) epsilon(1.0e-8) weight_decay(0.0)
  pipe.update %w adagrad lr(0.01) epsilon(1.0e-10)
  // PipeMare: stage learning rate 1/tau annealed to lr over 1000 steps.
  pipe.update %w sgd lr(0.1) lr_scale(0.25) anneal_steps(1000)
}

// SpecTrain: forward on weights predicted 2 updates ahead (for the
// micro-batch of the forward it precedes), backward on the live ones.
// CHECK-LABEL: pipe.program @spectrain device 3 stages [1] schedule "spectrain" microbatches 2 {
// CHECK:         %[[W:.*]] = pipe.weight_buffer stage 1 versions 3
// CHECK-NEXT:    pipe.predict %[[W]][0] into 1 gap 2 velocity lr(1.000000e-01)
// CHECK-NEXT:    pipe.predict %[[W]][0] into 2 gap 0 velocity lr(1.000000e-01) mb 1
// CHECK-NEXT:    pipe.update %[[W]] momentum lr(1.000000e-01) momentum(9.000000e-01)
pipe.program @spectrain device 3 stages [1] schedule "spectrain" microbatches 2 {
  %w = pipe.weight_buffer stage 1 versions 3 ("fc.weight": tensor<4x3xf32>, "fc.bias": tensor<3xf32>)
  pipe.predict %w[0] into 1 gap 2 velocity lr(0.1)
  pipe.predict %w[0] into 2 gap 0 velocity lr(0.1) mb 1
  pipe.update %w momentum lr(0.1) momentum(0.9)
}

// PipeMare: T1's annealed learning rate, T2's backward weights W - 2·δ.
// CHECK-LABEL: pipe.program @pipemare device 7 stages [0] schedule "pipemare" microbatches 2 {
// CHECK:         %[[W:.*]] = pipe.weight_buffer stage 0 versions 2
// CHECK-NEXT:    pipe.loop %[[K:.*]] = 0 to 2 {
// CHECK-NEXT:      pipe.predict %[[W]][0] into 1 gap 2 delta mb %[[K]]
// CHECK-NEXT:      pipe.update %[[W]] sgd lr(1.000000e-01) lr_scale(5.000000e-01) anneal_steps(100) discrepancy(9.000000e-01) mb %[[K]]
pipe.program @pipemare device 7 stages [0] schedule "pipemare" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 2 ("fc.weight": tensor<4x3xf32>)
  pipe.loop %k = 0 to 2 {
    pipe.predict %w[0] into 1 gap 2 delta mb %k
    pipe.update %w sgd lr(0.1) lr_scale(0.5) anneal_steps(100) discrepancy(0.9) mb %k
  }
}

// AvgPipe: replica of stage 1 in pipeline 1, averaged with device 4 every
// 4 steps; PipeDream-style stash; a tied weight's gradient.
// CHECK-LABEL: pipe.program @avgpipe device 5 stages [1] schedule "avgpipe" microbatches 2 pipeline 1 {
// CHECK:         %[[W:.*]] = pipe.weight_buffer stage 1 versions 3
// CHECK-NEXT:    pipe.stash %[[W]][0] into 2
// CHECK-NEXT:    pipe.zero_grad %[[W]]
// CHECK-NEXT:    %[[G:.*]] = pipe.recv from 4 mb 1 tag "fc.bias.grad" : tensor<3xf32>
// CHECK-NEXT:    pipe.accumulate %[[G]] into %[[W]] param 1 : tensor<3xf32>
// CHECK-NEXT:    pipe.allreduce sum %[[W]] among [4, 5] params [0]
// CHECK-NEXT:    pipe.allreduce mean %[[W]] among [5, 6, 7]
// CHECK-NEXT:    pipe.update %[[W]] sgd lr(1.000000e-01)
// CHECK-NEXT:    pipe.average %[[W]][0] centre 1 among [4, 5] alpha(5.000000e-01) period 4
// CHECK-NEXT:    pipe.average %[[W]][0] centre 1 among [4, 5] alpha(1.000000e-01){{$}}
pipe.program @avgpipe device 5 stages [1] schedule "avgpipe" microbatches 2 pipeline 1 {
  %w = pipe.weight_buffer stage 1 versions 3 ("fc.weight": tensor<4x3xf32>, "fc.bias": tensor<3xf32>)
  pipe.stash %w[0] into 2
  pipe.zero_grad %w
  %g = pipe.recv from 4 mb 1 tag "fc.bias.grad" : tensor<3xf32>
  pipe.accumulate %g into %w param 1 : tensor<3xf32>
  pipe.allreduce sum %w among [4, 5] params [0]
  pipe.allreduce mean %w among [5, 6, 7]
  pipe.update %w sgd lr(0.1)
  pipe.average %w[0] centre 1 among [4, 5] alpha(0.5) period 4
  pipe.average %w[0] centre 1 among [4, 5] alpha(0.1) period 1
}

// CHECK-LABEL: pipe.program @empty device 6 stages [0] schedule "pipemare" microbatches 1 {
// CHECK-NEXT:  }
pipe.program @empty device 6 stages [0] schedule "pipemare" microbatches 1 {
}
