// The evaluation's top-1 accuracy (pipe-lower-programs eval=true): the loss's
// stage, cloned for the evaluation, also counts its labels, ArgMax over the
// scores' class axis against them, ignore_index left out, two f32 results
// (pipe.metric slots 1 and 2); @pipe_eval sums each over the M micro-batches
// into slots 1 and 2 of its output array, after the mean loss in slot 0.
// RUN: pipe-opt %s --pipe-schedule="kind=1f1b microbatches=2" --pipe-lower-programs="defer-weight-grads=0 device=1 onnx-only=true eval=true" | FileCheck %s
// CHECK-LABEL: func.func @pipe_eval(
// CHECK: scf.for
// CHECK: func.call @__pipe_s1_fwd_eval(
// The micro-batches' losses (mean), then each count's sum.
// CHECK: llvm.store %{{.*}}, %arg3 : f32
// CHECK: %[[C0:.*]] = llvm.load
// CHECK: %[[C1:.*]] = llvm.load
// CHECK: %[[SUM:.*]] = arith.addf %[[C0]], %[[C1]] : f32
// CHECK: %[[SLOT1:.*]] = llvm.getelementptr %arg3[1] : (!llvm.ptr) -> !llvm.ptr, f32
// CHECK: llvm.store %[[SUM]], %[[SLOT1]]
// CHECK: llvm.getelementptr %arg3[2] : (!llvm.ptr) -> !llvm.ptr, f32
// CHECK-LABEL: func.func @__pipe_s1_fwd_eval.onnx(
// CHECK-SAME: tensor<f32> {pipe.result_buffer = 2 : i64}, tensor<f32> {pipe.result_buffer = 3 : i64})
// CHECK: %[[PRED:.*]] = onnx.ArgMax(%[[SCORES:.*]]) {axis = 1 : i64, keepdims = 0 : i64}
// CHECK: %[[HIT:.*]] = onnx.Equal(%[[PRED]], %arg2)
// CHECK: %[[IGN:.*]] = onnx.Constant {value = dense<-1> : tensor<i64>}
// CHECK: %[[ISIGN:.*]] = onnx.Equal(%arg2, %[[IGN]])
// CHECK: %[[VALID:.*]] = onnx.Not(%[[ISIGN]])
// CHECK: %[[RIGHT:.*]] = onnx.And(%[[HIT]], %[[VALID]])
// CHECK: onnx.Cast(%[[RIGHT]]) {to = 1 : i64}
// CHECK: onnx.ReduceSum
// CHECK: onnx.Cast(%[[VALID]]) {to = 1 : i64}
// CHECK: onnx.ReduceSum
// The training step's stage counts nothing.
// CHECK-LABEL: func.func @pipe_step(
// CHECK-LABEL: func.func @__pipe_s1_fwd.onnx(
// CHECK-NOT: ArgMax
// CHECK: return
//
// The step's program records the counts for the driver; a loss without
// class scores (schedule-p2's mean-squared error) says why it has none.
// RUN: pipe-opt %s --pipe-schedule="kind=1f1b microbatches=2" --pipe-lower-programs="defer-weight-grads=0 device=1 eval=true" | FileCheck %s --check-prefix=INFO
// INFO: pipe.program = {eval = true, eval_metrics = 2 : i64
// RUN: pipe-opt %S/../Transforms/Inputs/schedule-p2.mlir --pipe-schedule="kind=1f1b microbatches=2" --pipe-lower-programs="defer-weight-grads=0 device=1 eval=true" | FileCheck %s --check-prefix=NOACC
// NOACC: accuracy_unavailable = "the loss has no SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss (no class scores to take the accuracy of)"
// NOACC-NOT: eval_metrics
// The stage before the loss's counts nothing either.
// RUN: pipe-opt %s --pipe-schedule="kind=1f1b microbatches=2" --pipe-lower-programs="defer-weight-grads=0 device=0 onnx-only=true eval=true" | FileCheck %s --check-prefix=FIRST
// FIRST-LABEL: func.func @pipe_eval(
// FIRST-NOT: %arg3[1]
// FIRST-LABEL: func.func @pipe_step(

module attributes {pipe.optimizer = {kind = "sgd", lr = 1.000000e-01 : f64}} {
pipe.stage @s0_fwd forward stage 0 params 1 (%w: tensor<4x4xf32> {pipe.param = "layer0.weight"}, %x: tensor<2x4xf32> {pipe.input = "x"}) -> (tensor<2x4xf32> {pipe.name = "h0"}) {
  %y = "onnx.MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  pipe.return %y : tensor<2x4xf32>
}
pipe.stage @s0_bwd backward stage 0 params 1 (%w: tensor<4x4xf32>, %x: tensor<2x4xf32> {pipe.input = "x"}, %d: tensor<2x4xf32> {pipe.grad = "h0"}) -> tensor<4x4xf32> {
  %none = "onnx.NoValue"() : () -> none
  %dw = "onnx.Gemm"(%x, %d, %none) {transA = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, none) -> tensor<4x4xf32>
  pipe.return %dw : tensor<4x4xf32>
}
pipe.stage @s1_fwd forward stage 1 params 1 (%w: tensor<4x4xf32> {pipe.param = "layer1.weight"}, %x: tensor<2x4xf32> {pipe.name = "h0"}, %t: tensor<2xi64> {pipe.input = "t"}) -> (tensor<f32> {pipe.loss}, tensor<2x4xf32> {pipe.name = "d"}) {
  %y = "onnx.MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %none = "onnx.NoValue"() : () -> none
  %l = "onnx.SoftmaxCrossEntropyLoss"(%y, %t, %none) {ignore_index = -1 : i64, reduction = "mean"} : (tensor<2x4xf32>, tensor<2xi64>, none) -> tensor<f32>
  pipe.return %l, %y : tensor<f32>, tensor<2x4xf32>
}
pipe.stage @s1_bwd backward stage 1 params 1 (%w: tensor<4x4xf32>, %x: tensor<2x4xf32> {pipe.name = "h0"}, %d: tensor<2x4xf32> {pipe.name = "d"}) -> (tensor<2x4xf32> {pipe.grad = "h0"}, tensor<4x4xf32>) {
  %none = "onnx.NoValue"() : () -> none
  %dw = "onnx.Gemm"(%x, %d, %none) {transA = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, none) -> tensor<4x4xf32>
  %dx = "onnx.Gemm"(%d, %w, %none) {transB = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>, none) -> tensor<2x4xf32>
  pipe.return %dx, %dw : tensor<2x4xf32>, tensor<4x4xf32>
}
}
