//===- data.cu - data movement, cast, reductions (CUDA) --------------------===//
//
// Transpose, Slice and Expand are one strided-gather kernel (copy_view) over
// the output; Concat and Split are 2-D memcpys; Gather's out-of-range indices
// are raised on the device flag (cuda_util.h) and reported at the next sync.
// Reductions run one warp (or one block, or one thread for column-like
// reductions) per output element, accumulating in double like the CPU.
//
//===----------------------------------------------------------------------===//
#include "kernels.cuh"
#include "../core/formulas.h"

#include <limits>

using namespace pipert::cuda;

namespace pipert::cuda {

template <typename T>
__global__ void copy_view_kernel(Layout<1> l, const T *__restrict__ x, T *__restrict__ y) {
  PIPERT_GRID_STRIDE(i, l.n) {
    int64_t off;
    l.offsets(i, &off);
    y[i] = x[off];
  }
}

void copy_view(pipert_context *ctx, const char *op, size_t es, const void *x, int64_t rank,
               const int64_t *shape, const int64_t *strides, void *y) {
  int64_t st[1][kMaxRank];
  for (int64_t i = 0; i < rank; ++i)
    st[0][i] = strides[i];
  Layout<1> l = make_layout<1>(rank, shape, st);
  if (l.n == 0)
    return;
  // A contiguous view is one memcpy.
  if (l.rank == 0 || (l.rank == 1 && l.st[0][0] == 1)) {
    pipert_copy_device(ctx, y, x, size_t(l.n) * es);
    return;
  }
  const unsigned grid = grid_for(ctx, l.n);
  cudaStream_t s = stream_of(ctx);
  switch (es) {
  case 1: copy_view_kernel<<<grid, kBlock, 0, s>>>(l, (const uint8_t *)x, (uint8_t *)y); break;
  case 2: copy_view_kernel<<<grid, kBlock, 0, s>>>(l, (const uint16_t *)x, (uint16_t *)y); break;
  case 4: copy_view_kernel<<<grid, kBlock, 0, s>>>(l, (const uint32_t *)x, (uint32_t *)y); break;
  case 8: copy_view_kernel<<<grid, kBlock, 0, s>>>(l, (const uint64_t *)x, (uint64_t *)y); break;
  default: pipert_fail("%s: unsupported element size %zu", op, es);
  }
  PIPERT_LAUNCH_CHECK(op);
}

} // namespace pipert::cuda

namespace {

//===------------------------------ reductions ----------------------------===//

__device__ __forceinline__ double reduce_init(int op) {
  return op == PIPERT_REDUCE_MAX ? -INFINITY : op == PIPERT_REDUCE_MIN ? INFINITY : 0.0;
}
__device__ __forceinline__ double reduce_combine(int op, double a, double v) {
  switch (op) {
  case PIPERT_REDUCE_MAX: return a < v ? v : a;
  case PIPERT_REDUCE_MIN: return v < a ? v : a;
  default: return a + v;
  }
}

// G threads per output: 1 (a thread per output, for outputs contiguous in x
// and strided reductions), 32 (a warp) or kBlock (a block).
template <int G>
__global__ void reduce_kernel(Layout<1> outer, Layout<1> inner, const float *__restrict__ x,
                              int op, double div, float scale, float *__restrict__ y) {
  __shared__ double shared[32];
  constexpr int per_block = G >= kBlock ? 1 : kBlock / G;
  const int lane = threadIdx.x % G, slot = threadIdx.x / G;
  for (int64_t base = int64_t(blockIdx.x) * per_block; base < outer.n;
       base += int64_t(gridDim.x) * per_block) {
    const int64_t o = base + slot;
    const bool active = o < outer.n;
    double acc = reduce_init(op);
    if (active) {
      int64_t ob;
      outer.offsets(o, &ob);
      for (int64_t r = lane; r < inner.n; r += G) {
        int64_t ib;
        inner.offsets(r, &ib);
        double v = x[ob + ib];
        if (op == PIPERT_REDUCE_SUM_SQUARE)
          v *= v;
        acc = reduce_combine(op, acc, v);
      }
    }
    if (G == 32) {
#pragma unroll
      for (int s = 16; s > 0; s >>= 1)
        acc = reduce_combine(op, acc, __shfl_down_sync(0xffffffffu, acc, s));
    } else if (G == kBlock) {
      const int wl = threadIdx.x & 31, wid = threadIdx.x >> 5;
#pragma unroll
      for (int s = 16; s > 0; s >>= 1)
        acc = reduce_combine(op, acc, __shfl_down_sync(0xffffffffu, acc, s));
      __syncthreads();
      if (wl == 0)
        shared[wid] = acc;
      __syncthreads();
      if (wid == 0) {
        acc = wl < kBlock / 32 ? shared[wl] : reduce_init(op);
#pragma unroll
        for (int s = 16; s > 0; s >>= 1)
          acc = reduce_combine(op, acc, __shfl_down_sync(0xffffffffu, acc, s));
      }
    }
    if (active && lane == 0)
      y[o] = float(acc / div) * scale;
  }
}

void reduce_impl(pipert_context *ctx, const char *name, int op, const float *x, int64_t rank,
                 const int64_t *shape, const bool *red, float scale, float *y) {
  int64_t xst[kMaxRank], s = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    xst[i] = s;
    s *= shape[i];
  }
  int64_t kshape[kMaxRank], rshape[kMaxRank], kst[1][kMaxRank], rst[1][kMaxRank];
  int64_t nk = 0, nr = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (red[i]) {
      rshape[nr] = shape[i];
      rst[0][nr++] = xst[i];
    } else {
      kshape[nk] = shape[i];
      kst[0][nk++] = xst[i];
    }
  }
  Layout<1> outer = make_layout<1>(nk, kshape, kst);
  Layout<1> inner = make_layout<1>(nr, rshape, rst);
  if (outer.n == 0)
    return;
  const double div = op == PIPERT_REDUCE_MEAN ? double(inner.n) : 1.0;
  const int64_t sms = cx(ctx)->sm_count;
  cudaStream_t st = stream_of(ctx);
  const bool outputs_contiguous = outer.rank >= 1 && outer.st[0][outer.rank - 1] == 1;
  const bool strided_reduction = inner.rank >= 1 && inner.st[0][inner.rank - 1] != 1;
  if (outputs_contiguous && strided_reduction && outer.n >= 1024) {
    reduce_kernel<1><<<grid_for(ctx, outer.n), kBlock, 0, st>>>(outer, inner, x, op, div, scale,
                                                                 y);
  } else if (outer.n >= sms * 64 || inner.n <= 1024) {
    const int64_t blocks = std::min<int64_t>((outer.n + 7) / 8, sms * 32);
    reduce_kernel<32><<<unsigned(blocks), kBlock, 0, st>>>(outer, inner, x, op, div, scale, y);
  } else {
    const int64_t blocks = std::min<int64_t>(outer.n, sms * 32);
    reduce_kernel<kBlock><<<unsigned(blocks), kBlock, 0, st>>>(outer, inner, x, op, div, scale,
                                                               y);
  }
  PIPERT_LAUNCH_CHECK(name);
}

//===------------------------------ slice ---------------------------------===//

//===------------------------------ gather --------------------------------===//

template <typename T>
__global__ void gather_kernel(const T *__restrict__ data, const int64_t *__restrict__ idx,
                              int64_t nidx, int64_t mid, int64_t inner, int64_t total,
                              DeviceError *err, T *__restrict__ y) {
  PIPERT_GRID_STRIDE(i, total) {
    const int64_t j = i % inner, ok = i / inner;
    const int64_t k = ok % nidx, o = ok / nidx;
    int64_t v = idx[k];
    if (v < 0)
      v += mid;
    if (v < 0 || v >= mid) {
      raise_error(err, kErrGatherIndex, (long long)idx[k], (long long)mid);
      y[i] = T(0);
      continue;
    }
    y[i] = data[(o * mid + v) * inner + j];
  }
}

__global__ void gather_grad_kernel(const float *__restrict__ dy, const int64_t *__restrict__ idx,
                                   int64_t nidx, int64_t mid, int64_t inner, int64_t total,
                                   DeviceError *err, float *__restrict__ dx) {
  PIPERT_GRID_STRIDE(i, total) {
    const int64_t j = i % inner, ok = i / inner;
    const int64_t k = ok % nidx, o = ok / nidx;
    int64_t v = idx[k];
    if (v < 0)
      v += mid;
    if (v < 0 || v >= mid) {
      raise_error(err, kErrGatherGradIndex, (long long)idx[k], (long long)mid);
      continue;
    }
    atomicAdd(dx + (o * mid + v) * inner + j, dy[i]);
  }
}

//===------------------------------ cast ----------------------------------===//

template <typename From, typename To>
__global__ void cast_kernel(const From *__restrict__ x, To *__restrict__ y, int64_t n) {
  PIPERT_GRID_STRIDE(i, n) { y[i] = static_cast<To>(x[i]); }
}
template <typename From>
__global__ void cast_bool_kernel(const From *__restrict__ x, uint8_t *__restrict__ y, int64_t n) {
  PIPERT_GRID_STRIDE(i, n) { y[i] = x[i] != From(0); }
}

template <typename From>
void cast_from(pipert_context *ctx, const From *x, pipert_dtype to, void *y, int64_t n) {
  const unsigned g = grid_for(ctx, n);
  cudaStream_t s = stream_of(ctx);
  switch (to) {
  case PIPERT_F32: cast_kernel<<<g, kBlock, 0, s>>>(x, (float *)y, n); break;
  case PIPERT_F64: cast_kernel<<<g, kBlock, 0, s>>>(x, (double *)y, n); break;
  case PIPERT_I64: cast_kernel<<<g, kBlock, 0, s>>>(x, (int64_t *)y, n); break;
  case PIPERT_I32: cast_kernel<<<g, kBlock, 0, s>>>(x, (int32_t *)y, n); break;
  case PIPERT_I8: cast_kernel<<<g, kBlock, 0, s>>>(x, (int8_t *)y, n); break;
  case PIPERT_U8: cast_kernel<<<g, kBlock, 0, s>>>(x, (uint8_t *)y, n); break;
  case PIPERT_BOOL: cast_bool_kernel<<<g, kBlock, 0, s>>>(x, (uint8_t *)y, n); break;
  default: pipert_fail("Cast: unsupported target type %s", pipert_dtype_name(to));
  }
  PIPERT_LAUNCH_CHECK("Cast");
}

// Copies n_rows rows of `width` bytes with the given pitches (Concat/Split).
void copy_rows(pipert_context *ctx, const char *op, void *dst, size_t dpitch, const void *src,
               size_t spitch, size_t width, size_t n_rows) {
  if (!width || !n_rows)
    return;
  if (n_rows == 1 || (dpitch == width && spitch == width)) {
    pipert_copy_device(ctx, dst, src, width * n_rows);
    return;
  }
  cudaError_t st = cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, n_rows,
                                     cudaMemcpyDeviceToDevice, stream_of(ctx));
  if (st == cudaErrorInvalidPitchValue || st == cudaErrorInvalidValue) {
    // Pitches beyond what the copy engine takes: row by row.
    cudaGetLastError();
    for (size_t r = 0; r < n_rows; ++r)
      pipert_copy_device(ctx, static_cast<char *>(dst) + r * dpitch,
                         static_cast<const char *>(src) + r * spitch, width);
    return;
  }
  if (st != cudaSuccess)
    pipert_fail("%s: cudaMemcpy2DAsync failed: %s", op, cudaGetErrorString(st));
}

//===------------------------------ issue 15: index maps -------------------===//

template <typename T>
void tile_typed(pipert_context *ctx, const formula::TileGeom g, const T *x, T *y) {
  launch_map(ctx, "Tile", numel(g.y.rank, g.y.d),
             [=] __device__(int64_t i) { y[i] = x[formula::tile_source(g, i)]; });
}

template <typename T>
void cumsum_typed(pipert_context *ctx, const T *x, int64_t rank, const int64_t *shape,
                  int64_t axis, int exclusive, int reverse, T *y) {
  const bool ex = exclusive != 0, rev = reverse != 0;
  if (rank == 0) {
    launch_map(ctx, "CumSum", 1, [=] __device__(int64_t) { y[0] = ex ? T(0) : x[0]; });
    return;
  }
  const AxisSplit sp = split_at(rank, shape, norm_axis("CumSum", axis, rank));
  const int64_t mid = sp.mid, inner = sp.inner;
  launch_map(ctx, "CumSum", sp.outer * sp.inner, [=] __device__(int64_t line) {
    const int64_t o = line / inner, i = line - o * inner;
    const int64_t base = o * mid * inner + i;
    formula::cumsum_line(x + base, y + base, mid, inner, ex, rev);
  });
}

template <typename T>
void pad_typed(pipert_context *ctx, const formula::PadGeom g, const T *x, T value, T *y) {
  launch_map(ctx, "Pad", numel(g.y.rank, g.y.d), [=] __device__(int64_t i) {
    const int64_t s = formula::pad_source(g, i);
    y[i] = s < 0 ? value : x[s];
  });
}

template <typename T>
void trilu_typed(pipert_context *ctx, const T *x, int64_t n, int64_t rows, int64_t cols,
                 bool upper, int64_t k, T *y) {
  launch_map(ctx, "Trilu", n, [=] __device__(int64_t i) {
    const int64_t c = i % cols, r = (i / cols) % rows;
    y[i] = formula::trilu_keep(r, c, upper, k) ? x[i] : T(0);
  });
}

} // namespace

namespace pipert::cuda {

void reduce_axes(pipert_context *ctx, const char *name, int op, const float *x, int64_t rank,
                 const int64_t *shape, const bool *reduced, float scale, float *y) {
  reduce_impl(ctx, name, op, x, rank, shape, reduced, scale, y);
}

} // namespace pipert::cuda

//===--------------------------- GatherND, ScatterND -----------------------===//
//
// One thread per element j of a slice loops over the tuples in order, so
// that repeated tuples combine (or, for ScatterND's reduction none, the last
// one wins) exactly as on the CPU, without atomics: slices start at
// multiples of the slice size, so no two threads touch one element.

namespace {

// The element offset of tuple t's slice, or -1 after raising the error.
__device__ __forceinline__ int64_t tuple_offset_dev(const pipert::TupleLayout &l,
                                                    const int64_t *__restrict__ idx, int64_t t,
                                                    DeviceError *err) {
  int64_t off = (l.per_batch ? t / l.per_batch : 0) * l.batch_stride;
  for (int64_t j = 0; j < l.k; ++j) {
    int64_t i = idx[t * l.k + j];
    if (i < 0)
      i += l.dims[j];
    if (i < 0 || i >= l.dims[j]) {
      raise_error(err, kErrTupleIndex, (long long)idx[t * l.k + j], (long long)l.dims[j]);
      return -1;
    }
    off += i * l.strides[j];
  }
  return off;
}

template <typename T>
__global__ void gather_nd_kernel(pipert::TupleLayout l, const T *__restrict__ data,
                                 const int64_t *__restrict__ idx, DeviceError *err,
                                 T *__restrict__ y) {
  PIPERT_GRID_STRIDE(i, l.tuples * l.slice) {
    const int64_t t = i / l.slice, j = i % l.slice;
    const int64_t off = tuple_offset_dev(l, idx, t, err);
    y[i] = off < 0 ? T(0) : data[off + j];
  }
}

// y (already data, or zeros) combined with the tuples' slices of src:
// reduction none (replace), add, mul, max or min.
template <typename T>
__global__ void scatter_nd_kernel(pipert::TupleLayout l, const int64_t *__restrict__ idx,
                                  const T *__restrict__ src, int reduction, DeviceError *err,
                                  T *__restrict__ y) {
  PIPERT_GRID_STRIDE(j, l.slice) {
    for (int64_t t = 0; t < l.tuples; ++t) {
      const int64_t off = tuple_offset_dev(l, idx, t, err);
      if (off < 0)
        return;
      T &d = y[off + j];
      const T v = src[t * l.slice + j];
      switch (reduction) {
      case PIPERT_SCATTER_NONE: d = v; break;
      case PIPERT_SCATTER_ADD: d = d + v; break;
      case PIPERT_SCATTER_MUL: d = d * v; break;
      case PIPERT_SCATTER_MAX: d = d < v ? v : d; break;
      default: d = v < d ? v : d; break;
      }
    }
  }
}

// dx (already dy) with the tuples' slices zeroed.
__global__ void scatter_nd_grad_kernel(pipert::TupleLayout l, const int64_t *__restrict__ idx,
                                       DeviceError *err, float *__restrict__ dx) {
  PIPERT_GRID_STRIDE(i, l.tuples * l.slice) {
    const int64_t off = tuple_offset_dev(l, idx, i / l.slice, err);
    if (off >= 0)
      dx[off + i % l.slice] = 0.f;
  }
}

template <typename T>
void launch_scatter(pipert_context *ctx, const pipert::TupleLayout &l, const int64_t *idx,
                    const void *src, int reduction, void *y) {
  scatter_nd_kernel<<<grid_for(ctx, l.slice), kBlock, 0, stream_of(ctx)>>>(
      l, idx, (const T *)src, reduction, cx(ctx)->err, (T *)y);
}

} // namespace

//===----------------------- GatherElements, ScatterElements ---------------===//
//
// One thread per line of the indices along the axis (the entries that can
// name the same data element) walks it in order: results equal the CPU's.

namespace {

__device__ __forceinline__ void element_line_dev(const pipert::ElementLayout &l, int64_t line,
                                                 int64_t *idx_base, int64_t *data_base) {
  *idx_base = (line / l.inner) * l.extent * l.inner + line % l.inner;
  int64_t rest = *idx_base, off = 0;
  for (int64_t d = l.rank - 1; d >= 0; --d) {
    if (d != l.axis)
      off += (rest % l.idx_shape[d]) * l.data_strides[d];
    rest /= l.idx_shape[d];
  }
  *data_base = off;
}

// The data offset of a line's entry j, or -1 after raising the error.
__device__ __forceinline__ int64_t element_offset_dev(const pipert::ElementLayout &l,
                                                      const int64_t *__restrict__ idx,
                                                      int64_t ib, int64_t db, int64_t j,
                                                      DeviceError *err) {
  const int64_t i = idx[ib + j * l.inner];
  const int64_t v = i < 0 ? i + l.dim : i;
  if (v < 0 || v >= l.dim) {
    raise_error(err, kErrElementIndex, (long long)i, (long long)l.dim);
    return -1;
  }
  return db + v * l.data_strides[l.axis];
}

template <typename T>
__global__ void gather_elements_kernel(pipert::ElementLayout l, const T *__restrict__ data,
                                       const int64_t *__restrict__ idx, DeviceError *err,
                                       T *__restrict__ y) {
  PIPERT_GRID_STRIDE(line, l.lines) {
    int64_t ib, db;
    element_line_dev(l, line, &ib, &db);
    for (int64_t j = 0; j < l.extent; ++j) {
      const int64_t off = element_offset_dev(l, idx, ib, db, j, err);
      y[ib + j * l.inner] = off < 0 ? T(0) : data[off];
    }
  }
}

template <typename T>
__global__ void scatter_elements_kernel(pipert::ElementLayout l, const int64_t *__restrict__ idx,
                                        const T *__restrict__ src, int reduction,
                                        DeviceError *err, T *__restrict__ y) {
  PIPERT_GRID_STRIDE(line, l.lines) {
    int64_t ib, db;
    element_line_dev(l, line, &ib, &db);
    for (int64_t j = 0; j < l.extent; ++j) {
      const int64_t off = element_offset_dev(l, idx, ib, db, j, err);
      if (off < 0)
        break;
      T &d = y[off];
      const T v = src[ib + j * l.inner];
      switch (reduction) {
      case PIPERT_SCATTER_NONE: d = v; break;
      case PIPERT_SCATTER_ADD: d = d + v; break;
      case PIPERT_SCATTER_MUL: d = d * v; break;
      case PIPERT_SCATTER_MAX: d = d < v ? v : d; break;
      default: d = v < d ? v : d; break;
      }
    }
  }
}

__global__ void scatter_elements_grad_kernel(pipert::ElementLayout l,
                                             const int64_t *__restrict__ idx, DeviceError *err,
                                             float *__restrict__ dx) {
  PIPERT_GRID_STRIDE(line, l.lines) {
    int64_t ib, db;
    element_line_dev(l, line, &ib, &db);
    for (int64_t j = 0; j < l.extent; ++j) {
      const int64_t off = element_offset_dev(l, idx, ib, db, j, err);
      if (off >= 0)
        dx[off] = 0.f;
    }
  }
}

template <typename T>
void launch_scatter_elements(pipert_context *ctx, const pipert::ElementLayout &l,
                             const int64_t *idx, const void *src, int reduction, void *y) {
  scatter_elements_kernel<<<grid_for(ctx, l.lines), kBlock, 0, stream_of(ctx)>>>(
      l, idx, (const T *)src, reduction, cx(ctx)->err, (T *)y);
}

} // namespace

namespace {

/// A gather's launch: `launch(T{}, grid)` for `dtype`'s element type over
/// `n` threads (nothing where n is 0), then the launch's check.
template <class Launch>
void launch_typed(pipert_context *ctx, const char *op, pipert_dtype dtype, int64_t n,
                  Launch launch) {
  if (n == 0)
    return;
  const unsigned g = grid_for(ctx, n);
  pipert::typed_dispatch(op, dtype, elem_size(op, dtype), PIPERT_SCATTER_NONE,
                         [&](auto t) { launch(t, g); });
  PIPERT_LAUNCH_CHECK(op);
}

/// A scatter's start: its reduction checked, y set to data (unless in
/// place). Returns the element size.
size_t scatter_start(pipert_context *ctx, const char *op, pipert_dtype dtype, int64_t reduction,
                     int64_t rank, const int64_t *shape, const void *data, void *y) {
  const size_t es = elem_size(op, dtype);
  if (reduction < 0 || reduction > PIPERT_SCATTER_MIN)
    pipert_fail("%s: unknown reduction %lld", op, (long long)reduction);
  if (y != data)
    pipert_copy_device(ctx, y, data, size_t(numel(rank, shape)) * es);
  return es;
}

} // namespace

extern "C" {

void pipert_transpose(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank,
                      const int64_t *shape, const int64_t *perm, void *y) {
  const char *op = "Transpose";
  size_t es = elem_size(op, dtype);
  TransposeView v = transpose_view(op, rank, shape, perm);
  copy_view(ctx, op, es, x, rank, v.shape, v.strides, y);
}

void pipert_concat(pipert_context *ctx, pipert_dtype dtype, int64_t n, const void *const *xs,
                   const int64_t *axis_sizes, int64_t rank, const int64_t *y_shape, int64_t axis,
                   void *y) {
  const char *op = "Concat";
  check_rank(op, rank);
  size_t es = elem_size(op, dtype);
  int64_t a = norm_axis(op, axis, rank);
  AxisSplit s = split_at(rank, y_shape, a);
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i)
    total += axis_sizes[i];
  if (total != s.mid)
    pipert_fail("%s: inputs add up to %lld along axis %lld, output has %lld", op,
                (long long)total, (long long)a, (long long)s.mid);
  const size_t row = size_t(s.mid * s.inner) * es;
  size_t at = 0;
  for (int64_t i = 0; i < n; ++i) {
    const size_t chunk = size_t(axis_sizes[i] * s.inner) * es;
    copy_rows(ctx, op, static_cast<char *>(y) + at, row, xs[i], chunk, chunk, size_t(s.outer));
    at += chunk;
  }
}

void pipert_split(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank,
                  const int64_t *shape, int64_t axis, int64_t n, const int64_t *split,
                  void *const *ys) {
  const char *op = "Split";
  check_rank(op, rank);
  size_t es = elem_size(op, dtype);
  int64_t a = norm_axis(op, axis, rank);
  AxisSplit s = split_at(rank, shape, a);
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i)
    total += split[i];
  if (total != s.mid)
    pipert_fail("%s: split sizes add up to %lld, axis %lld has %lld", op, (long long)total,
                (long long)a, (long long)s.mid);
  const size_t row = size_t(s.mid * s.inner) * es;
  size_t at = 0;
  for (int64_t i = 0; i < n; ++i) {
    const size_t chunk = size_t(split[i] * s.inner) * es;
    copy_rows(ctx, op, ys[i], chunk, static_cast<const char *>(x) + at, row, chunk,
              size_t(s.outer));
    at += chunk;
  }
}

void pipert_slice_shape(int64_t rank, const int64_t *shape, int64_t n_axes,
                        const int64_t *starts, const int64_t *ends, const int64_t *axes,
                        const int64_t *steps, int64_t *y_shape) {
  SliceView v = slice_view(rank, shape, n_axes, starts, ends, axes, steps);
  std::copy(v.out, v.out + rank, y_shape);
}

void pipert_slice(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank,
                  const int64_t *shape, int64_t n_axes, const int64_t *starts,
                  const int64_t *ends, const int64_t *axes, const int64_t *steps, void *y) {
  size_t es = elem_size("Slice", dtype);
  SliceView v = slice_view(rank, shape, n_axes, starts, ends, axes, steps);
  int64_t strides[kMaxRank], base = 0, s = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    base += v.start[i] * s;
    strides[i] = v.step[i] * s;
    s *= shape[i];
  }
  if (numel(rank, v.out) == 0)
    return;
  copy_view(ctx, "Slice", es, static_cast<const char *>(x) + base * int64_t(es), rank, v.out,
            strides, y);
}

void pipert_slice_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                           const int64_t *x_shape, int64_t n_axes, const int64_t *starts,
                           const int64_t *ends, const int64_t *axes, const int64_t *steps,
                           float *dx) {
  SliceView v = slice_view(rank, x_shape, n_axes, starts, ends, axes, steps);
  pipert_memset_zero(ctx, dx, size_t(numel(rank, x_shape)) * sizeof(float));
  if (numel(rank, v.out) == 0)
    return;
  int64_t st[1][kMaxRank], base = 0, s = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    base += v.start[i] * s;
    st[0][i] = v.step[i] * s;
    s *= x_shape[i];
  }
  const Layout<1> l = make_layout<1>(rank, v.out, st);
  float *d = dx + base;
  launch_map(ctx, "SliceGrad", l.n, [=] __device__(int64_t i) {
    int64_t off;
    l.offsets(i, &off);
    d[off] = dy[i];
  });
}

void pipert_gather(pipert_context *ctx, pipert_dtype dtype, const void *data, int64_t rank,
                   const int64_t *shape, const int64_t *indices, int64_t idx_rank,
                   const int64_t *idx_shape, int64_t axis, void *y) {
  const char *op = "Gather";
  check_rank(op, rank);
  int64_t a = norm_axis(op, axis, rank);
  AxisSplit s = split_at(rank, shape, a);
  const int64_t nidx = numel(idx_rank, idx_shape);
  const int64_t total = s.outer * nidx * s.inner;
  if (total == 0)
    return;
  const unsigned g = grid_for(ctx, total);
  cudaStream_t st = stream_of(ctx);
  DeviceError *err = cx(ctx)->err;
  switch (elem_size(op, dtype)) {
  case 1:
    gather_kernel<<<g, kBlock, 0, st>>>((const uint8_t *)data, indices, nidx, s.mid, s.inner,
                                        total, err, (uint8_t *)y);
    break;
  case 2:
    gather_kernel<<<g, kBlock, 0, st>>>((const uint16_t *)data, indices, nidx, s.mid, s.inner,
                                        total, err, (uint16_t *)y);
    break;
  case 4:
    gather_kernel<<<g, kBlock, 0, st>>>((const uint32_t *)data, indices, nidx, s.mid, s.inner,
                                        total, err, (uint32_t *)y);
    break;
  case 8:
    gather_kernel<<<g, kBlock, 0, st>>>((const uint64_t *)data, indices, nidx, s.mid, s.inner,
                                        total, err, (uint64_t *)y);
    break;
  default: pipert_fail("%s: unsupported dtype", op);
  }
  PIPERT_LAUNCH_CHECK(op);
}

void pipert_gather_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                            const int64_t *data_shape, const int64_t *indices, int64_t idx_rank,
                            const int64_t *idx_shape, int64_t axis, float *dx) {
  const char *op = "GatherGrad";
  check_rank(op, rank);
  int64_t a = norm_axis(op, axis, rank);
  AxisSplit s = split_at(rank, data_shape, a);
  const int64_t nidx = numel(idx_rank, idx_shape);
  pipert_memset_zero(ctx, dx, size_t(numel(rank, data_shape)) * sizeof(float));
  const int64_t total = s.outer * nidx * s.inner;
  if (total == 0)
    return;
  gather_grad_kernel<<<grid_for(ctx, total), kBlock, 0, stream_of(ctx)>>>(
      dy, indices, nidx, s.mid, s.inner, total, cx(ctx)->err, dx);
  PIPERT_LAUNCH_CHECK(op);
}


void pipert_gather_nd(pipert_context *ctx, pipert_dtype dtype, const void *data, int64_t rank,
                      const int64_t *shape, const int64_t *indices, int64_t idx_rank,
                      const int64_t *idx_shape, int64_t batch_dims, void *y) {
  const char *op = "GatherND";
  const pipert::TupleLayout l =
      pipert::tuple_layout(op, rank, shape, idx_rank, idx_shape, batch_dims);
  launch_typed(ctx, op, dtype, l.tuples * l.slice, [&](auto t, unsigned g) {
    using T = decltype(t);
    gather_nd_kernel<<<g, kBlock, 0, stream_of(ctx)>>>(l, (const T *)data, indices, cx(ctx)->err, (T *)y);
  });
}

void pipert_gather_nd_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                               const int64_t *data_shape, const int64_t *indices,
                               int64_t idx_rank, const int64_t *idx_shape, int64_t batch_dims,
                               float *dx) {
  const char *op = "GatherNDGrad";
  const pipert::TupleLayout l =
      pipert::tuple_layout(op, rank, data_shape, idx_rank, idx_shape, batch_dims);
  pipert_memset_zero(ctx, dx, size_t(numel(rank, data_shape)) * sizeof(float));
  if (l.tuples * l.slice == 0)
    return;
  launch_scatter<float>(ctx, l, indices, dy, PIPERT_SCATTER_ADD, dx);
  PIPERT_LAUNCH_CHECK(op);
}

void pipert_scatter_nd(pipert_context *ctx, pipert_dtype dtype, const void *data, int64_t rank,
                       const int64_t *shape, const int64_t *indices, int64_t idx_rank,
                       const int64_t *idx_shape, const void *updates, int64_t reduction,
                       void *y) {
  const char *op = "ScatterND";
  const pipert::TupleLayout l = pipert::tuple_layout(op, rank, shape, idx_rank, idx_shape, 0);
  const size_t es = scatter_start(ctx, op, dtype, reduction, rank, shape, data, y);
  if (l.tuples * l.slice == 0)
    return;
  pipert::typed_dispatch(op, dtype, es, reduction, [&](auto t) {
    launch_scatter<decltype(t)>(ctx, l, indices, updates, int(reduction), y);
  });
  PIPERT_LAUNCH_CHECK(op);
}

void pipert_scatter_nd_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                                const int64_t *shape, const int64_t *indices, int64_t idx_rank,
                                const int64_t *idx_shape, float *dx) {
  const char *op = "ScatterNDGrad";
  const pipert::TupleLayout l = pipert::tuple_layout(op, rank, shape, idx_rank, idx_shape, 0);
  pipert_copy_device(ctx, dx, dy, size_t(numel(rank, shape)) * sizeof(float));
  const int64_t total = l.tuples * l.slice;
  if (total == 0)
    return;
  scatter_nd_grad_kernel<<<grid_for(ctx, total), kBlock, 0, stream_of(ctx)>>>(
      l, indices, cx(ctx)->err, dx);
  PIPERT_LAUNCH_CHECK(op);
}

void pipert_gather_elements(pipert_context *ctx, pipert_dtype dtype, const void *data,
                            int64_t rank, const int64_t *shape, const int64_t *indices,
                            const int64_t *idx_shape, int64_t axis, void *y) {
  const char *op = "GatherElements";
  const pipert::ElementLayout l = pipert::element_layout(op, rank, shape, idx_shape, axis);
  launch_typed(ctx, op, dtype, l.lines, [&](auto t, unsigned g) {
    using T = decltype(t);
    gather_elements_kernel<<<g, kBlock, 0, stream_of(ctx)>>>(l, (const T *)data, indices, cx(ctx)->err, (T *)y);
  });
}

void pipert_gather_elements_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                                     const int64_t *data_shape, const int64_t *indices,
                                     const int64_t *idx_shape, int64_t axis, float *dx) {
  const char *op = "GatherElementsGrad";
  const pipert::ElementLayout l = pipert::element_layout(op, rank, data_shape, idx_shape, axis);
  pipert_memset_zero(ctx, dx, size_t(numel(rank, data_shape)) * sizeof(float));
  if (l.lines == 0)
    return;
  launch_scatter_elements<float>(ctx, l, indices, dy, PIPERT_SCATTER_ADD, dx);
  PIPERT_LAUNCH_CHECK(op);
}

void pipert_scatter_elements(pipert_context *ctx, pipert_dtype dtype, const void *data,
                             int64_t rank, const int64_t *shape, const int64_t *indices,
                             const int64_t *idx_shape, const void *updates, int64_t axis,
                             int64_t reduction, void *y) {
  const char *op = "ScatterElements";
  const pipert::ElementLayout l = pipert::element_layout(op, rank, shape, idx_shape, axis);
  const size_t es = scatter_start(ctx, op, dtype, reduction, rank, shape, data, y);
  if (l.lines == 0)
    return;
  pipert::typed_dispatch(op, dtype, es, reduction, [&](auto t) {
    launch_scatter_elements<decltype(t)>(ctx, l, indices, updates, int(reduction), y);
  });
  PIPERT_LAUNCH_CHECK(op);
}

void pipert_scatter_elements_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                                      const int64_t *shape, const int64_t *indices,
                                      const int64_t *idx_shape, int64_t axis, float *dx) {
  const char *op = "ScatterElementsGrad";
  const pipert::ElementLayout l = pipert::element_layout(op, rank, shape, idx_shape, axis);
  pipert_copy_device(ctx, dx, dy, size_t(numel(rank, shape)) * sizeof(float));
  if (l.lines == 0)
    return;
  scatter_elements_grad_kernel<<<grid_for(ctx, l.lines), kBlock, 0, stream_of(ctx)>>>(
      l, indices, cx(ctx)->err, dx);
  PIPERT_LAUNCH_CHECK(op);
}

void pipert_expand(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t x_rank,
                   const int64_t *x_shape, int64_t y_rank, const int64_t *y_shape, void *y) {
  const char *op = "Expand";
  int64_t strides[kMaxRank];
  expand_strides(op, x_rank, x_shape, y_rank, y_shape, strides);
  size_t es = elem_size(op, dtype);
  copy_view(ctx, op, es, x, y_rank, y_shape, strides, y);
}

void pipert_cast(pipert_context *ctx, pipert_dtype from, const void *x, pipert_dtype to, void *y,
                 int64_t n) {
  if (n <= 0) {
    // Still validate the types, as the CPU backend does.
    if (!(from == PIPERT_F32 || from == PIPERT_F64 || from == PIPERT_I64 || from == PIPERT_I32 ||
          from == PIPERT_I8 || from == PIPERT_U8 || from == PIPERT_BOOL))
      pipert_fail("Cast: unsupported source type %s", pipert_dtype_name(from));
    return;
  }
  switch (from) {
  case PIPERT_F32: return cast_from(ctx, (const float *)x, to, y, n);
  case PIPERT_F64: return cast_from(ctx, (const double *)x, to, y, n);
  case PIPERT_I64: return cast_from(ctx, (const int64_t *)x, to, y, n);
  case PIPERT_I32: return cast_from(ctx, (const int32_t *)x, to, y, n);
  case PIPERT_I8: return cast_from(ctx, (const int8_t *)x, to, y, n);
  case PIPERT_U8: case PIPERT_BOOL: return cast_from(ctx, (const uint8_t *)x, to, y, n);
  default: break;
  }
  pipert_fail("Cast: unsupported source type %s", pipert_dtype_name(from));
}

void pipert_reduce_f32(pipert_context *ctx, pipert_reduce_op op, const float *x, int64_t rank,
                       const int64_t *shape, int64_t n_axes, const int64_t *axes,
                       int noop_with_empty_axes, float *y) {
  const char *name = "Reduce";
  check_rank(name, rank);
  if (op != PIPERT_REDUCE_SUM && op != PIPERT_REDUCE_MEAN && op != PIPERT_REDUCE_SUM_SQUARE &&
      op != PIPERT_REDUCE_MAX && op != PIPERT_REDUCE_MIN)
    pipert_fail("Reduce: unknown op %d", int(op));
  const int64_t n = numel(rank, shape);
  if (n_axes == 0 && noop_with_empty_axes) {
    if (y != x && n > 0)
      pipert_copy_device(ctx, y, x, size_t(n) * sizeof(float));
    return;
  }
  bool red[kMaxRank] = {};
  for (int64_t k = 0; k < n_axes; ++k)
    red[norm_axis(name, axes[k], rank)] = true;
  if (n_axes == 0)
    for (int64_t i = 0; i < rank; ++i)
      red[i] = true;
  reduce_impl(ctx, name, int(op), x, rank, shape, red, 1.f, y);
}

void pipert_reduce_extremum_grad_f32(pipert_context *ctx, pipert_reduce_op op, const float *x,
                                     int64_t rank, const int64_t *shape, int64_t n_axes,
                                     const int64_t *axes, int noop_with_empty_axes,
                                     const float *dy, float *dx) {
  const char *name = "ReduceExtremumGrad";
  check_rank(name, rank);
  if (op != PIPERT_REDUCE_MAX && op != PIPERT_REDUCE_MIN)
    pipert_fail("%s: op %d is not MAX or MIN", name, int(op));
  const int64_t n = numel(rank, shape);
  if (n_axes == 0 && noop_with_empty_axes) {
    if (n > 0 && dx != dy)
      pipert_copy_device(ctx, dx, dy, size_t(n) * sizeof(float));
    return;
  }
  bool red[kMaxRank];
  formula::reduced_axes(name, rank, n_axes, axes, red);
  const formula::ReduceGroups g = formula::reduce_groups(rank, shape, red);
  pipert_memset_zero(ctx, dx, size_t(n) * sizeof(float));
  if (g.count == 0)
    return;
  const bool is_min = op == PIPERT_REDUCE_MIN;
  launch_map(ctx, name, g.groups, [=] __device__(int64_t o) {
    int64_t j;
    dx[formula::group_extremum(g, x, o, is_min, false, j)] = dy[o];
  });
}

void pipert_arg_reduce_f32(pipert_context *ctx, pipert_reduce_op op, const float *x, int64_t rank,
                           const int64_t *shape, int64_t axis, int select_last_index,
                           int64_t *y) {
  const char *name = op == PIPERT_REDUCE_MIN ? "ArgMin" : "ArgMax";
  const formula::ReduceGroups g = formula::arg_reduce_groups(name, op, rank, shape, axis);
  const bool is_min = op == PIPERT_REDUCE_MIN, last = select_last_index != 0;
  launch_map(ctx, name, g.groups, [=] __device__(int64_t o) {
    int64_t j;
    formula::group_extremum(g, x, o, is_min, last, j);
    y[o] = j;
  });
}

void pipert_cumsum(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank,
                   const int64_t *shape, int64_t axis, int exclusive, int reverse, void *y) {
  check_rank("CumSum", rank);
  switch (dtype) {
  case PIPERT_F32: return cumsum_typed(ctx, (const float *)x, rank, shape, axis, exclusive, reverse, (float *)y);
  case PIPERT_F64: return cumsum_typed(ctx, (const double *)x, rank, shape, axis, exclusive, reverse, (double *)y);
  case PIPERT_I32: return cumsum_typed(ctx, (const int32_t *)x, rank, shape, axis, exclusive, reverse, (int32_t *)y);
  case PIPERT_I64: return cumsum_typed(ctx, (const int64_t *)x, rank, shape, axis, exclusive, reverse, (int64_t *)y);
  default: break;
  }
  pipert_fail("CumSum: unsupported dtype %s", pipert_dtype_name(dtype));
}

void pipert_tile(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank,
                 const int64_t *shape, const int64_t *repeats, void *y) {
  check_rank("Tile", rank);
  const formula::TileGeom g = formula::tile_geom(rank, shape, repeats);
  switch (pipert_dtype_size(dtype)) {
  case 1: return tile_typed(ctx, g, (const uint8_t *)x, (uint8_t *)y);
  case 2: return tile_typed(ctx, g, (const uint16_t *)x, (uint16_t *)y);
  case 4: return tile_typed(ctx, g, (const uint32_t *)x, (uint32_t *)y);
  case 8: return tile_typed(ctx, g, (const uint64_t *)x, (uint64_t *)y);
  }
  pipert_fail("Tile: unsupported dtype %d", int(dtype));
}

void pipert_tile_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                          const int64_t *x_shape, const int64_t *repeats, float *dx) {
  check_rank("TileGrad", rank);
  const formula::TileGeom g = formula::tile_geom(rank, x_shape, repeats);
  launch_map(ctx, "TileGrad", numel(rank, x_shape),
             [=] __device__(int64_t j) { dx[j] = formula::tile_grad(g, dy, j); });
}

void pipert_pad(pipert_context *ctx, pipert_dtype dtype, pipert_pad_mode mode, const void *x,
                int64_t rank, const int64_t *shape, const int64_t *pads, float value, void *y) {
  check_rank("Pad", rank);
  const formula::PadGeom g = formula::pad_geom(int(mode), rank, shape, pads);
  switch (dtype) {
  case PIPERT_F32: return pad_typed(ctx, g, (const float *)x, float(value), (float *)y);
  case PIPERT_F64: return pad_typed(ctx, g, (const double *)x, double(value), (double *)y);
  case PIPERT_I64: return pad_typed(ctx, g, (const int64_t *)x, int64_t(value), (int64_t *)y);
  case PIPERT_I32: return pad_typed(ctx, g, (const int32_t *)x, int32_t(value), (int32_t *)y);
  case PIPERT_I8: return pad_typed(ctx, g, (const int8_t *)x, int8_t(value), (int8_t *)y);
  case PIPERT_U8: return pad_typed(ctx, g, (const uint8_t *)x, uint8_t(value), (uint8_t *)y);
  case PIPERT_BOOL: return pad_typed(ctx, g, (const uint8_t *)x, uint8_t(value != 0.f), (uint8_t *)y);
  default: break;
  }
  pipert_fail("Pad: unsupported dtype %s", pipert_dtype_name(dtype));
}

void pipert_pad_grad_f32(pipert_context *ctx, pipert_pad_mode mode, const float *dy, int64_t rank,
                         const int64_t *x_shape, const int64_t *pads, float *dx) {
  check_rank("PadGrad", rank);
  const formula::PadGeom g = formula::pad_geom(int(mode), rank, x_shape, pads);
  pipert_memset_zero(ctx, dx, size_t(numel(rank, x_shape)) * sizeof(float));
  // Several outputs read one input element near a reflect/edge border.
  launch_map(ctx, "PadGrad", numel(g.y.rank, g.y.d), [=] __device__(int64_t i) {
    const int64_t s = formula::pad_source(g, i);
    if (s >= 0)
      atomicAdd(dx + s, dy[i]);
  });
}

void pipert_resize_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                       const int64_t y_shape[4], const float *scales, const float *roi,
                       pipert_resize_mode mode, pipert_resize_coord coord,
                       pipert_resize_nearest nearest, float cubic_coeff_a, int exclude_outside,
                       float extrapolation_value, float *y) {
  // scales and roi are host arrays (the generated code's constants).
  const formula::ResizeGeom g =
      formula::resize_geom(x_shape, y_shape, scales, roi, mode, coord, nearest, cubic_coeff_a,
                           exclude_outside, extrapolation_value);
  const int64_t n = y_shape[0] * y_shape[1] * y_shape[2] * y_shape[3];
  launch_map(ctx, "Resize", n, [=] __device__(int64_t i) { y[i] = formula::resize_value(g, x, i); });
}

void pipert_resize_grad_f32(pipert_context *ctx, const float *dy, const int64_t x_shape[4],
                            const int64_t y_shape[4], const float *scales, const float *roi,
                            pipert_resize_mode mode, pipert_resize_coord coord,
                            pipert_resize_nearest nearest, float cubic_coeff_a,
                            int exclude_outside, float *dx) {
  const formula::ResizeGeom g = formula::resize_geom(
      x_shape, y_shape, scales, roi, mode, coord, nearest, cubic_coeff_a, exclude_outside, 0.f);
  const int64_t nx = x_shape[0] * x_shape[1] * x_shape[2] * x_shape[3];
  const int64_t ny = y_shape[0] * y_shape[1] * y_shape[2] * y_shape[3];
  launch_map(ctx, "ResizeGrad", nx, [=] __device__(int64_t i) { dx[i] = 0.f; });
  launch_map(ctx, "ResizeGrad", ny, [=] __device__(int64_t i) {
    formula::resize_scatter(g, dy[i], i, [=](int64_t j, float v) { atomicAdd(dx + j, v); });
  });
}

void pipert_trilu(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank,
                  const int64_t *shape, int upper, int64_t k, void *y) {
  check_rank("Trilu", rank);
  if (rank < 2)
    pipert_fail("Trilu: rank %lld, needs at least 2", (long long)rank);
  const int64_t n = numel(rank, shape), rows = shape[rank - 2], cols = shape[rank - 1];
  if (n == 0)
    return;
  const bool up = upper != 0;
  switch (pipert_dtype_size(dtype)) {
  case 1: return trilu_typed(ctx, (const uint8_t *)x, n, rows, cols, up, k, (uint8_t *)y);
  case 2: return trilu_typed(ctx, (const uint16_t *)x, n, rows, cols, up, k, (uint16_t *)y);
  case 4: return trilu_typed(ctx, (const uint32_t *)x, n, rows, cols, up, k, (uint32_t *)y);
  case 8: return trilu_typed(ctx, (const uint64_t *)x, n, rows, cols, up, k, (uint64_t *)y);
  }
  pipert_fail("Trilu: unsupported dtype %d", int(dtype));
}

} // extern "C"
