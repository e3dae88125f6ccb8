// RUN: pipe-opt %s --pipe-microbatch="microbatches=1" | FileCheck %s
// RUN: not pipe-opt %s --pipe-microbatch="microbatches=2" 2>&1 | FileCheck %s --check-prefix=M2
// RUN: not pipe-opt %s --pipe-microbatch="microbatches=1 replicas=2" 2>&1 | FileCheck %s --check-prefix=M2

// One micro-batch of one pipeline splits nothing: a step that cannot be
// micro-batched (here a mean cross-entropy with class weights added to
// itself, which is not the mean of its micro-batches' losses, and whose
// step's weights pipe-microbatch does not sum through the Add) runs as it
// is, so a pipeline
// with M = 1 (plain model parallelism) takes it. With M = 2, or with two
// data-parallel pipelines (whose losses are averaged), it is refused.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg0: tensor<4x3xf32> {pipe.input = "x"}, %arg1: tensor<4xi64> {pipe.input = "y"}
// CHECK-SAME: pipe.batch_size = 4 : i64, pipe.loss_combine = "mean", pipe.loss_scale = 1.000000e+00 : f64, pipe.microbatches = 1 : i64
// CHECK: onnx.SoftmaxCrossEntropyLoss(%{{.*}}, %arg1, %arg3) : (tensor<4x2xf32>, tensor<4xi64>, tensor<2xf32>) -> (tensor<f32>, tensor<4x2xf32>)
// CHECK: onnx.SoftmaxCrossEntropyLossGrad(%{{.*}}) : (tensor<f32>, tensor<4x2xf32>, tensor<4xi64>, tensor<2xf32>) -> tensor<4x2xf32>
// M2: a mean-reduced loss with class weights is not the mean of its micro-batches' losses
func.func @train_step(%arg0: tensor<4x3xf32> {pipe.input = "x"}, %arg1: tensor<4xi64> {pipe.input = "y"}, %arg2: tensor<2x3xf32> {pipe.param = "w", pipe.trainable}, %arg3: tensor<2xf32> {pipe.param = "cw"}) -> (tensor<f32> {pipe.loss}, tensor<2x3xf32> {pipe.grad = "w"}) {
  %none = onnx.NoValue : none
  %z = onnx.Gemm(%arg0, %arg2, %none) {transB = 1 : i64} : (tensor<4x3xf32>, tensor<2x3xf32>, none) -> tensor<4x2xf32>
  %loss, %log_prob = onnx.SoftmaxCrossEntropyLoss(%z, %arg1, %arg3) : (tensor<4x2xf32>, tensor<4xi64>, tensor<2xf32>) -> (tensor<f32>, tensor<4x2xf32>)
  %twice = onnx.Add(%loss, %loss) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %one = onnx.Constant {value = dense<2.000000e+00> : tensor<f32>} : tensor<f32>
  %dz = onnx.SoftmaxCrossEntropyLossGrad(%one, %log_prob, %arg1, %arg3) : (tensor<f32>, tensor<4x2xf32>, tensor<4xi64>, tensor<2xf32>) -> tensor<4x2xf32>
  %dw = onnx.Gemm(%dz, %arg0, %none) {transA = 1 : i64} : (tensor<4x2xf32>, tensor<4x3xf32>, none) -> tensor<2x3xf32>
  return %twice, %dw : tensor<f32>, tensor<2x3xf32>
}
