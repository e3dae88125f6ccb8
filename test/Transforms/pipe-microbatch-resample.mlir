// RUN: pipe-opt %s --pipe-autodiff --pipe-microbatch="microbatches=2" | FileCheck %s

// Resize by sizes (which name the batch, B = 4; also through opset 18's
// axes), ConvTranspose and the
// decomposed Einsum's batched MatMul (a Gemm over 2 x 3 x 10 rows) with the
// batch on axis 0: each keeps
// B/M = 2 rows; the sizes and ResizeGrad's shape are rewritten.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg0: tensor<2x2x3x3xf32> {pipe.input = "x"}
// CHECK: onnx.Constant {value = dense<[2, 2, 5, 4]> : tensor<4xi64>}
// CHECK: onnx.Resize({{.*}}) {mode = "linear"} : (tensor<2x2x3x3xf32>, none, none, tensor<4xi64>) -> tensor<2x2x5x4xf32>
// CHECK: onnx.Constant {value = dense<[2, 6]> : tensor<2xi64>}
// CHECK: onnx.Resize({{.*}}) {axes = array<i64: 0, -1>, mode = "linear"} : (tensor<2x2x3x3xf32>, none, none, tensor<2xi64>) -> tensor<2x2x3x6xf32>
// CHECK: onnx.ConvTranspose({{.*}}) {strides = array<i64: 2, 2>} : (tensor<2x2x5x4xf32>, tensor<2x3x2x2xf32>, tensor<3xf32>) -> tensor<2x3x10x8xf32>
// CHECK: onnx.Gemm({{.*}}) : (tensor<60x8xf32>, tensor<8x8xf32>, none) -> tensor<60x8xf32>
// CHECK: onnx.Conv({{.*}}) {{.*}}: (tensor<2x3x10x8xf32>, tensor<2x3x2x2xf32>, none) -> tensor<2x2x5x4xf32>
// CHECK: onnx.ConvGrad({{.*}}) {{.*}}: (tensor<2x2x5x4xf32>, tensor<2x3x10x8xf32>, tensor<2x3x2x2xf32>) -> (tensor<2x3x10x8xf32>, tensor<2x3x2x2xf32>, tensor<2xf32>)
// CHECK: onnx.Constant {value = dense<[2, 2, 3, 3]> : tensor<4xi64>}
// CHECK: onnx.ResizeGrad({{.*}}) {{.*}}: (tensor<2x2x5x4xf32>, tensor<4xi64>) -> tensor<2x2x3x3xf32>
func.func @forward(%x: tensor<4x2x3x3xf32> {pipe.input = "x"}, %s: tensor<2x3x3xf32> {pipe.param = "s", pipe.trainable}, %w: tensor<2x3x2x2xf32> {pipe.param = "w", pipe.trainable}, %b: tensor<3xf32> {pipe.param = "b", pipe.trainable}, %m: tensor<8x8xf32> {pipe.param = "m", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %sizes = onnx.Constant {value = dense<[4, 2, 5, 4]> : tensor<4xi64>} : tensor<4xi64>
  %sizes2 = onnx.Constant {value = dense<[4, 6]> : tensor<2xi64>} : tensor<2xi64>
  %0 = onnx.Mul(%x, %s) : (tensor<4x2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<4x2x3x3xf32>
  %1 = onnx.Resize(%0, %none, %none, %sizes) {mode = "linear"} : (tensor<4x2x3x3xf32>, none, none, tensor<4xi64>) -> tensor<4x2x5x4xf32>
  %r2 = onnx.Resize(%0, %none, %none, %sizes2) {mode = "linear", axes = array<i64: 0, -1>} : (tensor<4x2x3x3xf32>, none, none, tensor<2xi64>) -> tensor<4x2x3x6xf32>
  %2 = onnx.ConvTranspose(%1, %w, %b) {strides = array<i64: 2, 2>} : (tensor<4x2x5x4xf32>, tensor<2x3x2x2xf32>, tensor<3xf32>) -> tensor<4x3x10x8xf32>
  %3 = onnx.MatMul(%2, %m) : (tensor<4x3x10x8xf32>, tensor<8x8xf32>) -> tensor<4x3x10x8xf32>
  %4 = onnx.Mul(%3, %3) : (tensor<4x3x10x8xf32>, tensor<4x3x10x8xf32>) -> tensor<4x3x10x8xf32>
  %5 = onnx.ReduceMean(%4, %none) {keepdims = 0 : i64} : (tensor<4x3x10x8xf32>, none) -> tensor<f32>
  %6 = onnx.Mul(%r2, %r2) : (tensor<4x2x3x6xf32>, tensor<4x2x3x6xf32>) -> tensor<4x2x3x6xf32>
  %7 = onnx.ReduceMean(%6, %none) {keepdims = 0 : i64} : (tensor<4x2x3x6xf32>, none) -> tensor<f32>
  %8 = onnx.Add(%5, %7) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %8 : tensor<f32>
}
