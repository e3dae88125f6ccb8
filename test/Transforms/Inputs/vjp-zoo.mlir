// Small losses that together use every op with a VJP rule; gradcheck.py
// compares each @train_step's gradients with finite differences.

// Broadcasting arithmetic and the unary ops.
func.func @forward(%x: tensor<4x3xf32> {pipe.input = "x"}, %b: tensor<3xf32> {pipe.param = "b", pipe.trainable}, %s: tensor<1x3xf32> {pipe.param = "s", pipe.trainable}, %p: tensor<4x1xf32> {pipe.param = "p", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %0 = onnx.Add(%x, %b) : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %1 = onnx.Mul(%0, %s) : (tensor<4x3xf32>, tensor<1x3xf32>) -> tensor<4x3xf32>
  %2 = onnx.Sub(%1, %b) : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %3 = onnx.Div(%2, %s) : (tensor<4x3xf32>, tensor<1x3xf32>) -> tensor<4x3xf32>
  %4 = onnx.Sigmoid(%3) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %5 = onnx.Sqrt(%4) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %6 = onnx.Exp(%p) : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %7 = onnx.Pow(%5, %6) : (tensor<4x3xf32>, tensor<4x1xf32>) -> tensor<4x3xf32>
  %8 = onnx.Log(%7) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %9 = onnx.Erf(%8) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %10 = onnx.Neg(%9) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %11 = onnx.Identity(%10) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %c = onnx.Constant {value = dense<[[true, false, true]]> : tensor<1x3xi1>} : tensor<1x3xi1>
  %12 = onnx.Where(%c, %11, %1) : (tensor<1x3xi1>, tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %13 = onnx.Cast(%12) {to = 11 : i64} : (tensor<4x3xf32>) -> tensor<4x3xf64>
  %14 = onnx.Tanh(%13) : (tensor<4x3xf64>) -> tensor<4x3xf64>
  %15 = onnx.Cast(%14) {to = 1 : i64} : (tensor<4x3xf64>) -> tensor<4x3xf32>
  %16 = onnx.Mul(%15, %12) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %s1 = onnx.Sin(%16) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %c1 = onnx.Cos(%16) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %sc = onnx.Mul(%s1, %c1) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %sc2 = onnx.Add(%sc, %c1) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %17 = onnx.ReduceSum(%sc2, %none) {keepdims = 0 : i64} : (tensor<4x3xf32>, none) -> tensor<f32>
  return %17 : tensor<f32>
}

// -----
// Gemm with transposes, alpha, beta and a broadcast C; batched and 1-D MatMul.
func.func @forward(%a: tensor<3x4xf32> {pipe.param = "a", pipe.trainable}, %w: tensor<5x3xf32> {pipe.param = "w", pipe.trainable}, %c: tensor<5xf32> {pipe.param = "c", pipe.trainable}, %m: tensor<2x1x5x2xf32> {pipe.param = "m", pipe.trainable}, %v: tensor<2xf32> {pipe.param = "v", pipe.trainable}, %u: tensor<4xf32> {pipe.param = "u", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %0 = onnx.Gemm(%a, %w, %c) {alpha = 0.5 : f32, beta = 2.0 : f32, transA = 1 : i64, transB = 1 : i64} : (tensor<3x4xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %1 = onnx.Gemm(%0, %a, %none) {transA = 1 : i64, transB = 1 : i64} : (tensor<4x5xf32>, tensor<3x4xf32>, none) -> tensor<5x3xf32>
  %2 = onnx.Gemm(%1, %w, %none) {transA = 1 : i64} : (tensor<5x3xf32>, tensor<5x3xf32>, none) -> tensor<3x3xf32>
  %3 = onnx.MatMul(%0, %m) : (tensor<4x5xf32>, tensor<2x1x5x2xf32>) -> tensor<2x1x4x2xf32>
  %4 = onnx.MatMul(%3, %v) : (tensor<2x1x4x2xf32>, tensor<2xf32>) -> tensor<2x1x4xf32>
  %5 = onnx.MatMul(%u, %0) : (tensor<4xf32>, tensor<4x5xf32>) -> tensor<5xf32>
  %6 = onnx.MatMul(%u, %u) : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  %7 = onnx.ReduceSum(%4, %none) {keepdims = 0 : i64} : (tensor<2x1x4xf32>, none) -> tensor<f32>
  %8 = onnx.ReduceSum(%5, %none) {keepdims = 0 : i64} : (tensor<5xf32>, none) -> tensor<f32>
  %sq = onnx.Gemm(%2, %2, %none) : (tensor<3x3xf32>, tensor<3x3xf32>, none) -> tensor<3x3xf32>
  %9 = onnx.ReduceMean(%sq, %none) {keepdims = 0 : i64} : (tensor<3x3xf32>, none) -> tensor<f32>
  %10 = onnx.Mul(%7, %8) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %11 = onnx.Add(%10, %9) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %12 = onnx.Add(%11, %6) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %12 : tensor<f32>
}

// -----
// Softmax, LogSoftmax, LayerNormalization (with and without bias), ReduceMean.
func.func @forward(%x: tensor<2x3x4xf32> {pipe.param = "x", pipe.trainable}, %g: tensor<3x4xf32> {pipe.param = "g", pipe.trainable}, %b: tensor<3x4xf32> {pipe.param = "b", pipe.trainable}, %g2: tensor<4xf32> {pipe.param = "g2", pipe.trainable}, %t: tensor<2x3x4xf32> {pipe.input = "t"}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %0 = onnx.LayerNormalization(%x, %g, %b) {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  %1 = onnx.LayerNormalization(%0, %g2, %none) {epsilon = 1.0e-3 : f32} : (tensor<2x3x4xf32>, tensor<4xf32>, none) -> tensor<2x3x4xf32>
  %2 = onnx.Softmax(%1) {axis = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %3 = onnx.LogSoftmax(%0) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %4 = onnx.Mul(%2, %t) : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %5 = onnx.Mul(%3, %4) : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %axes = onnx.Constant {value = dense<[0, 2]> : tensor<2xi64>} : tensor<2xi64>
  %6 = onnx.ReduceMean(%5, %axes) : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<1x3x1xf32>
  %7 = onnx.ReduceSum(%6, %none) {keepdims = 0 : i64} : (tensor<1x3x1xf32>, none) -> tensor<f32>
  return %7 : tensor<f32>
}

// -----
// Conv (padding, stride, dilation, groups, SAME_UPPER), pooling, BatchNormalization.
func.func @forward(%x: tensor<2x4x7x7xf32> {pipe.param = "x", pipe.trainable}, %w: tensor<6x2x3x3xf32> {pipe.param = "w", pipe.trainable}, %bias: tensor<6xf32> {pipe.param = "bias", pipe.trainable}, %w2: tensor<3x6x2x2xf32> {pipe.param = "w2", pipe.trainable}, %scale: tensor<3xf32> {pipe.param = "scale", pipe.trainable}, %shift: tensor<3xf32> {pipe.param = "shift", pipe.trainable}, %mean: tensor<3xf32> {pipe.param = "mean"}, %var: tensor<3xf32> {pipe.init = dense<[0.5, 1.0, 2.0]> : tensor<3xf32>, pipe.param = "var"}, %t: tensor<2x3x2x2xf32> {pipe.input = "t"}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %0 = onnx.Conv(%x, %w, %bias) {group = 2 : i64, pads = array<i64: 1, 0, 2, 1>, strides = array<i64: 1, 2>, dilations = array<i64: 2, 1>} : (tensor<2x4x7x7xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<2x6x6x3xf32>
  %1 = onnx.Relu(%0) : (tensor<2x6x6x3xf32>) -> tensor<2x6x6x3xf32>
  %2 = onnx.Conv(%1, %w2, %none) {auto_pad = "SAME_UPPER"} : (tensor<2x6x6x3xf32>, tensor<3x6x2x2xf32>, none) -> tensor<2x3x6x3xf32>
  %3 = onnx.BatchNormalization(%2, %scale, %shift, %mean, %var) {training_mode = 1 : i64} : (tensor<2x3x6x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x6x3xf32>
  %4 = onnx.MaxPool(%3) {kernel_shape = array<i64: 3, 2>, pads = array<i64: 1, 0, 1, 0>, strides = array<i64: 2, 2>, ceil_mode = 1 : i64} : (tensor<2x3x6x3xf32>) -> tensor<2x3x4x2xf32>
  %5 = onnx.AveragePool(%3) {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 3, 2>, count_include_pad = 1 : i64} : (tensor<2x3x6x3xf32>) -> tensor<2x3x2x2xf32>
  %6 = onnx.AveragePool(%4) {kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 1>} : (tensor<2x3x4x2xf32>) -> tensor<2x3x2x2xf32>
  %7 = onnx.BatchNormalization(%6, %scale, %shift, %mean, %var) : (tensor<2x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x2x2xf32>
  %8 = onnx.Mul(%5, %7) : (tensor<2x3x2x2xf32>, tensor<2x3x2x2xf32>) -> tensor<2x3x2x2xf32>
  %9 = onnx.Mul(%8, %t) : (tensor<2x3x2x2xf32>, tensor<2x3x2x2xf32>) -> tensor<2x3x2x2xf32>
  %10 = onnx.GlobalAveragePool(%9) : (tensor<2x3x2x2xf32>) -> tensor<2x3x1x1xf32>
  %11 = onnx.ReduceSum(%10, %none) {keepdims = 0 : i64} : (tensor<2x3x1x1xf32>, none) -> tensor<f32>
  return %11 : tensor<f32>
}

// -----
// Data movement: Flatten, Reshape, Transpose, Concat, Split, Slice, Gather,
// Unsqueeze, Squeeze, Expand; a frozen parameter and integer inputs.
func.func @forward(%x: tensor<2x3x4xf32> {pipe.param = "x", pipe.trainable}, %y: tensor<2x2x4xf32> {pipe.param = "y", pipe.trainable}, %e: tensor<5x3xf32> {pipe.param = "e", pipe.trainable}, %frozen: tensor<3x1xf32> {pipe.param = "frozen"}, %ids: tensor<2x3xi64> {pipe.input = "ids"}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %0 = onnx.Concat(%x, %y) {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x2x4xf32>) -> tensor<2x5x4xf32>
  %1 = onnx.Transpose(%0) {perm = array<i64: 2, 0, 1>} : (tensor<2x5x4xf32>) -> tensor<4x2x5xf32>
  %split = onnx.Constant {value = dense<[1, 3]> : tensor<2xi64>} : tensor<2xi64>
  %2:2 = onnx.Split(%1, %split) : (tensor<4x2x5xf32>, tensor<2xi64>) -> (tensor<1x2x5xf32>, tensor<3x2x5xf32>)
  %starts = onnx.Constant {value = dense<[4, 0]> : tensor<2xi64>} : tensor<2xi64>
  %ends = onnx.Constant {value = dense<[0, 2]> : tensor<2xi64>} : tensor<2xi64>
  %axes = onnx.Constant {value = dense<[2, 0]> : tensor<2xi64>} : tensor<2xi64>
  %steps = onnx.Constant {value = dense<[-2, 1]> : tensor<2xi64>} : tensor<2xi64>
  %3 = onnx.Slice(%2#1, %starts, %ends, %axes, %steps) : (tensor<3x2x5xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<2x2x2xf32>
  %4 = onnx.Flatten(%3) {axis = 2 : i64} : (tensor<2x2x2xf32>) -> tensor<4x2xf32>
  %shape = onnx.Constant {value = dense<[8]> : tensor<1xi64>} : tensor<1xi64>
  %5 = onnx.Reshape(%4, %shape) : (tensor<4x2xf32>, tensor<1xi64>) -> tensor<8xf32>
  %g = onnx.Gather(%e, %ids) {axis = 0 : i64} : (tensor<5x3xf32>, tensor<2x3xi64>) -> tensor<2x3x3xf32>
  %g1 = onnx.Gather(%e, %ids) {axis = 1 : i64} : (tensor<5x3xf32>, tensor<2x3xi64>) -> tensor<5x2x3xf32>
  %ax0 = onnx.Constant {value = dense<[0]> : tensor<1xi64>} : tensor<1xi64>
  %6 = onnx.Unsqueeze(%5, %ax0) : (tensor<8xf32>, tensor<1xi64>) -> tensor<1x8xf32>
  %7 = onnx.Squeeze(%6, %ax0) : (tensor<1x8xf32>, tensor<1xi64>) -> tensor<8xf32>
  %eshape = onnx.Constant {value = dense<[3, 1, 8]> : tensor<3xi64>} : tensor<3xi64>
  %8 = onnx.Expand(%7, %eshape) : (tensor<8xf32>, tensor<3xi64>) -> tensor<3x1x8xf32>
  %9 = onnx.Mul(%8, %frozen) : (tensor<3x1x8xf32>, tensor<3x1xf32>) -> tensor<3x3x8xf32>
  %10 = onnx.ReduceSum(%9, %none) {keepdims = 0 : i64} : (tensor<3x3x8xf32>, none) -> tensor<f32>
  %11 = onnx.Mul(%g, %g) : (tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
  %12 = onnx.ReduceSum(%11, %none) {keepdims = 0 : i64} : (tensor<2x3x3xf32>, none) -> tensor<f32>
  %13 = onnx.ReduceSum(%2#0, %none) {keepdims = 0 : i64} : (tensor<1x2x5xf32>, none) -> tensor<f32>
  %14 = onnx.ReduceMean(%g1, %none) {keepdims = 0 : i64} : (tensor<5x2x3xf32>, none) -> tensor<f32>
  %15 = onnx.Mul(%10, %12) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %16 = onnx.Mul(%13, %14) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %17 = onnx.Add(%15, %16) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %17 : tensor<f32>
}

// -----
// Losses: SoftmaxCrossEntropyLoss with weights, ignore_index and its
// log_prob used; NegativeLogLikelihoodLoss; Dropout in training mode.
func.func @forward(%s: tensor<6x4xf32> {pipe.param = "s", pipe.trainable}, %w: tensor<4xf32> {pipe.param = "w"}, %q: tensor<3x4x2xf32> {pipe.param = "q", pipe.trainable}, %labels: tensor<6xi64> {pipe.input = "labels"}, %target: tensor<3x2xi64> {pipe.input = "target"}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %ratio = onnx.Constant {value = dense<0.25> : tensor<f32>} : tensor<f32>
  %train = onnx.Constant {value = dense<true> : tensor<i1>} : tensor<i1>
  %d = onnx.Dropout(%s, %ratio, %train) : (tensor<6x4xf32>, tensor<f32>, tensor<i1>) -> tensor<6x4xf32>
  %0, %lp = onnx.SoftmaxCrossEntropyLoss(%d, %labels, %w) {ignore_index = 1 : i64} : (tensor<6x4xf32>, tensor<6xi64>, tensor<4xf32>) -> (tensor<f32>, tensor<6x4xf32>)
  %1 = onnx.SoftmaxCrossEntropyLoss(%s, %labels, %none) {reduction = "sum"} : (tensor<6x4xf32>, tensor<6xi64>, none) -> tensor<f32>
  %2 = onnx.ReduceMean(%lp, %none) {keepdims = 0 : i64} : (tensor<6x4xf32>, none) -> tensor<f32>
  %3 = onnx.LogSoftmax(%q) {axis = 1 : i64} : (tensor<3x4x2xf32>) -> tensor<3x4x2xf32>
  %4 = onnx.NegativeLogLikelihoodLoss(%3, %target, %w) : (tensor<3x4x2xf32>, tensor<3x2xi64>, tensor<4xf32>) -> tensor<f32>
  %5 = onnx.Add(%0, %1) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %6 = onnx.Add(%5, %2) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %7 = onnx.Add(%6, %4) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %7 : tensor<f32>
}

// -----
// Issue 15's elementwise ops: the parametrised activations, Abs, Reciprocal,
// Clip with and without a bound, broadcasting Max/Min and Mod, the
// zero-gradient Sign/Floor/Ceil, and comparisons/logic feeding a Where.
func.func @forward(%x: tensor<4x3xf32> {pipe.input = "x"}, %p: tensor<4x3xf32> {pipe.param = "p", pipe.trainable}, %q: tensor<3xf32> {pipe.param = "q", pipe.trainable}, %r: tensor<4x1xf32> {pipe.param = "r", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %lo = onnx.Constant {value = dense<-0.5> : tensor<f32>} : tensor<f32>
  %hi = onnx.Constant {value = dense<0.8> : tensor<f32>} : tensor<f32>
  %0 = onnx.Mul(%x, %p) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %1 = onnx.LeakyRelu(%0) {alpha = 0.2 : f32} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %2 = onnx.Elu(%1) {alpha = 0.7 : f32} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %3 = onnx.Selu(%p) {alpha = 1.5 : f32, gamma = 1.2 : f32} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %4 = onnx.Softplus(%3) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %5 = onnx.HardSigmoid(%0) {alpha = 0.3 : f32, beta = 0.4 : f32} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %6 = onnx.HardSwish(%2) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %7 = onnx.Gelu(%6) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %8 = onnx.Gelu(%4) {approximate = "tanh"} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %9 = onnx.Abs(%7) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %10 = onnx.Add(%9, %one) : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %11 = onnx.Reciprocal(%10) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %12 = onnx.Clip(%0, %lo, %hi) : (tensor<4x3xf32>, tensor<f32>, tensor<f32>) -> tensor<4x3xf32>
  %13 = onnx.Clip(%8, %none, %hi) : (tensor<4x3xf32>, none, tensor<f32>) -> tensor<4x3xf32>
  %14 = onnx.Max(%12, %q) : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %15 = onnx.Min(%13, %r) : (tensor<4x3xf32>, tensor<4x1xf32>) -> tensor<4x3xf32>
  %16 = onnx.Mod(%p, %q) {fmod = 1 : i64} : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %17 = onnx.Floor(%p) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %18 = onnx.Sign(%16) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %19 = onnx.Ceil(%15) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %20 = onnx.Mul(%11, %5) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %21 = onnx.Mul(%14, %15) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %22 = onnx.Mul(%16, %17) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %23 = onnx.Add(%18, %19) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %24 = onnx.Add(%20, %21) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %25 = onnx.Add(%22, %23) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %lt = onnx.Less(%x, %p) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xi1>
  %ge = onnx.GreaterOrEqual(%p, %q) : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xi1>
  %le = onnx.LessOrEqual(%r, %q) : (tensor<4x1xf32>, tensor<3xf32>) -> tensor<4x3xi1>
  %gt = onnx.Greater(%x, %r) : (tensor<4x3xf32>, tensor<4x1xf32>) -> tensor<4x3xi1>
  %and = onnx.And(%lt, %ge) : (tensor<4x3xi1>, tensor<4x3xi1>) -> tensor<4x3xi1>
  %or = onnx.Or(%le, %gt) : (tensor<4x3xi1>, tensor<4x3xi1>) -> tensor<4x3xi1>
  %not = onnx.Not(%and) : (tensor<4x3xi1>) -> tensor<4x3xi1>
  %c = onnx.Or(%not, %or) : (tensor<4x3xi1>, tensor<4x3xi1>) -> tensor<4x3xi1>
  %26 = onnx.Where(%c, %24, %25) : (tensor<4x3xi1>, tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %27 = onnx.Mul(%26, %24) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %28 = onnx.Add(%27, %25) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %29 = onnx.ReduceSum(%28, %none) {keepdims = 0 : i64} : (tensor<4x3xf32>, none) -> tensor<f32>
  return %29 : tensor<f32>
}

// -----
// Issue 15's reductions and data ops: ReduceMax/ReduceMin (kept and dropped
// axes), CumSum (each of exclusive/reverse), Tile, Pad in its three modes
// (with axes, a crop and a constant), Trilu both ways, ArgMax feeding
// nothing differentiable.
func.func @forward(%x: tensor<2x3x4xf32> {pipe.input = "x"}, %p: tensor<2x3x4xf32> {pipe.param = "p", pipe.trainable}, %q: tensor<3x4xf32> {pipe.param = "q", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %ax1 = onnx.Constant {value = dense<[1]> : tensor<1xi64>} : tensor<1xi64>
  %ax02 = onnx.Constant {value = dense<[0, -1]> : tensor<2xi64>} : tensor<2xi64>
  %cax = onnx.Constant {value = dense<1> : tensor<i64>} : tensor<i64>
  %reps = onnx.Constant {value = dense<[2, 3]> : tensor<2xi64>} : tensor<2xi64>
  %pads = onnx.Constant {value = dense<[0, 1, 2, 0, 2, 1]> : tensor<6xi64>} : tensor<6xi64>
  %pads2 = onnx.Constant {value = dense<[2, 1, 1, 2]> : tensor<4xi64>} : tensor<4xi64>
  %pax = onnx.Constant {value = dense<[2, 1]> : tensor<2xi64>} : tensor<2xi64>
  %crop = onnx.Constant {value = dense<[0, -1, 1, 0, 0, -2]> : tensor<6xi64>} : tensor<6xi64>
  %cv = onnx.Constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %km = onnx.Constant {value = dense<-1> : tensor<i64>} : tensor<i64>
  %0 = onnx.Mul(%x, %p) : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %1 = onnx.ReduceMax(%0, %ax1) {keepdims = 1 : i64} : (tensor<2x3x4xf32>, tensor<1xi64>) -> tensor<2x1x4xf32>
  %2 = onnx.ReduceMin(%p, %ax02) {keepdims = 0 : i64} : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<3xf32>
  %3 = onnx.ReduceMax(%q, %none) {keepdims = 0 : i64} : (tensor<3x4xf32>, none) -> tensor<f32>
  %4 = onnx.CumSum(%0, %cax) : (tensor<2x3x4xf32>, tensor<i64>) -> tensor<2x3x4xf32>
  %5 = onnx.CumSum(%4, %cax) {exclusive = 1 : i64} : (tensor<2x3x4xf32>, tensor<i64>) -> tensor<2x3x4xf32>
  %6 = onnx.CumSum(%p, %cax) {reverse = 1 : i64} : (tensor<2x3x4xf32>, tensor<i64>) -> tensor<2x3x4xf32>
  %7 = onnx.CumSum(%6, %cax) {exclusive = 1 : i64, reverse = 1 : i64} : (tensor<2x3x4xf32>, tensor<i64>) -> tensor<2x3x4xf32>
  %8 = onnx.Tile(%q, %reps) : (tensor<3x4xf32>, tensor<2xi64>) -> tensor<6x12xf32>
  %9 = onnx.Pad(%7, %pads, %cv, %none) : (tensor<2x3x4xf32>, tensor<6xi64>, tensor<f32>, none) -> tensor<2x6x7xf32>
  %10 = onnx.Pad(%5, %pads2, %none, %pax) {mode = "reflect"} : (tensor<2x3x4xf32>, tensor<4xi64>, none, tensor<2xi64>) -> tensor<2x6x7xf32>
  %11 = onnx.Pad(%0, %pads, %none, %none) {mode = "edge"} : (tensor<2x3x4xf32>, tensor<6xi64>, none, none) -> tensor<2x6x7xf32>
  %12 = onnx.Pad(%p, %crop, %none, %none) : (tensor<2x3x4xf32>, tensor<6xi64>, none, none) -> tensor<2x2x3xf32>
  %13 = onnx.Trilu(%9, %none) : (tensor<2x6x7xf32>, none) -> tensor<2x6x7xf32>
  %14 = onnx.Trilu(%10, %km) {upper = 0 : i64} : (tensor<2x6x7xf32>, tensor<i64>) -> tensor<2x6x7xf32>
  %15 = onnx.Mul(%13, %14) : (tensor<2x6x7xf32>, tensor<2x6x7xf32>) -> tensor<2x6x7xf32>
  %16 = onnx.Add(%15, %11) : (tensor<2x6x7xf32>, tensor<2x6x7xf32>) -> tensor<2x6x7xf32>
  %17 = onnx.Mul(%16, %16) : (tensor<2x6x7xf32>, tensor<2x6x7xf32>) -> tensor<2x6x7xf32>
  %18 = onnx.ReduceSum(%17, %none) {keepdims = 0 : i64} : (tensor<2x6x7xf32>, none) -> tensor<f32>
  %19 = onnx.Mul(%1, %1) : (tensor<2x1x4xf32>, tensor<2x1x4xf32>) -> tensor<2x1x4xf32>
  %20 = onnx.ReduceSum(%19, %none) {keepdims = 0 : i64} : (tensor<2x1x4xf32>, none) -> tensor<f32>
  %21 = onnx.ReduceSum(%2, %none) {keepdims = 0 : i64} : (tensor<3xf32>, none) -> tensor<f32>
  %22 = onnx.Mul(%8, %8) : (tensor<6x12xf32>, tensor<6x12xf32>) -> tensor<6x12xf32>
  %23 = onnx.ReduceSum(%22, %none) {keepdims = 0 : i64} : (tensor<6x12xf32>, none) -> tensor<f32>
  %24 = onnx.Mul(%12, %12) : (tensor<2x2x3xf32>, tensor<2x2x3xf32>) -> tensor<2x2x3xf32>
  %25 = onnx.ReduceSum(%24, %none) {keepdims = 0 : i64} : (tensor<2x2x3xf32>, none) -> tensor<f32>
  %am = onnx.ArgMax(%0) {axis = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x1xi64>
  %amf = onnx.Cast(%am) {to = 1 : i64} : (tensor<2x3x1xi64>) -> tensor<2x3x1xf32>
  %26 = onnx.ReduceSum(%amf, %none) {keepdims = 0 : i64} : (tensor<2x3x1xf32>, none) -> tensor<f32>
  %27 = onnx.Add(%18, %20) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %28 = onnx.Add(%21, %23) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %29 = onnx.Add(%25, %26) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %30 = onnx.Add(%27, %28) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %31 = onnx.Add(%29, %30) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %32 = onnx.Add(%31, %3) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %32 : tensor<f32>
}

// -----
// LSTM, bidirectional, with bias and initial states, every output in the loss
// (X a parameter too, so dX is checked).
func.func @forward(%x: tensor<3x2x3xf32> {pipe.param = "x", pipe.trainable}, %w: tensor<2x8x3xf32> {pipe.param = "w", pipe.trainable}, %r: tensor<2x8x2xf32> {pipe.param = "r", pipe.trainable}, %b: tensor<2x16xf32> {pipe.param = "b", pipe.trainable}, %h0: tensor<2x2x2xf32> {pipe.param = "h0", pipe.trainable}, %c0: tensor<2x2x2xf32> {pipe.param = "c0", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %y:3 = onnx.LSTM(%x, %w, %r, %b, %none, %h0, %c0, %none) {direction = "bidirectional", hidden_size = 2 : i64} : (tensor<3x2x3xf32>, tensor<2x8x3xf32>, tensor<2x8x2xf32>, tensor<2x16xf32>, none, tensor<2x2x2xf32>, tensor<2x2x2xf32>, none) -> (tensor<3x2x2x2xf32>, tensor<2x2x2xf32>, tensor<2x2x2xf32>)
  %0 = onnx.Mul(%y#0, %y#0) : (tensor<3x2x2x2xf32>, tensor<3x2x2x2xf32>) -> tensor<3x2x2x2xf32>
  %1 = onnx.ReduceSum(%0, %none) {keepdims = 0 : i64} : (tensor<3x2x2x2xf32>, none) -> tensor<f32>
  %2 = onnx.ReduceSum(%y#1, %none) {keepdims = 0 : i64} : (tensor<2x2x2xf32>, none) -> tensor<f32>
  %3 = onnx.Mul(%y#2, %y#2) : (tensor<2x2x2xf32>, tensor<2x2x2xf32>) -> tensor<2x2x2xf32>
  %4 = onnx.ReduceSum(%3, %none) {keepdims = 0 : i64} : (tensor<2x2x2xf32>, none) -> tensor<f32>
  %5 = onnx.Add(%1, %2) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %6 = onnx.Add(%5, %4) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %6 : tensor<f32>
}

// -----
// LSTM, reverse, no bias or initial states, only Y_h used (Y a result nobody
// reads), sequence_lens a constant equal to seq_length; then a GRU
// (linear_before_reset = 1, forward, bias and initial state) over the
// LSTM's Y_h viewed as a 2-step sequence.
func.func @forward(%x: tensor<4x2x3xf32> {pipe.param = "x", pipe.trainable}, %w: tensor<1x12x3xf32> {pipe.param = "w", pipe.trainable}, %r: tensor<1x12x3xf32> {pipe.param = "r", pipe.trainable}, %gw: tensor<1x6x3xf32> {pipe.param = "gw", pipe.trainable}, %gr: tensor<1x6x2xf32> {pipe.param = "gr", pipe.trainable}, %gb: tensor<1x12xf32> {pipe.param = "gb", pipe.trainable}, %gh0: tensor<1x1x2xf32> {pipe.param = "gh0", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %lens = onnx.Constant {value = dense<[4, 4]> : tensor<2xi32>} : tensor<2xi32>
  %y:2 = onnx.LSTM(%x, %w, %r, %none, %lens, %none, %none, %none) {direction = "reverse", hidden_size = 3 : i64} : (tensor<4x2x3xf32>, tensor<1x12x3xf32>, tensor<1x12x3xf32>, none, tensor<2xi32>, none, none, none) -> (tensor<4x1x2x3xf32>, tensor<1x2x3xf32>)
  %s = onnx.Constant {value = dense<[2, 1, 3]> : tensor<3xi64>} : tensor<3xi64>
  %seq = onnx.Reshape(%y#1, %s) : (tensor<1x2x3xf32>, tensor<3xi64>) -> tensor<2x1x3xf32>
  %g:2 = onnx.GRU(%seq, %gw, %gr, %gb, %none, %gh0) {hidden_size = 2 : i64, linear_before_reset = 1 : i64} : (tensor<2x1x3xf32>, tensor<1x6x3xf32>, tensor<1x6x2xf32>, tensor<1x12xf32>, none, tensor<1x1x2xf32>) -> (tensor<2x1x1x2xf32>, tensor<1x1x2xf32>)
  %0 = onnx.Mul(%g#0, %g#0) : (tensor<2x1x1x2xf32>, tensor<2x1x1x2xf32>) -> tensor<2x1x1x2xf32>
  %1 = onnx.ReduceSum(%0, %none) {keepdims = 0 : i64} : (tensor<2x1x1x2xf32>, none) -> tensor<f32>
  %2 = onnx.ReduceSum(%g#1, %none) {keepdims = 0 : i64} : (tensor<1x1x2xf32>, none) -> tensor<f32>
  %3 = onnx.Add(%1, %2) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %3 : tensor<f32>
}

// -----
// GRU, bidirectional, linear_before_reset = 1, no initial state, X a
// parameter.
func.func @forward(%x: tensor<3x2x2xf32> {pipe.param = "x", pipe.trainable}, %w: tensor<2x9x2xf32> {pipe.param = "w", pipe.trainable}, %r: tensor<2x9x3xf32> {pipe.param = "r", pipe.trainable}, %b: tensor<2x18xf32> {pipe.param = "b", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %g:2 = onnx.GRU(%x, %w, %r, %b, %none, %none) {direction = "bidirectional", hidden_size = 3 : i64, linear_before_reset = 1 : i64} : (tensor<3x2x2xf32>, tensor<2x9x2xf32>, tensor<2x9x3xf32>, tensor<2x18xf32>, none, none) -> (tensor<3x2x2x3xf32>, tensor<2x2x3xf32>)
  %0 = onnx.Mul(%g#0, %g#0) : (tensor<3x2x2x3xf32>, tensor<3x2x2x3xf32>) -> tensor<3x2x2x3xf32>
  %1 = onnx.ReduceSum(%0, %none) {keepdims = 0 : i64} : (tensor<3x2x2x3xf32>, none) -> tensor<f32>
  %2 = onnx.Mul(%g#1, %g#1) : (tensor<2x2x3xf32>, tensor<2x2x3xf32>) -> tensor<2x2x3xf32>
  %3 = onnx.ReduceSum(%2, %none) {keepdims = 0 : i64} : (tensor<2x2x3xf32>, none) -> tensor<f32>
  %4 = onnx.Add(%1, %3) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %4 : tensor<f32>
}

// -----
// GRU with linear_before_reset = 0 (the ONNX default), reverse, with bias
// and initial state.
func.func @forward(%x: tensor<3x2x2xf32> {pipe.param = "x", pipe.trainable}, %w: tensor<1x9x2xf32> {pipe.param = "w", pipe.trainable}, %r: tensor<1x9x3xf32> {pipe.param = "r", pipe.trainable}, %b: tensor<1x18xf32> {pipe.param = "b", pipe.trainable}, %h0: tensor<1x2x3xf32> {pipe.param = "h0", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %g:2 = onnx.GRU(%x, %w, %r, %b, %none, %h0) {direction = "reverse", hidden_size = 3 : i64} : (tensor<3x2x2xf32>, tensor<1x9x2xf32>, tensor<1x9x3xf32>, tensor<1x18xf32>, none, tensor<1x2x3xf32>) -> (tensor<3x1x2x3xf32>, tensor<1x2x3xf32>)
  %0 = onnx.Mul(%g#0, %g#0) : (tensor<3x1x2x3xf32>, tensor<3x1x2x3xf32>) -> tensor<3x1x2x3xf32>
  %1 = onnx.ReduceSum(%0, %none) {keepdims = 0 : i64} : (tensor<3x1x2x3xf32>, none) -> tensor<f32>
  %2 = onnx.ReduceSum(%g#1, %none) {keepdims = 0 : i64} : (tensor<1x2x3xf32>, none) -> tensor<f32>
  %3 = onnx.Add(%1, %2) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %3 : tensor<f32>
}

// -----
// Issue 15: ConvTranspose (strides, pads, output_padding, group, dilations,
// a trained bias; 1-D from output_shape) and Resize (linear downsampling,
// nearest by sizes, cubic upsampling).
func.func @forward(%x: tensor<2x4x3x4xf32> {pipe.input = "x"}, %w: tensor<4x3x3x2xf32> {pipe.param = "w", pipe.trainable}, %b: tensor<6xf32> {pipe.param = "b", pipe.trainable}, %p: tensor<2x3x5xf32> {pipe.param = "p", pipe.trainable}, %w1: tensor<3x2x3xf32> {pipe.param = "w1", pipe.trainable}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %half = onnx.Constant {value = dense<[1.0, 1.0, 0.5, 0.5]> : tensor<4xf32>} : tensor<4xf32>
  %up = onnx.Constant {value = dense<[1.0, 1.0, 1.5, 1.25]> : tensor<4xf32>} : tensor<4xf32>
  %sizes = onnx.Constant {value = dense<[2, 2, 7]> : tensor<3xi64>} : tensor<3xi64>
  %0 = onnx.ConvTranspose(%x, %w, %b) {strides = array<i64: 2, 3>, pads = array<i64: 1, 0, 0, 1>, output_padding = array<i64: 1, 2>, group = 2 : i64, dilations = array<i64: 1, 2>} : (tensor<2x4x3x4xf32>, tensor<4x3x3x2xf32>, tensor<6xf32>) -> tensor<2x6x7x13xf32>
  %1 = onnx.Resize(%0, %none, %half, %none) {mode = "linear", coordinate_transformation_mode = "pytorch_half_pixel"} : (tensor<2x6x7x13xf32>, none, tensor<4xf32>, none) -> tensor<2x6x3x6xf32>
  %2 = onnx.ConvTranspose(%p, %w1, %none) {strides = array<i64: 2>, output_shape = array<i64: 11>} : (tensor<2x3x5xf32>, tensor<3x2x3xf32>, none) -> tensor<2x2x11xf32>
  %3 = onnx.Resize(%2, %none, %none, %sizes) {mode = "nearest", nearest_mode = "round_prefer_ceil"} : (tensor<2x2x11xf32>, none, none, tensor<3xi64>) -> tensor<2x2x7xf32>
  %4 = onnx.Resize(%0, %none, %up, %none) {mode = "cubic", cubic_coeff_a = -0.5 : f32, exclude_outside = 1 : i64} : (tensor<2x6x7x13xf32>, none, tensor<4xf32>, none) -> tensor<2x6x10x16xf32>
  %5 = onnx.Mul(%1, %1) : (tensor<2x6x3x6xf32>, tensor<2x6x3x6xf32>) -> tensor<2x6x3x6xf32>
  %6 = onnx.ReduceSum(%5, %none) {keepdims = 0 : i64} : (tensor<2x6x3x6xf32>, none) -> tensor<f32>
  %7 = onnx.Mul(%3, %3) : (tensor<2x2x7xf32>, tensor<2x2x7xf32>) -> tensor<2x2x7xf32>
  %8 = onnx.ReduceSum(%7, %none) {keepdims = 0 : i64} : (tensor<2x2x7xf32>, none) -> tensor<f32>
  %9 = onnx.Mul(%4, %4) : (tensor<2x6x10x16xf32>, tensor<2x6x10x16xf32>) -> tensor<2x6x10x16xf32>
  %10 = onnx.ReduceSum(%9, %none) {keepdims = 0 : i64} : (tensor<2x6x10x16xf32>, none) -> tensor<f32>
  %11 = onnx.Add(%6, %8) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %12 = onnx.Add(%11, %10) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %12 : tensor<f32>
}
