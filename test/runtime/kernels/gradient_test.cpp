//===- gradient_test.cpp - backward kernels vs central finite differences -===//
//
// For a forward f and a random cotangent r, the backward kernel's result must
// match d/dx sum(r * f(x)) by central differences. f runs in float32; the sum
// is accumulated in double. Shapes are odd-sized and broadcast on purpose.
//
//===----------------------------------------------------------------------===//
#include "pipert/pipert_kernels.h"

#include <cstring>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

using Vec = std::vector<float>;
using Shape = std::vector<int64_t>;

int64_t numel(const Shape &s) {
  return std::accumulate(s.begin(), s.end(), int64_t(1), std::multiplies<int64_t>());
}

struct Rng {
  std::mt19937 gen{12345};
  Vec uniform(int64_t n, float lo = -1.f, float hi = 1.f) {
    std::uniform_real_distribution<float> d(lo, hi);
    Vec v(static_cast<size_t>(n));
    for (auto &x : v)
      x = d(gen);
    return v;
  }
  // Distinct values at least `gap` apart, shuffled: no ties within 2h for
  // max-pooling or Relu's kink.
  Vec spaced(int64_t n, float gap = 0.05f) {
    Vec v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      v[static_cast<size_t>(i)] = (float(i) - float(n) / 2.f + 0.25f) * gap;
    std::shuffle(v.begin(), v.end(), gen);
    return v;
  }
};

struct Ctx {
  pipert_context *ctx = pipert_context_create(1, 7);
  ~Ctx() { pipert_context_destroy(ctx); }
};

double dot(const Vec &r, const Vec &y) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i)
    s += double(r[i]) * double(y[i]);
  return s;
}

// A gradient the kernel added into an accumulator (its `accumulate` flag):
// `after` must be acc + grad elementwise, the bits of a separate Add; with
// `on` false the accumulator must be overwritten by the gradient.
void expect_accumulated(const std::string &what, const Vec &acc, const Vec &grad,
                        const Vec &after, bool on = true) {
  ASSERT_EQ(acc.size(), after.size()) << what;
  ASSERT_EQ(grad.size(), after.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    const float want = on ? acc[i] + grad[i] : grad[i];
    if (after[i] != want && ++bad <= 5)
      ADD_FAILURE() << what << "[" << i << "] accumulated " << after[i] << ", want " << want;
  }
  EXPECT_EQ(bad, 0) << what << (on ? ": accumulated" : ": overwritten");
}

// Compares `analytic` with central differences of x -> sum(r * f(x)) at up to
// `max_checks` coordinates of x.
void check_grad(const std::string &what, const std::function<void(const Vec &, Vec &)> &f, Vec x,
                const Vec &r, const Vec &analytic, float h = 1e-2f, int max_checks = 150) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  std::vector<size_t> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0);
  if (int(idx.size()) > max_checks) {
    std::mt19937 g(99);
    std::shuffle(idx.begin(), idx.end(), g);
    idx.resize(static_cast<size_t>(max_checks));
  }
  Vec y;
  int bad = 0;
  for (size_t i : idx) {
    const float x0 = x[i];
    x[i] = x0 + h;
    const float hp = x[i] - x0;
    f(x, y);
    const double lp = dot(r, y);
    x[i] = x0 - h;
    const float hm = x0 - x[i];
    f(x, y);
    const double lm = dot(r, y);
    x[i] = x0;
    const double fd = (lp - lm) / (double(hp) + double(hm));
    const double a = analytic[i];
    if (std::fabs(a - fd) > 5e-3 + 1e-2 * std::fabs(fd)) {
      if (++bad <= 5)
        ADD_FAILURE() << what << ": d/dx[" << i << "] analytic " << a << " vs finite difference "
                      << fd;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << idx.size() << " coordinates differ";
}

// ---------------------------------------------------------------- conv

struct ConvCase {
  Shape x, w;
  int64_t pads[4], strides[2], dil[2], group;
};

class ConvGrad : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvGrad, InputWeightBias) {
  const ConvCase &c = GetParam();
  Ctx ctx;
  Rng rng;
  int64_t xs[4], ws[4];
  std::copy(c.x.begin(), c.x.end(), xs);
  std::copy(c.w.begin(), c.w.end(), ws);
  const int64_t oh = (xs[2] + c.pads[0] + c.pads[2] - (c.dil[0] * (ws[2] - 1) + 1)) / c.strides[0] + 1;
  const int64_t ow = (xs[3] + c.pads[1] + c.pads[3] - (c.dil[1] * (ws[3] - 1) + 1)) / c.strides[1] + 1;
  const int64_t ys[4] = {xs[0], ws[0], oh, ow};
  const Shape yshape(ys, ys + 4);
  Vec x = rng.uniform(numel(c.x)), w = rng.uniform(numel(c.w)), b = rng.uniform(ws[0]);
  Vec r = rng.uniform(numel(yshape));
  auto conv = [&](const Vec &xx, const Vec &ww, const Vec &bb, Vec &y) {
    y.assign(static_cast<size_t>(numel(yshape)), 0.f);
    pipert_conv2d_f32(ctx.ctx, xx.data(), xs, ww.data(), ws, bb.data(), c.pads, c.strides, c.dil,
                      c.group, y.data());
  };
  Vec dx(x.size()), dw(w.size()), db(b.size());
  pipert_conv2d_grad_input_f32(ctx.ctx, r.data(), w.data(), ws, xs, c.pads, c.strides, c.dil,
                               c.group, dx.data());
  pipert_conv2d_grad_weight_f32(ctx.ctx, x.data(), xs, r.data(), ws, c.pads, c.strides, c.dil,
                                c.group, dw.data(), 0);
  pipert_conv2d_grad_bias_f32(ctx.ctx, r.data(), ys, db.data(), 0);
  check_grad("conv dx", [&](const Vec &v, Vec &y) { conv(v, w, b, y); }, x, r, dx);
  check_grad("conv dw", [&](const Vec &v, Vec &y) { conv(x, v, b, y); }, w, r, dw);
  check_grad("conv db", [&](const Vec &v, Vec &y) { conv(x, w, v, y); }, b, r, db);
  // Accumulated into a gradient accumulator: the bits of acc + the gradient.
  Vec accw = rng.uniform(w.size()), accb = rng.uniform(b.size());
  Vec sumw = accw, sumb = accb;
  pipert_conv2d_grad_weight_f32(ctx.ctx, x.data(), xs, r.data(), ws, c.pads, c.strides, c.dil,
                                c.group, sumw.data(), 1);
  pipert_conv2d_grad_bias_f32(ctx.ctx, r.data(), ys, sumb.data(), 1);
  expect_accumulated("conv dw", accw, dw, sumw);
  expect_accumulated("conv db", accb, db, sumb);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvGrad,
    ::testing::Values(
        // grouped, asymmetric pads, mixed strides and dilations, odd sizes
        ConvCase{{2, 4, 7, 6}, {6, 2, 3, 2}, {1, 0, 2, 1}, {2, 1}, {1, 2}, 2},
        // pointwise 1x1 (sgemm without im2col)
        ConvCase{{2, 3, 5, 5}, {4, 3, 1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1}, 1},
        // depthwise 3x3, stride 2, same-ish padding
        ConvCase{{1, 3, 9, 7}, {3, 1, 3, 3}, {1, 1, 1, 1}, {2, 2}, {1, 1}, 3},
        // 1-D as H = 1
        ConvCase{{3, 2, 1, 11}, {5, 2, 1, 4}, {0, 2, 0, 1}, {1, 3}, {1, 1}, 1}));

// ---------------------------------------------------------------- pooling

struct PoolCase {
  Shape x;
  int64_t kernel[2], pads[4], strides[2], dil[2];
  int ceil_mode, count_include_pad;
};

class PoolGrad : public ::testing::TestWithParam<PoolCase> {};

TEST_P(PoolGrad, MaxAndAverage) {
  const PoolCase &c = GetParam();
  Ctx ctx;
  Rng rng;
  int64_t xs[4];
  std::copy(c.x.begin(), c.x.end(), xs);
  auto out = [&](int64_t d, bool max) {
    int i = d == 2 ? 0 : 1;
    return pipert_pool_output_dim(xs[d], c.kernel[i], c.pads[i], c.pads[i + 2], c.strides[i],
                                  max ? c.dil[i] : 1, c.ceil_mode);
  };
  Vec x = rng.spaced(numel(c.x));
  {
    const Shape ys{xs[0], xs[1], out(2, true), out(3, true)};
    Vec r = rng.uniform(numel(ys)), dx(x.size());
    pipert_maxpool2d_grad_f32(ctx.ctx, x.data(), xs, r.data(), c.kernel, c.pads, c.strides, c.dil,
                              c.ceil_mode, dx.data());
    check_grad("maxpool dx", [&](const Vec &v, Vec &y) {
      y.assign(static_cast<size_t>(numel(ys)), 0.f);
      pipert_maxpool2d_f32(ctx.ctx, v.data(), xs, c.kernel, c.pads, c.strides, c.dil, c.ceil_mode,
                           y.data(), nullptr);
    }, x, r, dx);
  }
  {
    const Shape ys{xs[0], xs[1], out(2, false), out(3, false)};
    Vec r = rng.uniform(numel(ys)), dx(x.size());
    pipert_avgpool2d_grad_f32(ctx.ctx, r.data(), xs, c.kernel, c.pads, c.strides, c.ceil_mode,
                              c.count_include_pad, dx.data());
    check_grad("avgpool dx", [&](const Vec &v, Vec &y) {
      y.assign(static_cast<size_t>(numel(ys)), 0.f);
      pipert_avgpool2d_f32(ctx.ctx, v.data(), xs, c.kernel, c.pads, c.strides, c.ceil_mode,
                           c.count_include_pad, y.data());
    }, x, r, dx);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PoolGrad,
    ::testing::Values(PoolCase{{2, 3, 7, 6}, {3, 2}, {1, 1, 1, 0}, {2, 2}, {1, 1}, 1, 0},
                      PoolCase{{1, 2, 9, 8}, {2, 3}, {0, 1, 1, 1}, {2, 3}, {2, 1}, 0, 1},
                      PoolCase{{2, 1, 5, 5}, {3, 3}, {1, 1, 1, 1}, {2, 2}, {1, 1}, 1, 1}));

TEST(GlobalAvgPoolGrad, Rank3And4) {
  Ctx ctx;
  Rng rng;
  for (Shape s : {Shape{2, 3, 5, 7}, Shape{3, 2, 9}}) {
    Shape ys(s.size(), 1);
    ys[0] = s[0], ys[1] = s[1];
    Vec x = rng.uniform(numel(s)), r = rng.uniform(numel(ys)), dx(x.size());
    pipert_global_avgpool_grad_f32(ctx.ctx, r.data(), int64_t(s.size()), s.data(), dx.data());
    check_grad("global avgpool dx", [&](const Vec &v, Vec &y) {
      y.assign(static_cast<size_t>(numel(ys)), 0.f);
      pipert_global_avgpool_f32(ctx.ctx, v.data(), int64_t(s.size()), s.data(), y.data());
    }, x, r, dx);
  }
}

// ---------------------------------------------------------------- resize

// Resize is linear in x: its gradient kernel must be the exact adjoint, for
// every mode, both forms (scales, sizes) and a cropping roi.
TEST(ResizeGrad, AdjointOfEveryMode) {
  Ctx ctx;
  Rng rng;
  struct Case {
    int64_t xs[4], ys[4];
    bool scaled;
    float scales[3];
    pipert_resize_mode mode;
    pipert_resize_coord coord;
    pipert_resize_nearest nearest;
    int exclude;
  };
  const Case cases[] = {
      {{2, 3, 4, 5}, {2, 3, 8, 10}, true, {1, 2, 2}, PIPERT_RESIZE_NEAREST,
       PIPERT_RESIZE_ASYMMETRIC, PIPERT_RESIZE_FLOOR, 0},
      {{2, 3, 4, 5}, {2, 3, 7, 3}, false, {}, PIPERT_RESIZE_NEAREST, PIPERT_RESIZE_HALF_PIXEL,
       PIPERT_RESIZE_ROUND_PREFER_CEIL, 0},
      {{2, 3, 4, 5}, {2, 3, 9, 11}, false, {}, PIPERT_RESIZE_LINEAR,
       PIPERT_RESIZE_ALIGN_CORNERS, PIPERT_RESIZE_ROUND_PREFER_FLOOR, 0},
      {{2, 3, 4, 5}, {2, 3, 8, 10}, true, {1, 2, 2}, PIPERT_RESIZE_LINEAR,
       PIPERT_RESIZE_PYTORCH_HALF_PIXEL, PIPERT_RESIZE_ROUND_PREFER_FLOOR, 0},
      {{1, 3, 6, 7}, {1, 2, 3, 4}, true, {0.7f, 0.5f, 0.6f}, PIPERT_RESIZE_LINEAR,
       PIPERT_RESIZE_HALF_PIXEL, PIPERT_RESIZE_ROUND_PREFER_FLOOR, 0},
      {{2, 1, 4, 5}, {2, 1, 6, 10}, true, {1, 1.5f, 2}, PIPERT_RESIZE_CUBIC,
       PIPERT_RESIZE_HALF_PIXEL, PIPERT_RESIZE_ROUND_PREFER_FLOOR, 0},
      {{2, 1, 4, 5}, {2, 1, 3, 8}, false, {}, PIPERT_RESIZE_CUBIC, PIPERT_RESIZE_ASYMMETRIC,
       PIPERT_RESIZE_ROUND_PREFER_FLOOR, 1},
  };
  for (const Case &c : cases) {
    const int64_t nx = c.xs[0] * c.xs[1] * c.xs[2] * c.xs[3];
    const int64_t ny = c.ys[0] * c.ys[1] * c.ys[2] * c.ys[3];
    Vec x = rng.uniform(nx), r = rng.uniform(ny), dx(static_cast<size_t>(nx));
    const float *sc = c.scaled ? c.scales : nullptr;
    pipert_resize_grad_f32(ctx.ctx, r.data(), c.xs, c.ys, sc, nullptr, c.mode, c.coord,
                           c.nearest, -0.75f, c.exclude, dx.data());
    check_grad("resize dx (mode " + std::to_string(c.mode) + ", coord " +
                   std::to_string(c.coord) + ")",
               [&](const Vec &v, Vec &y) {
                 y.assign(static_cast<size_t>(ny), 0.f);
                 pipert_resize_f32(ctx.ctx, v.data(), c.xs, c.ys, sc, nullptr, c.mode, c.coord,
                                   c.nearest, -0.75f, c.exclude, 0.f, y.data());
               },
               x, r, dx);
  }
  // tf_crop_and_resize: extrapolated entries get no gradient.
  const int64_t xs[4] = {2, 1, 4, 5}, ys[4] = {2, 1, 5, 6};
  const float roi[6] = {0, -0.2f, 0.1f, 1, 0.9f, 1.3f};
  Vec x = rng.uniform(40), r = rng.uniform(60), dx(40);
  pipert_resize_grad_f32(ctx.ctx, r.data(), xs, ys, nullptr, roi, PIPERT_RESIZE_LINEAR,
                         PIPERT_RESIZE_TF_CROP_AND_RESIZE, PIPERT_RESIZE_ROUND_PREFER_FLOOR,
                         -0.75f, 0, dx.data());
  check_grad("resize crop dx",
             [&](const Vec &v, Vec &y) {
               y.assign(60, 0.f);
               pipert_resize_f32(ctx.ctx, v.data(), xs, ys, nullptr, roi, PIPERT_RESIZE_LINEAR,
                                 PIPERT_RESIZE_TF_CROP_AND_RESIZE,
                                 PIPERT_RESIZE_ROUND_PREFER_FLOOR, -0.75f, 0, 5.f, y.data());
             },
             x, r, dx);
}

// ---------------------------------------------------------------- normalisation

TEST(LayerNormGrad, XScaleBias) {
  Ctx ctx;
  Rng rng;
  for (auto [s, axis] : {std::pair<Shape, int64_t>{{3, 5, 7}, 1}, {{4, 9}, -1}, {{2, 3, 2, 5}, 2}}) {
    const int64_t rank = int64_t(s.size()), ax = axis < 0 ? axis + rank : axis;
    const int64_t cols = numel(Shape(s.begin() + ax, s.end())), rows = numel(s) / cols;
    Vec x = rng.uniform(numel(s), -2.f, 2.f), sc = rng.uniform(cols), bi = rng.uniform(cols);
    Vec r = rng.uniform(numel(s)), y(x.size()), mean(static_cast<size_t>(rows)), inv(static_cast<size_t>(rows));
    const float eps = 1e-3f;
    pipert_layer_norm_f32(ctx.ctx, x.data(), rank, s.data(), axis, eps, sc.data(), bi.data(),
                          y.data(), mean.data(), inv.data());
    Vec dx(x.size()), ds(static_cast<size_t>(cols)), db(static_cast<size_t>(cols));
    pipert_layer_norm_grad_f32(ctx.ctx, x.data(), rank, s.data(), axis, sc.data(), mean.data(),
                               inv.data(), r.data(), dx.data(), ds.data(), db.data(), 0);
    // Accumulated (each alone, then both): the bits of acc + the gradient.
    for (int bits : {1, 2, 3}) {
      Vec accs = rng.uniform(cols), accb = rng.uniform(cols), sums = accs, sumb = accb;
      Vec dx2(x.size());
      pipert_layer_norm_grad_f32(ctx.ctx, x.data(), rank, s.data(), axis, sc.data(), mean.data(),
                                 inv.data(), r.data(), dx2.data(), sums.data(), sumb.data(), bits);
      EXPECT_EQ(dx2, dx);
      expect_accumulated("layernorm dscale", accs, ds, sums, bits & 1);
      expect_accumulated("layernorm dbias", accb, db, sumb, bits & 2);
    }
    auto f = [&](const Vec &xx, const Vec &ss, const Vec &bb, Vec &out) {
      out.assign(xx.size(), 0.f);
      pipert_layer_norm_f32(ctx.ctx, xx.data(), rank, s.data(), axis, eps, ss.data(), bb.data(),
                            out.data(), nullptr, nullptr);
    };
    check_grad("layernorm dx", [&](const Vec &v, Vec &o) { f(v, sc, bi, o); }, x, r, dx);
    check_grad("layernorm dscale", [&](const Vec &v, Vec &o) { f(x, v, bi, o); }, sc, r, ds);
    check_grad("layernorm dbias", [&](const Vec &v, Vec &o) { f(x, sc, v, o); }, bi, r, db);
  }
}

TEST(BatchNormGrad, TrainingXScaleBias) {
  Ctx ctx;
  Rng rng;
  for (Shape s : {Shape{3, 4, 5}, Shape{2, 3, 3, 5}, Shape{7, 2}}) {
    const int64_t rank = int64_t(s.size()), C = s[1];
    Vec x = rng.uniform(numel(s), -2.f, 2.f), sc = rng.uniform(C), bi = rng.uniform(C);
    Vec mean = rng.uniform(C), var = rng.uniform(C, 0.5f, 2.f);
    Vec r = rng.uniform(numel(s)), y(x.size()), sm(static_cast<size_t>(C)), sinv(static_cast<size_t>(C));
    const float eps = 1e-3f;
    pipert_batch_norm_training_f32(ctx.ctx, x.data(), rank, s.data(), sc.data(), bi.data(),
                                   mean.data(), var.data(), eps, 0.9f, y.data(), nullptr, nullptr,
                                   sm.data(), sinv.data());
    Vec dx(x.size()), ds(static_cast<size_t>(C)), db(static_cast<size_t>(C));
    pipert_batch_norm_grad_f32(ctx.ctx, x.data(), rank, s.data(), sc.data(), eps, r.data(),
                               dx.data(), ds.data(), db.data(), 0);
    for (int bits : {1, 2, 3}) {
      Vec accs = rng.uniform(C), accb = rng.uniform(C), sums = accs, sumb = accb;
      Vec dx2(x.size());
      pipert_batch_norm_grad_f32(ctx.ctx, x.data(), rank, s.data(), sc.data(), eps, r.data(),
                                 dx2.data(), sums.data(), sumb.data(), bits);
      EXPECT_EQ(dx2, dx);
      expect_accumulated("batchnorm dscale", accs, ds, sums, bits & 1);
      expect_accumulated("batchnorm dbias", accb, db, sumb, bits & 2);
    }
    auto f = [&](const Vec &xx, const Vec &ss, const Vec &bb, Vec &out) {
      out.assign(xx.size(), 0.f);
      pipert_batch_norm_training_f32(ctx.ctx, xx.data(), rank, s.data(), ss.data(), bb.data(),
                                     mean.data(), var.data(), eps, 0.9f, out.data(), nullptr,
                                     nullptr, nullptr, nullptr);
    };
    check_grad("batchnorm dx", [&](const Vec &v, Vec &o) { f(v, sc, bi, o); }, x, r, dx);
    check_grad("batchnorm dscale", [&](const Vec &v, Vec &o) { f(x, v, bi, o); }, sc, r, ds);
    check_grad("batchnorm dbias", [&](const Vec &v, Vec &o) { f(x, sc, v, o); }, bi, r, db);
  }
}

TEST(SoftmaxGrad, SoftmaxAndLogSoftmax) {
  Ctx ctx;
  Rng rng;
  for (auto [s, axis] : {std::pair<Shape, int64_t>{{3, 4, 5}, 1}, {{7, 9}, -1}, {{5, 3, 2}, 0},
                         {{2, 3, 17}, -1}, {{4, 8}, 1}}) {
    const int64_t rank = int64_t(s.size());
    Vec x = rng.uniform(numel(s), -3.f, 3.f), r = rng.uniform(numel(s));
    for (bool log : {false, true}) {
      auto fwd = log ? pipert_log_softmax_f32 : pipert_softmax_f32;
      Vec y(x.size()), dx(x.size());
      fwd(ctx.ctx, x.data(), rank, s.data(), axis, y.data());
      (log ? pipert_log_softmax_grad_f32 : pipert_softmax_grad_f32)(
          ctx.ctx, y.data(), r.data(), rank, s.data(), axis, dx.data());
      check_grad(log ? "logsoftmax dx" : "softmax dx", [&](const Vec &v, Vec &o) {
        o.assign(v.size(), 0.f);
        fwd(ctx.ctx, v.data(), rank, s.data(), axis, o.data());
      }, x, r, dx);
    }
  }
}

// ---------------------------------------------------------------- losses

TEST(LossGrad, SoftmaxCrossEntropyAndNll) {
  Ctx ctx;
  Rng rng;
  for (Shape s : {Shape{6, 5}, Shape{3, 4, 2, 3}, Shape{4, 19}}) {
    const int64_t rank = int64_t(s.size()), N = s[0], C = s[1], S = numel(s) / (N * C);
    std::vector<int64_t> labels(static_cast<size_t>(N * S));
    std::uniform_int_distribution<int64_t> d(0, C - 1);
    for (auto &l : labels)
      l = d(rng.gen);
    labels[1] = 2; // ignored below
    Vec x = rng.uniform(numel(s), -2.f, 2.f), w = rng.uniform(C, 0.5f, 1.5f);
    for (int red = 0; red < 3; ++red)
      for (int weighted = 0; weighted < 2; ++weighted) {
        const pipert_reduction rd = pipert_reduction(red);
        const float *wp = weighted ? w.data() : nullptr;
        const Shape ls = rd == PIPERT_REDUCTION_NONE ? Shape{N * S} : Shape{};
        Vec r = rng.uniform(numel(ls)), loss(static_cast<size_t>(numel(ls))), lp(x.size()), dx(x.size());
        const std::string tag = "red=" + std::to_string(red) + " w=" + std::to_string(weighted);
        pipert_softmax_cross_entropy_loss_f32(ctx.ctx, x.data(), rank, s.data(), labels.data(),
                                              wp, 1, 2, rd, loss.data(), lp.data());
        pipert_softmax_cross_entropy_loss_grad_f32(ctx.ctx, r.data(), lp.data(), rank, s.data(),
                                                   labels.data(), wp, 1, 2, rd, dx.data());
        check_grad("sce dscores " + tag, [&](const Vec &v, Vec &o) {
          o.assign(loss.size(), 0.f);
          pipert_softmax_cross_entropy_loss_f32(ctx.ctx, v.data(), rank, s.data(), labels.data(),
                                                wp, 1, 2, rd, o.data(), nullptr);
        }, x, r, dx);
        // NLL on arbitrary inputs (it is linear in them).
        pipert_nll_loss_grad_f32(ctx.ctx, r.data(), rank, s.data(), labels.data(), wp, 1, 2, rd,
                                 dx.data());
        check_grad("nll dinput " + tag, [&](const Vec &v, Vec &o) {
          o.assign(loss.size(), 0.f);
          pipert_nll_loss_f32(ctx.ctx, v.data(), rank, s.data(), labels.data(), wp, 1, 2, rd,
                              o.data());
        }, x, r, dx);
      }
  }
}

// ---------------------------------------------------------------- data movement

TEST(GatherGrad, ScatterAddWithRepeatsAndNegatives) {
  Ctx ctx;
  Rng rng;
  const Shape ds{5, 4, 3};
  // Repeated after wrapping: axis 1 (extent 4) hits 0, 1 and 3 twice; axis 0
  // (extent 5) hits 1 three times.
  const std::vector<int64_t> idx{1, -1, 3, 1, 0, -4};
  const Shape is{2, 3};
  for (int64_t axis : {1, -3}) {
    const int64_t ax = axis < 0 ? axis + 3 : axis;
    Shape ys(ds.begin(), ds.begin() + ax);
    ys.insert(ys.end(), is.begin(), is.end());
    ys.insert(ys.end(), ds.begin() + ax + 1, ds.end());
    Vec x = rng.uniform(numel(ds)), r = rng.uniform(numel(ys)), dx(x.size());
    pipert_gather_grad_f32(ctx.ctx, r.data(), 3, ds.data(), idx.data(), 2, is.data(), axis,
                           dx.data());
    check_grad("gather ddata", [&](const Vec &v, Vec &o) {
      o.assign(static_cast<size_t>(numel(ys)), 0.f);
      pipert_gather(ctx.ctx, PIPERT_F32, v.data(), 3, ds.data(), idx.data(), 2, is.data(), axis,
                    o.data());
    }, x, r, dx);
  }
}

TEST(GatherNDGrad, ScatterAddWithRepeatsNegativesAndBatchDims) {
  Ctx ctx;
  Rng rng;
  const Shape ds{3, 4, 2, 5};
  // batch_dims 0: 3 pairs into axes 0 and 1, (1, 2) twice (once as (-2, -2)).
  // batch_dims 1: per batch row, 2 pairs into axes 1 and 2, one repeated.
  struct Case {
    int64_t b;
    std::vector<int64_t> idx;
    Shape is;
  };
  const std::vector<Case> cases = {
      {0, {1, 2, 0, -1, -2, -2}, {3, 2}},
      {1, {3, 1, 3, 1, 0, 0, 2, -1, 1, 1, 1, 1}, {3, 2, 2}},
  };
  for (const Case &c : cases) {
    Shape ys(c.is.begin(), c.is.end() - 1);
    ys.insert(ys.end(), ds.begin() + c.b + c.is.back(), ds.end());
    Vec x = rng.uniform(numel(ds)), r = rng.uniform(numel(ys)), dx(x.size());
    pipert_gather_nd_grad_f32(ctx.ctx, r.data(), 4, ds.data(), c.idx.data(),
                              int64_t(c.is.size()), c.is.data(), c.b, dx.data());
    check_grad("gathernd ddata", [&](const Vec &v, Vec &o) {
      o.assign(static_cast<size_t>(numel(ys)), 0.f);
      pipert_gather_nd(ctx.ctx, PIPERT_F32, v.data(), 4, ds.data(), c.idx.data(),
                       int64_t(c.is.size()), c.is.data(), c.b, o.data());
    }, x, r, dx);
  }
}

TEST(ScatterNDGrad, DataAndUpdates) {
  Ctx ctx;
  Rng rng;
  const Shape ds{4, 3, 5};
  const std::vector<int64_t> idx{2, 0, -4, 1}; // tuples (2, 0) and (0, 1)
  const Shape is{2, 2}, us{2, 5};
  Vec x = rng.uniform(numel(ds)), u = rng.uniform(numel(us)), r = rng.uniform(numel(ds));
  // data: replaced slices get no gradient; updates: GatherND of dY.
  Vec dx(x.size()), du(u.size());
  pipert_scatter_nd_grad_f32(ctx.ctx, r.data(), 3, ds.data(), idx.data(), 2, is.data(),
                             dx.data());
  pipert_gather_nd(ctx.ctx, PIPERT_F32, r.data(), 3, ds.data(), idx.data(), 2, is.data(), 0,
                   du.data());
  for (int64_t red : {int64_t(PIPERT_SCATTER_NONE), int64_t(PIPERT_SCATTER_ADD)}) {
    check_grad("scatternd ddata", [&](const Vec &v, Vec &o) {
      o.assign(x.size(), 0.f);
      pipert_scatter_nd(ctx.ctx, PIPERT_F32, v.data(), 3, ds.data(), idx.data(), 2, is.data(),
                        u.data(), red, o.data());
    }, x, r, red == PIPERT_SCATTER_ADD ? r : dx);
    check_grad("scatternd dupdates", [&](const Vec &v, Vec &o) {
      o.assign(x.size(), 0.f);
      pipert_scatter_nd(ctx.ctx, PIPERT_F32, x.data(), 3, ds.data(), idx.data(), 2, is.data(),
                        v.data(), red, o.data());
    }, u, r, du);
  }
}

TEST(GatherElementsGrad, RepeatsNegativesAndSmallerIndices) {
  Ctx ctx;
  Rng rng;
  const Shape ds{4, 3, 5};
  // Indices (3, 2, 5): smaller than the data on axis 0 and 1 (axis 2
  // gathered) or (4, 3, 2) along axis 2; repeats and negatives included.
  for (int64_t axis : {0, -1}) {
    const Shape is = axis == 0 ? Shape{3, 2, 5} : Shape{4, 3, 2};
    const int64_t dim = axis == 0 ? 4 : 5;
    std::vector<int64_t> idx(static_cast<size_t>(numel(is)));
    for (size_t i = 0; i < idx.size(); ++i)
      idx[i] = int64_t(i * 7 % size_t(dim)) - (i % 3 == 0 ? dim : 0);
    Vec x = rng.uniform(numel(ds)), r = rng.uniform(numel(is)), dx(x.size());
    pipert_gather_elements_grad_f32(ctx.ctx, r.data(), 3, ds.data(), idx.data(), is.data(), axis,
                                    dx.data());
    check_grad("gatherelements ddata", [&](const Vec &v, Vec &o) {
      o.assign(static_cast<size_t>(numel(is)), 0.f);
      pipert_gather_elements(ctx.ctx, PIPERT_F32, v.data(), 3, ds.data(), idx.data(), is.data(),
                             axis, o.data());
    }, x, r, dx);
  }
}

TEST(ScatterElementsGrad, DataAndUpdates) {
  Ctx ctx;
  Rng rng;
  const Shape ds{3, 5};
  // Along axis 1, distinct within each row (reduction none), one negative.
  const std::vector<int64_t> idx{4, 0, 2, -4, 3, 0};
  const Shape is{3, 2};
  Vec x = rng.uniform(numel(ds)), u = rng.uniform(numel(is)), r = rng.uniform(numel(ds));
  Vec dx(x.size()), du(u.size());
  pipert_scatter_elements_grad_f32(ctx.ctx, r.data(), 2, ds.data(), idx.data(), is.data(), 1,
                                   dx.data());
  pipert_gather_elements(ctx.ctx, PIPERT_F32, r.data(), 2, ds.data(), idx.data(), is.data(), 1,
                         du.data());
  for (int64_t red : {int64_t(PIPERT_SCATTER_NONE), int64_t(PIPERT_SCATTER_ADD)}) {
    check_grad("scatterelements ddata", [&](const Vec &v, Vec &o) {
      o.assign(x.size(), 0.f);
      pipert_scatter_elements(ctx.ctx, PIPERT_F32, v.data(), 2, ds.data(), idx.data(), is.data(),
                              u.data(), 1, red, o.data());
    }, x, r, red == PIPERT_SCATTER_ADD ? r : dx);
    check_grad("scatterelements dupdates", [&](const Vec &v, Vec &o) {
      o.assign(x.size(), 0.f);
      pipert_scatter_elements(ctx.ctx, PIPERT_F32, x.data(), 2, ds.data(), idx.data(), is.data(),
                              v.data(), 1, red, o.data());
    }, u, r, du);
  }
}

TEST(SliceGrad, NegativeStepsAndClamping) {
  Ctx ctx;
  Rng rng;
  const Shape xs{6, 5, 4};
  const std::vector<int64_t> starts{-1, 1}, ends{-100, 100}, axes{0, 2}, steps{-2, 2};
  Shape ys(3);
  pipert_slice_shape(3, xs.data(), 2, starts.data(), ends.data(), axes.data(), steps.data(),
                     ys.data());
  EXPECT_EQ(ys, (Shape{3, 5, 2}));
  Vec x = rng.uniform(numel(xs)), r = rng.uniform(numel(ys)), dx(x.size());
  pipert_slice_grad_f32(ctx.ctx, r.data(), 3, xs.data(), 2, starts.data(), ends.data(),
                        axes.data(), steps.data(), dx.data());
  check_grad("slice dx", [&](const Vec &v, Vec &o) {
    o.assign(static_cast<size_t>(numel(ys)), 0.f);
    pipert_slice(ctx.ctx, PIPERT_F32, v.data(), 3, xs.data(), 2, starts.data(), ends.data(),
                 axes.data(), steps.data(), o.data());
  }, x, r, dx);
}

TEST(DropoutGrad, MaskedScaled) {
  Rng rng;
  const int64_t n = 97;
  const float ratio = 0.3f;
  Vec x = rng.uniform(n), r = rng.uniform(n), y(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
  std::vector<uint8_t> mask(static_cast<size_t>(n));
  {
    Ctx c; // seed 7: every context below draws the same mask
    pipert_dropout_f32(c.ctx, x.data(), n, ratio, 1, y.data(), mask.data());
    pipert_dropout_grad_f32(c.ctx, r.data(), mask.data(), n, ratio, dx.data());
  }
  int kept = 0;
  for (auto m : mask)
    kept += m;
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, n);
  check_grad("dropout dx", [&](const Vec &v, Vec &o) {
    Ctx c;
    o.assign(static_cast<size_t>(n), 0.f);
    pipert_dropout_f32(c.ctx, v.data(), n, ratio, 1, o.data(), nullptr);
  }, x, r, dx);
}

// ---------------------------------------------------------------- broadcasting

TEST(ReduceToShape, BinaryOpGradients) {
  Ctx ctx;
  Rng rng;
  const Shape as{4, 1, 5}, bs{3, 1}, ys{4, 3, 5};
  Vec a = rng.uniform(numel(as)), b = rng.uniform(numel(bs), 0.5f, 2.f), r = rng.uniform(numel(ys));
  auto bin = [&](pipert_binary_op op, const Vec &u, const Shape &us, const Vec &v, const Shape &vs,
                 const Shape &os) {
    Vec o(static_cast<size_t>(numel(os)));
    pipert_binary_f32(ctx.ctx, op, u.data(), int64_t(us.size()), us.data(), v.data(),
                      int64_t(vs.size()), vs.data(), o.data());
    return o;
  };
  auto reduce = [&](const Vec &g, const Shape &to) {
    Vec o(static_cast<size_t>(numel(to)));
    pipert_reduce_to_shape_f32(ctx.ctx, g.data(), int64_t(ys.size()), ys.data(),
                               int64_t(to.size()), to.data(), o.data());
    return o;
  };
  Vec neg_r(r.size());
  pipert_unary_f32(ctx.ctx, PIPERT_UNARY_NEG, r.data(), int64_t(r.size()), neg_r.data());
  const Vec y_div = bin(PIPERT_BINARY_DIV, a, as, b, bs, ys);
  struct Case {
    pipert_binary_op op;
    const char *name;
    Vec da, db;
  } cases[] = {
      {PIPERT_BINARY_ADD, "add", reduce(r, as), reduce(r, bs)},
      {PIPERT_BINARY_SUB, "sub", reduce(r, as), reduce(neg_r, bs)},
      {PIPERT_BINARY_MUL, "mul", reduce(bin(PIPERT_BINARY_MUL, r, ys, b, bs, ys), as),
       reduce(bin(PIPERT_BINARY_MUL, r, ys, a, as, ys), bs)},
      // d(a/b)/db = -(a/b)/b
      {PIPERT_BINARY_DIV, "div", reduce(bin(PIPERT_BINARY_DIV, r, ys, b, bs, ys), as),
       reduce(bin(PIPERT_BINARY_DIV, bin(PIPERT_BINARY_MUL, neg_r, ys, y_div, ys, ys), ys, b, bs, ys),
              bs)},
  };
  for (const Case &c : cases) {
    check_grad(std::string(c.name) + " da", [&](const Vec &v, Vec &o) {
      o = bin(c.op, v, as, b, bs, ys);
    }, a, r, c.da);
    check_grad(std::string(c.name) + " db", [&](const Vec &v, Vec &o) {
      o = bin(c.op, a, as, v, bs, ys);
    }, b, r, c.db);
  }
}

TEST(MatMulGrad, TransposedMatMulAndReduceToShape) {
  Ctx ctx;
  Rng rng;
  const Shape as{2, 1, 3, 4}, bs{5, 4, 6}, ys{2, 5, 3, 6};
  Vec a = rng.uniform(numel(as)), b = rng.uniform(numel(bs)), r = rng.uniform(numel(ys));
  auto mm = [&](const Vec &u, const Vec &v, Vec &o) {
    o.assign(static_cast<size_t>(numel(ys)), 0.f);
    pipert_matmul_f32(ctx.ctx, u.data(), 4, as.data(), v.data(), 3, bs.data(), o.data());
  };
  // dA = sum_broadcast(dY @ B^T), dB = sum_broadcast(A^T @ dY)
  const Shape da_full{2, 5, 3, 4}, db_full{2, 5, 4, 6};
  Vec ga(static_cast<size_t>(numel(da_full))), gb(static_cast<size_t>(numel(db_full))), da(a.size()), db(b.size());
  pipert_matmul_t_f32(ctx.ctx, r.data(), 4, ys.data(), 0, b.data(), 3, bs.data(), 1, ga.data());
  pipert_matmul_t_f32(ctx.ctx, a.data(), 4, as.data(), 1, r.data(), 4, ys.data(), 0, gb.data());
  pipert_reduce_to_shape_f32(ctx.ctx, ga.data(), 4, da_full.data(), 4, as.data(), da.data());
  pipert_reduce_to_shape_f32(ctx.ctx, gb.data(), 4, db_full.data(), 3, bs.data(), db.data());
  check_grad("matmul da", [&](const Vec &v, Vec &o) { mm(v, b, o); }, a, r, da);
  check_grad("matmul db", [&](const Vec &v, Vec &o) { mm(a, v, o); }, b, r, db);
}

// ---------------------------------------------------------------- activations

TEST(ActivationGrad, ReluTanhSigmoidErf) {
  Ctx ctx;
  Rng rng;
  const int64_t n = 37;
  Vec x = rng.spaced(n, 0.11f), r = rng.uniform(n);
  struct Act {
    pipert_unary_op op;
    const char *name;
    bool from_output;
    void (*grad)(pipert_context *, const float *, const float *, int64_t, float *);
  } acts[] = {{PIPERT_UNARY_RELU, "relu", false, pipert_relu_grad_f32},
              {PIPERT_UNARY_TANH, "tanh", true, pipert_tanh_grad_f32},
              {PIPERT_UNARY_SIGMOID, "sigmoid", true, pipert_sigmoid_grad_f32},
              {PIPERT_UNARY_ERF, "erf", false, pipert_erf_grad_f32}};
  for (const Act &a : acts) {
    Vec y(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
    pipert_unary_f32(ctx.ctx, a.op, x.data(), n, y.data());
    a.grad(ctx.ctx, a.from_output ? y.data() : x.data(), r.data(), n, dx.data());
    check_grad(std::string(a.name) + " dx", [&](const Vec &v, Vec &o) {
      o.assign(static_cast<size_t>(n), 0.f);
      pipert_unary_f32(ctx.ctx, a.op, v.data(), n, o.data());
    }, x, r, dx);
  }
}

// ---------------------------------------------------------------- LSTM / GRU

// The BPTT kernels against finite differences of the forward, every
// direction, with the cotangent on Y, Y_h and (LSTM) Y_c together.
// GRU with linear_before_reset 1 and 0. The gradient from the forward's
// saved states (a training forward's extra result) is the recomputing
// one's, bit for bit, and that forward's Y, Y_h, Y_c are the plain one's.
class RecurrentGrad : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(RecurrentGrad, AllInputs) {
  const int cellKind = std::get<0>(GetParam()); // 0 LSTM, 1 GRU lbr=1, 2 GRU lbr=0
  const bool lstm = cellKind == 0;
  const int32_t lbr = cellKind == 2 ? 0 : 1;
  const int32_t dir = std::get<1>(GetParam());
  const int64_t T = 4, B = 3, I = 5, H = 4, D = dir == 2 ? 2 : 1, G = lstm ? 4 : 3;
  Ctx ctx;
  Rng rng;
  Vec x = rng.uniform(T * B * I), w = rng.uniform(D * G * H * I, -0.6f, 0.6f),
      r = rng.uniform(D * G * H * H, -0.6f, 0.6f), b = rng.uniform(D * 2 * G * H),
      h0 = rng.uniform(D * B * H), c0 = rng.uniform(D * B * H);
  const int64_t ny = T * D * B * H, ns = D * B * H;
  const int64_t nout = ny + ns + (lstm ? ns : 0);
  Vec rc = rng.uniform(nout);
  auto run = [&](const Vec &xx, const Vec &ww, const Vec &rr, const Vec &bb, const Vec &hh,
                 const Vec &cc, Vec &out) {
    out.assign(size_t(nout), 0.f);
    if (lstm)
      pipert_lstm_f32(ctx.ctx, xx.data(), ww.data(), rr.data(), bb.data(), hh.data(), cc.data(), T,
                      B, I, H, dir, out.data(), out.data() + ny, out.data() + ny + ns, nullptr);
    else
      pipert_gru_f32(ctx.ctx, xx.data(), ww.data(), rr.data(), bb.data(), hh.data(), T, B, I, H,
                     dir, lbr, out.data(), out.data() + ny, nullptr);
  };
  // The training forward: the same outputs, and the saved states.
  Vec plain, trained(size_t(nout), 0.f), saved(size_t(D * (lstm ? 6 : 5) * T * B * H), -1.f);
  run(x, w, r, b, h0, c0, plain);
  if (lstm)
    pipert_lstm_f32(ctx.ctx, x.data(), w.data(), r.data(), b.data(), h0.data(), c0.data(), T, B,
                    I, H, dir, trained.data(), trained.data() + ny, trained.data() + ny + ns,
                    saved.data());
  else
    pipert_gru_f32(ctx.ctx, x.data(), w.data(), r.data(), b.data(), h0.data(), T, B, I, H, dir,
                   lbr, trained.data(), trained.data() + ny, saved.data());
  const std::string k = std::string(lstm ? "lstm" : lbr ? "gru" : "gru lbr0") + " dir " +
                        std::to_string(dir);
  ASSERT_EQ(0, std::memcmp(plain.data(), trained.data(), plain.size() * sizeof(float))) << k;
  for (float v : saved)
    ASSERT_NE(v, -1.f) << k << ": a saved state left unwritten";
  Vec grads[2];
  for (int withSaved = 0; withSaved < 2; ++withSaved) {
    Vec dx(x.size()), dw(w.size()), dr(r.size()), db(b.size()), dh0(h0.size()), dc0(c0.size());
    const float *sv = withSaved ? saved.data() : nullptr;
    if (lstm)
      pipert_lstm_grad_f32(ctx.ctx, x.data(), w.data(), r.data(), b.data(), h0.data(),
                           c0.data(), rc.data(), rc.data() + ny, rc.data() + ny + ns, sv, T, B,
                           I, H, dir, dx.data(), dw.data(), dr.data(), db.data(), dh0.data(),
                           dc0.data());
    else
      pipert_gru_grad_f32(ctx.ctx, x.data(), w.data(), r.data(), b.data(), h0.data(), rc.data(),
                          rc.data() + ny, sv, T, B, I, H, dir, lbr, dx.data(), dw.data(),
                          dr.data(), db.data(), dh0.data());
    for (const Vec *v : {&dx, &dw, &dr, &db, &dh0, &dc0})
      grads[withSaved].insert(grads[withSaved].end(), v->begin(), v->end());
  }
  ASSERT_EQ(0, std::memcmp(grads[0].data(), grads[1].data(), grads[0].size() * sizeof(float)))
      << k << ": the gradient from the saved states differs from the recomputing one";
  auto part = [&](size_t from, size_t n) {
    return Vec(grads[1].begin() + long(from), grads[1].begin() + long(from + n));
  };
  size_t at = 0;
  Vec dx = part(at, x.size());
  Vec dw = part(at += x.size(), w.size());
  Vec dr = part(at += w.size(), r.size());
  Vec db = part(at += r.size(), b.size());
  Vec dh0 = part(at += b.size(), h0.size());
  Vec dc0 = part(at += h0.size(), c0.size());
  check_grad(k + " dx", [&](const Vec &v, Vec &y) { run(v, w, r, b, h0, c0, y); }, x, rc, dx);
  check_grad(k + " dw", [&](const Vec &v, Vec &y) { run(x, v, r, b, h0, c0, y); }, w, rc, dw);
  check_grad(k + " dr", [&](const Vec &v, Vec &y) { run(x, w, v, b, h0, c0, y); }, r, rc, dr);
  check_grad(k + " db", [&](const Vec &v, Vec &y) { run(x, w, r, v, h0, c0, y); }, b, rc, db);
  check_grad(k + " dh0", [&](const Vec &v, Vec &y) { run(x, w, r, b, v, c0, y); }, h0, rc, dh0);
  if (lstm)
    check_grad(k + " dc0", [&](const Vec &v, Vec &y) { run(x, w, r, b, h0, v, y); }, c0, rc,
               dc0);
}

INSTANTIATE_TEST_SUITE_P(Cells, RecurrentGrad,
                         ::testing::Combine(::testing::Values(0, 1, 2), ::testing::Values(0, 1, 2)));

} // namespace

// ---------------------------------------------------------------- attention

// Scaled dot-product attention (pipert_attention_f32) on a packed (B, T,
// 3*H*dh) projection, a (B, H, T, dh) layout and separate (B, T, H*dh)
// tensors with a cross-length key (s != t), masks shared by every pair or
// per batch entry (a key padding mask) or per pair: the forward against a
// double reference, the gradient (from the forward's probabilities)
// against central differences of every input.
struct AttnCase {
  int64_t b, h, t, s, dh;
  int layout; // 0 packed self-attention, 1 (B, H, T, dh), 2 separate (B, T, H*dh),
              // 3 packed sequence first (T, B, 3*H*dh), 4 separate (T, B, H*dh)
  bool causal;
  int mask; // 0 none, 1 one (T, S) mask, 2 (B, 1, 1, S) key padding, 3 (B, H, T, S);
            // float biases: 4 (B, 1, 1, S) (BERT's padding, a -1e9 fill), 5 (H, T, S)
  float dropout = 0.f; // of the probabilities
  int64_t kvh = 0;      // K's and V's heads (layout 1; 0: h; fewer: grouped-query)
};

void PrintTo(const AttnCase &c, std::ostream *os) {
  *os << "b" << c.b << " h" << c.h << " t" << c.t << " s" << c.s << " dh" << c.dh << " layout"
      << c.layout << (c.causal ? " causal" : "") << " mask" << c.mask << " dropout" << c.dropout
      << " kvh" << c.kvh;
}

class AttentionGrad : public ::testing::TestWithParam<AttnCase> {};

// Test names from the case (gtest's default prints the struct's bytes,
// padding included, which may differ between runs).
std::string attn_case_name(const ::testing::TestParamInfo<AttnCase> &info) {
  static const char *layouts[] = {"Packed", "FourD", "Separate", "SeqFirstPacked",
                                  "SeqFirstSeparate"};
  const AttnCase &c = info.param;
  static const char *masks[] = {"", "Masked", "KeyPadded", "PairMasked", "PaddingBias",
                                "HeadBias"};
  return std::string(layouts[c.layout]) + (c.causal ? "Causal" : "") + masks[c.mask] +
         (c.dropout > 0.f ? "Dropout" : "") + (c.kvh && c.kvh != c.h ? "Grouped" : "") + "_" +
         std::to_string(info.index);
}

TEST_P(AttentionGrad, ForwardAndEveryInput) {
  const AttnCase c = GetParam();
  Ctx ctx;
  Rng rng;
  const int64_t d = c.h * c.dh;
  // Strides (batch, head, row) of q, k, v, y and each operand's size.
  int64_t st[12];
  size_t nq, nk, nv;
  const bool seq_first = c.layout >= 3;
  // Grouped-query: query head h reads key/value head h / group.
  const int64_t kvh = c.kvh ? c.kvh : c.h, group = c.h / kvh;
  const int64_t ydims[3] = {seq_first ? d : c.t * d, c.dh, seq_first ? c.b * d : d};
  if (c.layout == 3) {
    const int64_t row = 3 * d;
    const int64_t a[9] = {row, c.dh, c.b * row, row, c.dh, c.b * row, row, c.dh, c.b * row};
    std::copy(a, a + 9, st);
    nq = size_t(c.b * c.t * row);
    nk = nv = 0;
  } else if (c.layout == 4) {
    const int64_t a[9] = {d, c.dh, c.b * d, d, c.dh, c.b * d, d, c.dh, c.b * d};
    std::copy(a, a + 9, st);
    nq = size_t(c.b * c.t * d);
    nk = nv = size_t(c.b * c.s * d);
  } else if (c.layout == 0) {
    const int64_t row = 3 * d;
    const int64_t a[9] = {c.t * row, c.dh, row, c.t * row, c.dh, row, c.t * row, c.dh, row};
    std::copy(a, a + 9, st);
    nq = size_t(c.b * c.t * row);
    nk = nv = 0;
  } else if (c.layout == 1) {
    const int64_t a[9] = {c.h * c.t * c.dh, c.t * c.dh, c.dh, kvh * c.s * c.dh, c.s * c.dh,
                          c.dh, kvh * c.s * c.dh, c.s * c.dh, c.dh};
    std::copy(a, a + 9, st);
    nq = size_t(c.b * c.h * c.t * c.dh);
    nk = nv = size_t(c.b * kvh * c.s * c.dh);
  } else {
    const int64_t a[9] = {c.t * d, c.dh, d, c.s * d, c.dh, d, c.s * d, c.dh, d};
    std::copy(a, a + 9, st);
    nq = size_t(c.b * c.t * d);
    nk = nv = size_t(c.b * c.s * d);
  }
  std::copy(ydims, ydims + 3, st + 9);
  const float scale = 1.f / std::sqrt(float(c.dh));
  // The mask's (batch, head, row) strides (null: one t x s mask).
  int64_t mst[3] = {0, 0, c.s};
  if (c.mask == 2 || c.mask == 4) {
    mst[0] = c.s;
    mst[2] = 0;
  } else if (c.mask == 3) {
    mst[0] = c.h * c.t * c.s;
    mst[1] = c.t * c.s;
  } else if (c.mask == 5) {
    mst[1] = c.t * c.s;
  }
  const int64_t *msp = c.mask >= 2 ? mst : nullptr;
  const size_t nmask = size_t(c.mask == 2 || c.mask == 4 ? c.b * c.s
                              : c.mask == 3              ? c.b * c.h * c.t * c.s
                              : c.mask == 5              ? c.h * c.t * c.s
                                                         : c.t * c.s);
  std::vector<uint8_t> mask(nmask, 1);
  std::vector<float> bias(nmask, 0.f);
  for (size_t i = 0; i < mask.size(); ++i) {
    // Column 0 always attends.
    const bool keep = (uint32_t(i) * 2654435761u >> 7) % 5 != 0 || i % size_t(c.s) == 0;
    mask[i] = keep;
    bias[i] = c.mask == 4 ? (keep ? 0.f : -1e9f) : float((i * 37) % 11) * 0.3f - 1.5f;
  }
  const bool is_bias = c.mask >= 4;
  const uint8_t *mp = c.mask && !is_bias ? mask.data() : nullptr;
  const float *bp = is_bias ? bias.data() : nullptr;
  auto attends = [&](int64_t b, int64_t h, int64_t i, int64_t j) {
    return !mp || mp[b * mst[0] + h * mst[1] + i * mst[2] + j] != 0;
  };
  auto bias_at = [&](int64_t b, int64_t h, int64_t i, int64_t j) {
    return bp ? double(bp[b * mst[0] + h * mst[1] + i * mst[2] + j]) : 0.0;
  };
  Vec q = rng.uniform(int64_t(nq)), k = rng.uniform(int64_t(nk)), v = rng.uniform(int64_t(nv));
  // Packed: k and v are q's column blocks d and 2d.
  const bool packed = c.layout == 0 || c.layout == 3;
  auto ptrs = [&](const Vec &qq, const Vec &kk, const Vec &vv) {
    if (packed)
      return std::array<const float *, 3>{qq.data(), qq.data() + d, qq.data() + 2 * d};
    return std::array<const float *, 3>{qq.data(), kk.data(), vv.data()};
  };
  const size_t ny = size_t(c.b * c.t * d), np = size_t(c.b * c.h * c.t * c.s);
  // Dropout: every forward from one state of the context's random stream,
  // so that each draws one mask; the mask pipert_dropout_f32 draws from
  // that state over P's elements is the one expected.
  const uint64_t state = pipert_context_random_state(ctx.ctx);
  std::vector<uint8_t> keep(np, 1);
  if (c.dropout > 0.f) {
    Vec ones(np, 1.f), dropped(np);
    pipert_dropout_f32(ctx.ctx, ones.data(), int64_t(np), c.dropout, 1, dropped.data(),
                       keep.data());
    size_t kept = 0;
    for (uint8_t k : keep)
      kept += k;
    ASSERT_GT(kept, 0u);
    ASSERT_LT(kept, np);
  }
  const double keep_scale = 1.0 / (1.0 - double(c.dropout));
  auto forward_on = [&](pipert_context *cx, const Vec &qq, const Vec &kk, const Vec &vv, Vec &y,
                        Vec *probs) {
    y.assign(ny, 0.f);
    auto p = ptrs(qq, kk, vv);
    pipert_context_set_random_state(cx, state);
    pipert_attention_f32(cx, p[0], p[1], p[2], st, c.b, c.h, kvh, c.t, c.s, c.dh, scale,
                         c.causal, c.dropout, mp, bp, msp, y.data(),
                         probs ? probs->data() : nullptr);
  };
  auto forward = [&](const Vec &qq, const Vec &kk, const Vec &vv, Vec &y, Vec *probs) {
    forward_on(ctx.ctx, qq, kk, vv, y, probs);
  };
  // The forward against double arithmetic.
  Vec y, probs(np);
  forward(q, k, v, y, &probs);
  auto at = [&](int which, const float *base, int64_t b, int64_t h, int64_t i, int64_t e) {
    const int64_t hh = which == 1 || which == 2 ? h / group : h;
    return double(base[b * st[3 * which] + hh * st[3 * which + 1] + i * st[3 * which + 2] + e]);
  };
  auto p0 = ptrs(q, k, v);
  int bad = 0;
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t i = 0; i < c.t; ++i) {
        std::vector<double> sc(size_t(c.s), -INFINITY);
        double mx = -INFINITY;
        for (int64_t j = 0; j < c.s; ++j) {
          if ((c.causal && j > i) || !attends(b, h, i, j))
            continue;
          double acc = 0;
          for (int64_t e = 0; e < c.dh; ++e)
            acc += at(0, p0[0], b, h, i, e) * at(1, p0[1], b, h, j, e);
          sc[size_t(j)] = acc * scale + bias_at(b, h, i, j);
          mx = std::max(mx, sc[size_t(j)]);
        }
        double sum = 0;
        for (double &x : sc)
          sum += (x = std::exp(x - mx));
        // The dropped probabilities (P without dropout).
        std::vector<double> dp(size_t(c.s));
        for (int64_t j = 0; j < c.s; ++j) {
          const size_t idx = size_t(((b * c.h + h) * c.t + i) * c.s + j);
          const double want = sc[size_t(j)] / sum;
          const float got = probs[idx];
          dp[size_t(j)] = keep[idx] ? want * (c.dropout > 0.f ? keep_scale : 1.0) : 0.0;
          if (std::fabs(std::fabs(got) - want) > 1e-5 && ++bad <= 5)
            ADD_FAILURE() << "P[" << b << "," << h << "," << i << "," << j << "] " << got
                          << " want " << want;
          // Under dropout the dropped elements carry the sign bit, only they.
          if (std::signbit(got) != (keep[idx] == 0) && ++bad <= 5)
            ADD_FAILURE() << "P[" << b << "," << h << "," << i << "," << j << "] " << got
                          << (keep[idx] ? " kept" : " dropped");
        }
        for (int64_t e = 0; e < c.dh; ++e) {
          double want = 0;
          for (int64_t j = 0; j < c.s; ++j)
            want += dp[size_t(j)] * at(2, p0[2], b, h, j, e);
          const float got = y[size_t(b * st[9] + h * st[10] + i * st[11] + e)];
          if (std::fabs(got - want) > 1e-5 && ++bad <= 5)
            ADD_FAILURE() << "Y[" << b << "," << i << "," << h * c.dh + e << "] " << got
                          << " want " << want;
        }
      }
  EXPECT_EQ(bad, 0);
  // Without probs: the same Y.
  Vec y2;
  forward(q, k, v, y2, nullptr);
  EXPECT_EQ(y, y2);
  if (c.dropout > 0.f) {
    // The mask does not depend on how the pairs go to threads.
    pipert_context *two = pipert_context_create(2, 7);
    Vec y3;
    forward_on(two, q, k, v, y3, nullptr);
    pipert_context_destroy(two);
    EXPECT_EQ(y, y3);
  }
  // The gradient of every input against central differences.
  Vec r = rng.uniform(int64_t(ny));
  Vec dq(nq, 7.f), dk(nk, 7.f), dv(nv, 7.f);
  auto p = ptrs(q, k, v);
  float *g[3] = {dq.data(), dk.data(), dv.data()};
  if (packed) {
    g[1] = dq.data() + d;
    g[2] = dq.data() + 2 * d;
  }
  pipert_attention_grad_f32(ctx.ctx, p[0], p[1], p[2], st, c.b, c.h, kvh, c.t, c.s, c.dh, scale,
                            c.causal, c.dropout, probs.data(), r.data(), g[0], g[1], g[2]);
  if (group > 1 || c.dropout > 0.f) {
    // Grouped-query: the pairs go to threads in whole key/value heads, so
    // their dK and dV sums do not race (the same bits on 2 threads).
    pipert_context *two = pipert_context_create(2, 7);
    Vec dq2(nq, 7.f), dk2(nk, 7.f), dv2(nv, 7.f);
    float *g2[3] = {dq2.data(), dk2.data(), dv2.data()};
    if (packed) {
      g2[1] = dq2.data() + d;
      g2[2] = dq2.data() + 2 * d;
    }
    pipert_attention_grad_f32(two, p[0], p[1], p[2], st, c.b, c.h, kvh, c.t, c.s, c.dh, scale,
                              c.causal, c.dropout, probs.data(), r.data(), g2[0], g2[1], g2[2]);
    pipert_context_destroy(two);
    EXPECT_EQ(dq, dq2);
    EXPECT_EQ(dk, dk2);
    EXPECT_EQ(dv, dv2);
  }
  check_grad("dQ", [&](const Vec &xx, Vec &yy) { forward(xx, k, v, yy, nullptr); }, q, r, dq);
  if (!packed) {
    check_grad("dK", [&](const Vec &xx, Vec &yy) { forward(q, xx, v, yy, nullptr); }, k, r, dk);
    check_grad("dV", [&](const Vec &xx, Vec &yy) { forward(q, k, xx, yy, nullptr); }, v, r, dv);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, AttentionGrad,
    ::testing::Values(AttnCase{2, 2, 5, 5, 3, 0, true, false},   // packed, causal
                      AttnCase{2, 3, 4, 4, 8, 0, false, false},  // packed
                      AttnCase{1, 2, 3, 6, 4, 1, false, true},   // (B, H, T, dh), mask
                      AttnCase{2, 2, 6, 4, 5, 2, true, false},   // separate, s < t, causal
                      AttnCase{2, 4, 16, 16, 16, 0, true, true}, // small kernel's 16 columns
                      AttnCase{1, 1, 70, 70, 20, 2, false, false},
                      // The causal split into row halves (t = s, a multiple of 32).
                      AttnCase{1, 2, 64, 64, 16, 0, true, false},
                      AttnCase{1, 1, 128, 128, 8, 1, true, true},
                      // Key padding masks (a stride of 0 over heads and rows)
                      // and a mask per pair, through both softmax paths.
                      AttnCase{3, 2, 5, 5, 4, 0, false, 2},
                      AttnCase{2, 2, 6, 6, 3, 2, true, 2},
                      AttnCase{2, 2, 70, 70, 8, 0, false, 2},
                      AttnCase{2, 3, 4, 6, 4, 1, false, 3},
                      AttnCase{2, 2, 64, 64, 8, 0, true, 2},
                      // Float biases: a padding fill of -1e9 and a per-head
                      // bias (ALiBi's form), short and long rows.
                      AttnCase{3, 2, 5, 5, 4, 0, false, 4},
                      AttnCase{2, 2, 70, 70, 8, 2, true, 4},
                      AttnCase{2, 3, 4, 6, 4, 1, false, 5},
                      AttnCase{1, 2, 64, 64, 8, 0, true, 5},
                      // Sequence first (nn.MultiheadAttention's layout).
                      AttnCase{3, 2, 5, 5, 4, 3, true, 0},
                      AttnCase{2, 2, 4, 6, 3, 4, false, 2},
                      AttnCase{2, 2, 64, 64, 8, 3, true, 0},
                      // Dropout of the probabilities: both softmax paths,
                      // the causal halves, a float bias, sequence first.
                      AttnCase{2, 3, 5, 5, 4, 0, false, 0, 0.3f},
                      AttnCase{2, 2, 6, 4, 5, 2, true, 2, 0.5f},
                      AttnCase{3, 2, 64, 64, 16, 0, true, 0, 0.1f},
                      AttnCase{2, 2, 70, 70, 8, 0, false, 4, 0.2f},
                      AttnCase{2, 2, 4, 6, 3, 4, false, 2, 0.25f},
                      // Grouped-query attention (4-D): 2 and 3 query heads a
                      // key/value head; the causal halves over several
                      // groups of pairs; with dropout.
                      AttnCase{2, 4, 5, 6, 3, 1, false, 0, 0.f, 2},
                      AttnCase{2, 6, 6, 6, 4, 1, true, 2, 0.f, 2},
                      AttnCase{2, 4, 64, 64, 8, 1, true, 0, 0.f, 1},
                      AttnCase{1, 4, 70, 70, 4, 1, false, 0, 0.2f, 2}),
    attn_case_name);
