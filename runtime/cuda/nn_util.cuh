//===- nn_util.cuh - what the CUDA nn kernels share -----------------*- C++ -*-===//
//
// cuBLAS GEMMs on row-major data (C^T = B^T A^T in cuBLAS's column-major
// view; batched where the batch strides are uniform) and the row-group
// reductions of the normalisations and losses. Included by linalg.cu,
// norm.cu, conv.cu and loss.cu (laid out like runtime/cpu).
//
//===----------------------------------------------------------------------===//
#ifndef PIPERT_CUDA_NN_UTIL_CUH
#define PIPERT_CUDA_NN_UTIL_CUH

#include "kernels.cuh"
#include "../core/formulas.h"

namespace pipert::cuda::nn {

inline void check_blas_dim(const char *op, int64_t v) {
  if (v < 0 || v > INT32_MAX)
    pipert_fail("%s: dimension %lld does not fit BLAS's int", op, (long long)v);
}

inline cublasHandle_t blas(pipert_context *ctx) { return cx(ctx)->blas; }

// Row-major C (m x n, ldc) = alpha op(A) op(B) + beta C over `batch`
// matrices with the given element strides (0: shared).
inline void gemm_strided(pipert_context *ctx, const char *op, int ta, int tb, int64_t m, int64_t n,
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


} // namespace pipert::cuda::nn

#endif
