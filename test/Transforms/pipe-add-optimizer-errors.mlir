// RUN: pipe-opt %s --split-input-file --pipe-add-optimizer="kind=rmsprop lr=0.1" -verify-diagnostics
// RUN: not pipe-opt %s --pipe-add-optimizer="kind=sgd" 2>&1 | FileCheck %s --check-prefix=NOLR
// RUN: not pipe-opt %s --pipe-add-optimizer 2>&1 | FileCheck %s --check-prefix=NOKIND

// RUN: not pipe-opt %s --pipe-add-optimizer="kind=sgd lr=nan" 2>&1 | FileCheck %s --check-prefix=NANLR
// RUN: not pipe-opt %s --pipe-add-optimizer="kind=sgd lr=-2" 2>&1 | FileCheck %s --check-prefix=NEGLR
// RUN: not pipe-opt %s --pipe-add-optimizer="kind=adam lr=0.1 beta1=2" 2>&1 | FileCheck %s --check-prefix=BETA
// RUN: not pipe-opt %s --pipe-add-optimizer="kind=momentum lr=0.1 momentum=-0.5" 2>&1 | FileCheck %s --check-prefix=MOM
// RUN: not pipe-opt %s --pipe-add-optimizer="kind=adam lr=0.1 eps=-1e-8" 2>&1 | FileCheck %s --check-prefix=EPS
// RUN: not pipe-opt %s --pipe-add-optimizer="kind=sgd lr=0.1 clip-grad-norm=-1" 2>&1 | FileCheck %s --check-prefix=CLIP
// CLIP: error: pipe-add-optimizer: clip-grad-norm=-1.000000e+00 must be a finite number > 0 (0: off)

// NOLR: error: pipe-add-optimizer: optimizer 'sgd' needs a learning rate (lr=...)
// NANLR: error: pipe-add-optimizer: lr=nan must be a finite number > 0
// NEGLR: error: pipe-add-optimizer: lr=-2.000000e+00 must be a finite number > 0
// BETA: error: pipe-add-optimizer: beta1=2.000000e+00 must be in [0, 1)
// MOM: error: pipe-add-optimizer: momentum=-5.000000e-01 must be in [0, 1)
// EPS: error: pipe-add-optimizer: eps=-1.000000e-08 must be a finite number >= 0
// NOKIND: error: pipe-add-optimizer: no optimizer kind given and no @training_algorithm to take one from

// expected-error @below {{pipe-add-optimizer: unknown optimizer kind 'rmsprop' (expected sgd, momentum, nesterov, adam, adamw or adagrad)}}
module {
func.func @train_step(%w: tensor<2xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}, tensor<2xf32> {pipe.grad = "w"}) {
  %0 = onnx.MatMul(%w, %w) : (tensor<2xf32>, tensor<2xf32>) -> tensor<f32>
  return %0, %w : tensor<f32>, tensor<2xf32>
}
}
