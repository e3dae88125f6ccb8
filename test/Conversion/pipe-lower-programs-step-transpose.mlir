// RUN: pipe-opt %s --split-input-file --pipe-lower-programs="defer-weight-grads=0 onnx-only=true" | FileCheck %s
// RUN: pipe-opt %s --split-input-file --pipe-lower-programs="defer-weight-grads=0" | FileCheck %s --check-prefix=RT

// A linear layer's forward, X Wᵀ (Gemm transB = 1 of a weight), with two
// micro-batches: the forward takes Wᵀ as an extra input ("wt0") and
// multiplies without transposing; Wᵀ is computed once, at the start of the
// step (the weights are constant within a synchronous step: their one write
// is the update, after every forward). The backward keeps W.
// CHECK-LABEL: func.func @pipe_step(
// CHECK: call @__pipe_transpose_tensor_8x4xf32_(
// CHECK-NOT: call @__pipe_transpose
// CHECK: call @__pipe_s0_fwd(
// CHECK-NOT: call @__pipe_transpose
// CHECK: call @__pipe_s0_fwd(
// CHECK-NOT: call @__pipe_transpose
// CHECK: return
// CHECK-LABEL: func.func @__pipe_s0_fwd.onnx(
// CHECK-SAME: %[[W:[^:]*]]: tensor<8x4xf32>, %[[X:[^:]*]]: tensor<2x4xf32> {pipe.input = "in0"}, %[[WT:[^:]*]]: tensor<4x8xf32> {pipe.input = "wt0"})
// CHECK: onnx.Gemm(%[[X]], %[[WT]], %{{.*}}) : (tensor<2x4xf32>, tensor<4x8xf32>, none) -> tensor<2x8xf32>
// CHECK-LABEL: func.func @__pipe_transpose_tensor_8x4xf32_.onnx(
// CHECK-SAME: %[[A:[^:]*]]: tensor<8x4xf32> {pipe.input = "w"}) -> (tensor<4x8xf32> {pipe.result_buffer = 0 : i64})
// CHECK: onnx.Transpose(%[[A]]) {perm = array<i64: 1, 0>}
// CHECK-LABEL: func.func @__pipe_s0_bwd.onnx(
// CHECK: onnx.Gemm(%{{.*}}, %{{.*}}, %{{.*}}) {transA = 1 : i64}
// RT-LABEL: func.func @pipe_step(
// RT: call @__pipe_transpose_tensor_8x4xf32_(
// RT: func.func private @__pipe_s0_fwd(
// RT: call @pipert_gemm_f32({{.*}}, %c0_i32{{.*}}, %c0_i32{{.*}})
// RT: func.func private @__pipe_transpose_tensor_8x4xf32_(
// RT: call @pipert_transpose(

pipe.stage @s0_fwd forward stage 0 params 1 (%w: tensor<8x4xf32>, %x: tensor<2x4xf32>) -> tensor<f32> {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.Gemm"(%x, %w, %none) {transB = 1 : i64} : (tensor<2x4xf32>, tensor<8x4xf32>, none) -> tensor<2x8xf32>
  %loss = "onnx.ReduceMean"(%y, %none) {keepdims = 0 : i64} : (tensor<2x8xf32>, none) -> tensor<f32>
  pipe.return %loss : tensor<f32>
}
pipe.stage @s0_bwd backward stage 0 params 1 (%w: tensor<8x4xf32>, %x: tensor<2x4xf32>) -> tensor<8x4xf32> {
  %none = "onnx.NoValue"() : () -> none
  %c = "onnx.Constant"() {value = dense<0.0625> : tensor<2x8xf32>} : () -> tensor<2x8xf32>
  %dw = "onnx.Gemm"(%c, %x, %none) {transA = 1 : i64} : (tensor<2x8xf32>, tensor<2x4xf32>, none) -> tensor<8x4xf32>
  pipe.return %dw : tensor<8x4xf32>
}
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 2 {
  %w0 = pipe.weight_buffer stage 0 versions 1 ("w": tensor<8x4xf32>)
  pipe.zero_grad %w0
  %x0 = pipe.feed "x" mb 0 : tensor<2x4xf32>
  %l0 = pipe.forward @s0_fwd(%x0) weights %w0[0] mb 0 : (tensor<2x4xf32>) -> tensor<f32>
  pipe.report_loss %l0 mb 0 : tensor<f32>
  %x1 = pipe.feed "x" mb 1 : tensor<2x4xf32>
  %l1 = pipe.forward @s0_fwd(%x1) weights %w0[0] mb 1 : (tensor<2x4xf32>) -> tensor<f32>
  pipe.report_loss %l1 mb 1 : tensor<f32>
  pipe.backward @s0_bwd(%x0) weights %w0[0] mb 0 : (tensor<2x4xf32>) -> ()
  pipe.backward @s0_bwd(%x1) weights %w0[0] mb 1 : (tensor<2x4xf32>) -> ()
  pipe.update %w0 sgd lr(1.0e-2) weight_decay(0.0)
}

// -----

// The same forward where the update comes between the forwards (the second
// micro-batch sees the updated weights): the weights are not constant within
// the step, so the forward keeps X Wᵀ (the small kernel's own transpose).
// CHECK-LABEL: func.func @pipe_step(
// CHECK-NOT: call @__pipe_transpose
// CHECK: return
// CHECK-LABEL: func.func @__pipe_s0_fwd.onnx(
// CHECK-SAME: %{{[^:]*}}: tensor<8x4xf32>, %{{[^:]*}}: tensor<2x4xf32> {pipe.input = "in0"}) ->
// CHECK: onnx.Gemm(%{{.*}}) {transB = 1 : i64}

pipe.stage @s0_fwd forward stage 0 params 1 (%w: tensor<8x4xf32>, %x: tensor<2x4xf32>) -> tensor<f32> {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.Gemm"(%x, %w, %none) {transB = 1 : i64} : (tensor<2x4xf32>, tensor<8x4xf32>, none) -> tensor<2x8xf32>
  %loss = "onnx.ReduceMean"(%y, %none) {keepdims = 0 : i64} : (tensor<2x8xf32>, none) -> tensor<f32>
  pipe.return %loss : tensor<f32>
}
pipe.stage @s0_bwd backward stage 0 params 1 (%w: tensor<8x4xf32>, %x: tensor<2x4xf32>) -> tensor<8x4xf32> {
  %none = "onnx.NoValue"() : () -> none
  %c = "onnx.Constant"() {value = dense<0.0625> : tensor<2x8xf32>} : () -> tensor<2x8xf32>
  %dw = "onnx.Gemm"(%c, %x, %none) {transA = 1 : i64} : (tensor<2x8xf32>, tensor<2x4xf32>, none) -> tensor<8x4xf32>
  pipe.return %dw : tensor<8x4xf32>
}
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 2 {
  %w0 = pipe.weight_buffer stage 0 versions 1 ("w": tensor<8x4xf32>)
  pipe.zero_grad %w0
  %x0 = pipe.feed "x" mb 0 : tensor<2x4xf32>
  %l0 = pipe.forward @s0_fwd(%x0) weights %w0[0] mb 0 : (tensor<2x4xf32>) -> tensor<f32>
  pipe.report_loss %l0 mb 0 : tensor<f32>
  pipe.backward @s0_bwd(%x0) weights %w0[0] mb 0 : (tensor<2x4xf32>) -> ()
  pipe.update %w0 sgd lr(1.0e-2) weight_decay(0.0)
  %x1 = pipe.feed "x" mb 1 : tensor<2x4xf32>
  %l1 = pipe.forward @s0_fwd(%x1) weights %w0[0] mb 1 : (tensor<2x4xf32>) -> tensor<f32>
  pipe.report_loss %l1 mb 1 : tensor<f32>
  pipe.backward @s0_bwd(%x1) weights %w0[0] mb 1 : (tensor<2x4xf32>) -> ()
}
