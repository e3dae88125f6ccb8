//===- kernel_util.h - shared helpers of the CPU kernels ---------*- C++ -*-===//
//
// Shape arithmetic, numpy broadcasting iteration and a small parallel-for,
// shared by runtime/cpu/*.cpp. Internal: not part of the C ABI.
//
//===----------------------------------------------------------------------===//
#ifndef PIPERT_CPU_KERNEL_UTIL_H
#define PIPERT_CPU_KERNEL_UTIL_H

#include "pipert/pipert.h"
#include "pipert/pipert_kernels.h"
#include "../core/shape_util.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

#define PIPERT_RESTRICT __restrict__

namespace pipert::cpu {

using namespace ::pipert;

// dst[c * ldd + r] = src[r * lds + c] for r, c < 8: three rounds of
// shuffles (pairs of rows, pairs of pairs, halves).
typedef float v8 __attribute__((vector_size(32)));
__attribute__((always_inline)) inline void transpose8x8(const float *src, int64_t lds, float *dst,
                                                     int64_t ldd) {
  v8 r[8];
  for (int i = 0; i < 8; ++i)
    std::memcpy(&r[i], src + i * lds, sizeof(v8));
  v8 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4)
    for (int h = 0; h < 2; ++h) {
      u[i + 2 * h] = __builtin_shufflevector(t[i + h], t[i + h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      u[i + 2 * h + 1] =
          __builtin_shufflevector(t[i + h], t[i + h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  // u[0..3]: columns (0,4), (1,5), (2,6), (3,7) of rows 0-3; u[4..7]: rows 4-7.
  for (int c = 0; c < 4; ++c) {
    const v8 lo = __builtin_shufflevector(u[c], u[c + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    const v8 hi = __builtin_shufflevector(u[c], u[c + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    std::memcpy(dst + c * ldd, &lo, sizeof(v8));
    std::memcpy(dst + (c + 4) * ldd, &hi, sizeof(v8));
  }
}
// The same for any 4-byte elements (the shuffles move bits, no arithmetic).
inline void transpose8x8(const uint32_t *src, int64_t lds, uint32_t *dst, int64_t ldd) {
  transpose8x8(reinterpret_cast<const float *>(src), lds, reinterpret_cast<float *>(dst), ldd);
}

// Iterates an output of shape (rank, shape) together with K inputs whose
// element strides (0 on broadcast axes) are given, calling
//   fn(offsets[K], out_offset, inner_len, inner_strides[K])
// once per contiguous inner run. Adjacent axes that are contiguous for every
// operand are merged first so the inner run is as long as possible.
template <int K, typename Fn>
void broadcast_loop(int64_t rank, const int64_t *shape, const int64_t (*strides)[kMaxRank],
                    Fn &&fn) {
  int64_t dims[kMaxRank];
  int64_t st[K][kMaxRank];
  int64_t r = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (shape[i] == 1)
      continue;
    if (shape[i] == 0)
      return;
    bool merge = r > 0;
    for (int k = 0; k < K && merge; ++k)
      merge = st[k][r - 1] == strides[k][i] * shape[i];
    if (merge) {
      dims[r - 1] *= shape[i];
      for (int k = 0; k < K; ++k)
        st[k][r - 1] = strides[k][i];
    } else {
      dims[r] = shape[i];
      for (int k = 0; k < K; ++k)
        st[k][r] = strides[k][i];
      ++r;
    }
  }
  int64_t off[K] = {};
  int64_t inner_st[K];
  if (r == 0) {
    for (int k = 0; k < K; ++k)
      inner_st[k] = 0;
    fn(off, int64_t(0), int64_t(1), inner_st);
    return;
  }
  int64_t len = dims[r - 1];
  for (int k = 0; k < K; ++k)
    inner_st[k] = st[k][r - 1];
  int64_t outer = 1;
  for (int64_t i = 0; i + 1 < r; ++i)
    outer *= dims[i];
  int64_t idx[kMaxRank] = {};
  for (int64_t o = 0; o < outer; ++o) {
    fn(off, o * len, len, inner_st);
    for (int64_t d = r - 2; d >= 0; --d) {
      ++idx[d];
      for (int k = 0; k < K; ++k)
        off[k] += st[k][d];
      if (idx[d] < dims[d])
        break;
      for (int k = 0; k < K; ++k)
        off[k] -= st[k][d] * dims[d];
      idx[d] = 0;
    }
  }
}

// Runs call(obj, b, e) for parts p in [0, parts) of [0, n), part p being
// [p * chunk, min(n, (p + 1) * chunk)) (empty ones skipped): part 0 on the
// caller, the others on the kernels' thread pool (thread_pool.cpp).
void run_parts(int parts, int64_t n, int64_t chunk, void *obj,
               void (*call)(void *, int64_t, int64_t));

// Runs fn(begin, end) over [0, n) on up to `threads` threads (the caller's
// thread included); small ranges stay on the calling thread.
template <typename Fn>
void parallel_for(pipert_context *ctx, int64_t n, int64_t min_chunk, Fn &&fn) {
  int threads = ctx ? pipert_context_threads(ctx) : 1;
  int64_t parts = std::min<int64_t>(threads, min_chunk > 0 ? n / min_chunk : n);
  if (parts <= 1) {
    if (n > 0)
      fn(int64_t(0), n);
    return;
  }
  using F = std::remove_reference_t<Fn>;
  run_parts(int(parts), n, (n + parts - 1) / parts, const_cast<void *>(static_cast<const void *>(&fn)),
            [](void *o, int64_t b, int64_t e) { (*static_cast<F *>(o))(b, e); });
}

// Sets OpenBLAS's thread count to the context's before a BLAS call.
void blas_threads(pipert_context *ctx);

// Row-major C = alpha * op(A) * op(B) + beta * C on one thread, registers
// blocked for small products (runtime/cpu/small_gemm.cpp); any shape, k > 0.
// With `row` (n floats), C's old value is read as beta * row in every row
// instead of from C (a Gemm's bias), and C is only written.
void small_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                 int64_t ldc, const float *row = nullptr);

// dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols: the panel
// small_sgemm copies a transposed B into (8 x 8 blocks in registers). A
// caller running several products on one transposed B (attention's causal
// halves) copies it once and passes the panel untransposed: the same bits.
void transpose_panel(const float *src, int64_t lds, int64_t rows, int64_t cols, float *dst,
                     int64_t ldd);

// Whether pipert_sgemm would run this product in small_sgemm (on the
// calling thread): kernels that run products from several threads at once
// call small_sgemm themselves only then.
bool small_gemm_eligible(int trans_b, int64_t m, int64_t n, int64_t k);

// The batch of a MatMul plan (every product m, n, k > 0), each product as
// small_sgemm computes it (alpha 1, beta 0): one call for the batch, without
// pipert_sgemm's checks and dispatch per product (attention's 8 x 8 heads:
// ~30 ns a product, ~half of it the calls around the kernel).
void small_sgemm_batch(const MatMulPlan &p, int trans_a, int trans_b, const float *a,
                       const float *b, float *y);

// sum_j f(j) over j in [0, n), in double: eight interleaved partial sums
// (lane l takes j = l mod 8), added in order at the end. A single running
// sum is a chain of dependent additions (4 cycles each): a LayerNorm row of
// 32 took ~130 cycles per pass; the lanes vectorise and overlap. The order
// of the additions is fixed by n alone, so the result is deterministic.
template <typename F> inline double lane_sum(int64_t n, F &&f) {
  double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l)
      lane[l] += f(j + l);
  double s = 0;
  for (int l = 0; l < 8; ++l)
    s += lane[l];
  for (; j < n; ++j)
    s += f(j);
  return s;
}

// The float reductions of a short row (a softmax's max and sums): eight
// lanes in a vector register (lane l takes j = l mod 8 of the whole
// vectors), folded as a tree 4, 2, 1, then the tail in order. An in-order
// float sum is a chain of dependent adds (4 cycles each; the example
// transformer's loss, 256 rows of 32, took 9 us); lane arrays in memory
// were worse (a vector store read back a float at a time stalls store
// forwarding). Deterministic: the order is fixed by n.
namespace rowred {
typedef float v8f __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
inline v8f load8(const float *p) {
  v8f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline float fold_sum(v8f a) {
  v4f h = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
  return (h[0] + h[2]) + (h[1] + h[3]);
}
inline v8f vmax(v8f a, v8f b) { return a < b ? b : a; }
} // namespace rowred

/// sum_j x[j] (with y: sum_j x[j] y[j]) over a row of n floats.
inline float row_sum(int64_t n, const float *x, const float *y = nullptr) {
  using namespace rowred;
  v8f acc = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  int64_t j = 0;
  if (y)
    for (; j + 8 <= n; j += 8)
      acc += load8(x + j) * load8(y + j);
  else
    for (; j + 8 <= n; j += 8)
      acc += load8(x + j);
  float s = j ? fold_sum(acc) : 0.f;
  for (; j < n; ++j)
    s += y ? x[j] * y[j] : x[j];
  return s;
}

/// max_j x[j] over a row (-inf for n = 0), NaNs skipped as a left-to-right
/// std::max skips them.
inline float row_max(int64_t n, const float *x) {
  using namespace rowred;
  float m = -INFINITY;
  int64_t j = 0;
  if (n >= 8) {
    v8f acc = load8(x);
    // A NaN in the first vector must not stick: start from -inf lanes.
    acc = vmax(v8f{} - INFINITY, acc);
    for (j = 8; j + 8 <= n; j += 8)
      acc = vmax(acc, load8(x + j));
    v4f h = __builtin_shufflevector(acc, acc, 0, 1, 2, 3);
    v4f h2 = __builtin_shufflevector(acc, acc, 4, 5, 6, 7);
    h = h < h2 ? h2 : h;
    m = std::max(std::max(h[0], h[2]), std::max(h[1], h[3]));
  }
  for (; j < n; ++j)
    m = std::max(m, x[j]);
  return m;
}

// A kernel's scratch: grown on demand and kept by the thread, so a kernel
// called every micro-batch neither allocates nor zero-fills in the steady
// state. `slot` tells apart the buffers one call holds at once; the
// contents are undefined.
template <typename T = float> inline T *scratch(size_t n, int slot = 0) {
  thread_local std::vector<T> buf[4];
  std::vector<T> &b = buf[slot];
  if (b.size() < n)
    b.resize(n);
  return b.data();
}

// acc[i] += g[i] for an accumulated gradient (nothing where acc is null).
inline void accumulate_into(float *PIPERT_RESTRICT acc, const float *PIPERT_RESTRICT g,
                            int64_t n) {
  if (acc)
    for (int64_t i = 0; i < n; ++i)
      acc[i] += g[i];
}

} // namespace pipert::cpu

#endif // PIPERT_CPU_KERNEL_UTIL_H
