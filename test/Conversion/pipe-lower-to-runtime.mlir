// RUN: pipe-opt %s --split-input-file --verify-diagnostics --pipe-lower-to-runtime | FileCheck %s
// RUN: pipe-opt %s --split-input-file --verify-diagnostics --pipe-lower-to-llvm | FileCheck %s --check-prefix=LLVM

// A forward pass: one call per op, shapes as constant i64 globals, tensor
// constants as memref.globals, Reshape as a view, and elementwise kernels
// written in place over an operand that dies at them (the Relu over the
// Gemm's block, the Add over the Relu's through its Reshape); the
// reduction gets a block of its own. The blocks are two places in one
// arena, allocated at entry and freed once before the return.

// CHECK-DAG: memref.global "private" constant @[[SHAPE3:__pipe_i64_[0-9]+]] : memref<3xi64> = dense<4>
// CHECK-DAG: memref.global "private" constant @[[BIAS:__pipe_const_[0-9]+]] : memref<4xf32> = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]>
// CHECK-LABEL: func.func @pipe_step(
// CHECK-SAME: %[[CTX:[a-z0-9]+]]: !llvm.ptr, %[[IN:[a-z0-9]+]]: !llvm.ptr, %[[PERSIST:[a-z0-9]+]]: !llvm.ptr, %[[LOSS:[a-z0-9]+]]: !llvm.ptr, %{{.*}}: i64)
// CHECK-SAME: pipe.program = {has_loss = true, inputs = [{dtype = 1 : i64, kind = "input", name = "x", shape = array<i64: 4, 8>}, {dtype = 7 : i64, kind = "input", name = "y", shape = array<i64: 4>}], peak_activation_bytes = 320 : i64, persistent = [{dtype = 1 : i64, init = dense<5.000000e-01> : tensor<16x8xf32>, kind = "param", name = "w", shape = array<i64: 16, 8>}], trains = false}
// CHECK: %[[ARENA:.*]] = call @pipert_alloc(%[[CTX]], %c320_i64)
// CHECK: %[[OFFA:.*]] = arith.constant 0 : i64
// CHECK: llvm.getelementptr %[[ARENA]][%[[OFFA]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK: %[[AM:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<256xi8>
// CHECK: %[[OFFB:.*]] = arith.constant 256 : i64
// CHECK: llvm.getelementptr %[[ARENA]][%[[OFFB]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK: %[[BM:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<64xi8>
// CHECK-NOT: pipert_alloc
// CHECK: llvm.getelementptr %[[IN]][0]
// CHECK: llvm.getelementptr %[[PERSIST]][0]
// CHECK: memref.view %[[AM]][%{{.*}}][] : memref<256xi8> to memref<4x16xf32>
// CHECK: call @pipert_gemm_f32(%[[CTX]], %{{.*}}, %{{.*}}, %{{.*}}, %c0_i64{{.*}}, %{{.*}}, %c4_i64, %c16_i64, %c8_i64, %c0_i32, %c1_i32, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, i64, i64, i64, i32, i32, f32, f32, !llvm.ptr) -> ()
// CHECK: memref.view %[[AM]][%{{.*}}][] : memref<256xi8> to memref<4x16xf32>
// CHECK: call @pipert_unary_f32(%[[CTX]], %c2_i32, %{{.*}}, %c64_i64{{.*}}, %{{.*}})
// CHECK-NOT: pipert_alloc
// CHECK-NOT: pipert_free
// CHECK: memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [4, 4, 4], strides: [16, 4, 1] : memref<4x16xf32> to memref<4x4x4xf32>
// CHECK: memref.get_global @[[BIAS]] : memref<4xf32>
// CHECK: memref.view %[[AM]][%{{.*}}][] : memref<256xi8> to memref<4x4x4xf32>
// CHECK: call @pipert_binary_f32(%[[CTX]], %c0_i32{{.*}}, %{{.*}}, %c3_i64, %{{.*}}, %{{.*}}, %c1_i64{{.*}}, %{{.*}}, %{{.*}})
// CHECK: memref.view %[[BM]][%{{.*}}][] : memref<64xi8> to memref<f32>
// CHECK: call @pipert_reduce_f32(%[[CTX]], %c0_i32{{.*}}, %{{.*}}, %c3_i64{{.*}}, %{{.*}}, %c0_i64{{.*}}, %{{.*}}, %c0_i32{{.*}}, %{{.*}})
// CHECK-NOT: pipert_free
// CHECK: call @pipert_copy_to_host(%[[CTX]], %[[LOSS]], %{{.*}}, %c4_i64{{.*}})
// CHECK-NEXT: call @pipert_free(%[[CTX]], %[[ARENA]])
// CHECK-NEXT: return
// CHECK-NOT: func.func @forward

// LLVM-LABEL: llvm.func @pipe_step(
// LLVM: llvm.call @pipert_gemm_f32(
// LLVM: llvm.call @pipert_free(
// LLVM-NOT: builtin.unrealized_conversion_cast
// LLVM-NOT: memref.
func.func @forward(%x: tensor<4x8xf32> {pipe.input = "x"}, %labels: tensor<4xi64> {pipe.input = "y"},
                   %w: tensor<16x8xf32> {pipe.param = "w", pipe.trainable, pipe.init = dense<0.5> : tensor<16x8xf32>})
    -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %shape = onnx.Constant {value = dense<[4, 4, 4]> : tensor<3xi64>} : tensor<3xi64>
  %bias = onnx.Constant {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>} : tensor<4xf32>
  %h = onnx.Gemm(%x, %w, %none) {transB = 1 : i64} : (tensor<4x8xf32>, tensor<16x8xf32>, none) -> tensor<4x16xf32>
  %r = onnx.Relu(%h) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %t = onnx.Reshape(%r, %shape) : (tensor<4x16xf32>, tensor<3xi64>) -> tensor<4x4x4xf32>
  %s = onnx.Add(%t, %bias) : (tensor<4x4x4xf32>, tensor<4xf32>) -> tensor<4x4x4xf32>
  %m = onnx.ReduceSum(%s, %none) {keepdims = 0 : i64} : (tensor<4x4x4xf32>, none) -> tensor<f32>
  return %m : tensor<f32>
}

// -----

// A training step: the optimizer writes the parameter and its state in
// place (no copies at the end), the update count T is read back to the host
// for the kernel's scalar argument, and step + 1 also lands in its buffer.

// CHECK-LABEL: func.func @pipe_step(
// CHECK-SAME: %[[CTX:[a-z0-9]+]]: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr, %[[PERSIST:[a-z0-9]+]]: !llvm.ptr
// CHECK-SAME: kind = "param", name = "w"
// CHECK-SAME: kind = "state", name = "w.momentum_buffer"
// CHECK-SAME: kind = "state", name = "step"
// CHECK-SAME: trains = true
// CHECK: call @pipert_binary_f32(%[[CTX]], %c2_i32,
// CHECK: call @pipert_reduce_f32(%[[CTX]], %c1_i32,
// CHECK: call @pipert_expand(%[[CTX]], %c1_i32
// CHECK: %[[T:.*]] = memref.alloca() : memref<1xi64>
// CHECK: llvm.getelementptr %[[PERSIST]][2]
// CHECK: call @pipert_copy_to_host(%[[CTX]], %{{.*}}, %{{.*}}, %c8_i64
// CHECK: %[[TV:.*]] = memref.load %[[T]]
// CHECK: %[[XG:.*]] = llvm.getelementptr %[[PERSIST]][0]
// CHECK: %[[X:.*]] = llvm.load %[[XG]]
// CHECK: %[[VG:.*]] = llvm.getelementptr %[[PERSIST]][1]
// CHECK: %[[V:.*]] = llvm.load %[[VG]]
// CHECK: call @pipert_momentum_f32(%[[CTX]], %{{.*}}, %[[TV]], %{{.*}}, %{{.*}}, %{{.*}}, %c0_i32{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c8_i64{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, f32, i64, f32, f32, f32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, !llvm.ptr) -> ()
// CHECK: llvm.getelementptr %[[PERSIST]][2]
// CHECK: call @pipert_binary_i64(%[[CTX]], %c0_i32
// CHECK-NOT: pipert_copy_device
// CHECK: call @pipert_copy_to_host(%[[CTX]],
// CHECK: return

// LLVM-LABEL: llvm.func @pipe_step(
// LLVM: llvm.call @pipert_momentum_f32(
func.func @train_step(%x: tensor<4x8xf32> {pipe.input = "x"},
                      %w: tensor<8xf32> {pipe.param = "w", pipe.trainable, pipe.init = dense<0.5> : tensor<8xf32>},
                      %v: tensor<8xf32> {pipe.state = "w.momentum_buffer", pipe.init = dense<0.0> : tensor<8xf32>},
                      %t: tensor<i64> {pipe.state = "step", pipe.init = dense<0> : tensor<i64>})
    -> (tensor<f32> {pipe.loss}, tensor<8xf32> {pipe.update = "w"}, tensor<8xf32> {pipe.update = "w.momentum_buffer"}, tensor<i64> {pipe.update = "step"}) {
  %none = onnx.NoValue : none
  %lr = onnx.Constant {value = dense<0.1> : tensor<f32>} : tensor<f32>
  %one = onnx.Constant {value = dense<1> : tensor<i64>} : tensor<i64>
  %y = onnx.Mul(%x, %w) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %l = onnx.ReduceMean(%y, %none) {keepdims = 0 : i64} : (tensor<4x8xf32>, none) -> tensor<f32>
  %g = onnx.ReduceMean(%x, %none) {keepdims = 0 : i64} : (tensor<4x8xf32>, none) -> tensor<f32>
  %shape8 = onnx.Constant {value = dense<8> : tensor<1xi64>} : tensor<1xi64>
  %g8 = onnx.Expand(%g, %shape8) : (tensor<f32>, tensor<1xi64>) -> tensor<8xf32>
  %wn, %vn = onnx.Momentum(%lr, %t, %w, %g8, %v) {alpha = 0.9 : f32, beta = 1.0 : f32, mode = "standard", norm_coefficient = 0.0 : f32} : (tensor<f32>, tensor<i64>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  %tn = onnx.Add(%t, %one) : (tensor<i64>, tensor<i64>) -> tensor<i64>
  return %l, %wn, %vn, %tn : tensor<f32>, tensor<8xf32>, tensor<8xf32>, tensor<i64>
}

// -----

func.func @forward(%x: tensor<1x1x2x2x2xf32> {pipe.input = "x"},
                   %w: tensor<1x1x1x1x1xf32> {pipe.param = "w", pipe.trainable, pipe.init = dense<1.0> : tensor<1x1x1x1x1xf32>})
    -> (tensor<1x1x2x2x2xf32> {pipe.output = "y"}) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{Conv is lowered for 1-D and 2-D inputs (rank 3 or 4), not rank 5}}
  %y = onnx.Conv(%x, %w, %none) : (tensor<1x1x2x2x2xf32>, tensor<1x1x1x1x1xf32>, none) -> tensor<1x1x2x2x2xf32>
  return %y : tensor<1x1x2x2x2xf32>
}

// -----

func.func @forward(%x: tensor<2x3xf32> {pipe.input = "x"}, %axes: tensor<1xi64> {pipe.input = "axes"})
    -> (tensor<f32> {pipe.loss}) {
  // expected-error @+1 {{the axes of onnx.ReduceSum must be a compile-time constant}}
  %y = onnx.ReduceSum(%x, %axes) {keepdims = 0 : i64} : (tensor<2x3xf32>, tensor<1xi64>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

// expected-error @+1 {{the loss (result 0) must be one f32 element}}
func.func @forward(%x: tensor<2x3xf32> {pipe.input = "x"}) -> (tensor<2x3xf32> {pipe.loss}) {
  %y = onnx.Relu(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// A transpose of the last two axes read only by MatMuls emits no kernel: the
// MatMul reads its operand with the transposed flag (pipert_matmul_t_f32).
// One read by anything else (here the returned value) stays a transpose.

// CHECK-LABEL: func.func @pipe_step(
// CHECK-NOT: pipert_transpose
// CHECK: call @pipert_matmul_t_f32(%{{.*}}, %{{.*}}, %c3_i64{{.*}}, %{{.*}}, %c0_i32{{.*}}, %{{.*}}, %c3_i64{{.*}}, %{{.*}}, %c1_i32{{.*}}, %{{.*}})
// CHECK: call @pipert_transpose(
// CHECK: call @pipert_matmul_f32(
func.func @forward(%a: tensor<2x4x8xf32> {pipe.input = "a"}, %b: tensor<2x6x8xf32> {pipe.input = "b"})
    -> (tensor<f32> {pipe.loss}, tensor<2x8x4xf32> {pipe.output = "at"}) {
  %none = onnx.NoValue : none
  %bt = onnx.Transpose(%b) {perm = array<i64: 0, 2, 1>} : (tensor<2x6x8xf32>) -> tensor<2x8x6xf32>
  %y = onnx.MatMul(%a, %bt) : (tensor<2x4x8xf32>, tensor<2x8x6xf32>) -> tensor<2x4x6xf32>
  %at = onnx.Transpose(%a) {perm = array<i64: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %z = onnx.MatMul(%at, %y) : (tensor<2x8x4xf32>, tensor<2x4x6xf32>) -> tensor<2x8x6xf32>
  %m = onnx.ReduceSum(%z, %none) {keepdims = 0 : i64} : (tensor<2x8x6xf32>, none) -> tensor<f32>
  return %m, %at : tensor<f32>, tensor<2x8x4xf32>
}

// -----

// A MatMul with a 1-D operand keeps the transpose (pipert_matmul_t_f32 takes
// operands of rank 2 or more).

// CHECK-LABEL: func.func @pipe_step(
// CHECK: call @pipert_transpose(
// CHECK: call @pipert_matmul_f32(
// CHECK-NOT: pipert_matmul_t_f32
func.func @forward(%a: tensor<2x4x8xf32> {pipe.input = "a"}, %v: tensor<4xf32> {pipe.input = "v"})
    -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %at = onnx.Transpose(%a) {perm = array<i64: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %y = onnx.MatMul(%at, %v) : (tensor<2x8x4xf32>, tensor<4xf32>) -> tensor<2x8xf32>
  %m = onnx.ReduceSum(%y, %none) {keepdims = 0 : i64} : (tensor<2x8xf32>, none) -> tensor<f32>
  return %m : tensor<f32>
}

