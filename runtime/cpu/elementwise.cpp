//===- elementwise.cpp - unary, binary, where, activation grads (CPU) -----===//
#include "kernel_util.h"
#include "../core/formulas.h"
#include "vmath.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#if defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#endif
#include <type_traits>
#include <utility>

using namespace pipert::cpu;

namespace {

template <typename F>
void map1(pipert_context *ctx, const float *PIPERT_RESTRICT x, int64_t n, float *y, F f) {
  parallel_for(ctx, n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      y[i] = f(x[i]);
  });
}

template <typename F>
void map2(pipert_context *ctx, const float *a, const float *b, int64_t n, float *y, F f) {
  parallel_for(ctx, n, 1 << 16, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i)
      y[i] = f(a[i], b[i]);
  });
}

// map1 / map2 with a 16-lane body `vf` where the ISA has AVX-512 (the
// explicit verf16/vexp16 of vmath.h) and the scalar `f` for the rest and
// elsewhere: the same bits either way. Call sites name the vector body
// through PIPERT_V16, which is nullptr without AVX-512.
#if defined(__AVX512F__)
// A lambda, not the function's pointer: the loop then inlines the body
// (through a pointer it was a call per 16 elements).
#define PIPERT_V16(fn) [](auto... v) { return fn(v...); }
#else
#define PIPERT_V16(fn) nullptr
#endif

template <typename VF, typename F>
void map1v(pipert_context *ctx, const float *PIPERT_RESTRICT x, int64_t n, float *y, VF vf,
           F f) {
  parallel_for(ctx, n, 1 << 16, [&](int64_t b, int64_t e) {
    int64_t i = b;
#if defined(__AVX512F__)
    for (; i + 16 <= e; i += 16)
      _mm512_storeu_ps(y + i, vf(_mm512_loadu_ps(x + i)));
#else
    (void)vf;
#endif
    for (; i < e; ++i)
      y[i] = f(x[i]);
  });
}

template <typename VF, typename F>
void map2v(pipert_context *ctx, const float *a, const float *b, int64_t n, float *y, VF vf, F f) {
  parallel_for(ctx, n, 1 << 16, [&](int64_t s, int64_t e) {
    int64_t i = s;
#if defined(__AVX512F__)
    for (; i + 16 <= e; i += 16)
      _mm512_storeu_ps(y + i, vf(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
#else
    (void)vf;
#endif
    for (; i < e; ++i)
      y[i] = f(a[i], b[i]);
  });
}

// Calls f(std::integral_constant<int, op>{}) for the pipert_activation_op
// `op` (checked by the caller), so that f's loop sees the op as a constant.
template <int First = PIPERT_ACTIVATION_LEAKY_RELU, typename F>
void for_each_activation(int op, F &&f) {
  if constexpr (First <= PIPERT_ACTIVATION_RECIPROCAL) {
    if (op == First)
      return f(std::integral_constant<int, First>{});
    for_each_activation<First + 1>(op, std::forward<F>(f));
  }
}

// The exact GELU, its gradient and erf's gradient, one element and (with
// AVX-512) 16, each vector body in its scalar twin's order of operations.
inline float gelu1(float v) { return 0.5f * v * (1.f + verf(v * 0.70710678118654752f)); }
inline float gelu_grad1(float v, float g) {
  // GELU': Phi(x) + x phi(x).
  const float cdf = 0.5f * (1.f + verf(v * 0.70710678118654752f));
  const float pdf = 0.39894228040143268f * vexp(-0.5f * v * v);
  return g * (cdf + v * pdf);
}
inline float erf_grad1(float v, float g) { return g * 1.1283791670955126f * vexp(-v * v); }
#if defined(__AVX512F__)
inline __m512 splat16(float v) { return _mm512_set1_ps(v); }
inline __m512 neg16(__m512 v) {
  return _mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(v), _mm512_set1_epi32(int(0x80000000u))));
}
inline __m512 verf16_fn(__m512 v) { return verf16(v); }
inline __m512 vexp16_fn(__m512 v) { return vexp16(v); }
inline __m512 gelu16(__m512 v) {
  const __m512 e = verf16(_mm512_mul_ps(v, splat16(0.70710678118654752f)));
  return _mm512_mul_ps(_mm512_mul_ps(splat16(0.5f), v), _mm512_add_ps(splat16(1.f), e));
}
inline __m512 gelu_grad16(__m512 v, __m512 g) {
  const __m512 cdf = _mm512_mul_ps(
      splat16(0.5f),
      _mm512_add_ps(splat16(1.f), verf16(_mm512_mul_ps(v, splat16(0.70710678118654752f)))));
  const __m512 pdf = _mm512_mul_ps(splat16(0.39894228040143268f),
                                   vexp16(_mm512_mul_ps(_mm512_mul_ps(splat16(-0.5f), v), v)));
  // cdf + v pdf, contracted as the scalar loop's: one multiply-add.
  return _mm512_mul_ps(g, _mm512_fmadd_ps(v, pdf, cdf));
}
inline __m512 erf_grad16(__m512 v, __m512 g) {
  return _mm512_mul_ps(_mm512_mul_ps(g, splat16(1.1283791670955126f)),
                       vexp16(_mm512_mul_ps(neg16(v), v)));
}
#endif

// y = f(a, b) with broadcasting. Inner runs are specialised on whether each
// operand advances (stride 1) or stays (stride 0) so the loops vectorise.
template <typename TA, typename TB, typename TY, typename F>
void broadcast_binary(const char *op, const TA *a, int64_t ra, const int64_t *sa, const TB *b,
                      int64_t rb, const int64_t *sb, TY *y, F f) {
  check_rank(op, ra);
  check_rank(op, rb);
  // Equal shapes (a residual add, a gradient added into its accumulator:
  // most of a small model's binary ops): one flat loop, without the
  // broadcast plan (~15 ns a call, ~40 calls a micro-batch of the example
  // transformer).
  if (ra == rb && std::equal(sa, sa + ra, sb)) {
    const int64_t n = numel(ra, sa);
    for (int64_t i = 0; i < n; ++i)
      y[i] = f(a[i], b[i]);
    return;
  }
  int64_t out[kMaxRank];
  int64_t r = broadcast_shape(op, ra, sa, rb, sb, out);
  int64_t strides[2][kMaxRank];
  broadcast_strides(ra, sa, r, strides[0]);
  broadcast_strides(rb, sb, r, strides[1]);
  broadcast_loop<2>(r, out, strides, [&](const int64_t *off, int64_t yo, int64_t len,
                                         const int64_t *st) {
    const TA *pa = a + off[0];
    const TB *pb = b + off[1];
    TY *py = y + yo;
    if (st[0] && st[1]) {
      for (int64_t i = 0; i < len; ++i)
        py[i] = f(pa[i], pb[i]);
    } else if (st[0]) {
      const TB vb = *pb;
      for (int64_t i = 0; i < len; ++i)
        py[i] = f(pa[i], vb);
    } else if (st[1]) {
      const TA va = *pa;
      for (int64_t i = 0; i < len; ++i)
        py[i] = f(va, pb[i]);
    } else {
      TY v = f(*pa, *pb);
      for (int64_t i = 0; i < len; ++i)
        py[i] = v;
    }
  });
}

template <typename T>
void where_typed(const uint8_t *c, int64_t rc, const int64_t *sc, const T *x, int64_t rx,
                 const int64_t *sx, const T *y, int64_t ry, const int64_t *sy, T *out) {
  const char *op = "Where";
  check_rank(op, rc);
  check_rank(op, rx);
  check_rank(op, ry);
  int64_t tmp[kMaxRank], shape[kMaxRank];
  int64_t r = broadcast_shape(op, rc, sc, rx, sx, tmp);
  r = broadcast_shape(op, r, tmp, ry, sy, shape);
  int64_t strides[4][kMaxRank];
  broadcast_strides(rc, sc, r, strides[0]);
  broadcast_strides(rx, sx, r, strides[1]);
  broadcast_strides(ry, sy, r, strides[2]);
  broadcast_strides(r, shape, r, strides[3]);
  broadcast_loop<4>(r, shape, strides, [&](const int64_t *off, int64_t, int64_t len,
                                           const int64_t *st) {
    const uint8_t *pc = c + off[0];
    const T *px = x + off[1];
    const T *py = y + off[2];
    T *po = out + off[3];
    // A contiguous condition with each value contiguous or one broadcast
    // element (attention's causal mask: a T x T mask, a scalar, the
    // scores) runs as a loop with fixed strides, which vectorises: 20 -> 5
    // us of the example transformer's step at 32 samples.
    auto fixed = [&](auto sx1, auto sy1) {
      constexpr int64_t ax = decltype(sx1)::value, ay = decltype(sy1)::value;
      int64_t i = 0;
#if defined(__AVX512BW__) && defined(__AVX512VL__)
      // GCC turns the loop below into a compare and a branch per element
      // when one side is a broadcast scalar (the causal mask's -inf):
      // 171 ns for a 2 x 4 x 8 x 8 Where, the branch mispredicted on the
      // mask's pattern. 16 lanes at a time: the condition bytes tested into
      // a lane mask, one blend.
      if constexpr (sizeof(T) == 4) {
        const __m128i ones = _mm_set1_epi8(-1);
        auto side = [](const T *p, auto a1, int64_t at, __mmask16 live) {
          if constexpr (decltype(a1)::value == 0) {
            uint32_t v;
            std::memcpy(&v, p, 4);
            return _mm512_set1_epi32(int(v));
          } else {
            return _mm512_maskz_loadu_epi32(live, p + at);
          }
        };
        for (; i < len; i += 16) {
          const __mmask16 live =
              len - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (len - i)) - 1);
          const __mmask16 take =
              _mm_mask_test_epi8_mask(live, _mm_maskz_loadu_epi8(live, pc + i), ones);
          const __m512i vx = side(px, sx1, i, live), vy = side(py, sy1, i, live);
          _mm512_mask_storeu_epi32(po + i, live, _mm512_mask_blend_epi32(take, vy, vx));
        }
        return;
      }
#endif
      for (; i < len; ++i)
        po[i] = pc[i] ? px[i * ax] : py[i * ay];
    };
    using Zero = std::integral_constant<int64_t, 0>;
    using One = std::integral_constant<int64_t, 1>;
    if (st[0] == 1 && st[1] <= 1 && st[2] <= 1 && st[1] >= 0 && st[2] >= 0) {
      if (st[1] && st[2])
        return fixed(One{}, One{});
      if (st[1])
        return fixed(One{}, Zero{});
      if (st[2])
        return fixed(Zero{}, One{});
      return fixed(Zero{}, Zero{});
    }
    for (int64_t i = 0; i < len; ++i)
      po[i] = pc[i * st[0]] ? px[i * st[1]] : py[i * st[2]];
  });
}

} // namespace

namespace {

// dx[i] = the sum over rows r (in order) of dy[r * nx + i], for the columns
// from i0 on in blocks of 16 * G; returns where the blocks stop.
template <int G>
int64_t column_sums_wide(const float *dy, int64_t rows, int64_t nx, int64_t i0, float *dx) {
  typedef float v16 __attribute__((vector_size(64)));
  for (; i0 + 16 * G <= nx; i0 += 16 * G) {
    v16 acc[G] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const float *pg = dy + r * nx + i0;
      #pragma GCC unroll 8
      for (int j = 0; j < G; ++j) {
        v16 v;
        std::memcpy(&v, pg + 16 * j, sizeof v);
        acc[j] += v;
      }
    }
    std::memcpy(dx + i0, acc, sizeof acc);
  }
  return i0;
}

} // namespace

extern "C" {

void pipert_unary_f32(pipert_context *ctx, pipert_unary_op op, const float *x, int64_t n,
                      float *y) {
  switch (op) {
  case PIPERT_UNARY_IDENTITY:
    if (x != y && n)
      std::memmove(y, x, size_t(n) * sizeof(float));
    return;
  case PIPERT_UNARY_NEG: return map1(ctx, x, n, y, [](float v) { return -v; });
  case PIPERT_UNARY_RELU: return map1(ctx, x, n, y, [](float v) { return formula::relu(v); });
  case PIPERT_UNARY_TANH: return map1(ctx, x, n, y, [](float v) { return vtanh(v); });
  case PIPERT_UNARY_SIGMOID: return map1(ctx, x, n, y, [](float v) { return vsigmoid(v); });
  case PIPERT_UNARY_ERF:
    return map1v(ctx, x, n, y, PIPERT_V16(verf16_fn), [](float v) { return verf(v); });
  case PIPERT_UNARY_SQRT: return map1(ctx, x, n, y, [](float v) { return std::sqrt(v); });
  case PIPERT_UNARY_EXP:
    return map1v(ctx, x, n, y, PIPERT_V16(vexp16_fn), [](float v) { return vexp(v); });
  case PIPERT_UNARY_LOG: return map1(ctx, x, n, y, [](float v) { return vlog(v); });
  case PIPERT_UNARY_ABS: return map1(ctx, x, n, y, [](float v) { return std::fabs(v); });
  case PIPERT_UNARY_RECIPROCAL: return map1(ctx, x, n, y, [](float v) { return 1.f / v; });
  case PIPERT_UNARY_SIN: return map1(ctx, x, n, y, [](float v) { return std::sin(v); });
  case PIPERT_UNARY_COS: return map1(ctx, x, n, y, [](float v) { return std::cos(v); });
  }
  pipert_fail("pipert_unary_f32: unknown op %d", int(op));
}

void pipert_binary_f32(pipert_context *, pipert_binary_op op, const float *a, int64_t ra,
                       const int64_t *sa, const float *b, int64_t rb, const int64_t *sb,
                       float *y) {
  switch (op) {
  case PIPERT_BINARY_ADD:
    return broadcast_binary("Add", a, ra, sa, b, rb, sb, y, [](float u, float v) { return u + v; });
  case PIPERT_BINARY_SUB:
    return broadcast_binary("Sub", a, ra, sa, b, rb, sb, y, [](float u, float v) { return u - v; });
  case PIPERT_BINARY_MUL:
    return broadcast_binary("Mul", a, ra, sa, b, rb, sb, y, [](float u, float v) { return u * v; });
  case PIPERT_BINARY_DIV:
    return broadcast_binary("Div", a, ra, sa, b, rb, sb, y, [](float u, float v) { return u / v; });
  case PIPERT_BINARY_POW:
    // One exponent for all (a constant): a loop of its own operation, which
    // vectorises (formula::pow_value per element does not).
    if (numel(rb, sb) == 1) {
      const float e = b[0];
      if (e == 2.f)
        return broadcast_binary("Pow", a, ra, sa, b, rb, sb, y,
                                [](float u, float) { return u * u; });
      if (e == 1.f)
        return broadcast_binary("Pow", a, ra, sa, b, rb, sb, y, [](float u, float) { return u; });
      if (e == -1.f)
        return broadcast_binary("Pow", a, ra, sa, b, rb, sb, y,
                                [](float u, float) { return 1.f / u; });
      if (e == 0.5f)
        return broadcast_binary("Pow", a, ra, sa, b, rb, sb, y, [](float u, float) {
          return u == -INFINITY ? INFINITY : std::sqrt(u) + 0.f;
        });
    }
    return broadcast_binary("Pow", a, ra, sa, b, rb, sb, y,
                            [](float u, float v) { return formula::pow_value(u, v); });
  case PIPERT_BINARY_MAX:
    return broadcast_binary("Max", a, ra, sa, b, rb, sb, y,
                            [](float u, float v) { return formula::max_value(u, v); });
  case PIPERT_BINARY_MIN:
    return broadcast_binary("Min", a, ra, sa, b, rb, sb, y,
                            [](float u, float v) { return formula::min_value(u, v); });
  case PIPERT_BINARY_FMOD:
    return broadcast_binary("Mod", a, ra, sa, b, rb, sb, y,
                            [](float u, float v) { return formula::fmod_value(u, v); });
  case PIPERT_BINARY_MOD: break;
  }
  pipert_fail("pipert_binary_f32: op %d is not supported on float", int(op));
}

void pipert_binary_i64(pipert_context *, pipert_binary_op op, const int64_t *a, int64_t ra,
                       const int64_t *sa, const int64_t *b, int64_t rb, const int64_t *sb,
                       int64_t *y) {
  using I = int64_t;
  switch (op) {
  case PIPERT_BINARY_ADD:
    return broadcast_binary("Add", a, ra, sa, b, rb, sb, y, [](I u, I v) { return u + v; });
  case PIPERT_BINARY_SUB:
    return broadcast_binary("Sub", a, ra, sa, b, rb, sb, y, [](I u, I v) { return u - v; });
  case PIPERT_BINARY_MUL:
    return broadcast_binary("Mul", a, ra, sa, b, rb, sb, y, [](I u, I v) { return u * v; });
  case PIPERT_BINARY_DIV:
    return broadcast_binary("Div", a, ra, sa, b, rb, sb, y, [](I u, I v) {
      if (v == 0)
        pipert_fail("Div: integer division by zero");
      return u / v;
    });
  case PIPERT_BINARY_MAX:
    return broadcast_binary("Max", a, ra, sa, b, rb, sb, y,
                            [](I u, I v) { return formula::max_value(u, v); });
  case PIPERT_BINARY_MIN:
    return broadcast_binary("Min", a, ra, sa, b, rb, sb, y,
                            [](I u, I v) { return formula::min_value(u, v); });
  case PIPERT_BINARY_FMOD:
    return broadcast_binary("Mod", a, ra, sa, b, rb, sb, y, [](I u, I v) {
      if (v == 0)
        pipert_fail("Mod: integer remainder by zero");
      return formula::fmod_value(u, v);
    });
  case PIPERT_BINARY_MOD:
    return broadcast_binary("Mod", a, ra, sa, b, rb, sb, y, [](I u, I v) {
      if (v == 0)
        pipert_fail("Mod: integer remainder by zero");
      return formula::mod_value(u, v);
    });
  case PIPERT_BINARY_POW: break;
  }
  pipert_fail("pipert_binary_i64: op %d is not supported on int64", int(op));
}

void pipert_equal_f32(pipert_context *, const float *a, int64_t ra, const int64_t *sa,
                      const float *b, int64_t rb, const int64_t *sb, uint8_t *y) {
  broadcast_binary("Equal", a, ra, sa, b, rb, sb, y,
                   [](float u, float v) { return uint8_t(u == v); });
}

void pipert_equal_i64(pipert_context *, const int64_t *a, int64_t ra, const int64_t *sa,
                      const int64_t *b, int64_t rb, const int64_t *sb, uint8_t *y) {
  broadcast_binary("Equal", a, ra, sa, b, rb, sb, y,
                   [](int64_t u, int64_t v) { return uint8_t(u == v); });
}

void pipert_where(pipert_context *, pipert_dtype dtype, const uint8_t *c, int64_t rc,
                  const int64_t *sc, const void *x, int64_t rx, const int64_t *sx, const void *y,
                  int64_t ry, const int64_t *sy, void *out) {
  switch (pipert_dtype_size(dtype)) {
  case 1: return where_typed(c, rc, sc, (const uint8_t *)x, rx, sx, (const uint8_t *)y, ry, sy, (uint8_t *)out);
  case 2: return where_typed(c, rc, sc, (const uint16_t *)x, rx, sx, (const uint16_t *)y, ry, sy, (uint16_t *)out);
  case 4: return where_typed(c, rc, sc, (const uint32_t *)x, rx, sx, (const uint32_t *)y, ry, sy, (uint32_t *)out);
  case 8: return where_typed(c, rc, sc, (const uint64_t *)x, rx, sx, (const uint64_t *)y, ry, sy, (uint64_t *)out);
  }
  pipert_fail("Where: unsupported dtype %d", int(dtype));
}

void pipert_activation_f32(pipert_context *ctx, pipert_activation_op op, float alpha, float beta,
                           const float *x, int64_t n, float *y) {
  if (!formula::is_activation(int(op)))
    pipert_fail("pipert_activation_f32: unknown op %d", int(op));
  const int o = int(op);
  // The exact GELU (pipe-fuse-gelu's): with the vectorisable erf, as one
  // loop of its own (formula::activation's switch per element does not
  // vectorise).
  if (op == PIPERT_ACTIVATION_GELU)
    return map1v(ctx, x, n, y, PIPERT_V16(gelu16), gelu1);
  // One loop per op, the op a constant in it: the switch folds away and the
  // loop vectorises (a switch per element ran Clip, HardSwish or LeakyRelu
  // at 0.9-4.7 ns an element, the same loop per op at ~0.1).
  for_each_activation(o, [&](auto op_c) {
    map1(ctx, x, n, y, [=](float v) { return formula::activation(op_c(), alpha, beta, v); });
  });
}

void pipert_activation_grad_f32(pipert_context *ctx, pipert_activation_op op, float alpha,
                                float beta, const float *x, const float *dy, int64_t n,
                                float *dx) {
  if (!formula::is_activation(int(op)))
    pipert_fail("pipert_activation_grad_f32: unknown op %d", int(op));
  const int o = int(op);
  // GELU': Phi(x) + x phi(x), with the vectorisable erf and exp.
  if (op == PIPERT_ACTIVATION_GELU)
    return map2v(ctx, x, dy, n, dx, PIPERT_V16(gelu_grad16), gelu_grad1);
  for_each_activation(o, [&](auto op_c) {
    map2(ctx, x, dy, n, dx,
         [=](float v, float g) { return formula::activation_grad(op_c(), alpha, beta, v, g); });
  });
}

static const char *compare_name(pipert_compare_op op) {
  static const char *names[] = {"Less", "LessOrEqual", "Greater", "GreaterOrEqual"};
  if (int(op) < 0 || int(op) > PIPERT_COMPARE_GREATER_EQUAL)
    pipert_fail("pipert_compare: unknown op %d", int(op));
  return names[op];
}

void pipert_compare_f32(pipert_context *, pipert_compare_op op, const float *a, int64_t ra,
                        const int64_t *sa, const float *b, int64_t rb, const int64_t *sb,
                        uint8_t *y) {
  const int o = int(op);
  broadcast_binary(compare_name(op), a, ra, sa, b, rb, sb, y,
                   [=](float u, float v) { return formula::compare(o, u, v); });
}

void pipert_compare_i64(pipert_context *, pipert_compare_op op, const int64_t *a, int64_t ra,
                        const int64_t *sa, const int64_t *b, int64_t rb, const int64_t *sb,
                        uint8_t *y) {
  const int o = int(op);
  broadcast_binary(compare_name(op), a, ra, sa, b, rb, sb, y,
                   [=](int64_t u, int64_t v) { return formula::compare(o, u, v); });
}

void pipert_logical(pipert_context *, pipert_logical_op op, const uint8_t *a, int64_t ra,
                    const int64_t *sa, const uint8_t *b, int64_t rb, const int64_t *sb,
                    uint8_t *y) {
  if (op != PIPERT_LOGICAL_AND && op != PIPERT_LOGICAL_OR)
    pipert_fail("pipert_logical: unknown op %d", int(op));
  const int o = int(op);
  broadcast_binary(o == PIPERT_LOGICAL_AND ? "And" : "Or", a, ra, sa, b, rb, sb, y,
                   [=](uint8_t u, uint8_t v) { return formula::logical(o, u, v); });
}

void pipert_not(pipert_context *, const uint8_t *x, int64_t n, uint8_t *y) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = !x[i];
}

void pipert_relu_grad_f32(pipert_context *ctx, const float *x, const float *dy, int64_t n,
                          float *dx) {
  map2(ctx, x, dy, n, dx, [](float v, float g) { return formula::relu_grad(v, g); });
}

void pipert_tanh_grad_f32(pipert_context *ctx, const float *y, const float *dy, int64_t n,
                          float *dx) {
  map2(ctx, y, dy, n, dx, [](float v, float g) { return formula::tanh_grad(v, g); });
}

void pipert_sigmoid_grad_f32(pipert_context *ctx, const float *y, const float *dy, int64_t n,
                             float *dx) {
  map2(ctx, y, dy, n, dx, [](float v, float g) { return formula::sigmoid_grad(v, g); });
}

void pipert_erf_grad_f32(pipert_context *ctx, const float *x, const float *dy, int64_t n,
                         float *dx) {
  // formula::erf_grad with the vectorisable exp.
  map2v(ctx, x, dy, n, dx, PIPERT_V16(erf_grad16), erf_grad1);
}

void pipert_reduce_to_shape_f32(pipert_context *, const float *dy, int64_t dy_rank,
                                const int64_t *dy_shape, int64_t x_rank, const int64_t *x_shape,
                                float *dx) {
  const char *op = "reduce_to_shape";
  check_rank(op, dy_rank);
  if (x_rank > dy_rank)
    pipert_fail("%s: target rank %lld exceeds rank %lld", op, (long long)x_rank,
                (long long)dy_rank);
  for (int64_t i = 0; i < x_rank; ++i) {
    int64_t d = dy_shape[i + dy_rank - x_rank];
    if (x_shape[i] != 1 && x_shape[i] != d)
      pipert_fail("%s: shape does not broadcast to the gradient's (axis %lld)", op, (long long)i);
  }
  int64_t nx = numel(x_rank, x_shape);
  std::fill(dx, dx + nx, 0.f);
  // Only leading axes reduced (a bias's gradient: the rows of dy summed):
  // row after row into dx, the order of the loop below, without its call
  // per row (16 x 32 -> 32: 70 -> 25 ns).
  bool leading = nx > 0;
  for (int64_t i = 0; i < x_rank && leading; ++i)
    leading = x_shape[i] == dy_shape[i + dy_rank - x_rank];
  if (leading) {
    // Columns summed in registers down the rows, each column's sum in the
    // same order as row by row into dx: 128 columns a pass (eight vectors,
    // eight independent chains of adds; one 16-column chain a pass was
    // bound by the add's latency, a row every 4 cycles: the GPT's bias
    // gradients 1.9 ms a step), then 16 at a time.
    const int64_t rows = numel(dy_rank, dy_shape) / nx;
    int64_t i0 = column_sums_wide<8>(dy, rows, nx, 0, dx);
    i0 = column_sums_wide<2>(dy, rows, nx, i0, dx);
    for (; i0 + 16 <= nx; i0 += 16) {
      float acc[16] = {};
      for (int64_t r = 0; r < rows; ++r) {
        const float *PIPERT_RESTRICT pg = dy + r * nx + i0;
        for (int j = 0; j < 16; ++j)
          acc[j] += pg[j];
      }
      for (int j = 0; j < 16; ++j)
        dx[i0 + j] = acc[j];
    }
    for (int64_t r = 0; r < rows && i0 < nx; ++r)
      for (int64_t i = i0; i < nx; ++i)
        dx[i] += dy[r * nx + i];
    return;
  }
  // Iterate over dy; dx advances with broadcast strides (0 on reduced axes).
  int64_t strides[2][kMaxRank];
  broadcast_strides(x_rank, x_shape, dy_rank, strides[0]);
  broadcast_strides(dy_rank, dy_shape, dy_rank, strides[1]);
  broadcast_loop<2>(dy_rank, dy_shape, strides, [&](const int64_t *off, int64_t, int64_t len,
                                                    const int64_t *st) {
    float *PIPERT_RESTRICT px = dx + off[0];
    const float *PIPERT_RESTRICT pg = dy + off[1];
    if (st[0]) {
      for (int64_t i = 0; i < len; ++i)
        px[i] += pg[i];
    } else {
      float s = 0.f;
      for (int64_t i = 0; i < len; ++i)
        s += pg[i];
      *px += s;
    }
  });
}

void pipert_axpy_f32(pipert_context *ctx, float alpha, const float *x, float *y, int64_t n) {
  parallel_for(ctx, n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      y[i] += alpha * x[i];
  });
}

void pipert_scale_f32(pipert_context *ctx, float alpha, float *x, int64_t n) {
  parallel_for(ctx, n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      x[i] *= alpha;
  });
}

void pipert_fill_f32(pipert_context *, float value, float *x, int64_t n) {
  std::fill(x, x + n, value);
}

void pipert_accumulate_f32(pipert_context *ctx, const float *x, float *y, int64_t n) {
  parallel_for(ctx, n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      y[i] += x[i];
  });
}

} // extern "C"
