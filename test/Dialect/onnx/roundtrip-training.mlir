// RUN: pipe-opt %s | pipe-opt | FileCheck %s

// CHECK-LABEL: func @gradient
func.func @gradient(%w: tensor<4x8xf32>, %b: tensor<8xf32>, %x: tensor<2x4xf32>) {
  // CHECK: onnx.Gradient(%{{.*}}, %{{.*}}, %{{.*}}) {xs = ["w", "b"], y = "loss", zs = ["x"]} : (tensor<4x8xf32>, tensor<8xf32>, tensor<2x4xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  %0:2 = onnx.Gradient(%w, %b, %x) {xs = ["w", "b"], y = "loss", zs = ["x"]} : (tensor<4x8xf32>, tensor<8xf32>, tensor<2x4xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  return
}

// CHECK-LABEL: func @optimizers
func.func @optimizers(%r: tensor<f32>, %t: tensor<i64>, %w: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // CHECK: onnx.Momentum(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {alpha = 0.899999976 : f32, beta = 1.000000e+00 : f32, mode = "nesterov", norm_coefficient = 0.000000e+00 : f32} : (tensor<f32>, tensor<i64>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<8xf32>)
  %0:4 = onnx.Momentum(%r, %t, %w, %b, %w, %b, %w, %b) {alpha = 0.9 : f32, beta = 1.0 : f32, mode = "nesterov", norm_coefficient = 0.0 : f32} : (tensor<f32>, tensor<i64>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<8xf32>)
  // CHECK: onnx.Adam(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {epsilon = 9.99999993E-9 : f32} : (tensor<f32>, tensor<i64>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %1:3 = onnx.Adam(%r, %t, %b, %b, %b, %b) {epsilon = 1.0e-8 : f32} : (tensor<f32>, tensor<i64>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK: onnx.Adagrad(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {decay_factor = 1.000000e-01 : f32} : (tensor<f32>, tensor<i64>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %2:2 = onnx.Adagrad(%r, %t, %w, %w, %w) {decay_factor = 0.1 : f32} : (tensor<f32>, tensor<i64>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  return
}
