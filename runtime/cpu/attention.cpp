//===- attention.cpp - scaled dot-product attention and its gradient (CPU) ===//
//
// pipert_attention_f32 / pipert_attention_grad_f32 (pipert_kernels.h): one
// (batch, head) pair at a time, its t x s scores in a scratch row block that
// stays in L1/L2 from the product that makes them to the one that reads
// them. Unfused, attention was a transpose of the fused projection into q,
// k and v, two batched MatMuls, a scale, a Where and a Softmax, each a pass
// over tensors that had left the caches: the GPT's 64 x 64 x 64 products
// ran at ~65 GFLOP/s in the step against ~170 warm (bench/gemm_bench
// --cold). Here the products read Q, K and V where the projection wrote
// them (strided rows) and write Y and the gradients in place.
//
// Rows are softmaxed over their unmasked prefix under `causal` (positions
// after the diagonal are zero without an exp). The products run in
// small_sgemm on each thread where pipert_sgemm would run them there
// (every shape of the GPT's and the example transformer's heads), else one
// pair after another through pipert_sgemm and its library's threads.
//
//===----------------------------------------------------------------------===//
#include "kernel_util.h"
#include "vmath.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace pipert::cpu;

namespace {

struct Layout {
  const int64_t *st; // 12 strides: q, k, v, y (batch, head, row)
  int64_t heads;
  int64_t off(int which, int64_t pair) const {
    const int64_t b = pair / heads, h = pair % heads;
    return b * st[3 * which] + h * st[3 * which + 1];
  }
  int64_t ld(int which) const { return st[3 * which + 2]; }
};

void check_args(const char *op, int64_t batch, int64_t heads, int64_t t, int64_t s, int64_t dh,
                const int64_t *strides) {
  if (batch < 0 || heads <= 0 || t <= 0 || s <= 0 || dh <= 0 || !strides)
    pipert_fail("%s: bad sizes batch %lld, heads %lld, t %lld, s %lld, head size %lld", op,
                (long long)batch, (long long)heads, (long long)t, (long long)s, (long long)dh);
  for (int i = 0; i < 4; ++i)
    if (strides[3 * i + 2] < dh)
      pipert_fail("%s: row stride %lld of operand %d is below the head size %lld", op,
                  (long long)strides[3 * i + 2], i, (long long)dh);
}

// One product C = alpha op(A) op(B), on this thread (`serial`: small_sgemm)
// or through pipert_sgemm.
struct Gemm {
  pipert_context *ctx;
  bool serial;
  void operator()(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                  int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc) const {
    if (serial)
      small_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, 0.f, c, ldc);
    else
      pipert_sgemm(ctx, ta, tb, m, n, k, alpha, a, lda, b, ldb, 0.f, c, ldc);
  }
};

// Row i of the scores (n = s floats) to its softmax, masked positions 0.
// The unmasked prefix under causal only; a row with nothing unmasked is NaN.
void softmax_row(float *PIPERT_RESTRICT p, int64_t i, int64_t s, bool causal,
                 const uint8_t *mask) {
  int64_t n = s;
  if (causal)
    n = std::min(s, i + 1);
  if (mask) {
    const uint8_t *mr = mask + i * s;
    for (int64_t j = 0; j < n; ++j)
      if (!mr[j])
        p[j] = -INFINITY;
  }
  const float mx = row_max(n, p);
  if (mx == -INFINITY) {
    std::fill(p, p + s, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  int64_t j = 0;
#if defined(__AVX512F__)
  const __m512 vmx = _mm512_set1_ps(mx);
  for (; j + 16 <= n; j += 16)
    _mm512_storeu_ps(p + j, vexp16(_mm512_sub_ps(_mm512_loadu_ps(p + j), vmx)));
#endif
  for (; j < n; ++j)
    p[j] = vexp(p[j] - mx);
  const float inv = 1.f / row_sum(n, p);
  for (j = 0; j < n; ++j)
    p[j] *= inv;
  std::fill(p + n, p + s, 0.f);
}

// dS = P * (dP - rowsum(dP * P)) over a row of s (in dP's place).
void softmax_grad_row(const float *PIPERT_RESTRICT p, float *PIPERT_RESTRICT dp, int64_t s) {
  const float acc = row_sum(s, dp, p);
  for (int64_t j = 0; j < s; ++j)
    dp[j] = p[j] * (dp[j] - acc);
}

// Runs fn(pair, serial) over the batch x heads pairs: on the context's
// threads when every product fits small_sgemm, else one after another.
template <typename Fn>
void for_pairs(pipert_context *ctx, int64_t pairs, bool serial, Fn &&fn) {
  if (serial) {
    parallel_for(ctx, pairs, 1, [&](int64_t b, int64_t e) {
      for (int64_t pr = b; pr < e; ++pr)
        fn(pr);
    });
    return;
  }
  for (int64_t pr = 0; pr < pairs; ++pr)
    fn(pr);
}

} // namespace

extern "C" {

void pipert_attention_f32(pipert_context *ctx, const float *q, const float *k, const float *v,
                          const int64_t *strides, int64_t batch, int64_t heads, int64_t t,
                          int64_t s, int64_t dh, float scale, int32_t causal,
                          const uint8_t *mask, float *y, float *probs) {
  check_args("Attention", batch, heads, t, s, dh, strides);
  const Layout L{strides, heads};
  const bool serial =
      small_gemm_eligible(1, t, s, dh) && small_gemm_eligible(0, t, dh, s);
  const Gemm gemm{ctx, serial};
  for_pairs(ctx, batch * heads, serial, [&](int64_t pr) {
    float *p = probs ? probs + pr * t * s : scratch(size_t(t * s), 0);
    gemm(0, 1, t, s, dh, scale, q + L.off(0, pr), L.ld(0), k + L.off(1, pr), L.ld(1), p, s);
    for (int64_t i = 0; i < t; ++i)
      softmax_row(p + i * s, i, s, causal != 0, mask);
    gemm(0, 0, t, dh, s, 1.f, p, s, v + L.off(2, pr), L.ld(2), y + L.off(3, pr), L.ld(3));
  });
}

void pipert_attention_grad_f32(pipert_context *ctx, const float *q, const float *k,
                               const float *v, const int64_t *strides, int64_t batch,
                               int64_t heads, int64_t t, int64_t s, int64_t dh, float scale,
                               const float *probs, const float *dy, float *dq, float *dk,
                               float *dv) {
  check_args("AttentionGrad", batch, heads, t, s, dh, strides);
  if (!probs)
    pipert_fail("AttentionGrad: the forward's probabilities are required");
  const Layout L{strides, heads};
  // Whether any position after the diagonal is unmasked is read off P: a
  // causal forward left those rows' tails zero, and a zero P gives a zero
  // dS either way, so the gradient needs no mask.
  const bool serial = small_gemm_eligible(1, t, s, dh) && small_gemm_eligible(0, s, dh, t) &&
                      small_gemm_eligible(0, t, dh, s);
  const Gemm gemm{ctx, serial};
  for_pairs(ctx, batch * heads, serial, [&](int64_t pr) {
    const float *p = probs + pr * t * s;
    float *ds = scratch(size_t(t * s), 1);
    const float *dyp = dy + L.off(3, pr);
    // dP = dY Vᵀ, dV = Pᵀ dY.
    gemm(0, 1, t, s, dh, 1.f, dyp, L.ld(3), v + L.off(2, pr), L.ld(2), ds, s);
    gemm(1, 0, s, dh, t, 1.f, p, s, dyp, L.ld(3), dv + L.off(2, pr), L.ld(2));
    for (int64_t i = 0; i < t; ++i)
      softmax_grad_row(p + i * s, ds + i * s, s);
    // dQ = scale dS K, dK = scale dSᵀ Q.
    gemm(0, 0, t, dh, s, scale, ds, s, k + L.off(1, pr), L.ld(1), dq + L.off(0, pr), L.ld(0));
    gemm(1, 0, s, dh, t, scale, ds, s, q + L.off(0, pr), L.ld(0), dk + L.off(1, pr), L.ld(1));
  });
}

} // extern "C"
