//===- small_gemm.cpp - register-blocked sgemm for small products (CPU) ----===//
//
// C = alpha * op(A) * op(B) + beta * C, row-major, for the products of a
// small model's micro-batch: 16 rows times 32-128 columns, where the
// libraries' per-call costs outweigh the arithmetic. oneDNN's dnnl_sgemm
// allocates its packing buffers and checks the ISA on every call (malloc,
// memalign, TLS and OpenMP queries showed in perf beside the kernel of a
// 2-sample transformer step); OpenBLAS runs its Haswell kernels here.
//
// The kernel: MR rows x 32 columns of C in registers (two 16-float vectors a
// row, GCC vector extensions: one zmm each under AVX-512, two ymm under
// AVX2), accumulated over the whole k with a broadcast of A's element and
// two fused multiply-adds a row. A is read in place (transposed or not: a
// broadcast reads one element wherever it is); B row by row, so a transposed
// B is first copied into a thread-local k x n panel (8 x 8 blocks
// transposed in registers). No packing of A, no
// k-blocking: meant for k and n up to a few hundred, where a 32-column panel
// of B stays in L1 for every row block.
//
// The sum over k runs in order, one fused multiply-add at a time: results
// match a double reference to the float rounding of a k-term sum. C's old
// value comes in as one multiply-add, the same whether it is read from C or
// from `row`: old + alpha * sum where beta is 1, else beta * old + (alpha *
// sum) (scale_add).
//
// Every loop over a block's rows is unrolled: left rolled, the
// accumulators were arrays in memory around the k loop (zeroed on the
// stack, stored, reloaded for the epilogue), a third of a block's time at
// k = 16 (a weight gradient of a 2-sample micro-batch: 128 x 32 x 16
// 0.69 -> 0.59 us).
//===----------------------------------------------------------------------===//
#include "kernel_util.h"

#include <cstring>
#include <vector>

#if defined(__AVX512F__) || (defined(__FMA__) && defined(__AVX__))
#include <immintrin.h>
#endif

namespace pipert::cpu {
namespace {

typedef float v16 __attribute__((vector_size(64)));

inline v16 load16(const float *p) {
  v16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store16(float *p, v16 v) { std::memcpy(p, &v, sizeof v); }
// x in every lane. Not `v16{} + x`: that adds +0.0 first (a scalar add and
// a broadcast from a register, two instructions per multiply-add), where a
// splat is a broadcast load the multiply-add can take as its operand. The
// products differ only in the sign of a zero, which an accumulator that
// starts at +0.0 never keeps: the sums are the same bits.
inline v16 splat(float x) { return v16{x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }
// a * b + c, one rounding: explicit where the ISA has it, so that no
// choice of the compiler's contraction (which product it fuses, whether it
// hoists one out of the unrolled rows) changes the bits between callers.
#if defined(__AVX512F__)
inline v16 mul_add(v16 a, v16 b, v16 c) {
  return (v16)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
}
#elif defined(__FMA__) && defined(__AVX__)
// Two 8-lane halves (AVX2 and FMA, no AVX-512).
inline v16 mul_add(v16 a, v16 b, v16 c) {
  typedef float v8 __attribute__((vector_size(32)));
  v8 a2[2], b2[2], c2[2], r[2];
  std::memcpy(a2, &a, sizeof a);
  std::memcpy(b2, &b, sizeof b);
  std::memcpy(c2, &c, sizeof c);
  for (int h = 0; h < 2; ++h)
    r[h] = (v8)_mm256_fmadd_ps((__m256)a2[h], (__m256)b2[h], (__m256)c2[h]);
  v16 out;
  std::memcpy(&out, r, sizeof out);
  return out;
}
#else
// No fused multiply-add in the ISA: a product and a sum, whatever the
// compiler hoists.
inline v16 mul_add(v16 a, v16 b, v16 c) { return a * b + c; }
#endif
// The first n (< 16) floats; the rest zero.
#if defined(__AVX512F__)
inline v16 load_part(const float *p, int n) {
  return (v16)_mm512_maskz_loadu_ps(__mmask16((1u << n) - 1), p);
}
inline void store_part(float *p, v16 v, int n) {
  _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1), (__m512)v);
}
#else
inline v16 load_part(const float *p, int n) {
  v16 v = {};
  std::memcpy(&v, p, size_t(n) * sizeof(float));
  return v;
}
inline void store_part(float *p, v16 v, int n) { std::memcpy(p, &v, size_t(n) * sizeof(float)); }
#endif

#if defined(__AVX512F__)
constexpr int kMR = 8; // 16 accumulators of the 32 zmm registers
#else
constexpr int kMR = 4; // 16 ymm registers: 8 accumulator halves
#endif

// One block of MR rows and nc <= 32 columns: a(r, p) = a[r * sar + p * sap],
// b(p, j) = b[p * ldb + j].
// alpha * sum + beta * old. With beta = 1 (an accumulation into C, or
// pipe-lower-to-runtime's SGD fused into a weight gradient's Gemm: alpha =
// -lr, C = the weight) one multiply-add, old + alpha * sum in one rounding:
// w - lr g as pipert_sgd_f32 rounds it, so the fused update has the bits of
// the separate one. Otherwise alpha * sum first, then beta * old added.
inline v16 scale_add(v16 sum, float alpha, float beta, v16 old) {
  return beta == 1.f ? mul_add(splat(alpha), sum, old) : mul_add(splat(beta), old, alpha * sum);
}

template <int MR, bool Full>
inline void block(int64_t k, const float *a, int64_t sar, int64_t sap, const float *b,
                  int64_t ldb, float *c, int64_t ldc, int nc, float alpha, float beta,
                  const float *row) {
  v16 acc0[MR], acc1[MR];
  #pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    acc0[r] = v16{};
    acc1[r] = v16{};
  }
  const int n0 = Full ? 16 : (nc < 16 ? nc : 16), n1 = Full ? 16 : nc - n0;
  for (int64_t p = 0; p < k; ++p) {
    const float *bp = b + p * ldb;
    v16 b0, b1;
    if (Full) {
      b0 = load16(bp);
      b1 = load16(bp + 16);
    } else {
      b0 = n0 == 16 ? load16(bp) : load_part(bp, n0);
      b1 = n1 > 0 ? load_part(bp + 16, n1) : v16{};
    }
    const float *ap = a + p * sap;
    #pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const v16 ar = splat(ap[r * sar]);
      acc0[r] += ar * b0;
      acc1[r] += ar * b1;
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    float *cr = c + r * ldc;
    // The old C: this row of C, or the one `row` for every row.
    const float *old = row ? row : cr;
    v16 c0 = alpha * acc0[r], c1 = alpha * acc1[r];
    if (Full) {
      if (beta != 0.f) {
        c0 = scale_add(acc0[r], alpha, beta, load16(old));
        c1 = scale_add(acc1[r], alpha, beta, load16(old + 16));
      }
      store16(cr, c0);
      store16(cr + 16, c1);
    } else {
      if (beta != 0.f) {
        c0 = scale_add(acc0[r], alpha, beta, n0 == 16 ? load16(old) : load_part(old, n0));
        if (n1 > 0)
          c1 = scale_add(acc1[r], alpha, beta, load_part(old + 16, n1));
      }
      if (n0 == 16)
        store16(cr, c0);
      else
        store_part(cr, c0, n0);
      if (n1 > 0)
        store_part(cr + 16, c1, n1);
    }
  }
}

// A block of MR rows and nc <= 16 columns: one vector a row (the batched
// 8 x 8 products of attention heads).
template <int MR>
__attribute__((always_inline)) inline void block16(int64_t k, const float *a, int64_t sar,
                                                   int64_t sap, const float *b,
                    int64_t ldb, float *c, int64_t ldc, int nc, float alpha, float beta,
                    const float *row) {
  v16 acc[MR];
  #pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
    acc[r] = v16{};
  for (int64_t p = 0; p < k; ++p) {
    const v16 b0 = nc == 16 ? load16(b + p * ldb) : load_part(b + p * ldb, nc);
    const float *ap = a + p * sap;
    #pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
      acc[r] += splat(ap[r * sar]) * b0;
  }
  #pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    float *cr = c + r * ldc;
    const float *old = row ? row : cr;
    v16 c0 = alpha * acc[r];
    if (beta != 0.f)
      c0 = scale_add(acc[r], alpha, beta, nc == 16 ? load16(old) : load_part(old, nc));
    if (nc == 16)
      store16(cr, c0);
    else
      store_part(cr, c0, nc);
  }
}

template <int MR>
inline void rows(int64_t k, const float *a, int64_t sar, int64_t sap, const float *b, int64_t ldb,
                 float *c, int64_t ldc, int nc, float alpha, float beta, const float *row) {
  if (nc == 32)
    block<MR, true>(k, a, sar, sap, b, ldb, c, ldc, nc, alpha, beta, row);
  else if (nc <= 16)
    block16<MR>(k, a, sar, sap, b, ldb, c, ldc, nc, alpha, beta, row);
  else
    block<MR, false>(k, a, sar, sap, b, ldb, c, ldc, nc, alpha, beta, row);
}

// The last m % kMR rows of a column block.
template <int MR>
void tail_rows(int64_t left, int64_t k, const float *a, int64_t sar, int64_t sap, const float *b,
               int64_t ldb, float *c, int64_t ldc, int nc, float alpha, float beta,
               const float *row) {
  if constexpr (MR > 0) {
    if (left == MR)
      return rows<MR>(k, a, sar, sap, b, ldb, c, ldc, nc, alpha, beta, row);
    tail_rows<MR - 1>(left, k, a, sar, sap, b, ldb, c, ldc, nc, alpha, beta, row);
  }
}

// C = alpha * op(A) * B + beta * C with B k x n row-major (a transposed B
// already copied into a panel).
void run(int trans_a, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
         const float *b, int64_t ldb, float beta, float *c, int64_t ldc, const float *row) {
  // a(i, p): A[i * lda + p], or A[p * lda + i] when transposed.
  const int64_t sar = trans_a ? 1 : lda, sap = trans_a ? lda : 1;
  for (int64_t j = 0; j < n; j += 32) {
    const int nc = int(std::min<int64_t>(32, n - j));
    int64_t i = 0;
    const float *rj = row ? row + j : nullptr;
    for (; i + kMR <= m; i += kMR)
      rows<kMR>(k, a + i * sar, sar, sap, b + j, ldb, c + i * ldc + j, ldc, nc, alpha, beta, rj);
    if (i < m)
      tail_rows<kMR - 1>(m - i, k, a + i * sar, sar, sap, b + j, ldb, c + i * ldc + j, ldc, nc,
                         alpha, beta, rj);
  }
}

} // namespace

// Whole 8 x 8 blocks in registers, the edges one float at a time.
void transpose_panel(const float *src, int64_t lds, int64_t rows, int64_t cols, float *dst,
                     int64_t ldd) {
  const int64_t r8 = rows - rows % 8, c8 = cols - cols % 8;
  for (int64_t r0 = 0; r0 < r8; r0 += 8)
    for (int64_t c0 = 0; c0 < c8; c0 += 8)
      transpose8x8(src + r0 * lds + c0, lds, dst + c0 * ldd + r0, ldd);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = r < r8 ? c8 : 0; c < cols; ++c)
      dst[c * ldd + r] = src[r * lds + c];
}

void small_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                 int64_t ldc, const float *row) {
  if (trans_b) {
    // B is n x k: its k x n transpose, whole 8 x 8 blocks in registers
    // (a scalar copy was most of a 16 x 128 x 32 A·Bᵀ: 1.6 us of it).
    thread_local std::vector<float> panel;
    panel.resize(size_t(k * n));
    transpose_panel(b, ldb, n, k, panel.data(), n);
    b = panel.data();
    ldb = n;
  }
  run(trans_a, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, row);
}

namespace {

// Batch product bi's B as the kernel reads it (k x n row-major): in place,
// or a transposed B copied into `panel`. Sets ldb.
inline const float *batch_b(const MatMulPlan &p, int trans_b, const float *b, int64_t ob,
                            float *panel, int64_t &ldb) {
  const float *bb = b + ob * p.k * p.n;
  ldb = p.ldb;
  if (!trans_b)
    return bb;
  transpose_panel(bb, p.ldb, p.n, p.k, panel, p.n);
  ldb = p.n;
  return panel;
}

template <int MR>
void tiny_batch(const MatMulPlan &p, int trans_a, int trans_b, const float *a, const float *b,
                float *y, float *panel) {
  const int64_t n = p.n, k = p.k;
  const int64_t sar = trans_a ? 1 : p.lda, sap = trans_a ? p.lda : 1;
  for_each_batch(p, [&](int64_t bi, int64_t oa, int64_t ob) {
    int64_t ldb;
    const float *bb = batch_b(p, trans_b, b, ob, panel, ldb);
    // block16 inlined here with alpha 1, beta 0 and no row: no call, no
    // column loop, no scaling of the result.
    block16<MR>(k, a + oa * MR * k, sar, sap, bb, ldb, y + bi * MR * n, n, int(n), 1.f, 0.f,
                nullptr);
  });
}

} // namespace

void small_sgemm_batch(const MatMulPlan &p, int trans_a, int trans_b, const float *a,
                       const float *b, float *y) {
  const int64_t m = p.m, n = p.n, k = p.k;
  // A transposed B's panel: on the stack when it is small (attention's
  // 8 x 8 heads), else the thread's, fetched once for the batch.
  float local[1024];
  float *panel = local;
  if (trans_b && k * n > 1024) {
    thread_local std::vector<float> heap;
    heap.resize(size_t(k * n));
    panel = heap.data();
  }
  // Heads of 8 positions (m = 8, n <= 16): the product inlined.
  if (m == kMR && n <= 16) {
    tiny_batch<kMR>(p, trans_a, trans_b, a, b, y, panel);
    return;
  }
  for_each_batch(p, [&](int64_t bi, int64_t oa, int64_t ob) {
    int64_t ldb;
    const float *bb = batch_b(p, trans_b, b, ob, panel, ldb);
    run(trans_a, m, n, k, 1.f, a + oa * m * k, p.lda, bb, ldb, 0.f, y + bi * m * n, n, nullptr);
  });
}

} // namespace pipert::cpu
