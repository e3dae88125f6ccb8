// RUN: pipe-opt %s --split-input-file --pipe-autodiff | FileCheck %s

// The train step keeps @forward's arguments, returns the loss and one
// gradient per trainable parameter; gradients of a value used twice are
// summed; nothing is built for the input, the frozen parameter or the
// dropped "logits" output; an unused trainable parameter gets zeros.
// CHECK-LABEL: func.func @forward(
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32> {pipe.input = "x"}, %[[Y:[^:]*]]: tensor<2xi64> {pipe.input = "y"}, %[[W:[^:]*]]: tensor<3x4xf32> {pipe.param = "w", pipe.trainable}, %[[B:[^:]*]]: tensor<3xf32> {pipe.param = "b", pipe.trainable}, %{{.*}}: tensor<2x3xf32> {pipe.param = "frozen"}, %{{.*}}: tensor<5xf32> {pipe.param = "unused", pipe.trainable})
// CHECK-SAME: -> (tensor<f32> {pipe.loss, pipe.output = "loss"}, tensor<3x4xf32> {pipe.grad = "w"}, tensor<3xf32> {pipe.grad = "b"}, tensor<5xf32> {pipe.grad = "unused"})
// CHECK: %[[H:.*]] = onnx.Gemm(%[[X]], %[[W]], %[[B]])
// CHECK: %[[LOSS:.*]], %[[LP:.*]] = onnx.SoftmaxCrossEntropyLoss(%{{.*}}, %[[Y]], %{{.*}}) : (tensor<2x3xf32>, tensor<2xi64>, none) -> (tensor<f32>, tensor<2x3xf32>)
// CHECK: %[[ONE:.*]] = onnx.Constant {value = dense<1.000000e+00> : tensor<f32>}
// CHECK: %[[DS:.*]] = onnx.SoftmaxCrossEntropyLossGrad(%[[ONE]], %[[LP]], %[[Y]], %{{.*}})
// CHECK: %[[D1:.*]] = onnx.Mul(%[[DS]], %[[H]])
// CHECK: %[[D2:.*]] = onnx.Mul(%[[DS]], %[[H]])
// CHECK: %[[DH:.*]] = onnx.Add(%[[D1]], %[[D2]])
// CHECK-NOT: onnx.Gemm(%[[DH]], %[[W]]
// CHECK: %[[DW:.*]] = onnx.Gemm(%[[DH]], %[[X]], %{{.*}}) {transA = 1 : i64} : (tensor<2x3xf32>, tensor<2x4xf32>, none) -> tensor<3x4xf32>
// CHECK: %[[SHAPE:.*]] = onnx.Constant {value = dense<3> : tensor<1xi64>}
// CHECK: %[[DB:.*]] = onnx.ReduceToShape(%[[DH]], %[[SHAPE]]) : (tensor<2x3xf32>, tensor<1xi64>) -> tensor<3xf32>
// CHECK: %[[Z:.*]] = onnx.Constant {value = dense<0.000000e+00> : tensor<5xf32>}
// CHECK: return %[[LOSS]], %[[DW]], %[[DB]], %[[Z]]
func.func @forward(%x: tensor<2x4xf32> {pipe.input = "x"}, %y: tensor<2xi64> {pipe.input = "y"}, %w: tensor<3x4xf32> {pipe.param = "w", pipe.trainable}, %b: tensor<3xf32> {pipe.param = "b", pipe.trainable}, %frozen: tensor<2x3xf32> {pipe.param = "frozen"}, %unused: tensor<5xf32> {pipe.param = "unused", pipe.trainable}) -> (tensor<f32> {pipe.loss, pipe.output = "loss"}, tensor<2x3xf32> {pipe.output = "logits"}) {
  %none = onnx.NoValue : none
  %0 = onnx.Gemm(%x, %w, %b) {transB = 1 : i64} : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = onnx.Mul(%0, %0) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = onnx.Add(%1, %frozen) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = onnx.SoftmaxCrossEntropyLoss(%2, %y, %none) : (tensor<2x3xf32>, tensor<2xi64>, none) -> tensor<f32>
  return %3, %0 : tensor<f32>, tensor<2x3xf32>
}

// -----
// Conv and pooling: auto_pad resolved into explicit pads on the gradient ops.
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[C:.*]] = onnx.Conv(%[[X:[^,]*]], %[[W:[^,]*]], %[[B:[^)]*]])
// CHECK: %[[R:.*]] = onnx.Relu(%[[C]])
// CHECK: %[[P:.*]] = onnx.MaxPool(%[[R]])
// CHECK: %[[A:.*]] = onnx.AveragePool(%[[P]])
// CHECK: %[[G:.*]] = onnx.GlobalAveragePool(%[[A]])
// CHECK: %[[GS:.*]] = onnx.Constant {value = dense<[1, 2, 2, 2]> : tensor<4xi64>}
// CHECK: %[[DA:.*]] = onnx.GlobalAveragePoolGrad(%{{.*}}, %[[GS]]) : (tensor<1x2x1x1xf32>, tensor<4xi64>) -> tensor<1x2x2x2xf32>
// CHECK: %[[AS:.*]] = onnx.Constant {value = dense<[1, 2, 3, 3]> : tensor<4xi64>}
// CHECK: %[[DP:.*]] = onnx.AveragePoolGrad(%[[DA]], %[[AS]]) {kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>}
// CHECK: %[[DR:.*]] = onnx.MaxPoolGrad(%[[R]], %[[DP]]) {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>}
// Relu's gradient reads its output (R), not its input.
// CHECK: %[[DC:.*]] = onnx.ReluGrad(%[[R]], %[[DR]])
// CHECK: %{{.*}}, %[[DW:.*]], %[[DB:.*]] = onnx.ConvGrad(%[[DC]], %[[X]], %[[W]]) {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x2x5x5xf32>, tensor<1x1x5x5xf32>, tensor<2x1x3x3xf32>) -> (tensor<1x1x5x5xf32>, tensor<2x1x3x3xf32>, tensor<2xf32>)
// CHECK: return %{{.*}}, %[[DW]], %[[DB]] :
func.func @forward(%x: tensor<1x1x5x5xf32> {pipe.input = "x"}, %w: tensor<2x1x3x3xf32> {pipe.param = "w", pipe.trainable}, %b: tensor<2xf32> {pipe.param = "b", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %0 = onnx.Conv(%x, %w, %b) {auto_pad = "SAME_UPPER"} : (tensor<1x1x5x5xf32>, tensor<2x1x3x3xf32>, tensor<2xf32>) -> tensor<1x2x5x5xf32>
  %1 = onnx.Relu(%0) : (tensor<1x2x5x5xf32>) -> tensor<1x2x5x5xf32>
  %2 = onnx.MaxPool(%1) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, auto_pad = "SAME_UPPER"} : (tensor<1x2x5x5xf32>) -> tensor<1x2x3x3xf32>
  %3 = onnx.AveragePool(%2) {kernel_shape = array<i64: 2, 2>} : (tensor<1x2x3x3xf32>) -> tensor<1x2x2x2xf32>
  %4 = onnx.GlobalAveragePool(%3) : (tensor<1x2x2x2xf32>) -> tensor<1x2x1x1xf32>
  %5 = onnx.ReduceSum(%4, %none) {keepdims = 0 : i64} : (tensor<1x2x1x1xf32>, none) -> tensor<f32>
  return %5 : tensor<f32>
}

// -----
// LayerNormalization and Dropout are rebuilt with the outputs their
// gradients need (saved statistics, mask).
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[Y:.*]], %[[ST:.*]]:2 = onnx.LayerNormalization(%[[X:[^,]*]], %[[S:[^,]*]], %{{.*}}) : (tensor<2x4xf32>, tensor<4xf32>, none) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
// CHECK: %[[D:.*]], %[[MASK:.*]] = onnx.Dropout(%[[Y]], %[[RATIO:[^,]*]], %[[TRAIN:[^)]*]]) : (tensor<2x4xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x4xf32>, tensor<2x4xi1>)
// CHECK: %[[DD:.*]] = onnx.DropoutGrad(%{{.*}}, %[[MASK]], %[[RATIO]], %[[TRAIN]])
// CHECK: %{{.*}}, %[[DS:.*]], %{{.*}} = onnx.LayerNormalizationGrad(%[[X]], %[[S]], %[[ST]]#0, %[[ST]]#1, %[[DD]]) :
// CHECK: return %{{.*}}, %[[DS]] :
func.func @forward(%x: tensor<2x4xf32> {pipe.input = "x"}, %s: tensor<4xf32> {pipe.param = "s", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %ratio = onnx.Constant {value = dense<0.1> : tensor<f32>} : tensor<f32>
  %train = onnx.Constant {value = dense<true> : tensor<i1>} : tensor<i1>
  %0 = onnx.LayerNormalization(%x, %s, %none) : (tensor<2x4xf32>, tensor<4xf32>, none) -> tensor<2x4xf32>
  %1 = onnx.Dropout(%0, %ratio, %train) : (tensor<2x4xf32>, tensor<f32>, tensor<i1>) -> tensor<2x4xf32>
  %2 = onnx.ReduceMean(%1, %none) {keepdims = 0 : i64} : (tensor<2x4xf32>, none) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----
// MatMul with a broadcast batch: the weight's gradient is summed over it.
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[T:.*]] = onnx.Transpose(%{{.*}}) {perm = array<i64: 0, 2, 1>} : (tensor<3x2x4xf32>) -> tensor<3x4x2xf32>
// CHECK: %[[DW:.*]] = onnx.MatMul(%[[T]], %{{.*}}) : (tensor<3x4x2xf32>, tensor<3x2x5xf32>) -> tensor<3x4x5xf32>
// CHECK: onnx.ReduceToShape(%[[DW]], %{{.*}}) : (tensor<3x4x5xf32>, tensor<3xi64>) -> tensor<1x4x5xf32>
func.func @forward(%x: tensor<3x2x4xf32> {pipe.input = "x"}, %w: tensor<1x4x5xf32> {pipe.param = "w", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %0 = onnx.MatMul(%x, %w) : (tensor<3x2x4xf32>, tensor<1x4x5xf32>) -> tensor<3x2x5xf32>
  %1 = onnx.ReduceSum(%0, %none) {keepdims = 0 : i64} : (tensor<3x2x5xf32>, none) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----
// A linear layer as torch exports it on 3-D input, MatMul(x, Transpose(W))
// + bias, is one Gemm over the 3 x 2 rows (transB, the bias as C) between
// alias reshapes; its gradients are two Gemms over all rows, with no
// Transpose and no sum over the batch. The Transpose is gone.
// CHECK-LABEL: func.func @train_step(
// CHECK-NOT: onnx.Transpose
// CHECK-NOT: onnx.MatMul
// CHECK: %[[X2:.*]] = onnx.Reshape(%arg0, %{{.*}}) : (tensor<3x2x4xf32>, tensor<2xi64>) -> tensor<6x4xf32>
// CHECK: %[[Y2:.*]] = onnx.Gemm(%[[X2]], %arg1, %arg2) {transB = 1 : i64} : (tensor<6x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<6x5xf32>
// CHECK: onnx.Reshape(%[[Y2]], %{{.*}}) : (tensor<6x5xf32>, tensor<3xi64>) -> tensor<3x2x5xf32>
// CHECK: %[[G2:.*]] = onnx.Reshape(%{{.*}}, %{{.*}}) : (tensor<3x2x5xf32>, tensor<2xi64>) -> tensor<6x5xf32>
// CHECK-DAG: onnx.Gemm(%[[G2]], %arg1, %{{.*}}) : (tensor<6x5xf32>, tensor<5x4xf32>, none) -> tensor<6x4xf32>
// CHECK-DAG: %[[DW:.*]] = onnx.Gemm(%[[G2]], %[[X2]], %{{.*}}) {transA = 1 : i64} : (tensor<6x5xf32>, tensor<6x4xf32>, none) -> tensor<5x4xf32>
// CHECK-DAG: %[[DB:.*]] = onnx.ReduceToShape(%[[G2]], %{{.*}}) : (tensor<6x5xf32>, tensor<1xi64>) -> tensor<5xf32>
// CHECK-NOT: onnx.Transpose
// CHECK: return %{{.*}}, %{{.*}}, %[[DW]], %[[DB]] :
func.func @forward(%x: tensor<3x2x4xf32> {pipe.input = "x", pipe.trainable}, %w: tensor<5x4xf32> {pipe.param = "w", pipe.trainable}, %b: tensor<5xf32> {pipe.param = "b", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %wt = onnx.Transpose(%w) {perm = array<i64: 1, 0>} : (tensor<5x4xf32>) -> tensor<4x5xf32>
  %0 = onnx.MatMul(%x, %wt) : (tensor<3x2x4xf32>, tensor<4x5xf32>) -> tensor<3x2x5xf32>
  %1 = onnx.Add(%0, %b) : (tensor<3x2x5xf32>, tensor<5xf32>) -> tensor<3x2x5xf32>
  %2 = onnx.Mul(%1, %1) : (tensor<3x2x5xf32>, tensor<3x2x5xf32>) -> tensor<3x2x5xf32>
  %3 = onnx.ReduceSum(%2, %none) {keepdims = 0 : i64} : (tensor<3x2x5xf32>, none) -> tensor<f32>
  return %3 : tensor<f32>
}

// -----
// An imported onnx.Gradient (TrainingInfoProto) is expanded in place:
// @forward inlined, arguments matched by name, results the gradients.
// CHECK-LABEL: func.func @training_algorithm(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x3xf32> {pipe.input = "X"}, %[[W:[^:]*]]: tensor<3x2xf32> {pipe.param = "W", pipe.trainable}, %[[R:[^:]*]]: tensor<f32> {pipe.input = "R"}, %[[T:[^:]*]]: tensor<i64> {pipe.input = "T"}, %[[H:[^:]*]]: tensor<3x2xf32> {pipe.param = "H"}
// CHECK-NOT: onnx.Gradient
// CHECK: %[[XT:.*]] = onnx.Transpose(%[[X]]) {perm = array<i64: 1, 0>}
// CHECK: %[[DW:.*]] = onnx.MatMul(%[[XT]], %{{.*}}) : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
// CHECK: onnx.Adagrad(%[[R]], %[[T]], %[[W]], %[[DW]], %[[H]])
func.func @forward(%x: tensor<4x3xf32> {pipe.input = "X"}, %w: tensor<3x2xf32> {pipe.param = "W", pipe.trainable}) -> (tensor<f32> {pipe.loss, pipe.output = "loss"}) {
  %none = onnx.NoValue : none
  %0 = onnx.MatMul(%x, %w) : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %1 = onnx.ReduceSum(%0, %none) {keepdims = 0 : i64} : (tensor<4x2xf32>, none) -> tensor<f32>
  return %1 : tensor<f32>
}
func.func @training_algorithm(%x: tensor<4x3xf32> {pipe.input = "X"}, %w: tensor<3x2xf32> {pipe.param = "W", pipe.trainable}, %r: tensor<f32> {pipe.input = "R"}, %t: tensor<i64> {pipe.input = "T"}, %h: tensor<3x2xf32> {pipe.param = "H"}) -> (tensor<3x2xf32>, tensor<3x2xf32>) {
  %0:2 = onnx.Gradient(%x, %w) {xs = ["X", "W"], y = "loss", zs = []} : (tensor<4x3xf32>, tensor<3x2xf32>) -> (tensor<4x3xf32>, tensor<3x2xf32>)
  %1:2 = onnx.Adagrad(%r, %t, %w, %0#1, %h) {decay_factor = 1.0e-01 : f32} : (tensor<f32>, tensor<i64>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>)
  return %1#0, %1#1 : tensor<3x2xf32>, tensor<3x2xf32>
}

// -----
// A fused attention that drops its probabilities: its training form saves
// them (dropped elements sign-marked) and AttentionGrad takes the ratio.
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[Y:.*]]:2 = onnx.Attention(%[[Q:[^,]*]], %{{.*}}) {dropout = 1.000000e-01 : f32, is_causal = 1 : i64} : {{.*}} -> (tensor<1x2x3x4xf32>, tensor<1x2x3x3xf32>)
// CHECK: onnx.AttentionGrad(%[[Q]], %[[Q]], %[[Q]], %[[Y]]#1, %{{.*}}) {dropout = 1.000000e-01 : f32, is_causal = 1 : i64}
func.func @forward(%q: tensor<1x2x3x4xf32> {pipe.param = "q", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %0 = onnx.Attention(%q, %q, %q, %none) {dropout = 0.1 : f32, is_causal = 1 : i64} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, none) -> tensor<1x2x3x4xf32>
  %1 = onnx.ReduceSum(%0, %none) {keepdims = 0 : i64} : (tensor<1x2x3x4xf32>, none) -> tensor<f32>
  return %1 : tensor<f32>
}
