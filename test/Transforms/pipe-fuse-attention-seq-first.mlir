// RUN: pipe-opt %s --split-input-file --pipe-fuse-attention | FileCheck %s
// nn.MultiheadAttention as torch 1.13 exports it (sequence first: q, k, v
// of (L, B, H*dh), the batch and the heads merged into (B*H, L, dh), q
// divided by sqrt(dh) before Q Kᵀ) becomes one onnx.Attention {seq_first =
// 1} on q, k and v where they are, its Y (T, B, H*dh) (and a Reshape): on
// the (T, B, 3*H*dh) projection once where q, k and v are its three equal
// Slices; an additive
// constant mask of 0 and -inf (through baddbmm's Mul by 1; also computed from
// a constant, as torch writes nn.Transformer's square subsequent mask:
// Unsqueeze(Trilu(-inf splat, 1))) as is_causal when it masks exactly
// j > i, else as attn_mask (true = attend). A key padding mask from the
// data as torch writes it (Where(Reshape(Expand(pad (B, 1, 1, S)) over the
// heads, (B*H, 1, S)), -inf, zeros), or with the causal float mask in place
// of the zeros, or a bool causal mask ORed with it) becomes attn_mask =
// Not(pad) (and is_causal). A float mask
// of other values the same for every pair ((T, S) behind leading 1s; a
// -1e4 fill) is the op's float attn_mask, added to the scores. A float mask
// from the data per merged (B*H) pair leaves the chain as it is.

// CHECK-LABEL: func.func @mha_packed_causal
// CHECK-NEXT: %[[N:.*]] = onnx.NoValue
// CHECK-NEXT: %[[A:.*]] = onnx.Attention(%arg0, %[[N]], %[[N]], %[[N]]) {is_causal = 1 : i64, q_num_heads = 2 : i64, scale = 5.000000e-01 : f32, seq_first = 1 : i64} : (tensor<4x2x18xf32>, none, none, none) -> tensor<4x2x6xf32>
// CHECK-NEXT: %[[S:.*]] = onnx.Constant {value = dense<[8, 6]> : tensor<2xi64>}
// CHECK-NEXT: %[[Y:.*]] = onnx.Reshape(%[[A]], %[[S]]) : (tensor<4x2x6xf32>, tensor<2xi64>) -> tensor<8x6xf32>
// CHECK-NEXT: return %[[Y]]
func.func @mha_packed_causal(%x: tensor<4x2x18xf32>) -> tensor<8x6xf32> {
  %ax = onnx.Constant {value = dense<-1> : tensor<1xi64>} : tensor<1xi64>
  %c0 = onnx.Constant {value = dense<0> : tensor<1xi64>} : tensor<1xi64>
  %c6 = onnx.Constant {value = dense<6> : tensor<1xi64>} : tensor<1xi64>
  %c12 = onnx.Constant {value = dense<12> : tensor<1xi64>} : tensor<1xi64>
  %c18 = onnx.Constant {value = dense<18> : tensor<1xi64>} : tensor<1xi64>
  %n = onnx.NoValue : none
  %q3 = onnx.Slice(%x, %c0, %c6, %ax, %n) : (tensor<4x2x18xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<4x2x6xf32>
  %k3 = onnx.Slice(%x, %c6, %c12, %ax, %n) : (tensor<4x2x18xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<4x2x6xf32>
  %v3 = onnx.Slice(%x, %c12, %c18, %ax, %n) : (tensor<4x2x18xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<4x2x6xf32>
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
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %s1 = onnx.Mul(%s, %one) : (tensor<4x4x4xf32>, tensor<f32>) -> tensor<4x4x4xf32>
  %one2 = onnx.Constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %ninf = onnx.Constant {value = dense<0xFF800000> : tensor<4x4xf32>} : tensor<4x4xf32>
  %k1 = onnx.Constant {value = dense<1> : tensor<i64>} : tensor<i64>
  %tri = onnx.Trilu(%ninf, %k1) : (tensor<4x4xf32>, tensor<i64>) -> tensor<4x4xf32>
  %ax0 = onnx.Constant {value = dense<0> : tensor<1xi64>} : tensor<1xi64>
  %mask = onnx.Unsqueeze(%tri, %ax0) : (tensor<4x4xf32>, tensor<1xi64>) -> tensor<1x4x4xf32>
  %m1 = onnx.Mul(%mask, %one2) : (tensor<1x4x4xf32>, tensor<f32>) -> tensor<1x4x4xf32>
  %s2 = onnx.Add(%s1, %m1) : (tensor<4x4x4xf32>, tensor<1x4x4xf32>) -> tensor<4x4x4xf32>
  %p = onnx.Softmax(%s2) {axis = -1 : i64} : (tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %o = onnx.MatMul(%p, %v) : (tensor<4x4x4xf32>, tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %ys = onnx.Constant {value = dense<[8, 6]> : tensor<2xi64>} : tensor<2xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<4x4x3xf32>, tensor<2xi64>) -> tensor<8x6xf32>
  return %y : tensor<8x6xf32>
}

// -----

// Separate q (T = 4), k and v (S = 5: cross-attention), kᵀ as two
// transposes, the scale on the scores, a mask that is not causal: the
// operands as they are, the mask as attn_mask, the result (T, B, H*dh)
// without a Reshape.
// CHECK-LABEL: func.func @mha_separate_masked
// CHECK: %[[M:.*]] = onnx.Constant {value = dense<{{\[\[}}true, true, true, true, false], [true, true, true, true, true], [false, true, true, true, true], [true, true, true, true, true]]> : tensor<4x5xi1>}
// CHECK: %[[A:.*]] = onnx.Attention(%arg0, %arg1, %arg2, %[[M]]) {q_num_heads = 2 : i64, scale = 2.500000e-01 : f32, seq_first = 1 : i64} : (tensor<4x2x6xf32>, tensor<5x2x6xf32>, tensor<5x2x6xf32>, tensor<4x5xi1>) -> tensor<4x2x6xf32>
// CHECK-NEXT: return %[[A]]
func.func @mha_separate_masked(%qi: tensor<4x2x6xf32>, %ki: tensor<5x2x6xf32>, %vi: tensor<5x2x6xf32>) -> tensor<4x2x6xf32> {
  %qs = onnx.Constant {value = dense<[4, 4, 3]> : tensor<3xi64>} : tensor<3xi64>
  %ks = onnx.Constant {value = dense<[5, 4, 3]> : tensor<3xi64>} : tensor<3xi64>
  %q4 = onnx.Reshape(%qi, %qs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %k4 = onnx.Reshape(%ki, %ks) : (tensor<5x2x6xf32>, tensor<3xi64>) -> tensor<5x4x3xf32>
  %kh = onnx.Transpose(%k4) {perm = array<i64: 1, 0, 2>} : (tensor<5x4x3xf32>) -> tensor<4x5x3xf32>
  %kt = onnx.Transpose(%kh) {perm = array<i64: 0, 2, 1>} : (tensor<4x5x3xf32>) -> tensor<4x3x5xf32>
  %v4 = onnx.Reshape(%vi, %ks) : (tensor<5x2x6xf32>, tensor<3xi64>) -> tensor<5x4x3xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 1, 0, 2>} : (tensor<5x4x3xf32>) -> tensor<4x5x3xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<4x4x3xf32>, tensor<4x3x5xf32>) -> tensor<4x4x5xf32>
  %c = onnx.Constant {value = dense<4.0> : tensor<f32>} : tensor<f32>
  %s1 = onnx.Div(%s, %c) : (tensor<4x4x5xf32>, tensor<f32>) -> tensor<4x4x5xf32>
  %mask = onnx.Constant {value = dense<[[0.0, 0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0, 0.0], [0xFF800000, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<4x5xf32>} : tensor<4x5xf32>
  %s2 = onnx.Add(%mask, %s1) : (tensor<4x5xf32>, tensor<4x4x5xf32>) -> tensor<4x4x5xf32>
  %p = onnx.Softmax(%s2) {axis = 2 : i64} : (tensor<4x4x5xf32>) -> tensor<4x4x5xf32>
  %o = onnx.MatMul(%p, %v) : (tensor<4x4x5xf32>, tensor<4x5x3xf32>) -> tensor<4x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %ys = onnx.Constant {value = dense<[4, 2, 6]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<4x4x3xf32>, tensor<3xi64>) -> tensor<4x2x6xf32>
  return %y : tensor<4x2x6xf32>
}

// -----

// A float mask from the data per merged (B*H) pair stays; a constant mask
// with a finite fill is added to the scores by the fused op.
// CHECK-LABEL: func.func @mha_runtime_mask
// CHECK-NOT: onnx.Attention
// CHECK: onnx.Softmax
// CHECK-LABEL: func.func @mha_finite_mask
// CHECK: %[[M:.*]] = onnx.Constant {value = dense<{{\[\[}}0.000000e+00, -1.000000e+04, -1.000000e+04, -1.000000e+04], {{.*}} : tensor<4x4xf32>}
// CHECK: onnx.Attention(%arg0, %arg0, %arg0, %[[M]]) {q_num_heads = 2 : i64, scale = 1.000000e+00 : f32, seq_first = 1 : i64} : (tensor<4x2x6xf32>, tensor<4x2x6xf32>, tensor<4x2x6xf32>, tensor<4x4xf32>) -> tensor<4x2x6xf32>
// CHECK-NOT: onnx.Softmax
func.func @mha_runtime_mask(%qi: tensor<4x2x6xf32>, %mask: tensor<4x1x4xf32>) -> tensor<4x2x6xf32> {
  %hs = onnx.Constant {value = dense<[4, 4, 3]> : tensor<3xi64>} : tensor<3xi64>
  %q4 = onnx.Reshape(%qi, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %k4 = onnx.Reshape(%qi, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %kt = onnx.Transpose(%k4) {perm = array<i64: 1, 2, 0>} : (tensor<4x4x3xf32>) -> tensor<4x3x4xf32>
  %v4 = onnx.Reshape(%qi, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<4x4x3xf32>, tensor<4x3x4xf32>) -> tensor<4x4x4xf32>
  %s2 = onnx.Add(%s, %mask) : (tensor<4x4x4xf32>, tensor<4x1x4xf32>) -> tensor<4x4x4xf32>
  %p = onnx.Softmax(%s2) {axis = -1 : i64} : (tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %o = onnx.MatMul(%p, %v) : (tensor<4x4x4xf32>, tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %ys = onnx.Constant {value = dense<[4, 2, 6]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<4x4x3xf32>, tensor<3xi64>) -> tensor<4x2x6xf32>
  return %y : tensor<4x2x6xf32>
}

func.func @mha_finite_mask(%qi: tensor<4x2x6xf32>) -> tensor<4x2x6xf32> {
  %hs = onnx.Constant {value = dense<[4, 4, 3]> : tensor<3xi64>} : tensor<3xi64>
  %q4 = onnx.Reshape(%qi, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %k4 = onnx.Reshape(%qi, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %kt = onnx.Transpose(%k4) {perm = array<i64: 1, 2, 0>} : (tensor<4x4x3xf32>) -> tensor<4x3x4xf32>
  %v4 = onnx.Reshape(%qi, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<4x4x3xf32>, tensor<4x3x4xf32>) -> tensor<4x4x4xf32>
  %mask = onnx.Constant {value = dense<[[0.0, -1.0e4, -1.0e4, -1.0e4], [0.0, 0.0, -1.0e4, -1.0e4], [0.0, 0.0, 0.0, -1.0e4], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>} : tensor<4x4xf32>
  %s2 = onnx.Add(%s, %mask) : (tensor<4x4x4xf32>, tensor<4x4xf32>) -> tensor<4x4x4xf32>
  %p = onnx.Softmax(%s2) {axis = -1 : i64} : (tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %o = onnx.MatMul(%p, %v) : (tensor<4x4x4xf32>, tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %ys = onnx.Constant {value = dense<[4, 2, 6]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<4x4x3xf32>, tensor<3xi64>) -> tensor<4x2x6xf32>
  return %y : tensor<4x2x6xf32>
}

// -----

// nn.MultiheadAttention's key_padding_mask (B = 2, H = 2): pad expanded
// over the heads, merged into (B*H, 1, S), filled with -inf into zeros.
// CHECK-LABEL: func.func @mha_key_padding
// CHECK: %[[M:.*]] = onnx.Not(%arg1) : (tensor<2x1x1x4xi1>) -> tensor<2x1x1x4xi1>
// CHECK-NEXT: %[[A:.*]] = onnx.Attention(%arg0, %arg0, %arg0, %[[M]]) {q_num_heads = 2 : i64, scale = 1.000000e+00 : f32, seq_first = 1 : i64} : (tensor<4x2x6xf32>, tensor<4x2x6xf32>, tensor<4x2x6xf32>, tensor<2x1x1x4xi1>) -> tensor<4x2x6xf32>
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: onnx.Where
func.func @mha_key_padding(%qi: tensor<4x2x6xf32>, %pad: tensor<2x1x1x4xi1>) -> tensor<4x2x6xf32> {
  %hs = onnx.Constant {value = dense<[4, 4, 3]> : tensor<3xi64>} : tensor<3xi64>
  %q4 = onnx.Reshape(%qi, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %k4 = onnx.Reshape(%qi, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %kt = onnx.Transpose(%k4) {perm = array<i64: 1, 2, 0>} : (tensor<4x4x3xf32>) -> tensor<4x3x4xf32>
  %v4 = onnx.Reshape(%qi, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<4x4x3xf32>, tensor<4x3x4xf32>) -> tensor<4x4x4xf32>
  %es = onnx.Constant {value = dense<[2, 2, 1, 4]> : tensor<4xi64>} : tensor<4xi64>
  %e = onnx.Expand(%pad, %es) : (tensor<2x1x1x4xi1>, tensor<4xi64>) -> tensor<2x2x1x4xi1>
  %ms = onnx.Constant {value = dense<[4, 1, 4]> : tensor<3xi64>} : tensor<3xi64>
  %c = onnx.Reshape(%e, %ms) : (tensor<2x2x1x4xi1>, tensor<3xi64>) -> tensor<4x1x4xi1>
  %ninf = onnx.Constant {value = dense<0xFF800000> : tensor<f32>} : tensor<f32>
  %z = onnx.Constant {value = dense<0.0> : tensor<4x1x4xf32>} : tensor<4x1x4xf32>
  %w = onnx.Where(%c, %ninf, %z) : (tensor<4x1x4xi1>, tensor<f32>, tensor<4x1x4xf32>) -> tensor<4x1x4xf32>
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %m1 = onnx.Mul(%w, %one) : (tensor<4x1x4xf32>, tensor<f32>) -> tensor<4x1x4xf32>
  %s2 = onnx.Add(%s, %m1) : (tensor<4x4x4xf32>, tensor<4x1x4xf32>) -> tensor<4x4x4xf32>
  %p = onnx.Softmax(%s2) {axis = -1 : i64} : (tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %o = onnx.MatMul(%p, %v) : (tensor<4x4x4xf32>, tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %ys = onnx.Constant {value = dense<[4, 2, 6]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<4x4x3xf32>, tensor<3xi64>) -> tensor<4x2x6xf32>
  return %y : tensor<4x2x6xf32>
}

// -----

// The key padding filled into nn.Transformer's causal float mask (torch's
// attn_mask.masked_fill(key_padding_mask, -inf)): is_causal and Not(pad).
// CHECK-LABEL: func.func @mha_key_padding_causal
// CHECK: %[[M:.*]] = onnx.Not(%arg1) : (tensor<2x1x1x4xi1>) -> tensor<2x1x1x4xi1>
// CHECK: onnx.Attention(%arg0, %arg0, %arg0, %[[M]]) {is_causal = 1 : i64, q_num_heads = 2 : i64, scale = 1.000000e+00 : f32, seq_first = 1 : i64}
// CHECK-NOT: onnx.Softmax
func.func @mha_key_padding_causal(%qi: tensor<4x2x6xf32>, %pad: tensor<2x1x1x4xi1>) -> tensor<4x2x6xf32> {
  %hs = onnx.Constant {value = dense<[4, 4, 3]> : tensor<3xi64>} : tensor<3xi64>
  %q4 = onnx.Reshape(%qi, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %k4 = onnx.Reshape(%qi, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %kt = onnx.Transpose(%k4) {perm = array<i64: 1, 2, 0>} : (tensor<4x4x3xf32>) -> tensor<4x3x4xf32>
  %v4 = onnx.Reshape(%qi, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<4x4x3xf32>, tensor<4x3x4xf32>) -> tensor<4x4x4xf32>
  %es = onnx.Constant {value = dense<[2, 2, 1, 4]> : tensor<4xi64>} : tensor<4xi64>
  %e = onnx.Expand(%pad, %es) : (tensor<2x1x1x4xi1>, tensor<4xi64>) -> tensor<2x2x1x4xi1>
  %ms = onnx.Constant {value = dense<[4, 1, 4]> : tensor<3xi64>} : tensor<3xi64>
  %c = onnx.Reshape(%e, %ms) : (tensor<2x2x1x4xi1>, tensor<3xi64>) -> tensor<4x1x4xi1>
  %ninf = onnx.Constant {value = dense<0xFF800000> : tensor<f32>} : tensor<f32>
  %tri0 = onnx.Constant {value = dense<0xFF800000> : tensor<4x4xf32>} : tensor<4x4xf32>
  %k1 = onnx.Constant {value = dense<1> : tensor<i64>} : tensor<i64>
  %z = onnx.Trilu(%tri0, %k1) : (tensor<4x4xf32>, tensor<i64>) -> tensor<4x4xf32>
  %w = onnx.Where(%c, %ninf, %z) : (tensor<4x1x4xi1>, tensor<f32>, tensor<4x4xf32>) -> tensor<4x4x4xf32>
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %m1 = onnx.Mul(%w, %one) : (tensor<4x4x4xf32>, tensor<f32>) -> tensor<4x4x4xf32>
  %s2 = onnx.Add(%s, %m1) : (tensor<4x4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %p = onnx.Softmax(%s2) {axis = -1 : i64} : (tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %o = onnx.MatMul(%p, %v) : (tensor<4x4x4xf32>, tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %ys = onnx.Constant {value = dense<[4, 2, 6]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<4x4x3xf32>, tensor<3xi64>) -> tensor<4x2x6xf32>
  return %y : tensor<4x2x6xf32>
}

// -----

// The same padding filled into a constant mask that is not causal: left
// as it is (the two are not combined into one mask).
// CHECK-LABEL: func.func @mha_key_padding_other_mask
// CHECK-NOT: onnx.Attention
// CHECK: onnx.Softmax
func.func @mha_key_padding_other_mask(%qi: tensor<4x2x6xf32>, %pad: tensor<2x1x1x4xi1>) -> tensor<4x2x6xf32> {
  %hs = onnx.Constant {value = dense<[4, 4, 3]> : tensor<3xi64>} : tensor<3xi64>
  %q4 = onnx.Reshape(%qi, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %k4 = onnx.Reshape(%qi, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %kt = onnx.Transpose(%k4) {perm = array<i64: 1, 2, 0>} : (tensor<4x4x3xf32>) -> tensor<4x3x4xf32>
  %v4 = onnx.Reshape(%qi, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<4x4x3xf32>, tensor<4x3x4xf32>) -> tensor<4x4x4xf32>
  %es = onnx.Constant {value = dense<[2, 2, 1, 4]> : tensor<4xi64>} : tensor<4xi64>
  %e = onnx.Expand(%pad, %es) : (tensor<2x1x1x4xi1>, tensor<4xi64>) -> tensor<2x2x1x4xi1>
  %ms = onnx.Constant {value = dense<[4, 1, 4]> : tensor<3xi64>} : tensor<3xi64>
  %c = onnx.Reshape(%e, %ms) : (tensor<2x2x1x4xi1>, tensor<3xi64>) -> tensor<4x1x4xi1>
  %ninf = onnx.Constant {value = dense<0xFF800000> : tensor<f32>} : tensor<f32>
  %z = onnx.Constant {value = dense<[[0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>} : tensor<4x4xf32>
  %w = onnx.Where(%c, %ninf, %z) : (tensor<4x1x4xi1>, tensor<f32>, tensor<4x4xf32>) -> tensor<4x4x4xf32>
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %m1 = onnx.Mul(%w, %one) : (tensor<4x4x4xf32>, tensor<f32>) -> tensor<4x4x4xf32>
  %s2 = onnx.Add(%s, %m1) : (tensor<4x4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %p = onnx.Softmax(%s2) {axis = -1 : i64} : (tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %o = onnx.MatMul(%p, %v) : (tensor<4x4x4xf32>, tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %ys = onnx.Constant {value = dense<[4, 2, 6]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<4x4x3xf32>, tensor<3xi64>) -> tensor<4x2x6xf32>
  return %y : tensor<4x2x6xf32>
}

// -----

// A bool causal attn_mask ORed with the key padding (torch's logical_or),
// then made a float mask with Where: is_causal and Not(pad).
// CHECK-LABEL: func.func @mha_key_padding_or_bool
// CHECK: %[[M:.*]] = onnx.Not(%arg1) : (tensor<2x1x1x4xi1>) -> tensor<2x1x1x4xi1>
// CHECK: onnx.Attention(%arg0, %arg0, %arg0, %[[M]]) {is_causal = 1 : i64, q_num_heads = 2 : i64, scale = 1.000000e+00 : f32, seq_first = 1 : i64}
// CHECK-NOT: onnx.Or
// CHECK-NOT: onnx.Softmax
func.func @mha_key_padding_or_bool(%qi: tensor<4x2x6xf32>, %pad: tensor<2x1x1x4xi1>) -> tensor<4x2x6xf32> {
  %hs = onnx.Constant {value = dense<[4, 4, 3]> : tensor<3xi64>} : tensor<3xi64>
  %q4 = onnx.Reshape(%qi, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %q = onnx.Transpose(%q4) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %k4 = onnx.Reshape(%qi, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %kt = onnx.Transpose(%k4) {perm = array<i64: 1, 2, 0>} : (tensor<4x4x3xf32>) -> tensor<4x3x4xf32>
  %v4 = onnx.Reshape(%qi, %hs) : (tensor<4x2x6xf32>, tensor<3xi64>) -> tensor<4x4x3xf32>
  %v = onnx.Transpose(%v4) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<4x4x3xf32>, tensor<4x3x4xf32>) -> tensor<4x4x4xf32>
  %es = onnx.Constant {value = dense<[2, 2, 1, 4]> : tensor<4xi64>} : tensor<4xi64>
  %e = onnx.Expand(%pad, %es) : (tensor<2x1x1x4xi1>, tensor<4xi64>) -> tensor<2x2x1x4xi1>
  %ms = onnx.Constant {value = dense<[4, 1, 4]> : tensor<3xi64>} : tensor<3xi64>
  %c = onnx.Reshape(%e, %ms) : (tensor<2x2x1x4xi1>, tensor<3xi64>) -> tensor<4x1x4xi1>
  %ones = onnx.Constant {value = dense<true> : tensor<4x4xi1>} : tensor<4x4xi1>
  %k1 = onnx.Constant {value = dense<1> : tensor<i64>} : tensor<i64>
  %tri = onnx.Trilu(%ones, %k1) : (tensor<4x4xi1>, tensor<i64>) -> tensor<4x4xi1>
  %ax0 = onnx.Constant {value = dense<0> : tensor<1xi64>} : tensor<1xi64>
  %bm = onnx.Unsqueeze(%tri, %ax0) : (tensor<4x4xi1>, tensor<1xi64>) -> tensor<1x4x4xi1>
  %or = onnx.Or(%bm, %c) : (tensor<1x4x4xi1>, tensor<4x1x4xi1>) -> tensor<4x4x4xi1>
  %zeros = onnx.Constant {value = dense<0.0> : tensor<4x4x4xf32>} : tensor<4x4x4xf32>
  %ninf = onnx.Constant {value = dense<0xFF800000> : tensor<f32>} : tensor<f32>
  %w = onnx.Where(%or, %ninf, %zeros) : (tensor<4x4x4xi1>, tensor<f32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s2 = onnx.Add(%s, %w) : (tensor<4x4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %p = onnx.Softmax(%s2) {axis = -1 : i64} : (tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %o = onnx.MatMul(%p, %v) : (tensor<4x4x4xf32>, tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 1, 0, 2>} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %ys = onnx.Constant {value = dense<[4, 2, 6]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<4x4x3xf32>, tensor<3xi64>) -> tensor<4x2x6xf32>
  return %y : tensor<4x2x6xf32>
}
