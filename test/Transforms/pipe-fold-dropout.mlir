// RUN: pipe-opt %s --split-input-file --pipe-fold-dropout | FileCheck %s
// RUN: pipe-opt %s --split-input-file --pipe-fold-dropout="keep=/drop/Dropout" | FileCheck %s --check-prefix=KEEP
// RUN: pipe-opt %s --split-input-file --pipe-fold-dropout --pipe-fuse-attention | FileCheck %s --check-prefix=FUSE
// A Dropout that drops nothing (ratio a constant 0, training_mode absent or
// a constant false) and whose mask nothing reads is replaced by its input;
// one that drops (ratio 0.1 in training), or whose mask is read, stays.

// CHECK-LABEL: func.func @zero_ratio
// CHECK-NEXT: %[[Y:.*]] = onnx.Relu(%arg0)
// CHECK-NEXT: return %[[Y]]
// KEEP-LABEL: func.func @zero_ratio
// KEEP: onnx.Dropout
func.func @zero_ratio(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = onnx.Constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %t = onnx.Constant {value = dense<true> : tensor<i1>} : tensor<i1>
  %y, %m = onnx.Dropout(%x, %r, %t) : (tensor<4x8xf32>, tensor<f32>, tensor<i1>) -> (tensor<4x8xf32>, tensor<4x8xi1>) loc("/drop/Dropout")
  %z = onnx.Relu(%y) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @inference
// CHECK-NEXT: %[[Y:.*]] = onnx.Relu(%arg0)
// CHECK-NEXT: %[[Z:.*]] = onnx.Relu(%[[Y]])
// CHECK-NEXT: return %[[Z]]
func.func @inference(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = onnx.Constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %n = onnx.NoValue : none
  %y = onnx.Dropout(%x, %r, %n) : (tensor<4x8xf32>, tensor<f32>, none) -> tensor<4x8xf32>
  %a = onnx.Relu(%y) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %f = onnx.Constant {value = dense<false> : tensor<i1>} : tensor<i1>
  %b, %m = onnx.Dropout(%a, %r, %f) : (tensor<4x8xf32>, tensor<f32>, tensor<i1>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
  %z = onnx.Relu(%b) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @drops_or_mask_read
// CHECK: onnx.Dropout
// CHECK: onnx.Dropout
func.func @drops_or_mask_read(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>) {
  %r = onnx.Constant {value = dense<0.1> : tensor<f32>} : tensor<f32>
  %t = onnx.Constant {value = dense<true> : tensor<i1>} : tensor<i1>
  %y, %m = onnx.Dropout(%x, %r, %t) : (tensor<4x8xf32>, tensor<f32>, tensor<i1>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
  %z = onnx.Constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %y2, %m2 = onnx.Dropout(%y, %z, %t) : (tensor<4x8xf32>, tensor<f32>, tensor<i1>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
  return %y2, %m2 : tensor<4x8xf32>, tensor<4x8xi1>
}

// -----

// nn.Dropout(0.0) on attention's probabilities (nanoGPT's attn_dropout):
// folded, the chain fuses.
// FUSE-LABEL: func.func @attention_dropout
// FUSE: onnx.Attention(%arg0
// FUSE-NOT: onnx.Softmax
// FUSE-NOT: onnx.Dropout
func.func @attention_dropout(%x: tensor<2x4x18xf32>) -> tensor<2x4x6xf32> {
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
  %pr = onnx.Softmax(%s) {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %r = onnx.Constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %t = onnx.Constant {value = dense<true> : tensor<i1>} : tensor<i1>
  %pd, %m = onnx.Dropout(%pr, %r, %t) : (tensor<2x2x4x4xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4x4xi1>)
  %o = onnx.MatMul(%pd, %v) : (tensor<2x2x4x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x4x3xf32>
  %ot = onnx.Transpose(%o) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x3xf32>) -> tensor<2x4x2x3xf32>
  %ys = onnx.Constant {value = dense<[2, 4, 6]> : tensor<3xi64>} : tensor<3xi64>
  %y = onnx.Reshape(%ot, %ys) : (tensor<2x4x2x3xf32>, tensor<3xi64>) -> tensor<2x4x6xf32>
  return %y : tensor<2x4x6xf32>
}

// -----

// A Pad of constant zeros (torch.onnx's before avg_pool2d) is replaced by its
// input, its constants with it; one that pads, or in reflect mode, stays.
// CHECK-LABEL: func.func @pads
// CHECK-NEXT: %[[P:.*]] = onnx.Constant {value = dense<[0, 0, 1, 1, 0, 0, 1, 1]>
// CHECK-NEXT: %[[R:.*]] = onnx.Constant {value = dense<0> : tensor<8xi64>}
// CHECK-NEXT: %[[N:.*]] = onnx.NoValue
// CHECK-NEXT: %[[A:.*]] = onnx.AveragePool(%arg0)
// CHECK-NEXT: %[[B:.*]] = onnx.Pad(%[[A]], %[[P]], %[[N]], %[[N]])
// CHECK-NEXT: %[[C:.*]] = onnx.Pad(%[[B]], %[[R]], %[[N]], %[[N]]) {mode = "reflect"}
// CHECK-NEXT: %[[D:.*]] = onnx.AveragePool(%[[C]])
// CHECK-NEXT: return %[[D]]
// KEEP-LABEL: func.func @pads
// KEEP-COUNT-3: onnx.Pad(
func.func @pads(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %z = onnx.Constant {value = dense<0> : tensor<8xi64>} : tensor<8xi64>
  %p = onnx.Constant {value = dense<[0, 0, 1, 1, 0, 0, 1, 1]> : tensor<8xi64>} : tensor<8xi64>
  %r = onnx.Constant {value = dense<0> : tensor<8xi64>} : tensor<8xi64>
  %n = onnx.NoValue : none
  %a0 = onnx.Pad(%x, %z, %n, %n) : (tensor<1x2x4x4xf32>, tensor<8xi64>, none, none) -> tensor<1x2x4x4xf32> loc("/drop/Dropout")
  %a = onnx.AveragePool(%a0) {kernel_shape = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %b = onnx.Pad(%a, %p, %n, %n) : (tensor<1x2x4x4xf32>, tensor<8xi64>, none, none) -> tensor<1x2x6x6xf32>
  %c = onnx.Pad(%b, %r, %n, %n) {mode = "reflect"} : (tensor<1x2x6x6xf32>, tensor<8xi64>, none, none) -> tensor<1x2x6x6xf32>
  %d = onnx.AveragePool(%c) {kernel_shape = array<i64: 3, 3>} : (tensor<1x2x6x6xf32>) -> tensor<1x2x4x4xf32>
  return %d : tensor<1x2x4x4xf32>
}
