// RUN: pipe-opt %s | pipe-opt | FileCheck %s
// RUN: pipe-opt %s --mlir-print-op-generic | pipe-opt | FileCheck %s

// One training step of a 2-stage linear model with a mean-squared-error loss,
// 2 micro-batches of 2 samples, scheduled 1F1B on 2 devices.

// CHECK-LABEL: pipe.stage @s0_fwd forward stage 0 params 1 (%{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<2x4xf32>) -> tensor<2x8xf32> {
// CHECK: onnx.MatMul
// CHECK: pipe.return %{{.*}} : tensor<2x8xf32>
pipe.stage @s0_fwd forward stage 0 params 1 (%w: tensor<4x8xf32>, %x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %h = "onnx.MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  pipe.return %h : tensor<2x8xf32>
}

// Stage 0 holds the input: its backward returns the weight gradient only.
// CHECK-LABEL: pipe.stage @s0_bwd backward stage 0 params 1 (%{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<2x8xf32>) -> tensor<4x8xf32> {
// CHECK: onnx.Gemm
pipe.stage @s0_bwd backward stage 0 params 1 (%w: tensor<4x8xf32>, %x: tensor<2x4xf32>, %dh: tensor<2x8xf32>) -> tensor<4x8xf32> {
  %none = "onnx.NoValue"() : () -> none
  %dw = "onnx.Gemm"(%x, %dh, %none) {transA = 1 : i64} : (tensor<2x4xf32>, tensor<2x8xf32>, none) -> tensor<4x8xf32>
  pipe.return %dw : tensor<4x8xf32>
}

// The forward of the last stage returns the loss and what its backward needs.
// CHECK-LABEL: pipe.stage @s1_fwd forward stage 1 params 1 (%{{.*}}: tensor<8x3xf32>, %{{.*}}: tensor<2x8xf32>, %{{.*}}: tensor<2x3xf32>) -> (tensor<f32>, tensor<2x3xf32>) {
pipe.stage @s1_fwd forward stage 1 params 1 (%w: tensor<8x3xf32>, %h: tensor<2x8xf32>, %t: tensor<2x3xf32>) -> (tensor<f32>, tensor<2x3xf32>) {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.MatMul"(%h, %w) : (tensor<2x8xf32>, tensor<8x3xf32>) -> tensor<2x3xf32>
  %d = "onnx.Sub"(%y, %t) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %sq = "onnx.Mul"(%d, %d) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %loss = "onnx.ReduceMean"(%sq, %none) {keepdims = 0 : i64} : (tensor<2x3xf32>, none) -> tensor<f32>
  pipe.return %loss, %d : tensor<f32>, tensor<2x3xf32>
}

// CHECK-LABEL: pipe.stage @s1_bwd backward stage 1 params 1 (%{{.*}}: tensor<8x3xf32>, %{{.*}}: tensor<2x8xf32>, %{{.*}}: tensor<2x3xf32>) -> (tensor<2x8xf32>, tensor<8x3xf32>) {
pipe.stage @s1_bwd backward stage 1 params 1 (%w: tensor<8x3xf32>, %h: tensor<2x8xf32>, %d: tensor<2x3xf32>) -> (tensor<2x8xf32>, tensor<8x3xf32>) {
  %none = "onnx.NoValue"() : () -> none
  // d(mean of 2x3 squares)/dy = 2d/6, and the step loss is the mean over 2 micro-batches.
  %c = "onnx.Constant"() {value = dense<0.166666672> : tensor<f32>} : () -> tensor<f32>
  %g = "onnx.Mul"(%d, %c) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %dh = "onnx.Gemm"(%g, %w, %none) {transB = 1 : i64} : (tensor<2x3xf32>, tensor<8x3xf32>, none) -> tensor<2x8xf32>
  %dw = "onnx.Gemm"(%h, %g, %none) {transA = 1 : i64} : (tensor<2x8xf32>, tensor<2x3xf32>, none) -> tensor<8x3xf32>
  pipe.return %dh, %dw : tensor<2x8xf32>, tensor<8x3xf32>
}

// Stage 0: one warm-up forward, one forward-backward pair, one drain backward.
// CHECK-LABEL: pipe.program @device0 device 0 stages [0] schedule "1f1b" microbatches 2 {
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
// CHECK-NEXT:    pipe.update %[[W]] sgd lr(1.000000e-01) lr_schedule {decay_steps = 10 : i64, kind = "cosine", min_lr = 1.000000e-03 : f64, updates_per_step = 1 : i64, warmup_steps = 2 : i64}
// CHECK-NEXT:  }
pipe.program @device0 device 0 stages [0] schedule "1f1b" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 1 ("fc1.weight": tensor<4x8xf32>)
  pipe.zero_grad %w
  %x0 = pipe.feed "x" mb 0 : tensor<2x4xf32>
  %h0 = pipe.forward @s0_fwd(%x0) weights %w[0] mb 0 : (tensor<2x4xf32>) -> tensor<2x8xf32>
  pipe.send %h0 to 1 mb 0 tag "h" : tensor<2x8xf32>
  %x1 = pipe.feed "x" mb 1 : tensor<2x4xf32>
  %h1 = pipe.forward @s0_fwd(%x1) weights %w[0] mb 1 : (tensor<2x4xf32>) -> tensor<2x8xf32>
  pipe.send %h1 to 1 mb 1 tag "h" : tensor<2x8xf32>
  %dh0 = pipe.recv from 1 mb 0 tag "h.grad" : tensor<2x8xf32>
  pipe.backward @s0_bwd(%x0, %dh0) weights %w[0] mb 0 : (tensor<2x4xf32>, tensor<2x8xf32>) -> ()
  %dh1 = pipe.recv from 1 mb 1 tag "h.grad" : tensor<2x8xf32>
  pipe.backward @s0_bwd(%x1, %dh1) weights %w[0] mb 1 : (tensor<2x4xf32>, tensor<2x8xf32>) -> ()
  pipe.update %w sgd lr(0.1) lr_schedule {kind = "cosine", warmup_steps = 2 : i64, decay_steps = 10 : i64, min_lr = 0.001 : f64, updates_per_step = 1 : i64}
}

// Stage 1 (the last): no warm-up, forward and backward alternate.
// CHECK-LABEL: pipe.program @device1 device 1 stages [1] schedule "1f1b" microbatches 2 {
// CHECK-NEXT:    %[[W:.*]] = pipe.weight_buffer stage 1 versions 1 ("fc2.weight": tensor<8x3xf32>)
// CHECK-NEXT:    pipe.zero_grad %[[W]]
// CHECK-NEXT:    %[[H0:.*]] = pipe.recv from 0 mb 0 tag "h" : tensor<2x8xf32>
// CHECK-NEXT:    %[[T0:.*]] = pipe.feed "t" mb 0 : tensor<2x3xf32>
// CHECK-NEXT:    %[[F0:.*]]:2 = pipe.forward @s1_fwd(%[[H0]], %[[T0]]) weights %[[W]][0] mb 0 : (tensor<2x8xf32>, tensor<2x3xf32>) -> (tensor<f32>, tensor<2x3xf32>)
// CHECK-NEXT:    pipe.report_loss %[[F0]]#0 mb 0 : tensor<f32>
// CHECK-NEXT:    %[[DH0:.*]] = pipe.backward @s1_bwd(%[[H0]], %[[F0]]#1) weights %[[W]][0] mb 0 : (tensor<2x8xf32>, tensor<2x3xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    pipe.send %[[DH0]] to 0 mb 0 tag "h.grad" : tensor<2x8xf32>
// CHECK-NEXT:    %[[H1:.*]] = pipe.recv from 0 mb 1 tag "h" : tensor<2x8xf32>
// CHECK-NEXT:    %[[T1:.*]] = pipe.feed "t" mb 1 : tensor<2x3xf32>
// CHECK-NEXT:    %[[F1:.*]]:2 = pipe.forward @s1_fwd(%[[H1]], %[[T1]]) weights %[[W]][0] mb 1 : (tensor<2x8xf32>, tensor<2x3xf32>) -> (tensor<f32>, tensor<2x3xf32>)
// CHECK-NEXT:    pipe.report_loss %[[F1]]#0 mb 1 : tensor<f32>
// CHECK-NEXT:    %[[DH1:.*]] = pipe.backward @s1_bwd(%[[H1]], %[[F1]]#1) weights %[[W]][0] mb 1 : (tensor<2x8xf32>, tensor<2x3xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    pipe.send %[[DH1]] to 0 mb 1 tag "h.grad" : tensor<2x8xf32>
// CHECK-NEXT:    pipe.update %[[W]] sgd lr(1.000000e-01)
// CHECK-NEXT:  }
pipe.program @device1 device 1 stages [1] schedule "1f1b" microbatches 2 {
  %w = pipe.weight_buffer stage 1 versions 1 ("fc2.weight": tensor<8x3xf32>)
  pipe.zero_grad %w
  %h0 = pipe.recv from 0 mb 0 tag "h" : tensor<2x8xf32>
  %t0 = pipe.feed "t" mb 0 : tensor<2x3xf32>
  %l0, %d0 = pipe.forward @s1_fwd(%h0, %t0) weights %w[0] mb 0 : (tensor<2x8xf32>, tensor<2x3xf32>) -> (tensor<f32>, tensor<2x3xf32>)
  pipe.report_loss %l0 mb 0 : tensor<f32>
  %dh0 = pipe.backward @s1_bwd(%h0, %d0) weights %w[0] mb 0 : (tensor<2x8xf32>, tensor<2x3xf32>) -> tensor<2x8xf32>
  pipe.send %dh0 to 0 mb 0 tag "h.grad" : tensor<2x8xf32>
  %h1 = pipe.recv from 0 mb 1 tag "h" : tensor<2x8xf32>
  %t1 = pipe.feed "t" mb 1 : tensor<2x3xf32>
  %l1, %d1 = pipe.forward @s1_fwd(%h1, %t1) weights %w[0] mb 1 : (tensor<2x8xf32>, tensor<2x3xf32>) -> (tensor<f32>, tensor<2x3xf32>)
  pipe.report_loss %l1 mb 1 : tensor<f32>
  %dh1 = pipe.backward @s1_bwd(%h1, %d1) weights %w[0] mb 1 : (tensor<2x8xf32>, tensor<2x3xf32>) -> tensor<2x8xf32>
  pipe.send %dh1 to 0 mb 1 tag "h.grad" : tensor<2x8xf32>
  pipe.update %w sgd lr(0.1)
}
