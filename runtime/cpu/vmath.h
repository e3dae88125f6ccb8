//===- vmath.h - erf and exp the compiler can vectorise (CPU) ----*- C++ -*-===//
//
// The scalar verf, vexp, vtanh and vsigmoid are runtime/core/vmath_scalar.h's
// (formulas.h's host side uses them too); here their use in runtime/cpu and
// the 16-lane AVX-512 twins of verf and vexp.
//
// glibc's erff is a call, so a loop over it runs one element at a time
// (about 2.6 ns an element here, the GPT's forward GELU). verf is the
// rational approximation of Eigen and XLA, branch-free (the clamps are
// selects), which GCC vectorises at -O3 with -fno-trapping-math
// (elementwise.cpp is built with it; Clang's default): erf on |x| <= 4, where
// erf(4) rounds to 1 in float, and the result clamped to [-1, 1]; measured
// against double erf on [-6, 6] its relative error is below 5e-7 (a few ulp;
// runtime.kernels.Elementwise.ErfWithinAFewUlp). NaN stays NaN.
//
// vexp replaces glibc's expf where a loop calls it (Softmax, Exp, Erf's
// gradient). Built for SSE2 it was barely faster than glibc's table-driven
// expf (0.70 vs 0.98 ms over 512K elements); with the kernels built for the
// machine's ISA (PIPERT_CPU_ARCH, AVX-512 here) 0.11 vs 0.97 ms. In the
// GPT's step: Softmax forward 3.2 -> 1.1 ms, Erf's gradient 6.9 -> 1.2 ms.
// Internal to runtime/cpu.
//
//===----------------------------------------------------------------------===//
#ifndef PIPERT_CPU_VMATH_H
#define PIPERT_CPU_VMATH_H

#include "../core/vmath_scalar.h"

#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace pipert::cpu {

using vm::verf;
using vm::vexp;
using vm::vlog;
using vm::vsoftplus;
using vm::vsigmoid;
using vm::vtanh;

#if defined(__AVX512F__)
// verf and vexp on 16 lanes, the same bits as the scalar versions (a test
// compares them, runtime.kernels.Elementwise.VectorErfExpBitForBit). GCC
// vectorises the scalar ones, but each clamp becomes compares and blends
// through mask registers, and those bound the loop: an exact GELU over
// 2048 floats 0.49 -> 0.32 us with the clamps as min/max here. The operand
// order of min/max keeps a NaN (minps/maxps return their second operand
// when either is NaN).
inline __m512 verf16(__m512 x) {
  const __m512 c =
      _mm512_min_ps(_mm512_set1_ps(4.f), _mm512_max_ps(_mm512_set1_ps(-4.f), x));
  const __m512 x2 = _mm512_mul_ps(c, c);
  __m512 a = _mm512_set1_ps(-2.72614225801306e-10f);
  a = _mm512_fmadd_ps(a, x2, _mm512_set1_ps(2.77068142495902e-08f));
  a = _mm512_fmadd_ps(a, x2, _mm512_set1_ps(-2.10102402082508e-06f));
  a = _mm512_fmadd_ps(a, x2, _mm512_set1_ps(-5.69250639462346e-05f));
  a = _mm512_fmadd_ps(a, x2, _mm512_set1_ps(-7.34990630326855e-04f));
  a = _mm512_fmadd_ps(a, x2, _mm512_set1_ps(-2.95459980854025e-03f));
  a = _mm512_fmadd_ps(a, x2, _mm512_set1_ps(-1.60960333262415e-02f));
  __m512 b = _mm512_set1_ps(-1.45660718464996e-05f);
  b = _mm512_fmadd_ps(b, x2, _mm512_set1_ps(-2.13374055278905e-04f));
  b = _mm512_fmadd_ps(b, x2, _mm512_set1_ps(-1.68282697438203e-03f));
  b = _mm512_fmadd_ps(b, x2, _mm512_set1_ps(-7.37332916720468e-03f));
  b = _mm512_fmadd_ps(b, x2, _mm512_set1_ps(-1.42647390514189e-02f));
  const __m512 y = _mm512_div_ps(_mm512_mul_ps(c, a), b);
  return _mm512_min_ps(_mm512_set1_ps(1.f), _mm512_max_ps(_mm512_set1_ps(-1.f), y));
}

inline __m512 vexp16(__m512 x) {
  // A NaN lane goes through as -104 and gets x back at the end.
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __m512 c =
      _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.f)), _mm512_set1_ps(88.8f));
  const __m512 shifter = _mm512_set1_ps(12582912.f);
  const __m512 fn =
      _mm512_sub_ps(_mm512_fmadd_ps(c, _mm512_set1_ps(1.44269504088896341f), shifter), shifter);
  __m512 r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(0.693359375f), c);
  r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.f));
  // p * 2^n in one instruction (vscalefps). The scalar version multiplies
  // by 2^(n/2) and 2^(n - n/2): the first product is exact (normal), so the
  // second is the only rounding, which is scalef's one rounding: the same
  // bits, also where the result is subnormal (the bit-for-bit test covers
  // -104 .. 88.8). Was eight integer ops and two multiplies: exp(-x^2/2)
  // (the GELU's gradient) over 64K floats 0.42 -> 0.30 ns an element, the
  // two alternating in one binary.
  return _mm512_mask_mov_ps(_mm512_scalef_ps(p, fn), nan, x);
}
#endif

} // namespace pipert::cpu

#endif
