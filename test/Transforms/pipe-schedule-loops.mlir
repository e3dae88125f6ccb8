// Micro-batch loops: pipe-schedule rolls each device's instruction list into
// pipe.loop ops, on the 4-stage chain of Inputs/schedule-p4.mlir, for
// M in {1, p-1, p, 3p} and both schedules. The looped programs verify
// (transfers, compute order, activation-buffer slots), print the same table
// as the straight-line ones, and have as many instructions for M = 64 as for
// M = 12.
//
// RUN: pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=1f1b microbatches=12" | pipe-opt --pipe-verify-schedule | FileCheck %s --check-prefix=OFOB12
// RUN: pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=1f1b microbatches=4" | pipe-opt --pipe-verify-schedule | FileCheck %s --check-prefix=OFOB4
// RUN: pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=1f1b microbatches=3" | pipe-opt --pipe-verify-schedule | FileCheck %s --check-prefix=OFOB3
// RUN: pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=1f1b microbatches=1" | pipe-opt --pipe-verify-schedule | FileCheck %s --check-prefix=ONE
// RUN: pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=gpipe microbatches=12" | pipe-opt --pipe-verify-schedule | FileCheck %s --check-prefix=GPIPE12
// RUN: pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=gpipe microbatches=4" | pipe-opt --pipe-verify-schedule | FileCheck %s --check-prefix=GPIPE4
// RUN: pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=gpipe microbatches=3" | pipe-opt --pipe-verify-schedule | FileCheck %s --check-prefix=GPIPE3
// RUN: pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=gpipe microbatches=1" | pipe-opt --pipe-verify-schedule | FileCheck %s --check-prefix=ONE
//
// The table is the schedule's, looped or not.
// RUN: rm -rf %t && mkdir -p %t
// RUN: for k in gpipe 1f1b; do for m in 1 3 4 12; do \
// RUN:   pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=$k microbatches=$m" --pipe-print-schedule -o /dev/null > %t/loop-$k-$m.txt && \
// RUN:   pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=$k microbatches=$m loop=false" --pipe-print-schedule -o /dev/null > %t/flat-$k-$m.txt && \
// RUN:   diff %t/loop-$k-$m.txt %t/flat-$k-$m.txt || exit 1; done; done
//
// Code size does not grow with M.
// RUN: for k in gpipe 1f1b; do \
// RUN:   pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=$k microbatches=12" | grep -c "pipe\." > %t/size-$k-12.txt && \
// RUN:   pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=$k microbatches=64" | grep -c "pipe\." > %t/size-$k-64.txt && \
// RUN:   diff %t/size-$k-12.txt %t/size-$k-64.txt || exit 1; done
//
// M comes from the module (pipe-microbatch records it) when not given, and
// must agree with it when given.
// RUN: not pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=1f1b" 2>&1 | FileCheck %s --check-prefix=NOM
// RUN: sed 's/^module attributes {/module attributes {pipe.microbatches = 6 : i64, /' %S/Inputs/schedule-p4.mlir > %t/m6.mlir
// RUN: pipe-opt %t/m6.mlir --pipe-schedule="kind=1f1b" | FileCheck %s --check-prefix=FROMIR
// RUN: not pipe-opt %t/m6.mlir --pipe-schedule="kind=1f1b microbatches=4" 2>&1 | FileCheck %s --check-prefix=DISAGREE

// NOM: error: pipe-schedule: microbatches must be >= 1 (got 0); pass microbatches=<M> or run pipe-microbatch first
// FROMIR: pipe.program @device0 device 0 stages [0] schedule "1f1b" microbatches 6
// DISAGREE: error: pipe-schedule: microbatches=4, but the stages were split into 6 micro-batches (pipe.microbatches); drop the option or make them agree

// 1F1B, M = 3p = 12. Stage 0 feeds its input again for the backward, so it
// keeps no activations: a warm-up loop of p forwards, a steady loop of
// (backward k, forward k+4), a drain loop.
// OFOB12-LABEL: pipe.program @device0 device 0 stages [0] schedule "1f1b" microbatches 12 attributes {pipe.peak_in_flight = 4 : i64} {
// OFOB12-NEXT:    %[[W:.*]] = pipe.weight_buffer stage 0 versions 1
// OFOB12-NEXT:    pipe.zero_grad %[[W]]
// OFOB12-NEXT:    pipe.loop %[[K:.*]] = 0 to 4 {
// OFOB12-NEXT:      %[[X:.*]] = pipe.feed "x" mb %[[K]] : tensor<2x4xf32>
// OFOB12-NEXT:      %[[H:.*]] = pipe.forward @s0_fwd(%[[X]]) weights %[[W]][0] mb %[[K]]
// OFOB12-NEXT:      pipe.send %[[H]] to 1 mb %[[K]] tag "h0"
// OFOB12-NEXT:    }
// OFOB12-NEXT:    pipe.loop %[[K:.*]] = 0 to 8 {
// OFOB12-NEXT:      %[[G:.*]] = pipe.recv from 1 mb %[[K]] tag "h0.grad"
// OFOB12-NEXT:      %[[X:.*]] = pipe.feed "x" mb %[[K]]
// OFOB12-NEXT:      pipe.backward @s0_bwd(%[[X]], %[[G]]) weights %[[W]][0] mb %[[K]]
// OFOB12-NEXT:      %[[X4:.*]] = pipe.feed "x" mb %[[K]] + 4
// OFOB12-NEXT:      %[[H:.*]] = pipe.forward @s0_fwd(%[[X4]]) weights %[[W]][0] mb %[[K]] + 4
// OFOB12-NEXT:      pipe.send %[[H]] to 1 mb %[[K]] + 4 tag "h0"
// OFOB12-NEXT:    }
// OFOB12-NEXT:    pipe.loop %[[K:.*]] = 8 to 12 {
// OFOB12:         }
// OFOB12-NEXT:    pipe.update %[[W]] sgd
// OFOB12-NEXT:  }

// Stage 1 keeps the activations it received for p - s = 3 micro-batches: a
// save after each recv, a restore for the forward (a later iteration) and
// one for the backward.
// OFOB12-LABEL: pipe.program @device1 device 1 stages [1] schedule "1f1b" microbatches 12 attributes {pipe.peak_in_flight = 3 : i64} {
// OFOB12-NEXT:    %[[W:.*]] = pipe.weight_buffer stage 1 versions 1
// OFOB12-NEXT:    %[[A:.*]] = pipe.activation_buffer "h0" depth 3 : tensor<2x4xf32>
// OFOB12-NEXT:    pipe.zero_grad %[[W]]
// OFOB12-NEXT:    %[[R0:.*]] = pipe.recv from 0 mb 0 tag "h0"
// OFOB12-NEXT:    pipe.save %[[R0]] into %[[A]] mb 0
// OFOB12-NEXT:    pipe.loop %[[K:.*]] = 0 to 2 {
// OFOB12:         pipe.loop %[[K:.*]] = 0 to 9 {
// OFOB12-NEXT:      %[[IN:.*]] = pipe.restore %[[A]] mb %[[K]] + 2
// OFOB12-NEXT:      %[[H:.*]] = pipe.forward @s1_fwd(%[[IN]]) weights %[[W]][0] mb %[[K]] + 2
// OFOB12-NEXT:      pipe.send %[[H]] to 2 mb %[[K]] + 2 tag "h1"
// OFOB12-NEXT:      %[[G:.*]] = pipe.recv from 2 mb %[[K]] tag "h1.grad"
// OFOB12-NEXT:      %[[OLD:.*]] = pipe.restore %[[A]] mb %[[K]] :
// OFOB12-NEXT:      %[[D:.*]] = pipe.backward @s1_bwd(%[[OLD]], %[[G]]) weights %[[W]][0] mb %[[K]]
// OFOB12-NEXT:      %[[NEXT:.*]] = pipe.recv from 0 mb %[[K]] + 3 tag "h0"
// OFOB12-NEXT:      pipe.save %[[NEXT]] into %[[A]] mb %[[K]] + 3
// OFOB12-NEXT:      pipe.send %[[D]] to 0 mb %[[K]] tag "h0.grad"
// OFOB12-NEXT:    }
// OFOB12:         pipe.forward @s1_fwd({{.*}}) weights %[[W]][0] mb 11
// OFOB12:         pipe.loop %[[K:.*]] = 9 to 12 {
// OFOB12-COUNT-1:   pipe.backward @s1_bwd
// OFOB12:         }
// OFOB12-NEXT:    pipe.update

// The last stage: one forward and one backward per iteration, depth 1.
// OFOB12-LABEL: pipe.program @device3 device 3 stages [3] schedule "1f1b" microbatches 12 attributes {pipe.peak_in_flight = 1 : i64} {
// OFOB12:         pipe.activation_buffer "h2" depth 1
// OFOB12:         pipe.loop %[[K:.*]] = 0 to 11 {
// OFOB12:           pipe.forward @s3_fwd({{.*}}) weights %{{.*}}[0] mb %[[K]]
// OFOB12-NEXT:      pipe.report_loss %{{.*}} mb %[[K]]
// OFOB12:           pipe.backward @s3_bwd
// OFOB12:         }
// OFOB12:         pipe.forward @s3_fwd({{.*}}) weights %{{.*}}[0] mb 11

// 1F1B, M = p = 4: the middle stages' warm-up is not one repeating run, so
// a few instructions stay straight-line; the depth is still p - s.
// OFOB4-LABEL: pipe.program @device2 device 2 stages [2] schedule "1f1b" microbatches 4 attributes {pipe.peak_in_flight = 2 : i64} {
// OFOB4:         pipe.activation_buffer "h1" depth 2
// OFOB4:         pipe.forward @s2_fwd({{.*}}) weights %{{.*}}[0] mb 0
// OFOB4:         pipe.loop %[[K:.*]] = 0 to 2 {
// OFOB4:           pipe.forward @s2_fwd({{.*}}) weights %{{.*}}[0] mb %[[K]] + 1
// OFOB4:           pipe.backward @s2_bwd({{.*}}) weights %{{.*}}[0] mb %[[K]]
// OFOB4:         pipe.forward @s2_fwd({{.*}}) weights %{{.*}}[0] mb 3
// OFOB4:         pipe.loop %[[K:.*]] = 2 to 4 {
// OFOB4:           pipe.backward @s2_bwd({{.*}}) weights %{{.*}}[0] mb %[[K]]

// 1F1B, M = p - 1 = 3: stage 0 runs all its forwards, then all backwards.
// OFOB3-LABEL: pipe.program @device0 device 0 stages [0] schedule "1f1b" microbatches 3 attributes {pipe.peak_in_flight = 3 : i64} {
// OFOB3:         pipe.loop %[[K:.*]] = 0 to 3 {
// OFOB3:           pipe.forward @s0_fwd
// OFOB3:         pipe.loop %[[K:.*]] = 0 to 3 {
// OFOB3:           pipe.backward @s0_bwd
// OFOB3-LABEL: pipe.program @device1 device 1 stages [1] schedule "1f1b" microbatches 3 attributes {pipe.peak_in_flight = 3 : i64} {
// OFOB3:         pipe.activation_buffer "h0" depth 3

// M = 1: nothing repeats, no loop and no activation buffer.
// ONE-LABEL: pipe.program @device0
// ONE-NOT: pipe.loop
// ONE-NOT: pipe.activation_buffer
// ONE: pipe.program @device3
// ONE-NOT: pipe.loop
// ONE-NOT: pipe.activation_buffer
// ONE: pipe.update

// GPipe, M = 12: all forwards, then all backwards; every stage keeps M
// micro-batches of activations, the last stage its input and the loss
// gradient.
// GPIPE12-LABEL: pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 12
// GPIPE12:         pipe.loop %[[K:.*]] = 0 to 12 {
// GPIPE12:           pipe.forward @s0_fwd
// GPIPE12:         pipe.loop %[[K:.*]] = 0 to 12 {
// GPIPE12:           pipe.backward @s0_bwd
// GPIPE12-LABEL: pipe.program @device3 device 3 stages [3] schedule "gpipe" microbatches 12
// GPIPE12-DAG:     pipe.activation_buffer "d" depth 12
// GPIPE12-DAG:     pipe.activation_buffer "h2" depth 12
// GPIPE12:         pipe.loop %[[K:.*]] = 0 to 12 {
// GPIPE12:           %[[F:.*]]:2 = pipe.forward @s3_fwd({{.*}}) weights %{{.*}}[0] mb %[[K]]
// GPIPE12:           pipe.save %[[F]]#1 into %{{.*}} mb %[[K]]
// GPIPE12:         pipe.loop %[[K:.*]] = 0 to 12 {
// GPIPE12:           pipe.restore
// GPIPE12:           pipe.backward @s3_bwd

// GPIPE4-LABEL: pipe.program @device1 device 1 stages [1] schedule "gpipe" microbatches 4
// GPIPE4:         pipe.activation_buffer "h0" depth 4
// GPIPE4:         pipe.loop %[[K:.*]] = 0 to 3 {
// GPIPE4:         pipe.forward @s1_fwd({{.*}}) weights %{{.*}}[0] mb 3
// GPIPE4:         pipe.loop %[[K:.*]] = 0 to 4 {
// GPIPE4:           pipe.backward @s1_bwd

// GPIPE3-LABEL: pipe.program @device3 device 3 stages [3] schedule "gpipe" microbatches 3
// GPIPE3-DAG:     pipe.activation_buffer "d" depth 3
// GPIPE3-DAG:     pipe.activation_buffer "h2" depth 3
