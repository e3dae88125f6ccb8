//===- attention.cu - scaled dot-product attention and its gradient (CUDA) ===//
//
// pipert_attention_f32 / pipert_attention_grad_f32 (pipert_kernels.h) on
// cuBLAS: per batch entry one strided-batched GEMM over the heads for each
// product (a head's rows are `sh` floats after the previous head's), the
// t x s scores of every (batch, head) in `probs` (or scratch), and one warp
// per score row for the masked softmax and its gradient
// (runtime/cpu/attention.cpp on the CPU).
//
//===----------------------------------------------------------------------===//
#include "nn_util.cuh"

using namespace pipert::cuda;
using namespace pipert::cuda::nn;

namespace {

// Row r of the (pairs * t) x s scores (row i = r % t of pair r / t, its
// batch entry pair / heads, its head pair % heads) to its softmax: masked
// positions (j > i under causal, mask[b * mb + h * mh + i * mr + j] == 0)
// are 0, bias (a float attn_mask) at the same offsets added to the others,
// a row with nothing unmasked (or above -inf) NaN. A warp per row.
// Dropout (d non-null): d = P * M * keep_scale, M drawn as
// pipert_dropout_f32 draws it with `seed` at P's flat index; d == p writes
// it in P's place, else P's dropped elements get the sign bit.
struct Drop {
  uint64_t seed;
  uint32_t threshold;
  float keep_scale;
  float *d;
};

// Stores softmax value v at element j of row r (p's row pr), dropped.
__device__ __forceinline__ void drop_store(const Drop &dr, float *pr, int64_t r, int64_t s,
                                           int64_t j, float v) {
  const int64_t idx = r * s + j;
  const bool keep = pipert::formula::dropout_keep(dr.seed, idx, dr.threshold) != 0;
  const float dv = keep ? v * dr.keep_scale : 0.f;
  if (dr.d == pr - r * s) {
    pr[j] = dv;
    return;
  }
  dr.d[idx] = dv;
  pr[j] = keep ? v : -v;
}

__global__ void attention_softmax_kernel(float *p, int64_t rows, int64_t t,
                                         int64_t s, int64_t heads, int causal,
                                         const uint8_t *__restrict__ mask,
                                         const float *__restrict__ bias, int64_t mb,
                                         int64_t mh, int64_t mr, Drop drop) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t r = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; r < rows;
       r += warps) {
    const int64_t i = r % t, pair = r / t;
    float *pr = p + r * s;
    const int64_t off = (pair / heads) * mb + (pair % heads) * mh + i * mr;
    const uint8_t *mrow = mask ? mask + off : nullptr;
    const float *brow = bias ? bias + off : nullptr;
    auto masked = [&](int64_t j) { return (causal && j > i) || (mrow && !mrow[j]); };
    if (brow)
      for (int64_t j = lane; j < s; j += 32)
        if (!masked(j))
          pr[j] += brow[j];
    float mx = -INFINITY;
    for (int64_t j = lane; j < s; j += 32)
      if (!masked(j))
        mx = fmaxf(mx, pr[j]);
    mx = __shfl_sync(0xffffffffu, warp_max(mx), 0);
    if (mx == -INFINITY) {
      for (int64_t j = lane; j < s; j += 32) {
        const float nan = __int_as_float(0x7fc00000);
        if (drop.d)
          drop_store(drop, pr, r, s, j, nan);
        else
          pr[j] = nan;
      }
      continue;
    }
    float sum = 0.f;
    for (int64_t j = lane; j < s; j += 32) {
      const float e = masked(j) ? 0.f : expf(pr[j] - mx);
      pr[j] = e;
      sum += e;
    }
    sum = __shfl_sync(0xffffffffu, warp_sum(sum), 0);
    const float inv = 1.f / sum;
    for (int64_t j = lane; j < s; j += 32) {
      if (drop.d)
        drop_store(drop, pr, r, s, j, pr[j] * inv);
      else
        pr[j] *= inv;
    }
  }
}

// dS = P * (dP - rowsum(dP * P)) in dP's place, a warp per row. Under
// dropout (d non-null: the dropped probabilities D, p the sign-marked P,
// dP the gradient of D): dS = D * dP - |P| rowsum(D * dP).
__global__ void attention_softmax_grad_kernel(const float *__restrict__ p,
                                              const float *__restrict__ d,
                                              float *__restrict__ dp, int64_t rows, int64_t s) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t r = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; r < rows;
       r += warps) {
    const float *pr = p + r * s, *drow = d ? d + r * s : pr;
    float *dr = dp + r * s;
    float acc = 0.f;
    for (int64_t j = lane; j < s; j += 32)
      acc += drow[j] * dr[j];
    acc = __shfl_sync(0xffffffffu, warp_sum(acc), 0);
    for (int64_t j = lane; j < s; j += 32)
      dr[j] = d ? drow[j] * dr[j] - fabsf(pr[j]) * acc : pr[j] * (dr[j] - acc);
  }
}

// The dropout ratio's check and the mask's seed (one draw where p > 0).
Drop attention_drop(pipert_context *ctx, const char *op, float ratio, bool draw) {
  if (!(ratio >= 0.f && ratio < 1.f))
    pipert_fail("%s: dropout %g outside [0, 1)", op, double(ratio));
  Drop r{0, 0, 1.f, nullptr};
  if (ratio > 0.f) {
    r.seed = draw ? pipert_context_next_random(ctx) : 0;
    r.threshold = pipert::formula::dropout_threshold(ratio);
    r.keep_scale = 1.f / (1.f - ratio);
  }
  return r;
}

unsigned row_blocks(pipert_context *ctx, int64_t rows) {
  return grid_for(ctx, rows * 32);
}

// Runs fn(b, h0, n, kv, own) over runs of query heads: every head of batch
// entry b at once (own: K's and V's head stride steps with them); under
// grouped-query attention (g > 1) each key/value head kv's g query heads
// from h0, K and V shared by the run (a head stride of 0).
template <typename F> void for_head_runs(int64_t batch, int64_t heads, int64_t g, F fn) {
  for (int64_t b = 0; b < batch; ++b) {
    if (g == 1) {
      fn(b, int64_t(0), heads, int64_t(0), true);
      continue;
    }
    for (int64_t j = 0; j < heads / g; ++j)
      fn(b, j * g, g, j, false);
  }
}

} // namespace

extern "C" {

void pipert_attention_f32(pipert_context *ctx, const float *q, const float *k, const float *v,
                          const int64_t *st, int64_t batch, int64_t heads, int64_t kv_heads,
                          int64_t t, int64_t s, int64_t dh, float scale, int32_t causal,
                          float dropout, const uint8_t *mask, const float *bias,
                          const int64_t *mask_strides, float *y, float *probs) {
  const char *op = "Attention";
  pipert::check_attention_args(op, batch, heads, kv_heads, t, s, dh, st);
  const pipert::AttentionMaskStrides ms = pipert::attention_mask_strides(op, s, mask_strides);
  Drop drop = attention_drop(ctx, op, dropout, true);
  const int64_t ts = t * s, g = heads / kv_heads;
  // Under dropout P V reads D: in P's place without probs, else beside it.
  Scratch tmp(ctx, probs && dropout == 0.f ? 1 : size_t(batch * heads * ts) * sizeof(float));
  float *p = probs ? probs : tmp.as<float>();
  if (dropout > 0.f)
    drop.d = tmp.as<float>();
  const float *pv = drop.d ? drop.d : p;
  for_head_runs(batch, heads, g, [&](int64_t b, int64_t h0, int64_t n, int64_t kv, bool own) {
    gemm_strided(ctx, op, 0, 1, t, s, dh, scale, q + b * st[0] + h0 * st[1], st[2], st[1],
                 k + b * st[3] + kv * st[4], st[5], own ? st[4] : 0, 0.f,
                 p + (b * heads + h0) * ts, s, ts, n);
  });
  const int64_t rows = batch * heads * t;
  attention_softmax_kernel<<<row_blocks(ctx, rows), kBlock, 0, stream_of(ctx)>>>(
      p, rows, t, s, heads, causal, mask, bias, ms.b, ms.h, ms.r, drop);
  PIPERT_LAUNCH_CHECK(op);
  for_head_runs(batch, heads, g, [&](int64_t b, int64_t h0, int64_t n, int64_t kv, bool own) {
    gemm_strided(ctx, op, 0, 0, t, dh, s, 1.f, pv + (b * heads + h0) * ts, s, ts,
                 v + b * st[6] + kv * st[7], st[8], own ? st[7] : 0, 0.f,
                 y + b * st[9] + h0 * st[10], st[11], st[10], n);
  });
}

void pipert_attention_grad_f32(pipert_context *ctx, const float *q, const float *k,
                               const float *v, const int64_t *st, int64_t batch,
                               int64_t heads, int64_t kv_heads, int64_t t, int64_t s,
                               int64_t dh, float scale,
                               int32_t /*causal: every block is computed*/, float dropout,
                               const float *probs, const float *dy, float *dq, float *dk,
                               float *dv) {
  const char *op = "AttentionGrad";
  pipert::check_attention_args(op, batch, heads, kv_heads, t, s, dh, st);
  if (!probs)
    pipert_fail("AttentionGrad: the forward's probabilities are required");
  const Drop drop = attention_drop(ctx, op, dropout, false);
  const int64_t ts = t * s, total = batch * heads * ts, g = heads / kv_heads;
  Scratch tmp(ctx, size_t(total) * sizeof(float));
  float *ds = tmp.as<float>();
  // Under dropout the products read D = |P| * M * keep_scale.
  Scratch dtmp(ctx, dropout > 0.f ? size_t(total) * sizeof(float) : 1);
  float *d = nullptr;
  if (dropout > 0.f) {
    d = dtmp.as<float>();
    const float ks = drop.keep_scale;
    launch_map(ctx, op, total, [=] __device__(int64_t i) {
      d[i] = signbit(probs[i]) ? 0.f : probs[i] * ks;
    });
  }
  const float *pd = d ? d : probs;
  // dP = dY Vᵀ.
  for_head_runs(batch, heads, g, [&](int64_t b, int64_t h0, int64_t n, int64_t kv, bool own) {
    gemm_strided(ctx, op, 0, 1, t, s, dh, 1.f, dy + b * st[9] + h0 * st[10], st[11], st[10],
                 v + b * st[6] + kv * st[7], st[8], own ? st[7] : 0, 0.f,
                 ds + (b * heads + h0) * ts, s, ts, n);
  });
  // dV = Pᵀ dY: per batch entry over the heads, or (grouped-query) per
  // query head over the batch, added to its key/value head's after the
  // group's first.
  if (g == 1) {
    for (int64_t b = 0; b < batch; ++b)
      gemm_strided(ctx, op, 1, 0, s, dh, t, 1.f, pd + b * heads * ts, s, ts, dy + b * st[9],
                   st[11], st[10], 0.f, dv + b * st[6], st[8], st[7], heads);
  } else {
    for (int64_t h = 0; h < heads; ++h)
      gemm_strided(ctx, op, 1, 0, s, dh, t, 1.f, pd + h * ts, s, heads * ts, dy + h * st[10],
                   st[11], st[9], h % g ? 1.f : 0.f, dv + (h / g) * st[7], st[8], st[6],
                   batch);
  }
  const int64_t rows = batch * heads * t;
  attention_softmax_grad_kernel<<<row_blocks(ctx, rows), kBlock, 0, stream_of(ctx)>>>(
      probs, d, ds, rows, s);
  PIPERT_LAUNCH_CHECK(op);
  // dQ = scale dS K.
  for_head_runs(batch, heads, g, [&](int64_t b, int64_t h0, int64_t n, int64_t kv, bool own) {
    gemm_strided(ctx, op, 0, 0, t, dh, s, scale, ds + (b * heads + h0) * ts, s, ts,
                 k + b * st[3] + kv * st[4], st[5], own ? st[4] : 0, 0.f,
                 dq + b * st[0] + h0 * st[1], st[2], st[1], n);
  });
  // dK = scale dSᵀ Q, as dV.
  if (g == 1) {
    for (int64_t b = 0; b < batch; ++b)
      gemm_strided(ctx, op, 1, 0, s, dh, t, scale, ds + b * heads * ts, s, ts, q + b * st[0],
                   st[2], st[1], 0.f, dk + b * st[3], st[5], st[4], heads);
  } else {
    for (int64_t h = 0; h < heads; ++h)
      gemm_strided(ctx, op, 1, 0, s, dh, t, scale, ds + h * ts, s, heads * ts, q + h * st[1],
                   st[2], st[0], h % g ? 1.f : 0.f, dk + (h / g) * st[4], st[5], st[3], batch);
  }
}

} // extern "C"
