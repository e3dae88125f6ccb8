// RUN: pipe-opt %s --pipe-lower-to-runtime | FileCheck %s

// Each optimizer update runs right after the last op it has to follow: its
// gradient, and every read of the weight it replaces (w2 is read through a
// reshape made before the update's gradient, by a Mul after it). w2's SGD
// moves up before the ops that compute w1's gradient; both are still
// written in place (no copy into the persistent buffer).

// CHECK-LABEL: func.func @pipe_step(
// CHECK: call @pipert_binary_f32(%{{.*}}, %c2_i32
// CHECK: call @pipert_binary_f32(%{{.*}}, %c2_i32
// CHECK: call @pipert_reduce_f32(
// CHECK: call @pipert_reduce_f32(
// CHECK: call @pipert_binary_f32(%{{.*}}, %c2_i32
// CHECK-NOT: call @pipert_
// CHECK: llvm.getelementptr %{{.*}}[1]
// CHECK-NOT: call @pipert_
// CHECK: call @pipert_sgd_f32(
// CHECK: call @pipert_binary_f32(%{{.*}}, %c2_i32
// CHECK: call @pipert_reduce_f32(
// CHECK: call @pipert_sgd_f32(
// CHECK-NOT: pipert_copy_device
// CHECK: return
func.func @train_step(%x: tensor<4x8xf32> {pipe.input = "x"},
                      %w1: tensor<8xf32> {pipe.param = "w1", pipe.trainable, pipe.init = dense<0.5> : tensor<8xf32>},
                      %w2: tensor<8xf32> {pipe.param = "w2", pipe.trainable, pipe.init = dense<0.25> : tensor<8xf32>})
    -> (tensor<f32> {pipe.loss}, tensor<8xf32> {pipe.update = "w1"}, tensor<8xf32> {pipe.update = "w2"}) {
  %none = onnx.NoValue : none
  %lr = onnx.Constant {value = dense<0.1> : tensor<f32>} : tensor<f32>
  %ones = onnx.Constant {value = dense<1.0> : tensor<4x8xf32>} : tensor<4x8xf32>
  %rows = onnx.Constant {value = dense<0> : tensor<1xi64>} : tensor<1xi64>
  %s18 = onnx.Constant {value = dense<[1, 8]> : tensor<2xi64>} : tensor<2xi64>
  %y1 = onnx.Mul(%x, %w1) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y2 = onnx.Mul(%y1, %w2) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %w2r = onnx.Reshape(%w2, %s18) : (tensor<8xf32>, tensor<2xi64>) -> tensor<1x8xf32>
  %l = onnx.ReduceSum(%y2, %none) {keepdims = 0 : i64} : (tensor<4x8xf32>, none) -> tensor<f32>
  %g2 = onnx.ReduceSum(%y1, %rows) {keepdims = 0 : i64} : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<8xf32>
  %dy1 = onnx.Mul(%ones, %w2r) : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %gx = onnx.Mul(%dy1, %x) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %g1 = onnx.ReduceSum(%gx, %rows) {keepdims = 0 : i64} : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<8xf32>
  %w1n = onnx.SGD(%lr, %w1, %g1) : (tensor<f32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %w2n = onnx.SGD(%lr, %w2, %g2) : (tensor<f32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %l, %w1n, %w2n : tensor<f32>, tensor<8xf32>, tensor<8xf32>
}
