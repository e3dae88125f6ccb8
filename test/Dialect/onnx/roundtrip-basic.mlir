// RUN: pipe-opt %s | pipe-opt | FileCheck %s

// CHECK-LABEL: func @gemm
func.func @gemm(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>, %c: tensor<16xf32>) -> tensor<4x16xf32> {
  // CHECK: onnx.Gemm(%{{.*}}, %{{.*}}, %{{.*}}) {transB = 1 : i64} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %y = onnx.Gemm(%a, %b, %c) {transB = 1 : i64} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
