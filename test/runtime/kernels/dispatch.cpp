//===- dispatch.cpp - test-side lowering of one ONNX node to pipert -------===//
#include "dispatch.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

namespace pipert_test {

using TP = onnx::TensorProto;

namespace {

struct Node {
  const onnx::NodeProto &proto;
  int64_t opset;
  const std::map<std::string, Tensor> &inputs;

  const onnx::AttributeProto *attr(const std::string &name) const {
    for (const auto &a : proto.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  int64_t i(const std::string &name, int64_t dflt) const {
    auto *a = attr(name);
    return a ? a->i() : dflt;
  }
  float f(const std::string &name, float dflt) const {
    auto *a = attr(name);
    return a ? a->f() : dflt;
  }
  std::string s(const std::string &name, const std::string &dflt) const {
    auto *a = attr(name);
    return a ? a->s() : dflt;
  }
  std::vector<int64_t> ints(const std::string &name, std::vector<int64_t> dflt = {}) const {
    auto *a = attr(name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : dflt;
  }
  bool has(const std::string &name) const { return attr(name) != nullptr; }
  // Input k, or nullptr when absent (optional input left empty).
  const Tensor *in(int k) const {
    if (k >= proto.input_size() || proto.input(k).empty())
      return nullptr;
    auto it = inputs.find(proto.input(k));
    return it == inputs.end() ? nullptr : &it->second;
  }
  int n_in() const { return proto.input_size(); }
  int n_out() const { return proto.output_size(); }
  bool wants(int k) const { return k < proto.output_size() && !proto.output(k).empty(); }
};

Outcome skip(std::string why) {
  Outcome o;
  o.kind = Outcome::Skipped;
  o.why = std::move(why);
  return o;
}

Outcome ran(std::vector<Tensor> outs) {
  Outcome o;
  o.kind = Outcome::Ran;
  o.outputs = std::move(outs);
  return o;
}

bool all_f32(std::initializer_list<const Tensor *> ts) {
  for (auto *t : ts)
    if (t && t->dtype != TP::FLOAT)
      return false;
  return true;
}

pipert_dtype to_pipert(int onnx_dtype) { return pipert_dtype(onnx_dtype); }

bool pipert_supports(int dtype) {
  switch (dtype) {
  case TP::FLOAT: case TP::DOUBLE: case TP::INT64: case TP::INT32: case TP::INT8:
  case TP::UINT8: case TP::BOOL:
    return true;
  default:
    return false;
  }
}

std::vector<int64_t> bcast(const std::vector<int64_t> &a, const std::vector<int64_t> &b) {
  size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// int32 index/label tensors become int64 through pipert_cast, as the compiler
// would insert a Cast.
Tensor to_i64(pipert_context *ctx, const Tensor &t) {
  if (t.dtype == TP::INT64)
    return t;
  Tensor o = make_tensor(TP::INT64, t.shape);
  pipert_cast(ctx, to_pipert(t.dtype), t.bytes.data(), PIPERT_I64, o.bytes.data(), t.numel());
  return o;
}

Outcome unary(pipert_context *ctx, const Node &n, pipert_unary_op op) {
  const Tensor *x = n.in(0);
  if (!all_f32({x}))
    return skip("dtype " + std::to_string(x->dtype) + " (float32 only)");
  Tensor y = make_tensor(TP::FLOAT, x->shape);
  pipert_unary_f32(ctx, op, x->data<float>(), x->numel(), y.data<float>());
  return ran({y});
}

Outcome binary(pipert_context *ctx, const Node &n, pipert_binary_op op) {
  const Tensor *a = n.in(0), *b = n.in(1);
  auto shape = bcast(a->shape, b->shape);
  if (a->dtype == TP::FLOAT && b->dtype == TP::FLOAT) {
    Tensor y = make_tensor(TP::FLOAT, shape);
    pipert_binary_f32(ctx, op, a->data<float>(), a->rank(), a->shape.data(), b->data<float>(),
                      b->rank(), b->shape.data(), y.data<float>());
    return ran({y});
  }
  if (a->dtype == TP::INT64 && b->dtype == TP::INT64 && op != PIPERT_BINARY_POW) {
    Tensor y = make_tensor(TP::INT64, shape);
    pipert_binary_i64(ctx, op, a->data<int64_t>(), a->rank(), a->shape.data(),
                      b->data<int64_t>(), b->rank(), b->shape.data(), y.data<int64_t>());
    return ran({y});
  }
  return skip("dtypes " + std::to_string(a->dtype) + "/" + std::to_string(b->dtype) +
              " (float32 or int64 pairs only)");
}

Outcome equal(pipert_context *ctx, const Node &n) {
  const Tensor *a = n.in(0), *b = n.in(1);
  Tensor y = make_tensor(TP::BOOL, bcast(a->shape, b->shape));
  if (a->dtype == TP::FLOAT && b->dtype == TP::FLOAT) {
    pipert_equal_f32(ctx, a->data<float>(), a->rank(), a->shape.data(), b->data<float>(),
                     b->rank(), b->shape.data(), y.data<uint8_t>());
    return ran({y});
  }
  auto intlike = [](int t) { return t == TP::INT64 || t == TP::INT32; };
  if (intlike(a->dtype) && intlike(b->dtype)) {
    Tensor a64 = to_i64(ctx, *a), b64 = to_i64(ctx, *b);
    pipert_equal_i64(ctx, a64.data<int64_t>(), a64.rank(), a64.shape.data(),
                     b64.data<int64_t>(), b64.rank(), b64.shape.data(), y.data<uint8_t>());
    return ran({y});
  }
  return skip("dtype " + std::to_string(a->dtype));
}

Outcome activation(pipert_context *ctx, const Node &n, pipert_activation_op op, float alpha,
                   float beta) {
  const Tensor *x = n.in(0);
  if (!all_f32({x}))
    return skip("dtype " + std::to_string(x->dtype) + " (float32 only)");
  Tensor y = make_tensor(TP::FLOAT, x->shape);
  pipert_activation_f32(ctx, op, alpha, beta, x->data<float>(), x->numel(), y.data<float>());
  return ran({y});
}

Outcome clip(pipert_context *ctx, const Node &n) {
  float lo = -INFINITY, hi = INFINITY;
  if (n.opset < 11) {
    lo = n.f("min", lo);
    hi = n.f("max", hi);
  } else {
    if (!all_f32({n.in(0), n.in(1), n.in(2)}))
      return skip("non-float32");
    if (n.in(1))
      lo = float(n.in(1)->scalar());
    if (n.in(2))
      hi = float(n.in(2)->scalar());
  }
  return activation(ctx, n, PIPERT_ACTIVATION_CLIP, lo, hi);
}

// Variadic Max/Min: a chain of binary calls, as the importer builds.
Outcome variadic(pipert_context *ctx, const Node &n, pipert_binary_op op) {
  if (n.n_in() < 1)
    return skip("no inputs");
  Tensor acc = *n.in(0);
  if (acc.dtype != TP::FLOAT && acc.dtype != TP::INT64)
    return skip("dtype " + std::to_string(acc.dtype) + " (float32 or int64 only)");
  for (int k = 1; k < n.n_in(); ++k) {
    const Tensor *b = n.in(k);
    if (b->dtype != acc.dtype)
      return skip("mixed dtypes");
    Tensor y = make_tensor(acc.dtype, bcast(acc.shape, b->shape));
    if (acc.dtype == TP::FLOAT)
      pipert_binary_f32(ctx, op, acc.data<float>(), acc.rank(), acc.shape.data(),
                        b->data<float>(), b->rank(), b->shape.data(), y.data<float>());
    else
      pipert_binary_i64(ctx, op, acc.data<int64_t>(), acc.rank(), acc.shape.data(),
                        b->data<int64_t>(), b->rank(), b->shape.data(), y.data<int64_t>());
    acc = std::move(y);
  }
  return ran({acc});
}

Outcome compare(pipert_context *ctx, const Node &n, pipert_compare_op op) {
  const Tensor *a = n.in(0), *b = n.in(1);
  Tensor y = make_tensor(TP::BOOL, bcast(a->shape, b->shape));
  if (a->dtype == TP::FLOAT && b->dtype == TP::FLOAT) {
    pipert_compare_f32(ctx, op, a->data<float>(), a->rank(), a->shape.data(), b->data<float>(),
                       b->rank(), b->shape.data(), y.data<uint8_t>());
    return ran({y});
  }
  auto intlike = [](int t) { return t == TP::INT64 || t == TP::INT32; };
  if (intlike(a->dtype) && intlike(b->dtype)) {
    Tensor a64 = to_i64(ctx, *a), b64 = to_i64(ctx, *b);
    pipert_compare_i64(ctx, op, a64.data<int64_t>(), a64.rank(), a64.shape.data(),
                       b64.data<int64_t>(), b64.rank(), b64.shape.data(), y.data<uint8_t>());
    return ran({y});
  }
  return skip("dtype " + std::to_string(a->dtype));
}

Outcome logical(pipert_context *ctx, const Node &n, pipert_logical_op op) {
  const Tensor *a = n.in(0), *b = n.in(1);
  Tensor y = make_tensor(TP::BOOL, bcast(a->shape, b->shape));
  pipert_logical(ctx, op, a->data<uint8_t>(), a->rank(), a->shape.data(), b->data<uint8_t>(),
                 b->rank(), b->shape.data(), y.data<uint8_t>());
  return ran({y});
}

Outcome logical_not(pipert_context *ctx, const Node &n) {
  const Tensor *x = n.in(0);
  Tensor y = make_tensor(TP::BOOL, x->shape);
  pipert_not(ctx, x->data<uint8_t>(), x->numel(), y.data<uint8_t>());
  return ran({y});
}

Outcome mod(pipert_context *ctx, const Node &n) {
  const bool fmod = n.i("fmod", 0) != 0;
  const Tensor *a = n.in(0);
  if (a->dtype == TP::FLOAT && !fmod)
    return skip("float Mod needs fmod=1");
  if (a->dtype != TP::FLOAT && a->dtype != TP::INT64)
    return skip("dtype " + std::to_string(a->dtype) + " (float32 or int64 only)");
  return binary(ctx, n, fmod ? PIPERT_BINARY_FMOD : PIPERT_BINARY_MOD);
}

Outcome where(pipert_context *ctx, const Node &n) {
  const Tensor *c = n.in(0), *x = n.in(1), *y = n.in(2);
  if (!pipert_supports(x->dtype))
    return skip("dtype " + std::to_string(x->dtype));
  Tensor out = make_tensor(x->dtype, bcast(bcast(c->shape, x->shape), y->shape));
  pipert_where(ctx, to_pipert(x->dtype), c->data<uint8_t>(), c->rank(), c->shape.data(),
               x->bytes.data(), x->rank(), x->shape.data(), y->bytes.data(), y->rank(),
               y->shape.data(), out.bytes.data());
  return ran({out});
}

Outcome gemm(pipert_context *ctx, const Node &n) {
  const Tensor *a = n.in(0), *b = n.in(1), *c = n.in(2);
  if (!all_f32({a, b, c}))
    return skip("non-float32 Gemm");
  const int ta = int(n.i("transA", 0)), tb = int(n.i("transB", 0));
  const int64_t m = ta ? a->shape[1] : a->shape[0], k = ta ? a->shape[0] : a->shape[1];
  const int64_t nn = tb ? b->shape[0] : b->shape[1];
  Tensor y = make_tensor(TP::FLOAT, {m, nn});
  pipert_gemm_f32(ctx, a->data<float>(), b->data<float>(), c ? c->data<float>() : nullptr,
                  c ? c->rank() : 0, c ? c->shape.data() : nullptr, m, nn, k, ta, tb,
                  n.f("alpha", 1.f), n.f("beta", 1.f), y.data<float>());
  return ran({y});
}

Outcome matmul(pipert_context *ctx, const Node &n) {
  const Tensor *a = n.in(0), *b = n.in(1);
  if (!all_f32({a, b}))
    return skip("non-float32 MatMul");
  std::vector<int64_t> sa = a->shape, sb = b->shape;
  std::vector<int64_t> batch = bcast(std::vector<int64_t>(sa.begin(), sa.end() - std::min<size_t>(2, sa.size())),
                                     std::vector<int64_t>(sb.begin(), sb.end() - std::min<size_t>(2, sb.size())));
  std::vector<int64_t> shape = batch;
  if (sa.size() >= 2)
    shape.push_back(sa[sa.size() - 2]);
  if (sb.size() >= 2)
    shape.push_back(sb.back());
  Tensor y = make_tensor(TP::FLOAT, shape);
  pipert_matmul_f32(ctx, a->data<float>(), a->rank(), sa.data(), b->data<float>(), b->rank(),
                    sb.data(), y.data<float>());
  return ran({y});
}

Outcome softmax(pipert_context *ctx, const Node &n, bool log) {
  const Tensor *x = n.in(0);
  if (n.opset < 13)
    return skip("opset " + std::to_string(n.opset) + " (2-D coercion semantics before 13)");
  if (!all_f32({x}))
    return skip("non-float32");
  Tensor y = make_tensor(TP::FLOAT, x->shape);
  (log ? pipert_log_softmax_f32 : pipert_softmax_f32)(ctx, x->data<float>(), x->rank(),
                                                      x->shape.data(), n.i("axis", -1),
                                                      y.data<float>());
  return ran({y});
}

Outcome layer_norm(pipert_context *ctx, const Node &n) {
  const Tensor *x = n.in(0), *s = n.in(1), *b = n.in(2);
  if (!all_f32({x, s, b}))
    return skip("non-float32");
  int64_t axis = n.i("axis", -1);
  if (axis < 0)
    axis += x->rank();
  int64_t cols = 1;
  for (int64_t i = axis; i < x->rank(); ++i)
    cols *= x->shape[size_t(i)];
  if (s->numel() != cols || (b && b->numel() != cols))
    return skip("scale/bias broadcast within the normalised axes");
  std::vector<int64_t> stat_shape(x->shape.begin(), x->shape.begin() + axis);
  stat_shape.resize(x->shape.size(), 1);
  Tensor y = make_tensor(TP::FLOAT, x->shape), mean = make_tensor(TP::FLOAT, stat_shape),
         inv = make_tensor(TP::FLOAT, stat_shape);
  pipert_layer_norm_f32(ctx, x->data<float>(), x->rank(), x->shape.data(), axis,
                        n.f("epsilon", 1e-5f), s->data<float>(), b ? b->data<float>() : nullptr,
                        y.data<float>(), mean.data<float>(), inv.data<float>());
  std::vector<Tensor> outs{y, mean, inv};
  outs.resize(size_t(n.n_out()));
  return ran(outs);
}

// LSTM / GRU: the features pipec lowers (layout 0, default activations, no
// clip, input_forget or peepholes, sequence_lens absent or all full); other
// cases are skipped with the reason.
Outcome recurrent(pipert_context *ctx, const Node &n, bool lstm) {
  const Tensor *x = n.in(0), *w = n.in(1), *r = n.in(2), *b = n.in(3), *lens = n.in(4),
               *h0 = n.in(5), *c0 = lstm ? n.in(6) : nullptr;
  if (!all_f32({x, w, r, b, h0, c0}))
    return skip("non-float32");
  if (n.i("layout", 0) != 0)
    return skip("layout=1 (batch-major)");
  if (n.has("activations") || n.has("activation_alpha") || n.has("activation_beta"))
    return skip("non-default activations");
  if (n.has("clip"))
    return skip("clip");
  if (lstm && (n.i("input_forget", 0) != 0 || n.in(7)))
    return skip(n.in(7) ? "peepholes (input P)" : "input_forget");
  const int64_t T = x->shape[0], B = x->shape[1], I = x->shape[2], H = n.i("hidden_size", 0);
  if (lens) {
    const Tensor l64 = to_i64(ctx, *lens);
    for (int64_t k = 0; k < lens->numel(); ++k)
      if (l64.data<int64_t>()[k] != T)
        return skip("sequence_lens shorter than seq_length");
  }
  const std::string dir = n.s("direction", "forward");
  const int32_t code = dir == "forward" ? 0 : dir == "reverse" ? 1 : 2;
  const int64_t D = code == 2 ? 2 : 1;
  Tensor y = make_tensor(TP::FLOAT, {T, D, B, H}), yh = make_tensor(TP::FLOAT, {D, B, H}),
         yc = make_tensor(TP::FLOAT, {D, B, H});
  auto p = [](const Tensor *t) { return t ? t->data<float>() : nullptr; };
  if (lstm)
    pipert_lstm_f32(ctx, p(x), p(w), p(r), p(b), p(h0), p(c0), T, B, I, H, code,
                    y.data<float>(), yh.data<float>(), yc.data<float>(), nullptr);
  else
    pipert_gru_f32(ctx, p(x), p(w), p(r), p(b), p(h0), T, B, I, H, code,
                   int32_t(n.i("linear_before_reset", 0)), y.data<float>(), yh.data<float>(),
                   nullptr);
  std::vector<Tensor> outs;
  for (int k = 0; k < n.n_out(); ++k)
    if (n.wants(k))
      outs.push_back(k == 0 ? y : k == 1 ? yh : yc);
  return ran(outs);
}

// Spatial attributes of Conv/pooling for 1-D or 2-D, mapped to 2-D.
struct Spatial {
  int64_t kernel[2], pads[4], strides[2], dilations[2];
};

std::optional<std::string> spatial(const Node &n, const std::vector<int64_t> &xshape,
                                   std::vector<int64_t> kernel, int ceil_mode, Spatial &sp) {
  const size_t d = xshape.size() - 2;
  if (d != 1 && d != 2)
    return std::to_string(d) + "-D (1-D and 2-D only)";
  auto strides = n.ints("strides", std::vector<int64_t>(d, 1));
  auto dil = n.ints("dilations", std::vector<int64_t>(d, 1));
  auto pads = n.ints("pads", std::vector<int64_t>(2 * d, 0));
  const std::string ap = n.s("auto_pad", "NOTSET");
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    for (size_t i = 0; i < d; ++i) {
      int64_t in = xshape[2 + i];
      int64_t out = (in + strides[i] - 1) / strides[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - in);
      int64_t small = total / 2, big = total - small;
      pads[i] = ap == "SAME_UPPER" ? small : big;
      pads[i + d] = ap == "SAME_UPPER" ? big : small;
    }
  } else if (ap == "VALID") {
    std::fill(pads.begin(), pads.end(), 0);
  } else if (ap != "NOTSET") {
    return "auto_pad " + ap;
  }
  (void)ceil_mode;
  if (d == 1) {
    sp.kernel[0] = 1, sp.kernel[1] = kernel[0];
    sp.pads[0] = 0, sp.pads[1] = pads[0], sp.pads[2] = 0, sp.pads[3] = pads[1];
    sp.strides[0] = 1, sp.strides[1] = strides[0];
    sp.dilations[0] = 1, sp.dilations[1] = dil[0];
  } else {
    for (int i = 0; i < 2; ++i)
      sp.kernel[i] = kernel[size_t(i)], sp.strides[i] = strides[size_t(i)],
      sp.dilations[i] = dil[size_t(i)];
    for (int i = 0; i < 4; ++i)
      sp.pads[i] = pads[size_t(i)];
  }
  return std::nullopt;
}

void as4d(const std::vector<int64_t> &s, int64_t out[4]) {
  if (s.size() == 3)
    out[0] = s[0], out[1] = s[1], out[2] = 1, out[3] = s[2];
  else
    std::copy(s.begin(), s.end(), out);
}

std::vector<int64_t> from4d(const int64_t s[4], size_t rank) {
  if (rank == 3)
    return {s[0], s[1], s[3]};
  return {s[0], s[1], s[2], s[3]};
}

Outcome conv(pipert_context *ctx, const Node &n) {
  const Tensor *x = n.in(0), *w = n.in(1), *b = n.in(2);
  if (!all_f32({x, w, b}))
    return skip("non-float32 Conv");
  std::vector<int64_t> kernel(w->shape.begin() + 2, w->shape.end());
  if (n.has("kernel_shape") && n.ints("kernel_shape") != kernel)
    return skip("kernel_shape differs from W");
  Spatial sp;
  if (auto why = spatial(n, x->shape, kernel, 0, sp))
    return skip(*why);
  int64_t xs[4], ws[4];
  as4d(x->shape, xs);
  as4d(w->shape, ws);
  int64_t ys[4] = {xs[0], ws[0], 0, 0};
  ys[2] = (xs[2] + sp.pads[0] + sp.pads[2] - (sp.dilations[0] * (ws[2] - 1) + 1)) / sp.strides[0] + 1;
  ys[3] = (xs[3] + sp.pads[1] + sp.pads[3] - (sp.dilations[1] * (ws[3] - 1) + 1)) / sp.strides[1] + 1;
  Tensor y = make_tensor(TP::FLOAT, from4d(ys, x->shape.size()));
  pipert_conv2d_f32(ctx, x->data<float>(), xs, w->data<float>(), ws,
                    b ? b->data<float>() : nullptr, sp.pads, sp.strides, sp.dilations,
                    n.i("group", 1), y.data<float>());
  return ran({y});
}

// ConvTranspose as the input gradient of a Conv (what pipec lowers it to),
// with ONNX's pads from output_shape / auto_pad, plus the bias.
Outcome conv_transpose(pipert_context *ctx, const Node &n) {
  const Tensor *x = n.in(0), *w = n.in(1), *b = n.in(2);
  if (!all_f32({x, w, b}))
    return skip("non-float32 ConvTranspose");
  if (x->rank() != 3 && x->rank() != 4)
    return skip("ConvTranspose of rank " + std::to_string(x->rank()) + " (1-D and 2-D only)");
  const size_t sp = size_t(x->rank() - 2);
  std::vector<int64_t> k(w->shape.begin() + 2, w->shape.end());
  auto st = n.ints("strides", std::vector<int64_t>(sp, 1));
  auto dil = n.ints("dilations", std::vector<int64_t>(sp, 1));
  auto opad = n.ints("output_padding", std::vector<int64_t>(sp, 0));
  auto pads = n.ints("pads", std::vector<int64_t>(2 * sp, 0));
  const std::string autopad = n.s("auto_pad", "NOTSET");
  std::vector<int64_t> target = n.ints("output_shape");
  if (target.size() == sp + 2)
    target.erase(target.begin(), target.begin() + 2);
  if (target.empty() && (autopad == "SAME_UPPER" || autopad == "SAME_LOWER"))
    for (size_t i = 0; i < sp; ++i)
      target.push_back(x->shape[i + 2] * st[i]);
  if (autopad == "VALID")
    pads.assign(2 * sp, 0);
  std::vector<int64_t> out(sp);
  for (size_t i = 0; i < sp; ++i) {
    if (opad[i] >= st[i])
      return skip("output_padding >= stride");
    const int64_t natural = st[i] * (x->shape[i + 2] - 1) + opad[i] + (k[i] - 1) * dil[i] + 1;
    if (!target.empty()) {
      const int64_t total = natural - target[i];
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      pads[i] = autopad == "SAME_UPPER" ? half : total - half;
      pads[i + sp] = autopad == "SAME_UPPER" ? total - half : half;
    }
    if (pads[i] < 0 || pads[i + sp] < 0)
      return skip("negative pads (output_shape beyond the natural extent)");
    out[i] = natural - pads[i] - pads[i + sp];
  }
  const int64_t group = n.i("group", 1);
  std::vector<int64_t> yshape = {x->shape[0], w->shape[1] * group};
  yshape.insert(yshape.end(), out.begin(), out.end());
  Tensor y = make_tensor(TP::FLOAT, yshape);
  int64_t ys[4], ws[4], p4[4], s2[2], d2[2];
  as4d(yshape, ys);
  as4d(w->shape, ws);
  if (sp == 1) {
    p4[0] = 0, p4[1] = pads[0], p4[2] = 0, p4[3] = pads[1];
    s2[0] = 1, s2[1] = st[0], d2[0] = 1, d2[1] = dil[0];
  } else {
    std::copy(pads.begin(), pads.end(), p4);
    std::copy(st.begin(), st.end(), s2);
    std::copy(dil.begin(), dil.end(), d2);
  }
  pipert_conv2d_grad_input_f32(ctx, x->data<float>(), w->data<float>(), ws, ys, p4, s2, d2, group,
                               y.data<float>());
  if (b) {
    const int64_t bshape[3] = {ys[1], 1, 1};
    pipert_binary_f32(ctx, PIPERT_BINARY_ADD, y.data<float>(), 4, ys, b->data<float>(), 3,
                      bshape, y.data<float>());
  }
  return ran({y});
}

Outcome resize(pipert_context *ctx, const Node &n) {
  const Tensor *x = n.in(0), *roi = n.in(1), *scales = n.in(2), *sizes = n.in(3);
  if (!all_f32({x}))
    return skip("non-float32 Resize");
  if (n.opset < 11 || n.has("axes") || n.i("antialias", 0))
    return skip("Resize before opset 11, with axes or antialias");
  const int64_t r = x->rank();
  if (scales && scales->numel() == 0)
    scales = nullptr;
  if (sizes && sizes->numel() == 0)
    sizes = nullptr;
  const std::string mode_s = n.s("mode", "nearest"),
                    coord_s = n.s("coordinate_transformation_mode", "half_pixel"),
                    near_s = n.s("nearest_mode", "round_prefer_floor");
  static const std::map<std::string, int> modes = {{"nearest", 0}, {"linear", 1}, {"cubic", 2}};
  static const std::map<std::string, int> coords = {
      {"half_pixel", 0},         {"asymmetric", 1},           {"align_corners", 2},
      {"pytorch_half_pixel", 3}, {"tf_half_pixel_for_nn", 4}, {"tf_crop_and_resize", 5},
      {"half_pixel_symmetric", 6}};
  static const std::map<std::string, int> nearests = {
      {"round_prefer_floor", 0}, {"round_prefer_ceil", 1}, {"floor", 2}, {"ceil", 3}};
  if (!modes.count(mode_s) || !coords.count(coord_s) || !nearests.count(near_s))
    return skip("Resize mode " + mode_s + "/" + coord_s + "/" + near_s);
  const bool crop = coord_s == "tf_crop_and_resize";
  std::vector<float> full_roi(2 * size_t(r), 0.f);
  std::fill(full_roi.begin() + r, full_roi.end(), 1.f);
  if (crop) {
    if (!roi || roi->numel() != 2 * r || roi->dtype != TP::FLOAT)
      return skip("tf_crop_and_resize without a float roi per axis");
    std::copy(roi->data<float>(), roi->data<float>() + 2 * r, full_roi.begin());
  }
  std::vector<int64_t> yshape(x->shape);
  std::vector<float> sc;
  if (scales) {
    if (scales->numel() != r || scales->dtype != TP::FLOAT)
      return skip("scales not one float per axis");
    sc.assign(scales->data<float>(), scales->data<float>() + r);
    for (int64_t i = 0; i < r; ++i)
      yshape[i] = int64_t(std::floor(double(x->shape[i]) *
                                     (double(full_roi[i + r]) - double(full_roi[i])) *
                                     double(sc[i])));
  } else if (sizes) {
    if (sizes->numel() != r)
      return skip("sizes not one per axis");
    yshape = sizes->as_i64();
  } else {
    return skip("Resize without scales or sizes");
  }
  // (outer, D, H, W) over the last three axes; the leading ones must keep
  // their extent.
  int64_t xs[4] = {1, 1, 1, 1}, ys[4] = {1, 1, 1, 1};
  float sc3[3] = {1.f, 1.f, 1.f}, roi6[6] = {0.f, 0.f, 0.f, 1.f, 1.f, 1.f};
  for (int64_t i = 0; i < r; ++i) {
    const int64_t slot = i - (r - 3);
    if (slot < 0) {
      if (yshape[i] != x->shape[i] || (!sc.empty() && sc[i] != 1.f))
        return skip("Resize of a leading axis");
      xs[0] *= x->shape[i];
      ys[0] *= yshape[i];
      continue;
    }
    xs[slot + 1] = x->shape[i];
    ys[slot + 1] = yshape[i];
    if (!sc.empty())
      sc3[slot] = sc[i];
    roi6[slot] = full_roi[i];
    roi6[slot + 3] = full_roi[i + r];
  }
  Tensor y = make_tensor(TP::FLOAT, yshape);
  pipert_resize_f32(ctx, x->data<float>(), xs, ys, sc.empty() ? nullptr : sc3,
                    crop ? roi6 : nullptr, pipert_resize_mode(modes.at(mode_s)),
                    pipert_resize_coord(coords.at(coord_s)),
                    pipert_resize_nearest(nearests.at(near_s)), n.f("cubic_coeff_a", -0.75f),
                    int(n.i("exclude_outside", 0)), n.f("extrapolation_value", 0.f),
                    y.data<float>());
  return ran({y});
}

Outcome pool(pipert_context *ctx, const Node &n, bool max) {
  const Tensor *x = n.in(0);
  if (!all_f32({x}))
    return skip("dtype " + std::to_string(x->dtype) + " (float32 only)");
  if (n.i("storage_order", 0) != 0)
    return skip("storage_order=1");
  if (!max && n.has("dilations"))
    return skip("AveragePool dilations");
  const int ceil_mode = int(n.i("ceil_mode", 0));
  Spatial sp;
  if (auto why = spatial(n, x->shape, n.ints("kernel_shape"), ceil_mode, sp))
    return skip(*why);
  int64_t xs[4];
  as4d(x->shape, xs);
  int64_t ys[4] = {xs[0], xs[1],
                   pipert_pool_output_dim(xs[2], sp.kernel[0], sp.pads[0], sp.pads[2],
                                          sp.strides[0], sp.dilations[0], ceil_mode),
                   pipert_pool_output_dim(xs[3], sp.kernel[1], sp.pads[1], sp.pads[3],
                                          sp.strides[1], sp.dilations[1], ceil_mode)};
  Tensor y = make_tensor(TP::FLOAT, from4d(ys, x->shape.size()));
  if (max) {
    Tensor idx = make_tensor(TP::INT64, y.shape);
    pipert_maxpool2d_f32(ctx, x->data<float>(), xs, sp.kernel, sp.pads, sp.strides,
                         sp.dilations, ceil_mode, y.data<float>(),
                         n.wants(1) ? idx.data<int64_t>() : nullptr);
    if (n.wants(1))
      return ran({y, idx});
    return ran({y});
  }
  pipert_avgpool2d_f32(ctx, x->data<float>(), xs, sp.kernel, sp.pads, sp.strides, ceil_mode,
                       int(n.i("count_include_pad", 0)), y.data<float>());
  return ran({y});
}

Outcome global_avgpool(pipert_context *ctx, const Node &n) {
  const Tensor *x = n.in(0);
  if (!all_f32({x}))
    return skip("non-float32");
  std::vector<int64_t> ys(x->shape.size(), 1);
  ys[0] = x->shape[0], ys[1] = x->shape[1];
  Tensor y = make_tensor(TP::FLOAT, ys);
  pipert_global_avgpool_f32(ctx, x->data<float>(), x->rank(), x->shape.data(), y.data<float>());
  return ran({y});
}

Outcome batch_norm(pipert_context *ctx, const Node &n) {
  const Tensor *x = n.in(0), *s = n.in(1), *b = n.in(2), *m = n.in(3), *v = n.in(4);
  if (!all_f32({x, s, b, m, v}))
    return skip("non-float32");
  if (n.opset < 14)
    return skip("opset " + std::to_string(n.opset) + " (training outputs before 14 differ)");
  const float eps = n.f("epsilon", 1e-5f), momentum = n.f("momentum", 0.9f);
  Tensor y = make_tensor(TP::FLOAT, x->shape);
  if (!n.i("training_mode", 0)) {
    pipert_batch_norm_inference_f32(ctx, x->data<float>(), x->rank(), x->shape.data(),
                                    s->data<float>(), b->data<float>(), m->data<float>(),
                                    v->data<float>(), eps, y.data<float>());
    return ran({y});
  }
  Tensor rm = make_tensor(TP::FLOAT, m->shape), rv = make_tensor(TP::FLOAT, v->shape);
  pipert_batch_norm_training_f32(ctx, x->data<float>(), x->rank(), x->shape.data(),
                                 s->data<float>(), b->data<float>(), m->data<float>(),
                                 v->data<float>(), eps, momentum, y.data<float>(),
                                 rm.data<float>(), rv.data<float>(), nullptr, nullptr);
  std::vector<Tensor> outs{y, rm, rv};
  outs.resize(size_t(n.n_out()));
  return ran(outs);
}

Outcome transpose(pipert_context *ctx, const Node &n) {
  const Tensor *x = n.in(0);
  if (!pipert_supports(x->dtype))
    return skip("dtype");
  std::vector<int64_t> perm = n.ints("perm");
  if (perm.empty())
    for (int64_t i = x->rank() - 1; i >= 0; --i)
      perm.push_back(i);
  std::vector<int64_t> ys;
  for (int64_t p : perm)
    ys.push_back(x->shape[size_t(p)]);
  Tensor y = make_tensor(x->dtype, ys);
  pipert_transpose(ctx, to_pipert(x->dtype), x->bytes.data(), x->rank(), x->shape.data(),
                   perm.data(), y.bytes.data());
  return ran({y});
}

Outcome concat(pipert_context *ctx, const Node &n) {
  const Tensor *x0 = n.in(0);
  if (!pipert_supports(x0->dtype))
    return skip("dtype");
  int64_t axis = n.i("axis", 0);
  if (axis < 0)
    axis += x0->rank();
  std::vector<const void *> xs;
  std::vector<int64_t> sizes;
  std::vector<int64_t> ys = x0->shape;
  ys[size_t(axis)] = 0;
  for (int k = 0; k < n.n_in(); ++k) {
    xs.push_back(n.in(k)->bytes.data());
    sizes.push_back(n.in(k)->shape[size_t(axis)]);
    ys[size_t(axis)] += sizes.back();
  }
  Tensor y = make_tensor(x0->dtype, ys);
  pipert_concat(ctx, to_pipert(x0->dtype), int64_t(xs.size()), xs.data(), sizes.data(),
                x0->rank(), ys.data(), n.i("axis", 0), y.bytes.data());
  return ran({y});
}

Outcome split(pipert_context *ctx, const Node &n) {
  const Tensor *x = n.in(0);
  if (!pipert_supports(x->dtype))
    return skip("dtype");
  int64_t axis = n.i("axis", 0);
  if (axis < 0)
    axis += x->rank();
  std::vector<int64_t> sizes;
  if (n.in(1))
    sizes = n.in(1)->as_i64();
  else
    sizes = n.ints("split");
  const int64_t outs = n.n_out();
  if (sizes.empty()) {
    if (x->shape[size_t(axis)] % outs)
      return skip("uneven split without sizes");
    sizes.assign(size_t(outs), x->shape[size_t(axis)] / outs);
  }
  std::vector<Tensor> ys;
  std::vector<void *> ptrs;
  for (int64_t k = 0; k < outs; ++k) {
    auto s = x->shape;
    s[size_t(axis)] = sizes[size_t(k)];
    ys.push_back(make_tensor(x->dtype, s));
  }
  for (auto &y : ys)
    ptrs.push_back(y.bytes.data());
  pipert_split(ctx, to_pipert(x->dtype), x->bytes.data(), x->rank(), x->shape.data(), axis, outs,
               sizes.data(), ptrs.data());
  return ran(ys);
}

Outcome slice(pipert_context *ctx, const Node &n) {
  const Tensor *x = n.in(0);
  if (n.opset < 10)
    return skip("attribute form of Slice (opset < 10)");
  if (!pipert_supports(x->dtype))
    return skip("dtype");
  auto starts = n.in(1)->as_i64(), ends = n.in(2)->as_i64();
  std::vector<int64_t> axes, steps;
  if (n.in(3))
    axes = n.in(3)->as_i64();
  if (n.in(4))
    steps = n.in(4)->as_i64();
  std::vector<int64_t> ys(x->shape.size());
  const int64_t na = int64_t(starts.size());
  pipert_slice_shape(x->rank(), x->shape.data(), na, starts.data(), ends.data(),
                     axes.empty() ? nullptr : axes.data(), steps.empty() ? nullptr : steps.data(),
                     ys.data());
  Tensor y = make_tensor(x->dtype, ys);
  pipert_slice(ctx, to_pipert(x->dtype), x->bytes.data(), x->rank(), x->shape.data(), na,
               starts.data(), ends.data(), axes.empty() ? nullptr : axes.data(),
               steps.empty() ? nullptr : steps.data(), y.bytes.data());
  return ran({y});
}

Outcome gather(pipert_context *ctx, const Node &n) {
  const Tensor *d = n.in(0), *idx = n.in(1);
  if (!pipert_supports(d->dtype))
    return skip("dtype");
  Tensor i64 = to_i64(ctx, *idx);
  int64_t axis = n.i("axis", 0);
  if (axis < 0)
    axis += d->rank();
  std::vector<int64_t> ys(d->shape.begin(), d->shape.begin() + axis);
  ys.insert(ys.end(), idx->shape.begin(), idx->shape.end());
  ys.insert(ys.end(), d->shape.begin() + axis + 1, d->shape.end());
  Tensor y = make_tensor(d->dtype, ys);
  pipert_gather(ctx, to_pipert(d->dtype), d->bytes.data(), d->rank(), d->shape.data(),
                i64.data<int64_t>(), i64.rank(), i64.shape.data(), n.i("axis", 0),
                y.bytes.data());
  return ran({y});
}

// The PIPERT_SCATTER_* code of a ScatterND/ScatterElements node, or -1.
int64_t scatter_reduction(const Node &n) {
  const std::vector<std::string> names = {"none", "add", "mul", "max", "min"};
  auto it = std::find(names.begin(), names.end(), n.s("reduction", "none"));
  return it == names.end() ? -1 : int64_t(it - names.begin());
}

Outcome gather_elements(pipert_context *ctx, const Node &n) {
  const Tensor *d = n.in(0), *idx = n.in(1);
  if (!pipert_supports(d->dtype))
    return skip("dtype");
  Tensor i64 = to_i64(ctx, *idx);
  Tensor y = make_tensor(d->dtype, idx->shape);
  pipert_gather_elements(ctx, to_pipert(d->dtype), d->bytes.data(), d->rank(), d->shape.data(),
                         i64.data<int64_t>(), i64.shape.data(), n.i("axis", 0), y.bytes.data());
  return ran({y});
}

// ScatterND and ScatterElements: the dtype and the reduction checked, y
// of data's shape, then `call(indices as i64, reduction code, y)`.
template <class Call>
Outcome scatter_node(pipert_context *ctx, const Node &n, Call call) {
  const Tensor *d = n.in(0);
  if (!pipert_supports(d->dtype))
    return skip("dtype");
  const int64_t red = scatter_reduction(n);
  if (red < 0)
    return skip("reduction " + n.s("reduction", "none"));
  Tensor i64 = to_i64(ctx, *n.in(1));
  Tensor y = make_tensor(d->dtype, d->shape);
  call(i64, red, y);
  return ran({y});
}

Outcome scatter_elements(pipert_context *ctx, const Node &n) {
  const Tensor *d = n.in(0), *u = n.in(2);
  return scatter_node(ctx, n, [&](Tensor &i64, int64_t red, Tensor &y) {
    pipert_scatter_elements(ctx, to_pipert(d->dtype), d->bytes.data(), d->rank(),
                            d->shape.data(), i64.data<int64_t>(), i64.shape.data(),
                            u->bytes.data(), n.i("axis", 0), red, y.bytes.data());
  });
}

Outcome gather_nd(pipert_context *ctx, const Node &n) {
  const Tensor *d = n.in(0), *idx = n.in(1);
  if (!pipert_supports(d->dtype))
    return skip("dtype");
  Tensor i64 = to_i64(ctx, *idx);
  int64_t b = n.i("batch_dims", 0), k = idx->shape.back();
  std::vector<int64_t> ys(idx->shape.begin(), idx->shape.end() - 1);
  ys.insert(ys.end(), d->shape.begin() + b + k, d->shape.end());
  Tensor y = make_tensor(d->dtype, ys);
  pipert_gather_nd(ctx, to_pipert(d->dtype), d->bytes.data(), d->rank(), d->shape.data(),
                   i64.data<int64_t>(), i64.rank(), i64.shape.data(), b, y.bytes.data());
  return ran({y});
}

Outcome scatter_nd(pipert_context *ctx, const Node &n) {
  const Tensor *d = n.in(0), *u = n.in(2);
  return scatter_node(ctx, n, [&](Tensor &i64, int64_t red, Tensor &y) {
    pipert_scatter_nd(ctx, to_pipert(d->dtype), d->bytes.data(), d->rank(), d->shape.data(),
                      i64.data<int64_t>(), i64.rank(), i64.shape.data(), u->bytes.data(), red,
                      y.bytes.data());
  });
}

Outcome expand(pipert_context *ctx, const Node &n) {
  const Tensor *x = n.in(0);
  if (!pipert_supports(x->dtype))
    return skip("dtype");
  auto ys = bcast(x->shape, n.in(1)->as_i64());
  Tensor y = make_tensor(x->dtype, ys);
  pipert_expand(ctx, to_pipert(x->dtype), x->bytes.data(), x->rank(), x->shape.data(),
                int64_t(ys.size()), ys.data(), y.bytes.data());
  return ran({y});
}

Outcome cast(pipert_context *ctx, const Node &n) {
  const Tensor *x = n.in(0);
  const int to = int(n.i("to", 0));
  if (!pipert_supports(x->dtype) || !pipert_supports(to))
    return skip("cast " + std::to_string(x->dtype) + " -> " + std::to_string(to) +
                " (f32/f64/i64/i32/i8/u8/bool only)");
  Tensor y = make_tensor(to, x->shape);
  pipert_cast(ctx, to_pipert(x->dtype), x->bytes.data(), to_pipert(to), y.bytes.data(),
              x->numel());
  return ran({y});
}

Outcome reduce(pipert_context *ctx, const Node &n, pipert_reduce_op op) {
  const Tensor *x = n.in(0);
  if (!all_f32({x}))
    return skip("non-float32");
  std::vector<int64_t> axes = n.in(1) ? n.in(1)->as_i64() : n.ints("axes");
  const int noop = int(n.i("noop_with_empty_axes", 0));
  const bool keep = n.i("keepdims", 1) != 0;
  std::vector<bool> red(x->shape.size(), axes.empty() && !noop);
  for (int64_t a : axes)
    red[size_t(a < 0 ? a + x->rank() : a)] = true;
  std::vector<int64_t> ys;
  for (size_t i = 0; i < x->shape.size(); ++i)
    if (!red[i])
      ys.push_back(x->shape[i]);
    else if (keep)
      ys.push_back(1);
  Tensor y = make_tensor(TP::FLOAT, ys);
  pipert_reduce_f32(ctx, op, x->data<float>(), x->rank(), x->shape.data(), int64_t(axes.size()),
                    axes.data(), noop, y.data<float>());
  return ran({y});
}

Outcome arg_reduce(pipert_context *ctx, const Node &n, pipert_reduce_op op) {
  const Tensor *x = n.in(0);
  if (!all_f32({x}))
    return skip("non-float32");
  int64_t axis = n.i("axis", 0);
  if (axis < 0)
    axis += x->rank();
  std::vector<int64_t> ys;
  for (int64_t i = 0; i < x->rank(); ++i)
    if (i != axis)
      ys.push_back(x->shape[size_t(i)]);
    else if (n.i("keepdims", 1))
      ys.push_back(1);
  Tensor y = make_tensor(TP::INT64, ys);
  pipert_arg_reduce_f32(ctx, op, x->data<float>(), x->rank(), x->shape.data(), axis,
                        int(n.i("select_last_index", 0)), y.data<int64_t>());
  return ran({y});
}

Outcome cumsum(pipert_context *ctx, const Node &n) {
  const Tensor *x = n.in(0);
  if (x->dtype != TP::FLOAT && x->dtype != TP::DOUBLE && x->dtype != TP::INT32 &&
      x->dtype != TP::INT64)
    return skip("dtype " + std::to_string(x->dtype) + " (f32/f64/i32/i64 only)");
  Tensor y = make_tensor(x->dtype, x->shape);
  pipert_cumsum(ctx, to_pipert(x->dtype), x->bytes.data(), x->rank(), x->shape.data(),
                n.in(1)->as_i64()[0], int(n.i("exclusive", 0)), int(n.i("reverse", 0)),
                y.bytes.data());
  return ran({y});
}

Outcome tile(pipert_context *ctx, const Node &n) {
  const Tensor *x = n.in(0);
  if (!pipert_supports(x->dtype))
    return skip("dtype " + std::to_string(x->dtype));
  std::vector<int64_t> reps = n.in(1)->as_i64(), ys = x->shape;
  for (size_t i = 0; i < ys.size(); ++i)
    ys[i] *= reps[i];
  Tensor y = make_tensor(x->dtype, ys);
  pipert_tile(ctx, to_pipert(x->dtype), x->bytes.data(), x->rank(), x->shape.data(),
              reps.data(), y.bytes.data());
  return ran({y});
}

Outcome pad(pipert_context *ctx, const Node &n) {
  const Tensor *x = n.in(0);
  if (!pipert_supports(x->dtype))
    return skip("dtype " + std::to_string(x->dtype));
  const std::string mode = n.s("mode", "constant");
  const int code = mode == "constant" ? PIPERT_PAD_CONSTANT
                   : mode == "reflect" ? PIPERT_PAD_REFLECT
                   : mode == "edge"    ? PIPERT_PAD_EDGE
                                       : -1;
  if (code < 0)
    return skip("mode " + mode + " (constant, reflect, edge only)");
  const int64_t r = x->rank();
  std::vector<int64_t> given = n.opset < 11 ? n.ints("pads") : n.in(1)->as_i64();
  std::vector<int64_t> axes;
  if (n.in(3))
    axes = n.in(3)->as_i64();
  else
    for (int64_t i = 0; i < r; ++i)
      axes.push_back(i);
  std::vector<int64_t> pads(size_t(2 * r), 0), ys = x->shape;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
    pads[size_t(a)] = given[i];
    pads[size_t(a + r)] = given[i + axes.size()];
  }
  for (int64_t i = 0; i < r; ++i)
    ys[size_t(i)] += pads[size_t(i)] + pads[size_t(i + r)];
  float value = n.opset < 11 ? n.f("value", 0.f) : (n.in(2) ? float(n.in(2)->scalar()) : 0.f);
  Tensor y = make_tensor(x->dtype, ys);
  pipert_pad(ctx, to_pipert(x->dtype), pipert_pad_mode(code), x->bytes.data(), r, x->shape.data(),
             pads.data(), value, y.bytes.data());
  return ran({y});
}

Outcome trilu(pipert_context *ctx, const Node &n) {
  const Tensor *x = n.in(0);
  if (!pipert_supports(x->dtype))
    return skip("dtype " + std::to_string(x->dtype));
  Tensor y = make_tensor(x->dtype, x->shape);
  if (x->numel() == 0)
    return ran({y});
  pipert_trilu(ctx, to_pipert(x->dtype), x->bytes.data(), x->rank(), x->shape.data(),
               int(n.i("upper", 1)), n.in(1) ? n.in(1)->as_i64()[0] : 0, y.bytes.data());
  return ran({y});
}

Outcome dropout(pipert_context *ctx, const Node &n) {
  const Tensor *x = n.in(0);
  if (!all_f32({x}))
    return skip("non-float32");
  float ratio = n.opset < 12 ? n.f("ratio", 0.5f) : (n.in(1) ? float(n.in(1)->scalar()) : 0.5f);
  const int training = n.opset < 12 ? 0 : (n.in(2) ? int(n.in(2)->scalar() != 0) : 0);
  if (training && ratio > 0.f)
    return skip("training with ratio > 0: the expected mask comes from numpy's generator");
  Tensor y = make_tensor(TP::FLOAT, x->shape), mask = make_tensor(TP::BOOL, x->shape);
  pipert_dropout_f32(ctx, x->data<float>(), x->numel(), ratio, training, y.data<float>(),
                     mask.data<uint8_t>());
  if (n.wants(1))
    return ran({y, mask});
  return ran({y});
}

Outcome loss(pipert_context *ctx, const Node &n, bool sce) {
  const Tensor *x = n.in(0), *lab = n.in(1), *w = n.in(2);
  if (!all_f32({x, w}))
    return skip("non-float32");
  Tensor labels = to_i64(ctx, *lab);
  const std::string red = n.s("reduction", "mean");
  pipert_reduction r = red == "none" ? PIPERT_REDUCTION_NONE
                       : red == "sum" ? PIPERT_REDUCTION_SUM
                                      : PIPERT_REDUCTION_MEAN;
  std::vector<int64_t> ls;
  if (r == PIPERT_REDUCTION_NONE) {
    ls.push_back(x->shape[0]);
    ls.insert(ls.end(), x->shape.begin() + 2, x->shape.end());
  }
  Tensor l = make_tensor(TP::FLOAT, ls);
  const int has_ii = n.has("ignore_index");
  const int64_t ii = n.i("ignore_index", 0);
  if (sce) {
    Tensor lp = make_tensor(TP::FLOAT, x->shape);
    pipert_softmax_cross_entropy_loss_f32(ctx, x->data<float>(), x->rank(), x->shape.data(),
                                          labels.data<int64_t>(), w ? w->data<float>() : nullptr,
                                          has_ii, ii, r, l.data<float>(),
                                          n.wants(1) ? lp.data<float>() : nullptr);
    if (n.wants(1))
      return ran({l, lp});
    return ran({l});
  }
  pipert_nll_loss_f32(ctx, x->data<float>(), x->rank(), x->shape.data(), labels.data<int64_t>(),
                      w ? w->data<float>() : nullptr, has_ii, ii, r, l.data<float>());
  return ran({l});
}

// ai.onnx.preview.training: inputs R, T, then the k tensors of each group.
Outcome optimizer(pipert_context *ctx, const Node &n) {
  const std::string &op = n.proto.op_type();
  const int groups = op == "Adam" ? 4 : 3; // X, G, (V,) H/V
  const int k = (n.n_in() - 2) / groups;
  if (k < 1 || (n.n_in() - 2) % groups)
    return skip("unexpected input count");
  const float lr = float(n.in(0)->scalar());
  const int64_t t = int64_t(n.in(1)->scalar());
  auto in = [&](int g, int j) { return n.in(2 + g * k + j); };
  std::vector<Tensor> outs(size_t(n.n_out()));
  for (int j = 0; j < k; ++j) {
    const Tensor *x = in(0, j), *g = in(1, j);
    if (!all_f32({x, g}))
      return skip("non-float32");
    Tensor xo = make_tensor(TP::FLOAT, x->shape);
    if (op == "Momentum") {
      const Tensor *v = in(2, j);
      Tensor vo = make_tensor(TP::FLOAT, x->shape);
      const std::string mode = n.s("mode", "standard");
      pipert_momentum_f32(ctx, lr, t, n.f("alpha", 0.f), n.f("beta", 0.f),
                          n.f("norm_coefficient", 0.f), mode == "nesterov", x->data<float>(),
                          g->data<float>(), v->data<float>(), x->numel(), xo.data<float>(),
                          vo.data<float>());
      outs[size_t(j)] = xo;
      outs[size_t(k + j)] = vo;
    } else if (op == "Adagrad") {
      const Tensor *h = in(2, j);
      Tensor ho = make_tensor(TP::FLOAT, x->shape);
      pipert_adagrad_f32(ctx, lr, t, n.f("decay_factor", 0.f), n.f("epsilon", 0.f),
                         n.f("norm_coefficient", 0.f), x->data<float>(), g->data<float>(),
                         h->data<float>(), x->numel(), xo.data<float>(), ho.data<float>());
      outs[size_t(j)] = xo;
      outs[size_t(k + j)] = ho;
    } else {
      const Tensor *v = in(2, j), *h = in(3, j);
      Tensor vo = make_tensor(TP::FLOAT, x->shape), ho = make_tensor(TP::FLOAT, x->shape);
      pipert_adam_f32(ctx, lr, t, n.f("alpha", 0.9f), n.f("beta", 0.999f),
                      n.f("epsilon", 1e-6f), n.f("norm_coefficient", 0.f),
                      n.f("norm_coefficient_post", 0.f), x->data<float>(), g->data<float>(),
                      v->data<float>(), h->data<float>(), x->numel(), xo.data<float>(),
                      vo.data<float>(), ho.data<float>());
      outs[size_t(j)] = xo;
      outs[size_t(k + j)] = vo;
      outs[size_t(2 * k + j)] = ho;
    }
  }
  return ran(outs);
}

} // namespace

bool is_optimizer_op(const onnx::NodeProto &node) {
  return node.domain() == "ai.onnx.preview.training" &&
         (node.op_type() == "Momentum" || node.op_type() == "Adam" ||
          node.op_type() == "Adagrad");
}

Outcome run_node(pipert_context *ctx, const onnx::NodeProto &proto, int64_t opset,
                 const std::map<std::string, Tensor> &inputs) {
  Node n{proto, opset, inputs};
  if (is_optimizer_op(proto))
    return optimizer(ctx, n);
  if (!proto.domain().empty() && proto.domain() != "ai.onnx")
    return {};
  for (int k = 0; k < n.n_in(); ++k)
    if (!proto.input(k).empty() && !n.in(k))
      return skip("input '" + proto.input(k) + "' missing from the data set");
  const std::string &op = proto.op_type();
  static const std::map<std::string, pipert_unary_op> unary_ops = {
      {"Neg", PIPERT_UNARY_NEG},   {"Relu", PIPERT_UNARY_RELU}, {"Tanh", PIPERT_UNARY_TANH},
      {"Sigmoid", PIPERT_UNARY_SIGMOID}, {"Erf", PIPERT_UNARY_ERF}, {"Sqrt", PIPERT_UNARY_SQRT},
      {"Exp", PIPERT_UNARY_EXP},   {"Sin", PIPERT_UNARY_SIN},   {"Cos", PIPERT_UNARY_COS},   {"Log", PIPERT_UNARY_LOG},   {"Identity", PIPERT_UNARY_IDENTITY}};
  static const std::map<std::string, pipert_binary_op> binary_ops = {
      {"Add", PIPERT_BINARY_ADD}, {"Sub", PIPERT_BINARY_SUB}, {"Mul", PIPERT_BINARY_MUL},
      {"Div", PIPERT_BINARY_DIV}, {"Pow", PIPERT_BINARY_POW}};
  if (auto it = unary_ops.find(op); it != unary_ops.end())
    return unary(ctx, n, it->second);
  if (auto it = binary_ops.find(op); it != binary_ops.end())
    return binary(ctx, n, it->second);
  static const std::map<std::string, pipert_activation_op> activations = {
      {"LeakyRelu", PIPERT_ACTIVATION_LEAKY_RELU}, {"Elu", PIPERT_ACTIVATION_ELU},
      {"Selu", PIPERT_ACTIVATION_SELU}, {"Softplus", PIPERT_ACTIVATION_SOFTPLUS},
      {"HardSigmoid", PIPERT_ACTIVATION_HARD_SIGMOID},
      {"HardSwish", PIPERT_ACTIVATION_HARD_SWISH}, {"Sign", PIPERT_ACTIVATION_SIGN},
      {"Floor", PIPERT_ACTIVATION_FLOOR}, {"Ceil", PIPERT_ACTIVATION_CEIL},
      {"Abs", PIPERT_ACTIVATION_ABS}, {"Reciprocal", PIPERT_ACTIVATION_RECIPROCAL}};
  if (auto it = activations.find(op); it != activations.end()) {
    // The dialect's defaults (ONNX's).
    float alpha = 0.f, beta = 0.f;
    if (op == "LeakyRelu") alpha = n.f("alpha", 0.01f);
    if (op == "Elu") alpha = n.f("alpha", 1.f);
    if (op == "Selu") alpha = n.f("alpha", 1.67326319217681884765625f),
                      beta = n.f("gamma", 1.05070102214813232421875f);
    if (op == "HardSigmoid") alpha = n.f("alpha", 0.2f), beta = n.f("beta", 0.5f);
    return activation(ctx, n, it->second, alpha, beta);
  }
  if (op == "Gelu")
    return activation(ctx, n,
                      n.s("approximate", "none") == "tanh" ? PIPERT_ACTIVATION_GELU_TANH
                                                           : PIPERT_ACTIVATION_GELU,
                      0.f, 0.f);
  if (op == "Clip") return clip(ctx, n);
  if (op == "Max") return variadic(ctx, n, PIPERT_BINARY_MAX);
  if (op == "Min") return variadic(ctx, n, PIPERT_BINARY_MIN);
  if (op == "Mod") return mod(ctx, n);
  if (op == "Less") return compare(ctx, n, PIPERT_COMPARE_LESS);
  if (op == "LessOrEqual") return compare(ctx, n, PIPERT_COMPARE_LESS_EQUAL);
  if (op == "Greater") return compare(ctx, n, PIPERT_COMPARE_GREATER);
  if (op == "GreaterOrEqual") return compare(ctx, n, PIPERT_COMPARE_GREATER_EQUAL);
  if (op == "And") return logical(ctx, n, PIPERT_LOGICAL_AND);
  if (op == "Or") return logical(ctx, n, PIPERT_LOGICAL_OR);
  if (op == "Not") return logical_not(ctx, n);
  if (op == "Equal") return equal(ctx, n);
  if (op == "Where") return where(ctx, n);
  if (op == "Gemm") return gemm(ctx, n);
  if (op == "MatMul") return matmul(ctx, n);
  if (op == "Softmax") return softmax(ctx, n, false);
  if (op == "LogSoftmax") return softmax(ctx, n, true);
  if (op == "LayerNormalization") return layer_norm(ctx, n);
  if (op == "Conv") return conv(ctx, n);
  if (op == "ConvTranspose") return conv_transpose(ctx, n);
  if (op == "Resize") return resize(ctx, n);
  if (op == "LSTM") return recurrent(ctx, n, true);
  if (op == "GRU") return recurrent(ctx, n, false);
  if (op == "MaxPool") return pool(ctx, n, true);
  if (op == "AveragePool") return pool(ctx, n, false);
  if (op == "GlobalAveragePool") return global_avgpool(ctx, n);
  if (op == "BatchNormalization") return batch_norm(ctx, n);
  if (op == "Transpose") return transpose(ctx, n);
  if (op == "Concat") return concat(ctx, n);
  if (op == "Split") return split(ctx, n);
  if (op == "Slice") return slice(ctx, n);
  if (op == "Gather") return gather(ctx, n);
  if (op == "GatherND") return gather_nd(ctx, n);
  if (op == "GatherElements") return gather_elements(ctx, n);
  if (op == "ScatterElements") return scatter_elements(ctx, n);
  if (op == "ScatterND") return scatter_nd(ctx, n);
  if (op == "Expand") return expand(ctx, n);
  if (op == "Cast") return cast(ctx, n);
  if (op == "ReduceMean") return reduce(ctx, n, PIPERT_REDUCE_MEAN);
  if (op == "ReduceSum") return reduce(ctx, n, PIPERT_REDUCE_SUM);
  if (op == "ReduceMax") return reduce(ctx, n, PIPERT_REDUCE_MAX);
  if (op == "ReduceMin") return reduce(ctx, n, PIPERT_REDUCE_MIN);
  if (op == "ArgMax") return arg_reduce(ctx, n, PIPERT_REDUCE_MAX);
  if (op == "ArgMin") return arg_reduce(ctx, n, PIPERT_REDUCE_MIN);
  if (op == "CumSum") return cumsum(ctx, n);
  if (op == "Tile") return tile(ctx, n);
  if (op == "Pad") return pad(ctx, n);
  if (op == "Trilu") return trilu(ctx, n);
  if (op == "Dropout") return dropout(ctx, n);
  if (op == "SoftmaxCrossEntropyLoss") return loss(ctx, n, true);
  if (op == "NegativeLogLikelihoodLoss") return loss(ctx, n, false);
  return {};
}

} // namespace pipert_test
