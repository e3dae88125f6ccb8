// RUN: pipe-opt %s --pipe-lower-programs="onnx-only=true" | FileCheck %s
// RUN: pipe-opt %s --pipe-lower-programs | FileCheck %s --check-prefix=RT

// Y = X (W1 + W2): the Add's VJP gives both weights the same gradient, one
// Gemm returned twice. A Gemm adds a weight gradient into its accumulator
// (C = the accumulator) only when it is returned once: here each
// accumulator gets an Add of the one Gemm.
// CHECK-LABEL: func.func @__pipe_s0_bwd.onnx(
// CHECK-SAME: %{{[^:]*}}: tensor<4x8xf32>, %{{[^:]*}}: tensor<4x8xf32>, %[[ACC1:[^:]*]]: tensor<4x8xf32>, %[[ACC2:[^:]*]]: tensor<4x8xf32>
// CHECK: %[[G:.*]] = onnx.Gemm(%{{.*}}, %{{.*}}, %{{.*}}) {transA = 1 : i64} : (tensor<2x4xf32>, tensor<2x8xf32>, none) -> tensor<4x8xf32>
// CHECK: %[[S1:.*]] = onnx.Add(%[[ACC1]], %[[G]])
// CHECK: %[[S2:.*]] = onnx.Add(%[[ACC2]], %[[G]])
// CHECK: return %[[S1]], %[[S2]]
// RT: func.func private @__pipe_s0_bwd(
// RT: call @pipert_gemm_f32(

pipe.stage @s0_fwd forward stage 0 params 2 (%w1: tensor<4x8xf32>, %w2: tensor<4x8xf32>, %x: tensor<2x4xf32>) -> tensor<f32> {
  %none = "onnx.NoValue"() : () -> none
  %w = "onnx.Add"(%w1, %w2) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = "onnx.MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %loss = "onnx.ReduceMean"(%y, %none) {keepdims = 0 : i64} : (tensor<2x8xf32>, none) -> tensor<f32>
  pipe.return %loss : tensor<f32>
}
pipe.stage @s0_bwd backward stage 0 params 2 (%w1: tensor<4x8xf32>, %w2: tensor<4x8xf32>, %x: tensor<2x4xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %none = "onnx.NoValue"() : () -> none
  %c = "onnx.Constant"() {value = dense<0.0625> : tensor<2x8xf32>} : () -> tensor<2x8xf32>
  %dw = "onnx.Gemm"(%x, %c, %none) {transA = 1 : i64} : (tensor<2x4xf32>, tensor<2x8xf32>, none) -> tensor<4x8xf32>
  pipe.return %dw, %dw : tensor<4x8xf32>, tensor<4x8xf32>
}
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w0 = pipe.weight_buffer stage 0 versions 1 ("w1": tensor<4x8xf32>, "w2": tensor<4x8xf32>)
  pipe.zero_grad %w0
  %x0 = pipe.feed "x" mb 0 : tensor<2x4xf32>
  %l0 = pipe.forward @s0_fwd(%x0) weights %w0[0] mb 0 : (tensor<2x4xf32>) -> tensor<f32>
  pipe.report_loss %l0 mb 0 : tensor<f32>
  pipe.backward @s0_bwd(%x0) weights %w0[0] mb 0 : (tensor<2x4xf32>) -> ()
  pipe.update %w0 sgd lr(1.0e-2) weight_decay(0.0)
}
