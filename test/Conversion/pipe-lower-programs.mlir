// RUN: pipe-opt %s --pipe-lower-programs="defer-weight-grads=0 device=0 onnx-only=true" | FileCheck %s --check-prefix=DEV0
// RUN: pipe-opt %s --pipe-lower-programs="defer-weight-grads=0 device=1 onnx-only=true" | FileCheck %s --check-prefix=DEV1
// RUN: pipe-opt %s --pipe-lower-programs="defer-weight-grads=0 device=0" | FileCheck %s --check-prefix=RT0
// RUN: pipe-opt %s --pipe-lower-programs="defer-weight-grads=0 device=1" | FileCheck %s --check-prefix=RT1
// RUN: pipe-opt %s --pipe-lower-programs="defer-weight-grads=0 device=0 nonblocking-sends=true onnx-only=true" | FileCheck %s --check-prefix=NB0
// RUN: pipe-opt %s --pipe-lower-programs="defer-weight-grads=0 device=0 nonblocking-sends=true" | FileCheck %s --check-prefix=NBRT0
// RUN: pipe-opt %s --pipe-lower-programs="device=0 onnx-only=true" | FileCheck %s --check-prefix=DEFER
// RUN: pipe-opt %s --pipe-lower-programs="device=0" | FileCheck %s --check-prefix=DEFERRT
// RUN: pipe-opt %s --pipe-lower-programs="device=0 defer-weight-grads=1 onnx-only=true" | FileCheck %s --check-prefix=NODEFER
// RUN: pipe-opt %s --pipe-lower-programs="device=1 defer-weight-grads=1 onnx-only=true" | FileCheck %s --check-prefix=GROUP1
// RUN: not pipe-opt %s --pipe-lower-programs 2>&1 | FileCheck %s --check-prefix=NODEV
// RUN: not pipe-opt %s --pipe-lower-programs="device=2" 2>&1 | FileCheck %s --check-prefix=NOPROG
// A looped program (pipe-schedule's default form): scf.for, slots and tags
// computed from the micro-batch index, one function per stage computation.
// RUN: pipe-opt %S/../Transforms/Inputs/schedule-p4.mlir --pipe-schedule="kind=1f1b microbatches=8" --pipe-lower-programs="device=1" | FileCheck %s --check-prefix=DEFERLOOP
// RUN: pipe-opt %S/../Transforms/Inputs/schedule-p4.mlir --pipe-schedule="kind=1f1b microbatches=8" --pipe-lower-programs="defer-weight-grads=0 device=1 onnx-only=true" | FileCheck %s --check-prefix=LOOP
// RUN: pipe-opt %S/../Transforms/Inputs/schedule-p4.mlir --pipe-schedule="kind=1f1b microbatches=8" --pipe-lower-programs="defer-weight-grads=0 device=1" | FileCheck %s --check-prefix=LOOPRT
// RUN: not pipe-opt %S/../Transforms/Inputs/schedule-p4.mlir --pipe-schedule="kind=1f1b microbatches=8" --pipe-lower-programs="defer-weight-grads=0 device=1 nonblocking-sends=true" 2>&1 | FileCheck %s --check-prefix=LOOPNB

// The 2-device 1F1B program of test/Dialect/pipe/roundtrip-1f1b.mlir (a linear
// model with an MSE loss, 2 micro-batches of 2 rows), lowered per device. The
// initial value of fc1.weight comes from the function that declares the
// parameter (the imported @forward); fc2.weight has none and starts at zero.

// Deferred weight gradients (the default, defer-weight-grads=64 rows): the
// 2 micro-batches of 2 rows are one group. The backward of device 0 computes
// no Gemm; it writes its micro-batch's X (2 x 4; 32 bytes, so not read in
// its activation buffer's slot) and dY (2 x 8) into rows (mb mod 2)*2.. of
// two buffers, and after the group's last backward (slot 1) one Gemm over
// its 4 rows adds Xᵀ dY to the accumulator, before the update. With
// defer-weight-grads=1 no group of two fits: device 0's Gemm stays per
// micro-batch in its backward (a first stage sends no input gradient, so
// deferring would only move it). Device 1's backward sends one: its Gemm
// is deferred on its own (a group of one, no scf.if), after that send and
// the receive the schedule posts next, before that receive's wait.
// DEFER-LABEL: func.func @pipe_step(
// DEFER: call @pipert_memset_zero(
// DEFER: call @pipert_wait(
// DEFER: %[[SLOT0:.*]] = arith.remui %c0_i64{{.*}}, %c2_i64
// DEFER: %[[OFFX:.*]] = arith.muli %[[SLOT0]], %c32_i64
// DEFER: llvm.getelementptr %[[XS:.*]][%[[OFFX]]]
// DEFER: %[[OFFD:.*]] = arith.muli %[[SLOT0]], %c64_i64
// DEFER: llvm.getelementptr %[[DS:.*]][%[[OFFD]]]
// DEFER: call @__pipe_s0_bwd(
// DEFER: call @pipert_wait(
// DEFER: %[[SLOT1:.*]] = arith.remui %c1_i64{{.*}}, %c2_i64
// DEFER: %[[OFFX1:.*]] = arith.muli %[[SLOT1]], %c32_i64
// DEFER: llvm.getelementptr %[[XS]][%[[OFFX1]]]
// DEFER: %[[OFFD1:.*]] = arith.muli %[[SLOT1]], %c64_i64
// DEFER: llvm.getelementptr %[[DS]][%[[OFFD1]]]
// DEFER: call @__pipe_s0_bwd(
// DEFER: %[[LAST:.*]] = arith.cmpi eq, %{{.*}}, %c1_i64
// DEFER-NEXT: scf.if %[[LAST]] {
// DEFER: call @__pipe_deferred___pipe_s0_bwd(
// DEFER: call @__pipe_update_stage0(
// DEFER-LABEL: func.func @__pipe_s0_bwd.onnx(
// DEFER-SAME: %[[XI:[^:]*]]: tensor<2x4xf32> {pipe.input = "in0"}, %[[D:[^:]*]]: tensor<2x8xf32> {pipe.input = "in1"}) -> (tensor<2x4xf32> {pipe.result_buffer = 0 : i64}, tensor<2x8xf32> {pipe.result_buffer = 1 : i64})
// DEFER-NOT: onnx.Gemm
// DEFER: return %[[XI]], %[[D]]
// DEFER-LABEL: func.func @__pipe_deferred___pipe_s0_bwd.onnx(
// DEFER-SAME: %[[ACC:[^:]*]]: tensor<4x8xf32>, %[[XR:[^:]*]]: tensor<4x4xf32> {pipe.input = "rows0"}, %[[DR:[^:]*]]: tensor<4x8xf32> {pipe.input = "rows1"}) -> (tensor<4x8xf32> {pipe.update = 0 : i64})
// DEFER: %[[G:.*]] = onnx.Gemm(%[[XR]], %[[DR]], %[[ACC]]) {transA = 1 : i64}
// DEFER: return %[[G]]
// The runtime form: the backward copies its inputs into the rows (they are
// arguments, not kernel results); the deferred Gemm adds into the
// accumulator in place (C = Y, beta 1).
// DEFERRT-LABEL: func.func private @__pipe_s0_bwd(
// DEFERRT-COUNT-2: call @pipert_copy_device(
// DEFERRT-NOT: call @pipert_gemm_f32(
// DEFERRT-LABEL: func.func private @__pipe_deferred___pipe_s0_bwd(
// DEFERRT: call @pipert_gemm_f32(%{{.*}}, %c4_i64{{.*}}, %c8_i64{{.*}}, %c4_i64{{.*}}, %c1_i32{{.*}}, %c0_i32{{.*}}, %cst{{.*}}, %cst
// DEFERRT-NOT: call @pipert_copy_device(
// DEFERRT: return
// NODEFER-NOT: __pipe_deferred
// NODEFER-LABEL: func.func @__pipe_s0_bwd.onnx(
// NODEFER: onnx.Gemm(
// NODEFER-NOT: __pipe_deferred
// GROUP1-LABEL: func.func @pipe_step(
// GROUP1: call @__pipe_s1_bwd(
// GROUP1: call @pipert_send(
// GROUP1: call @pipert_irecv(
// GROUP1-NOT: scf.if
// GROUP1: call @__pipe_deferred___pipe_s1_bwd(
// GROUP1: call @pipert_wait(
// GROUP1: call @__pipe_s1_bwd(
// GROUP1: call @pipert_send(
// GROUP1-NOT: scf.if
// GROUP1: call @__pipe_deferred___pipe_s1_bwd(
// GROUP1: call @__pipe_update_stage1(
// GROUP1-LABEL: func.func @__pipe_s1_bwd.onnx(
// GROUP1-NOT: transA = 1
// GROUP1: return
// GROUP1-LABEL: func.func @__pipe_deferred___pipe_s1_bwd.onnx(
// GROUP1-SAME: tensor<8x3xf32>, %{{[^:]*}}: tensor<2x8xf32> {pipe.input = "rows0"}, %{{[^:]*}}: tensor<2x3xf32> {pipe.input = "rows1"})
// GROUP1: onnx.Gemm({{.*}}) {transA = 1 : i64}
// In the looped 1F1B program the deferred Gemm follows the loop and the
// drain, once a step.
// DEFERLOOP-LABEL: func.func @pipe_step(
// DEFERLOOP: scf.for
// DEFERLOOP: call @__pipe_s1_bwd(
// DEFERLOOP: call @__pipe_s1_bwd(
// DEFERLOOP-NOT: scf.for
// DEFERLOOP: call @__pipe_deferred___pipe_s1_bwd(
// DEFERLOOP-NOT: call @__pipe_s1_bwd(
// DEFERLOOP: call @__pipe_update_stage1(

// NODEV: error: pipe-lower-programs: the module has 2 programs; pick the device to lower with device=<k>
// NOPROG: error: pipe-lower-programs: no pipe.program for device 2

// Device 0 feeds "x": the driver fills the whole mini-batch (4 rows), each
// micro-batch reads its rows in place. The step calls one function per
// stage computation (its buffers given as pointer arrays), sends block, a
// receive is posted (pipert_irecv) and waited for before its first use, the
// backwards add their weight gradients into the accumulator (zeroed first),
// then one SGD update, which stores the next step count.
// DEV0-LABEL: func.func @pipe_step(
// DEV0-SAME: pipe.device = 0 : i64, pipe.microbatches = 2 : i64
// DEV0-SAME: has_loss = false, inputs = [{dtype = 1 : i64, kind = "input", name = "x", shape = array<i64: 4, 4>}]
// DEV0-SAME: persistent = [{dtype = 1 : i64, init = dense<5.000000e-01> : tensor<4x8xf32>, kind = "param", name = "fc1.weight", shape = array<i64: 4, 8>}, {dtype = 7 : i64, init = dense<0> : tensor<i64>, kind = "state", name = "step", shape = array<i64>}], trains = true
// DEV0: %[[COMM:.*]] = call @pipert_comm_world(
// DEV0: %[[ARENA:.*]] = call @pipert_alloc(%{{.*}}, %c384_i64)
// DEV0: %[[ACC:.*]] = llvm.getelementptr %[[ARENA]][%c0_i64] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// DEV0: call @pipert_memset_zero(%{{.*}}, %[[ACC]], %c128_i64{{.*}})
// DEV0: %[[X:.*]] = llvm.load %{{.*}} : !llvm.ptr -> !llvm.ptr
// DEV0: %[[OFF0:.*]] = arith.muli %{{.*}}, %c32_i64
// DEV0: llvm.getelementptr %[[X]][%[[OFF0]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// DEV0: call @__pipe_s0_fwd(
// DEV0: call @pipert_send(%{{.*}}, %[[COMM]], %{{.*}}, %c16_i64{{.*}}, %c1_i32{{.*}}, %c1_i32{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i32, i32, i32) -> ()
// DEV0: call @__pipe_s0_fwd(
// DEV0: call @pipert_send(
// DEV0: %[[R0:.*]] = call @pipert_irecv(
// DEV0-NEXT: call @pipert_wait(%{{.*}}, %[[R0]])
// DEV0: call @__pipe_s0_bwd(
// DEV0: %[[R1:.*]] = call @pipert_irecv(
// DEV0-NEXT: call @pipert_wait(%{{.*}}, %[[R1]])
// DEV0: call @__pipe_s0_bwd(
// DEV0: call @__pipe_update_stage0(
// DEV0-NOT: pipert_isend
// DEV0: call @pipert_free(
// DEV0: return
// DEV0-LABEL: func.func @__pipe_s0_fwd.onnx(
// DEV0-SAME: %[[W:.*]]: tensor<4x8xf32>, %[[XI:.*]]: tensor<2x4xf32> {pipe.input = "in0"}) -> (tensor<2x8xf32> {pipe.result_buffer = 0 : i64})
// DEV0: onnx.MatMul(%[[XI]], %[[W]])
// DEV0-LABEL: func.func @__pipe_s0_bwd.onnx(
// DEV0-SAME: %{{.*}}: tensor<4x8xf32>, %[[ACC:[^:]*]]: tensor<4x8xf32>, %[[XI:[^:]*]]: tensor<2x4xf32> {pipe.input = "in0"}, %[[D:[^:]*]]: tensor<2x8xf32> {pipe.input = "in1"}) -> (tensor<4x8xf32> {pipe.update = 1 : i64})
// DEV0: %[[G:.*]] = onnx.Gemm(%[[XI]], %[[D]], %[[ACC]]) {transA = 1 : i64}
// DEV0: return %[[G]]
// DEV0-LABEL: func.func @__pipe_update_stage0.onnx(
// DEV0-SAME: %[[W:[^:]*]]: tensor<4x8xf32> {pipe.param = "fc1.weight"}, %[[G:[^:]*]]: tensor<4x8xf32>, %[[STEP:[^:]*]]: tensor<i64> {pipe.state = "step"})
// DEV0-SAME: -> (tensor<4x8xf32> {pipe.update = "fc1.weight"}, tensor<i64> {pipe.update = "step"})
// DEV0: %[[NEXT:.*]] = onnx.Add(%[[STEP]], %{{.*}}) : (tensor<i64>, tensor<i64>) -> tensor<i64>
// DEV0: %[[NEW:.*]] = onnx.SGD(%{{.*}}, %[[W]], %[[G]])
// DEV0: return %[[NEW]], %[[NEXT]] :

// Device 1 receives with the tags device 0 sends with ((fnv1a(tag) mod
// 2048) * 16 + mb mod 16, computed from the micro-batch), feeds "t", keeps
// each micro-batch's loss in a float of its own and reports their mean.
// DEV1-LABEL: func.func @pipe_step(
// DEV1-SAME: has_loss = true, inputs = [{dtype = 1 : i64, kind = "input", name = "t", shape = array<i64: 4, 3>}]
// DEV1-SAME: persistent = [{dtype = 1 : i64, kind = "param", name = "fc2.weight", shape = array<i64: 8, 3>}, {dtype = 7 : i64, init = dense<0> : tensor<i64>, kind = "state", name = "step", shape = array<i64>}]
// DEV1: %[[ARENA:.*]] = call @pipert_alloc(
// DEV1-NOT: call @pipert_alloc(
// DEV1: call @pipert_memset_zero(%{{.*}}, %[[LOSSES:[^,]*]], %c8_i64
// DEV1: %[[LOW:.*]] = arith.remui %c0_i64{{.*}}, %c16_i64
// DEV1: %[[TAG:.*]] = arith.addi %c30064_i64, %[[LOW]] : i64
// DEV1: %[[TAG32:.*]] = arith.trunci %[[TAG]] : i64 to i32
// DEV1: %[[R:.*]] = call @pipert_irecv(%{{.*}}, %{{.*}}, %{{.*}}, %c16_i64{{.*}}, %c1_i32, %c0_i32, %[[TAG32]])
// DEV1-NEXT: call @pipert_wait(%{{.*}}, %[[R]])
// The forward computes the micro-batch's loss in its float (no copy).
// DEV1: %[[MB4:.*]] = arith.muli %c0_i64{{.*}}, %c4_i64 : i64
// DEV1: %[[LSLOT:.*]] = llvm.getelementptr %[[LOSSES]][%[[MB4]]]
// DEV1: llvm.store %[[LSLOT]], %{{.*}} : !llvm.ptr, !llvm.ptr
// DEV1: call @__pipe_s1_fwd(
// DEV1-NOT: call @pipert_copy_device(
// DEV1: call @__pipe_s1_bwd(
// DEV1: %c24944_i64
// DEV1: call @pipert_send(
// DEV1: call @pipert_irecv(
// DEV1: call @__pipe_s1_fwd(
// DEV1: call @__pipe_s1_bwd(
// DEV1: call @pipert_send(
// DEV1: call @__pipe_update_stage1(
// DEV1: call @pipert_copy_to_host(%{{.*}}, %[[HOST:.*]], %[[LOSSES]], %c8_i64
// DEV1: %[[L0:.*]] = llvm.load %[[HOST]] : !llvm.ptr -> f32
// DEV1: %[[L1:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f32
// DEV1: %[[SUM:.*]] = arith.addf %[[L0]], %[[L1]] : f32
// DEV1: %[[MEAN:.*]] = arith.mulf %[[SUM]], %cst : f32
// DEV1: llvm.store %[[MEAN]], %arg3 : f32, !llvm.ptr

// Lowered: @pipe_step and one private function per stage computation and
// update, with their kernel calls.
// RT0-NOT: pipe.program
// RT0-NOT: pipe.stage
// RT0-NOT: @forward
// RT0: func.func @pipe_step(
// RT0-SAME: pipe.program = {has_loss = false
// RT0: call @pipert_comm_world(
// RT0: call @__pipe_s0_fwd(
// RT0: call @pipert_send(
// RT0-NOT: pipert_isend
// RT0-NOT: pipert_wait_all
// RT0: return
// RT0: func.func private @__pipe_s0_fwd(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64) attributes {pipe.peak_bytes =
// RT0: call @pipert_matmul_f32(
// RT0: func.func private @__pipe_s0_bwd(
// RT0: call @pipert_gemm_f32(
// RT0: func.func private @__pipe_update_stage0(
// RT0: call @pipert_sgd_f32(
// RT0-NOT: .onnx

// RT1: func.func @pipe_step(
// RT1-SAME: pipe.program = {has_loss = true
// RT1: call @pipert_irecv(
// RT1: call @pipert_wait(
// RT1: call @pipert_send(
// RT1: call @pipert_irecv(
// RT1: call @pipert_wait(
// RT1: call @pipert_send(
// RT1: call @__pipe_update_stage1(
// RT1: call @pipert_copy_to_host(
// RT1: func.func private @__pipe_update_stage1(
// RT1: call @pipert_sgd_f32(

// Non-blocking sends (straight-line programs only): the sent buffers live
// until the sends are waited for at the end of the step, before they are
// freed.
// NB0: func.func @pipe_step(
// NB0: %[[R0:.*]] = call @pipert_isend(
// NB0: %[[R1:.*]] = call @pipert_isend(
// NB0: call @pipert_irecv(
// NB0: call @__pipe_update_stage0(
// NB0: llvm.store %[[R0]]
// NB0: llvm.store %[[R1]]
// NB0: call @pipert_wait_all(%{{.*}}, %{{.*}}, %c2_i32)
// NB0: call @pipert_free(
// NB0: return

// NBRT0: func.func @pipe_step(
// NBRT0: call @pipert_isend(
// NBRT0: call @pipert_isend(
// NBRT0: call @pipert_wait_all(
// NBRT0-NOT: call @pipert_isend
// NBRT0: call @pipert_free(
// NBRT0: return

// Stage 1 of 4, 1F1B, M = 8: activations received for 3 micro-batches in
// flight live in a buffer of 3 slots of 64 bytes (32 rounded up), bytes
// 64-256 of the step's arena (the step's buffers are places in one
// pipert_alloc, each 64-byte aligned); a recv
// whose value is saved lands in its slot directly. The receive of the next
// micro-batch's activation is posted before the gradient's send and waited
// for after it: the gradient goes out while the activation is on its way.
// LOOP-LABEL: func.func @pipe_step(
// LOOP: %[[ARENA:.*]] = call @pipert_alloc(%{{.*}}, %c704_i64)
// LOOP: llvm.getelementptr %[[ARENA]][%c256_i64]
// LOOP: %[[RING:.*]] = llvm.getelementptr %[[ARENA]][%c64_i64] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// LOOP: scf.for %[[IV:.*]] = %c0{{.*}} to %c2{{.*}} step %c1{{.*}} {
// LOOP: scf.for %[[IV:.*]] = %c0{{.*}} to %c5{{.*}} step %c1{{.*}} {
// LOOP-NEXT: %[[K:.*]] = arith.index_cast %[[IV]] : index to i64
// LOOP: %[[MB:.*]] = arith.addi %[[K]], %c2_i64{{.*}} : i64
// LOOP: %[[SLOT:.*]] = arith.remui %[[MB]], %c3_i64{{.*}} : i64
// LOOP: %[[BYTES:.*]] = arith.muli %[[SLOT]], %c64_i64{{.*}} : i64
// LOOP: llvm.getelementptr %[[RING]][%[[BYTES]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// LOOP: func.call @__pipe_s1_fwd(
// LOOP: func.call @pipert_send(
// LOOP: %[[G:.*]] = func.call @pipert_irecv(
// LOOP-NEXT: func.call @pipert_wait(%{{.*}}, %[[G]])
// LOOP: func.call @__pipe_s1_bwd(
// LOOP: %[[NEXT:.*]] = arith.addi %[[K]], %c3_i64{{.*}} : i64
// LOOP: arith.remui %[[NEXT]], %c16_i64
// LOOP: %[[NSLOT:.*]] = arith.remui %[[NEXT]], %c3_i64{{.*}} : i64
// LOOP: %[[NBYTES:.*]] = arith.muli %[[NSLOT]], %c64_i64{{.*}} : i64
// LOOP: %[[NPTR:.*]] = llvm.getelementptr %[[RING]][%[[NBYTES]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// LOOP: %[[A:.*]] = func.call @pipert_irecv(%{{.*}}, %{{.*}}, %[[NPTR]],
// LOOP-NOT: pipert_copy_device
// LOOP: func.call @pipert_send(
// LOOP-NEXT: func.call @pipert_wait(%{{.*}}, %[[A]])
// LOOP-NEXT: }
// LOOP-COUNT-1: func.func @__pipe_s1_fwd.onnx(
// LOOP-COUNT-1: func.func @__pipe_s1_bwd.onnx(

// LOOPRT: func.func @pipe_step(
// LOOPRT: scf.for
// LOOPRT: func.func private @__pipe_s1_fwd(
// LOOPRT: func.func private @__pipe_s1_bwd(

// LOOPNB: error: pipe-lower-programs: nonblocking-sends needs a straight-line program (pipe-schedule loop=false): a loop reuses its buffers every iteration

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
