// RUN: pipe-opt %s | pipe-opt | FileCheck %s

// CHECK-LABEL: func @linear
func.func @linear(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %bt: tensor<2x3x8x5xf32>, %v: tensor<8xf32>) {
  %none = onnx.NoValue : none
  // CHECK: onnx.Gemm(%{{.*}}, %{{.*}}, %{{.*}}) {alpha = 5.000000e-01 : f32} : (tensor<4x8xf32>, tensor<8x16xf32>, none) -> tensor<4x16xf32>
  %0 = onnx.Gemm(%a, %b, %none) {alpha = 0.5 : f32} : (tensor<4x8xf32>, tensor<8x16xf32>, none) -> tensor<4x16xf32>
  // CHECK: onnx.MatMul(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<2x3x8x5xf32>) -> tensor<2x3x4x5xf32>
  %1 = onnx.MatMul(%a, %bt) : (tensor<4x8xf32>, tensor<2x3x8x5xf32>) -> tensor<2x3x4x5xf32>
  // CHECK: onnx.MatMul(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4xf32>
  %2 = onnx.MatMul(%a, %v) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func @softmax
func.func @softmax(%x: tensor<2x10xf32>) {
  // CHECK: onnx.Softmax(%{{.*}}) : (tensor<2x10xf32>) -> tensor<2x10xf32>
  %0 = onnx.Softmax(%x) : (tensor<2x10xf32>) -> tensor<2x10xf32>
  // CHECK: onnx.LogSoftmax(%{{.*}}) {axis = 0 : i64} : (tensor<2x10xf32>) -> tensor<2x10xf32>
  %1 = onnx.LogSoftmax(%x) {axis = 0 : i64} : (tensor<2x10xf32>) -> tensor<2x10xf32>
  return
}

// CHECK-LABEL: func @layer_norm
// Attributes at their default values are not printed.
func.func @layer_norm(%x: tensor<2x5x8xf32>, %s: tensor<8xf32>, %b: tensor<8xf32>, %s2: tensor<5x8xf32>) {
  %none = onnx.NoValue : none
  // CHECK: onnx.LayerNormalization(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  %0 = onnx.LayerNormalization(%x, %s, %b) {axis = -1 : i64} : (tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  // CHECK: onnx.LayerNormalization(%{{.*}}, %{{.*}}, %{{.*}}) {axis = 1 : i64, epsilon = 1.000000e-03 : f32} : (tensor<2x5x8xf32>, tensor<5x8xf32>, none) -> (tensor<2x5x8xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
  %1:3 = onnx.LayerNormalization(%x, %s2, %none) {axis = 1 : i64, epsilon = 1.0e-3 : f32} : (tensor<2x5x8xf32>, tensor<5x8xf32>, none) -> (tensor<2x5x8xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
  // CHECK: onnx.LayerNormalization(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<2x5x8xf32>, tensor<8xf32>, none) -> (tensor<2x5x8xf32>, tensor<2x5x1xf32>)
  %2:2 = onnx.LayerNormalization(%x, %s, %none) : (tensor<2x5x8xf32>, tensor<8xf32>, none) -> (tensor<2x5x8xf32>, tensor<2x5x1xf32>)
  return
}

// Mean and InvStdDev have stash_type's element type.
// CHECK-LABEL: func @layer_norm_f16
func.func @layer_norm_f16(%x: tensor<2x8xf16>, %s: tensor<8xf16>) {
  %none = onnx.NoValue : none
  // CHECK: -> (tensor<2x8xf16>, tensor<2x1xf32>, tensor<2x1xf32>)
  %0:3 = onnx.LayerNormalization(%x, %s, %none) : (tensor<2x8xf16>, tensor<8xf16>, none) -> (tensor<2x8xf16>, tensor<2x1xf32>, tensor<2x1xf32>)
  return
}

// CHECK-LABEL: func @batch_norm
func.func @batch_norm(%x: tensor<4x3x8x8xf32>, %c: tensor<3xf32>) {
  // CHECK: onnx.BatchNormalization(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<4x3x8x8xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3x8x8xf32>
  %0 = onnx.BatchNormalization(%x, %c, %c, %c, %c) : (tensor<4x3x8x8xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3x8x8xf32>
  // CHECK: onnx.BatchNormalization(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {momentum = 8.000000e-01 : f32, training_mode = 1 : i64} : (tensor<4x3x8x8xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3x8x8xf32>, tensor<3xf32>, tensor<3xf32>)
  %1:3 = onnx.BatchNormalization(%x, %c, %c, %c, %c) {momentum = 0.8 : f32, training_mode = 1 : i64} : (tensor<4x3x8x8xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3x8x8xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// CHECK-LABEL: func @conv
func.func @conv(%x: tensor<2x3x32x32xf32>, %w: tensor<16x3x3x3xf32>, %b: tensor<16xf32>, %wg: tensor<8x1x3x3xf32>, %x8: tensor<2x8x9x9xf32>, %x1: tensor<1x4x10xf32>, %w1: tensor<6x4x3xf32>) {
  %none = onnx.NoValue : none
  // CHECK: onnx.Conv(%{{.*}}, %{{.*}}, %{{.*}}) {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x3x32x32xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<2x16x32x32xf32>
  %0 = onnx.Conv(%x, %w, %b) {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x3x32x32xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<2x16x32x32xf32>
  // CHECK: onnx.Conv(%{{.*}}, %{{.*}}, %{{.*}}) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>} : (tensor<2x3x32x32xf32>, tensor<16x3x3x3xf32>, none) -> tensor<2x16x15x15xf32>
  %1 = onnx.Conv(%x, %w, %none) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>} : (tensor<2x3x32x32xf32>, tensor<16x3x3x3xf32>, none) -> tensor<2x16x15x15xf32>
  // CHECK: onnx.Conv(%{{.*}}, %{{.*}}, %{{.*}}) {auto_pad = "SAME_UPPER", strides = array<i64: 2, 2>} : (tensor<2x3x32x32xf32>, tensor<16x3x3x3xf32>, none) -> tensor<2x16x16x16xf32>
  %2 = onnx.Conv(%x, %w, %none) {auto_pad = "SAME_UPPER", strides = array<i64: 2, 2>} : (tensor<2x3x32x32xf32>, tensor<16x3x3x3xf32>, none) -> tensor<2x16x16x16xf32>
  // CHECK: onnx.Conv(%{{.*}}, %{{.*}}, %{{.*}}) {dilations = array<i64: 2, 2>, group = 8 : i64} : (tensor<2x8x9x9xf32>, tensor<8x1x3x3xf32>, none) -> tensor<2x8x5x5xf32>
  %3 = onnx.Conv(%x8, %wg, %none) {dilations = array<i64: 2, 2>, group = 8 : i64} : (tensor<2x8x9x9xf32>, tensor<8x1x3x3xf32>, none) -> tensor<2x8x5x5xf32>
  // CHECK: onnx.Conv(%{{.*}}, %{{.*}}, %{{.*}}) {auto_pad = "VALID"} : (tensor<1x4x10xf32>, tensor<6x4x3xf32>, none) -> tensor<1x6x8xf32>
  %4 = onnx.Conv(%x1, %w1, %none) {auto_pad = "VALID"} : (tensor<1x4x10xf32>, tensor<6x4x3xf32>, none) -> tensor<1x6x8xf32>
  return
}

// CHECK-LABEL: func @conv_dynamic
func.func @conv_dynamic(%x: tensor<?x3x?x32xf32>, %w: tensor<16x3x3x3xf32>, %u: tensor<*xf32>) {
  %none = onnx.NoValue : none
  // CHECK: onnx.Conv(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<?x3x?x32xf32>, tensor<16x3x3x3xf32>, none) -> tensor<?x16x?x30xf32>
  %0 = onnx.Conv(%x, %w, %none) : (tensor<?x3x?x32xf32>, tensor<16x3x3x3xf32>, none) -> tensor<?x16x?x30xf32>
  // CHECK: onnx.Conv(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<*xf32>, tensor<16x3x3x3xf32>, none) -> tensor<?x?x?x?xf32>
  %1 = onnx.Conv(%u, %w, %none) : (tensor<*xf32>, tensor<16x3x3x3xf32>, none) -> tensor<?x?x?x?xf32>
  return
}

// CHECK-LABEL: func @pool
func.func @pool(%x: tensor<1x3x32x32xf32>, %y: tensor<1x1x5x5xf32>) {
  // CHECK: onnx.MaxPool(%{{.*}}) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x3x32x32xf32>) -> tensor<1x3x16x16xf32>
  %0 = onnx.MaxPool(%x) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x3x32x32xf32>) -> tensor<1x3x16x16xf32>
  // CHECK: onnx.MaxPool(%{{.*}}) {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x32x32xf32>) -> (tensor<1x3x16x16xf32>, tensor<1x3x16x16xi64>)
  %1:2 = onnx.MaxPool(%x) {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x32x32xf32>) -> (tensor<1x3x16x16xf32>, tensor<1x3x16x16xi64>)
  // ceil_mode: ceil((5 - 2) / 2) + 1 = 3.
  // CHECK: onnx.MaxPool(%{{.*}}) {ceil_mode = 1 : i64, kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32>
  %2 = onnx.MaxPool(%y) {ceil_mode = 1 : i64, kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32>
  // CHECK: onnx.AveragePool(%{{.*}}) {count_include_pad = 1 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x32x32xf32>) -> tensor<1x3x32x32xf32>
  %3 = onnx.AveragePool(%x) {count_include_pad = 1 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x32x32xf32>) -> tensor<1x3x32x32xf32>
  // CHECK: onnx.AveragePool(%{{.*}}) {auto_pad = "SAME_LOWER", kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32>
  %4 = onnx.AveragePool(%y) {auto_pad = "SAME_LOWER", kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32>
  // CHECK: onnx.GlobalAveragePool(%{{.*}}) : (tensor<1x3x32x32xf32>) -> tensor<1x3x1x1xf32>
  %5 = onnx.GlobalAveragePool(%x) : (tensor<1x3x32x32xf32>) -> tensor<1x3x1x1xf32>
  return
}

// CHECK-LABEL: func @dropout
func.func @dropout(%x: tensor<4x8xf32>) {
  %none = onnx.NoValue : none
  %ratio = onnx.Constant {value = dense<1.000000e-01> : tensor<f32>} : tensor<f32>
  %train = onnx.Constant {value = dense<true> : tensor<i1>} : tensor<i1>
  // CHECK: onnx.Dropout(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<4x8xf32>, none, none) -> tensor<4x8xf32>
  %0 = onnx.Dropout(%x, %none, %none) : (tensor<4x8xf32>, none, none) -> tensor<4x8xf32>
  // CHECK: onnx.Dropout(%{{.*}}, %{{.*}}, %{{.*}}) {seed = 3 : i64} : (tensor<4x8xf32>, tensor<f32>, tensor<i1>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
  %1:2 = onnx.Dropout(%x, %ratio, %train) {seed = 3 : i64} : (tensor<4x8xf32>, tensor<f32>, tensor<i1>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
  return
}

// CHECK-LABEL: func @reduce
func.func @reduce(%x: tensor<2x3x4xf32>, %axes: tensor<2xi64>) {
  %none = onnx.NoValue : none
  %a = onnx.Constant {value = dense<[-1, 0]> : tensor<2xi64>} : tensor<2xi64>
  // CHECK: onnx.ReduceMean(%{{.*}}, %{{.*}}) : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<1x3x1xf32>
  %0 = onnx.ReduceMean(%x, %a) : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<1x3x1xf32>
  // CHECK: onnx.ReduceMean(%{{.*}}, %{{.*}}) {keepdims = 0 : i64} : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<3xf32>
  %1 = onnx.ReduceMean(%x, %a) {keepdims = 0 : i64} : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<3xf32>
  // CHECK: onnx.ReduceSum(%{{.*}}, %{{.*}}) {keepdims = 0 : i64} : (tensor<2x3x4xf32>, none) -> tensor<f32>
  %2 = onnx.ReduceSum(%x, %none) {keepdims = 0 : i64} : (tensor<2x3x4xf32>, none) -> tensor<f32>
  // CHECK: onnx.ReduceSum(%{{.*}}, %{{.*}}) {noop_with_empty_axes = 1 : i64} : (tensor<2x3x4xf32>, none) -> tensor<2x3x4xf32>
  %3 = onnx.ReduceSum(%x, %none) {noop_with_empty_axes = 1 : i64} : (tensor<2x3x4xf32>, none) -> tensor<2x3x4xf32>
  // Non-constant axes: keepdims keeps the rank, not the sizes.
  // CHECK: onnx.ReduceSum(%{{.*}}, %{{.*}}) : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<?x?x?xf32>
  %4 = onnx.ReduceSum(%x, %axes) : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<?x?x?xf32>
  // CHECK: onnx.ReduceSum(%{{.*}}, %{{.*}}) {keepdims = 0 : i64} : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<*xf32>
  %5 = onnx.ReduceSum(%x, %axes) {keepdims = 0 : i64} : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<*xf32>
  return
}

// CHECK-LABEL: func @losses
func.func @losses(%scores: tensor<8x10xf32>, %labels: tensor<8xi64>, %w: tensor<10xf32>, %s3: tensor<8x10x4xf32>, %l3: tensor<8x4xi32>) {
  %none = onnx.NoValue : none
  // CHECK: onnx.SoftmaxCrossEntropyLoss(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<8x10xf32>, tensor<8xi64>, none) -> tensor<f32>
  %0 = onnx.SoftmaxCrossEntropyLoss(%scores, %labels, %none) : (tensor<8x10xf32>, tensor<8xi64>, none) -> tensor<f32>
  // CHECK: onnx.SoftmaxCrossEntropyLoss(%{{.*}}, %{{.*}}, %{{.*}}) {ignore_index = -100 : i64, reduction = "none"} : (tensor<8x10x4xf32>, tensor<8x4xi32>, tensor<10xf32>) -> (tensor<8x4xf32>, tensor<8x10x4xf32>)
  %1:2 = onnx.SoftmaxCrossEntropyLoss(%s3, %l3, %w) {ignore_index = -100 : i64, reduction = "none"} : (tensor<8x10x4xf32>, tensor<8x4xi32>, tensor<10xf32>) -> (tensor<8x4xf32>, tensor<8x10x4xf32>)
  // CHECK: onnx.NegativeLogLikelihoodLoss(%{{.*}}, %{{.*}}, %{{.*}}) {reduction = "sum"} : (tensor<8x10xf32>, tensor<8xi64>, tensor<10xf32>) -> tensor<f32>
  %2 = onnx.NegativeLogLikelihoodLoss(%scores, %labels, %w) {reduction = "sum"} : (tensor<8x10xf32>, tensor<8xi64>, tensor<10xf32>) -> tensor<f32>
  // CHECK: onnx.NegativeLogLikelihoodLoss(%{{.*}}, %{{.*}}, %{{.*}}) {reduction = "none"} : (tensor<8x10x4xf32>, tensor<8x4xi32>, none) -> tensor<8x4xf32>
  %3 = onnx.NegativeLogLikelihoodLoss(%s3, %l3, %none) {reduction = "none"} : (tensor<8x10x4xf32>, tensor<8x4xi32>, none) -> tensor<8x4xf32>
  return
}

// CHECK-LABEL: func @recurrent
func.func @recurrent(%x: tensor<5x3x4xf32>, %w: tensor<2x8x4xf32>, %r: tensor<2x8x2xf32>, %b: tensor<2x16xf32>, %h: tensor<2x3x2xf32>, %gw: tensor<1x6x4xf32>, %gr: tensor<1x6x2xf32>, %dy: tensor<5x2x3x2xf32>, %lw: tensor<1x8x4xf32>, %lr: tensor<1x8x2xf32>) {
  %none = onnx.NoValue : none
  // CHECK: onnx.LSTM(%{{.*}}) {direction = "bidirectional", hidden_size = 2 : i64} : ({{.*}}) -> (tensor<5x2x3x2xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>)
  %0:3 = onnx.LSTM(%x, %w, %r, %b, %none, %h, %h, %none) {direction = "bidirectional", hidden_size = 2 : i64} : (tensor<5x3x4xf32>, tensor<2x8x4xf32>, tensor<2x8x2xf32>, tensor<2x16xf32>, none, tensor<2x3x2xf32>, tensor<2x3x2xf32>, none) -> (tensor<5x2x3x2xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>)
  // CHECK: onnx.GRU(%{{.*}}) {linear_before_reset = 1 : i64} : ({{.*}}) -> tensor<5x1x3x2xf32>
  %1 = onnx.GRU(%x, %gw, %gr, %none, %none, %none) {linear_before_reset = 1 : i64} : (tensor<5x3x4xf32>, tensor<1x6x4xf32>, tensor<1x6x2xf32>, none, none, none) -> tensor<5x1x3x2xf32>
  // CHECK: onnx.LSTMGrad(%{{.*}}) {direction = "bidirectional"} : ({{.*}}) -> (tensor<5x3x4xf32>, tensor<2x8x4xf32>, tensor<2x8x2xf32>, tensor<2x16xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>)
  %2:6 = onnx.LSTMGrad(%x, %w, %r, %none, %none, %none, %dy, %none, %none, %none) {direction = "bidirectional"} : (tensor<5x3x4xf32>, tensor<2x8x4xf32>, tensor<2x8x2xf32>, none, none, none, tensor<5x2x3x2xf32>, none, none, none) -> (tensor<5x3x4xf32>, tensor<2x8x4xf32>, tensor<2x8x2xf32>, tensor<2x16xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>)
  // The training forms: the saved states, and a gradient reading them.
  // CHECK: onnx.LSTM(%{{.*}}) : ({{.*}}) -> (tensor<5x1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<30x3x2xf32>)
  %3:4 = onnx.LSTM(%x, %lw, %lr, %none, %none, %none, %none, %none) : (tensor<5x3x4xf32>, tensor<1x8x4xf32>, tensor<1x8x2xf32>, none, none, none, none, none) -> (tensor<5x1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<30x3x2xf32>)
  // CHECK: onnx.LSTMGrad(%{{.*}}) : ({{.*}}, tensor<30x3x2xf32>) -> (tensor<5x3x4xf32>, tensor<1x8x4xf32>, tensor<1x8x2xf32>, tensor<1x16xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>)
  %4:6 = onnx.LSTMGrad(%x, %lw, %lr, %none, %none, %none, %3#0, %none, %none, %3#3) : (tensor<5x3x4xf32>, tensor<1x8x4xf32>, tensor<1x8x2xf32>, none, none, none, tensor<5x1x3x2xf32>, none, none, tensor<30x3x2xf32>) -> (tensor<5x3x4xf32>, tensor<1x8x4xf32>, tensor<1x8x2xf32>, tensor<1x16xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>)
  // CHECK: onnx.GRU(%{{.*}}) : ({{.*}}) -> (tensor<5x1x3x2xf32>, tensor<1x3x2xf32>, tensor<25x3x2xf32>)
  %5:3 = onnx.GRU(%x, %gw, %gr, %none, %none, %none) : (tensor<5x3x4xf32>, tensor<1x6x4xf32>, tensor<1x6x2xf32>, none, none, none) -> (tensor<5x1x3x2xf32>, tensor<1x3x2xf32>, tensor<25x3x2xf32>)
  return
}

// CHECK-LABEL: func @conv_transpose_resize
// Issue 15: ConvTranspose (output_padding, output_shape), Resize by scales
// and by sizes, ResizeGrad.
func.func @conv_transpose_resize(%x: tensor<2x4x3x4xf32>, %w: tensor<4x3x3x2xf32>, %b: tensor<6xf32>, %x1: tensor<1x3x5xf32>, %w1: tensor<3x2x3xf32>, %dy: tensor<2x6x3x6xf32>) {
  %none = onnx.NoValue : none
  %half = onnx.Constant {value = dense<[1.0, 1.0, 0.5, 0.5]> : tensor<4xf32>} : tensor<4xf32>
  %sizes = onnx.Constant {value = dense<[1, 3, 7]> : tensor<3xi64>} : tensor<3xi64>
  %shape = onnx.Constant {value = dense<[2, 6, 7, 13]> : tensor<4xi64>} : tensor<4xi64>
  // CHECK: onnx.ConvTranspose(%{{.*}}, %{{.*}}, %{{.*}}) {dilations = array<i64: 1, 2>, group = 2 : i64, output_padding = array<i64: 1, 2>, pads = array<i64: 1, 0, 0, 1>, strides = array<i64: 2, 3>} : (tensor<2x4x3x4xf32>, tensor<4x3x3x2xf32>, tensor<6xf32>) -> tensor<2x6x7x13xf32>
  %0 = onnx.ConvTranspose(%x, %w, %b) {strides = array<i64: 2, 3>, pads = array<i64: 1, 0, 0, 1>, output_padding = array<i64: 1, 2>, group = 2 : i64, dilations = array<i64: 1, 2>} : (tensor<2x4x3x4xf32>, tensor<4x3x3x2xf32>, tensor<6xf32>) -> tensor<2x6x7x13xf32>
  // CHECK: onnx.ConvTranspose(%{{.*}}, %{{.*}}, %{{.*}}) {output_shape = array<i64: 12>, strides = array<i64: 2>} : (tensor<1x3x5xf32>, tensor<3x2x3xf32>, none) -> tensor<1x2x12xf32>
  %1 = onnx.ConvTranspose(%x1, %w1, %none) {strides = array<i64: 2>, output_shape = array<i64: 12>} : (tensor<1x3x5xf32>, tensor<3x2x3xf32>, none) -> tensor<1x2x12xf32>
  // CHECK: onnx.Resize(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {coordinate_transformation_mode = "pytorch_half_pixel", mode = "linear"} : (tensor<2x6x7x13xf32>, none, tensor<4xf32>, none) -> tensor<2x6x3x6xf32>
  %2 = onnx.Resize(%0, %none, %half, %none) {mode = "linear", coordinate_transformation_mode = "pytorch_half_pixel"} : (tensor<2x6x7x13xf32>, none, tensor<4xf32>, none) -> tensor<2x6x3x6xf32>
  // CHECK: onnx.Resize(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {nearest_mode = "floor"} : (tensor<1x3x5xf32>, none, none, tensor<3xi64>) -> tensor<1x3x7xf32>
  %3 = onnx.Resize(%x1, %none, %none, %sizes) {nearest_mode = "floor"} : (tensor<1x3x5xf32>, none, none, tensor<3xi64>) -> tensor<1x3x7xf32>
  // CHECK: onnx.ResizeGrad(%{{.*}}, %{{.*}}) {coordinate_transformation_mode = "pytorch_half_pixel", mode = "linear", nearest_mode = "round_prefer_floor", scales = array<f32: 1.000000e+00, 1.000000e+00, 5.000000e-01, 5.000000e-01>} : (tensor<2x6x3x6xf32>, tensor<4xi64>) -> tensor<2x6x7x13xf32>
  %4 = onnx.ResizeGrad(%dy, %shape) {coordinate_transformation_mode = "pytorch_half_pixel", mode = "linear", nearest_mode = "round_prefer_floor", scales = array<f32: 1.0, 1.0, 0.5, 0.5>} : (tensor<2x6x3x6xf32>, tensor<4xi64>) -> tensor<2x6x7x13xf32>
  return
}

// CHECK-LABEL: func @attention
func.func @attention(%x: tensor<2x4x18xf32>, %q4: tensor<2x2x4x3xf32>, %k4: tensor<2x2x5x3xf32>, %m: tensor<4x5xi1>, %p: tensor<2x2x4x4xf32>, %dy: tensor<2x4x6xf32>) {
  %none = onnx.NoValue : none
  // CHECK: onnx.Attention(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {is_causal = 1 : i64, q_num_heads = 2 : i64} : (tensor<2x4x18xf32>, none, none, none) -> (tensor<2x4x6xf32>, tensor<2x2x4x4xf32>)
  %0:2 = onnx.Attention(%x, %none, %none, %none) {is_causal = 1 : i64, q_num_heads = 2 : i64} : (tensor<2x4x18xf32>, none, none, none) -> (tensor<2x4x6xf32>, tensor<2x2x4x4xf32>)
  // CHECK: onnx.Attention(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {scale = 5.000000e-01 : f32} : (tensor<2x2x4x3xf32>, tensor<2x2x5x3xf32>, tensor<2x2x5x3xf32>, tensor<4x5xi1>) -> tensor<2x2x4x3xf32>
  %1 = onnx.Attention(%q4, %k4, %k4, %m) {scale = 0.5 : f32} : (tensor<2x2x4x3xf32>, tensor<2x2x5x3xf32>, tensor<2x2x5x3xf32>, tensor<4x5xi1>) -> tensor<2x2x4x3xf32>
  // CHECK: onnx.AttentionGrad(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {q_num_heads = 2 : i64} : (tensor<2x4x18xf32>, none, none, tensor<2x2x4x4xf32>, tensor<2x4x6xf32>) -> tensor<2x4x18xf32>
  %2 = onnx.AttentionGrad(%x, %none, %none, %p, %dy) {q_num_heads = 2 : i64} : (tensor<2x4x18xf32>, none, none, tensor<2x2x4x4xf32>, tensor<2x4x6xf32>) -> tensor<2x4x18xf32>
  return
}
