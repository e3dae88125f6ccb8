// A chain of 4 linear stages with a mean-squared-error loss, in the form
// pipe-split-stages produces: inputs of the pipe-schedule tests.
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
pipe.stage @s1_fwd forward stage 1 params 1 (%w: tensor<4x4xf32> {pipe.param = "layer1.weight"}, %x: tensor<2x4xf32> {pipe.name = "h0"}) -> (tensor<2x4xf32> {pipe.name = "h1"}) {
  %y = "onnx.MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  pipe.return %y : tensor<2x4xf32>
}
pipe.stage @s1_bwd backward stage 1 params 1 (%w: tensor<4x4xf32>, %x: tensor<2x4xf32> {pipe.name = "h0"}, %d: tensor<2x4xf32> {pipe.grad = "h1"}) -> (tensor<2x4xf32> {pipe.grad = "h0"}, tensor<4x4xf32>) {
  %none = "onnx.NoValue"() : () -> none
  %dw = "onnx.Gemm"(%x, %d, %none) {transA = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, none) -> tensor<4x4xf32>
  %dx = "onnx.Gemm"(%d, %w, %none) {transB = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>, none) -> tensor<2x4xf32>
  pipe.return %dx, %dw : tensor<2x4xf32>, tensor<4x4xf32>
}
pipe.stage @s2_fwd forward stage 2 params 1 (%w: tensor<4x4xf32> {pipe.param = "layer2.weight"}, %x: tensor<2x4xf32> {pipe.name = "h1"}) -> (tensor<2x4xf32> {pipe.name = "h2"}) {
  %y = "onnx.MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  pipe.return %y : tensor<2x4xf32>
}
pipe.stage @s2_bwd backward stage 2 params 1 (%w: tensor<4x4xf32>, %x: tensor<2x4xf32> {pipe.name = "h1"}, %d: tensor<2x4xf32> {pipe.grad = "h2"}) -> (tensor<2x4xf32> {pipe.grad = "h1"}, tensor<4x4xf32>) {
  %none = "onnx.NoValue"() : () -> none
  %dw = "onnx.Gemm"(%x, %d, %none) {transA = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, none) -> tensor<4x4xf32>
  %dx = "onnx.Gemm"(%d, %w, %none) {transB = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>, none) -> tensor<2x4xf32>
  pipe.return %dx, %dw : tensor<2x4xf32>, tensor<4x4xf32>
}
pipe.stage @s3_fwd forward stage 3 params 1 (%w: tensor<4x4xf32> {pipe.param = "layer3.weight"}, %x: tensor<2x4xf32> {pipe.name = "h2"}, %t: tensor<2x4xf32> {pipe.input = "t"}) -> (tensor<f32> {pipe.loss}, tensor<2x4xf32> {pipe.name = "d"}) {
  %y = "onnx.MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %none = "onnx.NoValue"() : () -> none
  %d = "onnx.Sub"(%y, %t) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %sq = "onnx.Mul"(%d, %d) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %l = "onnx.ReduceMean"(%sq, %none) {keepdims = 0 : i64} : (tensor<2x4xf32>, none) -> tensor<f32>
  pipe.return %l, %d : tensor<f32>, tensor<2x4xf32>
}
pipe.stage @s3_bwd backward stage 3 params 1 (%w: tensor<4x4xf32>, %x: tensor<2x4xf32> {pipe.name = "h2"}, %d: tensor<2x4xf32> {pipe.name = "d"}) -> (tensor<2x4xf32> {pipe.grad = "h2"}, tensor<4x4xf32>) {
  %none = "onnx.NoValue"() : () -> none
  %dw = "onnx.Gemm"(%x, %d, %none) {transA = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, none) -> tensor<4x4xf32>
  %dx = "onnx.Gemm"(%d, %w, %none) {transB = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>, none) -> tensor<2x4xf32>
  pipe.return %dx, %dw : tensor<2x4xf32>, tensor<4x4xf32>
}
}
