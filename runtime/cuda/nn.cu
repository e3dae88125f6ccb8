//===- nn.cu - GEMM/MatMul, normalisation, conv, pooling, losses (CUDA) ----===//
//
// GEMMs are cuBLAS on row-major data (C^T = B^T A^T in cuBLAS's column-major
// view); batched MatMul uses strided-batched GEMM where the batch strides are
// uniform. Conv is im2col + cuBLAS like the CPU backend (grouped: batched over
// the groups), its input gradient a gather-form col2im (no atomics). Row
// statistics (softmax, layer/batch norm, losses) accumulate in double like the
// CPU kernels (runtime/cpu/norm.cpp, loss.cpp); the per-element formulas are
// shared with them (runtime/core/formulas.h).
//
//===----------------------------------------------------------------------===//
#include "kernels.cuh"
#include "../core/formulas.h"

using namespace pipert::cuda;

namespace {

void check_blas_dim(const char *op, int64_t v) {
  if (v < 0 || v > INT32_MAX)
    pipert_fail("%s: dimension %lld does not fit BLAS's int", op, (long long)v);
}

cublasHandle_t blas(pipert_context *ctx) { return cx(ctx)->blas; }

// Row-major C (m x n, ldc) = alpha op(A) op(B) + beta C over `batch`
// matrices with the given element strides (0: shared).
void gemm_strided(pipert_context *ctx, const char *op, int ta, int tb, int64_t m, int64_t n,
                  int64_t k, float alpha, const float *a, int64_t lda, int64_t sa, const float *b,
                  int64_t ldb, int64_t sb, float beta, float *c, int64_t ldc, int64_t sc,
                  int64_t batch) {
  check_blas_dim(op, m);
  check_blas_dim(op, n);
  check_blas_dim(op, k);
  check_blas_dim(op, batch);
  if (m == 0 || n == 0 || batch == 0)
    return;
  if (k == 0) {
    // C = beta C (cuBLAS is not asked to handle an empty inner dimension).
    const int64_t total = batch * m * n;
    launch_map(ctx, op, total, [=] __device__(int64_t i) {
      const int64_t bi = i / (m * n), r = (i / n) % m, col = i % n;
      float *p = c + bi * sc + r * ldc + col;
      *p = beta == 0.f ? 0.f : beta * *p;
    });
    return;
  }
  const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batch == 1)
    PIPERT_CUBLAS_CHECK(cublasSgemm(blas(ctx), opb, opa, int(n), int(m), int(k), &alpha, b,
                                    int(ldb), a, int(lda), &beta, c, int(ldc)));
  else
    PIPERT_CUBLAS_CHECK(cublasSgemmStridedBatched(blas(ctx), opb, opa, int(n), int(m), int(k),
                                                  &alpha, b, int(ldb), sb, a, int(lda), sa,
                                                  &beta, c, int(ldc), sc, int(batch)));
}

// Threads cooperating on one row of a row-wise reduction: a warp or a block.
template <int G> __device__ __forceinline__ double group_sum(double v, double *shared) {
  if (G == 32) {
    v = warp_sum(v);
    return __shfl_sync(0xffffffffu, v, 0);
  }
  return block_sum(v, shared);
}
template <int G> __device__ __forceinline__ float group_max(float v, float *shared) {
  if (G == 32) {
    v = warp_max(v);
    return __shfl_sync(0xffffffffu, v, 0);
  }
  return block_max(v, shared, -INFINITY);
}

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
                                       const float *__restrict__ dy, float *__restrict__ dx) {
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
                                             float *__restrict__ dbias) {
  PIPERT_GRID_STRIDE(j, cols) {
    float ds = 0.f, db = 0.f;
    for (int64_t r = 0; r < rows; ++r) {
      const float g = dy[r * cols + j];
      ds += formula::layer_norm_dscale_term(g, x[r * cols + j], mean[r], inv_std[r]);
      db += g;
    }
    if (dscale)
      dscale[j] = ds;
    if (dbias)
      dbias[j] = db;
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
                                             float *dbias, float *mg) {
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
        dscale[c] = float(sgx);
      if (dbias)
        dbias[c] = float(sg);
      mg[2 * c] = float(sg / double(count));
      mg[2 * c + 1] = float(sgx / double(count));
    }
  }
}

//===------------------------------ convolution ---------------------------===//


// col[(c*kh + i)*kw + j][oy*ow + ox] = x[c][oy*sh - pt + i*dh][ox*sw - pl + j*dw]
// for all C channels of one image (group g's rows are [g K, (g+1) K)).
__global__ void im2col_kernel(ConvGeom g, const float *__restrict__ x, float *__restrict__ col) {
  const int64_t P = g.oh * g.ow;
  const int64_t total = g.c * g.kh * g.kw * P;
  PIPERT_GRID_STRIDE(t, total) {
    const int64_t p = t % P, row = t / P;
    const int64_t ox = p % g.ow, oy = p / g.ow;
    const int64_t j = row % g.kw, i = (row / g.kw) % g.kh, c = row / (g.kw * g.kh);
    const int64_t iy = oy * g.sh - g.pt + i * g.dh, ix = ox * g.sw - g.pl + j * g.dw;
    col[t] = (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) ? x[(c * g.h + iy) * g.w + ix] : 0.f;
  }
}

// The adjoint of im2col in gather form: each dx element sums the col entries
// that read it.
__global__ void col2im_kernel(ConvGeom g, const float *__restrict__ col, float *__restrict__ dx) {
  const int64_t P = g.oh * g.ow;
  const int64_t total = g.c * g.h * g.w;
  PIPERT_GRID_STRIDE(t, total) {
    const int64_t ix = t % g.w, iy = (t / g.w) % g.h, c = t / (g.w * g.h);
    float acc = 0.f;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t ny = iy + g.pt - i * g.dh;
      if (ny < 0 || ny % g.sh != 0)
        continue;
      const int64_t oy = ny / g.sh;
      if (oy >= g.oh)
        continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t nx = ix + g.pl - j * g.dw;
        if (nx < 0 || nx % g.sw != 0)
          continue;
        const int64_t ox = nx / g.sw;
        if (ox >= g.ow)
          continue;
        acc += col[((c * g.kh + i) * g.kw + j) * P + oy * g.ow + ox];
      }
    }
    dx[t] = acc;
  }
}

//===------------------------------ pooling -------------------------------===//

// First maximum of window (p, oy, ox): its flat index within the plane, or -1.
__device__ __forceinline__ int64_t window_argmax(const PoolGeom &g, const float *xp, int64_t oy,
                                                 int64_t ox, float *best_out) {
  float best = -INFINITY;
  int64_t arg = -1;
  for (int64_t i = 0; i < g.kh; ++i) {
    const int64_t iy = oy * g.sh - g.pt + i * g.dh;
    if (iy < 0 || iy >= g.h)
      continue;
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t ix = ox * g.sw - g.pl + j * g.dw;
      if (ix < 0 || ix >= g.w)
        continue;
      const float v = xp[iy * g.w + ix];
      if (arg < 0 || v > best) {
        best = v;
        arg = iy * g.w + ix;
      }
    }
  }
  *best_out = best;
  return arg;
}

//===------------------------------ losses --------------------------------===//

// Batch, classes, spatial (prod of d...).
using LossGeom = NCS;

// Weight of entry i (0 when ignored), raising out-of-range labels.
__device__ __forceinline__ float entry_weight(const LossGeom &g, const int64_t *labels,
                                              const float *weights, int has_ii, int64_t ii,
                                              int64_t i, DeviceError *err) {
  const int64_t l = labels[i];
  bool bad;
  const float w = formula::label_weight(l, g.c, weights, has_ii, ii, bad);
  if (bad)
    raise_error(err, kErrLabel, (long long)l, (long long)g.c);
  return w;
}

// One block: total = sum_i -w_i logp[label_i] (when logp) and wsum = sum_i w_i;
// writes the reduced loss (when loss) and wsum (when wsum_out).
__global__ void loss_sums_kernel(LossGeom g, const int64_t *__restrict__ labels,
                                 const float *__restrict__ weights, int has_ii, int64_t ii,
                                 const float *__restrict__ logp, int reduction, DeviceError *err,
                                 float *loss, double *wsum_out) {
  __shared__ double dsh[32];
  double total = 0, wsum = 0;
  for (int64_t i = threadIdx.x; i < g.n * g.spatial; i += blockDim.x) {
    const float w = entry_weight(g, labels, weights, has_ii, ii, i, err);
    if (logp && w != 0.f) {
      const int64_t n = i / g.spatial, s = i % g.spatial;
      total += -w * logp[(n * g.c + labels[i]) * g.spatial + s];
    }
    wsum += w;
  }
  total = block_sum(total, dsh);
  wsum = block_sum(wsum, dsh);
  if (threadIdx.x == 0) {
    if (loss)
      *loss = formula::reduced_loss(reduction, total, wsum);
    if (wsum_out)
      *wsum_out = wsum;
  }
}

void nll_forward(pipert_context *ctx, const char *op, const float *logp, const LossGeom &g,
                 const int64_t *labels, const float *weights, int has_ii, int64_t ii,
                 pipert_reduction reduction, float *loss) {
  formula::check_reduction(op, reduction);
  DeviceError *err = cx(ctx)->err;
  if (reduction == PIPERT_REDUCTION_NONE) {
    const LossGeom gg = g;
    launch_map(ctx, op, g.n * g.spatial, [=] __device__(int64_t i) {
      const float w = entry_weight(gg, labels, weights, has_ii, ii, i, err);
      const int64_t n = i / gg.spatial, s = i % gg.spatial;
      loss[i] = w == 0.f ? 0.f : -w * logp[(n * gg.c + labels[i]) * gg.spatial + s];
    });
    return;
  }
  loss_sums_kernel<<<1, kBlock, 0, stream_of(ctx)>>>(g, labels, weights, has_ii, ii, logp,
                                                   int(reduction), err, loss, nullptr);
  PIPERT_LAUNCH_CHECK(op);
}

// The device scalar sum of weights for mean reductions (nullptr otherwise).
double *loss_weight_sum(pipert_context *ctx, const char *op, Scratch &tmp, const LossGeom &g,
                        const int64_t *labels, const float *weights, int has_ii, int64_t ii,
                        pipert_reduction reduction) {
  if (reduction != PIPERT_REDUCTION_MEAN)
    return nullptr;
  loss_sums_kernel<<<1, kBlock, 0, stream_of(ctx)>>>(g, labels, weights, has_ii, ii, nullptr,
                                                   int(reduction), cx(ctx)->err, nullptr,
                                                   tmp.as<double>());
  PIPERT_LAUNCH_CHECK(op);
  return tmp.as<double>();
}

} // namespace

extern "C" {

//===------------------------------ linear algebra ------------------------===//

void pipert_sgemm(pipert_context *ctx, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                  float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                  float beta, float *c, int64_t ldc) {
  check_blas_dim("sgemm", lda);
  check_blas_dim("sgemm", ldb);
  check_blas_dim("sgemm", ldc);
  gemm_strided(ctx, "sgemm", trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc,
               0, 1);
}

void pipert_gemm_f32(pipert_context *ctx, const float *a, const float *b, const float *c,
                     int64_t c_rank, const int64_t *c_shape, int64_t m, int64_t n, int64_t k,
                     int trans_a, int trans_b, float alpha, float beta, float *y) {
  float beta_eff = 0.f;
  if (c && beta != 0.f) {
    if (c_rank > 2)
      pipert_fail("Gemm: C has rank %lld, at most 2 allowed", (long long)c_rank);
    const int64_t cm = c_rank == 2 ? c_shape[0] : 1;
    const int64_t cn = c_rank >= 1 ? c_shape[c_rank - 1] : 1;
    if ((cm != 1 && cm != m) || (cn != 1 && cn != n))
      pipert_fail("Gemm: C of shape (%lld, %lld) does not broadcast to (%lld, %lld)",
                  (long long)cm, (long long)cn, (long long)m, (long long)n);
    launch_map(ctx, "Gemm", m * n, [=] __device__(int64_t i) {
      const int64_t r = i / n, col = i % n;
      y[i] = beta * c[(cm == 1 ? 0 : r * cn) + (cn == 1 ? 0 : col)];
    });
    beta_eff = 1.f;
  }
  gemm_strided(ctx, "Gemm", trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, 0, b,
               trans_b ? k : n, 0, beta_eff, y, n, 0, 1);
}

void pipert_matmul_t_f32(pipert_context *ctx, const float *a, int64_t ra, const int64_t *sa,
                         int trans_a, const float *b, int64_t rb, const int64_t *sb, int trans_b,
                         float *y) {
  const char *op = "MatMul";
  check_rank(op, ra);
  check_rank(op, rb);
  if (ra < 2 || rb < 2)
    pipert_fail("%s: transposed operands need rank >= 2", op);
  const int64_t m = trans_a ? sa[ra - 1] : sa[ra - 2];
  const int64_t ka = trans_a ? sa[ra - 2] : sa[ra - 1];
  const int64_t kb = trans_b ? sb[rb - 1] : sb[rb - 2];
  const int64_t n = trans_b ? sb[rb - 2] : sb[rb - 1];
  if (ka != kb)
    pipert_fail("%s: inner dimensions differ (%lld vs %lld)", op, (long long)ka, (long long)kb);
  const int64_t k = ka;
  const int64_t lda = sa[ra - 1], ldb = sb[rb - 1];
  int64_t batch[kMaxRank];
  const int64_t rbatch = broadcast_shape(op, ra - 2, sa, rb - 2, sb, batch);
  const int64_t nbatch = numel(rbatch, batch);
  const int64_t na = numel(ra - 2, sa), nb = numel(rb - 2, sb);
  if (nbatch == 0)
    return;
  // B shared by every batch of a non-transposed A: one tall GEMM.
  if (nb == 1 && !trans_a && na == nbatch) {
    gemm_strided(ctx, op, 0, trans_b, m * nbatch, n, k, 1.f, a, lda, 0, b, ldb, 0, 0.f, y, n, 0,
                 1);
    return;
  }
  // Uniform batch strides (each operand either has every batch or one):
  // one strided-batched GEMM.
  if ((na == nbatch || na == 1) && (nb == nbatch || nb == 1)) {
    gemm_strided(ctx, op, trans_a, trans_b, m, n, k, 1.f, a, lda, na == 1 ? 0 : m * k, b, ldb,
                 nb == 1 ? 0 : k * n, 0.f, y, n, m * n, nbatch);
    return;
  }
  // General broadcast of the batch axes: one GEMM per batch.
  int64_t strides[2][kMaxRank];
  broadcast_strides(ra - 2, sa, rbatch, strides[0]);
  broadcast_strides(rb - 2, sb, rbatch, strides[1]);
  int64_t idx[kMaxRank] = {};
  for (int64_t bi = 0; bi < nbatch; ++bi) {
    int64_t oa = 0, ob = 0;
    for (int64_t d = 0; d < rbatch; ++d) {
      oa += idx[d] * strides[0][d];
      ob += idx[d] * strides[1][d];
    }
    gemm_strided(ctx, op, trans_a, trans_b, m, n, k, 1.f, a + oa * m * k, lda, 0, b + ob * k * n,
                 ldb, 0, 0.f, y + bi * m * n, n, 0, 1);
    for (int64_t d = rbatch - 1; d >= 0; --d) {
      if (++idx[d] < batch[d])
        break;
      idx[d] = 0;
    }
  }
}

void pipert_matmul_f32(pipert_context *ctx, const float *a, int64_t ra, const int64_t *sa,
                       const float *b, int64_t rb, const int64_t *sb, float *y) {
  int64_t sa2[kMaxRank], sb2[kMaxRank];
  int64_t ra2 = matmul_promote("MatMul", true, ra, sa, sa2);
  int64_t rb2 = matmul_promote("MatMul", false, rb, sb, sb2);
  pipert_matmul_t_f32(ctx, a, ra2, sa2, 0, b, rb2, sb2, 0, y);
}

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
                                float *dx, float *dscale, float *dbias) {
  const char *op = "LayerNormalizationGrad";
  check_rank(op, rank);
  const int64_t ax = norm_axis(op, axis, rank);
  const int64_t rows = numel(ax, shape), cols = numel(rank - ax, shape + ax);
  if (cols == 0)
    return;
  cudaStream_t st = stream_of(ctx);
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
  if (dscale || dbias) {
    layer_norm_param_grad_kernel<<<grid_for(ctx, cols), kBlock, 0, st>>>(
        x, rows, cols, mean, inv_std_dev, dy, dscale, dbias);
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
                                const int64_t *shape, const float *scale, const float *saved_mean,
                                const float *saved_inv_std, const float *dy, float *dx,
                                float *dscale, float *dbias) {
  const char *op = "BatchNormalizationGrad";
  const NCS g = nc_split(op, rank, shape);
  if (g.c == 0)
    return;
  Scratch means(ctx, size_t(2 * g.c) * sizeof(float));
  float *mg = means.as<float>();
  batch_norm_grad_stats_kernel<<<unsigned(std::min<int64_t>(g.c, 65535)), kBlock, 0,
                                 stream_of(ctx)>>>(x, g, saved_mean, saved_inv_std, dy, dscale,
                                                   dbias, mg);
  PIPERT_LAUNCH_CHECK(op);
  launch_map(ctx, op, g.n * g.c * g.spatial, [=] __device__(int64_t i) {
    const int64_t c = (i / g.spatial) % g.c;
    const float mu = saved_mean[c], inv = saved_inv_std[c];
    const float k = scale[c] * inv;
    dx[i] = formula::batch_norm_dx(dy[i], x[i], mu, inv, k, mg[2 * c], mg[2 * c + 1]);
  });
}

//===------------------------------ convolution ---------------------------===//

void pipert_conv2d_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                       const float *w, const int64_t w_shape[4], const float *b,
                       const int64_t pads[4], const int64_t strides[2],
                       const int64_t dilations[2], int64_t group, float *y) {
  const char *op = "Conv";
  const ConvGeom g = conv_geom(op, x_shape, w_shape, pads, strides, dilations, group);
  const int64_t K = g.col_rows(), P = g.col_cols();
  Scratch col(ctx, g.pointwise() ? 0 : size_t(g.c * g.kh * g.kw * P) * sizeof(float));
  for (int64_t n = 0; n < g.n; ++n) {
    const float *xn = x + n * g.c * g.h * g.w;
    const float *src = xn;
    if (!g.pointwise()) {
      im2col_kernel<<<grid_for(ctx, g.c * g.kh * g.kw * P), kBlock, 0, stream_of(ctx)>>>(
          g, xn, col.as<float>());
      PIPERT_LAUNCH_CHECK(op);
      src = col.as<float>();
    }
    // Y_g (mg x P) = W_g (mg x K) * col_g (K x P), for every group at once.
    gemm_strided(ctx, op, 0, 0, g.mg, P, K, 1.f, w, K, g.mg * K, src, P, K * P, 0.f,
                 y + n * g.m * P, P, g.mg * P, g.group);
  }
  if (b) {
    const int64_t M = g.m;
    launch_map(ctx, op, g.n * g.m * P,
               [=] __device__(int64_t i) { y[i] += b[(i / P) % M]; });
  }
}

void pipert_conv2d_grad_input_f32(pipert_context *ctx, const float *dy, const float *w,
                                  const int64_t w_shape[4], const int64_t x_shape[4],
                                  const int64_t pads[4], const int64_t strides[2],
                                  const int64_t dilations[2], int64_t group, float *dx) {
  const char *op = "ConvGradInput";
  const ConvGeom g = conv_geom(op, x_shape, w_shape, pads, strides, dilations, group);
  const int64_t K = g.col_rows(), P = g.col_cols();
  Scratch col(ctx, g.pointwise() ? 0 : size_t(g.c * g.kh * g.kw * P) * sizeof(float));
  for (int64_t n = 0; n < g.n; ++n) {
    const float *dyn = dy + n * g.m * P;
    float *dxn = dx + n * g.c * g.h * g.w;
    // col_g (K x P) = W_g^T (K x mg) * dY_g (mg x P); pointwise: straight into dx.
    float *dst = g.pointwise() ? dxn : col.as<float>();
    gemm_strided(ctx, op, 1, 0, K, P, g.mg, 1.f, w, K, g.mg * K, dyn, P, g.mg * P, 0.f, dst, P,
                 K * P, g.group);
    if (!g.pointwise()) {
      col2im_kernel<<<grid_for(ctx, g.c * g.h * g.w), kBlock, 0, stream_of(ctx)>>>(
          g, col.as<float>(), dxn);
      PIPERT_LAUNCH_CHECK(op);
    }
  }
}

void pipert_conv2d_grad_weight_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                                   const float *dy, const int64_t w_shape[4],
                                   const int64_t pads[4], const int64_t strides[2],
                                   const int64_t dilations[2], int64_t group, float *dw) {
  const char *op = "ConvGradWeight";
  const ConvGeom g = conv_geom(op, x_shape, w_shape, pads, strides, dilations, group);
  const int64_t K = g.col_rows(), P = g.col_cols();
  if (g.n == 0) {
    pipert_memset_zero(ctx, dw, size_t(g.m * K) * sizeof(float));
    return;
  }
  Scratch col(ctx, g.pointwise() ? 0 : size_t(g.c * g.kh * g.kw * P) * sizeof(float));
  for (int64_t n = 0; n < g.n; ++n) {
    const float *xn = x + n * g.c * g.h * g.w;
    const float *src = xn;
    if (!g.pointwise()) {
      im2col_kernel<<<grid_for(ctx, g.c * g.kh * g.kw * P), kBlock, 0, stream_of(ctx)>>>(
          g, xn, col.as<float>());
      PIPERT_LAUNCH_CHECK(op);
      src = col.as<float>();
    }
    // dW_g (mg x K) += dY_g (mg x P) * col_g^T (P x K)
    gemm_strided(ctx, op, 0, 1, g.mg, K, P, 1.f, dy + n * g.m * P, P, g.mg * P, src, P, K * P,
                 n == 0 ? 0.f : 1.f, dw, K, g.mg * K, g.group);
  }
}

void pipert_conv2d_grad_bias_f32(pipert_context *ctx, const float *dy, const int64_t dy_shape[4],
                                 float *db) {
  const int64_t shape[3] = {dy_shape[0], dy_shape[1], dy_shape[2] * dy_shape[3]};
  const bool reduced[3] = {true, false, true};
  reduce_axes(ctx, "ConvGradBias", PIPERT_REDUCE_SUM, dy, 3, shape, reduced, 1.f, db);
}

//===------------------------------ pooling -------------------------------===//

int64_t pipert_pool_output_dim(int64_t in, int64_t kernel, int64_t pad_begin, int64_t pad_end,
                               int64_t stride, int64_t dilation, int ceil_mode) {
  const int64_t span = in + pad_begin + pad_end - (dilation * (kernel - 1) + 1);
  if (span < 0)
    return 0;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad_begin)
    --out;
  return out;
}

void pipert_maxpool2d_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                          const int64_t kernel[2], const int64_t pads[4],
                          const int64_t strides[2], const int64_t dilations[2], int ceil_mode,
                          float *y, int64_t *indices) {
  const PoolGeom g = pool_geom("MaxPool", x_shape, kernel, pads, strides, dilations, ceil_mode);
  launch_map(ctx, "MaxPool", g.n * g.c * g.oh * g.ow, [=] __device__(int64_t o) {
    const int64_t ox = o % g.ow, oy = (o / g.ow) % g.oh, p = o / (g.ow * g.oh);
    float best;
    const int64_t arg = window_argmax(g, x + p * g.h * g.w, oy, ox, &best);
    y[o] = best;
    if (indices)
      indices[o] = arg < 0 ? -1 : p * g.h * g.w + arg;
  });
}

void pipert_maxpool2d_grad_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                               const float *dy, const int64_t kernel[2], const int64_t pads[4],
                               const int64_t strides[2], const int64_t dilations[2],
                               int ceil_mode, float *dx) {
  const PoolGeom g =
      pool_geom("MaxPoolGrad", x_shape, kernel, pads, strides, dilations, ceil_mode);
  pipert_memset_zero(ctx, dx, size_t(g.n * g.c * g.h * g.w) * sizeof(float));
  launch_map(ctx, "MaxPoolGrad", g.n * g.c * g.oh * g.ow, [=] __device__(int64_t o) {
    const int64_t ox = o % g.ow, oy = (o / g.ow) % g.oh, p = o / (g.ow * g.oh);
    float best;
    const int64_t arg = window_argmax(g, x + p * g.h * g.w, oy, ox, &best);
    if (arg >= 0)
      atomicAdd(dx + p * g.h * g.w + arg, dy[o]);
  });
}

void pipert_avgpool2d_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                          const int64_t kernel[2], const int64_t pads[4],
                          const int64_t strides[2], int ceil_mode, int count_include_pad,
                          float *y) {
  const PoolGeom g =
      pool_geom("AveragePool", x_shape, kernel, pads, strides, nullptr, ceil_mode);
  launch_map(ctx, "AveragePool", g.n * g.c * g.oh * g.ow, [=] __device__(int64_t o) {
    const int64_t ox = o % g.ow, oy = (o / g.ow) % g.oh, p = o / (g.ow * g.oh);
    const float *xp = x + p * g.h * g.w;
    float s = 0.f;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t iy = oy * g.sh - g.pt + i;
      if (iy < 0 || iy >= g.h)
        continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t ix = ox * g.sw - g.pl + j;
        if (ix >= 0 && ix < g.w)
          s += xp[iy * g.w + ix];
      }
    }
    const int64_t d = formula::avg_pool_divisor(g, oy, ox, count_include_pad);
    y[o] = d > 0 ? s / float(d) : 0.f;
  });
}

void pipert_avgpool2d_grad_f32(pipert_context *ctx, const float *dy, const int64_t x_shape[4],
                               const int64_t kernel[2], const int64_t pads[4],
                               const int64_t strides[2], int ceil_mode, int count_include_pad,
                               float *dx) {
  const PoolGeom g =
      pool_geom("AveragePoolGrad", x_shape, kernel, pads, strides, nullptr, ceil_mode);
  pipert_memset_zero(ctx, dx, size_t(g.n * g.c * g.h * g.w) * sizeof(float));
  launch_map(ctx, "AveragePoolGrad", g.n * g.c * g.oh * g.ow, [=] __device__(int64_t o) {
    const int64_t ox = o % g.ow, oy = (o / g.ow) % g.oh, p = o / (g.ow * g.oh);
    const int64_t d = formula::avg_pool_divisor(g, oy, ox, count_include_pad);
    if (d <= 0)
      return;
    const float v = dy[o] / float(d);
    float *dp = dx + p * g.h * g.w;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t iy = oy * g.sh - g.pt + i;
      if (iy < 0 || iy >= g.h)
        continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t ix = ox * g.sw - g.pl + j;
        if (ix >= 0 && ix < g.w)
          atomicAdd(dp + iy * g.w + ix, v);
      }
    }
  });
}

void pipert_global_avgpool_f32(pipert_context *ctx, const float *x, int64_t rank,
                               const int64_t *shape, float *y) {
  if (rank < 3)
    pipert_fail("GlobalAveragePool: input must have rank >= 3, got %lld", (long long)rank);
  check_rank("GlobalAveragePool", rank);
  const int64_t flat[3] = {shape[0], shape[1], numel(rank - 2, shape + 2)};
  const bool reduced[3] = {false, false, true};
  reduce_axes(ctx, "GlobalAveragePool", PIPERT_REDUCE_MEAN, x, 3, flat, reduced, 1.f, y);
}

void pipert_global_avgpool_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                                    const int64_t *x_shape, float *dx) {
  if (rank < 3)
    pipert_fail("GlobalAveragePoolGrad: input must have rank >= 3, got %lld", (long long)rank);
  const int64_t planes = x_shape[0] * x_shape[1], s = numel(rank - 2, x_shape + 2);
  launch_map(ctx, "GlobalAveragePoolGrad", planes * s,
             [=] __device__(int64_t i) { dx[i] = dy[i / s] / float(s); });
}

//===------------------------------ losses --------------------------------===//

void pipert_softmax_cross_entropy_loss_f32(pipert_context *ctx, const float *scores, int64_t rank,
                                           const int64_t *shape, const int64_t *labels,
                                           const float *weights, int has_ignore_index,
                                           int64_t ignore_index, pipert_reduction reduction,
                                           float *loss, float *log_prob) {
  const char *op = "SoftmaxCrossEntropyLoss";
  const LossGeom g = nc_split(op, rank, shape);
  formula::check_reduction(op, reduction);
  Scratch own(ctx, log_prob ? 0 : size_t(numel(rank, shape)) * sizeof(float));
  float *lp = log_prob ? log_prob : own.as<float>();
  pipert_log_softmax_f32(ctx, scores, rank, shape, 1, lp);
  nll_forward(ctx, op, lp, g, labels, weights, has_ignore_index, ignore_index, reduction, loss);
}

void pipert_softmax_cross_entropy_loss_grad_f32(
    pipert_context *ctx, const float *dloss, const float *log_prob, int64_t rank,
    const int64_t *shape, const int64_t *labels, const float *weights, int has_ignore_index,
    int64_t ignore_index, pipert_reduction reduction, float *dscores) {
  const char *op = "SoftmaxCrossEntropyLossGrad";
  const LossGeom g = nc_split(op, rank, shape);
  formula::check_reduction(op, reduction);
  Scratch tmp(ctx, sizeof(double));
  const double *wsum = loss_weight_sum(ctx, op, tmp, g, labels, weights, has_ignore_index,
                                       ignore_index, reduction);
  DeviceError *err = cx(ctx)->err;
  const int red = int(reduction);
  const int has_ii = has_ignore_index;
  const int64_t ii = ignore_index;
  // d loss_i / d scores[n, c, s] = w_i * scale_i * (softmax_c - [c == label_i]).
  launch_map(ctx, op, g.n * g.c * g.spatial, [=] __device__(int64_t t) {
    const int64_t s = t % g.spatial, c = (t / g.spatial) % g.c, n = t / (g.spatial * g.c);
    const int64_t e = n * g.spatial + s;
    const float w = entry_weight(g, labels, weights, has_ii, ii, e, err);
    const float sc = formula::reduction_scale(red, dloss, e, wsum);
    dscores[t] = formula::softmax_xent_grad(w, sc, log_prob[t], labels[e] == c);
  });
}

void pipert_nll_loss_f32(pipert_context *ctx, const float *input, int64_t rank,
                         const int64_t *shape, const int64_t *labels, const float *weights,
                         int has_ignore_index, int64_t ignore_index, pipert_reduction reduction,
                         float *loss) {
  const char *op = "NegativeLogLikelihoodLoss";
  const LossGeom g = nc_split(op, rank, shape);
  nll_forward(ctx, op, input, g, labels, weights, has_ignore_index, ignore_index, reduction, loss);
}

void pipert_nll_loss_grad_f32(pipert_context *ctx, const float *dloss, int64_t rank,
                              const int64_t *shape, const int64_t *labels, const float *weights,
                              int has_ignore_index, int64_t ignore_index,
                              pipert_reduction reduction, float *dinput) {
  const char *op = "NegativeLogLikelihoodLossGrad";
  const LossGeom g = nc_split(op, rank, shape);
  formula::check_reduction(op, reduction);
  Scratch tmp(ctx, sizeof(double));
  const double *wsum = loss_weight_sum(ctx, op, tmp, g, labels, weights, has_ignore_index,
                                       ignore_index, reduction);
  pipert_memset_zero(ctx, dinput, size_t(numel(rank, shape)) * sizeof(float));
  DeviceError *err = cx(ctx)->err;
  const int red = int(reduction);
  const int has_ii = has_ignore_index;
  const int64_t ii = ignore_index;
  launch_map(ctx, op, g.n * g.spatial, [=] __device__(int64_t e) {
    const float w = entry_weight(g, labels, weights, has_ii, ii, e, err);
    if (w == 0.f)
      return;
    const int64_t n = e / g.spatial, s = e % g.spatial;
    dinput[(n * g.c + labels[e]) * g.spatial + s] =
        -w * formula::reduction_scale(red, dloss, e, wsum);
  });
}

} // extern "C"
