//===- kernels.cuh - shared device helpers of the CUDA kernels ----*- CUDA -*-===//
//
// Shape checks (the same messages as the CPU backend), strided/broadcast index
// layouts with adjacent contiguous axes merged on the host, grid-stride
// launches on the context's stream, and warp/block reductions.
//
//===----------------------------------------------------------------------===//
#ifndef PIPERT_CUDA_KERNELS_CUH
#define PIPERT_CUDA_KERNELS_CUH

#include "cuda_util.h"
#include "pipert/pipert_kernels.h"
#include "../core/shape_util.h"

#include <cfloat>
#include <cmath>

namespace pipert::cuda {

using namespace ::pipert;

// An iteration space of `rank` axes (row-major linear index) and, for each of
// K operands, its element stride on every axis.
template <int K> struct Layout {
  int rank = 0;
  int64_t n = 1; // elements in the space
  int64_t dims[kMaxRank];
  int64_t st[K][kMaxRank];

  __device__ __forceinline__ void offsets(int64_t i, int64_t *off) const {
#pragma unroll
    for (int k = 0; k < K; ++k)
      off[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t dim = dims[d];
      const int64_t q = i / dim, r = i - q * dim;
      i = q;
#pragma unroll
      for (int k = 0; k < K; ++k)
        off[k] += r * st[k][d];
    }
  }
};

// Builds the layout of `shape` with operand strides `strides[k]`, dropping
// extent-1 axes and merging axes that are contiguous for every operand.
template <int K>
Layout<K> make_layout(int64_t rank, const int64_t *shape, const int64_t (*strides)[kMaxRank]) {
  Layout<K> l;
  l.n = numel(rank, shape);
  int r = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (shape[i] == 1)
      continue;
    bool merge = r > 0;
    for (int k = 0; k < K && merge; ++k)
      merge = l.st[k][r - 1] == strides[k][i] * shape[i];
    if (merge) {
      l.dims[r - 1] *= shape[i];
      for (int k = 0; k < K; ++k)
        l.st[k][r - 1] = strides[k][i];
    } else {
      l.dims[r] = shape[i];
      for (int k = 0; k < K; ++k)
        l.st[k][r] = strides[k][i];
      ++r;
    }
  }
  l.rank = r;
  return l;
}

constexpr int kBlock = 256;

// Blocks for a grid-stride loop over n elements.
inline unsigned grid_for(pipert_context *ctx, int64_t n, int block = kBlock) {
  int64_t blocks = (n + block - 1) / block;
  int64_t cap = int64_t(cx(ctx)->sm_count) * 32;
  if (blocks > cap)
    blocks = cap;
  return unsigned(blocks < 1 ? 1 : blocks);
}

inline cudaStream_t stream_of(pipert_context *ctx) { return cx(ctx)->stream; }

#define PIPERT_GRID_STRIDE(i, n)                                                                 \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);                      \
       i += int64_t(gridDim.x) * blockDim.x)

// Elementwise map over n elements: y[i] = f(i). Launch with launch_map.
template <typename F> __global__ void map_kernel(int64_t n, F f) {
  PIPERT_GRID_STRIDE(i, n) { f(i); }
}

template <typename F> void launch_map(pipert_context *ctx, const char *op, int64_t n, F f) {
  if (n <= 0)
    return;
  map_kernel<<<grid_for(ctx, n), kBlock, 0, stream_of(ctx)>>>(n, f);
  PIPERT_LAUNCH_CHECK(op);
}

template <typename T> __device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}
template <typename T> __device__ __forceinline__ T warp_max(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = max(v, __shfl_down_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024); the result is
// valid in every thread. `shared` holds 32 T. Must be reached by all threads.
template <typename T> __device__ T block_sum(T v, T *shared) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0)
    shared[wid] = v;
  __syncthreads();
  const int nw = blockDim.x >> 5;
  T t = lane < nw ? shared[lane] : T(0);
  if (wid == 0)
    t = warp_sum(t);
  if (threadIdx.x == 0)
    shared[0] = t;
  __syncthreads();
  T r = shared[0];
  __syncthreads();
  return r;
}
template <typename T> __device__ T block_max(T v, T *shared, T lowest) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0)
    shared[wid] = v;
  __syncthreads();
  const int nw = blockDim.x >> 5;
  T t = lane < nw ? shared[lane] : lowest;
  if (wid == 0)
    t = warp_max(t);
  if (threadIdx.x == 0)
    shared[0] = t;
  __syncthreads();
  T r = shared[0];
  __syncthreads();
  return r;
}

// Records the first device-side error; the host reports it (cuda_util.h).
__device__ __forceinline__ void raise_error(DeviceError *err, int code, long long value,
                                            long long aux) {
  if (atomicCAS(&err->code, 0, code) == 0) {
    err->value = value;
    err->aux = aux;
  }
}

inline size_t elem_size(const char *op, pipert_dtype t) {
  size_t s = pipert_dtype_size(t);
  if (!s)
    pipert_fail("%s: unknown dtype %d", op, int(t));
  return s;
}

// Strided gather of a view (shape, per-axis element strides from base) of x
// into contiguous y, for elements of `es` bytes (data.cu).
void copy_view(pipert_context *ctx, const char *op, size_t es, const void *x, int64_t rank,
               const int64_t *shape, const int64_t *strides, void *y);

// Reduces x (pipert_reduce_op `op`) over the axes flagged in `reduced`: y has
// the layout of x's shape with extent 1 on those axes (data.cu). The result
// is multiplied by `scale`.
void reduce_axes(pipert_context *ctx, const char *name, int op, const float *x, int64_t rank,
                 const int64_t *shape, const bool *reduced, float scale, float *y);

} // namespace pipert::cuda

#endif // PIPERT_CUDA_KERNELS_CUH
