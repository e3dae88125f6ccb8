//===- conv.cpp - 2-D convolution (im2col + sgemm) and pooling (CPU) -------===//
#include "kernel_util.h"
#include "conv_onednn.h"
#include "../core/formulas.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__SSE__)
#include <immintrin.h>
#endif

using namespace pipert::cpu;

namespace {

// col[(c*kh + i)*kw + j][oy*ow + ox] = x[c][oy*sh - pt + i*dh][ox*sw - pl + j*dw] (0 outside).
// Tap (i, j) of a convolution whose output keeps the input's width with
// stride 1 ("same" padding): its im2col row is the plane shifted by (sy,
// sx). The output rows [oy0, oy1) and columns [ox0, ox1) read inside the
// plane; q0..q1 are the first and one past the last of those taps in the
// row, and every index between them reads inside the plane too (off
// added), the columns outside [ox0, ox1) wrapped into the neighbouring row.
struct PlaneShift {
  int64_t oy0, oy1, ox0, ox1, q0, q1, off;
  bool empty() const { return oy0 >= oy1 || ox0 >= ox1; }
};

inline PlaneShift plane_shift(const ConvGeom &g, int64_t i, int64_t j) {
  PlaneShift s;
  const int64_t sy = i * g.dh - g.pt, sx = j * g.dw - g.pl;
  s.oy0 = std::clamp<int64_t>(-sy, 0, g.oh);
  s.oy1 = std::clamp<int64_t>(g.h - sy, s.oy0, g.oh);
  s.ox0 = std::clamp<int64_t>(-sx, 0, g.ow);
  s.ox1 = std::clamp<int64_t>(g.w - sx, s.ox0, g.ow);
  s.q0 = s.oy0 * g.ow + s.ox0;
  s.q1 = s.empty() ? s.q0 : (s.oy1 - 1) * g.ow + s.ox1;
  s.off = sy * g.w + sx;
  return s;
}

// Zeroes the wrapped columns (outside [ox0, ox1)) of rows [oy0, oy1).
inline void zero_wrapped(const ConvGeom &g, const PlaneShift &s, float *PIPERT_RESTRICT row) {
  if (s.ox0 == 0 && s.ox1 == g.ow)
    return;
  for (int64_t oy = s.oy0; oy < s.oy1; ++oy) {
    float *r = row + oy * g.ow;
    for (int64_t ox = 0; ox < s.ox0; ++ox)
      r[ox] = 0.f;
    for (int64_t ox = s.ox1; ox < g.ow; ++ox)
      r[ox] = 0.f;
  }
}

// im2col's row of such a tap: the in-bounds taps as one contiguous copy of
// the plane, then the wrapped columns zeroed. One copy and a few stores
// instead of a copy per output row (a small image's rows are a few floats:
// 12 and 6 in the example CNN, whose im2col was a quarter of its step).
// The same values as the row-by-row copy.
void shifted_plane(const ConvGeom &g, const float *PIPERT_RESTRICT xc, int64_t i, int64_t j,
                   float *PIPERT_RESTRICT row) {
  const PlaneShift s = plane_shift(g, i, j);
  const int64_t n = g.oh * g.ow;
  if (s.empty()) {
    std::fill(row, row + n, 0.f);
    return;
  }
  std::fill(row, row + s.q0, 0.f);
  std::memcpy(row + s.q0, xc + s.q0 + s.off, size_t(s.q1 - s.q0) * sizeof(float));
  std::fill(row + s.q1, row + n, 0.f);
  zero_wrapped(g, s, row);
}

// Small planes (at most 64 outputs, a table of at most kTapTable taps):
// src[t * P + q] = the plane offset tap t (row-major over the kernel) of
// output q reads, -1 in the padding. False for larger planes.
constexpr int64_t kTapTable = 4096;
bool tap_table(const ConvGeom &g, int32_t *src) {
  const int64_t P = g.oh * g.ow, T = g.kh * g.kw;
  if (P > 64 || T * P > kTapTable || g.h * g.w > INT32_MAX)
    return false;
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j)
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          const int64_t iy = oy * g.sh - g.pt + i * g.dh, ix = ox * g.sw - g.pl + j * g.dw;
          src[(i * g.kw + j) * P + oy * g.ow + ox] =
              iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ? int32_t(iy * g.w + ix) : -1;
        }
  return true;
}

// ld: col's row stride (oh * ow for one sample; several samples' columns
// side by side in one col, conv_samples below, have a longer one).
void im2col(const ConvGeom &g, const float *PIPERT_RESTRICT x, float *PIPERT_RESTRICT col,
            int64_t ld) {
  // Planes of at most 64 outputs (ResNet's 2 x 2 to 8 x 8 stages at 64 x
  // 64 images): each tap row is a few floats, and the paths below spent
  // their time in per-row calls and bounds (3 x 3 over 2 x 2 planes, 512
  // channels: 4608 rows of 4 floats a sample). The taps' sources in the
  // plane are the same for every channel: a table of them, made once a
  // call, then one gather loop a channel. The same values (copies, and
  // +0.0 where a tap falls in the padding).
  const int64_t P = g.oh * g.ow, T = g.kh * g.kw;
  int32_t src[kTapTable];
  if (tap_table(g, src)) {
    for (int64_t c = 0; c < g.cg; ++c) {
      const float *xc = x + c * g.h * g.w;
      for (int64_t t = 0; t < T; ++t) {
        float *row = col + (c * T + t) * ld;
        const int32_t *s = src + t * P;
        for (int64_t q = 0; q < P; ++q)
          row[q] = s[q] >= 0 ? xc[s[q]] : 0.f;
      }
    }
    return;
  }
  const bool same = g.sh == 1 && g.sw == 1 && g.ow == g.w;
  for (int64_t c = 0; c < g.cg; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        float *row = col + ((c * g.kh + i) * g.kw + j) * ld;
        const float *xc = x + c * g.h * g.w;
        if (same) {
          shifted_plane(g, xc, i, j, row);
          continue;
        }
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          int64_t iy = oy * g.sh - g.pt + i * g.dh;
          float *r = row + oy * g.ow;
          if (iy < 0 || iy >= g.h) {
            std::fill(r, r + g.ow, 0.f);
            continue;
          }
          const float *xr = xc + iy * g.w;
          int64_t x0 = j * g.dw - g.pl;
          if (g.sw == 1 && x0 >= 0 && x0 + g.ow <= g.w) {
            std::memcpy(r, xr + x0, size_t(g.ow) * sizeof(float));
            continue;
          }
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            int64_t ix = ox * g.sw + x0;
            r[ox] = (ix >= 0 && ix < g.w) ? xr[ix] : 0.f;
          }
        }
      }
}

// The adjoint of im2col: dx += scatter of col (dx zeroed by the caller).
// col is the caller's scratch: with "same" padding (as im2col) its wrapped
// columns are zeroed and each tap's plane is added in one flat loop, the
// zeros landing on the neighbouring row's taps. That adds +0.0 to an
// element of dx that started at +0.0 and only had sums added: it cannot be
// -0.0, so the +0.0 changes nothing, and every element gets its other terms
// in the same order as row by row.
void col2im(const ConvGeom &g, float *PIPERT_RESTRICT col, float *PIPERT_RESTRICT dx,
            int64_t ld) {
  const bool same = g.sh == 1 && g.sw == 1 && g.ow == g.w;
  for (int64_t c = 0; c < g.cg; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        float *row = col + ((c * g.kh + i) * g.kw + j) * ld;
        float *xc = dx + c * g.h * g.w;
        if (same) {
          const PlaneShift ps = plane_shift(g, i, j);
          if (ps.empty())
            continue;
          zero_wrapped(g, ps, row);
          for (int64_t q = ps.q0; q < ps.q1; ++q)
            xc[q + ps.off] += row[q];
          continue;
        }
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          int64_t iy = oy * g.sh - g.pt + i * g.dh;
          if (iy < 0 || iy >= g.h)
            continue;
          const float *r = row + oy * g.ow;
          float *xr = xc + iy * g.w;
          int64_t x0 = j * g.dw - g.pl;
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            int64_t ix = ox * g.sw + x0;
            if (ix >= 0 && ix < g.w)
              xr[ix] += r[ox];
          }
        }
      }
}

// col2im from col's transpose: colT[q * ldt + row] holds col[row][q] for
// the sample's outputs q (ldt >= K). Each dx element gets its terms in
// col2im's order (tap by tap), so the same sums.
void col2im_t(const ConvGeom &g, const float *PIPERT_RESTRICT colT, int64_t ldt,
              float *PIPERT_RESTRICT dx) {
  // Small planes: the taps' table (im2col's), taps and outputs in the same
  // order as below, so the same sums.
  int32_t src[kTapTable];
  if (tap_table(g, src)) {
    const int64_t P = g.oh * g.ow, T = g.kh * g.kw;
    for (int64_t c = 0; c < g.cg; ++c) {
      float *xc = dx + c * g.h * g.w;
      for (int64_t t = 0; t < T; ++t) {
        const float *r = colT + c * T + t;
        const int32_t *s = src + t * P;
        for (int64_t q = 0; q < P; ++q)
          if (s[q] >= 0)
            xc[s[q]] += r[q * ldt];
      }
    }
    return;
  }
  for (int64_t c = 0; c < g.cg; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const float *src = colT + (c * g.kh + i) * g.kw + j;
        float *xc = dx + c * g.h * g.w;
        const int64_t x0 = j * g.dw - g.pl;
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          const int64_t iy = oy * g.sh - g.pt + i * g.dh;
          if (iy < 0 || iy >= g.h)
            continue;
          const float *r = src + oy * g.ow * ldt;
          float *xr = xc + iy * g.w;
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            const int64_t ix = ox * g.sw + x0;
            if (ix >= 0 && ix < g.w)
              xr[ix] += r[ox * ldt];
          }
        }
      }
}

// The taps t in [t0, t1) of a window of k taps, dilation d, starting at
// o * s - pad, that fall inside [0, n).
inline void tap_range(int64_t o, int64_t s, int64_t pad, int64_t d, int64_t k, int64_t n,
                      int64_t &t0, int64_t &t1) {
  const int64_t base = o * s - pad;
  t0 = 0;
  t1 = k;
  if (base >= 0 && base + (k - 1) * d < n)
    return; // inside: every tap
  while (t0 < k && base + t0 * d < 0)
    ++t0;
  while (t1 > t0 && base + (t1 - 1) * d >= n)
    --t1;
}

// The first in-bounds tap of window (oy, ox) with the largest value (the
// first where a NaN is), rows i0..i1 of it: its value in best and its
// index in the plane in arg, which stays -1 (best untouched) for a window
// with no tap inside. The comparisons are selects, not branches: a branch
// on random data mispredicts half the time.
inline void window_max(const PoolGeom &g, const float *xp, int64_t oy, int64_t ox, int64_t i0,
                       int64_t i1, float &best, int64_t &arg, bool inside = false) {
  // Windows all inside the plane (windows_inside) need no tap range: a 2
  // x 2 pool over a small image spent most of its time finding them.
  int64_t j0 = 0, j1 = g.kw;
  if (!inside)
    tap_range(ox, g.sw, g.pl, g.dw, g.kw, g.w, j0, j1);
  if (i0 >= i1 || j0 >= j1)
    return;
  const int64_t y0 = oy * g.sh - g.pt, x0 = ox * g.sw - g.pl;
  int64_t a = (y0 + i0 * g.dh) * g.w + x0 + j0 * g.dw;
  float b = xp[a];
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t row = (y0 + i * g.dh) * g.w + x0;
    for (int64_t j = i == i0 ? j0 + 1 : j0; j < j1; ++j) {
      const int64_t idx = row + j * g.dw;
      const float v = xp[idx];
      const bool gt = v > b;
      b = gt ? v : b;
      a = gt ? idx : a;
    }
  }
  best = b;
  arg = a;
}

// Calls fn(iy, ix) for the in-bounds taps of window (oy, ox), row by row;
// returns nothing.
template <typename Fn> inline void window(const PoolGeom &g, int64_t oy, int64_t ox, Fn &&fn) {
  int64_t i0, i1, j0, j1;
  tap_range(oy, g.sh, g.pt, g.dh, g.kh, g.h, i0, i1);
  tap_range(ox, g.sw, g.pl, g.dw, g.kw, g.w, j0, j1);
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t iy = oy * g.sh - g.pt + i * g.dh;
    for (int64_t j = j0; j < j1; ++j)
      fn(iy, ox * g.sw - g.pl + j * g.dw);
  }
}

// Every window inside the plane (no padding reaches a tap, no partial
// window of ceil mode): window_max needs no tap ranges.
inline bool windows_inside(const PoolGeom &g) {
  return g.pt == 0 && g.pl == 0 && g.oh > 0 && g.ow > 0 &&
         (g.oh - 1) * g.sh + (g.kh - 1) * g.dh < g.h &&
         (g.ow - 1) * g.sw + (g.kw - 1) * g.dw < g.w;
}

// max(v, b) = v > b ? v : b, window_max's select (maxss returns its second
// operand when either is NaN, as the select keeps b).
inline float select_max(float v, float b) {
#if defined(__SSE__)
  return _mm_cvtss_f32(_mm_max_ss(_mm_set_ss(v), _mm_set_ss(b)));
#else
  return v > b ? v : b;
#endif
}

// The interior of a pooled row: the outputs [lo, hi) whose every
// horizontal tap falls inside the row (no padding reached).
inline void pool_interior(const PoolGeom &g, int64_t &lo, int64_t &hi) {
  lo = (g.pl + g.sw - 1) / g.sw;
  const int64_t last = g.w - 1 - (g.kw - 1) * g.dw + g.pl; // ox * sw <= last
  hi = last < 0 ? 0 : std::min(g.ow, last / g.sw + 1);
  if (hi < lo)
    hi = lo;
}

// Planes a thread takes at least: ~4K windows.
inline int64_t pool_plane_chunk(const PoolGeom &g) {
  return std::max<int64_t>(1, 4096 / (g.oh * g.ow));
}
// Whether window_max16 may run: plane indices in 32 bits.
inline bool pool_vectors(const PoolGeom &g) {
#if defined(__AVX512F__)
  return g.h * g.w < (int64_t(1) << 31);
#else
  (void)g;
  return false;
#endif
}
#if defined(__AVX512F__)
// p[0], p[s], ..., p[(n - 1) s] in the first n lanes (1 <= n <= 16), zeros
// in the rest, reading nothing past p[(n - 1) s]: a masked load at stride
// 1, even lanes of two masked loads at stride 2, a gather otherwise.
inline __m512 load_stride(const float *p, int64_t s, int n) {
  const __mmask16 m = __mmask16((1u << n) - 1);
  if (s == 1)
    return _mm512_maskz_loadu_ps(m, p);
  if (s == 2) {
    const int raw = 2 * n - 1; // floats spanned
    const __mmask16 lo = raw >= 16 ? __mmask16(0xffff) : __mmask16((1u << raw) - 1);
    const __mmask16 hi = raw > 16 ? __mmask16((1u << (raw - 16)) - 1) : __mmask16(0);
    return _mm512_permutex2var_ps(
        _mm512_maskz_loadu_ps(lo, p),
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30),
        _mm512_maskz_loadu_ps(hi, p + 16));
  }
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m,
                                  _mm512_mullo_epi32(lanes, _mm512_set1_epi32(int(s))), p, 4);
}

// n windows of a pooled row side by side (n <= 16), outputs ox .. ox + n -
// 1 of the interior, rows i0 .. i1 of their taps: window_max's chain of
// selects lane by lane, taps in its order (row by row), so the same maxima
// and, with `want_arg`, the same first maximum: its index in the plane in
// `arg`. (vmaxps returns its second operand when either is NaN or both
// are zeros, as the select keeps b; v > b ordered is the select's test.)
// Lanes from n on hold nothing of use.
template <bool want_arg>
inline __m512 window_max16(const PoolGeom &g, const float *xp, int64_t oy, int64_t ox, int n,
                           int64_t i0, int64_t i1, __m512i &arg) {
  const int64_t y0 = oy * g.sh - g.pt, x0 = ox * g.sw - g.pl;
  const __m512i lane_off = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32(int(g.sw)));
  int64_t first = (y0 + i0 * g.dh) * g.w + x0;
  __m512 b = load_stride(xp + first, g.sw, n);
  if (want_arg)
    arg = _mm512_add_epi32(lane_off, _mm512_set1_epi32(int(first)));
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t row = (y0 + i * g.dh) * g.w + x0;
    for (int64_t j = i == i0 ? 1 : 0; j < g.kw; ++j) {
      const int64_t idx = row + j * g.dw;
      const __m512 v = load_stride(xp + idx, g.sw, n);
      if (want_arg) {
        const __mmask16 gt = _mm512_cmp_ps_mask(v, b, _CMP_GT_OQ);
        b = _mm512_mask_mov_ps(b, gt, v);
        arg = _mm512_mask_mov_epi32(
            arg, gt, _mm512_add_epi32(lane_off, _mm512_set1_epi32(int(idx))));
      } else {
        b = _mm512_max_ps(v, b);
      }
    }
  }
  return b;
}
#endif

// Depthwise convolution (one input and one output channel per group:
// MobileNet's and EfficientNet's 3 x 3 and 5 x 5, ConvNeXt's 7 x 7) runs
// directly on the planes: im2col wrote K rows of the plane for a GEMM of
// one output row, the GEMM read them back, and col2im scattered them again
// (im2col and the input gradient were a third of a MobileNetV3-small
// step). Per tap (i, j) in order, each output row adds w * the input row
// shifted, over the output columns whose tap lands inside the input (so
// taps in the padding add nothing, where the GEMM added w * 0).
bool depthwise(const ConvGeom &g) { return g.cg == 1 && g.mg == 1 && !g.pointwise(); }

// The outputs o in [o0, o1) of a length-n axis whose tap t reads inside:
// o * s - pad + t * d in [0, n).
inline void tap_outputs(int64_t t, int64_t s, int64_t pad, int64_t d, int64_t n, int64_t out,
                        int64_t &o0, int64_t &o1) {
  const int64_t off = t * d - pad; // input index = o * s + off
  o0 = off >= 0 ? 0 : (-off + s - 1) / s;
  o1 = n - 1 - off < 0 ? 0 : (n - 1 - off) / s + 1;
  o0 = std::min(o0, out);
  o1 = std::clamp(o1, o0, out);
}

// Calls fn(i, j, oy0, oy1, ox0, ox1) for every tap (i, j) in order: the
// output rows [oy0, oy1) and columns [ox0, ox1) whose tap reads inside the
// input.
template <typename Fn> void for_each_tap(const ConvGeom &g, Fn &&fn) {
  for (int64_t i = 0; i < g.kh; ++i) {
    int64_t oy0, oy1;
    tap_outputs(i, g.sh, g.pt, g.dh, g.h, g.oh, oy0, oy1);
    for (int64_t j = 0; j < g.kw; ++j) {
      int64_t ox0, ox1;
      tap_outputs(j, g.sw, g.pl, g.dw, g.w, g.ow, ox0, ox1);
      fn(i, j, oy0, oy1, ox0, ox1);
    }
  }
}

// The input element of output (oy, 0) under tap (i, j): its index in the
// plane (output column ox reads index + ox * sw).
inline int64_t tap_input(const ConvGeom &g, int64_t i, int64_t j, int64_t oy) {
  return (oy * g.sh - g.pt + i * g.dh) * g.w + j * g.dw - g.pl;
}

// Calls fn(t, xo, oy, ox0, ox1) for every tap t = i * kw + j in order and
// every output row oy that tap reads inside the input: ox0..ox1 are the
// row's output columns whose tap lands inside, and xo + ox * sw their input
// element's index in the plane.
template <typename Fn> void for_each_tap_row(const ConvGeom &g, Fn &&fn) {
  for_each_tap(g, [&](int64_t i, int64_t j, int64_t oy0, int64_t oy1, int64_t ox0, int64_t ox1) {
    for (int64_t oy = oy0; oy < oy1; ++oy)
      fn(i * g.kw + j, tap_input(g, i, j, oy), oy, ox0, ox1);
  });
}

#if defined(__AVX512F__)
// Planes of at most 64 columns (ConvNeXt's 7 x 7 over 56 to 2 columns,
// MobileNet's and EfficientNet's 3 x 3 and 5 x 5), stride 1: each output
// row in V registers over every tap, its inputs read with masked loads,
// stored once:
//   out[r][c] = sum over (i, j) of w[i * kw + j] * in[r + ro + i * di][c + co + j * dj]
// (zero outside in). The forward is (ro, co, di, dj) = (-pt, -pl, d, d);
// the input gradient, its adjoint, (pt, pl, -d, -d) over dy. Per tap and
// row the loop over columns had run mostly in its scalar remainder, and a
// masked store per tap stalls the next tap's load of the same row.
template <int V>
void plane_rows(const float *PIPERT_RESTRICT in, int64_t inH, int64_t inW,
                const float *PIPERT_RESTRICT w, int64_t kh, int64_t kw, int64_t ro, int64_t co,
                int64_t di, int64_t dj, float *PIPERT_RESTRICT out, int64_t outH,
                int64_t outW) {
  // Lanes [a, b) of a 16-lane chunk.
  auto lanes = [](int64_t a, int64_t b) {
    return __mmask16(((1u << b) - 1u) & ~((1u << a) - 1u));
  };
  for (int64_t r = 0; r < outH; ++r) {
    __m512 acc[V];
    for (int v = 0; v < V; ++v)
      acc[v] = _mm512_setzero_ps();
    for (int64_t i = 0; i < kh; ++i) {
      const int64_t ir = r + ro + i * di;
      if (ir < 0 || ir >= inH)
        continue;
      const float *row = in + ir * inW;
      for (int64_t j = 0; j < kw; ++j) {
        const int64_t off = co + j * dj; // column c reads row[c + off]
        const int64_t c0 = std::max<int64_t>(0, -off), c1 = std::min(outW, inW - off);
        if (c0 >= c1)
          continue;
        const __m512 wv = _mm512_set1_ps(w[i * kw + j]);
        for (int v = 0; v < V; ++v) {
          const int64_t lo = 16 * v, a = std::max(c0, lo) - lo, b = std::min(c1, lo + 16) - lo;
          if (a >= b)
            continue;
          // Lanes outside [a, b) are masked off: never read there.
          const float *src = reinterpret_cast<const float *>(
              reinterpret_cast<uintptr_t>(row) + uintptr_t((off + lo) * int64_t(sizeof(float))));
          acc[v] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(lanes(a, b), src), acc[v]);
        }
      }
    }
    for (int v = 0; v < V; ++v) {
      const int64_t lo = 16 * v;
      if (lo < outW)
        _mm512_mask_storeu_ps(out + r * outW + lo, lanes(0, std::min<int64_t>(16, outW - lo)),
                              acc[v]);
    }
  }
}

// plane_rows for rows of up to 64 columns; false for wider ones.
bool plane_rows_any(const float *in, int64_t inH, int64_t inW, const float *w, int64_t kh,
                    int64_t kw, int64_t ro, int64_t co, int64_t di, int64_t dj, float *out,
                    int64_t outH, int64_t outW) {
  if (outW <= 16)
    plane_rows<1>(in, inH, inW, w, kh, kw, ro, co, di, dj, out, outH, outW);
  else if (outW <= 32)
    plane_rows<2>(in, inH, inW, w, kh, kw, ro, co, di, dj, out, outH, outW);
  else if (outW <= 64)
    plane_rows<4>(in, inH, inW, w, kh, kw, ro, co, di, dj, out, outH, outW);
  else
    return false;
  return true;
}
#endif

// y (oh x ow) = sum over the taps of w[i][j] * x shifted; y zeroed here.
void depthwise_plane(const ConvGeom &g, const float *PIPERT_RESTRICT x,
                     const float *PIPERT_RESTRICT w, float *PIPERT_RESTRICT y) {
#if defined(__AVX512F__)
  if (g.sw == 1 && g.sh == 1 &&
      plane_rows_any(x, g.h, g.w, w, g.kh, g.kw, -g.pt, -g.pl, g.dh, g.dw, y, g.oh, g.ow))
    return;
#endif
  std::fill(y, y + g.oh * g.ow, 0.f);
  for_each_tap_row(g, [&](int64_t t, int64_t xo, int64_t oy, int64_t ox0, int64_t ox1) {
    const float wv = w[t];
    const float *PIPERT_RESTRICT xr = x + xo;
    float *PIPERT_RESTRICT yr = y + oy * g.ow;
    if (g.sw == 1)
      for (int64_t ox = ox0; ox < ox1; ++ox)
        yr[ox] += wv * xr[ox];
    else
      for (int64_t ox = ox0; ox < ox1; ++ox)
        yr[ox] += wv * xr[ox * g.sw];
  });
}

// The input gradient of one plane: dx (h x w) = the adjoint of
// depthwise_plane applied to dy; dx zeroed here.
void depthwise_plane_grad_input(const ConvGeom &g, const float *PIPERT_RESTRICT dy,
                                const float *PIPERT_RESTRICT w, float *PIPERT_RESTRICT dx) {
#if defined(__AVX512F__)
  if (g.sw == 1 && g.sh == 1 &&
      plane_rows_any(dy, g.oh, g.ow, w, g.kh, g.kw, g.pt, g.pl, -g.dh, -g.dw, dx, g.h, g.w))
    return;
#endif
  std::fill(dx, dx + g.h * g.w, 0.f);
  for_each_tap_row(g, [&](int64_t t, int64_t xo, int64_t oy, int64_t ox0, int64_t ox1) {
    const float wv = w[t];
    float *PIPERT_RESTRICT xr = dx + xo;
    const float *PIPERT_RESTRICT gr = dy + oy * g.ow;
    if (g.sw == 1)
      for (int64_t ox = ox0; ox < ox1; ++ox)
        xr[ox] += wv * gr[ox];
    else
      for (int64_t ox = ox0; ox < ox1; ++ox)
        xr[ox * g.sw] += wv * gr[ox];
  });
}

// The weight gradient of one plane, added to acc (kh x kw, double): per
// tap the dot product of dy with x shifted, in 8 double lanes (the loop
// vectorises), folded. In double over a channel's planes, rounded once by
// the caller: a depthwise weight's gradient sums many terms that mostly
// cancel (a BatchNormalization follows), and float sums moved MobileNetV2's
// saved weights past the float32 slack of the PyTorch check.
void depthwise_plane_grad_weight(const ConvGeom &g, const float *PIPERT_RESTRICT x,
                                 const float *PIPERT_RESTRICT dy, double *PIPERT_RESTRICT acc) {
#if defined(__AVX512F__) && defined(__AVX512VL__)
  // Stride 1: the rows' segments in 8 double lanes with a masked tail (a
  // short row had gone wholly through the scalar tail). The products of
  // two floats are exact in double, so only the order of the sum changes.
  if (g.sw == 1 && g.ow >= 8) {
    for_each_tap(g, [&](int64_t i, int64_t j, int64_t oy0, int64_t oy1, int64_t ox0,
                        int64_t ox1) {
      __m512d lanes = _mm512_setzero_pd();
      const int64_t n = ox1 - ox0;
      for (int64_t oy = oy0; oy < oy1; ++oy) {
        const float *PIPERT_RESTRICT xr = x + tap_input(g, i, j, oy) + ox0;
        const float *PIPERT_RESTRICT gr = dy + oy * g.ow + ox0;
        int64_t o = 0;
        for (; o + 8 <= n; o += 8)
          lanes = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm256_loadu_ps(gr + o)),
                                  _mm512_cvtps_pd(_mm256_loadu_ps(xr + o)), lanes);
        if (o < n) {
          const __mmask8 m = __mmask8((1u << (n - o)) - 1u);
          lanes = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, gr + o)),
                                  _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, xr + o)), lanes);
        }
      }
      acc[i * g.kw + j] += _mm512_reduce_add_pd(lanes);
    });
    return;
  }
#endif
  constexpr int kL = 8;
  for_each_tap(g, [&](int64_t i, int64_t j, int64_t oy0, int64_t oy1, int64_t ox0, int64_t ox1) {
    double lanes[kL] = {};
    double tail = 0.0;
    for (int64_t oy = oy0; oy < oy1; ++oy) {
      const float *PIPERT_RESTRICT xr = x + tap_input(g, i, j, oy);
      const float *PIPERT_RESTRICT gr = dy + oy * g.ow;
      int64_t ox = ox0;
      if (g.sw == 1)
        for (; ox + kL <= ox1; ox += kL)
          for (int l = 0; l < kL; ++l)
            lanes[l] += double(gr[ox + l]) * double(xr[ox + l]);
      for (; ox < ox1; ++ox)
        tail += double(gr[ox]) * double(xr[ox * g.sw]);
    }
    double s = 0.0;
    for (int l = 0; l < kL; ++l)
      s += lanes[l];
    acc[i * g.kw + j] += s + tail;
  });
}


// Samples side by side in one GEMM where a plane has fewer than 256
// outputs (conv_samples in shape_util.h): ResNet-18 at 64 x 64, batch 8,
// one thread: its step 160 -> 104 ms (the last stage's convolutions 6.2 ->
// 1.9 ms forward, 15.9 -> 6.6 backward). 256 columns measured best against
// 128, 512, 1024 and 4096.
int64_t conv_samples(const ConvGeom &g) { return conv_samples(g, 256, int64_t(8) << 20); }

// im2col of group gi of samples [n0, n0 + cnt), side by side in col (row
// stride cnt * oh * ow).
void im2col_samples(const ConvGeom &g, const float *x, int64_t n0, int64_t cnt, int64_t gi,
                    float *col) {
  const int64_t P = g.col_cols();
  for (int64_t j = 0; j < cnt; ++j)
    im2col(g, x + ((n0 + j) * g.c + gi * g.cg) * g.h * g.w, col + j * P, cnt * P);
}

// rows x P blocks of `cnt` samples between a tensor's (n, rows, P) layout
// (sample stride `stride`) and a (rows, cnt * P) matrix.
void gather_samples(const float *PIPERT_RESTRICT src, int64_t stride, int64_t cnt, int64_t rows,
                    int64_t P, float *PIPERT_RESTRICT dst) {
  const int64_t ld = cnt * P;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cnt; ++j)
      std::memcpy(dst + r * ld + j * P, src + j * stride + r * P, size_t(P) * sizeof(float));
}

void scatter_samples(const float *PIPERT_RESTRICT src, int64_t cnt, int64_t rows, int64_t P,
                     int64_t stride, float *PIPERT_RESTRICT dst) {
  const int64_t ld = cnt * P;
  for (int64_t j = 0; j < cnt; ++j)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + j * stride + r * P, src + r * ld + j * P, size_t(P) * sizeof(float));
}

} // namespace

extern "C" {

void pipert_conv2d_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                       const float *w, const int64_t w_shape[4], const float *b,
                       const int64_t pads[4], const int64_t strides[2],
                       const int64_t dilations[2], int64_t group, float *y) {
  ConvGeom g = conv_geom("Conv", x_shape, w_shape, pads, strides, dilations, group);
  const int64_t K = g.col_rows(), P = g.col_cols();
  if (use_onednn_conv(g) && onednn_conv_forward(ctx, g, x, w, b, y))
    return;
  if (depthwise(g)) {
    parallel_for(ctx, g.n * g.c, 8, [&](int64_t b0, int64_t b1) {
      for (int64_t p = b0; p < b1; ++p)
        depthwise_plane(g, x + p * g.h * g.w, w + (p % g.c) * K, y + p * P);
    });
  } else if (const int64_t nb = conv_samples(g); nb > 1) {
    // Y_g (mg x cnt*P) = W_g (mg x K) * col (K x cnt*P), then each
    // sample's rows to its place.
    float *col = scratch(size_t(K * nb * P));
    float *out = scratch(size_t(g.mg * nb * P), 1);
    for (int64_t n0 = 0; n0 < g.n; n0 += nb) {
      const int64_t cnt = std::min(nb, g.n - n0), cols = cnt * P;
      for (int64_t gi = 0; gi < g.group; ++gi) {
        im2col_samples(g, x, n0, cnt, gi, col);
        pipert_sgemm(ctx, 0, 0, g.mg, cols, K, 1.f, w + gi * g.mg * K, K, col, cols, 0.f, out,
                     cols);
        scatter_samples(out, cnt, g.mg, P, g.m * P, y + (n0 * g.m + gi * g.mg) * P);
      }
    }
  } else {
  float *col = g.pointwise() ? nullptr : scratch(size_t(K * P));
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t gi = 0; gi < g.group; ++gi) {
      const float *xg = x + (n * g.c + gi * g.cg) * g.h * g.w;
      float *yg = y + (n * g.m + gi * g.mg) * P;
      const float *src = xg;
      if (!g.pointwise()) {
        im2col(g, xg, col, P);
        src = col;
      }
      // Y_g (mg x P) = W_g (mg x K) * col (K x P)
      pipert_sgemm(ctx, 0, 0, g.mg, P, K, 1.f, w + gi * g.mg * K, K, src, P, 0.f, yg, P);
    }
  }
  if (b)
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t m = 0; m < g.m; ++m) {
        float *yp = y + (n * g.m + m) * P;
        const float bv = b[m];
        for (int64_t i = 0; i < P; ++i)
          yp[i] += bv;
      }
}

void pipert_conv2d_grad_input_f32(pipert_context *ctx, const float *dy, const float *w,
                                  const int64_t w_shape[4], const int64_t x_shape[4],
                                  const int64_t pads[4], const int64_t strides[2],
                                  const int64_t dilations[2], int64_t group, float *dx) {
  ConvGeom g = conv_geom("ConvGradInput", x_shape, w_shape, pads, strides, dilations, group);
  const int64_t K = g.col_rows(), P = g.col_cols();
  if (use_onednn_conv(g) && onednn_conv_backward_data(ctx, g, dy, w, dx))
    return;
  if (depthwise(g)) {
    parallel_for(ctx, g.n * g.c, 8, [&](int64_t b0, int64_t b1) {
      for (int64_t p = b0; p < b1; ++p)
        depthwise_plane_grad_input(g, dy + p * P, w + (p % g.c) * K, dx + p * g.h * g.w);
    });
    return;
  }
  if (const int64_t nb = conv_samples(g); nb > 1) {
    // col (K x cnt*P) = W_g^T (K x mg) * dY_g (mg x cnt*P), each sample's
    // columns scattered into its dx. Where col has fewer columns than rows
    // (ResNet's deep stages: 4608 x 64), its transpose instead, colT
    // (cnt*P x K) = dY_g^T W_g: oneDNN ran the first at 60 GFLOP/s, the
    // second at 107 (4608x64x512).
    float *col = scratch(size_t(K * nb * P));
    float *dyb = scratch(size_t(g.mg * nb * P), 1);
    for (int64_t n0 = 0; n0 < g.n; n0 += nb) {
      const int64_t cnt = std::min(nb, g.n - n0), cols = cnt * P;
      const bool transposed = cols < K;
      for (int64_t gi = 0; gi < g.group; ++gi) {
        gather_samples(dy + (n0 * g.m + gi * g.mg) * P, g.m * P, cnt, g.mg, P, dyb);
        if (transposed)
          pipert_sgemm(ctx, 1, 0, cols, K, g.mg, 1.f, dyb, cols, w + gi * g.mg * K, K, 0.f, col,
                       K);
        else
          pipert_sgemm(ctx, 1, 0, K, cols, g.mg, 1.f, w + gi * g.mg * K, K, dyb, cols, 0.f, col,
                       cols);
        for (int64_t j = 0; j < cnt; ++j) {
          float *dxg = dx + ((n0 + j) * g.c + gi * g.cg) * g.h * g.w;
          std::fill(dxg, dxg + g.cg * g.h * g.w, 0.f);
          if (transposed)
            col2im_t(g, col + j * P * K, K, dxg);
          else
            col2im(g, col + j * P, dxg, cols);
        }
      }
    }
    return;
  }
  float *col = scratch(size_t(K * P));
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t gi = 0; gi < g.group; ++gi) {
      const float *dyg = dy + (n * g.m + gi * g.mg) * P;
      float *dxg = dx + (n * g.c + gi * g.cg) * g.h * g.w;
      if (g.pointwise()) {
        // dX_g (K x P) = W_g^T (K x mg) * dY_g (mg x P), written directly.
        pipert_sgemm(ctx, 1, 0, K, P, g.mg, 1.f, w + gi * g.mg * K, K, dyg, P, 0.f, dxg, P);
        continue;
      }
      pipert_sgemm(ctx, 1, 0, K, P, g.mg, 1.f, w + gi * g.mg * K, K, dyg, P, 0.f, col, P);
      std::fill(dxg, dxg + g.cg * g.h * g.w, 0.f);
      col2im(g, col, dxg, P);
    }
}

void pipert_conv2d_grad_weight_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                                   const float *dy, const int64_t w_shape[4],
                                   const int64_t pads[4], const int64_t strides[2],
                                   const int64_t dilations[2], int64_t group, float *dw,
                                   int accumulate) {
  ConvGeom g = conv_geom("ConvGradWeight", x_shape, w_shape, pads, strides, dilations, group);
  const int64_t K = g.col_rows(), P = g.col_cols();
  float *col = g.pointwise() ? nullptr : scratch(size_t(K * P));
  // An accumulated gradient is summed apart, then added: the bits of the
  // gradient and an Add after it.
  float *acc = nullptr;
  if (accumulate) {
    acc = dw;
    dw = scratch(size_t(g.m * K), 1);
  }
  if (g.n == 0)
    std::fill(dw, dw + g.m * K, 0.f);
  if (use_onednn_conv(g) && onednn_conv_backward_weights(ctx, g, x, dy, dw)) {
    accumulate_into(acc, dw, g.m * K);
    return;
  }
  if (depthwise(g)) {
    // Threads over the channels; each adds its planes in the order of n.
    parallel_for(ctx, g.c, 4, [&](int64_t c0, int64_t c1) {
      std::vector<double> sums(static_cast<size_t>(K));
      for (int64_t c = c0; c < c1; ++c) {
        std::fill(sums.begin(), sums.end(), 0.0);
        for (int64_t n = 0; n < g.n; ++n)
          depthwise_plane_grad_weight(g, x + (n * g.c + c) * g.h * g.w, dy + (n * g.c + c) * P,
                                      sums.data());
        for (int64_t k = 0; k < K; ++k)
          dw[c * K + k] = float(sums[size_t(k)]);
      }
    });
    accumulate_into(acc, dw, g.m * K);
    return;
  }
  if (const int64_t nb = conv_samples(g); nb > 1) {
    // dW_g (mg x K) += dY_g (mg x cnt*P) * col^T (cnt*P x K): one product
    // over the samples of a chunk.
    float *colb = scratch(size_t(K * nb * P));
    float *dyb = scratch(size_t(g.mg * nb * P), 2);
    for (int64_t n0 = 0; n0 < g.n; n0 += nb) {
      const int64_t cnt = std::min(nb, g.n - n0), cols = cnt * P;
      for (int64_t gi = 0; gi < g.group; ++gi) {
        im2col_samples(g, x, n0, cnt, gi, colb);
        gather_samples(dy + (n0 * g.m + gi * g.mg) * P, g.m * P, cnt, g.mg, P, dyb);
        pipert_sgemm(ctx, 0, 1, g.mg, K, cols, 1.f, dyb, cols, colb, cols, n0 == 0 ? 0.f : 1.f,
                     dw + gi * g.mg * K, K);
      }
    }
    accumulate_into(acc, dw, g.m * K);
    return;
  }
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t gi = 0; gi < g.group; ++gi) {
      const float *xg = x + (n * g.c + gi * g.cg) * g.h * g.w;
      const float *dyg = dy + (n * g.m + gi * g.mg) * P;
      const float *src = xg;
      if (!g.pointwise()) {
        im2col(g, xg, col, P);
        src = col;
      }
      // dW_g (mg x K) += dY_g (mg x P) * col^T (P x K)
      pipert_sgemm(ctx, 0, 1, g.mg, K, P, 1.f, dyg, P, src, P, n == 0 ? 0.f : 1.f,
                   dw + gi * g.mg * K, K);
    }
  accumulate_into(acc, dw, g.m * K);
}

void pipert_conv2d_grad_bias_f32(pipert_context *, const float *dy, const int64_t dy_shape[4],
                                 float *db, int accumulate) {
  const int64_t N = dy_shape[0], M = dy_shape[1], P = dy_shape[2] * dy_shape[3];
  for (int64_t m = 0; m < M; ++m) {
    double s = 0;
    for (int64_t n = 0; n < N; ++n) {
      const float *p = dy + (n * M + m) * P;
      float part = 0.f;
      for (int64_t i = 0; i < P; ++i)
        part += p[i];
      s += part;
    }
    db[m] = accumulate ? db[m] + float(s) : float(s);
  }
}

int64_t pipert_pool_output_dim(int64_t in, int64_t kernel, int64_t pad_begin, int64_t pad_end,
                               int64_t stride, int64_t dilation, int ceil_mode) {
  const int64_t span = in + pad_begin + pad_end - (dilation * (kernel - 1) + 1);
  if (span < 0)
    return 0;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad_begin)
    --out;
  return out;
}

// Max pooling, plane by plane in parallel (each plane's outputs and
// gradient are its own, so the bits do not depend on the thread count).
// With AVX-512 the windows of a row's interior (pool_interior) run 16 at a
// time (window_max16), the rows' edges and the plane's rows without a tap
// one window at a time (window_max). ResNet's 3 x 3 stride-2 pool over 16
// x 64 planes of 32 x 32 took 4.8 ms forward and 5.5 backward one window
// at a time.
void pipert_maxpool2d_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                          const int64_t kernel[2], const int64_t pads[4],
                          const int64_t strides[2], const int64_t dilations[2], int ceil_mode,
                          float *y, int64_t *indices) {
  PoolGeom g = pool_geom("MaxPool", x_shape, kernel, pads, strides, dilations, ceil_mode);
  const bool inside = windows_inside(g);
  if (inside && g.kh == 2 && g.kw == 2 && !indices) {
    // The common 2 x 2 pool without indices (training keeps none): the max
    // alone, window_max's chain of selects as maxss, no argument to track
    // (the CNN's step 330 -> 303 us; the same values).
    parallel_for(ctx, g.n * g.c, pool_plane_chunk(g), [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        const float *xp = x + p * g.h * g.w;
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          const float *r0 = xp + oy * g.sh * g.w, *r1 = r0 + g.dh * g.w;
          float *yo = y + (p * g.oh + oy) * g.ow;
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            const int64_t t = ox * g.sw;
            yo[ox] = select_max(r1[t + g.dw],
                                select_max(r1[t], select_max(r0[t + g.dw], r0[t])));
          }
        }
      }
    });
    return;
  }
  // Indices (inference exports) stay one window at a time.
  [[maybe_unused]] const bool vec = !indices && pool_vectors(g);
  [[maybe_unused]] int64_t lo = 0, hi = 0;
  pool_interior(g, lo, hi);
  parallel_for(ctx, g.n * g.c, pool_plane_chunk(g), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float *xp = x + p * g.h * g.w;
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        int64_t i0 = 0, i1 = g.kh;
        if (!inside)
          tap_range(oy, g.sh, g.pt, g.dh, g.kh, g.h, i0, i1);
        const int64_t o = (p * g.oh + oy) * g.ow;
        auto one = [&](int64_t ox) {
          int64_t arg = -1;
          float best = -std::numeric_limits<float>::infinity();
          window_max(g, xp, oy, ox, i0, i1, best, arg, inside);
          y[o + ox] = best;
          if (indices)
            indices[o + ox] = arg < 0 ? -1 : p * g.h * g.w + arg;
        };
        int64_t ox = 0;
#if defined(__AVX512F__)
        if (vec && i0 < i1) {
          for (; ox < lo; ++ox)
            one(ox);
          __m512i unused;
          for (int n; ox < hi; ox += n) {
            n = int(std::min<int64_t>(16, hi - ox));
            _mm512_mask_storeu_ps(y + o + ox, __mmask16((1u << n) - 1),
                                  window_max16<false>(g, xp, oy, ox, n, i0, i1, unused));
          }
        }
#endif
        for (; ox < g.ow; ++ox)
          one(ox);
      }
    }
  });
}

void pipert_maxpool2d_grad_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                               const float *dy, const int64_t kernel[2], const int64_t pads[4],
                               const int64_t strides[2], const int64_t dilations[2],
                               int ceil_mode, float *dx) {
  PoolGeom g = pool_geom("MaxPoolGrad", x_shape, kernel, pads, strides, dilations, ceil_mode);
  const bool inside = windows_inside(g);
  [[maybe_unused]] const bool vec = pool_vectors(g);
  [[maybe_unused]] int64_t lo = 0, hi = 0;
  pool_interior(g, lo, hi);
  parallel_for(ctx, g.n * g.c, pool_plane_chunk(g), [&](int64_t p0, int64_t p1) {
    std::fill(dx + p0 * g.h * g.w, dx + p1 * g.h * g.w, 0.f);
    for (int64_t p = p0; p < p1; ++p) {
      const float *xp = x + p * g.h * g.w;
      float *dp = dx + p * g.h * g.w;
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        int64_t i0 = 0, i1 = g.kh;
        if (!inside)
          tap_range(oy, g.sh, g.pt, g.dh, g.kh, g.h, i0, i1);
        const float *dyr = dy + (p * g.oh + oy) * g.ow;
        auto one = [&](int64_t ox) {
          int64_t arg = -1;
          float best = 0.f;
          window_max(g, xp, oy, ox, i0, i1, best, arg, inside);
          if (arg >= 0)
            dp[arg] += dyr[ox];
        };
        // Windows in order of ox, as one at a time: each dx element gets its
        // terms in the same order (overlapping windows share taps).
        int64_t ox = 0;
#if defined(__AVX512F__)
        if (vec && i0 < i1) {
          for (; ox < lo; ++ox)
            one(ox);
          alignas(64) int32_t a[16];
          for (int n; ox < hi; ox += n) {
            n = int(std::min<int64_t>(16, hi - ox));
            __m512i arg;
            window_max16<true>(g, xp, oy, ox, n, i0, i1, arg);
            _mm512_store_si512(a, arg);
            for (int l = 0; l < n; ++l)
              dp[a[l]] += dyr[ox + l];
          }
        }
#endif
        for (; ox < g.ow; ++ox)
          one(ox);
      }
    }
  });
}

void pipert_avgpool2d_f32(pipert_context *, const float *x, const int64_t x_shape[4],
                          const int64_t kernel[2], const int64_t pads[4],
                          const int64_t strides[2], int ceil_mode, int count_include_pad,
                          float *y) {
  PoolGeom g = pool_geom("AveragePool", x_shape, kernel, pads, strides, nullptr, ceil_mode);
  for (int64_t p = 0; p < g.n * g.c; ++p) {
    const float *xp = x + p * g.h * g.w;
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        float s = 0.f;
        window(g, oy, ox, [&](int64_t iy, int64_t ix) { s += xp[iy * g.w + ix]; });
        int64_t d = formula::avg_pool_divisor(g, oy, ox, count_include_pad);
        y[(p * g.oh + oy) * g.ow + ox] = d > 0 ? s / float(d) : 0.f;
      }
  }
}

void pipert_avgpool2d_grad_f32(pipert_context *, const float *dy, const int64_t x_shape[4],
                               const int64_t kernel[2], const int64_t pads[4],
                               const int64_t strides[2], int ceil_mode, int count_include_pad,
                               float *dx) {
  PoolGeom g = pool_geom("AveragePoolGrad", x_shape, kernel, pads, strides, nullptr, ceil_mode);
  std::fill(dx, dx + g.n * g.c * g.h * g.w, 0.f);
  for (int64_t p = 0; p < g.n * g.c; ++p) {
    float *dp = dx + p * g.h * g.w;
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        int64_t d = formula::avg_pool_divisor(g, oy, ox, count_include_pad);
        if (d <= 0)
          continue;
        const float v = dy[(p * g.oh + oy) * g.ow + ox] / float(d);
        window(g, oy, ox, [&](int64_t iy, int64_t ix) { dp[iy * g.w + ix] += v; });
      }
  }
}

void pipert_global_avgpool_f32(pipert_context *, const float *x, int64_t rank,
                               const int64_t *shape, float *y) {
  if (rank < 3)
    pipert_fail("GlobalAveragePool: input must have rank >= 3, got %lld", (long long)rank);
  const int64_t planes = shape[0] * shape[1], s = numel(rank - 2, shape + 2);
  for (int64_t p = 0; p < planes; ++p) {
    const float *xp = x + p * s;
    double acc = 0;
    for (int64_t i = 0; i < s; ++i)
      acc += xp[i];
    y[p] = float(acc / double(s));
  }
}

void pipert_global_avgpool_grad_f32(pipert_context *, const float *dy, int64_t rank,
                                    const int64_t *x_shape, float *dx) {
  if (rank < 3)
    pipert_fail("GlobalAveragePoolGrad: input must have rank >= 3, got %lld", (long long)rank);
  const int64_t planes = x_shape[0] * x_shape[1], s = numel(rank - 2, x_shape + 2);
  for (int64_t p = 0; p < planes; ++p) {
    const float v = dy[p] / float(s);
    std::fill(dx + p * s, dx + (p + 1) * s, v);
  }
}

} // extern "C"
