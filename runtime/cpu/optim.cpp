//===- optim.cpp - optimizer updates, weight versions, EASGD (CPU) --------===//
//
// Updates follow ai.onnx.preview.training (Momentum, Adam, Adagrad) to the
// letter, so the compiler can lower those ops one to one. Every loop reads an
// element before writing it, so outputs may alias inputs, element for
// element (the same buffer), never shifted. The loops say so (ivdep) and
// take their scalars by value, so that they vectorise: with the scalars
// behind references, which a store through an output might have changed,
// the update of a parameter ran one element at a time and reloaded them
// each element (ResNet-18's Momentum, 11.7M parameters: 22 ms a step).
//
//===----------------------------------------------------------------------===//
#include "kernel_util.h"
#include "../core/formulas.h"
#include "pipert/pipert_comm.h"

using namespace pipert::cpu;

extern "C" {

void pipert_sgd_f32(pipert_context *ctx, float lr, float weight_decay, const float *x,
                    const float *g, int64_t n, float *x_out) {
  parallel_for(ctx, n, 1 << 16, [=](int64_t b, int64_t e) {
#pragma GCC ivdep
    for (int64_t i = b; i < e; ++i)
      x_out[i] = formula::sgd(x[i], g[i], lr, weight_decay);
  });
}

void pipert_momentum_f32(pipert_context *ctx, float lr, int64_t t, float alpha, float beta,
                         float norm_coefficient, int nesterov, const float *x, const float *g,
                         const float *v, int64_t n, float *x_out, float *v_out) {
  const float beta_t = formula::momentum_beta(t, beta);
  parallel_for(ctx, n, 1 << 16, [=](int64_t b, int64_t e) {
    if (nesterov) {
#pragma GCC ivdep
      for (int64_t i = b; i < e; ++i)
        formula::nesterov(x[i], g[i], v[i], lr, alpha, norm_coefficient, x_out[i], v_out[i]);
    } else {
#pragma GCC ivdep
      for (int64_t i = b; i < e; ++i)
        formula::momentum(x[i], g[i], v[i], lr, alpha, beta_t, norm_coefficient, x_out[i],
                          v_out[i]);
    }
  });
}

void pipert_adam_f32(pipert_context *ctx, float lr, int64_t t, float alpha, float beta,
                     float epsilon, float norm_coefficient, float norm_coefficient_post,
                     const float *x, const float *g, const float *v, const float *h, int64_t n,
                     float *x_out, float *v_out, float *h_out) {
  const float lr_t = formula::adam_rate(lr, t, alpha, beta);
  parallel_for(ctx, n, 1 << 16, [=](int64_t b, int64_t e) {
#pragma GCC ivdep
    for (int64_t i = b; i < e; ++i)
      formula::adam(x[i], g[i], v[i], h[i], lr_t, alpha, beta, epsilon, norm_coefficient,
                    norm_coefficient_post, x_out[i], v_out[i], h_out[i]);
  });
}

void pipert_adamw_f32(pipert_context *ctx, float lr, int64_t t, float beta1, float beta2,
                      float epsilon, float weight_decay, const float *x, const float *g,
                      const float *m, const float *v, int64_t n, float *x_out, float *m_out,
                      float *v_out) {
  const formula::AdamWStep st = formula::adamw_step(lr, t, beta1, beta2, weight_decay);
  parallel_for(ctx, n, 1 << 16, [=](int64_t b, int64_t e) {
#pragma GCC ivdep
    for (int64_t i = b; i < e; ++i)
      formula::adamw(x[i], g[i], m[i], v[i], st, beta1, beta2, epsilon, x_out[i], m_out[i],
                     v_out[i]);
  });
}

void pipert_adagrad_f32(pipert_context *ctx, float lr, int64_t t, float decay_factor,
                        float epsilon, float norm_coefficient, const float *x, const float *g,
                        const float *h, int64_t n, float *x_out, float *h_out) {
  const float lr_t = formula::adagrad_rate(lr, t, decay_factor);
  parallel_for(ctx, n, 1 << 16, [=](int64_t b, int64_t e) {
#pragma GCC ivdep
    for (int64_t i = b; i < e; ++i)
      formula::adagrad(x[i], g[i], h[i], lr_t, epsilon, norm_coefficient, x_out[i], h_out[i]);
  });
}

void pipert_copy_to_slot(pipert_context *, void *slots, int64_t slot, const void *src,
                         int64_t bytes) {
  if (slot < 0 || bytes < 0)
    pipert_fail("copy_to_slot: negative slot %lld or size %lld", (long long)slot,
                (long long)bytes);
  char *dst = (char *)slots + slot * bytes;
  if (dst != src && bytes)
    std::memmove(dst, src, size_t(bytes));
}

void pipert_predict_weights_f32(pipert_context *ctx, const float *w, const float *v, float s,
                                float lr, int64_t n, float *w_hat) {
  const float k = s * lr;
  parallel_for(ctx, n, 1 << 16, [=](int64_t b, int64_t e) {
#pragma GCC ivdep
    for (int64_t i = b; i < e; ++i)
      w_hat[i] = w[i] - k * v[i];
  });
}

void pipert_predict_adam_f32(pipert_context *ctx, const float *w, const float *m,
                             const float *v, int64_t t, float beta1, float beta2, float epsilon,
                             float s, float lr, int64_t n, float *w_hat) {
  const formula::AdamPredict p = formula::adam_predict(s, lr, t, beta1, beta2);
  parallel_for(ctx, n, 1 << 16, [=](int64_t b, int64_t e) {
#pragma GCC ivdep
    for (int64_t i = b; i < e; ++i)
      w_hat[i] = formula::predict_adam(w[i], m[i], v[i], p, epsilon);
  });
}

void pipert_easgd_local_f32(pipert_context *ctx, float alpha, const float *center, float *x,
                            float *diff, int64_t n) {
  parallel_for(ctx, n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float d = x[i] - center[i];
      if (diff)
        diff[i] = d;
      x[i] -= alpha * d;
    }
  });
}

} // extern "C"

namespace {
/// Sum of x[i]^2: sixteen float lanes over blocks of 4096 elements (so
/// that it vectorises), the blocks' sums added in double.
double sumSquares(const float *x, int64_t n) {
  double total = 0;
  for (int64_t b = 0; b < n; b += 4096) {
    const int64_t e = std::min<int64_t>(n, b + 4096);
    float lanes[16] = {};
    int64_t i = b;
    for (; i + 16 <= e; i += 16)
      for (int j = 0; j < 16; ++j)
        lanes[j] += x[i + j] * x[i + j];
    double part = 0;
    for (; i < e; ++i)
      part += double(x[i]) * double(x[i]);
    for (float l : lanes)
      part += double(l);
    total += part;
  }
  return total;
}
} // namespace

extern "C" {

void pipert_clip_grad_norm_f32(pipert_context *ctx, pipert_comm *comm, float *const *grads,
                               const int64_t *counts, int32_t n, float grad_scale,
                               float max_norm) {
  if (n < 0 || (n > 0 && (!grads || !counts)))
    pipert_fail("clip_grad_norm: %d gradients without their pointers", int(n));
  double local = 0;
  for (int32_t i = 0; i < n; ++i)
    local += sumSquares(grads[i], counts[i]);
  float total = float(local * double(grad_scale) * double(grad_scale));
  if (comm)
    pipert_allreduce_f32(ctx, comm, &total, 1, PIPERT_COLLECTIVE_SUM);
  const float coef = formula::clip_coefficient(total, max_norm);
  if (!(coef >= 1.f)) // NaN scales too
    for (int32_t i = 0; i < n; ++i)
      pipert_scale_f32(ctx, coef, grads[i], counts[i]);
}

void pipert_easgd_center_f32(pipert_context *ctx, float alpha, const float *diff_sum,
                             float *center, int64_t n) {
  pipert_axpy_f32(ctx, alpha, diff_sum, center, n);
}

} // extern "C"
