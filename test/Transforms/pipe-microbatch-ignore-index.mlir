// RUN: pipe-opt %s --split-input-file --pipe-microbatch="microbatches=2" | FileCheck %s
// RUN: pipe-opt %s --split-input-file --pipe-microbatch="microbatches=2 ignored-labels=micro-batch" | FileCheck %s --check-prefix=MB
// RUN: pipe-opt %s --split-input-file --pipe-microbatch="microbatches=1" | FileCheck %s --check-prefix=ONE
// RUN: pipe-opt %s --split-input-file --pipe-microbatch="microbatches=1 replicas=2" | FileCheck %s --check-prefix=REP
// RUN: not pipe-opt %s --split-input-file --pipe-microbatch="microbatches=2 ignored-labels=sometimes" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not pipe-opt %s --split-input-file --pipe-microbatch="microbatches=2 replicas=0" 2>&1 | FileCheck %s --check-prefix=BADREP
// RUN: not pipe-opt %s --split-input-file --pipe-microbatch="microbatches=2" --pipe-split-stages --pipe-insert-transfers --pipe-schedule="kind=pipedream microbatches=2" 2>&1 | FileCheck %s --check-prefix=PERMB
// RUN: pipe-opt %s --split-input-file --pipe-microbatch="microbatches=2 ignored-labels=micro-batch" --pipe-split-stages --pipe-insert-transfers --pipe-schedule="kind=pipedream microbatches=2" | FileCheck %s --check-prefix=PD

// A mean-reduced loss with ignore_index (the step of pipe-microbatch.mlir,
// B = 4, its loss ops with ignore_index = -100). By default the mean is the
// step's: a new argument holds the step's whole batch of "y", the loss's
// stage counts its labels other than -100 (C), and the loss and its
// gradient op become sums over the micro-batch scaled by 1/C; the step's
// loss is the sum of the micro-batches'. With ignored-labels=micro-batch
// the micro-batches' means are averaged (1/M), and the step says so.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg1: tensor<2xi64> {pipe.input = "y"}, %arg2: tensor<4xi64> {pipe.step_input = "y"}
// CHECK-SAME: pipe.loss_combine = "sum", pipe.loss_mean = "step", pipe.loss_scale = 1.000000e+00 : f64
// CHECK: %[[IGN:.*]] = onnx.Constant {pipe.stage = 1 : i64, value = dense<-100> : tensor<i64>}
// CHECK: %[[EQ:.*]] = onnx.Equal(%arg2, %[[IGN]]) {pipe.stage = 1 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<4xi1>
// CHECK: %[[NOT:.*]] = onnx.Not(%[[EQ]]) {pipe.stage = 1 : i64}
// CHECK: %[[F:.*]] = onnx.Cast(%[[NOT]]) {pipe.stage = 1 : i64, to = 1 : i64} : (tensor<4xi1>) -> tensor<4xf32>
// CHECK: %[[C:.*]] = onnx.ReduceSum(%[[F]], {{.*}}) {keepdims = 0 : i64, pipe.stage = 1 : i64} : (tensor<4xf32>, none) -> tensor<f32>
// CHECK: %[[INV:.*]] = onnx.Reciprocal(%[[C]]) {pipe.stage = 1 : i64}
// CHECK: %[[LOSS:.*]], %[[LP:.*]] = onnx.SoftmaxCrossEntropyLoss({{.*}}) {ignore_index = -100 : i64, pipe.stage = 1 : i64, reduction = "sum"} : (tensor<2x2xf32>, tensor<2xi64>, none)
// CHECK: %[[SCALED:.*]] = onnx.Mul(%[[LOSS]], %[[INV]]) {pipe.stage = 1 : i64}
// CHECK: %[[UNIT:.*]] = onnx.Constant {pipe.stage = 1 : i64, value = dense<1.000000e+00> : tensor<f32>}
// CHECK: %[[SEED:.*]] = onnx.Mul(%[[UNIT]], %[[INV]]) {pipe.stage = 1 : i64}
// CHECK: onnx.SoftmaxCrossEntropyLossGrad(%[[SEED]], %[[LP]], %arg1, {{.*}}) {ignore_index = -100 : i64, pipe.stage = 1 : i64, reduction = "sum"}
// CHECK: return %[[SCALED]],

// MB-LABEL: func.func @train_step
// MB-SAME: %arg1: tensor<2xi64> {pipe.input = "y"}, %arg2: tensor<5x3xf32>
// MB-SAME: pipe.loss_combine = "mean", pipe.loss_mean = "micro-batch", pipe.loss_scale = 5.000000e-01 : f64
// MB-NOT: Reciprocal
// MB: %[[LOSS:.*]], %{{.*}} = onnx.SoftmaxCrossEntropyLoss({{.*}}) {ignore_index = -100 : i64, pipe.stage = 1 : i64}
// MB: %[[HALF:.*]] = onnx.Constant {pipe.stage = 1 : i64, value = dense<5.000000e-01> : tensor<f32>}
// MB: onnx.SoftmaxCrossEntropyLossGrad
// MB: return %[[LOSS]],

// One micro-batch: the step's mean as it is.
// ONE-LABEL: func.func @train_step
// ONE-NOT: pipe.loss_mean
// ONE-NOT: step_input
// ONE: onnx.SoftmaxCrossEntropyLoss({{.*}}) {ignore_index = -100 : i64, pipe.stage = 1 : i64}

// Two data-parallel pipelines (replicas=2) average their gradients and
// losses: the argument holds both pipelines' batches (8 rows) and the scale
// is 2/C, so the average is the mean over all their counted labels; also
// with one micro-batch.
// REP-LABEL: func.func @train_step
// REP-SAME: %arg1: tensor<4xi64> {pipe.input = "y"}, %arg2: tensor<8xi64> {pipe.step_input = "y"}
// REP-SAME: pipe.loss_combine = "sum", pipe.loss_mean = "step"
// REP: %[[C:.*]] = onnx.ReduceSum({{.*}}) {keepdims = 0 : i64, pipe.stage = 1 : i64} : (tensor<8xf32>, none) -> tensor<f32>
// REP: %[[TWO:.*]] = onnx.Constant {pipe.stage = 1 : i64, value = dense<2.000000e+00> : tensor<f32>}
// REP: onnx.Div(%[[TWO]], %[[C]]) {pipe.stage = 1 : i64}

// BAD: error: pipe-microbatch: ignored-labels must be step or micro-batch, not 'sometimes'
// BADREP: error: pipe-microbatch: replicas must be >= 1, not 0

// PipeDream updates per micro-batch on its own mean: stages made for the
// step's mean are refused by pipe-schedule (they would update on Sₘ/C, no
// 1/M to undo); micro-batched for the micro-batches' means they schedule.
// PERMB: error: pipe-schedule: pipedream updates per micro-batch on the micro-batch's own mean, but the stages take the step's mean over the labels they do not ignore (pipe.loss_mean = "step"): micro-batch them with --pipe-microbatch="ignored-labels=micro-batch"
// PD: pipe.program @device0

func.func @train_step(%arg0: tensor<4x3xf32> {pipe.input = "x"}, %arg1: tensor<4xi64> {pipe.input = "y"}, %arg2: tensor<5x3xf32> {pipe.param = "w1", pipe.stage = 0 : i64, pipe.trainable}, %arg3: tensor<5xf32> {pipe.param = "b1", pipe.stage = 0 : i64, pipe.trainable}, %arg4: tensor<2x5xf32> {pipe.param = "w2", pipe.stage = 1 : i64, pipe.trainable}, %arg5: tensor<i64> {pipe.init = dense<0> : tensor<i64>, pipe.state = "step"}) -> (tensor<f32> {pipe.loss}, tensor<5x3xf32> {pipe.update = "w1"}, tensor<5xf32> {pipe.update = "b1"}, tensor<2x5xf32> {pipe.update = "w2"}, tensor<i64> {pipe.update = "step"}) attributes {pipe.optimizer = {kind = "sgd", lr = 1.000000e-01 : f64, weight_decay = 0.000000e+00 : f64}} {
  %0 = onnx.Gemm(%arg0, %arg2, %arg3) {pipe.stage = 0 : i64, transB = 1 : i64} : (tensor<4x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %1 = onnx.Relu(%0) {pipe.stage = 0 : i64} : (tensor<4x5xf32>) -> tensor<4x5xf32>
  %2 = onnx.NoValue {pipe.stage = 1 : i64} : none
  %3 = onnx.Gemm(%1, %arg4, %2) {pipe.stage = 1 : i64, transB = 1 : i64} : (tensor<4x5xf32>, tensor<2x5xf32>, none) -> tensor<4x2xf32>
  %output, %log_prob = onnx.SoftmaxCrossEntropyLoss(%3, %arg1, %2) {ignore_index = -100 : i64, pipe.stage = 1 : i64} : (tensor<4x2xf32>, tensor<4xi64>, none) -> (tensor<f32>, tensor<4x2xf32>)
  %4 = onnx.Constant {pipe.stage = 1 : i64, value = dense<1.000000e+00> : tensor<f32>} : tensor<f32>
  %5 = onnx.SoftmaxCrossEntropyLossGrad(%4, %log_prob, %arg1, %2) {ignore_index = -100 : i64, pipe.stage = 1 : i64} : (tensor<f32>, tensor<4x2xf32>, tensor<4xi64>, none) -> tensor<4x2xf32>
  %6 = onnx.NoValue {pipe.stage = 1 : i64} : none
  %7 = onnx.Gemm(%5, %arg4, %6) {pipe.stage = 1 : i64} : (tensor<4x2xf32>, tensor<2x5xf32>, none) -> tensor<4x5xf32>
  %8 = onnx.NoValue {pipe.stage = 1 : i64} : none
  %9 = onnx.Gemm(%5, %1, %8) {pipe.stage = 1 : i64, transA = 1 : i64} : (tensor<4x2xf32>, tensor<4x5xf32>, none) -> tensor<2x5xf32>
  %10 = onnx.ReluGrad(%0, %7) {pipe.stage = 0 : i64} : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %11 = onnx.NoValue {pipe.stage = 0 : i64} : none
  %12 = onnx.Gemm(%10, %arg0, %11) {pipe.stage = 0 : i64, transA = 1 : i64} : (tensor<4x5xf32>, tensor<4x3xf32>, none) -> tensor<5x3xf32>
  %13 = onnx.Constant {pipe.stage = 0 : i64, value = dense<5> : tensor<1xi64>} : tensor<1xi64>
  %14 = onnx.ReduceToShape(%10, %13) {pipe.stage = 0 : i64} : (tensor<4x5xf32>, tensor<1xi64>) -> tensor<5xf32>
  %15 = onnx.Constant {pipe.stage = 0 : i64, value = dense<1.000000e-01> : tensor<f32>} : tensor<f32>
  %16 = onnx.Constant {pipe.stage = 0 : i64, value = dense<1> : tensor<i64>} : tensor<i64>
  %17 = onnx.Add(%arg5, %16) {pipe.stage = 0 : i64} : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %18 = onnx.SGD(%15, %arg2, %12) {pipe.stage = 0 : i64} : (tensor<f32>, tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
  %19 = onnx.SGD(%15, %arg3, %14) {pipe.stage = 0 : i64} : (tensor<f32>, tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %20 = onnx.Constant {pipe.stage = 1 : i64, value = dense<1.000000e-01> : tensor<f32>} : tensor<f32>
  %21 = onnx.SGD(%20, %arg4, %9) {pipe.stage = 1 : i64} : (tensor<f32>, tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  return %output, %18, %19, %21, %17 : tensor<f32>, tensor<5x3xf32>, tensor<5xf32>, tensor<2x5xf32>, tensor<i64>
}

