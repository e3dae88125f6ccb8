//===- optim.cpp - optimizer updates, weight versions, EASGD (CPU) --------===//
//
// Updates follow ai.onnx.preview.training (Momentum, Adam, Adagrad) to the
// letter, so the compiler can lower those ops one to one. Every loop reads an
// element before writing it, so outputs may alias inputs.
//
//===----------------------------------------------------------------------===//
#include "kernel_util.h"

#include <cmath>

using namespace pipert::cpu;

extern "C" {

void pipert_sgd_f32(pipert_context *ctx, float lr, float weight_decay, const float *x,
                    const float *g, int64_t n, float *x_out) {
  parallel_for(ctx, n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      x_out[i] = x[i] - lr * (g[i] + weight_decay * x[i]);
  });
}

void pipert_momentum_f32(pipert_context *ctx, float lr, int64_t t, float alpha, float beta,
                         float norm_coefficient, int nesterov, const float *x, const float *g,
                         const float *v, int64_t n, float *x_out, float *v_out) {
  const float beta_t = t > 0 ? beta : 1.f;
  parallel_for(ctx, n, 1 << 16, [&](int64_t b, int64_t e) {
    if (nesterov) {
      for (int64_t i = b; i < e; ++i) {
        const float gr = norm_coefficient * x[i] + g[i];
        const float vn = alpha * v[i] + gr;
        x_out[i] = x[i] - lr * (gr + alpha * vn);
        v_out[i] = vn;
      }
    } else {
      for (int64_t i = b; i < e; ++i) {
        const float gr = norm_coefficient * x[i] + g[i];
        const float vn = alpha * v[i] + beta_t * gr;
        x_out[i] = x[i] - lr * vn;
        v_out[i] = vn;
      }
    }
  });
}

void pipert_adam_f32(pipert_context *ctx, float lr, int64_t t, float alpha, float beta,
                     float epsilon, float norm_coefficient, float norm_coefficient_post,
                     const float *x, const float *g, const float *v, const float *h, int64_t n,
                     float *x_out, float *v_out, float *h_out) {
  float lr_t = lr;
  if (t > 0)
    lr_t = float(double(lr) * std::sqrt(1.0 - std::pow(double(beta), double(t))) /
                 (1.0 - std::pow(double(alpha), double(t))));
  parallel_for(ctx, n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float gr = norm_coefficient * x[i] + g[i];
      const float vn = alpha * v[i] + (1.f - alpha) * gr;
      const float hn = beta * h[i] + (1.f - beta) * gr * gr;
      const float xn = x[i] - lr_t * (vn / (std::sqrt(hn) + epsilon));
      x_out[i] = (1.f - norm_coefficient_post) * xn;
      v_out[i] = vn;
      h_out[i] = hn;
    }
  });
}

void pipert_adamw_f32(pipert_context *ctx, float lr, int64_t t, float beta1, float beta2,
                      float epsilon, float weight_decay, const float *x, const float *g,
                      const float *m, const float *v, int64_t n, float *x_out, float *m_out,
                      float *v_out) {
  if (t < 1)
    pipert_fail("AdamW: step t must be >= 1, got %lld", (long long)t);
  const double bc1 = 1.0 - std::pow(double(beta1), double(t));
  const double bc2 = 1.0 - std::pow(double(beta2), double(t));
  const float step = float(double(lr) / bc1);
  const float inv_sqrt_bc2 = float(1.0 / std::sqrt(bc2));
  const float decay = 1.f - lr * weight_decay;
  parallel_for(ctx, n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float mn = beta1 * m[i] + (1.f - beta1) * g[i];
      const float vn = beta2 * v[i] + (1.f - beta2) * g[i] * g[i];
      x_out[i] = x[i] * decay - step * mn / (std::sqrt(vn) * inv_sqrt_bc2 + epsilon);
      m_out[i] = mn;
      v_out[i] = vn;
    }
  });
}

void pipert_adagrad_f32(pipert_context *ctx, float lr, int64_t t, float decay_factor,
                        float epsilon, float norm_coefficient, const float *x, const float *g,
                        const float *h, int64_t n, float *x_out, float *h_out) {
  const float lr_t = lr / (1.f + float(t) * decay_factor);
  parallel_for(ctx, n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float gr = norm_coefficient * x[i] + g[i];
      const float hn = h[i] + gr * gr;
      x_out[i] = x[i] - lr_t * gr / (std::sqrt(hn) + epsilon);
      h_out[i] = hn;
    }
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
  parallel_for(ctx, n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      w_hat[i] = w[i] - k * v[i];
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

void pipert_easgd_center_f32(pipert_context *ctx, float alpha, const float *diff_sum,
                             float *center, int64_t n) {
  pipert_axpy_f32(ctx, alpha, diff_sum, center, n);
}

} // extern "C"
