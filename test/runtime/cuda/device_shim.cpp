//===- device_shim.cpp - kernel calls on host buffers, run on the device ---===//
//
// Each wrapper sizes its tensor arguments from the shapes and attributes (as
// the compiler does), copies them to device buffers, calls the libpipert_cuda
// kernel, and copies the writable ones back. The same host pointer passed
// twice (in place) maps to one device buffer. Deliberately does not include
// device_shim.h: calls here go to the real ABI.
//
//===----------------------------------------------------------------------===//
#include "pipert/pipert_kernels.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace {

int64_t numel(int64_t rank, const int64_t *shape) {
  int64_t n = 1;
  for (int64_t i = 0; i < rank; ++i)
    n *= shape[i];
  return n;
}

// Numpy broadcast of two shapes (the kernels check compatibility).
std::vector<int64_t> bcast(int64_t ra, const int64_t *a, int64_t rb, const int64_t *b) {
  const int64_t r = std::max(ra, rb);
  std::vector<int64_t> out(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) {
    const int64_t da = i < r - ra ? 1 : a[i - (r - ra)];
    const int64_t db = i < r - rb ? 1 : b[i - (r - rb)];
    out[static_cast<size_t>(i)] = da == 1 ? db : da;
  }
  return out;
}
int64_t bcast_numel(int64_t ra, const int64_t *a, int64_t rb, const int64_t *b) {
  auto s = bcast(ra, a, rb, b);
  return numel(int64_t(s.size()), s.data());
}

// Device mirrors of the host buffers of one kernel call.
class Mirror {
public:
  explicit Mirror(pipert_context *ctx) : ctx_(ctx) {}
  Mirror(const Mirror &) = delete;
  Mirror &operator=(const Mirror &) = delete;
  ~Mirror() {
    for (Entry &e : entries_) {
      if (e.writeback && e.bytes)
        pipert_copy_to_host(ctx_, e.host, e.dev, e.bytes);
      pipert_free(ctx_, e.dev);
    }
  }

  // Input: copied in.
  template <typename T> const T *in(const T *host, int64_t count) {
    return static_cast<const T *>(map(const_cast<T *>(host), bytes_of<T>(count), false));
  }
  // Output (or in-out): copied in (so untouched elements keep their values)
  // and back.
  template <typename T> T *out(T *host, int64_t count) {
    return static_cast<T *>(map(host, bytes_of<T>(count), true));
  }
  const void *in_bytes(const void *host, int64_t bytes) {
    return map(const_cast<void *>(host), size_t(std::max<int64_t>(bytes, 0)), false);
  }
  void *out_bytes(void *host, int64_t bytes) {
    return map(host, size_t(std::max<int64_t>(bytes, 0)), true);
  }

private:
  struct Entry {
    void *host;
    void *dev;
    size_t bytes;
    bool writeback;
  };

  template <typename T> static size_t bytes_of(int64_t count) {
    return size_t(std::max<int64_t>(count, 0)) * sizeof(T);
  }

  void *map(void *host, size_t bytes, bool writeback) {
    if (!host)
      return nullptr;
    for (Entry &e : entries_)
      if (e.host == host) {
        if (bytes > e.bytes) {
          pipert_free(ctx_, e.dev);
          e.dev = pipert_alloc(ctx_, bytes);
          pipert_copy_to_device(ctx_, e.dev, host, bytes);
          e.bytes = bytes;
        }
        e.writeback = e.writeback || writeback;
        return e.dev;
      }
    Entry e{host, pipert_alloc(ctx_, bytes), bytes, writeback};
    if (bytes)
      pipert_copy_to_device(ctx_, e.dev, host, bytes);
    entries_.push_back(e);
    return e.dev;
  }

  pipert_context *ctx_;
  std::vector<Entry> entries_;
};

size_t dsize(pipert_dtype t) { return pipert_dtype_size(t); }

// Attention's Q, K, V (or dQ, dK, dV): the floats each spans from its
// pointer by its (batch, head, row) strides; where the host ranges overlap
// (a fused projection's column blocks) one device buffer spans them all, so
// that each writes its own columns of the one buffer.
template <typename T>
void map_attention(Mirror &m, bool out, T *const host[3], const int64_t ext[3], T *dev[3]) {
  bool overlap = false;
  for (int i = 0; i < 3; ++i)
    for (int j = i + 1; j < 3; ++j)
      if (host[i] && host[j] && host[i] < host[j] + ext[j] && host[j] < host[i] + ext[i])
        overlap = true;
  if (!overlap) {
    for (int i = 0; i < 3; ++i)
      dev[i] = out ? m.out(host[i], ext[i]) : const_cast<T *>(m.in(host[i], ext[i]));
    return;
  }
  T *lo = host[0], *hi = host[0] + ext[0];
  for (int i = 1; i < 3; ++i) {
    lo = std::min(lo, host[i]);
    hi = std::max(hi, host[i] + ext[i]);
  }
  T *base = out ? m.out(lo, hi - lo) : const_cast<T *>(m.in(lo, hi - lo));
  for (int i = 0; i < 3; ++i)
    dev[i] = base + (host[i] - lo);
}

void attention_extents(const int64_t *st, int64_t batch, int64_t heads, int64_t kv_heads,
                       int64_t t, int64_t s, int64_t dh, int64_t ext[4]) {
  const int64_t rows[4] = {t, s, s, t}, hs[4] = {heads, kv_heads, kv_heads, heads};
  for (int i = 0; i < 4; ++i)
    ext[i] = batch == 0 ? 0
                        : (batch - 1) * st[3 * i] + (hs[i] - 1) * st[3 * i + 1] +
                              (rows[i] - 1) * st[3 * i + 2] + dh;
}



} // namespace

namespace pipert_cuda_test {

//===------------------------------ elementwise ---------------------------===//

void unary_f32(pipert_context *ctx, pipert_unary_op op, const float *x, int64_t n, float *y) {
  Mirror m(ctx);
  pipert_unary_f32(ctx, op, m.in(x, n), n, m.out(y, n));
}

void binary_f32(pipert_context *ctx, pipert_binary_op op, const float *a, int64_t a_rank,
                const int64_t *a_shape, const float *b, int64_t b_rank, const int64_t *b_shape,
                float *y) {
  Mirror m(ctx);
  const int64_t ny = bcast_numel(a_rank, a_shape, b_rank, b_shape);
  pipert_binary_f32(ctx, op, m.in(a, numel(a_rank, a_shape)), a_rank, a_shape,
                    m.in(b, numel(b_rank, b_shape)), b_rank, b_shape, m.out(y, ny));
}

void binary_i64(pipert_context *ctx, pipert_binary_op op, const int64_t *a, int64_t a_rank,
                const int64_t *a_shape, const int64_t *b, int64_t b_rank, const int64_t *b_shape,
                int64_t *y) {
  Mirror m(ctx);
  const int64_t ny = bcast_numel(a_rank, a_shape, b_rank, b_shape);
  pipert_binary_i64(ctx, op, m.in(a, numel(a_rank, a_shape)), a_rank, a_shape,
                    m.in(b, numel(b_rank, b_shape)), b_rank, b_shape, m.out(y, ny));
}

void equal_f32(pipert_context *ctx, const float *a, int64_t a_rank, const int64_t *a_shape,
               const float *b, int64_t b_rank, const int64_t *b_shape, uint8_t *y) {
  Mirror m(ctx);
  const int64_t ny = bcast_numel(a_rank, a_shape, b_rank, b_shape);
  pipert_equal_f32(ctx, m.in(a, numel(a_rank, a_shape)), a_rank, a_shape,
                   m.in(b, numel(b_rank, b_shape)), b_rank, b_shape, m.out(y, ny));
}

void equal_i64(pipert_context *ctx, const int64_t *a, int64_t a_rank, const int64_t *a_shape,
               const int64_t *b, int64_t b_rank, const int64_t *b_shape, uint8_t *y) {
  Mirror m(ctx);
  const int64_t ny = bcast_numel(a_rank, a_shape, b_rank, b_shape);
  pipert_equal_i64(ctx, m.in(a, numel(a_rank, a_shape)), a_rank, a_shape,
                   m.in(b, numel(b_rank, b_shape)), b_rank, b_shape, m.out(y, ny));
}

void where(pipert_context *ctx, pipert_dtype dtype, const uint8_t *cond, int64_t c_rank,
           const int64_t *c_shape, const void *x, int64_t x_rank, const int64_t *x_shape,
           const void *y, int64_t y_rank, const int64_t *y_shape, void *out) {
  Mirror m(ctx);
  const auto cx = bcast(c_rank, c_shape, x_rank, x_shape);
  const int64_t n = bcast_numel(int64_t(cx.size()), cx.data(), y_rank, y_shape);
  const int64_t es = int64_t(dsize(dtype));
  pipert_where(ctx, dtype, m.in(cond, numel(c_rank, c_shape)), c_rank, c_shape,
               m.in_bytes(x, numel(x_rank, x_shape) * es), x_rank, x_shape,
               m.in_bytes(y, numel(y_rank, y_shape) * es), y_rank, y_shape,
               m.out_bytes(out, n * es));
}

void activation_f32(pipert_context *ctx, pipert_activation_op op, float alpha, float beta,
                    const float *x, int64_t n, float *y) {
  Mirror m(ctx);
  pipert_activation_f32(ctx, op, alpha, beta, m.in(x, n), n, m.out(y, n));
}

void activation_grad_f32(pipert_context *ctx, pipert_activation_op op, float alpha, float beta,
                         const float *x, const float *dy, int64_t n, float *dx) {
  Mirror m(ctx);
  pipert_activation_grad_f32(ctx, op, alpha, beta, m.in(x, n), m.in(dy, n), n, m.out(dx, n));
}

void compare_f32(pipert_context *ctx, pipert_compare_op op, const float *a, int64_t a_rank,
                 const int64_t *a_shape, const float *b, int64_t b_rank, const int64_t *b_shape,
                 uint8_t *y) {
  Mirror m(ctx);
  const int64_t ny = bcast_numel(a_rank, a_shape, b_rank, b_shape);
  pipert_compare_f32(ctx, op, m.in(a, numel(a_rank, a_shape)), a_rank, a_shape,
                     m.in(b, numel(b_rank, b_shape)), b_rank, b_shape, m.out(y, ny));
}

void compare_i64(pipert_context *ctx, pipert_compare_op op, const int64_t *a, int64_t a_rank,
                 const int64_t *a_shape, const int64_t *b, int64_t b_rank, const int64_t *b_shape,
                 uint8_t *y) {
  Mirror m(ctx);
  const int64_t ny = bcast_numel(a_rank, a_shape, b_rank, b_shape);
  pipert_compare_i64(ctx, op, m.in(a, numel(a_rank, a_shape)), a_rank, a_shape,
                     m.in(b, numel(b_rank, b_shape)), b_rank, b_shape, m.out(y, ny));
}

void logical(pipert_context *ctx, pipert_logical_op op, const uint8_t *a, int64_t a_rank,
             const int64_t *a_shape, const uint8_t *b, int64_t b_rank, const int64_t *b_shape,
             uint8_t *y) {
  Mirror m(ctx);
  const int64_t ny = bcast_numel(a_rank, a_shape, b_rank, b_shape);
  pipert_logical(ctx, op, m.in(a, numel(a_rank, a_shape)), a_rank, a_shape,
                 m.in(b, numel(b_rank, b_shape)), b_rank, b_shape, m.out(y, ny));
}

// pipert_not (`not` is a C++ alternative token, hence the name).
void not_u8(pipert_context *ctx, const uint8_t *x, int64_t n, uint8_t *y) {
  Mirror m(ctx);
  pipert_not(ctx, m.in(x, n), n, m.out(y, n));
}

#define PIPERT_SHIM_ACT_GRAD(name)                                                               \
  void name(pipert_context *ctx, const float *x, const float *dy, int64_t n, float *dx) {        \
    Mirror m(ctx);                                                                               \
    pipert_##name(ctx, m.in(x, n), m.in(dy, n), n, m.out(dx, n));                                \
  }
PIPERT_SHIM_ACT_GRAD(relu_grad_f32)
PIPERT_SHIM_ACT_GRAD(tanh_grad_f32)
PIPERT_SHIM_ACT_GRAD(sigmoid_grad_f32)
PIPERT_SHIM_ACT_GRAD(erf_grad_f32)
#undef PIPERT_SHIM_ACT_GRAD

void reduce_to_shape_f32(pipert_context *ctx, const float *dy, int64_t dy_rank,
                         const int64_t *dy_shape, int64_t x_rank, const int64_t *x_shape,
                         float *dx) {
  Mirror m(ctx);
  pipert_reduce_to_shape_f32(ctx, m.in(dy, numel(dy_rank, dy_shape)), dy_rank, dy_shape, x_rank,
                             x_shape, m.out(dx, numel(x_rank, x_shape)));
}

//===------------------------------ linear algebra ------------------------===//

void sgemm(pipert_context *ctx, int trans_a, int trans_b, int64_t mm, int64_t n, int64_t k,
           float alpha, const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
           float *c, int64_t ldc) {
  Mirror m(ctx);
  const int64_t a_rows = trans_a ? k : mm, b_rows = trans_b ? n : k;
  pipert_sgemm(ctx, trans_a, trans_b, mm, n, k, alpha, m.in(a, a_rows * lda), lda,
               m.in(b, b_rows * ldb), ldb, beta, m.out(c, mm * ldc), ldc);
}

void gemm_f32(pipert_context *ctx, const float *a, const float *b, const float *c, int64_t c_rank,
              const int64_t *c_shape, int64_t mm, int64_t n, int64_t k, int trans_a, int trans_b,
              float alpha, float beta, float *y) {
  Mirror m(ctx);
  pipert_gemm_f32(ctx, m.in(a, mm * k), m.in(b, k * n), m.in(c, numel(c_rank, c_shape)), c_rank,
                  c_shape, mm, n, k, trans_a, trans_b, alpha, beta, m.out(y, mm * n));
}

// Elements of a (batched) matmul result.
int64_t matmul_out(int64_t ra, const int64_t *sa, int trans_a, int64_t rb, const int64_t *sb,
                   int trans_b) {
  const int64_t rows = ra == 1 ? 1 : (trans_a ? sa[ra - 1] : sa[ra - 2]);
  const int64_t cols = rb == 1 ? 1 : (trans_b ? sb[rb - 2] : sb[rb - 1]);
  const int64_t bra = std::max<int64_t>(ra - 2, 0), brb = std::max<int64_t>(rb - 2, 0);
  return bcast_numel(bra, sa, brb, sb) * rows * cols;
}

void matmul_f32(pipert_context *ctx, const float *a, int64_t a_rank, const int64_t *a_shape,
                const float *b, int64_t b_rank, const int64_t *b_shape, float *y) {
  Mirror m(ctx);
  pipert_matmul_f32(ctx, m.in(a, numel(a_rank, a_shape)), a_rank, a_shape,
                    m.in(b, numel(b_rank, b_shape)), b_rank, b_shape,
                    m.out(y, matmul_out(a_rank, a_shape, 0, b_rank, b_shape, 0)));
}

void matmul_t_f32(pipert_context *ctx, const float *a, int64_t a_rank, const int64_t *a_shape,
                  int trans_a, const float *b, int64_t b_rank, const int64_t *b_shape, int trans_b,
                  float *y) {
  Mirror m(ctx);
  pipert_matmul_t_f32(ctx, m.in(a, numel(a_rank, a_shape)), a_rank, a_shape, trans_a,
                      m.in(b, numel(b_rank, b_shape)), b_rank, b_shape, trans_b,
                      m.out(y, matmul_out(a_rank, a_shape, trans_a, b_rank, b_shape, trans_b)));
}

// Q, K, V of an attention call on the device, and every operand's extent.
void attention_inputs(Mirror &m, const float *q, const float *k, const float *v,
                      const int64_t *strides, int64_t batch, int64_t heads, int64_t kv_heads,
                      int64_t t, int64_t s, int64_t dh, int64_t ext[4], float *dev[3]) {
  attention_extents(strides, batch, heads, kv_heads, t, s, dh, ext);
  float *host[3] = {const_cast<float *>(q), const_cast<float *>(k), const_cast<float *>(v)};
  map_attention(m, false, host, ext, dev);
}

//===------------------------------ attention -----------------------------===//

void attention_f32(pipert_context *ctx, const float *q, const float *k, const float *v,
                   const int64_t *strides, int64_t batch, int64_t heads, int64_t kv_heads,
                   int64_t t, int64_t s, int64_t dh, float scale, int32_t causal, float dropout,
                   const uint8_t *mask,
                   const float *bias, const int64_t *mask_strides, float *y, float *probs) {
  Mirror m(ctx);
  int64_t ext[4];
  float *dev[3];
  attention_inputs(m, q, k, v, strides, batch, heads, kv_heads, t, s, dh, ext, dev);
  // The mask's extent: its last (batch, head, row) element's row end.
  const int64_t mask_ext =
      mask_strides ? (batch - 1) * mask_strides[0] + (heads - 1) * mask_strides[1] +
                         (t - 1) * mask_strides[2] + s
                   : t * s;
  pipert_attention_f32(ctx, dev[0], dev[1], dev[2], strides, batch, heads, kv_heads, t, s, dh,
                       scale,
                       causal, dropout, m.in(mask, mask_ext), m.in(bias, mask_ext), mask_strides,
                       m.out(y, ext[3]),
                       m.out(probs, batch * heads * t * s));
}

void attention_grad_f32(pipert_context *ctx, const float *q, const float *k, const float *v,
                        const int64_t *strides, int64_t batch, int64_t heads,
                        int64_t kv_heads, int64_t t, int64_t s, int64_t dh, float scale,
                        int32_t causal, float dropout, const float *probs, const float *dy,
                        float *dq, float *dk, float *dv) {
  Mirror m(ctx);
  int64_t ext[4];
  float *dev[3];
  attention_inputs(m, q, k, v, strides, batch, heads, kv_heads, t, s, dh, ext, dev);
  float *ghost[3] = {dq, dk, dv}, *gdev[3];
  map_attention(m, true, ghost, ext, gdev);
  pipert_attention_grad_f32(ctx, dev[0], dev[1], dev[2], strides, batch, heads, kv_heads, t, s,
                            dh, scale,
                            causal, dropout, m.in(probs, batch * heads * t * s), m.in(dy, ext[3]), gdev[0],
                            gdev[1], gdev[2]);
}

//===------------------------------ normalisation -------------------------===//

#define PIPERT_SHIM_SOFTMAX(name)                                                                \
  void name(pipert_context *ctx, const float *x, int64_t rank, const int64_t *shape,             \
            int64_t axis, float *y) {                                                            \
    Mirror m(ctx);                                                                               \
    const int64_t n = numel(rank, shape);                                                        \
    pipert_##name(ctx, m.in(x, n), rank, shape, axis, m.out(y, n));                              \
  }
PIPERT_SHIM_SOFTMAX(softmax_f32)
PIPERT_SHIM_SOFTMAX(log_softmax_f32)
#undef PIPERT_SHIM_SOFTMAX

#define PIPERT_SHIM_SOFTMAX_GRAD(name)                                                           \
  void name(pipert_context *ctx, const float *y, const float *dy, int64_t rank,                  \
            const int64_t *shape, int64_t axis, float *dx) {                                     \
    Mirror m(ctx);                                                                               \
    const int64_t n = numel(rank, shape);                                                        \
    pipert_##name(ctx, m.in(y, n), m.in(dy, n), rank, shape, axis, m.out(dx, n));                \
  }
PIPERT_SHIM_SOFTMAX_GRAD(softmax_grad_f32)
PIPERT_SHIM_SOFTMAX_GRAD(log_softmax_grad_f32)
#undef PIPERT_SHIM_SOFTMAX_GRAD

// rows = prod(shape[:axis]), cols = prod(shape[axis:]).
void ln_split(int64_t rank, const int64_t *shape, int64_t axis, int64_t &rows, int64_t &cols) {
  const int64_t ax = std::clamp<int64_t>(axis < 0 ? axis + rank : axis, 0, rank);
  rows = numel(ax, shape);
  cols = numel(rank - ax, shape + ax);
}

void layer_norm_f32(pipert_context *ctx, const float *x, int64_t rank, const int64_t *shape,
                    int64_t axis, float epsilon, const float *scale, const float *bias, float *y,
                    float *mean, float *inv_std_dev) {
  Mirror m(ctx);
  int64_t rows, cols;
  ln_split(rank, shape, axis, rows, cols);
  const int64_t n = numel(rank, shape);
  pipert_layer_norm_f32(ctx, m.in(x, n), rank, shape, axis, epsilon, m.in(scale, cols),
                        m.in(bias, cols), m.out(y, n), m.out(mean, rows),
                        m.out(inv_std_dev, rows));
}

void layer_norm_grad_f32(pipert_context *ctx, const float *x, int64_t rank, const int64_t *shape,
                         int64_t axis, const float *scale, const float *mean,
                         const float *inv_std_dev, const float *dy, float *dx, float *dscale,
                         float *dbias, int accumulate) {
  Mirror m(ctx);
  int64_t rows, cols;
  ln_split(rank, shape, axis, rows, cols);
  const int64_t n = numel(rank, shape);
  pipert_layer_norm_grad_f32(ctx, m.in(x, n), rank, shape, axis, m.in(scale, cols),
                             m.in(mean, rows), m.in(inv_std_dev, rows), m.in(dy, n),
                             m.out(dx, n), m.out(dscale, cols), m.out(dbias, cols), accumulate);
}

int64_t channels(int64_t rank, const int64_t *shape) { return rank >= 2 ? shape[1] : 0; }

void batch_norm_inference_f32(pipert_context *ctx, const float *x, int64_t rank,
                              const int64_t *shape, const float *scale, const float *bias,
                              const float *mean, const float *var, float epsilon, float *y) {
  Mirror m(ctx);
  const int64_t n = numel(rank, shape), c = channels(rank, shape);
  pipert_batch_norm_inference_f32(ctx, m.in(x, n), rank, shape, m.in(scale, c), m.in(bias, c),
                                  m.in(mean, c), m.in(var, c), epsilon, m.out(y, n));
}

void batch_norm_training_f32(pipert_context *ctx, const float *x, int64_t rank,
                             const int64_t *shape, const float *scale, const float *bias,
                             const float *mean, const float *var, float epsilon, float momentum,
                             float *y, float *running_mean, float *running_var, float *saved_mean,
                             float *saved_inv_std) {
  Mirror m(ctx);
  const int64_t n = numel(rank, shape), c = channels(rank, shape);
  pipert_batch_norm_training_f32(ctx, m.in(x, n), rank, shape, m.in(scale, c), m.in(bias, c),
                                 m.in(mean, c), m.in(var, c), epsilon, momentum, m.out(y, n),
                                 m.out(running_mean, c), m.out(running_var, c),
                                 m.out(saved_mean, c), m.out(saved_inv_std, c));
}

void batch_norm_grad_f32(pipert_context *ctx, const float *x, int64_t rank, const int64_t *shape,
                         const float *scale, float epsilon, const float *dy, float *dx,
                         float *dscale, float *dbias, int accumulate) {
  Mirror m(ctx);
  const int64_t n = numel(rank, shape), c = channels(rank, shape);
  pipert_batch_norm_grad_f32(ctx, m.in(x, n), rank, shape, m.in(scale, c), epsilon, m.in(dy, n),
                             m.out(dx, n), m.out(dscale, c), m.out(dbias, c), accumulate);
}

//===------------------------------ convolution and pooling ---------------===//

int64_t conv_out(const int64_t x[4], const int64_t w[4], const int64_t pads[4],
                 const int64_t strides[2], const int64_t dil[2]) {
  const int64_t oh = (x[2] + pads[0] + pads[2] - (dil[0] * (w[2] - 1) + 1)) / strides[0] + 1;
  const int64_t ow = (x[3] + pads[1] + pads[3] - (dil[1] * (w[3] - 1) + 1)) / strides[1] + 1;
  return x[0] * w[0] * std::max<int64_t>(oh, 0) * std::max<int64_t>(ow, 0);
}

void conv2d_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4], const float *w,
                const int64_t w_shape[4], const float *b, const int64_t pads[4],
                const int64_t strides[2], const int64_t dilations[2], int64_t group, float *y) {
  Mirror m(ctx);
  pipert_conv2d_f32(ctx, m.in(x, numel(4, x_shape)), x_shape, m.in(w, numel(4, w_shape)), w_shape,
                    m.in(b, w_shape[0]), pads, strides, dilations, group,
                    m.out(y, conv_out(x_shape, w_shape, pads, strides, dilations)));
}

void conv2d_grad_input_f32(pipert_context *ctx, const float *dy, const float *w,
                           const int64_t w_shape[4], const int64_t x_shape[4],
                           const int64_t pads[4], const int64_t strides[2],
                           const int64_t dilations[2], int64_t group, float *dx) {
  Mirror m(ctx);
  pipert_conv2d_grad_input_f32(
      ctx, m.in(dy, conv_out(x_shape, w_shape, pads, strides, dilations)),
      m.in(w, numel(4, w_shape)), w_shape, x_shape, pads, strides, dilations, group,
      m.out(dx, numel(4, x_shape)));
}

// Resize's scales and roi are attribute arrays: they stay on the host.
void resize_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                const int64_t y_shape[4], const float *scales, const float *roi,
                pipert_resize_mode mode, pipert_resize_coord coord, pipert_resize_nearest nearest,
                float cubic_coeff_a, int exclude_outside, float extrapolation_value, float *y) {
  Mirror m(ctx);
  pipert_resize_f32(ctx, m.in(x, numel(4, x_shape)), x_shape, y_shape, scales, roi, mode, coord,
                    nearest, cubic_coeff_a, exclude_outside, extrapolation_value,
                    m.out(y, numel(4, y_shape)));
}

void resize_grad_f32(pipert_context *ctx, const float *dy, const int64_t x_shape[4],
                     const int64_t y_shape[4], const float *scales, const float *roi,
                     pipert_resize_mode mode, pipert_resize_coord coord,
                     pipert_resize_nearest nearest, float cubic_coeff_a, int exclude_outside,
                     float *dx) {
  Mirror m(ctx);
  pipert_resize_grad_f32(ctx, m.in(dy, numel(4, y_shape)), x_shape, y_shape, scales, roi, mode,
                         coord, nearest, cubic_coeff_a, exclude_outside,
                         m.out(dx, numel(4, x_shape)));
}

void conv2d_grad_weight_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                            const float *dy, const int64_t w_shape[4], const int64_t pads[4],
                            const int64_t strides[2], const int64_t dilations[2], int64_t group,
                            float *dw, int accumulate) {
  Mirror m(ctx);
  pipert_conv2d_grad_weight_f32(
      ctx, m.in(x, numel(4, x_shape)), x_shape,
      m.in(dy, conv_out(x_shape, w_shape, pads, strides, dilations)), w_shape, pads, strides,
      dilations, group, m.out(dw, numel(4, w_shape)), accumulate);
}

void conv2d_grad_bias_f32(pipert_context *ctx, const float *dy, const int64_t dy_shape[4],
                          float *db, int accumulate) {
  Mirror m(ctx);
  pipert_conv2d_grad_bias_f32(ctx, m.in(dy, numel(4, dy_shape)), dy_shape,
                              m.out(db, dy_shape[1]), accumulate);
}

int64_t pool_out(const int64_t x[4], const int64_t k[2], const int64_t pads[4],
                 const int64_t strides[2], const int64_t *dil, int ceil_mode) {
  const int64_t oh = pipert_pool_output_dim(x[2], k[0], pads[0], pads[2], strides[0],
                                            dil ? dil[0] : 1, ceil_mode);
  const int64_t ow = pipert_pool_output_dim(x[3], k[1], pads[1], pads[3], strides[1],
                                            dil ? dil[1] : 1, ceil_mode);
  return x[0] * x[1] * std::max<int64_t>(oh, 0) * std::max<int64_t>(ow, 0);
}

void maxpool2d_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                   const int64_t kernel[2], const int64_t pads[4], const int64_t strides[2],
                   const int64_t dilations[2], int ceil_mode, float *y, int64_t *indices) {
  Mirror m(ctx);
  const int64_t ny = pool_out(x_shape, kernel, pads, strides, dilations, ceil_mode);
  pipert_maxpool2d_f32(ctx, m.in(x, numel(4, x_shape)), x_shape, kernel, pads, strides, dilations,
                       ceil_mode, m.out(y, ny), m.out(indices, ny));
}

void maxpool2d_grad_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                        const float *dy, const int64_t kernel[2], const int64_t pads[4],
                        const int64_t strides[2], const int64_t dilations[2], int ceil_mode,
                        float *dx) {
  Mirror m(ctx);
  const int64_t ny = pool_out(x_shape, kernel, pads, strides, dilations, ceil_mode);
  pipert_maxpool2d_grad_f32(ctx, m.in(x, numel(4, x_shape)), x_shape, m.in(dy, ny), kernel, pads,
                            strides, dilations, ceil_mode, m.out(dx, numel(4, x_shape)));
}

void avgpool2d_f32(pipert_context *ctx, const float *x, const int64_t x_shape[4],
                   const int64_t kernel[2], const int64_t pads[4], const int64_t strides[2],
                   int ceil_mode, int count_include_pad, float *y) {
  Mirror m(ctx);
  const int64_t ny = pool_out(x_shape, kernel, pads, strides, nullptr, ceil_mode);
  pipert_avgpool2d_f32(ctx, m.in(x, numel(4, x_shape)), x_shape, kernel, pads, strides, ceil_mode,
                       count_include_pad, m.out(y, ny));
}

void avgpool2d_grad_f32(pipert_context *ctx, const float *dy, const int64_t x_shape[4],
                        const int64_t kernel[2], const int64_t pads[4], const int64_t strides[2],
                        int ceil_mode, int count_include_pad, float *dx) {
  Mirror m(ctx);
  const int64_t ny = pool_out(x_shape, kernel, pads, strides, nullptr, ceil_mode);
  pipert_avgpool2d_grad_f32(ctx, m.in(dy, ny), x_shape, kernel, pads, strides, ceil_mode,
                            count_include_pad, m.out(dx, numel(4, x_shape)));
}

void global_avgpool_f32(pipert_context *ctx, const float *x, int64_t rank, const int64_t *shape,
                        float *y) {
  Mirror m(ctx);
  pipert_global_avgpool_f32(ctx, m.in(x, numel(rank, shape)), rank, shape,
                            m.out(y, rank >= 2 ? shape[0] * shape[1] : 0));
}

void global_avgpool_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                             const int64_t *x_shape, float *dx) {
  Mirror m(ctx);
  pipert_global_avgpool_grad_f32(ctx, m.in(dy, rank >= 2 ? x_shape[0] * x_shape[1] : 0), rank,
                                 x_shape, m.out(dx, numel(rank, x_shape)));
}

//===------------------------------ data movement -------------------------===//

void transpose(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank,
               const int64_t *shape, const int64_t *perm, void *y) {
  Mirror m(ctx);
  const int64_t bytes = numel(rank, shape) * int64_t(dsize(dtype));
  pipert_transpose(ctx, dtype, m.in_bytes(x, bytes), rank, shape, perm, m.out_bytes(y, bytes));
}

// Elements of a tensor of y_shape with extent `extent` on `axis`.
int64_t with_extent(int64_t rank, const int64_t *shape, int64_t axis, int64_t extent) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  int64_t n = extent;
  for (int64_t i = 0; i < rank; ++i)
    if (i != a)
      n *= shape[i];
  return n;
}

void concat(pipert_context *ctx, pipert_dtype dtype, int64_t n, const void *const *xs,
            const int64_t *axis_sizes, int64_t rank, const int64_t *y_shape, int64_t axis,
            void *y) {
  Mirror m(ctx);
  const int64_t es = int64_t(dsize(dtype));
  std::vector<const void *> dxs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    dxs[size_t(i)] = m.in_bytes(xs[i], with_extent(rank, y_shape, axis, axis_sizes[i]) * es);
  pipert_concat(ctx, dtype, n, dxs.data(), axis_sizes, rank, y_shape, axis,
                m.out_bytes(y, numel(rank, y_shape) * es));
}

void split(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank,
           const int64_t *shape, int64_t axis, int64_t n, const int64_t *split_sizes,
           void *const *ys) {
  Mirror m(ctx);
  const int64_t es = int64_t(dsize(dtype));
  std::vector<void *> dys(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    dys[size_t(i)] = m.out_bytes(ys[i], with_extent(rank, shape, axis, split_sizes[i]) * es);
  pipert_split(ctx, dtype, m.in_bytes(x, numel(rank, shape) * es), rank, shape, axis, n,
               split_sizes, dys.data());
}

int64_t slice_numel(int64_t rank, const int64_t *shape, int64_t n_axes, const int64_t *starts,
                    const int64_t *ends, const int64_t *axes, const int64_t *steps) {
  std::vector<int64_t> out(static_cast<size_t>(std::max<int64_t>(rank, 1)));
  pipert_slice_shape(rank, shape, n_axes, starts, ends, axes, steps, out.data());
  return numel(rank, out.data());
}

void slice(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank,
           const int64_t *shape, int64_t n_axes, const int64_t *starts, const int64_t *ends,
           const int64_t *axes, const int64_t *steps, void *y) {
  Mirror m(ctx);
  const int64_t es = int64_t(dsize(dtype));
  const int64_t ny = slice_numel(rank, shape, n_axes, starts, ends, axes, steps);
  pipert_slice(ctx, dtype, m.in_bytes(x, numel(rank, shape) * es), rank, shape, n_axes, starts,
               ends, axes, steps, m.out_bytes(y, ny * es));
}

void slice_grad_f32(pipert_context *ctx, const float *dy, int64_t rank, const int64_t *x_shape,
                    int64_t n_axes, const int64_t *starts, const int64_t *ends,
                    const int64_t *axes, const int64_t *steps, float *dx) {
  Mirror m(ctx);
  const int64_t ny = slice_numel(rank, x_shape, n_axes, starts, ends, axes, steps);
  pipert_slice_grad_f32(ctx, m.in(dy, ny), rank, x_shape, n_axes, starts, ends, axes, steps,
                        m.out(dx, numel(rank, x_shape)));
}

int64_t gather_numel(int64_t rank, const int64_t *shape, int64_t idx_rank,
                     const int64_t *idx_shape, int64_t axis) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    return 0; // the kernel reports the bad axis
  return with_extent(rank, shape, a, numel(idx_rank, idx_shape));
}

void gather(pipert_context *ctx, pipert_dtype dtype, const void *data, int64_t rank,
            const int64_t *shape, const int64_t *indices, int64_t idx_rank,
            const int64_t *idx_shape, int64_t axis, void *y) {
  Mirror m(ctx);
  const int64_t es = int64_t(dsize(dtype));
  pipert_gather(ctx, dtype, m.in_bytes(data, numel(rank, shape) * es), rank, shape,
                m.in(indices, numel(idx_rank, idx_shape)), idx_rank, idx_shape, axis,
                m.out_bytes(y, gather_numel(rank, shape, idx_rank, idx_shape, axis) * es));
}

void gather_grad_f32(pipert_context *ctx, const float *dy, int64_t rank, const int64_t *data_shape,
                     const int64_t *indices, int64_t idx_rank, const int64_t *idx_shape,
                     int64_t axis, float *dx) {
  Mirror m(ctx);
  pipert_gather_grad_f32(ctx, m.in(dy, gather_numel(rank, data_shape, idx_rank, idx_shape, axis)),
                         rank, data_shape, m.in(indices, numel(idx_rank, idx_shape)), idx_rank,
                         idx_shape, axis, m.out(dx, numel(rank, data_shape)));
}

void gather_elements(pipert_context *ctx, pipert_dtype dtype, const void *data, int64_t rank,
                     const int64_t *shape, const int64_t *indices, const int64_t *idx_shape,
                     int64_t axis, void *y) {
  Mirror m(ctx);
  const int64_t es = int64_t(dsize(dtype)), n = numel(rank, idx_shape);
  pipert_gather_elements(ctx, dtype, m.in_bytes(data, numel(rank, shape) * es), rank, shape,
                         m.in(indices, n), idx_shape, axis, m.out_bytes(y, n * es));
}

void gather_elements_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                              const int64_t *data_shape, const int64_t *indices,
                              const int64_t *idx_shape, int64_t axis, float *dx) {
  Mirror m(ctx);
  const int64_t n = numel(rank, idx_shape);
  pipert_gather_elements_grad_f32(ctx, m.in(dy, n), rank, data_shape, m.in(indices, n),
                                  idx_shape, axis, m.out(dx, numel(rank, data_shape)));
}

void scatter_elements(pipert_context *ctx, pipert_dtype dtype, const void *data, int64_t rank,
                      const int64_t *shape, const int64_t *indices, const int64_t *idx_shape,
                      const void *updates, int64_t axis, int64_t reduction, void *y) {
  Mirror m(ctx);
  const int64_t es = int64_t(dsize(dtype)), n = numel(rank, idx_shape);
  pipert_scatter_elements(ctx, dtype, m.in_bytes(data, numel(rank, shape) * es), rank, shape,
                          m.in(indices, n), idx_shape, m.in_bytes(updates, n * es), axis,
                          reduction, m.out_bytes(y, numel(rank, shape) * es));
}

void scatter_elements_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                               const int64_t *shape, const int64_t *indices,
                               const int64_t *idx_shape, int64_t axis, float *dx) {
  Mirror m(ctx);
  pipert_scatter_elements_grad_f32(ctx, m.in(dy, numel(rank, shape)), rank, shape,
                                   m.in(indices, numel(rank, idx_shape)), idx_shape, axis,
                                   m.out(dx, numel(rank, shape)));
}

// Elements of GatherND's output and of ScatterND's updates: the tuples
// times the slice after batch_dims + k axes.
int64_t tuple_numel(int64_t rank, const int64_t *shape, int64_t idx_rank,
                    const int64_t *idx_shape, int64_t batch_dims) {
  int64_t n = numel(idx_rank - 1, idx_shape);
  for (int64_t i = batch_dims + idx_shape[idx_rank - 1]; i < rank; ++i)
    n *= shape[i];
  return n;
}

void gather_nd(pipert_context *ctx, pipert_dtype dtype, const void *data, int64_t rank,
               const int64_t *shape, const int64_t *indices, int64_t idx_rank,
               const int64_t *idx_shape, int64_t batch_dims, void *y) {
  Mirror m(ctx);
  const int64_t es = int64_t(dsize(dtype));
  pipert_gather_nd(ctx, dtype, m.in_bytes(data, numel(rank, shape) * es), rank, shape,
                   m.in(indices, numel(idx_rank, idx_shape)), idx_rank, idx_shape, batch_dims,
                   m.out_bytes(y, tuple_numel(rank, shape, idx_rank, idx_shape, batch_dims) * es));
}

void gather_nd_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                        const int64_t *data_shape, const int64_t *indices, int64_t idx_rank,
                        const int64_t *idx_shape, int64_t batch_dims, float *dx) {
  Mirror m(ctx);
  pipert_gather_nd_grad_f32(
      ctx, m.in(dy, tuple_numel(rank, data_shape, idx_rank, idx_shape, batch_dims)), rank,
      data_shape, m.in(indices, numel(idx_rank, idx_shape)), idx_rank, idx_shape, batch_dims,
      m.out(dx, numel(rank, data_shape)));
}

void scatter_nd(pipert_context *ctx, pipert_dtype dtype, const void *data, int64_t rank,
                const int64_t *shape, const int64_t *indices, int64_t idx_rank,
                const int64_t *idx_shape, const void *updates, int64_t reduction, void *y) {
  Mirror m(ctx);
  const int64_t es = int64_t(dsize(dtype));
  pipert_scatter_nd(ctx, dtype, m.in_bytes(data, numel(rank, shape) * es), rank, shape,
                    m.in(indices, numel(idx_rank, idx_shape)), idx_rank, idx_shape,
                    m.in_bytes(updates, tuple_numel(rank, shape, idx_rank, idx_shape, 0) * es),
                    reduction, m.out_bytes(y, numel(rank, shape) * es));
}

void scatter_nd_grad_f32(pipert_context *ctx, const float *dy, int64_t rank,
                         const int64_t *shape, const int64_t *indices, int64_t idx_rank,
                         const int64_t *idx_shape, float *dx) {
  Mirror m(ctx);
  pipert_scatter_nd_grad_f32(ctx, m.in(dy, numel(rank, shape)), rank, shape,
                             m.in(indices, numel(idx_rank, idx_shape)), idx_rank, idx_shape,
                             m.out(dx, numel(rank, shape)));
}

void expand(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t x_rank,
            const int64_t *x_shape, int64_t y_rank, const int64_t *y_shape, void *y) {
  Mirror m(ctx);
  const int64_t es = int64_t(dsize(dtype));
  pipert_expand(ctx, dtype, m.in_bytes(x, numel(x_rank, x_shape) * es), x_rank, x_shape, y_rank,
                y_shape, m.out_bytes(y, numel(y_rank, y_shape) * es));
}

// Tile's repeats and Pad's pads are attribute arrays: they stay on the host
// (the CUDA kernels read them there to set up the index geometry).
int64_t tile_numel(int64_t rank, const int64_t *shape, const int64_t *repeats) {
  int64_t n = 1;
  for (int64_t i = 0; i < rank; ++i)
    n *= shape[i] * std::max<int64_t>(repeats[i], 0);
  return n;
}

void tile(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank,
          const int64_t *shape, const int64_t *repeats, void *y) {
  Mirror m(ctx);
  const int64_t es = int64_t(dsize(dtype));
  pipert_tile(ctx, dtype, m.in_bytes(x, numel(rank, shape) * es), rank, shape, repeats,
              m.out_bytes(y, tile_numel(rank, shape, repeats) * es));
}

void tile_grad_f32(pipert_context *ctx, const float *dy, int64_t rank, const int64_t *x_shape,
                   const int64_t *repeats, float *dx) {
  Mirror m(ctx);
  pipert_tile_grad_f32(ctx, m.in(dy, tile_numel(rank, x_shape, repeats)), rank, x_shape, repeats,
                       m.out(dx, numel(rank, x_shape)));
}

// y.shape[i] = shape[i] + begin[i] + end[i] (negative pads crop).
int64_t pad_numel(int64_t rank, const int64_t *shape, const int64_t *pads) {
  int64_t n = 1;
  for (int64_t i = 0; i < rank; ++i)
    n *= std::max<int64_t>(shape[i] + pads[i] + pads[i + rank], 0);
  return n;
}

void pad(pipert_context *ctx, pipert_dtype dtype, pipert_pad_mode mode, const void *x,
         int64_t rank, const int64_t *shape, const int64_t *pads, float value, void *y) {
  Mirror m(ctx);
  const int64_t es = int64_t(dsize(dtype));
  pipert_pad(ctx, dtype, mode, m.in_bytes(x, numel(rank, shape) * es), rank, shape, pads, value,
             m.out_bytes(y, pad_numel(rank, shape, pads) * es));
}

void pad_grad_f32(pipert_context *ctx, pipert_pad_mode mode, const float *dy, int64_t rank,
                  const int64_t *x_shape, const int64_t *pads, float *dx) {
  Mirror m(ctx);
  pipert_pad_grad_f32(ctx, mode, m.in(dy, pad_numel(rank, x_shape, pads)), rank, x_shape, pads,
                      m.out(dx, numel(rank, x_shape)));
}

void trilu(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank,
           const int64_t *shape, int upper, int64_t k, void *y) {
  Mirror m(ctx);
  const int64_t bytes = numel(rank, shape) * int64_t(dsize(dtype));
  pipert_trilu(ctx, dtype, m.in_bytes(x, bytes), rank, shape, upper, k, m.out_bytes(y, bytes));
}

void cast(pipert_context *ctx, pipert_dtype from, const void *x, pipert_dtype to, void *y,
          int64_t n) {
  Mirror m(ctx);
  pipert_cast(ctx, from, m.in_bytes(x, n * int64_t(dsize(from))), to,
              m.out_bytes(y, n * int64_t(dsize(to))), n);
}

//===------------------------------ reductions ----------------------------===//

// Elements of the result of a reduction over axes (host array), as in
// pipert_reduce_f32.
int64_t reduce_numel(int64_t rank, const int64_t *shape, int64_t n_axes, const int64_t *axes,
                     int noop_with_empty_axes) {
  if (n_axes <= 0)
    return n_axes == 0 && noop_with_empty_axes ? numel(rank, shape) : 1;
  std::vector<bool> red(static_cast<size_t>(std::max<int64_t>(rank, 0)), false);
  for (int64_t k = 0; k < n_axes; ++k) {
    const int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
    if (a >= 0 && a < rank)
      red[size_t(a)] = true;
  }
  int64_t ny = 1;
  for (int64_t i = 0; i < rank; ++i)
    if (!red[size_t(i)])
      ny *= shape[i];
  return ny;
}

void reduce_f32(pipert_context *ctx, pipert_reduce_op op, const float *x, int64_t rank,
                const int64_t *shape, int64_t n_axes, const int64_t *axes,
                int noop_with_empty_axes, float *y) {
  Mirror m(ctx);
  pipert_reduce_f32(ctx, op, m.in(x, numel(rank, shape)), rank, shape, n_axes, axes,
                    noop_with_empty_axes,
                    m.out(y, reduce_numel(rank, shape, n_axes, axes, noop_with_empty_axes)));
}

void reduce_extremum_grad_f32(pipert_context *ctx, pipert_reduce_op op, const float *x,
                              int64_t rank, const int64_t *shape, int64_t n_axes,
                              const int64_t *axes, int noop_with_empty_axes, const float *dy,
                              float *dx) {
  Mirror m(ctx);
  const int64_t n = numel(rank, shape);
  pipert_reduce_extremum_grad_f32(
      ctx, op, m.in(x, n), rank, shape, n_axes, axes, noop_with_empty_axes,
      m.in(dy, reduce_numel(rank, shape, n_axes, axes, noop_with_empty_axes)), m.out(dx, n));
}

void arg_reduce_f32(pipert_context *ctx, pipert_reduce_op op, const float *x, int64_t rank,
                    const int64_t *shape, int64_t axis, int select_last_index, int64_t *y) {
  Mirror m(ctx);
  const int64_t a = axis < 0 ? axis + rank : axis;
  // x's shape without axis; a bad axis is the kernel's to report.
  const int64_t ny = a >= 0 && a < rank ? with_extent(rank, shape, a, 1) : 0;
  pipert_arg_reduce_f32(ctx, op, m.in(x, numel(rank, shape)), rank, shape, axis,
                        select_last_index, m.out(y, ny));
}

void cumsum(pipert_context *ctx, pipert_dtype dtype, const void *x, int64_t rank,
            const int64_t *shape, int64_t axis, int exclusive, int reverse, void *y) {
  Mirror m(ctx);
  const int64_t bytes = numel(rank, shape) * int64_t(dsize(dtype));
  pipert_cumsum(ctx, dtype, m.in_bytes(x, bytes), rank, shape, axis, exclusive, reverse,
                m.out_bytes(y, bytes));
}

//===------------------------------ dropout -------------------------------===//

void dropout_f32(pipert_context *ctx, const float *x, int64_t n, float ratio, int training,
                 float *y, uint8_t *mask) {
  Mirror m(ctx);
  pipert_dropout_f32(ctx, m.in(x, n), n, ratio, training, m.out(y, n), m.out(mask, n));
}

void dropout_grad_f32(pipert_context *ctx, const float *dy, const uint8_t *mask, int64_t n,
                      float ratio, float *dx) {
  Mirror m(ctx);
  pipert_dropout_grad_f32(ctx, m.in(dy, n), m.in(mask, n), n, ratio, m.out(dx, n));
}

//===------------------------------ losses --------------------------------===//

// Entries (N * d...) and classes of a (N, C, d...) loss input.
void loss_sizes(int64_t rank, const int64_t *shape, int64_t &entries, int64_t &classes) {
  entries = rank >= 2 ? shape[0] * numel(rank - 2, shape + 2) : 0;
  classes = rank >= 2 ? shape[1] : 0;
}

void softmax_cross_entropy_loss_f32(pipert_context *ctx, const float *scores, int64_t rank,
                                    const int64_t *shape, const int64_t *labels,
                                    const float *weights, int has_ignore_index,
                                    int64_t ignore_index, pipert_reduction reduction, float *loss,
                                    float *log_prob) {
  Mirror m(ctx);
  int64_t e, c;
  loss_sizes(rank, shape, e, c);
  const int64_t n = numel(rank, shape);
  pipert_softmax_cross_entropy_loss_f32(
      ctx, m.in(scores, n), rank, shape, m.in(labels, e), m.in(weights, c), has_ignore_index,
      ignore_index, reduction, m.out(loss, reduction == PIPERT_REDUCTION_NONE ? e : 1),
      m.out(log_prob, n));
}

void softmax_cross_entropy_loss_grad_f32(pipert_context *ctx, const float *dloss,
                                         const float *log_prob, int64_t rank,
                                         const int64_t *shape, const int64_t *labels,
                                         const float *weights, int has_ignore_index,
                                         int64_t ignore_index, pipert_reduction reduction,
                                         float *dscores) {
  Mirror m(ctx);
  int64_t e, c;
  loss_sizes(rank, shape, e, c);
  const int64_t n = numel(rank, shape);
  pipert_softmax_cross_entropy_loss_grad_f32(
      ctx, m.in(dloss, reduction == PIPERT_REDUCTION_NONE ? e : 1), m.in(log_prob, n), rank,
      shape, m.in(labels, e), m.in(weights, c), has_ignore_index, ignore_index, reduction,
      m.out(dscores, n));
}

void nll_loss_f32(pipert_context *ctx, const float *input, int64_t rank, const int64_t *shape,
                  const int64_t *labels, const float *weights, int has_ignore_index,
                  int64_t ignore_index, pipert_reduction reduction, float *loss) {
  Mirror m(ctx);
  int64_t e, c;
  loss_sizes(rank, shape, e, c);
  pipert_nll_loss_f32(ctx, m.in(input, numel(rank, shape)), rank, shape, m.in(labels, e),
                      m.in(weights, c), has_ignore_index, ignore_index, reduction,
                      m.out(loss, reduction == PIPERT_REDUCTION_NONE ? e : 1));
}

void nll_loss_grad_f32(pipert_context *ctx, const float *dloss, int64_t rank,
                       const int64_t *shape, const int64_t *labels, const float *weights,
                       int has_ignore_index, int64_t ignore_index, pipert_reduction reduction,
                       float *dinput) {
  Mirror m(ctx);
  int64_t e, c;
  loss_sizes(rank, shape, e, c);
  pipert_nll_loss_grad_f32(ctx, m.in(dloss, reduction == PIPERT_REDUCTION_NONE ? e : 1), rank,
                           shape, m.in(labels, e), m.in(weights, c), has_ignore_index,
                           ignore_index, reduction, m.out(dinput, numel(rank, shape)));
}

//===------------------------------ recurrent -----------------------------===//

// Element counts of the LSTM (4 gates) / GRU (3 gates) tensors, layout 0.
struct RnnSizes {
  int64_t x, w, r, b, state, y, saved;
  RnnSizes(int64_t T, int64_t B, int64_t I, int64_t H, int32_t direction, int64_t gates) {
    const int64_t D = direction == 2 ? 2 : 1;
    x = T * B * I;
    w = D * gates * H * I;
    r = D * gates * H * H;
    b = D * 2 * gates * H;
    state = D * B * H;
    y = T * D * B * H;
    saved = D * (gates == 4 ? 6 : 5) * T * B * H;
  }
};

void lstm_f32(pipert_context *ctx, const float *x, const float *w, const float *r, const float *b,
              const float *initial_h, const float *initial_c, int64_t seq_length, int64_t batch,
              int64_t input_size, int64_t hidden_size, int32_t direction, float *y, float *y_h,
              float *y_c, float *saved) {
  Mirror m(ctx);
  const RnnSizes z(seq_length, batch, input_size, hidden_size, direction, 4);
  pipert_lstm_f32(ctx, m.in(x, z.x), m.in(w, z.w), m.in(r, z.r), m.in(b, z.b),
                  m.in(initial_h, z.state), m.in(initial_c, z.state), seq_length, batch,
                  input_size, hidden_size, direction, m.out(y, z.y), m.out(y_h, z.state),
                  m.out(y_c, z.state), m.out(saved, z.saved));
}

void lstm_grad_f32(pipert_context *ctx, const float *x, const float *w, const float *r,
                   const float *b, const float *initial_h, const float *initial_c,
                   const float *dy, const float *dy_h, const float *dy_c, const float *saved,
                   int64_t seq_length, int64_t batch, int64_t input_size, int64_t hidden_size, int32_t direction,
                   float *dx, float *dw, float *dr, float *db, float *dinitial_h,
                   float *dinitial_c) {
  Mirror m(ctx);
  const RnnSizes z(seq_length, batch, input_size, hidden_size, direction, 4);
  pipert_lstm_grad_f32(ctx, m.in(x, z.x), m.in(w, z.w), m.in(r, z.r), m.in(b, z.b),
                       m.in(initial_h, z.state), m.in(initial_c, z.state), m.in(dy, z.y),
                       m.in(dy_h, z.state), m.in(dy_c, z.state), m.in(saved, z.saved), seq_length,
                       batch, input_size,
                       hidden_size, direction, m.out(dx, z.x), m.out(dw, z.w), m.out(dr, z.r),
                       m.out(db, z.b), m.out(dinitial_h, z.state), m.out(dinitial_c, z.state));
}

void gru_f32(pipert_context *ctx, const float *x, const float *w, const float *r, const float *b,
             const float *initial_h, int64_t seq_length, int64_t batch, int64_t input_size,
             int64_t hidden_size, int32_t direction, int32_t linear_before_reset, float *y,
             float *y_h, float *saved) {
  Mirror m(ctx);
  const RnnSizes z(seq_length, batch, input_size, hidden_size, direction, 3);
  pipert_gru_f32(ctx, m.in(x, z.x), m.in(w, z.w), m.in(r, z.r), m.in(b, z.b),
                 m.in(initial_h, z.state), seq_length, batch, input_size, hidden_size, direction,
                 linear_before_reset, m.out(y, z.y), m.out(y_h, z.state), m.out(saved, z.saved));
}

void gru_grad_f32(pipert_context *ctx, const float *x, const float *w, const float *r,
                  const float *b, const float *initial_h, const float *dy, const float *dy_h,
                  const float *saved, int64_t seq_length, int64_t batch, int64_t input_size, int64_t hidden_size,
                  int32_t direction, int32_t linear_before_reset, float *dx, float *dw, float *dr,
                  float *db, float *dinitial_h) {
  Mirror m(ctx);
  const RnnSizes z(seq_length, batch, input_size, hidden_size, direction, 3);
  pipert_gru_grad_f32(ctx, m.in(x, z.x), m.in(w, z.w), m.in(r, z.r), m.in(b, z.b),
                      m.in(initial_h, z.state), m.in(dy, z.y), m.in(dy_h, z.state),
                      m.in(saved, z.saved), seq_length,
                      batch, input_size, hidden_size, direction, linear_before_reset,
                      m.out(dx, z.x), m.out(dw, z.w), m.out(dr, z.r), m.out(db, z.b),
                      m.out(dinitial_h, z.state));
}

//===------------------------------ optimizers ----------------------------===//

void sgd_f32(pipert_context *ctx, float lr, float weight_decay, const float *x, const float *g,
             int64_t n, float *x_out) {
  Mirror m(ctx);
  pipert_sgd_f32(ctx, lr, weight_decay, m.in(x, n), m.in(g, n), n, m.out(x_out, n));
}

void momentum_f32(pipert_context *ctx, float lr, int64_t t, float alpha, float beta,
                  float norm_coefficient, int nesterov, const float *x, const float *g,
                  const float *v, int64_t n, float *x_out, float *v_out) {
  Mirror m(ctx);
  pipert_momentum_f32(ctx, lr, t, alpha, beta, norm_coefficient, nesterov, m.in(x, n), m.in(g, n),
                      m.in(v, n), n, m.out(x_out, n), m.out(v_out, n));
}

void adam_f32(pipert_context *ctx, float lr, int64_t t, float alpha, float beta, float epsilon,
              float norm_coefficient, float norm_coefficient_post, const float *x, const float *g,
              const float *v, const float *h, int64_t n, float *x_out, float *v_out,
              float *h_out) {
  Mirror m(ctx);
  pipert_adam_f32(ctx, lr, t, alpha, beta, epsilon, norm_coefficient, norm_coefficient_post,
                  m.in(x, n), m.in(g, n), m.in(v, n), m.in(h, n), n, m.out(x_out, n),
                  m.out(v_out, n), m.out(h_out, n));
}

void adamw_f32(pipert_context *ctx, float lr, int64_t t, float beta1, float beta2, float epsilon,
               float weight_decay, const float *x, const float *g, const float *mm,
               const float *v, int64_t n, float *x_out, float *m_out, float *v_out) {
  Mirror m(ctx);
  pipert_adamw_f32(ctx, lr, t, beta1, beta2, epsilon, weight_decay, m.in(x, n), m.in(g, n),
                   m.in(mm, n), m.in(v, n), n, m.out(x_out, n), m.out(m_out, n),
                   m.out(v_out, n));
}

void adagrad_f32(pipert_context *ctx, float lr, int64_t t, float decay_factor, float epsilon,
                 float norm_coefficient, const float *x, const float *g, const float *h,
                 int64_t n, float *x_out, float *h_out) {
  Mirror m(ctx);
  pipert_adagrad_f32(ctx, lr, t, decay_factor, epsilon, norm_coefficient, m.in(x, n), m.in(g, n),
                     m.in(h, n), n, m.out(x_out, n), m.out(h_out, n));
}

void copy_to_slot(pipert_context *ctx, void *slots, int64_t slot, const void *src,
                  int64_t bytes) {
  Mirror m(ctx);
  pipert_copy_to_slot(ctx, m.out_bytes(slots, (slot + 1) * bytes), slot, m.in_bytes(src, bytes),
                      bytes);
}

void predict_weights_f32(pipert_context *ctx, const float *w, const float *v, float s, float lr,
                         int64_t n, float *w_hat) {
  Mirror m(ctx);
  pipert_predict_weights_f32(ctx, m.in(w, n), m.in(v, n), s, lr, n, m.out(w_hat, n));
}

void predict_adam_f32(pipert_context *ctx, const float *w, const float *mm, const float *v,
                      int64_t t, float beta1, float beta2, float epsilon, float s, float lr,
                      int64_t n, float *w_hat) {
  Mirror m(ctx);
  pipert_predict_adam_f32(ctx, m.in(w, n), m.in(mm, n), m.in(v, n), t, beta1, beta2, epsilon, s,
                          lr, n, m.out(w_hat, n));
}

void easgd_local_f32(pipert_context *ctx, float alpha, const float *center, float *x, float *diff,
                     int64_t n) {
  Mirror m(ctx);
  pipert_easgd_local_f32(ctx, alpha, m.in(center, n), m.out(x, n), m.out(diff, n), n);
}

void easgd_center_f32(pipert_context *ctx, float alpha, const float *diff_sum, float *center,
                      int64_t n) {
  Mirror m(ctx);
  pipert_easgd_center_f32(ctx, alpha, m.in(diff_sum, n), m.out(center, n), n);
}

void clip_grad_norm_f32(pipert_context *ctx, struct pipert_comm *comm, float *const *grads,
                        const int64_t *counts, int32_t n, float grad_scale, float max_norm) {
  Mirror m(ctx);
  std::vector<float *> dev;
  for (int32_t i = 0; i < n; ++i)
    dev.push_back(m.out(grads[i], counts[i]));
  pipert_clip_grad_norm_f32(ctx, comm, n ? dev.data() : nullptr, counts, n, grad_scale,
                            max_norm);
}

void axpy_f32(pipert_context *ctx, float alpha, const float *x, float *y, int64_t n) {
  Mirror m(ctx);
  pipert_axpy_f32(ctx, alpha, m.in(x, n), m.out(y, n), n);
}

void scale_f32(pipert_context *ctx, float alpha, float *x, int64_t n) {
  Mirror m(ctx);
  pipert_scale_f32(ctx, alpha, m.out(x, n), n);
}

void fill_f32(pipert_context *ctx, float value, float *x, int64_t n) {
  Mirror m(ctx);
  pipert_fill_f32(ctx, value, m.out(x, n), n);
}

void accumulate_f32(pipert_context *ctx, const float *x, float *y, int64_t n) {
  Mirror m(ctx);
  pipert_accumulate_f32(ctx, m.in(x, n), m.out(y, n), n);
}

} // namespace pipert_cuda_test
