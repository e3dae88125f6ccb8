// RUN: pipe-opt %s --split-input-file --pipe-lower-to-runtime | FileCheck %s
// RUN: pipe-opt %s --split-input-file --pipe-lower-to-llvm | FileCheck %s --check-prefix=LLVM
// LLVM-COUNT-3: llvm.func @pipe_step(

// A parameter gradient added to its accumulator (acc + g, written over the
// accumulator, which nothing else reads) by the kernel that computes it:
// the layer norm's dscale and dbias go straight into their accumulators
// with the kernel's accumulate flag (1: dscale, 2: dbias; 3 both), and the
// two Adds emit no call.

// CHECK-LABEL: func.func @pipe_step(
// CHECK: call @pipert_layer_norm_f32(
// CHECK-NOT: call @pipert_binary_f32(
// CHECK: call @pipert_layer_norm_grad_f32({{.*}}, %c3_i32{{(_[0-9]+)?}})
// CHECK-NOT: call @pipert_binary_f32(
// CHECK-NOT: call @pipert_copy_device(
// CHECK: return
func.func @train_step(%x: tensor<4x8xf32> {pipe.input = "x"},
                      %dy: tensor<4x8xf32> {pipe.input = "dy"},
                      %s: tensor<8xf32> {pipe.param = "s", pipe.init = dense<1.0> : tensor<8xf32>},
                      %as: tensor<8xf32> {pipe.state = "s.grad", pipe.init = dense<0.0> : tensor<8xf32>},
                      %ab: tensor<8xf32> {pipe.state = "b.grad", pipe.init = dense<0.0> : tensor<8xf32>})
    -> (tensor<f32> {pipe.loss}, tensor<8xf32> {pipe.update = "s.grad"}, tensor<8xf32> {pipe.update = "b.grad"}) {
  %none = onnx.NoValue : none
  %y, %st:2 = onnx.LayerNormalization(%x, %s, %none) : (tensor<4x8xf32>, tensor<8xf32>, none) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  %dx, %ds, %db = onnx.LayerNormalizationGrad(%x, %s, %st#0, %st#1, %dy) : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %l = onnx.ReduceMean(%dx, %none) {keepdims = 0 : i64} : (tensor<4x8xf32>, none) -> tensor<f32>
  %ns = onnx.Add(%as, %ds) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %nb = onnx.Add(%db, %ab) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %l, %ns, %nb : tensor<f32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Not folded where the gradient is read elsewhere (dscale, returned as
// well): its Add stays, and only dbias accumulates in the kernel (flag 2).

// CHECK-LABEL: func.func @pipe_step(
// CHECK: call @pipert_layer_norm_grad_f32({{.*}}, %c2_i32{{(_[0-9]+)?}})
// CHECK: call @pipert_binary_f32(
// CHECK-NOT: call @pipert_binary_f32(
// CHECK: return
func.func @train_step(%x: tensor<4x8xf32> {pipe.input = "x"},
                      %dy: tensor<4x8xf32> {pipe.input = "dy"},
                      %s: tensor<8xf32> {pipe.param = "s", pipe.init = dense<1.0> : tensor<8xf32>},
                      %as: tensor<8xf32> {pipe.state = "s.grad", pipe.init = dense<0.0> : tensor<8xf32>},
                      %ab: tensor<8xf32> {pipe.state = "b.grad", pipe.init = dense<0.0> : tensor<8xf32>})
    -> (tensor<f32> {pipe.loss}, tensor<8xf32> {pipe.update = "s.grad"}, tensor<8xf32> {pipe.update = "b.grad"}, tensor<8xf32>) {
  %none = onnx.NoValue : none
  %y, %st:2 = onnx.LayerNormalization(%x, %s, %none) : (tensor<4x8xf32>, tensor<8xf32>, none) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  %dx, %ds, %db = onnx.LayerNormalizationGrad(%x, %s, %st#0, %st#1, %dy) : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %l = onnx.ReduceMean(%dx, %none) {keepdims = 0 : i64} : (tensor<4x8xf32>, none) -> tensor<f32>
  %ns = onnx.Add(%as, %ds) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %nb = onnx.Add(%ab, %db) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %l, %ns, %nb, %ds : tensor<f32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// A convolution's weight and bias gradients: each its own call, each with
// its flag.

// CHECK-LABEL: func.func @pipe_step(
// CHECK: call @pipert_conv2d_grad_input_f32(
// CHECK: call @pipert_conv2d_grad_weight_f32({{.*}}, %c1_i32{{(_[0-9]+)?}})
// CHECK: call @pipert_conv2d_grad_bias_f32({{.*}}, %c1_i32{{(_[0-9]+)?}})
// CHECK-NOT: call @pipert_binary_f32(
// CHECK: return
func.func @train_step(%x: tensor<2x1x5x5xf32> {pipe.input = "x"},
                      %dy: tensor<2x2x5x5xf32> {pipe.input = "dy"},
                      %w: tensor<2x1x3x3xf32> {pipe.param = "w", pipe.init = dense<1.0> : tensor<2x1x3x3xf32>},
                      %aw: tensor<2x1x3x3xf32> {pipe.state = "w.grad", pipe.init = dense<0.0> : tensor<2x1x3x3xf32>},
                      %ab: tensor<2xf32> {pipe.state = "b.grad", pipe.init = dense<0.0> : tensor<2xf32>})
    -> (tensor<f32> {pipe.loss}, tensor<2x1x3x3xf32> {pipe.update = "w.grad"}, tensor<2xf32> {pipe.update = "b.grad"}) {
  %none = onnx.NoValue : none
  %dx, %dw, %db = onnx.ConvGrad(%dy, %x, %w) {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x2x5x5xf32>, tensor<2x1x5x5xf32>, tensor<2x1x3x3xf32>) -> (tensor<2x1x5x5xf32>, tensor<2x1x3x3xf32>, tensor<2xf32>)
  %l = onnx.ReduceMean(%dx, %none) {keepdims = 0 : i64} : (tensor<2x1x5x5xf32>, none) -> tensor<f32>
  %nw = onnx.Add(%aw, %dw) : (tensor<2x1x3x3xf32>, tensor<2x1x3x3xf32>) -> tensor<2x1x3x3xf32>
  %nb = onnx.Add(%ab, %db) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %l, %nw, %nb : tensor<f32>, tensor<2x1x3x3xf32>, tensor<2xf32>
}
