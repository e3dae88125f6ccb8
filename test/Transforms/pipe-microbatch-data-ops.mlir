// RUN: pipe-opt %s --pipe-autodiff --pipe-microbatch="microbatches=2" | FileCheck %s

// Issue 15's data ops and their gradients with the batch (B = 4) on axis 0
// and every op acting on other axes: each keeps B/M = 2 rows, the gradient
// ops' shape operands are rewritten to the micro-batch, and the mean's
// gradient reaching ReduceExtremumGrad (an Expand of a scalar) is batched.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg0: tensor<2x3x4xf32> {pipe.input = "x"}
// CHECK: onnx.Pad({{.*}}) {mode = "reflect"} : (tensor<2x3x4xf32>, tensor<6xi64>, none, none) -> tensor<2x4x7xf32>
// CHECK: onnx.Tile({{.*}}) : (tensor<2x4x7xf32>, tensor<3xi64>) -> tensor<2x8x7xf32>
// CHECK: onnx.CumSum({{.*}}) {exclusive = 1 : i64} : (tensor<2x8x7xf32>, tensor<i64>) -> tensor<2x8x7xf32>
// CHECK: onnx.Trilu({{.*}}) : (tensor<2x8x7xf32>, none) -> tensor<2x8x7xf32>
// CHECK: onnx.ReduceMax({{.*}}) {keepdims = 0 : i64} : (tensor<2x8x7xf32>, tensor<1xi64>) -> tensor<2x8xf32>
// CHECK: onnx.ArgMin({{.*}}) {axis = 2 : i64, keepdims = 0 : i64} : (tensor<2x8x7xf32>) -> tensor<2x8xi64>
// CHECK: %[[G:.*]] = onnx.Expand({{.*}}) : (tensor<1x1xf32>, tensor<2xi64>) -> tensor<2x8xf32>
// CHECK: onnx.ReduceExtremumGrad({{.*}}, %[[G]], {{.*}}) : (tensor<2x8x7xf32>, tensor<2x8xf32>, tensor<1xi64>) -> tensor<2x8x7xf32>
// CHECK: onnx.CumSum({{.*}}) {exclusive = 1 : i64, reverse = 1 : i64} : (tensor<2x8x7xf32>, tensor<i64>) -> tensor<2x8x7xf32>
// CHECK: onnx.Constant {value = dense<[2, 4, 7]> : tensor<3xi64>}
// CHECK: onnx.TileGrad({{.*}}) : (tensor<2x8x7xf32>, tensor<3xi64>, tensor<3xi64>) -> tensor<2x4x7xf32>
// CHECK: onnx.Constant {value = dense<[2, 3, 4]> : tensor<3xi64>}
// CHECK: onnx.PadGrad({{.*}}) {mode = "reflect"} : (tensor<2x4x7xf32>, tensor<3xi64>, tensor<6xi64>) -> tensor<2x3x4xf32>
func.func @forward(%x: tensor<4x3x4xf32> {pipe.input = "x"}, %w: tensor<3x4xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %pads = onnx.Constant {value = dense<[0, 0, 1, 0, 1, 2]> : tensor<6xi64>} : tensor<6xi64>
  %reps = onnx.Constant {value = dense<[1, 2, 1]> : tensor<3xi64>} : tensor<3xi64>
  %ax = onnx.Constant {value = dense<[2]> : tensor<1xi64>} : tensor<1xi64>
  %cax = onnx.Constant {value = dense<1> : tensor<i64>} : tensor<i64>
  %0 = onnx.Mul(%x, %w) : (tensor<4x3x4xf32>, tensor<3x4xf32>) -> tensor<4x3x4xf32>
  %1 = onnx.Pad(%0, %pads, %none, %none) {mode = "reflect"} : (tensor<4x3x4xf32>, tensor<6xi64>, none, none) -> tensor<4x4x7xf32>
  %2 = onnx.Tile(%1, %reps) : (tensor<4x4x7xf32>, tensor<3xi64>) -> tensor<4x8x7xf32>
  %3 = onnx.CumSum(%2, %cax) {exclusive = 1 : i64} : (tensor<4x8x7xf32>, tensor<i64>) -> tensor<4x8x7xf32>
  %4 = onnx.Trilu(%3, %none) : (tensor<4x8x7xf32>, none) -> tensor<4x8x7xf32>
  %5 = onnx.ReduceMax(%4, %ax) {keepdims = 0 : i64} : (tensor<4x8x7xf32>, tensor<1xi64>) -> tensor<4x8xf32>
  %am = onnx.ArgMin(%4) {axis = 2 : i64, keepdims = 0 : i64} : (tensor<4x8x7xf32>) -> tensor<4x8xi64>
  %amf = onnx.Cast(%am) {to = 1 : i64} : (tensor<4x8xi64>) -> tensor<4x8xf32>
  %s = onnx.Add(%5, %amf) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %6 = onnx.ReduceMean(%s, %none) {keepdims = 0 : i64} : (tensor<4x8xf32>, none) -> tensor<f32>
  return %6 : tensor<f32>
}
