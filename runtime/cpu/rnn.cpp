//===- rnn.cpp - ONNX LSTM and GRU and their gradients (CPU) -------------===//
//
// The time loop is runtime/core/rnn_driver.h (shared with CUDA), the cell
// math runtime/core/formulas.h; here the host `Exec`: plain loops and heap
// scratch. The GEMMs are pipert_sgemm (OpenBLAS).
//
//===----------------------------------------------------------------------===//
#include "kernel_util.h"

#include "../core/rnn_driver.h"

namespace pipert::cpu {

struct RnnExec {
  pipert_context *ctx;
  template <typename F> void map(int64_t n, F f) {
    for (int64_t i = 0; i < n; ++i)
      f(i);
  }
  float *alloc(int64_t n) {
    return static_cast<float *>(pipert_alloc(ctx, size_t(n > 0 ? n : 1) * sizeof(float)));
  }
  void release(float *p) { pipert_free(ctx, p); }
};

} // namespace pipert::cpu

namespace pipert {
using RnnBackendExec = cpu::RnnExec;
} // namespace pipert

#include "../core/rnn_entry_points.inc"


