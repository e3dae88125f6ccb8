//===- kernel_unit_test.cpp - direct checks of kernels ONNX data lacks ----===//
//
// Reference loops for what the node tests do not cover: larger/batched GEMM
// paths, threads, Dropout statistics and determinism, Where/Equal on int64,
// AdamW, SGD, weight prediction, EASGD, slots and the BLAS-1 helpers.
//
//===----------------------------------------------------------------------===//
#include "pipert/pipert_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#ifndef PIPERT_TEST_CUDA_DEVICE_SHIM_H
// runtime/cpu/kernel_util.h's: whether pipert's own kernel runs a product.
namespace pipert::cpu {
bool small_gemm_eligible(int trans_b, int64_t m, int64_t n, int64_t k);
} // namespace pipert::cpu
#endif

namespace {

using Vec = std::vector<float>;

Vec random_vec(size_t n, unsigned seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  Vec v(n);
  for (auto &x : v)
    x = d(g);
  return v;
}

struct Ctx {
  pipert_context *ctx;
  explicit Ctx(int threads = 1, uint64_t seed = 3) : ctx(pipert_context_create(threads, seed)) {}
  ~Ctx() { pipert_context_destroy(ctx); }
};

// y[b] = op(a[b]) @ op(b[b]) in double, for matrices stored row-major.
void ref_matmul(const float *a, const float *b, float *y, int64_t m, int64_t n, int64_t k, bool ta,
                bool tb) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += double(ta ? a[p * m + i] : a[i * k + p]) * double(tb ? b[j * k + p] : b[p * n + j]);
      y[i * n + j] = float(s);
    }
}

void expect_close(const Vec &a, const Vec &e, double tol, const char *what) {
  ASSERT_EQ(a.size(), e.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], e[i], tol * (1 + std::fabs(e[i]))) << what << " at " << i;
}

TEST(Gemm, TransposesBroadcastBiasAndThreads) {
  const int64_t m = 37, n = 29, k = 53;
  for (int threads : {1, 2})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        Ctx ctx(threads);
        Vec a = random_vec(static_cast<size_t>(m * k), 1), b = random_vec(static_cast<size_t>(k * n), 2);
        Vec c = random_vec(static_cast<size_t>(m), 3); // (M, 1) column bias
        const int64_t cs[2] = {m, 1};
        Vec y(static_cast<size_t>(m * n)), ref(static_cast<size_t>(m * n));
        pipert_gemm_f32(ctx.ctx, a.data(), b.data(), c.data(), 2, cs, m, n, k, ta, tb, 0.5f, 2.f,
                        y.data());
        ref_matmul(a.data(), b.data(), ref.data(), m, n, k, ta, tb);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j)
            ref[static_cast<size_t>(i * n + j)] = 0.5f * ref[static_cast<size_t>(i * n + j)] + 2.f * c[static_cast<size_t>(i)];
        expect_close(y, ref, 1e-4, "gemm");
      }
}

// A bias row ((N) or (1, N)), on shapes of the small kernel and beyond it:
// the kernel reads the row as C's old value in every row; the result is the
// same to the bit as Y filled with beta * C and accumulated into by sgemm
// (what pipert_gemm_f32 did before), and close to the double reference.
TEST(Gemm, BiasRowBitForBitWithTheBroadcast) {
  Ctx ctx;
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{16, 128, 32}, {16, 96, 32},
                         {16, 32, 128}, {7, 33, 5}, {13, 47, 19}, {64, 96, 48}, {70, 50, 100}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float beta : {1.f, 2.f, 0.3f})
          for (int64_t rank : {1, 2}) {
            Vec a = random_vec(size_t(m * k), 1), b = random_vec(size_t(k * n), 2);
            Vec c = random_vec(size_t(n), 3);
            const int64_t cs[2] = {rank == 1 ? n : 1, n};
            Vec y(size_t(m * n), 7.f), want(size_t(m * n)), ref(size_t(m * n));
            pipert_gemm_f32(ctx.ctx, a.data(), b.data(), c.data(), rank,
                            rank == 1 ? cs + 1 : cs, m, n, k, ta, tb, 0.75f, beta, y.data());
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j)
                want[size_t(i * n + j)] = beta * c[size_t(j)];
            pipert_sgemm(ctx.ctx, ta, tb, m, n, k, 0.75f, a.data(), ta ? m : k, b.data(),
                         tb ? k : n, 1.f, want.data(), n);
            EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float)))
                << m << "x" << n << "x" << k << " ta " << ta << " tb " << tb << " beta " << beta
                << " rank " << rank;
            ref_matmul(a.data(), b.data(), ref.data(), m, n, k, ta, tb);
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j)
                ref[size_t(i * n + j)] = 0.75f * ref[size_t(i * n + j)] + beta * c[size_t(j)];
            expect_close(y, ref, 1e-4, "gemm with a bias row");
          }
}

// C given as Y itself (a weight gradient added into its accumulator in
// place): Y = alpha op(A) op(B) + beta Y, on each transpose.
TEST(Gemm, AccumulatesInPlace) {
  Ctx ctx;
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{16, 32, 8}, {37, 29, 53},
                         {128, 32, 16}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float beta : {1.f, 0.5f}) {
          Vec a = random_vec(size_t(m * k), 1), b = random_vec(size_t(k * n), 2);
          Vec y = random_vec(size_t(m * n), 3), ref(y.size());
          ref_matmul(a.data(), b.data(), ref.data(), m, n, k, ta, tb);
          for (size_t i = 0; i < ref.size(); ++i)
            ref[i] = 0.75f * ref[i] + beta * y[i];
          const int64_t cs[2] = {m, n};
          pipert_gemm_f32(ctx.ctx, a.data(), b.data(), y.data(), 2, cs, m, n, k, ta, tb, 0.75f,
                          beta, y.data());
          expect_close(y, ref, 1e-4, "gemm in place");
        }
}

// pipe-lower-to-runtime's SGD fused into a weight gradient's Gemm: C = the
// weight, alpha = -lr, beta = 1, written in place. It must land within
// rounding of the separate gradient and update (pipert_gemm_f32 without C,
// then pipert_sgd_f32), on every transpose and through both libraries'
// shapes; where pipert's own kernel runs the product (small products) it
// adds -lr times its sum into the weight in one rounding, as the update
// does, so the bits are the same (the one-device program against the
// pipeline stages, which update apart from their backward).
TEST(Gemm, FusedSgdUpdateMatchesTheSeparateUpdate) {
  Ctx ctx;
  const float lr = 0.05f;
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{64, 32, 24}, {10, 64, 24},
                         {37, 29, 53}, {128, 48, 96}, {256, 128, 64}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        Vec a = random_vec(size_t(m * k), 1), b = random_vec(size_t(k * n), 2);
        Vec w = random_vec(size_t(m * n), 3), g(w.size()), want(w.size());
        pipert_gemm_f32(ctx.ctx, a.data(), b.data(), nullptr, 0, nullptr, m, n, k, ta, tb, 1.f,
                        1.f, g.data());
        pipert_sgd_f32(ctx.ctx, lr, 0.f, w.data(), g.data(), int64_t(w.size()), want.data());
        const int64_t cs[2] = {m, n};
        pipert_gemm_f32(ctx.ctx, a.data(), b.data(), w.data(), 2, cs, m, n, k, ta, tb, -lr, 1.f,
                        w.data());
#ifndef PIPERT_TEST_CUDA_DEVICE_SHIM_H
        const bool small = pipert::cpu::small_gemm_eligible(tb, m, n, k);
#else
        const bool small = false;
#endif
        for (size_t i = 0; i < w.size(); ++i) {
#ifndef PIPERT_TEST_CUDA_DEVICE_SHIM_H
          if (small) {
            ASSERT_EQ(w[i], want[i]) << m << "x" << n << "x" << k << " ta " << ta << " tb " << tb
                                     << " at " << i;
            continue;
          }
#endif
          // The libraries may scale an operand by alpha before the products
          // (oneDNN packs alpha A): a few roundings of the update apart.
          ASSERT_NEAR(w[i], want[i], 1e-6f * (std::fabs(want[i]) + lr * std::fabs(g[i])))
              << m << "x" << n << "x" << k << " ta " << ta << " tb " << tb << " small " << small
              << " at " << i;
        }
      }
}

// pipert_sgemm's leading dimensions, alpha and beta on every transpose,
// over the shapes where its kernels change: pipert's small kernel (rows
// blocks of 8 or 4, 32-column blocks, partial last blocks) below 128K
// multiply-adds, oneDNN above. CTest runs it on each library too.
TEST(Gemm, ShapesStridesAlphaBeta) {
  Ctx ctx;
  const int64_t shapes[][3] = {{1, 1, 1},    {16, 96, 32},  {16, 32, 128}, {8, 8, 8},
                               {7, 33, 5},   {13, 47, 19},  {9, 16, 64},   {32, 96, 16},
                               {17, 65, 31}, {64, 96, 48},  {3, 200, 7},   {70, 50, 100}};
  for (const auto &sh : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float beta : {0.f, 0.5f}) {
          const int64_t m = sh[0], n = sh[1], k = sh[2], pad = 3;
          const int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
          Vec a = random_vec(size_t((ta ? k : m) * lda), 11);
          Vec b = random_vec(size_t((tb ? n : k) * ldb), 12);
          Vec c0 = random_vec(size_t(m * ldc), 13), c = c0;
          if (beta == 0.f) // beta 0 never reads C: NaN there stays out
            for (int64_t i = 0; i < m; ++i)
              c[size_t(i * ldc)] = NAN;
          pipert_sgemm(ctx.ctx, ta, tb, m, n, k, 1.5f, a.data(), lda, b.data(), ldb, beta,
                       c.data(), ldc);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < ldc; ++j) {
              const size_t at = size_t(i * ldc + j);
              if (j >= n) { // the padding is left alone
                ASSERT_EQ(c[at], c0[at]) << m << "x" << n << "x" << k << " pad " << j;
                continue;
              }
              double s = 0;
              for (int64_t p = 0; p < k; ++p)
                s += double(ta ? a[size_t(p * lda + i)] : a[size_t(i * lda + p)]) *
                     double(tb ? b[size_t(j * ldb + p)] : b[size_t(p * ldb + j)]);
              const double want = 1.5 * s + double(beta) * double(c0[at]);
              ASSERT_NEAR(c[at], want, 1e-5 * (1 + std::fabs(want)))
                  << m << "x" << n << "x" << k << " ta " << ta << " tb " << tb << " beta "
                  << beta << " at (" << i << ", " << j << ")";
            }
        }
}

// A bias's gradient (only leading axes reduced) is summed 16 columns at a
// time in registers: each column's sum must be the one row by row into dx
// gives, bit for bit, at widths below, at and past 16, with negative zeros.
TEST(ReduceToShape, LeadingAxesSumRowByRow) {
  Ctx c;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{16, 32}, {32}},   {{16, 128}, {128}}, {{3, 5, 37}, {5, 37}}, {{9, 7}, {7}},
      {{2, 8, 96}, {96}}, {{5, 16}, {5, 16}}, {{1, 40}, {40}},       {{4, 3, 17}, {3, 17}},
      // 128 columns a pass, then 32, then 16, then the rest: a GPT layer's
      // fc1 bias (1024), and a width that takes every path (600).
      {{64, 1024}, {1024}}, {{3, 2, 300}, {2, 300}}, {{7, 160}, {160}}};
  for (const auto &[ds, xs] : cases) {
    int64_t nd = 1, nx = 1;
    for (int64_t d : ds)
      nd *= d;
    for (int64_t d : xs)
      nx *= d;
    std::vector<float> dy(static_cast<size_t>(nd));
    for (int64_t i = 0; i < nd; ++i)
      dy[size_t(i)] = i % 11 == 3 ? -0.f : u(rng) * (i % 5 == 0 ? 1e4f : 1.f);
    std::vector<float> want(static_cast<size_t>(nx), 0.f), got(static_cast<size_t>(nx), 7.f);
    for (int64_t r = 0; r < nd / nx; ++r)
      for (int64_t i = 0; i < nx; ++i)
        want[size_t(i)] += dy[size_t(r * nx + i)];
    pipert_reduce_to_shape_f32(c.ctx, dy.data(), int64_t(ds.size()), ds.data(),
                               int64_t(xs.size()), xs.data(), got.data());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), size_t(nx) * sizeof(float)), 0)
        << ds.size() << "-d gradient of " << nd << " to " << nx;
  }
}

// The small kernel broadcasts A's element as it is (a splat, not 0 + a):
// products of -0.0 stay -0.0, and sums that start at +0.0 keep them out,
// so an all-zero product is +0.0 as with the libraries (and as before).
TEST(Gemm, NegativeZerosSumToPositiveZero) {
  Ctx ctx;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const int64_t m = 16, n = 32, k = 8;
      Vec a(size_t(m * k), -0.f), b(size_t(k * n), 1.f), c(size_t(m * n), 7.f);
      pipert_sgemm(ctx.ctx, ta, tb, m, n, k, 1.f, a.data(), ta ? m : k, b.data(), tb ? k : n,
                   0.f, c.data(), n);
      for (float v : c)
        ASSERT_TRUE(v == 0.f && !std::signbit(v)) << "ta " << ta << " tb " << tb << ": " << v;
    }
}

TEST(MatMul, BatchBroadcastAndVectors) {
  Ctx ctx;
  // (3, 1, 4, 5) @ (2, 5, 6) -> (3, 2, 4, 6): A broadcast over B's batch.
  const int64_t as[4] = {3, 1, 4, 5}, bs[3] = {2, 5, 6};
  Vec a = random_vec(60, 4), b = random_vec(60, 5), y(3 * 2 * 24), ref(24);
  pipert_matmul_f32(ctx.ctx, a.data(), 4, as, b.data(), 3, bs, y.data());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      ref_matmul(a.data() + i * 20, b.data() + j * 30, ref.data(), 4, 6, 5, false, false);
      expect_close(Vec(y.begin() + (i * 2 + j) * 24, y.begin() + (i * 2 + j + 1) * 24), ref, 1e-5,
                   "batched matmul");
    }
  // (5) @ (2, 5, 3) -> (2, 3); (2, 4, 5) @ (5) -> (2, 4)
  const int64_t vs[1] = {5}, b3[3] = {2, 5, 3}, a3[3] = {2, 4, 5};
  Vec v = random_vec(5, 6), yv(6), yw(8);
  pipert_matmul_f32(ctx.ctx, v.data(), 1, vs, b.data(), 3, b3, yv.data());
  for (int j = 0; j < 2; ++j) {
    Vec r(3);
    ref_matmul(v.data(), b.data() + j * 15, r.data(), 1, 3, 5, false, false);
    expect_close(Vec(yv.begin() + j * 3, yv.begin() + j * 3 + 3), r, 1e-5, "vector @ batch");
  }
  pipert_matmul_f32(ctx.ctx, a.data(), 3, a3, v.data(), 1, vs, yw.data());
  for (int j = 0; j < 2; ++j) {
    Vec r(4);
    ref_matmul(a.data() + j * 20, v.data(), r.data(), 4, 1, 5, false, false);
    expect_close(Vec(yw.begin() + j * 4, yw.begin() + j * 4 + 4), r, 1e-5, "batch @ vector");
  }
}

// A batched MatMul with transposed operands (attention's heads: the
// small kernel's products in one call) against one pipert_sgemm a product
// at the batch offsets numpy's broadcast gives: the same bits (on the CPU),
// and within
// float rounding of a double reference. Shapes: 8 x 8 heads in every
// transpose, a tail of rows (m = 13), partial column blocks (n = 24), a
// transposed panel too large for the stack (48 x 40), and broadcast batches.
TEST(MatMul, BatchedSmallProductsBitForBitWithOneGemmEach) {
  Ctx ctx;
  struct Case {
    std::vector<int64_t> a_batch, b_batch;
    int64_t m, n, k;
  } cases[] = {{{2, 4}, {2, 4}, 8, 8, 8},
               {{3}, {3}, 13, 24, 7},
               {{2}, {2}, 9, 48, 40},
               {{2, 1}, {3}, 8, 16, 16},
               {{1}, {4}, 5, 8, 8}};
  for (const Case &c : cases)
    for (int ta : {0, 1})
      for (int tb : {0, 1}) {
        SCOPED_TRACE("m n k " + std::to_string(c.m) + " " + std::to_string(c.n) + " " +
                     std::to_string(c.k) + " ta " + std::to_string(ta) + " tb " +
                     std::to_string(tb));
        std::vector<int64_t> as = c.a_batch, bs = c.b_batch;
        as.push_back(ta ? c.k : c.m);
        as.push_back(ta ? c.m : c.k);
        bs.push_back(tb ? c.n : c.k);
        bs.push_back(tb ? c.k : c.n);
        int64_t na = 1, nb = 1;
        for (int64_t d : c.a_batch)
          na *= d;
        for (int64_t d : c.b_batch)
          nb *= d;
        // The output batch: the broadcast of the two (same rank here, or
        // A's one axis against B's).
        std::vector<int64_t> batch;
        const size_t rank = std::max(c.a_batch.size(), c.b_batch.size());
        for (size_t d = 0; d < rank; ++d) {
          const int64_t x = d + c.a_batch.size() >= rank ? c.a_batch[d + c.a_batch.size() - rank] : 1;
          const int64_t y = d + c.b_batch.size() >= rank ? c.b_batch[d + c.b_batch.size() - rank] : 1;
          batch.push_back(std::max(x, y));
        }
        int64_t nbatch = 1;
        for (int64_t d : batch)
          nbatch *= d;
        const int64_t sa = c.m * c.k, sb = c.k * c.n, sy = c.m * c.n;
        Vec a = random_vec(size_t(na * sa), 31), b = random_vec(size_t(nb * sb), 32);
        Vec y(static_cast<size_t>(nbatch * sy), -7.f), one(static_cast<size_t>(sy)), ref(static_cast<size_t>(sy));
        pipert_matmul_t_f32(ctx.ctx, a.data(), int64_t(as.size()), as.data(), ta, b.data(),
                            int64_t(bs.size()), bs.data(), tb, y.data());
        for (int64_t bi = 0; bi < nbatch; ++bi) {
          // bi's index per axis, and each operand's batch index.
          int64_t rest = bi, ia = 0, ib = 0, stride_a = 1, stride_b = 1;
          for (size_t d = rank; d-- > 0;) {
            const int64_t idx = rest % batch[d];
            rest /= batch[d];
            const size_t da = d + c.a_batch.size(), db = d + c.b_batch.size();
            if (da >= rank) {
              const int64_t extent = c.a_batch[da - rank];
              ia += (extent == 1 ? 0 : idx) * stride_a;
              stride_a *= extent;
            }
            if (db >= rank) {
              const int64_t extent = c.b_batch[db - rank];
              ib += (extent == 1 ? 0 : idx) * stride_b;
              stride_b *= extent;
            }
          }
          const float *pa = a.data() + ia * sa, *pb = b.data() + ib * sb;
          pipert_sgemm(ctx.ctx, ta, tb, c.m, c.n, c.k, 1.f, pa, ta ? c.m : c.k, pb,
                       tb ? c.k : c.n, 0.f, one.data(), c.n);
          ref_matmul(pa, pb, ref.data(), c.m, c.n, c.k, ta, tb);
          for (int64_t i = 0; i < sy; ++i) {
#ifndef PIPERT_TEST_CUDA_DEVICE_SHIM_H
            ASSERT_EQ(y[size_t(bi * sy + i)], one[size_t(i)]) << "product " << bi << " at " << i;
#else
            // cuBLAS's strided batch may pick another kernel than one GEMM.
            ASSERT_NEAR(y[size_t(bi * sy + i)], ref[size_t(i)],
                        1e-5 * (1 + std::fabs(ref[size_t(i)])))
                << "product " << bi << " at " << i;
#endif
            ASSERT_NEAR(one[size_t(i)], ref[size_t(i)], 1e-5 * (1 + std::fabs(ref[size_t(i)])))
                << "product " << bi << " at " << i;
          }
        }
      }
}

TEST(Conv, GroupedMatchesDirectLoop) {
  Ctx ctx(2);
  const int64_t xs[4] = {2, 6, 9, 8}, ws[4] = {4, 3, 3, 2}, pads[4] = {1, 2, 0, 1};
  const int64_t st[2] = {2, 1}, dl[2] = {1, 2}, g = 2;
  const int64_t oh = (9 + 1 + 0 - 3) / 2 + 1, ow = (8 + 2 + 1 - 3) / 1 + 1;
  Vec x = random_vec(2 * 6 * 9 * 8, 7), w = random_vec(4 * 3 * 3 * 2, 8), b = random_vec(4, 9);
  Vec y(static_cast<size_t>(2 * 4 * oh * ow)), ref(y.size());
  pipert_conv2d_f32(ctx.ctx, x.data(), xs, w.data(), ws, b.data(), pads, st, dl, g, y.data());
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t m = 0; m < 4; ++m)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double s = b[static_cast<size_t>(m)];
          const int64_t gi = m / 2;
          for (int64_t c = 0; c < 3; ++c)
            for (int64_t i = 0; i < 3; ++i)
              for (int64_t j = 0; j < 2; ++j) {
                int64_t iy = oy * 2 - 1 + i, ix = ox - 2 + j * 2;
                if (iy < 0 || iy >= 9 || ix < 0 || ix >= 8)
                  continue;
                s += double(x[static_cast<size_t>(((n * 6 + gi * 3 + c) * 9 + iy) * 8 + ix)]) *
                     w[static_cast<size_t>(((m * 3 + c) * 3 + i) * 2 + j)];
              }
          ref[static_cast<size_t>(((n * 4 + m) * oh + oy) * ow + ox)] = float(s);
        }
  expect_close(y, ref, 1e-5, "conv");
}

// Stride 1 with the output as wide as the input ("same" padding: im2col
// copies each tap's plane shifted in one piece and zeroes the wrapped
// columns, col2im adds it back in one piece): the forward, the weight
// gradient and the input gradient against direct loops. 3 x 3
// pad 1 on the example CNN's 12 x 12 and 6 x 6, 5 x 5 pad 2 on a 2 x 3 image
// (taps wholly outside), a dilated 3 x 3, uneven pads that still keep the
// width (and not the height), groups.
TEST(Conv, SamePaddingMatchesDirectLoop) {
  Ctx ctx;
  struct Case {
    int64_t n, c, h, w, m, kh, kw, group;
    int64_t pads[4];
    int64_t dil[2];
  } cases[] = {{2, 1, 12, 12, 8, 3, 3, 1, {1, 1, 1, 1}, {1, 1}},
               {2, 8, 6, 6, 16, 3, 3, 1, {1, 1, 1, 1}, {1, 1}},
               {1, 2, 2, 3, 3, 5, 5, 1, {2, 2, 2, 2}, {1, 1}},
               {1, 3, 7, 9, 2, 3, 3, 1, {2, 2, 2, 2}, {2, 2}},
               {2, 4, 5, 7, 4, 2, 3, 2, {0, 2, 1, 0}, {1, 1}}};
  for (const Case &k : cases) {
    SCOPED_TRACE("image " + std::to_string(k.h) + "x" + std::to_string(k.w) + " kernel " +
                 std::to_string(k.kh) + "x" + std::to_string(k.kw));
    const int64_t cg = k.c / k.group, mg = k.m / k.group;
    const int64_t oh = k.h + k.pads[0] + k.pads[2] - (k.kh - 1) * k.dil[0];
    const int64_t ow = k.w + k.pads[1] + k.pads[3] - (k.kw - 1) * k.dil[1];
    ASSERT_EQ(ow, k.w);
    const int64_t xs[4] = {k.n, k.c, k.h, k.w}, ws[4] = {k.m, cg, k.kh, k.kw};
    const int64_t st[2] = {1, 1};
    Vec x = random_vec(size_t(k.n * k.c * k.h * k.w), 21);
    Vec w = random_vec(size_t(k.m * cg * k.kh * k.kw), 22);
    Vec dy = random_vec(size_t(k.n * k.m * oh * ow), 23);
    Vec y(size_t(k.n * k.m * oh * ow)), ref(y.size());
    Vec dw(w.size()), dw_ref(w.size(), 0.f), dx(x.size(), 5.f), dx_ref(x.size(), 0.f);
    pipert_conv2d_f32(ctx.ctx, x.data(), xs, w.data(), ws, nullptr, k.pads, st, k.dil, k.group,
                      y.data());
    pipert_conv2d_grad_weight_f32(ctx.ctx, x.data(), xs, dy.data(), ws, k.pads, st, k.dil,
                                  k.group, dw.data(), 0);
    pipert_conv2d_grad_input_f32(ctx.ctx, dy.data(), w.data(), ws, xs, k.pads, st, k.dil,
                                 k.group, dx.data());
    std::vector<double> acc(dw.size(), 0.0), acc_x(dx.size(), 0.0);
    for (int64_t n = 0; n < k.n; ++n)
      for (int64_t m = 0; m < k.m; ++m)
        for (int64_t oy = 0; oy < oh; ++oy)
          for (int64_t ox = 0; ox < ow; ++ox) {
            double s = 0;
            const int64_t gi = m / mg;
            const double g = dy[size_t(((n * k.m + m) * oh + oy) * ow + ox)];
            for (int64_t c = 0; c < cg; ++c)
              for (int64_t i = 0; i < k.kh; ++i)
                for (int64_t j = 0; j < k.kw; ++j) {
                  const int64_t iy = oy - k.pads[0] + i * k.dil[0];
                  const int64_t ix = ox - k.pads[1] + j * k.dil[1];
                  if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w)
                    continue;
                  const double xv = x[size_t(((n * k.c + gi * cg + c) * k.h + iy) * k.w + ix)];
                  const size_t wi = size_t(((m * cg + c) * k.kh + i) * k.kw + j);
                  s += xv * w[wi];
                  acc[wi] += xv * g;
                  acc_x[size_t(((n * k.c + gi * cg + c) * k.h + iy) * k.w + ix)] += g * w[wi];
                }
            ref[size_t(((n * k.m + m) * oh + oy) * ow + ox)] = float(s);
          }
    for (size_t i = 0; i < acc.size(); ++i)
      dw_ref[i] = float(acc[i]);
    for (size_t i = 0; i < acc_x.size(); ++i)
      dx_ref[i] = float(acc_x[i]);
    expect_close(y, ref, 1e-5, "conv forward");
    expect_close(dw, dw_ref, 1e-5, "conv weight gradient");
    expect_close(dx, dx_ref, 1e-5, "conv input gradient");
  }
}

// A convolution's forward (with a bias), weight gradient (plain and
// accumulated onto 0.5) and input gradient against direct loops in double.
struct ConvSpec {
  int64_t n, c, h, w, m, kh, kw, sh, sw, dil, group;
  int64_t pads[4];
};

void check_conv(Ctx &ctx, const ConvSpec &k, uint32_t seed, const char *what) {
  const int64_t cg = k.c / k.group, mg = k.m / k.group;
  const int64_t oh = (k.h + k.pads[0] + k.pads[2] - (k.kh - 1) * k.dil - 1) / k.sh + 1;
  const int64_t ow = (k.w + k.pads[1] + k.pads[3] - (k.kw - 1) * k.dil - 1) / k.sw + 1;
  const int64_t xs[4] = {k.n, k.c, k.h, k.w}, ws[4] = {k.m, cg, k.kh, k.kw};
  const int64_t st[2] = {k.sh, k.sw}, dl[2] = {k.dil, k.dil};
  Vec x = random_vec(size_t(k.n * k.c * k.h * k.w), seed);
  Vec w = random_vec(size_t(k.m * cg * k.kh * k.kw), seed + 1),
      b = random_vec(size_t(k.m), seed + 2);
  Vec dy = random_vec(size_t(k.n * k.m * oh * ow), seed + 3);
  Vec y(dy.size(), -3.f), ref(dy.size());
  Vec dw(w.size(), -3.f), dw_acc(w.size(), 0.5f), dx(x.size(), 5.f);
  pipert_conv2d_f32(ctx.ctx, x.data(), xs, w.data(), ws, b.data(), k.pads, st, dl, k.group,
                    y.data());
  pipert_conv2d_grad_weight_f32(ctx.ctx, x.data(), xs, dy.data(), ws, k.pads, st, dl, k.group,
                                dw.data(), 0);
  pipert_conv2d_grad_weight_f32(ctx.ctx, x.data(), xs, dy.data(), ws, k.pads, st, dl, k.group,
                                dw_acc.data(), 1);
  pipert_conv2d_grad_input_f32(ctx.ctx, dy.data(), w.data(), ws, xs, k.pads, st, dl, k.group,
                               dx.data());
  std::vector<double> acc(w.size(), 0.0), acc_x(x.size(), 0.0);
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t o = 0; o < k.m; ++o)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t gi = o / mg;
          double s = b[size_t(o)];
          const double g = dy[size_t(((n * k.m + o) * oh + oy) * ow + ox)];
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t i = 0; i < k.kh; ++i)
              for (int64_t j = 0; j < k.kw; ++j) {
                const int64_t iy = oy * k.sh - k.pads[0] + i * k.dil;
                const int64_t ix = ox * k.sw - k.pads[1] + j * k.dil;
                if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w)
                  continue;
                const size_t xi = size_t(((n * k.c + gi * cg + c) * k.h + iy) * k.w + ix);
                const size_t wi = size_t(((o * cg + c) * k.kh + i) * k.kw + j);
                s += double(x[xi]) * w[wi];
                acc[wi] += double(x[xi]) * g;
                acc_x[xi] += g * w[wi];
              }
          ref[size_t(((n * k.m + o) * oh + oy) * ow + ox)] = float(s);
        }
  Vec dw_ref(w.size()), dw_acc_ref(w.size()), dx_ref(x.size());
  for (size_t i = 0; i < acc.size(); ++i) {
    dw_ref[i] = float(acc[i]);
    dw_acc_ref[i] = float(acc[i] + 0.5);
  }
  for (size_t i = 0; i < acc_x.size(); ++i)
    dx_ref[i] = float(acc_x[i]);
  const std::string label(what);
  expect_close(y, ref, 1e-5, (label + "forward").c_str());
  expect_close(dw, dw_ref, 1e-5, (label + "weight gradient").c_str());
  expect_close(dw_acc, dw_acc_ref, 1e-5, (label + "weight gradient, accumulated").c_str());
  expect_close(dx, dx_ref, 1e-5, (label + "input gradient").c_str());
}

// Depthwise convolutions (one input and one output channel per group) run
// directly on the planes: the forward, the weight gradient (accumulated
// too) and the input gradient against direct loops in double, for MobileNet's
// 3 x 3 stride 1 and 2, EfficientNet's 5 x 5 stride 2, ConvNeXt's 7 x 7,
// a dilation, uneven pads, taps wholly in the padding, and a channel
// multiplier of 2 (two outputs per group: the GEMM path).
TEST(Conv, DepthwiseMatchesDirectLoop) {
  Ctx ctx;
  struct Case {
    int64_t n, c, h, w, mult, kh, kw, sh, sw, dil;
    int64_t pads[4];
  } cases[] = {{2, 5, 9, 10, 1, 3, 3, 1, 1, 1, {1, 1, 1, 1}},
               {2, 3, 9, 10, 1, 3, 3, 2, 2, 1, {1, 1, 1, 1}},
               {1, 4, 11, 13, 1, 5, 5, 2, 2, 1, {2, 2, 2, 2}},
               {2, 2, 8, 8, 1, 7, 7, 1, 1, 1, {3, 3, 3, 3}},
               {1, 3, 7, 9, 1, 3, 3, 1, 1, 2, {2, 2, 2, 2}},
               {1, 2, 6, 7, 1, 3, 2, 2, 1, 1, {0, 2, 1, 0}},
               {1, 2, 2, 3, 1, 5, 5, 1, 1, 1, {2, 2, 2, 2}},
               {2, 3, 6, 6, 2, 3, 3, 1, 1, 1, {1, 1, 1, 1}},
               // ConvNeXt's 7 x 7 over planes of 16, 21 (a vector and a
               // masked tail) and 2 columns.
               {2, 3, 16, 16, 1, 7, 7, 1, 1, 1, {3, 3, 3, 3}},
               {1, 2, 5, 21, 1, 7, 7, 1, 1, 1, {3, 3, 3, 3}},
               {2, 4, 2, 2, 1, 7, 7, 1, 1, 1, {3, 3, 3, 3}},
               // Rows of two and four registers (up to 64 columns), and
               // one wider than that (the per-tap loop).
               {1, 2, 6, 30, 1, 3, 3, 1, 1, 1, {1, 1, 1, 1}},
               {1, 2, 5, 56, 1, 7, 7, 1, 1, 1, {3, 3, 3, 3}},
               {1, 2, 4, 70, 1, 5, 5, 1, 1, 1, {2, 2, 2, 2}}};
  for (const Case &k : cases) {
    SCOPED_TRACE("image " + std::to_string(k.h) + "x" + std::to_string(k.w) + " kernel " +
                 std::to_string(k.kh) + "x" + std::to_string(k.kw) + " stride " +
                 std::to_string(k.sh));
    check_conv(ctx, {k.n, k.c, k.h, k.w, k.c * k.mult, k.kh, k.kw, k.sh, k.sw, k.dil, k.c,
                     {k.pads[0], k.pads[1], k.pads[2], k.pads[3]}},
               31, "depthwise ");
  }
}

// Planes of fewer than 256 outputs run several samples side by side in one
// GEMM (conv.cpp, conv_samples): ResNet's deep stages (2 x 2 and 4 x 4
// outputs), a pointwise convolution over 3 x 3, strides, a dilation, uneven
// pads, groups, and 10 x 10 outputs over 5 samples, which take three
// samples and then two. The last three cases (32 and 48 output channels
// over planes of 16 outputs and more, one grouped) take oneDNN's primitive
// under the default PIPERT_CONV (conv_onednn.cpp); CTest runs the test
// with every convolution on each path too. The forward (with a bias), the
// weight gradient (and accumulated) and the input gradient against direct
// loops in double.
TEST(Conv, GeometriesMatchDirectLoop) {
  Ctx ctx;
  const ConvSpec cases[] = {{8, 16, 2, 2, 12, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}},
               {3, 8, 8, 8, 8, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}},
               {4, 6, 3, 3, 10, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}},
               {5, 4, 7, 6, 6, 1, 1, 2, 2, 1, 2, {0, 0, 0, 0}},
               {5, 3, 10, 10, 4, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}},
               {3, 6, 9, 8, 4, 3, 2, 2, 1, 2, 2, {1, 2, 0, 1}},
               {2, 4, 4, 4, 4, 3, 3, 1, 1, 1, 1, {2, 0, 1, 2}},
               {2, 16, 8, 8, 32, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}},
               {3, 3, 17, 15, 48, 7, 7, 2, 2, 1, 1, {3, 3, 2, 3}},
               {2, 8, 9, 9, 32, 3, 3, 1, 1, 2, 2, {2, 1, 2, 1}}};
  for (const ConvSpec &k : cases) {
    SCOPED_TRACE("batch " + std::to_string(k.n) + " image " + std::to_string(k.h) + "x" +
                 std::to_string(k.w) + " kernel " + std::to_string(k.kh) + "x" +
                 std::to_string(k.kw) + " stride " + std::to_string(k.sh) + " group " +
                 std::to_string(k.group));
    check_conv(ctx, k, 41, "");
  }
}

// A max pool's input: random, with +0 every 5th element, -0 every 7th and
// NaN every nan_every-th (ties of zeros, NaNs first and later in windows).
Vec pool_input(size_t n, unsigned seed, size_t nan_every) {
  Vec x = random_vec(n, seed);
  for (size_t i = 0; i < n; ++i) {
    if (i % 5 == 0)
      x[i] = 0.f;
    if (i % 7 == 0)
      x[i] = -0.f;
    if (i % nan_every == 0)
      x[i] = NAN;
  }
  return x;
}

// A 2 x 2 max pool with every window inside the plane and no indices
// takes a path of its own (the max alone, as maxss): the same values as the
// general path (asked for indices), bit for bit, with ties of -0 and +0,
// NaNs first and later in a window, strides 2 and 1, a dilation, and an odd
// plane whose last row and column no window reaches.
TEST(MaxPool, TwoByTwoWithoutIndicesBitForBitWithTheGeneralPath) {
  Ctx ctx;
  struct Case {
    int64_t h, w, stride, dil;
  } cases[] = {{12, 12, 2, 1}, {7, 9, 2, 1}, {6, 6, 1, 1}, {8, 7, 1, 2}};
  for (const Case &c : cases) {
    const int64_t xs[4] = {2, 3, c.h, c.w}, k[2] = {2, 2}, pads[4] = {0, 0, 0, 0};
    const int64_t st[2] = {c.stride, c.stride}, dl[2] = {c.dil, c.dil};
    const int64_t oh = (c.h - (c.dil + 1)) / c.stride + 1, ow = (c.w - (c.dil + 1)) / c.stride + 1;
    Vec x = pool_input(size_t(2 * 3 * c.h * c.w), 31, 23);
    Vec fast(size_t(2 * 3 * oh * ow)), general(fast.size());
    std::vector<int64_t> idx(fast.size());
    pipert_maxpool2d_f32(ctx.ctx, x.data(), xs, k, pads, st, dl, 0, fast.data(), nullptr);
    pipert_maxpool2d_f32(ctx.ctx, x.data(), xs, k, pads, st, dl, 0, general.data(), idx.data());
    for (size_t i = 0; i < fast.size(); ++i)
      ASSERT_EQ(0, std::memcmp(&fast[i], &general[i], sizeof(float)))
          << c.h << "x" << c.w << " stride " << c.stride << " at " << i << ": " << fast[i]
          << " against " << general[i];
  }
}

// Max pooling without indices (training's) runs the interior windows of a
// row 16 at a time (conv.cpp, window_max16), planes in parallel; asked for
// indices it runs one window at a time. Both the same bits: the maxima,
// and the gradient against routing dy through the indices (to the first
// maximum, windows in order), with -0 / +0 ties and NaNs first and later
// in windows. ResNet's 3 x 3 stride-2 pool, stride 1 (plain loads), 3
// (gathers), a dilation, ceil mode, an uneven kernel and pads, and a row
// too narrow for 16 windows; on 1 and 3 threads.
TEST(MaxPool, SixteenWindowsAtATimeBitForBitWithOneAtATime) {
  struct Case {
    int64_t h, w, kh, kw, sh, sw, dil, pt, pl, pb, pr;
    int ceil;
  } cases[] = {{32, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0}, {20, 45, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0},
               {19, 70, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1}, {16, 80, 3, 3, 2, 2, 2, 2, 2, 2, 2, 0},
               {9, 57, 2, 5, 2, 2, 1, 0, 2, 1, 2, 1},  {7, 12, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0}};
  for (int threads : {1, 3})
    for (const Case &c : cases) {
      SCOPED_TRACE(std::to_string(c.h) + "x" + std::to_string(c.w) + " kernel " +
                   std::to_string(c.kh) + "x" + std::to_string(c.kw) + " stride " +
                   std::to_string(c.sw) + " threads " + std::to_string(threads));
      Ctx ctx(threads);
      const int64_t xs[4] = {2, 5, c.h, c.w}, k[2] = {c.kh, c.kw};
      const int64_t pads[4] = {c.pt, c.pl, c.pb, c.pr}, st[2] = {c.sh, c.sw},
                    dl[2] = {c.dil, c.dil};
      const int64_t oh = pipert_pool_output_dim(c.h, c.kh, c.pt, c.pb, c.sh, c.dil, c.ceil);
      const int64_t ow = pipert_pool_output_dim(c.w, c.kw, c.pl, c.pr, c.sw, c.dil, c.ceil);
      Vec x = pool_input(size_t(2 * 5 * c.h * c.w), 37, 29);
      Vec fast(size_t(2 * 5 * oh * ow)), general(fast.size());
      std::vector<int64_t> idx(fast.size());
      pipert_maxpool2d_f32(ctx.ctx, x.data(), xs, k, pads, st, dl, c.ceil, fast.data(), nullptr);
      pipert_maxpool2d_f32(ctx.ctx, x.data(), xs, k, pads, st, dl, c.ceil, general.data(),
                           idx.data());
      for (size_t i = 0; i < fast.size(); ++i)
        ASSERT_EQ(0, std::memcmp(&fast[i], &general[i], sizeof(float)))
            << "y at " << i << ": " << fast[i] << " against " << general[i];
      Vec dy = random_vec(fast.size(), 38), dx(x.size(), 7.f), ref(x.size(), 0.f);
      for (size_t i = 0; i < idx.size(); ++i)
        if (idx[i] >= 0)
          ref[size_t(idx[i])] += dy[i];
      pipert_maxpool2d_grad_f32(ctx.ctx, x.data(), xs, dy.data(), k, pads, st, dl, c.ceil,
                                dx.data());
      for (size_t i = 0; i < dx.size(); ++i)
        ASSERT_EQ(0, std::memcmp(&dx[i], &ref[i], sizeof(float)))
            << "dx at " << i << ": " << dx[i] << " against " << ref[i];
    }
}

TEST(Dropout, DeterministicPerSeedAndUnbiased) {
  const int64_t n = 200000;
  Vec x(static_cast<size_t>(n), 1.f), y1(static_cast<size_t>(n)), y2(static_cast<size_t>(n));
  std::vector<uint8_t> m1(static_cast<size_t>(n)), m2(static_cast<size_t>(n));
  {
    Ctx a(1, 11), b(1, 11);
    pipert_dropout_f32(a.ctx, x.data(), n, 0.25f, 1, y1.data(), m1.data());
    pipert_dropout_f32(b.ctx, x.data(), n, 0.25f, 1, y2.data(), m2.data());
    EXPECT_EQ(m1, m2);
    // The next call of the same context draws a different mask.
    pipert_dropout_f32(a.ctx, x.data(), n, 0.25f, 1, y2.data(), m2.data());
    EXPECT_NE(m1, m2);
  }
  double kept = 0, mean = 0;
  for (int64_t i = 0; i < n; ++i) {
    kept += m1[static_cast<size_t>(i)];
    mean += y1[static_cast<size_t>(i)];
    EXPECT_EQ(y1[static_cast<size_t>(i)], m1[static_cast<size_t>(i)] ? 1.f / 0.75f : 0.f);
  }
  EXPECT_NEAR(kept / double(n), 0.75, 0.005);
  EXPECT_NEAR(mean / double(n), 1.0, 0.01);
}

// Erf against erf in double: within a few float ulp everywhere (verf of
// runtime/cpu/vmath.h on the CPU, erff on CUDA), +-1 far out, NaN kept.
// i * step for i in [lo, hi], then `extra`, then +inf, -inf and NaN (the
// last three), and `op` of them: the inputs of the accuracy tests below.
static std::pair<Vec, Vec> unary_on_grid(pipert_unary_op op, int lo, int hi, float step,
                                         std::initializer_list<float> extra) {
  Ctx ctx;
  Vec x;
  for (int i = lo; i <= hi; ++i)
    x.push_back(float(i) * step);
  x.insert(x.end(), extra.begin(), extra.end());
  for (float special : {INFINITY, -INFINITY, NAN})
    x.push_back(special);
  Vec y(x.size());
  pipert_unary_f32(ctx.ctx, op, x.data(), int64_t(x.size()), y.data());
  return {x, y};
}

// Relu is max(x, 0) with NaN kept, as PyTorch's (a NaN upstream must reach
// the loss, where pipe-run stops): it used to map NaN to 0, so a NaN weight
// before a Relu trained on with finite losses. Its gradient passes dy where
// x > 0 or x is NaN (threshold_backward's x <= 0 test).
TEST(Unary, ReluKeepsNaN) {
  auto [x, y] = unary_on_grid(PIPERT_UNARY_RELU, -40, 40, 0.25f, {-0.f, 1e-38f, -1e-38f});
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]))
      EXPECT_TRUE(std::isnan(y[i])) << "Relu(NaN) = " << y[i];
    else
      EXPECT_EQ(y[i], x[i] > 0.f ? x[i] : 0.f) << "at " << x[i];
  }
  Ctx ctx;
  const Vec gx = {NAN, -1.f, 0.f, -0.f, 2.f, INFINITY, -INFINITY}, dy(gx.size(), 3.f);
  Vec dx(gx.size());
  pipert_relu_grad_f32(ctx.ctx, gx.data(), dy.data(), int64_t(gx.size()), dx.data());
  EXPECT_EQ(dx, (Vec{3.f, 0.f, 0.f, 0.f, 3.f, 3.f, 0.f}));
}

// An odd function that saturates at +-1 (erf, tanh) against its double
// `exact` on unary_on_grid's x: exact zeros kept, |y| <= 1, the worst
// relative error below `tol`, +-1 at +-inf and NaN kept.
template <typename Exact>
static void expect_saturating_within(const Vec &x, const Vec &y, Exact exact, double tol) {
  double worst = 0;
  for (size_t i = 0; i + 3 < x.size(); ++i) {
    const double e = exact(double(x[i]));
    if (e == 0) {
      EXPECT_EQ(y[i], 0.f) << "at " << x[i];
      continue;
    }
    worst = std::max(worst, std::fabs(double(y[i]) - e) / std::fabs(e));
    ASSERT_LE(std::fabs(y[i]), 1.f) << "at " << x[i];
  }
  EXPECT_LT(worst, tol);
  EXPECT_EQ(y[x.size() - 3], 1.f);
  EXPECT_EQ(y[x.size() - 2], -1.f);
  EXPECT_TRUE(std::isnan(y[x.size() - 1]));
}

TEST(Elementwise, ErfWithinAFewUlp) {
  // [-6, 6], and tiny values of both signs.
  auto [x, y] = unary_on_grid(PIPERT_UNARY_ERF, -200000, 200000, 3e-5f,
                              {1e-30f, -1e-30f, 1e-12f, -1e-12f, 1e-6f, -1e-6f, 1e-3f, -1e-3f});
  expect_saturating_within(x, y, [](double v) { return std::erf(v); }, 5e-7);
}

// A finite mask fill (Swin's shifted windows add -100): the probabilities
// of the filled positions, exp(-100) ~ 4e-44 in exact arithmetic, are 0
// rather than subnormal (each later product with a subnormal operand cost
// a microcode assist), and the others are as before: Softmax on rows of 8
// (the short-row path) and 49, along a middle axis, and the fused
// attention's softmax with a float bias (short and long rows).
TEST(Softmax, FiniteFillGivesNoSubnormals) {
  Ctx ctx;
  auto check = [](const Vec &y, const char *what) {
    for (float v : y)
      ASSERT_TRUE(v == 0.f || v >= FLT_MIN) << what << ": subnormal " << v;
  };
  for (int64_t mid : {8, 49}) {
    const int64_t rows = 6, shape[2] = {rows, mid};
    Vec x(size_t(rows * mid));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t m = 0; m < mid; ++m)
        x[size_t(r * mid + m)] = float((r + m) % 5) * 0.1f + (m % 3 == 1 ? -100.f : 0.f);
    Vec y(x.size());
    pipert_softmax_f32(ctx.ctx, x.data(), 2, shape, 1, y.data());
    check(y, "last axis");
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int64_t m = 0; m < mid; ++m)
        sum += std::exp(double(x[size_t(r * mid + m)]));
      for (int64_t m = 0; m < mid; ++m) {
        const double want = std::exp(double(x[size_t(r * mid + m)])) / sum;
        EXPECT_NEAR(y[size_t(r * mid + m)], want, 1e-6 * want + 1e-37);
      }
    }
    // The same rows along the middle axis of (rows, mid, 1) -> (1, mid, rows).
    Vec xt(x.size()), yt(x.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t m = 0; m < mid; ++m)
        xt[size_t(m * rows + r)] = x[size_t(r * mid + m)];
    const int64_t shape3[3] = {1, mid, rows};
    pipert_softmax_f32(ctx.ctx, xt.data(), 3, shape3, 1, yt.data());
    check(yt, "middle axis");
  }
  for (int64_t t : {8, 49}) {
    // One (batch, head) pair, q = k = v of (t, 4), a -100 bias on every
    // third key.
    const int64_t dh = 4, st[12] = {t * dh, 0, dh, t * dh, 0, dh, t * dh, 0, dh, t * dh, 0, dh};
    Vec q(size_t(t * dh)), bias(size_t(t * t)), y(size_t(t * dh)), probs(size_t(t * t));
    for (size_t i = 0; i < q.size(); ++i)
      q[i] = float(i % 7) * 0.05f;
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < t; ++j)
        bias[size_t(i * t + j)] = j % 3 == 2 ? -100.f : 0.f;
    pipert_attention_f32(ctx.ctx, q.data(), q.data(), q.data(), st, 1, 1, 1, t, t, dh, 0.5f, 0,
                         0.f, nullptr, bias.data(), nullptr, y.data(), probs.data());
    check(probs, "fused attention");
    for (int64_t i = 0; i < t; ++i)
      EXPECT_EQ(probs[size_t(i * t + 2)], 0.f);
  }
}

// Concat and Split with chunks of a few elements (torch.stack on the last
// axis: rotary positions' interleaved pairs), which take a typed loop per
// input instead of a memcpy per chunk: against an index reference, for
// 1-, 2-, 4- and 8-byte elements, chunks of 1 to 3 elements of unequal
// inputs, and Split putting the rows back.
TEST(Concat, SmallChunksAgainstIndexReference) {
  Ctx ctx;
  const pipert_dtype types[4] = {PIPERT_U8, PIPERT_F16, PIPERT_F32, PIPERT_I64};
  for (pipert_dtype dt : types) {
    const size_t es = pipert_dtype_size(dt);
    for (int64_t inner : {1, 3}) {
      // (outer = 5 x 4) x (sizes 1, 2, 1) x inner.
      const int64_t outer = 20, sizes[3] = {1, 2, 1}, mid = 4;
      std::vector<std::vector<uint8_t>> in(3);
      uint8_t v = 1;
      for (int i = 0; i < 3; ++i) {
        in[size_t(i)].resize(size_t(outer * sizes[i] * inner) * es);
        for (auto &b : in[size_t(i)])
          b = v++;
      }
      const void *xs[3] = {in[0].data(), in[1].data(), in[2].data()};
      const int64_t shape[3] = {outer, mid, inner};
      std::vector<uint8_t> y(size_t(outer * mid * inner) * es, 0);
      pipert_concat(ctx.ctx, dt, 3, xs, sizes, 3, shape, 1, y.data());
      for (int64_t o = 0; o < outer; ++o) {
        int64_t at = 0;
        for (int i = 0; i < 3; ++i) {
          const size_t n = size_t(sizes[i] * inner) * es;
          ASSERT_EQ(0, std::memcmp(y.data() + size_t(o * mid * inner + at * inner) * es,
                                   in[size_t(i)].data() + size_t(o) * n, n))
              << "dtype " << int(dt) << " inner " << inner << " row " << o << " input " << i;
          at += sizes[i];
        }
      }
      std::vector<std::vector<uint8_t>> back(3);
      void *ys[3];
      for (int i = 0; i < 3; ++i) {
        back[size_t(i)].assign(in[size_t(i)].size(), 0);
        ys[i] = back[size_t(i)].data();
      }
      pipert_split(ctx.ctx, dt, y.data(), 3, shape, 1, 3, sizes, ys);
      for (int i = 0; i < 3; ++i)
        EXPECT_EQ(back[size_t(i)], in[size_t(i)]) << "dtype " << int(dt) << " input " << i;
    }
  }
}

// Pow by one constant exponent: 2, 1, 0, -1 and 0.5 are computed as the
// operations they are (vectorised loops; RMSNorm's x ** 2 had been a powf
// call an element, ~15 ns), within half an ulp of the double result, with
// pow's special values (0.5 of -0 is +0, of -inf +inf; 0 of NaN is 1);
// another exponent, and one per element, still go through powf; each
// element alone (the scalar broadcast) gives the same bits.
TEST(Elementwise, PowByConstantExponents) {
  Ctx ctx;
  std::mt19937 g(5);
  std::uniform_real_distribution<float> d(-40.f, 40.f);
  Vec x;
  for (int i = 0; i < 5000; ++i)
    x.push_back(d(g));
  for (float v : {0.f, -0.f, 1e-30f, -1e-30f, 1e30f, INFINITY, -INFINITY, NAN, 1.5f, -2.25f})
    x.push_back(v);
  const int64_t n = int64_t(x.size()), one = 1;
  for (float e : {2.f, 1.f, 0.f, -1.f, 0.5f, 3.7f, -2.f}) {
    Vec y(x.size());
    const int64_t shape[1] = {n};
    pipert_binary_f32(ctx.ctx, PIPERT_BINARY_POW, x.data(), 1, shape, &e, 0, &one, y.data());
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = std::pow(x[i], e);
      if (std::isnan(want) || std::isinf(want) || want == 0.f) {
        EXPECT_TRUE((std::isnan(want) && std::isnan(y[i])) ||
                    std::memcmp(&want, &y[i], sizeof want) == 0)
            << x[i] << " ** " << e << " = " << y[i] << ", want " << want;
        continue;
      }
      const double exact = std::pow(double(x[i]), double(e));
      EXPECT_LE(std::fabs(double(y[i]) - exact), 0.5 * std::fabs(std::nextafter(want, INFINITY) - want) + 1e-300 +
                                                      (e == 3.7f || e == -2.f ? std::fabs(exact) * 2e-7 : 0.0))
          << x[i] << " ** " << e << " = " << y[i];
    }
    // Each element alone: the same bits; and an exponent per element.
    Vec es(x.size(), e), y2(x.size());
    pipert_binary_f32(ctx.ctx, PIPERT_BINARY_POW, x.data(), 1, shape, es.data(), 1, shape,
                      y2.data());
    for (size_t i = 0; i < x.size(); ++i) {
      float yi;
      pipert_binary_f32(ctx.ctx, PIPERT_BINARY_POW, &x[i], 0, &one, &e, 0, &one, &yi);
      EXPECT_TRUE((std::isnan(yi) && std::isnan(y[i])) || std::memcmp(&yi, &y[i], 4) == 0)
          << x[i] << " ** " << e;
      EXPECT_TRUE((std::isnan(y2[i]) && std::isnan(y[i])) || std::memcmp(&y2[i], &y[i], 4) == 0)
          << x[i] << " ** " << e << " per element " << y2[i] << " vs " << y[i];
    }
  }
}

// The elementwise kernels that have a 16-lane body (Erf, Exp, the exact
// GELU and its gradient, Erf's gradient: verf16/vexp16 in
// runtime/cpu/vmath.h under AVX-512) give the bits of their scalar body:
// each element alone (n = 1 takes the scalar loop) against the whole
// array, over a grid, the clamps' edges, specials and random bit patterns.
TEST(Elementwise, VectorAndScalarPathsBitForBit) {
  Ctx ctx;
  std::mt19937 g(11);
  Vec x, dy;
  for (int i = -3000; i <= 3000; ++i)
    x.push_back(float(i) * 0.005f);
  for (float v : {4.f, -4.f, 3.9999998f, 88.8f, 88.72f, 88.9f, -104.f, -103.9f, -104.5f, 0.f,
                  -0.f, 1e-30f, -1e-30f, 1e-45f, INFINITY, -INFINITY, NAN, -NAN})
    x.push_back(v);
  for (int i = 0; i < 20000; ++i) {
    const uint32_t u = uint32_t(g());
    float v;
    std::memcpy(&v, &u, sizeof v);
    x.push_back(v);
  }
  std::uniform_real_distribution<float> d(-3.f, 3.f);
  for (size_t i = 0; i < x.size(); ++i)
    dy.push_back(d(g));
  const int64_t n = int64_t(x.size());
  auto same = [](float a, float b) {
    return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
  };
  struct Kernel {
    const char *name;
    std::function<void(const float *, const float *, int64_t, float *)> run;
  } kernels[] = {
      {"Erf", [&](const float *v, const float *, int64_t m,
                  float *o) { pipert_unary_f32(ctx.ctx, PIPERT_UNARY_ERF, v, m, o); }},
      {"Exp", [&](const float *v, const float *, int64_t m,
                  float *o) { pipert_unary_f32(ctx.ctx, PIPERT_UNARY_EXP, v, m, o); }},
      {"Gelu", [&](const float *v, const float *, int64_t m,
                   float *o) { pipert_activation_f32(ctx.ctx, PIPERT_ACTIVATION_GELU, 0.f, 0.f, v, m, o); }},
      {"GeluGrad", [&](const float *v, const float *gr, int64_t m, float *o) {
         pipert_activation_grad_f32(ctx.ctx, PIPERT_ACTIVATION_GELU, 0.f, 0.f, v, gr, m, o);
       }},
      {"ErfGrad", [&](const float *v, const float *gr, int64_t m,
                      float *o) { pipert_erf_grad_f32(ctx.ctx, v, gr, m, o); }},
      // Vectorised by the compiler from their scalar bodies (vmath_scalar.h).
      {"Tanh", [&](const float *v, const float *, int64_t m,
                   float *o) { pipert_unary_f32(ctx.ctx, PIPERT_UNARY_TANH, v, m, o); }},
      {"Sigmoid", [&](const float *v, const float *, int64_t m,
                      float *o) { pipert_unary_f32(ctx.ctx, PIPERT_UNARY_SIGMOID, v, m, o); }},
      {"GeluTanh", [&](const float *v, const float *, int64_t m, float *o) {
         pipert_activation_f32(ctx.ctx, PIPERT_ACTIVATION_GELU_TANH, 0.f, 0.f, v, m, o);
       }},
      {"HardSwish", [&](const float *v, const float *, int64_t m, float *o) {
         pipert_activation_f32(ctx.ctx, PIPERT_ACTIVATION_HARD_SWISH, 0.f, 0.f, v, m, o);
       }},
      {"Log", [&](const float *v, const float *, int64_t m,
                  float *o) { pipert_unary_f32(ctx.ctx, PIPERT_UNARY_LOG, v, m, o); }},
      {"Softplus", [&](const float *v, const float *, int64_t m, float *o) {
         pipert_activation_f32(ctx.ctx, PIPERT_ACTIVATION_SOFTPLUS, 0.f, 0.f, v, m, o);
       }},
  };
  for (const Kernel &k : kernels) {
    Vec whole(x.size());
    k.run(x.data(), dy.data(), n, whole.data());
    for (int64_t i = 0; i < n; ++i) {
      float one;
      k.run(&x[size_t(i)], &dy[size_t(i)], 1, &one);
      ASSERT_TRUE(same(whole[size_t(i)], one))
          << k.name << " at x = " << x[size_t(i)] << ": " << whole[size_t(i)] << " in the array, "
          << one << " alone";
    }
  }
}

// Tanh and Sigmoid against double (vtanh and vsigmoid of
// runtime/core/vmath_scalar.h on the CPU, tanhf and expf on CUDA): relative
// error within a few float ulp on [-20, 20] and near 0 (tanh's polynomial
// branch below 0.625, its quotient above; the sigmoid's two sides), exact
// limits at +-inf, NaN kept, tanh(-0) = -0. And the tanh GELU, the LSTM's
// and GRU's other user, against its double formula.
TEST(Elementwise, TanhAndSigmoidWithinAFewUlp) {
  std::initializer_list<float> extra = {0.f,  -0.f,   1e-30f, -1e-30f, 1e-6f,   -1e-6f,
                                        0.6249999f, 0.625f, -0.625f, 0.6250001f, 9.f, 30.f};
  auto [x, y] = unary_on_grid(PIPERT_UNARY_TANH, -400000, 400000, 5e-5f, extra);
  expect_saturating_within(x, y, [](double v) { return std::tanh(v); }, 5e-7);
  const size_t neg0 = x.size() - 3 - extra.size() + 1;
  EXPECT_TRUE(std::signbit(y[neg0]) && y[neg0] == 0.f) << "tanh(-0) = " << y[neg0];

  auto [sx, sy] = unary_on_grid(PIPERT_UNARY_SIGMOID, -400000, 400000, 2.5e-4f, extra);
  double worst = 0;
  for (size_t i = 0; i + 3 < sx.size(); ++i) {
    const double e = 1.0 / (1.0 + std::exp(-double(sx[i])));
    if (e < double(FLT_MIN)) {
      EXPECT_LE(std::fabs(double(sy[i]) - e), 2 * double(FLT_TRUE_MIN)) << "at " << sx[i];
      continue;
    }
    worst = std::max(worst, std::fabs(double(sy[i]) - e) / e);
  }
  EXPECT_LT(worst, 5e-7);
  EXPECT_EQ(sy[sx.size() - 3], 1.f);
  EXPECT_EQ(sy[sx.size() - 2], 0.f);
  EXPECT_TRUE(std::isnan(sy[sx.size() - 1]));

  // The tanh GELU and its gradient against their formulas in double (the
  // float formula's 1 + t cancels far left: absolute error there).
  Ctx ctx;
  Vec gx, g, gy(4001), gdx(4001);
  for (int i = -2000; i <= 2000; ++i) {
    gx.push_back(float(i) * 4e-3f);
    g.push_back(0.25f + float(i % 5));
  }
  pipert_activation_f32(ctx.ctx, PIPERT_ACTIVATION_GELU_TANH, 0.f, 0.f, gx.data(), 4001,
                        gy.data());
  pipert_activation_grad_f32(ctx.ctx, PIPERT_ACTIVATION_GELU_TANH, 0.f, 0.f, gx.data(),
                             g.data(), 4001, gdx.data());
  for (size_t i = 0; i < gx.size(); ++i) {
    const double v = gx[i], k = 0.79788456080286536, c = 0.044715;
    const double t = std::tanh(k * (v + c * v * v * v));
    const double want = 0.5 * v * (1 + t);
    const double dwant = g[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * c * v * v));
    EXPECT_NEAR(gy[i], want, 1e-6 * std::fabs(want) + 1e-6) << "at " << v;
    EXPECT_NEAR(gdx[i], dwant, 1e-6 * std::fabs(dwant) + 1e-5) << "at " << v;
  }
}

// Log against double (vlog of runtime/core/vmath_scalar.h on the CPU, logf
// on CUDA): relative error within a few ulp over normal and subnormal
// inputs (absolute near 1, where log is 0), log(0) = -inf, log(-1) and
// log(NaN) NaN, log(inf) inf. Softplus against log1p(exp) in double over
// [-100, 100] (far left its value is e^x, not 0).
TEST(Elementwise, LogAndSoftplusWithinAFewUlp) {
  Ctx ctx;
  Vec x;
  for (int i = 0; i <= 200000; ++i)
    x.push_back(std::exp(-104.f + float(i) * 1.9e-3f)); // e^-104 (subnormal) .. e^276 (inf)
  for (float v : {1.f, 0.9999999f, 1.0000001f, FLT_MIN, FLT_TRUE_MIN, FLT_MAX, 0.f, -1.f, INFINITY,
                  NAN})
    x.push_back(v);
  Vec y(x.size());
  pipert_unary_f32(ctx.ctx, PIPERT_UNARY_LOG, x.data(), int64_t(x.size()), y.data());
  double worst = 0, worst_abs = 0;
  for (size_t i = 0; i + 4 < x.size(); ++i) {
    if (std::isinf(x[i]))
      continue;
    const double e = std::log(double(x[i]));
    if (std::fabs(e) < 0.5)
      worst_abs = std::max(worst_abs, std::fabs(double(y[i]) - e));
    else
      worst = std::max(worst, std::fabs(double(y[i]) - e) / std::fabs(e));
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_LT(worst_abs, 1e-7);
  const size_t k = x.size() - 4;
  EXPECT_EQ(y[k], -INFINITY);
  EXPECT_TRUE(std::isnan(y[k + 1]));
  EXPECT_EQ(y[k + 2], INFINITY);
  EXPECT_TRUE(std::isnan(y[k + 3]));

  Vec sx, sy(40001);
  for (int i = -20000; i <= 20000; ++i)
    sx.push_back(float(i) * 5e-3f);
  pipert_activation_f32(ctx.ctx, PIPERT_ACTIVATION_SOFTPLUS, 0.f, 0.f, sx.data(), 40001,
                        sy.data());
  worst = 0;
  for (size_t i = 0; i < sx.size(); ++i) {
    const double v = sx[i];
    const double e = std::max(v, 0.0) + std::log1p(std::exp(-std::fabs(v)));
    if (e < double(FLT_MIN)) // subnormal results: within a subnormal step or two
      EXPECT_LE(std::fabs(double(sy[i]) - e), 2 * double(FLT_TRUE_MIN)) << "at " << v;
    else
      worst = std::max(worst, std::fabs(double(sy[i]) - e) / e);
  }
  EXPECT_LT(worst, 5e-7);
}

// Exp against exp in double (vexp of runtime/cpu/vmath.h on the CPU, expf
// on CUDA): relative error within a few float ulp over every normal result,
// subnormal results within one subnormal step, 0 below, infinity above, NaN
// kept; and Softmax and Erf's gradient, which use it, against double.
TEST(Elementwise, ExpWithinAFewUlp) {
  Ctx ctx;
  // [-110, 90], and values near 0.
  auto [x, y] = unary_on_grid(PIPERT_UNARY_EXP, -1100000, 900000, 1e-4f, {0.f, 1e-30f, 1e-6f});
  double worst = 0;
  for (size_t i = 0; i + 3 < x.size(); ++i) {
    double e = std::exp(double(x[i]));
    if (e > double(FLT_MAX)) {
      EXPECT_EQ(y[i], INFINITY) << "at " << x[i];
    } else if (e < double(FLT_MIN)) {
      EXPECT_LE(std::fabs(double(y[i]) - e), 2 * double(FLT_TRUE_MIN)) << "at " << x[i];
    } else {
      worst = std::max(worst, std::fabs(double(y[i]) - e) / e);
    }
  }
  EXPECT_LT(worst, 2e-7);
  EXPECT_EQ(y[x.size() - 3], INFINITY);
  EXPECT_EQ(y[x.size() - 2], 0.f);
  EXPECT_TRUE(std::isnan(y[x.size() - 1]));

  // Softmax over rows of 64 holding a causal mask's -inf.
  const int64_t shape[2] = {3, 64};
  Vec s(3 * 64), p(3 * 64);
  for (int i = 0; i < 3 * 64; ++i)
    s[size_t(i)] = (i % 64) > 40 + i / 64 ? -INFINITY : float((i * 37) % 23) * 0.7f - 8.f;
  pipert_softmax_f32(ctx.ctx, s.data(), 2, shape, -1, p.data());
  for (int r = 0; r < 3; ++r) {
    // The differences x - max in float, as the kernel has them.
    float mx = -INFINITY;
    double sum = 0;
    for (int m = 0; m < 64; ++m)
      mx = std::max(mx, s[size_t(r * 64 + m)]);
    for (int m = 0; m < 64; ++m)
      sum += std::exp(double(s[size_t(r * 64 + m)] - mx));
    for (int m = 0; m < 64; ++m) {
      double want = std::exp(double(s[size_t(r * 64 + m)] - mx)) / sum;
      EXPECT_NEAR(p[size_t(r * 64 + m)], want, 4e-7 * want + 1e-30) << r << "," << m;
    }
  }
  // d erf / dx = 2 / sqrt(pi) exp(-x^2).
  Vec gx, g, dx(2001);
  for (int i = -1000; i <= 1000; ++i) {
    gx.push_back(float(i) * 5e-3f);
    g.push_back(0.5f + float(i % 7));
  }
  pipert_erf_grad_f32(ctx.ctx, gx.data(), g.data(), 2001, dx.data());
  for (size_t i = 0; i < gx.size(); ++i) {
    // x^2 in float, as the kernel has it.
    double want = double(g[i]) * 2 / std::sqrt(M_PI) * std::exp(double(-(gx[i] * gx[i])));
    EXPECT_NEAR(dx[i], want, 4e-7 * std::fabs(want) + 1e-30) << gx[i];
  }
}

// Softmax and LogSoftmax over the last axis take a row's max and sum in
// vector lanes plus an in-order tail (row_max, row_sum): rows shorter than,
// equal to and past a whole number of vectors, against double.
TEST(Softmax, LastAxisRowLengthsAgainstDouble) {
  Ctx ctx;
  for (int64_t len : {1, 3, 8, 9, 16, 17, 31, 33}) {
    const int64_t rows = 5, shape[2] = {rows, len};
    Vec x(size_t(rows * len)), y(x.size()), ly(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = float(int64_t(i * 37) % 29) * 0.9f - 12.f;
    x[size_t(len - 1)] = 30.f; // the max in a tail (or the only) entry
    pipert_softmax_f32(ctx.ctx, x.data(), 2, shape, -1, y.data());
    pipert_log_softmax_f32(ctx.ctx, x.data(), 2, shape, 1, ly.data());
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = x.data() + r * len;
      // The differences x - max in float, as the kernel has them.
      float mx = -INFINITY;
      double sum = 0;
      for (int64_t m = 0; m < len; ++m)
        mx = std::max(mx, xr[m]);
      for (int64_t m = 0; m < len; ++m)
        sum += std::exp(double(xr[m] - mx));
      for (int64_t m = 0; m < len; ++m) {
        const double p = std::exp(double(xr[m] - mx)) / sum;
        EXPECT_NEAR(y[size_t(r * len + m)], p, 1e-6 * p + 1e-30) << len << " " << r << "," << m;
        EXPECT_NEAR(ly[size_t(r * len + m)], double(xr[m]) - double(mx) - std::log(sum), 4e-6)
            << len << " " << r << "," << m;
      }
    }
  }
  // A NaN in a row makes its softmax NaN wherever it lands (lanes or tail);
  // -inf entries get probability 0.
  for (int64_t at : {0, 8, 9}) {
    const int64_t shape[2] = {1, 10};
    Vec x(10, 1.f), y(10);
    x[3] = -INFINITY;
    x[size_t(at)] = NAN;
    pipert_softmax_f32(ctx.ctx, x.data(), 2, shape, -1, y.data());
    EXPECT_TRUE(std::isnan(y[size_t(at)])) << at;
    EXPECT_TRUE(std::isnan(y[3]) || y[3] == 0.f) << at;
  }
}

TEST(Elementwise, WhereEqualAndInt64Arithmetic) {
  Ctx ctx;
  const int64_t as[2] = {2, 3}, bs[1] = {3};
  const int64_t a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {1, 5, 3};
  uint8_t eq[6];
  pipert_equal_i64(ctx.ctx, a, 2, as, b, 1, bs, eq);
  const uint8_t eq_ref[6] = {1, 0, 1, 0, 1, 0};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(eq[i], eq_ref[i]);
  int64_t out[6];
  pipert_where(ctx.ctx, PIPERT_I64, eq, 2, as, a, 2, as, b, 1, bs, out);
  const int64_t where_ref[6] = {1, 5, 3, 1, 5, 3};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(out[i], where_ref[i]);
  const int64_t neg[3] = {-7, 7, -7}, div[3] = {2, -2, -2};
  int64_t q[3];
  pipert_binary_i64(ctx.ctx, PIPERT_BINARY_DIV, neg, 1, bs, div, 1, bs, q);
  EXPECT_EQ(q[0], -3); // truncation toward zero
  EXPECT_EQ(q[1], -3);
  EXPECT_EQ(q[2], 3);
}

// Where with a broadcast mask and each value full, broadcast to a scalar or
// along an axis (the fixed-stride loops and the general one), against
// index arithmetic: out[b][i][j] = c[i][j] ? x : y.
static void where_against_index_arithmetic(const int64_t T) {
  SCOPED_TRACE("T = " + std::to_string(T));
  Ctx ctx;
  const int64_t B = 3;
  const int64_t full[3] = {B, T, T}, mask[2] = {T, T}, scalar[1] = {1}, row[3] = {B, 1, T};
  std::vector<uint8_t> c(size_t(T * T));
  for (int64_t i = 0; i < T * T; ++i)
    c[size_t(i)] = uint8_t((i * 7) % 3 == 0);
  Vec a = random_vec(size_t(B * T * T), 90), b = random_vec(size_t(B * T * T), 91);
  struct Shape {
    int64_t rank;
    const int64_t *shape;
    int64_t T;
    int64_t at(int64_t bi, int64_t i, int64_t j) const {
      if (rank == 1)
        return 0;
      return shape[1] == 1 ? bi * T + j : (bi * T + i) * T + j;
    }
  };
  const Shape shapes[3] = {{3, full, T}, {1, scalar, T}, {3, row, T}};
  for (const Shape &sx : shapes)
    for (const Shape &sy : shapes) {
      Vec out(size_t(B * T * T), -9.f);
      pipert_where(ctx.ctx, PIPERT_F32, c.data(), 2, mask, a.data(), sx.rank, sx.shape, b.data(),
                   sy.rank, sy.shape, out.data());
      // The output is T x T when neither value has the batch axis.
      const int64_t ob = sx.rank == 3 || sy.rank == 3 ? B : 1;
      for (int64_t bi = 0; bi < ob; ++bi)
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j < T; ++j) {
            const float want = c[size_t(i * T + j)] ? a[size_t(sx.at(bi, i, j))]
                                                    : b[size_t(sy.at(bi, i, j))];
            ASSERT_EQ(out[size_t((bi * T + i) * T + j)], want)
                << "x rank " << sx.rank << " y rank " << sy.rank << " at " << bi << "," << i
                << "," << j;
          }
    }
}

// T x T runs of 25, 64 and 144 elements: partial, whole and mixed 16-lane
// blocks of the vector select.
TEST(Elementwise, WhereBroadcastsAgainstIndexArithmetic) {
  for (const int64_t T : {5, 8, 12})
    where_against_index_arithmetic(T);
}

TEST(Cast, FloatToIntTruncatesAndBool) {
  Ctx ctx;
  const float x[5] = {-1.7f, -0.2f, 0.f, 2.9f, 3.f};
  int64_t i64[5];
  uint8_t b[5];
  double d[5];
  pipert_cast(ctx.ctx, PIPERT_F32, x, PIPERT_I64, i64, 5);
  pipert_cast(ctx.ctx, PIPERT_F32, x, PIPERT_BOOL, b, 5);
  pipert_cast(ctx.ctx, PIPERT_I64, i64, PIPERT_F64, d, 5);
  const int64_t ri[5] = {-1, 0, 0, 2, 3};
  const uint8_t rb[5] = {1, 1, 0, 1, 1};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(i64[i], ri[i]);
    EXPECT_EQ(b[i], rb[i]);
    EXPECT_EQ(d[i], double(ri[i]));
  }
}

TEST(Optimizers, SgdAdamWAndInPlace) {
  Ctx ctx;
  const int64_t n = 5;
  Vec x = random_vec(n, 20), g = random_vec(n, 21), m = random_vec(n, 22);
  Vec v = random_vec(n, 23, 0.f, 1.f);
  // SGD in place.
  Vec xs = x;
  pipert_sgd_f32(ctx.ctx, 0.1f, 0.01f, xs.data(), g.data(), n, xs.data());
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(xs[static_cast<size_t>(i)], x[static_cast<size_t>(i)] - 0.1f * (g[static_cast<size_t>(i)] + 0.01f * x[static_cast<size_t>(i)]), 1e-7);
  // AdamW against PyTorch's formula written out in double, t = 3, in place.
  Vec xw = x, mw = m, vw = v;
  const double lr = 1e-2, b1 = 0.9, b2 = 0.99, eps = 1e-8, wd = 0.1;
  pipert_adamw_f32(ctx.ctx, float(lr), 3, float(b1), float(b2), float(eps), float(wd), xw.data(),
                   g.data(), mw.data(), vw.data(), n, xw.data(), mw.data(), vw.data());
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    double p = x[k] * (1 - lr * wd);
    double mm = b1 * m[k] + (1 - b1) * g[k], vv = b2 * v[k] + (1 - b2) * double(g[k]) * g[k];
    double mhat = mm / (1 - std::pow(b1, 3)), vhat = vv / (1 - std::pow(b2, 3));
    p -= lr * mhat / (std::sqrt(vhat) + eps);
    EXPECT_NEAR(xw[k], p, 1e-6);
    EXPECT_NEAR(mw[k], mm, 1e-6);
    EXPECT_NEAR(vw[k], vv, 1e-6);
  }
}

// The updates' loops are vectorised on the promise that an output is its
// input's buffer or apart from every input (optim.cpp). Over 1000 + 3
// elements (vector bodies and a tail), on 1 and 2 threads, each update in
// place gives the bits it gives into separate buffers, and Momentum and
// Adam stay within float rounding of ONNX's formulas in double.
TEST(Optimizers, InPlaceSameBitsAsApartAndNearTheFormulas) {
  const int64_t n = 1003;
  const size_t un = size_t(n);
  Vec x = random_vec(un, 40), g = random_vec(un, 41), v = random_vec(un, 42);
  Vec h = random_vec(un, 43, 0.f, 1.f);
  auto same = [&](const char *what, const Vec &a, const Vec &b) {
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), un * sizeof(float))) << what;
  };
  for (int threads : {1, 2}) {
    Ctx c(threads);
    for (int nesterov : {0, 1}) {
      Vec xi = x, vi = v, xo(un), vo(un);
      pipert_momentum_f32(c.ctx, 0.1f, 3, 0.9f, 0.5f, 0.01f, nesterov, xi.data(), g.data(),
                          vi.data(), n, xi.data(), vi.data());
      pipert_momentum_f32(c.ctx, 0.1f, 3, 0.9f, 0.5f, 0.01f, nesterov, x.data(), g.data(),
                          v.data(), n, xo.data(), vo.data());
      same("momentum x", xi, xo);
      same("momentum v", vi, vo);
      for (size_t k = 0; k < un; ++k) {
        const double gr = 0.01 * x[k] + g[k];
        const double vn = 0.9 * v[k] + (nesterov ? 1.0 : 0.5) * gr;
        const double xn = x[k] - 0.1 * (nesterov ? gr + 0.9 * vn : vn);
        ASSERT_NEAR(vo[k], vn, 1e-5) << k;
        ASSERT_NEAR(xo[k], xn, 1e-5) << k;
      }
    }
    {
      Vec xi = x, vi = v, hi = h, xo(un), vo(un), ho(un);
      pipert_adam_f32(c.ctx, 0.01f, 2, 0.9f, 0.999f, 1e-6f, 0.01f, 0.001f, xi.data(), g.data(),
                      vi.data(), hi.data(), n, xi.data(), vi.data(), hi.data());
      pipert_adam_f32(c.ctx, 0.01f, 2, 0.9f, 0.999f, 1e-6f, 0.01f, 0.001f, x.data(), g.data(),
                      v.data(), h.data(), n, xo.data(), vo.data(), ho.data());
      same("adam x", xi, xo);
      same("adam v", vi, vo);
      same("adam h", hi, ho);
      const double rate = 0.01 * std::sqrt(1 - 0.999 * 0.999) / (1 - 0.9 * 0.9);
      for (size_t k = 0; k < un; ++k) {
        const double gr = 0.01 * x[k] + g[k];
        const double vn = 0.9 * v[k] + 0.1 * gr, hn = 0.999 * h[k] + 0.001 * gr * gr;
        const double xn = (1 - 0.001) * (x[k] - rate * vn / (std::sqrt(hn) + 1e-6));
        ASSERT_NEAR(xo[k], xn, 1e-5) << k;
      }
    }
    {
      Vec xi = x, vi = v, hi = h, xo(un), vo(un), ho(un);
      pipert_adamw_f32(c.ctx, 0.01f, 2, 0.9f, 0.99f, 1e-8f, 0.1f, xi.data(), g.data(), vi.data(),
                       hi.data(), n, xi.data(), vi.data(), hi.data());
      pipert_adamw_f32(c.ctx, 0.01f, 2, 0.9f, 0.99f, 1e-8f, 0.1f, x.data(), g.data(), v.data(),
                       h.data(), n, xo.data(), vo.data(), ho.data());
      same("adamw x", xi, xo);
      same("adamw m", vi, vo);
      same("adamw v", hi, ho);
    }
    {
      Vec xi = x, hi = h, xo(un), ho(un);
      pipert_adagrad_f32(c.ctx, 0.01f, 2, 0.1f, 1e-6f, 0.01f, xi.data(), g.data(), hi.data(), n,
                         xi.data(), hi.data());
      pipert_adagrad_f32(c.ctx, 0.01f, 2, 0.1f, 1e-6f, 0.01f, x.data(), g.data(), h.data(), n,
                         xo.data(), ho.data());
      same("adagrad x", xi, xo);
      same("adagrad h", hi, ho);
    }
    {
      Vec xi = x, xo(un);
      pipert_sgd_f32(c.ctx, 0.1f, 0.01f, xi.data(), g.data(), n, xi.data());
      pipert_sgd_f32(c.ctx, 0.1f, 0.01f, x.data(), g.data(), n, xo.data());
      same("sgd", xi, xo);
    }
  }
}

TEST(WeightVersions, SlotsPredictionAndEasgd) {
  Ctx ctx;
  const int64_t n = 6;
  Vec w = random_vec(n, 30), v = random_vec(n, 31), slots(static_cast<size_t>(3 * n), 0.f), what(static_cast<size_t>(n));
  pipert_copy_to_slot(ctx.ctx, slots.data(), 2, w.data(), n * int64_t(sizeof(float)));
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(slots[static_cast<size_t>(2 * n + i)], w[static_cast<size_t>(i)]);
    EXPECT_EQ(slots[static_cast<size_t>(i)], 0.f);
  }
  pipert_predict_weights_f32(ctx.ctx, w.data(), v.data(), 2.f, 0.1f, n, what.data());
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(what[static_cast<size_t>(i)], w[static_cast<size_t>(i)] - 0.2f * v[static_cast<size_t>(i)], 1e-7);
  // Along Adam's direction (SpecTrain with adam): w - s lr m_hat/(sqrt(v_hat)
  // + eps) after t = 3 updates; the weights themselves before the first.
  Vec m = random_vec(n, 35), sq = random_vec(n, 36);
  for (float &e : sq)
    e = e * e + 0.01f;
  pipert_predict_adam_f32(ctx.ctx, w.data(), m.data(), sq.data(), 3, 0.9f, 0.999f, 1e-8f, 2.f,
                          0.1f, n, what.data());
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    const double mh = m[k] / (1.0 - 0.9 * 0.9 * 0.9), vh = sq[k] / (1.0 - 0.999 * 0.999 * 0.999);
    EXPECT_NEAR(what[k], w[k] - 0.2 * mh / (std::sqrt(vh) + 1e-8), 1e-5);
  }
  pipert_predict_adam_f32(ctx.ctx, w.data(), m.data(), sq.data(), 0, 0.9f, 0.999f, 1e-8f, 2.f,
                          0.1f, n, what.data());
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(what[static_cast<size_t>(i)], w[static_cast<size_t>(i)]);

  // Two replicas and a centre: one EASGD round, the diff sum formed by hand
  // in place of the allreduce.
  Vec c = random_vec(n, 32), x1 = random_vec(n, 33), x2 = random_vec(n, 34);
  const Vec c0 = c, x10 = x1, x20 = x2;
  Vec d1(static_cast<size_t>(n)), d2(static_cast<size_t>(n));
  const float alpha = 0.25f;
  pipert_easgd_local_f32(ctx.ctx, alpha, c.data(), x1.data(), d1.data(), n);
  pipert_easgd_local_f32(ctx.ctx, alpha, c.data(), x2.data(), d2.data(), n);
  pipert_accumulate_f32(ctx.ctx, d2.data(), d1.data(), n);
  pipert_easgd_center_f32(ctx.ctx, alpha, d1.data(), c.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    EXPECT_NEAR(x1[k], x10[k] - alpha * (x10[k] - c0[k]), 1e-6);
    EXPECT_NEAR(x2[k], x20[k] - alpha * (x20[k] - c0[k]), 1e-6);
    EXPECT_NEAR(c[k], c0[k] + alpha * ((x10[k] - c0[k]) + (x20[k] - c0[k])), 1e-6);
  }
  // axpy, scale, fill.
  Vec y(static_cast<size_t>(n), 1.f);
  pipert_axpy_f32(ctx.ctx, 2.f, w.data(), y.data(), n);
  pipert_scale_f32(ctx.ctx, 0.5f, y.data(), n);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(y[static_cast<size_t>(i)], 0.5f * (1.f + 2.f * w[static_cast<size_t>(i)]), 1e-6);
  pipert_fill_f32(ctx.ctx, 3.f, y.data(), n);
  for (float e : y)
    EXPECT_EQ(e, 3.f);
}

// Gradient clipping by the global norm, one rank (no communicator): the
// norm of grad_scale * g over both tensors; scaled only when above max.
TEST(Optimizer, ClipGradNorm) {
  Ctx ctx;
  Vec a = random_vec(1000, 41), b = random_vec(7, 42);
  const Vec a0 = a, b0 = b;
  double ss = 0;
  for (float v : a0)
    ss += double(v) * v;
  for (float v : b0)
    ss += double(v) * v;
  const float scale = 0.5f;
  const double norm = std::sqrt(ss) * scale;
  float *grads[2] = {a.data(), b.data()};
  const int64_t counts[2] = {int64_t(a.size()), int64_t(b.size())};
  // Above the bound: every element times max / (norm + 1e-6).
  const float max = float(norm / 4);
  pipert_clip_grad_norm_f32(ctx.ctx, nullptr, grads, counts, 2, scale, max);
  const double coef = double(max) / (norm + 1e-6);
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], a0[i] * coef, 1e-5);
  for (size_t i = 0; i < b.size(); ++i)
    EXPECT_NEAR(b[i], b0[i] * coef, 1e-5);
  // Now the gradients' norm is max: a larger bound leaves them as they are.
  const Vec a1 = a, b1 = b;
  pipert_clip_grad_norm_f32(ctx.ctx, nullptr, grads, counts, 2, scale, max * 2);
  EXPECT_EQ(a, a1);
  EXPECT_EQ(b, b1);
  // A rank without gradients takes part with none.
  pipert_clip_grad_norm_f32(ctx.ctx, nullptr, nullptr, nullptr, 0, 1.f, 1.f);
  // A NaN norm makes every gradient NaN, as torch.clamp keeps the NaN.
  b[0] = std::nanf("");
  pipert_clip_grad_norm_f32(ctx.ctx, nullptr, grads, counts, 2, scale, max);
  EXPECT_TRUE(std::isnan(a[0]) && std::isnan(b[1]));
}

TEST(Reduce, MaxMinSumSquareAndNoop) {
  Ctx ctx;
  const int64_t s[3] = {2, 3, 4};
  Vec x = random_vec(24, 40);
  const int64_t axes[2] = {0, -1};
  Vec mx(3), mn(3), ss(3), cp(24);
  pipert_reduce_f32(ctx.ctx, PIPERT_REDUCE_MAX, x.data(), 3, s, 2, axes, 0, mx.data());
  pipert_reduce_f32(ctx.ctx, PIPERT_REDUCE_MIN, x.data(), 3, s, 2, axes, 0, mn.data());
  pipert_reduce_f32(ctx.ctx, PIPERT_REDUCE_SUM_SQUARE, x.data(), 3, s, 2, axes, 0, ss.data());
  pipert_reduce_f32(ctx.ctx, PIPERT_REDUCE_SUM, x.data(), 3, s, 0, nullptr, 1, cp.data());
  EXPECT_EQ(cp, x);
  for (int j = 0; j < 3; ++j) {
    float a = -INFINITY, b = INFINITY;
    double q = 0;
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 4; ++k) {
        float v = x[static_cast<size_t>((i * 3 + j) * 4 + k)];
        a = std::max(a, v), b = std::min(b, v), q += double(v) * v;
      }
    EXPECT_EQ(mx[static_cast<size_t>(j)], a);
    EXPECT_EQ(mn[static_cast<size_t>(j)], b);
    EXPECT_NEAR(ss[static_cast<size_t>(j)], q, 1e-5);
  }
}

// Issue 15's data kernels on hand-computed cases (the node tests have no
// gradients and few reflect/exclusive corners).
TEST(Pad, ReflectEdgeCropAndGradients) {
  Ctx ctx;
  const int64_t s[1] = {4};
  const Vec x = {1, 2, 3, 4};
  const int64_t reflect[2] = {2, 3}, edge[2] = {2, 1}, crop[2] = {-1, 2};
  Vec y(9), ye(7), yc(5);
  pipert_pad(ctx.ctx, PIPERT_F32, PIPERT_PAD_REFLECT, x.data(), 1, s, reflect, 0.f, y.data());
  EXPECT_EQ(y, (Vec{3, 2, 1, 2, 3, 4, 3, 2, 1}));
  pipert_pad(ctx.ctx, PIPERT_F32, PIPERT_PAD_EDGE, x.data(), 1, s, edge, 0.f, ye.data());
  EXPECT_EQ(ye, (Vec{1, 1, 1, 2, 3, 4, 4}));
  pipert_pad(ctx.ctx, PIPERT_F32, PIPERT_PAD_CONSTANT, x.data(), 1, s, crop, 9.f, yc.data());
  EXPECT_EQ(yc, (Vec{2, 3, 4, 9, 9}));
  // Reflect's gradient gathers every output that mirrors an input.
  const Vec dy = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  Vec dx(4);
  pipert_pad_grad_f32(ctx.ctx, PIPERT_PAD_REFLECT, dy.data(), 1, s, reflect, dx.data());
  EXPECT_EQ(dx, (Vec{3 + 9, 2 + 4 + 8, 1 + 5 + 7, 6}));
  pipert_pad_grad_f32(ctx.ctx, PIPERT_PAD_EDGE, dy.data(), 1, s, edge, dx.data());
  EXPECT_EQ(dx, (Vec{1 + 2 + 3, 4, 5, 6 + 7}));
  pipert_pad_grad_f32(ctx.ctx, PIPERT_PAD_CONSTANT, dy.data(), 1, s, crop, dx.data());
  EXPECT_EQ(dx, (Vec{0, 1, 2, 3}));
  // 2-D: reflect on both axes of a 2x3.
  const int64_t s2[2] = {2, 3}, p2[4] = {1, 2, 0, 1};
  const Vec x2 = {1, 2, 3, 4, 5, 6};
  Vec y2(3 * 6);
  pipert_pad(ctx.ctx, PIPERT_F32, PIPERT_PAD_REFLECT, x2.data(), 2, s2, p2, 0.f, y2.data());
  EXPECT_EQ(y2, (Vec{6, 5, 4, 5, 6, 5, 3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5}));
}

TEST(CumSum, ExclusiveReverseAndAxes) {
  Ctx ctx;
  const int64_t s[1] = {4};
  const Vec x = {1, 2, 3, 4};
  Vec y(4);
  pipert_cumsum(ctx.ctx, PIPERT_F32, x.data(), 1, s, 0, 0, 0, y.data());
  EXPECT_EQ(y, (Vec{1, 3, 6, 10}));
  pipert_cumsum(ctx.ctx, PIPERT_F32, x.data(), 1, s, 0, 1, 0, y.data());
  EXPECT_EQ(y, (Vec{0, 1, 3, 6}));
  pipert_cumsum(ctx.ctx, PIPERT_F32, x.data(), 1, s, -1, 0, 1, y.data());
  EXPECT_EQ(y, (Vec{10, 9, 7, 4}));
  pipert_cumsum(ctx.ctx, PIPERT_F32, x.data(), 1, s, 0, 1, 1, y.data());
  EXPECT_EQ(y, (Vec{9, 7, 4, 0}));
  const int64_t s2[2] = {2, 3};
  const Vec x2 = {1, 2, 3, 4, 5, 6};
  Vec y2(6);
  pipert_cumsum(ctx.ctx, PIPERT_F32, x2.data(), 2, s2, 0, 1, 1, y2.data());
  EXPECT_EQ(y2, (Vec{4, 5, 6, 0, 0, 0}));
  Vec inplace = x2;
  pipert_cumsum(ctx.ctx, PIPERT_F32, inplace.data(), 2, s2, 1, 0, 1, inplace.data());
  EXPECT_EQ(inplace, (Vec{6, 5, 3, 15, 11, 6}));
}

TEST(Reduce, ExtremumGradientAndArgReduceTies) {
  Ctx ctx;
  const int64_t s[2] = {2, 3}, axis1[1] = {1};
  const Vec x = {1, 3, 3, 2, 2, 0};
  const Vec dy = {10, 20};
  Vec dx(6);
  pipert_reduce_extremum_grad_f32(ctx.ctx, PIPERT_REDUCE_MAX, x.data(), 2, s, 1, axis1, 0,
                                  dy.data(), dx.data());
  EXPECT_EQ(dx, (Vec{0, 10, 0, 20, 0, 0})); // first of the tied maxima
  const Vec d1 = {7};
  pipert_reduce_extremum_grad_f32(ctx.ctx, PIPERT_REDUCE_MIN, x.data(), 2, s, 0, nullptr, 0,
                                  d1.data(), dx.data());
  EXPECT_EQ(dx, (Vec{0, 0, 0, 0, 0, 7}));
  std::vector<int64_t> idx(2);
  pipert_arg_reduce_f32(ctx.ctx, PIPERT_REDUCE_MAX, x.data(), 2, s, 1, 0, idx.data());
  EXPECT_EQ(idx, (std::vector<int64_t>{1, 0}));
  pipert_arg_reduce_f32(ctx.ctx, PIPERT_REDUCE_MAX, x.data(), 2, s, -1, 1, idx.data());
  EXPECT_EQ(idx, (std::vector<int64_t>{2, 1}));
  std::vector<int64_t> col(3);
  pipert_arg_reduce_f32(ctx.ctx, PIPERT_REDUCE_MIN, x.data(), 2, s, 0, 0, col.data());
  EXPECT_EQ(col, (std::vector<int64_t>{0, 1, 1}));
}

TEST(Tile, ForwardGradientAndTrilu) {
  Ctx ctx;
  const int64_t s[2] = {1, 2}, reps[2] = {2, 3};
  const Vec x = {1, 2};
  Vec y(12), dx(2);
  pipert_tile(ctx.ctx, PIPERT_F32, x.data(), 2, s, reps, y.data());
  EXPECT_EQ(y, (Vec{1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2}));
  const Vec dy = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  pipert_tile_grad_f32(ctx.ctx, dy.data(), 2, s, reps, dx.data());
  EXPECT_EQ(dx, (Vec{1 + 3 + 5 + 7 + 9 + 11, 2 + 4 + 6 + 8 + 10 + 12}));
  const int64_t m[2] = {3, 4};
  std::vector<int64_t> a(12), lower(12), upper(12);
  for (int i = 0; i < 12; ++i)
    a[static_cast<size_t>(i)] = i + 1;
  pipert_trilu(ctx.ctx, PIPERT_I64, a.data(), 2, m, 0, -1, lower.data());
  EXPECT_EQ(lower, (std::vector<int64_t>{0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0}));
  pipert_trilu(ctx.ctx, PIPERT_I64, a.data(), 2, m, 1, 2, upper.data());
  EXPECT_EQ(upper, (std::vector<int64_t>{0, 0, 3, 4, 0, 0, 0, 8, 0, 0, 0, 0}));
}

TEST(Resize, HandComputedCorners) {
  Ctx ctx(2);
  // One row [1, 2, 3] resized along W only.
  const Vec x = {1, 2, 3};
  const int64_t xs[4] = {1, 1, 1, 3};
  auto run = [&](int64_t w, const float *scales, pipert_resize_mode mode,
                 pipert_resize_coord coord, pipert_resize_nearest nearest) {
    const int64_t ys[4] = {1, 1, 1, w};
    Vec y(static_cast<size_t>(w));
    pipert_resize_f32(ctx.ctx, x.data(), xs, ys, scales, nullptr, mode, coord, nearest, -0.75f,
                      0, 0.f, y.data());
    return y;
  };
  const float two[3] = {1, 1, 2};
  // torch's nearest upsampling: asymmetric + floor.
  EXPECT_EQ(run(6, two, PIPERT_RESIZE_NEAREST, PIPERT_RESIZE_ASYMMETRIC, PIPERT_RESIZE_FLOOR),
            (Vec{1, 1, 2, 2, 3, 3}));
  // half_pixel: x = (o + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, ...; linear
  // clamps at the edges.
  EXPECT_EQ(run(6, two, PIPERT_RESIZE_LINEAR, PIPERT_RESIZE_HALF_PIXEL,
                PIPERT_RESIZE_ROUND_PREFER_FLOOR),
            (Vec{1, 1.25f, 1.75f, 2.25f, 2.75f, 3}));
  EXPECT_EQ(run(5, nullptr, PIPERT_RESIZE_LINEAR, PIPERT_RESIZE_ALIGN_CORNERS,
                PIPERT_RESIZE_ROUND_PREFER_FLOOR),
            (Vec{1, 1.5f, 2, 2.5f, 3}));
  // Ties at .5 (asymmetric, scale 2 into 6 from 3: x = o / 2).
  EXPECT_EQ(run(6, two, PIPERT_RESIZE_NEAREST, PIPERT_RESIZE_ASYMMETRIC,
                PIPERT_RESIZE_ROUND_PREFER_FLOOR),
            (Vec{1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(run(6, two, PIPERT_RESIZE_NEAREST, PIPERT_RESIZE_ASYMMETRIC,
                PIPERT_RESIZE_ROUND_PREFER_CEIL),
            (Vec{1, 2, 2, 3, 3, 3}));
  EXPECT_EQ(run(6, two, PIPERT_RESIZE_NEAREST, PIPERT_RESIZE_ASYMMETRIC, PIPERT_RESIZE_CEIL),
            (Vec{1, 2, 2, 3, 3, 3}));
  // An integer coordinate takes the sample itself under cubic.
  const float one[3] = {1, 1, 1};
  EXPECT_EQ(run(3, one, PIPERT_RESIZE_CUBIC, PIPERT_RESIZE_HALF_PIXEL,
                PIPERT_RESIZE_ROUND_PREFER_FLOOR),
            x);
  // tf_crop_and_resize outside [0, in - 1] gives the extrapolation value.
  const float roi[6] = {0, 0, -0.5f, 1, 1, 1};
  const int64_t ys[4] = {1, 1, 1, 4};
  Vec y(4);
  pipert_resize_f32(ctx.ctx, x.data(), xs, ys, nullptr, roi, PIPERT_RESIZE_LINEAR,
                    PIPERT_RESIZE_TF_CROP_AND_RESIZE, PIPERT_RESIZE_ROUND_PREFER_FLOOR, -0.75f, 0,
                    9.f, y.data());
  // x = -0.5*2 + o * 1.5 * 2 / 3 = -1, 0, 1, 2.
  EXPECT_EQ(y, (Vec{9, 1, 2, 3}));
  // The outer extent and threads: 4096 rows, each [r, r + 1] doubled.
  const int64_t bs[4] = {4096, 1, 1, 2}, bys[4] = {4096, 1, 1, 4};
  Vec big(8192), out(16384);
  for (int i = 0; i < 4096; ++i)
    big[2 * size_t(i)] = float(i), big[2 * size_t(i) + 1] = float(i) + 1;
  pipert_resize_f32(ctx.ctx, big.data(), bs, bys, nullptr, nullptr, PIPERT_RESIZE_NEAREST,
                    PIPERT_RESIZE_ASYMMETRIC, PIPERT_RESIZE_FLOOR, -0.75f, 0, 0.f, out.data());
  for (int i = 0; i < 4096; ++i)
    ASSERT_EQ(out[4 * size_t(i) + 3], float(i) + 1) << i;
  // Its adjoint on two threads (outer slices split): each input gets two.
  Vec ones(16384, 1.f), dbig(8192, -1.f);
  pipert_resize_grad_f32(ctx.ctx, ones.data(), bs, bys, nullptr, nullptr, PIPERT_RESIZE_NEAREST,
                         PIPERT_RESIZE_ASYMMETRIC, PIPERT_RESIZE_FLOOR, -0.75f, 0, dbig.data());
  EXPECT_EQ(dbig, Vec(8192, 2.f));
}

TEST(Elementwise, ActivationKinksAndIntegerMod) {
  Ctx ctx;
  // PyTorch's choice at the kinks: LeakyRelu and Elu take the x <= 0 branch
  // at 0; Clip passes the gradient on its bounds; Abs's is 0 at 0.
  const Vec x = {-1.f, 0.f, 2.f}, dy = {1.f, 1.f, 1.f};
  Vec dx(3);
  pipert_activation_grad_f32(ctx.ctx, PIPERT_ACTIVATION_LEAKY_RELU, 0.1f, 0.f, x.data(), dy.data(),
                             3, dx.data());
  EXPECT_EQ(dx, (Vec{0.1f, 0.1f, 1.f}));
  pipert_activation_grad_f32(ctx.ctx, PIPERT_ACTIVATION_CLIP, -1.f, 0.f, x.data(), dy.data(), 3,
                             dx.data());
  EXPECT_EQ(dx, (Vec{1.f, 1.f, 0.f}));
  pipert_activation_grad_f32(ctx.ctx, PIPERT_ACTIVATION_ABS, 0.f, 0.f, x.data(), dy.data(), 3,
                             dx.data());
  EXPECT_EQ(dx, (Vec{-1.f, 0.f, 1.f}));
  Vec y(3);
  pipert_activation_f32(ctx.ctx, PIPERT_ACTIVATION_CLIP, -INFINITY, 1.f, x.data(), 3, y.data());
  EXPECT_EQ(y, (Vec{-1.f, 0.f, 1.f}));
  // The clamped activations keep a NaN (as PyTorch's do), and clamp inf.
  const Vec special = {NAN, INFINITY, -1e30f};
  for (pipert_activation_op op :
       {PIPERT_ACTIVATION_HARD_SIGMOID, PIPERT_ACTIVATION_HARD_SWISH, PIPERT_ACTIVATION_CLIP}) {
    pipert_activation_f32(ctx.ctx, op, op == PIPERT_ACTIVATION_CLIP ? 0.f : 0.2f,
                          op == PIPERT_ACTIVATION_CLIP ? 6.f : 0.5f, special.data(), 3,
                          y.data());
    EXPECT_TRUE(std::isnan(y[0])) << "op " << int(op);
    EXPECT_EQ(y[1], op == PIPERT_ACTIVATION_HARD_SIGMOID ? 1.f
                    : op == PIPERT_ACTIVATION_CLIP       ? 6.f
                                                         : INFINITY);
    EXPECT_EQ(y[2], 0.f);
  }
  // Mod's sign follows the divisor; fmod's the dividend.
  const int64_t s[1] = {4}, one[1] = {1};
  const std::vector<int64_t> a = {7, -7, 7, -7}, b = {3, 3, -3, -3}, three = {3};
  std::vector<int64_t> r(4);
  pipert_binary_i64(ctx.ctx, PIPERT_BINARY_MOD, a.data(), 1, s, b.data(), 1, s, r.data());
  EXPECT_EQ(r, (std::vector<int64_t>{1, 2, -2, -1}));
  pipert_binary_i64(ctx.ctx, PIPERT_BINARY_FMOD, a.data(), 1, s, b.data(), 1, s, r.data());
  EXPECT_EQ(r, (std::vector<int64_t>{1, -1, 1, -1}));
  pipert_binary_i64(ctx.ctx, PIPERT_BINARY_MAX, a.data(), 1, s, three.data(), 1, one, r.data());
  EXPECT_EQ(r, (std::vector<int64_t>{7, 3, 7, 3}));
}

} // namespace

namespace {

// The kernels' parallel parts run on OpenMP's team (runtime/cpu/
// thread_pool.cpp): many calls in a row on 2, 3, 4 and again 2 threads
// (the team resized), the same bits as one thread each time; and a child
// of fork(), which has none of its parent's team threads, runs its
// parallel kernels serially instead of waiting for them (GNU OpenMP's
// team in the child hangs: the child dies by its alarm without the
// runtime's atfork handler; CPU only).
// LayerNorm's statistics of eight rows at a time (interleaved chains)
// against each row normalised alone (a 1-row call takes the one-row path):
// the same bits, rows of lengths with and without a tail of eight, means
// far from zero included.
TEST(LayerNorm, EightRowsAtATimeBitForBitWithOneRowAlone) {
  Ctx ctx;
  for (int64_t cols : {1, 8, 37, 256}) {
    const int64_t rows = 17, shape[2] = {rows, cols}, one[2] = {1, cols};
    Vec x = random_vec(size_t(rows * cols), 31, -3.f, 3.f);
    for (int64_t i = 0; i < rows * cols; i += 3)
      x[size_t(i)] += 50.f;
    const Vec scale = random_vec(size_t(cols), 32), bias = random_vec(size_t(cols), 33);
    Vec y(x.size()), mean(rows), inv(rows);
    pipert_layer_norm_f32(ctx.ctx, x.data(), 2, shape, 1, 1e-5f, scale.data(), bias.data(),
                          y.data(), mean.data(), inv.data());
    for (int64_t r = 0; r < rows; ++r) {
      Vec yr(static_cast<size_t>(cols));
      float m = 0, iv = 0;
      pipert_layer_norm_f32(ctx.ctx, x.data() + r * cols, 2, one, 1, 1e-5f, scale.data(),
                            bias.data(), yr.data(), &m, &iv);
      ASSERT_EQ(0, std::memcmp(&m, &mean[size_t(r)], sizeof m)) << "cols " << cols << " row " << r;
      ASSERT_EQ(0, std::memcmp(&iv, &inv[size_t(r)], sizeof iv)) << "cols " << cols << " row " << r;
      ASSERT_EQ(0, std::memcmp(yr.data(), y.data() + r * cols, size_t(cols) * sizeof(float)))
          << "cols " << cols << " row " << r;
    }
  }
}

// BatchNormalization over small planes runs eight channels' statistics and
// sums at a time (the planes outermost): the same bits as each channel
// alone (a one-channel tensor takes the one-channel path). 17 channels: two
// groups and a tail; planes of 1, 2 x 2, 3 x 3 and 4 x 4; means far from 0.
TEST(BatchNorm, EightChannelsAtATimeBitForBitWithOneChannelAlone) {
  Ctx ctx;
  for (int64_t hw : {1, 2, 3, 4}) {
    const int64_t n = 3, c = 17, sp = hw * hw, shape[4] = {n, c, hw, hw};
    const int64_t one[4] = {n, 1, hw, hw}, total = n * c * sp;
    Vec x = random_vec(size_t(total), 41, -2.f, 2.f), dy = random_vec(size_t(total), 42);
    for (int64_t i = 0; i < total; i += 2)
      x[size_t(i)] += 40.f;
    const Vec scale = random_vec(size_t(c), 43), bias = random_vec(size_t(c), 44);
    Vec y(x.size()), dx(x.size()), st(static_cast<size_t>(6 * c), 1.f);
    Vec ds(static_cast<size_t>(c)), db(static_cast<size_t>(c));
    pipert_batch_norm_training_f32(ctx.ctx, x.data(), 4, shape, scale.data(), bias.data(),
                                   st.data(), st.data() + c, 1e-5f, 0.9f, y.data(),
                                   st.data() + 2 * c, st.data() + 3 * c, st.data() + 4 * c,
                                   st.data() + 5 * c);
    pipert_batch_norm_grad_f32(ctx.ctx, x.data(), 4, shape, scale.data(), 1e-5f, dy.data(),
                               dx.data(), ds.data(), db.data(), 0);
    for (int64_t ch = 0; ch < c; ++ch) {
      Vec xc(static_cast<size_t>(n * sp)), gc(static_cast<size_t>(n * sp));
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < sp; ++i) {
          xc[size_t(b * sp + i)] = x[size_t((b * c + ch) * sp + i)];
          gc[size_t(b * sp + i)] = dy[size_t((b * c + ch) * sp + i)];
        }
      Vec yc(xc.size()), dxc(xc.size()), stc(6, 1.f);
      float dsc = 0, dbc = 0;
      pipert_batch_norm_training_f32(ctx.ctx, xc.data(), 4, one, &scale[size_t(ch)],
                                     &bias[size_t(ch)], &stc[0], &stc[1], 1e-5f, 0.9f,
                                     yc.data(), &stc[2], &stc[3], &stc[4], &stc[5]);
      pipert_batch_norm_grad_f32(ctx.ctx, xc.data(), 4, one, &scale[size_t(ch)], 1e-5f,
                                 gc.data(), dxc.data(), &dsc, &dbc, 0);
      for (int k = 2; k < 6; ++k)
        ASSERT_EQ(0, std::memcmp(&stc[size_t(k)], &st[size_t(k * c + ch)], sizeof(float)))
            << "hw " << hw << " channel " << ch << " statistic " << k;
      ASSERT_EQ(0, std::memcmp(&dsc, &ds[size_t(ch)], sizeof dsc)) << "hw " << hw << " ch " << ch;
      ASSERT_EQ(0, std::memcmp(&dbc, &db[size_t(ch)], sizeof dbc)) << "hw " << hw << " ch " << ch;
      for (int64_t b = 0; b < n; ++b) {
        ASSERT_EQ(0, std::memcmp(&yc[size_t(b * sp)], &y[size_t((b * c + ch) * sp)],
                                 size_t(sp) * sizeof(float)))
            << "hw " << hw << " channel " << ch << " y";
        ASSERT_EQ(0, std::memcmp(&dxc[size_t(b * sp)], &dx[size_t((b * c + ch) * sp)],
                                 size_t(sp) * sizeof(float)))
            << "hw " << hw << " channel " << ch << " dx";
      }
    }
  }
}

TEST(Threads, PoolKeptBetweenCallsAndAfterFork) {
  const int64_t n = 300001;
  Vec x = random_vec(static_cast<size_t>(n), 52, -3.f, 3.f), ref(static_cast<size_t>(n));
  Ctx one(1);
  pipert_unary_f32(one.ctx, PIPERT_UNARY_TANH, x.data(), n, ref.data());
  for (int threads : {2, 3, 4, 2}) {
    Ctx c(threads);
    for (int rep = 0; rep < 50; ++rep) {
      Vec y(static_cast<size_t>(n));
      pipert_unary_f32(c.ctx, PIPERT_UNARY_TANH, x.data(), n, y.data());
      ASSERT_EQ(y, ref) << threads << " threads, call " << rep;
    }
  }
#ifndef PIPERT_TEST_CUDA_DEVICE_SHIM_H
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(20); // a child waiting on its parent's threads dies here
    Ctx c(2);
    Vec y(static_cast<size_t>(n));
    pipert_unary_f32(c.ctx, PIPERT_UNARY_TANH, x.data(), n, y.data());
    _exit(y == ref ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the forked child's parallel kernel " << (WIFSIGNALED(status) ? "hung" : "differed");
#endif
}

TEST(Threads, ParallelElementwiseMatchesSerial) {
  const int64_t n = 300001; // above the parallel threshold, odd split
  Vec x = random_vec(static_cast<size_t>(n), 50, -3.f, 3.f), g = random_vec(static_cast<size_t>(n), 51);
  Ctx one(1), two(2);
  for (pipert_unary_op op : {PIPERT_UNARY_TANH, PIPERT_UNARY_SIGMOID, PIPERT_UNARY_RELU}) {
    Vec y1(static_cast<size_t>(n)), y2(static_cast<size_t>(n));
    pipert_unary_f32(one.ctx, op, x.data(), n, y1.data());
    pipert_unary_f32(two.ctx, op, x.data(), n, y2.data());
    EXPECT_EQ(y1, y2);
  }
  Vec a1 = x, a2 = x;
  pipert_axpy_f32(one.ctx, 0.5f, g.data(), a1.data(), n);
  pipert_axpy_f32(two.ctx, 0.5f, g.data(), a2.data(), n);
  EXPECT_EQ(a1, a2);
  const int64_t s[2] = {900, 301};
  Vec s1(x.begin(), x.begin() + 900 * 301), s2(s1.size());
  pipert_softmax_f32(one.ctx, x.data(), 2, s, 1, s1.data());
  pipert_softmax_f32(two.ctx, x.data(), 2, s, 1, s2.data());
  EXPECT_EQ(s1, s2);
  // BatchNormalization (training, its gradient, inference): channels or
  // planes split among the threads, 37 channels of 4 x 9 x 9 (above the
  // parallel threshold, odd split).
  const int64_t bs[4] = {4, 37, 9, 9}, bn = 4 * 37 * 81;
  Vec sc = random_vec(37, 52), bi = random_vec(37, 53), mean = random_vec(37, 54);
  Vec var = random_vec(37, 55, 0.5f, 2.f);
  Ctx three(3);
  std::vector<Vec> outs[2];
  for (int t = 0; t < 2; ++t) {
    pipert_context *c = t ? three.ctx : one.ctx;
    const size_t un = static_cast<size_t>(bn);
    Vec y(un), rm(37), rv(37), sm(37), si(37), dx(un), ds(37), db(37), yi(un);
    pipert_batch_norm_training_f32(c, x.data(), 4, bs, sc.data(), bi.data(), mean.data(),
                                   var.data(), 1e-5f, 0.9f, y.data(), rm.data(), rv.data(),
                                   sm.data(), si.data());
    pipert_batch_norm_grad_f32(c, x.data(), 4, bs, sc.data(), 1e-5f, g.data(), dx.data(),
                               ds.data(), db.data(), 0);
    pipert_batch_norm_inference_f32(c, x.data(), 4, bs, sc.data(), bi.data(), mean.data(),
                                    var.data(), 1e-5f, yi.data());
    outs[t] = {y, rm, rv, sm, si, dx, ds, db, yi};
  }
  for (size_t k = 0; k < outs[0].size(); ++k)
    EXPECT_EQ(outs[0][k], outs[1][k]) << "batch norm output " << k;
}

} // namespace

namespace {

// Transpose against index arithmetic, for every permutation of shapes whose
// merged views take each of copy_view's paths: 8 x 8 tiles, rows of 16-128
// bytes moved as fixed-size copies (the attention heads' (B, T, H, d) <->
// (B, H, T, d)), other short rows, long rows, and element-wise strides; in
// 1-, 2-, 4- and 8-byte elements.
template <typename T>
void check_transposes(pipert_dtype dtype, const std::vector<std::vector<int64_t>> &shapes) {
  Ctx c;
  for (const auto &shape : shapes) {
    const int64_t rank = int64_t(shape.size());
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    std::vector<T> x(static_cast<size_t>(n), T(0));
    for (int64_t i = 0; i < n; ++i)
      x[size_t(i)] = T(i * 7 + 3);
    std::vector<int64_t> perm(static_cast<size_t>(rank));
    for (int64_t i = 0; i < rank; ++i)
      perm[size_t(i)] = i;
    do {
      std::vector<T> y(static_cast<size_t>(n), T(-1));
      pipert_transpose(c.ctx, dtype, x.data(), rank, shape.data(), perm.data(), y.data());
      // y[j] = x[the input index whose permuted coordinates are j's].
      std::vector<int64_t> ys(static_cast<size_t>(rank)), in(static_cast<size_t>(rank));
      for (int64_t i = 0; i < rank; ++i)
        ys[size_t(i)] = shape[size_t(perm[size_t(i)])];
      for (int64_t j = 0; j < n; ++j) {
        int64_t rest = j;
        for (int64_t i = rank - 1; i >= 0; --i) {
          in[size_t(perm[size_t(i)])] = rest % ys[size_t(i)];
          rest /= ys[size_t(i)];
        }
        int64_t src = 0;
        for (int64_t i = 0; i < rank; ++i)
          src = src * shape[size_t(i)] + in[size_t(i)];
        ASSERT_EQ(y[size_t(j)], x[size_t(src)])
            << "shape rank " << rank << " element " << j << " perm " << perm[0] << perm[1]
            << (rank > 2 ? perm[2] : 0) << (rank > 3 ? perm[3] : 0);
      }
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

TEST(Transpose, EveryPermutationAgainstIndexArithmetic) {
  const std::vector<std::vector<int64_t>> shapes = {
      {2, 8, 4, 8}, {3, 5, 4, 2}, {2, 3, 4, 16}, {1, 7, 3, 33}, {2, 2, 9, 80},
      {5, 6, 7}, {16, 16}, {4, 1, 8, 4}, {2, 4, 8, 8}, {12, 20}, {3, 17, 24}};
  check_transposes<uint32_t>(PIPERT_F32, shapes);
  check_transposes<uint64_t>(PIPERT_I64, shapes);
  check_transposes<uint16_t>(PIPERT_F16, shapes);
  check_transposes<uint8_t>(PIPERT_U8, {{2, 8, 4, 8}, {3, 5, 4, 2}, {2, 4, 3, 32}, {5, 6, 7}});
}

// pipe-lower-to-runtime writes an elementwise kernel's result, and a layer
// norm gradient's dx, over an operand whose buffer dies at the call
// (StepBufferPlan's inPlaceOperands). Each kernel called with its output
// the same buffer as one operand gives the bits it gives out of place.
TEST(InPlace, OutputOverAnOperandGivesTheSameBits) {
  Ctx ctx;
  const int64_t full[3] = {3, 5, 37}, row[1] = {37};
  const int64_t n = 3 * 5 * 37;
  const Vec a = random_vec(size_t(n), 21, -2.f, 2.f), b = random_vec(size_t(n), 22, 0.5f, 2.f);
  const Vec r = random_vec(37, 23, 0.5f, 2.f);
  auto same = [](const Vec &got, const Vec &want, const std::string &what) {
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float))) << what;
  };
  for (int op = PIPERT_BINARY_ADD; op <= PIPERT_BINARY_DIV; ++op) {
    const auto bop = pipert_binary_op(op);
    const std::string name = "binary " + std::to_string(op);
    Vec want(static_cast<size_t>(n));
    pipert_binary_f32(ctx.ctx, bop, a.data(), 3, full, b.data(), 3, full, want.data());
    Vec y = a;
    pipert_binary_f32(ctx.ctx, bop, y.data(), 3, full, b.data(), 3, full, y.data());
    same(y, want, name + " over a");
    y = b;
    pipert_binary_f32(ctx.ctx, bop, a.data(), 3, full, y.data(), 3, full, y.data());
    same(y, want, name + " over b");
    // A broadcast row on either side: the result over the full operand.
    pipert_binary_f32(ctx.ctx, bop, a.data(), 3, full, r.data(), 1, row, want.data());
    y = a;
    pipert_binary_f32(ctx.ctx, bop, y.data(), 3, full, r.data(), 1, row, y.data());
    same(y, want, name + " over a, b broadcast");
    pipert_binary_f32(ctx.ctx, bop, r.data(), 1, row, b.data(), 3, full, want.data());
    y = b;
    pipert_binary_f32(ctx.ctx, bop, r.data(), 1, row, y.data(), 3, full, y.data());
    same(y, want, name + " over b, a broadcast");
  }
  for (auto uop : {PIPERT_UNARY_RELU, PIPERT_UNARY_TANH, PIPERT_UNARY_SIGMOID, PIPERT_UNARY_ERF,
                   PIPERT_UNARY_EXP}) {
    Vec want(static_cast<size_t>(n)), y = a;
    pipert_unary_f32(ctx.ctx, uop, a.data(), n, want.data());
    pipert_unary_f32(ctx.ctx, uop, y.data(), n, y.data());
    same(y, want, "unary " + std::to_string(int(uop)));
  }
  for (auto act : {PIPERT_ACTIVATION_GELU, PIPERT_ACTIVATION_GELU_TANH}) {
    Vec want(static_cast<size_t>(n)), y = a;
    pipert_activation_f32(ctx.ctx, act, 0.f, 0.f, a.data(), n, want.data());
    pipert_activation_f32(ctx.ctx, act, 0.f, 0.f, y.data(), n, y.data());
    same(y, want, "activation " + std::to_string(int(act)));
    pipert_activation_grad_f32(ctx.ctx, act, 0.f, 0.f, a.data(), b.data(), n, want.data());
    y = a;
    pipert_activation_grad_f32(ctx.ctx, act, 0.f, 0.f, y.data(), b.data(), n, y.data());
    same(y, want, "activation grad over x " + std::to_string(int(act)));
    y = b;
    pipert_activation_grad_f32(ctx.ctx, act, 0.f, 0.f, a.data(), y.data(), n, y.data());
    same(y, want, "activation grad over dy " + std::to_string(int(act)));
  }
  using Grad = void (*)(pipert_context *, const float *, const float *, int64_t, float *);
  for (auto [grad, name] : {std::pair<Grad, const char *>{pipert_relu_grad_f32, "relu"},
                            {pipert_tanh_grad_f32, "tanh"},
                            {pipert_sigmoid_grad_f32, "sigmoid"},
                            {pipert_erf_grad_f32, "erf"}}) {
    Vec want(static_cast<size_t>(n)), y = a;
    grad(ctx.ctx, a.data(), b.data(), n, want.data());
    grad(ctx.ctx, y.data(), b.data(), n, y.data());
    same(y, want, std::string(name) + " grad over its first operand");
    y = b;
    grad(ctx.ctx, a.data(), y.data(), n, y.data());
    same(y, want, std::string(name) + " grad over dy");
  }
  // The layer norm's gradient, dx over dy, with and without the parameter
  // gradients and accumulating them.
  const int64_t shape[2] = {15, 37};
  const Vec scale = random_vec(37, 24), bias = random_vec(37, 25);
  Vec y(static_cast<size_t>(n)), mean(15), inv(15);
  pipert_layer_norm_f32(ctx.ctx, a.data(), 2, shape, -1, 1e-5f, scale.data(), bias.data(),
                        y.data(), mean.data(), inv.data());
  for (int params = 0; params < 2; ++params)
    for (int accumulate : {0, 3}) {
      if (!params && accumulate)
        continue;
      const Vec acc = random_vec(37, 26);
      Vec want(static_cast<size_t>(n)), ds0 = acc, db0 = acc, ds1 = acc, db1 = acc;
      pipert_layer_norm_grad_f32(ctx.ctx, a.data(), 2, shape, -1, scale.data(), mean.data(),
                                 inv.data(), b.data(), want.data(), params ? ds0.data() : nullptr,
                                 params ? db0.data() : nullptr, accumulate);
      Vec dy = b;
      pipert_layer_norm_grad_f32(ctx.ctx, a.data(), 2, shape, -1, scale.data(), mean.data(),
                                 inv.data(), dy.data(), dy.data(), params ? ds1.data() : nullptr,
                                 params ? db1.data() : nullptr, accumulate);
      const std::string what =
          "layer norm grad over dy, params " + std::to_string(params) + " accumulate " +
          std::to_string(accumulate);
      same(dy, want, what + ": dx");
      same(ds1, ds0, what + ": dscale");
      same(db1, db0, what + ": dbias");
    }
}

} // namespace
