// Golden time tables of the generated schedules: one row per device, one
// column per slot of a unit-time forward or backward ("." idle), then the
// bubble and the peak in-flight micro-batches (GPipe M; 1F1B min(p-s, M)).
// Cases: p=2 M=2, p=4 M=8, fewer micro-batches than stages (p=4 M=2), odd
// counts (p=3 M=5), one stage; both kinds.

// RUN: pipe-opt %S/Inputs/schedule-p2.mlir --pipe-schedule="kind=gpipe microbatches=2" --pipe-print-schedule -o /dev/null | FileCheck %s --check-prefix=GPIPE-P2-M2
// RUN: pipe-opt %S/Inputs/schedule-p2.mlir --pipe-schedule="kind=1f1b microbatches=2" --pipe-print-schedule -o /dev/null | FileCheck %s --check-prefix=OFOB-P2-M2
// RUN: pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=gpipe microbatches=8" --pipe-print-schedule -o /dev/null | FileCheck %s --check-prefix=GPIPE-P4-M8
// RUN: pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=1f1b microbatches=8" --pipe-print-schedule -o /dev/null | FileCheck %s --check-prefix=OFOB-P4-M8
// RUN: pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=gpipe microbatches=2" --pipe-print-schedule -o /dev/null | FileCheck %s --check-prefix=GPIPE-P4-M2
// RUN: pipe-opt %S/Inputs/schedule-p4.mlir --pipe-schedule="kind=1f1b microbatches=2" --pipe-print-schedule -o /dev/null | FileCheck %s --check-prefix=OFOB-P4-M2
// RUN: pipe-opt %S/Inputs/schedule-p3.mlir --pipe-schedule="kind=gpipe microbatches=5" --pipe-print-schedule -o /dev/null | FileCheck %s --check-prefix=GPIPE-P3-M5
// RUN: pipe-opt %S/Inputs/schedule-p3.mlir --pipe-schedule="kind=1f1b microbatches=5" --pipe-print-schedule -o /dev/null | FileCheck %s --check-prefix=OFOB-P3-M5
// RUN: pipe-opt %S/Inputs/schedule-p1.mlir --pipe-schedule="kind=gpipe microbatches=3" --pipe-print-schedule -o /dev/null | FileCheck %s --check-prefix=GPIPE-P1-M3
// RUN: pipe-opt %S/Inputs/schedule-p1.mlir --pipe-schedule="kind=1f1b microbatches=3" --pipe-print-schedule -o /dev/null | FileCheck %s --check-prefix=OFOB-P1-M3
// RUN: pipe-opt %S/Inputs/schedule-p2.mlir --pipe-schedule="kind=1f1b microbatches=3" --pipe-print-schedule=backward-cost=2 -o /dev/null | FileCheck %s --check-prefix=COST

// GPIPE-P2-M2:      schedule "gpipe": 2 devices, 2 micro-batches, 6 slots; (p-1)/(M+p-1) = 0.333
// GPIPE-P2-M2-NEXT: slot     | 0  1  2  3  4  5
// GPIPE-P2-M2-NEXT: device 0 | F0 F1 .  .  B0 B1
// GPIPE-P2-M2-NEXT: device 1 | .  F0 F1 B0 B1 .
// GPIPE-P2-M2-NEXT: bubble: 4 of 12 slots idle (0.333)
// GPIPE-P2-M2-NEXT: peak in-flight micro-batches per device: 2 2

// OFOB-P2-M2:      schedule "1f1b": 2 devices, 2 micro-batches, 6 slots; (p-1)/(M+p-1) = 0.333
// OFOB-P2-M2-NEXT: slot     | 0  1  2  3  4  5
// OFOB-P2-M2-NEXT: device 0 | F0 F1 .  B0 .  B1
// OFOB-P2-M2-NEXT: device 1 | .  F0 B0 F1 B1 .
// OFOB-P2-M2-NEXT: bubble: 4 of 12 slots idle (0.333)
// OFOB-P2-M2-NEXT: peak in-flight micro-batches per device: 2 1

// GPIPE-P4-M8:      schedule "gpipe": 4 devices, 8 micro-batches, 22 slots; (p-1)/(M+p-1) = 0.273
// GPIPE-P4-M8-NEXT: slot     | 0  1  2  3  4  5  6  7  8  9  10 11 12 13 14 15 16 17 18 19 20 21
// GPIPE-P4-M8-NEXT: device 0 | F0 F1 F2 F3 F4 F5 F6 F7 .  .  .  .  .  .  B0 B1 B2 B3 B4 B5 B6 B7
// GPIPE-P4-M8-NEXT: device 1 | .  F0 F1 F2 F3 F4 F5 F6 F7 .  .  .  .  B0 B1 B2 B3 B4 B5 B6 B7 .
// GPIPE-P4-M8-NEXT: device 2 | .  .  F0 F1 F2 F3 F4 F5 F6 F7 .  .  B0 B1 B2 B3 B4 B5 B6 B7 .  .
// GPIPE-P4-M8-NEXT: device 3 | .  .  .  F0 F1 F2 F3 F4 F5 F6 F7 B0 B1 B2 B3 B4 B5 B6 B7 .  .  .
// GPIPE-P4-M8-NEXT: bubble: 24 of 88 slots idle (0.273)
// GPIPE-P4-M8-NEXT: peak in-flight micro-batches per device: 8 8 8 8

// OFOB-P4-M8:      schedule "1f1b": 4 devices, 8 micro-batches, 22 slots; (p-1)/(M+p-1) = 0.273
// OFOB-P4-M8-NEXT: slot     | 0  1  2  3  4  5  6  7  8  9  10 11 12 13 14 15 16 17 18 19 20 21
// OFOB-P4-M8-NEXT: device 0 | F0 F1 F2 F3 .  .  .  B0 F4 B1 F5 B2 F6 B3 F7 B4 .  B5 .  B6 .  B7
// OFOB-P4-M8-NEXT: device 1 | .  F0 F1 F2 .  .  B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 .  B6 .  B7 .
// OFOB-P4-M8-NEXT: device 2 | .  .  F0 F1 .  B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 .  B7 .  .
// OFOB-P4-M8-NEXT: device 3 | .  .  .  F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 .  .  .
// OFOB-P4-M8-NEXT: bubble: 24 of 88 slots idle (0.273)
// OFOB-P4-M8-NEXT: peak in-flight micro-batches per device: 4 3 2 1

// GPIPE-P4-M2:      schedule "gpipe": 4 devices, 2 micro-batches, 10 slots; (p-1)/(M+p-1) = 0.600
// GPIPE-P4-M2-NEXT: slot     | 0  1  2  3  4  5  6  7  8  9
// GPIPE-P4-M2-NEXT: device 0 | F0 F1 .  .  .  .  .  .  B0 B1
// GPIPE-P4-M2-NEXT: device 1 | .  F0 F1 .  .  .  .  B0 B1 .
// GPIPE-P4-M2-NEXT: device 2 | .  .  F0 F1 .  .  B0 B1 .  .
// GPIPE-P4-M2-NEXT: device 3 | .  .  .  F0 F1 B0 B1 .  .  .
// GPIPE-P4-M2-NEXT: bubble: 24 of 40 slots idle (0.600)
// GPIPE-P4-M2-NEXT: peak in-flight micro-batches per device: 2 2 2 2

// OFOB-P4-M2:      schedule "1f1b": 4 devices, 2 micro-batches, 10 slots; (p-1)/(M+p-1) = 0.600
// OFOB-P4-M2-NEXT: slot     | 0  1  2  3  4  5  6  7  8  9
// OFOB-P4-M2-NEXT: device 0 | F0 F1 .  .  .  .  .  B0 .  B1
// OFOB-P4-M2-NEXT: device 1 | .  F0 F1 .  .  .  B0 .  B1 .
// OFOB-P4-M2-NEXT: device 2 | .  .  F0 F1 .  B0 .  B1 .  .
// OFOB-P4-M2-NEXT: device 3 | .  .  .  F0 B0 F1 B1 .  .  .
// OFOB-P4-M2-NEXT: bubble: 24 of 40 slots idle (0.600)
// OFOB-P4-M2-NEXT: peak in-flight micro-batches per device: 2 2 2 1

// GPIPE-P3-M5:      schedule "gpipe": 3 devices, 5 micro-batches, 14 slots; (p-1)/(M+p-1) = 0.286
// GPIPE-P3-M5-NEXT: slot     | 0  1  2  3  4  5  6  7  8  9  10 11 12 13
// GPIPE-P3-M5-NEXT: device 0 | F0 F1 F2 F3 F4 .  .  .  .  B0 B1 B2 B3 B4
// GPIPE-P3-M5-NEXT: device 1 | .  F0 F1 F2 F3 F4 .  .  B0 B1 B2 B3 B4 .
// GPIPE-P3-M5-NEXT: device 2 | .  .  F0 F1 F2 F3 F4 B0 B1 B2 B3 B4 .  .
// GPIPE-P3-M5-NEXT: bubble: 12 of 42 slots idle (0.286)
// GPIPE-P3-M5-NEXT: peak in-flight micro-batches per device: 5 5 5

// OFOB-P3-M5:      schedule "1f1b": 3 devices, 5 micro-batches, 14 slots; (p-1)/(M+p-1) = 0.286
// OFOB-P3-M5-NEXT: slot     | 0  1  2  3  4  5  6  7  8  9  10 11 12 13
// OFOB-P3-M5-NEXT: device 0 | F0 F1 F2 .  .  B0 F3 B1 F4 B2 .  B3 .  B4
// OFOB-P3-M5-NEXT: device 1 | .  F0 F1 .  B0 F2 B1 F3 B2 F4 B3 .  B4 .
// OFOB-P3-M5-NEXT: device 2 | .  .  F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 .  .
// OFOB-P3-M5-NEXT: bubble: 12 of 42 slots idle (0.286)
// OFOB-P3-M5-NEXT: peak in-flight micro-batches per device: 3 2 1

// GPIPE-P1-M3:      schedule "gpipe": 1 device, 3 micro-batches, 6 slots; (p-1)/(M+p-1) = 0.000
// GPIPE-P1-M3-NEXT: slot     | 0  1  2  3  4  5
// GPIPE-P1-M3-NEXT: device 0 | F0 F1 F2 B0 B1 B2
// GPIPE-P1-M3-NEXT: bubble: 0 of 6 slots idle (0.000)
// GPIPE-P1-M3-NEXT: peak in-flight micro-batches per device: 3

// OFOB-P1-M3:      schedule "1f1b": 1 device, 3 micro-batches, 6 slots; (p-1)/(M+p-1) = 0.000
// OFOB-P1-M3-NEXT: slot     | 0  1  2  3  4  5
// OFOB-P1-M3-NEXT: device 0 | F0 B0 F1 B1 F2 B2
// OFOB-P1-M3-NEXT: bubble: 0 of 6 slots idle (0.000)
// OFOB-P1-M3-NEXT: peak in-flight micro-batches per device: 1

// A backward twice as long as a forward fills two slots.
// COST:      schedule "1f1b": 2 devices, 3 micro-batches, 12 slots; (p-1)/(M+p-1) = 0.250
// COST-NEXT: slot     | 0  1  2  3  4  5  6  7  8  9  10 11
// COST-NEXT: device 0 | F0 F1 .  .  B0 B0 F2 B1 B1 .  B2 B2
// COST-NEXT: device 1 | .  F0 B0 B0 F1 B1 B1 F2 B2 B2 .  .
// COST-NEXT: bubble: 6 of 24 slots idle (0.250)
// COST-NEXT: peak in-flight micro-batches per device: 2 1

// RUN: not pipe-opt %S/Inputs/schedule-p1.mlir --pipe-print-schedule 2>&1 | FileCheck %s --check-prefix=NONE
// NONE: error: pipe-print-schedule: no pipe.program to print
