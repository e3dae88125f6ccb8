// RUN: pipe-opt %s --pipe-insert-transfers | FileCheck %s
// RUN: pipe-opt %s --pipe-insert-transfers --pipe-schedule="kind=gpipe microbatches=2 loop=false" | pipe-opt --pipe-verify-schedule | FileCheck %s --check-prefix=SCHED
// RUN: not pipe-opt %s --pipe-schedule="kind=gpipe microbatches=2" 2>&1 | FileCheck %s --check-prefix=UNRELAYED

// Three stages (pipe-split-stages output for the model: h = x w1 on stage 0;
// t = tanh h, u = t w2 on stage 1; z = u + h, q = z w1^T (w1 tied, owned by
// stage 0), loss = mean((q - x)^2) on stage 2). Stage 2 reads "h" and "w1"
// from stage 0: stage 1 relays them as "h.s1" / "w1.s1", takes "w1" though
// its own forward does not use it, and in its backward adds the gradient of
// "h.s1" to its own gradient of "h" and passes that of "w1.s1" on as "w1".
// CHECK-LABEL: module attributes
// CHECK-SAME: pipe.transfers = [
// CHECK-SAME: {bytes = 40 : i64, from = 0 : i64, phase = "forward", tag = "h", to = 1 : i64, type = tensor<2x5xf32>},
// CHECK-SAME: {bytes = 60 : i64, from = 0 : i64, phase = "forward", tag = "w1", to = 1 : i64, type = tensor<3x5xf32>},
// CHECK-SAME: {bytes = 40 : i64, from = 1 : i64, phase = "backward", tag = "h.grad", to = 0 : i64, type = tensor<2x5xf32>},
// CHECK-SAME: {bytes = 60 : i64, from = 1 : i64, phase = "backward", tag = "w1.grad", to = 0 : i64, type = tensor<3x5xf32>},
// CHECK-SAME: {bytes = 40 : i64, from = 1 : i64, phase = "forward", tag = "u", to = 2 : i64, type = tensor<2x5xf32>},
// CHECK-SAME: {bytes = 40 : i64, from = 1 : i64, phase = "forward", tag = "h.s1", to = 2 : i64, type = tensor<2x5xf32>},
// CHECK-SAME: {bytes = 60 : i64, from = 1 : i64, phase = "forward", tag = "w1.s1", to = 2 : i64, type = tensor<3x5xf32>},
// CHECK-SAME: {bytes = 40 : i64, from = 2 : i64, phase = "backward", tag = "h.s1.grad", to = 1 : i64, type = tensor<2x5xf32>},
// CHECK-SAME: {bytes = 60 : i64, from = 2 : i64, phase = "backward", tag = "w1.s1.grad", to = 1 : i64, type = tensor<3x5xf32>},
// CHECK-SAME: {bytes = 40 : i64, from = 2 : i64, phase = "backward", tag = "u.grad", to = 1 : i64, type = tensor<2x5xf32>}]
// CHECK: pipe.stage @s0_fwd forward stage 0 params 1 (%arg0: tensor<3x5xf32> {pipe.param = "w1"}, %arg1: tensor<2x3xf32> {pipe.input = "x"}) -> (tensor<2x5xf32> {pipe.name = "h"}, tensor<3x5xf32> {pipe.name = "w1"})
// CHECK: pipe.stage @s1_fwd forward stage 1 params 1 (%arg0: tensor<5x5xf32> {pipe.param = "w2"}, %arg1: tensor<2x5xf32> {pipe.name = "h"}, %arg2: tensor<3x5xf32> {pipe.name = "w1"}) -> (tensor<2x5xf32> {pipe.name = "u"}, tensor<2x5xf32> {pipe.name = "t"}, tensor<2x5xf32> {pipe.name = "h.s1"}, tensor<3x5xf32> {pipe.name = "w1.s1"})
// CHECK:         pipe.return %{{.*}}, %{{.*}}, %arg1, %arg2 :
// CHECK: pipe.stage @s1_bwd backward stage 1 params 1 (%arg0: tensor<5x5xf32> {pipe.param = "w2"}, %arg1: tensor<2x5xf32> {pipe.grad = "u"}, %arg2: tensor<2x5xf32> {pipe.name = "t"}, %arg3: tensor<2x5xf32> {pipe.grad = "h.s1"}, %arg4: tensor<3x5xf32> {pipe.grad = "w1.s1"}) -> (tensor<2x5xf32> {pipe.grad = "h"}, tensor<3x5xf32> {pipe.grad = "w1"}, tensor<5x5xf32>)
// CHECK:         %[[OWN:.*]] = onnx.TanhGrad
// CHECK-NEXT:    %[[SUM:.*]] = onnx.Add(%[[OWN]], %arg3) {pipe.stage = 1 : i64}
// CHECK-NEXT:    pipe.return %[[SUM]], %arg4, %{{.*}} :
// CHECK: pipe.stage @s2_fwd forward stage 2 (%arg0: tensor<2x5xf32> {pipe.name = "u"}, %arg1: tensor<2x5xf32> {pipe.name = "h.s1"}, %arg2: tensor<3x5xf32> {pipe.name = "w1.s1"}, %arg3: tensor<2x3xf32> {pipe.input = "x"})
// CHECK: pipe.stage @s2_bwd backward stage 2 ({{.*}}) -> (tensor<2x5xf32> {pipe.grad = "h.s1"}, tensor<3x5xf32> {pipe.grad = "w1.s1"}, tensor<2x5xf32> {pipe.grad = "u"})

// SCHED-LABEL: pipe.program @device0
// SCHED:   pipe.send %{{.*}} to 1 mb 0 tag "w1" : tensor<3x5xf32>
// SCHED:   pipe.recv from 1 mb 0 tag "w1.grad" : tensor<3x5xf32>
// SCHED:   pipe.update %{{.*}} momentum lr(5.000000e-02) momentum(9.000000e-01)
// SCHED-LABEL: pipe.program @device1
// SCHED:   pipe.send %{{.*}} to 2 mb 0 tag "w1.s1" : tensor<3x5xf32>
// SCHED-LABEL: pipe.program @device2

// Without the relays the schedule is refused.
// UNRELAYED: error: @s2_fwd takes 'h', which forward @s1_fwd of stage 1 does not return

module attributes {pipe.batch_size = 4 : i64, pipe.loss_combine = "mean", pipe.loss_scale = 5.000000e-01 : f64, pipe.microbatches = 2 : i64, pipe.optimizer = {dampening = 0.000000e+00 : f64, kind = "momentum", lr = 5.000000e-02 : f64, momentum = 9.000000e-01 : f64, weight_decay = 0.000000e+00 : f64}} {
  pipe.stage @s0_fwd forward stage 0 params 1 (%arg0: tensor<3x5xf32> {pipe.param = "w1"}, %arg1: tensor<2x3xf32> {pipe.input = "x"}) -> (tensor<2x5xf32> {pipe.name = "h"}, tensor<3x5xf32> {pipe.name = "w1"}) {
    %0 = onnx.MatMul(%arg1, %arg0) {pipe.stage = 0 : i64} : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
    pipe.return %0, %arg0 : tensor<2x5xf32>, tensor<3x5xf32>
  }
  pipe.stage @s0_bwd backward stage 0 params 1 (%arg0: tensor<3x5xf32> {pipe.param = "w1"}, %arg1: tensor<2x5xf32> {pipe.grad = "h"}, %arg2: tensor<2x3xf32> {pipe.input = "x"}, %arg3: tensor<3x5xf32> {pipe.grad = "w1"}) -> tensor<3x5xf32> {
    %0 = onnx.Transpose(%arg2) {perm = array<i64: 1, 0>, pipe.stage = 0 : i64} : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %1 = onnx.MatMul(%0, %arg1) {pipe.stage = 0 : i64} : (tensor<3x2xf32>, tensor<2x5xf32>) -> tensor<3x5xf32>
    %2 = onnx.Add(%arg3, %1) {pipe.stage = 0 : i64} : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
    pipe.return %2 : tensor<3x5xf32>
  }
  pipe.stage @s1_fwd forward stage 1 params 1 (%arg0: tensor<5x5xf32> {pipe.param = "w2"}, %arg1: tensor<2x5xf32> {pipe.name = "h"}) -> (tensor<2x5xf32> {pipe.name = "u"}, tensor<2x5xf32> {pipe.name = "t"}) {
    %0 = onnx.Tanh(%arg1) {pipe.stage = 1 : i64} : (tensor<2x5xf32>) -> tensor<2x5xf32>
    %1 = onnx.MatMul(%0, %arg0) {pipe.stage = 1 : i64} : (tensor<2x5xf32>, tensor<5x5xf32>) -> tensor<2x5xf32>
    pipe.return %1, %0 : tensor<2x5xf32>, tensor<2x5xf32>
  }
  pipe.stage @s1_bwd backward stage 1 params 1 (%arg0: tensor<5x5xf32> {pipe.param = "w2"}, %arg1: tensor<2x5xf32> {pipe.grad = "u"}, %arg2: tensor<2x5xf32> {pipe.name = "t"}) -> (tensor<2x5xf32> {pipe.grad = "h"}, tensor<5x5xf32>) {
    %0 = onnx.Transpose(%arg0) {perm = array<i64: 1, 0>, pipe.stage = 1 : i64} : (tensor<5x5xf32>) -> tensor<5x5xf32>
    %1 = onnx.MatMul(%arg1, %0) {pipe.stage = 1 : i64} : (tensor<2x5xf32>, tensor<5x5xf32>) -> tensor<2x5xf32>
    %2 = onnx.Transpose(%arg2) {perm = array<i64: 1, 0>, pipe.stage = 1 : i64} : (tensor<2x5xf32>) -> tensor<5x2xf32>
    %3 = onnx.MatMul(%2, %arg1) {pipe.stage = 1 : i64} : (tensor<5x2xf32>, tensor<2x5xf32>) -> tensor<5x5xf32>
    %4 = onnx.TanhGrad(%arg2, %1) {pipe.stage = 1 : i64} : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
    pipe.return %4, %3 : tensor<2x5xf32>, tensor<5x5xf32>
  }
  pipe.stage @s2_fwd forward stage 2 (%arg0: tensor<2x5xf32> {pipe.name = "u"}, %arg1: tensor<2x5xf32> {pipe.name = "h"}, %arg2: tensor<3x5xf32> {pipe.name = "w1"}, %arg3: tensor<2x3xf32> {pipe.input = "x"}) -> (tensor<f32> {pipe.loss}, tensor<2x3xf32> {pipe.name = "d"}, tensor<5x3xf32> {pipe.name = "wt"}, tensor<2x5xf32> {pipe.name = "z"}) {
    %0 = onnx.Add(%arg0, %arg1) {pipe.stage = 2 : i64} : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
    %1 = onnx.Transpose(%arg2) {perm = array<i64: 1, 0>, pipe.stage = 2 : i64} : (tensor<3x5xf32>) -> tensor<5x3xf32>
    %2 = onnx.MatMul(%0, %1) {pipe.stage = 2 : i64} : (tensor<2x5xf32>, tensor<5x3xf32>) -> tensor<2x3xf32>
    %3 = onnx.Sub(%2, %arg3) {pipe.stage = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %4 = onnx.Mul(%3, %3) {pipe.stage = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %5 = onnx.NoValue {pipe.stage = 2 : i64} : none
    %6 = onnx.ReduceMean(%4, %5) {keepdims = 0 : i64, pipe.stage = 2 : i64} : (tensor<2x3xf32>, none) -> tensor<f32>
    pipe.return %6, %3, %1, %0 : tensor<f32>, tensor<2x3xf32>, tensor<5x3xf32>, tensor<2x5xf32>
  }
  pipe.stage @s2_bwd backward stage 2 (%arg0: tensor<2x3xf32> {pipe.name = "d"}, %arg1: tensor<5x3xf32> {pipe.name = "wt"}, %arg2: tensor<2x5xf32> {pipe.name = "z"}) -> (tensor<2x5xf32> {pipe.grad = "h"}, tensor<3x5xf32> {pipe.grad = "w1"}, tensor<2x5xf32> {pipe.grad = "u"}) {
    %0 = onnx.Constant {pipe.stage = 2 : i64, value = dense<1.000000e+00> : tensor<f32>} : tensor<f32>
    %1 = onnx.Constant {pipe.stage = 2 : i64, value = dense<1> : tensor<2xi64>} : tensor<2xi64>
    %2 = onnx.Reshape(%0, %1) {pipe.stage = 2 : i64} : (tensor<f32>, tensor<2xi64>) -> tensor<1x1xf32>
    %3 = onnx.Constant {pipe.stage = 2 : i64, value = dense<0.0833333358> : tensor<f32>} : tensor<f32>
    %4 = onnx.Mul(%2, %3) {pipe.stage = 2 : i64} : (tensor<1x1xf32>, tensor<f32>) -> tensor<1x1xf32>
    %5 = onnx.Constant {pipe.stage = 2 : i64, value = dense<[2, 3]> : tensor<2xi64>} : tensor<2xi64>
    %6 = onnx.Expand(%4, %5) {pipe.stage = 2 : i64} : (tensor<1x1xf32>, tensor<2xi64>) -> tensor<2x3xf32>
    %7 = onnx.Mul(%6, %arg0) {pipe.stage = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %8 = onnx.Mul(%6, %arg0) {pipe.stage = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %9 = onnx.Add(%7, %8) {pipe.stage = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %10 = onnx.Transpose(%arg1) {perm = array<i64: 1, 0>, pipe.stage = 2 : i64} : (tensor<5x3xf32>) -> tensor<3x5xf32>
    %11 = onnx.MatMul(%9, %10) {pipe.stage = 2 : i64} : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
    %12 = onnx.Transpose(%arg2) {perm = array<i64: 1, 0>, pipe.stage = 2 : i64} : (tensor<2x5xf32>) -> tensor<5x2xf32>
    %13 = onnx.MatMul(%12, %9) {pipe.stage = 2 : i64} : (tensor<5x2xf32>, tensor<2x3xf32>) -> tensor<5x3xf32>
    %14 = onnx.Transpose(%13) {perm = array<i64: 1, 0>, pipe.stage = 2 : i64} : (tensor<5x3xf32>) -> tensor<3x5xf32>
    pipe.return %11, %14, %11 : tensor<2x5xf32>, tensor<3x5xf32>, tensor<2x5xf32>
  }
}

