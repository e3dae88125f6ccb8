//===- shape_util.h - host-side shape helpers shared by the backends ------===//
//
// Shape arithmetic that every backend's kernels do on the host before they
// launch: element counts, axis normalisation, numpy broadcasting. Errors end
// the rank through pipert_fail, naming the kernel.
//
//===----------------------------------------------------------------------===//
#ifndef PIPERT_CORE_SHAPE_UTIL_H
#define PIPERT_CORE_SHAPE_UTIL_H

#include "pipert/pipert.h"
#include "pipert/pipert_kernels.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace pipert {

constexpr int kMaxRank = 16;

inline int64_t numel(int64_t rank, const int64_t *shape) {
  int64_t n = 1;
  for (int64_t i = 0; i < rank; ++i)
    n *= shape[i];
  return n;
}

/// pipert_attention(_grad)_f32's sizes and row strides (12 strides: the
/// batch, head and row strides of Q, K, V and Y), checked alike by every
/// backend.
inline void check_attention_args(const char *op, int64_t batch, int64_t heads,
                                 int64_t kv_heads, int64_t t, int64_t s, int64_t dh,
                                 const int64_t *strides) {
  if (batch < 0 || heads <= 0 || t <= 0 || s <= 0 || dh <= 0 || !strides)
    pipert_fail("%s: bad sizes batch %lld, heads %lld, t %lld, s %lld, head size %lld", op,
                (long long)batch, (long long)heads, (long long)t, (long long)s, (long long)dh);
  if (kv_heads <= 0 || heads % kv_heads != 0)
    pipert_fail("%s: %lld key/value heads do not divide %lld heads", op, (long long)kv_heads,
                (long long)heads);
  for (int i = 0; i < 4; ++i)
    if (strides[3 * i + 2] < dh)
      pipert_fail("%s: row stride %lld of operand %d is below the head size %lld", op,
                  (long long)strides[3 * i + 2], i, (long long)dh);
}

/// An attention mask's (batch, head, row) strides: mask_strides, or (0, 0,
/// s) when null (one t x s mask for every pair); each at least 0.
struct AttentionMaskStrides {
  int64_t b, h, r;
};
inline AttentionMaskStrides attention_mask_strides(const char *op, int64_t s,
                                                   const int64_t *mask_strides) {
  if (!mask_strides)
    return {0, 0, s};
  for (int i = 0; i < 3; ++i)
    if (mask_strides[i] < 0)
      pipert_fail("%s: negative mask stride %lld", op, (long long)mask_strides[i]);
  return {mask_strides[0], mask_strides[1], mask_strides[2]};
}

inline void check_rank(const char *op, int64_t rank) {
  if (rank < 0 || rank > kMaxRank)
    pipert_fail("%s: rank %lld is outside 0..%d", op, (long long)rank, kMaxRank);
}

// Resolves a possibly negative axis against `rank`, failing when out of range.
inline int64_t norm_axis(const char *op, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    pipert_fail("%s: axis %lld out of range for rank %lld", op, (long long)axis,
                (long long)rank);
  return a;
}

// outer = prod(shape[:axis]), mid = shape[axis], inner = prod(shape[axis+1:]).
struct AxisSplit {
  int64_t outer = 1, mid = 1, inner = 1;
};
inline AxisSplit split_at(int64_t rank, const int64_t *shape, int64_t axis) {
  AxisSplit s;
  for (int64_t i = 0; i < axis; ++i)
    s.outer *= shape[i];
  s.mid = shape[axis];
  for (int64_t i = axis + 1; i < rank; ++i)
    s.inner *= shape[i];
  return s;
}

// GatherND and ScatterND: indices (idx_shape (..., k)) hold `tuples`
// k-tuples; after `batch_dims` leading axes shared with the indices, each
// names a slice of `slice` contiguous elements of data. Tuple t lies in
// batch t / per_batch, whose data starts at (t / per_batch) * batch_stride;
// its j-th index runs over dims[j] with element stride strides[j].
struct TupleLayout {
  int64_t tuples = 0, k = 0, slice = 1, per_batch = 1, batch_stride = 0;
  int64_t dims[kMaxRank] = {}, strides[kMaxRank] = {};
};
inline TupleLayout tuple_layout(const char *op, int64_t rank, const int64_t *shape,
                                int64_t idx_rank, const int64_t *idx_shape,
                                int64_t batch_dims) {
  check_rank(op, rank);
  check_rank(op, idx_rank);
  if (idx_rank < 1 || batch_dims < 0 || batch_dims >= idx_rank || batch_dims >= rank)
    pipert_fail("%s: indices of rank %lld and batch_dims %lld do not fit data of rank %lld", op,
                (long long)idx_rank, (long long)batch_dims, (long long)rank);
  TupleLayout l;
  l.k = idx_shape[idx_rank - 1];
  if (l.k < 1 || l.k > rank - batch_dims)
    pipert_fail("%s: tuples of %lld indices into data of rank %lld (batch_dims %lld)", op,
                (long long)l.k, (long long)rank, (long long)batch_dims);
  int64_t batches = 1;
  for (int64_t i = 0; i < batch_dims; ++i) {
    if (shape[i] != idx_shape[i])
      pipert_fail("%s: batch axis %lld is %lld in data but %lld in indices", op, (long long)i,
                  (long long)shape[i], (long long)idx_shape[i]);
    batches *= shape[i];
  }
  l.tuples = numel(idx_rank - 1, idx_shape);
  l.per_batch = batches ? l.tuples / batches : 0;
  for (int64_t i = batch_dims + l.k; i < rank; ++i)
    l.slice *= shape[i];
  int64_t stride = l.slice;
  for (int64_t j = l.k - 1; j >= 0; --j) {
    l.dims[j] = shape[batch_dims + j];
    l.strides[j] = stride;
    stride *= l.dims[j];
  }
  l.batch_stride = stride;
  return l;
}

// GatherElements and ScatterElements: indices (idx_shape, data's rank, no
// larger than data off `axis`) hold n entries; entry p names data's element
// at p's coordinates but along `axis`. Both backends walk the indices as
// lines: `lines` runs of `extent` entries along `axis`, line l at idx offset
// (l / inner) * extent * inner + l % inner with idx stride `inner`.
struct ElementLayout {
  int64_t n = 0, lines = 0, extent = 1, inner = 1, dim = 1, axis = 0, rank = 0;
  int64_t idx_shape[kMaxRank] = {}, data_strides[kMaxRank] = {};
};
inline ElementLayout element_layout(const char *op, int64_t rank, const int64_t *shape,
                                    const int64_t *idx_shape, int64_t axis) {
  check_rank(op, rank);
  ElementLayout l;
  l.rank = rank;
  l.axis = norm_axis(op, axis, rank);
  int64_t stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    if (d != l.axis && idx_shape[d] > shape[d])
      pipert_fail("%s: indices' axis %lld (%lld) exceeds the data's (%lld)", op, (long long)d,
                  (long long)idx_shape[d], (long long)shape[d]);
    l.idx_shape[d] = idx_shape[d];
    l.data_strides[d] = stride;
    stride *= shape[d];
  }
  l.n = numel(rank, idx_shape);
  l.extent = idx_shape[l.axis];
  l.dim = shape[l.axis];
  for (int64_t d = l.axis + 1; d < rank; ++d)
    l.inner *= idx_shape[d];
  l.lines = l.extent ? l.n / l.extent : 0;
  return l;
}

// The element type a data-movement kernel runs on: for a copy (a gather, a
// scatter with reduction none) an unsigned integer of its size, else (a
// scatter's arithmetic) f32, f64, i32 or i64. `launch` takes a value of it.
template <typename Launch>
inline void typed_dispatch(const char *op, pipert_dtype dtype, size_t es, int64_t reduction,
                      Launch launch) {
  if (reduction == PIPERT_SCATTER_NONE) {
    switch (es) {
    case 1: return launch(uint8_t());
    case 2: return launch(uint16_t());
    case 4: return launch(uint32_t());
    case 8: return launch(uint64_t());
    }
    pipert_fail("%s: unsupported dtype", op);
  }
  switch (dtype) {
  case PIPERT_F32: return launch(float());
  case PIPERT_F64: return launch(double());
  case PIPERT_I32: return launch(int32_t());
  case PIPERT_I64: return launch(int64_t());
  default:
    pipert_fail("%s: reduction %lld of %s is not supported (f32, f64, i32 or i64)", op,
                (long long)reduction, pipert_dtype_name(dtype));
  }
}

// Numpy broadcast of two shapes into `out` (rank max(ra, rb)); fails if they
// are incompatible.
inline int64_t broadcast_shape(const char *op, int64_t ra, const int64_t *a, int64_t rb,
                               const int64_t *b, int64_t *out) {
  int64_t r = std::max(ra, rb);
  for (int64_t i = 0; i < r; ++i) {
    int64_t da = i < r - ra ? 1 : a[i - (r - ra)];
    int64_t db = i < r - rb ? 1 : b[i - (r - rb)];
    if (da != db && da != 1 && db != 1)
      pipert_fail("%s: shapes do not broadcast (axis %lld: %lld vs %lld)", op, (long long)i,
                  (long long)da, (long long)db);
    out[i] = da == 1 ? db : da;
  }
  return r;
}

// Element strides of an input of (rank, shape) broadcast to an output of rank
// out_rank: 0 on axes the input lacks or has extent 1.
inline void broadcast_strides(int64_t rank, const int64_t *shape, int64_t out_rank,
                              int64_t *strides) {
  int64_t s = 1;
  for (int64_t i = out_rank - 1; i >= 0; --i) {
    int64_t j = i - (out_rank - rank);
    if (j < 0 || shape[j] == 1) {
      strides[i] = 0;
    } else {
      strides[i] = s;
      s *= shape[j];
    }
  }
}

// Expand: checks that (y_rank, y_shape) is x's broadcast to it and gives
// x's element strides along y's axes (both backends then copy the view).
inline void expand_strides(const char *op, int64_t x_rank, const int64_t *x_shape,
                           int64_t y_rank, const int64_t *y_shape, int64_t *strides) {
  check_rank(op, x_rank);
  check_rank(op, y_rank);
  int64_t check[kMaxRank];
  if (broadcast_shape(op, x_rank, x_shape, y_rank, y_shape, check) != y_rank)
    pipert_fail("%s: output rank %lld below input rank %lld", op, (long long)y_rank,
                (long long)x_rank);
  for (int64_t i = 0; i < y_rank; ++i)
    if (check[i] != y_shape[i])
      pipert_fail("%s: output shape is not the broadcast shape (axis %lld)", op, (long long)i);
  broadcast_strides(x_rank, x_shape, y_rank, strides);
}

// Channel geometry of (N, C, d...) tensors (normalisation, losses): batch,
// channels (classes), and the product of the spatial extents.
struct NCS {
  int64_t n, c, spatial;
};

inline NCS nc_split(const char *op, int64_t rank, const int64_t *shape) {
  if (rank < 2)
    pipert_fail("%s: input must have rank >= 2 (N, C, ...), got %lld", op, (long long)rank);
  check_rank(op, rank);
  return {shape[0], shape[1], numel(rank - 2, shape + 2)};
}

// The view ONNX Slice takes of a tensor: per axis the first index read, the
// step, and the output extent (starts/ends clamped as ONNX specifies).
struct SliceView {
  int64_t start[kMaxRank], step[kMaxRank], out[kMaxRank];
};

inline SliceView slice_view(int64_t rank, const int64_t *shape, int64_t n_axes, const int64_t *starts,
                     const int64_t *ends, const int64_t *axes, const int64_t *steps) {
  const char *op = "Slice";
  check_rank(op, rank);
  SliceView v;
  for (int64_t i = 0; i < rank; ++i)
    v.start[i] = 0, v.step[i] = 1, v.out[i] = shape[i];
  bool seen[kMaxRank] = {};
  for (int64_t k = 0; k < n_axes; ++k) {
    int64_t a = norm_axis(op, axes ? axes[k] : k, rank);
    if (seen[a])
      pipert_fail("%s: axis %lld repeated", op, (long long)a);
    seen[a] = true;
    const int64_t dim = shape[a];
    const int64_t step = steps ? steps[k] : 1;
    if (step == 0)
      pipert_fail("%s: step 0", op);
    int64_t s = starts[k], e = ends[k];
    if (s < 0)
      s += dim;
    if (e < 0 && e > std::numeric_limits<int64_t>::min() + dim)
      e += dim;
    else if (e < 0)
      e = -1;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      v.out[a] = e > s ? (e - s + step - 1) / step : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      v.out[a] = s > e ? (s - e + (-step) - 1) / (-step) : 0;
    }
    v.start[a] = s;
    v.step[a] = step;
  }
  return v;
}

// The geometry of a 2-D NCHW convolution (X: N,C,H,W; W: M,C/group,kH,kW),
// checked, with its output size.
struct ConvGeom {
  int64_t n, c, h, w;      // input
  int64_t m, cg, kh, kw;   // weight: out channels, in channels per group, kernel
  int64_t oh, ow;          // output
  int64_t pt, pl, pb, pr;  // pads
  int64_t sh, sw, dh, dw;  // strides, dilations
  int64_t group, mg;       // groups, out channels per group
  int64_t col_rows() const { return cg * kh * kw; }
  int64_t col_cols() const { return oh * ow; }
  bool pointwise() const {
    return kh == 1 && kw == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 && pb == 0 && pr == 0;
  }
};

inline ConvGeom conv_geom(const char *op, const int64_t xs[4], const int64_t ws[4], const int64_t pads[4],
                   const int64_t strides[2], const int64_t dil[2], int64_t group) {
  ConvGeom g;
  g.n = xs[0], g.c = xs[1], g.h = xs[2], g.w = xs[3];
  g.m = ws[0], g.cg = ws[1], g.kh = ws[2], g.kw = ws[3];
  g.pt = pads[0], g.pl = pads[1], g.pb = pads[2], g.pr = pads[3];
  g.sh = strides[0], g.sw = strides[1], g.dh = dil[0], g.dw = dil[1];
  g.group = group;
  if (group < 1 || g.c != g.cg * group || g.m % group != 0)
    pipert_fail("%s: %lld input channels, %lld per group in W, %lld output channels do not fit "
                "group=%lld",
                op, (long long)g.c, (long long)g.cg, (long long)g.m, (long long)group);
  if (g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1)
    pipert_fail("%s: strides and dilations must be >= 1", op);
  if (g.pt < 0 || g.pl < 0 || g.pb < 0 || g.pr < 0)
    pipert_fail("%s: negative pads", op);
  g.mg = g.m / group;
  g.oh = (g.h + g.pt + g.pb - (g.dh * (g.kh - 1) + 1)) / g.sh + 1;
  g.ow = (g.w + g.pl + g.pr - (g.dw * (g.kw - 1) + 1)) / g.sw + 1;
  if (g.oh < 1 || g.ow < 1)
    pipert_fail("%s: kernel larger than the padded input", op);
  return g;
}

// Samples per GEMM of an im2col convolution (both backends). One sample's
// product has oh * ow columns: 4 and 16 on ResNet-18's last two stages at
// 64 x 64, where per-sample products ran at 20-30 GFLOP/s on the CPU and
// the weight gradient added each sample's product into all of dW (9.4 MB
// on the last stage) in turn. Samples go side by side in one col (sample
// j's columns at j * oh * ow), as many as bring the product to `columns`
// columns and keep col within `bytes`; 1 where one sample has that many.
inline int64_t conv_samples(const ConvGeom &g, int64_t columns, int64_t bytes) {
  const int64_t P = g.col_cols(), K = g.col_rows();
  if (P <= 0 || P >= columns || g.n <= 1)
    return 1;
  int64_t nb = std::min(g.n, (columns + P - 1) / P);
  nb = std::min(nb, bytes / std::max<int64_t>(1, K * P * int64_t(sizeof(float))));
  return std::max<int64_t>(1, nb);
}

// The geometry of a 2-D NCHW pooling window (MaxPool: with dilations;
// AveragePool: dil NULL), checked, with its output size.
struct PoolGeom {
  int64_t n, c, h, w, kh, kw, pt, pl, pb, pr, sh, sw, dh, dw, oh, ow;
};

inline PoolGeom pool_geom(const char *op, const int64_t xs[4], const int64_t k[2],
                          const int64_t pads[4], const int64_t strides[2], const int64_t *dil,
                          int ceil_mode) {
  PoolGeom g;
  g.n = xs[0], g.c = xs[1], g.h = xs[2], g.w = xs[3];
  g.kh = k[0], g.kw = k[1];
  g.pt = pads[0], g.pl = pads[1], g.pb = pads[2], g.pr = pads[3];
  g.sh = strides[0], g.sw = strides[1];
  g.dh = dil ? dil[0] : 1, g.dw = dil ? dil[1] : 1;
  if (g.kh < 1 || g.kw < 1 || g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1)
    pipert_fail("%s: kernel, strides and dilations must be >= 1", op);
  if (g.pt < 0 || g.pl < 0 || g.pb < 0 || g.pr < 0)
    pipert_fail("%s: negative pads", op);
  g.oh = pipert_pool_output_dim(g.h, g.kh, g.pt, g.pb, g.sh, g.dh, ceil_mode);
  g.ow = pipert_pool_output_dim(g.w, g.kw, g.pl, g.pr, g.sw, g.dw, ceil_mode);
  if (g.oh < 1 || g.ow < 1)
    pipert_fail("%s: kernel larger than the padded input", op);
  return g;
}

// Transpose as a strided view of the input: the output shape and, per output
// axis, the input element stride it walks. `perm` NULL reverses the axes.
struct TransposeView {
  int64_t shape[kMaxRank], strides[kMaxRank];
};

inline TransposeView transpose_view(const char *op, int64_t rank, const int64_t *shape,
                                    const int64_t *perm) {
  check_rank(op, rank);
  TransposeView v;
  int64_t in_strides[kMaxRank];
  int64_t s = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    in_strides[i] = s;
    s *= shape[i];
  }
  bool used[kMaxRank] = {};
  for (int64_t i = 0; i < rank; ++i) {
    int64_t p = perm ? perm[i] : rank - 1 - i;
    if (p < 0 || p >= rank || used[p])
      pipert_fail("%s: perm is not a permutation of 0..%lld", op, (long long)(rank - 1));
    used[p] = true;
    v.shape[i] = shape[p];
    v.strides[i] = in_strides[p];
  }
  return v;
}

// numpy's promotion of a 1-D MatMul operand: (K) -> (1, K) for the left one,
// (K) -> (K, 1) for the right one. Writes the promoted shape, returns its rank.
// A batched MatMul of (ra, sa) by (rb, sb), optionally transposed operands
// (rank >= 2 each): the GEMM sizes and the broadcast batch. Both backends
// plan with it; `for_each_batch` walks a general broadcast batch by batch.
struct MatMulPlan {
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0;
  int64_t rbatch = 0, nbatch = 0, na = 0, nb = 0;
  int64_t batch[kMaxRank] = {};
  int64_t strides[2][kMaxRank] = {};
};

inline MatMulPlan matmul_plan(const char *op, int64_t ra, const int64_t *sa, int trans_a,
                              int64_t rb, const int64_t *sb, int trans_b) {
  check_rank(op, ra);
  check_rank(op, rb);
  if (ra < 2 || rb < 2)
    pipert_fail("%s: transposed operands need rank >= 2", op);
  MatMulPlan p;
  p.m = trans_a ? sa[ra - 1] : sa[ra - 2];
  const int64_t ka = trans_a ? sa[ra - 2] : sa[ra - 1];
  const int64_t kb = trans_b ? sb[rb - 1] : sb[rb - 2];
  p.n = trans_b ? sb[rb - 2] : sb[rb - 1];
  if (ka != kb)
    pipert_fail("%s: inner dimensions differ (%lld vs %lld)", op, (long long)ka, (long long)kb);
  p.k = ka;
  p.lda = sa[ra - 1];
  p.ldb = sb[rb - 1];
  p.rbatch = broadcast_shape(op, ra - 2, sa, rb - 2, sb, p.batch);
  p.nbatch = numel(p.rbatch, p.batch);
  p.na = numel(ra - 2, sa);
  p.nb = numel(rb - 2, sb);
  broadcast_strides(ra - 2, sa, p.rbatch, p.strides[0]);
  broadcast_strides(rb - 2, sb, p.rbatch, p.strides[1]);
  return p;
}

// fn(bi, oa, ob) for every output batch bi: the (broadcast) batch indices of
// A and B it reads.
template <typename Fn> void for_each_batch(const MatMulPlan &p, Fn &&fn) {
  int64_t idx[kMaxRank] = {};
  for (int64_t bi = 0; bi < p.nbatch; ++bi) {
    int64_t oa = 0, ob = 0;
    for (int64_t d = 0; d < p.rbatch; ++d) {
      oa += idx[d] * p.strides[0][d];
      ob += idx[d] * p.strides[1][d];
    }
    fn(bi, oa, ob);
    for (int64_t d = p.rbatch - 1; d >= 0; --d) {
      if (++idx[d] < p.batch[d])
        break;
      idx[d] = 0;
    }
  }
}

inline int64_t matmul_promote(const char *op, bool left, int64_t rank, const int64_t *shape,
                              int64_t *out) {
  if (rank < 1)
    pipert_fail("%s: operands must have rank >= 1", op);
  check_rank(op, rank);
  if (rank > 1) {
    std::copy(shape, shape + rank, out);
    return rank;
  }
  out[0] = left ? 1 : shape[0];
  out[1] = left ? shape[0] : 1;
  return 2;
}

} // namespace pipert

#endif
