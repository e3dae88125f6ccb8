// RUN: pipe-opt %s --split-input-file --pipe-split-stages -verify-diagnostics

func.func @train_step(%x: tensor<2x3xf32> {pipe.input = "x"}, %w: tensor<3xf32> {pipe.param = "w", pipe.trainable, pipe.stage = 0 : i64}) -> (tensor<f32> {pipe.loss}, tensor<3xf32> {pipe.grad = "w"}) {
  %y = onnx.Mul(%x, %w) {pipe.stage = 0 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.ReduceSum' op has no pipe.stage: run --pipe-assign-stages on the forward before --pipe-autodiff}}
  %l = onnx.ReduceSum(%y, %none) {keepdims = 0 : i64} : (tensor<2x3xf32>, none) -> tensor<f32>
  %t = onnx.Constant {value = dense<3> : tensor<1xi64>} : tensor<1xi64>
  %g = onnx.ReduceToShape(%x, %t) {pipe.stage = 0 : i64} : (tensor<2x3xf32>, tensor<1xi64>) -> tensor<3xf32>
  return %l, %g : tensor<f32>, tensor<3xf32>
}

// -----

// expected-error @+1 {{parameter 'w' has no owner stage (pipe.stage): run --pipe-assign-stages before --pipe-autodiff}}
func.func @train_step(%x: tensor<2x3xf32> {pipe.input = "x"}, %w: tensor<3xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}, tensor<3xf32> {pipe.grad = "w"}) {
  %none = onnx.NoValue : none
  %l = onnx.ReduceSum(%x, %none) {keepdims = 0 : i64, pipe.stage = 0 : i64} : (tensor<2x3xf32>, none) -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<3xf32>
}

// -----

// State a stage updates (a running statistic) is held by that stage's
// device only: another stage cannot read it.
func.func @train_step(%x: tensor<2x3xf32> {pipe.input = "x"}, %m: tensor<3xf32> {pipe.param = "m"}, %w: tensor<3xf32> {pipe.param = "w", pipe.trainable, pipe.stage = 0 : i64}) -> (tensor<f32> {pipe.loss}, tensor<3xf32> {pipe.grad = "w"}, tensor<3xf32> {pipe.update = "m"}) {
  %y = onnx.Mul(%x, %w) {pipe.stage = 0 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // expected-error @+1 {{'onnx.Add' op in stage 0 updates state 'm', which stage 1 reads too}}
  %m2 = onnx.Add(%m, %w) {pipe.stage = 0 : i64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %z = onnx.Mul(%y, %m) {pipe.stage = 1 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %none = onnx.NoValue : none
  %l = onnx.ReduceSum(%z, %none) {keepdims = 0 : i64, pipe.stage = 1 : i64} : (tensor<2x3xf32>, none) -> tensor<f32>
  %t = onnx.Constant {value = dense<3> : tensor<1xi64>} : tensor<1xi64>
  %g = onnx.ReduceToShape(%y, %t) {pipe.stage = 1 : i64} : (tensor<2x3xf32>, tensor<1xi64>) -> tensor<3xf32>
  return %l, %g, %m2 : tensor<f32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// expected-error @+1 {{pipe-split-stages: optimizer "onnx-adam" has no pipe.update form}}
func.func @train_step(%x: tensor<2x3xf32> {pipe.input = "x"}, %w: tensor<3xf32> {pipe.param = "w", pipe.trainable, pipe.stage = 0 : i64}) -> (tensor<f32> {pipe.loss}, tensor<3xf32> {pipe.grad = "w"}) attributes {pipe.optimizer = {kind = "onnx-adam", lr = 1.0 : f64}} {
  %y = onnx.Mul(%x, %w) {pipe.stage = 0 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %none = onnx.NoValue : none
  %l = onnx.ReduceSum(%y, %none) {keepdims = 0 : i64, pipe.stage = 0 : i64} : (tensor<2x3xf32>, none) -> tensor<f32>
  %t = onnx.Constant {value = dense<3> : tensor<1xi64>} : tensor<1xi64>
  %g = onnx.ReduceToShape(%x, %t) {pipe.stage = 0 : i64} : (tensor<2x3xf32>, tensor<1xi64>) -> tensor<3xf32>
  return %l, %g : tensor<f32>, tensor<3xf32>
}

// -----

// Two graph inputs of one name (each stage would feed its own array type).
// expected-error @+1 {{arguments #0 and #1 are both graph input 'x'}}
func.func @train_step(%x: tensor<8x4xf32> {pipe.input = "x"}, %y: tensor<8xi64> {pipe.input = "x"}, %w: tensor<3x4xf32> {pipe.param = "w", pipe.trainable, pipe.stage = 0 : i64}) -> (tensor<f32> {pipe.loss}, tensor<3x4xf32> {pipe.grad = "w"}) {
  %none = onnx.NoValue : none
  %0 = onnx.Gemm(%x, %w, %none) {transB = 1 : i64} : (tensor<8x4xf32>, tensor<3x4xf32>, none) -> tensor<8x3xf32>
  %1 = onnx.SoftmaxCrossEntropyLoss(%0, %y, %none) : (tensor<8x3xf32>, tensor<8xi64>, none) -> tensor<f32>
  return %1, %w : tensor<f32>, tensor<3x4xf32>
}
