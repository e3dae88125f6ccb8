// RUN: pipe-opt %s --canonicalize --split-input-file | FileCheck %s

// The Shape -> Gather -> Unsqueeze -> Concat subgraph of a PyTorch
// `x.view(x.size(0), -1)` folds to a constant Reshape target.
// CHECK-LABEL: func @reshape_target
// CHECK-NEXT:    %[[T:.*]] = onnx.Constant {value = dense<[2, -1]> : tensor<2xi64>} : tensor<2xi64>
// CHECK-NEXT:    %[[R:.*]] = onnx.Reshape(%arg0, %[[T]]) : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<?x?xf32>
// CHECK-NEXT:    return %[[R]]
func.func @reshape_target(%x: tensor<2x3x4xf32>) -> tensor<?x?xf32> {
  %s = onnx.Shape(%x) : (tensor<2x3x4xf32>) -> tensor<3xi64>
  %i = onnx.Constant {value = dense<0> : tensor<i64>} : tensor<i64>
  %g = onnx.Gather(%s, %i) {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %a = onnx.Constant {value = dense<0> : tensor<1xi64>} : tensor<1xi64>
  %u = onnx.Unsqueeze(%g, %a) : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %m = onnx.Constant {value = dense<-1> : tensor<1xi64>} : tensor<1xi64>
  %c = onnx.Concat(%u, %m) {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %r = onnx.Reshape(%x, %c) : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

// With a symbolic batch axis, only the static dims fold; the batch stays.
// CHECK-LABEL: func @symbolic_batch
// CHECK-DAG:     %[[TAIL2:.*]] = onnx.Constant {value = dense<[3, 4]> : tensor<2xi64>} : tensor<?xi64>
// CHECK-DAG:     %[[TAIL:.*]] = onnx.Constant {value = dense<[3, 4]> : tensor<2xi64>} : tensor<2xi64>
// CHECK-DAG:     %[[THREE:.*]] = onnx.Constant {value = dense<3> : tensor<i64>} : tensor<i64>
// CHECK-DAG:     %[[S:.*]] = onnx.Shape(%arg0) : (tensor<?x3x4xf32>) -> tensor<3xi64>
// CHECK:         %[[B:.*]] = onnx.Gather(%[[S]], %{{.*}})
// CHECK-NEXT:    return %[[B]], %[[THREE]], %[[TAIL]], %[[TAIL2]]
func.func @symbolic_batch(%x: tensor<?x3x4xf32>) -> (tensor<i64>, tensor<i64>, tensor<2xi64>, tensor<?xi64>) {
  %s = onnx.Shape(%x) : (tensor<?x3x4xf32>) -> tensor<3xi64>
  %i0 = onnx.Constant {value = dense<0> : tensor<i64>} : tensor<i64>
  %i1 = onnx.Constant {value = dense<-2> : tensor<i64>} : tensor<i64>
  %batch = onnx.Gather(%s, %i0) {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %three = onnx.Gather(%s, %i1) {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %b = onnx.Constant {value = dense<1> : tensor<1xi64>} : tensor<1xi64>
  %e = onnx.Constant {value = dense<3> : tensor<1xi64>} : tensor<1xi64>
  %none = onnx.NoValue : none
  %tail = onnx.Slice(%s, %b, %e, %none, %none) : (tensor<3xi64>, tensor<1xi64>, tensor<1xi64>, none, none) -> tensor<2xi64>
  %tail2 = onnx.Shape(%x) {start = 1 : i64} : (tensor<?x3x4xf32>) -> tensor<?xi64>
  return %batch, %three, %tail, %tail2 : tensor<i64>, tensor<i64>, tensor<2xi64>, tensor<?xi64>
}

// -----

// Integer arithmetic folds with broadcasting; division truncates; division by
// zero and float arithmetic stay.
// CHECK-LABEL: func @arith
// CHECK-DAG:     %[[ADD:.*]] = onnx.Constant {value = dense<{{\[\[}}11, 22, 33], [14, 25, 36]]> : tensor<2x3xi64>}
// CHECK-DAG:     %[[SUB:.*]] = onnx.Constant {value = dense<[8, 18, 28]> : tensor<3xi64>}
// CHECK-DAG:     %[[MUL:.*]] = onnx.Constant {value = dense<[16, 36, 56]> : tensor<3xi64>}
// CHECK-DAG:     %[[DIV:.*]] = onnx.Constant {value = dense<[-3, 3]> : tensor<2xi32>}
// CHECK-DAG:     %[[DIVZ:.*]] = onnx.Div(
// CHECK-DAG:     %[[FADD:.*]] = onnx.Add(
// CHECK:         return %[[ADD]], %[[SUB]], %[[MUL]], %[[DIV]], %[[DIVZ]], %[[FADD]]
func.func @arith() -> (tensor<2x3xi64>, tensor<3xi64>, tensor<3xi64>, tensor<2xi32>, tensor<2xi64>, tensor<2xf32>) {
  %a = onnx.Constant {value = dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>} : tensor<2x3xi64>
  %b = onnx.Constant {value = dense<[10, 20, 30]> : tensor<3xi64>} : tensor<3xi64>
  %two = onnx.Constant {value = dense<2> : tensor<i64>} : tensor<i64>
  %add = onnx.Add(%a, %b) : (tensor<2x3xi64>, tensor<3xi64>) -> tensor<2x3xi64>
  %sub = onnx.Sub(%b, %two) : (tensor<3xi64>, tensor<i64>) -> tensor<3xi64>
  %mul = onnx.Mul(%sub, %two) : (tensor<3xi64>, tensor<i64>) -> tensor<3xi64>
  %n = onnx.Constant {value = dense<[-7, 7]> : tensor<2xi32>} : tensor<2xi32>
  %d = onnx.Constant {value = dense<2> : tensor<2xi32>} : tensor<2xi32>
  %div = onnx.Div(%n, %d) : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
  %z = onnx.Constant {value = dense<[1, 0]> : tensor<2xi64>} : tensor<2xi64>
  %divz = onnx.Div(%z, %z) : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  %f = onnx.Constant {value = dense<[1.5, 2.5]> : tensor<2xf32>} : tensor<2xf32>
  %fadd = onnx.Add(%f, %f) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %add, %sub, %mul, %div, %divz, %fadd : tensor<2x3xi64>, tensor<3xi64>, tensor<3xi64>, tensor<2xi32>, tensor<2xi64>, tensor<2xf32>
}

// -----

// CHECK-LABEL: func @logic
// CHECK-DAG:     %[[EQ:.*]] = onnx.Constant {value = dense<[false, true, false]> : tensor<3xi1>}
// CHECK-DAG:     %[[W:.*]] = onnx.Constant {value = dense<[1, 1, 3]> : tensor<3xi64>}
// CHECK-NOT:     onnx.Where
// CHECK:         return %[[EQ]], %[[W]], %arg1
func.func @logic(%x: tensor<3xi64>, %y: tensor<3xi64>) -> (tensor<3xi1>, tensor<3xi64>, tensor<3xi64>) {
  %a = onnx.Constant {value = dense<[1, -1, 3]> : tensor<3xi64>} : tensor<3xi64>
  %m = onnx.Constant {value = dense<-1> : tensor<i64>} : tensor<i64>
  %one = onnx.Constant {value = dense<1> : tensor<3xi64>} : tensor<3xi64>
  %eq = onnx.Equal(%a, %m) : (tensor<3xi64>, tensor<i64>) -> tensor<3xi1>
  %w = onnx.Where(%eq, %one, %a) : (tensor<3xi1>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  %t = onnx.Constant {value = dense<false> : tensor<i1>} : tensor<i1>
  %w2 = onnx.Where(%t, %x, %y) : (tensor<i1>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return %eq, %w, %w2 : tensor<3xi1>, tensor<3xi64>, tensor<3xi64>
}

// -----

// Float to integer truncates; a value out of the target's range is not folded.
// CHECK-LABEL: func @cast
// CHECK-DAG:     %[[F:.*]] = onnx.Constant {value = dense<[1.000000e+00, -2.000000e+00, 0.000000e+00]> : tensor<3xf32>}
// CHECK-DAG:     %[[I:.*]] = onnx.Constant {value = dense<[1, -2, 0]> : tensor<3xi64>}
// CHECK-DAG:     %[[B:.*]] = onnx.Constant {value = dense<[true, true, false]> : tensor<3xi1>}
// CHECK-DAG:     %[[U:.*]] = onnx.Cast(%{{.*}}) {to = 2 : i64} : (tensor<2xf32>) -> tensor<2xui8>
// CHECK:         return %[[F]], %[[I]], %[[B]], %[[U]]
func.func @cast() -> (tensor<3xf32>, tensor<3xi64>, tensor<3xi1>, tensor<2xui8>) {
  %i = onnx.Constant {value = dense<[1, -2, 0]> : tensor<3xi64>} : tensor<3xi64>
  %f = onnx.Constant {value = dense<[1.9, -2.7, 0.0]> : tensor<3xf32>} : tensor<3xf32>
  %0 = onnx.Cast(%i) {to = 1 : i64} : (tensor<3xi64>) -> tensor<3xf32>
  %1 = onnx.Cast(%f) {to = 7 : i64} : (tensor<3xf32>) -> tensor<3xi64>
  %2 = onnx.Cast(%f) {to = 9 : i64} : (tensor<3xf32>) -> tensor<3xi1>
  %big = onnx.Constant {value = dense<[300.0, 1.0]> : tensor<2xf32>} : tensor<2xf32>
  %3 = onnx.Cast(%big) {to = 2 : i64} : (tensor<2xf32>) -> tensor<2xui8>
  return %0, %1, %2, %3 : tensor<3xf32>, tensor<3xi64>, tensor<3xi1>, tensor<2xui8>
}

// -----

// CHECK-LABEL: func @generators
// CHECK-DAG:     %[[Z:.*]] = onnx.Constant {value = dense<0.000000e+00> : tensor<2x3xf32>}
// CHECK-DAG:     %[[FIVE:.*]] = onnx.Constant {value = dense<5> : tensor<2xi32>}
// CHECK-DAG:     %[[R:.*]] = onnx.Constant {value = dense<[10, 7, 4, 1]> : tensor<4xi64>}
// CHECK-DAG:     %[[RF:.*]] = onnx.Constant {value = dense<[5.000000e-01, 1.000000e+00, 1.500000e+00]> : tensor<3xf32>}
// CHECK-DAG:     %[[E:.*]] = onnx.Constant {value = dense<{{\[\[}}1, 1, 1], [2, 2, 2]]> : tensor<2x3xi64>}
// CHECK:         return %[[Z]], %[[FIVE]], %[[R]], %[[RF]], %[[E]]
func.func @generators() -> (tensor<2x3xf32>, tensor<2xi32>, tensor<4xi64>, tensor<3xf32>, tensor<2x3xi64>) {
  %s = onnx.Constant {value = dense<[2, 3]> : tensor<2xi64>} : tensor<2xi64>
  %0 = onnx.ConstantOfShape(%s) : (tensor<2xi64>) -> tensor<2x3xf32>
  %one = onnx.Constant {value = dense<1> : tensor<1xi64>} : tensor<1xi64>
  %c2 = onnx.Constant {value = dense<2> : tensor<1xi64>} : tensor<1xi64>
  %1 = onnx.ConstantOfShape(%c2) {value = dense<5> : tensor<1xi32>} : (tensor<1xi64>) -> tensor<2xi32>
  %a = onnx.Constant {value = dense<10> : tensor<i64>} : tensor<i64>
  %b = onnx.Constant {value = dense<0> : tensor<i64>} : tensor<i64>
  %c = onnx.Constant {value = dense<-3> : tensor<i64>} : tensor<i64>
  %2 = onnx.Range(%a, %b, %c) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<4xi64>
  %fa = onnx.Constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %fb = onnx.Constant {value = dense<2.0> : tensor<f32>} : tensor<f32>
  %fc = onnx.Constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %3 = onnx.Range(%fa, %fb, %fc) : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<3xf32>
  %col = onnx.Constant {value = dense<[[1], [2]]> : tensor<2x1xi64>} : tensor<2x1xi64>
  %4 = onnx.Expand(%col, %s) : (tensor<2x1xi64>, tensor<2xi64>) -> tensor<2x3xi64>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2xi32>, tensor<4xi64>, tensor<3xf32>, tensor<2x3xi64>
}

// -----

// CHECK-LABEL: func @data_movement
// CHECK-DAG:     %[[SQ:.*]] = onnx.Constant {value = dense<[3, 4, 6]> : tensor<3xi64>}
// CHECK-DAG:     %[[SL:.*]] = onnx.Constant {value = dense<{{\[\[}}6], [5]]> : tensor<2x1xi64>}
// CHECK-DAG:     %[[C:.*]] = onnx.Constant {value = dense<{{\[\[}}1, 2, 5], [3, 4, 6]]> : tensor<2x3xi64>}
// CHECK-DAG:     %[[G:.*]] = onnx.Constant {value = dense<[6, 3]> : tensor<2xi64>}
// CHECK:         return %[[C]], %[[G]], %{{.*}}, %[[SL]], %[[SQ]]
func.func @data_movement() -> (tensor<2x3xi64>, tensor<2xi64>, tensor<3x2xi64>, tensor<2x1xi64>, tensor<3xi64>) {
  %a = onnx.Constant {value = dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>} : tensor<2x2xi64>
  %b = onnx.Constant {value = dense<[[5], [6]]> : tensor<2x1xi64>} : tensor<2x1xi64>
  %0 = onnx.Concat(%a, %b) {axis = 1 : i64} : (tensor<2x2xi64>, tensor<2x1xi64>) -> tensor<2x3xi64>
  %i = onnx.Constant {value = dense<[2, 0]> : tensor<2xi64>} : tensor<2xi64>
  %one = onnx.Constant {value = dense<1> : tensor<i64>} : tensor<i64>
  %row = onnx.Gather(%0, %one) : (tensor<2x3xi64>, tensor<i64>) -> tensor<3xi64>
  %1 = onnx.Gather(%row, %i) : (tensor<3xi64>, tensor<2xi64>) -> tensor<2xi64>
  %2 = onnx.Transpose(%0) : (tensor<2x3xi64>) -> tensor<3x2xi64>
  %st = onnx.Constant {value = dense<[-1, 2]> : tensor<2xi64>} : tensor<2xi64>
  %en = onnx.Constant {value = dense<[-3, 0]> : tensor<2xi64>} : tensor<2xi64>
  %ax = onnx.Constant {value = dense<[0, 1]> : tensor<2xi64>} : tensor<2xi64>
  %sp = onnx.Constant {value = dense<[-1, -2]> : tensor<2xi64>} : tensor<2xi64>
  %3 = onnx.Slice(%0, %st, %en, %ax, %sp) : (tensor<2x3xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<2x1xi64>
  %z = onnx.Constant {value = dense<0> : tensor<1xi64>} : tensor<1xi64>
  %u = onnx.Unsqueeze(%row, %z) : (tensor<3xi64>, tensor<1xi64>) -> tensor<1x3xi64>
  %4 = onnx.Squeeze(%u, %z) : (tensor<1x3xi64>, tensor<1xi64>) -> tensor<3xi64>
  return %0, %1, %2, %3, %4 : tensor<2x3xi64>, tensor<2xi64>, tensor<3x2xi64>, tensor<2x1xi64>, tensor<3xi64>
}

// -----

// Identity, an inference-mode Dropout and a no-op Reshape disappear; a
// training-mode Dropout stays.
// CHECK-LABEL: func @passthrough
// CHECK-NOT:     onnx.Identity
// CHECK:         %[[D:.*]] = onnx.Dropout(%arg0,
// CHECK-NOT:     onnx.Reshape
// CHECK:         return %arg0, %[[D]], %arg0
func.func @passthrough(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = onnx.Identity(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %none = onnx.NoValue : none
  %1 = onnx.Dropout(%0, %none, %none) : (tensor<4x8xf32>, none, none) -> tensor<4x8xf32>
  %t = onnx.Constant {value = dense<true> : tensor<i1>} : tensor<i1>
  %2 = onnx.Dropout(%0, %none, %t) : (tensor<4x8xf32>, none, tensor<i1>) -> tensor<4x8xf32>
  %s = onnx.Constant {value = dense<[4, 8]> : tensor<2xi64>} : tensor<2xi64>
  %3 = onnx.Reshape(%1, %s) : (tensor<4x8xf32>, tensor<2xi64>) -> tensor<4x8xf32>
  return %1, %2, %3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Transpose of a small constant folds (PyTorch computes Pad's pads as a
// Transpose of a shape constant); without perm the axes reverse.
// CHECK-LABEL: func @transpose
// CHECK-DAG:     %[[A:.*]] = onnx.Constant {value = dense<{{\[}}[1, 4], [2, 5], [3, 6]]> : tensor<3x2xi64>}
// CHECK-DAG:     %[[B:.*]] = onnx.Constant {value = dense<{{\[}}{{\[}}[1, 3], [5, 7]], {{\[}}[2, 4], [6, 8]]]> : tensor<2x2x2xi64>}
// CHECK-NOT:     onnx.Transpose
// CHECK:         return %[[A]], %[[B]]
func.func @transpose() -> (tensor<3x2xi64>, tensor<2x2x2xi64>) {
  %c = onnx.Constant {value = dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>} : tensor<2x3xi64>
  %0 = onnx.Transpose(%c) {perm = array<i64: 1, 0>} : (tensor<2x3xi64>) -> tensor<3x2xi64>
  %d = onnx.Constant {value = dense<[[[1, 2], [3, 4]], [[5, 6], [7, 8]]]> : tensor<2x2x2xi64>} : tensor<2x2x2xi64>
  %1 = onnx.Transpose(%d) {perm = array<i64: 2, 0, 1>} : (tensor<2x2x2xi64>) -> tensor<2x2x2xi64>
  return %0, %1 : tensor<3x2xi64>, tensor<2x2x2xi64>
}

// -----

// A range whose delta points away from its limit is empty, even where
// limit - start overflows 64 bits.
// CHECK-LABEL: func @range_empty_extremes
// CHECK: onnx.Constant {value = dense<> : tensor<0xi64>}
func.func @range_empty_extremes() -> tensor<?xi64> {
  %s = onnx.Constant {value = dense<-9223372036854775808> : tensor<i64>} : tensor<i64>
  %l = onnx.Constant {value = dense<9223372036854775807> : tensor<i64>} : tensor<i64>
  %d = onnx.Constant {value = dense<-9223372036854775808> : tensor<i64>} : tensor<i64>
  %r = onnx.Range(%s, %l, %d) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  return %r : tensor<?xi64>
}

// -----

// A constant Split folds into its parts (repeat_interleave's exported
// repeat counts: Expand(2, [2]) split into [1, 1]); along axis 1 of a 2-D
// constant with uneven parts, each part keeps its rows' elements.
// CHECK-LABEL: func @split_constant
// CHECK-DAG:     %[[A:.*]] = onnx.Constant {value = dense<{{\[\[}}0], [3]]> : tensor<2x1xi64>} : tensor<2x1xi64>
// CHECK-DAG:     %[[B:.*]] = onnx.Constant {value = dense<{{\[\[}}1, 2], [4, 5]]> : tensor<2x2xi64>} : tensor<2x2xi64>
// CHECK-DAG:     %[[P:.*]] = onnx.Constant {value = dense<2> : tensor<1xi64>} : tensor<1xi64>
// CHECK-NOT:     onnx.Split
// CHECK:         return %[[A]], %[[B]], %[[P]], %[[P]]
func.func @split_constant() -> (tensor<2x1xi64>, tensor<2x2xi64>, tensor<1xi64>, tensor<1xi64>) {
  %m = onnx.Constant {value = dense<[[0, 1, 2], [3, 4, 5]]> : tensor<2x3xi64>} : tensor<2x3xi64>
  %sizes = onnx.Constant {value = dense<[1, 2]> : tensor<2xi64>} : tensor<2xi64>
  %a, %b = onnx.Split(%m, %sizes) {axis = 1 : i64} : (tensor<2x3xi64>, tensor<2xi64>) -> (tensor<2x1xi64>, tensor<2x2xi64>)
  %two = onnx.Constant {value = dense<2> : tensor<2xi64>} : tensor<2xi64>
  %none = "onnx.NoValue"() : () -> none
  %p, %q = onnx.Split(%two, %none) {axis = 0 : i64} : (tensor<2xi64>, none) -> (tensor<1xi64>, tensor<1xi64>)
  return %a, %b, %p, %q : tensor<2x1xi64>, tensor<2x2xi64>, tensor<1xi64>, tensor<1xi64>
}

// -----

// A Split of a value stays.
// CHECK-LABEL: func @split_value
// CHECK: onnx.Split
func.func @split_value(%x: tensor<4xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %none = "onnx.NoValue"() : () -> none
  %a, %b = onnx.Split(%x, %none) {axis = 0 : i64} : (tensor<4xf32>, none) -> (tensor<2xf32>, tensor<2xf32>)
  return %a, %b : tensor<2xf32>, tensor<2xf32>
}

// -----

// Comparisons and logic of constants fold (a Loop body's condition);
// integers compare signed, a NaN compares false.
// CHECK-LABEL: func @compare_logic
// CHECK-DAG: %[[LT:.*]] = onnx.Constant {value = dense<[true, false, false]> : tensor<3xi1>}
// CHECK-DAG: %[[GE:.*]] = onnx.Constant {value = dense<[false, true, true]> : tensor<3xi1>}
// CHECK-DAG: %[[NAN:.*]] = onnx.Constant {value = dense<false> : tensor<2xi1>}
// CHECK-DAG: %[[AND:.*]] = onnx.Constant {value = dense<false> : tensor<3xi1>}
// CHECK-DAG: %[[OR:.*]] = onnx.Constant {value = dense<true> : tensor<3xi1>}
// CHECK-NOT: onnx.Less
// Not(lt) is ge's constant.
// CHECK: return %[[LT]], %[[GE]], %[[NAN]], %[[AND]], %[[OR]], %[[GE]]
func.func @compare_logic() -> (tensor<3xi1>, tensor<3xi1>, tensor<2xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>) {
  %a = onnx.Constant {value = dense<[-5, 2, 7]> : tensor<3xi64>} : tensor<3xi64>
  %b = onnx.Constant {value = dense<2> : tensor<i64>} : tensor<i64>
  %lt = onnx.Less(%a, %b) : (tensor<3xi64>, tensor<i64>) -> tensor<3xi1>
  %ge = onnx.GreaterOrEqual(%a, %b) : (tensor<3xi64>, tensor<i64>) -> tensor<3xi1>
  %x = onnx.Constant {value = dense<[0x7FC00000, 1.0]> : tensor<2xf32>} : tensor<2xf32>
  %y = onnx.Constant {value = dense<[1.0, 2.0]> : tensor<2xf32>} : tensor<2xf32>
  %g = onnx.Greater(%x, %y) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
  %and = onnx.And(%lt, %ge) : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
  %or = onnx.Or(%lt, %ge) : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
  %not = onnx.Not(%lt) : (tensor<3xi1>) -> tensor<3xi1>
  return %lt, %ge, %g, %and, %or, %not : tensor<3xi1>, tensor<3xi1>, tensor<2xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>
}

// -----

// Swin Transformer's shifted-window mask: a ScatterND of constants into
// ConstantOfShape zeros folds (reduction none; a negative index counts from
// the end); so do Mod's integer remainders (Python's sign, and fmod's) and
// a GatherND of constants.
// CHECK-LABEL: func @scatternd_mask
// CHECK-DAG:     onnx.Constant {value = dense<{{\[}}[0, 0, 0], [0, 0, 0], [7, 8, 9], [4, 5, 6]]> : tensor<4x3xi64>}
// CHECK-DAG:     onnx.Constant {value = dense<[2, -1, 0]> : tensor<3xi64>}
// CHECK-DAG:     onnx.Constant {value = dense<[-1, 2, 0]> : tensor<3xi64>}
// CHECK-DAG:     onnx.Constant {value = dense<[0, 9]> : tensor<2xi64>}
// CHECK-NOT:     onnx.ScatterND
// CHECK-NOT:     onnx.GatherND
// CHECK-NOT:     onnx.Mod
func.func @scatternd_mask() -> (tensor<4x3xi64>, tensor<3xi64>, tensor<3xi64>, tensor<2xi64>) {
  %shape = onnx.Constant {value = dense<[4, 3]> : tensor<2xi64>} : tensor<2xi64>
  %zeros = onnx.ConstantOfShape(%shape) {value = dense<0> : tensor<1xi64>} : (tensor<2xi64>) -> tensor<4x3xi64>
  %idx = onnx.Constant {value = dense<[[-1], [2]]> : tensor<2x1xi64>} : tensor<2x1xi64>
  %upd = onnx.Constant {value = dense<[[4, 5, 6], [7, 8, 9]]> : tensor<2x3xi64>} : tensor<2x3xi64>
  %s = onnx.ScatterND(%zeros, %idx, %upd) : (tensor<4x3xi64>, tensor<2x1xi64>, tensor<2x3xi64>) -> tensor<4x3xi64>
  %a = onnx.Constant {value = dense<[-7, 5, 16]> : tensor<3xi64>} : tensor<3xi64>
  %b = onnx.Constant {value = dense<[3, -3, 4]> : tensor<3xi64>} : tensor<3xi64>
  %m = onnx.Mod(%a, %b) : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  %f = onnx.Mod(%a, %b) {fmod = 1 : i64} : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  %gi = onnx.Constant {value = dense<[[1, 2], [2, 2]]> : tensor<2x2xi64>} : tensor<2x2xi64>
  %g = onnx.GatherND(%s, %gi) : (tensor<4x3xi64>, tensor<2x2xi64>) -> tensor<2xi64>
  return %s, %m, %f, %g : tensor<4x3xi64>, tensor<3xi64>, tensor<3xi64>, tensor<2xi64>
}

// -----

// ScatterND with a reduction, or of a non-constant, stays.
// CHECK-LABEL: func @scatternd_no_fold
// CHECK:         onnx.ScatterND(%{{.*}}) {reduction = "add"}
// CHECK:         onnx.ScatterND(%arg0
func.func @scatternd_no_fold(%x: tensor<4x3xi64>) -> (tensor<4x3xi64>, tensor<4x3xi64>) {
  %zeros = onnx.Constant {value = dense<0> : tensor<4x3xi64>} : tensor<4x3xi64>
  %idx = onnx.Constant {value = dense<[[1]]> : tensor<1x1xi64>} : tensor<1x1xi64>
  %upd = onnx.Constant {value = dense<[[4, 5, 6]]> : tensor<1x3xi64>} : tensor<1x3xi64>
  %s = onnx.ScatterND(%zeros, %idx, %upd) {reduction = "add"} : (tensor<4x3xi64>, tensor<1x1xi64>, tensor<1x3xi64>) -> tensor<4x3xi64>
  %t = onnx.ScatterND(%x, %idx, %upd) : (tensor<4x3xi64>, tensor<1x1xi64>, tensor<1x3xi64>) -> tensor<4x3xi64>
  return %s, %t : tensor<4x3xi64>, tensor<4x3xi64>
}
