// The evaluation entry (pipe-lower-programs eval=true; pipe-compile always
// asks for it): @pipe_eval beside @pipe_step, the device's forward over the
// M micro-batches in a loop (receive, forward, send: GPipe's order), its
// stage function cloned as @..._eval, transfers under tags of their own.
// Synchronous 1F1B, device 1 of 4 (receives from 0, sends to 2):
// RUN: pipe-opt %S/../Transforms/Inputs/schedule-p4.mlir --pipe-schedule="kind=1f1b microbatches=4" --pipe-lower-programs="defer-weight-grads=0 device=1 onnx-only=true eval=true" | FileCheck %s --check-prefix=SYNC
// SYNC-LABEL: func.func @pipe_eval(
// SYNC: scf.for %{{.*}} = %c0 to %c4 step %c1 {
// SYNC: func.call @pipert_irecv({{.*}}, %c1_i32, %c0_i32, %{{.*}})
// SYNC: func.call @__pipe_s1_fwd_eval(
// SYNC-NOT: pipert_run_steps
// SYNC: func.call @pipert_send({{.*}}, %c1_i32_{{[0-9]+}}, %c2_i32, %{{.*}})
// SYNC: func.func @__pipe_s1_fwd_eval.onnx(
// SYNC: func.func @pipe_step(
// Without the option, no evaluation entry.
// RUN: pipe-opt %S/../Transforms/Inputs/schedule-p4.mlir --pipe-schedule="kind=1f1b microbatches=4" --pipe-lower-programs="defer-weight-grads=0 device=1 onnx-only=true" | FileCheck %s --check-prefix=NONE
// NONE-NOT: pipe_eval
// The evaluation's tags are not the step's: "h0" (the activation into
// device 1) and "h0.eval" hash to other MPI tags.
// RUN: pipe-opt %S/../Transforms/Inputs/schedule-p4.mlir --pipe-schedule="kind=1f1b microbatches=4" --pipe-lower-programs="defer-weight-grads=0 device=1 eval=true" | FileCheck %s --check-prefix=TAGS
// TAGS-LABEL: func.func @pipe_eval(
// TAGS: arith.addi %c[[EVALTAG:[0-9]+]]_i64, %
// TAGS-LABEL: func.func @pipe_step(
// TAGS-NOT: arith.constant [[EVALTAG]] : i64
// PipeDream: the newest of the device's 3 versions, from the step argument
// and the run's length (pipert_run_steps), selected among the slots.
// RUN: pipe-opt %S/../Transforms/Inputs/schedule-p4.mlir --pipe-schedule="kind=pipedream microbatches=4" --pipe-lower-programs="defer-weight-grads=0 device=1 onnx-only=true eval=true" | FileCheck %s --check-prefix=NEWEST
// Computed once, before the loop.
// NEWEST-LABEL: func.func @pipe_eval(
// NEWEST: call @pipert_run_steps(
// NEWEST: arith.minsi
// NEWEST: arith.select
// NEWEST: scf.for
// NEWEST-NOT: pipert_run_steps
// NEWEST: func.call @__pipe_s1_fwd_eval(
