// RUN: pipe-opt %s --split-input-file --pipe-fuse-gelu | FileCheck %s
// RUN: pipe-opt %s --split-input-file --pipe-fuse-gelu="keep=/mlp/Erf" | FileCheck %s --check-prefix=KEEP
// The exact GELU as torch.onnx spells it becomes one onnx.Gelu, in any
// operand order and with the division written as a multiplication; a chain
// whose intermediate value is used elsewhere, or with other constants, stays.

// CHECK-LABEL: func.func @torch_export
// CHECK-NEXT: %[[G:.*]] = onnx.Gelu(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @torch_export(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = onnx.Constant {value = dense<1.41421354> : tensor<f32>} : tensor<f32>
  %d = onnx.Div(%x, %s) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = onnx.Erf(%d) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %a = onnx.Add(%e, %one) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = onnx.Mul(%x, %a) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %half = onnx.Constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %y = onnx.Mul(%m, %half) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @commuted_and_multiplied
// CHECK-NEXT: %[[G:.*]] = onnx.Gelu(%arg0)
// CHECK-NEXT: return %[[G]]
func.func @commuted_and_multiplied(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = onnx.Constant {value = dense<0.707106769> : tensor<f32>} : tensor<f32>
  %d = onnx.Mul(%s, %x) : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %e = onnx.Erf(%d) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %a = onnx.Add(%one, %e) : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = onnx.Mul(%a, %x) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %half = onnx.Constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %y = onnx.Mul(%half, %m) : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// The Erf's result is also returned: nothing is fused.
// CHECK-LABEL: func.func @shared_intermediate
// CHECK-NOT: onnx.Gelu
// CHECK: onnx.Erf
// CHECK: return
func.func @shared_intermediate(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %s = onnx.Constant {value = dense<1.41421354> : tensor<f32>} : tensor<f32>
  %d = onnx.Div(%x, %s) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = onnx.Erf(%d) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %a = onnx.Add(%e, %one) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = onnx.Mul(%x, %a) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %half = onnx.Constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %y = onnx.Mul(%m, %half) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %y, %e : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Another scale (x / 2 inside the erf): not a GELU.
// CHECK-LABEL: func.func @other_constant
// CHECK-NOT: onnx.Gelu
// CHECK: onnx.Erf
func.func @other_constant(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = onnx.Constant {value = dense<2.0> : tensor<f32>} : tensor<f32>
  %d = onnx.Div(%x, %s) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = onnx.Erf(%d) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %a = onnx.Add(%e, %one) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = onnx.Mul(%x, %a) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %half = onnx.Constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %y = onnx.Mul(%m, %half) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A chain with an op named as a manual cut point (keep=) stays, so that the
// cut names an op; without keep= it is fused like the others.
// CHECK-LABEL: func.func @named
// CHECK-NEXT: onnx.Gelu
// KEEP-LABEL: func.func @named
// KEEP-NOT: onnx.Gelu
// KEEP: onnx.Erf
func.func @named(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = onnx.Constant {value = dense<1.41421354> : tensor<f32>} : tensor<f32>
  %d = onnx.Div(%x, %s) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32> loc("/mlp/Div")
  %e = onnx.Erf(%d) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("/mlp/Erf")
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %a = onnx.Add(%e, %one) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = onnx.Mul(%x, %a) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %half = onnx.Constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %y = onnx.Mul(%m, %half) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
