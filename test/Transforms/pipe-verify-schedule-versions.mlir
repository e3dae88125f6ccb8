// pipe-verify-schedule checks the weight versions of no-flush programs over
// a run: version counts equal METHODS.md's (PipeDream p - s), and no
// forward or backward reads a version that was overwritten or not written
// yet. (The programs are pipe-schedule's for p = 2, M = 1, one detail
// changed.)
// RUN: pipe-opt %s --split-input-file --verify-diagnostics --pipe-verify-schedule
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
pipe.stage @s1_fwd forward stage 1 params 1 (%w: tensor<4x4xf32> {pipe.param = "layer1.weight"}, %x: tensor<2x4xf32> {pipe.name = "h0"}, %t: tensor<2x4xf32> {pipe.input = "t"}) -> (tensor<f32> {pipe.loss}, tensor<2x4xf32> {pipe.name = "d"}) {
  %y = "onnx.MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %none = "onnx.NoValue"() : () -> none
  %d = "onnx.Sub"(%y, %t) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %sq = "onnx.Mul"(%d, %d) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %l = "onnx.ReduceMean"(%sq, %none) {keepdims = 0 : i64} : (tensor<2x4xf32>, none) -> tensor<f32>
  pipe.return %l, %d : tensor<f32>, tensor<2x4xf32>
}
pipe.stage @s1_bwd backward stage 1 params 1 (%w: tensor<4x4xf32>, %x: tensor<2x4xf32> {pipe.name = "h0"}, %d: tensor<2x4xf32> {pipe.name = "d"}) -> (tensor<2x4xf32> {pipe.grad = "h0"}, tensor<4x4xf32>) {
  %none = "onnx.NoValue"() : () -> none
  %dw = "onnx.Gemm"(%x, %d, %none) {transA = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, none) -> tensor<4x4xf32>
  %dx = "onnx.Gemm"(%d, %w, %none) {transB = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>, none) -> tensor<2x4xf32>
  pipe.return %dx, %dw : tensor<2x4xf32>, tensor<4x4xf32>
}
  pipe.program @device0 device 0 stages [0] schedule "pipedream" microbatches 1 {
    // expected-error@+1 {{device 0: the weight buffer of stage 0 keeps 3 versions, but pipedream on 2 stages needs 2}}
    %w0 = pipe.weight_buffer stage 0 versions 3 ("layer0.weight": tensor<4x4xf32>)
    %act = pipe.activation_buffer "h0.grad_in" depth 1 : tensor<2x4xf32>
    %act_0 = pipe.activation_buffer "x.fed" depth 2 : tensor<2x4xf32>
    %0 = pipe.feed "x" mb 0 : tensor<2x4xf32>
    pipe.save %0 into %act_0 mb 0 : tensor<2x4xf32>
    %1 = pipe.forward @s0_fwd(%0) weights %w0[u - 1] mb 0 : (tensor<2x4xf32>) -> tensor<2x4xf32>
    pipe.send %1 to 1 mb 0 tag "h0" : tensor<2x4xf32>
    %2 = pipe.restore %act_0 mb -1 : tensor<2x4xf32>
    %3 = pipe.restore %act mb -1 : tensor<2x4xf32>
    pipe.backward @s0_bwd(%2, %3) weights %w0[u - 1] mb -1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> ()
    pipe.update %w0[u] sgd lr(1.000000e-01) mb -1
    pipe.zero_grad %w0 mb -1
    %4 = pipe.recv from 1 mb 0 tag "h0.grad" : tensor<2x4xf32>
    pipe.save %4 into %act mb 0 : tensor<2x4xf32>
  }
  pipe.program @device1 device 1 stages [1] schedule "pipedream" microbatches 1 {
    %w1 = pipe.weight_buffer stage 1 versions 1 ("layer1.weight": tensor<4x4xf32>)
    %0 = pipe.recv from 0 mb 0 tag "h0" : tensor<2x4xf32>
    %1 = pipe.feed "t" mb 0 : tensor<2x4xf32>
    %2:2 = pipe.forward @s1_fwd(%0, %1) weights %w1[u] mb 0 : (tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<f32>, tensor<2x4xf32>)
    pipe.report_loss %2#0 mb 0 : tensor<f32>
    %3 = pipe.backward @s1_bwd(%0, %2#1) weights %w1[u] mb 0 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    pipe.update %w1[u] sgd lr(1.000000e-01) mb 0
    pipe.zero_grad %w1 mb 0
    pipe.send %3 to 0 mb 0 tag "h0.grad" : tensor<2x4xf32>
  }
}

// -----

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
pipe.stage @s1_fwd forward stage 1 params 1 (%w: tensor<4x4xf32> {pipe.param = "layer1.weight"}, %x: tensor<2x4xf32> {pipe.name = "h0"}, %t: tensor<2x4xf32> {pipe.input = "t"}) -> (tensor<f32> {pipe.loss}, tensor<2x4xf32> {pipe.name = "d"}) {
  %y = "onnx.MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %none = "onnx.NoValue"() : () -> none
  %d = "onnx.Sub"(%y, %t) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %sq = "onnx.Mul"(%d, %d) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %l = "onnx.ReduceMean"(%sq, %none) {keepdims = 0 : i64} : (tensor<2x4xf32>, none) -> tensor<f32>
  pipe.return %l, %d : tensor<f32>, tensor<2x4xf32>
}
pipe.stage @s1_bwd backward stage 1 params 1 (%w: tensor<4x4xf32>, %x: tensor<2x4xf32> {pipe.name = "h0"}, %d: tensor<2x4xf32> {pipe.name = "d"}) -> (tensor<2x4xf32> {pipe.grad = "h0"}, tensor<4x4xf32>) {
  %none = "onnx.NoValue"() : () -> none
  %dw = "onnx.Gemm"(%x, %d, %none) {transA = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, none) -> tensor<4x4xf32>
  %dx = "onnx.Gemm"(%d, %w, %none) {transB = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>, none) -> tensor<2x4xf32>
  pipe.return %dx, %dw : tensor<2x4xf32>, tensor<4x4xf32>
}
  pipe.program @device0 device 0 stages [0] schedule "pipedream" microbatches 1 {
    %w0 = pipe.weight_buffer stage 0 versions 2 ("layer0.weight": tensor<4x4xf32>)
    %act = pipe.activation_buffer "h0.grad_in" depth 1 : tensor<2x4xf32>
    %act_0 = pipe.activation_buffer "x.fed" depth 2 : tensor<2x4xf32>
    %0 = pipe.feed "x" mb 0 : tensor<2x4xf32>
    pipe.save %0 into %act_0 mb 0 : tensor<2x4xf32>
    %1 = pipe.forward @s0_fwd(%0) weights %w0[u - 1] mb 0 : (tensor<2x4xf32>) -> tensor<2x4xf32>
    pipe.send %1 to 1 mb 0 tag "h0" : tensor<2x4xf32>
    %2 = pipe.restore %act_0 mb -1 : tensor<2x4xf32>
    %3 = pipe.restore %act mb -1 : tensor<2x4xf32>
    // expected-error@+1 {{device 0: mb 1 reads W(0) from slot 1 of the 2-version buffer of stage 0, which holds W(1): the version was overwritten}}
    pipe.backward @s0_bwd(%2, %3) weights %w0[u - 2] mb -1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> ()
    pipe.update %w0[u] sgd lr(1.000000e-01) mb -1
    pipe.zero_grad %w0 mb -1
    %4 = pipe.recv from 1 mb 0 tag "h0.grad" : tensor<2x4xf32>
    pipe.save %4 into %act mb 0 : tensor<2x4xf32>
  }
  pipe.program @device1 device 1 stages [1] schedule "pipedream" microbatches 1 {
    %w1 = pipe.weight_buffer stage 1 versions 1 ("layer1.weight": tensor<4x4xf32>)
    %0 = pipe.recv from 0 mb 0 tag "h0" : tensor<2x4xf32>
    %1 = pipe.feed "t" mb 0 : tensor<2x4xf32>
    %2:2 = pipe.forward @s1_fwd(%0, %1) weights %w1[u] mb 0 : (tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<f32>, tensor<2x4xf32>)
    pipe.report_loss %2#0 mb 0 : tensor<f32>
    %3 = pipe.backward @s1_bwd(%0, %2#1) weights %w1[u] mb 0 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    pipe.update %w1[u] sgd lr(1.000000e-01) mb 0
    pipe.zero_grad %w1 mb 0
    pipe.send %3 to 0 mb 0 tag "h0.grad" : tensor<2x4xf32>
  }
}

// -----

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
pipe.stage @s1_fwd forward stage 1 params 1 (%w: tensor<4x4xf32> {pipe.param = "layer1.weight"}, %x: tensor<2x4xf32> {pipe.name = "h0"}, %t: tensor<2x4xf32> {pipe.input = "t"}) -> (tensor<f32> {pipe.loss}, tensor<2x4xf32> {pipe.name = "d"}) {
  %y = "onnx.MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %none = "onnx.NoValue"() : () -> none
  %d = "onnx.Sub"(%y, %t) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %sq = "onnx.Mul"(%d, %d) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %l = "onnx.ReduceMean"(%sq, %none) {keepdims = 0 : i64} : (tensor<2x4xf32>, none) -> tensor<f32>
  pipe.return %l, %d : tensor<f32>, tensor<2x4xf32>
}
pipe.stage @s1_bwd backward stage 1 params 1 (%w: tensor<4x4xf32>, %x: tensor<2x4xf32> {pipe.name = "h0"}, %d: tensor<2x4xf32> {pipe.name = "d"}) -> (tensor<2x4xf32> {pipe.grad = "h0"}, tensor<4x4xf32>) {
  %none = "onnx.NoValue"() : () -> none
  %dw = "onnx.Gemm"(%x, %d, %none) {transA = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, none) -> tensor<4x4xf32>
  %dx = "onnx.Gemm"(%d, %w, %none) {transB = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>, none) -> tensor<2x4xf32>
  pipe.return %dx, %dw : tensor<2x4xf32>, tensor<4x4xf32>
}
  pipe.program @device0 device 0 stages [0] schedule "pipedream" microbatches 1 {
    %w0 = pipe.weight_buffer stage 0 versions 2 ("layer0.weight": tensor<4x4xf32>)
    %act = pipe.activation_buffer "h0.grad_in" depth 1 : tensor<2x4xf32>
    %act_0 = pipe.activation_buffer "x.fed" depth 2 : tensor<2x4xf32>
    %0 = pipe.feed "x" mb 0 : tensor<2x4xf32>
    pipe.save %0 into %act_0 mb 0 : tensor<2x4xf32>
    // expected-error@+1 {{device 0: mb 1 reads W(1) from slot 1 of the 2-version buffer of stage 0, which holds W(0): the version does not exist yet}}
    %1 = pipe.forward @s0_fwd(%0) weights %w0[u] mb 0 : (tensor<2x4xf32>) -> tensor<2x4xf32>
    pipe.send %1 to 1 mb 0 tag "h0" : tensor<2x4xf32>
    %2 = pipe.restore %act_0 mb -1 : tensor<2x4xf32>
    %3 = pipe.restore %act mb -1 : tensor<2x4xf32>
    pipe.backward @s0_bwd(%2, %3) weights %w0[u - 1] mb -1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> ()
    pipe.update %w0[u] sgd lr(1.000000e-01) mb -1
    pipe.zero_grad %w0 mb -1
    %4 = pipe.recv from 1 mb 0 tag "h0.grad" : tensor<2x4xf32>
    pipe.save %4 into %act mb 0 : tensor<2x4xf32>
  }
  pipe.program @device1 device 1 stages [1] schedule "pipedream" microbatches 1 {
    %w1 = pipe.weight_buffer stage 1 versions 1 ("layer1.weight": tensor<4x4xf32>)
    %0 = pipe.recv from 0 mb 0 tag "h0" : tensor<2x4xf32>
    %1 = pipe.feed "t" mb 0 : tensor<2x4xf32>
    %2:2 = pipe.forward @s1_fwd(%0, %1) weights %w1[u] mb 0 : (tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<f32>, tensor<2x4xf32>)
    pipe.report_loss %2#0 mb 0 : tensor<f32>
    %3 = pipe.backward @s1_bwd(%0, %2#1) weights %w1[u] mb 0 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    pipe.update %w1[u] sgd lr(1.000000e-01) mb 0
    pipe.zero_grad %w1 mb 0
    pipe.send %3 to 0 mb 0 tag "h0.grad" : tensor<2x4xf32>
  }
}
