// RUN: pipe-opt %s --split-input-file --pipe-microbatch="microbatches=2" | FileCheck %s
// RUN: pipe-opt %s --split-input-file --pipe-microbatch="microbatches=4" | FileCheck %s --check-prefix=M4

// A 2-layer MLP step with stages set by hand and an SGD update, as
// --pipe-autodiff --pipe-add-optimizer build it (B = 4). Inputs, activations
// and their gradients get B/M rows; the weight gradients (sums over the
// batch: Gemm with transA, ReduceToShape to the bias) and the update keep
// their shapes; the mean-reduced loss's gradient op gets its incoming
// gradient scaled by 1/M, with the op's stage.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg0: tensor<2x3xf32> {pipe.input = "x"}, %arg1: tensor<2xi64> {pipe.input = "y"}
// CHECK-SAME: attributes {pipe.batch_size = 4 : i64, pipe.loss_combine = "mean", pipe.loss_scale = 5.000000e-01 : f64, pipe.microbatches = 2 : i64, pipe.optimizer
// CHECK: %[[H:.*]] = onnx.Gemm(%arg0, %arg2, %arg3) {pipe.stage = 0 : i64, transB = 1 : i64} : (tensor<2x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<2x5xf32>
// CHECK: onnx.SoftmaxCrossEntropyLoss({{.*}}) {pipe.stage = 1 : i64} : (tensor<2x2xf32>, tensor<2xi64>, none) -> (tensor<f32>, tensor<2x2xf32>)
// CHECK: %[[ONE:.*]] = onnx.Constant {pipe.stage = 1 : i64, value = dense<1.000000e+00> : tensor<f32>}
// CHECK: %[[HALF:.*]] = onnx.Constant {pipe.stage = 1 : i64, value = dense<5.000000e-01> : tensor<f32>}
// CHECK: %[[SEED:.*]] = onnx.Mul(%[[ONE]], %[[HALF]]) {pipe.stage = 1 : i64}
// CHECK: onnx.SoftmaxCrossEntropyLossGrad(%[[SEED]], {{.*}}) -> tensor<2x2xf32>
// CHECK: onnx.Gemm({{.*}}) {pipe.stage = 1 : i64, transA = 1 : i64} : (tensor<2x2xf32>, tensor<2x5xf32>, none) -> tensor<2x5xf32>
// CHECK: onnx.ReluGrad({{.*}}) {pipe.stage = 0 : i64} : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
// CHECK: onnx.Constant {pipe.stage = 0 : i64, value = dense<5> : tensor<1xi64>}
// CHECK: onnx.ReduceToShape({{.*}}) {pipe.stage = 0 : i64} : (tensor<2x5xf32>, tensor<1xi64>) -> tensor<5xf32>
// CHECK: onnx.SGD({{.*}}) {pipe.stage = 0 : i64} : (tensor<f32>, tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
// M4-LABEL: func.func @train_step
// M4-SAME: %arg0: tensor<1x3xf32>
// M4-SAME: pipe.loss_scale = 2.500000e-01 : f64, pipe.microbatches = 4 : i64
// M4: onnx.Constant {pipe.stage = 1 : i64, value = dense<2.500000e-01> : tensor<f32>}
func.func @train_step(%arg0: tensor<4x3xf32> {pipe.input = "x"}, %arg1: tensor<4xi64> {pipe.input = "y"}, %arg2: tensor<5x3xf32> {pipe.param = "w1", pipe.stage = 0 : i64, pipe.trainable}, %arg3: tensor<5xf32> {pipe.param = "b1", pipe.stage = 0 : i64, pipe.trainable}, %arg4: tensor<2x5xf32> {pipe.param = "w2", pipe.stage = 1 : i64, pipe.trainable}, %arg5: tensor<i64> {pipe.init = dense<0> : tensor<i64>, pipe.state = "step"}) -> (tensor<f32> {pipe.loss}, tensor<5x3xf32> {pipe.update = "w1"}, tensor<5xf32> {pipe.update = "b1"}, tensor<2x5xf32> {pipe.update = "w2"}, tensor<i64> {pipe.update = "step"}) attributes {pipe.optimizer = {kind = "sgd", lr = 1.000000e-01 : f64, weight_decay = 0.000000e+00 : f64}} {
  %0 = onnx.Gemm(%arg0, %arg2, %arg3) {pipe.stage = 0 : i64, transB = 1 : i64} : (tensor<4x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %1 = onnx.Relu(%0) {pipe.stage = 0 : i64} : (tensor<4x5xf32>) -> tensor<4x5xf32>
  %2 = onnx.NoValue {pipe.stage = 1 : i64} : none
  %3 = onnx.Gemm(%1, %arg4, %2) {pipe.stage = 1 : i64, transB = 1 : i64} : (tensor<4x5xf32>, tensor<2x5xf32>, none) -> tensor<4x2xf32>
  %output, %log_prob = onnx.SoftmaxCrossEntropyLoss(%3, %arg1, %2) {pipe.stage = 1 : i64} : (tensor<4x2xf32>, tensor<4xi64>, none) -> (tensor<f32>, tensor<4x2xf32>)
  %4 = onnx.Constant {pipe.stage = 1 : i64, value = dense<1.000000e+00> : tensor<f32>} : tensor<f32>
  %5 = onnx.SoftmaxCrossEntropyLossGrad(%4, %log_prob, %arg1, %2) {pipe.stage = 1 : i64} : (tensor<f32>, tensor<4x2xf32>, tensor<4xi64>, none) -> tensor<4x2xf32>
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

// -----

// A Reshape target and the Expand of ReduceMean's gradient name the batch:
// rewritten. ReduceMean over the batch keeps its gradient's 1/count of the
// whole batch (1/24), so the loss gradient is not rescaled.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg0: tensor<2x2x3xf32> {pipe.input = "x"}, %arg1: tensor<2x6xf32> {pipe.input = "t"}
// CHECK-SAME: pipe.loss_combine = "mean", pipe.loss_scale = 5.000000e-01 : f64
// CHECK: %[[S:.*]] = onnx.Constant {value = dense<[2, 6]> : tensor<2xi64>}
// CHECK: onnx.Reshape(%arg0, %[[S]]) : (tensor<2x2x3xf32>, tensor<2xi64>) -> tensor<2x6xf32>
// CHECK: onnx.ReduceMean({{.*}}) {keepdims = 0 : i64} : (tensor<2x6xf32>, none) -> tensor<f32>
// CHECK: onnx.Constant {value = dense<1.000000e+00> : tensor<f32>}
// CHECK: onnx.Constant {value = dense<0.0416666679> : tensor<f32>}
// CHECK: %[[E:.*]] = onnx.Constant {value = dense<[2, 6]> : tensor<2xi64>}
// CHECK: onnx.Expand(%{{.*}}, %[[E]]) : (tensor<1x1xf32>, tensor<2xi64>) -> tensor<2x6xf32>
// CHECK: onnx.MatMul(%{{.*}}, %{{.*}}) : (tensor<6x2xf32>, tensor<2x6xf32>) -> tensor<6x6xf32>
// M4-LABEL: func.func @train_step
// M4: onnx.Reshape(%arg0, %{{.*}}) : (tensor<1x2x3xf32>, tensor<2xi64>) -> tensor<1x6xf32>
func.func @train_step(%arg0: tensor<4x2x3xf32> {pipe.input = "x"}, %arg1: tensor<4x6xf32> {pipe.input = "t"}, %arg2: tensor<6x6xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}, tensor<6x6xf32> {pipe.grad = "w"}) {
  %0 = onnx.Constant {value = dense<[4, 6]> : tensor<2xi64>} : tensor<2xi64>
  %1 = onnx.Reshape(%arg0, %0) : (tensor<4x2x3xf32>, tensor<2xi64>) -> tensor<4x6xf32>
  %2 = onnx.MatMul(%1, %arg2) : (tensor<4x6xf32>, tensor<6x6xf32>) -> tensor<4x6xf32>
  %3 = onnx.Sub(%2, %arg1) : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %4 = onnx.Mul(%3, %3) : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %5 = onnx.NoValue : none
  %6 = onnx.ReduceMean(%4, %5) {keepdims = 0 : i64} : (tensor<4x6xf32>, none) -> tensor<f32>
  %7 = onnx.Constant {value = dense<1.000000e+00> : tensor<f32>} : tensor<f32>
  %8 = onnx.Constant {value = dense<1> : tensor<2xi64>} : tensor<2xi64>
  %9 = onnx.Reshape(%7, %8) : (tensor<f32>, tensor<2xi64>) -> tensor<1x1xf32>
  %10 = onnx.Constant {value = dense<0.0416666679> : tensor<f32>} : tensor<f32>
  %11 = onnx.Mul(%9, %10) : (tensor<1x1xf32>, tensor<f32>) -> tensor<1x1xf32>
  %12 = onnx.Constant {value = dense<[4, 6]> : tensor<2xi64>} : tensor<2xi64>
  %13 = onnx.Expand(%11, %12) : (tensor<1x1xf32>, tensor<2xi64>) -> tensor<4x6xf32>
  %14 = onnx.Mul(%13, %3) : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %15 = onnx.Mul(%13, %3) : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %16 = onnx.Add(%14, %15) : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %17 = onnx.Transpose(%1) {perm = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %18 = onnx.MatMul(%17, %16) : (tensor<6x4xf32>, tensor<4x6xf32>) -> tensor<6x6xf32>
  return %6, %18 : tensor<f32>, tensor<6x6xf32>
}

// -----

// -(z*z).mean(-1).mean(): the mean's gradient, an Expand of 1/N, is negated
// and reshaped (4 -> 4x1) and expanded again (4x1 -> 4x3) before it meets
// the samples. Uniform along the batch, it is batched: both Expands and the
// Reshape take the micro-batch's rows, the constant 1/N stays the step's.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg0: tensor<2x3xf32> {pipe.input = "x"}
// CHECK: onnx.Constant {value = dense<0.0833333358> : tensor<f32>}
// CHECK: %[[E1:.*]] = onnx.Constant {value = dense<2> : tensor<1xi64>}
// CHECK: onnx.Expand(%{{.*}}, %[[E1]]) : (tensor<1xf32>, tensor<1xi64>) -> tensor<2xf32>
// CHECK: onnx.Neg(%{{.*}}) : (tensor<2xf32>) -> tensor<2xf32>
// CHECK: %[[R:.*]] = onnx.Constant {value = dense<[2, 1]> : tensor<2xi64>}
// CHECK: onnx.Reshape(%{{.*}}, %[[R]]) : (tensor<2xf32>, tensor<2xi64>) -> tensor<2x1xf32>
// CHECK: %[[E2:.*]] = onnx.Constant {value = dense<[2, 3]> : tensor<2xi64>}
// CHECK: onnx.Expand(%{{.*}}, %[[E2]]) : (tensor<2x1xf32>, tensor<2xi64>) -> tensor<2x3xf32>
// CHECK: onnx.Mul(%{{.*}}, %{{.*}}) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// M4-LABEL: func.func @train_step
// M4: onnx.Expand(%{{.*}}, %{{.*}}) : (tensor<1x1xf32>, tensor<2xi64>) -> tensor<1x3xf32>
func.func @train_step(%x: tensor<4x3xf32> {pipe.input = "x"}, %w: tensor<3xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}, tensor<3xf32> {pipe.grad = "w"}) {
  %z = onnx.Mul(%x, %w) : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %sq = onnx.Mul(%z, %z) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %neg = onnx.Neg(%sq) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %axes = onnx.Constant {value = dense<-1> : tensor<1xi64>} : tensor<1xi64>
  %rows = onnx.ReduceMean(%neg, %axes) {keepdims = 0 : i64} : (tensor<4x3xf32>, tensor<1xi64>) -> tensor<4xf32>
  %none = onnx.NoValue : none
  %l = onnx.ReduceMean(%rows, %none) {keepdims = 0 : i64} : (tensor<4xf32>, none) -> tensor<f32>
  %one = onnx.Constant {value = dense<1.000000e+00> : tensor<1xf32>} : tensor<1xf32>
  %inv = onnx.Constant {value = dense<0.0833333358> : tensor<f32>} : tensor<f32>
  %s = onnx.Mul(%one, %inv) : (tensor<1xf32>, tensor<f32>) -> tensor<1xf32>
  %e1s = onnx.Constant {value = dense<4> : tensor<1xi64>} : tensor<1xi64>
  %e1 = onnx.Expand(%s, %e1s) : (tensor<1xf32>, tensor<1xi64>) -> tensor<4xf32>
  %n1 = onnx.Neg(%e1) : (tensor<4xf32>) -> tensor<4xf32>
  %rs = onnx.Constant {value = dense<[4, 1]> : tensor<2xi64>} : tensor<2xi64>
  %r = onnx.Reshape(%n1, %rs) : (tensor<4xf32>, tensor<2xi64>) -> tensor<4x1xf32>
  %e2s = onnx.Constant {value = dense<[4, 3]> : tensor<2xi64>} : tensor<2xi64>
  %e2 = onnx.Expand(%r, %e2s) : (tensor<4x1xf32>, tensor<2xi64>) -> tensor<4x3xf32>
  %g1 = onnx.Mul(%e2, %z) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %g2 = onnx.Add(%g1, %g1) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %gx = onnx.Mul(%g2, %x) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %ax0 = onnx.Constant {value = dense<0> : tensor<1xi64>} : tensor<1xi64>
  %gw = onnx.ReduceSum(%gx, %ax0) {keepdims = 0 : i64} : (tensor<4x3xf32>, tensor<1xi64>) -> tensor<3xf32>
  return %l, %gw : tensor<f32>, tensor<3xf32>
}

// -----

// An Expand whose shape is shorter than its result (numpy broadcasting: [3]
// expands a 4x1 splat to 4x3): the batch comes from its input, a splat
// constant rebuilt with the micro-batch's rows; the shape keeps its 3.
// CHECK-LABEL: func.func @train_step
// CHECK: onnx.Constant {value = dense<1.000000e+00> : tensor<2x1xf32>}
// CHECK: %[[S:.*]] = onnx.Constant {value = dense<3> : tensor<1xi64>}
// CHECK: onnx.Expand(%{{.*}}, %[[S]]) : (tensor<2x1xf32>, tensor<1xi64>) -> tensor<2x3xf32>
// M4-LABEL: func.func @train_step
// M4: onnx.Expand(%{{.*}}, %{{.*}}) : (tensor<1x1xf32>, tensor<1xi64>) -> tensor<1x3xf32>
func.func @train_step(%x: tensor<4x3xf32> {pipe.input = "x"}, %w: tensor<3xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}, tensor<3xf32> {pipe.grad = "w"}) {
  %z = onnx.Mul(%x, %w) : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %none = onnx.NoValue : none
  %l = onnx.ReduceSum(%z, %none) {keepdims = 0 : i64} : (tensor<4x3xf32>, none) -> tensor<f32>
  %c = onnx.Constant {value = dense<1.000000e+00> : tensor<4x1xf32>} : tensor<4x1xf32>
  %s = onnx.Constant {value = dense<3> : tensor<1xi64>} : tensor<1xi64>
  %e = onnx.Expand(%c, %s) : (tensor<4x1xf32>, tensor<1xi64>) -> tensor<4x3xf32>
  %g = onnx.Mul(%e, %x) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %ax0 = onnx.Constant {value = dense<0> : tensor<1xi64>} : tensor<1xi64>
  %gw = onnx.ReduceSum(%g, %ax0) {keepdims = 0 : i64} : (tensor<4x3xf32>, tensor<1xi64>) -> tensor<3xf32>
  return %l, %gw : tensor<f32>, tensor<3xf32>
}

// -----

// A loss summed over the batch: the step's loss is the micro-batches' sum.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg0: tensor<4x2xf32>
// CHECK-SAME: pipe.loss_combine = "sum", pipe.loss_scale = 1.000000e+00 : f64
// CHECK: onnx.ReduceSum(%{{.*}}, %{{.*}}) {keepdims = 0 : i64} : (tensor<4x2xf32>, none) -> tensor<f32>
// CHECK: onnx.Expand({{.*}}) : (tensor<1x1xf32>, tensor<2xi64>) -> tensor<4x2xf32>
func.func @train_step(%x: tensor<8x2xf32> {pipe.input = "x"}, %w: tensor<2xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}, tensor<2xf32> {pipe.grad = "w"}) {
  %y = onnx.Mul(%x, %w) : (tensor<8x2xf32>, tensor<2xf32>) -> tensor<8x2xf32>
  %none = onnx.NoValue : none
  %l = onnx.ReduceSum(%y, %none) {keepdims = 0 : i64} : (tensor<8x2xf32>, none) -> tensor<f32>
  %one = onnx.Constant {value = dense<1.000000e+00> : tensor<f32>} : tensor<f32>
  %s = onnx.Constant {value = dense<1> : tensor<2xi64>} : tensor<2xi64>
  %r = onnx.Reshape(%one, %s) : (tensor<f32>, tensor<2xi64>) -> tensor<1x1xf32>
  %e = onnx.Constant {value = dense<[8, 2]> : tensor<2xi64>} : tensor<2xi64>
  %g = onnx.Expand(%r, %e) : (tensor<1x1xf32>, tensor<2xi64>) -> tensor<8x2xf32>
  %gx = onnx.Mul(%g, %x) : (tensor<8x2xf32>, tensor<8x2xf32>) -> tensor<8x2xf32>
  %t = onnx.Constant {value = dense<2> : tensor<1xi64>} : tensor<1xi64>
  %gw = onnx.ReduceToShape(%gx, %t) : (tensor<8x2xf32>, tensor<1xi64>) -> tensor<2xf32>
  return %l, %gw : tensor<f32>, tensor<2xf32>
}

// -----

// The batch merged with other dimensions, as torch's attention does: (T, B,
// D) reshaped into (T, B*H, d) (the batch the major factor) and (T*B, D) (the
// minor one). A micro-batch divides the merged extents by M.
// CHECK-LABEL: func.func @train_step
// CHECK: onnx.Constant {value = dense<[3, 4, 1]> : tensor<3xi64>}
// CHECK: onnx.Reshape({{.*}}) : (tensor<3x2x2xf32>, tensor<3xi64>) -> tensor<3x4x1xf32>
// CHECK: onnx.Transpose({{.*}}) {perm = array<i64: 1, 0, 2>} : (tensor<3x4x1xf32>) -> tensor<4x3x1xf32>
// CHECK: onnx.Softmax({{.*}}) {axis = 1 : i64} : (tensor<4x3x1xf32>) -> tensor<4x3x1xf32>
// CHECK: onnx.Constant {value = dense<[6, 2]> : tensor<2xi64>}
// CHECK: onnx.Reshape({{.*}}) : (tensor<3x4x1xf32>, tensor<2xi64>) -> tensor<6x2xf32>
// CHECK: onnx.Gemm({{.*}}) : (tensor<6x2xf32>, tensor<2x2xf32>, none) -> tensor<6x2xf32>
func.func @train_step(%x: tensor<4x3x2xf32> {pipe.input = "x"}, %w: tensor<2x2xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %t = onnx.Transpose(%x) {perm = array<i64: 1, 0, 2>} : (tensor<4x3x2xf32>) -> tensor<3x4x2xf32>
  %s1 = onnx.Constant {value = dense<[3, 8, 1]> : tensor<3xi64>} : tensor<3xi64>
  %h = onnx.Reshape(%t, %s1) : (tensor<3x4x2xf32>, tensor<3xi64>) -> tensor<3x8x1xf32>
  %ht = onnx.Transpose(%h) {perm = array<i64: 1, 0, 2>} : (tensor<3x8x1xf32>) -> tensor<8x3x1xf32>
  %p = onnx.Softmax(%ht) {axis = 1 : i64} : (tensor<8x3x1xf32>) -> tensor<8x3x1xf32>
  %back = onnx.Transpose(%p) {perm = array<i64: 1, 0, 2>} : (tensor<8x3x1xf32>) -> tensor<3x8x1xf32>
  %s2 = onnx.Constant {value = dense<[12, 2]> : tensor<2xi64>} : tensor<2xi64>
  %rows = onnx.Reshape(%back, %s2) : (tensor<3x8x1xf32>, tensor<2xi64>) -> tensor<12x2xf32>
  %none = onnx.NoValue : none
  %y = onnx.Gemm(%rows, %w, %none) : (tensor<12x2xf32>, tensor<2x2xf32>, none) -> tensor<12x2xf32>
  %l = onnx.ReduceMean(%y, %none) {keepdims = 0 : i64} : (tensor<12x2xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}
