//===- linalg.cpp - GEMM and MatMul through OpenBLAS (CPU) ----------------===//
#include "kernel_util.h"

#include <cblas.h>

// Declared by OpenBLAS's cblas.h, but not by every cblas.h a system may put
// first on the include path.
extern "C" void openblas_set_num_threads(int num_threads);

using namespace pipert::cpu;

namespace pipert::cpu {

void blas_threads(pipert_context *ctx) {
  // OpenBLAS keeps the count globally; only call it on a change, the call is
  // not free.
  static thread_local int current = -1;
  int want = ctx ? pipert_context_threads(ctx) : 1;
  if (want != current) {
    openblas_set_num_threads(want);
    current = want;
  }
}

} // namespace pipert::cpu

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
  blas_threads(ctx);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), alpha, a, int(lda), b,
              int(ldb), beta, c, int(ldc));
}

void pipert_gemm_f32(pipert_context *ctx, const float *a, const float *b, const float *c,
                     int64_t c_rank, const int64_t *c_shape, int64_t m, int64_t n, int64_t k,
                     int trans_a, int trans_b, float alpha, float beta, float *y) {
  float beta_eff = 0.f;
  if (c && beta != 0.f) {
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
  check_rank(op, ra);
  check_rank(op, rb);
  if (ra < 2 || rb < 2)
    pipert_fail("%s: transposed operands need rank >= 2", op);
  int64_t m = trans_a ? sa[ra - 1] : sa[ra - 2];
  int64_t ka = trans_a ? sa[ra - 2] : sa[ra - 1];
  int64_t kb = trans_b ? sb[rb - 1] : sb[rb - 2];
  int64_t n = trans_b ? sb[rb - 2] : sb[rb - 1];
  if (ka != kb)
    pipert_fail("%s: inner dimensions differ (%lld vs %lld)", op, (long long)ka, (long long)kb);
  int64_t k = ka;
  int64_t lda = sa[ra - 1], ldb = sb[rb - 1];
  int64_t batch[kMaxRank];
  int64_t rbatch = broadcast_shape(op, ra - 2, sa, rb - 2, sb, batch);
  int64_t nbatch = numel(rbatch, batch);
  int64_t na = numel(ra - 2, sa), nb = numel(rb - 2, sb);
  if (nbatch == 0)
    return;
  // B shared by every batch of a non-transposed A: one tall GEMM.
  if (nb == 1 && !trans_a && na == nbatch) {
    pipert_sgemm(ctx, 0, trans_b, m * nbatch, n, k, 1.f, a, lda, b, ldb, 0.f, y, n);
    return;
  }
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
    pipert_sgemm(ctx, trans_a, trans_b, m, n, k, 1.f, a + oa * m * k, lda, b + ob * k * n, ldb,
                 0.f, y + bi * m * n, n);
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

} // extern "C"
