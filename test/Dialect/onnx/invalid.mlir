// RUN: pipe-opt %s -split-input-file -verify-diagnostics

func.func @add_no_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{operand shapes do not broadcast: dimension 1 is 3 and 4}}
  %0 = onnx.Add(%a, %b) : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @sub_element_types(%a: tensor<3xf32>, %b: tensor<3xi64>) {
  // expected-error @+1 {{operands have different element types 'f32' and 'i64'}}
  %0 = onnx.Sub(%a, %b) : (tensor<3xf32>, tensor<3xi64>) -> tensor<3xf32>
  return
}

// -----

func.func @mul_wrong_result(%a: tensor<2x1xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<2x1xf32>' but its operands give 'tensor<2x3xf32>'}}
  %0 = onnx.Mul(%a, %b) : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x1xf32>
  return
}

// -----

func.func @equal_result_type(%a: tensor<3xi64>) {
  // expected-error @+1 {{result #0 has element type 'i64' but should be 'i1'}}
  %0 = onnx.Equal(%a, %a) : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return
}

// -----

func.func @where_types(%c: tensor<3xi1>, %x: tensor<3xf32>, %y: tensor<3xf16>) {
  // expected-error @+1 {{X and Y have different element types 'f32' and 'f16'}}
  %0 = onnx.Where(%c, %x, %y) : (tensor<3xi1>, tensor<3xf32>, tensor<3xf16>) -> tensor<3xf32>
  return
}

// -----

func.func @tanh_int(%x: tensor<3xi32>) {
  // expected-error @+1 {{operand #0 must be tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values}}
  %0 = onnx.Tanh(%x) : (tensor<3xi32>) -> tensor<3xi32>
  return
}

// -----

func.func @cast_unknown(%x: tensor<3xf32>) {
  // expected-error @+1 {{'to' is 8, not an ONNX data type code this compiler knows}}
  %0 = onnx.Cast(%x) {to = 8 : i64} : (tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @cast_wrong_element(%x: tensor<3xf32>) {
  // expected-error @+1 {{result #0 has element type 'i32' but should be 'i64'}}
  %0 = onnx.Cast(%x) {to = 7 : i64} : (tensor<3xf32>) -> tensor<3xi32>
  return
}

// -----

func.func @gemm_inner(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{inner dimensions differ: 8 and 16}}
  %0 = onnx.Gemm(%a, %b, %none) : (tensor<4x8xf32>, tensor<16x8xf32>, none) -> tensor<4x8xf32>
  return
}

// -----

func.func @matmul_inner(%a: tensor<2x4x8xf32>, %b: tensor<7x5xf32>) {
  // expected-error @+1 {{inner dimensions differ: 8 and 7}}
  %0 = onnx.MatMul(%a, %b) : (tensor<2x4x8xf32>, tensor<7x5xf32>) -> tensor<2x4x5xf32>
  return
}

// -----

func.func @softmax_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = onnx.Softmax(%x) {axis = 2 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_scale(%x: tensor<2x5x8xf32>, %s: tensor<5xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{Scale of type 'tensor<5xf32>' does not broadcast to the normalized shape [8]}}
  %0 = onnx.LayerNormalization(%x, %s, %none) : (tensor<2x5x8xf32>, tensor<5xf32>, none) -> tensor<2x5x8xf32>
  return
}

// -----

func.func @layer_norm_results(%x: tensor<2x8xf32>, %s: tensor<8xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{has 3 optional results, at most 2 (Mean, InvStdDev)}}
  %0:4 = onnx.LayerNormalization(%x, %s, %none) : (tensor<2x8xf32>, tensor<8xf32>, none) -> (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return
}

// -----

func.func @layer_norm_stats(%x: tensor<2x8xf32>, %s: tensor<8xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{result #1 has type 'tensor<2x8xf32>' but its operands give 'tensor<2x1xf32>'}}
  %0:2 = onnx.LayerNormalization(%x, %s, %none) : (tensor<2x8xf32>, tensor<8xf32>, none) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @layer_norm_stash(%x: tensor<2x8xf32>, %s: tensor<8xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{stash_type 7 is not a floating-point ONNX data type code}}
  %0 = onnx.LayerNormalization(%x, %s, %none) {stash_type = 7 : i64} : (tensor<2x8xf32>, tensor<8xf32>, none) -> tensor<2x8xf32>
  return
}

// -----

func.func @batch_norm_channels(%x: tensor<4x3x8x8xf32>, %c: tensor<3xf32>, %d: tensor<4xf32>) {
  // expected-error @+1 {{input_var must be 1-D of the channel count 3, got 'tensor<4xf32>'}}
  %0 = onnx.BatchNormalization(%x, %c, %c, %c, %d) : (tensor<4x3x8x8xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<4xf32>) -> tensor<4x3x8x8xf32>
  return
}

// -----

func.func @batch_norm_inference_stats(%x: tensor<4x3x8x8xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{running_mean and running_var are outputs only with training_mode = 1}}
  %0:3 = onnx.BatchNormalization(%x, %c, %c, %c, %c) : (tensor<4x3x8x8xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3x8x8xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @conv_channels(%x: tensor<2x4x8x8xf32>, %w: tensor<16x3x3x3xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{X has 4 channels but W expects 3 x group 1}}
  %0 = onnx.Conv(%x, %w, %none) : (tensor<2x4x8x8xf32>, tensor<16x3x3x3xf32>, none) -> tensor<2x16x6x6xf32>
  return
}

// -----

func.func @conv_group(%x: tensor<2x4x8x8xf32>, %w: tensor<6x2x3x3xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{W's 6 output channels are not a multiple of group 4}}
  %0 = onnx.Conv(%x, %w, %none) {group = 4 : i64} : (tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32>, none) -> tensor<2x6x6x6xf32>
  return
}

// -----

func.func @conv_auto_pad(%x: tensor<2x3x8x8xf32>, %w: tensor<16x3x3x3xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got 'SAME'}}
  %0 = onnx.Conv(%x, %w, %none) {auto_pad = "SAME"} : (tensor<2x3x8x8xf32>, tensor<16x3x3x3xf32>, none) -> tensor<2x16x8x8xf32>
  return
}

// -----

func.func @conv_pads(%x: tensor<2x3x8x8xf32>, %w: tensor<16x3x3x3xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{pads has 2 values but needs 4}}
  %0 = onnx.Conv(%x, %w, %none) {pads = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<16x3x3x3xf32>, none) -> tensor<2x16x8x8xf32>
  return
}

// -----

func.func @conv_output(%x: tensor<2x3x8x8xf32>, %w: tensor<16x3x3x3xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<2x16x8x8xf32>' but its operands give 'tensor<2x16x3x3xf32>'}}
  %0 = onnx.Conv(%x, %w, %b) {strides = array<i64: 2, 2>} : (tensor<2x3x8x8xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<2x16x8x8xf32>
  return
}

// -----

func.func @conv_bias(%x: tensor<2x3x8x8xf32>, %w: tensor<16x3x3x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{B must be 1-D of W's output channel count, got 'tensor<3xf32>'}}
  %0 = onnx.Conv(%x, %w, %b) : (tensor<2x3x8x8xf32>, tensor<16x3x3x3xf32>, tensor<3xf32>) -> tensor<2x16x6x6xf32>
  return
}

// -----

func.func @conv_kernel_too_big(%x: tensor<1x1x2x2xf32>, %w: tensor<1x1x3x3xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{window of size 3 does not fit spatial dimension 0 of size 2 (padded to 2)}}
  %0 = onnx.Conv(%x, %w, %none) : (tensor<1x1x2x2xf32>, tensor<1x1x3x3xf32>, none) -> tensor<1x1x1x1xf32>
  return
}

// -----

func.func @maxpool_kernel_rank(%x: tensor<1x3x8x8xf32>) {
  // expected-error @+1 {{kernel_shape has 1 dimensions but X 'tensor<1x3x8x8xf32>' has 2 spatial dimensions}}
  %0 = onnx.MaxPool(%x) {kernel_shape = array<i64: 2>} : (tensor<1x3x8x8xf32>) -> tensor<1x3x7x8xf32>
  return
}

// -----

// ceil_mode drops a last window that would start in the end padding: with
// begin pad 1, kernel 2, stride 3 on 5, ceil((5 + 1 - 2) / 3) + 1 = 3, but the
// third window starts at input index 3 * 2 - 1 = 5, past the input: 2 windows.
func.func @maxpool_ceil(%x: tensor<1x1x5x5xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<1x1x3x3xf32>' but its operands give 'tensor<1x1x2x2xf32>'}}
  %0 = onnx.MaxPool(%x) {ceil_mode = 1 : i64, kernel_shape = array<i64: 2, 2>, pads = array<i64: 1, 1, 0, 0>, strides = array<i64: 3, 3>} : (tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32>
  return
}

// -----

func.func @maxpool_storage_order(%x: tensor<1x3x8x8xf32>) {
  // expected-error @+1 {{storage_order must be 0 or 1, got 2}}
  %0 = onnx.MaxPool(%x) {kernel_shape = array<i64: 2, 2>, storage_order = 2 : i64} : (tensor<1x3x8x8xf32>) -> tensor<1x3x7x7xf32>
  return
}

// -----

func.func @maxpool_indices(%x: tensor<1x3x8x8xf32>) {
  // expected-error @+1 {{result group starting at #1 requires 0 or 1 element, but found 2}}
  %0:3 = onnx.MaxPool(%x) {kernel_shape = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>) -> (tensor<1x3x7x7xf32>, tensor<1x3x7x7xi64>, tensor<1x3x7x7xi64>)
  return
}

// -----

func.func @avgpool_strides(%x: tensor<1x3x8x8xf32>) {
  // expected-error @+1 {{strides has invalid value 0}}
  %0 = onnx.AveragePool(%x) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 0, 1>} : (tensor<1x3x8x8xf32>) -> tensor<1x3x7x7xf32>
  return
}

// -----

func.func @avgpool_pads_with_auto_pad(%x: tensor<1x3x8x8xf32>) {
  // expected-error @+1 {{pads cannot be used with auto_pad = SAME_UPPER}}
  %0 = onnx.AveragePool(%x) {auto_pad = "SAME_UPPER", kernel_shape = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  return
}

// -----

func.func @global_pool_rank(%x: tensor<3x8xf32>) {
  // expected-error @+1 {{X must have rank >= 3 (N x C x D1 ...), got 'tensor<3x8xf32>'}}
  %0 = onnx.GlobalAveragePool(%x) : (tensor<3x8xf32>) -> tensor<3x8xf32>
  return
}

// -----

func.func @dropout_ratio(%x: tensor<4xf32>) {
  %none = onnx.NoValue : none
  %r = onnx.Constant {value = dense<1.5> : tensor<f32>} : tensor<f32>
  // expected-error @+1 {{ratio must be in [0, 1), got 1.5}}
  %0 = onnx.Dropout(%x, %r, %none) : (tensor<4xf32>, tensor<f32>, none) -> tensor<4xf32>
  return
}

// -----

func.func @dropout_mask(%x: tensor<4xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{result #1 has type 'tensor<5xi1>' but its operands give 'tensor<4xi1>'}}
  %0:2 = onnx.Dropout(%x, %none, %none) : (tensor<4xf32>, none, none) -> (tensor<4xf32>, tensor<5xi1>)
  return
}

// -----

func.func @reduce_duplicate_axes(%x: tensor<2x3xf32>) {
  %a = onnx.Constant {value = dense<[1, -1]> : tensor<2xi64>} : tensor<2xi64>
  // expected-error @+1 {{axis -1 appears twice}}
  %0 = onnx.ReduceSum(%x, %a) : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x1xf32>
  return
}

// -----

func.func @reduce_keepdims(%x: tensor<2x3xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{keepdims must be 0 or 1, got 2}}
  %0 = onnx.ReduceMean(%x, %none) {keepdims = 2 : i64} : (tensor<2x3xf32>, none) -> tensor<1x1xf32>
  return
}

// -----

func.func @reduce_result(%x: tensor<2x3xf32>) {
  %a = onnx.Constant {value = dense<0> : tensor<1xi64>} : tensor<1xi64>
  // expected-error @+1 {{result #0 has type 'tensor<2x3xf32>' but its operands give 'tensor<1x3xf32>'}}
  %0 = onnx.ReduceMean(%x, %a) : (tensor<2x3xf32>, tensor<1xi64>) -> tensor<2x3xf32>
  return
}

// -----

func.func @sce_labels(%s: tensor<8x10xf32>, %l: tensor<4xi64>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{labels 'tensor<4xi64>' does not match scores 'tensor<8x10xf32>' without its class axis}}
  %0 = onnx.SoftmaxCrossEntropyLoss(%s, %l, %none) : (tensor<8x10xf32>, tensor<4xi64>, none) -> tensor<f32>
  return
}

// -----

func.func @sce_reduction(%s: tensor<8x10xf32>, %l: tensor<8xi64>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{reduction must be none, sum or mean, got 'max'}}
  %0 = onnx.SoftmaxCrossEntropyLoss(%s, %l, %none) {reduction = "max"} : (tensor<8x10xf32>, tensor<8xi64>, none) -> tensor<f32>
  return
}

// -----

func.func @sce_none_shape(%s: tensor<8x10xf32>, %l: tensor<8xi64>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{result #0 has type 'tensor<f32>' but its operands give 'tensor<8xf32>'}}
  %0 = onnx.SoftmaxCrossEntropyLoss(%s, %l, %none) {reduction = "none"} : (tensor<8x10xf32>, tensor<8xi64>, none) -> tensor<f32>
  return
}

// -----

func.func @nll_weight(%s: tensor<8x10xf32>, %l: tensor<8xi64>, %w: tensor<9xf32>) {
  // expected-error @+1 {{weights must be 1-D of the class count, got 'tensor<9xf32>'}}
  %0 = onnx.NegativeLogLikelihoodLoss(%s, %l, %w) : (tensor<8x10xf32>, tensor<8xi64>, tensor<9xf32>) -> tensor<f32>
  return
}

// -----

func.func @reshape_elements(%x: tensor<2x3xf32>) {
  %s = onnx.Constant {value = dense<[4, 2]> : tensor<2xi64>} : tensor<2xi64>
  // expected-error @+1 {{cannot reshape 6 elements into 8}}
  %0 = onnx.Reshape(%x, %s) : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<4x2xf32>
  return
}

// -----

func.func @reshape_two_inferred(%x: tensor<2x3xf32>) {
  %s = onnx.Constant {value = dense<[-1, -1]> : tensor<2xi64>} : tensor<2xi64>
  // expected-error @+1 {{shape has more than one -1}}
  %0 = onnx.Reshape(%x, %s) : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return
}

// -----

func.func @flatten_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 3 is out of range for rank 2}}
  %0 = onnx.Flatten(%x) {axis = 3 : i64} : (tensor<2x3xf32>) -> tensor<6x1xf32>
  return
}

// -----

func.func @transpose_perm(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{perm [0, 0, 1] is not a permutation of the 3 axes}}
  %0 = onnx.Transpose(%x) {perm = array<i64: 0, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<2x2x3xf32>
  return
}

// -----

func.func @concat_dims(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) {
  // expected-error @+1 {{inputs differ in dimension 0: 2 and 4}}
  %0 = onnx.Concat(%a, %b) {axis = 1 : i64} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_ranks(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{inputs have different ranks 2 and 1}}
  %0 = onnx.Concat(%a, %b) {axis = 0 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @split_sizes(%x: tensor<10x4xf32>) {
  %s = onnx.Constant {value = dense<[3, 6]> : tensor<2xi64>} : tensor<2xi64>
  // expected-error @+1 {{split sizes add up to 9 but dimension 0 is 10}}
  %0:2 = onnx.Split(%x, %s) : (tensor<10x4xf32>, tensor<2xi64>) -> (tensor<3x4xf32>, tensor<6x4xf32>)
  return
}

// -----

func.func @split_uneven(%x: tensor<10x4xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{cannot split dimension 0 of size 10 evenly into 3 parts}}
  %0:3 = onnx.Split(%x, %none) : (tensor<10x4xf32>, none) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<4x4xf32>)
  return
}

// -----

func.func @split_num_outputs(%x: tensor<10x4xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{num_outputs is 3 but the op has 2 results}}
  %0:2 = onnx.Split(%x, %none) {num_outputs = 3 : i64} : (tensor<10x4xf32>, none) -> (tensor<5x4xf32>, tensor<5x4xf32>)
  return
}

// -----

func.func @slice_zero_step(%x: tensor<10xf32>) {
  %s = onnx.Constant {value = dense<0> : tensor<1xi64>} : tensor<1xi64>
  %e = onnx.Constant {value = dense<5> : tensor<1xi64>} : tensor<1xi64>
  %none = onnx.NoValue : none
  // expected-error @+1 {{steps must not be zero}}
  %0 = onnx.Slice(%x, %s, %e, %none, %s) : (tensor<10xf32>, tensor<1xi64>, tensor<1xi64>, none, tensor<1xi64>) -> tensor<5xf32>
  return
}

// -----

func.func @slice_lengths(%x: tensor<10x4xf32>, %s: tensor<2xi64>, %e: tensor<1xi64>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{starts, ends, axes and steps must have the same length}}
  %0 = onnx.Slice(%x, %s, %e, %none, %none) : (tensor<10x4xf32>, tensor<2xi64>, tensor<1xi64>, none, none) -> tensor<?x?xf32>
  return
}

// -----

func.func @slice_result(%x: tensor<10xf32>) {
  %s = onnx.Constant {value = dense<2> : tensor<1xi64>} : tensor<1xi64>
  %e = onnx.Constant {value = dense<-2> : tensor<1xi64>} : tensor<1xi64>
  %none = onnx.NoValue : none
  // expected-error @+1 {{result #0 has type 'tensor<8xf32>' but its operands give 'tensor<6xf32>'}}
  %0 = onnx.Slice(%x, %s, %e, %none, %none) : (tensor<10xf32>, tensor<1xi64>, tensor<1xi64>, none, none) -> tensor<8xf32>
  return
}

// -----

func.func @gather_index(%x: tensor<5x3xf32>) {
  %i = onnx.Constant {value = dense<[0, 5]> : tensor<2xi64>} : tensor<2xi64>
  // expected-error @+1 {{index 5 is out of range for axis 0 of size 5}}
  %0 = onnx.Gather(%x, %i) : (tensor<5x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  return
}

// -----

func.func @gather_axis(%x: tensor<5x3xf32>, %i: tensor<2xi64>) {
  // expected-error @+1 {{axis -3 is out of range for rank 2}}
  %0 = onnx.Gather(%x, %i) {axis = -3 : i64} : (tensor<5x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  return
}

// -----

func.func @unsqueeze_axis(%x: tensor<3xf32>) {
  %a = onnx.Constant {value = dense<2> : tensor<1xi64>} : tensor<1xi64>
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = onnx.Unsqueeze(%x, %a) : (tensor<3xf32>, tensor<1xi64>) -> tensor<3x1xf32>
  return
}

// -----

func.func @squeeze_not_one(%x: tensor<3x1xf32>) {
  %a = onnx.Constant {value = dense<0> : tensor<1xi64>} : tensor<1xi64>
  // expected-error @+1 {{cannot squeeze dimension 0 of size 3}}
  %0 = onnx.Squeeze(%x, %a) : (tensor<3x1xf32>, tensor<1xi64>) -> tensor<1xf32>
  return
}

// -----

func.func @expand_shape(%x: tensor<3x2xf32>) {
  %s = onnx.Constant {value = dense<[4, 3]> : tensor<2xi64>} : tensor<2xi64>
  // expected-error @+1 {{operand shapes do not broadcast: dimension 0 is 3 and 4}}
  %0 = onnx.Expand(%x, %s) : (tensor<3x2xf32>, tensor<2xi64>) -> tensor<4x3xf32>
  return
}

// -----

func.func @constant_of_shape_value(%s: tensor<2xi64>) {
  // expected-error @+1 {{value must have one element, got 'tensor<2xf32>'}}
  %0 = onnx.ConstantOfShape(%s) {value = dense<1.0> : tensor<2xf32>} : (tensor<2xi64>) -> tensor<?x?xf32>
  return
}

// -----

func.func @range_delta() {
  %a = onnx.Constant {value = dense<0> : tensor<i64>} : tensor<i64>
  // expected-error @+1 {{delta must not be zero}}
  %0 = onnx.Range(%a, %a, %a) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  return
}

// -----

// limit - start overflows 64 bits (it was taken for an empty range).
func.func @range_huge() {
  %s = onnx.Constant {value = dense<-9223372036854775808> : tensor<i64>} : tensor<i64>
  %l = onnx.Constant {value = dense<9223372036854775807> : tensor<i64>} : tensor<i64>
  %d = onnx.Constant {value = dense<1> : tensor<i64>} : tensor<i64>
  // expected-error @+1 {{has 16777215 Ti elements or more: too many for a tensor}}
  %0 = onnx.Range(%s, %l, %d) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  return
}

// -----

func.func @range_infinite() {
  %s = onnx.Constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %l = onnx.Constant {value = dense<0x7F800000> : tensor<f32>} : tensor<f32>
  %d = onnx.Constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  // expected-error @+1 {{start, limit and delta must be finite and give at most 2^40 elements}}
  %0 = onnx.Range(%s, %l, %d) : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<?xf32>
  return
}

// -----

func.func @range_scalar(%a: tensor<2xf32>, %b: tensor<f32>) {
  // expected-error @+1 {{start must be a scalar, got 'tensor<2xf32>'}}
  %0 = onnx.Range(%a, %b, %b) : (tensor<2xf32>, tensor<f32>, tensor<f32>) -> tensor<?xf32>
  return
}

// -----

func.func @gradient_inputs(%w: tensor<4xf32>) {
  // expected-error @+1 {{has 1 inputs but xs and zs name 2 tensors}}
  %0 = onnx.Gradient(%w) {xs = ["w", "b"], y = "loss"} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @momentum_mode(%r: tensor<f32>, %t: tensor<i64>, %w: tensor<4xf32>) {
  // expected-error @+1 {{mode must be standard or nesterov, got 'heavy'}}
  %0:2 = onnx.Momentum(%r, %t, %w, %w, %w) {alpha = 0.9 : f32, beta = 1.0 : f32, mode = "heavy", norm_coefficient = 0.0 : f32} : (tensor<f32>, tensor<i64>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @momentum_groups(%r: tensor<f32>, %t: tensor<i64>, %w: tensor<4xf32>) {
  // expected-error @+1 {{expects 3 equally long groups (X, G, V) after R and T, got 2 operands}}
  %0:2 = onnx.Momentum(%r, %t, %w, %w) {alpha = 0.9 : f32, beta = 1.0 : f32, mode = "standard", norm_coefficient = 0.0 : f32} : (tensor<f32>, tensor<i64>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adam_shapes(%r: tensor<f32>, %t: tensor<i64>, %w: tensor<4xf32>, %v: tensor<5xf32>) {
  // expected-error @+1 {{V #0 of type 'tensor<5xf32>' does not match X #0 of type 'tensor<4xf32>'}}
  %0:3 = onnx.Adam(%r, %t, %w, %w, %v, %w) : (tensor<f32>, tensor<i64>, tensor<4xf32>, tensor<4xf32>, tensor<5xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<5xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adagrad_results(%r: tensor<f32>, %t: tensor<i64>, %w: tensor<4xf32>) {
  // expected-error @+1 {{has 3 results but its shape function gives 2}}
  %0:3 = onnx.Adagrad(%r, %t, %w, %w, %w) : (tensor<f32>, tensor<i64>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adagrad_rate(%r: tensor<1xf32>, %t: tensor<i64>, %w: tensor<4xf32>) {
  // expected-error @+1 {{R must be a scalar, got 'tensor<1xf32>'}}
  %0:2 = onnx.Adagrad(%r, %t, %w, %w, %w) : (tensor<1xf32>, tensor<i64>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @lstm_direction(%x: tensor<5x3x4xf32>, %w: tensor<1x8x4xf32>, %r: tensor<1x8x2xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{direction must be forward, reverse or bidirectional, got 'sideways'}}
  %0 = onnx.LSTM(%x, %w, %r, %none, %none, %none, %none, %none) {direction = "sideways"} : (tensor<5x3x4xf32>, tensor<1x8x4xf32>, tensor<1x8x2xf32>, none, none, none, none, none) -> tensor<5x1x3x2xf32>
  return
}

// -----

func.func @lstm_w_input_size(%x: tensor<5x3x4xf32>, %w: tensor<1x8x3xf32>, %r: tensor<1x8x2xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{inconsistent input size (X): 3 vs 4}}
  %0 = onnx.LSTM(%x, %w, %r, %none, %none, %none, %none, %none) : (tensor<5x3x4xf32>, tensor<1x8x3xf32>, tensor<1x8x2xf32>, none, none, none, none, none) -> tensor<5x1x3x2xf32>
  return
}

// -----

func.func @gru_bidirectional_needs_two(%x: tensor<5x3x4xf32>, %w: tensor<1x6x4xf32>, %r: tensor<1x6x2xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{W and R must have 2 direction(s) for direction 'bidirectional'}}
  %0 = onnx.GRU(%x, %w, %r, %none, %none, %none) {direction = "bidirectional"} : (tensor<5x3x4xf32>, tensor<1x6x4xf32>, tensor<1x6x2xf32>, none, none, none) -> tensor<5x2x3x2xf32>
  return
}

// -----

func.func @lstm_too_many_results(%x: tensor<5x3x4xf32>, %w: tensor<1x8x4xf32>, %r: tensor<1x8x2xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{has 5 results, at most 3 (and the saved states)}}
  %0:5 = onnx.LSTM(%x, %w, %r, %none, %none, %none, %none, %none) : (tensor<5x3x4xf32>, tensor<1x8x4xf32>, tensor<1x8x2xf32>, none, none, none, none, none) -> (tensor<5x1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<30x3x2xf32>, tensor<1x3x2xf32>)
  return
}

// -----

// The training form's saved states: (dirs * 6 * seq, batch, hidden).
func.func @lstm_saved_type(%x: tensor<5x3x4xf32>, %w: tensor<1x8x4xf32>, %r: tensor<1x8x2xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{result #3 has type 'tensor<1x3x2xf32>' but its operands give 'tensor<30x3x2xf32>'}}
  %0:4 = onnx.LSTM(%x, %w, %r, %none, %none, %none, %none, %none) : (tensor<5x3x4xf32>, tensor<1x8x4xf32>, tensor<1x8x2xf32>, none, none, none, none, none) -> (tensor<5x1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>)
  return
}

// -----

func.func @gru_saved_layout(%x: tensor<3x5x4xf32>, %w: tensor<1x6x4xf32>, %r: tensor<1x6x2xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{saves its states (result #2) only with layout 0}}
  %0:3 = onnx.GRU(%x, %w, %r, %none, %none, %none) {layout = 1 : i64} : (tensor<3x5x4xf32>, tensor<1x6x4xf32>, tensor<1x6x2xf32>, none, none, none) -> (tensor<3x5x1x2xf32>, tensor<3x1x2xf32>, tensor<25x3x2xf32>)
  return
}

// -----

func.func @conv_transpose_channels(%x: tensor<1x3x4x4xf32>, %w: tensor<2x2x3x3xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{X has 3 channels but W expects 2}}
  %0 = onnx.ConvTranspose(%x, %w, %none) : (tensor<1x3x4x4xf32>, tensor<2x2x3x3xf32>, none) -> tensor<1x2x6x6xf32>
  return
}

// -----

func.func @resize_mode(%x: tensor<1x1x2x2xf32>) {
  %none = onnx.NoValue : none
  %s = onnx.Constant {value = dense<[1.0, 1.0, 2.0, 2.0]> : tensor<4xf32>} : tensor<4xf32>
  // expected-error @+1 {{mode 'bilinear' is not one of nearest, linear, cubic}}
  %0 = onnx.Resize(%x, %none, %s, %none) {mode = "bilinear"} : (tensor<1x1x2x2xf32>, none, tensor<4xf32>, none) -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @resize_scales_count(%x: tensor<1x1x2x2xf32>) {
  %none = onnx.NoValue : none
  %s = onnx.Constant {value = dense<[2.0, 2.0]> : tensor<2xf32>} : tensor<2xf32>
  // expected-error @+1 {{scales has 2 entries, expected 4}}
  %0 = onnx.Resize(%x, %none, %s, %none) : (tensor<1x1x2x2xf32>, none, tensor<2xf32>, none) -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @resize_grad_scales(%dy: tensor<1x1x4x4xf32>) {
  %shape = onnx.Constant {value = dense<[1, 1, 2, 2]> : tensor<4xi64>} : tensor<4xi64>
  // expected-error @+1 {{scales must have one entry per axis}}
  %0 = onnx.ResizeGrad(%dy, %shape) {coordinate_transformation_mode = "asymmetric", mode = "nearest", nearest_mode = "floor", scales = array<f32: 2.0, 2.0>} : (tensor<1x1x4x4xf32>, tensor<4xi64>) -> tensor<1x1x2x2xf32>
  return
}

// -----

func.func @gathernd_index_range(%x: tensor<5x3xf32>) {
  %i = onnx.Constant {value = dense<[[0, 2], [4, -4]]> : tensor<2x2xi64>} : tensor<2x2xi64>
  // expected-error @+1 {{index -4 is out of range for axis 1 of size 3}}
  %0 = onnx.GatherND(%x, %i) : (tensor<5x3xf32>, tensor<2x2xi64>) -> tensor<2xf32>
  return
}

// -----

func.func @gathernd_tuple_too_long(%x: tensor<5x3xf32>, %i: tensor<2x3xi64>) {
  // expected-error @+1 {{indices' last axis (3) must be between 1 and the data's rank less batch_dims (2)}}
  %0 = onnx.GatherND(%x, %i) : (tensor<5x3xf32>, tensor<2x3xi64>) -> tensor<2xf32>
  return
}

// -----

func.func @gathernd_batch_dims(%x: tensor<5x3xf32>, %i: tensor<4x1xi64>) {
  // expected-error @+1 {{batch axis 0 differs: data has 5, indices 4}}
  %0 = onnx.GatherND(%x, %i) {batch_dims = 1 : i64} : (tensor<5x3xf32>, tensor<4x1xi64>) -> tensor<4xf32>
  return
}

// -----

func.func @scatternd_updates_shape(%x: tensor<5x3xf32>, %i: tensor<2x1xi64>, %u: tensor<2x4xf32>) {
  // expected-error @+1 {{updates of type 'tensor<2x4xf32>' do not have the shape indices.shape[:-1] + data.shape[k:] ('tensor<2x3xf32>')}}
  %0 = onnx.ScatterND(%x, %i, %u) : (tensor<5x3xf32>, tensor<2x1xi64>, tensor<2x4xf32>) -> tensor<5x3xf32>
  return
}

// -----

func.func @scatternd_reduction(%x: tensor<5x3xf32>, %i: tensor<2x1xi64>, %u: tensor<2x3xf32>) {
  // expected-error @+1 {{reduction 'sum' is not one of none, add, mul, max, min}}
  %0 = onnx.ScatterND(%x, %i, %u) {reduction = "sum"} : (tensor<5x3xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<5x3xf32>
  return
}

// -----

func.func @gatherelements_rank(%x: tensor<5x3xf32>, %i: tensor<2xi64>) {
  // expected-error @+1 {{indices of rank 1 must have the data's rank 2}}
  %0 = onnx.GatherElements(%x, %i) : (tensor<5x3xf32>, tensor<2xi64>) -> tensor<2xf32>
  return
}

// -----

func.func @gatherelements_extent(%x: tensor<5x3xf32>, %i: tensor<2x4xi64>) {
  // expected-error @+1 {{indices' axis 1 (4) exceeds the data's (3)}}
  %0 = onnx.GatherElements(%x, %i) : (tensor<5x3xf32>, tensor<2x4xi64>) -> tensor<2x4xf32>
  return
}

// -----

func.func @scatterelements_updates(%x: tensor<5x3xf32>, %i: tensor<2x3xi64>, %u: tensor<2x2xf32>) {
  // expected-error @+1 {{updates of type 'tensor<2x2xf32>' do not have the indices' shape 'tensor<2x3xi64>'}}
  %0 = onnx.ScatterElements(%x, %i, %u) : (tensor<5x3xf32>, tensor<2x3xi64>, tensor<2x2xf32>) -> tensor<5x3xf32>
  return
}

// -----

func.func @scatterelements_index(%x: tensor<5x3xf32>, %u: tensor<1x3xf32>) {
  %i = onnx.Constant {value = dense<[[0, 5, 1]]> : tensor<1x3xi64>} : tensor<1x3xi64>
  // expected-error @+1 {{index 5 is out of range for axis 0 of size 5}}
  %0 = onnx.ScatterElements(%x, %i, %u) : (tensor<5x3xf32>, tensor<1x3xi64>, tensor<1x3xf32>) -> tensor<5x3xf32>
  return
}

// -----

func.func @attention_3d_needs_heads(%q: tensor<2x4x6xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{with 3-D inputs needs q_num_heads > 0}}
  %0 = onnx.Attention(%q, %q, %q, %none) : (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>, none) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @attention_packed_width(%x: tensor<2x4x16xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{Q's last axis 16 is not 3 * q_num_heads * head size for q_num_heads 2}}
  %0 = onnx.Attention(%x, %none, %none, %none) {q_num_heads = 2 : i64} : (tensor<2x4x16xf32>, none, none, none) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @attention_gqa(%q: tensor<2x4x6xf32>, %k: tensor<2x4x6xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{kv_num_heads 1 differs from q_num_heads 2; grouped-query attention takes the 4-D form}}
  %0 = onnx.Attention(%q, %k, %k, %none) {q_num_heads = 2 : i64, kv_num_heads = 1 : i64} : (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>, none) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @attention_mask_type(%q: tensor<1x2x3x4xf32>, %m: tensor<3x3xi32>) {
  // expected-error @+1 {{attn_mask must be a bool tensor (true: attend) or one of Q's element type (added to the scores) of (3, 3) or broadcast to (batch, heads, 3, 3) with axes of 1}}
  %0 = onnx.Attention(%q, %q, %q, %m) : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<3x3xi32>) -> tensor<1x2x3x4xf32>
  return
}

// -----

// A key padding mask must span the batch (or 1), not another size.
func.func @attention_mask_batch(%q: tensor<2x2x3x4xf32>, %m: tensor<3x1x1x3xi1>) {
  // expected-error @+1 {{attn_mask must be a bool tensor (true: attend) or one of Q's element type (added to the scores) of (3, 3) or broadcast to (batch, heads, 3, 3) with axes of 1, got 'tensor<3x1x1x3xi1>'}}
  %0 = onnx.Attention(%q, %q, %q, %m) : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<3x1x1x3xi1>) -> tensor<2x2x3x4xf32>
  return
}

// -----

// The keys' axis is never broadcast (the kernels read a mask row's s bytes).
func.func @attention_mask_keys(%q: tensor<2x2x3x4xf32>, %m: tensor<2x1x1x1xi1>) {
  // expected-error @+1 {{attn_mask must be a bool tensor}}
  %0 = onnx.Attention(%q, %q, %q, %m) : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x1x1x1xi1>) -> tensor<2x2x3x4xf32>
  return
}

// -----

func.func @attention_kv_lengths(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x5x4xf32>, %v: tensor<1x2x6x4xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{needs K and V of one sequence length}}
  %0 = onnx.Attention(%q, %k, %v, %none) : (tensor<1x2x3x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x6x4xf32>, none) -> tensor<1x2x3x4xf32>
  return
}

// -----

func.func @attention_grad_probs(%x: tensor<2x4x18xf32>, %p: tensor<2x2x4x5xf32>, %dy: tensor<2x4x6xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{Probs must be (batch, heads, t, s) = (2, 2, 4, 4)}}
  %0 = onnx.AttentionGrad(%x, %none, %none, %p, %dy) {q_num_heads = 2 : i64} : (tensor<2x4x18xf32>, none, none, tensor<2x2x4x5xf32>, tensor<2x4x6xf32>) -> tensor<2x4x18xf32>
  return
}

// -----

func.func @attention_seq_first_4d(%q: tensor<1x2x3x4xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{seq_first takes 3-D inputs, got Q of rank 4}}
  %0 = onnx.Attention(%q, %q, %q, %none) {seq_first = 1 : i64} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, none) -> tensor<1x2x3x4xf32>
  return
}

// -----

func.func @attention_seq_first_value(%q: tensor<3x2x8xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{seq_first must be 0 or 1, got 2}}
  %0 = onnx.Attention(%q, %q, %q, %none) {q_num_heads = 2 : i64, seq_first = 2 : i64} : (tensor<3x2x8xf32>, tensor<3x2x8xf32>, tensor<3x2x8xf32>, none) -> tensor<3x2x8xf32>
  return
}

// -----

// Sequence first, K and V of another batch: refused like batch first.
func.func @attention_seq_first_batch(%q: tensor<3x2x8xf32>, %k: tensor<5x3x8xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{needs K and V of Q's batch and width}}
  %0 = onnx.Attention(%q, %k, %k, %none) {q_num_heads = 2 : i64, seq_first = 1 : i64} : (tensor<3x2x8xf32>, tensor<5x3x8xf32>, tensor<5x3x8xf32>, none) -> tensor<3x2x8xf32>
  return
}

// -----

func.func @attention_dropout_range(%q: tensor<1x2x3x4xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{dropout must be in [0, 1), got 1}}
  %0 = onnx.Attention(%q, %q, %q, %none) {dropout = 1.0 : f32} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, none) -> tensor<1x2x3x4xf32>
  return
}

// -----

// Grouped-query attention: K's and V's heads must divide Q's.
func.func @attention_kv_heads_divide(%q: tensor<1x4x3x2xf32>, %k: tensor<1x3x5x2xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{needs K's and V's heads to divide Q's (grouped-query attention)}}
  %0 = onnx.Attention(%q, %k, %k, %none) : (tensor<1x4x3x2xf32>, tensor<1x3x5x2xf32>, tensor<1x3x5x2xf32>, none) -> tensor<1x4x3x2xf32>
  return
}
