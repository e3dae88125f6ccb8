// Advance forward propagation (AvgPipe's schedule, usable alone):
// kind=afp advance=K runs min(p-s-1+K, M) warm-up forwards on stage s, then
// 1F1B. K = 0 is 1F1B's table, K >= M GPipe's, and stage s holds at most
// min(p-s+K, M) micro-batches of activations (checked by
// pipe-verify-schedule against the simulation).
//
// RUN: pipe-opt %S/Inputs/schedule-p3.mlir --pipe-schedule="kind=afp advance=1 microbatches=4" | pipe-opt --pipe-verify-schedule --pipe-print-schedule -o /dev/null | FileCheck %s --check-prefix=K1
// RUN: pipe-opt %S/Inputs/schedule-p3.mlir --pipe-schedule="kind=afp advance=1 microbatches=4" | FileCheck %s --check-prefix=IR
// RUN: rm -rf %t && mkdir -p %t
// RUN: pipe-opt %S/Inputs/schedule-p3.mlir --pipe-schedule="kind=afp advance=0 microbatches=4" --pipe-print-schedule -o /dev/null | tail -n +2 > %t/afp0.txt
// RUN: pipe-opt %S/Inputs/schedule-p3.mlir --pipe-schedule="kind=1f1b microbatches=4" --pipe-print-schedule -o /dev/null | tail -n +2 > %t/1f1b.txt
// RUN: diff %t/afp0.txt %t/1f1b.txt
// RUN: pipe-opt %S/Inputs/schedule-p3.mlir --pipe-schedule="kind=afp advance=4 microbatches=4" --pipe-print-schedule -o /dev/null | tail -n +2 > %t/afp4.txt
// RUN: pipe-opt %S/Inputs/schedule-p3.mlir --pipe-schedule="kind=gpipe microbatches=4" --pipe-print-schedule -o /dev/null | tail -n +2 > %t/gpipe.txt
// RUN: diff %t/afp4.txt %t/gpipe.txt
// RUN: not pipe-opt %S/Inputs/schedule-p3.mlir --pipe-schedule="kind=afp advance=-1 microbatches=4" 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not pipe-opt %S/Inputs/schedule-p3.mlir --pipe-schedule="kind=1f1b advance=2 microbatches=4" 2>&1 | FileCheck %s --check-prefix=KIND

// K1: schedule "afp": 3 devices, 4 micro-batches, 12 slots
// K1-NEXT: slot     | 0  1  2  3  4  5  6  7  8  9  10 11
// K1-NEXT: device 0 | F0 F1 F2 F3 .  .  B0 .  B1 .  B2 B3
// K1-NEXT: device 1 | .  F0 F1 F2 .  B0 F3 B1 .  B2 B3 .
// K1-NEXT: device 2 | .  .  F0 F1 B0 F2 B1 F3 B2 B3 .  .
// K1: peak in-flight micro-batches per device: 4 3 2

// IR: pipe.program @device0 device 0 stages [0] schedule "afp" microbatches 4 advance 1 attributes {pipe.peak_in_flight = 4 : i64}
// IR: pipe.program @device2 device 2 stages [2] schedule "afp" microbatches 4 advance 1 attributes {pipe.peak_in_flight = 2 : i64}

// NEG: error: pipe-schedule: advance must be >= 0 (got -1)
// KIND: error: pipe-schedule: advance applies to kind=afp, not '1f1b'
