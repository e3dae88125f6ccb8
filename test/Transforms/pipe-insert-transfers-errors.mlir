// RUN: pipe-opt %s --split-input-file --pipe-insert-transfers -verify-diagnostics

pipe.stage @s0_fwd forward stage 0 (%x: tensor<2xf32> {pipe.input = "x"}) -> (tensor<2xf32> {pipe.name = "a"}) {
  pipe.return %x : tensor<2xf32>
}
pipe.stage @s0_bwd backward stage 0 (%g: tensor<2xf32> {pipe.grad = "a"}) -> () {
  pipe.return
}
// expected-error @+1 {{@s1_fwd takes 'b', which no earlier forward returns}}
pipe.stage @s1_fwd forward stage 1 (%b: tensor<2xf32> {pipe.name = "b"}) -> (tensor<f32> {pipe.loss}) {
  %none = onnx.NoValue : none
  %l = onnx.ReduceSum(%b, %none) {keepdims = 0 : i64} : (tensor<2xf32>, none) -> tensor<f32>
  pipe.return %l : tensor<f32>
}
pipe.stage @s1_bwd backward stage 1 () -> () {
  pipe.return
}

// -----

// expected-error @+1 {{pipe-insert-transfers: stage 1 needs one forward and one backward function}}
module {
  pipe.stage @s0_fwd forward stage 0 (%x: tensor<2xf32> {pipe.input = "x"}) -> (tensor<2xf32> {pipe.name = "a"}) {
    pipe.return %x : tensor<2xf32>
  }
  pipe.stage @s0_bwd backward stage 0 (%g: tensor<2xf32> {pipe.grad = "a"}) -> () {
    pipe.return
  }
  pipe.stage @s1_fwd forward stage 1 (%a: tensor<2xf32> {pipe.name = "a"}) -> () {
    pipe.return
  }
}
