// RUN: pipe-opt %s --pipe-microbatch="microbatches=2" | FileCheck %s
// RUN: pipe-opt %s --pipe-microbatch="microbatches=2 replicas=2" | FileCheck %s --check-prefix=REP

// A mean cross-entropy with class weights is sum_i w[y_i] l_i / sum_i w[y_i]
// over the labels not ignored: not the mean of its micro-batches' means.
// pipe-microbatch sums the step's weights from the whole step's labels
// (pipe.step_input; an ignored label, -100, gathers class 0 and is masked
// out) and makes the loss and its gradient sums scaled by the inverse (P
// over it for P data-parallel pipelines, whose gradients are averaged).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg0: tensor<2x3xf32> {pipe.input = "x"}, %arg1: tensor<2xi64> {pipe.input = "y"}, %arg2: tensor<4xi64> {pipe.step_input = "y"}
// CHECK-SAME: pipe.loss_combine = "sum", pipe.loss_mean = "step", pipe.loss_scale = 1.000000e+00 : f64
// CHECK: %[[IGN:.*]] = onnx.Equal(%arg2, %{{.*}}) : (tensor<4xi64>, tensor<i64>) -> tensor<4xi1>
// CHECK: %[[NOT:.*]] = onnx.Not(%[[IGN]])
// CHECK: %[[ONES:.*]] = onnx.Cast(%[[NOT]]) {to = 1 : i64} : (tensor<4xi1>) -> tensor<4xf32>
// CHECK: %[[SAFE:.*]] = onnx.Where(%[[IGN]], %{{.*}}, %arg2) : (tensor<4xi1>, tensor<i64>, tensor<4xi64>) -> tensor<4xi64>
// CHECK: %[[W:.*]] = onnx.Gather(%arg4, %[[SAFE]]) : (tensor<2xf32>, tensor<4xi64>) -> tensor<4xf32>
// CHECK: %[[SH:.*]] = onnx.Mul(%[[W]], %[[ONES]])
// CHECK: %[[C:.*]] = onnx.ReduceSum(%[[SH]], %{{.*}}) {keepdims = 0 : i64} : (tensor<4xf32>, none) -> tensor<f32>
// CHECK: %[[INV:.*]] = onnx.Reciprocal(%[[C]])
// CHECK: onnx.SoftmaxCrossEntropyLoss(%{{.*}}, %arg1, %arg4) {ignore_index = -100 : i64, reduction = "sum"} : (tensor<2x2xf32>, tensor<2xi64>, tensor<2xf32>)
// CHECK: onnx.Mul(%{{.*}}, %[[INV]])
// CHECK: onnx.SoftmaxCrossEntropyLossGrad({{.*}}) {ignore_index = -100 : i64, reduction = "sum"} : (tensor<f32>, tensor<2x2xf32>, tensor<2xi64>, tensor<2xf32>) -> tensor<2x2xf32>
// REP-LABEL: func.func @train_step
// REP-SAME: %arg2: tensor<8xi64> {pipe.step_input = "y"}
// REP: onnx.Gather(%arg4, %{{.*}}) : (tensor<2xf32>, tensor<8xi64>) -> tensor<8xf32>
// REP: %[[P:.*]] = onnx.Constant {value = dense<2.000000e+00> : tensor<f32>}
// REP: onnx.Div(%[[P]], %{{.*}})
func.func @train_step(%arg0: tensor<4x3xf32> {pipe.input = "x"}, %arg1: tensor<4xi64> {pipe.input = "y"}, %arg2: tensor<2x3xf32> {pipe.param = "w", pipe.trainable}, %arg3: tensor<2xf32> {pipe.param = "cw"}) -> (tensor<f32> {pipe.loss}, tensor<2x3xf32> {pipe.grad = "w"}) {
  %none = onnx.NoValue : none
  %z = onnx.Gemm(%arg0, %arg2, %none) {transB = 1 : i64} : (tensor<4x3xf32>, tensor<2x3xf32>, none) -> tensor<4x2xf32>
  %loss, %log_prob = onnx.SoftmaxCrossEntropyLoss(%z, %arg1, %arg3) {ignore_index = -100 : i64} : (tensor<4x2xf32>, tensor<4xi64>, tensor<2xf32>) -> (tensor<f32>, tensor<4x2xf32>)
  %one = onnx.Constant {value = dense<1.000000e+00> : tensor<f32>} : tensor<f32>
  %dz = onnx.SoftmaxCrossEntropyLossGrad(%one, %log_prob, %arg1, %arg3) {ignore_index = -100 : i64} : (tensor<f32>, tensor<4x2xf32>, tensor<4xi64>, tensor<2xf32>) -> tensor<4x2xf32>
  %dw = onnx.Gemm(%dz, %arg0, %none) {transA = 1 : i64} : (tensor<4x2xf32>, tensor<4x3xf32>, none) -> tensor<2x3xf32>
  return %loss, %dw : tensor<f32>, tensor<2x3xf32>
}
