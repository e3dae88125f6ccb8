// RUN: pipe-opt %s --pipe-split-stages | FileCheck %s
// RUN: pipe-opt %s --pipe-split-stages --pipe-insert-transfers --pipe-schedule="kind=1f1b microbatches=2 loop=false" | pipe-opt --pipe-verify-schedule | FileCheck %s --check-prefix=SCHED

// The 2-layer MLP step of pipe-microbatch.mlir, micro-batched (M = 2,
// B/M = 2) with its SGD update. Stage 0 sends the Relu output ("relu") and
// keeps the Gemm output (ReluGrad's input, "fc1") for its backward; stage 1
// takes the labels, returns the loss first and keeps the log-probabilities
// ("loss:1"). Its backward returns the gradient of "relu", then the weight
// gradient. The SGD ops are gone: the update is the module's pipe.optimizer.
// CHECK-LABEL: module attributes {pipe.batch_size = 4 : i64, pipe.loss_combine = "mean", pipe.loss_scale = 5.000000e-01 : f64, pipe.microbatches = 2 : i64, pipe.optimizer = {kind = "sgd", lr = 1.000000e-01 : f64, weight_decay = 0.000000e+00 : f64}}
// CHECK-NOT: func.func @train_step
// CHECK: pipe.stage @s0_fwd forward stage 0 params 2 (%arg0: tensor<5x3xf32> {pipe.param = "w1"}, %arg1: tensor<5xf32> {pipe.param = "b1"}, %arg2: tensor<2x3xf32> {pipe.input = "x"}) -> (tensor<2x5xf32> {pipe.name = "relu"}, tensor<2x5xf32> {pipe.name = "fc1"}) {
// CHECK-NEXT:    %[[H:.*]] = onnx.Gemm(%arg2, %arg0, %arg1)
// CHECK-NEXT:    %[[R:.*]] = onnx.Relu(%[[H]])
// CHECK-NEXT:    pipe.return %[[R]], %[[H]] : tensor<2x5xf32>, tensor<2x5xf32>
// CHECK-NEXT:  }
// CHECK: pipe.stage @s0_bwd backward stage 0 params 2 (%arg0: tensor<5x3xf32> {pipe.param = "w1"}, %arg1: tensor<5xf32> {pipe.param = "b1"}, %arg2: tensor<2x5xf32> {pipe.name = "fc1"}, %arg3: tensor<2x5xf32> {pipe.grad = "relu"}, %arg4: tensor<2x3xf32> {pipe.input = "x"}) -> (tensor<5x3xf32>, tensor<5xf32>) {
// CHECK-NEXT:    %[[G:.*]] = onnx.ReluGrad(%arg2, %arg3)
// CHECK-NEXT:    %[[N:.*]] = onnx.NoValue
// CHECK-NEXT:    %[[DW:.*]] = onnx.Gemm(%[[G]], %arg4, %[[N]]) {pipe.stage = 0 : i64, transA = 1 : i64}
// CHECK-NEXT:    %[[S:.*]] = onnx.Constant {pipe.stage = 0 : i64, value = dense<5> : tensor<1xi64>}
// CHECK-NEXT:    %[[DB:.*]] = onnx.ReduceToShape(%[[G]], %[[S]])
// CHECK-NEXT:    pipe.return %[[DW]], %[[DB]] : tensor<5x3xf32>, tensor<5xf32>
// CHECK-NEXT:  }
// CHECK: pipe.stage @s1_fwd forward stage 1 params 1 (%arg0: tensor<2x5xf32> {pipe.param = "w2"}, %arg1: tensor<2x5xf32> {pipe.name = "relu"}, %arg2: tensor<2xi64> {pipe.input = "y"}) -> (tensor<f32> {pipe.loss}, tensor<2x2xf32> {pipe.name = "loss:1"}) {
// CHECK:         %{{.*}}, %[[LP:.*]] = onnx.SoftmaxCrossEntropyLoss
// CHECK-NEXT:    pipe.return %{{.*}}, %[[LP]] : tensor<f32>, tensor<2x2xf32>
// CHECK: pipe.stage @s1_bwd backward stage 1 params 1 (%arg0: tensor<2x5xf32> {pipe.param = "w2"}, %arg1: tensor<2x2xf32> {pipe.name = "loss:1"}, %arg2: tensor<2xi64> {pipe.input = "y"}, %arg3: tensor<2x5xf32> {pipe.name = "relu"}) -> (tensor<2x5xf32> {pipe.grad = "relu"}, tensor<2x5xf32>) {
// CHECK:         onnx.Constant {pipe.stage = 1 : i64, value = dense<5.000000e-01> : tensor<f32>}
// CHECK:         %[[DR:.*]] = onnx.Gemm(%{{.*}}, %arg0, %{{.*}}) {pipe.stage = 1 : i64}
// CHECK:         %[[DW2:.*]] = onnx.Gemm(%{{.*}}, %arg3, %{{.*}}) {pipe.stage = 1 : i64, transA = 1 : i64}
// CHECK-NEXT:    pipe.return %[[DR]], %[[DW2]] : tensor<2x5xf32>, tensor<2x5xf32>
// CHECK-NOT: onnx.SGD

// SCHED: pipe.program @device0 device 0 stages [0] schedule "1f1b" microbatches 2
// SCHED:   pipe.send %{{.*}} to 1 mb 0 tag "relu" : tensor<2x5xf32>
// SCHED:   pipe.update %{{.*}} sgd lr(1.000000e-01) weight_decay(0.000000e+00)
// SCHED: pipe.program @device1 device 1 stages [1]
// SCHED:   pipe.report_loss
// SCHED:   pipe.send %{{.*}} to 0 mb 0 tag "relu.grad" : tensor<2x5xf32>

module {
func.func @train_step(%arg0: tensor<2x3xf32> {pipe.input = "x"}, %arg1: tensor<2xi64> {pipe.input = "y"}, %arg2: tensor<5x3xf32> {pipe.param = "w1", pipe.stage = 0 : i64, pipe.trainable}, %arg3: tensor<5xf32> {pipe.param = "b1", pipe.stage = 0 : i64, pipe.trainable}, %arg4: tensor<2x5xf32> {pipe.param = "w2", pipe.stage = 1 : i64, pipe.trainable}, %arg5: tensor<i64> {pipe.init = dense<0> : tensor<i64>, pipe.state = "step"}) -> (tensor<f32> {pipe.loss}, tensor<5x3xf32> {pipe.update = "w1"}, tensor<5xf32> {pipe.update = "b1"}, tensor<2x5xf32> {pipe.update = "w2"}, tensor<i64> {pipe.update = "step"}) attributes {pipe.batch_size = 4 : i64, pipe.loss_combine = "mean", pipe.loss_scale = 5.000000e-01 : f64, pipe.microbatches = 2 : i64, pipe.optimizer = {kind = "sgd", lr = 1.000000e-01 : f64, weight_decay = 0.000000e+00 : f64}} {
    %0 = onnx.Gemm(%arg0, %arg2, %arg3) {pipe.stage = 0 : i64, transB = 1 : i64} : (tensor<2x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<2x5xf32> loc("fc1")
    %1 = onnx.Relu(%0) {pipe.stage = 0 : i64} : (tensor<2x5xf32>) -> tensor<2x5xf32> loc("relu")
    %2 = onnx.NoValue {pipe.stage = 1 : i64} : none
    %3 = onnx.Gemm(%1, %arg4, %2) {pipe.stage = 1 : i64, transB = 1 : i64} : (tensor<2x5xf32>, tensor<2x5xf32>, none) -> tensor<2x2xf32> loc("fc2")
    %output, %log_prob = onnx.SoftmaxCrossEntropyLoss(%3, %arg1, %2) {pipe.stage = 1 : i64} : (tensor<2x2xf32>, tensor<2xi64>, none) -> (tensor<f32>, tensor<2x2xf32>) loc("loss")
    %4 = onnx.Constant {pipe.stage = 1 : i64, value = dense<1.000000e+00> : tensor<f32>} : tensor<f32>
    %5 = onnx.Constant {pipe.stage = 1 : i64, value = dense<5.000000e-01> : tensor<f32>} : tensor<f32>
    %6 = onnx.Mul(%4, %5) {pipe.stage = 1 : i64} : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %7 = onnx.SoftmaxCrossEntropyLossGrad(%6, %log_prob, %arg1, %2) {pipe.stage = 1 : i64} : (tensor<f32>, tensor<2x2xf32>, tensor<2xi64>, none) -> tensor<2x2xf32>
    %8 = onnx.NoValue {pipe.stage = 1 : i64} : none
    %9 = onnx.Gemm(%7, %arg4, %8) {pipe.stage = 1 : i64} : (tensor<2x2xf32>, tensor<2x5xf32>, none) -> tensor<2x5xf32>
    %10 = onnx.NoValue {pipe.stage = 1 : i64} : none
    %11 = onnx.Gemm(%7, %1, %10) {pipe.stage = 1 : i64, transA = 1 : i64} : (tensor<2x2xf32>, tensor<2x5xf32>, none) -> tensor<2x5xf32>
    %12 = onnx.ReluGrad(%0, %9) {pipe.stage = 0 : i64} : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
    %13 = onnx.NoValue {pipe.stage = 0 : i64} : none
    %14 = onnx.Gemm(%12, %arg0, %13) {pipe.stage = 0 : i64, transA = 1 : i64} : (tensor<2x5xf32>, tensor<2x3xf32>, none) -> tensor<5x3xf32>
    %15 = onnx.Constant {pipe.stage = 0 : i64, value = dense<5> : tensor<1xi64>} : tensor<1xi64>
    %16 = onnx.ReduceToShape(%12, %15) {pipe.stage = 0 : i64} : (tensor<2x5xf32>, tensor<1xi64>) -> tensor<5xf32>
    %17 = onnx.Constant {pipe.stage = 0 : i64, value = dense<1.000000e-01> : tensor<f32>} : tensor<f32>
    %18 = onnx.Constant {pipe.stage = 0 : i64, value = dense<1> : tensor<i64>} : tensor<i64>
    %19 = onnx.Add(%arg5, %18) {pipe.stage = 0 : i64} : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %20 = onnx.SGD(%17, %arg2, %14) {pipe.stage = 0 : i64} : (tensor<f32>, tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
    %21 = onnx.SGD(%17, %arg3, %16) {pipe.stage = 0 : i64} : (tensor<f32>, tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
    %22 = onnx.Constant {pipe.stage = 1 : i64, value = dense<1.000000e-01> : tensor<f32>} : tensor<f32>
    %23 = onnx.SGD(%22, %arg4, %11) {pipe.stage = 1 : i64} : (tensor<f32>, tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
    return %output, %20, %21, %23, %19 : tensor<f32>, tensor<5x3xf32>, tensor<5xf32>, tensor<2x5xf32>, tensor<i64>
  }
}
