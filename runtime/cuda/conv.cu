//===- conv.cu - convolution and pooling (CUDA) ------------------------------===//
//
// im2col + cuBLAS like runtime/cpu/conv.cpp (grouped: batched over the
// groups); the input gradient a gather-form col2im (no atomics).
//
//===----------------------------------------------------------------------===//
#include "nn_util.cuh"

using namespace pipert::cuda;
using namespace pipert::cuda::nn;

namespace {

//===------------------------------ convolution ---------------------------===//


// col[(c*kh + i)*kw + j][s*P + oy*ow + ox] = x[s][c][oy*sh - pt + i*dh][ox*sw - pl + j*dw]
// for all C channels of `cnt` images side by side (row stride cnt * P;
// group g's rows are [g K, (g+1) K)).
__global__ void im2col_kernel(ConvGeom g, const float *__restrict__ x, float *__restrict__ col,
                              int64_t cnt) {
  const int64_t P = g.oh * g.ow, ld = cnt * P;
  const int64_t total = g.c * g.kh * g.kw * ld;
  PIPERT_GRID_STRIDE(t, total) {
    const int64_t q = t % ld, row = t / ld;
    const int64_t s = q / P, p = q % P;
    const int64_t ox = p % g.ow, oy = p / g.ow;
    const int64_t j = row % g.kw, i = (row / g.kw) % g.kh, c = row / (g.kw * g.kh);
    const int64_t iy = oy * g.sh - g.pt + i * g.dh, ix = ox * g.sw - g.pl + j * g.dw;
    col[t] = (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
                 ? x[((s * g.c + c) * g.h + iy) * g.w + ix]
                 : 0.f;
  }
}

// The adjoint of im2col in gather form: each dx element of the `cnt`
// images sums the col entries that read it.
__global__ void col2im_kernel(ConvGeom g, const float *__restrict__ col, float *__restrict__ dx,
                              int64_t cnt) {
  const int64_t P = g.oh * g.ow, ld = cnt * P;
  const int64_t total = cnt * g.c * g.h * g.w;
  PIPERT_GRID_STRIDE(t, total) {
    const int64_t ix = t % g.w, iy = (t / g.w) % g.h, c = (t / (g.w * g.h)) % g.c;
    const int64_t s = t / (g.w * g.h * g.c);
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
        acc += col[((c * g.kh + i) * g.kw + j) * ld + s * P + oy * g.ow + ox];
      }
    }
    dx[t] = acc;
  }
}

// Samples per product (conv_samples, shape_util.h): a GPU wants wide
// products and few launches, so up to 8192 columns within 64 MB of col.
int64_t conv_samples(const ConvGeom &g) { return conv_samples(g, 8192, int64_t(64) << 20); }

// im2col of `cnt` samples from x, side by side in col.
void im2col_samples(pipert_context *ctx, const char *op, const ConvGeom &g, const float *x,
                    int64_t cnt, float *col) {
  im2col_kernel<<<grid_for(ctx, g.c * g.kh * g.kw * cnt * g.oh * g.ow), kBlock, 0,
                  stream_of(ctx)>>>(g, x, col, cnt);
  PIPERT_LAUNCH_CHECK(op);
}

// Between a tensor's (cnt, rows, P) layout and a (rows, cnt * P) matrix.
void gather_samples(pipert_context *ctx, const char *op, const float *src, int64_t cnt,
                    int64_t rows, int64_t P, float *dst) {
  const int64_t ld = cnt * P;
  launch_map(ctx, op, rows * ld, [=] __device__(int64_t i) {
    const int64_t r = i / ld, q = i % ld;
    dst[i] = src[((q / P) * rows + r) * P + q % P];
  });
}

void scatter_samples(pipert_context *ctx, const char *op, const float *src, int64_t cnt,
                     int64_t rows, int64_t P, float *dst) {
  const int64_t ld = cnt * P;
  launch_map(ctx, op, cnt * rows * P, [=] __device__(int64_t i) {
    const int64_t s = i / (rows * P), r = (i / P) % rows;
    dst[i] = src[r * ld + s * P + i % P];
  });
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


} // namespace

extern "C" {

//===------------------------------ convolution ---------------------------===//

void pipert_conv2d_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                       const float *w, const int64_t w_shape[4], const float *b,
                       const int64_t pads[4], const int64_t strides[2],
                       const int64_t dilations[2], int64_t group, float *y) {
  const char *op = "Conv";
  const ConvGeom g = conv_geom(op, x_shape, w_shape, pads, strides, dilations, group);
  const int64_t K = g.col_rows(), P = g.col_cols();
  if (const int64_t nb = conv_samples(g); nb > 1) {
    // Y_g (mg x cnt*P) = W_g (mg x K) * col_g (K x cnt*P) for every group,
    // then each sample's rows to its place.
    Scratch col(ctx, size_t(g.c * g.kh * g.kw * nb * P) * sizeof(float));
    Scratch out(ctx, size_t(g.m * nb * P) * sizeof(float));
    for (int64_t n0 = 0; n0 < g.n; n0 += nb) {
      const int64_t cnt = std::min(nb, g.n - n0), cols = cnt * P;
      im2col_samples(ctx, op, g, x + n0 * g.c * g.h * g.w, cnt, col.as<float>());
      gemm_strided(ctx, op, 0, 0, g.mg, cols, K, 1.f, w, K, g.mg * K, col.as<float>(), cols,
                   K * cols, 0.f, out.as<float>(), cols, g.mg * cols, g.group);
      scatter_samples(ctx, op, out.as<float>(), cnt, g.m, P, y + n0 * g.m * P);
    }
  } else {
    Scratch col(ctx, g.pointwise() ? 0 : size_t(g.c * g.kh * g.kw * P) * sizeof(float));
    for (int64_t n = 0; n < g.n; ++n) {
      const float *xn = x + n * g.c * g.h * g.w;
      const float *src = xn;
      if (!g.pointwise()) {
        im2col_samples(ctx, op, g, xn, 1, col.as<float>());
        src = col.as<float>();
      }
      // Y_g (mg x P) = W_g (mg x K) * col_g (K x P), for every group at once.
      gemm_strided(ctx, op, 0, 0, g.mg, P, K, 1.f, w, K, g.mg * K, src, P, K * P, 0.f,
                   y + n * g.m * P, P, g.mg * P, g.group);
    }
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
  if (const int64_t nb = conv_samples(g); nb > 1) {
    // col_g (K x cnt*P) = W_g^T (K x mg) * dY_g (mg x cnt*P), then each
    // sample's dx gathered from its columns.
    Scratch col(ctx, size_t(g.c * g.kh * g.kw * nb * P) * sizeof(float));
    Scratch dyb(ctx, size_t(g.m * nb * P) * sizeof(float));
    for (int64_t n0 = 0; n0 < g.n; n0 += nb) {
      const int64_t cnt = std::min(nb, g.n - n0), cols = cnt * P;
      gather_samples(ctx, op, dy + n0 * g.m * P, cnt, g.m, P, dyb.as<float>());
      gemm_strided(ctx, op, 1, 0, K, cols, g.mg, 1.f, w, K, g.mg * K, dyb.as<float>(), cols,
                   g.mg * cols, 0.f, col.as<float>(), cols, K * cols, g.group);
      col2im_kernel<<<grid_for(ctx, cnt * g.c * g.h * g.w), kBlock, 0, stream_of(ctx)>>>(
          g, col.as<float>(), dx + n0 * g.c * g.h * g.w, cnt);
      PIPERT_LAUNCH_CHECK(op);
    }
    return;
  }
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
          g, col.as<float>(), dxn, 1);
      PIPERT_LAUNCH_CHECK(op);
    }
  }
}

void pipert_conv2d_grad_weight_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                                   const float *dy, const int64_t w_shape[4],
                                   const int64_t pads[4], const int64_t strides[2],
                                   const int64_t dilations[2], int64_t group, float *dw,
                                   int accumulate) {
  const char *op = "ConvGradWeight";
  const ConvGeom g = conv_geom(op, x_shape, w_shape, pads, strides, dilations, group);
  const int64_t K = g.col_rows(), P = g.col_cols();
  // An accumulated gradient is computed apart, then added: the bits of the
  // gradient and an Add after it.
  Scratch own(ctx, accumulate ? size_t(g.m * K) * sizeof(float) : 0);
  float *acc = nullptr;
  if (accumulate) {
    acc = dw;
    dw = own.as<float>();
  }
  if (g.n == 0)
    pipert_memset_zero(ctx, dw, size_t(g.m * K) * sizeof(float));
  if (const int64_t nb = conv_samples(g); nb > 1) {
    // dW_g (mg x K) += dY_g (mg x cnt*P) * col_g^T (cnt*P x K)
    Scratch col(ctx, size_t(g.c * g.kh * g.kw * nb * P) * sizeof(float));
    Scratch dyb(ctx, size_t(g.m * nb * P) * sizeof(float));
    for (int64_t n0 = 0; n0 < g.n; n0 += nb) {
      const int64_t cnt = std::min(nb, g.n - n0), cols = cnt * P;
      im2col_samples(ctx, op, g, x + n0 * g.c * g.h * g.w, cnt, col.as<float>());
      gather_samples(ctx, op, dy + n0 * g.m * P, cnt, g.m, P, dyb.as<float>());
      gemm_strided(ctx, op, 0, 1, g.mg, K, cols, 1.f, dyb.as<float>(), cols, g.mg * cols,
                   col.as<float>(), cols, K * cols, n0 == 0 ? 0.f : 1.f, dw, K, g.mg * K,
                   g.group);
    }
  } else {
    Scratch col(ctx, g.pointwise() ? 0 : size_t(g.c * g.kh * g.kw * P) * sizeof(float));
    for (int64_t n = 0; n < g.n; ++n) {
      const float *xn = x + n * g.c * g.h * g.w;
      const float *src = xn;
      if (!g.pointwise()) {
        im2col_samples(ctx, op, g, xn, 1, col.as<float>());
        src = col.as<float>();
      }
      // dW_g (mg x K) += dY_g (mg x P) * col_g^T (P x K)
      gemm_strided(ctx, op, 0, 1, g.mg, K, P, 1.f, dy + n * g.m * P, P, g.mg * P, src, P,
                   K * P, n == 0 ? 0.f : 1.f, dw, K, g.mg * K, g.group);
    }
  }
  if (acc) {
    const float *part = dw;
    launch_map(ctx, op, g.m * K, [=] __device__(int64_t i) { acc[i] += part[i]; });
  }
}

void pipert_conv2d_grad_bias_f32(pipert_context *ctx, const float *dy, const int64_t dy_shape[4],
                                 float *db, int accumulate) {
  const char *op = "ConvGradBias";
  const int64_t shape[3] = {dy_shape[0], dy_shape[1], dy_shape[2] * dy_shape[3]};
  const bool reduced[3] = {true, false, true};
  Scratch own(ctx, accumulate ? size_t(dy_shape[1]) * sizeof(float) : 0);
  float *sum = accumulate ? own.as<float>() : db;
  reduce_axes(ctx, op, PIPERT_REDUCE_SUM, dy, 3, shape, reduced, 1.f, sum);
  if (accumulate)
    launch_map(ctx, op, dy_shape[1], [=] __device__(int64_t i) { db[i] += sum[i]; });
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


} // extern "C"
