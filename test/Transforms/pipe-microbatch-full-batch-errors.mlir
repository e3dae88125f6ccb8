// RUN: pipe-opt %s --split-input-file --pipe-microbatch="microbatches=2 batchnorm=full-batch" -verify-diagnostics

// Stage 1 holds a training-mode BatchNormalization (a whole-batch stage);
// the value it reads from stage 0 has the batch merged with another
// dimension by a reshape (12 = 4 samples x 3): it cannot be cut into
// micro-batch slices along a plain axis.
func.func @train_step(%x: tensor<4x3xf32> {pipe.input = "x"}, %s: tensor<1xf32> {pipe.param = "s", pipe.stage = 1 : i64}, %b: tensor<1xf32> {pipe.param = "b", pipe.stage = 1 : i64}, %m: tensor<1xf32> {pipe.param = "m", pipe.stage = 1 : i64}, %v: tensor<1xf32> {pipe.param = "v", pipe.stage = 1 : i64}) -> (tensor<f32> {pipe.loss}, tensor<1xf32> {pipe.update = "m"}, tensor<1xf32> {pipe.update = "v"}) {
  %shape = onnx.Constant {pipe.stage = 0 : i64, value = dense<[12, 1]> : tensor<2xi64>} : tensor<2xi64>
  %r = onnx.Reshape(%x, %shape) {pipe.stage = 0 : i64} : (tensor<4x3xf32>, tensor<2xi64>) -> tensor<12x1xf32>
  // expected-error @+1 {{crosses between a whole-batch and a micro-batched stage (--batchnorm full-batch) with a value batched on a merged axis (#0 of 'tensor<12x1xf32>'): only a plain batch axis is cut into micro-batches there}}
  %y, %rm, %rv = onnx.BatchNormalization(%r, %s, %b, %m, %v) {pipe.stage = 1 : i64, training_mode = 1 : i64} : (tensor<12x1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> (tensor<12x1xf32>, tensor<1xf32>, tensor<1xf32>)
  %none = onnx.NoValue {pipe.stage = 1 : i64} : none
  %l = onnx.ReduceMean(%y, %none) {keepdims = 0 : i64, pipe.stage = 1 : i64} : (tensor<12x1xf32>, none) -> tensor<f32>
  return %l, %rm, %rv : tensor<f32>, tensor<1xf32>, tensor<1xf32>
}

// -----

// A mean over the whole batch, computed by whole-batch stage 0, read by
// micro-batched stage 1: per micro-batch it would not be the step's.
func.func @train_step(%x: tensor<4x1xf32> {pipe.input = "x"}, %s: tensor<1xf32> {pipe.param = "s", pipe.stage = 0 : i64}, %b: tensor<1xf32> {pipe.param = "b", pipe.stage = 0 : i64}, %m: tensor<1xf32> {pipe.param = "m", pipe.stage = 0 : i64}, %v: tensor<1xf32> {pipe.param = "v", pipe.stage = 0 : i64}) -> (tensor<f32> {pipe.loss}, tensor<1xf32> {pipe.update = "m"}, tensor<1xf32> {pipe.update = "v"}) {
  %y, %rm, %rv = onnx.BatchNormalization(%x, %s, %b, %m, %v) {pipe.stage = 0 : i64, training_mode = 1 : i64} : (tensor<4x1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> (tensor<4x1xf32>, tensor<1xf32>, tensor<1xf32>)
  %none = onnx.NoValue {pipe.stage = 0 : i64} : none
  %l = onnx.ReduceMean(%y, %none) {keepdims = 0 : i64, pipe.stage = 0 : i64} : (tensor<4x1xf32>, none) -> tensor<f32>
  %two = onnx.Constant {pipe.stage = 1 : i64, value = dense<2.0> : tensor<f32>} : tensor<f32>
  // expected-error @+1 {{reads a value that is not per sample (a reduction over the batch) from another stage across a whole-batch stage boundary (--batchnorm full-batch)}}
  %l2 = onnx.Mul(%l, %two) {pipe.stage = 1 : i64} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %l2, %rm, %rv : tensor<f32>, tensor<1xf32>, tensor<1xf32>
}
