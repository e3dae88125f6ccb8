//===- norm.cu - softmax, layer and batch norm (CUDA) ------------------------===//
//
// Row statistics accumulate in double like runtime/cpu/norm.cpp; the
// per-element formulas are shared with it (runtime/core/formulas.h).
//
//===----------------------------------------------------------------------===//
#include "nn_util.cuh"

using namespace pipert::cuda;
using namespace pipert::cuda::nn;

namespace {

//===------------------------------ softmax -------------------------------===//

// Softmax over contiguous rows of `mid` (inner == 1): G threads per row.
template <int G, bool Log>
__global__ void softmax_rows_kernel(const float *__restrict__ x, int64_t rows, int64_t mid,
                                    float *__restrict__ y) {
  __shared__ double dsh[32];
  __shared__ float fsh[32];
  constexpr int per_block = kBlock / G;
  const int lane = threadIdx.x % G, slot = threadIdx.x / G;
  for (int64_t base = int64_t(blockIdx.x) * per_block; base < rows;
       base += int64_t(gridDim.x) * per_block) {
    const int64_t r = base + slot;
    const bool active = r < rows;
    const float *xr = x + (active ? r : 0) * mid;
    float mx = -INFINITY;
    if (active)
      for (int64_t m = lane; m < mid; m += G)
        mx = fmaxf(mx, xr[m]);
    mx = group_max<G>(mx, fsh);
    double sum = 0;
    if (active)
      for (int64_t m = lane; m < mid; m += G)
        sum += expf(xr[m] - mx);
    sum = group_sum<G>(sum, dsh);
    if (active) {
      float *yr = y + r * mid;
      if (Log) {
        const float lse = mx + logf(float(sum));
        for (int64_t m = lane; m < mid; m += G)
          yr[m] = xr[m] - lse;
      } else {
        const float inv = 1.f / float(sum);
        for (int64_t m = lane; m < mid; m += G)
          yr[m] = expf(xr[m] - mx) * inv;
      }
    }
  }
}

// Softmax over a strided axis (inner > 1): a thread per (outer, inner) column,
// adjacent threads on adjacent elements.
template <bool Log>
__global__ void softmax_cols_kernel(const float *__restrict__ x, int64_t outer, int64_t mid,
                                    int64_t inner, float *__restrict__ y) {
  PIPERT_GRID_STRIDE(t, outer * inner) {
    const int64_t o = t / inner, j = t % inner;
    const float *xb = x + o * mid * inner + j;
    float *yb = y + o * mid * inner + j;
    float mx = -INFINITY;
    for (int64_t m = 0; m < mid; ++m)
      mx = fmaxf(mx, xb[m * inner]);
    float sum = 0.f;
    for (int64_t m = 0; m < mid; ++m)
      sum += expf(xb[m * inner] - mx);
    if (Log) {
      const float lse = mx + logf(sum);
      for (int64_t m = 0; m < mid; ++m)
        yb[m * inner] = xb[m * inner] - lse;
    } else {
      const float inv = 1.f / sum;
      for (int64_t m = 0; m < mid; ++m)
        yb[m * inner] = expf(xb[m * inner] - mx) * inv;
    }
  }
}

template <bool Log>
void softmax_impl(pipert_context *ctx, const char *op, const float *x, int64_t rank,
                  const int64_t *shape, int64_t axis, float *y) {
  check_rank(op, rank);
  AxisSplit s = split_at(rank, shape, norm_axis(op, axis, rank));
  if (s.outer * s.mid * s.inner == 0)
    return;
  cudaStream_t st = stream_of(ctx);
  if (s.inner == 1) {
    const int64_t sms = cx(ctx)->sm_count;
    if (s.mid <= 1024 || s.outer >= sms * 64) {
      const int64_t blocks = std::min<int64_t>((s.outer + 7) / 8, sms * 32);
      softmax_rows_kernel<32, Log><<<unsigned(blocks), kBlock, 0, st>>>(x, s.outer, s.mid, y);
    } else {
      const int64_t blocks = std::min<int64_t>(s.outer, sms * 32);
      softmax_rows_kernel<kBlock, Log><<<unsigned(blocks), kBlock, 0, st>>>(x, s.outer, s.mid,
                                                                             y);
    }
  } else {
    softmax_cols_kernel<Log><<<grid_for(ctx, s.outer * s.inner), kBlock, 0, st>>>(
        x, s.outer, s.mid, s.inner, y);
  }
  PIPERT_LAUNCH_CHECK(op);
}

template <bool Log>
__global__ void softmax_grad_kernel(const float *__restrict__ y, const float *__restrict__ dy,
                                    int64_t outer, int64_t mid, int64_t inner,
                                    float *__restrict__ dx) {
  PIPERT_GRID_STRIDE(t, outer * inner) {
    const int64_t o = t / inner, j = t % inner;
    const int64_t b = o * mid * inner + j;
    float acc = 0.f;
    for (int64_t m = 0; m < mid; ++m) {
      const int64_t i = b + m * inner;
      acc += Log ? dy[i] : dy[i] * y[i];
    }
    for (int64_t m = 0; m < mid; ++m) {
      const int64_t i = b + m * inner;
      dx[i] = formula::softmax_grad<Log>(y[i], dy[i], acc);
    }
  }
}

template <int G, bool Log>
__global__ void softmax_grad_rows_kernel(const float *__restrict__ y,
                                         const float *__restrict__ dy, int64_t rows, int64_t mid,
                                         float *__restrict__ dx) {
  __shared__ double dsh[32];
  constexpr int per_block = kBlock / G;
  const int lane = threadIdx.x % G, slot = threadIdx.x / G;
  for (int64_t base = int64_t(blockIdx.x) * per_block; base < rows;
       base += int64_t(gridDim.x) * per_block) {
    const int64_t r = base + slot;
    const bool active = r < rows;
    const int64_t off = (active ? r : 0) * mid;
    double acc = 0;
    if (active)
      for (int64_t m = lane; m < mid; m += G)
        acc += Log ? dy[off + m] : dy[off + m] * y[off + m];
    const float a = float(group_sum<G>(acc, dsh));
    if (active)
      for (int64_t m = lane; m < mid; m += G) {
        const int64_t i = off + m;
        dx[i] = formula::softmax_grad<Log>(y[i], dy[i], a);
      }
  }
}

template <bool Log>
void softmax_grad_impl(pipert_context *ctx, const char *op, const float *y, const float *dy,
                       int64_t rank, const int64_t *shape, int64_t axis, float *dx) {
  check_rank(op, rank);
  AxisSplit s = split_at(rank, shape, norm_axis(op, axis, rank));
  if (s.outer * s.mid * s.inner == 0)
    return;
  cudaStream_t st = stream_of(ctx);
  if (s.inner == 1) {
    const int64_t blocks = std::min<int64_t>((s.outer + 7) / 8, int64_t(cx(ctx)->sm_count) * 32);
    softmax_grad_rows_kernel<32, Log><<<unsigned(blocks), kBlock, 0, st>>>(y, dy, s.outer,
                                                                            s.mid, dx);
  } else {
    softmax_grad_kernel<Log><<<grid_for(ctx, s.outer * s.inner), kBlock, 0, st>>>(
        y, dy, s.outer, s.mid, s.inner, dx);
  }
  PIPERT_LAUNCH_CHECK(op);
}

//===------------------------------ layer norm ----------------------------===//

template <int G>
__global__ void layer_norm_kernel(const float *__restrict__ x, int64_t rows, int64_t cols,
                                  float epsilon, const float *__restrict__ scale,
                                  const float *__restrict__ bias, float *__restrict__ y,
                                  float *__restrict__ mean, float *__restrict__ inv_std) {
  __shared__ double dsh[32];
  constexpr int per_block = kBlock / G;
  const int lane = threadIdx.x % G, slot = threadIdx.x / G;
  for (int64_t base = int64_t(blockIdx.x) * per_block; base < rows;
       base += int64_t(gridDim.x) * per_block) {
    const int64_t r = base + slot;
    const bool active = r < rows;
    const float *xr = x + (active ? r : 0) * cols;
    double s = 0;
    if (active)
      for (int64_t j = lane; j < cols; j += G)
        s += xr[j];
    const double mu = group_sum<G>(s, dsh) / double(cols);
    double v = 0;
    if (active)
      for (int64_t j = lane; j < cols; j += G) {
        const double d = xr[j] - mu;
        v += d * d;
      }
    v = group_sum<G>(v, dsh);
    if (!active)
      continue;
    const float inv = formula::inv_std(v / double(cols), epsilon);
    const float muf = float(mu);
    float *yr = y + r * cols;
    for (int64_t j = lane; j < cols; j += G)
      yr[j] = formula::normalized(xr[j], muf, inv) * scale[j] + (bias ? bias[j] : 0.f);
    if (lane == 0) {
      if (mean)
        mean[r] = muf;
      if (inv_std)
        inv_std[r] = inv;
    }
  }
}

template <int G>
__global__ void layer_norm_grad_kernel(const float *__restrict__ x, int64_t rows, int64_t cols,
                                       const float *__restrict__ scale,
                                       const float *__restrict__ mean,
                                       const float *__restrict__ inv_std,
                                       const float *dy, float *dx) {
  // dx may be dy's own buffer (pipe-lower-to-runtime writes it there when dy
  // dies here): each element of a row's dy is read by the lane that later
  // stores that element of dx, before it stores it.
  __shared__ double dsh[32];
  constexpr int per_block = kBlock / G;
  const int lane = threadIdx.x % G, slot = threadIdx.x / G;
  for (int64_t base = int64_t(blockIdx.x) * per_block; base < rows;
       base += int64_t(gridDim.x) * per_block) {
    const int64_t r = base + slot;
    const bool active = r < rows;
    const int64_t off = (active ? r : 0) * cols;
    const float mu = active ? mean[r] : 0.f, inv = active ? inv_std[r] : 0.f;
    double a = 0, b = 0;
    if (active)
      for (int64_t j = lane; j < cols; j += G) {
        const float xhat = formula::normalized(x[off + j], mu, inv);
        const float gs = dy[off + j] * scale[j];
        a += gs;
        b += double(gs) * xhat;
      }
    a = group_sum<G>(a, dsh);
    b = group_sum<G>(b, dsh);
    if (!active)
      continue;
    const float ma = float(a / double(cols)), mb = float(b / double(cols));
    for (int64_t j = lane; j < cols; j += G) {
      const float xhat = formula::normalized(x[off + j], mu, inv);
      dx[off + j] = formula::layer_norm_dx(dy[off + j], scale[j], xhat, inv, ma, mb);
    }
  }
}

// dscale[j] = sum_r dy * xhat, dbias[j] = sum_r dy: a thread per column.
__global__ void layer_norm_param_grad_kernel(const float *__restrict__ x, int64_t rows,
                                             int64_t cols, const float *__restrict__ mean,
                                             const float *__restrict__ inv_std,
                                             const float *__restrict__ dy,
                                             float *__restrict__ dscale,
                                             float *__restrict__ dbias, int accumulate) {
  PIPERT_GRID_STRIDE(j, cols) {
    float ds = 0.f, db = 0.f;
    for (int64_t r = 0; r < rows; ++r) {
      const float g = dy[r * cols + j];
      ds += formula::layer_norm_dscale_term(g, x[r * cols + j], mean[r], inv_std[r]);
      db += g;
    }
    if (dscale)
      dscale[j] = (accumulate & 1) ? dscale[j] + ds : ds;
    if (dbias)
      dbias[j] = (accumulate & 2) ? dbias[j] + db : db;
  }
}


//===------------------------------ batch norm ----------------------------===//

// A block per channel: batch mean and biased variance (two passes, double),
// running statistics, saved statistics, and k = scale * inv, off = bias - mu k
// into kofs[2c], kofs[2c+1] for the normalising pass.
__global__ void batch_norm_stats_kernel(const float *__restrict__ x, NCS g, float epsilon,
                                        float momentum, const float *scale, const float *bias,
                                        const float *mean, const float *var, float *running_mean,
                                        float *running_var, float *saved_mean,
                                        float *saved_inv_std, float *kofs) {
  __shared__ double dsh[32];
  const int64_t count = g.n * g.spatial;
  for (int64_t c = blockIdx.x; c < g.c; c += gridDim.x) {
    double s = 0;
    for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
      const int64_t n = e / g.spatial, i = e % g.spatial;
      s += x[(n * g.c + c) * g.spatial + i];
    }
    const double mu = block_sum(s, dsh) / double(count);
    double v = 0;
    for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
      const int64_t n = e / g.spatial, i = e % g.spatial;
      const double d = x[(n * g.c + c) * g.spatial + i] - mu;
      v += d * d;
    }
    const double batch_var = block_sum(v, dsh) / double(count);
    if (threadIdx.x == 0) {
      const float inv = formula::inv_std(batch_var, epsilon);
      const float k = scale[c] * inv;
      kofs[2 * c] = k;
      kofs[2 * c + 1] = bias[c] - float(mu) * k;
      formula::batch_norm_store_stats(c, mu, batch_var, inv, momentum, mean, var, running_mean,
                                      running_var, saved_mean, saved_inv_std);
    }
  }
}

// A block per channel: sum(dy), sum(dy * xhat) -> dscale, dbias and the
// means the dx pass needs (into mg[2c], mg[2c+1]).
__global__ void batch_norm_grad_stats_kernel(const float *__restrict__ x, NCS g,
                                             const float *__restrict__ saved_mean,
                                             const float *__restrict__ saved_inv_std,
                                             const float *__restrict__ dy, float *dscale,
                                             float *dbias, int accumulate, float *mg) {
  __shared__ double dsh[32];
  const int64_t count = g.n * g.spatial;
  for (int64_t c = blockIdx.x; c < g.c; c += gridDim.x) {
    const float mu = saved_mean[c], inv = saved_inv_std[c];
    double sg = 0, sgx = 0;
    for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
      const int64_t n = e / g.spatial, i = e % g.spatial;
      const int64_t at = (n * g.c + c) * g.spatial + i;
      sg += dy[at];
      sgx += double(dy[at]) * formula::normalized(x[at], mu, inv);
    }
    sg = block_sum(sg, dsh);
    sgx = block_sum(sgx, dsh);
    if (threadIdx.x == 0) {
      if (dscale)
        dscale[c] = (accumulate & 1) ? dscale[c] + float(sgx) : float(sgx);
      if (dbias)
        dbias[c] = (accumulate & 2) ? dbias[c] + float(sg) : float(sg);
      mg[2 * c] = float(sg / double(count));
      mg[2 * c + 1] = float(sgx / double(count));
    }
  }
}


} // namespace

extern "C" {

//===------------------------------ normalisation -------------------------===//

void pipert_softmax_f32(pipert_context *ctx, const float *x, int64_t rank, const int64_t *shape,
                        int64_t axis, float *y) {
  softmax_impl<false>(ctx, "Softmax", x, rank, shape, axis, y);
}

void pipert_log_softmax_f32(pipert_context *ctx, const float *x, int64_t rank,
                            const int64_t *shape, int64_t axis, float *y) {
  softmax_impl<true>(ctx, "LogSoftmax", x, rank, shape, axis, y);
}

void pipert_softmax_grad_f32(pipert_context *ctx, const float *y, const float *dy, int64_t rank,
                             const int64_t *shape, int64_t axis, float *dx) {
  softmax_grad_impl<false>(ctx, "SoftmaxGrad", y, dy, rank, shape, axis, dx);
}

void pipert_log_softmax_grad_f32(pipert_context *ctx, const float *y, const float *dy,
                                 int64_t rank, const int64_t *shape, int64_t axis, float *dx) {
  softmax_grad_impl<true>(ctx, "LogSoftmaxGrad", y, dy, rank, shape, axis, dx);
}

void pipert_layer_norm_f32(pipert_context *ctx, const float *x, int64_t rank, const int64_t *shape,
                           int64_t axis, float epsilon, const float *scale, const float *bias,
                           float *y, float *mean, float *inv_std_dev) {
  const char *op = "LayerNormalization";
  check_rank(op, rank);
  const int64_t ax = norm_axis(op, axis, rank);
  const int64_t rows = numel(ax, shape), cols = numel(rank - ax, shape + ax);
  if (rows == 0 || cols == 0)
    return;
  const int64_t sms = cx(ctx)->sm_count;
  cudaStream_t st = stream_of(ctx);
  if (cols <= 1024 || rows >= sms * 64) {
    const int64_t blocks = std::min<int64_t>((rows + 7) / 8, sms * 32);
    layer_norm_kernel<32><<<unsigned(blocks), kBlock, 0, st>>>(x, rows, cols, epsilon, scale,
                                                               bias, y, mean, inv_std_dev);
  } else {
    const int64_t blocks = std::min<int64_t>(rows, sms * 32);
    layer_norm_kernel<kBlock><<<unsigned(blocks), kBlock, 0, st>>>(x, rows, cols, epsilon, scale,
                                                                   bias, y, mean, inv_std_dev);
  }
  PIPERT_LAUNCH_CHECK(op);
}

void pipert_layer_norm_grad_f32(pipert_context *ctx, const float *x, int64_t rank,
                                const int64_t *shape, int64_t axis, const float *scale,
                                const float *mean, const float *inv_std_dev, const float *dy,
                                float *dx, float *dscale, float *dbias, int accumulate) {
  const char *op = "LayerNormalizationGrad";
  check_rank(op, rank);
  const int64_t ax = norm_axis(op, axis, rank);
  const int64_t rows = numel(ax, shape), cols = numel(rank - ax, shape + ax);
  if (cols == 0)
    return;
  cudaStream_t st = stream_of(ctx);
  // The parameter gradients first: they read dy, which dx may overwrite.
  if (dscale || dbias) {
    layer_norm_param_grad_kernel<<<grid_for(ctx, cols), kBlock, 0, st>>>(
        x, rows, cols, mean, inv_std_dev, dy, dscale, dbias, accumulate);
    PIPERT_LAUNCH_CHECK(op);
  }
  if (rows > 0) {
    const int64_t sms = cx(ctx)->sm_count;
    if (cols <= 1024 || rows >= sms * 64) {
      const int64_t blocks = std::min<int64_t>((rows + 7) / 8, sms * 32);
      layer_norm_grad_kernel<32><<<unsigned(blocks), kBlock, 0, st>>>(
          x, rows, cols, scale, mean, inv_std_dev, dy, dx);
    } else {
      const int64_t blocks = std::min<int64_t>(rows, sms * 32);
      layer_norm_grad_kernel<kBlock><<<unsigned(blocks), kBlock, 0, st>>>(
          x, rows, cols, scale, mean, inv_std_dev, dy, dx);
    }
    PIPERT_LAUNCH_CHECK(op);
  }
}

void pipert_batch_norm_inference_f32(pipert_context *ctx, const float *x, int64_t rank,
                                     const int64_t *shape, const float *scale, const float *bias,
                                     const float *mean, const float *var, float epsilon,
                                     float *y) {
  const NCS g = nc_split("BatchNormalization", rank, shape);
  launch_map(ctx, "BatchNormalization", g.n * g.c * g.spatial, [=] __device__(int64_t i) {
    const int64_t c = (i / g.spatial) % g.c;
    float k, off;
    formula::batch_norm_inference_coeffs(scale[c], bias[c], mean[c], var[c], epsilon, k, off);
    y[i] = x[i] * k + off;
  });
}

void pipert_batch_norm_training_f32(pipert_context *ctx, const float *x, int64_t rank,
                                    const int64_t *shape, const float *scale, const float *bias,
                                    const float *mean, const float *var, float epsilon,
                                    float momentum, float *y, float *running_mean,
                                    float *running_var, float *saved_mean, float *saved_inv_std) {
  const char *op = "BatchNormalization";
  const NCS g = nc_split(op, rank, shape);
  if (g.c == 0)
    return;
  Scratch kofs(ctx, size_t(2 * g.c) * sizeof(float));
  float *ko = kofs.as<float>();
  batch_norm_stats_kernel<<<unsigned(std::min<int64_t>(g.c, 65535)), kBlock, 0,
                            stream_of(ctx)>>>(x, g, epsilon, momentum, scale, bias, mean, var,
                                              running_mean, running_var, saved_mean,
                                              saved_inv_std, ko);
  PIPERT_LAUNCH_CHECK(op);
  launch_map(ctx, op, g.n * g.c * g.spatial, [=] __device__(int64_t i) {
    const int64_t c = (i / g.spatial) % g.c;
    y[i] = x[i] * ko[2 * c] + ko[2 * c + 1];
  });
}

void pipert_batch_norm_grad_f32(pipert_context *ctx, const float *x, int64_t rank,
                                const int64_t *shape, const float *scale, float epsilon,
                                const float *dy, float *dx, float *dscale, float *dbias,
                                int accumulate) {
  const char *op = "BatchNormalizationGrad";
  const NCS g = nc_split(op, rank, shape);
  if (g.c == 0)
    return;
  // The forward's batch statistics, recomputed (kofs is unused here).
  Scratch saved(ctx, size_t(4 * g.c) * sizeof(float));
  float *saved_mean = saved.as<float>(), *saved_inv_std = saved_mean + g.c;
  float *kofs = saved_mean + 2 * g.c;
  batch_norm_stats_kernel<<<unsigned(std::min<int64_t>(g.c, 65535)), kBlock, 0,
                            stream_of(ctx)>>>(x, g, epsilon, 0.f, scale, scale, nullptr, nullptr,
                                              nullptr, nullptr, saved_mean, saved_inv_std, kofs);
  PIPERT_LAUNCH_CHECK(op);
  Scratch means(ctx, size_t(2 * g.c) * sizeof(float));
  float *mg = means.as<float>();
  batch_norm_grad_stats_kernel<<<unsigned(std::min<int64_t>(g.c, 65535)), kBlock, 0,
                                 stream_of(ctx)>>>(x, g, saved_mean, saved_inv_std, dy, dscale,
                                                   dbias, accumulate, mg);
  PIPERT_LAUNCH_CHECK(op);
  launch_map(ctx, op, g.n * g.c * g.spatial, [=] __device__(int64_t i) {
    const int64_t c = (i / g.spatial) % g.c;
    const float mu = saved_mean[c], inv = saved_inv_std[c];
    const float k = scale[c] * inv;
    dx[i] = formula::batch_norm_dx(dy[i], x[i], mu, inv, k, mg[2 * c], mg[2 * c + 1]);
  });
}


} // extern "C"
