// RUN: pipe-opt %s --split-input-file --pipe-add-optimizer="kind=rmsprop lr=0.1" -verify-diagnostics
// RUN: not pipe-opt %s --pipe-add-optimizer="kind=sgd" 2>&1 | FileCheck %s --check-prefix=NOLR
// RUN: not pipe-opt %s --pipe-add-optimizer 2>&1 | FileCheck %s --check-prefix=NOKIND

// NOLR: error: pipe-add-optimizer: optimizer 'sgd' needs a learning rate (lr=...)
// NOKIND: error: pipe-add-optimizer: no optimizer kind given and no @training_algorithm to take one from

// expected-error @below {{pipe-add-optimizer: unknown optimizer kind 'rmsprop' (expected sgd, momentum, nesterov, adam, adamw or adagrad)}}
module {
func.func @train_step(%w: tensor<2xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}, tensor<2xf32> {pipe.grad = "w"}) {
  %0 = onnx.MatMul(%w, %w) : (tensor<2xf32>, tensor<2xf32>) -> tensor<f32>
  return %0, %w : tensor<f32>, tensor<2xf32>
}
}
