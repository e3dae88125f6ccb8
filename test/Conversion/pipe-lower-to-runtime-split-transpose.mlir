// RUN: pipe-opt %s --split-input-file --pipe-lower-to-runtime | FileCheck %s
// RUN: pipe-opt %s --split-input-file --pipe-lower-to-llvm | FileCheck %s --check-prefix=LLVM
// LLVM-COUNT-3: llvm.func @pipe_step(

// Attention's head split: Split of the fused q/k/v projection, each part
// reshaped into heads and transposed (k with its last two axes swapped as
// well, for q kᵀ). Lowered as one 5-D transpose that moves the parts' axis
// and the heads forward at once; the parts are then contiguous, so the
// Split along the leading axis is three views, 1024 bytes apart (no
// pipert_split), and k's swap is read by the MatMul in place
// (pipert_matmul_t_f32). With a part returned (below) nothing changes.

// CHECK-LABEL: func.func @pipe_step(
// CHECK-NOT: call @pipert_split(
// CHECK: call @pipert_transpose(%{{.*}}, %{{.*}}, %{{.*}}, %c5_i64
// CHECK-NOT: call @pipert_transpose(
// CHECK-NOT: call @pipert_split(
// CHECK: llvm.getelementptr %{{.*}}[%c1024_i64{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK: call @pipert_matmul_t_f32(
// CHECK: llvm.getelementptr %{{.*}}[%c2048_i64{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK: call @pipert_matmul_f32(
// CHECK-NOT: call @pipert_transpose(
// CHECK: return
func.func @forward(%x: tensor<2x8x48xf32> {pipe.input = "x"}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %sizes = onnx.Constant {value = dense<16> : tensor<3xi64>} : tensor<3xi64>
  %s:3 = onnx.Split(%x, %sizes) {axis = 2 : i64} : (tensor<2x8x48xf32>, tensor<3xi64>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %shape = onnx.Constant {value = dense<[2, 8, 2, 8]> : tensor<4xi64>} : tensor<4xi64>
  %q0 = onnx.Reshape(%s#0, %shape) : (tensor<2x8x16xf32>, tensor<4xi64>) -> tensor<2x8x2x8xf32>
  %k0 = onnx.Reshape(%s#1, %shape) : (tensor<2x8x16xf32>, tensor<4xi64>) -> tensor<2x8x2x8xf32>
  %v0 = onnx.Reshape(%s#2, %shape) : (tensor<2x8x16xf32>, tensor<4xi64>) -> tensor<2x8x2x8xf32>
  %q = onnx.Transpose(%q0) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %kt = onnx.Transpose(%k0) {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %v = onnx.Transpose(%v0) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %a = onnx.MatMul(%q, %kt) : (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x2x8x8xf32>
  %o = onnx.MatMul(%a, %v) : (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x2x8x8xf32>
  %m = onnx.ReduceSum(%o, %none) {keepdims = 0 : i64} : (tensor<2x2x8x8xf32>, none) -> tensor<f32>
  return %m : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @pipe_step(
// CHECK: call @pipert_split(
// CHECK-COUNT-3: call @pipert_transpose(
func.func @forward(%x: tensor<2x8x48xf32> {pipe.input = "x"}) -> (tensor<f32> {pipe.loss}, tensor<2x2x8x8xf32> {pipe.output = "q"}) {
  %none = onnx.NoValue : none
  %sizes = onnx.Constant {value = dense<16> : tensor<3xi64>} : tensor<3xi64>
  %s:3 = onnx.Split(%x, %sizes) {axis = 2 : i64} : (tensor<2x8x48xf32>, tensor<3xi64>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %shape = onnx.Constant {value = dense<[2, 8, 2, 8]> : tensor<4xi64>} : tensor<4xi64>
  %q0 = onnx.Reshape(%s#0, %shape) : (tensor<2x8x16xf32>, tensor<4xi64>) -> tensor<2x8x2x8xf32>
  %k0 = onnx.Reshape(%s#1, %shape) : (tensor<2x8x16xf32>, tensor<4xi64>) -> tensor<2x8x2x8xf32>
  %v0 = onnx.Reshape(%s#2, %shape) : (tensor<2x8x16xf32>, tensor<4xi64>) -> tensor<2x8x2x8xf32>
  %q = onnx.Transpose(%q0) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %kt = onnx.Transpose(%k0) {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %v = onnx.Transpose(%v0) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %a = onnx.MatMul(%q, %kt) : (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x2x8x8xf32>
  %o = onnx.MatMul(%a, %v) : (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x2x8x8xf32>
  %m = onnx.ReduceSum(%o, %none) {keepdims = 0 : i64} : (tensor<2x2x8x8xf32>, none) -> tensor<f32>
  return %m, %q : tensor<f32>, tensor<2x2x8x8xf32>
}

// -----

// The backward's mirror: each head's gradient transposed back (dk's after
// a swap of its last two axes: it comes as kᵀ's gradient), reshaped and
// concatenated. Lowered as one Concat along a new leading axis, whose
// parts are computed in its buffer (dq at 0 and dv at 1024 by their
// MatMuls, dk at 512 by its swap, the one Transpose kept), and one 5-D
// Transpose: no pipert_concat.

// CHECK-LABEL: func.func @pipe_step(
// CHECK-NOT: call @pipert_concat(
// CHECK: call @pipert_matmul_f32(
// CHECK: call @pipert_matmul_f32(
// CHECK: llvm.getelementptr %{{.*}}[%c1024_i64{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK: call @pipert_matmul_f32(
// CHECK: llvm.getelementptr %{{.*}}[%c512_i64{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK: call @pipert_transpose(%{{.*}}, %{{.*}}, %{{.*}}, %c4_i64
// CHECK: call @pipert_transpose(%{{.*}}, %{{.*}}, %{{.*}}, %c5_i64
// CHECK-NOT: call @pipert_transpose(
// CHECK-NOT: call @pipert_concat(
// CHECK: return
func.func @forward(%a: tensor<2x2x8x8xf32> {pipe.input = "a"},
                   %b: tensor<2x2x8x4xf32> {pipe.input = "b"},
                   %bt: tensor<2x2x4x8xf32> {pipe.input = "bt"}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %dq = onnx.MatMul(%a, %b) : (tensor<2x2x8x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x8x4xf32>
  %dkt = onnx.MatMul(%bt, %a) : (tensor<2x2x4x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x2x4x8xf32>
  %dv = onnx.MatMul(%a, %b) : (tensor<2x2x8x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x8x4xf32>
  %tq = onnx.Transpose(%dq) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x8x4xf32>) -> tensor<2x8x2x4xf32>
  %tk = onnx.Transpose(%dkt) {perm = array<i64: 0, 3, 1, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x8x2x4xf32>
  %tv = onnx.Transpose(%dv) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x8x4xf32>) -> tensor<2x8x2x4xf32>
  %shape = onnx.Constant {value = dense<[2, 8, 8]> : tensor<3xi64>} : tensor<3xi64>
  %rq = onnx.Reshape(%tq, %shape) : (tensor<2x8x2x4xf32>, tensor<3xi64>) -> tensor<2x8x8xf32>
  %rk = onnx.Reshape(%tk, %shape) : (tensor<2x8x2x4xf32>, tensor<3xi64>) -> tensor<2x8x8xf32>
  %rv = onnx.Reshape(%tv, %shape) : (tensor<2x8x2x4xf32>, tensor<3xi64>) -> tensor<2x8x8xf32>
  %c = onnx.Concat(%rq, %rk, %rv) {axis = 2 : i64} : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %l = onnx.ReduceMean(%c, %none) {keepdims = 0 : i64} : (tensor<2x8x24xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}
