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


