// RUN: pipe-opt %s --split-input-file --pipe-add-optimizer="kind=sgd lr=0.1 weight-decay=0.01" | FileCheck %s --check-prefix=SGD
// RUN: pipe-opt %s --split-input-file --pipe-add-optimizer="kind=sgd lr=0.1 momentum=0.9 dampening=0.25" | FileCheck %s --check-prefix=MOM
// RUN: pipe-opt %s --split-input-file --pipe-add-optimizer="kind=nesterov lr=0.1 momentum=0.5" | FileCheck %s --check-prefix=NES
// RUN: pipe-opt %s --split-input-file --pipe-add-optimizer="kind=adam weight-decay=0.5" | FileCheck %s --check-prefix=ADAM
// RUN: pipe-opt %s --split-input-file --pipe-add-optimizer="kind=adamw lr=0.01" | FileCheck %s --check-prefix=ADAMW
// RUN: pipe-opt %s --split-input-file --pipe-add-optimizer="kind=adagrad lr=0.1 lr-decay=0.01" | FileCheck %s --check-prefix=ADAGRAD
// RUN: pipe-opt %s --split-input-file --pipe-add-optimizer="kind=adam lr=0.01 weight-decay=0.5 clip-grad-norm=2" | FileCheck %s --check-prefix=CLIP

// Global-norm clipping: every gradient times min(1, c / (||g|| + 1e-6))
// (NaN for a NaN norm, as torch.clamp), before Adam's L2 term; the
// clipping ops carry pipe.clip.
// CLIP-LABEL: func.func @train_step(
// CLIP-SAME: clip_grad_norm = 2.000000e+00 : f64
// CLIP: %[[SW:.*]] = onnx.ReduceSum(%{{.*}}, %{{.*}}) {keepdims = 0 : i64, pipe.clip}
// CLIP: %[[SB:.*]] = onnx.ReduceSum(%{{.*}}, %{{.*}}) {keepdims = 0 : i64, pipe.clip}
// CLIP: %[[SS:.*]] = onnx.Add(%[[SW]], %[[SB]]) {pipe.clip}
// CLIP: %[[EPS:.*]] = onnx.Constant {pipe.clip, value = dense<9.99999997E-7> : tensor<f32>}
// CLIP: %[[N:.*]] = onnx.Sqrt(%[[SS]]) {pipe.clip}
// CLIP: %[[NE:.*]] = onnx.Add(%[[N]], %[[EPS]]) {pipe.clip}
// CLIP: %[[C:.*]] = onnx.Constant {pipe.clip, value = dense<2.000000e+00> : tensor<f32>}
// CLIP: %[[R:.*]] = onnx.Div(%[[C]], %[[NE]]) {pipe.clip}
// CLIP: %[[ONE:.*]] = onnx.Constant {pipe.clip, value = dense<1.000000e+00> : tensor<f32>}
// CLIP: %[[GT:.*]] = onnx.Greater(%[[R]], %[[ONE]]) {pipe.clip}
// CLIP: %[[COEF:.*]] = onnx.Where(%[[GT]], %[[ONE]], %[[R]]) {pipe.clip}
// CLIP: %[[GW:.*]] = onnx.Mul(%{{.*}}, %[[COEF]]) {pipe.clip}
// CLIP: onnx.Add(%[[GW]], %{{.*}})
// CLIP: onnx.AdamW
// CLIP: onnx.Mul(%{{.*}}, %[[COEF]]) {pipe.clip}
// CLIP: onnx.AdamW

// SGD-LABEL: func.func @train_step(
// SGD-SAME: %[[X:[^:]*]]: tensor<2xf32> {pipe.input = "x"}, %[[W:[^:]*]]: tensor<2xf32> {pipe.param = "w", pipe.trainable}, %[[B:[^:]*]]: tensor<f32> {pipe.param = "b", pipe.trainable}, %[[STEP:[^:]*]]: tensor<i64> {pipe.init = dense<0> : tensor<i64>, pipe.state = "step"})
// SGD-SAME: -> (tensor<f32> {pipe.loss}, tensor<2xf32> {pipe.update = "w"}, tensor<f32> {pipe.update = "b"}, tensor<i64> {pipe.update = "step"})
// SGD: %[[LR:.*]] = onnx.Constant {value = dense<1.000000e-01> : tensor<f32>}
// SGD: %[[ONE:.*]] = onnx.Constant {value = dense<1> : tensor<i64>}
// SGD: %[[NEXT:.*]] = onnx.Add(%[[STEP]], %[[ONE]])
// SGD: %[[NW:.*]] = onnx.SGD(%[[LR]], %[[W]], %[[GW:[^)]*]]) {weight_decay = 0.00999999977 : f32}
// SGD: %[[NB:.*]] = onnx.SGD(%[[LR]], %[[B]], %[[GB:[^)]*]])
// SGD: return %{{.*}}, %[[NW]], %[[NB]], %[[NEXT]]

// MOM-LABEL: func.func @train_step(
// MOM-SAME: %[[W:[^:]*]]: tensor<2xf32> {pipe.param = "w", pipe.trainable}, %[[B:[^:]*]]: tensor<f32> {pipe.param = "b", pipe.trainable}, %[[VW:[^:]*]]: tensor<2xf32> {pipe.init = dense<0.000000e+00> : tensor<2xf32>, pipe.state = "w.momentum_buffer"}, %[[VB:[^:]*]]: tensor<f32> {pipe.init = dense<0.000000e+00> : tensor<f32>, pipe.state = "b.momentum_buffer"}, %[[STEP:[^:]*]]: tensor<i64> {pipe.init = dense<0> : tensor<i64>, pipe.state = "step"})
// MOM-SAME: -> (tensor<f32> {pipe.loss}, tensor<2xf32> {pipe.update = "w"}, tensor<f32> {pipe.update = "b"}, tensor<2xf32> {pipe.update = "w.momentum_buffer"}, tensor<f32> {pipe.update = "b.momentum_buffer"}, tensor<i64> {pipe.update = "step"})
// MOM: %[[UW:.*]]:2 = onnx.Momentum(%{{.*}}, %[[STEP]], %[[W]], %{{.*}}, %[[VW]]) {alpha = 0.899999976 : f32, beta = 7.500000e-01 : f32, mode = "standard", norm_coefficient = 0.000000e+00 : f32}
// MOM: %[[UB:.*]]:2 = onnx.Momentum(%{{.*}}, %[[STEP]], %[[B]], %{{.*}}, %[[VB]])
// MOM: return %{{.*}}, %[[UW]]#0, %[[UB]]#0, %[[UW]]#1, %[[UB]]#1, %{{.*}} :

// NES: onnx.Momentum({{.*}}) {alpha = 5.000000e-01 : f32, beta = 1.000000e+00 : f32, mode = "nesterov", norm_coefficient = 0.000000e+00 : f32}

// Adam's L2 decay is added to the gradient; its epsilon is PyTorch's, so
// it uses AdamW with no decoupled decay and the step counted from 1.
// ADAM-LABEL: func.func @train_step(
// ADAM-SAME: pipe.state = "w.exp_avg"
// ADAM-SAME: pipe.state = "w.exp_avg_sq"
// ADAM-SAME: pipe.state = "b.exp_avg"
// ADAM-SAME: pipe.state = "b.exp_avg_sq"
// ADAM-SAME: %[[STEP:[^:]*]]: tensor<i64> {pipe.init = dense<0> : tensor<i64>, pipe.state = "step"}
// ADAM: %[[LR:.*]] = onnx.Constant {value = dense<1.000000e-03> : tensor<f32>}
// ADAM: %[[T:.*]] = onnx.Add(%[[STEP]], %{{.*}}) : (tensor<i64>, tensor<i64>) -> tensor<i64>
// ADAM: %[[WD:.*]] = onnx.Constant {value = dense<5.000000e-01> : tensor<f32>}
// ADAM: %[[D:.*]] = onnx.Mul(%[[W:[^,]*]], %[[WD]])
// ADAM: %[[G:.*]] = onnx.Add(%{{.*}}, %[[D]])
// ADAM: onnx.AdamW(%[[LR]], %[[T]], %[[W]], %[[G]], %{{.*}}, %{{.*}}) {weight_decay = 0.000000e+00 : f32}

// ADAMW: onnx.AdamW({{.*}}) : (tensor<f32>, tensor<i64>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>)
// ADAMW-NOT: weight_decay

// ADAGRAD: pipe.state = "w.sum"
// ADAGRAD: onnx.Adagrad(%{{.*}}, %[[STEP:[^,]*]], {{.*}}) {decay_factor = 0.00999999977 : f32, epsilon = 1.000000e-10 : f32}
func.func @train_step(%x: tensor<2xf32> {pipe.input = "x"}, %w: tensor<2xf32> {pipe.param = "w", pipe.trainable}, %b: tensor<f32> {pipe.param = "b", pipe.trainable}) -> (tensor<f32> {pipe.loss}, tensor<2xf32> {pipe.grad = "w"}, tensor<f32> {pipe.grad = "b"}) {
  %0 = onnx.MatMul(%x, %w) : (tensor<2xf32>, tensor<2xf32>) -> tensor<f32>
  return %0, %x, %b : tensor<f32>, tensor<2xf32>, tensor<f32>
}
