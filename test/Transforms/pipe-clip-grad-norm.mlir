// Gradient clipping by the global norm in the programs: pipe-schedule puts
// pipe.clip_grad_norm before every device's update, among the devices of
// its pipeline (after the replicas' allreduce); pipe-verify-schedule treats
// it as a collective, the op's verifier checks its form.
//
// RUN: pipe-opt %S/Inputs/schedule-p3.mlir --pipe-schedule="kind=1f1b microbatches=2 optimizer=sgd lr=0.1 clip-grad-norm=1.5" | pipe-opt --pipe-verify-schedule | FileCheck %s --check-prefix=SCHED
// SCHED-LABEL: pipe.program @device0
// SCHED: pipe.clip_grad_norm %{{.*}} max(1.500000e+00) among [0, 1, 2]
// SCHED-NEXT: pipe.update
// SCHED-LABEL: pipe.program @device1
// SCHED: pipe.clip_grad_norm %{{.*}} max(1.500000e+00) among [0, 1, 2]
// SCHED-NEXT: pipe.update
// SCHED-LABEL: pipe.program @device2
// SCHED: pipe.clip_grad_norm %{{.*}} max(1.500000e+00) among [0, 1, 2]
// SCHED-NEXT: pipe.update
//
// The module's pipe.optimizer entry does the same (what pipe-compile's
// --clip-grad-norm reaches pipe-schedule with).
// RUN: sed 's/lr = 1.000000e-01 : f64}/lr = 1.000000e-01 : f64, clip_grad_norm = 2.5 : f64}/' %S/Inputs/schedule-p3.mlir | pipe-opt --pipe-schedule="kind=gpipe microbatches=2" --pipe-verify-schedule | FileCheck %s --check-prefix=ATTR
// ATTR-COUNT-3: pipe.clip_grad_norm %{{.*}} max(2.500000e+00) among [0, 1, 2]
//
// Data-parallel pipelines average first, then each pipeline clips among its
// own devices.
// RUN: pipe-opt %S/Inputs/schedule-p2.mlir --pipe-schedule="kind=1f1b microbatches=2 optimizer=sgd lr=0.1 clip-grad-norm=1 pipelines=2" --pipe-verify-schedule | FileCheck %s --check-prefix=DP
// DP-LABEL: pipe.program @device0
// DP: pipe.allreduce mean %{{.*}} among [0, 2]
// DP-NEXT: pipe.clip_grad_norm %{{.*}} among [0, 1]
// DP-NEXT: pipe.update
// DP-LABEL: pipe.program @device3
// DP: pipe.allreduce mean %{{.*}} among [1, 3]
// DP-NEXT: pipe.clip_grad_norm %{{.*}} among [2, 3]
// DP-NEXT: pipe.update
//
// AvgPipe: each pipeline clips its own gradient, then updates, then
// averages.
// RUN: pipe-opt %S/Inputs/schedule-p2.mlir --pipe-schedule="kind=1f1b microbatches=2 optimizer=sgd lr=0.1 clip-grad-norm=1 pipelines=2 replication=avgpipe" --pipe-verify-schedule | FileCheck %s --check-prefix=AVG
// AVG-LABEL: pipe.program @device2
// AVG: pipe.clip_grad_norm %{{.*}} among [2, 3]
// AVG-NEXT: pipe.update
// AVG-NEXT: pipe.average
//
// No step-wide gradient to clip: the no-flush methods refuse.
// RUN: not pipe-opt %S/Inputs/schedule-p2.mlir --pipe-schedule="kind=pipedream microbatches=2 optimizer=sgd lr=0.1 clip-grad-norm=1" 2>&1 | FileCheck %s --check-prefix=NOFLUSH
// NOFLUSH: error: pipe-schedule: pipedream updates its stages at different times, so there is no step-wide gradient to clip by its global norm
// RUN: not pipe-opt %S/Inputs/schedule-p2.mlir --pipe-schedule="kind=1f1b microbatches=2 optimizer=sgd lr=0.1 clip-grad-norm=-1" 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: error: pipe-schedule: clip-grad-norm=-1{{.*}} must be a finite number > 0 (0: off)
//
// RUN: pipe-opt %s --split-input-file -verify-diagnostics --pipe-verify-schedule

// Device 0 clips with its weights, device 1 (no weights) takes part with
// none: it verifies.
pipe.stage @f0 forward stage 0 params 1 (%w: tensor<2xf32> {pipe.param = "w"}, %x: tensor<2xf32> {pipe.input = "x"}) -> (tensor<2xf32> {pipe.name = "h"}) {
  %y = onnx.Mul(%w, %x) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  pipe.return %y : tensor<2xf32>
}
pipe.stage @b0 backward stage 0 params 1 (%w: tensor<2xf32>, %x: tensor<2xf32> {pipe.input = "x"}, %d: tensor<2xf32> {pipe.grad = "h"}) -> tensor<2xf32> {
  %g = onnx.Mul(%d, %x) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  pipe.return %g : tensor<2xf32>
}
pipe.stage @f1 forward stage 1 (%h: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %h : tensor<2xf32>
}
pipe.stage @b1 backward stage 1 (%h: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %h : tensor<2xf32>
}
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  pipe.zero_grad %w
  %x0 = pipe.feed "x" mb 0 : tensor<2xf32>
  %h0 = pipe.forward @f0(%x0) weights %w[0] mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.send %h0 to 1 mb 0 tag "h" : tensor<2xf32>
  %d0 = pipe.recv from 1 mb 0 tag "h.grad" : tensor<2xf32>
  pipe.backward @b0(%x0, %d0) weights %w[0] mb 0 : (tensor<2xf32>, tensor<2xf32>) -> ()
  pipe.clip_grad_norm %w max(1.0) among [0, 1]
  pipe.update %w sgd lr(1.000000e-01)
}
pipe.program @device1 device 1 stages [1] schedule "gpipe" microbatches 1 {
  %h0 = pipe.recv from 0 mb 0 tag "h" : tensor<2xf32>
  %y0 = pipe.forward @f1(%h0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  %d0 = pipe.backward @b1(%y0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.send %d0 to 0 mb 0 tag "h.grad" : tensor<2xf32>
  pipe.clip_grad_norm max(1.0) among [0, 1]
}

// -----

// Device 0 clips before it sends the activation device 1 waits for: the
// collective waits for device 1, which waits for device 0.
pipe.stage @f0 forward stage 0 (%x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.stage @b0 backward stage 0 (%x: tensor<2xf32>, %d: tensor<2xf32>) -> () {
  pipe.return
}
pipe.stage @f1 forward stage 1 (%h: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %h : tensor<2xf32>
}
pipe.stage @b1 backward stage 1 (%h: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %h : tensor<2xf32>
}
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 1 {
  %x0 = pipe.feed "x" mb 0 : tensor<2xf32>
  %h0 = pipe.forward @f0(%x0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  // expected-error@+1 {{deadlock: device 0 waits in this pipe.clip_grad_norm among [0, 1], while device 1 waits in its recv of mb 0 tag "h" from device 0}}
  pipe.clip_grad_norm max(1.0) among [0, 1]
  pipe.send %h0 to 1 mb 0 tag "h" : tensor<2xf32>
  %d0 = pipe.recv from 1 mb 0 tag "h.grad" : tensor<2xf32>
  pipe.backward @b0(%x0, %d0) mb 0 : (tensor<2xf32>, tensor<2xf32>) -> ()
}
pipe.program @device1 device 1 stages [1] schedule "gpipe" microbatches 1 {
  // expected-note@+1 {{device 1 waits here}}
  %h0 = pipe.recv from 0 mb 0 tag "h" : tensor<2xf32>
  %y0 = pipe.forward @f1(%h0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  %d0 = pipe.backward @b1(%y0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.send %d0 to 0 mb 0 tag "h.grad" : tensor<2xf32>
  pipe.clip_grad_norm max(1.0) among [0, 1]
}

// -----

// The members of one clipping disagree on its bound.
pipe.stage @f0 forward stage 0 (%x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.stage @b0 backward stage 0 (%x: tensor<2xf32>, %d: tensor<2xf32>) -> () {
  pipe.return
}
pipe.stage @f1 forward stage 1 (%h: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %h : tensor<2xf32>
}
pipe.stage @b1 backward stage 1 (%h: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %h : tensor<2xf32>
}
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 1 {
  %x0 = pipe.feed "x" mb 0 : tensor<2xf32>
  %h0 = pipe.forward @f0(%x0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.send %h0 to 1 mb 0 tag "h" : tensor<2xf32>
  %d0 = pipe.recv from 1 mb 0 tag "h.grad" : tensor<2xf32>
  pipe.backward @b0(%x0, %d0) mb 0 : (tensor<2xf32>, tensor<2xf32>) -> ()
  // expected-error@+1 {{this pipe.clip_grad_norm among [0, 1] (max 1.000000e+00) does not match device 1's (max 2.000000e+00)}}
  pipe.clip_grad_norm max(1.0) among [0, 1]
}
pipe.program @device1 device 1 stages [1] schedule "gpipe" microbatches 1 {
  %h0 = pipe.recv from 0 mb 0 tag "h" : tensor<2xf32>
  %y0 = pipe.forward @f1(%h0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  %d0 = pipe.backward @b1(%y0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.send %d0 to 0 mb 0 tag "h.grad" : tensor<2xf32>
  // expected-note@+1 {{device 1's}}
  pipe.clip_grad_norm max(2.0) among [0, 1]
}

// -----

// Device 1 never joins device 0's clipping.
pipe.stage @f0 forward stage 0 (%x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.stage @b0 backward stage 0 (%x: tensor<2xf32>, %d: tensor<2xf32>) -> () {
  pipe.return
}
pipe.stage @f1 forward stage 1 (%h: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %h : tensor<2xf32>
}
pipe.stage @b1 backward stage 1 (%h: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %h : tensor<2xf32>
}
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 1 {
  %x0 = pipe.feed "x" mb 0 : tensor<2xf32>
  %h0 = pipe.forward @f0(%x0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.send %h0 to 1 mb 0 tag "h" : tensor<2xf32>
  %d0 = pipe.recv from 1 mb 0 tag "h.grad" : tensor<2xf32>
  pipe.backward @b0(%x0, %d0) mb 0 : (tensor<2xf32>, tensor<2xf32>) -> ()
  // expected-error@+1 {{deadlock: device 0 waits in this pipe.clip_grad_norm among [0, 1], but device 1 finishes its program without a matching collective}}
  pipe.clip_grad_norm max(1.0) among [0, 1]
}
// expected-note@+1 {{the program of device 1 ends here}}
pipe.program @device1 device 1 stages [1] schedule "gpipe" microbatches 1 {
  %h0 = pipe.recv from 0 mb 0 tag "h" : tensor<2xf32>
  %y0 = pipe.forward @f1(%h0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  %d0 = pipe.backward @b1(%y0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.send %d0 to 0 mb 0 tag "h.grad" : tensor<2xf32>
}

// -----

pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 1 {
  // expected-error@+1 {{'pipe.clip_grad_norm' op max 0.000000e+00 must be a finite number > 0}}
  pipe.clip_grad_norm max(0.0) among [0]
}

// -----

pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 1 {
  // expected-error@+1 {{'pipe.clip_grad_norm' op group [1, 2] does not contain the program's device 0}}
  pipe.clip_grad_norm max(1.0) among [1, 2]
}

// -----

pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 1 {
  %w = pipe.weight_buffer stage 0 versions 1 ("w": tensor<2xf32>)
  // expected-error@+1 {{'pipe.clip_grad_norm' op lists a weight buffer twice}}
  pipe.clip_grad_norm %w, %w max(1.0) among [0]
}

// -----

pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 2 {
  pipe.loop %k = 0 to 2 {
    // expected-error@+1 {{'pipe.clip_grad_norm' op runs once a step: it must not be inside a pipe.loop}}
    pipe.clip_grad_norm max(1.0) among [0]
  }
}
