//===- conv_onednn.cpp - convolutions through oneDNN's primitives (CPU) ---===//
//
// oneDNN's direct convolution (jit:avx512_core here; the primitive PyTorch's
// mkldnn_convolution runs on the same Debian libdnnl) for the forward, the
// input gradient and the weight gradient. The tensors stay NCHW / OIHW:
// each call reorders its operands into the layouts the primitive chose
// (nChw16c, OIhw16i16o, ...) and its result back, as PyTorch does. The
// primitives and their reorders are made once per geometry and thread
// count and kept by the thread; calls go through the C API with the
// operands' pointers set on cached memory objects, the reordered copies and
// the primitive's scratchpad in buffers the thread keeps, so a call
// allocates nothing of ours.
//
// Which convolutions (conv.cpp asks use_onednn_conv): measured per layer of
// ResNet-18 at batch 16 against the im2col path (docs/design-notes.md,
// "Convolutions through oneDNN's primitive"). PIPERT_CONV=onednn|im2col
// forces one for every convolution the primitive can take (not depthwise:
// conv.cpp's own plane kernels keep those).
//===----------------------------------------------------------------------===//
#include "conv_onednn.h"

#include "kernel_util.h"

#include <dnnl.hpp>

#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

// oneDNN (Debian's build) runs its threads with OpenMP.
extern "C" int omp_get_max_threads(void);

namespace pipert::cpu {
namespace {

enum class ConvPath { Auto, OneDnn, Im2col };

ConvPath conv_path() {
  static const ConvPath path = [] {
    const char *env = std::getenv("PIPERT_CONV");
    if (!env || !*env || !std::strcmp(env, "auto"))
      return ConvPath::Auto;
    if (!std::strcmp(env, "onednn"))
      return ConvPath::OneDnn;
    if (!std::strcmp(env, "im2col"))
      return ConvPath::Im2col;
    pipert_fail("PIPERT_CONV=%s: expected onednn, im2col or auto (the default: oneDNN's "
                "primitive for planes of 16 outputs and more, im2col below)",
                env);
  }();
  return path;
}

// A buffer the thread keeps per slot, grown on demand, 64-byte aligned.
void *buffer(int slot, size_t bytes) {
  thread_local std::array<std::vector<char>, 4> bufs;
  std::vector<char> &b = bufs[size_t(slot)];
  if (b.size() < bytes + 64)
    b.resize(bytes + 64);
  const uintptr_t p = reinterpret_cast<uintptr_t>(b.data());
  return reinterpret_cast<void *>((p + 63) & ~uintptr_t(63));
}

const dnnl::engine &engine() {
  static const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

dnnl::stream &stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// A memory object with no buffer of its own: its pointer set per call.
dnnl::memory handle(const dnnl::memory::desc &md) {
  return dnnl::memory(md, engine(), DNNL_MEMORY_NONE);
}

void check(dnnl_status_t st, const char *what) {
  if (st != dnnl_success)
    pipert_fail("%s: oneDNN's convolution failed (status %d); PIPERT_CONV=im2col avoids it",
                what, int(st));
}

void set(const dnnl::memory &m, const void *p) {
  check(dnnl_memory_set_data_handle(m.get(), const_cast<void *>(p)), "convolution");
}

// One operand: the caller's NCHW/OIHW memory and, where the primitive wants
// another layout, its own plus the reorder between them.
struct Operand {
  dnnl::memory user, prim;
  dnnl::primitive reorder;
  bool reordered = false;
  size_t bytes = 0;
  int slot = 0;

  // into: user -> prim (an input); otherwise prim -> user (a result).
  void init(const dnnl::memory::desc &user_md, const dnnl::memory::desc &prim_md, bool into,
            int buffer_slot) {
    user = handle(user_md);
    reordered = user_md != prim_md;
    slot = buffer_slot;
    if (!reordered)
      return;
    prim = handle(prim_md);
    bytes = prim_md.get_size();
    reorder = into ? dnnl::reorder(dnnl::reorder::primitive_desc(engine(), user_md, engine(),
                                                                 prim_md))
                   : dnnl::reorder(dnnl::reorder::primitive_desc(engine(), prim_md, engine(),
                                                                 user_md));
  }
  // Points the operand at the caller's tensor; returns the memory the
  // primitive reads or writes.
  dnnl_memory_t bind(const void *p) {
    set(user, p);
    if (!reordered)
      return user.get();
    set(prim, buffer(slot, bytes));
    return prim.get();
  }
  void run_reorder(bool into, const char *what) {
    if (!reordered)
      return;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, into ? user.get() : prim.get()},
                               {DNNL_ARG_TO, into ? prim.get() : user.get()}};
    check(dnnl_primitive_execute(reorder.get(), stream().get(), 2, args), what);
  }
};

enum Kind { Forward, BackwardData, BackwardWeights };

struct Entry {
  dnnl::primitive prim;
  Operand a, b, c; // forward: src, weights, dst; data: diff_dst, weights,
                   // diff_src; weights: src, diff_dst, diff_weights
  dnnl::memory bias, scratch;
  size_t scratch_bytes = 0;
  bool ok = false;
};

struct Dims {
  dnnl::memory::dims src, wei, dst, strides, dil, pad_l, pad_r;
  tag wtag;
};

Dims dims_of(const ConvGeom &g) {
  Dims d;
  d.src = {g.n, g.c, g.h, g.w};
  d.dst = {g.n, g.m, g.oh, g.ow};
  if (g.group == 1) {
    d.wei = {g.m, g.cg, g.kh, g.kw};
    d.wtag = tag::oihw;
  } else {
    d.wei = {g.group, g.mg, g.cg, g.kh, g.kw};
    d.wtag = tag::goihw;
  }
  d.strides = {g.sh, g.sw};
  d.dil = {g.dh - 1, g.dw - 1};
  d.pad_l = {g.pt, g.pl};
  d.pad_r = {g.pb, g.pr};
  return d;
}

dnnl::memory::desc any(const dnnl::memory::dims &d) { return {d, dt::f32, tag::any}; }

dnnl::convolution_forward::primitive_desc forward_pd(const ConvGeom &g, bool bias) {
  const Dims d = dims_of(g);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto alg = dnnl::algorithm::convolution_direct;
  const auto prop = dnnl::prop_kind::forward_training;
  if (bias)
    return {dnnl::convolution_forward::desc(prop, alg, any(d.src), any(d.wei),
                                            {{g.m}, dt::f32, tag::x}, any(d.dst), d.strides,
                                            d.dil, d.pad_l, d.pad_r),
            attr, engine()};
  return {dnnl::convolution_forward::desc(prop, alg, any(d.src), any(d.wei), any(d.dst),
                                          d.strides, d.dil, d.pad_l, d.pad_r),
          attr, engine()};
}

void build(Entry &e, const ConvGeom &g, Kind kind, bool bias);

// The thread's entry for this geometry, made on first use; null where
// oneDNN refuses it (the caller then takes im2col; with PIPERT_CONV=onednn
// it is an error naming the op).
Entry *entry(const ConvGeom &g, Kind kind, bool bias, const char *what) {
  using Key = std::array<int64_t, 21>;
  thread_local std::map<Key, std::unique_ptr<Entry>> cache;
  const Key key = {g.n,  g.c,  g.h,  g.w,  g.m,  g.cg, g.kh,      g.kw, g.pt, g.pl, g.pb,
                   g.pr, g.sh, g.sw, g.dh, g.dw, g.group, int64_t(kind), bias,
                   omp_get_max_threads(), 0};
  std::unique_ptr<Entry> &slot = cache[key];
  if (!slot) {
    slot = std::make_unique<Entry>();
    try {
      build(*slot, g, kind, bias);
      slot->ok = true;
    } catch (const dnnl::error &err) {
      if (conv_path() == ConvPath::OneDnn)
        pipert_fail("%s: oneDNN's convolution primitive refused this geometry (%s, status "
                    "%d); PIPERT_CONV=im2col or auto avoids it",
                    what, err.message, int(err.status));
      *slot = Entry();
    }
  }
  return slot->ok ? slot.get() : nullptr;
}

void build(Entry &ent, const ConvGeom &g, Kind kind, bool bias) {
  Entry *e = &ent;
  const Dims d = dims_of(g);
  const dnnl::memory::desc src_u(d.src, dt::f32, tag::nchw), dst_u(d.dst, dt::f32, tag::nchw),
      wei_u(d.wei, dt::f32, d.wtag);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto alg = dnnl::algorithm::convolution_direct;
  dnnl::memory::desc scratch_md;
  if (kind == Forward) {
    auto pd = forward_pd(g, bias);
    e->prim = dnnl::convolution_forward(pd);
    e->a.init(src_u, pd.src_desc(), true, 0);
    e->b.init(wei_u, pd.weights_desc(), true, 1);
    e->c.init(dst_u, pd.dst_desc(), false, 2);
    if (bias)
      e->bias = handle(pd.bias_desc());
    scratch_md = pd.scratchpad_desc();
  } else if (kind == BackwardData) {
    auto hint = forward_pd(g, false);
    dnnl::convolution_backward_data::primitive_desc pd(
        dnnl::convolution_backward_data::desc(alg, any(d.src), any(d.wei), any(d.dst), d.strides,
                                              d.dil, d.pad_l, d.pad_r),
        attr, engine(), hint);
    e->prim = dnnl::convolution_backward_data(pd);
    e->a.init(dst_u, pd.diff_dst_desc(), true, 0);
    e->b.init(wei_u, pd.weights_desc(), true, 1);
    e->c.init(src_u, pd.diff_src_desc(), false, 2);
    scratch_md = pd.scratchpad_desc();
  } else {
    auto hint = forward_pd(g, false);
    dnnl::convolution_backward_weights::primitive_desc pd(
        dnnl::convolution_backward_weights::desc(alg, any(d.src), any(d.wei), any(d.dst),
                                                 d.strides, d.dil, d.pad_l, d.pad_r),
        attr, engine(), hint);
    e->prim = dnnl::convolution_backward_weights(pd);
    e->a.init(src_u, pd.src_desc(), true, 0);
    e->b.init(dst_u, pd.diff_dst_desc(), true, 1);
    e->c.init(wei_u, pd.diff_weights_desc(), false, 2);
    scratch_md = pd.scratchpad_desc();
  }
  e->scratch_bytes = scratch_md.get_size();
  e->scratch = handle(scratch_md);
}

// Runs the entry: reorders of the inputs, the primitive, the result's
// reorder back.
void run(Entry &e, int arg_a, const void *a, int arg_b, const void *b, int arg_c, void *c,
         const float *bias, const char *what) {
  dnnl_exec_arg_t args[5];
  int n = 0;
  args[n++] = {arg_a, e.a.bind(a)};
  args[n++] = {arg_b, e.b.bind(b)};
  args[n++] = {arg_c, e.c.bind(c)};
  if (bias) {
    set(e.bias, bias);
    args[n++] = {DNNL_ARG_BIAS, e.bias.get()};
  }
  set(e.scratch, buffer(3, e.scratch_bytes));
  args[n++] = {DNNL_ARG_SCRATCHPAD, e.scratch.get()};
  e.a.run_reorder(true, what);
  e.b.run_reorder(true, what);
  check(dnnl_primitive_execute(e.prim.get(), stream().get(), n, args), what);
  e.c.run_reorder(false, what);
  check(dnnl_stream_wait(stream().get()), what);
}

// The entry of (g, kind) run on the operands; false, with nothing
// computed, where oneDNN refused the geometry.
bool execute(pipert_context *ctx, const ConvGeom &g, Kind kind, const char *what, int arg_a,
             const void *a, int arg_b, const void *b, int arg_c, void *c, const float *bias) {
  blas_threads(ctx);
  Entry *e = entry(g, kind, bias != nullptr, what);
  if (e)
    run(*e, arg_a, a, arg_b, b, arg_c, c, bias, what);
  return e != nullptr;
}

} // namespace

bool use_onednn_conv(const ConvGeom &g) {
  if (g.n == 0 || (g.cg == 1 && g.mg == 1 && !g.pointwise()))
    return false; // nothing to compute; depthwise: conv.cpp's plane kernels
  switch (conv_path()) {
  case ConvPath::OneDnn:
    return true;
  case ConvPath::Im2col:
    return false;
  case ConvPath::Auto:
    break;
  }
  // Planes of fewer than 16 outputs: im2col with several samples a GEMM
  // (ResNet-18's last stage: 4.1 / 13.6 ms here against 2.8 / 8.0 at batch
  // 16). Few channels (the example CNN's 1 -> 8 -> 16): im2col's products
  // are small-kernel ones.
  return g.col_cols() >= 16 && g.c >= 3 && g.m >= 32;
}

bool onednn_conv_forward(pipert_context *ctx, const ConvGeom &g, const float *x, const float *w,
                         const float *b, float *y) {
  return execute(ctx, g, Forward, "Conv", DNNL_ARG_SRC, x, DNNL_ARG_WEIGHTS, w, DNNL_ARG_DST, y,
                 b);
}

bool onednn_conv_backward_data(pipert_context *ctx, const ConvGeom &g, const float *dy,
                               const float *w, float *dx) {
  return execute(ctx, g, BackwardData, "ConvGradInput", DNNL_ARG_DIFF_DST, dy, DNNL_ARG_WEIGHTS,
                 w, DNNL_ARG_DIFF_SRC, dx, nullptr);
}

bool onednn_conv_backward_weights(pipert_context *ctx, const ConvGeom &g, const float *x,
                                  const float *dy, float *dw) {
  return execute(ctx, g, BackwardWeights, "ConvGradWeight", DNNL_ARG_SRC, x, DNNL_ARG_DIFF_DST,
                 dy, DNNL_ARG_DIFF_WEIGHTS, dw, nullptr);
}

} // namespace pipert::cpu
