// RUN: pipe-opt %s --pipe-lower-to-runtime | FileCheck %s

// Elementwise kernels write over an operand of their size whose block dies
// at them, and only then:
// - the Relu over the Gemm's block A (its input dies there);
// - the Exp not over A (the Relu's result is read again by the Mul): block B;
// - the Add over the Exp's B, not over its broadcast bias;
// - the Mul over its first operand's B (both die there);
// - the Split's parts are a kernel's results (axis 1 of 4 rows is not
//   contiguous): part 0 in A, which is free again, part 1 in a new block C;
// - the Tanh over part 1's C;
// - the reduction in A: of the free blocks that fit (A and B, both freed
//   after the Split) the one freed last, the likeliest still in cache.
// Three blocks: 256 + 256 + 128 bytes.

// CHECK-LABEL: func.func @pipe_step(
// CHECK-SAME: peak_activation_bytes = 640 : i64
// CHECK: call @pipert_alloc(%{{.*}}, %c640_i64)
// CHECK: %[[A:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<256xi8>
// CHECK: %[[B:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<256xi8>
// CHECK: %[[C:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<128xi8>
// CHECK: memref.view %[[A]][%{{.*}}][] : memref<256xi8> to memref<4x16xf32>
// CHECK-NEXT: memref.extract_aligned_pointer_as_index
// CHECK: call @pipert_gemm_f32(
// CHECK: memref.view %[[A]][%{{.*}}][] : memref<256xi8> to memref<4x16xf32>
// CHECK: call @pipert_unary_f32(%{{.*}}, %c2_i32,
// CHECK: memref.view %[[B]][%{{.*}}][] : memref<256xi8> to memref<4x16xf32>
// CHECK: call @pipert_unary_f32(%{{.*}}, %c7_i32
// CHECK: memref.view %[[B]][%{{.*}}][] : memref<256xi8> to memref<4x16xf32>
// CHECK: call @pipert_binary_f32(%{{.*}}, %c0_i32
// CHECK: memref.view %[[B]][%{{.*}}][] : memref<256xi8> to memref<4x16xf32>
// CHECK: call @pipert_binary_f32(%{{.*}}, %c2_i32
// CHECK: memref.view %[[A]][%{{.*}}][] : memref<256xi8> to memref<4x8xf32>
// CHECK: memref.view %[[C]][%{{.*}}][] : memref<128xi8> to memref<4x8xf32>
// CHECK: call @pipert_split(
// CHECK: memref.view %[[C]][%{{.*}}][] : memref<128xi8> to memref<4x8xf32>
// CHECK: call @pipert_unary_f32(%{{.*}}, %c3_i32
// CHECK: memref.view %[[A]][%{{.*}}][] : memref<256xi8> to memref<f32>
// CHECK: call @pipert_reduce_f32(
func.func @forward(%x: tensor<4x8xf32> {pipe.input = "x"},
                   %w: tensor<16x8xf32> {pipe.param = "w", pipe.trainable, pipe.init = dense<0.5> : tensor<16x8xf32>})
    -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %bias = onnx.Constant {value = dense<1.0> : tensor<16xf32>} : tensor<16xf32>
  %h = onnx.Gemm(%x, %w, %none) {transB = 1 : i64} : (tensor<4x8xf32>, tensor<16x8xf32>, none) -> tensor<4x16xf32>
  %r = onnx.Relu(%h) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %e = onnx.Exp(%r) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %b = onnx.Add(%bias, %e) : (tensor<16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %s = onnx.Mul(%b, %r) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %parts:2 = onnx.Split(%s, %none) {axis = 1 : i64, num_outputs = 2 : i64} : (tensor<4x16xf32>, none) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %t = onnx.Tanh(%parts#1) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = onnx.ReduceSum(%t, %none) {keepdims = 0 : i64} : (tensor<4x8xf32>, none) -> tensor<f32>
  return %m : tensor<f32>
}
