// RUN: pipe-opt %s --split-input-file --pipe-autodiff -verify-diagnostics

// expected-error @+1 {{@forward has no result marked pipe.loss}}
func.func @forward(%w: tensor<3xf32> {pipe.param = "w", pipe.trainable}) -> tensor<3xf32> {
  return %w : tensor<3xf32>
}

// -----
// expected-error @+1 {{the loss (result #0 of @forward) must be a float scalar, got 'tensor<3xf32>'}}
func.func @forward(%w: tensor<3xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<3xf32> {pipe.loss}) {
  return %w : tensor<3xf32>
}

// -----
// expected-error @+1 {{no argument of @forward is marked pipe.trainable}}
func.func @forward(%x: tensor<3xf32> {pipe.input = "x"}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %0 = onnx.ReduceSum(%x, %none) {keepdims = 0 : i64} : (tensor<3xf32>, none) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----
func.func @forward(%x: tensor<3xf32> {pipe.input = "x"}, %w: tensor<3xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.ReluGrad' op has no VJP rule: cannot differentiate through 'onnx.ReluGrad'}}
  %0 = onnx.ReluGrad(%x, %w) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %1 = onnx.ReduceSum(%0, %none) {keepdims = 0 : i64} : (tensor<3xf32>, none) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----
func.func @forward(%x: tensor<2x3xf32> {pipe.input = "x"}, %y: tensor<2xi64> {pipe.input = "y"}, %cw: tensor<3xf32> {pipe.param = "cw", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  // expected-error @+1 {{'onnx.SoftmaxCrossEntropyLoss' op cannot differentiate with respect to the class weights}}
  %0 = onnx.SoftmaxCrossEntropyLoss(%x, %y, %cw) : (tensor<2x3xf32>, tensor<2xi64>, tensor<3xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----
func.func @forward(%x: tensor<4x3xf32> {pipe.input = "X"}, %w: tensor<3xf32> {pipe.param = "W", pipe.trainable}) -> (tensor<f32> {pipe.loss, pipe.output = "loss"}) {
  %0 = onnx.MatMul(%x, %w) : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4xf32>
  %1 = onnx.MatMul(%0, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
func.func @training_algorithm(%x: tensor<4x3xf32> {pipe.input = "X"}, %w: tensor<3xf32> {pipe.param = "W", pipe.trainable}) -> tensor<3xf32> {
  // expected-error @+1 {{'onnx.Gradient' op y 'S' is not an output of @forward}}
  %0 = onnx.Gradient(%w) {xs = ["W"], y = "S"} : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----
func.func @forward(%x: tensor<4x3xf32> {pipe.input = "X"}, %w: tensor<3xf32> {pipe.param = "W", pipe.trainable}) -> (tensor<f32> {pipe.loss, pipe.output = "loss"}) {
  %0 = onnx.MatMul(%x, %w) : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4xf32>
  %1 = onnx.MatMul(%0, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
func.func @training_algorithm(%w: tensor<3xf32> {pipe.param = "W", pipe.trainable}) -> tensor<3xf32> {
  // expected-error @+1 {{'onnx.Gradient' op @training_algorithm has no argument for @forward's argument #0 'X'}}
  %0 = onnx.Gradient(%w) {xs = ["W"], y = "loss"} : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----
// An op with regions may read a parameter inside them with no operand: not
// a constant (it was taken for one, with zero gradients).
func.func @forward(%x: tensor<8x4xf32> {pipe.input = "x"}, %y: tensor<8xi64> {pipe.input = "y"}, %w: tensor<3x4xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{has regions: the autodiff differentiates straight-line ops (control flow such as ONNX If, Loop or Scan is not supported)}}
  %1 = scf.execute_region -> tensor<8x3xf32> {
    %0 = onnx.Gemm(%x, %w, %none) {transB = 1 : i64} : (tensor<8x4xf32>, tensor<3x4xf32>, none) -> tensor<8x3xf32>
    scf.yield %0 : tensor<8x3xf32>
  }
  %3 = onnx.SoftmaxCrossEntropyLoss(%1, %y, %none) : (tensor<8x3xf32>, tensor<8xi64>, none) -> tensor<f32>
  return %3 : tensor<f32>
}

// -----
// A float attn_mask computed from a trained parameter (a learned position
// bias): the fused op has no gradient for it (pipe-fuse-attention leaves
// such chains unfused).
func.func @forward(%q: tensor<1x2x3x4xf32> {pipe.input = "q"}, %b: tensor<3x3xf32> {pipe.param = "b", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{has a float attn_mask computed from trained parameters, whose gradient is not supported; compile with --no-fuse-attention}}
  %0 = onnx.Attention(%q, %q, %q, %b) : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<3x3xf32>) -> tensor<1x2x3x4xf32>
  %1 = onnx.ReduceSum(%0, %none) {keepdims = 0 : i64} : (tensor<1x2x3x4xf32>, none) -> tensor<f32>
  return %1 : tensor<f32>
}
