// No-flush methods: pipe-schedule kind=pipedream / 2bw builds one step of
// 1F1B's steady state per device with explicit weight versions. Every
// configuration verifies over a run (deadlock-free with rendezvous sends,
// activation-buffer slots, weight versions against METHODS.md).
//
// RUN: pipe-opt %S/Inputs/schedule-p2.mlir --pipe-schedule="kind=pipedream microbatches=2" | FileCheck %s --check-prefix=PD
// RUN: pipe-opt %S/Inputs/schedule-p2.mlir --pipe-schedule="kind=2bw microbatches=2" | FileCheck %s --check-prefix=TWOBW
// RUN: pipe-opt %S/Inputs/schedule-p3.mlir --pipe-schedule="kind=pipedream vertical-sync=true microbatches=3" | FileCheck %s --check-prefix=VS
// RUN: for p in 1 2 3 4; do for m in 1 2 3 4 8; do \
// RUN:   pipe-opt %S/Inputs/schedule-p$p.mlir --pipe-schedule="kind=pipedream microbatches=$m" | pipe-opt --pipe-verify-schedule > /dev/null && \
// RUN:   pipe-opt %S/Inputs/schedule-p$p.mlir --pipe-schedule="kind=pipedream vertical-sync=true microbatches=$m" | pipe-opt --pipe-verify-schedule > /dev/null && \
// RUN:   if [ $m -ge $p ]; then pipe-opt %S/Inputs/schedule-p$p.mlir --pipe-schedule="kind=2bw microbatches=$m" | pipe-opt --pipe-verify-schedule > /dev/null; fi || exit 1; \
// RUN: done; done
// A program has as many instructions for M = 64 as for M = 16.
// RUN: pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=pipedream microbatches=16" | grep -c "pipe\." > %t.16
// RUN: pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=pipedream microbatches=64" | grep -c "pipe\." > %t.64
// RUN: diff %t.16 %t.64
// The table shows a run and the versions each device reads.
// RUN: pipe-opt %S/Inputs/schedule-p3.mlir --pipe-schedule="kind=pipedream microbatches=2" --pipe-print-schedule -o /dev/null | FileCheck %s --check-prefix=PRINT
// RUN: not pipe-opt %S/Inputs/schedule-p3.mlir --pipe-schedule="kind=2bw microbatches=2" 2>&1 | FileCheck %s --check-prefix=FEW
// RUN: not pipe-opt %S/Inputs/schedule-p3.mlir --pipe-schedule="kind=1f1b vertical-sync=true microbatches=2" 2>&1 | FileCheck %s --check-prefix=VSKIND

// Stage 0 of 2 keeps p - s = 2 versions: its forward and backward of
// micro-batch u read W(u - 1); one update per micro-batch. The steady state
// is one loop iteration: forward of mb k+1, backward of mb k (for k = -1,
// the previous step's last micro-batch, whose input the forward kept).
// PD-LABEL: pipe.program @device0 device 0 stages [0] schedule "pipedream" microbatches 2
// PD-NEXT: %w0 = pipe.weight_buffer stage 0 versions 2 ("layer0.weight": tensor<4x4xf32>)
// PD-NEXT: %[[X:.*]] = pipe.activation_buffer "x.fed" depth 2
// PD-NEXT: pipe.loop %k = -1 to 1 {
// PD-NEXT: %[[X1:.*]] = pipe.feed "x" mb %k + 1
// PD-NEXT: pipe.save %[[X1]] into %[[X]] mb %k + 1
// PD-NEXT: %[[H:.*]] = pipe.forward @s0_fwd(%[[X1]]) weights %w0[u - 1] mb %k + 1
// PD-NEXT: pipe.send %[[H]] to 1 mb %k + 1 tag "h0"
// PD-NEXT: %[[G:.*]] = pipe.recv from 1 mb %k tag "h0.grad"
// PD-NEXT: %[[X0:.*]] = pipe.restore %[[X]] mb %k
// PD-NEXT: pipe.backward @s0_bwd(%[[X0]], %[[G]]) weights %w0[u - 1] mb %k
// PD-NEXT: pipe.update %w0[u] sgd lr(1.000000e-01) mb %k
// PD-NEXT: pipe.zero_grad %w0 mb %k
// PD-NEXT: }
// PD-NEXT: }
// The last stage keeps one version and reads the newest weights; the
// gradient of a micro-batch goes out in the next iteration, when stage 0
// takes it (no transfer crosses a step boundary, so the state between
// steps holds nothing in flight on the wire).
// PD-LABEL: pipe.program @device1 device 1 stages [1] schedule "pipedream"
// PD-NEXT: %w1 = pipe.weight_buffer stage 1 versions 1
// PD-NEXT: %[[GB:.*]] = pipe.activation_buffer "h0.grad" depth 1
// PD-NEXT: pipe.loop %k = -1 to 1 {
// PD-NEXT: pipe.recv from 0 mb %k + 1 tag "h0"
// PD-NEXT: %[[GP:.*]] = pipe.restore %[[GB]] mb %k
// PD-NEXT: pipe.send %[[GP]] to 0 mb %k tag "h0.grad"
// PD: pipe.forward @s1_fwd({{.*}}) weights %w1[u] mb %k + 1
// PD: pipe.backward @s1_bwd({{.*}}) weights %w1[u] mb %k + 1

// 2BW: two versions on every stage, every forward and backward of step t
// reads W(t - 1), one update per step after the step's last backward, on
// the accumulated gradient (no per-micro-batch rescaling).
// TWOBW-LABEL: pipe.program @device0 device 0 stages [0] schedule "pipedream_2bw" microbatches 2
// TWOBW-NEXT: %w0 = pipe.weight_buffer stage 0 versions 2
// TWOBW: pipe.forward @s0_fwd({{.*}}) weights %w0[t - 1] mb 0
// TWOBW: pipe.backward @s0_bwd({{.*}}) weights %w0[t - 1] mb -1
// TWOBW-NEXT: pipe.update %w0[t] sgd lr(1.000000e-01) mb -1
// TWOBW-NEXT: pipe.zero_grad %w0 mb -1
// TWOBW: pipe.backward @s0_bwd({{.*}}) weights %w0[t - 1] mb 0
// TWOBW-NOT: pipe.update
// TWOBW-LABEL: pipe.program @device1
// TWOBW-NEXT: %w1 = pipe.weight_buffer stage 1 versions 2
// TWOBW: pipe.backward @s1_bwd({{.*}}) weights %w1[t - 1] mb %k + 1
// TWOBW: }
// TWOBW-NEXT: pipe.update %w1[t] sgd lr(1.000000e-01) mb 1

// Vertical sync: every stage reads W(u - (p-1)) and keeps p versions.
// VS-LABEL: pipe.program @device0 {{.*}} schedule "pipedream" microbatches 3 vertical_sync
// VS-NEXT: pipe.weight_buffer stage 0 versions 3
// VS: weights %w0[u - 2]
// VS-LABEL: pipe.program @device1 {{.*}} vertical_sync
// VS-NEXT: pipe.weight_buffer stage 1 versions 3
// VS: weights %w1[u - 2]
// VS-LABEL: pipe.program @device2 {{.*}} vertical_sync
// VS-NEXT: pipe.weight_buffer stage 2 versions 3
// VS: weights %w2[u - 2]

// PRINT: schedule "pipedream": 3 devices, 2 micro-batches
// PRINT-NEXT: no flush: a run of 5 steps (micro-batches 0..9) and its drain; idle only while the pipeline fills and drains
// The steady state has no bubble: 1F1B's, step after step.
// PRINT: device 0 | F0 F1 F2 .  .  B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 F8 B6 F9 B7 .  B8 .  B9
// PRINT: peak in-flight micro-batches per device: 3 2 1
// PRINT-NEXT: device 0 stage 0: 3 versions; forward of mb u (step t) reads W(u - 2), backward W(u - 2); updates: one per micro-batch (u)
// PRINT-NEXT: device 1 stage 1: 2 versions; forward of mb u (step t) reads W(u - 1), backward W(u - 1); updates: one per micro-batch (u)
// PRINT-NEXT: device 2 stage 2: 1 version; forward of mb u (step t) reads W(u), backward W(u); updates: one per micro-batch (u)

// FEW: error: pipe-schedule: 2bw needs at least as many micro-batches as stages (M = 2 < p = 3): raise the micro-batches
// VSKIND: error: pipe-schedule: vertical-sync applies to kind=pipedream only, not '1f1b'
