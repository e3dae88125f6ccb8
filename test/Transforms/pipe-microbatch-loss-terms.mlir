// RUN: pipe-opt %s --split-input-file --pipe-microbatch="microbatches=2" | FileCheck %s
// RUN: pipe-opt %s --split-input-file --pipe-microbatch="microbatches=2 ignored-labels=micro-batch" | FileCheck %s --check-prefix=MB

// A loss of two terms (BERT's masked-token loss plus half its next-sentence
// loss): a cross-entropy with ignore_index on labels "y" plus 0.25 times a
// plain cross-entropy on labels "z". The ignoring term becomes the step's
// mean (its sum over the micro-batch times 1/C, C counted on the step's
// whole "y"); the plain term, a mean over its micro-batch, is taken 1/M of,
// so that the micro-batches' losses sum to the step's. Its gradient op's
// seed is scaled by 1/M as for any mean loss; the ignoring one's by 1/C.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg1: tensor<2xi64> {pipe.input = "y"}, %arg2: tensor<4xi64> {pipe.step_input = "y"}, %arg3: tensor<2xi64> {pipe.input = "z"}
// CHECK-SAME: pipe.loss_combine = "sum", pipe.loss_mean = "step", pipe.loss_scale = 1.000000e+00 : f64
// CHECK: %[[C:.*]] = onnx.ReduceSum({{.*}}) {keepdims = 0 : i64, pipe.stage = 1 : i64} : (tensor<4xf32>, none) -> tensor<f32>
// CHECK: %[[INV:.*]] = onnx.Reciprocal(%[[C]])
// CHECK: %[[L1:.*]], %[[LP1:.*]] = onnx.SoftmaxCrossEntropyLoss({{.*}}) {ignore_index = -100 : i64, pipe.stage = 1 : i64, reduction = "sum"}
// CHECK: %[[S1:.*]] = onnx.Mul(%[[L1]], %[[INV]])
// CHECK: %[[L2:.*]], %[[LP2:.*]] = onnx.SoftmaxCrossEntropyLoss(%{{.*}}, %arg3, %{{.*}}) {pipe.stage = 1 : i64}
// CHECK: %[[QUARTER:.*]] = onnx.Constant {pipe.stage = 1 : i64, value = dense<2.500000e-01> : tensor<f32>}
// CHECK: %[[ONE_OVER_M:.*]] = onnx.Constant {pipe.stage = 1 : i64, value = dense<5.000000e-01> : tensor<f32>}
// CHECK: %[[L2M:.*]] = onnx.Mul(%[[L2]], %[[ONE_OVER_M]]) {pipe.stage = 1 : i64}
// CHECK: %[[S2:.*]] = onnx.Mul(%[[L2M]], %[[QUARTER]])
// CHECK: %[[SUM:.*]] = onnx.Add(%[[S1]], %[[S2]])
// CHECK: onnx.SoftmaxCrossEntropyLossGrad({{.*}}, %[[LP1]], %arg1, {{.*}}) {ignore_index = -100 : i64, pipe.stage = 1 : i64, reduction = "sum"}
// CHECK: onnx.SoftmaxCrossEntropyLossGrad({{.*}}, %[[LP2]], %arg3, {{.*}}) {pipe.stage = 1 : i64}
// CHECK: return %[[SUM]],

// For methods that update per micro-batch: the micro-batches' means
// averaged, as with one term.
// MB-LABEL: func.func @train_step
// MB-NOT: step_input
// MB-SAME: pipe.loss_combine = "mean", pipe.loss_mean = "micro-batch", pipe.loss_scale = 5.000000e-01 : f64

func.func @train_step(%arg0: tensor<4x3xf32> {pipe.input = "x"}, %arg1: tensor<4xi64> {pipe.input = "y"}, %z: tensor<4xi64> {pipe.input = "z"}, %arg4: tensor<2x3xf32> {pipe.param = "w", pipe.stage = 1 : i64, pipe.trainable}) -> (tensor<f32> {pipe.loss}, tensor<2x3xf32> {pipe.update = "w"}) attributes {pipe.optimizer = {kind = "sgd", lr = 1.000000e-01 : f64, weight_decay = 0.000000e+00 : f64}} {
  %2 = onnx.NoValue {pipe.stage = 1 : i64} : none
  %3 = onnx.Gemm(%arg0, %arg4, %2) {pipe.stage = 1 : i64, transB = 1 : i64} : (tensor<4x3xf32>, tensor<2x3xf32>, none) -> tensor<4x2xf32>
  %output, %log_prob = onnx.SoftmaxCrossEntropyLoss(%3, %arg1, %2) {ignore_index = -100 : i64, pipe.stage = 1 : i64} : (tensor<4x2xf32>, tensor<4xi64>, none) -> (tensor<f32>, tensor<4x2xf32>)
  %out2, %lp2 = onnx.SoftmaxCrossEntropyLoss(%3, %z, %2) {pipe.stage = 1 : i64} : (tensor<4x2xf32>, tensor<4xi64>, none) -> (tensor<f32>, tensor<4x2xf32>)
  %half = onnx.Constant {pipe.stage = 1 : i64, value = dense<2.500000e-01> : tensor<f32>} : tensor<f32>
  %w2 = onnx.Mul(%out2, %half) {pipe.stage = 1 : i64} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %loss = onnx.Add(%output, %w2) {pipe.stage = 1 : i64} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %4 = onnx.Constant {pipe.stage = 1 : i64, value = dense<1.000000e+00> : tensor<f32>} : tensor<f32>
  %5 = onnx.SoftmaxCrossEntropyLossGrad(%4, %log_prob, %arg1, %2) {ignore_index = -100 : i64, pipe.stage = 1 : i64} : (tensor<f32>, tensor<4x2xf32>, tensor<4xi64>, none) -> tensor<4x2xf32>
  %g2 = onnx.SoftmaxCrossEntropyLossGrad(%half, %lp2, %z, %2) {pipe.stage = 1 : i64} : (tensor<f32>, tensor<4x2xf32>, tensor<4xi64>, none) -> tensor<4x2xf32>
  %d = onnx.Add(%5, %g2) {pipe.stage = 1 : i64} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %8 = onnx.NoValue {pipe.stage = 1 : i64} : none
  %9 = onnx.Gemm(%d, %arg0, %8) {pipe.stage = 1 : i64, transA = 1 : i64} : (tensor<4x2xf32>, tensor<4x3xf32>, none) -> tensor<2x3xf32>
  %20 = onnx.Constant {pipe.stage = 1 : i64, value = dense<1.000000e-01> : tensor<f32>} : tensor<f32>
  %21 = onnx.SGD(%20, %arg4, %9) {pipe.stage = 1 : i64} : (tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %loss, %21 : tensor<f32>, tensor<2x3xf32>
}
