// RUN: pipe-opt %s --split-input-file -verify-diagnostics --pipe-verify-schedule
// RUN: not pipe-opt %s --split-input-file --pipe-verify-schedule=buffered-sends 2>&1 | FileCheck %s --check-prefix=BUF --implicit-check-not="error: deadlock"
// RUN: pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=1f1b microbatches=7" --pipe-verify-schedule | FileCheck %s --check-prefix=P4
// RUN: pipe-opt %S/Inputs/schedule-p3.mlir --pipe-schedule="kind=gpipe microbatches=2" --pipe-verify-schedule | FileCheck %s --check-prefix=P3

// Generated schedules verify (and the pass leaves them as they are).
// P4-COUNT-4: pipe.program
// P3-COUNT-3: pipe.program

// Two stages without weights, used by every case below: f0/b0 on device 0,
// f1/b1 on device 1, two micro-batches scheduled 1F1B as pipe-schedule does.
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
pipe.program @device0 device 0 stages [0] schedule "1f1b" microbatches 2 attributes {pipe.peak_in_flight = 2 : i64} {
  %x0 = pipe.feed "x" mb 0 : tensor<2xf32>
  %h0 = pipe.forward @f0(%x0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.send %h0 to 1 mb 0 tag "h" : tensor<2xf32>
  %x1 = pipe.feed "x" mb 1 : tensor<2xf32>
  %h1 = pipe.forward @f0(%x1) mb 1 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.send %h1 to 1 mb 1 tag "h" : tensor<2xf32>
  %d0 = pipe.recv from 1 mb 0 tag "h.grad" : tensor<2xf32>
  pipe.backward @b0(%x0, %d0) mb 0 : (tensor<2xf32>, tensor<2xf32>) -> ()
  %d1 = pipe.recv from 1 mb 1 tag "h.grad" : tensor<2xf32>
  pipe.backward @b0(%x1, %d1) mb 1 : (tensor<2xf32>, tensor<2xf32>) -> ()
}
pipe.program @device1 device 1 stages [1] schedule "1f1b" microbatches 2 attributes {pipe.peak_in_flight = 1 : i64} {
  %h0 = pipe.recv from 0 mb 0 tag "h" : tensor<2xf32>
  %y0 = pipe.forward @f1(%h0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  %d0 = pipe.backward @b1(%y0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  %h1 = pipe.recv from 0 mb 1 tag "h" : tensor<2xf32>
  pipe.send %d0 to 0 mb 0 tag "h.grad" : tensor<2xf32>
  %y1 = pipe.forward @f1(%h1) mb 1 : (tensor<2xf32>) -> tensor<2xf32>
  %d1 = pipe.backward @b1(%y1) mb 1 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.send %d1 to 0 mb 1 tag "h.grad" : tensor<2xf32>
}

// -----

// Device 1 receives micro-batch 1 first while device 0 sends micro-batch 0
// first: with blocking sends neither gets past its transfer.
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
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 2 {
  %x0 = pipe.feed "x" mb 0 : tensor<2xf32>
  %h0 = pipe.forward @f0(%x0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  // expected-note@+1 {{device 0 waits here}}
  pipe.send %h0 to 1 mb 0 tag "h" : tensor<2xf32>
  %x1 = pipe.feed "x" mb 1 : tensor<2xf32>
  %h1 = pipe.forward @f0(%x1) mb 1 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.send %h1 to 1 mb 1 tag "h" : tensor<2xf32>
  %d0 = pipe.recv from 1 mb 0 tag "h.grad" : tensor<2xf32>
  pipe.backward @b0(%x0, %d0) mb 0 : (tensor<2xf32>, tensor<2xf32>) -> ()
  %d1 = pipe.recv from 1 mb 1 tag "h.grad" : tensor<2xf32>
  pipe.backward @b0(%x1, %d1) mb 1 : (tensor<2xf32>, tensor<2xf32>) -> ()
}
pipe.program @device1 device 1 stages [1] schedule "gpipe" microbatches 2 {
  // expected-error@+1 {{deadlock: device 1 waits in this recv of mb 1 tag "h" from device 0, while device 0 waits in its send of mb 0 tag "h" to device 1 (a send blocks until its peer receives it)}}
  %h1 = pipe.recv from 0 mb 1 tag "h" : tensor<2xf32>
  %h0 = pipe.recv from 0 mb 0 tag "h" : tensor<2xf32>
  %y0 = pipe.forward @f1(%h0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  %y1 = pipe.forward @f1(%h1) mb 1 : (tensor<2xf32>) -> tensor<2xf32>
  %d0 = pipe.backward @b1(%y0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.send %d0 to 0 mb 0 tag "h.grad" : tensor<2xf32>
  %d1 = pipe.backward @b1(%y1) mb 1 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.send %d1 to 0 mb 1 tag "h.grad" : tensor<2xf32>
}

// -----

// The order of test/Dialect/pipe/roundtrip-1f1b.mlir: device 1 returns the
// gradient of micro-batch 0 before it takes micro-batch 1, which device 0
// is sending. Fine with buffered sends, a deadlock with blocking ones.
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
pipe.program @device0 device 0 stages [0] schedule "1f1b" microbatches 2 {
  %x0 = pipe.feed "x" mb 0 : tensor<2xf32>
  %h0 = pipe.forward @f0(%x0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.send %h0 to 1 mb 0 tag "h" : tensor<2xf32>
  %x1 = pipe.feed "x" mb 1 : tensor<2xf32>
  %h1 = pipe.forward @f0(%x1) mb 1 : (tensor<2xf32>) -> tensor<2xf32>
  // expected-error@+1 {{deadlock: device 0 waits in this send of mb 1 tag "h" to device 1, while device 1 waits in its send of mb 0 tag "h.grad" to device 0 (a send blocks until its peer receives it)}}
  pipe.send %h1 to 1 mb 1 tag "h" : tensor<2xf32>
  %d0 = pipe.recv from 1 mb 0 tag "h.grad" : tensor<2xf32>
  pipe.backward @b0(%x0, %d0) mb 0 : (tensor<2xf32>, tensor<2xf32>) -> ()
  %d1 = pipe.recv from 1 mb 1 tag "h.grad" : tensor<2xf32>
  pipe.backward @b0(%x1, %d1) mb 1 : (tensor<2xf32>, tensor<2xf32>) -> ()
}
pipe.program @device1 device 1 stages [1] schedule "1f1b" microbatches 2 {
  %h0 = pipe.recv from 0 mb 0 tag "h" : tensor<2xf32>
  %y0 = pipe.forward @f1(%h0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  %d0 = pipe.backward @b1(%y0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  // expected-note@+1 {{device 1 waits here}}
  pipe.send %d0 to 0 mb 0 tag "h.grad" : tensor<2xf32>
  %h1 = pipe.recv from 0 mb 1 tag "h" : tensor<2xf32>
  %y1 = pipe.forward @f1(%h1) mb 1 : (tensor<2xf32>) -> tensor<2xf32>
  %d1 = pipe.backward @b1(%y1) mb 1 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.send %d1 to 0 mb 1 tag "h.grad" : tensor<2xf32>
}

// -----

// A send nobody receives.
pipe.stage @f0 forward stage 0 (%x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.stage @b0 backward stage 0 (%x: tensor<2xf32>) -> () {
  pipe.return
}
pipe.stage @f1 forward stage 1 (%h: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %h : tensor<2xf32>
}
pipe.stage @b1 backward stage 1 (%h: tensor<2xf32>) -> () {
  pipe.return
}
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 1 {
  %x0 = pipe.feed "x" mb 0 : tensor<2xf32>
  %h0 = pipe.forward @f0(%x0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.send %h0 to 1 mb 0 tag "h" : tensor<2xf32>
  // expected-error@+1 {{deadlock: device 0 waits in this send of mb 0 tag "extra" to device 1, but device 1 finishes its program without a matching recv}}
  pipe.send %h0 to 1 mb 0 tag "extra" : tensor<2xf32>
  pipe.backward @b0(%x0) mb 0 : (tensor<2xf32>) -> ()
}
// expected-note@+1 {{the program of device 1 ends here}}
pipe.program @device1 device 1 stages [1] schedule "gpipe" microbatches 1 {
  %h0 = pipe.recv from 0 mb 0 tag "h" : tensor<2xf32>
  %y0 = pipe.forward @f1(%h0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.backward @b1(%y0) mb 0 : (tensor<2xf32>) -> ()
}

// -----

// A matched pair that disagrees on the type.
pipe.stage @f0 forward stage 0 (%x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.stage @b0 backward stage 0 (%x: tensor<2xf32>) -> () {
  pipe.return
}
pipe.stage @f1 forward stage 1 (%h: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %h : tensor<2xf32>
}
pipe.stage @b1 backward stage 1 (%h: tensor<2xf32>) -> () {
  pipe.return
}
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 1 {
  %x0 = pipe.feed "x" mb 0 : tensor<2xf32>
  %h0 = pipe.forward @f0(%x0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  // expected-note@+1 {{the matching send}}
  pipe.send %h0 to 1 mb 0 tag "h" : tensor<2xf32>
  pipe.backward @b0(%x0) mb 0 : (tensor<2xf32>) -> ()
}
pipe.program @device1 device 1 stages [1] schedule "gpipe" microbatches 1 {
  // expected-error@+1 {{this recv of mb 0 tag "h" expects 'tensor<4xf32>' but device 0 sends 'tensor<2xf32>'}}
  %wide = pipe.recv from 0 mb 0 tag "h" : tensor<4xf32>
  %h0 = pipe.feed "h" mb 0 : tensor<2xf32>
  %y0 = pipe.forward @f1(%h0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.backward @b1(%y0) mb 0 : (tensor<2xf32>) -> ()
}

// -----

// Forward and backward of each micro-batch, once each, in that order.
pipe.stage @f0 forward stage 0 (%x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.stage @b0 backward stage 0 (%x: tensor<2xf32>) -> () {
  pipe.return
}
// expected-error@+1 {{device 0: the backward of micro-batch 1 on stage 0 never runs}}
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 2 {
  %x0 = pipe.feed "x" mb 0 : tensor<2xf32>
  // expected-error@+1 {{device 0: the backward of micro-batch 0 on stage 0 runs before its forward}}
  pipe.backward @b0(%x0) mb 0 : (tensor<2xf32>) -> ()
  // expected-note@+1 {{the other forward @f0 of mb 0}}
  %h0 = pipe.forward @f0(%x0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  %x1 = pipe.feed "x" mb 1 : tensor<2xf32>
  // expected-note@+1 {{the other forward @f0 of mb 1}}
  %h1 = pipe.forward @f0(%x1) mb 1 : (tensor<2xf32>) -> tensor<2xf32>
  // expected-error@+1 {{device 0: the forward of micro-batch 1 on stage 0 runs a second time}}
  %h2 = pipe.forward @f0(%x1) mb 1 : (tensor<2xf32>) -> tensor<2xf32>
}

// -----

// pipe.peak_in_flight must be what the program does.
pipe.stage @f0 forward stage 0 (%x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.stage @b0 backward stage 0 (%x: tensor<2xf32>) -> () {
  pipe.return
}
// expected-error@+1 {{pipe.peak_in_flight is 1, but device 0 holds up to 2 micro-batches of activations}}
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 2 attributes {pipe.peak_in_flight = 1 : i64} {
  %x0 = pipe.feed "x" mb 0 : tensor<2xf32>
  %h0 = pipe.forward @f0(%x0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  %x1 = pipe.feed "x" mb 1 : tensor<2xf32>
  %h1 = pipe.forward @f0(%x1) mb 1 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.backward @b0(%x0) mb 0 : (tensor<2xf32>) -> ()
  pipe.backward @b0(%x1) mb 1 : (tensor<2xf32>) -> ()
}

// -----

pipe.stage @f0 forward stage 0 (%x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.stage @b0 backward stage 0 (%x: tensor<2xf32>) -> () {
  pipe.return
}
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 1 {
  %x0 = pipe.feed "x" mb 0 : tensor<2xf32>
  %h0 = pipe.forward @f0(%x0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  // expected-error@+1 {{device 3 has no pipe.program}}
  pipe.send %h0 to 3 mb 0 tag "h" : tensor<2xf32>
  pipe.backward @b0(%x0) mb 0 : (tensor<2xf32>) -> ()
}

// With buffered sends, the swapped receives and the documentation's order
// pass; the unreceived send is still found.
// BUF:     error: this send of mb 0 tag "extra" to device 1 is never received: device 1 finishes its program without a matching recv
// BUF:     note: the program of device 1 ends here
// BUF:     error: this recv of mb 0 tag "h" expects 'tensor<4xf32>' but device 0 sends 'tensor<2xf32>'

// -----

// A looped program whose activation buffer is too shallow: GPipe keeps all
// four micro-batches in flight, but the buffer has two slots, so the save of
// micro-batch 2 lands on micro-batch 0 before its backward restores it.
pipe.stage @f0 forward stage 0 (%x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.stage @b0 backward stage 0 (%x: tensor<2xf32>, %y: tensor<2xf32>) -> () {
  pipe.return
}
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 4 {
  %a = pipe.activation_buffer "y" depth 2 : tensor<2xf32>
  pipe.loop %k = 0 to 4 {
    %x = pipe.feed "x" mb %k : tensor<2xf32>
    %y = pipe.forward @f0(%x) mb %k : (tensor<2xf32>) -> tensor<2xf32>
    // expected-note@+2 {{mb 0 was saved here}}
    // expected-error@+1 {{device 0: this save of mb 2 into buffer "y" (depth 2) overwrites mb 0, which a later pipe.restore still reads}}
    pipe.save %y into %a mb %k : tensor<2xf32>
  }
  pipe.loop %k = 0 to 4 {
    %x = pipe.feed "x" mb %k : tensor<2xf32>
    %y = pipe.restore %a mb %k : tensor<2xf32>
    pipe.backward @b0(%x, %y) mb %k : (tensor<2xf32>, tensor<2xf32>) -> ()
  }
}

// -----

// A restore of a micro-batch that was never saved.
pipe.stage @f0 forward stage 0 (%x: tensor<2xf32>) -> tensor<2xf32> {
  pipe.return %x : tensor<2xf32>
}
pipe.stage @b0 backward stage 0 (%x: tensor<2xf32>, %y: tensor<2xf32>) -> () {
  pipe.return
}
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 2 {
  %a = pipe.activation_buffer "y" depth 2 : tensor<2xf32>
  %x0 = pipe.feed "x" mb 0 : tensor<2xf32>
  %y0 = pipe.forward @f0(%x0) mb 0 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.save %y0 into %a mb 0 : tensor<2xf32>
  %x1 = pipe.feed "x" mb 1 : tensor<2xf32>
  %y1 = pipe.forward @f0(%x1) mb 1 : (tensor<2xf32>) -> tensor<2xf32>
  pipe.loop %k = 0 to 2 {
    %x = pipe.feed "x" mb %k : tensor<2xf32>
    // expected-error@+1 {{device 0: this restore of mb 1 from buffer "y" finds nothing saved in its slot}}
    %y = pipe.restore %a mb %k : tensor<2xf32>
    pipe.backward @b0(%x, %y) mb %k : (tensor<2xf32>, tensor<2xf32>) -> ()
  }
}
