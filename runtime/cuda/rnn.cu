//===- rnn.cu - ONNX LSTM and GRU and their gradients (CUDA) -------------===//
//
// The time loop is runtime/core/rnn_driver.h (shared with the CPU), the
// cell math runtime/core/formulas.h; here the device `Exec`: one grid-stride
// kernel launch per map, scratch from pipert_alloc (released in stream
// order). The GEMMs are pipert_sgemm (cuBLAS on the context's stream).
//
//===----------------------------------------------------------------------===//
#include "kernels.cuh"

#include "../core/rnn_driver.h"

namespace pipert::cuda {

struct RnnExec {
  pipert_context *ctx;
  template <typename F> void map(int64_t n, F f) { launch_map(ctx, "LSTM/GRU", n, f); }
  template <typename F> void map_rows(int64_t rows, int64_t cols, F f) {
    launch_map(ctx, "LSTM/GRU", rows * cols,
               [=] __device__(int64_t i) { f(i / cols, i % cols, i); });
  }
  // One thread a column, down the rows in double (the host's bits).
  void column_sums(int64_t rows, int64_t cols, const float *src, float *dst) {
    launch_map(ctx, "LSTM/GRU", cols, [=] __device__(int64_t c) {
      double sum = 0;
      for (int64_t r = 0; r < rows; ++r)
        sum += src[r * cols + c];
      dst[c] = float(sum);
    });
  }
  float *alloc(int64_t n) {
    return static_cast<float *>(pipert_alloc(ctx, size_t(n > 0 ? n : 1) * sizeof(float)));
  }
  void release(float *p) { pipert_free(ctx, p); }
};

} // namespace pipert::cuda

namespace pipert {
using RnnBackendExec = cuda::RnnExec;
} // namespace pipert

#include "../core/rnn_entry_points.inc"


