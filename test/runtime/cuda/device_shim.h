//===- device_shim.h - kernel calls on host buffers, run on the device -===//
//
// Force-included (-include) into the backend-agnostic kernel tests of
// test/runtime/kernels when they are built against libpipert_cuda: every
// pipert_<kernel>(...) call there, made with host pointers, becomes a call of
// pipert_cuda_test::<kernel>, which copies the buffers to the device
// (pipert_copy_to_device), runs the CUDA kernel and copies the outputs back
// (pipert_copy_to_host). Shape and attribute arrays stay on the host, as the
// ABI wants. Kept in step with pipert_kernels.h by hand; device_shim.cpp
// implements it, and check_shim_coverage.cmake (test
// runtime.cuda.kernels.shim_coverage) fails if a kernel the shared tests call
// is missing here.
//
//===----------------------------------------------------------------------===//
#ifndef PIPERT_TEST_CUDA_DEVICE_SHIM_H
#define PIPERT_TEST_CUDA_DEVICE_SHIM_H

#include "pipert/pipert_kernels.h"

namespace pipert_cuda_test {
void unary_f32(pipert_context *ctx, pipert_unary_op op, const float *x, int64_t n, float *y);
void binary_f32(pipert_context *ctx, pipert_binary_op op, const float *a, int64_t a_rank, const int64_t *a_shape, const float *b, int64_t b_rank, const int64_t *b_shape, float *y);
void binary_i64(pipert_context *ctx, pipert_binary_op op, const int64_t *a, int64_t a_rank, const int64_t *a_shape, const int64_t *b, int64_t b_rank, const int64_t *b_shape, int64_t *y);
void equal_f32(pipert_context *ctx, const float *a, int64_t a_rank, const int64_t *a_shape, const float *b, int64_t b_rank, const int64_t *b_shape, uint8_t *y);
void equal_i64(pipert_context *ctx, const int64_t *a, int64_t a_rank, const int64_t *a_shape, const int64_t *b, int64_t b_rank, const int64_t *b_shape, uint8_t *y);
void activation_f32(pipert_context *ctx, pipert_activation_op op, float alpha, float beta, const float *x, int64_t n, float *y);
void activation_grad_f32(pipert_context *ctx, pipert_activation_op op, float alpha, float beta, const float *x, const float *dy, int64_t n, float *dx);
void compare_f32(pipert_context *ctx, pipert_compare_op op, const float *a, int64_t a_rank, const int64_t *a_shape, const float *b, int64_t b_rank, const int64_t *b_shape, uint8_t *y);
void compare_i64(pipert_context *ctx, pipert_compare_op op, const int64_t *a, int64_t a_rank, const int64_t *a_shape, const int64_t *b, int64_t b_rank, const int64_t *b_shape, uint8_t *y);
void logical(pipert_context *ctx, pipert_logical_op op, const uint8_t *a, int64_t a_rank, const int64_t *a_shape, const uint8_t *b, int64_t b_rank, const int64_t *b_shape, uint8_t *y);
void not_u8(pipert_context *ctx, const uint8_t *x, int64_t n, uint8_t *y);
void where(pipert_context *ctx, pipert_dtype dtype, const uint8_t *cond, int64_t c_rank, const int64_t *c_shape, const void *x, int64_t x_rank, const int64_t *x_shape, const void *y, int64_t y_rank, const int64_t *y_shape, void *out);
void relu_grad_f32(pipert_context *ctx, const float *x, const float *dy, int64_t n, float *dx);
void tanh_grad_f32(pipert_context *ctx, const float *y, const float *dy, int64_t n, float *dx);
void sigmoid_grad_f32(pipert_context *ctx, const float *y, const float *dy, int64_t n, float *dx);
void erf_grad_f32(pipert_context *ctx, const float *x, const float *dy, int64_t n, float *dx);
void reduce_to_shape_f32(pipert_context *ctx, const float *dy, int64_t dy_rank, const int64_t *dy_shape, int64_t x_rank, const int64_t *x_shape, float *dx);
void sgemm(pipert_context *ctx, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
void gemm_f32(pipert_context *ctx, const float *a, const float *b, const float *c, int64_t c_rank, const int64_t *c_shape, int64_t m, int64_t n, int64_t k, int trans_a, int trans_b, float alpha, float beta, float *y);
void matmul_f32(pipert_context *ctx, const float *a, int64_t a_rank, const int64_t *a_shape, const float *b, int64_t b_rank, const int64_t *b_shape, float *y);
void matmul_t_f32(pipert_context *ctx, const float *a, int64_t a_rank, const int64_t *a_shape, int trans_a, const float *b, int64_t b_rank, const int64_t *b_shape, int trans_b, float *y);
void attention_f32(pipert_context *ctx, const float *q, const float *k, const float *v, const int64_t *strides, int64_t batch, int64_t heads, int64_t kv_heads, int64_t t, int64_t s, int64_t dh, float scale, int32_t causal, float dropout, const uint8_t *mask, const float *bias, const int64_t *mask_strides, float *y, float *probs);
void attention_grad_f32(pipert_context *ctx, const float *q, const float *k, const float *v, const int64_t *strides, int64_t batch, int64_t heads, int64_t kv_heads, int64_t t, int64_t s, int64_t dh, float scale, int32_t causal, float dropout, const float *probs, const float *dy, float *dq, float *dk, float *dv);
void softmax_f32(pipert_context *ctx, const float *x, int64_t rank, const int64_t *shape, int64_t axis, float *y);
void log_softmax_f32(pipert_context *ctx, const float *x, int64_t rank, const int64_t *shape, int64_t axis, float *y);
void softmax_grad_f32(pipert_context *ctx, const float *y, const float *dy, int64_t rank, const int64_t *shape, int64_t axis, float *dx);
void log_softmax_grad_f32(pipert_context *ctx, const float *y, const float *dy, int64_t rank, const int64_t *shape, int64_t axis, float *dx);
void layer_norm_f32(pipert_context *ctx, const float *x, int64_t rank, const int64_t *shape, int64_t axis, float epsilon, const float *scale, const float *bias, float *y, float *mean, float *inv_std_dev);
void layer_norm_grad_f32(pipert_context *ctx, const float *x, int64_t rank, const int64_t *shape, int64_t axis, const float *scale, const float *mean, const float *inv_std_dev, const float *dy, float *dx, float *dscale, float *dbias, int accumulate);
void batch_norm_inference_f32(pipert_context *ctx, const float *x, int64_t rank, const int64_t *shape, const float *scale, const float *bias, const float *mean, const float *var, float epsilon, float *y);
void batch_norm_training_f32(pipert_context *ctx, const float *x, int64_t rank, const int64_t *shape, const float *scale, const float *bias, const float *mean, const float *var, float epsilon, float momentum, float *y, float *running_mean, float *running_var, float *saved_mean, float *saved_inv_std);
void batch_norm_grad_f32(pipert_context *ctx, const float *x, int64_t rank, const int64_t *shape, const float *scale, float epsilon, const float *dy, float *dx, float *dscale, float *dbias, int accumulate);
void conv2d_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4], const float *w, const int64_t w_shape[4], const float *b, const int64_t pads[4], const int64_t strides[2], const int64_t dilations[2], int64_t group, float *y);
void conv2d_grad_input_f32(pipert_context *ctx, const float *dy, const float *w, const int64_t w_shape[4], const int64_t x_shape[4], const int64_t pads[4], const int64_t strides[2], const int64_t dilations[2], int64_t group, float *dx);
void conv2d_grad_weight_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4], const float *dy, const int64_t w_shape[4], const int64_t pads[4], const int64_t strides[2], const int64_t dilations[2], int64_t group, float *dw, int accumulate);
void conv2d_grad_bias_f32(pipert_context *ctx, const float *dy, const int64_t dy_shape[4], float *db, int accumulate);
void maxpool2d_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4], const int64_t kernel[2], const int64_t pads[4], const int64_t strides[2], const int64_t dilations[2], int ceil_mode, float *y, int64_t *indices);
void maxpool2d_grad_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4], const float *dy, const int64_t kernel[2], const int64_t pads[4], const int64_t strides[2], const int64_t dilations[2], int ceil_mode, float *dx);
void avgpool2d_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4], const int64_t kernel[2], const int64_t pads[4], const int64_t strides[2], int ceil_mode, int count_include_pad, float *y);
void avgpool2d_grad_f32(pipert_context *ctx, const float *dy, const int64_t x_shape[4], const int64_t kernel[2], const int64_t pads[4], const int64_t strides[2], int ceil_mode, int count_include_pad, float *dx);
void resize_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4], const int64_t y_shape[4], const float *scales, const float *roi, pipert_resize_mode mode, pipert_resize_coord coord, pipert_resize_nearest nearest, float cubic_coeff_a, int exclude_outside, float extrapolation_value, float *y);
void resize_grad_f32(pipert_context *ctx, const float *dy, const int64_t x_shape[4], const int64_t y_shape[4], const float *scales, const float *roi, pipert_resize_mode mode, pipert_resize_coord coord, pipert_resize_nearest nearest, float cubic_coeff_a, int exclude_outside, float *dx);
void global_avgpool_f32(pipert_context *ctx, const float *x, int64_t rank, const int64_t *shape, float *y);
void global_avgpool_grad_f32(pipert_context *ctx, const float *dy, int64_t rank, const int64_t *x_shape, float *dx);
void transpose(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank, const int64_t *shape, const int64_t *perm, void *y);
void concat(pipert_context *ctx, pipert_dtype dtype, int64_t n, const void *const *xs, const int64_t *axis_sizes, int64_t rank, const int64_t *y_shape, int64_t axis, void *y);
void split(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank, const int64_t *shape, int64_t axis, int64_t n, const int64_t *split, void *const *ys);
void slice(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank, const int64_t *shape, int64_t n_axes, const int64_t *starts, const int64_t *ends, const int64_t *axes, const int64_t *steps, void *y);
void slice_grad_f32(pipert_context *ctx, const float *dy, int64_t rank, const int64_t *x_shape, int64_t n_axes, const int64_t *starts, const int64_t *ends, const int64_t *axes, const int64_t *steps, float *dx);
void gather(pipert_context *ctx, pipert_dtype dtype, const void *data, int64_t rank, const int64_t *shape, const int64_t *indices, int64_t idx_rank, const int64_t *idx_shape, int64_t axis, void *y);
void gather_grad_f32(pipert_context *ctx, const float *dy, int64_t rank, const int64_t *data_shape, const int64_t *indices, int64_t idx_rank, const int64_t *idx_shape, int64_t axis, float *dx);
void gather_elements(pipert_context *ctx, pipert_dtype dtype, const void *data, int64_t rank, const int64_t *shape, const int64_t *indices, const int64_t *idx_shape, int64_t axis, void *y);
void gather_elements_grad_f32(pipert_context *ctx, const float *dy, int64_t rank, const int64_t *data_shape, const int64_t *indices, const int64_t *idx_shape, int64_t axis, float *dx);
void scatter_elements(pipert_context *ctx, pipert_dtype dtype, const void *data, int64_t rank, const int64_t *shape, const int64_t *indices, const int64_t *idx_shape, const void *updates, int64_t axis, int64_t reduction, void *y);
void scatter_elements_grad_f32(pipert_context *ctx, const float *dy, int64_t rank, const int64_t *shape, const int64_t *indices, const int64_t *idx_shape, int64_t axis, float *dx);
void gather_nd(pipert_context *ctx, pipert_dtype dtype, const void *data, int64_t rank, const int64_t *shape, const int64_t *indices, int64_t idx_rank, const int64_t *idx_shape, int64_t batch_dims, void *y);
void gather_nd_grad_f32(pipert_context *ctx, const float *dy, int64_t rank, const int64_t *data_shape, const int64_t *indices, int64_t idx_rank, const int64_t *idx_shape, int64_t batch_dims, float *dx);
void scatter_nd(pipert_context *ctx, pipert_dtype dtype, const void *data, int64_t rank, const int64_t *shape, const int64_t *indices, int64_t idx_rank, const int64_t *idx_shape, const void *updates, int64_t reduction, void *y);
void scatter_nd_grad_f32(pipert_context *ctx, const float *dy, int64_t rank, const int64_t *shape, const int64_t *indices, int64_t idx_rank, const int64_t *idx_shape, float *dx);
void tile(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank, const int64_t *shape, const int64_t *repeats, void *y);
void tile_grad_f32(pipert_context *ctx, const float *dy, int64_t rank, const int64_t *x_shape, const int64_t *repeats, float *dx);
void pad(pipert_context *ctx, pipert_dtype dtype, pipert_pad_mode mode, const void *x, int64_t rank, const int64_t *shape, const int64_t *pads, float value, void *y);
void pad_grad_f32(pipert_context *ctx, pipert_pad_mode mode, const float *dy, int64_t rank, const int64_t *x_shape, const int64_t *pads, float *dx);
void trilu(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank, const int64_t *shape, int upper, int64_t k, void *y);
void expand(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t x_rank, const int64_t *x_shape, int64_t y_rank, const int64_t *y_shape, void *y);
void cast(pipert_context *ctx, pipert_dtype from, const void *x, pipert_dtype to, void *y, int64_t n);
void reduce_f32(pipert_context *ctx, pipert_reduce_op op, const float *x, int64_t rank, const int64_t *shape, int64_t n_axes, const int64_t *axes, int noop_with_empty_axes, float *y);
void reduce_extremum_grad_f32(pipert_context *ctx, pipert_reduce_op op, const float *x, int64_t rank, const int64_t *shape, int64_t n_axes, const int64_t *axes, int noop_with_empty_axes, const float *dy, float *dx);
void arg_reduce_f32(pipert_context *ctx, pipert_reduce_op op, const float *x, int64_t rank, const int64_t *shape, int64_t axis, int select_last_index, int64_t *y);
void cumsum(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank, const int64_t *shape, int64_t axis, int exclusive, int reverse, void *y);
void dropout_f32(pipert_context *ctx, const float *x, int64_t n, float ratio, int training, float *y, uint8_t *mask);
void dropout_grad_f32(pipert_context *ctx, const float *dy, const uint8_t *mask, int64_t n, float ratio, float *dx);
void softmax_cross_entropy_loss_f32(pipert_context *ctx, const float *scores, int64_t rank, const int64_t *shape, const int64_t *labels, const float *weights, int has_ignore_index, int64_t ignore_index, pipert_reduction reduction, float *loss, float *log_prob);
void softmax_cross_entropy_loss_grad_f32(pipert_context *ctx, const float *dloss, const float *log_prob, int64_t rank, const int64_t *shape, const int64_t *labels, const float *weights, int has_ignore_index, int64_t ignore_index, pipert_reduction reduction, float *dscores);
void nll_loss_f32(pipert_context *ctx, const float *input, int64_t rank, const int64_t *shape, const int64_t *labels, const float *weights, int has_ignore_index, int64_t ignore_index, pipert_reduction reduction, float *loss);
void nll_loss_grad_f32(pipert_context *ctx, const float *dloss, int64_t rank, const int64_t *shape, const int64_t *labels, const float *weights, int has_ignore_index, int64_t ignore_index, pipert_reduction reduction, float *dinput);
void lstm_f32(pipert_context *ctx, const float *x, const float *w, const float *r, const float *b, const float *initial_h, const float *initial_c, int64_t seq_length, int64_t batch, int64_t input_size, int64_t hidden_size, int32_t direction, float *y, float *y_h, float *y_c, float *saved);
void lstm_grad_f32(pipert_context *ctx, const float *x, const float *w, const float *r, const float *b, const float *initial_h, const float *initial_c, const float *dy, const float *dy_h, const float *dy_c, const float *saved, int64_t seq_length, int64_t batch, int64_t input_size, int64_t hidden_size, int32_t direction, float *dx, float *dw, float *dr, float *db, float *dinitial_h, float *dinitial_c);
void gru_f32(pipert_context *ctx, const float *x, const float *w, const float *r, const float *b, const float *initial_h, int64_t seq_length, int64_t batch, int64_t input_size, int64_t hidden_size, int32_t direction, int32_t linear_before_reset, float *y, float *y_h, float *saved);
void gru_grad_f32(pipert_context *ctx, const float *x, const float *w, const float *r, const float *b, const float *initial_h, const float *dy, const float *dy_h, const float *saved, int64_t seq_length, int64_t batch, int64_t input_size, int64_t hidden_size, int32_t direction, int32_t linear_before_reset, float *dx, float *dw, float *dr, float *db, float *dinitial_h);
void sgd_f32(pipert_context *ctx, float lr, float weight_decay, const float *x, const float *g, int64_t n, float *x_out);
void momentum_f32(pipert_context *ctx, float lr, int64_t t, float alpha, float beta, float norm_coefficient, int nesterov, const float *x, const float *g, const float *v, int64_t n, float *x_out, float *v_out);
void adam_f32(pipert_context *ctx, float lr, int64_t t, float alpha, float beta, float epsilon, float norm_coefficient, float norm_coefficient_post, const float *x, const float *g, const float *v, const float *h, int64_t n, float *x_out, float *v_out, float *h_out);
void adamw_f32(pipert_context *ctx, float lr, int64_t t, float beta1, float beta2, float epsilon, float weight_decay, const float *x, const float *g, const float *m, const float *v, int64_t n, float *x_out, float *m_out, float *v_out);
void adagrad_f32(pipert_context *ctx, float lr, int64_t t, float decay_factor, float epsilon, float norm_coefficient, const float *x, const float *g, const float *h, int64_t n, float *x_out, float *h_out);
void copy_to_slot(pipert_context *ctx, void *slots, int64_t slot, const void *src, int64_t bytes);
void predict_weights_f32(pipert_context *ctx, const float *w, const float *v, float s, float lr, int64_t n, float *w_hat);
void predict_adam_f32(pipert_context *ctx, const float *w, const float *m, const float *v, int64_t t, float beta1, float beta2, float epsilon, float s, float lr, int64_t n, float *w_hat);
void easgd_local_f32(pipert_context *ctx, float alpha, const float *center, float *x, float *diff, int64_t n);
void easgd_center_f32(pipert_context *ctx, float alpha, const float *diff_sum, float *center, int64_t n);
void clip_grad_norm_f32(pipert_context *ctx, struct pipert_comm *comm, float *const *grads, const int64_t *counts, int32_t n, float grad_scale, float max_norm);
void axpy_f32(pipert_context *ctx, float alpha, const float *x, float *y, int64_t n);
void scale_f32(pipert_context *ctx, float alpha, float *x, int64_t n);
void fill_f32(pipert_context *ctx, float value, float *x, int64_t n);
void accumulate_f32(pipert_context *ctx, const float *x, float *y, int64_t n);
} // namespace pipert_cuda_test

#define pipert_unary_f32 ::pipert_cuda_test::unary_f32
#define pipert_binary_f32 ::pipert_cuda_test::binary_f32
#define pipert_binary_i64 ::pipert_cuda_test::binary_i64
#define pipert_equal_f32 ::pipert_cuda_test::equal_f32
#define pipert_equal_i64 ::pipert_cuda_test::equal_i64
#define pipert_activation_f32 ::pipert_cuda_test::activation_f32
#define pipert_activation_grad_f32 ::pipert_cuda_test::activation_grad_f32
#define pipert_compare_f32 ::pipert_cuda_test::compare_f32
#define pipert_compare_i64 ::pipert_cuda_test::compare_i64
#define pipert_logical ::pipert_cuda_test::logical
#define pipert_not ::pipert_cuda_test::not_u8
#define pipert_where ::pipert_cuda_test::where
#define pipert_relu_grad_f32 ::pipert_cuda_test::relu_grad_f32
#define pipert_tanh_grad_f32 ::pipert_cuda_test::tanh_grad_f32
#define pipert_sigmoid_grad_f32 ::pipert_cuda_test::sigmoid_grad_f32
#define pipert_erf_grad_f32 ::pipert_cuda_test::erf_grad_f32
#define pipert_reduce_to_shape_f32 ::pipert_cuda_test::reduce_to_shape_f32
#define pipert_sgemm ::pipert_cuda_test::sgemm
#define pipert_gemm_f32 ::pipert_cuda_test::gemm_f32
#define pipert_matmul_f32 ::pipert_cuda_test::matmul_f32
#define pipert_matmul_t_f32 ::pipert_cuda_test::matmul_t_f32
#define pipert_attention_f32 ::pipert_cuda_test::attention_f32
#define pipert_attention_grad_f32 ::pipert_cuda_test::attention_grad_f32
#define pipert_softmax_f32 ::pipert_cuda_test::softmax_f32
#define pipert_log_softmax_f32 ::pipert_cuda_test::log_softmax_f32
#define pipert_softmax_grad_f32 ::pipert_cuda_test::softmax_grad_f32
#define pipert_log_softmax_grad_f32 ::pipert_cuda_test::log_softmax_grad_f32
#define pipert_layer_norm_f32 ::pipert_cuda_test::layer_norm_f32
#define pipert_layer_norm_grad_f32 ::pipert_cuda_test::layer_norm_grad_f32
#define pipert_batch_norm_inference_f32 ::pipert_cuda_test::batch_norm_inference_f32
#define pipert_batch_norm_training_f32 ::pipert_cuda_test::batch_norm_training_f32
#define pipert_batch_norm_grad_f32 ::pipert_cuda_test::batch_norm_grad_f32
#define pipert_conv2d_f32 ::pipert_cuda_test::conv2d_f32
#define pipert_conv2d_grad_input_f32 ::pipert_cuda_test::conv2d_grad_input_f32
#define pipert_conv2d_grad_weight_f32 ::pipert_cuda_test::conv2d_grad_weight_f32
#define pipert_conv2d_grad_bias_f32 ::pipert_cuda_test::conv2d_grad_bias_f32
#define pipert_maxpool2d_f32 ::pipert_cuda_test::maxpool2d_f32
#define pipert_maxpool2d_grad_f32 ::pipert_cuda_test::maxpool2d_grad_f32
#define pipert_avgpool2d_f32 ::pipert_cuda_test::avgpool2d_f32
#define pipert_avgpool2d_grad_f32 ::pipert_cuda_test::avgpool2d_grad_f32
#define pipert_resize_f32 ::pipert_cuda_test::resize_f32
#define pipert_resize_grad_f32 ::pipert_cuda_test::resize_grad_f32
#define pipert_global_avgpool_f32 ::pipert_cuda_test::global_avgpool_f32
#define pipert_global_avgpool_grad_f32 ::pipert_cuda_test::global_avgpool_grad_f32
#define pipert_transpose ::pipert_cuda_test::transpose
#define pipert_concat ::pipert_cuda_test::concat
#define pipert_split ::pipert_cuda_test::split
#define pipert_slice ::pipert_cuda_test::slice
#define pipert_slice_grad_f32 ::pipert_cuda_test::slice_grad_f32
#define pipert_gather ::pipert_cuda_test::gather
#define pipert_gather_grad_f32 ::pipert_cuda_test::gather_grad_f32
#define pipert_gather_nd ::pipert_cuda_test::gather_nd
#define pipert_gather_elements ::pipert_cuda_test::gather_elements
#define pipert_gather_elements_grad_f32 ::pipert_cuda_test::gather_elements_grad_f32
#define pipert_scatter_elements ::pipert_cuda_test::scatter_elements
#define pipert_scatter_elements_grad_f32 ::pipert_cuda_test::scatter_elements_grad_f32
#define pipert_gather_nd_grad_f32 ::pipert_cuda_test::gather_nd_grad_f32
#define pipert_scatter_nd ::pipert_cuda_test::scatter_nd
#define pipert_scatter_nd_grad_f32 ::pipert_cuda_test::scatter_nd_grad_f32
#define pipert_tile ::pipert_cuda_test::tile
#define pipert_tile_grad_f32 ::pipert_cuda_test::tile_grad_f32
#define pipert_pad ::pipert_cuda_test::pad
#define pipert_pad_grad_f32 ::pipert_cuda_test::pad_grad_f32
#define pipert_trilu ::pipert_cuda_test::trilu
#define pipert_expand ::pipert_cuda_test::expand
#define pipert_cast ::pipert_cuda_test::cast
#define pipert_reduce_f32 ::pipert_cuda_test::reduce_f32
#define pipert_reduce_extremum_grad_f32 ::pipert_cuda_test::reduce_extremum_grad_f32
#define pipert_arg_reduce_f32 ::pipert_cuda_test::arg_reduce_f32
#define pipert_cumsum ::pipert_cuda_test::cumsum
#define pipert_dropout_f32 ::pipert_cuda_test::dropout_f32
#define pipert_dropout_grad_f32 ::pipert_cuda_test::dropout_grad_f32
#define pipert_softmax_cross_entropy_loss_f32 ::pipert_cuda_test::softmax_cross_entropy_loss_f32
#define pipert_softmax_cross_entropy_loss_grad_f32 ::pipert_cuda_test::softmax_cross_entropy_loss_grad_f32
#define pipert_nll_loss_f32 ::pipert_cuda_test::nll_loss_f32
#define pipert_nll_loss_grad_f32 ::pipert_cuda_test::nll_loss_grad_f32
#define pipert_lstm_f32 ::pipert_cuda_test::lstm_f32
#define pipert_lstm_grad_f32 ::pipert_cuda_test::lstm_grad_f32
#define pipert_gru_f32 ::pipert_cuda_test::gru_f32
#define pipert_gru_grad_f32 ::pipert_cuda_test::gru_grad_f32
#define pipert_sgd_f32 ::pipert_cuda_test::sgd_f32
#define pipert_momentum_f32 ::pipert_cuda_test::momentum_f32
#define pipert_adam_f32 ::pipert_cuda_test::adam_f32
#define pipert_adamw_f32 ::pipert_cuda_test::adamw_f32
#define pipert_adagrad_f32 ::pipert_cuda_test::adagrad_f32
#define pipert_copy_to_slot ::pipert_cuda_test::copy_to_slot
#define pipert_predict_weights_f32 ::pipert_cuda_test::predict_weights_f32
#define pipert_predict_adam_f32 ::pipert_cuda_test::predict_adam_f32
#define pipert_easgd_local_f32 ::pipert_cuda_test::easgd_local_f32
#define pipert_easgd_center_f32 ::pipert_cuda_test::easgd_center_f32
#define pipert_clip_grad_norm_f32 ::pipert_cuda_test::clip_grad_norm_f32
#define pipert_axpy_f32 ::pipert_cuda_test::axpy_f32
#define pipert_scale_f32 ::pipert_cuda_test::scale_f32
#define pipert_fill_f32 ::pipert_cuda_test::fill_f32
#define pipert_accumulate_f32 ::pipert_cuda_test::accumulate_f32

#endif // PIPERT_TEST_CUDA_DEVICE_SHIM_H
