//===- linalg.cpp - GEMM and MatMul through oneDNN / OpenBLAS (CPU) -------===//
//
// Every GEMM of the CPU kernels goes through pipert_sgemm. It calls oneDNN's
// dnnl_sgemm, which picks its kernel from the CPU's ISA at run time (JIT),
// and our own register-blocked kernel (small_gemm.cpp) for small products,
// where oneDNN's per-call costs (its packing buffers' malloc, ISA and OpenMP
// queries) outweigh the arithmetic. Measured here (bench/gemm.py, one
// thread): OpenBLAS runs the core type the environment forces
// (OPENBLAS_CORETYPE, Haswell's AVX2 kernels on this AVX-512 machine) at
// ~130 GFLOP/s; oneDNN reaches ~250 on the same shapes.
// PIPERT_GEMM=onednn|openblas|small chooses one for every product.
//===----------------------------------------------------------------------===//
#include "kernel_util.h"

#include <cblas.h>
#include <dnnl.h>

#include <cstdlib>
#include <cstring>
#include <vector>

// Declared by OpenBLAS's cblas.h, but not by every cblas.h a system may put
// first on the include path.
extern "C" void openblas_set_num_threads(int num_threads);
// oneDNN (Debian's build) runs its threads with OpenMP.
extern "C" void omp_set_num_threads(int num_threads);

using namespace pipert::cpu;

namespace pipert::cpu {

void blas_threads(pipert_context *ctx) {
  // Both libraries keep the count per process (OpenMP: per calling thread);
  // only call them on a change, the calls are not free.
  static thread_local int current = -1;
  int want = ctx ? pipert_context_threads(ctx) : 1;
  if (want != current) {
    openblas_set_num_threads(want);
    omp_set_num_threads(want);
    current = want;
  }
}

} // namespace pipert::cpu

namespace {

enum class GemmLibrary { Auto, OneDnn, OpenBlas, Small };

GemmLibrary gemm_library() {
  static const GemmLibrary lib = [] {
    const char *env = std::getenv("PIPERT_GEMM");
    if (!env || !*env || !std::strcmp(env, "auto"))
      return GemmLibrary::Auto;
    if (!std::strcmp(env, "onednn"))
      return GemmLibrary::OneDnn;
    if (!std::strcmp(env, "openblas"))
      return GemmLibrary::OpenBlas;
    if (!std::strcmp(env, "small"))
      return GemmLibrary::Small;
    pipert_fail("PIPERT_GEMM=%s: expected onednn, openblas, small or auto (the default: "
                "oneDNN, pipert's own kernel for small products)",
                env);
  }();
  return lib;
}

// Below this many multiply-adds oneDNN's per-call dispatch (~0.1-0.2 us)
// outweighs its faster kernels: 16x16x16 takes 0.13 us in OpenBLAS and
// 0.22 us in oneDNN, 8x64x64 0.75 us and 0.47 us.
constexpr int64_t kOneDnnMinWork = 16384;

// Up to this many multiply-adds (and k, n within the kernel's L1 reach) a
// product runs in pipert's small kernel on one thread.
// Measured on the example transformer's step, one thread, with the kernel on
// every product of that size (A Bᵀ too, before the rules below): at 2
// samples (16-row products) 51.5 -> 46.3 us up to 64K, 46.5 up to 128K, 47.1
// up to 256K; at 32 samples 553 -> 529 us up to 128K. With the rules: 46.8
// and 521-528 us.
//
// A transposed B (A Bᵀ: a linear layer's forward, X Wᵀ, and a
// convolution's weight gradient) is first copied into a k x n panel, so the
// kernel pays off only where n fills its vectors: n a multiple of 16, up to
// the same work (the example transformer's forwards, 16 x 32..128 x
// 32..128: 0.27-0.95 us against oneDNN's 0.59-1.66), and tiny ones with
// k <= 32, whose panel is a few registers (attention's batched 8 x 8 x 8
// gradient P·Vᵀ-like products: 60 ns against OpenBLAS's 110; the example
// transformer's step at 32 samples 459 -> 429 us). The others stay on the
// libraries (the CNN's 4 x 10 x 144: 0.33 us against 0.19). Those
// include the example CNN's convolution weight gradients (n = 9, 72; k =
// 36, 144; a convolution's with k <= 32 and below 16K would take the
// kernel), whose summation order one of the asynchronous sweep's runs is
// sensitive to:
// with the kernel on every A Bᵀ, CNN, 3 stages, PipeDream vertical sync,
// Adam moved 7.6e-5 off its float64 reference, against 3e-8 with oneDNN or
// OpenBLAS. Adam divides each gradient by its own magnitude, so a gradient
// that is zero in exact arithmetic becomes ±lr by the sign of its rounding,
// and the kernel sums k in order where the libraries keep partial sums.
// (Neither of those products alone moved it past 1e-5; both did.)

constexpr int64_t kSmallMaxWork = 131072;
constexpr int64_t kSmallMaxK = 512, kSmallMaxN = 512;
// Without a transposed B (no panel to copy) the kernel keeps up further,
// since its row blocks' accumulators stay in registers (small_gemm.cpp):
// best of 20 rounds, one thread, against oneDNN, 64 x 128 x 32 252 against
// 227 GFLOP/s, 128 x 32 x 128 268 / 247, Aᵀ B 128 x 32 x 128 259 / 248;
// at 1M multiply-adds and above they tie (256 x 128 x 32 250 / 250) or
// oneDNN leads (Aᵀ B 256 x 256 x 128 218 / 235). The example transformer's
// products at 8 and 16 samples a micro-batch (64 and 128 rows).
constexpr int64_t kSmallMaxWorkNN = 524288;

// Up to this many columns (a multiple of 16) the kernel takes a product of
// any size: two or four vectors a row, no partial block, and a B panel of
// at most kSmallMaxK x 64 floats (128 KiB) that each row block streams
// through L1/L2. oneDNN's kernels for so few columns fall behind, most of
// all with a transposed B. Measured on the Zen 4 host (bench/gemm_bench,
// best over 0.2 s, one thread), kernel against oneDNN in GFLOP/s: A Bᵀ
// 64x64x64 (attention's q kᵀ and dP = dY Vᵀ of a 64-token GPT head) 104 /
// 77, 128x64x64 108 / 89, 64x64x512 107 / 50, 1024x64x32 108 / 95,
// 256x32x64 112 / 104; A B and Aᵀ B 512x64x64 113 / 103, 64x64x512 117 /
// 106, 1024x64x64 (Aᵀ B) 113 / 89.
constexpr int64_t kSmallAnyWorkMaxN = 64;

bool use_small(int trans_b, int64_t m, int64_t n, int64_t k) {
  if (k > kSmallMaxK || n > kSmallMaxN)
    return false;
  if (n <= kSmallAnyWorkMaxN && n % 16 == 0)
    return true;
  const int64_t work = m * n * k;
  if (trans_b)
    return (n % 16 == 0 && work <= kSmallMaxWork) || (k <= 32 && work < kOneDnnMinWork);
  // Below oneDNN's threshold it beats OpenBLAS on every shape measured (the
  // CNN's 8x144x9: 165 vs 311 ns; attention's 8x8x8: 29 vs 60 ns). Above it,
  // only where the columns fill its 16-float vectors: a partial block costs
  // a whole one (the CNN's 16x36x72: 729 ns against oneDNN's 626).
  return work < kOneDnnMinWork || (work <= kSmallMaxWorkNN && n % 16 == 0);
}

} // namespace

bool pipert::cpu::small_gemm_eligible(int trans_b, int64_t m, int64_t n, int64_t k) {
  GemmLibrary lib = gemm_library();
  return lib == GemmLibrary::Small || (lib == GemmLibrary::Auto && use_small(trans_b, m, n, k));
}

static void check_blas_dim(const char *op, int64_t v) {
  if (v < 0 || v > INT32_MAX)
    pipert_fail("%s: dimension %lld does not fit BLAS's int", op, (long long)v);
}

extern "C" {

void pipert_sgemm(pipert_context *ctx, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                  float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                  float beta, float *c, int64_t ldc) {
  const char *op = "sgemm";
  check_blas_dim(op, m);
  check_blas_dim(op, n);
  check_blas_dim(op, k);
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0.f ? 0.f : beta * c[i * ldc + j];
    return;
  }
  GemmLibrary lib = gemm_library();
  if (lib == GemmLibrary::Small || (lib == GemmLibrary::Auto && use_small(trans_b, m, n, k))) {
    small_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  blas_threads(ctx);
  if (lib == GemmLibrary::OneDnn || (lib == GemmLibrary::Auto && m * n * k >= kOneDnnMinWork)) {
    dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a,
                                  lda, b, ldb, beta, c, ldc);
    if (st != dnnl_success)
      pipert_fail("sgemm: oneDNN's dnnl_sgemm failed (status %d) on %lldx%lldx%lld; "
                  "PIPERT_GEMM=openblas avoids it",
                  int(st), (long long)m, (long long)n, (long long)k);
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), alpha, a, int(lda), b,
              int(ldb), beta, c, int(ldc));
}

void pipert_gemm_f32(pipert_context *ctx, const float *a, const float *b, const float *c,
                     int64_t c_rank, const int64_t *c_shape, int64_t m, int64_t n, int64_t k,
                     int trans_a, int trans_b, float alpha, float beta, float *y) {
  float beta_eff = 0.f;
  const bool whole_c = c && c_rank == 2 && c_shape[0] == m && c_shape[1] == n;
  if (c == y && whole_c) {
    // Accumulated in place (a weight gradient added to its accumulator).
    beta_eff = beta;
  } else if (c && beta != 0.f && (c_rank == 1 || (c_rank == 2 && c_shape[0] == 1)) &&
             c_shape[c_rank - 1] == n && m > 0 && n > 0 && k > 0 &&
             (gemm_library() == GemmLibrary::Small ||
              (gemm_library() == GemmLibrary::Auto && use_small(trans_b, m, n, k)))) {
    // A bias row (a linear layer's): the small kernel reads it as C's old
    // value in every row, beta * C[j] as the broadcast below would have
    // stored it, so the result is the same to the bit without writing the
    // broadcast into Y and reading it back (16 x 128: ~0.1 us of 1.0).
    const float *row = c;
    if (beta != 1.f) {
      // beta * C[j] rounded as the broadcast rounds it: a scaled copy.
      thread_local std::vector<float> scaled;
      scaled.assign(c, c + n);
      for (float &v : scaled)
        v *= beta;
      row = scaled.data();
    }
    small_sgemm(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n, 1.f,
                y, n, row);
    return;
  } else if (c && beta != 0.f) {
    // Broadcast C into Y, then let sgemm add alpha * A * B with beta = the
    // op's beta applied here.
    if (c_rank > 2)
      pipert_fail("Gemm: C has rank %lld, at most 2 allowed", (long long)c_rank);
    int64_t cm = c_rank == 2 ? c_shape[0] : 1;
    int64_t cn = c_rank >= 1 ? c_shape[c_rank - 1] : 1;
    if ((cm != 1 && cm != m) || (cn != 1 && cn != n))
      pipert_fail("Gemm: C of shape (%lld, %lld) does not broadcast to (%lld, %lld)",
                  (long long)cm, (long long)cn, (long long)m, (long long)n);
    for (int64_t i = 0; i < m; ++i) {
      const float *crow = c + (cm == 1 ? 0 : i * cn);
      float *yrow = y + i * n;
      if (cn == 1)
        for (int64_t j = 0; j < n; ++j)
          yrow[j] = beta * crow[0];
      else
        for (int64_t j = 0; j < n; ++j)
          yrow[j] = beta * crow[j];
    }
    beta_eff = 1.f;
  }
  pipert_sgemm(ctx, trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n,
               beta_eff, y, n);
}

void pipert_matmul_t_f32(pipert_context *ctx, const float *a, int64_t ra, const int64_t *sa,
                         int trans_a, const float *b, int64_t rb, const int64_t *sb, int trans_b,
                         float *y) {
  const char *op = "MatMul";
  const MatMulPlan p = matmul_plan(op, ra, sa, trans_a, rb, sb, trans_b);
  const int64_t m = p.m, n = p.n, k = p.k;
  if (p.nbatch == 0)
    return;
  // B shared by every batch of a non-transposed A: one tall GEMM.
  if (p.nb == 1 && !trans_a && p.na == p.nbatch) {
    pipert_sgemm(ctx, 0, trans_b, m * p.nbatch, n, k, 1.f, a, p.lda, b, p.ldb, 0.f, y, n);
    return;
  }
  // General broadcast of the batch axes: one GEMM per batch; the small
  // kernel's products in one call (the same kernel pipert_sgemm would pick,
  // so the same bits).
  if (m > 0 && n > 0 && k > 0 && k <= INT32_MAX && p.lda <= INT32_MAX && p.ldb <= INT32_MAX &&
      (gemm_library() == GemmLibrary::Small ||
       (gemm_library() == GemmLibrary::Auto && use_small(trans_b, m, n, k)))) {
    small_sgemm_batch(p, trans_a, trans_b, a, b, y);
    return;
  }
  for_each_batch(p, [&](int64_t bi, int64_t oa, int64_t ob) {
    pipert_sgemm(ctx, trans_a, trans_b, m, n, k, 1.f, a + oa * m * k, p.lda, b + ob * k * n,
                 p.ldb, 0.f, y + bi * m * n, n);
  });
}

void pipert_matmul_f32(pipert_context *ctx, const float *a, int64_t ra, const int64_t *sa,
                       const float *b, int64_t rb, const int64_t *sb, float *y) {
  int64_t sa2[kMaxRank], sb2[kMaxRank];
  int64_t ra2 = matmul_promote("MatMul", true, ra, sa, sa2);
  int64_t rb2 = matmul_promote("MatMul", false, rb, sb, sb2);
  pipert_matmul_t_f32(ctx, a, ra2, sa2, 0, b, rb2, sb2, 0, y);
}

} // extern "C"
