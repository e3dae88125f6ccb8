// RUN: pipe-opt %s | pipe-opt | FileCheck %s

// CHECK-LABEL: func @shape_reshape
func.func @shape_reshape(%x: tensor<2x3x4xf32>, %d: tensor<?x3x4xf32>, %t: tensor<3xi64>) {
  // CHECK: onnx.Shape(%{{.*}}) {start = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2xi64>
  %0 = onnx.Shape(%x) {start = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2xi64>
  // CHECK: onnx.Shape(%{{.*}}) {end = -1 : i64} : (tensor<?x3x4xf32>) -> tensor<2xi64>
  %1 = onnx.Shape(%d) {end = -1 : i64} : (tensor<?x3x4xf32>) -> tensor<2xi64>
  %c = onnx.Constant {value = dense<[0, -1]> : tensor<2xi64>} : tensor<2xi64>
  // CHECK: onnx.Reshape(%{{.*}}, %{{.*}}) : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<2x12xf32>
  %2 = onnx.Reshape(%x, %c) : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<2x12xf32>
  // CHECK: onnx.Reshape(%{{.*}}, %{{.*}}) : (tensor<2x3x4xf32>, tensor<3xi64>) -> tensor<?x?x?xf32>
  %3 = onnx.Reshape(%x, %t) : (tensor<2x3x4xf32>, tensor<3xi64>) -> tensor<?x?x?xf32>
  // CHECK: onnx.Flatten(%{{.*}}) {axis = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %4 = onnx.Flatten(%x) {axis = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  // CHECK: onnx.Flatten(%{{.*}}) : (tensor<?x3x4xf32>) -> tensor<?x12xf32>
  %5 = onnx.Flatten(%d) : (tensor<?x3x4xf32>) -> tensor<?x12xf32>
  return
}

// CHECK-LABEL: func @transpose
func.func @transpose(%x: tensor<2x3x4xf32>) {
  // CHECK: onnx.Transpose(%{{.*}}) : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
  %0 = onnx.Transpose(%x) : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
  // CHECK: onnx.Transpose(%{{.*}}) {perm = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  %1 = onnx.Transpose(%x) {perm = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  return
}

// CHECK-LABEL: func @concat_split
func.func @concat_split(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>, %c: tensor<?x1xf32>, %x: tensor<10x4xf32>) {
  %none = onnx.NoValue : none
  // CHECK: onnx.Concat(%{{.*}}, %{{.*}}, %{{.*}}) {axis = -1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>, tensor<?x1xf32>) -> tensor<2x9xf32>
  %0 = onnx.Concat(%a, %b, %c) {axis = -1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>, tensor<?x1xf32>) -> tensor<2x9xf32>
  %s = onnx.Constant {value = dense<[3, 7]> : tensor<2xi64>} : tensor<2xi64>
  // CHECK: onnx.Split(%{{.*}}, %{{.*}}) : (tensor<10x4xf32>, tensor<2xi64>) -> (tensor<3x4xf32>, tensor<7x4xf32>)
  %1:2 = onnx.Split(%x, %s) : (tensor<10x4xf32>, tensor<2xi64>) -> (tensor<3x4xf32>, tensor<7x4xf32>)
  // CHECK: onnx.Split(%{{.*}}, %{{.*}}) {axis = 1 : i64} : (tensor<10x4xf32>, none) -> (tensor<10x2xf32>, tensor<10x2xf32>)
  %2:2 = onnx.Split(%x, %none) {axis = 1 : i64} : (tensor<10x4xf32>, none) -> (tensor<10x2xf32>, tensor<10x2xf32>)
  // num_outputs (opset 18): ceil(10 / 4) = 3, the last part smaller.
  // CHECK: onnx.Split(%{{.*}}, %{{.*}}) {num_outputs = 4 : i64} : (tensor<10x4xf32>, none) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<1x4xf32>)
  %3:4 = onnx.Split(%x, %none) {num_outputs = 4 : i64} : (tensor<10x4xf32>, none) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<1x4xf32>)
  return
}

// CHECK-LABEL: func @slice
func.func @slice(%x: tensor<10x20x30xf32>, %starts: tensor<2xi64>) {
  %none = onnx.NoValue : none
  %s = onnx.Constant {value = dense<[1, -5]> : tensor<2xi32>} : tensor<2xi32>
  %e = onnx.Constant {value = dense<[9223372036854775807, -1]> : tensor<2xi64>} : tensor<2xi64>
  %a = onnx.Constant {value = dense<[0, 2]> : tensor<2xi64>} : tensor<2xi64>
  %st = onnx.Constant {value = dense<[3, 1]> : tensor<2xi64>} : tensor<2xi64>
  // CHECK: onnx.Slice(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<10x20x30xf32>, tensor<2xi32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<3x20x4xf32>
  %0 = onnx.Slice(%x, %s, %e, %a, %st) : (tensor<10x20x30xf32>, tensor<2xi32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<3x20x4xf32>
  // Reversed: x[::-1] along axis 0.
  %rs = onnx.Constant {value = dense<-1> : tensor<1xi64>} : tensor<1xi64>
  %re = onnx.Constant {value = dense<-9223372036854775807> : tensor<1xi64>} : tensor<1xi64>
  // CHECK: onnx.Slice(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<10x20x30xf32>, tensor<1xi64>, tensor<1xi64>, none, tensor<1xi64>) -> tensor<10x20x30xf32>
  %1 = onnx.Slice(%x, %rs, %re, %none, %rs) : (tensor<10x20x30xf32>, tensor<1xi64>, tensor<1xi64>, none, tensor<1xi64>) -> tensor<10x20x30xf32>
  // Unknown starts: the sliced axes become dynamic.
  // CHECK: onnx.Slice(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<10x20x30xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, none) -> tensor<?x20x?xf32>
  %2 = onnx.Slice(%x, %starts, %e, %a, %none) : (tensor<10x20x30xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, none) -> tensor<?x20x?xf32>
  return
}

// CHECK-LABEL: func @gather
func.func @gather(%emb: tensor<100x16xf32>, %ids: tensor<4x7xi64>, %i: tensor<i32>) {
  // CHECK: onnx.Gather(%{{.*}}, %{{.*}}) : (tensor<100x16xf32>, tensor<4x7xi64>) -> tensor<4x7x16xf32>
  %0 = onnx.Gather(%emb, %ids) : (tensor<100x16xf32>, tensor<4x7xi64>) -> tensor<4x7x16xf32>
  // CHECK: onnx.Gather(%{{.*}}, %{{.*}}) {axis = 1 : i64} : (tensor<100x16xf32>, tensor<i32>) -> tensor<100xf32>
  %1 = onnx.Gather(%emb, %i) {axis = 1 : i64} : (tensor<100x16xf32>, tensor<i32>) -> tensor<100xf32>
  return
}

// CHECK-LABEL: func @squeeze_unsqueeze_expand
func.func @squeeze_unsqueeze_expand(%x: tensor<3x1x4xf32>, %d: tensor<?x1xf32>, %shape: tensor<3xi64>) {
  %none = onnx.NoValue : none
  %a = onnx.Constant {value = dense<[0, -1]> : tensor<2xi64>} : tensor<2xi64>
  // CHECK: onnx.Unsqueeze(%{{.*}}, %{{.*}}) : (tensor<3x1x4xf32>, tensor<2xi64>) -> tensor<1x3x1x4x1xf32>
  %0 = onnx.Unsqueeze(%x, %a) : (tensor<3x1x4xf32>, tensor<2xi64>) -> tensor<1x3x1x4x1xf32>
  // CHECK: onnx.Squeeze(%{{.*}}, %{{.*}}) : (tensor<3x1x4xf32>, none) -> tensor<3x4xf32>
  %1 = onnx.Squeeze(%x, %none) : (tensor<3x1x4xf32>, none) -> tensor<3x4xf32>
  %one = onnx.Constant {value = dense<1> : tensor<1xi64>} : tensor<1xi64>
  // CHECK: onnx.Squeeze(%{{.*}}, %{{.*}}) : (tensor<?x1xf32>, tensor<1xi64>) -> tensor<?xf32>
  %2 = onnx.Squeeze(%d, %one) : (tensor<?x1xf32>, tensor<1xi64>) -> tensor<?xf32>
  // Without axes, which dynamic dims are 1 is unknown.
  // CHECK: onnx.Squeeze(%{{.*}}, %{{.*}}) : (tensor<?x1xf32>, none) -> tensor<*xf32>
  %3 = onnx.Squeeze(%d, %none) : (tensor<?x1xf32>, none) -> tensor<*xf32>
  %s = onnx.Constant {value = dense<[2, 1, 5, 1]> : tensor<4xi64>} : tensor<4xi64>
  // CHECK: onnx.Expand(%{{.*}}, %{{.*}}) : (tensor<3x1x4xf32>, tensor<4xi64>) -> tensor<2x3x5x4xf32>
  %4 = onnx.Expand(%x, %s) : (tensor<3x1x4xf32>, tensor<4xi64>) -> tensor<2x3x5x4xf32>
  // CHECK: onnx.Expand(%{{.*}}, %{{.*}}) : (tensor<3x1x4xf32>, tensor<3xi64>) -> tensor<?x?x?xf32>
  %5 = onnx.Expand(%x, %shape) : (tensor<3x1x4xf32>, tensor<3xi64>) -> tensor<?x?x?xf32>
  return
}
