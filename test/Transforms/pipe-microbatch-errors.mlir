// RUN: pipe-opt %s --split-input-file --pipe-microbatch="microbatches=2" -verify-diagnostics

// expected-error @+1 {{pipe-microbatch: the batch size B = 3 is not divisible by microbatches M = 2}}
func.func @train_step(%x: tensor<3x2xf32> {pipe.input = "x"}, %w: tensor<2xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %y = onnx.Mul(%x, %w) : (tensor<3x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %none = onnx.NoValue : none
  %l = onnx.ReduceMean(%y, %none) {keepdims = 0 : i64} : (tensor<3x2xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{pipe-microbatch: inputs #0 and #1 disagree on the batch size (4 and 2)}}
func.func @train_step(%x: tensor<4x2xf32> {pipe.input = "x"}, %t: tensor<2x2xf32> {pipe.input = "t"}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %l = onnx.ReduceMean(%x, %none) {keepdims = 0 : i64} : (tensor<4x2xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Batch statistics: centring over the batch mixes the samples.
func.func @train_step(%x: tensor<4x2xf32> {pipe.input = "x"}, %w: tensor<2xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %axes = onnx.Constant {value = dense<0> : tensor<1xi64>} : tensor<1xi64>
  %m = onnx.ReduceMean(%x, %axes) : (tensor<4x2xf32>, tensor<1xi64>) -> tensor<1x2xf32>
  // expected-error @+1 {{'onnx.Sub' op cannot be micro-batched: it combines a value reduced over the batch with a per-sample value}}
  %c = onnx.Sub(%x, %m) : (tensor<4x2xf32>, tensor<1x2xf32>) -> tensor<4x2xf32>
  %none = onnx.NoValue : none
  %l = onnx.ReduceMean(%c, %none) {keepdims = 0 : i64} : (tensor<4x2xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @train_step(%x: tensor<4x2xf32> {pipe.input = "x"}) -> (tensor<f32> {pipe.loss}) {
  // expected-error @+1 {{'onnx.Softmax' op cannot be micro-batched: it normalizes over the batch axis}}
  %s = onnx.Softmax(%x) {axis = 0 : i64} : (tensor<4x2xf32>) -> tensor<4x2xf32>
  %none = onnx.NoValue : none
  %l = onnx.ReduceMean(%s, %none) {keepdims = 0 : i64} : (tensor<4x2xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @train_step(%x: tensor<4x2xf32> {pipe.input = "x"}) -> (tensor<f32> {pipe.loss}) {
  // expected-error @+1 {{'onnx.Shape' op cannot be micro-batched: it reads the batch size as data}}
  %s = onnx.Shape(%x) : (tensor<4x2xf32>) -> tensor<2xi64>
  %none = onnx.NoValue : none
  %l = onnx.ReduceMean(%x, %none) {keepdims = 0 : i64} : (tensor<4x2xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A reshape that interleaves samples: [4, 2] -> [2, 4] puts two samples
// in a row.
func.func @train_step(%x: tensor<4x2xf32> {pipe.input = "x"}) -> (tensor<f32> {pipe.loss}) {
  %s = onnx.Constant {value = dense<[2, 4]> : tensor<2xi64>} : tensor<2xi64>
  // expected-error @+1 {{'onnx.Reshape' op cannot be micro-batched: it splits the batch (4 samples, axis 0 of 'tensor<4x2xf32>') across dimensions of 'tensor<2x4xf32>'}}
  %r = onnx.Reshape(%x, %s) : (tensor<4x2xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %none = onnx.NoValue : none
  %l = onnx.ReduceMean(%r, %none) {keepdims = 0 : i64} : (tensor<2x4xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A loss that is not a mean or sum over the batch: its mean times a
// weight-dependent factor would need the factor's gradient once per step.
// expected-error @+1 {{pipe-microbatch: the loss (result #0) is not a mean or sum over the batch}}
func.func @train_step(%x: tensor<4x2xf32> {pipe.input = "x"}, %w: tensor<2xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %m = onnx.ReduceMean(%x, %none) {keepdims = 0 : i64} : (tensor<4x2xf32>, none) -> tensor<f32>
  %n = onnx.ReduceSum(%w, %none) {keepdims = 0 : i64} : (tensor<2xf32>, none) -> tensor<f32>
  // expected-note @+1 {{'onnx.Mul' here is not linear in a reduction over the batch}}
  %l = onnx.Mul(%m, %n) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A penalty of the weights added to a mean loss (an L2 term) says what to
// use instead.
// expected-error @+1 {{pipe-microbatch: the loss (result #0) is not a mean or sum over the batch}}
func.func @train_step(%x: tensor<4x2xf32> {pipe.input = "x"}, %w: tensor<2xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %m = onnx.ReduceMean(%x, %none) {keepdims = 0 : i64} : (tensor<4x2xf32>, none) -> tensor<f32>
  %sq = onnx.Mul(%w, %w) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %n = onnx.ReduceSum(%sq, %none) {keepdims = 0 : i64} : (tensor<2xf32>, none) -> tensor<f32>
  // expected-note @+1 {{'onnx.Add' here is not linear in a reduction over the batch (it adds a term computed from the weights alone: for an L2 penalty use --weight-decay, or compile with --microbatches 1)}}
  %l = onnx.Add(%m, %n) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A result with one value per sample cannot be summed over micro-batches.
// expected-error @+1 {{pipe-microbatch: result #1 is not a sum over the batch}}
func.func @train_step(%x: tensor<4x2xf32> {pipe.input = "x"}) -> (tensor<f32> {pipe.loss}, tensor<4x2xf32> {pipe.grad = "x"}) {
  %none = onnx.NoValue : none
  %l = onnx.ReduceMean(%x, %none) {keepdims = 0 : i64} : (tensor<4x2xf32>, none) -> tensor<f32>
  // expected-note @+1 {{computed here}}
  %r = onnx.Relu(%x) : (tensor<4x2xf32>) -> tensor<4x2xf32>
  return %l, %r : tensor<f32>, tensor<4x2xf32>
}

// -----

// A running statistic is updated by each micro-batch in turn: it can only
// update its state, not feed the step.
func.func @train_step(%x: tensor<4x2xf32> {pipe.input = "x"}, %s: tensor<2xf32> {pipe.param = "s", pipe.trainable}, %b: tensor<2xf32> {pipe.param = "b", pipe.trainable}, %m: tensor<2xf32> {pipe.param = "m"}, %v: tensor<2xf32> {pipe.param = "v"}) -> (tensor<f32> {pipe.loss}) {
  %y, %rm, %rv = onnx.BatchNormalization(%x, %s, %b, %m, %v) {training_mode = 1 : i64} : (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>)
  // expected-error @+1 {{'onnx.Mul' op cannot be micro-batched: it reads a running statistic computed from one micro-batch}}
  %z = onnx.Mul(%y, %rm) : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %none = onnx.NoValue : none
  %l = onnx.ReduceMean(%z, %none) {keepdims = 0 : i64} : (tensor<4x2xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Issue 15: an extremum over the batch is not one of its micro-batches'.
func.func @train_step(%x: tensor<4x2xf32> {pipe.input = "x"}, %w: tensor<2xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %axes = onnx.Constant {value = dense<0> : tensor<1xi64>} : tensor<1xi64>
  %y = onnx.Mul(%x, %w) : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  // expected-error @+1 {{'onnx.ReduceMax' op cannot be micro-batched: it takes the extremum over the batch axis}}
  %m = onnx.ReduceMax(%y, %axes) {keepdims = 0 : i64} : (tensor<4x2xf32>, tensor<1xi64>) -> tensor<2xf32>
  %none = onnx.NoValue : none
  %l = onnx.ReduceSum(%m, %none) {keepdims = 0 : i64} : (tensor<2xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @train_step(%x: tensor<4x2xf32> {pipe.input = "x"}, %w: tensor<2xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %pads = onnx.Constant {value = dense<[1, 0, 0, 0]> : tensor<4xi64>} : tensor<4xi64>
  %none = onnx.NoValue : none
  %y = onnx.Mul(%x, %w) : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  // expected-error @+1 {{'onnx.Pad' op cannot be micro-batched: it pads the batch axis (or its pads are not a constant)}}
  %p = onnx.Pad(%y, %pads, %none, %none) : (tensor<4x2xf32>, tensor<4xi64>, none, none) -> tensor<5x2xf32>
  %l = onnx.ReduceSum(%p, %none) {keepdims = 0 : i64} : (tensor<5x2xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @train_step(%x: tensor<4x2xf32> {pipe.input = "x"}, %w: tensor<2xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %axis = onnx.Constant {value = dense<0> : tensor<i64>} : tensor<i64>
  %none = onnx.NoValue : none
  %y = onnx.Mul(%x, %w) : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  // expected-error @+1 {{'onnx.CumSum' op cannot be micro-batched: it sums along the batch axis}}
  %c = onnx.CumSum(%y, %axis) : (tensor<4x2xf32>, tensor<i64>) -> tensor<4x2xf32>
  %l = onnx.ReduceSum(%c, %none) {keepdims = 0 : i64} : (tensor<4x2xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An LSTM reading the batch-first input as its sequence: the batch would be
// on X's seq axis.
func.func @train_step(%x: tensor<4x3x2xf32> {pipe.input = "x"}, %w: tensor<1x4x2xf32> {pipe.param = "w", pipe.trainable}, %r: tensor<1x4x1xf32> {pipe.param = "r", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.LSTM' op cannot be micro-batched: operand #0 must be batched on axis 1 (layout 0)}}
  %y = onnx.LSTM(%x, %w, %r, %none, %none, %none, %none, %none) : (tensor<4x3x2xf32>, tensor<1x4x2xf32>, tensor<1x4x1xf32>, none, none, none, none, none) -> tensor<4x1x3x1xf32>
  %l = onnx.ReduceSum(%y, %none) {keepdims = 0 : i64} : (tensor<4x1x3x1xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A trained initial state has the whole batch's extent: it cannot be split.
func.func @train_step(%x: tensor<4x3x2xf32> {pipe.input = "x"}, %w: tensor<1x3x2xf32> {pipe.param = "w", pipe.trainable}, %r: tensor<1x3x1xf32> {pipe.param = "r", pipe.trainable}, %h: tensor<1x4x1xf32> {pipe.param = "h", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %xt = onnx.Transpose(%x) {perm = array<i64: 1, 0, 2>} : (tensor<4x3x2xf32>) -> tensor<3x4x2xf32>
  // expected-error @+1 {{'onnx.GRU' op cannot be micro-batched: operand #5 must be batched on axis 1 (layout 0)}}
  %y = onnx.GRU(%xt, %w, %r, %none, %none, %h) {linear_before_reset = 1 : i64} : (tensor<3x4x2xf32>, tensor<1x3x2xf32>, tensor<1x3x1xf32>, none, none, tensor<1x4x1xf32>) -> tensor<3x1x4x1xf32>
  %l = onnx.ReduceSum(%y, %none) {keepdims = 0 : i64} : (tensor<3x1x4x1xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @train_step(%x: tensor<4x1x2x2xf32> {pipe.input = "x"}, %w: tensor<2xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %scales = onnx.Constant {value = dense<[2.0, 1.0, 2.0, 2.0]> : tensor<4xf32>} : tensor<4xf32>
  %none = onnx.NoValue : none
  %y = onnx.Mul(%x, %w) : (tensor<4x1x2x2xf32>, tensor<2xf32>) -> tensor<4x1x2x2xf32>
  // expected-error @+1 {{'onnx.Resize' op cannot be micro-batched: it resizes the batch axis (or its scales or sizes are not constants)}}
  %r = onnx.Resize(%y, %none, %scales, %none) : (tensor<4x1x2x2xf32>, none, tensor<4xf32>, none) -> tensor<8x1x4x4xf32>
  %l = onnx.ReduceSum(%r, %none) {keepdims = 0 : i64} : (tensor<8x1x4x4xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}
