// RUN: pipe-opt %s --pipe-lower-programs="defer-weight-grads=0 onnx-only=true" | FileCheck %s
// RUN: pipe-opt %s --pipe-lower-programs="defer-weight-grads=0" | FileCheck %s --check-prefix=RT

// One device holding both stages of a linear model, 2 micro-batches, AdamW
// with grad_scale: the optimizer state is named as pipe-add-optimizer names
// it (<param>.exp_avg, <param>.exp_avg_sq, one "step" counter for the
// device), both updates read the incremented counter and only the last one
// stores it, and the accumulated gradient of the two backwards is scaled
// before the update. No transfers.
// CHECK-LABEL: func.func @pipe_step(
// CHECK-SAME: inputs = [{dtype = 1 : i64, kind = "input", name = "x", shape = array<i64: 4, 4>}, {dtype = 1 : i64, kind = "input", name = "t", shape = array<i64: 4, 3>}]
// CHECK-SAME: persistent = [{{.*}}name = "fc1.weight"{{.*}}name = "fc2.weight"{{.*}}name = "step"{{.*}}name = "fc2.weight.exp_avg"{{.*}}name = "fc2.weight.exp_avg_sq"{{.*}}name = "fc1.weight.exp_avg"{{.*}}name = "fc1.weight.exp_avg_sq"
// The step's order: one call per instruction, each stage's function shared
// by its micro-batches; fc1's backwards run after fc2's update but read the
// gradients computed before it.
// CHECK: call @__pipe_s0_fwd(
// CHECK: call @__pipe_s1_fwd(
// CHECK: call @__pipe_s0_fwd(
// CHECK: call @__pipe_s1_fwd(
// CHECK: call @__pipe_s1_bwd(
// CHECK: call @__pipe_s1_bwd(
// CHECK: call @__pipe_update_stage1(
// CHECK: call @__pipe_s0_bwd(
// CHECK: call @__pipe_s0_bwd(
// CHECK: call @__pipe_update_stage0(
// A backward adds its weight gradient into the accumulator it is passed
// (the argument after the weights), in place: a Gemm's by the Gemm itself
// (C = the accumulator, beta 1).
// CHECK-LABEL: func.func @__pipe_s1_bwd.onnx(
// CHECK-SAME: %[[W:[^:]*]]: tensor<8x3xf32>, %[[ACC:[^:]*]]: tensor<8x3xf32>, %{{.*}}: tensor<2x8xf32> {pipe.input = "in0"}, %{{.*}}: tensor<2x3xf32> {pipe.input = "in1"})
// CHECK-SAME: -> (tensor<2x8xf32> {pipe.result_buffer = 0 : i64}, tensor<8x3xf32> {pipe.update = 1 : i64})
// CHECK: %[[SUM:.*]] = onnx.Gemm(%{{.*}}, %{{.*}}, %[[ACC]]) {transA = 1 : i64} : (tensor<2x8xf32>, tensor<2x3xf32>, tensor<8x3xf32>) -> tensor<8x3xf32>
// CHECK-NOT: onnx.Add
// CHECK: return %{{.*}}, %[[SUM]]
// CHECK-LABEL: func.func @__pipe_update_stage1.onnx(
// CHECK-SAME: %[[W1:[^:]*]]: tensor<8x3xf32> {pipe.param = "fc2.weight"}, %[[G1:[^:]*]]: tensor<8x3xf32>, %[[M1:[^:]*]]: tensor<8x3xf32> {pipe.state = "fc2.weight.exp_avg"}, %[[V1:[^:]*]]: tensor<8x3xf32> {pipe.state = "fc2.weight.exp_avg_sq"}, %[[STEP:[^:]*]]: tensor<i64> {pipe.state = "step"})
// CHECK-SAME: -> (tensor<8x3xf32> {pipe.update = "fc2.weight"}, tensor<8x3xf32> {pipe.update = "fc2.weight.exp_avg"}, tensor<8x3xf32> {pipe.update = "fc2.weight.exp_avg_sq"})
// CHECK: %[[NEXT:.*]] = onnx.Add(%[[STEP]], %{{.*}}) : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK: %[[HALF:.*]] = onnx.Constant {value = dense<5.000000e-01> : tensor<f32>}
// CHECK: %[[G:.*]] = onnx.Mul(%[[G1]], %[[HALF]])
// CHECK: onnx.AdamW(%{{.*}}, %[[NEXT]], %[[W1]], %[[G]], %[[M1]], %[[V1]])
// fc1 updates without scaling, and stores the next count.
// CHECK-LABEL: func.func @__pipe_update_stage0.onnx(
// CHECK-SAME: %[[W0:[^:]*]]: tensor<4x8xf32> {pipe.param = "fc1.weight"}, %[[G0:[^:]*]]: tensor<4x8xf32>,
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<i64> {pipe.state = "step"})
// CHECK-SAME: tensor<i64> {pipe.update = "step"})
// CHECK: %[[NEXT:.*]] = onnx.Add(%[[STEP]], %{{.*}}) : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK: onnx.AdamW(%{{.*}}, %[[NEXT]], %[[W0]], %[[G0]],

// RT-LABEL: func.func @pipe_step(
// RT-NOT: pipert_comm_world
// RT-NOT: pipert_isend
// RT: func.func private @__pipe_update_stage1(
// RT: call @pipert_adamw_f32(
// RT: func.func private @__pipe_update_stage0(
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
