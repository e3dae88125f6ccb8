//===- formulas.h - per-element math shared by the CPU and CUDA kernels ---===//
//
// The formulas both backends evaluate element by element: optimizer updates
// (ai.onnx.preview.training Momentum, Adam, Adagrad; SGD, AdamW), loss terms,
// normalisation statistics and their gradients, activation gradients and the
// dropout generator. runtime/cpu/*.cpp call them from their loops,
// runtime/cuda/*.cu from their kernels, so both backends agree to rounding
// (the device may fuse a multiply-add where the host rounds twice).
//
// PIPERT_HD functions compile for the host and, under nvcc, for the device;
// the few host-only ones compute the per-call scalars before a launch. Inputs
// come by value and outputs go out by reference after every input is read,
// so callers may pass aliasing elements (x_out[i] for x[i]) as the C ABI
// allows. Math calls are the C float functions (sqrtf, expf, ...), which are
// what std::sqrt(float) etc. resolve to on the host, but for exp_, tanh_ and
// sigmoid below, whose host side is vmath_scalar.h's.
//
//===----------------------------------------------------------------------===//
#ifndef PIPERT_CORE_FORMULAS_H
#define PIPERT_CORE_FORMULAS_H

#include "pipert/pipert.h"
#include "pipert/pipert_kernels.h"
#include "shape_util.h"

#include <cmath>
#include <cstdint>

#if !defined(__CUDA_ARCH__)
#include "vmath_scalar.h"
#endif

#ifdef __CUDACC__
#define PIPERT_HD __host__ __device__ inline
#else
#define PIPERT_HD inline
#endif

namespace pipert::formula {

//===------------------------------ activations ---------------------------===//

// exp, tanh and the sigmoid of the activations and the recurrent cells: on
// the device the CUDA math library's; on the host vmath_scalar.h's
// branch-free ones, which loops vectorise (glibc's are a call an element:
// tanhf 11 ns, the sigmoid on expf 4.6 against 0.3-0.5 vectorised, AVX-512).
// Both within a few ulp of the exact values.
PIPERT_HD float exp_(float v) {
#if defined(__CUDA_ARCH__)
  return ::expf(v);
#else
  return vm::vexp(v);
#endif
}

PIPERT_HD float tanh_(float v) {
#if defined(__CUDA_ARCH__)
  return ::tanhf(v);
#else
  return vm::vtanh(v);
#endif
}

// log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow.
PIPERT_HD float softplus_(float x) {
#if defined(__CUDA_ARCH__)
  return (x > 0.f ? x : 0.f) + ::log1pf(::expf(-::fabsf(x)));
#else
  return vm::vsoftplus(x);
#endif
}

// Split by sign so exp never overflows.
PIPERT_HD float sigmoid(float v) {
#if defined(__CUDA_ARCH__)
  if (v >= 0.f)
    return 1.f / (1.f + ::expf(-v));
  const float e = ::expf(v);
  return e / (1.f + e);
#else
  return vm::vsigmoid(v);
#endif
}

// max(x, 0) with NaN propagated, as PyTorch's relu (and Max(x, 0), Clip
// here): a NaN upstream must reach the loss, where pipe-run stops on it.
PIPERT_HD float relu(float x) { return x > 0.f || x != x ? x : 0.f; }
// dy where x > 0 or x is NaN (PyTorch's threshold_backward: 0 only where
// x <= 0).
PIPERT_HD float relu_grad(float x, float dy) { return x <= 0.f ? 0.f : dy; }
// From the output y = tanh(x).
PIPERT_HD float tanh_grad(float y, float dy) { return dy * (1.f - y * y); }
// From the output y = sigmoid(x).
PIPERT_HD float sigmoid_grad(float y, float dy) { return dy * y * (1.f - y); }
// d erf(x) / dx = 2 / sqrt(pi) * exp(-x^2).
PIPERT_HD float erf_grad(float x, float dy) {
  return dy * 1.1283791670955126f * ::expf(-x * x);
}

// v clamped to [0, 1], NaN kept.
PIPERT_HD float clamp01(float v) { return v < 0.f ? 0.f : (v > 1.f ? 1.f : v); }

// The parametrised elementwise ops of pipert_activation_f32 (op is a
// pipert_activation_op; alpha, beta its ONNX attributes).
PIPERT_HD float activation(int op, float alpha, float beta, float x) {
  switch (op) {
  case PIPERT_ACTIVATION_LEAKY_RELU: return x < 0.f ? alpha * x : x;
  case PIPERT_ACTIVATION_ELU: return x > 0.f ? x : alpha * (exp_(x) - 1.f);
  case PIPERT_ACTIVATION_SELU: return beta * (x > 0.f ? x : alpha * (exp_(x) - 1.f));
  case PIPERT_ACTIVATION_SOFTPLUS: return softplus_(x);
  // Clamps as selects, not fmaxf/fminf: NaN stays NaN (as in PyTorch; fmaxf
  // and fminf drop it), and the host's loops vectorise (fmaxf is a call).
  case PIPERT_ACTIVATION_HARD_SIGMOID: return clamp01(alpha * x + beta);
  case PIPERT_ACTIVATION_HARD_SWISH: return x * clamp01(x * (1.f / 6.f) + 0.5f);
  case PIPERT_ACTIVATION_GELU: return 0.5f * x * (1.f + ::erff(x * 0.70710678118654752f));
  case PIPERT_ACTIVATION_GELU_TANH: {
    const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.f + tanh_(inner));
  }
  // Not fmin/fmax: NaN stays NaN.
  case PIPERT_ACTIVATION_CLIP: return x < alpha ? alpha : (x > beta ? beta : x);
  case PIPERT_ACTIVATION_SIGN: return x > 0.f ? 1.f : (x < 0.f ? -1.f : x);
  case PIPERT_ACTIVATION_FLOOR: return ::floorf(x);
  case PIPERT_ACTIVATION_CEIL: return ::ceilf(x);
  case PIPERT_ACTIVATION_ABS: return ::fabsf(x);
  case PIPERT_ACTIVATION_RECIPROCAL: return 1.f / x;
  }
  return x;
}

// dy * activation'(x), with PyTorch's choice at the kinks.
PIPERT_HD float activation_grad(int op, float alpha, float beta, float x, float dy) {
  switch (op) {
  case PIPERT_ACTIVATION_LEAKY_RELU: return x > 0.f ? dy : alpha * dy;
  case PIPERT_ACTIVATION_ELU: return x > 0.f ? dy : dy * alpha * exp_(x);
  case PIPERT_ACTIVATION_SELU: return x > 0.f ? dy * beta : dy * beta * alpha * exp_(x);
  case PIPERT_ACTIVATION_SOFTPLUS: return dy * sigmoid(x);
  case PIPERT_ACTIVATION_HARD_SIGMOID: {
    const float v = alpha * x + beta;
    return v > 0.f && v < 1.f ? dy * alpha : 0.f;
  }
  case PIPERT_ACTIVATION_HARD_SWISH:
    return x < -3.f ? 0.f : (x <= 3.f ? dy * (x * (1.f / 3.f) + 0.5f) : dy);
  case PIPERT_ACTIVATION_GELU: {
    // Phi(x) + x phi(x).
    const float cdf = 0.5f * (1.f + ::erff(x * 0.70710678118654752f));
    const float pdf = 0.39894228040143268f * ::expf(-0.5f * x * x);
    return dy * (cdf + x * pdf);
  }
  case PIPERT_ACTIVATION_GELU_TANH: {
    const float k = 0.79788456080286536f, c = 0.044715f;
    const float t = tanh_(k * (x + c * x * x * x));
    return dy * (0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * k * (1.f + 3.f * c * x * x));
  }
  case PIPERT_ACTIVATION_CLIP: return x >= alpha && x <= beta ? dy : 0.f;
  case PIPERT_ACTIVATION_SIGN:
  case PIPERT_ACTIVATION_FLOOR:
  case PIPERT_ACTIVATION_CEIL: return 0.f;
  case PIPERT_ACTIVATION_ABS: return x > 0.f ? dy : (x < 0.f ? -dy : 0.f);
  case PIPERT_ACTIVATION_RECIPROCAL: return -dy / (x * x);
  }
  return dy;
}

// Whether op is a pipert_activation_op.
PIPERT_HD bool is_activation(int op) {
  return op >= PIPERT_ACTIVATION_LEAKY_RELU && op <= PIPERT_ACTIVATION_RECIPROCAL;
}

//===------------------------------ binary, comparisons --------------------===//

// Max and Min propagate NaN (as numpy's maximum and torch.maximum do).
template <typename T> PIPERT_HD T max_value(T u, T v) { return (u != u || u > v) ? u : v; }
template <typename T> PIPERT_HD T min_value(T u, T v) { return (u != u || u < v) ? u : v; }

// ONNX Pow on floats. The exponents models write (RMSNorm's x ** 2, its
// gradient's x ** 1, a norm's 0.5, a reciprocal's -1) as the operations
// they are, which PyTorch also specialises (x * x for 2): the library's
// pow is ~15 ns an element and scalar. pow's special cases kept: 0.5 of
// -0 is +0 and of -inf is +inf (sqrt gives -0 and NaN).
PIPERT_HD float pow_value(float u, float v) {
  if (v == 2.f)
    return u * u;
  if (v == 1.f)
    return u;
  if (v == 0.f)
    return 1.f;
  if (v == -1.f)
    return 1.f / u;
  if (v == 0.5f)
    return u == -INFINITY ? INFINITY : ::sqrtf(u) + 0.f;
  return ::powf(u, v);
}

// Remainders: fmod has the sign of u, mod (Python's %) that of v. v != 0 for
// integers (the caller checks).
PIPERT_HD float fmod_value(float u, float v) { return ::fmodf(u, v); }
PIPERT_HD int64_t fmod_value(int64_t u, int64_t v) { return u % v; }
PIPERT_HD int64_t mod_value(int64_t u, int64_t v) {
  const int64_t r = u % v;
  return (r != 0 && ((r < 0) != (v < 0))) ? r + v : r;
}

template <typename T> PIPERT_HD uint8_t compare(int op, T u, T v) {
  switch (op) {
  case PIPERT_COMPARE_LESS: return u < v;
  case PIPERT_COMPARE_LESS_EQUAL: return u <= v;
  case PIPERT_COMPARE_GREATER: return u > v;
  default: return u >= v;
  }
}

PIPERT_HD uint8_t logical(int op, uint8_t u, uint8_t v) {
  return op == PIPERT_LOGICAL_AND ? uint8_t(u && v) : uint8_t(u || v);
}

//===------------------------------ dropout -------------------------------===//

// The keep threshold on the generator's upper 32 bits for a drop ratio.
inline uint32_t dropout_threshold(float ratio) {
  return uint32_t(double(ratio) * 4294967296.0);
}

// A counter-based generator (splitmix64 of seed + i * golden gamma): whether
// element i survives, from one draw `seed` of the context's random stream.
PIPERT_HD uint8_t dropout_keep(uint64_t seed, int64_t i, uint32_t threshold) {
  uint64_t z = seed + uint64_t(i) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return uint32_t(z >> 32) >= threshold;
}

//===------------------------------ optimizers ----------------------------===//

// SGD with L2 weight decay: x - lr (g + wd x).
PIPERT_HD float sgd(float x, float g, float lr, float weight_decay) {
  return x - lr * (g + weight_decay * x);
}

// ONNX Momentum: beta applies from the second step on (t > 0).
inline float momentum_beta(int64_t t, float beta) { return t > 0 ? beta : 1.f; }

// ONNX Momentum, standard mode: v' = alpha v + beta_t (norm x + g), x' = x - lr v'.
PIPERT_HD void momentum(float x, float g, float v, float lr, float alpha, float beta_t,
                        float norm_coefficient, float &x_out, float &v_out) {
  const float gr = norm_coefficient * x + g;
  const float vn = alpha * v + beta_t * gr;
  x_out = x - lr * vn;
  v_out = vn;
}

// ONNX Momentum, Nesterov mode: v' = alpha v + gr, x' = x - lr (gr + alpha v').
PIPERT_HD void nesterov(float x, float g, float v, float lr, float alpha, float norm_coefficient,
                        float &x_out, float &v_out) {
  const float gr = norm_coefficient * x + g;
  const float vn = alpha * v + gr;
  x_out = x - lr * (gr + alpha * vn);
  v_out = vn;
}

// ONNX Adam's bias-corrected rate: lr sqrt(1 - beta^t) / (1 - alpha^t) for
// t > 0, in double.
inline float adam_rate(float lr, int64_t t, float alpha, float beta) {
  if (t <= 0)
    return lr;
  return float(double(lr) * std::sqrt(1.0 - std::pow(double(beta), double(t))) /
               (1.0 - std::pow(double(alpha), double(t))));
}

// ONNX Adam with the rate of adam_rate.
PIPERT_HD void adam(float x, float g, float v, float h, float lr_t, float alpha, float beta,
                    float epsilon, float norm_coefficient, float norm_coefficient_post,
                    float &x_out, float &v_out, float &h_out) {
  const float gr = norm_coefficient * x + g;
  const float vn = alpha * v + (1.f - alpha) * gr;
  const float hn = beta * h + (1.f - beta) * gr * gr;
  const float xn = x - lr_t * (vn / (::sqrtf(hn) + epsilon));
  x_out = (1.f - norm_coefficient_post) * xn;
  v_out = vn;
  h_out = hn;
}

// SpecTrain's prediction along Adam's direction (PipeOptim):
// w - s lr m̂/(√v̂ + ε) with m̂, v̂ bias-corrected by the t updates done; the
// direction is zero before the first update (t <= 0).
struct AdamPredict {
  float step;         // s lr / (1 - beta1^t), 0 for t <= 0
  float inv_sqrt_bc2; // 1 / sqrt(1 - beta2^t)
};

inline AdamPredict adam_predict(float s, float lr, int64_t t, float beta1, float beta2) {
  if (t <= 0)
    return {0.f, 1.f};
  return {float(double(s) * double(lr) / (1.0 - std::pow(double(beta1), double(t)))),
          float(1.0 / std::sqrt(1.0 - std::pow(double(beta2), double(t))))};
}

PIPERT_HD float predict_adam(float w, float m, float v, AdamPredict p, float epsilon) {
  return w - p.step * (m / (::sqrtf(v) * p.inv_sqrt_bc2 + epsilon));
}

// AdamW's per-step scalars (PyTorch's formulation, decoupled decay).
struct AdamWStep {
  float step;         // lr / (1 - beta1^t)
  float inv_sqrt_bc2; // 1 / sqrt(1 - beta2^t)
  float decay;        // 1 - lr wd
};

inline AdamWStep adamw_step(float lr, int64_t t, float beta1, float beta2, float weight_decay) {
  if (t < 1)
    pipert_fail("AdamW: step t must be >= 1, got %lld", (long long)t);
  const double bc1 = 1.0 - std::pow(double(beta1), double(t));
  const double bc2 = 1.0 - std::pow(double(beta2), double(t));
  AdamWStep s;
  s.step = float(double(lr) / bc1);
  s.inv_sqrt_bc2 = float(1.0 / std::sqrt(bc2));
  s.decay = 1.f - lr * weight_decay;
  return s;
}

PIPERT_HD void adamw(float x, float g, float m, float v, const AdamWStep &s, float beta1,
                     float beta2, float epsilon, float &x_out, float &m_out, float &v_out) {
  const float mn = beta1 * m + (1.f - beta1) * g;
  const float vn = beta2 * v + (1.f - beta2) * g * g;
  x_out = x * s.decay - s.step * mn / (::sqrtf(vn) * s.inv_sqrt_bc2 + epsilon);
  m_out = mn;
  v_out = vn;
}

// ONNX Adagrad's decayed rate lr / (1 + t decay_factor).
inline float adagrad_rate(float lr, int64_t t, float decay_factor) {
  return lr / (1.f + float(t) * decay_factor);
}

PIPERT_HD void adagrad(float x, float g, float h, float lr_t, float epsilon,
                       float norm_coefficient, float &x_out, float &h_out) {
  const float gr = norm_coefficient * x + g;
  const float hn = h + gr * gr;
  x_out = x - lr_t * gr / (::sqrtf(hn) + epsilon);
  h_out = hn;
}

//===------------------------------ pooling -------------------------------===//

PIPERT_HD int64_t min_i64(int64_t a, int64_t b) { return b < a ? b : a; }
PIPERT_HD int64_t max_i64(int64_t a, int64_t b) { return a < b ? b : a; }

// Divisor of average-pool window (oy, ox): with count_include_pad the window
// clipped to the padded input (padding counts, what ceil_mode reaches beyond
// it does not), otherwise its in-bounds taps.
PIPERT_HD int64_t avg_pool_divisor(const PoolGeom &g, int64_t oy, int64_t ox,
                                   int count_include_pad) {
  int64_t y0 = oy * g.sh - g.pt, x0 = ox * g.sw - g.pl;
  int64_t y1 = y0 + g.kh, x1 = x0 + g.kw;
  if (count_include_pad) {
    y1 = min_i64(y1, g.h + g.pb);
    x1 = min_i64(x1, g.w + g.pr);
    return (y1 - y0) * (x1 - x0);
  }
  y0 = max_i64(y0, 0), x0 = max_i64(x0, 0);
  y1 = min_i64(y1, g.h), x1 = min_i64(x1, g.w);
  return max_i64(0, y1 - y0) * max_i64(0, x1 - x0);
}

//===------------------------------ losses --------------------------------===//

// The weight of a loss entry with label `label` among `classes`: 0 when it is
// the ignored index, weights[label] (1 without weights) otherwise. Sets
// `out_of_range` (and returns 0) for a label outside [0, classes), which the
// caller reports.
PIPERT_HD float label_weight(int64_t label, int64_t classes, const float *weights,
                             int has_ignore_index, int64_t ignore_index, bool &out_of_range) {
  out_of_range = false;
  if (has_ignore_index && label == ignore_index)
    return 0.f;
  if (label < 0 || label >= classes) {
    out_of_range = true;
    return 0.f;
  }
  return weights ? weights[label] : 1.f;
}

// Fails unless r is NONE, SUM or MEAN.
inline void check_reduction(const char *op, pipert_reduction r) {
  if (r != PIPERT_REDUCTION_NONE && r != PIPERT_REDUCTION_SUM && r != PIPERT_REDUCTION_MEAN)
    pipert_fail("%s: unknown reduction %d", op, int(r));
}

// The reduced loss from sum_i loss_i and sum_i w_i (SUM or MEAN).
PIPERT_HD float reduced_loss(int reduction, double total, double wsum) {
  return reduction == PIPERT_REDUCTION_MEAN ? float(total / wsum) : float(total);
}

// dL/dloss_i for a valid reduction: the incoming gradient, spread over the
// entries (MEAN: divided by the sum of weights, *wsum, read only then).
PIPERT_HD float reduction_scale(int reduction, const float *dloss, int64_t i,
                                const double *wsum) {
  switch (reduction) {
  case PIPERT_REDUCTION_NONE: return dloss[i];
  case PIPERT_REDUCTION_SUM: return dloss[0];
  default: return float(dloss[0] / *wsum);
  }
}

// d loss_i / d scores[c] of softmax cross-entropy: w_i scale_i (softmax_c - [c == label_i]).
PIPERT_HD float softmax_xent_grad(float w, float scale, float log_prob, bool is_label) {
  return w * scale * (::expf(log_prob) - (is_label ? 1.f : 0.f));
}

//===------------------------------ softmax -------------------------------===//

// dx of (log-)softmax from its output y, dy and acc = sum dy (Log) or
// sum dy y (softmax) over the axis.
template <bool Log> PIPERT_HD float softmax_grad(float y, float dy, float acc) {
  return Log ? dy - ::expf(y) * acc : y * (dy - acc);
}

//===------------------------------ normalisation -------------------------===//

// 1 / sqrt(var + eps) from a variance accumulated in double.
PIPERT_HD float inv_std(double var, float epsilon) {
  return float(1.0 / ::sqrt(var + double(epsilon)));
}

// xhat = (x - mu) inv_std.
PIPERT_HD float normalized(float x, float mu, float inv) { return (x - mu) * inv; }

// Layer norm's input gradient: inv (dy s - mean(dy s) - xhat mean(dy s xhat)).
PIPERT_HD float layer_norm_dx(float dy, float scale, float xhat, float inv, float mean_gs,
                              float mean_gsx) {
  return inv * (dy * scale - mean_gs - xhat * mean_gsx);
}

// One row's term of layer norm's scale gradient, dy (x - mu) inv.
PIPERT_HD float layer_norm_dscale_term(float dy, float x, float mu, float inv) {
  return dy * (x - mu) * inv;
}

// Batch norm's input gradient: k (dy - mean(dy) - xhat mean(dy xhat)), k = scale inv.
PIPERT_HD float batch_norm_dx(float dy, float x, float mu, float inv, float k, float mean_g,
                              float mean_gx) {
  return k * (dy - mean_g - normalized(x, mu, inv) * mean_gx);
}

// Inference batch norm as y = x k + off from the running statistics.
PIPERT_HD void batch_norm_inference_coeffs(float scale, float bias, float mean, float var,
                                           float epsilon, float &k, float &off) {
  k = scale / ::sqrtf(var + epsilon);
  off = bias - mean * k;
}

// Training batch norm, channel c, after its batch mean and biased variance:
// the running statistics (momentum on the inputs' mean/var, which the outputs
// may alias: read first) and the saved statistics; every output optional.
PIPERT_HD void batch_norm_store_stats(int64_t c, double mu, double batch_var, float inv,
                                      float momentum, const float *mean, const float *var,
                                      float *running_mean, float *running_var, float *saved_mean,
                                      float *saved_inv_std) {
  const float in_mean = mean ? mean[c] : 0.f, in_var = var ? var[c] : 1.f;
  if (running_mean)
    running_mean[c] = in_mean * momentum + float(mu) * (1.f - momentum);
  if (running_var)
    running_var[c] = in_var * momentum + float(batch_var) * (1.f - momentum);
  if (saved_mean)
    saved_mean[c] = float(mu);
  if (saved_inv_std)
    saved_inv_std[c] = inv;
}

//===------------------------------ index maps (issue 15) ------------------===//
// Row-major index arithmetic of Tile, Pad, the extremum reductions and
// CumSum, shared by the CPU loops and the CUDA kernels (passed by value).

struct Dims {
  int rank = 0;
  int64_t d[kMaxRank] = {};
};

inline Dims dims_of(int64_t rank, const int64_t *shape) {
  Dims s;
  s.rank = int(rank);
  for (int64_t i = 0; i < rank; ++i)
    s.d[i] = shape[i];
  return s;
}

PIPERT_HD void unravel(const Dims &s, int64_t i, int64_t *c) {
  for (int k = s.rank - 1; k >= 0; --k) {
    const int64_t q = i / s.d[k];
    c[k] = i - q * s.d[k];
    i = q;
  }
}

PIPERT_HD int64_t ravel(const Dims &s, const int64_t *c) {
  int64_t i = 0;
  for (int k = 0; k < s.rank; ++k)
    i = i * s.d[k] + c[k];
  return i;
}

// Tile: x's, y's and the repeats' dims.
struct TileGeom {
  Dims x, y, reps;
  int64_t tiles = 1;
};

inline TileGeom tile_geom(int64_t rank, const int64_t *shape, const int64_t *repeats) {
  TileGeom g;
  g.x = dims_of(rank, shape);
  g.reps = dims_of(rank, repeats);
  g.y = g.x;
  for (int64_t i = 0; i < rank; ++i) {
    if (repeats[i] < 0)
      pipert_fail("Tile: negative repeat %lld on axis %lld", (long long)repeats[i], (long long)i);
    g.y.d[i] = shape[i] * repeats[i];
    g.tiles *= repeats[i];
  }
  return g;
}

// The element of x that y's element i repeats.
PIPERT_HD int64_t tile_source(const TileGeom &g, int64_t i) {
  int64_t c[kMaxRank];
  unravel(g.y, i, c);
  for (int k = 0; k < g.x.rank; ++k)
    c[k] %= g.x.d[k];
  return ravel(g.x, c);
}

// dx[j]: the sum of dy over the copies of x's element j.
PIPERT_HD float tile_grad(const TileGeom &g, const float *dy, int64_t j) {
  int64_t cx[kMaxRank], ct[kMaxRank], cy[kMaxRank];
  unravel(g.x, j, cx);
  float s = 0.f;
  for (int64_t t = 0; t < g.tiles; ++t) {
    unravel(g.reps, t, ct);
    for (int k = 0; k < g.x.rank; ++k)
      cy[k] = ct[k] * g.x.d[k] + cx[k];
    s += dy[ravel(g.y, cy)];
  }
  return s;
}

// Pad: x's and y's dims and the begin pads.
struct PadGeom {
  Dims x, y;
  int64_t begin[kMaxRank] = {};
  int mode = 0;
};

inline PadGeom pad_geom(int mode, int64_t rank, const int64_t *shape, const int64_t *pads) {
  if (mode != PIPERT_PAD_CONSTANT && mode != PIPERT_PAD_REFLECT && mode != PIPERT_PAD_EDGE)
    pipert_fail("Pad: unknown mode %d", mode);
  PadGeom g;
  g.mode = mode;
  g.x = dims_of(rank, shape);
  g.y = g.x;
  for (int64_t i = 0; i < rank; ++i) {
    g.begin[i] = pads[i];
    g.y.d[i] = shape[i] + pads[i] + pads[i + rank];
    if (g.y.d[i] < 0)
      pipert_fail("Pad: pads crop axis %lld below zero", (long long)i);
    if (mode != PIPERT_PAD_CONSTANT && shape[i] == 0 && g.y.d[i] > 0)
      pipert_fail("Pad: cannot pad an empty axis %lld in reflect or edge mode", (long long)i);
    if (mode == PIPERT_PAD_REFLECT && (pads[i] >= shape[i] || pads[i + rank] >= shape[i]) &&
        shape[i] > 0 && (pads[i] > 0 || pads[i + rank] > 0))
      pipert_fail("Pad: reflect pads (%lld, %lld) on axis %lld must be below its extent %lld",
                  (long long)pads[i], (long long)pads[i + rank], (long long)i,
                  (long long)shape[i]);
  }
  return g;
}

// The coordinate of x that coordinate c (already shifted by the begin pad)
// reads along an axis of extent n, or -1 for the constant.
PIPERT_HD int64_t pad_coord(int mode, int64_t c, int64_t n) {
  if (c >= 0 && c < n)
    return c;
  if (mode == PIPERT_PAD_CONSTANT)
    return -1;
  if (mode == PIPERT_PAD_EDGE)
    return c < 0 ? 0 : n - 1;
  if (n == 1)
    return 0;
  return c < 0 ? -c : 2 * (n - 1) - c; // reflect: pads < n
}

// The element of x that y's element i reads, or -1 for the constant.
PIPERT_HD int64_t pad_source(const PadGeom &g, int64_t i) {
  int64_t c[kMaxRank];
  unravel(g.y, i, c);
  for (int k = 0; k < g.x.rank; ++k) {
    c[k] = pad_coord(g.mode, c[k] - g.begin[k], g.x.d[k]);
    if (c[k] < 0)
      return -1;
  }
  return ravel(g.x, c);
}

// A reduction's groups: output o reads the `count` elements of x whose kept
// coordinates are o's, in row-major order of the reduced ones.
struct ReduceGroups {
  Dims kept, red;
  int64_t kept_stride[kMaxRank] = {}, red_stride[kMaxRank] = {};
  int64_t count = 1, groups = 1;
};

inline ReduceGroups reduce_groups(int64_t rank, const int64_t *shape, const bool *reduced) {
  ReduceGroups g;
  int64_t stride = 1;
  int64_t strides[kMaxRank];
  for (int64_t i = rank - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= shape[i];
  }
  for (int64_t i = 0; i < rank; ++i) {
    if (reduced[i]) {
      g.red_stride[g.red.rank] = strides[i];
      g.red.d[g.red.rank++] = shape[i];
      g.count *= shape[i];
    } else {
      g.kept_stride[g.kept.rank] = strides[i];
      g.kept.d[g.kept.rank++] = shape[i];
      g.groups *= shape[i];
    }
  }
  return g;
}

// The reduced axes of a Reduce call (as pipert_reduce_f32 reads them: none
// listed means all).
inline void reduced_axes(const char *name, int64_t rank, int64_t n_axes, const int64_t *axes,
                         bool *red) {
  for (int64_t i = 0; i < rank; ++i)
    red[i] = n_axes == 0;
  for (int64_t k = 0; k < n_axes; ++k)
    red[norm_axis(name, axes[k], rank)] = true;
}

// ArgMax/ArgMin's checks and groups (one output per group, the axis the
// group's elements), for both backends.
inline ReduceGroups arg_reduce_groups(const char *name, pipert_reduce_op op, int64_t rank,
                                      const int64_t *shape, int64_t axis) {
  check_rank(name, rank);
  if (op != PIPERT_REDUCE_MAX && op != PIPERT_REDUCE_MIN)
    pipert_fail("ArgReduce: op %d is not MAX or MIN", int(op));
  bool red[kMaxRank];
  reduced_axes(name, rank, 1, &axis, red);
  const ReduceGroups g = reduce_groups(rank, shape, red);
  if (g.count == 0 && g.groups > 0)
    pipert_fail("%s: the axis is empty", name);
  return g;
}

PIPERT_HD int64_t group_offset(const Dims &s, const int64_t *strides, int64_t i) {
  int64_t off = 0;
  for (int k = s.rank - 1; k >= 0; --k) {
    const int64_t q = i / s.d[k];
    off += (i - q * s.d[k]) * strides[k];
    i = q;
  }
  return off;
}

// The offset in x of the first (or last) maximum (or minimum) of group o,
// and its position j in the group; a NaN counts as the extremum.
PIPERT_HD int64_t group_extremum(const ReduceGroups &g, const float *x, int64_t o, bool is_min,
                                 bool select_last, int64_t &best_j) {
  const int64_t base = group_offset(g.kept, g.kept_stride, o);
  int64_t best = base + group_offset(g.red, g.red_stride, 0);
  best_j = 0;
  float bv = x[best];
  for (int64_t j = 1; j < g.count; ++j) {
    const int64_t off = base + group_offset(g.red, g.red_stride, j);
    const float v = x[off];
    if (bv != bv)
      break;
    const bool better = v != v || (is_min ? (select_last ? v <= bv : v < bv)
                                          : (select_last ? v >= bv : v > bv));
    if (better) {
      bv = v;
      best = off;
      best_j = j;
    }
  }
  return best;
}

// One line of CumSum (elements k * inner of x and y).
template <typename T>
PIPERT_HD void cumsum_line(const T *x, T *y, int64_t mid, int64_t inner, bool exclusive,
                           bool reverse) {
  T acc = T(0);
  for (int64_t t = 0; t < mid; ++t) {
    const int64_t k = (reverse ? mid - 1 - t : t) * inner;
    const float v = x[k];
    if (exclusive) {
      y[k] = acc;
      acc += v;
    } else {
      acc += v;
      y[k] = acc;
    }
  }
}

// Whether Trilu keeps element (r, c).
PIPERT_HD bool trilu_keep(int64_t r, int64_t c, bool upper, int64_t k) {
  return upper ? c - r >= k : c - r <= k;
}

//===------------------------------ recurrent cells -----------------------===//
//
// ONNX LSTM and GRU with their default activations (f = Sigmoid, g = h =
// Tanh), one hidden unit of one batch row per call; runtime/core/rnn_driver.h
// runs them over the batch and the time steps. The `a*` arguments are gate
// pre-activations with both biases added.

// LSTM (ONNX gate order i, o, f, c; no peepholes):
//   i = f(ai), o = f(ao), fg = f(af), g = g(ac),
//   c = fg * c_prev + i * g, h = o * h(c).
PIPERT_HD void lstm_cell(float ai, float ao, float af, float ac, float c_prev, float &i, float &o,
                         float &fg, float &g, float &c, float &h) {
  const float ii = sigmoid(ai), oo = sigmoid(ao), ff = sigmoid(af), gg = tanh_(ac);
  const float cc = ff * c_prev + ii * gg;
  i = ii;
  o = oo;
  fg = ff;
  g = gg;
  c = cc;
  h = oo * tanh_(cc);
}

// Its derivative: from the saved activations, c and c_prev, the incoming
// dh (of h) and dc (of c, from the next step) to the gate pre-activations'
// gradients and the gradient of c_prev.
PIPERT_HD void lstm_cell_grad(float i, float o, float fg, float g, float c, float c_prev, float dh,
                              float dc_next, float &dai, float &dao, float &daf, float &dac,
                              float &dc_prev) {
  const float tc = tanh_(c);
  const float dc = dc_next + dh * o * (1.f - tc * tc);
  const float ddi = dc * g, ddo = dh * tc, ddf = dc * c_prev, ddg = dc * i;
  dai = ddi * i * (1.f - i);
  dao = ddo * o * (1.f - o);
  daf = ddf * fg * (1.f - fg);
  dac = ddg * (1.f - g * g);
  dc_prev = dc * fg;
}

// GRU (ONNX gate order z, r, h):
//   z = f(az), r = f(ar), h = (1 - z) * n + z * h_prev, with
//   linear_before_reset = 1: n = g(xn + r * rn), rn = Ht-1 Rh^T + Rbh;
//   linear_before_reset = 0: n = g(xn + rn),     rn = (r . Ht-1) Rh^T + Rbh;
// xn = Xt Wh^T + Wbh.
PIPERT_HD void gru_cell(float az, float ar, float xn, float rn, float h_prev, bool lbr, float &z,
                        float &r, float &n, float &h) {
  const float zz = sigmoid(az), rr = sigmoid(ar);
  const float nn = tanh_(xn + (lbr ? rr * rn : rn));
  z = zz;
  r = rr;
  n = nn;
  h = (1.f - zz) * nn + zz * h_prev;
}

// Its derivative: the gradients of az, ar, xn and rn, and the part of
// h_prev's gradient that does not go through the recurrent GEMMs (dh * z).
// With linear_before_reset = 0, r enters through the GEMM (r . h_prev) Rh^T:
// dar is left 0 here and gru_reset_grad completes it.
PIPERT_HD void gru_cell_grad(float z, float r, float n, float rn, float h_prev, float dh, bool lbr,
                             float &daz, float &dar, float &dxn, float &drn, float &dh_prev) {
  const float dn = dh * (1.f - z) * (1.f - n * n);
  daz = dh * (h_prev - n) * z * (1.f - z);
  dar = lbr ? dn * rn * r * (1.f - r) : 0.f;
  dxn = dn;
  drn = lbr ? dn * r : dn;
  dh_prev = dh * z;
}

// linear_before_reset = 0: from d_rh, the gradient of r . h_prev (drn Rh),
// the gradient of ar and the part of h_prev's gradient through r . h_prev.
PIPERT_HD void gru_reset_grad(float r, float h_prev, float d_rh, float &dar, float &dh_prev) {
  dar = d_rh * h_prev * r * (1.f - r);
  dh_prev = d_rh * r;
}


//===------------------------------ Resize ---------------------------------===//
// pipert_resize_f32's separable filter: per resized axis up to four taps
// (input index, weight), computed from the output index in double as the
// ONNX reference does (a nearest rounding at .5 must not depend on float
// error).

struct ResizeAxis {
  int64_t in = 1, out = 1;
  double scale = 1.0;
  // The resized length the coordinate transforms divide by: in * scale,
  // possibly fractional, as the ONNX reference has it (out with sizes).
  double resized = 1.0;
  double roi_start = 0.0, roi_end = 1.0;
  bool identity = true;
};

struct ResizeGeom {
  int64_t outer = 1;
  ResizeAxis axis[3];
  int mode = 0, coord = 0, nearest = 0;
  float cubic_a = -0.75f, extrapolation = 0.f;
  int exclude_outside = 0;
};

inline ResizeGeom resize_geom(const int64_t x_shape[4], const int64_t y_shape[4],
                              const float *scales, const float *roi, int mode, int coord,
                              int nearest, float cubic_a, int exclude_outside,
                              float extrapolation) {
  if (mode < PIPERT_RESIZE_NEAREST || mode > PIPERT_RESIZE_CUBIC)
    pipert_fail("Resize: unknown mode %d", mode);
  if (coord < PIPERT_RESIZE_HALF_PIXEL || coord > PIPERT_RESIZE_HALF_PIXEL_SYMMETRIC)
    pipert_fail("Resize: unknown coordinate transformation %d", coord);
  if (nearest < PIPERT_RESIZE_ROUND_PREFER_FLOOR || nearest > PIPERT_RESIZE_CEIL)
    pipert_fail("Resize: unknown nearest mode %d", nearest);
  if (x_shape[0] != y_shape[0])
    pipert_fail("Resize: the outer extents differ (%lld, %lld)", (long long)x_shape[0],
                (long long)y_shape[0]);
  if (coord == PIPERT_RESIZE_TF_CROP_AND_RESIZE && !roi)
    pipert_fail("Resize: tf_crop_and_resize needs a roi");
  ResizeGeom g;
  g.outer = x_shape[0];
  g.mode = mode;
  g.coord = coord;
  g.nearest = nearest;
  g.cubic_a = cubic_a;
  g.exclude_outside = exclude_outside;
  g.extrapolation = extrapolation;
  for (int d = 0; d < 3; ++d) {
    ResizeAxis &a = g.axis[d];
    a.in = x_shape[d + 1];
    a.out = y_shape[d + 1];
    if (a.in < 0 || a.out < 0 || (a.in == 0 && a.out > 0))
      pipert_fail("Resize: cannot resize an axis of %lld into %lld", (long long)a.in,
                  (long long)a.out);
    a.scale = scales ? double(scales[d]) : a.in > 0 ? double(a.out) / double(a.in) : 1.0;
    if (!(a.scale > 0.0))
      pipert_fail("Resize: scale %g of axis %d is not positive", a.scale, d);
    a.resized = scales ? double(a.in) * a.scale : double(a.out);
    if (roi) {
      a.roi_start = roi[d];
      a.roi_end = roi[d + 3];
    }
    a.identity = a.in == a.out && a.scale == 1.0 && coord != PIPERT_RESIZE_TF_CROP_AND_RESIZE;
  }
  return g;
}

// ONNX's cubic convolution weights of the taps at floor(x) - 1 ... + 2 for
// t = x - floor(x).
PIPERT_HD void resize_cubic_weights(double t, double A, double w[4]) {
  const double u = t + 1, v = 1 - t, z = 2 - t;
  w[0] = ((A * u - 5 * A) * u + 8 * A) * u - 4 * A;
  w[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
  w[2] = ((A + 2) * v - (A + 3)) * v * v + 1;
  w[3] = ((A * z - 5 * A) * z + 8 * A) * z - 4 * A;
}

// The taps of output index o on axis `d`: their count (0 when the
// coordinate falls outside a tf_crop_and_resize roi: the extrapolation
// value), input indices and weights.
PIPERT_HD int resize_taps(const ResizeGeom &g, int d, int64_t o, int64_t idx[4], float w[4]) {
  const ResizeAxis &a = g.axis[d];
  if (a.identity) {
    idx[0] = o;
    w[0] = 1.f;
    return 1;
  }
  const double in = double(a.in), out = a.resized, s = a.scale, od = double(o);
  double x = 0;
  switch (g.coord) {
  case PIPERT_RESIZE_HALF_PIXEL: x = (od + 0.5) / s - 0.5; break;
  case PIPERT_RESIZE_ASYMMETRIC: x = od / s; break;
  case PIPERT_RESIZE_ALIGN_CORNERS: x = out == 1.0 ? 0.0 : od * (in - 1) / (out - 1); break;
  case PIPERT_RESIZE_PYTORCH_HALF_PIXEL: x = out > 1.0 ? (od + 0.5) / s - 0.5 : 0.0; break;
  case PIPERT_RESIZE_TF_HALF_PIXEL_FOR_NN: x = (od + 0.5) / s; break;
  case PIPERT_RESIZE_TF_CROP_AND_RESIZE:
    x = out > 1.0 ? a.roi_start * (in - 1) + od * (a.roi_end - a.roi_start) * (in - 1) / (out - 1)
                  : 0.5 * (a.roi_start + a.roi_end) * (in - 1);
    if (x < 0 || x > in - 1)
      return 0;
    break;
  case PIPERT_RESIZE_HALF_PIXEL_SYMMETRIC: {
    const double adjustment = double(a.out) / (in * s);
    x = in / 2 * (1 - adjustment) + (od + 0.5) / s - 0.5;
    break;
  }
  }
  auto clamp = [&](int64_t i) { return i < 0 ? int64_t(0) : i >= a.in ? a.in - 1 : i; };
  if (g.mode == PIPERT_RESIZE_NEAREST) {
    double r;
    const double f = ::floor(x);
    switch (g.nearest) {
    case PIPERT_RESIZE_ROUND_PREFER_FLOOR: r = x - f == 0.5 ? f : ::round(x); break;
    case PIPERT_RESIZE_ROUND_PREFER_CEIL: r = x - f == 0.5 ? f + 1 : ::round(x); break;
    case PIPERT_RESIZE_FLOOR: r = f; break;
    default: r = ::ceil(x); break;
    }
    idx[0] = clamp(int64_t(r));
    w[0] = 1.f;
    return 1;
  }
  const double f = ::floor(x), t = x - f;
  const int64_t base = int64_t(f);
  if (g.mode == PIPERT_RESIZE_LINEAR) {
    idx[0] = clamp(base);
    idx[1] = clamp(base + 1);
    w[0] = float(1 - t);
    w[1] = float(t);
    return 2;
  }
  double cw[4];
  resize_cubic_weights(t, double(g.cubic_a), cw);
  double sum = 0;
  for (int k = 0; k < 4; ++k) {
    const int64_t i = base - 1 + k;
    if (g.exclude_outside && (i < 0 || i >= a.in))
      cw[k] = 0;
    sum += cw[k];
  }
  for (int k = 0; k < 4; ++k) {
    idx[k] = clamp(base - 1 + k);
    w[k] = float(g.exclude_outside && sum != 0 ? cw[k] / sum : cw[k]);
  }
  return 4;
}

// The input taps of y's element i (flat over (outer, oD, oH, oW)): per
// axis its input indices and weights, and the offset of its outer slice.
struct ResizePoint {
  int64_t base = 0;
  int64_t id[4], ih[4], iw[4];
  float wd[4], wh[4], ww[4];
  int nd = 0, nh = 0, nw = 0;
};

PIPERT_HD ResizePoint resize_point(const ResizeGeom &g, int64_t i) {
  const ResizeAxis &A = g.axis[0], &B = g.axis[1], &C = g.axis[2];
  const int64_t ow = i % C.out, oh = (i / C.out) % B.out, od = (i / (C.out * B.out)) % A.out;
  ResizePoint p;
  p.base = i / (C.out * B.out * A.out) * A.in * B.in * C.in;
  p.nd = resize_taps(g, 0, od, p.id, p.wd);
  p.nh = resize_taps(g, 1, oh, p.ih, p.wh);
  p.nw = resize_taps(g, 2, ow, p.iw, p.ww);
  return p;
}

// y's element i.
PIPERT_HD float resize_value(const ResizeGeom &g, const float *x, int64_t i) {
  const ResizePoint p = resize_point(g, i);
  if (p.nd == 0 || p.nh == 0 || p.nw == 0)
    return g.extrapolation;
  const int64_t inH = g.axis[1].in, inW = g.axis[2].in;
  float acc = 0.f;
  for (int a = 0; a < p.nd; ++a)
    for (int b = 0; b < p.nh; ++b) {
      const float *row = x + p.base + (p.id[a] * inH + p.ih[b]) * inW;
      const float wab = p.wd[a] * p.wh[b];
      for (int c = 0; c < p.nw; ++c)
        acc += wab * p.ww[c] * row[p.iw[c]];
    }
  return acc;
}

// The adjoint of resize_value for y's element i: add(j, v) for each input
// element j it reads, with v = dy * weight.
template <typename Add>
PIPERT_HD void resize_scatter(const ResizeGeom &g, float dy, int64_t i, Add add) {
  const ResizePoint p = resize_point(g, i);
  const int64_t inH = g.axis[1].in, inW = g.axis[2].in;
  for (int a = 0; a < p.nd; ++a)
    for (int b = 0; b < p.nh; ++b)
      for (int c = 0; c < p.nw; ++c)
        add(p.base + (p.id[a] * inH + p.ih[b]) * inW + p.iw[c], dy * p.wd[a] * p.wh[b] * p.ww[c]);
}

/// Global-norm clipping (torch.nn.utils.clip_grad_norm_): the factor on
/// every gradient, min(1, max_norm / (sqrt(sum of squares) + 1e-6)), in
/// float32 as PyTorch computes it; NaN for a NaN norm (torch.clamp keeps
/// it, and every gradient becomes NaN).
PIPERT_HD float clip_coefficient(float sum_squares, float max_norm) {
  const float coef = max_norm / (sqrtf(sum_squares) + 1e-6f);
  return coef > 1.f ? 1.f : coef;
}

} // namespace pipert::formula

#endif // PIPERT_CORE_FORMULAS_H
