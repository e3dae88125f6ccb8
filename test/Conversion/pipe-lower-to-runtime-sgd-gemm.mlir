// RUN: pipe-opt %s --split-input-file --pipe-lower-to-runtime | FileCheck %s

// A plain SGD update whose gradient is one Gemm's result, read by nothing
// else, becomes that Gemm adding -lr times its product into the weight in
// place (C = w, alpha = -lr * alpha, beta = 1), after the last read of the
// weight (dx's Gemm reads w below the gradient's Gemm): no gradient buffer,
// no pipert_sgd_f32, no copy into the persistent buffer.

// CHECK-LABEL: func.func @pipe_step(
// CHECK: call @pipert_gemm_f32(%{{.*}}, %c4_i64, %c8_i64, %c3_i64, %c0_i32
// CHECK: %[[RATE:.*]] = arith.constant -2.000000e-01 : f32
// CHECK: %[[BETA:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: call @pipert_gemm_f32(%{{.*}}, %c3_i64{{[_0-9]*}}, %c8_i64{{[_0-9]*}}, %c4_i64{{[_0-9]*}}, %c1_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %[[RATE]], %[[BETA]], %{{[^,]*}})
// CHECK-NOT: pipert_sgd_f32
// CHECK-NOT: pipert_copy_device
// CHECK: return
func.func @train_step(%x: tensor<4x8xf32> {pipe.input = "x"},
                      %dy: tensor<4x3xf32> {pipe.input = "dy"},
                      %w: tensor<3x8xf32> {pipe.param = "w", pipe.trainable, pipe.init = dense<0.5> : tensor<3x8xf32>})
    -> (tensor<4x8xf32>, tensor<3x8xf32> {pipe.update = "w"}) {
  %none = onnx.NoValue : none
  %lr = onnx.Constant {value = dense<0.1> : tensor<f32>} : tensor<f32>
  %gw = onnx.Gemm(%dy, %x, %none) {transA = 1 : i64, alpha = 2.0 : f32} : (tensor<4x3xf32>, tensor<4x8xf32>, none) -> tensor<3x8xf32>
  %dx = onnx.Gemm(%dy, %w, %none) : (tensor<4x3xf32>, tensor<3x8xf32>, none) -> tensor<4x8xf32>
  %wn = onnx.SGD(%lr, %w, %gw) : (tensor<f32>, tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  return %dx, %wn : tensor<4x8xf32>, tensor<3x8xf32>
}

// -----

// Left to pipert_sgd_f32: a weight decay (not the Gemm's beta), a
// gradient also returned, a learning rate that is not a constant, an old
// weight also returned (through a reshape).

// CHECK-LABEL: func.func @pipe_step(
// CHECK-NOT: arith.constant -1.000000e-01
// CHECK-COUNT-4: call @pipert_sgd_f32(
// CHECK-NOT: arith.constant -1.000000e-01
// CHECK: return
func.func @train_step(%x: tensor<4x8xf32> {pipe.input = "x"},
                      %dy: tensor<4x3xf32> {pipe.input = "dy"},
                      %rate: tensor<f32> {pipe.input = "rate"},
                      %u: tensor<3x8xf32> {pipe.param = "u", pipe.trainable, pipe.init = dense<0.5> : tensor<3x8xf32>},
                      %v: tensor<3x8xf32> {pipe.param = "v", pipe.trainable, pipe.init = dense<0.5> : tensor<3x8xf32>},
                      %w: tensor<3x8xf32> {pipe.param = "w", pipe.trainable, pipe.init = dense<0.5> : tensor<3x8xf32>},
                      %z: tensor<3x8xf32> {pipe.param = "z", pipe.trainable, pipe.init = dense<0.5> : tensor<3x8xf32>})
    -> (tensor<3x8xf32>, tensor<3x8xf32> {pipe.update = "u"}, tensor<3x8xf32> {pipe.update = "v"},
        tensor<3x8xf32> {pipe.update = "w"}, tensor<24xf32>, tensor<3x8xf32> {pipe.update = "z"}) {
  %none = onnx.NoValue : none
  %lr = onnx.Constant {value = dense<0.1> : tensor<f32>} : tensor<f32>
  %gu = onnx.Gemm(%dy, %x, %none) {transA = 1 : i64} : (tensor<4x3xf32>, tensor<4x8xf32>, none) -> tensor<3x8xf32>
  %gv = onnx.Gemm(%dy, %x, %none) {transA = 1 : i64} : (tensor<4x3xf32>, tensor<4x8xf32>, none) -> tensor<3x8xf32>
  %gw = onnx.Gemm(%dy, %x, %none) {transA = 1 : i64} : (tensor<4x3xf32>, tensor<4x8xf32>, none) -> tensor<3x8xf32>
  %un = onnx.SGD(%lr, %u, %gu) {weight_decay = 0.01 : f32} : (tensor<f32>, tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %vn = onnx.SGD(%lr, %v, %gv) : (tensor<f32>, tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %wn = onnx.SGD(%rate, %w, %gw) : (tensor<f32>, tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %gz = onnx.Gemm(%dy, %x, %none) {transA = 1 : i64} : (tensor<4x3xf32>, tensor<4x8xf32>, none) -> tensor<3x8xf32>
  %s24 = onnx.Constant {value = dense<24> : tensor<1xi64>} : tensor<1xi64>
  %zr = onnx.Reshape(%z, %s24) : (tensor<3x8xf32>, tensor<1xi64>) -> tensor<24xf32>
  %zn = onnx.SGD(%lr, %z, %gz) : (tensor<f32>, tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  return %gv, %un, %vn, %wn, %zr, %zn : tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>, tensor<24xf32>, tensor<3x8xf32>
}
