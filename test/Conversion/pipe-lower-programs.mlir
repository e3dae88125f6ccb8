// RUN: pipe-opt %s --pipe-lower-programs="device=0 onnx-only=true" | FileCheck %s --check-prefix=DEV0
// RUN: pipe-opt %s --pipe-lower-programs="device=1 onnx-only=true" | FileCheck %s --check-prefix=DEV1
// RUN: pipe-opt %s --pipe-lower-programs="device=0" | FileCheck %s --check-prefix=RT0
// RUN: pipe-opt %s --pipe-lower-programs="device=1" | FileCheck %s --check-prefix=RT1
// RUN: pipe-opt %s --pipe-lower-programs="device=0 nonblocking-sends=true onnx-only=true" | FileCheck %s --check-prefix=NB0
// RUN: pipe-opt %s --pipe-lower-programs="device=0 nonblocking-sends=true" | FileCheck %s --check-prefix=NBRT0
// RUN: not pipe-opt %s --pipe-lower-programs 2>&1 | FileCheck %s --check-prefix=NODEV
// RUN: not pipe-opt %s --pipe-lower-programs="device=2" 2>&1 | FileCheck %s --check-prefix=NOPROG

// The 2-device 1F1B program of test/Dialect/pipe/roundtrip-1f1b.mlir (a linear
// model with an MSE loss, 2 micro-batches of 2 rows), lowered per device. The
// initial value of fc1.weight comes from the function that declares the
// parameter (the imported @forward); fc2.weight has none and starts at zero.

// NODEV: error: pipe-lower-programs: the module has 2 programs; pick the device to lower with device=<k>
// NOPROG: error: pipe-lower-programs: no pipe.program for device 2

// Device 0 feeds "x": its argument is the whole mini-batch (4 rows), sliced
// per micro-batch; the weight gradients of both backwards are summed, then
// one SGD update. Sends block (pipe.blocking) by default.
// DEV0-LABEL: func.func @train_step_device0(
// DEV0-SAME: %[[W:.*]]: tensor<4x8xf32> {pipe.init = dense<{{.*}}> : tensor<4x8xf32>, pipe.param = "fc1.weight", pipe.trainable}
// DEV0-SAME: %[[X:.*]]: tensor<4x4xf32> {pipe.input = "x"}
// DEV0-SAME: %[[STEP:.*]]: tensor<i64> {pipe.init = dense<0> : tensor<i64>, pipe.state = "step"}
// DEV0-SAME: -> (tensor<4x8xf32> {pipe.update = "fc1.weight"}, tensor<i64> {pipe.update = "step"})
// DEV0-SAME: attributes {pipe.device = 0 : i64, pipe.microbatches = 2 : i64}
// DEV0: %[[X0:.*]] = onnx.Slice(%[[X]], %{{.*}}) {{.*}} -> tensor<2x4xf32>
// DEV0: %[[H0:.*]] = onnx.MatMul(%[[X0]], %[[W]])
// DEV0: call @__pipe_send_tensor_2x8xf32_(%[[H0]]) {pipe.blocking, pipe.peer = 1 : i64, pipe.tag = [[TH0:[0-9]+]] : i64}
// DEV0: %[[X1:.*]] = onnx.Slice(%[[X]], %{{.*}}) {{.*}} -> tensor<2x4xf32>
// DEV0: %[[H1:.*]] = onnx.MatMul(%[[X1]], %[[W]])
// DEV0: call @__pipe_send_tensor_2x8xf32_(%[[H1]]) {pipe.blocking, pipe.peer = 1 : i64, pipe.tag = [[TH1:[0-9]+]] : i64}
// DEV0: %[[D0:.*]] = call @__pipe_recv_tensor_2x8xf32_() {pipe.peer = 1 : i64, pipe.tag = [[TG0:[0-9]+]] : i64}
// DEV0: %[[G0:.*]] = onnx.Gemm(%[[X0]], %[[D0]], %{{.*}}) {transA = 1 : i64}
// DEV0: %[[D1:.*]] = call @__pipe_recv_tensor_2x8xf32_() {pipe.peer = 1 : i64, pipe.tag = [[TG1:[0-9]+]] : i64}
// DEV0: %[[G1:.*]] = onnx.Gemm(%[[X1]], %[[D1]], %{{.*}}) {transA = 1 : i64}
// DEV0: %[[ACC:.*]] = onnx.Add(%[[G0]], %[[G1]])
// DEV0: %[[NEXT:.*]] = onnx.Add(%[[STEP]], %{{.*}}) : (tensor<i64>, tensor<i64>) -> tensor<i64>
// DEV0: %[[NEW:.*]] = onnx.SGD(%{{.*}}, %[[W]], %[[ACC]])
// DEV0: return %[[NEW]], %[[NEXT]] :

// Device 1 receives with the tags device 0 sends with (the same (tag, mb)),
// feeds "t", and returns the mean of the two micro-batch losses.
// DEV1-LABEL: func.func @train_step_device1(
// DEV1-SAME: %[[W:.*]]: tensor<8x3xf32> {pipe.param = "fc2.weight", pipe.trainable}
// DEV1-SAME: %[[T:.*]]: tensor<4x3xf32> {pipe.input = "t"}
// DEV1-SAME: -> (tensor<f32> {pipe.loss}, tensor<8x3xf32> {pipe.update = "fc2.weight"}, tensor<i64> {pipe.update = "step"})
// DEV1: %[[H0:.*]] = call @__pipe_recv_tensor_2x8xf32_() {pipe.peer = 0 : i64, pipe.tag = 30064 : i64}
// DEV1: %[[L0:.*]] = onnx.ReduceMean
// DEV1: %[[DH0:.*]] = onnx.Gemm({{.*}}) {transB = 1 : i64}
// DEV1: %[[G0:.*]] = onnx.Gemm(%[[H0]], {{.*}}) {transA = 1 : i64}
// DEV1: call @__pipe_send_tensor_2x8xf32_(%[[DH0]]) {pipe.blocking, pipe.peer = 0 : i64, pipe.tag = 24944 : i64}
// DEV1: %[[H1:.*]] = call @__pipe_recv_tensor_2x8xf32_() {pipe.peer = 0 : i64, pipe.tag = 30065 : i64}
// DEV1: %[[L1:.*]] = onnx.ReduceMean
// DEV1: %[[G1:.*]] = onnx.Gemm(%[[H1]], {{.*}}) {transA = 1 : i64}
// DEV1: %[[ACC:.*]] = onnx.Add(%[[G0]], %[[G1]])
// DEV1: call @__pipe_send_tensor_2x8xf32_({{.*}}) {pipe.blocking, pipe.peer = 0 : i64, pipe.tag = 24945 : i64}
// DEV1: onnx.SGD(%{{.*}}, %[[W]], %[[ACC]])
// DEV1: %[[SUM:.*]] = onnx.Add(%[[L0]], %[[L1]])
// DEV1: %[[HALF:.*]] = onnx.Constant {value = dense<5.000000e-01> : tensor<f32>}
// DEV1: %[[LOSS:.*]] = onnx.Mul(%[[SUM]], %[[HALF]])
// DEV1: return %[[LOSS]],

// Lowered: one @pipe_step per device, the transfers as runtime calls on the
// world communicator.
// RT0-NOT: pipe.program
// RT0-NOT: pipe.stage
// RT0: func.func @pipe_step(
// RT0-SAME: pipe.program = {has_loss = false
// RT0: %[[COMM:.*]] = call @pipert_comm_world(
// RT0: call @pipert_send(%{{.*}}, %[[COMM]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i32, i32, i32) -> ()
// RT0: call @pipert_send(
// RT0: call @pipert_recv(
// RT0: call @pipert_recv(
// RT0: call @pipert_sgd_f32(
// RT0-NOT: pipert_isend
// RT0-NOT: pipert_wait_all
// RT0: return
// RT0-NOT: __pipe_

// RT1: func.func @pipe_step(
// RT1-SAME: pipe.program = {has_loss = true
// RT1: call @pipert_recv(
// RT1: call @pipert_send(
// RT1: call @pipert_recv(
// RT1: call @pipert_send(
// RT1: call @pipert_sgd_f32(
// RT1: call @pipert_copy_to_host(
// RT1-NOT: __pipe_

// Non-blocking sends: the sent activations are returned (pipe.sent), so
// that their buffers live until the sends are waited for at the end of the
// step, before the buffers are freed.
// NB0: func.func @train_step_device0(
// NB0-SAME: -> (tensor<4x8xf32> {pipe.update = "fc1.weight"}, tensor<i64> {pipe.update = "step"}, tensor<2x8xf32> {pipe.sent}, tensor<2x8xf32> {pipe.sent})
// NB0: %[[H0:.*]] = onnx.MatMul
// NB0: call @__pipe_send_tensor_2x8xf32_(%[[H0]]) {pipe.peer = 1 : i64, pipe.tag = {{[0-9]+}} : i64}
// NB0: %[[H1:.*]] = onnx.MatMul
// NB0: return %{{.*}}, %{{.*}}, %[[H0]], %[[H1]] :

// NBRT0: func.func @pipe_step(
// NBRT0: %[[R0:.*]] = call @pipert_isend(
// NBRT0: %[[R1:.*]] = call @pipert_isend(
// NBRT0: call @pipert_recv(
// NBRT0: call @pipert_sgd_f32(
// NBRT0: call @pipert_wait_all(
// NBRT0-NOT: call @pipert_isend
// NBRT0: call @pipert_free(
// NBRT0: return

func.func @forward(%x: tensor<2x4xf32> {pipe.input = "x"},
                   %w: tensor<4x8xf32> {pipe.param = "fc1.weight", pipe.trainable,
                                        pipe.init = dense<0.5> : tensor<4x8xf32>})
    -> tensor<2x8xf32> {
  %h = "onnx.MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  return %h : tensor<2x8xf32>
}
pipe.stage @s0_fwd forward stage 0 params 1 (%w: tensor<4x8xf32>, %x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %h = "onnx.MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  pipe.return %h : tensor<2x8xf32>
}

// Stage 0 holds the input: its backward returns the weight gradient only.
pipe.stage @s0_bwd backward stage 0 params 1 (%w: tensor<4x8xf32>, %x: tensor<2x4xf32>, %dh: tensor<2x8xf32>) -> tensor<4x8xf32> {
  %none = "onnx.NoValue"() : () -> none
  %dw = "onnx.Gemm"(%x, %dh, %none) {transA = 1 : i64} : (tensor<2x4xf32>, tensor<2x8xf32>, none) -> tensor<4x8xf32>
  pipe.return %dw : tensor<4x8xf32>
}

// The forward of the last stage returns the loss and what its backward needs.
pipe.stage @s1_fwd forward stage 1 params 1 (%w: tensor<8x3xf32>, %h: tensor<2x8xf32>, %t: tensor<2x3xf32>) -> (tensor<f32>, tensor<2x3xf32>) {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.MatMul"(%h, %w) : (tensor<2x8xf32>, tensor<8x3xf32>) -> tensor<2x3xf32>
  %d = "onnx.Sub"(%y, %t) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %sq = "onnx.Mul"(%d, %d) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %loss = "onnx.ReduceMean"(%sq, %none) {keepdims = 0 : i64} : (tensor<2x3xf32>, none) -> tensor<f32>
  pipe.return %loss, %d : tensor<f32>, tensor<2x3xf32>
}

pipe.stage @s1_bwd backward stage 1 params 1 (%w: tensor<8x3xf32>, %h: tensor<2x8xf32>, %d: tensor<2x3xf32>) -> (tensor<2x8xf32>, tensor<8x3xf32>) {
  %none = "onnx.NoValue"() : () -> none
  // d(mean of 2x3 squares)/dy = 2d/6, and the step loss is the mean over 2 micro-batches.
  %c = "onnx.Constant"() {value = dense<0.166666672> : tensor<f32>} : () -> tensor<f32>
  %g = "onnx.Mul"(%d, %c) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %dh = "onnx.Gemm"(%g, %w, %none) {transB = 1 : i64} : (tensor<2x3xf32>, tensor<8x3xf32>, none) -> tensor<2x8xf32>
  %dw = "onnx.Gemm"(%h, %g, %none) {transA = 1 : i64} : (tensor<2x8xf32>, tensor<2x3xf32>, none) -> tensor<8x3xf32>
  pipe.return %dh, %dw : tensor<2x8xf32>, tensor<8x3xf32>
}

// Stage 0: one warm-up forward, one forward-backward pair, one drain backward.
pipe.program @device0 device 0 stages [0] schedule "1f1b" microbatches 2 {
  %w = pipe.weight_buffer stage 0 versions 1 ("fc1.weight": tensor<4x8xf32>)
  pipe.zero_grad %w
  %x0 = pipe.feed "x" mb 0 : tensor<2x4xf32>
  %h0 = pipe.forward @s0_fwd(%x0) weights %w[0] mb 0 : (tensor<2x4xf32>) -> tensor<2x8xf32>
  pipe.send %h0 to 1 mb 0 tag "h" : tensor<2x8xf32>
  %x1 = pipe.feed "x" mb 1 : tensor<2x4xf32>
  %h1 = pipe.forward @s0_fwd(%x1) weights %w[0] mb 1 : (tensor<2x4xf32>) -> tensor<2x8xf32>
  pipe.send %h1 to 1 mb 1 tag "h" : tensor<2x8xf32>
  %dh0 = pipe.recv from 1 mb 0 tag "h.grad" : tensor<2x8xf32>
  pipe.backward @s0_bwd(%x0, %dh0) weights %w[0] mb 0 : (tensor<2x4xf32>, tensor<2x8xf32>) -> ()
  %dh1 = pipe.recv from 1 mb 1 tag "h.grad" : tensor<2x8xf32>
  pipe.backward @s0_bwd(%x1, %dh1) weights %w[0] mb 1 : (tensor<2x4xf32>, tensor<2x8xf32>) -> ()
  pipe.update %w sgd lr(0.1)
}

// Stage 1 (the last): no warm-up, forward and backward alternate.
pipe.program @device1 device 1 stages [1] schedule "1f1b" microbatches 2 {
  %w = pipe.weight_buffer stage 1 versions 1 ("fc2.weight": tensor<8x3xf32>)
  pipe.zero_grad %w
  %h0 = pipe.recv from 0 mb 0 tag "h" : tensor<2x8xf32>
  %t0 = pipe.feed "t" mb 0 : tensor<2x3xf32>
  %l0, %d0 = pipe.forward @s1_fwd(%h0, %t0) weights %w[0] mb 0 : (tensor<2x8xf32>, tensor<2x3xf32>) -> (tensor<f32>, tensor<2x3xf32>)
  pipe.report_loss %l0 mb 0 : tensor<f32>
  %dh0 = pipe.backward @s1_bwd(%h0, %d0) weights %w[0] mb 0 : (tensor<2x8xf32>, tensor<2x3xf32>) -> tensor<2x8xf32>
  pipe.send %dh0 to 0 mb 0 tag "h.grad" : tensor<2x8xf32>
  %h1 = pipe.recv from 0 mb 1 tag "h" : tensor<2x8xf32>
  %t1 = pipe.feed "t" mb 1 : tensor<2x3xf32>
  %l1, %d1 = pipe.forward @s1_fwd(%h1, %t1) weights %w[0] mb 1 : (tensor<2x8xf32>, tensor<2x3xf32>) -> (tensor<f32>, tensor<2x3xf32>)
  pipe.report_loss %l1 mb 1 : tensor<f32>
  %dh1 = pipe.backward @s1_bwd(%h1, %d1) weights %w[0] mb 1 : (tensor<2x8xf32>, tensor<2x3xf32>) -> tensor<2x8xf32>
  pipe.send %dh1 to 0 mb 1 tag "h.grad" : tensor<2x8xf32>
  pipe.update %w sgd lr(0.1)
}
