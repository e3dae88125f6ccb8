// RUN: pipe-opt %s --split-input-file --pipe-lower-programs | FileCheck %s

// A stage output that is another shape of a kernel's result (a Gemm's input
// rows, kept for the backward) is not copied into the caller's buffer: the
// kernel writes there (output 0, loaded from the outputs array) and the
// view is that buffer.
// CHECK-LABEL: func.func private @__pipe_s0_fwd(
// CHECK-SAME: %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[OUT:[^:]*]]: !llvm.ptr
// CHECK: llvm.getelementptr %[[OUT]][0]
// CHECK-NOT: pipert_copy_device
// CHECK: call @pipert_unary_f32(
// CHECK-NOT: pipert_copy_device
// CHECK: return
pipe.stage @s0_fwd forward stage 0 params 0 (%x: tensor<2x4xf32>) -> tensor<8xf32> {
  %n = "onnx.Neg"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %shape = "onnx.Constant"() {value = dense<[8]> : tensor<1xi64>} : () -> tensor<1xi64>
  %r = "onnx.Reshape"(%n, %shape) : (tensor<2x4xf32>, tensor<1xi64>) -> tensor<8xf32>
  pipe.return %r : tensor<8xf32>
}
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 1 {
  %x = pipe.feed "x" mb 0 : tensor<2x4xf32>
  %y = pipe.forward @s0_fwd(%x) mb 0 : (tensor<2x4xf32>) -> tensor<8xf32>
}

// -----

// Two outputs of one kernel's result (itself and a view of it): the result
// goes to output 0, and the view is copied to output 1.
// CHECK-LABEL: func.func private @__pipe_s0_fwd(
// CHECK: call @pipert_unary_f32(
// CHECK: call @pipert_copy_device(
// CHECK-NOT: pipert_copy_device
// CHECK: return
pipe.stage @s0_fwd forward stage 0 params 0 (%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<8xf32>) {
  %n = "onnx.Neg"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %shape = "onnx.Constant"() {value = dense<[8]> : tensor<1xi64>} : () -> tensor<1xi64>
  %r = "onnx.Reshape"(%n, %shape) : (tensor<2x4xf32>, tensor<1xi64>) -> tensor<8xf32>
  pipe.return %n, %r : tensor<2x4xf32>, tensor<8xf32>
}
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 1 {
  %x = pipe.feed "x" mb 0 : tensor<2x4xf32>
  %y:2 = pipe.forward @s0_fwd(%x) mb 0 : (tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<8xf32>)
}
