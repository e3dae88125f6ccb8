// RUN: pipe-opt %s --split-input-file --pipe-lower-programs="device=0" 2>&1 | FileCheck %s --check-prefix=DEV0
// RUN: not pipe-opt %s --split-input-file --pipe-lower-programs="device=1" 2>&1 | FileCheck %s --check-prefix=DEV1
// RUN: not pipe-opt %s --split-input-file --pipe-lower-programs="device=0 nonblocking-sends=true" 2>&1 | FileCheck %s --check-prefix=NB0

// Transfers marked pipe.pack_next (pipe-pack-transfers) go as one message:
// the sender gathers both values (pointer array, sizes 32 and 16 bytes), the
// receiver posts one receive that scatters into both values' buffers (the
// second one's slot of its activation buffer) and waits for it once.
// DEV0-LABEL: func.func @pipe_step(
// DEV0: llvm.store %c32_i64, %{{.*}} : i64, !llvm.ptr
// DEV0: llvm.store %c16_i64, %{{.*}} : i64, !llvm.ptr
// DEV0: call @__pipe_s0_fwd(
// DEV0-NOT: call @pipert_send(
// DEV0: call @pipert_send_packed(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c2_i32{{.*}}, %c1_i32{{.*}}, %{{.*}})
// DEV0-NOT: call @pipert_send
// DEV0: return
// DEV1-LABEL: func.func @pipe_step(
// DEV1: %[[REQ:.*]] = call @pipert_irecv_packed(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c2_i32{{.*}}, %c0_i32{{.*}}, %{{.*}})
// DEV1-NOT: call @pipert_irecv
// DEV1: call @pipert_wait(%{{.*}}, %[[REQ]])
// DEV1-NOT: call @pipert_wait
// DEV1: call @__pipe_s1_fwd(
// Non-blocking sends (straight-line programs) have no packed form: the
// marks are refused in one line.
// NB0: error: pipe-lower-programs: nonblocking-sends cannot lower a transfer marked pipe.pack_next

pipe.stage @s0_fwd forward stage 0 params 0 (%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x2xf32>) {
  %n = "onnx.Neg"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %shape = "onnx.Constant"() {value = dense<[2, 2, 2]> : tensor<3xi64>} : () -> tensor<3xi64>
  %r = "onnx.Reshape"(%x, %shape) : (tensor<2x4xf32>, tensor<3xi64>) -> tensor<2x2x2xf32>
  %axes = "onnx.Constant"() {value = dense<[2]> : tensor<1xi64>} : () -> tensor<1xi64>
  %t = "onnx.ReduceMean"(%r, %axes) {keepdims = 0 : i64} : (tensor<2x2x2xf32>, tensor<1xi64>) -> tensor<2x2xf32>
  pipe.return %n, %t : tensor<2x4xf32>, tensor<2x2xf32>
}
pipe.stage @s1_fwd forward stage 1 params 0 (%a: tensor<2x4xf32>, %b: tensor<2x2xf32>) -> tensor<f32> {
  %none = "onnx.NoValue"() : () -> none
  %l = "onnx.ReduceMean"(%a, %none) {keepdims = 0 : i64} : (tensor<2x4xf32>, none) -> tensor<f32>
  %m = "onnx.ReduceMean"(%b, %none) {keepdims = 0 : i64} : (tensor<2x2xf32>, none) -> tensor<f32>
  %s = "onnx.Add"(%l, %m) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  pipe.return %s : tensor<f32>
}
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 1 {
  %x = pipe.feed "x" mb 0 : tensor<2x4xf32>
  %y:2 = pipe.forward @s0_fwd(%x) mb 0 : (tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x2xf32>)
  pipe.send %y#0 to 1 mb 0 tag "a" {pipe.pack_next} : tensor<2x4xf32>
  pipe.send %y#1 to 1 mb 0 tag "b" : tensor<2x2xf32>
}
pipe.program @device1 device 1 stages [1] schedule "gpipe" microbatches 1 {
  %act = pipe.activation_buffer "b" depth 1 : tensor<2x2xf32>
  %a = pipe.recv from 0 mb 0 tag "a" {pipe.pack_next} : tensor<2x4xf32>
  %b = pipe.recv from 0 mb 0 tag "b" : tensor<2x2xf32>
  pipe.save %b into %act mb 0 : tensor<2x2xf32>
  %c = pipe.restore %act mb 0 : tensor<2x2xf32>
  %l = pipe.forward @s1_fwd(%a, %c) mb 0 : (tensor<2x4xf32>, tensor<2x2xf32>) -> tensor<f32>
  pipe.report_loss %l mb 0 : tensor<f32>
}

// -----

// A mark that no longer has a transfer to travel with (the program changed
// after pipe-pack-transfers): refused, since the peer packs what the marks
// say.
// DEV0-LABEL: func.func @pipe_step(
// DEV1: error: pipe-lower-programs: this transfer is marked pipe.pack_next but no transfer to the same peer for the same micro-batch follows it
pipe.stage @s1_fwd forward stage 1 params 0 (%a: tensor<2x4xf32>) -> tensor<f32> {
  %none = "onnx.NoValue"() : () -> none
  %l = "onnx.ReduceMean"(%a, %none) {keepdims = 0 : i64} : (tensor<2x4xf32>, none) -> tensor<f32>
  pipe.return %l : tensor<f32>
}
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 1 {
  %x = pipe.feed "x" mb 0 : tensor<2x4xf32>
  pipe.send %x to 1 mb 0 tag "a" : tensor<2x4xf32>
}
pipe.program @device1 device 1 stages [1] schedule "gpipe" microbatches 1 {
  %a = pipe.recv from 0 mb 0 tag "a" {pipe.pack_next} : tensor<2x4xf32>
  %l = pipe.forward @s1_fwd(%a) mb 0 : (tensor<2x4xf32>) -> tensor<f32>
  pipe.report_loss %l mb 0 : tensor<f32>
}
