//===- data.cpp - data movement, cast, reductions, dropout (CPU) ----------===//
#include "kernel_util.h"
#include "../core/formulas.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

using namespace pipert::cpu;

namespace {

size_t elem_size(const char *op, pipert_dtype t) {
  size_t s = pipert_dtype_size(t);
  if (!s)
    pipert_fail("%s: unknown dtype %d", op, int(t));
  return s;
}

// Copies `count` elements of `es` bytes with source stride `sstride` (in
// elements) into a contiguous destination; fixed-size cases vectorise.
inline void strided_copy(size_t es, const char *src, int64_t sstride, char *dst, int64_t count) {
  if (sstride == 1) {
    std::memcpy(dst, src, size_t(count) * es);
    return;
  }
  switch (es) {
  case 4: {
    const uint32_t *s = (const uint32_t *)src;
    uint32_t *d = (uint32_t *)dst;
    for (int64_t i = 0; i < count; ++i)
      d[i] = s[i * sstride];
    return;
  }
  case 8: {
    const uint64_t *s = (const uint64_t *)src;
    uint64_t *d = (uint64_t *)dst;
    for (int64_t i = 0; i < count; ++i)
      d[i] = s[i * sstride];
    return;
  }
  default:
    for (int64_t i = 0; i < count; ++i)
      std::memcpy(dst + i * es, src + i * sstride * es, es);
  }
}

// Copies a view whose innermost output axis is strided in the input while
// another axis q is the input's contiguous one (a transpose): for every
// index of the other axes, an A x B tile (A = q's extent, B = the innermost
// output axis's) moves in 8 x 8 blocks, reading along q and writing along the
// innermost axis, instead of one strided run of B elements per index of q
// (the attention heads' transposes run 8-element runs; 15% of the example
// transformer's step went to that loop).
// Out of line: inlined, it changed how GCC laid out copy_view's other
// paths (the heads' row copies, 0213 on 2 x 4 x 8 x 8, 0.055 -> 0.075 us).
[[gnu::noinline]] void tile8x8(const uint32_t *src, int64_t lds, uint32_t *dst, int64_t ldd) {
  transpose8x8(src, lds, dst, ldd);
}

template <typename T>
void copy_tiles(const T *x, int64_t r, const int64_t *dims, const int64_t *ist, int64_t q,
                T *y) {
  int64_t ost[kMaxRank];
  int64_t s = 1;
  for (int64_t i = r - 1; i >= 0; --i) {
    ost[i] = s;
    s *= dims[i];
  }
  const int64_t A = dims[q], B = dims[r - 1], sb = ist[r - 1], oq = ost[q];
  // The other axes, outermost first.
  int64_t od[kMaxRank], oi[kMaxRank], oo[kMaxRank], n = 0;
  for (int64_t i = 0; i + 1 < r; ++i)
    if (i != q) {
      od[n] = dims[i];
      oi[n] = ist[i];
      oo[n] = ost[i];
      ++n;
    }
  int64_t idx[kMaxRank] = {}, xin = 0, yout = 0;
  for (;;) {
    const T *xs = x + xin;
    T *ys = y + yout;
    for (int64_t a0 = 0; a0 < A; a0 += 8) {
      const int64_t a1 = std::min(A, a0 + 8);
      for (int64_t b0 = 0; b0 < B; b0 += 8) {
        const int64_t b1 = std::min(B, b0 + 8);
        if constexpr (sizeof(T) == 4) {
          // A whole 8 x 8 tile in registers (the attention heads' 8 x 8
          // transposes: 0.25 -> 0.07 us for 2 x 4 of them, scalar before).
          if (a1 - a0 == 8 && b1 - b0 == 8) {
            tile8x8(reinterpret_cast<const uint32_t *>(xs + a0 + b0 * sb), sb,
                    reinterpret_cast<uint32_t *>(ys + a0 * oq + b0), oq);
            continue;
          }
        }
        for (int64_t a = a0; a < a1; ++a)
          for (int64_t b = b0; b < b1; ++b)
            ys[a * oq + b] = xs[a + b * sb];
      }
    }
    int64_t d = n - 1;
    for (; d >= 0; --d) {
      ++idx[d];
      xin += oi[d];
      yout += oo[d];
      if (idx[d] < od[d])
        break;
      xin -= oi[d] * od[d];
      yout -= oo[d] * od[d];
      idx[d] = 0;
    }
    if (d < 0)
      return;
  }
}

// Calls copy(dst, src) for every row of a view whose innermost axis is one
// contiguous row of `row` bytes in the input (dims/ist in bytes, r >= 2),
// dst advancing through y row by row; axis r-2 is the inner loop, the ones
// before it are counted in idx.
template <typename Copy>
void for_rows(const char *x, int64_t r, const int64_t *dims, const int64_t *ist, char *y,
              size_t row, Copy copy) {
  const int64_t n = dims[r - 2], s = ist[r - 2];
  int64_t idx[kMaxRank] = {}, xin = 0;
  for (;;) {
    const char *xs = x + xin;
    for (int64_t i = 0; i < n; ++i) {
      copy(y, xs + i * s);
      y += row;
    }
    int64_t d = r - 3;
    for (; d >= 0; --d) {
      ++idx[d];
      xin += ist[d];
      if (idx[d] < dims[d])
        break;
      xin -= ist[d] * dims[d];
      idx[d] = 0;
    }
    if (d < 0)
      return;
  }
}

// A view whose innermost axis is contiguous in the input (after merging):
// rows of dims[r-1] bytes gathered from strided places (the attention
// heads' transposes, (B, T, H, d) <-> (B, H, T, d) with d = 8: rows of
// 32 bytes). Strides here are in bytes. Rows of 16-128 bytes move as
// fixed-size copies (a few vector moves); others up to 256 bytes through
// memcpy. broadcast_loop's call and memcpy per 32-byte row took 2.6 ns,
// most of the transposes' time.
bool copy_rows(const char *x, int64_t r, const int64_t *dims, const int64_t *ist, char *y) {
  if (r < 2 || ist[r - 1] != 1)
    return false;
  const size_t row = size_t(dims[r - 1]);
  auto fixed = [&](auto bytes) {
    for_rows(x, r, dims, ist, y, row, [](char *d, const char *src) {
      std::memcpy(d, src, decltype(bytes)::value);
    });
    return true;
  };
  switch (row) {
  case 16: return fixed(std::integral_constant<size_t, 16>{});
  case 32: return fixed(std::integral_constant<size_t, 32>{});
  case 64: return fixed(std::integral_constant<size_t, 64>{});
  case 128: return fixed(std::integral_constant<size_t, 128>{});
  default: break;
  }
  if (row > 256)
    return false; // long rows: memcpy per row is cheap next to the copy
  for_rows(x, r, dims, ist, y, row,
           [row](char *d, const char *src) { std::memcpy(d, src, row); });
  return true;
}

// Gathers a strided view (shape, per-axis element strides, base offset) of x
// into contiguous y.
void copy_view(size_t es, const char *x, int64_t rank, const int64_t *shape,
               const int64_t *strides, char *y) {
  // Merge the axes as broadcast_loop does (drop extent-1 axes, join axes
  // contiguous in the input) to see whether the view is a transpose.
  int64_t dims[kMaxRank], ist[kMaxRank], r = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (shape[i] == 1)
      continue;
    if (shape[i] == 0)
      return;
    if (r > 0 && ist[r - 1] == strides[i] * shape[i]) {
      dims[r - 1] *= shape[i];
      ist[r - 1] = strides[i];
    } else {
      dims[r] = shape[i];
      ist[r] = strides[i];
      ++r;
    }
  }
  if (r >= 2 && ist[r - 1] != 1 && dims[r - 1] >= 4) {
    int64_t q = -1;
    for (int64_t i = r - 2; i >= 0; --i)
      if (ist[i] == 1) {
        q = i;
        break;
      }
    if (q >= 0 && dims[q] >= 4) {
      switch (es) {
      case 4:
        return copy_tiles((const uint32_t *)x, r, dims, ist, q, (uint32_t *)y);
      case 8:
        return copy_tiles((const uint64_t *)x, r, dims, ist, q, (uint64_t *)y);
      case 2:
        return copy_tiles((const uint16_t *)x, r, dims, ist, q, (uint16_t *)y);
      case 1:
        return copy_tiles((const uint8_t *)x, r, dims, ist, q, (uint8_t *)y);
      }
    }
  }
  if (r >= 2 && ist[r - 1] == 1) {
    // In bytes: the innermost axis becomes one row of bytes.
    int64_t bdims[kMaxRank], bst[kMaxRank];
    for (int64_t i = 0; i < r; ++i) {
      bdims[i] = dims[i];
      bst[i] = ist[i] * int64_t(es);
    }
    bdims[r - 1] = dims[r - 1] * int64_t(es);
    bst[r - 1] = 1;
    if (copy_rows(x, r, bdims, bst, y))
      return;
  }
  int64_t st[1][kMaxRank];
  for (int64_t i = 0; i < rank; ++i)
    st[0][i] = strides[i];
  // Output contiguous; broadcast_loop hands us runs with the input's stride.
  broadcast_loop<1>(rank, shape, st, [&](const int64_t *off, int64_t yo, int64_t len,
                                         const int64_t *ist) {
    strided_copy(es, x + off[0] * int64_t(es), ist[0], y + yo * int64_t(es), len);
  });
}

template <typename T>
void gather_typed(const T *data, const int64_t *shape, int64_t axis, const AxisSplit &s,
                  const int64_t *idx, int64_t nidx, T *y) {
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t k = 0; k < nidx; ++k) {
      int64_t i = idx[k];
      if (i < 0)
        i += s.mid;
      if (i < 0 || i >= s.mid)
        pipert_fail("Gather: index %lld out of range for axis %lld of extent %lld",
                    (long long)idx[k], (long long)axis, (long long)shape[axis]);
      const T *src = data + (o * s.mid + i) * s.inner;
      T *dst = y + (o * nidx + k) * s.inner;
      std::copy(src, src + s.inner, dst);
    }
}

template <typename From, typename To> void cast_loop(const From *x, To *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<To>(x[i]);
}

template <typename From> void cast_from(const From *x, pipert_dtype to, void *y, int64_t n) {
  switch (to) {
  case PIPERT_F32: return cast_loop(x, (float *)y, n);
  case PIPERT_F64: return cast_loop(x, (double *)y, n);
  case PIPERT_I64: return cast_loop(x, (int64_t *)y, n);
  case PIPERT_I32: return cast_loop(x, (int32_t *)y, n);
  case PIPERT_I8: return cast_loop(x, (int8_t *)y, n);
  case PIPERT_U8: return cast_loop(x, (uint8_t *)y, n);
  case PIPERT_BOOL: {
    uint8_t *b = (uint8_t *)y;
    for (int64_t i = 0; i < n; ++i)
      b[i] = x[i] != From(0);
    return;
  }
  default: break;
  }
  pipert_fail("Cast: unsupported target type %s", pipert_dtype_name(to));
}

template <typename T>
void tile_typed(const formula::TileGeom &g, const T *x, T *y) {
  const int64_t n = numel(g.y.rank, g.y.d);
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[formula::tile_source(g, i)];
}

template <typename T>
void cumsum_typed(const T *x, int64_t rank, const int64_t *shape, int64_t axis, int exclusive,
                  int reverse, T *y) {
  if (rank == 0) {
    y[0] = exclusive ? T(0) : x[0];
    return;
  }
  const AxisSplit sp = split_at(rank, shape, norm_axis("CumSum", axis, rank));
  for (int64_t o = 0; o < sp.outer; ++o)
    for (int64_t i = 0; i < sp.inner; ++i) {
      const int64_t base = o * sp.mid * sp.inner + i;
      formula::cumsum_line(x + base, y + base, sp.mid, sp.inner, exclusive != 0, reverse != 0);
    }
}

template <typename T>
void pad_typed(const formula::PadGeom &g, const T *x, T value, T *y) {
  const int64_t n = numel(g.y.rank, g.y.d);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = formula::pad_source(g, i);
    y[i] = s < 0 ? value : x[s];
  }
}

// Resize's taps per axis and output index, computed once per call (the
// per-element loops then only gather): count (0: extrapolated), then up to
// four indices and weights at [4 * o].
struct ResizeTaps {
  std::vector<int> count[3];
  std::vector<int64_t> idx[3];
  std::vector<float> w[3];
  bool single[3] = {true, true, true}; // every output index has one tap
  bool pair[3] = {true, true, true};   // ... two taps
  explicit ResizeTaps(const formula::ResizeGeom &g) {
    for (int d = 0; d < 3; ++d) {
      const int64_t out = g.axis[d].out;
      count[d].resize(size_t(out));
      idx[d].assign(size_t(4 * out), 0);
      w[d].assign(size_t(4 * out), 0.f);
      for (int64_t o = 0; o < out; ++o)
      {
        count[d][size_t(o)] = formula::resize_taps(g, d, o, &idx[d][size_t(4 * o)],
                                                   &w[d][size_t(4 * o)]);
        single[d] = single[d] && count[d][size_t(o)] == 1;
        pair[d] = pair[d] && count[d][size_t(o)] == 2;
      }
    }
  }
};

template <typename T>
void trilu_typed(const T *x, int64_t n, int64_t rows, int64_t cols, bool upper, int64_t k,
                        T *y) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = i % cols, r = (i / cols) % rows;
    y[i] = formula::trilu_keep(r, c, upper, k) ? x[i] : T(0);
  }
}

} // namespace

namespace {

// The element offset in data of the slice tuple t of a GatherND or
// ScatterND names; fails naming the kernel when an index is out of range.
int64_t tuple_offset(const char *op, const pipert::TupleLayout &l, const int64_t *indices,
                     int64_t t) {
  int64_t off = (l.per_batch ? t / l.per_batch : 0) * l.batch_stride;
  for (int64_t j = 0; j < l.k; ++j) {
    int64_t i = indices[t * l.k + j];
    if (i < 0)
      i += l.dims[j];
    if (i < 0 || i >= l.dims[j])
      pipert_fail("%s: index %lld out of range for an axis of extent %lld", op,
                  (long long)indices[t * l.k + j], (long long)l.dims[j]);
    off += i * l.strides[j];
  }
  return off;
}

template <typename T>
void scatter_reduce(const char *op, const pipert::TupleLayout &l, const int64_t *indices,
                    const T *upd, int64_t reduction, T *y) {
  for (int64_t t = 0; t < l.tuples; ++t) {
    T *dst = y + tuple_offset(op, l, indices, t);
    const T *src = upd + t * l.slice;
    for (int64_t j = 0; j < l.slice; ++j)
      switch (reduction) {
      case PIPERT_SCATTER_ADD: dst[j] += src[j]; break;
      case PIPERT_SCATTER_MUL: dst[j] *= src[j]; break;
      case PIPERT_SCATTER_MAX: dst[j] = std::max(dst[j], src[j]); break;
      default: dst[j] = std::min(dst[j], src[j]); break;
      }
  }
}

} // namespace

namespace {

// Line l of an ElementLayout: its first entry's offset in the indices and
// the offset in data of its coordinates off the axis.
void element_line(const pipert::ElementLayout &l, int64_t line, int64_t *idx_base,
                  int64_t *data_base) {
  *idx_base = (line / l.inner) * l.extent * l.inner + line % l.inner;
  int64_t rest = *idx_base, off = 0;
  for (int64_t d = l.rank - 1; d >= 0; --d) {
    if (d != l.axis)
      off += (rest % l.idx_shape[d]) * l.data_strides[d];
    rest /= l.idx_shape[d];
  }
  *data_base = off;
}

// The data offset of entry j of a line whose data offset is base.
int64_t element_offset(const char *op, const pipert::ElementLayout &l, const int64_t *indices,
                       int64_t idx_base, int64_t data_base, int64_t j) {
  int64_t i = indices[idx_base + j * l.inner];
  int64_t v = i < 0 ? i + l.dim : i;
  if (v < 0 || v >= l.dim)
    pipert_fail("%s: index %lld out of range for axis %lld of extent %lld", op, (long long)i,
                (long long)l.axis, (long long)l.dim);
  return data_base + v * l.data_strides[l.axis];
}

template <typename T>
void gather_elements_typed(const char *op, const pipert::ElementLayout &l, const T *data,
                           const int64_t *indices, T *y) {
  for (int64_t line = 0; line < l.lines; ++line) {
    int64_t ib, db;
    element_line(l, line, &ib, &db);
    for (int64_t j = 0; j < l.extent; ++j)
      y[ib + j * l.inner] = data[element_offset(op, l, indices, ib, db, j)];
  }
}

// y (already data) combined with the updates at the indices' positions.
template <typename T>
void scatter_elements_typed(const char *op, const pipert::ElementLayout &l,
                            const int64_t *indices, const T *upd, int64_t reduction, T *y) {
  for (int64_t line = 0; line < l.lines; ++line) {
    int64_t ib, db;
    element_line(l, line, &ib, &db);
    for (int64_t j = 0; j < l.extent; ++j) {
      T &d = y[element_offset(op, l, indices, ib, db, j)];
      const T v = upd[ib + j * l.inner];
      switch (reduction) {
      case PIPERT_SCATTER_NONE: d = v; break;
      case PIPERT_SCATTER_ADD: d += v; break;
      case PIPERT_SCATTER_MUL: d *= v; break;
      case PIPERT_SCATTER_MAX: d = std::max(d, v); break;
      default: d = std::min(d, v); break;
      }
    }
  }
}

} // namespace

namespace {

// Concat and Split move each input's chunk of every outer row. Chunks of a
// few elements (torch.stack on the last axis: rotary positions' interleaved
// pairs, one float each) went as a memcpy call apiece, ~5 ns an element: a
// Llama's rotary Concats were 10% of its step. Below kSmallChunk bytes a
// typed loop per input over the rows moves them instead. `gather`:
// Concat (inputs into the rows of `rows`), else Split (out of them).
constexpr size_t kSmallChunk = 32;

template <typename T>
void move_small_chunks(bool gather, int64_t outer, int64_t n, void *const *parts,
                       const int64_t *axis_sizes, int64_t inner, T *rows) {
  int64_t row = 0;
  for (int64_t i = 0; i < n; ++i)
    row += axis_sizes[i] * inner;
  int64_t at = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = axis_sizes[i] * inner;
    T *p = static_cast<T *>(parts[i]);
    if (c == 1) {
      if (gather)
        for (int64_t o = 0; o < outer; ++o)
          rows[o * row + at] = p[o];
      else
        for (int64_t o = 0; o < outer; ++o)
          p[o] = rows[o * row + at];
    } else {
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t e = 0; e < c; ++e) {
          if (gather)
            rows[o * row + at + e] = p[o * c + e];
          else
            p[o * c + e] = rows[o * row + at + e];
        }
    }
    at += c;
  }
}

// Whether every chunk is small and the element a word: the typed loop.
bool small_chunks(size_t es, int64_t n, const int64_t *axis_sizes, int64_t inner, int64_t outer) {
  if (es != 1 && es != 2 && es != 4 && es != 8)
    return false;
  if (outer < 8)
    return false;
  for (int64_t i = 0; i < n; ++i)
    if (size_t(axis_sizes[i] * inner) * es > kSmallChunk)
      return false;
  return true;
}

void move_small(bool gather, size_t es, int64_t outer, int64_t n, void *const *parts,
                const int64_t *axis_sizes, int64_t inner, void *rows) {
  switch (es) {
  case 1: return move_small_chunks(gather, outer, n, parts, axis_sizes, inner, (uint8_t *)rows);
  case 2: return move_small_chunks(gather, outer, n, parts, axis_sizes, inner, (uint16_t *)rows);
  case 4: return move_small_chunks(gather, outer, n, parts, axis_sizes, inner, (uint32_t *)rows);
  default: return move_small_chunks(gather, outer, n, parts, axis_sizes, inner, (uint64_t *)rows);
  }
}

} // namespace

extern "C" {

void pipert_transpose(pipert_context *, pipert_dtype dtype, const void *x, int64_t rank,
                      const int64_t *shape, const int64_t *perm, void *y) {
  const char *op = "Transpose";
  size_t es = elem_size(op, dtype);
  TransposeView v = transpose_view(op, rank, shape, perm);
  copy_view(es, (const char *)x, rank, v.shape, v.strides, (char *)y);
}

void pipert_concat(pipert_context *, pipert_dtype dtype, int64_t n, const void *const *xs,
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
  if (small_chunks(es, n, axis_sizes, s.inner, s.outer))
    return move_small(true, es, s.outer, n, const_cast<void *const *>(xs), axis_sizes, s.inner,
                      y);
  char *out = (char *)y;
  const size_t row = size_t(s.mid * s.inner) * es;
  for (int64_t o = 0; o < s.outer; ++o) {
    size_t at = 0;
    for (int64_t i = 0; i < n; ++i) {
      const size_t chunk = size_t(axis_sizes[i] * s.inner) * es;
      if (chunk)
        std::memcpy(out + o * row + at, (const char *)xs[i] + o * chunk, chunk);
      at += chunk;
    }
  }
}

void pipert_split(pipert_context *, pipert_dtype dtype, const void *x, int64_t rank,
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
  if (small_chunks(es, n, split, s.inner, s.outer))
    return move_small(false, es, s.outer, n, ys, split, s.inner, const_cast<void *>(x));
  const char *in = (const char *)x;
  const size_t row = size_t(s.mid * s.inner) * es;
  for (int64_t o = 0; o < s.outer; ++o) {
    size_t at = 0;
    for (int64_t i = 0; i < n; ++i) {
      const size_t chunk = size_t(split[i] * s.inner) * es;
      if (chunk)
        std::memcpy((char *)ys[i] + o * chunk, in + o * row + at, chunk);
      at += chunk;
    }
  }
}

void pipert_slice_shape(int64_t rank, const int64_t *shape, int64_t n_axes,
                        const int64_t *starts, const int64_t *ends, const int64_t *axes,
                        const int64_t *steps, int64_t *y_shape) {
  SliceView v = slice_view(rank, shape, n_axes, starts, ends, axes, steps);
  std::copy(v.out, v.out + rank, y_shape);
}

void pipert_slice(pipert_context *, pipert_dtype dtype, const void *x, int64_t rank,
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
  copy_view(es, (const char *)x + base * int64_t(es), rank, v.out, strides, (char *)y);
}

void pipert_slice_grad_f32(pipert_context *, const float *dy, int64_t rank,
                           const int64_t *x_shape, int64_t n_axes, const int64_t *starts,
                           const int64_t *ends, const int64_t *axes, const int64_t *steps,
                           float *dx) {
  SliceView v = slice_view(rank, x_shape, n_axes, starts, ends, axes, steps);
  std::fill(dx, dx + numel(rank, x_shape), 0.f);
  if (numel(rank, v.out) == 0)
    return;
  int64_t st[1][kMaxRank], base = 0, s = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    base += v.start[i] * s;
    st[0][i] = v.step[i] * s;
    s *= x_shape[i];
  }
  float *d = dx + base;
  broadcast_loop<1>(rank, v.out, st, [&](const int64_t *off, int64_t yo, int64_t len,
                                         const int64_t *ist) {
    for (int64_t i = 0; i < len; ++i)
      d[off[0] + i * ist[0]] = dy[yo + i];
  });
}

void pipert_gather(pipert_context *, pipert_dtype dtype, const void *data, int64_t rank,
                   const int64_t *shape, const int64_t *indices, int64_t idx_rank,
                   const int64_t *idx_shape, int64_t axis, void *y) {
  const char *op = "Gather";
  check_rank(op, rank);
  int64_t a = norm_axis(op, axis, rank);
  AxisSplit s = split_at(rank, shape, a);
  int64_t nidx = numel(idx_rank, idx_shape);
  switch (elem_size(op, dtype)) {
  case 1: return gather_typed((const uint8_t *)data, shape, a, s, indices, nidx, (uint8_t *)y);
  case 2: return gather_typed((const uint16_t *)data, shape, a, s, indices, nidx, (uint16_t *)y);
  case 4: return gather_typed((const uint32_t *)data, shape, a, s, indices, nidx, (uint32_t *)y);
  case 8: return gather_typed((const uint64_t *)data, shape, a, s, indices, nidx, (uint64_t *)y);
  }
  pipert_fail("%s: unsupported dtype", op);
}


void pipert_gather_nd(pipert_context *, pipert_dtype dtype, const void *data, int64_t rank,
                      const int64_t *shape, const int64_t *indices, int64_t idx_rank,
                      const int64_t *idx_shape, int64_t batch_dims, void *y) {
  const char *op = "GatherND";
  pipert::TupleLayout l = pipert::tuple_layout(op, rank, shape, idx_rank, idx_shape, batch_dims);
  const size_t es = elem_size(op, dtype), bytes = size_t(l.slice) * es;
  for (int64_t t = 0; t < l.tuples; ++t)
    std::memcpy((char *)y + size_t(t) * bytes,
                (const char *)data + size_t(tuple_offset(op, l, indices, t)) * es, bytes);
}

void pipert_gather_nd_grad_f32(pipert_context *, const float *dy, int64_t rank,
                               const int64_t *data_shape, const int64_t *indices,
                               int64_t idx_rank, const int64_t *idx_shape, int64_t batch_dims,
                               float *dx) {
  const char *op = "GatherNDGrad";
  pipert::TupleLayout l =
      pipert::tuple_layout(op, rank, data_shape, idx_rank, idx_shape, batch_dims);
  std::fill(dx, dx + numel(rank, data_shape), 0.f);
  for (int64_t t = 0; t < l.tuples; ++t) {
    float *PIPERT_RESTRICT dst = dx + tuple_offset(op, l, indices, t);
    const float *PIPERT_RESTRICT src = dy + t * l.slice;
    for (int64_t j = 0; j < l.slice; ++j)
      dst[j] += src[j];
  }
}

void pipert_scatter_nd(pipert_context *, pipert_dtype dtype, const void *data, int64_t rank,
                       const int64_t *shape, const int64_t *indices, int64_t idx_rank,
                       const int64_t *idx_shape, const void *updates, int64_t reduction,
                       void *y) {
  const char *op = "ScatterND";
  pipert::TupleLayout l = pipert::tuple_layout(op, rank, shape, idx_rank, idx_shape, 0);
  const size_t es = elem_size(op, dtype);
  if (y != data)
    std::memcpy(y, data, size_t(numel(rank, shape)) * es);
  if (reduction == PIPERT_SCATTER_NONE) {
    const size_t bytes = size_t(l.slice) * es;
    for (int64_t t = 0; t < l.tuples; ++t)
      std::memcpy((char *)y + size_t(tuple_offset(op, l, indices, t)) * es,
                  (const char *)updates + size_t(t) * bytes, bytes);
    return;
  }
  if (reduction < 0 || reduction > PIPERT_SCATTER_MIN)
    pipert_fail("%s: unknown reduction %lld", op, (long long)reduction);
  pipert::typed_dispatch(op, dtype, es, reduction, [&](auto t) {
    using T = decltype(t);
    scatter_reduce(op, l, indices, (const T *)updates, reduction, (T *)y);
  });
}

void pipert_scatter_nd_grad_f32(pipert_context *, const float *dy, int64_t rank,
                                const int64_t *shape, const int64_t *indices, int64_t idx_rank,
                                const int64_t *idx_shape, float *dx) {
  const char *op = "ScatterNDGrad";
  pipert::TupleLayout l = pipert::tuple_layout(op, rank, shape, idx_rank, idx_shape, 0);
  std::copy(dy, dy + numel(rank, shape), dx);
  for (int64_t t = 0; t < l.tuples; ++t) {
    float *dst = dx + tuple_offset(op, l, indices, t);
    std::fill(dst, dst + l.slice, 0.f);
  }
}

void pipert_gather_elements(pipert_context *, pipert_dtype dtype, const void *data,
                            int64_t rank, const int64_t *shape, const int64_t *indices,
                            const int64_t *idx_shape, int64_t axis, void *y) {
  const char *op = "GatherElements";
  pipert::ElementLayout l = pipert::element_layout(op, rank, shape, idx_shape, axis);
  pipert::typed_dispatch(op, dtype, elem_size(op, dtype), PIPERT_SCATTER_NONE, [&](auto t) {
    using T = decltype(t);
    gather_elements_typed(op, l, (const T *)data, indices, (T *)y);
  });
}

void pipert_gather_elements_grad_f32(pipert_context *, const float *dy, int64_t rank,
                                     const int64_t *data_shape, const int64_t *indices,
                                     const int64_t *idx_shape, int64_t axis, float *dx) {
  const char *op = "GatherElementsGrad";
  pipert::ElementLayout l = pipert::element_layout(op, rank, data_shape, idx_shape, axis);
  std::fill(dx, dx + numel(rank, data_shape), 0.f);
  scatter_elements_typed(op, l, indices, dy, PIPERT_SCATTER_ADD, dx);
}

void pipert_scatter_elements(pipert_context *, pipert_dtype dtype, const void *data,
                             int64_t rank, const int64_t *shape, const int64_t *indices,
                             const int64_t *idx_shape, const void *updates, int64_t axis,
                             int64_t reduction, void *y) {
  const char *op = "ScatterElements";
  pipert::ElementLayout l = pipert::element_layout(op, rank, shape, idx_shape, axis);
  const size_t es = elem_size(op, dtype);
  if (reduction < 0 || reduction > PIPERT_SCATTER_MIN)
    pipert_fail("%s: unknown reduction %lld", op, (long long)reduction);
  if (y != data)
    std::memcpy(y, data, size_t(numel(rank, shape)) * es);
  pipert::typed_dispatch(op, dtype, es, reduction, [&](auto t) {
    using T = decltype(t);
    scatter_elements_typed(op, l, indices, (const T *)updates, reduction, (T *)y);
  });
}

void pipert_scatter_elements_grad_f32(pipert_context *, const float *dy, int64_t rank,
                                      const int64_t *shape, const int64_t *indices,
                                      const int64_t *idx_shape, int64_t axis, float *dx) {
  const char *op = "ScatterElementsGrad";
  pipert::ElementLayout l = pipert::element_layout(op, rank, shape, idx_shape, axis);
  std::copy(dy, dy + numel(rank, shape), dx);
  for (int64_t line = 0; line < l.lines; ++line) {
    int64_t ib, db;
    element_line(l, line, &ib, &db);
    for (int64_t j = 0; j < l.extent; ++j)
      dx[element_offset(op, l, indices, ib, db, j)] = 0.f;
  }
}

void pipert_gather_grad_f32(pipert_context *, const float *dy, int64_t rank,
                            const int64_t *data_shape, const int64_t *indices, int64_t idx_rank,
                            const int64_t *idx_shape, int64_t axis, float *dx) {
  const char *op = "GatherGrad";
  check_rank(op, rank);
  int64_t a = norm_axis(op, axis, rank);
  AxisSplit s = split_at(rank, data_shape, a);
  int64_t nidx = numel(idx_rank, idx_shape);
  std::fill(dx, dx + numel(rank, data_shape), 0.f);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t k = 0; k < nidx; ++k) {
      int64_t i = indices[k];
      if (i < 0)
        i += s.mid;
      if (i < 0 || i >= s.mid)
        pipert_fail("%s: index %lld out of range", op, (long long)indices[k]);
      float *PIPERT_RESTRICT dst = dx + (o * s.mid + i) * s.inner;
      const float *PIPERT_RESTRICT src = dy + (o * nidx + k) * s.inner;
      for (int64_t j = 0; j < s.inner; ++j)
        dst[j] += src[j];
    }
}

void pipert_expand(pipert_context *, pipert_dtype dtype, const void *x, int64_t x_rank,
                   const int64_t *x_shape, int64_t y_rank, const int64_t *y_shape, void *y) {
  const char *op = "Expand";
  int64_t strides[kMaxRank];
  expand_strides(op, x_rank, x_shape, y_rank, y_shape, strides);
  size_t es = elem_size(op, dtype);
  copy_view(es, (const char *)x, y_rank, y_shape, strides, (char *)y);
}

void pipert_cast(pipert_context *, pipert_dtype from, const void *x, pipert_dtype to, void *y,
                 int64_t n) {
  switch (from) {
  case PIPERT_F32: return cast_from((const float *)x, to, y, n);
  case PIPERT_F64: return cast_from((const double *)x, to, y, n);
  case PIPERT_I64: return cast_from((const int64_t *)x, to, y, n);
  case PIPERT_I32: return cast_from((const int32_t *)x, to, y, n);
  case PIPERT_I8: return cast_from((const int8_t *)x, to, y, n);
  case PIPERT_U8: case PIPERT_BOOL: return cast_from((const uint8_t *)x, to, y, n);
  default: break;
  }
  pipert_fail("Cast: unsupported source type %s", pipert_dtype_name(from));
}

void pipert_reduce_f32(pipert_context *, pipert_reduce_op op, const float *x, int64_t rank,
                       const int64_t *shape, int64_t n_axes, const int64_t *axes,
                       int noop_with_empty_axes, float *y) {
  const char *name = "Reduce";
  check_rank(name, rank);
  const int64_t n = numel(rank, shape);
  if (n_axes == 0 && noop_with_empty_axes) {
    if (y != x)
      std::memmove(y, x, size_t(n) * sizeof(float));
    return;
  }
  bool red[kMaxRank] = {};
  for (int64_t k = 0; k < n_axes; ++k)
    red[norm_axis(name, axes[k], rank)] = true;
  if (n_axes == 0)
    for (int64_t i = 0; i < rank; ++i)
      red[i] = true;
  // Iterate x contiguously; y advances with stride 0 on reduced axes.
  int64_t st[2][kMaxRank], yshape[kMaxRank];
  for (int64_t i = 0; i < rank; ++i)
    yshape[i] = red[i] ? 1 : shape[i];
  broadcast_strides(rank, yshape, rank, st[0]);
  broadcast_strides(rank, shape, rank, st[1]);
  const int64_t ny = numel(rank, yshape);
  const int64_t count = ny ? n / std::max<int64_t>(ny, 1) : 0;
  double *acc = scratch<double>(static_cast<size_t>(ny));
  const double init = op == PIPERT_REDUCE_MAX   ? -INFINITY
                      : op == PIPERT_REDUCE_MIN ? INFINITY
                                                : 0.0;
  std::fill(acc, acc + ny, init);
  broadcast_loop<2>(rank, shape, st, [&](const int64_t *off, int64_t, int64_t len,
                                         const int64_t *ist) {
    double *a = acc + off[0];
    const float *p = x + off[1];
    switch (op) {
    case PIPERT_REDUCE_SUM: case PIPERT_REDUCE_MEAN:
      if (ist[0]) {
        for (int64_t i = 0; i < len; ++i)
          a[i] += p[i];
      } else {
        float s = 0.f; // float partial sums vectorise; runs are short enough
        for (int64_t i = 0; i < len; ++i)
          s += p[i];
        *a += s;
      }
      break;
    case PIPERT_REDUCE_SUM_SQUARE:
      for (int64_t i = 0; i < len; ++i)
        a[i * ist[0]] += double(p[i]) * p[i];
      break;
    case PIPERT_REDUCE_MAX:
      for (int64_t i = 0; i < len; ++i)
        a[i * ist[0]] = std::max(a[i * ist[0]], double(p[i]));
      break;
    case PIPERT_REDUCE_MIN:
      for (int64_t i = 0; i < len; ++i)
        a[i * ist[0]] = std::min(a[i * ist[0]], double(p[i]));
      break;
    }
  });
  if (op != PIPERT_REDUCE_SUM && op != PIPERT_REDUCE_MEAN && op != PIPERT_REDUCE_SUM_SQUARE &&
      op != PIPERT_REDUCE_MAX && op != PIPERT_REDUCE_MIN)
    pipert_fail("Reduce: unknown op %d", int(op));
  const double div = op == PIPERT_REDUCE_MEAN ? double(count) : 1.0;
  for (int64_t i = 0; i < ny; ++i)
    y[i] = float(acc[size_t(i)] / div);
}

void pipert_reduce_extremum_grad_f32(pipert_context *, pipert_reduce_op op, const float *x,
                                     int64_t rank, const int64_t *shape, int64_t n_axes,
                                     const int64_t *axes, int noop_with_empty_axes,
                                     const float *dy, float *dx) {
  const char *name = "ReduceExtremumGrad";
  check_rank(name, rank);
  if (op != PIPERT_REDUCE_MAX && op != PIPERT_REDUCE_MIN)
    pipert_fail("%s: op %d is not MAX or MIN", name, int(op));
  const int64_t n = numel(rank, shape);
  if (n_axes == 0 && noop_with_empty_axes) {
    std::memmove(dx, dy, size_t(n) * sizeof(float));
    return;
  }
  bool red[kMaxRank];
  formula::reduced_axes(name, rank, n_axes, axes, red);
  const formula::ReduceGroups g = formula::reduce_groups(rank, shape, red);
  std::fill(dx, dx + n, 0.f);
  if (g.count == 0)
    return;
  for (int64_t o = 0; o < g.groups; ++o) {
    int64_t j;
    dx[formula::group_extremum(g, x, o, op == PIPERT_REDUCE_MIN, false, j)] = dy[o];
  }
}

void pipert_arg_reduce_f32(pipert_context *, pipert_reduce_op op, const float *x, int64_t rank,
                           const int64_t *shape, int64_t axis, int select_last_index,
                           int64_t *y) {
  const char *name = op == PIPERT_REDUCE_MIN ? "ArgMin" : "ArgMax";
  const formula::ReduceGroups g = formula::arg_reduce_groups(name, op, rank, shape, axis);
  for (int64_t o = 0; o < g.groups; ++o) {
    int64_t j;
    formula::group_extremum(g, x, o, op == PIPERT_REDUCE_MIN, select_last_index != 0, j);
    y[o] = j;
  }
}

void pipert_cumsum(pipert_context *, pipert_dtype dtype, const void *x, int64_t rank,
                   const int64_t *shape, int64_t axis, int exclusive, int reverse, void *y) {
  check_rank("CumSum", rank);
  switch (dtype) {
  case PIPERT_F32: return cumsum_typed((const float *)x, rank, shape, axis, exclusive, reverse, (float *)y);
  case PIPERT_F64: return cumsum_typed((const double *)x, rank, shape, axis, exclusive, reverse, (double *)y);
  case PIPERT_I32: return cumsum_typed((const int32_t *)x, rank, shape, axis, exclusive, reverse, (int32_t *)y);
  case PIPERT_I64: return cumsum_typed((const int64_t *)x, rank, shape, axis, exclusive, reverse, (int64_t *)y);
  default: break;
  }
  pipert_fail("CumSum: unsupported dtype %s", pipert_dtype_name(dtype));
}

void pipert_tile(pipert_context *, pipert_dtype dtype, const void *x, int64_t rank,
                 const int64_t *shape, const int64_t *repeats, void *y) {
  check_rank("Tile", rank);
  const formula::TileGeom g = formula::tile_geom(rank, shape, repeats);
  switch (elem_size("Tile", dtype)) {
  case 1: return tile_typed(g, (const uint8_t *)x, (uint8_t *)y);
  case 2: return tile_typed(g, (const uint16_t *)x, (uint16_t *)y);
  case 4: return tile_typed(g, (const uint32_t *)x, (uint32_t *)y);
  case 8: return tile_typed(g, (const uint64_t *)x, (uint64_t *)y);
  }
  pipert_fail("Tile: unsupported dtype %d", int(dtype));
}

void pipert_tile_grad_f32(pipert_context *, const float *dy, int64_t rank,
                          const int64_t *x_shape, const int64_t *repeats, float *dx) {
  check_rank("TileGrad", rank);
  const formula::TileGeom g = formula::tile_geom(rank, x_shape, repeats);
  const int64_t n = numel(rank, x_shape);
  for (int64_t j = 0; j < n; ++j)
    dx[j] = formula::tile_grad(g, dy, j);
}

void pipert_pad(pipert_context *, pipert_dtype dtype, pipert_pad_mode mode, const void *x,
                int64_t rank, const int64_t *shape, const int64_t *pads, float value, void *y) {
  check_rank("Pad", rank);
  const formula::PadGeom g = formula::pad_geom(int(mode), rank, shape, pads);
  switch (dtype) {
  case PIPERT_F32: return pad_typed(g, (const float *)x, float(value), (float *)y);
  case PIPERT_F64: return pad_typed(g, (const double *)x, double(value), (double *)y);
  case PIPERT_I64: return pad_typed(g, (const int64_t *)x, int64_t(value), (int64_t *)y);
  case PIPERT_I32: return pad_typed(g, (const int32_t *)x, int32_t(value), (int32_t *)y);
  case PIPERT_I8: return pad_typed(g, (const int8_t *)x, int8_t(value), (int8_t *)y);
  case PIPERT_U8: return pad_typed(g, (const uint8_t *)x, uint8_t(value), (uint8_t *)y);
  case PIPERT_BOOL: return pad_typed(g, (const uint8_t *)x, uint8_t(value != 0.f), (uint8_t *)y);
  default: break;
  }
  pipert_fail("Pad: unsupported dtype %s", pipert_dtype_name(dtype));
}

void pipert_pad_grad_f32(pipert_context *, pipert_pad_mode mode, const float *dy, int64_t rank,
                         const int64_t *x_shape, const int64_t *pads, float *dx) {
  check_rank("PadGrad", rank);
  const formula::PadGeom g = formula::pad_geom(int(mode), rank, x_shape, pads);
  std::fill(dx, dx + numel(rank, x_shape), 0.f);
  const int64_t n = numel(g.y.rank, g.y.d);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = formula::pad_source(g, i);
    if (s >= 0)
      dx[s] += dy[i];
  }
}

void pipert_resize_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                       const int64_t y_shape[4], const float *scales, const float *roi,
                       pipert_resize_mode mode, pipert_resize_coord coord,
                       pipert_resize_nearest nearest, float cubic_coeff_a, int exclude_outside,
                       float extrapolation_value, float *y) {
  const formula::ResizeGeom g =
      formula::resize_geom(x_shape, y_shape, scales, roi, mode, coord, nearest, cubic_coeff_a,
                           exclude_outside, extrapolation_value);
  const ResizeTaps t(g);
  const int64_t inD = x_shape[1], inH = x_shape[2], inW = x_shape[3];
  const int64_t oD = y_shape[1], oH = y_shape[2], oW = y_shape[3];
  const int64_t rows = g.outer * oD * oH;
  parallel_for(ctx, rows, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(oW, 1)),
               [&](int64_t b, int64_t e) {
                 const float *src[16];
                 float wsrc[16];
                 for (int64_t r = b; r < e; ++r) {
                   const int64_t oh = r % oH, od = (r / oH) % oD, n = r / (oH * oD);
                   float *yr = y + r * oW;
                   const int nd = t.count[0][od], nh = t.count[1][oh];
                   if (nd == 0 || nh == 0) {
                     std::fill(yr, yr + oW, g.extrapolation);
                     continue;
                   }
                   // The (d, h) source rows of this output row and their weights.
                   int k = 0;
                   for (int a = 0; a < nd; ++a)
                     for (int c = 0; c < nh; ++c, ++k) {
                       src[k] = x + ((n * inD + t.idx[0][4 * od + a]) * inH +
                                     t.idx[1][4 * oh + c]) * inW;
                       wsrc[k] = t.w[0][4 * od + a] * t.w[1][4 * oh + c];
                     }
                   if (k == 1 && t.single[2]) {
                     // One tap per axis (nearest, or W kept): a gather.
                     const float *s0 = src[0];
                     const float w0 = wsrc[0];
                     for (int64_t ow = 0; ow < oW; ++ow)
                       yr[ow] = w0 * t.w[2][4 * ow] * s0[t.idx[2][4 * ow]];
                     continue;
                   }
                   if (k == 2 && t.pair[2]) {
                     // Bilinear: two rows, two taps each.
                     const float *s0 = src[0], *s1 = src[1];
                     const float w0 = wsrc[0], w1 = wsrc[1];
                     for (int64_t ow = 0; ow < oW; ++ow) {
                       const int64_t *iw = &t.idx[2][4 * ow];
                       const float *ww = &t.w[2][4 * ow];
                       yr[ow] = w0 * (ww[0] * s0[iw[0]] + ww[1] * s0[iw[1]]) +
                                w1 * (ww[0] * s1[iw[0]] + ww[1] * s1[iw[1]]);
                     }
                     continue;
                   }
                   for (int64_t ow = 0; ow < oW; ++ow) {
                     const int nw = t.count[2][ow];
                     if (nw == 0) {
                       yr[ow] = g.extrapolation;
                       continue;
                     }
                     const int64_t *iw = &t.idx[2][4 * ow];
                     const float *ww = &t.w[2][4 * ow];
                     float acc = 0.f;
                     for (int q = 0; q < k; ++q) {
                       float v = 0.f;
                       for (int c = 0; c < nw; ++c)
                         v += ww[c] * src[q][iw[c]];
                       acc += wsrc[q] * v;
                     }
                     yr[ow] = acc;
                   }
                 }
               });
}

void pipert_resize_grad_f32(pipert_context *ctx, const float *dy, const int64_t x_shape[4],
                            const int64_t y_shape[4], const float *scales, const float *roi,
                            pipert_resize_mode mode, pipert_resize_coord coord,
                            pipert_resize_nearest nearest, float cubic_coeff_a,
                            int exclude_outside, float *dx) {
  const formula::ResizeGeom g = formula::resize_geom(
      x_shape, y_shape, scales, roi, mode, coord, nearest, cubic_coeff_a, exclude_outside, 0.f);
  const ResizeTaps t(g);
  const int64_t inD = x_shape[1], inH = x_shape[2], inW = x_shape[3];
  const int64_t oD = y_shape[1], oH = y_shape[2], oW = y_shape[3];
  const int64_t in = inD * inH * inW, out = oD * oH * oW;
  // Each outer slice scatters into its own part of dx: slices in parallel.
  parallel_for(ctx, g.outer, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(out, 1)),
               [&](int64_t b, int64_t e) {
                 std::fill(dx + b * in, dx + e * in, 0.f);
                 float *dst[16];
                 float wdst[16];
                 for (int64_t r = b * oD * oH; r < e * oD * oH; ++r) {
                   const int64_t oh = r % oH, od = (r / oH) % oD, n = r / (oH * oD);
                   const float *dyr = dy + r * oW;
                   const int nd = t.count[0][od], nh = t.count[1][oh];
                   int k = 0;
                   for (int a = 0; a < nd; ++a)
                     for (int c = 0; c < nh; ++c, ++k) {
                       dst[k] = dx + ((n * inD + t.idx[0][4 * od + a]) * inH +
                                      t.idx[1][4 * oh + c]) * inW;
                       wdst[k] = t.w[0][4 * od + a] * t.w[1][4 * oh + c];
                     }
                   if (k == 1 && t.single[2]) {
                     float *d0 = dst[0];
                     const float w0 = wdst[0];
                     for (int64_t ow = 0; ow < oW; ++ow)
                       d0[t.idx[2][4 * ow]] += w0 * t.w[2][4 * ow] * dyr[ow];
                     continue;
                   }
                   for (int64_t ow = 0; ow < oW; ++ow) {
                     const int nw = t.count[2][ow];
                     const int64_t *iw = &t.idx[2][4 * ow];
                     const float *ww = &t.w[2][4 * ow];
                     for (int q = 0; q < k; ++q) {
                       const float v = wdst[q] * dyr[ow];
                       for (int c = 0; c < nw; ++c)
                         dst[q][iw[c]] += ww[c] * v;
                     }
                   }
                 }
               });
}

void pipert_trilu(pipert_context *, pipert_dtype dtype, const void *x, int64_t rank,
                  const int64_t *shape, int upper, int64_t k, void *y) {
  check_rank("Trilu", rank);
  if (rank < 2)
    pipert_fail("Trilu: rank %lld, needs at least 2", (long long)rank);
  const int64_t n = numel(rank, shape), rows = shape[rank - 2], cols = shape[rank - 1];
  if (n == 0)
    return;
  const bool up = upper != 0;
  switch (elem_size("Trilu", dtype)) {
  case 1: return trilu_typed((const uint8_t *)x, n, rows, cols, up, k, (uint8_t *)y);
  case 2: return trilu_typed((const uint16_t *)x, n, rows, cols, up, k, (uint16_t *)y);
  case 4: return trilu_typed((const uint32_t *)x, n, rows, cols, up, k, (uint32_t *)y);
  case 8: return trilu_typed((const uint64_t *)x, n, rows, cols, up, k, (uint64_t *)y);
  }
  pipert_fail("Trilu: unsupported dtype %d", int(dtype));
}

void pipert_dropout_f32(pipert_context *ctx, const float *x, int64_t n, float ratio, int training,
                        float *y, uint8_t *mask) {
  if (!training || ratio == 0.f) {
    if (y != x)
      std::memmove(y, x, size_t(n) * sizeof(float));
    if (mask)
      std::fill(mask, mask + n, uint8_t(1));
    return;
  }
  if (!(ratio > 0.f && ratio < 1.f))
    pipert_fail("Dropout: ratio %g outside [0, 1)", double(ratio));
  // One draw from the context's stream seeds a counter-based generator, so a
  // call's mask depends only on the stream position and the element index.
  const uint64_t seed = pipert_context_next_random(ctx);
  const uint32_t threshold = formula::dropout_threshold(ratio);
  const float scale = 1.f / (1.f - ratio);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t keep = formula::dropout_keep(seed, i, threshold);
    if (mask)
      mask[i] = keep;
    y[i] = keep ? x[i] * scale : 0.f;
  }
}

void pipert_dropout_grad_f32(pipert_context *, const float *dy, const uint8_t *mask, int64_t n,
                             float ratio, float *dx) {
  const float scale = ratio > 0.f ? 1.f / (1.f - ratio) : 1.f;
  for (int64_t i = 0; i < n; ++i)
    dx[i] = mask[i] ? dy[i] * scale : 0.f;
}

} // extern "C"
