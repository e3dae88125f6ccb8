// Every case is a part of this file (split-file), run with its own options.
// The cost model constants make a stage's cost (microseconds) its FLOPs x
// (1 + backward factor): peak-gflops=0.001 is 1e6 FLOP/s and memory-gbps=1e9
// makes bytes free.
// RUN: split-file %s %t
// DEFINE: %{cheap} = peak-gflops=0.001 memory-gbps=1000000000

// RUN: pipe-opt %t/mlp.mlir --pipe-assign-stages="stages=2 strategy=balanced %{cheap}" | FileCheck %s --check-prefix=BAL
// RUN: pipe-opt %t/mlp.mlir --pipe-assign-stages="stages=2 strategy=dp %{cheap} link-gbps=1000000000" | FileCheck %s --check-prefix=BAL
// RUN: pipe-opt %t/mlp.mlir --pipe-assign-stages="stages=2 strategy=dp %{cheap} link-gbps=0.000001" | FileCheck %s --check-prefix=DPCOMM
// RUN: pipe-opt %t/mlp.mlir --pipe-assign-stages="strategy=manual cuts=r1,g3" | FileCheck %s --check-prefix=MANUAL
// RUN: pipe-opt %t/mlp.mlir --pipe-assign-stages="stages=1" | FileCheck %s --check-prefix=ONE
// RUN: pipe-opt %t/mlp-user-stages.mlir --pipe-assign-stages="strategy=manual" | FileCheck %s --check-prefix=USER
// RUN: pipe-opt %t/tie.mlir --pipe-assign-stages="stages=2 cut-slack=1000 %{cheap}" | FileCheck %s --check-prefix=TIE
// RUN: pipe-opt %t/decoder.mlir --pipe-assign-stages="stages=2 strategy=layers" | FileCheck %s --check-prefix=LAYERS2
// RUN: pipe-opt %t/decoder.mlir --pipe-assign-stages="stages=3 strategy=layers" | FileCheck %s --check-prefix=LAYERS3
// RUN: pipe-opt %t/costs.mlir --pipe-assign-stages="stages=1 annotate-costs=true" | FileCheck %s --check-prefix=COSTS
// RUN: pipe-opt %t/train-step.mlir --pipe-assign-stages="func-name=train_step strategy=manual cuts=r1,r2" | FileCheck %s --check-prefix=TRAIN

// RUN: not pipe-opt %t/mlp.mlir --pipe-assign-stages="stages=7" 2>&1 | FileCheck %s --check-prefix=TOO-MANY
// RUN: pipe-opt %t/unknown-cut.mlir --pipe-assign-stages="strategy=manual cuts=r1,nope" -verify-diagnostics
// RUN: pipe-opt %t/cut-order.mlir --pipe-assign-stages="strategy=manual cuts=r1,g1" -verify-diagnostics
// RUN: pipe-opt %t/cut-twice.mlir --pipe-assign-stages="strategy=manual cuts=g1,g1" -verify-diagnostics
// RUN: pipe-opt %t/cut-last.mlir --pipe-assign-stages="strategy=manual cuts=r1" -verify-diagnostics
// RUN: pipe-opt %t/cut-count.mlir --pipe-assign-stages="strategy=manual stages=3 cuts=g1" -verify-diagnostics
// RUN: pipe-opt %t/user-empty.mlir --pipe-assign-stages="strategy=manual stages=3" -verify-diagnostics
// RUN: pipe-opt %t/user-backward.mlir --pipe-assign-stages="strategy=manual" -verify-diagnostics
// RUN: pipe-opt %t/user-none.mlir --pipe-assign-stages="strategy=manual" -verify-diagnostics
// RUN: pipe-opt %t/no-blocks.mlir --pipe-assign-stages="stages=2 strategy=layers" -verify-diagnostics
// RUN: pipe-opt %t/few-blocks.mlir --pipe-assign-stages="stages=4 strategy=layers" -verify-diagnostics
// RUN: pipe-opt %t/bad-strategy.mlir --pipe-assign-stages="strategy=random" -verify-diagnostics
// RUN: pipe-opt %t/no-func.mlir --pipe-assign-stages -verify-diagnostics
// RUN: pipe-opt %t/train-no-loss.mlir --pipe-assign-stages="func-name=train_step" -verify-diagnostics

// Costs (FLOPs x 3 for a Gemm, x 2 for a Relu): g1 1572864, r1 8192,
// g2 1572864, r2 2048, g3 196608, g4 196608. Two stages: the cut after r1
// (1581056 | 1968128) beats the one after g2 (3153920 | 395264).
// BAL-LABEL: func.func @forward
// BAL-SAME: %arg1: tensor<256x64xf32> {pipe.param = "w1", pipe.stage = 0 : i64, pipe.trainable}
// BAL-SAME: %arg2: tensor<64x256xf32> {pipe.param = "w2", pipe.stage = 1 : i64, pipe.trainable}
// BAL-SAME: %arg3: tensor<32x64xf32> {pipe.param = "w3", pipe.stage = 1 : i64, pipe.trainable}
// BAL-SAME: %arg4: tensor<64x32xf32> {pipe.param = "w4", pipe.stage = 1 : i64, pipe.trainable}
// BAL-SAME: attributes {pipe.num_stages = 2 : i64, pipe.stage_costs = [{{1581056\.0*[0-9]*}}, {{1968128\.0*[0-9]*}}]}
// BAL: onnx.NoValue {pipe.stage = 0 : i64}
// BAL: onnx.Gemm{{.*}}pipe.stage = 0 : i64
// BAL: onnx.Relu{{.*}}pipe.stage = 0 : i64
// BAL: onnx.Gemm{{.*}}pipe.stage = 1 : i64
// BAL: onnx.Relu{{.*}}pipe.stage = 1 : i64
// BAL: onnx.Gemm{{.*}}pipe.stage = 1 : i64
// BAL: onnx.Gemm{{.*}}pipe.stage = 1 : i64
// BAL: return {pipe.stage = 1 : i64}

// With a slow link, PipeDream's 2 a_s / B term dominates: the cut goes where
// the fewest bytes cross (after g3, 16x32 floats).
// DPCOMM-LABEL: func.func @forward
// DPCOMM-SAME: {pipe.param = "w1", pipe.stage = 0 : i64, pipe.trainable}
// DPCOMM-SAME: {pipe.param = "w2", pipe.stage = 0 : i64, pipe.trainable}
// DPCOMM-SAME: {pipe.param = "w3", pipe.stage = 0 : i64, pipe.trainable}
// DPCOMM-SAME: {pipe.param = "w4", pipe.stage = 1 : i64, pipe.trainable}
// DPCOMM: onnx.Gemm{{.*}}pipe.stage = 0 : i64
// DPCOMM: onnx.Relu{{.*}}pipe.stage = 0 : i64
// DPCOMM: onnx.Gemm{{.*}}pipe.stage = 0 : i64
// DPCOMM: onnx.Relu{{.*}}pipe.stage = 0 : i64
// DPCOMM: onnx.Gemm{{.*}}pipe.stage = 0 : i64
// DPCOMM: onnx.Gemm{{.*}}pipe.stage = 1 : i64

// MANUAL-LABEL: func.func @forward
// MANUAL-SAME: {pipe.param = "w1", pipe.stage = 0 : i64, pipe.trainable}
// MANUAL-SAME: {pipe.param = "w2", pipe.stage = 1 : i64, pipe.trainable}
// MANUAL-SAME: {pipe.param = "w3", pipe.stage = 1 : i64, pipe.trainable}
// MANUAL-SAME: {pipe.param = "w4", pipe.stage = 2 : i64, pipe.trainable}
// MANUAL-SAME: pipe.num_stages = 3 : i64
// MANUAL: onnx.Gemm{{.*}}pipe.stage = 0 : i64
// MANUAL: onnx.Relu{{.*}}pipe.stage = 0 : i64
// MANUAL: onnx.Gemm{{.*}}pipe.stage = 1 : i64
// MANUAL: onnx.Relu{{.*}}pipe.stage = 1 : i64
// MANUAL: onnx.Gemm{{.*}}pipe.stage = 1 : i64
// MANUAL: onnx.Gemm{{.*}}pipe.stage = 2 : i64
// MANUAL: return {pipe.stage = 2 : i64}

// ONE: pipe.num_stages = 1 : i64, pipe.stage_costs = [{{[0-9.E+-]+}}]
// ONE-NOT: pipe.stage = 1

//--- mlp.mlir
func.func @forward(%x: tensor<16x64xf32> {pipe.input = "x"},
                   %w1: tensor<256x64xf32> {pipe.param = "w1", pipe.trainable},
                   %w2: tensor<64x256xf32> {pipe.param = "w2", pipe.trainable},
                   %w3: tensor<32x64xf32> {pipe.param = "w3", pipe.trainable},
                   %w4: tensor<64x32xf32> {pipe.param = "w4", pipe.trainable})
    -> tensor<16x64xf32> {
  %none = onnx.NoValue : none
  %0 = onnx.Gemm(%x, %w1, %none) {transB = 1 : i64} : (tensor<16x64xf32>, tensor<256x64xf32>, none) -> tensor<16x256xf32> loc("g1")
  %1 = onnx.Relu(%0) : (tensor<16x256xf32>) -> tensor<16x256xf32> loc("r1")
  %2 = onnx.Gemm(%1, %w2, %none) {transB = 1 : i64} : (tensor<16x256xf32>, tensor<64x256xf32>, none) -> tensor<16x64xf32> loc("g2")
  %3 = onnx.Relu(%2) : (tensor<16x64xf32>) -> tensor<16x64xf32> loc("r2")
  %4 = onnx.Gemm(%3, %w3, %none) {transB = 1 : i64} : (tensor<16x64xf32>, tensor<32x64xf32>, none) -> tensor<16x32xf32> loc("g3")
  %5 = onnx.Gemm(%4, %w4, %none) {transB = 1 : i64} : (tensor<16x32xf32>, tensor<64x32xf32>, none) -> tensor<16x64xf32> loc("g4")
  return %5 : tensor<16x64xf32>
}

// User-set stages are kept; the other ops follow their operands.
// USER-LABEL: func.func @forward
// USER-SAME: {pipe.param = "w1", pipe.stage = 0 : i64}
// USER-SAME: {pipe.param = "w2", pipe.stage = 1 : i64}
// USER-SAME: {pipe.param = "w3", pipe.stage = 2 : i64}
// USER-SAME: pipe.num_stages = 3 : i64
// USER: onnx.Gemm{{.*}}pipe.stage = 0 : i64
// USER: onnx.Relu{{.*}}pipe.stage = 0 : i64
// USER: onnx.Gemm{{.*}}pipe.stage = 1 : i64
// USER: onnx.Relu{{.*}}pipe.stage = 1 : i64
// USER: onnx.Gemm{{.*}}pipe.stage = 2 : i64
// USER: onnx.Relu{{.*}}pipe.stage = 2 : i64

//--- mlp-user-stages.mlir
func.func @forward(%x: tensor<4x8xf32> {pipe.input = "x"},
                   %w1: tensor<8x8xf32> {pipe.param = "w1"},
                   %w2: tensor<8x8xf32> {pipe.param = "w2"},
                   %w3: tensor<8x8xf32> {pipe.param = "w3"}) -> tensor<4x8xf32> {
  %none = onnx.NoValue : none
  %0 = onnx.Gemm(%x, %w1, %none) : (tensor<4x8xf32>, tensor<8x8xf32>, none) -> tensor<4x8xf32>
  %1 = onnx.Relu(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = onnx.Gemm(%1, %w2, %none) {pipe.stage = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, none) -> tensor<4x8xf32>
  %3 = onnx.Relu(%2) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = onnx.Gemm(%3, %w3, %none) {pipe.stage = 2 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, none) -> tensor<4x8xf32>
  %5 = onnx.Relu(%4) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %5 : tensor<4x8xf32>
}

// Cutting after g1 or after the slice costs the same (g1 dominates either
// way); the slice's output is 32 times smaller, so the cut goes there.
// TIE-LABEL: func.func @forward
// TIE: onnx.Gemm{{.*}}pipe.stage = 0 : i64
// TIE: onnx.Slice{{.*}}pipe.stage = 0 : i64
// TIE: onnx.Gemm{{.*}}pipe.stage = 1 : i64

//--- tie.mlir
func.func @forward(%x: tensor<16x64xf32> {pipe.input = "x"},
                   %w1: tensor<256x64xf32> {pipe.param = "w1"},
                   %w2: tensor<256x8xf32> {pipe.param = "w2"}) -> tensor<16x256xf32> {
  %none = onnx.NoValue : none
  %start = onnx.Constant {value = dense<0> : tensor<1xi64>} : tensor<1xi64>
  %end = onnx.Constant {value = dense<8> : tensor<1xi64>} : tensor<1xi64>
  %axis = onnx.Constant {value = dense<1> : tensor<1xi64>} : tensor<1xi64>
  %0 = onnx.Gemm(%x, %w1, %none) {transB = 1 : i64} : (tensor<16x64xf32>, tensor<256x64xf32>, none) -> tensor<16x256xf32>
  %1 = onnx.Slice(%0, %start, %end, %axis, %none) : (tensor<16x256xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<16x8xf32>
  %2 = onnx.Gemm(%1, %w2, %none) {transB = 1 : i64} : (tensor<16x8xf32>, tensor<256x8xf32>, none) -> tensor<16x256xf32>
  return %2 : tensor<16x256xf32>
}

// Four blocks: two per stage; the embedding with the first stage, the head
// with the last. The embedding table is tied to the head: owned by stage 0,
// used by both; its transpose (weights only) goes with its user.
// LAYERS2-LABEL: func.func @forward
// LAYERS2-SAME: %arg1: tensor<16x32xf32> {pipe.param = "emb", pipe.stage = 0 : i64, pipe.tied_stages = [0, 1], pipe.trainable}
// LAYERS2-SAME: {pipe.param = "b0", pipe.stage = 0 : i64}
// LAYERS2-SAME: {pipe.param = "b1", pipe.stage = 0 : i64}
// LAYERS2-SAME: {pipe.param = "b2", pipe.stage = 1 : i64}
// LAYERS2-SAME: {pipe.param = "b3", pipe.stage = 1 : i64}
// LAYERS2: onnx.Gather{{.*}}pipe.stage = 0 : i64
// LAYERS2: onnx.MatMul{{.*}}pipe.stage = 0 : i64
// LAYERS2: onnx.Add{{.*}}pipe.stage = 0 : i64
// LAYERS2: onnx.MatMul{{.*}}pipe.stage = 0 : i64
// LAYERS2: onnx.Add{{.*}}pipe.stage = 0 : i64
// LAYERS2: onnx.MatMul{{.*}}pipe.stage = 1 : i64
// LAYERS2: onnx.Add{{.*}}pipe.stage = 1 : i64
// LAYERS2: onnx.MatMul{{.*}}pipe.stage = 1 : i64
// LAYERS2: onnx.Add{{.*}}pipe.stage = 1 : i64
// LAYERS2: onnx.LayerNormalization{{.*}}pipe.stage = 1 : i64
// LAYERS2: onnx.Transpose{{.*}}pipe.stage = 1 : i64
// LAYERS2: onnx.MatMul{{.*}}pipe.stage = 1 : i64

// Four blocks on three stages: 2, 1, 1.
// LAYERS3-LABEL: func.func @forward
// LAYERS3-SAME: {pipe.param = "emb", pipe.stage = 0 : i64, pipe.tied_stages = [0, 2], pipe.trainable}
// LAYERS3-SAME: {pipe.param = "b0", pipe.stage = 0 : i64}
// LAYERS3-SAME: {pipe.param = "b1", pipe.stage = 0 : i64}
// LAYERS3-SAME: {pipe.param = "b2", pipe.stage = 1 : i64}
// LAYERS3-SAME: {pipe.param = "b3", pipe.stage = 2 : i64}
// LAYERS3-SAME: pipe.num_stages = 3 : i64
// LAYERS3: onnx.Gather{{.*}}pipe.stage = 0 : i64
// LAYERS3-COUNT-4: pipe.stage = 0 : i64
// LAYERS3-NEXT: onnx.MatMul{{.*}}pipe.stage = 1 : i64
// LAYERS3-NEXT: onnx.Add{{.*}}pipe.stage = 1 : i64
// LAYERS3-NEXT: onnx.MatMul{{.*}}pipe.stage = 2 : i64
// LAYERS3: return {pipe.stage = 2 : i64}

//--- decoder.mlir
func.func @forward(%tokens: tensor<4x8xi64> {pipe.input = "tokens"},
                   %emb: tensor<16x32xf32> {pipe.param = "emb", pipe.trainable},
                   %b0: tensor<32x32xf32> {pipe.param = "b0"},
                   %b1: tensor<32x32xf32> {pipe.param = "b1"},
                   %b2: tensor<32x32xf32> {pipe.param = "b2"},
                   %b3: tensor<32x32xf32> {pipe.param = "b3"},
                   %scale: tensor<32xf32> {pipe.param = "ln.weight"}) -> tensor<4x8x16xf32> {
  %none = onnx.NoValue : none
  %e = onnx.Gather(%emb, %tokens) : (tensor<16x32xf32>, tensor<4x8xi64>) -> tensor<4x8x32xf32> loc("/tok/Gather")
  %m0 = onnx.MatMul(%e, %b0) : (tensor<4x8x32xf32>, tensor<32x32xf32>) -> tensor<4x8x32xf32> loc("/blocks.0/fc/MatMul")
  %h0 = onnx.Add(%e, %m0) : (tensor<4x8x32xf32>, tensor<4x8x32xf32>) -> tensor<4x8x32xf32> loc("/blocks.0/Add")
  %m1 = onnx.MatMul(%h0, %b1) : (tensor<4x8x32xf32>, tensor<32x32xf32>) -> tensor<4x8x32xf32> loc("/blocks.1/fc/MatMul")
  %h1 = onnx.Add(%h0, %m1) : (tensor<4x8x32xf32>, tensor<4x8x32xf32>) -> tensor<4x8x32xf32> loc("/blocks.1/Add")
  %m2 = onnx.MatMul(%h1, %b2) : (tensor<4x8x32xf32>, tensor<32x32xf32>) -> tensor<4x8x32xf32> loc("/blocks.2/fc/MatMul")
  %h2 = onnx.Add(%h1, %m2) : (tensor<4x8x32xf32>, tensor<4x8x32xf32>) -> tensor<4x8x32xf32> loc("/blocks.2/Add")
  %m3 = onnx.MatMul(%h2, %b3) : (tensor<4x8x32xf32>, tensor<32x32xf32>) -> tensor<4x8x32xf32> loc("/blocks.3/fc/MatMul")
  %h3 = onnx.Add(%h2, %m3) : (tensor<4x8x32xf32>, tensor<4x8x32xf32>) -> tensor<4x8x32xf32> loc("/blocks.3/Add")
  %n = onnx.LayerNormalization(%h3, %scale, %none) : (tensor<4x8x32xf32>, tensor<32xf32>, none) -> tensor<4x8x32xf32> loc("/ln/LayerNormalization")
  %t = onnx.Transpose(%emb) {perm = array<i64: 1, 0>} : (tensor<16x32xf32>) -> tensor<32x16xf32> loc("/head/Transpose")
  %logits = onnx.MatMul(%n, %t) : (tensor<4x8x32xf32>, tensor<32x16xf32>) -> tensor<4x8x16xf32> loc("/head/MatMul")
  return %logits : tensor<4x8x16xf32>
}

// The cost model's numbers (forward): Gemm 2mnk + mn for the bias; Conv
// 2 N Cout H W (Cin/g) kh kw (+ N Cout H W for the bias); batched MatMul
// 2 x elements(Y) x K; elementwise one per element; data movement only bytes.
// COSTS: onnx.Gemm{{.*}}pipe.cost = {backward_factor = 2.000000e+00 : f64, bytes = 11520 : i64, flops = 33280 : i64, param_bytes = 8448 : i64}
// COSTS: onnx.Conv{{.*}}pipe.cost = {backward_factor = 2.000000e+00 : f64, bytes = 89344 : i64, flops = 1013760 : i64, param_bytes = 1792 : i64}
// COSTS: onnx.Conv{{.*}}pipe.cost = {backward_factor = 2.000000e+00 : f64, bytes = 17984 : i64, flops = 82944 : i64, param_bytes = 576 : i64}
// COSTS: onnx.MatMul{{.*}}pipe.cost = {backward_factor = 2.000000e+00 : f64, bytes = 10240 : i64, flops = 16384 : i64, param_bytes = 0 : i64}
// COSTS: onnx.Relu{{.*}}pipe.cost = {backward_factor = 1.000000e+00 : f64, bytes = 4096 : i64, flops = 512 : i64, param_bytes = 0 : i64}
// COSTS: onnx.Transpose{{.*}}pipe.cost = {backward_factor = 1.000000e+00 : f64, bytes = 4096 : i64, flops = 0 : i64, param_bytes = 0 : i64}

//--- costs.mlir
func.func @forward(%a: tensor<8x32xf32> {pipe.input = "a"},
                   %w: tensor<64x32xf32> {pipe.param = "w"},
                   %b: tensor<64xf32> {pipe.param = "b"},
                   %x: tensor<8x3x12x12xf32> {pipe.input = "x"},
                   %k: tensor<16x3x3x3xf32> {pipe.param = "k"},
                   %kb: tensor<16xf32> {pipe.param = "kb"},
                   %x2: tensor<8x4x8x8xf32> {pipe.input = "x2"},
                   %k2: tensor<8x2x3x3xf32> {pipe.param = "k2"},
                   %p: tensor<2x4x8x16xf32> {pipe.input = "p"},
                   %q: tensor<2x4x16x8xf32> {pipe.input = "q"})
    -> (tensor<8x64xf32>, tensor<8x16x12x12xf32>, tensor<8x8x6x6xf32>, tensor<2x4x8x8xf32>) {
  %none = onnx.NoValue : none
  %0 = onnx.Gemm(%a, %w, %b) {transB = 1 : i64} : (tensor<8x32xf32>, tensor<64x32xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  %1 = onnx.Conv(%x, %k, %kb) {pads = array<i64: 1, 1, 1, 1>} : (tensor<8x3x12x12xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<8x16x12x12xf32>
  %2 = onnx.Conv(%x2, %k2, %none) {group = 2 : i64} : (tensor<8x4x8x8xf32>, tensor<8x2x3x3xf32>, none) -> tensor<8x8x6x6xf32>
  %3 = onnx.MatMul(%p, %q) : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %4 = onnx.Relu(%3) : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %5 = onnx.Transpose(%4) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %0, %1, %2, %5 : tensor<8x64xf32>, tensor<8x16x12x12xf32>, tensor<8x8x6x6xf32>, tensor<2x4x8x8xf32>
}

// A training step: the forward ops (those the pipe.loss result depends on)
// are partitioned; each backward op goes with the forward op whose location
// it carries, each update with its parameter's owner; a weight's transpose
// goes with its user.
// TRAIN-LABEL: func.func @train_step
// TRAIN-SAME: {pipe.param = "w1", pipe.stage = 0 : i64, pipe.trainable}
// TRAIN-SAME: {pipe.param = "w2", pipe.stage = 1 : i64, pipe.trainable}
// TRAIN-SAME: {pipe.param = "w3", pipe.stage = 2 : i64, pipe.trainable}
// TRAIN-SAME: pipe.num_stages = 3 : i64
// TRAIN:      %[[G1:.*]] = onnx.MatMul{{.*}}pipe.stage = 0 : i64
// TRAIN-NEXT: onnx.Relu{{.*}}pipe.stage = 0 : i64
// TRAIN-NEXT: onnx.MatMul{{.*}}pipe.stage = 1 : i64
// TRAIN-NEXT: onnx.Relu{{.*}}pipe.stage = 1 : i64
// TRAIN-NEXT: onnx.MatMul{{.*}}pipe.stage = 2 : i64
// TRAIN-NEXT: onnx.ReduceSum{{.*}}pipe.stage = 2 : i64
// TRAIN-NEXT: onnx.Constant{{.*}}pipe.stage = 2 : i64
// TRAIN-NEXT: onnx.Transpose{{.*}}pipe.stage = 2 : i64
// TRAIN-NEXT: onnx.MatMul{{.*}}pipe.stage = 2 : i64
// TRAIN-NEXT: onnx.Transpose{{.*}}pipe.stage = 2 : i64
// TRAIN-NEXT: onnx.MatMul{{.*}}pipe.stage = 2 : i64
// TRAIN-NEXT: onnx.ReluGrad{{.*}}pipe.stage = 1 : i64
// TRAIN-NEXT: onnx.Transpose{{.*}}pipe.stage = 1 : i64
// TRAIN-NEXT: onnx.MatMul{{.*}}pipe.stage = 1 : i64
// TRAIN-NEXT: onnx.Transpose{{.*}}pipe.stage = 1 : i64
// TRAIN-NEXT: onnx.MatMul{{.*}}pipe.stage = 1 : i64
// TRAIN-NEXT: onnx.ReluGrad(%[[G1]], {{.*}}pipe.stage = 0 : i64
// TRAIN-NEXT: onnx.Transpose{{.*}}pipe.stage = 0 : i64
// TRAIN-NEXT: onnx.MatMul{{.*}}pipe.stage = 0 : i64
// TRAIN-NEXT: onnx.Sub{{.*}}pipe.stage = 0 : i64
// TRAIN-NEXT: onnx.Sub{{.*}}pipe.stage = 1 : i64
// TRAIN-NEXT: onnx.Sub{{.*}}pipe.stage = 2 : i64

//--- train-step.mlir
func.func @train_step(%x: tensor<4x8xf32> {pipe.input = "x"},
                      %w1: tensor<8x8xf32> {pipe.param = "w1", pipe.trainable},
                      %w2: tensor<8x8xf32> {pipe.param = "w2", pipe.trainable},
                      %w3: tensor<8x8xf32> {pipe.param = "w3", pipe.trainable})
    -> (tensor<f32> {pipe.loss}, tensor<8x8xf32> {pipe.update = "w1"},
        tensor<8x8xf32> {pipe.update = "w2"}, tensor<8x8xf32> {pipe.update = "w3"}) {
  %none = onnx.NoValue : none
  %0 = onnx.MatMul(%x, %w1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("g1")
  %1 = onnx.Relu(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("r1")
  %2 = onnx.MatMul(%1, %w2) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("g2")
  %3 = onnx.Relu(%2) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("r2")
  %4 = onnx.MatMul(%3, %w3) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("g3")
  %loss = onnx.ReduceSum(%4, %none) {keepdims = 0 : i64} : (tensor<4x8xf32>, none) -> tensor<f32> loc("loss")
  %d4 = onnx.Constant {value = dense<1.0> : tensor<4x8xf32>} : tensor<4x8xf32> loc("loss")
  %w3t = onnx.Transpose(%w3) {perm = array<i64: 1, 0>} : (tensor<8x8xf32>) -> tensor<8x8xf32> loc("g3")
  %d3 = onnx.MatMul(%d4, %w3t) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("g3")
  %a3t = onnx.Transpose(%3) {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32> loc("g3")
  %dw3 = onnx.MatMul(%a3t, %d4) : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32> loc("g3")
  %d2 = onnx.ReluGrad(%2, %d3) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("r2")
  %w2t = onnx.Transpose(%w2) {perm = array<i64: 1, 0>} : (tensor<8x8xf32>) -> tensor<8x8xf32> loc("g2")
  %d1 = onnx.MatMul(%d2, %w2t) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("g2")
  %a1t = onnx.Transpose(%1) {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32> loc("g2")
  %dw2 = onnx.MatMul(%a1t, %d2) : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32> loc("g2")
  %d0 = onnx.ReluGrad(%0, %d1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("r1")
  %xt = onnx.Transpose(%x) {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32> loc("g1")
  %dw1 = onnx.MatMul(%xt, %d0) : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32> loc("g1")
  %n1 = onnx.Sub(%w1, %dw1) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32> loc("update")
  %n2 = onnx.Sub(%w2, %dw2) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32> loc("update")
  %n3 = onnx.Sub(%w3, %dw3) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32> loc("update")
  return %loss, %n1, %n2, %n3 : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}

//--- train-no-loss.mlir
// expected-error @+1 {{@train_step is a training step (it has pipe.grad/pipe.update results) but no pipe.loss result}}
func.func @train_step(%x: tensor<4x8xf32> {pipe.input = "x"}, %w: tensor<4x8xf32> {pipe.param = "w"})
    -> (tensor<4x8xf32> {pipe.update = "w"}) {
  %0 = onnx.Sub(%w, %x) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// TOO-MANY: error: cannot split @forward into 7 stages: it has only 6 op(s) on per-sample data

//--- unknown-cut.mlir
// expected-error @+1 {{unknown cut 'nope': no op of @forward has that node name; names are like 'g1', 'r1'}}
func.func @forward(%x: tensor<4x8xf32> {pipe.input = "x"}, %w: tensor<8x8xf32> {pipe.param = "w"}) -> tensor<4x8xf32> {
  %none = onnx.NoValue : none
  %0 = onnx.Gemm(%x, %w, %none) : (tensor<4x8xf32>, tensor<8x8xf32>, none) -> tensor<4x8xf32> loc("g1")
  %1 = onnx.Relu(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("r1")
  %2 = onnx.Relu(%1) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

//--- cut-order.mlir
// expected-error @+1 {{cut 'g1' comes before the previous cut 'r1': list cuts in program order}}
func.func @forward(%x: tensor<4x8xf32> {pipe.input = "x"}, %w: tensor<8x8xf32> {pipe.param = "w"}) -> tensor<4x8xf32> {
  %none = onnx.NoValue : none
  %0 = onnx.Gemm(%x, %w, %none) : (tensor<4x8xf32>, tensor<8x8xf32>, none) -> tensor<4x8xf32> loc("g1")
  %1 = onnx.Relu(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("r1")
  %2 = onnx.Relu(%1) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

//--- cut-twice.mlir
// expected-error @+1 {{cut 'g1' leaves stage 1 empty}}
func.func @forward(%x: tensor<4x8xf32> {pipe.input = "x"}, %w: tensor<8x8xf32> {pipe.param = "w"}) -> tensor<4x8xf32> {
  %none = onnx.NoValue : none
  %0 = onnx.Gemm(%x, %w, %none) : (tensor<4x8xf32>, tensor<8x8xf32>, none) -> tensor<4x8xf32> loc("g1")
  %1 = onnx.Relu(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("r1")
  return %1 : tensor<4x8xf32>
}

//--- cut-last.mlir
// expected-error @+1 {{cut 'r1' leaves stage 1 (the last) empty: no op computes after it}}
func.func @forward(%x: tensor<4x8xf32> {pipe.input = "x"}, %w: tensor<8x8xf32> {pipe.param = "w"}) -> tensor<4x8xf32> {
  %none = onnx.NoValue : none
  %0 = onnx.Gemm(%x, %w, %none) : (tensor<4x8xf32>, tensor<8x8xf32>, none) -> tensor<4x8xf32> loc("g1")
  %1 = onnx.Relu(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("r1")
  return %1 : tensor<4x8xf32>
}

//--- cut-count.mlir
// expected-error @+1 {{1 cut(s) make 2 stages, but stages = 3}}
func.func @forward(%x: tensor<4x8xf32> {pipe.input = "x"}, %w: tensor<8x8xf32> {pipe.param = "w"}) -> tensor<4x8xf32> {
  %none = onnx.NoValue : none
  %0 = onnx.Gemm(%x, %w, %none) : (tensor<4x8xf32>, tensor<8x8xf32>, none) -> tensor<4x8xf32> loc("g1")
  %1 = onnx.Relu(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("r1")
  return %1 : tensor<4x8xf32>
}

//--- user-empty.mlir
// expected-error @+1 {{the manual partition leaves stage 1 of 3 empty}}
func.func @forward(%x: tensor<4x8xf32> {pipe.input = "x"}, %w: tensor<8x8xf32> {pipe.param = "w"}) -> tensor<4x8xf32> {
  %none = onnx.NoValue : none
  %0 = onnx.Gemm(%x, %w, %none) : (tensor<4x8xf32>, tensor<8x8xf32>, none) -> tensor<4x8xf32>
  %1 = onnx.Relu(%0) {pipe.stage = 2 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

//--- user-backward.mlir
func.func @forward(%x: tensor<4x8xf32> {pipe.input = "x"}, %w: tensor<8x8xf32> {pipe.param = "w"}) -> tensor<4x8xf32> {
  %none = onnx.NoValue : none
  %0 = onnx.Gemm(%x, %w, %none) {pipe.stage = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, none) -> tensor<4x8xf32>
  // expected-error @+1 {{is in stage 0 but an operand comes from stage 1: values must flow to the same or a later stage}}
  %1 = onnx.Relu(%0) {pipe.stage = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

//--- user-none.mlir
// expected-error @+1 {{strategy=manual needs cuts=<node>,... or pipe.stage attributes on the ops of @forward}}
func.func @forward(%x: tensor<4x8xf32> {pipe.input = "x"}) -> tensor<4x8xf32> {
  %0 = onnx.Relu(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

//--- no-blocks.mlir
// expected-error @+1 {{strategy=layers found no repeated block in @forward: no two ops are named like '/blocks.<i>/...', 'layers.<i>.'}}
func.func @forward(%x: tensor<4x8xf32> {pipe.input = "x"}) -> tensor<4x8xf32> {
  %0 = onnx.Relu(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("/fc1/Relu")
  %1 = onnx.Relu(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("/fc2/Relu")
  %2 = onnx.Relu(%1) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("/fc3/Relu")
  return %2 : tensor<4x8xf32>
}

//--- few-blocks.mlir
// expected-error @+1 {{strategy=layers found 3 blocks ('model.layers.0' ... 'model.layers.2') but 4 stages need at least one block each}}
func.func @forward(%x: tensor<4x8xf32> {pipe.input = "x"}) -> tensor<4x8xf32> {
  %0 = onnx.Relu(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("model.layers.0.act")
  %1 = onnx.Relu(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("model.layers.1.act")
  %2 = onnx.Relu(%1) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("model.layers.2.act")
  %3 = onnx.Relu(%2) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("head")
  %4 = onnx.Relu(%3) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("loss")
  return %4 : tensor<4x8xf32>
}

//--- bad-strategy.mlir
// expected-error @+1 {{unknown partition strategy 'random' (balanced, dp, manual or layers)}}
func.func @forward(%x: tensor<4x8xf32> {pipe.input = "x"}) -> tensor<4x8xf32> {
  %0 = onnx.Relu(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

//--- no-func.mlir
// expected-error @+1 {{pipe-assign-stages: no function @forward with a body to partition}}
module {
  func.func @train_step(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    return %x : tensor<4x8xf32>
  }
}
