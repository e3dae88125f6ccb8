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
// The products run in
// small_sgemm on each thread where pipert_sgemm would run them there
// (every shape of the GPT's and the example transformer's heads), else one
// pair after another through pipert_sgemm and its library's threads.
//
//===----------------------------------------------------------------------===//
#include "kernel_util.h"
#include "vmath.h"
#include "../core/formulas.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

using namespace pipert::cpu;

namespace {

struct Layout {
  const int64_t *st; // 12 strides: q, k, v, y (batch, head, row)
  int64_t heads;
  int64_t group = 1; // query heads a key/value head serves (grouped-query)
  int64_t off(int which, int64_t pair) const {
    const int64_t b = pair / heads, h = pair % heads;
    return b * st[3 * which] + (which == 1 || which == 2 ? h / group : h) * st[3 * which + 1];
  }
  // Whether pair's dK and dV add to its key/value head's (grouped-query:
  // not the first query head of the group).
  bool accumulates(int64_t pair) const { return (pair % heads) % group != 0; }
  int64_t ld(int which) const { return st[3 * which + 2]; }
};

// One product C = alpha op(A) op(B), on this thread (`serial`: small_sgemm)
// or through pipert_sgemm.
struct Gemm {
  pipert_context *ctx;
  bool serial;
  void operator()(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                  int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc,
                  float beta = 0.f) const {
    if (serial)
      small_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
      pipert_sgemm(ctx, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
};

#if defined(__AVX512F__)
inline __mmask16 tail_mask(int64_t k) { return __mmask16((1u << k) - 1u); }
#endif

// max over p[0, n), -inf for n = 0; in vector lanes with a masked tail
// (short rows: a scalar chain of maxss was a third of the tiny heads' time).
inline float max_of(const float *p, int64_t n) {
#if defined(__AVX512F__)
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  __m512 acc = ninf;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    acc = _mm512_max_ps(acc, _mm512_loadu_ps(p + j));
  if (j < n)
    acc = _mm512_max_ps(acc, _mm512_mask_loadu_ps(ninf, tail_mask(n - j), p + j));
  return _mm512_reduce_max_ps(acc);
#else
  return row_max(n, p);
#endif
}

// p[j] = p[j] == -inf ? 0 : p[j] - mx over [0, n).
inline void shift_row(float *p, int64_t n, float mx) {
  int64_t j = 0;
#if defined(__AVX512F__)
  const __m512 ninf = _mm512_set1_ps(-INFINITY), vmx = _mm512_set1_ps(mx);
  auto f = [&](__m512 x) {
    return _mm512_maskz_sub_ps(_mm512_cmp_ps_mask(x, ninf, _CMP_NEQ_OQ), x, vmx);
  };
  for (; j + 16 <= n; j += 16)
    _mm512_storeu_ps(p + j, f(_mm512_loadu_ps(p + j)));
  if (j < n) {
    const __mmask16 m = tail_mask(n - j);
    _mm512_mask_storeu_ps(p + j, m, f(_mm512_maskz_loadu_ps(m, p + j)));
    return;
  }
#endif
  for (; j < n; ++j)
    p[j] = p[j] == -INFINITY ? 0.f : p[j] - mx;
}

// p[j] = 0 over [0, n): short tails inline (std::fill of zeros became a
// memset call per row).
inline void zero_row(float *p, int64_t n) {
  int64_t j = 0;
#if defined(__AVX512F__)
  const __m512 z = _mm512_setzero_ps();
  for (; j + 16 <= n; j += 16)
    _mm512_storeu_ps(p + j, z);
  if (j < n) {
    _mm512_mask_storeu_ps(p + j, tail_mask(n - j), z);
    return;
  }
#endif
  for (; j < n; ++j)
    p[j] = 0.f;
}

#if defined(__AVX512F__)
// x, or 0 where x is below the smallest normal float (NaN kept): a
// probability that small is subnormal, and each later product with a
// subnormal operand costs a microcode assist (see norm.cpp's softmax).
inline __m512 normal_or_zero16(__m512 x) {
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(FLT_MIN), _CMP_NLT_UQ), x);
}
#endif
inline float normal_or_zero(float v) { return v < FLT_MIN ? 0.f : v; }

// p[j] = p[j] * c over [0, n), 0 where below the smallest normal float.
inline void scale_row(float *p, int64_t n, float c) {
  int64_t j = 0;
#if defined(__AVX512F__)
  const __m512 vc = _mm512_set1_ps(c);
  for (; j + 16 <= n; j += 16)
    _mm512_storeu_ps(p + j, normal_or_zero16(_mm512_mul_ps(_mm512_loadu_ps(p + j), vc)));
  if (j < n) {
    const __mmask16 m = tail_mask(n - j);
    _mm512_mask_storeu_ps(p + j, m,
                          normal_or_zero16(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + j), vc)));
    return;
  }
#endif
  for (; j < n; ++j)
    p[j] = normal_or_zero(p[j] * c);
}

// The t x s scores of one pair to their row softmax, masked positions 0
// (j > i under causal, mask[i * mr + j] == 0), a row with nothing unmasked
// NaN. Each row is shifted by the max of its unmasked positions and its
// masked ones set to 0, then one exp runs over the whole block (rows of a
// few positions, the example transformer's 8, had been a loop's overhead
// each), then the masked positions are zeroed and each row scaled by its
// sum. A masked position never goes through exp as -inf: exp's clamp
// makes that a denormal (exp(-104)), and each denormal result cost a
// microcode assist (the GPT's causal forward 386 -> 671 us a layer).
#if defined(__AVX512F__)
// One row of up to 16 V positions in registers: loaded once, stored once.
// Passes over memory stalled on each load of a row the pass before had just
// written with lane-masked stores (a masked store does not forward to a
// load): the example transformer's rows of 8 took ~45 ns each, the GPT's
// of 64 ~1 ns a position. Masked positions are never fed to exp as -inf
// (a denormal, and a microcode assist each, see below).
template <int V>
void softmax_row_reg(const float *PIPERT_RESTRICT src, float *PIPERT_RESTRICT pr, int64_t s,
                     int64_t n, const uint8_t *mr) {
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  __m512 x[V];
  __mmask16 valid[V], store[V];
  __m512 mx = ninf;
  for (int v = 0; v < V; ++v) {
    const int64_t base = int64_t(v) * 16;
    store[v] = base >= s ? 0 : s - base >= 16 ? 0xFFFF : tail_mask(s - base);
    valid[v] = base >= n ? 0 : n - base >= 16 ? 0xFFFF : tail_mask(n - base);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    if (mr && valid[v])
      valid[v] &= _mm512_test_epi32_mask(
          _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(valid[v], mr + base)),
          _mm512_set1_epi32(0xFF));
#endif
    x[v] = _mm512_mask_loadu_ps(ninf, valid[v], src + base);
    mx = _mm512_max_ps(mx, x[v]);
  }
  const float m = _mm512_reduce_max_ps(mx);
  if (m == -INFINITY) {
    for (int v = 0; v < V; ++v)
      _mm512_mask_storeu_ps(pr + v * 16, store[v],
                            _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN()));
    return;
  }
  const __m512 vm = _mm512_set1_ps(m);
  __m512 sum = _mm512_setzero_ps();
  for (int v = 0; v < V; ++v) {
    x[v] = _mm512_maskz_mov_ps(valid[v], vexp16(_mm512_maskz_sub_ps(valid[v], x[v], vm)));
    sum = _mm512_add_ps(sum, x[v]);
  }
  const __m512 inv = _mm512_set1_ps(1.f / _mm512_reduce_add_ps(sum));
  for (int v = 0; v < V; ++v)
    _mm512_mask_storeu_ps(pr + v * 16, store[v], normal_or_zero16(_mm512_mul_ps(x[v], inv)));
}
#endif

void softmax_row_bias(const float *PIPERT_RESTRICT src, const float *PIPERT_RESTRICT bias,
                      float *PIPERT_RESTRICT pr, int64_t s, int64_t n, const uint8_t *mrow);

void softmax_block(const float *src, float *PIPERT_RESTRICT p, int64_t t, int64_t s,
                   bool causal, const uint8_t *mask, const float *bias, int64_t mr) {
  if (bias) {
    for (int64_t i = 0; i < t; ++i)
      softmax_row_bias(src + i * s, bias + i * mr, p + i * s, s, causal ? std::min(s, i + 1) : s,
                       mask ? mask + i * mr : nullptr);
    return;
  }
#if defined(__AVX512F__)
#if !(defined(__AVX512BW__) && defined(__AVX512VL__))
  if (!mask)
#endif
    if (s <= 64) {
      for (int64_t i = 0; i < t; ++i) {
        const int64_t n = causal ? std::min(s, i + 1) : s;
        const uint8_t *mrow = mask ? mask + i * mr : nullptr;
        float *pr = p + i * s;
        const float *sr = src + i * s;
        if (s <= 16)
          softmax_row_reg<1>(sr, pr, s, n, mrow);
        else if (s <= 32)
          softmax_row_reg<2>(sr, pr, s, n, mrow);
        else
          softmax_row_reg<4>(sr, pr, s, n, mrow);
      }
      return;
    }
#endif
  if (src != p)
    std::copy(src, src + t * s, p);
  float *empty = scratch(size_t(t), 2); // 1 where a row has nothing unmasked
  for (int64_t i = 0; i < t; ++i) {
    float *pr = p + i * s;
    const int64_t n = causal ? std::min(s, i + 1) : s;
    if (mask) {
      const uint8_t *mrow = mask + i * mr;
      for (int64_t j = 0; j < n; ++j)
        if (!mrow[j])
          pr[j] = -INFINITY;
    }
    const float mx = max_of(pr, n);
    empty[i] = mx == -INFINITY ? 1.f : 0.f;
    shift_row(pr, n, mx);
    zero_row(pr + n, s - n);
  }
  const int64_t total = t * s;
  int64_t j = 0;
#if defined(__AVX512F__)
  for (; j + 16 <= total; j += 16)
    _mm512_storeu_ps(p + j, vexp16(_mm512_loadu_ps(p + j)));
  if (j < total) {
    const __mmask16 m = tail_mask(total - j);
    _mm512_mask_storeu_ps(p + j, m, vexp16(_mm512_maskz_loadu_ps(m, p + j)));
    j = total;
  }
#endif
  for (; j < total; ++j)
    p[j] = vexp(p[j]);
  for (int64_t i = 0; i < t; ++i) {
    float *pr = p + i * s;
    if (empty[i] != 0.f) {
      std::fill(pr, pr + s, std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    const int64_t n = causal ? std::min(s, i + 1) : s;
    zero_row(pr + n, s - n);
    if (mask) {
      const uint8_t *mrow = mask + i * mr;
      for (int64_t k = 0; k < n; ++k)
        if (!mrow[k])
          pr[k] = 0.f;
    }
    scale_row(pr, n, 1.f / row_sum(n, pr));
  }
}

// A row's softmax with a float bias added to its scores (onnx.Attention's
// float attn_mask: an additive mask from the data such as BERT's (1 - m) *
// finfo.min, or a constant one such as a -1e4 fill or ALiBi): positions
// j >= n (causal) or whose mask byte is 0 are 0; the others exp(x - max),
// where x - max < -104 is 0 (exp underflows there; not computed, as each
// denormal result would cost a microcode assist: a finite fill puts every
// masked position there). A row with no position above -inf is NaN, as
// the softmax of -inf everywhere.
void softmax_row_bias(const float *PIPERT_RESTRICT src, const float *PIPERT_RESTRICT bias,
                      float *PIPERT_RESTRICT pr, int64_t s, int64_t n, const uint8_t *mrow) {
  auto attends = [&](int64_t j) { return j < n && (!mrow || mrow[j]); };
  float mx = -INFINITY;
  int64_t j = 0;
#if defined(__AVX512F__)
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  auto valid_at = [&](int64_t base) -> __mmask16 {
    __mmask16 v = base >= n ? 0 : n - base >= 16 ? 0xFFFF : tail_mask(n - base);
    if (mrow)
      for (int l = 0; l < 16; ++l)
        if (((v >> l) & 1) && !mrow[base + l])
          v = __mmask16(v & ~(1u << l));
    return v;
  };
  __m512 vmx = ninf;
  for (; j < n; j += 16) {
    const __mmask16 v = valid_at(j);
    const __m512 x = _mm512_maskz_add_ps(v, _mm512_maskz_loadu_ps(v, src + j),
                                         _mm512_maskz_loadu_ps(v, bias + j));
    vmx = _mm512_mask_max_ps(vmx, v, vmx, x);
  }
  mx = _mm512_reduce_max_ps(vmx);
#else
  for (; j < n; ++j)
    if (attends(j))
      mx = std::max(mx, src[j] + bias[j]);
#endif
  if (mx == -INFINITY) {
    for (int64_t k = 0; k < s; ++k)
      pr[k] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  float sum = 0.f;
  j = 0;
#if defined(__AVX512F__)
  const __m512 vm = _mm512_set1_ps(mx), floor = _mm512_set1_ps(-104.f);
  __m512 vsum = _mm512_setzero_ps();
  for (; j < n; j += 16) {
    __mmask16 v = valid_at(j);
    const __m512 d = _mm512_sub_ps(
        _mm512_add_ps(_mm512_maskz_loadu_ps(v, src + j), _mm512_maskz_loadu_ps(v, bias + j)), vm);
    v &= _mm512_cmp_ps_mask(d, floor, _CMP_GE_OQ);
    const __m512 e = _mm512_maskz_mov_ps(v, vexp16(_mm512_maskz_mov_ps(v, d)));
    vsum = _mm512_add_ps(vsum, e);
    const __mmask16 st = j + 16 <= s ? 0xFFFF : tail_mask(s - j);
    _mm512_mask_storeu_ps(pr + j, st, e);
  }
  sum = _mm512_reduce_add_ps(vsum);
#else
  for (; j < n; ++j) {
    const float d = src[j] + bias[j] - mx;
    pr[j] = attends(j) && d >= -104.f ? vexp(d) : 0.f;
    sum += pr[j];
  }
#endif
  for (int64_t k = n; k < s; ++k)
    pr[k] = 0.f;
  scale_row(pr, n, 1.f / sum);
}

// dS = P * (dP - rowsum(dP * P)) over a row of s (in dP's place).
void softmax_grad_row(const float *PIPERT_RESTRICT p, float *PIPERT_RESTRICT dp, int64_t s) {
  const float acc = row_sum(s, dp, p);
  for (int64_t j = 0; j < s; ++j)
    dp[j] = p[j] * (dp[j] - acc);
}

// Attention dropout (pipert_kernels.h): the mask pipert_dropout_f32 would
// draw with `seed` for P's elements, this block's first at flat index
// `base`. d = P * M * keep_scale, what P V reads; where `mark`, P's dropped
// elements get the sign bit (-0.f for a P of 0), which is how the gradient
// tells them.
struct AttnDropout {
  uint64_t seed = 0;
  uint32_t threshold = 0;
  float keep_scale = 1.f;
  // Loops without branches on the mask, which the compiler vectorizes
  // (the generator's 64-bit products in vector lanes: a conditional store
  // had kept it scalar, ~3.7 ns an element, doubling the GPT's forward).
  void apply(float *PIPERT_RESTRICT p, float *PIPERT_RESTRICT d, int64_t n, int64_t base,
             bool mark) const {
    const uint64_t s = seed;
    const uint32_t th = threshold;
    const float ks = keep_scale;
    if (mark) {
      for (int64_t e = 0; e < n; ++e) {
        const bool keep = pipert::formula::dropout_keep(s, base + e, th) != 0;
        const float pe = p[e];
        d[e] = keep ? pe * ks : 0.f;
        p[e] = keep ? pe : -pe;
      }
    } else {
      for (int64_t e = 0; e < n; ++e) {
        const bool keep = pipert::formula::dropout_keep(s, base + e, th) != 0;
        d[e] = keep ? p[e] * ks : 0.f;
      }
    }
  }
};

// The dropped probabilities D = |P| * M * keep_scale of a sign-marked P.
void dropped_probs(const float *PIPERT_RESTRICT p, float *PIPERT_RESTRICT d, int64_t n,
                   float keep_scale) {
  for (int64_t e = 0; e < n; ++e)
    d[e] = std::signbit(p[e]) ? 0.f : p[e] * keep_scale;
}

// Under dropout: dS = D * dP - |P| rowsum(D * dP) over a row of s (in dP's
// place; dP the gradient of D, p the sign-marked P).
void softmax_grad_row_dropped(const float *PIPERT_RESTRICT p, const float *PIPERT_RESTRICT d,
                              float *PIPERT_RESTRICT dp, int64_t s) {
  const float acc = row_sum(s, dp, d);
  for (int64_t j = 0; j < s; ++j)
    dp[j] = d[j] * dp[j] - std::fabs(p[j]) * acc;
}

// The dropout ratio's check and its mask's seed: one draw of the context's
// stream where p > 0 (none otherwise, as pipert_dropout_f32).
AttnDropout attention_dropout(pipert_context *ctx, const char *op, float ratio, bool draw) {
  if (!(ratio >= 0.f && ratio < 1.f))
    pipert_fail("%s: dropout %g outside [0, 1)", op, double(ratio));
  AttnDropout r;
  if (ratio > 0.f) {
    r.seed = draw ? pipert_context_next_random(ctx) : 0;
    r.threshold = pipert::formula::dropout_threshold(ratio);
    r.keep_scale = 1.f / (1.f - ratio);
  }
  return r;
}

// Runs fn(pair, serial) over the batch x heads pairs: on the context's
// threads when every product fits small_sgemm, else one after another.
// Causal attention with t = s (a multiple of 32, at least 64) goes in two
// row halves: the top rows' scores and products stop at the diagonal's
// half (the top-right quarter is masked: P is zero there), a quarter of
// each product's work skipped (the GPT's 64 x 64 heads).
int64_t causal_half(bool causal, int64_t t, int64_t s) {
  return causal && t == s && t >= 64 && t % 32 == 0 ? t / 2 : 0;
}

// Pairs go in groups whose scores take up to ~64 KiB (L2): each phase (the
// scores' products, the softmax, the products that read them) runs over
// the group before the next, so a phase reads what the one before wrote a
// group ago, not a store ago (tiny heads, the example transformer's 8 x 8,
// had stalled on each row's loads right after the product's stores, and on
// a call's setup per product). The GPT's 64 x 64 heads: 4 pairs a group.
// Under grouped-query attention a group holds whole key/value heads (a
// multiple of `kv_group` pairs, each key/value head's query heads in one
// group): the gradient sums their dK and dV in turn, on one thread.
int64_t group_of(int64_t t, int64_t s, int64_t pairs, int64_t kv_group = 1) {
  const int64_t g =
      std::clamp<int64_t>(16384 / std::max<int64_t>(1, t * s), 1, std::max<int64_t>(1, pairs));
  return (g + kv_group - 1) / kv_group * kv_group;
}

// Runs fn(first, last) over groups of `group` pairs: on the context's
// threads when every product fits small_sgemm, else one after another.
template <typename Fn>
void for_groups(pipert_context *ctx, int64_t pairs, int64_t group, bool serial, Fn &&fn) {
  const int64_t groups = (pairs + group - 1) / group;
  auto run = [&](int64_t b, int64_t e) {
    for (int64_t g = b; g < e; ++g)
      fn(g * group, std::min(pairs, (g + 1) * group));
  };
  if (serial)
    parallel_for(ctx, groups, 1, run);
  else
    run(0, groups);
}

} // namespace

extern "C" {

void pipert_attention_f32(pipert_context *ctx, const float *q, const float *k, const float *v,
                          const int64_t *strides, int64_t batch, int64_t heads,
                          int64_t kv_heads, int64_t t, int64_t s, int64_t dh, float scale,
                          int32_t causal, float dropout, const uint8_t *mask, const float *bias,
                          const int64_t *mask_strides, float *y, float *probs) {
  pipert::check_attention_args("Attention", batch, heads, kv_heads, t, s, dh, strides);
  const AttnDropout drop = attention_dropout(ctx, "Attention", dropout, true);
  const Layout L{strides, heads, heads / kv_heads};
  const pipert::AttentionMaskStrides ms =
      pipert::attention_mask_strides("Attention", s, mask_strides);
  const bool serial =
      small_gemm_eligible(1, t, s, dh) && small_gemm_eligible(0, t, dh, s);
  const Gemm gemm{ctx, serial};
  const int64_t pairs = batch * heads, group = group_of(t, s, pairs), ts = t * s;
  const int64_t h = causal_half(causal != 0, t, s);
  for_groups(ctx, pairs, group, serial, [&](int64_t first, int64_t last) {
    // The scores in one scratch, their softmax in another (or probs): a
    // row's loads never wait on a store to the same cache line (a lane-
    // masked store does not forward: rows of 8 positions, 32 bytes, had
    // waited on their neighbour's store each).
    float *sc = scratch(size_t(group * ts), 0);
    float *p0 = probs ? probs + first * ts : scratch(size_t(group * ts), 1);
    // With h (causal halves) the top rows' scores beyond column h are
    // never computed nor read (the softmax reads a row's unmasked prefix).
    for (int64_t pr = first; pr < last; ++pr) {
      const float *qp = q + L.off(0, pr), *kp = k + L.off(1, pr);
      float *sp = sc + (pr - first) * ts;
      if (h && serial) {
        // Kᵀ copied once for both halves (small_sgemm would copy K's first
        // h rows for the top and all s for the bottom): the same products.
        float *kt = scratch(size_t(dh * s), 3);
        transpose_panel(kp, L.ld(1), s, dh, kt, s);
        small_sgemm(0, 0, h, h, dh, scale, qp, L.ld(0), kt, s, 0.f, sp, s);
        small_sgemm(0, 0, t - h, s, dh, scale, qp + h * L.ld(0), L.ld(0), kt, s, 0.f,
                    sp + h * s, s);
      } else if (h) {
        gemm(0, 1, h, h, dh, scale, qp, L.ld(0), kp, L.ld(1), sp, s);
        gemm(0, 1, t - h, s, dh, scale, qp + h * L.ld(0), L.ld(0), kp, L.ld(1), sp + h * s, s);
      } else {
        gemm(0, 1, t, s, dh, scale, qp, L.ld(0), kp, L.ld(1), sp, s);
      }
    }
    for (int64_t pr = first; pr < last; ++pr)
    {
      const int64_t off = (pr / heads) * ms.b + (pr % heads) * ms.h;
      softmax_block(sc + (pr - first) * ts, p0 + (pr - first) * ts, t, s, causal != 0,
                    mask ? mask + off : nullptr, bias ? bias + off : nullptr, ms.r);
    }
    // Under dropout P V reads the dropped probabilities, written over the
    // scores (read by now); probs keeps P, its dropped elements marked.
    const float *pv0 = p0;
    if (dropout > 0.f) {
      drop.apply(p0, sc, (last - first) * ts, first * ts, probs != nullptr);
      pv0 = sc;
    }
    for (int64_t pr = first; pr < last; ++pr) {
      const float *pp = pv0 + (pr - first) * ts, *vp = v + L.off(2, pr);
      float *yp = y + L.off(3, pr);
      if (h) {
        gemm(0, 0, h, dh, h, 1.f, pp, s, vp, L.ld(2), yp, L.ld(3));
        gemm(0, 0, t - h, dh, s, 1.f, pp + h * s, s, vp, L.ld(2), yp + h * L.ld(3), L.ld(3));
      } else {
        gemm(0, 0, t, dh, s, 1.f, pp, s, vp, L.ld(2), yp, L.ld(3));
      }
    }
  });
}

void pipert_attention_grad_f32(pipert_context *ctx, const float *q, const float *k,
                               const float *v, const int64_t *strides, int64_t batch,
                               int64_t heads, int64_t kv_heads, int64_t t, int64_t s,
                               int64_t dh, float scale, int32_t causal, float dropout,
                               const float *probs, const float *dy, float *dq, float *dk,
                               float *dv) {
  pipert::check_attention_args("AttentionGrad", batch, heads, kv_heads, t, s, dh, strides);
  if (!probs)
    pipert_fail("AttentionGrad: the forward's probabilities are required");
  const AttnDropout drop = attention_dropout(ctx, "AttentionGrad", dropout, false);
  const bool dropped = dropout > 0.f;
  const Layout L{strides, heads, heads / kv_heads};
  // No mask is needed: a masked position's P is zero, and so its dS.
  const bool serial = small_gemm_eligible(1, t, s, dh) && small_gemm_eligible(0, s, dh, t) &&
                      small_gemm_eligible(0, t, dh, s);
  const Gemm gemm{ctx, serial};
  const int64_t pairs = batch * heads, group = group_of(t, s, pairs, L.group), ts = t * s;
  // With h (causal halves) dS's top-right quarter is neither computed nor
  // read: dQ's top rows, dK's and dV's right columns stop at the diagonal's
  // half (P is zero there).
  const int64_t h = causal_half(causal != 0, t, s);
  for_groups(ctx, pairs, group, serial, [&](int64_t first, int64_t last) {
    float *ds0 = scratch(size_t(group * ts), 1);
    // Under dropout the products read D, the dropped probabilities.
    float *d0 = nullptr;
    if (dropped) {
      d0 = scratch(size_t(group * ts), 0);
      dropped_probs(probs + first * ts, d0, (last - first) * ts, drop.keep_scale);
    }
    // dP = dY Vᵀ, dV = Pᵀ dY.
    for (int64_t pr = first; pr < last; ++pr) {
      const float *p = dropped ? d0 + (pr - first) * ts : probs + pr * ts;
      const float *dyp = dy + L.off(3, pr), *vp = v + L.off(2, pr);
      // Grouped-query: dV adds to the key/value head's after its first
      // query head (dK below likewise).
      const float acc = L.accumulates(pr) ? 1.f : 0.f;
      float *ds = ds0 + (pr - first) * ts, *dvp = dv + L.off(2, pr);
      const int64_t ly = L.ld(3), lv = L.ld(2);
      if (h) {
        if (serial) {
          // Vᵀ copied once for both halves (as Kᵀ in the forward).
          float *vt = scratch(size_t(dh * s), 3);
          transpose_panel(vp, lv, s, dh, vt, s);
          small_sgemm(0, 0, h, h, dh, 1.f, dyp, ly, vt, s, 0.f, ds, s);
          small_sgemm(0, 0, t - h, s, dh, 1.f, dyp + h * ly, ly, vt, s, 0.f, ds + h * s, s);
        } else {
          gemm(0, 1, h, h, dh, 1.f, dyp, ly, vp, lv, ds, s);
          gemm(0, 1, t - h, s, dh, 1.f, dyp + h * ly, ly, vp, lv, ds + h * s, s);
        }
        gemm(1, 0, h, dh, t, 1.f, p, s, dyp, ly, dvp, lv, acc);
        gemm(1, 0, s - h, dh, t - h, 1.f, p + h * s + h, s, dyp + h * ly, ly, dvp + h * lv, lv,
             acc);
      } else {
        gemm(0, 1, t, s, dh, 1.f, dyp, ly, vp, lv, ds, s);
        gemm(1, 0, s, dh, t, 1.f, p, s, dyp, ly, dvp, lv, acc);
      }
    }
    for (int64_t r = 0; r < (last - first) * t; ++r) {
      const int64_t n = h && r % t < h ? h : s;
      if (dropped)
        softmax_grad_row_dropped(probs + first * ts + r * s, d0 + r * s, ds0 + r * s, n);
      else
        softmax_grad_row(probs + first * ts + r * s, ds0 + r * s, n);
    }
    // dQ = scale dS K, dK = scale dSᵀ Q.
    for (int64_t pr = first; pr < last; ++pr) {
      const float *ds = ds0 + (pr - first) * ts, *kp = k + L.off(1, pr), *qp = q + L.off(0, pr);
      float *dqp = dq + L.off(0, pr), *dkp = dk + L.off(1, pr);
      const float acc = L.accumulates(pr) ? 1.f : 0.f;
      const int64_t lq = L.ld(0), lk = L.ld(1);
      if (h) {
        gemm(0, 0, h, dh, h, scale, ds, s, kp, lk, dqp, lq);
        gemm(0, 0, t - h, dh, s, scale, ds + h * s, s, kp, lk, dqp + h * lq, lq);
        gemm(1, 0, h, dh, t, scale, ds, s, qp, lq, dkp, lk, acc);
        gemm(1, 0, s - h, dh, t - h, scale, ds + h * s + h, s, qp + h * lq, lq, dkp + h * lk, lk,
             acc);
      } else {
        gemm(0, 0, t, dh, s, scale, ds, s, kp, lk, dqp, lq);
        gemm(1, 0, s, dh, t, scale, ds, s, qp, lq, dkp, lk, acc);
      }
    }
  });
}

} // extern "C"
