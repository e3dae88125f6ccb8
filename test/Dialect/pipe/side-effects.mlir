// RUN: pipe-opt %s --canonicalize --cse | FileCheck %s

// Instructions communicate and change persistent state: the generic cleanups
// must neither remove unused or duplicate ones nor merge them.

pipe.stage @fwd forward stage 0 params 1 (%w: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %y = "onnx.Add"(%x, %w) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  pipe.return %y : tensor<4xf32>
}

// CHECK-LABEL: pipe.program @device0
// CHECK-NEXT:    %[[W:.*]] = pipe.weight_buffer stage 0 versions 2
// CHECK-NEXT:    %[[X:.*]] = pipe.feed "x" mb 0
// CHECK-NEXT:    pipe.feed "x" mb 0
// CHECK-NEXT:    pipe.recv from 1 mb 0 tag "a"
// CHECK-NEXT:    pipe.recv from 1 mb 0 tag "a"
// CHECK-NEXT:    pipe.forward @fwd(%[[X]]) weights %[[W]][0] mb 0
// CHECK-NEXT:    pipe.forward @fwd(%[[X]]) weights %[[W]][0] mb 0
// CHECK-NEXT:    pipe.stash %[[W]][0] into 1
// CHECK-NEXT:    pipe.stash %[[W]][0] into 1
// CHECK-NEXT:    pipe.zero_grad %[[W]]
// CHECK-NEXT:    pipe.zero_grad %[[W]]
// CHECK-NEXT:  }
pipe.program @device0 device 0 stages [0] schedule "pipedream" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 2 ("w": tensor<4xf32>)
  %x = pipe.feed "x" mb 0 : tensor<4xf32>
  %x2 = pipe.feed "x" mb 0 : tensor<4xf32>
  %a = pipe.recv from 1 mb 0 tag "a" : tensor<4xf32>
  %a2 = pipe.recv from 1 mb 0 tag "a" : tensor<4xf32>
  %y = pipe.forward @fwd(%x) weights %w[0] mb 0 : (tensor<4xf32>) -> tensor<4xf32>
  %y2 = pipe.forward @fwd(%x) weights %w[0] mb 0 : (tensor<4xf32>) -> tensor<4xf32>
  pipe.stash %w[0] into 1
  pipe.stash %w[0] into 1
  pipe.zero_grad %w
  pipe.zero_grad %w
}

// An unused weight buffer is state the runtime allocates and saves: it stays.
// CHECK-LABEL: pipe.program @device1
// CHECK-NEXT:    pipe.weight_buffer stage 1 versions 1
// CHECK-NEXT:  }
pipe.program @device1 device 1 stages [1] schedule "pipedream" microbatches 1 {
  %w = pipe.weight_buffer stage 1 versions 1 ("v": tensor<4xf32>)
}
