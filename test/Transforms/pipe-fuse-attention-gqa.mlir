// RUN: pipe-opt %s --split-input-file --pipe-fuse-attention | FileCheck %s
// Grouped-query attention: K and V of (B, H', S, dh) repeated to Q's H
// heads, each key/value head copied to H / H' consecutive heads, as
// Hugging Face's repeat_kv writes it (Reshape(Expand(Unsqueeze at axis 2)))
// or torch 1.13 exports repeat_interleave over the heads (that per head of
// a Split, then Concat), fuse into the 4-D onnx.Attention on the
// unrepeated heads; the repeats go. A tiled repeat (head h a copy of
// h mod H') is another mapping: the op reads the tiled copies.

// CHECK-LABEL: func.func @repeat_kv
// CHECK-NOT: onnx.Expand
// CHECK: %[[A:.*]] = onnx.Attention(%arg0, %arg1, %arg2, %{{.*}}) {is_causal = 1 : i64, scale = 5.000000e-01 : f32} : (tensor<2x4x3x2xf32>, tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>, none) -> tensor<2x4x3x2xf32>
// CHECK-NOT: onnx.Expand
// CHECK: return %[[A]]
func.func @repeat_kv(%q: tensor<2x4x3x2xf32>, %k: tensor<2x2x3x2xf32>, %v: tensor<2x2x3x2xf32>) -> tensor<2x4x3x2xf32> {
  %ax = onnx.Constant {value = dense<2> : tensor<1xi64>} : tensor<1xi64>
  %es = onnx.Constant {value = dense<[2, 2, 2, 3, 2]> : tensor<5xi64>} : tensor<5xi64>
  %rs = onnx.Constant {value = dense<[2, 4, 3, 2]> : tensor<4xi64>} : tensor<4xi64>
  %ku = onnx.Unsqueeze(%k, %ax) : (tensor<2x2x3x2xf32>, tensor<1xi64>) -> tensor<2x2x1x3x2xf32>
  %ke = onnx.Expand(%ku, %es) : (tensor<2x2x1x3x2xf32>, tensor<5xi64>) -> tensor<2x2x2x3x2xf32>
  %kr = onnx.Reshape(%ke, %rs) : (tensor<2x2x2x3x2xf32>, tensor<4xi64>) -> tensor<2x4x3x2xf32>
  %vu = onnx.Unsqueeze(%v, %ax) : (tensor<2x2x3x2xf32>, tensor<1xi64>) -> tensor<2x2x1x3x2xf32>
  %ve = onnx.Expand(%vu, %es) : (tensor<2x2x1x3x2xf32>, tensor<5xi64>) -> tensor<2x2x2x3x2xf32>
  %vr = onnx.Reshape(%ve, %rs) : (tensor<2x2x2x3x2xf32>, tensor<4xi64>) -> tensor<2x4x3x2xf32>
  %kt = onnx.Transpose(%kr) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x3x2xf32>) -> tensor<2x4x2x3xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<2x4x3x2xf32>, tensor<2x4x2x3xf32>) -> tensor<2x4x3x3xf32>
  %c = onnx.Constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %s2 = onnx.Mul(%s, %c) : (tensor<2x4x3x3xf32>, tensor<f32>) -> tensor<2x4x3x3xf32>
  %mask = onnx.Constant {value = dense<[[0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0]]> : tensor<3x3xf32>} : tensor<3x3xf32>
  %s3 = onnx.Add(%s2, %mask) : (tensor<2x4x3x3xf32>, tensor<3x3xf32>) -> tensor<2x4x3x3xf32>
  %p = onnx.Softmax(%s3) {axis = -1 : i64} : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %o = onnx.MatMul(%p, %vr) : (tensor<2x4x3x3xf32>, tensor<2x4x3x2xf32>) -> tensor<2x4x3x2xf32>
  return %o : tensor<2x4x3x2xf32>
}

// -----

// torch's repeat_interleave(2, dim=1) of two key/value heads, K of another
// length than Q.
// CHECK-LABEL: func.func @repeat_interleave
// CHECK-NOT: onnx.Split
// CHECK-NOT: onnx.Concat
// CHECK: onnx.Attention(%arg0, %arg1, %arg2, %{{.*}}) {scale = 5.000000e-01 : f32} : (tensor<1x4x3x2xf32>, tensor<1x2x5x2xf32>, tensor<1x2x5x2xf32>, none) -> tensor<1x4x3x2xf32>
// CHECK-NOT: onnx.Expand
func.func @repeat_interleave(%q: tensor<1x4x3x2xf32>, %k: tensor<1x2x5x2xf32>, %v: tensor<1x2x5x2xf32>) -> tensor<1x4x3x2xf32> {
  %ones = onnx.Constant {value = dense<1> : tensor<2xi64>} : tensor<2xi64>
  %ax = onnx.Constant {value = dense<2> : tensor<1xi64>} : tensor<1xi64>
  %es = onnx.Constant {value = dense<[1, 1, 2, 5, 2]> : tensor<5xi64>} : tensor<5xi64>
  %rs = onnx.Constant {value = dense<[1, -1, 5, 2]> : tensor<4xi64>} : tensor<4xi64>
  %ks:2 = onnx.Split(%k, %ones) {axis = 1 : i64} : (tensor<1x2x5x2xf32>, tensor<2xi64>) -> (tensor<1x1x5x2xf32>, tensor<1x1x5x2xf32>)
  %k0u = onnx.Unsqueeze(%ks#0, %ax) : (tensor<1x1x5x2xf32>, tensor<1xi64>) -> tensor<1x1x1x5x2xf32>
  %k0e = onnx.Expand(%k0u, %es) : (tensor<1x1x1x5x2xf32>, tensor<5xi64>) -> tensor<1x1x2x5x2xf32>
  %k0 = onnx.Reshape(%k0e, %rs) : (tensor<1x1x2x5x2xf32>, tensor<4xi64>) -> tensor<1x2x5x2xf32>
  %k1u = onnx.Unsqueeze(%ks#1, %ax) : (tensor<1x1x5x2xf32>, tensor<1xi64>) -> tensor<1x1x1x5x2xf32>
  %k1e = onnx.Expand(%k1u, %es) : (tensor<1x1x1x5x2xf32>, tensor<5xi64>) -> tensor<1x1x2x5x2xf32>
  %k1 = onnx.Reshape(%k1e, %rs) : (tensor<1x1x2x5x2xf32>, tensor<4xi64>) -> tensor<1x2x5x2xf32>
  %kr = onnx.Concat(%k0, %k1) {axis = 1 : i64} : (tensor<1x2x5x2xf32>, tensor<1x2x5x2xf32>) -> tensor<1x4x5x2xf32>
  %vs:2 = onnx.Split(%v, %ones) {axis = 1 : i64} : (tensor<1x2x5x2xf32>, tensor<2xi64>) -> (tensor<1x1x5x2xf32>, tensor<1x1x5x2xf32>)
  %v0u = onnx.Unsqueeze(%vs#0, %ax) : (tensor<1x1x5x2xf32>, tensor<1xi64>) -> tensor<1x1x1x5x2xf32>
  %v0e = onnx.Expand(%v0u, %es) : (tensor<1x1x1x5x2xf32>, tensor<5xi64>) -> tensor<1x1x2x5x2xf32>
  %v0 = onnx.Reshape(%v0e, %rs) : (tensor<1x1x2x5x2xf32>, tensor<4xi64>) -> tensor<1x2x5x2xf32>
  %v1u = onnx.Unsqueeze(%vs#1, %ax) : (tensor<1x1x5x2xf32>, tensor<1xi64>) -> tensor<1x1x1x5x2xf32>
  %v1e = onnx.Expand(%v1u, %es) : (tensor<1x1x1x5x2xf32>, tensor<5xi64>) -> tensor<1x1x2x5x2xf32>
  %v1 = onnx.Reshape(%v1e, %rs) : (tensor<1x1x2x5x2xf32>, tensor<4xi64>) -> tensor<1x2x5x2xf32>
  %vr = onnx.Concat(%v0, %v1) {axis = 1 : i64} : (tensor<1x2x5x2xf32>, tensor<1x2x5x2xf32>) -> tensor<1x4x5x2xf32>
  %kt = onnx.Transpose(%kr) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x5x2xf32>) -> tensor<1x4x2x5xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<1x4x3x2xf32>, tensor<1x4x2x5xf32>) -> tensor<1x4x3x5xf32>
  %c = onnx.Constant {value = dense<2.0> : tensor<f32>} : tensor<f32>
  %s2 = onnx.Div(%s, %c) : (tensor<1x4x3x5xf32>, tensor<f32>) -> tensor<1x4x3x5xf32>
  %p = onnx.Softmax(%s2) {axis = -1 : i64} : (tensor<1x4x3x5xf32>) -> tensor<1x4x3x5xf32>
  %o = onnx.MatMul(%p, %vr) : (tensor<1x4x3x5xf32>, tensor<1x4x5x2xf32>) -> tensor<1x4x3x2xf32>
  return %o : tensor<1x4x3x2xf32>
}

// -----

// Tiled (k.repeat(1, 2, 1, 1)): head h is a copy of h mod 2, not h / 2;
// the op reads the tiled K and V.
// CHECK-LABEL: func.func @tiled
// CHECK: %[[K:.*]] = onnx.Tile(%arg1
// CHECK: %[[V:.*]] = onnx.Tile(%arg2
// CHECK: onnx.Attention(%arg0, %[[K]], %[[V]], %{{.*}}) {scale = 5.000000e-01 : f32} : (tensor<1x4x3x2xf32>, tensor<1x4x3x2xf32>, tensor<1x4x3x2xf32>, none) -> tensor<1x4x3x2xf32>
func.func @tiled(%q: tensor<1x4x3x2xf32>, %k: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>) -> tensor<1x4x3x2xf32> {
  %reps = onnx.Constant {value = dense<[1, 2, 1, 1]> : tensor<4xi64>} : tensor<4xi64>
  %kr = onnx.Tile(%k, %reps) : (tensor<1x2x3x2xf32>, tensor<4xi64>) -> tensor<1x4x3x2xf32>
  %vr = onnx.Tile(%v, %reps) : (tensor<1x2x3x2xf32>, tensor<4xi64>) -> tensor<1x4x3x2xf32>
  %kt = onnx.Transpose(%kr) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x3x2xf32>) -> tensor<1x4x2x3xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<1x4x3x2xf32>, tensor<1x4x2x3xf32>) -> tensor<1x4x3x3xf32>
  %c = onnx.Constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %s2 = onnx.Mul(%s, %c) : (tensor<1x4x3x3xf32>, tensor<f32>) -> tensor<1x4x3x3xf32>
  %p = onnx.Softmax(%s2) {axis = -1 : i64} : (tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
  %o = onnx.MatMul(%p, %vr) : (tensor<1x4x3x3xf32>, tensor<1x4x3x2xf32>) -> tensor<1x4x3x2xf32>
  return %o : tensor<1x4x3x2xf32>
}
