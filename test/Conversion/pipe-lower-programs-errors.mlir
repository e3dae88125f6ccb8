// RUN: pipe-opt %s --split-input-file --verify-diagnostics --pipe-lower-programs="onnx-only=true"

// What the lowering does not support is reported on the instruction.

pipe.stage @s0_fwd forward stage 0 params 1 (%w: tensor<4x8xf32>, %x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %h = "onnx.MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  pipe.return %h : tensor<2x8xf32>
}
pipe.program @device0 device 0 stages [0] schedule "1f1b" microbatches 1 {
  // expected-error@+1 {{pipe-lower-programs: a synchronous schedule keeps one weight version}}
  %w = pipe.weight_buffer stage 0 versions 2 ("fc1.weight": tensor<4x8xf32>)
  %x0 = pipe.feed "x" mb 0 : tensor<2x4xf32>
  %h0 = pipe.forward @s0_fwd(%x0) weights %w[0] mb 0 : (tensor<2x4xf32>) -> tensor<2x8xf32>
  pipe.send %h0 to 1 mb 0 tag "h" : tensor<2x8xf32>
}

// -----

pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("fc1.weight": tensor<4x8xf32>)
  pipe.update %w sgd lr(0.1)
  // expected-error@+1 {{pipe-lower-programs: a synchronous step updates a buffer once}}
  pipe.update %w sgd lr(0.1)
}

// -----

pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("fc1.weight": tensor<4x8xf32>)
  // expected-error@+1 {{pipe-lower-programs: pipe.allreduce must run among the replicas of this device's stage, one per pipeline (devices s, p+s, 2p+s, ...)}}
  pipe.allreduce sum %w among [0, 1, 3]
  pipe.update %w sgd lr(0.1)
}

// -----

pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("fc1.weight": tensor<4x8xf32>)
  // expected-error@+1 {{pipe-lower-programs: anneal_steps counts the updates of a no-flush program (PipeMare)}}
  pipe.update %w sgd lr(0.1) lr_scale(0.5) anneal_steps(10)
}
