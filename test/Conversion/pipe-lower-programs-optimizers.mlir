// RUN: pipe-opt %s --pipe-lower-programs="onnx-only=true" | FileCheck %s
// RUN: pipe-opt %s --pipe-lower-programs | FileCheck %s --check-prefix=RT

// One device holding both stages of a linear model, 2 micro-batches, AdamW
// with grad_scale: the optimizer state is named as pipe-add-optimizer names
// it (<param>.exp_avg, <param>.exp_avg_sq, one "step" counter for the
// device), AdamW reads the incremented counter, and the accumulated gradient
// of the two backwards is scaled before the update. No transfers.
// CHECK-LABEL: func.func @train_step_device0(
// CHECK-SAME: %[[W0:[^:]*]]: tensor<4x8xf32> {pipe.param = "fc1.weight", pipe.trainable}
// CHECK-SAME: %[[W1:[^:]*]]: tensor<8x3xf32> {pipe.param = "fc2.weight", pipe.trainable}
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x4xf32> {pipe.input = "x"}
// CHECK-SAME: %[[T:[^:]*]]: tensor<4x3xf32> {pipe.input = "t"}
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<i64> {pipe.init = dense<0> : tensor<i64>, pipe.state = "step"}
// CHECK-SAME: %[[M1:[^:]*]]: tensor<8x3xf32> {pipe.init = dense<0.000000e+00> : tensor<8x3xf32>, pipe.state = "fc2.weight.exp_avg"}
// CHECK-SAME: %[[V1:[^:]*]]: tensor<8x3xf32> {pipe.init = dense<0.000000e+00> : tensor<8x3xf32>, pipe.state = "fc2.weight.exp_avg_sq"}
// CHECK-SAME: pipe.state = "fc1.weight.exp_avg"}
// CHECK-SAME: pipe.state = "fc1.weight.exp_avg_sq"}
// CHECK-SAME: -> (tensor<f32> {pipe.loss}, tensor<8x3xf32> {pipe.update = "fc2.weight"}, tensor<8x3xf32> {pipe.update = "fc2.weight.exp_avg"}, tensor<8x3xf32> {pipe.update = "fc2.weight.exp_avg_sq"}, tensor<4x8xf32> {pipe.update = "fc1.weight"}, tensor<4x8xf32> {pipe.update = "fc1.weight.exp_avg"}, tensor<4x8xf32> {pipe.update = "fc1.weight.exp_avg_sq"}, tensor<i64> {pipe.update = "step"})
// CHECK: %[[ACC:.*]] = onnx.Add(%{{.*}}, %{{.*}}) : (tensor<8x3xf32>, tensor<8x3xf32>) -> tensor<8x3xf32>
// CHECK: %[[NEXT:.*]] = onnx.Add(%[[STEP]], %{{.*}}) : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK: %[[HALF:.*]] = onnx.Constant {value = dense<5.000000e-01> : tensor<f32>}
// CHECK: %[[G:.*]] = onnx.Mul(%[[ACC]], %[[HALF]])
// CHECK: onnx.AdamW(%{{.*}}, %[[NEXT]], %[[W1]], %[[G]], %[[M1]], %[[V1]])
// fc1's backwards run after fc2's update but read the gradients computed
// before it; fc1 updates without scaling.
// CHECK: %[[ACC0:.*]] = onnx.Add({{.*}}) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: onnx.AdamW(%{{.*}}, %[[NEXT]], %[[W0]], %[[ACC0]],

// RT-LABEL: func.func @pipe_step(
// RT-NOT: pipert_comm_world
// RT-NOT: pipert_isend
// RT: call @pipert_adamw_f32(
// RT: call @pipert_adamw_f32(

pipe.stage @s0_fwd forward stage 0 params 1 (%w: tensor<4x8xf32>, %x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %h = "onnx.MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  pipe.return %h : tensor<2x8xf32>
}
pipe.stage @s0_bwd backward stage 0 params 1 (%w: tensor<4x8xf32>, %x: tensor<2x4xf32>, %dh: tensor<2x8xf32>) -> tensor<4x8xf32> {
  %none = "onnx.NoValue"() : () -> none
  %dw = "onnx.Gemm"(%x, %dh, %none) {transA = 1 : i64} : (tensor<2x4xf32>, tensor<2x8xf32>, none) -> tensor<4x8xf32>
  pipe.return %dw : tensor<4x8xf32>
}
pipe.stage @s1_fwd forward stage 1 params 1 (%w: tensor<8x3xf32>, %h: tensor<2x8xf32>, %t: tensor<2x3xf32>) -> (tensor<f32>, tensor<2x3xf32>) {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.MatMul"(%h, %w) : (tensor<2x8xf32>, tensor<8x3xf32>) -> tensor<2x3xf32>
  %d = "onnx.Sub"(%y, %t) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %sq = "onnx.Mul"(%d, %d) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %loss = "onnx.ReduceMean"(%sq, %none) {keepdims = 0 : i64} : (tensor<2x3xf32>, none) -> tensor<f32>
  pipe.return %loss, %d : tensor<f32>, tensor<2x3xf32>
}
pipe.stage @s1_bwd backward stage 1 params 1 (%w: tensor<8x3xf32>, %h: tensor<2x8xf32>, %d: tensor<2x3xf32>) -> (tensor<2x8xf32>, tensor<8x3xf32>) {
  %none = "onnx.NoValue"() : () -> none
  %c = "onnx.Constant"() {value = dense<0.333333343> : tensor<f32>} : () -> tensor<f32>
  %g = "onnx.Mul"(%d, %c) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %dh = "onnx.Gemm"(%g, %w, %none) {transB = 1 : i64} : (tensor<2x3xf32>, tensor<8x3xf32>, none) -> tensor<2x8xf32>
  %dw = "onnx.Gemm"(%h, %g, %none) {transA = 1 : i64} : (tensor<2x8xf32>, tensor<2x3xf32>, none) -> tensor<8x3xf32>
  pipe.return %dh, %dw : tensor<2x8xf32>, tensor<8x3xf32>
}
pipe.program @device0 device 0 stages [0, 1] schedule "gpipe" microbatches 2 {
  %w0 = pipe.weight_buffer stage 0 versions 1 ("fc1.weight": tensor<4x8xf32>)
  %w1 = pipe.weight_buffer stage 1 versions 1 ("fc2.weight": tensor<8x3xf32>)
  pipe.zero_grad %w0
  pipe.zero_grad %w1
  %x0 = pipe.feed "x" mb 0 : tensor<2x4xf32>
  %h0 = pipe.forward @s0_fwd(%x0) weights %w0[0] mb 0 : (tensor<2x4xf32>) -> tensor<2x8xf32>
  %t0 = pipe.feed "t" mb 0 : tensor<2x3xf32>
  %l0, %d0 = pipe.forward @s1_fwd(%h0, %t0) weights %w1[0] mb 0 : (tensor<2x8xf32>, tensor<2x3xf32>) -> (tensor<f32>, tensor<2x3xf32>)
  pipe.report_loss %l0 mb 0 : tensor<f32>
  %x1 = pipe.feed "x" mb 1 : tensor<2x4xf32>
  %h1 = pipe.forward @s0_fwd(%x1) weights %w0[0] mb 1 : (tensor<2x4xf32>) -> tensor<2x8xf32>
  %t1 = pipe.feed "t" mb 1 : tensor<2x3xf32>
  %l1, %d1 = pipe.forward @s1_fwd(%h1, %t1) weights %w1[0] mb 1 : (tensor<2x8xf32>, tensor<2x3xf32>) -> (tensor<f32>, tensor<2x3xf32>)
  pipe.report_loss %l1 mb 1 : tensor<f32>
  %dh1 = pipe.backward @s1_bwd(%h1, %d1) weights %w1[0] mb 1 : (tensor<2x8xf32>, tensor<2x3xf32>) -> tensor<2x8xf32>
  %dh0 = pipe.backward @s1_bwd(%h0, %d0) weights %w1[0] mb 0 : (tensor<2x8xf32>, tensor<2x3xf32>) -> tensor<2x8xf32>
  pipe.update %w1 adamw lr(1.0e-3) beta1(0.9) beta2(0.999) epsilon(1.0e-8) weight_decay(0.01) grad_scale(0.5)
  pipe.backward @s0_bwd(%x1, %dh1) weights %w0[0] mb 1 : (tensor<2x4xf32>, tensor<2x8xf32>) -> ()
  pipe.backward @s0_bwd(%x0, %dh0) weights %w0[0] mb 0 : (tensor<2x4xf32>, tensor<2x8xf32>) -> ()
  pipe.update %w0 adamw lr(1.0e-3) beta1(0.9) beta2(0.999) epsilon(1.0e-8) weight_decay(0.01)
}
