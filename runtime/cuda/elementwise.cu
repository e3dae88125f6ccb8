//===- elementwise.cu - unary, binary, where, activation grads, optimizers -===//
//
// Elementwise kernels of the CUDA backend. Activation gradients, optimizer
// updates and the dropout generator are the CPU backend's own functions
// (runtime/core/formulas.h), so both backends agree to rounding.
// Every kernel reads element i before writing element i: in place is allowed
// wherever the ABI allows it.
//
//===----------------------------------------------------------------------===//
#include "kernels.cuh"
#include "../core/formulas.h"
#include "pipert/pipert_comm.h"

using namespace pipert::cuda;

namespace {

// clip_grad_norm: adds scale2 * sum of x[i]^2 to *acc (one atomic a block).
__global__ void sum_squares_kernel(const float *__restrict__ x, int64_t n, double scale2,
                                   double *acc) {
  __shared__ double shared[32];
  double v = 0;
  PIPERT_GRID_STRIDE(i, n) {
    const double g = x[i];
    v += g * g;
  }
  v = block_sum(v, shared);
  if (threadIdx.x == 0)
    atomicAdd(acc, v * scale2);
}

__device__ __forceinline__ float apply_unary(int op, float v) {
  switch (op) {
  case PIPERT_UNARY_NEG: return -v;
  case PIPERT_UNARY_RELU: return formula::relu(v);
  case PIPERT_UNARY_TANH: return tanhf(v);
  case PIPERT_UNARY_SIGMOID: return formula::sigmoid(v);
  case PIPERT_UNARY_ERF: return erff(v);
  case PIPERT_UNARY_SQRT: return sqrtf(v);
  case PIPERT_UNARY_EXP: return expf(v);
  case PIPERT_UNARY_LOG: return logf(v);
  case PIPERT_UNARY_ABS: return fabsf(v);
  case PIPERT_UNARY_RECIPROCAL: return 1.f / v;
  case PIPERT_UNARY_SIN: return sinf(v);
  case PIPERT_UNARY_COS: return cosf(v);
  default: return v;
  }
}

template <typename T> __device__ __forceinline__ T apply_binary(int op, T u, T v) {
  switch (op) {
  case PIPERT_BINARY_ADD: return u + v;
  case PIPERT_BINARY_SUB: return u - v;
  case PIPERT_BINARY_MUL: return u * v;
  case PIPERT_BINARY_DIV: return u / v;
  default: return u;
  }
}

template <typename TA, typename TB, typename TY, typename F>
__global__ void broadcast_binary_kernel(Layout<3> l, const TA *a, const TB *b, TY *y, F f) {
  PIPERT_GRID_STRIDE(i, l.n) {
    int64_t off[3];
    l.offsets(i, off);
    y[off[2]] = f(a[off[0]], b[off[1]]);
  }
}

// y = f(a, b) with numpy broadcasting.
template <typename TA, typename TB, typename TY, typename F>
void broadcast_binary(pipert_context *ctx, const char *op, const TA *a, int64_t ra,
                      const int64_t *sa, const TB *b, int64_t rb, const int64_t *sb, TY *y,
                      F f) {
  check_rank(op, ra);
  check_rank(op, rb);
  int64_t out[kMaxRank];
  const int64_t r = broadcast_shape(op, ra, sa, rb, sb, out);
  int64_t st[3][kMaxRank];
  broadcast_strides(ra, sa, r, st[0]);
  broadcast_strides(rb, sb, r, st[1]);
  broadcast_strides(r, out, r, st[2]);
  Layout<3> l = make_layout<3>(r, out, st);
  if (l.n == 0)
    return;
  broadcast_binary_kernel<<<grid_for(ctx, l.n), kBlock, 0, stream_of(ctx)>>>(l, a, b, y, f);
  PIPERT_LAUNCH_CHECK(op);
}

template <typename T>
__global__ void where_kernel(Layout<4> l, const uint8_t *c, const T *x, const T *y, T *out) {
  PIPERT_GRID_STRIDE(i, l.n) {
    int64_t off[4];
    l.offsets(i, off);
    out[off[3]] = c[off[0]] ? x[off[1]] : y[off[2]];
  }
}

template <typename T>
void where_typed(pipert_context *ctx, const uint8_t *c, int64_t rc, const int64_t *sc,
                 const void *x, int64_t rx, const int64_t *sx, const void *y, int64_t ry,
                 const int64_t *sy, void *out) {
  const char *op = "Where";
  check_rank(op, rc);
  check_rank(op, rx);
  check_rank(op, ry);
  int64_t tmp[kMaxRank], shape[kMaxRank];
  int64_t r = broadcast_shape(op, rc, sc, rx, sx, tmp);
  r = broadcast_shape(op, r, tmp, ry, sy, shape);
  int64_t st[4][kMaxRank];
  broadcast_strides(rc, sc, r, st[0]);
  broadcast_strides(rx, sx, r, st[1]);
  broadcast_strides(ry, sy, r, st[2]);
  broadcast_strides(r, shape, r, st[3]);
  Layout<4> l = make_layout<4>(r, shape, st);
  if (l.n == 0)
    return;
  where_kernel<T><<<grid_for(ctx, l.n), kBlock, 0, stream_of(ctx)>>>(
      l, c, static_cast<const T *>(x), static_cast<const T *>(y), static_cast<T *>(out));
  PIPERT_LAUNCH_CHECK(op);
}

struct BinaryF32 {
  int op;
  __device__ float operator()(float u, float v) const {
    switch (op) {
    case PIPERT_BINARY_POW: return formula::pow_value(u, v);
    case PIPERT_BINARY_MAX: return formula::max_value(u, v);
    case PIPERT_BINARY_MIN: return formula::min_value(u, v);
    case PIPERT_BINARY_FMOD: return formula::fmod_value(u, v);
    default: return apply_binary(op, u, v);
    }
  }
};

struct BinaryI64 {
  int op;
  DeviceError *err;
  __device__ int64_t operator()(int64_t u, int64_t v) const {
    if ((op == PIPERT_BINARY_DIV || op == PIPERT_BINARY_FMOD || op == PIPERT_BINARY_MOD) &&
        v == 0) {
      raise_error(err, kErrIntDivZero, 0, 0);
      return 0;
    }
    switch (op) {
    case PIPERT_BINARY_MAX: return formula::max_value(u, v);
    case PIPERT_BINARY_MIN: return formula::min_value(u, v);
    case PIPERT_BINARY_FMOD: return formula::fmod_value(u, v);
    case PIPERT_BINARY_MOD: return formula::mod_value(u, v);
    default: return apply_binary(op, u, v);
    }
  }
};

template <typename T> struct EqualOp {
  __device__ uint8_t operator()(T u, T v) const { return uint8_t(u == v); }
};

template <typename T> struct CompareOp {
  int op;
  __device__ uint8_t operator()(T u, T v) const { return formula::compare(op, u, v); }
};

struct LogicalOp {
  int op;
  __device__ uint8_t operator()(uint8_t u, uint8_t v) const { return formula::logical(op, u, v); }
};

} // namespace

extern "C" {

void pipert_unary_f32(pipert_context *ctx, pipert_unary_op op, const float *x, int64_t n,
                      float *y) {
  if (op == PIPERT_UNARY_IDENTITY) {
    if (x != y && n > 0)
      pipert_copy_device(ctx, y, x, size_t(n) * sizeof(float));
    return;
  }
  if (int(op) < PIPERT_UNARY_NEG || int(op) > PIPERT_UNARY_RECIPROCAL)
    pipert_fail("pipert_unary_f32: unknown op %d", int(op));
  const int o = int(op);
  launch_map(ctx, "Unary", n, [=] __device__(int64_t i) { y[i] = apply_unary(o, x[i]); });
}

void pipert_binary_f32(pipert_context *ctx, pipert_binary_op op, const float *a, int64_t ra,
                       const int64_t *sa, const float *b, int64_t rb, const int64_t *sb,
                       float *y) {
  static const char *names[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod"};
  if (int(op) < 0 || int(op) > PIPERT_BINARY_FMOD)
    pipert_fail("pipert_binary_f32: op %d is not supported on float", int(op));
  broadcast_binary(ctx, names[op], a, ra, sa, b, rb, sb, y, BinaryF32{int(op)});
}

void pipert_binary_i64(pipert_context *ctx, pipert_binary_op op, const int64_t *a, int64_t ra,
                       const int64_t *sa, const int64_t *b, int64_t rb, const int64_t *sb,
                       int64_t *y) {
  static const char *names[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "Mod"};
  if (int(op) < 0 || int(op) > PIPERT_BINARY_MOD || op == PIPERT_BINARY_POW)
    pipert_fail("pipert_binary_i64: op %d is not supported on int64", int(op));
  broadcast_binary(ctx, names[op], a, ra, sa, b, rb, sb, y, BinaryI64{int(op), cx(ctx)->err});
}

void pipert_equal_f32(pipert_context *ctx, const float *a, int64_t ra, const int64_t *sa,
                      const float *b, int64_t rb, const int64_t *sb, uint8_t *y) {
  broadcast_binary(ctx, "Equal", a, ra, sa, b, rb, sb, y, EqualOp<float>{});
}

void pipert_equal_i64(pipert_context *ctx, const int64_t *a, int64_t ra, const int64_t *sa,
                      const int64_t *b, int64_t rb, const int64_t *sb, uint8_t *y) {
  broadcast_binary(ctx, "Equal", a, ra, sa, b, rb, sb, y, EqualOp<int64_t>{});
}

void pipert_where(pipert_context *ctx, pipert_dtype dtype, const uint8_t *c, int64_t rc,
                  const int64_t *sc, const void *x, int64_t rx, const int64_t *sx, const void *y,
                  int64_t ry, const int64_t *sy, void *out) {
  switch (pipert_dtype_size(dtype)) {
  case 1: return where_typed<uint8_t>(ctx, c, rc, sc, x, rx, sx, y, ry, sy, out);
  case 2: return where_typed<uint16_t>(ctx, c, rc, sc, x, rx, sx, y, ry, sy, out);
  case 4: return where_typed<uint32_t>(ctx, c, rc, sc, x, rx, sx, y, ry, sy, out);
  case 8: return where_typed<uint64_t>(ctx, c, rc, sc, x, rx, sx, y, ry, sy, out);
  }
  pipert_fail("Where: unsupported dtype %d", int(dtype));
}

void pipert_activation_f32(pipert_context *ctx, pipert_activation_op op, float alpha, float beta,
                           const float *x, int64_t n, float *y) {
  if (!formula::is_activation(int(op)))
    pipert_fail("pipert_activation_f32: unknown op %d", int(op));
  const int o = int(op);
  launch_map(ctx, "Activation", n, [=] __device__(int64_t i) {
    y[i] = formula::activation(o, alpha, beta, x[i]);
  });
}

void pipert_activation_grad_f32(pipert_context *ctx, pipert_activation_op op, float alpha,
                                float beta, const float *x, const float *dy, int64_t n,
                                float *dx) {
  if (!formula::is_activation(int(op)))
    pipert_fail("pipert_activation_grad_f32: unknown op %d", int(op));
  const int o = int(op);
  launch_map(ctx, "ActivationGrad", n, [=] __device__(int64_t i) {
    dx[i] = formula::activation_grad(o, alpha, beta, x[i], dy[i]);
  });
}

static const char *compare_name(pipert_compare_op op) {
  static const char *names[] = {"Less", "LessOrEqual", "Greater", "GreaterOrEqual"};
  if (int(op) < 0 || int(op) > PIPERT_COMPARE_GREATER_EQUAL)
    pipert_fail("pipert_compare: unknown op %d", int(op));
  return names[op];
}

void pipert_compare_f32(pipert_context *ctx, pipert_compare_op op, const float *a, int64_t ra,
                        const int64_t *sa, const float *b, int64_t rb, const int64_t *sb,
                        uint8_t *y) {
  broadcast_binary(ctx, compare_name(op), a, ra, sa, b, rb, sb, y, CompareOp<float>{int(op)});
}

void pipert_compare_i64(pipert_context *ctx, pipert_compare_op op, const int64_t *a, int64_t ra,
                        const int64_t *sa, const int64_t *b, int64_t rb, const int64_t *sb,
                        uint8_t *y) {
  broadcast_binary(ctx, compare_name(op), a, ra, sa, b, rb, sb, y, CompareOp<int64_t>{int(op)});
}

void pipert_logical(pipert_context *ctx, pipert_logical_op op, const uint8_t *a, int64_t ra,
                    const int64_t *sa, const uint8_t *b, int64_t rb, const int64_t *sb,
                    uint8_t *y) {
  if (op != PIPERT_LOGICAL_AND && op != PIPERT_LOGICAL_OR)
    pipert_fail("pipert_logical: unknown op %d", int(op));
  broadcast_binary(ctx, op == PIPERT_LOGICAL_AND ? "And" : "Or", a, ra, sa, b, rb, sb, y,
                   LogicalOp{int(op)});
}

void pipert_not(pipert_context *ctx, const uint8_t *x, int64_t n, uint8_t *y) {
  launch_map(ctx, "Not", n, [=] __device__(int64_t i) { y[i] = !x[i]; });
}

void pipert_relu_grad_f32(pipert_context *ctx, const float *x, const float *dy, int64_t n,
                          float *dx) {
  launch_map(ctx, "ReluGrad", n,
             [=] __device__(int64_t i) { dx[i] = formula::relu_grad(x[i], dy[i]); });
}

void pipert_tanh_grad_f32(pipert_context *ctx, const float *y, const float *dy, int64_t n,
                          float *dx) {
  launch_map(ctx, "TanhGrad", n,
             [=] __device__(int64_t i) { dx[i] = formula::tanh_grad(y[i], dy[i]); });
}

void pipert_sigmoid_grad_f32(pipert_context *ctx, const float *y, const float *dy, int64_t n,
                             float *dx) {
  launch_map(ctx, "SigmoidGrad", n,
             [=] __device__(int64_t i) { dx[i] = formula::sigmoid_grad(y[i], dy[i]); });
}

void pipert_erf_grad_f32(pipert_context *ctx, const float *x, const float *dy, int64_t n,
                         float *dx) {
  launch_map(ctx, "ErfGrad", n,
             [=] __device__(int64_t i) { dx[i] = formula::erf_grad(x[i], dy[i]); });
}

void pipert_reduce_to_shape_f32(pipert_context *ctx, const float *dy, int64_t dy_rank,
                                const int64_t *dy_shape, int64_t x_rank, const int64_t *x_shape,
                                float *dx) {
  const char *op = "reduce_to_shape";
  check_rank(op, dy_rank);
  if (x_rank > dy_rank)
    pipert_fail("%s: target rank %lld exceeds rank %lld", op, (long long)x_rank,
                (long long)dy_rank);
  bool reduced[kMaxRank];
  for (int64_t i = 0; i < dy_rank; ++i) {
    const int64_t j = i - (dy_rank - x_rank);
    if (j >= 0 && x_shape[j] != 1 && x_shape[j] != dy_shape[i])
      pipert_fail("%s: shape does not broadcast to the gradient's (axis %lld)", op,
                  (long long)j);
    reduced[i] = j < 0 || x_shape[j] == 1;
  }
  // dx (x_shape) has the layout of dy's shape with 1 on the reduced axes.
  reduce_axes(ctx, op, PIPERT_REDUCE_SUM, dy, dy_rank, dy_shape, reduced, 1.f, dx);
}

void pipert_axpy_f32(pipert_context *ctx, float alpha, const float *x, float *y, int64_t n) {
  launch_map(ctx, "axpy", n, [=] __device__(int64_t i) { y[i] += alpha * x[i]; });
}

void pipert_scale_f32(pipert_context *ctx, float alpha, float *x, int64_t n) {
  launch_map(ctx, "scale", n, [=] __device__(int64_t i) { x[i] *= alpha; });
}

void pipert_fill_f32(pipert_context *ctx, float value, float *x, int64_t n) {
  launch_map(ctx, "fill", n, [=] __device__(int64_t i) { x[i] = value; });
}

void pipert_accumulate_f32(pipert_context *ctx, const float *x, float *y, int64_t n) {
  launch_map(ctx, "accumulate", n, [=] __device__(int64_t i) { y[i] += x[i]; });
}

//===------------------------------ optimizers ----------------------------===//

void pipert_sgd_f32(pipert_context *ctx, float lr, float weight_decay, const float *x,
                    const float *g, int64_t n, float *x_out) {
  launch_map(ctx, "SGD", n, [=] __device__(int64_t i) {
    x_out[i] = formula::sgd(x[i], g[i], lr, weight_decay);
  });
}

void pipert_momentum_f32(pipert_context *ctx, float lr, int64_t t, float alpha, float beta,
                         float norm_coefficient, int nesterov, const float *x, const float *g,
                         const float *v, int64_t n, float *x_out, float *v_out) {
  const float beta_t = formula::momentum_beta(t, beta);
  if (nesterov)
    launch_map(ctx, "Momentum", n, [=] __device__(int64_t i) {
      formula::nesterov(x[i], g[i], v[i], lr, alpha, norm_coefficient, x_out[i], v_out[i]);
    });
  else
    launch_map(ctx, "Momentum", n, [=] __device__(int64_t i) {
      formula::momentum(x[i], g[i], v[i], lr, alpha, beta_t, norm_coefficient, x_out[i],
                        v_out[i]);
    });
}

void pipert_adam_f32(pipert_context *ctx, float lr, int64_t t, float alpha, float beta,
                     float epsilon, float norm_coefficient, float norm_coefficient_post,
                     const float *x, const float *g, const float *v, const float *h, int64_t n,
                     float *x_out, float *v_out, float *h_out) {
  const float lr_t = formula::adam_rate(lr, t, alpha, beta);
  launch_map(ctx, "Adam", n, [=] __device__(int64_t i) {
    formula::adam(x[i], g[i], v[i], h[i], lr_t, alpha, beta, epsilon, norm_coefficient,
                  norm_coefficient_post, x_out[i], v_out[i], h_out[i]);
  });
}

void pipert_adamw_f32(pipert_context *ctx, float lr, int64_t t, float beta1, float beta2,
                      float epsilon, float weight_decay, const float *x, const float *g,
                      const float *m, const float *v, int64_t n, float *x_out, float *m_out,
                      float *v_out) {
  const formula::AdamWStep st = formula::adamw_step(lr, t, beta1, beta2, weight_decay);
  launch_map(ctx, "AdamW", n, [=] __device__(int64_t i) {
    formula::adamw(x[i], g[i], m[i], v[i], st, beta1, beta2, epsilon, x_out[i], m_out[i],
                   v_out[i]);
  });
}

void pipert_adagrad_f32(pipert_context *ctx, float lr, int64_t t, float decay_factor,
                        float epsilon, float norm_coefficient, const float *x, const float *g,
                        const float *h, int64_t n, float *x_out, float *h_out) {
  const float lr_t = formula::adagrad_rate(lr, t, decay_factor);
  launch_map(ctx, "Adagrad", n, [=] __device__(int64_t i) {
    formula::adagrad(x[i], g[i], h[i], lr_t, epsilon, norm_coefficient, x_out[i], h_out[i]);
  });
}

void pipert_copy_to_slot(pipert_context *ctx, void *slots, int64_t slot, const void *src,
                         int64_t bytes) {
  if (slot < 0 || bytes < 0)
    pipert_fail("copy_to_slot: negative slot %lld or size %lld", (long long)slot,
                (long long)bytes);
  pipert_copy_device(ctx, static_cast<char *>(slots) + slot * bytes, src, size_t(bytes));
}

void pipert_predict_weights_f32(pipert_context *ctx, const float *w, const float *v, float s,
                                float lr, int64_t n, float *w_hat) {
  const float k = s * lr;
  launch_map(ctx, "predict_weights", n, [=] __device__(int64_t i) { w_hat[i] = w[i] - k * v[i]; });
}

void pipert_predict_adam_f32(pipert_context *ctx, const float *w, const float *m,
                             const float *v, int64_t t, float beta1, float beta2, float epsilon,
                             float s, float lr, int64_t n, float *w_hat) {
  const formula::AdamPredict p = formula::adam_predict(s, lr, t, beta1, beta2);
  launch_map(ctx, "predict_adam", n, [=] __device__(int64_t i) {
    w_hat[i] = formula::predict_adam(w[i], m[i], v[i], p, epsilon);
  });
}

void pipert_easgd_local_f32(pipert_context *ctx, float alpha, const float *center, float *x,
                            float *diff, int64_t n) {
  launch_map(ctx, "easgd_local", n, [=] __device__(int64_t i) {
    const float d = x[i] - center[i];
    if (diff)
      diff[i] = d;
    x[i] -= alpha * d;
  });
}

void pipert_clip_grad_norm_f32(pipert_context *ctx, pipert_comm *comm, float *const *grads,
                               const int64_t *counts, int32_t n, float grad_scale,
                               float max_norm) {
  if (n < 0 || (n > 0 && (!grads || !counts)))
    pipert_fail("clip_grad_norm: %d gradients without their pointers", int(n));
  // On the device: the squares' sum in a double, then the float total the
  // pipeline's ranks sum (the NCCL allreduce), then the scaling, reading
  // the total where the kernels run.
  char *scratch = static_cast<char *>(pipert_alloc(ctx, 16));
  double *acc = reinterpret_cast<double *>(scratch);
  float *total = reinterpret_cast<float *>(scratch + 8);
  PIPERT_CUDA_CHECK(cudaMemsetAsync(acc, 0, sizeof(double), stream_of(ctx)));
  const double scale2 = double(grad_scale) * double(grad_scale);
  for (int32_t i = 0; i < n; ++i) {
    if (counts[i] <= 0)
      continue;
    sum_squares_kernel<<<grid_for(ctx, counts[i]), kBlock, 0, stream_of(ctx)>>>(
        grads[i], counts[i], scale2, acc);
    PIPERT_LAUNCH_CHECK("clip_grad_norm");
  }
  launch_map(ctx, "clip_grad_norm", 1, [=] __device__(int64_t) { *total = float(*acc); });
  if (comm)
    pipert_allreduce_f32(ctx, comm, total, 1, PIPERT_COLLECTIVE_SUM);
  for (int32_t i = 0; i < n; ++i) {
    float *g = grads[i];
    launch_map(ctx, "clip_grad_norm", counts[i], [=] __device__(int64_t j) {
      const float coef = formula::clip_coefficient(*total, max_norm);
      if (!(coef >= 1.f)) // NaN scales too
        g[j] *= coef;
    });
  }
  pipert_free(ctx, scratch);
}

void pipert_easgd_center_f32(pipert_context *ctx, float alpha, const float *diff_sum,
                             float *center, int64_t n) {
  pipert_axpy_f32(ctx, alpha, diff_sum, center, n);
}

//===------------------------------ dropout -------------------------------===//

void pipert_dropout_f32(pipert_context *ctx, const float *x, int64_t n, float ratio, int training,
                        float *y, uint8_t *mask) {
  if (!training || ratio == 0.f) {
    if (y != x && n > 0)
      pipert_copy_device(ctx, y, x, size_t(n) * sizeof(float));
    if (mask && n > 0)
      PIPERT_CUDA_CHECK(cudaMemsetAsync(mask, 1, size_t(n), stream_of(ctx)));
    return;
  }
  if (!(ratio > 0.f && ratio < 1.f))
    pipert_fail("Dropout: ratio %g outside [0, 1)", double(ratio));
  // The CPU backend's counter-based generator: the same masks on both.
  const uint64_t seed = pipert_context_next_random(ctx);
  const uint32_t threshold = formula::dropout_threshold(ratio);
  const float scale = 1.f / (1.f - ratio);
  launch_map(ctx, "Dropout", n, [=] __device__(int64_t i) {
    const uint8_t keep = formula::dropout_keep(seed, i, threshold);
    if (mask)
      mask[i] = keep;
    y[i] = keep ? x[i] * scale : 0.f;
  });
}

void pipert_dropout_grad_f32(pipert_context *ctx, const float *dy, const uint8_t *mask, int64_t n,
                             float ratio, float *dx) {
  const float scale = ratio > 0.f ? 1.f / (1.f - ratio) : 1.f;
  launch_map(ctx, "DropoutGrad", n,
             [=] __device__(int64_t i) { dx[i] = mask[i] ? dy[i] * scale : 0.f; });
}

} // extern "C"
