//===- vmath_scalar.h - erf, exp, tanh, sigmoid loops can vectorise -*- C++ -*-===//
//
// Branch-free float versions of erf, exp, tanh and the logistic sigmoid:
// no library call and no branch, so that GCC vectorises a loop over them
// (the clamps and the choices are selects; the kernels that loop over them
// are built with -fno-trapping-math, and for the machine's ISA). glibc's
// erff, expf and tanhf are calls, one element at a time: over 64K floats
// here (AVX-512) tanhf took 11.2 ns an element, the sigmoid on expf 4.6,
// erff 2.6.
//
// Host code only: runtime/cpu's elementwise, loss and normalisation loops
// (through cpu/vmath.h, which adds 16-lane AVX-512 twins of verf and vexp)
// and formulas.h's host side (the recurrent cells, the activations); CUDA's
// device code keeps the CUDA math library's functions.
//
//===----------------------------------------------------------------------===//
#ifndef PIPERT_CORE_VMATH_SCALAR_H
#define PIPERT_CORE_VMATH_SCALAR_H

#include <cstdint>

namespace pipert::vm {

// verf is the rational approximation of Eigen and XLA: erf on |x| <= 4,
// where erf(4) rounds to 1 in float, and the result clamped to [-1, 1];
// measured against double erf on [-6, 6] its relative error is below 5e-7
// (a few ulp; runtime.kernels.Elementwise.ErfWithinAFewUlp). NaN stays NaN.
/// erf(x) in float.
inline float verf(float x) {
  float c = x > 4.f ? 4.f : (x < -4.f ? -4.f : x);
  float x2 = c * c;
  float a = -2.72614225801306e-10f;
  a = a * x2 + 2.77068142495902e-08f;
  a = a * x2 + -2.10102402082508e-06f;
  a = a * x2 + -5.69250639462346e-05f;
  a = a * x2 + -7.34990630326855e-04f;
  a = a * x2 + -2.95459980854025e-03f;
  a = a * x2 + -1.60960333262415e-02f;
  float b = -1.45660718464996e-05f;
  b = b * x2 + -2.13374055278905e-04f;
  b = b * x2 + -1.68282697438203e-03f;
  b = b * x2 + -7.37332916720468e-03f;
  b = b * x2 + -1.42647390514189e-02f;
  float y = c * a / b;
  // Near |x| = 4 the quotient can round just past 1.
  return y > 1.f ? 1.f : (y < -1.f ? -1.f : y);
}

/// exp(x) in float: Cephes' expf, branch-free so that loops over it
/// vectorise. x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, so r is
/// exact), exp(r) a degree-7 polynomial, and 2^n applied as two powers of
/// two so that results down to the subnormals and up to FLT_MAX come out
/// without overflow in between. Relative error below 2e-7 against double
/// exp on [-104, 88.7] (runtime.kernels.Elementwise.ExpWithinAFewUlp); exp of
/// x < -104 is 0 (it rounds to 0 in float), of x > 88.73 infinity, of NaN NaN.
inline float vexp(float x) {
  // NaN goes through as 0 (converting NaN to int is undefined) and comes
  // back at the end.
  float c = x > 88.8f ? 88.8f : (x < -104.f ? -104.f : (x != x ? 0.f : x));
  // n = round(c / ln2) by the 1.5 * 2^23 trick (no libcall, so it
  // vectorises at any ISA); c * log2e is in [-151, 129].
  const float shifter = 12582912.f;
  float fn = (c * 1.44269504088896341f + shifter) - shifter;
  float r = c - fn * 0.693359375f;
  r = r - fn * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  int n = int(fn);
  int n1 = n / 2, n2 = n - n / 2;
  // n1 + 127 and n2 + 127 are in [52, 192]: normal powers of two.
  float s1 = __builtin_bit_cast(float, uint32_t(n1 + 127) << 23);
  float s2 = __builtin_bit_cast(float, uint32_t(n2 + 127) << 23);
  float y = p * s1 * s2;
  return x != x ? x : y;
}

/// tanh(x) in float, branch-free: for |x| < 0.625 Cephes' tanhf polynomial
/// x + x^3 P(x^2) (no cancellation near 0), above (1 - e) / (1 + e) with
/// e = vexp(-2|x|) <= 0.29 (no cancellation either, and no overflow: far
/// out e is 0 and the quotient 1), the sign of x put back. Relative error
/// below 5e-7 against double tanh
/// (runtime.kernels.Elementwise.TanhAndSigmoidWithinAFewUlp); tanh(+-inf) is
/// +-1, NaN stays NaN. (A clamp of |x| before vexp, or a select for the
/// sign, made GCC keep a branch and not vectorise the loop.)
inline float vtanh(float x) {
  const float a = x < 0.f ? -x : x;
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z + -5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z + -3.33332819422e-1f;
  const float small = p * z * a + a;
  const float e = vexp(-2.f * a);
  const float big = (1.f - e) / (1.f + e);
  const float r = a < 0.625f ? small : big;
  return __builtin_copysignf(r, x);
}

/// The logistic sigmoid 1 / (1 + e^-x) in float, branch-free, split by sign
/// as formulas.h's was (so e^-|x| never overflows): 1 / (1 + e) for
/// x >= 0, e / (1 + e) below, e = vexp(-|x|). Relative error below 5e-7
/// against double; NaN stays NaN.
inline float vsigmoid(float x) {
  const float e = vexp(x < 0.f ? x : -x);
  const float d = 1.f + e;
  return x >= 0.f ? 1.f / d : e / d;
}

/// log(x) in float, branch-free: Cephes' logf. x = m 2^e with m in
/// [sqrt(1/2), sqrt(2)), log(m) = f - f^2 / 2 + f^3 P(f) for f = m - 1, plus
/// e ln2 in two parts. Subnormal x is scaled by 2^23 first. log(0) is
/// -inf, log of a negative number or NaN is NaN, log(inf) inf. Relative
/// error below 3e-7 against double log (away from x = 1, where log is 0,
/// absolute error below 1e-7; runtime.kernels.Elementwise.LogAndSoftplusWithinAFewUlp).
inline float vlog(float x) {
  const bool tiny = x < 1.17549435e-38f;
  const float xs = tiny ? x * 8388608.f : x;
  const uint32_t bits = __builtin_bit_cast(uint32_t, xs);
  float e = float(int((bits >> 23) & 0xffu) - 126) - (tiny ? 23.f : 0.f);
  float m = __builtin_bit_cast(float, (bits & 0x7fffffu) | 0x3f000000u); // [0.5, 1)
  const bool lowm = m < 0.707106781186547524f;
  e = lowm ? e - 1.f : e;
  const float f = lowm ? m + m - 1.f : m - 1.f;
  const float z = f * f;
  float p = 7.0376836292e-2f;
  p = p * f + -1.1514610310e-1f;
  p = p * f + 1.1676998740e-1f;
  p = p * f + -1.2420140846e-1f;
  p = p * f + 1.4249322787e-1f;
  p = p * f + -1.6668057665e-1f;
  p = p * f + 2.0000714765e-1f;
  p = p * f + -2.4999993993e-1f;
  p = p * f + 3.3333331174e-1f;
  float y = p * f * z;
  y = y + -2.12194440e-4f * e;
  y = y + -0.5f * z;
  const float r = f + y + 0.693359375f * e;
  const float special = x == 0.f ? -__builtin_inff() : (x > 3.40282347e38f ? x : __builtin_nanf(""));
  return x > 0.f && x <= 3.40282347e38f ? r : special;
}

/// log(1 + e^-|x|) + max(x, 0): Softplus, branch-free. t = e^-|x| in
/// (0, 1]; log1p(t) as log(u) t / (u - 1) with u = 1 + t (exact where u
/// rounds to 1: t itself), so far-negative x keeps its tiny result
/// (e^x) instead of 0.
inline float vsoftplus(float x) {
  const float t = vexp(x < 0.f ? x : -x);
  const float u = 1.f + t;
  const float d = u - 1.f;
  const float l = d == 0.f ? t : vlog(u) * (t / d);
  const float r = (x > 0.f ? x : 0.f) + l;
  return x != x ? x : r;
}

} // namespace pipert::vm

#endif
