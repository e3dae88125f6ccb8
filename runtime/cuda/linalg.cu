//===- linalg.cu - GEMM and MatMul (CUDA) ------------------------------------===//
//
// GEMMs and (batched) MatMul on cuBLAS (runtime/cpu/linalg.cpp on the CPU).
//
//===----------------------------------------------------------------------===//
#include "nn_util.cuh"

using namespace pipert::cuda;
using namespace pipert::cuda::nn;

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
  if (c == y && c_rank == 2 && c_shape[0] == m && c_shape[1] == n) {
    // Accumulated in place (a weight gradient added to its accumulator).
    beta_eff = beta;
  } else if (c && beta != 0.f) {
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
  const MatMulPlan p = matmul_plan(op, ra, sa, trans_a, rb, sb, trans_b);
  const int64_t m = p.m, n = p.n, k = p.k;
  if (p.nbatch == 0)
    return;
  // B shared by every batch of a non-transposed A: one tall GEMM.
  if (p.nb == 1 && !trans_a && p.na == p.nbatch) {
    gemm_strided(ctx, op, 0, trans_b, m * p.nbatch, n, k, 1.f, a, p.lda, 0, b, p.ldb, 0, 0.f, y,
                 n, 0, 1);
    return;
  }
  // Uniform batch strides (each operand either has every batch or one):
  // one strided-batched GEMM.
  if ((p.na == p.nbatch || p.na == 1) && (p.nb == p.nbatch || p.nb == 1)) {
    gemm_strided(ctx, op, trans_a, trans_b, m, n, k, 1.f, a, p.lda, p.na == 1 ? 0 : m * k, b,
                 p.ldb, p.nb == 1 ? 0 : k * n, 0.f, y, n, m * n, p.nbatch);
    return;
  }
  // General broadcast of the batch axes: one GEMM per batch.
  for_each_batch(p, [&](int64_t bi, int64_t oa, int64_t ob) {
    gemm_strided(ctx, op, trans_a, trans_b, m, n, k, 1.f, a + oa * m * k, p.lda, 0,
                 b + ob * k * n, p.ldb, 0, 0.f, y + bi * m * n, n, 0, 1);
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
