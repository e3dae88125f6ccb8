/*===- pipert_kernels.h - compute kernels of the pipert C ABI --------------===*
 *
 * One function per ONNX operator (forward), per gradient that is not a
 * composition of forward kernels (backward), and per optimizer update. The
 * compiler lowers each op to exactly one call, passing the op's attributes
 * as arguments.
 *
 * Naming:   pipert_<op>[_grad[_<what>]]_<type>
 *   <type>  f32, i64, ... for kernels that compute on one element type;
 *           omitted for data-movement kernels (Transpose, Concat, Split,
 *           Slice, Gather, Expand, Cast, Where's selection) that take a
 *           pipert_dtype and work on any element type.
 *   _grad   the vector-Jacobian product of the op: takes the output gradient
 *           `dy` (and what the op saved) and writes input gradients `dx`...
 *
 * Conventions, for every function below:
 *   - `ctx` first; then inputs, then attributes, then outputs.
 *   - Tensors are dense, row-major (C order), contiguous, in the backend's
 *     memory (pipert_alloc). A tensor is passed as (pointer, rank, shape) with
 *     int64 rank and a `const int64_t *shape` of `rank` entries; rank 0 is a
 *     scalar (shape may be NULL). Where a kernel's layout is fixed (Conv is
 *     NCHW) the shape is a fixed-size array.
 *   - Output shapes are not passed where they follow from the inputs and
 *     attributes (the compiler has inferred them; the kernel infers the same).
 *     ONNX's `keepdims` never changes the memory layout, so Reduce* ignore it.
 *   - Outputs never alias inputs unless the function says "in place allowed"
 *     (elementwise kernels and optimizer updates allow it).
 *   - Optional inputs/outputs are nullable pointers, marked "nullable".
 *   - Booleans (ONNX bool, masks, conditions) are uint8 0/1.
 *   - Indices and labels are int64 (Cast an int32 tensor first).
 *   - "pads" are in ONNX order: all begins, then all ends. auto_pad is
 *     resolved to explicit pads by the compiler.
 *   - Backward kernels overwrite their outputs (no accumulation) unless they
 *     say "accumulates".
 *   - A shape or attribute a kernel cannot handle ends the rank through
 *     pipert_fail, naming the kernel; kernels return nothing.
 *
 * Threads: kernels use up to pipert_context_threads(ctx) threads (BLAS
 * threads for GEMM and convolution); 1 by default.
 *===----------------------------------------------------------------------===*/
#ifndef PIPERT_PIPERT_KERNELS_H
#define PIPERT_PIPERT_KERNELS_H

#include "pipert/pipert.h"

#ifdef __cplusplus
extern "C" {
#endif

/*===------------------------------ elementwise ---------------------------===*/

typedef enum pipert_unary_op {
  PIPERT_UNARY_IDENTITY = 0,
  PIPERT_UNARY_NEG = 1,
  PIPERT_UNARY_RELU = 2,
  PIPERT_UNARY_TANH = 3,
  PIPERT_UNARY_SIGMOID = 4,
  PIPERT_UNARY_ERF = 5,
  PIPERT_UNARY_SQRT = 6,
  PIPERT_UNARY_EXP = 7,
  PIPERT_UNARY_LOG = 8,
  PIPERT_UNARY_ABS = 9,
  PIPERT_UNARY_RECIPROCAL = 10,
  PIPERT_UNARY_SIN = 11,
  PIPERT_UNARY_COS = 12,
} pipert_unary_op;

/* y[i] = op(x[i]) for n elements. In place allowed. */
void pipert_unary_f32(pipert_context *ctx, pipert_unary_op op, const float *x, int64_t n,
                      float *y);

typedef enum pipert_binary_op {
  PIPERT_BINARY_ADD = 0,
  PIPERT_BINARY_SUB = 1,
  PIPERT_BINARY_MUL = 2,
  PIPERT_BINARY_DIV = 3,
  PIPERT_BINARY_POW = 4, /* f32 only */
  PIPERT_BINARY_MAX = 5, /* NaN propagates (f32) */
  PIPERT_BINARY_MIN = 6,
  PIPERT_BINARY_FMOD = 7, /* remainder with the sign of a (C fmod, C % on i64) */
  PIPERT_BINARY_MOD = 8,  /* remainder with the sign of b (Python %); i64 only */
} pipert_binary_op;

/* y = a op b with numpy (multidirectional) broadcasting; y has rank
 * max(a_rank, b_rank) and the broadcast shape. In place allowed when y has
 * the shape of the aliased input. i64 division truncates toward zero like
 * C (ONNX's integer Div); i64 division or remainder by zero fails. */
void pipert_binary_f32(pipert_context *ctx, pipert_binary_op op, const float *a, int64_t a_rank,
                       const int64_t *a_shape, const float *b, int64_t b_rank,
                       const int64_t *b_shape, float *y);
void pipert_binary_i64(pipert_context *ctx, pipert_binary_op op, const int64_t *a, int64_t a_rank,
                       const int64_t *a_shape, const int64_t *b, int64_t b_rank,
                       const int64_t *b_shape, int64_t *y);

/* ONNX Equal with broadcasting: y = (a == b) as uint8 0/1. */
void pipert_equal_f32(pipert_context *ctx, const float *a, int64_t a_rank, const int64_t *a_shape,
                      const float *b, int64_t b_rank, const int64_t *b_shape, uint8_t *y);
void pipert_equal_i64(pipert_context *ctx, const int64_t *a, int64_t a_rank,
                      const int64_t *a_shape, const int64_t *b, int64_t b_rank,
                      const int64_t *b_shape, uint8_t *y);

/* ONNX Where: out = cond ? x : y, three-way broadcasting; any element type. */
void pipert_where(pipert_context *ctx, pipert_dtype dtype, const uint8_t *cond, int64_t c_rank,
                  const int64_t *c_shape, const void *x, int64_t x_rank, const int64_t *x_shape,
                  const void *y, int64_t y_rank, const int64_t *y_shape, void *out);

/* Parametrised elementwise ops (ONNX attributes alpha, beta). */
typedef enum pipert_activation_op {
  PIPERT_ACTIVATION_LEAKY_RELU = 0,   /* alpha */
  PIPERT_ACTIVATION_ELU = 1,          /* alpha */
  PIPERT_ACTIVATION_SELU = 2,         /* alpha, beta = gamma */
  PIPERT_ACTIVATION_SOFTPLUS = 3,
  PIPERT_ACTIVATION_HARD_SIGMOID = 4, /* alpha, beta */
  PIPERT_ACTIVATION_HARD_SWISH = 5,
  PIPERT_ACTIVATION_GELU = 6,         /* exact, with erf */
  PIPERT_ACTIVATION_GELU_TANH = 7,    /* approximate = "tanh" */
  PIPERT_ACTIVATION_CLIP = 8,         /* alpha = min, beta = max (+-inf: none) */
  PIPERT_ACTIVATION_SIGN = 9,
  PIPERT_ACTIVATION_FLOOR = 10,
  PIPERT_ACTIVATION_CEIL = 11,
  PIPERT_ACTIVATION_ABS = 12,
  PIPERT_ACTIVATION_RECIPROCAL = 13,
} pipert_activation_op;

/* y[i] = op(x[i]; alpha, beta) for n elements. In place allowed. */
void pipert_activation_f32(pipert_context *ctx, pipert_activation_op op, float alpha, float beta,
                           const float *x, int64_t n, float *y);
/* dx[i] = dy[i] * op'(x[i]; alpha, beta) from the forward input x. Where op
 * has a kink the derivative is PyTorch's: LeakyRelu/Elu/Selu take the x <= 0
 * branch at 0, Clip passes dy on min <= x <= max, HardSigmoid on
 * 0 < alpha x + beta < 1, Abs is 0 at 0; Sign, Floor and Ceil give 0. In
 * place allowed. */
void pipert_activation_grad_f32(pipert_context *ctx, pipert_activation_op op, float alpha,
                                float beta, const float *x, const float *dy, int64_t n,
                                float *dx);

/* Comparisons with broadcasting: y = (a op b) as uint8 0/1. */
typedef enum pipert_compare_op {
  PIPERT_COMPARE_LESS = 0,
  PIPERT_COMPARE_LESS_EQUAL = 1,
  PIPERT_COMPARE_GREATER = 2,
  PIPERT_COMPARE_GREATER_EQUAL = 3,
} pipert_compare_op;
void pipert_compare_f32(pipert_context *ctx, pipert_compare_op op, const float *a, int64_t a_rank,
                        const int64_t *a_shape, const float *b, int64_t b_rank,
                        const int64_t *b_shape, uint8_t *y);
void pipert_compare_i64(pipert_context *ctx, pipert_compare_op op, const int64_t *a,
                        int64_t a_rank, const int64_t *a_shape, const int64_t *b, int64_t b_rank,
                        const int64_t *b_shape, uint8_t *y);

/* ONNX And/Or on uint8 0/1 with broadcasting. */
typedef enum pipert_logical_op {
  PIPERT_LOGICAL_AND = 0,
  PIPERT_LOGICAL_OR = 1,
} pipert_logical_op;
void pipert_logical(pipert_context *ctx, pipert_logical_op op, const uint8_t *a, int64_t a_rank,
                    const int64_t *a_shape, const uint8_t *b, int64_t b_rank,
                    const int64_t *b_shape, uint8_t *y);
/* ONNX Not: y[i] = !x[i] on uint8 0/1. In place allowed. */
void pipert_not(pipert_context *ctx, const uint8_t *x, int64_t n, uint8_t *y);

/* Activation gradients: dx = dy * f'(.) for n elements. Relu and Erf take the
 * forward input x; Tanh and Sigmoid take the forward output y. */
void pipert_relu_grad_f32(pipert_context *ctx, const float *x, const float *dy, int64_t n,
                          float *dx);
void pipert_tanh_grad_f32(pipert_context *ctx, const float *y, const float *dy, int64_t n,
                          float *dx);
void pipert_sigmoid_grad_f32(pipert_context *ctx, const float *y, const float *dy, int64_t n,
                             float *dx);
void pipert_erf_grad_f32(pipert_context *ctx, const float *x, const float *dy, int64_t n,
                         float *dx);

/* Gradient of a broadcasting binary op (and of Expand) with respect to an
 * input of shape x_shape: dx = dy summed over the axes that broadcasting
 * expanded (leading axes and axes where x has extent 1). */
void pipert_reduce_to_shape_f32(pipert_context *ctx, const float *dy, int64_t dy_rank,
                                const int64_t *dy_shape, int64_t x_rank, const int64_t *x_shape,
                                float *dx);

/*===------------------------------ linear algebra ------------------------===*/

/* Plain single-precision GEMM on row-major matrices, like cblas_sgemm:
 * C = alpha * op(A) * op(B) + beta * C, op(A) is M x K, op(B) is K x N. */
void pipert_sgemm(pipert_context *ctx, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                  float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                  float beta, float *c, int64_t ldc);

/* ONNX Gemm: Y = alpha * op(A) * op(B) + beta * C. A is stored M x K (K x M
 * when trans_a), B is K x N (N x K when trans_b). C (nullable) is
 * unidirectionally broadcast to M x N: c_rank 0..2 with shape () (1) (N)
 * (1,N) (M,1) (M,N). */
void pipert_gemm_f32(pipert_context *ctx, const float *a, const float *b, const float *c,
                     int64_t c_rank, const int64_t *c_shape, int64_t m, int64_t n, int64_t k,
                     int trans_a, int trans_b, float alpha, float beta, float *y);

/* ONNX MatMul (numpy matmul): 1-D operands are promoted and the promoted axis
 * removed from y; leading (batch) axes broadcast. */
void pipert_matmul_f32(pipert_context *ctx, const float *a, int64_t a_rank, const int64_t *a_shape,
                       const float *b, int64_t b_rank, const int64_t *b_shape, float *y);
/* MatMul on the transposes of the last two axes of a and/or b (rank >= 2):
 * y = op(a) @ op(b) with batch broadcasting; the building block of MatMul's
 * gradient (dA = dY @ B^T, dB = A^T @ dY, then reduce_to_shape). */
void pipert_matmul_t_f32(pipert_context *ctx, const float *a, int64_t a_rank,
                         const int64_t *a_shape, int trans_a, const float *b, int64_t b_rank,
                         const int64_t *b_shape, int trans_b, float *y);

/*===------------------------------ normalisation -------------------------===*/

/* ONNX Softmax / LogSoftmax (opset >= 13): along one axis (negative counts
 * from the end). */
void pipert_softmax_f32(pipert_context *ctx, const float *x, int64_t rank, const int64_t *shape,
                        int64_t axis, float *y);
void pipert_log_softmax_f32(pipert_context *ctx, const float *x, int64_t rank,
                            const int64_t *shape, int64_t axis, float *y);
/* Gradients from the forward output y: softmax dx = y * (dy - sum(dy * y));
 * log-softmax dx = dy - exp(y) * sum(dy). */
void pipert_softmax_grad_f32(pipert_context *ctx, const float *y, const float *dy, int64_t rank,
                             const int64_t *shape, int64_t axis, float *dx);
void pipert_log_softmax_grad_f32(pipert_context *ctx, const float *y, const float *dy,
                                 int64_t rank, const int64_t *shape, int64_t axis, float *dx);

/* ONNX LayerNormalization: normalises over axes [axis, rank). scale and bias
 * (bias nullable) have the shape of those axes. mean and inv_std_dev
 * (nullable) receive one value per outer row (shape x.shape[:axis] + 1s). */
void pipert_layer_norm_f32(pipert_context *ctx, const float *x, int64_t rank, const int64_t *shape,
                           int64_t axis, float epsilon, const float *scale, const float *bias,
                           float *y, float *mean, float *inv_std_dev);
/* From the forward's saved mean and inv_std_dev: dx, and (nullable) dscale
 * and dbias. accumulate (bits: 1 dscale, 2 dbias) adds the gradient to what
 * the buffer holds (a gradient accumulator), with the bits of a separate
 * Add. */
void pipert_layer_norm_grad_f32(pipert_context *ctx, const float *x, int64_t rank,
                                const int64_t *shape, int64_t axis, const float *scale,
                                const float *mean, const float *inv_std_dev, const float *dy,
                                float *dx, float *dscale, float *dbias, int accumulate);

/* ONNX BatchNormalization on (N, C, d...) with per-channel scale, bias.
 * Inference: uses mean and var. */
void pipert_batch_norm_inference_f32(pipert_context *ctx, const float *x, int64_t rank,
                                     const int64_t *shape, const float *scale, const float *bias,
                                     const float *mean, const float *var, float epsilon,
                                     float *y);
/* Training (training_mode=1): normalises with the batch statistics (biased
 * variance). running_mean/running_var (nullable; may alias mean/var) receive
 * in * momentum + batch * (1 - momentum). saved_mean and saved_inv_std
 * (nullable) keep what the gradient needs. */
void pipert_batch_norm_training_f32(pipert_context *ctx, const float *x, int64_t rank,
                                    const int64_t *shape, const float *scale, const float *bias,
                                    const float *mean, const float *var, float epsilon,
                                    float momentum, float *y, float *running_mean,
                                    float *running_var, float *saved_mean, float *saved_inv_std);
/* Gradient of training-mode BatchNormalization: dx and (nullable) dscale,
 * dbias. The batch statistics the forward normalised with (mean, biased
 * variance over N and d...) are recomputed from x. */
void pipert_batch_norm_grad_f32(pipert_context *ctx, const float *x, int64_t rank,
                                const int64_t *shape, const float *scale, float epsilon,
                                const float *dy, float *dx, float *dscale, float *dbias,
                                int accumulate);

/*===------------------------------ convolution and pooling ---------------===*/

/* ONNX Conv, 2-D, NCHW. x: (N, C, H, W); w: (M, C/group, kH, kW); b
 * (nullable): (M). pads {top, left, bottom, right}; y: (N, M, oH, oW) with
 * oH = (H + top + bottom - (dH*(kH-1)+1)) / sH + 1. A 1-D Conv is the 2-D one
 * with H = kH = 1. im2col + sgemm (1x1 stride-1 unpadded: sgemm directly). */
void pipert_conv2d_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                       const float *w, const int64_t w_shape[4], const float *b,
                       const int64_t pads[4], const int64_t strides[2],
                       const int64_t dilations[2], int64_t group, float *y);
/* dx (shape x_shape) from dy and w. */
void pipert_conv2d_grad_input_f32(pipert_context *ctx, const float *dy, const float *w,
                                  const int64_t w_shape[4], const int64_t x_shape[4],
                                  const int64_t pads[4], const int64_t strides[2],
                                  const int64_t dilations[2], int64_t group, float *dx);
/* dw (shape w_shape) from x and dy; accumulate != 0 adds it to dw's values. */
void pipert_conv2d_grad_weight_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                                   const float *dy, const int64_t w_shape[4],
                                   const int64_t pads[4], const int64_t strides[2],
                                   const int64_t dilations[2], int64_t group, float *dw,
                                   int accumulate);
/* db (M) = dy summed over N, oH, oW. dy_shape is (N, M, oH, oW). accumulate
 * != 0 adds it to db's values. */
void pipert_conv2d_grad_bias_f32(pipert_context *ctx, const float *dy, const int64_t dy_shape[4],
                                 float *db, int accumulate);

/* Output extent of a pooled axis (ONNX, with PyTorch's rule that with
 * ceil_mode the last window must start inside the input or left padding). */
int64_t pipert_pool_output_dim(int64_t in, int64_t kernel, int64_t pad_begin, int64_t pad_end,
                               int64_t stride, int64_t dilation, int ceil_mode);

/* ONNX MaxPool, 2-D NCHW (1-D: H = kH = 1). Padding never wins. indices
 * (nullable, y's shape) receive ONNX's storage_order=0 index of each maximum
 * in the flattened x: ((n*C + c)*H + h)*W + w. */
void pipert_maxpool2d_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                          const int64_t kernel[2], const int64_t pads[4],
                          const int64_t strides[2], const int64_t dilations[2], int ceil_mode,
                          float *y, int64_t *indices);
/* dx: dy routed to the first maximum of each window (recomputed from x). */
void pipert_maxpool2d_grad_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                               const float *dy, const int64_t kernel[2], const int64_t pads[4],
                               const int64_t strides[2], const int64_t dilations[2],
                               int ceil_mode, float *dx);
/* ONNX AveragePool, 2-D NCHW. count_include_pad counts the padding (but not
 * what ceil_mode adds past it) in the divisor. */
void pipert_avgpool2d_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                          const int64_t kernel[2], const int64_t pads[4],
                          const int64_t strides[2], int ceil_mode, int count_include_pad,
                          float *y);
void pipert_avgpool2d_grad_f32(pipert_context *ctx, const float *dy, const int64_t x_shape[4],
                               const int64_t kernel[2], const int64_t pads[4],
                               const int64_t strides[2], int ceil_mode, int count_include_pad,
                               float *dx);
/* ONNX GlobalAveragePool on (N, C, d...), rank >= 3; y is (N, C, 1...). */
void pipert_global_avgpool_f32(pipert_context *ctx, const float *x, int64_t rank,
                               const int64_t *shape, float *y);
void pipert_global_avgpool_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                                    const int64_t *x_shape, float *dx);

/*===------------------------------ data movement (any dtype) -------------===*/

/* ONNX Transpose: y.shape[i] = x.shape[perm[i]]; perm NULL reverses. */
void pipert_transpose(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank,
                      const int64_t *shape, const int64_t *perm, void *y);
/* ONNX Concat of n inputs that agree except on `axis`; xs[i] has extent
 * axis_sizes[i] there. y_shape is the output shape. */
void pipert_concat(pipert_context *ctx, pipert_dtype dtype, int64_t n, const void *const *xs,
                   const int64_t *axis_sizes, int64_t rank, const int64_t *y_shape,
                   int64_t axis, void *y);
/* ONNX Split into n outputs with extents split[i] along axis. */
void pipert_split(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank,
                  const int64_t *shape, int64_t axis, int64_t n, const int64_t *split,
                  void *const *ys);
/* ONNX Slice (opset >= 10): n_axes entries of starts, ends, axes (nullable:
 * 0..n_axes-1), steps (nullable: all 1); negative values count from the end,
 * out-of-range values are clamped, negative steps walk backwards. */
void pipert_slice(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank,
                  const int64_t *shape, int64_t n_axes, const int64_t *starts,
                  const int64_t *ends, const int64_t *axes, const int64_t *steps, void *y);
/* Output shape of pipert_slice (y_shape: rank entries). */
void pipert_slice_shape(int64_t rank, const int64_t *shape, int64_t n_axes,
                        const int64_t *starts, const int64_t *ends, const int64_t *axes,
                        const int64_t *steps, int64_t *y_shape);
/* Gradient of Slice: dx (x's shape) is zero except the sliced elements, dy. */
void pipert_slice_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                           const int64_t *x_shape, int64_t n_axes, const int64_t *starts,
                           const int64_t *ends, const int64_t *axes, const int64_t *steps,
                           float *dx);
/* ONNX Gather: y = data indexed along axis by indices (negative indices
 * count from the end; out of range fails). y.shape = data.shape[:axis] +
 * indices.shape + data.shape[axis+1:]. */
void pipert_gather(pipert_context *ctx, pipert_dtype dtype, const void *data, int64_t rank,
                   const int64_t *shape, const int64_t *indices, int64_t idx_rank,
                   const int64_t *idx_shape, int64_t axis, void *y);
/* Gradient of Gather: dx (data's shape) = zeros, then scatter-add of dy. */
void pipert_gather_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                            const int64_t *data_shape, const int64_t *indices, int64_t idx_rank,
                            const int64_t *idx_shape, int64_t axis, float *dx);
/* ONNX GatherND: indices (idx_shape (..., k), int64) name slices of data
 * after its first batch_dims axes, which pair with indices' first
 * batch_dims axes: y.shape = idx_shape[:-1] + shape[batch_dims + k:].
 * Negative indices count from the end; out of range fails. */
void pipert_gather_nd(pipert_context *ctx, pipert_dtype dtype, const void *data, int64_t rank,
                      const int64_t *shape, const int64_t *indices, int64_t idx_rank,
                      const int64_t *idx_shape, int64_t batch_dims, void *y);
/* Gradient of GatherND: dx (data's shape) = zeros, then dy's slices added
 * at their tuples (repeated tuples accumulate). */
void pipert_gather_nd_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                               const int64_t *data_shape, const int64_t *indices,
                               int64_t idx_rank, const int64_t *idx_shape, int64_t batch_dims,
                               float *dx);
/* ONNX ScatterND: y = data, then each slice named by a k-tuple of indices
 * (idx_shape (..., k)) replaced by (reduction PIPERT_SCATTER_NONE) or
 * combined with (ADD, MUL, MAX, MIN: f32, f64, i32 and i64) its slice of
 * updates (shape idx_shape[:-1] + shape[k:]), tuple by tuple in order.
 * Negative indices count from the end; out of range fails. */
enum { PIPERT_SCATTER_NONE = 0, PIPERT_SCATTER_ADD = 1, PIPERT_SCATTER_MUL = 2,
       PIPERT_SCATTER_MAX = 3, PIPERT_SCATTER_MIN = 4 };
void pipert_scatter_nd(pipert_context *ctx, pipert_dtype dtype, const void *data, int64_t rank,
                       const int64_t *shape, const int64_t *indices, int64_t idx_rank,
                       const int64_t *idx_shape, const void *updates, int64_t reduction,
                       void *y);
/* Gradient of ScatterND (reduction none) for data: dx = dy with the
 * slices the tuples name set to zero. */
void pipert_scatter_nd_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                                const int64_t *shape, const int64_t *indices, int64_t idx_rank,
                                const int64_t *idx_shape, float *dx);
/* ONNX GatherElements: y (idx_shape, rank `rank`, no larger than shape off
 * `axis`) = data at each position with its `axis` coordinate replaced by
 * the index there. Negative indices count from the end; out of range fails. */
void pipert_gather_elements(pipert_context *ctx, pipert_dtype dtype, const void *data,
                            int64_t rank, const int64_t *shape, const int64_t *indices,
                            const int64_t *idx_shape, int64_t axis, void *y);
/* Gradient of GatherElements: dx (data's shape) = zeros, then each entry of
 * dy added where its index points (repeated positions accumulate). */
void pipert_gather_elements_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                                     const int64_t *data_shape, const int64_t *indices,
                                     const int64_t *idx_shape, int64_t axis, float *dx);
/* ONNX ScatterElements: y = data, then the entry each index names (as in
 * GatherElements) replaced by (PIPERT_SCATTER_NONE) or combined with (ADD,
 * MUL, MAX, MIN: f32, f64, i32 and i64) the update at the index's position
 * (updates has idx_shape), in row-major order of the indices. */
void pipert_scatter_elements(pipert_context *ctx, pipert_dtype dtype, const void *data,
                             int64_t rank, const int64_t *shape, const int64_t *indices,
                             const int64_t *idx_shape, const void *updates, int64_t axis,
                             int64_t reduction, void *y);
/* Gradient of ScatterElements (reduction none) for data: dx = dy with the
 * entries the indices name set to zero. */
void pipert_scatter_elements_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                                      const int64_t *shape, const int64_t *indices,
                                      const int64_t *idx_shape, int64_t axis, float *dx);
/* ONNX Expand: y (y_shape, the broadcast of x's shape and the target shape)
 * is x broadcast. Its gradient is pipert_reduce_to_shape_f32. */
void pipert_expand(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t x_rank,
                   const int64_t *x_shape, int64_t y_rank, const int64_t *y_shape, void *y);
/* ONNX Tile: y (shape[i] * repeats[i]) is x repeated along every axis. */
void pipert_tile(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank,
                 const int64_t *shape, const int64_t *repeats, void *y);
/* Gradient of Tile: dx (x_shape) sums dy over the tiles. */
void pipert_tile_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                          const int64_t *x_shape, const int64_t *repeats, float *dx);
typedef enum pipert_pad_mode {
  PIPERT_PAD_CONSTANT = 0,
  PIPERT_PAD_REFLECT = 1, /* mirror without repeating the edge; pads < extent */
  PIPERT_PAD_EDGE = 2,
} pipert_pad_mode;
/* ONNX Pad on f32, f64, i64, i32, i8, u8 or bool: pads are 2 * rank entries
 * (all begins, then all ends; negative ones crop); y.shape[i] = shape[i] +
 * begin[i] + end[i]. CONSTANT fills with value converted to the dtype. */
void pipert_pad(pipert_context *ctx, pipert_dtype dtype, pipert_pad_mode mode, const void *x,
                int64_t rank, const int64_t *shape, const int64_t *pads, float value, void *y);
/* Gradient of Pad: dx (x_shape) is the sum of dy over the output elements
 * that read each input element (one for CONSTANT, several near the borders
 * for REFLECT and EDGE). */
void pipert_pad_grad_f32(pipert_context *ctx, pipert_pad_mode mode, const float *dy, int64_t rank,
                         const int64_t *x_shape, const int64_t *pads, float *dx);
/* ONNX Trilu on the last two axes (rank >= 2): keeps element (r, c) where
 * c - r >= k (upper) or c - r <= k (lower), zero elsewhere. Its gradient is
 * the same call on dy. In place allowed. */
void pipert_trilu(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank,
                  const int64_t *shape, int upper, int64_t k, void *y);
/* ONNX Cast of n elements between f32, f64, i64, i32, i8, u8, bool.
 * Float to integer truncates toward zero; anything to bool is (v != 0). */
void pipert_cast(pipert_context *ctx, pipert_dtype from, const void *x, pipert_dtype to, void *y,
                 int64_t n);

/*===------------------------------ reductions ----------------------------===*/

typedef enum pipert_reduce_op {
  PIPERT_REDUCE_SUM = 0,
  PIPERT_REDUCE_MEAN = 1,
  PIPERT_REDUCE_MAX = 2,
  PIPERT_REDUCE_MIN = 3,
  PIPERT_REDUCE_SUM_SQUARE = 4,
} pipert_reduce_op;

/* ONNX ReduceSum/ReduceMean/...: reduces over n_axes axes (negative count
 * from the end). n_axes == 0 reduces every axis, or, with
 * noop_with_empty_axes, copies x. */
void pipert_reduce_f32(pipert_context *ctx, pipert_reduce_op op, const float *x, int64_t rank,
                       const int64_t *shape, int64_t n_axes, const int64_t *axes,
                       int noop_with_empty_axes, float *y);

/* Gradient of ReduceMax (op MAX) / ReduceMin (op MIN) over the axes as in
 * pipert_reduce_f32: dx (x's shape) is zero except that each output's dy goes
 * to the first (row-major) extremal element of its group. */
void pipert_reduce_extremum_grad_f32(pipert_context *ctx, pipert_reduce_op op, const float *x,
                                     int64_t rank, const int64_t *shape, int64_t n_axes,
                                     const int64_t *axes, int noop_with_empty_axes,
                                     const float *dy, float *dx);
/* ONNX ArgMax (op MAX) / ArgMin (op MIN) along axis: y (int64, x's shape
 * without axis) holds the index of the first extremum, or of the last with
 * select_last_index. */
void pipert_arg_reduce_f32(pipert_context *ctx, pipert_reduce_op op, const float *x, int64_t rank,
                           const int64_t *shape, int64_t axis, int select_last_index,
                           int64_t *y);
/* ONNX CumSum along axis on f32, f64, i32 or i64; exclusive leaves out the
 * element itself, reverse sums from the end. Its gradient is the same call
 * on dy with reverse toggled. In place allowed. */
void pipert_cumsum(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank,
                   const int64_t *shape, int64_t axis, int exclusive, int reverse, void *y);

/*===------------------------------ dropout -------------------------------===*/

/* ONNX Dropout: in training mode with ratio > 0, keeps each element with
 * probability 1 - ratio (mask from the context's random stream) and scales
 * kept ones by 1 / (1 - ratio); otherwise y = x and mask is all 1. mask
 * (nullable) is uint8 0/1. */
void pipert_dropout_f32(pipert_context *ctx, const float *x, int64_t n, float ratio, int training,
                        float *y, uint8_t *mask);
/* dx = dy * mask / (1 - ratio) (ratio as in the forward, 0 if not training). */
void pipert_dropout_grad_f32(pipert_context *ctx, const float *dy, const uint8_t *mask, int64_t n,
                             float ratio, float *dx);

/*===------------------------------ losses --------------------------------===*/

typedef enum pipert_reduction {
  PIPERT_REDUCTION_NONE = 0,
  PIPERT_REDUCTION_SUM = 1,
  PIPERT_REDUCTION_MEAN = 2,
} pipert_reduction;

/* ONNX SoftmaxCrossEntropyLoss. scores: (N, C, d...) with rank >= 2;
 * labels: (N, d...) int64; weights (nullable): (C). Entries whose label is
 * ignore_index (when has_ignore_index) contribute 0 and, for mean, are not
 * counted. loss: scalar for sum/mean, (N, d...) for none. Mean divides by the
 * sum of the weights of the counted entries. log_prob (nullable): the
 * log-softmax of scores over C, same shape as scores. */
void pipert_softmax_cross_entropy_loss_f32(pipert_context *ctx, const float *scores, int64_t rank,
                                           const int64_t *shape, const int64_t *labels,
                                           const float *weights, int has_ignore_index,
                                           int64_t ignore_index, pipert_reduction reduction,
                                           float *loss, float *log_prob);
/* dscores from dloss (scalar, or (N, d...) for none) and the forward's
 * log_prob. */
void pipert_softmax_cross_entropy_loss_grad_f32(
    pipert_context *ctx, const float *dloss, const float *log_prob, int64_t rank,
    const int64_t *shape, const int64_t *labels, const float *weights, int has_ignore_index,
    int64_t ignore_index, pipert_reduction reduction, float *dscores);
/* ONNX NegativeLogLikelihoodLoss: input (N, C, d...) of log-probabilities,
 * same conventions as above. */
void pipert_nll_loss_f32(pipert_context *ctx, const float *input, int64_t rank,
                         const int64_t *shape, const int64_t *labels, const float *weights,
                         int has_ignore_index, int64_t ignore_index, pipert_reduction reduction,
                         float *loss);
void pipert_nll_loss_grad_f32(pipert_context *ctx, const float *dloss, int64_t rank,
                              const int64_t *shape, const int64_t *labels, const float *weights,
                              int has_ignore_index, int64_t ignore_index,
                              pipert_reduction reduction, float *dinput);

/*===------------------------------ resampling ----------------------------===*/

typedef enum pipert_resize_mode {
  PIPERT_RESIZE_NEAREST = 0,
  PIPERT_RESIZE_LINEAR = 1, /* n-linear: one linear interpolation per resized axis */
  PIPERT_RESIZE_CUBIC = 2,
} pipert_resize_mode;
/* ONNX coordinate_transformation_mode: the input coordinate x of output
 * index o on an axis of extents in -> out with scale s; where the resized
 * length appears (out below), it is in * s when scales are given (possibly
 * fractional, as in the ONNX reference), else out. */
typedef enum pipert_resize_coord {
  PIPERT_RESIZE_HALF_PIXEL = 0,           /* (o + 0.5) / s - 0.5 */
  PIPERT_RESIZE_ASYMMETRIC = 1,           /* o / s */
  PIPERT_RESIZE_ALIGN_CORNERS = 2,        /* o * (in - 1) / (out - 1), 0 if out == 1 */
  PIPERT_RESIZE_PYTORCH_HALF_PIXEL = 3,   /* half_pixel, 0 if out == 1 */
  PIPERT_RESIZE_TF_HALF_PIXEL_FOR_NN = 4, /* (o + 0.5) / s */
  PIPERT_RESIZE_TF_CROP_AND_RESIZE = 5,   /* over roi; outside [0, in-1]: extrapolation */
  PIPERT_RESIZE_HALF_PIXEL_SYMMETRIC = 6, /* half_pixel about the centre (opset 19) */
} pipert_resize_coord;
typedef enum pipert_resize_nearest {
  PIPERT_RESIZE_ROUND_PREFER_FLOOR = 0,
  PIPERT_RESIZE_ROUND_PREFER_CEIL = 1,
  PIPERT_RESIZE_FLOOR = 2,
  PIPERT_RESIZE_CEIL = 3,
} pipert_resize_nearest;
/* ONNX Resize of x viewed as (outer, D, H, W) into y (outer, oD, oH, oW): the
 * last three axes are resized (a lower rank has leading extents 1, scale 1),
 * each by a separable filter (nearest: 1 tap, linear: 2, cubic: 4; indices
 * outside the axis clamp to its edge, or with exclude_outside drop out and
 * the other weights are renormalised). scales (nullable): the three axes'
 * scales; null means out / in (ONNX's `sizes` form). roi (nullable unless
 * TF_CROP_AND_RESIZE): starts of the three axes, then ends, normalised. */
void pipert_resize_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                       const int64_t y_shape[4], const float *scales, const float *roi,
                       pipert_resize_mode mode, pipert_resize_coord coord,
                       pipert_resize_nearest nearest, float cubic_coeff_a, int exclude_outside,
                       float extrapolation_value, float *y);
/* Its adjoint: dx (x_shape) receives each dy entry times its taps' weights
 * (extrapolated entries contribute nothing). */
void pipert_resize_grad_f32(pipert_context *ctx, const float *dy, const int64_t x_shape[4],
                            const int64_t y_shape[4], const float *scales, const float *roi,
                            pipert_resize_mode mode, pipert_resize_coord coord,
                            pipert_resize_nearest nearest, float cubic_coeff_a,
                            int exclude_outside, float *dx);

/*===------------------------------ attention -----------------------------===*/

/* Scaled dot-product attention (onnx.Attention; docs/design-notes.md
 * "Attention"). Per batch b < batch and head h < heads:
 *   S = scale * Q_bh K_bhᵀ (t x s), S_ij = -inf where masked,
 *   P = softmax of each row of S, Y_bh = P V_bh (t x dh).
 * Q_bh row i is q + b * sb + h * sh + i * sr, its dh floats contiguous, with
 * (sb, sh, sr) = strides[0..2]; K, V and Y likewise with strides[3..5],
 * [6..8] and [9..11] (in floats; K and V have s rows). So Q may be (B, T,
 * H*dh), (B, H, T, dh) or a column block of a fused (B, T, 3*H*dh)
 * projection. Masked: j > i where causal (upper-left aligned); where mask
 * (bytes, nullable; 1 = attend) is 0 at mask[b * mb + h * mh + i * mr + j],
 * (mb, mh, mr) = mask_strides[0..2], or (0, 0, s) when mask_strides is
 * null (one t x s mask for every pair; a stride of 0 broadcasts: a key
 * padding mask of (batch, 1, 1, s) has (s, 0, 0)). bias (nullable; ONNX's
 * float attn_mask) is added to S where not masked, at the same offsets;
 * exp(S_ij - max) below exp(-104) is 0. A row with every position masked
 * (or -inf) is NaN (softmax of -inf everywhere). dropout in [0, 1): with
 * p > 0, Y_bh = (P * M / (1 - p)) V_bh, M the mask pipert_dropout_f32 draws
 * for P's elements in (batch, heads, t, s) order: one draw of the context's
 * random stream (as that Dropout's call would take it) seeds
 * formula::dropout_keep of each element's flat index. probs (nullable): P,
 * (batch, heads, t, s), as the gradient reads it; under dropout with the
 * sign bit set where M is 0 (-P, -0.f for a P of 0). kv_heads (dividing
 * heads; grouped-query attention): K and V have kv_heads heads, and query
 * head h reads K_b(h / (heads / kv_heads)) and V likewise (K's head stride
 * steps over key/value heads). */
void pipert_attention_f32(pipert_context *ctx, const float *q, const float *k, const float *v,
                          const int64_t *strides, int64_t batch, int64_t heads, int64_t kv_heads,
                          int64_t t, int64_t s, int64_t dh, float scale, int32_t causal,
                          float dropout,
                          const uint8_t *mask, const float *bias,
                          const int64_t *mask_strides, float *y, float *probs);
/* Its gradient from the forward's P (probs, required) and dY (strides[9..11]):
 *   dP = dY_bh V_bhᵀ, dV_bh = Pᵀ dY_bh, dS = P * (dP - rowsum(dP * P)),
 *   dQ_bh = scale dS K_bh, dK_bh = scale dSᵀ Q_bh
 * (with kv_heads < heads each key/value head's dK and dV summed over the
 * query heads that read it),
 * dq, dk, dv written in the layouts of q, k, v (strides[0..8]); every
 * element of each is written. causal: the forward was (P is zero after the
 * diagonal), so the kernel may skip those blocks. dropout: the forward's;
 * with p > 0 probs is the forward's sign-marked P, and with D = |P| * M /
 * (1 - p) (M = 0 where the sign bit is set): dV_bh = Dᵀ dY_bh, dP = dY_bh
 * V_bhᵀ, dS = D * dP - |P| rowsum(D * dP). */
void pipert_attention_grad_f32(pipert_context *ctx, const float *q, const float *k,
                               const float *v, const int64_t *strides, int64_t batch,
                               int64_t heads, int64_t kv_heads, int64_t t, int64_t s, int64_t dh,
                               float scale,
                               int32_t causal, float dropout, const float *probs,
                               const float *dy, float *dq,
                               float *dk, float *dv);

/*===------------------------------ recurrent -----------------------------===*/

/* ONNX LSTM (layout 0, default activations, no peepholes, clip or
 * input_forget, every sequence full length): X (T, B, I), W (D, 4H, I),
 * R (D, 4H, H), B (D, 8H), initial_h / initial_c (D, B, H), Y (T, D, B, H),
 * Y_h / Y_c (D, B, H). direction: 0 forward, 1 reverse, 2 bidirectional
 * (D = 2). b, initial_h, initial_c nullable (zeros); y, y_h, y_c nullable
 * (not written). saved (nullable): the states the gradient reads,
 * (D*6*T, B, H): per direction the planes h, c, i, o, f, g of (T, B, H)
 * (runtime/core/rnn_driver.h, "Saved states"). */
void pipert_lstm_f32(pipert_context *ctx, const float *x, const float *w, const float *r,
                     const float *b, const float *initial_h, const float *initial_c,
                     int64_t seq_length, int64_t batch, int64_t input_size, int64_t hidden_size,
                     int32_t direction, float *y, float *y_h, float *y_c, float *saved);
/* Its gradient (BPTT): from the forward's inputs, dy, dy_h, dy_c (the
 * gradients of Y, Y_h, Y_c; nullable: zero) and the forward's saved states
 * (nullable: recomputed) to dx, dw, dr, db, dinitial_h, dinitial_c (each
 * nullable: not computed). */
void pipert_lstm_grad_f32(pipert_context *ctx, const float *x, const float *w, const float *r,
                          const float *b, const float *initial_h, const float *initial_c,
                          const float *dy, const float *dy_h, const float *dy_c,
                          const float *saved, int64_t seq_length, int64_t batch, int64_t input_size,
                          int64_t hidden_size, int32_t direction, float *dx, float *dw, float *dr,
                          float *db, float *dinitial_h, float *dinitial_c);
/* ONNX GRU (linear_before_reset 0 or 1), otherwise as pipert_lstm_f32 with
 * 3 gates (z, r, h): W (D, 3H, I), R (D, 3H, H), B (D, 6H); no cell state;
 * saved (D*5*T, B, H): per direction the planes h, z, r, n and rn
 * (linear_before_reset 1) or r . h_prev (0). */
void pipert_gru_f32(pipert_context *ctx, const float *x, const float *w, const float *r,
                    const float *b, const float *initial_h, int64_t seq_length, int64_t batch,
                    int64_t input_size, int64_t hidden_size, int32_t direction,
                    int32_t linear_before_reset, float *y, float *y_h, float *saved);
void pipert_gru_grad_f32(pipert_context *ctx, const float *x, const float *w, const float *r,
                         const float *b, const float *initial_h, const float *dy,
                         const float *dy_h, const float *saved, int64_t seq_length, int64_t batch, int64_t input_size,
                         int64_t hidden_size, int32_t direction, int32_t linear_before_reset,
                         float *dx, float *dw, float *dr, float *db, float *dinitial_h);

/*===------------------------------ optimizers ----------------------------===*/
/* All updates work on n elements, in place allowed (x_out == x, ...). `t` is
 * the update count as in ai.onnx.preview.training (the first update has
 * t = 0 for Momentum's beta and bias corrections are skipped when t == 0). */

/* Plain SGD: x_out = x - lr * (g + weight_decay * x). */
void pipert_sgd_f32(pipert_context *ctx, float lr, float weight_decay, const float *x,
                    const float *g, int64_t n, float *x_out);
/* ai.onnx.preview.training Momentum. g' = norm_coefficient * x + g;
 * standard: v' = alpha * v + (t > 0 ? beta : 1) * g'; x' = x - lr * v'.
 * nesterov: v' = alpha * v + g'; x' = x - lr * (g' + alpha * v'). */
void pipert_momentum_f32(pipert_context *ctx, float lr, int64_t t, float alpha, float beta,
                         float norm_coefficient, int nesterov, const float *x, const float *g,
                         const float *v, int64_t n, float *x_out, float *v_out);
/* ai.onnx.preview.training Adam. g' = norm_coefficient * x + g;
 * v' = alpha v + (1-alpha) g'; h' = beta h + (1-beta) g'^2;
 * lr' = t > 0 ? lr * sqrt(1 - beta^t) / (1 - alpha^t) : lr;
 * x' = (1 - norm_coefficient_post) * (x - lr' * v' / (sqrt(h') + epsilon)). */
void pipert_adam_f32(pipert_context *ctx, float lr, int64_t t, float alpha, float beta,
                     float epsilon, float norm_coefficient, float norm_coefficient_post,
                     const float *x, const float *g, const float *v, const float *h, int64_t n,
                     float *x_out, float *v_out, float *h_out);
/* AdamW (decoupled weight decay, Loshchilov & Hutter; PyTorch's formula):
 * x *= 1 - lr * weight_decay; m' = b1 m + (1-b1) g; v' = b2 v + (1-b2) g^2;
 * x -= lr / (1 - b1^t) * m' / (sqrt(v' / (1 - b2^t)) + epsilon), t >= 1. */
void pipert_adamw_f32(pipert_context *ctx, float lr, int64_t t, float beta1, float beta2,
                      float epsilon, float weight_decay, const float *x, const float *g,
                      const float *m, const float *v, int64_t n, float *x_out, float *m_out,
                      float *v_out);
/* ai.onnx.preview.training Adagrad. lr' = lr / (1 + t * decay_factor);
 * g' = norm_coefficient * x + g; h' = h + g'^2;
 * x' = x - lr' * g' / (sqrt(h') + epsilon). */
void pipert_adagrad_f32(pipert_context *ctx, float lr, int64_t t, float decay_factor,
                        float epsilon, float norm_coefficient, const float *x, const float *g,
                        const float *h, int64_t n, float *x_out, float *h_out);

/* Weight versions: copies `bytes` bytes of src into slot `slot` of a buffer
 * of equally sized slots (dst = slots + slot * bytes). */
void pipert_copy_to_slot(pipert_context *ctx, void *slots, int64_t slot, const void *src,
                         int64_t bytes);
/* SpecTrain weight prediction: w_hat = w - s * lr * v. */
void pipert_predict_weights_f32(pipert_context *ctx, const float *w, const float *v, float s,
                                float lr, int64_t n, float *w_hat);
/* SpecTrain weight prediction along Adam's direction (PipeOptim):
 * w_hat = w - s * lr * m_hat / (sqrt(v_hat) + eps), m_hat = m / (1 - beta1^t),
 * v_hat = v / (1 - beta2^t), t the updates done (w_hat = w for t <= 0). */
void pipert_predict_adam_f32(pipert_context *ctx, const float *w, const float *m,
                             const float *v, int64_t t, float beta1, float beta2, float epsilon,
                             float s, float lr, int64_t n, float *w_hat);
/* Elastic averaging (EASGD), local side: diff = x - center (nullable
 * output, for the allreduce that forms sum_i(x_i - center)); x -= alpha * diff. */
void pipert_easgd_local_f32(pipert_context *ctx, float alpha, const float *center, float *x,
                            float *diff, int64_t n);
/* Elastic averaging, centre side: center += alpha * diff_sum. */
void pipert_easgd_center_f32(pipert_context *ctx, float alpha, const float *diff_sum,
                             float *center, int64_t n);

/* Gradient clipping by the global L2 norm (torch.nn.utils.clip_grad_norm_):
 * the gradients are grad_scale * grads[i] (counts[i] float32 values each) on
 * every rank of `comm` (NULL: this rank alone; comm's type is the
 * transport's pipert_comm); with N = sqrt(sum of their squares over all of
 * them), every grads[i] is multiplied by min(1, max_norm / (N + 1e-6)).
 * Collective over comm; n may be 0 (a rank without weights). */
void pipert_clip_grad_norm_f32(pipert_context *ctx, struct pipert_comm *comm,
                               float *const *grads, const int64_t *counts, int32_t n,
                               float grad_scale, float max_norm);

/* BLAS-1 helpers: y += alpha * x; x *= alpha; x = value; y += x. */
void pipert_axpy_f32(pipert_context *ctx, float alpha, const float *x, float *y, int64_t n);
void pipert_scale_f32(pipert_context *ctx, float alpha, float *x, int64_t n);
void pipert_fill_f32(pipert_context *ctx, float value, float *x, int64_t n);
void pipert_accumulate_f32(pipert_context *ctx, const float *x, float *y, int64_t n);

#ifdef __cplusplus
}
#endif

#endif /* PIPERT_PIPERT_KERNELS_H */
