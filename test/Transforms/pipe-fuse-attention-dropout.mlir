// RUN: pipe-opt %s --split-input-file --pipe-fuse-attention | FileCheck %s
// A training-mode Dropout between the softmax and P V (attention dropout:
// a constant ratio in (0, 1), training_mode a constant true, its mask read
// by nothing) fuses with the chain: the op gets `dropout` = the ratio (0.5,
// ONNX's default, without one), in each form (3-D batch first, 4-D,
// sequence first). A Dropout whose mask is read, or whose training_mode is
// not a constant, leaves the chain as it is.

// CHECK-LABEL: func.func @separate_dropout
// CHECK-NEXT: %[[N:.*]] = onnx.NoValue
// CHECK-NEXT: %[[A:.*]] = onnx.Attention(%arg0, %arg1, %arg2, %[[N]]) {dropout = 1.000000e-01 : f32, is_causal = 1 : i64, q_num_heads = 2 : i64, scale = 5.000000e-01 : f32} : (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>, none) -> tensor<2x4x6xf32>
// CHECK-NEXT: return %[[A]]
func.func @separate_dropout(%qi: tensor<2x4x6xf32>, %ki: tensor<2x4x6xf32>, %vi: tensor<2x4x6xf32>) -> tensor<2x4x6xf32> {
  %hs = onnx.Constant {value = dense<[2, 4, 2, 3]> : tensor<4xi64>} : tensor<4xi64>
  %q4 = onnx.Reshape(%qi, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x4x3xf32>
  %k4 = onnx.Reshape(%ki, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %kt = onnx.Transpose(%k4) {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x3x4xf32>
  %v4 = onnx.Reshape(%vi, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x4x3xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<2x2x4x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x4x4xf32>
  %c = onnx.Constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %s2 = onnx.Mul(%s, %c) : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %mask = onnx.Constant {value = dense<[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>} : tensor<4x4xf32>
  %s3 = onnx.Add(%s2, %mask) : (tensor<2x2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x2x4x4xf32>
  %pr = onnx.Softmax(%s3) {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %ratio = onnx.Constant {value = dense<0.1> : tensor<f32>} : tensor<f32>
  %train = onnx.Constant {value = dense<true> : tensor<i1>} : tensor<i1>
  %pd, %m = onnx.Dropout(%pr, %ratio, %train) : (tensor<2x2x4x4xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4x4xi1>)
  %o = onnx.MatMul(%pd, %v) : (tensor<2x2x4x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x3xf32>) -> tensor<2x4x2x3xf32>
  %ys = onnx.Constant {value = dense<[2, 4, 6]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<2x4x2x3xf32>, tensor<3xi64>) -> tensor<2x4x6xf32>
  return %y : tensor<2x4x6xf32>
}

// -----

// No ratio: ONNX's default 0.5. The 4-D form (heads given).
// CHECK-LABEL: func.func @four_d_default_ratio
// CHECK: %[[A:.*]] = onnx.Attention(%arg0, %arg1, %arg2, %{{.*}}) {dropout = 5.000000e-01 : f32, scale = 5.000000e-01 : f32} : (tensor<2x2x4x3xf32>, tensor<2x2x5x3xf32>, tensor<2x2x5x3xf32>, none) -> tensor<2x2x4x3xf32>
// CHECK-NOT: onnx.Dropout
// CHECK-NOT: onnx.Softmax
// CHECK: return %[[A]]
func.func @four_d_default_ratio(%q: tensor<2x2x4x3xf32>, %k: tensor<2x2x5x3xf32>, %v: tensor<2x2x5x3xf32>) -> tensor<2x2x4x3xf32> {
  %kt = onnx.Transpose(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x5x3xf32>) -> tensor<2x2x3x5xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<2x2x4x3xf32>, tensor<2x2x3x5xf32>) -> tensor<2x2x4x5xf32>
  %c = onnx.Constant {value = dense<2.0> : tensor<f32>} : tensor<f32>
  %s2 = onnx.Div(%s, %c) : (tensor<2x2x4x5xf32>, tensor<f32>) -> tensor<2x2x4x5xf32>
  %pr = onnx.Softmax(%s2) {axis = -1 : i64} : (tensor<2x2x4x5xf32>) -> tensor<2x2x4x5xf32>
  %none = onnx.NoValue : none
  %train = onnx.Constant {value = dense<true> : tensor<i1>} : tensor<i1>
  %pd = onnx.Dropout(%pr, %none, %train) : (tensor<2x2x4x5xf32>, none, tensor<i1>) -> tensor<2x2x4x5xf32>
  %o = onnx.MatMul(%pd, %v) : (tensor<2x2x4x5xf32>, tensor<2x2x5x3xf32>) -> tensor<2x2x4x3xf32>
  return %o : tensor<2x2x4x3xf32>
}

// -----

// nn.MultiheadAttention's sequence-first chain, its weights dropped.
// CHECK-LABEL: func.func @mha_dropout
// CHECK: onnx.Attention(%arg0, %arg1, %arg2, %{{.*}}) {dropout = 2.500000e-01 : f32, q_num_heads = 2 : i64, scale = 5.000000e-01 : f32, seq_first = 1 : i64} : (tensor<4x2x6xf32>, tensor<4x2x6xf32>, tensor<4x2x6xf32>, none) -> tensor<4x2x6xf32>
// CHECK-NOT: onnx.Dropout
// CHECK-NOT: onnx.Softmax
func.func @mha_dropout(%q3: tensor<4x2x6xf32>, %k3: tensor<4x2x6xf32>, %v3: tensor<4x2x6xf32>) -> tensor<8x6xf32> {
  %hs = onnx.Constant {value = dense<[4, 4, 3]> : tensor<3xi64>} : tensor<3xi64>
  %q4 = onnx.Reshape(%q3, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %k4 = onnx.Reshape(%k3, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %v4 = onnx.Reshape(%v3, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %two = onnx.Constant {value = dense<2.0> : tensor<f32>} : tensor<f32>
  %qd = onnx.Div(%q, %two) : (tensor<4x4x3xf32>, tensor<f32>) -> tensor<4x4x3xf32>
  %kt = onnx.Transpose(%k4) {perm = array<i64: 1, 2, 0>} : (tensor<4x4x3xf32>) -> tensor<4x3x4xf32>
  %s = onnx.MatMul(%qd, %kt) : (tensor<4x4x3xf32>, tensor<4x3x4xf32>) -> tensor<4x4x4xf32>
  %pr = onnx.Softmax(%s) {axis = -1 : i64} : (tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %ratio = onnx.Constant {value = dense<0.25> : tensor<f32>} : tensor<f32>
  %train = onnx.Constant {value = dense<true> : tensor<i1>} : tensor<i1>
  %pd, %m = onnx.Dropout(%pr, %ratio, %train) : (tensor<4x4x4xf32>, tensor<f32>, tensor<i1>) -> (tensor<4x4x4xf32>, tensor<4x4x4xi1>)
  %o = onnx.MatMul(%pd, %v) : (tensor<4x4x4xf32>, tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %ys = onnx.Constant {value = dense<[8, 6]> : tensor<2xi64>} : tensor<2xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<4x4x3xf32>, tensor<2xi64>) -> tensor<8x6xf32>
  return %y : tensor<8x6xf32>
}

// -----

// The Dropout's mask is read (returned): the chain stays.
// CHECK-LABEL: func.func @mask_read
// CHECK-NOT: onnx.Attention
// CHECK: onnx.Softmax
// CHECK: onnx.Dropout
func.func @mask_read(%q: tensor<2x2x4x3xf32>, %k: tensor<2x2x4x3xf32>, %v: tensor<2x2x4x3xf32>) -> (tensor<2x2x4x3xf32>, tensor<2x2x4x4xi1>) {
  %kt = onnx.Transpose(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x3xf32>) -> tensor<2x2x3x4xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<2x2x4x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x4x4xf32>
  %pr = onnx.Softmax(%s) {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %ratio = onnx.Constant {value = dense<0.1> : tensor<f32>} : tensor<f32>
  %train = onnx.Constant {value = dense<true> : tensor<i1>} : tensor<i1>
  %pd, %m = onnx.Dropout(%pr, %ratio, %train) : (tensor<2x2x4x4xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4x4xi1>)
  %o = onnx.MatMul(%pd, %v) : (tensor<2x2x4x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x4x3xf32>
  return %o, %m : tensor<2x2x4x3xf32>, tensor<2x2x4x4xi1>
}

// -----

// training_mode from the data: the chain stays.
// CHECK-LABEL: func.func @mode_from_data
// CHECK-NOT: onnx.Attention
// CHECK: onnx.Dropout
func.func @mode_from_data(%q: tensor<2x2x4x3xf32>, %k: tensor<2x2x4x3xf32>, %v: tensor<2x2x4x3xf32>, %train: tensor<i1>) -> tensor<2x2x4x3xf32> {
  %kt = onnx.Transpose(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x3xf32>) -> tensor<2x2x3x4xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<2x2x4x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x4x4xf32>
  %pr = onnx.Softmax(%s) {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %ratio = onnx.Constant {value = dense<0.1> : tensor<f32>} : tensor<f32>
  %pd = onnx.Dropout(%pr, %ratio, %train) : (tensor<2x2x4x4xf32>, tensor<f32>, tensor<i1>) -> tensor<2x2x4x4xf32>
  %o = onnx.MatMul(%pd, %v) : (tensor<2x2x4x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x4x3xf32>
  return %o : tensor<2x2x4x3xf32>
}
