// RUN: pipe-opt %s --pipe-schedule="kind=1f1b microbatches=2 loop=false" | FileCheck %s
// RUN: pipe-opt %s --pipe-schedule="kind=gpipe microbatches=2 loop=false" | FileCheck %s --check-prefix=GPIPE
// RUN: pipe-opt %s --pipe-schedule="kind=1f1b microbatches=3 loop=false optimizer=adam lr=0.001" | FileCheck %s --check-prefix=ADAM
// The generated programs print, parse, verify and simulate again.
// RUN: pipe-opt %s --pipe-schedule="kind=1f1b microbatches=5 loop=false" | pipe-opt --pipe-verify-schedule | FileCheck %s --check-prefix=VERIFIED
// RUN: pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=gpipe microbatches=3 loop=false" | pipe-opt --pipe-verify-schedule | FileCheck %s --check-prefix=P4

// The 2-stage linear model of test/Dialect/pipe/roundtrip-1f1b.mlir, with
// the attributes that say how the stages' values connect. Stage 1 brings its
// own optimizer; stage 0 takes the module's.

module attributes {pipe.optimizer = {kind = "sgd", lr = 0.1 : f64}} {
pipe.stage @s0_fwd forward stage 0 params 1 (%w: tensor<4x8xf32> {pipe.param = "fc1.weight"}, %x: tensor<2x4xf32> {pipe.input = "x"}) -> (tensor<2x8xf32> {pipe.name = "h"}) {
  %h = "onnx.MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  pipe.return %h : tensor<2x8xf32>
}
pipe.stage @s0_bwd backward stage 0 params 1 (%w: tensor<4x8xf32>, %x: tensor<2x4xf32> {pipe.input = "x"}, %dh: tensor<2x8xf32> {pipe.grad = "h"}) -> tensor<4x8xf32> {
  %none = "onnx.NoValue"() : () -> none
  %dw = "onnx.Gemm"(%x, %dh, %none) {transA = 1 : i64} : (tensor<2x4xf32>, tensor<2x8xf32>, none) -> tensor<4x8xf32>
  pipe.return %dw : tensor<4x8xf32>
}
pipe.stage @s1_fwd forward stage 1 params 1 (%w: tensor<8x3xf32> {pipe.param = "fc2.weight"}, %h: tensor<2x8xf32> {pipe.name = "h"}, %t: tensor<2x3xf32> {pipe.input = "t"}) -> (tensor<f32> {pipe.loss}, tensor<2x3xf32> {pipe.name = "d"})
    attributes {pipe.optimizer = {kind = "momentum", lr = 5.0e-02, momentum = 9.0e-01}} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.MatMul"(%h, %w) : (tensor<2x8xf32>, tensor<8x3xf32>) -> tensor<2x3xf32>
  %d = "onnx.Sub"(%y, %t) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %sq = "onnx.Mul"(%d, %d) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %loss = "onnx.ReduceMean"(%sq, %none) {keepdims = 0 : i64} : (tensor<2x3xf32>, none) -> tensor<f32>
  pipe.return %loss, %d : tensor<f32>, tensor<2x3xf32>
}
pipe.stage @s1_bwd backward stage 1 params 1 (%w: tensor<8x3xf32>, %h: tensor<2x8xf32> {pipe.name = "h"}, %d: tensor<2x3xf32> {pipe.name = "d"}) -> (tensor<2x8xf32> {pipe.grad = "h"}, tensor<8x3xf32>) {
  %none = "onnx.NoValue"() : () -> none
  %c = "onnx.Constant"() {value = dense<0.166666672> : tensor<f32>} : () -> tensor<f32>
  %g = "onnx.Mul"(%d, %c) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %dh = "onnx.Gemm"(%g, %w, %none) {transB = 1 : i64} : (tensor<2x3xf32>, tensor<8x3xf32>, none) -> tensor<2x8xf32>
  %dw = "onnx.Gemm"(%h, %g, %none) {transA = 1 : i64} : (tensor<2x8xf32>, tensor<2x3xf32>, none) -> tensor<8x3xf32>
  pipe.return %dh, %dw : tensor<2x8xf32>, tensor<8x3xf32>
}
}

// Stage 0: one warm-up forward, then forward 1 before backward 0, then the
// drain. The activations of a micro-batch (%[[X0]]) live until its backward.
// CHECK-LABEL: pipe.program @device0 device 0 stages [0] schedule "1f1b" microbatches 2 attributes {pipe.peak_in_flight = 2 : i64} {
// CHECK-NEXT:    %[[W:.*]] = pipe.weight_buffer stage 0 versions 1 ("fc1.weight": tensor<4x8xf32>)
// CHECK-NEXT:    pipe.zero_grad %[[W]]
// CHECK-NEXT:    %[[X0:.*]] = pipe.feed "x" mb 0 : tensor<2x4xf32>
// CHECK-NEXT:    %[[H0:.*]] = pipe.forward @s0_fwd(%[[X0]]) weights %[[W]][0] mb 0 : (tensor<2x4xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    pipe.send %[[H0]] to 1 mb 0 tag "h" : tensor<2x8xf32>
// CHECK-NEXT:    %[[X1:.*]] = pipe.feed "x" mb 1 : tensor<2x4xf32>
// CHECK-NEXT:    %[[H1:.*]] = pipe.forward @s0_fwd(%[[X1]]) weights %[[W]][0] mb 1 : (tensor<2x4xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    pipe.send %[[H1]] to 1 mb 1 tag "h" : tensor<2x8xf32>
// CHECK-NEXT:    %[[DH0:.*]] = pipe.recv from 1 mb 0 tag "h.grad" : tensor<2x8xf32>
// CHECK-NEXT:    pipe.backward @s0_bwd(%[[X0]], %[[DH0]]) weights %[[W]][0] mb 0 : (tensor<2x4xf32>, tensor<2x8xf32>) -> ()
// CHECK-NEXT:    %[[DH1:.*]] = pipe.recv from 1 mb 1 tag "h.grad" : tensor<2x8xf32>
// CHECK-NEXT:    pipe.backward @s0_bwd(%[[X1]], %[[DH1]]) weights %[[W]][0] mb 1 : (tensor<2x4xf32>, tensor<2x8xf32>) -> ()
// CHECK-NEXT:    pipe.update %[[W]] sgd lr(1.000000e-01)
// CHECK-NEXT:  }

// Stage 1 alternates from the start. It receives micro-batch 1 before it
// returns the gradient of 0: device 0 is sending micro-batch 1 then, and
// with blocking sends two sends must not meet.
// CHECK-LABEL: pipe.program @device1 device 1 stages [1] schedule "1f1b" microbatches 2 attributes {pipe.peak_in_flight = 1 : i64} {
// CHECK-NEXT:    %[[W:.*]] = pipe.weight_buffer stage 1 versions 1 ("fc2.weight": tensor<8x3xf32>)
// CHECK-NEXT:    pipe.zero_grad %[[W]]
// CHECK-NEXT:    %[[H0:.*]] = pipe.recv from 0 mb 0 tag "h" : tensor<2x8xf32>
// CHECK-NEXT:    %[[T0:.*]] = pipe.feed "t" mb 0 : tensor<2x3xf32>
// CHECK-NEXT:    %[[F0:.*]]:2 = pipe.forward @s1_fwd(%[[H0]], %[[T0]]) weights %[[W]][0] mb 0 : (tensor<2x8xf32>, tensor<2x3xf32>) -> (tensor<f32>, tensor<2x3xf32>)
// CHECK-NEXT:    pipe.report_loss %[[F0]]#0 mb 0 : tensor<f32>
// CHECK-NEXT:    %[[DH0:.*]] = pipe.backward @s1_bwd(%[[H0]], %[[F0]]#1) weights %[[W]][0] mb 0 : (tensor<2x8xf32>, tensor<2x3xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    %[[H1:.*]] = pipe.recv from 0 mb 1 tag "h" : tensor<2x8xf32>
// CHECK-NEXT:    pipe.send %[[DH0]] to 0 mb 0 tag "h.grad" : tensor<2x8xf32>
// CHECK-NEXT:    %[[T1:.*]] = pipe.feed "t" mb 1 : tensor<2x3xf32>
// CHECK-NEXT:    %[[F1:.*]]:2 = pipe.forward @s1_fwd(%[[H1]], %[[T1]]) weights %[[W]][0] mb 1 : (tensor<2x8xf32>, tensor<2x3xf32>) -> (tensor<f32>, tensor<2x3xf32>)
// CHECK-NEXT:    pipe.report_loss %[[F1]]#0 mb 1 : tensor<f32>
// CHECK-NEXT:    %[[DH1:.*]] = pipe.backward @s1_bwd(%[[H1]], %[[F1]]#1) weights %[[W]][0] mb 1 : (tensor<2x8xf32>, tensor<2x3xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    pipe.send %[[DH1]] to 0 mb 1 tag "h.grad" : tensor<2x8xf32>
// CHECK-NEXT:    pipe.update %[[W]] momentum lr(5.000000e-02) momentum(9.000000e-01)
// CHECK-NEXT:  }

// GPipe: every forward, then every backward; both stages hold 2 micro-batches.
// GPIPE-LABEL: pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 2 attributes {pipe.peak_in_flight = 2 : i64} {
// GPIPE-NEXT:    %[[W:.*]] = pipe.weight_buffer stage 0
// GPIPE-NEXT:    pipe.zero_grad %[[W]]
// GPIPE-NEXT:    %[[X0:.*]] = pipe.feed "x" mb 0
// GPIPE-NEXT:    %[[H0:.*]] = pipe.forward @s0_fwd(%[[X0]]) weights %[[W]][0] mb 0
// GPIPE-NEXT:    pipe.send %[[H0]] to 1 mb 0 tag "h"
// GPIPE-NEXT:    %[[X1:.*]] = pipe.feed "x" mb 1
// GPIPE-NEXT:    %[[H1:.*]] = pipe.forward @s0_fwd(%[[X1]]) weights %[[W]][0] mb 1
// GPIPE-NEXT:    pipe.send %[[H1]] to 1 mb 1 tag "h"
// GPIPE-NEXT:    %[[DH0:.*]] = pipe.recv from 1 mb 0 tag "h.grad"
// GPIPE-NEXT:    pipe.backward @s0_bwd(%[[X0]], %[[DH0]]) weights %[[W]][0] mb 0
// GPIPE-NEXT:    %[[DH1:.*]] = pipe.recv from 1 mb 1 tag "h.grad"
// GPIPE-NEXT:    pipe.backward @s0_bwd(%[[X1]], %[[DH1]]) weights %[[W]][0] mb 1
// GPIPE-NEXT:    pipe.update %[[W]] sgd lr(1.000000e-01)
// GPIPE-NEXT:  }
// GPIPE-LABEL: pipe.program @device1 device 1 stages [1] schedule "gpipe" microbatches 2 attributes {pipe.peak_in_flight = 2 : i64} {
// GPIPE-NEXT:    %[[W:.*]] = pipe.weight_buffer stage 1
// GPIPE-NEXT:    pipe.zero_grad %[[W]]
// GPIPE-NEXT:    %[[H0:.*]] = pipe.recv from 0 mb 0 tag "h"
// GPIPE-NEXT:    %[[T0:.*]] = pipe.feed "t" mb 0
// GPIPE-NEXT:    %[[F0:.*]]:2 = pipe.forward @s1_fwd(%[[H0]], %[[T0]]) weights %[[W]][0] mb 0
// GPIPE-NEXT:    pipe.report_loss %[[F0]]#0 mb 0
// GPIPE-NEXT:    %[[H1:.*]] = pipe.recv from 0 mb 1 tag "h"
// GPIPE-NEXT:    %[[T1:.*]] = pipe.feed "t" mb 1
// GPIPE-NEXT:    %[[F1:.*]]:2 = pipe.forward @s1_fwd(%[[H1]], %[[T1]]) weights %[[W]][0] mb 1
// GPIPE-NEXT:    pipe.report_loss %[[F1]]#0 mb 1
// GPIPE-NEXT:    %[[DH0:.*]] = pipe.backward @s1_bwd(%[[H0]], %[[F0]]#1) weights %[[W]][0] mb 0
// GPIPE-NEXT:    pipe.send %[[DH0]] to 0 mb 0 tag "h.grad"
// GPIPE-NEXT:    %[[DH1:.*]] = pipe.backward @s1_bwd(%[[H1]], %[[F1]]#1) weights %[[W]][0] mb 1
// GPIPE-NEXT:    pipe.send %[[DH1]] to 0 mb 1 tag "h.grad"
// GPIPE-NEXT:    pipe.update %[[W]] momentum lr(5.000000e-02) momentum(9.000000e-01)
// GPIPE-NEXT:  }

// The pass option overrides the attributes; Adam gets PyTorch's defaults.
// ADAM-LABEL: pipe.program @device0 {{.*}} microbatches 3 attributes {pipe.peak_in_flight = 2 : i64}
// ADAM:         pipe.update %{{.*}} adam lr(1.000000e-03) beta1(9.000000e-01) beta2(0.99899999999999999) epsilon(1.000000e-08)
// ADAM-LABEL: pipe.program @device1 {{.*}} microbatches 3 attributes {pipe.peak_in_flight = 1 : i64}
// ADAM:         pipe.update %{{.*}} adam lr(1.000000e-03) beta1(9.000000e-01) beta2(0.99899999999999999) epsilon(1.000000e-08)

// VERIFIED: pipe.program @device0
// VERIFIED-COUNT-5: pipe.forward @s0_fwd
// VERIFIED: pipe.program @device1
// VERIFIED-COUNT-5: pipe.report_loss

// Four stages: activations and gradients only between neighbours, labels
// fed on the last stage, GPipe holds every micro-batch everywhere.
// P4-LABEL: pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 3 attributes {pipe.peak_in_flight = 3 : i64}
// P4-NOT:     pipe.recv from 2
// P4:         pipe.send %{{.*}} to 1 mb 0 tag "h0"
// P4-LABEL: pipe.program @device1 device 1
// P4:         pipe.recv from 0 mb 0 tag "h0" : tensor<2x4xf32>
// P4:         pipe.send %{{.*}} to 2 mb 0 tag "h1"
// P4:         pipe.recv from 2 mb 0 tag "h1.grad"
// P4:         pipe.send %{{.*}} to 0 mb 0 tag "h0.grad"
// P4-LABEL: pipe.program @device3 device 3 stages [3] schedule "gpipe" microbatches 3 attributes {pipe.peak_in_flight = 3 : i64}
// P4:         pipe.feed "t" mb 0
// P4-COUNT-3: pipe.report_loss
// P4:         pipe.update
// P4-NEXT:  }
