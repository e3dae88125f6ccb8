// RUN: pipe-opt %s | pipe-opt | FileCheck %s

// CHECK-LABEL: func @binary
func.func @binary(%a: tensor<2x1x4xf32>, %b: tensor<3x1xf32>, %i: tensor<5xi64>, %j: tensor<1xi64>) {
  // CHECK: onnx.Add(%{{.*}}, %{{.*}}) : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  %0 = onnx.Add(%a, %b) : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  // CHECK: onnx.Sub(%{{.*}}, %{{.*}}) : (tensor<5xi64>, tensor<1xi64>) -> tensor<5xi64>
  %1 = onnx.Sub(%i, %j) : (tensor<5xi64>, tensor<1xi64>) -> tensor<5xi64>
  // CHECK: onnx.Mul(%{{.*}}, %{{.*}}) : (tensor<3x1xf32>, tensor<2x1x4xf32>) -> tensor<2x3x4xf32>
  %2 = onnx.Mul(%b, %a) : (tensor<3x1xf32>, tensor<2x1x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: onnx.Div(%{{.*}}, %{{.*}}) : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  %3 = onnx.Div(%a, %b) : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  // Pow's exponent may have another element type.
  // CHECK: onnx.Pow(%{{.*}}, %{{.*}}) : (tensor<2x1x4xf32>, tensor<1xi64>) -> tensor<2x1x4xf32>
  %4 = onnx.Pow(%a, %j) : (tensor<2x1x4xf32>, tensor<1xi64>) -> tensor<2x1x4xf32>
  // CHECK: onnx.Equal(%{{.*}}, %{{.*}}) : (tensor<5xi64>, tensor<1xi64>) -> tensor<5xi1>
  %5 = onnx.Equal(%i, %j) : (tensor<5xi64>, tensor<1xi64>) -> tensor<5xi1>
  // CHECK: onnx.Where(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<5xi1>, tensor<1xi64>, tensor<5xi64>) -> tensor<5xi64>
  %6 = onnx.Where(%5, %j, %i) : (tensor<5xi1>, tensor<1xi64>, tensor<5xi64>) -> tensor<5xi64>
  return
}

// Dynamic and unranked operands give dynamic dims or unranked results.
// CHECK-LABEL: func @binary_dynamic
func.func @binary_dynamic(%a: tensor<?x4xf32>, %b: tensor<3x1x4xf32>, %u: tensor<*xf32>) {
  // CHECK: onnx.Add(%{{.*}}, %{{.*}}) : (tensor<?x4xf32>, tensor<3x1x4xf32>) -> tensor<3x?x4xf32>
  %0 = onnx.Add(%a, %b) : (tensor<?x4xf32>, tensor<3x1x4xf32>) -> tensor<3x?x4xf32>
  // CHECK: onnx.Mul(%{{.*}}, %{{.*}}) : (tensor<?x4xf32>, tensor<*xf32>) -> tensor<*xf32>
  %1 = onnx.Mul(%a, %u) : (tensor<?x4xf32>, tensor<*xf32>) -> tensor<*xf32>
  return
}

// CHECK-LABEL: func @unary
func.func @unary(%x: tensor<2x3xf32>, %i: tensor<4xi32>, %u: tensor<*xf16>) {
  // CHECK: onnx.Relu(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %0 = onnx.Relu(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Neg(%{{.*}}) : (tensor<4xi32>) -> tensor<4xi32>
  %1 = onnx.Neg(%i) : (tensor<4xi32>) -> tensor<4xi32>
  // CHECK: onnx.Tanh(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = onnx.Tanh(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Sigmoid(%{{.*}}) : (tensor<*xf16>) -> tensor<*xf16>
  %3 = onnx.Sigmoid(%u) : (tensor<*xf16>) -> tensor<*xf16>
  // CHECK: onnx.Erf(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = onnx.Erf(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Sqrt(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = onnx.Sqrt(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Exp(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %6 = onnx.Exp(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Log(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %7 = onnx.Log(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Identity(%{{.*}}) : (tensor<4xi32>) -> tensor<4xi32>
  %8 = onnx.Identity(%i) : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// CHECK-LABEL: func @cast
func.func @cast(%x: tensor<2x3xf32>, %u: tensor<*xi64>) {
  // CHECK: onnx.Cast(%{{.*}}) {to = 7 : i64} : (tensor<2x3xf32>) -> tensor<2x3xi64>
  %0 = onnx.Cast(%x) {to = 7 : i64} : (tensor<2x3xf32>) -> tensor<2x3xi64>
  // CHECK: onnx.Cast(%{{.*}}) {to = 9 : i64} : (tensor<2x3xf32>) -> tensor<2x3xi1>
  %1 = onnx.Cast(%x) {to = 9 : i64} : (tensor<2x3xf32>) -> tensor<2x3xi1>
  // CHECK: onnx.Cast(%{{.*}}) {to = 2 : i64} : (tensor<*xi64>) -> tensor<*xui8>
  %2 = onnx.Cast(%u) {to = 2 : i64} : (tensor<*xi64>) -> tensor<*xui8>
  // CHECK: onnx.Cast(%{{.*}}) {to = 16 : i64} : (tensor<2x3xf32>) -> tensor<2x3xbf16>
  %3 = onnx.Cast(%x) {to = 16 : i64} : (tensor<2x3xf32>) -> tensor<2x3xbf16>
  return
}

// CHECK-LABEL: func @values
func.func @values(%shape: tensor<2xi64>) {
  // CHECK: onnx.NoValue : none
  %none = onnx.NoValue : none
  // CHECK: onnx.Constant {value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>} : tensor<2xf32>
  %c = onnx.Constant {value = dense<[1.0, 2.0]> : tensor<2xf32>} : tensor<2xf32>
  // CHECK: onnx.ConstantOfShape(%{{.*}}) : (tensor<2xi64>) -> tensor<?x?xf32>
  %0 = onnx.ConstantOfShape(%shape) : (tensor<2xi64>) -> tensor<?x?xf32>
  // CHECK: onnx.ConstantOfShape(%{{.*}}) {value = dense<7> : tensor<1xi32>} : (tensor<2xi64>) -> tensor<?x?xi32>
  %1 = onnx.ConstantOfShape(%shape) {value = dense<7> : tensor<1xi32>} : (tensor<2xi64>) -> tensor<?x?xi32>
  %start = onnx.Constant {value = dense<1> : tensor<i64>} : tensor<i64>
  %limit = onnx.Constant {value = dense<10> : tensor<i64>} : tensor<i64>
  %delta = onnx.Constant {value = dense<3> : tensor<i64>} : tensor<i64>
  // CHECK: onnx.Range(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<3xi64>
  %2 = onnx.Range(%start, %limit, %delta) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<3xi64>
  return
}

// CHECK-LABEL: func @range_dynamic
func.func @range_dynamic(%s: tensor<f32>, %l: tensor<f32>, %d: tensor<f32>) -> tensor<?xf32> {
  // CHECK: onnx.Range(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<?xf32>
  %0 = onnx.Range(%s, %l, %d) : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
