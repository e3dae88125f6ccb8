// RUN: pipe-opt %s --split-input-file --pipe-fuse-attention | FileCheck %s
// RUN: pipe-opt %s --split-input-file --pipe-fuse-attention="keep=/attn/Softmax" | FileCheck %s --check-prefix=KEEP
// Multi-head attention as torch.onnx writes it becomes one onnx.Attention:
// on the unsplit projection when q, k and v are one Split's parts, with the
// j > i mask as is_causal and any other constant mask as attn_mask (true =
// attend), a mask from the data of (B | 1, H | 1, T | 1, S) (a key padding
// mask) as attn_mask = its Not; a float mask added to the scores (or
// subtracted: its Neg) as the op's float attn_mask unless it is computed
// from a trained parameter; chains with a finite fill or an intermediate
// used elsewhere stay.

// CHECK-LABEL: func.func @packed_causal
// CHECK-NEXT: %[[N:.*]] = onnx.NoValue
// CHECK-NEXT: %[[A:.*]] = onnx.Attention(%arg0, %[[N]], %[[N]], %[[N]]) {is_causal = 1 : i64, q_num_heads = 2 : i64, scale = 5.000000e-01 : f32} : (tensor<2x4x18xf32>, none, none, none) -> tensor<2x4x6xf32>
// CHECK-NEXT: return %[[A]]
// KEEP-LABEL: func.func @packed_causal
// KEEP-NOT: onnx.Attention
// KEEP: onnx.Softmax
func.func @packed_causal(%x: tensor<2x4x18xf32> {pipe.input = "x"}) -> (tensor<2x4x6xf32> {pipe.output = "y"}) {
  %sizes = onnx.Constant {value = dense<6> : tensor<3xi64>} : tensor<3xi64>
  %p:3 = onnx.Split(%x, %sizes) {axis = 2 : i64} : (tensor<2x4x18xf32>, tensor<3xi64>) -> (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>)
  %hs = onnx.Constant {value = dense<[2, 4, 2, 3]> : tensor<4xi64>} : tensor<4xi64>
  %q4 = onnx.Reshape(%p#0, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x4x3xf32>
  %k4 = onnx.Reshape(%p#1, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %kt = onnx.Transpose(%k4) {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x3x4xf32>
  %v4 = onnx.Reshape(%p#2, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x4x3xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<2x2x4x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x4x4xf32>
  %c = onnx.Constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %s2 = onnx.Mul(%s, %c) : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %future = onnx.Constant {value = dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>} : tensor<4x4xi1>
  %ninf = onnx.Constant {value = dense<0xFF800000> : tensor<f32>} : tensor<f32>
  %s3 = onnx.Where(%future, %ninf, %s2) : (tensor<4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %pr = onnx.Softmax(%s3) {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32> loc("/attn/Softmax")
  %o = onnx.MatMul(%pr, %v) : (tensor<2x2x4x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x3xf32>) -> tensor<2x4x2x3xf32>
  %ys = onnx.Constant {value = dense<[2, 4, 6]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<2x4x2x3xf32>, tensor<3xi64>) -> tensor<2x4x6xf32>
  return %y : tensor<2x4x6xf32>
}

// -----

// Separate q, k (of another length: cross-attention) and v, the scale as a
// division, kᵀ as two transposes, no mask.
// CHECK-LABEL: func.func @separate_divided
// CHECK-NEXT: %[[N:.*]] = onnx.NoValue
// CHECK-NEXT: %[[A:.*]] = onnx.Attention(%arg0, %arg1, %arg2, %[[N]]) {q_num_heads = 2 : i64, scale = 2.500000e-01 : f32} : (tensor<2x4x6xf32>, tensor<2x5x6xf32>, tensor<2x5x6xf32>, none) -> tensor<2x4x6xf32>
// CHECK-NEXT: return %[[A]]
func.func @separate_divided(%qi: tensor<2x4x6xf32>, %ki: tensor<2x5x6xf32>, %vi: tensor<2x5x6xf32>) -> tensor<2x4x6xf32> {
  %qs = onnx.Constant {value = dense<[2, 4, 2, 3]> : tensor<4xi64>} : tensor<4xi64>
  %ks = onnx.Constant {value = dense<[2, 5, 2, 3]> : tensor<4xi64>} : tensor<4xi64>
  %q4 = onnx.Reshape(%qi, %qs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x4x3xf32>
  %k4 = onnx.Reshape(%ki, %ks) : (tensor<2x5x6xf32>, tensor<4xi64>) -> tensor<2x5x2x3xf32>
  %kh = onnx.Transpose(%k4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x2x3xf32>) -> tensor<2x2x5x3xf32>
  %kt = onnx.Transpose(%kh) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x5x3xf32>) -> tensor<2x2x3x5xf32>
  %v4 = onnx.Reshape(%vi, %ks) : (tensor<2x5x6xf32>, tensor<4xi64>) -> tensor<2x5x2x3xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x2x3xf32>) -> tensor<2x2x5x3xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<2x2x4x3xf32>, tensor<2x2x3x5xf32>) -> tensor<2x2x4x5xf32>
  %c = onnx.Constant {value = dense<4.0> : tensor<f32>} : tensor<f32>
  %s2 = onnx.Div(%s, %c) : (tensor<2x2x4x5xf32>, tensor<f32>) -> tensor<2x2x4x5xf32>
  %pr = onnx.Softmax(%s2) {axis = -1 : i64} : (tensor<2x2x4x5xf32>) -> tensor<2x2x4x5xf32>
  %o = onnx.MatMul(%pr, %v) : (tensor<2x2x4x5xf32>, tensor<2x2x5x3xf32>) -> tensor<2x2x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x3xf32>) -> tensor<2x4x2x3xf32>
  %ys = onnx.Constant {value = dense<[2, 4, 6]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<2x4x2x3xf32>, tensor<3xi64>) -> tensor<2x4x6xf32>
  return %y : tensor<2x4x6xf32>
}

// -----

// A mask that is not j > i: attn_mask, its negation.
// CHECK-LABEL: func.func @other_mask
// CHECK: %[[M:.*]] = onnx.Constant {value = dense<{{\[\[}}true, true], [false, true]]> : tensor<2x2xi1>}
// CHECK: onnx.Attention(%arg0, %arg1, %arg2, %[[M]]) {q_num_heads = 1 : i64, scale = 1.000000e+00 : f32}
// CHECK-NOT: onnx.Softmax
func.func @other_mask(%qi: tensor<1x2x4xf32>, %ki: tensor<1x2x4xf32>, %vi: tensor<1x2x4xf32>) -> tensor<1x2x4xf32> {
  %hs = onnx.Constant {value = dense<[1, 2, 1, 4]> : tensor<4xi64>} : tensor<4xi64>
  %q4 = onnx.Reshape(%qi, %hs) : (tensor<1x2x4xf32>, tensor<4xi64>) -> tensor<1x2x1x4xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x1x4xf32>) -> tensor<1x1x2x4xf32>
  %k4 = onnx.Reshape(%ki, %hs) : (tensor<1x2x4xf32>, tensor<4xi64>) -> tensor<1x2x1x4xf32>
  %kt = onnx.Transpose(%k4) {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x2x1x4xf32>) -> tensor<1x1x4x2xf32>
  %v4 = onnx.Reshape(%vi, %hs) : (tensor<1x2x4xf32>, tensor<4xi64>) -> tensor<1x2x1x4xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x1x4xf32>) -> tensor<1x1x2x4xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<1x1x2x4xf32>, tensor<1x1x4x2xf32>) -> tensor<1x1x2x2xf32>
  %m = onnx.Constant {value = dense<[[false, false], [true, false]]> : tensor<2x2xi1>} : tensor<2x2xi1>
  %ninf = onnx.Constant {value = dense<0xFF800000> : tensor<f32>} : tensor<f32>
  %s3 = onnx.Where(%m, %ninf, %s) : (tensor<2x2xi1>, tensor<f32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %pr = onnx.Softmax(%s3) {axis = -1 : i64} : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %o = onnx.MatMul(%pr, %v) : (tensor<1x1x2x2xf32>, tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x1x2x4xf32>) -> tensor<1x2x1x4xf32>
  %ys = onnx.Constant {value = dense<[1, 2, 4]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<1x2x1x4xf32>, tensor<3xi64>) -> tensor<1x2x4xf32>
  return %y : tensor<1x2x4xf32>
}

// -----

// A finite fill (exp(-1e4 - max) is not 0 in general) and a probability
// that is also returned stay unfused.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: onnx.Attention
// CHECK: onnx.Softmax
// CHECK-NOT: onnx.Attention
// CHECK: onnx.Softmax
// CHECK-NOT: onnx.Attention
func.func @not_fused(%qi: tensor<1x2x4xf32>, %ki: tensor<1x2x4xf32>, %vi: tensor<1x2x4xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x1x2x2xf32>) {
  %hs = onnx.Constant {value = dense<[1, 2, 1, 4]> : tensor<4xi64>} : tensor<4xi64>
  %q4 = onnx.Reshape(%qi, %hs) : (tensor<1x2x4xf32>, tensor<4xi64>) -> tensor<1x2x1x4xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x1x4xf32>) -> tensor<1x1x2x4xf32>
  %k4 = onnx.Reshape(%ki, %hs) : (tensor<1x2x4xf32>, tensor<4xi64>) -> tensor<1x2x1x4xf32>
  %kt = onnx.Transpose(%k4) {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x2x1x4xf32>) -> tensor<1x1x4x2xf32>
  %v4 = onnx.Reshape(%vi, %hs) : (tensor<1x2x4xf32>, tensor<4xi64>) -> tensor<1x2x1x4xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x1x4xf32>) -> tensor<1x1x2x4xf32>
  %ys = onnx.Constant {value = dense<[1, 2, 4]> : tensor<3xi64>} : tensor<3xi64>
  %s = onnx.MatMul(%q, %kt) : (tensor<1x1x2x4xf32>, tensor<1x1x4x2xf32>) -> tensor<1x1x2x2xf32>
  %m = onnx.Constant {value = dense<[[false, true], [false, false]]> : tensor<2x2xi1>} : tensor<2x2xi1>
  %fill = onnx.Constant {value = dense<-1.0e4> : tensor<f32>} : tensor<f32>
  %s3 = onnx.Where(%m, %fill, %s) : (tensor<2x2xi1>, tensor<f32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %pr = onnx.Softmax(%s3) {axis = -1 : i64} : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %o = onnx.MatMul(%pr, %v) : (tensor<1x1x2x2xf32>, tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x1x2x4xf32>) -> tensor<1x2x1x4xf32>
  %y = onnx.Reshape(%ot, %ys) : (tensor<1x2x1x4xf32>, tensor<3xi64>) -> tensor<1x2x4xf32>
  %s_b = onnx.MatMul(%q, %kt) : (tensor<1x1x2x4xf32>, tensor<1x1x4x2xf32>) -> tensor<1x1x2x2xf32>
  %pr_b = onnx.Softmax(%s_b) {axis = -1 : i64} : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %o_b = onnx.MatMul(%pr_b, %v) : (tensor<1x1x2x2xf32>, tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32>
  %ot_b = onnx.Transpose(%o_b) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x1x2x4xf32>) -> tensor<1x2x1x4xf32>
  %y_b = onnx.Reshape(%ot_b, %ys) : (tensor<1x2x1x4xf32>, tensor<3xi64>) -> tensor<1x2x4xf32>
  return %y, %y_b, %pr_b : tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x1x2x2xf32>
}

// -----

// The causal mask as an additive constant of 0 and -inf (a precomputed
// mask buffer added to the scores, (1, 1, T, S)): is_causal.
// CHECK-LABEL: func.func @packed_additive_causal
// CHECK: onnx.Attention(%arg0, %{{.*}}, %{{.*}}, %{{.*}}) {is_causal = 1 : i64, q_num_heads = 2 : i64, scale = 5.000000e-01 : f32}
// CHECK-NOT: onnx.Softmax
// CHECK-NOT: onnx.Add
func.func @packed_additive_causal(%x: tensor<2x4x18xf32>) -> tensor<2x4x6xf32> {
  %sizes = onnx.Constant {value = dense<6> : tensor<3xi64>} : tensor<3xi64>
  %p:3 = onnx.Split(%x, %sizes) {axis = 2 : i64} : (tensor<2x4x18xf32>, tensor<3xi64>) -> (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>)
  %hs = onnx.Constant {value = dense<[2, 4, 2, 3]> : tensor<4xi64>} : tensor<4xi64>
  %q4 = onnx.Reshape(%p#0, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x4x3xf32>
  %k4 = onnx.Reshape(%p#1, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %kt = onnx.Transpose(%k4) {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x3x4xf32>
  %v4 = onnx.Reshape(%p#2, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x4x3xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<2x2x4x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x4x4xf32>
  %c = onnx.Constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %s2 = onnx.Mul(%s, %c) : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %mask = onnx.Constant {value = dense<[[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>} : tensor<1x1x4x4xf32>
  %s3 = onnx.Add(%s2, %mask) : (tensor<2x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %pr = onnx.Softmax(%s3) {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = onnx.MatMul(%pr, %v) : (tensor<2x2x4x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x3xf32>) -> tensor<2x4x2x3xf32>
  %ys = onnx.Constant {value = dense<[2, 4, 6]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<2x4x2x3xf32>, tensor<3xi64>) -> tensor<2x4x6xf32>
  return %y : tensor<2x4x6xf32>
}

// -----

// Padded keys from the data, masked_fill(pad[:, None, None, :], -inf):
// attn_mask = Not(pad), (B, 1, 1, S).
// CHECK-LABEL: func.func @key_padding
// CHECK: %[[M:.*]] = onnx.Not(%arg1) : (tensor<2x1x1x4xi1>) -> tensor<2x1x1x4xi1>
// CHECK-NEXT: %[[A:.*]] = onnx.Attention(%arg0, %{{.*}}, %{{.*}}, %[[M]]) {q_num_heads = 2 : i64, scale = 1.000000e+00 : f32} : (tensor<2x4x18xf32>, none, none, tensor<2x1x1x4xi1>) -> tensor<2x4x6xf32>
// CHECK-NEXT: return %[[A]]
func.func @key_padding(%x: tensor<2x4x18xf32>, %pad: tensor<2x1x1x4xi1>) -> tensor<2x4x6xf32> {
  %sizes = onnx.Constant {value = dense<6> : tensor<3xi64>} : tensor<3xi64>
  %p:3 = onnx.Split(%x, %sizes) {axis = 2 : i64} : (tensor<2x4x18xf32>, tensor<3xi64>) -> (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>)
  %hs = onnx.Constant {value = dense<[2, 4, 2, 3]> : tensor<4xi64>} : tensor<4xi64>
  %q4 = onnx.Reshape(%p#0, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x4x3xf32>
  %k4 = onnx.Reshape(%p#1, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %kt = onnx.Transpose(%k4) {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x3x4xf32>
  %v4 = onnx.Reshape(%p#2, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x4x3xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<2x2x4x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x4x4xf32>
  %ninf = onnx.Constant {value = dense<0xFF800000> : tensor<f32>} : tensor<f32>
  %s3 = onnx.Where(%pad, %ninf, %s) : (tensor<2x1x1x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %pr = onnx.Softmax(%s3) {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = onnx.MatMul(%pr, %v) : (tensor<2x2x4x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x3xf32>) -> tensor<2x4x2x3xf32>
  %ys = onnx.Constant {value = dense<[2, 4, 6]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<2x4x2x3xf32>, tensor<3xi64>) -> tensor<2x4x6xf32>
  return %y : tensor<2x4x6xf32>
}

// -----

// A mask from the data per sample and query (B, 1, T, S) fuses too; one
// whose keys' axis is broadcast (B, 1, 1, 1) does not (the kernels read a
// row of S flags).
// CHECK-LABEL: func.func @query_mask
// CHECK: onnx.Not(%arg1) : (tensor<2x1x4x4xi1>) -> tensor<2x1x4x4xi1>
// CHECK: onnx.Attention
// CHECK-LABEL: func.func @broadcast_keys
// CHECK-NOT: onnx.Attention
// CHECK: onnx.Softmax
func.func @query_mask(%x: tensor<2x4x18xf32>, %pad: tensor<2x1x4x4xi1>) -> tensor<2x4x6xf32> {
  %sizes = onnx.Constant {value = dense<6> : tensor<3xi64>} : tensor<3xi64>
  %p:3 = onnx.Split(%x, %sizes) {axis = 2 : i64} : (tensor<2x4x18xf32>, tensor<3xi64>) -> (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>)
  %hs = onnx.Constant {value = dense<[2, 4, 2, 3]> : tensor<4xi64>} : tensor<4xi64>
  %q4 = onnx.Reshape(%p#0, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x4x3xf32>
  %k4 = onnx.Reshape(%p#1, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %kt = onnx.Transpose(%k4) {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x3x4xf32>
  %v4 = onnx.Reshape(%p#2, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x4x3xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<2x2x4x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x4x4xf32>
  %ninf = onnx.Constant {value = dense<0xFF800000> : tensor<f32>} : tensor<f32>
  %s3 = onnx.Where(%pad, %ninf, %s) : (tensor<2x1x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %pr = onnx.Softmax(%s3) {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = onnx.MatMul(%pr, %v) : (tensor<2x2x4x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x3xf32>) -> tensor<2x4x2x3xf32>
  %ys = onnx.Constant {value = dense<[2, 4, 6]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<2x4x2x3xf32>, tensor<3xi64>) -> tensor<2x4x6xf32>
  return %y : tensor<2x4x6xf32>
}

func.func @broadcast_keys(%x: tensor<2x4x18xf32>, %pad: tensor<2x1x1x1xi1>) -> tensor<2x4x6xf32> {
  %sizes = onnx.Constant {value = dense<6> : tensor<3xi64>} : tensor<3xi64>
  %p:3 = onnx.Split(%x, %sizes) {axis = 2 : i64} : (tensor<2x4x18xf32>, tensor<3xi64>) -> (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>)
  %hs = onnx.Constant {value = dense<[2, 4, 2, 3]> : tensor<4xi64>} : tensor<4xi64>
  %q4 = onnx.Reshape(%p#0, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x4x3xf32>
  %k4 = onnx.Reshape(%p#1, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %kt = onnx.Transpose(%k4) {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x3x4xf32>
  %v4 = onnx.Reshape(%p#2, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x4x3xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<2x2x4x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x4x4xf32>
  %ninf = onnx.Constant {value = dense<0xFF800000> : tensor<f32>} : tensor<f32>
  %s3 = onnx.Where(%pad, %ninf, %s) : (tensor<2x1x1x1xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %pr = onnx.Softmax(%s3) {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = onnx.MatMul(%pr, %v) : (tensor<2x2x4x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x3xf32>) -> tensor<2x4x2x3xf32>
  %ys = onnx.Constant {value = dense<[2, 4, 6]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<2x4x2x3xf32>, tensor<3xi64>) -> tensor<2x4x6xf32>
  return %y : tensor<2x4x6xf32>
}

// -----

// BERT's extended attention mask from the data, (1 - m) * finfo.min of
// (B, 1, 1, S), added to the scaled scores: the op's float attn_mask.
// CHECK-LABEL: func.func @bert_mask
// CHECK: onnx.Attention(%arg0, %{{.*}}, %{{.*}}, %arg1) {q_num_heads = 2 : i64, scale = 5.000000e-01 : f32} : (tensor<2x4x18xf32>, none, none, tensor<2x1x1x4xf32>) -> tensor<2x4x6xf32>
// CHECK-NOT: onnx.Softmax
func.func @bert_mask(%x: tensor<2x4x18xf32>, %m: tensor<2x1x1x4xf32>) -> tensor<2x4x6xf32> {
  %sizes = onnx.Constant {value = dense<6> : tensor<3xi64>} : tensor<3xi64>
  %p:3 = onnx.Split(%x, %sizes) {axis = 2 : i64} : (tensor<2x4x18xf32>, tensor<3xi64>) -> (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>)
  %hs = onnx.Constant {value = dense<[2, 4, 2, 3]> : tensor<4xi64>} : tensor<4xi64>
  %q4 = onnx.Reshape(%p#0, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x4x3xf32>
  %k4 = onnx.Reshape(%p#1, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %kt = onnx.Transpose(%k4) {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x3x4xf32>
  %v4 = onnx.Reshape(%p#2, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x4x3xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<2x2x4x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x4x4xf32>
  %c = onnx.Constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %sc = onnx.Mul(%s, %c) : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %s3 = onnx.Add(%sc, %m) : (tensor<2x2x4x4xf32>, tensor<2x1x1x4xf32>) -> tensor<2x2x4x4xf32>
  %pr = onnx.Softmax(%s3) {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = onnx.MatMul(%pr, %v) : (tensor<2x2x4x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x3xf32>) -> tensor<2x4x2x3xf32>
  %ys = onnx.Constant {value = dense<[2, 4, 6]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<2x4x2x3xf32>, tensor<3xi64>) -> tensor<2x4x6xf32>
  return %y : tensor<2x4x6xf32>
}

// -----

// ALiBi's per-head bias subtracted (scores - slope_h |i - j|): its Neg.
// CHECK-LABEL: func.func @alibi_sub
// CHECK: %[[N:.*]] = onnx.Neg(%arg1) : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
// CHECK: onnx.Attention(%arg0, %{{.*}}, %{{.*}}, %[[N]])
// CHECK-NOT: onnx.Softmax
func.func @alibi_sub(%x: tensor<2x4x18xf32>, %m: tensor<2x4x4xf32>) -> tensor<2x4x6xf32> {
  %sizes = onnx.Constant {value = dense<6> : tensor<3xi64>} : tensor<3xi64>
  %p:3 = onnx.Split(%x, %sizes) {axis = 2 : i64} : (tensor<2x4x18xf32>, tensor<3xi64>) -> (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>)
  %hs = onnx.Constant {value = dense<[2, 4, 2, 3]> : tensor<4xi64>} : tensor<4xi64>
  %q4 = onnx.Reshape(%p#0, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x4x3xf32>
  %k4 = onnx.Reshape(%p#1, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %kt = onnx.Transpose(%k4) {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x3x4xf32>
  %v4 = onnx.Reshape(%p#2, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x4x3xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<2x2x4x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x4x4xf32>
  %c = onnx.Constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %sc = onnx.Mul(%s, %c) : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %s3 = onnx.Sub(%sc, %m) : (tensor<2x2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %pr = onnx.Softmax(%s3) {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = onnx.MatMul(%pr, %v) : (tensor<2x2x4x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x3xf32>) -> tensor<2x4x2x3xf32>
  %ys = onnx.Constant {value = dense<[2, 4, 6]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<2x4x2x3xf32>, tensor<3xi64>) -> tensor<2x4x6xf32>
  return %y : tensor<2x4x6xf32>
}

// -----

// A bias computed from a trained parameter stays unfused (the fused op
// has no gradient for its mask).
// CHECK-LABEL: func.func @learned_bias
// CHECK-NOT: onnx.Attention
// CHECK: onnx.Softmax
func.func @learned_bias(%x: tensor<2x4x18xf32>, %w: tensor<2x4x4xf32> {pipe.param = "bias", pipe.trainable}) -> tensor<2x4x6xf32> {
  %sizes = onnx.Constant {value = dense<6> : tensor<3xi64>} : tensor<3xi64>
  %p:3 = onnx.Split(%x, %sizes) {axis = 2 : i64} : (tensor<2x4x18xf32>, tensor<3xi64>) -> (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>)
  %hs = onnx.Constant {value = dense<[2, 4, 2, 3]> : tensor<4xi64>} : tensor<4xi64>
  %q4 = onnx.Reshape(%p#0, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x4x3xf32>
  %k4 = onnx.Reshape(%p#1, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %kt = onnx.Transpose(%k4) {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x3x4xf32>
  %v4 = onnx.Reshape(%p#2, %hs) : (tensor<2x4x6xf32>, tensor<4xi64>) -> tensor<2x4x2x3xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x3xf32>) -> tensor<2x2x4x3xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<2x2x4x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x4x4xf32>
  %c = onnx.Constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %sc = onnx.Mul(%s, %c) : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %two = onnx.Constant {value = dense<2.0> : tensor<f32>} : tensor<f32>
  %m = onnx.Mul(%w, %two) : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %s3 = onnx.Add(%sc, %m) : (tensor<2x2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %pr = onnx.Softmax(%s3) {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = onnx.MatMul(%pr, %v) : (tensor<2x2x4x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x3xf32>) -> tensor<2x4x2x3xf32>
  %ys = onnx.Constant {value = dense<[2, 4, 6]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<2x4x2x3xf32>, tensor<3xi64>) -> tensor<2x4x6xf32>
  return %y : tensor<2x4x6xf32>
}

// -----

// Heads not split here (rotary positions applied to q and k of (B, H, T,
// dh), k and v repeated for grouped queries): the 4-D form on Q, K (under
// Kᵀ's Transpose) and V themselves, its Y in P V's place; the merge after
// it stays.
// CHECK-LABEL: func.func @four_d_operands
// CHECK: %[[A:.*]] = onnx.Attention(%arg0, %arg1, %arg2, %{{.*}}) {is_causal = 1 : i64, scale = 5.000000e-01 : f32} : (tensor<2x2x4x3xf32>, tensor<2x2x4x3xf32>, tensor<2x2x4x3xf32>, none) -> tensor<2x2x4x3xf32>
// CHECK-NEXT: %[[T:.*]] = onnx.Transpose(%[[A]]) {perm = array<i64: 0, 2, 1, 3>}
// CHECK: onnx.Reshape(%[[T]]
// CHECK-NOT: onnx.Softmax
func.func @four_d_operands(%q: tensor<2x2x4x3xf32>, %k: tensor<2x2x4x3xf32>, %v: tensor<2x2x4x3xf32>) -> tensor<2x4x6xf32> {
  %kt = onnx.Transpose(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x3xf32>) -> tensor<2x2x3x4xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<2x2x4x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x4x4xf32>
  %c = onnx.Constant {value = dense<2.0> : tensor<f32>} : tensor<f32>
  %sc = onnx.Div(%s, %c) : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %m = onnx.Constant {value = dense<[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>} : tensor<4x4xf32>
  %s3 = onnx.Add(%sc, %m) : (tensor<2x2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x2x4x4xf32>
  %pr = onnx.Softmax(%s3) {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = onnx.MatMul(%pr, %v) : (tensor<2x2x4x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x3xf32>) -> tensor<2x4x2x3xf32>
  %ys = onnx.Constant {value = dense<[2, 4, 6]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<2x4x2x3xf32>, tensor<3xi64>) -> tensor<2x4x6xf32>
  return %y : tensor<2x4x6xf32>
}

// -----

// Kᵀ given as such (no K to read): left as it is.
// CHECK-LABEL: func.func @four_d_given_kt
// CHECK-NOT: onnx.Attention
// CHECK: onnx.Softmax
func.func @four_d_given_kt(%q: tensor<2x2x4x3xf32>, %kt: tensor<2x2x3x4xf32>, %v: tensor<2x2x4x3xf32>) -> tensor<2x2x4x3xf32> {
  %s = onnx.MatMul(%q, %kt) : (tensor<2x2x4x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x4x4xf32>
  %pr = onnx.Softmax(%s) {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = onnx.MatMul(%pr, %v) : (tensor<2x2x4x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x4x3xf32>
  return %o : tensor<2x2x4x3xf32>
}
